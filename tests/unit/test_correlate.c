/*
 * Unit tests of the correlation engine: traces are built in memory, one per
 * rank, and each test asserts the verdict a person would read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "correlate.h"

#define NOW_NS 1700000000000000000ull
#define S(x) ((uint64_t)(x) * 1000000000ull)
#define MAX_RANKS 1024

/* One rank's evidence with the capacities fr_trace_add_*() track. */
struct ev {
	struct fr_trace t;
	size_t opcap;
	size_t commcap;
};

struct job {
	uint32_t world;
	struct ev *ev[MAX_RANKS];
	const struct fr_trace *traces[MAX_RANKS];
	struct fr_verdict v;
};

static struct job *job_new(uint32_t world)
{
	struct job *j = calloc(1, sizeof(*j));

	assert_non_null(j);
	j->world = world;
	return j;
}

static void job_free(struct job *j)
{
	for (uint32_t r = 0; r < MAX_RANKS; r++) {
		if (j->ev[r]) {
			fr_trace_free(&j->ev[r]->t);
			free(j->ev[r]);
		}
	}
	fr_verdict_free(&j->v);
	free(j);
}

/* Gives `rank` evidence with the given status, from host "node<rank>". */
static struct fr_trace *rank_new(struct job *j, uint32_t rank, enum fr_rank_status st)
{
	struct ev *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	e->t.status = st;
	e->t.rank = rank;
	e->t.world_size = j->world;
	snprintf(e->t.host, sizeof(e->t.host), "node%u", rank);
	e->t.pid = 1000 + rank;
	e->t.time_ns = NOW_NS;
	j->ev[rank] = e;
	return &e->t;
}

static void add_comm(struct job *j, uint32_t rank, const char *id, const uint32_t *members,
		     uint32_t n)
{
	struct fr_comm *c = fr_trace_add_comm(&j->ev[rank]->t, &j->ev[rank]->commcap);

	assert_non_null(c);
	snprintf(c->id, sizeof(c->id), "%s", id);
	snprintf(c->desc, sizeof(c->desc), "%s", id);
	c->size = n;
	c->members = calloc(n, sizeof(*c->members));
	assert_non_null(c->members);
	memcpy(c->members, members, n * sizeof(*members));
	for (uint32_t i = 0; i < n; i++)
		if (members[i] == rank)
			c->rank = i;
}

/* Every rank 0..n-1 (those with evidence) lists "world" of n ranks. */
static void add_world(struct job *j)
{
	uint32_t m[MAX_RANKS];

	for (uint32_t i = 0; i < j->world; i++)
		m[i] = i;
	for (uint32_t r = 0; r < j->world; r++)
		if (j->ev[r])
			add_comm(j, r, "world", m, j->world);
}

/* A job of `world` ranks, each with a dump that lists "world". */
static struct job *world_job(uint32_t world)
{
	struct job *j = job_new(world);

	for (uint32_t r = 0; r < world; r++)
		rank_new(j, r, FR_RANK_DUMPED);
	add_world(j);
	return j;
}

/*
 * What an NCCL rank knows of communicator `id` of `size` members: only its
 * own entry (comm rank `crank` is global rank `rank`), the others unknown.
 */
static void add_comm_own(struct job *j, uint32_t rank, const char *id, uint32_t size,
			 uint32_t crank)
{
	uint32_t m[MAX_RANKS];

	for (uint32_t i = 0; i < size; i++)
		m[i] = FR_RANK_UNKNOWN;
	m[crank] = rank;
	add_comm(j, rank, id, m, size);
}

/* The verdict's known communicator members, in communicator order, as text. */
static void assert_comm_ranks(const struct fr_verdict *v, uint32_t size, const char *want)
{
	uint32_t known[MAX_RANKS];
	size_t n = 0;
	char buf[4096] = "";
	size_t len = 0;

	assert_int_equal(v->comm_size, size);
	for (uint32_t i = 0; i < v->comm_size; i++)
		if (v->comm_ranks[i] != FR_RANK_UNKNOWN)
			known[n++] = v->comm_ranks[i];
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%u", i ? "," : "",
					known[i]);
	assert_string_equal(buf, want);
}

/*
 * Appends an op entered `age_s` seconds before the trace's time, completed
 * or not, and advances the rank's progress counters on that communicator as
 * the agent would.
 */
