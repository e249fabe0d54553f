/*
 * Unit tests of the correlation engine: traces are built in memory, one per
 * rank (correlate_fixtures.h), and each test asserts the verdict a person
 * would read. This file holds jobs that are fine, what a hung job is stuck
 * on and whom it waits for (hang.c), waits that go round in a cycle
 * (deadlock.c), ring windows, and a job of 1024 ranks. Communicators,
 * mismatches, stragglers and the verdict's wording have files of their own.
 */
#include <time.h>

#include "correlate_fixtures.h"

static void test_ok_all_completed(void **state)
{
	struct job *j = world_job(4);
	struct fr_verdict *v;

	(void)state;
	for (uint32_t r = 0; r < 4; r++)
		history(j, r, "world", 10);
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_OK);
	assert_int_equal(v->nculprits, 0);
	assert_false(v->has_op);
	assert_int_equal(v->nwaiting, 0);
	assert_int_equal(v->world_size, 4);
	assert_int_equal(v->nranks_with_evidence, 4);
	assert_contains(v->summary, "no hang");
	job_free(j);
}

static void test_ok_slow_but_progressing(void **state)
{
	struct job *j = world_job(3);
	struct fr_verdict *v;

	(void)state;
	/* Ranks at different points, each op long but completed: nobody waits. */
	history(j, 0, "world", 20);
	history(j, 1, "world", 18);
	history(j, 2, "world", 19);
	j->ev[1]->t.ops[17].t_completed_ns = NOW_NS - 1;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_OK);
	assert_int_equal(v->nculprits, 0);
	job_free(j);
}

/*
 * Rank 3 has not entered all_reduce #11 the others entered `wait_ns` ago,
 * in dumps of reason `reason`.
 */
static struct fr_verdict *request_job(struct job **jp, const char *reason, uint64_t wait_ns)
{
	struct job *j = world_job(4);

	for (uint32_t r = 0; r < 4; r++) {
		history(j, r, "world", 10);
		snprintf(j->ev[r]->t.reason, sizeof(j->ev[r]->t.reason), "%s", reason);
		if (r != 3)
			add_op(j, r, "world", FR_OP_ALL_REDUCE, 11, FR_STATE_ENTERED, 0)->t_entered_ns =
				NOW_NS - wait_ns;
	}
	*jp = j;
	return correlate(j);
}

/* A dump taken on request catches a running job between two collectives:
 * milliseconds of waiting are no hang; a second and more, or a timeout's
 * dump, are. */
static void test_request_dump_in_progress(void **state)
{
	struct job *j;
	struct fr_verdict *v;

	(void)state;
	v = request_job(&j, "manual", 5 * 1000 * 1000);
	assert_int_equal(v->kind, FR_VERDICT_OK);
	assert_int_equal(v->nculprits, 0);
	assert_contains(v->summary, "running when dumped on request, 3 ranks wait");
	job_free(j);

	v = request_job(&j, "manual", 2000ull * 1000 * 1000);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->culprits[0].rank, 3);
	job_free(j);

	v = request_job(&j, "timeout", 5 * 1000 * 1000);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->culprits[0].rank, 3);
	job_free(j);
}

static void test_not_entered_world(void **state)
{
	struct job *j = world_job(6);
	struct fr_verdict *v;

	(void)state;
	for (uint32_t r = 0; r < 6; r++) {
		history(j, r, "world", 10);
		if (r != 3)
			add_op(j, r, "world", FR_OP_ALL_REDUCE, 11, FR_STATE_ENTERED,
			       r == 0 ? 42 : 40);
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 3);
	assert_int_equal(v->culprits[0].reason, FR_REASON_NOT_ENTERED);
	assert_string_equal(v->culprits[0].host, "node3");
	assert_int_equal(v->culprits[0].pid, 1003);
	assert_true(v->culprits[0].has_last_completed);
	assert_int_equal(v->culprits[0].last_completed.seq, 10);
	assert_true(v->has_op);
	assert_int_equal(v->op.type, FR_OP_ALL_REDUCE);
	assert_int_equal(v->op.seq, 11);
	assert_string_equal(v->op.comm, "world");
	assert_ranks(v->comm_ranks, v->comm_size, "0-5");
	assert_ranks(v->waiting, v->nwaiting, "0-2,4-5");
	assert_true(v->waited_s > 41.9 && v->waited_s < 42.1);
	assert_contains(v->summary, "rank 3");
	assert_contains(v->summary, "all_reduce #11");
	assert_contains(v->summary, "0-2,4-5");
	job_free(j);
}

/*
 * The hard case: rank 1 computes forever before all_reduce #3 on a
 * sub-communicator {0,1,2}; 0 and 2 wait in it; 3-5 went on to a world
 * barrier, which 0-2 never entered. The barrier is a consequence, even
 * though its waiters have waited longer.
 */
