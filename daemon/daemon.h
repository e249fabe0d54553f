/*
 * flightrecd's internal interfaces: the state the daemon keeps (jobs, ranks,
 * communicators, connections, incidents), its configuration and counters,
 * and the functions its modules call on each other.
 *
 * Threads. The libuv loop (main thread) owns all state and is the only
 * thread that changes it; it holds `lock` while doing so. The HTTP server
 * runs in libmicrohttpd's own threads (a pool of several: handlers run
 * concurrently, so they share no unguarded state) and holds `lock` while
 * it reads the state and builds its answer. Dump validation and file writes run on the
 * libuv thread pool with data they own; their results are applied on the
 * loop. Only `last_tick_ns` is read without the lock.
 */
#ifndef FR_DAEMON_H
#define FR_DAEMON_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <jansson.h>
#include <uv.h>

#include "../protocol/auth.h"
#include "../protocol/wire.h"
#include "../dumps/trace.h"
#include "../dumps/correlate.h"
#include "../include/flightrec.h"

#define NS_PER_S 1000000000ull

/* Largest world size the daemon accepts; bounds every per-rank table. */
#define DAEMON_MAX_WORLD (1u << 16)
/* Jobs kept at once; beyond it, a job with no connected rank is forgotten. */
#define DAEMON_MAX_JOBS 1024
/* A job with no connected rank and no incident is forgotten after this long. */
#define DAEMON_JOB_IDLE_NS (600ull * NS_PER_S)
/* Communicators per job (and per rank); COMMs beyond it are ignored. */
#define DAEMON_MAX_COMMS 16384
/* Incident records kept per job; the oldest are forgotten first. */
#define DAEMON_MAX_INCIDENT_RECORDS 256
/* What a connection's read buffer shrinks back to between big frames. */
#define DAEMON_CONN_BUF_MIN 4096
/* A disconnected rank counts as a fault after min(this, heartbeat timeout). */
#define DAEMON_DISCONNECT_GRACE_S 2.0
/* The loop is healthy when it ticked within this long. */
#define DAEMON_HEALTH_MAX_AGE_NS (2ull * 1000000000ull)
#define DAEMON_TICK_MS 100
#define DAEMON_WATCHDOG_MS 100

struct MHD_Daemon;
struct option;
struct conn;
struct incident;
struct look_conn;

/*
 * What the command line and the --config file set. Reloading the file
 * (SIGHUP) changes only the timeouts and the limits; the rest needs a
 * restart.
 */
struct daemon_config {
	const char *config_file;    /* NULL: none */
	struct sockaddr_storage listen_addr;
	struct sockaddr_storage http_addr;
	const char *dump_dir;
	const char *ports_file;     /* NULL: none */
	double timeout_s;           /* an op in flight longer than this is a hang */
	double heartbeat_timeout_s; /* a rank silent longer than this is unresponsive */
	double dump_deadline_s;     /* how long an incident waits for dumps */
	uint64_t max_dump_size;
	uint32_t max_connections;
	uint32_t max_job_connections; /* ranks of one job connected at once */
	uint32_t max_frame_size;      /* largest frame payload, at most FR_WIRE_MAX_PAYLOAD */
	uint32_t max_incidents_per_hour; /* per job, manual ones included */
	double hello_timeout_s;     /* a connection must say HELLO within this long */
	uint32_t max_pending_per_address; /* connections of one address before their HELLO */
	uint64_t max_memory;        /* the memory budget (budget.c) */
	/* --http-allowed-hosts: names the HTTP API answers to besides its
	 * address and localhost (access.c); NULL: none. */
	const char *http_allowed_hosts;
	/* --insecure: listening beyond loopback without a token is allowed. */
	bool insecure;
	/* --token-file: NULL when agents need no proof and manual dumps are refused. */
	const char *token_file;
	struct fr_token token;      /* read from token_file by server_start(), again on SIGHUP (main.c) */
};

/* Monotonic counters exported by /metrics (guarded by the daemon's lock). */
struct daemon_metrics {
	uint64_t frames_received;
	uint64_t frames_rejected;
	uint64_t connections_rejected;
	uint64_t auth_failures;      /* agent connections without a valid proof */
	uint64_t comms_dropped;
	uint64_t incidents;
	uint64_t dumps_received;
	uint64_t dumps_invalid;
	uint64_t dumps_rejected;
	uint64_t incident_write_errors;
	uint64_t job_connections_rejected; /* over --max-job-connections */
	uint64_t frames_oversized;         /* over --max-frame-size */
	uint64_t incidents_suppressed;     /* over --max-incidents-per-hour */
	uint64_t hello_timeouts;           /* closed for no HELLO within --hello-timeout */
	uint64_t pending_rejected;         /* over --max-pending-per-address */
	uint64_t pending_evicted;          /* closed without HELLO for a newer connection */
	uint64_t accept_errors;            /* accept() failed (out of descriptors) */
};

