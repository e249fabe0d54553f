/*
 * daemon/nodes.c and upstream.h's pure parts: what the central daemon
 * keeps of a node's NODE_RANKS (a FULL list replaces, a delta updates or
 * adds, ranks stay in order) and NODE_PROGRESS (a record replaces its
 * communicator's last only), a node's restart forgetting its old ranks, a
 * lost node's ranks listed as unresponsive with the reason, and the
 * reconnect backoff (0.5 s doubling to 30 s); that the state is bounded
 * (caps, the memory budget, records at their used size), merged and
 * listed at a cost that grows with what is merged or listed, that a
 * connected node's name cannot be taken, that the nodes cap forgets the
 * node disconnected longest, and that an empty FULL list retracts a job.
 * daemon_log is stubbed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../daemon/aggregate.h"
#include "../../daemon/budget.h"
#include "../../daemon/clock.h"
#include "../../daemon/log.h"
#include "../../daemon/nodes.h"
#include "../../daemon/upstream.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

/* Lines of each kind of node loss logged (test_mass_loss_logged). */
static unsigned logged_lost, logged_lost_many;

void daemon_log(const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	logged_lost += strstr(line, " lost: its ranks are unresponsive") != NULL;
	logged_lost_many += strstr(line, " lost, and more than 16 nodes") != NULL;
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

/* Every byte charged for node state is given back once it is forgotten. */
static void assert_nodes_released(void)
{
	nodes_free();
	assert_int_equal(budget_used(BUDGET_NODES), 0);
	assert_int_equal(budget_used(BUDGET_VIEWS), 0);
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/*
 * Batches in any order, with repeats, give the ranks ascending, once each,
 * with the last word of a batch on each rank, as a rank-indexed table
 * does.
 */
static void test_ranks_merge_matches_a_table(void **state)
{
	enum { WORLD = 4096, BATCHES = 40 };
	struct node_job j = { 0 };
	struct fr_msg_node_ranks m;
	static struct fr_node_rank batch[FR_NODE_RANKS_BATCH];
	uint8_t want[WORLD];
	uint32_t seed = 7, have = 0;

	(void)state;
	memset(want, 0xff, sizeof(want));
	for (int b = 0; b < BATCHES; b++) {
		uint32_t n = 1 + (seed = seed * 1103515245u + 12345u) % 300;

		for (uint32_t i = 0; i < n; i++) {
			seed = seed * 1103515245u + 12345u;
			batch[i] = rank((seed >> 8) % WORLD, (uint8_t)((seed >> 4) % 4));
			want[batch[i].rank] = batch[i].state;
		}
		ranks_msg(&m, batch, n, false);
		m.world_size = WORLD;
		assert_int_equal(node_job_ranks(&j, &m), 0);
	}
	for (uint32_t r = 0; r < WORLD; r++)
		have += want[r] != 0xff;
	assert_int_equal(j.nranks, have);
	for (uint32_t i = 0, r = 0; r < WORLD; r++) {
		if (want[r] == 0xff)
			continue;
		assert_int_equal(j.ranks[i].rank, r);
		assert_int_equal(j.ranks[i].state, want[r]);
		i++;
	}
	node_job_free(&j);
	assert_int_equal(budget_used(BUDGET_NODES), 0);
}

/*
 * 65,536 ranks in 64 batches of 1,024 (interleaved, as a node's ranks of
 * many hosts arrive) into one record: sort-and-merge, not an insertion per
 * rank. The time is printed, not asserted.
 */
static void test_ranks_merge_cost(void **state)
{
	enum { WORLD = 65536, BATCHES = 64, PER = WORLD / BATCHES };
	struct node_job j = { 0 };
	struct fr_msg_node_ranks m;
	struct fr_node_rank *batch = calloc(PER, sizeof(*batch));
	uint64_t t0;

	(void)state;
	assert_non_null(batch);
	t0 = now_us();
	for (uint32_t b = 0; b < BATCHES; b++) {
		/* Batch b holds ranks b, b + 64, ...: each lands between kept ones. */
		for (uint32_t i = 0; i < PER; i++)
			batch[PER - 1 - i] = rank(b + i * BATCHES, FR_NODE_RANK_CONNECTED);
		ranks_msg(&m, batch, PER, b == 0);
		m.world_size = WORLD;
		assert_int_equal(node_job_ranks(&j, &m), 0);
	}
	print_message("merged %u ranks in %u batches into one node_job in %.1f ms\n", WORLD,
		      BATCHES, (double)(now_us() - t0) / 1000.0);
	assert_int_equal(j.nranks, WORLD);
	assert_int_equal(j.nconnected, WORLD);
	for (uint32_t i = 0; i < WORLD; i++)
		assert_int_equal(j.ranks[i].rank, i);
	free(batch);
	node_job_free(&j);
}

/* A record is kept at the size it uses and reads back as it came. */
static void test_progress_kept_at_used_size(void **state)
{
	struct node_job j = { 0 };
	static struct fr_node_comm_progress rec, back;
	struct fr_msg_node_progress m = { .ncomms = 1, .comms = &rec };

	(void)state;
	snprintf(rec.comm, sizeof(rec.comm), "world");
	rec.hi_entered = 9;
	rec.lo_entered = 7;
	rec.nranks = 6;
	rec.nmembers = 2;
	rec.members[0] = (struct fr_node_range){ 0, 4 };
	rec.members[1] = (struct fr_node_range){ 10, 2 };
	rec.nlaggards = 1;
	rec.laggards_omitted = 3;
	rec.laggards[0] = (struct fr_node_laggard){ .rank = 2, .last_entered = 7 };
	rec.ngroups = 2;
	rec.groups[0] = (struct fr_node_group){ .seq = 9, .type = 1, .nranks = 4, .age_ms = 5,
						.nranges = 1 };
	rec.groups[0].ranges[0] = (struct fr_node_range){ 0, 4 };
	rec.groups[1] = (struct fr_node_group){ .seq = 8, .type = 2, .flags = 1, .nranks = 2,
						.nranges = 2 };
	rec.groups[1].ranges[0] = (struct fr_node_range){ 10, 1 };
	rec.groups[1].ranges[1] = (struct fr_node_range){ 11, 1 };
	assert_int_equal(node_job_progress(&j, &m), 0);
	assert_int_equal(j.nprogress, 1);
	/* A few hundred bytes, where the struct on the wire side is ~37 KB. */
	assert_true(j.progress[0].size < 256);
	assert_true(j.charged < 4096);
	assert_true(sizeof(rec) > 30000);
	node_prog_unpack(&j.progress[0], &back);
	assert_string_equal(back.comm, "world");
	assert_int_equal(back.hi_entered, 9);
	assert_int_equal(back.lo_entered, 7);
	assert_int_equal(back.nmembers, 2);
	assert_int_equal(back.members[1].first, 10);
	assert_int_equal(back.nlaggards, 1);
	assert_int_equal(back.laggards_omitted, 3);
	assert_int_equal(back.laggards[0].last_entered, 7);
	assert_int_equal(back.ngroups, 2);
	assert_int_equal(back.groups[0].seq, 9);
	assert_int_equal(back.groups[0].ranges[0].count, 4);
	assert_int_equal(back.groups[1].flags, 1);
	assert_int_equal(back.groups[1].nranges, 2);
	assert_int_equal(back.groups[1].ranges[1].first, 11);
	node_job_free(&j);
	assert_int_equal(budget_used(BUDGET_NODES), 0);
}

/* Over a cap or the budget: refused, and what was kept stays. */
static void test_caps_and_budget(void **state)
{
	struct fr_node_job hj = { .job = "j", .world_size = 8 };
	struct fr_msg_node_hello h = { .node = "n1", .boot_id = 1, .njobs = 1, .jobs = &hj };
	struct fr_msg_node_hello h2 = { .node = "n2", .boot_id = 1 };
	struct fr_node_rank rr[] = { rank(1, 0), rank(2, 0) };
	struct fr_msg_node_ranks m;
	struct conn *old;
	struct node *n, *n2;
	static struct fr_node_comm_progress recs[FR_NODE_PROGRESS_COMMS_MAX];
	struct fr_msg_node_progress pm = { .ncomms = FR_NODE_PROGRESS_COMMS_MAX, .comms = recs };
	uint32_t ws;
	struct node_job *j;

	(void)state;
	n = nodes_hello((struct conn *)0x1, "a", &h, &old);
	n2 = nodes_hello((struct conn *)0x2, "b", &h2, &old);
	assert_non_null(n);
	assert_non_null(n2);
	ranks_msg(&m, rr, 2, true);
	assert_int_equal(nodes_ranks(n2, &m), 0);

	/* A world over what a daemon accepts. */
	ranks_msg(&m, rr, 2, true);
	m.world_size = NODE_RANKS_MAX + 1;
	assert_int_equal(nodes_ranks(n, &m), -ENOSPC);

	/* Jobs a node ("j" from its hello, then these): the one past
	 * NODE_JOBS_MAX is refused. */
	for (uint32_t i = 0; i < NODE_JOBS_MAX; i++) {
		ranks_msg(&m, rr, 1, true);
		snprintf(m.job, sizeof(m.job), "job%u", i);
		assert_int_equal(nodes_ranks(n, &m), i < NODE_JOBS_MAX - 1 ? 0 : -ENOSPC);
	}
	assert_int_equal(n->njobs, NODE_JOBS_MAX);

	/* Communicators a job: the ones past NODE_COMMS_MAX are refused. */
	for (uint32_t f = 0; f <= NODE_COMMS_MAX / FR_NODE_PROGRESS_COMMS_MAX; f++) {
		for (uint32_t c = 0; c < FR_NODE_PROGRESS_COMMS_MAX; c++)
			snprintf(recs[c].comm, sizeof(recs[c].comm), "c%05u",
				 f * FR_NODE_PROGRESS_COMMS_MAX + c);
		snprintf(pm.job, sizeof(pm.job), "job0");
		assert_int_equal(nodes_progress(n, &pm),
				 f < NODE_COMMS_MAX / FR_NODE_PROGRESS_COMMS_MAX ? 0 : -ENOSPC);
	}
	j = n->jobs[0];
	assert_string_equal(j->id, "j");
	j = n->jobs[1];
	assert_int_equal(j->nprogress, NODE_COMMS_MAX);
	/* A known communicator is still taken at the cap. */
	pm.ncomms = 1;
	snprintf(recs[0].comm, sizeof(recs[0].comm), "c00003");
	recs[0].hi_entered = 42;
	assert_int_equal(nodes_progress(n, &pm), 0);

	/* Over the budget: refused, the node's other ranks and the other node's kept. */
	budget_set_max(budget_used(BUDGET_NODES) + 64);
	{
		static struct fr_node_rank many[FR_NODE_RANKS_BATCH];

		for (uint32_t i = 0; i < FR_NODE_RANKS_BATCH; i++)
			many[i] = rank(i, 0);
		ranks_msg(&m, many, FR_NODE_RANKS_BATCH, false);
		m.world_size = FR_NODE_RANKS_BATCH;
		snprintf(m.job, sizeof(m.job), "job1");
		assert_int_equal(nodes_ranks(n, &m), -EDQUOT);
	}
	assert_int_equal(n->jobs[2]->nranks, 1);
	assert_true(budget_refused(BUDGET_NODES) > 0);
	assert_true(nodes_job_known("j", &ws));
	assert_int_equal(ws, 8);
	budget_set_max(UINT64_MAX);
	assert_nodes_released();
}

/*
 * A name is bound to its boot id while its node is connected: another
 * daemon of that name is refused and the first keeps its connection. Once
 * the first is disconnected a new boot id (a restart) takes the name.
 */
static void test_name_bound_to_boot_id(void **state)
{
	struct fr_msg_node_hello h = { .node = "n1", .boot_id = 1 };
	struct conn *c1 = (struct conn *)0x1, *c2 = (struct conn *)0x2, *old;
	const char *why = NULL;
	struct node *n;

	(void)state;
	n = nodes_hello(c1, "a", &h, &old);
	assert_non_null(n);
	h.boot_id = 2;
	assert_null(nodes_admit(c2, "b", &h, &old, &why));
	assert_non_null(why);
	assert_non_null(strstr(why, "another boot id"));
	assert_ptr_equal(n->conn, c1);
	assert_int_equal(n->boot_id, 1);
	nodes_conn_lost(n, c1);
	assert_ptr_equal(nodes_admit(c2, "b", &h, &old, &why), n);
	assert_ptr_equal(n->conn, c2);
	assert_int_equal(n->boot_id, 2);
	/* A name that could forge a log line is no name. */
	snprintf(h.node, sizeof(h.node), "n2\nflightrecd: forged");
	assert_null(nodes_admit(c1, "c", &h, &old, &why));
	assert_non_null(strstr(why, "printable"));
	assert_nodes_released();
}

/* At NODES_MAX, the node disconnected longest makes room; none: refused. */
static void test_nodes_cap_evicts_oldest_disconnected(void **state)
{
	struct fr_msg_node_hello h = { .boot_id = 1 };
	struct node *first = NULL, *second = NULL, *n;
	struct conn *old;
	const char *why;
	uint32_t number;

	(void)state;
	for (uintptr_t i = 0; i < NODES_MAX; i++) {
		snprintf(h.node, sizeof(h.node), "node%04u", (unsigned)i);
		n = nodes_hello((struct conn *)(i + 1), "a", &h, &old);
		assert_non_null(n);
		if (i == 10)
			first = n;
		if (i == 20)
			second = n;
	}
	snprintf(h.node, sizeof(h.node), "newcomer");
	assert_null(nodes_admit((struct conn *)0x9999, "a", &h, &old, &why));
	assert_non_null(strstr(why, "all are connected"));
	/* Node 20 went first, then node 10: node 20 is forgotten. */
	nodes_conn_lost(second, (struct conn *)21);
	nodes_conn_lost(first, (struct conn *)11);
	number = second->number;
	assert_string_equal(nodes_node_name(number), "node0020");
	n = nodes_admit((struct conn *)0x9999, "a", &h, &old, &why);
	assert_non_null(n);
	assert_string_equal(nodes_node_name(n->number), "newcomer");
	assert_string_equal(nodes_node_name(first->number), "node0010");
	assert_int_equal(n->number, number);
	/* By name: the newcomer and the others, not the one forgotten. */
	assert_ptr_equal(nodes_conn_by_name("newcomer"), (struct conn *)0x9999);
	assert_ptr_equal(nodes_conn_by_name("node0030"), (struct conn *)31);
	assert_ptr_equal(nodes_conn_by_name("node16383"), (struct conn *)16384);
	assert_null(nodes_conn_by_name("node0010"));
	assert_null(nodes_conn_by_name("node0020"));
	assert_null(nodes_conn_by_name("node-none"));
	assert_nodes_released();
}

struct listing {
	char jobs[8][FR_JOB_MAX + 1];
	uint32_t world[8];
	size_t njobs;
	char comms[8][FR_COMM_ID_MAX + 1];
	size_t comm_nodes[8];
	size_t ncomms;
	size_t lost;
	uint32_t lost_ranks;
};

static void each_job(void *arg, const char *job, uint32_t world_size)
{
	struct listing *l = arg;

	snprintf(l->jobs[l->njobs], sizeof(l->jobs[0]), "%s", job);
	l->world[l->njobs++] = world_size;
}

static void each_comm(void *arg, const char *comm, const struct agg_node *recs, size_t n)
{
	struct listing *l = arg;

	snprintf(l->comms[l->ncomms], sizeof(l->comms[0]), "%s", comm);
	l->comm_nodes[l->ncomms++] = n;
	for (size_t i = 0; i < n; i++)
		assert_string_equal(recs[i].rec->comm, comm);
}

static void each_lost(void *arg, const char *node, uint64_t lost_mono_ns,
		      const struct fr_node_rank *ranks, uint32_t nranks)
{
	struct listing *l = arg;

	(void)node;
	(void)lost_mono_ns;
	(void)ranks;
	l->lost++;
	l->lost_ranks += nranks;
}

static bool skip_none(void *arg, const char *job)
{
	(void)arg;
	(void)job;
	return false;
}

/* Three nodes share two jobs: every listing names each job and communicator once. */
static void test_index_lists_each_job_once(void **state)
{
	struct fr_msg_node_hello h = { .boot_id = 1 };
	struct node *n[3];
	struct conn *old;
	struct fr_msg_node_ranks m;
	static struct fr_node_comm_progress recs[2];
	struct fr_msg_node_progress pm = { .ncomms = 2, .comms = recs };
	struct listing l = { 0 };
	json_t *jobs = json_array();

	(void)state;
	for (uintptr_t i = 0; i < 3; i++) {
		struct fr_node_rank rr[] = { rank((uint32_t)i * 2, 0), rank((uint32_t)i * 2 + 1, 0) };

		snprintf(h.node, sizeof(h.node), "n%u", (unsigned)i);
		n[i] = nodes_hello((struct conn *)(i + 1), "a", &h, &old);
		ranks_msg(&m, rr, 2, true);
		snprintf(m.job, sizeof(m.job), "a");
		assert_int_equal(nodes_ranks(n[i], &m), 0);
		if (i != 1) {
			snprintf(m.job, sizeof(m.job), "b");
			assert_int_equal(nodes_ranks(n[i], &m), 0);
		}
		snprintf(recs[0].comm, sizeof(recs[0].comm), "world");
		snprintf(recs[1].comm, sizeof(recs[1].comm), "sub%u", (unsigned)(i % 2));
		snprintf(pm.job, sizeof(pm.job), "a");
		assert_int_equal(nodes_progress(n[i], &pm), 0);
	}
	nodes_conn_lost(n[2], (struct conn *)3);
	nodes_each_job(each_job, &l);
	assert_int_equal(l.njobs, 2);
	assert_string_equal(l.jobs[0], "a");
	assert_string_equal(l.jobs[1], "b");
	nodes_job_each_comm("a", daemon_mono_ns(), each_comm, &l);
	assert_int_equal(l.ncomms, 3);
	assert_string_equal(l.comms[0], "sub0");
	assert_int_equal(l.comm_nodes[0], 2);
	assert_string_equal(l.comms[1], "sub1");
	assert_int_equal(l.comm_nodes[1], 1);
	assert_string_equal(l.comms[2], "world");
	assert_int_equal(l.comm_nodes[2], 3);
	nodes_job_each_lost("a", each_lost, &l);
	assert_int_equal(l.lost, 1);
	assert_int_equal(l.lost_ranks, 2);
	/* GET /v1/jobs: once each, ranks connected counted over the connected nodes. */
	nodes_jobs_json(jobs, skip_none, NULL);
	assert_int_equal(json_array_size(jobs), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(jobs, 0), "job")), "a");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(jobs, 0),
							    "ranks_connected")),
			 4);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(jobs, 1),
							    "ranks_connected")),
			 2);
	json_decref(jobs);
	jobs = json_array();
	assert_int_equal(nodes_job_ranks_json("b", jobs), 4);
	json_decref(jobs);
	assert_nodes_released();
}

