/*
 * The report for a person (fr_verdict_print()): the summary, who waits in
 * what, the evidence, each culprit with its operations, kernel log lines and
 * stack, and the ranks grouped by stack.
 */
#include "correlate_int.h"
#include "kernel_log.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../protocol/hash.h"

/*
 * Culprits described one by one in fr_verdict_print(). Beyond that many,
 * they are listed by reason as rank ranges and only the first
 * PRINT_CULPRITS_DETAIL are described.
 */
#define PRINT_CULPRITS_MAX 8
#define PRINT_CULPRITS_DETAIL 3
/* Stragglers listed in the report. */
#define PRINT_STRAGGLERS_MAX 8
/* Lines of "who waits in what" in fr_verdict_print(). */
#define PRINT_WAIT_GROUPS_MAX 16
/* A culprit's posted, unwaited non-blocking operations listed in the report. */
#define PRINT_POSTED_MAX 4

const struct fr_trace *fr_corr_trace_of(const struct fr_trace *const *traces, size_t ntraces,
					uint32_t rank)
{
	for (size_t i = 0; i < ntraces; i++)
		if (traces[i] && traces[i]->rank == rank)
			return traces[i];
	return NULL;
}

static void print_op_line(FILE *out, const char *label, const struct fr_op *op)
{
	const char *gpu = fr_corr_gpu_state_name(op);
	char head[128];
	char det[128];

	fr_corr_op_head(head, sizeof(head), op);
	fr_corr_op_details(det, sizeof(det), op);
	fprintf(out, "%s%s on %s (%s, %" PRIu64 " bytes), %s%s\n", label, head,
		op->comm[0] ? op->comm : "?", det, op->bytes,
		gpu ? gpu : fr_state_name(op->state),
		op->gpu && op->state == FR_STATE_ENTERED ? " on the GPU" : "");
}

/*
 * A copy of `op` with the peer or root its rank could not name, named by
 * the verdict's member list when op is on the verdict's communicator.
 */
static struct fr_op op_named_v(const struct fr_verdict *v, const struct fr_op *op)
{
	struct fr_op o = *op;
	int32_t k = op->peer_in_comm;
	uint32_t m;

	if (!v->has_op || k < 0 || (uint32_t)k >= v->comm_size ||
	    strcmp(op->comm, v->op.comm) != 0)
		return o;
	m = v->comm_ranks[k];
	if (m == FR_RANK_UNKNOWN || m > INT32_MAX)
		return o;
	if (is_p2p(op) && o.peer < 0)
		o.peer = (int32_t)m;
	else if (!is_p2p(op) && fr_op_is_rooted(op->type) && o.root < 0)
		o.root = (int32_t)m;
	return o;
}

/* What one waiting rank waits in; `op` is NULL when nothing, else &named. */
struct wait_item {
	const struct fr_op *op;
	struct fr_op named;
	uint32_t rank;
	uint64_t wait_ns;
};

static int cmp_wait_item(const void *a, const void *b)
{
	const struct wait_item *x = a;
	const struct wait_item *y = b;
	int c;

	if (!x->op || !y->op)
		return x->op ? -1 : y->op ? 1 : (x->rank > y->rank) - (x->rank < y->rank);
	c = strcmp(x->named.comm, y->named.comm);
	if (c)
		return c;
	if (x->named.seq != y->named.seq)
		return x->named.seq < y->named.seq ? -1 : 1;
	if (x->named.type != y->named.type)
		return x->named.type < y->named.type ? -1 : 1;
	if (x->named.peer != y->named.peer)
		return x->named.peer < y->named.peer ? -1 : 1;
	if (x->named.peer_in_comm != y->named.peer_in_comm)
		return x->named.peer_in_comm < y->named.peer_in_comm ? -1 : 1;
	return (x->rank > y->rank) - (x->rank < y->rank);
}

static bool same_wait(const struct wait_item *a, const struct wait_item *b)
{
	if (!a->op || !b->op)
		return !a->op && !b->op;
	return strcmp(a->named.comm, b->named.comm) == 0 && a->named.seq == b->named.seq &&
	       a->named.type == b->named.type && a->named.peer == b->named.peer &&
	       a->named.peer_in_comm == b->named.peer_in_comm;
}

