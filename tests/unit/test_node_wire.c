/*
 * Unit tests of the node daemons' messages (protocol/node_wire.c), beyond
 * what test_wire.c checks of every message (every truncation, a trailing
 * byte, buffers too small): round trips field by field, the values each
 * decoder refuses, the caps, runs of ranks, and a 100,000-rank world's
 * member list split over NODE_COMMS frames and put back together.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "node_wire.h"
#include "node_wire_samples.h"
#include "op.h"
#include "wire.h"

/* Encodes with the message's encoder into a heap frame; returns its length. */
#define ENCODE(n, m, out)                                                      \
	({                                                                     \
		size_t want_ = fr_wire_##n##_size(m);                          \
		int rc_;                                                       \
		*(out) = malloc(want_);                                        \
		assert_non_null(*(out));                                       \
		rc_ = fr_wire_##n##_encode((m), *(out), want_);                \
		assert_int_equal(rc_, (int)want_);                             \
		(size_t) rc_;                                                  \
	})

static void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void test_hello_roundtrip(void **state)
{
	struct fr_msg_node_hello m, out;
	uint8_t *buf;
	size_t len;

	(void)state;
	sample_node_hello(&m);
	len = ENCODE(node_hello, &m, &buf);
	assert_int_equal(buf[4], 4); /* version 4 */
	assert_int_equal(buf[6], FR_MSG_NODE_HELLO);
	assert_int_equal(fr_wire_node_hello_decode(buf + FR_WIRE_HEADER_SIZE,
						   len - FR_WIRE_HEADER_SIZE, &out), 0);
	assert_string_equal(out.node, "node-17.cluster");
	assert_int_equal(out.boot_id, 0x8877665544332211ull);
	assert_int_equal(out.protocol, 4);
	assert_int_equal(out.njobs, 2);
	assert_string_equal(out.jobs[1].job, "train.7");
	assert_int_equal(out.jobs[0].world_size, 100000);
	assert_int_equal(out.jobs[0].nranks, 1024);
	fr_wire_node_hello_free(&out);
	free(buf);

	m.njobs = FR_NODE_JOBS_MAX + 1;
	assert_int_equal(fr_wire_node_hello_encode(&m, NULL, 0), -EINVAL);
}

static void test_ranks_roundtrip_and_refusals(void **state)
{
	struct fr_msg_node_ranks m, out;
	uint8_t *buf;
	size_t len, first;

	(void)state;
	sample_node_ranks(&m);
	len = ENCODE(node_ranks, &m, &buf);
	assert_int_equal(fr_wire_node_ranks_decode(buf + FR_WIRE_HEADER_SIZE,
						   len - FR_WIRE_HEADER_SIZE, &out), 0);
	assert_int_equal(out.flags, FR_NODE_RANKS_FULL);
	assert_int_equal(out.nranks, 3);
	assert_memory_equal(out.ranks, sample_node_rank_list, sizeof(sample_node_rank_list));
	fr_wire_node_ranks_free(&out);

	/* The first entry's state byte: 6 (killed, protocol 7) is the last
	 * state, 7 is none; rank 16 is not in a world of 16. */
	first = FR_WIRE_HEADER_SIZE + 2 + strlen("job-42") + 4 + 1 + 4;
	buf[first + 4 + 4 + 2 + strlen("node-17")] = FR_NODE_RANK_KILLED;
	assert_int_equal(fr_wire_node_ranks_decode(buf + FR_WIRE_HEADER_SIZE,
						   len - FR_WIRE_HEADER_SIZE, &out), 0);
	assert_int_equal(out.ranks[0].state, FR_NODE_RANK_KILLED);
	fr_wire_node_ranks_free(&out);
	buf[first + 4 + 4 + 2 + strlen("node-17")] = FR_NODE_RANK_KILLED + 1;
	assert_int_equal(fr_wire_node_ranks_decode(buf + FR_WIRE_HEADER_SIZE,
						   len - FR_WIRE_HEADER_SIZE, &out), -EPROTO);
	buf[first + 4 + 4 + 2 + strlen("node-17")] = FR_NODE_RANK_CONNECTED;
	put_u32(buf + first, 16);
	assert_int_equal(fr_wire_node_ranks_decode(buf + FR_WIRE_HEADER_SIZE,
						   len - FR_WIRE_HEADER_SIZE, &out), -EPROTO);
	put_u32(buf + first, 15);
	/* Flags this build does not define. */
	buf[first - 5] = 2;
	assert_int_equal(fr_wire_node_ranks_decode(buf + FR_WIRE_HEADER_SIZE,
						   len - FR_WIRE_HEADER_SIZE, &out), -EPROTO);
	buf[first - 5] = 0;
	assert_int_equal(fr_wire_node_ranks_decode(buf + FR_WIRE_HEADER_SIZE,
						   len - FR_WIRE_HEADER_SIZE, &out), 0);
	fr_wire_node_ranks_free(&out);
	free(buf);

	m.flags = 2;
	assert_int_equal(fr_wire_node_ranks_size(&m) > 0, 1);
	assert_int_equal(fr_wire_node_ranks_encode(&m, NULL, 0), -EINVAL);
}

/* A full batch of ranks with every host at its limit fits one frame. */
static void test_ranks_batch_limit(void **state)
{
	struct fr_node_rank *ranks = calloc(FR_NODE_RANKS_BATCH + 1, sizeof(*ranks));
	struct fr_msg_node_ranks m = { .job = "j", .world_size = 100000, .ranks = ranks };
	struct fr_msg_node_ranks out;
	uint8_t *buf;
	size_t len;

	(void)state;
	assert_non_null(ranks);
	for (uint32_t i = 0; i <= FR_NODE_RANKS_BATCH; i++) {
		ranks[i].rank = i;
		memset(ranks[i].host, 'h', FR_HOST_MAX);
	}
	m.nranks = FR_NODE_RANKS_BATCH;
	len = ENCODE(node_ranks, &m, &buf);
	assert_true(len - FR_WIRE_HEADER_SIZE <= FR_WIRE_MAX_PAYLOAD);
	assert_int_equal(fr_wire_node_ranks_decode(buf + FR_WIRE_HEADER_SIZE,
						   len - FR_WIRE_HEADER_SIZE, &out), 0);
	assert_int_equal(out.nranks, FR_NODE_RANKS_BATCH);
	fr_wire_node_ranks_free(&out);
	free(buf);
	m.nranks = FR_NODE_RANKS_BATCH + 1;
	assert_int_equal(fr_wire_node_ranks_encode(&m, NULL, 0), -EINVAL);
	free(ranks);
}

