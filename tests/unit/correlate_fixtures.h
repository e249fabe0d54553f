/*
 * Jobs built in memory for the correlation engine's tests, one trace per
 * rank, and the assertions they share: test_correlate.c, test_communicators.c,
 * test_mismatch.c, test_straggler.c and test_verdict.c each build the jobs
 * they need from these.
 */
#ifndef FR_TEST_CORRELATE_FIXTURES_H
#define FR_TEST_CORRELATE_FIXTURES_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "correlate.h"

#define NOW_NS 1700000000000000000ull
#define S(x) ((uint64_t)(x) * 1000000000ull)
#define MAX_RANKS 1024

/* One rank's evidence with the capacities fr_trace_add_*() track. */
struct ev {
	struct fr_trace t;
	size_t opcap;
	size_t commcap;
};

struct job {
	uint32_t world;
	struct ev *ev[MAX_RANKS];
	const struct fr_trace *traces[MAX_RANKS];
	struct fr_verdict v;
};

static inline struct job *job_new(uint32_t world)
{
	struct job *j = calloc(1, sizeof(*j));

	assert_non_null(j);
	j->world = world;
	return j;
}

static inline void job_free(struct job *j)
{
	for (uint32_t r = 0; r < MAX_RANKS; r++) {
		if (j->ev[r]) {
			fr_trace_free(&j->ev[r]->t);
			free(j->ev[r]);
		}
	}
	fr_verdict_free(&j->v);
	free(j);
}

/* Gives `rank` evidence with the given status, from host "node<rank>". */
static inline struct fr_trace *rank_new(struct job *j, uint32_t rank, enum fr_rank_status st)
{
	struct ev *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	e->t.status = st;
	e->t.rank = rank;
	e->t.world_size = j->world;
	snprintf(e->t.host, sizeof(e->t.host), "node%u", rank);
	e->t.pid = 1000 + rank;
	e->t.time_ns = NOW_NS;
	j->ev[rank] = e;
	return &e->t;
}

static inline void add_comm(struct job *j, uint32_t rank, const char *id, const uint32_t *members,
			    uint32_t n)
{
	struct fr_comm *c = fr_trace_add_comm(&j->ev[rank]->t, &j->ev[rank]->commcap);

	assert_non_null(c);
	snprintf(c->id, sizeof(c->id), "%s", id);
	snprintf(c->desc, sizeof(c->desc), "%s", id);
	c->size = n;
	c->members = calloc(n, sizeof(*c->members));
	assert_non_null(c->members);
	memcpy(c->members, members, n * sizeof(*members));
	for (uint32_t i = 0; i < n; i++)
		if (members[i] == rank)
			c->rank = i;
}

/* Every rank 0..n-1 (those with evidence) lists "world" of n ranks. */
static inline void add_world(struct job *j)
{
	uint32_t m[MAX_RANKS];

	for (uint32_t i = 0; i < j->world; i++)
		m[i] = i;
	for (uint32_t r = 0; r < j->world; r++)
		if (j->ev[r])
			add_comm(j, r, "world", m, j->world);
}

/* A job of `world` ranks, each with a dump that lists "world". */
static inline struct job *world_job(uint32_t world)
{
	struct job *j = job_new(world);

	for (uint32_t r = 0; r < world; r++)
		rank_new(j, r, FR_RANK_DUMPED);
	add_world(j);
	return j;
}

/*
 * What an NCCL rank knows of communicator `id` of `size` members: only its
 * own entry (comm rank `crank` is global rank `rank`), the others unknown.
 */
static inline void add_comm_own(struct job *j, uint32_t rank, const char *id, uint32_t size,
				uint32_t crank)
{
	uint32_t m[MAX_RANKS];

	for (uint32_t i = 0; i < size; i++)
		m[i] = FR_RANK_UNKNOWN;
	m[crank] = rank;
	add_comm(j, rank, id, m, size);
}

/* The verdict's known communicator members, in communicator order, as text. */
static inline void assert_comm_ranks(const struct fr_verdict *v, uint32_t size, const char *want)
{
	uint32_t known[MAX_RANKS];
	size_t n = 0;
	char buf[4096] = "";
	size_t len = 0;

	assert_int_equal(v->comm_size, size);
	for (uint32_t i = 0; i < v->comm_size; i++)
		if (v->comm_ranks[i] != FR_RANK_UNKNOWN)
			known[n++] = v->comm_ranks[i];
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%u", i ? "," : "",
					known[i]);
	assert_string_equal(buf, want);
}

/*
 * Appends an op entered `age_s` seconds before the trace's time, completed
 * or not, and advances the rank's progress counters on that communicator as
 * the agent would.
 */