/*
 * Who waits in what: each waiting rank's oldest operation in flight, grouped
 * so that 1024 ranks in the same barrier make one line.
 */
static void print_waiting(FILE *out, const struct fr_verdict *v,
			  const struct fr_trace *const *traces, size_t ntraces,
			  const struct fr_trace **idx)
{
	struct wait_item *it = malloc((v->nwaiting ? v->nwaiting : 1) * sizeof(*it));
	uint32_t *r = malloc((v->nwaiting ? v->nwaiting : 1) * sizeof(*r));
	size_t lines = 0;
	char d[32];
	char rt[512];

	fr_corr_duration_text(d, sizeof(d), v->waited_s);
	fprintf(out, "Waiting: %s %s (%zu), longest %s\n", v->nwaiting == 1 ? "rank" : "ranks",
		fr_corr_ranks_text(rt, sizeof(rt), v->waiting, v->nwaiting), v->nwaiting, d);
	if (!it || !r)
		goto out_free;
	for (size_t i = 0; i < v->nwaiting; i++) {
		uint32_t rank = v->waiting[i];
		const struct fr_trace *t = idx ? (rank < v->world_size ? idx[rank] : NULL) :
					   fr_corr_trace_of(traces, ntraces, rank);

		it[i].rank = rank;
		it[i].op = NULL;
		it[i].wait_ns = 0;
		/* What it waits in is what has held it longest. */
		for (size_t j = 0; t && j < t->nops; j++) {
			const struct fr_op *op = &t->ops[j];

			if (!op_blocks(op))
				continue;
			if (!it[i].op || op_wait_ns(t, op) > it[i].wait_ns) {
				it[i].op = op;
				it[i].wait_ns = op_wait_ns(t, op);
			}
		}
		if (it[i].op)
			it[i].named = op_named_v(v, it[i].op);
	}
	/* From here on `op` only says whether there is one: sorting moves
	 * `named`, and a pointer to it would not follow. */
	qsort(it, v->nwaiting, sizeof(*it), cmp_wait_item);
	for (size_t i = 0; i < v->nwaiting;) {
		size_t j = i;
		size_t n = 0;
		uint64_t longest = 0;
		char head[128];

		for (; j < v->nwaiting && same_wait(&it[i], &it[j]); j++) {
			r[n++] = it[j].rank;
			if (it[j].wait_ns > longest)
				longest = it[j].wait_ns;
		}
		if (lines++ == PRINT_WAIT_GROUPS_MAX) {
			fprintf(out, "  ... and more\n");
			break;
		}
		qsort(r, n, sizeof(*r), fr_corr_cmp_u32);
		fr_corr_duration_text(d, sizeof(d), ns_to_s(longest));
		if (it[i].op) {
			fr_corr_op_head(head, sizeof(head), &it[i].named);
			fprintf(out, "  %s %s: in %s on %s, up to %s\n", n == 1 ? "rank" : "ranks",
				fr_corr_ranks_text(rt, sizeof(rt), r, n), head, it[i].named.comm,
				d);
		} else {
			fprintf(out, "  %s %s: (no operation in its evidence)\n",
				n == 1 ? "rank" : "ranks",
				fr_corr_ranks_text(rt, sizeof(rt), r, n));
		}
		i = j;
	}
out_free:
	free(it);
	free(r);
}

/* A Python file as the report names it: its last component. */
static const char *py_file_name(const char *file)
{
	const char *slash = strrchr(file, '/');

	return slash && slash[1] ? slash + 1 : file;
}

/* "load_batch (train.py:41)", or without the line when it is not known. */
void fr_pyframe_text(char *buf, size_t len, const struct fr_pyframe *f)
{
	if (f->line)
		snprintf(buf, len, "%s (%s:%" PRIu32 ")", f->function, py_file_name(f->file),
			 f->line);
	else
		snprintf(buf, len, "%s (%s)", f->function, py_file_name(f->file));
}

/* A native frame of a call of CPython's evaluation loop. */
static bool is_eval_loop(const struct fr_frame *f)
{
	return f->name && strcmp(f->name, "_PyEval_EvalFrameDefault") == 0;
}

