/*
 * Unit tests of the aggregates (daemon/aggregate.c), on registry states
 * built by hand: what nodes say upstream of their ranks (NODE_PROGRESS,
 * through the codec and back), and what the central side makes of it: the
 * highest and lowest, the ranks behind, and the oldest operation in
 * flight with its ranks as runs. Also the sizes that docs/SCALE-OUT.md
 * promises: a node of 1,024 ranks that all wait in one all_reduce says so
 * in a few bytes.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../daemon/aggregate.h"
#include "../../daemon/registry.h"
#include "node_wire.h"
#include "op.h"

#define NS_PER_MS 1000000ull
/* When the ranks entered, and when the nodes look: 10 s later. */
#define T0 1700000000000000000ull
#define NOW (T0 + 10000 * NS_PER_MS)

/* A node's registry: one job, the ranks it holds, the job's communicators. */
struct node {
	struct job job;
	struct job_comm comms[3];
};

static void node_init(struct node *nd, uint32_t world, const char *const *comms, size_t ncomms)
{
	memset(nd, 0, sizeof(*nd));
	strcpy(nd->job.id, "job-7");
	nd->job.world_size = world;
	nd->job.nslots = world;
	nd->job.ranks = calloc(world, sizeof(*nd->job.ranks));
	assert_non_null(nd->job.ranks);
	for (size_t i = 0; i < ncomms; i++)
		strcpy(nd->comms[i].id, comms[i]);
	nd->job.comms = nd->comms;
	nd->job.ncomms = ncomms;
}

static struct job_rank *rank_get(struct node *nd, uint32_t rank)
{
	struct job_rank *r = nd->job.ranks[rank];

	if (!r) {
		r = calloc(1, sizeof(*r));
		assert_non_null(r);
		r->rank = rank;
		r->comms = calloc(4, sizeof(*r->comms));
		r->ops = calloc(4, sizeof(*r->ops));
		assert_true(r->comms && r->ops);
		nd->job.ranks[rank] = r;
	}
	return r;
}

static void progress(struct node *nd, uint32_t rank, const char *comm, uint64_t entered,
		     uint64_t completed)
{
	struct job_rank *r = rank_get(nd, rank);
	struct rank_comm *rc = &r->comms[r->ncomms++];

	assert_true(r->ncomms <= 4);
	strcpy(rc->id, comm);
	rc->last_entered = entered;
	rc->last_completed = completed;
}

static void in_flight(struct node *nd, uint32_t rank, const char *comm, uint8_t type, uint64_t seq,
		      uint8_t flags, uint64_t entered_ns)
{
	struct job_rank *r = rank_get(nd, rank);
	struct rank_op *op = &r->ops[r->nops++];

	assert_true(r->nops <= 4);
	strcpy(op->w.comm, comm);
	op->w.type = type;
	op->w.flags = flags;
	op->w.seq = seq;
	op->entered_ns = entered_ns;
}

static void node_free(struct node *nd)
{
	for (uint32_t i = 0; i < nd->job.nslots; i++) {
		if (nd->job.ranks[i]) {
			free(nd->job.ranks[i]->comms);
			free(nd->job.ranks[i]->ops);
			free(nd->job.ranks[i]);
		}
	}
	free(nd->job.ranks);
}

/*
 * The node's NODE_PROGRESS for its first `n` communicators, encoded and
 * decoded again as the central daemon would read it; returns the frame's
 * size.
 */
static size_t upstream(struct node *nd, uint32_t n, struct fr_msg_node_progress *got)
{
	struct fr_node_comm_progress recs[3];
	struct fr_msg_node_progress m;
	uint8_t *buf;
	size_t size;
	int len;

	assert_int_equal(aggregate_progress(&nd->job, 0, n, NOW, &m, recs), 0);
	size = fr_wire_node_progress_size(&m);
	buf = malloc(size);
	assert_non_null(buf);
	len = fr_wire_node_progress_encode(&m, buf, size);
	assert_int_equal(len, (int)size);
	assert_int_equal(fr_wire_node_progress_decode(buf + FR_WIRE_HEADER_SIZE,
						      size - FR_WIRE_HEADER_SIZE, got), 0);
	free(buf);
	return size;
}

