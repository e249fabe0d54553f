/*
 * The correlation engine's entry point (see correlate.h for the model, and
 * correlate_int.h for the files it is made of): fr_correlate() indexes every
 * rank's evidence in one pass (correlate_index.c), then asks the checks in
 * the order of precedence correlate.h gives: a mismatch in flight, a hang
 * or deadlock, a mismatch that completed, else ok, with any stragglers.
 * Here too are what the checks share to fill in a verdict: its culprits,
 * its communicator and the phrases of its summary.
 */
#include "correlate_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const verdict_names[] = {
#define FR_V_NAME(e, n) [FR_VERDICT_##e] = n,
	FR_VERDICTS(FR_V_NAME)
#undef FR_V_NAME
};

static const char *const reason_names[] = {
#define FR_R_NAME(e, n) [FR_REASON_##e] = n,
	FR_REASONS(FR_R_NAME)
#undef FR_R_NAME
};

const char *fr_verdict_name(unsigned v)
{
	if (v >= sizeof(verdict_names) / sizeof(verdict_names[0]))
		return "unknown";
	return verdict_names[v];
}

const char *fr_reason_name(unsigned r)
{
	if (r >= sizeof(reason_names) / sizeof(reason_names[0]))
		return "unknown";
	return reason_names[r];
}

/* ---- verdict assembly ---- */

void fr_corr_culprit_fill(const struct ctx *cx, struct fr_culprit *cu, uint32_t rank,
			  enum fr_reason reason, const char *comm)
{
	const struct fr_trace *t = cx->by_rank[rank];

	memset(cu, 0, sizeof(*cu));
	cu->rank = rank;
	cu->reason = reason;
	if (!t)
		return;
	snprintf(cu->host, sizeof(cu->host), "%s", t->host);
	cu->pid = t->pid;
	for (size_t j = t->nops; j-- > 0;) {
		if (t->ops[j].state == FR_STATE_COMPLETED && strcmp(t->ops[j].comm, comm) == 0) {
			cu->has_last_completed = true;
			cu->last_completed = fr_corr_op_named(cx, &t->ops[j]);
			break;
		}
	}
}