static void test_comms_roundtrip_and_refusals(void **state)
{
	struct fr_msg_node_comms m, out;
	struct fr_node_map bad[2];
	uint8_t *buf;
	size_t len;

	(void)state;
	sample_node_comms(&m);
	len = ENCODE(node_comms, &m, &buf);
	assert_int_equal(fr_wire_node_comms_decode(buf + FR_WIRE_HEADER_SIZE,
						   len - FR_WIRE_HEADER_SIZE, &out), 0);
	assert_int_equal(out.ncomms, 3);
	assert_string_equal(out.comms[1].desc, "split of world");
	assert_int_equal(out.comms[1].nmaps, 2);
	assert_memory_equal(out.comms[1].maps, sample_node_split_maps, sizeof(sample_node_split_maps));
	assert_int_equal(out.comms[2].nmaps, 0);
	assert_null(out.comms[2].maps);
	fr_wire_node_comms_free(&out);
	free(buf);

	/* Runs outside the communicator, overlapping, empty, or reaching FR_RANK_UNKNOWN. */
	m.ncomms = 1;
	m.comms = &(struct fr_node_comm){ .id = "c", .size = 8, .nmaps = 2, .maps = bad };
	bad[0] = (struct fr_node_map){ 0, 0, 4 };
	bad[1] = (struct fr_node_map){ 4, 9, 4 };
	assert_true(fr_wire_node_comms_encode(&m, NULL, 0) == -EMSGSIZE);
	bad[1].count = 5;
	assert_int_equal(fr_wire_node_comms_encode(&m, NULL, 0), -EINVAL);
	bad[1] = (struct fr_node_map){ 3, 9, 1 };
	assert_int_equal(fr_wire_node_comms_encode(&m, NULL, 0), -EINVAL);
	bad[1] = (struct fr_node_map){ 5, 9, 0 };
	assert_int_equal(fr_wire_node_comms_encode(&m, NULL, 0), -EINVAL);
	bad[1] = (struct fr_node_map){ 5, FR_RANK_UNKNOWN - 1, 2 };
	assert_int_equal(fr_wire_node_comms_encode(&m, NULL, 0), -EINVAL);
	bad[1] = (struct fr_node_map){ 5, FR_RANK_UNKNOWN - 2, 2 };
	assert_int_equal(fr_wire_node_comms_encode(&m, NULL, 0), -EMSGSIZE);
}

static void test_maps_from_members(void **state)
{
	uint32_t members[] = { 0, 1, 2, 3, FR_RANK_UNKNOWN, 9, 10, 7, 8, FR_RANK_UNKNOWN };
	struct fr_node_map maps[10];

	(void)state;
	assert_int_equal(fr_node_maps_from_members(members, 10, maps), 3);
	assert_memory_equal(&maps[0], (&(struct fr_node_map){ 0, 0, 4 }), sizeof(maps[0]));
	assert_memory_equal(&maps[1], (&(struct fr_node_map){ 5, 9, 2 }), sizeof(maps[0]));
	assert_memory_equal(&maps[2], (&(struct fr_node_map){ 7, 7, 2 }), sizeof(maps[0]));
	assert_int_equal(fr_node_maps_from_members(members, 0, maps), 0);
	/* An NCCL rank's report: one known entry. */
	members[0] = FR_RANK_UNKNOWN;
	assert_int_equal(fr_node_maps_from_members(members, 4, maps), 1);
	assert_memory_equal(&maps[0], (&(struct fr_node_map){ 1, 1, 3 }), sizeof(maps[0]));
}

/*
 * World of 100,000 ranks in an order with no two consecutive ranks side by
 * side (the worst case: one run per member, 1.2 MB of runs), plus a small
 * communicator: split over frames, none over the payload limit, and put
 * back together to the same list. A world in order is one run.
 */
static void test_comms_100k_world_split(void **state)
{
	const uint32_t size = 100000;
	uint32_t *members = malloc(size * sizeof(*members));
	uint32_t *back = malloc(size * sizeof(*back));
	struct fr_node_map *maps = malloc(size * sizeof(*maps));
	struct fr_node_comm comms[2];
	struct fr_node_comm slots[4];
	struct fr_node_cursor at = { 0, 0 };
	struct fr_msg_node_comms m = { .job = "big-job" };
	uint32_t small[] = { 17, 18, 19, 20 };
	int frames = 0, pieces_of_world = 0;

	(void)state;
	assert_non_null(members);
	assert_non_null(back);
	assert_non_null(maps);
	for (uint32_t i = 0; i < size; i++) {
		members[i] = (uint32_t)(((uint64_t)i * 7919) % size);
		back[i] = FR_RANK_UNKNOWN;
	}
	comms[0] = (struct fr_node_comm){ .id = "world", .desc = "MPI_COMM_WORLD", .size = size };
	comms[0].nmaps = fr_node_maps_from_members(members, size, maps);
	comms[0].maps = maps;
	assert_int_equal(comms[0].nmaps, size);
	comms[1] = (struct fr_node_comm){ .id = "s", .desc = "split", .size = 4 };
	comms[1].nmaps = fr_node_maps_from_members(small, 4, (struct fr_node_map[4]){ 0 });
	assert_int_equal(comms[1].nmaps, 1);
	comms[1].maps = &(struct fr_node_map){ 0, 17, 4 };

	while (at.comm < 2) {
		struct fr_msg_node_comms out;
		uint8_t *buf;
		size_t len;
		int n = fr_node_comms_batch(&m, slots, 4, comms, 2, &at, FR_WIRE_MAX_PAYLOAD);

		assert_true(n > 0);
		len = ENCODE(node_comms, &m, &buf);
		assert_true(len - FR_WIRE_HEADER_SIZE <= FR_WIRE_MAX_PAYLOAD);
		assert_int_equal(fr_wire_node_comms_decode(buf + FR_WIRE_HEADER_SIZE,
							   len - FR_WIRE_HEADER_SIZE, &out), 0);
		for (uint32_t c = 0; c < out.ncomms; c++) {
			const struct fr_node_comm *p = &out.comms[c];

			if (strcmp(p->id, "world") != 0) {
				assert_string_equal(p->id, "s");
				assert_int_equal(p->nmaps, 1);
				assert_int_equal(p->maps[0].rank, 17);
				continue;
			}
			pieces_of_world++;
			assert_string_equal(p->desc, "MPI_COMM_WORLD");
			assert_int_equal(p->size, size);
			for (uint32_t k = 0; k < p->nmaps; k++)
				for (uint32_t j = 0; j < p->maps[k].count; j++) {
					assert_int_equal(back[p->maps[k].index + j], FR_RANK_UNKNOWN);
					back[p->maps[k].index + j] = p->maps[k].rank + j;
				}
		}
		fr_wire_node_comms_free(&out);
		free(buf);
		frames++;
	}
	assert_int_equal(frames, 2);
	assert_int_equal(pieces_of_world, 2);
	assert_memory_equal(back, members, size * sizeof(*members));

	/* In order: one run, one frame of a few bytes. */
	for (uint32_t i = 0; i < size; i++)
		members[i] = i;
	comms[0].nmaps = fr_node_maps_from_members(members, size, maps);
	assert_int_equal(comms[0].nmaps, 1);
	at = (struct fr_node_cursor){ 0, 0 };
	assert_int_equal(fr_node_comms_batch(&m, slots, 4, comms, 2, &at, FR_WIRE_MAX_PAYLOAD), 2);
	assert_int_equal(at.comm, 2);
	assert_true(fr_wire_node_comms_size(&m) < 128);

	/* A payload too small for one run is refused, not looped on. */
	at = (struct fr_node_cursor){ 0, 0 };
	assert_int_equal(fr_node_comms_batch(&m, slots, 4, comms, 2, &at, 20), -EMSGSIZE);
	free(maps);
	free(back);
	free(members);
}