static void test_sub_communicator(void **state)
{
	const uint32_t sub[] = { 0, 1, 2 };
	struct job *j = world_job(6);
	struct fr_verdict *v;

	(void)state;
	for (uint32_t r = 0; r < 6; r++)
		add_op(j, r, "world", FR_OP_BARRIER, 1, FR_STATE_COMPLETED, 100);
	for (uint32_t r = 0; r < 3; r++) {
		add_comm(j, r, "world.s1c0", sub, 3);
		add_op(j, r, "world.s1c0", FR_OP_ALL_REDUCE, 1, FR_STATE_COMPLETED, 90);
		add_op(j, r, "world.s1c0", FR_OP_ALL_REDUCE, 2, FR_STATE_COMPLETED, 80);
	}
	add_op(j, 0, "world.s1c0", FR_OP_ALL_REDUCE, 3, FR_STATE_ENTERED, 10);
	add_op(j, 2, "world.s1c0", FR_OP_ALL_REDUCE, 3, FR_STATE_ENTERED, 9);
	for (uint32_t r = 3; r < 6; r++)
		add_op(j, r, "world", FR_OP_BARRIER, 2, FR_STATE_ENTERED, 50);
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 1);
	assert_int_equal(v->culprits[0].reason, FR_REASON_NOT_ENTERED);
	assert_int_equal(v->culprits[0].last_completed.seq, 2);
	assert_string_equal(v->culprits[0].last_completed.comm, "world.s1c0");
	assert_string_equal(v->op.comm, "world.s1c0");
	assert_int_equal(v->op.type, FR_OP_ALL_REDUCE);
	assert_int_equal(v->op.seq, 3);
	assert_ranks(v->comm_ranks, v->comm_size, "0-2");
	assert_ranks(v->waiting, v->nwaiting, "0,2-5");
	assert_true(v->waited_s > 49.9 && v->waited_s < 50.1);
	assert_contains(v->summary, "rank 1 (node1, pid 1001) never entered all_reduce #3 on "
				    "world.s1c0");
	job_free(j);
}

static void bad_status_case(enum fr_rank_status st, enum fr_reason want, const char *phrase)
{
	struct job *j = job_new(6);
	struct fr_verdict *v;

	for (uint32_t r = 0; r < 6; r++)
		rank_new(j, r, r == 4 ? st : FR_RANK_DUMPED);
	add_world(j);
	for (uint32_t r = 0; r < 6; r++) {
		for (uint64_t s = 1; s <= 8; s++)
			add_op(j, r, "world", FR_OP_BARRIER, s, FR_STATE_COMPLETED, 600);
		/* The daemon saw rank 4 enter barrier #9 too before it went away:
		 * it is still the one to blame. */
		add_op(j, r, "world", FR_OP_BARRIER, 9, FR_STATE_ENTERED, 30 + r);
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 4);
	assert_int_equal(v->culprits[0].reason, want);
	assert_int_equal(v->op.type, FR_OP_BARRIER);
	assert_int_equal(v->op.seq, 9);
	assert_ranks(v->waiting, v->nwaiting, "0-3,5");
	assert_contains(v->summary, "rank 4 (node4, pid 1004)");
	assert_contains(v->summary, phrase);
	assert_contains(v->summary, "ranks 0-3,5 wait in barrier #9 on world [0-5]");
	job_free(j);
}

static void test_unresponsive(void **state)
{
	(void)state;
	bad_status_case(FR_RANK_UNRESPONSIVE, FR_REASON_UNRESPONSIVE, "is unresponsive");
}

static void test_disconnected(void **state)
{
	(void)state;
	bad_status_case(FR_RANK_DISCONNECTED, FR_REASON_DISCONNECTED, "disconnected");
}

/*
 * Two independent stuck sub-communicators: in one a rank computes (perhaps
 * only slow), in the other a rank stopped heartbeating. The dead rank is the
 * surer answer even though the first group has waited longer.
 */
static void test_bad_status_preferred(void **state)
{
	const uint32_t a[] = { 0, 1, 2 };
	const uint32_t b[] = { 3, 4, 5 };
	struct job *j = job_new(6);
	struct fr_verdict *v;

	(void)state;
	for (uint32_t r = 0; r < 6; r++) {
		rank_new(j, r, r == 4 ? FR_RANK_UNRESPONSIVE : FR_RANK_DUMPED);
		add_comm(j, r, r < 3 ? "a" : "b", r < 3 ? a : b, 3);
	}
	add_op(j, 0, "a", FR_OP_ALL_REDUCE, 1, FR_STATE_ENTERED, 100);
	add_op(j, 2, "a", FR_OP_ALL_REDUCE, 1, FR_STATE_ENTERED, 100);
	add_op(j, 3, "b", FR_OP_ALL_REDUCE, 1, FR_STATE_ENTERED, 10);
	add_op(j, 5, "b", FR_OP_ALL_REDUCE, 1, FR_STATE_ENTERED, 10);
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 4);
	assert_int_equal(v->culprits[0].reason, FR_REASON_UNRESPONSIVE);
	assert_string_equal(v->op.comm, "b");
	assert_ranks(v->waiting, v->nwaiting, "0,2-3,5");
	assert_contains(v->summary, "while ranks 3,5 wait in all_reduce #1 on b [3-5]");
	job_free(j);
}

static void test_finished_peer_of_recv(void **state)
{
	struct job *j = job_new(3);
	struct fr_verdict *v;
	struct fr_op *op;

	(void)state;
	for (uint32_t r = 0; r < 3; r++)
		rank_new(j, r, r == 2 ? FR_RANK_FINISHED : FR_RANK_DUMPED);
	add_world(j);
	for (uint32_t r = 0; r < 3; r++)
		history(j, r, "world", 5);
	op = add_op(j, 0, "world", FR_OP_RECV, 1, FR_STATE_ENTERED, 12);
	op->peer = 2;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 2);
	assert_int_equal(v->culprits[0].reason, FR_REASON_FINISHED);
	assert_int_equal(v->op.type, FR_OP_RECV);
	assert_true(v->op.is_p2p);
	assert_ranks(v->waiting, v->nwaiting, "0");
	assert_contains(v->summary, "finalised");
	job_free(j);
}