/* An empty FULL NODE_RANKS: the job ended on the node, and goes when no node holds it. */
static void test_empty_full_ranks_retracts_the_job(void **state)
{
	struct fr_msg_node_hello h = { .node = "n1", .boot_id = 1 };
	struct fr_msg_node_hello h2 = { .node = "n2", .boot_id = 1 };
	struct fr_node_rank rr[] = { rank(0, 0) }, rr2[] = { rank(1, 0) };
	struct fr_msg_node_ranks m;
	struct conn *old;
	struct node *n1 = nodes_hello((struct conn *)0x1, "a", &h, &old);
	struct node *n2 = nodes_hello((struct conn *)0x2, "a", &h2, &old);
	const char *who;
	uint32_t ws;
	json_t *ranks;

	(void)state;
	ranks_msg(&m, rr, 1, true);
	assert_int_equal(nodes_ranks(n1, &m), 0);
	ranks_msg(&m, rr2, 1, true);
	assert_int_equal(nodes_ranks(n2, &m), 0);
	ranks_msg(&m, NULL, 0, true);
	assert_int_equal(nodes_ranks(n1, &m), 0);
	assert_int_equal(n1->njobs, 0);
	ranks = json_array();
	assert_int_equal(nodes_job_ranks_json("j", ranks), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(ranks, 0), "node")),
			    "n2");
	json_decref(ranks);
	assert_true(nodes_job_held("j", &who));
	assert_string_equal(who, "n2");
	assert_int_equal(nodes_ranks(n2, &m), 0);
	assert_false(nodes_job_known("j", &ws));
	assert_false(nodes_job_held("j", &who));
	assert_nodes_released();
}

