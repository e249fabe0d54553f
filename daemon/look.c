/*
 * Live looks: the debug server's view of a rank's stacks and flight
 * recorder now, without an incident.
 *
 *   GET /v1/jobs/<job>/ranks/<rank>/stacks     every thread's stack
 *   GET /v1/jobs/<job>/ranks/<rank>/trace?last=N   the newest N entries
 *   GET /v1/jobs/<job>/stacks                  every rank's, grouped
 *
 * A look is a dump (protocol/PROTOCOL.md, "Live looks"): a DUMP_REQUEST
 * whose id starts with FR_WIRE_LIVE_PREFIX, answered with DUMP_DATA as for
 * an incident, kept in memory only.
 *
 * Three parties. The HTTP thread checks the request and hands it to the
 * event loop (handover.c: suspended, queued, resumed once answered); it
 * never waits for a rank, so /healthz keeps answering.
 * The loop, which owns the agents' connections, runs looks: a look asks
 * one rank or every connected rank of a job, collects the answers, and
 * completes when all answered, went away or LOOK_TIMEOUT_NS passed; it
 * then publishes a result and resumes the requests waiting on it. Called
 * again for each resumed request, the HTTP thread parses the dumps and
 * answers.
 *
 * A node daemon's central daemon asks for looks too (upstream_look.c):
 * look_local() makes the same request without an HTTP connection, and
 * its callback gets the published result where the HTTP thread would, so
 * that it shares looks and the cache with the node's own viewers. A job
 * whose ranks node daemons hold is looked at through them (node_look.c).
 *
 * A look asks only for what it shows (the scopes of protocol/wire.h): a
 * look at stacks for the threads' stacks without the ring, a trace look
 * for the newest entries without stacks, so that neither the job, the
 * connection nor the HTTP thread handles a whole dump for it.
 *
 * Many viewers must not multiply stack captures in the job: requests for
 * one rank or one job share a look when it asks for at least what they
 * need, a result younger than LOOK_FRESH_NS that holds what they need
 * answers without asking again, a connection is asked one live look at a
 * time (the others wait for its answer), and at most LOOK_MAX looks run.
 * A look at stacks and a trace look of the same rank are separate looks:
 * on one connection the second is asked once the first is answered, and
 * whatever waits then is asked in one request (need_union()). The dumps
 * held in memory are bounded by LOOK_MEMORY_MAX in all.
 *
 * Agents are not trusted with that memory: a connection's upload is taken
 * only under the id it was asked for (struct look_conn), a look's dump may be
 * no larger than its scope needs (upload_max()), its bytes count as they
 * arrive, and a look that times out lets its partial dump go. The HTTP
 * threads (several) share only the requests handed over (handover.c) and
 * the published results, which no one changes.
 */
#include "look.h"
#include "daemon.h"
#include "budget.h"
#include "clock.h"
#include "handover.h"
#include "http.h"
#include "node_look.h"
#include "ratelog.h"
#include "registry.h"
#include "route.h"
#include "server.h"
#include "upload.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <microhttpd.h>

#include "../dumps/correlate.h"
#include "../dumps/dump.h"

/* Looks running at once; one more request for another target is refused. */
#define LOOK_MAX 16
/* Results kept to answer requests within LOOK_FRESH_NS of their end. */
#define LOOK_CACHE 16
/* How often deadlines and the cache are checked while there are any. */
#define LOOK_TICK_MS 100
/* A connection that has not answered its live look in this long is asked
 * again (its answer was lost); until then, every look waits for it. */
#define LOOK_REASK_NS (30ull * NS_PER_S)
/* Dump bytes held by live looks at once: arriving, and in results. */
#define LOOK_MEMORY_MAX (1ull << 30)
/*
 * The largest dump a look of each scope takes, far below --max-dump-size:
 * a rank's stacks, or N ring entries and the communicators. A whole dump
 * (an agent that predates scopes) may be as large as an incident's.
 */
#define LOOK_STACKS_MAX (4ull << 20)
#define LOOK_TRACE_ENTRY_MAX 2048ull
#define LOOK_TRACE_BASE_MAX (1ull << 20)
#define LOOK_REASON "live look (HTTP debug server)"
/* GET .../trace?last=N */
#define TRACE_LAST_DEFAULT 50
#define TRACE_LAST_MAX FR_WIRE_LIVE_TRACE_MAX

/*
 * What a look needs of a rank's dump, or what a dump holds, as a live
 * look's scope says it: FR_WIRE_LIVE_STACKS, FR_WIRE_LIVE_TRACE of the
 * newest `last` entries, or FR_WIRE_LIVE_WHOLE.
 */
struct need {
	enum fr_wire_live_scope scope;
	uint32_t last;
};
#define NO_NEED ((struct need){ FR_WIRE_LIVE_NONE, 0 })

/* One rank's dump, shared by the results that hold it. */
struct blob {
	atomic_uint refs;
	size_t len;
	uint8_t *data;
};

/* What became of the live look asked of one rank. */
enum slot_answer {
	SLOT_PENDING,
	SLOT_ANSWERED,
	SLOT_TIMEOUT,       /* no complete dump by the deadline */
	SLOT_CLOSED,        /* the connection went away first */
	SLOT_FAILED,        /* refused upload, or the request could not be sent */
	SLOT_STOPPING,      /* the daemon stopped first */
};

struct slot {
	uint32_t rank;
	enum slot_answer answer;
	struct conn *conn;          /* while pending */
	struct blob *blob;          /* SLOT_ANSWERED: a reference */
	struct need got;            /* SLOT_ANSWERED: what its id asked for */
	char why[160];              /* SLOT_FAILED */
	/* The connection's, from its HELLO: a dump's own say is not trusted. */
	char host[FR_HOST_MAX + 1];
	uint32_t pid;
};

/*
 * A look's answers. Filled by the loop while the look runs; once
 * published (done), never changed again and read by the HTTP thread.
 */
struct look_result {
	atomic_uint refs;
	char job[FR_JOB_MAX + 1];
	uint32_t world_size;
	uint32_t rank;              /* FR_RANK_UNKNOWN: every connected rank */
	struct need need;           /* what its look asked each rank for */
	uint64_t done_mono;
	size_t n;
	struct slot *slots;         /* ranks ascending */
};

