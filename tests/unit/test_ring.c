/*
 * The flight recorder ring: records survive until wrapped, completion
 * updates in place, and concurrent writers never hand a reader a torn
 * record.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../agent/ring.h"

static struct fr_rec make(uint64_t seq, uint16_t comm)
{
	struct fr_rec r;

	memset(&r, 0, sizeof(r));
	r.seq = seq;
	r.comm = comm;
	/* Fields derived from seq, so that a torn copy is detectable. */
	r.count = seq * 3 + comm;
	r.t_entered = seq ^ UINT64_C(0x5a5a5a5a5a5a5a5a);
	r.type = (uint8_t)(seq % 23);
	r.peer = (int32_t)(seq % 1000) - 1;
	r.dtype_size = (uint32_t)(seq * 7);
	r.flags = 1;
	r.dtype = 4;
	r.redop = 2;
	return r;
}

static void assert_consistent(const struct fr_rec *r)
{
	assert_int_equal(r->count, r->seq * 3 + r->comm);
	assert_int_equal(r->t_entered, r->seq ^ UINT64_C(0x5a5a5a5a5a5a5a5a));
	assert_int_equal(r->type, r->seq % 23);
	assert_int_equal(r->peer, (int32_t)(r->seq % 1000) - 1);
	assert_int_equal(r->dtype_size, (uint32_t)(r->seq * 7));
	if (r->state == 1)
		assert_int_equal(r->t_completed, r->seq + 1);
	else
		assert_int_equal(r->t_completed, 0);
}

static void capacity_rounds_up_to_power_of_two(void **state)
{
	struct fr_ring r;

	(void)state;
	assert_int_equal(fr_ring_init(&r, 2000), 0);
	assert_int_equal(r.capacity, 2048);
	fr_ring_destroy(&r);
	assert_int_equal(fr_ring_init(&r, 1), 0);
	assert_int_equal(r.capacity, 16);
	fr_ring_destroy(&r);
}

static void push_read_complete(void **state)
{
	struct fr_ring r;
	struct fr_rec in = make(41, 3), out;
	uint64_t id;

	(void)state;
	assert_int_equal(fr_ring_init(&r, 16), 0);
	assert_false(fr_ring_read(&r, 0, &out)); /* nothing written yet */
	id = fr_ring_push(&r, &in);
	assert_int_equal(id, 0);
	assert_int_equal(fr_ring_head(&r), 1);
	assert_true(fr_ring_read(&r, id, &out));
	assert_int_equal(out.record_id, 0);
	assert_int_equal(out.seq, 41);
	assert_int_equal(out.comm, 3);
	assert_int_equal(out.state, 0);
	assert_int_equal(out.flags, 1);
	assert_int_equal(out.dtype, 4);
	assert_int_equal(out.redop, 2);
	assert_int_equal(out.peer, 40);
	assert_consistent(&out);

	assert_true(fr_ring_complete(&r, id, 42));
	assert_true(fr_ring_read(&r, id, &out));
	assert_int_equal(out.state, 1);
	assert_int_equal(out.t_completed, 42);
	assert_int_equal(out.t_started, 0);
	assert_consistent(&out);
	/* A completed record takes no further update. */
	assert_false(fr_ring_complete(&r, id, 43));
	assert_false(fr_ring_mark_waited(&r, id, 44));
	assert_true(fr_ring_read(&r, id, &out));
	assert_int_equal(out.t_completed, 42);
	fr_ring_destroy(&r);
}

static void waited_then_completed(void **state)
{
	struct fr_ring r;
	struct fr_rec in = make(7, 2), out;
	uint64_t id;

	(void)state;
	assert_int_equal(fr_ring_init(&r, 16), 0);
	in.flags = FR_REC_NONBLOCKING;
	id = fr_ring_push(&r, &in);
	assert_true(fr_ring_read(&r, id, &out));
	assert_int_equal(out.t_started, 0);

	assert_true(fr_ring_mark_waited(&r, id, 100));
	assert_false(fr_ring_mark_waited(&r, id, 101)); /* once */
	assert_true(fr_ring_read(&r, id, &out));
	assert_int_equal(out.state, 0);
	assert_int_equal(out.flags, FR_REC_NONBLOCKING | FR_REC_WAITED);
	assert_int_equal(out.t_started, 100);
	assert_int_equal(out.t_completed, 0);
	assert_int_equal(out.seq, 7);

	assert_true(fr_ring_complete(&r, id, 200));
	assert_true(fr_ring_read(&r, id, &out));
	assert_int_equal(out.state, 1);
	assert_int_equal(out.flags, FR_REC_NONBLOCKING | FR_REC_WAITED);
	assert_int_equal(out.t_completed, 200);
	assert_int_equal(out.t_started, 0);
	assert_int_equal(out.count, 7 * 3 + 2);
	fr_ring_destroy(&r);
}

/* A GPU operation: started when the device reached it, then completed; a
 * late start (after completion) is refused. */
