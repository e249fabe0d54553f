/*
 * Unit tests of the correlation engine's verdict in words: rank ranges
 * (verdict_text.c), the --json contract (verdict_json.c) and the report for
 * a person (verdict_report.c), its stacks grouped, readable at 1024 ranks.
 */
#include "correlate_fixtures.h"

static void test_format_ranks(void **state)
{
	const uint32_t a[] = { 0, 1, 2, 4, 5 };
	const uint32_t b[] = { 7 };
	const uint32_t c[] = { 1, 3, 5, 10, 11 };
	char buf[64];
	char small[5];

	(void)state;
	assert_int_equal(fr_format_ranks(buf, sizeof(buf), a, 5), 7);
	assert_string_equal(buf, "0-2,4-5");
	fr_format_ranks(buf, sizeof(buf), b, 1);
	assert_string_equal(buf, "7");
	assert_int_equal(fr_format_ranks(buf, sizeof(buf), NULL, 0), 0);
	assert_string_equal(buf, "");
	fr_format_ranks(buf, sizeof(buf), c, 5);
	assert_string_equal(buf, "1,3,5,10-11");
	/* Truncation works like snprintf: a NUL-terminated prefix and the
	 * length that was needed. */
	assert_int_equal(fr_format_ranks(small, sizeof(small), a, 5), 7);
	assert_string_equal(small, "0-2,");
	assert_int_equal(fr_format_ranks(NULL, 0, a, 5), 7);
}

static void test_json_contract(void **state)
{
	struct job *j = mismatch_job(2, FR_OP_BROADCAST);
	struct fr_verdict *v = correlate(j);
	json_t *o = fr_verdict_to_json(v);
	json_t *op, *c, *a;
	const char *opkeys[] = { "comm", "seq", "type", "count", "dtype", "bytes", "root",
				 "peer", "is_p2p", "state" };

	(void)state;
	assert_non_null(o);
	assert_string_equal(json_string_value(json_object_get(o, "verdict")), "mismatch");
	assert_true(json_is_array(json_object_get(o, "culprits")));
	assert_true(json_is_array(json_object_get(o, "waiting_ranks")));
	assert_true(json_is_real(json_object_get(o, "waited_s")));
	assert_int_equal(json_integer_value(json_object_get(o, "world_size")), 4);
	assert_string_equal(json_string_value(json_object_get(o, "summary")), v->summary);
	assert_true(json_is_array(json_object_get(o, "stragglers")));
	assert_int_equal(json_integer_value(json_object_get(json_object_get(o, "aligned"),
							    "comms")), 0);

	op = json_object_get(o, "op");
	assert_true(json_is_object(op));
	for (size_t i = 0; i < sizeof(opkeys) / sizeof(opkeys[0]); i++)
		assert_non_null(json_object_get(op, opkeys[i]));
	assert_string_equal(json_string_value(json_object_get(op, "type")), "all_reduce");
	assert_string_equal(json_string_value(json_object_get(op, "comm")), "world");
	assert_string_equal(json_string_value(json_object_get(op, "state")), "entered");
	assert_int_equal(json_integer_value(json_object_get(op, "seq")), 5);
	assert_int_equal(json_integer_value(json_object_get(op, "root")), -1);
	assert_true(json_is_false(json_object_get(op, "is_p2p")));
	a = json_object_get(op, "comm_ranks");
	assert_int_equal(json_array_size(a), 4);
	assert_int_equal(json_integer_value(json_array_get(a, 3)), 3);

	c = json_array_get(json_object_get(o, "culprits"), 0);
	assert_int_equal(json_integer_value(json_object_get(c, "rank")), 2);
	assert_string_equal(json_string_value(json_object_get(c, "reason")), "mismatch");
	assert_string_equal(json_string_value(json_object_get(c, "host")), "node2");
	assert_int_equal(json_integer_value(json_object_get(c, "pid")), 1002);
	assert_string_equal(json_string_value(json_object_get(json_object_get(c, "called"),
							      "type")), "broadcast");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(c, "last_completed"),
							    "seq")), 4);
	assert_null(json_object_get(json_object_get(c, "called"), "comm_ranks"));
	a = json_object_get(o, "waiting_ranks");
	assert_int_equal(json_array_size(a), 3);
	assert_int_equal(json_integer_value(json_array_get(a, 2)), 3);
	json_decref(o);
	job_free(j);
}