static void assert_range(const struct fr_node_range *r, uint32_t first, uint32_t count)
{
	assert_int_equal(r->first, first);
	assert_int_equal(r->count, count);
}

static const char *const world_only[] = { "world" };

/*
 * 4 nodes of 4 ranks (node i holds ranks 4i .. 4i+3) in all_reduce #5 on
 * world, but rank 9 (node 2) has not entered it: every node says its
 * state in one record, and the merge finds "ranks 0-8, 10-15 wait in
 * all_reduce #5 since 10.5 s; rank 9 (node 2) never entered".
 */
static void build_4x4(struct node nodes[4], uint32_t laggard)
{
	for (uint32_t n = 0; n < 4; n++) {
		node_init(&nodes[n], 16, world_only, 1);
		for (uint32_t k = 0; k < 4; k++) {
			uint32_t rank = 4 * n + k;

			if (rank == laggard) {
				progress(&nodes[n], rank, "world", 4, 4);
				continue;
			}
			progress(&nodes[n], rank, "world", 5, 4);
			in_flight(&nodes[n], rank, "world", FR_OP_ALL_REDUCE, 5, 0,
				  T0 + rank * NS_PER_MS);
		}
	}
}

static void test_4x4_one_laggard(void **state)
{
	struct node nodes[4];
	struct fr_msg_node_progress got[4];
	struct agg_node in[4];
	struct agg_comm *out = malloc(sizeof(*out));
	const struct fr_node_comm_progress *c;

	(void)state;
	assert_non_null(out);
	build_4x4(nodes, 9);
	/* Rank 0 has two operations of one key (say, two sends #5 to two
	 * peers): it counts once. */
	in_flight(&nodes[0], 0, "world", FR_OP_ALL_REDUCE, 5, 0, T0 + 7 * NS_PER_MS);
	for (uint32_t n = 0; n < 4; n++) {
		upstream(&nodes[n], 1, &got[n]);
		in[n] = (struct agg_node){ .node = n, .held_ms = n == 1 ? 500 : 0,
					   .rec = &got[n].comms[0] };
	}

	/* Node 2's own view: 3 ranks in all_reduce #5, rank 9 behind. */
	c = &got[2].comms[0];
	assert_string_equal(c->comm, "world");
	assert_int_equal(c->nranks, 4);
	assert_true(c->lo_entered == 4 && c->hi_entered == 5);
	assert_int_equal(c->nmembers, 1);
	assert_range(&c->members[0], 8, 4);
	assert_int_equal(c->nlaggards, 1);
	assert_int_equal(c->laggards[0].rank, 9);
	assert_int_equal(c->laggards[0].last_entered, 4);
	assert_int_equal(c->ngroups, 1);
	assert_int_equal(c->groups[0].nranks, 3);
	assert_int_equal(c->groups[0].nranges, 2);
	assert_range(&c->groups[0].ranges[0], 8, 1);
	assert_range(&c->groups[0].ranges[1], 10, 2);
	assert_int_equal(c->groups[0].age_ms, 10000 - 8);
	assert_int_equal(got[0].comms[0].groups[0].nranks, 4);
	assert_int_equal(got[1].comms[0].nlaggards, 0);

	assert_int_equal(aggregate_merge(in, 4, out), 0);
	assert_int_equal(out->nnodes, 4);
	assert_int_equal(out->nranks, 16);
	assert_true(out->lo_entered == 4 && out->hi_entered == 5);
	assert_int_equal(out->nlaggards, 1);
	assert_int_equal(out->laggards_unnamed, 0);
	assert_int_equal(out->laggards[0].rank, 9);
	assert_int_equal(out->laggards[0].node, 2);
	assert_int_equal(out->laggards[0].last_entered, 4);
	assert_true(out->has_oldest);
	assert_int_equal(out->oldest.seq, 5);
	assert_int_equal(out->oldest.type, FR_OP_ALL_REDUCE);
	assert_int_equal(out->oldest.nranks, 15);
	assert_int_equal(out->oldest.nnodes, 4);
	/* Node 1's record is 500 ms old: its rank 4 entered 10,496 ms ago. */
	assert_int_equal(out->oldest.age_ms, 10000 - 4 + 500);
	assert_int_equal(out->oldest.nranges, 2);
	assert_range(&out->oldest.ranges[0], 0, 9);
	assert_range(&out->oldest.ranges[1], 10, 6);
	assert_int_equal(out->oldest.ranks_unlisted, 0);

	for (uint32_t n = 0; n < 4; n++) {
		fr_wire_node_progress_free(&got[n]);
		node_free(&nodes[n]);
	}
	free(out);
}