static struct fr_op *add_op(struct job *j, uint32_t rank, const char *comm,
			    enum fr_op_type type, uint64_t seq, enum fr_op_state st,
			    uint64_t age_s)
{
	struct fr_trace *t = &j->ev[rank]->t;
	struct fr_op *op = fr_trace_add_op(t, &j->ev[rank]->opcap);
	struct fr_comm *c = (struct fr_comm *)fr_trace_comm(t, comm);

	assert_non_null(op);
	op->record_id = t->nops - 1;
	op->comm = fr_trace_str(t, comm);
	assert_non_null(op->comm);
	op->type = type;
	op->state = st;
	op->is_p2p = !fr_op_is_collective(type);
	op->seq = seq;
	op->peer = -1;
	op->root = -1;
	op->peer_in_comm = -1;
	op->count = type == FR_OP_BARRIER ? 0 : 1;
	op->bytes = op->count * 8;
	op->dtype = type == FR_OP_BARRIER ? "" : "double";
	if (type == FR_OP_ALL_REDUCE || type == FR_OP_REDUCE)
		op->redop = "sum";
	op->t_entered_ns = t->time_ns - S(age_s);
	if (st == FR_STATE_COMPLETED)
		op->t_completed_ns = op->t_entered_ns + 1000;
	if (c && !op->is_p2p) {
		if (seq > c->last_entered)
			c->last_entered = seq;
		if (st == FR_STATE_COMPLETED && seq > c->last_completed)
			c->last_completed = seq;
	}
	return op;
}

/* Completed all_reduce #1..#n on `comm` for `rank`, an hour ago. */
static void history(struct job *j, uint32_t rank, const char *comm, uint64_t n)
{
	for (uint64_t s = 1; s <= n; s++)
		add_op(j, rank, comm, FR_OP_ALL_REDUCE, s, FR_STATE_COMPLETED, 3600);
}

static struct fr_verdict *correlate(struct job *j)
{
	size_t n = 0;

	/* Handed over in reverse rank order: the engine must not care. */
	for (uint32_t r = MAX_RANKS; r-- > 0;)
		if (j->ev[r])
			j->traces[n++] = &j->ev[r]->t;
	assert_int_equal(fr_correlate(j->traces, n, j->world, &j->v), 0);
	return &j->v;
}

static void assert_ranks(const uint32_t *got, size_t n, const char *want)
{
	char buf[4096];

	fr_format_ranks(buf, sizeof(buf), got, n);
	assert_string_equal(buf, want);
}

static void assert_contains(const char *hay, const char *needle)
{
	if (!strstr(hay, needle))
		fail_msg("\"%s\" does not contain \"%s\"", hay, needle);
}

static uint32_t culprit_ranks(const struct fr_verdict *v, uint32_t *out)
{
	for (size_t i = 0; i < v->nculprits; i++)
		out[i] = v->culprits[i].rank;
	return (uint32_t)v->nculprits;
}

/* ---- tests ---- */

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

/* Builds 4 ranks at all_reduce #5 on world; `odd` calls `type` instead. */
static struct job *mismatch_job(uint32_t odd, enum fr_op_type type)
{
	struct job *j = world_job(4);

	for (uint32_t r = 0; r < 4; r++) {
		struct fr_op *op;

		history(j, r, "world", 4);
		op = add_op(j, r, "world", r == odd ? type : FR_OP_ALL_REDUCE, 5,
			    FR_STATE_ENTERED, 3);
		if (op->type == FR_OP_BROADCAST) {
			op->root = 0;
			op->redop = "";
		}
	}
	return j;
}

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

/* ---- stragglers ---- */

/*
 * A job that does not hang, 4 ranks, `n` completed all_reduces on world.
 * Every rank enters step k at k seconds plus a jitter of its own from `lcg`
 * (up to `jitter_us`), and rank `slow` `late_us` later still.
 */
static struct job *timed_job(uint32_t world, uint64_t n, uint32_t slow, uint64_t late_us,
			     uint64_t jitter_us)
{
	struct job *j = job_new(world);
	uint64_t lcg = 12345;

	for (uint32_t r = 0; r < world; r++)
		rank_new(j, r, FR_RANK_DUMPED);
	add_world(j);
	for (uint64_t k = 1; k <= n; k++) {
		for (uint32_t r = 0; r < world; r++) {
			struct fr_op *op = add_op(j, r, "world", FR_OP_ALL_REDUCE, k,
						  FR_STATE_COMPLETED, 3600);

			lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
			op->t_entered_ns = NOW_NS - S(3600) + S(k) +
					   ((lcg >> 33) % (jitter_us + 1)) * 1000;
			if (r == slow)
				op->t_entered_ns += late_us * 1000;
			op->t_completed_ns = NOW_NS - S(3600) + S(k) + 900000000;
		}
	}
	return j;
}

