/*
 * Hangs: every stuck operation (a collective some running rank waits in, or
 * one rank's p2p operation) is a candidate, with the ranks it waits for as
 * blockers; the best candidate (correlate.h's order: a sink first) is the
 * verdict, unless its blockers all wait themselves (deadlock.c).
 */
#include "correlate_int.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int add_blocker(struct ctx *cx, uint32_t rank, enum blocker_kind kind)
{
	struct blocker *b;

	if (grow_array((void **)&cx->blk, &cx->blk_cap, cx->nblk + 1, sizeof(*b)) < 0)
		return -ENOMEM;
	b = &cx->blk[cx->nblk++];
	b->rank = rank;
	b->kind = (uint8_t)kind;
	b->waits = kind == BK_NOT_ENTERED && cx->waits[rank];
	b->behind = false;
	return 0;
}

/* Unless a rank runs normally, why it cannot take part; -1 when it can. */
static int bad_kind(const struct fr_trace *t)
{
	if (!t)
		return BK_MISSING;
	switch (t->status) {
	case FR_RANK_MISSING:
		return BK_MISSING;
	case FR_RANK_UNRESPONSIVE:
		return BK_UNRESPONSIVE;
	case FR_RANK_DISCONNECTED:
		return BK_DISCONNECTED;
	case FR_RANK_FINISHED:
		return BK_FINISHED;
	default:
		return -1;
	}
}

static enum fr_reason kind_reason(int kind)
{
	switch (kind) {
	case BK_DISCONNECTED:
		return FR_REASON_DISCONNECTED;
	case BK_FINISHED:
		return FR_REASON_FINISHED;
	case BK_UNRESPONSIVE:
	case BK_MISSING:
		return FR_REASON_UNRESPONSIVE;
	default:
		return FR_REASON_NOT_ENTERED;
	}
}

static void cand_classify(struct ctx *cx, struct cand *k)
{
	bool sink = false;
	bool waiting = false;

	k->nb = cx->nblk - k->boff;
	for (size_t i = k->boff; i < cx->nblk; i++) {
		if (cx->blk[i].kind != BK_NOT_ENTERED)
			k->bad = true;
		if (cx->blk[i].waits)
			waiting = true;
		else
			sink = true;
	}
	k->pure = sink && !waiting;
	k->cls = sink ? 0 : k->nb == 0 ? 1 : 2;
}

static struct cand *cand_new(struct ctx *cx)
{
	struct cand *k;

	if (grow_array((void **)&cx->cands, &cx->cands_cap, cx->ncands + 1, sizeof(*k)) < 0)
		return NULL;
	k = &cx->cands[cx->ncands++];
	memset(k, 0, sizeof(*k));
	k->boff = cx->nblk;
	k->group = NONE;
	k->partner = NONE;
	return k;
}

/*
 * How far member `m` (member i of communicator ci; i NONE when not known)
 * got in ci's collectives: the seq its own view of ci says it entered last,
 * or the newest collective of ci its ring kept when that is later (a writer
 * without progress counters). A member whose ring kept nothing as old as a
 * collective has entered it all the same.
 */
static uint64_t member_reached(const struct ctx *cx, uint32_t ci, uint32_t i, uint32_t m)
{
	const struct cinfo *c = &cx->comms[ci];
	const struct rcomm *w = fr_corr_rank_window(cx, m, ci);
	const struct fr_comm *fc = NULL;
	uint64_t seq = w ? w->last : 0;

	if (i < c->n && c->ent)
		fc = c->ent[i];
	if (!fc && cx->by_rank[m])
		fc = fr_trace_comm(cx->by_rank[m], c->id);
	if (fc && fc->last_entered > seq)
		seq = fc->last_entered;
	return seq;
}

