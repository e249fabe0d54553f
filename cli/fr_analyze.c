/*
 * fr-analyze: the offline analyzer. Reads an incident directory (or any
 * directory of rank dumps), correlates the ranks' evidence with the same
 * engine the daemon uses live, and says which rank the job is stuck on and
 * why, for a person or as JSON.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "../dumps/correlate.h"
#include "../dumps/dump.h"
#include "../dumps/evidence.h"
#include "../dumps/kernel_log.h"
#include "../dumps/summary.h"
#include "../include/flightrec.h"
#include "live.h"

#define PROG "fr-analyze"

enum {
	EXIT_VERDICT_OK = 0,
	EXIT_PROBLEM = 1,
	EXIT_UNUSABLE = 2,
};

/* The synopsis, in the help and in the reply to bad usage. */
#define SYNOPSIS PROG " [--json] [--rank N] [--comm ID] PATH"
#define SYNOPSIS_LIVE PROG " [--json] --live http://HOST:PORT/JOB"

static const char usage_text[] =
	"Usage: " SYNOPSIS "\n"
	"       " SYNOPSIS_LIVE "\n"
	"       " PROG " --help | --version\n"
	"\n"
	"Names the rank(s) and the operation a hung MPI/NCCL job is stuck on, from\n"
	"the dumps flightrec collected.\n"
	"\n"
	"PATH is an incident directory written by flightrecd, or any directory of\n"
	"rank dumps. " PROG " reads every rank-*.json in it, and any other *.json\n"
	"whose \"format\" is \"" FR_DUMP_FORMAT "\". It also reads PyTorch Flight\n"
	"Recorder dumps (pickle or JSON, told apart by content), one per rank, named\n"
	"with the global rank at the end (nccl_trace_rank_0, nccl_trace_rank_1, ...):\n"
	"process groups become communicators, and a rank's stack is the Python frames\n"
	"of its latest operation. When manifest.json is present, the\n"
	"job's world size comes from it, and a rank without a usable dump file is\n"
	"judged from the daemon's live view of it (and its status: unresponsive,\n"
	"disconnected, finished); otherwise the world size is the one most dumps\n"
	"state, and a rank without a dump counts as missing. When no rank dumped at\n"
	"all (the whole job froze), the ranks the daemon found unresponsive or\n"
	"disconnected are named as a hang even with nothing in flight.\n"
	"\n"
	"A dump that cannot be read (malformed, unknown format version, I/O error)\n"
	"is reported on stderr with its file name and left out: that rank is then\n"
	"treated as having no dump, so that one lost file does not hide the verdict.\n"
	"So is a dump of a rank outside that world size, or naming such a rank,\n"
	"and a symbolic link, a FIFO, a socket or a device in place of a dump or\n"
	"the manifest: links are not followed (copy dumps in from elsewhere).\n"
	"Two dumps of the same rank are an error.\n"
	"\n"
	"Options:\n"
	"  --json      print the verdict as JSON (the contract documented in the\n"
	"              README) instead of the report for a person\n"
	"  --rank N    print what the evidence says of global rank N instead of a\n"
	"              verdict (nothing is correlated): its identity, status, dump\n"
	"              time and dropped entries, its communicators (its rank in each,\n"
	"              size, last seq entered and completed), its flight-recorder\n"
	"              entries oldest first (times relative to its dump) and the\n"
	"              stacks of its threads; with --json, its evidence as a dump\n"
	"              object (dumps/FORMAT.md). The evidence is its dump, else the\n"
	"              manifest's live view of it\n"
	"  --comm ID   look at communicator ID only: every rank's evidence keeps\n"
	"              that communicator and the operations on it, so the verdict\n"
	"              (or --rank's entries) concerns ID alone\n"
	"  --live URL  print the live verdict of a running job instead, from the\n"
	"              flightrecd that watches it: URL is http://HOST:PORT/JOB (HOST\n"
	"              a name, an IPv4 address or an IPv6 address in brackets; PORT\n"
	"              the daemon's --http port, " LIVE_DEFAULT_PORT " when left out). The output is\n"
	"              what " PROG " prints for the same evidence, text or --json;\n"
	"              no PATH, --rank or --comm with it. Plain HTTP, one request,\n"
	"              bounded to 10 s\n"
	"  -h, --help     print this help and exit\n"
	"  -V, --version  print the version and exit\n"
	"\n"
	"Exit status:\n"
	"  0  no problem found (nothing in flight, no mismatch)\n"
	"  1  a problem was named: hang, mismatch or deadlock\n"
	"  2  bad usage, or no usable evidence (no dump could be read, PATH is not\n"
	"     a readable directory, two dumps of one rank)\n"
	"With --rank: 0 when the evidence has rank N, 2 when it has none of it.\n"
	"With --live: 0 and 1 as above for the daemon's verdict; 2 when the daemon\n"
	"cannot be reached or does not answer in time, or knows no such job.\n"
	"A --comm that no evidence names is bad usage (2).\n";

