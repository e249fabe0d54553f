#include "gpu.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Pending completions: one slot per operation on its way through the GPU.
 * Each slot owns an event, created the first time the slot is used. */
#define PENDING_SLOTS 16384

enum { SLOT_FREE, SLOT_FILLING, SLOT_PENDING };

struct pending_op {
	int state; /* atomic: SLOT_* */
	uint64_t record;
	uint16_t comm;
	uint64_t seq;
	bool collective;
	cudaEvent_t event;
};

static struct pending_op pending[PENDING_SLOTS];
static uint64_t next_slot; /* atomic: where producers start looking */

/* The runtime's entry points, resolved once. */
static struct {
#define CUDA_PTR(name, params) cudaError_t (*name) params;
	FR_CUDA_API(CUDA_PTR)
#undef CUDA_PTR
} cuda;

static int usable = -1; /* -1 unknown, 0 no, 1 yes; decided once */

/*
 * The runtime the application already loaded comes first (its sonames, by
 * CUDA version), then one we load ourselves. NCCL links its runtime
 * statically, so a process may have NCCL and no runtime library loaded.
 */
static void *open_runtime(void)
{
	static const char *const sonames[] = { "libcudart.so.13", "libcudart.so.12",
					       "libcudart.so.11.0", NULL };
	void *h;

	for (const char *const *s = sonames; *s; s++)
		if ((h = dlopen(*s, RTLD_NOW | RTLD_NOLOAD)))
			return h;
	for (const char *const *s = sonames; *s; s++)
		if ((h = dlopen(*s, RTLD_NOW | RTLD_LOCAL)))
			return h;
	return NULL;
}

static bool probe(void)
{
	void *h = open_runtime();
	int count = 0;

	if (!h)
		return false;
#define CUDA_SYM(name, params)                                          \
	*(void **)&cuda.name = dlsym(h, #name);                         \
	if (!cuda.name)                                                 \
		return false;
	FR_CUDA_API(CUDA_SYM)
#undef CUDA_SYM
	/* No driver or no device: cudaGetDeviceCount fails or says 0 (and
	 * leaves the count untouched on failure, hence the 0 above). */
	return cuda.cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

/* FLIGHTREC_GPU_EVENTS=0 turns event tracking off: completion is then
 * taken at the call's return, as without CUDA. */
static bool events_wanted(void)
{
	const char *v = getenv("FLIGHTREC_GPU_EVENTS");

	return !v || strcmp(v, "0") != 0;
}

bool fr_gpu_usable(void)
{
	int u = __atomic_load_n(&usable, __ATOMIC_ACQUIRE);

	if (u < 0) {
		u = events_wanted() && probe() ? 1 : 0;
		__atomic_store_n(&usable, u, __ATOMIC_RELEASE);
	}
	return u == 1;
}

static struct pending_op *claim_slot(void)
{
	uint64_t start = __atomic_fetch_add(&next_slot, 1, __ATOMIC_RELAXED);

	for (uint64_t i = 0; i < 64; i++) {
		struct pending_op *p = &pending[(start + i) % PENDING_SLOTS];
		int free_ = SLOT_FREE;

		if (__atomic_compare_exchange_n(&p->state, &free_, SLOT_FILLING, false,
						__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return p;
	}
	return NULL;
}

void fr_gpu_track(const struct fr_ticket *t, cudaStream_t stream)
{
	cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
	struct pending_op *p;

	if (!fr_gpu_usable())
		goto complete_now;
	/* A captured launch runs at each replay of the graph, not now: there
	 * is nothing to wait for, and querying its events is not allowed. */
	if (cuda.cudaStreamIsCapturing(stream, &capture) != cudaSuccess ||
	    capture != cudaStreamCaptureStatusNone)
		goto complete_now;
	p = claim_slot();
	if (!p)
		goto complete_now; /* too many in flight to follow: lose sight */
	if (!p->event &&
	    cuda.cudaEventCreateWithFlags(&p->event, cudaEventDisableTiming) != cudaSuccess) {
		p->event = NULL;
		goto release;
	}
	if (cuda.cudaEventRecord(p->event, stream) != cudaSuccess)
		goto release;
	p->record = t->record;
	p->comm = t->comm->index;
	p->seq = t->seq;
	p->collective = t->collective;
	__atomic_store_n(&p->state, SLOT_PENDING, __ATOMIC_RELEASE);
	return;

release:
	__atomic_store_n(&p->state, SLOT_FREE, __ATOMIC_RELEASE);
complete_now:
	fr_op_complete(t);
}

void fr_gpu_poll(void)
{
	if (__atomic_load_n(&usable, __ATOMIC_ACQUIRE) != 1)
		return;
	for (unsigned i = 0; i < PENDING_SLOTS; i++) {
		struct pending_op *p = &pending[i];

		if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != SLOT_PENDING)
			continue;
		if (cuda.cudaEventQuery(p->event) == cudaErrorNotReady)
			continue;
		/* Reached (or failed: an error will not turn into progress). */
		fr_op_complete_record(p->record, p->comm, p->seq, p->collective);
		__atomic_store_n(&p->state, SLOT_FREE, __ATOMIC_RELEASE);
	}
}
