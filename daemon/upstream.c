/* A node daemon's connection to the central daemon (upstream.h). */
#include "upstream.h"
#include "daemon.h"
#include "aggregate.h"
#include "clock.h"
#include "log.h"
#include "registry.h"
#include "upstream_incident.h"
#include "upstream_look.h"

#include "../protocol/frame.h"
#include "../protocol/hash.h"
#include "../protocol/node_wire.h"

#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* Frames queued and not yet written past which a tick sends nothing: a
 * central daemon that does not read must not grow the node's memory. */
#define UPSTREAM_QUEUE_MAX (8u << 20)
/* How long the TCP connect and the handshake together may take: a central
 * daemon that does not answer (a dropped SYN, a peer that never speaks)
 * must not hold the node off its backoff for ever. */
#define UPSTREAM_HANDSHAKE_MS 10000u

enum up_state {
	UP_IDLE,          /* waiting to connect again */
	UP_CONNECTING,
	UP_CHALLENGE,     /* connected, waiting for the central daemon's CHALLENGE */
	UP_PROOF,         /* NODE_HELLO sent, waiting for its DAEMON_PROOF */
	UP_READY,         /* sending */
	UP_CLOSING,
};

/* What was last sent of one job: only what changes is sent again. */
struct up_job {
	char id[FR_JOB_MAX + 1];
	bool seen;                  /* still in the registry at this tick */
	/* The job ended here and the central daemon was told so (an empty
	 * FULL NODE_RANKS): nothing more is sent of it unless it comes back. */
	bool retracted;
	uint32_t world_size;
	uint32_t nslots;
	uint8_t *state;             /* per rank: the state sent + 1; 0: none sent */
	uint32_t *pid;
	size_t comms_sent;
	size_t nhash;
	uint64_t *progress_hash;    /* per frame of FR_NODE_PROGRESS_COMMS_MAX communicators */
};

struct up_write {
	uv_write_t req;
	uint8_t frame[];
};

static struct {
	struct flightrecd *d;
	enum up_state state;
	bool tcp_open;
	uv_tcp_t tcp;
	uv_connect_t connect_req;
	uv_timer_t timer;           /* the next attempt, or the pace while ready */
	uint64_t backoff_ms;
	uint64_t boot_id;
	uint8_t nonce[FR_WIRE_NONCE_SIZE];       /* the central daemon's CHALLENGE */
	uint8_t our_nonce[FR_WIRE_NONCE_SIZE];   /* our DAEMON_CHALLENGE */
	uint8_t *hello;             /* NODE_HELLO's payload as sent, for the proof */
	size_t hello_len;
	uint8_t *buf;
	size_t len, cap;
	size_t njobs;
	struct up_job *jobs;
	bool failed_logged;         /* the current run of failures was logged */
	/* Reading stopped while incidents' answers wait over their bound
	 * (upstream_incident_backlogged()); logged once a connection. */
	bool paused, paused_logged;
	/* The NODE_PROGRESS records of a pace (up_send_progress()). */
	struct fr_node_comm_progress *progress;
	size_t nprogress;
	/* The newest version the central daemon said it speaks (WELCOME,
	 * protocol 7); 0 until it says, as one of version 6 or older never
	 * does. Per connection. */
	unsigned central_version;
} up;

static void up_schedule(void);
static void on_handshake_timeout(uv_timer_t *t);
static void up_resume(void);

static void up_job_free(struct up_job *j)
{
	free(j->state);
	free(j->pid);
	free(j->progress_hash);
	memset(j, 0, sizeof(*j));
}

/* Forgets what was sent: after a (re)connect everything goes again. */
static void up_jobs_forget(void)
{
	for (size_t i = 0; i < up.njobs; i++)
		up_job_free(&up.jobs[i]);
	free(up.jobs);
	up.jobs = NULL;
	up.njobs = 0;
}

static void on_write_done(uv_write_t *req, int status)
{
	(void)status;
	free(req);
	/* Room on the connection: incidents' pieces waiting may go. */
	if (up.state == UP_READY) {
		upstream_incident_pump();
		up_resume();
	}
}

