/*
 * Unit tests of the central watchdog's decision on jobs the node daemons
 * hold (daemon/node_verdict.c), on NODE_PROGRESS records built by hand and
 * merged by aggregate_merge() as the central daemon merges them: a hang
 * past --timeout and its culprits (the ranks below the operation the
 * others wait in, never the waiting ones), on one node or across nodes;
 * every rank waiting; the same stuck state opened once, a later one again;
 * a node lost past --heartbeat-timeout, alone or beside a hang; an oldest
 * operation that is point-to-point names no culprit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../daemon/node_verdict.h"
#include "node_wire.h"
#include "op.h"

#define NS_PER_S 1000000000ull
/* The daemon's monotonic clock when the tests look. */
#define NOW (1000 * NS_PER_S)

static const struct nv_limits LIMITS = { .timeout_s = 2.0, .heartbeat_timeout_s = 3.0 };

/* One node's record of "world", built rank by rank (ascending). */
struct rec {
	struct fr_node_comm_progress *c;
	uint32_t n;
	uint32_t rank[16];
	uint64_t entered[16];
};

static void rec_init(struct rec *r)
{
	memset(r, 0, sizeof(*r));
	r->c = calloc(1, sizeof(*r->c));
	assert_non_null(r->c);
	strcpy(r->c->comm, "world");
}

static void rec_rank(struct rec *r, uint32_t rank, uint64_t entered)
{
	r->rank[r->n] = rank;
	r->entered[r->n++] = entered;
}

/* Ranks first .. first + count - 1 wait in operation `type` #seq since age_ms. */
static void rec_wait_in(struct rec *r, unsigned type, uint64_t seq, uint64_t age_ms, uint32_t first,
			uint32_t count)
{
	struct fr_node_group *g = &r->c->groups[r->c->ngroups++];

	*g = (struct fr_node_group){ .seq = seq, .type = (uint8_t)type, .nranks = count,
				     .age_ms = age_ms, .nranges = 1 };
	g->ranges[0] = (struct fr_node_range){ .first = first, .count = count };
}

/* Ranks first .. first + count - 1 wait in all_reduce #seq since age_ms. */
static void rec_wait(struct rec *r, uint64_t seq, uint64_t age_ms, uint32_t first, uint32_t count)
{
	rec_wait_in(r, FR_OP_ALL_REDUCE, seq, age_ms, first, count);
}

/* The record as a node sends it: highest and lowest, members, laggards. */
static const struct fr_node_comm_progress *rec_done(struct rec *r)
{
	struct fr_node_comm_progress *c = r->c;

	for (uint32_t i = 0; i < r->n; i++) {
		if (!i || r->entered[i] < c->lo_entered)
			c->lo_entered = r->entered[i];
		if (!i || r->entered[i] > c->hi_entered)
			c->hi_entered = r->entered[i];
		fr_node_ranges_add(c->members, &c->nmembers, FR_NODE_RANGES_MAX, r->rank[i]);
	}
	c->nranks = r->n;
	c->lo_completed = c->lo_entered ? c->lo_entered - 1 : 0;
	c->hi_completed = c->lo_completed;
	for (uint32_t i = 0; i < r->n; i++)
		if (r->entered[i] < c->hi_entered)
			c->laggards[c->nlaggards++] = (struct fr_node_laggard){
				.rank = r->rank[i], .last_entered = r->entered[i],
				.last_completed = r->entered[i] ? r->entered[i] - 1 : 0 };
	return c;
}

static const char *node_name(void *arg, uint32_t node)
{
	static const char *const names[] = { "n0", "n1", "n2" };

	(void)arg;
	return node < 3 ? names[node] : "";
}

static bool rank_info(void *arg, const char *node, uint32_t rank, const char **host, uint32_t *pid)
{
	(void)arg;
	(void)node;
	*host = "host";
	*pid = 100 + rank;
	return true;
}

static const struct nv_names NAMES = { .node = node_name, .rank = rank_info };

