/*
 * Traces, test data and temporary directories for the tests of dumps and
 * manifests (test_dump.c, test_files.c, test_manifest.c, test_analyze.c),
 * and the comparisons of what was written with what was read back.
 */
#ifndef FR_TEST_DUMP_FIXTURES_H
#define FR_TEST_DUMP_FIXTURES_H

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
#include <unistd.h>

#include <cmocka.h>

#include "dump.h"
#include "trace.h"

static inline const char *data_dir(void)
{
	const char *d = getenv("FR_TEST_DATA");

	return d && *d ? d : "tests/data";
}

static inline char *data_path(const char *name)
{
	char *p;

	assert_true(asprintf(&p, "%s/dumps/%s", data_dir(), name) > 0);
	return p;
}

static inline void copy_str(char *dst, size_t cap, const char *src)
{
	assert_true(strlen(src) < cap);
	strcpy(dst, src);
}

#define COPY(dst, src) copy_str((dst), sizeof(dst), (src))

static inline struct fr_comm *add_comm(struct fr_trace *t, size_t *cap, const char *id,
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

static inline struct fr_op *add_op(struct fr_trace *t, size_t *cap, const char *comm,
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
static inline void make_rich_trace(struct fr_trace *t)
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
static inline bool ops_same(const struct fr_op *a, const struct fr_op *b)
{
	struct fr_op x = *a, y = *b;

	if (strcmp(a->comm, b->comm) || strcmp(a->dtype, b->dtype) || strcmp(a->redop, b->redop))
		return false;
	x.comm = x.dtype = x.redop = y.comm = y.dtype = y.redop = NULL;
	return memcmp(&x, &y, sizeof(x)) == 0;
}

static inline void assert_ops_equal(const struct fr_op *a, const struct fr_op *b)
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

static inline void assert_comms_equal(const struct fr_comm *a, const struct fr_comm *b)
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
static inline void assert_traces_equal_but_threads(const struct fr_trace *a,
						   const struct fr_trace *b)
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

static inline void assert_traces_equal(const struct fr_trace *a, const struct fr_trace *b)
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

static inline void assert_zeroed(const struct fr_trace *t)
{
	static const struct fr_trace zero;

	assert_memory_equal(t, &zero, sizeof(zero));
}

static inline void assert_contains(const char *haystack, const char *needle)
{
	if (!strstr(haystack, needle))
		fail_msg("\"%s\" does not contain \"%s\"", haystack, needle);
}

static inline char *make_temp_dir(void)
{
	char *dir = strdup("/tmp/fr-test-dump.XXXXXX");

	assert_non_null(dir);
	assert_non_null(mkdtemp(dir));
	return dir;
}

static inline char *join(const char *dir, const char *name)
{
	char *p;

	assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

static inline void remove_dir(char *dir)
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

/* A manifest file from the test data (tests/data/<rel>); caller frees. */
static inline char *data_file(const char *rel)
{
	char *p;

	assert_true(asprintf(&p, "%s/%s", data_dir(), rel) > 0);
	return p;
}

#endif
