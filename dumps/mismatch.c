/*
 * Mismatches: ranks that called different things at one seq of a
 * collective, and a send and its receive that disagree on the message.
 */
#include "correlate_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/*
 * The earliest collective whose members' signatures differ: among those
 * some member still has in flight when `strict`, else among those every
 * member completed, compared as completed calls (fr_corr_sig_equal()). What
 * completed was matched by the library itself, so only what it cannot
 * have matched rightly counts then.
 */
uint32_t fr_corr_find_mismatch(const struct ctx *cx, bool strict)
{
	uint32_t best = NONE;

	for (size_t i = 0; i < cx->ngroups; i++) {
		const struct group *g = &cx->groups[i];
		const struct group *b;

		if (g->count < 2 || (strict ? !g->ninflight || !g->differs :
				     g->ninflight || !g->differs_loose))
			continue;
		if (best == NONE) {
			best = (uint32_t)i;
			continue;
		}
		b = &cx->groups[best];
		if (g->seq < b->seq ||
		    (g->seq == b->seq && strcmp(cx->comms[g->comm].id, cx->comms[b->comm].id) < 0))
			best = (uint32_t)i;
	}
	return best;
}

/*
 * The verdict's classes: the `n` entries of `list` (ascending by rank),
 * entry i of class cls[i], which is the index of the class's first entry;
 * each class with its signature. `ranks` and `slot` have room for n.
 */
static int classes_of(const struct ctx *cx, const struct gentry *list, const uint32_t *cls,
		      size_t n, uint32_t *ranks, uint32_t *slot, uint32_t *major,
		      struct fr_verdict *v)
{
	char head[128];
	char det[128];
	int rc;

	for (size_t i = 0; i < n; i++)
		ranks[i] = list[i].rank;
	rc = fr_corr_classes_build(v, ranks, cls, n, (uint32_t)n, slot, major);
	for (size_t k = 0; rc == 0 && k < n; k++) {
		struct fr_rank_class *c;
		struct line l;

		if (slot[k] == NONE)
			continue;
		c = &v->classes[slot[k]];
		c->op = fr_corr_op_named(cx, list[k].op);
		fr_corr_op_head(head, sizeof(head), &c->op);
		fr_corr_op_details(det, sizeof(det), &c->op);
		l = (struct line){ c->behaviour, sizeof(c->behaviour), 0 };
		fr_corr_line_add(&l, "called %s (%s)", head, det);
	}
	return rc;
}

/*
 * The verdict for the mismatched collective `gi`: the ranks whose signature
 * is not the majority's (on a tie, not the lowest rank's) are the culprits.
 * Returns 1, leaving `v` alone, when every signature is the majority's after
 * all (a derived datatype matches basic ones that differ among themselves).
 */
