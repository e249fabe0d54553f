/*
 * The daemon's work on libuv's thread pool (pool.c): what is heavy about
 * an incident (checking, writing and judging dumps and summaries, building
 * and syncing manifests) runs there, off the event loop.
 */
#ifndef FR_DAEMON_POOL_H
#define FR_DAEMON_POOL_H

/* How much nicer than the daemon a pool thread runs. */
#define POOL_NICE 5

/*
 * Called first by every work function: lowers the calling pool thread's
 * priority by POOL_NICE, once per thread. On a machine short of cores the
 * event loop (heartbeats, node messages) and the HTTP threads (/healthz)
 * then run before an incident's bulk work, which takes what is left:
 * /healthz answered in 123 ms while 8,192 nodes sent 65,536 summaries on
 * 2 cores, the pool at the daemon's priority. Lowering a thread's own
 * priority needs no privilege; a failure changes nothing else.
 */
void pool_background(void);

#endif
