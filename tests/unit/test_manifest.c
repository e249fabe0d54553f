/*
 * Incident manifests (dumps/manifest.c): written and read back, bad ones
 * refused, and format 2, which lists each communicator's members once,
 * read alike with the older format.
 */
#include "dump_fixtures.h"

static void test_manifest_round_trip(void **state)
{
	static const uint32_t world[] = { 0, 1 };
	char *dir = make_temp_dir();
	char *path = join(dir, "manifest.json");
	struct fr_trace r0, r1;
	const struct fr_trace *ranks[2] = { &r0, &r1 };
	struct fr_manifest m;
	size_t ccap = 0, ocap = 0;
	json_t *doc, *verdict;
	char err[512];

	(void)state;
	make_rich_trace(&r0);
	r0.rank = 0;
	memset(&r1, 0, sizeof(r1));
	r1.status = FR_RANK_UNRESPONSIVE;
	COPY(r1.job, "job-rt");
	r1.rank = 1;
	r1.world_size = 6;
	COPY(r1.host, "host-b");
	r1.pid = 77;
	r1.time_ns = 1700000200000000000ull;
	add_comm(&r1, &ccap, "c0", "MPI_COMM_WORLD", 1, 2, world)->last_entered = 9;
	add_op(&r1, &ocap, "c0", FR_OP_ALL_REDUCE, FR_STATE_COMPLETED, 9);

	verdict = json_pack("{s:s, s:[i]}", "verdict", "hang", "culprits", 1);
	doc = fr_manifest_to_json("job-rt", "inc-77", "watchdog", 6, 1700000100000000000ull,
				  1700000300000000000ull, ranks, 2, verdict);
	assert_non_null(doc);
	assert_string_equal(json_string_value(json_object_get(doc, "format")),
			    "flightrec-manifest");
	assert_ptr_equal(json_object_get(doc, "verdict"), verdict);
	assert_null(json_object_get(json_array_get(json_object_get(doc, "ranks"), 0), "threads"));
	/* What the daemon adds per rank must not disturb a reader. */
	json_object_set_new(json_array_get(json_object_get(doc, "ranks"), 0), "dump",
			    json_string("rank-0.json"));
	json_object_set_new(json_array_get(json_object_get(doc, "ranks"), 1), "error",
			    json_string("no answer within 30 s"));
	assert_int_equal(json_dump_file(doc, path, JSON_INDENT(1)), 0);
	json_decref(doc);
	json_decref(verdict);

	assert_int_equal(fr_manifest_read_file(path, &m, err, sizeof(err)), 0);
	assert_string_equal(m.job, "job-rt");
	assert_string_equal(m.incident, "inc-77");
	assert_string_equal(m.reason, "watchdog");
	assert_int_equal(m.world_size, 6);
	assert_int_equal(m.opened_ns, 1700000100000000000ull);
	assert_int_equal(m.closed_ns, 1700000300000000000ull);
	assert_int_equal(m.nranks, 2);
	assert_int_equal(m.ranks[0].status, FR_RANK_DUMPED);
	assert_int_equal(m.ranks[1].status, FR_RANK_UNRESPONSIVE);
	assert_traces_equal_but_threads(&r0, &m.ranks[0]);
	assert_traces_equal_but_threads(&r1, &m.ranks[1]);
	assert_int_equal(m.ranks[0].nthreads, 0);
	fr_manifest_free(&m);
	assert_int_equal(m.nranks, 0);
	assert_null(m.ranks);

	/* A dump is not a manifest, and says so. */
	{
		char *good = data_path("good-rank-0.json");

		assert_int_equal(fr_manifest_read_file(good, &m, err, sizeof(err)), -EPROTO);
		assert_contains(err, "good-rank-0.json: not a flightrec manifest");
		free(good);
	}

	fr_trace_free(&r0);
	fr_trace_free(&r1);
	free(path);
	remove_dir(dir);
}

