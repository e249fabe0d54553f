/*
 * systemd's notification protocol, spoken without libsystemd: one datagram
 * of "KEY=value" lines to the AF_UNIX socket that $NOTIFY_SOCKET names (a
 * leading '@' names an abstract address). The daemon says READY=1 once its
 * sockets are bound, RELOADING=1 around a SIGHUP, STOPPING=1 at shutdown,
 * and WATCHDOG=1 from a timer on the event loop, so that a loop that stops
 * turning stops the pings and systemd restarts the service.
 *
 * Without $NOTIFY_SOCKET every function here does nothing. A failure to
 * send is logged once and never stops the daemon: a service manager that
 * cannot be told is no reason to stop diagnosing hangs.
 */
#include "notify.h"
#include "daemon.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* A datagram carries a few short lines; STATUS= is the longest. */
#define NOTIFY_MSG_MAX 512

static void notify_log_once(struct notify *n, const char *what, int err)
{
	if (n->error_logged)
		return;
	n->error_logged = true;
	daemon_log("cannot %s the service manager's notify socket %s: %s (logged once)",
		   what, n->path, strerror(err));
}

/* Parses $NOTIFY_SOCKET into an address; false when it names none we can use. */
static bool notify_parse_addr(struct notify *n, const char *path)
{
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(n->addr.sun_path))
		return false;
	if (path[0] != '/' && path[0] != '@')
		return false;
	memset(&n->addr, 0, sizeof(n->addr));
	n->addr.sun_family = AF_UNIX;
	memcpy(n->addr.sun_path, path, len);
	if (path[0] == '@') {
		/* An abstract address: its length counts, no terminator. */
		n->addr.sun_path[0] = '\0';
		n->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	} else {
		n->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
	}
	return true;
}

/*
 * The watchdog interval systemd asked for, in microseconds; 0 when it asked
 * for none, or asked another process (a shell that exec'd us keeps our pid,
 * so $WATCHDOG_PID names us then too).
 */
static uint64_t notify_watchdog_usec(void)
{
	const char *usec = getenv("WATCHDOG_USEC");
	const char *pid = getenv("WATCHDOG_PID");
	unsigned long long v;
	char *end;

	if (!usec || !usec[0])
		return 0;
	errno = 0;
	v = strtoull(usec, &end, 10);
	if (*end != '\0' || errno || v == 0) {
		daemon_log("ignoring WATCHDOG_USEC='%s': not a positive number of microseconds", usec);
		return 0;
	}
	if (pid && pid[0]) {
		errno = 0;
		unsigned long p = strtoul(pid, &end, 10);

		if (*end != '\0' || errno || p != (unsigned long)getpid())
			return 0;
	}
	return v;
}

int notify_send(struct flightrecd *d, const char *fmt, ...)
{
	struct notify *n = &d->notify;
	char msg[NOTIFY_MSG_MAX];
	va_list ap;
	int len;

	if (!n->enabled)
		return 0;
	va_start(ap, fmt);
	len = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (len < 0)
		return -EINVAL;
	if ((size_t)len >= sizeof(msg))
		len = sizeof(msg) - 1;
	/* Never block the loop: systemd reads its socket promptly, and a
	 * datagram it could not take is not worth a stall. */
	if (sendto(n->fd, msg, (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL,
		   (const struct sockaddr *)&n->addr, n->addrlen) < 0) {
		int err = errno;

		notify_log_once(n, "write to", err);
		return -err;
	}
	return 0;
}

static void on_watchdog_ping(uv_timer_t *t)
{
	struct flightrecd *d = t->data;

	notify_send(d, "WATCHDOG=1");
}

int notify_init(struct flightrecd *d)
{
	struct notify *n = &d->notify;
	const char *path = getenv("NOTIFY_SOCKET");
	uint64_t usec;
	uint64_t ms;

	if (!path || !path[0])
		return 0;
	snprintf(n->path, sizeof(n->path), "%s", path);
	if (!notify_parse_addr(n, path)) {
		daemon_log("ignoring NOTIFY_SOCKET='%s': not an absolute path or an @abstract name",
			   path);
		return 0;
	}
	n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (n->fd < 0) {
		notify_log_once(n, "open a socket for", errno);
		return 0;
	}
	n->enabled = true;
	usec = notify_watchdog_usec();
	if (!usec)
		return 0;
	/* Half the interval, as systemd advises: one late ping is no restart. */
	ms = usec / 2000;
	if (ms == 0)
		ms = 1;
	uv_timer_init(d->loop, &n->watchdog);
	n->watchdog.data = d;
	n->watchdog_started = true;
	daemon_log("systemd watchdog: pinging every %" PRIu64 " ms", ms);
	/* The first ping goes at once: startup may have taken a while. */
	return uv_timer_start(&n->watchdog, on_watchdog_ping, 0, ms);
}

void notify_ready(struct flightrecd *d, const char *status)
{
	notify_send(d, "READY=1\nMAINPID=%ld\nSTATUS=%s", (long)getpid(), status);
}

void notify_reloading(struct flightrecd *d)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	notify_send(d, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64 "\nSTATUS=reloading the configuration",
		    (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u);
}

void notify_stopping(struct flightrecd *d)
{
	notify_send(d, "STOPPING=1\nSTATUS=shutting down: finishing incidents in progress");
	/* The pings go on while incidents drain, but no longer keep the loop
	 * running: uv_run() returns once the rest is done. */
	if (d->notify.watchdog_started)
		uv_unref((uv_handle_t *)&d->notify.watchdog);
}

void notify_close(struct flightrecd *d)
{
	struct notify *n = &d->notify;

	if (n->watchdog_started && !uv_is_closing((uv_handle_t *)&n->watchdog))
		uv_close((uv_handle_t *)&n->watchdog, NULL);
	if (n->enabled)
		close(n->fd);
	n->enabled = false;
}
