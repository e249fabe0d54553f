/* Incidents of jobs the node daemons hold (cluster_incident.h). */
#include "cluster_incident.h"

#include "incident.h"
#include "log.h"

/* First step: the central watchdog's decision is logged; the nodes are
 * not asked yet. */
void cluster_incident_open(struct flightrecd *d, const char *job, const struct incident_trigger *t,
			   json_t *verdict)
{
	(void)d;
	(void)verdict;
	daemon_log("job %s: %s on %s; asking the nodes to dump is not built yet", job, t->reason,
		   t->comm[0] ? t->comm : "no communicator");
}

bool cluster_incident_collecting(const char *job)
{
	(void)job;
	return false;
}