/* A collective (comm, seq) that some running rank has in flight. */
static int cand_collective(struct ctx *cx, uint32_t gi)
{
	const struct group *g = &cx->groups[gi];
	const struct cinfo *c = &cx->comms[g->comm];
	uint32_t stamp = gi + 1;
	struct cand *k;

	/* Stuck only when a rank that still runs waits in it. */
	if (!g->nblocking)
		return 0;
	k = cand_new(cx);
	if (!k)
		return -ENOMEM;
	k->group = gi;
	k->comm = g->comm;
	k->comm_id = c->id;
	for (uint32_t e = g->head; e != NONE; e = cx->ents[e].next) {
		const struct gentry *en = &cx->ents[e];
		const struct fr_trace *t = cx->by_rank[en->rank];

		/* A rank that only posted it has entered it all the same. */
		cx->mark[en->rank] = stamp;
		if (!op_blocks(en->op) || !status_good(t))
			continue;
		/* The chain is descending: the last in-flight one is the lowest rank. */
		k->op = en->op;
		k->owner = en->rank;
		if (op_wait_ns(t, en->op) > k->wait_ns)
			k->wait_ns = op_wait_ns(t, en->op);
	}
	for (uint32_t i = 0; i < c->n + c->nextra; i++) {
		uint32_t m = cinfo_member(c, i);
		const struct fr_trace *t;
		int bad;
		int rc = 0;

		/* A member no trace names cannot be checked; the summary says
		 * how many there are. */
		if (m >= cx->world)
			continue;
		t = cx->by_rank[m];
		bad = bad_kind(t);
		if (bad >= 0)
			rc = add_blocker(cx, m, (enum blocker_kind)bad);
		else if (cx->mark[m] == stamp)
			continue;
		else if (member_reached(cx, g->comm, i, m) >= g->seq)
			continue;
		else
			rc = add_blocker(cx, m, BK_NOT_ENTERED);
		if (rc < 0)
			return rc;
	}
	cand_classify(cx, k);
	return 0;
}

/*
 * Whether p2p `o` is addressed to `rank`, when no evidence names the global
 * rank it is addressed to: `rank`'s own view of the communicator still
 * tells its rank in it.
 */
static bool unnamed_is(const struct ctx *cx, const struct fr_op *o, uint32_t rank)
{
	const struct fr_comm *fc = fr_trace_comm(cx->by_rank[rank], o->comm);

	return fc && fc->rank == (uint32_t)o->peer_in_comm;
}

/* Whether `peer` has in flight the counterpart of `rank`'s p2p `op`. */
static bool p2p_matched(const struct ctx *cx, uint32_t rank, const struct fr_op *op,
			uint32_t peer)
{
	for (uint32_t i = 0; i < cx->infl_n[peer]; i++) {
		const struct fr_op *o = cx->inflight[cx->infl_off[peer] + i];
		int32_t to;

		if (!is_p2p(o) || strcmp(o->comm, op->comm) != 0)
			continue;
		to = fr_corr_op_peer(cx, o);
		if (to >= 0 && (uint32_t)to != rank)
			continue;
		/* Addressed to one member no evidence names: perhaps `rank`. */
		if (to < 0 && o->peer_in_comm >= 0 && !unnamed_is(cx, o, rank))
			continue;
		if (to < 0 && o->peer_in_comm < 0 && o->type != FR_OP_RECV)
			continue;
		if (op->type == FR_OP_SEND && o->type == FR_OP_SEND)
			continue;
		if (op->type == FR_OP_RECV && o->type == FR_OP_RECV)
			continue;
		return true;
	}
	return false;
}

/*
 * A receive from any source waits for any member of its communicator, so
 * the members that could send (those not waiting themselves, or that cannot
 * run: unresponsive, gone, missing) are its blockers. When every other
 * member waits, none is added and the receive itself is what is stuck.
 */
static int any_source_blockers(struct ctx *cx, uint32_t rank, const struct cinfo *c)
{
	for (uint32_t i = 0; i < c->n + c->nextra; i++) {
		uint32_t m = cinfo_member(c, i);
		int bad;
		int rc;

		if (m >= cx->world || m == rank)
			continue;
		bad = bad_kind(cx->by_rank[m]);
		if (bad >= 0)
			rc = add_blocker(cx, m, (enum blocker_kind)bad);
		else if (!cx->waits[m])
			rc = add_blocker(cx, m, BK_NOT_ENTERED);
		else
			continue;
		if (rc < 0)
			return rc;
	}
	return 0;
}