static void test_straggler_found(void **state)
{
	struct job *j = timed_job(4, 40, 2, 12000, 300);
	struct fr_verdict *v;
	char *buf = NULL;
	size_t len = 0;
	json_t *o, *st;
	FILE *f;

	(void)state;
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_OK);
	assert_int_equal(v->nstragglers, 1);
	assert_int_equal(v->stragglers[0].rank, 2);
	assert_string_equal(v->stragglers[0].comm, "world");
	assert_int_equal(v->stragglers[0].late_count, 40);
	assert_int_equal(v->stragglers[0].matched, 40);
	/* 12 ms late, less the others' jitter (up to 0.3 ms). */
	assert_true(v->stragglers[0].median_late_s > 0.0115 &&
		    v->stragglers[0].median_late_s < 0.0121);
	assert_contains(v->summary, "straggler: rank 2 entered last in 40 of 40 collectives on "
				    "world, by 1");
	o = fr_verdict_to_json(v);
	assert_string_equal(json_string_value(json_object_get(o, "verdict")), "ok");
	st = json_array_get(json_object_get(o, "stragglers"), 0);
	assert_int_equal(json_integer_value(json_object_get(st, "rank")), 2);
	assert_string_equal(json_string_value(json_object_get(st, "comm")), "world");
	assert_int_equal(json_integer_value(json_object_get(st, "late_count")), 40);
	assert_int_equal(json_integer_value(json_object_get(st, "matched")), 40);
	assert_true(json_real_value(json_object_get(st, "median_late_s")) > 0.0115);
	json_decref(o);
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	fr_verdict_print(f, v, j->traces, 4);
	fclose(f);
	assert_contains(buf, "Stragglers (information, not a hang): rank 2 entered last in 40 "
			     "of 40 collectives on world, by 1");
	free(buf);
	job_free(j);
}

/* Moves every time of rank r's evidence by `ns` (its host's clock). */
static void skew_clock(struct job *j, uint32_t r, int64_t ns)
{
	for (size_t i = 0; i < j->ev[r]->t.nops; i++) {
		struct fr_op *op = &j->ev[r]->t.ops[i];

		op->t_entered_ns = (uint64_t)((int64_t)op->t_entered_ns + ns);
		op->t_completed_ns = (uint64_t)((int64_t)op->t_completed_ns + ns);
	}
}

/*
 * Hosts' clocks disagree by more than a straggler is late. An MPI rank's
 * blocking collectives are timed on its own clock by how long it waited
 * in each: a rank whose clock runs 5 ms ahead is no straggler, and a real
 * one is found even when its clock runs 20 ms behind.
 */
static void test_straggler_clock_skew(void **state)
{
	struct job *j = timed_job(4, 40, 2, 0, 300);
	struct fr_verdict *v;

	(void)state;
	for (uint32_t r = 0; r < 4; r++)
		snprintf(j->ev[r]->t.comm_lib, FR_LIBVER_MAX + 1, "Open MPI v4.1.4");
	skew_clock(j, 1, 5000000);
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_OK);
	assert_int_equal(v->nstragglers, 0);
	job_free(j);

	j = timed_job(4, 40, 2, 12000, 300);
	for (uint32_t r = 0; r < 4; r++)
		snprintf(j->ev[r]->t.comm_lib, FR_LIBVER_MAX + 1, "Open MPI v4.1.4");
	skew_clock(j, 2, -20000000);
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_OK);
	assert_int_equal(v->nstragglers, 1);
	assert_int_equal(v->stragglers[0].rank, 2);
	assert_true(v->stragglers[0].median_late_s > 0.0115 &&
		    v->stragglers[0].median_late_s < 0.0121);
	job_free(j);
}

