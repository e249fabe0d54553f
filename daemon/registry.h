/*
 * The registry (registry.c): jobs, their ranks and communicators, and the
 * live views of a job built from them.
 */
#ifndef FR_DAEMON_REGISTRY_H
#define FR_DAEMON_REGISTRY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../protocol/auth.h"
#include "../protocol/wire.h"
#include "../dumps/trace.h"

struct conn;
struct flightrecd;
struct fr_trace;
struct fr_verdict;
struct incident;
struct straggler_job;

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
	RANK_STATE_CRASHED,         /* said CRASH: died of a fatal signal */
	RANK_STATE_EXITED,          /* said EXIT with work in flight or a non-zero status */
	RANK_STATE_KILLED,          /* its process went without a word while needed */
};

/* One rank of a job, created on its first HELLO and kept after it leaves. */
struct job_rank {
	uint32_t rank;
	struct conn *conn;          /* live connection, NULL when none */
	/* What the kernel says of a rank connected over the Unix socket
	 * (SO_PEERCRED), which the rank cannot forge. */
	bool has_uid;
	uint32_t uid;
	bool finished;              /* said BYE */
	bool disconnected;          /* lost its connection without BYE */
	bool silence_logged;        /* "unresponsive" was logged for this silence */
	bool refusal_logged;        /* a second process claiming it was logged */
	uint64_t last_seen_mono;    /* monotonic ns of its last frame */
	uint64_t disconnected_mono;
	/* Its connection dropped without a word while it was needed, its
	 * process on this host: whether it was killed is decided once the
	 * process is seen gone, or not within KILL_SETTLE_NS (a network
	 * cut): registry_kill_checks(). */
	bool kill_pending;
	/* Owned; what its CRASH said (protocol 6), NULL when none. Kept until
	 * another process takes the rank. */
	struct fr_crash *crash;
	uint64_t crashed_mono;
	/* How it ended otherwise (protocol 6 EXIT, or found killed), when
	 * `has_exit`; kept as `crash` is. An EXIT with code 0 and nothing in
	 * flight leaves the rank finished, as BYE does, with this kept in
	 * case its peers wait for it. */
	bool has_exit;
	struct fr_exit exit;
	/* Its first asynchronous NCCL error (NCCL_ERROR), kept as `crash`. */
	bool has_nccl_error;
	struct fr_nccl_error nccl_error;
	/* What the rank says of itself in its HELLO. */
	uint32_t pid;
	char host[FR_HOST_MAX + 1];
	char comm_lib[FR_LIBVER_MAX + 1];
	uint32_t ring_capacity;
	uint64_t start_ns;          /* agent start, CLOCK_REALTIME */
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
	/* The list is complete and one run, members[i] = run_first + i (world,
	 * any block of consecutive ranks): a report is then checked run by run,
	 * not member by member, so that N reports of world cost N, not N^2. */
	bool one_run;
	uint32_t run_first;
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
	uint32_t nkill_pending;     /* ranks with kill_pending */
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
	/* The job's latest crash (CRASH from a rank's process, at most one
	 * per process): which rank and when, so that ranks whose connections
	 * drop right after are known as killed by the launcher;
	 * `crash_reported` once an incident opened for it (or one collecting
	 * shows it), so that the watchdog does not open another for the same
	 * crash. A later crash is reported in its turn. */
	bool has_crash;
	bool crash_reported;
	uint32_t crash_rank;
	uint64_t crash_mono;
	const char *crash_what;     /* "crashed", "exited", "was killed" */
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
	/* Owned: the ranks' straggler scores (straggler.c), NULL until the
	 * first TIMING or HEARTBEAT. */
	struct straggler_job *straggler;
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
	bool has_uid;               /* connected over the Unix socket: its uid */
	uint32_t uid;
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

/*
 * Frame handlers return 0 or a negative errno and name why.
 * registry_hello() returns -EBUSY, with no reason, when another live
 * process holds the rank: the caller refuses the connection (counted and
 * logged already) rather than the frame.
 */
int registry_hello(struct flightrecd *d, struct conn *c, const struct fr_msg_hello *m,
		   const char **why);
int registry_comm(struct conn *c, const struct fr_msg_comm *m, const char **why);
/* COMM_RUNS (protocol 5), what registry_comm() makes of a COMM too: the
 * job's one shared list of the communicator takes the runs' members. */
int registry_comm_runs(struct conn *c, const struct fr_msg_comm_runs *m, const char **why);
int registry_progress(struct conn *c, const struct fr_msg_progress *m, const char **why);
void registry_bye(struct conn *c);
/* CRASH (protocol 6): the rank is dying of a fatal signal. A second CRASH
 * of the same process is ignored. */
int registry_crash(struct conn *c, const struct fr_msg_crash *m, const char **why);
/*
 * A rank whose connection dropped without a word is killed only once its
 * process is seen gone: the socket closes while the process exits, before
 * /proc shows it a zombie. The ranks waiting to be decided, in the order
 * they dropped: the first seen gone is the job's death (`killed` is
 * called with it), and the ranks the launcher killed after it are not;
 * one still alive after KILL_SETTLE_NS was cut off, not killed. Each
 * watchdog pass, under the lock.
 */
#define KILL_SETTLE_NS (1000ull * 1000 * 1000)
void registry_kill_checks(struct flightrecd *d, struct job *job, uint64_t now_mono,
			  void (*killed)(struct flightrecd *d, struct job *job, uint32_t rank));
/* EXIT (protocol 6): the rank's process is ending without having
 * finalised. Returns 1 when its peers should hear of it at once (an
 * incident, as for a crash: fr_exit_is_fault()), 0 when it is taken for a
 * goodbye, -EPROTO without a rank. A second EXIT is ignored. */
int registry_exit(struct conn *c, const struct fr_msg_exit *m);
/* NCCL_ERROR (protocol 6): a communicator of the rank failed. Returns 1
 * for the rank's first (an incident opens at once), 0 for a later one
 * (logged, not kept), -EPROTO without a rank. */
int registry_nccl_error(struct conn *c, const struct fr_msg_nccl_error *m);
void registry_seen(struct conn *c);
/* The connection is going away. A rank it leaves without a word while
 * needed is looked at again by registry_kill_checks(). */
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
/* Whether the rank named communicator `id` (COMM or PROGRESS), in O(1). */
bool registry_rank_in_comm(const struct job_rank *r, const char *id);
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
/*
 * Live traces for an incident's manifest: of ranks 0..world_size-1, or
 * on a node daemon (--upstream) of the ranks it holds only: the others
 * are other nodes' (their manifests, and the central daemon's, list
 * them), and a node holding 1,024 ranks of a 65,536-rank job would
 * otherwise build and write the whole job's manifest.
 */
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

#endif
