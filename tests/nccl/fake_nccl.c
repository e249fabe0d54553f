/*
 * A CPU stand-in for NCCL (libnccl.so.2), for flightrec's end-to-end tests
 * on machines without a GPU. It exports the functions of FR_NCCL_API the
 * way the real library does -- a strong pnccl##X and a weak nccl##X alias
 * at the same address -- and runs the collectives between processes of one
 * machine through POSIX shared memory.
 *
 * As on a GPU, a call only queues the operation on its CUDA stream (the
 * stand-in runtime's worker thread, fake_cudart.c) and returns ncclSuccess;
 * the operation completes later, when every member has reached it. So a
 * rank that never calls a collective leaves the others with a queued,
 * never-completing operation, and their host threads block only where they
 * wait for the stream.
 *
 * One shared segment per communicator, named from a hash of its unique id:
 * a control block per rank (arrival and departure counters of the
 * collective barrier, the split exchange, what the rank passed), a mailbox
 * per (sender, receiver) pair for point-to-point transfers, and a data slot
 * per rank. A collective numbered n (per communicator, in call order):
 * every rank copies its input into its slot and announces arrival at n;
 * once all have arrived each computes its output from all the slots, then
 * announces departure; the slots are reused only once all have departed.
 *
 * Every wait is a poll with short sleeps, so that a hung collective costs
 * little CPU. All operations of a launch (one call, or a group) advance
 * together in one poll loop, so that sends and receives of a group cannot
 * deadlock, whatever their order.
 *
 * Faults to inject, from the environment at the first call:
 *   FAKE_NCCL_STUCK=R:S       the S-th collective (from 1) on rank R of the
 *                             chosen communicator never completes: it
 *                             never even arrives, as a kernel that spins
 *                             forever. Point-to-point calls do not count.
 *   FAKE_NCCL_STUCK_COMM=N    the communicator it applies to: the N-th this
 *                             process created (from 1, splits included);
 *                             1 by default, the first.
 *   FAKE_NCCL_SLOW_MS=N       every collective waits N ms before it starts.
 *   FAKE_NCCL_ASYNC_ERROR=R:S as FAKE_NCCL_STUCK=R:S (on the same
 *                             communicator), and from then on
 *                             ncclCommGetAsyncError says ncclRemoteError
 *                             and ncclGetLastError why, as the real
 *                             library does when a peer's connection fails
 *                             under a running kernel.
 *
 * And one fault that models the real library: when ranks disagree on a
 * collective (a different operation or root), none of them completes it;
 * when they disagree on its size, those that expect more data than another
 * rank gives never complete (NCCL's kernels would wait for the rest).
 */
#define _GNU_SOURCE
#include "nccl_abi.h"
#include "cuda_abi.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FAKE_API __attribute__((visibility("default")))

#define FAKE_NCCL_VERSION 22809
#define NCCL_SPLIT_NOCOLOR -1

/* Unique ids start with this, so that a dump or a test can tell them. */
#define ID_PREFIX "FAKENCCL"
#define ID_PREFIX_LEN 8

#define MAX_RANKS 256
#define SLOT_BYTES ((size_t)4 << 20)  /* input of one rank to one collective */
#define CHUNK_BYTES ((size_t)64 << 10) /* one mailbox transfer */
#define PAGE 4096

/* From fake_cudart.c: queues fn(arg) at the end of a stream. */
FAKE_API cudaError_t fakecuda_enqueue(cudaStream_t stream, void (*fn)(void *), void *arg);

#define DECLARE(name, ret, params, args) \
	FAKE_API ret pnccl##name params; \
	FAKE_API ret nccl##name params;
FR_NCCL_API(DECLARE)
#undef DECLARE
FAKE_API const char *pncclGetErrorString(ncclResult_t result);
FAKE_API const char *pncclGetLastError(ncclComm_t comm);

/* One rank's control block in the shared segment; every field only ever
 * grows or is written by its own rank, so all-zero is the initial state. */
struct shm_rank {
	uint64_t arrived;  /* the last collective whose input this rank has put in its slot */
	uint64_t departed; /* the last collective it has finished reading the slots for */
	uint64_t bytes;    /* that collective's count, in bytes */
	int32_t kind;      /* and its operation and root, to detect mismatches */
	int32_t root;
	uint64_t split_in;  /* the last split it has put its colour and key in for */
	uint64_t split_out; /* the last split it has read every colour and key of */
	int32_t color;
	int32_t key;
} __attribute__((aligned(64)));

/* Transfers from one rank to another, one chunk at a time; chunks of a
 * pair are numbered from 1 across all messages. */
struct shm_box {
	uint64_t posted; /* the last chunk the sender has written */
	uint64_t taken;  /* the last chunk the receiver has copied out */
	uint64_t len;    /* bytes in the posted chunk */
	unsigned char data[CHUNK_BYTES] __attribute__((aligned(64)));
};

struct shm_head {
	int32_t nranks; /* set by the first member; all-zero segment before */
	int32_t joined; /* members that have mapped the segment */
};

enum kind {
	K_ALLREDUCE = 1,
	K_BROADCAST,
	K_REDUCE,
	K_ALLGATHER,
	K_REDUCESCATTER,
	K_ALLTOALL,
	K_GATHER,
	K_SCATTER,
	K_SEND,
	K_RECV,
};

struct ncclComm {
	ncclUniqueId id;
	int nranks;
	int rank;
	unsigned ordinal; /* creation order in this process, from 1 */
	char shm_name[40];
	bool unlinked;
	void *base;
	size_t size;
	struct shm_head *head;
	struct shm_rank *ranks;
	struct shm_box *boxes; /* [sender * nranks + receiver] */
	unsigned char *slots;

	pthread_mutex_t lock;
	pthread_cond_t idle; /* pending fell to 0 */
	int refs;            /* the user's, plus one per operation in flight */
	int pending;         /* operations launched and not finished */
	uint64_t launched;   /* collectives handed to a stream */
	uint64_t splits;     /* splits of this communicator */
	uint64_t shrinks;
	uint64_t *sent;      /* chunks ever assigned to sends, per peer */
	uint64_t *received;  /* and to receives */

	uint64_t completed; /* the last collective done, in order; worker side */
	uint64_t stuck_at;  /* injected: the collective never to complete */
	bool fails_there;   /* ... and the communicator fails when it is reached */
	ncclResult_t async_error; /* what ncclCommGetAsyncError says (atomic) */
	bool aborted;
};