static void test_ranges_add(void **state)
{
	struct fr_node_range r[2];
	uint32_t n = 0;

	(void)state;
	assert_true(fr_node_ranges_add(r, &n, 2, 3));
	assert_true(fr_node_ranges_add(r, &n, 2, 4));
	assert_false(fr_node_ranges_add(r, &n, 2, 4));
	assert_true(fr_node_ranges_add(r, &n, 2, 9));
	/* No room for a third run: the rank is new but not listed. */
	assert_true(fr_node_ranges_add(r, &n, 2, 20));
	assert_int_equal(n, 2);
	assert_int_equal(r[0].first, 3);
	assert_int_equal(r[0].count, 2);
	assert_int_equal(r[1].first, 9);
	assert_int_equal(r[1].count, 1);
}

/* Field by field: the structs have padding that assignments need not clear. */
static void assert_records_equal(const struct fr_node_comm_progress *a,
				 const struct fr_node_comm_progress *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++, a++, b++) {
		assert_string_equal(a->comm, b->comm);
		assert_true(a->lo_entered == b->lo_entered && a->hi_entered == b->hi_entered &&
			    a->lo_completed == b->lo_completed && a->hi_completed == b->hi_completed);
		assert_int_equal(a->nranks, b->nranks);
		assert_int_equal(a->nmembers, b->nmembers);
		assert_memory_equal(a->members, b->members, a->nmembers * sizeof(a->members[0]));
		assert_int_equal(a->nlaggards, b->nlaggards);
		assert_int_equal(a->laggards_omitted, b->laggards_omitted);
		for (uint32_t k = 0; k < a->nlaggards; k++)
			assert_true(a->laggards[k].rank == b->laggards[k].rank &&
				    a->laggards[k].last_entered == b->laggards[k].last_entered &&
				    a->laggards[k].last_completed == b->laggards[k].last_completed);
		assert_int_equal(a->ngroups, b->ngroups);
		assert_int_equal(a->ops_omitted, b->ops_omitted);
		for (uint32_t k = 0; k < a->ngroups; k++) {
			const struct fr_node_group *x = &a->groups[k], *y = &b->groups[k];

			assert_true(x->seq == y->seq && x->type == y->type && x->flags == y->flags &&
				    x->nranks == y->nranks && x->age_ms == y->age_ms &&
				    x->nranges == y->nranges);
			assert_memory_equal(x->ranges, y->ranges, x->nranges * sizeof(x->ranges[0]));
		}
	}
}

static int progress_decode(const uint8_t *buf, size_t len, struct fr_msg_node_progress *out)
{
	return fr_wire_node_progress_decode(buf + FR_WIRE_HEADER_SIZE, len - FR_WIRE_HEADER_SIZE, out);
}

static void test_progress_roundtrip(void **state)
{
	struct fr_msg_node_progress m, out;
	uint8_t *buf;
	size_t len;

	(void)state;
	sample_node_progress(&m);
	len = ENCODE(node_progress, &m, &buf);
	assert_int_equal(progress_decode(buf, len, &out), 0);
	assert_string_equal(out.job, "job-42");
	assert_int_equal(out.ncomms, 2);
	assert_records_equal(out.comms, m.comms, 2);
	fr_wire_node_progress_free(&out);
	free(buf);
}

/* Each value a NODE_PROGRESS record may not hold, refused by both sides. */
static void test_progress_refusals(void **state)
{
	struct fr_msg_node_progress m;
	struct fr_node_comm_progress *c;
	uint8_t buf[4096];
	int good;

	(void)state;
#define REFUSED(change)                                                                    \
	do {                                                                               \
		sample_node_progress(&m);                                                  \
		c = &m.comms[0];                                                           \
		change;                                                                    \
		assert_int_equal(fr_wire_node_progress_encode(&m, buf, sizeof(buf)), -EINVAL); \
	} while (0)
	REFUSED(c->lo_entered = 42);
	REFUSED(c->lo_completed = 41);
	REFUSED(c->nranks = 6);                          /* members list 8 */
	REFUSED(c->members[1].first = 8);                /* touches the run before: not coalesced */
	REFUSED(c->members[1].first = 2);                /* goes back */
	REFUSED(c->members[1].count = 0);
	REFUSED(c->members[1] = ((struct fr_node_range){ FR_RANK_UNKNOWN, 1 }));
	REFUSED(c->nmembers = FR_NODE_RANGES_MAX + 1);
	REFUSED(c->laggards[0].last_entered = 41);       /* not below the highest */
	REFUSED(c->laggards[0].last_entered = 39);       /* below the lowest */
	REFUSED(c->laggards_omitted = 8);
	REFUSED(c->nlaggards = FR_NODE_LAGGARDS_MAX + 1);
	REFUSED(c->groups[0].nranks = 6);                /* fewer than its runs list */
	REFUSED(c->groups[0].nranks = 9);                /* more than the record's ranks */
	REFUSED(c->groups[1].nranks = 0);
	REFUSED(c->groups[1].flags = FR_WIRE_INFLIGHT_WAITED);
	REFUSED(c->groups[1].flags = 0x4);
	REFUSED(c->groups[0].nranges = FR_NODE_RANGES_MAX + 1);
	REFUSED(c->ngroups = FR_NODE_GROUPS_MAX + 1);
	REFUSED(m.ncomms = FR_NODE_PROGRESS_COMMS_MAX + 1);
#undef REFUSED

	/* The decoder refuses the same: patch an encoded lowest above its highest. */
	sample_node_progress(&m);
	good = fr_wire_node_progress_encode(&m, buf, sizeof(buf));
	assert_true(good > 0);
	{
		struct fr_msg_node_progress out;
		size_t lo = FR_WIRE_HEADER_SIZE + 2 + 6 + 4 + 2 + 5;

		assert_int_equal(buf[lo], 40);
		buf[lo] = 42;
		assert_int_equal(progress_decode(buf, (size_t)good, &out), -EPROTO);
		buf[lo] = 40;
		/* A count of records over the cap, before anything is read of them. */
		put_u32(buf + FR_WIRE_HEADER_SIZE + 2 + 6, FR_NODE_PROGRESS_COMMS_MAX + 1);
		assert_int_equal(progress_decode(buf, (size_t)good, &out), -EPROTO);
		put_u32(buf + FR_WIRE_HEADER_SIZE + 2 + 6, 2);
		assert_int_equal(progress_decode(buf, (size_t)good, &out), 0);
		fr_wire_node_progress_free(&out);
	}
}

