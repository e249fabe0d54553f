/*
 * The correlation engine: from every rank's evidence (struct fr_trace), find
 * the operation a job is stuck on and name the culprit rank(s) and why. The
 * daemon's live verdict and fr-analyze's offline verdict both come from
 * fr_correlate(); the JSON form (fr_verdict_to_json) is the stable contract
 * documented in the README.
 *
 * Model. Operations are matched across ranks by (communicator id, seq).
 * A rank "waits" when it has an operation in flight (state entered, not
 * completed) that blocks it: a blocking one, or a non-blocking one it is
 * waiting on (op.waited); a posted non-blocking op alone is not a wait. A
 * collective (c, s) is stuck when some member has it in flight; the members
 * that have not entered it (last_entered on c < s and no entry of c as late
 * as s in its ring, or no evidence of it) are what the waiters wait for.
 * A rank that waits on nothing but is waited for is a sink: the root cause.
 * A later collective that the waiters of (c, s) pile into (e.g. a world
 * barrier) is a consequence.
 */
#ifndef FR_CORRELATE_H
#define FR_CORRELATE_H

#include <jansson.h>
#include <stdio.h>

#include "trace.h"

#define FR_VERDICTS(X)                \
	X(OK, "ok")                   \
	X(HANG, "hang")               \
	X(MISMATCH, "mismatch")       \
	X(DEADLOCK, "deadlock")       \
	X(CRASH, "crash")

enum fr_verdict_kind {
#define FR_V_ENUM(e, n) FR_VERDICT_##e,
	FR_VERDICTS(FR_V_ENUM)
#undef FR_V_ENUM
};

#define FR_REASONS(X)                                                         \
	X(NOT_ENTERED, "not_entered")   /* never entered the op its peers wait in */ \
	X(UNRESPONSIVE, "unresponsive") /* stopped heartbeating or answering */      \
	X(DISCONNECTED, "disconnected") /* lost its connection without finalising */ \
	X(FINISHED, "finished")         /* finalised while peers still wait on it */  \
	X(MISMATCH, "mismatch")         /* called a different op at the same seq */   \
	X(STUCK_IN_OP, "stuck_in_op")   /* every member entered; none completes */ \
	X(CRASHED, "crashed")           /* died of a fatal signal (its agent said CRASH) */ \
	X(EXITED, "exited")             /* exited without finalising (its agent said EXIT) */ \
	X(KILLED, "killed")             /* gone without a word while needed: killed or lost */ \
	X(NCCL_ERROR, "nccl_error")     /* an NCCL communicator of it failed (ncclCommGetAsyncError) */

enum fr_reason {
#define FR_R_ENUM(e, n) FR_REASON_##e,
	FR_REASONS(FR_R_ENUM)
#undef FR_R_ENUM
};

const char *fr_verdict_name(unsigned v);
const char *fr_reason_name(unsigned r);

struct fr_klog;

/* What a crash verdict's summary says of a killed rank, or of the first of
 * several (fr_klog_name_oom() finds these words to say more). */
#define FR_KILLED_WORDS_ONE "was killed or lost (its connection dropped without a goodbye)"
#define FR_KILLED_WORDS_MANY "were killed or lost (their connections dropped without a goodbye)"

struct fr_culprit {
	uint32_t rank;
	enum fr_reason reason;
	char host[FR_HOST_MAX + 1];
	uint32_t pid;
	bool has_last_completed;
	struct fr_op last_completed;  /* its last completed op on the stuck comm */
	bool has_op;
	/* What it called instead (mismatch), what it waits in (deadlock), its
	 * own copy of the stuck operation (stuck_in_op). */
	struct fr_op op;
	double waited_s;              /* stuck_in_op: how long it has waited in op; else 0 */
	struct fr_crash *crash;       /* owned; crashed only: signal, address, stack */
	bool has_exit;                /* exited and killed: how it ended */
	struct fr_exit exit;
	bool has_nccl_error;          /* nccl_error: what NCCL said */
	struct fr_nccl_error nccl_error;
	/* killed: the kernel log of its node shows the OOM killer killing
	 * its pid (fr_klog_name_oom()). */
	bool oom_killed;
	/* Owned; NULL unless its application thread runs Python: that
	 * thread, whose Python frames --json gives (fr_correlate()). */
	struct fr_thread *py_thread;
};

