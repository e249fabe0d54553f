/* The central watchdog and live verdicts of jobs the node daemons hold (node_watchdog.h). */
#include "node_watchdog.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "cluster_incident.h"
#include "daemon.h"
#include "log.h"
#include "node_verdict.h"
#include "nodes.h"
#include "ratelog.h"
#include "registry.h"

#include "../protocol/hash.h"
#include "../protocol/op.h"

/*
 * What was reported of a job, between passes; forgotten with the job. In
 * a hash table by job id, so that a pass costs the jobs it checks, not
 * their square (nodes.h caps them at NODES_JOBS_TOTAL_MAX).
 */
struct reported {
	struct reported *next;  /* in its bucket */
	char job[FR_JOB_MAX + 1];
	struct nv_reported rep;
	bool seen;              /* in this pass */
};

/* Buckets: a power of two, at least the jobs nodes may hold. */
#define REPORTED_BUCKETS 4096u
_Static_assert(REPORTED_BUCKETS >= NODES_JOBS_TOTAL_MAX, "one job a bucket on average, at most");

static struct reported **reported;

static size_t reported_bucket(const char *job)
{
	return fr_fnv1a(FR_FNV_INIT, job, strlen(job)) & (REPORTED_BUCKETS - 1);
}

/* A job's state gathered from the nodes: the input of nv_decide(). */
struct gather {
	uint64_t now_mono_ns;
	struct agg_comm *scratch;       /* the communicator being merged */
	struct agg_comm *best;          /* the one whose oldest operation is oldest */
	char best_comm[FR_COMM_ID_MAX + 1];
	bool have_best;
	struct nv_lost *lost;
	size_t nlost, lost_cap;
	int err;
	struct nv_job job;
};

static void on_comm(void *arg, const char *comm, const struct agg_node *recs, size_t n)
{
	struct gather *g = arg;
	struct agg_comm *swap;

	if (g->err)
		return;
	g->err = aggregate_merge(recs, n, g->scratch);
	if (g->err || !nv_older(g->scratch, g->have_best ? g->best : NULL))
		return;
	swap = g->best;
	g->best = g->scratch;
	g->scratch = swap;
	g->have_best = true;
	snprintf(g->best_comm, sizeof(g->best_comm), "%s", comm);
}

static void on_lost(void *arg, const char *node, uint64_t lost_mono_ns,
		    const struct fr_node_rank *ranks, uint32_t nranks)
{
	struct gather *g = arg;
	struct nv_lost *l;
	uint32_t i = 0;

	/* A node whose ranks all finished holds nobody up. Read until the
	 * first that did not: one rank, while the job runs. */
	while (i < nranks && ranks[i].state == FR_NODE_RANK_FINISHED)
		i++;
	if (g->err || i == nranks)
		return;
	if (g->nlost == g->lost_cap) {
		size_t cap = g->lost_cap ? 2 * g->lost_cap : 4;

		l = realloc(g->lost, cap * sizeof(*l));
		if (!l) {
			g->err = -ENOMEM;
			return;
		}
		g->lost = l;
		g->lost_cap = cap;
	}
	l = &g->lost[g->nlost++];
	snprintf(l->node, sizeof(l->node), "%s", node);
	l->lost_mono_ns = lost_mono_ns;
	nv_lost_ranges(l, ranks, nranks);
}

static void gather_free(struct gather *g)
{
	free(g->scratch);
	free(g->best);
	free(g->lost);
}

/* Every communicator of the job merged, its lost nodes listed. Returns 0
 * or -ENOMEM (then g is freed). */
static int gather(const char *job, uint32_t world_size, uint64_t now_mono_ns, struct gather *g)
{
	memset(g, 0, sizeof(*g));
	g->now_mono_ns = now_mono_ns;
	g->scratch = malloc(sizeof(*g->scratch));
	g->best = malloc(sizeof(*g->best));
	if (!g->scratch || !g->best) {
		gather_free(g);
		return -ENOMEM;
	}
	nodes_job_each_comm(job, now_mono_ns, on_comm, g);
	if (!g->err)
		nodes_job_each_lost(job, on_lost, g);
	if (g->err) {
		gather_free(g);
		return g->err;
	}
	g->job = (struct nv_job){
		.world_size = world_size,
		.comm = g->have_best ? g->best_comm : NULL,
		.agg = g->have_best ? g->best : NULL,
		.nlost = g->nlost,
		.lost = g->lost,
	};
	return 0;
}

static const char *name_of_node(void *arg, uint32_t node)
{
	(void)arg;
	return nodes_node_name(node);
}

static bool rank_on_node(void *arg, const char *node, uint32_t rank, const char **host,
			 uint32_t *pid)
{
	const struct fr_node_rank *r = nodes_job_rank(arg, node, rank);

	if (!r)
		return false;
	*host = r->host;
	*pid = r->pid;
	return true;
}

static struct nv_limits limits_of(const struct flightrecd *d)
{
	return (struct nv_limits){ .timeout_s = d->cfg.timeout_s,
				   .heartbeat_timeout_s = d->cfg.heartbeat_timeout_s };
}

static json_t *verdict_json(const char *job, const struct gather *g,
			    const struct nv_decision *dec, uint64_t now_mono_ns)
{
	struct nv_names names = { .node = name_of_node, .rank = rank_on_node, .arg = (void *)job };

	return nv_verdict_json(&g->job, dec, now_mono_ns, &names);
}

static struct reported *reported_of(const char *job)
{
	struct reported *r, **b;