bool fr_thread_interleaves(const struct fr_thread *th)
{
	size_t loops = 0, entries = 0;

	if (!th->npyframes || th->py_truncated || !th->pyframes[th->npyframes - 1].entry)
		return false;
	for (size_t j = 0; j < th->nframes; j++)
		loops += is_eval_loop(&th->frames[j]);
	for (size_t j = 0; j < th->npyframes; j++)
		entries += th->pyframes[j].entry;
	return loops == entries;
}

static void print_pyframe(FILE *out, const struct fr_thread *th, size_t j)
{
	char text[2 * 256 + 32];

	fr_pyframe_text(text, sizeof(text), &th->pyframes[j]);
	fprintf(out, "    py#%zu %s\n", j, text);
}

void fr_thread_print(FILE *out, const struct fr_thread *th)
{
	bool mixed = fr_thread_interleaves(th);
	size_t py = 0;

	fprintf(out, "  thread %" PRIu32 "%s%s%s:\n", th->tid, th->name[0] ? " \"" : "", th->name,
		th->name[0] ? "\"" : "");
	/* Apart, where the script is comes first: the native frames under
	 * it are the interpreter's loop, and say little to the script's
	 * author. */
	for (size_t j = 0; !mixed && j < th->npyframes; j++)
		print_pyframe(out, th, j);
	if (th->py_truncated)
		fprintf(out, "    py#%zu (outer Python frames not read: too deep, or changing as they were read)\n",
			th->npyframes);
	if (!mixed && th->npyframes && th->nframes)
		fprintf(out, "    native:\n");
	if (!th->nframes)
		fprintf(out, "    (no frames)\n");
	for (size_t j = 0; j < th->nframes; j++) {
		const struct fr_frame *f = &th->frames[j];

		/* Together, a call of the loop comes after (outside) the
		 * Python frames it runs, down to its entry frame. */
		if (mixed && is_eval_loop(f))
			do
				print_pyframe(out, th, py);
			while (!th->pyframes[py++].entry);

		/* Frames without an address are source-level (Python, from a
		 * PyTorch dump): the name says it all. */
		if (!f->ip && !f->offset)
			fprintf(out, "    #%zu %s\n", j, f->name ? f->name : "??");
		else
			fprintf(out, "    #%zu %s+0x%" PRIx64 "\n", j, f->name ? f->name : "??",
				f->offset);
	}
}

static void print_stack(FILE *out, const struct fr_trace *t)
{
	if (!t->nthreads) {
		fprintf(out, "  stack: none in its evidence\n");
		return;
	}
	for (size_t i = 0; i < t->nthreads; i++) {
		const struct fr_thread *th = &t->threads[i];

		/* The thread that wrote the dump is the agent's own: it says
		 * nothing about the application (it stays in the dump file). */
		if (th->current)
			continue;
		fr_thread_print(out, th);
	}
	if (t->python_note[0])
		fprintf(out, "  %s\n", t->python_note);
}

static const char *reason_text(enum fr_reason r)
{
	switch (r) {
	case FR_REASON_NOT_ENTERED:
		return "never entered the operation its peers wait in";
	case FR_REASON_UNRESPONSIVE:
		return "unresponsive (stopped heartbeating or answering)";
	case FR_REASON_DISCONNECTED:
		return "lost its connection without finalising";
	case FR_REASON_FINISHED:
		return "finalised while its peers still wait on it";
	case FR_REASON_MISMATCH:
		return "called a different operation at the same seq";
	case FR_REASON_STUCK_IN_OP:
		return "entered the operation, which does not complete";
	case FR_REASON_CRASHED:
		return "crashed: died of a fatal signal";
	case FR_REASON_EXITED:
		return "exited without finalising";
	case FR_REASON_KILLED:
		return "killed or lost: its connection dropped without a goodbye";
	case FR_REASON_NCCL_ERROR:
		return "an NCCL communicator of it failed (ncclCommGetAsyncError)";
	}
	return "?";
}

/*
 * Non-blocking operations the rank posted and has not waited on: they do not
 * hold it up, but one may be what a peer needs it to complete.
 */
