/*
 * The registry: jobs, their ranks and communicators, and each rank's live
 * state (progress per communicator, operations in flight), kept from the
 * agents' frames. It also builds the live view of a job as traces, which the
 * correlator turns into the live verdict.
 */
#include "registry.h"
#include "daemon.h"
#include "budget.h"
#include "clock.h"
#include "incident.h"
#include "log.h"
#include "ratelog.h"
#include "server.h"
#include "straggler.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../protocol/hash.h"
#include "../protocol/sha256.h"
#include "../dumps/correlate.h"
#include "../dumps/trace.h"

#define NS_PER_MS 1000000ull

/* The id index reads an entry's id at the start of the entry. */
_Static_assert(offsetof(struct job_comm, id) == 0, "job_comm id first");
_Static_assert(offsetof(struct rank_comm, id) == 0, "rank_comm id first");

/* Length of the valid UTF-8 sequence at s, or 0 when it is not one. */
static size_t utf8_seq(const unsigned char *s)
{
	unsigned char lo = 0x80;
	unsigned char hi = 0xBF;
	size_t n;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xC2 && s[0] <= 0xDF) {
		n = 2;
	} else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
		n = 3;
		lo = s[0] == 0xE0 ? 0xA0 : lo;
		hi = s[0] == 0xED ? 0x9F : hi;
	} else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
		n = 4;
		lo = s[0] == 0xF0 ? 0x90 : lo;
		hi = s[0] == 0xF4 ? 0x8F : hi;
	} else {
		return 0;
	}
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if ((s[i] & 0xC0) != 0x80)
			return 0;
	return n;
}

/*
 * Copies a string from an agent, replacing bytes that are not UTF-8 with '?':
 * every name ends up in JSON, which cannot carry them, and the same bytes
 * give the same name on every rank.
 */
static void copy_clean(char *dst, size_t cap, const char *src)
{
	unsigned char *p = (unsigned char *)dst;

	snprintf(dst, cap, "%s", src);
	while (*p) {
		size_t n = utf8_seq(p);

		if (n) {
			p += n;
			continue;
		}
		*p++ = '?';
	}
}

/*
 * The slot of `id` in an index over `base` (entries `stride` bytes apart,
 * each starting with its id): the slot holding it, or the empty slot where
 * it would go.
 */
static size_t index_slot(const struct id_index *ix, const void *base, size_t stride,
			 const char *id)
{
	size_t mask = ix->cap - 1;
	size_t i = (size_t)fr_fnv1a(FR_FNV_INIT, id, strlen(id)) & mask;

	while (ix->slots[i] &&
	       strcmp((const char *)base + (size_t)(ix->slots[i] - 1) * stride, id) != 0)
		i = (i + 1) & mask;
	return i;
}

/* The array index of `id`, or -1. */
static long index_find(const struct id_index *ix, const void *base, size_t stride,
		       const char *id)
{
	uint32_t k;

	if (!ix->cap)
		return -1;
	k = ix->slots[index_slot(ix, base, stride, id)];
	return k ? (long)k - 1 : -1;
}

/*
 * Makes room in the index for entry `n` (the array holds n entries), then
 * records it; its id must be in place and not indexed yet.
 */
static int index_add(struct id_index *ix, const void *base, size_t stride, size_t n)
{
	const char *id = (const char *)base + n * stride;

	if ((n + 1) * 2 > ix->cap) {
		size_t cap = ix->cap ? ix->cap : 16;
		uint32_t *slots;

		while ((n + 1) * 2 > cap)
			cap *= 2;
		slots = calloc(cap, sizeof(*slots));
		if (!slots)
			return -ENOMEM;
		free(ix->slots);
		ix->slots = slots;
		ix->cap = cap;
		for (size_t i = 0; i < n; i++)
			ix->slots[index_slot(ix, base, stride, (const char *)base + i * stride)] =
				(uint32_t)i + 1;
	}
	ix->slots[index_slot(ix, base, stride, id)] = (uint32_t)n + 1;
	return 0;
}

static void index_clear(struct id_index *ix)
{
	if (ix->cap)
		memset(ix->slots, 0, ix->cap * sizeof(*ix->slots));
}

static void index_free(struct id_index *ix)
{
	free(ix->slots);
	ix->slots = NULL;
	ix->cap = 0;
}

struct job *registry_job_find(struct flightrecd *d, const char *id)
{
	for (struct job *job = d->jobs; job; job = job->next)
		if (strcmp(job->id, id) == 0)
			return job;
	return NULL;
}

struct job_rank *registry_rank(const struct job *job, uint32_t rank)
{
	return rank < job->nslots ? job->ranks[rank] : NULL;
}

const struct job_comm *registry_job_comm(const struct job *job, const char *id)
{
	long i = index_find(&job->comms_index, job->comms, sizeof(*job->comms), id);

	return i < 0 ? NULL : &job->comms[i];
}

static void rank_free(struct job_rank *r)
{
	if (!r)
		return;
	free(r->comms);
	index_free(&r->comms_index);
	free(r->ops);
	fr_crash_free(r->crash);
	free(r);
}

/* Bytes a member list of `size` entries counts for in the memory budget. */
static uint64_t member_list_bytes(uint32_t size)
{
	return (uint64_t)size * sizeof(uint32_t);
}

/*
 * A new member list of `size` entries, not filled, with one reference (the
 * caller's). NULL when out of memory.
 */
static struct member_list *member_list_new(uint32_t size)
{
	struct member_list *l = malloc(sizeof(*l) + member_list_bytes(size));

	if (!l)
		return NULL;
	atomic_init(&l->refs, 1);
	l->size = size;
	return l;
}

static struct member_list *member_list_ref(struct member_list *l)
{
	atomic_fetch_add(&l->refs, 1);
	return l;
}

/*
 * Drops a reference; the last one frees the list. Any thread: a view's
 * references are dropped without the lock. The release ordering of the
 * decrement makes a reader's last look at the list happen before the
 * loop, seeing one reference left, writes to it.
 */
static void member_list_unref(struct member_list *l)
{
	if (l && atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) == 1)
		free(l);
}

/*
 * Whether a live view holds the list too. Views take references only
 * under the lock, which the caller holds: a list not shared now stays so
 * until the caller lets go of the lock.
 */
static bool member_list_shared(struct member_list *l)
{
	return atomic_load_explicit(&l->refs, memory_order_acquire) > 1;
}

/*
 * The registry lets go of a communicator's member list and gives back its
 * memory budget; a view that holds it keeps it, uncounted, until it is
 * freed (struct member_list says why that is bounded).
 */
static void job_comm_free_members(struct job *job, struct job_comm *jc)
{
	if (jc->members)
		budget_release_job(job, BUDGET_MEMBERS, member_list_bytes(jc->members->size));
	member_list_unref(jc->members);
	jc->members = NULL;
}

/* Forgets ranks and communicators (not incidents): a new run of the job. */
static void job_reset(struct job *job)
{
	for (uint32_t i = 0; i < job->nslots; i++)
		rank_free(job->ranks[i]);
	free(job->ranks);
	job->ranks = NULL;
	job->nslots = 0;
	job->nknown = 0;
	for (size_t i = 0; i < job->ncomms; i++)
		job_comm_free_members(job, &job->comms[i]);
	free(job->comms);
	job->comms = NULL;
	job->ncomms = 0;
	job->comms_cap = 0;
	index_free(&job->comms_index);
	job->comms_dropped_logged = false;
	job->has_last_key = false;
	job->has_local_key = false;
	straggler_job_free(job);
}