/*
 * A node whose every rank is behind lists no laggard of its own (none is
 * below its highest), yet the central side names them all, from its
 * member runs; a node that has not reported is left out.
 */
static void test_whole_node_behind(void **state)
{
	struct node nodes[4];
	struct fr_msg_node_progress got[4];
	struct agg_node in[5];
	struct agg_comm *out = malloc(sizeof(*out));

	(void)state;
	assert_non_null(out);
	build_4x4(nodes, UINT32_MAX);
	node_free(&nodes[3]);
	node_init(&nodes[3], 16, world_only, 1);
	for (uint32_t rank = 12; rank < 16; rank++)
		progress(&nodes[3], rank, "world", 4, 4);
	for (uint32_t n = 0; n < 4; n++) {
		upstream(&nodes[n], 1, &got[n]);
		in[n] = (struct agg_node){ .node = n, .rec = &got[n].comms[0] };
	}
	in[4] = (struct agg_node){ .node = 4, .rec = NULL };
	assert_int_equal(got[3].comms[0].nlaggards, 0);
	assert_int_equal(got[3].comms[0].ngroups, 0);

	assert_int_equal(aggregate_merge(in, 5, out), 0);
	assert_int_equal(out->nnodes, 4);
	assert_int_equal(out->nlaggards, 4);
	for (uint32_t k = 0; k < 4; k++) {
		assert_int_equal(out->laggards[k].rank, 12 + k);
		assert_int_equal(out->laggards[k].node, 3);
		assert_int_equal(out->laggards[k].last_entered, 4);
	}
	assert_int_equal(out->oldest.nranks, 12);
	assert_int_equal(out->oldest.nranges, 1);
	assert_range(&out->oldest.ranges[0], 0, 12);

	/* A posted operation nobody waits on holds no rank: no oldest. */
	for (uint32_t n = 0; n < 3; n++)
		for (uint32_t g = 0; g < got[n].comms[0].ngroups; g++)
			got[n].comms[0].groups[g].flags = FR_WIRE_INFLIGHT_NONBLOCKING;
	assert_int_equal(aggregate_merge(in, 5, out), 0);
	assert_false(out->has_oldest);

	for (uint32_t n = 0; n < 4; n++) {
		fr_wire_node_progress_free(&got[n]);
		node_free(&nodes[n]);
	}
	free(out);
}

static const char *const three_comms[] = { "world", "lower", "upper" };

/*
 * 1,024 ranks on one node, on world and two halves of it ("lower" 0-511,
 * "upper" 512-1023, both idle at #7), every rank in all_reduce #5 on
 * world but `nlaggards` of them (ranks 100, 200, ...) still at #4.
 */
static size_t node_1024(uint32_t nlaggards, struct fr_msg_node_progress *got)
{
	struct node nd;
	size_t size;

	node_init(&nd, 1024, three_comms, 3);
	for (uint32_t rank = 0; rank < 1024; rank++) {
		bool lags = rank % 100 == 0 && rank > 0 && rank / 100 <= nlaggards;

		progress(&nd, rank, "world", lags ? 4 : 5, 4);
		if (!lags)
			in_flight(&nd, rank, "world", FR_OP_ALL_REDUCE, 5, 0, T0);
		progress(&nd, rank, rank < 512 ? "lower" : "upper", 7, 7);
	}
	size = upstream(&nd, 3, got);
	node_free(&nd);
	return size;
}