static void print_posted(FILE *out, const struct fr_verdict *v, const struct fr_trace *t)
{
	size_t n = 0;

	for (size_t j = 0; j < t->nops; j++) {
		const struct fr_op *op = &t->ops[j];

		if (op->state != FR_STATE_ENTERED || op_blocks(op))
			continue;
		if (n++ < PRINT_POSTED_MAX) {
			struct fr_op named = op_named_v(v, op);

			print_op_line(out, "  posted, not waited on: ", &named);
		}
	}
	if (n > PRINT_POSTED_MAX)
		fprintf(out, "  ... and %zu more posted\n", n - PRINT_POSTED_MAX);
}

static void print_culprit(FILE *out, const struct fr_verdict *v, const struct fr_culprit *cu,
			  const struct fr_trace *t)
{
	fprintf(out, "\nCulprit rank %" PRIu32, cu->rank);
	if (cu->host[0] || cu->pid)
		fprintf(out, " (%s, pid %" PRIu32 ")", cu->host[0] ? cu->host : "?", cu->pid);
	if (v->kind == FR_VERDICT_DEADLOCK && v->nclasses && v->classes[0].majority)
		fprintf(out, ": did otherwise than the majority (see \"Ranks by what they "
			"did\"): it waits in the operation below, never having entered the one "
			"they wait in\n");
	else if (v->kind == FR_VERDICT_DEADLOCK && v->nclasses)
		fprintf(out, ": one of the classes of a deadlock with no majority (see \"Ranks "
			"by what they did\"): it waits in the operation below\n");
	else if (v->kind == FR_VERDICT_DEADLOCK)
		fprintf(out, ": waits in a cycle: it never entered what the rank before it "
			"waits in, being stuck in the operation below\n");
	else if (cu->reason == FR_REASON_MISMATCH && v->has_op && is_p2p(&v->op))
		fprintf(out, ": its side of the message does not match the other side's\n");
	else if (cu->reason == FR_REASON_NOT_ENTERED && v->has_op && is_p2p(&v->op))
		fprintf(out, ": never posted the %s matching the operation above\n",
			v->op.type == FR_OP_SEND ? "receive" :
			v->op.type == FR_OP_RECV ? "send" : "operation");
	else
		fprintf(out, ": %s\n", cu->oom_killed ? "killed by the OOM killer (its node's kernel log says so)" :
							 reason_text(cu->reason));
	if (cu->crash) {
		char sname[16];

		fprintf(out, "  signal: %s (si_code %" PRId32 ") at 0x%" PRIx64 "\n",
			fr_signal_name(cu->crash->signo, sname), cu->crash->code,
			cu->crash->fault_addr);
		fr_thread_print(out, &cu->crash->thread);
	}
	if (cu->has_nccl_error) {
		char name[24];

		fprintf(out, "  NCCL error: %s (%" PRIu32 ") on %s%s%s\n",
			fr_nccl_result_name(cu->nccl_error.result, name), cu->nccl_error.result,
			cu->nccl_error.comm, cu->nccl_error.message[0] ? ": " : "",
			cu->nccl_error.message);
	}
	if (cu->has_exit && cu->reason == FR_REASON_EXITED) {
		fprintf(out, "  exit: %s", cu->exit.underscore ? "_exit()" : "exit()");
		if (cu->exit.has_code)
			fprintf(out, " with code %" PRId32, cu->exit.code);
		fprintf(out, ", %" PRIu32 " operation%s in flight\n", cu->exit.inflight,
			cu->exit.inflight == 1 ? "" : "s");
	}
	if (cu->has_op)
		print_op_line(out, cu->reason == FR_REASON_MISMATCH ? "  called: " :
				   "  in flight: ", &cu->op);
	if (cu->waited_s > 0) {
		char d[32];

		fr_corr_duration_text(d, sizeof(d), cu->waited_s);
		fprintf(out, "  waited: %s\n", d);
	}
	if (cu->has_last_completed)
		print_op_line(out, "  last completed: ", &cu->last_completed);
	else if (t && !v->has_op)
		fprintf(out, "  last completed: none in its evidence\n");
	else if (t)
		fprintf(out, "  last completed: none on %s in its evidence\n",
			v->op.comm[0] ? v->op.comm : "this communicator");
	fr_klog_print_culprit(out, v, cu, t);
	if (!t || t->status == FR_RANK_MISSING) {
		fprintf(out, "  no dump: %s\n", t ? "missing" : "no evidence at all (missing)");
		return;
	}
	print_posted(out, v, t);
	if (t->status != FR_RANK_DUMPED) {
		fprintf(out, "  no dump: %s (the daemon's live view only)\n",
			fr_rank_status_name(t->status));
		if (!t->nthreads)
			return;
	}
	if (t->dropped)
		fprintf(out, "  (%" PRIu64 " older entries lost to ring wrap)\n", t->dropped);
	print_stack(out, t);
}

