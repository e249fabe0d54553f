/*
 * The kernel log lines of an incident (kernel_log.h): written into the
 * manifest by the daemon, read back with it (fr_rd_klogs()), and told by
 * fr-analyze under the culprit each concerns.
 */
#include "kernel_log.h"
#include "correlate_int.h"
#include "dump_read.h"
#include "dump_write.h"
#include "grow.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const kind_names[FR_KLOG__KINDS] = {
#define FR_KLOG_NAME(e, name) [e] = name,
	FR_KLOG_KINDS(FR_KLOG_NAME)
#undef FR_KLOG_NAME
};

const char *fr_klog_kind_name(enum fr_klog_kind k)
{
	return (unsigned)k < FR_KLOG__KINDS ? kind_names[k] : "?";
}

bool fr_klog_kind_parse(const char *name, enum fr_klog_kind *out)
{
	for (unsigned k = 0; k < FR_KLOG__KINDS; k++) {
		if (strcmp(name, kind_names[k]) == 0) {
			*out = (enum fr_klog_kind)k;
			return true;
		}
	}
	return false;
}

int fr_klog_add(struct fr_klog *k, const struct fr_klog_line *l)
{
	size_t cap = k->nlines;

	if (k->nlines >= FR_KLOG_LINES_MAX) {
		k->dropped++;
		return 0;
	}
	/* Grown one line at a time from `nlines`: a few lines are usual. */
	if (fr_grow((void **)&k->lines, &cap, k->nlines + 1, sizeof(*k->lines), 4) < 0)
		return -ENOMEM;
	k->lines[k->nlines++] = *l;
	return 0;
}

void fr_klogs_free(struct fr_klog *k, size_t n)
{
	for (size_t i = 0; k && i < n; i++)
		free(k[i].lines);
	free(k);
}