/* Queues a frame of `n` bytes encoded in w->frame (n < 0: the encoder's error); takes w. */
static int up_write(struct up_write *w, int n)
{
	uv_buf_t buf;
	int err;

	if (n < 0 || !up.tcp_open) {
		free(w);
		return n < 0 ? n : -EPIPE;
	}
	buf = uv_buf_init((char *)w->frame, (unsigned)n);
	err = uv_write(&w->req, (uv_stream_t *)&up.tcp, &buf, 1, on_write_done);
	if (err)
		free(w);
	return err;
}

/* Encodes and queues one message of kind `n`, whose struct is `m`. */
#define UP_SEND(n, m)                                                                   \
	({                                                                              \
		size_t size_ = fr_wire_##n##_size(m);                                   \
		struct up_write *w_ = malloc(sizeof(*w_) + size_);                      \
		w_ ? up_write(w_, fr_wire_##n##_encode(m, w_->frame, size_)) : -ENOMEM; \
	})

static void on_closed(uv_handle_t *h)
{
	(void)h;
	up.tcp_open = false;
	if (up.state == UP_CLOSING)
		return;
	up.state = UP_IDLE;
	up_schedule();
}

/* Drops the connection over `why` and tries again after the backoff. */
static void up_fail(const char *why)
{
	if (up.state == UP_CLOSING || up.state == UP_IDLE)
		return;
	up.backoff_ms = upstream_backoff_next(up.backoff_ms);
	/* Every attempt of a run fails the same way: the first says so. */
	if (!up.failed_logged)
		daemon_log("upstream %s: %s; trying again with backoff (up to %u s)",
			   up.d->cfg.upstream, why, UPSTREAM_BACKOFF_MAX_MS / 1000);
	up.failed_logged = true;
	up.state = UP_IDLE;
	up.paused = up.paused_logged = false;
	upstream_incident_disconnected();
	uv_timer_stop(&up.timer);
	free(up.hello);
	up.hello = NULL;
	up.len = 0;
	if (up.tcp_open && !uv_is_closing((uv_handle_t *)&up.tcp))
		uv_close((uv_handle_t *)&up.tcp, on_closed);
	else
		up_schedule();
}

/* The node's name: $FLIGHTREC_NODE_NAME, else its host name. */
static void node_name(char *out, size_t cap)
{
	const char *env = getenv("FLIGHTREC_NODE_NAME");

	if (env && env[0])
		snprintf(out, cap, "%s", env);
	else if (gethostname(out, cap) != 0 || !out[0])
		snprintf(out, cap, "unknown");
	out[cap - 1] = '\0';
}

static char node_name_once[FR_HOST_MAX + 1];

static void node_name_init(void)
{
	node_name(node_name_once, sizeof(node_name_once));
}

/* Read once: it is the node's identity to the central daemon for the
 * daemon's life, and the thread pool's summaries read it too. */
const char *upstream_node_name(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, node_name_init);
	return node_name_once;
}

bool upstream_ready(void)
{
	return up.d && up.state == UP_READY && up.tcp_open;
}

unsigned upstream_central_version(void)
{
	return upstream_ready() ? up.central_version : 0;
}

size_t upstream_queued(void)
{
	return upstream_ready() ? uv_stream_get_write_queue_size((uv_stream_t *)&up.tcp) : 0;
}

uint8_t *upstream_frame(size_t size)
{
	struct up_write *w = malloc(sizeof(*w) + size);

	return w ? w->frame : NULL;
}

int upstream_queue(uint8_t *frame, int n)
{
	return up_write((struct up_write *)(frame - offsetof(struct up_write, frame)), n);
}

