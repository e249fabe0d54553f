/*
 * The in-memory model of one rank's evidence: its identity, communicators,
 * flight-recorder entries and thread stacks. A dump file (dumps/FORMAT.md) is
 * this model in JSON; the daemon builds the same model from its live view of
 * a rank, so that the correlation engine (correlate.h) reads both alike.
 */
#ifndef FR_TRACE_H
#define FR_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../protocol/op.h"
#include "../protocol/wire.h"

struct fr_arena;
struct fr_strs;

/* Where a rank's evidence came from, and what became of the rank. */
#define FR_RANK_STATUSES(X)                                                   \
	X(DUMPED, "dumped")             /* its own dump: complete evidence */ \
	X(LIVE, "live")                 /* the daemon's live view only */     \
	X(UNRESPONSIVE, "unresponsive") /* stopped heartbeating / did not answer */ \
	X(DISCONNECTED, "disconnected") /* connection lost without a goodbye */     \
	X(FINISHED, "finished")         /* said goodbye (finalised) */              \
	X(MISSING, "missing")           /* no evidence at all */

enum fr_rank_status {
#define FR_RS_ENUM(e, n) FR_RANK_##e,
	FR_RANK_STATUSES(FR_RS_ENUM)
#undef FR_RS_ENUM
	FR_RANK__COUNT
};

const char *fr_rank_status_name(unsigned s);
/* Returns -1 for an unknown name. */
int fr_rank_status_from_name(const char *name);

/*
 * One flight-recorder entry. Two million of them are read at once for a
 * large incident, and correlating reads them all again: each byte of it is
 * two megabytes to fault in and to walk. So it holds its strings (the
 * communicator id, the datatype, the reduction), which repeat from entry to
 * entry, as pointers to the trace's one copy of each (fr_trace_str): never
 * NULL, "" when unknown, valid as long as the trace.
 */
struct fr_op {
	enum fr_op_type type : 8;
	enum fr_op_state state : 8;
	bool is_p2p;
	bool nonblocking;
	bool waited;        /* non-blocking, and the rank blocks in a Wait on it */
	/* Enqueued on a GPU stream (NCCL): the call returned at once and the
	 * operation completes on the device; `started` once the device has
	 * reached it. Known while in flight ("scheduled"/"started" in dumps). */
	bool gpu;
	bool started;
	bool captured;      /* enqueued during CUDA graph capture: runs at replays */
	int32_t root;       /* global rank of the root for rooted collectives, else -1 */
	/* Communicator rank of the p2p peer or of the root, -1 if none: the
	 * global rank may be unknown to the recording rank (NCCL) and is then
	 * found from the communicator's members as the other ranks report them. */
	int32_t peer_in_comm;
	int32_t peer;       /* global rank of the p2p peer, -1 if none/any/unknown */
	/* An all_gather's output elements per input element, a
	 * reduce_scatter's input elements per output element: the
	 * communicator's size in a well-formed call. 0 when not recorded (our
	 * agents record one count), FR_SIZE_RATIO_UNEVEN when not a whole
	 * multiple. */
	uint32_t size_ratio;
	uint64_t seq;       /* collective seq (collectives) or p2p seq (p2p) */
	uint64_t count;     /* elements */
	uint64_t bytes;     /* count x datatype size */
	uint64_t t_entered_ns;   /* CLOCK_REALTIME */
	uint64_t t_completed_ns; /* 0 while not completed */
	/* When the op began to block the rank: t_entered_ns for blocking ops,
	 * the start of the Wait for waited non-blocking ones, 0 otherwise. */
	uint64_t t_started_ns;
	uint64_t record_id;
	const char *comm;   /* at most FR_COMM_ID_MAX bytes */
	const char *dtype;  /* "double", "int32", "derived", ...: FR_DTYPE_MAX */
	const char *redop;  /* "sum", "max", ... or "": FR_REDOP_MAX */
};

#define FR_SIZE_RATIO_UNEVEN UINT32_MAX

/* The longest reduction name an operation keeps. */
#define FR_REDOP_MAX 15

