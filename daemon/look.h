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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "clock.h"
#include "route.h"
#include "../dumps/correlate.h"

struct conn;
struct flightrecd;
struct fr_msg_dump_data;
struct MHD_Connection;
struct route;
struct fr_trace;
struct fr_thread;
/* A look's answers, as published: read-only, any thread. */
struct look_result;

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

/*
 * A look the daemon asks itself, without an HTTP request: a node daemon's
 * answer to its central daemon's NODE_LOOK_REQUEST (upstream_look.c). It
 * shares looks and results with the HTTP requests as they share them among
 * themselves. `done` is called once, on the loop under the daemon's lock,
 * with 200 and the result (valid during the call only), or with the HTTP
 * status and the reason the HTTP request would have been answered with
 * (res NULL). It may be called before look_local() returns. Returns 0 or
 * -ENOMEM (`done` is not called then). On the loop, under the lock.
 */
typedef void look_done_fn(void *arg, unsigned status, const char *error,
			  const struct look_result *res);
int look_local(struct flightrecd *d, enum route_kind kind, const char *job, uint32_t rank,
	       uint32_t last, look_done_fn *done, void *arg);
/*
 * GET .../ranks/<rank>/stacks (trace false) or .../trace?last=N of a
 * result: the JSON body, or NULL with the HTTP status and why in `err`.
 */
json_t *look_rank_json(const struct look_result *res, bool trace, uint32_t rank, uint32_t last,
		       unsigned *status, char *err, size_t cap);
/* The "threads" of the dump format for `t`'s threads (or only `one`), as the dump writes them. */
json_t *look_threads_json(const struct fr_trace *t, const struct fr_thread *one);

/* GET /v1/jobs/<job>/stacks lists this many groups, and counts the rest. */
#define JOB_STACK_GROUPS_MAX 64
/*
 * ... and reads this many threads of each rank and frames of each thread
 * (innermost first), so that the work of one answer is bounded whatever
 * the dumps hold; what was left out is counted in the answer.
 */
#define JOB_STACK_THREADS_MAX 64
#define JOB_STACK_FRAMES_MAX 128
/* ... and says why a rank is missing for this many of them. */
#define JOB_STACK_WHY_MAX 64

/* Why one rank asked has no stacks. */
struct look_why {
	uint32_t rank;
	char text[320];
};

/*
 * A job's look, parsed and grouped as GET /v1/jobs/<job>/stacks shows it:
 * the ranks' stacks grouped (fr_stack_groups_build_python(), as fr-analyze
 * merges them: a rank that runs Python by its Python frames; with
 * `python` false, fr_stack_groups_build(), by native frames only, for a
 * central daemon older than protocol 8), after trimming each rank to
 * JOB_STACK_THREADS_MAX threads of JOB_STACK_FRAMES_MAX frames (native
 * and Python each),
 * the ranks of the world with no stacks, the ranks asked that did not
 * answer and why for the first JOB_STACK_WHY_MAX of them.
 */
struct look_job_stacks {
	const char *job;                /* the result's */
	uint32_t world_size;
	size_t asked, answered;
	bool stopping;                  /* the daemon stopped first: nothing else is set */
	uint32_t *missing;              /* ascending */
	size_t nmissing;
	uint32_t *failed;               /* ranks asked that did not answer, ascending */
	size_t nfailed;
	struct look_why *why;           /* the first of `failed` */
	size_t nwhy;
	size_t threads_cut, frames_cut;
	struct fr_stack_groups sg;      /* borrows from the traces below */
	/* The parsed dumps. */
	struct fr_trace *traces;
	size_t ntraces;
	const struct fr_trace **idx;
};
/* Returns 0 or -ENOMEM; `res` must outlive `js`. */
int look_job_stacks_build(const struct look_result *res, bool python, struct look_job_stacks *js);
void look_job_stacks_free(struct look_job_stacks *js);
/* The trace of a group's lowest rank: whose thread the group shows. */
const struct fr_trace *look_job_stacks_rep(const struct look_job_stacks *js,
					   const struct fr_stack_group *g);

struct look_metrics {
#define LOOK_METRIC_FIELD(field, name, type, help) uint64_t field;
	LOOK_METRICS(LOOK_METRIC_FIELD)
#undef LOOK_METRIC_FIELD
};
void look_metrics(struct look_metrics *out);

#endif