	if (!reported && !(reported = calloc(REPORTED_BUCKETS, sizeof(*reported))))
		return NULL;
	b = &reported[reported_bucket(job)];
	for (r = *b; r; r = r->next)
		if (strcmp(r->job, job) == 0)
			return r;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	snprintf(r->job, sizeof(r->job), "%s", job);
	r->next = *b;
	*b = r;
	return r;
}

struct pass {
	struct flightrecd *d;
	uint64_t now_mono_ns;
};

static void check_job(void *arg, const char *job, uint32_t world_size)
{
	struct pass *p = arg;
	struct nv_limits lim = limits_of(p->d);
	struct nv_decision dec;
	struct nv_reported before;
	struct reported *r;
	struct gather g;
	bool had_key;

	if (registry_job_find(p->d, job) || !(r = reported_of(job)))
		return;
	r->seen = true;
	if (gather(job, world_size, p->now_mono_ns, &g))
		return;
	/* While an incident collects, nothing is reported: the stuck state
	 * is opened once it is done, if it still holds. */
	had_key = r->rep.has_key;
	before = r->rep;
	nv_decide(&g.job, &lim, p->now_mono_ns, cluster_incident_collecting(job) ? NULL : &r->rep,
		  &dec);
	if (had_key && !r->rep.has_key)
		daemon_log("job %s: the operation its nodes reported stuck has moved on", job);
	if (dec.open) {
		json_t *v = verdict_json(job, &g, &dec, p->now_mono_ns);
		json_t *s = v ? json_object_get(v, "summary") : NULL;

		/* Once a minute a job at most: a job whose incidents cannot
		 * open (over the rate, or too many open) is decided again
		 * every pass. */
		ratelog("node job verdict", job, "job %s (held by node daemons): %s", job,
			s ? json_string_value(s) : dec.trigger.reason);
		/* Not open for want of room: still to report, on a later pass. */
		if (cluster_incident_open(p->d, job, &dec.trigger, v) == -ENOSPC)
			r->rep = before;
		json_decref(v);
	}
	gather_free(&g);
}

void node_watchdog_check(struct flightrecd *d, uint64_t now_mono_ns)
{
	struct pass p = { .d = d, .now_mono_ns = now_mono_ns };

	nodes_forget_lost(now_mono_ns, nodes_lost_grace_ns(d->cfg.heartbeat_timeout_s));
	nodes_each_job(check_job, &p);
	/* Jobs no node holds any more are forgotten with what was reported;
	 * the others start the next pass unseen. */
	for (size_t b = 0; reported && b < REPORTED_BUCKETS; b++) {
		for (struct reported **at = &reported[b]; *at;) {
			struct reported *r = *at;

			if (r->seen) {
				r->seen = false;
				at = &r->next;
				continue;
			}
			*at = r->next;
			free(r);
		}
	}
}

json_t *node_watchdog_verdict(struct flightrecd *d, const char *job)
{
	uint64_t now_mono_ns = daemon_mono_ns();
	struct nv_limits lim = limits_of(d);
	struct nv_decision dec;
	uint32_t world_size;
	struct gather g;
	json_t *v;

	if (registry_job_find(d, job) || !nodes_job_known(job, &world_size))
		return NULL;
	if (gather(job, world_size, now_mono_ns, &g))
		return NULL;
	nv_decide(&g.job, &lim, now_mono_ns, NULL, &dec);
	v = verdict_json(job, &g, &dec, now_mono_ns);
	gather_free(&g);
	return v;
}

/* GET /v1/jobs's short form of the decision: what is stuck, and how many culprits. */
static json_t *stuck_json(const struct gather *g, const struct nv_decision *dec)
{
	const struct agg_comm *a = g->job.agg;

	if (!dec->hang)
		return json_null();
	return json_pack("{s:s, s:I, s:s, s:f, s:I, s:I}", "comm", g->job.comm, "seq",
			 (json_int_t)a->oldest.seq, "type", fr_op_name(a->oldest.type),
			 "waited_s", (double)a->oldest.age_ms / 1000.0, "ranks_waiting",
			 (json_int_t)a->oldest.nranks, "culprits",
			 (json_int_t)nv_culprit_count(a));
}

void node_watchdog_jobs_json(struct flightrecd *d, json_t *jobs, size_t from)
{
	uint64_t now_mono_ns = daemon_mono_ns();
	struct nv_limits lim = limits_of(d);

	for (size_t i = from; i < json_array_size(jobs); i++) {
		json_t *o = json_array_get(jobs, i);
		const char *job = json_string_value(json_object_get(o, "job"));
		json_int_t world = json_integer_value(json_object_get(o, "world_size"));
		struct nv_decision dec;
		struct gather g;

		if (!job || gather(job, (uint32_t)world, now_mono_ns, &g))
			continue;
		nv_decide(&g.job, &lim, now_mono_ns, NULL, &dec);
		json_object_set_new(o, "verdict", json_string(dec.hang || dec.nlost ? "hang" : "ok"));
		json_object_set_new(o, "stuck", stuck_json(&g, &dec));
		json_object_set_new(o, "nodes_lost", json_integer((json_int_t)dec.nlost));
		gather_free(&g);
	}
}

void node_watchdog_free(void)
{
	for (size_t b = 0; reported && b < REPORTED_BUCKETS; b++) {
		while (reported[b]) {
			struct reported *r = reported[b];

			reported[b] = r->next;
			free(r);
		}
	}
	free(reported);
	reported = NULL;
}
