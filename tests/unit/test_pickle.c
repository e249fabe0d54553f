/*
 * The pickle reader (dumps/pickle.c), on pickles made by Python: the
 * Flight Recorder dumps and the table of small cases in tests/data/pytorch/
 * (written by tests/data/pytorch/make.py, which also checks that Python
 * reads each valid case as the table says and that every supported opcode
 * appears in one), and on pickles made here to break it.
 */
/* For asprintf() and RTLD_NEXT. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "pickle.h"
#include "value.h"
#include "pytorch_data.h"

/*
 * Allocation failures on demand: this program's malloc, calloc and realloc
 * replace the C library's for every caller (the reader, its document and
 * the libraries) and fail the n-th call from when fail_in is set to n.
 * Until then, and after, they pass every call on.
 */
static long fail_in = -1;

/*
 * ThreadSanitizer's start-up allocates through these before it can follow
 * a function call: they are left uninstrumented.
 */
#define NO_TSAN __attribute__((no_sanitize("thread")))

static void *(*next_malloc)(size_t);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);

/*
 * dlsym() may allocate (with calloc) while it looks the functions up:
 * those few bytes come from here, and are never freed.
 */
static char boot_heap[4096] __attribute__((aligned(16)));
static size_t boot_used;
static bool booting;

NO_TSAN static void *boot_alloc(size_t n)
{
	void *p;

	n = (n + 15) & ~(size_t)15;
	if (n > sizeof(boot_heap) - boot_used)
		return NULL;
	p = boot_heap + boot_used;
	boot_used += n;
	return p;
}

NO_TSAN static bool find_next(void)
{
	if (next_malloc && next_calloc && next_realloc)
		return true;
	if (booting)
		return false;
	booting = true;
	next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	next_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
	next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
	booting = false;
	return next_malloc && next_calloc && next_realloc;
}

NO_TSAN static bool failing_now(void)
{
	return fail_in >= 0 && fail_in-- == 0;
}

NO_TSAN void *malloc(size_t n)
{
	if (!find_next())
		return boot_alloc(n);
	return failing_now() ? NULL : next_malloc(n);
}

NO_TSAN void *calloc(size_t n, size_t size)
{
	if (!find_next())
		return size && n > SIZE_MAX / size ? NULL : boot_alloc(n * size);
	return failing_now() ? NULL : next_calloc(n, size);
}

NO_TSAN void *realloc(void *p, size_t n)
{
	if (!find_next())
		return NULL;
	return failing_now() ? NULL : next_realloc(p, n);
}

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

/*
 * A str's NUL becomes U+FFFD in the reader (a value's string holds no
 * NUL), where the table, written from Python's reading, keeps it.
 */
static void replace_nul(json_t *j)
{
	const char *k, *s;
	char *text, *o;
	size_t i, n;
	json_t *v;

	if (json_is_array(j)) {
		json_array_foreach(j, i, v)
			replace_nul(v);
		return;
	}
	if (json_is_object(j)) {
		json_object_foreach(j, k, v)
			replace_nul(v);
		return;
	}
	if (!json_is_string(j))
		return;
	s = json_string_value(j);
	n = json_string_length(j);
	if (!memchr(s, 0, n))
		return;
	text = o = malloc(3 * n);
	assert_non_null(text);
	for (i = 0; i < n; i++) {
		if (s[i]) {
			*o++ = s[i];
		} else {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
		}
	}
	assert_int_equal(json_string_setn_nocheck(j, text, o - text), 0);
	free(text);
}

/*
 * Checks that every dict of the tree has one member per key, which its
 * JSON form cannot show (a JSON object takes a key once); returns the
 * members seen, so that a test can also check that some were merged.
 */