enum op_state { OP_START, OP_ARRIVED, OP_DEPARTED, OP_HUNG, OP_DONE };

/* One queued operation, and its progress on the stream's worker. */
struct op {
	struct op *next;
	enum kind kind;
	const void *sendbuff;
	void *recvbuff;
	size_t count;
	ncclDataType_t dt;
	ncclRedOp_t redop;
	int root; /* or the peer, for K_SEND and K_RECV */
	struct ncclComm *comm;
	cudaStream_t stream;

	enum op_state state;
	uint64_t seq; /* collective number on comm, from 1 */
	struct timespec not_before;
	bool slow_set;
	uint64_t chunk, last_chunk; /* point-to-point: the next chunk, the last */
	size_t offset;
};

/*
 * The operations of one launch run on the first one's stream. Other
 * streams of a group each get a join item: the launch waits until they
 * have passed their earlier work, and they wait until it has finished, as
 * NCCL makes the streams of a group wait on each other.
 */
struct launch {
	struct op *ops;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int joiners;
	int arrived;
	bool finished;
	int refs;
};

static struct {
	pthread_once_t once;
	int stuck_rank;
	uint64_t stuck_seq;
	unsigned stuck_comm;
	long slow_ms;
	bool async_error;
	unsigned comms; /* communicators created so far */
} config = { .once = PTHREAD_ONCE_INIT, .stuck_rank = -1, .stuck_comm = 1 };

static __thread int group_depth;
static __thread struct op *group_head, *group_tail;
static __thread char last_error[256];

static void read_config(void)
{
	const char *stuck = getenv("FAKE_NCCL_STUCK");
	const char *comm = getenv("FAKE_NCCL_STUCK_COMM");
	const char *slow = getenv("FAKE_NCCL_SLOW_MS");
	const char *async = getenv("FAKE_NCCL_ASYNC_ERROR");
	unsigned long long seq;
	int rank;

	if (async && sscanf(async, "%d:%llu", &rank, &seq) == 2 && rank >= 0 && seq > 0) {
		stuck = async;
		config.async_error = true;
	} else if (async && *async) {
		fprintf(stderr, "fake-nccl: FAKE_NCCL_ASYNC_ERROR=%s is not RANK:SEQ, ignored\n",
			async);
	}

	if (stuck && sscanf(stuck, "%d:%llu", &rank, &seq) == 2 && rank >= 0 && seq > 0) {
		config.stuck_rank = rank;
		config.stuck_seq = seq;
	} else if (stuck && *stuck) {
		fprintf(stderr, "fake-nccl: FAKE_NCCL_STUCK=%s is not RANK:SEQ, ignored\n", stuck);
	}
	if (comm && atoi(comm) > 0)
		config.stuck_comm = (unsigned)atoi(comm);
	if (slow && atol(slow) > 0)
		config.slow_ms = atol(slow);
}

static void init_once(void)
{
	pthread_once(&config.once, read_config);
}

