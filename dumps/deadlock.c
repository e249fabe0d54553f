/*
 * Deadlocks: every rank that blocks the best explanation of a hang waits
 * itself, so the "waits for" edges are followed until they close a cycle,
 * and the ranks of the cycle are the culprits.
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
 * starting at its lowest rank, with the candidate each rank waits in.
 */
static int find_cycle(struct ctx *cx, uint32_t start, uint32_t **cycle_out,
		      const struct cand ***hop_out, size_t *n_out)
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
	cycle = NULL;
	hop = NULL;
out_free:
	free(cycle);
	free(hop);
	free(best);
	free(pos);
	free(path);
	free(w);
	return rc;
}

int fr_corr_verdict_deadlock(struct ctx *cx, const struct cand *k, struct fr_verdict *v)
{
	uint32_t *cycle = NULL;
	const struct cand **hop = NULL;
	uint32_t *w = malloc(cx->world * sizeof(*w));
	size_t n = 0;
	int rc;

	if (!w)
		return -ENOMEM;
	fr_corr_cand_waiters(cx, k, w);
	rc = find_cycle(cx, w[0], &cycle, &hop, &n);
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
	v->op = fr_corr_op_named(cx, hop[0]->op);
	rc = fr_corr_verdict_set_comm(v, &cx->comms[hop[0]->comm]);
	if (rc < 0)
		goto out_free;
	v->culprits = calloc(n, sizeof(*v->culprits));
	if (!v->culprits) {
		rc = -ENOMEM;
		goto out_free;
	}
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
	qsort(v->culprits, v->nculprits, sizeof(*v->culprits), fr_corr_cmp_culprit);
out_free:
	free(cycle);
	free(hop);
	return rc;
}
