/*
 * libFuzzer target for the dump reader (dumps/dump.h) and the JSON parser
 * under it (dumps/value.h), on arbitrary bytes: what fr-analyze reads from
 * an incident directory and the daemon from an agent's upload.
 *
 * The same bytes are read three ways:
 *   1. fr_dump_parse(), which reads the entries straight from the text (a
 *      fr_json_hook) and the rest through a tree;
 *   2. fr_json_parse() into a tree, then fr_dump_from_val() on that tree,
 *      which reads the entries from the tree;
 * and when the text is a dump, the trace is written out again
 * (fr_dump_serialize) and read back:
 *   3. fr_dump_parse() on what our writer wrote.
 *
 * The two readers of one text must agree, on whether it is a dump and on
 * every field of the trace; the trace read back must be the one written.
 * The input is copied into a buffer of its exact length, without a
 * terminator, as a file mapped by fr-analyze is: a reader that looks past
 * the end is caught by AddressSanitizer.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"
#include "fuzz_check.h"
#include "value.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool parse_rc_ok(int rc)
{
	return rc == 0 || rc == -EPROTO || rc == -EPROTONOSUPPORT || rc == -ENOMEM;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err1[512], err2[512], why[256];
	struct fr_trace direct, via_tree;
	struct fr_doc *doc;
	struct fr_val *root = NULL;
	char *buf;
	int rc1, rc2, rcj;

	/* malloc(0) is a valid pointer that owns no byte: any read is caught. */
	buf = malloc(size);
	FUZZ_CHECK(buf || !size);
	if (size)
		memcpy(buf, data, size);

	rc1 = fr_dump_parse(buf, size, "fuzz", &direct, err1, sizeof(err1));
	FUZZ_CHECK(parse_rc_ok(rc1));
	FUZZ_CHECK(rc1 == 0 || err1[0]);

	doc = fr_doc_new();
	FUZZ_CHECK(doc);
	rcj = fr_json_parse(doc, buf, size, &root, why, sizeof(why));
	FUZZ_CHECK(rcj == 0 || rcj == -EPROTO || rcj == -ENOMEM);
	if (rcj == 0) {
		fuzz_check_tree(root, 0);
		/* The writer's view of the tree must be buildable too. */
		json_decref(fr_val_to_json(root));

		rc2 = fr_dump_from_val(root, "fuzz", &via_tree, err2, sizeof(err2));
		FUZZ_CHECK(parse_rc_ok(rc2));
		if (rc1 != -ENOMEM && rc2 != -ENOMEM && (rc1 == 0) != (rc2 == 0)) {
			fprintf(stderr,
				"fuzz_dump: fr_dump_parse says %d (%s), fr_json_parse + "
				"fr_dump_from_val says %d (%s)\n",
				rc1, rc1 ? err1 : "ok", rc2, rc2 ? err2 : "ok");
			abort();
		}
		if (rc1 == 0 && rc2 == 0) {
			FUZZ_CHECK(direct.nops == via_tree.nops);
			FUZZ_CHECK(direct.rank == via_tree.rank);
			FUZZ_CHECK(direct.world_size == via_tree.world_size);
			FUZZ_SAME_TRACE("fr_dump_parse vs fr_dump_from_val", &direct, &via_tree);
		}
		if (rc2 == 0)
			fr_trace_free(&via_tree);
	} else if (rc1 == 0) {
		/* A text the JSON parser refuses is no dump either. */
		fprintf(stderr, "fuzz_dump: fr_dump_parse accepted what fr_json_parse refused: %s\n",
			why);
		abort();
	}
	fr_doc_free(doc);

	if (rc1 == 0) {
		FUZZ_CHECK(direct.rank < direct.world_size);
		fuzz_roundtrip("fuzz_dump: written and read back", &direct);
		fr_trace_free(&direct);
	}
	free(buf);
	return 0;
}
