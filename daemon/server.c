/*
 * The agent-facing server: accepts connections on --listen (TCP) and on
 * --agent-socket (a Unix socket; agent_socket.c readies its file), handles
 * both kinds as one uv_stream_t from then on, reassembles frames from each
 * byte stream, decodes them and hands them to the registry and the
 * incident collector. A connection that sends anything malformed is closed,
 * counted and logged; everyone else keeps being served.
 *
 * With --token-file, every connection starts with a CHALLENGE (a fresh
 * random nonce) and must answer with AUTH, whose proof covers the HELLO
 * that follows (protocol/PROTOCOL.md). Until that HELLO is verified the
 * connection can do nothing else: any other frame closes it, a frame
 * longer than the largest HELLO is refused from its header, and one that
 * has not proved itself within --hello-timeout is closed. An agent that
 * sent DAEMON_CHALLENGE first is answered, once its HELLO is verified, with
 * DAEMON_PROOF: the daemon proves the token in turn. Without a token,
 * connections are served as in protocol version 1, but the same deadline
 * holds: a connection that never says HELLO is closed.
 *
 * Connections that have not said HELLO are also counted per peer address
 * (pending.c; an IPv6 peer by its /64, a Unix peer by its uid: it has no
 * address, and its uid is the kernel's word), so that one address cannot hold
 * the daemon's connections without registering. Many addresses together
 * cannot either: at most half of --max-connections may wait for their
 * HELLO at once, and at --max-connections, or at that half, the
 * connection that has waited longest is closed for the newcomer instead
 * of the newcomer being refused. A real agent says HELLO within
 * milliseconds, so it is never the one waiting longest; a registered rank
 * is never closed for a newcomer. accept() failing (no descriptor left)
 * is logged once a minute, never once per attempt.
 */
#include "server.h"
#include "straggler.h"
#include "daemon.h"
#include "addr.h"
#include "agent_socket.h"
#include "clock.h"
#include "incident.h"
#include "log.h"
#include "look.h"
#include "node_look.h"
#include "nodes.h"
#include "cluster_incident.h"
#include "pending.h"
#include "ratelog.h"
#include "registry.h"

#include "../protocol/frame.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define LISTEN_BACKLOG 511
/* How often connections are checked against --hello-timeout. */
#define HELLO_SWEEP_MS 250
/*
 * Refusals for authentication logged per window: a job started without
 * its token has every rank retry, and the log must stay readable. The rest
 * are counted in one line when the window ends (and in /metrics).
 */
#define AUTH_LOG_BURST 10
#define AUTH_LOG_WINDOW_NS (10ull * NS_PER_S)

struct conn_write {
	uv_write_t req;
	struct conn *conn;
	uint8_t frame[];
};

/*
 * A connection as the server allocates it: what the registry and the
 * incidents see (struct conn), and the authentication state only this file
 * needs.
 */
struct server_conn {
	struct conn conn;
	uint64_t accepted_mono;
	uint64_t accepted_turn;   /* uv_now() when accepted: the loop's turn */
	/* Counted in pending.c under `addr` (daemon_addr_key()) and queued in
	 * the oldest-first list of connections waiting for their HELLO, until
	 * its HELLO is accepted. */
	bool pending;
	struct server_conn *pending_prev;
	struct server_conn *pending_next;
	char addr[INET6_ADDRSTRLEN + 8];
	bool challenged;       /* a CHALLENGE was sent: the peer reads version 2 */
	bool node_daemon;      /* a NODE_HELLO came: the peer reads ERROR, token or not */
	bool have_proof;       /* AUTH arrived; the HELLO it proves comes next */
	uint8_t nonce[FR_WIRE_NONCE_SIZE];
	uint8_t proof[FR_WIRE_PROOF_SIZE];
	/* DAEMON_CHALLENGE arrived: the agent wants this daemon's proof too. */
	bool have_agent_nonce;
	uint8_t agent_nonce[FR_WIRE_NONCE_SIZE];
};

/* One daemon per process: the sweep of connections without a HELLO and the
 * limit on how often their refusal is logged. */
static uv_timer_t hello_timer;
static bool hello_timer_started;
/* The connections waiting for their HELLO, oldest first (d->npending of them). */
static struct server_conn *pending_oldest;
static struct server_conn *pending_newest;
static struct {
	uint64_t window_mono;
	unsigned logged;
	uint64_t suppressed;
} auth_log;

static struct server_conn *server_conn(struct conn *c)
{
	return (struct server_conn *)((char *)c - offsetof(struct server_conn, conn));
}

static bool daemon_has_token(const struct flightrecd *d)
{
	return d->cfg.token.len > 0;
}

/*
 * Copies a string an unauthenticated peer sent, for a log line: anything
 * but printable ASCII becomes '?', so that it cannot forge lines.
 */
static void log_safe(char *dst, size_t cap, const char *src)
{
	size_t i;

	for (i = 0; src[i] && i + 1 < cap; i++)
		dst[i] = src[i] >= 0x20 && src[i] < 0x7f ? src[i] : '?';
	dst[i] = '\0';
}

/*
 * Best effort: tells a peer that reads version 2 why it is being closed.
 * Written at once or not at all, since the connection closes next.
 */
static void conn_send_error(struct conn *c, uint16_t code, const char *message)
{
	struct fr_msg_error m = { .code = code };
	uint8_t frame[FR_WIRE_HEADER_SIZE + 2 + 2 + FR_REASON_MAX];
	uv_buf_t buf;
	int n;

	if (c->closing || !(server_conn(c)->challenged || server_conn(c)->node_daemon))
		return;
	snprintf(m.message, sizeof(m.message), "%s", message);
	n = fr_wire_error_encode(&m, frame, sizeof(frame));
	if (n < 0)
		return;
	buf = uv_buf_init((char *)frame, (unsigned)n);
	uv_try_write(&c->sock.stream, &buf, 1);
}

/*
 * Who a connection is, for the limits' log lines: its job and rank once
 * its HELLO was accepted, else its address without the port (a peer
 * reconnecting in a loop comes from a new port each time).
 */
static void conn_offender(const struct conn *c, char *out, size_t cap)
{
	if (c->job)
		snprintf(out, cap, "job %s rank %" PRIu32, c->job->id, c->rank);
	else
		ratelog_offender_addr(c->peer, out, cap);
}

/* Logged once per offender and kind of frame a minute, with a count. */
static void conn_log_reject(const struct conn *c, unsigned type, const char *why)
{
	const char *name = fr_msg_name(type);
	char who[FR_JOB_MAX + 32] = "";
	char offender[FR_JOB_MAX + 32];
	char limit[48];
	char what[32];

	if (c->job)
		snprintf(who, sizeof(who), " (job %s rank %" PRIu32 ")", c->job->id, c->rank);
	if (name)
		snprintf(what, sizeof(what), "%s", name);
	else if (type == 0)
		snprintf(what, sizeof(what), "frame header");
	else
		snprintf(what, sizeof(what), "message type %u", type);
	conn_offender(c, offender, sizeof(offender));
	snprintf(limit, sizeof(limit), "frame %s", what);
	ratelog(limit, offender, "rejected frame from %s%s: %s: %s; closing the connection",
		c->peer, who, what, why);
}