static void test_missing_rank(void **state)
{
	struct job *j = job_new(4);
	struct fr_verdict *v;

	(void)state;
	for (uint32_t r = 0; r < 4; r++)
		if (r != 2)
			rank_new(j, r, FR_RANK_DUMPED);
	add_world(j);
	for (uint32_t r = 0; r < 4; r++) {
		if (r == 2)
			continue;
		history(j, r, "world", 4);
		add_op(j, r, "world", FR_OP_ALL_REDUCE, 5, FR_STATE_ENTERED, 7);
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->world_size, 4);
	assert_int_equal(v->nranks_with_evidence, 3);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 2);
	assert_int_equal(v->culprits[0].reason, FR_REASON_UNRESPONSIVE);
	assert_string_equal(v->culprits[0].host, "");
	assert_int_equal(v->culprits[0].pid, 0);
	assert_false(v->culprits[0].has_last_completed);
	assert_ranks(v->waiting, v->nwaiting, "0-1,3");
	assert_contains(v->summary, "rank 2 sent no evidence");
	job_free(j);
}

/*
 * Rank 2 posted an Irecv from rank 1 and went on computing without waiting
 * on it; ranks 0, 1 and 3 wait in all_reduce #2. A posted receive holds
 * nobody up: rank 2 does not wait, it is what the others wait for.
 */
static void test_posted_irecv_does_not_wait(void **state)
{
	struct job *j = world_job(4);
	struct fr_verdict *v;
	struct fr_op *op;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	for (uint32_t r = 0; r < 4; r++) {
		history(j, r, "world", 1);
		if (r != 2)
			add_op(j, r, "world", FR_OP_ALL_REDUCE, 2, FR_STATE_ENTERED, 30);
	}
	op = add_op(j, 2, "world", FR_OP_RECV, 1, FR_STATE_ENTERED, 50);
	op->peer = 1;
	op->nonblocking = true;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 2);
	assert_int_equal(v->culprits[0].reason, FR_REASON_NOT_ENTERED);
	assert_int_equal(v->op.type, FR_OP_ALL_REDUCE);
	assert_int_equal(v->op.seq, 2);
	/* Nor does its receive count as a wait, however old. */
	assert_ranks(v->waiting, v->nwaiting, "0-1,3");
	assert_true(v->waited_s > 29.9 && v->waited_s < 30.1);
	assert_contains(v->summary, "rank 2 (node2, pid 1002) never entered all_reduce #2");
	/* The report shows what rank 2 left pending. */
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	fr_verdict_print(f, v, j->traces, 4);
	fclose(f);
	assert_contains(buf, "  posted, not waited on: recv #1 from rank 1 on world");
	assert_contains(buf, "  ranks 0-1,3: in all_reduce #2 on world, up to 30 s\n");
	free(buf);
	job_free(j);
}

/* Operations posted and not waited on are no hang, however old. */
static void test_ok_posted_only(void **state)
{
	struct job *j = world_job(2);
	struct fr_verdict *v;
	struct fr_op *op;

	(void)state;
	op = add_op(j, 0, "world", FR_OP_SEND, 1, FR_STATE_ENTERED, 300);
	op->peer = 1;
	op->nonblocking = true;
	op = add_op(j, 1, "world", FR_OP_ALL_REDUCE, 1, FR_STATE_ENTERED, 200);
	op->nonblocking = true;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_OK);
	assert_int_equal(v->nwaiting, 0);
	assert_int_equal(v->nculprits, 0);
	assert_contains(v->summary, "no hang: no rank waits in an operation, 2 non-blocking "
				    "ones are posted and not waited on");
	job_free(j);
}

/*
 * The same, but rank 2 now blocks in MPI_Waitall on its Irecv #1 from rank
 * 1 (entered 50 s ago, waited on for 20 s), and rank 1 never sends: it went
 * on to all_reduce #2, which rank 2 alone has not entered. The two wait on
 * each other, but rank 1 is the one out of step: it never posted the send
 * matching rank 2's receive (its count of sends to rank 2 is 0, behind
 * #1), while rank 2, held in that receive, cannot reach the all_reduce the
 * others reached. Rank 1 is named, and rank 2's wait counts from the start
 * of the Wait.
 */
static void test_waited_irecv_peer_behind(void **state)
{
	struct job *j = job_new(4);
	struct fr_verdict *v;
	struct fr_op *op;
	json_t *o;

	(void)state;
	for (uint32_t i = 0; i < 4; i++)
		rank_new(j, i, FR_RANK_DUMPED);
	add_world(j);
	for (uint32_t i = 0; i < 4; i++) {
		history(j, i, "world", 1);
		if (i != 2)
			add_op(j, i, "world", FR_OP_ALL_REDUCE, 2, FR_STATE_ENTERED, 15);
	}
	op = add_op(j, 2, "world", FR_OP_RECV, 1, FR_STATE_ENTERED, 50);
	op->peer = 1;
	op->nonblocking = true;
	op->waited = true;
	op->t_started_ns = NOW_NS - S(20);
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 1);
	assert_int_equal(v->culprits[0].reason, FR_REASON_NOT_ENTERED);
	assert_int_equal(v->op.type, FR_OP_RECV);
	assert_int_equal(v->op.peer, 1);
	assert_true(v->op.waited);
	assert_ranks(v->waiting, v->nwaiting, "0-3");
	assert_true(v->waited_s > 19.9 && v->waited_s < 20.1);
	assert_contains(v->summary, "rank 1 (node1, pid 1001) never posted the send matching "
				    "rank 2's recv #1 from rank 1 on world [0-3] and waits instead "
				    "in all_reduce #2, which rank 2, held in its recv, has not "
				    "entered");
	/* It has sent nothing to rank 2 yet: no count to quote. */
	assert_null(strstr(v->summary, "its last"));

	/* What the culprit waits in instead, and what the job is stuck on. */
	assert_true(v->culprits[0].has_op);
	assert_int_equal(v->culprits[0].op.type, FR_OP_ALL_REDUCE);
	assert_int_equal(v->culprits[0].op.seq, 2);
	o = fr_op_to_json(&v->culprits[0].op);
	assert_true(json_is_false(json_object_get(o, "nonblocking")));
	json_decref(o);
	o = fr_op_to_json(&v->op);
	assert_non_null(o);
	assert_true(json_is_true(json_object_get(o, "nonblocking")));
	assert_true(json_is_true(json_object_get(o, "waited")));
	json_decref(o);
	job_free(j);
}

