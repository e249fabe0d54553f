/*
 * Stragglers, online. Every rank samples the same collectives (seq a
 * multiple of FR_WIRE_TIMING_EVERY) and says, in TIMING, when it entered
 * each and how long it took in it. The daemon keeps, per sampled
 * collective still open, only its first, next-latest and latest arrival
 * and who came last, never one entry per member; when every member has
 * reported, the latest member's score takes that collective's lag (behind
 * the first) and lead (ahead of the next-latest). Per rank it keeps
 * exponentially decayed averages: how often it came last, and by how much
 * when it did. A rank last in at least half of them (three quarters in a
 * communicator of two, where one of the two is always last) by a decayed
 * lead of at least --straggler-threshold, held for --straggler-min-duration,
 * is a straggler: one slow step moves the averages but not for long.
 *
 * Arrivals are ordered as fr-analyze orders them (dumps/correlate_index.c,
 * group_note()), so that both name the same ranks on the same evidence:
 * an MPI rank's own collective that ends for every member at once (an
 * all-reduce, a barrier) is ordered by how long the rank waited in it, on
 * its own clock, the member that waited least having come last; any other
 * by its entry time, on the agent's clock corrected by its connection's
 * offset (the daemon's clock less the agent's, the least of the
 * heartbeats' over the last two windows of OFFSET_WINDOW_NS: transit only
 * ever adds to it). A collective whose members are ordered both ways is
 * not judged.
 *
 * Cost: O(1) per sample, a scan of at most OPEN_MAX open collectives;
 * memory O(ranks) per job and OPEN_MAX open collectives. A sample whose
 * collective some member never reports (its agent dropped the frame, or a
 * non-blocking collective completed out of order) is forgotten once it is
 * the oldest of a full table or older than OPEN_MAX_AGE_NS.
 *
 * Jobs whose ranks report to node daemons (--upstream) are not scored at
 * the central daemon: NODE_PROGRESS carries no timing. A node daemon
 * scores the ranks of each job it holds, as any daemon does.
 */
#include "straggler.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../protocol/op.h"
#include "daemon.h"
#include "registry.h"
#include "server.h"

/* Weight of the newest sample in a decayed average: about the last 16. */
#define ALPHA (1.0 / 16)
/* A rank is judged on at least this many sampled collectives (fr-analyze's
 * STRAGGLER_MIN_MATCHED). */
#define MIN_SAMPLES 8
/* Sampled collectives open at once per job, and how long one stays open. */
#define OPEN_MAX 64
#define OPEN_MAX_AGE_NS (10ull * NS_PER_S)
/* A rank not last in a sampled collective for this long is no longer listed. */
#define STALE_NS (60ull * NS_PER_S)
#define OFFSET_WINDOW_NS (10ull * NS_PER_S)

enum { TIMED_BY_NONE, TIMED_BY_ENTRY, TIMED_BY_WAIT };

struct srank {
	double last_frac;
	double lag_ns;
	double lead_ns;
	uint32_t samples;
	uint32_t nlast;         /* times last; the first sets the averages */
	bool pair;              /* its latest collective had two members */
	uint64_t since_mono;    /* a straggler's criteria hold since; 0 when not */
	uint64_t last_mono;     /* it was last in a sampled collective; 0 never */
	/* The clock offset, as the header says. */
	bool has_offset;
	int64_t offset_prev;
	int64_t offset_cur;
	uint64_t offset_window_mono;
};

/* A sampled collective some members have reported. */
struct sgroup {
	bool used;
	bool untimed;
	uint8_t timing;
	uint32_t comm;          /* index in the job's communicators */
	uint64_t seq;
	uint32_t count;
	uint32_t last_rank;
	uint64_t key_first;
	uint64_t key_second;
	uint64_t key_last;
	uint64_t opened_mono;
};

struct straggler_job {
	uint32_t nranks;
	struct srank *ranks;
	struct sgroup open[OPEN_MAX];
};