/*
 * How far `b` got with the p2p operations that match `a`'s `op`: the
 * highest seq among b's receives from a on op's communicator when op is a
 * send, among its sends to a when op is a receive (counted per peer and
 * direction, so b's receive #k from a matches a's send #k to b), whether
 * completed or not; 0 when b's evidence holds none. False when op is
 * neither a send nor a receive: no count to compare then.
 */
static bool p2p_reached(const struct ctx *cx, uint32_t b, uint32_t a, const struct fr_op *op,
			uint64_t *reached)
{
	const struct fr_trace *t = cx->by_rank[b];
	enum fr_op_type want;

	if (op->type == FR_OP_SEND)
		want = FR_OP_RECV;
	else if (op->type == FR_OP_RECV)
		want = FR_OP_SEND;
	else
		return false;
	*reached = 0;
	for (size_t j = 0; t && j < t->nops; j++) {
		const struct fr_op *o = &t->ops[j];

		if (o->type != want || strcmp(o->comm, op->comm) != 0 ||
		    fr_corr_op_peer(cx, o) != (int32_t)a)
			continue;
		if (o->seq > *reached)
			*reached = o->seq;
	}
	return true;
}

/* Whether `m`, a member of group `gi`'s communicator, entered that collective. */
static bool member_entered(struct ctx *cx, uint32_t gi, uint32_t m)
{
	const struct group *g = &cx->groups[gi];

	if (cx->mark[m] == gi + 1)
		return true;
	return member_reached(cx, g->comm, NONE, m) >= g->seq;
}

/*
 * Whether `a` is the one member of collective group `gi` that has not
 * entered it, every other member (each named by some evidence) having
 * entered it and still running.
 */
static bool only_missing(struct ctx *cx, uint32_t gi, uint32_t a)
{
	const struct cinfo *c = &cx->comms[cx->groups[gi].comm];
	bool member = false;

	/* Stamps mean "has an entry in group stamp - 1", as in cand_collective(). */
	for (uint32_t e = cx->groups[gi].head; e != NONE; e = cx->ents[e].next)
		cx->mark[cx->ents[e].rank] = gi + 1;
	for (uint32_t i = 0; i < c->n + c->nextra; i++) {
		uint32_t m = cinfo_member(c, i);

		/* A member no evidence names may be missing as well. */
		if (m >= cx->world)
			return false;
		if (m == a) {
			if (member_entered(cx, gi, m))
				return false;
			member = true;
		} else if (bad_kind(cx->by_rank[m]) >= 0 || !member_entered(cx, gi, m)) {
			return false;
		}
	}
	return member;
}

/*
 * Whether everything that holds `b` up is a collective that `a` alone has
 * not entered: then b waits on a, and on nobody else.
 */
static bool waits_only_on(struct ctx *cx, uint32_t b, uint32_t a)
{
	bool any = false;

	for (uint32_t i = 0; i < cx->infl_n[b]; i++) {
		const struct fr_op *o = cx->inflight[cx->infl_off[b] + i];
		uint32_t ci, gi;

		if (!op_blocks(o))
			continue;
		if (is_p2p(o))
			return false;
		ci = fr_corr_comm_find(cx, o->comm);
		gi = ci == NONE ? NONE : fr_corr_group_find(cx, ci, o->seq);
		if (gi == NONE || !only_missing(cx, gi, a))
			return false;
		any = true;
	}
	return any;
}

/*
 * Rank `owner` waits in p2p `op`, whose peer `b` (blocker `bl`) never
 * posted the matching operation and waits itself. When b's count of
 * operations matching owner's is behind op's seq, and b waits only in
 * collectives that owner alone has not entered, the two wait on each
 * other; but b is the one out of step: it went on to a collective without
 * posting its part of an exchange its partner had already posted, while
 * owner, held in that exchange, cannot reach the collective. (The other
 * members did reach it, as owner would have.) b is then the root cause,
 * not half of a deadlock. A cycle of p2p waits alone, or of collectives
 * alone, has no such side and stays a deadlock.
 */
static void p2p_behind(struct ctx *cx, uint32_t owner, const struct fr_op *op,
		       struct blocker *bl)
{
	uint64_t reached;

