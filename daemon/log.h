/* The daemon's log (log.c), which every module writes to. */
#ifndef FR_DAEMON_LOG_H
#define FR_DAEMON_LOG_H

/* One line on stderr, "flightrecd: " and the formatted text, its control
 * characters (a newline among them) written as '?'. */
void daemon_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
