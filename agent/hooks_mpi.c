/*
 * MPI hooks, through the PMPI profiling interface: each MPI_X defined here
 * records the operation and forwards to PMPI_X.
 *
 * The library must load in processes that have no MPI at all (launchers,
 * Python, NCCL-only jobs) and in programs that load MPI late with dlopen
 * (mpi4py): it references no MPI symbol; the hooks find libmpi's functions
 * and Open MPI's predefined objects at their first call (mpi_real.h). A hook
 * whose real function cannot be found calls nothing, records nothing and
 * returns MPI_ERR_INTERN.
 *
 * Per communicator, collectives are numbered 1, 2, 3, ... in call order;
 * point-to-point operations per (communicator, peer). Communicator creation
 * (split, dup, create) is a collective on the parent and counts in its
 * sequence; the child's id derives from the parent's id, that seq and the
 * colour, so every member names it alike without communicating.
 */
#include <mpi.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../protocol/hash.h"
#include "agent.h"
#include "dlsym.h"
#include "handles.h"
#include "mpi_real.h"

#define HOOK __attribute__((visibility("default")))

/*
 * The real MPI: one table for the process, bound at the first hooked call
 * and never changed after, so that the hooks read it without a lock.
 *
 * A libmpi in the global scope (linked by the program, or dlopened with
 * RTLD_GLOBAL) is found there; one only in a local scope (mpi4py's
 * extension module links libmpi and Python loads it RTLD_LOCAL) is found
 * from the object that called the hook. The table holds every function the
 * hooks need; `complete` says that all of them and every predefined object
 * were found, i.e. the library is an Open MPI whose ABI the agent was built
 * for. An incomplete table still forwards each call it can, but nothing is
 * recorded.
 */
struct mpi_impl {
#define FN_FIELD(f) __typeof__(&PMPI_##f) f;
	FR_PMPI_FUNCTIONS(FN_FIELD)
#undef FN_FIELD
#define OBJ_FIELD(field, symbol) void *field;
	FR_OMPI_OBJECTS(OBJ_FIELD)
#undef OBJ_FIELD
	void *handle; /* what the table was looked up in, for the name tables */
	bool complete;
};

static const struct mpi_impl *impl; /* atomic: published once, never freed */

/* The table of the libmpi that `handle` reaches, published unless one is
 * already; returns the one that is. */
