/*
 * Dumps written and read back (dumps/dump_write.c, dump_read.c) and the
 * trace model (dumps/trace.c): round trips, what other tools read, bad
 * files refused with a message, the fast reader of our own entries against
 * the general one, and files that are no regular dumps or are too big.
 */
#include "dump_fixtures.h"

static void test_status_names(void **state)
{
	(void)state;
	assert_string_equal(fr_rank_status_name(FR_RANK_UNRESPONSIVE), "unresponsive");
	assert_string_equal(fr_rank_status_name(FR_RANK__COUNT), "unknown");
	for (unsigned s = 0; s < FR_RANK__COUNT; s++)
		assert_int_equal(fr_rank_status_from_name(fr_rank_status_name(s)), s);
	assert_int_equal(fr_rank_status_from_name("zombie"), -1);
}

static void test_trace_growth(void **state)
{
	struct fr_trace t = { 0 };
	size_t ocap = 0, ccap = 0;

	(void)state;
	for (unsigned i = 0; i < 1000; i++) {
		struct fr_op *op = fr_trace_add_op(&t, &ocap);

		assert_non_null(op);
		assert_int_equal(op->record_id, 0);
		assert_int_equal(op->t_completed_ns, 0);
		op->record_id = i;
	}
	assert_int_equal(t.nops, 1000);
	assert_true(ocap >= 1000);
	for (unsigned i = 0; i < 1000; i++)
		assert_int_equal(t.ops[i].record_id, i);

	for (unsigned i = 0; i < 40; i++) {
		struct fr_comm *c = fr_trace_add_comm(&t, &ccap);

		assert_non_null(c);
		assert_null(c->members);
		snprintf(c->id, sizeof(c->id), "comm%u", i);
	}
	assert_int_equal(t.ncomms, 40);
	assert_string_equal(fr_trace_comm(&t, "comm33")->id, "comm33");
	assert_ptr_equal(fr_trace_comm(&t, "comm33"), &t.comms[33]);
	assert_null(fr_trace_comm(&t, "comm40"));

	fr_trace_free(&t);
	assert_zeroed(&t);
}

