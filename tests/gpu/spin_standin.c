/*
 * The spin on the CPU stand-in: a work item on the stand-in stream's worker
 * thread (fakecuda_enqueue, the stand-in NCCL's own way onto a stream),
 * which holds everything queued after it exactly as a kernel holds a GPU
 * stream.
 */
#include <stdio.h>
#include <time.h>

#include "cuda_abi.h"
#include "spin.h"

cudaError_t fakecuda_enqueue(cudaStream_t stream, void (*fn)(void *), void *arg);

static struct {
	int started;
	int release;
	int outcome;
	double limit_s;
} flags;

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void spin_work(void *arg)
{
	struct timespec tick = { 0, 1000000 };
	double t0 = mono_s();

	(void)arg;
	__atomic_store_n(&flags.started, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&flags.release, __ATOMIC_ACQUIRE)) {
		if (mono_s() - t0 >= flags.limit_s) {
			__atomic_store_n(&flags.outcome, SPIN_TIME_LIMIT, __ATOMIC_RELEASE);
			return;
		}
		nanosleep(&tick, NULL);
	}
	__atomic_store_n(&flags.outcome, SPIN_RELEASED, __ATOMIC_RELEASE);
}

int spin_init(void)
{
	return 0;
}

int spin_launch(struct CUstream_st *stream, double limit_s)
{
	flags.started = 0;
	flags.release = 0;
	flags.outcome = SPIN_NOT_ENDED;
	flags.limit_s = limit_s;
	if (fakecuda_enqueue(stream, spin_work, NULL) != cudaSuccess) {
		fprintf(stderr, "gpu_check: spin not queued on the stand-in stream\n");
		return -1;
	}
	return 0;
}

bool spin_started(void)
{
	return __atomic_load_n(&flags.started, __ATOMIC_ACQUIRE) != 0;
}

void spin_release(void)
{
	__atomic_store_n(&flags.release, 1, __ATOMIC_RELEASE);
}

enum spin_outcome spin_outcome(void)
{
	return (enum spin_outcome)__atomic_load_n(&flags.outcome, __ATOMIC_ACQUIRE);
}

void spin_device_name(char *buf, size_t len)
{
	snprintf(buf, len, "the CPU stand-in");
}