/* Merges the records (node i numbered i) into *agg and makes the job. */
static struct nv_job job_of(struct agg_comm **agg, const struct fr_node_comm_progress *const *recs,
			    size_t n, const struct nv_lost *lost, size_t nlost)
{
	struct agg_node nodes[3] = { 0 };

	*agg = malloc(sizeof(**agg));
	assert_non_null(*agg);
	for (size_t i = 0; i < n; i++)
		nodes[i] = (struct agg_node){ .node = (uint32_t)i, .rec = recs[i] };
	assert_int_equal(aggregate_merge(nodes, n, *agg), 0);
	return (struct nv_job){ .world_size = 4, .comm = (*agg)->has_oldest ? "world" : NULL,
				.agg = (*agg)->has_oldest ? *agg : NULL, .nlost = nlost,
				.lost = lost };
}

/* n0 holds ranks 0-1, n1 ranks 2-3, at these last entered seqs; waits are added next. */
static void two_nodes(struct rec r[2], uint64_t e0, uint64_t e1, uint64_t e2, uint64_t e3)
{
	rec_init(&r[0]);
	rec_init(&r[1]);
	rec_rank(&r[0], 0, e0);
	rec_rank(&r[0], 1, e1);
	rec_rank(&r[1], 2, e2);
	rec_rank(&r[1], 3, e3);
}

/* The two nodes' records merged, with the lost nodes. */
static struct nv_job two_nodes_job(struct rec r[2], struct agg_comm **agg, const struct nv_lost *lost,
				   size_t nlost)
{
	const struct fr_node_comm_progress *recs[] = { rec_done(&r[0]), rec_done(&r[1]) };

	return job_of(agg, recs, 2, lost, nlost);
}

/* The ranks of the verdict's culprits, as a JSON array's text. */
static void assert_culprits(json_t *v, const char *ranks)
{
	json_t *arr = json_array();
	size_t i;
	json_t *c;
	char *text;

	json_array_foreach(json_object_get(v, "culprits"), i, c)
		json_array_append(arr, json_object_get(c, "rank"));
	text = json_dumps(arr, JSON_COMPACT);
	assert_string_equal(text, ranks);
	free(text);
	json_decref(arr);
}

static void free_recs(struct rec *r, size_t n, struct agg_comm *agg)
{
	for (size_t i = 0; i < n; i++)
		free(r[i].c);
	free(agg);
}

/* One node: ranks 0-2 wait in all_reduce #5 for 3 s, rank 3 is at #4. */
static void test_one_node(void **state)
{
	struct nv_reported rep = { 0 };
	struct nv_decision dec;
	struct agg_comm *agg;
	struct rec r;
	json_t *v, *c;

	(void)state;
	rec_init(&r);
	for (uint32_t k = 0; k < 3; k++)
		rec_rank(&r, k, 5);
	rec_rank(&r, 3, 4);
	rec_wait(&r, 5, 3000, 0, 3);
	const struct fr_node_comm_progress *recs[] = { rec_done(&r) };
	struct nv_job j = job_of(&agg, recs, 1, NULL, 0);

	assert_true(nv_decide(&j, &LIMITS, NOW, &rep, &dec));
	assert_true(dec.hang && dec.open);
	assert_string_equal(dec.trigger.reason, "timeout");
	assert_string_equal(dec.trigger.comm, "world");
	assert_true(dec.trigger.has_seq);
	assert_int_equal(dec.trigger.seq, 5);
	assert_int_equal(dec.trigger.rank, 3);
	assert_true(dec.trigger.waited_s > 2.9 && dec.trigger.waited_s < 3.1);

	v = nv_verdict_json(&j, &dec, NOW, &NAMES);
	assert_non_null(v);
	assert_string_equal(json_string_value(json_object_get(v, "verdict")), "hang");
	assert_culprits(v, "[3]");
	c = json_array_get(json_object_get(v, "culprits"), 0);
	assert_string_equal(json_string_value(json_object_get(c, "reason")), "not_entered");
	assert_string_equal(json_string_value(json_object_get(c, "node")), "n0");
	assert_int_equal(json_integer_value(json_object_get(c, "last_entered")), 4);
	assert_int_equal(json_integer_value(json_object_get(c, "pid")), 103);
	assert_string_equal(json_string_value(json_object_get(json_object_get(v, "op"), "type")),
			    "all_reduce");
	assert_string_equal(json_string_value(json_object_get(v, "waiting_ranges")), "0-2");
	assert_int_equal(json_array_size(json_object_get(v, "waiting_ranks")), 3);
	assert_string_equal(json_string_value(json_object_get(v, "summary")),
			    "rank 3 (node n0) never entered all_reduce #5 on world; ranks 0-2 have "
			    "waited 3.0 s");
	json_decref(v);

	/* Under --timeout it is not a hang (yet). */
	struct nv_limits patient = { .timeout_s = 5, .heartbeat_timeout_s = 3 };

	assert_false(nv_decide(&j, &patient, NOW, NULL, &dec));
	v = nv_verdict_json(&j, &dec, NOW, &NAMES);
	assert_string_equal(json_string_value(json_object_get(v, "verdict")), "ok");
	assert_true(json_is_null(json_object_get(v, "op")));
	json_decref(v);
	free_recs(&r, 1, agg);
}