static void test_round_trip(void **state)
{
	struct fr_trace t, back;
	char err[512];
	char *text, *exact;
	size_t len;

	(void)state;
	make_rich_trace(&t);
	assert_int_equal(fr_dump_serialize(&t, &text, &len), 0);
	assert_int_equal(strlen(text), len);
	assert_int_equal(text[len - 1], '\n');

	/* The parser must stay within len: no terminator after the bytes. */
	exact = malloc(len);
	assert_non_null(exact);
	memcpy(exact, text, len);
	assert_int_equal(fr_dump_parse(exact, len, "rt.json", &back, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	assert_traces_equal(&t, &back);

	free(exact);
	free(text);
	fr_trace_free(&back);
	fr_trace_free(&t);
}

/* A crash (format 1.7) reads back as written; a dump without one stays 1.4. */
static void test_round_trip_crash(void **state)
{
	struct fr_trace t, back;
	struct fr_crash *c;
	char err[512];
	char *text;
	size_t len;

	(void)state;
	make_rich_trace(&t);
	assert_int_equal(fr_dump_serialize(&t, &text, &len), 0);
	assert_non_null(strstr(text, "\"1.4\""));
	assert_null(strstr(text, "\"crash\""));
	free(text);
	c = t.crash = calloc(1, sizeof(*c));
	assert_non_null(c);
	c->signo = 6;
	c->code = -6;
	c->fault_addr = 0xffffffffffffff00ull;
	c->time_ns = 1700000000123456789ull;
	c->ring_head = 812;
	c->thread.tid = 4242;
	c->thread.current = true;
	c->thread.nframes = 2;
	c->thread.frames = calloc(2, sizeof(*c->thread.frames));
	assert_non_null(c->thread.frames);
	c->thread.frames[0] = (struct fr_frame){ strdup("check_shard"), 9, 0x401136 };
	c->thread.frames[1] = (struct fr_frame){ NULL, 0, 0x7f0000001234 };
	assert_int_equal(fr_dump_serialize(&t, &text, &len), 0);
	assert_non_null(strstr(text, "\"1.7\""));
	assert_int_equal(fr_dump_parse(text, len, "crash.json", &back, err, sizeof(err)), 0);
	assert_non_null(back.crash);
	assert_int_equal(back.crash->signo, 6);
	assert_int_equal(back.crash->code, -6);
	assert_true(back.crash->fault_addr == 0xffffffffffffff00ull);
	assert_true(back.crash->time_ns == 1700000000123456789ull);
	assert_int_equal(back.crash->ring_head, 812);
	assert_int_equal(back.crash->thread.tid, 4242);
	assert_int_equal(back.crash->thread.nframes, 2);
	assert_string_equal(back.crash->thread.frames[0].name, "check_shard");
	assert_null(back.crash->thread.frames[1].name);
	assert_true(back.crash->thread.frames[1].ip == 0x7f0000001234);
	/* abort()'s own frames are not the function a report names. */
	assert_string_equal(fr_crash_function(back.crash), "check_shard");
	free(text);
	fr_trace_free(&back);
	fr_trace_free(&t);
}

/*
 * The function a crash is said to be in: the first frame a symbol names.
 * A module without a symbol ("[libc.so.6]+0x16d8a2", a ctypes read of a
 * bad address in a Python rank) gives way to its caller, and is named
 * only when nothing else is.
 */
static void test_crash_function(void **state)
{
	struct fr_frame frames[] = { { .name = "[libc.so.6]" }, { .name = NULL },
				     { .name = "PyBytes_FromStringAndSize" }, { .name = "main" } };
	struct fr_crash c = { .signo = 11 };

	(void)state;
	c.thread.frames = frames;
	c.thread.nframes = 4;
	assert_string_equal(fr_crash_function(&c), "PyBytes_FromStringAndSize");
	c.thread.nframes = 2;
	assert_string_equal(fr_crash_function(&c), "[libc.so.6]");
	frames[0].name = "raise";
	assert_string_equal(fr_crash_function(&c), "raise");
	c.thread.nframes = 0;
	assert_null(fr_crash_function(&c));
}

/* Python frames (format 1.9) read back as written, the thread's native
 * frames beside them; a bad one is refused with its path. */
static void test_round_trip_python(void **state)
{
	static const char *const bad[][2] = {
		{ "\"python_frames\": [{\"function\": \"f\", \"file\": \"t.py\"}]",
		  "threads[0].python_frames[0].line" },
		{ "\"python_frames\": [{\"function\": 3, \"file\": \"t.py\", \"line\": 1}]",
		  "threads[0].python_frames[0].function" },
		{ "\"python_frames\": {}", "threads[0].python_frames" },
	};
	struct fr_trace t, back;
	struct fr_thread *th;
	char err[512], doc[512];
	char *text;
	size_t len;

	(void)state;
	make_rich_trace(&t);
	assert_true(t.nthreads > 0);
	th = &t.threads[0];
	th->pyframes = calloc(2, sizeof(*th->pyframes));
	assert_non_null(th->pyframes);
	th->npyframes = 2;
	th->pyframes[0] = (struct fr_pyframe){ strdup("Loader.load_batch"), strdup("/srv/train.py"), 41, false };
	th->pyframes[1] = (struct fr_pyframe){ strdup("<module>"), strdup("/srv/train.py"), 0, false };
	th->py_truncated = true;
	snprintf(t.python_note, sizeof(t.python_note), "a note");
	assert_int_equal(fr_dump_serialize(&t, &text, &len), 0);
	assert_non_null(strstr(text, "\"1.9\""));
	assert_int_equal(fr_dump_parse(text, len, "py.json", &back, err, sizeof(err)), 0);
	assert_int_equal(back.threads[0].npyframes, 2);
	assert_string_equal(back.threads[0].pyframes[0].function, "Loader.load_batch");
	assert_string_equal(back.threads[0].pyframes[0].file, "/srv/train.py");
	assert_int_equal(back.threads[0].pyframes[0].line, 41);
	assert_int_equal(back.threads[0].pyframes[1].line, 0);
	assert_true(back.threads[0].py_truncated);
	assert_int_equal(back.threads[0].nframes, t.threads[0].nframes);
	assert_string_equal(back.python_note, "a note");
	free(text);
	fr_trace_free(&back);
	fr_trace_free(&t);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(doc, sizeof(doc),
			 "{\"format\": \"flightrec-dump\", \"version\": \"1.9\", \"job\": \"j\", \"rank\": 0, "
			 "\"world_size\": 1, \"host\": \"h\", \"pid\": 1, \"status\": \"dumped\", "
			 "\"comm_lib_version\": \"\", \"incident\": \"i\", \"dump_reason\": \"r\", "
			 "\"time_dumped_ns\": 1, \"dropped_entries\": 0, \"pg_config\": {}, "
			 "\"pg_status\": {}, \"entries\": [], \"threads\": [{\"tid\": 1, \"frames\": [], %s}]}",
			 bad[i][0]);
		assert_int_not_equal(fr_dump_parse(doc, strlen(doc), "py.json", &back, err, sizeof(err)), 0);
		assert_non_null(strstr(err, bad[i][1]));
		fr_trace_free(&back);
	}
}

/* Entry marks (format 1.11) read back as written, and only a dump with
 * one is 1.11; an entry that is not a bool is refused with its path. */
static void test_round_trip_python_entry(void **state)
{
	static const char bad[] =
		"{\"format\": \"flightrec-dump\", \"version\": \"1.11\", \"job\": \"j\", \"rank\": 0, "
		"\"world_size\": 1, \"host\": \"h\", \"pid\": 1, \"status\": \"dumped\", "
		"\"comm_lib_version\": \"\", \"incident\": \"i\", \"dump_reason\": \"r\", "
		"\"time_dumped_ns\": 1, \"dropped_entries\": 0, \"pg_config\": {}, "
		"\"pg_status\": {}, \"entries\": [], \"threads\": [{\"tid\": 1, \"frames\": [], "
		"\"python_frames\": [{\"function\": \"f\", \"file\": \"t.py\", \"line\": 1, \"entry\": 1}]}]}";
	struct fr_trace t, back;
	struct fr_thread *th;
	char err[512];
	char *text;
	size_t len;

	(void)state;
	make_rich_trace(&t);
	th = &t.threads[0];
	th->pyframes = calloc(2, sizeof(*th->pyframes));
	assert_non_null(th->pyframes);
	th->npyframes = 2;
	th->pyframes[0] = (struct fr_pyframe){ .function = strdup("key"), .file = strdup("/srv/t.py"),
					       .line = 3, .entry = true };
	th->pyframes[1] = (struct fr_pyframe){ .function = strdup("main"), .file = strdup("/srv/t.py"),
					       .line = 9 };
	assert_int_equal(fr_dump_serialize(&t, &text, &len), 0);
	assert_non_null(strstr(text, "\"1.11\""));
	assert_int_equal(fr_dump_parse(text, len, "py.json", &back, err, sizeof(err)), 0);
	assert_int_equal(back.threads[0].npyframes, 2);
	assert_true(back.threads[0].pyframes[0].entry);
	assert_false(back.threads[0].pyframes[1].entry);
	free(text);
	fr_trace_free(&back);
	fr_trace_free(&t);

	assert_int_not_equal(fr_dump_parse(bad, strlen(bad), "py.json", &back, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "threads[0].python_frames[0].entry"));
	fr_trace_free(&back);
}

/* Each document of `bad` (a field, put first in a good dump) is refused
 * with a message that names the second string. */
static void refuse_each(const char *const (*bad)[2], size_t n)
{
	struct fr_trace t;
	char *text, *doc, err[512];
	size_t len;

	make_rich_trace(&t);
	assert_int_equal(fr_dump_serialize(&t, &text, &len), 0);
	fr_trace_free(&t);
	for (size_t i = 0; i < n; i++) {
		/* The field goes in first, after the opening brace. */
		doc = malloc(len + strlen(bad[i][0]) + 2);
		assert_non_null(doc);
		sprintf(doc, "{%s,%s", bad[i][0], text + 1);
		assert_int_not_equal(fr_dump_parse(doc, strlen(doc), "bad.json", &t, err,
						   sizeof(err)), 0);
		if (!strstr(err, bad[i][1]))
			fail_msg("%s: %s does not name %s", bad[i][0], err, bad[i][1]);
		free(doc);
	}
	free(text);
}

/* A "crash" that is not one is refused, naming the field. */
static void test_read_bad_crash(void **state)
{
	static const char *const bad[][2] = {
		{ "\"crash\": 7", "crash" },
		{ "\"crash\": {\"signo\": 11, \"si_code\": 1, \"fault_addr\": \"12\", \"thread\": {\"tid\": 1, \"frames\": []}}",
		  "crash.fault_addr" },
		{ "\"crash\": {\"signo\": 11, \"si_code\": \"x\", \"fault_addr\": \"0x0\", \"thread\": {\"tid\": 1, \"frames\": []}}",
		  "crash.si_code" },
		{ "\"crash\": {\"signo\": 11, \"si_code\": 1, \"fault_addr\": \"0x0\"}", "crash.thread" },
	};

	(void)state;
	refuse_each(bad, sizeof(bad) / sizeof(bad[0]));
}

/* An exit (format 1.8) reads back as written; a dump without one does not
 * say "exit". */
static void test_round_trip_exit(void **state)
{
	struct fr_trace t, back;
	char err[512];
	char *text;
	size_t len;

	(void)state;
	make_rich_trace(&t);
	t.has_exit = true;
	t.exit = (struct fr_exit){ .kind = FR_EXIT_EXITED, .has_code = true, .code = -3,
				   .underscore = true, .inflight = 2,
				   .time_ns = 1700000000123456789ull, .ring_head = 812 };
	assert_int_equal(fr_dump_serialize(&t, &text, &len), 0);
	assert_non_null(strstr(text, "\"1.8\""));
	assert_int_equal(fr_dump_parse(text, len, "exit.json", &back, err, sizeof(err)), 0);
	assert_true(back.has_exit);
	assert_int_equal(back.exit.kind, FR_EXIT_EXITED);
	assert_true(back.exit.has_code && back.exit.code == -3 && back.exit.underscore);
	assert_false(back.exit.finalised);
	assert_int_equal(back.exit.inflight, 2);
	assert_true(back.exit.time_ns == 1700000000123456789ull);
	assert_int_equal(back.exit.ring_head, 812);
	free(text);
	fr_trace_free(&back);
	/* Killed: no code, written as null. */
	t.exit = (struct fr_exit){ .kind = FR_EXIT_KILLED, .inflight = 1 };
	assert_int_equal(fr_dump_serialize(&t, &text, &len), 0);
	assert_true(strstr(text, "\"code\": null") || strstr(text, "\"code\":null"));
	assert_int_equal(fr_dump_parse(text, len, "exit.json", &back, err, sizeof(err)), 0);
	assert_int_equal(back.exit.kind, FR_EXIT_KILLED);
	assert_false(back.exit.has_code);
	free(text);
	fr_trace_free(&back);
	fr_trace_free(&t);
}

/* An NCCL error (format 1.8) reads back as written. */
static void test_round_trip_nccl_error(void **state)
{
	struct fr_trace t, back;
	char err[512];
	char *text;
	size_t len;

	(void)state;
	make_rich_trace(&t);
	t.has_nccl_error = true;
	snprintf(t.nccl_error.comm, sizeof(t.nccl_error.comm), "nccl-5f3a9c0e");
	t.nccl_error.result = 6;
	t.nccl_error.time_ns = 1700000000123456789ull;
	snprintf(t.nccl_error.message, sizeof(t.nccl_error.message), "peer went away");
	assert_int_equal(fr_dump_serialize(&t, &text, &len), 0);
	assert_non_null(strstr(text, "\"1.8\""));
	assert_non_null(strstr(text, "ncclRemoteError"));
	assert_int_equal(fr_dump_parse(text, len, "nccl.json", &back, err, sizeof(err)), 0);
	assert_true(back.has_nccl_error);
	assert_string_equal(back.nccl_error.comm, "nccl-5f3a9c0e");
	assert_int_equal(back.nccl_error.result, 6);
	assert_true(back.nccl_error.time_ns == 1700000000123456789ull);
	assert_string_equal(back.nccl_error.message, "peer went away");
	free(text);
	fr_trace_free(&back);
	fr_trace_free(&t);
}

/* An "exit" or "nccl_error" that is not one is refused, naming the field. */
static void test_read_bad_exit(void **state)
{
	static const char *const bad[][2] = {
		{ "\"exit\": 7", "exit" },
		{ "\"exit\": {\"code\": 3}", "exit.how" },
		{ "\"exit\": {\"how\": \"vanished\"}", "exit.how" },
		{ "\"exit\": {\"how\": \"exited\", \"code\": \"3\"}", "exit.code" },
		{ "\"exit\": {\"how\": \"exited\", \"code\": 4294967296}", "exit.code" },
		{ "\"exit\": {\"how\": \"exited\", \"inflight\": -1}", "exit.inflight" },
		{ "\"exit\": {\"how\": \"exited\", \"underscore\": 1}", "exit.underscore" },
		{ "\"nccl_error\": {\"comm\": \"c\", \"result\": 0}", "nccl_error.result" },
		{ "\"nccl_error\": {\"result\": 6}", "nccl_error.comm" },
		{ "\"nccl_error\": {\"comm\": \"c\", \"result\": 6, \"message\": 7}", "nccl_error.message" },
	};

	(void)state;
	refuse_each(bad, sizeof(bad) / sizeof(bad[0]));
}

static void test_round_trip_every_status(void **state)
{
	struct fr_trace t, back;
	char err[512];
	char *text;
	size_t len;

	(void)state;
	make_rich_trace(&t);
	for (unsigned s = 0; s < FR_RANK__COUNT; s++) {
		t.status = (enum fr_rank_status)s;
		assert_int_equal(fr_dump_serialize(&t, &text, &len), 0);
		assert_int_equal(fr_dump_parse(text, len, "st.json", &back, err, sizeof(err)), 0);
		assert_int_equal(back.status, s);
		free(text);
		fr_trace_free(&back);
	}
	fr_trace_free(&t);
}

/* What other tools read: PyTorch Flight Recorder's names and conventions. */
static void test_document_shape(void **state)
{
	struct fr_trace t;
	json_t *root, *e, *v;

	(void)state;
	make_rich_trace(&t);
	root = fr_dump_to_json(&t);
	assert_non_null(root);
	assert_string_equal(json_string_value(json_object_get(root, "format")), "flightrec-dump");
	assert_string_equal(json_string_value(json_object_get(root, "version")), "1.4");
	assert_string_equal(FR_DUMP_VERSION, "1.4");
	assert_string_equal(json_string_value(json_object_get(root, "status")), "dumped");

	v = json_object_get(json_object_get(root, "pg_config"), "c0.split.2");
	assert_string_equal(json_string_value(json_object_get(v, "name")), "c0.split.2");
	assert_int_equal(json_array_size(json_object_get(v, "ranks")), 3);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(v, "ranks"), 2)), 5);
	v = json_object_get(json_object_get(root, "pg_status"), "c0");
	assert_int_equal(json_integer_value(json_object_get(v, "last_enqueued_collective")), 11);
	assert_int_equal(json_integer_value(json_object_get(v, "last_started_collective")), 11);
	assert_int_equal(json_integer_value(json_object_get(v, "last_completed_collective")), 10);

	/* GPU operations in PyTorch's words: the one the device reached is
	 * "started" (with the time it was seen to), the one behind it
	 * "scheduled"; only a captured one says so. MPI ones say "entered". */
	e = json_array_get(json_object_get(root, "entries"), 7);
	assert_string_equal(json_string_value(json_object_get(e, "state")), "started");
	assert_true(json_is_integer(json_object_get(e, "time_discovered_started_ns")));
	assert_null(json_object_get(e, "captured"));
	e = json_array_get(json_object_get(root, "entries"), 8);
	assert_string_equal(json_string_value(json_object_get(e, "state")), "scheduled");
	assert_true(json_is_null(json_object_get(e, "time_discovered_started_ns")));
	e = json_array_get(json_object_get(root, "entries"), 9);
	assert_string_equal(json_string_value(json_object_get(e, "state")), "completed");
	assert_true(json_is_true(json_object_get(e, "captured")));
	e = json_array_get(json_object_get(root, "entries"), 4);
	assert_string_equal(json_string_value(json_object_get(e, "state")), "entered");

	/* entries[0]: a completed all_reduce. */
	e = json_array_get(json_object_get(root, "entries"), 0);
	assert_string_equal(json_string_value(json_object_get(e, "profiling_name")),
			    "mpi:all_reduce");
	assert_string_equal(json_string_value(json_object_get(e, "state")), "completed");
	assert_true(json_is_true(json_object_get(e, "retired")));
	assert_int_equal(json_integer_value(json_object_get(e, "collective_seq_id")), 10);
	assert_int_equal(json_integer_value(json_object_get(e, "p2p_seq_id")), 0);
	assert_int_equal(json_integer_value(json_object_get(e, "op_id")),
			 json_integer_value(json_object_get(e, "record_id")));
	assert_int_equal(json_integer_value(json_array_get(
				 json_array_get(json_object_get(e, "input_sizes"), 0), 0)),
			 1u << 20);
	assert_string_equal(json_string_value(json_array_get(json_object_get(e, "output_dtypes"),
							     0)),
			    "double");
	assert_string_equal(json_string_value(json_array_get(json_object_get(e, "process_group"),
							     1)),
			    "MPI_COMM_WORLD");
	assert_int_equal(json_integer_value(json_object_get(e, "time_discovered_completed_ns")),
			 t.ops[0].t_completed_ns);
	assert_int_equal(json_integer_value(json_object_get(e, "time_discovered_started_ns")),
			 t.ops[0].t_entered_ns);
	assert_true(json_is_false(json_object_get(e, "waited")));

	/* entries[2]: a non-blocking send never waited on never started blocking. */
	e = json_array_get(json_object_get(root, "entries"), 2);
	assert_true(json_is_true(json_object_get(e, "nonblocking")));
	assert_true(json_is_false(json_object_get(e, "waited")));
	assert_true(json_is_null(json_object_get(e, "time_discovered_started_ns")));

	/* entries[5]: an Irecv waited on, blocking since its Wait began. */
	e = json_array_get(json_object_get(root, "entries"), 5);
	assert_true(json_is_true(json_object_get(e, "nonblocking")));
	assert_true(json_is_true(json_object_get(e, "waited")));
	assert_int_equal(json_integer_value(json_object_get(e, "time_discovered_started_ns")),
			 t.ops[5].t_entered_ns + 777);
	e = json_array_get(json_object_get(root, "entries"), 6);
	assert_string_equal(json_string_value(json_object_get(e, "profiling_name")),
			    "mpi:finalize");

	/* entries[3]: a p2p receive still in flight. */
	e = json_array_get(json_object_get(root, "entries"), 3);
	assert_true(json_is_true(json_object_get(e, "is_p2p")));
	assert_int_equal(json_integer_value(json_object_get(e, "collective_seq_id")), 0);
	assert_int_equal(json_integer_value(json_object_get(e, "p2p_seq_id")), 3);
	assert_true(json_is_null(json_object_get(e, "time_discovered_completed_ns")));
	assert_true(json_is_false(json_object_get(e, "retired")));
	assert_int_equal(json_integer_value(json_object_get(e, "peer")), -1);
	assert_int_equal(json_integer_value(json_object_get(e, "peer_in_comm")), 2);
	assert_int_equal(json_integer_value(json_object_get(e, "root")), -1);
	/* entries[1]: a reduce names its root both ways; entries[0] has none. */
	e = json_array_get(json_object_get(root, "entries"), 1);
	assert_int_equal(json_integer_value(json_object_get(e, "root")), 5);
	assert_int_equal(json_integer_value(json_object_get(e, "peer_in_comm")), 2);
	e = json_array_get(json_object_get(root, "entries"), 0);
	assert_int_equal(json_integer_value(json_object_get(e, "peer_in_comm")), -1);

	v = json_array_get(json_object_get(json_array_get(json_object_get(root, "threads"), 0),
					   "frames"), 1);
	assert_true(json_is_null(json_object_get(v, "name")));
	assert_string_equal(json_string_value(json_object_get(v, "ip")), "0xffffffffffffffff");
	json_decref(root);

	/* A trace without threads has no "threads" key at all. */
	for (size_t i = 0; i < t.nthreads; i++) {
		for (size_t j = 0; j < t.threads[i].nframes; j++)
			free(t.threads[i].frames[j].name);
		free(t.threads[i].frames);
	}
	free(t.threads);
	t.threads = NULL;
	t.nthreads = 0;
	root = fr_dump_to_json(&t);
	assert_null(json_object_get(root, "threads"));
	json_decref(root);
	fr_trace_free(&t);
}

