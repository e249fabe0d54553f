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
 */
void cluster_incident_open(struct flightrecd *d, const char *job, const struct incident_trigger *t,
			   json_t *verdict);
/* Whether an incident of `job` is collecting now. */
bool cluster_incident_collecting(const char *job);

#endif
