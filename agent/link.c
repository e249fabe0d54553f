/*
 * The link: a background thread with its own libuv loop that connects to
 * the daemon (FLIGHTREC_ADDR: TCP or "unix:/path"; unset, the node daemon's
 * socket when one is there, else none), says who this rank is,
 * streams progress when it changes and a heartbeat every second, and
 * answers dump requests. A Unix socket is connected to only when its owner
 * and its directory show that no other user can have put it there
 * (fr_socket_check()): without a token nothing else would tell a
 * neighbour's impostor from the daemon.
 *
 * The application never waits for it: hooks only write the ring and a few
 * counters, and this thread polls them every 100 ms. When the daemon is
 * unreachable, updates are dropped (the recorder keeps running) and the
 * thread reconnects with backoff; when no daemon is reachable and an
 * operation exceeds FLIGHTREC_TIMEOUT, it writes a local dump by itself.
 *
 * With FLIGHTREC_TOKEN_FILE, the link waits after connecting for the
 * daemon's CHALLENGE and answers it with AUTH, the proof of the token for
 * the HELLO that follows (protocol/PROTOCOL.md); the token never leaves
 * the process. FLIGHTREC_JOB_KEY_FILE instead holds only this job's key
 * (flightrecd --job-key), which proves HELLOs of this job and no other;
 * when both are set the key is used. The daemon must prove the token in
 * turn (DAEMON_CHALLENGE, DAEMON_PROOF) before the link acts on anything
 * it says: a peer that sends no challenge within CHALLENGE_WAIT_MS, or a
 * wrong proof, may be anyone listening on that port, and is refused (said
 * once; the agent records and dumps locally, and tries again later); one
 * that sends no proof within PROOF_WAIT_MS may be a busy daemon, and is
 * tried again on the normal schedule. A token or key file that is set but
 * cannot be read fails closed: the agent connects to no one (anyone could
 * be listening on the address), says so once on stderr, records and dumps
 * locally, and reads the file again before each connection attempt.
 *
 * Whoever the daemon is, what it can make the application suffer is
 * bounded: dumps it asks for are made one at a time, at most one incident
 * a DUMP_INTERVAL_MS and one live look a LIVE_INTERVAL_MS, and nothing is
 * queued for it past MAX_QUEUED_TOTAL. A request that is not made gets an
 * empty upload, so that the daemon never waits for it: the oldest waiting
 * incident is kept (the first is usually the root cause) and the newest
 * live look (its client is the one still waiting).
 */
#include "link.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "../protocol/auth.h"
#include "../protocol/endpoint.h"
#include "../protocol/frame.h"
#include "../protocol/hash.h"
#include "../dumps/trace.h"
#include "agent.h"
#include "crash.h"
#include "dumper.h"
#include "gpu.h"

#define TICK_MS 100
#define HEARTBEAT_MS 1000
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define MAX_INFLIGHT 256
/* Communicators per PROGRESS frame: 4096 x 80 bytes stays well under
 * FR_WIRE_MAX_PAYLOAD. */
#define MAX_COMMS_PER_FRAME 4096
/* Progress is dropped rather than queued past this much unsent data. */
#define MAX_QUEUED (4u << 20)
/* Nothing is queued past this much unsent data: a dump that would not fit
 * is not uploaded (its local copy is still written). A daemon that never
 * reads can make the rank hold this much, and no more. */
#define MAX_QUEUED_TOTAL (64u << 20)
/* The least time between two dumps a daemon asks for (each may signal
 * every thread of the application): incidents, and live looks. */
#define DUMP_INTERVAL_MS 1000
#define LIVE_INTERVAL_MS 500
#define STOP_GRACE_MS 1000
/* Asynchronous NCCL errors kept (one per communicator, the first ones). */
#define MAX_NCCL_ERRORS 16
#define CRASH_LINGER_MS 1000
#define CRASH_LINGER_MIN_MS 500
/* How long a link with a token waits for the daemon's CHALLENGE (sent
 * as soon as it accepts), and then for its DAEMON_PROOF: as long as the
 * daemon itself waits for a HELLO, since a daemon busy with the HELLOs of
 * a whole job starting at once may answer late. */
#define CHALLENGE_WAIT_MS 2000
#define PROOF_WAIT_MS 10000
/* After the daemon refused the token, try again this much later. */
#define REFUSED_BACKOFF_MS 30000
/* What a daemon of protocol 2 answers a frame of version 3 with. */
#define V2_REFUSAL "Protocol not supported"
/*
 * Where the agent looks for its daemon when FLIGHTREC_ADDR is unset: the
 * node daemon's socket (FLIGHTREC_NODE_SOCKET overrides the path, for
 * tests and unusual installs), and nothing else: a TCP port on a shared
 * node is whoever's binds it first, so the agent goes there only when told.
 */
#ifndef FR_NODE_SOCKET
#define FR_NODE_SOCKET "/run/flightrec/agent.sock"
#endif

/* LINK_AUTH: connected, waiting for the CHALLENGE before saying anything;
 * LINK_VERIFY: HELLO sent, waiting for the daemon's proof of the token
 * before acting on anything it says. */
enum link_state { LINK_IDLE, LINK_CONNECTING, LINK_AUTH, LINK_VERIFY, LINK_UP, LINK_CLOSING };

struct link {
	pthread_t thread;
	bool running;
	uv_loop_t loop;
	uv_async_t wake;
	uv_timer_t tick;
	uv_timer_t retry;
	uv_timer_t challenge;             /* CHALLENGE_WAIT_MS in LINK_AUTH and LINK_VERIFY */
	/* The connection: TCP, or a Unix socket (ep.is_unix). */
	union {
		uv_handle_t handle;
		uv_stream_t stream;
		uv_tcp_t tcp;
		uv_pipe_t pipe;
	} sock;
	uv_connect_t connect_req;
	enum link_state state;
	/* FLIGHTREC_ADDR (`addr_given`), or where this attempt connects when it
	 * is unset (pick_endpoint()); `where` names it in messages. */
	bool addr_given;
	bool addr_bad;                    /* FLIGHTREC_ADDR does not parse: never connects */
	struct fr_endpoint ep;
	char where[FR_HOST_MAX + 16];
	/* The node daemon's socket tried when FLIGHTREC_ADDR is unset
	 * (FLIGHTREC_NODE_SOCKET, else FR_NODE_SOCKET). */
	char node_socket[FR_UNIX_PATH_MAX];
	bool socket_refusal_said;
	uint64_t backoff_ms;
	uint64_t last_heartbeat_ms;
	uint8_t *rbuf;
	size_t rlen, rcap;
	uint32_t comms_seen;              /* comms considered for announcing */
	bool announced[FR_MAX_COMMS];     /* on this connection */
	uint64_t sent_entered[FR_MAX_COMMS];
	uint64_t sent_completed[FR_MAX_COMMS];
	uint64_t inflight_sig;
	/* Protocol 5 (COMM_RUNS): asked with VERSION on each connection, and
	 * COMMs held back until the daemon answers (`awaiting_welcome`);
	 * `comm_runs` once it said it reads them. A daemon that refused the
	 * question (ERROR 4), or closed two connections in a row on it,
	 * predates them: it is not asked again (`daemon_v4`), and gets COMM
	 * as before. One close is not enough: a connection dropped for any
	 * reason while the answer was on its way (a daemon restarting, a
	 * network blip) would otherwise cost protocol 5 and 6 (CRASH) for the
	 * rest of the job (`closed_on_version` counts them). */
	bool awaiting_welcome;
	unsigned closed_on_version;
	bool comm_runs;
	/* Protocol 6: the daemon reads CRASH. After a crash the link waits
	 * (`crash_lingering`, from `crash_ms`, at most CRASH_LINGER_MS) for
	 * the daemon's request for this rank's dump to be answered, and at
	 * least CRASH_LINGER_MIN_MS, so that the other ranks, asked at the
	 * same time, can answer before the launcher kills them. */
	bool crash_reads;
	/* Protocol 7: the daemon reads TIMING. `timing_next` is the ring record
	 * the next scan starts at, `timing_sent` per communicator the highest
	 * seq sent; neither is reset on a new connection, so that no sample
	 * is sent twice to a daemon that keeps its scores across it. */
	bool timing;
	uint64_t timing_next;
	uint64_t timing_sent[FR_MAX_COMMS];
	bool crash_lingering;
	/* The process is exiting without having finalised (fr_link_exit()):
	 * `exit_msg` is what EXIT says, filled when the link stops;
	 * `exit_lingering` while the link waits, as after a crash, for the
	 * daemon's incident to take this rank's dump before it closes. */
	bool exiting;
	bool exit_sent;
	/* Asynchronous NCCL errors found (fr_nccl_poll_errors()): the first
	 * `nccl_errors`, of which the daemon has been sent `nccl_errors_sent`
	 * (again from the first on each new connection). The first goes into
	 * dumps. */
	uint32_t nccl_errors;
	uint32_t nccl_errors_sent;
	struct fr_msg_nccl_error nccl_error[MAX_NCCL_ERRORS];
	bool exit_lingering;
	struct fr_msg_exit exit_msg;
	uint64_t crash_ms;
	uv_timer_t crash_linger;
	bool daemon_v4;
	uint64_t local_dumped;       /* record id + 1 of the op last dumped locally */
	bool stopping;
	bool goodbye_on_connect;     /* stopping while the connection was being made */
	/* FLIGHTREC_TOKEN_FILE, taken at start; its token, read on this thread
	 * before the first connection. `auth_wanted`: a token or key is
	 * configured, so the link connects only once it is loaded. */
	char token_path[512];
	bool auth_wanted;
	bool path_too_long;          /* never readable: never connects */
	bool token_loaded;
	bool token_unusable_said;
	struct fr_token token;
	/* FLIGHTREC_JOB_KEY_FILE, read with the token; used instead of it. */
	char key_path[512];
	bool have_job_key;
	uint8_t job_key[FR_WIRE_JOB_KEY_SIZE];
	bool unproven_logged;
	bool proof_late_logged;
	/* This connection's nonces: the daemon's CHALLENGE, and ours, which
	 * its DAEMON_PROOF must answer. */
	uint8_t daemon_nonce[FR_WIRE_NONCE_SIZE];
	uint8_t agent_nonce[FR_WIRE_NONCE_SIZE];
	uint32_t refusals_logged;    /* bit per ERROR code said on stderr */
	/* Dumps the daemon asked for: at most one is uploading at a time
	 * (`dump_queued` bytes of it not yet written), and one of each kind
	 * waits its turn (request_dump() says which); every other request is
	 * answered with an empty upload. */
	size_t dump_queued;
	uv_timer_t defer;
	struct pending_dump {
		bool set;
		char incident[FR_INCIDENT_MAX + 1];
		char reason[FR_REASON_MAX + 1];
		uint64_t last_ms;    /* when the last one of this kind was made */
	} pending[2];               /* PENDING_INCIDENT, PENDING_LIVE */
	bool said_dropped, said_too_big, said_save_failed;
	/* Set by other threads, read by the loop after a wake. */
	pthread_mutex_t lock;
	bool stop_requested;
	bool dump_requested;
	char dump_reason[FR_REASON_MAX + 1];
};