static void test_read_good(void **state)
{
	char *path = data_path("good-rank-0.json");
	struct fr_trace t;
	const struct fr_comm *c;
	const struct fr_op *op;
	char err[512];

	(void)state;
	assert_int_equal(fr_dump_read_file(path, &t, err, sizeof(err)), 0);
	assert_int_equal(t.status, FR_RANK_DUMPED);
	assert_string_equal(t.job, "train-42");
	assert_int_equal(t.rank, 0);
	assert_int_equal(t.world_size, 4);
	assert_string_equal(t.host, "node07");
	assert_int_equal(t.pid, 31337);
	assert_string_equal(t.comm_lib, "Open MPI v4.1.4");
	assert_string_equal(t.incident, "inc-0001");
	assert_string_equal(t.reason, "rank 2 stopped heartbeating");
	assert_int_equal(t.time_ns, 1700000000123456789ull);
	assert_int_equal(t.dropped, 12);

	assert_int_equal(t.ncomms, 2);
	c = &t.comms[0];
	assert_string_equal(c->id, "world");
	assert_string_equal(c->desc, "MPI_COMM_WORLD");
	assert_int_equal(c->rank, 0);
	assert_int_equal(c->size, 4);
	assert_int_equal(c->members[3], 3);
	assert_int_equal(c->last_entered, 8);
	assert_int_equal(c->last_completed, 7);
	c = fr_trace_comm(&t, "w.split.1");
	assert_non_null(c);
	assert_string_equal(c->desc, "split of world");
	assert_int_equal(c->size, 2);
	assert_int_equal(c->members[0], 0);
	assert_int_equal(c->members[1], 2);
	assert_int_equal(c->last_entered, 0);

	assert_int_equal(t.nops, 3);
	op = &t.ops[0];
	assert_int_equal(op->record_id, 40);
	assert_string_equal(op->comm, "world");
	assert_int_equal(op->type, FR_OP_ALL_REDUCE);
	assert_int_equal(op->state, FR_STATE_COMPLETED);
	assert_false(op->is_p2p);
	assert_false(op->nonblocking);
	assert_int_equal(op->seq, 7);
	assert_int_equal(op->peer, -1);
	assert_int_equal(op->root, -1);
	assert_int_equal(op->count, 1024);
	assert_int_equal(op->bytes, 8192);
	assert_string_equal(op->dtype, "double");
	assert_string_equal(op->redop, "sum");
	assert_int_equal(op->t_entered_ns, 1700000000000000100ull);
	assert_int_equal(op->t_started_ns, 1700000000000000100ull);
	assert_int_equal(op->t_completed_ns, 1700000000000900100ull);

	op = &t.ops[1];
	assert_int_equal(op->record_id, 41);
	assert_string_equal(op->comm, "w.split.1");
	assert_int_equal(op->type, FR_OP_SEND);
	assert_int_equal(op->state, FR_STATE_ENTERED);
	assert_true(op->is_p2p);
	assert_true(op->nonblocking);
	/* Written before "waited" existed: not waited on. */
	assert_false(op->waited);
	assert_int_equal(op->seq, 3);
	assert_int_equal(op->peer, 2);
	/* Written before "peer_in_comm" existed: none. */
	assert_int_equal(op->peer_in_comm, -1);
	assert_int_equal(op->count, 16);
	assert_int_equal(op->bytes, 64);
	assert_string_equal(op->dtype, "int32");
	assert_string_equal(op->redop, "");
	assert_int_equal(op->t_completed_ns, 0);

	op = &t.ops[2];
	assert_int_equal(op->type, FR_OP_BROADCAST);
	assert_int_equal(op->seq, 8);
	assert_int_equal(op->root, 1);
	assert_int_equal(op->state, FR_STATE_ENTERED);

	assert_int_equal(t.nthreads, 2);
	assert_int_equal(t.threads[0].tid, 31337);
	assert_string_equal(t.threads[0].name, "python");
	assert_true(t.threads[0].current);
	assert_int_equal(t.threads[0].nframes, 2);
	assert_string_equal(t.threads[0].frames[0].name, "PMPI_Bcast");
	assert_int_equal(t.threads[0].frames[0].offset, 52);
	assert_int_equal(t.threads[0].frames[0].ip, 0x7f3a12345678ull);
	assert_null(t.threads[0].frames[1].name);
	assert_int_equal(t.threads[0].frames[1].ip, 0x401a2b);
	assert_string_equal(t.threads[1].name, "fr-agent");
	assert_false(t.threads[1].current);
	assert_int_equal(t.threads[1].nframes, 0);

	fr_trace_free(&t);
	free(path);
}