/*
 * Ranks 1 and 2 each block in a Wait on an Irecv from the other, sending
 * nothing: neither is more out of step than the other, and that is a
 * deadlock, which ranks 0 and 3, in all_reduce #2, wait behind.
 */
static void test_waited_irecv_deadlock(void **state)
{
	struct job *j = job_new(4);
	struct fr_verdict *v;
	struct fr_op *op;
	uint32_t r[4];

	(void)state;
	for (uint32_t i = 0; i < 4; i++)
		rank_new(j, i, FR_RANK_DUMPED);
	add_world(j);
	for (uint32_t i = 0; i < 4; i++) {
		history(j, i, "world", 1);
		if (i == 0 || i == 3) {
			add_op(j, i, "world", FR_OP_ALL_REDUCE, 2, FR_STATE_ENTERED, 15);
			continue;
		}
		op = add_op(j, i, "world", FR_OP_RECV, 1, FR_STATE_ENTERED, 50);
		op->peer = (int32_t)(3 - i);
		op->nonblocking = true;
		op->waited = true;
		op->t_started_ns = NOW_NS - S(20);
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_DEADLOCK);
	assert_int_equal(culprit_ranks(v, r), 2);
	assert_ranks(r, 2, "1-2");
	assert_int_equal(v->culprits[1].op.type, FR_OP_RECV);
	assert_true(v->culprits[1].op.waited);
	assert_ranks(v->waiting, v->nwaiting, "0-3");
	assert_true(v->waited_s > 19.9 && v->waited_s < 20.1);
	assert_contains(v->summary, "rank 1 waits in recv #1 from rank 2 on world");
	assert_contains(v->summary, "rank 2 waits in recv #1 from rank 1 on world");
	job_free(j);
}

/*
 * A master (rank 0) receives from any source; worker 2 computes forever;
 * workers 1 and 3 wait in a barrier of {0, 1, 3} that the master will enter
 * once it hears from someone. The worker that could still send is the one.
 */
static void test_any_source_recv_blames_sink(void **state)
{
	const uint32_t team[] = { 0, 1, 3 };
	struct job *j = world_job(4);
	struct fr_verdict *v;

	(void)state;
	for (uint32_t i = 0; i < 3; i++) {
		add_comm(j, team[i], "team", team, 3);
		for (uint64_t s = 1; s <= 4; s++)
			add_op(j, team[i], "team", FR_OP_BARRIER, s, FR_STATE_COMPLETED, 600);
	}
	add_op(j, 0, "world", FR_OP_RECV, 1, FR_STATE_ENTERED, 40);
	add_op(j, 1, "team", FR_OP_BARRIER, 5, FR_STATE_ENTERED, 30);
	add_op(j, 3, "team", FR_OP_BARRIER, 5, FR_STATE_ENTERED, 30);
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 2);
	assert_int_equal(v->culprits[0].reason, FR_REASON_NOT_ENTERED);
	assert_int_equal(v->op.type, FR_OP_RECV);
	assert_int_equal(v->op.peer, -1);
	assert_ranks(v->waiting, v->nwaiting, "0-1,3");
	assert_contains(v->summary, "rank 2 (node2, pid 1002) never posted the send matching "
				    "rank 0's recv #1 from any rank on world");
	job_free(j);
}

/* Every rank of world enters MPI_Finalize; one still computes. */
static void test_finalize_not_entered(void **state)
{
	struct job *j = world_job(4);
	struct fr_verdict *v;

	(void)state;
	for (uint32_t r = 0; r < 4; r++) {
		history(j, r, "world", 10);
		if (r != 2) {
			struct fr_op *op = add_op(j, r, "world", FR_OP_FINALIZE, 11,
						  FR_STATE_ENTERED, 25);

			op->count = 0;
			op->bytes = 0;
			op->dtype = "";
		}
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 2);
	assert_int_equal(v->culprits[0].reason, FR_REASON_NOT_ENTERED);
	assert_int_equal(v->culprits[0].last_completed.seq, 10);
	assert_int_equal(v->op.type, FR_OP_FINALIZE);
	assert_int_equal(v->op.seq, 11);
	assert_ranks(v->waiting, v->nwaiting, "0-1,3");
	assert_contains(v->summary, "rank 2 (node2, pid 1002) never entered finalize #11 on "
				    "world [0-3]");
	job_free(j);
}

