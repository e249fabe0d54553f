/*
 * Aggregates: a node's NODE_PROGRESS records from its registry, and the
 * central daemon's merge of every node's (aggregate.h).
 */
#include "aggregate.h"
#include "registry.h"

#include "../protocol/hash.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_MS 1000000ull

/*
 * The records being built, found by communicator id: an open-addressed
 * table of their indices. A node's ranks of a large job report a hundred
 * communicators or more (one of each split); a walk of the records per
 * rank and per operation had cost 15 ms of every 500 ms pace at 1,024
 * ranks.
 */
struct rec_index {
	uint32_t *slot;         /* record index + 1; 0: empty */
	uint32_t mask;
};

static uint64_t id_hash(const char *id)
{
	return fr_fnv1a(FR_FNV_INIT, id, strlen(id));
}

static int rec_index_build(struct rec_index *ix, const struct fr_node_comm_progress *out,
			   uint32_t n)
{
	uint32_t size = 16;

	while (size < 2 * n)
		size *= 2;
	ix->slot = calloc(size, sizeof(*ix->slot));
	if (!ix->slot)
		return -ENOMEM;
	ix->mask = size - 1;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = (uint32_t)id_hash(out[i].comm) & ix->mask;

		while (ix->slot[k])
			k = (k + 1) & ix->mask;
		ix->slot[k] = i + 1;
	}
	return 0;
}

/* The record of `id`, or NULL. */
static struct fr_node_comm_progress *record_of(const struct rec_index *ix,
					       struct fr_node_comm_progress *out, const char *id)
{
	for (uint32_t k = (uint32_t)id_hash(id) & ix->mask; ix->slot[k]; k = (k + 1) & ix->mask)
		if (strcmp(out[ix->slot[k] - 1].comm, id) == 0)
			return &out[ix->slot[k] - 1];
	return NULL;
}

/* The rank's progress on communicator `id`, or NULL. */
static const struct rank_comm *rank_comm_of(const struct job_rank *r, const char *id)
{
	for (size_t i = 0; i < r->ncomms; i++)
		if (strcmp(r->comms[i].id, id) == 0)
			return &r->comms[i];
	return NULL;
}

/* Widens [*lo, *hi] to take in [lo_v, hi_v]; `first`: there is nothing yet. */
static void widen(uint64_t *lo, uint64_t *hi, bool first, uint64_t lo_v, uint64_t hi_v)
{
	if (first || lo_v < *lo)
		*lo = lo_v;
	if (first || hi_v > *hi)
		*hi = hi_v;
}

static void add_progress(struct fr_node_comm_progress *c, uint32_t rank, const struct rank_comm *rc)
{
	widen(&c->lo_entered, &c->hi_entered, c->nranks == 0, rc->last_entered, rc->last_entered);
	widen(&c->lo_completed, &c->hi_completed, c->nranks == 0, rc->last_completed,
	      rc->last_completed);
	c->nranks++;
	fr_node_ranges_add(c->members, &c->nmembers, FR_NODE_RANGES_MAX, rank);
}

/*
 * Puts the rank's operation in its group. `last` holds, per group, the last
 * rank counted in it, so that a rank with two operations of one key (two
 * sends of the same seq to two peers) counts once.
 */
static void add_op(struct fr_node_comm_progress *c, uint32_t *last, uint32_t rank,
		   const struct rank_op *op, uint64_t now_ns)
{
	uint64_t age = now_ns > op->entered_ns ? (now_ns - op->entered_ns) / NS_PER_MS : 0;
	struct fr_node_group *g = NULL;
	uint32_t i;

	for (i = 0; i < c->ngroups; i++) {
		g = &c->groups[i];
		if (g->seq == op->w.seq && g->type == op->w.type && g->flags == op->w.flags)
			break;
	}
	if (i == c->ngroups) {
		if (c->ngroups == FR_NODE_GROUPS_MAX) {
			c->ops_omitted++;
			return;
		}
		g = &c->groups[c->ngroups++];
		*g = (struct fr_node_group){ .seq = op->w.seq, .type = op->w.type, .flags = op->w.flags };
		last[i] = FR_RANK_UNKNOWN;
	}
	if (age > g->age_ms)
		g->age_ms = age;
	if (last[i] == rank)
		return;
	last[i] = rank;
	g->nranks++;
	fr_node_ranges_add(g->ranges, &g->nranges, FR_NODE_RANGES_MAX, rank);
}

/* The records of job->comms[first .. first + n) into `out`; 0 or -ENOMEM. */
static int aggregate_into(const struct job *job, size_t first, uint32_t n, uint64_t now_ns,
			  struct fr_node_comm_progress *out)
{
	/* Per record, the last rank counted in each of its groups (add_op()). */
	uint32_t (*last)[FR_NODE_GROUPS_MAX] = malloc((n ? n : 1) * sizeof(*last));
	struct rec_index ix = { 0 };