/*
 * Prints the warnings of `ev` not printed yet, one a line, as every
 * message of ours: after the program's name.
 */
static void print_warnings(const struct fr_evidence *ev)
{
	static size_t shown;

	for (; shown < ev->nwarnings; shown++)
		fprintf(stderr, PROG ": %s\n", ev->warnings[shown].text);
}

/* The warnings so far, then why `ev` cannot be judged; the exit status. */
static int unusable(const struct fr_evidence *ev)
{
	print_warnings(ev);
	fprintf(stderr, PROG ": %s\n", ev->error ? ev->error : "out of memory");
	return EXIT_UNUSABLE;
}

/* The verdict on `ev`, for a person or as JSON. Returns an exit status. */
static int report(struct fr_evidence *ev, bool json)
{
	const struct fr_trace *const *traces = ev->traces;
	size_t n = ev->ntraces;
	struct fr_verdict v;
	int status;
	int rc;

	fr_evidence_check_members(ev);
	print_warnings(ev);
	rc = fr_correlate(traces, n, ev->world_size, &v);
	if (rc < 0) {
		fprintf(stderr, PROG ": correlating: %s\n", strerror(-rc));
		return EXIT_UNUSABLE;
	}
	/* No rank dumped (every one frozen or gone): whoever the daemon saw
	 * go silent is the finding, even with nothing in flight. */
	rc = fr_verdict_name_silent(&v, traces, n);
	if (rc < 0) {
		fprintf(stderr, PROG ": correlating: %s\n", strerror(-rc));
		fr_verdict_free(&v);
		return EXIT_UNUSABLE;
	}
	status = v.kind == FR_VERDICT_OK ? EXIT_VERDICT_OK : EXIT_PROBLEM;
	if (ev->have_manifest) {
		v.klogs = ev->manifest.klogs;
		v.nklogs = ev->manifest.nklogs;
		fr_klog_name_oom(&v);
	}
	if (json) {
		json_t *o = fr_verdict_to_json(&v);

		/* Only with summaries: other output stays byte for byte. */
		if (o && fr_evidence_has_summaries(ev) &&
		    json_object_set_new(o, "full_dumps", fr_summary_full_dumps_json(traces, n))) {
			json_decref(o);
			o = NULL;
		}
		if (o && fr_klog_add_json(o, &v, traces, n)) {
			json_decref(o);
			o = NULL;
		}
		if (!o || json_dumpf(o, stdout, JSON_INDENT(2)) < 0) {
			fprintf(stderr, PROG ": cannot write the verdict as JSON\n");
			status = EXIT_UNUSABLE;
		}
		fputc('\n', stdout);
		json_decref(o);
	} else {
		fr_verdict_print(stdout, &v, traces, n);
		fr_summary_print(stdout, &v, traces, n);
	}
	fr_verdict_free(&v);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, PROG ": writing the report: %s\n", strerror(errno));
		return EXIT_UNUSABLE;
	}
	return status;
}

/* ---- --rank: one rank's evidence ---- */

/* No rank reaches this: FORMAT.md caps a dump's world_size at 2^24. */
#define RANK_ARG_MAX ((1u << 24) - 1)

/*
 * Reads --rank's value, a global rank in decimal. Returns false after
 * saying what is wrong with it.
 */