/* A request handed to the loop (handover.c) for a live look. */
struct live_req {
	struct handover h;          /* h.status 200: `res` holds the answers */
	struct live_req *next_wait; /* its look's waiters */
	enum route_kind kind;
	char job[FR_JOB_MAX + 1];
	uint32_t rank;
	uint32_t last;
	struct look_result *res;         /* a reference, set before it is answered */
	/* Set for a look the daemon itself asked (look_local()): called
	 * with the answer in place of resuming an HTTP request. */
	look_done_fn *done;
	void *done_arg;
	struct live_req *next_local;    /* live.locals */
};

/*
 * A connection's part in live looks, from the first look asked of it until
 * it closes (look_conn_closed()): the look asked of the agent and not
 * answered yet (one at a time, so that a rank that cannot answer collects
 * no queue of requests), and the dump arriving for it. Only a dump with
 * the id asked is taken: an agent cannot upload a look nobody asked for.
 */
struct look_conn {
	bool asked;
	uint64_t asked_mono;
	char id[FR_INCIDENT_MAX + 1];
	size_t pending;             /* the looks' slots waiting on it */
	struct upload up;
};

struct look {
	struct look *next;
	struct look_result *res;         /* being filled */
	size_t pending;
	uint64_t deadline_mono;
	struct live_req *waiters;
};

/* One daemon per process, like the loop it belongs to. */
static struct {
	uv_timer_t timer;
	bool handles_open;
	/* Loop only. */
	bool ticking;
	struct look *looks;
	size_t nlooks;
	struct look_result *cache[LOOK_CACHE];
	uint64_t seq;               /* the n of "live-stacks-n" and the others */
	/* Any thread: bytes of dumps arriving or held. */
	atomic_uint_fast64_t bytes;
	/* Any thread: what /metrics counts (struct look_metrics). */
	atomic_uint_fast64_t n_requests, n_shared, n_dump_requests, n_timeouts, n_bytes;
	atomic_uint_fast64_t n_ignored;
	/* Loop only: the looks the daemon asked itself, not answered yet
	 * (no HTTP request stands for them: look_stop() answers them). */
	struct live_req *locals;
} live;

/* ---- what a look needs ---- */

static struct need req_need(enum route_kind kind, uint32_t last)
{
	if (kind == ROUTE_RANK_TRACE)
		return (struct need){ FR_WIRE_LIVE_TRACE, last };
	return (struct need){ FR_WIRE_LIVE_STACKS, 0 };
}

/* Whether a dump that holds `have` shows what `want` needs. */
static bool need_covers(struct need have, struct need want)
{
	if (have.scope == FR_WIRE_LIVE_WHOLE)
		return true;
	if (have.scope != want.scope)
		return false;
	return want.scope != FR_WIRE_LIVE_TRACE || have.last >= want.last;
}

/*
 * The least that covers both: the longer of two traces, or the whole dump
 * for stacks and a trace (no scope asks for both).
 */
static struct need need_union(struct need a, struct need b)
{
	if (need_covers(a, b))
		return a;
	if (need_covers(b, a))
		return b;
	if (a.scope == FR_WIRE_LIVE_TRACE && b.scope == FR_WIRE_LIVE_TRACE)
		return (struct need){ FR_WIRE_LIVE_TRACE, a.last > b.last ? a.last : b.last };
	return (struct need){ FR_WIRE_LIVE_WHOLE, 0 };
}

/* ---- shared answers ---- */

static void blob_put(struct blob *b)
{
	if (!b || atomic_fetch_sub(&b->refs, 1) != 1)
		return;
	atomic_fetch_sub(&live.bytes, b->len);
	budget_release(BUDGET_LIVE, b->len);
	free(b->data);
	free(b);
}

static struct look_result *result_get(struct look_result *res)
{
	if (res)
		atomic_fetch_add(&res->refs, 1);
	return res;
}

static void result_put(struct look_result *res)
{
	if (!res || atomic_fetch_sub(&res->refs, 1) != 1)
		return;
	for (size_t i = 0; i < res->n; i++)
		blob_put(res->slots[i].blob);
	free(res->slots);
	free(res);
}