/* GET /v1/jobs over 64 nodes x 16 jobs each, 32 ranks a job on a node: printed, not asserted. */
static void test_jobs_listing_cost(void **state)
{
	enum { NODES = 64, JOBS = 16, RANKS = 32 };
	struct fr_msg_node_hello h = { .boot_id = 1 };
	struct fr_node_rank rr[RANKS];
	struct fr_msg_node_ranks m;
	struct conn *old;
	json_t *jobs = json_array();
	uint64_t t0;

	(void)state;
	for (uintptr_t i = 0; i < NODES; i++) {
		struct node *n;

		snprintf(h.node, sizeof(h.node), "node%02u", (unsigned)i);
		n = nodes_hello((struct conn *)(i + 1), "a", &h, &old);
		for (uint32_t jb = 0; jb < JOBS; jb++) {
			for (uint32_t r = 0; r < RANKS; r++)
				rr[r] = rank((uint32_t)i * RANKS + r, FR_NODE_RANK_CONNECTED);
			ranks_msg(&m, rr, RANKS, true);
			m.world_size = NODES * RANKS;
			snprintf(m.job, sizeof(m.job), "job%02u", jb);
			assert_int_equal(nodes_ranks(n, &m), 0);
		}
	}
	t0 = now_us();
	nodes_jobs_json(jobs, skip_none, NULL);
	print_message("GET /v1/jobs over %u nodes x %u jobs: %.3f ms\n", NODES, JOBS,
		      (double)(now_us() - t0) / 1000.0);
	assert_int_equal(json_array_size(jobs), JOBS);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(jobs, 0),
							    "ranks_connected")),
			 NODES * RANKS);
	json_decref(jobs);
	assert_nodes_released();
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

