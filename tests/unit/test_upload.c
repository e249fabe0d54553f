/*
 * daemon/upload.c: a dump sent in pieces comes back whole and unchanged;
 * a piece out of place (a gap, an overlap, a changed total, past the end,
 * of a dump never started) and a dump over its limit are refused with a
 * reason that names what is wrong; the owner's charge is asked before the
 * buffer grows, and can refuse; a reset upload holds nothing.
 */
#include <setjmp.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../daemon/upload.h"

#define TOTAL (200u << 10)

static uint8_t dump[TOTAL];

static struct fr_msg_dump_data piece(uint64_t offset, uint32_t len, uint64_t total)
{
	struct fr_msg_dump_data m = { .offset = offset, .total = total, .len = len };

	snprintf(m.incident, sizeof(m.incident), "inc-1");
	m.data = dump + (offset < TOTAL ? offset : 0);
	return m;
}

static int setup(void **state)
{
	(void)state;
	for (size_t i = 0; i < TOTAL; i++)
		dump[i] = (uint8_t)(i * 7 + i / 251);
	return 0;
}

/* Counts what it is asked for, and refuses once `refuse_after` bytes are charged. */
struct ledger {
	unsigned calls;
	uint64_t grown;
	uint64_t refuse_after;
};

static bool charge(void *ctx, struct upload *up, uint64_t grow, uint32_t len, char *why,
		   size_t cap)
{
	struct ledger *l = ctx;

	(void)len;
	l->calls++;
	if (l->refuse_after && l->grown + grow > l->refuse_after) {
		snprintf(why, cap, "over the test's budget");
		return false;
	}
	l->grown += grow;
	up->charged += grow;
	return true;
}

static struct upload started(uint64_t total)
{
	struct upload up = { 0 };

	assert_int_equal(upload_begin(&up, "inc-1", total, TOTAL), 0);
	assert_true(up.active);
	assert_string_equal(up.id, "inc-1");
	assert_null(up.data);
	return up;
}

static void test_in_order_completes(void **state)
{
	struct upload up = started(TOTAL);
	struct ledger l = { 0 };
	struct fr_msg_dump_data m;
	char why[256];
	uint64_t off = 0;
	uint8_t *data;
	size_t len;

	(void)state;
	while (off + 4096 < TOTAL) {
		m = piece(off, 4096, TOTAL);
		assert_int_equal(upload_append(&up, &m, charge, &l, why, sizeof(why)), UPLOAD_MORE);
		off += 4096;
		/* The buffer doubles, never past the total, and is charged first. */
		assert_true(up.cap >= up.received && up.cap <= TOTAL);
		assert_int_equal(up.charged, up.cap);
	}
	m = piece(off, (uint32_t)(TOTAL - off), TOTAL);
	assert_int_equal(upload_append(&up, &m, charge, &l, why, sizeof(why)), UPLOAD_COMPLETE);
	assert_int_equal(l.grown, TOTAL);
	data = upload_take(&up, &len);
	assert_int_equal(len, TOTAL);
	assert_memory_equal(data, dump, TOTAL);
	free(data);
	assert_false(up.active);
	assert_null(up.data);
}

static void test_one_piece_and_no_charge(void **state)
{
	struct upload up = started(10);
	struct fr_msg_dump_data m = piece(0, 10, 10);
	char why[256];
	uint8_t *data;
	size_t len;

	(void)state;
	assert_int_equal(upload_append(&up, &m, NULL, NULL, why, sizeof(why)), UPLOAD_COMPLETE);
	/* A small dump's buffer is its size, not UPLOAD_MIN_CAP. */
	assert_int_equal(up.cap, 10);
	data = upload_take(&up, &len);
	assert_int_equal(len, 10);
	assert_memory_equal(data, dump, 10);
	free(data);
}

/* After 1000 bytes in order, piece `m` is refused with a reason holding `what`. */
static void refused_after_some(struct fr_msg_dump_data m, const char *what)
{
	struct upload up = started(5000);
	struct fr_msg_dump_data first = piece(0, 1000, 5000);
	char why[256];

	assert_int_equal(upload_append(&up, &first, NULL, NULL, why, sizeof(why)), UPLOAD_MORE);
	why[0] = '\0';
	assert_int_equal(upload_append(&up, &m, NULL, NULL, why, sizeof(why)), UPLOAD_ERROR);
	assert_non_null(strstr(why, what));
	/* Nothing of the refused piece was kept. */
	assert_int_equal(up.received, 1000);
	upload_reset(&up);
}