static const struct mpi_impl *bind(void *handle)
{
	const struct mpi_impl *cur = NULL;
	struct mpi_impl *t = calloc(1, sizeof(*t));

	if (!t)
		return __atomic_load_n(&impl, __ATOMIC_ACQUIRE);
	t->handle = handle;
	t->complete = true;
#define FN_FIND(f)                                                         \
	*(void **)&t->f = fr_real_dlsym(handle, "PMPI_" #f);               \
	t->complete &= t->f != NULL;
	FR_PMPI_FUNCTIONS(FN_FIND)
#undef FN_FIND
#define OBJ_FIND(field, symbol)                                            \
	t->field = fr_real_dlsym(handle, symbol);                          \
	t->complete &= t->field != NULL;
	FR_OMPI_OBJECTS(OBJ_FIND)
#undef OBJ_FIND
	if (__atomic_compare_exchange_n(&impl, &cur, t, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		/* libmpi must stay loaded as long as the table points into it,
		 * even if the program dlcloses it (a plug-in reloaded). */
		fr_pin_object((const void *)t->Init);
		if (!t->complete)
			fprintf(stderr, "flightrec: the MPI library found is not the Open MPI the "
					"agent was built for; MPI calls are not recorded\n");
		cur = t;
	} else {
		free(t);
	}
	(void)dlerror(); /* the application's next dlerror() must not see ours */
	return cur;
}

/* Binds the global scope's libmpi, else the one the object at `caller` (a
 * hook's return address) sees. NULL while no libmpi is found. */
static __attribute__((noinline)) const struct mpi_impl *impl_find(const void *caller)
{
	const struct mpi_impl *t = NULL;
	void *h;

	if (fr_real_dlsym(RTLD_DEFAULT, "PMPI_Init"))
		return bind(RTLD_DEFAULT);
	if ((h = fr_caller_scope(caller))) {
		if (fr_real_dlsym(h, "PMPI_Init"))
			t = bind(h);
		/* A table bound from `h` keeps it open: it looks names up in it. */
		if (!t || t->handle != h)
			dlclose(h);
	}
	(void)dlerror();
	if (!t) {
		static int warned;

		if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
			fprintf(stderr, "flightrec: an MPI function was called but no MPI library "
					"is visible to the agent; the call fails with "
					"MPI_ERR_INTERN\n");
	}
	return t;
}

/*
 * A program that dlopens libmpi and looks its functions up by handle
 * (Julia's ccall, Python's ctypes) gets the hook of each function the agent
 * hooks, bound to the libmpi behind that handle. The hooks are found in the
 * agent's own object (its dlsym finds what the agent defines first), so
 * functions it does not hook are left to the C library.
 */
void *fr_mpi_dlsym(void *handle, const char *name)
{
	static void *self; /* atomic: a handle on libflightrec.so itself */
	const struct mpi_impl *t;
	void *asked, *init, *mine, *s, *h;

	asked = fr_real_dlsym(handle, name);
	init = asked ? fr_real_dlsym(handle, "PMPI_Init") : NULL;
	if (!init) {
		(void)dlerror();
		return NULL; /* no such function, or not an MPI behind it */
	}
	s = __atomic_load_n(&self, __ATOMIC_ACQUIRE);
	if (!s) {
		s = fr_caller_scope((const void *)fr_mpi_dlsym);
		if (!s)
			return NULL;
		if (!__atomic_compare_exchange_n(&self, &(void *){ NULL }, s, false,
						 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			dlclose(s);
			s = __atomic_load_n(&self, __ATOMIC_ACQUIRE);
		}
	}
	mine = fr_real_dlsym(s, name);
	if (!mine || mine == asked) {
		(void)dlerror();
		return NULL; /* not hooked (the plain lookup found no hook) */
	}
	t = __atomic_load_n(&impl, __ATOMIC_ACQUIRE);
	if (!t && (h = fr_caller_scope(init))) {
		/* A handle of our own on libmpi: the program may close its. */
		t = bind(h);
		if (!t || t->handle != h)
			dlclose(h);
	}
	if (!t || (void *)t->Init != init) {
		(void)fr_real_dlsym(handle, name);
		return NULL; /* another libmpi is recorded: leave this one alone */
	}
	/* dlerror() then says what it says after the program's own lookup. */
	(void)fr_real_dlsym(handle, name);
	return mine;
}

/* The table, once bound: one load on the hot path. */
static inline const struct mpi_impl *impl_get(const void *caller)
{
	const struct mpi_impl *t = __atomic_load_n(&impl, __ATOMIC_ACQUIRE);

	return t ? t : impl_find(caller);
}

/* The real PMPI_f, NULL when there is none. Only in a hook's own body:
 * the return address is the application's. */
#define REAL(f)                                                                     \
	({                                                                          \
		const struct mpi_impl *t_ = impl_get(__builtin_return_address(0));   \
		t_ ? t_->f : NULL;                                                  \
	})

/* Declares real_, the hook's real function PMPI_f; without one, the hook
 * returns MPI_ERR_INTERN, having called and recorded nothing. */
#define NEED(f)                                                                \
	__typeof__(&PMPI_##f) real_ = REAL(f);                                 \
	if (!real_)                                                            \
		return MPI_ERR_INTERN

/*
 * The handles the hooks compare against, from the table. Used only on
 * paths that a hook takes after it found its real function (the table is
 * bound by then).
 */
#define MPI_IMPL (__atomic_load_n(&impl, __ATOMIC_RELAXED))
#undef MPI_COMM_WORLD
#define MPI_COMM_WORLD ((MPI_Comm)MPI_IMPL->comm_world)
#undef MPI_COMM_SELF
#define MPI_COMM_SELF ((MPI_Comm)MPI_IMPL->comm_self)
#undef MPI_COMM_NULL
#define MPI_COMM_NULL ((MPI_Comm)MPI_IMPL->comm_null)
#undef MPI_DATATYPE_NULL
#define MPI_DATATYPE_NULL ((MPI_Datatype)MPI_IMPL->datatype_null)
#undef MPI_OP_NULL
#define MPI_OP_NULL ((MPI_Op)MPI_IMPL->op_null)
#undef MPI_REQUEST_NULL
#define MPI_REQUEST_NULL ((MPI_Request)MPI_IMPL->request_null)

/* A bound table with everything the recording needs. */
static inline bool mpi_complete(void)
{
	const struct mpi_impl *t = __atomic_load_n(&impl, __ATOMIC_ACQUIRE);

	return t && t->complete;
}

/* Outermost hooked call of this thread: nested MPI calls made by the
 * library itself are not recorded twice. */
static __thread int depth __attribute__((tls_model("initial-exec")));

static struct fr_handle_map comm_map;    /* MPI_Comm -> comm index + 1, or NOT_TRACKED */
static struct fr_handle_map request_map; /* MPI_Request -> ring record + 1 */
static struct fr_handle_map anon_map;    /* member-list hash -> communicators seen */

/* A communicator the agent could not register (table full): remembered,
 * so that its calls pass straight through instead of retrying each time. */
#define NOT_TRACKED UINT64_MAX

/* Internal calls, on paths that only a complete table reaches. */
#define PMPI(f) (MPI_IMPL->f)

/* Predefined datatypes and reductions, resolved once MPI is initialised:
 * the name the agent reports, and the Open MPI object behind the handle. */
struct mpi_name {
	const char *name;
	const char *symbol;
	void *handle;
	uint32_t size;
};

#define DT(x, sym) { "MPI_" #x, "ompi_mpi_" #sym, NULL, 0 }
static struct mpi_name dtypes[] = {
	{ "derived", NULL, NULL, 0 }, DT(DOUBLE, double), DT(FLOAT, float), DT(INT, int),
	DT(LONG, long), DT(LONG_LONG, long_long_int), DT(UNSIGNED, unsigned),
	DT(UNSIGNED_LONG, unsigned_long), DT(UNSIGNED_LONG_LONG, unsigned_long_long),
	DT(CHAR, char), DT(SIGNED_CHAR, signed_char), DT(UNSIGNED_CHAR, unsigned_char),
	DT(BYTE, byte), DT(SHORT, short), DT(UNSIGNED_SHORT, unsigned_short),
	DT(LONG_DOUBLE, long_double), DT(C_BOOL, c_bool), DT(INT8_T, int8_t),
	DT(INT16_T, int16_t), DT(INT32_T, int32_t), DT(INT64_T, int64_t), DT(UINT8_T, uint8_t),
	DT(UINT16_T, uint16_t), DT(UINT32_T, uint32_t), DT(UINT64_T, uint64_t), DT(2INT, 2int),
	DT(DOUBLE_INT, double_int), DT(FLOAT_INT, float_int), DT(LONG_INT, long_int),
	DT(C_FLOAT_COMPLEX, c_float_complex), DT(C_DOUBLE_COMPLEX, c_double_complex),
};
#undef DT
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

#define OP(x) { #x, "ompi_mpi_op_" #x, NULL, 0 }
static struct mpi_name redops[] = {
	{ "", NULL, NULL, 0 }, OP(sum), OP(max), OP(min), OP(prod), OP(land), OP(band), OP(lor),
	OP(bor), OP(lxor), OP(bxor), OP(maxloc), OP(minloc), OP(replace), OP(no_op),
};
#undef OP
#define NREDOPS (sizeof(redops) / sizeof(redops[0]))

static const char *dtype_names[NDTYPES];
static const char *redop_names[NREDOPS];

/* A name the library lacks keeps a NULL handle: it never matches, and
 * operations on it read as derived types. */
static void resolve_names(void)
{
	void *h = MPI_IMPL->handle;

	for (unsigned i = 0; i < NDTYPES; i++) {
		int size = 0;

		dtypes[i].handle = dtypes[i].symbol ? fr_real_dlsym(h, dtypes[i].symbol) : NULL;
		if (dtypes[i].handle &&
		    PMPI(Type_size)((MPI_Datatype)dtypes[i].handle, &size) == MPI_SUCCESS)
			dtypes[i].size = (uint32_t)size;
		dtype_names[i] = dtypes[i].name;
	}
	for (unsigned i = 0; i < NREDOPS; i++) {
		redops[i].handle = redops[i].symbol ? fr_real_dlsym(h, redops[i].symbol) : NULL;
		redop_names[i] = redops[i].name;
	}
	(void)dlerror();
}

/* Index of a datatype in the table (0: derived) and its size. Hot path:
 * a short scan of pointers, most common types first. */
static uint8_t dtype_of(MPI_Datatype dt, uint32_t *size)
{
	for (unsigned i = 1; i < NDTYPES; i++) {
		if (dtypes[i].handle == (void *)dt) {
			*size = dtypes[i].size;
			return (uint8_t)i;
		}
	}
	int s = 0;

	if (dt != MPI_DATATYPE_NULL && PMPI(Type_size)(dt, &s) == MPI_SUCCESS)
		*size = (uint32_t)s;
	else
		*size = 0;
	return 0;
}

static uint8_t redop_of(MPI_Op op)
{
	for (unsigned i = 1; i < NREDOPS; i++)
		if (redops[i].handle == (void *)op)
			return (uint8_t)i;
	return 0;
}

/* Global ranks of a communicator's members, in communicator order; the
 * caller frees. NULL on failure. Not for the hot path. */
static uint32_t *members_of(MPI_Comm comm, int *size)
{
	MPI_Group group, world_group;
	int *local = NULL, *global = NULL;
	uint32_t *out = NULL;

	if (PMPI(Comm_size)(comm, size) != MPI_SUCCESS || *size <= 0)
		return NULL;
	if (PMPI(Comm_group)(comm, &group) != MPI_SUCCESS)
		return NULL;
	if (PMPI(Comm_group)(MPI_COMM_WORLD, &world_group) != MPI_SUCCESS)
		goto out_group;
	local = malloc((size_t)*size * sizeof(int));
	global = malloc((size_t)*size * sizeof(int));
	out = malloc((size_t)*size * sizeof(uint32_t));
	if (!local || !global || !out)
		goto out_fail;
	for (int i = 0; i < *size; i++)
		local[i] = i;
	if (PMPI(Group_translate_ranks)(group, *size, local, world_group, global) != MPI_SUCCESS)
		goto out_fail;
	for (int i = 0; i < *size; i++)
		out[i] = global[i] == MPI_UNDEFINED ? UINT32_MAX : (uint32_t)global[i];
	goto out_world;

out_fail:
	free(out);
	out = NULL;
out_world:
	free(local);
	free(global);
	PMPI(Group_free)(&world_group);
out_group:
	PMPI(Group_free)(&group);
	return out;
}

static struct fr_comm_rec *learn_comm(MPI_Comm comm, const char *id, const char *desc)
{
	struct fr_comm_rec *c = NULL;
	uint32_t *members;
	int size, rank;

	members = members_of(comm, &size);
	if (!members || PMPI(Comm_rank)(comm, &rank) != MPI_SUCCESS)
		goto out;
	c = fr_comm_register(id, desc, (uint32_t)rank, (uint32_t)size, members);
out:
	fr_handles_put(&comm_map, (uintptr_t)comm, c ? (uint64_t)c->index + 1 : NOT_TRACKED);
	free(members);
	return c;
}

/*
 * A communicator first seen in an operation (made by a call we do not hook,
 * e.g. MPI_Cart_create): name it from its members and how many such
 * communicators with the same members this rank has seen, which members
 * that create them in the same order agree on.
 */
static struct fr_comm_rec *learn_anonymous(MPI_Comm comm)
{
	char id[FR_COMM_ID_MAX + 1];
	uint32_t *members;
	uint64_t h, n;
	int size;

	members = members_of(comm, &size);
	if (!members) {
		fr_handles_put(&comm_map, (uintptr_t)comm, NOT_TRACKED);
		return NULL;
	}
	h = fr_fnv1a(FR_FNV_INIT, members, (size_t)size * sizeof(*members));
	free(members);
	h |= 1; /* never 0, which the map reserves */
	n = fr_handles_get(&anon_map, (uintptr_t)h) + 1;
	fr_handles_put(&anon_map, (uintptr_t)h, n);
	snprintf(id, sizeof(id), "anon-%016llx-%llu", (unsigned long long)h, (unsigned long long)n);
	return learn_comm(comm, id, "communicator made outside the hooked calls");
}

static struct fr_comm_rec *comm_of(MPI_Comm comm)
{
	uint64_t v = fr_handles_get(&comm_map, (uintptr_t)comm);

	if (v == NOT_TRACKED)
		return NULL;
	if (v)
		return fr_agent.comms[v - 1];
	if (comm == MPI_COMM_NULL)
		return NULL;
	return learn_anonymous(comm);
}

/*
 * Brackets around the real call. begin returns the communicator record
 * when the call is recorded, NULL when it passes through untouched
 * (agent inactive, nested call, unknown communicator).
 */
static struct fr_comm_rec *begin(struct fr_ticket *t, MPI_Comm comm, enum fr_op_type type,
				 unsigned flags, int peer, uint64_t count, MPI_Datatype dt,
				 MPI_Op op)
{
	struct fr_comm_rec *c;
	uint32_t size = 0;
	uint8_t d = 0;

	if (!fr_is_active() || depth || !mpi_complete())
		return NULL;
	c = comm_of(comm);
	if (!c)
		return NULL;
	depth++;
	if (dt != MPI_DATATYPE_NULL)
		d = dtype_of(dt, &size);
	fr_op_enter(t, c, type, flags, peer, count, d, size,
		    op == MPI_OP_NULL ? 0 : redop_of(op));
	return c;
}

static void end(struct fr_comm_rec *c, const struct fr_ticket *t)
{
	if (!c)
		return;
	depth--;
	fr_op_complete(t);
}

/* Non-blocking: completion comes later through Wait/Test. */
static void end_nb(struct fr_comm_rec *c, const struct fr_ticket *t, int rc, MPI_Request *req)
{
	if (!c)
		return;
	depth--;
	if (rc != MPI_SUCCESS || !req || *req == MPI_REQUEST_NULL ||
	    !fr_handles_put(&request_map, (uintptr_t)*req, t->record + 1))
		fr_op_complete(t); /* cannot follow it: never report it as hung */
}

/*
 * Requests being completed: the handle and the map value read before the
 * library call (the call frees the request, and with MPI_THREAD_MULTIPLE
 * another thread may get the same handle for a new request right after).
 */
struct pending {
	uintptr_t handle;
	uint64_t value; /* ring record + 1, 0 when not followed */
};

/* A blocking Wait begins on these: their operations now block the rank. */
static void mark_waited(const struct pending *p, int n)
{
	uint64_t now = 0;

	for (int i = 0; i < n; i++) {
		if (!p[i].value)
			continue;
		if (!now)
			now = fr_ticks();
		fr_ring_mark_waited(&fr_agent.ring, p[i].value - 1, now);
	}
}

static void complete_request(const struct pending *p)
{
	struct fr_rec rec;

	if (!p->value || !fr_handles_take_if(&request_map, p->handle, p->value))
		return;
	if (!fr_ring_read(&fr_agent.ring, p->value - 1, &rec))
		return;
	fr_op_complete_record(p->value - 1, rec.comm, rec.seq, !(rec.flags & FR_REC_P2P));
}

/*
 * Wait/Test families overwrite completed requests with MPI_REQUEST_NULL, so
 * the handles are copied first. A per-thread buffer, grown only for arrays
 * larger than any seen before, keeps the steady state allocation-free.
 */
static __thread struct pending pending_stack[64] __attribute__((tls_model("initial-exec")));
static __thread struct pending *pending_heap __attribute__((tls_model("initial-exec")));
static __thread int pending_heap_cap __attribute__((tls_model("initial-exec")));

static struct pending *snapshot(int n, const MPI_Request *reqs)
{
	struct pending *p = pending_stack;

	if (n < 0)
		return NULL;
	if (n > 64) {
		if (n > pending_heap_cap) {
			struct pending *grown = realloc(pending_heap, (size_t)n * sizeof(*grown));

			if (!grown)
				return NULL;
			pending_heap = grown;
			pending_heap_cap = n;
		}
		p = pending_heap;
	}
	for (int i = 0; i < n; i++) {
		p[i].handle = (uintptr_t)reqs[i];
		p[i].value = p[i].handle ? fr_handles_get(&request_map, p[i].handle) : 0;
	}
	return p;
}

static bool tracking(void)
{
	return fr_is_active() && !depth && mpi_complete();
}

/* ---- life cycle ---- */

static void mpi_start(void)
{
	char version[MPI_MAX_LIBRARY_VERSION_STRING] = "MPI";
	char self_id[FR_COMM_ID_MAX + 1];
	int rank = 0, size = 1, len = 0;
	static pid_t started_in;
	uint32_t me;

	/* Once per process (a forked child that initialises MPI again starts
	 * afresh); NCCL may have started the agent already: MPI joins it. */
	if (!mpi_complete() || started_in == getpid())
		return;
	started_in = getpid();
	PMPI(Comm_rank)(MPI_COMM_WORLD, &rank);
	PMPI(Comm_size)(MPI_COMM_WORLD, &size);
	PMPI(Get_library_version)(version, &len);
	version[strcspn(version, ",\n")] = '\0';
	resolve_names();
	if (!comm_map.slots && (fr_handles_init(&comm_map, 1u << 17) ||
				fr_handles_init(&request_map, 1u << 14) ||
				fr_handles_init(&anon_map, 1u << 10)))
		return;
	fr_agent_add_names(0, dtype_names, NDTYPES, redop_names, NREDOPS);
	if (fr_agent_start(version, rank, size))
		return;
	learn_comm(MPI_COMM_WORLD, "world", "MPI_COMM_WORLD");
	me = (uint32_t)rank;
	snprintf(self_id, sizeof(self_id), "self.%u", me);
	learn_comm(MPI_COMM_SELF, self_id, "MPI_COMM_SELF");
}

HOOK int MPI_Init(int *argc, char ***argv)
{
	NEED(Init);
	int rc = real_(argc, argv);

	if (rc == MPI_SUCCESS)
		mpi_start();
	return rc;
}

HOOK int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	NEED(Init_thread);
	int rc = real_(argc, argv, required, provided);

	if (rc == MPI_SUCCESS)
		mpi_start();
	return rc;
}

/*
 * MPI_Finalize waits for every rank: it is recorded as a collective on
 * world, so that ranks blocked in it name the one that never gets there.
 * The agent stops only once it returns.
 */
HOOK int MPI_Finalize(void)
{
	NEED(Finalize);
	struct fr_ticket t;
	MPI_Comm comm = MPI_COMM_WORLD;
	struct fr_comm_rec *c = begin(&t, comm, FR_OP_FINALIZE, 0, -1, 0, MPI_DATATYPE_NULL,
				      MPI_OP_NULL);
	int rc = real_();

	end(c, &t);
	fr_agent_stop();
	return rc;
}

/* ---- blocking collectives ---- */

#define COLL(type, peer, count, dt, op, f, args)                               \
	do {                                                                   \
		NEED(f);                                                       \
		struct fr_ticket t;                                            \
		struct fr_comm_rec *c = begin(&t, comm, type, 0, peer, count, dt, op); \
		int rc = real_ args;                                           \
		end(c, &t);                                                    \
		return rc;                                                     \
	} while (0)

/*
 * Whether this rank is the root of a rooted collective. MPI ignores the send
 * arguments at a gather's root when it uses MPI_IN_PLACE, and the receive
 * arguments at a scatter's root: an ignored datatype may be anything, so
 * the hooks describe the data with the arguments MPI reads.
 */
static bool at_root(MPI_Comm comm, int root)
{
	struct fr_comm_rec *c = tracking() ? comm_of(comm) : NULL;

	return c && (int)c->rank == root;
}

/* Sum of a per-member count array (v-collectives, reduce_scatter). */
static uint64_t total(MPI_Comm comm, const int *counts)
{
	uint64_t sum = 0;
	int n = 0;

	if (!counts || !tracking() || PMPI(Comm_size)(comm, &n) != MPI_SUCCESS)
		return 0;
	for (int i = 0; i < n; i++)
		sum += (uint64_t)(counts[i] > 0 ? counts[i] : 0);
	return sum;
}

HOOK int MPI_Barrier(MPI_Comm comm)
{
	COLL(FR_OP_BARRIER, -1, 0, MPI_DATATYPE_NULL, MPI_OP_NULL, Barrier, (comm));
}

HOOK int MPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm)
{
	COLL(FR_OP_BROADCAST, root, (uint64_t)count, dt, MPI_OP_NULL,
	     Bcast, (buf, count, dt, root, comm));
}

HOOK int MPI_Reduce(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op, int root,
		    MPI_Comm comm)
{
	COLL(FR_OP_REDUCE, root, (uint64_t)count, dt, op,
	     Reduce, (s, r, count, dt, op, root, comm));
}

HOOK int MPI_Allreduce(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op,
		       MPI_Comm comm)
{
	COLL(FR_OP_ALL_REDUCE, -1, (uint64_t)count, dt, op,
	     Allreduce, (s, r, count, dt, op, comm));
}

HOOK int MPI_Allgather(const void *s, int sc, MPI_Datatype st, void *r, int rc_,
		       MPI_Datatype rt, MPI_Comm comm)
{
	bool in_place = s == MPI_IN_PLACE;

	COLL(FR_OP_ALL_GATHER, -1, (uint64_t)(in_place ? rc_ : sc), in_place ? rt : st,
	     MPI_OP_NULL, Allgather, (s, sc, st, r, rc_, rt, comm));
}

HOOK int MPI_Allgatherv(const void *s, int sc, MPI_Datatype st, void *r, const int *rcs,
			const int *displs, MPI_Datatype rt, MPI_Comm comm)
{
	COLL(FR_OP_ALL_GATHERV, -1, total(comm, rcs), rt, MPI_OP_NULL,
	     Allgatherv, (s, sc, st, r, rcs, displs, rt, comm));
}

HOOK int MPI_Gather(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt,
		    int root, MPI_Comm comm)
{
	bool root_ = at_root(comm, root);

	COLL(FR_OP_GATHER, root, (uint64_t)(root_ ? rc_ : sc), root_ ? rt : st, MPI_OP_NULL,
	     Gather, (s, sc, st, r, rc_, rt, root, comm));
}

HOOK int MPI_Gatherv(const void *s, int sc, MPI_Datatype st, void *r, const int *rcs,
		     const int *displs, MPI_Datatype rt, int root, MPI_Comm comm)
{
	/* Counts differ per rank by design: recorded as 0 (not compared). */
	COLL(FR_OP_GATHERV, root, 0, at_root(comm, root) ? rt : st, MPI_OP_NULL,
	     Gatherv, (s, sc, st, r, rcs, displs, rt, root, comm));
}

HOOK int MPI_Scatter(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt,
		     int root, MPI_Comm comm)
{
	bool root_ = at_root(comm, root);

	COLL(FR_OP_SCATTER, root, (uint64_t)(root_ ? sc : rc_), root_ ? st : rt, MPI_OP_NULL,
	     Scatter, (s, sc, st, r, rc_, rt, root, comm));
}

HOOK int MPI_Scatterv(const void *s, const int *scs, const int *displs, MPI_Datatype st,
		      void *r, int rc_, MPI_Datatype rt, int root, MPI_Comm comm)
{
	COLL(FR_OP_SCATTERV, root, 0, at_root(comm, root) ? st : rt, MPI_OP_NULL,
	     Scatterv, (s, scs, displs, st, r, rc_, rt, root, comm));
}

HOOK int MPI_Alltoall(const void *s, int sc, MPI_Datatype st, void *r, int rc_,
		      MPI_Datatype rt, MPI_Comm comm)
{
	bool in_place = s == MPI_IN_PLACE;

	COLL(FR_OP_ALL_TO_ALL, -1, (uint64_t)(in_place ? rc_ : sc), in_place ? rt : st,
	     MPI_OP_NULL, Alltoall, (s, sc, st, r, rc_, rt, comm));
}

HOOK int MPI_Alltoallv(const void *s, const int *scs, const int *sds, MPI_Datatype st, void *r,
		       const int *rcs, const int *rds, MPI_Datatype rt, MPI_Comm comm)
{
	COLL(FR_OP_ALL_TO_ALLV, -1, 0, s == MPI_IN_PLACE ? rt : st, MPI_OP_NULL,
	     Alltoallv, (s, scs, sds, st, r, rcs, rds, rt, comm));
}

HOOK int MPI_Reduce_scatter(const void *s, void *r, const int *rcs, MPI_Datatype dt, MPI_Op op,
			    MPI_Comm comm)
{
	COLL(FR_OP_REDUCE_SCATTER, -1, total(comm, rcs), dt, op,
	     Reduce_scatter, (s, r, rcs, dt, op, comm));
}

HOOK int MPI_Reduce_scatter_block(const void *s, void *r, int rc_, MPI_Datatype dt, MPI_Op op,
				  MPI_Comm comm)
{
	COLL(FR_OP_REDUCE_SCATTER_BLOCK, -1, (uint64_t)rc_, dt, op,
	     Reduce_scatter_block, (s, r, rc_, dt, op, comm));
}

HOOK int MPI_Scan(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
	COLL(FR_OP_SCAN, -1, (uint64_t)count, dt, op, Scan, (s, r, count, dt, op, comm));
}

HOOK int MPI_Exscan(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op,
		    MPI_Comm comm)
{
	COLL(FR_OP_EXSCAN, -1, (uint64_t)count, dt, op, Exscan, (s, r, count, dt, op, comm));
}

/* ---- non-blocking collectives ---- */

#define ICOLL(type, peer, count, dt, op, f, args)                              \
	do {                                                                   \
		NEED(f);                                                       \
		struct fr_ticket t;                                            \
		struct fr_comm_rec *c = begin(&t, comm, type, FR_REC_NONBLOCKING, peer, \
					      count, dt, op);                  \
		int rc = real_ args;                                           \
		end_nb(c, &t, rc, req);                                        \
		return rc;                                                     \
	} while (0)

HOOK int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req)
{
	ICOLL(FR_OP_BARRIER, -1, 0, MPI_DATATYPE_NULL, MPI_OP_NULL, Ibarrier, (comm, req));
}

HOOK int MPI_Ibcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm,
		    MPI_Request *req)
{
	ICOLL(FR_OP_BROADCAST, root, (uint64_t)count, dt, MPI_OP_NULL,
	      Ibcast, (buf, count, dt, root, comm, req));
}