static size_t check_unique(const struct fr_val *v, unsigned depth)
{
	size_t members = 0, i, j;

	assert_true(depth <= FR_PICKLE_DEPTH_MAX);
	if (v->type == FR_VAL_ARRAY) {
		for (i = 0; i < v->n; i++)
			members += check_unique(v->u.items[i], depth + 1);
	} else if (v->type == FR_VAL_OBJECT) {
		for (i = 0; i < v->n; i++) {
			const struct fr_val *k = v->u.items[2 * i];

			assert_int_equal(k->type, FR_VAL_STRING);
			/* Quadratic, but the dicts tested here are small. */
			for (j = 0; j < i && v->n <= 64; j++) {
				const struct fr_val *o = v->u.items[2 * j];

				if (o->n == k->n && memcmp(o->u.s, k->u.s, k->n) == 0)
					fail_msg("key \"%s\" twice in a dict", k->u.s);
			}
			members += 1 + check_unique(v->u.items[2 * i + 1], depth + 1);
		}
	}
	return members;
}

/* The case table: an array of {name, source, pickle (hex), json | error}. */
static json_t *cases;

static int load_cases(void **state)
{
	size_t i;
	json_t *c;

	(void)state;
	cases = read_json("cases.json");
	json_array_foreach(cases, i, c)
		replace_nul(json_object_get(c, "json"));
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

/* Reads buf into a new document (*d, the caller frees it); the return code of the load. */
static int load(struct fr_doc **d, const void *buf, size_t len, struct fr_val **v, char *err,
		size_t errlen)
{
	int rc;

	*d = fr_doc_new();
	assert_non_null(*d);
	*v = (struct fr_val *)(uintptr_t)1;
	rc = fr_pickle_load(*d, buf, len, v, err, errlen);
	if (rc)
		assert_null(*v);
	else
		assert_non_null(*v);
	return rc;
}

/*
 * Checks that buf is refused with EPROTO and a message that starts with an
 * offset, which is left in err.
 */
static void expect_refused(const void *buf, size_t len, const char *what, char *err, size_t errlen)
{
	struct fr_doc *d;
	struct fr_val *v;
	int rc;

	rc = load(&d, buf, len, &v, err, errlen);
	fr_doc_free(d);
	if (rc == 0)
		fail_msg("%s: read, but should be refused", what);
	assert_int_equal(rc, -EPROTO);
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
		struct fr_doc *d;
		struct fr_val *v;
		json_t *got = NULL;
		int rc;

		assert_true(want || werr);
		rc = load(&d, buf, len, &v, err, sizeof(err));
		if (!rc) {
			check_unique(v, 0);
			got = fr_val_to_json(v);
			assert_non_null(got);
		}
		if (werr && !rc) {
			print_error("%s: read, but should fail with \"%s\"\n", case_name(c), werr);
			wrong++;
		} else if (werr && (!strstr(err, werr) || rc != -EPROTO)) {
			print_error("%s: error \"%s\" (%d), expected \"%s\"\n",
				    case_name(c), err, rc, werr);
			wrong++;
		} else if (werr) {
			refused++;
		} else if (rc) {
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
		fr_doc_free(d);
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
		const struct fr_val *entries, *e, *e0, *config;
		struct fr_doc *d;
		struct fr_val *v;
		json_t *got;

		assert_true(fr_pickle_sniff(buf, len));
		if (load(&d, buf, len, &v, err, sizeof(err)))
			fail_msg("%s: %s", files[i], err);
		check_unique(v, 0);
		got = fr_val_to_json(v);
		if (!json_equal(got, want))
			fail_msg("%s differs from fr-rank0.json", files[i]);
		json_decref(got);

		/* What fr-analyze will look at, spelled out. */
		assert_int_equal(v->type, FR_VAL_OBJECT);
		assert_string_equal(fr_val_str(fr_val_get(v, "version")), "2.10");
		config = fr_val_get(v, "pg_config");
		assert_int_equal(config->n, 2);
		assert_string_equal(fr_val_str(fr_val_get(fr_val_get(config, "0"), "ranks")),
				    "[0, 1, 2, 3]");
		entries = fr_val_get(v, "entries");
		assert_true(fr_val_is(entries, FR_VAL_ARRAY));
		assert_int_equal(entries->n, 9);
		e = fr_val_item(entries, 8);
		assert_int_equal(e->n, 22);
		assert_string_equal(fr_val_str(fr_val_get(e, "state")), "started");
		assert_true(fr_val_is(fr_val_get(e, "time_discovered_completed_ns"), FR_VAL_NULL));
		assert_true(fr_val_is(fr_val_get(e, "time_created_ns"), FR_VAL_INT));
		assert_int_equal(fr_val_get(e, "time_created_ns")->u.i,
				 1700000000000000000ll + 8 * 2500000);
		assert_string_equal(fr_val_str(fr_val_item(fr_val_get(e, "process_group"), 1)),
				    "default_pg");
		assert_string_equal(fr_val_str(fr_val_get(fr_val_item(fr_val_get(e, "frames"), 2),
							  "filename")),
				    "/home/j\xc3\xbcrgen/train.py");
		/* A frame the pickle shares between entries is one value. */
		e0 = fr_val_item(entries, 0);
		assert_ptr_equal(fr_val_item(fr_val_get(e0, "frames"), 0),
				 fr_val_item(fr_val_get(e, "frames"), 0));
		/* So is a key, which the pickle writes once and refers back to. */
		assert_ptr_equal(e0->u.items[0], e->u.items[0]);
		fr_doc_free(d);
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
 * under AddressSanitizer). What it gives converts to JSON: it has no cycle
 * and every string is as a value's must be.
 */
static void test_corrupt_every_byte(void **state)
{
	static const unsigned char subst[] = { 0x00, 0xff, 0x28, 0x2e, 0x5d, 0x61, 0x68, 0x71, 0x95 };
	struct fr_doc *d = fr_doc_new();
	char err[512];
	unsigned char *buf;
	size_t len, i, k, refused = 0;
	struct fr_val *v;
	json_t *j;
	int rc;

	(void)state;
	assert_non_null(d);
	buf = read_data("fr-rank0-p4.pickle", &len);
	for (i = 0; i < len; i++) {
		unsigned char orig = buf[i];

		for (k = 0; k < sizeof(subst) + 2; k++) {
			buf[i] = k < sizeof(subst) ? subst[k] : k == sizeof(subst) ? orig ^ 1 : orig ^ 0x80;
			fr_doc_reset(d);
			rc = fr_pickle_load(d, buf, len, &v, err, sizeof(err));
			if (rc == 0) {
				j = fr_val_to_json(v);
				assert_non_null(j);
				json_decref(j);
				continue;
			}
			if (rc != -EPROTO || strncmp(err, "offset ", 7) != 0)
				fail_msg("byte %zu = 0x%02x: %d, \"%s\"", i, buf[i], rc, err);
			refused++;
		}
		buf[i] = orig;
	}
	/* Most corruptions break the pickle; some only change a value. */
	assert_true(refused > len);
	fr_doc_free(d);
	free(buf);
}

/* A growing pickle, for the tests that write their own. */
struct pk {
	unsigned char *p;
	size_t n, cap;
};

static void pk_add(struct pk *b, const void *data, size_t n)
{
	if (b->cap - b->n < n) {
		while (b->cap - b->n < n)
			b->cap = b->cap ? 2 * b->cap : 4096;
		b->p = realloc(b->p, b->cap);
		assert_non_null(b->p);
	}
	memcpy(b->p + b->n, data, n);
	b->n += n;
}

static void pk_str(struct pk *b, const char *s)
{
	unsigned char op[2] = { 0x8c, (unsigned char)strlen(s) };	/* SHORT_BINUNICODE */

	pk_add(b, op, 2);
	pk_add(b, s, strlen(s));
}

static void pk_binget(struct pk *b, uint32_t idx)
{
	unsigned char op[5] = { 'j', idx & 0xff, idx >> 8 & 0xff, idx >> 16 & 0xff, idx >> 24 };

	pk_add(b, op, 5);	/* LONG_BINGET */
}

static void pk_int(struct pk *b, uint32_t i)
{
	unsigned char op[5] = { 'J', i & 0xff, i >> 8 & 0xff, i >> 16 & 0xff, i >> 24 };

	pk_add(b, op, 5);	/* BININT */
}

/*
 * Out of memory at each allocation of reading buf, the document's and the
 * reader's own: ENOMEM, nothing leaked (AddressSanitizer's leak check sees
 * to that), until enough succeed. Returns how many failed.
 */
static long fail_each_allocation(const unsigned char *buf, size_t len, const char *what)
{
	char err[512];
	long n;
	int rc = -1;

	for (n = 0; n < 10000; n++) {
		struct fr_doc *d = fr_doc_new();
		struct fr_val *v;

		assert_non_null(d);
		fail_in = n;
		rc = fr_pickle_load(d, buf, len, &v, err, sizeof(err));
		fail_in = -1;
		fr_doc_free(d);
		if (rc == 0)
			break;
		if (rc != -ENOMEM || !strstr(err, "out of memory"))
			fail_msg("%s, allocation %ld failing: %d, \"%s\"", what, n, rc, err);
	}
	assert_int_equal(rc, 0);
	return n;
}

static void test_out_of_memory(void **state)
{
	static const char *const files[] = { "fr-rank0-p2.pickle", "fr-rank0-p4.pickle" };
	struct pk b = { 0 };
	unsigned char *buf;
	char key[16];
	size_t len, i;

	(void)state;
	assert_true(find_next());
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		buf = read_data(files[i], &len);
		/* The document's block and the stack, memo and marks at least. */
		assert_true(fail_each_allocation(buf, len, files[i]) >= 4);
		free(buf);
	}
	/*
	 * 3000 dicts of two keys, one of them new each time: the blocks, the
	 * stack, the memo and the table of keys grow, each a few times.
	 */
	pk_add(&b, "\x80\x04](", 4);
	for (i = 0; i < 3000; i++) {
		pk_add(&b, "}(", 2);
		snprintf(key, sizeof(key), "k%zu", i);
		pk_str(&b, key);
		pk_add(&b, "\x94K\x01", 3);
		if (i == 0)
			pk_str(&b, "x");
		else
			pk_binget(&b, 1);
		pk_add(&b, i == 0 ? "\x94K\x02u" : "K\x02u", i == 0 ? 4 : 3);
	}
	pk_add(&b, "e.", 2);
	assert_true(fail_each_allocation(b.p, b.n, "3000 dicts") >= 20);
	free(b.p);
}

/* The message is optional and cut to the buffer's size. */
static void test_error_buffer(void **state)
{
	struct fr_doc *d = fr_doc_new();
	struct fr_val *v;
	char small[12];

	(void)state;
	assert_int_equal(fr_pickle_load(d, "\x80\x02\x63", 3, &v, NULL, 0), -EPROTO);
	assert_null(v);
	memset(small, 'x', sizeof(small));
	assert_int_equal(fr_pickle_load(d, "\x80\x02\x63", 3, &v, small, sizeof(small)), -EPROTO);
	assert_string_equal(small, "offset 2: o");
	fr_doc_free(d);
}

/* Reads a pickle this test wrote, and checks its JSON text (compact). */
static void expect_json(const unsigned char *buf, size_t len, const char *want)
{
	struct fr_doc *d;
	struct fr_val *v;
	char err[512], *text;
	json_t *j;

	if (load(&d, buf, len, &v, err, sizeof(err)))
		fail_msg("%s", err);
	check_unique(v, 0);
	j = fr_val_to_json(v);
	assert_non_null(j);
	text = json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT | JSON_PRESERVE_ORDER);
	assert_string_equal(text, want);
	free(text);
	json_decref(j);
	fr_doc_free(d);
}

