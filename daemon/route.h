/*
 * The HTTP API's routing: a method and a URL path in, what the request
 * asks for out, with every id it names already checked. Pure (no state, no
 * I/O), so that a fuzzer and the unit tests call it directly; http.c
 * answers each kind.
 *
 * Ids reach file paths and the registry only through a route: a job or an
 * incident id passed fr_wire_valid_name(), a file name passed it too (so it
 * has no '/' and does not start with '.'), a rank is a plain decimal number
 * below FR_RANK_UNKNOWN.
 */
#ifndef FR_DAEMON_ROUTE_H
#define FR_DAEMON_ROUTE_H

#include <stdbool.h>
#include <stdint.h>

#include "../protocol/wire.h"

/*
 * X(KIND, method, "what it is") -- every answerable request. ROUTE_NONE
 * and ROUTE_BAD_METHOD are the refusals.
 */
#define ROUTE_KINDS(X)                                                       \
	X(PAGE, GET, "GET /: the web page")                                   \
	X(HEALTHZ, GET, "GET /healthz")                                       \
	X(METRICS, GET, "GET /metrics")                                       \
	X(JOBS, GET, "GET /v1/jobs")                                          \
	X(NODES, GET, "GET /v1/nodes")                                        \
	X(JOB, GET, "GET /v1/jobs/<job>")                                     \
	X(JOB_ANALYSIS, GET, "GET /v1/jobs/<job>/analysis")                   \
	X(JOB_STACKS, GET, "GET /v1/jobs/<job>/stacks")                       \
	X(JOB_INCIDENTS, GET, "GET /v1/jobs/<job>/incidents")                 \
	X(INCIDENT, GET, "GET /v1/jobs/<job>/incidents/<id>")                 \
	X(INCIDENT_FILE, GET, "GET /v1/jobs/<job>/incidents/<id>/<file>")     \
	X(INCIDENT_RANK, GET, "GET /v1/jobs/<job>/incidents/<id>/ranks/<rank>") \
	X(RANK_STACKS, GET, "GET /v1/jobs/<job>/ranks/<rank>/stacks")         \
	X(RANK_TRACE, GET, "GET /v1/jobs/<job>/ranks/<rank>/trace")           \
	X(JOB_DUMP, POST, "POST /v1/jobs/<job>/dump")

enum route_kind {
	ROUTE_NONE,       /* 404: `error` says what was not found */
	ROUTE_BAD_METHOD, /* 405: `allow` names the method the URL takes */
#define ROUTE_ENUM(K, m, s) ROUTE_##K,
	ROUTE_KINDS(ROUTE_ENUM)
#undef ROUTE_ENUM
};

/* Longest file name inside an incident directory that a route accepts. */
#define ROUTE_FILE_MAX 64

struct route {
	enum route_kind kind;
	const char *allow;                 /* ROUTE_BAD_METHOD: "GET" or "POST" */
	const char *error;                 /* ROUTE_NONE: for the 404's body */
	char job[FR_JOB_MAX + 1];          /* "" unless the URL names a job */
	char incident[FR_INCIDENT_MAX + 1];
	char file[ROUTE_FILE_MAX + 1];
	uint32_t rank;                     /* FR_RANK_UNKNOWN unless the URL names one */
};

/*
 * Routes `method` ("GET", "POST", anything else) and `path` (the URL
 * without its query string, as libmicrohttpd gives it). Always fills `r`.
 * A path may end in one '/', nothing else is normalised: "//", "." and ".."
 * segments and percent signs route nowhere. HEAD is answered as GET.
 */
void route_parse(const char *method, const char *path, struct route *r);

/* "PAGE", "JOB_STACKS", ...: the kind's name, for logs and tests. */
const char *route_kind_name(enum route_kind k);

#endif