static void job_free(struct job *job)
{
	assert(!job->active);
	job_reset(job);
	explicit_bzero(job->key, sizeof(job->key));
	free(job->records);
	free(job);
}

static bool job_forgettable(const struct job *job)
{
	return !job->nconnected && !job->active;
}

/* Unlinks *pp (the link to it in the job list) and frees it. */
static void job_unlink_free(struct flightrecd *d, struct job **pp)
{
	struct job *job = *pp;

	*pp = job->next;
	job_free(job);
	d->njobs--;
}

/* Unlinks and frees the least recently greeted job with nobody connected. */
static bool registry_forget_one(struct flightrecd *d)
{
	struct job **victim = NULL;
	struct job *job;

	for (struct job **pp = &d->jobs; *pp; pp = &(*pp)->next) {
		job = *pp;
		if (!job_forgettable(job))
			continue;
		if (!victim || job->touched_mono < (*victim)->touched_mono)
			victim = pp;
	}
	if (!victim)
		return false;
	daemon_log("forgetting job %s to make room for a new one", (*victim)->id);
	job_unlink_free(d, victim);
	return true;
}

/*
 * Forgets the jobs nobody has been connected to for DAEMON_JOB_IDLE_NS, so
 * that a stream of one-off job ids (from a bug, or from a hostile client)
 * does not hold memory until DAEMON_MAX_JOBS of them exist. Their incident
 * directories stay on disk.
 */
void registry_forget_idle(struct flightrecd *d, uint64_t now_mono)
{
	struct job **pp = &d->jobs;

	while (*pp) {
		struct job *job = *pp;

		if (!job_forgettable(job) || now_mono - job->idle_since_mono < DAEMON_JOB_IDLE_NS) {
			pp = &job->next;
			continue;
		}
		daemon_log("forgetting job %s: no rank connected for %.0f s", job->id,
			   (double)(now_mono - job->idle_since_mono) / NS_PER_S);
		job_unlink_free(d, pp);
	}
}

/*
 * The token the jobs' kept keys were made from, and its generation, bumped
 * when the daemon's token is seen to have changed (guarded by the lock).
 */
static struct fr_token keys_token;
static uint64_t keys_gen = 1;

/* Follows the daemon's token; a change makes every kept key stale. */
static void keys_follow_token(const struct fr_token *t)
{
	if (keys_token.len == t->len && fr_ct_equal(keys_token.bytes, t->bytes, t->len))
		return;
	keys_token = *t;
	keys_gen++;
}

/* Makes the job's key from the token in effect, unless it is made already. */
static void job_key_refresh(struct flightrecd *d, struct job *job)
{
	keys_follow_token(&d->cfg.token);
	if (job->key_gen == keys_gen)
		return;
	job->key_gen = 0;
	if (d->cfg.token.len && fr_wire_job_key(&d->cfg.token, job->id, job->key) == 0)
		job->key_gen = keys_gen;
}

bool registry_job_key_is(struct flightrecd *d, struct job *job,
			 const uint8_t key[FR_WIRE_JOB_KEY_SIZE])
{
	job_key_refresh(d, job);
	return job->key_gen != 0 && fr_ct_equal(job->key, key, FR_WIRE_JOB_KEY_SIZE);
}

static struct job *registry_job_create(struct flightrecd *d, const char *id, uint32_t world,
				       const char **why)
{
	struct job *job;

	if (d->njobs >= DAEMON_MAX_JOBS && !registry_forget_one(d)) {
		*why = "too many jobs";
		return NULL;
	}
	job = calloc(1, sizeof(*job));
	if (!job) {
		*why = "out of memory";
		return NULL;
	}
	snprintf(job->id, sizeof(job->id), "%s", id);
	job_key_refresh(d, job);
	job->world_size = world;
	job->idle_since_mono = daemon_mono_ns();
	job->next = d->jobs;
	d->jobs = job;
	d->njobs++;
	daemon_log("new job %s, world size %" PRIu32, id, world);
	return job;
}

/* The rank's slot, created when first seen. */
static struct job_rank *job_rank_get(struct job *job, uint32_t rank)
{
	if (rank >= job->nslots) {
		uint32_t n = job->nslots ? job->nslots : 8;
		struct job_rank **slots;

		while (n <= rank)
			n *= 2;
		if (n > job->world_size)
			n = job->world_size;
		slots = realloc(job->ranks, n * sizeof(*slots));
		if (!slots)
			return NULL;
		memset(slots + job->nslots, 0, (n - job->nslots) * sizeof(*slots));
		job->ranks = slots;
		job->nslots = n;
	}
	if (!job->ranks[rank]) {
		job->ranks[rank] = calloc(1, sizeof(struct job_rank));
		if (!job->ranks[rank])
			return NULL;
		job->ranks[rank]->rank = rank;
		job->nknown++;
	}
	return job->ranks[rank];
}

/* Detaches a connection from its rank without marking the rank lost. */
static void conn_unbind(struct conn *c)
{
	struct job_rank *r = c->job ? registry_rank(c->job, c->rank) : NULL;

	if (r && r->conn == c) {
		r->conn = NULL;
		if (--c->job->nconnected == 0)
			c->job->idle_since_mono = daemon_mono_ns();
	}
	c->job = NULL;
}

/*
 * What an incident of a job costs per rank of its world, however many of
 * its ranks connect: the incident's table, the manifest's view and entry
 * of every rank, the engine's tables (5.8 GB for one agent that claimed a
 * world of 1,048,576). A node daemon's views hold its own ranks only.
 */
#define REGISTRY_BYTES_PER_WORLD_RANK 6144u
#define REGISTRY_NODE_BYTES_PER_WORLD_RANK 512u

static int hello_check(const struct fr_msg_hello *m, const char **why)
{
	if (!fr_wire_valid_name(m->job)) {
		*why = "invalid job id";
		return -EPROTO;
	}
	if (m->world_size == 0 || m->world_size > DAEMON_MAX_WORLD) {
		*why = "world size out of range";
		return -EPROTO;
	}
	if (m->rank >= m->world_size) {
		*why = "rank not below world size";
		return -EPROTO;
	}
	return 0;
}

/* The job for a HELLO: found, created, or restarted with a new world size. */
static struct job *hello_job(struct flightrecd *d, const struct fr_msg_hello *m,
			     const char **why)
{
	struct job *job = registry_job_find(d, m->job);

	if (!job)
		return registry_job_create(d, m->job, m->world_size, why);
	if (job->world_size != m->world_size) {
		if (job->nconnected || job->active) {
			*why = "world size differs from the job's";
			return NULL;
		}
		daemon_log("job %s restarted with world size %" PRIu32 " (was %" PRIu32 ")",
			   job->id, m->world_size, job->world_size);
		job_reset(job);
		job->world_size = m->world_size;
	}
	return job;
}

/*
 * A new process in a rank's slot forgets what the old one reported. As far
 * as the daemon can tell it belongs to a new run under the same job id,
 * whose communicators may reuse the old ones' ids with other members: each
 * list the old process contributed to starts afresh at its next report.
 */
