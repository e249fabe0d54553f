/* Incidents (incident.c): a hang's dumps collected and written. */
#ifndef FR_DAEMON_INCIDENT_H
#define FR_DAEMON_INCIDENT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "../protocol/wire.h"

struct conn;
struct flightrecd;
struct fr_trace;
struct fr_verdict;
struct incident;
struct incident_record;
struct job;

struct incident_trigger {
	const char *reason;         /* "timeout", "heartbeat", "disconnect" */
	int32_t rank;               /* the rank that showed it, -1 if none */
	char comm[FR_COMM_ID_MAX + 1]; /* "" when no op is involved */
	bool has_seq;
	uint64_t seq;
	double waited_s;            /* how long the condition had lasted */
};

/*
 * Who wants to hear of an incident's dumps as they are written (a node
 * daemon's incident asked for by its central daemon, upstream_incident.c).
 * Each is called on the loop under the daemon's lock; any may be NULL.
 */
struct incident_hooks {
	/*
	 * Called on the thread pool, without the lock, with each valid dump
	 * as it was parsed to be checked: what the owner makes of it (a node
	 * daemon's summary), in `*out` (`*len` bytes, owned by the caller),
	 * so that nobody reads and parses the dump again. Returns 0 or
	 * -errno. It may read `arg`, which must not change while the
	 * incident collects.
	 */
	int (*digest)(const void *arg, const struct fr_trace *t, const char *path, uint8_t **out,
		      size_t *len);
	/* Rank `rank`'s dump is on disk as `path`; `digest` (taken: the
	 * callee frees it) is what `digest` made of it, NULL with its
	 * -errno in `digest_err` when it failed, or when there is none. */
	void (*written)(void *arg, uint32_t rank, const char *path, uint8_t *digest,
			size_t digest_len, int digest_err);
	/* Rank `rank`, which the daemon holds (or held), gave no dump on disk:
	 * `why`. A rank that died (crashed, exited, killed) is told once the
	 * incident closes, with `live`, the daemon's live view of it (its
	 * crash or exit, its operations in flight: the manifest's), borrowed
	 * for the call; `live` is NULL for any other. */
	void (*failed)(void *arg, uint32_t rank, const char *why, const struct fr_trace *live);
	/* The manifest is written (or could not be): nothing more is said.
	 * `klog` is the node's "kernel_log" object in it, as compact JSON of
	 * `klog_len` bytes (kmsg.h's text), borrowed for the call; NULL when
	 * there is none (out of memory). */
	void (*closed)(void *arg, const char *klog, size_t klog_len);
	void *arg;
};

/*
 * Opens an incident, unless the job is over --max-incidents-per-hour: then
 * the incident is suppressed (counted, logged once per job a minute) and the
 * stuck state `key` counts as reported.
 */
void incident_open(struct flightrecd *d, struct job *job, const struct incident_trigger *t,
		   const struct fr_verdict *v, uint64_t key);
/*
 * Whether the job may open an incident now under --max-incidents-per-hour;
 * when not, `retry_after_s` says in how many seconds it may.
 */
bool incident_rate_allows(struct flightrecd *d, struct job *job, uint64_t now_mono,
			  uint64_t *retry_after_s);
/*
 * The same bucket over any holder's fields (a job the nodes hold,
 * cluster_incident.c): *budget incidents left, *set once filled, *mono
 * when last refilled.
 */
bool incident_bucket_allows(const struct flightrecd *d, double *budget, bool *set, uint64_t *mono,
			    uint64_t now_mono, uint64_t *retry_after_s);
/*
 * A rank of `job` died: it said CRASH (reason "crash"), an EXIT that is a
 * fault ("exited"), or was found killed ("killed"). An incident opens at
 * once, asking the other ranks for their dumps while they still wait,
 * unless one is collecting already (its manifest then shows the death),
 * this death had one, or the rate limit refuses it.
 */
void incident_open_death(struct flightrecd *d, struct job *job, uint32_t rank,
			 const char *reason);

/* A rank whose connection drops without goodbye this soon after another
 * rank of its job died was, as far as the daemon can tell, killed by the
 * launcher (mpirun tears a job down within milliseconds of a rank's death;
 * a crashed or exiting rank itself lingers up to 2 s). */