/*
 * Job ids a node sends are names, checked again here (the decoders refuse
 * them first): a job "../escape-x" never gets a record, so no incident
 * directory is ever made of it; a communicator id that would forge a log
 * line is refused, the node's other records taken.
 */
static void test_job_ids_checked(void **state)
{
	struct fr_node_job hj[] = { { .job = "../escape-x", .world_size = 8 },
				    { .job = "ok", .world_size = 8 } };
	struct fr_msg_node_hello h = { .node = "n1", .boot_id = 1, .njobs = 2, .jobs = hj };
	struct fr_node_rank rr[] = { rank(0, 0) };
	struct fr_node_comm_progress recs[2] = { 0 };
	struct fr_msg_node_progress pm = { .ncomms = 2, .comms = recs };
	struct fr_msg_node_ranks m;
	struct conn *old;
	struct node *n;
	uint32_t ws;

	(void)state;
	n = nodes_hello((struct conn *)0x1, "a", &h, &old);
	assert_non_null(n);
	assert_int_equal(n->njobs, 1);
	assert_string_equal(n->jobs[0]->id, "ok");
	ranks_msg(&m, rr, 1, true);
	snprintf(m.job, sizeof(m.job), "../escape-x");
	assert_int_equal(nodes_ranks(n, &m), -ENOSPC);
	snprintf(m.job, sizeof(m.job), "a/b");
	assert_int_equal(nodes_ranks(n, &m), -ENOSPC);
	assert_false(nodes_job_known("../escape-x", &ws));
	assert_false(nodes_job_known("a/b", &ws));
	snprintf(pm.job, sizeof(pm.job), ".hidden");
	assert_int_equal(nodes_progress(n, &pm), -ENOSPC);
	assert_int_equal(n->njobs, 1);

	snprintf(pm.job, sizeof(pm.job), "ok");
	snprintf(recs[0].comm, sizeof(recs[0].comm), "mpi-1\nflightrecd: forged");
	snprintf(recs[1].comm, sizeof(recs[1].comm), "mpi-2");
	assert_int_equal(nodes_progress(n, &pm), -ENOSPC);
	assert_int_equal(n->jobs[0]->nprogress, 1);
	assert_string_equal(n->jobs[0]->progress[0].comm, "mpi-2");
	nodes_free();
	assert_nodes_released();
}

