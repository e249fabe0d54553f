#include "route.h"

#include <string.h>

#define JOBS_PREFIX "/v1/jobs"

static const char *const kind_names[] = {
	[ROUTE_NONE] = "none",
	[ROUTE_BAD_METHOD] = "bad_method",
#define ROUTE_NAME(K, m, s) [ROUTE_##K] = #K,
	ROUTE_KINDS(ROUTE_NAME)
#undef ROUTE_NAME
};

const char *route_kind_name(enum route_kind k)
{
	if ((unsigned)k >= sizeof(kind_names) / sizeof(kind_names[0]))
		return "?";
	return kind_names[k];
}

/* Whether `kind` is answered to POST (else to GET). */
static bool kind_is_post(enum route_kind kind)
{
	switch (kind) {
#define ROUTE_POST(K, m, s) case ROUTE_##K: return strcmp(#m, "POST") == 0;
	ROUTE_KINDS(ROUTE_POST)
#undef ROUTE_POST
	default:
		return false;
	}
}

/*
 * Cuts the next segment of `*p` (after its leading '/') into `out` (cap
 * bytes with the terminator) and advances `*p` past it. Returns false when
 * there is no segment, when it is empty or too long.
 */
static bool next_segment(const char **p, char *out, size_t cap)
{
	const char *s = *p;
	size_t n;

	if (*s != '/')
		return false;
	s++;
	n = strcspn(s, "/");
	if (n == 0 || n >= cap)
		return false;
	memcpy(out, s, n);
	out[n] = '\0';
	*p = s + n;
	return true;
}

/* A decimal rank without sign, leading zeros or overflow; below FR_RANK_UNKNOWN. */
static bool parse_rank(const char *s, uint32_t *out)
{
	uint64_t v = 0;

	if (!*s || (s[0] == '0' && s[1]))
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
		if (v >= FR_RANK_UNKNOWN)
			return false;
	}
	*out = (uint32_t)v;
	return true;
}

/* Whether the rest of a path is nothing, or a single trailing '/'. */
static bool at_end(const char *p)
{
	return p[0] == '\0' || (p[0] == '/' && p[1] == '\0');
}

static enum route_kind not_found(struct route *r, const char *why)
{
	r->error = why;
	return ROUTE_NONE;
}

/* /v1/jobs/<job>/ranks/<rank>/{stacks,trace}, from just after <job>. */
static enum route_kind route_rank(const char *p, struct route *r)
{
	char seg[16];

	if (!next_segment(&p, seg, sizeof(seg)) || !parse_rank(seg, &r->rank))
		return not_found(r, "invalid rank");
	if (!next_segment(&p, seg, sizeof(seg)) || !at_end(p))
		return not_found(r, "not found");
	if (strcmp(seg, "stacks") == 0)
		return ROUTE_RANK_STACKS;
	if (strcmp(seg, "trace") == 0)
		return ROUTE_RANK_TRACE;
	return not_found(r, "not found");
}

/* /v1/jobs/<job>/incidents[/<id>[/<file>|/ranks/<rank>]], from just after "incidents". */
static enum route_kind route_incident(const char *p, struct route *r)
{
	char seg[16];

	if (at_end(p))
		return ROUTE_JOB_INCIDENTS;
	if (!next_segment(&p, r->incident, sizeof(r->incident)) ||
	    !fr_wire_valid_name(r->incident)) {
		r->incident[0] = '\0';
		return not_found(r, "invalid incident id");
	}
	if (at_end(p))
		return ROUTE_INCIDENT;
	if (strncmp(p, "/ranks/", 7) == 0) {
		p += 6;
		if (!next_segment(&p, seg, sizeof(seg)) || !parse_rank(seg, &r->rank) || !at_end(p))
			return not_found(r, "invalid rank");
		return ROUTE_INCIDENT_RANK;
	}
	if (!next_segment(&p, r->file, sizeof(r->file)) || !fr_wire_valid_name(r->file) ||
	    !at_end(p)) {
		r->file[0] = '\0';
		return not_found(r, "invalid file name");
	}
	return ROUTE_INCIDENT_FILE;
}

/* Everything under /v1/jobs, from just after the prefix. */
static enum route_kind route_jobs(const char *p, struct route *r)
{
	char seg[16];

	if (at_end(p))
		return ROUTE_JOBS;
	if (!next_segment(&p, r->job, sizeof(r->job)) || !fr_wire_valid_name(r->job)) {
		r->job[0] = '\0';
		return not_found(r, "invalid job id");
	}
	if (at_end(p))
		return ROUTE_JOB;
	if (!next_segment(&p, seg, sizeof(seg)))
		return not_found(r, "not found");
	if (strcmp(seg, "ranks") == 0)
		return route_rank(p, r);
	if (strcmp(seg, "incidents") == 0)
		return route_incident(p, r);
	if (!at_end(p))
		return not_found(r, "not found");
	if (strcmp(seg, "analysis") == 0)
		return ROUTE_JOB_ANALYSIS;
	if (strcmp(seg, "stacks") == 0)
		return ROUTE_JOB_STACKS;
	if (strcmp(seg, "dump") == 0)
		return ROUTE_JOB_DUMP;
	return not_found(r, "not found");
}

static enum route_kind route_path(const char *path, struct route *r)
{
	size_t n = strlen(JOBS_PREFIX);

	if (strcmp(path, "/") == 0)
		return ROUTE_PAGE;
	if (strcmp(path, "/healthz") == 0)
		return ROUTE_HEALTHZ;
	if (strcmp(path, "/metrics") == 0)
		return ROUTE_METRICS;
	if (strcmp(path, "/v1/nodes") == 0 || strcmp(path, "/v1/nodes/") == 0)
		return ROUTE_NODES;
	if (strncmp(path, JOBS_PREFIX, n) == 0 && (path[n] == '\0' || path[n] == '/'))
		return route_jobs(path + n, r);
	return not_found(r, "not found");
}

void route_parse(const char *method, const char *path, struct route *r)
{
	bool post = strcmp(method, "POST") == 0;
	bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
	enum route_kind kind;

	memset(r, 0, sizeof(*r));
	r->rank = FR_RANK_UNKNOWN;
	kind = route_path(path ? path : "", r);
	if (kind == ROUTE_NONE) {
		r->kind = kind;
		return;
	}
	if (kind_is_post(kind) ? !post : !get) {
		r->allow = kind_is_post(kind) ? "POST" : "GET";
		r->kind = ROUTE_BAD_METHOD;
		return;
	}
	r->kind = kind;
}