/* The slot of `rank`, or NULL. */
static const struct slot *result_slot(const struct look_result *res, uint32_t rank)
{
	size_t lo = 0, hi = res->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (res->slots[mid].rank == rank)
			return &res->slots[mid];
		if (res->slots[mid].rank < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* ---- what may be asked (either thread, under the daemon's lock) ---- */

/*
 * Whether the job and the rank (FR_RANK_UNKNOWN: the whole job) can be
 * looked at now. Returns 0, or the HTTP status with the reason in `err`.
 */
static unsigned target_check(struct flightrecd *d, const char *id, uint32_t rank, char *err,
			     size_t cap)
{
	const struct job *job = registry_job_find(d, id);
	const struct job_rank *r;

	if (!job) {
		snprintf(err, cap, "no such job");
		return MHD_HTTP_NOT_FOUND;
	}
	if (rank == FR_RANK_UNKNOWN) {
		if (job->nconnected)
			return 0;
		snprintf(err, cap, "no rank of job %s is connected", job->id);
		return MHD_HTTP_CONFLICT;
	}
	if (rank >= job->world_size) {
		snprintf(err, cap, "no such rank");
		return MHD_HTTP_NOT_FOUND;
	}
	r = registry_rank(job, rank);
	if (!r) {
		snprintf(err, cap, "rank %" PRIu32 " of job %s has not connected", rank, job->id);
		return MHD_HTTP_CONFLICT;
	}
	if (!r->conn || r->conn->closing) {
		snprintf(err, cap, "rank %" PRIu32 " of job %s is not connected (%s)", rank, job->id,
			 registry_rank_state_name(registry_rank_state(d, r, daemon_mono_ns())));
		return MHD_HTTP_CONFLICT;
	}
	return 0;
}

/* ---- the loop: answering requests ---- */

/*
 * Ends a request's wait with `status` (and `res` for 200, referenced) and
 * resumes it. The request may be freed by the HTTP thread at once after.
 */
static void req_finish(struct live_req *lr, unsigned status, const char *error,
		       struct look_result *res)
{
	if (lr->done) {
		struct live_req **pp = &live.locals;

		while (*pp && *pp != lr)
			pp = &(*pp)->next_local;
		if (*pp)
			*pp = lr->next_local;
		lr->done(lr->done_arg, status, error, status == MHD_HTTP_OK ? res : NULL);
		free(lr);
		return;
	}
	lr->res = result_get(res);
	handover_finish(&lr->h, status, error);
}

static void timer_update(void);

/* Keeps a published result for LOOK_FRESH_NS, in place of an older one. */
static void cache_put(struct look_result *res)
{
	size_t victim = 0;

	for (size_t i = 0; i < LOOK_CACHE; i++) {
		struct look_result *c = live.cache[i];

		if (!c || (strcmp(c->job, res->job) == 0 && c->rank == res->rank)) {
			victim = i;
			break;
		}
		if (c->done_mono < live.cache[victim]->done_mono)
			victim = i;
	}
	result_put(live.cache[victim]);
	live.cache[victim] = result_get(res);
}

/*
 * A fresh result that answers a look at `rank` of job `id` (FR_RANK_UNKNOWN:
 * the whole job) that needs `need`: for one rank, any result holding a
 * dump of it that covers the need; for the job, a result of the whole job
 * that asked for it.
 */
static struct look_result *cache_find(const char *id, uint32_t rank, struct need need, uint64_t now)
{
	for (size_t i = 0; i < LOOK_CACHE; i++) {
		struct look_result *c = live.cache[i];
		const struct slot *s;

		if (!c || now - c->done_mono >= LOOK_FRESH_NS || strcmp(c->job, id) != 0)
			continue;
		if (rank == FR_RANK_UNKNOWN) {
			if (c->rank == FR_RANK_UNKNOWN && need_covers(c->need, need))
				return c;
			continue;
		}
		s = result_slot(c, rank);
		if (s && s->answer == SLOT_ANSWERED && need_covers(s->got, need))
			return c;
	}
	return NULL;
}

static void cache_expire(uint64_t now)
{
	for (size_t i = 0; i < LOOK_CACHE; i++) {
		if (live.cache[i] && now - live.cache[i]->done_mono >= LOOK_FRESH_NS) {
			result_put(live.cache[i]);
			live.cache[i] = NULL;
		}
	}
}

static bool cache_empty(void)
{
	for (size_t i = 0; i < LOOK_CACHE; i++)
		if (live.cache[i])
			return false;
	return true;
}

/* Publishes the look's result, answers its waiters and frees it. */
static void look_complete(struct look *p)
{
	struct look **pp;
	struct live_req *lr, *next;

	for (pp = &live.looks; *pp != p; pp = &(*pp)->next)
		;
	*pp = p->next;
	live.nlooks--;
	p->res->done_mono = daemon_mono_ns();
	for (size_t i = 0; i < p->res->n; i++)
		p->res->slots[i].conn = NULL;
	cache_put(p->res);
	for (lr = p->waiters; lr; lr = next) {
		next = lr->next_wait;
		req_finish(lr, MHD_HTTP_OK, NULL, p->res);
	}
	result_put(p->res);
	free(p);
	timer_update();
}

static void upload_drop(struct upload *up);

/*
 * Nothing waits on `c`'s look any more, which timed out: the dump still
 * arriving for it, if any, is dropped with the memory it held, and the
 * connection may be asked again (it was answering, so it is alive). A
 * connection that sent nothing stays asked until LOOK_REASK_NS, so that
 * a rank that cannot answer collects no queue of requests.
 */
static void conn_live_expire(struct conn *c)
{
	struct look_conn *pc = c->live;

	if (pc->pending || !pc->up.active)
		return;
	upload_drop(&pc->up);
	pc->asked = false;
	pc->id[0] = '\0';
}

/*
 * Settles every pending slot waiting on `c` (NULL: every pending slot of
 * looks past `now`'s deadline) and completes the looks left with none.
 * With SLOT_ANSWERED, only the slots whose look needs no more than `got`
 * (what dump `b` holds) are settled; the others go on waiting.
 */
static void looks_settle(struct conn *c, enum slot_answer answer, struct blob *b,
			 struct need got, const char *why, uint64_t now)
{
	struct look *p, *next;

	for (p = live.looks; p; p = next) {
		next = p->next;
		if (!c && now < p->deadline_mono)
			continue;
		if (answer == SLOT_ANSWERED && !need_covers(got, p->res->need))
			continue;
		for (size_t i = 0; i < p->res->n; i++) {
			struct slot *s = &p->res->slots[i];

			struct conn *sc = s->conn;

			if (s->answer != SLOT_PENDING || (c && sc != c))
				continue;
			s->answer = answer;
			s->conn = NULL;
			sc->live->pending--;
			if (answer == SLOT_TIMEOUT)
				conn_live_expire(sc);
			if (answer == SLOT_ANSWERED) {
				atomic_fetch_add(&b->refs, 1);
				s->blob = b;
				s->got = got;
			}
			if (answer == SLOT_TIMEOUT)
				atomic_fetch_add_explicit(&live.n_timeouts, 1, memory_order_relaxed);
			if (why)
				snprintf(s->why, sizeof(s->why), "%s", why);
			p->pending--;
		}
		if (!p->pending)
			look_complete(p);
	}
}

/*
 * Asks `c` for a live look that covers `need`, unless one it was asked
 * recently is still unanswered: its answer serves every look waiting on
 * the connection that it covers, and conn_ask_waiting() then asks for what
 * the others need.
 */
static int conn_ask(struct conn *c, struct need need, uint64_t now)
{
	struct look_conn *pc = c->live;
	char id[FR_INCIDENT_MAX + 1];
	int err;

	if (pc->asked && now - pc->asked_mono < LOOK_REASK_NS)
		return 0;
	err = fr_wire_live_id(id, sizeof(id), need.scope, need.last, ++live.seq);
	if (!err)
		err = conn_send_dump_request(c, id, LOOK_REASON);
	if (err)
		return err;
	atomic_fetch_add_explicit(&live.n_dump_requests, 1, memory_order_relaxed);
	/* A dump still arriving for an earlier id is not what is asked now. */
	upload_drop(&pc->up);
	pc->asked = true;
	pc->asked_mono = now;
	snprintf(pc->id, sizeof(pc->id), "%s", id);
	return 0;
}

/*
 * The connection's look was answered, and slots its answer did not cover
 * still wait on it: asks for what they all need, in one request. A slot
 * that cannot be asked for fails.
 */
static void conn_ask_waiting(struct conn *c, uint64_t now)
{
	struct need need = NO_NEED;

	for (struct look *p = live.looks; p; p = p->next) {
		for (size_t i = 0; i < p->res->n; i++) {
			const struct slot *s = &p->res->slots[i];

			if (s->answer != SLOT_PENDING || s->conn != c)
				continue;
			need = need.scope == FR_WIRE_LIVE_NONE ? p->res->need :
								  need_union(need, p->res->need);
			break;
		}
	}
	if (need.scope != FR_WIRE_LIVE_NONE && conn_ask(c, need, now))
		looks_settle(c, SLOT_FAILED, NULL, need, "the request could not be sent", 0);
}

/*
 * Starts a look of `rank` of `job` (FR_RANK_UNKNOWN: every connected
 * rank) for what `need` says, with `lr` as its first waiter.
 */
static void look_begin(struct job *job, uint32_t rank, struct need need, struct live_req *lr,
		       uint64_t now)
{
	struct look *p = calloc(1, sizeof(*p));
	struct look_result *res = calloc(1, sizeof(*res));
	size_t cap = rank == FR_RANK_UNKNOWN ? job->nconnected : 1;

	if (!p || !res || !(res->slots = calloc(cap ? cap : 1, sizeof(*res->slots)))) {
		free(res);
		free(p);
		req_finish(lr, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory", NULL);
		return;
	}
	atomic_init(&res->refs, 1);
	snprintf(res->job, sizeof(res->job), "%s", job->id);
	res->world_size = job->world_size;
	res->rank = rank;
	res->need = need;
	p->res = res;
	p->deadline_mono = now + LOOK_TIMEOUT_NS;
	p->waiters = lr;
	lr->next_wait = NULL;
	for (uint32_t i = 0; i < job->nslots && res->n < cap; i++) {
		struct job_rank *r = job->ranks[i];
		struct slot *s;

		if (!r || !r->conn || r->conn->closing ||
		    (rank != FR_RANK_UNKNOWN && r->rank != rank))
			continue;
		s = &res->slots[res->n++];
		s->rank = r->rank;
		snprintf(s->host, sizeof(s->host), "%s", r->host);
		s->pid = r->pid;
		if (!r->conn->live && !(r->conn->live = calloc(1, sizeof(*r->conn->live)))) {
			s->answer = SLOT_FAILED;
			snprintf(s->why, sizeof(s->why), "out of memory");
			continue;
		}
		s->conn = r->conn;
		s->answer = SLOT_PENDING;
		p->pending++;
		r->conn->live->pending++;
		if (conn_ask(r->conn, res->need, now)) {
			s->answer = SLOT_FAILED;
			s->conn = NULL;
			r->conn->live->pending--;
			snprintf(s->why, sizeof(s->why), "the request could not be sent");
			p->pending--;
		}
	}
	p->next = live.looks;
	live.looks = p;
	live.nlooks++;
	if (!p->pending)
		look_complete(p);
	else
		timer_update();
}

/* Takes a handed-over request: answers it, or makes it wait on a look. */
static void req_take(struct flightrecd *d, struct handover *h, uint64_t now)
{
	struct live_req *lr = (struct live_req *)h;
	uint32_t rank = lr->kind == ROUTE_JOB_STACKS ? FR_RANK_UNKNOWN : lr->rank;
	struct need need = req_need(lr->kind, lr->last);
	char err[192];
	unsigned status;
	struct look_result *res;
	struct job *job;

	if (d->stopping) {
		req_finish(lr, MHD_HTTP_SERVICE_UNAVAILABLE, "the daemon is stopping", NULL);
		return;
	}
	/* The job or the rank may have gone since the HTTP thread looked. */
	status = target_check(d, lr->job, rank, err, sizeof(err));
	if (status) {
		req_finish(lr, status, err, NULL);
		return;
	}
	res = cache_find(lr->job, rank, need, now);
	if (res) {
		atomic_fetch_add_explicit(&live.n_shared, 1, memory_order_relaxed);
		req_finish(lr, MHD_HTTP_OK, NULL, res);
		return;
	}
	for (struct look *p = live.looks; p; p = p->next) {
		if (p->res->rank == rank && strcmp(p->res->job, lr->job) == 0 &&
		    need_covers(p->res->need, need)) {
			atomic_fetch_add_explicit(&live.n_shared, 1, memory_order_relaxed);
			lr->next_wait = p->waiters;
			p->waiters = lr;
			return;
		}
	}
	if (live.nlooks >= LOOK_MAX) {
		req_finish(lr, MHD_HTTP_SERVICE_UNAVAILABLE,
			   "too many live looks in progress; try again in a few seconds", NULL);
		return;
	}
	job = registry_job_find(d, lr->job);
	look_begin(job, rank, need, lr, now);
}

static void on_tick(uv_timer_t *t)
{
	struct flightrecd *d = t->data;
	uint64_t now = daemon_mono_ns();

	pthread_mutex_lock(&d->lock);
	looks_settle(NULL, SLOT_TIMEOUT, NULL, NO_NEED, NULL, now);
	cache_expire(now);
	timer_update();
	pthread_mutex_unlock(&d->lock);
}

/* The timer runs while there is a deadline to watch or a result to expire. */
static void timer_update(void)
{
	bool want = live.handles_open && (live.looks || !cache_empty());

	if (want == live.ticking)
		return;
	live.ticking = want;
	if (want)
		uv_timer_start(&live.timer, on_tick, LOOK_TICK_MS, LOOK_TICK_MS);
	else
		uv_timer_stop(&live.timer);
}

/* ---- the loop: dumps arriving ---- */

/* The bytes an upload received are what it holds against LOOK_MEMORY_MAX. */
static void upload_drop(struct upload *up)
{
	atomic_fetch_sub(&live.bytes, up->charged);
	budget_release(BUDGET_LIVE, up->charged);
	upload_reset(up);
}

/* The connection's live look failed: every look waiting on it hears why. */
static void conn_live_failed(struct conn *c, enum slot_answer answer, const char *why)
{
	struct look_conn *pc = c->live;

	if (!pc)
		return;
	upload_drop(&pc->up);
	pc->asked = false;
	pc->id[0] = '\0';
	looks_settle(c, answer, NULL, NO_NEED, why, 0);
}

/*
 * The largest dump a look with id `id` takes: what its scope needs, never
 * more than --max-dump-size. Explained in `what` for the refusal.
 */
static uint64_t upload_max(const struct conn *c, const char *id, const char **what)
{
	uint64_t max = c->d->cfg.max_dump_size;
	uint64_t scoped = max;
	uint32_t last = 0;

	switch (fr_wire_live_scope(id, &last)) {
	case FR_WIRE_LIVE_STACKS:
		scoped = LOOK_STACKS_MAX;
		*what = "the limit of a look at stacks";
		break;
	case FR_WIRE_LIVE_TRACE:
		scoped = LOOK_TRACE_BASE_MAX + LOOK_TRACE_ENTRY_MAX * last;
		*what = "the limit of a trace look of that many entries";
		break;
	default:
		*what = "--max-dump-size";
		break;
	}
	if (scoped >= max) {
		*what = "--max-dump-size";
		return max;
	}
	return scoped;
}

/*
 * Charges a piece's bytes as they arrive, against LOOK_MEMORY_MAX and
 * the daemon's memory budget: nothing is booked for the announced total,
 * so that announcing a large dump costs a peer nothing.
 */
static bool upload_charge(void *ctx, struct upload *up, uint64_t grow, uint32_t len, char *why,
			  size_t cap)
{
	(void)ctx;
	(void)grow;
	if (atomic_fetch_add(&live.bytes, len) + len > LOOK_MEMORY_MAX) {
		atomic_fetch_sub(&live.bytes, len);
		snprintf(why, cap, "live looks hold too much memory now; try again in a few seconds");
		return false;
	}
	/* The daemon's budget, shared with member lists and incident uploads. */
	if (!budget_charge(BUDGET_LIVE, len)) {
		atomic_fetch_sub(&live.bytes, len);
		snprintf(why, cap, "over the daemon's memory budget (--max-memory); try again later");
		return false;
	}
	up->charged += len;
	return true;
}

/*
 * The last piece: the dump goes to every look waiting on the connection
 * that needs no more than its id asked for (an agent that predates scopes
 * sends more, never less), and what the others need is asked next.
 */
static void upload_finish(struct conn *c)
{
	struct upload *up = &c->live->up;
	struct blob *b = malloc(sizeof(*b));
	struct need got;

	if (!b) {
		conn_live_failed(c, SLOT_FAILED, "out of memory");
		return;
	}
	/* The bytes move from the upload to the blob, and stay counted: every
	 * byte received was charged (upload_charge()). */
	atomic_init(&b->refs, 1);
	got.scope = fr_wire_live_scope(up->id, &got.last);
	b->data = upload_take(up, &b->len);
	c->live->asked = false;
	c->live->id[0] = '\0';
	looks_settle(c, SLOT_ANSWERED, b, got, NULL, 0);
	blob_put(b);
	conn_ask_waiting(c, daemon_mono_ns());
}

/* Counts, and logs once a minute per peer, an upload nobody asked for. */
static void look_ignore(const struct conn *c, const struct fr_msg_dump_data *m)
{
	char offender[INET6_ADDRSTRLEN + 8];

	atomic_fetch_add_explicit(&live.n_ignored, 1, memory_order_relaxed);
	ratelog_offender_addr(c->peer, offender, sizeof(offender));
	ratelog("live-upload", offender,
		"rank %" PRIu32 " of job %s (%s) uploaded a live look of %" PRIu64
		" bytes that was not asked of it; ignored",
		c->rank, c->job->id, c->peer, m->total);
}

void look_dump_data(struct conn *c, const struct fr_msg_dump_data *m)
{
	struct look_conn *pc = c->live;
	struct upload *up;
	const char *what = "";
	char why[256];

	if (!c->job)
		return;
	/*
	 * Only the look asked of this connection, by its id: an upload nobody
	 * asked for would hold memory every look shares.
	 */
	if (m->offset == 0 && (!pc || !pc->asked || strcmp(m->incident, pc->id) != 0)) {
		look_ignore(c, m);
		return;
	}
	if (!pc)
		return;
	up = &pc->up;
	if (m->offset == 0) {
		uint64_t max = upload_max(c, m->incident, &what);

		upload_drop(up);
		switch (upload_begin(up, m->incident, m->total, max)) {
		case 0:
			break;
		case -EPROTO:
			conn_live_failed(c, SLOT_FAILED, "the agent could not build its dump");
			return;
		default:
			snprintf(why, sizeof(why), "its dump of %" PRIu64 " bytes is over %s (%" PRIu64
				 " bytes)", m->total, what, max);
			conn_live_failed(c, SLOT_FAILED, why);
			return;
		}
	}
	/* A piece of a look already given up on (refused, or superseded). */
	if (!up->active || strcmp(up->id, m->incident) != 0)
		return;
	switch (upload_append(up, m, upload_charge, NULL, why, sizeof(why))) {
	case UPLOAD_ERROR:
		conn_live_failed(c, SLOT_FAILED, why);
		return;
	case UPLOAD_COMPLETE:
		atomic_fetch_add_explicit(&live.n_bytes, m->len, memory_order_relaxed);
		upload_finish(c);
		return;
	case UPLOAD_MORE:
		atomic_fetch_add_explicit(&live.n_bytes, m->len, memory_order_relaxed);
		return;
	}
}

void look_conn_closed(struct conn *c)
{
	conn_live_failed(c, c->d->stopping ? SLOT_STOPPING : SLOT_CLOSED, NULL);
	/* No slot waits on it any more: what it held goes with it. */
	free(c->live);
	c->live = NULL;
}

/* ---- the HTTP thread ---- */

static int reply_error(struct MHD_Connection *mc, unsigned status, const char *msg)
{
	return http_reply_doc(mc, status, json_pack("{s:s}", "error", msg));
}

/*
 * ?last=N: a decimal number from 1 to TRACE_LAST_MAX, nothing else (no
 * sign, no spaces); TRACE_LAST_DEFAULT when absent.
 */
static bool parse_last(const char *s, uint32_t *out)
{
	uint64_t v = 0;

	if (!s) {
		*out = TRACE_LAST_DEFAULT;
		return true;
	}
	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > TRACE_LAST_MAX)
			return false;
	}
	if (v == 0)
		return false;
	*out = (uint32_t)v;
	return true;
}

/*
 * The "threads" of the dump format for `t`'s threads (or only `one`),
 * written by the dump writer itself so that they read exactly as in a
 * dump. Returns a new reference, NULL when out of memory.
 */
json_t *look_threads_json(const struct fr_trace *t, const struct fr_thread *one)
{
	struct fr_trace shell = *t;
	json_t *doc, *threads;

	/* Only the threads: the entries and communicators are not wanted. */
	shell.nops = 0;
	shell.ncomms = 0;
	if (one) {
		shell.threads = (struct fr_thread *)one;
		shell.nthreads = 1;
	}
	doc = fr_dump_to_json(&shell);
	if (!doc)
		return NULL;
	threads = json_object_get(doc, "threads");
	threads = threads ? json_incref(threads) : json_array();
	json_decref(doc);
	return threads;
}

/* The newest `last` entries of `t`, oldest first, as the dump writes them. */
static json_t *entries_json(const struct fr_trace *t, uint32_t last)
{
	struct fr_trace shell = *t;
	json_t *doc, *entries;

	if (shell.nops > last) {
		shell.ops = t->ops + (t->nops - last);
		shell.nops = last;
	}
	shell.nthreads = 0;
	doc = fr_dump_to_json(&shell);
	if (!doc)
		return NULL;
	entries = json_incref(json_object_get(doc, "entries"));
	json_decref(doc);
	return entries;
}

/*
 * Parses the dump of a slot that answered. Returns 0, or the HTTP status
 * of why there is none, with the reason in `err`.
 */
static unsigned slot_trace(const struct look_result *res, const struct slot *s, struct fr_trace *t,
			   char *err, size_t cap)
{
	char perr[256];
	char name[48];

	switch (s->answer) {
	case SLOT_ANSWERED:
		break;
	case SLOT_TIMEOUT:
		snprintf(err, cap, "rank %" PRIu32 " of job %s did not answer within %llu s",
			 s->rank, res->job, (unsigned long long)(LOOK_TIMEOUT_NS / NS_PER_S));
		return MHD_HTTP_GATEWAY_TIMEOUT;
	case SLOT_CLOSED:
		snprintf(err, cap, "rank %" PRIu32 " of job %s disconnected before it answered",
			 s->rank, res->job);
		return MHD_HTTP_SERVICE_UNAVAILABLE;
	case SLOT_STOPPING:
		snprintf(err, cap, "the daemon is stopping");
		return MHD_HTTP_SERVICE_UNAVAILABLE;
	default:
		snprintf(err, cap, "rank %" PRIu32 " of job %s sent no usable dump: %s", s->rank,
			 res->job, s->why);
		return MHD_HTTP_BAD_GATEWAY;
	}
	snprintf(name, sizeof(name), "rank %" PRIu32 "'s live dump", s->rank);
	if (fr_dump_parse((const char *)s->blob->data, s->blob->len, name, t, perr,
			  sizeof(perr))) {
		snprintf(err, cap, "%s", perr);
		return MHD_HTTP_BAD_GATEWAY;
	}
	/* The connection is the rank's; a dump that says otherwise is not. */
	if (strcmp(t->job, res->job) != 0 || t->rank != s->rank) {
		snprintf(err, cap,
			 "rank %" PRIu32 " of job %s sent no usable dump: it is of another job or rank",
			 s->rank, res->job);
		fr_trace_free(t);
		return MHD_HTTP_BAD_GATEWAY;
	}
	return 0;
}

json_t *look_rank_json(const struct look_result *res, bool trace, uint32_t rank, uint32_t last,
		       unsigned *status, char *err, size_t cap)
{
	const struct slot *s = result_slot(res, rank);
	struct fr_trace t;
	json_t *doc;

	if (!s) {
		*status = MHD_HTTP_INTERNAL_SERVER_ERROR;
		snprintf(err, cap, "the rank was not asked");
		return NULL;
	}
	*status = slot_trace(res, s, &t, err, cap);
	if (*status)
		return NULL;
	if (trace)
		doc = json_pack("{s:s, s:I, s:I, s:I, s:o*}", "job", res->job, "rank",
				(json_int_t)s->rank, "last", (json_int_t)last, "dropped",
				(json_int_t)t.dropped, "entries", entries_json(&t, last));
	else
		doc = json_pack("{s:s, s:I, s:s, s:I, s:o*}", "job", res->job, "rank",
				(json_int_t)s->rank, "host", s->host, "pid", (json_int_t)s->pid,
				"threads", look_threads_json(&t, NULL));
	fr_trace_free(&t);
	if (!doc || !json_object_get(doc, trace ? "entries" : "threads")) {
		json_decref(doc);
		*status = MHD_HTTP_INTERNAL_SERVER_ERROR;
		snprintf(err, cap, "out of memory");
		return NULL;
	}
	*status = MHD_HTTP_OK;
	return doc;
}

/* GET .../ranks/<rank>/stacks and .../trace. */
static int answer_rank(struct MHD_Connection *mc, const struct live_req *lr)
{
	char err[320];
	unsigned status;
	json_t *doc = look_rank_json(lr->res, lr->kind == ROUTE_RANK_TRACE, lr->rank, lr->last,
				     &status, err, sizeof(err));

	if (!doc)
		return reply_error(mc, status, err);
	return http_reply_doc(mc, MHD_HTTP_OK, doc);
}

/* One group of GET /v1/jobs/<job>/stacks; `rep` is its lowest rank's trace. */
static json_t *group_json(const struct fr_stack_group *g, const struct fr_trace *rep)
{
	size_t need = fr_format_ranks(NULL, 0, g->ranks, g->nranks);
	char *ranks = malloc(need + 1);
	json_t *frames = json_array();
	json_t *threads = look_threads_json(rep, g->thread);
	json_t *o = NULL;

	if (!ranks || !frames || !json_array_get(threads, 0))
		goto out_free;
	fr_format_ranks(ranks, need + 1, g->ranks, g->nranks);
	for (size_t i = 0; i < g->nframes; i++) {
		const char *name = g->frames[i].name ? g->frames[i].name : "??";

		if (json_array_append_new(frames, json_string(name)))
			goto out_free;
	}
	o = json_pack("{s:s, s:I, s:O, s:O}", "ranks", ranks, "nranks", (json_int_t)g->nranks,
		      "frames", frames, "thread", json_array_get(threads, 0));
	/* A group told apart by its Python frames shows them. */
	if (o && g->pyframes && json_object_set_new(o, "python_frames", fr_pyframes_to_json(g->thread))) {
		json_decref(o);
		o = NULL;
	}
out_free:
	json_decref(threads);
	json_decref(frames);
	free(ranks);
	return o;
}

/*
 * Bounds what one rank's trace costs the job's answer: its first
 * JOB_STACK_THREADS_MAX threads, their innermost JOB_STACK_FRAMES_MAX
 * frames. Adds what it left out to the counts.
 */
static void trace_trim(struct fr_trace *t, size_t *threads_cut, size_t *frames_cut)
{
	for (size_t i = 0; i < t->nthreads; i++) {
		struct fr_thread *th = &t->threads[i];
		size_t keep = JOB_STACK_FRAMES_MAX;

		/* A thread past the first ones goes with its Python frames. */
		if (i >= JOB_STACK_THREADS_MAX) {
			fr_thread_free(th);
			continue;
		}
		if (th->npyframes > keep) {
			for (size_t j = keep; j < th->npyframes; j++) {
				free(th->pyframes[j].function);
				free(th->pyframes[j].file);
			}
			*frames_cut += th->npyframes - keep;
			th->npyframes = keep;
			th->py_truncated = true;
		}
		if (th->nframes <= keep)
			continue;
		for (size_t j = keep; j < th->nframes; j++)
			free(th->frames[j].name);
		*frames_cut += th->nframes - keep;
		th->nframes = keep;
	}
	if (t->nthreads > JOB_STACK_THREADS_MAX) {
		*threads_cut += t->nthreads - JOB_STACK_THREADS_MAX;
		t->nthreads = JOB_STACK_THREADS_MAX;
	}
}

void look_job_stacks_free(struct look_job_stacks *js)
{
	fr_stack_groups_free(&js->sg);
	for (size_t i = 0; js->traces && i < js->ntraces; i++)
		fr_trace_free(&js->traces[i]);
	free(js->traces);
	free(js->idx);
	free(js->missing);
	free(js->failed);
	free(js->why);
	memset(js, 0, sizeof(*js));
}

int look_job_stacks_build(const struct look_result *res, bool python, struct look_job_stacks *js)
{
	uint32_t world = res->world_size;
	char err[320];

	memset(js, 0, sizeof(*js));
	js->job = res->job;
	js->world_size = world;
	js->asked = res->n;
	/* The ranks' connections were closed by a stopping daemon: no look. */
	for (size_t i = 0; i < res->n; i++)
		if (res->slots[i].answer == SLOT_STOPPING)
			js->stopping = true;
	if (js->stopping)
		return 0;
	js->traces = calloc(res->n ? res->n : 1, sizeof(*js->traces));
	js->ntraces = res->n;
	js->idx = calloc(world ? world : 1, sizeof(*js->idx));
	js->missing = malloc((world ? world : 1) * sizeof(*js->missing));
	js->failed = malloc((res->n ? res->n : 1) * sizeof(*js->failed));
	js->why = calloc(JOB_STACK_WHY_MAX, sizeof(*js->why));
	if (!js->traces || !js->idx || !js->missing || !js->failed || !js->why)
		goto out_free;
	for (size_t i = 0; i < res->n; i++) {
		const struct slot *s = &res->slots[i];

		if (s->rank >= world)
			continue;
		if (slot_trace(res, s, &js->traces[i], err, sizeof(err)) == 0) {
			trace_trim(&js->traces[i], &js->threads_cut, &js->frames_cut);
			js->idx[s->rank] = &js->traces[i];
			js->answered++;
			continue;
		}
		js->failed[js->nfailed++] = s->rank;
		if (js->nwhy < JOB_STACK_WHY_MAX) {
			js->why[js->nwhy].rank = s->rank;
			snprintf(js->why[js->nwhy].text, sizeof(js->why[js->nwhy].text), "%s", err);
			js->nwhy++;
		}
	}
	for (uint32_t r = 0; r < world; r++)
		if (!js->idx[r])
			js->missing[js->nmissing++] = r;
	if ((python ? fr_stack_groups_build_python : fr_stack_groups_build)(js->idx, world, &js->sg))
		goto out_free;
	return 0;
out_free:
	look_job_stacks_free(js);
	return -ENOMEM;
}

const struct fr_trace *look_job_stacks_rep(const struct look_job_stacks *js,
					   const struct fr_stack_group *g)
{
	return js->idx[g->ranks[0]];
}

/* GET /v1/jobs/<job>/stacks. */
static int answer_job(struct MHD_Connection *mc, const struct live_req *lr)
{
	struct look_job_stacks js;
	json_t *groups = NULL, *why = NULL, *doc = NULL;
	char *missing_text = NULL;
	char key[16];
	size_t need;

	if (look_job_stacks_build(lr->res, true, &js))
		return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	if (js.stopping)
		return reply_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE, "the daemon is stopping");
	need = fr_format_ranks(NULL, 0, js.missing, js.nmissing);
	missing_text = malloc(need + 1);
	why = json_object();
	if (!missing_text || !why)
		goto out_free;
	fr_format_ranks(missing_text, need + 1, js.missing, js.nmissing);
	for (size_t i = 0; i < js.nwhy; i++) {
		snprintf(key, sizeof(key), "%" PRIu32, js.why[i].rank);
		if (json_object_set_new(why, key, json_string(js.why[i].text)))
			goto out_free;
	}
	groups = json_array();
	for (size_t g = 0; groups && g < js.sg.ngroups && g < JOB_STACK_GROUPS_MAX; g++) {
		const struct fr_stack_group *grp = &js.sg.groups[g];

		if (json_array_append_new(groups, group_json(grp, look_job_stacks_rep(&js, grp)))) {
			json_decref(groups);
			groups = NULL;
		}
	}
	/*
	 * "why" says what became of the ranks asked that did not answer (a
	 * rank never asked, not connected, is only "missing"); "more_why"
	 * counts those it leaves out.
	 */
	if (groups)
		doc = json_pack("{s:s, s:I, s:I, s:s, s:O, s:I, s:o, s:I, s:{s:I, s:I}, s:I, s:I}",
				"job", js.job, "ranks_asked", (json_int_t)js.asked,
				"ranks_answered", (json_int_t)js.answered, "missing", missing_text,
				"why", why, "more_why", (json_int_t)(js.nfailed - js.nwhy),
				"groups", groups, "more_groups",
				(json_int_t)(js.sg.ngroups > JOB_STACK_GROUPS_MAX ?
						     js.sg.ngroups - JOB_STACK_GROUPS_MAX :
						     0),
				"limits", "threads_per_rank", (json_int_t)JOB_STACK_THREADS_MAX,
				"frames_per_thread", (json_int_t)JOB_STACK_FRAMES_MAX,
				"threads_left_out", (json_int_t)js.threads_cut, "frames_left_out",
				(json_int_t)js.frames_cut);
out_free:
	json_decref(why);
	look_job_stacks_free(&js);
	free(missing_text);
	if (!doc)
		return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	return http_reply_doc(mc, MHD_HTTP_OK, doc);
}

/* The second call, once the loop resumed the request. */
static int answer(struct MHD_Connection *mc, struct live_req *lr, bool done)
{
	if (!done)
		return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "resumed before its answer");
	if (lr->h.status != MHD_HTTP_OK)
		return reply_error(mc, lr->h.status, lr->h.error);
	if (lr->kind == ROUTE_JOB_STACKS)
		return answer_job(mc, lr);
	return answer_rank(mc, lr);
}