/* Encodes NODE_HELLO into up.hello (payload) and returns the whole frame in *frame. */
static int up_make_hello(struct up_write **frame, int *n)
{
	struct flightrecd *d = up.d;
	struct fr_msg_node_hello m = { 0 };
	size_t size, i = 0;

	snprintf(m.node, sizeof(m.node), "%s", upstream_node_name());
	m.boot_id = up.boot_id;
	m.protocol = FR_WIRE_VERSION;
	m.jobs = calloc(d->njobs ? d->njobs : 1, sizeof(*m.jobs));
	if (!m.jobs)
		return -ENOMEM;
	/* The first jobs only, so that NODE_HELLO stays within what a central
	 * daemon reads before the proof; every job's ranks follow as NODE_RANKS. */
	for (struct job *job = d->jobs; job && i < FR_NODE_HELLO_JOBS_MAX; job = job->next, i++) {
		memcpy(m.jobs[i].job, job->id, sizeof(m.jobs[i].job));
		m.jobs[i].world_size = job->world_size;
		m.jobs[i].nranks = job->nknown;
	}
	m.njobs = (uint32_t)i;
	size = fr_wire_node_hello_size(&m);
	*frame = malloc(sizeof(**frame) + size);
	up.hello = malloc(size);
	if (!*frame || !up.hello)
		goto out_nomem;
	*n = fr_wire_node_hello_encode(&m, (*frame)->frame, size);
	free(m.jobs);
	if (*n < 0)
		return *n;
	up.hello_len = (size_t)*n - FR_WIRE_HEADER_SIZE;
	memcpy(up.hello, (*frame)->frame + FR_WIRE_HEADER_SIZE, up.hello_len);
	return 0;
out_nomem:
	free(m.jobs);
	free(*frame);
	*frame = NULL;
	return -ENOMEM;
}

static struct up_job *up_job(const struct job *job)
{
	struct up_job *jobs;

	for (size_t i = 0; i < up.njobs; i++)
		if (strcmp(up.jobs[i].id, job->id) == 0)
			return &up.jobs[i];
	jobs = realloc(up.jobs, (up.njobs + 1) * sizeof(*jobs));
	if (!jobs)
		return NULL;
	up.jobs = jobs;
	memset(&jobs[up.njobs], 0, sizeof(jobs[0]));
	memcpy(jobs[up.njobs].id, job->id, sizeof(jobs[0].id));
	return &jobs[up.njobs++];
}

/* NODE_RANKS of the job's ranks whose state or process changed since sent (all: `full`). */
/* The registry's state of a rank as NODE_RANKS says it. */
static uint8_t node_rank_state(enum rank_state st)
{
	switch (st) {
	case RANK_STATE_CONNECTED:
		return FR_NODE_RANK_CONNECTED;
	case RANK_STATE_UNRESPONSIVE:
		return FR_NODE_RANK_UNRESPONSIVE;
	case RANK_STATE_FINISHED:
		return FR_NODE_RANK_FINISHED;
	case RANK_STATE_CRASHED:
		return FR_NODE_RANK_CRASHED;
	case RANK_STATE_EXITED:
		return FR_NODE_RANK_EXITED;
	case RANK_STATE_KILLED:
		return FR_NODE_RANK_KILLED;
	default:
		return FR_NODE_RANK_DISCONNECTED;
	}
}

