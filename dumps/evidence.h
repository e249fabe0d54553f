/*
 * The evidence layer: an incident directory (or any directory of rank
 * dumps) read back into what the correlation engine (correlate.h) takes,
 * one trace per rank and the job's world size. fr-analyze is a front end
 * over it, as redis-check-rdb is over the rdb loader.
 *
 * It reads every rank-*.json, any other *.json whose "format" is ours or
 * that is shaped like a PyTorch Flight Recorder dump, every file whose name
 * ends with a rank (PyTorch's nccl_trace_rank_N, pickle or JSON), and
 * manifest.json. A file that cannot be read is left out and the other
 * ranks are still judged; what went wrong, and what the evidence disagrees
 * on, is kept as warnings (data, one line each), for the caller to print
 * or to serialise. Nothing is written to stdout or stderr.
 *
 * Reading maps each file and parses it on a pool of threads, one a CPU.
 * While they read, SIGBUS (a file cut short under the reader) is caught,
 * process-wide: a file cut short is then left out like a malformed one.
 */
#ifndef FR_EVIDENCE_H
#define FR_EVIDENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dump.h"
#include "trace.h"

/* Dump files are read by a pool of at most this many threads. */
#define FR_EVIDENCE_READERS_MAX 16

/* Something a person should know about the evidence; it does not stop the
 * verdict. */
struct fr_evidence_warning {
	char *file;  /* the file it is about (owned), NULL when none is */
	char *text;  /* one line, without a program's name or a newline (owned) */
};

struct fr_evidence {
	char *dir;                 /* the directory, as given (owned) */
	/* The dumps read, each with the file it came from, in file-name
	 * order (each owned). */
	struct fr_trace **dumps;
	char **paths;
	size_t ndumps;
	size_t cap;
	bool have_manifest;
	struct fr_manifest manifest;
	char *manifest_path;       /* owned, when have_manifest */
	bool bad_manifest;         /* manifest.json is there, but unusable */
	size_t nbad;               /* dump files (and lines of summaries-*.jsonl) left out */
	size_t dumps_in_lines;     /* dumps read from summaries-*.jsonl lines */
	/* Member lists lent to summaries (summary.h), which list none: one
	 * per communicator the manifest's table does not hold, made from
	 * each summary's own place in it (each owned). A summary's
	 * communicator points at one of these or at the table's list. */
	uint32_t **lent;
	size_t nlent;
	/* Where the dumps' operations are, one arena per reading thread
	 * (NULL where one could not be made: malloc then). */
	struct fr_arena *arenas[FR_EVIDENCE_READERS_MAX];

	/* The correlation engine's input: one piece of evidence per rank, a
	 * dump or else the manifest's live view (borrowed from the above;
	 * the array is owned), and the job's world size. */
	const struct fr_trace **traces;
	size_t ntraces;
	uint32_t world_size;

	/* In the order they arose (files in name order). */
	struct fr_evidence_warning *warnings;
	size_t nwarnings;
	size_t warnings_cap;
	/* Why the last call failed, one line like a warning's (owned); NULL
	 * when it failed for want of memory to say so. */
	char *error;
};

/*
 * Reads directory `dir` into `ev` (zeroed by the caller) and assembles the
 * engine's input:
 *  - the world size is the manifest's when there is one (the daemon took
 *    it from every rank's hello), else the one most dumps state, the larger
 *    on a tie, so that one stray file does not stretch the job;
 *  - a dump of a rank outside that world, or naming one as a communicator
 *    member, is left out (warning), as is such a live view of the manifest;
 *    a dump whose world size or job differs from the job's is kept (warning);
 *  - a rank without a usable dump is judged from the manifest's live view
 *    of it (status "live" when it had answered: its file is gone);
 *  - a summary's communicators (summary.h: no members listed) take the
 *    members of the manifest's table, else those the summaries say by
 *    their own places;
 *  - communicators that share an id but not their members (PyTorch's
 *    split_group) are renamed apart (fr_traces_split_comms(), a warning
 *    each).
 * Returns 0, or with `ev->error` set: -ENODATA when no usable evidence is
 * left (nothing read; every dump left out), -ENOTUNIQ when two dumps are
 * of one rank, -ENOMEM, or the -errno of reading the directory. When no
 * rank dumped but the manifest has live views, it returns 0 with a warning
 * saying so. `ev` is released with fr_evidence_free() in every case.
 */
int fr_evidence_load_dir(struct fr_evidence *ev, const char *dir);

/*
 * The same from dumps already read, for a reader that parsed them as they
 * arrived (the central daemon, cluster_incident.c): each
 * fr_evidence_add_dump() hands `ev` a trace (malloc'ed, filled by
 * fr_dump_parse() and sealed with fr_trace_seal_ops(); `ev` frees it) with
 * the file it is in, then fr_evidence_assemble() assembles them as
 * fr_evidence_load_dir() does what it read from `dir`. add returns 0 or
 * -ENOMEM (the trace is then still the caller's); assemble returns as
 * fr_evidence_load_dir().
 */
int fr_evidence_add_dump(struct fr_evidence *ev, struct fr_trace *t, const char *path);
int fr_evidence_assemble(struct fr_evidence *ev, const char *dir);

/*
 * Keeps communicator `id` and the operations on it in every trace of `ev`,
 * and no other communicator or operation, so that the engine judges that
 * communicator alone. Returns 0, or -ENOENT when no evidence names `id`,
 * with `ev->error` listing (sorted, the first ten) the ids it does name.
 */
int fr_evidence_keep_comm(struct fr_evidence *ev, const char *id);

/*
 * Warns, one line per communicator, where the ranks' member lists of it
 * disagree (a size, or a known member): the engine merges them lowest rank
 * first and keeps the first value, but disagreeing lists usually mean two
 * runs' dumps in one directory. Out of memory only costs the warnings.
 */
void fr_evidence_check_members(struct fr_evidence *ev);

/* Whether any trace of `ev` is a summary of a rank's full dump. */
bool fr_evidence_has_summaries(const struct fr_evidence *ev);

/* The file trace `t` of `ev` came from: its dump, else the manifest; NULL
 * when neither. */
const char *fr_evidence_source(const struct fr_evidence *ev, const struct fr_trace *t);

void fr_evidence_free(struct fr_evidence *ev);

#endif
