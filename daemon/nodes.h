/*
 * The central daemon's node daemons (docs/SCALE-OUT.md): who connected
 * upstream (NODE_HELLO), the ranks each says it holds per job
 * (NODE_RANKS) and its latest progress record per job and communicator
 * (NODE_PROGRESS). Kept apart from the registry on purpose: a node's ranks
 * are shown (GET /v1/jobs, /v1/jobs/<job>, /v1/nodes) but no rank of the
 * registry stands for them, so the watchdog never takes one for silent or
 * lost.
 *
 * Bounded: everything kept here is charged to the memory budget
 * (BUDGET_NODES) and capped (NODES_MAX nodes, NODE_JOBS_MAX jobs a node,
 * NODES_JOBS_TOTAL_MAX jobs over all nodes, NODE_RANKS_MAX ranks and
 * NODE_COMMS_MAX communicators a job on a node), and a lost node's jobs
 * go after a grace (nodes_forget_lost());
 * what would go over is refused, logged once per connection and counted
 * by the caller, and what was kept stays. Checked, not trusted: job ids
 * are names, a rank has one connected holder and a job one world size
 * (nodes_ranks()). Linear: a job -> holders index
 * serves every listing and the read side, so that none of them costs more
 * than the nodes, jobs and communicators it reads; merging a NODE_RANKS
 * batch costs its sort and one pass over the node's ranks of the job.
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

/* Nodes remembered at most; at the cap a new name forgets the node that
 * has been disconnected longest, and is refused when every node is
 * connected. A job of 100,000 GPUs, 8 a node, is 12,500 nodes. */
#define NODES_MAX 16384u
#define NODES_MAX_S "16384"
/* Jobs kept per node: a node daemon's registry holds at most DAEMON_MAX_JOBS. */
#define NODE_JOBS_MAX 1024u
/* Ranks kept per job per node, and never more than the job's world size:
 * DAEMON_MAX_WORLD. */
#define NODE_RANKS_MAX (1u << 20)
/* What a central daemon's incident of a job costs per rank of its world
 * (the rank's entry, its manifest entry, the engine's tables): a job whose
 * world does not fit half of --max-memory at this much is refused
 * (budget_world_fits()). */
#define NODES_BYTES_PER_WORLD_RANK 3072u
/* Communicators with a progress record per job per node: DAEMON_MAX_COMMS. */
#define NODE_COMMS_MAX 16384u
/* Jobs all nodes together may hold here: what the central watchdog walks
 * each pass. A node's NODE_RANKS of a new job past it is refused. */
#define NODES_JOBS_TOTAL_MAX 4096u
#define NODES_JOBS_TOTAL_MAX_S "4096"
/* A lost node's jobs are forgotten after max(10 x --heartbeat-timeout,
 * this): until then its ranks show as unresponsive (node lost) and its job
 * ids are not free for agents; after, it is as if it never held them. */
#define NODES_LOST_GRACE_MIN_S 600

/*
 * One communicator's latest progress record as a node sent it, at the
 * size it uses: the counts and bounds here, the runs, laggards and groups
 * present in `data` (nodes.c packs and unpacks them), so that a record of
 * a few ranks costs a few hundred bytes, not a whole struct
 * fr_node_comm_progress.
 */
struct node_prog {
	char comm[FR_COMM_ID_MAX + 1];
	uint64_t lo_entered, hi_entered;
	uint64_t lo_completed, hi_completed;
	uint32_t nranks;
	uint32_t nmembers;
	uint32_t nlaggards;
	uint32_t laggards_omitted;
	uint32_t ngroups;
	uint32_t ops_omitted;
	uint64_t mono_ns;               /* when it arrived (daemon_mono_ns()) */
	size_t size;                    /* bytes of `data` */
	void *data;
};

struct node;
struct nodes_entry;

/* What one node said of one job. */
struct node_job {
	char id[FR_JOB_MAX + 1];
	uint32_t world_size;
	uint32_t nranks;
	uint32_t ranks_cap;
	struct fr_node_rank *ranks;     /* ascending by rank */
	uint32_t nconnected;            /* of those, in state FR_NODE_RANK_CONNECTED */
	uint32_t nprogress;
	uint32_t progress_cap;
	struct node_prog *progress;     /* the latest record per communicator, in arrival order */
	uint32_t *by_comm;              /* indices into `progress`, ascending by comm */
	uint64_t charged;               /* bytes of BUDGET_NODES the arrays above hold */
	struct node *node;              /* NULL for a record the tests make alone */
	struct nodes_entry *entry;      /* the index entry of `id` that lists it ... */
	uint32_t slot;                  /* ... at this place */
};

struct node {
	struct node *next;
	struct node *hnext;             /* in the table by name */
	char name[FR_HOST_MAX + 1];
	char addr[64];                  /* the peer it last connected from */
	uint64_t boot_id;
	uint32_t number;                /* its number in agg_node.node, while it is kept */
	struct conn *conn;              /* NULL while disconnected */
	uint64_t lost_mono_ns;          /* when its connection went (daemon_mono_ns()); 0 while connected */
	bool refusal_logged;            /* a refusal over a cap was logged on this connection */
	uint32_t njobs, jobs_cap;
	struct node_job **jobs;         /* each allocated apart: the index points at them */
};

/* Pure state merges, for the tests as much as for nodes.c. */
/*
 * NODE_RANKS into the node's record of its job: FULL forgets the ranks
 * said before; the others replace the rank's entry or add it (the last of
 * a rank in one batch wins). Sorts the batch and merges it with the kept
 * ranks in one pass. Returns 0; -ENOSPC for a world size over
 * NODE_RANKS_MAX, -EDQUOT over the memory budget: then nothing changed.
 */