static int up_send_ranks(struct up_job *uj, const struct job *job, uint64_t now_mono, bool full)
{
	struct fr_msg_node_ranks m = { 0 };
	int err = 0;

	if (uj->nslots < job->nslots) {
		uint8_t *s = realloc(uj->state, job->nslots);
		uint32_t *p = s ? realloc(uj->pid, job->nslots * sizeof(*p)) : NULL;

		if (s)
			uj->state = s;
		if (!p)
			return -ENOMEM;
		uj->pid = p;
		memset(s + uj->nslots, 0, job->nslots - uj->nslots);
		uj->nslots = job->nslots;
	}
	m.ranks = calloc(FR_NODE_RANKS_BATCH, sizeof(*m.ranks));
	if (!m.ranks)
		return -ENOMEM;
	memcpy(m.job, job->id, sizeof(m.job));
	m.world_size = job->world_size;
	m.flags = full ? FR_NODE_RANKS_FULL : 0;
	for (uint32_t i = 0; i < job->nslots && !err; i++) {
		const struct job_rank *r = job->ranks[i];
		uint8_t st;

		if (!r)
			continue;
		st = node_rank_state(registry_rank_state(up.d, r, now_mono));
		/* A central daemon older than protocol 7 knows no deaths: it
		 * sees the rank gone. */
		if (fr_node_rank_died(st) && up.central_version < 7)
			st = FR_NODE_RANK_DISCONNECTED;
		if (!full && uj->state[i] == st + 1 && uj->pid[i] == r->pid)
			continue;
		uj->state[i] = st + 1;
		uj->pid[i] = r->pid;
		m.ranks[m.nranks] = (struct fr_node_rank){ .rank = r->rank, .pid = r->pid,
							   .state = st, .start_ns = r->start_ns,
							   .ring_capacity = r->ring_capacity };
		memcpy(m.ranks[m.nranks].host, r->host, sizeof(r->host));
		if (++m.nranks == FR_NODE_RANKS_BATCH) {
			err = UP_SEND(node_ranks, &m);
			m.nranks = 0;
			m.flags = 0;
		}
	}
	/* A full list goes even when empty: it says the node holds none now. */
	if (!err && (m.nranks || m.flags))
		err = UP_SEND(node_ranks, &m);
	free(m.ranks);
	return err;
}

/* NODE_COMMS of the job's communicators not sent yet, with their members as runs. */
static int up_send_comms(struct up_job *uj, const struct job *job)
{
	size_t n = job->ncomms - uj->comms_sent;
	struct fr_node_comm *comms, *slots;
	struct fr_node_cursor at = { 0 };
	struct fr_msg_node_comms m = { 0 };
	int err = 0;

	if (!n)
		return 0;
	comms = calloc(n, sizeof(*comms));
	slots = calloc(n, sizeof(*slots));
	if (!comms || !slots) {
		err = -ENOMEM;
		goto out_free;
	}
	for (size_t i = 0; i < n; i++) {
		const struct job_comm *jc = &job->comms[uj->comms_sent + i];

		memcpy(comms[i].id, jc->id, sizeof(comms[i].id));
		memcpy(comms[i].desc, jc->desc, sizeof(comms[i].desc));
		comms[i].size = jc->size;
		if (!jc->members || !jc->size)
			continue;
		comms[i].maps = malloc(jc->size * sizeof(*comms[i].maps));
		if (!comms[i].maps) {
			err = -ENOMEM;
			goto out_free;
		}
		comms[i].nmaps = fr_node_maps_from_members(jc->members->v, jc->size, comms[i].maps);
	}
	memcpy(m.job, job->id, sizeof(m.job));
	while (!err && at.comm < n) {
		int got = fr_node_comms_batch(&m, slots, (uint32_t)n, comms, (uint32_t)n, &at,
					      up.d->cfg.max_frame_size);

		err = got < 0 ? got : UP_SEND(node_comms, &m);
	}
	if (!err)
		uj->comms_sent = job->ncomms;
out_free:
	for (size_t i = 0; comms && i < n; i++)
		free(comms[i].maps);
	free(comms);
	free(slots);
	return err;
}

/* NODE_PROGRESS for each frame of communicators whose records changed. */
/* Communicators whose records one pass over the ranks makes; a multiple of FR_NODE_PROGRESS_COMMS_MAX. */
#define UP_PROGRESS_CHUNK 256u
_Static_assert(UP_PROGRESS_CHUNK % FR_NODE_PROGRESS_COMMS_MAX == 0, "a frame never straddles two chunks");