HOOK int MPI_Ireduce(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op, int root,
		     MPI_Comm comm, MPI_Request *req)
{
	ICOLL(FR_OP_REDUCE, root, (uint64_t)count, dt, op,
	      Ireduce, (s, r, count, dt, op, root, comm, req));
}

HOOK int MPI_Iallreduce(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op,
			MPI_Comm comm, MPI_Request *req)
{
	ICOLL(FR_OP_ALL_REDUCE, -1, (uint64_t)count, dt, op,
	      Iallreduce, (s, r, count, dt, op, comm, req));
}

HOOK int MPI_Iallgather(const void *s, int sc, MPI_Datatype st, void *r, int rc_,
			MPI_Datatype rt, MPI_Comm comm, MPI_Request *req)
{
	bool in_place = s == MPI_IN_PLACE;

	ICOLL(FR_OP_ALL_GATHER, -1, (uint64_t)(in_place ? rc_ : sc), in_place ? rt : st,
	      MPI_OP_NULL, Iallgather, (s, sc, st, r, rc_, rt, comm, req));
}

HOOK int MPI_Iallgatherv(const void *s, int sc, MPI_Datatype st, void *r, const int *rcs,
			 const int *displs, MPI_Datatype rt, MPI_Comm comm, MPI_Request *req)
{
	ICOLL(FR_OP_ALL_GATHERV, -1, total(comm, rcs), rt, MPI_OP_NULL,
	      Iallgatherv, (s, sc, st, r, rcs, displs, rt, comm, req));
}