/*
 * An open-addressing index over an array of structs whose first member is
 * their id string: each slot holds an array index + 1, 0 when empty; `cap`
 * is a power of two at least twice the entries, or 0 before the first.
 */
struct id_index {
	uint32_t *slots;
	size_t cap;
};

/* A rank's membership of a communicator and its progress on it. */
struct rank_comm {
	char id[FR_COMM_ID_MAX + 1];
	bool member_known;      /* a COMM frame told us `rank` */
	uint32_t rank;          /* this rank's rank in the communicator */
	uint32_t epoch;         /* the job_comm epoch its COMM was merged into */
	uint64_t last_entered;
	uint64_t last_completed;
};

/*
 * One operation in flight on a rank, as the last PROGRESS frame listed it
 * (its type FR_OP_UNKNOWN when this build does not know it).
 */
struct rank_op {
	struct fr_wire_inflight w;
	/* CLOCK_REALTIME, receive time - age: when a blocking op was entered or
	 * a waited one's wait began; a posted one's entry. */
	uint64_t entered_ns;
};

/*
 * True when the op holds the rank: a blocking one, or a non-blocking one
 * the rank waits on. Only those can time out or wait on a lost rank.
 */
static inline bool rank_op_blocks(const struct rank_op *op)
{
	return !(op->w.flags & FR_WIRE_INFLIGHT_NONBLOCKING) ||
	       (op->w.flags & FR_WIRE_INFLIGHT_WAITED);
}

/* What a person (and /v1/jobs/<job>) calls a rank's state. */
enum rank_state {
	RANK_STATE_CONNECTED,
	RANK_STATE_UNRESPONSIVE,
	RANK_STATE_DISCONNECTED,
	RANK_STATE_FINISHED,
};

/* One rank of a job, created on its first HELLO and kept after it leaves. */
struct job_rank {
	uint32_t rank;
	struct conn *conn;          /* live connection, NULL when none */
	bool finished;              /* said BYE */
	bool disconnected;          /* lost its connection without BYE */
	bool silence_logged;        /* "unresponsive" was logged for this silence */
	bool refusal_logged;        /* a second process claiming it was logged */
	uint64_t last_seen_mono;    /* monotonic ns of its last frame */
	uint64_t disconnected_mono;
	uint32_t pid;
	char host[FR_HOST_MAX + 1];
	char comm_lib[FR_LIBVER_MAX + 1];
	uint32_t ring_capacity;     /* from HELLO */
	uint64_t start_ns;          /* agent start, CLOCK_REALTIME, from HELLO */
	size_t ncomms;
	size_t comms_cap;
	struct rank_comm *comms;
	struct id_index comms_index;
	size_t nops;
	struct rank_op *ops;
};

/*
 * A communicator's member list, shared by reference count: the registry's
 * job_comm holds one reference and every live view that took the list
 * holds another, so that a view costs one reference per communicator, never
 * a copy of its members. Only the loop changes a list, under the daemon's
 * lock, and only while it holds the one reference: a merge that would
 * change a list a view holds changes a copy instead (copy-on-write). Views
 * take references under the lock and drop them wherever they are freed
 * (HTTP threads, without the lock): hence the atomic count.
 *
 * The memory budget (BUDGET_MEMBERS, and the job's half) counts the list
 * the registry holds, from its allocation until the registry lets go of
 * it (the list started afresh, copied on write, or the job forgotten). A
 * list a view still holds after that is no longer counted: it lives only
 * as long as that view, one HTTP request on one of the HTTP threads, a
 * watchdog check on the loop, or an incident's manifest being written, so
 * that at most one uncounted copy per view exists, never one per report.
 */
struct member_list {
	atomic_uint refs;
	uint32_t size;
	uint32_t v[];               /* global ranks; FR_RANK_UNKNOWN where no report knows */
};

/*
 * A communicator as the job knows it: the member lists of its members' COMM
 * frames merged entry by entry (an NCCL rank knows only its own entry).
 * The first report fixes the size, the description and each entry's value;
 * later ones only fill entries still unknown.
 */
struct job_comm {
	char id[FR_COMM_ID_MAX + 1];
	char desc[FR_COMM_DESC_MAX + 1];
	uint32_t size;
	struct member_list *members; /* a reference, NULL until the first report is kept */
	uint32_t nunknown;          /* entries of members still FR_RANK_UNKNOWN */
	/* Bumped when the list starts afresh; a rank_comm of an older epoch
	 * contributed to a list that is gone. */
	uint32_t epoch;
	/* A process that reported this epoch's list was replaced by another
	 * (a new run under the same job id): the next COMM starts afresh. */
	bool stale;
	bool size_conflict_logged;
	bool member_conflict_logged;
};