static void test_no_straggler(void **state)
{
	struct job *j;
	struct fr_verdict *v;
	json_t *o;

	(void)state;
	/* Uniform timing: whoever is last, by a fraction of a millisecond. */
	j = timed_job(4, 40, UINT32_MAX, 0, 800);
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_OK);
	assert_int_equal(v->nstragglers, 0);
	o = fr_verdict_to_json(v);
	assert_true(json_is_array(json_object_get(o, "stragglers")));
	assert_int_equal(json_array_size(json_object_get(o, "stragglers")), 0);
	json_decref(o);
	job_free(j);

	/* Large jitter (up to 20 ms), still nobody consistently late. */
	for (uint32_t world = 2; world <= 8; world *= 2) {
		j = timed_job(world, 64, UINT32_MAX, 0, 20000);
		v = correlate(j);
		assert_int_equal(v->nstragglers, 0);
		job_free(j);
	}

	/* Too few collectives to judge. */
	j = timed_job(4, 7, 1, 50000, 100);
	v = correlate(j);
	assert_int_equal(v->nstragglers, 0);
	job_free(j);

	/* Consistently last, but by less than a millisecond. */
	j = timed_job(4, 40, 1, 500, 100);
	v = correlate(j);
	assert_int_equal(v->nstragglers, 0);
	job_free(j);

	/*
	 * Last more often than not, but by about as much as whoever else is
	 * last: rank 1 leads by 3 ms in 6 of 10, others by 2.5 ms in the rest.
	 * And of two ranks, one is always last: 6 of 10 is chance.
	 */
	for (uint32_t world = 4; world >= 2; world -= 2) {
		j = timed_job(world, 10, UINT32_MAX, 0, 0);
		for (uint64_t k = 0; k < 10; k++) {
			uint32_t last = k < 6 ? 1 : k % world == 1 ? 0 : (uint32_t)(k % world);
			uint64_t lead = world == 2 && k >= 6 ? 1000000 : k < 6 ? 3000000 : 2500000;

			j->ev[last]->t.ops[k].t_entered_ns += lead;
		}
		v = correlate(j);
		assert_int_equal(v->kind, FR_VERDICT_OK);
		assert_int_equal(v->nstragglers, 0);
		job_free(j);
	}

	/* A hang is the answer then, not stragglers. */
	j = timed_job(4, 40, 1, 50000, 100);
	add_op(j, 0, "world", FR_OP_ALL_REDUCE, 41, FR_STATE_ENTERED, 5);
	v = correlate(j);
	assert_int_equal(v->kind, FR_VERDICT_HANG);
	assert_int_equal(v->nstragglers, 0);
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
		cmocka_unit_test(test_ok_all_completed),
		cmocka_unit_test(test_ok_slow_but_progressing),
		cmocka_unit_test(test_not_entered_world),
		cmocka_unit_test(test_sub_communicator),
		cmocka_unit_test(test_unresponsive),
		cmocka_unit_test(test_disconnected),
		cmocka_unit_test(test_bad_status_preferred),
		cmocka_unit_test(test_finished_peer_of_recv),
		cmocka_unit_test(test_missing_rank),
		cmocka_unit_test(test_mismatch_three_vs_one),
		cmocka_unit_test(test_mismatch_odd_rank_zero),
		cmocka_unit_test(test_mismatch_count_and_tie),
		cmocka_unit_test(test_all_gather_size_relation),
		cmocka_unit_test(test_split_group_names),
		cmocka_unit_test(test_split_group_edge_cases),
		cmocka_unit_test(test_vector_counts_no_mismatch),
		cmocka_unit_test(test_mismatch_wins_over_hang),
		cmocka_unit_test(test_completed_mismatch_ignored),
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
		cmocka_unit_test(test_ring_wrap_uses_progress),
		cmocka_unit_test(test_json_contract),
		cmocka_unit_test(test_json_ok_has_null_op),
		cmocka_unit_test(test_nccl_partial_members),
		cmocka_unit_test(test_nccl_members_not_global_order),
		cmocka_unit_test(test_member_size_conflict),
		cmocka_unit_test(test_world_sized_comm_missing_rank),
		cmocka_unit_test(test_unknown_member_left_out),
		cmocka_unit_test(test_nccl_group_peer_skipped),
		cmocka_unit_test(test_p2p_peer_unnamed),
		cmocka_unit_test(test_nccl_root_by_comm_rank),
		cmocka_unit_test(test_print_report),
		cmocka_unit_test(test_print_missing_culprit),
		cmocka_unit_test(test_scale_1024),
		cmocka_unit_test(test_all_gather_count_odd_rank),
		cmocka_unit_test(test_completed_mismatch_no_hang),
		cmocka_unit_test(test_p2p_size_mismatch),
		cmocka_unit_test(test_p2p_size_mpi),
		cmocka_unit_test(test_p2p_one_sequence_not_paired),
		cmocka_unit_test(test_ring_windows_differ),
		cmocka_unit_test(test_window_past_stuck_op),
		cmocka_unit_test(test_straggler_found),
		cmocka_unit_test(test_straggler_clock_skew),
		cmocka_unit_test(test_no_straggler),
		cmocka_unit_test(test_readable_1024),
		cmocka_unit_test(test_stack_groups),
		cmocka_unit_test(test_stack_groups_many),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
