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

#include <stdint.h>

struct flightrecd;

/* The first wait before connecting again, and the longest. */
#define UPSTREAM_BACKOFF_MIN_MS 500u
#define UPSTREAM_BACKOFF_MAX_MS 30000u
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

#endif