static ncclResult_t fail(ncclResult_t res, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Remembers why a call failed, for ncclGetLastError. */
static ncclResult_t fail(ncclResult_t res, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return res;
}

/* Polls with short sleeps that lengthen once nothing has moved for a while
 * (50 us, then 1 ms after about 20 ms), so that a hang burns little CPU. */
static void backoff(unsigned *idle)
{
	struct timespec ts = { 0, *idle < 400 ? 50000 : 1000000 };

	(*idle)++;
	nanosleep(&ts, NULL);
}

#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

static uint64_t fnv1a(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* The id of a communicator derived from `parent` (by split or shrink):
 * the same on every member, without communicating. */
static void derive_id(const ncclUniqueId *parent, uint64_t how, uint64_t n, int64_t color,
		      ncclUniqueId *out)
{
	uint64_t h = mix(mix(mix(fnv1a(parent, sizeof(*parent)) ^ how) ^ n) ^ (uint64_t)color);

	memcpy(out->internal, ID_PREFIX, ID_PREFIX_LEN);
	for (size_t i = ID_PREFIX_LEN; i < sizeof(out->internal); i += 8) {
		h = mix(h);
		memcpy(out->internal + i, &h, 8);
	}
}

static size_t type_size(ncclDataType_t dt)
{
	switch (dt) {
	case ncclInt8:
	case ncclUint8:
	case ncclFloat8e4m3:
	case ncclFloat8e5m2:
		return 1;
	case ncclFloat16:
	case ncclBfloat16:
		return 2;
	case ncclInt32:
	case ncclUint32:
	case ncclFloat32:
		return 4;
	case ncclInt64:
	case ncclUint64:
	case ncclFloat64:
		return 8;
	default:
		return 0;
	}
}

static float bf16_to_float(uint16_t v)
{
	uint32_t bits = (uint32_t)v << 16;
	float f;

	memcpy(&f, &bits, sizeof(f));
	return f;
}

static uint16_t float_to_bf16(float f)
{
	uint32_t bits;

	memcpy(&bits, &f, sizeof(bits));
	bits += 0x7fff + ((bits >> 16) & 1); /* round to nearest even */
	return (uint16_t)(bits >> 16);
}

#define COMBINE(op, a, b)                                                   \
	((op) == ncclProd ? (a) * (b) :                                     \
	 (op) == ncclMax  ? ((a) > (b) ? (a) : (b)) :                       \
	 (op) == ncclMin  ? ((a) < (b) ? (a) : (b)) : (a) + (b))

#define REDUCE_AS(T)                                                        \
	do {                                                                \
		T *o_ = out;                                                \
		const T *i_ = in;                                           \
		for (size_t k_ = 0; k_ < n; k_++)                           \
			o_[k_] = (T)COMBINE(op, o_[k_], i_[k_]);            \
	} while (0)

#define DIVIDE_AS(T)                                                        \
	do {                                                                \
		T *o_ = out;                                                \
		for (size_t k_ = 0; k_ < n; k_++)                           \
			o_[k_] = (T)(o_[k_] / (T)by);                       \
	} while (0)

/* out[i] = out[i] op in[i]; ncclAvg sums (reduce_finish divides). */
static void reduce_into(void *out, const void *in, size_t n, ncclDataType_t dt, ncclRedOp_t op)
{
	switch (dt) {
	case ncclInt8: REDUCE_AS(int8_t); break;
	case ncclUint8: REDUCE_AS(uint8_t); break;
	case ncclInt32: REDUCE_AS(int32_t); break;
	case ncclUint32: REDUCE_AS(uint32_t); break;
	case ncclInt64: REDUCE_AS(int64_t); break;
	case ncclUint64: REDUCE_AS(uint64_t); break;
	case ncclFloat16: REDUCE_AS(_Float16); break;
	case ncclFloat32: REDUCE_AS(float); break;
	case ncclFloat64: REDUCE_AS(double); break;
	case ncclBfloat16: {
		uint16_t *o = out;
		const uint16_t *i = in;

		for (size_t k = 0; k < n; k++) {
			float a = bf16_to_float(o[k]), b = bf16_to_float(i[k]);

			o[k] = float_to_bf16(COMBINE(op, a, b));
		}
		break;
	}
	default:
		abort();
	}
}

static void reduce_finish(void *out, size_t n, ncclDataType_t dt, ncclRedOp_t op, int by)
{
	if (op != ncclAvg)
		return;
	switch (dt) {
	case ncclInt8: DIVIDE_AS(int8_t); break;
	case ncclUint8: DIVIDE_AS(uint8_t); break;
	case ncclInt32: DIVIDE_AS(int32_t); break;
	case ncclUint32: DIVIDE_AS(uint32_t); break;
	case ncclInt64: DIVIDE_AS(int64_t); break;
	case ncclUint64: DIVIDE_AS(uint64_t); break;
	case ncclFloat16: DIVIDE_AS(_Float16); break;
	case ncclFloat32: DIVIDE_AS(float); break;
	case ncclFloat64: DIVIDE_AS(double); break;
	case ncclBfloat16: {
		uint16_t *o = out;

		for (size_t k = 0; k < n; k++)
			o[k] = float_to_bf16(bf16_to_float(o[k]) / (float)by);
		break;
	}
	default:
		abort();
	}
}

static bool reducible(ncclDataType_t dt)
{
	return type_size(dt) > 0 && dt != ncclFloat8e4m3 && dt != ncclFloat8e5m2;
}

/* ---- Communicators ---- */

static size_t round_page(size_t n)
{
	return (n + PAGE - 1) / PAGE * PAGE;
}

static size_t ranks_offset(void)
{
	return round_page(sizeof(struct shm_head));
}

static size_t boxes_offset(int nranks)
{
	return ranks_offset() + round_page((size_t)nranks * sizeof(struct shm_rank));
}

static size_t slots_offset(int nranks)
{
	return boxes_offset(nranks) + round_page((size_t)nranks * nranks * sizeof(struct shm_box));
}

static size_t segment_size(int nranks)
{
	return slots_offset(nranks) + (size_t)nranks * SLOT_BYTES;
}

static unsigned char *slot(struct ncclComm *c, int r)
{
	return c->slots + (size_t)r * SLOT_BYTES;
}

static struct shm_box *box(struct ncclComm *c, int from, int to)
{
	return &c->boxes[(size_t)from * c->nranks + to];
}

/* Frees what comm_attach built; the segment's pages stay while others map it. */
static void comm_free(struct ncclComm *c)
{
	if (c->base)
		munmap(c->base, c->size);
	if (!c->unlinked && c->shm_name[0])
		shm_unlink(c->shm_name);
	free(c->sent);
	free(c->received);
	pthread_cond_destroy(&c->idle);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static void comm_put(struct ncclComm *c)
{
	if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0)
		comm_free(c);
}

/*
 * Maps the segment of communicator `id` as member `rank` of `nranks` and
 * counts itself in. Whoever comes first creates it; the segment starts
 * all-zero, which is a valid state, so no one has to initialise it. On
 * success, *out is a new communicator the caller owns.
 */
static ncclResult_t comm_attach(const ncclUniqueId *id, int nranks, int rank,
				struct ncclComm **out)
{
	struct ncclComm *c;
	struct stat st;
	int32_t expect = 0;
	ncclResult_t res;
	int fd;

	init_once();
	if (nranks < 1 || nranks > MAX_RANKS)
		return fail(ncclInvalidArgument, "nranks %d is not in 1..%d", nranks, MAX_RANKS);
	if (rank < 0 || rank >= nranks)
		return fail(ncclInvalidArgument, "rank %d is not in 0..%d", rank, nranks - 1);
	c = calloc(1, sizeof(*c));
	if (!c)
		return fail(ncclSystemError, "out of memory");
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->idle, NULL);
	c->refs = 1;
	c->id = *id;
	c->nranks = nranks;
	c->rank = rank;
	c->size = segment_size(nranks);
	c->sent = calloc((size_t)nranks, sizeof(*c->sent));
	c->received = calloc((size_t)nranks, sizeof(*c->received));
	if (!c->sent || !c->received) {
		res = fail(ncclSystemError, "out of memory");
		goto out_free;
	}
	snprintf(c->shm_name, sizeof(c->shm_name), "/fake-nccl-%016llx",
		 (unsigned long long)fnv1a(id, sizeof(*id)));

	fd = shm_open(c->shm_name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		res = fail(ncclSystemError, "shm_open %s: %s", c->shm_name, strerror(errno));
		goto out_free;
	}
	/* Only ever grow it: shrinking would cut a mapping someone else holds. */
	if (fstat(fd, &st) != 0 || ((size_t)st.st_size < c->size && ftruncate(fd, (off_t)c->size) != 0)) {
		res = fail(ncclSystemError, "sizing %s: %s", c->shm_name, strerror(errno));
		goto out_close_fd;
	}
	c->base = mmap(NULL, c->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (c->base == MAP_FAILED) {
		c->base = NULL;
		res = fail(ncclSystemError, "mmap %s: %s", c->shm_name, strerror(errno));
		goto out_close_fd;
	}
	close(fd);
	c->head = c->base;
	c->ranks = (struct shm_rank *)((char *)c->base + ranks_offset());
	c->boxes = (struct shm_box *)((char *)c->base + boxes_offset(nranks));
	c->slots = (unsigned char *)c->base + slots_offset(nranks);

	if (!__atomic_compare_exchange_n(&c->head->nranks, &expect, nranks, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) &&
	    expect != nranks) {
		/* Not ours to unlink: the others agree among themselves. */
		c->unlinked = true;
		res = fail(ncclInvalidArgument, "nranks %d, but another member said %d", nranks,
			   expect);
		goto out_free;
	}
	/* The last member in removes the name: every member has it mapped, and
	 * nothing is left behind in /dev/shm when the job is killed. */
	if (__atomic_add_fetch(&c->head->joined, 1, __ATOMIC_ACQ_REL) == nranks) {
		shm_unlink(c->shm_name);
		c->unlinked = true;
	}
	*out = c;
	return ncclSuccess;

out_close_fd:
	close(fd);
out_free:
	comm_free(c);
	return res;
}

/* Blocks until every member has attached, as NCCL's bootstrap does; then
 * numbers the communicator and arms the injected fault on it. */
static void comm_wait_joined(struct ncclComm *c)
{
	unsigned idle = 0;

	while (LOAD(&c->head->joined) < c->nranks)
		backoff(&idle);
	c->unlinked = true; /* by the last member to join */
	c->ordinal = __atomic_add_fetch(&config.comms, 1, __ATOMIC_ACQ_REL);
	if (c->ordinal == config.stuck_comm && c->rank == config.stuck_rank) {
		c->stuck_at = config.stuck_seq;
		c->fails_there = config.async_error;
	}
}

static ncclResult_t comm_create(ncclComm_t *comm, int nranks, const ncclUniqueId *id, int rank)
{
	struct ncclComm *c;
	ncclResult_t res;

	if (!comm)
		return fail(ncclInvalidArgument, "comm is NULL");
	res = comm_attach(id, nranks, rank, &c);
	if (res != ncclSuccess)
		return res;
	comm_wait_joined(c);
	*comm = c;
	return ncclSuccess;
}

/* Waits until every operation launched on c has finished. */
static void comm_drain(struct ncclComm *c)
{
	pthread_mutex_lock(&c->lock);
	while (c->pending > 0)
		pthread_cond_wait(&c->idle, &c->lock);
	pthread_mutex_unlock(&c->lock);
}

/* ---- Operations: each step advances without blocking, returns true when it moved ---- */

static bool aborted(struct ncclComm *c)
{
	return LOAD(&c->aborted);
}

static void op_done(struct op *op)
{
	if (op->seq)
		STORE(&op->comm->completed, op->seq);
	op->state = OP_DONE;
}

/* Bytes this rank puts in its slot for a collective. */
static size_t input_bytes(const struct op *op)
{
	size_t b = op->count * type_size(op->dt), n = (size_t)op->comm->nranks;

	switch (op->kind) {
	case K_REDUCESCATTER:
	case K_ALLTOALL:
		return b * n;
	case K_BROADCAST:
		return op->comm->rank == op->root ? b : 0;
	case K_SCATTER:
		return op->comm->rank == op->root ? b * n : 0;
	default:
		return b;
	}
}

/* Reduces every slot's run at `offset` into out, in rank order, so that
 * every rank gets bit-identical results. */
static void reduce_slots(struct op *op, void *out, size_t offset)
{
	struct ncclComm *c = op->comm;
	size_t bytes = op->count * type_size(op->dt);

	memcpy(out, slot(c, 0) + offset, bytes);
	for (int r = 1; r < c->nranks; r++)
		reduce_into(out, slot(c, r) + offset, op->count, op->dt, op->redop);
	reduce_finish(out, op->count, op->dt, op->redop, c->nranks);
}

static void compute(struct op *op)
{
	struct ncclComm *c = op->comm;
	size_t b = op->count * type_size(op->dt);
	unsigned char *out = op->recvbuff;
	int me = c->rank;

	switch (op->kind) {
	case K_ALLREDUCE:
		reduce_slots(op, out, 0);
		break;
	case K_REDUCE:
		if (me == op->root)
			reduce_slots(op, out, 0);
		break;
	case K_REDUCESCATTER:
		reduce_slots(op, out, (size_t)me * b);
		break;
	case K_BROADCAST:
		memcpy(out, slot(c, op->root), b);
		break;
	case K_SCATTER:
		memcpy(out, slot(c, op->root) + (size_t)me * b, b);
		break;
	case K_ALLGATHER:
		for (int r = 0; r < c->nranks; r++)
			memmove(out + (size_t)r * b, slot(c, r), b);
		break;
	case K_GATHER:
		if (me == op->root)
			for (int r = 0; r < c->nranks; r++)
				memmove(out + (size_t)r * b, slot(c, r), b);
		break;
	case K_ALLTOALL:
		for (int r = 0; r < c->nranks; r++)
			memcpy(out + (size_t)r * b, slot(c, r) + (size_t)me * b, b);
		break;
	default:
		abort();
	}
}

static bool rooted(enum kind k)
{
	return k == K_BROADCAST || k == K_REDUCE || k == K_GATHER || k == K_SCATTER;
}

/* Whether this rank can complete the collective all have arrived at; says
 * on stderr why not, as a hint in the job's log. */
static bool agreed(struct op *op)
{
	struct ncclComm *c = op->comm;
	uint64_t mine = op->count * type_size(op->dt);

	for (int r = 0; r < c->nranks; r++) {
		struct shm_rank *p = &c->ranks[r];

		if (p->kind != (int32_t)op->kind || (rooted(op->kind) && p->root != op->root)) {
			fprintf(stderr,
				"fake-nccl: rank %d: collective %llu on comm %u: rank %d calls another "
				"operation or root; it never completes\n",
				c->rank, (unsigned long long)op->seq, c->ordinal, r);
			return false;
		}
		if (p->bytes < mine) {
			fprintf(stderr,
				"fake-nccl: rank %d: collective %llu on comm %u: %llu bytes, rank %d "
				"gives %llu; waiting for the rest forever\n",
				c->rank, (unsigned long long)op->seq, c->ordinal,
				(unsigned long long)mine, r, (unsigned long long)p->bytes);
			return false;
		}
	}
	return true;
}

static bool step_collective(struct op *op)
{
	struct ncclComm *c = op->comm;
	struct shm_rank *me = &c->ranks[c->rank];
	struct timespec now;

	if (aborted(c)) {
		op_done(op);
		return true;
	}
	switch (op->state) {
	case OP_START:
		if (LOAD(&c->completed) != op->seq - 1)
			return false; /* an earlier collective of this communicator runs */
		if (config.slow_ms > 0) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (!op->slow_set) {
				op->slow_set = true;
				op->not_before = now;
				op->not_before.tv_sec += config.slow_ms / 1000;
				op->not_before.tv_nsec += config.slow_ms % 1000 * 1000000L;
				if (op->not_before.tv_nsec >= 1000000000L) {
					op->not_before.tv_sec++;
					op->not_before.tv_nsec -= 1000000000L;
				}
			}
			if (now.tv_sec < op->not_before.tv_sec ||
			    (now.tv_sec == op->not_before.tv_sec &&
			     now.tv_nsec < op->not_before.tv_nsec))
				return false;
		}
		if (op->seq == c->stuck_at) {
			op->state = OP_HUNG; /* the injected kernel that never ends */
			if (c->fails_there)
				STORE(&c->async_error, ncclRemoteError);
			return true;
		}
		if (op->sendbuff && input_bytes(op))
			memmove(slot(c, c->rank), op->sendbuff, input_bytes(op));
		me->bytes = op->count * type_size(op->dt);
		me->kind = (int32_t)op->kind;
		me->root = op->root;
		STORE(&me->arrived, op->seq);
		op->state = OP_ARRIVED;
		return true;
	case OP_ARRIVED:
		for (int r = 0; r < c->nranks; r++)
			if (LOAD(&c->ranks[r].arrived) < op->seq)
				return false;
		if (agreed(op)) {
			compute(op);
			op->state = OP_DEPARTED;
		} else {
			op->state = OP_HUNG;
		}
		STORE(&me->departed, op->seq);
		return true;
	case OP_DEPARTED:
		for (int r = 0; r < c->nranks; r++)
			if (LOAD(&c->ranks[r].departed) < op->seq)
				return false;
		op_done(op);
		return true;
	case OP_HUNG:
	case OP_DONE:
		return false;
	}
	return false;
}

static uint64_t chunks_of(const struct op *op)
{
	size_t bytes = op->count * type_size(op->dt);

	return bytes ? (bytes + CHUNK_BYTES - 1) / CHUNK_BYTES : 1;
}

/*
 * A send posts chunk k once the receiver has taken chunk k-1, and is done
 * when the receiver has taken its last: like NCCL's, it completes only
 * with its matching receive.
 */
static bool step_send(struct op *op)
{
	struct ncclComm *c = op->comm;
	struct shm_box *b = box(c, c->rank, op->root);
	size_t bytes = op->count * type_size(op->dt), len;

	if (aborted(c)) {
		op_done(op);
		return true;
	}
	if (op->state == OP_START) {
		pthread_mutex_lock(&c->lock);
		op->chunk = c->sent[op->root] + 1;
		c->sent[op->root] += chunks_of(op);
		pthread_mutex_unlock(&c->lock);
		op->last_chunk = op->chunk + chunks_of(op) - 1;
		op->state = OP_ARRIVED;
	}
	if (op->chunk > op->last_chunk) {
		if (LOAD(&b->taken) < op->last_chunk)
			return false;
		op_done(op);
		return true;
	}
	if (LOAD(&b->taken) != op->chunk - 1 || LOAD(&b->posted) != op->chunk - 1)
		return false;
	len = bytes - op->offset < CHUNK_BYTES ? bytes - op->offset : CHUNK_BYTES;
	if (len)
		memcpy(b->data, (const unsigned char *)op->sendbuff + op->offset, len);
	b->len = len;
	STORE(&b->posted, op->chunk);
	op->offset += len;
	op->chunk++;
	return true;
}

static bool step_recv(struct op *op)
{
	struct ncclComm *c = op->comm;
	struct shm_box *b = box(c, op->root, c->rank);
	size_t bytes = op->count * type_size(op->dt), len;

	if (aborted(c)) {
		op_done(op);
		return true;
	}
	if (op->state == OP_START) {
		pthread_mutex_lock(&c->lock);
		op->chunk = c->received[op->root] + 1;
		c->received[op->root] += chunks_of(op);
		pthread_mutex_unlock(&c->lock);
		op->last_chunk = op->chunk + chunks_of(op) - 1;
		op->state = OP_ARRIVED;
	}
	if (LOAD(&b->posted) < op->chunk || LOAD(&b->taken) != op->chunk - 1)
		return false;
	len = b->len;
	if (len > bytes - op->offset)
		len = bytes - op->offset; /* the sender sent more than asked for */
	if (len)
		memcpy((unsigned char *)op->recvbuff + op->offset, b->data, len);
	op->offset += len;
	STORE(&b->taken, op->chunk);
	if (op->chunk++ == op->last_chunk)
		op_done(op);
	return true;
}

static bool step(struct op *op)
{
	switch (op->kind) {
	case K_SEND:
		return step_send(op);
	case K_RECV:
		return step_recv(op);
	default:
		return step_collective(op);
	}
}

/* Runs a launch's operations to their end, all advancing together. */
static void run_ops(struct op *ops)
{
	unsigned idle = 0;

	for (;;) {
		bool all_done = true, moved = false;

		for (struct op *op = ops; op; op = op->next) {
			if (op->state == OP_DONE)
				continue;
			moved |= step(op);
			if (op->state != OP_DONE)
				all_done = false;
		}
		if (all_done)
			return;
		if (moved)
			idle = 0;
		else
			backoff(&idle);
	}
}

static void finish_ops(struct op *ops)
{
	while (ops) {
		struct op *next = ops->next;
		struct ncclComm *c = ops->comm;

		pthread_mutex_lock(&c->lock);
		if (--c->pending == 0)
			pthread_cond_broadcast(&c->idle);
		pthread_mutex_unlock(&c->lock);
		comm_put(c);
		free(ops);
		ops = next;
	}
}

static void launch_put(struct launch *l)
{
	if (__atomic_sub_fetch(&l->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	pthread_cond_destroy(&l->cond);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

/* Work item on the launch's own stream. */
static void run_launch(void *arg)
{
	struct launch *l = arg;

	pthread_mutex_lock(&l->lock);
	while (l->arrived < l->joiners)
		pthread_cond_wait(&l->cond, &l->lock);
	pthread_mutex_unlock(&l->lock);

	run_ops(l->ops);
	finish_ops(l->ops);
	l->ops = NULL;

	pthread_mutex_lock(&l->lock);
	l->finished = true;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
	launch_put(l);
}

/* Work item on every other stream of a group. */
static void run_join(void *arg)
{
	struct launch *l = arg;

	pthread_mutex_lock(&l->lock);
	l->arrived++;
	pthread_cond_broadcast(&l->cond);
	while (!l->finished)
		pthread_cond_wait(&l->cond, &l->lock);
	pthread_mutex_unlock(&l->lock);
	launch_put(l);
}

static bool same_stream(cudaStream_t a, cudaStream_t b)
{
	/* NULL and the legacy handle name the same stream. */
	if ((uintptr_t)a <= 2 && (uintptr_t)b <= 2)
		return true;
	return a == b;
}

/* Numbers the collectives of `ops` and queues them; takes ownership of ops. */
static ncclResult_t launch(struct op *ops)
{
	struct launch *l;
	cudaStream_t home = ops->stream;

	l = calloc(1, sizeof(*l));
	if (!l) {
		while (ops) {
			struct op *next = ops->next;

			comm_put(ops->comm);
			free(ops);
			ops = next;
		}
		return fail(ncclSystemError, "out of memory");
	}
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->cond, NULL);
	l->ops = ops;
	l->refs = 1;
	for (struct op *op = ops; op; op = op->next) {
		struct ncclComm *c = op->comm;

		pthread_mutex_lock(&c->lock);
		if (op->kind != K_SEND && op->kind != K_RECV)
			op->seq = ++c->launched;
		c->pending++;
		pthread_mutex_unlock(&c->lock);
	}

	/* One join per other stream (each once), queued before the launch. */
	for (struct op *op = ops; op; op = op->next) {
		bool seen = same_stream(op->stream, home);

		for (struct op *o = ops; !seen && o != op; o = o->next)
			seen = same_stream(o->stream, op->stream);
		if (seen)
			continue;
		__atomic_add_fetch(&l->refs, 1, __ATOMIC_ACQ_REL);
		pthread_mutex_lock(&l->lock);
		l->joiners++;
		pthread_mutex_unlock(&l->lock);
		if (fakecuda_enqueue(op->stream, run_join, l) != cudaSuccess) {
			pthread_mutex_lock(&l->lock);
			l->joiners--;
			pthread_mutex_unlock(&l->lock);
			launch_put(l);
		}
	}
	if (fakecuda_enqueue(home, run_launch, l) != cudaSuccess) {
		/* Nothing will run them: count them finished, unblock the joins. */
		for (struct op *op = l->ops; op; op = op->next)
			op_done(op);
		finish_ops(l->ops);
		l->ops = NULL;
		pthread_mutex_lock(&l->lock);
		l->finished = true;
		pthread_cond_broadcast(&l->cond);
		pthread_mutex_unlock(&l->lock);
		launch_put(l);
		return fail(ncclUnhandledCudaError, "cannot queue on the stream");
	}
	return ncclSuccess;
}

/* Queues a copy of *proto, or inside a group keeps it for ncclGroupEnd. */
static ncclResult_t submit(const struct op *proto)
{
	struct op *op = malloc(sizeof(*op));

	if (!op)
		return fail(ncclSystemError, "out of memory");
	*op = *proto;
	op->next = NULL;
	op->state = OP_START;
	__atomic_add_fetch(&op->comm->refs, 1, __ATOMIC_ACQ_REL);
	if (group_depth > 0) {
		if (group_tail)
			group_tail->next = op;
		else
			group_head = op;
		group_tail = op;
		return ncclSuccess;
	}
	return launch(op);
}

/* Checks what every operation needs; ncclInvalidArgument as NCCL's own. */
static ncclResult_t check_op(const struct op *op, const char *what)
{
	struct ncclComm *c = op->comm;
	size_t ts = type_size(op->dt), per = 1;

	init_once();
	if (!c)
		return fail(ncclInvalidArgument, "%s: comm is NULL", what);
	if (aborted(c))
		return fail(ncclInvalidUsage, "%s: communicator was aborted or revoked", what);
	if (!ts)
		return fail(ncclInvalidArgument, "%s: invalid datatype %d", what, (int)op->dt);
	if ((op->kind == K_ALLREDUCE || op->kind == K_REDUCE || op->kind == K_REDUCESCATTER) &&
	    ((unsigned)op->redop >= ncclNumOps || !reducible(op->dt)))
		return fail(ncclInvalidArgument, "%s: reduction %d on datatype %d is not supported",
			    what, (int)op->redop, (int)op->dt);
	if ((rooted(op->kind) || op->kind == K_SEND || op->kind == K_RECV) &&
	    (op->root < 0 || op->root >= c->nranks))
		return fail(ncclInvalidArgument, "%s: %s %d is not in 0..%d", what,
			    rooted(op->kind) ? "root" : "peer", op->root, c->nranks - 1);
	if (op->kind == K_REDUCESCATTER || op->kind == K_ALLTOALL || op->kind == K_SCATTER)
		per = (size_t)c->nranks;
	if (op->kind != K_SEND && op->kind != K_RECV && op->count > SLOT_BYTES / ts / per)
		return fail(ncclInvalidArgument, "%s: count %zu is more than the stand-in's %zu bytes",
			    what, op->count, SLOT_BYTES);
	if (op->count && !op->recvbuff && op->kind != K_SEND &&
	    !((op->kind == K_REDUCE || op->kind == K_GATHER) && c->rank != op->root))
		return fail(ncclInvalidArgument, "%s: recvbuff is NULL", what);
	if (op->count && !op->sendbuff && op->kind != K_RECV && input_bytes(op))
		return fail(ncclInvalidArgument, "%s: sendbuff is NULL", what);
	return ncclSuccess;
}

static ncclResult_t enqueue(const struct op *op, const char *what)
{
	ncclResult_t res = check_op(op, what);

	return res == ncclSuccess ? submit(op) : res;
}

/* ---- The API ---- */

ncclResult_t pncclGetVersion(int *version)
{
	if (!version)
		return fail(ncclInvalidArgument, "version is NULL");
	*version = FAKE_NCCL_VERSION;
	return ncclSuccess;
}

ncclResult_t pncclGetUniqueId(ncclUniqueId *id)
{
	size_t got = 0;

	if (!id)
		return fail(ncclInvalidArgument, "id is NULL");
	while (got < sizeof(id->internal)) {
		ssize_t n = getrandom(id->internal + got, sizeof(id->internal) - got, 0);

		if (n < 0 && errno != EINTR)
			return fail(ncclSystemError, "getrandom: %s", strerror(errno));
		if (n > 0)
			got += (size_t)n;
	}
	memcpy(id->internal, ID_PREFIX, ID_PREFIX_LEN);
	return ncclSuccess;
}

ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
	return comm_create(comm, nranks, &id, rank);
}

/* The configuration is opaque here: every communicator is blocking. */
ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
				     ncclConfig_t *config_)
{
	(void)config_;
	return comm_create(comm, nranks, &id, rank);
}

/* One process, ndev members; like NCCL it gets the id through the public
 * (interposable) ncclGetUniqueId. The device list is not checked. */
ncclResult_t pncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
	ncclUniqueId id;
	ncclResult_t res;
	int i;

	(void)devlist;
	if (!comms || ndev < 1)
		return fail(ncclInvalidArgument, "comms is NULL or ndev %d < 1", ndev);
	res = ncclGetUniqueId(&id);
	if (res != ncclSuccess)
		return res;
	for (i = 0; i < ndev; i++) {
		res = comm_attach(&id, ndev, i, &comms[i]);
		if (res != ncclSuccess)
			goto out_put_comms;
	}
	for (i = 0; i < ndev; i++)
		comm_wait_joined(comms[i]);
	return ncclSuccess;

out_put_comms:
	while (i-- > 0) {
		comm_put(comms[i]);
		comms[i] = NULL;
	}
	return res;
}

