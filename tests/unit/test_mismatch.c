/*
 * Unit tests of the correlation engine's mismatches (mismatch.c):
 * collectives whose members called different things, or the same with
 * sizes that disagree, and p2p messages whose sides disagree.
 */
#include "correlate_fixtures.h"

static void test_mismatch_three_vs_one(void **state)
{
	struct job *j = mismatch_job(2, FR_OP_BROADCAST);
	struct fr_verdict *v;

	(void)state;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_MISMATCH);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 2);
	assert_int_equal(v->culprits[0].reason, FR_REASON_MISMATCH);
	assert_true(v->culprits[0].has_op);
	assert_int_equal(v->culprits[0].op.type, FR_OP_BROADCAST);
	assert_int_equal(v->op.type, FR_OP_ALL_REDUCE);
	assert_int_equal(v->op.seq, 5);
	assert_ranks(v->waiting, v->nwaiting, "0-1,3");
	assert_contains(v->summary, "rank 2 (node2, pid 1002) called broadcast #5");
	assert_contains(v->summary, "where ranks 0-1,3 called all_reduce (count 1, double");
	job_free(j);
}

/* PyTorch's analyzer blames everyone else when its reference rank is the odd one. */
static void test_mismatch_odd_rank_zero(void **state)
{
	struct job *j = mismatch_job(0, FR_OP_BROADCAST);
	struct fr_verdict *v;

	(void)state;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_MISMATCH);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 0);
	assert_int_equal(v->op.type, FR_OP_ALL_REDUCE);
	assert_contains(v->summary, "rank 0 ");
	job_free(j);
}

static void test_mismatch_count_and_tie(void **state)
{
	struct job *j = mismatch_job(UINT32_MAX, FR_OP_ALL_REDUCE);
	struct fr_verdict *v;
	uint32_t r[4];

	(void)state;
	/* A count mismatch, two against two: the ranks not sharing rank 0's
	 * signature are named. */
	j->ev[1]->t.ops[4].count = 2;
	j->ev[3]->t.ops[4].count = 2;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_MISMATCH);
	assert_int_equal(culprit_ranks(v, r), 2);
	assert_int_equal(r[0], 1);
	assert_int_equal(r[1], 3);
	assert_int_equal(v->op.count, 1);
	assert_int_equal(v->culprits[0].op.count, 2);
	assert_contains(v->summary, "count 2");
	job_free(j);
}

/*
 * The classes of a mismatch: three ranks called all_reduce, the majority,
 * and rank 2 broadcast; two against two have no majority, which the
 * summary says, and both are listed.
 */
static void test_mismatch_classes(void **state)
{
	struct job *j = mismatch_job(2, FR_OP_BROADCAST);
	struct fr_verdict *v;

	(void)state;
	v = correlate(j);
	assert_int_equal(v->nclasses, 2);
	assert_class(v, 0, "0-1,3", true, "world");
	assert_int_equal(v->classes[0].op.type, FR_OP_ALL_REDUCE);
	assert_class(v, 1, "2", false, "world");
	assert_int_equal(v->classes[1].op.type, FR_OP_BROADCAST);
	assert_string_equal(v->classes[1].behaviour, "called broadcast #5 (count 1, double, root 0)");
	assert_false(v->classes[1].has_before);
	job_free(j);

	j = mismatch_job(UINT32_MAX, FR_OP_ALL_REDUCE);
	j->ev[1]->t.ops[4].count = 2;
	j->ev[3]->t.ops[4].count = 2;
	v = correlate(j);
	assert_int_equal(v->nclasses, 2);
	assert_class(v, 0, "0,2", false, "world");
	assert_class(v, 1, "1,3", false, "world");
	assert_int_equal(v->classes[1].op.count, 2);
	assert_contains(v->summary, "no majority: ranks 1,3 called all_reduce #5 (count 2");
	job_free(j);
}

/*
 * PyTorch records an all_gather's output beside its input: on every member
 * the output is the group's size times the input. Rank 1 passed an output
 * the size of its input; the others' relation holds, and a rank whose
 * output is not recorded (0) is not compared.
 */