static struct straggler_job *job_scores(struct job *job)
{
	struct straggler_job *sj = job->straggler;

	if (sj && sj->nranks == job->world_size)
		return sj;
	straggler_job_free(job);
	sj = calloc(1, sizeof(*sj));
	if (!sj)
		return NULL;
	sj->ranks = calloc(job->world_size ? job->world_size : 1, sizeof(*sj->ranks));
	if (!sj->ranks) {
		free(sj);
		return NULL;
	}
	sj->nranks = job->world_size;
	job->straggler = sj;
	return sj;
}

void straggler_job_free(struct job *job)
{
	if (!job->straggler)
		return;
	free(job->straggler->ranks);
	free(job->straggler);
	job->straggler = NULL;
}

/* The open group of (comm, seq), opened when absent, the oldest evicted. */
static struct sgroup *group_get(struct straggler_job *sj, uint32_t comm, uint64_t seq,
				uint64_t now_mono)
{
	struct sgroup *free_slot = NULL;
	struct sgroup *oldest = NULL;

	for (unsigned i = 0; i < OPEN_MAX; i++) {
		struct sgroup *g = &sj->open[i];

		if (g->used && now_mono - g->opened_mono > OPEN_MAX_AGE_NS)
			g->used = false;
		if (!g->used) {
			if (!free_slot)
				free_slot = g;
			continue;
		}
		if (g->comm == comm && g->seq == seq)
			return g;
		if (!oldest || g->opened_mono < oldest->opened_mono)
			oldest = g;
	}
	if (!free_slot)
		free_slot = oldest;
	memset(free_slot, 0, sizeof(*free_slot));
	free_slot->used = true;
	free_slot->comm = comm;
	free_slot->seq = seq;
	free_slot->opened_mono = now_mono;
	free_slot->key_first = UINT64_MAX;
	return free_slot;
}

/* The arrival key of a sample, later the greater; 0 when it has none. */
static uint64_t sample_key(const struct straggler_sample *s, uint8_t *timing)
{
	const struct fr_wire_timing *t = s->t;

	if (s->mpi && !(t->flags & FR_WIRE_TIMING_GPU) && fr_op_ends_together(t->type)) {
		*timing = TIMED_BY_WAIT;
		return UINT64_MAX - t->wait_ns;
	}
	*timing = TIMED_BY_ENTRY;
	if (!s->has_offset || !t->entered_ns)
		return 0;
	return t->entered_ns + (uint64_t)s->offset_ns;
}

static bool is_straggler(const struct srank *r, double threshold_ns)
{
	return r->samples >= MIN_SAMPLES && r->last_frac >= (r->pair ? 0.75 : 0.5) &&
	       r->lead_ns >= threshold_ns;
}

/* Whether the rank's criteria hold now, and since when. */
static void judge(struct srank *r, const struct straggler_limits *lim, uint64_t now_mono)
{
	if (!is_straggler(r, lim->threshold_s * NS_PER_S))
		r->since_mono = 0;
	else if (!r->since_mono)
		r->since_mono = now_mono;
}