/*
 * A rank consistently late entering the collectives of one communicator
 * (see fr_correlate()). Information about a job that does not hang, not a
 * fault: it never changes the verdict.
 */
struct fr_straggler {
	uint32_t rank;
	char comm[FR_COMM_ID_MAX + 1];
	uint32_t late_count;          /* matched collectives it entered last */
	uint32_t matched;             /* collectives of comm that every member entered */
	double median_late_s;         /* when it was last: how long after the
	                               * next-latest member it entered, median */
};

/* The collectives one rank kept of a communicator: seqs first..last. */
struct fr_window {
	uint32_t rank;
	uint64_t first;
	uint64_t last;
};

/*
 * Ring windows that differ. Each rank keeps only its newest entries, so
 * ranks keep different stretches of a communicator's collectives; they are
 * compared only where they overlap. Shown for the verdict's communicator
 * when its members' windows differ, else for the one whose members'
 * windows start furthest apart.
 */
struct fr_alignment {
	uint32_t ncomms;              /* communicators whose windows differ; 0: none */
	char comm[FR_COMM_ID_MAX + 1];
	struct fr_window latest;      /* the member whose window starts latest */
	struct fr_window earliest;    /* the member whose window starts earliest */
	/* Seqs every member with entries kept: common_first..common_last,
	 * none when common_first > common_last. */
	uint64_t common_first;
	uint64_t common_last;
};

/* Classes a verdict lists at most, the largest first. */
#define FR_CLASSES_MAX 16

/*
 * Ranks that did the same thing where ranks disagree: called one signature
 * at a mismatched collective, or (a deadlock of collectives) waited in the
 * same collective of the cycle. The largest class, when it is larger than
 * every other, is the majority; the others are the odd ones out, the
 * culprits.
 */
struct fr_rank_class {
	size_t nranks;
	const uint32_t *ranks;        /* ascending, in the verdict's class_ranks */
	bool majority;
	/* What the class called (mismatch) or waits in (deadlock). */
	struct fr_op op;
	/* Deadlock, when every rank of the class is a member of it and never
	 * entered it: the collective of the cycle it did not call first. */
	bool has_before;
	struct fr_op before;
	char behaviour[256];          /* "called all_reduce #3 on b before all_reduce #3 on a" */
};

struct fr_verdict {
	enum fr_verdict_kind kind;
	size_t nculprits;
	struct fr_culprit *culprits;  /* owned */
	bool has_op;
	struct fr_op op;              /* the op the job is stuck on / disagrees on */
	uint32_t comm_size;
	uint32_t *comm_ranks;         /* owned: members of op.comm, global ranks in
	                               * communicator order; FR_RANK_UNKNOWN for a
	                               * member no evidence names */
	size_t nwaiting;
	uint32_t *waiting;            /* owned: ranks waiting, ascending */
	double waited_s;              /* longest wait among the waiting ranks */
	uint32_t world_size;
	size_t nranks_with_evidence;
	size_t nstragglers;
	struct fr_straggler *stragglers; /* owned; only in ok verdicts */
	struct fr_alignment aligned;
	/* Deadlocks of collectives and collective mismatches only: the ranks
	 * involved by what they did, the FR_CLASSES_MAX largest classes,
	 * largest first; none has `majority` on a tie. */
	size_t nclasses;
	struct fr_rank_class *classes; /* owned */
	uint32_t *class_ranks;        /* owned: every listed class's ranks */
	char summary[1024];           /* one line, for a person */
	/* Owned: the strings of its operations, which outlive the traces. */
	struct fr_strs *strs;
	/* Borrowed, set by the caller after fr_correlate() (fr-analyze, from
	 * the manifest): the nodes' kernel logs of the incident, which the
	 * report and --json tell under the culprits (kernel_log.h). */
	const struct fr_klog *klogs;
	size_t nklogs;
};