	if (!bl->waits || !p2p_reached(cx, bl->rank, owner, op, &reached) ||
	    reached >= op->seq || !waits_only_on(cx, bl->rank, owner))
		return;
	bl->waits = false;
	bl->behind = true;
}

/* One running rank's p2p op in flight; its peer is what it waits for. */
static int cand_p2p(struct ctx *cx, uint32_t rank, const struct fr_op *op)
{
	const struct fr_trace *t = cx->by_rank[rank];
	struct cand *k = cand_new(cx);
	int32_t to = fr_corr_op_peer(cx, op);
	uint32_t ci;

	if (!k)
		return -ENOMEM;
	ci = fr_corr_comm_intern(cx, op->comm);
	if (ci == NONE)
		return -ENOMEM;
	k->comm = ci;
	k->comm_id = cx->comms[ci].id;
	k->op = op;
	k->owner = rank;
	k->wait_ns = op_wait_ns(t, op);
	if (to < 0 && op->peer_in_comm >= 0) {
		/* Addressed to one member no evidence names: it waits on
		 * nobody known (and not on anyone, as from any source). */
	} else if (to < 0) {
		int rc = any_source_blockers(cx, rank, &cx->comms[ci]);

		if (rc < 0)
			return rc;
	} else if ((uint32_t)to < cx->world && (uint32_t)to != rank) {
		uint32_t p = (uint32_t)to;
		int bad = bad_kind(cx->by_rank[p]);
		int rc = 0;

		if (bad >= 0) {
			rc = add_blocker(cx, p, (enum blocker_kind)bad);
		} else if (p2p_matched(cx, rank, op, p)) {
			k->partner = p;
		} else {
			rc = add_blocker(cx, p, BK_NOT_ENTERED);
			if (rc == 0)
				p2p_behind(cx, rank, op, &cx->blk[cx->nblk - 1]);
		}
		if (rc < 0)
			return rc;
	}
	cand_classify(cx, k);
	return 0;
}

/* Negative when `a` is the better explanation of the hang. */
int fr_corr_cand_cmp(const struct cand *a, const struct cand *b)
{
	int c;

	if (a->cls != b->cls)
		return a->cls - b->cls;
	if (a->bad != b->bad)
		return a->bad ? -1 : 1;
	if (a->pure != b->pure)
		return a->pure ? -1 : 1;
	if (a->wait_ns != b->wait_ns)
		return a->wait_ns > b->wait_ns ? -1 : 1;
	c = strcmp(a->comm_id, b->comm_id);
	if (c)
		return c;
	if (a->op->seq != b->op->seq)
		return a->op->seq < b->op->seq ? -1 : 1;
	if ((a->group == NONE) != (b->group == NONE))
		return a->group == NONE ? 1 : -1;
	return a->owner < b->owner ? -1 : a->owner > b->owner;
}

/* The ranks that wait in candidate `k`, ascending; returns how many. */
size_t fr_corr_cand_waiters(const struct ctx *cx, const struct cand *k, uint32_t *out)
{
	size_t n = 0;

	if (k->group == NONE) {
		out[0] = k->owner;
		return 1;
	}
	for (uint32_t e = cx->groups[k->group].head; e != NONE; e = cx->ents[e].next) {
		const struct gentry *en = &cx->ents[e];

		if (op_blocks(en->op) && status_good(cx->by_rank[en->rank]))
			out[n++] = en->rank;
	}
	/* Entries chain from the highest rank down. */
	for (size_t i = 0; i < n / 2; i++) {
		uint32_t x = out[i];

		out[i] = out[n - 1 - i];
		out[n - 1 - i] = x;
	}
	return n;
}

/* The latest op a rank has in flight, for a culprit's "called" evidence. */
static const struct fr_op *latest_inflight(const struct ctx *cx, uint32_t r)
{
	if (!cx->infl_n[r])
		return NULL;
	return cx->inflight[cx->infl_off[r] + cx->infl_n[r] - 1];
}

