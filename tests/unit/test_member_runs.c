/*
 * Member lists written as runs (dumps/FORMAT.md, version 1.6): world as
 * one run, an NCCL rank's partial list as runs of unknown members, short
 * or shuffled lists kept as arrays (and their dumps as 1.4), every
 * spelling read back to the same members, and bad runs refused naming
 * the place and the text.
 */
#include "dump_fixtures.h"

/* The rich trace with one more communicator, of `size` members from `members`. */
static void trace_with(struct fr_trace *t, uint32_t world, uint32_t size, const uint32_t *members)
{
	size_t ccap;

	make_rich_trace(t);
	t->world_size = world;
	ccap = t->ncomms;
	add_comm(t, &ccap, "big", "big one", 0, size, members);
}

/* Serializes `t`, checks `needle` is in the text and the version, reads it back. */
static void round_trip(const struct fr_trace *t, const char *needle, const char *version)
{
	struct fr_trace back;
	char err[512], want[64];
	char *text;
	size_t len;

	assert_int_equal(fr_dump_serialize(t, &text, &len), 0);
	assert_contains(text, needle);
	snprintf(want, sizeof(want), "\"version\":\"%s\"", version);
	assert_contains(text, want);
	assert_int_equal(fr_dump_parse(text, len, "runs.json", &back, err, sizeof(err)), 0);
	assert_traces_equal(t, &back);
	fr_trace_free(&back);
	free(text);
}

static void test_world_is_one_run(void **state)
{
	uint32_t n = 65536, *m = malloc(n * sizeof(*m));
	struct fr_trace t;
	char *text;
	size_t len;

	(void)state;
	for (uint32_t i = 0; i < n; i++)
		m[i] = i;
	trace_with(&t, n, n, m);
	round_trip(&t, "\"ranks\":\"0-65535\"", "1.6");
	/* The whole dump is small: the array alone was 382 KiB. */
	assert_int_equal(fr_dump_serialize(&t, &text, &len), 0);
	assert_true(len < 8192);
	free(text);
	fr_trace_free(&t);
	free(m);
}

static void test_partial_and_mixed(void **state)
{
	uint32_t m[100];
	struct fr_trace t;

	(void)state;
	/* An NCCL rank knows its own entry only. */
	for (uint32_t i = 0; i < 100; i++)
		m[i] = FR_RANK_UNKNOWN;
	m[3] = 3;
	trace_with(&t, 100, 100, m);
	round_trip(&t, "\"ranks\":\"?*3,3,?*96\"", "1.6");
	fr_trace_free(&t);

	/* Runs, single ranks, one unknown, a run going down one at a time. */
	for (uint32_t i = 0; i < 100; i++)
		m[i] = i < 40 ? i + 10 : i < 50 ? 99 - i : i + 50;
	m[40] = FR_RANK_UNKNOWN;
	m[99] = 0;
	trace_with(&t, 200, 100, m);
	round_trip(&t, "\"ranks\":\"10-49,?,58,57,56,55,54,53,52,51,50,100-148,0\"", "1.6");
	fr_trace_free(&t);
}

static void test_short_lists_stay_arrays(void **state)
{
	uint32_t m[DUMP_RUNS_MIN_MEMBERS];
	struct fr_trace t;

	(void)state;
	/* The rich trace's own lists are short: a 1.4 dump as before. */
	make_rich_trace(&t);
	round_trip(&t, "\"ranks\":[0,1,2,3,4,5]", "1.4");
	fr_trace_free(&t);

	/* Under the size that pays, one run is still an array. */
	for (uint32_t i = 0; i < DUMP_RUNS_MIN_MEMBERS - 1; i++)
		m[i] = i;
	trace_with(&t, 1000, DUMP_RUNS_MIN_MEMBERS - 1, m);
	round_trip(&t, "\"ranks\":[0,1,2,", "1.4");
	fr_trace_free(&t);

	/* No two members in a row: the runs are no shorter than the array. */
	for (uint32_t i = 0; i < DUMP_RUNS_MIN_MEMBERS; i++)
		m[i] = (i * 37) % DUMP_RUNS_MIN_MEMBERS;
	trace_with(&t, 1000, DUMP_RUNS_MIN_MEMBERS, m);
	round_trip(&t, "\"ranks\":[0,37,10,", "1.4");
	fr_trace_free(&t);
}

