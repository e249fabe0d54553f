/*
 * MPI hooks, through the PMPI profiling interface: each MPI_X defined here
 * records the operation and forwards to PMPI_X.
 *
 * The library must load in processes that have no MPI at all (launchers,
 * Python, NCCL-only jobs), so every MPI symbol it references -- PMPI_*
 * functions and Open MPI's predefined objects behind MPI_COMM_WORLD,
 * MPI_DOUBLE, ... -- is a weak reference (mpi_weak.h): it resolves to libmpi
 * when libmpi is there, and these hooks only run when the application itself
 * calls MPI.
 *
 * Per communicator, collectives are numbered 1, 2, 3, ... in call order;
 * point-to-point operations per (communicator, peer). Communicator creation
 * (split, dup, create) is a collective on the parent and counts in its
 * sequence; the child's id derives from the parent's id, that seq and the
 * colour, so every member names it alike without communicating.
 */
#include <mpi.h>

#include "mpi_weak.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../protocol/hash.h"
#include "agent.h"
#include "handles.h"

#define HOOK __attribute__((visibility("default")))

/* Outermost hooked call of this thread: nested MPI calls made by the
 * library itself are not recorded twice. */
static __thread int depth __attribute__((tls_model("initial-exec")));

static struct fr_handle_map comm_map;    /* MPI_Comm -> comm index + 1, or NOT_TRACKED */
static struct fr_handle_map request_map; /* MPI_Request -> ring record + 1 */
static struct fr_handle_map anon_map;    /* member-list hash -> communicators seen */

/* A communicator the agent could not register (table full): remembered,
 * so that its calls pass straight through instead of retrying each time. */
#define NOT_TRACKED UINT64_MAX

/* Predefined datatypes and reductions, resolved once MPI is initialised. */
struct mpi_name {
	const char *name;
	void *handle;
	uint32_t size;
};

#define DT(x) { "MPI_" #x, NULL, 0 }
static struct mpi_name dtypes[] = {
	{ "derived", NULL, 0 }, DT(DOUBLE), DT(FLOAT), DT(INT), DT(LONG), DT(LONG_LONG),
	DT(UNSIGNED), DT(UNSIGNED_LONG), DT(UNSIGNED_LONG_LONG), DT(CHAR), DT(SIGNED_CHAR),
	DT(UNSIGNED_CHAR), DT(BYTE), DT(SHORT), DT(UNSIGNED_SHORT), DT(LONG_DOUBLE),
	DT(C_BOOL), DT(INT8_T), DT(INT16_T), DT(INT32_T), DT(INT64_T), DT(UINT8_T),
	DT(UINT16_T), DT(UINT32_T), DT(UINT64_T), DT(2INT), DT(DOUBLE_INT), DT(FLOAT_INT),
	DT(LONG_INT), DT(C_FLOAT_COMPLEX), DT(C_DOUBLE_COMPLEX),
};
#undef DT
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

#define OP(x) { #x, NULL, 0 }
static struct mpi_name redops[] = {
	{ "", NULL, 0 }, OP(sum), OP(max), OP(min), OP(prod), OP(land), OP(band), OP(lor),
	OP(bor), OP(lxor), OP(bxor), OP(maxloc), OP(minloc), OP(replace), OP(no_op),
};
#undef OP
#define NREDOPS (sizeof(redops) / sizeof(redops[0]))

static const char *dtype_names[NDTYPES];
static const char *redop_names[NREDOPS];