static void req_free(struct handover *h)
{
	struct live_req *lr = (struct live_req *)h;

	result_put(lr->res);
	free(lr);
}

int look_http(struct flightrecd *d, struct MHD_Connection *mc, const struct route *r,
	      void **req_cls)
{
	uint32_t rank = r->kind == ROUTE_JOB_STACKS ? FR_RANK_UNKNOWN : r->rank;
	uint32_t last = 0;
	struct live_req *lr;
	char err[192];
	unsigned status;
	bool done;

	if (*req_cls && node_look_claims(d, r, *req_cls))
		return node_look_http(d, mc, r, 0, req_cls);
	if (*req_cls) {
		lr = (struct live_req *)handover_resumed(*req_cls, &done);
		if (!lr)
			return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "lost request");
		return answer(mc, lr, done);
	}
	atomic_fetch_add_explicit(&live.n_requests, 1, memory_order_relaxed);
	if (r->kind == ROUTE_RANK_TRACE &&
	    !parse_last(MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "last"), &last)) {
		snprintf(err, sizeof(err), "last must be a whole number from 1 to %u",
			 TRACE_LAST_MAX);
		return reply_error(mc, MHD_HTTP_BAD_REQUEST, err);
	}
	/* A job whose ranks the node daemons hold: asked of them. */
	if (node_look_claims(d, r, NULL))
		return node_look_http(d, mc, r, last, req_cls);
	/* What can be answered at once is, without the loop. */
	pthread_mutex_lock(&d->lock);
	status = target_check(d, r->job, rank, err, sizeof(err));
	pthread_mutex_unlock(&d->lock);
	if (status)
		return reply_error(mc, status, err);
	lr = calloc(1, sizeof(*lr));
	if (!lr)
		return reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	lr->h.take = req_take;
	lr->h.free = req_free;
	lr->kind = r->kind;
	snprintf(lr->job, sizeof(lr->job), "%s", r->job);
	lr->rank = rank;
	lr->last = last;
	if (handover_submit(&lr->h, mc)) {
		free(lr);
		return reply_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE, "the daemon is stopping");
	}
	*req_cls = lr;
	return MHD_YES;
}

