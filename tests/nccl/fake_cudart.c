/*
 * A CPU stand-in for the CUDA runtime (libcudart.so.13), for the NCCL
 * end-to-end tests on machines without a GPU. It implements only what NCCL
 * programs and the flightrec agent call: one device, streams, events, host
 * memory posing as device memory.
 *
 * A stream is a worker thread with a FIFO of work items. The stand-in NCCL
 * (fake_nccl.c) queues its collectives there through fakecuda_enqueue(), so
 * a host call returns as soon as the work is queued and completes later, as
 * a kernel would. An event records the point in its stream where it was
 * recorded; cudaEventQuery says cudaSuccess once the worker has passed it.
 *
 * Like CUDA's own helper threads, stream workers block every signal: a tool
 * that asks each thread of a process for its stack must skip them.
 */
#define _GNU_SOURCE
#include "cuda_abi.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FAKE_API __attribute__((visibility("default")))

/* Runtime values beyond cuda_abi.h, from CUDA's stable ABI. */
#define cudaErrorInvalidValue 1
#define cudaErrorMemoryAllocation 2
#define cudaErrorInvalidDevice 101
#define cudaErrorInvalidResourceHandle 400
#define cudaStreamNonBlocking 0x01u

#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)

/* The runtime version this stands in for (13.0). */
#define FAKE_CUDART_VERSION 13000

/* The internal interface fake_nccl.c uses; declared there as well. */
FAKE_API cudaError_t fakecuda_enqueue(cudaStream_t stream, void (*fn)(void *), void *arg);

FAKE_API cudaError_t cudaGetDeviceCount(int *count);
FAKE_API cudaError_t cudaSetDevice(int device);
FAKE_API cudaError_t cudaGetDevice(int *device);
FAKE_API cudaError_t cudaDeviceSynchronize(void);
FAKE_API cudaError_t cudaDriverGetVersion(int *version);
FAKE_API cudaError_t cudaRuntimeGetVersion(int *version);
FAKE_API cudaError_t cudaStreamCreate(cudaStream_t *stream);
FAKE_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
FAKE_API cudaError_t cudaStreamDestroy(cudaStream_t stream);
FAKE_API cudaError_t cudaStreamSynchronize(cudaStream_t stream);
FAKE_API cudaError_t cudaStreamQuery(cudaStream_t stream);
FAKE_API cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags);
FAKE_API cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *status);
FAKE_API cudaError_t cudaEventCreate(cudaEvent_t *event);
FAKE_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags);
FAKE_API cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
FAKE_API cudaError_t cudaEventQuery(cudaEvent_t event);
FAKE_API cudaError_t cudaEventSynchronize(cudaEvent_t event);
FAKE_API cudaError_t cudaEventDestroy(cudaEvent_t event);
FAKE_API cudaError_t cudaMalloc(void **ptr, size_t size);
FAKE_API cudaError_t cudaFree(void *ptr);
FAKE_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, int kind);
FAKE_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, int kind,
				     cudaStream_t stream);
FAKE_API cudaError_t cudaGetLastError(void);
FAKE_API cudaError_t cudaPeekAtLastError(void);
FAKE_API const char *cudaGetErrorName(cudaError_t error);
FAKE_API const char *cudaGetErrorString(cudaError_t error);

struct work {
	struct work *next;
	void (*fn)(void *);
	void *arg;
};

struct CUstream_st {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* work queued, work done, or the stream destroyed */
	struct work *head, *tail;
	uint64_t queued;     /* items ever queued */
	uint64_t done;       /* items the worker has finished */
	bool destroyed;      /* the worker ends once drained */
	int refs;            /* the worker's, the stream list's, and waiters' */
	unsigned flags;
	unsigned number;     /* names the worker thread */
	struct CUstream_st *next_stream;
};

/*
 * Generations make an event reusable: every record takes the next one, and
 * the worker publishes the highest it has passed. A never-recorded event is
 * complete, as in CUDA.
 */
struct CUevent_st {
	unsigned flags;
	int refs;          /* the handle's own, plus one per pending marker */
	uint64_t recorded; /* generation of the latest record */
	uint64_t reached;  /* highest generation a worker has passed */
};

struct marker {
	struct CUevent_st *event;
	uint64_t generation;
};

struct memcpy_work {
	void *dst;
	const void *src;
	size_t count;
};

/* Every live stream, for device-wide synchronisation. */
static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;
static struct CUstream_st *streams;
static unsigned stream_count;

