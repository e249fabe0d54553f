/*
 * Reading and writing per-rank dumps and incident manifests (JSON, format
 * documented in dumps/FORMAT.md). Used by the agent (write), the daemon
 * (write the manifest, validate uploads) and fr-analyze (read).
 */
#ifndef FR_DUMP_H
#define FR_DUMP_H

#include <jansson.h>
#include <stddef.h>
#include <sys/stat.h>

#include "trace.h"
#include "value.h"

#define FR_DUMP_FORMAT "flightrec-dump"
#define FR_MANIFEST_FORMAT "flightrec-manifest"
/*
 * Major.minor; readers accept any minor of a major they know. 1.1 added
 * "waited" to entries and gave "time_discovered_started_ns" its meaning
 * (when the operation began to block the rank); 1.2 lets pg_config ranks
 * hold -1 for a member this rank does not know (NCCL communicators); 1.3
 * adds "peer_in_comm", the communicator rank of a peer or root; 1.4 writes
 * the states "scheduled" and "started" for operations in flight on a GPU
 * and adds "captured".
 */
#define FR_DUMP_VERSION "1.4"
/* 1.5 added "summary" (a summary of a rank's full dump, dumps/summary.h);
 * summaries are written as 1.10 now (FR_DUMP_VERSION_SUMMARY_OURS). */
/* 1.6 lets pg_config "ranks" be a string of runs, "0-65535" (dumps/FORMAT.md);
 * only a dump that writes one is 1.6: a list of DUMP_RUNS_MIN_MEMBERS
 * members or more whose runs are shorter than its array. */
#define FR_DUMP_VERSION_RUNS "1.6"
#define DUMP_RUNS_MIN_MEMBERS 64
/* 1.7 adds "crash" (the rank died of a fatal signal); only a dump, or a
 * manifest's view of a rank, with one is written as 1.7. */
#define FR_DUMP_VERSION_CRASH "1.7"
/* 1.8 adds "exit" (the rank exited without finalising, or was killed) and
 * "nccl_error" (an asynchronous NCCL error); only a dump, or a manifest's
 * view of a rank, with one is written as 1.8. */
#define FR_DUMP_VERSION_EXIT "1.8"
/* 1.9 adds threads' "python_frames" and "python_truncated", and
 * "python_note" (agent/pyframes.c); only a dump with one of them is
 * written as 1.9. */
#define FR_DUMP_VERSION_PYTHON "1.9"
/* 1.10 leaves PyTorch's copies (entry.h's `copy`: process_group, op_id,
 * profiling_name, input_sizes, input_dtypes, output_sizes, output_dtypes,
 * retired) out of a summary's entries, a third of their bytes; every
 * summary is written as 1.10. */
#define FR_DUMP_VERSION_SUMMARY_OURS "1.10"
/* 1.11 adds "entry" to Python frames (where a call of the interpreter's
 * evaluation loop began); only a dump with one is written as 1.11. */
#define FR_DUMP_VERSION_PYENTRY "1.11"
#define FR_DUMP_VERSION_MAJOR 1
/*
 * Manifests are versioned apart from dumps since 2.0, which lists each
 * communicator's members once, in "communicators", rather than in every
 * rank's view of it (a 1.x reader requires them there, hence a new major).
 * Readers accept 1.x (views are dumps, as before) and 2.x.
 */
#define FR_MANIFEST_VERSION "2.0"
#define FR_MANIFEST_VERSION_MAJOR 2
/* 2.1 adds "kernel_log" (dumps/kernel_log.h); only a manifest with one is
 * written as 2.1. */
#define FR_MANIFEST_VERSION_KLOG "2.1"

/* Dumps of a 2000-entry ring are a few MiB; a file this big is not one. */
#define FR_DUMP_FILE_MAX (1ull << 30)

/* A thread's "python_frames" (FORMAT.md, "threads[i]"): a new reference,
 * NULL when out of memory. */
json_t *fr_pyframes_to_json(const struct fr_thread *th);