static void rank_forget_comms(struct job *job, struct job_rank *r)
{
	for (size_t i = 0; i < r->ncomms; i++) {
		const struct rank_comm *rc = &r->comms[i];
		struct job_comm *jc = (struct job_comm *)registry_job_comm(job, rc->id);

		if (jc && rc->member_known && rc->epoch == jc->epoch)
			jc->stale = true;
	}
	r->ncomms = 0;
	index_clear(&r->comms_index);
}

static void rank_take_hello(struct job *job, struct job_rank *r, const struct fr_msg_hello *m)
{
	char host[FR_HOST_MAX + 1];

	/* The same process reconnecting keeps its progress until it sends it
	 * again. */
	copy_clean(host, sizeof(host), m->host);
	if (r->pid != m->pid || strcmp(r->host, host) != 0) {
		rank_forget_comms(job, r);
		fr_crash_free(r->crash);
		r->crash = NULL;
		r->has_exit = false;
		r->has_nccl_error = false;
	}
	r->nops = 0;
	r->pid = m->pid;
	memcpy(r->host, host, sizeof(host));
	copy_clean(r->comm_lib, sizeof(r->comm_lib), m->comm_lib);
	r->ring_capacity = m->ring_capacity;
	r->start_ns = m->start_ns;
	r->finished = false;
	r->disconnected = false;
	r->silence_logged = false;
}

/*
 * Whether a HELLO for a rank that has a live connection may take it over:
 * yes for the same process reconnecting, or when the old connection has
 * gone silent; no for another process while the old one is alive. That is
 * two jobs under one job id (both fell back to "default", say): letting each
 * newcomer win would have them disconnect each other forever.
 */
static bool hello_may_take_over(const struct flightrecd *d, const struct job_rank *r,
				const struct fr_msg_hello *m)
{
	char host[FR_HOST_MAX + 1];
	double silent = (double)(daemon_mono_ns() - r->last_seen_mono) / NS_PER_S;

	copy_clean(host, sizeof(host), m->host);
	if (r->pid == m->pid && strcmp(r->host, host) == 0)
		return true;
	return silent > d->cfg.heartbeat_timeout_s;
}

static void hello_log_refusal(struct job *job, struct job_rank *r, const struct conn *c,
			      const struct fr_msg_hello *m)
{
	char host[FR_HOST_MAX + 1];

	if (r->refusal_logged)
		return;
	r->refusal_logged = true;
	copy_clean(host, sizeof(host), m->host);
	daemon_log("job %s rank %" PRIu32 ": refusing a connection from %s (host %s pid %" PRIu32 "): the rank is connected from %s (host %s pid %" PRIu32 "); do two jobs share this job id? (logged once)",
		   job->id, m->rank, c->peer, host, m->pid, r->conn->peer, r->host, r->pid);
}

int registry_hello(struct flightrecd *d, struct conn *c, const struct fr_msg_hello *m,
		   const char **why)
{
	char who[FR_JOB_MAX + 16];
	struct job_rank *r;
	struct job *job;
	int err;

	err = hello_check(m, why);
	if (err)
		return err;
	if (!budget_world_fits(m->world_size, d->cfg.upstream ? REGISTRY_NODE_BYTES_PER_WORLD_RANK :
								 REGISTRY_BYTES_PER_WORLD_RANK)) {
		*why = "world size too large for --max-memory: an incident costs the daemon memory "
		       "for every rank of the world (6 KiB a rank, 512 bytes on a node daemon), "
		       "within half of --max-memory";
		return -EPROTO;
	}
	job = hello_job(d, m, why);
	if (!job)
		return -EPROTO;
	r = job_rank_get(job, m->rank);
	if (!r) {
		*why = "out of memory";
		return -ENOMEM;
	}
	if (r->conn && !hello_may_take_over(d, r, m)) {
		hello_log_refusal(job, r, c, m);
		return -EBUSY;
	}
	if (r->conn) {
		struct conn *old = r->conn;

		snprintf(who, sizeof(who), "%s/%" PRIu32, job->id, m->rank);
		ratelog("reconnect", who,
			"job %s rank %" PRIu32 " reconnected from %s; closing its old connection from %s",
			job->id, m->rank, c->peer, old->peer);
		conn_unbind(old);
		conn_close(old);
	}
	rank_take_hello(job, r, m);
	r->has_uid = c->has_cred;
	r->uid = c->uid;
	r->refusal_logged = false;
	r->conn = c;
	job->nconnected++;
	job->touched_mono = daemon_mono_ns();
	c->said_hello = true;
	c->job = job;
	c->rank = m->rank;
	/* A rank that reconnects in a loop is logged once a minute. */
	snprintf(who, sizeof(who), "%s/%" PRIu32, job->id, m->rank);
	ratelog("connect", who,
		"job %s rank %" PRIu32 "/%" PRIu32 " connected from %s (host %s pid %" PRIu32 ", %s)",
		job->id, m->rank, m->world_size, c->peer, r->host, r->pid,
		r->comm_lib[0] ? r->comm_lib : "unknown library");
	if (job->active)
		incident_rank_joined(job->active, c);
	return 0;
}

static struct job_rank *conn_rank(struct conn *c)
{
	return c->job ? registry_rank(c->job, c->rank) : NULL;
}

void registry_seen(struct conn *c)
{
	struct job_rank *r = conn_rank(c);

	if (!r || r->conn != c)
		return;
	r->last_seen_mono = daemon_mono_ns();
	if (r->silence_logged) {
		r->silence_logged = false;
		daemon_log("job %s rank %" PRIu32 " is responsive again", c->job->id, r->rank);
	}
}

/*
 * The rank's entry for a communicator of the job, created when first named.
 * NULL when out of memory: a rank only names communicators of its job, so
 * it never has more than the job's limit.
 */
/*
 * The entry named `id` of an indexed, growable array of `stride`-byte
 * entries that begin with their id (rank and job communicators), appended
 * zeroed with that id when absent. NULL when out of memory.
 */
static void *indexed_get(void **arr, size_t *n, size_t *cap, size_t stride,
			 struct id_index *ix, const char *id)
{
	long i = index_find(ix, *arr, stride, id);
	char *e;

	if (i >= 0)
		return (char *)*arr + (size_t)i * stride;
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 4;
		void *grown = realloc(*arr, c * stride);

		if (!grown)
			return NULL;
		*arr = grown;
		*cap = c;
	}
	e = (char *)*arr + *n * stride;
	memset(e, 0, stride);
	snprintf(e, FR_COMM_ID_MAX + 1, "%s", id);
	if (index_add(ix, *arr, stride, *n))
		return NULL;
	(*n)++;
	return e;
}

static struct rank_comm *rank_comm_get(struct job_rank *r, const char *id)
{
	void *arr = r->comms;
	struct rank_comm *rc;

	assert(r->ncomms < DAEMON_MAX_COMMS ||
	       index_find(&r->comms_index, r->comms, sizeof(*r->comms), id) >= 0);
	rc = indexed_get(&arr, &r->ncomms, &r->comms_cap, sizeof(*r->comms), &r->comms_index, id);
	r->comms = arr;
	return rc;
}