int straggler_note(struct job *job, const struct job_comm *jc, const struct straggler_sample *s,
		   const struct straggler_limits *lim, uint64_t now_mono)
{
	struct straggler_job *sj;
	struct sgroup *g;
	struct srank *r;
	uint8_t timing;
	uint64_t key;

	if (s->rank >= job->world_size || jc->size < 2)
		return 0;
	sj = job_scores(job);
	if (!sj)
		return -ENOMEM;
	r = &sj->ranks[s->rank];
	g = group_get(sj, (uint32_t)(jc - job->comms), s->t->seq, now_mono);
	key = sample_key(s, &timing);
	if (g->timing != TIMED_BY_NONE && g->timing != timing)
		key = 0;
	g->timing = timing;
	if (!key) {
		g->untimed = true;
	} else {
		if (key < g->key_first)
			g->key_first = key;
		if (key > g->key_last) {
			g->key_second = g->key_last;
			g->key_last = key;
			g->last_rank = s->rank;
		} else if (key > g->key_second) {
			g->key_second = key;
		}
	}
	/* Not last, until this collective says otherwise. */
	r->last_frac *= 1 - ALPHA;
	r->pair = jc->size == 2;
	if (r->samples < UINT32_MAX)
		r->samples++;
	judge(r, lim, now_mono);
	if (++g->count < jc->size)
		return 0;
	if (!g->untimed && g->last_rank < sj->nranks) {
		struct srank *last = &sj->ranks[g->last_rank];

		double lag = (double)(g->key_last - g->key_first);
		double lead = (double)(g->key_last - g->key_second);

		last->last_frac += ALPHA;
		if (!last->nlast++) {
			last->lag_ns = lag;
			last->lead_ns = lead;
		} else {
			last->lag_ns += ALPHA * (lag - last->lag_ns);
			last->lead_ns += ALPHA * (lead - last->lead_ns);
		}
		last->last_mono = now_mono;
		judge(last, lim, now_mono);
	}
	g->used = false;
	return 0;
}

static const struct straggler_limits *daemon_limits(const struct flightrecd *d,
						    struct straggler_limits *lim)
{
	lim->threshold_s = d->cfg.straggler_threshold_s;
	lim->min_duration_s = d->cfg.straggler_min_duration_s;
	return lim;
}

int straggler_timing(struct flightrecd *d, struct conn *c, const struct fr_msg_timing *m,
		     const char **why)
{
	struct job_rank *r = c->job ? registry_rank(c->job, c->rank) : NULL;
	struct straggler_job *sj;
	struct straggler_limits lim;
	uint64_t now = daemon_mono_ns();
	bool mpi;

	if (!r) {
		*why = "timing before hello";
		return -EPROTO;
	}
	sj = job_scores(c->job);
	if (!sj)
		return 0; /* scores are information: the connection is kept */
	mpi = strstr(r->comm_lib, "MPI") != NULL;
	daemon_limits(d, &lim);
	for (uint32_t i = 0; i < m->n; i++) {
		const struct srank *sr = &sj->ranks[c->rank];
		struct straggler_sample s = {
			.rank = c->rank,
			.mpi = mpi,
			.has_offset = sr->has_offset,
			.offset_ns = sr->offset_prev < sr->offset_cur ? sr->offset_prev : sr->offset_cur,
			.t = &m->samples[i],
		};
		const struct job_comm *jc = registry_job_comm(c->job, m->samples[i].comm);

		if (!jc || !registry_rank_in_comm(r, m->samples[i].comm))
			continue;
		if (straggler_note(c->job, jc, &s, &lim, now) < 0)
			return 0;
		sj = c->job->straggler;
	}
	return 0;
}

void straggler_heartbeat(struct conn *c, uint64_t agent_now_ns)
{
	struct straggler_job *sj;
	struct srank *r;
	uint64_t now = daemon_mono_ns();
	int64_t off = (int64_t)(daemon_now_ns() - agent_now_ns);

	if (!c->job || !registry_rank(c->job, c->rank) || !agent_now_ns)
		return;
	sj = job_scores(c->job);
	if (!sj)
		return;
	r = &sj->ranks[c->rank];
	if (!r->has_offset) {
		r->has_offset = true;
		r->offset_prev = r->offset_cur = off;
		r->offset_window_mono = now;
	} else if (now - r->offset_window_mono > OFFSET_WINDOW_NS) {
		r->offset_prev = r->offset_cur;
		r->offset_cur = off;
		r->offset_window_mono = now;
	} else if (off < r->offset_cur) {
		r->offset_cur = off;
	}
}

