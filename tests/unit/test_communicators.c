/*
 * Unit tests of the correlation engine's communicators: members as NCCL
 * ranks know them, partly or out of global order, with peers and roots by
 * communicator rank (correlate_index.c), and groups that share an id but not
 * their members, as PyTorch's split_group names them (comm_split.c).
 */
#include "correlate_fixtures.h"

/*
 * PyTorch's split_group gives every color's group one name: ranks 0-1 and
 * ranks 2-3 each call their group "1". Rank 3 never entered all_reduce #6
 * of its group, where rank 2 waits; ranks 0-1 completed #6 of theirs. Told
 * apart, the verdict names rank 3 on 2-3's group; mixed, every member of
 * one "1" entered #6 and rank 0 or 1 would be blamed. NCCL's partial lists
 * (members unknown) are not split: the engine merges them.
 */
static void test_split_group_names(void **state)
{
	static const uint32_t low[] = { 0, 1 }, high[] = { 2, 3 };
	struct job *j = job_new(4);
	struct fr_trace *ts[5];
	struct fr_verdict *v;
	char *out = NULL;
	size_t outlen = 0;
	FILE *note = open_memstream(&out, &outlen);

	(void)state;
	assert_non_null(note);
	for (uint32_t r = 0; r < 4; r++) {
		ts[r] = rank_new(j, r, FR_RANK_DUMPED);
		add_comm(j, r, "1", r < 2 ? low : high, 2);
		add_comm_own(j, r, "nccl-7", 4, r);
		history(j, r, "1", 5);
		if (r < 2)
			add_op(j, r, "1", FR_OP_ALL_REDUCE, 6, FR_STATE_COMPLETED, 30);
		else if (r == 2)
			add_op(j, r, "1", FR_OP_ALL_REDUCE, 6, FR_STATE_ENTERED, 30);
	}
	assert_int_equal(fr_traces_split_comms(ts, 4, note, "test"), 1);
	fclose(note);
	assert_string_equal(out, "test: communicator 1 names different groups on different ranks "
				 "(PyTorch's split_group names each color's group alike); told "
				 "apart as 1:0-1, 1:2-3\n");
	free(out);
	assert_non_null(fr_trace_comm(ts[1], "1:0-1"));
	assert_non_null(fr_trace_comm(ts[3], "1:2-3"));
	assert_null(fr_trace_comm(ts[3], "1"));
	assert_non_null(fr_trace_comm(ts[3], "nccl-7"));
	assert_string_equal(ts[2]->ops[5].comm, "1:2-3");
	assert_string_equal(ts[0]->ops[0].comm, "1:0-1");
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 3);
	assert_int_equal(v->culprits[0].reason, FR_REASON_NOT_ENTERED);
	assert_string_equal(v->op.comm, "1:2-3");
	assert_comm_ranks(v, 2, "2,3");
	/* Nothing left to split: a second pass renames nothing. */
	assert_int_equal(fr_traces_split_comms(ts, 4, NULL, "test"), 0);
	job_free(j);
}

/* Ranks 0-1 list "1" as {0, 1}, rank 2 as {2, 3}; rank 3 as `three`. */
static struct job *split_job(const uint32_t *three, bool taken)
{
	static const uint32_t low[] = { 0, 1 }, high[] = { 2, 3 };
	struct job *j = job_new(4);

	for (uint32_t r = 0; r < 4; r++) {
		rank_new(j, r, FR_RANK_DUMPED);
		add_comm(j, r, "1", r < 2 ? low : r == 2 ? high : three, 2);
		if (taken)
			add_comm(j, r, "1:0-1", low, 2);
		history(j, r, "1", 5);
		if (r < 2 || r == 3)
			add_op(j, r, "1", FR_OP_ALL_REDUCE, 6,
			       r < 2 ? FR_STATE_COMPLETED : FR_STATE_ENTERED, 30);
	}
	return j;
}

static void split(struct job *j, int want)
{
	struct fr_trace *ts[4];

	for (uint32_t r = 0; r < 4; r++)
		ts[r] = &j->ev[r]->t;
	assert_int_equal(fr_traces_split_comms(ts, 4, NULL, "test"), want);
}