/* Reads a bad file, expecting error rc and a message naming the file and `needle`. */
static void expect_read_error(const char *file, int rc, const char *needle)
{
	char *path = data_path(file);
	struct fr_trace t;
	char err[512];

	memset(&t, 0xa5, sizeof(t));
	assert_int_equal(fr_dump_read_file(path, &t, err, sizeof(err)), rc);
	assert_contains(err, file);
	assert_contains(err, needle);
	assert_zeroed(&t);
	free(path);
}

static void test_read_truncated(void **state)
{
	(void)state;
	expect_read_error("truncated-rank-1.json", -EPROTO, "invalid JSON at line");
}

static void test_read_future_version(void **state)
{
	(void)state;
	expect_read_error("future-version.json", -EPROTONOSUPPORT,
			  "dump format version 9.0 is not supported (this build reads 1.x)");
}

static void test_read_not_a_dump(void **state)
{
	(void)state;
	expect_read_error("not-a-dump.json", -EPROTO, "not a flightrec dump");
}

static void test_read_bad_entry_type(void **state)
{
	(void)state;
	expect_read_error("bad-type-entry.json", -EPROTO,
			  "entries[1].collective_seq_id: expected an integer, got a string");
}

static void test_read_missing_file(void **state)
{
	(void)state;
	expect_read_error("no-such-rank.json", -ENOENT, "cannot open");
}

static void test_read_pytorch_entry(void **state)
{
	char *path = data_path("pytorch-entry.json");
	struct fr_trace t;
	const struct fr_op *op;
	char err[512];

	(void)state;
	assert_int_equal(fr_dump_read_file(path, &t, err, sizeof(err)), 0);
	assert_int_equal(t.ncomms, 1);
	assert_string_equal(t.comms[0].id, "0");
	assert_string_equal(t.comms[0].desc, "default_pg");
	assert_int_equal(t.comms[0].size, 2);
	assert_int_equal(t.comms[0].members[1], 1);
	assert_int_equal(t.comms[0].rank, 1);
	assert_int_equal(t.comms[0].last_entered, 5);
	assert_int_equal(t.comms[0].last_completed, 4);

	assert_int_equal(t.nops, 1);
	op = &t.ops[0];
	assert_int_equal(op->type, FR_OP_ALL_REDUCE);
	assert_int_equal(op->state, FR_STATE_ENTERED);
	assert_string_equal(op->comm, "0");
	assert_false(op->is_p2p);
	assert_int_equal(op->seq, 5);
	assert_int_equal(op->count, 4 * 256);
	assert_string_equal(op->dtype, "Float");
	assert_int_equal(op->peer, -1);
	assert_int_equal(op->root, -1);
	assert_int_equal(op->t_completed_ns, 0);
	fr_trace_free(&t);
	free(path);
}

/*
 * Edits of a good document, each with the message a user must get. The
 * edit is applied to the parsed good dump.
 */
struct bad_case {
	const char *what;
	void (*edit)(json_t *root);
	int rc;
	const char *needle;
};

static json_t *entry(json_t *root, size_t i)
{
	return json_array_get(json_object_get(root, "entries"), i);
}

static void edit_world_zero(json_t *root)
{
	json_object_set_new(root, "world_size", json_integer(0));
}

static void edit_world_huge(json_t *root)
{
	json_object_set_new(root, "world_size", json_integer((1 << 24) + 1));
}

static void edit_waited_type(json_t *root)
{
	json_object_set_new(entry(root, 1), "waited", json_string("yes"));
}

