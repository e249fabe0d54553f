/*
 * Deadlocks: every rank that blocks the best explanation of a hang waits
 * itself, so the "waits for" edges are followed until they close a cycle.
 * A cycle of collectives (communicators whose collectives ranks called in
 * different orders) groups every rank that waits in one of its collectives
 * by which one: the classes smaller than the largest are the culprits, the
 * odd ones out, and the largest is what the others did. Any other cycle
 * (one with a p2p wait) names the ranks of the cycle.
 */
#include "correlate_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Ranks of a cycle spelled out in a deadlock summary. */
#define SUMMARY_CYCLE_MAX 6

static void summary_deadlock(const struct ctx *cx, struct fr_verdict *v, const uint32_t *cycle,
			     const struct cand *const *hop, size_t n)
{
	struct line l = { v->summary, sizeof(v->summary), 0 };
	char head[128];

	fr_corr_line_add(&l, "deadlock: ");
	for (size_t i = 0; i < n && i < SUMMARY_CYCLE_MAX; i++) {
		const struct cand *k = hop[i];
		struct fr_op named = fr_corr_op_named(cx, k->op);

		fr_corr_op_head(head, sizeof(head), &named);
		fr_corr_line_add(&l, "%srank %" PRIu32 " waits in %s on %s", i ? "; " : "",
				 cycle[i], head, k->comm_id);
		/* A p2p op names its peer already. */
		if (k->group != NONE)
			fr_corr_line_add(&l, " for rank %" PRIu32, cycle[(i + 1) % n]);
	}
	if (n > SUMMARY_CYCLE_MAX)
		fr_corr_line_add(&l, "; ... (%zu ranks in the cycle)", n);
}

/*
 * Follows "waits for" edges from `start` until a rank repeats. Each rank's
 * edge is its best candidate's lowest waiting blocker. Returns the cycle's
 * length (0 when the walk ends at a rank with no edge) and writes the cycle,
 * starting at its lowest rank, with the candidate each rank waits in, and
 * every rank's best candidate (NULL where it waits in none), all three
 * allocated.
 */
static int find_cycle(struct ctx *cx, uint32_t start, uint32_t **cycle_out,
		      const struct cand ***hop_out, const struct cand ***best_out, size_t *n_out)
{
	const struct cand **best = calloc(cx->world, sizeof(*best));
	uint32_t *pos = malloc(cx->world * sizeof(*pos));
	uint32_t *path = malloc(cx->world * sizeof(*path));
	uint32_t *w = malloc(cx->world * sizeof(*w));
	uint32_t *cycle = NULL;
	const struct cand **hop = NULL;
	size_t len = 0;
	size_t at;
	uint32_t cur;
	int rc = -ENOMEM;

	*n_out = 0;
	if (!best || !pos || !path || !w)
		goto out_free;
	for (size_t i = 0; i < cx->ncands; i++) {
		const struct cand *k = &cx->cands[i];
		size_t nw;

		if (!k->nb)
			continue;
		nw = fr_corr_cand_waiters(cx, k, w);
		for (size_t j = 0; j < nw; j++)
			if (!best[w[j]] || fr_corr_cand_cmp(k, best[w[j]]) < 0)
				best[w[j]] = k;
	}
	memset(pos, 0xff, cx->world * sizeof(*pos));
	rc = 0;
	for (cur = start; pos[cur] == NONE;) {
		const struct cand *k = best[cur];
		uint32_t next = NONE;

		pos[cur] = (uint32_t)len;
		path[len++] = cur;
		if (!k)
			goto out_free;
		for (size_t i = k->boff; i < k->boff + k->nb; i++)
			if (cx->blk[i].waits && (next == NONE || cx->blk[i].rank < next))
				next = cx->blk[i].rank;
		if (next == NONE)
			goto out_free;
		cur = next;
	}
	at = pos[cur];
	{
		size_t n = len - at;
		size_t low = 0;

		cycle = malloc(n * sizeof(*cycle));
		hop = malloc(n * sizeof(*hop));
		if (!cycle || !hop) {
			rc = -ENOMEM;
			goto out_free;
		}
		for (size_t i = 1; i < n; i++)
			if (path[at + i] < path[at + low])
				low = i;
		for (size_t i = 0; i < n; i++) {
			cycle[i] = path[at + (low + i) % n];
			hop[i] = best[cycle[i]];
		}
		*n_out = n;
	}
	*cycle_out = cycle;
	*hop_out = hop;
	*best_out = best;
	cycle = NULL;
	hop = NULL;
	best = NULL;
out_free:
	free(cycle);
	free(hop);
	free(best);
	free(pos);
	free(path);
	free(w);
	return rc;
}