	if (!last)
		goto nomem;
	memset(out, 0, n * sizeof(*out));
	for (uint32_t i = 0; i < n; i++)
		memcpy(out[i].comm, job->comms[first + i].id, sizeof(out[i].comm));
	if (rec_index_build(&ix, out, n))
		goto nomem;

	/* Ranks ascending, so that runs come out coalesced. */
	for (uint32_t k = 0; k < job->nslots; k++) {
		const struct job_rank *r = job->ranks[k];

		if (!r)
			continue;
		for (size_t i = 0; i < r->ncomms; i++) {
			struct fr_node_comm_progress *c = record_of(&ix, out, r->comms[i].id);

			if (c)
				add_progress(c, r->rank, &r->comms[i]);
		}
		for (size_t i = 0; i < r->nops; i++) {
			struct fr_node_comm_progress *c = record_of(&ix, out, r->ops[i].w.comm);

			/* An operation on a communicator the rank never
			 * reported progress on has no record to go in. */
			if (c && rank_comm_of(r, c->comm))
				add_op(c, last[c - out], r->rank, &r->ops[i], now_ns);
		}
	}
	/* Now that each highest is known: the ranks below it. */
	for (uint32_t k = 0; k < job->nslots; k++) {
		const struct job_rank *r = job->ranks[k];

		if (!r)
			continue;
		for (size_t i = 0; i < r->ncomms; i++) {
			const struct rank_comm *rc = &r->comms[i];
			struct fr_node_comm_progress *c = record_of(&ix, out, rc->id);

			if (!c || rc->last_entered >= c->hi_entered)
				continue;
			if (c->nlaggards == FR_NODE_LAGGARDS_MAX) {
				c->laggards_omitted++;
				continue;
			}
			c->laggards[c->nlaggards++] = (struct fr_node_laggard){
				.rank = r->rank,
				.last_entered = rc->last_entered,
				.last_completed = rc->last_completed,
			};
		}
	}
	free(ix.slot);
	free(last);
	return 0;

nomem:
	free(ix.slot);
	free(last);
	return -ENOMEM;
}

int aggregate_progress(const struct job *job, size_t first, uint32_t n, uint64_t now_ns,
		       struct fr_msg_node_progress *m, struct fr_node_comm_progress *out)
{
	if (n > FR_NODE_PROGRESS_COMMS_MAX || first > job->ncomms || n > job->ncomms - first)
		return -EINVAL;
	memset(m, 0, sizeof(*m));
	memcpy(m->job, job->id, sizeof(m->job));
	m->ncomms = n;
	m->comms = out;
	return aggregate_into(job, first, n, now_ns, out);
}

int aggregate_progress_range(const struct job *job, size_t first, uint32_t n, uint64_t now_ns,
			     struct fr_node_comm_progress *out)
{
	if (first > job->ncomms || n > job->ncomms - first)
		return -EINVAL;
	return aggregate_into(job, first, n, now_ns, out);
}

/* The central side */

static bool group_blocks(uint8_t flags)
{
	return !(flags & FR_WIRE_INFLIGHT_NONBLOCKING) || (flags & FR_WIRE_INFLIGHT_WAITED);
}

static void add_laggard(struct agg_comm *out, uint32_t rank, uint32_t node, uint64_t last_entered)
{
	if (out->nlaggards == AGG_LAGGARDS_MAX) {
		out->laggards_unnamed++;
		return;
	}
	out->laggards[out->nlaggards++] =
		(struct agg_laggard){ .rank = rank, .node = node, .last_entered = last_entered };
}

static bool named_by(const struct fr_node_comm_progress *rec, uint32_t rank)
{
	for (uint32_t i = 0; i < rec->nlaggards; i++)
		if (rec->laggards[i].rank == rank)
			return true;
	return false;
}

/*
 * The laggards of one node below `hi`, the highest over all nodes: those it
 * named, and when the node itself is behind, its other ranks at the node's
 * highest.
 */
static void node_laggards(struct agg_comm *out, const struct agg_node *nd, uint64_t hi)
{
	const struct fr_node_comm_progress *rec = nd->rec;
	uint64_t listed = 0;

	for (uint32_t i = 0; i < rec->nlaggards; i++)
		add_laggard(out, rec->laggards[i].rank, nd->node, rec->laggards[i].last_entered);
	out->laggards_unnamed += rec->laggards_omitted;
	if (rec->hi_entered >= hi || rec->nranks == 0)
		return;
	for (uint32_t i = 0; i < rec->nmembers; i++) {
		const struct fr_node_range *rg = &rec->members[i];

		listed += rg->count;
		for (uint32_t k = 0; k < rg->count; k++)
			if (!named_by(rec, rg->first + k))
				add_laggard(out, rg->first + k, nd->node, rec->hi_entered);
	}
	if (rec->nranks > listed)
		out->laggards_unnamed += rec->nranks - (uint32_t)listed;
}