/* Every member passes the same ids; the first names the communicator. */
ncclResult_t pncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int nids,
				       ncclUniqueId *ids, ncclConfig_t *config_)
{
	(void)config_;
	if (nids < 1 || !ids)
		return fail(ncclInvalidArgument, "no unique id");
	return comm_create(comm, nranks, &ids[0], rank);
}

/*
 * An all-gather of (colour, key) through the parent's control blocks, run
 * on the host as NCCL's bootstrap does, then the members of each colour
 * attach to a communicator whose id derives from the parent's.
 */
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
			    ncclConfig_t *config_)
{
	struct shm_rank *me;
	ncclUniqueId id;
	uint64_t gen;
	unsigned idle = 0;
	int n = 0, newrank = 0;

	(void)config_;
	init_once();
	if (!comm || !newcomm)
		return fail(ncclInvalidArgument, "comm or newcomm is NULL");
	if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
		return fail(ncclInvalidArgument, "color %d", color);
	pthread_mutex_lock(&comm->lock);
	gen = ++comm->splits;
	pthread_mutex_unlock(&comm->lock);

	me = &comm->ranks[comm->rank];
	me->color = color;
	me->key = key;
	STORE(&me->split_in, gen);
	for (int r = 0; r < comm->nranks; r++)
		while (LOAD(&comm->ranks[r].split_in) < gen)
			backoff(&idle);
	for (int r = 0; r < comm->nranks; r++) {
		const struct shm_rank *p = &comm->ranks[r];

		if (p->color != color)
			continue;
		n++;
		if (p->key < key || (p->key == key && r < comm->rank))
			newrank++;
	}
	STORE(&me->split_out, gen);
	for (int r = 0; r < comm->nranks; r++)
		while (LOAD(&comm->ranks[r].split_out) < gen)
			backoff(&idle);

	if (color == NCCL_SPLIT_NOCOLOR) {
		*newcomm = NULL;
		return ncclSuccess;
	}
	derive_id(&comm->id, 's', gen, color, &id);
	return comm_create(newcomm, n, &id, newrank);
}

