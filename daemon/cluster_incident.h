/*
 * Incidents of jobs the node daemons hold (docs/SCALE-OUT.md, "Incidents
 * at scale"): the central daemon asks every node that holds ranks of the
 * job to dump them, writes the summaries the nodes send into one incident
 * directory, and fetches the full dumps of the culprit ranks.
 *
 * The registry's incidents (incident.c) are for ranks connected to this
 * daemon; these are for ranks behind node daemons. A job is one or the
 * other on a given daemon.
 */
#ifndef FR_DAEMON_CLUSTER_INCIDENT_H
#define FR_DAEMON_CLUSTER_INCIDENT_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

struct flightrecd;
struct incident_trigger;

/*
 * Opens an incident on `job`, unless one is collecting for it or the job
 * is over --max-incidents-per-hour (then counted and logged as for the
 * registry's jobs). `verdict` is the central watchdog's live verdict of
 * the job (borrowed; NULL when none). Under the daemon's lock, on the loop.
 * Returns 0, or -ENOSPC when too many incidents are open at once (counted,
 * rate-limited in the log: the caller tries again later), or another
 * error (logged, or -EBUSY / -EDQUOT as above).
 */
int cluster_incident_open(struct flightrecd *d, const char *job, const struct incident_trigger *t,
			   json_t *verdict);
/* Whether an incident of `job` is collecting now. */
bool cluster_incident_collecting(const char *job);

struct fr_msg_node_summary;
struct fr_msg_node_dump_done;
struct fr_msg_node_kernel_log;
struct conn;
struct handover;

/* What the nodes send back (server.c), on the loop under the lock; `node`
 * is the name of the node whose connection it came on. */
void cluster_incident_summary(struct flightrecd *d, const char *node,
			      const struct fr_msg_node_summary *m);
void cluster_incident_node_done(struct flightrecd *d, const char *node,
				const struct fr_msg_node_dump_done *m);
/* The node's kernel log of the incident, checked and kept (bounded by
 * FR_NODE_KERNEL_LOG_MAX) for the manifest's "kernel_log". */
void cluster_incident_node_klog(struct flightrecd *d, const char *node,
				const struct fr_msg_node_kernel_log *m);
/* Node `node`'s connection went: its ranks are lost to the incidents. */
void cluster_incident_node_lost(struct flightrecd *d, const char *node);
/* The same, with `why` as each rank's error. */
void cluster_incident_node_gone(struct flightrecd *d, const char *node, const char *why);
/*
 * Node `node` is back on a new connection `conn` before its old one was
 * seen to go: what it sent on the old one since is lost. An incident that
 * collects from it asks it again (the node answers every rank again);
 * fetches of full dumps it owed are lost.
 */
void cluster_incident_node_back(struct flightrecd *d, const char *node, struct conn *conn);
/* The deadlines, from the watchdog's tick; under the lock. */
void cluster_incident_tick(struct flightrecd *d, uint64_t now_mono);
/* The daemon is stopping: every incident closes now, marked incomplete. */
void cluster_incident_stop(struct flightrecd *d);
/* After the loop ended: frees the jobs' records (no incident is open). */
void cluster_incident_free_all(void);

/*
 * Rank `rank` of node-held `job` died (its node said so, state
 * FR_NODE_RANK_CRASHED, _EXITED or _KILLED): an incident opens at once
 * (reason crash, exited or killed), asking every node for its ranks'
 * evidence while they still wait, unless one is collecting already, the
 * rate limit refuses it, or this death (rank and pid) was reported before
 * (a node that reconnects says its dead ranks again).
 */
void cluster_incident_death(struct flightrecd *d, const char *job, uint32_t rank, uint32_t pid,
			    uint8_t state);
/*
 * POST /v1/jobs/<job>/dump for a job the nodes hold: opens an incident
 * with reason "manual". Returns the HTTP status (202 with `id` and
 * `requested` filled; 404, 409, 429 with *retry_after_s, 500) and says
 * why in `error` otherwise. Under the lock, on the loop.
 */
unsigned cluster_incident_manual(struct flightrecd *d, const char *job, char *id, size_t idcap,
				 uint32_t *requested, uint64_t *retry_after_s, char *error,
				 size_t errcap);
/* GET /v1/jobs/<job>/incidents of a job the nodes hold: a new array, or
 * NULL when the job has no incident here. Under the lock. */
json_t *cluster_incident_records_json(const struct flightrecd *d, const char *job);

/*
 * GET /v1/jobs/<job>/incidents/<id>/ranks/<rank>: the rank's full dump,
 * fetched from its node now (NODE_FETCH). Answers `h` with
 * handover_finish(): 200 with the bytes in *data and *len (the request owns
 * them once answered), 404 for an incident or rank that does not exist,
 * 503 when the rank's node is not connected or does not answer in time.
 * Under the lock, on the loop. `data` and `len` must outlive the answer.
 */
void cluster_incident_fetch_rank(struct flightrecd *d, struct handover *h, const char *job,
				 const char *incident, uint32_t rank, uint8_t **data, size_t *len);

#endif