/* Closes a connection over a bad frame; the caller holds the lock. */
static void conn_reject(struct conn *c, unsigned type, const char *why)
{
	c->d->m.frames_rejected++;
	c->rejected = true;
	conn_log_reject(c, type, why);
	conn_send_error(c, FR_WIRE_ERR_PROTOCOL, why);
	conn_close(c);
}

static void conn_reject_err(struct conn *c, unsigned type, int err)
{
	conn_reject(c, type, strerror(-err));
}

static void on_conn_closed(uv_handle_t *h)
{
	struct conn *c = h->data;
	struct flightrecd *d = c->d;

	pthread_mutex_lock(&d->lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		d->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	d->nconns--;
	pthread_mutex_unlock(&d->lock);
	free(c->buf);
	free(server_conn(c));
}

/* The connection no longer waits for its HELLO: it said it, or is closing. */
static void conn_hello_settled(struct conn *c)
{
	struct server_conn *sc = server_conn(c);

	if (!sc->pending)
		return;
	pending_remove(sc->addr);
	sc->pending = false;
	if (sc->pending_prev)
		sc->pending_prev->pending_next = sc->pending_next;
	else
		pending_oldest = sc->pending_next;
	if (sc->pending_next)
		sc->pending_next->pending_prev = sc->pending_prev;
	else
		pending_newest = sc->pending_prev;
	sc->pending_prev = sc->pending_next = NULL;
	c->d->npending--;
}

/*
 * At most this many connections may wait for their HELLO at once: half of
 * --max-connections, so that ranks registering always find room without
 * having to outrun a flood of connections that never register.
 */
static size_t pending_cap(const struct flightrecd *d)
{
	return d->cfg.max_connections / 2 ? d->cfg.max_connections / 2 : 1;
}

/*
 * Closes the connection that has waited longest for its HELLO, so that a
 * newcomer takes its place (`why`: the limit reached). Returns false when
 * no connection is waiting (every one open has registered), or when the
 * oldest was accepted in this turn of the loop: the loop accepts a whole
 * burst before it reads any socket, and a rank's HELLO may be waiting
 * unread in its socket; the burst is refused instead.
 */
static bool server_evict_pending(struct flightrecd *d, const char *why)
{
	struct server_conn *sc = pending_oldest;
	double waited;

	if (!sc || sc->accepted_turn == uv_now(d->loop))
		return false;
	waited = (double)(daemon_mono_ns() - sc->accepted_mono) / (double)NS_PER_S;
	d->m.pending_evicted++;
	ratelog("pending evicted", sc->addr,
		"closing the connection from %s: no hello after %.1f s and %s; a newer connection takes its place",
		sc->conn.peer, waited, why);
	conn_close(&sc->conn);
	return true;
}

void conn_close(struct conn *c)
{
	if (c->closing)
		return;
	c->closing = true;
	conn_hello_settled(c);
	if (c->node) {
		cluster_incident_node_lost(c->d, c->node->name);
		nodes_conn_lost(c->node, c);
	}
	registry_conn_lost(c->d, c);
	look_conn_closed(c);
	if (c->node)
		node_look_conn_closed(c);
	uv_read_stop(&c->sock.stream);
	uv_close(&c->sock.handle, on_conn_closed);
}

static void on_write_done(uv_write_t *req, int status)
{
	struct conn_write *w = (struct conn_write *)req;
	struct conn *c = w->conn;

	free(w);
	if (status == 0 || status == UV_ECANCELED)
		return;
	pthread_mutex_lock(&c->d->lock);
	if (!c->closing) {
		daemon_log("cannot write to %s: %s; closing the connection", c->peer,
			   uv_strerror(status));
		conn_close(c);
	}
	pthread_mutex_unlock(&c->d->lock);
}

/* Queues a frame of `n` bytes encoded in w->frame; frees w on failure. */
static int conn_write_frame(struct conn *c, struct conn_write *w, int n)
{
	uv_buf_t buf;
	int err;

	if (n < 0) {
		free(w);
		return n;
	}
	w->conn = c;
	buf = uv_buf_init((char *)w->frame, (unsigned)n);
	err = uv_write(&w->req, &c->sock.stream, &buf, 1, on_write_done);
	if (err) {
		free(w);
		return err;
	}
	return 0;
}

int conn_send_dump_request(struct conn *c, const char *incident, const char *reason)
{
	struct fr_msg_dump_request m = { 0 };
	struct conn_write *w;
	size_t size;

	if (c->closing)
		return -EPIPE;
	snprintf(m.incident, sizeof(m.incident), "%s", incident);
	snprintf(m.reason, sizeof(m.reason), "%s", reason);
	size = fr_wire_dump_request_size(&m);
	w = malloc(sizeof(*w) + size);
	if (!w)
		return -ENOMEM;
	return conn_write_frame(c, w, fr_wire_dump_request_encode(&m, w->frame, size));
}

/* Encodes and queues message `m` of kind `n` on connection `c`. */
#define CONN_SEND(c, n, m)                                                                   \
	({                                                                                   \
		size_t size_ = fr_wire_##n##_size(m);                                        \
		struct conn_write *w_ = (c)->closing ? NULL : malloc(sizeof(*w_) + size_);   \
		(c)->closing ? -EPIPE :                                                      \
		w_ ? conn_write_frame((c), w_, fr_wire_##n##_encode((m), w_->frame, size_)) : \
		     -ENOMEM;                                                                \
	})

int conn_send_node_dump_request(struct conn *c, const struct fr_msg_node_dump_request *m)
{
	return CONN_SEND(c, node_dump_request, m);
}

int conn_send_node_fetch(struct conn *c, const struct fr_msg_node_fetch *m)
{
	return CONN_SEND(c, node_fetch, m);
}

int conn_send_node_look_request(struct conn *c, const struct fr_msg_node_look_request *m)
{
	return CONN_SEND(c, node_look_request, m);
}

/* Sends the connection's CHALLENGE, with a nonce drawn for it alone. */
static int conn_send_challenge(struct conn *c)
{
	struct server_conn *sc = server_conn(c);
	struct fr_msg_challenge m;
	struct conn_write *w;
	size_t size;
	ssize_t got;

	/* Never blocks the loop: before the kernel's pool is ready, refuse. */
	got = getrandom(sc->nonce, sizeof(sc->nonce), GRND_NONBLOCK);
	if (got != (ssize_t)sizeof(sc->nonce))
		return got < 0 ? -errno : -EIO;
	memcpy(m.nonce, sc->nonce, sizeof(m.nonce));
	size = fr_wire_challenge_size(&m);
	w = malloc(sizeof(*w) + size);
	if (!w)
		return -ENOMEM;
	sc->challenged = true;
	return conn_write_frame(c, w, fr_wire_challenge_encode(&m, w->frame, size));
}

/*
 * Logs the refusal of a connection that did not prove the token, within
 * AUTH_LOG_BURST lines per AUTH_LOG_WINDOW_NS; `m` is the HELLO it sent,
 * NULL if none.
 */
static void auth_log_refusal(struct conn *c, const struct fr_msg_hello *m, const char *why)
{
	uint64_t now = daemon_mono_ns();
	char job[FR_JOB_MAX + 1], host[FR_HOST_MAX + 1];

	if (now - auth_log.window_mono >= AUTH_LOG_WINDOW_NS) {
		if (auth_log.suppressed)
			daemon_log("%" PRIu64 " more agent connections refused for authentication were not logged",
				   auth_log.suppressed);
		auth_log.window_mono = now;
		auth_log.logged = 0;
		auth_log.suppressed = 0;
	}
	if (auth_log.logged == AUTH_LOG_BURST) {
		auth_log.suppressed++;
		return;
	}
	auth_log.logged++;
	if (!m) {
		daemon_log("refusing the connection from %s: %s", c->peer, why);
		return;
	}
	/* Nothing it said is trusted yet: printed, never used. */
	log_safe(job, sizeof(job), m->job);
	log_safe(host, sizeof(host), m->host);
	daemon_log("refusing the connection from %s (claims job %s rank %" PRIu32 ", host %s pid %" PRIu32 "): %s",
		   c->peer, job, m->rank, host, m->pid, why);
}

/* Refuses a connection that did not prove the token; the caller holds the lock. */
static void auth_refuse(struct conn *c, const struct fr_msg_hello *m, uint16_t code,
			const char *why, const char *message)
{
	c->d->m.auth_failures++;
	auth_log_refusal(c, m, why);
	conn_send_error(c, code, message);
	conn_close(c);
}

/*
 * Refuses an agent's HELLO for a job node daemons hold and this daemon's
 * registry does not (docs/SCALE-OUT.md: a job id is held by one kind of
 * peer, whichever came first), and closes the connection. The caller
 * holds the lock.
 */
static bool hello_job_on_nodes(struct conn *c, const struct fr_msg_hello *m)
{
	const char *node;
	char why[FR_JOB_MAX + FR_HOST_MAX + 128];

	if (registry_job_find(c->d, m->job) || !nodes_job_held(m->job, &node))
		return false;
	c->d->m.node_jobs_conflicting++;
	ratelog("node job conflict", m->job,
		"refusing rank %" PRIu32 " of job %s from %s: node daemons hold job %s (node %s among them); a job id is held by node daemons or by agents here, whichever came first",
		m->rank, m->job, c->peer, m->job, node);
	snprintf(why, sizeof(why),
		 "node daemons hold job %s here (node %s): use the node's daemon or another job id",
		 m->job, node);
	conn_send_error(c, FR_WIRE_ERR_PROTOCOL, why);
	conn_close(c);
	return true;
}

/*
 * Refuses a HELLO that would connect more ranks of its job than
 * --max-job-connections (a rank reconnecting takes its own place), and
 * closes the connection. The caller holds the lock.
 */
static bool hello_over_job_limit(struct conn *c, const struct fr_msg_hello *m)
{
	struct flightrecd *d = c->d;
	struct job *job = registry_job_find(d, m->job);
	struct job_rank *r;

	if (!job || job->nconnected < d->cfg.max_job_connections)
		return false;
	r = registry_rank(job, m->rank);
	if (r && r->conn)
		return false;
	d->m.connections_rejected++;
	d->m.job_connections_rejected++;
	ratelog("job connections", job->id,
		"job %s: refusing the connection of rank %" PRIu32 " from %s: %" PRIu32
		" ranks of the job are connected, the most --max-job-connections allows",
		job->id, m->rank, c->peer, job->nconnected);
	conn_send_error(c, FR_WIRE_ERR_PROTOCOL,
			"too many ranks of this job are connected (--max-job-connections)");
	conn_close(c);
	return true;
}

/*
 * Checks the proof of a HELLO on a daemon with a token. Returns true when
 * the HELLO may go on to the registry; otherwise the connection is closed.
 */
static bool hello_authenticated(struct conn *c, const struct fr_msg_hello *m)
{
	struct server_conn *sc = server_conn(c);
	bool ok;

	if (!sc->have_proof) {
		auth_refuse(c, m, FR_WIRE_ERR_AUTH_REQUIRED,
			    "no proof of the token (an agent older than protocol version 2, or one without FLIGHTREC_TOKEN_FILE or FLIGHTREC_JOB_KEY_FILE)",
			    "this daemon requires a token: set FLIGHTREC_TOKEN_FILE or FLIGHTREC_JOB_KEY_FILE");
		return false;
	}
	ok = fr_wire_auth_verify(&c->d->cfg.token, sc->nonce, m, sc->proof);
	sc->have_proof = false;
	if (!ok) {
		auth_refuse(c, m, FR_WIRE_ERR_AUTH_FAILED,
			    "wrong proof of the token (another token, the key of another job, or a hello replayed from another connection)",
			    "wrong proof of the token: check FLIGHTREC_TOKEN_FILE, or that FLIGHTREC_JOB_KEY_FILE holds this job's key");
		return false;
	}
	return true;
}

static const char *first_frame_rule(const struct flightrecd *d)
{
	return daemon_has_token(d) ? "the first frames must be auth and hello" :
				     "the first frame must be hello";
}

/* AUTH: keeps the proof for the HELLO that must come next. */
static int conn_auth(struct conn *c, const struct fr_wire_header *h, const uint8_t *p,
		     const char **why)
{
	struct server_conn *sc = server_conn(c);
	struct fr_msg_auth m;
	int err;

	if (!sc->challenged) {
		*why = "auth sent, but this daemon has no token and sent no challenge";
		return -EPROTO;
	}
	if (sc->have_proof) {
		*why = "auth sent twice";
		return -EPROTO;
	}
	err = fr_wire_auth_decode(p, h->length, &m);
	if (err)
		return err;
	memcpy(sc->proof, m.proof, sizeof(sc->proof));
	sc->have_proof = true;
	return 0;
}

/* DAEMON_CHALLENGE: keeps the agent's nonce for the proof sent after HELLO. */
static int conn_daemon_challenge(struct conn *c, const struct fr_wire_header *h,
				 const uint8_t *p, const char **why)
{
	struct server_conn *sc = server_conn(c);
	struct fr_msg_daemon_challenge m;
	int err;

	if (!sc->challenged) {
		*why = "daemon_challenge sent, but this daemon has no token and sent no challenge";
		return -EPROTO;
	}
	if (c->said_hello || sc->have_agent_nonce) {
		*why = "daemon_challenge sent twice or after hello";
		return -EPROTO;
	}
	err = fr_wire_daemon_challenge_decode(p, h->length, &m);
	if (err)
		return err;
	memcpy(sc->agent_nonce, m.nonce, sizeof(sc->agent_nonce));
	sc->have_agent_nonce = true;
	return 0;
}

/* Sends DAEMON_PROOF with `proof`: the first frame the peer reads after its hello. */
static int conn_send_proof(struct conn *c, const struct fr_msg_daemon_proof *m)
{
	size_t size = fr_wire_daemon_proof_size(m);
	struct conn_write *w = malloc(sizeof(*w) + size);

	if (!w)
		return -ENOMEM;
	return conn_write_frame(c, w, fr_wire_daemon_proof_encode(m, w->frame, size));
}

/* Answers an agent's VERSION: this daemon reads COMM_RUNS (protocol 5); and
 * tells a node daemon of protocol 7 that it takes NODE_KERNEL_LOG. */
static int conn_send_welcome(struct conn *c)
{
	struct fr_msg_welcome m = { .version = FR_WIRE_VERSION };
	size_t size = fr_wire_welcome_size(&m);
	struct conn_write *w = malloc(sizeof(*w) + size);

	if (!w)
		return -ENOMEM;
	return conn_write_frame(c, w, fr_wire_welcome_encode(&m, w->frame, size));
}

/*
 * Proves the token to an agent that asked (DAEMON_CHALLENGE), for the HELLO
 * just verified: the first frame it reads after its HELLO.
 */
static int conn_send_daemon_proof(struct conn *c, const struct fr_msg_hello *hello)
{
	struct server_conn *sc = server_conn(c);
	struct fr_msg_daemon_proof m;
	int err;

	if (!sc->have_agent_nonce)
		return 0;
	err = fr_wire_daemon_proof(&c->d->cfg.token, sc->agent_nonce, sc->nonce, hello, m.proof);
	return err ? err : conn_send_proof(c, &m);
}

/*
 * Whether node `n` may hold ranks of `job`: not when agents connected to
 * this daemon hold it (its registry has it), since a job id is held by
 * one kind of peer, whichever came first (docs/SCALE-OUT.md). Logged once
 * per job a minute, counted per refusal.
 */
static bool node_job_allowed(struct conn *c, const char *node, const char *job)
{
	if (!registry_job_find(c->d, job))
		return true;
	c->d->m.node_jobs_conflicting++;
	ratelog("node job conflict", job,
		"node %s: refusing its ranks of job %s: agents connected to this daemon hold job %s (a job id is held by node daemons or by agents here, whichever came first)",
		node, job, job);
	return false;
}

/* Refuses a node daemon's NODE_HELLO with `why`, which its log shows. */
static void node_refuse(struct conn *c, const char *why)
{
	c->d->m.nodes_refused++;
	conn_send_error(c, FR_WIRE_ERR_PROTOCOL, why);
	conn_close(c);
}

/*
 * NODE_HELLO: the connection is a node daemon's (docs/SCALE-OUT.md). With
 * a token it must have proven it over this very payload (AUTH before,
 * which conn_first_frame_ok() required before reading the payload), and
 * gets the daemon's proof when it asked. Returns 0, or an error for
 * conn_dispatch() to refuse with; a refusal closes the connection here
 * (*closed).
 */
static int conn_node_hello(struct conn *c, const struct fr_wire_header *h, const uint8_t *p,
			   bool *closed)
{
	struct server_conn *sc = server_conn(c);
	struct fr_msg_node_hello m = { 0 };
	struct fr_msg_daemon_proof proof;
	struct conn *old = NULL;
	const char *why;
	uint32_t kept = 0;
	int err;

	*closed = false;
	err = fr_wire_node_hello_decode(p, h->length, &m);
	if (err)
		return err;
	sc->node_daemon = true;
	if (daemon_has_token(c->d)) {
		bool ok = sc->have_proof && fr_wire_node_verify(&c->d->cfg.token, false, sc->nonce,
							       NULL, p, h->length, sc->proof);

		sc->have_proof = false;
		if (!ok) {
			auth_refuse(c, NULL, FR_WIRE_ERR_AUTH_FAILED,
				    "a node daemon without the proof of the token",
				    "wrong or missing proof of the token: check --token-file");
			*closed = true;
			goto out_free;
		}
	}
	if (sc->have_agent_nonce) {
		err = fr_wire_node_proof(&c->d->cfg.token, true, sc->agent_nonce, sc->nonce, p,
					 h->length, proof.proof);
		if (!err)
			err = conn_send_proof(c, &proof);
		if (err)
			goto out_free;
	}
	/* The jobs agents here hold are not the node's to list. */
	for (uint32_t i = 0; i < m.njobs; i++)
		if (node_job_allowed(c, m.node, m.jobs[i].job))
			m.jobs[kept++] = m.jobs[i];
	m.njobs = kept;
	c->node = nodes_admit(c, c->peer, &m, &old, &why);
	if (!c->node) {
		node_refuse(c, why);
		*closed = true;
		goto out_free;
	}
	c->said_hello = true;
	conn_hello_settled(c);
	/* A node of protocol 7 or later hears this daemon's version, before
	 * any request (cluster_incident_node_back()'s below): it sends
	 * NODE_KERNEL_LOG only to a central daemon that said 7. An older
	 * node would refuse the frame. */
	if (m.protocol >= 7 && (err = conn_send_welcome(c)))
		goto out_free;
	if (old) {
		/* The node came back before its old connection was seen to go.
		 * What it still owed an open incident went with that connection
		 * (a node drops its queued answers when it loses the link): the
		 * incident asks it again rather than waiting out --dump-deadline. */
		cluster_incident_node_back(c->d, c->node->name, c);
		old->node = NULL;
		conn_close(old);
	}
out_free:
	fr_wire_node_hello_free(&m);
	return err;
}

/*
 * What nodes.c refused over a cap or the budget (it logged why) is
 * counted; the connection stays, and what was kept before stays too.
 */
static int node_kept(struct conn *c, int err)
{
	switch (err) {
	case -ENOSPC:
	case -EDQUOT:
		c->d->m.node_state_refused++;
		return 0;
	case -EADDRINUSE:
	case -EDOM:
		/* Ranks another connected node of the job holds, or a world
		 * size its other nodes do not say (nodes.c logged it). */
		c->d->m.node_ranks_conflicting++;
		return 0;
	default:
		return err;
	}
}

/* NODE_RANKS, NODE_COMMS, NODE_PROGRESS on a node's connection. */
static int conn_node_frame(struct conn *c, const struct fr_wire_header *h, const uint8_t *p)
{
	int err;

	switch (h->type) {
	case FR_MSG_NODE_RANKS: {
		struct fr_msg_node_ranks m = { 0 };
		uint32_t dead = 0, pid = 0;
		uint8_t state = 0;
		bool died;

		err = fr_wire_node_ranks_decode(p, h->length, &m);
		if (!err && node_job_allowed(c, c->node->name, m.job)) {
			died = nodes_ranks_new_death(c->node, &m, &dead, &pid, &state);
			err = nodes_ranks(c->node, &m);
			/* A rank died: the incident opens at once, as for a
			 * rank of this daemon's own (incident_open_death()). */
			if ((!err || err == -EADDRINUSE) && died)
				cluster_incident_death(c->d, m.job, dead, pid, state);
			err = node_kept(c, err);
		}
		fr_wire_node_ranks_free(&m);
		return err;
	}
	case FR_MSG_NODE_COMMS: {
		struct fr_msg_node_comms m = { 0 };

		/* Checked, not kept yet: the central daemon's live view does
		 * not read the nodes' member lists. */
		err = fr_wire_node_comms_decode(p, h->length, &m);
		fr_wire_node_comms_free(&m);
		return err;
	}
	case FR_MSG_NODE_SUMMARY: {
		struct fr_msg_node_summary m;

		err = fr_wire_node_summary_decode(p, h->length, &m);
		if (!err && (m.flags & FR_NODE_SUMMARY_LOOK))
			node_look_piece(c->d, c, &m);
		else if (!err)
			cluster_incident_summary(c->d, c->node->name, &m);
		return err;
	}
	case FR_MSG_NODE_LOOK_STACKS: {
		struct fr_msg_node_look_stacks *m = malloc(sizeof(*m));

		if (!m)
			return -ENOMEM;
		err = fr_wire_node_look_stacks_decode(p, h->length, m);
		if (!err)
			node_look_stacks(c->d, c, m);
		fr_wire_node_look_stacks_free(m);
		free(m);
		return err;
	}
	case FR_MSG_NODE_DUMP_DONE: {
		struct fr_msg_node_dump_done m;

		err = fr_wire_node_dump_done_decode(p, h->length, &m);
		if (!err)
			cluster_incident_node_done(c->d, c->node->name, &m);
		return err;
	}
	case FR_MSG_NODE_KERNEL_LOG: {
		struct fr_msg_node_kernel_log m;

		err = fr_wire_node_kernel_log_decode(p, h->length, &m);
		if (!err)
			cluster_incident_node_klog(c->d, c->node->name, &m);
		return err;
	}
	default: {
		struct fr_msg_node_progress m = { 0 };

		err = fr_wire_node_progress_decode(p, h->length, &m);
		if (!err && node_job_allowed(c, c->node->name, m.job))
			err = node_kept(c, nodes_progress(c->node, &m));
		fr_wire_node_progress_free(&m);
		return err;
	}
	}
}

/* Decodes and handles one complete frame; the caller holds the lock. */
static void conn_dispatch(struct conn *c, const struct fr_wire_header *h, const uint8_t *p)
{
	struct flightrecd *d = c->d;
	const char *why = NULL;
	int err = 0;

	if (!c->said_hello && h->type != FR_MSG_HELLO && h->type != FR_MSG_AUTH &&
	    h->type != FR_MSG_DAEMON_CHALLENGE && h->type != FR_MSG_NODE_HELLO) {
		conn_reject(c, h->type, first_frame_rule(d));
		return;
	}
	if (c->said_hello && h->type == FR_MSG_HELLO) {
		conn_reject(c, h->type, "hello sent twice on one connection");
		return;
	}
	/* A node's connection sends only node frames; an agent's never does. */
	if (c->node && h->type != FR_MSG_NODE_RANKS && h->type != FR_MSG_NODE_COMMS &&
	    h->type != FR_MSG_NODE_PROGRESS && h->type != FR_MSG_NODE_SUMMARY &&
	    h->type != FR_MSG_NODE_DUMP_DONE && h->type != FR_MSG_NODE_LOOK_STACKS &&
	    h->type != FR_MSG_NODE_KERNEL_LOG) {
		conn_reject(c, h->type, "not a message a node daemon sends after node_hello");
		return;
	}
	switch (h->type) {
	case FR_MSG_NODE_HELLO: {
		bool closed = false;

		if (c->said_hello) {
			why = "not a message an agent sends";
			err = -EBADMSG;
			break;
		}
		err = conn_node_hello(c, h, p, &closed);
		if (closed)
			return;
		break;
	}
	case FR_MSG_NODE_RANKS:
	case FR_MSG_NODE_COMMS:
	case FR_MSG_NODE_PROGRESS:
	case FR_MSG_NODE_SUMMARY:
	case FR_MSG_NODE_DUMP_DONE:
	case FR_MSG_NODE_LOOK_STACKS:
	case FR_MSG_NODE_KERNEL_LOG:
		if (!c->node) {
			why = "not a message an agent sends";
			err = -EBADMSG;
			break;
		}
		err = conn_node_frame(c, h, p);
		break;
	case FR_MSG_HELLO: {
		struct fr_msg_hello m;

		err = fr_wire_hello_decode(p, h->length, &m);
		if (err)
			break;
		/* Nothing from the connection is acted on before its proof. */
		if (daemon_has_token(d) && !hello_authenticated(c, &m))
			return;
		err = conn_send_daemon_proof(c, &m);
		if (err)
			break;
		if (hello_over_job_limit(c, &m) || hello_job_on_nodes(c, &m))
			return;
		err = registry_hello(d, c, &m, &why);
		if (!err)
			conn_hello_settled(c);
		if (err == -EBUSY) {
			/* The frame is fine; the connection is not wanted. */
			d->m.connections_rejected++;
			conn_send_error(c, FR_WIRE_ERR_RANK_HELD,
					"another live process holds this rank of the job; do two jobs share a job id?");
			conn_close(c);
			return;
		}
		break;
	}
	case FR_MSG_AUTH:
		if (c->said_hello) {
			why = "auth sent after hello";
			err = -EPROTO;
			break;
		}
		err = conn_auth(c, h, p, &why);
		break;
	case FR_MSG_DAEMON_CHALLENGE:
		err = conn_daemon_challenge(c, h, p, &why);
		break;
	case FR_MSG_COMM: {
		struct fr_msg_comm m = { 0 };

		err = fr_wire_comm_decode(p, h->length, &m);
		if (!err) {
			err = registry_comm(c, &m, &why);
			fr_wire_comm_free(&m);
		}
		break;
	}
	case FR_MSG_COMM_RUNS: {
		struct fr_msg_comm_runs m = { 0 };

		err = fr_wire_comm_runs_decode(p, h->length, &m);
		if (err == -EPROTO)
			why = fr_wire_comm_runs_why(p, h->length);
		if (!err) {
			err = registry_comm_runs(c, &m, &why);
			fr_wire_comm_runs_free(&m);
		}
		break;
	}
	case FR_MSG_VERSION: {
		struct fr_msg_version m;

		err = fr_wire_version_decode(p, h->length, &m);
		if (!err) {
			c->agent_version = m.version;
			err = conn_send_welcome(c);
		}
		break;
	}
	case FR_MSG_PROGRESS: {
		struct fr_msg_progress m = { 0 };

		err = fr_wire_progress_decode(p, h->length, &m);
		if (!err) {
			err = registry_progress(c, &m, &why);
			fr_wire_progress_free(&m);
		}
		break;
	}
	case FR_MSG_HEARTBEAT: {
		struct fr_msg_heartbeat m;

		err = fr_wire_heartbeat_decode(p, h->length, &m);
		if (!err)
			straggler_heartbeat(c, m.now_ns);
		break;
	}
	case FR_MSG_TIMING: {
		struct fr_msg_timing m = { 0 };

		err = fr_wire_timing_decode(p, h->length, &m);
		if (!err) {
			err = straggler_timing(d, c, &m, &why);
			fr_wire_timing_free(&m);
		}
		break;
	}
	case FR_MSG_DUMP_DATA: {
		struct fr_msg_dump_data m;

		err = fr_wire_dump_data_decode(p, h->length, &m);
		/* A live look's dump goes to the live looks, never to an incident. */
		if (!err && strncmp(m.incident, FR_WIRE_LIVE_PREFIX,
				    sizeof(FR_WIRE_LIVE_PREFIX) - 1) == 0)
			look_dump_data(c, &m);
		else if (!err)
			incident_dump_data(c, &m);
		break;
	}
	case FR_MSG_CRASH: {
		static struct fr_msg_crash m; /* 9 KiB; the loop's only */

		err = fr_wire_crash_decode(p, h->length, &m);
		if (!err)
			err = registry_crash(c, &m, &why);
		if (!err)
			incident_open_death(d, c->job, c->rank, "crash");
		break;
	}
	case FR_MSG_NCCL_ERROR: {
		struct fr_msg_nccl_error m;

		err = fr_wire_nccl_error_decode(p, h->length, &m);
		if (!err)
			err = registry_nccl_error(c, &m);
		if (err == 1) {
			err = 0;
			incident_open_death(d, c->job, c->rank, "nccl_error");
		}
		break;
	}
	case FR_MSG_EXIT: {
		struct fr_msg_exit m;

		err = fr_wire_exit_decode(p, h->length, &m);
		if (!err)
			err = registry_exit(c, &m);
		if (err == 1) {
			err = 0;
			incident_open_death(d, c->job, c->rank, "exited");
		}
		break;
	}
	case FR_MSG_BYE: {
		struct fr_msg_bye m;

		err = fr_wire_bye_decode(p, h->length, &m);
		if (!err)
			registry_bye(c);
		break;
	}
	default:
		why = "not a message an agent sends";
		err = -EBADMSG;
		break;
	}
	if (err) {
		if (why)
			conn_reject(c, h->type, why);
		else
			conn_reject_err(c, h->type, err);
		return;
	}
	d->m.frames_received++;
	registry_seen(c);
}

/*
 * Whether a header may start a connection: AUTH or DAEMON_CHALLENGE of its
 * exact size (from a connection that was challenged), or HELLO no longer
 * than the largest one. Otherwise closes the connection and returns false.
 */
static bool conn_first_frame_ok(struct conn *c, const struct fr_wire_header *h)
{
	if (h->type == FR_MSG_HELLO && h->length > FR_WIRE_HELLO_MAX_PAYLOAD) {
		conn_reject(c, h->type, "hello longer than any hello");
		return false;
	}
	/* A node's first frame is bounded like an agent's, and with a token
	 * it comes only after its proof (AUTH). */
	if (h->type == FR_MSG_NODE_HELLO && daemon_has_token(c->d) &&
	    !server_conn(c)->have_proof) {
		conn_reject(c, h->type, "node_hello before the proof of the token (auth)");
		return false;
	}
	if (h->type == FR_MSG_NODE_HELLO && h->length > FR_NODE_HELLO_MAX_PAYLOAD) {
		conn_reject(c, h->type, "node_hello longer than 65536 bytes");
		return false;
	}
	if (h->type == FR_MSG_AUTH && h->length != FR_WIRE_PROOF_SIZE) {
		conn_reject(c, h->type, "auth of the wrong size");
		return false;
	}
	if (h->type == FR_MSG_DAEMON_CHALLENGE && h->length != FR_WIRE_NONCE_SIZE) {
		conn_reject(c, h->type, "daemon_challenge of the wrong size");
		return false;
	}
	if (h->type != FR_MSG_HELLO && h->type != FR_MSG_AUTH &&
	    h->type != FR_MSG_DAEMON_CHALLENGE && h->type != FR_MSG_NODE_HELLO) {
		conn_reject(c, h->type, first_frame_rule(c->d));
		return false;
	}
	return true;
}

/*
 * Handles every complete frame in the buffer, then keeps what is left of
 * the next one at the start. The caller holds the lock.
 */
static void conn_process(struct conn *c)
{
	size_t off = 0;

	c->need = FR_WIRE_HEADER_SIZE;
	while (!c->closing) {
		struct fr_wire_frame f;
		int err;

		err = fr_frame_next(c->buf + off, c->len - off, c->d->cfg.max_frame_size, &f);
		if (err == -EAGAIN && !f.have_header)
			break;
		if (err && err != -EAGAIN && err != -EFBIG) {
			/* Longer than the protocol allows: over any --max-frame-size. */
			if (err == -EMSGSIZE)
				c->d->m.frames_oversized++;
			/* The type is named only when the bytes start like a frame. */
			conn_reject_err(c, f.h.magic == FR_WIRE_MAGIC ? f.h.type : 0, err);
			return;
		}
		/* Before HELLO, refuse from the header what could never be one,
		 * rather than buffer up to a megabyte of it. */
		if (!c->said_hello && !conn_first_frame_ok(c, &f.h))
			return;
		if (err == -EFBIG) {
			char why[96];

			snprintf(why, sizeof(why),
				 "frame of %" PRIu32 " bytes over --max-frame-size %" PRIu32, f.h.length,
				 c->d->cfg.max_frame_size);
			c->d->m.frames_oversized++;
			conn_reject(c, f.h.type, why);
			return;
		}
		if (err == -EAGAIN) {
			c->need = f.size;
			break;
		}
		conn_dispatch(c, &f.h, f.payload);
		off += f.size;
	}
	if (c->closing)
		return;
	memmove(c->buf, c->buf + off, c->len - off);
	c->len -= off;
	/* Give back the memory of a big frame once it has been handled. */
	if (c->cap > DAEMON_CONN_BUF_MIN && c->need <= DAEMON_CONN_BUF_MIN) {
		uint8_t *b = realloc(c->buf, DAEMON_CONN_BUF_MIN);

		if (b) {
			c->buf = b;
			c->cap = DAEMON_CONN_BUF_MIN;
		}
	}
}

/*
 * Offers the free end of the connection's buffer, grown to hold the frame
 * being read (its size is known once its header is in).
 */
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct conn *c = h->data;
	size_t want = c->need > DAEMON_CONN_BUF_MIN ? c->need : DAEMON_CONN_BUF_MIN;

	(void)suggested;
	if (c->cap < want) {
		uint8_t *b = realloc(c->buf, want);

		if (!b) {
			*buf = uv_buf_init(NULL, 0);
			return;
		}
		c->buf = b;
		c->cap = want;
	}
	*buf = uv_buf_init((char *)c->buf + c->len, (unsigned)(c->cap - c->len));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct conn *c = s->data;
	struct flightrecd *d = c->d;

	(void)buf;
	if (nread == 0)
		return;
	pthread_mutex_lock(&d->lock);
	if (nread < 0) {
		if (nread != UV_EOF)
			daemon_log("connection from %s lost: %s", c->peer, uv_strerror((int)nread));
		conn_close(c);
	} else {
		c->len += (size_t)nread;
		conn_process(c);
	}
	pthread_mutex_unlock(&d->lock);
}

static void on_rejected_closed(uv_handle_t *h)
{
	free(h);
}

/* A handle of the listener's kind, for a connection it accepts. */
static int stream_init(struct flightrecd *d, uv_stream_t *listener, uv_stream_t *s)
{
	if (listener->type == UV_NAMED_PIPE)
		return uv_pipe_init(d->loop, (uv_pipe_t *)s, 0);
	return uv_tcp_init(d->loop, (uv_tcp_t *)s);
}

/*
 * Who is at the other end of an accepted stream: `peer` for log lines and
 * `key`, what the per-address limits count it under. A TCP peer is its
 * address (the key without the port, daemon_addr_key()); a Unix peer has
 * none, so it is its credentials, which the kernel vouches for
 * ("unix:uid=N,pid=M"), counted per user ("unix:uid=N"), so that one user
 * on the node cannot hold the connections another user's ranks need.
 * Returns whether `cred` received a Unix peer's credentials. Writes
 * "unknown peer" when the kernel will not say.
 */
static bool stream_peer(uv_stream_t *s, char *peer, size_t peer_cap, char *key, size_t key_cap,
			struct ucred *cred)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss);

	if (s->type == UV_NAMED_PIPE) {
		struct ucred uc;
		socklen_t uclen = sizeof(uc);
		uv_os_fd_t fd;

		if (uv_fileno((uv_handle_t *)s, &fd) == 0 &&
		    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &uclen) == 0) {
			snprintf(peer, peer_cap, "unix:uid=%u,pid=%d", (unsigned)uc.uid, (int)uc.pid);
			snprintf(key, key_cap, "unix:uid=%u", (unsigned)uc.uid);
			*cred = uc;
			return true;
		}
	} else if (uv_tcp_getpeername((uv_tcp_t *)s, (struct sockaddr *)&ss, &len) == 0 &&
		   daemon_format_addr((const struct sockaddr *)&ss, peer, peer_cap) == 0 &&
		   daemon_addr_key((const struct sockaddr *)&ss, key, key_cap) == 0) {
		return false;
	}
	snprintf(peer, peer_cap, "unknown peer");
	snprintf(key, key_cap, "unknown peer");
	return false;
}

