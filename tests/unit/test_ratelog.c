/*
 * daemon/ratelog.c: a limit hit over and over by one offender is logged
 * once a minute with a count of what was held back, offenders and limits
 * are told apart, no count is lost when the fixed table overflows.
 * daemon_log and the clock are stubbed: the lines are captured here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../daemon/clock.h"
#include "../../daemon/log.h"
#include "../../daemon/ratelog.h"

#define S NS_PER_S
#define MAX_LINES 20000

static char *lines[MAX_LINES];
static size_t nlines;

void daemon_log(const char *fmt, ...)
{
	char buf[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	assert_true(nlines < MAX_LINES);
	lines[nlines++] = strdup(buf);
}

uint64_t daemon_mono_ns(void)
{
	return 0;
}

static void lines_clear(void)
{
	for (size_t i = 0; i < nlines; i++)
		free(lines[i]);
	nlines = 0;
}

/* Each test starts from a clock far from the last one's, so no pair carries over. */
static uint64_t epoch;

static int setup(void **state)
{
	(void)state;
	lines_clear();
	epoch += 1000000 * S;
	/* Whatever an earlier test held back is written out first. */
	ratelog_sweep(epoch);
	lines_clear();
	return 0;
}

static void test_once_a_minute_with_a_count(void **state)
{
	uint64_t t = epoch;

	(void)state;
	assert_true(ratelog_at(t, "connections", "10.0.0.7", "refused %d", 0));
	for (int i = 1; i < 200; i++)
		assert_false(ratelog_at(t + (uint64_t)i * 100000000ull, "connections", "10.0.0.7",
					"refused %d", i));
	assert_int_equal(nlines, 1);
	assert_string_equal(lines[0], "refused 0");
	/* Quiet pairs are flushed by the sweep only after a whole interval. */
	ratelog_sweep(t + 59 * S);
	assert_int_equal(nlines, 1);
	assert_true(ratelog_at(t + 61 * S, "connections", "10.0.0.7", "refused %d", 200));
	assert_int_equal(nlines, 2);
	assert_string_equal(lines[1], "refused 200 (and 199 more times in the last 61 s)");
	/* The interval starts again from that line. */
	assert_false(ratelog_at(t + 62 * S, "connections", "10.0.0.7", "refused %d", 201));
	assert_int_equal(nlines, 2);
}

static void test_sweep_writes_what_was_held(void **state)
{
	uint64_t t = epoch;

	(void)state;
	ratelog_at(t, "incident rate", "job-a", "suppressed %d", 1);
	ratelog_at(t + 1 * S, "incident rate", "job-a", "suppressed %d", 2);
	ratelog_at(t + 2 * S, "incident rate", "job-a", "suppressed %d", 3);
	ratelog_sweep(t + 30 * S);
	assert_int_equal(nlines, 1);
	ratelog_sweep(t + 60 * S);
	assert_int_equal(nlines, 2);
	assert_string_equal(lines[1], "suppressed 3 (repeated 2 times in the last 60 s)");
	/* Written once: the next sweep has nothing to say. */
	ratelog_sweep(t + 200 * S);
	assert_int_equal(nlines, 2);
}

static void test_offenders_and_limits_apart(void **state)
{
	uint64_t t = epoch;
	char longname[300];

	(void)state;
	assert_true(ratelog_at(t, "connections", "10.0.0.1", "a"));
	assert_true(ratelog_at(t, "connections", "10.0.0.2", "b"));
	assert_true(ratelog_at(t, "job connections", "10.0.0.1", "c"));
	assert_false(ratelog_at(t, "connections", "10.0.0.1", "d"));
	assert_int_equal(nlines, 3);
	/* A name longer than the table keeps is still one offender. */
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_true(ratelog_at(t, "frame progress", longname, "e"));
	assert_false(ratelog_at(t, "frame progress", longname, "f"));
}

static void test_table_overflow_loses_no_count(void **state)
{
	uint64_t t = epoch;
	uint64_t held_before = ratelog_held_total(), counted = 0;
	char name[32];

	(void)state;
	/* Five held back for one offender, then 5000 others push it out. */
	for (int i = 0; i < 6; i++)
		ratelog_at(t, "dump upload", "victim", "too big");
	for (int i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "job-%d", i);
		assert_true(ratelog_at(t + 1, "dump upload", name, "too big"));
	}
	ratelog_sweep(t + 120 * S);
	for (size_t i = 0; i < nlines; i++) {
		unsigned long long n;
		const char *p = strstr(lines[i], "(repeated ");

		if (p && sscanf(p, "(repeated %llu times", &n) == 1)
			counted += n;
	}
	assert_int_equal(counted, 5);
	assert_int_equal(ratelog_held_total() - held_before, 5);
	assert_int_equal(nlines, 1 + 5000 + 1);
}

static void test_offender_addr_drops_the_port(void **state)
{
	char out[64];

	(void)state;
	ratelog_offender_addr("10.1.2.3:40000", out, sizeof(out));
	assert_string_equal(out, "10.1.2.3");
	ratelog_offender_addr("[fe80::1]:7420", out, sizeof(out));
	assert_string_equal(out, "[fe80::1]");
	ratelog_offender_addr("unix:uid=1000,pid=4242", out, sizeof(out));
	assert_string_equal(out, "unix:uid=1000");
	ratelog_offender_addr("unknown peer", out, sizeof(out));
	assert_string_equal(out, "unknown peer");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_once_a_minute_with_a_count, setup),
		cmocka_unit_test_setup(test_sweep_writes_what_was_held, setup),
		cmocka_unit_test_setup(test_offenders_and_limits_apart, setup),
		cmocka_unit_test_setup(test_table_overflow_loses_no_count, setup),
		cmocka_unit_test_setup(test_offender_addr_drops_the_port, setup),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	lines_clear();
	return rc;
}
