/*
 * The pickle reader (dumps/pickle.c), on pickles made by Python: the
 * Flight Recorder dumps and the table of small cases in tests/data/pytorch/
 * (written by tests/data/pytorch/make.py, which also checks that Python
 * reads each valid case as the table says and that every supported opcode
 * appears in one).
 */
/* For asprintf(). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pickle.h"
#include "pytorch_data.h"

static json_t *read_json(const char *name)
{
	json_error_t jerr;
	json_t *j;
	char *path;

	assert_true(asprintf(&path, "%s/pytorch/%s", pytorch_data_dir(), name) > 0);
	/* The cases hold strings with NUL in them, as Python strs may. */
	j = json_load_file(path, JSON_ALLOW_NUL, &jerr);
	if (!j)
		fail_msg("%s:%d: %s", path, jerr.line, jerr.text);
	free(path);
	return j;
}

static unsigned char *unhex(const char *hex, size_t *len)
{
	size_t n = strlen(hex) / 2, i;
	unsigned char *buf = malloc(n ? n : 1);
	unsigned int byte;

	assert_non_null(buf);
	for (i = 0; i < n; i++) {
		assert_int_equal(sscanf(hex + 2 * i, "%2x", &byte), 1);
		buf[i] = (unsigned char)byte;
	}
	*len = n;
	return buf;
}

/* The case table: an array of {name, source, pickle (hex), json | error}. */
static json_t *cases;

static int load_cases(void **state)
{
	(void)state;
	cases = read_json("cases.json");
	return json_is_array(cases) && json_array_size(cases) > 100 ? 0 : -1;
}

static int free_cases(void **state)
{
	(void)state;
	json_decref(cases);
	return 0;
}

static const char *case_name(const json_t *c)
{
	return json_string_value(json_object_get(c, "name"));
}

/*
 * Checks that buf is refused with EPROTO and a message that starts with an
 * offset, which is left in err.
 */
static void expect_refused(const void *buf, size_t len, const char *what, char *err, size_t errlen)
{
	json_t *j;

	errno = 0;
	j = fr_pickle_load(buf, len, err, errlen);
	if (j)
		fail_msg("%s: read, but should be refused", what);
	assert_int_equal(errno, EPROTO);
	if (strncmp(err, "offset ", 7) != 0)
		fail_msg("%s: message \"%s\" does not start with the offset", what, err);
}

static void test_sniff(void **state)
{
	(void)state;
	assert_true(fr_pickle_sniff("\x80\x02}", 3));
	assert_true(fr_pickle_sniff("\x80\x05", 2));
	assert_false(fr_pickle_sniff("\x80\x01", 2));
	assert_false(fr_pickle_sniff("\x80\x06", 2));
	assert_false(fr_pickle_sniff("\x80", 1));
	assert_false(fr_pickle_sniff("", 0));
	assert_false(fr_pickle_sniff("{\"version\": \"2.10\"}", 19));
}

/* Every case of the table gives its JSON value or its error; all wrong ones are listed. */
static void test_cases(void **state)
{
	unsigned valid = 0, refused = 0, wrong = 0;
	char err[512], *text;
	size_t i, len;
	json_t *c;

	(void)state;
	json_array_foreach(cases, i, c) {
		const json_t *want = json_object_get(c, "json");
		const char *werr = json_string_value(json_object_get(c, "error"));
		unsigned char *buf = unhex(json_string_value(json_object_get(c, "pickle")), &len);
		json_t *got;

		assert_true(want || werr);
		errno = 0;
		got = fr_pickle_load(buf, len, err, sizeof(err));
		if (werr && got) {
			print_error("%s: read, but should fail with \"%s\"\n", case_name(c), werr);
			wrong++;
		} else if (werr && (!strstr(err, werr) || errno != EPROTO)) {
			print_error("%s: error \"%s\" (errno %d), expected \"%s\"\n",
				    case_name(c), err, errno, werr);
			wrong++;
		} else if (werr) {
			refused++;
		} else if (!got) {
			print_error("%s: %s\n", case_name(c), err);
			wrong++;
		} else if (!json_equal(got, want)) {
			text = json_dumps(got, JSON_ENCODE_ANY | JSON_COMPACT);
			print_error("%s: read as %.300s\n", case_name(c), text);
			free(text);
			wrong++;
		} else {
			valid++;
		}
		json_decref(got);
		free(buf);
	}
	assert_int_equal(wrong, 0);
	assert_true(valid > 100);
	assert_true(refused > 50);
}