static void test_manifest_bad_rank(void **state)
{
	char *dir = make_temp_dir();
	char *path = join(dir, "manifest.json");
	struct fr_trace r0;
	const struct fr_trace *ranks[1] = { &r0 };
	struct fr_manifest m;
	json_t *doc;
	char err[512];

	(void)state;
	make_rich_trace(&r0);
	doc = fr_manifest_to_json("j", "i", "r", 6, 1, 2, ranks, 1, NULL);
	assert_true(json_is_null(json_object_get(doc, "verdict")));
	json_object_set_new(json_array_get(json_object_get(doc, "ranks"), 0), "version",
			    json_string("2.0"));
	assert_int_equal(json_dump_file(doc, path, 0), 0);
	json_decref(doc);

	memset(&m, 0x5a, sizeof(m));
	assert_int_equal(fr_manifest_read_file(path, &m, err, sizeof(err)), -EPROTONOSUPPORT);
	assert_contains(err, "manifest.json: ranks[0]: dump format version 2.0");
	assert_int_equal(m.nranks, 0);
	assert_null(m.ranks);

	fr_trace_free(&r0);
	free(path);
	remove_dir(dir);
}

/* A manifest of no ranks is refused, naming the file. */
static void test_manifest_world_zero(void **state)
{
	char *dir = make_temp_dir();
	char *path = join(dir, "manifest.json");
	struct fr_manifest m;
	json_t *doc;
	char err[512];

	(void)state;
	doc = fr_manifest_to_json("j", "i", "r", 0, 1, 2, NULL, 0, NULL);
	assert_non_null(doc);
	assert_int_equal(json_dump_file(doc, path, 0), 0);
	json_decref(doc);
	assert_int_equal(fr_manifest_read_file(path, &m, err, sizeof(err)), -EPROTO);
	assert_contains(err, "manifest.json: world_size: 0 is not a valid world size");
	assert_int_equal(m.nranks, 0);
	free(path);
	remove_dir(dir);
}

/* ------------------------------------------------------------------ */
/* Manifest format 2: each communicator's members once                 */

/* Reads `path` as JSON, lets `edit` change it, writes it to dir/manifest.json. */
static char *edited_manifest(const char *dir, const char *path, void (*change)(json_t *))
{
	char *out = join(dir, "manifest.json");
	json_t *doc = json_load_file(path, 0, NULL);

	assert_non_null(doc);
	change(doc);
	assert_int_equal(json_dump_file(doc, out, JSON_INDENT(1)), 0);
	json_decref(doc);
	return out;
}

static json_t *view_comm(json_t *doc, size_t rank, const char *comm)
{
	json_t *pc = json_object_get(json_array_get(json_object_get(doc, "ranks"), rank),
				     "pg_config");

	assert_non_null(json_object_get(pc, comm));
	return json_object_get(pc, comm);
}

/*
 * Three ranks of one world, as the daemon shares the list among them (the
 * same array), and a fourth whose view of "c0" differs: the list is
 * written once, the odd view keeps its own, and all read back as written.
 */