/*
 * Correlates the evidence of one job. `traces` holds at most one trace per
 * rank, in any order (NULL entries are skipped); ranks of `world_size` that
 * have no trace count as missing. Fills `v` (free with fr_verdict_free()).
 * Returns 0 or -ENOMEM.
 *
 * Precedence:
 *  1. A mismatch in a collective some member still has in flight: the
 *     members' signatures at the same (comm, seq) -- type, count, dtype,
 *     root, redop -- differ. Culprits: the ranks whose signature is not the
 *     majority's; on a tie, the ranks not sharing the lowest rank's (the
 *     summary then says there is no majority); `classes` lists them by
 *     signature. So
 *     the odd rank is named whichever rank's evidence comes first. Counts
 *     are not compared for the vector collectives (all_gatherv, gatherv,
 *     scatterv, all_to_allv); they are for all_gather (its output is the
 *     input times the communicator's size, so equal inputs are what can be
 *     checked from the count alone) and reduce_scatter (every writer
 *     records a count all members share).
 *  2. A point-to-point mismatch in flight: send #k from a to b and b's
 *     receive #k from a disagree on the bytes (see below). No majority
 *     names one side of a pair: both ranks are culprits (reason mismatch,
 *     each with its own operation as "called"), and op is the send.
 *  3. A hang: culprits are the unresponsive/disconnected/finished members
 *     of the stuck communicator if any, else the sink ranks that never
 *     entered the op (reason not_entered), else every member (stuck_in_op);
 *     or a deadlock. A deadlock of collectives (communicators whose
 *     collectives ranks called in different orders) groups every rank
 *     waiting in one of the cycle's collectives into `classes` by which
 *     one; culprits are the ranks outside the largest class, the odd ones
 *     out (reason not_entered, what each waits in as its op), and op what
 *     the largest waits in; when no class is the largest, every rank
 *     classed. So rank 1 alone of 4 calling b before a is named, not the
 *     cycle's pair. Found in one pass over the ranks: linear in them. A
 *     deadlock with a p2p wait names the ranks of its cycle.
 *  4. Nothing waits, but a collective that completed on every member that
 *     kept it disagrees on its type, root, reduction or the bytes it moved
 *     (not on how each side spelled them: MPI_LONG and MPI_INT64_T are one
 *     message), except for the payload of gather, scatter and all_to_all,
 *     whose roots, or PyTorch's uneven all_to_all, record what differs
 *     legitimately. A bug even though the library matched the calls; the
 *     summary says it completed.
 *  5. Likewise a completed point-to-point pair that disagrees.
 *  6. Otherwise ok, with stragglers.
 * Above all of them, a crash: when some rank's evidence says it died of a
 * fatal signal (trace.crash), or had an asynchronous NCCL error
 * (trace.nccl_error), or ended as fr_exit_is_fault() says
 * (trace.exit: an exit with work in flight or a non-zero status, or killed),
 * or exited without finalising and is a culprit of the checks above (its
 * peers wait for it), the verdict is crash, its culprits those ranks
 * (reason crashed, nccl_error, exited or killed), and what the checks above found (the
 * hang of the ranks that wait for it) stays as the op and the waiting
 * ranks: the consequence, said in the summary.
 * Among several mismatches, the lowest seq (then communicator id) is named.
 *
 * Point-to-point pairs. The agent numbers sends and receives per
 * (communicator, peer, direction), so a's send #k to b is b's receive #k
 * from a. A rank's p2p operations that are not numbered so -- seqs that
 * skip within a (peer, direction), or one sequence across several peers or
 * directions, as PyTorch's p2p_seq_id -- are not paired. Receives from any
 * source and sendrecvs are not paired. Over NCCL (any library whose name
 * does not contain "MPI", or an operation on a GPU) a receive must take
 * exactly what is sent: any difference is a mismatch. MPI also matches by
 * tag, which the evidence lacks, so that its k-th send and k-th receive
 * may be different messages: MPI pairs are not compared.
 *
 * Ring windows. Each rank's ring keeps only its newest entries, so ranks
 * keep different stretches of a communicator's collectives. They are
 * compared only at the (comm, seq) that two or more of them kept; a member
 * whose ring kept a later collective of comm than the stuck one has
 * entered it (even without progress counters). When the members of some
 * communicator kept windows that start at different seqs, `aligned` says
 * so (always filled, in every verdict).
 *
 * Stragglers (ok verdicts only: a hang or a mismatch is the answer then).
 * Judged per communicator on the collectives that every member entered
 * with an entry time (every member known and each one's entry in its
 * window): a member is a straggler when, over at least 8 of them, it
 * entered last in at least half (three quarters in a communicator of two,
 * where one of the two is always last), entering a median of at least
 * 1 ms after the next-latest member when it was last, and at least twice
 * the median by which the last member of the others was last. Members
 * equally late share the last place, and none may be named. Listed by
 * median lateness, latest first. Who came last, and by how much, is read
 * from how long each member waited in the call when that is timed on one
 * clock and the call ends for all at once (an MPI rank's blocking
 * all_reduce, all_gather, reduce_scatter, all_to_all or barrier): hosts'
 * clocks may disagree by more than a straggler is late. Otherwise
 * (NCCL, PyTorch: completions found by polling) from the entry times.
 */
