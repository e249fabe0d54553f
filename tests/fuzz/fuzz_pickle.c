/*
 * libFuzzer target for the pickle reader alone (dumps/pickle.h), built
 * twice into one binary to compare the two ways it merges a dict's repeated
 * keys (dedupe() in pickle.c): through a hash table, as every ordinary
 * pickle is read, and by sorting, which it falls back to when the table's
 * probes run past PROBE_MAX (keys with colliding hashes, which only a
 * pickle made for it has). The second copy is pickle.c compiled with
 * PROBE_MAX 0 and its two exported functions renamed (see tests/fuzz/run),
 * so that it sorts as soon as two keys share a slot.
 *
 * Both must accept and refuse the same pickles, and build equal trees.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "pickle.h"
#include "value.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* pickle.c built with PROBE_MAX 0. */
int fuzz_pickle_load_sorting(struct fr_doc *d, const void *buf, size_t len,
			     struct fr_val **out, char *err, size_t errlen);

/* Whether two trees hold the same values, members in the same order. */
static bool same_tree(const struct fr_val *a, const struct fr_val *b)
{
	if (a == b)
		return true;
	if (a->type != b->type || a->n != b->n)
		return false;
	switch (a->type) {
	case FR_VAL_NULL:
		return true;
	case FR_VAL_BOOL:
		return a->u.b == b->u.b;
	case FR_VAL_INT:
		return a->u.i == b->u.i;
	case FR_VAL_REAL:
		return memcmp(&a->u.r, &b->u.r, sizeof(a->u.r)) == 0;
	case FR_VAL_STRING:
		return memcmp(a->u.s, b->u.s, a->n) == 0;
	case FR_VAL_ARRAY:
		for (uint32_t i = 0; i < a->n; i++)
			if (!same_tree(a->u.items[i], b->u.items[i]))
				return false;
		return true;
	case FR_VAL_OBJECT:
		for (uint32_t i = 0; i < 2 * a->n; i++)
			if (!same_tree(a->u.items[i], b->u.items[i]))
				return false;
		return true;
	}
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fr_doc *d1, *d2;
	struct fr_val *r1 = NULL, *r2 = NULL;
	char e1[512], e2[512];
	uint8_t *buf;
	int rc1, rc2;

	buf = malloc(size);
	FUZZ_CHECK(buf || !size);
	if (size)
		memcpy(buf, data, size);
	d1 = fr_doc_new();
	d2 = fr_doc_new();
	FUZZ_CHECK(d1 && d2);

	rc1 = fr_pickle_load(d1, buf, size, &r1, e1, sizeof(e1));
	rc2 = fuzz_pickle_load_sorting(d2, buf, size, &r2, e2, sizeof(e2));
	FUZZ_CHECK(rc1 == 0 || rc1 == -EPROTO || rc1 == -ENOMEM);
	FUZZ_CHECK(rc2 == 0 || rc2 == -EPROTO || rc2 == -ENOMEM);
	if (rc1 != -ENOMEM && rc2 != -ENOMEM && rc1 != rc2) {
		fprintf(stderr, "fuzz_pickle: hashing says %d (%s), sorting says %d (%s)\n", rc1,
			rc1 ? e1 : "ok", rc2, rc2 ? e2 : "ok");
		abort();
	}
	if (rc1 == 0 && rc2 == 0) {
		fuzz_check_tree(r1, 0);
		fuzz_check_tree(r2, 0);
		if (!same_tree(r1, r2)) {
			fprintf(stderr, "fuzz_pickle: hashing and sorting built different trees\n");
			abort();
		}
	}
	fr_doc_free(d2);
	fr_doc_free(d1);
	free(buf);
	return 0;
}