/*
 * Two nodes: n0's ranks 0-1 wait in #5; n1's rank 2 too, n1's rank 3 is
 * at #4. The laggard is on another node than the waiters, and named with
 * its node.
 */
static void test_laggard_on_other_node(void **state)
{
	struct nv_reported rep = { 0 };
	struct nv_decision dec;
	struct agg_comm *agg;
	struct rec r[2];
	json_t *v;

	(void)state;
	two_nodes(r, 5, 5, 5, 4);
	rec_wait(&r[0], 5, 4000, 0, 2);
	rec_wait(&r[1], 5, 3900, 2, 1);
	struct nv_job j = two_nodes_job(r, &agg, NULL, 0);

	assert_true(nv_decide(&j, &LIMITS, NOW, &rep, &dec));
	assert_int_equal(dec.trigger.rank, 3);
	v = nv_verdict_json(&j, &dec, NOW, &NAMES);
	assert_culprits(v, "[3]");
	assert_string_equal(
		json_string_value(json_object_get(json_array_get(json_object_get(v, "culprits"), 0),
						  "node")),
		"n1");
	assert_string_equal(json_string_value(json_object_get(v, "waiting_ranges")), "0-2");
	json_decref(v);
	free_recs(r, 2, agg);
}

/* A whole node behind (n1's ranks 2-3 at #4, none of them waiting): both named. */
static void test_node_behind(void **state)
{
	struct nv_decision dec;
	struct agg_comm *agg;
	struct rec r[2];
	json_t *v;

	(void)state;
	two_nodes(r, 5, 5, 4, 4);
	rec_wait(&r[0], 5, 4000, 0, 2);
	struct nv_job j = two_nodes_job(r, &agg, NULL, 0);

	assert_true(nv_decide(&j, &LIMITS, NOW, NULL, &dec));
	v = nv_verdict_json(&j, &dec, NOW, &NAMES);
	assert_culprits(v, "[2,3]");
	assert_string_equal(json_string_value(json_object_get(v, "summary")),
			    "ranks 2-3 (node n1) never entered all_reduce #5 on world; ranks 0-1 "
			    "have waited 4.0 s");
	json_decref(v);
	free_recs(r, 2, agg);
}

/*
 * The waiting ranks are never culprits: rank 0 waits in #5 (the oldest),
 * rank 1 already waits in #6, so rank 0 is below the highest; only rank 2,
 * at #4, never entered #5.
 */
static void test_waiters_not_culprits(void **state)
{
	struct nv_decision dec;
	struct agg_comm *agg;
	struct rec r[2];
	json_t *v;

	(void)state;
	two_nodes(r, 5, 6, 4, 6);
	rec_wait(&r[0], 5, 5000, 0, 1);
	rec_wait(&r[0], 6, 1000, 1, 1);
	rec_wait(&r[1], 6, 1000, 3, 1);
	struct nv_job j = two_nodes_job(r, &agg, NULL, 0);

	assert_int_equal(agg->nlaggards, 2); /* ranks 0 and 2 are below #6 */
	assert_true(nv_decide(&j, &LIMITS, NOW, NULL, &dec));
	assert_int_equal(j.agg->oldest.seq, 5);
	v = nv_verdict_json(&j, &dec, NOW, &NAMES);
	assert_culprits(v, "[2]");
	json_decref(v);
	free_recs(r, 2, agg);
}