int fr_corr_verdict_mismatch(const struct ctx *cx, uint32_t gi, bool strict, struct fr_verdict *v)
{
	const struct group *g = &cx->groups[gi];
	const struct cinfo *c = &cx->comms[g->comm];
	struct gentry *list;
	uint32_t *cls = NULL;
	uint32_t *ccount = NULL;
	uint32_t *same = NULL;
	uint32_t *ranks = NULL;
	uint32_t *slot = NULL;
	uint32_t major;
	uint32_t ref;
	uint32_t refcount = 0;
	bool tie = false;
	size_t n = 0;
	size_t nsame = 0;
	int rc = -ENOMEM;

	list = malloc(g->count * sizeof(*list));
	cls = malloc(g->count * sizeof(*cls));
	ccount = calloc(g->count, sizeof(*ccount));
	same = malloc(g->count * sizeof(*same));
	ranks = malloc(g->count * sizeof(*ranks));
	slot = malloc(g->count * sizeof(*slot));
	if (!list || !cls || !ccount || !same || !ranks || !slot)
		goto out_free;
	/* The chain runs from the highest rank down; lay it out ascending. */
	n = g->count;
	for (uint32_t e = g->head, i = 0; e != NONE; e = cx->ents[e].next, i++)
		list[n - 1 - i] = cx->ents[e];

	for (size_t i = 0; i < n; i++) {
		uint32_t k;

		for (k = 0; k < i; k++)
			if (cls[k] == k && fr_corr_sig_equal(list[k].op, list[i].op, strict))
				break;
		cls[i] = k < i ? cls[k] : (uint32_t)i;
		ccount[cls[i]]++;
	}
	/* The majority's signature, or on a tie the lowest rank's (class 0). */
	ref = 0;
	for (size_t k = 0; k < n; k++) {
		if (ccount[k] > refcount) {
			refcount = ccount[k];
			ref = (uint32_t)k;
			tie = false;
		} else if (ccount[k] == refcount && ccount[k]) {
			tie = true;
		}
	}
	if (tie)
		ref = 0;
	if (ccount[ref] == n) {
		rc = 1;
		goto out_free;
	}

	v->kind = FR_VERDICT_MISMATCH;
	v->culprits = calloc(n - ccount[ref], sizeof(*v->culprits));
	if (!v->culprits)
		goto out_free;
	if (fr_corr_verdict_set_comm(v, c) < 0)
		goto out_free;
	v->waiting = malloc(n * sizeof(*v->waiting));
	if (!v->waiting)
		goto out_free;
	v->has_op = true;
	v->op = fr_corr_op_named(cx, list[ref].op);
	if (classes_of(cx, list, cls, n, ranks, slot, &major, v) < 0)
		goto out_free;
	for (size_t i = 0; i < n; i++) {
		const struct fr_trace *t = cx->by_rank[list[i].rank];

		if (cls[i] != ref) {
			struct fr_culprit *cu = &v->culprits[v->nculprits++];

			fr_corr_culprit_fill(cx, cu, list[i].rank, FR_REASON_MISMATCH, c->id);
			cu->has_op = true;
			cu->op = fr_corr_op_named(cx, list[i].op);
			continue;
		}
		same[nsame++] = list[i].rank;
		if (op_blocks(list[i].op) && status_good(t)) {
			uint64_t age = op_wait_ns(t, list[i].op);

			v->waiting[v->nwaiting++] = list[i].rank;
			if (ns_to_s(age) > v->waited_s)
				v->waited_s = ns_to_s(age);
		}
	}

	{
		struct line l = { v->summary, sizeof(v->summary), 0 };
		const struct fr_culprit *c0 = &v->culprits[0];
		bool one_sig = true;
		uint32_t *cr = malloc(v->nculprits * sizeof(*cr));
		char who[512];
		char det[128];
		char rt[256];

		if (!cr)
			goto out_free;
		for (size_t i = 0; i < v->nculprits; i++) {
			cr[i] = v->culprits[i].rank;
			if (!fr_corr_sig_equal(&v->culprits[i].op, &c0->op, strict))
				one_sig = false;
		}
		fr_corr_who_text(who, sizeof(who), cx, cr, v->nculprits);
		free(cr);
		/* On a tie the culprits are only those unlike the lowest rank. */
		if (tie)
			fr_corr_line_add(&l, "no majority: ");
		fr_corr_line_add(&l, "%s called ", who);
		if (one_sig) {
			fr_corr_line_add(&l, "%s #%" PRIu64, fr_op_name(c0->op.type), c0->op.seq);
			if (c0->op.type == v->op.type) {
				fr_corr_op_details(det, sizeof(det), &c0->op);
				fr_corr_line_add(&l, " (%s)", det);
			}
		} else {
			fr_corr_line_add(&l, "different operations at #%" PRIu64, v->op.seq);
		}
		fr_corr_op_details(det, sizeof(det), &v->op);
		fr_corr_line_add(&l, " on %s where %s %s called %s (%s)", c->id,
				 nsame == 1 ? "rank" : "ranks",
				 fr_corr_ranks_text(rt, sizeof(rt), same, nsame),
				 fr_op_name(v->op.type), det);
		if (!strict)
			fr_corr_line_add(&l, "; it completed all the same (no hang)");
		if (v->nwaiting) {
			fr_corr_line_add(&l, "; ");
			fr_corr_waited_text(&l, v->waiting, v->nwaiting, v->waited_s);
		}
	}
	rc = 0;
out_free:
	free(list);
	free(cls);
	free(ccount);
	free(same);
	free(ranks);
	free(slot);
	return rc;
}

/* ---- point-to-point messages that do not fit ---- */

/*
 * Whether send #k from a to b and b's receive #k from a disagree on the
 * message. NCCL (and PyTorch over it) matches a pair's messages in order
 * and a receive must take exactly what is sent: any other number of bytes
 * is a mismatch, which hangs or corrupts. MPI matches by tag as well, which
 * the evidence does not hold: the k-th send and the k-th receive may be
 * two different messages (a halo exchange posts its receives in any order),
 * so MPI pairs are not compared. A side that recorded no datatype is not
 * compared. `mpi`: either rank's library is an MPI.
 */
static bool p2p_sizes_differ(const struct p2p_pair *p, bool mpi)
{
	if (!p->send->dtype[0] || !p->recv->dtype[0])
		return false;
	if (mpi && !p->send->gpu && !p->recv->gpu)
		return false;
	return p->send->bytes != p->recv->bytes;
}