static void edit_waited_blocking(json_t *root)
{
	json_object_set_new(entry(root, 0), "waited", json_true());
}

static void edit_started_type(json_t *root)
{
	json_object_set_new(entry(root, 2), "time_discovered_started_ns", json_string("soon"));
}

static void edit_no_entries(json_t *root)
{
	json_object_del(root, "entries");
}

static void edit_status(json_t *root)
{
	json_object_set_new(root, "status", json_string("zombie"));
}

static void edit_rank_range(json_t *root)
{
	json_object_set_new(root, "rank", json_integer(4));
}

static void edit_negative_count(json_t *root)
{
	json_object_set_new(entry(root, 2), "count", json_integer(-1));
}

static void edit_state(json_t *root)
{
	json_object_set_new(entry(root, 0), "state", json_string("exploded"));
}

static void edit_members(json_t *root)
{
	json_t *w = json_object_get(json_object_get(root, "pg_config"), "world");

	json_array_remove(json_object_get(w, "ranks"), 0);
}

static void edit_ip(json_t *root)
{
	json_t *t0 = json_array_get(json_object_get(root, "threads"), 0);

	json_object_set_new(json_array_get(json_object_get(t0, "frames"), 1), "ip",
			    json_string("0xzz"));
}

static void edit_long_host(json_t *root)
{
	char host[300];

	memset(host, 'h', sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	json_object_set_new(root, "host", json_string(host));
}

static void edit_version_form(json_t *root)
{
	json_object_set_new(root, "version", json_string("one"));
}

static void edit_version_type(json_t *root)
{
	json_object_set_new(root, "version", json_real(1.0));
}

static void edit_pg_status_unknown(json_t *root)
{
	json_object_set(json_object_get(root, "pg_status"), "ghost",
			json_object_get(json_object_get(root, "pg_status"), "world"));
}

static void edit_peer_in_comm_low(json_t *root)
{
	json_object_set_new(entry(root, 1), "peer_in_comm", json_integer(-2));
}

static void edit_peer_in_comm_type(json_t *root)
{
	json_object_set_new(entry(root, 1), "peer_in_comm", json_string("1"));
}

static void edit_format(json_t *root)
{
	json_object_set_new(root, "format", json_string("flightrec-manifest"));
}

static void test_read_bad_fields(void **state)
{
	static const struct bad_case cases[] = {
		{ "missing entries", edit_no_entries, -EPROTO, "x.json: entries: missing" },
		{ "unknown status", edit_status, -EPROTO, "status: unknown rank status \"zombie\"" },
		{ "rank out of world", edit_rank_range, -EPROTO,
		  "rank: 4 is not below world_size 4" },
		{ "negative count", edit_negative_count, -EPROTO,
		  "entries[2].count: -1 is out of range" },
		{ "unknown state", edit_state, -EPROTO, "entries[0].state: unknown state" },
		{ "members vs size", edit_members, -EPROTO,
		  "pg_config.world.ranks: lists 3 ranks but size is 4" },
		{ "bad ip", edit_ip, -EPROTO, "threads[0].frames[1].ip: expected a hex string" },
		{ "long host", edit_long_host, -EPROTO, "host: 299 bytes long" },
		{ "version form", edit_version_form, -EPROTO,
		  "version: \"one\" is not of the form MAJOR.MINOR" },
		{ "version type", edit_version_type, -EPROTO, "version: expected a string" },
		{ "pg_status of nothing", edit_pg_status_unknown, -EPROTO,
		  "pg_status.ghost: no such process group" },
		{ "a manifest", edit_format, -EPROTO,
		  "not a flightrec dump (format is \"flightrec-manifest\"" },
		{ "world of 0", edit_world_zero, -EPROTO,
		  "x.json: world_size: 0 is not a valid world size (1..16777216)" },
		{ "world too big", edit_world_huge, -EPROTO,
		  "x.json: world_size: 16777217 is not a valid world size" },
		{ "waited type", edit_waited_type, -EPROTO,
		  "entries[1].waited: expected true or false, got a string" },
		{ "waited blocking op", edit_waited_blocking, -EPROTO,
		  "entries[0].waited: true for an operation that is not nonblocking" },
		{ "start time type", edit_started_type, -EPROTO,
		  "entries[2].time_discovered_started_ns: expected an integer" },
		{ "peer_in_comm below -1", edit_peer_in_comm_low, -EPROTO,
		  "entries[1].peer_in_comm: -2 is out of range (-1..2147483647)" },
		{ "peer_in_comm type", edit_peer_in_comm_type, -EPROTO,
		  "entries[1].peer_in_comm: expected an integer, got a string" },
	};
	char *path = data_path("good-rank-0.json");
	json_error_t je;
	json_t *good = json_load_file(path, 0, &je);

	(void)state;
	assert_non_null(good);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *doc = json_deep_copy(good);
		struct fr_trace t;
		char err[512];
		int rc;

		cases[i].edit(doc);
		rc = fr_dump_from_json(doc, "x.json", &t, err, sizeof(err));
		if (rc != cases[i].rc || !strstr(err, cases[i].needle))
			fail_msg("%s: rc %d, message \"%s\"", cases[i].what, rc, err);
		assert_zeroed(&t);
		json_decref(doc);
	}
	json_decref(good);
	free(path);
}

/*
 * PyTorch entries carry no "nonblocking": they block from when they start,
 * which PyTorch often leaves null; then entering is when they started.
 */
/*
 * An NCCL rank knows only its own entry of a communicator's members: the
 * others are written as -1 and read back as FR_RANK_UNKNOWN. A negative
 * rank other than -1, and a known one outside the world, are still refused.
 */
static void test_unknown_members(void **state)
{
	static const uint32_t members[] = { FR_RANK_UNKNOWN, 2, FR_RANK_UNKNOWN,
					    FR_RANK_UNKNOWN };
	struct fr_trace t, back;
	size_t ccap = 0;
	json_t *doc, *ranks;
	char err[512];
	int rc;

	(void)state;
	memset(&t, 0, sizeof(t));
	t.status = FR_RANK_DUMPED;
	COPY(t.job, "job-nccl");
	t.rank = 2;
	t.world_size = 8;
	COPY(t.host, "gpu1");
	t.pid = 77;
	t.time_ns = 1700000000000000000ull;
	add_comm(&t, &ccap, "nccl-abc", "ncclCommInitRank", 1, 4, members);

	doc = fr_dump_to_json(&t);
	assert_non_null(doc);
	ranks = json_object_get(json_object_get(json_object_get(doc, "pg_config"), "nccl-abc"),
				"ranks");
	assert_int_equal(json_array_size(ranks), 4);
	assert_int_equal(json_integer_value(json_array_get(ranks, 0)), -1);
	assert_int_equal(json_integer_value(json_array_get(ranks, 1)), 2);
	assert_int_equal(json_integer_value(json_array_get(ranks, 3)), -1);

	assert_int_equal(fr_dump_from_json(doc, "nccl.json", &back, err, sizeof(err)), 0);
	assert_traces_equal(&t, &back);
	assert_int_equal(back.comms[0].members[0], FR_RANK_UNKNOWN);
	assert_int_equal(back.comms[0].rank, 1);
	fr_trace_free(&back);

	json_array_set_new(ranks, 0, json_integer(-2));
	rc = fr_dump_from_json(doc, "nccl.json", &back, err, sizeof(err));
	assert_int_equal(rc, -EPROTO);
	assert_contains(err, "nccl.json: pg_config.nccl-abc.ranks[0]: -2 is not a rank");
	assert_zeroed(&back);

	json_array_set_new(ranks, 0, json_integer(8));
	rc = fr_dump_from_json(doc, "nccl.json", &back, err, sizeof(err));
	assert_int_equal(rc, -EPROTO);
	assert_contains(err, "pg_config.nccl-abc.ranks[0]: rank 8 is not below world_size 8");

	json_array_set_new(ranks, 0, json_integer(UINT32_MAX));
	rc = fr_dump_from_json(doc, "nccl.json", &back, err, sizeof(err));
	assert_int_equal(rc, -EPROTO);
	assert_contains(err, "ranks[0]: 4294967295 is not a rank");

	json_decref(doc);
	fr_trace_free(&t);
}