static bool parse_rank(const char *s, uint32_t *out)
{
	const char *digits = s[0] == '-' ? s + 1 : s;
	uint64_t v = 0;

	if (!digits[0] || strspn(digits, "0123456789") != strlen(digits)) {
		fprintf(stderr, PROG ": --rank '%s': not a rank (a global rank is a number: "
			"0, 1, ...)\n", s);
		return false;
	}
	if (digits != s) {
		fprintf(stderr, PROG ": --rank '%s': a rank is not negative\n", s);
		return false;
	}
	for (const char *p = digits; *p && v <= RANK_ARG_MAX; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	if (v > RANK_ARG_MAX) {
		fprintf(stderr, PROG ": --rank '%s': too large (a rank is below %u, the "
			"largest world a dump may state)\n", s, RANK_ARG_MAX + 1);
		return false;
	}
	*out = (uint32_t)v;
	return true;
}

/* A table cell: a communicator id (63 bytes) is the widest. */
#define CELL_MAX 80
#define COLS_MAX 12

/* A table printed in two passes: widen() over every row, then row(). */
struct table {
	size_t ncols;
	size_t width[COLS_MAX];
	bool right[COLS_MAX];      /* numbers align right */
};

static void table_widen(struct table *tb, char (*cells)[CELL_MAX])
{
	for (size_t i = 0; i < tb->ncols; i++) {
		size_t n = strlen(cells[i]);

		if (n > tb->width[i])
			tb->width[i] = n;
	}
}

static void table_row(FILE *out, const struct table *tb, char (*cells)[CELL_MAX])
{
	char line[COLS_MAX * (CELL_MAX + 2) + 1];
	size_t len = 0;

	for (size_t i = 0; i < tb->ncols; i++)
		len += (size_t)sprintf(line + len, tb->right[i] ? "  %*s" : "  %-*s",
				       (int)tb->width[i], cells[i]);
	/* Empty cells at the end leave no trailing blanks. */
	while (len && line[len - 1] == ' ')
		len--;
	line[len] = '\0';
	fprintf(out, "%s\n", line);
}

/* "2023-11-14 22:13:20.123 UTC", or "unknown" for 0. */
static void time_text(char *buf, size_t cap, uint64_t ns)
{
	time_t s = (time_t)(ns / 1000000000u);
	char day[32];
	struct tm tm;

	if (!ns || !gmtime_r(&s, &tm) || !strftime(day, sizeof(day), "%Y-%m-%d %H:%M:%S", &tm)) {
		snprintf(buf, cap, "unknown");
		return;
	}
	snprintf(buf, cap, "%s.%03u UTC", day, (unsigned)(ns % 1000000000u / 1000000u));
}

/* When `at_ns` was, from the reference time: "-12.345s"; "?" if unknown. */
static void age_text(char *buf, size_t cap, uint64_t at_ns, uint64_t ref_ns)
{
	if (!at_ns || !ref_ns)
		snprintf(buf, cap, "?");
	else if (at_ns <= ref_ns)
		snprintf(buf, cap, "-%.3fs", (double)(ref_ns - at_ns) / 1e9);
	else
		snprintf(buf, cap, "+%.3fs", (double)(at_ns - ref_ns) / 1e9);
}

/* "1.250s", "0.900ms", "12.0us": collectives span microseconds to hours. */
static void span_text(char *buf, size_t cap, uint64_t ns)
{
	if (ns >= 1000000000u)
		snprintf(buf, cap, "%.3fs", (double)ns / 1e9);
	else if (ns >= 1000000u)
		snprintf(buf, cap, "%.3fms", (double)ns / 1e6);
	else
		snprintf(buf, cap, "%.1fus", (double)ns / 1e3);
}

static bool op_is_p2p(const struct fr_op *op)
{
	return op->is_p2p || op->type == FR_OP_SEND || op->type == FR_OP_RECV ||
	       op->type == FR_OP_SENDRECV;
}

/* The state as the report names it: a GPU operation in flight is
 * "enqueued" until the device reaches it, then "started". */
static const char *op_state_text(const struct fr_op *op)
{
	if (op->captured)
		return "captured";
	if (op->gpu && op->state != FR_STATE_COMPLETED)
		return op->started ? "started" : "enqueued";
	return fr_state_name(op->state);
}

/* What --rank shows: the rank's trace, and every rank's, to name members. */
struct rank_view {
	const struct fr_trace *t;
	const struct fr_trace *const *all;
	size_t nall;
};

/*
 * The global rank of member `k` of communicator `id` as the lowest rank
 * whose evidence knows it says (the engine merges member lists the same
 * way), or FR_RANK_UNKNOWN: an NCCL rank knows only its own entry.
 */
static uint32_t member_named(const struct rank_view *v, const char *id, uint32_t k)
{
	uint32_t named = FR_RANK_UNKNOWN;
	uint32_t from = FR_RANK_UNKNOWN;

	for (size_t i = 0; i < v->nall; i++) {
		const struct fr_comm *c = fr_trace_comm(v->all[i], id);

		if (!c || !c->members || k >= c->size || c->members[k] == FR_RANK_UNKNOWN ||
		    v->all[i]->rank >= from)
			continue;
		named = c->members[k];
		from = v->all[i]->rank;
	}
	return named;
}

/*
 * "peer 2", "root 1", "peer any" (a receive from any source), "-" for
 * neither; "peer c1" is communicator rank 1, whose global rank no evidence
 * names. Returns whether it wrote such a "c" form.
 */
static bool peer_text(char *buf, size_t cap, const struct rank_view *v, const struct fr_op *op)
{
	bool p2p = op_is_p2p(op);
	const char *what = p2p ? "peer" : "root";
	int32_t global = p2p ? op->peer : op->root;
	uint32_t named;

	if (!p2p && !fr_op_is_rooted(op->type)) {
		snprintf(buf, cap, "-");
		return false;
	}
	if (global >= 0) {
		snprintf(buf, cap, "%s %" PRId32, what, global);
		return false;
	}
	if (op->peer_in_comm < 0) {
		snprintf(buf, cap, "%s %s", what, p2p && op->type != FR_OP_SEND ? "any" : "?");
		return false;
	}
	named = member_named(v, op->comm, (uint32_t)op->peer_in_comm);
	if (named != FR_RANK_UNKNOWN) {
		snprintf(buf, cap, "%s %" PRIu32, what, named);
		return false;
	}
	snprintf(buf, cap, "%s c%" PRId32, what, op->peer_in_comm);
	return true;
}

enum {
	E_RECORD, E_COMM, E_SEQ, E_OP, E_STATE, E_COUNT, E_DTYPE, E_PEER, E_ENTERED,
	E_DURATION, E_NOTES, E__COLS
};

static const char *const entry_heads[E__COLS] = {
	"record", "comm", "seq", "op", "state", "count", "dtype", "peer/root", "entered",
	"duration", "",
};

_Static_assert(E__COLS <= COLS_MAX, "the entries table has too many columns");

/* One entry's cells; returns whether its peer or root is a "c" form. */
static bool entry_cells(char (*c)[CELL_MAX], const struct rank_view *v, const struct fr_op *op)
{
	const struct fr_trace *t = v->t;
	bool cform;

	snprintf(c[E_RECORD], CELL_MAX, "%" PRIu64, op->record_id);
	snprintf(c[E_COMM], CELL_MAX, "%s", op->comm[0] ? op->comm : "?");
	snprintf(c[E_SEQ], CELL_MAX, "%" PRIu64, op->seq);
	snprintf(c[E_OP], CELL_MAX, "%s", fr_op_name(op->type));
	snprintf(c[E_STATE], CELL_MAX, "%s", op_state_text(op));
	snprintf(c[E_COUNT], CELL_MAX, "%" PRIu64, op->count);
	snprintf(c[E_DTYPE], CELL_MAX, "%s", op->dtype[0] ? op->dtype : "?");
	cform = peer_text(c[E_PEER], CELL_MAX, v, op);
	age_text(c[E_ENTERED], CELL_MAX, op->t_entered_ns, t->time_ns);
	if (op->state == FR_STATE_COMPLETED && op->t_entered_ns && op->t_completed_ns >= op->t_entered_ns)
		span_text(c[E_DURATION], CELL_MAX, op->t_completed_ns - op->t_entered_ns);
	else
		snprintf(c[E_DURATION], CELL_MAX, "-");
	snprintf(c[E_NOTES], CELL_MAX, "%s%s", op->nonblocking ? "nonblocking" : "",
		 op->waited ? ", waited on" : "");
	return cform;
}

static void print_rank_entries(FILE *out, const struct rank_view *v, const char *comm)
{
	const struct fr_trace *t = v->t;
	struct table tb = { .ncols = E__COLS };
	char cells[E__COLS][CELL_MAX];
	bool cform = false;

	if (!t->nops) {
		fprintf(out, "\nEntries: none%s%s in its evidence\n", comm ? " on " : "",
			comm ? comm : "");
		return;
	}
	fprintf(out, "\nEntries%s%s (%zu, oldest first; entered: before the %s):\n",
		comm ? " on " : "", comm ? comm : "", t->nops,
		t->status == FR_RANK_DUMPED ? "dump" : "daemon's view");
	tb.right[E_RECORD] = tb.right[E_SEQ] = tb.right[E_COUNT] = true;
	tb.right[E_ENTERED] = tb.right[E_DURATION] = true;
	for (size_t i = 0; i < E__COLS; i++)
		snprintf(cells[i], CELL_MAX, "%s", entry_heads[i]);
	table_widen(&tb, cells);
	for (size_t i = 0; i < t->nops; i++) {
		cform |= entry_cells(cells, v, &t->ops[i]);
		table_widen(&tb, cells);
	}
	for (size_t i = 0; i < E__COLS; i++)
		snprintf(cells[i], CELL_MAX, "%s", entry_heads[i]);
	table_row(out, &tb, cells);
	for (size_t i = 0; i < t->nops; i++) {
		entry_cells(cells, v, &t->ops[i]);
		table_row(out, &tb, cells);
	}
	if (cform)
		fprintf(out, "  (cN: communicator rank N, whose global rank no evidence names)\n");
}

enum { C_ID, C_DESC, C_RANK, C_SIZE, C_ENTERED, C_COMPLETED, C__COLS };

static const char *const comm_heads[C__COLS] = {
	"communicator", "desc", "its rank", "size", "last entered", "last completed",
};

static void comm_cells(char (*c)[CELL_MAX], const struct fr_comm *cm)
{
	snprintf(c[C_ID], CELL_MAX, "%s", cm->id);
	snprintf(c[C_DESC], CELL_MAX, "%s", cm->desc[0] ? cm->desc : "-");
	if (cm->rank == FR_RANK_UNKNOWN)
		snprintf(c[C_RANK], CELL_MAX, "?");
	else
		snprintf(c[C_RANK], CELL_MAX, "%" PRIu32, cm->rank);
	snprintf(c[C_SIZE], CELL_MAX, "%" PRIu32, cm->size);
	snprintf(c[C_ENTERED], CELL_MAX, "#%" PRIu64, cm->last_entered);
	snprintf(c[C_COMPLETED], CELL_MAX, "#%" PRIu64, cm->last_completed);
}

static void print_rank_comms(FILE *out, const struct fr_trace *t, const char *comm)
{
	struct table tb = { .ncols = C__COLS };
	char cells[C__COLS][CELL_MAX];

	if (!t->ncomms && comm) {
		fprintf(out, "\nCommunicators: its evidence does not list %s\n", comm);
		return;
	}
	if (!t->ncomms) {
		fprintf(out, "\nCommunicators: none in its evidence\n");
		return;
	}
	fprintf(out, "\nCommunicators (%zu):\n", t->ncomms);
	tb.right[C_RANK] = tb.right[C_SIZE] = tb.right[C_ENTERED] = tb.right[C_COMPLETED] = true;
	for (size_t i = 0; i < C__COLS; i++)
		snprintf(cells[i], CELL_MAX, "%s", comm_heads[i]);
	table_widen(&tb, cells);
	for (size_t i = 0; i < t->ncomms; i++) {
		comm_cells(cells, &t->comms[i]);
		table_widen(&tb, cells);
	}
	for (size_t i = 0; i < C__COLS; i++)
		snprintf(cells[i], CELL_MAX, "%s", comm_heads[i]);
	table_row(out, &tb, cells);
	for (size_t i = 0; i < t->ncomms; i++) {
		comm_cells(cells, &t->comms[i]);
		table_row(out, &tb, cells);
	}
}

/*
 * Each thread's stack, innermost frame first, as the report prints a
 * culprit's. The thread that wrote the dump is the agent's own and is left
 * out, as there: it says nothing about the application.
 */
static void print_rank_stacks(FILE *out, const struct fr_trace *t)
{
	size_t shown = 0;

	fprintf(out, "\nStacks:\n");
	for (size_t i = 0; i < t->nthreads; i++) {
		const struct fr_thread *th = &t->threads[i];

		if (th->current)
			continue;
		shown++;
		fr_thread_print(out, th);
	}
	if (!shown)
		fprintf(out, "  none in its evidence%s\n", t->status != FR_RANK_DUMPED ?
			" (the daemon's live view has none)" : "");
}

static void print_rank_head(FILE *out, const struct fr_trace *t, const char *from)
{
	bool dumped = t->status == FR_RANK_DUMPED;
	char when[64];

	time_text(when, sizeof(when), t->time_ns);
	fprintf(out, "Rank %" PRIu32 " of %" PRIu32 "\n", t->rank, t->world_size);
	/* A PyTorch dump names neither host nor pid. */
	fprintf(out, "  host:      %s", t->host[0] ? t->host : "unknown");
	if (t->pid)
		fprintf(out, ", pid %" PRIu32, t->pid);
	fputc('\n', out);
	if (dumped)
		fprintf(out, "  status:    dumped (its own dump, %s)\n", from);
	else
		fprintf(out, "  status:    %s (no dump: the daemon's live view of it, in %s)\n",
			fr_rank_status_name(t->status), from);
	fprintf(out, "  job:       %s\n", t->job[0] ? t->job : "unknown");
	fprintf(out, "  comm lib:  %s\n", t->comm_lib[0] ? t->comm_lib : "unknown");
	fprintf(out, "  %s %s\n", dumped ? "dumped at:" : "viewed at:", when);
	if (t->incident[0])
		fprintf(out, "  incident:  %s\n", t->incident);
	if (t->reason[0])
		fprintf(out, "  reason:    %s\n", t->reason);
	if (t->dropped)
		fprintf(out, "  dropped:   %" PRIu64 " older entries lost to ring wrap\n",
			t->dropped);
	else
		fprintf(out, "  dropped:   none\n");
}

/*
 * --rank: prints the evidence `ev` has of global rank `rank`, for a person
 * or as a dump object. `comm` is --comm's communicator or NULL. Returns an
 * exit status.
 */
static int show_rank(const struct fr_evidence *ev, uint32_t rank, bool json, const char *comm)
{
	const struct fr_trace *const *traces = ev->traces;
	size_t n = ev->ntraces;
	uint32_t world = ev->world_size;
	const char *dir = ev->dir;
	const struct fr_trace *t = NULL;
	struct rank_view view;
	const char *from;

	for (size_t i = 0; i < n && !t; i++)
		if (traces[i]->rank == rank)
			t = traces[i];
	view = (struct rank_view){ t, traces, n };
	if (!t || t->status == FR_RANK_MISSING) {
		fprintf(stderr, PROG ": %s: no evidence of rank %" PRIu32 " (", dir, rank);
		if (rank >= world)
			fprintf(stderr, "the job has %" PRIu32 " ranks, 0 to %" PRIu32 ")\n", world,
				world - 1);
		else if (t)
			fprintf(stderr, "no dump, and the manifest lists it as missing)\n");
		else
			fprintf(stderr, "no dump of it%s)\n", ev->have_manifest ?
				", and no view of it in the manifest" : "");
		return EXIT_UNUSABLE;
	}
	from = fr_evidence_source(ev, t);
	if (json) {
		json_t *o = fr_dump_to_json(t);

		if (!o || json_dumpf(o, stdout, JSON_INDENT(2)) < 0) {
			fprintf(stderr, PROG ": cannot write rank %" PRIu32 "'s evidence as JSON\n",
				rank);
			json_decref(o);
			return EXIT_UNUSABLE;
		}
		fputc('\n', stdout);
		json_decref(o);
	} else {
		print_rank_head(stdout, t, from ? from : "?");
		print_rank_comms(stdout, t, comm);
		print_rank_entries(stdout, &view, comm);
		print_rank_stacks(stdout, t);
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, PROG ": writing rank %" PRIu32 "'s evidence: %s\n", rank,
			strerror(errno));
		return EXIT_UNUSABLE;
	}
	return EXIT_VERDICT_OK;
}

