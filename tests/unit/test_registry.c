/*
 * daemon/registry.c with budget.c: communicators' member lists are shared
 * with live views by reference count and copied only when a report changes
 * a list a view holds (copy-on-write); the memory budget counts the list
 * the registry holds; a re-report refused over the budget keeps the list
 * it would have replaced; a job's key is made once per token, not at every
 * GET /v1/jobs. The log, the clock and the connection and incident calls
 * the registry makes are stubbed; fr_wire_job_key is wrapped (the Makefile
 * links with --wrap) to count the HMACs made.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../daemon/daemon.h"
#include "../../daemon/budget.h"
#include "../../daemon/clock.h"
#include "../../daemon/incident.h"
#include "../../daemon/log.h"
#include "../../daemon/ratelog.h"
#include "../../daemon/registry.h"
#include "../../daemon/server.h"
#include "trace.h"

void daemon_log(const char *fmt, ...)
{
	(void)fmt;
}

uint64_t daemon_now_ns(void)
{
	return 1000 * NS_PER_S;
}

uint64_t daemon_mono_ns(void)
{
	return 1000 * NS_PER_S;
}

bool ratelog(const char *limit, const char *offender, const char *fmt, ...)
{
	(void)limit;
	(void)offender;
	(void)fmt;
	return false;
}

void conn_close(struct conn *c)
{
	(void)c;
}

void incident_rank_joined(struct incident *inc, struct conn *c)
{
	(void)inc;
	(void)c;
}

void incident_rank_left(struct incident *inc, uint32_t rank, bool finished)
{
	(void)inc;
	(void)rank;
	(void)finished;
}

int __real_fr_wire_job_key(const struct fr_token *t, const char *job,
			   uint8_t key[FR_WIRE_JOB_KEY_SIZE]);
int __wrap_fr_wire_job_key(const struct fr_token *t, const char *job,
			   uint8_t key[FR_WIRE_JOB_KEY_SIZE]);

static unsigned job_keys_made;

int __wrap_fr_wire_job_key(const struct fr_token *t, const char *job,
			   uint8_t key[FR_WIRE_JOB_KEY_SIZE])
{
	job_keys_made++;
	return __real_fr_wire_job_key(t, job, key);
}

#define WORLD 8u

static struct flightrecd d;
static struct conn conns[8];

static int setup(void **state)
{
	(void)state;
	memset(&d, 0, sizeof(d));
	memset(conns, 0, sizeof(conns));
	d.cfg.heartbeat_timeout_s = 1000;
	budget_set_max(UINT64_MAX);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	registry_free(&d);
	assert_int_equal(budget_used(BUDGET_MEMBERS), 0);
	return 0;
}

/* Connection `i` says HELLO as `rank` of job `job`, process `pid`. */
static struct conn *hello(unsigned i, const char *job, uint32_t rank, uint32_t pid)
{
	struct fr_msg_hello m = { .rank = rank, .world_size = WORLD, .pid = pid };
	const char *why = NULL;
	struct conn *c = &conns[i];

	memset(c, 0, sizeof(*c));
	c->d = &d;
	snprintf(c->peer, sizeof(c->peer), "127.0.0.1:%u", 1000 + i);
	snprintf(m.job, sizeof(m.job), "%s", job);
	snprintf(m.host, sizeof(m.host), "node");
	assert_int_equal(registry_hello(&d, c, &m, &why), 0);
	return c;
}

/* The rank of `c` reports communicator `id` with `n` members. */
static int comm(struct conn *c, const char *id, uint32_t rank, const uint32_t *members,
		uint32_t n)
{
	struct fr_msg_comm m = { .rank = rank, .size = n, .members = (uint32_t *)members };
	const char *why = NULL;

	snprintf(m.id, sizeof(m.id), "%s", id);
	snprintf(m.desc, sizeof(m.desc), "test");
	return registry_comm(c, &m, &why);
}

static const uint32_t U = FR_RANK_UNKNOWN;

/* The rank of `c` reports communicator `id` of `size` members as runs. */
static int comm_runs(struct conn *c, const char *id, uint32_t rank, uint32_t size,
		     const struct fr_node_map *runs, uint32_t nruns, const char **why)
{
	struct fr_msg_comm_runs m = { .rank = rank, .size = size, .nruns = nruns,
				      .runs = (struct fr_node_map *)runs };

	snprintf(m.id, sizeof(m.id), "%s", id);
	snprintf(m.desc, sizeof(m.desc), "test");
	*why = NULL;
	return registry_comm_runs(c, &m, why);
}