/*
 * One holder a rank: a node that claims ranks another connected node of
 * the job holds gets the others only; a lost node's ranks move to the
 * node that claims them (a rank restarted elsewhere). Connections are
 * found by name.
 */
static void test_one_holder_a_rank(void **state)
{
	struct fr_msg_node_hello ha = { .node = "na", .boot_id = 1 };
	struct fr_msg_node_hello hb = { .node = "nb", .boot_id = 2 };
	struct fr_node_rank ra[] = { rank(0, 0), rank(1, 0), rank(2, 0), rank(3, 0) };
	struct fr_node_rank rb[] = { rank(0, 0), rank(4, 0) };
	struct fr_node_rank rb2[] = { rank(1, 0) };
	struct conn *ca = (struct conn *)0x1, *cb = (struct conn *)0x2, *old, *c;
	struct fr_msg_node_ranks m;
	struct node *a, *b;
	const char *name;

	(void)state;
	a = nodes_hello(ca, "127.0.0.1:1", &ha, &old);
	b = nodes_hello(cb, "127.0.0.1:2", &hb, &old);
	ranks_msg(&m, ra, 4, true);
	assert_int_equal(nodes_ranks(a, &m), 0);
	ranks_msg(&m, rb, 2, true);
	assert_int_equal(nodes_ranks(b, &m), -EADDRINUSE);
	assert_true(nodes_rank_node("j", 0, &c, &name));
	assert_string_equal(name, "na");
	assert_ptr_equal(c, ca);
	assert_null(nodes_job_rank("j", "nb", 0));
	assert_non_null(nodes_job_rank("j", "nb", 4));
	assert_ptr_equal(nodes_conn_by_name("na"), ca);
	assert_ptr_equal(nodes_conn_by_name("nb"), cb);
	assert_null(nodes_conn_by_name("nc"));

	/* na lost: its rank 1 restarted on nb moves there. */
	nodes_conn_lost(a, ca);
	assert_null(nodes_conn_by_name("na"));
	ranks_msg(&m, rb2, 1, false);
	assert_int_equal(nodes_ranks(b, &m), 0);
	assert_true(nodes_rank_node("j", 1, &c, &name));
	assert_string_equal(name, "nb");
	assert_null(nodes_job_rank("j", "na", 1));
	assert_non_null(nodes_job_rank("j", "na", 0));
	/* na back: what nb holds now is nb's. */
	a = nodes_hello(ca, "127.0.0.1:1", &ha, &old);
	ranks_msg(&m, ra, 4, true);
	assert_int_equal(nodes_ranks(a, &m), -EADDRINUSE);
	assert_null(nodes_job_rank("j", "na", 1));
	assert_non_null(nodes_job_rank("j", "na", 0));
	nodes_free();
	assert_nodes_released();
}