static const char *kind_phrase(int kind, bool plural)
{
	switch (kind) {
	case BK_UNRESPONSIVE:
		return plural ? "are unresponsive (stopped heartbeating)" :
				"is unresponsive (stopped heartbeating)";
	case BK_MISSING:
		return "sent no evidence (no dump, no live view)";
	case BK_DISCONNECTED:
		return "disconnected without finalising";
	case BK_FINISHED:
		return "finalised";
	default:
		return "never entered";
	}
}

/* How many of the verdict's communicator members are known. */
static uint32_t comm_ranks_known(const struct fr_verdict *v)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < v->comm_size; i++)
		if (v->comm_ranks[i] != FR_RANK_UNKNOWN)
			n++;
	return n;
}

/*
 * For a culprit behind in an exchange (p2p_behind()): how far it got in it,
 * and where it waits instead. "(its last receive from rank 0 is #3) and
 * waits instead in all_reduce #4, which rank 0, held in its send, has not
 * entered".
 */
static void summary_behind(const struct ctx *cx, const struct cand *k,
			   const struct fr_verdict *v, struct line *l)
{
	const struct fr_culprit *cu = &v->culprits[0];
	bool behind = false;
	uint64_t reached;
	char head[128];

	for (size_t i = k->boff; i < k->boff + k->nb; i++)
		if (cx->blk[i].rank == cu->rank && cx->blk[i].behind)
			behind = true;
	if (!behind || v->nculprits != 1)
		return;
	if (p2p_reached(cx, cu->rank, k->owner, k->op, &reached) && reached)
		fr_corr_line_add(l, " (its last %s rank %" PRIu32 " is #%" PRIu64 ")",
				 k->op->type == FR_OP_SEND ? "receive from" : "send to", k->owner,
				 reached);
	if (!cu->has_op)
		return;
	fr_corr_op_head(head, sizeof(head), &cu->op);
	fr_corr_line_add(l, " and waits instead in %s, which rank %" PRIu32 ", held in its %s, "
			 "has not entered", head, k->owner, fr_op_name(k->op->type));
}

static void summary_hang(const struct ctx *cx, const struct cand *k, struct fr_verdict *v,
			 const uint32_t *opw, size_t nopw)
{
	struct line l = { v->summary, sizeof(v->summary), 0 };
	uint32_t *r = malloc((v->nculprits ? v->nculprits : 1) * sizeof(*r));
	char where[512];
	char who[512];
	char rt[256];

	if (!r) {
		snprintf(v->summary, sizeof(v->summary), "hang (out of memory describing it)");
		return;
	}
	fr_corr_where_text(where, sizeof(where), v);
	if (!v->nculprits) {
		/* Only when the evidence names no member that could be at fault. */
		fr_corr_line_add(&l, "%s does not complete; ", where);
		fr_corr_waited_text(&l, v->waiting, v->nwaiting, v->waited_s);
		goto out;
	}
	if (v->culprits[0].reason == FR_REASON_STUCK_IN_OP) {
		if (k->group != NONE)
			fr_corr_line_add(&l, "every %smember %s %s and it does not complete%s",
					 comm_ranks_known(v) < v->comm_size ? "known " : "",
					 v->op.gpu ? "enqueued" : "entered", where,
					 v->op.gpu ? " on the GPU" : "");
		else if (k->partner != NONE)
			fr_corr_line_add(&l, "ranks %" PRIu32 " and %" PRIu32 " both posted %s "
					 "and it does not complete", k->owner, k->partner, where);
		else if (peer_unnamed(&v->op))
			fr_corr_line_add(&l, "rank %" PRIu32 " waits in %s; no evidence names "
					 "that rank, so whether it posted the matching %s is not "
					 "known", k->owner, where,
					 v->op.type == FR_OP_SEND ? "receive" :
					 v->op.type == FR_OP_RECV ? "send" : "operation");
		else
			fr_corr_line_add(&l, "rank %" PRIu32 " waits in %s and no rank is known to "
					 "match it", k->owner, where);
		fr_corr_line_add(&l, "; ");
		fr_corr_waited_text(&l, v->waiting, v->nwaiting, v->waited_s);
		goto out;
	}
	if (v->culprits[0].reason == FR_REASON_NOT_ENTERED) {
		for (size_t i = 0; i < v->nculprits; i++)
			r[i] = v->culprits[i].rank;
		fr_corr_who_text(who, sizeof(who), cx, r, v->nculprits);
		if (k->group != NONE)
			fr_corr_line_add(&l, "%s never entered %s", who, where);
		else
			fr_corr_line_add(&l, "%s never posted the %s matching rank %" PRIu32
					 "'s %s", who, v->op.type == FR_OP_SEND ? "receive" :
					 v->op.type == FR_OP_RECV ? "send" : "operation", k->owner,
					 where);
		if (k->group == NONE)
			summary_behind(cx, k, v, &l);
		fr_corr_line_add(&l, "; ");
		fr_corr_waited_text(&l, v->waiting, v->nwaiting, v->waited_s);
		goto out;
	}
	/* Bad-status culprits, grouped by what became of them. */
	{
		bool first = true;
		char d[32];

		for (int kind = BK_UNRESPONSIVE; kind <= BK_FINISHED; kind++) {
			size_t n = 0;

			for (size_t i = 0; i < v->nculprits; i++)
				if (bad_kind(cx->by_rank[v->culprits[i].rank]) == kind)
					r[n++] = v->culprits[i].rank;
			if (!n)
				continue;
			fr_corr_who_text(who, sizeof(who), cx, r, n);
			fr_corr_line_add(&l, "%s%s %s", first ? "" : " and ", who,
					 kind_phrase(kind, n > 1));
			first = false;
		}
		fr_corr_duration_text(d, sizeof(d), v->waited_s);
		fr_corr_line_add(&l, " while %s %s %s in %s (longest wait %s)",
				 nopw == 1 ? "rank" : "ranks",
				 fr_corr_ranks_text(rt, sizeof(rt), opw, nopw),
				 nopw == 1 ? "waits" : "wait", where, d);
	}
out:
	free(r);
}

