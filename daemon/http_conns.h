/*
 * The HTTP API's connections, counted so that nobody can hold them all
 * (slowloris) and /healthz is answered whatever the API is doing.
 *
 *   - A request must arrive whole (line and headers) within
 *     HTTP_HEADER_DEADLINE_S of its connection opening, or of the
 *     connection's previous answer: libmicrohttpd's own timeout restarts
 *     at every byte, so a client sending one header line every few seconds
 *     held a connection for ever.
 *   - At most HTTP_CONN_PER_ADDRESS connections from one address, and
 *     HTTP_CONN_OPEN_MAX in all. A connection over either cap takes the
 *     place of the oldest one of its address (or of anyone) still waiting
 *     for its request; when every other connection is busy with a request,
 *     the newcomer is closed instead.
 *   - At most HTTP_API_BUSY_MAX requests other than /healthz are answered
 *     at once (live looks wait seconds for ranks); the others get 503. The
 *     connections above that are /healthz's reserve: it is never refused
 *     for the API being busy.
 *
 * A connection is closed by shutdown() of its socket, which libmicrohttpd
 * then sees as the client leaving; the socket stays libmicrohttpd's to close.
 */
#ifndef FR_DAEMON_HTTP_CONNS_H
#define FR_DAEMON_HTTP_CONNS_H

#include <stdbool.h>
#include <stdint.h>

#include <microhttpd.h>

#define HTTP_HEADER_DEADLINE_S 5
#define HTTP_CONN_PER_ADDRESS 16
#define HTTP_API_BUSY_MAX 64
/* Connections counted at once: the API's, and /healthz's reserve. */
#define HTTP_CONN_OPEN_MAX (HTTP_API_BUSY_MAX + 8)
/* libmicrohttpd's limit: room for connections being closed meanwhile. */
#define HTTP_CONN_SLOTS (HTTP_CONN_OPEN_MAX + 8)

/* Starts the deadline's sweeper thread. Returns 0 or a negative errno. */
int http_conns_start(void);
/* Stops it; after MHD_stop_daemon(). */
void http_conns_stop(void);

/* MHD_OPTION_NOTIFY_CONNECTION's callback. */
void http_conns_notify(void *cls, struct MHD_Connection *mc, void **socket_context,
		       enum MHD_ConnectionNotificationCode code);

/*
 * A request arrived whole on `mc` (the handler's first call). Returns
 * false when it is not /healthz (`api`) and HTTP_API_BUSY_MAX others are
 * being answered: the caller answers 503. Idempotent per request.
 */
bool http_conns_request_begin(struct MHD_Connection *mc, bool api);

/* The request of `mc` is over (answered or abandoned). */
void http_conns_request_end(struct MHD_Connection *mc);

/* Connections closed by the deadline or a cap, for /metrics. */
uint64_t http_conns_dropped(void);
/* Requests refused because the API was busy, for /metrics. */
uint64_t http_conns_busy_refused(void);

#endif
