/*
 * fr-analyze run over directories of dumps and manifests, as a person
 * would run it (the binary built next to this test, or $FR_ANALYZE; skipped
 * when there is none): which files it reads, which ranks it keeps, and the
 * same verdict whichever manifest format the incident was stored in.
 */
#include "dump_fixtures.h"

#include <sys/wait.h>

/*
 * The fr-analyze built with this test (BUILD/bin/fr-analyze, next to
 * BUILD/tests/), or $FR_ANALYZE; NULL when there is none.
 */
static char *analyze_path(void)
{
	const char *env = getenv("FR_ANALYZE");
	char exe[PATH_MAX];
	char *slash, *p;
	ssize_t n;

	if (env && *env)
		return strdup(env);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return NULL;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return NULL;
	*slash = '\0';
	assert_true(asprintf(&p, "%s/../bin/fr-analyze", exe) > 0);
	if (access(p, X_OK) != 0) {
		free(p);
		return NULL;
	}
	return p;
}

/*
 * Runs fr-analyze --json on `dir`. Returns its exit status; *out is its
 * verdict (NULL when stdout is not JSON) and *err its stderr (caller frees
 * both). Skips the test when fr-analyze is not built.
 */
static int run_analyze(const char *dir, json_t **out, char **err)
{
	char errpath[] = "/tmp/fr-test-analyze.XXXXXX";
	char *bin = analyze_path();
	char *cmd;
	FILE *p, *f;
	size_t len;
	int fd, status;

	if (!bin) {
		print_message("fr-analyze is not built next to this test; set FR_ANALYZE\n");
		skip();
	}
	fd = mkstemp(errpath);
	assert_true(fd >= 0);
	close(fd);
	assert_true(asprintf(&cmd, "'%s' --json '%s' 2>'%s'", bin, dir, errpath) > 0);
	p = popen(cmd, "r");
	assert_non_null(p);
	*out = json_loadf(p, 0, NULL);
	status = pclose(p);
	f = fopen(errpath, "r");
	assert_non_null(f);
	*err = calloc(1, 1 << 16);
	assert_non_null(*err);
	len = fread(*err, 1, (1 << 16) - 1, f);
	(*err)[len] = '\0';
	fclose(f);
	unlink(errpath);
	free(cmd);
	free(bin);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/*
 * Rank `rank` of a job of `world`: all_reduce #1 done on "world", and #2
 * entered unless `idle` (then it computes).
 */
static void job_rank(struct fr_trace *t, uint32_t rank, uint32_t world, bool idle)
{
	static uint32_t members[16];
	size_t ccap = 0, ocap = 0;
	struct fr_comm *c;

	memset(t, 0, sizeof(*t));
	assert_true(world <= 16);
	for (uint32_t i = 0; i < world; i++)
		members[i] = i;
	t->status = FR_RANK_DUMPED;
	COPY(t->job, "job-a");
	t->rank = rank;
	t->world_size = world;
	COPY(t->host, "host");
	t->pid = 100 + rank;
	t->time_ns = 1700000000000000000ull + 60000000000ull;
	c = add_comm(t, &ccap, "world", "MPI_COMM_WORLD", rank, world, members);
	c->last_entered = idle ? 1 : 2;
	c->last_completed = 1;
	add_op(t, &ocap, "world", FR_OP_ALL_REDUCE, FR_STATE_COMPLETED, 1);
	if (!idle)
		add_op(t, &ocap, "world", FR_OP_ALL_REDUCE, FR_STATE_ENTERED, 2);
}

static void write_dump(const char *dir, const char *name, const struct fr_trace *t)
{
	char *path = join(dir, name);
	char *text;
	size_t len;

	assert_int_equal(fr_dump_serialize(t, &text, &len), 0);
	assert_int_equal(fr_write_file_atomic(path, text, len), 0);
	free(text);
	free(path);
}

static void write_text(const char *dir, const char *name, const char *text)
{
	char *path = join(dir, name);

	assert_int_equal(fr_write_file_atomic(path, text, strlen(text)), 0);
	free(path);
}

/* Ranks 0-3 of a job of 4, rank 2 computing while the others wait. */
static void write_job_of_4(const char *dir, struct fr_trace *ranks)
{
	char name[32];

	for (uint32_t r = 0; r < 4; r++) {
		job_rank(&ranks[r], r, 4, r == 2);
		snprintf(name, sizeof(name), "rank-%u.json", r);
		write_dump(dir, name, &ranks[r]);
	}
}

/*
 * A stray dump of rank 6 from a job of 8 lies among the four dumps of a job
 * of 4. The world is what most dumps say; the stray one is left out, named,
 * and stretches nothing.
 */
static void test_analyze_drops_rank_outside_world(void **state)
{
	char *dir = make_temp_dir();
	struct fr_trace ranks[4], stray;
	json_t *v;
	char *err;

	(void)state;
	write_job_of_4(dir, ranks);
	job_rank(&stray, 6, 8, false);
	write_dump(dir, "rank-6.json", &stray);
	assert_int_equal(run_analyze(dir, &v, &err), 1);
	assert_contains(err, "rank-6.json: rank 6 is outside the world of 4 ranks");
	assert_non_null(v);
	assert_int_equal(json_integer_value(json_object_get(v, "world_size")), 4);
	assert_string_equal(json_string_value(json_object_get(v, "verdict")), "hang");
	assert_int_equal(json_integer_value(json_object_get(
				 json_array_get(json_object_get(v, "culprits"), 0), "rank")), 2);
	assert_int_equal(json_array_size(json_object_get(v, "culprits")), 1);
	json_decref(v);
	free(err);
	for (uint32_t r = 0; r < 4; r++)
		fr_trace_free(&ranks[r]);
	fr_trace_free(&stray);
	remove_dir(dir);
}

/*
 * With a manifest, its world size is the job's: a dump of rank 5 and a
 * manifest entry for rank 7 (each from a world of 8) are both left out.
 */
static void test_analyze_manifest_world(void **state)
{
	char *dir = make_temp_dir();
	char *path = join(dir, "manifest.json");
	struct fr_trace ranks[4], stray, live7;
	const struct fr_trace *live[5];
	json_t *doc, *v;
	char *err;

	(void)state;
	write_job_of_4(dir, ranks);
	job_rank(&stray, 5, 8, false);
	write_dump(dir, "rank-5.json", &stray);
	job_rank(&live7, 7, 8, false);
	live7.status = FR_RANK_LIVE;
	for (uint32_t r = 0; r < 4; r++)
		live[r] = &ranks[r];
	live[4] = &live7;
	doc = fr_manifest_to_json("job-a", "inc-1", "watchdog", 4, 1, 2, live, 5, NULL);
	assert_non_null(doc);
	assert_int_equal(json_dump_file(doc, path, 0), 0);
	json_decref(doc);

	assert_int_equal(run_analyze(dir, &v, &err), 1);
	assert_contains(err, "rank-5.json: rank 5 is outside the world of 4 ranks");
	assert_contains(err, "manifest.json: ranks[4]: rank 7 is outside the world of 4 ranks");
	assert_non_null(v);
	assert_int_equal(json_integer_value(json_object_get(v, "world_size")), 4);
	assert_int_equal(json_integer_value(json_object_get(
				 json_array_get(json_object_get(v, "culprits"), 0), "rank")), 2);
	json_decref(v);
	free(err);
	for (uint32_t r = 0; r < 4; r++)
		fr_trace_free(&ranks[r]);
	fr_trace_free(&stray);
	fr_trace_free(&live7);
	free(path);
	remove_dir(dir);
}

/*
 * Other *.json files: a dump under another name is read, a broken one is
 * reported, and what is not ours (another format, not JSON, a file of more
 * than a gigabyte) is passed over in silence.
 */
static void test_analyze_other_json_files(void **state)
{
	char *dir = make_temp_dir();
	char *huge = join(dir, "huge.json");
	struct fr_trace ranks[3];
	json_t *v;
	char *err;
	int fd;

	(void)state;
	for (uint32_t r = 0; r < 3; r++) {
		job_rank(&ranks[r], r, 3, true);
	}
	write_dump(dir, "rank-0.json", &ranks[0]);
	write_dump(dir, "rank-1.json", &ranks[1]);
	write_dump(dir, "copy-of-2.json", &ranks[2]);
	write_text(dir, "notes.json", "{\"format\": \"someone-else\", \"rank\": 9}");
	write_text(dir, "garbage.json", "this is not JSON");
	write_text(dir, "broken.json", "{\"format\": \"flightrec-dump\", \"version\": \"1.1\"}");
	fd = open(huge, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	/* Sparse: costs no disk. */
	assert_int_equal(ftruncate(fd, (1ll << 30) + 1), 0);
	close(fd);

	assert_int_equal(run_analyze(dir, &v, &err), 0);
	assert_contains(err, "broken.json: job: missing");
	assert_null(strstr(err, "notes.json"));
	assert_null(strstr(err, "garbage.json"));
	assert_null(strstr(err, "huge.json"));
	assert_non_null(v);
	assert_string_equal(json_string_value(json_object_get(v, "verdict")), "ok");
	assert_int_equal(json_integer_value(json_object_get(v, "world_size")), 3);
	assert_contains(json_string_value(json_object_get(v, "summary")), "(3 of 3 ranks");
	json_decref(v);
	free(err);
	for (uint32_t r = 0; r < 3; r++)
		fr_trace_free(&ranks[r]);
	free(huge);
	remove_dir(dir);
}

/*
 * NCCL dumps: each rank's "world" lists only its own entry, the others -1.
 * fr-analyze reads them without calling -1 a rank outside the world, merges
 * the lists, and names rank 2 with the full member list. A dump whose list
 * contradicts a lower rank's is reported on stderr, and the lower rank's
 * list is used.
 */
static void test_analyze_nccl_partial_lists(void **state)
{
	char *dir = make_temp_dir();
	struct fr_trace ranks[4];
	json_t *v, *op, *a;
	char *err;
	char name[32];

	(void)state;
	for (uint32_t r = 0; r < 4; r++) {
		job_rank(&ranks[r], r, 4, r == 2);
		for (uint32_t k = 0; k < 4; k++)
			if (k != r)
				ranks[r].comms[0].members[k] = FR_RANK_UNKNOWN;
		snprintf(name, sizeof(name), "rank-%u.json", r);
		write_dump(dir, name, &ranks[r]);
	}
	assert_int_equal(run_analyze(dir, &v, &err), 1);
	assert_string_equal(err, "");
	assert_non_null(v);
	assert_string_equal(json_string_value(json_object_get(v, "verdict")), "hang");
	assert_int_equal(json_array_size(json_object_get(v, "culprits")), 1);
	assert_int_equal(json_integer_value(json_object_get(
				 json_array_get(json_object_get(v, "culprits"), 0), "rank")), 2);
	op = json_object_get(v, "op");
	a = json_object_get(op, "comm_ranks");
	assert_int_equal(json_array_size(a), 4);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(json_integer_value(json_array_get(a, i)), i);
	assert_int_equal(json_integer_value(json_object_get(op, "comm_size")), 4);
	json_decref(v);
	free(err);

	/* Rank 3 now says member 0 is global rank 1; rank 0 said 0. */
	ranks[3].comms[0].members[0] = 1;
	write_dump(dir, "rank-3.json", &ranks[3]);
	assert_int_equal(run_analyze(dir, &v, &err), 1);
	assert_contains(err, "communicator world: rank 3's evidence has global rank 1 as "
			     "member 0 where rank 0's has 0; using rank 0's");
	assert_int_equal(json_integer_value(json_array_get(
				 json_object_get(json_object_get(v, "op"), "comm_ranks"), 0)), 0);
	assert_int_equal(json_integer_value(json_object_get(
				 json_array_get(json_object_get(v, "culprits"), 0), "rank")), 2);
	json_decref(v);
	free(err);
	for (uint32_t r = 0; r < 4; r++)
		fr_trace_free(&ranks[r]);
	remove_dir(dir);
}

static void copy_file(const char *from, const char *to)
{
	json_t *doc;

	/* Integers are 64-bit in jansson, so times survive the copy. */
	doc = json_load_file(from, 0, NULL);
	assert_non_null(doc);
	assert_int_equal(json_dump_file(doc, to, 0), 0);
	json_decref(doc);
}

/*
 * fr-analyze gives the same verdict on the stored incident with its
 * manifest in format 1.4 and in 2.0: rank 3, which did not dump, is known
 * from the manifest alike.
 */
static void test_analyze_manifest_versions_agree(void **state)
{
	static const char *const manifests[] = {
		"analyze/two-comms/manifest.json",
		"manifests/two-comms-2.0.json",
	};
	json_t *v[2];
	char *errs[2];
	int rc[2];

	(void)state;
	for (size_t k = 0; k < 2; k++) {
		char *dir = make_temp_dir();

		for (uint32_t r = 0; r < 3; r++) {
			char name[64], *from, *to;

			snprintf(name, sizeof(name), "analyze/two-comms/rank-%u.json", r);
			from = data_file(name);
			to = join(dir, strrchr(name, '/') + 1);
			copy_file(from, to);
			free(from);
			free(to);
		}
		{
			char *from = data_file(manifests[k]);
			char *to = join(dir, "manifest.json");

			copy_file(from, to);
			free(from);
			free(to);
		}
		rc[k] = run_analyze(dir, &v[k], &errs[k]);
		remove_dir(dir);
	}
	assert_int_equal(rc[0], rc[1]);
	assert_int_equal(rc[0], 1);
	assert_non_null(v[0]);
	assert_non_null(v[1]);
	assert_true(json_equal(v[0], v[1]));
	assert_string_equal(errs[0], errs[1]);
	assert_int_equal(json_integer_value(json_object_get(
				 json_array_get(json_object_get(v[1], "culprits"), 0), "rank")), 1);
	for (size_t k = 0; k < 2; k++) {
		json_decref(v[k]);
		free(errs[k]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_analyze_drops_rank_outside_world),
		cmocka_unit_test(test_analyze_manifest_world),
		cmocka_unit_test(test_analyze_other_json_files),
		cmocka_unit_test(test_analyze_nccl_partial_lists),
		cmocka_unit_test(test_analyze_manifest_versions_agree),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