/* ---- --live: the verdict of a running job, from the daemon ---- */

/*
 * --live URL: the daemon's live verdict, printed as it sends it. `filters`
 * says whether --rank or --comm was given, `npaths` how many PATHs: the
 * daemon judges the whole job, so neither goes with --live. Returns an
 * exit status.
 */
static int analyze_live(const char *url, bool json, bool filters, int npaths)
{
	int rc;

	if (filters || npaths) {
		fprintf(stderr, PROG ": --live takes no %s\nUsage: " SYNOPSIS_LIVE "\n",
			npaths ? "PATH (the daemon's live view is the evidence)" :
				 "--rank or --comm (the daemon judges the whole job)");
		return EXIT_UNUSABLE;
	}
	rc = live_analyze(PROG, url, json, stdout);
	if (rc < 0)
		return EXIT_UNUSABLE;
	return rc == 0 ? EXIT_VERDICT_OK : EXIT_PROBLEM;
}

/*
 * PATH: the verdict on the incident directory `dir`, or the evidence of
 * global rank `*rank` (--rank; NULL without), of communicator `comm`
 * alone (--comm; NULL without). Returns an exit status.
 */
static int analyze_dir(const char *dir, bool json, const uint32_t *rank, const char *comm)
{
	/*
	 * Static, so that what it holds at exit is still reachable: the
	 * evidence of a large incident is hundreds of megabytes in thousands
	 * of blocks, and the exit returns them at once, where freeing them one
	 * by one cost a tenth of a second of unmapping.
	 */
	static struct fr_evidence ev;
	struct stat st;

	if (stat(dir, &st) < 0) {
		fprintf(stderr, PROG ": %s: %s\n", dir, strerror(errno));
		return EXIT_UNUSABLE;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, PROG ": %s: not a directory (give the incident directory "
			"that holds the rank-*.json dumps)\n", dir);
		return EXIT_UNUSABLE;
	}
	if (fr_evidence_load_dir(&ev, dir) < 0 || (comm && fr_evidence_keep_comm(&ev, comm) < 0))
		return unusable(&ev);
	print_warnings(&ev);
	if (rank)
		return show_rank(&ev, *rank, json, comm);
	return report(&ev, json);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "rank", required_argument, NULL, 'r' },
		{ "comm", required_argument, NULL, 'c' },
		{ "live", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *comm = NULL;
	const char *live = NULL;
	bool json = false;
	bool by_rank = false;
	uint32_t rank = 0;
	int c;

	/*
	 * Each reading thread (dumps/evidence.c) parses file after file into
	 * scratch memory of the same sizes (a pickle's objects, tens of MiB):
	 * kept by malloc between files, it is faulted in once, where returning
	 * it to the kernel after each file made every file fault it in again
	 * (three times the time).
	 */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 1 << 30);
	opterr = 0;
	/* The leading ':' tells a missing value (':') from an unknown option. */
	while ((c = getopt_long(argc, argv, ":hV", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'r':
			if (!parse_rank(optarg, &rank))
				return EXIT_UNUSABLE;
			by_rank = true;
			break;
		case 'c':
			if (!optarg[0]) {
				fprintf(stderr, PROG ": --comm needs a communicator id\n");
				return EXIT_UNUSABLE;
			}
			comm = optarg;
			break;
		case 'l':
			live = optarg;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case 'V':
			printf(PROG " (flightrec) %s, reads dump format %d.x\n", FLIGHTREC_VERSION,
			       FR_DUMP_VERSION_MAJOR);
			return 0;
		case ':':
			fprintf(stderr, PROG ": option '%s' needs a value\n", argv[optind - 1]);
			fprintf(stderr, "Usage: " SYNOPSIS "\n");
			return EXIT_UNUSABLE;
		default:
			fprintf(stderr, PROG ": bad option '%s'\n", argv[optind - 1]);
			fprintf(stderr, "Try '" PROG " --help'.\n");
			return EXIT_UNUSABLE;
		}
	}
	if (live)
		return analyze_live(live, json, by_rank || comm, argc - optind);
	if (argc - optind != 1) {
		fprintf(stderr, PROG ": %s\nUsage: " SYNOPSIS "\n",
			argc - optind ? "one PATH only" : "missing PATH (an incident directory)");
		return EXIT_UNUSABLE;
	}
	return analyze_dir(argv[optind], json, by_rank ? &rank : NULL, comm);
}