/* What /v1/jobs/<job>/incidents lists; outlives the incident itself. */
struct incident_record {
	char id[FR_INCIDENT_MAX + 1];
	char reason[16];
	uint64_t opened_ns;
	uint64_t closed_ns;         /* 0 while collecting */
	uint32_t answered;
	uint32_t requested;
	bool incomplete;
	char summary[1024];
};

struct job {
	struct job *next;
	char id[FR_JOB_MAX + 1];
	uint32_t world_size;
	uint32_t nslots;            /* ranks[] entries allocated */
	struct job_rank **ranks;    /* by rank number, NULL until seen */
	uint32_t nknown;
	uint32_t nconnected;
	uint64_t touched_mono;      /* last HELLO; picks the job to forget */
	uint64_t idle_since_mono;   /* when nconnected last became 0 */
	size_t ncomms;
	size_t comms_cap;
	struct job_comm *comms;
	struct id_index comms_index;
	bool comms_dropped_logged;  /* the COMM limit was logged for this job */
	/* Bytes of the memory budget the job holds: its member lists and its
	 * ranks' incident uploads (budget.c). */
	uint64_t mem_bytes;
	size_t nrecords;
	struct incident_record *records; /* oldest first */
	struct incident *active;    /* being collected, at most one */
	/* The stuck state the last incident was about; an incident needs a
	 * different one. Cleared once nothing would open an incident. */
	bool has_last_key;
	uint64_t last_key;
	/* The stuck state whose dumps the ranks were asked to keep locally
	 * because its incident directory could not be made: asked once, not at
	 * every retry. */
	bool has_local_key;
	uint64_t local_key;
	uint64_t recheck_mono;      /* no new verdict before this */
	/* --max-incidents-per-hour as a token bucket: incidents the job may
	 * still open now, refilled continuously up to the limit. */
	bool incident_budget_set;
	double incident_budget;
	uint64_t incident_budget_mono;
	/* The job's key (flightrecd --job-key), made from the token when the
	 * job was created and again when the token changed, so that GET
	 * /v1/jobs with a job key compares keys, one HMAC per job per token at
	 * most (registry_job_key_is()). key_gen 0: none made yet. */
	uint8_t key[FR_WIRE_JOB_KEY_SIZE];
	uint64_t key_gen;
};

/*
 * upload.c: a dump arriving in DUMP_DATA pieces, put back together; the one
 * reassembler of incidents and live looks. Its owner says what a dump may
 * cost (the limit, the charge to the memory budget) and what is done with
 * it once whole.
 */
struct upload {
	bool active;                /* between upload_begin() and its end */
	char id[FR_INCIDENT_MAX + 1]; /* the incident or live look it answers */
	uint8_t *data;              /* grows with the pieces received */
	size_t cap;
	uint64_t total;
	uint64_t received;
	/* Bytes the owner charged to the memory budget for it, which the
	 * owner gives back: upload_reset() does not. */
	uint64_t charged;
};

/* An upload's first buffer; it doubles as pieces arrive. */
#define UPLOAD_MIN_CAP (64u << 10)

enum upload_step {
	UPLOAD_ERROR = -1,          /* `why` says what is wrong; the owner resets it */
	UPLOAD_MORE,
	UPLOAD_COMPLETE,            /* upload_take() hands the bytes over */
};

/*
 * What the owner pays before the buffer grows by `grow` bytes (0 when the
 * piece fits) for a piece of `len` bytes: returns false, with the reason
 * in `why`, to refuse the piece. Whatever it charged it adds to
 * up->charged.
 */
typedef bool upload_charge_fn(void *ctx, struct upload *up, uint64_t grow, uint32_t len,
			      char *why, size_t cap);

/*
 * Starts a reset upload of dump `id`, of `total` bytes, at most `max`
 * (`limit` names that limit in the refusal). Nothing is allocated: the
 * buffer grows as the pieces arrive, never past `total`, so that
 * announcing a large total costs a peer nothing. Returns 0, -EPROTO for an
 * empty dump or -EMSGSIZE, with the reason in `why`.
 */
int upload_begin(struct upload *up, const char *id, uint64_t total, uint64_t max,
		 const char *limit, char *why, size_t cap);
/*
 * Adds piece `m` (its id is the owner's to check), which must follow the
 * bytes received: a gap, an overlap, a changed total, a piece past the end
 * or of a dump never started is an error naming which. `charge` (NULL:
 * none) is called once the piece is found in order, before the buffer
 * grows.
 */
enum upload_step upload_append(struct upload *up, const struct fr_msg_dump_data *m,
			       upload_charge_fn *charge, void *ctx, char *why, size_t cap);
/* Hands a complete dump's bytes (the caller owns them) and resets `up`. */
uint8_t *upload_take(struct upload *up, size_t *len);
/* Frees what `up` holds and makes it ready for upload_begin(). */
void upload_reset(struct upload *up);