static void test_json_ok_has_null_op(void **state)
{
	struct job *j = job_new(1);
	struct fr_verdict *v;
	json_t *o;

	(void)state;
	rank_new(j, 0, FR_RANK_DUMPED);
	add_world(j);
	history(j, 0, "world", 1);
	v = correlate(j);
	o = fr_verdict_to_json(v);
	assert_non_null(o);
	assert_string_equal(json_string_value(json_object_get(o, "verdict")), "ok");
	assert_true(json_is_null(json_object_get(o, "op")));
	assert_int_equal(json_array_size(json_object_get(o, "culprits")), 0);
	json_decref(o);
	job_free(j);
}

/*
 * Rank 2 crashed in load_shard before all_reduce #5, which ranks 0, 1 and 3
 * wait in: the verdict is crash (not the hang it causes), rank 2 its
 * culprit with the signal, the address and the stack.
 */
static void test_crash_verdict(void **state)
{
	struct job *j = job_new(4);
	struct fr_verdict *v;
	struct fr_crash *c;
	json_t *o, *cj;

	(void)state;
	for (uint32_t r = 0; r < 4; r++)
		rank_new(j, r, r == 2 ? FR_RANK_DISCONNECTED : FR_RANK_DUMPED);
	add_world(j);
	for (uint32_t r = 0; r < 4; r++) {
		history(j, r, "world", 4);
		if (r != 2)
			add_op(j, r, "world", FR_OP_ALL_REDUCE, 5, FR_STATE_ENTERED, 3);
	}
	c = j->ev[2]->t.crash = calloc(1, sizeof(*c));
	assert_non_null(c);
	c->signo = 11;
	c->code = 1;
	c->thread.tid = 99;
	c->thread.nframes = 2;
	c->thread.frames = calloc(2, sizeof(*c->thread.frames));
	assert_non_null(c->thread.frames);
	c->thread.frames[0] = (struct fr_frame){ strdup("load_shard"), 3, 0x401136 };
	c->thread.frames[1] = (struct fr_frame){ strdup("main"), 64, 0x4011a0 };
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_CRASH);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 2);
	assert_int_equal(v->culprits[0].reason, FR_REASON_CRASHED);
	assert_true(v->has_op);
	assert_int_equal(v->op.seq, 5);
	assert_ranks(v->waiting, v->nwaiting, "0-1,3");
	assert_contains(v->summary, "rank 2 (node2, pid 1002) crashed (SIGSEGV at 0x0 in load_shard) during all_reduce #5 on world; ranks 0-1,3 wait for it");
	o = fr_verdict_to_json(v);
	assert_non_null(o);
	assert_string_equal(json_string_value(json_object_get(o, "verdict")), "crash");
	cj = json_array_get(json_object_get(o, "culprits"), 0);
	assert_string_equal(json_string_value(json_object_get(cj, "reason")), "crashed");
	assert_string_equal(json_string_value(json_object_get(cj, "signal")), "SIGSEGV");
	assert_string_equal(json_string_value(json_object_get(cj, "fault_addr")), "0x0");
	assert_int_equal(json_integer_value(json_object_get(cj, "si_code")), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(
				    json_object_get(cj, "stack"), 0), "name")), "load_shard");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(cj, "last_completed"),
							    "seq")), 4);
	json_decref(o);
	job_free(j);
}