/*
 * A communicator over the job's limit is left out, and with it whatever
 * PROGRESS says of it, rather than closing the connection: the rank stays
 * watched on every communicator that fits. (A job whose 1024 ranks each
 * announced their own MPI_COMM_SELF once filled the table, and every later
 * rank was disconnected, reconnected and disconnected again.)
 */
static void job_comm_drop(struct flightrecd *d, struct job *job, uint32_t rank,
			  const char *id)
{
	d->m.comms_dropped++;
	if (job->comms_dropped_logged)
		return;
	job->comms_dropped_logged = true;
	daemon_log("job %s has more than %u communicators: ignoring communicator %s of rank %" PRIu32 " and every further one (logged once per job)",
		   job->id, DAEMON_MAX_COMMS, id, rank);
}

/*
 * The job's entry for communicator `id` (already cleaned), added without
 * members when new. NULL with *full set when the table is full, NULL
 * alone when out of memory.
 */
static struct job_comm *job_comm_get(struct job *job, const char *id, bool *full)
{
	struct job_comm *jc = (struct job_comm *)registry_job_comm(job, id);
	void *arr = job->comms;

	*full = false;
	if (jc)
		return jc;
	if (job->ncomms >= DAEMON_MAX_COMMS) {
		*full = true;
		return NULL;
	}
	jc = indexed_get(&arr, &job->ncomms, &job->comms_cap, sizeof(*job->comms),
			 &job->comms_index, id);
	job->comms = arr;
	return jc;
}

/* Notes whether a list just completed is one run (struct job_comm). */
static void job_comm_note_complete(struct job_comm *jc)
{
	const uint32_t *v = jc->members->v;

	jc->one_run = jc->nunknown == 0;
	jc->run_first = v[0];
	for (uint32_t i = 1; i < jc->size && jc->one_run; i++)
		jc->one_run = v[i] - v[0] == i;
}

/* Whether every run of a report agrees with a list that is one run. */
static bool job_comm_runs_agree(const struct job_comm *jc, const struct fr_msg_comm_runs *m)
{
	for (uint32_t i = 0; i < m->nruns; i++)
		if (m->runs[i].rank - m->runs[i].index != jc->run_first)
			return false;
	return true;
}

/*
 * Starts a communicator's list afresh from one report (desc cleaned).
 * Returns 0, -ENOMEM, or -EDQUOT when the list would take the job or the
 * daemon over the memory budget; on an error the list it would replace is
 * kept as it was (stale: the next report tries again).
 */
static int job_comm_reset(struct job *job, struct job_comm *jc, const struct fr_msg_comm_runs *m,
			  const char *desc)
{
	uint64_t bytes = member_list_bytes(m->size);
	uint64_t old = jc->members ? member_list_bytes(jc->members->size) : 0;
	struct member_list *members;

	/* Only what the new list holds beyond the one it replaces is charged
	 * before the replacement: a rank's new run may reuse what its old one
	 * held, and a refusal leaves the old list in place. */
	if (bytes > old && !budget_charge_job(job, BUDGET_MEMBERS, bytes - old))
		return -EDQUOT;
	members = member_list_new(m->size);
	if (!members) {
		if (bytes > old)
			budget_release_job(job, BUDGET_MEMBERS, bytes - old);
		return -ENOMEM;
	}
	if (old > bytes)
		budget_release_job(job, BUDGET_MEMBERS, old - bytes);
	/* The old list's charge is now the new one's. */
	member_list_unref(jc->members);
	jc->members = members;
	jc->size = m->size;
	jc->nunknown = m->size;
	for (uint32_t i = 0; i < m->size; i++)
		members->v[i] = FR_RANK_UNKNOWN;
	for (uint32_t i = 0; i < m->nruns; i++) {
		const struct fr_node_map *run = &m->runs[i];

		for (uint32_t k = 0; k < run->count; k++)
			members->v[run->index + k] = run->rank + k;
		jc->nunknown -= run->count;
	}
	job_comm_note_complete(jc);
	snprintf(jc->desc, sizeof(jc->desc), "%s", desc);
	jc->epoch++;
	jc->stale = false;
	jc->size_conflict_logged = false;
	jc->member_conflict_logged = false;
	return 0;
}

/*
 * Makes the communicator's list the registry's alone before it is changed
 * (copy-on-write): a view holding it keeps the list it took, unchanged.
 * The copy takes over the list's charge in the memory budget; the list the
 * views keep is no longer counted (struct member_list). Returns 0 or
 * -ENOMEM, the list untouched.
 */
static int job_comm_unshare(struct job_comm *jc)
{
	struct member_list *copy;

	if (!member_list_shared(jc->members))
		return 0;
	copy = member_list_new(jc->members->size);
	if (!copy)
		return -ENOMEM;
	memcpy(copy->v, jc->members->v, member_list_bytes(copy->size));
	member_list_unref(jc->members);
	jc->members = copy;
	return 0;
}

/*
 * Merges rank `from`'s report into the communicator's list: it fills the
 * entries still unknown. Where it knows another value than the list's,
 * the first value stays: the list is what every rank's live view and the
 * verdicts use, and it must not flip with each report. Returns 0, -ERANGE
 * when the report gives another size (and is therefore ignored), or
 * -ENOMEM when the list, held by a view, could not be copied to change.
 */
static int job_comm_merge(const struct job *job, struct job_comm *jc, uint32_t from,
			  const struct fr_msg_comm_runs *m)
{
	uint32_t *list = jc->members->v;
	bool fills = false;

	if (m->size != jc->size) {
		if (!jc->size_conflict_logged) {
			jc->size_conflict_logged = true;
			daemon_log("job %s communicator %s: rank %" PRIu32 " reports %" PRIu32 " members where an earlier report gave %" PRIu32 "; ignoring its report (logged once per communicator)",
				   job->id, jc->id, from, m->size, jc->size);
		}
		return -ERANGE;
	}
	if (jc->one_run && job_comm_runs_agree(jc, m))
		return 0;
	/* Copied only when the report fills an entry: most reports of a list
	 * complete (every MPI rank's) change nothing. Runs name known
	 * members only, so a report costs what it knows. */
	for (uint32_t i = 0; i < m->nruns && !fills && jc->nunknown; i++)
		for (uint32_t k = 0; k < m->runs[i].count && !fills; k++)
			fills = list[m->runs[i].index + k] == FR_RANK_UNKNOWN;
	if (fills && job_comm_unshare(jc))
		return -ENOMEM;
	list = jc->members->v;
	for (uint32_t i = 0; i < m->nruns; i++) {
		const struct fr_node_map *run = &m->runs[i];

		for (uint32_t k = 0; k < run->count; k++) {
			uint32_t at = run->index + k, v = run->rank + k;

			if (v == list[at])
				continue;
			if (list[at] == FR_RANK_UNKNOWN) {
				list[at] = v;
				jc->nunknown--;
				continue;
			}
			if (!jc->member_conflict_logged) {
				jc->member_conflict_logged = true;
				daemon_log("job %s communicator %s: rank %" PRIu32 " reports member %" PRIu32 " as global rank %" PRIu32 " where an earlier report gave %" PRIu32 "; keeping %" PRIu32 " (logged once per communicator)",
					   job->id, jc->id, from, at, v, list[at], list[at]);
			}
		}
	}
	if (fills && jc->nunknown == 0)
		job_comm_note_complete(jc);
	return 0;
}