int node_job_ranks(struct node_job *j, const struct fr_msg_node_ranks *m);
/*
 * NODE_PROGRESS: each record replaces the communicator's last. Returns 0,
 * or -ENOSPC / -EDQUOT when some record was refused (a new communicator
 * over NODE_COMMS_MAX, or over the budget); the others are taken.
 */
int node_job_progress(struct node_job *j, const struct fr_msg_node_progress *m);
/* The record as a whole struct (what aggregate_merge() reads). */
void node_prog_unpack(const struct node_prog *p, struct fr_node_comm_progress *out);
void node_job_free(struct node_job *j);

/*
 * A connection's NODE_HELLO: finds the node by name (a new boot id forgets
 * what it said before), binds it to `c` and notes its jobs. A name is
 * bound to its boot id while connected: a NODE_HELLO of another boot id
 * is refused then; one of the same boot id (the node came back before its
 * old connection was seen to go) takes over, and the older connection,
 * which the caller closes, is returned in *old. At NODES_MAX the node
 * disconnected longest is forgotten. Returns the node, or NULL with the
 * reason for the node in *why (and a log line).
 */
struct node *nodes_admit(struct conn *c, const char *peer, const struct fr_msg_node_hello *m,
			 struct conn **old, const char **why);
/* nodes_admit() without the reason. */
struct node *nodes_hello(struct conn *c, const char *peer, const struct fr_msg_node_hello *m,
			 struct conn **old);
/*
 * NODE_RANKS of node `n`. An empty FULL list retracts the job: the node's
 * record of it goes (and the index entry when no node holds it). A rank
 * has one holder: one that another connected node of the job holds is
 * refused (m->ranks is filtered in place), one a lost node held moves here
 * (a rank restarted on another node). Returns 0, -ENOMEM, -ENOSPC /
 * -EDQUOT when refused over a cap, the budget or an invalid job id
 * (logged once per connection; what was kept stays), -EADDRINUSE when
 * some ranks were refused as held by another node (the others are taken),
 * -EDOM when the whole message was refused for a world size other than
 * the one the job's other connected nodes say (those two rate-limited in
 * the log).
 */
int nodes_ranks(struct node *n, const struct fr_msg_node_ranks *m);
/*
 * Whether NODE_RANKS `m` of node `n` says a rank died (crashed, exited,
 * killed: protocol 7) that the node held alive until now: the first such
 * rank, its pid and its state. Asked before nodes_ranks() takes `m`. (A
 * node that reconnects says its dead ranks again: the central daemon's
 * incidents tell them apart, cluster_incident_death().)
 */
bool nodes_ranks_new_death(struct node *n, const struct fr_msg_node_ranks *m, uint32_t *rank,
			   uint32_t *pid, uint8_t *state);
/* NODE_PROGRESS of node `n`; returns as nodes_ranks(). */
int nodes_progress(struct node *n, const struct fr_msg_node_progress *m);
/* The node's connection `c` closed: the node stays, disconnected. */
void nodes_conn_lost(struct node *n, struct conn *c);
/* How long a lost node keeps its jobs: max(10 x heartbeat timeout, NODES_LOST_GRACE_MIN_S). */
uint64_t nodes_lost_grace_ns(double heartbeat_timeout_s);
/* Forgets the jobs of nodes lost longer than `grace_ns` (the watchdog's
 * pass; linear in the nodes), and holds to that grace until the next call. */
void nodes_forget_lost(uint64_t now_mono_ns, uint64_t grace_ns);
/* The connection of the node named `node`; NULL while it is lost or unknown. */
struct conn *nodes_conn_by_name(const char *node);
void nodes_free(void);

/* Whether some node connected, or lost within the grace (nodes_forget_lost()),
 * holds ranks of `job`, and the first such node's name in *node. */
bool nodes_job_held(const char *job, const char **node);

/* GET /v1/nodes: {"nodes": [{name, address, connected, jobs, ranks}]}. */
json_t *nodes_json(void);

/*
 * GET /v1/jobs/<job>: the job's ranks that nodes hold, copied under the
 * lock by nodes_job_ranks_take() (a memcpy per node, charged to
 * BUDGET_VIEWS while the request holds it), made into JSON without it by
 * nodes_ranks_copy_json(), which appends them to `ranks` as GET
 * /v1/jobs/<job> lists ranks, each with "node".
 */
struct nodes_copy_node {
	char name[FR_HOST_MAX + 1];
	bool lost;
};
struct nodes_ranks_copy {
	size_t n;
	struct fr_node_rank *ranks;
	uint32_t *from;                 /* per rank: its node in `nodes` */
	uint32_t nnodes;
	struct nodes_copy_node *nodes;
	uint64_t charged;
};
/* Returns 0, -ENOMEM, or -EDQUOT over the memory budget; free with nodes_ranks_copy_free(). */
int nodes_job_ranks_take(const char *job, struct nodes_ranks_copy *out);
void nodes_ranks_copy_json(const struct nodes_ranks_copy *v, json_t *ranks);
void nodes_ranks_copy_free(struct nodes_ranks_copy *v);
/* Both at once, under the lock: returns how many. */
size_t nodes_job_ranks_json(const char *job, json_t *ranks);
/* Whether a node holds ranks of `job`, and its world size then. */
bool nodes_job_known(const char *job, uint32_t *world_size);

/* GET /v1/jobs entries of the jobs nodes hold ranks of that `skip` says
 * the registry does not, once each: linear in those jobs and their nodes. */
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

/* read side: node_watchdog */
/* What node `node` (by name) said of rank `rank` of `job`, or NULL: valid
 * under the daemon's lock until the node's next message. */
const struct fr_node_rank *nodes_job_rank(const char *job, const char *node, uint32_t rank);

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
