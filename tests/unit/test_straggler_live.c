/*
 * The daemon's live straggler scores (daemon/straggler.c), fed samples as
 * TIMING would bring them: who is named, and who is not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../daemon/clock.h"
#include "../../daemon/registry.h"
#include "../../daemon/straggler.h"
#include "../../protocol/op.h"

/* What straggler.c calls that the scoring does not need. */
uint64_t daemon_mono_ns(void)
{
	return 0;
}

uint64_t daemon_now_ns(void)
{
	return 0;
}

struct job_rank *registry_rank(const struct job *job, uint32_t rank)
{
	(void)job;
	(void)rank;
	return NULL;
}

const struct job_comm *registry_job_comm(const struct job *job, const char *id)
{
	(void)job;
	(void)id;
	return NULL;
}

bool registry_rank_in_comm(const struct job_rank *r, const char *id)
{
	(void)r;
	(void)id;
	return false;
}

#define WORLD 4
#define MS 1000000ull
#define STEP_NS (100 * MS) /* one sampled collective every 100 ms */

static const struct straggler_limits lim = { .threshold_s = 0.002, .min_duration_s = 1.0 };

struct fixture {
	struct job job;
	struct job_comm comm;
	uint64_t seq;
	uint64_t now;
	int64_t offset[WORLD];  /* daemon clock less each rank's */
	bool mpi;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	f->job.world_size = WORLD;
	f->job.comms = &f->comm;
	f->job.ncomms = 1;
	f->comm.size = WORLD;
	f->now = 1000 * MS;
	f->mpi = true;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	straggler_job_free(&f->job);
	free(f);
	return 0;
}

/*
 * One sampled all_reduce: rank r arrives late_ns[r] after the first (on
 * true time), and all leave together 1 ms after the last arrives.
 */
static void collective(struct fixture *f, const uint64_t late_ns[WORLD])
{
	uint64_t start = 1700000000ull * 1000000000ull + f->now;
	uint64_t last = 0;

	f->seq += 8;
	for (int r = 0; r < WORLD; r++)
		if (late_ns[r] > last)
			last = late_ns[r];
	for (int r = 0; r < WORLD; r++) {
		struct fr_wire_timing t = {
			.seq = f->seq,
			.type = FR_OP_ALL_REDUCE,
			.entered_ns = start + late_ns[r] - (uint64_t)f->offset[r],
			.wait_ns = last + MS - late_ns[r],
		};
		struct straggler_sample s = {
			.rank = (uint32_t)r, .mpi = f->mpi, .has_offset = true,
			.offset_ns = f->offset[r], .t = &t,
		};

		assert_int_equal(straggler_note(&f->job, &f->comm, &s, &lim, f->now), 0);
	}
	f->now += STEP_NS;
}

/* The stragglers named now, into `out` (at most 8); how many. */
static unsigned named(struct fixture *f, struct straggler_entry *out)
{
	return straggler_list(&f->job, &lim, f->now, true, out, STRAGGLER_LIST_MAX);
}

/* A little noise (under 0.3 ms), the same on every run. */
static uint64_t jitter(unsigned i, int r)
{
	return (uint64_t)(((i * 7919u + (unsigned)r * 104729u) % 300u) * 1000u);
}

/* Rank 2, last by 5 ms in each of 50 collectives (5 s), is named. */
static void test_consistently_last_is_named(void **state)
{
	struct fixture *f = *state;
	struct straggler_entry e[STRAGGLER_LIST_MAX];

	for (unsigned i = 0; i < 50; i++) {
		uint64_t late[WORLD] = { jitter(i, 0), jitter(i, 1), 5 * MS, jitter(i, 3) };

		collective(f, late);
	}
	assert_int_equal(named(f, e), 1);
	assert_int_equal(e[0].rank, 2);
	assert_true(e[0].lag_s > 0.0045 && e[0].lag_s < 0.0055);
	assert_true(e[0].last_fraction > 0.9);
	assert_true(e[0].since_s >= 1.0);
}

/* Before --straggler-min-duration has passed, nobody is named. */
static void test_not_before_min_duration(void **state)
{
	struct fixture *f = *state;
	struct straggler_entry e[STRAGGLER_LIST_MAX];

	for (unsigned i = 0; i < 12; i++) {
		uint64_t late[WORLD] = { 0, jitter(i, 1), 5 * MS, jitter(i, 3) };

		collective(f, late);
	}
	/* Judged from the 8th on: held 0.4 s. */
	assert_int_equal(named(f, e), 0);
	assert_int_equal(straggler_list(&f->job, &lim, f->now, false, e, 8) >= 1, 1);
	assert_int_equal(e[0].rank, 2);
	assert_false(e[0].straggler);
}

/* One slow step, then a few more in a row (under the minimum duration), name nobody. */
static void test_slow_steps_not_named(void **state)
{
	struct fixture *f = *state;
	struct straggler_entry e[STRAGGLER_LIST_MAX];

	for (unsigned i = 0; i < 60; i++) {
		/* The last place goes round; rank 1 is 40 ms late in steps 20 and 30-35. */
		uint64_t late[WORLD] = { jitter(i, 0), jitter(i, 1), jitter(i, 2), jitter(i, 3) };

		late[i % WORLD] += 3 * MS;
		if (i == 20 || (i >= 30 && i < 36))
			late[1] = 40 * MS;
		collective(f, late);
		assert_int_equal(named(f, e), 0);
	}
}

/* A rank always last, but by less than the threshold (noise), is not named. */
static void test_below_threshold_not_named(void **state)
{
	struct fixture *f = *state;
	struct straggler_entry e[STRAGGLER_LIST_MAX];

	for (unsigned i = 0; i < 100; i++) {
		uint64_t late[WORLD] = { jitter(i, 0), jitter(i, 1), 1 * MS, jitter(i, 3) };

		collective(f, late);
	}
	assert_int_equal(named(f, e), 0);
}

/*
 * Entry times (ranks that are not MPI's) come on each host's clock: rank 1's
 * runs 20 ms ahead, which without the offset would make it last by 20 ms;
 * with it, rank 3, truly 5 ms late, is named and rank 1 is not.
 */
static void test_clock_offset_corrected(void **state)
{
	struct fixture *f = *state;
	struct straggler_entry e[STRAGGLER_LIST_MAX];

	f->mpi = false;
	f->offset[1] = -20 * (int64_t)MS;
	f->offset[2] = 7 * (int64_t)MS;
	for (unsigned i = 0; i < 50; i++) {
		uint64_t late[WORLD] = { jitter(i, 0), jitter(i, 1), jitter(i, 2), 5 * MS };

		collective(f, late);
	}
	assert_int_equal(named(f, e), 1);
	assert_int_equal(e[0].rank, 3);
	assert_true(e[0].lag_s > 0.0045 && e[0].lag_s < 0.0055);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_consistently_last_is_named, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_before_min_duration, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slow_steps_not_named, setup, teardown),
		cmocka_unit_test_setup_teardown(test_below_threshold_not_named, setup, teardown),
		cmocka_unit_test_setup_teardown(test_clock_offset_corrected, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
