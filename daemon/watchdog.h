/* The watchdog (watchdog.c): looks for hangs every DAEMON_WATCHDOG_MS. */
#ifndef FR_DAEMON_WATCHDOG_H
#define FR_DAEMON_WATCHDOG_H

struct flightrecd;

int watchdog_start(struct flightrecd *d);

#endif