/*
 * Accepts and closes a connection that cannot be served, so it does not
 * linger; `over_limit` when it is over --max-connections, which is logged
 * once per peer address a minute.
 */
static void server_refuse(struct flightrecd *d, uv_stream_t *listener, bool over_limit)
{
	union agent_stream *t = malloc(sizeof(*t));
	char peer[INET6_ADDRSTRLEN + 8];
	char addr[INET6_ADDRSTRLEN + 8];
	struct ucred cred;

	if (!t)
		return;
	stream_init(d, listener, &t->stream);
	if (uv_accept(listener, &t->stream) == 0) {
		d->m.connections_rejected++;
		if (over_limit) {
			stream_peer(&t->stream, peer, sizeof(peer), addr, sizeof(addr), &cred);
			ratelog("connections", addr,
				"refusing the connection from %s: %zu agent connections are open, the most --max-connections allows",
				peer, d->nconns);
		}
	}
	uv_close(&t->handle, on_rejected_closed);
}

/* The peer's address and port (or credentials), and the key it is counted under. */
static void conn_set_peer(struct conn *c)
{
	struct server_conn *sc = server_conn(c);
	struct ucred cred;

	c->has_cred = stream_peer(&c->sock.stream, c->peer, sizeof(c->peer), sc->addr,
				  sizeof(sc->addr), &cred);
	if (c->has_cred) {
		c->uid = (uint32_t)cred.uid;
		c->pid = (uint32_t)cred.pid;
	}
}

