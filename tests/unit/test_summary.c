/*
 * Summaries (dumps/summary.c): what one keeps of a rank's evidence, that it
 * reads back as a summary, and the test that matters: the correlation
 * engine gives the same verdict on an incident directory of summaries as
 * on the full dumps, focused on the stuck operation and not, for the
 * stored incidents (tests/data/analyze) and jobs built here.
 */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "correlate_fixtures.h"
#include "dump.h"
#include "evidence.h"
#include "summary.h"

/* The directory of the test running (made by setup, removed by teardown). */
static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/fr-test-summary.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char *cmd;
	int rc;

	(void)state;
	if (asprintf(&cmd, "rm -rf '%s'", dir) < 0)
		return -1;
	rc = system(cmd);
	free(cmd);
	return rc == 0 ? 0 : -1;
}

static char *sub(const char *name)
{
	char *p;

	assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

/* The verdict fr-analyze gives on directory `d` (its evidence in `ev`). */
static void verdict_of(const char *d, struct fr_evidence *ev, struct fr_verdict *v)
{
	memset(ev, 0, sizeof(*ev));
	assert_int_equal(fr_evidence_load_dir(ev, d), 0);
	assert_int_equal(fr_correlate(ev->traces, ev->ntraces, ev->world_size, v), 0);
	assert_true(fr_verdict_name_silent(v, ev->traces, ev->ntraces) >= 0);
}

static void assert_same_op(const struct fr_op *a, const struct fr_op *b)
{
	assert_string_equal(a->comm, b->comm);
	assert_int_equal(a->seq, b->seq);
	assert_int_equal(a->type, b->type);
}

/* Same verdict kind, culprits, reasons, stuck operation, waiting ranks. */
static void assert_same_verdict(const struct fr_verdict *a, const struct fr_verdict *b)
{
	assert_string_equal(a->summary, b->summary);
	assert_string_equal(fr_verdict_name(a->kind), fr_verdict_name(b->kind));
	assert_int_equal(a->nculprits, b->nculprits);
	for (size_t i = 0; i < a->nculprits; i++) {
		assert_int_equal(a->culprits[i].rank, b->culprits[i].rank);
		assert_int_equal(a->culprits[i].reason, b->culprits[i].reason);
		assert_int_equal(a->culprits[i].has_last_completed, b->culprits[i].has_last_completed);
		if (a->culprits[i].has_last_completed)
			assert_same_op(&a->culprits[i].last_completed, &b->culprits[i].last_completed);
		assert_int_equal(a->culprits[i].has_op, b->culprits[i].has_op);
		if (a->culprits[i].has_op)
			assert_same_op(&a->culprits[i].op, &b->culprits[i].op);
	}
	assert_int_equal(a->has_op, b->has_op);
	if (a->has_op)
		assert_same_op(&a->op, &b->op);
	assert_int_equal(a->comm_size, b->comm_size);
	for (uint32_t i = 0; a->comm_ranks && i < a->comm_size; i++)
		assert_int_equal(a->comm_ranks[i], b->comm_ranks[i]);
	assert_int_equal(a->nwaiting, b->nwaiting);
	for (size_t i = 0; i < a->nwaiting; i++)
		assert_int_equal(a->waiting[i], b->waiting[i]);
}

/*
 * Summarizes every dump of incident `full` into `name` (focused on the
 * stuck operation, or not) and checks that the verdict is the same.
 * Returns whether any summary left an entry out.
 */
static bool check_equivalent(const char *full, const char *name, bool focused)
{
	struct fr_evidence ev, sev;
	struct fr_verdict v, sv;
	struct fr_summary_focus focus = { NULL, 0 };
	char *out = sub(name);
	char err[512];
	bool left_out = false;

	verdict_of(full, &ev, &v);
	if (focused && v.has_op) {
		focus.comm = v.op.comm;
		focus.seq = v.op.seq;
	}
	assert_int_equal(mkdir(out, 0755), 0);
	if (fr_summary_write_dir(&ev, focus.comm ? &focus : NULL, NULL, out, err, sizeof(err)))
		fail_msg("%s", err);
	verdict_of(out, &sev, &sv);
	assert_int_equal(sev.ndumps, ev.ndumps);
	assert_true(fr_evidence_has_summaries(&sev));
	assert_false(fr_evidence_has_summaries(&ev));
	for (size_t i = 0; i < sev.ndumps; i++) {
		assert_non_null(sev.dumps[i]->summary);
		left_out |= sev.dumps[i]->summary->entries_left_out > 0;
	}
	assert_same_verdict(&v, &sv);
	fr_verdict_free(&sv);
	fr_verdict_free(&v);
	fr_evidence_free(&sev);
	fr_evidence_free(&ev);
	free(out);
	return left_out;
}

/* Both ways, into "<name>-f" and "<name>-n". */
static bool check_both(const char *full, const char *name)
{
	char f[64], n[64];

	snprintf(f, sizeof(f), "%s-f", name);
	snprintf(n, sizeof(n), "%s-n", name);
	return check_equivalent(full, f, true) | check_equivalent(full, n, false);
}

/* Writes job `j` as an incident directory `name`: each rank's dump and a
 * manifest (format 2.0: the communicators table) of every rank's trace. */
static char *write_job(struct job *j, const char *name)
{
	char *d = sub(name);
	const struct fr_trace *ts[MAX_RANKS];
	size_t n = 0;
	char *text, *path;
	size_t len;

	assert_int_equal(mkdir(d, 0755), 0);
	for (uint32_t r = 0; r < j->world; r++) {
		if (!j->ev[r])
			continue;
		ts[n++] = &j->ev[r]->t;
		assert_int_equal(fr_dump_serialize(&j->ev[r]->t, &text, &len), 0);
		assert_true(asprintf(&path, "%s/rank-%" PRIu32 ".json", d, r) > 0);
		assert_int_equal(fr_write_file_atomic(path, text, len), 0);
		free(path);
		free(text);
	}
	assert_int_equal(fr_json_text(fr_manifest_to_json("job", "inc", "watchdog", j->world, 1, 2,
							    ts, n, NULL),
				      JSON_COMPACT, &text, &len),
			 0);
	assert_true(asprintf(&path, "%s/manifest.json", d) > 0);
	assert_int_equal(fr_write_file_atomic(path, text, len), 0);
	free(path);
	free(text);
	return d;
}

static void test_stored_incidents(void **state)
{
	const char *data = getenv("FR_TEST_DATA") ? getenv("FR_TEST_DATA") : "tests/data";
	char *d;

	(void)state;
	assert_true(asprintf(&d, "%s/analyze/two-comms", data) > 0);
	check_both(d, "two-comms");
	free(d);
	assert_true(asprintf(&d, "%s/analyze/nccl-pair", data) > 0);
	check_both(d, "nccl-pair");
	free(d);
}

/*
 * 8 ranks with 200 collectives each on world and on "tp" (ranks in pairs),
 * more than a summary keeps; rank 5 never enters all_reduce #201 on world,
 * which the others wait in. Its last completed one (#200) must be in its
 * summary, and every other rank's entry at #201.
 */
static void test_long_hang(void **state)
{
	struct job *j = world_job(8);
	char *d;

	(void)state;
	for (uint32_t r = 0; r < 8; r++) {
		uint32_t pair[2] = { r & ~1u, r | 1u };

		add_comm(j, r, "tp", pair, 2);
		for (uint64_t s = 1; s <= 200; s++) {
			add_op(j, r, "tp", FR_OP_ALL_GATHER, s, FR_STATE_COMPLETED, 3600);
			add_op(j, r, "world", FR_OP_ALL_REDUCE, s, FR_STATE_COMPLETED, 3600);
		}
		if (r != 5)
			add_op(j, r, "world", FR_OP_ALL_REDUCE, 201, FR_STATE_ENTERED, 30);
	}
	d = write_job(j, "full");
	assert_true(check_both(d, "long"));
	free(d);
	job_free(j);
}

/* Rank 2 calls broadcast where the others call all_reduce #5. */
static void test_mismatch(void **state)
{
	struct job *j = mismatch_job(2, FR_OP_BROADCAST);
	char *d;

	(void)state;
	d = write_job(j, "full");
	check_both(d, "mismatch");
	free(d);
	job_free(j);
}

/* Ranks 1 and 2 wait in Irecvs from each other (a deadlock), behind
 * 12 communicators of history, more than a summary keeps entries of. */
static void test_deadlock_many_comms(void **state)
{
	struct job *j = world_job(4);
	char *d;

	(void)state;
	for (uint32_t r = 0; r < 4; r++) {
		uint32_t m[4] = { 0, 1, 2, 3 };

		for (int c = 0; c < 12; c++) {
			char id[16];

			snprintf(id, sizeof(id), "c%02d", c);
			add_comm(j, r, id, m, 4);
			history(j, r, id, 40);
		}
		history(j, r, "world", 1);
		if (r == 0 || r == 3) {
			add_op(j, r, "world", FR_OP_ALL_REDUCE, 2, FR_STATE_ENTERED, 15);
		} else {
			struct fr_op *op = add_op(j, r, "world", FR_OP_RECV, 1, FR_STATE_ENTERED, 50);

			op->peer = (int32_t)(3 - r);
			op->nonblocking = true;
			op->waited = true;
			op->t_started_ns = NOW_NS - S(20);
		}
	}
	d = write_job(j, "full");
	assert_true(check_both(d, "deadlock"));
	free(d);
	job_free(j);
}

/*
 * A collective that completed long ago but disagreed (rank 1 reduced with
 * max at #10 of 100): only a summary focused on it keeps it, so only the
 * focus gives the same verdict. The central daemon sends the focus.
 */
/*
 * How a rank died, and what NCCL said, are in its summary: rank 2
 * crashed (SIGSEGV) and rank 1 had an NCCL error, while ranks 0, 1 and 3
 * wait in all_reduce #11. The verdict from the summaries is crash, naming
 * both, as from the full dumps (they were lost from summaries before).
 */
static void test_death_kept(void **state)
{
	struct job *j = world_job(4);
	struct fr_evidence sev;
	struct fr_verdict sv;
	char *d, *n;
	char err[512];

	(void)state;
	for (uint32_t r = 0; r < 4; r++) {
		history(j, r, "world", 10);
		if (r != 2)
			add_op(j, r, "world", FR_OP_ALL_REDUCE, 11, FR_STATE_ENTERED, 30);
	}
	j->ev[2]->t.crash = calloc(1, sizeof(*j->ev[2]->t.crash));
	assert_non_null(j->ev[2]->t.crash);
	j->ev[2]->t.crash->signo = 11;
	j->ev[2]->t.crash->fault_addr = 0x10;
	j->ev[2]->t.crash->time_ns = NOW_NS - 31000000000ull;
	j->ev[1]->t.has_nccl_error = true;
	j->ev[1]->t.nccl_error.result = 6;
	j->ev[1]->t.nccl_error.time_ns = NOW_NS - 1000000000ull; /* after the crash */
	snprintf(j->ev[1]->t.nccl_error.comm, sizeof(j->ev[1]->t.nccl_error.comm), "world");
	d = write_job(j, "death");
	(void)check_both(d, "death");
	n = sub("death-s");
	{
		struct fr_evidence ev;
		struct fr_verdict v;

		verdict_of(d, &ev, &v);
		assert_int_equal(mkdir(n, 0755), 0);
		if (fr_summary_write_dir(&ev, NULL, NULL, n, err, sizeof(err)))
			fail_msg("%s", err);
		fr_verdict_free(&v);
		fr_evidence_free(&ev);
	}
	verdict_of(n, &sev, &sv);
	assert_int_equal(sv.kind, FR_VERDICT_CRASH);
	assert_int_equal(sv.nculprits, 2);
	assert_int_equal(sv.culprits[0].rank, 1);
	assert_int_equal(sv.culprits[0].reason, FR_REASON_NCCL_ERROR);
	assert_int_equal(sv.culprits[1].rank, 2);
	assert_int_equal(sv.culprits[1].reason, FR_REASON_CRASHED);
	assert_int_equal(sv.culprits[1].crash->signo, 11);
	for (size_t i = 0; i < sev.ndumps; i++)
		if (sev.dumps[i]->rank == 1)
			assert_true(sev.dumps[i]->has_nccl_error && sev.dumps[i]->nccl_error.result == 6);
	fr_verdict_free(&sv);
	fr_evidence_free(&sev);
	free(n);
	free(d);
	job_free(j);
}

static void test_old_mismatch_needs_focus(void **state)
{
	struct job *j = world_job(4);
	char *d;

	(void)state;
	for (uint32_t r = 0; r < 4; r++) {
		history(j, r, "world", 100);
		if (r == 1)
			j->ev[r]->t.ops[9].redop = "max";
	}
	d = write_job(j, "full");
	assert_true(check_equivalent(d, "old-f", true));
	free(d);
	job_free(j);
}

/* What one summary keeps, and that it reads back as one. */
static void test_summary_contents(void **state)
{
	struct job *j = world_job(2);
	struct fr_trace *t = &j->ev[0]->t;
	struct fr_summary_opts opts = { 4, 2, "nodeA", "/var/lib/x/rank-0.json" };
	struct fr_summary_focus focus = { "world", 50 };
	struct fr_trace s, back;
	char *text;
	size_t len;
	char err[256];

	(void)state;
	add_comm_own(j, 0, "a", 2, 0);
	add_comm_own(j, 0, "b", 2, 0);
	history(j, 0, "world", 100);
	history(j, 0, "a", 10);
	history(j, 0, "b", 10);
	add_op(j, 0, "b", FR_OP_ALL_REDUCE, 11, FR_STATE_ENTERED, 1);
	t->threads = calloc(2, sizeof(*t->threads));
	assert_non_null(t->threads);
	t->nthreads = 2;
	t->threads[0].current = true;
	t->threads[0].nframes = 1;
	t->threads[0].frames = calloc(1, sizeof(struct fr_frame));
	t->threads[0].frames[0].name = strdup("agent_loop");
	t->threads[1].tid = 7;
	t->threads[1].nframes = 1;
	t->threads[1].frames = calloc(1, sizeof(struct fr_frame));
	t->threads[1].frames[0].name = strdup("main");

	assert_int_equal(fr_trace_summarize(t, &focus, &opts, &s), 0);
	/* Comms "world" (the focus) and "b" (in flight) keep entries, "a" none;
	 * world's 4 are its last completed and 3 around #50, b's its entry in
	 * flight and the newest. */
	assert_int_equal(s.nops, 8);
	assert_string_equal(s.ops[0].comm, "world");
	assert_int_equal(s.ops[0].seq, 48);
	assert_int_equal(s.ops[2].seq, 50);
	assert_int_equal(s.ops[3].seq, 100);
	assert_string_equal(s.ops[4].comm, "b");
	assert_int_equal(s.ops[4].seq, 8);
	assert_int_equal(s.ops[7].seq, 11);
	/* Every communicator's progress, no members. */
	assert_int_equal(s.ncomms, t->ncomms);
	for (size_t i = 0; i < s.ncomms; i++)
		assert_null(s.comms[i].members);
	assert_int_equal(fr_trace_comm(&s, "a")->last_completed, 10);
	/* The application thread only. */
	assert_int_equal(s.nthreads, 1);
	assert_int_equal(s.threads[0].tid, 7);
	assert_string_equal(s.summary->node, "nodeA");
	assert_int_equal(s.summary->entries_left_out, t->nops - 8);
	assert_int_equal(s.summary->threads_left_out, 1);

	/* Written as 1.10 with "summary", its entries without PyTorch's
	 * copies, read back by both readers. */
	assert_int_equal(fr_dump_serialize(&s, &text, &len), 0);
	assert_non_null(strstr(text, "\"version\":\"1.10\""));
	assert_non_null(strstr(text, "\"entries\":[{\"record_id\":"));
	assert_null(strstr(text, "\"process_group\""));
	assert_null(strstr(text, "\"profiling_name\""));
	assert_null(strstr(text, "\"input_sizes\""));
	assert_null(strstr(text, "\"retired\""));
	assert_non_null(strstr(text, "\"summary\":{\"node\":\"nodeA\",\"full_dump\":"
				     "\"/var/lib/x/rank-0.json\",\"entries_left_out\":"));
	assert_non_null(strstr(text, "\"ranks\":[]"));
	assert_int_equal(fr_dump_parse(text, len, "s.json", &back, err, sizeof(err)), 0);
	assert_int_equal(back.nops, s.nops);
	for (size_t i = 0; i < s.nops; i++) {
		assert_string_equal(back.ops[i].comm, s.ops[i].comm);
		assert_int_equal(back.ops[i].seq, s.ops[i].seq);
		assert_int_equal(back.ops[i].type, s.ops[i].type);
		assert_int_equal(back.ops[i].state, s.ops[i].state);
		assert_int_equal(back.ops[i].count, s.ops[i].count);
		assert_string_equal(back.ops[i].dtype, s.ops[i].dtype);
	}
	assert_non_null(back.summary);
	assert_string_equal(back.summary->full_dump, "/var/lib/x/rank-0.json");
	assert_int_equal(back.summary->threads_left_out, 1);
	fr_trace_free(&back);
	free(text);
	/* A whole dump is 1.4 as before, without the key. */
	assert_int_equal(fr_dump_serialize(t, &text, &len), 0);
	assert_non_null(strstr(text, "\"version\":\"1.4\""));
	assert_null(strstr(text, "\"summary\""));
	free(text);
	fr_trace_free(&s);
	job_free(j);
}

/* One thread of `t`: its native frame `name`, and Python frames
 * (function, line) pairs in train.py, innermost first. */
static void add_thread(struct fr_trace *t, uint32_t tid, const char *name, size_t npy, ...)
{
	struct fr_thread *th;
	va_list ap;

	t->threads = realloc(t->threads, (t->nthreads + 1) * sizeof(*t->threads));
	assert_non_null(t->threads);
	th = &t->threads[t->nthreads++];
	memset(th, 0, sizeof(*th));
	th->tid = tid;
	th->nframes = 1;
	th->frames = calloc(1, sizeof(*th->frames));
	assert_non_null(th->frames);
	th->frames[0].name = strdup(name);
	th->npyframes = npy;
	th->pyframes = npy ? calloc(npy, sizeof(*th->pyframes)) : NULL;
	va_start(ap, npy);
	for (size_t i = 0; i < npy; i++) {
		th->pyframes[i].function = strdup(va_arg(ap, const char *));
		th->pyframes[i].file = strdup("/srv/train.py");
		th->pyframes[i].line = va_arg(ap, uint32_t);
	}
	va_end(ap);
}

/*
 * A rank that runs Python: its summary keeps the application thread's
 * Python frames, the thread that runs Python when that is another one (the
 * one the report's merged stacks compare), and the dump's python_note, and
 * reads them back; the report's merged stacks from summaries are those
 * from the full dumps.
 */
static void test_summary_python(void **state)
{
	struct job *j = world_job(2);
	struct fr_summary_opts opts = { 0 };
	struct fr_trace s[2], back;
	const struct fr_trace *full_idx[2], *sum_idx[2];
	struct fr_stack_groups a, b;
	char *text;
	size_t len;
	char err[256];

	(void)state;
	for (uint32_t r = 0; r < 2; r++) {
		struct fr_trace *t = &j->ev[r]->t;

		history(j, r, "world", 4);
		/* A native-only thread first (a helper in C), then Python's
		 * main thread, then a data loader. */
		add_thread(t, 10, "helper_loop", 0);
		if (r == 1)
			add_thread(t, 11, "clock_nanosleep", 2, "load_batch", (uint32_t)41, "main",
				   (uint32_t)120);
		else
			add_thread(t, 11, "PMPI_Allreduce", 2, "train_step", (uint32_t)88, "main",
				   (uint32_t)120);
		add_thread(t, 12, "sem_wait", 1, "prefetch", (uint32_t)20);
		snprintf(t->python_note, sizeof(t->python_note), "a note on rank %u", r);
		full_idx[r] = t;
		assert_int_equal(fr_trace_summarize(t, NULL, &opts, &s[r]), 0);
		sum_idx[r] = &s[r];
	}
	/* The application thread (the helper) and the Python one, not the loader. */
	assert_int_equal(s[1].nthreads, 2);
	assert_int_equal(s[1].threads[0].tid, 10);
	assert_int_equal(s[1].threads[1].tid, 11);
	assert_int_equal(s[1].threads[1].npyframes, 2);
	assert_string_equal(s[1].threads[1].pyframes[0].function, "load_batch");
	assert_int_equal(s[1].threads[1].pyframes[0].line, 41);
	assert_int_equal(s[1].summary->threads_left_out, 1);
	assert_string_equal(s[1].python_note, "a note on rank 1");

	/* Written as a summary (1.10), read back with its Python frames and note. */
	assert_int_equal(fr_dump_serialize(&s[1], &text, &len), 0);
	assert_non_null(strstr(text, "\"version\":\"1.10\""));
	assert_int_equal(fr_dump_parse(text, len, "s.json", &back, err, sizeof(err)), 0);
	assert_non_null(back.summary);
	assert_int_equal(back.nthreads, 2);
	assert_int_equal(back.threads[1].npyframes, 2);
	assert_string_equal(back.threads[1].pyframes[1].function, "main");
	assert_int_equal(back.threads[1].pyframes[1].line, 120);
	assert_string_equal(back.python_note, "a note on rank 1");
	fr_trace_free(&back);
	free(text);

	/* The same groups, by Python frames, from either. */
	assert_int_equal(fr_stack_groups_build_python(full_idx, 2, &a), 0);
	assert_int_equal(fr_stack_groups_build_python(sum_idx, 2, &b), 0);
	assert_int_equal(a.ngroups, 2);
	assert_int_equal(b.ngroups, 2);
	for (size_t g = 0; g < 2; g++) {
		assert_int_equal(a.groups[g].nranks, b.groups[g].nranks);
		assert_int_equal(a.groups[g].ranks[0], b.groups[g].ranks[0]);
		assert_int_equal(fr_pyframes_cmp(a.groups[g].pyframes, a.groups[g].npyframes,
						 b.groups[g].pyframes, b.groups[g].npyframes),
				 0);
	}
	fr_stack_groups_free(&a);
	fr_stack_groups_free(&b);
	fr_trace_free(&s[0]);
	fr_trace_free(&s[1]);
	job_free(j);
}

/* A malformed "summary" is refused with its place. */
static void test_bad_summary(void **state)
{
	static const char *const bad[][2] = {
		{ "\"summary\":7", "summary: expected an object" },
		{ "\"summary\":{\"full_dump\":\"/x\"}", "summary.node: missing" },
		{ "\"summary\":{\"node\":\"n\",\"full_dump\":\"/x\",\"entries_left_out\":-1}",
		  "summary.entries_left_out" },
	};
	struct job *j = world_job(1);
	char *text, *doc;
	size_t len;
	char err[256];
	struct fr_trace t;

	(void)state;
	assert_int_equal(fr_dump_serialize(&j->ev[0]->t, &text, &len), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		/* In place of the opening brace's first key. */
		assert_true(asprintf(&doc, "{%s,%s", bad[i][0], text + 1) > 0);
		assert_int_equal(fr_dump_parse(doc, strlen(doc), "s.json", &t, err, sizeof(err)),
				 -EPROTO);
		if (!strstr(err, bad[i][1]))
			fail_msg("\"%s\" does not say \"%s\"", err, bad[i][1]);
		free(doc);
	}
	free(text);
	job_free(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_summary_contents),
		cmocka_unit_test(test_summary_python),
		cmocka_unit_test(test_bad_summary),
		cmocka_unit_test_setup_teardown(test_stored_incidents, setup, teardown),
		cmocka_unit_test_setup_teardown(test_long_hang, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deadlock_many_comms, setup, teardown),
		cmocka_unit_test_setup_teardown(test_old_mismatch_needs_focus, setup, teardown),
		cmocka_unit_test_setup_teardown(test_death_kept, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