static void test_stuck_in_op(void **state)
{
	struct job *j = job_new(4);
	struct fr_verdict *v;
	uint32_t r[4];

	(void)state;
	for (uint32_t i = 0; i < 4; i++)
		rank_new(j, i, FR_RANK_DUMPED);
	add_world(j);
	for (uint32_t i = 0; i < 4; i++) {
		history(j, i, "world", 6);
		add_op(j, i, "world", FR_OP_ALL_REDUCE, 7, FR_STATE_ENTERED, 20);
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(culprit_ranks(v, r), 4);
	assert_ranks(r, 4, "0-3");
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(v->culprits[i].reason, FR_REASON_STUCK_IN_OP);
	assert_int_equal(v->op.seq, 7);
	assert_ranks(v->waiting, v->nwaiting, "0-3");
	assert_contains(v->summary, "all_reduce #7");
	job_free(j);
}

/* NCCL: every rank enqueued the collective; the device reached it on three
 * and rank 3's is still queued behind other work. Stuck on the GPU, and the
 * report says where each rank's copy is. */
static void test_stuck_on_gpu(void **state)
{
	struct job *j = job_new(4);
	struct fr_verdict *v;
	json_t *o;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	for (uint32_t i = 0; i < 4; i++)
		rank_new(j, i, FR_RANK_DUMPED);
	add_world(j);
	for (uint32_t i = 0; i < 4; i++) {
		struct fr_op *op;

		history(j, i, "world", 6);
		op = add_op(j, i, "world", FR_OP_ALL_REDUCE, 7, FR_STATE_ENTERED, 20);
		op->gpu = true;
		op->started = i != 3;
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 4);
	assert_int_equal(v->culprits[0].reason, FR_REASON_STUCK_IN_OP);
	assert_contains(v->summary, "every member enqueued all_reduce #7");
	assert_contains(v->summary, "does not complete on the GPU");
	o = fr_verdict_to_json(v);
	assert_non_null(o);
	assert_string_equal(json_string_value(json_object_get(json_object_get(o, "op"), "state")),
			    "entered");
	assert_non_null(json_object_get(json_object_get(o, "op"), "gpu_state"));
	/* Each rank named with its own copy and how long it has waited. */
	for (size_t i = 0; i < 4; i++) {
		json_t *cu = json_array_get(json_object_get(o, "culprits"), i);
		double w = json_real_value(json_object_get(cu, "waited_s"));

		assert_true(w > 19.9 && w < 20.1);
		assert_string_equal(json_string_value(json_object_get(json_object_get(cu, "called"),
								      "gpu_state")),
				    i == 3 ? "enqueued" : "started");
	}
	json_decref(o);
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	fr_verdict_print(f, v, j->traces, 4);
	fclose(f);
	assert_contains(buf, "started on the GPU");
	assert_contains(buf, "enqueued on the GPU");
	assert_contains(buf, "  waited: 20 s\n");
	free(buf);
	job_free(j);
}

/* Nobody waits: a rank that stopped heartbeating is no hang (yet). */
static void test_unresponsive_nobody_waits(void **state)
{
	struct job *j = job_new(3);
	struct fr_verdict *v;

	(void)state;
	for (uint32_t r = 0; r < 3; r++)
		rank_new(j, r, r == 1 ? FR_RANK_UNRESPONSIVE : FR_RANK_DUMPED);
	add_world(j);
	for (uint32_t r = 0; r < 3; r++)
		history(j, r, "world", 3);
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_OK);
	assert_int_equal(v->nculprits, 0);
	job_free(j);
}

/*
 * No rank dumped (fr-analyze on an incident whose ranks all froze): the
 * daemon's live view has nothing in flight, yet the ranks it found silent
 * are the finding, named by fr_verdict_name_silent() with their reasons and
 * last completed operation; a rank that did dump leaves the verdict ok.
 */
static void test_name_silent(void **state)
{
	struct job *j = job_new(4);
	struct fr_verdict *v;

	(void)state;
	for (uint32_t r = 0; r < 4; r++)
		rank_new(j, r, r == 3 ? FR_RANK_DISCONNECTED :
			 r == 2 ? FR_RANK_LIVE : FR_RANK_UNRESPONSIVE);
	add_world(j);
	for (uint32_t r = 0; r < 4; r++)
		history(j, r, "world", 3);
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_OK);
	assert_int_equal(fr_verdict_name_silent(v, j->traces, 4), 1);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_false(v->has_op);
	assert_int_equal(v->nculprits, 3);
	assert_int_equal(v->culprits[0].rank, 0);
	assert_int_equal(v->culprits[0].reason, FR_REASON_UNRESPONSIVE);
	assert_int_equal(v->culprits[1].rank, 1);
	assert_int_equal(v->culprits[2].rank, 3);
	assert_int_equal(v->culprits[2].reason, FR_REASON_DISCONNECTED);
	assert_true(v->culprits[2].has_last_completed);
	assert_int_equal(v->culprits[2].last_completed.seq, 3);
	assert_string_equal(v->culprits[2].last_completed.comm, "world");
	assert_string_equal(v->summary, "ranks 0-1 are unresponsive; rank 3 (node3, pid 1003) "
			    "lost its connection without finalising; no rank dumped, and the "
			    "daemon's live view has no operation in flight (4 of 4 ranks with "
			    "evidence)");
	/* Called again on a verdict that is no longer ok: nothing changes. */
	assert_int_equal(fr_verdict_name_silent(v, j->traces, 4), 0);
	assert_int_equal(v->nculprits, 3);
	job_free(j);

	/* One rank dumped: the evidence is not the live view alone. */
	j = job_new(2);
	rank_new(j, 0, FR_RANK_DUMPED);
	rank_new(j, 1, FR_RANK_UNRESPONSIVE);
	add_world(j);
	v = correlate(j);
	assert_int_equal(fr_verdict_name_silent(v, j->traces, 2), 0);
	assert_int_equal(v->kind, FR_VERDICT_OK);
	assert_int_equal(v->nculprits, 0);
	job_free(j);
}