/*
 * What a split cannot go by, and must not break. Rank 3's list knows only
 * its own place (an NCCL rank's): it goes with the one group it fits, so
 * that rank 2, which never entered #6, is named. A list that fits both
 * groups (or neither) leaves the id whole. An id the split would give
 * that a communicator already has is not given twice. One group listed in
 * two orders is one group.
 */
static void test_split_group_edge_cases(void **state)
{
	static const uint32_t partial[] = { FR_RANK_UNKNOWN, 3 };
	static const uint32_t unknown[] = { FR_RANK_UNKNOWN, FR_RANK_UNKNOWN };
	static const uint32_t mine[] = { 2, 3 };
	struct job *j = split_job(partial, false);
	struct fr_verdict *v;

	(void)state;
	split(j, 1);
	assert_non_null(fr_trace_comm(&j->ev[3]->t, "1:2-3"));
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 2);
	assert_string_equal(v->op.comm, "1:2-3");
	job_free(j);

	j = split_job(unknown, false);
	split(j, 0);
	assert_non_null(fr_trace_comm(&j->ev[0]->t, "1"));
	assert_non_null(fr_trace_comm(&j->ev[2]->t, "1"));
	job_free(j);

	/* "1:0-1" is taken on every rank: ranks 0-1's group gets a hash. */
	j = split_job(mine, true);
	split(j, 1);
	assert_int_equal(j->ev[0]->t.ncomms, 2);
	assert_string_equal(j->ev[0]->t.comms[1].id, "1:0-1");
	assert_true(strncmp(j->ev[0]->t.comms[0].id, "1:#", 3) == 0);
	assert_string_equal(j->ev[0]->t.ops[0].comm, j->ev[0]->t.comms[0].id);
	assert_string_equal(j->ev[2]->t.comms[0].id, "1:2-3");
	job_free(j);

	j = split_job(mine, false);
	{
		uint32_t *m = j->ev[1]->t.comms[0].members;

		m[0] = 1;
		m[1] = 0;
	}
	split(j, 1);
	assert_string_equal(j->ev[0]->t.comms[0].id, "1:0-1");
	assert_string_equal(j->ev[1]->t.comms[0].id, "1:0-1");
	job_free(j);
}

/*
 * An NCCL job: each rank knows only its own entry of "nccl-abc". The lists
 * merged name every member, so rank 2, which never entered all_reduce #3,
 * is found, and the op's comm_ranks and comm_size are complete.
 */
static void test_nccl_partial_members(void **state)
{
	struct job *j = job_new(4);
	struct fr_verdict *v;
	json_t *o, *op, *a;

	(void)state;
	for (uint32_t r = 0; r < 4; r++) {
		rank_new(j, r, FR_RANK_DUMPED);
		add_comm_own(j, r, "nccl-abc", 4, r);
		history(j, r, "nccl-abc", 2);
		if (r != 2)
			add_op(j, r, "nccl-abc", FR_OP_ALL_REDUCE, 3, FR_STATE_ENTERED, 30);
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 2);
	assert_int_equal(v->culprits[0].reason, FR_REASON_NOT_ENTERED);
	assert_int_equal(v->culprits[0].last_completed.seq, 2);
	assert_int_equal(v->op.seq, 3);
	assert_comm_ranks(v, 4, "0,1,2,3");
	assert_ranks(v->waiting, v->nwaiting, "0-1,3");
	assert_contains(v->summary, "rank 2 (node2, pid 1002) never entered all_reduce #3 on "
				    "nccl-abc [0-3]");

	o = fr_verdict_to_json(v);
	assert_non_null(o);
	op = json_object_get(o, "op");
	a = json_object_get(op, "comm_ranks");
	assert_int_equal(json_array_size(a), 4);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(json_integer_value(json_array_get(a, i)), i);
	assert_int_equal(json_integer_value(json_object_get(op, "comm_size")), 4);
	json_decref(o);
	job_free(j);
}

/*
 * Comm rank i is global rank 2i: the merged list, and comm_ranks, are the
 * members' global ranks in communicator order, and the culprit is named by
 * its global rank. The odd ranks are not members and wait on nothing.
 */