static int up_send_progress(struct up_job *uj, const struct job *job, uint64_t now_ns)
{
	size_t frames = (job->ncomms + FR_NODE_PROGRESS_COMMS_MAX - 1) / FR_NODE_PROGRESS_COMMS_MAX;
	struct fr_node_comm_progress *out;
	int err = 0;

	if (uj->nhash < frames) {
		uint64_t *h = realloc(uj->progress_hash, frames * sizeof(*h));

		if (!h)
			return -ENOMEM;
		memset(h + uj->nhash, 0, (frames - uj->nhash) * sizeof(*h));
		uj->progress_hash = h;
		uj->nhash = frames;
	}
	/* Records of UP_PROGRESS_CHUNK communicators at a time, each chunk
	 * one pass over the ranks; kept from pace to pace (a record is
	 * 36 KiB: a job of thousands of communicators must not make the node
	 * hold one each). */
	if (!up.progress) {
		up.progress = malloc(UP_PROGRESS_CHUNK * sizeof(*up.progress));
		if (!up.progress)
			return -ENOMEM;
	}
	out = up.progress;
	for (size_t f = 0; f < frames && !err; f++) {
		size_t first = f * FR_NODE_PROGRESS_COMMS_MAX;
		size_t chunk = first / UP_PROGRESS_CHUNK * UP_PROGRESS_CHUNK;
		uint32_t n = (uint32_t)(job->ncomms - first < FR_NODE_PROGRESS_COMMS_MAX ?
						job->ncomms - first :
						FR_NODE_PROGRESS_COMMS_MAX);
		struct fr_msg_node_progress m = { .ncomms = n, .comms = out + (first - chunk) };
		struct up_write *w;
		size_t size;
		uint64_t h;
		int len;

		if (first == chunk) {
			err = aggregate_progress_range(job, chunk,
						       (uint32_t)(job->ncomms - chunk < UP_PROGRESS_CHUNK ?
								  job->ncomms - chunk :
								  UP_PROGRESS_CHUNK),
						       now_ns, out);
			if (err)
				break;
		}
		memcpy(m.job, job->id, sizeof(m.job));
		size = fr_wire_node_progress_size(&m);
		w = malloc(sizeof(*w) + size);
		if (!w) {
			err = -ENOMEM;
			break;
		}
		len = fr_wire_node_progress_encode(&m, w->frame, size);
		/* Tells a record that changed from one sent already. */
		h = len > 0 ? fr_fnv1a(FR_FNV_INIT, w->frame, (size_t)len) : 0;
		if (len > 0 && h == uj->progress_hash[f]) {
			free(w);
			continue;
		}
		uj->progress_hash[f] = h;
		err = up_write(w, len);
	}
	return err;
}

/*
 * Tells the central daemon the job ended here (its ranks all finished, or
 * the registry forgot it): an empty FULL NODE_RANKS, after which it keeps
 * nothing of the node's for the job.
 */
static int up_send_retraction(struct up_job *uj)
{
	struct fr_msg_node_ranks m = { .world_size = uj->world_size, .flags = FR_NODE_RANKS_FULL };
	int err;

	memcpy(m.job, uj->id, sizeof(m.job));
	err = UP_SEND(node_ranks, &m);
	if (!err)
		uj->retracted = true;
	return err;
}

/* Sends what changed since the last tick (everything: `full`); the caller holds the lock. */
static int up_send_state(bool full)
{
	struct flightrecd *d = up.d;
	uint64_t now_mono = daemon_mono_ns(), now_ns = daemon_now_ns();
	int err = 0;

	for (size_t i = 0; i < up.njobs; i++)
		up.jobs[i].seen = false;
	for (struct job *job = d->jobs; job && !err; job = job->next) {
		struct up_job *uj = up_job(job);

		if (!uj)
			return -ENOMEM;
		uj->seen = true;
		uj->world_size = job->world_size;
		if (strcmp(registry_job_status(job), "finished") == 0) {
			if (!uj->retracted)
				err = up_send_retraction(uj);
			continue;
		}
		if (uj->retracted) {
			/* The id came back (a new job of the same id): all again. */
			up_job_free(uj);
			memcpy(uj->id, job->id, sizeof(uj->id));
			uj->seen = true;
			uj->world_size = job->world_size;
		}
		err = up_send_ranks(uj, job, now_mono, full || !uj->nslots);
		if (!err)
			err = up_send_comms(uj, job);
		if (!err)
			err = up_send_progress(uj, job, now_ns);
	}
	/* Jobs the registry forgot: the central daemon is told, and their
	 * record here goes too. */
	for (size_t i = 0; i < up.njobs && !err;) {
		if (up.jobs[i].seen) {
			i++;
			continue;
		}
		if (!up.jobs[i].retracted)
			err = up_send_retraction(&up.jobs[i]);
		up_job_free(&up.jobs[i]);
		up.jobs[i] = up.jobs[--up.njobs];
	}
	return err;
}

