/*
 * Summaries of a rank's evidence (summary.h).
 *
 * Which entries a summary keeps is decided per communicator. The engine
 * (correlate.h) reads of a rank: its progress counters (kept whole), the
 * operations it has in flight (what it waits in, and the posted receives a
 * peer's send may match), the entries at the (communicator, seq) it
 * compares across ranks, and a culprit's last completed operation on the
 * stuck communicator. So each communicator keeps its entries in flight
 * first (those that block the rank before those merely posted, newest
 * first), up to half the window on the focus's communicator and the whole
 * window elsewhere; then on the focus's communicator its newest completed
 * entry (a culprit's last completed operation, however old the focus) and
 * the entries nearest the focus's seq (both sides alike: the entries at
 * and after it say who entered it, those before it what each rank last
 * completed), and the newest entries elsewhere. Kept entries stay in the
 * order of the ring.
 */
#include "summary.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "correlate.h"
#include "dump.h"
#include "grow.h"
#include "dump_write.h"

/* One communicator's entries in a trace, by index into its ops. */
struct group {
	const char *comm;
	size_t *idx;
	size_t n, cap;
	bool inflight;
	bool focus;
};

static bool in_flight(const struct fr_op *op)
{
	return op->state == FR_STATE_ENTERED;
}

/* An operation in flight that the rank blocks in (correlate.h's "waits"). */
static bool blocks(const struct fr_op *op)
{
	return in_flight(op) && (!op->nonblocking || op->waited);
}

static void groups_free(struct group *g, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(g[i].idx);
	free(g);
}

/* The trace's entries grouped by communicator, in order of first use.
 * Returns the groups (*n of them), NULL when out of memory. */
static struct group *group_ops(const struct fr_trace *t, const struct fr_summary_focus *focus,
			       size_t *n)
{
	struct group *g = NULL;
	size_t ng = 0, cap = 0;
	size_t cur = SIZE_MAX;

	for (size_t i = 0; i < t->nops; i++) {
		const struct fr_op *op = &t->ops[i];
		struct group *x;

		/* Runs of entries on one communicator are the rule. */
		if (cur == SIZE_MAX || strcmp(g[cur].comm, op->comm) != 0)
			for (cur = 0; cur < ng && strcmp(g[cur].comm, op->comm) != 0; cur++)
				;
		if (cur == ng) {
			if (fr_grow((void **)&g, &cap, ng + 1, sizeof(*g), 8) < 0)
				goto out_free;
			memset(&g[ng], 0, sizeof(g[ng]));
			g[ng].comm = op->comm;
			g[ng].focus = focus && focus->comm && strcmp(focus->comm, op->comm) == 0;
			ng++;
		}
		x = &g[cur];
		if (fr_grow((void **)&x->idx, &x->cap, x->n + 1, sizeof(*x->idx), 16) < 0)
			goto out_free;
		x->idx[x->n++] = i;
		x->inflight |= in_flight(op);
	}
	*n = ng;
	return g ? g : calloc(1, sizeof(*g));

out_free:
	groups_free(g, ng);
	return NULL;
}

/* Which communicators keep entries: the focus's first, then those with an
 * entry in flight, then the one used last. */
static int rank_of(const struct group *g)
{
	return g->focus ? 0 : g->inflight ? 1 : 2;
}

static int cmp_groups(const void *a, const void *b)
{
	const struct group *x = a;
	const struct group *y = b;
	size_t xl = x->idx[x->n - 1], yl = y->idx[y->n - 1];

	if (rank_of(x) != rank_of(y))
		return rank_of(x) - rank_of(y);
	return (xl < yl) - (xl > yl);
}

/* Marks up to `budget` of g's entries in flight, those that block first,
 * newest first; returns how many. */
static size_t mark_in_flight(const struct fr_trace *t, const struct group *g, bool *keep,
			     size_t budget)
{
	size_t kept = 0;

	for (int pass = 0; pass < 2; pass++) {
		for (size_t k = g->n; k-- > 0 && kept < budget;) {
			const struct fr_op *op = &t->ops[g->idx[k]];

			if (keep[g->idx[k]] || !in_flight(op) || blocks(op) != (pass == 0))
				continue;
			keep[g->idx[k]] = true;
			kept++;
		}
	}
	return kept;
}