/* One world size a job: a node that says another is refused, in NODE_RANKS and NODE_HELLO. */
static void test_world_size_agreed(void **state)
{
	struct fr_node_job hj = { .job = "j", .world_size = 4 };
	struct fr_msg_node_hello ha = { .node = "na", .boot_id = 1 };
	struct fr_msg_node_hello hb = { .node = "nb", .boot_id = 2 };
	struct fr_msg_node_hello hc = { .node = "nc", .boot_id = 3, .njobs = 1, .jobs = &hj };
	struct fr_node_rank ra[] = { rank(0, 0), rank(5, 0) };
	struct fr_node_rank rb[] = { rank(1, 0) };
	struct seen_node seen = { 0 };
	struct fr_msg_node_ranks m;
	struct conn *old;
	struct node *a, *b, *c;
	uint32_t ws;

	(void)state;
	a = nodes_hello((struct conn *)0x1, "x:1", &ha, &old);
	b = nodes_hello((struct conn *)0x2, "x:2", &hb, &old);
	c = nodes_hello((struct conn *)0x3, "x:3", &hc, &old);
	assert_non_null(c);
	assert_int_equal(c->njobs, 1);
	ranks_msg(&m, ra, 2, true);
	assert_int_equal(nodes_ranks(a, &m), 0);
	ranks_msg(&m, rb, 1, true);
	m.world_size = 4;
	assert_int_equal(nodes_ranks(b, &m), -EDOM);
	assert_int_equal(b->njobs, 0);
	assert_true(nodes_job_known("j", &ws));
	assert_int_equal(ws, 8);
	nodes_job_each_node("j", note_node, &seen);
	assert_int_equal(seen.n, 1);
	/* A hello listing the job with another size: no record of it. */
	c = nodes_hello((struct conn *)0x3, "x:3", &hc, &old);
	assert_int_equal(c->njobs, 0);
	nodes_free();
	assert_nodes_released();
}