/*
 * The earliest send and matched receive that disagree (p2p_sizes_differ()):
 * in flight on either side when `inflight`, else completed on both. A
 * rank's sends to a peer are paired by seq with the peer's receives from
 * it, over the seqs both rings kept. Returns whether there is one.
 */
bool fr_corr_find_p2p_mismatch(const struct ctx *cx, bool inflight, struct p2p_pair *out)
{
	bool found = false;

	for (size_t i = 0; i < cx->nstreams; i++) {
		const struct stream *s = &cx->streams[i];
		const struct stream *r;
		uint64_t lo, hi;
		uint32_t ri;
		bool mpi;

		if (s->type != FR_OP_SEND || s->gapped || !s->n)
			continue;
		ri = fr_corr_stream_find(cx, s->ci, s->peer, s->owner, FR_OP_RECV);
		if (ri == NONE || cx->streams[ri].gapped || !cx->streams[ri].n)
			continue;
		r = &cx->streams[ri];
		mpi = fr_corr_mpi_rank(cx, s->owner) || fr_corr_mpi_rank(cx, s->peer);
		lo = s->first > r->first ? s->first : r->first;
		hi = s->first + s->n < r->first + r->n ? s->first + s->n : r->first + r->n;
		for (uint64_t k = lo; k < hi; k++) {
			struct p2p_pair p = { s->ops[k - s->first], r->ops[k - r->first], s->owner,
					      s->peer, s->ci };
			bool fl = p.send->state == FR_STATE_ENTERED ||
				  p.recv->state == FR_STATE_ENTERED;
			int c;

			if (fl != inflight || !p2p_sizes_differ(&p, mpi))
				continue;
			c = found ? strcmp(cx->comms[s->ci].id, cx->comms[out->ci].id) : -1;
			if (!found || k < out->send->seq || (k == out->send->seq && c < 0) ||
			    (k == out->send->seq && c == 0 && s->owner < out->from)) {
				*out = p;
				found = true;
			}
			break;
		}
	}
	return found;
}

/*
 * A send and its receive that disagree: no majority names one side, so
 * both ranks are culprits, each with its own operation; the verdict's op is
 * the send.
 */
int fr_corr_verdict_p2p_mismatch(const struct ctx *cx, const struct p2p_pair *p, bool inflight,
				 struct fr_verdict *v)
{
	const struct fr_op *ops[2] = { p->send, p->recv };
	const uint32_t ranks[2] = { p->from, p->to };
	struct line l = { v->summary, sizeof(v->summary), 0 };
	char head[128];
	char det[2][128];
	char who[2][256];

	v->kind = FR_VERDICT_MISMATCH;
	v->has_op = true;
	v->op = fr_corr_op_named(cx, p->send);
	if (fr_corr_verdict_set_comm(v, &cx->comms[p->ci]) < 0)
		return -ENOMEM;
	v->culprits = calloc(2, sizeof(*v->culprits));
	v->waiting = malloc(2 * sizeof(*v->waiting));
	if (!v->culprits || !v->waiting)
		return -ENOMEM;
	for (int i = 0; i < 2; i++) {
		const struct fr_trace *t = cx->by_rank[ranks[i]];
		struct fr_culprit *cu = &v->culprits[v->nculprits++];

		fr_corr_culprit_fill(cx, cu, ranks[i], FR_REASON_MISMATCH, cx->comms[p->ci].id);
		cu->has_op = true;
		cu->op = fr_corr_op_named(cx, ops[i]);
		if (op_blocks(ops[i]) && status_good(t)) {
			double w = ns_to_s(op_wait_ns(t, ops[i]));

			v->waiting[v->nwaiting++] = ranks[i];
			if (w > v->waited_s)
				v->waited_s = w;
		}
		fr_corr_who_text(who[i], sizeof(who[i]), cx, &ranks[i], 1);
		fr_corr_op_details(det[i], sizeof(det[i]), ops[i]);
	}
	qsort(v->culprits, v->nculprits, sizeof(*v->culprits), fr_corr_cmp_culprit);
	qsort(v->waiting, v->nwaiting, sizeof(*v->waiting), fr_corr_cmp_u32);
	fr_corr_op_head(head, sizeof(head), &v->op);
	fr_corr_line_add(&l, "%s on %s does not match its receive: %s sends %" PRIu64 " bytes "
			 "(%s), %s receives %" PRIu64 " bytes (%s)", head, cx->comms[p->ci].id,
			 who[0], p->send->bytes, det[0], who[1], p->recv->bytes, det[1]);
	if (!inflight)
		fr_corr_line_add(&l, "; it completed all the same (no hang)");
	if (v->nwaiting) {
		fr_corr_line_add(&l, "; ");
		fr_corr_waited_text(&l, v->waiting, v->nwaiting, v->waited_s);
	}
	return 0;
}