static void resolve_names(void)
{
	void *const dt[NDTYPES] = { NULL, MPI_DOUBLE, MPI_FLOAT, MPI_INT, MPI_LONG,
		MPI_LONG_LONG, MPI_UNSIGNED, MPI_UNSIGNED_LONG, MPI_UNSIGNED_LONG_LONG, MPI_CHAR,
		MPI_SIGNED_CHAR, MPI_UNSIGNED_CHAR, MPI_BYTE, MPI_SHORT, MPI_UNSIGNED_SHORT,
		MPI_LONG_DOUBLE, MPI_C_BOOL, MPI_INT8_T, MPI_INT16_T, MPI_INT32_T, MPI_INT64_T,
		MPI_UINT8_T, MPI_UINT16_T, MPI_UINT32_T, MPI_UINT64_T, MPI_2INT, MPI_DOUBLE_INT,
		MPI_FLOAT_INT, MPI_LONG_INT, MPI_C_FLOAT_COMPLEX, MPI_C_DOUBLE_COMPLEX };
	void *const op[NREDOPS] = { NULL, MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD, MPI_LAND,
		MPI_BAND, MPI_LOR, MPI_BOR, MPI_LXOR, MPI_BXOR, MPI_MAXLOC, MPI_MINLOC,
		MPI_REPLACE, MPI_NO_OP };

	for (unsigned i = 0; i < NDTYPES; i++) {
		int size = 0;

		dtypes[i].handle = dt[i];
		if (dt[i] && PMPI_Type_size((MPI_Datatype)dt[i], &size) == MPI_SUCCESS)
			dtypes[i].size = (uint32_t)size;
		dtype_names[i] = dtypes[i].name;
	}
	for (unsigned i = 0; i < NREDOPS; i++) {
		redops[i].handle = op[i];
		redop_names[i] = redops[i].name;
	}
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

	if (dt != MPI_DATATYPE_NULL && PMPI_Type_size(dt, &s) == MPI_SUCCESS)
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

	if (PMPI_Comm_size(comm, size) != MPI_SUCCESS || *size <= 0)
		return NULL;
	if (PMPI_Comm_group(comm, &group) != MPI_SUCCESS)
		return NULL;
	if (PMPI_Comm_group(MPI_COMM_WORLD, &world_group) != MPI_SUCCESS)
		goto out_group;
	local = malloc((size_t)*size * sizeof(int));
	global = malloc((size_t)*size * sizeof(int));
	out = malloc((size_t)*size * sizeof(uint32_t));
	if (!local || !global || !out)
		goto out_fail;
	for (int i = 0; i < *size; i++)
		local[i] = i;
	if (PMPI_Group_translate_ranks(group, *size, local, world_group, global) != MPI_SUCCESS)
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
	PMPI_Group_free(&world_group);
out_group:
	PMPI_Group_free(&group);
	return out;
}

static struct fr_comm_rec *learn_comm(MPI_Comm comm, const char *id, const char *desc)
{
	struct fr_comm_rec *c = NULL;
	uint32_t *members;
	int size, rank;

	members = members_of(comm, &size);
	if (!members || PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS)
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

	if (!fr_is_active() || depth)
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
	return fr_is_active() && !depth;
}

/* ---- life cycle ---- */

static void mpi_start(void)
{
	char version[MPI_MAX_LIBRARY_VERSION_STRING] = "MPI";
	char self_id[FR_COMM_ID_MAX + 1];
	int rank = 0, size = 1, len = 0;
	uint32_t me;

	if (fr_is_active())
		return;
	PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
	PMPI_Comm_size(MPI_COMM_WORLD, &size);
	PMPI_Get_library_version(version, &len);
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
	int rc = PMPI_Init(argc, argv);

	if (rc == MPI_SUCCESS)
		mpi_start();
	return rc;
}

HOOK int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	int rc = PMPI_Init_thread(argc, argv, required, provided);

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
	struct fr_ticket t;
	MPI_Comm comm = MPI_COMM_WORLD;
	struct fr_comm_rec *c = begin(&t, comm, FR_OP_FINALIZE, 0, -1, 0, MPI_DATATYPE_NULL,
				      MPI_OP_NULL);
	int rc = PMPI_Finalize();

	end(c, &t);
	fr_agent_stop();
	return rc;
}

/* ---- blocking collectives ---- */

#define COLL(type, peer, count, dt, op, call)                                  \
	do {                                                                   \
		struct fr_ticket t;                                            \
		struct fr_comm_rec *c = begin(&t, comm, type, 0, peer, count, dt, op); \
		int rc = call;                                                 \
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

	if (!counts || !tracking() || PMPI_Comm_size(comm, &n) != MPI_SUCCESS)
		return 0;
	for (int i = 0; i < n; i++)
		sum += (uint64_t)(counts[i] > 0 ? counts[i] : 0);
	return sum;
}

