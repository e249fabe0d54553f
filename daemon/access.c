#include "access.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>

#include "../protocol/sha256.h"

/* What a route asks of its caller. */
enum access_need {
	NEED_NOTHING,   /* /healthz, /metrics: any Host */
	NEED_HOST,      /* the page, a 404, a 405: a Host naming us */
	NEED_LIST,      /* GET /v1/jobs: the token, or a job key (the list narrows) */
	NEED_CLUSTER,   /* GET /v1/nodes: the token, when there is one (no job key) */
	NEED_JOB,       /* a job's data: the token or the job's key */
	NEED_LOOK,      /* a live look: as NEED_JOB, or the mark without a token */
	NEED_TOKEN,     /* a manual dump: the daemon's token itself */
};

static enum access_need route_need(enum route_kind kind)
{
	switch (kind) {
	case ROUTE_HEALTHZ:
	case ROUTE_METRICS:
		return NEED_NOTHING;
	case ROUTE_JOBS:
		return NEED_LIST;
	case ROUTE_NODES:
		return NEED_CLUSTER;
	case ROUTE_JOB:
	case ROUTE_JOB_ANALYSIS:
	case ROUTE_JOB_INCIDENTS:
	case ROUTE_INCIDENT:
	case ROUTE_INCIDENT_FILE:
	case ROUTE_INCIDENT_RANK:
		return NEED_JOB;
	case ROUTE_JOB_STACKS:
	case ROUTE_RANK_STACKS:
	case ROUTE_RANK_TRACE:
		return NEED_LOOK;
	case ROUTE_JOB_DUMP:
		return NEED_TOKEN;
	default:
		return NEED_HOST;
	}
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/*
 * Cuts the name out of a Host value (the port, a v6 literal's brackets
 * gone) into `name`. Returns false for a value that is not a host and
 * port: empty, too long, a port that is not digits, stray colons.
 */
static bool host_name(const char *host, char name[ACCESS_HOST_MAX + 1], bool *bracketed)
{
	const char *end;
	const char *port = NULL;
	size_t n;

	*bracketed = host[0] == '[';
	if (*bracketed) {
		end = strchr(host, ']');
		if (!end)
			return false;
		host++;
		if (end[1] == ':')
			port = end + 2;
		else if (end[1] != '\0')
			return false;
	} else {
		end = strchr(host, ':');
		if (end)
			port = end + 1;
		else
			end = host + strlen(host);
	}
	if (port && (port[0] == '\0' || strspn(port, "0123456789") != strlen(port) ||
		     strlen(port) > 5))
		return false;
	n = (size_t)(end - host);
	if (n == 0 || n > ACCESS_HOST_MAX)
		return false;
	memcpy(name, host, n);
	name[n] = '\0';
	return true;
}

/*
 * Whether address literal `name` names the bound address: any literal when
 * that is a wildcard (the daemon answers on every address of the node; a
 * literal is never a name a rebinding attacker can point at us).
 */
static bool literal_allowed(const char *name, bool bracketed, const struct sockaddr *bound,
			    bool *is_literal)
{
	const struct sockaddr_in *b4 = (const struct sockaddr_in *)bound;
	const struct sockaddr_in6 *b6 = (const struct sockaddr_in6 *)bound;
	bool wildcard = bound && ((bound->sa_family == AF_INET &&
				   b4->sin_addr.s_addr == htonl(INADDR_ANY)) ||
				  (bound->sa_family == AF_INET6 &&
				   memcmp(&b6->sin6_addr, &in6addr_any, sizeof(in6addr_any)) == 0));
	struct in_addr a4;
	struct in6_addr a6;

	*is_literal = true;
	if (!bracketed && inet_pton(AF_INET, name, &a4) == 1)
		return wildcard || (bound && bound->sa_family == AF_INET &&
				    b4->sin_addr.s_addr == a4.s_addr);
	if (bracketed && inet_pton(AF_INET6, name, &a6) == 1)
		return wildcard || (bound && bound->sa_family == AF_INET6 &&
				    memcmp(&b6->sin6_addr, &a6, sizeof(a6)) == 0);
	*is_literal = false;
	return false;
}

/* Whether `name` is one of the comma-separated names of `list`. */
static bool listed(const char *name, const char *list)
{
	size_t n = strlen(name);

	for (const char *p = list; p && *p;) {
		const char *end;
		const char *last;

		while (is_blank(*p) || *p == ',')
			p++;
		end = p + strcspn(p, ",");
		last = end;
		while (last > p && is_blank(last[-1]))
			last--;
		if ((size_t)(last - p) == n && n && strncasecmp(p, name, n) == 0)
			return true;
		p = end;
	}
	return false;
}

bool access_host_allowed(const char *host, const struct access_policy *pol)
{
	char name[ACCESS_HOST_MAX + 1];
	bool bracketed;
	bool literal;

	if (!host || !host_name(host, name, &bracketed))
		return false;
	if (literal_allowed(name, bracketed, pol->bound, &literal))
		return true;
	if (literal || bracketed)
		return false;
	return strcasecmp(name, "localhost") == 0 || listed(name, pol->allowed_hosts);
}

/* The credentials of "Bearer <value>", or NULL for another scheme or none. */
static const char *bearer_value(const char *authorization)
{
	const char *v = authorization;

	if (!v || strncasecmp(v, "Bearer ", 7) != 0)
		return NULL;
	v += 7;
	while (*v == ' ')
		v++;
	return v;
}

bool access_job_key_parse(const char *authorization, uint8_t key[FR_WIRE_JOB_KEY_SIZE])
{
	const char *v = bearer_value(authorization);
	const char *why;

	return v && fr_wire_job_key_parse(v, strlen(v), key, &why) == 0;
}

bool access_job_key_ok(const char *authorization, const struct fr_token *token,
		       const char *job)
{
	uint8_t want[FR_WIRE_JOB_KEY_SIZE];
	uint8_t got[FR_WIRE_JOB_KEY_SIZE];
	bool ok;

	if (!token->len || !job[0])
		return false;
	if (!access_job_key_parse(authorization, got))
		return false;
	ok = fr_wire_job_key(token, job, want) == 0 && fr_ct_equal(want, got, sizeof(want));
	explicit_bzero(want, sizeof(want));
	explicit_bzero(got, sizeof(got));
	return ok;
}

static bool token_ok(const char *authorization, const struct fr_token *token)
{
	const char *v = bearer_value(authorization);

	return v && fr_wire_token_equal(token, v, strlen(v));
}

static void deny(struct access_decision *out, unsigned status, const char *error)
{
	out->grant = ACCESS_DENIED;
	out->status = status;
	out->error = error;
}

void access_decide(const struct access_request *req, const struct access_policy *pol,
		   struct access_decision *out)
{
	enum access_need need = route_need(req->route->kind);
	bool has_token = pol->token && pol->token->len > 0;
	bool gave = bearer_value(req->authorization) != NULL;