/* One agent connection. */
struct conn {
	uv_tcp_t tcp;
	struct flightrecd *d;
	struct conn *prev;
	struct conn *next;
	char peer[INET6_ADDRSTRLEN + 8];
	bool closing;
	/* Closed by the daemon over a refused frame, which its log line told:
	 * the disconnect that follows is not news. */
	bool rejected;
	/* Frame reassembly: bytes received and not consumed yet. */
	uint8_t *buf;
	size_t len;
	size_t cap;
	size_t need;                /* bytes the frame being read needs */
	/* Set by an accepted HELLO; cleared when another connection takes over. */
	bool said_hello;
	struct job *job;
	uint32_t rank;
	/* look.c's state of the live looks asked of this agent; NULL before
	 * the first. Owned by look.c, freed when the connection closes. */
	struct look_conn *live;
};

/* The service manager's notify socket ($NOTIFY_SOCKET), when there is one. */
struct notify {
	bool enabled;
	bool error_logged;          /* a failed send is logged once */
	bool watchdog_started;
	int fd;
	struct sockaddr_un addr;
	socklen_t addrlen;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	uv_timer_t watchdog;        /* WATCHDOG=1 at half of $WATCHDOG_USEC */
};

/* The --config file's settings as arguments; see config_read(). */
struct config_args {
	const char *path;
	int argc;
	char **argv;                /* argv[0] is a program name, then "--key=value", owned */
	unsigned *lines;            /* the line each argv[i] came from */
};

struct flightrecd {
	struct daemon_config cfg;
	/* The settings as configured, before port 0 became a bound port: what
	 * a reload compares the file against. */
	struct daemon_config configured;
	/* The command line, kept to apply over the file again on a reload. */
	int argc;
	char **argv;
	struct config_args file;    /* what cfg's strings from the file point into */
	struct notify notify;
	uv_loop_t *loop;
	uv_tcp_t server;
	uv_timer_t tick_timer;
	uv_timer_t watchdog_timer;
	uv_signal_t sigterm;
	uv_signal_t sigint;
	uv_signal_t sighup;         /* reloads the --config file */
	struct MHD_Daemon *http;
	uint16_t listen_port;
	uint16_t http_port;
	bool stopping;
	atomic_uint_fast64_t last_tick_ns; /* monotonic, written by the loop */
	pthread_mutex_t lock;
	/* Everything below is guarded by `lock`. */
	struct daemon_metrics m;
	struct job *jobs;
	size_t njobs;
	struct conn *conns;
	size_t nconns;
	size_t npending;          /* of those, the ones that have not said HELLO */
	uint64_t incident_seq;
};

/* A communicator of the job as a live view copied it. */
struct live_comm {
	char id[FR_COMM_ID_MAX + 1];
	char desc[FR_COMM_DESC_MAX + 1];
	uint32_t size;
	struct member_list *members; /* a reference; NULL when the job holds none */
};

/* What a live view tells of a rank beyond its trace. */
struct live_rank {
	bool known;                 /* the rank said HELLO once; else nothing below */
	enum rank_state state;
	uint64_t last_seen_mono;
	uint32_t ring_capacity;
	uint64_t start_ns;
};

/*
 * The live view of a job: one trace per rank, as the correlator reads
 * them, and the job's communicators. Each communicator's member list is a
 * reference to the registry's (struct member_list), taken once, here, and
 * borrowed by every rank's trace, so that a view of N ranks costs N traces
 * and one reference per communicator, never a copy of a list. A view is a
 * snapshot: the lists it holds never change (the registry copies a list a
 * view holds before changing it), and it holds no other pointer into the
 * registry, so it may be read and freed without the daemon's lock.
 */
struct live_view {
	size_t n;
	struct fr_trace *traces;
	const struct fr_trace **ptrs;
	struct live_rank *ranks;    /* parallel to traces */
	uint32_t world_size;
	size_t ncomms;
	struct live_comm *comms;    /* the job's communicators, in the job's order */
	/* Bytes charged to the memory budget (BUDGET_VIEWS) for an HTTP
	 * request's view, given back when it is freed; 0 for the loop's. */
	uint64_t charged;
};

/* log.c: one line on stderr, "flightrecd: " and the formatted text. */
void daemon_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* main.c */
void daemon_stop(struct flightrecd *d);

/* clock.c: wall-clock and monotonic time, in nanoseconds. */
uint64_t daemon_now_ns(void);
uint64_t daemon_mono_ns(void);

/*
 * addr.c: daemon_format_addr() writes "1.2.3.4:N" or "[::1]:N";
 * daemon_addr_key() the peer as the per-address limits count it: an IPv4
 * address ("1.2.3.4"), an IPv6 /64 ("2001:db8:1:2::/64"). Both return 0,
 * or -EAFNOSUPPORT (and write "?") for another family.
 */
