/*
 * NCCL hooks. Each ncclX defined here records the operation and forwards
 * to the real implementation: NCCL's profiling symbol pncclX when the
 * process has one (every NCCL 2.x exports them), else the next ncclX in
 * link order. The agent never links against NCCL: a process without it
 * never calls these.
 *
 * NCCL calls some of its own API (ncclBcast calls ncclBroadcast, the
 * collectives of a non-blocking communicator call ncclCommGetAsyncError):
 * a thread-local depth makes the outermost call the only one recorded.
 *
 * Communicators. One made from an ncclUniqueId is named from a hash of the
 * id, which every member holds; one made by ncclCommSplit or ncclCommShrink
 * from its parent's name, the seq of the creating call on the parent and
 * the colour. A rank knows its own global rank only: it reports that one
 * member, and the daemon and fr-analyze assemble the list from everyone's.
 *
 * Operations. A collective is entered (enqueued) when its call returns and
 * completes when the GPU reaches the event recorded after it (gpu.c).
 * Between ncclGroupStart and ncclGroupEnd nothing is launched: the group's
 * operations are recorded at their calls, each with its own seq, and
 * followed from ncclGroupEnd, when they are launched together.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../protocol/hash.h"
#include "agent.h"
#include "dlsym.h"
#include "gpu.h"
#include "handles.h"
#include "nccl_abi.h"

#define HOOK __attribute__((visibility("default")))

static __thread int depth __attribute__((tls_model("initial-exec")));

/* Operations of the open group of this thread, launched at its end. */
#define MAX_GROUPED 512
/* What the agent knows of an operation's launch, from before the call to
 * after it (or, in a group, to ncclGroupEnd). */
struct launch {
	cudaStream_t stream;
	bool captured;         /* the stream was being captured into a graph */
	struct fr_gpu_op *gpu; /* its events, from just before the launch */
};

struct grouped {
	struct fr_ticket t;
	struct launch l;
};
static __thread int group_depth __attribute__((tls_model("initial-exec")));
static __thread int ngrouped __attribute__((tls_model("initial-exec")));
/* Allocated at a thread's first group (static TLS stays small). */
static __thread struct grouped *grouped __attribute__((tls_model("initial-exec")));

static struct fr_handle_map comm_map; /* ncclComm_t -> comm index + 1 */
static uint32_t unique_comms;          /* atomic: communicators made from ids */

/*
 * The real functions: one table for the process, bound at the first call
 * or handle lookup and never changed after, so that the hooks read it
 * without a lock.
 *
 * An NCCL in the global scope (linked by the program, or dlopened with
 * RTLD_GLOBAL) is found by its profiling names pncclX, else as the next
 * ncclX after the agent. One that is only in a local scope (dlopened with
 * RTLD_LOCAL, itself or as the dependency of a library that was) is found
 * from the object that called the hook, when that object's scope has it,
 * or from the handle that the program looks one of its functions up with
 * (fr_nccl_dlsym, which answers the lookup with the hook).
 *
 * A process with several copies of NCCL (rare) has its calls recorded in
 * one: the copy in the global scope when there is one at the first call or
 * handle lookup, else the first one found from a caller or a handle.
 * Handle lookups in another copy get that copy's own functions,
 * unrecorded, since a hook must never hand one copy's communicator to
 * another.
 */
enum {
#define IMPL_INDEX(name, ret, params, args) IMPL_##name,
	FR_NCCL_API(IMPL_INDEX)
#undef IMPL_INDEX
	NIMPL
};

struct nccl_impl {
	void *fn[NIMPL]; /* by IMPL_ index; NULL for what this NCCL lacks */
};

static const struct nccl_impl *impl; /* atomic: published once, never freed */

#define API_NAME(name, ret, params, args) "nccl" #name,
static const char *const api_names[NIMPL] = { FR_NCCL_API(API_NAME) };
#undef API_NAME
#define PROFILING_NAME(name, ret, params, args) "pnccl" #name,
static const char *const profiling_names[NIMPL] = { FR_NCCL_API(PROFILING_NAME) };
#undef PROFILING_NAME

