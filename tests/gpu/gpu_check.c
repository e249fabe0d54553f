/*
 * The program tests/gpu/run drives: a one-rank NCCL communicator on the
 * current device, with the agent preloaded (or not, to measure its cost).
 *
 *   gpu_check probe                   is there a device? (exit 77 if not)
 *   gpu_check events                  collectives complete when the device
 *                                     reaches them, not when the call returns
 *   gpu_check stuck                   a collective queued behind a spin longer
 *                                     than FLIGHTREC_TIMEOUT is dumped by the
 *                                     agent's local watchdog
 *   gpu_check overhead CALLS ROUNDS   nanoseconds per ncclAllReduce, per round
 *
 * It links against a libnccl.so.2 and a libcudart.so.13, real or the CPU
 * stand-ins (tests/nccl), through the agent's own ABI headers, so it builds
 * without nccl.h; the spin comes from spin.cu or spin_standin.c.
 *
 * Facts go to stdout as key=value lines, read by tests/gpu/verify.py, which
 * judges them against the agent's dumps; errors go to stderr. Exit status:
 * 0 when the steps ran, 1 when one failed, 77 from probe without a device.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_abi.h"
#include "nccl_abi.h"
#include "spin.h"

/* Runtime calls beyond the agent's, the same in the real runtime and the
 * stand-in. */
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaMalloc(void **ptr, size_t size);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, int kind);
const char *cudaGetErrorString(cudaError_t error);

#define MEMCPY_HOST_TO_DEVICE 1
#define MEMCPY_DEVICE_TO_HOST 2

/* Collectives before the one under test: enough for a run of completions,
 * few enough to stay far below the agent's 16384 pending events. */
#define EVENTS_WARM 20
#define STUCK_WARM 3
/* How long the collective under test waits behind the spin in `events`:
 * long against the agent's 100 ms poll and the clock conversion error. */
#define HOLD_S 1.0
/* The agent's link thread polls events every 100 ms: a few polls. */
#define SETTLE_S 0.5
/* Every wait is bounded; the spins are bounded too (spin.h). */
#define START_WAIT_S 20.0
#define DUMP_WAIT_S 15.0
#define EVENTS_SPIN_LIMIT_S 20.0
#define STUCK_SPIN_MARGIN_S 30.0
/* Between overhead rounds the link thread frees the events of the last. */
#define ROUND_PAUSE_S 0.15

#define MID_REASON "gpu-check-while-the-device-spins"
#define FINAL_REASON "gpu-check-after-synchronising"

struct setup {
	ncclComm_t comm;
	cudaStream_t stream;
	float *in;  /* device: one float */
	float *out; /* device: one float */
	int (*dump_now)(const char *reason); /* the agent's, when preloaded */
	const char *dump_dir;
	const char *job;
};

static uint64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
	struct timespec ts;

	if (s <= 0)
		return;
	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	nanosleep(&ts, NULL);
}

static int cuda_check(cudaError_t rc, const char *what)
{
	if (rc == cudaSuccess)
		return 0;
	fprintf(stderr, "gpu_check: %s: %s (CUDA error %d)\n", what, cudaGetErrorString(rc), rc);
	return -1;
}

static int nccl_check(ncclResult_t rc, const char *what)
{
	if (rc == ncclSuccess)
		return 0;
	fprintf(stderr, "gpu_check: %s: %s (NCCL error %d)\n", what, ncclGetErrorString(rc),
		(int)rc);
	return -1;
}

/* What the summary names: the device and the NCCL actually loaded. */
static void print_identity(void)
{
	char name[256];
	int v = 0;

	spin_device_name(name, sizeof(name));
	printf("device=%s\n", name);
	if (ncclGetVersion(&v) == ncclSuccess)
		printf("nccl=%d.%d.%d\n", v / 10000, v / 100 % 100, v % 100);
	else
		printf("nccl=unknown\n");
	fflush(stdout);
}

static int probe(void)
{
	int n = 0;
	cudaError_t rc = cudaGetDeviceCount(&n);

	if (rc != cudaSuccess || n < 1) {
		printf("no_gpu=%s\n", rc != cudaSuccess ? cudaGetErrorString(rc) : "no CUDA device");
		return 77;
	}
	print_identity();
	return 0;
}

