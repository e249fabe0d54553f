/*
 * The one hand-over from the HTTP threads to the event loop, for the
 * requests that need the loop (a manual dump, a live look): the HTTP
 * thread suspends the request (libmicrohttpd's suspend/resume), queues it
 * and wakes the loop through one uv_async; it never waits for the loop, so
 * its thread goes on serving others (and /healthz). The loop takes each
 * request under the daemon's lock and answers it, at once or later
 * (handover_finish()), which resumes it; libmicrohttpd then calls the
 * handler again, which replies with what the loop left.
 */
#include "handover.h"
#include "daemon.h"
#include "clock.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <microhttpd.h>

/* How long a stopping daemon lets the requests it resumed be answered. */
#define HANDOVER_STOP_GRACE_S 1

/* One daemon per process, like the loop it belongs to. */
static struct {
	/*
	 * Guards `ready`, `reqs`, `queue` and the requests' `done`. Taken
	 * after the daemon's lock, never before it, and never held while
	 * resuming a request (libmicrohttpd takes its own lock then).
	 */
	pthread_mutex_t lock;
	pthread_cond_t gone;        /* a request was freed */
	bool ready;                 /* the loop takes requests */
	struct handover *reqs;      /* every request between suspension and completion */
	struct handover *queue;     /* handed over, not taken by the loop yet, oldest first */
	struct handover **queue_tail;
	uv_async_t async;
	bool async_open;
} hand = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.gone = PTHREAD_COND_INITIALIZER,
};

static void on_async(uv_async_t *a)
{
	struct flightrecd *d = a->data;
	struct handover *queue, *h, *next;
	uint64_t now = daemon_mono_ns();

	pthread_mutex_lock(&d->lock);
	pthread_mutex_lock(&hand.lock);
	queue = hand.queue;
	hand.queue = NULL;
	hand.queue_tail = &hand.queue;
	pthread_mutex_unlock(&hand.lock);
	for (h = queue; h; h = next) {
		next = h->next_queued;
		h->take(d, h, now);
	}
	pthread_mutex_unlock(&d->lock);
}

int handover_start(struct flightrecd *d)
{
	if (uv_async_init(d->loop, &hand.async, on_async))
		return -1;
	hand.async.data = d;
	/* Never what keeps the loop running; handover_stop() closes it. */
	uv_unref((uv_handle_t *)&hand.async);
	hand.async_open = true;
	pthread_mutex_lock(&hand.lock);
	hand.queue = NULL;
	hand.queue_tail = &hand.queue;
	hand.ready = true;
	pthread_mutex_unlock(&hand.lock);
	return 0;
}

int handover_submit(struct handover *h, struct MHD_Connection *mc)
{
	pthread_mutex_lock(&hand.lock);
	if (!hand.ready) {
		pthread_mutex_unlock(&hand.lock);
		return -ESHUTDOWN;
	}
	h->mc = mc;
	h->done = false;
	h->queued_mono = daemon_mono_ns();
	/* Suspended before the loop can see it: the loop may resume it at
	 * once, and resuming a connection not suspended is undefined. */
	MHD_suspend_connection(mc);
	h->prev = NULL;
	h->next = hand.reqs;
	if (hand.reqs)
		hand.reqs->prev = h;
	hand.reqs = h;
	h->next_queued = NULL;
	*hand.queue_tail = h;
	hand.queue_tail = &h->next_queued;
	/* Under the lock: handover_quiesce() may be about to close the handle. */
	uv_async_send(&hand.async);
	pthread_mutex_unlock(&hand.lock);
	return 0;
}