/* The hooks' own addresses: their public names may resolve to another
 * definition (the application's) through the global scope. */
#define OWN_HOOK(name, ret, params, args) \
	__typeof__(nccl##name) fr_hook_##name __attribute__((alias("nccl" #name)));
FR_NCCL_API(OWN_HOOK)
#undef OWN_HOOK
#define OWN_HOOK_ADDR(name, ret, params, args) (void *)fr_hook_##name,
static void *const own_hooks[NIMPL] = { FR_NCCL_API(OWN_HOOK_ADDR) };
#undef OWN_HOOK_ADDR

/* Function `i` of the NCCL that `handle` reaches (RTLD_DEFAULT: the global
 * scope), never one of the hooks. */
static void *lookup(void *handle, int i)
{
	void *f = fr_real_dlsym(handle, profiling_names[i]);

	if (!f)
		f = fr_real_dlsym(handle == RTLD_DEFAULT ? RTLD_NEXT : handle, api_names[i]);
	return f == own_hooks[i] ? NULL : f;
}

/* Publishes the table of the NCCL that `handle` reaches, unless one is
 * published already; returns the one that is. */
static const struct nccl_impl *bind(void *handle)
{
	const struct nccl_impl *cur = NULL;
	struct nccl_impl *t = malloc(sizeof(*t));

	if (!t)
		return __atomic_load_n(&impl, __ATOMIC_ACQUIRE);
	for (int i = 0; i < NIMPL; i++)
		t->fn[i] = lookup(handle, i);
	if (__atomic_compare_exchange_n(&impl, &cur, t, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		/* Bound from a handle: its NCCL must stay loaded after the
		 * application's dlclose, or a copy loaded again (whose calls to
		 * its own API reach the hooks through the global scope) would be
		 * forwarded into unmapped code. */
		for (int i = 0; handle != RTLD_DEFAULT && i < NIMPL; i++) {
			if (t->fn[i]) {
				fr_pin_object(t->fn[i]);
				break;
			}
		}
		cur = t;
	} else {
		free(t);
	}
	/* The lookups of what this NCCL lacks failed: the application's next
	 * dlerror() must not report them. */
	(void)dlerror();
	return cur;
}

/*
 * Binds the global scope's NCCL, else the one that the object at address
 * `caller` (a hook's return address) sees: a library dlopened with
 * RTLD_LOCAL that links NCCL reaches the hooks through the global scope,
 * while its NCCL is in its own local scope only. NULL while no NCCL with
 * function `i` is found.
 */
static __attribute__((noinline)) const struct nccl_impl *impl_find(int i, const void *caller)
{
	const struct nccl_impl *t = NULL;
	void *h;

	if (lookup(RTLD_DEFAULT, i))
		return bind(RTLD_DEFAULT);
	if ((h = fr_caller_scope(caller))) {
		if (lookup(h, i))
			t = bind(h);
		dlclose(h);
	}
	(void)dlerror();
	return t;
}

/* The table, once bound: one load on the hot path. */
static inline const struct nccl_impl *impl_get(int i, const void *caller)
{
	const struct nccl_impl *t = __atomic_load_n(&impl, __ATOMIC_ACQUIRE);

	return t ? t : impl_find(i, caller);
}

#define REAL(name)                                                                  \
	({                                                                          \
		const struct nccl_impl *t_ =                                        \
			impl_get(IMPL_##name, __builtin_return_address(0));         \
		(__typeof__(&nccl##name))(t_ ? t_->fn[IMPL_##name] : NULL);         \
	})

/* Forwards a call the agent does not record, or cannot forward at all. */
#define FORWARD(name, args)                                                         \
	({                                                                          \
		__typeof__(&nccl##name) g_ = REAL(name);                            \
		g_ ? g_ args : ncclSystemError;                                     \
	})

/* Which hooked function `name` is; NIMPL for none. */
static int api_index(const char *name)
{
	int i = 0;

	while (i < NIMPL && strcmp(name, api_names[i]) != 0)
		i++;
	return i;
}

void *fr_nccl_dlsym(void *handle, const char *name)
{
	int i = api_index(name);
	const struct nccl_impl *t;
	void *asked, *mine;

	if (i == NIMPL)
		return NULL;
	asked = fr_real_dlsym(handle, name);
	if (!asked || asked == own_hooks[i])
		return NULL; /* not there, or the plain lookup finds the hook */
	mine = lookup(handle, i);
	t = impl_get(i, NULL);
	if (!t)
		t = bind(handle);
	if (!t)
		return NULL; /* out of memory: the application gets NCCL's own */
	if (t->fn[i] != mine) {
		static int warned;
		Dl_info info;

		if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
			fprintf(stderr, "flightrec: a second NCCL (%s) is looked up by handle; "
					"its calls are not recorded\n",
				dladdr(mine, &info) && info.dli_fname ? info.dli_fname : "?");
		return NULL;
	}
	/* A lookup that succeeds: dlerror() then says what it says after
	 * the application's own lookup. */
	(void)fr_real_dlsym(handle, name);
	return own_hooks[i];
}

/* ---- names ---- */

static const char *const dtype_names[] = { "int8", "uint8", "int32", "uint32", "int64",
					   "uint64", "float16", "float32", "float64",
					   "bfloat16", "float8e4m3", "float8e5m2", "unknown" };
static const uint8_t dtype_sizes[] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1, 0 };
static const char *const redop_names[] = { "sum", "prod", "max", "min", "avg", "custom" };

#define NDTYPES (sizeof(dtype_names) / sizeof(dtype_names[0]))
#define NREDOPS (sizeof(redop_names) / sizeof(redop_names[0]))

static uint8_t dtype_of(ncclDataType_t dt, uint32_t *size)
{
	unsigned i = (unsigned)dt < ncclNumTypes ? (unsigned)dt : NDTYPES - 1;

	*size = dtype_sizes[i];
	return (uint8_t)(FR_NAMES_NCCL_BASE + i);
}

static uint8_t redop_of(ncclRedOp_t op)
{
	return (uint8_t)(FR_NAMES_NCCL_BASE + ((unsigned)op < ncclNumOps ? (unsigned)op : NREDOPS - 1));
}

/* ---- life cycle and communicators ---- */

static void nccl_start(int rank, int nranks)
{
	static bool names_added;
	char version[FR_LIBVER_MAX + 1] = "NCCL";
	int v = 0;

	if (!names_added) {
		fr_agent_add_names(FR_NAMES_NCCL_BASE, dtype_names, NDTYPES, redop_names, NREDOPS);
		names_added = true;
	}
	if (!comm_map.slots && fr_handles_init(&comm_map, 1u << 14))
		return;
	/* Decide now, at initialisation, whether the GPU can be followed (also
	 * when MPI started the agent first). */
	fr_gpu_usable();
	if (fr_is_active())
		return;
	if (FORWARD(GetVersion, (&v)) == ncclSuccess)
		snprintf(version, sizeof(version), "NCCL %d.%d.%d", v / 10000, v / 100 % 100, v % 100);
	fr_agent_start(version, rank, nranks);
}

/* Communicators learnt and not yet destroyed or aborted: none at exit is a
 * process that finalised NCCL (EXIT's FR_WIRE_EXIT_FINALISED). */
static uint32_t live_comms;

/*
 * Registers communicator `comm` of `nranks` members in which this process
 * has rank `rank`: only its own global rank is known.
 */
static struct fr_comm_rec *learn(ncclComm_t comm, const char *id, const char *desc, int rank,
				 int nranks)
{
	struct fr_comm_rec *c;
	uint32_t *members;

	if (!comm || rank < 0 || nranks <= 0 || rank >= nranks || !fr_is_active())
		return NULL;
	members = malloc((size_t)nranks * sizeof(*members));
	if (!members)
		return NULL;
	for (int i = 0; i < nranks; i++)
		members[i] = FR_RANK_UNKNOWN;
	members[rank] = fr_agent.id.rank;
	c = fr_comm_register(id, desc, (uint32_t)rank, (uint32_t)nranks, members);
	free(members);
	if (c && fr_handles_put(&comm_map, (uintptr_t)comm, (uint64_t)c->index + 1))
		__atomic_add_fetch(&live_comms, 1, __ATOMIC_RELAXED);
	return c;
}

static void learn_from_id(ncclComm_t comm, const ncclUniqueId *uid, int rank, int nranks,
			  const char *desc)
{
	char id[FR_COMM_ID_MAX + 1];

	snprintf(id, sizeof(id), "nccl-%016llx",
		 (unsigned long long)fr_fnv1a(FR_FNV_INIT, uid->internal, sizeof(uid->internal)));
	__atomic_add_fetch(&unique_comms, 1, __ATOMIC_RELAXED);
	learn(comm, id, desc, rank, nranks);
}

static struct fr_comm_rec *comm_of(ncclComm_t comm)
{
	uint64_t v = comm && comm_map.slots ? fr_handles_get(&comm_map, (uintptr_t)comm) : 0;

	return v ? fr_agent.comms[v - 1] : NULL;
}

/* ---- recording ---- */

/*
 * Before the call: records the operation. One enqueued on the stream of
 * `l` (host-side calls pass `l` NULL) is checked for graph capture and,
 * outside a group, gets the event the device reaches when it can begin
 * (inside a group that waits for the launch at ncclGroupEnd).
 */
static struct fr_comm_rec *begin(struct fr_ticket *t, ncclComm_t comm, enum fr_op_type type,
				 unsigned flags, int peer, size_t count, ncclDataType_t dt,
				 int redop, struct launch *l)
{
	struct fr_comm_rec *c;
	uint32_t size = 0;
	uint8_t d;

	if (!fr_is_active() || depth || !(c = comm_of(comm)))
		return NULL;
	depth++;
	d = dtype_of(dt, &size);
	if (l) {
		l->captured = fr_gpu_capturing(l->stream);
		flags |= FR_REC_GPU | (l->captured ? FR_REC_CAPTURED : 0);
	}
	fr_op_enter(t, c, type, flags, peer, (uint64_t)count, d, size,
		    redop < 0 ? 0 : redop_of((ncclRedOp_t)redop));
	if (l && !l->captured && group_depth == 0)
		l->gpu = fr_gpu_begin(l->stream);
	return c;
}

/* After the call: follow the operation to its completion on the GPU, or,
 * inside a group, once the group is launched. */
static void end(struct fr_comm_rec *c, const struct fr_ticket *t, ncclResult_t rc,
		const struct launch *l)
{
	if (!c)
		return;
	depth--;
	if (rc != ncclSuccess && rc != ncclInProgress) {
		fr_gpu_cancel(l->gpu);
		fr_op_complete(t); /* nothing was enqueued */
		return;
	}
	if (group_depth > 0 && grouped && ngrouped < MAX_GROUPED) {
		grouped[ngrouped++] = (struct grouped){ *t, *l };
		return;
	}
	if (group_depth > 0) {
		fr_op_complete(t); /* a group too large (or no memory) to follow */
		return;
	}
	fr_gpu_track(l->gpu, t, l->stream);
}

#define COLL(name, type, flags, peer, count, dt, op, args, stream)                  \
	do {                                                                        \
		struct fr_ticket t;                                                 \
		struct launch l = { stream, false, NULL };                          \
		struct fr_comm_rec *c = begin(&t, comm, type, flags, peer, count, dt, op, &l); \
		ncclResult_t rc = FORWARD(name, args);                              \
		end(c, &t, rc, &l);                                                 \
		return rc;                                                          \
	} while (0)

/* ---- the API ---- */

HOOK ncclResult_t ncclGetVersion(int *version)
{
	return FORWARD(GetVersion, (version));
}

HOOK ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	return FORWARD(GetUniqueId, (id));
}

/*
 * Communicator creation from ids: the application initialised NCCL (even
 * if the call failed), so the agent starts; a new communicator is followed.
 * Every member holds the same ids: the first one names it.
 */
static ncclResult_t after_init(ncclResult_t rc, ncclComm_t *comm, const ncclUniqueId *id,
			       int rank, int nranks, const char *desc)
{
	nccl_start(rank, nranks);
	if ((rc == ncclSuccess || rc == ncclInProgress) && comm && id)
		learn_from_id(*comm, id, rank, nranks, desc);
	return rc;
}

#define INIT(name, args, id, rank, nranks)                                           \
	do {                                                                         \
		ncclResult_t rc;                                                     \
		if (depth)                                                           \
			return FORWARD(name, args);                                  \
		depth++;                                                             \
		rc = FORWARD(name, args);                                            \
		depth--;                                                             \
		return after_init(rc, comm, id, rank, nranks, "nccl" #name);         \
	} while (0)

HOOK ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
	INIT(CommInitRank, (comm, nranks, id, rank), &id, rank, nranks);
}

HOOK ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id,
					 int rank, ncclConfig_t *config)
{
	INIT(CommInitRankConfig, (comm, nranks, id, rank, config), &id, rank, nranks);
}

HOOK ncclResult_t ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int nids,
					   ncclUniqueId *ids, ncclConfig_t *config)
{
	INIT(CommInitRankScalable, (comm, nranks, rank, nids, ids, config),
	     nids > 0 ? ids : NULL, rank, nranks);
}

/* One process driving several devices: its communicators have no other
 * process to wait for, and are not followed. */
HOOK ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
	ncclResult_t rc;

	depth++;
	rc = FORWARD(CommInitAll, (comms, ndev, devlist));
	depth--;
	return rc;
}

/* Split and shrink are collectives on the parent and count in its seq. */
static void learn_child(struct fr_comm_rec *parent, const struct fr_ticket *t,
			ncclComm_t child, char kind, long colour, const char *what)
{
	char id[FR_COMM_ID_MAX + 1], desc[FR_COMM_DESC_MAX + 1];
	int rank = -1, n = 0;

	if (!parent || !child || FORWARD(CommUserRank, (child, &rank)) != ncclSuccess ||
	    FORWARD(CommCount, (child, &n)) != ncclSuccess)
		return;
	fr_comm_derive_id(id, parent->id, t->seq, kind, colour);
	snprintf(desc, sizeof(desc), "%s of %.40s", what, parent->id);
	learn(child, id, desc, rank, n);
}

HOOK ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
				ncclConfig_t *config)
{
	struct fr_ticket t;
	struct fr_comm_rec *c = begin(&t, comm, FR_OP_COMM_SPLIT, 0, -1, 0, ncclInt8, -1, NULL);
	ncclResult_t rc = FORWARD(CommSplit, (comm, color, key, newcomm, config));

	if (c) {
		depth--;
		fr_op_complete(&t); /* the split is synchronous on the host */
		if ((rc == ncclSuccess || rc == ncclInProgress) && newcomm)
			learn_child(c, &t, *newcomm, 'c', color, "ncclCommSplit");
	}
	return rc;
}