static void test_all_gather_size_relation(void **state)
{
	struct job *j = mismatch_job(UINT32_MAX, FR_OP_ALL_REDUCE);
	struct fr_verdict *v;

	(void)state;
	/* #5, in flight on every rank, made an all_gather. */
	for (uint32_t r = 0; r < 4; r++) {
		struct fr_op *op = &j->ev[r]->t.ops[4];

		op->type = FR_OP_ALL_GATHER;
		op->redop = "";
		op->size_ratio = r == 1 ? 1 : r == 3 ? 0 : 4;
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_MISMATCH);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 1);
	assert_int_equal(v->culprits[0].op.size_ratio, 1);
	assert_int_equal(v->op.size_ratio, 4);
	assert_contains(v->summary, "rank 1 (node1, pid 1001) called all_gather #5 "
				    "(count 1, double, output 1x input)");
	assert_contains(v->summary, "called all_gather (count 1, double, output 4x input)");
	job_free(j);

	/* Every member's relation holds (a reduce_scatter's input is 4x its
	 * output): nothing to name. */
	j = world_job(4);
	for (uint32_t r = 0; r < 4; r++)
		add_op(j, r, "world", FR_OP_REDUCE_SCATTER, 1, FR_STATE_COMPLETED, 5)->size_ratio = 4;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_OK);
	job_free(j);
}

/* Vector collectives differ in count by design; that is no mismatch. */
static void test_vector_counts_no_mismatch(void **state)
{
	struct job *j = world_job(2);
	struct fr_verdict *v;

	(void)state;
	for (uint32_t r = 0; r < 2; r++) {
		struct fr_op *op = add_op(j, r, "world", FR_OP_ALL_GATHERV, 1,
					  FR_STATE_COMPLETED, 5);

		op->count = 10 + r;
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_OK);
	job_free(j);
}

/*
 * A mismatch at a lower seq explains the hang that follows it. MPI paired
 * the all_reduce #1 of ranks 0 and 2 with something else of rank 1, which is
 * still in the barrier it called instead.
 */
static void test_mismatch_wins_over_hang(void **state)
{
	struct job *j = world_job(3);
	struct fr_verdict *v;

	(void)state;
	for (uint32_t r = 0; r < 3; r++)
		add_op(j, r, "world", r == 1 ? FR_OP_BARRIER : FR_OP_ALL_REDUCE, 1,
		       r == 1 ? FR_STATE_ENTERED : FR_STATE_COMPLETED, 20);
	add_op(j, 0, "world", FR_OP_ALL_REDUCE, 2, FR_STATE_ENTERED, 10);
	add_op(j, 2, "world", FR_OP_ALL_REDUCE, 2, FR_STATE_ENTERED, 10);
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_MISMATCH);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 1);
	assert_int_equal(v->op.seq, 1);
	assert_int_equal(v->culprits[0].op.type, FR_OP_BARRIER);
	job_free(j);
}

/*
 * A collective that completed on every rank was matched by MPI, whatever the
 * agent recorded: a root that gathers in place records no send count. The
 * hang that follows is the answer, not a mismatch.
 */
static void test_completed_mismatch_ignored(void **state)
{
	struct job *j = world_job(4);
	struct fr_verdict *v;

	(void)state;
	for (uint32_t r = 0; r < 4; r++) {
		struct fr_op *op = add_op(j, r, "world", FR_OP_GATHER, 1, FR_STATE_COMPLETED, 60);

		op->root = 0;
		op->redop = "";
		if (r == 0) {
			op->count = 0;
			op->bytes = 0;
			op->dtype = "derived";
		}
		if (r != 2)
			add_op(j, r, "world", FR_OP_ALL_REDUCE, 2, FR_STATE_ENTERED, 30);
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 2);
	assert_int_equal(v->culprits[0].reason, FR_REASON_NOT_ENTERED);
	assert_int_equal(v->op.type, FR_OP_ALL_REDUCE);
	assert_int_equal(v->op.seq, 2);
	assert_ranks(v->waiting, v->nwaiting, "0-1,3");
	job_free(j);
}

/* ---- wider mismatch checks ---- */