/* A crash with nobody waiting yet: named all the same, after its last op. */
static void test_crash_verdict_no_wait(void **state)
{
	struct job *j = job_new(2);
	struct fr_verdict *v;

	(void)state;
	rank_new(j, 0, FR_RANK_DUMPED);
	rank_new(j, 1, FR_RANK_DUMPED);
	add_world(j);
	history(j, 0, "world", 3);
	history(j, 1, "world", 3);
	j->ev[1]->t.crash = calloc(1, sizeof(*j->ev[1]->t.crash));
	assert_non_null(j->ev[1]->t.crash);
	j->ev[1]->t.crash->signo = 6;
	j->ev[1]->t.crash->code = -6;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_CRASH);
	assert_int_equal(v->culprits[0].rank, 1);
	assert_false(v->has_op);
	assert_contains(v->summary, "crashed (SIGABRT at 0x0) after all_reduce #3 on world");
	job_free(j);
}

/*
 * Rank 2 exited with status 3 before all_reduce #5, which ranks 0, 1 and 3
 * wait in: the verdict is crash, rank 2 its culprit with reason exited and
 * its exit code. The same rank killed instead is named killed.
 */
static void test_exit_verdict(void **state)
{
	struct job *j = job_new(4);
	struct fr_verdict *v;
	json_t *o, *cj;

	(void)state;
	for (uint32_t r = 0; r < 4; r++)
		rank_new(j, r, r == 2 ? FR_RANK_DISCONNECTED : FR_RANK_DUMPED);
	add_world(j);
	for (uint32_t r = 0; r < 4; r++) {
		history(j, r, "world", 4);
		if (r != 2)
			add_op(j, r, "world", FR_OP_ALL_REDUCE, 5, FR_STATE_ENTERED, 3);
	}
	j->ev[2]->t.has_exit = true;
	j->ev[2]->t.exit = (struct fr_exit){ .kind = FR_EXIT_EXITED, .has_code = true, .code = 3 };
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_CRASH);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 2);
	assert_int_equal(v->culprits[0].reason, FR_REASON_EXITED);
	assert_int_equal(v->op.seq, 5);
	assert_contains(v->summary, "rank 2 (node2, pid 1002) exited (code 3) during all_reduce #5 on world; ranks 0-1,3 wait for it");
	o = fr_verdict_to_json(v);
	assert_non_null(o);
	cj = json_array_get(json_object_get(o, "culprits"), 0);
	assert_string_equal(json_string_value(json_object_get(cj, "reason")), "exited");
	assert_int_equal(json_integer_value(json_object_get(cj, "exit_code")), 3);
	assert_int_equal(json_integer_value(json_object_get(cj, "inflight")), 0);
	assert_null(json_object_get(cj, "signal"));
	json_decref(o);

	j->ev[2]->t.exit = (struct fr_exit){ .kind = FR_EXIT_KILLED };
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_CRASH);
	assert_int_equal(v->culprits[0].reason, FR_REASON_KILLED);
	assert_contains(v->summary, "rank 2 (node2, pid 1002) was killed or lost (its connection dropped without a goodbye) during all_reduce #5 on world");
	o = fr_verdict_to_json(v);
	cj = json_array_get(json_object_get(o, "culprits"), 0);
	assert_string_equal(json_string_value(json_object_get(cj, "reason")), "killed");
	assert_null(json_object_get(cj, "exit_code"));
	json_decref(o);

	/* An NCCL error is named ahead of the exit that may follow it. */
	j->ev[2]->t.has_nccl_error = true;
	snprintf(j->ev[2]->t.nccl_error.comm, sizeof(j->ev[2]->t.nccl_error.comm), "world");
	j->ev[2]->t.nccl_error.result = 6;
	snprintf(j->ev[2]->t.nccl_error.message, sizeof(j->ev[2]->t.nccl_error.message),
		 "peer went away");
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_CRASH);
	assert_int_equal(v->culprits[0].reason, FR_REASON_NCCL_ERROR);
	assert_contains(v->summary, "rank 2 (node2, pid 1002) hit an NCCL error (ncclRemoteError on world: peer went away) during all_reduce #5 on world");
	o = fr_verdict_to_json(v);
	cj = json_array_get(json_object_get(o, "culprits"), 0);
	assert_string_equal(json_string_value(json_object_get(cj, "reason")), "nccl_error");
	assert_int_equal(json_integer_value(json_object_get(cj, "nccl_result")), 6);
	assert_string_equal(json_string_value(json_object_get(cj, "message")), "peer went away");
	json_decref(o);
	job_free(j);
}

