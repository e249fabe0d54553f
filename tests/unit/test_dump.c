/*
 * Dump and manifest reading/writing (dumps/dump.c) and the trace model
 * (dumps/trace.c).
 */
/* For asprintf(). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "dump.h"
#include "trace.h"

/*
 * write() is replaced for the whole test program so that the atomic writer
 * can be made to see what disks and signals do to it: short writes, EINTR,
 * and a full disk. Descriptors 0-2 are always passed through.
 */
enum write_mode { WRITE_PASS, WRITE_CHOPPY, WRITE_FULL_AFTER };

static enum write_mode write_mode;
static size_t write_full_after;  /* WRITE_FULL_AFTER: bytes accepted before ENOSPC */
static size_t write_written;
static unsigned write_calls, write_eintrs;

ssize_t write(int fd, const void *buf, size_t n)
{
	if (fd > 2 && write_mode == WRITE_CHOPPY) {
		/* Every other call is interrupted; the rest take 7 bytes at most. */
		if (write_calls++ % 2 == 0) {
			write_eintrs++;
			errno = EINTR;
			return -1;
		}
		if (n > 7)
			n = 7;
	} else if (fd > 2 && write_mode == WRITE_FULL_AFTER) {
		write_calls++;
		if (write_written >= write_full_after) {
			errno = ENOSPC;
			return -1;
		}
		if (n > write_full_after - write_written)
			n = write_full_after - write_written;
		write_written += n;
	}
	return syscall(SYS_write, fd, buf, n);
}

static void write_reset(enum write_mode mode)
{
	write_mode = mode;
	write_full_after = 0;
	write_written = 0;
	write_calls = 0;
	write_eintrs = 0;
}

/* Runs after each write test, so that a failed one does not disturb the next. */
static int write_teardown(void **state)
{
	(void)state;
	write_reset(WRITE_PASS);
	return 0;
}

static const char *data_dir(void)
{
	const char *d = getenv("FR_TEST_DATA");

	return d && *d ? d : "tests/data";
}

static char *data_path(const char *name)
{
	char *p;

	assert_true(asprintf(&p, "%s/dumps/%s", data_dir(), name) > 0);
	return p;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
	assert_true(strlen(src) < cap);
	strcpy(dst, src);
}

#define COPY(dst, src) copy_str((dst), sizeof(dst), (src))

static struct fr_comm *add_comm(struct fr_trace *t, size_t *cap, const char *id,
				const char *desc, uint32_t rank, uint32_t size,
				const uint32_t *members)
{
	struct fr_comm *c = fr_trace_add_comm(t, cap);

	assert_non_null(c);
	COPY(c->id, id);
	COPY(c->desc, desc);
	c->rank = rank;
	c->size = size;
	c->members = calloc(size, sizeof(*c->members));
	assert_non_null(c->members);
	memcpy(c->members, members, size * sizeof(*members));
	return c;
}

static struct fr_op *add_op(struct fr_trace *t, size_t *cap, const char *comm,
			    enum fr_op_type type, enum fr_op_state state, uint64_t seq)
{
	struct fr_op *op = fr_trace_add_op(t, cap);

	assert_non_null(op);
	op->record_id = t->nops + 99;
	op->comm = fr_trace_str(t, comm);
	assert_non_null(op->comm);
	op->type = type;
	op->state = state;
	op->is_p2p = !fr_op_is_collective(type);
	op->seq = seq;
	op->peer = -1;
	op->root = -1;
	op->peer_in_comm = -1;
	op->t_entered_ns = 1700000000000000000ull + t->nops * 1000;
	op->t_started_ns = op->t_entered_ns;
	if (state == FR_STATE_COMPLETED)
		op->t_completed_ns = op->t_entered_ns + 500;
	return op;
}

