/*
 * PyTorch Flight Recorder dumps read as evidence (dumps/pytorch.c): the
 * same trace from the pickle (protocols 2, 4, 5) and the JSON form of one
 * dump, the rank from the file name, and clear refusals.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dump.h"
#include "pytorch.h"
#include "pytorch_data.h"

#define DUMP_TIME 1800000000000000000ull

static void read_trace(const char *name, uint32_t rank, struct fr_trace *t)
{
	char err[512] = "";
	size_t len;
	unsigned char *buf = read_data(name, &len);
	int rc = fr_pytorch_parse(buf, len, name, rank, DUMP_TIME, t, err, sizeof(err));

	if (rc)
		fail_msg("%s: rc %d: %s", name, rc, err);
	free(buf);
}

static void test_rank_from_name(void **state)
{
	uint32_t r = 99;

	(void)state;
	assert_true(fr_pytorch_rank_from_name("/x/nccl_trace_rank_12", &r));
	assert_int_equal(r, 12);
	assert_true(fr_pytorch_rank_from_name("trace_rank_0.json", &r));
	assert_int_equal(r, 0);
	assert_true(fr_pytorch_rank_from_name("dump7.pkl", &r));
	assert_int_equal(r, 7);
	assert_false(fr_pytorch_rank_from_name("/x/notes.txt", &r));
	assert_false(fr_pytorch_rank_from_name("rank_12345678901", &r));
}

/* The latest time an operation of `t` names. */
static uint64_t latest_time(const struct fr_trace *t)
{
	uint64_t latest = 0;

	for (size_t i = 0; i < t->nops; i++) {
		uint64_t ts[3] = { t->ops[i].t_entered_ns, t->ops[i].t_started_ns,
				   t->ops[i].t_completed_ns };

		for (int k = 0; k < 3; k++)
			latest = ts[k] > latest ? ts[k] : latest;
	}
	return latest;
}

/* What the test dump holds (tests/data/pytorch/make.py): rank 0 of 4,
 * process groups "0" (all four, ranks as a string) and "1" (ranks 0 and 1,
 * a list), seven completed operations, then all_reduce #8 scheduled and #9
 * started, with Python frames. */
static void check_rank0(const struct fr_trace *t)
{
	const struct fr_comm *c0 = fr_trace_comm(t, "0"), *c1 = fr_trace_comm(t, "1");
	const struct fr_op *send = &t->ops[5], *last = &t->ops[8];

	assert_int_equal(t->rank, 0);
	assert_int_equal(t->world_size, 4);
	assert_int_equal(t->status, FR_RANK_DUMPED);
	/* The file is "newer" than the dump can be: its time is bounded by the
	 * latest time in it plus the timeout (PyTorch dumps at a timeout). */
	assert_int_equal(t->time_ns, latest_time(t) + 600000ull * 1000000ull);
	assert_non_null(c0);
	assert_non_null(c1);
	assert_string_equal(c0->desc, "default_pg");
	assert_int_equal(c0->size, 4);
	assert_int_equal(c0->members[3], 3);
	assert_int_equal(c1->size, 2);
	assert_int_equal(t->nops, 9);
	assert_string_equal(send->comm, "1");
	assert_int_equal(send->type, FR_OP_SEND);
	assert_true(send->is_p2p);
	assert_int_equal(send->seq, 6);
	assert_int_equal(send->peer_in_comm, 1);
	assert_int_equal(t->ops[7].state, FR_STATE_ENTERED);
	assert_true(t->ops[7].gpu && !t->ops[7].started);
	assert_int_equal(last->type, FR_OP_ALL_REDUCE);
	assert_int_equal(last->seq, 9);
	assert_string_equal(last->comm, "0");
	assert_true(last->gpu && last->started);
	assert_int_equal(last->count, 4 * 65536);
	/* The rank's stack: the Python frames of its latest operation. */
	assert_int_equal(t->nthreads, 1);
	assert_string_equal(t->threads[0].name, "pt_main_thread");
	assert_true(t->threads[0].nframes >= 4);
	assert_string_equal(t->threads[0].frames[0].name, "all_reduce (distributed_c10d.py:2806)");
}

static void test_pickles_and_json_agree(void **state)
{
	static const char *const files[] = { "fr-rank0-p2.pickle", "fr-rank0-p4.pickle",
					     "fr-rank0-p5.pickle", "fr-rank0.json" };

	(void)state;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		struct fr_trace t;

		read_trace(files[i], 0, &t);
		check_rank0(&t);
		fr_trace_free(&t);
	}
}

