/*
 * fr-analyze --live: one HTTP/1.0 request to flightrecd for a job's live
 * verdict. The daemon renders the verdict with the same code fr-analyze
 * uses on a directory, so the body is printed as it comes, and the verdict
 * is read from the X-Flightrec-Verdict header rather than from the body.
 *
 * Plain sockets: non-blocking, every step bounded by one deadline
 * (LIVE_TIMEOUT_MS for connecting, asking and reading), the answer bounded
 * by LIVE_REPLY_MAX. HTTP/1.0 with "Connection: close" means the body ends
 * where the connection does, with no chunked encoding to undo.
 *
 * A daemon started with --token-file wants a bearer token for a job's
 * data: the job's key from FLIGHTREC_JOB_KEY_FILE, else the token from
 * FLIGHTREC_TOKEN_FILE, read as the agent reads them.
 */
#include "live.h"

#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <jansson.h>

#include "../include/flightrec.h"
#include "../protocol/auth.h"

#define VERDICT_HEADER "X-Flightrec-Verdict"
#define JOBS_PREFIX "/v1/jobs/"

/* The answer, as far as fr-analyze needs it. */
struct live_reply {
	char *buf;                  /* owned: the whole answer, NUL-terminated */
	size_t len;
	int status;                 /* the HTTP status */
	const char *body;           /* into buf */
	size_t body_len;
	char verdict[32];           /* "" when the header is absent */
};

static int fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t cap, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, cap, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* A host name's characters; anything else is a typo or an attack. */
static bool host_char(char c)
{
	return isalnum((unsigned char)c) || c == '.' || c == '-' || c == '_';
}

/* Reads the port, 1 to 65535 in decimal, from s[0..n). */
static bool parse_port(const char *s, size_t n, char *out)
{
	unsigned v = 0;

	if (n == 0 || n > 5)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return false;
	snprintf(out, 6, "%u", v);
	return true;
}

/* Reads "HOST[:PORT]" from s[0..n). */
static int parse_authority(const char *s, size_t n, struct live_target *t, char *err,
			   size_t cap)
{
	const char *port = NULL;
	size_t hlen;

	if (memchr(s, '@', n))
		return fail(err, cap, "a user name in the URL is not supported");
	if (n && s[0] == '[') {
		const char *end = memchr(s, ']', n);
		unsigned char addr[sizeof(struct in6_addr)];

		if (!end)
			return fail(err, cap, "an IPv6 address needs its closing ']'");
		hlen = (size_t)(end - s - 1);
		if (hlen == 0 || hlen >= sizeof(t->host))
			return fail(err, cap, "an empty or overlong IPv6 address");
		memcpy(t->host, s + 1, hlen);
		t->host[hlen] = '\0';
		if (inet_pton(AF_INET6, t->host, addr) != 1)
			return fail(err, cap, "'%s' is not an IPv6 address", t->host);
		t->ipv6 = true;
		if (end + 1 < s + n) {
			if (end[1] != ':')
				return fail(err, cap, "expected ':PORT' after ']'");
			port = end + 2;
		}
	} else {
		const char *colon = memchr(s, ':', n);

		hlen = colon ? (size_t)(colon - s) : n;
		if (hlen == 0)
			return fail(err, cap, "the URL names no host");
		if (hlen >= sizeof(t->host))
			return fail(err, cap, "the host name is too long");
		for (size_t i = 0; i < hlen; i++)
			if (!host_char(s[i]))
				return fail(err, cap, "the host name has a '%c'", s[i]);
		memcpy(t->host, s, hlen);
		t->host[hlen] = '\0';
		if (colon)
			port = colon + 1;
	}
	if (!port) {
		snprintf(t->port, sizeof(t->port), "%s", LIVE_DEFAULT_PORT);
		return 0;
	}
	if (!parse_port(port, (size_t)(s + n - port), t->port))
		return fail(err, cap, "'%.*s' is not a port (1 to 65535)", (int)(s + n - port),
			    port);
	return 0;
}