/* Frames compared and shown when stacks are merged. */
#define MERGE_FRAMES FR_MERGE_FRAMES
#define MERGE_SHOWN 6
#define MERGE_GROUPS 8

/*
 * Where a stack is compared from: the outermost call into the communication
 * library (MPI_Allreduce, ncclAllReduce) when there is one. Below it, ranks
 * waiting in the same collective differ only in which progress function
 * they were caught in.
 */
static bool is_api_frame(const char *name)
{
	return name && (strncmp(name, "MPI_", 4) == 0 || strncmp(name, "PMPI_", 5) == 0 ||
			strncmp(name, "nccl", 4) == 0 || strncmp(name, "pnccl", 5) == 0);
}

struct stack_ref {
	uint64_t hash;
	uint32_t rank;
	const struct fr_frame *frames; /* from the first frame compared */
	size_t n;                      /* frames compared */
	size_t total;                  /* frames from `frames` (or `py`) to the outermost */
	/* Compared by its Python frames instead (all of them, innermost
	 * first): function, file and line. */
	const struct fr_pyframe *py;
};

static struct stack_ref py_stack_ref_of(uint32_t rank, const struct fr_thread *th)
{
	struct stack_ref ref = { FR_FNV_INIT, rank, th->frames, 0, th->npyframes, th->pyframes };

	ref.n = ref.total < MERGE_FRAMES ? ref.total : MERGE_FRAMES;
	ref.hash = fr_fnv1a(ref.hash, "py", 3);
	for (size_t i = 0; i < ref.n; i++) {
		const struct fr_pyframe *f = &ref.py[i];

		ref.hash = fr_fnv1a(ref.hash, f->function, strlen(f->function) + 1);
		ref.hash = fr_fnv1a(ref.hash, f->file, strlen(f->file) + 1);
		ref.hash = fr_fnv1a(ref.hash, &f->line, sizeof(f->line));
	}
	return ref;
}

static struct stack_ref stack_ref_of(uint32_t rank, const struct fr_thread *th)
{
	struct stack_ref ref = { FR_FNV_INIT, rank, th->frames, 0, th->nframes, NULL };
	size_t start = 0;

	for (size_t i = 0; i < th->nframes; i++)
		if (is_api_frame(th->frames[i].name))
			start = i;
	ref.frames = th->frames + start;
	ref.total = th->nframes - start;
	ref.n = ref.total < MERGE_FRAMES ? ref.total : MERGE_FRAMES;
	for (size_t i = 0; i < ref.n; i++) {
		const char *name = ref.frames[i].name ? ref.frames[i].name : "";

		ref.hash = fr_fnv1a(ref.hash, name, strlen(name) + 1);
	}
	return ref;
}

int fr_pyframes_cmp(const struct fr_pyframe *a, size_t na, const struct fr_pyframe *b, size_t nb)
{
	int d;

	na = na < MERGE_FRAMES ? na : MERGE_FRAMES;
	nb = nb < MERGE_FRAMES ? nb : MERGE_FRAMES;
	if (na != nb)
		return na < nb ? -1 : 1;
	for (size_t i = 0; i < na; i++) {
		if (a[i].line != b[i].line)
			return a[i].line < b[i].line ? -1 : 1;
		if ((d = strcmp(a[i].function, b[i].function)) || (d = strcmp(a[i].file, b[i].file)))
			return d;
	}
	return 0;
}

static bool same_stack(const struct stack_ref *a, const struct stack_ref *b)
{
	if (a->n != b->n || !a->py != !b->py)
		return false;
	if (a->py)
		return fr_pyframes_cmp(a->py, a->total, b->py, b->total) == 0;
	for (size_t i = 0; !a->py && i < a->n; i++) {
		const char *x = a->frames[i].name, *y = b->frames[i].name;

		if (x != y && (!x || !y || strcmp(x, y) != 0))
			return false;
	}
	return true;
}

