/*
 * What the planted-fault programs (tests/mpi/hang.c, tests/nccl/nccl_hang.c)
 * share: the computation a culprit never returns from. The end-to-end tests
 * look for its name in the culprit's stack, so it must not be inlined.
 */
#ifndef FR_TESTS_PLANTED_H
#define FR_TESTS_PLANTED_H

#include <time.h>

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void __attribute__((noinline, unused)) stuck_in_compute(void)
{
	for (;;)
		sleep_ms(100);
}

#endif