int live_parse_url(const char *url, struct live_target *t, char *err, size_t cap)
{
	const char *p, *path;
	size_t n;
	int rc;

	memset(t, 0, sizeof(*t));
	if (strncasecmp(url, "https://", 8) == 0)
		return fail(err, cap, "https is not supported: flightrecd serves plain HTTP");
	if (strncasecmp(url, "http://", 7) != 0)
		return fail(err, cap, "the URL must start with http://");
	p = url + 7;
	path = p + strcspn(p, "/?#");
	rc = parse_authority(p, (size_t)(path - p), t, err, cap);
	if (rc)
		return rc;
	if (*path == '?' || *path == '#' || strpbrk(path, "?#"))
		return fail(err, cap, "a query or a fragment in the URL is not supported");
	/* "/v1/jobs/JOB", as the API names the job, is the same URL. */
	if (strncmp(path, JOBS_PREFIX, strlen(JOBS_PREFIX)) == 0)
		path += strlen(JOBS_PREFIX) - 1;
	if (path[0] != '/' || path[1] == '\0')
		return fail(err, cap, "the URL names no job (http://HOST:PORT/JOB)");
	path++;
	n = strcspn(path, "/");
	if (path[n] && path[n + 1])
		return fail(err, cap, "the URL's path is more than a job id");
	if (n > FR_JOB_MAX)
		return fail(err, cap, "the job id is longer than %d characters", FR_JOB_MAX);
	memcpy(t->job, path, n);
	t->job[n] = '\0';
	if (!fr_wire_valid_name(t->job))
		return fail(err, cap, "'%s' is not a job id (letters, digits, '.', '_', '-', "
			    "not starting with '.')", t->job);
	return 0;
}

/* "HOST:PORT", "[ADDR]:PORT": how messages name the daemon. */
static void target_text(const struct live_target *t, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s%s%s:%s", t->ipv6 ? "[" : "", t->host, t->ipv6 ? "]" : "", t->port);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Waits until `fd` is ready for `events` or the deadline passes. Returns
 * 0, or -ETIMEDOUT, or a negative errno.
 */
static int wait_fd(int fd, short events, int64_t deadline)
{
	struct pollfd pfd = { .fd = fd, .events = events };

	for (;;) {
		int64_t left = deadline - now_ms();
		int n;

		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, (int)left);
		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/* Connects to one address by the deadline: the fd, or a negative errno. */
static int connect_one(const struct addrinfo *ai, int64_t deadline)
{
	socklen_t len = sizeof(int);
	int fd, err = 0;

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    ai->ai_protocol);
	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return fd;
	if (errno != EINPROGRESS) {
		err = -errno;
		goto out_close;
	}
	err = wait_fd(fd, POLLOUT, deadline);
	if (err)
		goto out_close;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err == 0)
		return fd;
	err = -err;
out_close:
	close(fd);
	return err;
}

/* Connects to the first of the host's addresses that answers. */
static int connect_target(const struct live_target *t, int64_t deadline, char *err, size_t cap)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res, *ai;
	char where[300];
	int fd = -ECONNREFUSED;
	int rc;

	target_text(t, where, sizeof(where));
	rc = getaddrinfo(t->host, t->port, &hints, &res);
	if (rc) {
		snprintf(err, cap, "cannot connect to the daemon at %s: %s", where,
			 rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = connect_one(ai, deadline);
		if (fd >= 0 || fd == -ETIMEDOUT)
			break;
	}
	freeaddrinfo(res);
	if (fd == -ETIMEDOUT)
		snprintf(err, cap, "cannot connect to the daemon at %s: no answer within %d s",
			 where, LIVE_TIMEOUT_MS / 1000);
	else if (fd < 0)
		snprintf(err, cap, "cannot connect to the daemon at %s: %s", where, strerror(-fd));
	return fd;
}

