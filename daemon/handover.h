/*
 * The one hand-over of an HTTP request to the event loop (a manual dump, a
 * live look). The HTTP thread suspends the request and queues it; one
 * uv_async wakes the loop, which calls its `take` under the daemon's lock;
 * whoever answers it later, or at once, calls handover_finish(), which
 * resumes it, and libmicrohttpd calls the handler again to reply. No HTTP
 * thread waits on the loop. A request embeds struct handover as its first
 * member; `take` and `free` are its owner's.
 */
#ifndef FR_DAEMON_HANDOVER_H
#define FR_DAEMON_HANDOVER_H

#include <stdbool.h>
#include <stdint.h>

struct flightrecd;
struct MHD_Connection;

struct handover {
	struct handover *prev, *next;   /* every request between suspension and completion */
	struct handover *next_queued;   /* the queue to the loop */
	struct MHD_Connection *mc;
	/* On the loop, under the daemon's lock: answers the request, now or
	 * later, with handover_finish(). */
	void (*take)(struct flightrecd *d, struct handover *h, uint64_t now_mono);
	/* Frees the request once libmicrohttpd is done with it (any thread). */
	void (*free)(struct handover *h);
	uint64_t queued_mono;           /* when it was handed over */
	/* The answer: set before the request is resumed. */
	bool done;
	unsigned status;
	char error[192];
};
/* Starts the hand-over (its uv_async); before the HTTP threads exist. */
int handover_start(struct flightrecd *d);
/*
 * Suspends the request of `mc` and queues `h` for the loop; the caller
 * sets *req_cls to `h` and returns MHD_YES. -ESHUTDOWN when the loop takes
 * no more requests (the daemon is stopping): nothing was done.
 */
int handover_submit(struct handover *h, struct MHD_Connection *mc);
/*
 * A request the loop has not taken HANDOVER_TAKE_TIMEOUT_NS after it was
 * handed over is answered 503 "the event loop did not answer in time":
 * the loop is stalled, and no request waits on it for ever.
 * handover_expire() answers those at `now_mono`; http_conns.c's sweeper
 * calls it. Any thread but the loop.
 */
#define HANDOVER_TAKE_TIMEOUT_NS (5ull * 1000000000ull)
void handover_expire(uint64_t now_mono);
/* Answers `h` (error: NULL for none) and resumes its request. Any thread. */
void handover_finish(struct handover *h, unsigned status, const char *error);
/*
 * The handler's call for a request it may have handed over: the request
 * if `req_cls` is one (`done`: it was answered), else NULL.
 */
struct handover *handover_resumed(void *req_cls, bool *done);
/* libmicrohttpd's completion callback's part: frees `req_cls` if it is a request handed over. */
void handover_completed(void *req_cls);
/* http_quiesce()'s part: no request is handed to the loop any more. */
void handover_quiesce(void);
/*
 * After the loop stopped, before MHD_stop_daemon(): answers every request
 * still waiting with 503 "the daemon is stopping", lets the answers go out
 * (bounded), and closes the uv_async.
 */
void handover_stop(struct flightrecd *d);

#endif