/* The survivors renumber themselves in order, without communicating, so
 * the excluded ranks need not take part; flags are ignored. */
ncclResult_t pncclCommShrink(ncclComm_t comm, int *exclude, int nexclude, ncclComm_t *newcomm,
			     ncclConfig_t *config_, int flags)
{
	ncclUniqueId id;
	uint64_t gen;
	int below = 0, excluded = 0;

	(void)config_;
	(void)flags;
	init_once();
	if (!comm || !newcomm || nexclude < 0 || (nexclude > 0 && !exclude))
		return fail(ncclInvalidArgument, "bad arguments to ncclCommShrink");
	for (int i = 0; i < nexclude; i++) {
		bool dup = false;

		if (exclude[i] < 0 || exclude[i] >= comm->nranks)
			return fail(ncclInvalidArgument, "excluded rank %d", exclude[i]);
		for (int j = 0; j < i; j++)
			dup |= exclude[j] == exclude[i];
		if (dup)
			continue;
		if (exclude[i] == comm->rank)
			return fail(ncclInvalidArgument, "this rank is excluded");
		excluded++;
		below += exclude[i] < comm->rank;
	}
	if (excluded >= comm->nranks)
		return fail(ncclInvalidArgument, "every rank is excluded");
	pthread_mutex_lock(&comm->lock);
	gen = ++comm->shrinks;
	pthread_mutex_unlock(&comm->lock);
	derive_id(&comm->id, 'k', gen, excluded, &id);
	return comm_create(newcomm, comm->nranks - excluded, &id, comm->rank - below);
}