static int send_all(int fd, const char *buf, size_t len, int64_t deadline)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		n = wait_fd(fd, POLLOUT, deadline);
		if (n)
			return (int)n;
	}
	return 0;
}

/* Reads until the daemon closes the connection, into r->buf. */
static int recv_all(int fd, struct live_reply *r, int64_t deadline)
{
	size_t cap = 0;

	for (;;) {
		ssize_t n;
		int rc;

		if (r->len + 1 >= cap) {
			size_t ncap = cap ? cap * 2 : 16384;
			char *b;

			if (ncap > LIVE_REPLY_MAX + 1)
				ncap = LIVE_REPLY_MAX + 1;
			if (r->len + 1 >= ncap)
				return -EFBIG;
			b = realloc(r->buf, ncap);
			if (!b)
				return -ENOMEM;
			r->buf = b;
			cap = ncap;
		}
		n = recv(fd, r->buf + r->len, cap - 1 - r->len, 0);
		if (n > 0) {
			r->len += (size_t)n;
			continue;
		}
		if (n == 0)
			break;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		rc = wait_fd(fd, POLLIN, deadline);
		if (rc)
			return rc;
	}
	if (!r->buf)
		return -EPROTO;
	r->buf[r->len] = '\0';
	return 0;
}

/* Whether header line `line` (of `n` bytes) is `name`; sets its value. */
static bool header_is(const char *line, size_t n, const char *name, const char **value,
		      size_t *vlen)
{
	size_t k = strlen(name);

	if (n <= k || line[k] != ':' || strncasecmp(line, name, k) != 0)
		return false;
	line += k + 1;
	n -= k + 1;
	while (n && (*line == ' ' || *line == '\t')) {
		line++;
		n--;
	}
	while (n && (line[n - 1] == ' ' || line[n - 1] == '\t'))
		n--;
	*value = line;
	*vlen = n;
	return true;
}

/* Splits r->buf into the status, the headers fr-analyze reads and the body. */
static int parse_reply(struct live_reply *r)
{
	const char *end = strstr(r->buf, "\r\n\r\n");
	const char *line, *value;
	bool has_length = false;
	uint64_t length = 0;
	size_t vlen;
	int minor;

	if (!end || sscanf(r->buf, "HTTP/1.%d %3d", &minor, &r->status) != 2 ||
	    r->status < 100 || r->status > 599)
		return -EPROTO;
	r->body = end + 4;
	r->body_len = r->len - (size_t)(r->body - r->buf);
	line = strstr(r->buf, "\r\n") + 2;
	while (line < end + 2) {
		const char *eol = strstr(line, "\r\n");
		size_t n = (size_t)(eol - line);

		if (header_is(line, n, VERDICT_HEADER, &value, &vlen)) {
			if (vlen >= sizeof(r->verdict))
				return -EPROTO;
			memcpy(r->verdict, value, vlen);
			r->verdict[vlen] = '\0';
		} else if (header_is(line, n, "Content-Length", &value, &vlen)) {
			char *stop;

			length = strtoull(value, &stop, 10);
			if (stop != value + vlen)
				return -EPROTO;
			has_length = true;
		} else if (header_is(line, n, "Transfer-Encoding", &value, &vlen)) {
			/* HTTP/1.0 rules it out; a proxy might not. */
			return -EPROTO;
		}
		line = eol + 2;
	}
	if (has_length && length > r->body_len)
		return -EPIPE;
	if (has_length)
		r->body_len = (size_t)length;
	return 0;
}

/*
 * Replaces what a terminal could take for a command in `s`, from a server
 * that may not be flightrecd: control characters (C0, DEL, and C1 as
 * UTF-8 writes them) become '?'.
 */
static void defang(char *s)
{
	unsigned char *p = (unsigned char *)s;

	for (; *p; p++) {
		if (*p < 0x20 || *p == 0x7f) {
			*p = '?';
		} else if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
			p[0] = '?';
			p[1] = '?';
			p++;
		}
	}
}