HOOK int MPI_Barrier(MPI_Comm comm)
{
	COLL(FR_OP_BARRIER, -1, 0, MPI_DATATYPE_NULL, MPI_OP_NULL, PMPI_Barrier(comm));
}

HOOK int MPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm)
{
	COLL(FR_OP_BROADCAST, root, (uint64_t)count, dt, MPI_OP_NULL,
	     PMPI_Bcast(buf, count, dt, root, comm));
}

HOOK int MPI_Reduce(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op, int root,
		    MPI_Comm comm)
{
	COLL(FR_OP_REDUCE, root, (uint64_t)count, dt, op,
	     PMPI_Reduce(s, r, count, dt, op, root, comm));
}

HOOK int MPI_Allreduce(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op,
		       MPI_Comm comm)
{
	COLL(FR_OP_ALL_REDUCE, -1, (uint64_t)count, dt, op,
	     PMPI_Allreduce(s, r, count, dt, op, comm));
}

HOOK int MPI_Allgather(const void *s, int sc, MPI_Datatype st, void *r, int rc_,
		       MPI_Datatype rt, MPI_Comm comm)
{
	bool in_place = s == MPI_IN_PLACE;

	COLL(FR_OP_ALL_GATHER, -1, (uint64_t)(in_place ? rc_ : sc), in_place ? rt : st,
	     MPI_OP_NULL, PMPI_Allgather(s, sc, st, r, rc_, rt, comm));
}

HOOK int MPI_Allgatherv(const void *s, int sc, MPI_Datatype st, void *r, const int *rcs,
			const int *displs, MPI_Datatype rt, MPI_Comm comm)
{
	COLL(FR_OP_ALL_GATHERV, -1, total(comm, rcs), rt, MPI_OP_NULL,
	     PMPI_Allgatherv(s, sc, st, r, rcs, displs, rt, comm));
}

HOOK int MPI_Gather(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt,
		    int root, MPI_Comm comm)
{
	bool root_ = at_root(comm, root);

	COLL(FR_OP_GATHER, root, (uint64_t)(root_ ? rc_ : sc), root_ ? rt : st, MPI_OP_NULL,
	     PMPI_Gather(s, sc, st, r, rc_, rt, root, comm));
}

HOOK int MPI_Gatherv(const void *s, int sc, MPI_Datatype st, void *r, const int *rcs,
		     const int *displs, MPI_Datatype rt, int root, MPI_Comm comm)
{
	/* Counts differ per rank by design: recorded as 0 (not compared). */
	COLL(FR_OP_GATHERV, root, 0, at_root(comm, root) ? rt : st, MPI_OP_NULL,
	     PMPI_Gatherv(s, sc, st, r, rcs, displs, rt, root, comm));
}

HOOK int MPI_Scatter(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt,
		     int root, MPI_Comm comm)
{
	bool root_ = at_root(comm, root);

	COLL(FR_OP_SCATTER, root, (uint64_t)(root_ ? sc : rc_), root_ ? st : rt, MPI_OP_NULL,
	     PMPI_Scatter(s, sc, st, r, rc_, rt, root, comm));
}

HOOK int MPI_Scatterv(const void *s, const int *scs, const int *displs, MPI_Datatype st,
		      void *r, int rc_, MPI_Datatype rt, int root, MPI_Comm comm)
{
	COLL(FR_OP_SCATTERV, root, 0, at_root(comm, root) ? st : rt, MPI_OP_NULL,
	     PMPI_Scatterv(s, scs, displs, st, r, rc_, rt, root, comm));
}

HOOK int MPI_Alltoall(const void *s, int sc, MPI_Datatype st, void *r, int rc_,
		      MPI_Datatype rt, MPI_Comm comm)
{
	bool in_place = s == MPI_IN_PLACE;

	COLL(FR_OP_ALL_TO_ALL, -1, (uint64_t)(in_place ? rc_ : sc), in_place ? rt : st,
	     MPI_OP_NULL, PMPI_Alltoall(s, sc, st, r, rc_, rt, comm));
}