/*
 * One dump as each schema version writes it (tests/data/pytorch/make.py,
 * versioned()): the library version under three names or none, pg_status
 * keyed by pg_id with counts as numbers or strings, null or 0 for a time
 * not known, thread fields from 2.8, no frames in JSON, group names apart
 * from pg_ids, ranks without spaces, no "entries" at all. Every one reads
 * as the same operations and the same progress.
 */
static void test_versions(void **state)
{
	static const struct {
		const char *file;
		const char *lib;
		const char *group[2];	/* the default group's name, the pipeline's */
		bool frames;
		bool empty;
	} cases[] = {
		{ "v2.3.pickle", "", { "0", "1" }, true, false },
		{ "v2.4.pickle", "", { "0", "1" }, true, false },
		{ "v2.4.json", "", { "0", "1" }, false, false },
		{ "v2.5.pickle", "", { "0", "1" }, true, false },
		{ "v2.6.pickle", "2.21.5", { "0", "1" }, true, false },
		{ "v2.7.pickle", "2.21.5", { "0", "1" }, true, false },
		{ "v2.7.json", "2.21.5", { "0", "1" }, false, false },
		{ "v2.8.pickle", "2.21.5", { "0", "1" }, true, false },
		{ "v2.9.pickle", "2.21.5", { "0", "1" }, true, false },
		{ "v2.10.pickle", "2.21.5", { "0", "1" }, true, false },
		{ "v2.10.json", "2.21.5", { "0", "1" }, false, false },
		{ "v2.10-split.json", "2.21.5", { "group_name_0", "group_name_1" }, false, false },
		{ "v2.10-empty.json", "2.21.5", { "0", "1" }, false, true },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char path[64];
		const struct fr_comm *c0, *c1;
		struct fr_trace t;

		snprintf(path, sizeof(path), "versions/%s", cases[i].file);
		read_trace(path, 0, &t);
		c0 = fr_trace_comm(&t, cases[i].group[0]);
		c1 = fr_trace_comm(&t, cases[i].group[1]);
		if (!c0 || !c1)
			fail_msg("%s: process groups not read", path);
		assert_string_equal(t.comm_lib, cases[i].lib);
		assert_int_equal(t.world_size, 4);
		assert_int_equal(c0->size, 4);
		assert_int_equal(c0->members[3], 3);
		assert_int_equal(c1->size, 2);
		/* pg_status, keyed by pg_id, and the entries agree on group "0";
		 * only pg_status knows of the pipeline's three collectives. */
		if (c0->last_entered != 9 || c0->last_completed != 7 || c1->last_entered != 3 ||
		    c1->last_completed != 3)
			fail_msg("%s: progress %" PRIu64 "/%" PRIu64 ", %" PRIu64 "/%" PRIu64, path,
				 c0->last_entered, c0->last_completed, c1->last_entered,
				 c1->last_completed);
		/* pg_id 2's status, which no entry ties to a group, is not
		 * group "2"'s where groups are named apart from their pg_ids. */
		if (fr_trace_comm(&t, "2"))
			assert_int_equal(fr_trace_comm(&t, "2")->last_entered, 0);
		if (cases[i].empty) {
			assert_int_equal(t.nops, 0);
			fr_trace_free(&t);
			continue;
		}
		assert_int_equal(t.nops, 9);
		assert_int_equal(t.time_ns, latest_time(&t) + 600000ull * 1000000ull);
		assert_int_equal(t.ops[1].type, FR_OP_ALL_GATHER);
		assert_int_equal(t.ops[1].count, 256);
		assert_int_equal(t.ops[1].size_ratio, 4);
		assert_int_equal(t.ops[2].type, FR_OP_REDUCE_SCATTER);
		assert_int_equal(t.ops[2].count, 1024);
		assert_int_equal(t.ops[2].size_ratio, 4);
		assert_int_equal(t.ops[5].type, FR_OP_SEND);
		assert_string_equal(t.ops[5].comm, cases[i].group[1]);
		assert_int_equal(t.ops[5].peer_in_comm, 1);
		/* A time not known, null or 0, is none. */
		assert_int_equal(t.ops[7].state, FR_STATE_ENTERED);
		assert_true(t.ops[7].gpu && !t.ops[7].started);
		assert_int_equal(t.ops[7].t_completed_ns, 0);
		assert_true(t.ops[8].gpu && t.ops[8].started);
		assert_int_equal(t.ops[8].t_completed_ns, 0);
		assert_int_equal(t.nthreads, cases[i].frames ? 1 : 0);
		fr_trace_free(&t);
	}
}