/*
 * Counts a new connection as waiting for its HELLO; UV_EBUSY (logged once
 * per address a minute) when its address has --max-pending-per-address
 * such connections already. At pending_cap() the oldest waiting one is
 * closed for it.
 */
static int server_count_pending(struct flightrecd *d, struct conn *c)
{
	struct server_conn *sc = server_conn(c);
	int err = pending_add(sc->addr, d->cfg.max_pending_per_address);

	if (err == -ENOMEM)
		return UV_ENOMEM;
	if (err) {
		d->m.connections_rejected++;
		d->m.pending_rejected++;
		ratelog("pending connections", sc->addr,
			"refusing the connection from %s: %" PRIu32
			" connections from %s have not said hello yet, the most --max-pending-per-address allows",
			c->peer, d->cfg.max_pending_per_address, sc->addr);
		return UV_EBUSY;
	}
	if (d->npending >= pending_cap(d) &&
	    !server_evict_pending(d, "half of --max-connections wait for their hello")) {
		pending_remove(sc->addr);
		d->m.connections_rejected++;
		ratelog("pending cap", sc->addr,
			"refusing the connection from %s: %zu connections have not said hello yet, half of --max-connections, all accepted just now",
			c->peer, d->npending);
		return UV_EBUSY;
	}
	sc->pending = true;
	sc->pending_prev = pending_newest;
	if (pending_newest)
		pending_newest->pending_next = sc;
	else
		pending_oldest = sc;
	pending_newest = sc;
	d->npending++;
	return 0;
}