static void test_nccl_members_not_global_order(void **state)
{
	struct job *j = job_new(8);
	struct fr_verdict *v;
	json_t *o, *a;

	(void)state;
	for (uint32_t r = 0; r < 8; r++)
		rank_new(j, r, FR_RANK_DUMPED);
	/* Listed from the highest member down: order of evidence is no matter. */
	for (uint32_t r = 8; r-- > 0;) {
		if (r % 2)
			continue;
		add_comm_own(j, r, "nccl-even", 4, r / 2);
		history(j, r, "nccl-even", 2);
		if (r != 4)
			add_op(j, r, "nccl-even", FR_OP_ALL_REDUCE, 3, FR_STATE_ENTERED, 20);
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 4);
	assert_int_equal(v->culprits[0].reason, FR_REASON_NOT_ENTERED);
	assert_comm_ranks(v, 4, "0,2,4,6");
	assert_ranks(v->waiting, v->nwaiting, "0,2,6");
	assert_contains(v->summary, "rank 4 (node4, pid 1004) never entered all_reduce #3 on "
				    "nccl-even [0,2,4,6]");
	o = fr_verdict_to_json(v);
	a = json_object_get(json_object_get(o, "op"), "comm_ranks");
	assert_int_equal(json_array_size(a), 4);
	assert_int_equal(json_integer_value(json_array_get(a, 1)), 2);
	assert_int_equal(json_integer_value(json_array_get(a, 3)), 6);
	json_decref(o);
	job_free(j);
}

/*
 * Two traces disagree on the size of "nccl-x" (4, then 3 from a stray rank
 * 1): the first, lowest rank's, wins and rank 1's list is ignored, so its
 * entry stays unknown. Rank 3 never entered #2; the report says one member
 * is unknown.
 */
static void test_member_size_conflict(void **state)
{
	const uint32_t stray[] = { FR_RANK_UNKNOWN, FR_RANK_UNKNOWN, 1 };
	struct job *j = job_new(6);
	struct fr_verdict *v;
	json_t *o, *op;

	(void)state;
	for (uint32_t r = 0; r < 6; r++)
		rank_new(j, r, FR_RANK_DUMPED);
	for (uint32_t r = 0; r < 4; r++) {
		if (r == 1)
			add_comm(j, r, "nccl-x", stray, 3);
		else
			add_comm_own(j, r, "nccl-x", 4, r);
		history(j, r, "nccl-x", 1);
		if (r != 3)
			add_op(j, r, "nccl-x", FR_OP_ALL_REDUCE, 2, FR_STATE_ENTERED, 20);
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 3);
	assert_int_equal(v->culprits[0].reason, FR_REASON_NOT_ENTERED);
	assert_comm_ranks(v, 4, "0,2,3");
	assert_contains(v->summary, "never entered all_reduce #2 on nccl-x [0,2-3; 1 of 4 "
				    "unknown]");
	o = fr_verdict_to_json(v);
	op = json_object_get(o, "op");
	assert_int_equal(json_array_size(json_object_get(op, "comm_ranks")), 3);
	assert_int_equal(json_integer_value(json_object_get(op, "comm_size")), 4);
	json_decref(o);
	job_free(j);
}

/*
 * A communicator as large as the world holds every rank. Rank 2 left no
 * evidence, so no trace names its entry of "nccl-world"; being the only
 * rank missing from the list, it is the unknown member, and the one the
 * others wait for.
 */