static void test_p2p_peer_never_posts(void **state)
{
	struct job *j = world_job(2);
	struct fr_verdict *v;
	struct fr_op *op;

	(void)state;
	op = add_op(j, 0, "world", FR_OP_SEND, 1, FR_STATE_ENTERED, 15);
	op->peer = 1;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 1);
	assert_int_equal(v->culprits[0].reason, FR_REASON_NOT_ENTERED);
	assert_int_equal(v->op.type, FR_OP_SEND);
	assert_int_equal(v->op.peer, 1);
	assert_contains(v->summary, "rank 1 (node1, pid 1001) never posted the receive");
	job_free(j);
}

static void test_p2p_deadlock(void **state)
{
	struct job *j = job_new(3);
	struct fr_verdict *v;
	uint32_t r[3];

	(void)state;
	for (uint32_t i = 0; i < 3; i++)
		rank_new(j, i, FR_RANK_DUMPED);
	add_world(j);
	/* 1 and 2 both receive from each other first; 0 waits on 1. */
	add_op(j, 0, "world", FR_OP_RECV, 1, FR_STATE_ENTERED, 30)->peer = 1;
	add_op(j, 1, "world", FR_OP_RECV, 1, FR_STATE_ENTERED, 20)->peer = 2;
	add_op(j, 2, "world", FR_OP_RECV, 1, FR_STATE_ENTERED, 20)->peer = 1;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_DEADLOCK);
	assert_int_equal(culprit_ranks(v, r), 2);
	assert_ranks(r, 2, "1-2");
	assert_true(v->culprits[0].has_op);
	assert_int_equal(v->culprits[0].op.type, FR_OP_RECV);
	assert_int_equal(v->culprits[0].op.peer, 2);
	assert_contains(v->summary, "deadlock: rank 1 waits in recv #1 from rank 2");
	job_free(j);
}

/* Two communicators over the same ranks, called in opposite orders. */
static void test_collective_order_deadlock(void **state)
{
	const uint32_t m[] = { 0, 1 };
	struct job *j = job_new(2);
	struct fr_verdict *v;

	(void)state;
	for (uint32_t r = 0; r < 2; r++) {
		rank_new(j, r, FR_RANK_DUMPED);
		add_comm(j, r, "a", m, 2);
		add_comm(j, r, "b", m, 2);
	}
	add_op(j, 0, "a", FR_OP_ALL_REDUCE, 1, FR_STATE_ENTERED, 5);
	add_op(j, 1, "b", FR_OP_ALL_REDUCE, 1, FR_STATE_ENTERED, 5);
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_DEADLOCK);
	assert_int_equal(v->nculprits, 2);
	assert_string_equal(v->culprits[0].op.comm, "a");
	assert_string_equal(v->culprits[1].op.comm, "b");
	job_free(j);
}

/*
 * The odd one out: ranks 0, 2 and 3 call all_reduce on a, then on b; rank 1
 * calls b first. The cycle's first pair (0 and 1) is not the answer: rank 1
 * alone did otherwise, and the others' order is said beside it.
 */
static void test_order_one_odd_rank(void **state)
{
	struct job *j = order_job(4, "0100");
	struct fr_verdict *v;
	json_t *o, *cls;

	(void)state;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_DEADLOCK);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 1);
	assert_int_equal(v->culprits[0].reason, FR_REASON_NOT_ENTERED);
	assert_string_equal(v->culprits[0].op.comm, "b");
	assert_int_equal(v->culprits[0].op.seq, 4);
	assert_int_equal(v->culprits[0].last_completed.seq, 3);
	/* The operation is the one the majority waits in. */
	assert_string_equal(v->op.comm, "a");
	assert_int_equal(v->op.seq, 4);
	assert_ranks(v->waiting, v->nwaiting, "0-3");
	assert_int_equal(v->nclasses, 2);
	assert_class(v, 0, "0,2-3", true, "a");
	assert_class(v, 1, "1", false, "b");
	assert_string_equal(v->classes[1].behaviour,
			    "called all_reduce #4 on b before all_reduce #4 on a");
	assert_contains(v->summary, "deadlock: rank 1 (node1, pid 1001) called all_reduce #4 "
				    "on b before all_reduce #4 on a; ranks 0,2-3 called a then b");

	o = fr_verdict_to_json(v);
	assert_non_null(o);
	cls = json_object_get(o, "classes");
	assert_int_equal(json_array_size(cls), 2);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(cls, 1), "count")), 1);
	assert_true(json_is_false(json_object_get(json_array_get(cls, 1), "majority")));
	assert_int_equal(json_integer_value(json_array_get(
				 json_object_get(json_array_get(cls, 1), "ranks"), 0)), 1);
	assert_string_equal(json_string_value(json_object_get(json_object_get(
				    json_array_get(cls, 1), "before"), "comm")), "a");
	assert_true(json_is_true(json_object_get(json_array_get(cls, 0), "majority")));
	assert_int_equal(json_array_size(json_object_get(o, "culprits")), 1);
	json_decref(o);
	job_free(j);
}

/* Two against two: no majority, so both halves are named. */
static void test_order_no_majority(void **state)
{
	struct job *j = order_job(4, "0011");
	struct fr_verdict *v;
	uint32_t r[4];

	(void)state;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_DEADLOCK);
	assert_int_equal(culprit_ranks(v, r), 4);
	assert_ranks(r, 4, "0-3");
	assert_string_equal(v->culprits[0].op.comm, "a");
	assert_string_equal(v->culprits[3].op.comm, "b");
	assert_int_equal(v->nclasses, 2);
	assert_class(v, 0, "0-1", false, "a");
	assert_class(v, 1, "2-3", false, "b");
	assert_contains(v->summary, "deadlock, no majority: ranks 0-1 called all_reduce #4 on a "
				    "before all_reduce #4 on b; ranks 2-3 called b then a");
	job_free(j);
}