HOOK int MPI_Igather(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt,
		     int root, MPI_Comm comm, MPI_Request *req)
{
	bool root_ = at_root(comm, root);

	ICOLL(FR_OP_GATHER, root, (uint64_t)(root_ ? rc_ : sc), root_ ? rt : st, MPI_OP_NULL,
	      Igather, (s, sc, st, r, rc_, rt, root, comm, req));
}

HOOK int MPI_Igatherv(const void *s, int sc, MPI_Datatype st, void *r, const int *rcs,
		      const int *displs, MPI_Datatype rt, int root, MPI_Comm comm,
		      MPI_Request *req)
{
	ICOLL(FR_OP_GATHERV, root, 0, at_root(comm, root) ? rt : st, MPI_OP_NULL,
	      Igatherv, (s, sc, st, r, rcs, displs, rt, root, comm, req));
}

HOOK int MPI_Iscatter(const void *s, int sc, MPI_Datatype st, void *r, int rc_,
		      MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *req)
{
	bool root_ = at_root(comm, root);

	ICOLL(FR_OP_SCATTER, root, (uint64_t)(root_ ? sc : rc_), root_ ? st : rt, MPI_OP_NULL,
	      Iscatter, (s, sc, st, r, rc_, rt, root, comm, req));
}

HOOK int MPI_Iscatterv(const void *s, const int *scs, const int *displs, MPI_Datatype st,
		       void *r, int rc_, MPI_Datatype rt, int root, MPI_Comm comm,
		       MPI_Request *req)
{
	ICOLL(FR_OP_SCATTERV, root, 0, at_root(comm, root) ? st : rt, MPI_OP_NULL,
	      Iscatterv, (s, scs, displs, st, r, rc_, rt, root, comm, req));
}