/*
 * Five ranks in all_gather #3; rank 2 passes 2 elements where the others
 * pass 1. The odd rank is named by majority, though it is neither rank 0
 * nor the first trace handed over (rank 4).
 */
static void test_all_gather_count_odd_rank(void **state)
{
	struct job *j = world_job(5);
	struct fr_verdict *v;

	(void)state;
	for (uint32_t r = 0; r < 5; r++) {
		struct fr_op *op;

		history(j, r, "world", 2);
		op = add_op(j, r, "world", FR_OP_ALL_GATHER, 3, FR_STATE_ENTERED, 10);
		op->redop = "";
		op->count = r == 2 ? 2 : 1;
		op->bytes = op->count * 8;
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_MISMATCH);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 2);
	assert_int_equal(v->culprits[0].reason, FR_REASON_MISMATCH);
	assert_int_equal(v->culprits[0].op.count, 2);
	assert_int_equal(v->op.type, FR_OP_ALL_GATHER);
	assert_int_equal(v->op.count, 1);
	assert_ranks(v->waiting, v->nwaiting, "0-1,3-4");
	assert_contains(v->summary, "rank 2 (node2, pid 1002) called all_gather #3 (count 2, "
				    "double) on world where ranks 0-1,3-4 called all_gather "
				    "(count 1");
	job_free(j);

	/* A reduce_scatter's count is the same on every member as well. */
	j = job_new(3);
	for (uint32_t r = 0; r < 3; r++)
		rank_new(j, r, FR_RANK_DUMPED);
	add_world(j);
	for (uint32_t r = 0; r < 3; r++)
		add_op(j, r, "world", FR_OP_REDUCE_SCATTER, 1, FR_STATE_ENTERED, 10)->count =
			r == 0 ? 6 : 3;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_MISMATCH);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 0);
	job_free(j);
}

/*
 * Nothing hangs, but rank 3 passed 2 elements to all_reduce #6 where the
 * others passed 1 and the library completed it anyway: a mismatch all the
 * same, named as such.
 */
static void test_completed_mismatch_no_hang(void **state)
{
	struct job *j = world_job(4);
	struct fr_verdict *v;

	(void)state;
	for (uint32_t r = 0; r < 4; r++)
		history(j, r, "world", 10);
	/* The same bytes spelled otherwise (MPI_LONG for MPI_INT64_T, bytes
	 * received as doubles) are one message once the library matched it. */
	j->ev[1]->t.ops[5].dtype = "MPI_LONG";
	j->ev[2]->t.ops[4].count = 8;
	j->ev[2]->t.ops[4].dtype = "MPI_BYTE";
	/* A live view knows no reduction: unknown, not different. */
	j->ev[0]->t.ops[5].redop = "";
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_OK);
	fr_verdict_free(v);
	j->ev[3]->t.ops[5].count = 2;
	j->ev[3]->t.ops[5].bytes *= 2;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_MISMATCH);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 3);
	assert_int_equal(v->culprits[0].op.count, 2);
	assert_int_equal(v->op.seq, 6);
	assert_int_equal(v->nwaiting, 0);
	assert_contains(v->summary, "it completed all the same (no hang)");
	job_free(j);

	/* A gather's root describes the receiving side: once completed, its
	 * count is no evidence. */
	j = job_new(4);
	for (uint32_t r = 0; r < 4; r++)
		rank_new(j, r, FR_RANK_DUMPED);
	add_world(j);
	for (uint32_t r = 0; r < 4; r++) {
		struct fr_op *op = add_op(j, r, "world", FR_OP_GATHER, 1, FR_STATE_COMPLETED, 60);

		op->root = 0;
		op->redop = "";
		if (r == 0) {
			op->count = 0;
			op->bytes = 0;
			op->dtype = "derived";
		}
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_OK);
	job_free(j);
}

/*
 * Send #k from a to b against b's receive #k from a: rank 0 sends rank 1
 * `n` messages of 8 bytes, the last one in state `last`, except message
 * `bad`, 16 bytes where rank 1 takes 8. Both ranks run `lib`.
 */
static struct job *pair_job(const char *lib, uint64_t n, uint64_t bad, enum fr_op_state last)
{
	struct job *j = job_new(2);

