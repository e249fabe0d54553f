/*
 * Aggregates (docs/SCALE-OUT.md): what a node daemon says upstream of its
 * ranks' progress, and what the central daemon makes of every node's.
 * Both are pure: the node side reads the registry's struct job and writes
 * NODE_PROGRESS records (protocol/node_wire.h); the central side reads the
 * latest record of each node for one communicator and says where the job
 * stands on it. Neither takes a lock nor keeps state; the caller holds
 * the daemon's lock over the job it passes.
 *
 * Costs are linear: the node side reads each of its ranks' communicators
 * and operations in flight twice per 256 communicators of the job
 * (finding each record by hash), the
 * central side each node's record once (its laggard
 * list is bounded by the ranks it names).
 */
#ifndef FR_DAEMON_AGGREGATE_H
#define FR_DAEMON_AGGREGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../protocol/node_wire.h"

struct job;

/*
 * The node's progress on the job's communicators job->comms[first ..
 * first + n), n at most FR_NODE_PROGRESS_COMMS_MAX, as one NODE_PROGRESS:
 * m->comms points to `out` (room for n records). Over the job's ranks
 * that report each communicator: the lowest and highest seq entered and
 * completed, the ranks' runs, the ranks whose last entered is below the
 * highest (the first FR_NODE_LAGGARDS_MAX by rank, the rest counted), and
 * the operations in flight grouped by (seq, type, flags) (the first
 * FR_NODE_GROUPS_MAX groups met in rank order; operations of others
 * counted), each with its ranks as runs and the age of its oldest entry
 * at `now_ns` (CLOCK_REALTIME). Returns 0, or -EINVAL for a range of
 * communicators the job does not have or too long for one frame.
 */
int aggregate_progress(const struct job *job, size_t first, uint32_t n, uint64_t now_ns,
		       struct fr_msg_node_progress *m, struct fr_node_comm_progress *out);
/*
 * The same records of job->comms[first .. first + n), any n, into `out`
 * (room for n): one pass over the ranks, which the caller cuts into
 * frames. 0, -EINVAL for a range the job does not have, or -ENOMEM.
 */
int aggregate_progress_range(const struct job *job, size_t first, uint32_t n, uint64_t now_ns,
			     struct fr_node_comm_progress *out);

/* Ranks the central side names at most, per communicator: the rest are counted. */
#define AGG_LAGGARDS_MAX 1024u
#define AGG_RANGES_MAX 1024u

/* One node's latest record of the communicator, for aggregate_merge(). */
struct agg_node {
	uint32_t node;          /* the caller's number for the node, echoed in laggards */
	uint64_t held_ms;       /* since the record arrived: added to its ages */
	const struct fr_node_comm_progress *rec; /* NULL: the node has none */
};

/* A rank behind the highest seq any rank entered on the communicator. */
struct agg_laggard {
	uint32_t rank;
	uint32_t node;
	/* Its last seq entered. For a rank named because its whole node is
	 * behind, the node's highest: exact, unless the node left some of
	 * its laggards out (then at most that). */
	uint64_t last_entered;
};

/* An operation in flight, over every node: (seq, type, flags) as in NODE_PROGRESS. */
struct agg_group {
	uint64_t seq;
	uint8_t type;
	uint8_t flags;
	uint32_t nranks;
	uint32_t nnodes;        /* nodes with ranks in it */
	uint64_t age_ms;        /* of the oldest entry, now */
	uint32_t nranges;       /* its ranks as runs, the first AGG_RANGES_MAX ... */
	uint32_t ranks_unlisted; /* ... and how many ranks the runs leave out */
	struct fr_node_range ranges[AGG_RANGES_MAX];
};

/* Where a job stands on one communicator, over every node that reported it. */
struct agg_comm {
	uint32_t nnodes;        /* nodes with a record */
	uint32_t nranks;
	uint64_t lo_entered, hi_entered;
	uint64_t lo_completed, hi_completed;
	/* The ranks whose last entered is below hi_entered, ascending by
	 * rank; laggards_unnamed counts those no node named or over the cap. */
	uint32_t nlaggards;
	uint32_t laggards_unnamed;
	struct agg_laggard laggards[AGG_LAGGARDS_MAX];
	/* The operation that holds ranks (blocking, or waited on) and was
	 * entered longest ago, merged over the nodes; none when no rank is
	 * held. What the watchdog reports: "ranks <oldest.ranges> wait in
	 * <type> #<seq> since <age>; <laggards below seq> never entered". */
	bool has_oldest;
	struct agg_group oldest;
};

/*
 * Merges the nodes' records of one communicator into `out` (the caller's;
 * about 24 KiB). Returns 0 or -ENOMEM.
 */
int aggregate_merge(const struct agg_node *nodes, size_t nnodes, struct agg_comm *out);

#endif