HOOK int MPI_Ialltoall(const void *s, int sc, MPI_Datatype st, void *r, int rc_,
		       MPI_Datatype rt, MPI_Comm comm, MPI_Request *req)
{
	bool in_place = s == MPI_IN_PLACE;

	ICOLL(FR_OP_ALL_TO_ALL, -1, (uint64_t)(in_place ? rc_ : sc), in_place ? rt : st,
	      MPI_OP_NULL, Ialltoall, (s, sc, st, r, rc_, rt, comm, req));
}

HOOK int MPI_Ialltoallv(const void *s, const int *scs, const int *sds, MPI_Datatype st,
			void *r, const int *rcs, const int *rds, MPI_Datatype rt, MPI_Comm comm,
			MPI_Request *req)
{
	ICOLL(FR_OP_ALL_TO_ALLV, -1, 0, s == MPI_IN_PLACE ? rt : st, MPI_OP_NULL,
	      Ialltoallv, (s, scs, sds, st, r, rcs, rds, rt, comm, req));
}

HOOK int MPI_Ireduce_scatter(const void *s, void *r, const int *rcs, MPI_Datatype dt,
			     MPI_Op op, MPI_Comm comm, MPI_Request *req)
{
	ICOLL(FR_OP_REDUCE_SCATTER, -1, total(comm, rcs), dt, op,
	      Ireduce_scatter, (s, r, rcs, dt, op, comm, req));
}