/* One communicator as seen by this rank. */
struct fr_comm {
	char id[FR_COMM_ID_MAX + 1];
	char desc[FR_COMM_DESC_MAX + 1];
	uint32_t rank;      /* this rank's rank in it */
	uint32_t size;
	uint32_t *members;  /* global ranks, size entries, owned */
	uint64_t last_entered;
	uint64_t last_completed;
};

struct fr_frame {
	char *name;        /* symbol, owned; NULL when unknown */
	uint64_t offset;   /* from the symbol's start */
	uint64_t ip;
};

/* A frame of the Python interpreter's own stack (agent/pyframes.c). */
struct fr_pyframe {
	char *function;    /* the code's qualified name, owned */
	char *file;        /* owned */
	uint32_t line;     /* 0 when the interpreter has none for where it is */
	/* The frame at which a call of the evaluation loop began: it and
	 * the frames inner to it, up to the next entry frame, are what that
	 * one call of _PyEval_EvalFrameDefault runs (calls between Python
	 * functions do not call the loop again). A thread has every entry
	 * marked or none. */
	bool entry;
};

struct fr_thread {
	uint32_t tid;
	char name[32];
	bool current;      /* the thread that wrote the dump */
	size_t nframes;
	struct fr_frame *frames; /* innermost first, owned */
	/* Its Python frames, innermost first, when it runs Python; owned. */
	size_t npyframes;
	struct fr_pyframe *pyframes;
	/* Frames past the last in `pyframes` could not be read consistently
	 * (the interpreter changed them as they were read, or too deep). */
	bool py_truncated;
};

/* Frees what a thread owns (not the thread) and zeroes its frames. */
void fr_thread_free(struct fr_thread *th);
/* A deep copy of `src` into `dst`; on -ENOMEM, `dst` owns what it got so
 * far (fr_thread_free it). */
int fr_thread_copy(struct fr_thread *dst, const struct fr_thread *src);

/*
 * How a rank died of a fatal signal: what its agent's signal handler
 * recorded (agent/crash.c), sent to the daemon as CRASH and written into
 * dumps and manifests as "crash" (dumps/FORMAT.md).
 */
struct fr_crash {
	uint32_t signo;
	int32_t code;          /* si_code */
	uint64_t fault_addr;
	uint64_t time_ns;      /* CLOCK_REALTIME */
	uint64_t ring_head;    /* the ring's next record id when it crashed */
	struct fr_thread thread; /* the crashing thread: tid and stack; name may be "" */
};

/* "SIGSEGV", ...; "SIG<n>" in `buf` (16 bytes) for others. */
const char *fr_signal_name(unsigned signo, char buf[16]);
/* A deep copy of `src` into a new *dst (NULL src: *dst NULL). 0 or -ENOMEM. */
int fr_crash_copy(struct fr_crash **dst, const struct fr_crash *src);
/* The crash a CRASH message tells, in a new *dst. 0 or -ENOMEM. */
int fr_crash_from_wire(struct fr_crash **dst, const struct fr_msg_crash *m);
void fr_crash_free(struct fr_crash *c);
/* The function the crash's stack was in: its first frame named by a
 * symbol, past abort()'s and raise()'s; else the first with a name (a
 * module's, "[libc.so.6]"), or NULL. */
const char *fr_crash_function(const struct fr_crash *c);

/*
 * How a rank ended other than by a fatal signal or a goodbye after
 * finalising (dumps/FORMAT.md, "Exits"):
 *   FR_EXIT_EXITED  its agent said EXIT: exit(), _exit() or a return from
 *                   main without finalising, or with operations in flight;
 *   FR_EXIT_KILLED  its connection dropped without a goodbye, a CRASH or an
 *                   EXIT while it had an operation in flight or its peers
 *                   waited on it: killed (SIGKILL, the OOM killer) or lost,
 *                   as far as the daemon can tell.
 */
