/*
 * A node daemon's side of live looks at the jobs it holds (docs/HTTP-API.md,
 * "Jobs the node daemons hold"; protocol/PROTOCOL.md, NODE_LOOK_REQUEST).
 * On the central daemon's NODE_LOOK_REQUEST the node runs the look on its
 * own ranks with look.c (look_local(): shared with its own HTTP viewers,
 * bounded by the same deadline) and answers: for a job's stacks, the
 * classes of stacks grouped as GET /v1/jobs/<job>/stacks groups them, each
 * with its ranks as ranges (NODE_LOOK_STACKS), so that what goes up grows
 * with the distinct stacks, not with the ranks; for one rank, the JSON body
 * its own GET .../stacks or .../trace would answer (NODE_SUMMARY with
 * LOOK). Both go in upstream_incident.c's paced queue.
 *
 * All of it runs on the loop; upstream.c calls it.
 */
#ifndef FR_DAEMON_UPSTREAM_LOOK_H
#define FR_DAEMON_UPSTREAM_LOOK_H

#include <stddef.h>
#include <stdint.h>

struct flightrecd;

/*
 * NODE_LOOK_REQUEST from the central daemon. Returns 0, or -EPROTO for a
 * payload it cannot read (the connection is then dropped).
 */
int upstream_look_frame(struct flightrecd *d, const uint8_t *p, size_t len);

#endif
