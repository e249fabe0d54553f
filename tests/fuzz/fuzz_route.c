/*
 * libFuzzer target for the HTTP API's router (daemon/route.c).
 *
 * The input is a request line without its version: "METHOD PATH" (the
 * method being what comes before the first space, when one comes within
 * 16 bytes; else the method is GET and the whole input is the path). The
 * path ends at the first NUL byte, as libmicrohttpd hands over C strings.
 * Every path is also routed under GET, HEAD, POST and an unknown method.
 *
 * Besides memory errors, the target checks what route.h promises for
 * every input, and aborts when it is broken:
 *   - the kind is one route.h declares, and a refusal says why (ROUTE_NONE
 *     an error, ROUTE_BAD_METHOD the method to use, with which the same
 *     path then routes to a kind that takes it);
 *   - a route is its URL: the path is the kind's template from ROUTE_KINDS
 *     ("/v1/jobs/<job>/ranks/<rank>/stacks") with the ids it returns put in
 *     the placeholders, plus at most one trailing '/'. So the job, incident
 *     and file ids appear verbatim as segments, the rank is the path's
 *     decimal segment, and a kind without a placeholder returns no id;
 *   - every id returned passes fr_wire_valid_name(), a file name has no '/'
 *     and does not start with '.', a rank is below FR_RANK_UNKNOWN exactly
 *     for the rank routes;
 *   - a path holding "//", "/./" or "/../" (or ending in "/." or "/..")
 *     reaches no route that names a job, an incident or a file;
 *   - the method only decides between a route and ROUTE_BAD_METHOD: the
 *     path alone decides whether anything is found; HEAD routes as GET;
 *   - routing is pure: the same request twice gives the same result.
 *
 * What follows the path's NUL, when anything does, is the request's
 * headers, one "Name: value" a line (Host, X-Flightrec, Authorization; the
 * others are ignored), and the request is then also put to the access
 * decision (daemon/access.c) under six policies: bound to 127.0.0.1, to
 * 0.0.0.0 or to [::1], each with and without a token, and
 * --http-allowed-hosts "node1,node1.example.org". It checks:
 *   - /healthz and /metrics are granted whatever the headers;
 *   - a refusal has a status of 401, 403 or 421 and a reason; only a 401
 *     counts as an authentication failure; a Host the policy does not
 *     allow is always 421 for every other route;
 *   - without a token nothing asks for one (no 401, no narrowed list),
 *     and only live looks without the mark and dumps are 403;
 *   - with a token, a job's data is granted only to the token or that
 *     job's key, the narrowed list only to GET /v1/jobs, and a manual dump
 *     only to the token itself;
 *   - the decision is pure: the same request twice decides the same.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../daemon/access.h"
#include "../../daemon/route.h"
#include "wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                                     \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			fprintf(stderr, "fuzz_route: %s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond);                                            \
			abort();                                                             \
		}                                                                            \
	} while (0)

/* Longer paths than libmicrohttpd's default buffer would ever hand over. */
#define PATH_CAP 8192

struct kind_info {
	enum route_kind kind;
	const char *method;
	const char *what; /* "GET /v1/jobs/<job>: ..." */
};

static const struct kind_info kinds[] = {
#define KIND_INFO(K, m, s) { ROUTE_##K, #m, s },
	ROUTE_KINDS(KIND_INFO)
#undef KIND_INFO
};

static const struct kind_info *kind_info(enum route_kind k)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (kinds[i].kind == k)
			return &kinds[i];
	return NULL;
}

/* Whether the kind's URL names `placeholder` ("<job>", "<rank>", ...). */
static bool names(const struct kind_info *ki, const char *placeholder)
{
	return strstr(ki->what, placeholder) != NULL;
}

/*
 * Writes the kind's URL template with r's ids in its placeholders into
 * out. The template is the description after the method, up to the first
 * ':' or the end.
 */