/*
 * COMM, the members as an array (agents of protocol 1 to 4): its runs, as
 * COMM_RUNS would carry them.
 */
int registry_comm(struct conn *c, const struct fr_msg_comm *m, const char **why)
{
	struct fr_msg_comm_runs runs = { .rank = m->rank, .size = m->size };
	int err;

	memcpy(runs.id, m->id, sizeof(runs.id));
	memcpy(runs.desc, m->desc, sizeof(runs.desc));
	/* An NCCL rank knows only its own entry and sends the others
	 * unknown: those are in no run. */
	runs.runs = malloc((m->size ? m->size : 1) * sizeof(*runs.runs));
	if (!runs.runs) {
		*why = "out of memory";
		return -ENOMEM;
	}
	runs.nruns = fr_node_maps_from_members(m->members, m->size, runs.runs);
	err = registry_comm_runs(c, &runs, why);
	free(runs.runs);
	return err;
}

int registry_comm_runs(struct conn *c, const struct fr_msg_comm_runs *m, const char **why)
{
	struct job_rank *r = conn_rank(c);
	char id[FR_COMM_ID_MAX + 1];
	char desc[FR_COMM_DESC_MAX + 1];
	struct job_comm *jc;
	struct rank_comm *rc;
	bool full;

	if (!r)
		return -EPROTO;
	if (m->id[0] == '\0' || m->size == 0 || m->size > c->job->world_size ||
	    m->rank >= m->size) {
		*why = "communicator size or rank out of range";
		return -EPROTO;
	}
	for (uint32_t i = 0; i < m->nruns; i++) {
		if ((uint64_t)m->runs[i].rank + m->runs[i].count > c->job->world_size) {
			*why = "communicator member not below world size";
			return -EPROTO;
		}
	}
	copy_clean(id, sizeof(id), m->id);
	copy_clean(desc, sizeof(desc), m->desc);
	jc = job_comm_get(c->job, id, &full);
	if (!jc && full) {
		job_comm_drop(c->d, c->job, r->rank, id);
		return 0;
	}
	if (!jc)
		goto out_nomem;
	if (!jc->members || jc->stale) {
		int err = job_comm_reset(c->job, jc, m, desc);

		if (err == -EDQUOT) {
			*why = "over the daemon's memory budget (--max-memory)";
			return err;
		}
		if (err)
			goto out_nomem;
	} else {
		int err = job_comm_merge(c->job, jc, r->rank, m);

		if (err == -ERANGE)
			return 0;
		if (err)
			goto out_nomem;
	}
	rc = rank_comm_get(r, id);
	if (!rc)
		goto out_nomem;
	rc->member_known = true;
	rc->rank = m->rank;
	rc->epoch = jc->epoch;
	return 0;

out_nomem:
	*why = "out of memory";
	return -ENOMEM;
}

int32_t registry_comm_member(const struct job *job, const char *comm, int32_t in_comm)
{
	const struct job_comm *jc = registry_job_comm(job, comm);
	uint32_t m;

	if (!jc || !jc->members || in_comm < 0 || (uint32_t)in_comm >= jc->size)
		return -1;
	m = jc->members->v[in_comm];
	return m == FR_RANK_UNKNOWN || m >= job->world_size ? -1 : (int32_t)m;
}

int32_t registry_op_peer(const struct job *job, const struct rank_op *op)
{
	if (!op->w.is_p2p && !fr_op_is_rooted(op->w.type))
		return -1;
	if (op->w.peer >= 0)
		return op->w.peer;
	return registry_comm_member(job, op->w.comm, op->w.peer_in_comm);
}

bool registry_rank_in_comm(const struct job_rank *r, const char *id)
{
	return index_find(&r->comms_index, r->comms, sizeof(*r->comms), id) >= 0;
}

bool registry_comm_has_member(const struct job *job, const struct job_comm *jc, uint32_t rank)
{
	/* Members are distinct: one as large as the world holds every rank,
	 * whichever of its entries are still unknown. */
	if (jc->size == job->world_size)
		return true;
	for (uint32_t i = 0; i < jc->size; i++)
		if (jc->members->v[i] == rank)
			return true;
	return false;
}

/*
 * Keeps the operations in flight on communicators the job knows; those on
 * one left out over the limit are left out too, as the communicator is.
 */
static int progress_ops(const struct job *job, struct job_rank *r,
			const struct fr_msg_progress *m, const char **why)
{
	uint64_t now = daemon_now_ns();
	struct rank_op *ops = NULL;
	size_t n = 0;

	if (m->ninflight) {
		ops = calloc(m->ninflight, sizeof(*ops));
		if (!ops) {
			*why = "out of memory";
			return -ENOMEM;
		}
	}
	for (uint32_t i = 0; i < m->ninflight; i++) {
		const struct fr_wire_inflight *w = &m->inflight[i];
		uint64_t age = w->age_ms > now / NS_PER_MS ? now / NS_PER_MS : w->age_ms;
		struct rank_op *op = &ops[n];

		op->w = *w;
		copy_clean(op->w.comm, sizeof(op->w.comm), w->comm);
		if (!registry_job_comm(job, op->w.comm))
			continue;
		/* A newer agent's kind of operation: shown as "unknown". */
		if (w->type >= FR_OP__COUNT)
			op->w.type = FR_OP_UNKNOWN;
		copy_clean(op->w.dtype, sizeof(op->w.dtype), w->dtype);
		op->entered_ns = now - age * NS_PER_MS;
		n++;
	}
	free(r->ops);
	r->ops = ops;
	r->nops = n;
	return 0;
}

int registry_progress(struct conn *c, const struct fr_msg_progress *m, const char **why)
{
	struct job_rank *r = conn_rank(c);

	if (!r)
		return -EPROTO;
	for (uint32_t i = 0; i < m->ncomms; i++) {
		const struct fr_wire_comm_progress *p = &m->comms[i];
		char id[FR_COMM_ID_MAX + 1];
		struct rank_comm *rc;

		copy_clean(id, sizeof(id), p->comm);
		/* Not announced, or left out over the limit. */
		if (!registry_job_comm(c->job, id))
			continue;
		rc = rank_comm_get(r, id);
		if (!rc) {
			*why = "out of memory";
			return -ENOMEM;
		}
		rc->last_entered = p->last_entered;
		rc->last_completed = p->last_completed;
	}
	return progress_ops(c->job, r, m, why);
}

static bool job_all_finished(const struct job *job)
{
	if (job->nknown == 0)
		return false;
	for (uint32_t i = 0; i < job->nslots; i++)
		if (job->ranks[i] && !job->ranks[i]->finished)
			return false;
	return true;
}

void registry_bye(struct conn *c)
{
	struct job_rank *r = conn_rank(c);

	if (!r)
		return;
	r->finished = true;
	r->nops = 0;
	daemon_log("job %s rank %" PRIu32 " finished", c->job->id, r->rank);
	if (c->job->active)
		incident_rank_left(c->job->active, r->rank, true);
	if (job_all_finished(c->job))
		daemon_log("job %s finished: every rank said goodbye", c->job->id);
}

/* A rank of the job died (crashed, exited or was killed) at `mono`. Each
 * death is the job's latest, to be reported (within the job's incident
 * rate): one reported once says nothing of another rank's later, or of the
 * next process of the same rank (its HELLO dropped this one's record). */