static struct link L;

enum { PENDING_INCIDENT, PENDING_LIVE };

static void start_connect(void);
static void say_goodbye(void);
static void say_exit(void);
static void close_all(void);

static void serve_dumps(void);
static void on_crash_linger(uv_timer_t *t);

/* How a frame is queued: kept, dropped when the daemon falls behind, or a
 * piece of a dump (counted in L.dump_queued until written). */
enum send_kind { SEND_KEEP, SEND_DROPPABLE, SEND_DUMP };

struct write_req {
	uv_write_t req;
	uint8_t *buf;
	size_t dump_bytes;
};

static size_t queued_bytes(void)
{
	return uv_stream_get_write_queue_size(&L.sock.stream);
}

static void on_written(uv_write_t *req, int status)
{
	struct write_req *w = (struct write_req *)req;
	bool dump_done = w->dump_bytes && (L.dump_queued -= w->dump_bytes) == 0;

	free(w->buf);
	free(w);
	/* Nothing half-written: a crash handler may write its frame. */
	if (queued_bytes() == 0)
		fr_crash_wire_release();
	/* A crashed rank's dump reached the daemon: it may die once its
	 * peers had CRASH_LINGER_MIN_MS to send theirs (the launcher kills
	 * them when it dies). */
	if (dump_done && L.crash_lingering) {
		uint64_t since = fr_mono_ms() - L.crash_ms;

		uv_timer_stop(&L.crash_linger);
		if (since >= CRASH_LINGER_MIN_MS) {
			on_crash_linger(&L.crash_linger);
		} else {
			uv_timer_start(&L.crash_linger, on_crash_linger,
				       CRASH_LINGER_MIN_MS - since, 0);
		}
	}
	/* The daemon took the dump: the next one it asked for may go. */
	if (dump_done && status == 0)
		serve_dumps();
}

/* Queues a whole frame (takes ownership of buf). Droppable frames are
 * dropped when the daemon does not keep up, and nothing is queued past
 * MAX_QUEUED_TOTAL. */
static int send_frame(uint8_t *buf, size_t len, enum send_kind kind)
{
	struct write_req *w;
	uv_buf_t b;

	if ((L.state != LINK_UP && L.state != LINK_VERIFY) ||
	    queued_bytes() + len > MAX_QUEUED_TOTAL ||
	    (kind == SEND_DROPPABLE && queued_bytes() > MAX_QUEUED) || !fr_crash_wire_claim()) {
		free(buf);
		return -EAGAIN;
	}
	w = malloc(sizeof(*w));
	if (!w) {
		free(buf);
		return -ENOMEM;
	}
	w->buf = buf;
	w->dump_bytes = kind == SEND_DUMP ? len : 0;
	b = uv_buf_init((char *)buf, (unsigned)len);
	if (uv_write(&w->req, &L.sock.stream, &b, 1, on_written) < 0) {
		free(buf);
		free(w);
		if (queued_bytes() == 0)
			fr_crash_wire_release();
		return -EIO;
	}
	L.dump_queued += w->dump_bytes;
	if (queued_bytes() == 0)
		fr_crash_wire_release();
	return 0;
}

