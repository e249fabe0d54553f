/*
 * The JSON parser and documents of dumps/value.c: what it accepts it reads
 * exactly as jansson does, what it refuses it names with a line and column,
 * and the hook and member readers the dump reader uses see the same text
 * the tree would hold.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <jansson.h>

#include "value.h"

/* Parses `text` and returns jansson's view of our tree (NULL when refused,
 * with the message in err). */
static json_t *ours(const char *text, size_t len, char *err, size_t errlen, int *rc)
{
	struct fr_doc *d = fr_doc_new();
	struct fr_val *v;
	json_t *j = NULL;

	assert_non_null(d);
	*rc = fr_json_parse(d, text, len, &v, err, errlen);
	if (!*rc)
		j = fr_val_to_json(v);
	fr_doc_free(d);
	return j;
}

static void assert_same_as_jansson(const char *text)
{
	char err[256];
	json_error_t je;
	json_t *want = json_loadb(text, strlen(text), JSON_REJECT_DUPLICATES | JSON_DECODE_ANY,
				  &je);
	int rc;
	json_t *got = ours(text, strlen(text), err, sizeof(err), &rc);

	if (!want)
		fail_msg("jansson refuses %s: %s", text, je.text);
	if (!got)
		fail_msg("refused %s: %s", text, err);
	assert_true(json_equal(want, got));
	json_decref(want);
	json_decref(got);
}

static void assert_refused(const char *text, const char *where, const char *what)
{
	char err[256];
	int rc;
	json_t *got = ours(text, strlen(text), err, sizeof(err), &rc);

	assert_null(got);
	assert_int_equal(rc, -EPROTO);
	if (!strstr(err, where) || !strstr(err, what))
		fail_msg("%s: message \"%s\" lacks \"%s\" or \"%s\"", text, err, where, what);
}

static void test_reads_like_jansson(void **state)
{
	(void)state;
	assert_same_as_jansson("{}");
	assert_same_as_jansson("[]");
	assert_same_as_jansson(" \n\t{ \"a\" : [ 1 , -2 , 3.5 , -0.25e-3 , 1E+2 ] , \"b\":{}}\r\n");
	assert_same_as_jansson("{\"t\":true,\"f\":false,\"n\":null,\"s\":\"\"}");
	assert_same_as_jansson("[9223372036854775807,-9223372036854775808,0,-0]");
	assert_same_as_jansson("[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\",\"\\u00e9\\u20ac\\ud83d\\ude00\"]");
	assert_same_as_jansson("[\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"]");
	assert_same_as_jansson("[[[[[[[[[[1]]]]]]]]]]");
	assert_same_as_jansson("\"top-level string\"");
	assert_same_as_jansson("42");
}

static void test_refusals_name_the_place(void **state)
{
	char deep[600];

	(void)state;
	assert_refused("{\"a\": 1,\n \"b\" 2}", "line 2, column 6", "expected ':'");
	assert_refused("[1, 2", "line 1, column 6", "end of input");
	assert_refused("", "line 1, column 1", "end of input");
	assert_refused("{\"a\": 1} x", "line 1, column 10", "after the end of the document");
	assert_refused("{\"a\": 1, \"a\": 2}", "line 1", "duplicate key \"a\"");
	assert_refused("[\"a\\u0000b\"]", "line 1", "\\u0000 is not allowed");
	assert_refused("[\"\\ud800\"]", "line 1", "surrogate");
	assert_refused("[\"\\udc00\"]", "line 1", "lone low surrogate");
	assert_refused("[\"\xc3\x28\"]", "line 1, column 3", "invalid UTF-8");
	assert_refused("[\"\xed\xa0\x80\"]", "line 1", "invalid UTF-8");
	assert_refused("[\"a\nb\"]", "line 1", "control character");
	assert_refused("[\"\\x\"]", "line 1", "invalid escape");
	assert_refused("[9223372036854775808]", "line 1, column 2", "does not fit in 64 bits");
	assert_refused("[-9223372036854775809]", "line 1", "does not fit in 64 bits");
	assert_refused("[012]", "line 1", "leading zero");
	assert_refused("[1.]", "line 1", "no digit after '.'");
	assert_refused("[1e999]", "line 1", "out of range");
	assert_refused("[tru]", "line 1", "expected a value");
	assert_refused("{1: 2}", "line 1", "expected a string key");
	assert_refused("[1 2]", "line 1", "expected ',' or ']'");
	memset(deep, '[', sizeof(deep) - 1);
	deep[sizeof(deep) - 1] = '\0';
	assert_refused(deep, "line 1", "nested deeper than");
}