int daemon_format_addr(const struct sockaddr *sa, char *buf, size_t cap);
int daemon_addr_key(const struct sockaddr *sa, char *buf, size_t cap);
/* Records the port actually bound (for port 0) in a configured address. */
void daemon_set_port(struct sockaddr_storage *ss, uint16_t port);

/*
 * config.c: the --config file. config_read() turns FILE's "key = value"
 * lines into arguments "--key=value" for the command-line parser, so the
 * file takes exactly the command line's settings; a key must name one of
 * `opts` that takes an argument, other than "config". Returns 0, or a
 * negative errno with the file, the line and the reason in `err`; on
 * success `out` owns its memory until config_args_free().
 */
int config_read(const char *path, const struct option *opts, struct config_args *out, char *err,
		size_t errcap);
void config_args_free(struct config_args *ca);
/*
 * Whether `cfg` may run: an address beyond loopback (agents' or HTTP)
 * needs a token, or --insecure. Returns 0, or -EPERM after saying why on
 * stderr.
 */
int config_check_exposure(const struct daemon_config *cfg);
/* Logs the settings in effect, after `when` ("startup", "reload"). */
void config_log_settings(const struct daemon_config *cfg, const char *when);
/*
 * Applies what a reload may change from `next` to the running daemon (the
 * caller holds the lock), logs each change and each setting that needs a
 * restart; returns how many settings changed.
 */
int config_apply_reload(struct flightrecd *d, const struct daemon_config *next);

/*
 * notify.c: systemd's notification protocol. notify_init() reads
 * $NOTIFY_SOCKET and $WATCHDOG_USEC and starts the watchdog pings; every
 * function is a no-op without a socket and never fails the daemon.
 */