/*
 * Eight ranks, three of them (1, 4 and 6) calling b first: the three are
 * the culprits, however the cycle walked from the lowest waiter runs.
 */
static void test_order_three_of_eight(void **state)
{
	struct job *j = order_job(8, "01001010");
	struct fr_verdict *v;
	uint32_t r[8];

	(void)state;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_DEADLOCK);
	assert_int_equal(culprit_ranks(v, r), 3);
	assert_ranks(r, 3, "1,4,6");
	for (size_t i = 0; i < 3; i++)
		assert_string_equal(v->culprits[i].op.comm, "b");
	assert_int_equal(v->nclasses, 2);
	assert_class(v, 0, "0,2-3,5,7", true, "a");
	assert_class(v, 1, "1,4,6", false, "b");
	assert_contains(v->summary, "deadlock: ranks 1,4,6 called all_reduce #4 on b before "
				    "all_reduce #4 on a; ranks 0,2-3,5,7 called a then b");
	job_free(j);

	/* The other way round: the majority calls b first, and 0 is odd. */
	j = order_job(8, "01111111");
	v = correlate(j);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 0);
	assert_string_equal(v->op.comm, "b");
	assert_class(v, 0, "1-7", true, "b");
	job_free(j);
}

/*
 * b has only ranks 0 and 1; rank 1 calls b's all_reduce before world's,
 * rank 0 world's first, as 2 and 3 (not members of b) do. Rank 1 is the
 * odd one out; the majority entered world's, which is all that can be
 * said of 2 and 3.
 */
static void test_order_sub_communicator(void **state)
{
	const uint32_t pair[] = { 0, 1 };
	struct job *j = world_job(4);
	struct fr_verdict *v;

	(void)state;
	for (uint32_t r = 0; r < 4; r++) {
		history(j, r, "world", 3);
		if (r < 2) {
			add_comm(j, r, "b", pair, 2);
			history(j, r, "b", 3);
		}
		add_op(j, r, r == 1 ? "b" : "world", FR_OP_ALL_REDUCE, 4, FR_STATE_ENTERED, 20);
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_DEADLOCK);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 1);
	assert_class(v, 0, "0,2-3", true, "world");
	assert_false(v->classes[0].has_before);
	assert_true(v->classes[1].has_before);
	assert_contains(v->summary, "deadlock: rank 1 (node1, pid 1001) called all_reduce #4 "
				    "on b before all_reduce #4 on world; ranks 0,2-3 entered "
				    "all_reduce #4 on world; ranks 0-3 have waited 20 s");
	job_free(j);
}

/* Ring wrap: an entry gone from the ring still counts through last_entered. */
static void test_ring_wrap_uses_progress(void **state)
{
	struct job *j = world_job(2);
	struct fr_verdict *v;

	(void)state;
	add_op(j, 0, "world", FR_OP_ALL_REDUCE, 9, FR_STATE_ENTERED, 5);
	/* Rank 1 entered #9 and #10 (its ring kept only #10, completed), then
	 * entered #11 and is in it. */
	add_op(j, 1, "world", FR_OP_ALL_REDUCE, 11, FR_STATE_ENTERED, 1);
	((struct fr_comm *)fr_trace_comm(&j->ev[1]->t, "world"))->last_entered = 11;
	j->ev[1]->t.dropped = 10;
	v = correlate(j);
	/* Nobody is missing from #9; it is what does not complete. */
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->op.seq, 9);
	assert_int_equal(v->culprits[0].reason, FR_REASON_STUCK_IN_OP);
	job_free(j);
}

/* ---- ring windows ---- */

/*
 * Rank 3's ring is smaller: it kept all_reduce #21-#40 of world where the
 * others kept #1-#40. Nothing is missing or mismatched for that; the
 * report says the windows differ and where they are compared.
 */
static void test_ring_windows_differ(void **state)
{
	struct job *j = job_new(4);
	struct fr_verdict *v;
	char *buf = NULL;
	size_t len = 0;
	json_t *o, *a;
	FILE *f;

	(void)state;
	for (uint32_t r = 0; r < 4; r++)
		rank_new(j, r, FR_RANK_DUMPED);
	add_world(j);
	for (uint32_t r = 0; r < 4; r++)
		for (uint64_t s = r == 3 ? 21 : 1; s <= 40; s++)
			add_op(j, r, "world", FR_OP_ALL_REDUCE, s, FR_STATE_COMPLETED, 100);
	j->ev[3]->t.dropped = 20;
	/* Before its window, rank 3 may have called anything: a different
	 * entry at #5 where the others agree is not in its ring to compare. */
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_OK);
	assert_int_equal(v->aligned.ncomms, 1);
	assert_string_equal(v->aligned.comm, "world");
	assert_int_equal(v->aligned.latest.rank, 3);
	assert_int_equal(v->aligned.latest.first, 21);
	assert_int_equal(v->aligned.latest.last, 40);
	assert_int_equal(v->aligned.earliest.rank, 0);
	assert_int_equal(v->aligned.earliest.first, 1);
	assert_int_equal(v->aligned.common_first, 21);
	assert_int_equal(v->aligned.common_last, 40);
	o = fr_verdict_to_json(v);
	a = json_object_get(o, "aligned");
	assert_int_equal(json_integer_value(json_object_get(a, "comms")), 1);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(a, "latest"),
							    "rank")), 3);
	assert_int_equal(json_integer_value(json_object_get(a, "common_first")), 21);
	json_decref(o);
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	fr_verdict_print(f, v, j->traces, 4);
	fclose(f);
	assert_contains(buf, "Ring windows differ (rank 3 kept seq 21-40 of world, rank 0 kept "
			     "1-40); compared on the common range 21-40\n");
	free(buf);
	job_free(j);

	/* Windows that agree say nothing. */
	j = job_new(2);
	for (uint32_t r = 0; r < 2; r++)
		rank_new(j, r, FR_RANK_DUMPED);
	add_world(j);
	for (uint32_t r = 0; r < 2; r++)
		history(j, r, "world", 5);
	v = correlate(j);
	assert_int_equal(v->aligned.ncomms, 0);
	o = fr_verdict_to_json(v);
	a = json_object_get(o, "aligned");
	assert_int_equal(json_integer_value(json_object_get(a, "comms")), 0);
	assert_null(json_object_get(a, "comm"));
	json_decref(o);
	job_free(j);
}