/* Waits for the operations in flight, as a blocking communicator does. */
ncclResult_t pncclCommFinalize(ncclComm_t comm)
{
	if (!comm)
		return fail(ncclInvalidArgument, "comm is NULL");
	comm_drain(comm);
	return ncclSuccess;
}

ncclResult_t pncclCommDestroy(ncclComm_t comm)
{
	if (!comm)
		return fail(ncclInvalidArgument, "comm is NULL");
	comm_drain(comm);
	comm_put(comm);
	return ncclSuccess;
}

/* Operations in flight give up (and count as finished) at their next poll;
 * the last of them frees the communicator. */
ncclResult_t pncclCommAbort(ncclComm_t comm)
{
	if (!comm)
		return ncclSuccess;
	STORE(&comm->aborted, true);
	comm_put(comm);
	return ncclSuccess;
}

/* Like an abort of the operations in flight; the handle stays valid for
 * ncclCommDestroy, and every later operation on it fails. */
ncclResult_t pncclCommRevoke(ncclComm_t comm, int flags)
{
	(void)flags;
	if (!comm)
		return fail(ncclInvalidArgument, "comm is NULL");
	STORE(&comm->aborted, true);
	return ncclSuccess;
}

ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err)
{
	if (!comm || !err)
		return fail(ncclInvalidArgument, "comm or err is NULL");
	*err = LOAD(&comm->async_error);
	return ncclSuccess;
}