/* Every rank waits in #5 on two nodes: a hang, no culprit, said so. */
static void test_all_waiting(void **state)
{
	struct nv_reported rep = { 0 };
	struct nv_decision dec;
	struct agg_comm *agg;
	struct rec r[2];
	json_t *v;

	(void)state;
	two_nodes(r, 5, 5, 5, 5);
	rec_wait(&r[0], 5, 3000, 0, 2);
	rec_wait(&r[1], 5, 3000, 2, 2);
	struct nv_job j = two_nodes_job(r, &agg, NULL, 0);

	assert_true(nv_decide(&j, &LIMITS, NOW, &rep, &dec));
	assert_true(dec.open);
	assert_int_equal(dec.trigger.rank, -1);
	v = nv_verdict_json(&j, &dec, NOW, &NAMES);
	assert_culprits(v, "[]");
	assert_int_equal(json_integer_value(json_object_get(v, "waiting_count")), 4);
	assert_string_equal(json_string_value(json_object_get(v, "summary")),
			    "every rank that reported world waits in all_reduce #5: ranks 0-3 have "
			    "waited 3.0 s; none is behind");
	json_decref(v);
	free_recs(r, 2, agg);
}

/* Ranks 0-1 wait in #seq since age_ms, rank 2 is at seq - 1: one node. */
static struct nv_job stuck_at(struct rec *r, struct agg_comm **agg, uint64_t seq, uint64_t age_ms)
{
	rec_init(r);
	rec_rank(r, 0, seq);
	rec_rank(r, 1, seq);
	rec_rank(r, 2, seq - 1);
	if (age_ms)
		rec_wait(r, seq, age_ms, 0, 2);
	const struct fr_node_comm_progress *recs[] = { rec_done(r) };

	return job_of(agg, recs, 1, NULL, 0);
}

/* The same stuck operation is opened once; once it moves on, the next is opened. */
static void test_once_per_stuck_state(void **state)
{
	struct nv_reported rep = { 0 };
	struct nv_decision dec;
	struct agg_comm *agg;
	struct rec r;
	struct nv_job j;

	(void)state;
	j = stuck_at(&r, &agg, 5, 3000);
	assert_true(nv_decide(&j, &LIMITS, NOW, &rep, &dec) && dec.open);
	free_recs(&r, 1, agg);
	j = stuck_at(&r, &agg, 5, 4000);
	assert_true(nv_decide(&j, &LIMITS, NOW, &rep, &dec));
	assert_false(dec.open);
	free_recs(&r, 1, agg);
	/* Moved on: nothing waits. */
	j = stuck_at(&r, &agg, 6, 0);
	assert_false(nv_decide(&j, &LIMITS, NOW, &rep, &dec));
	assert_false(dec.open || rep.has_key);
	free_recs(&r, 1, agg);
	/* Stuck again later, at #7: opened. */
	j = stuck_at(&r, &agg, 7, 2500);
	assert_true(nv_decide(&j, &LIMITS, NOW, &rep, &dec) && dec.open);
	assert_int_equal(dec.trigger.seq, 7);
	free_recs(&r, 1, agg);
	/* A later seq stuck without the earlier clearing in between: opened too. */
	j = stuck_at(&r, &agg, 8, 2500);
	assert_true(nv_decide(&j, &LIMITS, NOW, &rep, &dec) && dec.open);
	assert_int_equal(dec.trigger.seq, 8);
	free_recs(&r, 1, agg);
}

static void lost_node(struct nv_lost *l, const char *name, uint64_t lost_mono_ns,
		      const uint32_t *ranks, uint32_t n)
{
	struct fr_node_rank rs[8] = { 0 };

	for (uint32_t i = 0; i < n; i++)
		rs[i].rank = ranks[i];
	memset(l, 0, sizeof(*l));
	strcpy(l->node, name);
	l->lost_mono_ns = lost_mono_ns;
	nv_lost_ranges(l, rs, n);
}