#define SEND_MSG(name, msg, kind)                                          \
	({                                                                     \
		size_t n_ = fr_wire_##name##_size(msg);                        \
		uint8_t *b_ = malloc(n_);                                      \
		int rc_ = -ENOMEM;                                             \
		if (b_ && (rc_ = fr_wire_##name##_encode(msg, b_, n_)) > 0)    \
			rc_ = send_frame(b_, n_, kind);                      \
		else                                                           \
			free(b_);                                              \
		rc_;                                                           \
	})

/* ---- what is sent ---- */

static void build_hello(struct fr_msg_hello *h)
{
	const struct fr_identity *id = &fr_agent.id;

	memset(h, 0, sizeof(*h));
	memcpy(h->job, id->job, sizeof(h->job));
	h->rank = id->rank;
	h->world_size = id->world_size;
	h->pid = id->pid;
	memcpy(h->host, id->host, sizeof(h->host));
	h->ring_capacity = (uint32_t)fr_agent.ring.capacity;
	h->start_ns = id->start_ns;
	memcpy(h->comm_lib, id->comm_lib, sizeof(h->comm_lib));
}

/*
 * HELLO, preceded by DAEMON_CHALLENGE and AUTH when the daemon sent `nonce`
 * (NULL: it did not).
 */
static void send_hello(const uint8_t *nonce)
{
	struct fr_msg_hello h;

	build_hello(&h);
	if (nonce) {
		struct fr_msg_daemon_challenge dc;
		struct fr_msg_auth a;

		memcpy(dc.nonce, L.agent_nonce, sizeof(dc.nonce));
		SEND_MSG(daemon_challenge, &dc, SEND_KEEP);

		if ((L.have_job_key ? fr_wire_auth_proof_key(L.job_key, nonce, &h, a.proof) :
				      fr_wire_auth_proof(&L.token, nonce, &h, a.proof)) == 0)
			SEND_MSG(auth, &a, SEND_KEEP);
	}
	SEND_MSG(hello, &h, SEND_KEEP);
}

/*
 * Communicators of one member (MPI_COMM_SELF) cannot hang across ranks and
 * would only crowd the daemon's tables: they stay in dumps, not on the
 * wire.
 */
static bool worth_announcing(const struct fr_comm_rec *c)
{
	return c->size > 1;
}

/*
 * Sends one communicator: as COMM_RUNS when the daemon reads them and that
 * is the shorter frame (world: 12 bytes of runs for 4 bytes a member), else
 * as COMM. Returns what the send returned.
 */
static int send_comm(const struct fr_comm_rec *c)
{
	struct fr_msg_comm m = { .rank = c->rank, .size = c->size, .members = c->members };
	struct fr_msg_comm_runs r = { .rank = c->rank, .size = c->size };
	int rc;

	memcpy(m.id, c->id, sizeof(m.id));
	memcpy(m.desc, c->desc, sizeof(m.desc));
	if (!L.comm_runs || !(r.runs = malloc(c->size * sizeof(*r.runs))))
		return SEND_MSG(comm, &m, SEND_KEEP);
	memcpy(r.id, c->id, sizeof(r.id));
	memcpy(r.desc, c->desc, sizeof(r.desc));
	r.nruns = fr_node_maps_from_members(c->members, c->size, r.runs);
	if (fr_wire_comm_runs_size(&r) < fr_wire_comm_size(&m))
		rc = SEND_MSG(comm_runs, &r, SEND_KEEP);
	else
		rc = SEND_MSG(comm, &m, SEND_KEEP);
	free(r.runs);
	return rc;
}

/* Sends a COMM for each communicator registered since the last call. A
 * communicator is named in PROGRESS only once announced; none is before
 * the daemon said whether it reads COMM_RUNS. */
static void announce_comms(void)
{
	uint32_t n = __atomic_load_n(&fr_agent.ncomms, __ATOMIC_ACQUIRE);

	if (L.awaiting_welcome)
		return;
	for (; L.comms_seen < n; L.comms_seen++) {
		const struct fr_comm_rec *c =
			__atomic_load_n(&fr_agent.comms[L.comms_seen], __ATOMIC_ACQUIRE);

		if (!c)
			break; /* registered but not yet published */
		if (!worth_announcing(c))
			continue;
		if (send_comm(c) == 0)
			L.announced[c->index] = true;
	}
}

static bool announced(uint16_t index)
{
	return index < L.comms_seen && L.announced[index];
}

/*
 * Collects the operations in flight (oldest first) from the ring. Returns
 * how many; `sig` receives a signature of the set, to send only changes,
 * and `oldest_record` the record id + 1 of the oldest one that blocks the
 * rank (0: none does).
 */
static uint32_t scan_inflight(struct fr_wire_inflight *out, uint32_t max, uint64_t now_ns,
			      bool only_announced, uint64_t *sig, uint64_t *oldest_record)
{
	const struct fr_ring *r = &fr_agent.ring;
	uint64_t head = fr_ring_head(r);
	uint64_t first = head > r->capacity ? head - r->capacity : 0;
	uint64_t h = FR_FNV_INIT;
	uint32_t n = 0;

	*oldest_record = 0;
	for (uint64_t id = first; id < head && n < max; id++) {
		struct fr_rec rec;
		const struct fr_comm_rec *c;
		struct fr_wire_inflight *f;
		uint64_t since;

		if (!fr_ring_read(r, id, &rec) || rec.state != FR_STATE_ENTERED ||
		    (only_announced && !announced(rec.comm)) || !fr_agent.comms[rec.comm])
			continue;
		c = fr_agent.comms[rec.comm];
		f = &out[n++];
		memset(f, 0, sizeof(*f));
		memcpy(f->comm, c->id, sizeof(f->comm));
		f->type = rec.type;
		f->is_p2p = !!(rec.flags & FR_REC_P2P);
		if (rec.flags & FR_REC_NONBLOCKING)
			f->flags |= FR_WIRE_INFLIGHT_NONBLOCKING;
		if (rec.flags & FR_REC_WAITED)
			f->flags |= FR_WIRE_INFLIGHT_WAITED;
		f->peer = fr_comm_global_rank(c, rec.peer);
		f->peer_in_comm = rec.peer >= 0 ? rec.peer : -1;
		f->seq = rec.seq;
		f->count = rec.count;
		f->bytes = rec.count * rec.dtype_size;
		snprintf(f->dtype, sizeof(f->dtype), "%s", fr_dtype_name(rec.dtype));
		/* A waited non-blocking op blocks the rank since its Wait began, a GPU
		 * op since the device reached it. */
		since = fr_ticks_to_ns(rec.t_started ? rec.t_started : rec.t_entered);
		f->age_ms = now_ns > since ? (now_ns - since) / 1000000u : 0;
		if (!*oldest_record && (!(rec.flags & FR_REC_NONBLOCKING) || rec.t_started))
			*oldest_record = id + 1;
		h = fr_fnv1a(h, &id, sizeof(id));
		h = fr_fnv1a(h, &f->flags, sizeof(f->flags));
	}
	*sig = h ^ n;
	return n;
}

/*
 * TIMING (protocol 7): when the rank entered, and how long it took in, each
 * collective it completed since the last scan whose seq is a multiple of
 * FR_WIRE_TIMING_EVERY. The scan stops at the oldest sampled collective
 * still in flight (a non-blocking one), so that it is sent once complete;
 * one completed later than a newer sampled one is dropped.
 */
static void send_timing(void)
{
	static struct fr_wire_timing samples[FR_WIRE_TIMING_MAX];
	static uint16_t comm_of[FR_WIRE_TIMING_MAX];
	const struct fr_ring *r = &fr_agent.ring;
	struct fr_msg_timing m = { .n = 0, .samples = samples };
	uint64_t head = fr_ring_head(r);
	uint64_t first = head > r->capacity ? head - r->capacity : 0;
	uint64_t id = L.timing_next > first ? L.timing_next : first;
	uint64_t resume = UINT64_MAX;

	if (!L.timing)
		return;
	for (; id < head && m.n < FR_WIRE_TIMING_MAX; id++) {
		const struct fr_comm_rec *c;
		struct fr_wire_timing *t;
		struct fr_rec rec;

		if (!fr_ring_read(r, id, &rec)) {
			if (id + r->capacity / 2 > head && resume == UINT64_MAX)
				resume = id; /* being written, not lost: read it next time */
			continue;
		}
		if ((rec.flags & FR_REC_P2P) || !fr_op_is_collective(rec.type) ||
		    rec.seq % FR_WIRE_TIMING_EVERY)
			continue;
		if (rec.state == FR_STATE_ENTERED) {
			if (resume == UINT64_MAX)
				resume = id;
			continue;
		}
		c = fr_agent.comms[rec.comm];
		if (!c || !announced(rec.comm) || rec.state != FR_STATE_COMPLETED ||
		    rec.seq <= L.timing_sent[rec.comm] || rec.t_completed < rec.t_entered)
			continue;
		comm_of[m.n] = rec.comm;
		t = &samples[m.n++];
		memset(t, 0, sizeof(*t));
		memcpy(t->comm, c->id, sizeof(t->comm));
		t->seq = rec.seq;
		t->type = rec.type;
		t->flags = (rec.flags & FR_REC_GPU) ? FR_WIRE_TIMING_GPU : 0;
		t->entered_ns = fr_ticks_to_ns(rec.t_entered);
		t->wait_ns = fr_ticks_to_ns(rec.t_completed) - t->entered_ns;
	}
	if (m.n && SEND_MSG(timing, &m, SEND_DROPPABLE) < 0)
		return; /* not sent: scanned again next tick */
	for (uint32_t i = 0; i < m.n; i++)
		L.timing_sent[comm_of[i]] = samples[i].seq;
	L.timing_next = resume < id ? resume : id;
}

static void send_progress(bool force)
{
	static struct fr_wire_comm_progress comms[MAX_COMMS_PER_FRAME];
	static uint32_t index_of[MAX_COMMS_PER_FRAME];
	static struct fr_wire_inflight inflight[MAX_INFLIGHT];
	struct fr_msg_progress m;
	uint32_t n = __atomic_load_n(&fr_agent.ncomms, __ATOMIC_ACQUIRE);
	uint64_t sig, oldest;
	uint32_t nc = 0;

	/* Comms past a full frame are left for the next tick: they still
	 * differ from what was sent. */
	for (uint32_t i = 0; i < n && nc < MAX_COMMS_PER_FRAME; i++) {
		const struct fr_comm_rec *c = fr_agent.comms[i];
		uint64_t e, d;

		if (!announced((uint16_t)i))
			continue; /* never report a comm the daemon does not know */
		e = __atomic_load_n(&c->coll_entered, __ATOMIC_RELAXED);
		d = __atomic_load_n(&c->coll_completed, __ATOMIC_RELAXED);
		if (!force && e == L.sent_entered[i] && d == L.sent_completed[i])
			continue;
		memcpy(comms[nc].comm, c->id, sizeof(comms[nc].comm));
		comms[nc].last_entered = e;
		comms[nc].last_completed = d;
		index_of[nc++] = i;
	}
	m.ncomms = nc;
	m.comms = comms;
	m.ninflight = scan_inflight(inflight, MAX_INFLIGHT, fr_now_ns(), true, &sig, &oldest);
	m.inflight = inflight;
	if (!force && nc == 0 && sig == L.inflight_sig)
		return;
	if (SEND_MSG(progress, &m, SEND_DROPPABLE) < 0)
		return; /* not sent: try again next tick */
	for (uint32_t j = 0; j < nc; j++) {
		L.sent_entered[index_of[j]] = comms[j].last_entered;
		L.sent_completed[index_of[j]] = comms[j].last_completed;
	}
	L.inflight_sig = sig;
}

static void send_heartbeat(void)
{
	struct fr_msg_heartbeat hb = { .now_ns = fr_now_ns() };

	SEND_MSG(heartbeat, &hb, SEND_DROPPABLE);
}

/* ---- dumps ---- */

/*
 * What uploading `len` bytes of dump queues: the bytes and every frame's
 * header, so that a dump checked against MAX_QUEUED_TOTAL is never cut off
 * partway (the daemon would get a truncated dump).
 */
static size_t upload_bytes(const char *incident, size_t len)
{
	struct fr_msg_dump_data d;
	size_t frames = len ? (len + FR_WIRE_DUMP_CHUNK - 1) / FR_WIRE_DUMP_CHUNK : 1;

	memset(&d, 0, sizeof(d));
	snprintf(d.incident, sizeof(d.incident), "%s", incident);
	return len + frames * fr_wire_dump_data_size(&d);
}

static void upload(const char *incident, const char *buf, size_t len)
{
	struct fr_msg_dump_data d;
	size_t off = 0;

	memset(&d, 0, sizeof(d));
	snprintf(d.incident, sizeof(d.incident), "%s", incident);
	d.total = len;
	do {
		size_t chunk = len - off < FR_WIRE_DUMP_CHUNK ? len - off : FR_WIRE_DUMP_CHUNK;

		d.offset = off;
		d.len = (uint32_t)chunk;
		d.data = buf ? (const uint8_t *)buf + off : NULL;
		if (SEND_MSG(dump_data, &d, SEND_DUMP) < 0)
			return;
		off += chunk;
	} while (off < len);
}

/*
 * Writes this rank's dump: uploaded first (the daemon's deadline is
 * running), then kept in FLIGHTREC_DUMP_DIR, whose file system may be slow,
 * except for a live look, which only the daemon keeps (in memory). With no
 * dump to send, an empty upload tells the daemon not to wait for this rank
 * until its deadline; so does one (when the daemon `asked`) that is not
 * uploaded because the last dump is still unsent or it would queue past
 * MAX_QUEUED_TOTAL.
 *
 * A live look (protocol/PROTOCOL.md, "Live looks") is the daemon's debug
 * server asking for the rank's stacks or ring while nothing is wrong yet,
 * perhaps every few seconds: its id says what it shows, and the dump holds
 * only that.
 */
static void dump(const char *incident, const char *reason, bool asked)
{
	struct fr_dumper_scope scope;
	char *buf = NULL;
	size_t len = 0;
	char path[1024];
	char err[600];
	int rc;

	scope.scope = fr_wire_live_scope(incident, &scope.last);
	rc = fr_dumper_serialize(incident, reason, &scope, &buf, &len);

	if (L.state == LINK_UP) {
		/* One dump at a time, and none that would queue past the cap:
		 * an empty upload tells the daemon not to wait for it. */
		if (buf && (L.dump_queued ||
			    queued_bytes() + upload_bytes(incident, len) > MAX_QUEUED_TOTAL)) {
			if (!L.said_too_big)
				fprintf(stderr, "flightrec: rank %u: dump %s (%zu bytes) not uploaded: %s (%zu bytes unsent, at most %u may be); an incident's local copy is still written\n",
					fr_agent.id.rank, incident, len,
					L.dump_queued ? "the daemon has not taken the last one" : "it does not fit",
					queued_bytes(), MAX_QUEUED_TOTAL);
			L.said_too_big = true;
			if (asked)
				upload(incident, NULL, 0);
		} else {
			upload(incident, buf, buf ? len : 0);
		}
	}
	if (rc) {
		fprintf(stderr, "flightrec: rank %u: dump for %s not built: %s\n",
			fr_agent.id.rank, incident, strerror(-rc));
	} else if (scope.scope == FR_WIRE_LIVE_NONE) {
		rc = fr_dumper_save(incident, buf, len, asked, path, sizeof(path), err,
				    sizeof(err));
		/* Said once for a daemon's requests: one asking again and again
		 * must not fill the application's stderr either. */
		if (rc && (!asked || !L.said_save_failed))
			fprintf(stderr, "flightrec: rank %u: local dump %s not written: %s%s\n",
				fr_agent.id.rank, path, err[0] ? err : strerror(-rc),
				L.state == LINK_UP ? " (the daemon has its copy)" : "");
		L.said_save_failed |= asked && rc != 0;
	}
	free(buf);
}

/*
 * Makes the dumps the daemon asked for, as fast as the rate allows: none
 * while one is still uploading, incidents DUMP_INTERVAL_MS apart and live
 * looks LIVE_INTERVAL_MS apart; what is not yet due waits for the timer.
 * A daemon that floods requests gets at most this rate, whatever it asks.
 */
static void on_defer(uv_timer_t *t);

static void serve_dumps(void)
{
	static const uint64_t interval[2] = { DUMP_INTERVAL_MS, LIVE_INTERVAL_MS };
	uint64_t now = fr_mono_ms(), wait = UINT64_MAX;

	if (L.dump_queued || L.state != LINK_UP)
		return; /* on_written or the next connection calls again */
	for (int k = 0; k < 2; k++) {
		struct pending_dump *p = &L.pending[k];
		uint64_t due = p->last_ms + interval[k];

		if (!p->set)
			continue;
		if (!p->last_ms || now >= due) {
			p->set = false;
			p->last_ms = now;
			dump(p->incident, p->reason, true);
			if (L.dump_queued)
				return;
			now = fr_mono_ms();
			continue;
		}
		wait = due - now < wait ? due - now : wait;
	}
	if (wait != UINT64_MAX)
		uv_timer_start(&L.defer, on_defer, wait, 0);
}

static void on_defer(uv_timer_t *t)
{
	(void)t;
	serve_dumps();
}

/*
 * A DUMP_REQUEST: queued for serve_dumps() unless one of its kind already
 * waits. Of two incidents the older is kept (the first is usually the root
 * cause, the later ones its consequences); of two live looks the newer
 * (its client is the one still waiting). The one not made is answered with
 * an empty upload at once, so that the daemon does not wait for it until
 * its deadline and take this rank for a frozen one.
 */
static void request_dump(const char *incident, const char *reason)
{
	bool live = !strncmp(incident, FR_WIRE_LIVE_PREFIX, sizeof(FR_WIRE_LIVE_PREFIX) - 1);
	struct pending_dump *p = &L.pending[live ? PENDING_LIVE : PENDING_INCIDENT];
	const char *declined = live ? p->incident : incident;

	if (p->set && !strcmp(p->incident, incident))
		return; /* asked again for the one waiting: it is on its way */
	if (p->set) {
		if (!L.said_dropped)
			fprintf(stderr, "flightrec: rank %u: the daemon at %s asks for dumps faster than one at a time, %d ms apart; answering dump %s (and any such later) with no data\n",
				fr_agent.id.rank, L.where, DUMP_INTERVAL_MS, declined);
		L.said_dropped = true;
		upload(declined, NULL, 0);
		if (!live)
			return;
	}
	p->set = true;
	snprintf(p->incident, sizeof(p->incident), "%s", incident);
	snprintf(p->reason, sizeof(p->reason), "%s", reason);
	serve_dumps();
}

/* A dump the application asked for: its own incident, per rank. */
static void app_incident_id(char *out, size_t len)
{
	static unsigned count; /* link thread only */
	time_t now = time(NULL);
	struct tm tm;
	char stamp[32];

	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	/* Two requests within a second must not overwrite each other. */
	snprintf(out, len, "app-%s-rank%u-%u", stamp, fr_agent.id.rank, ++count);
}

/*
 * A dump of the local watchdog: named after the stuck operation, so that
 * every rank waiting in it (on a shared file system) writes into one
 * directory that fr-analyze reads as one incident.
 */
static void watchdog_incident_id(char *out, size_t len, const struct fr_wire_inflight *op)
{
	snprintf(out, len, "local-%.36s-%llu", op->comm, (unsigned long long)op->seq);
	for (char *p = out; *p; p++)
		if (*p == '/')
			*p = '_';
}

/* ---- connection ---- */

static void on_retry(uv_timer_t *t)
{
	(void)t;
	start_connect();
}

/* Connection lost or never made: try again later, backing off. */
static void retry_later(void)
{
	L.state = LINK_IDLE;
	L.rlen = 0;
	if (L.stopping) {
		close_all(); /* the last attempt before stopping failed: done */
		return;
	}
	uv_timer_start(&L.retry, on_retry, L.backoff_ms, 0);
	L.backoff_ms = L.backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : L.backoff_ms * 2;
}

static void on_closed(uv_handle_t *h)
{
	(void)h;
	retry_later();
}

static bool link_open(void)
{
	return L.state == LINK_UP || L.state == LINK_CONNECTING || L.state == LINK_AUTH ||
	       L.state == LINK_VERIFY;
}

/*
 * The daemon closed two connections in a row (or refused one, ERROR 4) on
 * our VERSION: it predates protocol 5. Said once; it is not asked again, and the
 * reconnect (at once: the connection itself was fine) sends it COMM.
 */
static void daemon_predates_runs(void)
{
	L.awaiting_welcome = false;
	if (L.daemon_v4)
		return;
	L.daemon_v4 = true;
	L.backoff_ms = BACKOFF_MIN_MS;
	fprintf(stderr, "flightrec: rank %u: the daemon at %s predates protocol 5 (it refused VERSION); reconnecting, with member lists in full\n",
		fr_agent.id.rank, L.where);
}

static void disconnect(void)
{
	if (L.awaiting_welcome && L.state == LINK_UP && ++L.closed_on_version >= 2)
		daemon_predates_runs();
	else if (L.awaiting_welcome && L.state == LINK_UP)
		L.backoff_ms = BACKOFF_MIN_MS;
	L.awaiting_welcome = false;
	L.crash_reads = false;
	L.nccl_errors_sent = 0;
	fr_crash_set_fd(-1);
	uv_timer_stop(&L.challenge);
	uv_timer_stop(&L.defer);
	if (link_open()) {
		L.state = LINK_CLOSING;
		uv_close(&L.sock.handle, on_closed);
	}
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)h;
	if (L.rcap - L.rlen < suggested) {
		size_t cap = L.rlen + suggested;
		uint8_t *grown = realloc(L.rbuf, cap);

		if (!grown) {
			*buf = uv_buf_init(NULL, 0);
			return;
		}
		L.rbuf = grown;
		L.rcap = cap;
	}
	*buf = uv_buf_init((char *)L.rbuf + L.rlen, (unsigned)(L.rcap - L.rlen));
}

static void link_up(void);
static void link_verify(const uint8_t *nonce);
static bool daemon_proof_ok(const uint8_t proof[FR_WIRE_PROOF_SIZE]);
static void on_challenge_timeout(uv_timer_t *t);

/*
 * This agent holds a token and the peer did not prove it holds it too: it
 * is not the daemon (or one that predates mutual authentication). Nothing
 * it sent is acted on; said once, then retried as after a refusal, the
 * application recording and dumping locally meanwhile.
 */
static void refuse_unproven(const char *why)
{
	L.backoff_ms = REFUSED_BACKOFF_MS;
	if (L.unproven_logged)
		return;
	L.unproven_logged = true;
	fprintf(stderr, "flightrec: rank %u: the daemon at %s did not prove it holds the token (%s): not connecting to it; recording locally, retrying every 30 s\n",
		fr_agent.id.rank, L.where, why);
}

/* The daemon's refusal: said once per reason, then the link closes. */
static void on_refused(const struct fr_msg_error *e)
{
	char msg[FR_REASON_MAX + 1];
	uint32_t bit = e->code < 32 ? 1u << e->code : 1u;

	/* A daemon of protocol 2 refuses our DAEMON_CHALLENGE, a frame of a
	 * version it does not speak, with this text (strerror(EPROTONOSUPPORT)
	 * in its C locale): it cannot prove the token. Any other ERROR 4 (a
	 * daemon of ours refusing the HELLO, say for --max-job-connections) is
	 * a refusal like the others, said in the daemon's words. */
	if (L.state == LINK_VERIFY && e->code == FR_WIRE_ERR_PROTOCOL &&
	    !strcmp(e->message, V2_REFUSAL)) {
		refuse_unproven("it refused to, as a daemon older than protocol version 3 does");
		return;
	}
	if (e->code == FR_WIRE_ERR_AUTH_REQUIRED || e->code == FR_WIRE_ERR_AUTH_FAILED)
		L.backoff_ms = REFUSED_BACKOFF_MS;
	if (L.refusals_logged & bit)
		return;
	L.refusals_logged |= bit;
	/* Printable only: it is the daemon's text on the application's stderr. */
	for (size_t i = 0;; i++) {
		msg[i] = e->message[i] >= 0x20 && e->message[i] < 0x7f ? e->message[i] : '?';
		if (!e->message[i]) {
			msg[i] = '\0';
			break;
		}
	}
	fprintf(stderr, "flightrec: rank %u: the daemon at %s refused the connection: %s (code %u)%s\n",
		fr_agent.id.rank, L.where, msg, e->code,
		L.backoff_ms == REFUSED_BACKOFF_MS ? "; recording locally, retrying every 30 s" : "");
	/* The daemon cannot tell a key of another job from a wrong token. */
	if (e->code == FR_WIRE_ERR_AUTH_FAILED && L.have_job_key)
		fprintf(stderr, "flightrec: rank %u: FLIGHTREC_JOB_KEY_FILE=%s proves one job only: is it the key of job %s, made from the daemon's current token (flightrecd --job-key %s)?\n",
			fr_agent.id.rank, L.key_path, fr_agent.id.job, fr_agent.id.job);
}

/*
 * Returns 0, 1 when the daemon refused the connection (close without
 * complaint), or a negative errno for a frame that is not acceptable.
 */
static int handle_frame(const struct fr_wire_header *h, const uint8_t *payload)
{
	struct fr_msg_dump_request req;
	struct fr_msg_challenge ch;
	struct fr_msg_daemon_proof dp;
	struct fr_msg_error e;
	struct fr_msg_welcome w;
	int rc;

	/* Before its proof, a daemon's word is taken for nothing but that:
	 * before our HELLO only its CHALLENGE, after it only its DAEMON_PROOF
	 * (protocol/PROTOCOL.md), and an ERROR either way. */
	if (L.state == LINK_AUTH && h->type != FR_MSG_CHALLENGE && h->type != FR_MSG_ERROR) {
		refuse_unproven("it spoke before asking for the token");
		return 1;
	}
	if (L.state == LINK_VERIFY && h->type != FR_MSG_DAEMON_PROOF && h->type != FR_MSG_ERROR) {
		refuse_unproven("it spoke before proving it");
		return 1;
	}
	switch (h->type) {
	case FR_MSG_DAEMON_PROOF:
		rc = fr_wire_daemon_proof_decode(payload, h->length, &dp);
		if (rc < 0)
			return rc;
		if (L.state != LINK_VERIFY)
			return 0; /* not asked for: nothing to check */
		uv_timer_stop(&L.challenge);
		if (!daemon_proof_ok(dp.proof)) {
			refuse_unproven("its proof is wrong: another token, or not flightrecd");
			return 1;
		}
		link_up();
		return 0;
	case FR_MSG_DUMP_REQUEST:
		rc = fr_wire_dump_request_decode(payload, h->length, &req);
		if (rc < 0)
			return rc;
		/* The incident id names a directory: accept only safe ones. */
		if (!fr_wire_valid_name(req.incident))
			return -EPROTO;
		request_dump(req.incident, req.reason);
		return 0;
	case FR_MSG_CHALLENGE:
		rc = fr_wire_challenge_decode(payload, h->length, &ch);
		if (rc < 0)
			return rc;
		/* Without a token, or after giving up waiting, there is nothing
		 * to answer: the daemon's ERROR says the rest. */
		if (L.state == LINK_AUTH) {
			uv_timer_stop(&L.challenge);
			link_verify(ch.nonce);
		}
		return 0;
	case FR_MSG_ERROR:
		rc = fr_wire_error_decode(payload, h->length, &e);
		if (rc < 0)
			return rc;
		/* A daemon of protocol 4 refuses VERSION, its frame of version 5. */
		if (L.awaiting_welcome && L.state == LINK_UP && e.code == FR_WIRE_ERR_PROTOCOL) {
			daemon_predates_runs();
			return 1;
		}
		on_refused(&e);
		return 1;
	case FR_MSG_WELCOME:
		rc = fr_wire_welcome_decode(payload, h->length, &w);
		if (rc < 0)
			return rc;
		if (L.awaiting_welcome && L.state == LINK_UP) {
			uv_timer_stop(&L.challenge);
			L.awaiting_welcome = false;
			L.closed_on_version = 0;
			L.comm_runs = w.version >= 5;
			L.crash_reads = w.version >= 6;
			L.timing = w.version >= 7;
			if (w.version >= 6) {
				uv_os_fd_t fd;

				/* Protocol 6: the crash handler may write CRASH here. */
				if (uv_fileno(&L.sock.handle, &fd) == 0)
					fr_crash_set_fd(fd);
			}
			announce_comms();
			send_progress(true);
		}
		return 0;
	default:
		return 0; /* nothing else is meant for agents; ignore */
	}
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	size_t off = 0;

	(void)s;
	(void)buf;
	if (nread < 0) {
		disconnect();
		return;
	}
	L.rlen += (size_t)nread;
	for (;;) {
		struct fr_wire_frame f;
		int rc = fr_frame_next(L.rbuf + off, L.rlen - off, FR_WIRE_MAX_PAYLOAD, &f);

		if (rc == -EAGAIN)
			break;
		if (rc == 0)
			rc = handle_frame(&f.h, f.payload);
		if (rc > 0) {
			disconnect();
			return;
		}
		if (rc < 0) {
			fprintf(stderr, "flightrec: rank %u: bad frame from daemon (%s); reconnecting\n",
				fr_agent.id.rank, strerror(-rc));
			disconnect();
			return;
		}
		off += f.size;
	}
	memmove(L.rbuf, L.rbuf + off, L.rlen - off);
	L.rlen -= off;
}

/*
 * The connection is ready for frames (without a token at once, with one
 * once the daemon proved it): says who this rank is, unless link_verify()
 * did, then everything it knows.
 */
static void link_up(void)
{
	bool said_hello = L.state == LINK_VERIFY;

	L.state = LINK_UP;
	L.comms_seen = 0;
	memset(L.announced, 0, sizeof(L.announced));
	memset(L.sent_entered, 0, sizeof(L.sent_entered));
	memset(L.sent_completed, 0, sizeof(L.sent_completed));
	L.inflight_sig = 0;
	/* Requests of the last connection are not this daemon's to answer. */
	L.pending[PENDING_INCIDENT].set = L.pending[PENDING_LIVE].set = false;
	if (!said_hello)
		send_hello(NULL);
	/* Whether the daemon reads COMM_RUNS, asked before any COMM; the
	 * answer (or the wait running out) announces them. */
	L.comm_runs = false;
	L.timing = false;
	if (!L.daemon_v4) {
		struct fr_msg_version v = { .version = FR_WIRE_VERSION };

		L.awaiting_welcome = SEND_MSG(version, &v, SEND_KEEP) == 0;
		if (L.awaiting_welcome)
			uv_timer_start(&L.challenge, on_challenge_timeout, PROOF_WAIT_MS, 0);
	}
	announce_comms();
	send_progress(true);
	send_heartbeat();
	L.last_heartbeat_ms = fr_mono_ms();
	if (L.goodbye_on_connect) {
		L.goodbye_on_connect = false;
		uv_timer_stop(&L.tick);
		say_goodbye();
	}
}

/*
 * The daemon challenged: proves the token for `nonce` with our HELLO and
 * challenges the daemon in turn, then waits (PROOF_WAIT_MS) for its proof
 * before anything else.
 */
static void link_verify(const uint8_t *nonce)
{
	if (getrandom(L.agent_nonce, sizeof(L.agent_nonce), GRND_NONBLOCK) !=
	    (ssize_t)sizeof(L.agent_nonce)) {
		refuse_unproven("no random numbers to challenge it with");
		disconnect();
		return;
	}
	memcpy(L.daemon_nonce, nonce, sizeof(L.daemon_nonce));
	L.state = LINK_VERIFY;
	send_hello(nonce);
	uv_timer_start(&L.challenge, on_challenge_timeout,
		       L.goodbye_on_connect ? STOP_GRACE_MS / 2 : PROOF_WAIT_MS, 0);
}

/* Whether `proof` is the daemon's for this connection's HELLO. */
static bool daemon_proof_ok(const uint8_t proof[FR_WIRE_PROOF_SIZE])
{
	struct fr_msg_hello h;
	uint8_t key[FR_WIRE_JOB_KEY_SIZE];
	bool ok;

	build_hello(&h);
	if (L.have_job_key)
		memcpy(key, L.job_key, sizeof(key));
	else if (fr_wire_job_key(&L.token, h.job, key) != 0)
		return false;
	ok = fr_wire_daemon_verify_key(key, L.agent_nonce, L.daemon_nonce, &h, proof);
	explicit_bzero(key, sizeof(key));
	return ok;
}

/*
 * No CHALLENGE in time: with a token, the peer is refused. No proof in
 * time: a daemon that challenged but is too busy to answer (a whole job
 * connecting at once) is not an impostor; it is tried again on the normal
 * schedule, nothing it sent acted on.
 */
static void on_challenge_timeout(uv_timer_t *t)
{
	(void)t;
	if (L.state == LINK_AUTH) {
		refuse_unproven("it did not ask for the token: it has none, predates tokens, or is not flightrecd");
	} else if (L.state == LINK_VERIFY) {
		if (!L.proof_late_logged && !L.stopping)
			fprintf(stderr, "flightrec: rank %u: the daemon at %s did not answer in time (no proof of the token within %d s of the HELLO); recording locally, retrying\n",
				fr_agent.id.rank, L.where, PROOF_WAIT_MS / 1000);
		L.proof_late_logged |= !L.stopping;
	} else if (L.state == LINK_UP && L.awaiting_welcome) {
		/* No answer to VERSION: what every daemon reads goes out. */
		L.awaiting_welcome = false;
		announce_comms();
		send_progress(true);
		return;
	} else {
		return;
	}
	disconnect();
}

static void on_connected(uv_connect_t *req, int status)
{
	(void)req;
	if (status < 0) {
		disconnect();
		return;
	}
	L.backoff_ms = BACKOFF_MIN_MS;
	if (!L.ep.is_unix)
		uv_tcp_nodelay(&L.sock.tcp, 1);
	uv_read_start(&L.sock.stream, on_alloc, on_read);
	if (!L.token.len && !L.have_job_key) {
		link_up();
		return;
	}
	L.state = LINK_AUTH;
	/* Stopping already: the goodbye must fit in its grace period. */
	uv_timer_start(&L.challenge, on_challenge_timeout,
		       L.goodbye_on_connect ? STOP_GRACE_MS / 2 : CHALLENGE_WAIT_MS, 0);
}

/*
 * A token or key file is set but cannot be used: said once (a file of the
 * wrong mode on one node must not go unnoticed, nor fill stderr).
 */
static void say_unusable(const char *var, const char *path, const char *why)
{
	if (L.token_unusable_said)
		return;
	L.token_unusable_said = true;
	fprintf(stderr, "flightrec: rank %u: %s=%s: %s; not connecting to the daemon at %s until it can be read (recording and dumping locally meanwhile, reading it again before each attempt)\n",
		fr_agent.id.rank, var, path, why, L.where);
}

/*
 * Reads FLIGHTREC_JOB_KEY_FILE. Its key is used whether or not a token
 * file is set too: a launcher that hands a job its key means that key.
 */
static bool load_job_key(void)
{
	static bool said_both;
	const char *why;
	bool others;
	int rc;

	if (L.token_path[0] && fr_agent.id.rank == 0 && !said_both)
		fprintf(stderr, "flightrec: both FLIGHTREC_JOB_KEY_FILE and FLIGHTREC_TOKEN_FILE are set; using the job key of %s\n",
			L.key_path);
	said_both = true;
	rc = fr_wire_job_key_read(L.key_path, L.job_key, &why, &others);
	if (rc) {
		say_unusable("FLIGHTREC_JOB_KEY_FILE", L.key_path, why ? why : strerror(-rc));
		return false;
	}
	L.have_job_key = true;
	if (others && fr_agent.id.rank == 0)
		fprintf(stderr, "flightrec: FLIGHTREC_JOB_KEY_FILE=%s is readable by other users\n",
			L.key_path);
	return true;
}

/*
 * Reads FLIGHTREC_JOB_KEY_FILE or FLIGHTREC_TOKEN_FILE on this thread, so
 * that a slow file system never holds up the application's MPI_Init.
 * Returns whether the link may connect: nothing is configured, or it was
 * read. A file that cannot be read fails closed (the link would otherwise
 * obey whoever listens on the address) and is read again on the next
 * attempt: a file fixed while the job runs is taken.
 */
static bool load_token(void)
{
	const char *why;
	bool others;
	int rc;

	if (L.token_loaded || !L.auth_wanted)
		return true;
	if (L.path_too_long)
		return false; /* fr_link_start() said so */
	if (L.key_path[0]) {
		L.token_loaded = load_job_key();
	} else if (L.token_path[0]) {
		rc = fr_wire_token_read(L.token_path, &L.token, &why, &others);
		if (rc) {
			say_unusable("FLIGHTREC_TOKEN_FILE", L.token_path, why ? why : strerror(-rc));
			return false;
		}
		L.token_loaded = true;
		if (others && fr_agent.id.rank == 0)
			fprintf(stderr, "flightrec: FLIGHTREC_TOKEN_FILE=%s is readable by other users\n",
				L.token_path);
	}
	if (L.token_loaded && L.token_unusable_said)
		fprintf(stderr, "flightrec: rank %u: %s read; connecting to the daemon at %s\n",
			fr_agent.id.rank, L.key_path[0] ? L.key_path : L.token_path,
			L.where);
	return L.token_loaded;
}

/*
 * Resolves the daemon's address on this thread. Numeric addresses need no
 * lookup; a host name is resolved with a blocking getaddrinfo, which delays
 * only this thread (uv_getaddrinfo would start libuv's thread pool: four
 * more threads inside the application for one lookup).
 */
static int resolve(struct sockaddr_storage *out)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	int port = atoi(L.ep.port);

	if (uv_ip4_addr(L.ep.host, port, (struct sockaddr_in *)out) == 0 ||
	    uv_ip6_addr(L.ep.host, port, (struct sockaddr_in6 *)out) == 0)
		return 0;
	if (getaddrinfo(L.ep.host, L.ep.port, &hints, &res) != 0 || !res)
		return -EHOSTUNREACH;
	memcpy(out, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

/*
 * A socket that fr_socket_check() refused, the node daemon's one (`found`)
 * or FLIGHTREC_ADDR's: said once, then quiet.
 */
static void say_socket_refused(const char *path, const char *why, bool found)
{
	if (L.socket_refusal_said)
		return;
	L.socket_refusal_said = true;
	if (found)
		fprintf(stderr, "flightrec: rank %u: not connecting to the node daemon's socket %s: it %s (anyone could have put it there); recording and dumping locally meanwhile, checking it again before each attempt\n",
			fr_agent.id.rank, path, why);
	else
		fprintf(stderr, "flightrec: rank %u: FLIGHTREC_ADDR=unix:%s: not connecting: the socket %s (anyone could have put it there); recording and dumping locally meanwhile, checking it again before each attempt\n",
			fr_agent.id.rank, path, why);
}

/*
 * Where this attempt connects, into L.ep and L.where: FLIGHTREC_ADDR when
 * it is set; else the node daemon's socket when one is there. A socket is
 * connected to only when fr_socket_check() trusts it; checked before every
 * attempt (stat()s on the link thread only), so that a daemon started
 * after the job is found. Returns false when there is nowhere to connect
 * this time.
 */
static bool pick_endpoint(void)
{
	char why[PATH_MAX + 128];
	int rc;

	if (L.addr_given) {
		if (!L.ep.is_unix)
			return true;
		rc = fr_socket_check(L.ep.path, geteuid(), why, sizeof(why));
		if (rc && rc != -ENOENT)
			say_socket_refused(L.ep.path, why, false);
		return rc == 0;
	}
	rc = L.node_socket[0] ? fr_socket_check(L.node_socket, geteuid(), why, sizeof(why)) :
				-ENOENT;
	if (rc == 0) {
		L.ep.is_unix = true;
		snprintf(L.ep.path, sizeof(L.ep.path), "%s", L.node_socket);
		snprintf(L.where, sizeof(L.where), FR_UNIX_PREFIX "%s", L.node_socket);
		return true;
	}
	if (rc != -ENOENT)
		say_socket_refused(L.node_socket, why, true);
	return false;
}

static void start_connect(void)
{
	struct sockaddr_storage addr;

	if (L.addr_bad || L.stopping || L.state != LINK_IDLE)
		return;
	memset(&addr, 0, sizeof(addr));
	if (!load_token() || !pick_endpoint()) {
		retry_later();
		return;
	}
	if (L.ep.is_unix) {
		if (uv_pipe_init(&L.loop, &L.sock.pipe, 0) < 0) {
			retry_later();
			return;
		}
		L.state = LINK_CONNECTING;
		/* Fails through on_connected(), never here. */
		uv_pipe_connect(&L.connect_req, &L.sock.pipe, L.ep.path, on_connected);
		return;
	}
	if (resolve(&addr) < 0 || uv_tcp_init(&L.loop, &L.sock.tcp) < 0) {
		retry_later();
		return;
	}
	L.state = LINK_CONNECTING;
	if (uv_tcp_connect(&L.connect_req, &L.sock.tcp, (struct sockaddr *)&addr, on_connected) < 0)
		disconnect();
}

/* ---- the loop ---- */

static void local_watchdog(void)
{
	static struct fr_wire_inflight ops[MAX_INFLIGHT];
	const struct fr_wire_inflight *stuck = NULL;
	uint64_t sig, oldest;
	uint32_t n;
	char incident[FR_INCIDENT_MAX + 1], reason[FR_REASON_MAX + 1];

	if (L.state == LINK_UP)
		return;
	n = scan_inflight(ops, MAX_INFLIGHT, fr_now_ns(), false, &sig, &oldest);
	for (uint32_t i = 0; i < n && !stuck; i++)
		if (!(ops[i].flags & FR_WIRE_INFLIGHT_NONBLOCKING) ||
		    (ops[i].flags & FR_WIRE_INFLIGHT_WAITED))
			stuck = &ops[i];
	if (!stuck || (double)stuck->age_ms < fr_agent.cfg.timeout_s * 1000 ||
	    oldest == L.local_dumped)
		return;
	L.local_dumped = oldest;
	watchdog_incident_id(incident, sizeof(incident), stuck);
	snprintf(reason, sizeof(reason), "local watchdog: %s #%llu on %s in flight for %llu ms",
		 fr_op_name(stuck->type), (unsigned long long)stuck->seq, stuck->comm,
		 (unsigned long long)stuck->age_ms);
	fprintf(stderr, "flightrec: rank %u: %s; no daemon reachable, dumping locally\n",
		fr_agent.id.rank, reason);
	dump(incident, reason, false);
}

/*
 * Asks NCCL for its communicators' asynchronous errors (at most every tick,
 * from this thread), says each new one on stderr, and sends those the
 * daemon has not had to a daemon of protocol 6.
 */
static void nccl_errors(void)
{
	struct fr_msg_nccl_error m;
	char name[24];

	while (fr_nccl_poll_errors(&m)) {
		fprintf(stderr, "flightrec: rank %u: NCCL error on %s: %s%s%s\n", fr_agent.id.rank,
			m.comm, fr_nccl_result_name(m.result, name), m.message[0] ? ": " : "",
			m.message);
		if (L.nccl_errors < MAX_NCCL_ERRORS) {
			L.nccl_error[L.nccl_errors] = m;
			__atomic_store_n(&L.nccl_errors, L.nccl_errors + 1, __ATOMIC_RELEASE);
		}
	}
	while (L.state == LINK_UP && L.crash_reads && L.nccl_errors_sent < L.nccl_errors &&
	       SEND_MSG(nccl_error, &L.nccl_error[L.nccl_errors_sent], SEND_KEEP) == 0)
		L.nccl_errors_sent++;
}

static void on_tick(uv_timer_t *t)
{
	uint64_t now = fr_mono_ms();

	(void)t;
	fr_clock_recalibrate();
	fr_gpu_poll();
	fr_crash_recheck();
	nccl_errors();
	if (L.state == LINK_UP) {
		announce_comms();
		send_progress(false);
		send_timing();
		if (now - L.last_heartbeat_ms >= HEARTBEAT_MS) {
			send_heartbeat();
			L.last_heartbeat_ms = now;
		}
	}
	local_watchdog();
}

static void close_all(void)
{
	uv_handle_t *handles[] = { (uv_handle_t *)&L.wake, (uv_handle_t *)&L.tick,
				   (uv_handle_t *)&L.retry, (uv_handle_t *)&L.challenge,
				   (uv_handle_t *)&L.defer, (uv_handle_t *)&L.crash_linger };

	for (size_t i = 0; i < sizeof(handles) / sizeof(handles[0]); i++)
		if (!uv_is_closing(handles[i]))
			uv_close(handles[i], NULL);
	/* The descriptor's number may be reused once closed: a crash after
	 * this must not write its frame there. */
	fr_crash_set_fd(-1);
	if (link_open()) {
		L.state = LINK_CLOSING;
		uv_close(&L.sock.handle, on_closed);
	}
}

static void on_grace(uv_timer_t *t)
{
	(void)t;
	close_all();
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
	(void)status;
	free(req);
	close_all();
}

/* Last progress and goodbye, flushed (bounded), then everything closes. */
static void say_goodbye(void)
{
	struct fr_msg_bye bye = { 0 };
	uv_shutdown_t *req = malloc(sizeof(*req));

	announce_comms();
	send_progress(false);
	SEND_MSG(bye, &bye, SEND_KEEP);
	if (req && uv_shutdown(req, &L.sock.stream, on_shutdown) == 0) {
		/* Bounded: if the daemon does not read, close anyway. */
		uv_timer_start(&L.tick, on_grace, STOP_GRACE_MS, 0);
		return;
	}
	free(req);
	close_all();
}

/* The connection closes once EXIT is flushed (bounded), as after BYE. */
static void close_after_exit(void)
{
	uv_shutdown_t *req = malloc(sizeof(*req));

	if (req && uv_shutdown(req, &L.sock.stream, on_shutdown) == 0) {
		uv_timer_start(&L.tick, on_grace, STOP_GRACE_MS / 2, 0);
		return;
	}
	free(req);
	close_all();
}

/*
 * Exit without finalising, to a daemon of protocol 6: last progress, then
 * EXIT instead of BYE. When it is a fault the daemon opens an incident at
 * once and asks this rank for its dump too: the link lingers for that as
 * after a crash (at least CRASH_LINGER_MIN_MS, so that the other ranks,
 * asked at the same time, can answer before the launcher kills them, and
 * at most CRASH_LINGER_MS).
 */
static void say_exit(void)
{
	static struct fr_wire_inflight ops[MAX_INFLIGHT];
	struct fr_msg_exit *m = &L.exit_msg;
	uint64_t sig, oldest;
	uint32_t n, blocking = 0;
	struct fr_exit e;

	announce_comms();
	send_progress(false);
	n = scan_inflight(ops, MAX_INFLIGHT, fr_now_ns(), false, &sig, &oldest);
	for (uint32_t i = 0; i < n; i++)
		if (!(ops[i].flags & FR_WIRE_INFLIGHT_NONBLOCKING) ||
		    (ops[i].flags & FR_WIRE_INFLIGHT_WAITED))
			blocking++;
	m->inflight = blocking;
	m->time_ns = fr_now_ns();
	m->ring_head = fr_ring_head(&fr_agent.ring);
	__atomic_store_n(&L.exit_sent, true, __ATOMIC_RELEASE);
	if (SEND_MSG(exit, m, SEND_KEEP) < 0) {
		close_after_exit();
		return;
	}
	fr_exit_from_wire(&e, m);
	if (!fr_exit_is_fault(&e)) {
		close_after_exit();
		return;
	}
	L.exit_lingering = true;
	L.crash_lingering = true;
	L.crash_ms = fr_mono_ms();
	uv_timer_start(&L.crash_linger, on_crash_linger, CRASH_LINGER_MS, 0);
}

/*
 * Finalise or exit. A process that ends before its first connection was
 * made (a short NCCL program) still tells the daemon who it was and that
 * it finished: the connection is given STOP_GRACE_MS to come up.
 */
static void begin_stop(void)
{
	uv_timer_stop(&L.retry);
	if (L.state == LINK_IDLE)
		start_connect();
	L.stopping = true;
	if (L.state == LINK_UP && __atomic_load_n(&L.exiting, __ATOMIC_ACQUIRE) && L.crash_reads) {
		say_exit();
	} else if (L.state == LINK_UP) {
		say_goodbye();
	} else if (L.state == LINK_CONNECTING || L.state == LINK_AUTH || L.state == LINK_VERIFY) {
		L.goodbye_on_connect = true;
		uv_timer_start(&L.tick, on_grace, STOP_GRACE_MS, 0);
		/* Still waiting for a challenge or a proof: not past half the grace. */
		if (L.state == LINK_AUTH || L.state == LINK_VERIFY)
			uv_timer_start(&L.challenge, on_challenge_timeout, STOP_GRACE_MS / 2, 0);
	} else {
		close_all();
	}
}

/* A crash's frame, behind what the link has queued (crash.c). */
static int send_crash(void *buf, unsigned long len)
{
	return send_frame(buf, len, SEND_KEEP);
}

/* A crash's local dump: kept here only; the daemon asks for its own. */
static void save_crash(const char *incident, const char *reason)
{
	struct fr_dumper_scope scope = { FR_WIRE_LIVE_NONE, 0 };
	char *buf = NULL, path[1024], err[600];
	size_t len = 0;
	int rc = fr_dumper_serialize(incident, reason, &scope, &buf, &len);

	if (!rc)
		rc = fr_dumper_save(incident, buf, len, false, path, sizeof(path), err, sizeof(err));
	if (rc)
		fprintf(stderr, "flightrec: rank %u: crash dump not written: %s\n", fr_agent.id.rank,
			strerror(-rc));
	free(buf);
}

static void close_after_exit(void);

/* The linger after a crash or an exit is over: the crash handler may let
 * the process die, an exiting link closes. */
static void on_crash_linger(uv_timer_t *t)
{
	(void)t;
	L.crash_lingering = false;
	if (L.exit_lingering) {
		L.exit_lingering = false;
		close_after_exit();
		return;
	}
	fr_crash_dumped();
}

static void on_wake(uv_async_t *a)
{
	bool stop, want_dump;
	char reason[FR_REASON_MAX + 1];

	(void)a;
	if (fr_crash_serve(send_crash, save_crash)) {
		/* A daemon that reads CRASH opens an incident at once and asks
		 * this rank for its dump too: wait a little for that. */
		if (L.state == LINK_UP && L.crash_reads) {
			L.crash_lingering = true;
			L.crash_ms = fr_mono_ms();
			uv_timer_start(&L.crash_linger, on_crash_linger, CRASH_LINGER_MS, 0);
		} else {
			fr_crash_dumped();
		}
	}
	pthread_mutex_lock(&L.lock);
	stop = __atomic_load_n(&L.stop_requested, __ATOMIC_ACQUIRE);
	want_dump = L.dump_requested;
	L.dump_requested = false;
	memcpy(reason, L.dump_reason, sizeof(reason));
	pthread_mutex_unlock(&L.lock);
	if (want_dump) {
		char incident[FR_INCIDENT_MAX + 1];

		app_incident_id(incident, sizeof(incident));
		dump(incident, reason, false);
	}
	if (stop && !L.stopping)
		begin_stop();
}

/*
 * Reads FLIGHTREC_ADDR and FLIGHTREC_NODE_SOCKET (at start, with the
 * application's other settings). An address that does not parse is said
 * once and never connected to; the agent still records and dumps locally.
 */
static void read_endpoint(void)
{
	const char *node = getenv("FLIGHTREC_NODE_SOCKET");
	const char *why;

	if (!node || !*node)
		node = FR_NODE_SOCKET;
	if (strlen(node) < sizeof(L.node_socket) && node[0] == '/')
		snprintf(L.node_socket, sizeof(L.node_socket), "%s", node);
	else
		fprintf(stderr, "flightrec: FLIGHTREC_NODE_SOCKET=%s is not an absolute path of at most %d bytes; not trying a node socket\n",
			node, FR_UNIX_PATH_MAX - 1);
	L.addr_given = fr_agent.cfg.addr[0] != '\0';
	if (!L.addr_given) {
		snprintf(L.where, sizeof(L.where), "%s%s", FR_UNIX_PREFIX, L.node_socket);
		return;
	}
	snprintf(L.where, sizeof(L.where), "%s", fr_agent.cfg.addr);
	if (fr_endpoint_parse(fr_agent.cfg.addr, &L.ep, &why) < 0) {
		L.addr_bad = true;
		fprintf(stderr, "flightrec: FLIGHTREC_ADDR=%s: %s; not connecting\n",
			fr_agent.cfg.addr, why);
	}
}

static void *link_main(void *arg)
{
	(void)arg;
	/* Recognisable in top, gdb and our own dumps. */
	pthread_setname_np(pthread_self(), "flightrec");
	uv_run(&L.loop, UV_RUN_DEFAULT);
	return NULL;
}

int fr_link_start(void)
{
	const char *token_path;
	const char *key_path;
	const char *too_long = NULL;
	sigset_t all, old;
	int rc;

	memset(&L, 0, sizeof(L));
	pthread_mutex_init(&L.lock, NULL);
	L.backoff_ms = BACKOFF_MIN_MS;
	read_endpoint();
	/* Read here, with the application's other settings; the file itself
	 * is read on the link thread. */
	token_path = getenv("FLIGHTREC_TOKEN_FILE");
	key_path = getenv("FLIGHTREC_JOB_KEY_FILE");
	L.auth_wanted = (token_path && *token_path) || (key_path && *key_path);
	if (token_path && strlen(token_path) < sizeof(L.token_path))
		snprintf(L.token_path, sizeof(L.token_path), "%s", token_path);
	else if (token_path && *token_path && !(key_path && *key_path))
		too_long = "FLIGHTREC_TOKEN_FILE"; /* the key, when set, is what counts */
	if (key_path && strlen(key_path) < sizeof(L.key_path))
		snprintf(L.key_path, sizeof(L.key_path), "%s", key_path);
	else if (key_path && *key_path)
		too_long = "FLIGHTREC_JOB_KEY_FILE";
	if (too_long) {
		L.path_too_long = true;
		say_unusable(too_long, "...", "too long a path");
	}
	rc = uv_loop_init(&L.loop);
	if (rc < 0)
		return rc;
	uv_async_init(&L.loop, &L.wake, on_wake);
	uv_timer_init(&L.loop, &L.tick);
	uv_timer_init(&L.loop, &L.retry);
	uv_timer_init(&L.loop, &L.challenge);
	uv_timer_init(&L.loop, &L.defer);
	uv_timer_init(&L.loop, &L.crash_linger);
	uv_timer_start(&L.tick, on_tick, TICK_MS, TICK_MS);
	/* The first connection attempt (which may resolve a host name) runs
	 * on the link thread, never in the application's MPI_Init. */
	uv_timer_start(&L.retry, on_retry, 0, 0);
	/* The application's signal handlers must never run on our thread,
	 * except for a fault of its own: a synchronous fault in a thread that
	 * blocks the signal is the default action's, never the crash
	 * handler's (crash.c). */
	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGTRAP);
	sigdelset(&all, SIGSYS);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&L.thread, NULL, link_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		uv_loop_close(&L.loop);
		return -rc;
	}
	L.running = true;
	return 0;
}

