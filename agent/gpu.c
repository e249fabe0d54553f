#include "gpu.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlsym.h"

/*
 * Operations on their way through the GPU: one slot each. A slot owns its
 * two events, created the first time the slot is used, on the device that
 * was current then (an event can only be recorded on a stream of its own
 * device). A process that drives several GPUs takes slots whose events
 * belong to its current device, and remakes a slot's events only when no
 * such slot is free nearby.
 */
#define PENDING_SLOTS 16384

/* FILLING: claimed by an application thread between fr_gpu_begin and
 * fr_gpu_track; PENDING: polled by the link thread. */
enum { SLOT_FREE, SLOT_FILLING, SLOT_PENDING };

struct fr_gpu_op {
	int state; /* atomic: SLOT_* */
	bool started; /* link thread's: the start event was reached */
	uint64_t record;
	uint16_t comm;
	uint64_t seq;
	bool collective;
	/* The events' device + 1, 0 before they exist. Atomic: threads
	 * looking for a slot read it before they own one. */
	int events_dev;
	cudaEvent_t start;
	cudaEvent_t end;
};

static struct fr_gpu_op pending[PENDING_SLOTS];
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
	*(void **)&cuda.name = fr_real_dlsym(h, #name);                     \
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

static bool claim(struct fr_gpu_op *p)
{
	int free_ = SLOT_FREE;

	return __atomic_compare_exchange_n(&p->state, &free_, SLOT_FILLING, false,
					   __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

/* A free slot, preferably one with events of `device` (or none yet). */
static struct fr_gpu_op *claim_slot(int device)
{
	uint64_t start = __atomic_fetch_add(&next_slot, 1, __ATOMIC_RELAXED);
	struct fr_gpu_op *other = NULL;

	for (uint64_t i = 0; i < 64; i++) {
		struct fr_gpu_op *p = &pending[(start + i) % PENDING_SLOTS];
		int dev;

		if (__atomic_load_n(&p->state, __ATOMIC_RELAXED) != SLOT_FREE)
			continue;
		dev = __atomic_load_n(&p->events_dev, __ATOMIC_RELAXED);
		if (!dev || dev == device + 1) {
			if (claim(p))
				return p;
		} else if (!other) {
			other = p;
		}
	}
	return other && claim(other) ? other : NULL;
}

static bool event_ready(cudaEvent_t *e)
{
	if (!*e && cuda.cudaEventCreateWithFlags(e, cudaEventDisableTiming) != cudaSuccess) {
		*e = NULL;
		return false;
	}
	return true;
}

/* Gives slot `p` events on `device`. */
static bool events_on(struct fr_gpu_op *p, int device)
{
	if (__atomic_load_n(&p->events_dev, __ATOMIC_RELAXED) != device + 1) {
		if (p->start)
			cuda.cudaEventDestroy(p->start);
		if (p->end)
			cuda.cudaEventDestroy(p->end);
		p->start = p->end = NULL;
		__atomic_store_n(&p->events_dev, device + 1, __ATOMIC_RELAXED);
	}
	return event_ready(&p->start) && event_ready(&p->end);
}

bool fr_gpu_capturing(cudaStream_t stream)
{
	cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;

	if (!fr_gpu_usable())
		return false;
	/* A stream that cannot say is not one to record events on either. */
	return cuda.cudaStreamIsCapturing(stream, &capture) != cudaSuccess ||
	       capture != cudaStreamCaptureStatusNone;
}

struct fr_gpu_op *fr_gpu_begin(cudaStream_t stream)
{
	struct fr_gpu_op *p;
	int device = 0;

	if (!fr_gpu_usable() || cuda.cudaGetDevice(&device) != cudaSuccess)
		return NULL;
	p = claim_slot(device);
	if (!p)
		return NULL; /* too many in flight to follow: lose sight */
	if (!events_on(p, device) || cuda.cudaEventRecord(p->start, stream) != cudaSuccess) {
		fr_gpu_cancel(p);
		return NULL;
	}
	return p;
}

void fr_gpu_cancel(struct fr_gpu_op *g)
{
	if (g)
		__atomic_store_n(&g->state, SLOT_FREE, __ATOMIC_RELEASE);
}

void fr_gpu_track(struct fr_gpu_op *g, const struct fr_ticket *t, cudaStream_t stream)
{
	if (!g || cuda.cudaEventRecord(g->end, stream) != cudaSuccess) {
		fr_gpu_cancel(g);
		fr_op_complete(t);
		return;
	}
	g->started = false;
	g->record = t->record;
	g->comm = t->comm->index;
	g->seq = t->seq;
	g->collective = t->collective;
	__atomic_store_n(&g->state, SLOT_PENDING, __ATOMIC_RELEASE);
}

void fr_gpu_poll(void)
{
	if (__atomic_load_n(&usable, __ATOMIC_ACQUIRE) != 1)
		return;
	for (unsigned i = 0; i < PENDING_SLOTS; i++) {
		struct fr_gpu_op *p = &pending[i];

		if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != SLOT_PENDING)
			continue;
		if (!p->started) {
			if (cuda.cudaEventQuery(p->start) == cudaErrorNotReady)
				continue;
			p->started = true;
			fr_ring_mark_started(&fr_agent.ring, p->record, fr_ticks());
		}
		if (cuda.cudaEventQuery(p->end) == cudaErrorNotReady)
			continue;
		/* Reached (or failed: an error will not turn into progress). */
		fr_op_complete_record(p->record, p->comm, p->seq, p->collective);
		__atomic_store_n(&p->state, SLOT_FREE, __ATOMIC_RELEASE);
	}
}
