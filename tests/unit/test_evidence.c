/*
 * The evidence layer (dumps/evidence.c): incident directories made in a
 * temporary directory, read as fr-analyze reads them.
 */
/* For asprintf(). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "evidence.h"
#include "pytorch_data.h"

/* The directory of the test running (made by setup, removed by teardown). */
static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/fr-test-evidence.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char *cmd;

	(void)state;
	if (asprintf(&cmd, "rm -rf '%s'", dir) < 0)
		return -1;
	if (system(cmd) != 0) {
		free(cmd);
		return -1;
	}
	free(cmd);
	return 0;
}

/* dir/name, in a new string. */
static char *path_of(const char *name)
{
	char *p;

	assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

static void write_bytes(const char *name, const void *buf, size_t len)
{
	char *p = path_of(name);
	FILE *f = fopen(p, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(buf, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
	free(p);
}

static void write_text(const char *name, const char *text)
{
	write_bytes(name, text, strlen(text));
}

/*
 * A dump of `rank` of job "train" in a world of `world` ranks, nothing in
 * flight, that lists communicator "world" with `members` (a JSON array of
 * `size` global ranks), `rank` its rank `in_comm` there.
 */
static char *dump_text(uint32_t rank, uint32_t world, const char *members, uint32_t in_comm,
		       uint32_t size)
{
	char *text;

	assert_true(asprintf(&text,
		"{\"format\": \"flightrec-dump\", \"version\": \"1.4\", \"job\": \"train\", "
		"\"rank\": %u, \"world_size\": %u, \"host\": \"node\", \"pid\": 1, "
		"\"status\": \"dumped\", \"comm_lib_version\": \"Open MPI\", \"incident\": \"inc\", "
		"\"dump_reason\": \"test\", \"time_dumped_ns\": 1700000000000000000, "
		"\"dropped_entries\": 0, \"pg_config\": {\"world\": {\"name\": \"world\", "
		"\"desc\": \"MPI_COMM_WORLD\", \"ranks\": %s, \"rank\": %u, \"size\": %u}}, "
		"\"pg_status\": {\"world\": {\"last_enqueued_collective\": 0, "
		"\"last_started_collective\": 0, \"last_completed_collective\": 0}}, "
		"\"entries\": [], \"threads\": []}\n", rank, world, members, in_comm, size) > 0);
	return text;
}

/* Writes the dump of `rank` in a world of `world`, every rank a member,
 * as file `name`. */
static void write_dump(const char *name, uint32_t rank, uint32_t world)
{
	char members[256];
	size_t len = 0;
	char *text;

	len += (size_t)snprintf(members, sizeof(members), "[");
	for (uint32_t k = 0; k < world; k++)
		len += (size_t)snprintf(members + len, sizeof(members) - len, "%s%u", k ? ", " : "",
					k);
	snprintf(members + len, sizeof(members) - len, "]");
	text = dump_text(rank, world, members, rank, world);
	write_text(name, text);
	free(text);
}

/* Copies tests/data/<from> to the directory as `name`. */
static void copy_data(const char *from, const char *name)
{
	char *src, *dst, *cmd;

	assert_true(asprintf(&src, "%s/%s", pytorch_data_dir(), from) > 0);
	dst = path_of(name);
	assert_true(asprintf(&cmd, "cp '%s' '%s'", src, dst) > 0);
	assert_int_equal(system(cmd), 0);
	free(cmd);
	free(dst);
	free(src);
}

/* The trace of `rank` among the engine's input, or NULL. */
static const struct fr_trace *trace_of(const struct fr_evidence *ev, uint32_t rank)
{
	for (size_t i = 0; i < ev->ntraces; i++)
		if (ev->traces[i]->rank == rank)
			return ev->traces[i];
	return NULL;
}

/* The one warning about file `name` of the directory; fails unless there
 * is exactly one. */
static const struct fr_evidence_warning *warning_about(const struct fr_evidence *ev,
						       const char *name)
{
	const struct fr_evidence_warning *found = NULL;
	char *p = path_of(name);

	for (size_t i = 0; i < ev->nwarnings; i++) {
		if (!ev->warnings[i].file || strcmp(ev->warnings[i].file, p) != 0)
			continue;
		assert_null(found);
		found = &ev->warnings[i];
	}
	if (!found)
		fail_msg("no warning names %s", p);
	/* The line says the file too: a person reads it without the field. */
	assert_non_null(strstr(found->text, p));
	free(p);
	return found;
}

static void test_truncated_dump_left_out(void **state)
{
	struct fr_evidence ev = { 0 };
	const struct fr_evidence_warning *w;
	char *text = dump_text(2, 3, "[0, 1, 2]", 2, 3);

	(void)state;
	write_dump("rank-0.json", 0, 3);
	write_dump("rank-1.json", 1, 3);
	write_bytes("rank-2.json", text, strlen(text) / 2);
	free(text);
	assert_int_equal(fr_evidence_load_dir(&ev, dir), 0);
	/* The other ranks are still judged; the lost one counts as missing. */
	assert_int_equal(ev.ntraces, 2);
	assert_non_null(trace_of(&ev, 0));
	assert_non_null(trace_of(&ev, 1));
	assert_null(trace_of(&ev, 2));
	assert_int_equal(ev.world_size, 3);
	assert_int_equal(ev.nbad, 1);
	assert_int_equal(ev.nwarnings, 1);
	w = warning_about(&ev, "rank-2.json");
	assert_non_null(strstr(w->text, "leaving this file out"));
	assert_null(ev.error);
	fr_evidence_free(&ev);
}

static void test_every_dump_bad(void **state)
{
	struct fr_evidence ev = { 0 };

	(void)state;
	write_text("rank-0.json", "{\"format\": \"flightrec-dump\", \"version\": \"1.4\"");
	assert_int_equal(fr_evidence_load_dir(&ev, dir), -ENODATA);
	assert_non_null(strstr(ev.error, "no usable dump (every dump file was left out"));
	assert_int_equal(ev.nwarnings, 1);
	warning_about(&ev, "rank-0.json");
	assert_int_equal(ev.ntraces, 0);
	fr_evidence_free(&ev);
}

static void test_empty_directory(void **state)
{
	struct fr_evidence ev = { 0 };
	char *want;

	(void)state;
	assert_int_equal(fr_evidence_load_dir(&ev, dir), -ENODATA);
	assert_true(asprintf(&want, "%s: no usable dump (no rank-*.json or flightrec dump in it)",
			     dir) > 0);
	assert_string_equal(ev.error, want);
	assert_int_equal(ev.nwarnings, 0);
	assert_int_equal(ev.ntraces, 0);
	free(want);
	fr_evidence_free(&ev);
}

static void test_no_such_directory(void **state)
{
	struct fr_evidence ev = { 0 };
	char *gone = path_of("gone");

	(void)state;
	assert_int_equal(fr_evidence_load_dir(&ev, gone), -ENOENT);
	assert_non_null(strstr(ev.error, gone));
	assert_non_null(strstr(ev.error, strerror(ENOENT)));
	free(gone);
	fr_evidence_free(&ev);
}

/* The world size is the one most dumps state; the odd one is kept, with a
 * warning. */
static void test_world_size_majority(void **state)
{
	struct fr_evidence ev = { 0 };
	const struct fr_evidence_warning *w;
	char *odd = dump_text(2, 8, "[0, 1, 2, 3]", 2, 4);

	(void)state;
	write_dump("rank-0.json", 0, 4);
	write_dump("rank-1.json", 1, 4);
	write_text("rank-2.json", odd);
	free(odd);
	assert_int_equal(fr_evidence_load_dir(&ev, dir), 0);
	assert_int_equal(ev.world_size, 4);
	assert_int_equal(ev.ntraces, 3);
	assert_int_equal(ev.nwarnings, 1);
	w = warning_about(&ev, "rank-2.json");
	assert_non_null(strstr(w->text, "world_size 8 is not the job's 4"));
	fr_evidence_free(&ev);
}

/* On a tie the larger world wins; a dump of a rank outside the world, or
 * naming one, is left out. */
static void test_world_size_tie_and_outside(void **state)
{
	struct fr_evidence ev = { 0 };
	const struct fr_evidence_warning *w;
	char *six = path_of("rank-6.json");

	(void)state;
	write_dump("rank-0.json", 0, 2);
	write_dump("rank-1.json", 1, 2);
	write_dump("rank-5.json", 5, 8);
	write_dump("rank-6.json", 6, 8);
	assert_int_equal(fr_evidence_load_dir(&ev, dir), 0);
	assert_int_equal(ev.world_size, 8);
	assert_int_equal(ev.ntraces, 4);
	warning_about(&ev, "rank-0.json");
	fr_evidence_free(&ev);

	assert_int_equal(unlink(six), 0);
	assert_int_equal(fr_evidence_load_dir(&ev, dir), 0);
	assert_int_equal(ev.world_size, 2);
	assert_int_equal(ev.ntraces, 2);
	assert_null(trace_of(&ev, 5));
	w = warning_about(&ev, "rank-5.json");
	assert_non_null(strstr(w->text, "rank 5 is outside the world of 2 ranks; leaving this "
					"file out"));
	free(six);
	fr_evidence_free(&ev);
}

static void test_duplicate_rank(void **state)
{
	struct fr_evidence ev = { 0 };
	char *first = path_of("copy.json");
	char *second = path_of("rank-0.json");

	(void)state;
	write_dump("rank-0.json", 0, 2);
	write_dump("rank-1.json", 1, 2);
	write_dump("copy.json", 0, 2);
	assert_int_equal(fr_evidence_load_dir(&ev, dir), -ENOTUNIQ);
	/* Files are read in name order: copy.json is the first of rank 0. */
	assert_non_null(strstr(ev.error, second));
	assert_non_null(strstr(ev.error, "rank 0 is dumped twice"));
	assert_non_null(strstr(ev.error, first));
	free(first);
	free(second);
	fr_evidence_free(&ev);
}

/*
 * A central daemon's node file: a dump a line. A bad line (cut short) is
 * left out with a warning naming the file and line, blank lines are
 * passed over, and a rank's rank-<N>.json (its full dump, fetched after
 * its summary) is taken over its line.
 */
static void test_summaries_file(void **state)
{
	struct fr_evidence ev = { 0 };
	char *d0 = dump_text(0, 4, "[0, 1, 2, 3]", 0, 4);
	char *d1 = dump_text(1, 4, "[0, 1, 2, 3]", 1, 4);
	char *d2 = dump_text(2, 4, "[0, 1, 2, 3]", 2, 4);
	char *d3 = dump_text(3, 4, "[0, 1, 2, 3]", 3, 4);
	char *text, *full = path_of("rank-1.json");
	const struct fr_evidence_warning *w;

	(void)state;
	/* dump_text() ends each with a newline: one a line. Rank 2's line is
	 * cut short, as a full disk leaves it. */
	d2[strlen(d2) / 2] = '\0';
	assert_true(asprintf(&text, "%s\n%s%s\n%s", d0, d1, d2, d3) > 0);
	write_text("summaries-node-a.jsonl", text);
	write_dump("rank-1.json", 1, 4);
	assert_int_equal(fr_evidence_load_dir(&ev, dir), 0);
	assert_int_equal(ev.ntraces, 3);
	assert_non_null(trace_of(&ev, 0));
	assert_non_null(trace_of(&ev, 3));
	assert_null(trace_of(&ev, 2));
	assert_string_equal(fr_evidence_source(&ev, trace_of(&ev, 1)), full);
	assert_non_null(strstr(fr_evidence_source(&ev, trace_of(&ev, 3)), "summaries-node-a.jsonl:5"));
	assert_int_equal(ev.nbad, 1);
	w = warning_about(&ev, "summaries-node-a.jsonl");
	assert_non_null(w);
	assert_non_null(strstr(w->text, "summaries-node-a.jsonl:4"));
	assert_non_null(strstr(w->text, "leaving this line out"));
	fr_evidence_free(&ev);
	free(text);
	free(full);
	free(d0);
	free(d1);
	free(d2);
	free(d3);
}

/* Two lines of one rank are a mixed-up directory, as two files are. */
static void test_summaries_twice(void **state)
{
	struct fr_evidence ev = { 0 };
	char *d0 = dump_text(0, 2, "[0, 1]", 0, 2);
	char *text;

	(void)state;
	assert_true(asprintf(&text, "%s%s", d0, d0) > 0);
	write_text("summaries-n.jsonl", text);
	assert_int_equal(fr_evidence_load_dir(&ev, dir), -ENOTUNIQ);
	assert_non_null(strstr(ev.error, "rank 0 is dumped twice"));
	fr_evidence_free(&ev);
	free(text);
	free(d0);
}

/* Our dumps, PyTorch's JSON and PyTorch's pickles in one directory. */
static void test_mixed_formats(void **state)
{
	struct fr_evidence ev = { 0 };
	const struct fr_trace *t;

	(void)state;
	copy_data("pytorch/fr-rank0.json", "nccl_trace_rank_0");
	copy_data("pytorch/fr-rank0-p4.pickle", "nccl_trace_rank_1");
	write_dump("rank-3.json", 3, 4);
	assert_int_equal(fr_evidence_load_dir(&ev, dir), 0);
	assert_int_equal(ev.nwarnings, 0);
	assert_int_equal(ev.world_size, 4);
	assert_int_equal(ev.ntraces, 3);
	for (uint32_t r = 0; r < 4; r++) {
		t = trace_of(&ev, r);
		if (r == 2) {
			assert_null(t);
			continue;
		}
		assert_non_null(t);
		assert_int_equal(t->status, FR_RANK_DUMPED);
	}
	/* The PyTorch dumps' groups are communicators, their entries operations. */
	assert_non_null(fr_trace_comm(trace_of(&ev, 0), "0"));
	assert_true(trace_of(&ev, 0)->nops > 0);
	assert_string_equal(trace_of(&ev, 3)->job, "train");
	fr_evidence_free(&ev);
}

/* JSON that is not a dump is passed over in silence; a PyTorch dump whose
 * name does not say its rank is not. */
static void test_other_files(void **state)
{
	struct fr_evidence ev = { 0 };
	const struct fr_evidence_warning *w;
	char *subdir = path_of("rank-9.json");

	(void)state;
	write_dump("rank-0.json", 0, 2);
	write_dump("rank-1.json", 1, 2);
	write_text("notes.json", "{\"hello\": 1}\n");
	write_text("README", "not JSON\n");
	write_text("core.12", "\x7f" "ELF");
	assert_int_equal(mkdir(subdir, 0700), 0);
	assert_int_equal(fr_evidence_load_dir(&ev, dir), 0);
	assert_int_equal(ev.nwarnings, 0);
	assert_int_equal(ev.ntraces, 2);
	fr_evidence_free(&ev);

	copy_data("pytorch/fr-rank0.json", "trace.json");
	assert_int_equal(fr_evidence_load_dir(&ev, dir), 0);
	assert_int_equal(ev.ntraces, 2);
	w = warning_about(&ev, "trace.json");
	assert_non_null(strstr(w->text, "its name does not end with the rank"));
	free(subdir);
	fr_evidence_free(&ev);
}

/* A link in place of a dump is refused, not followed. */
static void test_symlink_refused(void **state)
{
	struct fr_evidence ev = { 0 };
	char *target = path_of("elsewhere");
	char *link = path_of("rank-1.json");

	(void)state;
	write_dump("rank-0.json", 0, 2);
	write_dump("elsewhere", 1, 2);
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(fr_evidence_load_dir(&ev, dir), 0);
	assert_int_equal(ev.ntraces, 1);
	assert_int_equal(ev.nbad, 1);
	warning_about(&ev, "rank-1.json");
	free(target);
	free(link);
	fr_evidence_free(&ev);
}

/* tests/data/analyze/two-comms: three dumps and a manifest whose live view
 * of rank 3 says it stopped answering. */
static void load_two_comms(struct fr_evidence *ev)
{
	copy_data("analyze/two-comms/rank-0.json", "rank-0.json");
	copy_data("analyze/two-comms/rank-1.json", "rank-1.json");
	copy_data("analyze/two-comms/rank-2.json", "rank-2.json");
	copy_data("analyze/two-comms/manifest.json", "manifest.json");
	assert_int_equal(fr_evidence_load_dir(ev, dir), 0);
}

static void test_manifest_fills_missing_rank(void **state)
{
	struct fr_evidence ev = { 0 };
	char *manifest = path_of("manifest.json");
	char *rank0 = path_of("rank-0.json");

	(void)state;
	load_two_comms(&ev);
	assert_int_equal(ev.nwarnings, 0);
	assert_int_equal(ev.world_size, 4);
	assert_int_equal(ev.ntraces, 4);
	assert_int_equal(trace_of(&ev, 0)->status, FR_RANK_DUMPED);
	assert_int_equal(trace_of(&ev, 3)->status, FR_RANK_UNRESPONSIVE);
	assert_string_equal(fr_evidence_source(&ev, trace_of(&ev, 3)), manifest);
	assert_string_equal(fr_evidence_source(&ev, trace_of(&ev, 0)), rank0);
	fr_evidence_free(&ev);

	/* A rank that answered but whose file is gone: the daemon's view. */
	assert_int_equal(unlink(rank0), 0);
	assert_int_equal(fr_evidence_load_dir(&ev, dir), 0);
	assert_int_equal(ev.ntraces, 4);
	assert_int_equal(trace_of(&ev, 0)->status, FR_RANK_LIVE);
	free(manifest);
	free(rank0);
	fr_evidence_free(&ev);
}

static void test_manifest_alone(void **state)
{
	struct fr_evidence ev = { 0 };

	(void)state;
	copy_data("analyze/two-comms/manifest.json", "manifest.json");
	assert_int_equal(fr_evidence_load_dir(&ev, dir), 0);
	assert_int_equal(ev.ntraces, 4);
	assert_int_equal(ev.nwarnings, 1);
	assert_non_null(strstr(ev.warnings[0].text, "no rank dumped; judging from the daemon's "
					       "live view in manifest.json only"));
	fr_evidence_free(&ev);
}

static void test_bad_manifest(void **state)
{
	struct fr_evidence ev = { 0 };
	const struct fr_evidence_warning *w;

	(void)state;
	write_dump("rank-0.json", 0, 2);
	write_text("manifest.json", "{\"format\": \"flightrec-manifest\", \"version\": \"9.0\"}\n");
	assert_int_equal(fr_evidence_load_dir(&ev, dir), 0);
	assert_true(ev.bad_manifest);
	assert_false(ev.have_manifest);
	assert_int_equal(ev.ntraces, 1);
	w = warning_about(&ev, "manifest.json");
	assert_non_null(strstr(w->text, "going on without the manifest"));
	fr_evidence_free(&ev);
}

static void test_keep_comm(void **state)
{
	struct fr_evidence ev = { 0 };

	(void)state;
	load_two_comms(&ev);
	assert_int_equal(fr_evidence_keep_comm(&ev, "w.split.b"), 0);
	for (size_t i = 0; i < ev.ntraces; i++) {
		const struct fr_trace *t = ev.traces[i];

		for (size_t j = 0; j < t->ncomms; j++)
			assert_string_equal(t->comms[j].id, "w.split.b");
		for (size_t j = 0; j < t->nops; j++)
			assert_string_equal(t->ops[j].comm, "w.split.b");
	}
	assert_true(trace_of(&ev, 2)->nops > 0);
	assert_int_equal(trace_of(&ev, 0)->nops, 0);
	fr_evidence_free(&ev);
}

/* A 2.x manifest's live views share the member lists of its table: the
 * lists of the communicators dropped are not theirs to free. */
static void test_keep_comm_manifest_2(void **state)
{
	struct fr_evidence ev = { 0 };

	(void)state;
	copy_data("manifests/two-comms-2.0.json", "manifest.json");
	assert_int_equal(fr_evidence_load_dir(&ev, dir), 0);
	assert_int_equal(ev.ntraces, 4);
	assert_int_equal(fr_evidence_keep_comm(&ev, "world"), 0);
	for (size_t i = 0; i < ev.ntraces; i++) {
		const struct fr_comm *c = fr_trace_comm(ev.traces[i], "world");

		assert_int_equal(ev.traces[i]->ncomms, 1);
		assert_non_null(c);
		assert_int_equal(c->size, 4);
		assert_int_equal(c->members[3], 3);
	}
	fr_evidence_free(&ev);
}

static void test_keep_unknown_comm(void **state)
{
	struct fr_evidence ev = { 0 };

	(void)state;
	load_two_comms(&ev);
	assert_int_equal(fr_evidence_keep_comm(&ev, "w.split"), -ENOENT);
	assert_non_null(strstr(ev.error, "no evidence names communicator \"w.split\"; known "
					 "communicators: w.split.a, w.split.b, world"));
	fr_evidence_free(&ev);
}

/* Ranks that list a communicator's members differently: a warning. */
static void test_member_conflict(void **state)
{
	struct fr_evidence ev = { 0 };
	char *text = dump_text(1, 3, "[0, 2, 1]", 2, 3);

	(void)state;
	write_dump("rank-0.json", 0, 3);
	write_text("rank-1.json", text);
	free(text);
	assert_int_equal(fr_evidence_load_dir(&ev, dir), 0);
	assert_int_equal(ev.nwarnings, 0);
	fr_evidence_check_members(&ev);
	assert_int_equal(ev.nwarnings, 1);
	assert_null(ev.warnings[0].file);
	assert_string_equal(ev.warnings[0].text, "communicator world: rank 1's evidence has "
			    "global rank 2 as member 1 where rank 0's has 1; using rank 0's");
	fr_evidence_free(&ev);
}

/* One id, two groups (PyTorch's split_group): told apart, with a warning. */
static void test_split_groups(void **state)
{
	struct fr_evidence ev = { 0 };
	char *a = dump_text(0, 4, "[0, 1]", 0, 2);
	char *b = dump_text(2, 4, "[2, 3]", 0, 2);

	(void)state;
	write_text("rank-0.json", a);
	write_text("rank-2.json", b);
	free(a);
	free(b);
	assert_int_equal(fr_evidence_load_dir(&ev, dir), 0);
	assert_int_equal(ev.nwarnings, 1);
	assert_string_equal(ev.warnings[0].text, "communicator world names different groups on "
			    "different ranks (PyTorch's split_group names each color's group "
			    "alike); told apart as world:0-1, world:2-3");
	assert_non_null(fr_trace_comm(trace_of(&ev, 0), "world:0-1"));
	assert_non_null(fr_trace_comm(trace_of(&ev, 2), "world:2-3"));
	fr_evidence_free(&ev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_truncated_dump_left_out, setup, teardown),
		cmocka_unit_test_setup_teardown(test_every_dump_bad, setup, teardown),
		cmocka_unit_test_setup_teardown(test_empty_directory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_such_directory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_world_size_majority, setup, teardown),
		cmocka_unit_test_setup_teardown(test_world_size_tie_and_outside, setup, teardown),
		cmocka_unit_test_setup_teardown(test_duplicate_rank, setup, teardown),
		cmocka_unit_test_setup_teardown(test_summaries_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_summaries_twice, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mixed_formats, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlink_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_manifest_fills_missing_rank, setup, teardown),
		cmocka_unit_test_setup_teardown(test_manifest_alone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_manifest, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keep_comm, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keep_comm_manifest_2, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keep_unknown_comm, setup, teardown),
		cmocka_unit_test_setup_teardown(test_member_conflict, setup, teardown),
		cmocka_unit_test_setup_teardown(test_split_groups, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