HOOK int MPI_Alltoallv(const void *s, const int *scs, const int *sds, MPI_Datatype st, void *r,
		       const int *rcs, const int *rds, MPI_Datatype rt, MPI_Comm comm)
{
	COLL(FR_OP_ALL_TO_ALLV, -1, 0, s == MPI_IN_PLACE ? rt : st, MPI_OP_NULL,
	     PMPI_Alltoallv(s, scs, sds, st, r, rcs, rds, rt, comm));
}

HOOK int MPI_Reduce_scatter(const void *s, void *r, const int *rcs, MPI_Datatype dt, MPI_Op op,
			    MPI_Comm comm)
{
	COLL(FR_OP_REDUCE_SCATTER, -1, total(comm, rcs), dt, op,
	     PMPI_Reduce_scatter(s, r, rcs, dt, op, comm));
}

HOOK int MPI_Reduce_scatter_block(const void *s, void *r, int rc_, MPI_Datatype dt, MPI_Op op,
				  MPI_Comm comm)
{
	COLL(FR_OP_REDUCE_SCATTER_BLOCK, -1, (uint64_t)rc_, dt, op,
	     PMPI_Reduce_scatter_block(s, r, rc_, dt, op, comm));
}

HOOK int MPI_Scan(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
	COLL(FR_OP_SCAN, -1, (uint64_t)count, dt, op, PMPI_Scan(s, r, count, dt, op, comm));
}

HOOK int MPI_Exscan(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op,
		    MPI_Comm comm)
{
	COLL(FR_OP_EXSCAN, -1, (uint64_t)count, dt, op, PMPI_Exscan(s, r, count, dt, op, comm));
}

/* ---- non-blocking collectives ---- */

#define ICOLL(type, peer, count, dt, op, call)                                 \
	do {                                                                   \
		struct fr_ticket t;                                            \
		struct fr_comm_rec *c = begin(&t, comm, type, FR_REC_NONBLOCKING, peer, \
					      count, dt, op);                  \
		int rc = call;                                                 \
		end_nb(c, &t, rc, req);                                        \
		return rc;                                                     \
	} while (0)

HOOK int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req)
{
	ICOLL(FR_OP_BARRIER, -1, 0, MPI_DATATYPE_NULL, MPI_OP_NULL, PMPI_Ibarrier(comm, req));
}

HOOK int MPI_Ibcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm,
		    MPI_Request *req)
{
	ICOLL(FR_OP_BROADCAST, root, (uint64_t)count, dt, MPI_OP_NULL,
	      PMPI_Ibcast(buf, count, dt, root, comm, req));
}

HOOK int MPI_Ireduce(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op, int root,
		     MPI_Comm comm, MPI_Request *req)
{
	ICOLL(FR_OP_REDUCE, root, (uint64_t)count, dt, op,
	      PMPI_Ireduce(s, r, count, dt, op, root, comm, req));
}

HOOK int MPI_Iallreduce(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op,
			MPI_Comm comm, MPI_Request *req)
{
	ICOLL(FR_OP_ALL_REDUCE, -1, (uint64_t)count, dt, op,
	      PMPI_Iallreduce(s, r, count, dt, op, comm, req));
}

HOOK int MPI_Iallgather(const void *s, int sc, MPI_Datatype st, void *r, int rc_,
			MPI_Datatype rt, MPI_Comm comm, MPI_Request *req)
{
	bool in_place = s == MPI_IN_PLACE;

	ICOLL(FR_OP_ALL_GATHER, -1, (uint64_t)(in_place ? rc_ : sc), in_place ? rt : st,
	      MPI_OP_NULL, PMPI_Iallgather(s, sc, st, r, rc_, rt, comm, req));
}

HOOK int MPI_Iallgatherv(const void *s, int sc, MPI_Datatype st, void *r, const int *rcs,
			 const int *displs, MPI_Datatype rt, MPI_Comm comm, MPI_Request *req)
{
	ICOLL(FR_OP_ALL_GATHERV, -1, total(comm, rcs), rt, MPI_OP_NULL,
	      PMPI_Iallgatherv(s, sc, st, r, rcs, displs, rt, comm, req));
}