static void test_read_pytorch_start_time(void **state)
{
	static const struct {
		const char *state;
		json_int_t started;   /* time_discovered_started_ns; 0: null */
		uint64_t want;
	} cases[] = {
		{ "scheduled", 0, 0 },
		{ "started", 0, 1700000004000000000ull },
		{ "started", 1700000004500000000ll, 1700000004500000000ull },
		{ "entered", 0, 1700000004000000000ull },
		{ "completed", 1700000004200000000ll, 1700000004200000000ull },
	};
	char *path = data_path("pytorch-entry.json");
	json_t *doc = json_load_file(path, 0, NULL);

	(void)state;
	assert_non_null(doc);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *e = entry(doc, 0);
		json_int_t started = cases[i].started;
		struct fr_trace t;
		char err[512];

		json_object_set_new(e, "state", json_string(cases[i].state));
		json_object_set_new(e, "time_discovered_started_ns",
				    started ? json_integer(started) : json_null());
		if (fr_dump_from_json(doc, "pt.json", &t, err, sizeof(err)) != 0)
			fail_msg("case %zu: %s", i, err);
		assert_int_equal(t.ops[0].t_started_ns, cases[i].want);
		assert_false(t.ops[0].nonblocking);
		assert_false(t.ops[0].waited);
		fr_trace_free(&t);
	}
	json_decref(doc);
	free(path);
}

/* The largest world a dump may state is read; the message names the file. */
static void test_read_world_size_bounds(void **state)
{
	char *path = data_path("good-rank-0.json");
	json_t *doc = json_load_file(path, 0, NULL);
	struct fr_trace t;
	char err[512];

	(void)state;
	assert_non_null(doc);
	json_object_set_new(doc, "world_size", json_integer(1 << 24));
	assert_int_equal(fr_dump_from_json(doc, "big.json", &t, err, sizeof(err)), 0);
	assert_int_equal(t.world_size, 1u << 24);
	fr_trace_free(&t);
	json_decref(doc);
	free(path);
}

static void test_parse_not_json(void **state)
{
	static const char text[] = "[1, 2, 3]";
	struct fr_trace t;
	char err[256];

	(void)state;
	assert_int_equal(fr_dump_parse(text, strlen(text), "arr.json", &t, err, sizeof(err)),
			 -EPROTO);
	assert_contains(err, "arr.json: not a flightrec dump");
	assert_int_equal(fr_dump_parse("", 0, "empty.json", &t, err, sizeof(err)), -EPROTO);
	assert_contains(err, "empty.json: invalid JSON");
}

/*
 * The dump reader reads a dump's entries straight from its text (a hook in
 * the JSON parser); a tree of the same text read by fr_dump_from_val()
 * must give the same trace, or the same error, in every variant.
 */
static void expect_same_both_ways(const char *text, const char *what)
{
	struct fr_trace a, b;
	struct fr_doc *d = fr_doc_new();
	struct fr_val *root;
	char ea[512] = "", eb[512] = "";
	int ra, rb;

	ra = fr_dump_parse(text, strlen(text), "v.json", &a, ea, sizeof(ea));
	if (fr_json_parse(d, text, strlen(text), &root, eb, sizeof(eb)) == 0) {
		rb = fr_dump_from_val(root, "v.json", &b, eb, sizeof(eb));
	} else {
		/* Not JSON: the hook path must say so too. */
		rb = -EPROTO;
		memset(&b, 0, sizeof(b));
		if (!strstr(ea, "invalid JSON"))
			fail_msg("%s: \"%s\" for text the parser refuses (%s)", what, ea, eb);
		snprintf(eb, sizeof(eb), "%s", ea);
	}
	if (ra != rb || strcmp(ea, eb) != 0)
		fail_msg("%s: text path %d \"%s\", tree path %d \"%s\"", what, ra, ea, rb, eb);
	assert_int_equal(a.nops, b.nops);
	for (size_t i = 0; i < a.nops; i++) {
		assert_string_equal(a.ops[i].comm, b.ops[i].comm);
		assert_int_equal(a.ops[i].seq, b.ops[i].seq);
		assert_int_equal(a.ops[i].type, b.ops[i].type);
		assert_int_equal(a.ops[i].count, b.ops[i].count);
		assert_int_equal(a.ops[i].t_entered_ns, b.ops[i].t_entered_ns);
		assert_string_equal(a.ops[i].dtype, b.ops[i].dtype);
	}
	fr_trace_free(&a);
	fr_trace_free(&b);
	fr_doc_free(d);
}

/* Replaces the first `from` in `text` by `to`; a new string. */
static char *edit(const char *text, const char *from, const char *to)
{
	const char *at = strstr(text, from);
	char *out;

	assert_non_null(at);
	out = malloc(strlen(text) + strlen(to) + 1);
	assert_non_null(out);
	sprintf(out, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
	return out;
}

static void test_text_and_tree_agree(void **state)
{
	static const struct {
		const char *what, *from, *to;
	} variants[] = {
		{ "as written", "\"job\"", "\"job\"" },
		{ "keys in another order", "\"record_id\": 40, \"pg_id\": \"world\",",
		  "\"pg_id\": \"world\", \"record_id\": 40," },
		{ "an escaped key", "\"collective_seq_id\": 7", "\"collective\\u005fseq_id\": 7" },
		{ "an unknown key", "\"record_id\": 40,", "\"record_id\": 40, \"later\": [1, {}]," },
		{ "an unknown key twice", "\"record_id\": 40,", "\"x\": 1, \"record_id\": 40, \"x\": 2," },
		{ "a known key twice", "\"record_id\": 40,", "\"record_id\": 40, \"record_id\": 41," },
		{ "an entry that is not an object", "\"entries\": [", "\"entries\": [5, " },
		{ "entries null", "\"entries\": [", "\"entries\": null, \"x\": [" },
		{ "entries an object", "\"entries\": [", "\"entries\": {}, \"x\": [" },
		{ "a bad field", "\"collective_seq_id\": 7", "\"collective_seq_id\": \"7\"" },
		{ "another major version", "\"version\": \"1.3\"", "\"version\": \"9.0\"" },
		{ "another format", "\"flightrec-dump\"", "\"other-tool\"" },
		{ "no format", "\"format\": \"flightrec-dump\",", "" },
		{ "an unknown state", "\"state\": \"completed\"", "\"state\": \"weird\"" },
	};
	char *path = data_path("good-rank-0.json");
	struct fr_trace t;
	char *text;
	char err[256];
	FILE *f;
	long len;

	(void)state;
	f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	text = calloc(1, (size_t)len + 1);
	assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
		char *v = edit(text, variants[i].from, variants[i].to);

		expect_same_both_ways(v, variants[i].what);
		free(v);
	}
	/* Another major version with a bad entry: the version is what is wrong. */
	{
		char *v1 = edit(text, "\"version\": \"1.3\"", "\"version\": \"9.0\"");
		char *v2 = edit(v1, "\"state\": \"completed\"", "\"state\": \"weird\"");

		assert_int_equal(fr_dump_parse(v2, strlen(v2), "v.json", &t, err, sizeof(err)),
				 -EPROTONOSUPPORT);
		assert_contains(err, "version 9.0 is not supported");
		free(v1);
		free(v2);
	}
	free(text);
	free(path);
}

/*
 * Entries as our writer writes them (compact, keys in its order) are read
 * straight from the text by a reader of their own that gives up on anything
 * else, which the general reader then reads from the entry's start. That
 * reader must never decide otherwise: a text and the same text with a
 * space after each entry's '{' (which it always gives up on) must read
 * alike, the same trace or the same error, wherever a byte of the entries
 * is changed.
 */
static char *spaced_entries(const char *text)
{
	size_t n = 0;
	char *out, *o;

	for (const char *p = text; (p = strstr(p, "{\"record_id\"")); p++)
		n++;
	out = malloc(strlen(text) + n + 1);
	assert_non_null(out);
	o = out;
	for (const char *p = text; *p; p++) {
		*o++ = *p;
		if (strncmp(p, "{\"record_id\"", 12) == 0)
			*o++ = ' ';
	}
	*o = '\0';
	return out;
}

/* A parser's message without its "line 1, column 20: ", which the space
 * moves. */
static void without_place(char *msg)
{
	char *at;

	while ((at = strstr(msg, "line ")) && strstr(at, ", column ")) {
		char *colon = strstr(at, ": ");

		if (!colon)
			break;
		memmove(at, colon + 2, strlen(colon + 2) + 1);
	}
}