static void server_accept(struct flightrecd *d, uv_stream_t *listener)
{
	struct server_conn *sc = calloc(1, sizeof(*sc));
	struct conn *c = sc ? &sc->conn : NULL;
	int err;

	if (!c) {
		server_refuse(d, listener, false);
		return;
	}
	sc->accepted_mono = daemon_mono_ns();
	sc->accepted_turn = uv_now(d->loop);
	c->d = d;
	c->need = FR_WIRE_HEADER_SIZE;
	stream_init(d, listener, &c->sock.stream);
	c->sock.handle.data = c;
	err = uv_accept(listener, &c->sock.stream);
	if (!err) {
		conn_set_peer(c);
		err = server_count_pending(d, c);
	}
	if (!err) {
		if (c->sock.stream.type == UV_TCP)
			uv_tcp_nodelay(&c->sock.tcp, 1);
		err = uv_read_start(&c->sock.stream, on_alloc, on_read);
	}
	c->next = d->conns;
	if (d->conns)
		d->conns->prev = c;
	d->conns = c;
	d->nconns++;
	if (err) {
		if (err != UV_EBUSY)
			daemon_log("cannot accept a connection: %s", uv_strerror(err));
		c->closing = true;
		conn_hello_settled(c);
		uv_close(&c->sock.handle, on_conn_closed);
		return;
	}
	if (daemon_has_token(d)) {
		err = conn_send_challenge(c);
		if (err) {
			daemon_log("cannot challenge the connection from %s: %s; closing it", c->peer,
				   strerror(-err));
			conn_close(c);
		}
	}
}