/* A node lost: counted past --heartbeat-timeout only, opened once, its ranks unresponsive. */
static void test_node_lost(void **state)
{
	static const uint32_t ranks[] = { 2, 3 };
	struct nv_reported rep = { 0 };
	struct nv_decision dec;
	struct agg_comm *agg;
	struct nv_lost l;
	struct rec r;
	json_t *v, *c;
	size_t i;

	(void)state;
	/* Nothing in flight: only the loss. */
	rec_init(&r);
	rec_rank(&r, 0, 5);
	rec_rank(&r, 1, 5);
	const struct fr_node_comm_progress *recs[] = { rec_done(&r) };
	lost_node(&l, "n1", NOW - 2 * NS_PER_S, ranks, 2);
	struct nv_job j = job_of(&agg, recs, 1, &l, 1);

	assert_false(nv_decide(&j, &LIMITS, NOW, &rep, &dec));
	assert_false(dec.open);
	l.lost_mono_ns = NOW - 4 * NS_PER_S;
	assert_true(nv_decide(&j, &LIMITS, NOW, &rep, &dec));
	assert_false(dec.hang);
	assert_int_equal(dec.nlost, 1);
	assert_true(dec.open);
	assert_string_equal(dec.trigger.reason, "node_lost");
	assert_int_equal(dec.trigger.rank, -1);
	assert_string_equal(dec.trigger.comm, "");
	v = nv_verdict_json(&j, &dec, NOW, &NAMES);
	assert_string_equal(json_string_value(json_object_get(v, "verdict")), "hang");
	assert_culprits(v, "[2,3]");
	json_array_foreach(json_object_get(v, "culprits"), i, c) {
		assert_string_equal(json_string_value(json_object_get(c, "reason")), "unresponsive");
		assert_string_equal(json_string_value(json_object_get(c, "detail")), "node lost: n1");
	}
	assert_string_equal(json_string_value(json_object_get(
				    json_array_get(json_object_get(v, "nodes_lost"), 0), "ranks")),
			    "2-3");
	json_decref(v);
	/* Opened once. */
	assert_true(nv_decide(&j, &LIMITS, NOW + NS_PER_S, &rep, &dec));
	assert_false(dec.open);
	/* Lost again after a reconnect: a new loss, opened. */
	l.lost_mono_ns = NOW - 3 * NS_PER_S - 1;
	assert_true(nv_decide(&j, &LIMITS, NOW + NS_PER_S, &rep, &dec));
	assert_true(dec.open);
	free_recs(&r, 1, agg);
}

/* A hang and a node loss at once: one incident, its verdict says both. */
static void test_hang_and_node_lost(void **state)
{
	static const uint32_t ranks[] = { 0, 1 };
	struct nv_reported rep = { 0 };
	struct nv_decision dec;
	struct agg_comm *agg;
	struct nv_lost l;
	struct rec r[2];
	json_t *v;

	(void)state;
	two_nodes(r, 5, 5, 5, 4);
	rec_wait(&r[0], 5, 6000, 0, 2);
	rec_wait(&r[1], 5, 6000, 2, 1);
	lost_node(&l, "n0", NOW - 4 * NS_PER_S, ranks, 2);
	struct nv_job j = two_nodes_job(r, &agg, &l, 1);

	assert_true(nv_decide(&j, &LIMITS, NOW, &rep, &dec));
	assert_true(dec.hang && dec.open && dec.nlost == 1);
	assert_string_equal(dec.trigger.reason, "timeout");
	assert_int_equal(dec.trigger.rank, 3);
	v = nv_verdict_json(&j, &dec, NOW, &NAMES);
	/* The laggard first, then the lost node's ranks, none of them "the" culprit. */
	assert_culprits(v, "[3,0,1]");
	assert_string_equal(json_string_value(json_object_get(v, "summary")),
			    "rank 3 (node n1) never entered all_reduce #5 on world; ranks 0-2 have "
			    "waited 6.0 s; node n0 lost 4.0 s ago: ranks 0-1 unresponsive");
	json_decref(v);
	/* Both were reported by that one incident. */
	assert_true(nv_decide(&j, &LIMITS, NOW, &rep, &dec));
	assert_false(dec.open);
	free_recs(r, 2, agg);
}