static void test_gap(void **state)
{
	(void)state;
	refused_after_some(piece(2000, 100, 5000), "a gap");
	refused_after_some(piece(2000, 100, 5000), "at offset 2000 of 5000 out of order (expected offset 1000 of 5000)");
}

static void test_overlap(void **state)
{
	(void)state;
	refused_after_some(piece(500, 1000, 5000), "overlaps");
	refused_after_some(piece(0, 1000, 5000), "overlaps");
}

static void test_total_changed(void **state)
{
	(void)state;
	refused_after_some(piece(1000, 100, 6000), "total changed");
}

static void test_past_the_end(void **state)
{
	(void)state;
	refused_after_some(piece(1000, 4001, 5000), "past the dump's end");
}

static void test_never_started(void **state)
{
	struct upload up = { 0 };
	struct fr_msg_dump_data m = piece(4096, 10, 5000);
	char why[256];

	(void)state;
	assert_int_equal(upload_append(&up, &m, NULL, NULL, why, sizeof(why)), UPLOAD_ERROR);
	assert_string_equal(why, "piece at offset 4096 of a dump never started");
	assert_null(up.data);
}

static void test_over_limit(void **state)
{
	struct upload up = { 0 };

	(void)state;
	/* Refused as they begin, and nothing is held: the owner says why. */
	assert_int_equal(upload_begin(&up, "inc-1", TOTAL + 1, TOTAL), -EMSGSIZE);
	assert_false(up.active);
	assert_null(up.data);
	assert_int_equal(upload_begin(&up, "inc-1", 0, TOTAL), -EPROTO);
	assert_false(up.active);
	assert_int_equal(upload_begin(&up, "inc-1", TOTAL, TOTAL), 0);
	assert_true(up.active);
}

static void test_charge_refuses(void **state)
{
	struct upload up = started(TOTAL);
	struct ledger l = { .refuse_after = UPLOAD_MIN_CAP };
	struct fr_msg_dump_data m = piece(0, UPLOAD_MIN_CAP, TOTAL);
	char why[256];

	(void)state;
	assert_int_equal(upload_append(&up, &m, charge, &l, why, sizeof(why)), UPLOAD_MORE);
	/* The first buffer is full: the next piece needs it doubled. */
	m = piece(UPLOAD_MIN_CAP, 1, TOTAL);
	assert_int_equal(upload_append(&up, &m, charge, &l, why, sizeof(why)), UPLOAD_ERROR);
	assert_string_equal(why, "over the test's budget");
	assert_int_equal(up.cap, UPLOAD_MIN_CAP);
	assert_int_equal(up.received, UPLOAD_MIN_CAP);
	/* Out of order is found before anything is charged. */
	l.calls = 0;
	m = piece(5, 1, TOTAL);
	assert_int_equal(upload_append(&up, &m, charge, &l, why, sizeof(why)), UPLOAD_ERROR);
	assert_int_equal(l.calls, 0);
	upload_reset(&up);
}

static void test_reset_frees(void **state)
{
	struct upload up = started(TOTAL);
	struct fr_msg_dump_data m = piece(0, 4096, TOTAL);
	char why[256];

	(void)state;
	assert_int_equal(upload_append(&up, &m, NULL, NULL, why, sizeof(why)), UPLOAD_MORE);
	assert_non_null(up.data);
	upload_reset(&up);
	assert_false(up.active);
	assert_null(up.data);
	assert_int_equal(up.cap, 0);
	assert_int_equal(up.received, 0);
	assert_int_equal(up.total, 0);
	assert_string_equal(up.id, "");
	/* Ready for the next dump. */
	up = started(10);
	upload_reset(&up);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_in_order_completes),
		cmocka_unit_test(test_one_piece_and_no_charge),
		cmocka_unit_test(test_gap),
		cmocka_unit_test(test_overlap),
		cmocka_unit_test(test_total_changed),
		cmocka_unit_test(test_past_the_end),
		cmocka_unit_test(test_never_started),
		cmocka_unit_test(test_over_limit),
		cmocka_unit_test(test_charge_refuses),
		cmocka_unit_test(test_reset_frees),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
