/*
 * The central watchdog of jobs the node daemons hold (docs/SCALE-OUT.md):
 * every DAEMON_WATCHDOG_MS, watchdog.c's timer has it merge each such
 * job's communicators over the nodes (aggregate_merge()), decide
 * (node_verdict.h) and open an incident (cluster_incident_open()) once per
 * stuck state: an operation held longer than --timeout, a node lost longer
 * than --heartbeat-timeout. The live views of those jobs (GET /v1/jobs,
 * /v1/jobs/<job>, /analysis) come from the same merge and decision.
 *
 * A job the registry holds (agents connected here) is watchdog.c's, never
 * this one's. Everything is called under the daemon's lock; the cost of a
 * job is linear in its nodes and communicators, whatever its ranks.
 */
#ifndef FR_DAEMON_NODE_WATCHDOG_H
#define FR_DAEMON_NODE_WATCHDOG_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct flightrecd;

/* One pass over the jobs only nodes hold; on the loop. */
void node_watchdog_check(struct flightrecd *d, uint64_t now_mono_ns);
/*
 * The live verdict of `job`, which only nodes hold, as JSON
 * (docs/HTTP-API.md, "Jobs the node daemons hold"); NULL when no node
 * holds ranks of it, the registry holds it, or out of memory.
 */
json_t *node_watchdog_verdict(struct flightrecd *d, const char *job);
/*
 * GET /v1/jobs: for each entry of `jobs` from index `from` on (as
 * nodes_jobs_json() added them), its "verdict" and "stuck" from the same
 * decision.
 */
void node_watchdog_jobs_json(struct flightrecd *d, json_t *jobs, size_t from);
/* Forgets what was reported (the daemon stops). */
void node_watchdog_free(void);

#endif