/* A rank dumped before its first collective: a dump of no operations,
 * its process groups known. (Its reader once leaked the room it had made
 * for the entries that never came.) */
static void test_no_entries(void **state)
{
	struct fr_trace t;

	(void)state;
	read_trace("fr-empty.pickle", 2, &t);
	assert_int_equal(t.rank, 2);
	assert_int_equal(t.world_size, 4);
	assert_int_equal(t.nops, 0);
	assert_int_equal(t.status, FR_RANK_DUMPED);
	assert_non_null(fr_trace_comm(&t, "1"));
	fr_trace_free(&t);
}

/*
 * A dump whose entries name no timeout, in a file copied years later: its
 * time is bounded by PyTorch's default timeout (10 minutes) after its
 * latest time, not taken from the copy, or every wait would read as years.
 */
static void test_time_without_timeouts(void **state)
{
	static const char text[] =
		"{\"version\": \"2.4\", \"pg_config\": {\"0\": {\"name\": \"0\", \"desc\": \"d\","
		" \"ranks\": \"[0, 1]\"}}, \"entries\": [{\"record_id\": 0, \"pg_id\": 0,"
		" \"process_group\": [\"0\", \"d\"], \"collective_seq_id\": 1, \"p2p_seq_id\": 0,"
		" \"op_id\": 1, \"profiling_name\": \"nccl:all_reduce\","
		" \"time_created_ns\": 1700000000000000000, \"input_sizes\": [[4]],"
		" \"input_dtypes\": [\"Float\"], \"output_sizes\": [[4]],"
		" \"output_dtypes\": [\"Float\"], \"state\": \"started\","
		" \"time_discovered_started_ns\": 1700000000000001000,"
		" \"time_discovered_completed_ns\": 0, \"retired\": false, \"is_p2p\": false}]}";
	char err[512] = "";
	struct fr_trace t;

	(void)state;
	if (fr_pytorch_parse(text, strlen(text), "old", 1, DUMP_TIME, &t, err, sizeof(err)))
		fail_msg("%s", err);
	assert_int_equal(t.nops, 1);
	assert_int_equal(t.time_ns, 1700000000000001000ull + 600000ull * 1000000ull);
	fr_trace_free(&t);
}

/*
 * More process groups than the scan keeps the pg_ids of (64): every one
 * still gets its progress from its own entries, and pg_status keys that
 * it cannot tie to a group are left out.
 */
static void test_many_groups(void **state)
{
	enum { GROUPS = 70 };
	size_t cap = 64 * 1024, len = 0;
	char *text = malloc(cap), err[512] = "";
	struct fr_trace t;

	(void)state;
	assert_non_null(text);
#define PUT(...) (len += (size_t)snprintf(text + len, cap - len, __VA_ARGS__))
	PUT("{\"version\": \"2.10\", \"pg_config\": {");
	for (int g = 0; g < GROUPS; g++)
		PUT("%s\"g%d\": {\"name\": \"g%d\", \"desc\": \"d\", \"ranks\": \"[0, 1]\"}",
		    g ? ", " : "", g, g);
	PUT("}, \"pg_status\": {");
	for (int g = 0; g < GROUPS; g++)
		PUT("%s\"%d\": {\"last_enqueued_collective\": %d, "
		    "\"last_completed_collective\": %d}", g ? ", " : "", g, g + 100, g + 100);
	PUT("}, \"entries\": [");
	for (int g = 0; g < GROUPS; g++)
		PUT("%s{\"record_id\": %d, \"pg_id\": %d, \"process_group\": [\"g%d\", \"d\"], "
		    "\"collective_seq_id\": %d, \"p2p_seq_id\": 0, \"op_id\": 1, "
		    "\"profiling_name\": \"nccl:all_reduce\", \"time_created_ns\": 1700000000000000000, "
		    "\"input_sizes\": [[4]], \"input_dtypes\": [\"Float\"], \"state\": \"completed\", "
		    "\"time_discovered_started_ns\": 0, \"time_discovered_completed_ns\": 0, "
		    "\"is_p2p\": false, \"timeout_ms\": 1000}",
		    g ? ", " : "", g, g, g, g + 1);
	PUT("]}");
#undef PUT
	assert_true(len < cap);
	if (fr_pytorch_parse(text, len, "many", 0, DUMP_TIME, &t, err, sizeof(err)))
		fail_msg("%s", err);
	assert_int_equal(t.ncomms, GROUPS);
	assert_int_equal(fr_trace_comm(&t, "g0")->last_entered, 100);
	assert_int_equal(fr_trace_comm(&t, "g63")->last_entered, 163);
	assert_int_equal(fr_trace_comm(&t, "g69")->last_entered, 70);
	assert_int_equal(fr_trace_comm(&t, "g69")->last_completed, 70);
	fr_trace_free(&t);
	free(text);
}

