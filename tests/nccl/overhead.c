/*
 * Agent cost per hooked NCCL call: a one-rank communicator over the CPU
 * stand-in, ncclAllReduce of one float in a loop, the stream synchronised
 * every 256 calls (the stand-in's queue must not grow without bound).
 * Prints nanoseconds per call, best of several rounds; bench/run runs it
 * with and without the agent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cuda_abi.h"
#include "nccl_abi.h"

cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 200000;
	ncclUniqueId id;
	ncclComm_t comm;
	cudaStream_t stream;
	float in = 1, out = 0;
	double best = 1e30;

	if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess ||
	    cudaStreamCreate(&stream) != cudaSuccess) {
		fprintf(stderr, "overhead: cannot set up NCCL\n");
		return 1;
	}
	for (int round = 0; round < 5; round++) {
		double t0 = now_s();

		for (long i = 0; i < calls; i++) {
			ncclAllReduce(&in, &out, 1, ncclFloat32, ncclSum, comm, stream);
			if (i % 256 == 255)
				cudaStreamSynchronize(stream);
		}
		cudaStreamSynchronize(stream);
		double ns = (now_s() - t0) * 1e9 / calls;

		if (ns < best)
			best = ns;
	}
	printf("%.1f\n", best);
	ncclCommDestroy(comm);
	return out == 1 ? 0 : 1;
}
