/* The verdict of a job the node daemons hold, from their aggregates (node_verdict.h). */
#include "node_verdict.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../protocol/hash.h"
#include "../protocol/op.h"

#define NS_PER_S 1000000000ull

void nv_lost_ranges(struct nv_lost *l, const struct fr_node_rank *ranks, uint32_t n)
{
	uint64_t listed = 0;
	uint32_t i = 0;

	l->nranks = n;
	l->nranges = 0;
	while (i < n && l->nranges < NV_LOST_RANGES_MAX) {
		/* Ranks ascend and differ, so rank - index never falls: a run
		 * is where it stays the same, found by bisection rather than
		 * by reading every rank of it. */
		uint32_t lo = i, hi = n - 1;

		while (lo < hi) {
			uint32_t mid = lo + (hi - lo + 1) / 2;

			if (ranks[mid].rank - mid == ranks[i].rank - i)
				lo = mid;
			else
				hi = mid - 1;
		}
		l->ranges[l->nranges++] = (struct fr_node_range){ .first = ranks[i].rank,
								  .count = lo - i + 1 };
		listed += lo - i + 1;
		i = lo + 1;
	}
	l->ranks_unlisted = (uint32_t)(n - listed);
}

bool nv_older(const struct agg_comm *agg, const struct agg_comm *best)
{
	return agg->has_oldest && (!best || !best->has_oldest || agg->oldest.age_ms > best->oldest.age_ms);
}

bool nv_names_culprits(const struct agg_comm *agg)
{
	return agg->has_oldest && fr_op_is_collective(agg->oldest.type);
}

bool nv_is_culprit(const struct agg_comm *agg, const struct agg_laggard *l)
{
	return nv_names_culprits(agg) && l->last_entered < agg->oldest.seq;
}

uint64_t nv_culprit_count(const struct agg_comm *agg)
{
	uint64_t n = 0;

	if (!nv_names_culprits(agg))
		return 0;
	for (uint32_t i = 0; i < agg->nlaggards; i++)
		n += nv_is_culprit(agg, &agg->laggards[i]);
	return n + agg->laggards_unnamed;
}

bool nv_lost_counts(const struct nv_lost *l, const struct nv_limits *lim, uint64_t now_mono_ns)
{
	return now_mono_ns > l->lost_mono_ns &&
	       (double)(now_mono_ns - l->lost_mono_ns) / NS_PER_S > lim->heartbeat_timeout_s;
}

/* The stuck operation, without its ages or culprits: the same hang seen
 * later has the same key, a later seq another. */
static uint64_t stuck_key(const char *comm, const struct agg_group *g)
{
	uint64_t h = FR_FNV_INIT;

	h = fr_fnv1a(h, comm, strlen(comm) + 1);
	h = fr_fnv1a(h, &g->seq, sizeof(g->seq));
	return fr_fnv1a(h, &g->type, sizeof(g->type));
}

static int32_t first_culprit(const struct agg_comm *agg)
{
	for (uint32_t i = 0; i < agg->nlaggards; i++)
		if (nv_is_culprit(agg, &agg->laggards[i]))
			return (int32_t)agg->laggards[i].rank;
	return -1;
}

bool nv_decide(const struct nv_job *j, const struct nv_limits *lim, uint64_t now_mono_ns,
	       struct nv_reported *rep, struct nv_decision *out)
{
	uint64_t newest_lost = 0;
	double longest_gone = 0;
	uint64_t key = 0;

	memset(out, 0, sizeof(*out));
	out->limits = *lim;
	out->hang = j->agg && j->agg->has_oldest &&
		    (double)j->agg->oldest.age_ms / 1000.0 > lim->timeout_s;
	for (size_t i = 0; i < j->nlost; i++) {
		const struct nv_lost *l = &j->lost[i];
		double gone = (double)(now_mono_ns - l->lost_mono_ns) / NS_PER_S;

		if (!nv_lost_counts(l, lim, now_mono_ns))
			continue;
		out->nlost++;
		if (rep && l->lost_mono_ns > rep->lost_mono_ns) {
			if (l->lost_mono_ns > newest_lost)
				newest_lost = l->lost_mono_ns;
			if (gone > longest_gone)
				longest_gone = gone;
		}
	}
	if (!rep)
		return out->hang || out->nlost;
	if (out->hang) {
		key = stuck_key(j->comm, &j->agg->oldest);
		if (!rep->has_key || rep->key != key) {
			out->open = true;
			out->trigger = (struct incident_trigger){
				.reason = "timeout",
				.rank = first_culprit(j->agg),
				.has_seq = true,
				.seq = j->agg->oldest.seq,
				.waited_s = (double)j->agg->oldest.age_ms / 1000.0,
			};
			snprintf(out->trigger.comm, sizeof(out->trigger.comm), "%s", j->comm);
		}
		rep->has_key = true;
		rep->key = key;
	} else {
		rep->has_key = false;
	}
	/* A loss is opened once; with a hang opened at the same time, that
	 * incident's verdict says both. */
	if (newest_lost) {
		if (!out->open) {
			out->open = true;
			out->trigger = (struct incident_trigger){
				.reason = "node_lost",
				.rank = -1,
				.waited_s = longest_gone,
			};
		}
		rep->lost_mono_ns = newest_lost;
	}
	return out->hang || out->nlost;
}