HOOK int MPI_Ireduce_scatter_block(const void *s, void *r, int rc_, MPI_Datatype dt, MPI_Op op,
				   MPI_Comm comm, MPI_Request *req)
{
	ICOLL(FR_OP_REDUCE_SCATTER_BLOCK, -1, (uint64_t)rc_, dt, op,
	      Ireduce_scatter_block, (s, r, rc_, dt, op, comm, req));
}

HOOK int MPI_Iscan(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op,
		   MPI_Comm comm, MPI_Request *req)
{
	ICOLL(FR_OP_SCAN, -1, (uint64_t)count, dt, op, Iscan, (s, r, count, dt, op, comm, req));
}

HOOK int MPI_Iexscan(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op,
		     MPI_Comm comm, MPI_Request *req)
{
	ICOLL(FR_OP_EXSCAN, -1, (uint64_t)count, dt, op,
	      Iexscan, (s, r, count, dt, op, comm, req));
}

/* ---- point-to-point ---- */

#define P2P(type, peer, count, dt, f, args)                                  \
	do {                                                                   \
		NEED(f);                                                       \
		struct fr_ticket t;                                            \
		struct fr_comm_rec *c = begin(&t, comm, type, FR_REC_P2P,      \
					      (peer) >= 0 ? (peer) : -1, (uint64_t)(count), \
					      dt, MPI_OP_NULL);                \
		int rc = real_ args;                                           \
		end(c, &t);                                                    \
		return rc;                                                     \
	} while (0)

