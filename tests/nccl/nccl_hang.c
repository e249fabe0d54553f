/*
 * An NCCL program with planted faults, for the end-to-end tests, run
 * against the CPU stand-ins of this directory. A script starts N copies
 * (no mpirun): rank 0 writes the communicator's unique id to --id-file,
 * the others read it from there.
 *
 * Every step sleeps a little, then allreduces one float on the world
 * communicator and waits for its stream, as a training step that reads
 * its loss does. At step --at, rank --culprit misbehaves as --scenario says:
 *
 *   none      no fault; results are checked (exit 1 when wrong)
 *   skip      never calls the step's allreduce (stuck in a computation)
 *   stuck     nothing: run with FAKE_NCCL_STUCK=R:K, the culprit's
 *             allreduce is queued but never completes
 *   group     every step first swaps a float with its pair partner
 *             (rank ^ 1) in a group of ncclSend/ncclRecv; the culprit
 *             skips its group
 *   split     the world splits in halves; each step allreduces on the half,
 *             then on the world; the culprit (in the first half) never
 *             calls its half's allreduce
 *   mismatch  the culprit's allreduce has count 2 where the others have 1
 *
 * With --iters N the job ends after N steps (never once a fault is planted).
 *
 * Built twice (tests/nccl/build.sh): nccl_hang links against NCCL;
 * nccl_hang_dlopen (NCCL_BY_HANDLE) does not, and instead dlopens the
 * libnccl.so.2 next to it with RTLD_LOCAL and looks every function up by
 * handle, as some frameworks do. The steps and faults are the same.
 */
#include "cuda_abi.h"
#include "nccl_abi.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../planted.h"

#ifdef NCCL_BY_HANDLE
/* The functions, as dlsym(handle, ...) gave them; the names below make the
 * rest of the program call through them. */
static struct {
#define NCCL_PTR(name, ret, params, args) ret(*name) params;
	FR_NCCL_API(NCCL_PTR)
#undef NCCL_PTR
	const char *(*GetErrorString)(ncclResult_t result);
	const char *(*GetLastError)(ncclComm_t comm);
} nccl;

#define ncclGetUniqueId nccl.GetUniqueId
#define ncclCommInitRank nccl.CommInitRank
#define ncclCommSplit nccl.CommSplit
#define ncclCommDestroy nccl.CommDestroy
#define ncclAllReduce nccl.AllReduce
#define ncclSend nccl.Send
#define ncclRecv nccl.Recv
#define ncclGroupStart nccl.GroupStart
#define ncclGroupEnd nccl.GroupEnd
#define ncclGetErrorString nccl.GetErrorString
#define ncclGetLastError nccl.GetLastError
#define HOW " (NCCL looked up by handle)"
#else
#define HOW ""
#endif

cudaError_t cudaSetDevice(int device);
cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
const char *cudaGetErrorString(cudaError_t error);

static int rank, nranks;
static cudaStream_t stream;

static void check_nccl(ncclResult_t res, const char *what)
{
	if (res == ncclSuccess)
		return;
	fprintf(stderr, "rank %d: %s: %s (%s)\n", rank, what, ncclGetErrorString(res),
		ncclGetLastError(NULL));
	exit(1);
}

static void check_cuda(cudaError_t err, const char *what)
{
	if (err == cudaSuccess)
		return;
	fprintf(stderr, "rank %d: %s: %s\n", rank, what, cudaGetErrorString(err));
	exit(1);
}

static void expect(float got, float want, const char *what, int step)
{
	if (got == want)
		return;
	fprintf(stderr, "rank %d: step %d: %s gave %g, expected %g\n", rank, step, what,
		(double)got, (double)want);
	exit(1);
}

#ifdef NCCL_BY_HANDLE
/* A lookup that succeeds leaves no error behind, as dlsym promises. */
static void *by_handle(void *h, const char *name)
{
	void *f;
	const char *err;

	dlerror();
	f = dlsym(h, name);
	err = dlerror();
	if (!f || err) {
		fprintf(stderr, "rank %d: dlsym(%s): %s\n", rank, name, err ? err : "NULL, no error");
		exit(1);
	}
	return f;
}

