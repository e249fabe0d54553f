#include "http_conns.h"
#include "clock.h"
#include "handover.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <time.h>

/* How often the sweeper looks for requests past their deadline. */
#define SWEEP_NS (250ull * 1000000ull)

/* One connection libmicrohttpd told us of; its socket_context points here. */
struct http_conn {
	bool used;
	bool doomed;            /* shut down; libmicrohttpd has not closed it yet */
	bool in_request;        /* a whole request is being answered */
	bool api;               /* ... and it counts in `busy` */
	int fd;
	uint8_t addr[16];       /* the client's address, v4 in its first 4 bytes */
	int family;
	uint64_t waiting_since; /* monotonic ns; meaningless while in_request */
	uint64_t answer_by;     /* monotonic ns; 0 until the answer is queued */
};

/* One table for the one HTTP server of the process; guarded by `lock`. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t sweeper;
	bool running;
	bool stop;
	struct http_conn conns[HTTP_CONN_SLOTS];
	unsigned busy;          /* API requests being answered */
} tab = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

static atomic_uint_fast64_t dropped;
static atomic_uint_fast64_t busy_refused;

/* Closes `c` for libmicrohttpd to notice; the caller holds the lock. */
static void doom(struct http_conn *c)
{
	if (c->doomed)
		return;
	c->doomed = true;
	if (c->fd >= 0)
		shutdown(c->fd, SHUT_RDWR);
	atomic_fetch_add(&dropped, 1);
}

/*
 * Closes `c`, whose answer is not being read in time, and lets its unsent
 * bytes go: a shutdown alone sends them first (megabytes already queued
 * in the socket, read as slowly as before). With no linger, libmicrohttpd's
 * close() resets the connection. The caller holds the lock.
 */
static void doom_now(struct http_conn *c)
{
	struct linger no_linger = { .l_onoff = 1, .l_linger = 0 };

	if (!c->doomed && c->fd >= 0)
		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &no_linger, sizeof(no_linger));
	doom(c);
}

static bool same_address(const struct http_conn *a, const struct http_conn *b)
{
	return a->family == b->family && memcmp(a->addr, b->addr, sizeof(a->addr)) == 0;
}

/*
 * The connection waiting longest for its request, of `like`'s address
 * when `like` is not NULL, other than `self`; with `grace`, only one
 * waiting for longer than HTTP_EVICT_GRACE_MS. NULL when there is none.
 */
static struct http_conn *oldest_waiting(const struct http_conn *self,
					const struct http_conn *like, bool grace)
{
	uint64_t young = daemon_mono_ns() - (uint64_t)HTTP_EVICT_GRACE_MS * 1000000u;
	struct http_conn *best = NULL;

	for (size_t i = 0; i < HTTP_CONN_SLOTS; i++) {
		struct http_conn *c = &tab.conns[i];

		if (!c->used || c->doomed || c->in_request || c == self ||
		    (grace && c->waiting_since > young))
			continue;
		if (like && !same_address(c, like))
			continue;
		if (!best || c->waiting_since < best->waiting_since)
			best = c;
	}
	return best;
}

/*
 * A new connection: counted, and made room for. Only when every other
 * connection is being answered, and the table is over its cap, is the
 * newcomer itself closed; an address's cap never closes it, since it may
 * be the orchestrator's /healthz from an address whose connections are all
 * busy (their requests are capped in http_conns_request_begin()).
 */
static void conn_started(struct MHD_Connection *mc, void **socket_context)
{
	const union MHD_ConnectionInfo *fdi =
		MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
	const union MHD_ConnectionInfo *ai =
		MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	struct http_conn *c = NULL;
	struct http_conn *victim = NULL;
	size_t open = 0, same_waiting = 0;

	pthread_mutex_lock(&tab.lock);
	for (size_t i = 0; i < HTTP_CONN_SLOTS && !c; i++)
		if (!tab.conns[i].used)
			c = &tab.conns[i];
	if (!c) {
		/* libmicrohttpd's limit is the table's: cannot happen. */
		if (fdi)
			shutdown(fdi->connect_fd, SHUT_RDWR);
		atomic_fetch_add(&dropped, 1);
		pthread_mutex_unlock(&tab.lock);
		return;
	}
	memset(c, 0, sizeof(*c));
	c->used = true;
	c->fd = fdi ? fdi->connect_fd : -1;
	c->waiting_since = daemon_mono_ns();
	if (ai && ai->client_addr && ai->client_addr->sa_family == AF_INET) {
		c->family = AF_INET;
		memcpy(c->addr, &((const struct sockaddr_in *)ai->client_addr)->sin_addr, 4);
	} else if (ai && ai->client_addr && ai->client_addr->sa_family == AF_INET6) {
		c->family = AF_INET6;
		memcpy(c->addr, &((const struct sockaddr_in6 *)ai->client_addr)->sin6_addr, 16);
	}
	*socket_context = c;
	for (size_t i = 0; i < HTTP_CONN_SLOTS; i++) {
		const struct http_conn *o = &tab.conns[i];

		if (!o->used || o->doomed)
			continue;
		open++;
		same_waiting += !o->in_request && same_address(o, c);
	}
	/* The newcomer counts among its address's waiting ones: over the cap,
	 * another of them waits, the oldest of which makes room. */
	if (same_waiting > HTTP_CONN_PER_ADDRESS) {
		victim = oldest_waiting(c, c, true);
		if (victim) {
			doom(victim);
			open--;
		}
	}
	if (open > HTTP_CONN_OPEN_MAX) {
		victim = oldest_waiting(c, NULL, true);
		if (!victim)
			victim = oldest_waiting(c, NULL, false);
		doom(victim ? victim : c);
	}
	pthread_mutex_unlock(&tab.lock);
}