static void test_world_sized_comm_missing_rank(void **state)
{
	struct job *j = job_new(4);
	struct fr_verdict *v;

	(void)state;
	for (uint32_t r = 0; r < 4; r++) {
		if (r == 2)
			continue;
		rank_new(j, r, FR_RANK_DUMPED);
		add_comm_own(j, r, "nccl-world", 4, r);
		history(j, r, "nccl-world", 2);
		add_op(j, r, "nccl-world", FR_OP_ALL_REDUCE, 3, FR_STATE_ENTERED, 30);
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 2);
	assert_int_equal(v->culprits[0].reason, FR_REASON_UNRESPONSIVE);
	assert_comm_ranks(v, 4, "0,1,2,3");
	job_free(j);

	/* Two ranks missing: both are members, though not where in the list. */
	j = job_new(4);
	for (uint32_t r = 0; r < 4; r += 3) {
		rank_new(j, r, FR_RANK_DUMPED);
		add_comm_own(j, r, "nccl-world", 4, r);
		history(j, r, "nccl-world", 2);
		add_op(j, r, "nccl-world", FR_OP_ALL_REDUCE, 3, FR_STATE_ENTERED, 30);
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 2);
	assert_int_equal(v->culprits[0].rank, 1);
	assert_int_equal(v->culprits[1].rank, 2);
	assert_comm_ranks(v, 4, "0,3");
	assert_contains(v->summary, "[0,3; 2 of 4 unknown]");
	job_free(j);
}

/*
 * A member no evidence names, in a communicator smaller than the world,
 * cannot be checked: it is left out, and the report does not claim that
 * every member entered, only every known one.
 */
static void test_unknown_member_left_out(void **state)
{
	struct job *j = job_new(8);
	struct fr_verdict *v;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	for (uint32_t r = 0; r < 8; r++) {
		if (r == 4)
			continue;
		rank_new(j, r, FR_RANK_DUMPED);
		if (r % 2)
			continue;
		add_comm_own(j, r, "nccl-even", 4, r / 2);
		history(j, r, "nccl-even", 2);
		add_op(j, r, "nccl-even", FR_OP_ALL_REDUCE, 3, FR_STATE_ENTERED, 20);
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->culprits[0].reason, FR_REASON_STUCK_IN_OP);
	assert_int_equal(v->nculprits, 3);
	assert_comm_ranks(v, 4, "0,2,6");
	assert_contains(v->summary, "every known member entered all_reduce #3 on nccl-even "
				    "[0,2,6; 1 of 4 unknown]");
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	fr_verdict_print(f, v, j->traces, 7);
	fclose(f);
	assert_contains(buf, "Communicator: nccl-even, 4 ranks [0,2,6; 1 of 4 unknown]");
	free(buf);
	job_free(j);
}

/*
 * A p2p operation as an NCCL rank records it: the peer named only by its
 * rank in the communicator, its global rank unknown to the recording rank.
 */
static struct fr_op *add_nccl_p2p(struct job *j, uint32_t rank, const char *comm,
				  enum fr_op_type type, uint64_t seq, enum fr_op_state st,
				  int32_t peer_in_comm)
{
	uint64_t age = st == FR_STATE_COMPLETED ? 600 : 30;
	struct fr_op *op = add_op(j, rank, comm, type, seq, st, age);

	op->peer_in_comm = peer_in_comm;
	op->dtype = "float32";
	return op;
}

/*
 * The NCCL pair exchange of tests/e2e/test_nccl_group.sh. Every step, pairs
 * (0,1) and (2,3) swap a value in a group of ncclSend/ncclRecv, then all
 * four allreduce. At step 4 rank 1 skips its group and goes straight to
 * all_reduce #4; rank 0's send #4 and recv #4 (to communicator rank 1) are
 * enqueued and never complete, so rank 0, on the same stream, never enters
 * all_reduce #4, in which ranks 1-3 wait. Each rank knows only its own
 * entry of the communicator: only rank 1's own list says that communicator
 * rank 1 is global rank 1.
 *
 * Rank 0 waits on rank 1 (p2p) and rank 1 on rank 0 (the all_reduce rank 0
 * has not entered): a cycle, but not a symmetric one. Rank 1's receives
 * from rank 0 stop at #3 where rank 0's send is #4: rank 1 went on without
 * posting its part of an exchange its partner had posted, as ranks 2 and 3
 * did not. It is the culprit, not half of a deadlock.
 */