/* The stand-in NCCL beside this program, by absolute path (the search path
 * could find a real libnccl.so.2 first). */
static void load_nccl(void)
{
	char path[4096];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - sizeof("libnccl.so.2"));
	char *slash = NULL;
	void *h;

	if (n > 0) {
		path[n] = '\0';
		slash = strrchr(path, '/');
	}
	if (!slash) {
		fprintf(stderr, "rank %d: cannot find where this program is\n", rank);
		exit(1);
	}
	strcpy(slash + 1, "libnccl.so.2");
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "rank %d: %s\n", rank, dlerror());
		exit(1);
	}
#define NCCL_SYM(name, ret, params, args) *(void **)&nccl.name = by_handle(h, "nccl" #name);
	FR_NCCL_API(NCCL_SYM)
#undef NCCL_SYM
	*(void **)&nccl.GetErrorString = by_handle(h, "ncclGetErrorString");
	*(void **)&nccl.GetLastError = by_handle(h, "ncclGetLastError");
}
#endif

/* Rank 0 publishes the id with a rename, so a reader never sees half of it. */
static void write_id(const char *path, const ncclUniqueId *id)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	f = fopen(tmp, "wb");
	if (!f || fwrite(id, sizeof(*id), 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0) {
		fprintf(stderr, "rank %d: writing %s: %s\n", rank, path, strerror(errno));
		exit(1);
	}
}

static void read_id(const char *path, ncclUniqueId *id)
{
	for (int waited = 0; waited < 30000; waited += 10) {
		FILE *f = fopen(path, "rb");

		if (f) {
			size_t n = fread(id, sizeof(*id), 1, f);

			fclose(f);
			if (n == 1)
				return;
		}
		sleep_ms(10);
	}
	fprintf(stderr, "rank %d: no unique id in %s after 30 s\n", rank, path);
	exit(1);
}

/* Pairs (0,1), (2,3), ... swap one float; the sends and receives of a
 * group may come in any order. */
static float __attribute__((noinline)) exchange(ncclComm_t comm, float mine)
{
	int partner = rank ^ 1;
	float got = -1;

	check_nccl(ncclGroupStart(), "ncclGroupStart");
	check_nccl(ncclSend(&mine, 1, ncclFloat32, partner, comm, stream), "ncclSend");
	check_nccl(ncclRecv(&got, 1, ncclFloat32, partner, comm, stream), "ncclRecv");
	check_nccl(ncclGroupEnd(), "ncclGroupEnd");
	check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
	return got;
}

/* Allreduces `in` (count 2 repeats it) and waits for the result. */
static float __attribute__((noinline)) train_step(ncclComm_t comm, float in, size_t count)
{
	float buf[2] = { in, in };

	check_nccl(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, stream),
		   "ncclAllReduce");
	check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
	return buf[0];
}