static pthread_once_t legacy_once = PTHREAD_ONCE_INIT;
static struct CUstream_st *legacy;

static __thread cudaError_t last_error;
static __thread int current_device;

static cudaError_t fail(cudaError_t err)
{
	last_error = err;
	return err;
}

/* Waits with short sleeps that lengthen once nothing has moved for a while,
 * so that a wait on work that never ends burns little CPU. */
static void backoff(unsigned *idle)
{
	struct timespec ts = { 0, *idle < 400 ? 50000 : 1000000 };

	(*idle)++;
	nanosleep(&ts, NULL);
}

static void stream_put(struct CUstream_st *s)
{
	if (__atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static void *stream_worker(void *arg)
{
	struct CUstream_st *s = arg;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct work *w;

		while (!s->head && !s->destroyed)
			pthread_cond_wait(&s->cond, &s->lock);
		if (!s->head)
			break;
		w = s->head;
		s->head = w->next;
		if (!s->head)
			s->tail = NULL;
		pthread_mutex_unlock(&s->lock);
		w->fn(w->arg);
		free(w);
		pthread_mutex_lock(&s->lock);
		s->done++;
		pthread_cond_broadcast(&s->cond);
	}
	pthread_mutex_unlock(&s->lock);
	stream_put(s);
	return NULL;
}

/* Creates a stream and its worker; NULL when out of memory or threads. */
static struct CUstream_st *stream_new(unsigned flags)
{
	struct CUstream_st *s = calloc(1, sizeof(*s));
	sigset_t all, saved;
	pthread_attr_t attr;
	pthread_t thread;
	char name[16];
	int err;

	if (!s)
		return NULL;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->flags = flags;
	s->refs = 2;

	/* The worker inherits a full signal mask, as CUDA's threads have. */
	sigfillset(&all);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	err = pthread_create(&thread, &attr, stream_worker, s);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	pthread_attr_destroy(&attr);
	if (err) {
		pthread_cond_destroy(&s->cond);
		pthread_mutex_destroy(&s->lock);
		free(s);
		return NULL;
	}

	pthread_mutex_lock(&streams_lock);
	s->number = stream_count++;
	s->next_stream = streams;
	streams = s;
	pthread_mutex_unlock(&streams_lock);
	snprintf(name, sizeof(name), "fakecuda-s%u", s->number);
	pthread_setname_np(thread, name);
	return s;
}

static void legacy_create(void)
{
	legacy = stream_new(0);
}

/* The stream a handle names: NULL and the special handles mean the legacy
 * default stream, created on first use. NULL when it cannot be created. */
static struct CUstream_st *resolve(cudaStream_t stream)
{
	if (stream && stream != cudaStreamLegacy && stream != cudaStreamPerThread)
		return stream;
	pthread_once(&legacy_once, legacy_create);
	return legacy;
}

/* Queues fn(arg) at the end of `stream`: the worker runs it after all work
 * queued before. Takes no ownership of arg. */
cudaError_t fakecuda_enqueue(cudaStream_t stream, void (*fn)(void *), void *arg)
{
	struct CUstream_st *s = resolve(stream);
	struct work *w;

	if (!s)
		return fail(cudaErrorMemoryAllocation);
	w = malloc(sizeof(*w));
	if (!w)
		return fail(cudaErrorMemoryAllocation);
	w->next = NULL;
	w->fn = fn;
	w->arg = arg;
	pthread_mutex_lock(&s->lock);
	if (s->tail)
		s->tail->next = w;
	else
		s->head = w;
	s->tail = w;
	s->queued++;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return cudaSuccess;
}

static void stream_wait_idle(struct CUstream_st *s)
{
	pthread_mutex_lock(&s->lock);
	uint64_t target = s->queued;

	while (s->done < target)
		pthread_cond_wait(&s->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
}

/*
 * Waits for the work queued so far on every stream; with blocking_only, on
 * those that synchronise with the legacy default stream (created without
 * cudaStreamNonBlocking). The list lock is not held while waiting: a stuck
 * stream must not stop other threads from creating streams.
 */
static void sync_streams(bool blocking_only)
{
	struct CUstream_st **all;
	size_t n = 0, cap = 0;

	pthread_mutex_lock(&streams_lock);
	for (struct CUstream_st *s = streams; s; s = s->next_stream)
		cap++;
	all = calloc(cap ? cap : 1, sizeof(*all));
	for (struct CUstream_st *s = streams; all && s; s = s->next_stream) {
		if (blocking_only && (s->flags & cudaStreamNonBlocking))
			continue;
		__atomic_add_fetch(&s->refs, 1, __ATOMIC_ACQ_REL);
		all[n++] = s;
	}
	pthread_mutex_unlock(&streams_lock);
	for (size_t i = 0; i < n; i++) {
		stream_wait_idle(all[i]);
		stream_put(all[i]);
	}
	free(all);
}

cudaError_t cudaGetDeviceCount(int *count)
{
	if (!count)
		return fail(cudaErrorInvalidValue);
	*count = 1;
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
	if (device != 0)
		return fail(cudaErrorInvalidDevice);
	current_device = device;
	return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
	if (!device)
		return fail(cudaErrorInvalidValue);
	*device = current_device;
	return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
	sync_streams(false);
	return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version)
{
	if (!version)
		return fail(cudaErrorInvalidValue);
	*version = FAKE_CUDART_VERSION;
	return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version)
{
	if (!version)
		return fail(cudaErrorInvalidValue);
	*version = FAKE_CUDART_VERSION;
	return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags)
{
	struct CUstream_st *s;

	if (!stream)
		return fail(cudaErrorInvalidValue);
	s = stream_new(flags);
	if (!s)
		return fail(cudaErrorMemoryAllocation);
	*stream = s;
	return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream)
{
	return cudaStreamCreateWithFlags(stream, 0);
}

/* As in CUDA, work still queued runs to its end before the worker exits.
 * The legacy stream cannot be destroyed. */
cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	struct CUstream_st **p;
	bool found = false;

	if (!stream || stream == cudaStreamLegacy || stream == cudaStreamPerThread)
		return fail(cudaErrorInvalidResourceHandle);
	pthread_mutex_lock(&streams_lock);
	for (p = &streams; *p; p = &(*p)->next_stream) {
		if (*p == stream) {
			*p = stream->next_stream;
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&streams_lock);
	if (!found)
		return fail(cudaErrorInvalidResourceHandle);
	pthread_mutex_lock(&stream->lock);
	stream->destroyed = true;
	pthread_cond_broadcast(&stream->cond);
	pthread_mutex_unlock(&stream->lock);
	stream_put(stream); /* the list's reference */
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	struct CUstream_st *s = resolve(stream);

	if (!s)
		return fail(cudaErrorMemoryAllocation);
	stream_wait_idle(s);
	return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
	struct CUstream_st *s = resolve(stream);
	bool idle;

	if (!s)
		return fail(cudaErrorMemoryAllocation);
	pthread_mutex_lock(&s->lock);
	idle = s->done == s->queued;
	pthread_mutex_unlock(&s->lock);
	return idle ? cudaSuccess : cudaErrorNotReady;
}

/* Graph capture is not modelled: no stream is ever capturing. */
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *status)
{
	(void)stream;
	if (!status)
		return fail(cudaErrorInvalidValue);
	*status = cudaStreamCaptureStatusNone;
	return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags)
{
	struct CUevent_st *e;

	if (!event)
		return fail(cudaErrorInvalidValue);
	e = calloc(1, sizeof(*e));
	if (!e)
		return fail(cudaErrorMemoryAllocation);
	e->flags = flags;
	e->refs = 1;
	*event = e;
	return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
	return cudaEventCreateWithFlags(event, 0);
}

static void event_put(struct CUevent_st *e)
{
	if (__atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(e);
}

static void event_reach(struct CUevent_st *e, uint64_t generation)
{
	uint64_t seen = __atomic_load_n(&e->reached, __ATOMIC_ACQUIRE);

	/* Records on different streams can finish out of order. */
	while (seen < generation &&
	       !__atomic_compare_exchange_n(&e->reached, &seen, generation, false,
					    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		;
}

static void run_marker(void *arg)
{
	struct marker *m = arg;

	event_reach(m->event, m->generation);
	event_put(m->event);
	free(m);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	struct marker *m;
	cudaError_t err;

	if (!event)
		return fail(cudaErrorInvalidResourceHandle);
	m = malloc(sizeof(*m));
	if (!m)
		return fail(cudaErrorMemoryAllocation);
	m->event = event;
	m->generation = __atomic_add_fetch(&event->recorded, 1, __ATOMIC_ACQ_REL);
	__atomic_add_fetch(&event->refs, 1, __ATOMIC_ACQ_REL);
	err = fakecuda_enqueue(stream, run_marker, m);
	if (err != cudaSuccess) {
		/* Nothing will pass this record: count it as passed. */
		event_reach(event, m->generation);
		event_put(event);
		free(m);
	}
	return err;
}

static bool event_done(struct CUevent_st *e)
{
	return __atomic_load_n(&e->reached, __ATOMIC_ACQUIRE) >=
	       __atomic_load_n(&e->recorded, __ATOMIC_ACQUIRE);
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
	if (!event)
		return fail(cudaErrorInvalidResourceHandle);
	return event_done(event) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	unsigned idle = 0;
	uint64_t target;

	if (!event)
		return fail(cudaErrorInvalidResourceHandle);
	target = __atomic_load_n(&event->recorded, __ATOMIC_ACQUIRE);
	while (__atomic_load_n(&event->reached, __ATOMIC_ACQUIRE) < target)
		backoff(&idle);
	return cudaSuccess;
}

/* The event's memory lives on until pending records have been passed. */
cudaError_t cudaEventDestroy(cudaEvent_t event)
{
	if (!event)
		return fail(cudaErrorInvalidResourceHandle);
	event_put(event);
	return cudaSuccess;
}

static void run_event_wait(void *arg)
{
	struct marker *m = arg;
	unsigned idle = 0;

	while (__atomic_load_n(&m->event->reached, __ATOMIC_ACQUIRE) < m->generation)
		backoff(&idle);
	event_put(m->event);
	free(m);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags)
{
	struct marker *m;
	cudaError_t err;

	(void)flags;
	if (!event)
		return fail(cudaErrorInvalidResourceHandle);
	m = malloc(sizeof(*m));
	if (!m)
		return fail(cudaErrorMemoryAllocation);
	m->event = event;
	m->generation = __atomic_load_n(&event->recorded, __ATOMIC_ACQUIRE);
	__atomic_add_fetch(&event->refs, 1, __ATOMIC_ACQ_REL);
	err = fakecuda_enqueue(stream, run_event_wait, m);
	if (err != cudaSuccess) {
		event_put(event);
		free(m);
	}
	return err;
}

/* Device memory is host memory, aligned as cudaMalloc's is. */
cudaError_t cudaMalloc(void **ptr, size_t size)
{
	if (!ptr)
		return fail(cudaErrorInvalidValue);
	if (posix_memalign(ptr, 256, size ? size : 1) != 0) {
		*ptr = NULL;
		return fail(cudaErrorMemoryAllocation);
	}
	return cudaSuccess;
}

cudaError_t cudaFree(void *ptr)
{
	free(ptr);
	return cudaSuccess;
}

/* A synchronous copy runs on the legacy default stream, so it waits for the
 * work of every stream that synchronises with it. */
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, int kind)
{
	(void)kind;
	if (count && (!dst || !src))
		return fail(cudaErrorInvalidValue);
	sync_streams(true);
	if (count)
		memmove(dst, src, count);
	return cudaSuccess;
}

static void run_memcpy(void *arg)
{
	struct memcpy_work *m = arg;

	if (m->count)
		memmove(m->dst, m->src, m->count);
	free(m);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, int kind,
			    cudaStream_t stream)
{
	struct memcpy_work *m;
	cudaError_t err;

	(void)kind;
	if (count && (!dst || !src))
		return fail(cudaErrorInvalidValue);
	m = malloc(sizeof(*m));
	if (!m)
		return fail(cudaErrorMemoryAllocation);
	*m = (struct memcpy_work){ dst, src, count };
	err = fakecuda_enqueue(stream, run_memcpy, m);
	if (err != cudaSuccess)
		free(m);
	return err;
}

cudaError_t cudaGetLastError(void)
{
	cudaError_t err = last_error;

	last_error = cudaSuccess;
	return err;
}

cudaError_t cudaPeekAtLastError(void)
{
	return last_error;
}

static const struct {
	cudaError_t code;
	const char *name;
	const char *text;
} errors[] = {
	{ cudaSuccess, "cudaSuccess", "no error" },
	{ cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument" },
	{ cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory" },
	{ cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
	  "CUDA driver version is insufficient for CUDA runtime version" },
	{ cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected" },
	{ cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal" },
	{ cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle",
	  "invalid resource handle" },
	{ cudaErrorNotReady, "cudaErrorNotReady", "device not ready" },
};

const char *cudaGetErrorName(cudaError_t error)
{
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
		if (errors[i].code == error)
			return errors[i].name;
	return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t error)
{
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
		if (errors[i].code == error)
			return errors[i].text;
	return "unrecognized error code";
}