#define IP2P(type, peer, count, dt, f, args)                                  \
	do {                                                                   \
		NEED(f);                                                       \
		struct fr_ticket t;                                            \
		struct fr_comm_rec *c = begin(&t, comm, type,                  \
					      FR_REC_P2P | FR_REC_NONBLOCKING,  \
					      (peer) >= 0 ? (peer) : -1, (uint64_t)(count), \
					      dt, MPI_OP_NULL);                \
		int rc = real_ args;                                           \
		end_nb(c, &t, rc, req);                                        \
		return rc;                                                     \
	} while (0)

HOOK int MPI_Send(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
	P2P(FR_OP_SEND, dest, count, dt, Send, (buf, count, dt, dest, tag, comm));
}

HOOK int MPI_Ssend(const void *buf, int count, MPI_Datatype dt, int dest, int tag,
		   MPI_Comm comm)
{
	P2P(FR_OP_SEND, dest, count, dt, Ssend, (buf, count, dt, dest, tag, comm));
}

HOOK int MPI_Recv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
		  MPI_Status *status)
{
	P2P(FR_OP_RECV, source, count, dt, Recv, (buf, count, dt, source, tag, comm, status));
}

HOOK int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype st, int dest, int stag,
		      void *rbuf, int rcount, MPI_Datatype rt, int source, int rtag,
		      MPI_Comm comm, MPI_Status *status)
{
	P2P(FR_OP_SENDRECV, dest, scount, st,
	    Sendrecv, (sbuf, scount, st, dest, stag, rbuf, rcount, rt, source, rtag, comm,
			  status));
}

HOOK int MPI_Isend(const void *buf, int count, MPI_Datatype dt, int dest, int tag,
		   MPI_Comm comm, MPI_Request *req)
{
	IP2P(FR_OP_SEND, dest, count, dt, Isend, (buf, count, dt, dest, tag, comm, req));
}

HOOK int MPI_Issend(const void *buf, int count, MPI_Datatype dt, int dest, int tag,
		    MPI_Comm comm, MPI_Request *req)
{
	IP2P(FR_OP_SEND, dest, count, dt, Issend, (buf, count, dt, dest, tag, comm, req));
}

HOOK int MPI_Irecv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
		   MPI_Request *req)
{
	IP2P(FR_OP_RECV, source, count, dt, Irecv, (buf, count, dt, source, tag, comm, req));
}

/* ---- completion ---- */

HOOK int MPI_Wait(MPI_Request *req, MPI_Status *status)
{
	NEED(Wait);
	struct pending *p = tracking() && req ? snapshot(1, req) : NULL;
	int rc;

	if (p)
		mark_waited(p, 1);
	rc = real_(req, status);
	if (rc == MPI_SUCCESS && p)
		complete_request(p);
	return rc;
}

HOOK int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
	NEED(Test);
	struct pending *p = tracking() && req ? snapshot(1, req) : NULL;
	int rc = real_(req, flag, status);

	if (rc == MPI_SUCCESS && *flag && p)
		complete_request(p);
	return rc;
}