HOOK int MPI_Igather(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt,
		     int root, MPI_Comm comm, MPI_Request *req)
{
	bool root_ = at_root(comm, root);

	ICOLL(FR_OP_GATHER, root, (uint64_t)(root_ ? rc_ : sc), root_ ? rt : st, MPI_OP_NULL,
	      PMPI_Igather(s, sc, st, r, rc_, rt, root, comm, req));
}

HOOK int MPI_Igatherv(const void *s, int sc, MPI_Datatype st, void *r, const int *rcs,
		      const int *displs, MPI_Datatype rt, int root, MPI_Comm comm,
		      MPI_Request *req)
{
	ICOLL(FR_OP_GATHERV, root, 0, at_root(comm, root) ? rt : st, MPI_OP_NULL,
	      PMPI_Igatherv(s, sc, st, r, rcs, displs, rt, root, comm, req));
}

HOOK int MPI_Iscatter(const void *s, int sc, MPI_Datatype st, void *r, int rc_,
		      MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *req)
{
	bool root_ = at_root(comm, root);

	ICOLL(FR_OP_SCATTER, root, (uint64_t)(root_ ? sc : rc_), root_ ? st : rt, MPI_OP_NULL,
	      PMPI_Iscatter(s, sc, st, r, rc_, rt, root, comm, req));
}

HOOK int MPI_Iscatterv(const void *s, const int *scs, const int *displs, MPI_Datatype st,
		       void *r, int rc_, MPI_Datatype rt, int root, MPI_Comm comm,
		       MPI_Request *req)
{
	ICOLL(FR_OP_SCATTERV, root, 0, at_root(comm, root) ? st : rt, MPI_OP_NULL,
	      PMPI_Iscatterv(s, scs, displs, st, r, rc_, rt, root, comm, req));
}

HOOK int MPI_Ialltoall(const void *s, int sc, MPI_Datatype st, void *r, int rc_,
		       MPI_Datatype rt, MPI_Comm comm, MPI_Request *req)
{
	bool in_place = s == MPI_IN_PLACE;

	ICOLL(FR_OP_ALL_TO_ALL, -1, (uint64_t)(in_place ? rc_ : sc), in_place ? rt : st,
	      MPI_OP_NULL, PMPI_Ialltoall(s, sc, st, r, rc_, rt, comm, req));
}

HOOK int MPI_Ialltoallv(const void *s, const int *scs, const int *sds, MPI_Datatype st,
			void *r, const int *rcs, const int *rds, MPI_Datatype rt, MPI_Comm comm,
			MPI_Request *req)
{
	ICOLL(FR_OP_ALL_TO_ALLV, -1, 0, s == MPI_IN_PLACE ? rt : st, MPI_OP_NULL,
	      PMPI_Ialltoallv(s, scs, sds, st, r, rcs, rds, rt, comm, req));
}

HOOK int MPI_Ireduce_scatter(const void *s, void *r, const int *rcs, MPI_Datatype dt,
			     MPI_Op op, MPI_Comm comm, MPI_Request *req)
{
	ICOLL(FR_OP_REDUCE_SCATTER, -1, total(comm, rcs), dt, op,
	      PMPI_Ireduce_scatter(s, r, rcs, dt, op, comm, req));
}

HOOK int MPI_Ireduce_scatter_block(const void *s, void *r, int rc_, MPI_Datatype dt, MPI_Op op,
				   MPI_Comm comm, MPI_Request *req)
{
	ICOLL(FR_OP_REDUCE_SCATTER_BLOCK, -1, (uint64_t)rc_, dt, op,
	      PMPI_Ireduce_scatter_block(s, r, rc_, dt, op, comm, req));
}

HOOK int MPI_Iscan(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op,
		   MPI_Comm comm, MPI_Request *req)
{
	ICOLL(FR_OP_SCAN, -1, (uint64_t)count, dt, op, PMPI_Iscan(s, r, count, dt, op, comm, req));
}

HOOK int MPI_Iexscan(const void *s, void *r, int count, MPI_Datatype dt, MPI_Op op,
		     MPI_Comm comm, MPI_Request *req)
{
	ICOLL(FR_OP_EXSCAN, -1, (uint64_t)count, dt, op,
	      PMPI_Iexscan(s, r, count, dt, op, comm, req));
}