static void test_nccl_group_peer_skipped(void **state)
{
	struct job *j = job_new(4);
	struct fr_verdict *v;
	json_t *o;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	for (uint32_t r = 0; r < 4; r++) {
		rank_new(j, r, FR_RANK_DUMPED);
		add_comm_own(j, r, "nccl-w", 4, r);
	}
	for (uint64_t s = 1; s <= 4; s++) {
		for (uint32_t r = 0; r < 4; r++) {
			int32_t partner = (int32_t)(r ^ 1);
			enum fr_op_state st = s < 4 || r >= 2 ? FR_STATE_COMPLETED :
								FR_STATE_ENTERED;

			if (s == 4 && r == 1)
				continue;
			add_nccl_p2p(j, r, "nccl-w", FR_OP_SEND, s, st, partner);
			add_nccl_p2p(j, r, "nccl-w", FR_OP_RECV, s, st, partner);
		}
		for (uint32_t r = 0; r < 4; r++) {
			if (s == 4 && r == 0)
				continue;
			add_op(j, r, "nccl-w", FR_OP_ALL_REDUCE, s,
			       s < 4 ? FR_STATE_COMPLETED : FR_STATE_ENTERED, s < 4 ? 600 : 30);
		}
	}
	/* Nothing in rank 0's evidence names communicator rank 1. */
	assert_int_equal(j->ev[0]->t.nops, 11);
	assert_int_equal(j->ev[0]->t.ops[9].type, FR_OP_SEND);
	assert_int_equal(j->ev[0]->t.ops[9].seq, 4);
	assert_int_equal(j->ev[0]->t.ops[9].peer, -1);

	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 1);
	assert_int_equal(v->culprits[0].reason, FR_REASON_NOT_ENTERED);
	/* What the job is stuck on: rank 0's send, its peer named globally. */
	assert_string_equal(v->op.comm, "nccl-w");
	assert_int_equal(v->op.type, FR_OP_SEND);
	assert_int_equal(v->op.seq, 4);
	assert_int_equal(v->op.peer, 1);
	assert_int_equal(v->op.peer_in_comm, 1);
	assert_comm_ranks(v, 4, "0,1,2,3");
	assert_ranks(v->waiting, v->nwaiting, "0-3");
	/* The culprit's evidence: where its exchange with rank 0 stopped, and
	 * what it waits in instead. */
	assert_true(v->culprits[0].has_last_completed);
	assert_int_equal(v->culprits[0].last_completed.type, FR_OP_RECV);
	assert_int_equal(v->culprits[0].last_completed.seq, 3);
	assert_int_equal(v->culprits[0].last_completed.peer, 0);
	assert_true(v->culprits[0].has_op);
	assert_int_equal(v->culprits[0].op.type, FR_OP_ALL_REDUCE);
	assert_int_equal(v->culprits[0].op.seq, 4);
	assert_contains(v->summary, "rank 1 (node1, pid 1001) never posted the receive matching "
				    "rank 0's send #4 to rank 1 on nccl-w [0-3] (its last receive "
				    "from rank 0 is #3) and waits instead in all_reduce #4, which "
				    "rank 0, held in its send, has not entered; ranks 0-3 have "
				    "waited 30 s");

	o = fr_verdict_to_json(v);
	assert_non_null(o);
	assert_string_equal(json_string_value(json_object_get(o, "verdict")), "hang");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(o, "op"), "peer")), 1);
	json_decref(o);

	/* The report names ranks through the merged list as well. */
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	fr_verdict_print(f, v, j->traces, 4);
	fclose(f);
	assert_contains(buf, "rank 0: in send #4 to rank 1 on nccl-w");
	assert_contains(buf, "Culprit rank 1 (node1, pid 1001): never posted the receive "
			     "matching the operation above\n");
	assert_contains(buf, "in flight: all_reduce #4 on nccl-w");
	assert_contains(buf, "last completed: recv #3 from rank 0 on nccl-w");
	assert_null(strstr(buf, "any rank"));
	free(buf);
	job_free(j);
}

/*
 * Rank 0 waits in a send to communicator rank 1 of "nccl-even" (global
 * ranks 0,2,4,6), whose member 1 (global rank 2) left no evidence: no trace
 * names it. The send waits on that one member, not on any: ranks 4 and 6,
 * running and waiting on nothing, are not blamed as they would be for a
 * receive from any source. The summary says the peer is unknown.
 */