/* Where the focus's seq is among g's entries: the first entry at it, else
 * the first collective after it, else the end. */
static size_t focus_place(const struct fr_trace *t, const struct group *g, uint64_t seq)
{
	for (size_t k = 0; k < g->n; k++)
		if (t->ops[g->idx[k]].seq == seq)
			return k;
	for (size_t k = 0; k < g->n; k++)
		if (!t->ops[g->idx[k]].is_p2p && t->ops[g->idx[k]].seq > seq)
			return k;
	return g->n;
}

/* Marks g's entries for a summary keeping `window` of them. */
static void mark_group(const struct fr_trace *t, const struct group *g,
		       const struct fr_summary_focus *focus, size_t window, bool *keep)
{
	size_t kept = mark_in_flight(t, g, keep, g->focus ? window / 2 : window);
	size_t at;

	if (!g->focus) {
		for (size_t k = g->n; k-- > 0 && kept < window;)
			if (!keep[g->idx[k]]) {
				keep[g->idx[k]] = true;
				kept++;
			}
		return;
	}
	/* The rank's last completed operation there, which the verdict
	 * shows of a culprit, however far from the focus. */
	for (size_t k = g->n; k-- > 0 && kept < window;) {
		if (t->ops[g->idx[k]].state != FR_STATE_COMPLETED)
			continue;
		if (!keep[g->idx[k]]) {
			keep[g->idx[k]] = true;
			kept++;
		}
		break;
	}
	/* Outwards from the focus's place, one entry before it, then one at
	 * or after it, ... */
	at = focus_place(t, g, focus->seq);

	for (size_t d = 0; kept < window && (d < at || at + d < g->n); d++) {
		size_t side[2] = { at - d - 1, at + d };
		bool ok[2] = { d < at, at + d < g->n };

		for (int s = 0; s < 2 && kept < window; s++) {
			if (!ok[s] || keep[g->idx[side[s]]])
				continue;
			keep[g->idx[side[s]]] = true;
			kept++;
		}
	}
}

/* The threads a summary keeps: the application thread, and the one that
 * runs Python when that is another, in the order of the dump; each with its
 * native and Python frames. */
static int copy_threads(struct fr_trace *out, const struct fr_trace *full)
{
	const struct fr_thread *app = fr_trace_app_thread(full), *py = fr_trace_py_thread(full);

	if (!app && !py)
		return 0;
	out->threads = calloc(2, sizeof(*out->threads));
	if (!out->threads)
		return -ENOMEM;
	for (size_t i = 0; i < full->nthreads; i++) {
		const struct fr_thread *th = &full->threads[i];

		if (th != app && th != py)
			continue;
		/* Counted first: a failed copy's partial frames are freed with it. */
		out->nthreads++;
		if (fr_thread_copy(&out->threads[out->nthreads - 1], th))
			return -ENOMEM;
	}
	return 0;
}

static int copy_op(struct fr_trace *out, size_t *cap, const struct fr_op *op)
{
	struct fr_op *c = fr_trace_add_op(out, cap);

	if (!c)
		return -ENOMEM;
	*c = *op;
	c->comm = fr_trace_str(out, op->comm);
	c->dtype = fr_trace_str(out, op->dtype);
	c->redop = fr_trace_str(out, op->redop);
	return c->comm && c->dtype && c->redop ? 0 : -ENOMEM;
}

/* Identity and every communicator's progress, without members. */
static int copy_header(const struct fr_trace *full, const struct fr_summary_opts *opts,
		       struct fr_trace *out)
{
	const struct fr_trace_summary *was = full->summary;
	struct fr_trace_summary *s;
	size_t cap = 0;