static void expect_written_agrees(const char *text, const char *what, size_t pos)
{
	char *spaced = spaced_entries(text);
	struct fr_trace a, b;
	char ea[512] = "", eb[512] = "";
	int ra, rb;

	ra = fr_dump_parse(text, strlen(text), "s.json", &a, ea, sizeof(ea));
	rb = fr_dump_parse(spaced, strlen(spaced), "s.json", &b, eb, sizeof(eb));
	without_place(ea);
	without_place(eb);
	if (ra != rb || strcmp(ea, eb) != 0)
		fail_msg("%s at %zu: read as written %d \"%s\", parsed %d \"%s\"", what, pos, ra, ea, rb,
			 eb);
	assert_int_equal(a.nops, b.nops);
	for (size_t i = 0; i < a.nops; i++)
		if (!ops_same(&a.ops[i], &b.ops[i]))
			fail_msg("%s at %zu: read as written, other operations", what, pos);
	fr_trace_free(&a);
	fr_trace_free(&b);
	free(spaced);
}

static void test_written_entries_agree(void **state)
{
	static const char bytes[] = "09-\"\\,:[]{} e.ntfx\x01\x7f\x80";
	static const struct {
		const char *from, *to;
	} values[] = {
		{ "\"record_id\":100", "\"record_id\":9223372036854775807" },
		{ "\"record_id\":100", "\"record_id\":9223372036854775808" },
		{ "\"record_id\":100", "\"record_id\":18446744073709551616" },
		{ "\"record_id\":100", "\"record_id\":123456789012345678901234" },
		{ "\"record_id\":100", "\"record_id\":00" },
		{ "\"record_id\":100", "\"record_id\":-0" },
		{ "\"record_id\":100", "\"record_id\":-1" },
		{ "\"record_id\":100", "\"record_id\":1e3" },
		{ "\"record_id\":100", "\"record_id\":1.0" },
		{ "\"record_id\":100", "\"record_id\":12345678" },
		{ "\"record_id\":100", "\"record_id\":123456789" },
		{ "\"record_id\":100", "\"record_id\":1234567890123456" },
		{ "\"peer\":4", "\"peer\":-9223372036854775808" },
		{ "\"peer\":4", "\"peer\":-9223372036854775809" },
		{ "\"peer\":4", "\"peer\":2147483648" },
		{ "\"dtype\":\"double\"", "\"dtype\":\"d\\u006fuble\"" },
		{ "\"dtype\":\"double\"", "\"dtype\":\"dou\xc3\xa9le\"" },
		{ "\"dtype\":\"double\"", "\"dtype\":\"abcdefghijklmnopqrstuvwxyz\"" },
		{ "\"dtype\":\"double\"", "\"dtype\":\"\"" },
		{ "\"dtype\":\"double\"", "\"dtype\":null" },
		{ "\"input_sizes\":[[1048576]]", "\"input_sizes\":[[2,3],[4]],\"count\":null" },
		{ "\"input_sizes\":[[1048576]]", "\"input_sizes\":[[1,2,3,4,5,6,7,8,9]]" },
		{ "\"input_sizes\":[[1048576]]", "\"input_sizes\":[[[1]]]" },
		{ "\"input_sizes\":[[1048576]]", "\"input_sizes\":[]" },
		{ "\"input_sizes\":[[1048576]]", "\"input_sizes\":[[]]" },
		{ "\"input_sizes\":[[1048576]]", "\"input_sizes\":[{}]" },
		{ "\"process_group\":[\"c0\"", "\"process_group\":[1" },
		{ "\"record_id\":100,", "\"record_id\":0,\"record_id\":1," },
		{ "\"record_id\":100,", "\"record_id\":0,\"later\":1," },
		{ "\"state\":\"completed\"", "\"state\":\"complete\"" },
		{ "\"op\":\"all_reduce\"", "\"op\":\"allreduce\"" },
		{ "\"op\":\"all_reduce\"", "\"op\":null" },
		{ "\"is_p2p\":false", "\"is_p2p\":fals" },
		{ "\"is_p2p\":false", "\"is_p2p\":truex" },
		{ "\"is_p2p\":false", "\"is_p2p\":nul" },
		/* Numbers at each of the reader's eight-digit steps. */
		{ "\"record_id\":100", "\"record_id\":12345678" },
		{ "\"record_id\":100", "\"record_id\":1234567812345678" },
		{ "\"record_id\":100", "\"record_id\":12345678123456789" },
		{ "\"record_id\":100", "\"record_id\":1000000000000000000" },
		{ "\"record_id\":100", "\"record_id\":10000000000000000000" },
		{ "\"record_id\":100", "\"record_id\":100000000" },
		{ "\"record_id\":100", "\"record_id\":010" },
		{ "\"count\":1048576", "\"count\":9223372036854775807" },
		{ "\"count\":1048576", "\"count\":9223372036854775808" },
		{ "\"count\":1048576", "\"count\":1048576.0" },
		{ "\"count\":1048576", "\"count\":1048576e0" },
		{ "\"count\":1048576", "\"count\":-1048576" },
		{ "\"time_created_ns\":", "\"time_created_ns\":0" },
		{ "\"time_discovered_completed_ns\":", "\"time_discovered_completed_ns\":null,\"x\":" },
		/* Ranks: -1 for none, the others within 32 bits. */
		{ "\"peer\":-1", "\"peer\":-01" },
		{ "\"peer\":-1", "\"peer\":-10" },
		{ "\"peer\":-1", "\"peer\":-2" },
		{ "\"peer\":-1", "\"peer\":-0" },
		{ "\"peer\":-1", "\"peer\":2147483647" },
		{ "\"root\":-1", "\"root\":null" },
		/* Strings at their limits, and names that are not ours. */
		{ "\"process_group\":[\"c0\"",
		  "\"process_group\":[\"c0-456789012345678901234567890123456789012345678901234567890123\"" },
		{ "\"process_group\":[\"c0\"",
		  "\"process_group\":[\"c0-4567890123456789012345678901234567890123456789012345678901234\"" },
		{ "\"process_group\":[\"c0\",", "\"process_group\":[\"c0\",1," },
		{ "\"process_group\":[\"c0\",", "\"process_group\":[\"c0\"]," },
		{ "\"dtype\":\"double\"", "\"dtype\":\"abcdefghijklmnopqrstuvw\"" },
		{ "\"dtype\":\"double\"", "\"dtype\":\"abcdefghijklmnopqrstuvwx\"" },
		{ "\"redop\":\"sum\"", "\"redop\":\"abcdefghijklmno\"" },
		{ "\"redop\":\"sum\"", "\"redop\":\"abcdefghijklmnop\"" },
		{ "\"redop\":\"sum\"", "\"redop\":\"\"" },
		{ "\"op\":\"all_reduce\"",
		  "\"op\":\"op-4567890123456789012345678901234567890123456789012345678901234\"" },
		{ "\"state\":\"completed\"", "\"state\":\"scheduled\"" },
		{ "\"state\":\"completed\"", "\"state\":\"started\"" },
		{ "\"state\":\"completed\"", "\"state\":\"entered\"" },
		{ "\"waited\":false", "\"waited\":true" },
		{ "\"waited\":false", "\"waited\":false,\"captured\":false" },
		{ "\"waited\":false", "\"waited\":false,\"captured\":1" },
		{ "\"retired\":true", "\"retired\":1" },
		{ "\"op_id\":100", "\"op_id\":\"100\"" },
		{ "\"input_sizes\":[[1048576]]", "\"input_sizes\":[[1048576]],\"captured\":true" },
		{ "\"redop\":\"sum\"}", "\"redop\":\"sum\",\"captured\":true}" },
		/* An all_gather's size ratio: 32 bits, after "captured". */
		{ "\"size_ratio\":3", "\"size_ratio\":4294967295" },
		{ "\"size_ratio\":3", "\"size_ratio\":4294967296" },
		{ "\"size_ratio\":3", "\"size_ratio\":-3" },
		{ "\"size_ratio\":3", "\"size_ratio\":null" },
		{ "\"size_ratio\":3", "\"size_ratio\":03" },
		{ "\"size_ratio\":3", "\"captured\":true,\"size_ratio\":3" },
		{ "\"size_ratio\":3", "\"size_ratio\":3,\"captured\":true" },
		{ "\"waited\":false", "\"waited\":false,\"size_ratio\":0" },
	};
	static const struct {
		const char *from, *to;
	} copies[] = {
		{ "\"collective_seq_id\"", "\"process_group\":[\"c9\",\"d\"],\"collective_seq_id\"" },
		{ "\"collective_seq_id\"", "\"process_group\":[1],\"collective_seq_id\"" },
		{ "\"collective_seq_id\"", "\"process_group\":[\"c9\"],\"collective_seq_id\"" },
		{ "\"record_id\"", "\"process_group\":[\"c9\",\"d\"],\"record_id\"" },
		{ "\"time_created_ns\"", "\"op_id\":7,\"profiling_name\":\"mpi:x\",\"time_created_ns\"" },
		{ "\"time_created_ns\"", "\"profiling_name\":7,\"time_created_ns\"" },
		{ "\"state\"", "\"input_sizes\":[[5]],\"input_dtypes\":[\"int\"],\"state\"" },
		{ "\"state\"", "\"output_sizes\":[[5]],\"state\"" },
		{ "\"state\"", "\"input_sizes\":[[5,2]],\"state\"" },
		{ "\"is_p2p\"", "\"retired\":false,\"is_p2p\"" },
		{ "\"is_p2p\"", "\"retired\":1,\"is_p2p\"" },
		{ "\"is_p2p\"", "\"retired\":true,\"retired\":true,\"is_p2p\"" },
		{ "\"op\"", "\"op_id\":7,\"op\"" },
	};
	const bool summary = *(const bool *)*state;
	struct fr_trace t;
	const char *entries;
	char *text, *v;
	size_t len, start, full, stop;

	make_rich_trace(&t);
	if (summary) {
		/* A summary's entries, without PyTorch's copies (1.10). */
		t.summary = calloc(1, sizeof(*t.summary));
		assert_non_null(t.summary);
		snprintf(t.summary->node, sizeof(t.summary->node), "nodeA");
		t.summary->full_dump = strdup("/var/lib/flightrec/rank-0.json");
	}
	assert_int_equal(fr_dump_serialize(&t, &text, &len), 0);
	fr_trace_free(&t);
	assert_true((strstr(text, "\"process_group\"") == NULL) == summary);
	entries = strstr(text, "\"entries\":[{\"record_id\"");
	assert_non_null(entries);
	expect_written_agrees(text, "as written", 0);
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		/* A summary has no copies to edit. */
		if (summary && !strstr(text, values[i].from))
			continue;
		v = edit(text, values[i].from, values[i].to);
		expect_written_agrees(v, values[i].to, i);
		free(v);
	}
	/* Copies put back, some, in their place or not, well-formed or not. */
	for (size_t i = 0; summary && i < sizeof(copies) / sizeof(copies[0]); i++) {
		v = edit(text, copies[i].from, copies[i].to);
		expect_written_agrees(v, copies[i].to, i);
		free(v);
	}
	/* Every byte of the entries removed, doubled or replaced: by each of
	 * `bytes` in the first two entries, by three of them (in turn) in the
	 * others. */
	start = (size_t)(entries - text) + 11;
	full = start + 1400 < len ? start + 1400 : len;
	stop = (size_t)(strstr(entries, "],\"threads\"") - text);
	v = malloc(len + 2);
	assert_non_null(v);
	for (size_t pos = start; pos < stop; pos++) {
		for (size_t b = 0; b < sizeof(bytes) - 1; b++) {
			if (text[pos] == bytes[b] ||
			    (pos >= full && (b + pos) % (sizeof(bytes) - 1) >= 3))
				continue;
			memcpy(v, text, len + 1);
			v[pos] = bytes[b];
			expect_written_agrees(v, "a byte replaced", pos);
		}
		memcpy(v, text, pos);
		memcpy(v + pos, text + pos + 1, len - pos);
		expect_written_agrees(v, "a byte removed", pos);
		memcpy(v, text, pos + 1);
		memcpy(v + pos + 1, text + pos, len - pos + 1);
		expect_written_agrees(v, "a byte doubled", pos);
	}
	free(v);
	free(text);
}