ncclResult_t pncclCommCount(const ncclComm_t comm, int *count)
{
	if (!comm || !count)
		return fail(ncclInvalidArgument, "comm or count is NULL");
	*count = comm->nranks;
	return ncclSuccess;
}

ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank)
{
	if (!comm || !rank)
		return fail(ncclInvalidArgument, "comm or rank is NULL");
	*rank = comm->rank;
	return ncclSuccess;
}

ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t dt,
			    ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
	struct op o = { .kind = K_ALLREDUCE, .sendbuff = sendbuff, .recvbuff = recvbuff,
			.count = count, .dt = dt, .redop = op, .comm = comm, .stream = stream };

	return enqueue(&o, "ncclAllReduce");
}

ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t dt,
			    int root, ncclComm_t comm, cudaStream_t stream)
{
	struct op o = { .kind = K_BROADCAST, .sendbuff = sendbuff, .recvbuff = recvbuff,
			.count = count, .dt = dt, .root = root, .comm = comm, .stream = stream };

	return enqueue(&o, "ncclBroadcast");
}

/* As in NCCL, through the public symbol: a preloaded hook sees the nested
 * ncclBroadcast. */
ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,
			cudaStream_t stream)
{
	return ncclBroadcast(buff, buff, count, dt, root, comm, stream);
}

ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t dt,
			 ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
	struct op o = { .kind = K_REDUCE, .sendbuff = sendbuff, .recvbuff = recvbuff,
			.count = count, .dt = dt, .redop = op, .root = root, .comm = comm,
			.stream = stream };

	return enqueue(&o, "ncclReduce");
}

ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
			    ncclDataType_t dt, ncclComm_t comm, cudaStream_t stream)
{
	struct op o = { .kind = K_ALLGATHER, .sendbuff = sendbuff, .recvbuff = recvbuff,
			.count = sendcount, .dt = dt, .comm = comm, .stream = stream };

	return enqueue(&o, "ncclAllGather");
}

ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
				ncclDataType_t dt, ncclRedOp_t op, ncclComm_t comm,
				cudaStream_t stream)
{
	struct op o = { .kind = K_REDUCESCATTER, .sendbuff = sendbuff, .recvbuff = recvbuff,
			.count = recvcount, .dt = dt, .redop = op, .comm = comm, .stream = stream };

	return enqueue(&o, "ncclReduceScatter");
}

ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t dt,
			   ncclComm_t comm, cudaStream_t stream)
{
	struct op o = { .kind = K_ALLTOALL, .sendbuff = sendbuff, .recvbuff = recvbuff,
			.count = count, .dt = dt, .comm = comm, .stream = stream };

	return enqueue(&o, "ncclAlltoAll");
}