/*
 * Closes the connections that have not said HELLO (with a token: proved
 * it) within --hello-timeout: counted as authentication failures with a
 * token, as HELLO timeouts without one. Only connections still counted as
 * pending are looked at; a connection whose rank was taken over said its
 * HELLO and is closed by the registry.
 */
static void on_hello_sweep(uv_timer_t *t)
{
	struct flightrecd *d = t->data;
	uint64_t now = daemon_mono_ns();
	uint64_t limit;
	struct conn *next;
	char why[64];

	pthread_mutex_lock(&d->lock);
	limit = (uint64_t)(d->cfg.hello_timeout_s * (double)NS_PER_S);
	snprintf(why, sizeof(why), "no hello within %g s", d->cfg.hello_timeout_s);
	for (struct conn *c = d->conns; c; c = next) {
		struct server_conn *sc = server_conn(c);

		next = c->next;
		if (!sc->pending || c->closing || now - sc->accepted_mono < limit)
			continue;
		if (daemon_has_token(d)) {
			auth_refuse(c, NULL, FR_WIRE_ERR_AUTH_REQUIRED, why,
				    "no hello in time after the challenge (--hello-timeout)");
			continue;
		}
		d->m.hello_timeouts++;
		ratelog("hello timeout", sc->addr,
			"closing the connection from %s: %s (--hello-timeout)", c->peer, why);
		conn_close(c);
	}
	pthread_mutex_unlock(&d->lock);
}