static int cmp_stack_ref(const void *a, const void *b)
{
	const struct stack_ref *x = a, *y = b;

	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

struct stack_group {
	size_t first, n; /* a run of refs */
};

static int cmp_group(const void *a, const void *b)
{
	const struct stack_group *x = a, *y = b;

	return x->n != y->n ? (x->n > y->n ? -1 : 1) : (x->first > y->first) - (x->first < y->first);
}

void fr_stack_groups_free(struct fr_stack_groups *g)
{
	free(g->groups);
	free(g->ranks);
	memset(g, 0, sizeof(*g));
}

static int stack_groups_build(const struct fr_trace *const *idx, uint32_t world, bool python,
			      struct fr_stack_groups *out)
{
	struct stack_ref *refs = malloc((world ? world : 1) * sizeof(*refs));
	struct stack_group *runs = malloc((world ? world : 1) * sizeof(*runs));
	size_t n = 0, ng = 0;
	int rc = -ENOMEM;

	memset(out, 0, sizeof(*out));
	out->groups = malloc((world ? world : 1) * sizeof(*out->groups));
	out->ranks = malloc((world ? world : 1) * sizeof(*out->ranks));
	if (!refs || !runs || !out->groups || !out->ranks)
		goto out_free;
	for (uint32_t r = 0; r < world; r++) {
		const struct fr_thread *py = python ? fr_trace_py_thread(idx[r]) : NULL;
		const struct fr_thread *th = idx[r] ? fr_trace_app_thread(idx[r]) : NULL;

		if (py)
			refs[n++] = py_stack_ref_of(r, py);
		else if (th)
			refs[n++] = stack_ref_of(r, th);
	}
	qsort(refs, n, sizeof(*refs), cmp_stack_ref);
	/* Equal hashes are adjacent; within them, split on a real difference. */
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;

		while (j < n && refs[j].hash == refs[i].hash && same_stack(&refs[j], &refs[i]))
			j++;
		runs[ng++] = (struct stack_group){ i, j - i };
		i = j;
	}
	qsort(runs, ng, sizeof(*runs), cmp_group);
	/* Each group's ranks, ascending (a run is sorted by rank), one after
	 * the other in out->ranks. */
	for (size_t g = 0; g < ng; g++) {
		const struct stack_ref *ref = &refs[runs[g].first];
		struct fr_stack_group *sg = &out->groups[g];

		memset(sg, 0, sizeof(*sg));
		sg->ranks = out->ranks + out->nranks;
		sg->nranks = runs[g].n;
		for (size_t k = 0; k < runs[g].n; k++)
			out->ranks[out->nranks++] = refs[runs[g].first + k].rank;
		if (ref->py) {
			sg->thread = fr_trace_py_thread(idx[ref->rank]);
			sg->frames = sg->thread->frames;
			sg->nframes = sg->thread->nframes;
			sg->pyframes = ref->py;
			sg->npyframes = ref->total;
		} else {
			sg->thread = fr_trace_app_thread(idx[ref->rank]);
			sg->frames = ref->frames;
			sg->nframes = ref->total;
		}
	}
	out->ngroups = ng;
	rc = 0;
out_free:
	if (rc)
		fr_stack_groups_free(out);
	free(refs);
	free(runs);
	return rc;
}

int fr_stack_groups_build(const struct fr_trace *const *idx, uint32_t world,
			  struct fr_stack_groups *out)
{
	return stack_groups_build(idx, world, false, out);
}

int fr_stack_groups_build_python(const struct fr_trace *const *idx, uint32_t world,
				 struct fr_stack_groups *out)
{
	return stack_groups_build(idx, world, true, out);
}

/*
 * Ranks grouped by identical application stack (function names, innermost
 * first), largest group first, as STAT does: at 1024 ranks, "1023 ranks:
 * PMPI_Allreduce <- train_step <- main" and the odd one out.
 */