/* JSON */

/* Appends "a-b" or "a" for a run to buf at *at, ",": not the first. */
static void put_run(char *buf, size_t cap, size_t *at, uint32_t first, uint32_t count)
{
	int n;

	if (*at >= cap)
		return;
	if (count > 1)
		n = snprintf(buf + *at, cap - *at, "%s%" PRIu32 "-%" PRIu32, *at ? "," : "", first,
			     first + count - 1);
	else
		n = snprintf(buf + *at, cap - *at, "%s%" PRIu32, *at ? "," : "", first);
	*at += n > 0 ? (size_t)n : 0;
}

/* Runs as text ("0-1,3"), cut to the buffer. */
static const char *runs_text(char *buf, size_t cap, const struct fr_node_range *r, uint32_t n)
{
	size_t at = 0;

	buf[0] = '\0';
	for (uint32_t i = 0; i < n; i++)
		put_run(buf, cap, &at, r[i].first, r[i].count);
	return buf;
}

/* The counted lost node that is `node`, or NULL. */
static const struct nv_lost *lost_named(const struct nv_job *j, const struct nv_limits *lim,
					uint64_t now, const char *node)
{
	for (size_t i = 0; i < j->nlost; i++)
		if (strcmp(j->lost[i].node, node) == 0 && nv_lost_counts(&j->lost[i], lim, now))
			return &j->lost[i];
	return NULL;
}

static json_t *culprit_json(uint32_t rank, const char *node, const struct nv_lost *lost,
			    const struct agg_laggard *lag, const struct nv_names *names)
{
	const char *host = "";
	uint32_t pid = 0;
	json_t *c;

	if (names->rank)
		names->rank(names->arg, node, rank, &host, &pid);
	c = json_pack("{s:I, s:s, s:s, s:I, s:s, s:n, s:n, s:f}", "rank", (json_int_t)rank, "reason",
		      lost ? "unresponsive" : "not_entered", "host", host, "pid", (json_int_t)pid,
		      "node", node, "last_completed", "called", "waited_s", 0.0);
	if (c)
		json_object_set_new(c, "last_entered",
				    lag ? json_integer((json_int_t)lag->last_entered) : json_null());
	if (c && lost) {
		char why[FR_HOST_MAX + 16];

		snprintf(why, sizeof(why), "node lost: %s", lost->node);
		json_object_set_new(c, "detail", json_string(why));
	}
	return c;
}

