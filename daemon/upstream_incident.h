/*
 * A node daemon's side of incidents at scale (docs/SCALE-OUT.md,
 * "Incidents at scale"; protocol/PROTOCOL.md, NODE_DUMP_REQUEST to
 * NODE_FETCH). On the central daemon's NODE_DUMP_REQUEST the node opens
 * an incident of its own on the job (incident.c: its ranks dump, their
 * full dumps stay in the node's --dump-dir), sends a summary of each
 * rank's dump upstream as it is written (NODE_SUMMARY pieces), or why
 * there is none, then NODE_DUMP_DONE; on NODE_FETCH it sends a rank's
 * full dump of an incident it made so. Pieces wait in a queue of their
 * own and go while the connection holds less than UPSTREAM_QUEUE_MAX
 * bytes unwritten, so the loop never blocks and the node's other frames
 * keep flowing.
 *
 * All of it runs on the loop; upstream.c calls it.
 */
#ifndef FR_DAEMON_UPSTREAM_INCIDENT_H
#define FR_DAEMON_UPSTREAM_INCIDENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct flightrecd;

/* Incidents the node remembers for NODE_FETCH: the newest ones. */
#define UPSTREAM_INCIDENTS_KEPT 16

/*
 * NODE_DUMP_REQUEST or NODE_FETCH (`type`) from the central daemon.
 * Returns 0, or -EPROTO for a payload it cannot read (the connection is
 * then dropped).
 */
int upstream_incident_frame(struct flightrecd *d, unsigned type, const uint8_t *p, size_t len);
/*
 * What goes up in the same paced queue, in order: a NODE_SUMMARY's bytes
 * (`data`, taken, or NULL with `why` for a failure) with `flags`, and a
 * frame encoded already (taken). upstream_look.c sends its answers so.
 */
void upstream_send_piece(const char *incident, const char *job, uint32_t rank, uint8_t flags,
			 uint8_t *data, size_t len, const char *why);
void upstream_send_frame(uint8_t *frame, size_t len);
/* Queues what waits while the connection has room. */
void upstream_incident_pump(void);
/*
 * Whether the answers waiting to be sent are over their bound: upstream.c
 * then reads no more requests; and whether they are down to half of it,
 * when it reads again.
 */
bool upstream_incident_backlogged(void);
bool upstream_incident_drained(void);
/*
 * The connection went: what waits to be sent is dropped, and nothing more
 * of the incidents being answered is sent until the central daemon asks
 * for one again (NODE_DUMP_REQUEST of the same incident: then every
 * rank's answer goes again).
 */
void upstream_incident_disconnected(void);
/* The daemon stops: all of it is let go. */
void upstream_incident_free(void);

#endif