/*
 * The oldest operation is point-to-point: rank 0 has waited 100 s in send
 * #p2p_seq, rank 1 is at collective #9, the others at #10. A send's seq
 * counts per pair of peers, so whether it is above (50) or below (3) the
 * laggard's collective seq says nothing of who the peer is: no rank is
 * named, and the summary says the ranks wait and why none is blamed.
 */
static void p2p_oldest(uint64_t p2p_seq, const char *summary)
{
	struct nv_reported rep = { 0 };
	struct nv_decision dec;
	struct agg_comm *agg;
	struct rec r[2];
	json_t *v;

	two_nodes(r, 10, 9, 10, 10);
	rec_wait_in(&r[0], FR_OP_SEND, p2p_seq, 100000, 0, 1);
	rec_wait(&r[1], 10, 1000, 2, 2);
	struct nv_job j = two_nodes_job(r, &agg, NULL, 0);

	assert_int_equal(agg->nlaggards, 1);
	assert_int_equal(agg->oldest.type, FR_OP_SEND);
	assert_true(nv_decide(&j, &LIMITS, NOW, &rep, &dec));
	assert_true(dec.hang && dec.open);
	assert_int_equal(dec.trigger.rank, -1);
	assert_int_equal(dec.trigger.seq, p2p_seq);
	assert_false(nv_is_culprit(agg, &agg->laggards[0]));
	assert_int_equal(nv_culprit_count(agg), 0);
	v = nv_verdict_json(&j, &dec, NOW, &NAMES);
	assert_string_equal(json_string_value(json_object_get(v, "verdict")), "hang");
	assert_culprits(v, "[]");
	assert_int_equal(json_integer_value(json_object_get(v, "culprits_unnamed")), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(v, "op"), "type")),
			    "send");
	assert_string_equal(json_string_value(json_object_get(v, "waiting_ranges")), "0");
	assert_string_equal(json_string_value(json_object_get(v, "summary")), summary);
	json_decref(v);
	free_recs(r, 2, agg);
}

static void test_p2p_seq_above(void **state)
{
	(void)state;
	p2p_oldest(50, "rank 0 has waited 100.0 s in send #50 on world; point-to-point: the "
		       "peer is not known from the aggregates");
}

static void test_p2p_seq_below(void **state)
{
	(void)state;
	p2p_oldest(3, "rank 0 has waited 100.0 s in send #3 on world; point-to-point: the peer "
		      "is not known from the aggregates");
}

/* A lost node's ranks as runs, the rest counted. */
static void test_lost_ranges(void **state)
{
	static const uint32_t ranks[] = { 0, 1, 2, 5, 7, 8 };
	struct fr_node_rank *many = calloc(1000, sizeof(*many));
	struct nv_lost l;

	(void)state;
	lost_node(&l, "n", 1, ranks, 6);
	assert_int_equal(l.nranges, 3);
	assert_int_equal(l.ranges[0].first, 0);
	assert_int_equal(l.ranges[0].count, 3);
	assert_int_equal(l.ranges[1].first, 5);
	assert_int_equal(l.ranges[1].count, 1);
	assert_int_equal(l.ranges[2].first, 7);
	assert_int_equal(l.ranges[2].count, 2);
	assert_int_equal(l.ranks_unlisted, 0);
	/* Every other rank: more runs than kept. */
	assert_non_null(many);
	for (uint32_t i = 0; i < 1000; i++)
		many[i].rank = 2 * i;
	nv_lost_ranges(&l, many, 1000);
	assert_int_equal(l.nranges, NV_LOST_RANGES_MAX);
	assert_int_equal(l.nranks, 1000);
	assert_int_equal(l.ranks_unlisted, 1000 - NV_LOST_RANGES_MAX);
	free(many);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_node),
		cmocka_unit_test(test_laggard_on_other_node),
		cmocka_unit_test(test_node_behind),
		cmocka_unit_test(test_waiters_not_culprits),
		cmocka_unit_test(test_all_waiting),
		cmocka_unit_test(test_once_per_stuck_state),
		cmocka_unit_test(test_node_lost),
		cmocka_unit_test(test_hang_and_node_lost),
		cmocka_unit_test(test_lost_ranges),
		cmocka_unit_test(test_p2p_seq_above),
		cmocka_unit_test(test_p2p_seq_below),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