HOOK ncclResult_t ncclCommShrink(ncclComm_t comm, int *exclude, int nexclude,
				 ncclComm_t *newcomm, ncclConfig_t *config, int flags)
{
	struct fr_ticket t;
	struct fr_comm_rec *c = begin(&t, comm, FR_OP_COMM_SPLIT, 0, -1, 0, ncclInt8, -1, NULL);
	ncclResult_t rc = FORWARD(CommShrink, (comm, exclude, nexclude, newcomm, config, flags));

	if (c) {
		depth--;
		fr_op_complete(&t);
		if ((rc == ncclSuccess || rc == ncclInProgress) && newcomm)
			learn_child(c, &t, *newcomm, 's', 0, "ncclCommShrink");
	}
	return rc;
}

/*
 * The communicator whose asynchronous error the link thread is asking now
 * (fr_nccl_poll_errors()): a communicator being destroyed waits for that
 * question to end, at most FORGET_WAIT_MS, before NCCL frees it.
 */
static uintptr_t polling; /* atomic */
#define FORGET_WAIT_MS 1000

/* A destroyed communicator's handle may be reused by the next one. */
static void forget(ncclComm_t comm)
{
	struct timespec nap = { 0, 50000 };

	if (!comm || !comm_map.slots || !fr_handles_take(&comm_map, (uintptr_t)comm))
		return;
	__atomic_sub_fetch(&live_comms, 1, __ATOMIC_RELAXED);
	/* The poller publishes the handle, then checks it is still mapped;
	 * we unmapped it, then check it is not being asked about. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (int i = 0; i < FORGET_WAIT_MS * 20 &&
			__atomic_load_n(&polling, __ATOMIC_SEQ_CST) == (uintptr_t)comm;
	     i++)
		nanosleep(&nap, NULL);
}

int fr_nccl_poll_errors(struct fr_msg_nccl_error *out)
{
	static bool said[FR_MAX_COMMS];          /* link thread only */
	static const char *(*last_error)(ncclComm_t);
	static bool looked;
	const struct nccl_impl *t = __atomic_load_n(&impl, __ATOMIC_ACQUIRE);
	ncclResult_t (*get)(ncclComm_t, ncclResult_t *);

	if (!t || !comm_map.slots || !(get = (__typeof__(get))t->fn[IMPL_CommGetAsyncError]))
		return 0;
	if (!looked) {
		/* Not interposed: the library's own, where the process has one. */
		last_error = (__typeof__(last_error))fr_real_dlsym(RTLD_DEFAULT, "pncclGetLastError");
		if (!last_error)
			last_error = (__typeof__(last_error))fr_real_dlsym(RTLD_DEFAULT,
									   "ncclGetLastError");
		looked = true;
	}
	for (uint64_t i = 0; i <= comm_map.mask; i++) {
		struct fr_handle_slot *slot = &comm_map.slots[i];
		uintptr_t key = __atomic_load_n(&slot->key, __ATOMIC_ACQUIRE);
		uint64_t v = __atomic_load_n(&slot->value, __ATOMIC_ACQUIRE);
		ncclResult_t res = ncclSuccess, rc;
		const struct fr_comm_rec *c;
		const char *text = NULL;

		if (!key || !v || v > FR_MAX_COMMS || said[v - 1])
			continue;
		__atomic_store_n(&polling, key, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&slot->value, __ATOMIC_SEQ_CST) != v) {
			__atomic_store_n(&polling, 0, __ATOMIC_RELEASE);
			continue; /* destroyed meanwhile: not to be touched */
		}
		rc = get((ncclComm_t)key, &res);
		if (rc == ncclSuccess && res != ncclSuccess && res != ncclInProgress && last_error)
			text = last_error((ncclComm_t)key);
		if (text)
			snprintf(out->message, sizeof(out->message), "%s", text);
		__atomic_store_n(&polling, 0, __ATOMIC_RELEASE);
		if (rc != ncclSuccess || res == ncclSuccess || res == ncclInProgress)
			continue;
		said[v - 1] = true;
		c = __atomic_load_n(&fr_agent.comms[v - 1], __ATOMIC_ACQUIRE);
		snprintf(out->comm, sizeof(out->comm), "%s", c ? c->id : "?");
		out->result = (uint32_t)res;
		out->time_ns = fr_now_ns();
		if (!text)
			out->message[0] = '\0';
		return 1;
	}
	return 0;
}