int notify_init(struct flightrecd *d);
int notify_send(struct flightrecd *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void notify_ready(struct flightrecd *d, const char *status);
void notify_reloading(struct flightrecd *d);
/* Says STOPPING=1; the pings continue but no longer hold the loop open. */
void notify_stopping(struct flightrecd *d);
void notify_close(struct flightrecd *d);

/*
 * pending.c: agent connections that have not said HELLO yet, per peer
 * address (as daemon_addr_key() writes it: an IPv6 peer by its /64). pending_add() counts one
 * more unless `max` are counted already (-EBUSY); -ENOMEM when out of
 * memory. The loop calls these under the lock.
 */
int pending_add(const char *addr, uint32_t max);
void pending_remove(const char *addr);
void pending_clear(void);

/*
 * config.c: raises the soft RLIMIT_NOFILE to the hard one, once at start;
 * the limit in effect after it; the descriptors kept for everything but
 * agent connections (HTTP's connections and the files they serve,
 * incident files being written, the loop's own handles), so that a flood
 * of agents can never cost an incident or /healthz; and the agent
 * connections the limit allows beyond that reserve, given the
 * --max-connections asked for.
 */
void config_raise_fd_limit(void);
uint64_t config_fd_limit(void);
unsigned config_fd_reserve(void);
uint32_t config_fd_max_connections(uint32_t asked);

/*
 * budget.c: the memory budget (--max-memory). budget_charge() adds `bytes`
 * of `kind` unless the total would go over the budget; then it counts a
 * refusal and returns false. budget_charge_job() also holds `job` (NULL:
 * none) to half of the budget and counts the bytes as the job's; the
 * caller holds the lock for those. Any thread may call the others.
 */
enum budget_kind {
	BUDGET_MEMBERS,             /* communicators' member lists */
	BUDGET_UPLOADS,             /* incident dumps being received */
	BUDGET_LIVE,                /* live looks' dumps, arriving or held */
	BUDGET_VIEWS,               /* HTTP requests' live views: traces, not member lists */
	BUDGET_KINDS,
};
/* The smallest default budget, whatever the machine's memory. */
#define BUDGET_MIN (256ull << 20)
/* A quarter of the machine's memory, at least BUDGET_MIN. */
uint64_t budget_default_max(void);
void budget_set_max(uint64_t max);
uint64_t budget_max(void);
bool budget_charge(enum budget_kind kind, uint64_t bytes);
void budget_release(enum budget_kind kind, uint64_t bytes);
bool budget_charge_job(struct job *job, enum budget_kind kind, uint64_t bytes);
void budget_release_job(struct job *job, enum budget_kind kind, uint64_t bytes);
uint64_t budget_used(enum budget_kind kind);
/* Charges refused since startup. */
uint64_t budget_refused(enum budget_kind kind);

/* server.c */
int server_start(struct flightrecd *d);
void server_close_all(struct flightrecd *d);
/* Closes an agent connection; the caller holds the lock. */
void conn_close(struct conn *c);
int conn_send_dump_request(struct conn *c, const char *incident, const char *reason);

/*
 * registry.c: frame handlers return 0 or a negative errno and name why.
 * registry_hello() returns -EBUSY, with no reason, when another live process
 * holds the rank: the caller refuses the connection (counted and logged
 * already) rather than the frame.
 */
int registry_hello(struct flightrecd *d, struct conn *c, const struct fr_msg_hello *m,
		   const char **why);
int registry_comm(struct conn *c, const struct fr_msg_comm *m, const char **why);
int registry_progress(struct conn *c, const struct fr_msg_progress *m, const char **why);
void registry_bye(struct conn *c);
void registry_seen(struct conn *c);
void registry_conn_lost(struct flightrecd *d, struct conn *c);
/* Forgets jobs idle for DAEMON_JOB_IDLE_NS; the caller holds the lock. */
void registry_forget_idle(struct flightrecd *d, uint64_t now_mono);
struct job *registry_job_find(struct flightrecd *d, const char *id);
struct job_rank *registry_rank(const struct job *job, uint32_t rank);
const struct job_comm *registry_job_comm(const struct job *job, const char *id);
/*
 * The global rank of member `in_comm` of the job's communicator `comm`, as
 * its merged member list knows it; -1 when it does not (or no such member).
 */
int32_t registry_comm_member(const struct job *job, const char *comm, int32_t in_comm);
/*
 * The global rank of the p2p peer or of the root of an operation in flight:
 * what its rank sent, else its peer_in_comm looked up in the job's member
 * list. -1 for none, any source, or a member the job cannot name yet.
 */
int32_t registry_op_peer(const struct job *job, const struct rank_op *op);
/* Whether global rank `rank` is known to be a member of `jc`. */
bool registry_comm_has_member(const struct job *job, const struct job_comm *jc, uint32_t rank);
enum rank_state registry_rank_state(const struct flightrecd *d, const struct job_rank *r,
				    uint64_t now_mono);
const char *registry_rank_state_name(enum rank_state s);
const char *registry_job_status(const struct job *job);
uint32_t registry_ranks_connected(const struct flightrecd *d);
/* Live traces of the known ranks, or with `all` of ranks 0..world_size-1. */
int registry_live_view(const struct flightrecd *d, const struct job *job, bool all,
		       struct live_view *lv);
/*
 * The live view of the known ranks for an HTTP request: what its traces
 * hold (about a kilobyte per rank, more with many communicators or
 * operations in flight; the member lists are shared, not copied) is charged
 * to the memory budget until live_view_free(), since requests on every
 * HTTP thread may hold one at once. -EDQUOT when the budget refuses it
 * (the request is answered 503), -ENOMEM. The loop's own views (the
 * watchdog's, an incident's), one at a time, are not charged.
 */
int registry_request_view(const struct flightrecd *d, const struct job *job,
			  struct live_view *lv);
/* Live traces of ranks 0..world_size-1, for an incident's manifest. */
int registry_manifest_view(const struct flightrecd *d, const struct job *job,
			   struct live_view *lv);
void live_view_free(struct live_view *lv);
/*
 * Whether `key` is the job's key under the daemon's token (false without
 * one), compared in constant time. The key is kept with the job, made again
 * only when the token changed (SIGHUP). The caller holds the lock; the HTTP
 * threads call it too, and it may refresh the job's kept key.
 */
bool registry_job_key_is(struct flightrecd *d, struct job *job,
			 const uint8_t key[FR_WIRE_JOB_KEY_SIZE]);
/* The verdict of a view; needs no lock (the view is a snapshot). */
int registry_live_verdict(const struct live_view *lv, struct fr_verdict *v);
void registry_free(struct flightrecd *d);

/* watchdog.c */
int watchdog_start(struct flightrecd *d);

/* incident.c */
struct incident_trigger {
	const char *reason;         /* "timeout", "heartbeat", "disconnect" */
	int32_t rank;               /* the rank that showed it, -1 if none */
	char comm[FR_COMM_ID_MAX + 1]; /* "" when no op is involved */
	bool has_seq;
	uint64_t seq;
	double waited_s;            /* how long the condition had lasted */
};

/*
 * Opens an incident, unless the job is over --max-incidents-per-hour: then
 * the incident is suppressed (counted, logged once per job a minute) and the
 * stuck state `key` counts as reported.
 */
void incident_open(struct flightrecd *d, struct job *job, const struct incident_trigger *t,
		   const struct fr_verdict *v, uint64_t key);
/*
 * Whether the job may open an incident now under --max-incidents-per-hour;
 * when not, `retry_after_s` says in how many seconds it may.
 */
bool incident_rate_allows(struct flightrecd *d, struct job *job, uint64_t now_mono,
			  uint64_t *retry_after_s);
/* Counts and logs an incident refused by the rate limit. */
void incident_suppress(struct flightrecd *d, struct job *job, const char *reason,
		       uint64_t retry_after_s);
void incident_close(struct incident *inc, bool incomplete);
bool incident_collecting(const struct incident *inc);
void incident_check_deadline(struct incident *inc, uint64_t now_mono);
void incident_dump_data(struct conn *c, const struct fr_msg_dump_data *m);
/* A rank of the job connected (HELLO), went away, or said BYE. */
void incident_rank_joined(struct incident *inc, struct conn *c);
void incident_rank_left(struct incident *inc, uint32_t rank, bool finished);
json_t *incident_records_json(const struct flightrecd *d, const struct job *job);

/*
 * ratelog.c: log lines about a limit, once per offender. ratelog() writes
 * the line for a pair (limit, offender) when none was written in the last
 * RATELOG_INTERVAL_NS, else only counts it; the next line written for the
 * pair ends with "(and N more times in the last S s)". ratelog_sweep(),
 * from the watchdog's tick, writes the counts of pairs that went quiet.
 * The table of pairs is fixed in size. Returns whether the line was
 * written. Any thread may call these.
 */
#define RATELOG_INTERVAL_NS (60ull * NS_PER_S)
bool ratelog(const char *limit, const char *offender, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* ratelog() at a given monotonic time, for tests. */
bool ratelog_at(uint64_t now_mono, const char *limit, const char *offender, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void ratelog_sweep(uint64_t now_mono);
/* Lines held back since startup (/metrics). */
uint64_t ratelog_held_total(void);
/* The address of a peer "1.2.3.4:5678" or "[::1]:5678" without its port:
 * an agent reconnecting in a loop is one offender whatever its port. */
void ratelog_offender_addr(const char *peer, char *out, size_t cap);

/* http.c */
int http_start(struct flightrecd *d);
/*
 * The HTTP threads hand nothing more to the loop (they answer 503): called
 * before the loop's handles are closed, since those threads may otherwise
 * signal a closed handle. Any thread.
 */
void http_quiesce(void);
void http_stop(struct flightrecd *d);
struct MHD_Connection;
/*
 * Answers with JSON document `doc` (reference taken; NULL: out of memory),
 * one line. Returns an enum MHD_Result (an int: this header does not
 * include microhttpd.h).
 */
int http_reply_doc(struct MHD_Connection *mc, unsigned status, json_t *doc);

/*
 * handover.c: the one hand-over of an HTTP request to the event loop (a
 * manual dump, a live look). The HTTP thread suspends the request and
 * queues it; one uv_async wakes the loop, which calls its `take` under the
 * daemon's lock; whoever answers it later, or at once, calls
 * handover_finish(), which resumes it, and libmicrohttpd calls the handler
 * again to reply. No HTTP thread waits on the loop. A request embeds
 * struct handover as its first member; `take` and `free` are its owner's.
 */
struct handover {
	struct handover *prev, *next;   /* every request between suspension and completion */
	struct handover *next_queued;   /* the queue to the loop */
	struct MHD_Connection *mc;
	/* On the loop, under the daemon's lock: answers the request, now or
	 * later, with handover_finish(). */
	void (*take)(struct flightrecd *d, struct handover *h, uint64_t now_mono);
	/* Frees the request once libmicrohttpd is done with it (any thread). */
	void (*free)(struct handover *h);
	/* The answer: set before the request is resumed. */
	bool done;
	unsigned status;
	char error[192];
};
/* Starts the hand-over (its uv_async); before the HTTP threads exist. */
int handover_start(struct flightrecd *d);
/*
 * Suspends the request of `mc` and queues `h` for the loop; the caller
 * sets *req_cls to `h` and returns MHD_YES. -ESHUTDOWN when the loop takes
 * no more requests (the daemon is stopping): nothing was done.
 */
int handover_submit(struct handover *h, struct MHD_Connection *mc);
/* Answers `h` (error: NULL for none) and resumes its request. Any thread. */
void handover_finish(struct handover *h, unsigned status, const char *error);
/*
 * The handler's call for a request it may have handed over: the request
 * if `req_cls` is one (`done`: it was answered), else NULL.
 */
struct handover *handover_resumed(void *req_cls, bool *done);
/* libmicrohttpd's completion callback's part: frees `req_cls` if it is a request handed over. */
void handover_completed(void *req_cls);
/* http_quiesce()'s part: no request is handed to the loop any more. */
void handover_quiesce(void);
/*
 * After the loop stopped, before MHD_stop_daemon(): answers every request
 * still waiting with 503 "the daemon is stopping", lets the answers go out
 * (bounded), and closes the uv_async.
 */
void handover_stop(struct flightrecd *d);

/*
 * look.c: live looks at ranks for the debug server (GET
 * /v1/jobs/<job>/ranks/<rank>/stacks and .../trace, /v1/jobs/<job>/stacks).
 * A look asks one rank, or every connected rank of a job, for a dump with
 * a DUMP_REQUEST whose id has FR_WIRE_LIVE_PREFIX and the scope the look
 * needs (live-stacks-<n>, live-trace<N>-<n>), collects the answers in
 * memory and completes when every rank asked answered, went away, or
 * LOOK_TIMEOUT_NS passed. The event loop owns the looks; the HTTP thread
 * hands requests over (handover.c), the loop answers them, and the HTTP
 * thread parses the dumps and replies. Requests for the
 * same rank or job share a look that asks for at least what they need,
 * and a result younger than LOOK_FRESH_NS that holds it answers without
 * asking again.
 */
#define LOOK_TIMEOUT_NS (5ull * NS_PER_S)
#define LOOK_FRESH_NS (1ull * NS_PER_S)
struct MHD_Connection;
/* Starts the looks' timer; before the HTTP threads exist. */
int look_start(struct flightrecd *d);
/*
 * Forgets every look and result; after handover_stop() answered the
 * requests waiting on them, before MHD_stop_daemon().
 */
void look_stop(struct flightrecd *d);
struct route;
/*
 * The HTTP handler of the three routes: answers at once (a bad request, an
 * unknown job or rank), or suspends the request and hands it to the loop.
 * Called again for the same request once the loop resumed it, with the
 * *req_cls it set. Returns an enum MHD_Result.
 */
int look_http(struct flightrecd *d, struct MHD_Connection *mc, const struct route *r,
	      void **req_cls);
/* DUMP_DATA whose id has FR_WIRE_LIVE_PREFIX; the caller holds the lock. */
void look_dump_data(struct conn *c, const struct fr_msg_dump_data *m);
/* The connection closes: its live look fails. The caller holds the lock. */
void look_conn_closed(struct conn *c);
/* What /metrics says of live looks; any thread, no lock. */
struct look_metrics {
	uint64_t requests;          /* HTTP requests for live looks */
	uint64_t shared;            /* of those, answered by another's look or a fresh result */
	uint64_t dump_requests;     /* DUMP_REQUESTs sent for them */
	uint64_t timeouts;          /* ranks that did not answer one in LOOK_TIMEOUT_NS */
	uint64_t bytes;             /* dump bytes received for them */
	uint64_t bytes_held;        /* dump bytes arriving or held now */
	uint64_t ignored;           /* live uploads nobody asked for, ignored */
};
void look_metrics(struct look_metrics *out);

/*
 * http_incidents.c: an incident directory's files for the HTTP API, read
 * without the daemon's lock (they touch no state). Ids must have passed
 * fr_wire_valid_name(); nothing below the dump directory is followed
 * through a symbolic link.
 */
/* Files an incident listing names at most: every rank's dump and the manifest. */
#define HTTP_INCIDENT_FILES_MAX (DAEMON_MAX_WORLD + 1)
/* Whether `name` is a file the API serves: "rank-<N>.json" or "manifest.json". */
bool http_incident_file_servable(const char *name);
/* How far a request for an incident's files got on disk. */
enum http_incident_found {
	HTTP_FOUND_NOTHING,  /* no directory DUMP_DIR/<job>/ */
	HTTP_FOUND_JOB,      /* that, but no DUMP_DIR/<job>/<id>/ */
	HTTP_FOUND_INCIDENT,
};
/*
 * The document of GET /v1/jobs/<job>/incidents/<id>, from the directory
 * DUMP_DIR/<job>/<id>/: {"job", "incident", "complete" (manifest.json is
 * there), "manifest" (its JSON, or null), "files": [{"name", "size"}]
 * (servable regular files, sorted, at most HTTP_INCIDENT_FILES_MAX),
 * "truncated"}, and "manifest_error" when the manifest is there but cannot
 * be read. Returns 0 with a new reference in `*out`, or a negative errno:
 * -ENOENT when a directory is missing, a link or not a directory.
 */
int http_incident_json(const char *dump_dir, const char *job, const char *id,
		       uint64_t max_size, json_t **out, enum http_incident_found *found);
/*
 * Opens servable file `name` of DUMP_DIR/<job>/<id>/ for reading. Returns
 * the fd (the caller owns it) and its size, or a negative errno: -ENOENT
 * for a missing directory, a name not served, a missing file, a link or
 * anything but a regular file; -EFBIG for one larger than `max_size`.
 */
int http_incident_open_file(const char *dump_dir, const char *job, const char *id,
			    const char *name, uint64_t max_size, uint64_t *size,
			    enum http_incident_found *found);

/* web.c */
struct MHD_Connection;
/*
 * Answers GET / with the web page (daemon/web/index.html, compiled in),
 * with its Content-Security-Policy. Returns MHD_YES or MHD_NO, as
 * libmicrohttpd's request handler does (an int: this header does not
 * include microhttpd.h).
 */
int web_page_reply(struct MHD_Connection *mc);

#endif