/*
 * A job of 100,000 ranks and one of DAEMON_MAX_WORLD are held (100,000 was
 * refused once, past a limit of 65,536); one past it, or a rank not below
 * its world, is refused with the reason.
 */
static void test_world_sizes(void **state)
{
	static const struct {
		uint32_t world, rank;
		const char *why;
	} cases[] = {
		{ 100000, 99999, NULL },
		{ DAEMON_MAX_WORLD, DAEMON_MAX_WORLD - 1, NULL },
		{ DAEMON_MAX_WORLD + 1, 0, "world size out of range" },
		{ 0, 0, "world size out of range" },
		{ 100000, 100000, "rank not below world size" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fr_msg_hello m = { .rank = cases[i].rank, .world_size = cases[i].world,
					  .pid = 100 + (uint32_t)i };
		const char *why = NULL;
		struct conn *c = &conns[i];
		int rc;

		memset(c, 0, sizeof(*c));
		c->d = &d;
		snprintf(c->peer, sizeof(c->peer), "127.0.0.1:%zu", 2000 + i);
		snprintf(m.job, sizeof(m.job), "big%zu", i);
		snprintf(m.host, sizeof(m.host), "node");
		rc = registry_hello(&d, c, &m, &why);
		if (cases[i].why) {
			assert_int_not_equal(rc, 0);
			assert_non_null(why);
			assert_string_equal(why, cases[i].why);
		} else {
			assert_int_equal(rc, 0);
			assert_non_null(c->job);
		}
	}

	/* Past 65,536 ranks, what an incident of a world costs must fit half
	 * of --max-memory (1 GiB here: 6 KiB a rank, 87,381 ranks at most);
	 * up to 65,536, any budget holds it. */
	budget_set_max(1ull << 30);
	for (uint32_t k = 0; k < 3; k++) {
		struct fr_msg_hello m = { .rank = 0, .world_size = k == 2 ? 100000 : k ? 80000 : 65536,
					  .pid = 200 + k };
		const char *why = NULL;
		struct conn *c = &conns[5 + k];

		if (k == 0)
			budget_set_max(16ull << 20);
		else
			budget_set_max(1ull << 30);

		memset(c, 0, sizeof(*c));
		c->d = &d;
		snprintf(c->peer, sizeof(c->peer), "127.0.0.1:%u", 3000 + k);
		snprintf(m.job, sizeof(m.job), "budget%u", k);
		snprintf(m.host, sizeof(m.host), "node");
		if (k == 2) {
			assert_int_not_equal(registry_hello(&d, c, &m, &why), 0);
			assert_non_null(strstr(why, "world size too large for --max-memory"));
		} else {
			assert_int_equal(registry_hello(&d, c, &m, &why), 0);
		}
	}
}

/*
 * COMM_RUNS and COMM build the same one list per communicator: runs fill
 * what they name, a complete list of one run takes further reports without
 * looking at each member, a run that disagrees keeps the first value, and
 * a run past the world is refused.
 */
static void test_runs_and_arrays_merge(void **state)
{
	static const struct fr_node_map own0[] = { { 0, 0, 1 } }, rest[] = { { 1, 1, 3 } };
	static const struct fr_node_map world[] = { { 0, 0, 4 } }, shifted[] = { { 0, 1, 3 } };
	static const struct fr_node_map past[] = { { 0, WORLD - 2, 3 } };
	uint32_t array[4] = { 0, 1, 2, 3 };
	struct conn *c0 = hello(0, "j", 0, 100);
	struct conn *c1 = hello(1, "j", 1, 101);
	struct job *job = registry_job_find(&d, "j");
	const struct job_comm *jc;
	const char *why;

	(void)state;
	/* An NCCL rank's own place, then the rest: complete, one run. */
	assert_int_equal(comm_runs(c0, "nccl", 0, 4, own0, 1, &why), 0);
	jc = registry_job_comm(job, "nccl");
	assert_int_equal(jc->nunknown, 3);
	assert_int_equal(jc->members->v[1], U);
	assert_false(jc->one_run);
	assert_int_equal(comm_runs(c1, "nccl", 1, 4, rest, 1, &why), 0);
	assert_int_equal(jc->nunknown, 0);
	assert_memory_equal(jc->members->v, array, sizeof(array));
	assert_true(jc->one_run);
	/* The same list as an array changes nothing. */
	assert_int_equal(comm(c0, "nccl", 0, array, 4), 0);
	assert_memory_equal(registry_job_comm(job, "nccl")->members->v, array, sizeof(array));

	/* World as one run, then a report that says otherwise: the first stays. */
	assert_int_equal(comm_runs(c0, "world", 0, 4, world, 1, &why), 0);
	jc = registry_job_comm(job, "world");
	assert_true(jc->one_run);
	assert_int_equal(comm_runs(c1, "world", 1, 4, shifted, 1, &why), 0);
	assert_memory_equal(jc->members->v, array, sizeof(array));
	assert_true(jc->member_conflict_logged);

	/* Ranks past the world. */
	assert_int_equal(comm_runs(c0, "big", 0, 3, past, 1, &why), -EPROTO);
	assert_string_equal(why, "communicator member not below world size");
}

/*
 * A view takes a reference, not a copy; a report that fills an entry of a
 * list a view holds changes a copy, and the view keeps what it took.
 */
static void test_view_shares_and_copy_on_write(void **state)
{
	uint32_t mine0[4] = { 0, U, U, U };
	uint32_t mine1[4] = { U, 1, U, U };
	struct conn *c0 = hello(0, "j", 0, 100);
	struct conn *c1 = hello(1, "j", 1, 101);
	struct job *job = registry_job_find(&d, "j");
	const struct job_comm *jc;
	struct member_list *before;
	struct live_view lv;

	(void)state;
	assert_int_equal(comm(c0, "nccl", 0, mine0, 4), 0);
	jc = registry_job_comm(job, "nccl");
	assert_non_null(jc);
	before = jc->members;
	assert_int_equal(budget_used(BUDGET_MEMBERS), 4 * sizeof(uint32_t));

	assert_int_equal(registry_live_view(&d, job, false, &lv), 0);
	assert_int_equal(lv.ncomms, 1);
	assert_ptr_equal(lv.comms[0].members, before);
	assert_ptr_equal(lv.traces[0].comms[0].members, before->v);

	/* Rank 1's entry: the registry's list is copied, the view's stays. */
	assert_int_equal(comm(c1, "nccl", 1, mine1, 4), 0);
	jc = registry_job_comm(job, "nccl");
	assert_ptr_not_equal(jc->members, before);
	assert_int_equal(jc->members->v[1], 1);
	assert_int_equal(lv.comms[0].members->v[1], U);
	assert_int_equal(jc->nunknown, 2);
	/* The budget counts the registry's list only. */
	assert_int_equal(budget_used(BUDGET_MEMBERS), 4 * sizeof(uint32_t));
	live_view_free(&lv);

	/* Not shared any more: the next report changes the list in place. */
	before = jc->members;
	mine1[1] = U;
	mine1[2] = 2;
	assert_int_equal(comm(c1, "nccl", 1, mine1, 4), 0);
	assert_ptr_equal(registry_job_comm(job, "nccl")->members, before);
	assert_int_equal(before->v[2], 2);
}

/* A report that changes nothing copies nothing, shared or not. */
static void test_unchanged_report_not_copied(void **state)
{
	uint32_t world[4] = { 0, 1, 2, 3 };
	struct conn *c0 = hello(0, "j", 0, 100);
	struct conn *c1 = hello(1, "j", 1, 101);
	struct job *job = registry_job_find(&d, "j");
	struct member_list *before;
	struct live_view lv;

	(void)state;
	assert_int_equal(comm(c0, "world", 0, world, 4), 0);
	before = registry_job_comm(job, "world")->members;
	assert_int_equal(registry_live_view(&d, job, false, &lv), 0);
	assert_int_equal(comm(c1, "world", 1, world, 4), 0);
	assert_ptr_equal(registry_job_comm(job, "world")->members, before);
	live_view_free(&lv);
}

/* A view outlives the job that held its lists: it holds them itself. */
static void test_view_outlives_registry(void **state)
{
	uint32_t world[4] = { 0, 1, 2, 3 };
	struct conn *c0 = hello(0, "j", 0, 100);
	struct live_view lv;

	(void)state;
	assert_int_equal(comm(c0, "world", 0, world, 4), 0);
	assert_int_equal(registry_live_view(&d, registry_job_find(&d, "j"), false, &lv), 0);
	registry_free(&d);
	assert_int_equal(budget_used(BUDGET_MEMBERS), 0);
	assert_int_equal(lv.comms[0].members->v[3], 3);
	assert_int_equal(lv.traces[0].comms[0].members[3], 3);
	live_view_free(&lv);
}

/*
 * A new run's report over the job's half of the budget is refused and the
 * communicator keeps the list it had; a same-size one always fits.
 */
static void test_refused_rereport_keeps_list(void **state)
{
	uint32_t small[2] = { 0, 1 };
	uint32_t big[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	struct conn *c0 = hello(0, "j", 0, 100);
	struct job *job = registry_job_find(&d, "j");
	const struct job_comm *jc;

	(void)state;
	/* The job may hold 40 bytes: a 2-member list (8) and a 6-member one (24). */
	budget_set_max(80);
	assert_int_equal(comm(c0, "c", 0, small, 2), 0);
	assert_int_equal(comm(c0, "d", 0, big, 6), 0);
	assert_int_equal(budget_used(BUDGET_MEMBERS), 32);
	/* Rank 0's process is gone, a new one takes its place: the lists it
	 * reported are stale. */
	registry_conn_lost(&d, c0);
	c0 = hello(1, "j", 0, 200);
	assert_int_equal(comm(c0, "c", 0, big, 8), -EDQUOT);
	jc = registry_job_comm(job, "c");
	assert_non_null(jc->members);
	assert_int_equal(jc->size, 2);
	assert_int_equal(jc->members->v[1], 1);
	assert_int_equal(budget_used(BUDGET_MEMBERS), 32);
	assert_int_equal(job->mem_bytes, 32);
	/* The same size again (or smaller) replaces it. */
	assert_int_equal(comm(c0, "d", 0, big, 6), 0);
	assert_int_equal(comm(c0, "c", 0, small, 1), 0);
	assert_int_equal(registry_job_comm(job, "c")->size, 1);
	assert_int_equal(budget_used(BUDGET_MEMBERS), 28);
	assert_int_equal(job->mem_bytes, 28);
	budget_set_max(UINT64_MAX);
}

/*
 * A job's key is made when the job is, and again only when the token
 * changed: asking for many jobs with any key makes no HMAC per job.
 */
static void test_job_key_kept(void **state)
{
	uint8_t key_a[FR_WIRE_JOB_KEY_SIZE];
	uint8_t wrong[FR_WIRE_JOB_KEY_SIZE] = { 0 };
	struct job *a;
	struct job *b;

	(void)state;
	d.cfg.token.len = 32;
	memset(d.cfg.token.bytes, 't', 32);
	job_keys_made = 0;
	hello(0, "a", 0, 100);
	hello(1, "b", 0, 101);
	a = registry_job_find(&d, "a");
	b = registry_job_find(&d, "b");
	assert_int_equal(job_keys_made, 2);
	assert_int_equal(__real_fr_wire_job_key(&d.cfg.token, "a", key_a), 0);
	for (int i = 0; i < 100; i++) {
		assert_false(registry_job_key_is(&d, a, wrong));
		assert_false(registry_job_key_is(&d, b, wrong));
		assert_true(registry_job_key_is(&d, a, key_a));
		assert_false(registry_job_key_is(&d, b, key_a));
	}
	assert_int_equal(job_keys_made, 2);
	/* SIGHUP rotated the token: the old key opens nothing, the new one does. */
	memset(d.cfg.token.bytes, 'u', 32);
	assert_false(registry_job_key_is(&d, a, key_a));
	assert_int_equal(__real_fr_wire_job_key(&d.cfg.token, "a", key_a), 0);
	assert_true(registry_job_key_is(&d, a, key_a));
	assert_false(registry_job_key_is(&d, b, key_a));
	assert_int_equal(job_keys_made, 2 + 2);
	/* Without a token no key opens anything. */
	d.cfg.token.len = 0;
	assert_false(registry_job_key_is(&d, a, key_a));
	assert_false(registry_job_key_is(&d, a, wrong));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_view_shares_and_copy_on_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unchanged_report_not_copied, setup, teardown),
		cmocka_unit_test_setup_teardown(test_view_outlives_registry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_rereport_keeps_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_key_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_world_sizes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_runs_and_arrays_merge, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