static void print_merged_stacks(FILE *out, const struct fr_trace *const *idx, uint32_t world)
{
	struct fr_stack_groups sg;
	char rt[256], text[2 * 256 + 32];

	if (fr_stack_groups_build_python(idx, world, &sg))
		return;
	if (sg.nranks < 2)
		goto out_free;
	fprintf(out, "\nStacks (%zu ranks, %zu distinct):\n", sg.nranks, sg.ngroups);
	for (size_t g = 0; g < sg.ngroups && g < MERGE_GROUPS; g++) {
		const struct fr_stack_group *grp = &sg.groups[g];

		fprintf(out, "  %zu %s (%s):", grp->nranks, grp->nranks == 1 ? "rank" : "ranks",
			fr_corr_ranks_text(rt, sizeof(rt), grp->ranks, grp->nranks));
		for (size_t i = 0; i < grp->npyframes && i < MERGE_SHOWN; i++) {
			fr_pyframe_text(text, sizeof(text), &grp->pyframes[i]);
			fprintf(out, "%s%s", i ? " <- " : " ", text);
		}
		for (size_t i = 0; !grp->pyframes && i < grp->nframes && i < MERGE_SHOWN; i++)
			fprintf(out, "%s%s", i ? " <- " : " ",
				grp->frames[i].name ? grp->frames[i].name : "??");
		fprintf(out, "%s\n",
			(grp->pyframes ? grp->npyframes : grp->nframes) > MERGE_SHOWN ? " <- ..." : "");
	}
	if (sg.ngroups > MERGE_GROUPS)
		fprintf(out, "  ... and %zu more distinct stacks\n", sg.ngroups - MERGE_GROUPS);
out_free:
	fr_stack_groups_free(&sg);
}

/*
 * "Ring windows differ (rank 3 kept seq 120-2167 of world, rank 5 kept
 * 0-2047); compared on the common range 120-2047"
 */
static void print_alignment(FILE *out, const struct fr_alignment *a)
{
	if (!a->ncomms)
		return;
	fprintf(out, "Ring windows differ (rank %" PRIu32 " kept seq %" PRIu64 "-%" PRIu64
		" of %s, rank %" PRIu32 " kept %" PRIu64 "-%" PRIu64 "); ", a->latest.rank,
		a->latest.first, a->latest.last, a->comm, a->earliest.rank, a->earliest.first,
		a->earliest.last);
	if (a->common_first <= a->common_last)
		fprintf(out, "compared on the common range %" PRIu64 "-%" PRIu64, a->common_first,
			a->common_last);
	else
		fprintf(out, "no seq of it was kept by every rank");
	if (a->ncomms > 1)
		fprintf(out, " (windows differ on %" PRIu32 " communicators)", a->ncomms);
	fprintf(out, "\n");
}

static void print_stragglers(FILE *out, const struct fr_verdict *v)
{
	char line[256];

	if (!v->nstragglers)
		return;
	if (v->nstragglers == 1) {
		fr_corr_straggler_text(line, sizeof(line), &v->stragglers[0]);
		fprintf(out, "Stragglers (information, not a hang): %s\n", line);
		return;
	}
	fprintf(out, "Stragglers (information, not a hang):\n");
	for (size_t i = 0; i < v->nstragglers && i < PRINT_STRAGGLERS_MAX; i++) {
		fr_corr_straggler_text(line, sizeof(line), &v->stragglers[i]);
		fprintf(out, "  %s\n", line);
	}
	if (v->nstragglers > PRINT_STRAGGLERS_MAX)
		fprintf(out, "  ... and %zu more\n", v->nstragglers - PRINT_STRAGGLERS_MAX);
}

/*
 * "Ranks by what they did:", one line per class, the largest first:
 * "  3 ranks (0,2-3), the majority: called all_reduce #4 on a before ...".
 */
static void print_classes(FILE *out, const struct fr_verdict *v)
{
	char rt[512];

	if (!v->nclasses)
		return;
	fprintf(out, "Ranks by what they did%s:\n", v->classes[0].majority ? "" : " (no majority)");
	for (size_t i = 0; i < v->nclasses; i++) {
		const struct fr_rank_class *c = &v->classes[i];

		fprintf(out, "  %zu %s (%s)%s: %s\n", c->nranks, c->nranks == 1 ? "rank" : "ranks",
			fr_corr_ranks_text(rt, sizeof(rt), c->ranks, c->nranks),
			c->majority ? ", the majority" : "", c->behaviour);
	}
}

/*
 * Many culprits (every member of a large stuck communicator): one line per
 * reason with rank ranges. `r` has room for every culprit.
 */