/* The Flight Recorder dump, pickled with each protocol, reads as its JSON. */
static void test_flight_recorder_dump(void **state)
{
	static const char *const files[] = {
		"fr-rank0-p2.pickle", "fr-rank0-p4.pickle", "fr-rank0-p5.pickle",
	};
	json_t *want = read_json("fr-rank0.json");
	char err[512];
	size_t i, len;

	(void)state;
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		unsigned char *buf = read_data(files[i], &len);
		json_t *got, *entries, *e, *e0;

		assert_true(fr_pickle_sniff(buf, len));
		got = fr_pickle_load(buf, len, err, sizeof(err));
		if (!got)
			fail_msg("%s: %s", files[i], err);
		if (!json_equal(got, want))
			fail_msg("%s differs from fr-rank0.json", files[i]);

		/* What fr-analyze will look at, spelled out. */
		assert_string_equal(json_string_value(json_object_get(got, "version")), "2.10");
		assert_string_equal(json_string_value(json_object_get(
			json_object_get(json_object_get(got, "pg_config"), "0"), "ranks")), "[0, 1, 2, 3]");
		entries = json_object_get(got, "entries");
		assert_int_equal(json_array_size(entries), 9);
		e = json_array_get(entries, 8);
		assert_string_equal(json_string_value(json_object_get(e, "state")), "started");
		assert_true(json_is_null(json_object_get(e, "time_discovered_completed_ns")));
		assert_int_equal(json_integer_value(json_object_get(e, "time_created_ns")),
				 1700000000000000000ll + 8 * 2500000);
		assert_string_equal(json_string_value(json_array_get(
			json_object_get(e, "process_group"), 1)), "default_pg");
		assert_string_equal(json_string_value(json_object_get(json_array_get(
			json_object_get(e, "frames"), 2), "filename")), "/home/j\xc3\xbcrgen/train.py");
		/* A frame the pickle shares between entries is one object. */
		e0 = json_array_get(entries, 0);
		assert_ptr_equal(json_array_get(json_object_get(e0, "frames"), 0),
				 json_array_get(json_object_get(e, "frames"), 0));

		json_decref(got);
		free(buf);
	}
	json_decref(want);
}

/* Every proper prefix of a valid pickle is refused as truncated, never read. */
static void check_prefixes(const unsigned char *buf, size_t len, const char *what)
{
	char err[512], name[300];
	size_t n;

	for (n = 0; n < len; n++) {
		snprintf(name, sizeof(name), "%s cut at %zu", what, n);
		expect_refused(buf, n, name, err, sizeof(err));
		if (n > 0 && !strstr(err, "truncated"))
			fail_msg("%s: \"%s\"", name, err);
	}
}

static void test_truncated_at_every_length(void **state)
{
	static const char *const files[] = {
		"fr-rank0-p2.pickle", "fr-rank0-p4.pickle", "fr-rank0-p5.pickle",
	};
	unsigned char *buf;
	size_t i, len;
	json_t *c;

	(void)state;
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		buf = read_data(files[i], &len);
		check_prefixes(buf, len, files[i]);
		free(buf);
	}
	json_array_foreach(cases, i, c) {
		if (!json_object_get(c, "json"))
			continue;
		buf = unhex(json_string_value(json_object_get(c, "pickle")), &len);
		check_prefixes(buf, len, case_name(c));
		free(buf);
	}
}

/*
 * Every byte of a dump replaced by a few values: the reader gives a tree or
 * an error with an offset, and never reads out of bounds or leaks (run this
 * under AddressSanitizer).
 */
static void test_corrupt_every_byte(void **state)
{
	static const unsigned char subst[] = { 0x00, 0xff, 0x28, 0x2e, 0x5d, 0x61, 0x68, 0x71, 0x95 };
	char err[512];
	unsigned char *buf;
	size_t len, i, k, refused = 0;
	json_t *j;

	(void)state;
	buf = read_data("fr-rank0-p4.pickle", &len);
	for (i = 0; i < len; i++) {
		unsigned char orig = buf[i];

		for (k = 0; k < sizeof(subst) + 2; k++) {
			buf[i] = k < sizeof(subst) ? subst[k] : k == sizeof(subst) ? orig ^ 1 : orig ^ 0x80;
			errno = 0;
			j = fr_pickle_load(buf, len, err, sizeof(err));
			if (j) {
				json_decref(j);
				continue;
			}
			if (errno != EPROTO || strncmp(err, "offset ", 7) != 0)
				fail_msg("byte %zu = 0x%02x: errno %d, \"%s\"", i, buf[i], errno, err);
			refused++;
		}
		buf[i] = orig;
	}
	/* Most corruptions break the pickle; some only change a value. */
	assert_true(refused > len);
	free(buf);
}

/* An allocator for jansson that fails the n-th allocation from now. */
static long alloc_left;

static void *failing_malloc(size_t n)
{
	if (alloc_left-- == 0)
		return NULL;
	return malloc(n);
}

/* Out of memory at each of jansson's allocations: ENOMEM, nothing leaked. */
static void test_out_of_memory(void **state)
{
	char err[512];
	unsigned char *buf;
	size_t len;
	long n;
	json_t *j = NULL;

	(void)state;
	buf = read_data("fr-rank0-p2.pickle", &len);
	json_set_alloc_funcs(failing_malloc, free);
	for (n = 0; n < 100000; n++) {
		alloc_left = n;
		errno = 0;
		j = fr_pickle_load(buf, len, err, sizeof(err));
		if (j)
			break;
		if (errno != ENOMEM || !strstr(err, "out of memory")) {
			json_set_alloc_funcs(malloc, free);
			fail_msg("allocation %ld failing: errno %d, \"%s\"", n, errno, err);
		}
	}
	json_set_alloc_funcs(malloc, free);
	assert_non_null(j);
	assert_true(n > 100);
	json_decref(j);
	free(buf);
}

