/*
 * Who may ask the HTTP API what: the decision for one routed request, from
 * its Host, its headers and the daemon's token. Pure (no state, no I/O, no
 * libmicrohttpd), so that the unit tests and the route fuzzer call it
 * directly; http.c asks it before any handler runs.
 *
 * The rules, in order:
 *   - /healthz and /metrics are open to anyone, whatever the Host: an
 *     orchestrator or a scraper may name the node any way it likes, and
 *     neither says anything about a job.
 *   - Every other request needs a Host that names this daemon: "localhost",
 *     an address literal the HTTP API is bound to (any address literal when
 *     it is bound to a wildcard address), or a name of --http-allowed-hosts.
 *     A name anybody could point at us (DNS rebinding) reads nothing.
 *   - The web page itself is then open: it holds no data.
 *   - With a token configured, a job's data (its state, verdict,
 *     incidents, files and live looks) needs "Authorization: Bearer" with
 *     the daemon's token or that job's key (flightrecd --job-key JOB, in
 *     hex); the list of jobs shows a key's holder its own job only; a
 *     manual dump needs the daemon's token itself.
 *   - Without a token, a live look (stacks, traces), which interrupts
 *     every thread of the ranks asked, needs the "X-Flightrec" header: a
 *     page of another site cannot send a header of its own without the
 *     daemon's consent (CORS), which it never gives. A manual dump is then
 *     refused altogether (no token, no dumps), as it always was.
 */
#ifndef FR_DAEMON_ACCESS_H
#define FR_DAEMON_ACCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "../protocol/auth.h"
#include "route.h"

/* The header a live look needs without a token (any non-empty value). */
#define ACCESS_MARK_HEADER "X-Flightrec"

/* Longest --http-allowed-hosts value; a name is at most 253 bytes. */
#define ACCESS_ALLOWED_HOSTS_MAX 4096
#define ACCESS_HOST_MAX 253

/* What a request shows. NULL strings: the header is absent. */
struct access_request {
	const struct route *route;
	const char *host;               /* the Host header */
	const char *mark;               /* the X-Flightrec header */
	const char *authorization;      /* the Authorization header */
};

/* Where the daemon stands. */
struct access_policy {
	const struct sockaddr *bound;   /* the HTTP API's address */
	const char *allowed_hosts;      /* --http-allowed-hosts, NULL: none */
	const struct fr_token *token;   /* len 0: no token configured */
};

enum access_grant {
	ACCESS_DENIED,      /* answer `status` with `error` */
	ACCESS_ALL,         /* everything the route names */
	ACCESS_OWN_JOB,     /* GET /v1/jobs with a job key: list the jobs it opens only */
};

struct access_decision {
	enum access_grant grant;
	unsigned status;                /* ACCESS_DENIED: 401, 403 or 421 */
	const char *error;              /* ACCESS_DENIED: for the body */
	bool auth_failure;              /* 401: the bearer token was missing or wrong */
};

/* Decides one request; always fills `out`. */
void access_decide(const struct access_request *req, const struct access_policy *pol,
		   struct access_decision *out);

/*
 * Whether `host` (a Host header's value, port included or not) names this
 * daemon under `pol`: see the rules above. Case does not matter.
 */
bool access_host_allowed(const char *host, const struct access_policy *pol);

/*
 * Whether `authorization` is "Bearer " followed by a job key in hex (either
 * case); if so, the key in `key`. Parsed once per request, so that a
 * caller comparing it with many jobs' keys parses nothing more.
 */
bool access_job_key_parse(const char *authorization, uint8_t key[FR_WIRE_JOB_KEY_SIZE]);

/*
 * Whether `authorization` is "Bearer " followed by the key of job `job`
 * made from `token`, in hex (either case). False without a token.
 */
bool access_job_key_ok(const char *authorization, const struct fr_token *token,
		       const char *job);

/*
 * Checks a --http-allowed-hosts value: names separated by commas, each 1
 * to 253 letters, digits, '-' and '.', not starting with '.' or '-'.
 * Returns NULL when valid, else what is wrong with it.
 */
const char *access_allowed_hosts_check(const char *list);

#endif
