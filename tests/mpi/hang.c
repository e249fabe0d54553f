/*
 * An MPI program with planted faults, for the end-to-end tests and the
 * demo. Every rank runs iterations of a small training-like step; at
 * iteration --at, rank --culprit misbehaves as --scenario says:
 *
 *   compute   never returns from a computation before the step's allreduce
 *   subcomm   the same, before an allreduce on a sub-communicator (ranks
 *             < size/2), while the other half moves on to a world barrier
 *   freeze    stops itself with SIGSTOP before the allreduce
 *   mismatch  calls MPI_Bcast where every other rank calls MPI_Allreduce
 *   p2p       ranks exchange a message with their pair partner (0-1, 2-3,
 *             ...) before the allreduce; the culprit never sends its part
 *   slow      sleeps --slow-ms in every iteration but never hangs
 *   none      no fault
 *
 * With --iters N the job ends after N iterations (it never does once a
 * fault is planted, except for slow and none). With --fork, every rank
 * forks a child at iteration 2 (as a data-loader would) that reports what
 * the agent says to it, then exits.
 */
#include <mpi.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Named so that a dump's stack shows where the culprit is. */
static void __attribute__((noinline)) stuck_in_compute(void)
{
	for (;;)
		sleep_ms(100);
}

/* A forked child must find the agent inert: not recording, not connected. */
static void fork_child(int rank)
{
	pid_t pid = fork();

	if (pid == 0) {
		int (*dump_now)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "fr_dump_now");

		printf("child %d of rank %d (pid %d): fr_dump_now -> %d\n", (int)getpid(), rank,
		       (int)getppid(), dump_now ? dump_now("from a forked child") : 0);
		fflush(stdout);
		_exit(0);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

/* Pairs (0,1), (2,3), ... swap one double; the even rank sends first. */
static void exchange(int rank, int size, bool stall, double *x)
{
	int partner = rank ^ 1;
	double got = 0;

	if (partner >= size)
		return;
	if (rank % 2 == 0) {
		MPI_Send(x, 1, MPI_DOUBLE, partner, 7, MPI_COMM_WORLD);
		MPI_Recv(&got, 1, MPI_DOUBLE, partner, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	} else {
		MPI_Recv(&got, 1, MPI_DOUBLE, partner, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		if (stall)
			stuck_in_compute();
		MPI_Send(x, 1, MPI_DOUBLE, partner, 7, MPI_COMM_WORLD);
	}
	*x += got;
}

static void __attribute__((noinline)) train_step(MPI_Comm comm, double *x)
{
	double in = *x, out = 0;

	MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, comm);
	*x = out / 2;
}

int main(int argc, char **argv)
{
	const char *scenario = "none";
	int culprit = 1, at = 5, iters = -1, slow_ms = 0, step_ms = 5;
	int rank, size, opt, forking = 0;
	MPI_Comm half = MPI_COMM_NULL;
	static const struct option opts[] = {
		{ "scenario", required_argument, NULL, 's' },
		{ "culprit", required_argument, NULL, 'c' },
		{ "at", required_argument, NULL, 'a' },
		{ "iters", required_argument, NULL, 'n' },
		{ "slow-ms", required_argument, NULL, 'w' },
		{ "step-ms", required_argument, NULL, 't' },
		{ "fork", no_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 's': scenario = optarg; break;
		case 'c': culprit = atoi(optarg); break;
		case 'a': at = atoi(optarg); break;
		case 'n': iters = atoi(optarg); break;
		case 'w': slow_ms = atoi(optarg); break;
		case 't': step_ms = atoi(optarg); break;
		case 'f': forking = 1; break;
		default:
			fprintf(stderr, "usage: %s --scenario S [--culprit R] [--at K] [--iters N]\n",
				argv[0]);
			return 2;
		}
	}
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (strcmp(scenario, "subcomm") == 0)
		MPI_Comm_split(MPI_COMM_WORLD, rank < size / 2 ? 0 : 1, rank, &half);

	double x = rank;
	for (int i = 1; iters < 0 || i <= iters; i++) {
		bool mine = rank == culprit && i == at;

		sleep_ms(step_ms);
		if (forking && i == 2)
			fork_child(rank);
		if (strcmp(scenario, "slow") == 0 && rank == culprit)
			sleep_ms(slow_ms);
		if (mine && strcmp(scenario, "compute") == 0)
			stuck_in_compute();
		if (mine && strcmp(scenario, "freeze") == 0)
			raise(SIGSTOP);
		if (strcmp(scenario, "p2p") == 0)
			exchange(rank, size, mine, &x);
		if (half != MPI_COMM_NULL) {
			if (mine)
				stuck_in_compute();
			train_step(half, &x);
			MPI_Barrier(MPI_COMM_WORLD);
		} else if (mine && strcmp(scenario, "mismatch") == 0) {
			MPI_Bcast(&x, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
		} else {
			train_step(MPI_COMM_WORLD, &x);
		}
	}
	if (half != MPI_COMM_NULL)
		MPI_Comm_free(&half);
	if (rank == 0)
		printf("done after %d iterations\n", iters);
	MPI_Finalize();
	return 0;
}