/*
 * Whether `body` holds a byte that fr_verdict_print() never writes: a
 * control character other than tab, newline and carriage return. Such a
 * body is not a report, and is not printed.
 */
static bool body_has_controls(const char *body, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)body[i];

		if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f)
			return true;
	}
	return false;
}

/*
 * The "error" of a JSON error body, the body's first line otherwise;
 * empty when there is none. Safe to print (defang()).
 */
static void reply_error(const struct live_reply *r, char *buf, size_t cap)
{
	json_t *doc = json_loadb(r->body, r->body_len, 0, NULL);
	const char *msg = json_string_value(json_object_get(doc, "error"));

	if (msg)
		snprintf(buf, cap, "%s", msg);
	else
		snprintf(buf, cap, "%.*s", (int)strcspn(r->body, "\r\n"), r->body);
	json_decref(doc);
	defang(buf);
}

/*
 * The "Authorization: Bearer ...\r\n" header line for the daemon, into
 * `out`: "" when neither FLIGHTREC_JOB_KEY_FILE nor FLIGHTREC_TOKEN_FILE
 * is set. Returns 0, or -EINVAL with why in `err` when the one set cannot
 * be used.
 */
static int bearer_header(char *out, size_t cap, char *err, size_t errcap)
{
	const char *key_file = getenv("FLIGHTREC_JOB_KEY_FILE");
	const char *token_file = getenv("FLIGHTREC_TOKEN_FILE");
	const char *why = NULL;
	bool others;
	int rc;

	out[0] = '\0';
	if (key_file && key_file[0]) {
		uint8_t key[FR_WIRE_JOB_KEY_SIZE];
		char hex[FR_WIRE_JOB_KEY_HEX + 1];

		rc = fr_wire_job_key_read(key_file, key, &why, &others);
		if (rc)
			return fail(err, errcap, "FLIGHTREC_JOB_KEY_FILE=%s: %s", key_file,
				    why ? why : strerror(-rc));
		fr_wire_job_key_hex(key, hex);
		snprintf(out, cap, "Authorization: Bearer %s\r\n", hex);
		explicit_bzero(key, sizeof(key));
		explicit_bzero(hex, sizeof(hex));
	} else if (token_file && token_file[0]) {
		struct fr_token tok;

		rc = fr_wire_token_read(token_file, &tok, &why, &others);
		if (rc)
			return fail(err, errcap, "FLIGHTREC_TOKEN_FILE=%s: %s", token_file,
				    why ? why : strerror(-rc));
		snprintf(out, cap, "Authorization: Bearer %.*s\r\n", (int)tok.len,
			 (const char *)tok.bytes);
		explicit_bzero(&tok, sizeof(tok));
	}
	return 0;
}