static void on_pace(uv_timer_t *t)
{
	int err;

	(void)t;
	if (up.state != UP_READY)
		return;
	upstream_incident_pump();
	up_resume();
	if (up.state != UP_READY)
		return;
	if (uv_stream_get_write_queue_size((uv_stream_t *)&up.tcp) > UPSTREAM_QUEUE_MAX)
		return;
	pthread_mutex_lock(&up.d->lock);
	err = up_send_state(false);
	pthread_mutex_unlock(&up.d->lock);
	if (err)
		up_fail(err == -ENOMEM ? "out of memory" : uv_strerror(err));
}

/* The handshake is done: the full state, then the pace. */
static void up_ready(void)
{
	int err;

	daemon_log("upstream %s: connected as a node daemon", up.d->cfg.upstream);
	up.state = UP_READY;
	uv_timer_stop(&up.timer);
	up.backoff_ms = 0;
	up.failed_logged = false;
	up_jobs_forget();
	pthread_mutex_lock(&up.d->lock);
	err = up_send_state(true);
	pthread_mutex_unlock(&up.d->lock);
	if (err) {
		up_fail(err == -ENOMEM ? "out of memory" : uv_strerror(err));
		return;
	}
	uv_timer_start(&up.timer, on_pace, UPSTREAM_PACE_MS, UPSTREAM_PACE_MS);
}

/* Sends NODE_HELLO; with a token, first DAEMON_CHALLENGE and AUTH (its proof). */
static int up_send_hello(void)
{
	const struct fr_token *t = &up.d->cfg.token;
	struct up_write *hello = NULL;
	int n = 0, err;

	pthread_mutex_lock(&up.d->lock);
	err = up_make_hello(&hello, &n);
	pthread_mutex_unlock(&up.d->lock);
	if (err)
		return err;
	if (t->len) {
		struct fr_msg_daemon_challenge dc;
		struct fr_msg_auth auth;

		if (getrandom(up.our_nonce, sizeof(up.our_nonce), GRND_NONBLOCK) !=
		    (ssize_t)sizeof(up.our_nonce)) {
			free(hello);
			return -EAGAIN;
		}
		memcpy(dc.nonce, up.our_nonce, sizeof(dc.nonce));
		fr_wire_node_proof(t, false, up.nonce, NULL, up.hello, up.hello_len, auth.proof);
		err = UP_SEND(daemon_challenge, &dc);
		if (!err)
			err = UP_SEND(auth, &auth);
		explicit_bzero(&auth, sizeof(auth));
		if (err) {
			free(hello);
			return err;
		}
	}
	return up_write(hello, n);
}