enum fr_exit_kind { FR_EXIT_EXITED = 1, FR_EXIT_KILLED = 2 };
struct fr_exit {
	enum fr_exit_kind kind;
	bool has_code;         /* exited: the status it asked for is known */
	int32_t code;
	bool underscore;       /* exited by _exit()/_Exit(): no atexit handlers ran */
	bool finalised;        /* every communicator had been destroyed */
	uint32_t inflight;     /* operations in flight that blocked it */
	uint64_t time_ns;      /* CLOCK_REALTIME of the exit, or when the daemon saw it go */
	uint64_t ring_head;    /* exited: the ring's next record id; killed: 0 */
};

/* The exit an EXIT message tells (kind exited). */
void fr_exit_from_wire(struct fr_exit *e, const struct fr_msg_exit *m);
/* "exited", "killed"; NULL for neither. */
const char *fr_exit_kind_name(unsigned kind);
/* An exit a rank's peers should hear of at once: killed, or an exit with
 * operations in flight or a non-zero status. (An exit(0) with nothing in
 * flight is taken for a goodbye until its peers wait on it.) */
bool fr_exit_is_fault(const struct fr_exit *e);

/*
 * An asynchronous NCCL error on one of the rank's communicators: what
 * ncclCommGetAsyncError said (the agent asks every 100 ms), sent as
 * NCCL_ERROR and written into dumps and manifests as "nccl_error"
 * (dumps/FORMAT.md, "NCCL errors"). The first one the rank had.
 */
struct fr_nccl_error {
	char comm[FR_COMM_ID_MAX + 1];
	uint32_t result;       /* ncclResult_t, not 0 */
	uint64_t time_ns;      /* when the agent saw it, CLOCK_REALTIME */
	char message[FR_WIRE_NCCL_MESSAGE_MAX + 1]; /* ncclGetLastError(), may be "" */
};

/* "ncclRemoteError", ...; "ncclResult <n>" in `buf` (24 bytes) for others. */
const char *fr_nccl_result_name(uint32_t result, char buf[24]);
void fr_nccl_error_from_wire(struct fr_nccl_error *e, const struct fr_msg_nccl_error *m);

/*
 * What a summary of a rank's evidence says of itself (dumps/summary.h): a
 * node daemon keeps the rank's full dump and sends this smaller one up.
 */
#define FR_SUMMARY_PATH_MAX 4095
struct fr_trace_summary {
	char node[FR_HOST_MAX + 1];              /* the node that keeps the full dump */
	/* Its path on that node (at most FR_SUMMARY_PATH_MAX bytes), owned:
	 * not an array of the longest, which was 4 KiB a rank, 280 MiB of
	 * an incident of 65,536 summaries. */
	char *full_dump;
	uint64_t entries_left_out;               /* entries of the full dump not here */
	uint64_t threads_left_out;               /* threads of the full dump not here */
};

/* The longest python_note. */
#define FR_PYTHON_NOTE_MAX 127

struct fr_trace {
	enum fr_rank_status status;
	char job[FR_JOB_MAX + 1];
	uint32_t rank;
	uint32_t world_size;
	char host[FR_HOST_MAX + 1];
	uint32_t pid;
	char comm_lib[FR_LIBVER_MAX + 1];
	char incident[FR_INCIDENT_MAX + 1];
	char reason[FR_REASON_MAX + 1];
	/* Reference time of this evidence (when the dump was written, or "now"
	 * for a live view), CLOCK_REALTIME; ages are measured against it. */
	uint64_t time_ns;
	uint64_t dropped;  /* entries lost to ring wrap before the oldest kept */
	size_t ncomms;
	struct fr_comm *comms;   /* owned */
	size_t nops;
	struct fr_op *ops;       /* owned (unless from `arena`), oldest first */
	/* Where `ops` is allocated: NULL for malloc, else an arena (arena.h)
	 * that owns them, the calling thread's when the first was added. */
	struct fr_arena *arena;
	size_t nthreads;
	struct fr_thread *threads; /* owned */
	struct fr_strs *strs;      /* owned: the strings `ops` point to */
	/* Owned; NULL unless the evidence is a summary of the rank's full
	 * dump, which then lists no communicator's members. */
	struct fr_trace_summary *summary;
	/* Owned; NULL unless the rank died of a fatal signal. */
	struct fr_crash *crash;
	/* How it ended, when it exited without finalising or was killed. */
	bool has_exit;
	struct fr_exit exit;
	/* Its first asynchronous NCCL error, when it had one. */
	bool has_nccl_error;
	struct fr_nccl_error nccl_error;
	/* Why its threads carry no Python frames though it runs Python (a
	 * version the agent does not read); "" otherwise. */
	char python_note[FR_PYTHON_NOTE_MAX + 1];
};