/* Asks for the job's analysis and reads the whole answer into `r`. */
static int fetch(const struct live_target *t, bool json, struct live_reply *r, char *err,
		 size_t cap)
{
	int64_t deadline = now_ms() + LIVE_TIMEOUT_MS;
	char auth[FR_TOKEN_MAX + 64];
	char where[300];
	char req[FR_TOKEN_MAX + 1024];
	int fd, rc, n;

	target_text(t, where, sizeof(where));
	rc = bearer_header(auth, sizeof(auth), err, cap);
	if (rc)
		return rc;
	/* X-Flightrec: what a daemon wants of a client that is not a page of
	 * another site (live looks need it; the analysis does not, today). */
	n = snprintf(req, sizeof(req),
		     "GET " JOBS_PREFIX "%s/analysis%s HTTP/1.0\r\n"
		     "Host: %s\r\n"
		     "User-Agent: fr-analyze/%s\r\n"
		     "Accept: %s\r\n"
		     "X-Flightrec: 1\r\n"
		     "%s"
		     "Connection: close\r\n\r\n",
		     t->job, json ? "" : "?format=text", where, FLIGHTREC_VERSION,
		     json ? "application/json" : "text/plain", auth);
	explicit_bzero(auth, sizeof(auth));
	if (n < 0 || (size_t)n >= sizeof(req))
		return fail(err, cap, "the request is too long");
	fd = connect_target(t, deadline, err, cap);
	if (fd < 0)
		return fd;
	rc = send_all(fd, req, (size_t)n, deadline);
	explicit_bzero(req, sizeof(req));
	if (!rc)
		rc = recv_all(fd, r, deadline);
	close(fd);
	if (rc == -ETIMEDOUT)
		snprintf(err, cap, "the daemon at %s did not answer within %d s", where,
			 LIVE_TIMEOUT_MS / 1000);
	else if (rc == -EFBIG)
		snprintf(err, cap, "the daemon at %s sent more than %u bytes", where,
			 LIVE_REPLY_MAX);
	else if (rc)
		snprintf(err, cap, "reading from the daemon at %s: %s", where,
			 rc == -EPROTO ? "it closed the connection without answering" :
			 strerror(-rc));
	if (rc)
		return rc;
	rc = parse_reply(r);
	if (rc == -EPIPE)
		snprintf(err, cap, "the daemon at %s cut its answer short", where);
	else if (rc)
		snprintf(err, cap, "the daemon at %s sent an answer that is not HTTP as "
			 "flightrecd speaks it", where);
	return rc;
}

int live_analyze(const char *prog, const char *url, bool json, FILE *out)
{
	struct live_reply r = { 0 };
	struct live_target t;
	char where[300];
	char err[512];
	char why[256];
	int rc;

	if (live_parse_url(url, &t, err, sizeof(err))) {
		fprintf(stderr, "%s: --live %s: %s\n", prog, url, err);
		return -EINVAL;
	}
	target_text(&t, where, sizeof(where));
	rc = fetch(&t, json, &r, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "%s: %s\n", prog, err);
		goto out_free;
	}
	rc = -EPROTO;
	if (r.status == 404) {
		reply_error(&r, why, sizeof(why));
		if (strcmp(why, "no such job") == 0)
			fprintf(stderr, "%s: no such job %s at the daemon at %s\n", prog, t.job,
				where);
		else
			fprintf(stderr, "%s: the daemon at %s has no analysis of job %s (404: %s); "
				"is it older than fr-analyze?\n", prog, where, t.job, why);
	} else if (r.status == 401) {
		reply_error(&r, why, sizeof(why));
		fprintf(stderr, "%s: the daemon at %s wants a bearer token for job %s (401: %s): "
			"set FLIGHTREC_JOB_KEY_FILE to the job's key or FLIGHTREC_TOKEN_FILE to the daemon's token\n",
			prog, where, t.job, why);
	} else if (r.status == 421) {
		reply_error(&r, why, sizeof(why));
		fprintf(stderr, "%s: the daemon at %s does not go by that name (421: %s)\n", prog,
			where, why);
	} else if (r.status != 200) {
		reply_error(&r, why, sizeof(why));
		fprintf(stderr, "%s: the daemon at %s answered %d for job %s: %s\n", prog, where,
			r.status, t.job, why[0] ? why : "(no reason given)");
	} else if (!r.verdict[0]) {
		fprintf(stderr, "%s: the daemon at %s named no verdict (no " VERDICT_HEADER
			" header)\n", prog, where);
	} else if (body_has_controls(r.body, r.body_len)) {
		fprintf(stderr, "%s: the daemon at %s sent a report with control characters, "
			"which flightrecd never writes; not printed\n", prog, where);
	} else if (fwrite(r.body, 1, r.body_len, out) != r.body_len || fflush(out) != 0) {
		fprintf(stderr, "%s: writing the report: %s\n", prog, strerror(errno));
		rc = -EIO;
	} else {
		/* As for a directory: any verdict but "ok" is a problem. */
		rc = strcmp(r.verdict, "ok") == 0 ? 0 : 1;
	}
out_free:
	free(r.buf);
	return rc;
}