/* One frame from the central daemon. Returns false when the connection failed. */
static bool up_frame(const struct fr_wire_header *h, const uint8_t *p)
{
	const struct fr_token *t = &up.d->cfg.token;

	switch (h->type) {
	case FR_MSG_CHALLENGE: {
		struct fr_msg_challenge m;

		if (!t->len) {
			up_fail("the central daemon requires a token: start this daemon with its --token-file");
			return false;
		}
		if (up.state != UP_CHALLENGE || fr_wire_challenge_decode(p, h->length, &m)) {
			up_fail("an unexpected challenge");
			return false;
		}
		memcpy(up.nonce, m.nonce, sizeof(up.nonce));
		if (up_send_hello()) {
			up_fail("cannot send node_hello");
			return false;
		}
		/* Still within the deadline set at the connect. */
		up.state = UP_PROOF;
		return true;
	}
	case FR_MSG_DAEMON_PROOF: {
		struct fr_msg_daemon_proof m;

		if (up.state != UP_PROOF || fr_wire_daemon_proof_decode(p, h->length, &m) ||
		    !fr_wire_node_verify(t, true, up.our_nonce, up.nonce, up.hello, up.hello_len,
					 m.proof)) {
			up_fail("the central daemon did not prove the token (another token, or not a flightrecd)");
			return false;
		}
		up_ready();
		return up.state == UP_READY;
	}
	case FR_MSG_NODE_DUMP_REQUEST:
	case FR_MSG_NODE_FETCH:
		if (up.state != UP_READY) {
			up_fail("an incident's request before the handshake ended");
			return false;
		}
		if (upstream_incident_frame(up.d, h->type, p, h->length)) {
			up_fail(h->type == FR_MSG_NODE_FETCH ? "a node_fetch it cannot read" :
							      "a node_dump_request it cannot read");
			return false;
		}
		return true;
	case FR_MSG_NODE_LOOK_REQUEST:
		if (up.state != UP_READY) {
			up_fail("a live look's request before the handshake ended");
			return false;
		}
		if (upstream_look_frame(up.d, p, h->length)) {
			up_fail("a node_look_request it cannot read");
			return false;
		}
		return true;
	case FR_MSG_WELCOME: {
		struct fr_msg_welcome m;

		if (up.state != UP_READY || fr_wire_welcome_decode(p, h->length, &m)) {
			up_fail("a welcome it cannot read");
			return false;
		}
		up.central_version = m.version;
		return true;
	}
	case FR_MSG_ERROR: {
		struct fr_msg_error m;
		char why[FR_REASON_MAX + 32];

		if (fr_wire_error_decode(p, h->length, &m))
			snprintf(why, sizeof(why), "refused with an unreadable error");
		else
			snprintf(why, sizeof(why), "refused: %s", m.message);
		up_fail(why);
		return false;
	}
	default:
		up_fail("a frame a central daemon does not send");
		return false;
	}
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)h;
	(void)suggested;
	if (up.cap - up.len < 4096) {
		size_t cap = up.cap ? up.cap * 2 : 8192;
		uint8_t *b = cap <= 2 * FR_WIRE_HEADER_SIZE + 65536 ? realloc(up.buf, cap) : NULL;

		if (!b) {
			*buf = uv_buf_init(NULL, 0);
			return;
		}
		up.buf = b;
		up.cap = cap;
	}
	*buf = uv_buf_init((char *)up.buf + up.len, (unsigned)(up.cap - up.len));
}

/*
 * The whole frames read, up to the first that finds the incidents'
 * answers over their bound: reading then stops (the rest stays in up.buf)
 * until they are written (up_resume()). Returns false when the
 * connection failed.
 */
static bool up_frames(void)
{
	size_t off = 0;

	for (;;) {
		struct fr_wire_frame f;
		int err;

		if (upstream_incident_backlogged()) {
			if (!up.paused_logged)
				daemon_log("upstream %s: the central daemon asks faster than it reads the "
					   "answers; not reading its requests until they are sent",
					   up.d->cfg.upstream);
			up.paused = up.paused_logged = true;
			uv_read_stop((uv_stream_t *)&up.tcp);
			break;
		}
		err = fr_frame_next(up.buf + off, up.len - off, 4096, &f);
		if (err == -EAGAIN)
			break;
		if (err) {
			up_fail("a frame that is not flightrec's, or too long");
			return false;
		}
		if (!up_frame(&f.h, f.payload))
			return false;
		off += f.size;
	}
	memmove(up.buf, up.buf + off, up.len - off);
	up.len -= off;
	return true;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	(void)s;
	(void)buf;
	if (nread == 0)
		return;
	if (nread < 0) {
		up_fail(nread == UV_EOF ? "the central daemon closed the connection" :
					  uv_strerror((int)nread));
		return;
	}
	up.len += (size_t)nread;
	up_frames();
}

