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
 *   3. fr_pytorch_rank_from_name() on the bytes as a file name.
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fr_trace t;
	struct fr_doc *doc;
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
	fr_doc_free(doc);

	rc = fr_pytorch_parse(buf, size, "fuzz_rank_0", 0, FUZZ_TIME_NS, &t, err, sizeof(err));
	FUZZ_CHECK(rc == 0 || rc == 1 || rc == -EPROTO || rc == -ENOMEM);
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