static int parse_text(const char *text, char *err, size_t errlen)
{
	struct fr_trace t;
	int rc = fr_pytorch_parse(text, strlen(text), "x", 0, DUMP_TIME, &t, err, errlen);

	if (rc == 0)
		fr_trace_free(&t);
	return rc;
}

static void test_refusals(void **state)
{
	char err[512];
	unsigned char *buf;
	size_t len;
	struct fr_trace t;
	int rc;

	(void)state;
	/* Not a PyTorch dump: passed over, no error. */
	assert_int_equal(parse_text("{\"hello\": 1}", err, sizeof(err)), 1);
	assert_int_equal(parse_text("not json", err, sizeof(err)), 1);
	/* A major version this build does not know. */
	rc = parse_text("{\"version\": \"3.0\", \"pg_config\": {}, \"entries\": []}", err,
			sizeof(err));
	assert_int_equal(rc, -EPROTO);
	assert_non_null(strstr(err, "version \"3.0\" is not supported"));
	/* A bad entry is named. */
	rc = parse_text("{\"version\": \"2.10\", \"pg_config\": {\"0\": {\"name\": \"0\","
			" \"desc\": \"d\", \"ranks\": \"[0, 1]\"}}, \"pg_status\": {},"
			" \"entries\": [{\"record_id\": \"zero\"}]}",
			err, sizeof(err));
	assert_int_equal(rc, -EPROTO);
	assert_non_null(strstr(err, "entries[0].record_id"));
	/* A truncated pickle: the offset where it ends. */
	buf = read_data("fr-rank0-p4.pickle", &len);
	rc = fr_pytorch_parse(buf, len / 2, "half", 0, DUMP_TIME, &t, err, sizeof(err));
	assert_int_equal(rc, -EPROTO);
	assert_non_null(strstr(err, "half: offset"));
	assert_non_null(strstr(err, "truncated"));
	free(buf);
	/* A pickle that would build an object (GLOBAL os.system) is refused,
	 * never run. */
	rc = fr_pytorch_parse("\x80\x04" "cos\nsystem\n.", 14, "evil", 0, DUMP_TIME, &t, err,
			      sizeof(err));
	assert_int_equal(rc, -EPROTO);
	assert_non_null(strstr(err, "evil: offset 2: opcode 0x63 (GLOBAL) is not allowed"));
}

/*
 * A pickle can list one entry a million times through its memo, two bytes
 * each; each would become an operation of 192 bytes. Such a file is
 * refused with what it is, not read into gigabytes.
 */
static void test_repeated_entries_refused(void **state)
{
	static const char head[] =
		"\x80\x02}(X\x07\x00\x00\x00version" "X\x03\x00\x00\x00" "2.4"
		"X\x09\x00\x00\x00pg_config}X\x09\x00\x00\x00pg_status}"
		"X\x07\x00\x00\x00" "entries](}(X\x09\x00\x00\x00record_idK\x01u" "q\x00";
	static const char tail[] = "eu.";
	size_t n = 100000, len = sizeof(head) - 1 + 2 * n + sizeof(tail) - 1;
	char *buf = malloc(len);
	char err[512];
	struct fr_trace t;
	size_t at = sizeof(head) - 1;

	(void)state;
	assert_non_null(buf);
	memcpy(buf, head, sizeof(head) - 1);
	for (size_t i = 0; i < n; i++) {
		buf[at++] = 'h';
		buf[at++] = '\x00';
	}
	memcpy(buf + at, tail, sizeof(tail) - 1);
	assert_int_equal(fr_pytorch_parse(buf, len, "memo", 0, DUMP_TIME, &t, err, sizeof(err)),
			 -EPROTO);
	if (!strstr(err, "memo: 100001 entries in"))
		fail_msg("%s", err);
	assert_non_null(strstr(err, "repeated through the pickle's memo"));
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rank_from_name),
		cmocka_unit_test(test_pickles_and_json_agree),
		cmocka_unit_test(test_no_entries),
		cmocka_unit_test(test_versions),
		cmocka_unit_test(test_time_without_timeouts),
		cmocka_unit_test(test_many_groups),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_repeated_entries_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