static void job_died(struct job *job, uint32_t rank, uint64_t mono, const char *what)
{
	job->has_crash = true;
	job->crash_reported = false;
	job->crash_rank = rank;
	job->crash_mono = mono;
	job->crash_what = what;
}

int registry_crash(struct conn *c, const struct fr_msg_crash *m, const char **why)
{
	struct job_rank *r = conn_rank(c);
	struct job *job = c->job;
	char sname[16];
	const char *fn;

	if (!r)
		return -EPROTO;
	/* The handler and the link thread may both have sent it. */
	if (r->crash)
		return 0;
	if (fr_crash_from_wire(&r->crash, m)) {
		*why = "out of memory";
		return -ENOMEM;
	}
	r->crashed_mono = daemon_mono_ns();
	job_died(job, r->rank, r->crashed_mono, "crashed");
	fn = fr_crash_function(r->crash);
	daemon_log("job %s rank %" PRIu32 " crashed: %s (si_code %d) at 0x%" PRIx64 "%s%s",
		   job->id, r->rank, fr_signal_name(r->crash->signo, sname), r->crash->code,
		   r->crash->fault_addr, fn ? " in " : "", fn ? fn : "");
	return 0;
}

int registry_exit(struct conn *c, const struct fr_msg_exit *m)
{
	struct job_rank *r = conn_rank(c);
	struct fr_exit *e;

	if (!r)
		return -EPROTO;
	if (r->has_exit || r->crash || r->finished)
		return 0;
	e = &r->exit;
	fr_exit_from_wire(e, m);
	r->has_exit = true;
	if (!fr_exit_is_fault(e)) {
		daemon_log("job %s rank %" PRIu32 " exited (code %" PRId32 ") without finalising, with nothing in flight",
			   c->job->id, r->rank, e->code);
		registry_bye(c);
		return 0;
	}
	job_died(c->job, r->rank, daemon_mono_ns(), "exited");
	if (e->has_code)
		daemon_log("job %s rank %" PRIu32 " exited (code %" PRId32 "%s) %s, with %" PRIu32 " operation(s) in flight",
			   c->job->id, r->rank, e->code, e->underscore ? ", by _exit" : "",
			   e->finalised ? "having finalised" : "without finalising", e->inflight);
	else
		daemon_log("job %s rank %" PRIu32 " exited (code unknown) with %" PRIu32 " operation(s) in flight",
			   c->job->id, r->rank, e->inflight);
	return 1;
}

int registry_nccl_error(struct conn *c, const struct fr_msg_nccl_error *m)
{
	struct job_rank *r = conn_rank(c);
	char name[24];

	if (!r)
		return -EPROTO;
	daemon_log("job %s rank %" PRIu32 " NCCL error on %s: %s (%" PRIu32 ")%s%s", c->job->id,
		   r->rank, m->comm, fr_nccl_result_name(m->result, name), m->result,
		   m->message[0] ? ": " : "", m->message);
	if (r->has_nccl_error)
		return 0;
	fr_nccl_error_from_wire(&r->nccl_error, m);
	r->has_nccl_error = true;
	job_died(c->job, r->rank, daemon_mono_ns(), "hit an NCCL error");
	return 1;
}

/* Whether process `pid` of this host is gone (or a zombie): false when it
 * lives, or when /proc cannot tell. */
static bool pid_gone(uint32_t pid)
{
	char path[64], buf[512];
	const char *close_paren;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%" PRIu32 "/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* "pid (comm) S ...": the name may hold anything, even ')'. */
	close_paren = strrchr(buf, ')');
	return close_paren && close_paren[1] == ' ' &&
	       (close_paren[2] == 'Z' || close_paren[2] == 'X');
}

/* How many of the rank's operations in flight block it. */
static uint32_t blocking_ops(const struct job_rank *r)
{
	uint32_t n = 0;

	for (size_t i = 0; i < r->nops; i++)
		n += rank_op_blocks(&r->ops[i]);
	return n;
}

/* Whether some other rank of the job still runs: it waits for `gone`
 * now, or will at its next collective. */
static bool peers_wait(const struct job *job, const struct job_rank *gone)
{
	for (uint32_t i = 0; i < job->nslots; i++) {
		const struct job_rank *o = job->ranks[i];

		if (o && o != gone && o->conn && !o->finished)
			return true;
	}
	return false;
}

/*
 * Whether rank `r`, whose connection `c` just dropped without a word, was
 * killed: its agent would have said EXIT on any other way out (protocol
 * 6), its process, on this host, is gone, it was needed (it had an
 * operation in flight, or a peer still runs and so waits for it now or at
 * its next collective), and no other rank of the job died just before
 * (then it was the launcher that killed it). A rank on another host, one
 * whose process lives (a network cut) or an older agent's is only
 * disconnected.
 */
static bool conn_lost_killed(const struct conn *c, const struct job *job,
			     const struct job_rank *r, uint64_t now_mono)
{
	char host[FR_HOST_MAX + 1];

	if (c->agent_version < 6 || r->crash || r->has_exit || !r->pid)
		return false;
	if (job->has_crash && now_mono - job->crash_mono <= INCIDENT_KILL_WINDOW_NS)
		return false;
	if (gethostname(host, sizeof(host)) != 0 || strncmp(host, r->host, sizeof(host)) != 0)
		return false;
	return blocking_ops(r) || peers_wait(job, r);
}

/* The rank was killed (conn_lost_killed()): recorded as its exit. */
static void rank_killed(struct job *job, struct job_rank *r, uint64_t now_mono)
{
	struct fr_exit *e = &r->exit;

	memset(e, 0, sizeof(*e));
	e->kind = FR_EXIT_KILLED;
	e->inflight = blocking_ops(r);
	e->time_ns = daemon_now_ns();
	r->has_exit = true;
	job_died(job, r->rank, now_mono, "was killed");
	daemon_log("job %s rank %" PRIu32 " killed or lost: its process %" PRIu32 " is gone without a goodbye, with %" PRIu32 " operation(s) in flight%s",
		   job->id, r->rank, r->pid, e->inflight,
		   e->inflight ? "" : " while its peers run");
}

void registry_kill_checks(struct flightrecd *d, struct job *job, uint64_t now_mono,
			  void (*killed)(struct flightrecd *d, struct job *job, uint32_t rank))
{
	while (job->nkill_pending) {
		struct job_rank *first = NULL;

		for (uint32_t i = 0; i < job->nslots; i++) {
			struct job_rank *r = job->ranks[i];

			if (r && r->kill_pending &&
			    (!first || r->disconnected_mono < first->disconnected_mono))
				first = r;
		}
		if (!first)
			break;
		/* Reconnected, or another way out said meanwhile: no kill. */
		if (first->conn || first->crash || first->has_exit) {
			first->kill_pending = false;
			job->nkill_pending--;
			continue;
		}
		if (!pid_gone(first->pid)) {
			if (now_mono - first->disconnected_mono < KILL_SETTLE_NS)
				return;
			/* Alive past the settling time: cut off, not killed. */
			first->kill_pending = false;
			job->nkill_pending--;
			continue;
		}
		first->kill_pending = false;
		job->nkill_pending--;
		/* A rank dropped after another's death was killed by the launcher. */
		if (job->has_crash && first->disconnected_mono > job->crash_mono &&
		    first->disconnected_mono - job->crash_mono <= INCIDENT_KILL_WINDOW_NS)
			continue;
		rank_killed(job, first, first->disconnected_mono);
		if (job->active)
			incident_rank_left(job->active, first->rank, false);
		killed(d, job, first->rank);
	}
}