static void test_manifest_v2_round_trip(void **state)
{
	static const uint32_t world[] = { 0, 1, 2, 3 };
	static const uint32_t pair[] = { 2, 3 };
	char *dir = make_temp_dir();
	char *path = join(dir, "manifest.json");
	struct fr_trace r[4];
	const struct fr_trace *ranks[4] = { &r[0], &r[1], &r[2], &r[3] };
	uint32_t *shared;
	struct fr_manifest m;
	json_t *doc, *comms, *text;
	char err[512];

	(void)state;
	for (uint32_t i = 0; i < 4; i++) {
		size_t ccap = 0, ocap = 0;

		memset(&r[i], 0, sizeof(r[i]));
		r[i].status = i == 3 ? FR_RANK_UNRESPONSIVE : FR_RANK_DUMPED;
		COPY(r[i].job, "job-v2");
		r[i].rank = i;
		r[i].world_size = 4;
		COPY(r[i].host, "node");
		r[i].pid = 10 + i;
		r[i].time_ns = 1700000000000000000ull + i;
		add_comm(&r[i], &ccap, "c0", "MPI_COMM_WORLD", i, 4, world)->last_entered = 7;
		if (i >= 2)
			add_comm(&r[i], &ccap, "c0.split", "split of world", i - 2, 2, pair);
		add_op(&r[i], &ocap, "c0", FR_OP_ALL_REDUCE, FR_STATE_ENTERED, 7);
	}
	/* Ranks 0-2 share one list, as registry_manifest_view() makes them. */
	shared = r[0].comms[0].members;
	for (uint32_t i = 1; i < 3; i++) {
		free(r[i].comms[0].members);
		r[i].comms[0].members = shared;
	}
	/* Rank 3 saw "c0" under another description: its view is its own. */
	COPY(r[3].comms[0].desc, "world, as rank 3 saw it");

	doc = fr_manifest_to_json("job-v2", "inc-2", "timeout", 4, 1, 2, ranks, 4, NULL);
	assert_non_null(doc);
	assert_string_equal(json_string_value(json_object_get(doc, "version")), "2.0");
	comms = json_object_get(doc, "communicators");
	assert_int_equal(json_object_size(comms), 2);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(comms, "c0"), "size")), 4);
	assert_int_equal(json_array_size(json_object_get(json_object_get(comms, "c0"), "ranks")), 4);
	assert_string_equal(json_string_value(json_object_get(json_object_get(comms, "c0"), "desc")),
			    "MPI_COMM_WORLD");
	/* A view names the table's communicator and its rank in it, no more. */
	assert_int_equal(json_object_size(view_comm(doc, 1, "c0")), 2);
	assert_int_equal(json_integer_value(json_object_get(view_comm(doc, 1, "c0"), "rank")), 1);
	assert_null(json_object_get(view_comm(doc, 2, "c0.split"), "ranks"));
	assert_non_null(json_object_get(view_comm(doc, 3, "c0"), "ranks"));
	/* The list of the world is in the text once. */
	text = json_object_get(comms, "c0");
	assert_non_null(text);
	assert_int_equal(json_dump_file(doc, path, JSON_INDENT(2)), 0);
	json_decref(doc);

	assert_int_equal(fr_manifest_read_file(path, &m, err, sizeof(err)), 0);
	assert_string_equal(m.job, "job-v2");
	assert_int_equal(m.world_size, 4);
	assert_int_equal(m.nranks, 4);
	for (uint32_t i = 0; i < 4; i++)
		assert_traces_equal_but_threads(&r[i], &m.ranks[i]);
	/* The reader shares the table's lists among the views, as the writer did. */
	assert_ptr_equal(m.ranks[0].comms[0].members, m.ranks[2].comms[0].members);
	assert_ptr_not_equal(m.ranks[0].comms[0].members, m.ranks[3].comms[0].members);
	assert_int_equal(m.nmembers, 4 + 2);
	fr_manifest_free(&m);
	assert_null(m.ranks);
	assert_null(m.members);

	for (uint32_t i = 1; i < 3; i++)
		r[i].comms[0].members = NULL;
	for (uint32_t i = 0; i < 4; i++)
		fr_trace_free(&r[i]);
	free(path);
	remove_dir(dir);
}

/*
 * The stored incident's manifest in format 1.4 and the same in 2.0 read as
 * the same views.
 */
static void test_manifest_old_and_new_read_alike(void **state)
{
	char *old_path = data_file("analyze/two-comms/manifest.json");
	char *new_path = data_file("manifests/two-comms-2.0.json");
	struct fr_manifest a, b;
	char err[512];

	(void)state;
	assert_int_equal(fr_manifest_read_file(old_path, &a, err, sizeof(err)), 0);
	assert_null(a.members);
	assert_int_equal(fr_manifest_read_file(new_path, &b, err, sizeof(err)), 0);
	assert_non_null(b.members);
	assert_string_equal(a.job, b.job);
	assert_string_equal(a.incident, b.incident);
	assert_string_equal(a.reason, b.reason);
	assert_int_equal(a.world_size, b.world_size);
	assert_int_equal(a.opened_ns, b.opened_ns);
	assert_int_equal(a.closed_ns, b.closed_ns);
	assert_int_equal(a.nranks, 4);
	assert_int_equal(b.nranks, 4);
	for (size_t i = 0; i < a.nranks; i++)
		assert_traces_equal_but_threads(&a.ranks[i], &b.ranks[i]);
	assert_int_equal(b.ranks[3].status, FR_RANK_UNRESPONSIVE);
	assert_int_equal(b.ranks[3].comms[1].rank, 1);
	assert_int_equal(b.ranks[3].comms[1].members[0], 2);
	fr_manifest_free(&a);
	fr_manifest_free(&b);
	free(old_path);
	free(new_path);
}