static void entry_of(struct straggler_entry *e, uint32_t rank, const struct srank *r,
		     const struct straggler_limits *lim, uint64_t now_mono)
{
	double held = r->since_mono ? (double)(now_mono - r->since_mono) / NS_PER_S : 0;

	e->rank = rank;
	e->lag_s = r->lag_ns / NS_PER_S;
	e->lead_s = r->lead_ns / NS_PER_S;
	e->last_fraction = r->last_frac;
	e->straggler = r->since_mono && held >= lim->min_duration_s;
	e->since_s = e->straggler ? held : 0;
}

unsigned straggler_list(const struct job *job, const struct straggler_limits *lim,
			uint64_t now_mono, bool stragglers_only, struct straggler_entry *out,
			unsigned max)
{
	const struct straggler_job *sj = job->straggler;
	unsigned n = 0;

	if (!sj)
		return 0;
	for (uint32_t i = 0; i < sj->nranks; i++) {
		const struct srank *r = &sj->ranks[i];
		struct straggler_entry e;
		unsigned at;

		if (!r->last_mono || now_mono - r->last_mono > STALE_NS)
			continue;
		entry_of(&e, i, r, lim, now_mono);
		if (stragglers_only && !e.straggler)
			continue;
		/* Insertion into the top `max`, slowest first. */
		for (at = n; at > 0 && out[at - 1].lag_s < e.lag_s; at--)
			;
		if (at >= max)
			continue;
		if (n < max)
			n++;
		memmove(&out[at + 1], &out[at], (n - 1 - at) * sizeof(*out));
		out[at] = e;
	}
	return n;
}

json_t *straggler_json(const struct flightrecd *d, const struct job *job, bool stragglers_only)
{
	struct straggler_entry e[STRAGGLER_LIST_MAX];
	struct straggler_limits lim;
	json_t *a = json_array();
	unsigned n;

	n = straggler_list(job, daemon_limits(d, &lim), daemon_mono_ns(), stragglers_only, e,
			   STRAGGLER_LIST_MAX);
	for (unsigned i = 0; a && i < n; i++)
		if (json_array_append_new(a, json_pack("{s:I, s:f, s:f, s:f, s:f}", "rank",
						       (json_int_t)e[i].rank, "lag_ms",
						       e[i].lag_s * 1e3, "lead_ms",
						       e[i].lead_s * 1e3, "last_fraction",
						       e[i].last_fraction, "since_s",
						       e[i].since_s)) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

void straggler_metrics(const struct flightrecd *d, FILE *f)
{
	struct straggler_limits lim;
	uint64_t now = daemon_mono_ns();

	daemon_limits(d, &lim);
	fputs("# HELP flightrec_straggler_ranks Ranks of the job that are stragglers now "
	      "(--straggler-threshold, --straggler-min-duration).\n"
	      "# TYPE flightrec_straggler_ranks gauge\n", f);
	for (const struct job *job = d->jobs; job; job = job->next) {
		struct straggler_entry e[1];
		unsigned all = 0;

		if (job->straggler)
			for (uint32_t i = 0; i < job->straggler->nranks; i++) {
				entry_of(e, i, &job->straggler->ranks[i], &lim, now);
				all += e->straggler && now - job->straggler->ranks[i].last_mono <= STALE_NS;
			}
		fprintf(f, "flightrec_straggler_ranks{job=\"%s\"} %u\n", job->id, all);
	}
	fputs("# HELP flightrec_straggler_lag_seconds How far behind the first member the job's "
	      "slowest straggler comes to its collectives (decayed); 0 without one.\n"
	      "# TYPE flightrec_straggler_lag_seconds gauge\n", f);
	for (const struct job *job = d->jobs; job; job = job->next) {
		struct straggler_entry e[1];

		if (!straggler_list(job, &lim, now, true, e, 1))
			e->lag_s = 0;
		fprintf(f, "flightrec_straggler_lag_seconds{job=\"%s\"} %.6f\n", job->id, e->lag_s);
	}
}