static void started_then_completed(void **state)
{
	struct fr_ring r;
	struct fr_rec in = make(9, 1), out;
	uint64_t id;

	(void)state;
	assert_int_equal(fr_ring_init(&r, 16), 0);
	in.flags = FR_REC_GPU;
	id = fr_ring_push(&r, &in);
	assert_true(fr_ring_mark_started(&r, id, 300));
	assert_false(fr_ring_mark_started(&r, id, 301));
	assert_true(fr_ring_read(&r, id, &out));
	assert_int_equal(out.state, 0);
	assert_int_equal(out.flags, FR_REC_GPU | FR_REC_STARTED);
	assert_int_equal(out.t_started, 300);
	assert_true(fr_ring_complete(&r, id, 400));
	assert_false(fr_ring_mark_started(&r, id, 500));
	assert_true(fr_ring_read(&r, id, &out));
	assert_int_equal(out.state, 1);
	assert_int_equal(out.flags, FR_REC_GPU | FR_REC_STARTED);
	assert_int_equal(out.t_completed, 400);

	/* Never started (stuck behind other work), completed: no start. */
	id = fr_ring_push(&r, &in);
	assert_true(fr_ring_complete(&r, id, 600));
	assert_true(fr_ring_read(&r, id, &out));
	assert_int_equal(out.flags, FR_REC_GPU);
	assert_int_equal(out.t_started, 0);
	fr_ring_destroy(&r);
}

static void wrap_overwrites_oldest(void **state)
{
	struct fr_ring r;
	struct fr_rec out;

	(void)state;
	assert_int_equal(fr_ring_init(&r, 16), 0);
	for (uint64_t i = 0; i < 40; i++) {
		struct fr_rec in = make(i, 1);

		fr_ring_push(&r, &in);
	}
	/* 40 pushed into 16 slots: records 0..23 are gone, 24..39 remain. */
	assert_false(fr_ring_read(&r, 23, &out));
	assert_false(fr_ring_complete(&r, 5, 6));
	for (uint64_t i = 24; i < 40; i++) {
		assert_true(fr_ring_read(&r, i, &out));
		assert_int_equal(out.seq, i);
	}
	assert_false(fr_ring_read(&r, 40, &out)); /* not yet written */
	fr_ring_destroy(&r);
}

#define WRITERS 4
#define PER_WRITER 200000

static struct fr_ring shared;
static int writers_done;

static void *writer(void *arg)
{
	uint16_t comm = (uint16_t)(uintptr_t)arg;

	for (uint64_t i = 0; i < PER_WRITER; i++) {
		struct fr_rec in = make(i, comm);
		uint64_t id = fr_ring_push(&shared, &in);

		fr_ring_complete(&shared, id, i + 1);
	}
	__atomic_add_fetch(&writers_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *reader(void *arg)
{
	uint64_t *good = arg;

	while (__atomic_load_n(&writers_done, __ATOMIC_ACQUIRE) < WRITERS) {
		uint64_t head = fr_ring_head(&shared);
		uint64_t first = head > shared.capacity ? head - shared.capacity : 0;

		for (uint64_t id = first; id < head; id++) {
			struct fr_rec out;

			if (!fr_ring_read(&shared, id, &out))
				continue;
			assert_int_equal(out.record_id, id);
			assert_consistent(&out);
			(*good)++;
		}
	}
	return NULL;
}

static void concurrent_writers_and_reader(void **state)
{
	pthread_t w[WRITERS], rd;
	uint64_t good = 0;

	(void)state;
	assert_int_equal(fr_ring_init(&shared, 1024), 0);
	assert_int_equal(pthread_create(&rd, NULL, reader, &good), 0);
	for (uintptr_t i = 0; i < WRITERS; i++)
		assert_int_equal(pthread_create(&w[i], NULL, writer, (void *)i), 0);
	for (int i = 0; i < WRITERS; i++)
		pthread_join(w[i], NULL);
	pthread_join(rd, NULL);

	/* Every push claimed a distinct id, and the last window is intact
	 * and completed. */
	assert_int_equal(fr_ring_head(&shared), (uint64_t)WRITERS * PER_WRITER);
	for (uint64_t id = fr_ring_head(&shared) - shared.capacity; id < fr_ring_head(&shared); id++) {
		struct fr_rec out;

		assert_true(fr_ring_read(&shared, id, &out));
		assert_int_equal(out.state, 1);
		assert_consistent(&out);
	}
	assert_true(good > 0);
	fr_ring_destroy(&shared);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(capacity_rounds_up_to_power_of_two),
		cmocka_unit_test(push_read_complete),
		cmocka_unit_test(waited_then_completed),
		cmocka_unit_test(started_then_completed),
		cmocka_unit_test(wrap_overwrites_oldest),
		cmocka_unit_test(concurrent_writers_and_reader),
	};

	return cmocka_run_group_tests_name("ring", tests, NULL, NULL);
}