/* A trace that uses every field, in every shape a dump can hold. */
static void make_rich_trace(struct fr_trace *t)
{
	static const uint32_t world[] = { 0, 1, 2, 3, 4, 5 };
	static const uint32_t odd[] = { 1, 3, 5 };
	size_t ccap = 0, ocap = 0;
	struct fr_comm *c;
	struct fr_op *op;
	struct fr_thread *th;

	memset(t, 0, sizeof(*t));
	t->status = FR_RANK_DUMPED;
	COPY(t->job, "job-rt");
	t->rank = 3;
	t->world_size = 6;
	COPY(t->host, "host-\"quoted\"\\back");
	t->pid = 4242;
	COPY(t->comm_lib, "Open MPI v4.1.4");
	COPY(t->incident, "inc-77");
	COPY(t->reason, "rank 5 unresponsive for 30 s");
	t->time_ns = 1700000123456789012ull;
	t->dropped = 5000;

	c = add_comm(t, &ccap, "c0", "MPI_COMM_WORLD", 3, 6, world);
	c->last_entered = 11;
	c->last_completed = 10;
	c = add_comm(t, &ccap, "c0.split.2", "split of world", 1, 3, odd);
	c->last_entered = 4;
	c->last_completed = 4;

	op = add_op(t, &ocap, "c0", FR_OP_ALL_REDUCE,
		    FR_STATE_COMPLETED, 10);
	op->count = 1u << 20;
	op->bytes = 8u << 20;
	op->dtype = "double";
	op->redop = "sum";

	op = add_op(t, &ocap, "c0.split.2", FR_OP_REDUCE, FR_STATE_COMPLETED, 4);
	op->root = 5;
	op->peer_in_comm = 2;
	op->count = 7;
	op->bytes = 28;
	op->dtype = "int32";
	op->redop = "max";

	/* A non-blocking send that nobody waited on: it never blocked. */
	op = add_op(t, &ocap, "c0", FR_OP_SEND, FR_STATE_COMPLETED, 2);
	op->peer = 4;
	op->nonblocking = true;
	op->t_started_ns = 0;
	op->count = 3;
	op->bytes = 3;
	op->dtype = "derived";

	/* As an NCCL rank records it: the peer known only in the communicator. */
	op = add_op(t, &ocap, "c0", FR_OP_RECV, FR_STATE_ENTERED, 3);
	op->peer = -1;
	op->peer_in_comm = 2;
	op->count = 9;
	op->bytes = 72;
	op->dtype = "int64";

	op = add_op(t, &ocap, "c0", FR_OP_BARRIER, FR_STATE_ENTERED, 11);

	/* An Irecv the rank now waits on, since well after posting it. */
	op = add_op(t, &ocap, "c0", FR_OP_RECV, FR_STATE_ENTERED, 4);
	op->peer = 1;
	op->nonblocking = true;
	op->waited = true;
	op->t_started_ns = op->t_entered_ns + 777;
	op->count = 1;
	op->bytes = 8;
	op->dtype = "double";

	op = add_op(t, &ocap, "c0", FR_OP_FINALIZE, FR_STATE_ENTERED, 12);

	/* On a GPU stream: one the device has reached, one queued behind it,
	 * and one captured into a CUDA graph (completed at once). */
	op = add_op(t, &ocap, "c0.split.2", FR_OP_ALL_GATHER, FR_STATE_ENTERED, 5);
	op->gpu = op->started = true;
	op->size_ratio = 3;	/* as read from a PyTorch entry */
	op->t_started_ns = op->t_entered_ns + 1000;
	op = add_op(t, &ocap, "c0.split.2", FR_OP_BROADCAST, FR_STATE_ENTERED, 6);
	op->gpu = true;
	op->root = 1;
	op->peer_in_comm = 0;
	op->t_started_ns = 0;
	op = add_op(t, &ocap, "c0.split.2", FR_OP_ALL_REDUCE, FR_STATE_COMPLETED, 3);
	op->captured = true;

	t->nthreads = 2;
	t->threads = calloc(2, sizeof(*t->threads));
	assert_non_null(t->threads);
	th = &t->threads[0];
	th->tid = 4242;
	COPY(th->name, "main");
	th->current = false;
	th->nframes = 3;
	th->frames = calloc(3, sizeof(*th->frames));
	assert_non_null(th->frames);
	th->frames[0].name = strdup("PMPI_Barrier");
	th->frames[0].offset = 0x1c;
	th->frames[0].ip = 0x7ffff7a01234ull;
	th->frames[1].name = NULL;
	th->frames[1].offset = 0;
	th->frames[1].ip = 0xffffffffffffffffull;
	th->frames[2].name = strdup("main");
	th->frames[2].offset = 99;
	th->frames[2].ip = 0x401000;
	th = &t->threads[1];
	th->tid = 4250;
	COPY(th->name, "fr-agent");
	th->current = true;
}

