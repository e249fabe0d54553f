/*
 * Unit tests of the correlation engine's stragglers (straggler.c): ranks
 * consistently late to the collectives of a job that does not hang, across
 * hosts whose clocks differ.
 */
#include "correlate_fixtures.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_straggler_found),
		cmocka_unit_test(test_straggler_clock_skew),
		cmocka_unit_test(test_no_straggler),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
