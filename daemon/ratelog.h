/*
 * Log lines about a limit, once per offender. ratelog() writes the line for
 * a pair (limit, offender) when none was written in the last
 * RATELOG_INTERVAL_NS, else only counts it; the next line written for the
 * pair ends with "(and N more times in the last S s)". ratelog_sweep(),
 * from the watchdog's tick, writes the counts of pairs that went quiet. The
 * table of pairs is fixed in size. Returns whether the line was written.
 * Any thread may call these.
 */
#ifndef FR_DAEMON_RATELOG_H
#define FR_DAEMON_RATELOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"

#define RATELOG_INTERVAL_NS (60ull * NS_PER_S)
bool ratelog(const char *limit, const char *offender, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* ratelog() at a given monotonic time, for tests. */
bool ratelog_at(uint64_t now_mono, const char *limit, const char *offender, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void ratelog_sweep(uint64_t now_mono);
/* Lines held back since startup (/metrics). */
uint64_t ratelog_held_total(void);
/* The address of a peer "1.2.3.4:5678" or "[::1]:5678" without its port,
 * a Unix peer "unix:uid=N,pid=M" without its pid: an agent reconnecting in
 * a loop is one offender whatever its port or process. */
void ratelog_offender_addr(const char *peer, char *out, size_t cap);

#endif