static inline struct fr_op *add_op(struct job *j, uint32_t rank, const char *comm,
				   enum fr_op_type type, uint64_t seq, enum fr_op_state st,
				   uint64_t age_s)
{
	struct fr_trace *t = &j->ev[rank]->t;
	struct fr_op *op = fr_trace_add_op(t, &j->ev[rank]->opcap);
	struct fr_comm *c = (struct fr_comm *)fr_trace_comm(t, comm);

	assert_non_null(op);
	op->record_id = t->nops - 1;
	op->comm = fr_trace_str(t, comm);
	assert_non_null(op->comm);
	op->type = type;
	op->state = st;
	op->is_p2p = !fr_op_is_collective(type);
	op->seq = seq;
	op->peer = -1;
	op->root = -1;
	op->peer_in_comm = -1;
	op->count = type == FR_OP_BARRIER ? 0 : 1;
	op->bytes = op->count * 8;
	op->dtype = type == FR_OP_BARRIER ? "" : "double";
	if (type == FR_OP_ALL_REDUCE || type == FR_OP_REDUCE)
		op->redop = "sum";
	op->t_entered_ns = t->time_ns - S(age_s);
	if (st == FR_STATE_COMPLETED)
		op->t_completed_ns = op->t_entered_ns + 1000;
	if (c && !op->is_p2p) {
		if (seq > c->last_entered)
			c->last_entered = seq;
		if (st == FR_STATE_COMPLETED && seq > c->last_completed)
			c->last_completed = seq;
	}
	return op;
}

/* Completed all_reduce #1..#n on `comm` for `rank`, an hour ago. */
static inline void history(struct job *j, uint32_t rank, const char *comm, uint64_t n)
{
	for (uint64_t s = 1; s <= n; s++)
		add_op(j, rank, comm, FR_OP_ALL_REDUCE, s, FR_STATE_COMPLETED, 3600);
}

static inline struct fr_verdict *correlate(struct job *j)
{
	size_t n = 0;

	/* Handed over in reverse rank order: the engine must not care. */
	for (uint32_t r = MAX_RANKS; r-- > 0;)
		if (j->ev[r])
			j->traces[n++] = &j->ev[r]->t;
	assert_int_equal(fr_correlate(j->traces, n, j->world, &j->v), 0);
	return &j->v;
}

static inline void assert_ranks(const uint32_t *got, size_t n, const char *want)
{
	char buf[4096];

	fr_format_ranks(buf, sizeof(buf), got, n);
	assert_string_equal(buf, want);
}

static inline void assert_contains(const char *hay, const char *needle)
{
	if (!strstr(hay, needle))
		fail_msg("\"%s\" does not contain \"%s\"", hay, needle);
}

static inline uint32_t culprit_ranks(const struct fr_verdict *v, uint32_t *out)
{
	for (size_t i = 0; i < v->nculprits; i++)
		out[i] = v->culprits[i].rank;
	return (uint32_t)v->nculprits;
}

/*
 * Two communicators "a" and "b" over every rank of a `world`-rank job, with
 * three all_reduces done on each; then every rank calls all_reduce #4 on a
 * and then on b, except the ranks of `odd` (a string of '0' and '1' per
 * rank, '1' for odd), which call b first: each rank waits in the first it
 * called, so the job deadlocks.
 */
static inline struct job *order_job(uint32_t world, const char *odd)
{
	uint32_t m[MAX_RANKS];
	struct job *j = job_new(world);

	for (uint32_t r = 0; r < world; r++)
		m[r] = r;
	for (uint32_t r = 0; r < world; r++) {
		bool b_first = odd[r] == '1';

		rank_new(j, r, FR_RANK_DUMPED);
		add_comm(j, r, "a", m, world);
		add_comm(j, r, "b", m, world);
		history(j, r, "a", 3);
		history(j, r, "b", 3);
		add_op(j, r, b_first ? "b" : "a", FR_OP_ALL_REDUCE, 4, FR_STATE_ENTERED, 20);
	}
	return j;
}

/* The verdict's class `i`: its ranks as text, whether the majority, and
 * the communicator it waits in or called. */
static inline void assert_class(const struct fr_verdict *v, size_t i, const char *ranks,
				bool majority, const char *comm)
{
	assert_true(i < v->nclasses);
	assert_ranks(v->classes[i].ranks, v->classes[i].nranks, ranks);
	assert_int_equal(v->classes[i].majority, majority);
	assert_string_equal(v->classes[i].op.comm, comm);
}

/* Builds 4 ranks at all_reduce #5 on world; `odd` calls `type` instead. */
static inline struct job *mismatch_job(uint32_t odd, enum fr_op_type type)
{
	struct job *j = world_job(4);

	for (uint32_t r = 0; r < 4; r++) {
		struct fr_op *op;

		history(j, r, "world", 4);
		op = add_op(j, r, "world", r == odd ? type : FR_OP_ALL_REDUCE, 5,
			    FR_STATE_ENTERED, 3);
		if (op->type == FR_OP_BROADCAST) {
			op->root = 0;
			op->redop = "";
		}
	}
	return j;
}

#endif