/* A connection is going away; its rank (if still its own) is disconnected. */
void registry_conn_lost(struct flightrecd *d, struct conn *c)
{
	struct job_rank *r = conn_rank(c);
	struct job *job = c->job;

	if (!r || r->conn != c) {
		c->job = NULL;
		return;
	}
	conn_unbind(c);
	if (!r->finished) {
		r->disconnected = true;
		r->disconnected_mono = daemon_mono_ns();
		/* At shutdown it is the daemon that hangs up: nothing to report. */
		if (!d->stopping && !c->rejected)
			daemon_log("job %s rank %" PRIu32 " disconnected without saying goodbye (%s)",
				   job->id, r->rank, c->peer);
		/* Decided by registry_kill_checks(), in the order they dropped. */
		if (!d->stopping && !c->rejected && conn_lost_killed(c, job, r, r->disconnected_mono)) {
			r->kill_pending = true;
			job->nkill_pending++;
		}
	}
	if (job->active)
		incident_rank_left(job->active, r->rank, r->finished);
}

enum rank_state registry_rank_state(const struct flightrecd *d, const struct job_rank *r,
				    uint64_t now_mono)
{
	double silent;

	if (r->crash)
		return RANK_STATE_CRASHED;
	if (r->has_exit && fr_exit_is_fault(&r->exit))
		return r->exit.kind == FR_EXIT_KILLED ? RANK_STATE_KILLED : RANK_STATE_EXITED;
	if (r->finished)
		return RANK_STATE_FINISHED;
	if (!r->conn)
		return RANK_STATE_DISCONNECTED;
	silent = (double)(now_mono - r->last_seen_mono) / NS_PER_S;
	if (silent > d->cfg.heartbeat_timeout_s)
		return RANK_STATE_UNRESPONSIVE;
	return RANK_STATE_CONNECTED;
}

const char *registry_rank_state_name(enum rank_state s)
{
	switch (s) {
	case RANK_STATE_CONNECTED:
		return "connected";
	case RANK_STATE_UNRESPONSIVE:
		return "unresponsive";
	case RANK_STATE_DISCONNECTED:
		return "disconnected";
	case RANK_STATE_FINISHED:
		return "finished";
	case RANK_STATE_CRASHED:
		return "crashed";
	case RANK_STATE_EXITED:
		return "exited";
	case RANK_STATE_KILLED:
		return "killed";
	}
	return "unknown";
}

const char *registry_job_status(const struct job *job)
{
	/* A hang whose incident could not be stored is a hang all the same. */
	if (job->active || job->has_last_key || job->has_local_key)
		return "hung";
	if (job_all_finished(job))
		return "finished";
	return "running";
}

uint32_t registry_ranks_connected(const struct flightrecd *d)
{
	uint32_t n = 0;

	for (const struct job *job = d->jobs; job; job = job->next)
		n += job->nconnected;
	return n;
}

static enum fr_rank_status trace_status(enum rank_state s)
{
	switch (s) {
	case RANK_STATE_CONNECTED:
		return FR_RANK_LIVE;
	case RANK_STATE_UNRESPONSIVE:
		return FR_RANK_UNRESPONSIVE;
	case RANK_STATE_DISCONNECTED:
		return FR_RANK_DISCONNECTED;
	case RANK_STATE_FINISHED:
		return FR_RANK_FINISHED;
	case RANK_STATE_CRASHED:
	case RANK_STATE_EXITED:
	case RANK_STATE_KILLED:
		/* What rank_trace() says by the connection. */
		return FR_RANK_DISCONNECTED;
	}
	return FR_RANK_MISSING;
}

/*
 * The rank's rank in a communicator of the job: what its COMM said, unless
 * that COMM was ignored, or merged into a list since started afresh; then
 * its place in the list, or 0 when it is not in it. Always below the size,
 * which readers of a dump require.
 */
static uint32_t trace_comm_rank(const struct job_rank *r, const struct rank_comm *rc,
				const struct job_comm *jc)
{
	if (rc->member_known && rc->epoch == jc->epoch && rc->rank < jc->size)
		return rc->rank;
	for (uint32_t i = 0; i < jc->size; i++)
		if (jc->members->v[i] == r->rank)
			return i;
	return 0;
}

/*
 * Copies a rank's communicators into its trace; their member lists are
 * borrowed from the view's references (`comms`, one per communicator of
 * the job).
 */
static int trace_add_comms(const struct job *job, const struct job_rank *r,
			   const struct live_comm *comms, struct fr_trace *t)
{
	size_t cap = r->ncomms;

	/* Allocated to size: a view holds one trace per rank, and room for
	 * sixteen communicators (the first growth) was most of its bytes. */
	if (cap && !(t->comms = malloc(cap * sizeof(*t->comms))))
		return -ENOMEM;
	for (size_t i = 0; i < r->ncomms; i++) {
		const struct rank_comm *rc = &r->comms[i];
		const struct job_comm *jc = registry_job_comm(job, rc->id);
		struct fr_comm *fc = fr_trace_add_comm(t, &cap);

		if (!fc)
			return -ENOMEM;
		snprintf(fc->id, sizeof(fc->id), "%s", rc->id);
		fc->rank = rc->rank;
		fc->last_entered = rc->last_entered;
		fc->last_completed = rc->last_completed;
		/* Without members only when a COMM ran out of memory. */
		if (!jc || !jc->members)
			continue;
		snprintf(fc->desc, sizeof(fc->desc), "%s", jc->desc);
		fc->rank = trace_comm_rank(r, rc, jc);
		fc->size = jc->size;
		fc->members = comms[jc - job->comms].members->v;
	}
	return 0;
}

/*
 * The rank's operations in flight as trace entries. An NCCL rank sends the
 * peer or root of an operation as its rank in the communicator only; the
 * job's merged member list names its global rank when some member reported
 * it, so that the live verdict and the manifest name ranks the way MPI
 * evidence does.
 */
static int trace_add_ops(const struct job *job, const struct job_rank *r, struct fr_trace *t)
{
	size_t cap = 0;

	/* To size, as trace_add_comms() does. */
	if (fr_trace_reserve_ops(t, r->nops, &cap) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < r->nops; i++) {
		const struct rank_op *ro = &r->ops[i];
		struct fr_op *op = fr_trace_add_op(t, &cap);
		int32_t global;
		bool rooted;

		if (!op)
			return -ENOMEM;
		op->record_id = i;
		/* Copied: the rank's next progress replaces ro. */
		op->comm = fr_trace_str(t, ro->w.comm);
		op->dtype = fr_trace_str(t, ro->w.dtype);
		if (!op->comm || !op->dtype)
			return -ENOMEM;
		op->type = (enum fr_op_type)ro->w.type;
		op->state = FR_STATE_ENTERED;
		op->is_p2p = ro->w.is_p2p != 0;
		op->seq = ro->w.seq;
		rooted = !op->is_p2p && fr_op_is_rooted(ro->w.type);
		global = registry_op_peer(job, ro);
		op->peer = op->is_p2p ? global : -1;
		op->root = rooted ? global : -1;
		op->peer_in_comm = op->is_p2p || rooted ? ro->w.peer_in_comm : -1;
		op->count = ro->w.count;
		op->bytes = ro->w.bytes;
		op->nonblocking = (ro->w.flags & FR_WIRE_INFLIGHT_NONBLOCKING) != 0;
		op->waited = (ro->w.flags & FR_WIRE_INFLIGHT_WAITED) != 0;
		/* The wire tells one time: entry, or the start of the wait. For a
		 * waited op its entry is unknown, and that is the best guess. */
		op->t_entered_ns = ro->entered_ns;
		op->t_started_ns = rank_op_blocks(ro) ? ro->entered_ns : 0;
	}
	return 0;
}

