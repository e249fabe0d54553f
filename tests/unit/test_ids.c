/*
 * fr_ids_rank() (dumps/ids.c): records sorted by the ranks it gives come
 * out in the order strcmp on their ids would put them, equal ids alike.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ids.h"

struct rec {
	int tag;
	const char *id;
	uint32_t rank;
};

static void test_ranks_compare_as_strcmp(void **state)
{
	static const char *const names[] = { "world", "self.5", "world/1s0", "", "self.10",
					     "world", "self.5", "a", "world/1s0", "self.1" };
	enum { N = sizeof(names) / sizeof(names[0]) };
	struct rec recs[N];

	(void)state;
	for (int i = 0; i < N; i++)
		/* Equal ids at different addresses, as in different dumps. */
		recs[i] = (struct rec){ i, strdup(names[i]), UINT32_MAX };
	assert_int_equal(fr_ids_rank(recs, N, sizeof(recs[0]), offsetof(struct rec, id),
				     offsetof(struct rec, rank)), 0);
	for (int i = 0; i < N; i++) {
		for (int j = 0; j < N; j++) {
			int c = strcmp(recs[i].id, recs[j].id);

			assert_int_equal(c < 0, recs[i].rank < recs[j].rank);
			assert_int_equal(c == 0, recs[i].rank == recs[j].rank);
		}
		/* Places among the distinct ids: 7 of them, from 0. */
		assert_true(recs[i].rank < 7);
		assert_int_equal(recs[i].tag, i);
	}
	for (int i = 0; i < N; i++)
		free((char *)recs[i].id);
}

static void test_none_and_many(void **state)
{
	enum { N = 5000 };
	struct rec *recs = calloc(N, sizeof(*recs));
	char (*ids)[16] = calloc(N, sizeof(*ids));

	(void)state;
	assert_int_equal(fr_ids_rank(NULL, 0, sizeof(*recs), offsetof(struct rec, id),
				     offsetof(struct rec, rank)), 0);
	/* More ids than the table's first size: it grows, none is lost. */
	for (int i = 0; i < N; i++) {
		snprintf(ids[i], sizeof(ids[i]), "c%d", (N - i) % 1000);
		recs[i].id = ids[i];
	}
	assert_int_equal(fr_ids_rank(recs, N, sizeof(*recs), offsetof(struct rec, id),
				     offsetof(struct rec, rank)), 0);
	for (int i = 1; i < N; i++) {
		int c = strcmp(recs[i - 1].id, recs[i].id);

		assert_int_equal(c < 0, recs[i - 1].rank < recs[i].rank);
		assert_int_equal(c == 0, recs[i - 1].rank == recs[i].rank);
		assert_true(recs[i].rank < 1000);
	}
	free(recs);
	free(ids);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ranks_compare_as_strcmp),
		cmocka_unit_test(test_none_and_many),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