void http_conns_notify(void *cls, struct MHD_Connection *mc, void **socket_context,
		       enum MHD_ConnectionNotificationCode code)
{
	struct http_conn *c = *socket_context;

	(void)cls;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		conn_started(mc, socket_context);
		return;
	}
	/* Closed: libmicrohttpd closes the socket after this returns, so
	 * the sweeper can never shut down a descriptor reused meanwhile. */
	if (!c)
		return;
	pthread_mutex_lock(&tab.lock);
	if (c->in_request && c->api)
		tab.busy--;
	memset(c, 0, sizeof(*c));
	pthread_mutex_unlock(&tab.lock);
	*socket_context = NULL;
}

static struct http_conn *conn_of(struct MHD_Connection *mc)
{
	const union MHD_ConnectionInfo *info =
		MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return info ? info->socket_context : NULL;
}

/* API requests of `c`'s address being answered; the caller holds the lock. */
static size_t busy_of_address(const struct http_conn *c)
{
	size_t n = 0;

	for (size_t i = 0; i < HTTP_CONN_SLOTS; i++) {
		const struct http_conn *o = &tab.conns[i];

		n += o->used && o->in_request && o->api && same_address(o, c);
	}
	return n;
}

int http_conns_request_begin(struct MHD_Connection *mc, bool api)
{
	struct http_conn *c = conn_of(mc);
	int err = 0;

	if (!c)
		return 0;
	pthread_mutex_lock(&tab.lock);
	if (!c->in_request) {
		c->in_request = true;
		c->answer_by = 0;
		if (api && tab.busy >= HTTP_API_BUSY_MAX)
			err = -EBUSY;
		else if (api && busy_of_address(c) >= HTTP_CONN_PER_ADDRESS)
			err = -EUSERS;
		if (err) {
			atomic_fetch_add(&busy_refused, 1);
		} else if (api) {
			c->api = true;
			tab.busy++;
		}
	}
	pthread_mutex_unlock(&tab.lock);
	return err;
}

void http_conns_answer(struct MHD_Connection *mc, uint64_t size)
{
	struct http_conn *c = conn_of(mc);

	if (!c)
		return;
	pthread_mutex_lock(&tab.lock);
	if (c->in_request)
		c->answer_by = daemon_mono_ns() + HTTP_ANSWER_DEADLINE_S * NS_PER_S +
			       size / HTTP_ANSWER_MIN_RATE * NS_PER_S +
			       size % HTTP_ANSWER_MIN_RATE * NS_PER_S / HTTP_ANSWER_MIN_RATE;
	pthread_mutex_unlock(&tab.lock);
}

void http_conns_request_end(struct MHD_Connection *mc)
{
	struct http_conn *c = conn_of(mc);

	if (!c)
		return;
	pthread_mutex_lock(&tab.lock);
	if (c->in_request && c->api)
		tab.busy--;
	c->in_request = false;
	c->api = false;
	c->answer_by = 0;
	c->waiting_since = daemon_mono_ns();
	pthread_mutex_unlock(&tab.lock);
}

static void *sweeper_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&tab.lock);
	while (!tab.stop) {
		struct timespec until;
		uint64_t now = daemon_mono_ns();

		for (size_t i = 0; i < HTTP_CONN_SLOTS; i++) {
			struct http_conn *c = &tab.conns[i];

			if (!c->used || c->doomed)
				continue;
			if (!c->in_request &&
			    now - c->waiting_since > HTTP_HEADER_DEADLINE_S * NS_PER_S)
				doom(c);
			else if (c->in_request && c->answer_by && now > c->answer_by)
				doom_now(c);
		}
		/* Requests waiting on a stalled loop are answered too. */
		pthread_mutex_unlock(&tab.lock);
		handover_expire(now);
		pthread_mutex_lock(&tab.lock);
		if (tab.stop)
			break;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += (long)SWEEP_NS;
		if (until.tv_nsec >= (long)NS_PER_S) {
			until.tv_sec++;
			until.tv_nsec -= (long)NS_PER_S;
		}
		pthread_cond_timedwait(&tab.cond, &tab.lock, &until);
	}
	pthread_mutex_unlock(&tab.lock);
	return NULL;
}

int http_conns_start(void)
{
	int err;

	pthread_mutex_lock(&tab.lock);
	tab.stop = false;
	pthread_mutex_unlock(&tab.lock);
	err = pthread_create(&tab.sweeper, NULL, sweeper_main, NULL);
	if (err)
		return -err;
	tab.running = true;
	return 0;
}

void http_conns_stop(void)
{
	if (!tab.running)
		return;
	pthread_mutex_lock(&tab.lock);
	tab.stop = true;
	pthread_cond_broadcast(&tab.cond);
	pthread_mutex_unlock(&tab.lock);
	pthread_join(tab.sweeper, NULL);
	tab.running = false;
}

uint64_t http_conns_dropped(void)
{
	return atomic_load(&dropped);
}

uint64_t http_conns_busy_refused(void)
{
	return atomic_load(&busy_refused);
}