/* The ranks of the cycle, each with what it waits in: a cycle with a p2p wait. */
static int culprits_of_cycle(struct ctx *cx, const uint32_t *cycle,
			     const struct cand *const *hop, size_t n, struct fr_verdict *v)
{
	v->op = fr_corr_op_named(cx, hop[0]->op);
	if (fr_corr_verdict_set_comm(v, &cx->comms[hop[0]->comm]) < 0)
		return -ENOMEM;
	v->culprits = calloc(n, sizeof(*v->culprits));
	if (!v->culprits)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct fr_culprit *cu = &v->culprits[v->nculprits++];
		const struct fr_op *o = hop[i]->op;

		fr_corr_culprit_fill(cx, cu, cycle[i], FR_REASON_NOT_ENTERED, hop[i]->comm_id);
		/* What the rank waits in instead: its own op of that stuck op. */
		if (hop[i]->group != NONE) {
			for (uint32_t e = cx->groups[hop[i]->group].head; e != NONE;
			     e = cx->ents[e].next)
				if (cx->ents[e].rank == cycle[i])
					o = cx->ents[e].op;
		}
		cu->has_op = true;
		cu->op = fr_corr_op_named(cx, o);
	}
	summary_deadlock(cx, v, cycle, hop, n);
	return 0;
}

/* "called b then a": a class's behaviour, short, beside the odd ones'. */
static void class_short(char *buf, size_t cap, const struct fr_rank_class *c)
{
	if (c->has_before && strcmp(c->op.comm, c->before.comm) != 0)
		snprintf(buf, cap, "called %s then %s", c->op.comm, c->before.comm);
	else
		snprintf(buf, cap, "%s", c->behaviour);
}

/*
 * "deadlock: rank 1 (node1, pid 1001) called all_reduce #3 on b before
 * all_reduce #3 on a; ranks 0,2-3 called a then b; ...", or on a tie
 * "deadlock, no majority: ranks 0-1 called ...; ranks 2-3 called b then a".
 */
static void summary_classes(const struct ctx *cx, struct fr_verdict *v, bool majority)
{
	struct line l = { v->summary, sizeof(v->summary), 0 };
	const struct fr_rank_class *major = NULL;
	char who[512];
	char what[256];
	size_t said = 0;

	fr_corr_line_add(&l, "deadlock%s: ", majority ? "" : ", no majority");
	for (size_t i = 0; i < v->nclasses; i++) {
		const struct fr_rank_class *c = &v->classes[i];

		if (c->majority) {
			major = c;
			continue;
		}
		/* The first class in full, the others beside it in short. */
		fr_corr_who_text(who, sizeof(who), cx, c->ranks, c->nranks);
		if (said)
			class_short(what, sizeof(what), c);
		fr_corr_line_add(&l, "%s%s %s", said ? "; " : "", who, said ? what : c->behaviour);
		said++;
	}
	if (major) {
		class_short(what, sizeof(what), major);
		fr_corr_line_add(&l, "; %s %s %s", major->nranks == 1 ? "rank" : "ranks",
				 fr_corr_ranks_text(who, sizeof(who), major->ranks, major->nranks),
				 what);
	}
	fr_corr_line_add(&l, "; ");
	fr_corr_waited_text(&l, v->waiting, v->nwaiting, v->waited_s);
}

/*
 * What class `i` (the ranks waiting in hop[i]) did. The previous hop's
 * blockers are the members of its collective that never entered it; when
 * every rank of the class is one, the class called hop[i] before it.
 */
static void class_describe(struct ctx *cx, const uint32_t *cls, const struct cand *const *hop,
			   size_t n, uint32_t i, struct fr_rank_class *c, uint32_t size)
{
	const struct cand *prev = hop[(i + n - 1) % n];
	struct line l = { c->behaviour, sizeof(c->behaviour), 0 };
	uint32_t blocking = 0;
	char head[128];
	char other[128];

	c->op = fr_corr_op_named(cx, hop[i]->op);
	for (size_t b = prev->boff; b < prev->boff + prev->nb; b++)
		if (cls[cx->blk[b].rank] == i)
			blocking++;
	fr_corr_op_head(head, sizeof(head), &c->op);
	if (n > 1 && blocking == size) {
		c->has_before = true;
		c->before = fr_corr_op_named(cx, prev->op);
		fr_corr_op_head(other, sizeof(other), &c->before);
		fr_corr_line_add(&l, "called %s on %s before %s on %s", head, c->op.comm, other,
				 c->before.comm);
	} else {
		fr_corr_line_add(&l, "entered %s on %s", head, c->op.comm);
	}
}

/*
 * A cycle of collectives: every rank whose best explanation is one of the
 * cycle's collectives is of that one's class (`best` from find_cycle()).
 * The culprits are the ranks outside the majority, or on a tie every rank
 * classed, each with its own entry of the collective it waits in; the
 * verdict's op is the one the majority waits in.
 */