/*
 * Rank b is behind in the exchange that candidate `k` waits in (see
 * p2p_behind()): its evidence is its last completed operation of that
 * exchange, rather than of the communicator, and the collective it waits
 * in instead.
 */
static void culprit_behind(const struct ctx *cx, struct fr_culprit *cu, const struct cand *k)
{
	const struct fr_trace *t = cx->by_rank[cu->rank];
	enum fr_op_type want = k->op->type == FR_OP_SEND ? FR_OP_RECV : FR_OP_SEND;

	for (size_t j = t->nops; j-- > 0;) {
		const struct fr_op *o = &t->ops[j];

		if (o->state == FR_STATE_COMPLETED && o->type == want &&
		    strcmp(o->comm, k->op->comm) == 0 &&
		    fr_corr_op_peer(cx, o) == (int32_t)k->owner) {
			cu->has_last_completed = true;
			cu->last_completed = fr_corr_op_named(cx, o);
			break;
		}
	}
	for (uint32_t i = 0; i < cx->infl_n[cu->rank]; i++) {
		const struct fr_op *o = cx->inflight[cx->infl_off[cu->rank] + i];

		if (op_blocks(o)) {
			cu->has_op = true;
			cu->op = fr_corr_op_named(cx, o);
			break;
		}
	}
}

/*
 * Stuck in an operation every member entered: each culprit's own copy of it
 * (where it is: on a GPU, started or still queued) and how long it has
 * waited in it.
 */
static int culprits_in_group(const struct ctx *cx, const struct group *g,
			     struct fr_verdict *v)
{
	uint32_t *at = malloc(cx->world * sizeof(*at));

	if (!at)
		return -ENOMEM;
	for (uint32_t r = 0; r < cx->world; r++)
		at[r] = NONE;
	for (size_t i = 0; i < v->nculprits; i++)
		at[v->culprits[i].rank] = (uint32_t)i;
	for (uint32_t e = g->head; e != NONE; e = cx->ents[e].next) {
		const struct gentry *en = &cx->ents[e];
		struct fr_culprit *cu;

		if (en->rank >= cx->world || at[en->rank] == NONE)
			continue;
		cu = &v->culprits[at[en->rank]];
		cu->has_op = true;
		cu->op = fr_corr_op_named(cx, en->op);
		if (op_blocks(en->op) && cx->by_rank[en->rank])
			cu->waited_s = ns_to_s(op_wait_ns(cx->by_rank[en->rank], en->op));
	}
	free(at);
	return 0;
}