int fr_correlate(const struct fr_trace *const *traces, size_t ntraces, uint32_t world_size,
		 struct fr_verdict *v);

/*
 * An incident no rank dumped for, read offline (fr-analyze): the whole job
 * went silent, the worst case of all. When `v` (from fr_correlate() on the
 * same traces) is ok because the daemon's live view has nothing in flight,
 * but no trace is a rank's own dump and some ranks were found unresponsive
 * or disconnected, those ranks are the finding: `v` becomes a hang without
 * an operation (op null), each such rank a culprit with reason unresponsive
 * or disconnected and its last completed operation on any communicator,
 * and the summary names them. fr_correlate() itself keeps judging an
 * unresponsive rank that nobody waits on as no hang (yet): the daemon's
 * live view is the daemon's to judge. Returns 1 when `v` was changed, 0
 * when not, -ENOMEM (`v` then unchanged).
 */
int fr_verdict_name_silent(struct fr_verdict *v, const struct fr_trace *const *traces,
			   size_t ntraces);

void fr_verdict_free(struct fr_verdict *v);

/*
 * The stable JSON contract:
 * {"verdict", "culprits": [{"rank","reason","host","pid", "last_completed": op?,
 *  "called": op?, "waited_s", and for reason crashed "signal", "si_code",
 *  "fault_addr", "stack": [{"name","offset","ip"}], for reason exited
 *  "exit_code" (null when not known) and "inflight", for reason killed
 *  "inflight", for reason nccl_error "nccl_result", "nccl_result_name",
 *  "comm" and "message"}], "op": {"comm","comm_ranks","seq","type","count",
 *  "dtype","bytes","root","peer","is_p2p","state","nonblocking","waited",
 *  "comm_size", "gpu_state" (GPU operations only)}
 *  | null (comm_ranks: the known members only),
 *  "waiting_ranks": [...],
 *  "waited_s", "world_size",
 *  "stragglers": [{"rank","comm","late_count","matched","median_late_s"}]
 *   (empty unless the verdict is ok and there are some),
 *  "aligned": {"comms"} when no windows differ, else {"comms", "comm",
 *   "common_first", "common_last", "latest": {"rank","first","last"},
 *   "earliest": {"rank","first","last"}},
 *  "classes": [{"ranks","count","majority","behaviour","called": op,
 *   "before": op?}] (empty unless a deadlock of collectives or a
 *   collective mismatch),
 *  "summary"}
 * Returns a new reference.
 */
json_t *fr_verdict_to_json(const struct fr_verdict *v);
json_t *fr_op_to_json(const struct fr_op *op);

/*
 * The report for a person: the summary line first, then evidence (the op,
 * who waits, whether ring windows differ, stragglers, each culprit's last
 * completed op and stack, taken from its trace when present, and the
 * ranks' stacks merged). Ranks are written as ranges throughout; beyond 8
 * culprits they are listed by reason and only the first 3 described, so
 * that the report of a 1024-rank job stays a page long.
 */
void fr_verdict_print(FILE *out, const struct fr_verdict *v,
		      const struct fr_trace *const *traces, size_t ntraces);

/* One thread's stack as the report prints it: "  thread TID "NAME":" and
 * its frames, innermost first; its Python frames (when it has some) among
 * the native ones where fr_thread_interleaves() says they fit, else
 * before them. */