/* A pickle written as a string literal, and its length. */
#define PK(s) (const unsigned char *)(s), sizeof(s) - 1

/*
 * A key set again in a dict, as Python's dict does it: one member, in the
 * place of the first, with the last value; whether the pickle writes the
 * key again, refers back to it through the memo, or writes another key of
 * the same text (an int and its decimal str among them).
 */
static void test_duplicate_keys(void **state)
{
	(void)state;
	/* {'a': 1, 'b': 2, 'a': 3} in one SETITEMS, 'a' written twice. */
	expect_json(PK("\x80\x04}(\x8c\x01" "aK\x01\x8c\x01" "bK\x02\x8c\x01" "aK\x03u."),
		    "{\"a\":3,\"b\":2}");
	/* The same through the memo, and again in a later SETITEM. */
	expect_json(PK("\x80\x04}(\x8c\x01" "a\x94K\x01\x8c\x01" "bK\x02h\x00K\x03uh\x00K\x04s."),
		    "{\"a\":4,\"b\":2}");
	/* 1 and '1' are one key, as their JSON text is. */
	expect_json(PK("\x80\x04}(K\x01K\x01\x8c\x01" "1K\x02K\x01K\x03u."), "{\"1\":3}");
	/*
	 * A dict filled in two runs with another dict filled between them:
	 * {'a': 1}, then {'c': 0, 'a': 5} filled, then put under 'b', then
	 * 'a': 2.
	 */
	expect_json(PK("\x80\x04}\x8c\x01" "a\x94K\x01s\x8c\x01" "b}(\x8c\x01" "cK\x00h\x00K\x05us"
		       "h\x00K\x02s."),
		    "{\"a\":2,\"b\":{\"c\":0,\"a\":5}}");
	/* The same in a dict of DICT (built at once), where 'a' comes back. */
	expect_json(PK("\x80\x04(\x8c\x01" "aK\x01\x8c\x01" "aK\x02\x8c\x01" "bK\x03\x8c\x01"
		       "aK\x04" "d."),
		    "{\"a\":4,\"b\":3}");
	/*
	 * A dict whose keys start as the dict before's (the same strings, in
	 * order), then repeat one: [{'a': 1, 'b': 2, 'c': 3}, {'a': 1, 'b': 2,
	 * 'a': 3}].
	 */
	expect_json(PK("\x80\x04](}(\x8c\x01" "a\x94K\x01\x8c\x01" "b\x94K\x02\x8c\x01"
		       "c\x94K\x03u}(h\x00K\x01h\x01K\x02h\x00K\x03ue."),
		    "[{\"a\":1,\"b\":2,\"c\":3},{\"a\":3,\"b\":2}]");
	/* A dict with the keys of the dict before, then one of them again. */
	expect_json(PK("\x80\x04](}(\x8c\x01" "a\x94K\x01\x8c\x01" "b\x94K\x02u"
		       "}(h\x00K\x03h\x01K\x04uh\x00K\x05se."),
		    "[{\"a\":1,\"b\":2},{\"a\":5,\"b\":4}]");	/*
	 * Keys written anew in each dict (no memo), as pickle.dumps writes
	 * data loaded from JSON: the second dict follows the first's keys by
	 * their text, then leaves them; the third must not trip on the model
	 * the second left (it once dereferenced a key without a canon):
	 * [{'a': 1, 'b': 2}, {'a': 1, 'c': 2}, {'x': 1}].
	 */
	expect_json(PK("\x80\x02](}(\x8c\x01" "aK\x01\x8c\x01" "bK\x02u}(\x8c\x01" "aK\x01"
		       "\x8c\x01" "cK\x02u}(\x8c\x01" "xK\x01ue."),
		    "[{\"a\":1,\"b\":2},{\"a\":1,\"c\":2},{\"x\":1}]");
	/* The same with the keys of the first dict repeated further on. */
	expect_json(PK("\x80\x02](}(\x8c\x01" "aK\x01\x8c\x01" "bK\x02u}(\x8c\x01" "aK\x01"
		       "\x8c\x01" "cK\x02u}(\x8c\x01" "aK\x03\x8c\x01" "cK\x04\x8c\x01" "aK\x05u"
		       "}(\x8c\x01" "bK\x06ue."),
		    "[{\"a\":1,\"b\":2},{\"a\":1,\"c\":2},{\"a\":5,\"c\":4},{\"b\":6}]");
}