static int by_rank(const void *a, const void *b)
{
	const struct agg_laggard *x = a, *y = b;

	return (x->rank > y->rank) - (x->rank < y->rank);
}

static int by_first(const void *a, const void *b)
{
	const struct fr_node_range *x = a, *y = b;

	return (x->first > y->first) - (x->first < y->first);
}

static bool same_group(const struct fr_node_group *g, const struct agg_group *o)
{
	return g->seq == o->seq && g->type == o->type && g->flags == o->flags;
}

/*
 * The operation holding ranks that was entered longest ago (ties: the
 * lower seq), then every node's ranks in it, their runs merged.
 */
static int oldest_group(const struct agg_node *nodes, size_t nnodes, struct agg_group *o)
{
	struct fr_node_range *all;
	size_t nall = 0, cap = 0;
	bool found = false;
	uint64_t listed = 0;

	for (size_t i = 0; i < nnodes; i++) {
		for (uint32_t j = 0; nodes[i].rec && j < nodes[i].rec->ngroups; j++) {
			const struct fr_node_group *g = &nodes[i].rec->groups[j];
			uint64_t age = g->age_ms + nodes[i].held_ms;

			if (!group_blocks(g->flags))
				continue;
			if (!found || age > o->age_ms || (age == o->age_ms && g->seq < o->seq)) {
				*o = (struct agg_group){ .seq = g->seq, .type = g->type,
							 .flags = g->flags, .age_ms = age };
				found = true;
			}
		}
	}
	if (!found)
		return 0;
	for (size_t i = 0; i < nnodes; i++)
		for (uint32_t j = 0; nodes[i].rec && j < nodes[i].rec->ngroups; j++)
			if (same_group(&nodes[i].rec->groups[j], o))
				cap += nodes[i].rec->groups[j].nranges;
	all = malloc((cap ? cap : 1) * sizeof(*all));
	if (!all)
		return -ENOMEM;
	for (size_t i = 0; i < nnodes; i++) {
		for (uint32_t j = 0; nodes[i].rec && j < nodes[i].rec->ngroups; j++) {
			const struct fr_node_group *g = &nodes[i].rec->groups[j];

			if (!same_group(g, o))
				continue;
			o->nranks += g->nranks;
			o->nnodes++;
			memcpy(all + nall, g->ranges, g->nranges * sizeof(*all));
			nall += g->nranges;
		}
	}
	qsort(all, nall, sizeof(*all), by_first);
	/* Nodes hold different ranks; a run that overlaps another is merged all the same. */
	for (size_t k = 0; k < nall; k++) {
		struct fr_node_range *last = o->nranges ? &o->ranges[o->nranges - 1] : NULL;
		uint64_t end = (uint64_t)all[k].first + all[k].count;

		if (last && all[k].first <= (uint64_t)last->first + last->count) {
			if (end > (uint64_t)last->first + last->count) {
				listed += end - ((uint64_t)last->first + last->count);
				last->count = (uint32_t)(end - last->first);
			}
		} else if (o->nranges < AGG_RANGES_MAX) {
			o->ranges[o->nranges++] = all[k];
			listed += all[k].count;
		}
	}
	free(all);
	o->ranks_unlisted = o->nranks > listed ? o->nranks - (uint32_t)listed : 0;
	return 1;
}

int aggregate_merge(const struct agg_node *nodes, size_t nnodes, struct agg_comm *out)
{
	int found;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < nnodes; i++) {
		const struct fr_node_comm_progress *rec = nodes[i].rec;

		if (!rec || rec->nranks == 0)
			continue;
		widen(&out->lo_entered, &out->hi_entered, out->nranks == 0, rec->lo_entered,
		      rec->hi_entered);
		widen(&out->lo_completed, &out->hi_completed, out->nranks == 0, rec->lo_completed,
		      rec->hi_completed);
		out->nranks += rec->nranks;
		out->nnodes++;
	}
	for (size_t i = 0; i < nnodes; i++)
		if (nodes[i].rec && nodes[i].rec->nranks)
			node_laggards(out, &nodes[i], out->hi_entered);
	qsort(out->laggards, out->nlaggards, sizeof(out->laggards[0]), by_rank);
	found = oldest_group(nodes, nnodes, &out->oldest);
	if (found < 0)
		return found;
	out->has_oldest = found;
	return 0;
}