uint32_t fr_nccl_live_comms(void)
{
	return __atomic_load_n(&live_comms, __ATOMIC_RELAXED);
}

HOOK ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
	return FORWARD(CommFinalize, (comm));
}

HOOK ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	forget(comm);
	return FORWARD(CommDestroy, (comm));
}

HOOK ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	forget(comm);
	return FORWARD(CommAbort, (comm));
}

HOOK ncclResult_t ncclCommRevoke(ncclComm_t comm, int flags)
{
	return FORWARD(CommRevoke, (comm, flags));
}

HOOK ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err)
{
	return FORWARD(CommGetAsyncError, (comm, err));
}

HOOK ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
	return FORWARD(CommCount, (comm, count));
}

HOOK ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
	return FORWARD(CommUserRank, (comm, rank));
}

/*
 * The collectives and point-to-point calls (FR_NCCL_COLLECTIVES, with the
 * signatures nccl_abi.h declares), each a hook that records what its
 * REC_<name> says: the type, the flags, the peer or root, the count, the
 * datatype and the reduction, from the call's own arguments.
 */
#define REC_AllReduce     FR_OP_ALL_REDUCE, 0, -1, count, dt, (int)op
#define REC_Broadcast     FR_OP_BROADCAST, 0, root, count, dt, -1
#define REC_Bcast         FR_OP_BROADCAST, 0, root, count, dt, -1
#define REC_Reduce        FR_OP_REDUCE, 0, root, count, dt, (int)op
#define REC_AllGather     FR_OP_ALL_GATHER, 0, -1, sendcount, dt, -1
#define REC_ReduceScatter FR_OP_REDUCE_SCATTER, 0, -1, recvcount, dt, (int)op
#define REC_AlltoAll      FR_OP_ALL_TO_ALL, 0, -1, count, dt, -1
#define REC_Gather        FR_OP_GATHER, 0, root, count, dt, -1
#define REC_Scatter       FR_OP_SCATTER, 0, root, count, dt, -1
#define REC_Send          FR_OP_SEND, FR_REC_P2P, peer, count, dt, -1
#define REC_Recv          FR_OP_RECV, FR_REC_P2P, peer, count, dt, -1