static void expected_path(const struct kind_info *ki, const struct route *r, char *out,
			  size_t cap)
{
	const char *p = strchr(ki->what, ' ');
	size_t n = 0;

	FUZZ_CHECK(p && p[1] == '/');
	for (p++; *p && *p != ':' && *p != ' ' && n + 1 < cap;) {
		const char *val = NULL;
		char rank[16];
		size_t plen = 0;

		if (strncmp(p, "<job>", 5) == 0) {
			val = r->job;
			plen = 5;
		} else if (strncmp(p, "<id>", 4) == 0) {
			val = r->incident;
			plen = 4;
		} else if (strncmp(p, "<file>", 6) == 0) {
			val = r->file;
			plen = 6;
		} else if (strncmp(p, "<rank>", 6) == 0) {
			snprintf(rank, sizeof(rank), "%u", r->rank);
			val = rank;
			plen = 6;
		}
		if (val) {
			n += (size_t)snprintf(out + n, cap - n, "%s", val);
			if (n >= cap)
				n = cap - 1;
			p += plen;
		} else {
			out[n++] = *p++;
		}
	}
	out[n] = '\0';
}

/* Whether the path holds an empty, "." or ".." segment. */
static bool has_dot_or_empty_segment(const char *path)
{
	return strstr(path, "//") || strstr(path, "/./") || strstr(path, "/../") ||
	       (strlen(path) >= 2 && strcmp(path + strlen(path) - 2, "/.") == 0) ||
	       (strlen(path) >= 3 && strcmp(path + strlen(path) - 3, "/..") == 0);
}

static bool same_route(const struct route *a, const struct route *b)
{
	return a->kind == b->kind && a->allow == b->allow && a->error == b->error &&
	       strcmp(a->job, b->job) == 0 && strcmp(a->incident, b->incident) == 0 &&
	       strcmp(a->file, b->file) == 0 && a->rank == b->rank;
}

/* The checks of a route that was found (not a refusal). */
static void check_found(const char *method, const char *path, const struct route *r)
{
	const struct kind_info *ki = kind_info(r->kind);
	char want[PATH_CAP + 256];
	size_t plen = strlen(path), wlen;

	FUZZ_CHECK(ki);
	/* HEAD is answered as GET. */
	if (strcmp(method, "HEAD") == 0)
		FUZZ_CHECK(strcmp(ki->method, "GET") == 0);
	else
		FUZZ_CHECK(strcmp(ki->method, method) == 0);

	FUZZ_CHECK(names(ki, "<job>") == (r->job[0] != '\0'));
	FUZZ_CHECK(names(ki, "<id>") == (r->incident[0] != '\0'));
	FUZZ_CHECK(names(ki, "<file>") == (r->file[0] != '\0'));
	FUZZ_CHECK(names(ki, "<rank>") == (r->rank != FR_RANK_UNKNOWN));
	FUZZ_CHECK(r->rank <= FR_RANK_UNKNOWN);
	if (r->job[0])
		FUZZ_CHECK(fr_wire_valid_name(r->job) && strlen(r->job) <= FR_JOB_MAX);
	if (r->incident[0])
		FUZZ_CHECK(fr_wire_valid_name(r->incident) &&
			   strlen(r->incident) <= FR_INCIDENT_MAX);
	if (r->file[0])
		FUZZ_CHECK(fr_wire_valid_name(r->file) && !strchr(r->file, '/') &&
			   r->file[0] != '.' && strlen(r->file) <= ROUTE_FILE_MAX);
	if (r->job[0] || r->incident[0] || r->file[0])
		FUZZ_CHECK(!has_dot_or_empty_segment(path));

	/* The path is the template with these ids, and one '/' at most after it. */
	expected_path(ki, r, want, sizeof(want));
	wlen = strlen(want);
	if (!(plen == wlen || (plen == wlen + 1 && path[wlen] == '/' && want[wlen - 1] != '/')) ||
	    strncmp(path, want, wlen) != 0) {
		fprintf(stderr, "fuzz_route: %s %s routed to %s, whose URL would be %s\n", method,
			path, route_kind_name(r->kind), want);
		abort();
	}
}