static int culprits_by_class(struct ctx *cx, const struct cand *const *best,
			     const struct cand *const *hop, size_t n, struct fr_verdict *v)
{
	uint32_t *hop_of = malloc((cx->ncands ? cx->ncands : 1) * sizeof(*hop_of));
	uint32_t *cls = malloc(cx->world * sizeof(*cls));
	uint32_t *ranks = malloc(cx->world * sizeof(*ranks));
	uint32_t *rcls = malloc(cx->world * sizeof(*rcls));
	uint32_t *size = calloc(n, sizeof(*size));
	uint32_t *slot = malloc(n * sizeof(*slot));
	const struct cand *op_of;
	uint32_t major;
	size_t nr = 0;
	size_t nculprits = 0;
	int rc = -ENOMEM;

	if (!hop_of || !cls || !ranks || !rcls || !size || !slot)
		goto out_free;
	memset(hop_of, 0xff, (cx->ncands ? cx->ncands : 1) * sizeof(*hop_of));
	for (size_t i = 0; i < n; i++)
		hop_of[hop[i] - cx->cands] = (uint32_t)i;
	for (uint32_t r = 0; r < cx->world; r++) {
		cls[r] = best[r] ? hop_of[best[r] - cx->cands] : NONE;
		if (cls[r] == NONE)
			continue;
		ranks[nr] = r;
		rcls[nr++] = cls[r];
		size[cls[r]]++;
	}
	rc = fr_corr_classes_build(v, ranks, rcls, nr, (uint32_t)n, slot, &major);
	if (rc < 0)
		goto out_free;
	for (uint32_t i = 0; i < n; i++)
		if (slot[i] != NONE)
			class_describe(cx, cls, hop, n, i, &v->classes[slot[i]], size[i]);

	op_of = hop[major != NONE ? major : 0];
	v->op = fr_corr_op_named(cx, op_of->op);
	rc = -ENOMEM;
	if (fr_corr_verdict_set_comm(v, &cx->comms[op_of->comm]) < 0)
		goto out_free;
	for (uint32_t i = 0; i < n; i++)
		if (i != major)
			nculprits += size[i];
	v->culprits = calloc(nculprits ? nculprits : 1, sizeof(*v->culprits));
	if (!v->culprits)
		goto out_free;
	/* Each culprit's own entry of what it waits in; one walk per collective. */
	for (uint32_t i = 0; i < n; i++) {
		if (i == major)
			continue;
		for (uint32_t e = cx->groups[hop[i]->group].head; e != NONE;
		     e = cx->ents[e].next) {
			const struct gentry *en = &cx->ents[e];
			struct fr_culprit *cu;

			if (cls[en->rank] != i || !op_blocks(en->op) ||
			    v->nculprits == nculprits)
				continue;
			/* Once named, a rank is not named again for another entry. */
			cls[en->rank] = NONE;
			cu = &v->culprits[v->nculprits++];
			fr_corr_culprit_fill(cx, cu, en->rank, FR_REASON_NOT_ENTERED,
					     hop[i]->comm_id);
			cu->has_op = true;
			cu->op = fr_corr_op_named(cx, en->op);
		}
	}
	summary_classes(cx, v, major != NONE);
	rc = 0;
out_free:
	free(hop_of);
	free(cls);
	free(ranks);
	free(rcls);
	free(size);
	free(slot);
	return rc;
}

/* Whether every wait of the cycle is in a collective. */
static bool cycle_of_collectives(const struct cand *const *hop, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (hop[i]->group == NONE)
			return false;
	return true;
}

int fr_corr_verdict_deadlock(struct ctx *cx, const struct cand *k, struct fr_verdict *v)
{
	uint32_t *cycle = NULL;
	const struct cand **hop = NULL;
	const struct cand **best = NULL;
	uint32_t *w = malloc(cx->world * sizeof(*w));
	size_t n = 0;
	int rc;

	if (!w)
		return -ENOMEM;
	fr_corr_cand_waiters(cx, k, w);
	rc = find_cycle(cx, w[0], &cycle, &hop, &best, &n);
	free(w);
	if (rc < 0)
		return rc;
	if (!n) {
		/* Not expected (every waiter then has an edge); say what is stuck. */
		struct cand k2 = *k;

		k2.cls = 1;
		k2.nb = 0;
		return fr_corr_verdict_from_cand(cx, &k2, v);
	}
	v->kind = FR_VERDICT_DEADLOCK;
	v->has_op = true;
	if (cycle_of_collectives(hop, n))
		rc = culprits_by_class(cx, best, hop, n, v);
	else
		rc = culprits_of_cycle(cx, cycle, hop, n, v);
	if (rc == 0)
		qsort(v->culprits, v->nculprits, sizeof(*v->culprits), fr_corr_cmp_culprit);
	free(cycle);
	free(hop);
	free(best);
	return rc;
}
