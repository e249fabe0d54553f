/*
 * The verdict of a job the node daemons hold (docs/SCALE-OUT.md), made
 * from the nodes' aggregates rather than from every rank's evidence: pure,
 * so that the central watchdog (node_watchdog.c), the live views and the
 * unit tests share one decision.
 *
 * Input: for the job, the merged state (aggregate_merge()) of the one
 * communicator whose oldest operation in flight is the oldest, and the
 * nodes holding ranks of it that are disconnected; the limits (--timeout,
 * --heartbeat-timeout) and the time now. Output: whether the job hangs,
 * why, and whether that is a stuck state the watchdog has not reported.
 *
 * A hang is an operation that holds ranks (blocking, or waited on) for
 * longer than --timeout; its culprits are the ranks whose last entered seq
 * on that communicator is below the operation's, which never entered it;
 * when the operation is point-to-point (its seq counts per pair of peers)
 * no rank is named, and the verdict says so.
 * The ranks that wait in it are never culprits. A node lost for longer
 * than --heartbeat-timeout makes all its ranks unresponsive, one reason for
 * all of them and none singled out. Costs are bounded by the aggregates'
 * caps, whatever the number of ranks.
 */
#ifndef FR_DAEMON_NODE_VERDICT_H
#define FR_DAEMON_NODE_VERDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "aggregate.h"
#include "incident.h"

/* Runs of a lost node's ranks listed at most; the rest are counted. */
#define NV_LOST_RANGES_MAX 64u
/* Ranks the verdict lists one by one at most ("waiting_ranks", culprits). */
#define NV_RANKS_MAX AGG_LAGGARDS_MAX

/* A node holding ranks of the job, disconnected since lost_mono_ns. */
struct nv_lost {
	char node[FR_HOST_MAX + 1];
	uint64_t lost_mono_ns;
	uint32_t nranks;
	uint32_t nranges;       /* its ranks as runs, the first NV_LOST_RANGES_MAX ... */
	uint32_t ranks_unlisted; /* ... and how many ranks they leave out */
	struct fr_node_range ranges[NV_LOST_RANGES_MAX];
};

/* The runs of `n` ranks ascending and distinct, into l->ranges. */
void nv_lost_ranges(struct nv_lost *l, const struct fr_node_rank *ranks, uint32_t n);

/* What the nodes say of one job now. */
struct nv_job {
	uint32_t world_size;
	const char *comm;               /* where the oldest operation holds ranks; NULL: nowhere */
	const struct agg_comm *agg;     /* its merge; NULL with comm */
	size_t nlost;
	const struct nv_lost *lost;
};

struct nv_limits {
	double timeout_s;
	double heartbeat_timeout_s;
};

/* What the watchdog reported of a job: kept by the caller between passes. */
struct nv_reported {
	bool has_key;
	uint64_t key;           /* the stuck operation opened last: comm, seq, type */
	uint64_t lost_mono_ns;  /* the latest node loss opened */
};

struct nv_decision {
	struct nv_limits limits;        /* the ones decided under */
	bool hang;              /* an operation holds ranks for longer than --timeout */
	size_t nlost;           /* nodes lost for longer than --heartbeat-timeout */
	/* A stuck state not reported yet: open an incident with `trigger`
	 * (reason "timeout", else "node_lost"). */
	bool open;
	struct incident_trigger trigger;
};

/*
 * Whether `agg` (comm `comm`) is a better candidate than `best` for
 * nv_job.comm: its oldest operation is older. For the caller that merges
 * each communicator in turn and keeps one.
 */
bool nv_older(const struct agg_comm *agg, const struct agg_comm *best);

/*
 * Whether the laggards can be culprits of `agg`'s oldest operation: only
 * when it is a collective. A point-to-point operation's seq counts per
 * pair of peers, not on the communicator as the laggards' last entered
 * does, and the aggregates do not say who the peer is.
 */
bool nv_names_culprits(const struct agg_comm *agg);

/* Whether the laggard is a culprit of `agg`'s oldest operation: a
 * collective, and the laggard below its seq. */
bool nv_is_culprit(const struct agg_comm *agg, const struct agg_laggard *l);

/* The culprits of `agg`'s oldest operation, named or counted only. */
uint64_t nv_culprit_count(const struct agg_comm *agg);

/* Whether node `l` counts as lost at now_mono_ns. */
bool nv_lost_counts(const struct nv_lost *l, const struct nv_limits *lim, uint64_t now_mono_ns);

/*
 * The decision on `j` at now_mono_ns. With `rep`, a stuck state that rep
 * says was reported is not opened again and rep is updated (a hang that
 * cleared forgets its key, so that the same operation stuck again later is
 * opened again); without, `open` stays false. Returns whether the verdict
 * is a hang (timeout or a node lost).
 */
bool nv_decide(const struct nv_job *j, const struct nv_limits *lim, uint64_t now_mono_ns,
	       struct nv_reported *rep, struct nv_decision *out);

/* Names for the verdict's JSON, looked up by the caller (nodes.h). */
struct nv_names {
	const char *(*node)(void *arg, uint32_t node);
	/* The host and pid that node `node` (by name) said `rank` has: false
	 * when unknown (host and pid are left as they are). */
	bool (*rank)(void *arg, const char *node, uint32_t rank, const char **host, uint32_t *pid);
	void *arg;
};

/*
 * The verdict as JSON, in fr-analyze --json's vocabulary (docs/HTTP-API.md,
 * "Jobs the node daemons hold"). Returns a new reference, NULL when out of
 * memory.
 */
json_t *nv_verdict_json(const struct nv_job *j, const struct nv_decision *dec,
			uint64_t now_mono_ns, const struct nv_names *names);

#endif