/*
 * The JSON object of a trace (the dump document). Returns a new reference,
 * NULL when out of memory. Threads are included when the trace has them.
 */
json_t *fr_dump_to_json(const struct fr_trace *t);

/*
 * The "crash" object of a dump (FORMAT.md, "Crashes"): signal, signo,
 * si_code, fault_addr, time_ns, ring_head, thread. The daemon's rank JSON
 * and the verdict's culprit use it too. A new reference, NULL when out of
 * memory.
 */
json_t *fr_crash_to_json(const struct fr_crash *c);

/*
 * The "exit" object of a dump (FORMAT.md, "Exits"): how ("exited",
 * "killed"), code, underscore, finalised, inflight, time_ns, ring_head.
 * The daemon's rank JSON uses it too. A new reference, NULL when out of
 * memory.
 */
json_t *fr_exit_to_json(const struct fr_exit *e);

/* The "nccl_error" object of a dump (FORMAT.md, "NCCL errors"): comm,
 * result, result_name, time_ns, message. A new reference, NULL when out of
 * memory. */
json_t *fr_nccl_error_to_json(const struct fr_nccl_error *e);

/*
 * Serialises a trace into a newly allocated NUL-terminated buffer (caller
 * frees). Returns 0 or -ENOMEM.
 */
int fr_dump_serialize(const struct fr_trace *t, char **out, size_t *len);

/*
 * The text of `doc` as json_dumps() writes it with `flags`, and a trailing
 * newline (so that a file or an HTTP answer reads well with cat and tail),
 * in a newly allocated NUL-terminated buffer (caller frees); `*len` does
 * not count the NUL. Takes the reference to `doc`; a NULL `doc` reads as
 * out of memory. Returns 0 or -ENOMEM.
 */
int fr_json_text(json_t *doc, size_t flags, char **out, size_t *len);

/*
 * Fills `t` from a parsed dump object. `name` is used in error messages (a
 * file name). On error returns -EPROTO (malformed), -EPROTONOSUPPORT (unknown
 * format version) or -ENOMEM, writes a message naming `name` and what is
 * wrong into err, and leaves `t` freed and zeroed.
 */
int fr_dump_from_val(const struct fr_val *root, const char *name, struct fr_trace *t,
		     char *err, size_t errlen);

/*
 * The same for a reader of another format that wraps it as a dump
 * (pytorch.c) and learns what it still lacks from the entries: `entry` is
 * called with each entry of "entries" once it is read, and so while it is
 * in the cache; `done`, once they are all read and before the threads
 * are, may still change the document's "threads" and fields of `t` the
 * entries decide. A non-zero return of `done` stops the read with it (err
 * is then the caller's to write).
 */
struct fr_dump_entry {
	const struct fr_op *op;          /* what the reader made of the entry */
	/* Its members of these names as they are, which the reader keeps
	 * nothing of (pg_id: only the group it names), NULL when absent:
	 * found in the same walk of its members. They may live only during
	 * the call (fr_pickle_load_with()), but for strings and objects. */
	const struct fr_val *timeout_ms;
	const struct fr_val *frames;
	const struct fr_val *thread_name;
	const struct fr_val *pg_id;
};

struct fr_dump_visit {
	void (*entry)(void *arg, const struct fr_dump_entry *e);
	int (*done)(void *arg, struct fr_trace *t);
	void *arg;
};

int fr_dump_from_val_visit(const struct fr_val *root, const char *name, struct fr_trace *t,
			   char *err, size_t errlen, const struct fr_dump_visit *visit);

/*
 * The entries of such a dump read one at a time, ahead of the rest, as
 * another reader decodes them (a pickle's, through fr_pickle_load_with()),
 * into trace `t`; then the rest of the dump, whose "entries" holds none.
 * Each entry is read, and visited, as fr_dump_from_val_visit() reads the
 * entries of its tree, with the same messages; an entry that does not
 * read is reported by fr_dump_from_val_entries(), in its place among the
 * checks, and those after it are not read.
 *
 * fr_dump_entries_new() makes room for `expect` entries and returns NULL
 * when out of memory;
 * fr_dump_entries_add() returns 0 or -ENOMEM. fr_dump_from_val_entries()
 * returns as fr_dump_from_val() does, its `t` the one the entries were
 * read into (on error freed and zeroed). fr_dump_entries_free() frees the
 * reader, not `t`.
 */
