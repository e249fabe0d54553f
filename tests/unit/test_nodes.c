/*
 * daemon/nodes.c and upstream.h's pure parts: what the central daemon
 * keeps of a node's NODE_RANKS (a FULL list replaces, a delta updates or
 * adds, ranks stay in order) and NODE_PROGRESS (a record replaces its
 * communicator's last only), a node's restart forgetting its old ranks, a
 * lost node's ranks listed as unresponsive with the reason, and the
 * reconnect backoff (0.5 s doubling to 30 s). daemon_log is stubbed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../daemon/log.h"
#include "../../daemon/nodes.h"
#include "../../daemon/upstream.h"

void daemon_log(const char *fmt, ...)
{
	(void)fmt;
}

static struct fr_node_rank rank(uint32_t r, uint8_t state)
{
	struct fr_node_rank nr = { .rank = r, .pid = 100 + r, .state = state };

	snprintf(nr.host, sizeof(nr.host), "h%u", r);
	return nr;
}

static void ranks_msg(struct fr_msg_node_ranks *m, struct fr_node_rank *ranks, uint32_t n,
		      bool full)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->job, sizeof(m->job), "j");
	m->world_size = 8;
	m->flags = full ? FR_NODE_RANKS_FULL : 0;
	m->nranks = n;
	m->ranks = ranks;
}

static void test_ranks_full_then_delta(void **state)
{
	struct node_job j = { 0 };
	struct fr_msg_node_ranks m;
	struct fr_node_rank full[] = { rank(5, 0), rank(1, 0), rank(3, 0) };
	struct fr_node_rank delta[] = { rank(3, FR_NODE_RANK_DISCONNECTED), rank(2, 0) };
	struct fr_node_rank again[] = { rank(7, 0) };

	(void)state;
	ranks_msg(&m, full, 3, true);
	assert_int_equal(node_job_ranks(&j, &m), 0);
	assert_int_equal(j.nranks, 3);
	assert_int_equal(j.world_size, 8);
	assert_int_equal(j.ranks[0].rank, 1);
	assert_int_equal(j.ranks[2].rank, 5);
	/* A delta changes rank 3 in place and adds rank 2 in order. */
	ranks_msg(&m, delta, 2, false);
	assert_int_equal(node_job_ranks(&j, &m), 0);
	assert_int_equal(j.nranks, 4);
	assert_int_equal(j.ranks[1].rank, 2);
	assert_int_equal(j.ranks[2].rank, 3);
	assert_int_equal(j.ranks[2].state, FR_NODE_RANK_DISCONNECTED);
	/* A full list after a reconnect forgets the ranks said before. */
	ranks_msg(&m, again, 1, true);
	assert_int_equal(node_job_ranks(&j, &m), 0);
	assert_int_equal(j.nranks, 1);
	assert_int_equal(j.ranks[0].rank, 7);
	node_job_free(&j);
}

static void test_progress_replaces_per_comm(void **state)
{
	struct node_job j = { 0 };
	struct fr_node_comm_progress recs[2] = { 0 };
	struct fr_msg_node_progress m = { .ncomms = 2, .comms = recs };

	(void)state;
	snprintf(recs[0].comm, sizeof(recs[0].comm), "world");
	snprintf(recs[1].comm, sizeof(recs[1].comm), "sub");
	recs[0].hi_entered = 4;
	recs[1].hi_entered = 9;
	assert_int_equal(node_job_progress(&j, &m), 0);
	assert_int_equal(j.nprogress, 2);
	/* A new record of "world" alone: "sub" keeps its last. */
	recs[0].hi_entered = 5;
	m.ncomms = 1;
	assert_int_equal(node_job_progress(&j, &m), 0);
	assert_int_equal(j.nprogress, 2);
	assert_int_equal(j.progress[0].hi_entered, 5);
	assert_int_equal(j.progress[1].hi_entered, 9);
	node_job_free(&j);
}

/* The rank of job "j" on node "n1" as GET /v1/jobs/j lists it. */
static json_t *listed_rank(void)
{
	json_t *ranks = json_array();

	assert_int_equal(nodes_job_ranks_json("j", ranks), 1);
	return ranks;
}

