/*
 * summarize: writes the summaries a node daemon would send up for an
 * incident (dumps/summary.h, docs/SCALE-OUT.md "Incidents at scale").
 *
 *   summarize [--no-focus] DIR SUMMARY_DIR
 *
 * Reads DIR as fr-analyze does, finds the operation the job is stuck on
 * with the same engine (the focus a central daemon would send with its
 * dump request; none with --no-focus, or when the verdict names none), and
 * writes SUMMARY_DIR/rank-<N>.json, one summary per rank dump of DIR, and a
 * copy of DIR's manifest.json. fr-analyze must give the same verdict on
 * both directories (tests/e2e/test_summary.sh). Prints the bytes of the
 * dumps and of the summaries.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../dumps/correlate.h"
#include "../dumps/evidence.h"
#include "../dumps/summary.h"

#define PROG "summarize"

/* The bytes of the files named rank-*.json (and the manifest) in `ev`'s
 * dumps, or of their summaries in `dir`. */
static uint64_t bytes_of(const struct fr_evidence *ev, const char *dir)
{
	char path[FR_SUMMARY_PATH_MAX + 1];
	uint64_t total = 0;
	struct stat st;

	for (size_t i = 0; i < ev->ndumps; i++) {
		if (dir)
			snprintf(path, sizeof(path), "%s/rank-%" PRIu32 ".json", dir,
				 ev->dumps[i]->rank);
		if (stat(dir ? path : ev->paths[i], &st) == 0)
			total += (uint64_t)st.st_size;
	}
	return total;
}

int main(int argc, char **argv)
{
	static struct fr_evidence ev;
	bool focused = !(argc > 1 && strcmp(argv[1], "--no-focus") == 0);
	struct fr_summary_focus focus = { NULL, 0 };
	struct fr_verdict v;
	char err[512];
	uint64_t full, summ;
	int rc;

	argv += !focused;
	argc -= !focused;
	if (argc != 3) {
		fprintf(stderr, "usage: " PROG " [--no-focus] DIR SUMMARY_DIR\n");
		return 2;
	}
	if (fr_evidence_load_dir(&ev, argv[1]) < 0) {
		fprintf(stderr, PROG ": %s\n", ev.error ? ev.error : "out of memory");
		return 2;
	}
	if (fr_correlate(ev.traces, ev.ntraces, ev.world_size, &v) < 0) {
		fprintf(stderr, PROG ": correlating: out of memory\n");
		return 2;
	}
	if (focused && v.has_op) {
		focus.comm = v.op.comm;
		focus.seq = v.op.seq;
	}
	if (mkdir(argv[2], 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, PROG ": %s: %s\n", argv[2], strerror(errno));
		return 2;
	}
	rc = fr_summary_write_dir(&ev, focus.comm ? &focus : NULL, NULL, argv[2], err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, PROG ": %s\n", err);
		return 2;
	}
	full = bytes_of(&ev, NULL);
	summ = bytes_of(&ev, argv[2]);
	printf("%zu ranks: dumps %" PRIu64 " bytes, summaries %" PRIu64 " bytes (%.1fx)\n",
	       ev.ndumps, full, summ, summ ? (double)full / (double)summ : 0.0);
	fr_verdict_free(&v);
	fr_evidence_free(&ev);
	return 0;
}
