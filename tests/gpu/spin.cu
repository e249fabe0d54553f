/*
 * The spin on a real GPU: one thread of one block loops until the host
 * sets a flag in mapped host memory, or until its time limit. The limit is
 * taken from %globaltimer (nanoseconds) rather than clock64(), whose cycles
 * tick at an SM clock that changes with boost and power state.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "spin.h"

struct spin_flags {
	unsigned int started;
	unsigned int release;
	unsigned int outcome;
};

/* In pinned host memory, mapped into the device's address space: the host
 * reads and writes it while the kernel runs, without a copy on the stream
 * (which would queue behind the kernel). */
static volatile struct spin_flags *host_flags;
static struct spin_flags *dev_flags;

static __device__ unsigned long long device_now_ns(void)
{
	unsigned long long t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

static __global__ void spin_kernel(volatile struct spin_flags *f, unsigned long long limit_ns)
{
	unsigned long long t0 = device_now_ns();

	f->started = 1;
	__threadfence_system();
	while (!f->release) {
		if (device_now_ns() - t0 >= limit_ns) {
			f->outcome = SPIN_TIME_LIMIT;
			__threadfence_system();
			return;
		}
		/* Polls host memory a hundred times per millisecond, not
		 * flat out over the bus. */
		__nanosleep(10000);
	}
	f->outcome = SPIN_RELEASED;
	__threadfence_system();
}

int spin_init(void)
{
	void *h = NULL, *d = NULL;
	cudaError_t rc;

	rc = cudaHostAlloc(&h, sizeof(struct spin_flags), cudaHostAllocMapped);
	if (rc == cudaSuccess)
		rc = cudaHostGetDevicePointer(&d, h, 0);
	if (rc != cudaSuccess) {
		fprintf(stderr, "gpu_check: mapped host memory for the spin flag: %s\n",
			cudaGetErrorString(rc));
		return -1;
	}
	memset(h, 0, sizeof(struct spin_flags));
	host_flags = (volatile struct spin_flags *)h;
	dev_flags = (struct spin_flags *)d;
	return 0;
}

int spin_launch(struct CUstream_st *stream, double limit_s)
{
	cudaError_t rc;

	host_flags->started = 0;
	host_flags->release = 0;
	host_flags->outcome = SPIN_NOT_ENDED;
	spin_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(dev_flags,
							(unsigned long long)(limit_s * 1e9));
	rc = cudaGetLastError();
	if (rc != cudaSuccess) {
		fprintf(stderr, "gpu_check: spin kernel not launched: %s\n", cudaGetErrorString(rc));
		return -1;
	}
	return 0;
}

bool spin_started(void)
{
	return host_flags->started != 0;
}

void spin_release(void)
{
	host_flags->release = 1;
}

enum spin_outcome spin_outcome(void)
{
	return (enum spin_outcome)host_flags->outcome;
}

void spin_device_name(char *buf, size_t len)
{
	struct cudaDeviceProp p;
	int dev = 0;

	if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
		snprintf(buf, len, "an unnamed GPU");
		return;
	}
	snprintf(buf, len, "%s", p.name);
}