static json_t *line_json(const struct fr_klog_line *l)
{
	json_t *o = json_object();
	int bad = 0;

	if (!o)
		return NULL;
	bad |= set(o, "time_ns", ju64(l->time_ns));
	bad |= set(o, "kind", json_string(fr_klog_kind_name(l->kind)));
	bad |= set(o, "text", JSTR(l->text));
	bad |= set(o, "pid", l->pid ? json_integer(l->pid) : json_null());
	bad |= set(o, "rank", l->rank != FR_RANK_UNKNOWN ? json_integer(l->rank) : json_null());
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *fr_klog_to_json(const struct fr_klog *k)
{
	json_t *o = json_object();
	json_t *lines = json_array();
	int bad = 0;

	if (!o || !lines)
		goto out_free;
	bad |= set(o, "node", JSTR(k->node));
	bad |= set(o, "available", json_boolean(k->available));
	bad |= set(o, "error", k->error[0] ? JSTR(k->error) : json_null());
	bad |= set(o, "from_ns", ju64(k->from_ns));
	bad |= set(o, "to_ns", ju64(k->to_ns));
	bad |= set(o, "dropped", ju64(k->dropped));
	for (size_t i = 0; i < k->nlines && !bad; i++)
		bad |= append(lines, line_json(&k->lines[i]));
	bad |= set(o, "lines", lines);
	lines = NULL;
	if (!bad)
		return o;
out_free:
	json_decref(lines);
	json_decref(o);
	return NULL;
}

/* One line of a node's "lines"; false (and nothing kept) for a kind this
 * reader does not know: a later minor version may add kinds. */
static int read_line(const struct rd *rd, const struct fr_val *e, const char *at,
		     struct fr_klog_line *l, bool *known)
{
	const struct fr_val *kind = fr_val_get(e, "kind");
	const struct fr_val *text = fr_val_get(e, "text");
	int rc;

	memset(l, 0, sizeof(*l));
	l->rank = FR_RANK_UNKNOWN;
	if (!fr_val_is(e, FR_VAL_OBJECT))
		return fr_rd_fail(rd, -EPROTO, "%s: expected an object, got %s", at,
				  fr_val_type_name(e));
	if ((rc = get_u64(rd, fr_val_get(e, "time_ns"), at, "time_ns", true, INT64_MAX,
			  &l->time_ns)) ||
	    (rc = want(rd, kind, at, "kind", true, "a string")) ||
	    (rc = str_check(rd, kind, at, "kind", 32)) ||
	    (rc = want(rd, text, at, "text", true, "a string")) ||
	    (rc = get_u32(rd, fr_val_get(e, "pid"), at, "pid", false, &l->pid)) ||
	    (rc = get_u32(rd, fr_val_get(e, "rank"), at, "rank", false, &l->rank)))
		return rc;
	if (!fr_val_is(text, FR_VAL_STRING))
		return fr_rd_type(rd, text, at, "text", "a string");
	/* A longer line is cut, as the daemon cuts it. */
	snprintf(l->text, sizeof(l->text), "%s", text->u.s);
	*known = fr_klog_kind_parse(kind->u.s, &l->kind);
	return 0;
}

static int read_node(const struct rd *rd, const struct fr_val *e, const char *at,
		     struct fr_klog *k)
{
	char p[AT_MAX], li[AT_MAX];
	const struct fr_val *lines;
	int rc;

	if (!fr_val_is(e, FR_VAL_OBJECT))
		return fr_rd_fail(rd, -EPROTO, "%s: expected an object, got %s", at,
				  fr_val_type_name(e));
	if ((rc = GET_STR(rd, e, at, "node", true, k->node)) ||
	    (rc = get_bool(rd, fr_val_get(e, "available"), at, "available", true,
			   &k->available)) ||
	    (rc = GET_STR(rd, e, at, "error", false, k->error)) ||
	    (rc = get_u64(rd, fr_val_get(e, "from_ns"), at, "from_ns", false, INT64_MAX,
			  &k->from_ns)) ||
	    (rc = get_u64(rd, fr_val_get(e, "to_ns"), at, "to_ns", false, INT64_MAX,
			  &k->to_ns)) ||
	    (rc = get_u64(rd, fr_val_get(e, "dropped"), at, "dropped", false, INT64_MAX,
			  &k->dropped)) ||
	    (rc = fr_rd_container(rd, e, at, "lines", false, FR_VAL_ARRAY, &lines)))
		return rc;
	fr_rd_path(p, at, "lines");
	for (uint32_t i = 0; lines && i < lines->n; i++) {
		struct fr_klog_line l;
		bool known = false;

		fr_rd_at(li, "%s[%" PRIu32 "]", p, i);
		if ((rc = read_line(rd, lines->u.items[i], li, &l, &known)))
			return rc;
		/* More than a daemon keeps are counted, as it counts them. */
		if (known && fr_klog_add(k, &l))
			return fr_rd_nomem(rd);
	}
	return 0;
}

int fr_klog_parse(const char *buf, size_t len, struct fr_klog *k, char *err, size_t errlen)
{
	struct rd rd = { .name = "node_kernel_log", .err = err, .errlen = errlen };
	struct fr_doc *d = fr_doc_new();
	struct fr_val *root = NULL;
	char why[256];
	int rc;

	if (!d)
		return fr_rd_nomem(&rd);
	rc = fr_json_parse(d, buf, len, &root, why, sizeof(why));
	if (rc == -EPROTO)
		rc = fr_rd_fail(&rd, rc, "%s", why);
	else if (rc)
		rc = fr_rd_nomem(&rd);
	else
		rc = read_node(&rd, root, "kernel_log", k);
	fr_doc_free(d);
	return rc;
}

int fr_rd_klogs(const struct rd *rd, const struct fr_val *root, struct fr_klog **out, size_t *n)
{
	char at[AT_MAX];
	const struct fr_val *arr;
	int rc;

	*out = NULL;
	*n = 0;
	if ((rc = fr_rd_container(rd, root, "", "kernel_log", false, FR_VAL_ARRAY, &arr)) || !arr ||
	    !arr->n)
		return rc;
	*out = calloc(arr->n, sizeof(**out));
	if (!*out)
		return fr_rd_nomem(rd);
	for (uint32_t i = 0; i < arr->n; i++) {
		*n = i + 1;
		fr_rd_at(at, "kernel_log[%" PRIu32 "]", i);
		if ((rc = read_node(rd, arr->u.items[i], at, &(*out)[i])))
			return rc;
	}
	return 0;
}

/* ---- fr-analyze: the lines under their culprits ---- */

/* Whether line `l` of node `k` is culprit `cu`'s (kernel_log.h). */
static bool line_is_culprits(const struct fr_klog *k, const struct fr_klog_line *l,
			     const struct fr_culprit *cu)
{
	if (l->rank != FR_RANK_UNKNOWN)
		return l->rank == cu->rank;
	return cu->host[0] && strcmp(k->node, cu->host) == 0;
}

/* The culprit's reference time and what it did then; 0 when unknown. */
static uint64_t culprit_ref(const struct fr_culprit *cu, const struct fr_trace *t,
			    const char **what)
{
	uint64_t last = 0;

	if (cu->crash && cu->crash->time_ns) {
		*what = "crashed";
		return cu->crash->time_ns;
	}
	if (cu->has_exit && cu->exit.time_ns) {
		*what = cu->reason == FR_REASON_KILLED ? "was killed" : "exited";
		return cu->exit.time_ns;
	}
	for (size_t i = 0; t && i < t->nops; i++) {
		if (t->ops[i].t_entered_ns > last)
			last = t->ops[i].t_entered_ns;
		if (t->ops[i].t_completed_ns > last)
			last = t->ops[i].t_completed_ns;
	}
	*what = "stopped";
	return last;
}

/* Node `k`'s line of the OOM killer killing culprit `cu`, or NULL. */
static const struct fr_klog_line *oom_line_of(const struct fr_klog *k, const struct fr_culprit *cu)
{
	for (size_t i = 0; i < k->nlines; i++) {
		const struct fr_klog_line *l = &k->lines[i];

		if (l->kind == FR_KLOG_OOM && l->pid &&
		    (l->rank != FR_RANK_UNKNOWN ? l->rank == cu->rank :
						  l->pid == cu->pid && strcmp(k->node, cu->host) == 0))
			return l;
	}
	return NULL;
}

/* The killed culprits' words in a summary (correlate.c's death text). */
static const char *const killed_words[] = {
	FR_KILLED_WORDS_ONE,
	FR_KILLED_WORDS_MANY,
};

void fr_klog_name_oom(struct fr_verdict *v)
{
	size_t named = 0;

	for (size_t c = 0; c < v->nculprits; c++) {
		struct fr_culprit *cu = &v->culprits[c];

		for (size_t n = 0; n < v->nklogs && !cu->oom_killed; n++)
			cu->oom_killed = cu->reason == FR_REASON_KILLED && oom_line_of(&v->klogs[n], cu);
		named += cu->oom_killed;
	}
	if (!named || !v->nculprits || !v->culprits[0].oom_killed)
		return;
	/* The summary names the first culprit's death. */
	for (size_t i = 0; i < sizeof(killed_words) / sizeof(killed_words[0]); i++) {
		char *at = strstr(v->summary, killed_words[i]);
		char rest[sizeof(v->summary)];

		if (!at)
			continue;
		snprintf(rest, sizeof(rest), "%s", at + strlen(killed_words[i]));
		snprintf(at, sizeof(v->summary) - (size_t)(at - v->summary), "%s%s",
			 i == 0 ? "was killed by the OOM killer (the kernel log of its node says so)" :
				  "were killed, the first by the OOM killer (the kernel log of its node says so)",
			 rest);
		break;
	}
}

/* "2026-12-03 04:50:12 UTC"; "?" for an unknown time. */
static void utc_text(char *buf, size_t cap, uint64_t ns)
{
	time_t s = (time_t)(ns / 1000000000u);
	struct tm tm;

	if (!ns || !gmtime_r(&s, &tm) || !strftime(buf, cap, "%Y-%m-%d %H:%M:%S UTC", &tm))
		snprintf(buf, cap, "?");
}

/* Lines under one culprit at most; the rest are counted. */
#define PRINT_LINES_MAX 16

void fr_klog_print_culprit(FILE *out, const struct fr_verdict *v, const struct fr_culprit *cu,
			   const struct fr_trace *t)
{
	const char *what = NULL;
	uint64_t ref = culprit_ref(cu, t, &what);
	size_t shown = 0, more = 0;

	for (size_t n = 0; n < v->nklogs; n++) {
		const struct fr_klog *k = &v->klogs[n];

		for (size_t i = 0; i < k->nlines; i++) {
			const struct fr_klog_line *l = &k->lines[i];
			char d[32];

			if (!line_is_culprits(k, l, cu))
				continue;
			if (shown++ == PRINT_LINES_MAX) {
				more++;
				shown--;
				continue;
			}
			fprintf(out, "  kernel: %s: %s", k->node, l->text);
			if (ref && l->time_ns) {
				uint64_t gap = l->time_ns <= ref ? ref - l->time_ns : l->time_ns - ref;

				fr_corr_duration_text(d, sizeof(d), (double)gap / 1e9);
				fprintf(out, ", %s %s rank %" PRIu32 " %s", d,
					l->time_ns <= ref ? "before" : "after", cu->rank, what);
			}
			fputc('\n', out);
		}
	}
	if (more)
		fprintf(out, "  kernel: ... and %zu more lines (fr-analyze --json lists them)\n",
			more);
}

/* Why node `k`'s log is unavailable, without the node's own name in front
 * ("node n17 sent no kernel log (...)": "sent no kernel log (...)"), so
 * that nodes alike group. */
static const char *unavailable_why(const struct fr_klog *k)
{
	size_t len = strlen(k->node);

	if (!k->error[0])
		return "no reason given";
	if (strncmp(k->error, "node ", 5) == 0 && strncmp(k->error + 5, k->node, len) == 0 &&
	    k->error[5 + len] == ' ')
		return k->error + 6 + len;
	return k->error;
}

/* Reasons told apart at most, and nodes named for each: a cluster of
 * thousands of nodes without access says so in a few lines. */
#define UNAVAILABLE_WHYS_MAX 8
#define UNAVAILABLE_NAMED_MAX 4

/* The nodes whose kernel log could not be read, grouped by why. */
static void print_unavailable(FILE *out, const struct fr_verdict *v)
{
	const char *whys[UNAVAILABLE_WHYS_MAX];
	size_t count[UNAVAILABLE_WHYS_MAX] = { 0 };
	size_t nwhys = 0, other = 0;

	for (size_t n = 0; n < v->nklogs; n++) {
		const char *why = unavailable_why(&v->klogs[n]);
		size_t w = 0;

		if (v->klogs[n].available)
			continue;
		while (w < nwhys && strcmp(whys[w], why) != 0)
			w++;
		if (w == nwhys && nwhys == UNAVAILABLE_WHYS_MAX) {
			other++;
			continue;
		}
		if (w == nwhys)
			whys[nwhys++] = why;
		count[w]++;
	}
	for (size_t w = 0; w < nwhys; w++) {
		size_t named = 0;

		fprintf(out, "\nKernel log unavailable on %zu node%s (%s): ", count[w],
			count[w] == 1 ? "" : "s", whys[w]);
		for (size_t n = 0; n < v->nklogs && named < UNAVAILABLE_NAMED_MAX; n++)
			if (!v->klogs[n].available && strcmp(unavailable_why(&v->klogs[n]), whys[w]) == 0)
				fprintf(out, "%s%s", named++ ? ", " : "", v->klogs[n].node);
		fprintf(out, "%s\n", count[w] > named ? ", ..." : "");
	}
	if (other)
		fprintf(out, "Kernel log unavailable on %zu more node%s, for other reasons "
			"(fr-analyze --json lists them)\n", other, other == 1 ? "" : "s");
}

void fr_klog_print_rest(FILE *out, const struct fr_verdict *v, size_t shown)
{
	size_t printed = 0, more = 0;
	bool head = false;

	print_unavailable(out, v);
	for (size_t n = 0; n < v->nklogs; n++) {
		const struct fr_klog *k = &v->klogs[n];

		for (size_t i = 0; i < k->nlines; i++) {
			const struct fr_klog_line *l = &k->lines[i];
			bool taken = false;
			char when[40];

			for (size_t c = 0; c < shown && c < v->nculprits && !taken; c++)
				taken = line_is_culprits(k, l, &v->culprits[c]);
			if (taken)
				continue;
			if (printed == PRINT_LINES_MAX) {
				more++;
				continue;
			}
			if (!head)
				fprintf(out, "\nKernel log (lines no culprit above accounts for):\n");
			head = true;
			printed++;
			utc_text(when, sizeof(when), l->time_ns);
			fprintf(out, "  %s %s: %s", when, k->node, l->text);
			if (l->rank != FR_RANK_UNKNOWN)
				fprintf(out, " (rank %" PRIu32 ")", l->rank);
			fputc('\n', out);
		}
	}
	if (more)
		fprintf(out, "  ... and %zu more lines (fr-analyze --json lists them)\n", more);
}

/* A line as --json has it: the manifest's fields and its node. */
static json_t *line_out_json(const struct fr_klog *k, const struct fr_klog_line *l)
{
	json_t *o = line_json(l);

	if (o && set(o, "node", JSTR(k->node))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *culprit_lines_json(const struct fr_verdict *v, const struct fr_culprit *cu,
				  const struct fr_trace *t)
{
	const char *what = NULL;
	uint64_t ref = culprit_ref(cu, t, &what);
	json_t *arr = json_array();
	int bad = !arr;

	for (size_t n = 0; n < v->nklogs && !bad; n++) {
		const struct fr_klog *k = &v->klogs[n];

		for (size_t i = 0; i < k->nlines && !bad; i++) {
			const struct fr_klog_line *l = &k->lines[i];
			json_t *o;

			if (!line_is_culprits(k, l, cu))
				continue;
			o = line_out_json(k, l);
			bad |= !o || set(o, "before_s", ref && l->time_ns ?
						  json_real(((double)ref - (double)l->time_ns) / 1e9) :
						  json_null());
			bad |= append(arr, o);
		}
	}
	if (bad) {
		json_decref(arr);
		return NULL;
	}
	return arr;
}

int fr_klog_add_json(json_t *o, const struct fr_verdict *v, const struct fr_trace *const *traces,
		     size_t ntraces)
{
	json_t *culprits = json_object_get(o, "culprits");
	json_t *nodes = json_array();
	int bad = !nodes;

	if (!v->nklogs) {
		json_decref(nodes);
		return 0;
	}
	for (size_t n = 0; n < v->nklogs && !bad; n++)
		bad |= append(nodes, fr_klog_to_json(&v->klogs[n]));
	bad |= set(o, "kernel_log", nodes);
	for (size_t c = 0; c < v->nculprits && !bad; c++) {
		const struct fr_culprit *cu = &v->culprits[c];

		bad |= set(json_array_get(culprits, c), "kernel_log",
			   culprit_lines_json(v, cu, fr_corr_trace_of(traces, ntraces, cu->rank)));
	}
	return bad ? -ENOMEM : 0;
}