int fr_corr_cmp_culprit(const void *a, const void *b)
{
	const struct fr_culprit *x = a;
	const struct fr_culprit *y = b;

	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

int fr_corr_verdict_set_comm(struct fr_verdict *v, const struct cinfo *c)
{
	v->comm_size = c->n;
	if (!c->n)
		return 0;
	v->comm_ranks = malloc(c->n * sizeof(*v->comm_ranks));
	if (!v->comm_ranks)
		return -ENOMEM;
	memcpy(v->comm_ranks, c->members, c->n * sizeof(*v->comm_ranks));
	return 0;
}

struct class_size {
	uint32_t cls;
	uint32_t count;
	uint32_t low;     /* its lowest rank */
};

/* The largest first; on equal sizes, the one with the lowest rank. */
static int cmp_class_size(const void *a, const void *b)
{
	const struct class_size *x = a;
	const struct class_size *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return x->low < y->low ? -1 : x->low > y->low;
}

int fr_corr_classes_build(struct fr_verdict *v, const uint32_t *ranks, const uint32_t *cls,
			  size_t n, uint32_t k, uint32_t *slot, uint32_t *major)
{
	struct class_size *sz = calloc(k ? k : 1, sizeof(*sz));
	size_t nz = 0;
	size_t keep;
	size_t off = 0;
	int rc = -ENOMEM;

	*major = NONE;
	if (!sz)
		return -ENOMEM;
	for (uint32_t c = 0; c < k; c++) {
		sz[c].cls = c;
		sz[c].low = NONE;
		slot[c] = NONE;
	}
	/* Ranks come ascending: a class's first is its lowest. */
	for (size_t i = 0; i < n; i++) {
		if (!sz[cls[i]].count++)
			sz[cls[i]].low = ranks[i];
	}
	for (uint32_t c = 0; c < k; c++)
		if (sz[c].count)
			sz[nz++] = sz[c];
	qsort(sz, nz, sizeof(*sz), cmp_class_size);
	if (nz && (nz == 1 || sz[0].count > sz[1].count))
		*major = sz[0].cls;
	keep = nz < FR_CLASSES_MAX ? nz : FR_CLASSES_MAX;
	v->classes = calloc(keep ? keep : 1, sizeof(*v->classes));
	for (size_t i = 0; i < keep; i++)
		off += sz[i].count;
	v->class_ranks = malloc((off ? off : 1) * sizeof(*v->class_ranks));
	if (!v->classes || !v->class_ranks)
		goto out_free;
	off = 0;
	for (size_t i = 0; i < keep; i++) {
		slot[sz[i].cls] = (uint32_t)i;
		v->classes[i].ranks = v->class_ranks + off;
		v->classes[i].majority = sz[i].cls == *major;
		off += sz[i].count;
	}
	v->nclasses = keep;
	for (size_t i = 0; i < n; i++) {
		uint32_t s = slot[cls[i]];
		struct fr_rank_class *c;

		if (s == NONE)
			continue;
		c = &v->classes[s];
		v->class_ranks[(size_t)(c->ranks - v->class_ranks) + c->nranks++] = ranks[i];
	}
	rc = 0;
out_free:
	free(sz);
	return rc;
}

/* "rank 3 (node7, pid 4242)", or "ranks 1,3" for several. */
void fr_corr_who_text(char *buf, size_t cap, const struct ctx *cx, const uint32_t *ranks, size_t n)
{
	char r[256];

	if (n == 1) {
		const struct fr_trace *t = cx->by_rank[ranks[0]];

		if (t && t->host[0] && t->pid)
			snprintf(buf, cap, "rank %" PRIu32 " (%s, pid %" PRIu32 ")", ranks[0],
				 t->host, t->pid);
		else if (t && t->pid)
			snprintf(buf, cap, "rank %" PRIu32 " (pid %" PRIu32 ")", ranks[0], t->pid);
		else if (t && t->host[0])
			snprintf(buf, cap, "rank %" PRIu32 " (%s)", ranks[0], t->host);
		else
			snprintf(buf, cap, "rank %" PRIu32, ranks[0]);
		return;
	}
	snprintf(buf, cap, "ranks %s", fr_corr_ranks_text(r, sizeof(r), ranks, n));
}

/* "ranks 0-2,4-5 have waited 42 s" */
void fr_corr_waited_text(struct line *l, const uint32_t *ranks, size_t n, double s)
{
	char r[256];
	char d[32];

	if (!n)
		return;
	fr_corr_duration_text(d, sizeof(d), s);
	fr_corr_line_add(l, "%s %s %s waited %s", n == 1 ? "rank" : "ranks",
			 fr_corr_ranks_text(r, sizeof(r), ranks, n), n == 1 ? "has" : "have", d);
}

/* "all_reduce #11 on world [0-5]" */
void fr_corr_where_text(char *buf, size_t cap, const struct fr_verdict *v)
{
	char head[128];
	char m[256];

	fr_corr_op_head(head, sizeof(head), &v->op);
	snprintf(buf, cap, "%s on %s [%s]", head, v->op.comm[0] ? v->op.comm : "?",
		 fr_corr_members_text(m, sizeof(m), v->comm_ranks, v->comm_size));
}

/* `waiting` ranks wait, `longest` ns at most, in a dump taken on request (verdict_of()). */
static void summary_ok(const struct ctx *cx, struct fr_verdict *v, size_t waiting,
		       uint64_t longest)
{
	struct line l = { v->summary, sizeof(v->summary), 0 };
	uint32_t *none = malloc(cx->world * sizeof(*none) + 1);
	size_t n = 0;
	size_t posted = 0;

	for (uint32_t r = 0; r < cx->world; r++)
		for (uint32_t i = 0; i < cx->infl_n[r]; i++)
			if (!op_blocks(cx->inflight[cx->infl_off[r] + i]))
				posted++;
	if (waiting)
		fr_corr_line_add(&l, "no hang: running when dumped on request, %zu %s in an "
				 "operation for %.3f s at most (%zu of %" PRIu32 " ranks with evidence",
				 waiting, waiting == 1 ? "rank waits" : "ranks wait", ns_to_s(longest),
				 v->nranks_with_evidence, cx->world);
	else if (posted)
		fr_corr_line_add(&l, "no hang: no rank waits in an operation, %zu non-blocking %s "
				 "posted and not waited on (%zu of %" PRIu32 " ranks with evidence",
				 posted, posted == 1 ? "one is" : "ones are",
				 v->nranks_with_evidence, cx->world);
	else
		fr_corr_line_add(&l, "no hang: no rank has an operation in flight (%zu of %" PRIu32
				 " ranks with evidence", v->nranks_with_evidence, cx->world);
	for (uint32_t r = 0; none && r < cx->world; r++)
		if (!evidence_of(cx, r))
			none[n++] = r;
	if (n) {
		char rt[256];

		fr_corr_line_add(&l, "; none from %s %s", n == 1 ? "rank" : "ranks",
				 fr_corr_ranks_text(rt, sizeof(rt), none, n));
	}
	fr_corr_line_add(&l, ")");
	free(none);
}

/* ---- ring windows ---- */

/*
 * Whether the members' ring windows on some communicator start at
 * different seqs; for the verdict's communicator `prefer` when they differ
 * on it, else for the one where they start furthest apart, the members
 * with the latest and the earliest start and the seqs that every member
 * with entries kept.
 */
static int find_alignment(const struct ctx *cx, uint32_t prefer, struct fr_alignment *a)
{
	struct span {
		struct fr_window lo;  /* the earliest start */
		struct fr_window hi;  /* the latest start */
		uint64_t last;        /* the earliest end */
		bool any;
	} *sp = calloc(cx->ncomms ? cx->ncomms : 1, sizeof(*sp));
	uint32_t best = NONE;

	if (!sp)
		return -ENOMEM;
	for (uint32_t r = 0; r < cx->world; r++) {
		for (uint32_t i = 0; i < cx->rc_n[r]; i++) {
			const struct rcomm *rc = &cx->rcs[cx->rc_off[r] + i];
			struct span *x = &sp[rc->ci];
			struct fr_window w = { r, rc->first, rc->last };

			if (rc->first == UINT64_MAX)
				continue;
			if (!x->any || w.first < x->lo.first)
				x->lo = w;
			if (!x->any || w.first > x->hi.first)
				x->hi = w;
			if (!x->any || w.last < x->last)
				x->last = w.last;
			x->any = true;
		}
	}
	for (uint32_t ci = 0; ci < cx->ncomms; ci++) {
		const struct span *x = &sp[ci];

		if (!x->any || x->hi.first == x->lo.first)
			continue;
		a->ncomms++;
		if (best == NONE || ci == prefer ||
		    (best != prefer &&
		     x->hi.first - x->lo.first > sp[best].hi.first - sp[best].lo.first))
			best = ci;
	}
	if (best != NONE) {
		snprintf(a->comm, sizeof(a->comm), "%s", cx->comms[best].id);
		a->latest = sp[best].hi;
		a->earliest = sp[best].lo;
		a->common_first = sp[best].hi.first;
		a->common_last = sp[best].last;
	}
	free(sp);
	return 0;
}

/* ---- the verdict ---- */

/*
 * Whether the evidence was taken on request (POST .../dump: reason
 * "manual") by every rank that has some, rather than for a timeout.
 */
static bool taken_on_request(const struct ctx *cx)
{
	bool any = false;

	for (uint32_t r = 0; r < cx->world; r++) {
		const struct fr_trace *t = cx->by_rank[r];

		if (!t)
			continue;
		if (strcmp(t->reason, "manual") != 0)
			return false;
		any = true;
	}
	return any;
}

/*
 * The verdict, in the order of precedence correlate.h gives. A dump taken
 * on request catches a running job between two collectives: ranks that
 * have waited less than FR_CORR_REQUEST_WAIT_MIN_NS for one still on its
 * way are in progress, not hung, and the job is judged as running (ok,
 * with its stragglers); a timeout's dump is a hang past --timeout.
 */
static int verdict_of(struct ctx *cx, struct fr_verdict *v)
{
	struct p2p_pair pair;
	uint64_t longest = 0;
	size_t in_progress;
	uint32_t gi;
	int rc;

	/* A disagreement in what is still in flight explains what hangs. */
	while ((gi = fr_corr_find_mismatch(cx, true)) != NONE) {
		rc = fr_corr_verdict_mismatch(cx, gi, true, v);
		if (rc != 1)
			return rc;
		cx->groups[gi].differs = false;
	}
	if (fr_corr_find_p2p_mismatch(cx, true, &pair))
		return fr_corr_verdict_p2p_mismatch(cx, &pair, true, v);

	v->waiting = malloc((cx->world ? cx->world : 1) * sizeof(*v->waiting));
	if (!v->waiting)
		return -ENOMEM;
	for (uint32_t r = 0; r < cx->world; r++) {
		if (!cx->waits[r])
			continue;
		v->waiting[v->nwaiting++] = r;
		if (cx->wait_ns[r] > longest)
			longest = cx->wait_ns[r];
	}
	v->waited_s = ns_to_s(longest);
	if (v->nwaiting && (longest >= FR_CORR_REQUEST_WAIT_MIN_NS || !taken_on_request(cx)))
		return fr_corr_hang(cx, v);
	in_progress = v->nwaiting;

	/* Nothing hangs: what completed may still disagree. */
	free(v->waiting);
	v->waiting = NULL;
	v->nwaiting = 0;
	while ((gi = fr_corr_find_mismatch(cx, false)) != NONE) {
		rc = fr_corr_verdict_mismatch(cx, gi, false, v);
		if (rc != 1)
			return rc;
		cx->groups[gi].differs_loose = false;
	}
	if (fr_corr_find_p2p_mismatch(cx, false, &pair))
		return fr_corr_verdict_p2p_mismatch(cx, &pair, false, v);

	v->kind = FR_VERDICT_OK;
	summary_ok(cx, v, in_progress, longest);
	rc = fr_corr_find_stragglers(cx, v);
	if (rc == 0 && v->nstragglers) {
		struct line l = { v->summary, sizeof(v->summary), strlen(v->summary) };
		char st[256];

		fr_corr_straggler_text(st, sizeof(st), &v->stragglers[0]);
		fr_corr_line_add(&l, "; straggler: %s", st);
		if (v->nstragglers > 1)
			fr_corr_line_add(&l, " (and %zu more)", v->nstragglers - 1);
	}
	return rc;
}

/* Op `o` of the verdict names its strings from the verdict's own pool. */
static int own_op_strings(struct fr_verdict *v, struct fr_op *o)
{
	const char **s[] = { &o->comm, &o->dtype, &o->redop };

	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
		if (!(*s[i] = fr_strs_keep(&v->strs, *s[i], strlen(*s[i]))))
			return -ENOMEM;
	return 0;
}

/*
 * The verdict's operations are copies of the traces': their strings are
 * the traces' until copied, and a verdict may outlive its traces (the
 * daemon frees them first).
 */
static int own_strings(struct fr_verdict *v)
{
	int rc = v->has_op ? own_op_strings(v, &v->op) : 0;

	for (size_t i = 0; i < v->nclasses && !rc; i++) {
		rc = own_op_strings(v, &v->classes[i].op);
		if (!rc && v->classes[i].has_before)
			rc = own_op_strings(v, &v->classes[i].before);
	}

	for (size_t i = 0; i < v->nculprits && !rc; i++) {
		struct fr_culprit *cu = &v->culprits[i];

		if (cu->has_op)
			rc = own_op_strings(v, &cu->op);
		if (!rc && cu->has_last_completed)
			rc = own_op_strings(v, &cu->last_completed);
	}
	return rc;
}

static void verdict_drop_classes(struct fr_verdict *v)
{
	free(v->classes);
	free(v->class_ranks);
	v->classes = NULL;
	v->class_ranks = NULL;
	v->nclasses = 0;
}

/* Frees what a culprit owns. */
static void culprit_free(struct fr_culprit *cu)
{
	fr_crash_free(cu->crash);
	if (cu->py_thread)
		fr_thread_free(cu->py_thread);
	free(cu->py_thread);
}

/*
 * Each culprit's thread that runs Python, the first (the main thread, as
 * threads are listed) other than the dumping agent's, copied: the verdict
 * outlives the traces. Done last, on the final culprits.
 */
static int culprits_python(const struct ctx *cx, struct fr_verdict *v)
{
	for (size_t i = 0; i < v->nculprits; i++) {
		struct fr_culprit *cu = &v->culprits[i];
		const struct fr_thread *th =
			fr_trace_py_thread(cu->rank < cx->world ? cx->by_rank[cu->rank] : NULL);

		if (th && !cu->py_thread && (!(cu->py_thread = calloc(1, sizeof(*cu->py_thread))) ||
			   fr_thread_copy(cu->py_thread, th)))
			return -ENOMEM;
	}
	return 0;
}

/*
 * Makes `v` a verdict of `kind` whose culprits are `cu` (taken), found by
 * a check that overrides what the others found: their culprits and any
 * stragglers go (a job that crashed or went silent is no ok job with
 * stragglers).
 */
static void verdict_take_culprits(struct fr_verdict *v, enum fr_verdict_kind kind,
				  struct fr_culprit *cu, size_t n)
{
	for (size_t i = 0; i < v->nculprits; i++)
		culprit_free(&v->culprits[i]);
	free(v->culprits);
	free(v->stragglers);
	v->stragglers = NULL;
	v->nstragglers = 0;
	/* What the ranks did differently is no longer the finding. */
	verdict_drop_classes(v);
	v->kind = kind;
	v->culprits = cu;
	v->nculprits = n;
}

/* The last operation of trace `t`, completed or not, on any communicator. */
static const struct fr_op *last_op(const struct fr_trace *t)
{
	return t->nops ? &t->ops[t->nops - 1] : NULL;
}

/* What befell culprit `c`, for the summary: "crashed (SIGSEGV at 0x0 in
 * load_shard)", "exited (code 3)", "was killed or lost". */
static void death_text(char *buf, size_t len, const struct fr_culprit *c, bool first_of_many)
{
	const char *lead = first_of_many ? "the first: " : "";
	char sname[16];

	if (c->crash) {
		const char *fn = fr_crash_function(c->crash);

		snprintf(buf, len, "crashed (%s%s at 0x%" PRIx64 "%s%s)", lead,
			 fr_signal_name(c->crash->signo, sname), c->crash->fault_addr,
			 fn ? " in " : "", fn ? fn : "");
	} else if (c->reason == FR_REASON_NCCL_ERROR) {
		char name[24];

		snprintf(buf, len, "hit an NCCL error (%s%s on %s%s%.120s)", lead,
			 fr_nccl_result_name(c->nccl_error.result, name), c->nccl_error.comm,
			 c->nccl_error.message[0] ? ": " : "", c->nccl_error.message);
	} else if (c->reason == FR_REASON_EXITED && c->exit.has_code) {
		snprintf(buf, len, "exited (%s%scode %" PRId32 ")", lead,
			 c->exit.underscore ? "_exit, " : "", c->exit.code);
	} else if (c->reason == FR_REASON_EXITED) {
		snprintf(buf, len, "exited (%s%swithout finalising)", lead,
			 c->exit.underscore ? "_exit, " : "");
	} else {
		snprintf(buf, len, "%s", first_of_many ?
			 FR_KILLED_WORDS_MANY : FR_KILLED_WORDS_ONE);
	}
}

/* "rank 2 crashed (SIGSEGV at 0x0 in load_shard) during all_reduce #5 on
 * world; ranks 0-1,3 wait for it" */
static void summary_crash(const struct ctx *cx, struct fr_verdict *v)
{
	struct line l = { v->summary, sizeof(v->summary), 0 };
	const struct fr_culprit *first = &v->culprits[0];
	const struct fr_trace *t = cx->by_rank[first->rank];
	uint32_t *ranks = malloc(v->nculprits * sizeof(*ranks));
	char who[256], head[128], what[256];

	for (size_t i = 0; ranks && i < v->nculprits; i++)
		ranks[i] = v->culprits[i].rank;
	if (ranks)
		fr_corr_who_text(who, sizeof(who), cx, ranks, v->nculprits);
	else
		snprintf(who, sizeof(who), "rank %" PRIu32, first->rank);
	free(ranks);
	death_text(what, sizeof(what), first, v->nculprits > 1);
	fr_corr_line_add(&l, "%s %s", who, what);
	if (v->has_op) {
		fr_corr_op_head(head, sizeof(head), &v->op);
		fr_corr_line_add(&l, " during %s on %s", head, v->op.comm[0] ? v->op.comm : "?");
	} else if (t && last_op(t)) {
		const struct fr_op *op = last_op(t);

		fr_corr_op_head(head, sizeof(head), op);
		fr_corr_line_add(&l, " %s %s on %s",
				 op->state == FR_STATE_COMPLETED ? "after" : "in", head, op->comm);
	} else if (t && t->ncomms) {
		/* A live view holds no completed entries, only the counters. */
		const struct fr_comm *latest = &t->comms[0];

		for (size_t i = 1; i < t->ncomms; i++)
			if (t->comms[i].last_completed > latest->last_completed)
				latest = &t->comms[i];
		if (latest->last_completed)
			fr_corr_line_add(&l, " after collective #%" PRIu64 " on %s",
					 latest->last_completed, latest->id);
	}
	if (v->nwaiting) {
		char rt[256];

		fr_corr_line_add(&l, "; %s %s wait%s for %s", v->nwaiting == 1 ? "rank" : "ranks",
				 fr_corr_ranks_text(rt, sizeof(rt), v->waiting, v->nwaiting),
				 v->nwaiting == 1 ? "s" : "", v->nculprits == 1 ? "it" : "them");
	}
}

/* Whether the checks before named rank `r` a culprit. */
static bool named_before(const struct fr_verdict *v, uint32_t r)
{
	for (size_t i = 0; i < v->nculprits; i++)
		if (v->culprits[i].rank == r)
			return true;
	return false;
}

/*
 * How trace `t` (rank `r`) died, if it did as far as a verdict goes
 * (correlate.h, "Above all of them"): the reason, or -1.
 */
static int death_of(const struct fr_verdict *v, const struct fr_trace *t, uint32_t r)
{
	if (!t)
		return -1;
	if (t->crash)
		return FR_REASON_CRASHED;
	if (t->has_nccl_error)
		return FR_REASON_NCCL_ERROR;
	if (!t->has_exit || (!fr_exit_is_fault(&t->exit) && !named_before(v, r)))
		return -1;
	return t->exit.kind == FR_EXIT_KILLED ? FR_REASON_KILLED : FR_REASON_EXITED;
}

/*
 * A rank that died is the root cause of whatever the other checks found:
 * the ranks that crashed, exited or were killed become the culprits, the
 * rest of `v` (the op the others wait in, who waits) stays as its
 * consequence.
 */
static int crash_verdict(const struct ctx *cx, struct fr_verdict *v)
{
	struct fr_culprit *cu;
	size_t n = 0;

	for (uint32_t r = 0; r < cx->world; r++)
		if (death_of(v, cx->by_rank[r], r) >= 0)
			n++;
	if (!n)
		return 0;
	cu = calloc(n, sizeof(*cu));
	if (!cu)
		return -ENOMEM;
	n = 0;
	for (uint32_t r = 0; r < cx->world; r++) {
		const struct fr_trace *t = cx->by_rank[r];
		int reason = death_of(v, t, r);
		struct fr_culprit *c;

		if (reason < 0)
			continue;
		c = &cu[n++];
		fr_corr_culprit_fill(cx, c, r, (enum fr_reason)reason, v->has_op ? v->op.comm : "");
		for (size_t j = t->nops; !v->has_op && j-- > 0;) {
			if (t->ops[j].state == FR_STATE_COMPLETED) {
				c->has_last_completed = true;
				c->last_completed = fr_corr_op_named(cx, &t->ops[j]);
				break;
			}
		}
		if (reason == FR_REASON_NCCL_ERROR) {
			c->has_nccl_error = true;
			c->nccl_error = t->nccl_error;
		} else if (reason != FR_REASON_CRASHED) {
			c->has_exit = true;
			c->exit = t->exit;
		} else if (fr_crash_copy(&c->crash, t->crash)) {
			goto out_nomem;
		}
	}
	verdict_take_culprits(v, FR_VERDICT_CRASH, cu, n);
	v->summary[0] = '\0';
	summary_crash(cx, v);
	return 0;

out_nomem:
	for (size_t i = 0; i < n; i++)
		fr_crash_free(cu[i].crash);
	free(cu);
	return -ENOMEM;
}

int fr_correlate(const struct fr_trace *const *traces, size_t ntraces, uint32_t world_size,
		 struct fr_verdict *v)
{
	struct ctx cx;
	int rc;

	memset(v, 0, sizeof(*v));
	memset(&cx, 0, sizeof(cx));
	rc = fr_corr_ctx_build(&cx, traces, ntraces, world_size);
	if (rc < 0)
		goto out_free;
	v->world_size = cx.world;
	for (uint32_t r = 0; r < cx.world; r++)
		if (evidence_of(&cx, r))
			v->nranks_with_evidence++;
	rc = verdict_of(&cx, v);
	if (rc >= 0)
		rc = crash_verdict(&cx, v);
	if (rc < 0)
		goto out_free;
	rc = find_alignment(&cx, v->has_op ? fr_corr_comm_find(&cx, v->op.comm) : NONE,
			    &v->aligned);
	if (rc == 0)
		rc = own_strings(v);
	if (rc == 0)
		rc = culprits_python(&cx, v);
out_free:
	fr_corr_ctx_free(&cx);
	if (rc < 0)
		fr_verdict_free(v);
	return rc;
}

/* The reason a silent rank is named for, or -1 for a rank that is not. */
static int silent_reason(const struct fr_trace *t)
{
	if (t->status == FR_RANK_UNRESPONSIVE)
		return FR_REASON_UNRESPONSIVE;
	if (t->status == FR_RANK_DISCONNECTED)
		return FR_REASON_DISCONNECTED;
	return -1;
}

/* "ranks 0-3 are unresponsive", "rank 2 (node7, pid 42) lost its connection". */
static void silent_text(struct line *l, const struct fr_culprit *cu, size_t ncu,
			enum fr_reason reason, uint32_t *r)
{
	char rt[256];
	size_t n = 0;
	const struct fr_culprit *one = NULL;

	for (size_t i = 0; i < ncu; i++) {
		if (cu[i].reason != reason)
			continue;
		r[n++] = cu[i].rank;
		one = &cu[i];
	}
	if (!n)
		return;
	if (l->len)
		fr_corr_line_add(l, "; ");
	if (n == 1 && one->host[0] && one->pid)
		fr_corr_line_add(l, "rank %" PRIu32 " (%s, pid %" PRIu32 ")", one->rank, one->host,
				 one->pid);
	else
		fr_corr_line_add(l, "%s %s", n == 1 ? "rank" : "ranks",
				 fr_corr_ranks_text(rt, sizeof(rt), r, n));
	if (reason == FR_REASON_UNRESPONSIVE)
		fr_corr_line_add(l, " %s unresponsive", n == 1 ? "is" : "are");
	else
		fr_corr_line_add(l, " lost %s connection without finalising",
				 n == 1 ? "its" : "their");
}

int fr_verdict_name_silent(struct fr_verdict *v, const struct fr_trace *const *traces,
			   size_t ntraces)
{
	struct line l = { v->summary, sizeof(v->summary), 0 };
	struct fr_culprit *cu;
	uint32_t *r;
	size_t n = 0;

	if (v->kind != FR_VERDICT_OK)
		return 0;
	for (size_t i = 0; i < ntraces; i++) {
		if (traces[i] && traces[i]->status == FR_RANK_DUMPED)
			return 0;
		if (traces[i] && traces[i]->rank < v->world_size && silent_reason(traces[i]) >= 0)
			n++;
	}
	if (!n)
		return 0;
	cu = calloc(n, sizeof(*cu));
	r = malloc(n * sizeof(*r));
	if (!cu || !r) {
		free(cu);
		free(r);
		return -ENOMEM;
	}
	n = 0;
	for (size_t i = 0; i < ntraces; i++) {
		const struct fr_trace *t = traces[i];
		struct fr_culprit *c;

		if (!t || t->rank >= v->world_size || silent_reason(t) < 0)
			continue;
		c = &cu[n++];
		c->rank = t->rank;
		c->reason = (enum fr_reason)silent_reason(t);
		snprintf(c->host, sizeof(c->host), "%s", t->host);
		c->pid = t->pid;
		/* No communicator is stuck: its last completed operation on any. */
		for (size_t j = t->nops; j-- > 0;) {
			if (t->ops[j].state == FR_STATE_COMPLETED) {
				c->has_last_completed = true;
				c->last_completed = t->ops[j];
				break;
			}
		}
	}
	qsort(cu, n, sizeof(*cu), fr_corr_cmp_culprit);
	for (size_t i = 0; i < n; i++) {
		if (cu[i].has_last_completed && own_op_strings(v, &cu[i].last_completed) < 0) {
			free(cu);
			free(r);
			return -ENOMEM;
		}
	}
	/* A job that went silent as a whole: not an ok job with stragglers. */
	verdict_take_culprits(v, FR_VERDICT_HANG, cu, n);
	silent_text(&l, cu, n, FR_REASON_UNRESPONSIVE, r);
	silent_text(&l, cu, n, FR_REASON_DISCONNECTED, r);
	fr_corr_line_add(&l, "; no rank dumped, and the daemon's live view has no operation in "
			 "flight (%zu of %" PRIu32 " ranks with evidence)", v->nranks_with_evidence,
			 v->world_size);
	free(r);
	return 1;
}

void fr_verdict_free(struct fr_verdict *v)
{
	for (size_t i = 0; v->culprits && i < v->nculprits; i++)
		culprit_free(&v->culprits[i]);
	free(v->culprits);
	free(v->comm_ranks);
	free(v->waiting);
	free(v->stragglers);
	verdict_drop_classes(v);
	fr_strs_free(v->strs);
	memset(v, 0, sizeof(*v));
}