static void print_culprit_reasons(FILE *out, const struct fr_verdict *v, uint32_t *r)
{
	char rt[512];

	fprintf(out, "\nCulprits: %zu\n", v->nculprits);
	for (unsigned reason = 0; reason < FR_CORR_NREASONS; reason++) {
		size_t n = 0;

		for (size_t i = 0; i < v->nculprits; i++)
			if (v->culprits[i].reason == reason)
				r[n++] = v->culprits[i].rank;
		if (!n)
			continue;
		fprintf(out, "  %s: %s %s (%zu): %s\n", fr_reason_name(reason),
			n == 1 ? "rank" : "ranks", fr_corr_ranks_text(rt, sizeof(rt), r, n), n,
			reason_text((enum fr_reason)reason));
	}
}

void fr_verdict_print(FILE *out, const struct fr_verdict *v,
		      const struct fr_trace *const *traces, size_t ntraces)
{
	/* An index by rank; without memory, a linear search per lookup. */
	const struct fr_trace **idx = calloc(v->world_size ? v->world_size : 1, sizeof(*idx));
	char rt[512];
	uint32_t *r = NULL;
	size_t n = 0;
	size_t shown = 0;

	for (size_t i = 0; idx && i < ntraces; i++)
		if (traces[i] && traces[i]->rank < v->world_size && !idx[traces[i]->rank])
			idx[traces[i]->rank] = traces[i];

	fprintf(out, "%s\n", v->summary);
	fprintf(out, "\nVerdict: %s\n", fr_verdict_name(v->kind));
	if (v->has_op) {
		print_op_line(out, v->kind != FR_VERDICT_MISMATCH ? "Operation: " :
				   is_p2p(&v->op) ? "Operation (the send): " :
				   "Operation (majority): ", &v->op);
		fprintf(out, "Communicator: %s, %" PRIu32 " ranks [%s]\n", v->op.comm,
			v->comm_size,
			fr_corr_members_text(rt, sizeof(rt), v->comm_ranks, v->comm_size));
	}
	if (v->nwaiting)
		print_waiting(out, v, traces, ntraces, idx);
	print_classes(out, v);
	fprintf(out, "Evidence: %zu of %" PRIu32 " ranks\n", v->nranks_with_evidence,
		v->world_size);
	r = malloc((v->world_size ? v->world_size : 1) * sizeof(*r));
	if (r && idx) {
		for (uint32_t i = 0; i < v->world_size; i++)
			if (!idx[i] || idx[i]->status == FR_RANK_MISSING)
				r[n++] = i;
		if (n)
			fprintf(out, "  no evidence: %s %s\n", n == 1 ? "rank" : "ranks",
				fr_corr_ranks_text(rt, sizeof(rt), r, n));
		for (int s = FR_RANK_LIVE; s < FR_RANK_MISSING; s++) {
			n = 0;
			for (uint32_t i = 0; i < v->world_size; i++)
				if (idx[i] && (int)idx[i]->status == s)
					r[n++] = i;
			if (n)
				fprintf(out, "  no dump, %s: %s %s\n",
					fr_rank_status_name((unsigned)s), n == 1 ? "rank" : "ranks",
					fr_corr_ranks_text(rt, sizeof(rt), r, n));
		}
	}

	print_alignment(out, &v->aligned);
	print_stragglers(out, v);

	if (v->nculprits > PRINT_CULPRITS_MAX && r)
		print_culprit_reasons(out, v, r);
	for (size_t i = 0; i < v->nculprits; i++) {
		uint32_t rank = v->culprits[i].rank;
		const struct fr_trace *t = idx ? (rank < v->world_size ? idx[rank] : NULL) :
					   fr_corr_trace_of(traces, ntraces, rank);

		if (v->nculprits > PRINT_CULPRITS_MAX && i == PRINT_CULPRITS_DETAIL) {
			fprintf(out, "\n... and %zu more culprits, listed by reason above\n",
				v->nculprits - i);
			break;
		}
		print_culprit(out, v, &v->culprits[i], t);
		shown = i + 1;
	}
	fr_klog_print_rest(out, v, shown);
	if (idx)
		print_merged_stacks(out, idx, v->world_size);
	free(r);
	free(idx);
}
