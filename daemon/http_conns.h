/*
 * The HTTP API's connections, counted so that nobody can hold them all
 * (slowloris) and /healthz is answered whatever the API is doing.
 *
 *   - A request must arrive whole (line and headers) within
 *     HTTP_HEADER_DEADLINE_S of its connection opening, or of the
 *     connection's previous answer: libmicrohttpd's own timeout restarts
 *     at every byte, so a client sending one header line every few seconds
 *     held a connection for ever.
 *   - At most HTTP_CONN_PER_ADDRESS connections from one address wait for
 *     their request, and HTTP_CONN_OPEN_MAX connections are open in all. A
 *     newcomer over either cap takes the place of the oldest connection of
 *     its address (or of anyone) still waiting for its request. Only when
 *     nothing waits at all, every connection being answered, is the
 *     newcomer closed: never for its address alone, since nobody knows yet
 *     whether it is a /healthz probe.
 *   - At most HTTP_API_BUSY_MAX requests other than /healthz are answered
 *     at once (live looks wait seconds for ranks), and HTTP_CONN_PER_ADDRESS
 *     of them from one address; the others get 503. The connections above
 *     that are /healthz's reserve: it is never refused for the API being
 *     busy, nor for its address.
 *   - An answer must be read within HTTP_ANSWER_DEADLINE_S plus one second
 *     for each HTTP_ANSWER_MIN_RATE bytes of it, counted from when it is
 *     queued: libmicrohttpd's timeout restarts at every byte sent, so a
 *     client reading a big answer a few kilobytes at a time held its
 *     connection, its API slot and the answer's memory for hours. A request
 *     still being worked on (a live look suspended while a rank answers) has
 *     no such deadline; its handler bounds it.
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
#define HTTP_ANSWER_DEADLINE_S 5
#define HTTP_ANSWER_MIN_RATE (1024u * 1024u)
#define HTTP_CONN_PER_ADDRESS 16
/*
 * A connection younger than this is never closed to make room for its
 * address's newcomers, and is the last choice when the whole table is
 * full: a client sends its request at once, and a flood from its address
 * must not close it before the request is read (a prober's /healthz on a
 * loaded machine). A slow client is old by the time it matters.
 */
#define HTTP_EVICT_GRACE_MS 500
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
 * A request arrived whole on `mc` (the handler's first call). Returns 0,
 * or, for a request that is not /healthz (`api`), -EBUSY when
 * HTTP_API_BUSY_MAX others are being answered and -EUSERS when
 * HTTP_CONN_PER_ADDRESS others from the same address are: the caller
 * answers 503. Idempotent per request.
 */
int http_conns_request_begin(struct MHD_Connection *mc, bool api);

/* The answer to the request of `mc`, `size` bytes, is queued: it must be
 * read within its deadline from now. */
void http_conns_answer(struct MHD_Connection *mc, uint64_t size);

/* The request of `mc` is over (answered or abandoned). */
void http_conns_request_end(struct MHD_Connection *mc);

/* Connections closed by the deadline or a cap, for /metrics. */
uint64_t http_conns_dropped(void);
/* Requests refused because the API was busy, for /metrics. */
uint64_t http_conns_busy_refused(void);

#endif
