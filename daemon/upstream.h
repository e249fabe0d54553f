/*
 * A node daemon's connection to its central daemon (flightrecd
 * --upstream, docs/SCALE-OUT.md): one TCP connection, made again with
 * backoff when it fails, never blocking the loop. After the cluster token
 * is proven both ways (when --token-file is set) the node sends NODE_HELLO,
 * then for each job its full NODE_RANKS and its NODE_COMMS, then at most
 * twice a second what changed: NODE_RANKS deltas, NODE_COMMS of new
 * communicators and NODE_PROGRESS records (aggregate_progress()).
 */
#ifndef FR_DAEMON_UPSTREAM_H
#define FR_DAEMON_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct flightrecd;

/* The first wait before connecting again, and the longest. */
#define UPSTREAM_BACKOFF_MIN_MS 500u
#define UPSTREAM_BACKOFF_MAX_MS 30000u
/* Frames queued and not yet written past which a tick sends nothing, and
 * no incident's piece is queued: a central daemon that does not read must
 * not grow the node's memory. */
#define UPSTREAM_QUEUE_MAX (8u << 20)
/* How often what changed is sent: at most twice a second. */
#define UPSTREAM_PACE_MS 500u

/* The wait before the next attempt after one that waited `ms` (0: none yet). */
static inline uint64_t upstream_backoff_next(uint64_t ms)
{
	if (ms < UPSTREAM_BACKOFF_MIN_MS)
		return UPSTREAM_BACKOFF_MIN_MS;
	return ms >= UPSTREAM_BACKOFF_MAX_MS / 2 ? UPSTREAM_BACKOFF_MAX_MS : ms * 2;
}

/* Starts connecting when --upstream is set; else does nothing. Returns 0 or a libuv error. */
int upstream_start(struct flightrecd *d);
/* Closes the connection and its timer, so that the loop can end. */
void upstream_close(struct flightrecd *d);

/*
 * For upstream_incident.c, on the loop. The node's name as NODE_HELLO
 * says it: $FLIGHTREC_NODE_NAME when set (several node daemons on one
 * host, as the tests run them), else the host name.
 */
const char *upstream_node_name(void);
/* Whether the connection is up and past its handshake. */
bool upstream_ready(void);
/* The newest protocol version the connected central daemon said it
 * speaks: 7 or more when it takes NODE_KERNEL_LOG; 0 when it said none
 * (version 6 or older) or none is connected. */
unsigned upstream_central_version(void);
/* Bytes queued on the connection and not written yet. */
size_t upstream_queued(void);
/*
 * A frame of `size` bytes to encode into and queue with upstream_queue();
 * NULL when out of memory.
 */
uint8_t *upstream_frame(size_t size);
/* Queues frame `frame` (upstream_frame()'s) of `n` bytes (n < 0: the
 * encoder's error, returned); takes it. Returns 0 or an error. */
int upstream_queue(uint8_t *frame, int n);

#endif
