/*
 * The central daemon's node daemons (docs/SCALE-OUT.md): who connected
 * upstream (NODE_HELLO), the ranks each says it holds per job
 * (NODE_RANKS) and its latest progress record per job and communicator
 * (NODE_PROGRESS). Kept apart from the registry on purpose: a node's ranks
 * are shown (GET /v1/jobs, /v1/jobs/<job>, /v1/nodes) but no rank of the
 * registry stands for them, so the watchdog never takes one for silent or
 * lost; the central watchdog does not read the aggregates yet.
 *
 * Everything here is guarded by the daemon's lock; one daemon per process.
 */
#ifndef FR_DAEMON_NODES_H
#define FR_DAEMON_NODES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../protocol/node_wire.h"

struct conn;
struct flightrecd;

/* What one node said of one job. */
struct node_job {
	char id[FR_JOB_MAX + 1];
	uint32_t world_size;
	uint32_t nranks;
	uint32_t ranks_cap;
	struct fr_node_rank *ranks;     /* ascending by rank */
	uint32_t nprogress;
	uint32_t progress_cap;
	struct fr_node_comm_progress *progress; /* the latest record per communicator */
	uint64_t *progress_mono_ns;     /* when each record arrived (daemon_mono_ns()) */
};

struct node {
	struct node *next;
	char name[FR_HOST_MAX + 1];
	char addr[64];                  /* the peer it last connected from */
	uint64_t boot_id;
	uint32_t number;                /* its number in agg_node.node, fixed when first seen */
	struct conn *conn;              /* NULL while disconnected */
	uint64_t lost_mono_ns;          /* when its connection went (daemon_mono_ns()); 0 while connected */
	size_t njobs;
	struct node_job *jobs;
};

/* Pure state merges, for the tests as much as for nodes.c. */
/* NODE_RANKS into the node's record of its job: FULL forgets the ranks
 * said before; the others replace the rank's entry or add it. Returns 0 or -ENOMEM. */
int node_job_ranks(struct node_job *j, const struct fr_msg_node_ranks *m);
/* NODE_PROGRESS: each record replaces the communicator's last. Returns 0 or -ENOMEM. */
int node_job_progress(struct node_job *j, const struct fr_msg_node_progress *m);
void node_job_free(struct node_job *j);

/*
 * A connection's NODE_HELLO: finds the node by name (a new boot id forgets
 * what it said before), binds it to `c` (replacing an older connection of
 * it, which the caller closes: returned in *old) and notes its jobs.
 * Returns the node, or NULL when out of memory or over the nodes kept.
 */
struct node *nodes_hello(struct conn *c, const char *peer, const struct fr_msg_node_hello *m,
			 struct conn **old);
int nodes_ranks(struct node *n, const struct fr_msg_node_ranks *m);
int nodes_progress(struct node *n, const struct fr_msg_node_progress *m);
/* The node's connection `c` closed: the node stays, disconnected. */
void nodes_conn_lost(struct node *n, struct conn *c);
void nodes_free(void);

/* GET /v1/nodes: {"nodes": [{name, address, connected, jobs, ranks}]}. */
json_t *nodes_json(void);
/* The job's ranks that nodes hold, appended to `ranks` as GET
 * /v1/jobs/<job> lists ranks, each with "node". Returns how many. */
size_t nodes_job_ranks_json(const char *job, json_t *ranks);
/* Whether a node holds ranks of `job`, and its world size then. */
bool nodes_job_known(const char *job, uint32_t *world_size);
/* The jobs nodes hold that `skip` says the registry does not: GET /v1/jobs entries. */
void nodes_jobs_json(json_t *jobs, bool (*skip)(void *arg, const char *job), void *arg);

/*
 * The read side, for the central watchdog and the live views of jobs the
 * nodes hold. Each walks the nodes' state under the daemon's lock, at a
 * cost linear in the nodes and the communicators, never in the ranks.
 */
struct agg_node;
/* Every job some node holds ranks of, once each. */
void nodes_each_job(void (*fn)(void *arg, const char *job, uint32_t world_size), void *arg);
/*
 * Every communicator of `job` some node reported progress on, once each:
 * fn gets the latest record of each node that has one (agg_node.node: the
 * node's number for nodes_node_name(); held_ms: the record's age at
 * `now_mono_ns`). `recs` is valid during the call only.
 */
void nodes_job_each_comm(const char *job, uint64_t now_mono_ns,
			 void (*fn)(void *arg, const char *comm, const struct agg_node *recs,
				    size_t n),
			 void *arg);
/* The nodes that hold ranks of `job` and are disconnected: fn gets the
 * node's name, since when (daemon_mono_ns()), and its ranks of the job. */
void nodes_job_each_lost(const char *job,
			 void (*fn)(void *arg, const char *node, uint64_t lost_mono_ns,
				    const struct fr_node_rank *ranks, uint32_t nranks),
			 void *arg);
/* The name of the node nodes_job_each_comm() numbered `node`; "" if none. */
const char *nodes_node_name(uint32_t node);

/* read side: cluster incidents (cluster_incident.c) */
/*
 * Every node that holds ranks of `job`, connected or not: fn gets its
 * name, its connection (NULL while it is lost) and its ranks of the job
 * (ascending). Linear in the nodes.
 */
void nodes_job_each_node(const char *job,
			 void (*fn)(void *arg, const char *node, struct conn *conn,
				    const struct fr_node_rank *ranks, uint32_t nranks),
			 void *arg);
/*
 * The node that holds rank `rank` of `job`: its connection (NULL while
 * lost) and, in *node, its name; false when no node holds the rank.
 */
bool nodes_rank_node(const char *job, uint32_t rank, struct conn **conn, const char **node);

#endif
