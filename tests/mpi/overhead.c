/*
 * Agent cost per hooked collective: a tight loop of MPI_Allreduce of one
 * double on MPI_COMM_SELF. Prints nanoseconds per call; bench/run runs it
 * with and without the agent in one go and reports the difference.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 2000000;
	double in = 1, out = 0, best = 1e30;

	MPI_Init(&argc, &argv);
	/* Best of several rounds: the machine is shared and noisy. */
	for (int round = 0; round < 5; round++) {
		double t0 = now_s();

		for (long i = 0; i < calls; i++)
			MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_SELF);
		double ns = (now_s() - t0) * 1e9 / calls;

		if (ns < best)
			best = ns;
	}
	printf("%.1f\n", best);
	MPI_Finalize();
	return out == 1 ? 0 : 1;
}