/* Reads again once the answers are down to half their bound: first what was read already. */
static void up_resume(void)
{
	if (!up.paused || !upstream_incident_drained() || !upstream_ready())
		return;
	up.paused = false;
	if (up_frames() && !up.paused)
		uv_read_start((uv_stream_t *)&up.tcp, on_alloc, on_read);
}

static void on_handshake_timeout(uv_timer_t *t)
{
	(void)t;
	if (up.state == UP_CONNECTING)
		up_fail("no connection within 10 s (connect timed out)");
	else
		up_fail(up.state == UP_CHALLENGE ?
				"no challenge within 10 s of the connect (has the central daemon no --token-file?)" :
				"the central daemon did not answer node_hello within 10 s of the connect");
}

static void on_connect(uv_connect_t *req, int status)
{
	(void)req;
	if (up.state == UP_CLOSING)
		return;
	if (status < 0) {
		up_fail(uv_strerror(status));
		return;
	}
	uv_read_start((uv_stream_t *)&up.tcp, on_alloc, on_read);
	/* With a token, the central daemon speaks first (CHALLENGE), within
	 * the deadline set at the connect. */
	if (up.d->cfg.token.len) {
		up.state = UP_CHALLENGE;
		return;
	}
	if (up_send_hello()) {
		up_fail("cannot send node_hello");
		return;
	}
	up_ready();
}

static void on_retry(uv_timer_t *t)
{
	int err;

	(void)t;
	if (up.state != UP_IDLE)
		return;
	err = uv_tcp_init(up.d->loop, &up.tcp);
	if (err) {
		up.backoff_ms = upstream_backoff_next(up.backoff_ms);
		up_schedule();
		return;
	}
	up.tcp_open = true;
	up.state = UP_CONNECTING;
	up.central_version = 0;
	/* One deadline for the connect and the handshake; up_ready() and
	 * up_fail() stop it. */
	uv_timer_start(&up.timer, on_handshake_timeout, UPSTREAM_HANDSHAKE_MS, 0);
	err = uv_tcp_connect(&up.connect_req, &up.tcp, (const struct sockaddr *)&up.d->cfg.upstream_addr,
			     on_connect);
	if (err)
		up_fail(uv_strerror(err));
}

/* The next attempt, after the current backoff. */
static void up_schedule(void)
{
	if (up.state == UP_CLOSING)
		return;
	uv_timer_start(&up.timer, on_retry, up.backoff_ms, 0);
}

int upstream_start(struct flightrecd *d)
{
	if (!d->cfg.upstream)
		return 0;
	memset(&up, 0, sizeof(up));
	up.d = d;
	/* A new value at every start tells the central daemon of a restart;
	 * the clock stands in while the kernel's pool is not ready. */
	if (getrandom(&up.boot_id, sizeof(up.boot_id), GRND_NONBLOCK) != sizeof(up.boot_id))
		up.boot_id = daemon_now_ns() ^ ((uint64_t)getpid() << 32);
	uv_timer_init(d->loop, &up.timer);
	up.state = UP_IDLE;
	up_schedule();
	return 0;
}

void upstream_close(struct flightrecd *d)
{
	if (!d->cfg.upstream || !up.d || up.state == UP_CLOSING)
		return;
	up.state = UP_CLOSING;
	uv_timer_stop(&up.timer);
	uv_close((uv_handle_t *)&up.timer, NULL);
	if (up.tcp_open && !uv_is_closing((uv_handle_t *)&up.tcp))
		uv_close((uv_handle_t *)&up.tcp, on_closed);
	free(up.hello);
	up.hello = NULL;
	free(up.buf);
	up.buf = NULL;
	up.len = up.cap = 0;
	free(up.progress);
	up.progress = NULL;
	up_jobs_forget();
	upstream_incident_free();
}