static void edit_drop_split_b(json_t *doc)
{
	json_object_del(json_object_get(doc, "communicators"), "w.split.b");
}

static void edit_rank_past_size(json_t *doc)
{
	json_object_set_new(view_comm(doc, 1, "world"), "rank", json_integer(4));
}

static void edit_member_past_world(json_t *doc)
{
	json_t *c = json_object_get(json_object_get(doc, "communicators"), "world");

	json_array_set_new(json_object_get(c, "ranks"), 3, json_integer(9));
}

static void edit_table_size(json_t *doc)
{
	json_t *c = json_object_get(json_object_get(doc, "communicators"), "w.split.a");

	json_object_set_new(c, "size", json_integer(3));
}

static void edit_no_table(json_t *doc)
{
	json_object_del(doc, "communicators");
}

static void edit_table_not_array(json_t *doc)
{
	json_t *c = json_object_get(json_object_get(doc, "communicators"), "world");

	json_object_set_new(c, "ranks", json_string("[0, 1, 2, 3]"));
}

static void edit_version_3(json_t *doc)
{
	json_object_set_new(doc, "version", json_string("3.0"));
}

/* A 1.4 manifest has no table: a view without members is refused as before. */
static void edit_old_ref(json_t *doc)
{
	json_object_set_new(doc, "version", json_string("1.4"));
}

/*
 * A 2.0 manifest whose views do not agree with its table is refused, and
 * the message names the field.
 */
static void test_manifest_v2_refused(void **state)
{
	static const struct {
		void (*edit)(json_t *);
		int rc;
		const char *msg;
	} cases[] = {
		{ edit_drop_split_b, -EPROTO,
		  "manifest.json: ranks[2].pg_config.w.split.b: no communicator \"w.split.b\" "
		  "in communicators" },
		{ edit_rank_past_size, -EPROTO,
		  "manifest.json: ranks[1].pg_config.world.rank: 4 is not below size 4" },
		{ edit_member_past_world, -EPROTO,
		  "manifest.json: communicators.world.ranks[3]: rank 9 is not below world_size 4" },
		{ edit_table_size, -EPROTO,
		  "manifest.json: communicators.w.split.a.ranks: lists 2 ranks but size is 3" },
		{ edit_no_table, -EPROTO,
		  "manifest.json: communicators: missing (expected an object)" },
		{ edit_table_not_array, -EPROTO,
		  "manifest.json: communicators.world.ranks: expected an array, got a string" },
		{ edit_version_3, -EPROTONOSUPPORT,
		  "manifest.json: manifest format version 3.0 is not supported (this build "
		  "reads 1.x to 2.x)" },
		{ edit_old_ref, -EPROTO,
		  "manifest.json: ranks[0].pg_config.world.ranks: missing (expected an array)" },
	};
	char *src = data_file("manifests/two-comms-2.0.json");
	char err[512];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *dir = make_temp_dir();
		char *path = edited_manifest(dir, src, cases[i].edit);
		struct fr_manifest m;

		memset(&m, 0x5a, sizeof(m));
		assert_int_equal(fr_manifest_read_file(path, &m, err, sizeof(err)), cases[i].rc);
		assert_contains(err, cases[i].msg);
		assert_int_equal(m.nranks, 0);
		assert_null(m.ranks);
		assert_null(m.members);
		free(path);
		remove_dir(dir);
	}
	free(src);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_manifest_round_trip),
		cmocka_unit_test(test_manifest_bad_rank),
		cmocka_unit_test(test_manifest_world_zero),
		cmocka_unit_test(test_manifest_v2_round_trip),
		cmocka_unit_test(test_manifest_old_and_new_read_alike),
		cmocka_unit_test(test_manifest_v2_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