/* ---- point-to-point ---- */

#define P2P(type, peer, count, dt, call)                                       \
	do {                                                                   \
		struct fr_ticket t;                                            \
		struct fr_comm_rec *c = begin(&t, comm, type, FR_REC_P2P,      \
					      (peer) >= 0 ? (peer) : -1, (uint64_t)(count), \
					      dt, MPI_OP_NULL);                \
		int rc = call;                                                 \
		end(c, &t);                                                    \
		return rc;                                                     \
	} while (0)

#define IP2P(type, peer, count, dt, call)                                      \
	do {                                                                   \
		struct fr_ticket t;                                            \
		struct fr_comm_rec *c = begin(&t, comm, type,                  \
					      FR_REC_P2P | FR_REC_NONBLOCKING,  \
					      (peer) >= 0 ? (peer) : -1, (uint64_t)(count), \
					      dt, MPI_OP_NULL);                \
		int rc = call;                                                 \
		end_nb(c, &t, rc, req);                                        \
		return rc;                                                     \
	} while (0)

HOOK int MPI_Send(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
	P2P(FR_OP_SEND, dest, count, dt, PMPI_Send(buf, count, dt, dest, tag, comm));
}

HOOK int MPI_Ssend(const void *buf, int count, MPI_Datatype dt, int dest, int tag,
		   MPI_Comm comm)
{
	P2P(FR_OP_SEND, dest, count, dt, PMPI_Ssend(buf, count, dt, dest, tag, comm));
}

HOOK int MPI_Recv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
		  MPI_Status *status)
{
	P2P(FR_OP_RECV, source, count, dt, PMPI_Recv(buf, count, dt, source, tag, comm, status));
}

HOOK int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype st, int dest, int stag,
		      void *rbuf, int rcount, MPI_Datatype rt, int source, int rtag,
		      MPI_Comm comm, MPI_Status *status)
{
	P2P(FR_OP_SENDRECV, dest, scount, st,
	    PMPI_Sendrecv(sbuf, scount, st, dest, stag, rbuf, rcount, rt, source, rtag, comm,
			  status));
}

HOOK int MPI_Isend(const void *buf, int count, MPI_Datatype dt, int dest, int tag,
		   MPI_Comm comm, MPI_Request *req)
{
	IP2P(FR_OP_SEND, dest, count, dt, PMPI_Isend(buf, count, dt, dest, tag, comm, req));
}

HOOK int MPI_Issend(const void *buf, int count, MPI_Datatype dt, int dest, int tag,
		    MPI_Comm comm, MPI_Request *req)
{
	IP2P(FR_OP_SEND, dest, count, dt, PMPI_Issend(buf, count, dt, dest, tag, comm, req));
}

HOOK int MPI_Irecv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
		   MPI_Request *req)
{
	IP2P(FR_OP_RECV, source, count, dt, PMPI_Irecv(buf, count, dt, source, tag, comm, req));
}

/* ---- completion ---- */

HOOK int MPI_Wait(MPI_Request *req, MPI_Status *status)
{
	struct pending *p = tracking() && req ? snapshot(1, req) : NULL;
	int rc;

	if (p)
		mark_waited(p, 1);
	rc = PMPI_Wait(req, status);
	if (rc == MPI_SUCCESS && p)
		complete_request(p);
	return rc;
}

HOOK int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
	struct pending *p = tracking() && req ? snapshot(1, req) : NULL;
	int rc = PMPI_Test(req, flag, status);

	if (rc == MPI_SUCCESS && *flag && p)
		complete_request(p);
	return rc;
}

HOOK int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[])
{
	struct pending *p = tracking() ? snapshot(n, reqs) : NULL;
	int rc;

	if (p)
		mark_waited(p, n);
	rc = PMPI_Waitall(n, reqs, statuses);
	if (rc == MPI_SUCCESS && p)
		for (int i = 0; i < n; i++)
			complete_request(&p[i]);
	return rc;
}