HOOK int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[])
{
	NEED(Waitall);
	struct pending *p = tracking() ? snapshot(n, reqs) : NULL;
	int rc;

	if (p)
		mark_waited(p, n);
	rc = real_(n, reqs, statuses);
	if (rc == MPI_SUCCESS && p)
		for (int i = 0; i < n; i++)
			complete_request(&p[i]);
	return rc;
}

HOOK int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
	NEED(Testall);
	struct pending *p = tracking() ? snapshot(n, reqs) : NULL;
	int rc = real_(n, reqs, flag, statuses);

	if (rc == MPI_SUCCESS && *flag && p)
		for (int i = 0; i < n; i++)
			complete_request(&p[i]);
	return rc;
}

HOOK int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status)
{
	NEED(Waitany);
	struct pending *p = tracking() ? snapshot(n, reqs) : NULL;
	int rc;

	if (p)
		mark_waited(p, n);
	rc = real_(n, reqs, index, status);
	if (rc == MPI_SUCCESS && p && *index != MPI_UNDEFINED && *index >= 0 && *index < n)
		complete_request(&p[*index]);
	return rc;
}

HOOK int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status)
{
	NEED(Testany);
	struct pending *p = tracking() ? snapshot(n, reqs) : NULL;
	int rc = real_(n, reqs, index, flag, status);

	if (rc == MPI_SUCCESS && *flag && p && *index != MPI_UNDEFINED && *index >= 0 &&
	    *index < n)
		complete_request(&p[*index]);
	return rc;
}

HOOK int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[],
		      MPI_Status statuses[])
{
	NEED(Waitsome);
	struct pending *p = tracking() ? snapshot(n, reqs) : NULL;
	int rc;

	if (p)
		mark_waited(p, n);
	rc = real_(n, reqs, outcount, indices, statuses);
	if (rc == MPI_SUCCESS && p && *outcount != MPI_UNDEFINED)
		for (int i = 0; i < *outcount; i++)
			if (indices[i] >= 0 && indices[i] < n)
				complete_request(&p[indices[i]]);
	return rc;
}

HOOK int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[],
		      MPI_Status statuses[])
{
	NEED(Testsome);
	struct pending *p = tracking() ? snapshot(n, reqs) : NULL;
	int rc = real_(n, reqs, outcount, indices, statuses);

	if (rc == MPI_SUCCESS && p && *outcount != MPI_UNDEFINED)
		for (int i = 0; i < *outcount; i++)
			if (indices[i] >= 0 && indices[i] < n)
				complete_request(&p[indices[i]]);
	return rc;
}

/* An abandoned request can no longer be followed: stop reporting it. */
HOOK int MPI_Request_free(MPI_Request *req)
{
	NEED(Request_free);
	struct pending *p = tracking() && req ? snapshot(1, req) : NULL;
	int rc = real_(req);

	if (rc == MPI_SUCCESS && p)
		complete_request(p);
	return rc;
}

/* ---- communicators ---- */

/* Lowest global rank of a communicator: a colour all its members agree on. */
static long lowest_member(MPI_Comm comm)
{
	int size;
	uint32_t *m = members_of(comm, &size);
	uint32_t low = UINT32_MAX;

	if (!m)
		return -1;
	for (int i = 0; i < size; i++)
		if (m[i] < low)
			low = m[i];
	free(m);
	return (long)low;
}

static void learn_child(struct fr_comm_rec *parent, const struct fr_ticket *t, MPI_Comm child,
			char kind, long colour, const char *what)
{
	char id[FR_COMM_ID_MAX + 1], desc[FR_COMM_DESC_MAX + 1];

	if (!parent || child == MPI_COMM_NULL)
		return;
	if (colour < 0)
		colour = lowest_member(child);
	fr_comm_derive_id(id, parent->id, t->seq, kind, colour);
	snprintf(desc, sizeof(desc), "%s of %.40s", what, parent->id);
	learn_comm(child, id, desc);
}

#define COMM_CREATE(type, f, args, kind, colour, what)                         \
	do {                                                                   \
		NEED(f);                                                       \
		struct fr_ticket t;                                            \
		struct fr_comm_rec *c = begin(&t, comm, type, 0, -1, 0, MPI_DATATYPE_NULL, \
					      MPI_OP_NULL);                    \
		int rc = real_ args;                                           \
		end(c, &t);                                                    \
		if (rc == MPI_SUCCESS && c)                                    \
			learn_child(c, &t, *newcomm, kind, colour, what);      \
		return rc;                                                     \
	} while (0)

HOOK int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
	COMM_CREATE(FR_OP_COMM_SPLIT, Comm_split, (comm, color, key, newcomm), 'c',
		    color < 0 ? 0 : color, "split");
}

HOOK int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info,
			     MPI_Comm *newcomm)
{
	/* The colour is implicit (e.g. the node): name the child by its
	 * lowest member, which all members share. */
	COMM_CREATE(FR_OP_COMM_SPLIT, Comm_split_type, (comm, split_type, key, info, newcomm),
		    't', -1, "split_type");
}

HOOK int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
	COMM_CREATE(FR_OP_COMM_DUP, Comm_dup, (comm, newcomm), 'd', 0, "dup");
}

HOOK int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
	COMM_CREATE(FR_OP_COMM_CREATE, Comm_create, (comm, group, newcomm), 'g', -1,
		    "create");
}

HOOK int MPI_Comm_free(MPI_Comm *comm)
{
	NEED(Comm_free);
	uintptr_t h = comm ? (uintptr_t)*comm : 0;
	int rc = real_(comm);

	/* The handle may be recycled for another communicator. */
	if (rc == MPI_SUCCESS && h && comm_map.slots)
		fr_handles_take(&comm_map, h);
	return rc;
}
