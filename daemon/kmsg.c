/* The kernel log lines of an incident, from /dev/kmsg (kmsg.h). */
#include "kmsg.h"
#include "log.h"
#include "registry.h"

#include "../dumps/dump.h"
#include "../protocol/node_wire.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A record is at most 1 KiB of text, escaped up to four times over, plus
 * its dictionary; read() refuses (EINVAL) a buffer too small for one. */
#define KMSG_RECORD_BUF 8192

/* Reads a decimal number at *p, moving past it; false when none. */
static bool parse_u64(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	if (s >= end || !isdigit((unsigned char)*s))
		return false;
	for (; s < end && isdigit((unsigned char)*s); s++) {
		if (v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*p = s;
	*out = v;
	return true;
}

int kmsg_parse(const char *buf, size_t len, struct kmsg_record *r)
{
	const char *p = buf, *end = buf + len, *semi, *eol;
	uint64_t prio;
	size_t n = 0;

	memset(r, 0, sizeof(*r));
	semi = memchr(buf, ';', len);
	if (!semi)
		return -EPROTO;
	if (!parse_u64(&p, semi, &prio) || prio > 1023 || p >= semi || *p++ != ',' ||
	    !parse_u64(&p, semi, &r->seq) || p >= semi || *p++ != ',' ||
	    !parse_u64(&p, semi, &r->usec) || p >= semi || *p++ != ',' || p >= semi)
		return -EPROTO;
	r->prio = (unsigned)prio;
	/* Later kernels may add fields after the flag, comma-separated. */
	r->flag = *p;
	eol = memchr(semi + 1, '\n', (size_t)(end - semi - 1));
	if (!eol)
		eol = end;
	for (p = semi + 1; p < eol && n < sizeof(r->text) - 1; p++) {
		unsigned char c = (unsigned char)*p;

		if (c == '\\' && eol - p >= 4 && p[1] == 'x' && isxdigit((unsigned char)p[2]) &&
		    isxdigit((unsigned char)p[3])) {
			char hex[3] = { p[2], p[3], '\0' };

			c = (unsigned char)strtoul(hex, NULL, 16);
			p += 3;
		}
		/* Bytes that are not UTF-8 become '?' when written out. */
		r->text[n++] = c < ' ' || c == 0x7f ? ' ' : (char)c;
	}
	r->text[n] = '\0';
	return 0;
}

/* Case-insensitive strstr. */
static const char *find_ci(const char *hay, const char *needle)
{
	size_t n = strlen(needle);

	for (; *hay; hay++)
		if (strncasecmp(hay, needle, n) == 0)
			return hay;
	return NULL;
}

/* The number right after `key` in `text` ("pid=1234"), or 0. */
static uint32_t number_after(const char *text, const char *key)
{
	const char *p = strstr(text, key);
	uint64_t v;

	if (!p)
		return 0;
	p += strlen(key);
	if (!parse_u64(&p, p + strlen(p), &v) || v > UINT32_MAX)
		return 0;
	return (uint32_t)v;
}

/* The number ending just before `at` (after `stop`), as in "python:1234 blocked"
 * or "python[1234]: segfault"; 0 when none. */
static uint32_t number_before(const char *text, const char *at, char stop)
{
	const char *p = at;
	uint64_t v;

	while (p > text && isdigit((unsigned char)p[-1]))
		p--;
	if (p == at || p == text || p[-1] != stop || !parse_u64(&p, at, &v) || v > UINT32_MAX)
		return 0;
	return (uint32_t)v;
}

bool kmsg_classify(const char *text, enum fr_klog_kind *kind, uint32_t *pid)
{
	static const char *const links[] = {
		"link down", "link up", "link is down", "link is up",
	};
	const char *at;

	*pid = 0;
	if (strstr(text, "NVRM: Xid")) {
		*kind = FR_KLOG_XID;
		*pid = number_after(text, "pid=");
		return true;
	}
	if ((at = strstr(text, "Killed process ")) || (at = strstr(text, "reaped process "))) {
		*kind = FR_KLOG_OOM;
		*pid = number_after(at, "process ");
		return true;
	}
	if (strstr(text, "oom-kill:")) {
		*kind = FR_KLOG_OOM;
		*pid = number_after(text, ",pid=");
		return true;
	}
	if ((at = strstr(text, " blocked for more than "))) {
		*kind = FR_KLOG_HUNG_TASK;
		*pid = number_before(text, at, ':');
		return true;
	}
	if ((at = strstr(text, "]: segfault at "))) {
		*kind = FR_KLOG_SEGFAULT;
		*pid = number_before(text, at, '[');
		return true;
	}
	for (size_t i = 0; i < sizeof(links) / sizeof(*links); i++) {
		if (find_ci(text, links[i])) {
			*kind = FR_KLOG_NIC;
			return true;
		}
	}
	if (strstr(text, "mlx5") &&
	    (find_ci(text, "error") || find_ci(text, "fatal") || find_ci(text, "health"))) {
		*kind = FR_KLOG_NIC;
		return true;
	}
	return false;
}

static int pid_cmp(const void *a, const void *b)
{
	uint32_t x = ((const struct kmsg_pid *)a)->pid;
	uint32_t y = ((const struct kmsg_pid *)b)->pid;

	return x < y ? -1 : x > y;
}

bool kmsg_keep(const struct kmsg_query *q, const struct kmsg_record *r,
	       int64_t mono_to_real_ns, struct fr_klog_line *l)
{
	int64_t t = (int64_t)(r->usec * 1000u) + mono_to_real_ns;
	struct kmsg_pid key = { 0, 0 };
	const struct kmsg_pid *found = NULL;
	enum fr_klog_kind kind;

	if (t < 0 || (uint64_t)t < q->from_ns || !kmsg_classify(r->text, &kind, &key.pid))
		return false;
	if (key.pid) {
		found = q->npids ? bsearch(&key, q->pids, q->npids, sizeof(*q->pids), pid_cmp) : NULL;
		if (!found)
			return false;
	} else if (kind != FR_KLOG_XID && kind != FR_KLOG_NIC) {
		/* An OOM kill, hang or segfault of whom, it does not say. */
		return false;
	}
	memset(l, 0, sizeof(*l));
	l->time_ns = (uint64_t)t;
	l->kind = kind;
	l->pid = key.pid;
	l->rank = found ? found->rank : FR_RANK_UNKNOWN;
	memcpy(l->text, r->text, sizeof(l->text));
	return true;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Says why the log cannot be read, in `k` and, the first time, in the
 * daemon's log. */
static void unavailable(const struct kmsg_query *q, struct fr_klog *k, const char *what, int err)
{
	static atomic_bool logged;

	k->available = false;
	snprintf(k->error, sizeof(k->error), "cannot %s %s: %s", what, q->path, strerror(err));
	if (!atomic_exchange(&logged, true))
		daemon_log("kernel log unavailable: %s; incidents will say so and carry no kernel "
			   "log lines", k->error);
}

int kmsg_collect(const struct kmsg_query *q, struct fr_klog *k)
{
	char *buf = malloc(KMSG_RECORD_BUF);
	uint64_t start = clock_ns(CLOCK_MONOTONIC);
	int64_t offset = (int64_t)(clock_ns(CLOCK_REALTIME) - start);
	struct kmsg_record r;
	struct fr_klog_line l;
	int rc = 0;
	int fd;

	snprintf(k->node, sizeof(k->node), "%s", q->node);
	k->from_ns = q->from_ns;
	if (!buf)
		return -ENOMEM;
	fd = open(q->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		unavailable(q, k, "open", errno);
		goto out_free;
	}
	/* From the oldest record the buffer still holds (an open file is at
	 * the first already; this says so). */
	(void)lseek(fd, 0, SEEK_SET);
	k->available = true;
	for (uint32_t i = 0; i < KMSG_RECORDS_MAX; i++) {
		ssize_t n = read(fd, buf, KMSG_RECORD_BUF - 1);

		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			/* Overwritten under us: the next read gives the next one. */
			if (errno == EPIPE)
				continue;
			if (errno == EAGAIN)
				break;
			unavailable(q, k, "read", errno);
			break;
		}
		if ((i & 255) == 255 && clock_ns(CLOCK_MONOTONIC) - start > KMSG_READ_MAX_NS)
			break;
		if (kmsg_parse(buf, (size_t)n, &r) || !kmsg_keep(q, &r, offset, &l))
			continue;
		if ((rc = fr_klog_add(k, &l)))
			break;
	}
	k->to_ns = clock_ns(CLOCK_REALTIME);
	close(fd);
out_free:
	free(buf);
	return rc;
}

struct kmsg_query *kmsg_query_of_view(const struct live_view *lv, uint64_t detected_ns)
{
	struct kmsg_query *q = calloc(1, sizeof(*q));
	uint64_t first = 0;

	if (!q || !(q->pids = calloc(lv->n ? lv->n : 1, sizeof(*q->pids)))) {
		free(q);
		return NULL;
	}
	q->path = KMSG_PATH;
	if (gethostname(q->node, sizeof(q->node) - 1) != 0 || !q->node[0])
		snprintf(q->node, sizeof(q->node), "unknown");
	for (size_t i = 0; i < lv->n; i++) {
		const struct fr_trace *t = &lv->traces[i];
		const struct live_rank *lr = &lv->ranks[i];

		if (!lr->known || !t->pid ||
		    (!lr->has_uid && strncmp(t->host, q->node, sizeof(q->node)) != 0))
			continue;
		q->pids[q->npids++] = (struct kmsg_pid){ t->pid, t->rank };
		if (lr->start_ns && (!first || lr->start_ns < first))
			first = lr->start_ns;
	}
	qsort(q->pids, q->npids, sizeof(*q->pids), pid_cmp);
	q->from_ns = detected_ns > KMSG_LOOKBACK_NS ? detected_ns - KMSG_LOOKBACK_NS : 0;
	if (first > q->from_ns)
		q->from_ns = first;
	return q;
}

void kmsg_query_free(struct kmsg_query *q)
{
	if (q) {
		free(q->pids);
		free(q->text);
	}
	free(q);
}

char *kmsg_text(struct fr_klog *k, size_t max, size_t *len)
{
	size_t nlines = k->nlines;
	uint64_t dropped = k->dropped;
	char *text = NULL;

	/* A few lines are usual and fit at once; 256 of the longest need
	 * their latest third or so left out, found in a few tries. */
	for (;;) {
		json_t *o = fr_klog_to_json(k);

		text = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		if (!text || strlen(text) <= max || !k->nlines)
			break;
		free(text);
		text = NULL;
		k->dropped += k->nlines - k->nlines * 7 / 8;
		k->nlines = k->nlines * 7 / 8;
	}
	k->nlines = nlines;
	k->dropped = dropped;
	if (text && strlen(text) > max) {
		free(text);
		text = NULL;
	}
	*len = text ? strlen(text) : 0;
	return text;
}

int kmsg_add_to_manifest(json_t *doc, struct kmsg_query *q)
{
	struct fr_klog k;
	json_t *arr = json_array();
	int rc;

	memset(&k, 0, sizeof(k));
	rc = arr ? kmsg_collect(q, &k) : -ENOMEM;
	if (!rc && json_array_append_new(arr, fr_klog_to_json(&k)))
		rc = -ENOMEM;
	if (!rc && q->keep_text)
		q->text = kmsg_text(&k, FR_NODE_KERNEL_LOG_MAX, &q->text_len);
	free(k.lines);
	if (rc) {
		json_decref(arr);
		return rc;
	}
	/* Both take their value, set or not. */
	if (json_object_set_new(doc, "kernel_log", arr) ||
	    json_object_set_new(doc, "version", json_string(FR_MANIFEST_VERSION_KLOG)))
		return -ENOMEM;
	return 0;
}