/*
 * A key that is a tuple is stored under its JSON text, as Python's json
 * module writes it (ensure_ascii=False), escapes and all: here the text
 * make.py's reference gives for pickle.dumps({k: 1}, protocol=4) with
 * k = ('a"\\\n\x01\x1f/\u00e9', 1.5, 0.1, -2, None, True, (2, ()), 2**70).
 */
static void test_key_text(void **state)
{
	static const char hex[] =
		"8004953e000000000000007d94288c0961225c0a011f2fc3a994473ff800000000"
		"0000473fb999999999999a4afeffffff4e884b022986948a09000000000000000040"
		"74944b01732e";
	struct fr_doc *d;
	struct fr_val *v;
	char err[512];
	unsigned char *buf;
	size_t len;

	(void)state;
	buf = unhex(hex, &len);
	if (load(&d, buf, len, &v, err, sizeof(err)))
		fail_msg("%s", err);
	assert_int_equal(v->n, 1);
	assert_string_equal(fr_val_str(v->u.items[0]),
			    "[\"a\\\"\\\\\\n\\u0001\\u001f/\xc3\xa9\", 1.5, 0.1, -2, null, true, "
			    "[2, []], \"1180591620717411303424\"]");
	fr_doc_free(d);
	free(buf);
}

static double seconds(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/*
 * A million keys in one dict cost O(n) or O(n log n), never O(n^2): a
 * million distinct keys, a million settings of one key through the memo,
 * and a million strs of one text (which Python's pickler writes for equal
 * strs that are not the same object) each read in well under the bound.
 */
static void test_million_keys(void **state)
{
	const uint32_t n = 1000000;
	struct pk b = { 0 };
	struct fr_doc *d;
	struct fr_val *v;
	char err[512], key[16];
	double t;
	int kind;
	uint32_t i;

	(void)state;
	for (kind = 0; kind < 3; kind++) {
		b.n = 0;
		pk_add(&b, "\x80\x04}(", 4);
		if (kind == 1) {
			pk_str(&b, "k");
			pk_add(&b, "\x94" "0", 2);	/* MEMOIZE, POP */
		}
		for (i = 0; i < n; i++) {
			if (kind == 0) {
				snprintf(key, sizeof(key), "k%u", i);
				pk_str(&b, key);
			} else if (kind == 1) {
				pk_binget(&b, 0);
			} else {
				pk_str(&b, "k");
			}
			pk_int(&b, i);
		}
		pk_add(&b, "u.", 2);
		t = seconds();
		if (load(&d, b.p, b.n, &v, err, sizeof(err)))
			fail_msg("kind %d: %s", kind, err);
		t = seconds() - t;
		assert_int_equal(v->n, kind == 0 ? n : 1);
		assert_int_equal(v->u.items[2 * v->n - 1]->u.i, n - 1);
		if (kind == 0)
			assert_string_equal(fr_val_str(v->u.items[2 * 123456]), "k123456");
		/* About 0.2 s on a slow machine, under a sanitizer more. */
		if (t > 5.0)
			fail_msg("kind %d: %.2f s", kind, t);
		fr_doc_free(d);
	}
	free(b.p);
}

/*
 * A long string shared through the memo and used as the key of many dicts
 * is one value in all of them: not copied, so not bounded either.
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

static void test_shared_key(void **state)
{
	struct fr_doc *d;
	struct fr_val *v;
	char err[512];
	unsigned char *buf;
	size_t len, i;

	(void)state;
	buf = key_bomb(200000, 1000, &len);
	if (load(&d, buf, len, &v, err, sizeof(err)))
		fail_msg("%s", err);
	assert_int_equal(v->n, 1000);
	for (i = 0; i < 1000; i++) {
		assert_int_equal(v->u.items[i]->n, 1);
		assert_ptr_equal(v->u.items[i]->u.items[0], v->u.items[0]->u.items[0]);
	}
	assert_int_equal(v->u.items[0]->u.items[0]->n, 200000);
	fr_doc_free(d);
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
	struct fr_doc *d;
	struct fr_val *v;
	char err[512];

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
	if (load(&d, buf, len, &v, err, sizeof(err)))
		fail_msg("%s", err);
	assert_int_equal(v->n, 3001);
	assert_int_equal(fr_val_item(v, 3000)->n, 1000);
	for (i = 1; i <= 3000; i++)
		assert_ptr_equal(fr_val_item(v, 0), fr_val_item(v, i));
	fr_doc_free(d);
	free(buf);
}

/* What a hook saw: each item as JSON, in order. */
static int keep_item(void *arg, const struct fr_val *item)
{
	json_t *j = fr_val_to_json(item);

	return j && json_array_append_new(arg, j) == 0 ? 0 : -ENOMEM;
}

/* The hook's list taken out of a tree as JSON, for comparing the rest. */
static json_t *without_entries(const struct fr_val *root, json_t **entries)
{
	json_t *j = fr_val_to_json(root);

	*entries = json_incref(json_object_get(j, "entries"));
	json_object_del(j, "entries");
	return j;
}

/*
 * Flight Recorder pickles loaded with their entries read by a hook: the
 * hook gets every entry, in order, as the tree has it (frames shared
 * through the memo included), the document holds the rest, and its list
 * is left empty.
 */
static void test_hook_reads_entries(void **state)
{
	static const char *const files[] = {
		"fr-rank0-p2.pickle", "fr-rank0-p4.pickle", "fr-rank0-p5.pickle",
	};
	char err[512];

	(void)state;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		size_t len;
		unsigned char *buf = read_data(files[i], &len);
		json_t *items = json_array(), *tree_entries, *hooked_entries, *tree, *hooked;
		struct fr_pickle_hook hook = { "entries", keep_item, items, 0 };
		struct fr_doc *d1 = fr_doc_new(), *d2 = fr_doc_new();
		struct fr_val *v1, *v2;

		assert_int_equal(fr_pickle_load(d1, buf, len, &v1, err, sizeof(err)), 0);
		if (fr_pickle_load_with(d2, buf, len, &hook, &v2, err, sizeof(err)))
			fail_msg("%s: %s", files[i], err);
		assert_int_equal(hook.nitems, 9);
		tree = without_entries(v1, &tree_entries);
		hooked = without_entries(v2, &hooked_entries);
		assert_true(json_equal(tree, hooked));
		assert_int_equal(json_array_size(hooked_entries), 0);
		if (!json_equal(items, tree_entries))
			fail_msg("%s: the hook's entries differ from the tree's", files[i]);
		json_decref(tree);
		json_decref(hooked);
		json_decref(tree_entries);
		json_decref(hooked_entries);
		json_decref(items);
		fr_doc_free(d1);
		fr_doc_free(d2);
		free(buf);
	}
}