	out->status = full->status;
	memcpy(out->job, full->job, sizeof(out->job));
	out->rank = full->rank;
	out->world_size = full->world_size;
	memcpy(out->host, full->host, sizeof(out->host));
	out->pid = full->pid;
	memcpy(out->comm_lib, full->comm_lib, sizeof(out->comm_lib));
	memcpy(out->incident, full->incident, sizeof(out->incident));
	memcpy(out->reason, full->reason, sizeof(out->reason));
	out->time_ns = full->time_ns;
	out->dropped = full->dropped;
	/* How it died, or what NCCL said: a verdict of crash needs them. */
	if (fr_crash_copy(&out->crash, full->crash))
		return -ENOMEM;
	out->has_exit = full->has_exit;
	out->exit = full->exit;
	out->has_nccl_error = full->has_nccl_error;
	out->nccl_error = full->nccl_error;
	/* Why its threads carry no Python frames, as the full dump says. */
	memcpy(out->python_note, full->python_note, sizeof(out->python_note));
	for (size_t i = 0; i < full->ncomms; i++) {
		struct fr_comm *c = fr_trace_add_comm(out, &cap);

		if (!c)
			return -ENOMEM;
		*c = full->comms[i];
		c->members = NULL;
	}
	s = out->summary = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	snprintf(s->node, sizeof(s->node), "%s", opts && opts->node ? opts->node : full->host);
	s->full_dump = strndup(opts && opts->full_dump ? opts->full_dump : "",
			       FR_SUMMARY_PATH_MAX);
	if (!s->full_dump)
		return -ENOMEM;
	/* A summary of a summary still counts against the full dump. */
	s->entries_left_out = was ? was->entries_left_out : 0;
	s->threads_left_out = was ? was->threads_left_out : 0;
	return 0;
}

int fr_trace_summarize(const struct fr_trace *full, const struct fr_summary_focus *focus,
		       const struct fr_summary_opts *opts, struct fr_trace *out)
{
	size_t window = opts && opts->window ? opts->window : FR_SUMMARY_WINDOW;
	size_t comms = opts && opts->comms ? opts->comms : FR_SUMMARY_COMMS;
	struct group *g = NULL;
	bool *keep = NULL;
	size_t ng = 0, cap = 0;
	int rc = -ENOMEM;

	memset(out, 0, sizeof(*out));
	if (copy_header(full, opts, out) < 0)
		goto out_free;
	keep = calloc(full->nops ? full->nops : 1, sizeof(*keep));
	g = keep ? group_ops(full, focus, &ng) : NULL;
	if (!g)
		goto out_free;
	qsort(g, ng, sizeof(*g), cmp_groups);
	for (size_t i = 0; i < ng && i < comms; i++)
		mark_group(full, &g[i], focus, window, keep);
	for (size_t i = 0; i < full->nops; i++)
		if (keep[i] && copy_op(out, &cap, &full->ops[i]) < 0)
			goto out_free;
	if (copy_threads(out, full) < 0)
		goto out_free;
	out->summary->entries_left_out += full->nops - out->nops;
	out->summary->threads_left_out += full->nthreads - out->nthreads;
	rc = 0;

out_free:
	if (g)
		groups_free(g, ng);
	free(keep);
	if (rc)
		fr_trace_free(out);
	return rc;
}

/* Copies the file at `from` to `to` (atomically). */
static int copy_file(const char *from, const char *to, char *err, size_t errlen)
{
	struct stat st;
	char *buf;
	ssize_t got = 0;
	int fd = fr_dump_open(from, &st, err, errlen);
	int rc;

	if (fd < 0)
		return fd;
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	while (buf && got < st.st_size) {
		ssize_t r = read(fd, buf + got, (size_t)(st.st_size - got));

		if (r <= 0)
			break;
		got += r;
	}
	close(fd);
	if (!buf || got != st.st_size) {
		free(buf);
		snprintf(err, errlen, "%s: cannot read it whole", from);
		return buf ? -EIO : -ENOMEM;
	}
	rc = fr_write_file_atomic(to, buf, (size_t)got);
	free(buf);
	if (rc < 0)
		snprintf(err, errlen, "%s: %s", to, strerror(-rc));
	return rc;
}