/*
 * exit(0) with nothing in flight is a goodbye until someone waits for it:
 * alone it changes nothing; the rank its peers wait for is named exited.
 */
static void test_exit_zero(void **state)
{
	struct job *j = job_new(2);
	struct fr_verdict *v;

	(void)state;
	rank_new(j, 0, FR_RANK_DUMPED);
	rank_new(j, 1, FR_RANK_FINISHED);
	add_world(j);
	history(j, 0, "world", 3);
	history(j, 1, "world", 3);
	j->ev[1]->t.has_exit = true;
	j->ev[1]->t.exit = (struct fr_exit){ .kind = FR_EXIT_EXITED, .has_code = true };
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_OK);
	assert_int_equal(v->nculprits, 0);
	job_free(j);

	j = job_new(2);
	rank_new(j, 0, FR_RANK_DUMPED);
	rank_new(j, 1, FR_RANK_FINISHED);
	add_world(j);
	history(j, 0, "world", 3);
	history(j, 1, "world", 3);
	add_op(j, 0, "world", FR_OP_ALL_REDUCE, 4, FR_STATE_ENTERED, 3);
	j->ev[1]->t.has_exit = true;
	j->ev[1]->t.exit = (struct fr_exit){ .kind = FR_EXIT_EXITED, .has_code = true };
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_CRASH);
	assert_int_equal(v->culprits[0].rank, 1);
	assert_int_equal(v->culprits[0].reason, FR_REASON_EXITED);
	assert_contains(v->summary, "exited (code 0) during all_reduce #4 on world; rank 0 waits for it");
	job_free(j);
}

static void add_stack(struct fr_trace *t)
{
	static const char *const names[] = { "compute_forever", "train_step", "main" };
	struct fr_thread *th = calloc(2, sizeof(*th));

	assert_non_null(th);
	th[0].tid = t->pid;
	snprintf(th[0].name, sizeof(th[0].name), "python");
	th[0].current = false;
	th[0].nframes = 3;
	th[0].frames = calloc(3, sizeof(*th[0].frames));
	assert_non_null(th[0].frames);
	for (size_t i = 0; i < 3; i++) {
		th[0].frames[i].name = strdup(names[i]);
		th[0].frames[i].offset = 0x1a + i;
	}
	th[1].tid = t->pid + 1;
	snprintf(th[1].name, sizeof(th[1].name), "fr-agent");
	th[1].current = true;
	t->threads = th;
	t->nthreads = 2;
}

static void test_print_report(void **state)
{
	struct job *j = world_job(6);
	struct fr_verdict *v;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	for (uint32_t r = 0; r < 6; r++) {
		history(j, r, "world", 10);
		if (r != 3)
			add_op(j, r, "world", FR_OP_ALL_REDUCE, 11, FR_STATE_ENTERED, 42);
	}
	add_stack(&j->ev[3]->t);
	v = correlate(j);
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	fr_verdict_print(f, v, j->traces, 6);
	fclose(f);
	assert_true(strncmp(buf, v->summary, strlen(v->summary)) == 0);
	assert_int_equal(buf[strlen(v->summary)], '\n');
	assert_contains(buf, "    #0 compute_forever+0x1a\n");
	assert_contains(buf, "    #2 main+0x1c\n");
	/* The agent's own (dumping) thread is left out of the report. */
	assert_null(strstr(buf, "fr-agent"));
	assert_contains(buf, "thread 1003 \"python\":\n");
	assert_contains(buf, "all_reduce #10");
	job_free(j);
	free(buf);
}