/*
 * A lost node keeps its jobs for the grace (max(10 x heartbeat timeout,
 * 10 min)), then forgets them; after the grace it no longer keeps a job id
 * from agents even before the sweep.
 */
static void test_lost_node_grace(void **state)
{
	struct fr_msg_node_hello ha = { .node = "na", .boot_id = 1 };
	struct fr_node_rank ra[] = { rank(0, 0) };
	struct fr_msg_node_ranks m;
	struct conn *ca = (struct conn *)0x1, *old;
	uint64_t grace = nodes_lost_grace_ns(30);
	struct timespec ms = { 0, 2000000 };
	const char *node;
	struct node *a;
	uint32_t ws;

	(void)state;
	assert_int_equal(grace, 600 * NS_PER_S);
	assert_int_equal(nodes_lost_grace_ns(120), 1200 * NS_PER_S);
	a = nodes_hello(ca, "x:1", &ha, &old);
	ranks_msg(&m, ra, 1, true);
	assert_int_equal(nodes_ranks(a, &m), 0);
	nodes_conn_lost(a, ca);
	nodes_forget_lost(daemon_mono_ns(), grace);
	assert_true(nodes_job_held("j", &node));
	assert_string_equal(node, "na");
	nodes_forget_lost(daemon_mono_ns() + grace + NS_PER_S, grace);
	assert_false(nodes_job_held("j", &node));
	assert_false(nodes_job_known("j", &ws));
	assert_int_equal(a->njobs, 0);

	/* Held while connected; past a (tiny) grace not, though not swept yet. */
	a = nodes_hello(ca, "x:1", &ha, &old);
	assert_int_equal(nodes_ranks(a, &m), 0);
	nodes_forget_lost(daemon_mono_ns(), 1);
	assert_true(nodes_job_held("j", &node));
	nodes_conn_lost(a, ca);
	nanosleep(&ms, NULL);
	assert_false(nodes_job_held("j", &node));
	assert_true(nodes_job_known("j", &ws));
	nodes_forget_lost(daemon_mono_ns(), grace);
	nodes_free();
	assert_nodes_released();
}

/* The jobs all nodes hold together are capped: a new one past NODES_JOBS_TOTAL_MAX is refused. */
static void test_jobs_total_cap(void **state)
{
	struct fr_node_rank rr[] = { rank(0, 0) };
	struct fr_msg_node_hello last = { .node = "last", .boot_id = 1 };
	struct fr_msg_node_ranks m;
	struct conn *old;
	struct node *n;
	uint32_t ws;

	(void)state;
	for (uint32_t k = 0; k < NODES_JOBS_TOTAL_MAX / NODE_JOBS_MAX; k++) {
		struct fr_msg_node_hello h = { .boot_id = 1 };

		snprintf(h.node, sizeof(h.node), "n%u", k);
		n = nodes_hello((struct conn *)(uintptr_t)(k + 1), "x:1", &h, &old);
		assert_non_null(n);
		for (uint32_t i = 0; i < NODE_JOBS_MAX; i++) {
			ranks_msg(&m, rr, 1, true);
			snprintf(m.job, sizeof(m.job), "job%u", k * NODE_JOBS_MAX + i);
			assert_int_equal(nodes_ranks(n, &m), 0);
		}
	}
	n = nodes_hello((struct conn *)0x9999, "x:2", &last, &old);
	/* At the cap a node may still hold ranks of a job others hold ... */
	ranks_msg(&m, rr, 1, true);
	m.ranks[0].rank = 1;
	snprintf(m.job, sizeof(m.job), "job0");
	assert_int_equal(nodes_ranks(n, &m), 0);
	/* ... but not of a new one. */
	snprintf(m.job, sizeof(m.job), "one-more");
	assert_int_equal(nodes_ranks(n, &m), -ENOSPC);
	assert_false(nodes_job_known("one-more", &ws));
	nodes_free();
	assert_nodes_released();
}