int fr_summary_write_dir(const struct fr_evidence *ev, const struct fr_summary_focus *focus,
			 const struct fr_summary_opts *opts, const char *outdir, char *err,
			 size_t errlen)
{
	char path[FR_SUMMARY_PATH_MAX + 1];
	int rc;

	for (size_t i = 0; i < ev->ndumps; i++) {
		const struct fr_trace *t = ev->dumps[i];
		struct fr_summary_opts o = opts ? *opts : (struct fr_summary_opts){ 0 };
		/* The path a node would serve it by, whatever the caller's
		 * working directory. */
		char *where = realpath(ev->paths[i], NULL);
		struct fr_trace s;
		char *text;
		size_t len;

		o.node = t->host;
		o.full_dump = where ? where : ev->paths[i];
		rc = fr_trace_summarize(t, focus, &o, &s);
		free(where);
		if (rc < 0) {
			snprintf(err, errlen, "%s: out of memory", ev->paths[i]);
			return -ENOMEM;
		}
		rc = fr_dump_serialize(&s, &text, &len);
		fr_trace_free(&s);
		if (rc < 0) {
			snprintf(err, errlen, "%s: out of memory", ev->paths[i]);
			return rc;
		}
		snprintf(path, sizeof(path), "%s/rank-%" PRIu32 ".json", outdir, t->rank);
		rc = fr_write_file_atomic(path, text, len);
		free(text);
		if (rc < 0) {
			snprintf(err, errlen, "%s: %s", path, strerror(-rc));
			return rc;
		}
	}
	if (!ev->have_manifest)
		return 0;
	snprintf(path, sizeof(path), "%s/manifest.json", outdir);
	return copy_file(ev->manifest_path, path, err, errlen);
}

static int cmp_trace_rank(const void *a, const void *b)
{
	uint32_t x = (*(const struct fr_trace *const *)a)->rank;
	uint32_t y = (*(const struct fr_trace *const *)b)->rank;

	return (x > y) - (x < y);
}

/* The summaries among `traces`, by rank, in a new array (*n of them);
 * NULL when none or out of memory. */
static const struct fr_trace **summaries(const struct fr_trace *const *traces, size_t ntraces,
					 size_t *n)
{
	const struct fr_trace **s = NULL;

	*n = 0;
	for (size_t i = 0; i < ntraces; i++) {
		if (!traces[i] || !traces[i]->summary)
			continue;
		if (!s && !(s = malloc(ntraces * sizeof(*s))))
			return NULL;
		s[(*n)++] = traces[i];
	}
	if (s)
		qsort(s, *n, sizeof(*s), cmp_trace_rank);
	return s;
}

json_t *fr_summary_full_dumps_json(const struct fr_trace *const *traces, size_t ntraces)
{
	size_t n;
	const struct fr_trace **s = summaries(traces, ntraces, &n);
	json_t *arr = json_array();
	int bad = !arr;

	for (size_t i = 0; i < n && !bad; i++) {
		json_t *o = json_object();

		bad |= append(arr, o);
		if (!o)
			break;
		bad |= set(o, "rank", json_integer(s[i]->rank));
		bad |= set(o, "node", JSTR(s[i]->summary->node));
		bad |= set(o, "path", JSTRZ(s[i]->summary->full_dump));
	}
	free(s);
	if (bad) {
		json_decref(arr);
		return NULL;
	}
	return arr;
}

/* The culprits whose full dumps the report names, at most. */
#define CULPRIT_DUMPS_SHOWN 8

void fr_summary_print(FILE *out, const struct fr_verdict *v, const struct fr_trace *const *traces,
		      size_t ntraces)
{
	size_t n, shown = 0;
	const struct fr_trace **s = summaries(traces, ntraces, &n);
	uint32_t *ranks = s ? malloc(n * sizeof(*ranks)) : NULL;
	uint64_t left = 0;
	char buf[256];

	if (!ranks) {
		free(s);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		ranks[i] = s[i]->rank;
		left += s[i]->summary->entries_left_out;
	}
	fr_format_ranks(buf, sizeof(buf), ranks, n);
	fprintf(out, "\nSummaries: the evidence of rank%s %s%s is a summary (%" PRIu64
		" entries left out); the full dumps stay on the nodes (--json lists them)\n",
		n == 1 ? "" : "s", buf, strlen(buf) == sizeof(buf) - 1 ? "..." : "", left);
	for (size_t c = 0; c < v->nculprits && shown < CULPRIT_DUMPS_SHOWN; c++) {
		const struct fr_trace key = { .rank = v->culprits[c].rank };
		const struct fr_trace *kp = &key;
		const struct fr_trace **t = bsearch(&kp, s, n, sizeof(*s), cmp_trace_rank);

		if (!t)
			continue;
		fprintf(out, "  rank %" PRIu32 "'s full dump: %s:%s\n", (*t)->rank,
			(*t)->summary->node, (*t)->summary->full_dump);
		shown++;
	}
	free(ranks);
	free(s);
}