/* Every prefix of a document is refused, and not read past its end. */
static void test_every_prefix_refused(void **state)
{
	const char *text = "{\"entries\": [{\"a\": [1, 2.5, \"x\\u00e9\"], \"b\": null}], "
			   "\"t\": true}";
	size_t n = strlen(text);

	(void)state;
	for (size_t len = 0; len < n; len++) {
		char *copy = malloc(len ? len : 1);
		char err[256];
		int rc;
		json_t *j;

		memcpy(copy, text, len);
		j = ours(copy, len, err, sizeof(err), &rc);
		assert_null(j);
		assert_int_equal(rc, -EPROTO);
		free(copy);
	}
}

/*
 * Differential: every one-byte change of a document is accepted or refused
 * as jansson does, and when accepted reads the same.
 */
static void test_corruptions_agree_with_jansson(void **state)
{
	const char *text = "{\"a\": [1, -2, 3.25e2, true, false, null, \"s\\n\"], "
			   "\"b\": {\"c\": \"\xc3\xa9\", \"d\": []}, \"e\": 10}";
	const char subst[] = "\"\\{}[],:0-.eE \x80\xff" "aun";
	size_t n = strlen(text);

	(void)state;
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < sizeof(subst) - 1; k++) {
			char *copy = strdup(text);
			char err[256];
			json_error_t je;
			json_t *want, *got;
			int rc;

			copy[i] = subst[k];
			want = json_loadb(copy, n, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
			got = ours(copy, n, err, sizeof(err), &rc);
			if (!want != !got)
				fail_msg("%s: jansson %s, ours %s", copy,
					 want ? "accepts" : je.text, got ? "accepts" : err);
			if (want)
				assert_true(json_equal(want, got));
			json_decref(want);
			json_decref(got);
			free(copy);
		}
	}
}

/* A hook reading one member with the member reader, as the dump reader
 * reads entries. */
struct seen {
	struct fr_doc *scratch;
	int64_t sum;
	char names[64];
	int dropped;
};

/* "x" is read and checked but dropped. */
static const struct fr_json_key keys[] = {
	{ "n", 1, false }, { "name", 4, false }, { "x", 1, true },
};

static int read_items(struct fr_json_in *in, void *arg)
{
	struct seen *s = arg;
	int rc;

	if ((rc = fr_json_expect(in, '[', "an array")))
		return rc;
	if (fr_json_accept(in, ']'))
		return 0;
	do {
		struct fr_val v[4];
		uint64_t seen;

		if ((rc = fr_json_object(in, s->scratch, keys, 3, v, &seen)))
			return rc;
		if ((seen & 1) && v[0].type == FR_VAL_INT)
			s->sum += v[0].u.i;
		if ((seen & 2) && v[1].type == FR_VAL_STRING)
			strncat(s->names, v[1].u.s, sizeof(s->names) - strlen(s->names) - 1);
		if (seen & 4)
			s->dropped++;
	} while (fr_json_accept(in, ','));
	return fr_json_expect(in, ']', "']'");
}