static int setup_open(struct setup *s, bool want_agent)
{
	ncclUniqueId id;
	float one = 1.0f;

	memset(s, 0, sizeof(*s));
	if (cuda_check(cudaSetDevice(0), "cudaSetDevice(0)") ||
	    cuda_check(cudaStreamCreate(&s->stream), "cudaStreamCreate") ||
	    cuda_check(cudaMalloc((void **)&s->in, sizeof(float)), "cudaMalloc") ||
	    cuda_check(cudaMalloc((void **)&s->out, sizeof(float)), "cudaMalloc") ||
	    cuda_check(cudaMemcpy(s->in, &one, sizeof(one), MEMCPY_HOST_TO_DEVICE), "cudaMemcpy") ||
	    spin_init() ||
	    nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId") ||
	    nccl_check(ncclCommInitRank(&s->comm, 1, id, 0), "ncclCommInitRank(nranks=1)"))
		return -1;
	/* Looked up, not linked: the same binary runs without the agent. */
	*(void **)&s->dump_now = dlsym(RTLD_DEFAULT, "fr_dump_now");
	printf("agent=%d\n", s->dump_now != NULL);
	if (want_agent && !s->dump_now) {
		fprintf(stderr, "gpu_check: the agent is not loaded (LD_PRELOAD of libflightrec.so "
				"failed?)\n");
		return -1;
	}
	s->dump_dir = getenv("FLIGHTREC_DUMP_DIR");
	s->job = getenv("FLIGHTREC_JOB");
	if (want_agent && (!s->dump_dir || !*s->dump_dir || !s->job || !*s->job)) {
		fprintf(stderr, "gpu_check: set FLIGHTREC_DUMP_DIR and FLIGHTREC_JOB\n");
		return -1;
	}
	return 0;
}

static void setup_close(struct setup *s)
{
	if (s->comm)
		ncclCommDestroy(s->comm);
	if (s->in)
		cudaFree(s->in);
	if (s->out)
		cudaFree(s->out);
	if (s->stream)
		cudaStreamDestroy(s->stream);
}

static ncclResult_t allreduce(const struct setup *s)
{
	return ncclAllReduce(s->in, s->out, 1, ncclFloat32, ncclSum, s->comm, s->stream);
}

static int clear_out(const struct setup *s)
{
	float zero = 0.0f;

	return cuda_check(cudaMemcpy(s->out, &zero, sizeof(zero), MEMCPY_HOST_TO_DEVICE),
			  "cudaMemcpy");
}

/* The sum over one rank of 1.0 is 1.0: anything else is a broken run. */
static int check_out(const struct setup *s)
{
	float v = 0.0f;

	if (cuda_check(cudaMemcpy(&v, s->out, sizeof(v), MEMCPY_DEVICE_TO_HOST), "cudaMemcpy"))
		return -1;
	if (v != 1.0f) {
		fprintf(stderr, "gpu_check: ncclAllReduce gave %g, want 1\n", (double)v);
		return -1;
	}
	return 0;
}