struct fr_dump_entries;

struct fr_dump_entries *fr_dump_entries_new(const char *name, struct fr_trace *t,
					    const struct fr_dump_visit *visit, size_t expect);
int fr_dump_entries_add(struct fr_dump_entries *r, const struct fr_val *entry);
/* The entries given so far. */
size_t fr_dump_entries_count(const struct fr_dump_entries *r);
int fr_dump_from_val_entries(const struct fr_val *root, struct fr_dump_entries *r, char *err,
			     size_t errlen);
void fr_dump_entries_free(struct fr_dump_entries *r);

/* The same from a jansson document (written out and parsed again: for
 * tests and tools, not for speed). */
int fr_dump_from_json(const json_t *root, const char *name, struct fr_trace *t,
		      char *err, size_t errlen);

/*
 * Parses a dump from bytes; same errors as fr_dump_from_val(). The entries
 * go straight from the text into `t` without a tree in between: about half
 * a microsecond an entry (our writer's; others' about twice that).
 */
int fr_dump_parse(const char *buf, size_t len, const char *name, struct fr_trace *t,
		  char *err, size_t errlen);
/*
 * Lends fr_dump_parse() on the calling thread two documents (NULL, NULL:
 * none) to parse into, reset after each dump, so that a reader of
 * thousands of small dumps does not make and free two per dump. They stay
 * the caller's.
 */
void fr_dump_use_docs(struct fr_doc *doc, struct fr_doc *scratch);

/*
 * Opens a file of an incident directory (a dump, a manifest) to read it.
 * Such a directory may be one other users can write to, and a file in it
 * can be replaced between a look at it and its opening: so the file is
 * opened without following a symbolic link (one planted there could point
 * at any file the reader may read), without waiting (a FIFO would block
 * the open until someone writes to it), and refused unless the descriptor
 * is a regular file. Returns the descriptor (close-on-exec, which the
 * caller owns) with its stat in `st`, or -ELOOP for a symbolic link,
 * -EISDIR for a directory, -EINVAL for any other kind of file, or the
 * open's -errno, with `err` naming `path` and what is wrong.
 */
int fr_dump_open(const char *path, struct stat *st, char *err, size_t errlen);
/* fr_dump_open() of file `name` of directory `dirfd` (AT_FDCWD: the
 * current one), which messages call `path`: a directory of many dumps is
 * looked up once, not once per file. */
int fr_dump_openat(int dirfd, const char *name, const char *path, struct stat *st, char *err,
		   size_t errlen);

/* Reads a dump file (opened by fr_dump_open()); adds -errno for I/O errors. */
int fr_dump_read_file(const char *path, struct fr_trace *t, char *err, size_t errlen);

/*
 * A pg_config "ranks" value, an array or PyTorch's string "[0, 1]", as a
 * newly allocated array of global ranks (FR_RANK_UNKNOWN for -1) at *out,
 * *n of them. Returns 0, or -EPROTO/-ENOMEM with `err` naming `name` (the
 * document) and what is wrong.
 */
int fr_dump_read_members(const struct fr_val *v, const char *name, uint32_t **out, size_t *n,
			 char *err, size_t errlen);

/*
 * Writes `len` bytes to `path` atomically: a temporary file in the same
 * directory, fsync, rename, fsync of the directory. Returns 0 or -errno; on
 * failure no file is left at `path` or at the temporary name.
 */
int fr_write_file_atomic(const char *path, const void *buf, size_t len);
/* The same with the file's mode (fr_write_file_atomic: 0644). */
int fr_write_file_atomic_mode(const char *path, const void *buf, size_t len, mode_t mode);
/* The same for `name` in the directory `dirfd`, which it never leaves: a
 * symbolic link at the temporary name is not followed. */