HOOK int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
	struct pending *p = tracking() ? snapshot(n, reqs) : NULL;
	int rc = PMPI_Testall(n, reqs, flag, statuses);

	if (rc == MPI_SUCCESS && *flag && p)
		for (int i = 0; i < n; i++)
			complete_request(&p[i]);
	return rc;
}

HOOK int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status)
{
	struct pending *p = tracking() ? snapshot(n, reqs) : NULL;
	int rc;

	if (p)
		mark_waited(p, n);
	rc = PMPI_Waitany(n, reqs, index, status);
	if (rc == MPI_SUCCESS && p && *index != MPI_UNDEFINED && *index >= 0 && *index < n)
		complete_request(&p[*index]);
	return rc;
}

HOOK int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status)
{
	struct pending *p = tracking() ? snapshot(n, reqs) : NULL;
	int rc = PMPI_Testany(n, reqs, index, flag, status);

	if (rc == MPI_SUCCESS && *flag && p && *index != MPI_UNDEFINED && *index >= 0 &&
	    *index < n)
		complete_request(&p[*index]);
	return rc;
}

HOOK int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[],
		      MPI_Status statuses[])
{
	struct pending *p = tracking() ? snapshot(n, reqs) : NULL;
	int rc;

	if (p)
		mark_waited(p, n);
	rc = PMPI_Waitsome(n, reqs, outcount, indices, statuses);
	if (rc == MPI_SUCCESS && p && *outcount != MPI_UNDEFINED)
		for (int i = 0; i < *outcount; i++)
			if (indices[i] >= 0 && indices[i] < n)
				complete_request(&p[indices[i]]);
	return rc;
}

HOOK int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[],
		      MPI_Status statuses[])
{
	struct pending *p = tracking() ? snapshot(n, reqs) : NULL;
	int rc = PMPI_Testsome(n, reqs, outcount, indices, statuses);

	if (rc == MPI_SUCCESS && p && *outcount != MPI_UNDEFINED)
		for (int i = 0; i < *outcount; i++)
			if (indices[i] >= 0 && indices[i] < n)
				complete_request(&p[indices[i]]);
	return rc;
}

/* An abandoned request can no longer be followed: stop reporting it. */
HOOK int MPI_Request_free(MPI_Request *req)
{
	struct pending *p = tracking() && req ? snapshot(1, req) : NULL;
	int rc = PMPI_Request_free(req);

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

#define COMM_CREATE(type, call, kind, colour, what)                             \
	do {                                                                   \
		struct fr_ticket t;                                            \
		struct fr_comm_rec *c = begin(&t, comm, type, 0, -1, 0, MPI_DATATYPE_NULL, \
					      MPI_OP_NULL);                    \
		int rc = call;                                                 \
		end(c, &t);                                                    \
		if (rc == MPI_SUCCESS && c)                                    \
			learn_child(c, &t, *newcomm, kind, colour, what);      \
		return rc;                                                     \
	} while (0)

HOOK int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
	COMM_CREATE(FR_OP_COMM_SPLIT, PMPI_Comm_split(comm, color, key, newcomm), 'c',
		    color < 0 ? 0 : color, "split");
}

HOOK int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info,
			     MPI_Comm *newcomm)
{
	/* The colour is implicit (e.g. the node): name the child by its
	 * lowest member, which all members share. */
	COMM_CREATE(FR_OP_COMM_SPLIT, PMPI_Comm_split_type(comm, split_type, key, info, newcomm),
		    't', -1, "split_type");
}

HOOK int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
	COMM_CREATE(FR_OP_COMM_DUP, PMPI_Comm_dup(comm, newcomm), 'd', 0, "dup");
}

HOOK int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
	COMM_CREATE(FR_OP_COMM_CREATE, PMPI_Comm_create(comm, group, newcomm), 'g', -1,
		    "create");
}

HOOK int MPI_Comm_free(MPI_Comm *comm)
{
	uintptr_t h = comm ? (uintptr_t)*comm : 0;
	int rc = PMPI_Comm_free(comm);

	/* The handle may be recycled for another communicator. */
	if (rc == MPI_SUCCESS && h && comm_map.slots)
		fr_handles_take(&comm_map, h);
	return rc;
}