#define INCIDENT_KILL_WINDOW_NS (10ull * NS_PER_S)
/*
 * Opens an incident that someone asked for (POST .../dump, a central
 * daemon's NODE_DUMP_REQUEST), with the job's live verdict, leaving the
 * watchdog's memory of the hang it reported as it was; `hooks` (NULL:
 * none) hear of its dumps. The caller checked the rate limit. Returns 0
 * when it opened, -ENOMEM, or -EIO when it could not (the log says why).
 */
int incident_open_asked(struct flightrecd *d, struct job *job, const struct incident_trigger *t,
			const struct incident_hooks *hooks);
/*
 * Creates DIR/<job>/<id>/ for an incident detected at `detected_ns`, its
 * id "<UTC time>-<n>" chosen so that the directory is new; the same names
 * for every kind of incident. Returns 0 or a negative errno.
 */
int incident_make_dir_for(struct flightrecd *d, const char *job, uint64_t detected_ns, char *id,
			  size_t idcap, char *dir, size_t dircap);
/*
 * Writes `doc` (taken; NULL when making it ran out of memory) as
 * DIR/manifest.json on the thread pool, then calls done(arg, err) on the
 * loop under the daemon's lock; a failure is logged and counted first.
 * Every kind of incident ends so.
 */
void incident_write_manifest(struct flightrecd *d, const char *dir, json_t *doc,
			     void (*done)(void *arg, int err), void *arg);
/*
 * The same with the document made by build(arg) on the thread pool,
 * without the daemon's lock: for an incident of tens of thousands of
 * ranks, whose manifest takes a second to make. What build() reads must
 * not change until done() is called.
 */
void incident_build_manifest(struct flightrecd *d, const char *dir, json_t *(*build)(void *arg),
			     void (*done)(void *arg, int err), void *arg);
/* The manifest's "trigger" object. */
json_t *incident_trigger_json(const struct incident_trigger *t);
/* The line every kind of incident logs once its manifest is written. */
void incident_log_closed(const struct incident_record *rec, const char *job, const char *dir);
/* Shared with cluster_incident.c, which keeps its own kind of incident. */
/* *slot (owned) becomes the formatted text. */
void incident_vset_text(char **slot, const char *fmt, va_list ap);
/* A new record at the end of `*records` (the oldest dropped past
 * DAEMON_MAX_INCIDENT_RECORDS); NULL when out of memory. */
struct incident_record *incident_record_push(struct incident_record **records, size_t *n,
					     const char *id, const char *reason,
					     const char *summary, uint64_t opened_ns);
/* Parses a dump that should be rank `rank`'s of `job` into `t` (the caller
 * frees it); false with `err` saying why when it is not. */
bool incident_dump_check(const uint8_t *data, size_t len, const char *job, uint32_t rank,
			 struct fr_trace *t, char *err, size_t cap);
/* Charges `grow` more bytes of `up` to the memory budget (and to `job`,
 * NULL: none); false with `why` when over it. */
struct upload;
bool incident_charge_upload(struct job *job, struct upload *up, uint64_t grow, char *why,
			    size_t cap);
/* Counts and logs an incident refused by the rate limit. */
void incident_suppress(struct flightrecd *d, struct job *job, const char *reason,
		       uint64_t retry_after_s);
void incident_close(struct incident *inc, bool incomplete);
bool incident_collecting(const struct incident *inc);
void incident_check_deadline(struct incident *inc, uint64_t now_mono);
void incident_dump_data(struct conn *c, const struct fr_msg_dump_data *m);
/* A rank of the job connected (HELLO), went away, or said BYE. */
void incident_rank_joined(struct incident *inc, struct conn *c);
void incident_rank_left(struct incident *inc, uint32_t rank, bool finished);
json_t *incident_records_json(const struct flightrecd *d, const struct job *job);
/* The same of any job's records (`n` of them, oldest first). */
json_t *incident_records_json_of(const struct flightrecd *d, const char *job,
				 const struct incident_record *records, size_t n);

#endif
