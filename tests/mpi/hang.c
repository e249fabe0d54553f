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
 *   order     every step does an allreduce on each of two duplicates of the
 *             world, a then b; the culprit calls b's first: a deadlock
 *   p2p       ranks exchange a message with their pair partner (0-1, 2-3,
 *             ...) before the allreduce; the culprit never sends its part
 *   nonblock  every step posts an Irecv/Isend pair with its partner, computes,
 *             then waits; the culprit never returns from the computation
 *             after posting (its receive stays pending, not waited on)
 *   finalize  the culprit never returns from a computation after the loop,
 *             while every other rank enters MPI_Finalize
 *   slow      sleeps --slow-ms in every iteration but never hangs
 *   segv      reads through a null pointer (in load_shard) before the
 *             allreduce: dies of SIGSEGV
 *   abort     calls abort() (in check_shard) before the allreduce
 *   exit      calls exit(3) before the allreduce, without MPI_Finalize
 *   _exit     calls _exit(3) there instead
 *   none      no fault
 *
 * --culprit -1 makes every rank the culprit (with freeze: the whole job
 * stops at once, between two collectives, and no rank can dump).
 *
 * With --iters N the job ends after N iterations (it never does once a
 * fault is planted, except for slow and none). With --fork, every rank
 * forks a child at iteration 2 (as a data-loader would) that reports what
 * the agent says to it, then exits. With --gather, every step also gathers
 * one double per rank to rank 0, which passes MPI_IN_PLACE (and so no send
 * datatype).
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

#include "../planted.h"

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

/* Rank 0 gathers one double from everyone, in place at the root. */
static void gather_in_place(int rank, int size, double x)
{
	double all[64] = { 0 };

	if (size > 64)
		return;
	if (rank == 0) {
		all[0] = x;
		MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	} else {
		MPI_Gather(&x, 1, MPI_DOUBLE, NULL, 0, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD);
	}
}

/* Communication overlapped with computation: post, compute, wait. */
static void overlap(int rank, int size, bool stall, double *x)
{
	int partner = rank ^ 1;
	double got = 0;
	MPI_Request reqs[2];

	if (partner >= size)
		return;
	MPI_Irecv(&got, 1, MPI_DOUBLE, partner, 9, MPI_COMM_WORLD, &reqs[0]);
	MPI_Isend(x, 1, MPI_DOUBLE, partner, 9, MPI_COMM_WORLD, &reqs[1]);
	if (stall)
		stuck_in_compute();
	MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
	*x += got;
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

/* A data loader that crashes: the function a crash report should name. */
static double __attribute__((noinline)) load_shard(double *const volatile *shard)
{
	return **shard;
}

static void __attribute__((noinline)) check_shard(void)
{
	fprintf(stderr, "check_shard: corrupt shard, aborting\n");
	abort();
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
	int rank, size, opt, forking = 0, gathering = 0;
	MPI_Comm half = MPI_COMM_NULL;
	MPI_Comm a = MPI_COMM_NULL, b = MPI_COMM_NULL;
	static const struct option opts[] = {
		{ "scenario", required_argument, NULL, 's' },
		{ "culprit", required_argument, NULL, 'c' },
		{ "at", required_argument, NULL, 'a' },
		{ "iters", required_argument, NULL, 'n' },
		{ "slow-ms", required_argument, NULL, 'w' },
		{ "step-ms", required_argument, NULL, 't' },
		{ "fork", no_argument, NULL, 'f' },
		{ "gather", no_argument, NULL, 'g' },
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
		case 'g': gathering = 1; break;
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
	if (strcmp(scenario, "order") == 0) {
		MPI_Comm_dup(MPI_COMM_WORLD, &a);
		MPI_Comm_dup(MPI_COMM_WORLD, &b);
	}

	double x = rank;
	for (int i = 1; iters < 0 || i <= iters; i++) {
		bool mine = (culprit < 0 || rank == culprit) && i == at;

		sleep_ms(step_ms);
		if (forking && i == 2)
			fork_child(rank);
		if (strcmp(scenario, "slow") == 0 && rank == culprit)
			sleep_ms(slow_ms);
		if (mine && strcmp(scenario, "compute") == 0)
			stuck_in_compute();
		if (mine && strcmp(scenario, "freeze") == 0)
			raise(SIGSTOP);
		if (mine && strcmp(scenario, "segv") == 0) {
			static double *const volatile none;

			x += load_shard(&none);
		}
		if (mine && strcmp(scenario, "abort") == 0)
			check_shard();
		if (mine && strcmp(scenario, "exit") == 0)
			exit(3);
		if (mine && strcmp(scenario, "_exit") == 0)
			_exit(3);
		if (gathering)
			gather_in_place(rank, size, x);
		if (strcmp(scenario, "p2p") == 0)
			exchange(rank, size, mine, &x);
		if (strcmp(scenario, "nonblock") == 0)
			overlap(rank, size, mine, &x);
		if (half != MPI_COMM_NULL) {
			if (mine)
				stuck_in_compute();
			train_step(half, &x);
			MPI_Barrier(MPI_COMM_WORLD);
		} else if (a != MPI_COMM_NULL) {
			train_step(mine ? b : a, &x);
			train_step(mine ? a : b, &x);
		} else if (mine && strcmp(scenario, "mismatch") == 0) {
			MPI_Bcast(&x, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
		} else {
			train_step(MPI_COMM_WORLD, &x);
		}
	}
	if (half != MPI_COMM_NULL)
		MPI_Comm_free(&half);
	if (a != MPI_COMM_NULL) {
		MPI_Comm_free(&a);
		MPI_Comm_free(&b);
	}
	if (strcmp(scenario, "finalize") == 0 && rank == culprit)
		stuck_in_compute();
	if (rank == 0)
		printf("done after %d iterations\n", iters);
	MPI_Finalize();
	return 0;
}