static void test_1024_ranks_one_allreduce(void **state)
{
	struct fr_msg_node_progress got;
	const struct fr_node_comm_progress *c;
	size_t size;

	(void)state;
	size = node_1024(0, &got);
	print_message("NODE_PROGRESS, 1,024 ranks, 3 communicators, all in one all_reduce: %zu bytes\n",
		      size);
	c = &got.comms[0];
	assert_int_equal(c->nranks, 1024);
	assert_int_equal(c->nlaggards, 0);
	assert_int_equal(c->ngroups, 1);
	assert_int_equal(c->groups[0].nranks, 1024);
	assert_int_equal(c->groups[0].nranges, 1);
	assert_range(&c->groups[0].ranges[0], 0, 1024);
	assert_int_equal(c->groups[0].age_ms, 10000);
	assert_int_equal(got.comms[1].nranks, 512);
	assert_range(&got.comms[2].members[0], 512, 512);
	assert_int_equal(got.comms[2].ngroups, 0);
	assert_true(size < 400);
	fr_wire_node_progress_free(&got);

	size = node_1024(10, &got);
	print_message("NODE_PROGRESS, the same with 10 laggards: %zu bytes\n", size);
	c = &got.comms[0];
	assert_int_equal(c->nlaggards, 10);
	assert_int_equal(c->laggards[9].rank, 1000);
	assert_int_equal(c->groups[0].nranks, 1014);
	assert_int_equal(c->groups[0].nranges, 11);
	assert_true(size < 700);
	fr_wire_node_progress_free(&got);
}

/*
 * Caps: 1,024 ranks where every odd rank is behind (512 laggards, 512 runs
 * in the group), and sends of 20 different seqs: the record names 64
 * laggards and counts the rest, lists 256 runs and counts every rank, keeps
 * 16 groups and counts the other operations, and still fits a frame. The
 * central side says how many ranks it could not name.
 */
static void test_caps(void **state)
{
	struct node nd;
	struct fr_msg_node_progress got;
	const struct fr_node_comm_progress *c;
	struct agg_node in;
	struct agg_comm *out = malloc(sizeof(*out));
	size_t size;

	(void)state;
	assert_non_null(out);
	node_init(&nd, 1024, world_only, 1);
	for (uint32_t rank = 0; rank < 1024; rank++) {
		progress(&nd, rank, "world", rank % 2 ? 4 : 5, 4);
		if (rank % 2 == 0)
			in_flight(&nd, rank, "world", FR_OP_ALL_REDUCE, 5, 0, T0);
		else
			in_flight(&nd, rank, "world", FR_OP_SEND, 100 + rank % 40, 0, T0);
	}
	size = upstream(&nd, 1, &got);
	assert_true(size <= FR_WIRE_HEADER_SIZE + FR_WIRE_MAX_PAYLOAD);
	c = &got.comms[0];
	assert_int_equal(c->nlaggards, FR_NODE_LAGGARDS_MAX);
	assert_int_equal(c->laggards_omitted, 512 - FR_NODE_LAGGARDS_MAX);
	assert_int_equal(c->ngroups, FR_NODE_GROUPS_MAX);
	assert_int_equal(c->groups[0].seq, 5);
	assert_int_equal(c->groups[0].nranks, 512);
	assert_int_equal(c->groups[0].nranges, FR_NODE_RANGES_MAX);
	/* The first 15 send seqs met (ranks 1, 3, ... 29) have groups; the
	 * sends of ranks 31, 33, ... 39 (mod 40), 25 ranks each, are counted. */
	assert_int_equal(c->ops_omitted, 5 * 25);

	in = (struct agg_node){ .node = 0, .rec = c };
	assert_int_equal(aggregate_merge(&in, 1, out), 0);
	assert_int_equal(out->nlaggards, FR_NODE_LAGGARDS_MAX);
	assert_int_equal(out->laggards_unnamed, 512 - FR_NODE_LAGGARDS_MAX);
	assert_int_equal(out->oldest.nranks, 512);
	assert_int_equal(out->oldest.nranges, FR_NODE_RANGES_MAX);
	assert_int_equal(out->oldest.ranks_unlisted, 512 - FR_NODE_RANGES_MAX);

	/* More communicators than a frame holds, or past the job's: refused. */
	assert_int_equal(aggregate_progress(&nd.job, 0, 2, NOW, &got, NULL), -EINVAL);
	assert_int_equal(aggregate_progress(&nd.job, 2, 0, NOW, &got, NULL), -EINVAL);
	fr_wire_node_progress_free(&got);
	node_free(&nd);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_4x4_one_laggard),
		cmocka_unit_test(test_whole_node_behind),
		cmocka_unit_test(test_1024_ranks_one_allreduce),
		cmocka_unit_test(test_caps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
