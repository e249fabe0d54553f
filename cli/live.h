/*
 * fr-analyze --live: the live verdict of a job from a running flightrecd,
 * fetched over plain HTTP (GET /v1/jobs/<job>/analysis) with a small
 * HTTP/1.0 client, so that fr-analyze needs no library beyond the C one.
 */
#ifndef FR_CLI_LIVE_H
#define FR_CLI_LIVE_H

#include <stdbool.h>
#include <stdio.h>

#include "../protocol/wire.h"

/* The port a URL without one names: flightrecd's default --http port. */
#define LIVE_DEFAULT_PORT "7421"
/* Connecting, asking and reading the whole answer take at most this long. */
#define LIVE_TIMEOUT_MS 10000
/* The largest answer read (headers and body): a report is far smaller. */
#define LIVE_REPLY_MAX (64u << 20)

/* A daemon and a job, as a --live URL names them. */
struct live_target {
	char host[256];             /* a name or an address, without brackets */
	char port[6];
	bool ipv6;                  /* written in brackets */
	char job[FR_JOB_MAX + 1];
};

/*
 * Reads "http://HOST[:PORT]/JOB": HOST a name, an IPv4 address or an IPv6
 * address in brackets; the path "/JOB" or "/v1/jobs/JOB", either with one
 * trailing '/'. Returns 0, or -EINVAL with the reason in `err`.
 */
int live_parse_url(const char *url, struct live_target *t, char *err, size_t cap);

/*
 * Asks the daemon `url` names for its job's live verdict, as JSON or as
 * the report for a person, and writes the answer's body to `out` exactly.
 * Returns 0 when the verdict is "ok", 1 when it names a problem, or a
 * negative errno after saying why on stderr (prefixed with `prog`).
 */
int live_analyze(const char *prog, const char *url, bool json, FILE *out);

#endif