/* The report for a person of job `j`'s verdict, allocated. */
static char *report_of(struct job *j, size_t ntraces)
{
	struct fr_verdict *v = correlate(j);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	fr_verdict_print(f, v, j->traces, ntraces);
	fclose(f);
	return buf;
}

/* The report of an order inversion lists the classes, the majority's too. */
static void test_print_classes(void **state)
{
	struct job *j = order_job(4, "0100");
	char *buf;

	(void)state;
	buf = report_of(j, 4);
	assert_contains(buf, "Ranks by what they did:\n"
			     "  3 ranks (0,2-3), the majority: called all_reduce #4 on a before "
			     "all_reduce #4 on b\n"
			     "  1 rank (1): called all_reduce #4 on b before all_reduce #4 on a\n");
	assert_contains(buf, "Culprit rank 1 (node1, pid 1001): did otherwise than the majority");
	assert_null(strstr(buf, "Culprit rank 0"));
	job_free(j);
	free(buf);

	j = order_job(4, "0011");
	buf = report_of(j, 4);
	assert_contains(buf, "Ranks by what they did (no majority):\n  2 ranks (0-1): called");
	job_free(j);
	free(buf);
}

static void test_print_missing_culprit(void **state)
{
	struct job *j = job_new(2);
	struct fr_verdict *v;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	rank_new(j, 0, FR_RANK_DUMPED);
	add_world(j);
	add_op(j, 0, "world", FR_OP_BARRIER, 1, FR_STATE_ENTERED, 3);
	v = correlate(j);
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	fr_verdict_print(f, v, j->traces, 1);
	fclose(f);
	assert_contains(buf, "Culprit rank 1");
	assert_contains(buf, "no dump:");
	job_free(j);
	free(buf);
}

/* Counts the lines of a report. */
static size_t lines_of(const char *buf)
{
	size_t n = 0;

	for (; *buf; buf++)
		if (*buf == '\n')
			n++;
	return n;
}

/*
 * 1024 ranks, each with a stack, rank 517 never entered all_reduce #30:
 * rank ranges everywhere, and a report a person reads in one screen.
 */
static void test_readable_1024(void **state)
{
	struct job *j = job_new(1024);
	struct fr_verdict *v;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	for (uint32_t r = 0; r < 1024; r++)
		add_stack(rank_new(j, r, FR_RANK_DUMPED));
	add_world(j);
	for (uint32_t r = 0; r < 1024; r++) {
		history(j, r, "world", 29);
		if (r != 517)
			add_op(j, r, "world", FR_OP_ALL_REDUCE, 30, FR_STATE_ENTERED, 60);
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 517);
	assert_contains(v->summary, "0-516,518-1023");
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	fr_verdict_print(f, v, j->traces, 1024);
	fclose(f);
	assert_contains(buf, "Waiting: ranks 0-516,518-1023 (1023)");
	assert_contains(buf, "Stacks (1024 ranks, 1 distinct):\n  1024 ranks (0-1023):");
	if (lines_of(buf) >= 60)
		fail_msg("%zu lines:\n%s", lines_of(buf), buf);
	free(buf);
	job_free(j);

	/* Every one of 1024 members entered, none completes: 1024 culprits,
	 * listed by reason as ranges, a few described. */
	j = job_new(1024);
	for (uint32_t r = 0; r < 1024; r++)
		add_stack(rank_new(j, r, FR_RANK_DUMPED));
	add_world(j);
	for (uint32_t r = 0; r < 1024; r++) {
		history(j, r, "world", 29);
		add_op(j, r, "world", FR_OP_ALL_REDUCE, 30, FR_STATE_ENTERED, 60);
	}
	v = correlate(j);
	assert_int_equal(v->nculprits, 1024);
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	fr_verdict_print(f, v, j->traces, 1024);
	fclose(f);
	assert_contains(buf, "\nCulprits: 1024\n  stuck_in_op: ranks 0-1023 (1024): ");
	assert_contains(buf, "Culprit rank 2 ");
	assert_null(strstr(buf, "Culprit rank 3 "));
	assert_contains(buf, "... and 1021 more culprits, listed by reason above");
	if (lines_of(buf) >= 60)
		fail_msg("%zu lines:\n%s", lines_of(buf), buf);
	free(buf);
	job_free(j);
}