/*
 * Reads --token-file. A token shorter than FR_TOKEN_MIN, or anything but a
 * readable regular file, stops the daemon: running without the protection
 * asked for would be worse than not running. SIGHUP reads the file again
 * (main.c's reload_token()), keeping this token when the new one is bad.
 */
static int server_read_token(struct flightrecd *d)
{
	const char *path = d->cfg.token_file;
	const char *why;
	bool others;
	int err;

	if (!path)
		return 0;
	err = fr_wire_token_read(path, &d->cfg.token, &why, &others);
	if (err) {
		daemon_log("cannot use --token-file %s: %s", path, why ? why : strerror(-err));
		return -1;
	}
	if (others)
		daemon_log("warning: --token-file %s is readable by other users; chmod o-r it", path);
	daemon_log("agents must prove they hold the token of %s (protocol version 2)", path);
	return 0;
}

static void on_connection(uv_stream_t *s, int status)
{
	struct flightrecd *d = s->data;

	if (status < 0) {
		/* Out of descriptors, libuv accepts and closes the connections
		 * waiting (its EMFILE trick) and says so once for each: a flood
		 * must not become a flood of log lines. */
		pthread_mutex_lock(&d->lock);
		d->m.accept_errors++;
		pthread_mutex_unlock(&d->lock);
		ratelog("accept", uv_err_name(status),
			"cannot accept agent connections: %s (RLIMIT_NOFILE reached?); connections are closed until descriptors are free",
			uv_strerror(status));
		return;
	}
	pthread_mutex_lock(&d->lock);
	if (d->stopping)
		server_refuse(d, s, false);
	else if (d->nconns >= d->cfg.max_connections &&
		 !server_evict_pending(d, "--max-connections are open"))
		server_refuse(d, s, true);
	else
		server_accept(d, s);
	pthread_mutex_unlock(&d->lock);
}