static int rank_trace(const struct flightrecd *d, const struct job *job,
		      const struct job_rank *r, uint64_t now_mono, const struct live_comm *comms,
		      struct fr_trace *t)
{
	int err;

	t->status = trace_status(registry_rank_state(d, r, now_mono));
	/* A crashed or exiting rank's evidence is live while it is still
	 * connected. */
	if ((r->crash || r->has_exit) && r->conn && !r->finished)
		t->status = FR_RANK_LIVE;
	if (fr_crash_copy(&t->crash, r->crash))
		return -ENOMEM;
	t->has_exit = r->has_exit;
	t->exit = r->exit;
	t->has_nccl_error = r->has_nccl_error;
	t->nccl_error = r->nccl_error;
	snprintf(t->host, sizeof(t->host), "%s", r->host);
	t->pid = r->pid;
	snprintf(t->comm_lib, sizeof(t->comm_lib), "%s", r->comm_lib);
	err = trace_add_comms(job, r, comms, t);
	if (!err)
		err = trace_add_ops(job, r, t);
	return err;
}

void live_view_free(struct live_view *lv)
{
	for (size_t i = 0; i < lv->n; i++) {
		struct fr_trace *t = &lv->traces[i];

		/* The lists are the view's references, dropped once below. */
		for (size_t k = 0; k < t->ncomms; k++)
			t->comms[k].members = NULL;
		fr_trace_free(t);
	}
	for (size_t i = 0; lv->comms && i < lv->ncomms; i++)
		member_list_unref(lv->comms[i].members);
	if (lv->charged)
		budget_release(BUDGET_VIEWS, lv->charged);
	free(lv->comms);
	free(lv->traces);
	free(lv->ptrs);
	free(lv->ranks);
	memset(lv, 0, sizeof(*lv));
}

/*
 * Copies every communicator of the job, with a reference to its member
 * list: O(communicators) under the lock, whatever the lists' lengths.
 */
static int live_view_copy_comms(const struct job *job, struct live_view *lv)
{
	lv->comms = calloc(job->ncomms ? job->ncomms : 1, sizeof(*lv->comms));
	if (!lv->comms)
		return -ENOMEM;
	lv->ncomms = job->ncomms;
	for (size_t i = 0; i < job->ncomms; i++) {
		const struct job_comm *jc = &job->comms[i];
		struct live_comm *lc = &lv->comms[i];

		memcpy(lc->id, jc->id, sizeof(lc->id));
		memcpy(lc->desc, jc->desc, sizeof(lc->desc));
		lc->size = jc->size;
		if (jc->members)
			lc->members = member_list_ref(jc->members);
	}
	return 0;
}

/*
 * What a view of `n` ranks of the job holds, about: its tables, each known
 * rank's communicators and operations in flight (with their strings), and
 * the communicators' entries. Member lists are shared, not counted here.
 */
static uint64_t live_view_bytes(const struct job *job, size_t n)
{
	uint64_t bytes = (uint64_t)n * (sizeof(struct fr_trace) + sizeof(struct fr_trace *) +
					sizeof(struct live_rank)) +
			 (uint64_t)job->ncomms * sizeof(struct live_comm);

	for (uint32_t i = 0; i < job->nslots; i++) {
		const struct job_rank *r = job->ranks[i];

		if (r)
			bytes += (uint64_t)r->ncomms * sizeof(struct fr_comm) +
				 (uint64_t)r->nops * (sizeof(struct fr_op) + sizeof(r->ops->w.comm) +
						      sizeof(r->ops->w.dtype));
	}
	return bytes;
}

static int live_view_build(const struct flightrecd *d, const struct job *job, bool all,
			   bool charge, struct live_view *lv)
{
	uint64_t now = daemon_now_ns();
	uint64_t now_mono = daemon_mono_ns();
	size_t n = all ? job->world_size : job->nknown;
	size_t k = 0;
	int err = 0;

	memset(lv, 0, sizeof(*lv));
	if (charge) {
		uint64_t bytes = live_view_bytes(job, n);

		if (!budget_charge(BUDGET_VIEWS, bytes))
			return -EDQUOT;
		lv->charged = bytes;
	}
	lv->traces = calloc(n ? n : 1, sizeof(*lv->traces));
	lv->ptrs = calloc(n ? n : 1, sizeof(*lv->ptrs));
	lv->ranks = calloc(n ? n : 1, sizeof(*lv->ranks));
	lv->world_size = job->world_size;
	if (!lv->traces || !lv->ptrs || !lv->ranks || live_view_copy_comms(job, lv)) {
		live_view_free(lv);
		return -ENOMEM;
	}
	for (uint32_t rank = 0; rank < job->world_size && k < n; rank++) {
		const struct job_rank *r = registry_rank(job, rank);
		struct fr_trace *t = &lv->traces[k];

		if (!r && !all)
			continue;
		snprintf(t->job, sizeof(t->job), "%s", job->id);
		t->rank = rank;
		t->world_size = job->world_size;
		t->time_ns = now;
		t->status = FR_RANK_MISSING;
		lv->ptrs[k] = t;
		lv->n = ++k;
		if (r) {
			struct live_rank *lr = &lv->ranks[k - 1];

			lr->known = true;
			lr->state = registry_rank_state(d, r, now_mono);
			lr->last_seen_mono = r->last_seen_mono;
			lr->ring_capacity = r->ring_capacity;
			lr->start_ns = r->start_ns;
			lr->has_uid = r->has_uid;
			lr->uid = r->uid;
			err = rank_trace(d, job, r, now_mono, lv->comms, t);
		}
		if (err) {
			live_view_free(lv);
			return err;
		}
	}
	return 0;
}

int registry_live_view(const struct flightrecd *d, const struct job *job, bool all,
		       struct live_view *lv)
{
	return live_view_build(d, job, all, false, lv);
}

int registry_request_view(const struct flightrecd *d, const struct job *job,
			  struct live_view *lv)
{
	return live_view_build(d, job, false, true, lv);
}

int registry_manifest_view(const struct flightrecd *d, const struct job *job,
			   struct live_view *lv)
{
	return live_view_build(d, job, !d->cfg.upstream, false, lv);
}

int registry_live_verdict(const struct live_view *lv, struct fr_verdict *v)
{
	return fr_correlate(lv->ptrs, lv->n, lv->world_size, v);
}

void registry_free(struct flightrecd *d)
{
	while (d->jobs) {
		struct job *job = d->jobs;

		d->jobs = job->next;
		job_free(job);
	}
	d->njobs = 0;
}