static void test_node_lost_and_restarted(void **state)
{
	struct fr_node_job hj = { .job = "j", .world_size = 8, .nranks = 1 };
	struct fr_msg_node_hello h = { .node = "n1", .boot_id = 1, .njobs = 1, .jobs = &hj };
	struct fr_node_rank rr[] = { rank(4, FR_NODE_RANK_CONNECTED) };
	struct fr_msg_node_ranks m;
	struct conn *c1 = (struct conn *)0x1, *c2 = (struct conn *)0x2, *old;
	struct node *n;
	json_t *ranks, *r;
	uint32_t ws = 0;

	(void)state;
	n = nodes_hello(c1, "127.0.0.1:1", &h, &old);
	assert_non_null(n);
	assert_null(old);
	ranks_msg(&m, rr, 1, true);
	assert_int_equal(nodes_ranks(n, &m), 0);
	assert_true(nodes_job_known("j", &ws));
	assert_int_equal(ws, 8);
	ranks = listed_rank();
	r = json_array_get(ranks, 0);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "connected");
	assert_string_equal(json_string_value(json_object_get(r, "node")), "n1");
	assert_null(json_object_get(r, "reason"));
	json_decref(ranks);

	/* Lost: the rank is not watched any more, and says why. */
	nodes_conn_lost(n, c1);
	ranks = listed_rank();
	r = json_array_get(ranks, 0);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "unresponsive");
	assert_string_equal(json_string_value(json_object_get(r, "reason")), "node lost");
	json_decref(ranks);
	r = nodes_json();
	assert_false(json_is_true(json_object_get(json_array_get(json_object_get(r, "nodes"), 0),
						  "connected")));
	json_decref(r);

	/* Restarted (new boot id) on a new connection: the same node, its old
	 * ranks forgotten until it resends them. */
	h.boot_id = 2;
	assert_ptr_equal(nodes_hello(c2, "127.0.0.1:2", &h, &old), n);
	assert_null(old);
	assert_false(nodes_job_known("j", &ws));
	/* A second connection of a node still connected takes over the first. */
	assert_ptr_equal(nodes_hello(c1, "127.0.0.1:3", &h, &old), n);
	assert_ptr_equal(old, c2);
	nodes_free();
}

/* nodes_job_each_node(): what it saw of each node. */
struct seen_node {
	char names[4][16];
	struct conn *conns[4];
	uint32_t nranks[4];
	int n;
};

static void note_node(void *arg, const char *node, struct conn *conn,
		      const struct fr_node_rank *ranks, uint32_t nranks)
{
	struct seen_node *s = arg;

	(void)ranks;
	snprintf(s->names[s->n], sizeof(s->names[0]), "%s", node);
	s->conns[s->n] = conn;
	s->nranks[s->n++] = nranks;
}

/* The read side of cluster incidents: which node holds which rank, connected or lost. */
static void test_rank_node(void **state)
{
	struct fr_node_job hj = { .job = "j", .world_size = 8 };
	struct fr_msg_node_hello ha = { .node = "na", .boot_id = 1, .njobs = 1, .jobs = &hj };
	struct fr_msg_node_hello hb = { .node = "nb", .boot_id = 2, .njobs = 1, .jobs = &hj };
	struct fr_node_rank ra[] = { rank(0, 0), rank(1, 0), rank(5, 0) };
	struct fr_node_rank rb[] = { rank(2, 0), rank(3, 0) };
	struct conn *ca = (struct conn *)0x1, *cb = (struct conn *)0x2, *old, *c;
	struct seen_node seen = { 0 };
	struct fr_msg_node_ranks m;
	struct node *a, *b;
	const char *name;

	(void)state;
	a = nodes_hello(ca, "127.0.0.1:1", &ha, &old);
	b = nodes_hello(cb, "127.0.0.1:2", &hb, &old);
	ranks_msg(&m, ra, 3, true);
	assert_int_equal(nodes_ranks(a, &m), 0);
	ranks_msg(&m, rb, 2, true);
	assert_int_equal(nodes_ranks(b, &m), 0);

	assert_true(nodes_rank_node("j", 5, &c, &name));
	assert_ptr_equal(c, ca);
	assert_string_equal(name, "na");
	assert_true(nodes_rank_node("j", 3, &c, &name));
	assert_ptr_equal(c, cb);
	assert_string_equal(name, "nb");
	assert_false(nodes_rank_node("j", 4, &c, &name));
	assert_false(nodes_rank_node("other", 0, &c, &name));

	/* A lost node still holds its ranks, without a connection. */
	nodes_conn_lost(b, cb);
	assert_true(nodes_rank_node("j", 2, &c, &name));
	assert_null(c);
	assert_string_equal(name, "nb");
	nodes_job_each_node("j", note_node, &seen);
	assert_int_equal(seen.n, 2);
	for (int i = 0; i < 2; i++) {
		bool is_a = strcmp(seen.names[i], "na") == 0;

		assert_ptr_equal(seen.conns[i], is_a ? ca : NULL);
		assert_int_equal(seen.nranks[i], is_a ? 3 : 2);
	}
	nodes_free();
}

static void test_backoff(void **state)
{
	uint64_t ms = 0;
	uint64_t want[] = { 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000 };

	(void)state;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		ms = upstream_backoff_next(ms);
		assert_int_equal(ms, want[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ranks_full_then_delta),
		cmocka_unit_test(test_progress_replaces_per_comm),
		cmocka_unit_test(test_node_lost_and_restarted),
		cmocka_unit_test(test_rank_node),
		cmocka_unit_test(test_backoff),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