static void test_hook_reads_member_in_place(void **state)
{
	const char *text = "{\"before\": [1], \"items\": [{\"n\": 1, \"name\": \"a\"}, "
			   "{ \"name\" : \"b\\u0063\", \"x\": [1, {\"n\": 100}, [[], [2]]], \"n\": 2,"
			   " \"y\": [3]}, {\"x\": []}], \"after\": \"z\"}";
	/* Dropped arrays are still checked. */
	static const char *const bad_drops[] = {
		"{\"items\": [{\"x\": [1, ]}]}", "{\"items\": [{\"x\": [[1] [2]]}]}",
		"{\"items\": [{\"x\": [1}]}", "{\"items\": [{\"x\": [\"\\q\"]}]}",
		"{\"items\": [{\"x\": [{\"a\": 1, \"a\": 2}]}]}", "{\"items\": [{\"x\": [[[",
	};
	struct seen s = { 0 };
	struct fr_json_hook hook = { "items", read_items, &s };
	struct fr_doc *d = fr_doc_new();
	struct fr_val *root;
	char err[256];

	(void)state;
	s.scratch = fr_doc_new();
	assert_int_equal(fr_json_parse_with(d, text, strlen(text), &hook, &root, err,
					    sizeof(err)), 0);
	assert_int_equal(s.sum, 3);
	assert_string_equal(s.names, "abc");
	assert_int_equal(s.dropped, 2);
	/* The tree holds the other members, and null for the hooked one. */
	assert_true(fr_val_is(fr_val_get(root, "items"), FR_VAL_NULL));
	assert_string_equal(fr_val_str(fr_val_get(root, "after")), "z");
	assert_int_equal(fr_val_item(fr_val_get(root, "before"), 0)->u.i, 1);
	fr_doc_free(d);

	/* A syntax error inside the hooked member is the parser's, with
	 * its place; so is a duplicate of the hooked member. */
	d = fr_doc_new();
	assert_int_equal(fr_json_parse_with(d, "{\"items\": [{\"n\" 1}]}", 20, &hook, &root, err,
					    sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "line 1, column 17"));
	assert_int_equal(fr_json_parse_with(d, "{\"items\": [], \"items\": []}", 26, &hook, &root,
					    err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "duplicate key \"items\""));
	for (size_t i = 0; i < sizeof(bad_drops) / sizeof(bad_drops[0]); i++) {
		int rc = fr_json_parse_with(d, bad_drops[i], strlen(bad_drops[i]), &hook, &root, err,
					    sizeof(err));

		if (rc != -EPROTO)
			fail_msg("%s: accepted", bad_drops[i]);
	}
	fr_doc_free(d);
	fr_doc_free(s.scratch);
}

/*
 * Large objects: duplicates are found wherever they are, and the check
 * stays fast (it once compared every key with every key before it once
 * 256 distinct keys had filled its filter: minutes for a 2 MB object).
 */