/* The rich trace's dump with world's ranks replaced by `ranks` (a JSON text). */
static int read_with_ranks(const char *ranks, struct fr_trace *back, char *err, size_t errlen)
{
	struct fr_trace t;
	json_error_t jerr;
	json_t *root, *w;
	char *text, *edited;
	size_t len;
	int rc;

	make_rich_trace(&t);
	assert_int_equal(fr_dump_serialize(&t, &text, &len), 0);
	fr_trace_free(&t);
	root = json_loads(text, 0, &jerr);
	assert_non_null(root);
	free(text);
	w = json_object_get(json_object_get(root, "pg_config"), "c0");
	assert_non_null(w);
	assert_int_equal(json_object_set_new(w, "ranks", json_loads(ranks, JSON_DECODE_ANY, &jerr)), 0);
	edited = json_dumps(root, JSON_COMPACT);
	assert_non_null(edited);
	json_decref(root);
	rc = fr_dump_parse(edited, strlen(edited), "edit.json", back, err, errlen);
	free(edited);
	return rc;
}

static void test_every_spelling_reads_alike(void **state)
{
	static const char *const spellings[] = { "[0,1,2,3,4,5]", "\"0-5\"", "\"0,1,2-5\"",
						 "\"[0, 1, 2, 3, 4, 5]\"", "\"0-1,2-3,4,5\"" };
	static const uint32_t world[] = { 0, 1, 2, 3, 4, 5 };
	struct fr_trace back;
	char err[512];

	(void)state;
	for (size_t i = 0; i < sizeof(spellings) / sizeof(spellings[0]); i++) {
		assert_int_equal(read_with_ranks(spellings[i], &back, err, sizeof(err)), 0);
		assert_int_equal(fr_trace_comm(&back, "c0")->size, 6);
		assert_memory_equal(fr_trace_comm(&back, "c0")->members, world, sizeof(world));
		fr_trace_free(&back);
	}
	/* Unknown members read as the array's -1. */
	assert_int_equal(read_with_ranks("\"?*2,2,?,4-5\"", &back, err, sizeof(err)), 0);
	assert_int_equal(fr_trace_comm(&back, "c0")->members[0], FR_RANK_UNKNOWN);
	assert_int_equal(fr_trace_comm(&back, "c0")->members[1], FR_RANK_UNKNOWN);
	assert_int_equal(fr_trace_comm(&back, "c0")->members[2], 2);
	assert_int_equal(fr_trace_comm(&back, "c0")->members[3], FR_RANK_UNKNOWN);
	assert_int_equal(fr_trace_comm(&back, "c0")->members[5], 5);
	fr_trace_free(&back);
}

static void test_bad_runs_refused(void **state)
{
	static const struct {
		const char *ranks, *needle;
	} bad[] = {
		{ "\"5-0\"", "pg_config.c0.ranks: \"5-0\" is not a list of ranks" },
		{ "\"0-\"", "is not a list of ranks" },
		{ "\"0-5,\"", "is not a list of ranks" },
		{ "\"\"", "is not a list of ranks" },
		{ "\"0 - 5\"", "is not a list of ranks" },
		{ "\"?*0,0-5\"", "is not a list of ranks" },
		{ "\"?*x\"", "is not a list of ranks" },
		{ "\"0-4294967295\"", "is not a list of ranks" },
		{ "\"0-3,4-6\"", "lists 7 ranks but size is 6" },
		{ "\"0-4,9\"", "rank 9 is not below world_size 6" },
		/* Bounded before anything is allocated. */
		{ "\"?*16777216,0\"", "lists more than 16777216 members" },
		{ "\"0-4294967294\"", "lists more than 16777216 members" },
	};
	struct fr_trace back;
	char err[512];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(read_with_ranks(bad[i].ranks, &back, err, sizeof(err)), -EPROTO);
		assert_contains(err, bad[i].needle);
		fr_trace_free(&back);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_world_is_one_run),
		cmocka_unit_test(test_partial_and_mixed),
		cmocka_unit_test(test_short_lists_stay_arrays),
		cmocka_unit_test(test_every_spelling_reads_alike),
		cmocka_unit_test(test_bad_runs_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