void handover_expire(uint64_t now_mono)
{
	struct handover *expired = NULL, *h, *next;
	unsigned n = 0;

	pthread_mutex_lock(&hand.lock);
	/* Oldest first: the first one young enough ends the search. */
	while ((h = hand.queue) && now_mono - h->queued_mono >= HANDOVER_TAKE_TIMEOUT_NS) {
		hand.queue = h->next_queued;
		h->done = true;
		h->status = MHD_HTTP_SERVICE_UNAVAILABLE;
		snprintf(h->error, sizeof(h->error), "the event loop did not answer in time");
		h->next_queued = expired;
		expired = h;
		n++;
	}
	if (!hand.queue)
		hand.queue_tail = &hand.queue;
	pthread_mutex_unlock(&hand.lock);
	/* Out of the queue and done: neither the loop nor handover_stop()
	 * resumes them again. */
	if (n)
		daemon_log("http: %u request%s waited %.0f s for the event loop, which did not take "
			   "them: answered 503", n, n == 1 ? "" : "s",
			   (double)HANDOVER_TAKE_TIMEOUT_NS / 1e9);
	for (h = expired; h; h = next) {
		next = h->next_queued;
		MHD_resume_connection(h->mc);
	}
}

void handover_finish(struct handover *h, unsigned status, const char *error)
{
	struct MHD_Connection *mc;

	pthread_mutex_lock(&hand.lock);
	h->done = true;
	h->status = status;
	snprintf(h->error, sizeof(h->error), "%s", error ? error : "");
	mc = h->mc;
	pthread_mutex_unlock(&hand.lock);
	MHD_resume_connection(mc);
}

static struct handover *handover_find_locked(void *req_cls)
{
	for (struct handover *h = hand.reqs; h; h = h->next)
		if (h == req_cls)
			return h;
	return NULL;
}

struct handover *handover_resumed(void *req_cls, bool *done)
{
	struct handover *h;

	pthread_mutex_lock(&hand.lock);
	h = handover_find_locked(req_cls);
	*done = h && h->done;
	pthread_mutex_unlock(&hand.lock);
	return h;
}

void handover_completed(void *req_cls)
{
	struct handover *h;

	pthread_mutex_lock(&hand.lock);
	h = handover_find_locked(req_cls);
	if (h) {
		if (h->prev)
			h->prev->next = h->next;
		else
			hand.reqs = h->next;
		if (h->next)
			h->next->prev = h->prev;
		pthread_cond_broadcast(&hand.gone);
	}
	pthread_mutex_unlock(&hand.lock);
	if (h)
		h->free(h);
}

void handover_quiesce(void)
{
	/* Under the lock, so that no HTTP thread is between its check of
	 * `ready` and its uv_async_send(). */
	pthread_mutex_lock(&hand.lock);
	hand.ready = false;
	pthread_mutex_unlock(&hand.lock);
}

void handover_stop(struct flightrecd *d)
{
	struct handover *resume = NULL, *h, *next;
	struct timespec deadline;
	int err = 0;

	/*
	 * The loop no longer runs: every request still waiting is answered
	 * now, and libmicrohttpd may only stop with none suspended.
	 */
	pthread_mutex_lock(&hand.lock);
	hand.ready = false;
	for (h = hand.reqs; h; h = h->next) {
		if (h->done)
			continue;
		h->done = true;
		h->status = MHD_HTTP_SERVICE_UNAVAILABLE;
		snprintf(h->error, sizeof(h->error), "the daemon is stopping");
		h->next_queued = resume;
		resume = h;
	}
	hand.queue = NULL;
	hand.queue_tail = &hand.queue;
	pthread_mutex_unlock(&hand.lock);
	for (h = resume; h; h = next) {
		next = h->next_queued;
		MHD_resume_connection(h->mc);
	}
	/* Answers being made (the loop resumed them last) go out, bounded. */
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += HANDOVER_STOP_GRACE_S;
	pthread_mutex_lock(&hand.lock);
	while (hand.reqs && err == 0)
		err = pthread_cond_timedwait(&hand.gone, &hand.lock, &deadline);
	pthread_mutex_unlock(&hand.lock);
	if (hand.async_open) {
		hand.async_open = false;
		if (!uv_is_closing((uv_handle_t *)&hand.async)) {
			uv_close((uv_handle_t *)&hand.async, NULL);
			uv_run(d->loop, UV_RUN_NOWAIT);
		}
	}
}