/* Routes and checks one request; returns what it routed to. */
static struct route check_request(const char *method, const char *path)
{
	struct route r, again;

	route_parse(method, path, &r);
	route_parse(method, path, &again);
	FUZZ_CHECK(same_route(&r, &again));
	FUZZ_CHECK(strcmp(route_kind_name(r.kind), "?") != 0);

	switch (r.kind) {
	case ROUTE_NONE:
		FUZZ_CHECK(r.error && r.error[0] && !r.allow);
		break;
	case ROUTE_BAD_METHOD: {
		struct route ok;

		FUZZ_CHECK(r.allow && !r.error);
		FUZZ_CHECK(strcmp(r.allow, "GET") == 0 || strcmp(r.allow, "POST") == 0);
		FUZZ_CHECK(strcmp(r.allow, method) != 0);
		/* The method it names is one the path takes, to the same ids. */
		route_parse(r.allow, path, &ok);
		FUZZ_CHECK(ok.kind != ROUTE_NONE && ok.kind != ROUTE_BAD_METHOD);
		FUZZ_CHECK(strcmp(ok.job, r.job) == 0 && strcmp(ok.incident, r.incident) == 0 &&
			   strcmp(ok.file, r.file) == 0 && ok.rank == r.rank);
		check_found(r.allow, path, &ok);
		break;
	}
	default:
		FUZZ_CHECK(!r.allow && !r.error);
		check_found(method, path, &r);
		break;
	}
	return r;
}

#define FUZZ_TOKEN "fuzz-route-token-0123456789"

/* The value of header `name` in `headers` ("Name: value" lines), or NULL. */
static char *header_value(const char *headers, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = headers; p && *p;) {
		const char *end = strchr(p, '\n');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len > n && strncasecmp(p, name, n) == 0 && p[n] == ':') {
			const char *v = p + n + 1;
			char *out;

			while (*v == ' ')
				v++;
			len -= (size_t)(v - p);
			out = malloc(len + 1);
			if (!out)
				abort();
			memcpy(out, v, len);
			out[len] = '\0';
			return out;
		}
		p = end ? end + 1 : NULL;
	}
	return NULL;
}

/* Whether `auth` is "Bearer " and the token, as access.c reads it. */
static bool is_token(const char *auth)
{
	if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
		return false;
	auth += 7;
	while (*auth == ' ')
		auth++;
	return strcmp(auth, FUZZ_TOKEN) == 0;
}