void fr_link_stop(void)
{
	struct timespec deadline;

	if (!L.running)
		return;
	/* No lock: an _exit() from a signal handler may have interrupted a
	 * thread holding it (fr_link_exit()). */
	__atomic_store_n(&L.stop_requested, true, __ATOMIC_RELEASE);
	uv_async_send(&L.wake);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 2;
	if (pthread_timedjoin_np(L.thread, NULL, &deadline) != 0) {
		/* Never hold up the application's exit. */
		pthread_detach(L.thread);
		L.running = false;
		return;
	}
	L.running = false;
	uv_loop_close(&L.loop);
	free(L.rbuf);
	L.rbuf = NULL;
	explicit_bzero(&L.token, sizeof(L.token));
	explicit_bzero(L.job_key, sizeof(L.job_key));
}

void fr_link_exit(int code, bool code_known, bool underscore, bool finalised)
{
	struct fr_msg_exit *m = &L.exit_msg;

	if (!L.running)
		return;
	m->code = code_known ? code : 0;
	m->flags = (code_known ? FR_WIRE_EXIT_CODE_KNOWN : 0) |
		   (underscore ? FR_WIRE_EXIT_UNDERSCORE : 0) |
		   (finalised ? FR_WIRE_EXIT_FINALISED : 0);
	__atomic_store_n(&L.exiting, true, __ATOMIC_RELEASE);
	fr_link_stop();
}