/*
 * A writer without progress counters (last_entered 0, as a PyTorch dump
 * without pg_status reads). Ranks 0-2 wait in all_reduce #5; rank 3 posted
 * #5, #6 and #7 without waiting, and its ring kept only #6 and #7. Having
 * kept #7, it entered #5: it is not the rank that never entered it.
 */
static void test_window_past_stuck_op(void **state)
{
	struct job *j = world_job(4);
	struct fr_verdict *v;

	(void)state;
	for (uint32_t r = 0; r < 3; r++) {
		history(j, r, "world", 4);
		add_op(j, r, "world", FR_OP_ALL_REDUCE, 5, FR_STATE_ENTERED, 30);
	}
	for (uint64_t s = 6; s <= 7; s++) {
		struct fr_op *op = add_op(j, 3, "world", FR_OP_ALL_REDUCE, s, FR_STATE_ENTERED, 20);

		op->nonblocking = true;
	}
	j->ev[3]->t.dropped = 5;
	for (uint32_t r = 0; r < 4; r++) {
		struct fr_comm *c = (struct fr_comm *)fr_trace_comm(&j->ev[r]->t, "world");

		c->last_entered = 0;
		c->last_completed = 0;
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->op.seq, 5);
	assert_int_equal(v->culprits[0].reason, FR_REASON_STUCK_IN_OP);
	assert_int_equal(v->aligned.ncomms, 1);
	assert_int_equal(v->aligned.latest.rank, 3);
	assert_true(v->aligned.common_first > v->aligned.common_last);
	job_free(j);
}

/*
 * 1024 ranks with 200 entries each, rank 777 never entered the last
 * all_reduce: the answer, readable, in well under a few seconds.
 */
static void test_scale_1024(void **state)
{
	struct job *j = job_new(1024);
	struct fr_verdict *v;
	struct timespec t0, t1;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	double secs;

	(void)state;
	for (uint32_t r = 0; r < 1024; r++)
		rank_new(j, r, FR_RANK_DUMPED);
	add_world(j);
	for (uint32_t r = 0; r < 1024; r++) {
		history(j, r, "world", 199);
		if (r != 777)
			add_op(j, r, "world", FR_OP_ALL_REDUCE, 200, FR_STATE_ENTERED, 60);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	v = correlate(j);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	assert_true(secs < 5.0);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 777);
	assert_ranks(v->waiting, v->nwaiting, "0-776,778-1023");
	assert_contains(v->summary, "ranks 0-776,778-1023 have waited 60 s");
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	fr_verdict_print(f, v, j->traces, 1024);
	fclose(f);
	/* One line for 1023 ranks waiting in the same op, not 1023 lines. */
	assert_true(len < 4096);
	free(buf);
	job_free(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ok_all_completed),
		cmocka_unit_test(test_ok_slow_but_progressing),
		cmocka_unit_test(test_not_entered_world),
		cmocka_unit_test(test_request_dump_in_progress),
		cmocka_unit_test(test_sub_communicator),
		cmocka_unit_test(test_unresponsive),
		cmocka_unit_test(test_disconnected),
		cmocka_unit_test(test_bad_status_preferred),
		cmocka_unit_test(test_finished_peer_of_recv),
		cmocka_unit_test(test_missing_rank),
		cmocka_unit_test(test_posted_irecv_does_not_wait),
		cmocka_unit_test(test_ok_posted_only),
		cmocka_unit_test(test_waited_irecv_peer_behind),
		cmocka_unit_test(test_waited_irecv_deadlock),
		cmocka_unit_test(test_any_source_recv_blames_sink),
		cmocka_unit_test(test_finalize_not_entered),
		cmocka_unit_test(test_stuck_in_op),
		cmocka_unit_test(test_stuck_on_gpu),
		cmocka_unit_test(test_unresponsive_nobody_waits),
		cmocka_unit_test(test_name_silent),
		cmocka_unit_test(test_p2p_peer_never_posts),
		cmocka_unit_test(test_p2p_deadlock),
		cmocka_unit_test(test_collective_order_deadlock),
		cmocka_unit_test(test_order_one_odd_rank),
		cmocka_unit_test(test_order_no_majority),
		cmocka_unit_test(test_order_three_of_eight),
		cmocka_unit_test(test_order_sub_communicator),
		cmocka_unit_test(test_ring_wrap_uses_progress),
		cmocka_unit_test(test_scale_1024),
		cmocka_unit_test(test_ring_windows_differ),
		cmocka_unit_test(test_window_past_stuck_op),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