int look_local(struct flightrecd *d, enum route_kind kind, const char *job, uint32_t rank,
	       uint32_t last, look_done_fn *done, void *arg)
{
	struct live_req *lr = calloc(1, sizeof(*lr));

	if (!lr)
		return -ENOMEM;
	atomic_fetch_add_explicit(&live.n_requests, 1, memory_order_relaxed);
	lr->kind = kind;
	snprintf(lr->job, sizeof(lr->job), "%s", job);
	lr->rank = kind == ROUTE_JOB_STACKS ? FR_RANK_UNKNOWN : rank;
	lr->last = last;
	lr->done = done;
	lr->done_arg = arg;
	lr->next_local = live.locals;
	live.locals = lr;
	req_take(d, &lr->h, daemon_mono_ns());
	return 0;
}

void look_metrics(struct look_metrics *out)
{
	out->requests = atomic_load_explicit(&live.n_requests, memory_order_relaxed);
	out->shared = atomic_load_explicit(&live.n_shared, memory_order_relaxed);
	out->dump_requests = atomic_load_explicit(&live.n_dump_requests, memory_order_relaxed);
	out->timeouts = atomic_load_explicit(&live.n_timeouts, memory_order_relaxed);
	out->bytes = atomic_load_explicit(&live.n_bytes, memory_order_relaxed);
	out->bytes_held = atomic_load(&live.bytes);
	out->ignored = atomic_load_explicit(&live.n_ignored, memory_order_relaxed);
}

/* ---- start and stop ---- */

int look_start(struct flightrecd *d)
{
	uv_timer_init(d->loop, &live.timer);
	live.timer.data = d;
	/* Never what keeps the loop running. */
	uv_unref((uv_handle_t *)&live.timer);
	live.handles_open = true;
	return 0;
}

void look_stop(struct flightrecd *d)
{
	/* The daemon's own looks: no HTTP request answers them. */
	while (live.locals)
		req_finish(live.locals, MHD_HTTP_SERVICE_UNAVAILABLE, "the daemon is stopping", NULL);
	/* Looks left (their waiters were answered by handover_stop()) and the cache. */
	while (live.looks) {
		struct look *p = live.looks;

		live.looks = p->next;
		result_put(p->res);
		free(p);
	}
	live.nlooks = 0;
	for (size_t i = 0; i < LOOK_CACHE; i++) {
		result_put(live.cache[i]);
		live.cache[i] = NULL;
	}
	if (live.handles_open) {
		live.handles_open = false;
		live.ticking = false;
		if (!uv_is_closing((uv_handle_t *)&live.timer)) {
			uv_close((uv_handle_t *)&live.timer, NULL);
			uv_run(d->loop, UV_RUN_NOWAIT);
		}
	}
}