int fr_write_file_at(int dirfd, const char *name, const void *buf, size_t len, mode_t mode);
/*
 * fr_write_file_atomic_mode() without its fsyncs: readers see the whole
 * file or none, but it is durable only once fr_sync_dir() of its directory
 * returned. For the many files of one incident, which the manifest,
 * written after that sync, makes whole.
 */
int fr_write_file_unsynced(const char *path, const void *buf, size_t len, mode_t mode);
/* Makes durable what was written in `dir`: each file when it holds at most
 * FR_SYNC_EACH_MAX, else the whole file system (syncfs); then the
 * directory. Returns 0 or -errno (a failed write-back is reported here). */
#define FR_SYNC_EACH_MAX 64
int fr_sync_dir(const char *dir);

/*
 * Opens directory `path` (relative to `at` when not absolute: AT_FDCWD for
 * the working directory), creating missing components with `mode`. Every
 * component is opened relative to its parent without following a symbolic
 * link (one owned by the caller or root is followed: an administrator's),
 * and must be a directory owned by the caller or by root, so that another
 * user of a shared directory (/tmp) can neither plant a link nor hand over
 * a directory of theirs. Returns the directory's descriptor, or a negative
 * errno with `err` naming the component and what is wrong with it.
 */
int fr_dir_open(int at, const char *path, mode_t mode, char *err, size_t errlen);

/* fr_dir_open() of `path` with mode 0750, closed again. Returns 0 or -errno. */
int fr_mkdir_p(const char *path);

struct fr_klog;

/* An incident manifest, as read back by fr-analyze. */
struct fr_manifest {
	char job[FR_JOB_MAX + 1];
	char incident[FR_INCIDENT_MAX + 1];
	char reason[FR_REASON_MAX + 1];
	uint32_t world_size;
	uint64_t opened_ns;
	uint64_t closed_ns;
	size_t nranks;
	/* The daemon's live view of each rank it knew, with status set to why
	 * it did or did not dump (FR_RANK_DUMPED for those that answered).
	 * Read from a 2.x manifest, a view's communicators share the member
	 * lists of the manifest's table (`members`) rather than own a copy:
	 * release the views with fr_manifest_free() only. */
	struct fr_trace *ranks; /* owned */
	/* Every member list of the "communicators" table, end to end (owned;
	 * NULL for a 1.x manifest). */
	uint32_t *members;
	size_t nmembers;
	/* Each node's kernel log of the incident (2.1, owned; none before). */
	struct fr_klog *klogs;
	size_t nklogs;
};

/*
 * Builds a manifest document (format 2.0): identity, times, each
 * communicator once in "communicators" (members, size, description), each
 * rank's live view (as a dump object without threads, status included,
 * whose pg_config names the communicators and gives its rank in each) and
 * the live verdict object (borrowed reference, may be NULL). A view whose
 * communicator differs from the first view of the same id (members, size
 * or description) keeps its own full pg_config entry. The table is found
 * by comparing member lists; views whose lists are one shared array cost
 * no comparison (the daemon shares them). Returns a new reference, NULL
 * when out of memory.
 */
json_t *fr_manifest_to_json(const char *job, const char *incident, const char *reason,
			    uint32_t world_size, uint64_t opened_ns, uint64_t closed_ns,
			    const struct fr_trace *const *ranks, size_t nranks,
			    json_t *verdict);

/*
 * Reads a manifest file, format 1.x or 2.x (opened by fr_dump_open(); an
 * empty file is -EPROTO); same error conventions as
 * fr_dump_read_file(). Fills `m` (free it with fr_manifest_free()).
 */
int fr_manifest_read_file(const char *path, struct fr_manifest *m, char *err, size_t errlen);
/* The same from bytes in memory; `name` names the document in errors. */
int fr_manifest_parse(const char *buf, size_t len, const char *name, struct fr_manifest *m,
		      char *err, size_t errlen);
void fr_manifest_free(struct fr_manifest *m);

#endif