void fr_thread_print(FILE *out, const struct fr_thread *th);
/*
 * Whether `th`'s Python frames can be shown among its native ones, as
 * py-spy --native shows them: each native frame of CPython's evaluation
 * loop (_PyEval_EvalFrameDefault) runs one group of Python frames, from
 * an entry frame (struct fr_pyframe.entry) inwards, the innermost group in
 * the innermost call. True only when both stacks are whole and the loop's
 * frames are as many as the entries: a stack cut short, a frame changing
 * as it was read or a loop without a symbol leaves them apart rather than
 * paired by guess.
 */
bool fr_thread_interleaves(const struct fr_thread *th);
/* A Python frame as the report shows it: "load_batch (train.py:41)". */
void fr_pyframe_text(char *buf, size_t len, const struct fr_pyframe *f);

/*
 * Ranks whose application stacks are the same. A rank's application stack
 * is its first thread with frames that is not the agent's own; two are the
 * same when the names of their frames agree from the outermost call into
 * the communication library (MPI_*, nccl*) outwards, 16 frames at most, so
 * that ranks waiting in one collective group together whichever progress
 * function caught them. This is the grouping fr-analyze prints under
 * "Stacks"; the daemon's live /v1/jobs/<job>/stacks serves it too.
 */
struct fr_stack_group {
	size_t nranks;
	const uint32_t *ranks;          /* ascending, in the groups' `ranks` */
	/* The lowest rank's: its application thread, and its frames from the
	 * first one compared, innermost first (borrowed from the traces). */
	const struct fr_thread *thread;
	const struct fr_frame *frames;
	size_t nframes;                 /* from `frames` to the outermost */
	/* Grouped by Python frames: the thread's, innermost first, and
	 * `frames` all of its native ones; else NULL. */
	const struct fr_pyframe *pyframes;
	size_t npyframes;
};

struct fr_stack_groups {
	size_t nranks;                  /* ranks with an application stack */
	size_t ngroups;
	struct fr_stack_group *groups;  /* largest first; owned */
	uint32_t *ranks;                /* every group's ranks; owned */
};

/*
 * Groups the stacks of `idx`, an index by rank of `world` entries (NULL
 * where a rank has no trace). Returns 0 or -ENOMEM; `out` then owns its
 * arrays (fr_stack_groups_free()) and borrows from the traces, which must
 * outlive it.
 */
int fr_stack_groups_build(const struct fr_trace *const *idx, uint32_t world,
			  struct fr_stack_groups *out);
/* The same, but a rank whose thread runs Python is grouped by its Python
 * frames (function, file, line): ranks on the same line of the script are
 * one group whatever the library under it does. The report's grouping. */
int fr_stack_groups_build_python(const struct fr_trace *const *idx, uint32_t world,
				 struct fr_stack_groups *out);
void fr_stack_groups_free(struct fr_stack_groups *g);

/* The frames, from the first one compared, by which two stacks are told
 * apart when merged: ranks that agree on these are one group. */
#define FR_MERGE_FRAMES 16
/*
 * The grouping rule for Python stacks (innermost first), for whoever merges
 * groups again (the central daemon merging its nodes'): 0 when two stacks
 * are one group of fr_stack_groups_build_python() (the same function, file
 * and line in each of their first FR_MERGE_FRAMES frames), else below or
 * above 0, a total order as strcmp()'s.
 */
int fr_pyframes_cmp(const struct fr_pyframe *a, size_t na, const struct fr_pyframe *b, size_t nb);

/*
 * Formats ascending ranks as ranges, "0-2,4-5". Always NUL-terminates;
 * returns the length it needed (like snprintf).
 */
size_t fr_format_ranks(char *buf, size_t cap, const uint32_t *ranks, size_t n);

/*
 * Tells apart communicators that share an id but not their members: the
 * process groups PyTorch's split_group makes have one name on every rank,
 * each color its own members. Where ranks list every member of an id and
 * the lists differ, each list's communicator is renamed "ID:RANKS" ("1:0-1",
 * "1:2-3"; "ID:#HASH" when that is too long), in its traces' communicators
 * and operations alike, so that correlation never mixes them; lists with
 * members not known (an NCCL rank knows only itself) are left to its
 * merging. Says what it renamed on `note` (NULL: nothing), lines that
 * begin "PROG: ". Returns how many ids were split, or -ENOMEM (traces then
 * partly renamed, still whole).
 */
int fr_traces_split_comms(struct fr_trace *const *traces, size_t n, FILE *note,
			  const char *prog);

#endif

