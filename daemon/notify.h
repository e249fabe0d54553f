/*
 * systemd's notification protocol. notify_init() reads $NOTIFY_SOCKET and
 * $WATCHDOG_USEC and starts the watchdog pings; every function is a no-op
 * without a socket and never fails the daemon.
 */
#ifndef FR_DAEMON_NOTIFY_H
#define FR_DAEMON_NOTIFY_H

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <uv.h>

struct flightrecd;

/* The service manager's notify socket ($NOTIFY_SOCKET), when there is one. */
struct notify {
	bool enabled;
	bool error_logged;          /* a failed send is logged once */
	bool watchdog_started;
	int fd;
	struct sockaddr_un addr;
	socklen_t addrlen;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	uv_timer_t watchdog;        /* WATCHDOG=1 at half of $WATCHDOG_USEC */
};

int notify_init(struct flightrecd *d);
int notify_send(struct flightrecd *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void notify_ready(struct flightrecd *d, const char *status);
void notify_reloading(struct flightrecd *d);
/* Says STOPPING=1; the pings continue but no longer hold the loop open. */
void notify_stopping(struct flightrecd *d);
void notify_close(struct flightrecd *d);

#endif