	memset(out, 0, sizeof(*out));
	out->grant = ACCESS_ALL;
	if (need == NEED_NOTHING)
		return;
	/* HTTP/1.0 may go without a Host; a browser never does. */
	if (req->host && !access_host_allowed(req->host, pol)) {
		deny(out, 421, "the Host header does not name this daemon: ask by its address or localhost, or start flightrecd with --http-allowed-hosts NAME");
		return;
	}
	switch (need) {
	case NEED_TOKEN:
		if (!has_token)
			deny(out, 403, "no token configured: start flightrecd with --token-file to allow manual dumps");
		else if (!token_ok(req->authorization, pol->token))
			deny(out, 401, "a valid bearer token is required");
		break;
	case NEED_CLUSTER:
		if (has_token && !token_ok(req->authorization, pol->token))
			deny(out, 401, "a valid bearer token is required: the daemon's token");
		break;
	case NEED_LIST:
		if (!has_token || token_ok(req->authorization, pol->token))
			break;
		if (gave) {
			/* http.c lists the jobs whose key this is, and says 401
			 * when there is none. */
			out->grant = ACCESS_OWN_JOB;
			return;
		}
		deny(out, 401, "a valid bearer token is required: the daemon's token or a job's key");
		break;
	case NEED_JOB:
	case NEED_LOOK:
		if (has_token) {
			if (!token_ok(req->authorization, pol->token) &&
			    !access_job_key_ok(req->authorization, pol->token, req->route->job))
				deny(out, 401, "a valid bearer token is required: the daemon's token or the job's key");
		} else if (need == NEED_LOOK && !(req->mark && req->mark[0])) {
			deny(out, 403, "a live look interrupts the job's ranks: send the header \"X-Flightrec: 1\" (a page of another site cannot)");
		}
		break;
	default:
		break;
	}
	out->auth_failure = out->grant == ACCESS_DENIED && out->status == 401;
}

const char *access_allowed_hosts_check(const char *list)
{
	size_t names = 0;

	if (strlen(list) > ACCESS_ALLOWED_HOSTS_MAX)
		return "longer than 4096 bytes";
	for (const char *p = list; *p;) {
		const char *end;
		const char *last;
		size_t n;

		while (is_blank(*p))
			p++;
		end = p + strcspn(p, ",");
		last = end;
		while (last > p && is_blank(last[-1]))
			last--;
		n = (size_t)(last - p);
		if (n == 0)
			return "an empty name (two commas in a row, or one at an end)";
		if (n > ACCESS_HOST_MAX)
			return "a name longer than 253 bytes";
		if (p[0] == '.' || p[0] == '-')
			return "a name starting with '.' or '-'";
		for (const char *c = p; c < last; c++)
			if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			      (*c >= '0' && *c <= '9') || *c == '-' || *c == '.'))
				return "a character other than a letter, a digit, '-' or '.' in a name";
		names++;
		if (*end == '\0')
			break;
		p = end + 1;
		if (*p == '\0')
			return "an empty name (two commas in a row, or one at an end)";
	}
	return names ? NULL : "no name";
}