/*
 * A pickle whose entries the hook cannot stand in for: -EAGAIN (the caller
 * loads it again plainly), while fr_pickle_load() reads it, or refuses it
 * with its own message. Each is {"entries": [e0, e1], ...} with a twist.
 */
static void test_hook_falls_back(void **state)
{
	static const struct {
		const char *what;
		const char *entries;  /* the list's items, after its MARK */
		const char *after;    /* more of the top-level dict */
		bool valid;
	} twists[] = {
		{ "the list of one item, APPEND", NULL, "", true },
		{ "an entry used again", "}q\x02(\x8c\x01" "aK\x01u}(\x8c\x01" "aK\x02u",
		  "\x8c\x05" "againh\x02", true },
		{ "the list used again", "}(\x8c\x01" "aK\x01u}(\x8c\x01" "aK\x02u",
		  "\x8c\x04" "alsoh\x01", true },
		{ "the list replaced", "}(\x8c\x01" "aK\x01u}(\x8c\x01" "aK\x02u",
		  "\x8c\x07" "entries]", true },
		{ "an entry the hook does not read", "}(\x8c\x01" "aK\x01u}(\x8c\x01" "a\x8fu", "",
		  true },
		{ "a MARK of read entries taken by TUPLE", NULL, "", true },
		{ "an error after the entries", "}(\x8c\x01" "aK\x01u}(\x8c\x01" "aK\x02u",
		  "\x8c\x01" "xcos\nsystem\n", false },
	};
	char err[512], plain_err[512];

	(void)state;
	for (size_t i = 0; i < sizeof(twists) / sizeof(twists[0]); i++) {
		struct pk b = { NULL, 0, 0 };
		json_t *items = json_array();
		struct fr_pickle_hook hook = { "entries", keep_item, items, 0 };
		struct fr_doc *d = fr_doc_new();
		struct fr_val *v;
		int rc;

		/* PROTO 2, { (memo 0), MARK, "entries": [ (memo 1), ... */
		pk_add(&b, "\x80\x02}q\x00(\x8c\x07" "entries]q\x01", 18);
		if (i == 0) {
			pk_add(&b, "}(\x8c\x01" "aK\x01" "ua", 9);	/* one entry, APPEND */
		} else if (i == 5) {
			/* MARK e0 e1 TUPLE APPEND: a tuple of them goes in the list. */
			pk_add(&b, "(}(\x8c\x01" "aK\x01u}(\x8c\x01" "aK\x02u" "ta", 19);
		} else {
			pk_add(&b, "(", 1);
			pk_add(&b, twists[i].entries, strlen(twists[i].entries));
			pk_add(&b, "e", 1);	/* APPENDS */
		}
		pk_add(&b, twists[i].after, strlen(twists[i].after));
		pk_add(&b, "u.", 2);
		rc = fr_pickle_load_with(d, b.p, b.n, &hook, &v, err, sizeof(err));
		if (i == 0) {
			if (rc)
				fail_msg("%s: %s", twists[i].what, err);
			assert_int_equal(hook.nitems, 1);
			assert_int_equal(fr_val_get(v, "entries")->n, 0);
		} else if (rc != -EAGAIN) {
			fail_msg("%s: rc %d, not -EAGAIN (%s)", twists[i].what, rc, err);
		}
		assert_true(hook.nitems >= 1);
		fr_doc_reset(d);
		rc = fr_pickle_load(d, b.p, b.n, &v, plain_err, sizeof(plain_err));
		if (twists[i].valid && rc)
			fail_msg("%s: %s", twists[i].what, plain_err);
		if (!twists[i].valid)
			assert_non_null(strstr(plain_err, "(GLOBAL) is not allowed"));
		fr_doc_free(d);
		json_decref(items);
		free(b.p);
	}
}

/* Many open marks and a deep stack are only memory, given back on error. */
static void test_many_marks(void **state)
{
	size_t n = 200000, len = 2 + 2 * n + 1;
	unsigned char *buf = malloc(len);
	struct fr_doc *d;
	struct fr_val *v;
	char err[512];

	(void)state;
	assert_non_null(buf);
	memcpy(buf, "\x80\x02", 2);
	memset(buf + 2, '(', n);
	memset(buf + 2 + n, ']', n);
	buf[len - 1] = '.';
	assert_int_equal(load(&d, buf, len, &v, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "STOP with 200000 MARKs open"));
	fr_doc_free(d);
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
		cmocka_unit_test(test_duplicate_keys),
		cmocka_unit_test(test_key_text),
		cmocka_unit_test(test_million_keys),
		cmocka_unit_test(test_shared_key),
		cmocka_unit_test(test_shared_long_string),
		cmocka_unit_test(test_many_marks),
		cmocka_unit_test(test_hook_reads_entries),
		cmocka_unit_test(test_hook_falls_back),
	};

	return cmocka_run_group_tests(tests, load_cases, free_cases);
}
