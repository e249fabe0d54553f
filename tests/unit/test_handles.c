/* The handle map hooks use to find communicators and requests. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../agent/handles.h"

static void put_get_take(void **state)
{
	struct fr_handle_map m;

	(void)state;
	assert_int_equal(fr_handles_init(&m, 64), 0);
	assert_int_equal(fr_handles_get(&m, 0x1000), 0);
	assert_true(fr_handles_put(&m, 0x1000, 7));
	assert_true(fr_handles_put(&m, 0x2000, 9));
	assert_int_equal(fr_handles_get(&m, 0x1000), 7);
	assert_int_equal(fr_handles_take(&m, 0x1000), 7);
	assert_int_equal(fr_handles_get(&m, 0x1000), 0);
	assert_int_equal(fr_handles_take(&m, 0x1000), 0);
	/* A recycled handle gets a new value in its old slot. */
	assert_true(fr_handles_put(&m, 0x1000, 11));
	assert_int_equal(fr_handles_get(&m, 0x1000), 11);
	assert_int_equal(fr_handles_get(&m, 0x2000), 9);
	/* Clearing only the value we saw: a recycled handle keeps its new one. */
	assert_false(fr_handles_take_if(&m, 0x1000, 7));
	assert_int_equal(fr_handles_get(&m, 0x1000), 11);
	assert_true(fr_handles_take_if(&m, 0x1000, 11));
	assert_int_equal(fr_handles_get(&m, 0x1000), 0);
	assert_false(fr_handles_take_if(&m, 0x3000, 1)); /* absent */
	/* 0 is never a handle. */
	assert_false(fr_handles_put(&m, 0, 1));
	fr_handles_destroy(&m);
}

static void full_map_refuses(void **state)
{
	struct fr_handle_map m;

	(void)state;
	assert_int_equal(fr_handles_init(&m, 8), 0);
	for (uintptr_t k = 1; k <= 8; k++)
		assert_true(fr_handles_put(&m, k * 16, k));
	assert_false(fr_handles_put(&m, 9 * 16, 9));
	for (uintptr_t k = 1; k <= 8; k++)
		assert_int_equal(fr_handles_get(&m, k * 16), k);
	assert_int_equal(fr_handles_get(&m, 9 * 16), 0);
	fr_handles_destroy(&m);
}

static struct fr_handle_map shared;

static void *inserter(void *arg)
{
	uintptr_t base = (uintptr_t)arg;

	for (uintptr_t k = 1; k <= 1000; k++)
		if (!fr_handles_put(&shared, base + k * 8, base + k))
			return (void *)1;
	return NULL;
}

static void concurrent_inserts(void **state)
{
	pthread_t t[4];

	(void)state;
	assert_int_equal(fr_handles_init(&shared, 8192), 0);
	for (uintptr_t i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, inserter, (void *)((i + 1) << 20)), 0);
	for (int i = 0; i < 4; i++) {
		void *failed;

		pthread_join(t[i], &failed);
		assert_null(failed);
	}
	for (uintptr_t i = 1; i <= 4; i++)
		for (uintptr_t k = 1; k <= 1000; k++)
			assert_int_equal(fr_handles_get(&shared, (i << 20) + k * 8), (i << 20) + k);
	fr_handles_destroy(&shared);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(put_get_take),
		cmocka_unit_test(full_map_refuses),
		cmocka_unit_test(concurrent_inserts),
	};

	return cmocka_run_group_tests_name("handles", tests, NULL, NULL);
}
