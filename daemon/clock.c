/*
 * The daemon's two clocks: wall time for what is shown or written (a
 * rank's last contact, an incident's name) and monotonic time for every
 * deadline, which must not jump when the wall clock is set.
 */
#include "clock.h"

#include <time.h>

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

uint64_t daemon_now_ns(void)
{
	return clock_ns(CLOCK_REALTIME);
}

uint64_t daemon_mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}
