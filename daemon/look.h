/*
 * Live looks at ranks for the debug server (GET
 * /v1/jobs/<job>/ranks/<rank>/stacks and .../trace, /v1/jobs/<job>/stacks).
 * A look asks one rank, or every connected rank of a job, for a dump with a
 * DUMP_REQUEST whose id has FR_WIRE_LIVE_PREFIX and the scope the look
 * needs (live-stacks-<n>, live-trace<N>-<n>), collects the answers in
 * memory and completes when every rank asked answered, went away, or
 * LOOK_TIMEOUT_NS passed. The event loop owns the looks; the HTTP thread
 * hands requests over (handover.c), the loop answers them, and the HTTP
 * thread parses the dumps and replies. Requests for the same rank or job
 * share a look that asks for at least what they need, and a result younger
 * than LOOK_FRESH_NS that holds it answers without asking again.
 */
#ifndef FR_DAEMON_LOOK_H
#define FR_DAEMON_LOOK_H

#include <stdint.h>

#include "clock.h"

struct conn;
struct flightrecd;
struct fr_msg_dump_data;
struct MHD_Connection;
struct route;

#define LOOK_TIMEOUT_NS (5ull * NS_PER_S)
#define LOOK_FRESH_NS (1ull * NS_PER_S)
/* Starts the looks' timer; before the HTTP threads exist. */
int look_start(struct flightrecd *d);
/*
 * Forgets every look and result; after handover_stop() answered the
 * requests waiting on them, before MHD_stop_daemon().
 */
void look_stop(struct flightrecd *d);
/*
 * The HTTP handler of the three routes: answers at once (a bad request, an
 * unknown job or rank), or suspends the request and hands it to the loop.
 * Called again for the same request once the loop resumed it, with the
 * *req_cls it set. Returns an enum MHD_Result.
 */
int look_http(struct flightrecd *d, struct MHD_Connection *mc, const struct route *r,
	      void **req_cls);
/* DUMP_DATA whose id has FR_WIRE_LIVE_PREFIX; the caller holds the lock. */
void look_dump_data(struct conn *c, const struct fr_msg_dump_data *m);
/* The connection closes: its live look fails. The caller holds the lock. */
void look_conn_closed(struct conn *c);
/*
 * What /metrics says of live looks: X(field, name, type, help), where
 * /metrics calls it flightrec_<name>. look_metrics() reads them on any
 * thread, without the lock.
 */
#define LOOK_METRICS(X)                                                                           \
	X(requests, "live_requests_total", "counter",                                             \
	  "HTTP requests for live looks (stacks and traces of running ranks).")                   \
	X(shared, "live_shared_total", "counter",                                                 \
	  "Live look requests answered by a look already asked or just answered.")                \
	X(dump_requests, "live_dump_requests_total", "counter",                                   \
	  "Dump requests sent to agents for live looks.")                                         \
	X(timeouts, "live_timeouts_total", "counter",                                             \
	  "Ranks that did not answer a live look in time.")                                       \
	X(bytes, "live_bytes_total", "counter", "Dump bytes received for live looks.")            \
	X(bytes_held, "live_bytes_held", "gauge", "Dump bytes live looks hold now.")              \
	X(ignored, "live_uploads_ignored_total", "counter",                                       \
	  "Live look uploads ignored: not the look asked of that connection.")

struct look_metrics {
#define LOOK_METRIC_FIELD(field, name, type, help) uint64_t field;
	LOOK_METRICS(LOOK_METRIC_FIELD)
#undef LOOK_METRIC_FIELD
};
void look_metrics(struct look_metrics *out);

#endif