ncclResult_t pncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t dt,
			 int root, ncclComm_t comm, cudaStream_t stream)
{
	struct op o = { .kind = K_GATHER, .sendbuff = sendbuff, .recvbuff = recvbuff,
			.count = count, .dt = dt, .root = root, .comm = comm, .stream = stream };

	return enqueue(&o, "ncclGather");
}

ncclResult_t pncclScatter(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t dt,
			  int root, ncclComm_t comm, cudaStream_t stream)
{
	struct op o = { .kind = K_SCATTER, .sendbuff = sendbuff, .recvbuff = recvbuff,
			.count = count, .dt = dt, .root = root, .comm = comm, .stream = stream };

	return enqueue(&o, "ncclScatter");
}

ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t dt, int peer,
		       ncclComm_t comm, cudaStream_t stream)
{
	struct op o = { .kind = K_SEND, .sendbuff = sendbuff, .count = count, .dt = dt,
			.root = peer, .comm = comm, .stream = stream };

	return enqueue(&o, "ncclSend");
}

ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t dt, int peer,
		       ncclComm_t comm, cudaStream_t stream)
{
	struct op o = { .kind = K_RECV, .recvbuff = recvbuff, .count = count, .dt = dt,
			.root = peer, .comm = comm, .stream = stream };

	return enqueue(&o, "ncclRecv");
}

ncclResult_t pncclGroupStart(void)
{
	init_once();
	group_depth++;
	return ncclSuccess;
}

/* The outermost end launches what the group recorded, in call order. */
ncclResult_t pncclGroupEnd(void)
{
	struct op *ops = group_head;

	if (group_depth == 0)
		return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
	if (--group_depth > 0)
		return ncclSuccess;
	group_head = group_tail = NULL;
	return ops ? launch(ops) : ncclSuccess;
}

static const char *const error_strings[] = {
	[ncclSuccess] = "no error",
	[ncclUnhandledCudaError] = "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
	[ncclSystemError] = "unhandled system error (run with NCCL_DEBUG=INFO for details)",
	[ncclInternalError] = "internal error - please report this issue to the NCCL developers",
	[ncclInvalidArgument] = "invalid argument (run with NCCL_DEBUG=WARN for details)",
	[ncclInvalidUsage] = "invalid usage (run with NCCL_DEBUG=WARN for details)",
	[ncclRemoteError] = "remote process exited or there was a network error",
	[ncclInProgress] = "NCCL operation in progress",
};

const char *pncclGetErrorString(ncclResult_t result)
{
	if ((unsigned)result < ncclNumResults)
		return error_strings[result];
	return "unknown result code";
}

const char *pncclGetLastError(ncclComm_t comm)
{
	if (comm && LOAD(&comm->async_error) == ncclRemoteError)
		return "fake-nccl: remote process exited or there was a network error (injected)";
	return last_error;
}

/* The public names, weak aliases of the profiling ones, as in NCCL. */
#define ALIAS(name, ret, params, args) \
	FAKE_API ret nccl##name params __attribute__((weak, alias("pnccl" #name)));
FR_NCCL_API(ALIAS)
ALIAS(GetErrorString, const char *, (ncclResult_t result), (result))
ALIAS(GetLastError, const char *, (ncclComm_t comm), (comm))
#undef ALIAS