void fr_link_nccl_error_to_trace(struct fr_trace *t)
{
	if (!__atomic_load_n(&L.nccl_errors, __ATOMIC_ACQUIRE))
		return;
	fr_nccl_error_from_wire(&t->nccl_error, &L.nccl_error[0]);
	t->has_nccl_error = true;
}

void fr_link_exit_to_trace(struct fr_trace *t)
{
	if (!__atomic_load_n(&L.exit_sent, __ATOMIC_ACQUIRE))
		return;
	fr_exit_from_wire(&t->exit, &L.exit_msg);
	t->has_exit = true;
}

bool fr_link_wake_from_signal(void)
{
	/* uv_async_send() is async-signal-safe (libuv's documentation). */
	if (!__atomic_load_n(&L.running, __ATOMIC_ACQUIRE))
		return false;
	uv_async_send(&L.wake);
	return true;
}

int fr_link_request_dump(const char *reason)
{
	if (!L.running)
		return -ENOTCONN;
	pthread_mutex_lock(&L.lock);
	L.dump_requested = true;
	snprintf(L.dump_reason, sizeof(L.dump_reason), "%s", reason);
	pthread_mutex_unlock(&L.lock);
	uv_async_send(&L.wake);
	return 0;
}

void fr_link_forget_in_child(void)
{
	/* The child must not hold the parent's connection open: when the
	 * parent dies, the daemon should see the disconnect at once. */
	if (link_open()) {
		uv_os_fd_t fd;

		if (uv_fileno(&L.sock.handle, &fd) == 0)
			close(fd);
	}
	if (L.running) {
		int fd = uv_backend_fd(&L.loop);

		if (fd >= 0)
			close(fd);
	}
	L.running = false;
	L.state = LINK_IDLE;
}
