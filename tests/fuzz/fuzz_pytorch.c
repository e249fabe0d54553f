/*
 * libFuzzer target for the reader of PyTorch Flight Recorder dumps
 * (dumps/pytorch.h) and the pickle reader under it (dumps/pickle.h), on
 * arbitrary bytes: fr-analyze reads whatever files a user points it at, and
 * a pickle is the format most able to hurt a reader.
 *
 * Each input goes through:
 *   1. fr_pickle_load() directly, whatever the first bytes, into a tree
 *      that must have the shape value.h promises;
 *   2. fr_pytorch_parse(), which tells pickle from JSON by content, as
 *      fr-analyze calls it; an accepted dump becomes a trace that our
 *      writer must write in a form our reader reads back the same;
 *   3. for a pickle, the same dump read from the tree of step 1
 *      (fr_pytorch_from_val()): step 2 reads a pickle's entries as it
 *      loads it (fr_pickle_load_with()), a shortcut that must come to the
 *      same trace, or the same error, as reading the whole tree;
 *   4. fr_pytorch_rank_from_name() on the bytes as a file name.
 *
 * The input is copied into a buffer of its exact length, so that a read
 * past the end is caught.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "pickle.h"
#include "pytorch.h"
#include "value.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* 2023-11-14, well inside every bound the reader applies to dump times. */
#define FUZZ_TIME_NS 1700000000000000000ull

/* pytorch.c's bound on entries per byte of pickle (PICKLE_ENTRY_MIN). */
#define FUZZ_PICKLE_ENTRY_MIN 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fr_trace t, tree;
	struct fr_doc *doc;
	const struct fr_val *entries;
	char tree_err[512];
	int tree_rc = 2;
	struct fr_val *root = NULL;
	char err[512];
	uint8_t *buf;
	char *name;
	uint32_t rank;
	int rc;

	buf = malloc(size);
	FUZZ_CHECK(buf || !size);
	if (size)
		memcpy(buf, data, size);

	doc = fr_doc_new();
	FUZZ_CHECK(doc);
	rc = fr_pickle_load(doc, buf, size, &root, err, sizeof(err));
	FUZZ_CHECK(rc == 0 || rc == -EPROTO || rc == -ENOMEM);
	if (rc == 0) {
		fuzz_check_tree(root, 0);
		json_decref(fr_val_to_json(root));
	} else {
		FUZZ_CHECK(!root);
		/* pickle.h: the message starts with the offset at fault. */
		FUZZ_CHECK(strncmp(err, "offset ", 7) == 0);
	}
	FUZZ_CHECK(rc != 0 || fr_pickle_sniff(buf, size));
	/* The dump in the tree, where fr_pytorch_parse() would read it so. */
	entries = rc == 0 ? fr_val_get(root, "entries") : NULL;
	if (rc == 0 && (!fr_val_is(entries, FR_VAL_ARRAY) ||
			entries->n <= size / FUZZ_PICKLE_ENTRY_MIN))
		tree_rc = fr_pytorch_is_dump(root) ?
				  fr_pytorch_from_val(doc, root, "fuzz_rank_0", 0, FUZZ_TIME_NS,
						      &tree, tree_err, sizeof(tree_err)) :
				  1;

	rc = fr_pytorch_parse(buf, size, "fuzz_rank_0", 0, FUZZ_TIME_NS, &t, err, sizeof(err));
	FUZZ_CHECK(rc == 0 || rc == 1 || rc == -EPROTO || rc == -ENOMEM);
	if (tree_rc != 2 && tree_rc != -ENOMEM && rc != -ENOMEM) {
		FUZZ_CHECK(rc == tree_rc);
		if (rc == 0)
			FUZZ_SAME_TRACE("fuzz_pytorch: read early and from the tree", &t, &tree);
		else if (rc < 0)
			FUZZ_CHECK(strcmp(err, tree_err) == 0);
	}
	if (tree_rc == 0)
		fr_trace_free(&tree);
	fr_doc_free(doc);
	if (rc == 0) {
		FUZZ_CHECK(t.rank == 0 && t.rank < t.world_size);
		fuzz_roundtrip("fuzz_pytorch: written and read back", &t);
		fr_trace_free(&t);
	} else {
		FUZZ_CHECK(rc == 1 || err[0]);
	}

	/* A file name: the bytes up to the first NUL. */
	name = malloc(size + 1);
	FUZZ_CHECK(name);
	if (size)
		memcpy(name, data, size);
	name[size] = '\0';
	(void)fr_pytorch_rank_from_name(name, &rank);
	free(name);

	free(buf);
	return 0;
}