/* Releases everything a trace owns and zeroes it. */
void fr_trace_free(struct fr_trace *t);
/* The communicator with this id, or NULL. */
const struct fr_comm *fr_trace_comm(const struct fr_trace *t, const char *id);
/* A rank's application thread: its first thread with frames that is not
 * the agent's own (the main thread, as threads are listed). NULL when it
 * has none, or for a NULL trace. */
const struct fr_thread *fr_trace_app_thread(const struct fr_trace *t);
/* Its first thread, not the agent's, that runs Python (has Python frames):
 * the one a Python rank's stack is compared, shown and summarised by.
 * NULL when none, or for a NULL trace. */
const struct fr_thread *fr_trace_py_thread(const struct fr_trace *t);

/*
 * Appends to growable arrays, doubling capacity; return a zeroed new element
 * (an op as fr_op_init makes it) or NULL when out of memory. `cap` is
 * tracked by the caller.
 */
struct fr_op *fr_trace_add_op(struct fr_trace *t, size_t *cap);
struct fr_comm *fr_trace_add_comm(struct fr_trace *t, size_t *cap);
/* An empty operation: zero, its peer, root and peer_in_comm -1, its
 * strings "". */
void fr_op_init(struct fr_op *op);
/*
 * A pool of strings (*pool, NULL until the first): the copy it keeps of the
 * first `len` bytes of `s` (no NUL among them), valid until the pool is
 * freed; equal strings mostly share one copy. NULL when out of memory.
 */
const char *fr_strs_keep(struct fr_strs **pool, const char *s, size_t len);
void fr_strs_free(struct fr_strs *pool);
/* The trace's copy of a string, for one of its operations (fr_strs_keep). */
const char *fr_trace_strn(struct fr_trace *t, const char *s, size_t len);
const char *fr_trace_str(struct fr_trace *t, const char *s);

/*
 * The distinct member lists among many traces' communicators, told apart by
 * address and size, each with a value its user keeps of it. The daemon's
 * live view and a manifest lend every rank's trace the one list of each
 * communicator, so that a list of N members is met N times: whatever is
 * read off a list once per trace costs N squared, and once per distinct
 * list (found here) N. Zeroed to start.
 */
struct fr_lists {
	const struct fr_comm **lists;
	uint64_t *vals;
	size_t n;
	size_t cap;
	uint32_t *slots;
	size_t slots_cap;
};

/*
 * Finds c's list in `ls`, and points *val at the value kept for it (valid
 * until the next call): returns 1 when it was met before, 0 when it is new
 * (now added, its value 0, to be set), or -ENOMEM. The set keeps `c`
 * itself: it must outlive the set.
 */
int fr_lists_find(struct fr_lists *ls, const struct fr_comm *c, uint64_t **val);
void fr_lists_free(struct fr_lists *ls);

/* Room for `n` operations at once in a trace that has none yet, so that the
 * array is not copied as it doubles; 0, or -ENOMEM (nothing changed). */
int fr_trace_reserve_ops(struct fr_trace *t, size_t n, size_t *cap);
/* The trace's operations are all added: an arena keeps only their room. */
void fr_trace_seal_ops(struct fr_trace *t);
/*
 * Operations of traces this thread starts from now on are allocated in
 * `arena` (NULL: with malloc, the default). For a thread that reads many
 * large dumps; the arena must outlive those traces.
 */
void fr_trace_use_arena(struct fr_arena *arena);

#endif