/* Every field alike, strings by their text. */
static bool ops_same(const struct fr_op *a, const struct fr_op *b)
{
	struct fr_op x = *a, y = *b;

	if (strcmp(a->comm, b->comm) || strcmp(a->dtype, b->dtype) || strcmp(a->redop, b->redop))
		return false;
	x.comm = x.dtype = x.redop = y.comm = y.dtype = y.redop = NULL;
	return memcmp(&x, &y, sizeof(x)) == 0;
}

static void assert_ops_equal(const struct fr_op *a, const struct fr_op *b)
{
	assert_int_equal(a->record_id, b->record_id);
	assert_string_equal(a->comm, b->comm);
	assert_int_equal(a->type, b->type);
	assert_int_equal(a->state, b->state);
	assert_int_equal(a->is_p2p, b->is_p2p);
	assert_int_equal(a->nonblocking, b->nonblocking);
	assert_int_equal(a->waited, b->waited);
	/* Dumps tell a GPU operation apart while it is in flight. */
	assert_int_equal(a->gpu && a->state == FR_STATE_ENTERED, b->gpu);
	assert_int_equal(a->started, b->started);
	assert_int_equal(a->captured, b->captured);
	assert_int_equal(a->seq, b->seq);
	assert_int_equal(a->peer, b->peer);
	assert_int_equal(a->root, b->root);
	assert_int_equal(a->peer_in_comm, b->peer_in_comm);
	assert_int_equal(a->count, b->count);
	assert_int_equal(a->size_ratio, b->size_ratio);
	assert_int_equal(a->bytes, b->bytes);
	assert_string_equal(a->dtype, b->dtype);
	assert_string_equal(a->redop, b->redop);
	assert_int_equal(a->t_entered_ns, b->t_entered_ns);
	assert_int_equal(a->t_started_ns, b->t_started_ns);
	assert_int_equal(a->t_completed_ns, b->t_completed_ns);
}

static void assert_comms_equal(const struct fr_comm *a, const struct fr_comm *b)
{
	assert_string_equal(a->id, b->id);
	assert_string_equal(a->desc, b->desc);
	assert_int_equal(a->rank, b->rank);
	assert_int_equal(a->size, b->size);
	assert_memory_equal(a->members, b->members, a->size * sizeof(*a->members));
	assert_int_equal(a->last_entered, b->last_entered);
	assert_int_equal(a->last_completed, b->last_completed);
}

/* Everything but threads, which manifests leave out. */
static void assert_traces_equal_but_threads(const struct fr_trace *a, const struct fr_trace *b)
{
	assert_int_equal(a->status, b->status);
	assert_string_equal(a->job, b->job);
	assert_int_equal(a->rank, b->rank);
	assert_int_equal(a->world_size, b->world_size);
	assert_string_equal(a->host, b->host);
	assert_int_equal(a->pid, b->pid);
	assert_string_equal(a->comm_lib, b->comm_lib);
	assert_string_equal(a->incident, b->incident);
	assert_string_equal(a->reason, b->reason);
	assert_int_equal(a->time_ns, b->time_ns);
	assert_int_equal(a->dropped, b->dropped);
	assert_int_equal(a->ncomms, b->ncomms);
	for (size_t i = 0; i < a->ncomms; i++)
		assert_comms_equal(&a->comms[i], &b->comms[i]);
	assert_int_equal(a->nops, b->nops);
	for (size_t i = 0; i < a->nops; i++)
		assert_ops_equal(&a->ops[i], &b->ops[i]);
}