/* Puts `r` with `headers` to every policy and checks what access.h promises. */
static void check_access(const struct route *r, const char *headers)
{
	struct sockaddr_in lo = { .sin_family = AF_INET }, any = { .sin_family = AF_INET };
	struct sockaddr_in6 lo6 = { .sin6_family = AF_INET6 };
	const struct sockaddr *bound[] = { (const struct sockaddr *)&lo,
					   (const struct sockaddr *)&any,
					   (const struct sockaddr *)&lo6 };
	struct fr_token token = { .len = strlen(FUZZ_TOKEN) }, none = { 0 };
	struct access_request req = { .route = r };
	char *host = header_value(headers, "Host");
	char *mark = header_value(headers, ACCESS_MARK_HEADER);
	char *auth = header_value(headers, "Authorization");

	memcpy(token.bytes, FUZZ_TOKEN, token.len);
	inet_pton(AF_INET, "127.0.0.1", &lo.sin_addr);
	lo6.sin6_addr = in6addr_loopback;
	req.host = host;
	req.mark = mark;
	req.authorization = auth;
	for (size_t b = 0; b < 3; b++) {
		for (int with_token = 0; with_token < 2; with_token++) {
			struct access_policy pol = { .bound = bound[b],
						     .allowed_hosts = "node1,node1.example.org",
						     .token = with_token ? &token : &none };
			struct access_decision d, again;
			bool health = r->kind == ROUTE_HEALTHZ || r->kind == ROUTE_METRICS;
			bool host_ok = !host || access_host_allowed(host, &pol);
			bool job_data = r->kind == ROUTE_JOB || r->kind == ROUTE_JOB_ANALYSIS ||
					r->kind == ROUTE_JOB_INCIDENTS || r->kind == ROUTE_INCIDENT ||
					r->kind == ROUTE_INCIDENT_FILE || r->kind == ROUTE_INCIDENT_RANK ||
					r->kind == ROUTE_JOB_STACKS ||
					r->kind == ROUTE_RANK_STACKS || r->kind == ROUTE_RANK_TRACE;

			access_decide(&req, &pol, &d);
			access_decide(&req, &pol, &again);
			FUZZ_CHECK(d.grant == again.grant && d.status == again.status &&
				   d.auth_failure == again.auth_failure);
			if (health) {
				FUZZ_CHECK(d.grant == ACCESS_ALL);
				continue;
			}
			if (d.grant == ACCESS_DENIED) {
				FUZZ_CHECK(d.status == 401 || d.status == 403 || d.status == 421);
				FUZZ_CHECK(d.error && d.error[0]);
			}
			FUZZ_CHECK(d.auth_failure == (d.grant == ACCESS_DENIED && d.status == 401));
			if (!host_ok) {
				FUZZ_CHECK(d.grant == ACCESS_DENIED && d.status == 421);
				continue;
			}
			FUZZ_CHECK(d.status != 421);
			if (!with_token) {
				FUZZ_CHECK(d.grant != ACCESS_OWN_JOB && d.status != 401);
				if (d.grant == ACCESS_DENIED)
					FUZZ_CHECK(r->kind == ROUTE_JOB_DUMP ||
						   ((r->kind == ROUTE_JOB_STACKS ||
						     r->kind == ROUTE_RANK_STACKS ||
						     r->kind == ROUTE_RANK_TRACE) &&
						    !(mark && mark[0])));
				continue;
			}
			if (d.grant == ACCESS_OWN_JOB)
				FUZZ_CHECK(r->kind == ROUTE_JOBS && auth && !is_token(auth));
			if (r->kind == ROUTE_JOB_DUMP)
				FUZZ_CHECK((d.grant == ACCESS_ALL) == is_token(auth));
			else if (job_data)
				FUZZ_CHECK((d.grant == ACCESS_ALL) ==
					   (is_token(auth) || access_job_key_ok(auth, &token, r->job)));
		}
	}
	free(host);
	free(mark);
	free(auth);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const methods[] = { "GET", "HEAD", "POST", "DELETE" };
	char method[17] = "GET";
	char *path;
	const uint8_t *sp;
	size_t n;
	struct route r[sizeof(methods) / sizeof(methods[0])], own, head;

	if (size > PATH_CAP)
		return 0;
	sp = memchr(data, ' ', size < sizeof(method) ? size : sizeof(method));
	if (sp) {
		n = (size_t)(sp - data);
		memcpy(method, data, n);
		method[n] = '\0';
		data = sp + 1;
		size -= n + 1;
	}
	/* Exactly as long as the path, so a read past its end is caught. */
	n = strnlen((const char *)data, size);
	path = malloc(n + 1);
	if (!path)
		return 0;
	memcpy(path, data, n);
	path[n] = '\0';

	own = check_request(method, path);
	if (n < size) {
		/* The headers: what follows the path's NUL, as a C string. */
		size_t hlen = size - n - 1;
		char *headers = malloc(hlen + 1);

		if (!headers)
			abort();
		memcpy(headers, data + n + 1, hlen);
		headers[hlen] = '\0';
		check_access(&own, headers);
		free(headers);
	}
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		r[i] = check_request(methods[i], path);
		/* Whether anything is there depends on the path alone. */
		FUZZ_CHECK((r[i].kind == ROUTE_NONE) == (own.kind == ROUTE_NONE));
	}
	head = r[1];
	FUZZ_CHECK(same_route(&r[0], &head));
	free(path);
	return 0;
}
