/*
 * Summaries of a rank's evidence (docs/SCALE-OUT.md, "Incidents at scale").
 * At scale a node daemon keeps each rank's full dump on its node and sends
 * the central daemon a summary: a dump in the same format (dumps/FORMAT.md,
 * "Summaries") that holds what the correlation engine needs to reach the
 * same verdict, and says where the full dump is. A summary lists no
 * communicator's members, only the rank's own place and the size: the
 * members are in the incident's manifest, once, and the evidence layer
 * (evidence.h) lends them to the summaries it reads.
 */
#ifndef FR_SUMMARY_H
#define FR_SUMMARY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "correlate.h"
#include "evidence.h"
#include "trace.h"

/* Entries kept per communicator, and communicators whose entries are kept,
 * unless the caller says otherwise. */
#define FR_SUMMARY_WINDOW 8
#define FR_SUMMARY_COMMS 8

/* The point of interest, when the caller knows it: the operation the job
 * is stuck on (the central daemon's trigger, or a verdict's op). */
struct fr_summary_focus {
	const char *comm;
	uint64_t seq;
};

struct fr_summary_opts {
	size_t window;          /* entries per communicator; 0: FR_SUMMARY_WINDOW */
	size_t comms;           /* communicators with entries; 0: FR_SUMMARY_COMMS */
	const char *node;       /* the node keeping the full dump; NULL: the rank's host */
	const char *full_dump;  /* its path on that node; NULL: "" */
};

/*
 * Fills `out` (zeroed by the caller, freed with fr_trace_free()) with the
 * summary of `full`: its identity and the progress (pg_status) of every
 * communicator, without members; of each communicator's entries at most
 * `window`, chosen around the point of interest (see summary.c); entries
 * of at most `comms` communicators, the focus's first, then those with an
 * entry in flight, then those used most recently; and the application
 * thread's stack only (the first thread with frames that is not the
 * agent's, as the report picks it), with its Python frames, and the first
 * thread with Python frames when that is another (the one the report's
 * merged stacks compare), and the dump's python_note, so that the report
 * reads the same from summaries. `focus` may be NULL. Returns 0 or
 * -ENOMEM (`out` then freed and zeroed).
 */
int fr_trace_summarize(const struct fr_trace *full, const struct fr_summary_focus *focus,
		       const struct fr_summary_opts *opts, struct fr_trace *out);

/*
 * Writes the summary of every dump of `ev` (not of the manifest's live
 * views) as `outdir`/rank-<N>.json, and a copy of the manifest when `ev`
 * has one, so that `outdir` is the incident directory a central daemon
 * would hold: each summary's node is its rank's host and its full dump the
 * file it was read from. `opts` gives the limits (node and full_dump are
 * ignored); NULL for the defaults. `outdir` must exist. Returns 0, or
 * -errno with `err` naming the file and what went wrong.
 */
int fr_summary_write_dir(const struct fr_evidence *ev, const struct fr_summary_focus *focus,
			 const struct fr_summary_opts *opts, const char *outdir, char *err,
			 size_t errlen);

/*
 * Where the full dumps of the summarized ranks among `traces` are:
 * [{"rank", "node", "path"}], by rank, [] when none (fr-analyze --json's
 * "full_dumps", docs/JSON.md). Returns a new reference, NULL when out of
 * memory.
 */
json_t *fr_summary_full_dumps_json(const struct fr_trace *const *traces, size_t ntraces);

/*
 * The report's word on summaries, when some traces are: which ranks'
 * evidence is one, and where the culprits' full dumps are (the first 8).
 * Prints nothing when no trace is a summary (or out of memory).
 */
void fr_summary_print(FILE *out, const struct fr_verdict *v, const struct fr_trace *const *traces,
		      size_t ntraces);

#endif