static void assert_traces_equal(const struct fr_trace *a, const struct fr_trace *b)
{
	assert_traces_equal_but_threads(a, b);
	assert_int_equal(a->nthreads, b->nthreads);
	for (size_t i = 0; i < a->nthreads; i++) {
		const struct fr_thread *x = &a->threads[i], *y = &b->threads[i];

		assert_int_equal(x->tid, y->tid);
		assert_string_equal(x->name, y->name);
		assert_int_equal(x->current, y->current);
		assert_int_equal(x->nframes, y->nframes);
		for (size_t j = 0; j < x->nframes; j++) {
			if (x->frames[j].name)
				assert_string_equal(x->frames[j].name, y->frames[j].name);
			else
				assert_null(y->frames[j].name);
			assert_int_equal(x->frames[j].offset, y->frames[j].offset);
			assert_int_equal(x->frames[j].ip, y->frames[j].ip);
		}
	}
}

static void assert_zeroed(const struct fr_trace *t)
{
	static const struct fr_trace zero;

	assert_memory_equal(t, &zero, sizeof(zero));
}

static void assert_contains(const char *haystack, const char *needle)
{
	if (!strstr(haystack, needle))
		fail_msg("\"%s\" does not contain \"%s\"", haystack, needle);
}

/* ------------------------------------------------------------------ */

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
	struct fr_trace t;
	const char *entries;
	char *text, *v;
	size_t len, start, full, stop;

	(void)state;
	make_rich_trace(&t);
	assert_int_equal(fr_dump_serialize(&t, &text, &len), 0);
	fr_trace_free(&t);
	entries = strstr(text, "\"entries\":[{\"record_id\"");
	assert_non_null(entries);
	expect_written_agrees(text, "as written", 0);
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		v = edit(text, values[i].from, values[i].to);
		expect_written_agrees(v, values[i].to, i);
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

/* ------------------------------------------------------------------ */

static char *make_temp_dir(void)
{
	char *dir = strdup("/tmp/fr-test-dump.XXXXXX");

	assert_non_null(dir);
	assert_non_null(mkdtemp(dir));
	return dir;
}

static char *join(const char *dir, const char *name)
{
	char *p;

	assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = malloc(1 << 16);

	assert_non_null(f);
	assert_non_null(buf);
	*len = fread(buf, 1, 1 << 16, f);
	fclose(f);
	return buf;
}

/* Files in dir, other than . and .., counted; asserts that none is a temp file. */
static unsigned count_files_no_temp(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	unsigned n = 0;

	assert_non_null(d);
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (strstr(de->d_name, ".tmp."))
			fail_msg("temporary file %s left in %s", de->d_name, dir);
		n++;
	}
	closedir(d);
	return n;
}

static void remove_dir(char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	assert_non_null(d);
	while ((de = readdir(d))) {
		char *p;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		p = join(dir, de->d_name);
		unlink(p);
		free(p);
	}
	closedir(d);
	assert_int_equal(rmdir(dir), 0);
	free(dir);
}

/* Runs `sh -c cmd` and asserts it succeeded. */
static void sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	assert_int_equal(system(cmd), 0);
}

/*
 * fr_dir_open() creates what is missing with the mode asked for, follows
 * the caller's own links, and refuses a component that is a file, another
 * user's directory, or another user's link, naming it; what was refused is
 * never written through. Another user is played by chown, so as root only.
 */