/* Every record at every cap, with the longest strings: still one frame. */
static void test_progress_largest(void **state)
{
	struct fr_node_comm_progress *c = calloc(FR_NODE_PROGRESS_COMMS_MAX, sizeof(*c));
	struct fr_msg_node_progress m = { .ncomms = FR_NODE_PROGRESS_COMMS_MAX, .comms = c };
	struct fr_msg_node_progress out;
	uint8_t *buf;
	size_t len;

	(void)state;
	assert_non_null(c);
	memset(m.job, 'j', FR_JOB_MAX);
	for (uint32_t i = 0; i < FR_NODE_PROGRESS_COMMS_MAX; i++) {
		memset(c[i].comm, 'c', FR_COMM_ID_MAX);
		c[i].comm[0] = (char)('A' + i);
		c[i].hi_entered = 100;
		c[i].nranks = 8192;
		c[i].nmembers = FR_NODE_RANGES_MAX;
		for (uint32_t k = 0; k < FR_NODE_RANGES_MAX; k++)
			c[i].members[k] = (struct fr_node_range){ 2 * k, 1 };
		c[i].nlaggards = FR_NODE_LAGGARDS_MAX;
		c[i].laggards_omitted = 100;
		for (uint32_t k = 0; k < FR_NODE_LAGGARDS_MAX; k++)
			c[i].laggards[k] = (struct fr_node_laggard){ k, 99, 98 };
		c[i].ngroups = FR_NODE_GROUPS_MAX;
		for (uint32_t g = 0; g < FR_NODE_GROUPS_MAX; g++) {
			c[i].groups[g] = (struct fr_node_group){ .seq = g, .type = FR_OP_ALL_REDUCE,
								 .nranks = 8192, .age_ms = 1,
								 .nranges = FR_NODE_RANGES_MAX };
			for (uint32_t k = 0; k < FR_NODE_RANGES_MAX; k++)
				c[i].groups[g].ranges[k] = (struct fr_node_range){ 2 * k, 1 };
		}
	}
	len = ENCODE(node_progress, &m, &buf);
	/* PROTOCOL.md's figure: 16 records of 36,633 bytes. */
	assert_int_equal(len, 586214);
	assert_true(len - FR_WIRE_HEADER_SIZE <= FR_WIRE_MAX_PAYLOAD);
	assert_int_equal(progress_decode(buf, len, &out), 0);
	assert_records_equal(out.comms, c, FR_NODE_PROGRESS_COMMS_MAX);
	fr_wire_node_progress_free(&out);
	free(buf);
	free(c);
}

/* Decodes frame `buf` of `len` bytes as message `n` into `out`. */
#define DECODE(n, buf, len, out) \
	fr_wire_##n##_decode((buf) + FR_WIRE_HEADER_SIZE, (len) - FR_WIRE_HEADER_SIZE, (out))

/* Every shorter payload is refused and leaves the message zeroed. */
#define ASSERT_TRUNCATIONS_REFUSED(n, buf, len)                                        \
	do {                                                                           \
		for (size_t cut_ = FR_WIRE_HEADER_SIZE; cut_ < (len); cut_++) {        \
			struct fr_msg_##n t_;                                          \
			memset(&t_, 0xa5, sizeof(t_));                                 \
			assert_int_equal(DECODE(n, buf, cut_, &t_), -EPROTO);          \
			for (size_t b_ = 0; b_ < sizeof(t_); b_++)                     \
				assert_int_equal(((uint8_t *)&t_)[b_], 0);             \
		}                                                                      \
	} while (0)

/*
 * Job ids are names (fr_wire_valid_name(), as agents' are): the central
 * daemon makes directories of them. Each node message that carries one
 * refuses any other, encoding and decoding; the frame is made with a
 * placeholder id of the same length, then patched.
 */
static const char *const bad_job_ids[] = { "../esc", "a/bcde", ".hiddn", "ab\ncde", "ab cde" };

/* Replaces the placeholder "QQQQQQ" in buf with each bad id: every decode fails. */
static void assert_bad_ids_refused(uint8_t *buf, size_t len,
				   int (*decode)(const uint8_t *, size_t, void *), void (*fr)(void *),
				   void *out)
{
	uint8_t *at = memmem(buf, len, "QQQQQQ", 6);

	assert_non_null(at);
	assert_int_equal(decode(buf + FR_WIRE_HEADER_SIZE, len - FR_WIRE_HEADER_SIZE, out), 0);
	fr(out);
	for (size_t i = 0; i < sizeof(bad_job_ids) / sizeof(bad_job_ids[0]); i++) {
		memcpy(at, bad_job_ids[i], 6);
		assert_int_equal(decode(buf + FR_WIRE_HEADER_SIZE, len - FR_WIRE_HEADER_SIZE, out),
				 -EPROTO);
	}
}

#define DECODER(n)                                                                         \
	static int n##_dec(const uint8_t *p, size_t len, void *out)                        \
	{                                                                                  \
		return fr_wire_##n##_decode(p, len, out);                                  \
	}                                                                                  \
	static void n##_fr(void *out)                                                      \
	{                                                                                  \
		fr_wire_##n##_free(out);                                                   \
	}
DECODER(node_hello)
DECODER(node_ranks)
DECODER(node_comms)
DECODER(node_progress)

