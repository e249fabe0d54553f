/* The daemon's clocks (clock.c). */
#ifndef FR_DAEMON_CLOCK_H
#define FR_DAEMON_CLOCK_H

#include <stdint.h>

#define NS_PER_S 1000000000ull

/* Wall-clock and monotonic time, in nanoseconds. */
uint64_t daemon_now_ns(void);
uint64_t daemon_mono_ns(void);

#endif