static void test_dir_open_trust(void **state)
{
	char *dir = make_temp_dir();
	char err[PATH_MAX + 64], path[PATH_MAX];
	struct stat st;
	int fd;

	(void)state;
	/* Created 0700, whatever the umask; the dump inside 0600. */
	snprintf(path, sizeof(path), "%s/a//b/./c", dir);
	fd = fr_dir_open(AT_FDCWD, path, 0700, err, sizeof(err));
	assert_true(fd >= 0);
	assert_int_equal(fr_write_file_at(fd, "rank-0.json", "{}", 2, 0600), 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/a/b/c/rank-0.json", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	snprintf(path, sizeof(path), "%s/a/b", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	/* The daemon's files: 0640. */
	snprintf(path, sizeof(path), "%s/a/daemon.json", dir);
	assert_int_equal(fr_write_file_atomic_mode(path, "{}", 2, 0640), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	/* A relative path, from a directory's descriptor. */
	fd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	{
		int sub = fr_dir_open(fd, "a/b", 0700, err, sizeof(err));

		assert_true(sub >= 0);
		close(sub);
	}
	close(fd);
	/* A file where a directory should be. */
	sh("touch %s/file", dir);
	snprintf(path, sizeof(path), "%s/file/x", dir);
	assert_int_equal(fr_dir_open(AT_FDCWD, path, 0700, err, sizeof(err)), -ENOTDIR);
	assert_non_null(strstr(err, "/file exists and is not a directory"));
	/* Our own link is followed. */
	sh("ln -s %s/a %s/mine", dir, dir);
	snprintf(path, sizeof(path), "%s/mine/b", dir);
	fd = fr_dir_open(AT_FDCWD, path, 0700, err, sizeof(err));
	assert_true(fd >= 0);
	close(fd);
	if (geteuid() == 0) {
		/* Another user's link and directory are refused. */
		sh("mkdir -m 777 %s/loot && ln -s %s/loot %s/planted && chown -h 65534 %s/planted",
		   dir, dir, dir, dir);
		snprintf(path, sizeof(path), "%s/planted/inc", dir);
		assert_int_equal(fr_dir_open(AT_FDCWD, path, 0700, err, sizeof(err)), -ELOOP);
		assert_non_null(strstr(err, "/planted is a symbolic link owned by another user"));
		snprintf(path, sizeof(path), "%s/loot/inc", dir);
		assert_int_not_equal(access(path, F_OK), 0);
		sh("mkdir %s/theirs && chown 65534 %s/theirs", dir, dir);
		snprintf(path, sizeof(path), "%s/theirs", dir);
		assert_int_equal(fr_dir_open(AT_FDCWD, path, 0700, err, sizeof(err)), -EPERM);
		assert_non_null(strstr(err, "/theirs is a directory owned by another user"));
		/* fr_mkdir_p (the daemon's) refuses them alike. */
		snprintf(path, sizeof(path), "%s/planted/x", dir);
		assert_int_equal(fr_mkdir_p(path), -ELOOP);
	}
	sh("rm -rf %s", dir);
	free(dir);
}

static void test_atomic_write_and_replace(void **state)
{
	char *dir = make_temp_dir();
	char *path = join(dir, "rank-3.json");
	char *got;
	size_t len;
	struct stat st;

	(void)state;
	assert_int_equal(fr_write_file_atomic(path, "first version", 13), 0);
	got = read_all(path, &len);
	assert_int_equal(len, 13);
	assert_memory_equal(got, "first version", 13);
	free(got);
	assert_int_equal(stat(path, &st), 0);
	{
		mode_t mask = umask(0);

		umask(mask);
		assert_int_equal(st.st_mode & 0777, 0644 & ~mask);
	}

	assert_int_equal(fr_write_file_atomic(path, "2nd", 3), 0);
	got = read_all(path, &len);
	assert_int_equal(len, 3);
	assert_memory_equal(got, "2nd", 3);
	free(got);

	assert_int_equal(fr_write_file_atomic(path, "", 0), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(count_files_no_temp(dir), 1);

	free(path);
	remove_dir(dir);
}

static void test_atomic_write_missing_dir(void **state)
{
	char *dir = make_temp_dir();
	char *path = join(dir, "no-such-dir/rank-0.json");

	(void)state;
	assert_int_equal(fr_write_file_atomic(path, "x", 1), -ENOENT);
	assert_int_equal(count_files_no_temp(dir), 0);
	free(path);
	remove_dir(dir);
}

/* Short writes and EINTR must not lose or repeat a byte. */
static void test_atomic_write_choppy(void **state)
{
	char *dir = make_temp_dir();
	char *path = join(dir, "manifest.json");
	char text[1000];
	char *got;
	size_t len;

	(void)state;
	for (size_t i = 0; i < sizeof(text); i++)
		text[i] = (char)('a' + i % 26);
	write_reset(WRITE_CHOPPY);
	assert_int_equal(fr_write_file_atomic(path, text, sizeof(text)), 0);
	assert_true(write_eintrs > 0);
	write_reset(WRITE_PASS);
	got = read_all(path, &len);
	assert_int_equal(len, sizeof(text));
	assert_memory_equal(got, text, sizeof(text));
	free(got);
	free(path);
	remove_dir(dir);
}

/* A full disk is reported as such, and the previous file survives whole. */
static void test_atomic_write_enospc(void **state)
{
	char *dir = make_temp_dir();
	char *path = join(dir, "rank-1.json");
	char big[4096];
	char *got;
	size_t len;

	(void)state;
	memset(big, 'x', sizeof(big));
	assert_int_equal(fr_write_file_atomic(path, "old dump", 8), 0);
	write_reset(WRITE_FULL_AFTER);
	write_full_after = 1000;
	assert_int_equal(fr_write_file_atomic(path, big, sizeof(big)), -ENOSPC);
	assert_true(write_calls >= 2);
	write_reset(WRITE_PASS);

	got = read_all(path, &len);
	assert_int_equal(len, 8);
	assert_memory_equal(got, "old dump", 8);
	free(got);
	assert_int_equal(count_files_no_temp(dir), 1);
	free(path);
	remove_dir(dir);
}

/* A temporary file left by a crashed process with the same pid is no obstacle. */
static void test_atomic_write_stale_temp(void **state)
{
	char *dir = make_temp_dir();
	char *path = join(dir, "rank-2.json");
	char *tmp;
	char *got;
	size_t len;
	int fd;

	(void)state;
	assert_true(asprintf(&tmp, "%s.tmp.%ld", path, (long)getpid()) > 0);
	fd = open(tmp, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(fr_write_file_atomic(path, "fresh", 5), 0);
	got = read_all(path, &len);
	assert_int_equal(len, 5);
	free(got);
	assert_int_equal(count_files_no_temp(dir), 1);
	free(tmp);
	free(path);
	remove_dir(dir);
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

/* ------------------------------------------------------------------ */

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
/* fr-analyze over directories of dumps                                */
/* ------------------------------------------------------------------ */

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

/* ------------------------------------------------------------------ */
/* Manifest format 2: each communicator's members once                 */

/* A manifest file from the test data (tests/data/<rel>); caller frees. */
static char *data_file(const char *rel)
{
	char *p;

	assert_true(asprintf(&p, "%s/%s", data_dir(), rel) > 0);
	return p;
}

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
		cmocka_unit_test(test_status_names),
		cmocka_unit_test(test_trace_growth),
		cmocka_unit_test(test_round_trip),
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
		cmocka_unit_test(test_parse_not_json),
		cmocka_unit_test(test_text_and_tree_agree),
		cmocka_unit_test(test_written_entries_agree),
		cmocka_unit_test(test_read_too_big),
		cmocka_unit_test(test_read_special_files),
		cmocka_unit_test(test_atomic_write_and_replace),
		cmocka_unit_test(test_dir_open_trust),
		cmocka_unit_test(test_atomic_write_missing_dir),
		cmocka_unit_test_teardown(test_atomic_write_choppy, write_teardown),
		cmocka_unit_test_teardown(test_atomic_write_enospc, write_teardown),
		cmocka_unit_test(test_atomic_write_stale_temp),
		cmocka_unit_test(test_manifest_round_trip),
		cmocka_unit_test(test_manifest_bad_rank),
		cmocka_unit_test(test_manifest_world_zero),
		cmocka_unit_test(test_analyze_drops_rank_outside_world),
		cmocka_unit_test(test_analyze_manifest_world),
		cmocka_unit_test(test_analyze_other_json_files),
		cmocka_unit_test(test_analyze_nccl_partial_lists),
		cmocka_unit_test(test_manifest_v2_round_trip),
		cmocka_unit_test(test_manifest_old_and_new_read_alike),
		cmocka_unit_test(test_manifest_v2_refused),
		cmocka_unit_test(test_analyze_manifest_versions_agree),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