static void test_read_too_big(void **state)
{
	char *dir = make_temp_dir();
	char *path = join(dir, "huge.json");
	struct fr_trace t;
	char err[512];
	int fd;

	(void)state;
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	/* Sparse: costs no disk. */
	assert_int_equal(ftruncate(fd, (1ll << 30) + 1), 0);
	close(fd);
	assert_int_equal(fr_dump_read_file(path, &t, err, sizeof(err)), -EFBIG);
	assert_contains(err, "huge.json");
	assert_zeroed(&t);
	free(path);
	remove_dir(dir);
}

/*
 * The readers open a file of an incident directory as it is: a FIFO (which
 * a blocking open would wait on forever: a test that hangs is a failure
 * of the runner's time limit), a socket and a symbolic link, even to a
 * good file, are refused with the path and what it is; so is an empty
 * manifest.
 */
static void test_read_special_files(void **state)
{
	char *dir = make_temp_dir();
	char *fifo = join(dir, "rank-1.json");
	char *link = join(dir, "rank-2.json");
	char *empty = join(dir, "manifest.json");
	char *good = data_path("good-rank-0.json");
	struct fr_manifest m;
	struct fr_trace t;
	struct stat st;
	char err[512];
	int fd;

	(void)state;
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(symlink(good, link), 0);
	fd = open(empty, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);

	assert_int_equal(fr_dump_read_file(fifo, &t, err, sizeof(err)), -EINVAL);
	assert_contains(err, fifo);
	assert_contains(err, "a FIFO, not a regular file");
	assert_zeroed(&t);
	assert_int_equal(fr_manifest_read_file(fifo, &m, err, sizeof(err)), -EINVAL);
	assert_contains(err, "a FIFO");

	assert_int_equal(fr_dump_read_file(link, &t, err, sizeof(err)), -ELOOP);
	assert_contains(err, link);
	assert_contains(err, "a symbolic link, not followed");
	assert_int_equal(fr_dump_open(link, &st, err, sizeof(err)), -ELOOP);

	assert_int_equal(fr_manifest_read_file(empty, &m, err, sizeof(err)), -EPROTO);
	assert_contains(err, empty);
	assert_contains(err, "an empty file");

	assert_int_equal(fr_dump_open(dir, &st, err, sizeof(err)), -EISDIR);
	fd = fr_dump_open(good, &st, err, sizeof(err));
	assert_true(fd >= 0);
	assert_true(S_ISREG(st.st_mode) && st.st_size > 0);
	close(fd);

	free(good);
	free(empty);
	free(link);
	free(fifo);
	remove_dir(dir);
}

int main(void)
{
	static const bool dump = false, summary = true;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_names),
		cmocka_unit_test(test_crash_function),
		cmocka_unit_test(test_trace_growth),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_round_trip_crash),
		cmocka_unit_test(test_read_bad_crash),
		cmocka_unit_test(test_round_trip_exit),
		cmocka_unit_test(test_read_bad_exit),
		cmocka_unit_test(test_round_trip_nccl_error),
		cmocka_unit_test(test_round_trip_every_status),
		cmocka_unit_test(test_document_shape),
		cmocka_unit_test(test_read_good),
		cmocka_unit_test(test_read_truncated),
		cmocka_unit_test(test_read_future_version),
		cmocka_unit_test(test_read_not_a_dump),
		cmocka_unit_test(test_read_bad_entry_type),
		cmocka_unit_test(test_read_missing_file),
		cmocka_unit_test(test_read_pytorch_entry),
		cmocka_unit_test(test_read_bad_fields),
		cmocka_unit_test(test_read_pytorch_start_time),
		cmocka_unit_test(test_unknown_members),
		cmocka_unit_test(test_read_world_size_bounds),
		cmocka_unit_test(test_round_trip_python),
		cmocka_unit_test(test_round_trip_python_entry),
		cmocka_unit_test(test_parse_not_json),
		cmocka_unit_test(test_text_and_tree_agree),
		cmocka_unit_test_prestate(test_written_entries_agree, (void *)&dump),
		cmocka_unit_test_prestate(test_written_entries_agree, (void *)&summary),
		cmocka_unit_test(test_read_too_big),
		cmocka_unit_test(test_read_special_files),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