/* The message is optional and cut to the buffer's size. */
static void test_error_buffer(void **state)
{
	char small[12];

	(void)state;
	errno = 0;
	assert_null(fr_pickle_load("\x80\x02\x63", 3, NULL, 0));
	assert_int_equal(errno, EPROTO);
	memset(small, 'x', sizeof(small));
	assert_null(fr_pickle_load("\x80\x02\x63", 3, small, sizeof(small)));
	assert_string_equal(small, "offset 2: o");
}

/*
 * A long string shared through the memo and used as the key of many dicts
 * would make jansson copy it each time: refused past a bound proportional
 * to the input, while a few such keys are read.
 */
static unsigned char *key_bomb(size_t keylen, size_t ndicts, size_t *len)
{
	size_t n, i;
	unsigned char *p = malloc(3 + 4 + keylen + 3 + 6 * ndicts + 1);

	assert_non_null(p);
	memcpy(p, "\x80\x04X", 3);
	n = 3;
	p[n++] = keylen & 0xff;
	p[n++] = keylen >> 8 & 0xff;
	p[n++] = keylen >> 16 & 0xff;
	p[n++] = keylen >> 24 & 0xff;
	memset(p + n, 'k', keylen);
	n += keylen;
	p[n++] = 0x94;	/* MEMOIZE */
	p[n++] = '0';	/* POP */
	p[n++] = ']';	/* EMPTY_LIST */
	for (i = 0; i < ndicts; i++) {
		memcpy(p + n, "}h\x00Nsa", 6);	/* {key: None} appended */
		n += 6;
	}
	p[n++] = '.';
	*len = n;
	return p;
}

static void test_key_copies_bounded(void **state)
{
	char err[512];
	unsigned char *buf;
	size_t len;
	json_t *j;

	(void)state;
	buf = key_bomb(200000, 10, &len);
	j = fr_pickle_load(buf, len, err, sizeof(err));
	if (!j)
		fail_msg("10 dicts: %s", err);
	assert_int_equal(json_array_size(j), 10);
	json_decref(j);
	free(buf);

	buf = key_bomb(200000, 1000, &len);
	assert_null(fr_pickle_load(buf, len, err, sizeof(err)));
	assert_int_equal(errno, EPROTO);
	assert_non_null(strstr(err, "dict keys copy more than"));
	free(buf);
}

/*
 * One long string in 3000 places reads: the bound on the tree's size
 * written out counts values, not bytes, and the places share one string.
 */
static void test_shared_long_string(void **state)
{
	size_t n, i, len = 2 + 1 + 5 + 1000 + 1 + 2 * 3000 + 1 + 1;
	unsigned char *buf = malloc(len);
	char err[512];
	json_t *j;

	(void)state;
	assert_non_null(buf);
	memcpy(buf, "\x80\x04(X\xe8\x03\x00\x00", 8);	/* MARK, BINUNICODE of 1000 bytes */
	n = 8;
	memset(buf + n, 'w', 1000);
	n += 1000;
	buf[n++] = 0x94;	/* MEMOIZE */
	for (i = 0; i < 3000; i++) {
		buf[n++] = 'h';	/* BINGET 0 */
		buf[n++] = 0;
	}
	buf[n++] = 'l';		/* LIST */
	buf[n++] = '.';
	assert_int_equal(n, len);
	j = fr_pickle_load(buf, len, err, sizeof(err));
	if (!j)
		fail_msg("%s", err);
	assert_int_equal(json_array_size(j), 3001);
	assert_int_equal(json_string_length(json_array_get(j, 3000)), 1000);
	assert_ptr_equal(json_array_get(j, 0), json_array_get(j, 3000));
	json_decref(j);
	free(buf);
}

/* Many open marks and a deep stack are only memory, given back on error. */
static void test_many_marks(void **state)
{
	size_t n = 200000, len = 2 + 2 * n + 1;
	unsigned char *buf = malloc(len);
	char err[512];

	(void)state;
	assert_non_null(buf);
	memcpy(buf, "\x80\x02", 2);
	memset(buf + 2, '(', n);
	memset(buf + 2 + n, ']', n);
	buf[len - 1] = '.';
	assert_null(fr_pickle_load(buf, len, err, sizeof(err)));
	assert_non_null(strstr(err, "STOP with 200000 MARKs open"));
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sniff),
		cmocka_unit_test(test_cases),
		cmocka_unit_test(test_flight_recorder_dump),
		cmocka_unit_test(test_truncated_at_every_length),
		cmocka_unit_test(test_corrupt_every_byte),
		cmocka_unit_test(test_out_of_memory),
		cmocka_unit_test(test_error_buffer),
		cmocka_unit_test(test_key_copies_bounded),
		cmocka_unit_test(test_shared_long_string),
		cmocka_unit_test(test_many_marks),
	};

	return cmocka_run_group_tests(tests, load_cases, free_cases);
}