static void test_p2p_peer_unnamed(void **state)
{
	struct job *j = job_new(8);
	struct fr_verdict *v;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	for (uint32_t r = 0; r < 8; r += 2) {
		if (r == 2)
			continue;
		rank_new(j, r, FR_RANK_DUMPED);
		add_comm_own(j, r, "nccl-even", 4, r / 2);
		history(j, r, "nccl-even", 2);
	}
	add_nccl_p2p(j, 0, "nccl-even", FR_OP_SEND, 1, FR_STATE_ENTERED, 1);
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 0);
	assert_int_equal(v->culprits[0].reason, FR_REASON_STUCK_IN_OP);
	assert_int_equal(v->op.peer, -1);
	assert_int_equal(v->op.peer_in_comm, 1);
	assert_contains(v->summary, "rank 0 waits in send #1 to an unknown rank (communicator "
				    "rank 1) on nccl-even [0,4,6; 1 of 4 unknown]; no evidence "
				    "names that rank");
	assert_null(strstr(v->summary, "any rank"));
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	fr_verdict_print(f, v, j->traces, 3);
	fclose(f);
	assert_contains(buf, "send #1 to an unknown rank (communicator rank 1)");
	free(buf);
	job_free(j);

	/* Whereas a receive from any source waits on whoever could send. */
	j = job_new(8);
	for (uint32_t r = 0; r < 8; r += 2) {
		if (r == 2)
			continue;
		rank_new(j, r, FR_RANK_DUMPED);
		add_comm_own(j, r, "nccl-even", 4, r / 2);
		history(j, r, "nccl-even", 2);
	}
	add_op(j, 0, "nccl-even", FR_OP_RECV, 1, FR_STATE_ENTERED, 30);
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 2);
	assert_int_equal(v->culprits[0].rank, 4);
	assert_int_equal(v->culprits[1].rank, 6);
	job_free(j);
}

/*
 * An NCCL broadcast: the root knows its own global rank, the others only
 * the root's rank in the communicator. That is no mismatch; rank 3 never
 * entered #2, and the verdict names the root globally.
 */
static void test_nccl_root_by_comm_rank(void **state)
{
	struct job *j = job_new(4);
	struct fr_verdict *v;
	struct fr_op *op;

	(void)state;
	for (uint32_t r = 0; r < 4; r++) {
		rank_new(j, r, FR_RANK_DUMPED);
		add_comm_own(j, r, "nccl-b", 4, r);
		history(j, r, "nccl-b", 1);
		if (r == 3)
			continue;
		op = add_op(j, r, "nccl-b", FR_OP_BROADCAST, 2, FR_STATE_ENTERED, 20);
		op->peer_in_comm = 2;
		op->root = r == 2 ? 2 : -1;
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 3);
	assert_int_equal(v->culprits[0].reason, FR_REASON_NOT_ENTERED);
	assert_int_equal(v->op.type, FR_OP_BROADCAST);
	assert_int_equal(v->op.root, 2);
	job_free(j);

	/* Different roots in the communicator are a mismatch all the same. */
	j = job_new(4);
	for (uint32_t r = 0; r < 4; r++) {
		rank_new(j, r, FR_RANK_DUMPED);
		add_comm_own(j, r, "nccl-b", 4, r);
		op = add_op(j, r, "nccl-b", FR_OP_BROADCAST, 1, FR_STATE_ENTERED, 20);
		op->peer_in_comm = r == 1 ? 0 : 2;
		op->root = r == 2 ? 2 : -1;
	}
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_MISMATCH);
	assert_int_equal(v->nculprits, 1);
	assert_int_equal(v->culprits[0].rank, 1);
	assert_int_equal(v->culprits[0].op.root, 0);
	job_free(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_group_names),
		cmocka_unit_test(test_split_group_edge_cases),
		cmocka_unit_test(test_nccl_partial_members),
		cmocka_unit_test(test_nccl_members_not_global_order),
		cmocka_unit_test(test_member_size_conflict),
		cmocka_unit_test(test_world_sized_comm_missing_rank),
		cmocka_unit_test(test_unknown_member_left_out),
		cmocka_unit_test(test_nccl_group_peer_skipped),
		cmocka_unit_test(test_p2p_peer_unnamed),
		cmocka_unit_test(test_nccl_root_by_comm_rank),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
