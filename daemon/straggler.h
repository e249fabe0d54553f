/*
 * Stragglers, online (straggler.c): ranks of a running job that come last
 * to its collectives, told from the TIMING samples its agents send
 * (protocol 7). Information, not a fault: no incident opens for one.
 */
#ifndef FR_DAEMON_STRAGGLER_H
#define FR_DAEMON_STRAGGLER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <jansson.h>

#include "../protocol/wire.h"

struct conn;
struct flightrecd;
struct job;
struct job_comm;

/* The defaults of --straggler-threshold and --straggler-min-duration. */
#define STRAGGLER_DEFAULT_THRESHOLD_S 0.002
#define STRAGGLER_DEFAULT_MIN_DURATION_S 10.0
/* Ranks /v1/jobs/<job> lists at most, in `stragglers` and in `slowest`. */
#define STRAGGLER_LIST_MAX 8

/* What the scores are judged by: the daemon's settings, or a test's. */
struct straggler_limits {
	double threshold_s;     /* a straggler's lead, decayed, is at least this */
	double min_duration_s;  /* ... and has been for this long */
};

/* One rank as the job's live view shows it. */
struct straggler_entry {
	uint32_t rank;
	double lag_s;           /* behind the first member, when last (decayed) */
	double lead_s;          /* ahead of the next-latest member, when last (decayed) */
	double last_fraction;   /* of the sampled collectives it was last in (decayed) */
	double since_s;         /* how long it has been a straggler; 0 when it is not */
	bool straggler;
};

/*
 * One member's sample of one collective, as scored: its rank, whether it
 * is an MPI rank, and its connection's clock offset (the daemon's clock
 * less the agent's), known or not.
 */
struct straggler_sample {
	uint32_t rank;
	bool mpi;
	bool has_offset;
	int64_t offset_ns;
	const struct fr_wire_timing *t;
};

/*
 * Scores one sample of communicator `jc` of `job` at monotonic time
 * `now_mono`: O(1), and O(1) again for the collective it completes. The
 * caller holds the lock. -ENOMEM when the job's scores cannot be
 * allocated (the sample is dropped).
 */
int straggler_note(struct job *job, const struct job_comm *jc, const struct straggler_sample *s,
		   const struct straggler_limits *lim, uint64_t now_mono);
/* TIMING from an agent's connection: each sample on a communicator the
 * rank is a member of is scored. */
int straggler_timing(struct flightrecd *d, struct conn *c, const struct fr_msg_timing *m,
		     const char **why);
/* HEARTBEAT from an agent's connection: a sample of its clock's offset. */
void straggler_heartbeat(struct conn *c, uint64_t agent_now_ns);
/*
 * The job's slowest ranks, slowest first, at most `max`: with
 * `stragglers_only` the stragglers, else every rank last in a sampled
 * collective lately. Returns how many were written; O(ranks).
 */
unsigned straggler_list(const struct job *job, const struct straggler_limits *lim,
			uint64_t now_mono, bool stragglers_only, struct straggler_entry *out,
			unsigned max);
/*
 * The job's `stragglers` (or, without `stragglers_only`, `slowest`) for
 * /v1/jobs/<job>: [{rank, lag_ms, lead_ms, last_fraction, since_s}], at
 * most STRAGGLER_LIST_MAX. The caller holds the lock. NULL: out of memory.
 */
json_t *straggler_json(const struct flightrecd *d, const struct job *job, bool stragglers_only);
/* flightrec_straggler_ranks and flightrec_straggler_lag_seconds, per job,
 * for /metrics; the caller holds the lock. */
void straggler_metrics(const struct flightrecd *d, FILE *f);
/* Forgets the job's scores (a new run, or the job forgotten). */
void straggler_job_free(struct job *job);

#endif