/* The split scenario's step: both allreduces queued, one wait for both. */
static void __attribute__((noinline)) split_step(ncclComm_t half, ncclComm_t world, bool stall,
						  float in, float *half_out, float *world_out)
{
	if (stall)
		stuck_in_compute();
	*half_out = *world_out = in;
	check_nccl(ncclAllReduce(half_out, half_out, 1, ncclFloat32, ncclSum, half, stream),
		   "ncclAllReduce (half)");
	check_nccl(ncclAllReduce(world_out, world_out, 1, ncclFloat32, ncclSum, world, stream),
		   "ncclAllReduce (world)");
	check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

/* Sum of (r + v) over ranks lo .. hi-1. */
static float sum_over(int lo, int hi, int v)
{
	long s = 0;

	for (int r = lo; r < hi; r++)
		s += r + v;
	return (float)s;
}

int main(int argc, char **argv)
{
	const char *scenario = "none", *id_file = NULL;
	int culprit = 1, at = 5, iters = -1, step_ms = 5, opt, i;
	ncclComm_t world = NULL, half = NULL;
	ncclUniqueId id;
	static const struct option opts[] = {
		{ "rank", required_argument, NULL, 'r' },
		{ "nranks", required_argument, NULL, 'N' },
		{ "id-file", required_argument, NULL, 'f' },
		{ "scenario", required_argument, NULL, 's' },
		{ "culprit", required_argument, NULL, 'c' },
		{ "at", required_argument, NULL, 'a' },
		{ "iters", required_argument, NULL, 'n' },
		{ "step-ms", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};

	rank = -1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'r': rank = atoi(optarg); break;
		case 'N': nranks = atoi(optarg); break;
		case 'f': id_file = optarg; break;
		case 's': scenario = optarg; break;
		case 'c': culprit = atoi(optarg); break;
		case 'a': at = atoi(optarg); break;
		case 'n': iters = atoi(optarg); break;
		case 't': step_ms = atoi(optarg); break;
		default: goto usage;
		}
	}
	if (rank < 0 || nranks < 1 || rank >= nranks || !id_file)
		goto usage;
	if (strcmp(scenario, "none") && strcmp(scenario, "skip") && strcmp(scenario, "stuck") &&
	    strcmp(scenario, "group") && strcmp(scenario, "split") && strcmp(scenario, "mismatch"))
		goto usage;
	fprintf(stderr, "nccl_hang: rank %d of %d (pid %d): scenario %s, culprit %d at step %d%s\n",
		rank, nranks, (int)getpid(), scenario, culprit, at, HOW);

#ifdef NCCL_BY_HANDLE
	load_nccl();
#endif
	check_cuda(cudaSetDevice(0), "cudaSetDevice");
	check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
	if (rank == 0) {
		check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
		write_id(id_file, &id);
	} else {
		read_id(id_file, &id);
	}
	check_nccl(ncclCommInitRank(&world, nranks, id, rank), "ncclCommInitRank");
	if (strcmp(scenario, "split") == 0)
		check_nccl(ncclCommSplit(world, rank < nranks / 2 ? 0 : 1, rank, &half, NULL),
			   "ncclCommSplit");

	for (i = 1; iters < 0 || i <= iters; i++) {
		bool mine = rank == culprit && i == at;
		int v = i % 1000;

		sleep_ms(step_ms);
		if (mine && strcmp(scenario, "skip") == 0)
			stuck_in_compute();
		if (strcmp(scenario, "group") == 0 && (rank ^ 1) < nranks && !mine)
			expect(exchange(world, (float)(rank * 1000 + v)),
			       (float)((rank ^ 1) * 1000 + v), "ncclSend/ncclRecv", i);
		if (half) {
			bool low = rank < nranks / 2;
			float h, w;

			split_step(half, world, mine, (float)(rank + v), &h, &w);
			expect(h, low ? sum_over(0, nranks / 2, v) : sum_over(nranks / 2, nranks, v),
			       "ncclAllReduce (half)", i);
			expect(w, sum_over(0, nranks, v), "ncclAllReduce (world)", i);
		} else {
			size_t count = mine && strcmp(scenario, "mismatch") == 0 ? 2 : 1;

			expect(train_step(world, (float)(rank + v), count), sum_over(0, nranks, v),
			       "ncclAllReduce", i);
		}
	}

	if (half)
		check_nccl(ncclCommDestroy(half), "ncclCommDestroy (half)");
	check_nccl(ncclCommDestroy(world), "ncclCommDestroy");
	check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
	printf("rank %d done after %d iterations\n", rank, iters);
	return 0;

usage:
	fprintf(stderr,
		"usage: %s --rank R --nranks N --id-file PATH\n"
		"       [--scenario none|skip|stuck|group|split|mismatch] [--culprit R] [--at K]\n"
		"       [--iters N] [--step-ms MS]\n",
		argv[0]);
	return 2;
}