/*
 * Checking a claim costs what the job's other holders hold, not the batch
 * times the holders: 4,095 nodes of 15 ranks each, then a node's batch of
 * 2,048 ranks, all new, and one of 2,048 all held.
 */
#define CLAIM_NODES 4095u
static void test_claim_cost(void **state)
{
	static struct fr_node_rank rr[FR_NODE_RANKS_BATCH];
	struct fr_msg_node_hello h = { .boot_id = 1 };
	struct fr_msg_node_ranks m;
	struct conn *old;
	struct node *n;
	uint64_t t0, t;

	(void)state;
	for (uint32_t k = 0; k < CLAIM_NODES; k++) {
		snprintf(h.node, sizeof(h.node), "n%u", k);
		n = nodes_hello((struct conn *)(uintptr_t)(k + 1), "x:1", &h, &old);
		for (uint32_t i = 0; i < 15; i++)
			rr[i] = rank(k * 15 + i, 0);
		ranks_msg(&m, rr, 15, true);
		m.world_size = NODE_RANKS_MAX;
		assert_int_equal(nodes_ranks(n, &m), 0);
	}
	snprintf(h.node, sizeof(h.node), "last");
	n = nodes_hello((struct conn *)0x99999, "x:1", &h, &old);
	for (uint32_t i = 0; i < FR_NODE_RANKS_BATCH; i++)
		rr[i] = rank(NODE_RANKS_MAX - 1 - i, 0);
	t0 = now_us();
	for (int round = 0; round < 2; round++) {
		ranks_msg(&m, rr, FR_NODE_RANKS_BATCH, true);
		m.world_size = NODE_RANKS_MAX;
		for (uint32_t i = 0; round && i < FR_NODE_RANKS_BATCH; i++)
			rr[i] = rank(i, 0);
		assert_int_equal(nodes_ranks(n, &m), round ? -EADDRINUSE : 0);
	}
	t = now_us() - t0;
	printf("two claims of %u ranks against %u nodes: %.2f ms\n", FR_NODE_RANKS_BATCH,
	       CLAIM_NODES, (double)t / 1000.0);
	/* The product (2 x 2,048 x 4,095 searches) took some 270 ms. */
	assert_true(t < 100000);
	assert_int_equal(n->jobs[0]->nranks, 0);
	nodes_free();
	assert_nodes_released();
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

/*
 * Thousands of nodes lost at once (a switch, the central daemon's own
 * network) are not a line each: 16 by name, then one line that says
 * they are being counted.
 */
static void test_mass_loss_logged(void **state)
{
	struct fr_msg_node_hello h = { .boot_id = 7 };
	struct node *n[40];
	struct conn *old;

	(void)state;
	for (uintptr_t i = 0; i < 40; i++) {
		snprintf(h.node, sizeof(h.node), "mass%u", (unsigned)i);
		n[i] = nodes_hello((struct conn *)(i + 100), "10.0.0.1:1", &h, &old);
		assert_non_null(n[i]);
	}
	logged_lost = logged_lost_many = 0;
	for (uintptr_t i = 0; i < 40; i++)
		nodes_conn_lost(n[i], (struct conn *)(i + 100));
	assert_int_equal(logged_lost, 16);
	assert_int_equal(logged_lost_many, 1);
	nodes_free();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		/* First: the burst of losses logged by name is the process's,
		 * and the other tests lose nodes too. */
		cmocka_unit_test(test_mass_loss_logged),
		cmocka_unit_test(test_ranks_full_then_delta),
		cmocka_unit_test(test_progress_replaces_per_comm),
		cmocka_unit_test(test_node_lost_and_restarted),
		cmocka_unit_test(test_ranks_merge_matches_a_table),
		cmocka_unit_test(test_ranks_merge_cost),
		cmocka_unit_test(test_progress_kept_at_used_size),
		cmocka_unit_test(test_caps_and_budget),
		cmocka_unit_test(test_name_bound_to_boot_id),
		cmocka_unit_test(test_nodes_cap_evicts_oldest_disconnected),
		cmocka_unit_test(test_index_lists_each_job_once),
		cmocka_unit_test(test_empty_full_ranks_retracts_the_job),
		cmocka_unit_test(test_jobs_listing_cost),
		cmocka_unit_test(test_rank_node),
		cmocka_unit_test(test_job_ids_checked),
		cmocka_unit_test(test_one_holder_a_rank),
		cmocka_unit_test(test_world_size_agreed),
		cmocka_unit_test(test_lost_node_grace),
		cmocka_unit_test(test_jobs_total_cap),
		cmocka_unit_test(test_claim_cost),
		cmocka_unit_test(test_backoff),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