static void test_large_objects(void **state)
{
	size_t n = 200000, cap = n * 16 + 64, len = 0;
	char *text = malloc(cap);
	char err[256];
	struct timespec t0, t1;
	json_t *j;
	int rc;

	(void)state;
	assert_non_null(text);
	text[len++] = '{';
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(text + len, cap - len, "%s\"k%zu\":%zu", i ? "," : "", i, i);
	text[len++] = '}';
	clock_gettime(CLOCK_MONOTONIC, &t0);
	j = ours(text, len, err, sizeof(err), &rc);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_non_null(j);
	assert_int_equal(json_object_size(j), n);
	json_decref(j);
	/* Generous: about 0.1 s here; the quadratic check took minutes. */
	assert_true((t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9 < 5.0);

	/* The last key repeats one from the middle. */
	text[len - 1] = ',';
	len += (size_t)snprintf(text + len, cap - len, "\"k%zu\":0}", n / 2);
	j = ours(text, len, err, sizeof(err), &rc);
	assert_null(j);
	assert_int_equal(rc, -EPROTO);
	assert_non_null(strstr(err, "duplicate key \"k100000\""));
	free(text);
}

/* The object reader refuses what the tree parser refuses: an unknown key
 * given twice, and nesting past the limit. */
static int read_one_object(struct fr_json_in *in, void *arg)
{
	struct fr_val v[4];
	uint64_t seen;

	return fr_json_object(in, arg, keys, 3, v, &seen);
}

static void test_object_reader_strict(void **state)
{
	struct fr_doc *d = fr_doc_new(), *scratch = fr_doc_new();
	struct fr_json_hook hook = { "o", read_one_object, scratch };
	/* On the stack: gcc's checks under the sanitizers take a malloc()
	 * that a test does not check for NULL as one that may be. */
	char deep[2000];
	struct fr_val *root;
	char err[256];
	size_t len = 0;
	const char *good = "{\"o\": {\"n\": 1, \"u\": 2, \"w\": 3}}";
	const char *twice = "{\"o\": {\"u\": 1, \"n\": 2, \"u\": 3}}";

	(void)state;
	assert_int_equal(fr_json_parse_with(d, good, strlen(good), &hook, &root, err, sizeof(err)), 0);
	assert_int_equal(fr_json_parse_with(d, twice, strlen(twice), &hook, &root, err, sizeof(err)),
			 -EPROTO);
	assert_non_null(strstr(err, "duplicate key \"u\""));
	/*
	 * At the limit the object reader and the tree parser agree: the top
	 * object, "o" and 254 arrays make 256 levels, read; one more is not,
	 * whether the arrays are kept ("y") or checked and dropped ("x").
	 */
	for (int arrays = 254; arrays <= 255; arrays++) {
		for (int k = 0; k < 2; k++) {
			struct fr_val *tree;
			int want = arrays == 254 ? 0 : -EPROTO;

			len = (size_t)sprintf(deep, "{\"o\": {\"%c\": ", k ? 'x' : 'y');
			for (int i = 0; i < arrays; i++)
				deep[len++] = '[';
			for (int i = 0; i < arrays; i++)
				deep[len++] = ']';
			len += (size_t)sprintf(deep + len, "}}");
			assert_int_equal(fr_json_parse(d, deep, len, &tree, err, sizeof(err)), want);
			assert_int_equal(fr_json_parse_with(d, deep, len, &hook, &root, err, sizeof(err)),
					 want);
			if (want)
				assert_non_null(strstr(err, "nested deeper than"));
		}
	}
	fr_doc_free(scratch);
	fr_doc_free(d);
}

static void test_builders_and_lookup(void **state)
{
	struct fr_doc *d = fr_doc_new();
	struct fr_val *o = fr_val_object(d), *a = fr_val_array(d);
	json_t *j, *want;

	(void)state;
	for (int i = 0; i < 1000; i++)
		assert_int_equal(fr_val_append(d, a, fr_val_int(d, i)), 0);
	assert_int_equal(fr_val_add_str(d, o, "k", fr_val_string(d, "one", 3)), 0);
	assert_int_equal(fr_val_add_str(d, o, "list", a), 0);
	/* The last member of a name is the one looked up. */
	assert_int_equal(fr_val_add_str(d, o, "k", fr_val_string(d, "two", 3)), 0);
	assert_string_equal(fr_val_str(fr_val_get(o, "k")), "two");
	assert_int_equal(fr_val_item(a, 999)->u.i, 999);
	assert_null(fr_val_item(a, 1000));
	assert_null(fr_val_get(a, "k"));
	assert_string_equal(fr_val_type_name(a), "an array");
	assert_string_equal(fr_val_type_name(NULL), "nothing");

	j = fr_val_to_json(fr_val_get(o, "list"));
	want = json_array();
	for (int i = 0; i < 1000; i++)
		json_array_append_new(want, json_integer(i));
	assert_true(json_equal(j, want));
	json_decref(j);
	json_decref(want);

	/* A reset document is empty and usable again. */
	fr_doc_reset(d);
	assert_string_equal(fr_val_str(fr_val_string(d, "again", 5)), "again");
	fr_doc_free(d);
}

/* A document reset and parsed into again reuses its parser's state: what
 * each parse reads is what a fresh document would, also after a refusal
 * and after a document much deeper or longer than the next. */
static void test_reparse_into_one_document(void **state)
{
	static const char *const texts[] = {
		"{\"a\": [1, 2, {\"b\": \"x\\ny\"}], \"c\": null}",
		"[[[[[[[[1]]]]]]]]",
		"{\"a\": ",
		"\"esc\\u00e9aped\"",
		"{\"a\": [1, 2, {\"b\": \"x\\ny\"}], \"c\": null}",
	};
	struct fr_doc *d = fr_doc_new();

	(void)state;
	assert_non_null(d);
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		char err[256], err2[256];
		struct fr_val *v;
		int rc, rc2;
		json_t *fresh = ours(texts[i], strlen(texts[i]), err, sizeof(err), &rc);
		json_t *again;

		fr_doc_reset(d);
		rc2 = fr_json_parse(d, texts[i], strlen(texts[i]), &v, err2, sizeof(err2));
		assert_int_equal(rc, rc2);
		if (rc) {
			assert_string_equal(err, err2);
			continue;
		}
		again = fr_val_to_json(v);
		assert_true(json_equal(fresh, again));
		json_decref(fresh);
		json_decref(again);
	}
	fr_doc_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reads_like_jansson),
		cmocka_unit_test(test_refusals_name_the_place),
		cmocka_unit_test(test_every_prefix_refused),
		cmocka_unit_test(test_corruptions_agree_with_jansson),
		cmocka_unit_test(test_hook_reads_member_in_place),
		cmocka_unit_test(test_large_objects),
		cmocka_unit_test(test_object_reader_strict),
		cmocka_unit_test(test_builders_and_lookup),
		cmocka_unit_test(test_reparse_into_one_document),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