/* Whether `rank` is among the culprits the laggards name (ascending by rank). */
static bool culprit_listed(const struct agg_comm *a, uint32_t rank)
{
	uint32_t lo = 0, hi = a ? a->nlaggards : 0;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (a->laggards[mid].rank < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	return a && lo < a->nlaggards && a->laggards[lo].rank == rank &&
	       nv_is_culprit(a, &a->laggards[lo]);
}

struct culprits {
	json_t *arr;
	uint32_t listed;
	uint64_t unnamed;
	/* The laggards named in the summary: the first runs, their node. */
	struct fr_node_range runs[8];
	uint32_t nruns;
	uint32_t in_runs;
	uint64_t nlag;          /* laggards below the operation, named or not */
	const char *node;
	bool nodes_differ;
};

static void culprits_add(struct culprits *cs, json_t *c)
{
	cs->listed++;
	json_array_append_new(cs->arr, c);
}

/* The laggards below the stuck operation, each with its node. */
static void laggard_culprits(struct culprits *cs, const struct nv_job *j, const struct nv_limits *lim,
			     uint64_t now, const struct nv_names *names)
{
	const struct agg_comm *a = j->agg;
	uint32_t last_node = UINT32_MAX;
	const struct nv_lost *lost = NULL;
	const char *node = "";

	if (!nv_names_culprits(a))
		return;
	cs->unnamed += a->laggards_unnamed;
	cs->nlag += a->laggards_unnamed;
	for (uint32_t i = 0; i < a->nlaggards; i++) {
		const struct agg_laggard *l = &a->laggards[i];

		if (!nv_is_culprit(a, l))
			continue;
		cs->nlag++;
		if (cs->listed >= NV_RANKS_MAX) {
			cs->unnamed++;
			continue;
		}
		/* Laggards of one node come together more often than not. */
		if (l->node != last_node) {
			last_node = l->node;
			node = names->node ? names->node(names->arg, l->node) : "";
			lost = lost_named(j, lim, now, node);
		}
		culprits_add(cs, culprit_json(l->rank, node, lost, l, names));
		if (cs->node && strcmp(cs->node, node) != 0)
			cs->nodes_differ = true;
		cs->node = node;
		if (fr_node_ranges_add(cs->runs, &cs->nruns, 8, l->rank) &&
		    cs->runs[cs->nruns - 1].first + cs->runs[cs->nruns - 1].count == l->rank + 1)
			cs->in_runs++;
	}
}

/* Every rank of the lost nodes, unresponsive for one reason, after the laggards. */
static void lost_culprits(struct culprits *cs, const struct nv_job *j, const struct agg_comm *a,
			  const struct nv_limits *lim, uint64_t now, const struct nv_names *names)
{
	for (size_t i = 0; i < j->nlost; i++) {
		const struct nv_lost *l = &j->lost[i];

		if (!nv_lost_counts(l, lim, now))
			continue;
		cs->unnamed += l->ranks_unlisted;
		for (uint32_t r = 0; r < l->nranges; r++) {
			for (uint32_t k = 0; k < l->ranges[r].count; k++) {
				uint32_t rank = l->ranges[r].first + k;

				if (culprit_listed(a, rank))
					continue;
				if (cs->listed >= NV_RANKS_MAX) {
					cs->unnamed++;
					continue;
				}
				culprits_add(cs, culprit_json(rank, l->node, l, NULL, names));
			}
		}
	}
}

static json_t *op_json(const char *comm, const struct agg_group *g)
{
	return json_pack("{s:s, s:I, s:s, s:b, s:b, s:s, s:I, s:I}", "comm", comm, "seq",
			 (json_int_t)g->seq, "type", fr_op_name(g->type), "nonblocking",
			 (g->flags & FR_WIRE_INFLIGHT_NONBLOCKING) != 0, "waited",
			 (g->flags & FR_WIRE_INFLIGHT_WAITED) != 0, "state", "entered", "nranks",
			 (json_int_t)g->nranks, "nnodes", (json_int_t)g->nnodes);
}

/* The waiting ranks one by one, the first NV_RANKS_MAX. */
static json_t *waiting_json(const struct agg_group *g)
{
	json_t *arr = json_array();
	uint32_t n = 0;

	for (uint32_t r = 0; arr && g && r < g->nranges && n < NV_RANKS_MAX; r++)
		for (uint32_t k = 0; k < g->ranges[r].count && n < NV_RANKS_MAX; k++, n++)
			json_array_append_new(arr, json_integer(g->ranges[r].first + k));
	return arr;
}

static json_t *lost_json(const struct nv_job *j, const struct nv_limits *lim, uint64_t now)
{
	json_t *arr = json_array();
	char text[512];

	for (size_t i = 0; arr && i < j->nlost; i++) {
		const struct nv_lost *l = &j->lost[i];

		if (!nv_lost_counts(l, lim, now))
			continue;
		json_array_append_new(arr, json_pack("{s:s, s:f, s:I, s:s, s:I}", "node", l->node,
						     "lost_s",
						     (double)(now - l->lost_mono_ns) / NS_PER_S,
						     "nranks", (json_int_t)l->nranks, "ranks",
						     runs_text(text, sizeof(text), l->ranges,
							       l->nranges),
						     "ranks_unlisted",
						     (json_int_t)l->ranks_unlisted));
	}
	return arr;
}

/* One line for a person, as fr-analyze's summary. */
static void summary(char *buf, size_t cap, const struct nv_job *j, const struct nv_decision *dec,
		    const struct culprits *cs, uint64_t now)
{
	const struct agg_group *g = dec->hang ? &j->agg->oldest : NULL;
	char runs[256], waiting[256];
	size_t at = 0;
	int n = 0;

	buf[0] = '\0';
	if (g) {
		runs_text(waiting, sizeof(waiting), g->ranges, g->nranges);
		runs_text(runs, sizeof(runs), cs->runs, cs->nruns);
		if (!fr_op_is_collective(g->type))
			n = snprintf(buf, cap,
				     "%s %s %s waited %.1f s in %s #%" PRIu64 " on %s; point-to-point: "
				     "the peer is not known from the aggregates",
				     g->nranks > 1 ? "ranks" : "rank", waiting,
				     g->nranks > 1 ? "have" : "has", (double)g->age_ms / 1000.0,
				     fr_op_name(g->type), g->seq, j->comm);
		else if (cs->in_runs)
			n = snprintf(buf, cap,
				     "%s %s%s (%s %s%s) never entered %s #%" PRIu64
				     " on %s; %s %s %s waited %.1f s",
				     cs->nlag > 1 ? "ranks" : "rank", runs,
				     cs->in_runs < cs->nlag ? ",..." : "",
				     cs->nodes_differ ? "nodes" : "node", cs->node,
				     cs->nodes_differ ? ",..." : "", fr_op_name(g->type), g->seq,
				     j->comm, g->nranks > 1 ? "ranks" : "rank", waiting,
				     g->nranks > 1 ? "have" : "has", (double)g->age_ms / 1000.0);
		else
			n = snprintf(buf, cap,
				     "every rank that reported %s waits in %s #%" PRIu64
				     ": ranks %s have waited %.1f s; none is behind",
				     j->comm, fr_op_name(g->type), g->seq, waiting,
				     (double)g->age_ms / 1000.0);
		at = n > 0 ? (size_t)n : 0;
	}
	for (size_t i = 0; i < j->nlost && at < cap; i++) {
		const struct nv_lost *l = &j->lost[i];

		if (!nv_lost_counts(l, &dec->limits, now))
			continue;
		n = snprintf(buf + at, cap - at, "%snode %s lost %.1f s ago: ranks %s%s unresponsive",
			     at ? "; " : "", l->node, (double)(now - l->lost_mono_ns) / NS_PER_S,
			     runs_text(runs, sizeof(runs), l->ranges, l->nranges),
			     l->ranks_unlisted ? ",..." : "");
		at += n > 0 ? (size_t)n : 0;
	}
	if (!g && !dec->nlost)
		snprintf(buf, cap, "no operation has waited longer than %.1f s and no node is lost",
			 dec->limits.timeout_s);
}

json_t *nv_verdict_json(const struct nv_job *j, const struct nv_decision *dec,
			uint64_t now_mono_ns, const struct nv_names *names)
{
	const struct nv_limits *lim = &dec->limits;
	const struct agg_comm *a = dec->hang ? j->agg : NULL;
	struct culprits cs = { .arr = json_array() };
	char text[1024], waiting[512];
	json_t *o;

	if (!cs.arr)
		return NULL;
	if (a)
		laggard_culprits(&cs, j, lim, now_mono_ns, names);
	lost_culprits(&cs, j, a, lim, now_mono_ns, names);
	summary(text, sizeof(text), j, dec, &cs, now_mono_ns);
	if (a)
		runs_text(waiting, sizeof(waiting), a->oldest.ranges, a->oldest.nranges);
	else
		waiting[0] = '\0';
	o = json_pack("{s:s, s:o, s:I, s:o*, s:o, s:s, s:I, s:I, s:f, s:I, s:o, s:[], s:{s:i}, s:s, s:s}",
		      "verdict", dec->hang || dec->nlost ? "hang" : "ok", "culprits", cs.arr,
		      "culprits_unnamed", (json_int_t)cs.unnamed, "op",
		      a ? op_json(j->comm, &a->oldest) : json_null(), "waiting_ranks",
		      waiting_json(a ? &a->oldest : NULL), "waiting_ranges",
		      waiting,
		      "waiting_count", (json_int_t)(a ? a->oldest.nranks : 0), "waiting_unlisted",
		      (json_int_t)(a ? a->oldest.ranks_unlisted : 0), "waited_s",
		      a ? (double)a->oldest.age_ms / 1000.0 : 0.0, "world_size",
		      (json_int_t)j->world_size, "nodes_lost", lost_json(j, lim, now_mono_ns),
		      "stragglers", "aligned", "comms", 0, "summary", text, "source", "nodes");
	return o;
}