/* COLL's arguments once REC_<name> has become the six it stands for. */
#define COLL_EXPANDED(...) COLL(__VA_ARGS__)
#define COLL_HOOK(name, ret, params, args) \
	HOOK ret nccl##name params { COLL_EXPANDED(name, REC_##name, args, stream); }
FR_NCCL_COLLECTIVES(COLL_HOOK)
#undef COLL_HOOK

HOOK ncclResult_t ncclGroupStart(void)
{
	ncclResult_t rc = FORWARD(GroupStart, ());

	if (rc == ncclSuccess && !depth) {
		group_depth++;
		if (!grouped)
			grouped = malloc(MAX_GROUPED * sizeof(*grouped));
	}
	return rc;
}

HOOK ncclResult_t ncclGroupEnd(void)
{
	bool outermost = !depth && group_depth == 1;
	ncclResult_t rc;

	/* The outermost end launches the group: each operation's start event
	 * goes on its stream first. */
	for (int i = 0; outermost && i < ngrouped; i++)
		if (!grouped[i].l.captured)
			grouped[i].l.gpu = fr_gpu_begin(grouped[i].l.stream);
	rc = FORWARD(GroupEnd, ());
	if (depth || group_depth == 0)
		return rc;
	if (--group_depth > 0)
		return rc; /* an inner group: launched with the outermost */
	/* The group is launched now (or, ncclInProgress, being launched). */
	for (int i = 0; i < ngrouped; i++) {
		if (rc == ncclSuccess || rc == ncclInProgress) {
			fr_gpu_track(grouped[i].l.gpu, &grouped[i].t, grouped[i].l.stream);
		} else {
			fr_gpu_cancel(grouped[i].l.gpu);
			fr_op_complete(&grouped[i].t);
		}
	}
	ngrouped = 0;
	return rc;
}