/*
 * Gives `t` an application thread whose frames are `names` (innermost
 * first), after the agent's own thread, as the agent lists them.
 */
static void add_named_stack(struct fr_trace *t, const char *const *names, size_t n)
{
	struct fr_thread *th = calloc(2, sizeof(*th));

	assert_non_null(th);
	th[0].tid = t->pid + 1;
	snprintf(th[0].name, sizeof(th[0].name), "flightrec");
	th[0].current = true;
	th[1].tid = t->pid;
	snprintf(th[1].name, sizeof(th[1].name), "hang");
	th[1].nframes = n;
	th[1].frames = calloc(n, sizeof(*th[1].frames));
	assert_non_null(th[1].frames);
	for (size_t i = 0; i < n; i++) {
		th[1].frames[i].name = names[i] ? strdup(names[i]) : NULL;
		th[1].frames[i].ip = 0x400000 + i;
	}
	t->threads = th;
	t->nthreads = 2;
}

/*
 * The stack grouping that fr-analyze prints and the daemon serves: ranks
 * waiting in one collective group together whichever progress function
 * caught them, the odd one out apart, ranks without an application stack
 * nowhere; each group knows its ranks and a representative thread.
 */
static void test_stack_groups(void **state)
{
	static const char *const wait_a[] = { "opal_progress", "ompi_coll_wait", "PMPI_Allreduce",
					      "train_step", "main" };
	static const char *const wait_b[] = { "mca_pml_progress", "PMPI_Allreduce", "train_step",
					      "main" };
	static const char *const compute[] = { "stuck_in_compute", "train_step", "main" };
	const struct fr_trace *idx[8] = { 0 };
	struct job *j = job_new(8);
	struct fr_stack_groups g;
	struct fr_verdict *v;
	char *buf = NULL;
	size_t len = 0;
	char rt[64];
	FILE *f;

	(void)state;
	for (uint32_t r = 0; r < 7; r++)
		rank_new(j, r, FR_RANK_DUMPED);
	add_named_stack(&j->ev[0]->t, wait_a, 5);
	add_named_stack(&j->ev[1]->t, wait_b, 4);
	add_named_stack(&j->ev[2]->t, wait_a, 5);
	add_named_stack(&j->ev[3]->t, compute, 3);
	add_named_stack(&j->ev[4]->t, wait_b, 4);
	add_named_stack(&j->ev[5]->t, wait_a, 5);
	/* Rank 6 dumped only the agent's thread; rank 7 did not dump. */
	j->ev[6]->t.threads = calloc(1, sizeof(struct fr_thread));
	assert_non_null(j->ev[6]->t.threads);
	j->ev[6]->t.threads[0].current = true;
	j->ev[6]->t.nthreads = 1;
	for (uint32_t r = 0; r < 7; r++)
		idx[r] = &j->ev[r]->t;

	assert_int_equal(fr_stack_groups_build(idx, 8, &g), 0);
	assert_int_equal(g.nranks, 6);
	assert_int_equal(g.ngroups, 2);
	assert_int_equal(g.groups[0].nranks, 5);
	fr_format_ranks(rt, sizeof(rt), g.groups[0].ranks, g.groups[0].nranks);
	assert_string_equal(rt, "0-2,4-5");
	/* Compared from the call into MPI outwards; the lowest rank stands
	 * for the group. */
	assert_int_equal(g.groups[0].nframes, 3);
	assert_string_equal(g.groups[0].frames[0].name, "PMPI_Allreduce");
	assert_string_equal(g.groups[0].frames[2].name, "main");
	assert_ptr_equal(g.groups[0].thread, &j->ev[0]->t.threads[1]);
	assert_int_equal(g.groups[1].nranks, 1);
	assert_int_equal(g.groups[1].ranks[0], 3);
	assert_int_equal(g.groups[1].nframes, 3);
	assert_string_equal(g.groups[1].frames[0].name, "stuck_in_compute");
	assert_ptr_equal(g.groups[1].thread, &j->ev[3]->t.threads[1]);
	fr_stack_groups_free(&g);
	assert_null(g.groups);

	/* Nobody with a stack: no group, and no failure. */
	assert_int_equal(fr_stack_groups_build(idx, 0, &g), 0);
	assert_int_equal(g.ngroups, 0);
	assert_int_equal(g.nranks, 0);
	fr_stack_groups_free(&g);

	/* The report prints the same groups. */
	add_world(j);
	for (uint32_t r = 0; r < 7; r++) {
		history(j, r, "world", 10);
		if (r != 3)
			add_op(j, r, "world", FR_OP_ALL_REDUCE, 11, FR_STATE_ENTERED, 42);
	}
	v = correlate(j);
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	fr_verdict_print(f, v, j->traces, 7);
	fclose(f);
	assert_contains(buf, "\nStacks (6 ranks, 2 distinct):\n"
			     "  5 ranks (0-2,4-5): PMPI_Allreduce <- train_step <- main\n"
			     "  1 rank (3): stuck_in_compute <- train_step <- main\n");
	free(buf);
	job_free(j);
}