/*
 * Listens on --agent-socket as well: the same connections, limits and
 * handshake as --listen, on a socket any user's job may connect to (mode
 * 0666: the token, when there is one, is what authenticates; without one,
 * the socket's owner and directory are what agents trust, endpoint.h).
 */
static int server_listen_unix(struct flightrecd *d)
{
	const char *path = d->cfg.agent_socket;
	int err;

	if (agent_socket_prepare(path))
		return -1;
	uv_pipe_init(d->loop, &d->agent_pipe, 0);
	d->agent_pipe.data = d;
	err = uv_pipe_bind(&d->agent_pipe, path);
	if (!err) {
		d->agent_socket_bound = true;
		if (chmod(path, 0666) < 0)
			err = uv_translate_sys_error(errno);
	}
	if (!err)
		err = uv_listen((uv_stream_t *)&d->agent_pipe, LISTEN_BACKLOG, on_connection);
	if (err) {
		daemon_log("cannot listen on --agent-socket %s: %s", path, uv_strerror(err));
		return -1;
	}
	daemon_log("agents may also connect to %s", path);
	return 0;
}

int server_start(struct flightrecd *d)
{
	char addr[INET6_ADDRSTRLEN + 8];
	struct sockaddr_storage ss;
	int len = sizeof(ss);
	int err;

	if (server_read_token(d))
		return -1;
	daemon_format_addr((const struct sockaddr *)&d->cfg.listen_addr, addr, sizeof(addr));
	uv_tcp_init(d->loop, &d->server);
	d->server.data = d;
	err = uv_tcp_bind(&d->server, (const struct sockaddr *)&d->cfg.listen_addr, 0);
	if (!err)
		err = uv_listen((uv_stream_t *)&d->server, LISTEN_BACKLOG, on_connection);
	if (!err)
		err = uv_tcp_getsockname(&d->server, (struct sockaddr *)&ss, &len);
	if (err) {
		daemon_log("cannot listen on %s: %s", addr, uv_strerror(err));
		return -1;
	}
	d->listen_port = ntohs(ss.ss_family == AF_INET6 ?
				       ((struct sockaddr_in6 *)&ss)->sin6_port :
				       ((struct sockaddr_in *)&ss)->sin_port);
	daemon_set_port(&d->cfg.listen_addr, d->listen_port);
	if (d->cfg.agent_socket && server_listen_unix(d))
		return -1;
	uv_timer_init(d->loop, &hello_timer);
	hello_timer.data = d;
	/* Never what keeps the loop running. */
	uv_unref((uv_handle_t *)&hello_timer);
	hello_timer_started = true;
	uv_timer_start(&hello_timer, on_hello_sweep, HELLO_SWEEP_MS, HELLO_SWEEP_MS);
	return 0;
}

/* Stops listening and closes every agent connection; the caller holds the lock. */
void server_close_all(struct flightrecd *d)
{
	if (d->server.type == UV_TCP && !uv_is_closing((uv_handle_t *)&d->server))
		uv_close((uv_handle_t *)&d->server, NULL);
	if (d->agent_pipe.type == UV_NAMED_PIPE && !uv_is_closing((uv_handle_t *)&d->agent_pipe))
		uv_close((uv_handle_t *)&d->agent_pipe, NULL);
	/* Only the file this daemon bound: a refused start leaves another's be. */
	if (d->agent_socket_bound) {
		if (unlink(d->cfg.agent_socket) < 0 && errno != ENOENT)
			daemon_log("cannot remove --agent-socket %s: %s", d->cfg.agent_socket,
				   strerror(errno));
		d->agent_socket_bound = false;
	}
	if (hello_timer_started && !uv_is_closing((uv_handle_t *)&hello_timer))
		uv_close((uv_handle_t *)&hello_timer, NULL);
	for (struct conn *c = d->conns; c; c = c->next)
		conn_close(c);
}