	for (uint32_t r = 0; r < 2; r++)
		snprintf(rank_new(j, r, FR_RANK_DUMPED)->comm_lib, FR_LIBVER_MAX + 1, "%s", lib);
	add_world(j);
	for (uint64_t k = 1; k <= n; k++) {
		enum fr_op_state st = k == n ? last : FR_STATE_COMPLETED;
		struct fr_op *s = add_op(j, 0, "world", FR_OP_SEND, k, st, 100 - k);
		struct fr_op *r = add_op(j, 1, "world", FR_OP_RECV, k, st, 100 - k);

		s->peer = 1;
		r->peer = 0;
		if (k == bad) {
			s->count = 2;
			s->bytes = 16;
		}
	}
	return j;
}

/* NCCL matches a pair's messages in order, and sizes exactly. */
static void test_p2p_size_mismatch(void **state)
{
	struct job *j = pair_job("NCCL 2.28.9", 5, 3, FR_STATE_COMPLETED);
	struct fr_verdict *v;
	char *buf = NULL;
	size_t len = 0;
	json_t *o;
	FILE *f;

	(void)state;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_MISMATCH);
	assert_int_equal(v->nculprits, 2);
	assert_int_equal(v->culprits[0].rank, 0);
	assert_int_equal(v->culprits[0].reason, FR_REASON_MISMATCH);
	assert_int_equal(v->culprits[0].op.type, FR_OP_SEND);
	assert_int_equal(v->culprits[0].op.bytes, 16);
	assert_int_equal(v->culprits[1].rank, 1);
	assert_int_equal(v->culprits[1].op.type, FR_OP_RECV);
	assert_int_equal(v->culprits[1].op.bytes, 8);
	assert_int_equal(v->op.type, FR_OP_SEND);
	assert_int_equal(v->op.seq, 3);
	assert_int_equal(v->op.peer, 1);
	assert_contains(v->summary, "send #3 to rank 1 on world does not match its receive: "
				    "rank 0 (node0, pid 1000) sends 16 bytes (count 2, double), "
				    "rank 1 (node1, pid 1001) receives 8 bytes (count 1, double)");
	assert_contains(v->summary, "no hang");
	o = fr_verdict_to_json(v);
	assert_string_equal(json_string_value(json_object_get(o, "verdict")), "mismatch");
	assert_int_equal(json_array_size(json_object_get(o, "culprits")), 2);
	json_decref(o);
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	fr_verdict_print(f, v, j->traces, 2);
	fclose(f);
	assert_contains(buf, "Operation (the send): send #3 to rank 1 on world");
	assert_contains(buf, "Culprit rank 1 (node1, pid 1001): its side of the message does "
			     "not match the other side's\n  called: recv #3 from rank 0");
	free(buf);
	job_free(j);

	/* In flight, the disagreement is what holds both up: it wins over
	 * "both posted it and it does not complete". */
	j = pair_job("NCCL 2.28.9", 4, 4, FR_STATE_ENTERED);
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_MISMATCH);
	assert_int_equal(v->nculprits, 2);
	assert_int_equal(v->op.seq, 4);
	assert_ranks(v->waiting, v->nwaiting, "0-1");
	assert_null(strstr(v->summary, "no hang"));
	job_free(j);

	/* A receive that takes more than is sent is one too. */
	j = pair_job("NCCL 2.28.9", 5, 0, FR_STATE_COMPLETED);
	j->ev[1]->t.ops[2].count = 4;
	j->ev[1]->t.ops[2].bytes = 32;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_MISMATCH);
	assert_int_equal(v->op.seq, 3);
	job_free(j);
}

/*
 * MPI matches by tag too (not in the evidence): the k-th send and the k-th
 * receive may be different messages (a halo exchange posts its receives in
 * any order), so an MPI pair is never a mismatch, in flight or completed.
 */