/*
 * Twelve distinct stacks: the report shows the eight largest groups and
 * counts the rest, while the grouping itself keeps all of them.
 */
static void test_stack_groups_many(void **state)
{
	const struct fr_trace *idx[12] = { 0 };
	struct job *j = job_new(12);
	struct fr_stack_groups g;
	struct fr_verdict *v;
	char names[12][32];
	const char *frames[12][2];
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	for (uint32_t r = 0; r < 12; r++) {
		rank_new(j, r, FR_RANK_DUMPED);
		snprintf(names[r], sizeof(names[r]), "work_%u", r);
		frames[r][0] = names[r];
		frames[r][1] = "main";
		add_named_stack(&j->ev[r]->t, frames[r], 2);
		idx[r] = &j->ev[r]->t;
	}
	assert_int_equal(fr_stack_groups_build(idx, 12, &g), 0);
	assert_int_equal(g.ngroups, 12);
	for (size_t i = 0; i < g.ngroups; i++)
		assert_int_equal(g.groups[i].nranks, 1);
	fr_stack_groups_free(&g);

	add_world(j);
	for (uint32_t r = 0; r < 12; r++)
		history(j, r, "world", 3);
	v = correlate(j);
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	fr_verdict_print(f, v, j->traces, 12);
	fclose(f);
	assert_contains(buf, "\nStacks (12 ranks, 12 distinct):\n");
	assert_contains(buf, "\n  ... and 4 more distinct stacks\n");
	free(buf);
	job_free(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format_ranks),
		cmocka_unit_test(test_json_contract),
		cmocka_unit_test(test_json_ok_has_null_op),
		cmocka_unit_test(test_crash_verdict),
		cmocka_unit_test(test_crash_verdict_no_wait),
		cmocka_unit_test(test_exit_verdict),
		cmocka_unit_test(test_exit_zero),
		cmocka_unit_test(test_print_report),
		cmocka_unit_test(test_print_missing_culprit),
		cmocka_unit_test(test_print_classes),
		cmocka_unit_test(test_readable_1024),
		cmocka_unit_test(test_stack_groups),
		cmocka_unit_test(test_stack_groups_many),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
