/*
 * Timestamps for the hot path.
 *
 * clock_gettime through the vDSO costs 20-30 ns on common virtual machines,
 * and a hook takes two, so where the CPU has an invariant time-stamp counter
 * the ring stores raw counter ticks (about 10 ns to read) and readers --
 * the link thread and the dumper, never the application -- convert them to
 * wall-clock nanoseconds with a rate calibrated against CLOCK_REALTIME and
 * refined as the run goes on. Elsewhere ticks are CLOCK_REALTIME
 * nanoseconds and the conversion is the identity.
 */
#ifndef FR_AGENT_CLOCK_H
#define FR_AGENT_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

/* Wall-clock nanoseconds (vDSO: no system call). */
static inline uint64_t fr_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Monotonic milliseconds, for the link thread's timers and budgets. */
static inline uint64_t fr_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

extern bool fr_clock_use_tsc;

/* A timestamp for the ring. Hot path. */
static inline uint64_t fr_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
	if (__builtin_expect(fr_clock_use_tsc, 1))
		return __rdtsc();
#endif
	return fr_now_ns();
}

/* Chooses the clock and takes a first calibration (a few milliseconds). */
void fr_clock_init(void);

/* Refines the tick rate; called periodically by the link thread. */
void fr_clock_recalibrate(void);

/* Wall-clock nanoseconds of a tick value; 0 stays 0. */
uint64_t fr_ticks_to_ns(uint64_t ticks);

#endif