static int run_ops(const struct setup *s, int n)
{
	if (clear_out(s))
		return -1;
	for (int i = 0; i < n; i++)
		if (nccl_check(allreduce(s), "ncclAllReduce"))
			return -1;
	if (cuda_check(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize"))
		return -1;
	return check_out(s);
}

/* Queues a spin and waits (bounded) until the device runs it, so that
 * whatever is queued next waits behind running work. */
static int spin_begin(const struct setup *s, double limit_s)
{
	double deadline = mono_s() + START_WAIT_S;

	if (spin_launch(s->stream, limit_s))
		return -1;
	while (!spin_started()) {
		if (mono_s() > deadline) {
			fprintf(stderr, "gpu_check: the spin did not start within %.0f s\n",
				START_WAIT_S);
			spin_release();
			return -1;
		}
		sleep_s(0.001);
	}
	return 0;
}

/* Releases the spin and drains the stream; the spin must have been
 * released, not have run out of time. */
static int spin_end(const struct setup *s)
{
	spin_release();
	if (cuda_check(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize"))
		return -1;
	if (spin_outcome() != SPIN_RELEASED) {
		fprintf(stderr, "gpu_check: the spin ended by its time limit, not its release\n");
		return -1;
	}
	return 0;
}

/*
 * The collective under test, queued behind a running spin. Its host call
 * must return while the spin still runs: a library that waited on the host
 * for the device would make the rest of the check meaningless.
 */
static int enqueue_held(const struct setup *s, uint64_t *t_call, uint64_t *t_return)
{
	*t_call = real_ns();
	if (nccl_check(allreduce(s), "ncclAllReduce")) {
		spin_end(s);
		return -1;
	}
	*t_return = real_ns();
	if (spin_outcome() != SPIN_NOT_ENDED) {
		fprintf(stderr, "gpu_check: ncclAllReduce returned only after the spin ended "
				"(%.1f s): it waited for the device on the host\n",
			(double)(*t_return - *t_call) * 1e-9);
		return -1;
	}
	return 0;
}

/* Whether a file's contents hold `needle`. */
static bool file_contains(const char *path, const char *needle)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t len = 0, cap = 0;
	bool found = false;

	if (!f)
		return false;
	for (;;) {
		size_t n;

		if (cap - len < 65536) {
			char *grown = realloc(buf, cap + 65536 + 1);

			if (!grown)
				break;
			buf = grown;
			cap += 65536;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (n == 0) {
			buf[len] = '\0';
			found = strstr(buf, needle) != NULL;
			break;
		}
	}
	free(buf);
	fclose(f);
	return found;
}

/*
 * Waits (bounded) for rank 0's dump in an incident directory of this job
 * whose name starts with `prefix` and, if `reason` is given, whose dump
 * carries it. The agent renames a dump into place whole, so a file that
 * exists is complete. Writes its path to `path`; false on time-out.
 */
static bool wait_dump(const struct setup *s, const char *prefix, const char *reason,
		      double timeout_s, char *path, size_t len)
{
	double deadline = mono_s() + timeout_s;
	char jobdir[4096];

	snprintf(jobdir, sizeof(jobdir), "%s/%s", s->dump_dir, s->job);
	do {
		DIR *d = opendir(jobdir);
		struct dirent *e;
		bool found = false;

		while (d && !found && (e = readdir(d))) {
			if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
				continue;
			if (snprintf(path, len, "%s/%s/rank-0.json", jobdir, e->d_name) >= (int)len)
				continue;
			found = reason ? file_contains(path, reason) : access(path, R_OK) == 0;
		}
		if (d)
			closedir(d);
		if (found)
			return true;
		sleep_s(0.02);
	} while (mono_s() < deadline);
	snprintf(path, len, "none");
	return false;
}

/* Asks the agent for a dump and waits for it. */
static int dump_and_wait(const struct setup *s, const char *reason, char *path, size_t len)
{
	int rc = s->dump_now(reason);

	if (rc) {
		fprintf(stderr, "gpu_check: fr_dump_now: %s\n", strerror(-rc));
		return -1;
	}
	if (!wait_dump(s, "app-", reason, DUMP_WAIT_S, path, len)) {
		fprintf(stderr, "gpu_check: no dump \"%s\" in %s/%s within %.0f s\n", reason,
			s->dump_dir, s->job, DUMP_WAIT_S);
		return -1;
	}
	return 0;
}

/*
 * A collective held on the device behind a spin for HOLD_S seconds: a dump
 * taken while the device spins must show it in flight, and the final one
 * completed after the release, never at the call's return.
 */
static int events(const struct setup *s)
{
	char mid[4096], final[4096];
	uint64_t t_call, t_return, t_release, t_synced;
	time_t mid_second;

	if (run_ops(s, EVENTS_WARM) || clear_out(s) || spin_begin(s, EVENTS_SPIN_LIMIT_S) ||
	    enqueue_held(s, &t_call, &t_return))
		return -1;
	sleep_s(SETTLE_S);
	if (dump_and_wait(s, MID_REASON, mid, sizeof(mid))) {
		spin_end(s);
		return -1;
	}
	mid_second = time(NULL);
	sleep_s(HOLD_S - (double)(real_ns() - t_return) * 1e-9);
	t_release = real_ns();
	if (spin_end(s))
		return -1;
	t_synced = real_ns();
	if (check_out(s))
		return -1;
	sleep_s(SETTLE_S);
	/* Application dumps are named to the second: the final one must not
	 * land in the mid one's directory. */
	while (time(NULL) <= mid_second)
		sleep_s(0.05);
	if (dump_and_wait(s, FINAL_REASON, final, sizeof(final)))
		return -1;
	printf("ops=%d\nheld_seq=%d\n", EVENTS_WARM + 1, EVENTS_WARM + 1);
	printf("t_call_ns=%llu\nt_return_ns=%llu\nt_release_ns=%llu\nt_synced_ns=%llu\n",
	       (unsigned long long)t_call, (unsigned long long)t_return,
	       (unsigned long long)t_release, (unsigned long long)t_synced);
	printf("mid_dump=%s\nfinal_dump=%s\n", mid, final);
	return 0;
}

/*
 * A collective queued behind a spin that outlasts FLIGHTREC_TIMEOUT: the
 * host call returns at once, and with no daemon the agent's own watchdog
 * must dump it. The spin is released once the dump is there (or the wait
 * gave up), so the process ends cleanly either way.
 */
static int stuck(const struct setup *s)
{
	const char *v = getenv("FLIGHTREC_TIMEOUT");
	double timeout_s = v ? atof(v) : 0;
	char path[4096];
	uint64_t t_call, t_return, t_found;

	if (timeout_s <= 0 || timeout_s > 60) {
		fprintf(stderr, "gpu_check: stuck needs FLIGHTREC_TIMEOUT of at most 60 s\n");
		return -1;
	}
	if (run_ops(s, STUCK_WARM) || clear_out(s) ||
	    spin_begin(s, timeout_s + STUCK_SPIN_MARGIN_S) || enqueue_held(s, &t_call, &t_return))
		return -1;
	/* Without a dump the path reads "none", which verify.py reports. */
	wait_dump(s, "local-", NULL, timeout_s + DUMP_WAIT_S, path, sizeof(path));
	t_found = real_ns();
	if (spin_end(s) || check_out(s))
		return -1;
	printf("stuck_seq=%d\ntimeout_s=%g\nwait_s=%g\n", STUCK_WARM + 1, timeout_s,
	       timeout_s + DUMP_WAIT_S);
	printf("t_call_ns=%llu\nt_return_ns=%llu\nt_found_ns=%llu\nlocal_dump=%s\n",
	       (unsigned long long)t_call, (unsigned long long)t_return,
	       (unsigned long long)t_found, path);
	return 0;
}

/* ncclAllReduce of one float, CALLS per round, the stream synchronised
 * every 256 calls (as an application would, now and then). */
static int overhead(const struct setup *s, long calls, int rounds)
{
	if (run_ops(s, 256))
		return -1;
	for (int r = 0; r < rounds; r++) {
		double t0;

		sleep_s(ROUND_PAUSE_S);
		t0 = mono_s();
		for (long i = 0; i < calls; i++) {
			if (nccl_check(allreduce(s), "ncclAllReduce"))
				return -1;
			if (i % 256 == 255 &&
			    cuda_check(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize"))
				return -1;
		}
		if (cuda_check(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize"))
			return -1;
		printf("round_ns=%.1f\n", (mono_s() - t0) * 1e9 / (double)calls);
	}
	return check_out(s);
}

static int usage(void)
{
	fprintf(stderr, "usage: gpu_check probe | events | stuck | overhead CALLS ROUNDS\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct setup s;
	const char *mode = argc > 1 ? argv[1] : "";
	bool want_agent = strcmp(mode, "events") == 0 || strcmp(mode, "stuck") == 0;
	long calls = 0;
	int rounds = 0, rc;

	if (strcmp(mode, "probe") == 0)
		return argc == 2 ? probe() : usage();
	if (strcmp(mode, "overhead") == 0) {
		if (argc != 4 || (calls = atol(argv[2])) <= 0 || (rounds = atoi(argv[3])) <= 0)
			return usage();
	} else if (!want_agent || argc != 2) {
		return usage();
	}
	if (setup_open(&s, want_agent)) {
		setup_close(&s);
		return 1;
	}
	print_identity();
	if (strcmp(mode, "events") == 0)
		rc = events(&s);
	else if (strcmp(mode, "stuck") == 0)
		rc = stuck(&s);
	else
		rc = overhead(&s, calls, rounds);
	setup_close(&s);
	fflush(stdout);
	return rc ? 1 : 0;
}