int fr_corr_verdict_from_cand(struct ctx *cx, const struct cand *k, struct fr_verdict *v)
{
	const struct cinfo *c = &cx->comms[k->comm];
	uint32_t *opw = malloc(cx->world * sizeof(*opw));
	size_t nopw;
	int rc = -ENOMEM;

	if (!opw)
		return -ENOMEM;
	v->kind = FR_VERDICT_HANG;
	v->has_op = true;
	v->op = fr_corr_op_named(cx, k->op);
	if (fr_corr_verdict_set_comm(v, c) < 0)
		goto out_free;
	nopw = fr_corr_cand_waiters(cx, k, opw);

	if (k->cls == 0) {
		v->culprits = calloc(k->nb, sizeof(*v->culprits));
		if (!v->culprits)
			goto out_free;
		for (size_t i = k->boff; i < k->boff + k->nb; i++) {
			const struct blocker *b = &cx->blk[i];
			struct fr_culprit *cu;

			if (k->bad ? b->kind == BK_NOT_ENTERED : b->waits)
				continue;
			cu = &v->culprits[v->nculprits++];
			fr_corr_culprit_fill(cx, cu, b->rank, kind_reason(b->kind), k->comm_id);
			if (b->behind)
				culprit_behind(cx, cu, k);
			if (b->kind != BK_NOT_ENTERED) {
				const struct fr_op *o = latest_inflight(cx, b->rank);

				if (o) {
					cu->has_op = true;
					cu->op = fr_corr_op_named(cx, o);
				}
			}
		}
	} else if (k->cls == 1) {
		size_t n = k->group != NONE ? c->n + c->nextra : k->partner != NONE ? 2 : 1;

		v->culprits = calloc(n ? n : 1, sizeof(*v->culprits));
		if (!v->culprits)
			goto out_free;
		if (k->group != NONE) {
			for (uint32_t i = 0; i < c->n + c->nextra; i++)
				if (cinfo_member(c, i) < cx->world)
					fr_corr_culprit_fill(cx, &v->culprits[v->nculprits++],
							     cinfo_member(c, i),
							     FR_REASON_STUCK_IN_OP, k->comm_id);
			if (culprits_in_group(cx, &cx->groups[k->group], v) < 0)
				goto out_free;
		} else {
			fr_corr_culprit_fill(cx, &v->culprits[v->nculprits++], k->owner,
					     FR_REASON_STUCK_IN_OP, k->comm_id);
			if (k->partner != NONE)
				fr_corr_culprit_fill(cx, &v->culprits[v->nculprits++], k->partner,
						     FR_REASON_STUCK_IN_OP, k->comm_id);
		}
	}
	qsort(v->culprits, v->nculprits, sizeof(*v->culprits), fr_corr_cmp_culprit);
	summary_hang(cx, k, v, opw, nopw);
	rc = 0;
out_free:
	free(opw);
	return rc;
}

int fr_corr_hang(struct ctx *cx, struct fr_verdict *v)
{
	const struct cand *best = NULL;
	int rc;

	for (size_t i = 0; i < cx->ngroups; i++) {
		rc = cand_collective(cx, (uint32_t)i);
		if (rc < 0)
			return rc;
	}
	for (uint32_t r = 0; r < cx->world; r++) {
		if (!cx->waits[r])
			continue;
		for (uint32_t i = 0; i < cx->infl_n[r]; i++) {
			const struct fr_op *op = cx->inflight[cx->infl_off[r] + i];

			if (is_p2p(op) && op_blocks(op)) {
				rc = cand_p2p(cx, r, op);
				if (rc < 0)
					return rc;
			}
		}
	}
	for (size_t i = 0; i < cx->ncands; i++)
		if (!best || fr_corr_cand_cmp(&cx->cands[i], best) < 0)
			best = &cx->cands[i];
	assert(best);
	if (best->cls == 2)
		return fr_corr_verdict_deadlock(cx, best, v);
	return fr_corr_verdict_from_cand(cx, best, v);
}