/* Message `m` of kind `n`, its job id at `job`: a bad id is refused both ways. */
#define ASSERT_JOB_ID_CHECKED(n, m, job, out)                                              \
	do {                                                                               \
		uint8_t *buf_;                                                             \
		size_t len_;                                                               \
		snprintf((job), sizeof(job), "QQQQQQ");                                    \
		len_ = ENCODE(n, (m), &buf_);                                              \
		assert_bad_ids_refused(buf_, len_, n##_dec, n##_fr, (out));                \
		free(buf_);                                                                \
		snprintf((job), sizeof(job), "../escape-x");                               \
		assert_int_equal(fr_wire_##n##_encode((m), NULL, 0), -EINVAL);             \
	} while (0)

static void test_job_ids_are_names(void **state)
{
	struct fr_msg_node_hello h, ho;
	struct fr_msg_node_ranks r, ro;
	struct fr_msg_node_comms c, co;
	struct fr_msg_node_progress p, po;
	struct fr_node_job jobs[2];

	(void)state;
	sample_node_hello(&h);
	memcpy(jobs, h.jobs, sizeof(jobs));
	h.jobs = jobs;
	ASSERT_JOB_ID_CHECKED(node_hello, &h, jobs[1].job, &ho);
	sample_node_ranks(&r);
	ASSERT_JOB_ID_CHECKED(node_ranks, &r, r.job, &ro);
	sample_node_comms(&c);
	ASSERT_JOB_ID_CHECKED(node_comms, &c, c.job, &co);
	sample_node_progress(&p);
	ASSERT_JOB_ID_CHECKED(node_progress, &p, p.job, &po);
}

static void test_dump_request_roundtrip_and_refusals(void **state)
{
	struct fr_msg_node_dump_request m, out;
	uint8_t *buf;
	size_t len;

	(void)state;
	sample_node_dump_request(&m);
	len = ENCODE(node_dump_request, &m, &buf);
	assert_int_equal(buf[4], 4);
	assert_int_equal(buf[6], FR_MSG_NODE_DUMP_REQUEST);
	assert_int_equal(DECODE(node_dump_request, buf, len, &out), 0);
	assert_memory_equal(&m, &out, sizeof(m));
	ASSERT_TRUNCATIONS_REFUSED(node_dump_request, buf, len);
	/* has_seq is 0 or 1: the byte before the seq. */
	buf[len - 9] = 2;
	assert_int_equal(DECODE(node_dump_request, buf, len, &out), -EPROTO);
	free(buf);
	/* Ids the node would make a path of are refused both ways. */
	strcpy(m.incident, "../x");
	assert_int_equal(fr_wire_node_dump_request_encode(&m, (uint8_t[512]){ 0 }, 512), -EINVAL);
	sample_node_dump_request(&m);
	strcpy(m.job, ".hidden");
	assert_int_equal(fr_wire_node_dump_request_encode(&m, (uint8_t[512]){ 0 }, 512), -EINVAL);
	sample_node_dump_request(&m);
	m.has_seq = 3;
	assert_int_equal(fr_wire_node_dump_request_encode(&m, (uint8_t[512]){ 0 }, 512), -EINVAL);
	/* A job id with a '/' on the wire. */
	sample_node_dump_request(&m);
	len = ENCODE(node_dump_request, &m, &buf);
	buf[FR_WIRE_HEADER_SIZE + 2 + strlen(m.incident) + 2 + 5] = '/';
	assert_int_equal(DECODE(node_dump_request, buf, len, &out), -EPROTO);
	free(buf);
}

static void test_summary_roundtrip_and_refusals(void **state)
{
	struct fr_msg_node_summary m, out;
	uint8_t *buf;
	size_t len, flags_at;

	(void)state;
	sample_node_summary(&m);
	len = ENCODE(node_summary, &m, &buf);
	assert_int_equal(buf[6], FR_MSG_NODE_SUMMARY);
	assert_int_equal(DECODE(node_summary, buf, len, &out), 0);
	assert_string_equal(out.incident, m.incident);
	assert_string_equal(out.job, m.job);
	assert_int_equal(out.rank, 99999);
	assert_int_equal(out.flags, 0);
	assert_int_equal(out.offset, m.offset);
	assert_int_equal(out.total, m.total);
	assert_int_equal(out.len, m.len);
	assert_memory_equal(out.data, m.data, m.len);
	ASSERT_TRUNCATIONS_REFUSED(node_summary, buf, len);
	/* Flags this build does not define are refused; FULL is taken. */
	flags_at = FR_WIRE_HEADER_SIZE + 2 + strlen(m.incident) + 2 + strlen(m.job) + 4;
	buf[flags_at] = 0x4;
	assert_int_equal(DECODE(node_summary, buf, len, &out), -EPROTO);
	buf[flags_at] = FR_NODE_SUMMARY_FULL;
	assert_int_equal(DECODE(node_summary, buf, len, &out), 0);
	assert_int_equal(out.flags, FR_NODE_SUMMARY_FULL);
	/* FAILED with bytes is refused. */
	buf[flags_at] = FR_NODE_SUMMARY_FAILED;
	assert_int_equal(DECODE(node_summary, buf, len, &out), -EPROTO);
	free(buf);

	/* A failure: a reason, no bytes. */
	sample_node_summary(&m);
	m.flags = FR_NODE_SUMMARY_FAILED;
	m.offset = m.total = m.len = 0;
	m.data = NULL;
	strcpy(m.reason, "rank 3 did not answer by the deadline");
	len = ENCODE(node_summary, &m, &buf);
	assert_int_equal(DECODE(node_summary, buf, len, &out), 0);
	assert_int_equal(out.flags, FR_NODE_SUMMARY_FAILED);
	assert_string_equal(out.reason, m.reason);
	assert_null(out.data);
	ASSERT_TRUNCATIONS_REFUSED(node_summary, buf, len);
	free(buf);
	/* ... and not without one, nor a reason with a piece. */
	m.reason[0] = '\0';
	assert_int_equal(fr_wire_node_summary_encode(&m, (uint8_t[512]){ 0 }, 512), -EINVAL);
	sample_node_summary(&m);
	strcpy(m.reason, "why");
	assert_int_equal(fr_wire_node_summary_encode(&m, (uint8_t[512]){ 0 }, 512), -EINVAL);
	/* Pieces lie inside their dump, and are at most a chunk. */
	sample_node_summary(&m);
	m.offset = m.total - m.len + 1;
	assert_int_equal(fr_wire_node_summary_encode(&m, (uint8_t[512]){ 0 }, 512), -EINVAL);
	sample_node_summary(&m);
	m.total = 0;
	m.offset = 0;
	m.len = 0;
	assert_int_equal(fr_wire_node_summary_encode(&m, (uint8_t[512]){ 0 }, 512), -EINVAL);
	sample_node_summary(&m);
	m.rank = FR_RANK_UNKNOWN;
	assert_int_equal(fr_wire_node_summary_encode(&m, (uint8_t[512]){ 0 }, 512), -EINVAL);
	sample_node_summary(&m);
	m.flags = 0x80;
	assert_int_equal(fr_wire_node_summary_encode(&m, (uint8_t[512]){ 0 }, 512), -EINVAL);
}

static void test_summary_largest_piece(void **state)
{
	struct fr_msg_node_summary m, out;
	uint8_t *data = calloc(1, FR_WIRE_DUMP_CHUNK + 1);
	uint8_t *buf;
	size_t len;

	(void)state;
	assert_non_null(data);
	sample_node_summary(&m);
	memset(m.incident, 'i', FR_INCIDENT_MAX);
	m.incident[FR_INCIDENT_MAX] = '\0';
	memset(m.job, 'j', FR_JOB_MAX);
	m.job[FR_JOB_MAX] = '\0';
	m.offset = 0;
	m.total = UINT64_MAX;
	m.len = FR_WIRE_DUMP_CHUNK;
	m.data = data;
	len = ENCODE(node_summary, &m, &buf);
	assert_true(len - FR_WIRE_HEADER_SIZE <= FR_WIRE_MAX_PAYLOAD);
	assert_int_equal(DECODE(node_summary, buf, len, &out), 0);
	assert_int_equal(out.len, FR_WIRE_DUMP_CHUNK);
	free(buf);
	m.len = FR_WIRE_DUMP_CHUNK + 1;
	assert_int_equal(fr_wire_node_summary_encode(&m, data, 16), -EINVAL);
	free(data);
}

static void test_done_and_fetch_roundtrip(void **state)
{
	struct fr_msg_node_dump_done d, dout;
	struct fr_msg_node_fetch f, fout;
	uint8_t *buf;
	size_t len;

	(void)state;
	sample_node_dump_done(&d);
	len = ENCODE(node_dump_done, &d, &buf);
	assert_int_equal(buf[6], FR_MSG_NODE_DUMP_DONE);
	assert_int_equal(DECODE(node_dump_done, buf, len, &dout), 0);
	assert_memory_equal(&d, &dout, sizeof(d));
	ASSERT_TRUNCATIONS_REFUSED(node_dump_done, buf, len);
	free(buf);

	sample_node_fetch(&f);
	len = ENCODE(node_fetch, &f, &buf);
	assert_int_equal(buf[6], FR_MSG_NODE_FETCH);
	assert_int_equal(DECODE(node_fetch, buf, len, &fout), 0);
	assert_memory_equal(&f, &fout, sizeof(f));
	ASSERT_TRUNCATIONS_REFUSED(node_fetch, buf, len);
	/* No rank 0xFFFFFFFF. */
	put_u32(buf + len - 4, FR_RANK_UNKNOWN);
	assert_int_equal(DECODE(node_fetch, buf, len, &fout), -EPROTO);
	free(buf);
	f.rank = FR_RANK_UNKNOWN;
	assert_int_equal(fr_wire_node_fetch_encode(&f, (uint8_t[256]){ 0 }, 256), -EINVAL);
	sample_node_fetch(&f);
	strcpy(f.incident, "a/b");
	assert_int_equal(fr_wire_node_fetch_encode(&f, (uint8_t[256]){ 0 }, 256), -EINVAL);
	sample_node_dump_done(&d);
	d.job[0] = '\0';
	assert_int_equal(fr_wire_node_dump_done_encode(&d, (uint8_t[256]){ 0 }, 256), -EINVAL);
}

/*
 * NODE_KERNEL_LOG: the node's kernel log object round-trips byte for
 * byte; an empty one, one over FR_NODE_KERNEL_LOG_MAX and a length that is
 * not what follows are refused.
 */
static void test_kernel_log_roundtrip_and_refusals(void **state)
{
	struct fr_msg_node_kernel_log m, out;
	uint8_t *big = malloc(FR_NODE_KERNEL_LOG_MAX + 1);
	uint8_t *buf;
	size_t len, len_at;

	(void)state;
	assert_non_null(big);
	sample_node_kernel_log(&m);
	len = ENCODE(node_kernel_log, &m, &buf);
	assert_int_equal(buf[4], 7);
	assert_int_equal(buf[6], FR_MSG_NODE_KERNEL_LOG);
	assert_int_equal(DECODE(node_kernel_log, buf, len, &out), 0);
	assert_string_equal(out.incident, m.incident);
	assert_string_equal(out.job, m.job);
	assert_int_equal(out.len, m.len);
	assert_memory_equal(out.data, m.data, m.len);
	ASSERT_TRUNCATIONS_REFUSED(node_kernel_log, buf, len);
	/* A length past the bytes, or short of them (a trailing byte). */
	len_at = FR_WIRE_HEADER_SIZE + 2 + strlen(m.incident) + 2 + strlen(m.job);
	put_u32(buf + len_at, m.len + 1);
	assert_int_equal(DECODE(node_kernel_log, buf, len, &out), -EPROTO);
	put_u32(buf + len_at, m.len - 1);
	assert_int_equal(DECODE(node_kernel_log, buf, len, &out), -EPROTO);
	put_u32(buf + len_at, 0);
	assert_int_equal(DECODE(node_kernel_log, buf, len_at + 4, &out), -EPROTO);
	free(buf);

	/* The largest is taken; one byte more is refused both ways. */
	memset(big, ' ', FR_NODE_KERNEL_LOG_MAX + 1);
	m.data = big;
	m.len = FR_NODE_KERNEL_LOG_MAX;
	len = ENCODE(node_kernel_log, &m, &buf);
	assert_int_equal(DECODE(node_kernel_log, buf, len, &out), 0);
	assert_int_equal(out.len, FR_NODE_KERNEL_LOG_MAX);
	/* The same frame saying one byte more, with that byte. */
	buf = realloc(buf, len + 1);
	assert_non_null(buf);
	buf[len] = ' ';
	put_u32(buf + len_at, FR_NODE_KERNEL_LOG_MAX + 1);
	assert_int_equal(DECODE(node_kernel_log, buf, len + 1, &out), -EPROTO);
	assert_int_equal(out.len, 0);
	free(buf);
	m.len = FR_NODE_KERNEL_LOG_MAX + 1;
	assert_int_equal(fr_wire_node_kernel_log_encode(&m, (uint8_t[256]){ 0 }, 256), -EINVAL);
	/* Nothing to carry, and ids that are not names, are not encoded. */
	sample_node_kernel_log(&m);
	m.len = 0;
	assert_int_equal(fr_wire_node_kernel_log_encode(&m, (uint8_t[256]){ 0 }, 256), -EINVAL);
	sample_node_kernel_log(&m);
	strcpy(m.job, "../etc");
	assert_int_equal(fr_wire_node_kernel_log_encode(&m, (uint8_t[256]){ 0 }, 256), -EINVAL);
	free(big);
}

static void test_look_request_roundtrip_and_refusals(void **state)
{
	struct fr_msg_node_look_request m = { .look = 0x1122334455667788ull, .job = "train.7",
					      .kind = FR_NODE_LOOK_RANK_TRACE, .rank = 12,
					      .last = 50 };
	struct fr_msg_node_look_request out;
	uint8_t *buf;
	size_t len, kind_at;

	(void)state;
	len = ENCODE(node_look_request, &m, &buf);
	assert_int_equal(buf[4], 5); /* new in version 5 */
	assert_int_equal(buf[6], FR_MSG_NODE_LOOK_REQUEST);
	assert_int_equal(DECODE(node_look_request, buf, len, &out), 0);
	assert_int_equal(out.look, m.look);
	assert_string_equal(out.job, "train.7");
	assert_int_equal(out.kind, FR_NODE_LOOK_RANK_TRACE);
	assert_int_equal(out.rank, 12);
	assert_int_equal(out.last, 50);
	ASSERT_TRUNCATIONS_REFUSED(node_look_request, buf, len);
	/* A kind this build does not define, and a trace of no entries, are refused. */
	kind_at = FR_WIRE_HEADER_SIZE + 8 + 2 + strlen(m.job);
	buf[kind_at] = FR_NODE_LOOK_KIND_MAX + 1;
	assert_int_equal(DECODE(node_look_request, buf, len, &out), -EPROTO);
	/* RANK_STACKS with `last` set. */
	buf[kind_at] = FR_NODE_LOOK_RANK_STACKS;
	assert_int_equal(DECODE(node_look_request, buf, len, &out), -EPROTO);
	/* JOB_STACKS of one rank. */
	buf[kind_at] = FR_NODE_LOOK_JOB_STACKS;
	assert_int_equal(DECODE(node_look_request, buf, len, &out), -EPROTO);
	free(buf);
	m.last = 0;
	assert_int_equal(fr_wire_node_look_request_encode(&m, (uint8_t[256]){ 0 }, 256), -EINVAL);
	m.last = FR_WIRE_LIVE_TRACE_MAX + 1;
	assert_int_equal(fr_wire_node_look_request_encode(&m, (uint8_t[256]){ 0 }, 256), -EINVAL);
	/* The whole job's stacks: every rank. */
	m.kind = FR_NODE_LOOK_JOB_STACKS;
	m.rank = FR_RANK_UNKNOWN;
	m.last = 0;
	len = ENCODE(node_look_request, &m, &buf);
	assert_int_equal(DECODE(node_look_request, buf, len, &out), 0);
	assert_int_equal(out.rank, FR_RANK_UNKNOWN);
	free(buf);
	strcpy(m.job, "../x");
	assert_int_equal(fr_wire_node_look_request_encode(&m, (uint8_t[256]){ 0 }, 256), -EINVAL);
}

static void test_look_stacks_roundtrip_and_refusals(void **state)
{
	struct fr_msg_node_look_stacks m, out;
	struct fr_node_look_class *c;
	uint8_t *buf;
	size_t len, flags_at;

	(void)state;
	sample_node_look_stacks(&m);
	c = m.classes;
	len = ENCODE(node_look_stacks, &m, &buf);
	assert_int_equal(buf[6], FR_MSG_NODE_LOOK_STACKS);
	assert_int_equal(len, FR_WIRE_HEADER_SIZE + fr_node_look_stacks_base_size(&m) +
				      fr_node_look_class_size(&c[0]) +
				      fr_node_look_class_size(&c[1]));
	assert_int_equal(DECODE(node_look_stacks, buf, len, &out), 0);
	assert_int_equal(out.look, 7);
	assert_string_equal(out.job, "train.7");
	assert_int_equal(out.flags, FR_NODE_LOOK_LAST);
	assert_int_equal(out.asked, 6);
	assert_int_equal(out.answered, 5);
	assert_int_equal(out.nmissing, 1);
	assert_int_equal(out.missing[0].first, 5);
	assert_int_equal(out.why[0].rank, 5);
	assert_string_equal(out.why[0].reason, m.why[0].reason);
	assert_int_equal(out.frames_left_out, 3);
	assert_int_equal(out.nclasses, 2);
	assert_string_equal(out.classes[0].frames[0].name, "PMPI_Barrier");
	assert_int_equal(out.classes[0].frames[0].ip, 0x401000);
	assert_int_equal(out.classes[0].nranges, 2);
	assert_int_equal(out.classes[0].ranges[1].first, 4);
	assert_int_equal(out.classes[1].tid, 4243);
	assert_int_equal(out.classes[1].current, 1);
	assert_string_equal(out.classes[1].frames[0].name, "stuck_in_compute");
	fr_wire_node_look_stacks_free(&out);
	for (size_t b = 0; b < sizeof(out); b++)
		assert_int_equal(((uint8_t *)&out)[b], 0);
	ASSERT_TRUNCATIONS_REFUSED(node_look_stacks, buf, len);
	/* A flag this build does not define is refused. */
	flags_at = FR_WIRE_HEADER_SIZE + 8 + 2 + strlen(m.job);
	buf[flags_at] = 0x2;
	assert_int_equal(DECODE(node_look_stacks, buf, len, &out), -EPROTO);
	buf[flags_at] = 0;
	assert_int_equal(DECODE(node_look_stacks, buf, len, &out), 0);
	assert_int_equal(out.flags, 0);
	fr_wire_node_look_stacks_free(&out);
	free(buf);

	/* What an encoder refuses: a class of no ranks, `start` past the
	 * frames, ranges that overlap, more answered than asked. */
	sample_node_look_stacks(&m);
	c[1].nranges = 0;
	assert_int_equal(fr_wire_node_look_stacks_encode(&m, (uint8_t[4096]){ 0 }, 4096), -EINVAL);
	sample_node_look_stacks(&m);
	c[1].start = 1;
	assert_int_equal(fr_wire_node_look_stacks_encode(&m, (uint8_t[4096]){ 0 }, 4096), -EINVAL);
	sample_node_look_stacks(&m);
	c[0].ranges[1].first = 3;
	assert_int_equal(fr_wire_node_look_stacks_encode(&m, (uint8_t[4096]){ 0 }, 4096), -EINVAL);
	sample_node_look_stacks(&m);
	m.answered = 7;
	assert_int_equal(fr_wire_node_look_stacks_encode(&m, (uint8_t[4096]){ 0 }, 4096), -EINVAL);

	/* A node with nothing to say: no class, LAST. */
	sample_node_look_stacks(&m);
	m.nclasses = 0;
	m.classes = NULL;
	len = ENCODE(node_look_stacks, &m, &buf);
	assert_int_equal(DECODE(node_look_stacks, buf, len, &out), 0);
	assert_null(out.classes);
	free(buf);
}

/*
 * Protocol 8: with FR_NODE_LOOK_PYTHON, the Python frames of the classes
 * that have some follow the classes, by index, and come back whole; the
 * sizes add up; a frame without the flag carries none, and what is out of
 * bounds or out of order is refused.
 */
static void test_look_stacks_python(void **state)
{
	struct fr_node_look_pyframe py[2] = {
		{ "load_batch", "/srv/train.py", 41 },
		{ "main", "/srv/train.py", 120 },
	};
	struct fr_msg_node_look_stacks m, out;
	struct fr_node_look_class *c;
	char long_name[FR_NODE_LOOK_PYSTR_MAX + 2];
	uint8_t *buf;
	size_t len, at;

	(void)state;
	sample_node_look_stacks(&m);
	c = m.classes;
	/* Only the second class runs Python; its outer frames were not read. */
	c[1].pyframes = py;
	c[1].npyframes = 2;
	c[1].py_truncated = 1;
	/* Without the flag, a class with Python frames is not encoded. */
	assert_int_equal(fr_wire_node_look_stacks_encode(&m, (uint8_t[4096]){ 0 }, 4096), -EINVAL);
	m.flags |= FR_NODE_LOOK_PYTHON;
	len = ENCODE(node_look_stacks, &m, &buf);
	assert_int_equal(len, FR_WIRE_HEADER_SIZE + fr_node_look_stacks_base_size(&m) +
				      fr_node_look_class_size(&c[0]) +
				      fr_node_look_class_size(&c[1]));
	assert_int_equal(DECODE(node_look_stacks, buf, len, &out), 0);
	assert_int_equal(out.flags, FR_NODE_LOOK_LAST | FR_NODE_LOOK_PYTHON);
	assert_int_equal(out.classes[0].npyframes, 0);
	assert_null(out.classes[0].pyframes);
	assert_int_equal(out.classes[0].py_truncated, 0);
	assert_int_equal(out.classes[1].npyframes, 2);
	assert_int_equal(out.classes[1].py_truncated, 1);
	assert_string_equal(out.classes[1].pyframes[0].function, "load_batch");
	assert_string_equal(out.classes[1].pyframes[0].file, "/srv/train.py");
	assert_int_equal(out.classes[1].pyframes[0].line, 41);
	assert_string_equal(out.classes[1].pyframes[1].function, "main");
	assert_int_equal(out.classes[1].pyframes[1].line, 120);
	assert_string_equal(out.classes[1].frames[0].name, "stuck_in_compute");
	fr_wire_node_look_stacks_free(&out);
	for (size_t b = 0; b < sizeof(out); b++)
		assert_int_equal(((uint8_t *)&out)[b], 0);
	ASSERT_TRUNCATIONS_REFUSED(node_look_stacks, buf, len);
	/* The Python part sits at the end: count 1, class 1, truncated, 2 frames. */
	at = len - (4 + 4 + 1 + 4 + (2 + 10 + 2 + 13 + 4) + (2 + 4 + 2 + 13 + 4));
	assert_int_equal(buf[at], 1);
	/* A class index past the classes. */
	buf[at + 4] = 2;
	assert_int_equal(DECODE(node_look_stacks, buf, len, &out), -EPROTO);
	buf[at + 4] = 1;
	/* A truncated flag that is not 0 or 1. */
	buf[at + 8] = 2;
	assert_int_equal(DECODE(node_look_stacks, buf, len, &out), -EPROTO);
	buf[at + 8] = 1;
	/* More Python frames than a class keeps, or than the bytes hold. */
	put_u32(buf + at + 9, FR_NODE_LOOK_PYFRAMES_MAX + 1);
	assert_int_equal(DECODE(node_look_stacks, buf, len, &out), -EPROTO);
	put_u32(buf + at + 9, 3);
	assert_int_equal(DECODE(node_look_stacks, buf, len, &out), -EPROTO);
	put_u32(buf + at + 9, 2);
	/* More parts than classes. */
	put_u32(buf + at, 3);
	assert_int_equal(DECODE(node_look_stacks, buf, len, &out), -EPROTO);
	put_u32(buf + at, 1);
	assert_int_equal(DECODE(node_look_stacks, buf, len, &out), 0);
	fr_wire_node_look_stacks_free(&out);
	free(buf);

	/* Parts out of order, or one class twice, are refused. */
	c[0].pyframes = py + 1;
	c[0].npyframes = 1;
	len = ENCODE(node_look_stacks, &m, &buf);
	assert_int_equal(DECODE(node_look_stacks, buf, len, &out), 0);
	assert_string_equal(out.classes[0].pyframes[0].function, "main");
	fr_wire_node_look_stacks_free(&out);
	/* Class 0's part starts right after the count (its part 9 + 25
	 * bytes, class 1's 9 + 31 + 25): say it is class 1's. */
	at = len - (34 + 65);
	assert_int_equal(buf[at - 4], 2);
	assert_int_equal(buf[at], 0);
	buf[at] = 1;
	assert_int_equal(DECODE(node_look_stacks, buf, len, &out), -EPROTO);
	free(buf);
	c[0].pyframes = NULL;
	c[0].npyframes = 0;

	/* What an encoder refuses: a string over the limit, a NULL one. */
	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	py[0].function = long_name;
	assert_int_equal(fr_wire_node_look_stacks_encode(&m, (uint8_t[4096]){ 0 }, 4096), -EINVAL);
	py[0].function = NULL;
	assert_int_equal(fr_wire_node_look_stacks_encode(&m, (uint8_t[4096]){ 0 }, 4096), -EINVAL);
	py[0].function = "load_batch";

	/* The flag without a class that runs Python: a count of none. */
	sample_node_look_stacks(&m);
	m.flags |= FR_NODE_LOOK_PYTHON;
	len = ENCODE(node_look_stacks, &m, &buf);
	assert_int_equal(DECODE(node_look_stacks, buf, len, &out), 0);
	assert_int_equal(out.classes[1].npyframes, 0);
	fr_wire_node_look_stacks_free(&out);
	/* Without the flag, the count is a trailing byte too many. */
	buf[FR_WIRE_HEADER_SIZE + 8 + 2 + strlen(m.job)] = FR_NODE_LOOK_LAST;
	assert_int_equal(DECODE(node_look_stacks, buf, len, &out), -EPROTO);
	free(buf);
}

/* A look's body rides NODE_SUMMARY with LOOK; LOOK with FULL means nothing. */
static void test_summary_look_flag(void **state)
{
	struct fr_msg_node_summary m, out;
	uint8_t *buf;
	size_t len;

	(void)state;
	sample_node_summary(&m);
	strcpy(m.incident, "look-8");
	m.flags = FR_NODE_SUMMARY_LOOK;
	len = ENCODE(node_summary, &m, &buf);
	assert_int_equal(DECODE(node_summary, buf, len, &out), 0);
	assert_int_equal(out.flags, FR_NODE_SUMMARY_LOOK);
	free(buf);
	m.flags = FR_NODE_SUMMARY_LOOK | FR_NODE_SUMMARY_FULL;
	assert_int_equal(fr_wire_node_summary_encode(&m, (uint8_t[512]){ 0 }, 512), -EINVAL);
	m.flags = FR_NODE_SUMMARY_LOOK | FR_NODE_SUMMARY_FAILED;
	m.offset = m.total = m.len = 0;
	m.data = NULL;
	strcpy(m.reason, "504 rank 3 of job train.7 did not answer within 5 s");
	len = ENCODE(node_summary, &m, &buf);
	assert_int_equal(DECODE(node_summary, buf, len, &out), 0);
	assert_string_equal(out.reason, m.reason);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hello_roundtrip),
		cmocka_unit_test(test_ranks_roundtrip_and_refusals),
		cmocka_unit_test(test_ranks_batch_limit),
		cmocka_unit_test(test_comms_roundtrip_and_refusals),
		cmocka_unit_test(test_maps_from_members),
		cmocka_unit_test(test_comms_100k_world_split),
		cmocka_unit_test(test_ranges_add),
		cmocka_unit_test(test_progress_roundtrip),
		cmocka_unit_test(test_progress_refusals),
		cmocka_unit_test(test_progress_largest),
		cmocka_unit_test(test_job_ids_are_names),
		cmocka_unit_test(test_dump_request_roundtrip_and_refusals),
		cmocka_unit_test(test_summary_roundtrip_and_refusals),
		cmocka_unit_test(test_summary_largest_piece),
		cmocka_unit_test(test_done_and_fetch_roundtrip),
		cmocka_unit_test(test_kernel_log_roundtrip_and_refusals),
		cmocka_unit_test(test_look_request_roundtrip_and_refusals),
		cmocka_unit_test(test_look_stacks_roundtrip_and_refusals),
		cmocka_unit_test(test_look_stacks_python),
		cmocka_unit_test(test_summary_look_flag),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