static void test_p2p_size_mpi(void **state)
{
	struct job *j = pair_job("Open MPI v4.1.4", 5, 0, FR_STATE_COMPLETED);
	struct fr_verdict *v;

	(void)state;
	j->ev[1]->t.ops[2].count = 4;
	j->ev[1]->t.ops[2].bytes = 32;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_OK);
	job_free(j);

	j = pair_job("Open MPI v4.1.4", 5, 3, FR_STATE_COMPLETED);
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_OK);
	job_free(j);

	j = pair_job("Open MPI v4.1.4", 4, 4, FR_STATE_ENTERED);
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->op.seq, 4);
	job_free(j);

	/* In flight, a receive larger than its send is no mismatch. */
	j = pair_job("Open MPI v4.1.4", 4, 0, FR_STATE_ENTERED);
	j->ev[1]->t.ops[3].count = 4;
	j->ev[1]->t.ops[3].bytes = 32;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->culprits[0].reason, FR_REASON_STUCK_IN_OP);
	job_free(j);
}

/*
 * A writer that numbers every p2p operation of a communicator in one
 * sequence (PyTorch's p2p_seq_id) cannot be paired by seq. Rank 0 sends 64
 * bytes to rank 2 (#1), then 16 and 8 bytes to rank 1 (#2, #3); rank 1
 * receives 16 and 8 bytes from rank 0 (#1, #2). By seq, rank 0's #2 (16
 * bytes) would meet rank 1's #2 (8 bytes): a mismatch that is not one.
 */
static void test_p2p_one_sequence_not_paired(void **state)
{
	static const struct {
		uint32_t rank;
		enum fr_op_type type;
		int32_t peer;
		uint64_t seq, count;
	} ops[] = {
		{ 0, FR_OP_SEND, 2, 1, 8 }, { 2, FR_OP_RECV, 0, 1, 8 },
		{ 0, FR_OP_SEND, 1, 2, 2 }, { 1, FR_OP_RECV, 0, 1, 2 },
		{ 0, FR_OP_SEND, 1, 3, 1 }, { 1, FR_OP_RECV, 0, 2, 1 },
	};
	struct job *j = world_job(3);
	struct fr_verdict *v;

	(void)state;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		struct fr_op *op = add_op(j, ops[i].rank, "world", ops[i].type, ops[i].seq,
					  FR_STATE_COMPLETED, 100 - i);

		op->peer = ops[i].peer;
		op->count = ops[i].count;
		op->bytes = op->count * 8;
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_OK);
	job_free(j);

	/* Numbered per (peer, direction), as the agent does, the same
	 * exchanges are paired, and a real disagreement is found. */
	j = job_new(3);
	for (uint32_t r = 0; r < 3; r++)
		rank_new(j, r, FR_RANK_DUMPED);
	add_world(j);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		uint64_t seq = ops[i].rank == 0 && ops[i].peer == 1 ? ops[i].seq - 1 : ops[i].seq;
		struct fr_op *op = add_op(j, ops[i].rank, "world", ops[i].type, seq,
					  FR_STATE_COMPLETED, 100 - i);

		op->peer = ops[i].peer;
		op->count = ops[i].count;
		op->bytes = op->count * 8;
	}
	j->ev[1]->t.ops[1].count = 0;
	j->ev[1]->t.ops[1].bytes = 0;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_MISMATCH);
	assert_int_equal(v->op.seq, 2);
	assert_int_equal(v->op.peer, 1);
	assert_int_equal(v->culprits[1].op.bytes, 0);
	job_free(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mismatch_three_vs_one),
		cmocka_unit_test(test_mismatch_odd_rank_zero),
		cmocka_unit_test(test_mismatch_count_and_tie),
		cmocka_unit_test(test_mismatch_classes),
		cmocka_unit_test(test_all_gather_size_relation),
		cmocka_unit_test(test_vector_counts_no_mismatch),
		cmocka_unit_test(test_mismatch_wins_over_hang),
		cmocka_unit_test(test_completed_mismatch_ignored),
		cmocka_unit_test(test_all_gather_count_odd_rank),
		cmocka_unit_test(test_completed_mismatch_no_hang),
		cmocka_unit_test(test_p2p_size_mismatch),
		cmocka_unit_test(test_p2p_size_mpi),
		cmocka_unit_test(test_p2p_one_sequence_not_paired),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
