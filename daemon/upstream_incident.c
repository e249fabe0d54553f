/* A node daemon's side of incidents at scale (upstream_incident.h). */
#include "upstream_incident.h"
#include "daemon.h"
#include "clock.h"
#include "incident.h"
#include "log.h"
#include "pool.h"
#include "registry.h"
#include "upstream.h"

#include "../dumps/dump.h"
#include "../dumps/summary.h"
#include "../protocol/node_wire.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One incident the central daemon asked for, and the node's own of it. */
struct ui_incident {
	bool used;
	char id[FR_INCIDENT_MAX + 1];   /* the central daemon's */
	char job[FR_JOB_MAX + 1];
	char reason[FR_REASON_MAX + 1];
	char comm[FR_COMM_ID_MAX + 1];
	bool has_seq;
	uint64_t seq;
	char dir[PATH_MAX - 32];        /* the node's incident directory; "" when none */
	bool closed;                    /* the node's incident is over */
	/* NODE_DUMP_DONE sent, or nothing more to send: set too when the
	 * connection goes (`cut`), until the central daemon asks again. */
	bool done_sent;
	bool cut;
	uint8_t *failed_ranks;          /* a bit per rank that failed, to say so again */
	/* The node's kernel log object of its incident (hook_closed()), owned,
	 * sent before NODE_DUMP_DONE, again when asked again; NULL: none. */
	char *klog;
	size_t klog_len;
	uint32_t nfailed_bits;
	unsigned works;                 /* summaries being made */
	uint32_t answered, failed;
	uint64_t made;                  /* the order they came in */
	bool repeat_logged;             /* a second request for the job was logged */
};

/*
 * What waits to be sent: a NODE_SUMMARY's bytes (or failure), a
 * NODE_KERNEL_LOG's, a NODE_DUMP_DONE, or (type 0) a frame encoded
 * already (upstream_look.c's NODE_LOOK_STACKS), which goes as it is.
 */
struct ui_out {
	struct ui_out *next;
	unsigned type;
	char incident[FR_INCIDENT_MAX + 1];
	char job[FR_JOB_MAX + 1];
	uint32_t rank;
	uint8_t flags;
	char reason[FR_REASON_MAX + 1];
	uint32_t answered, failed;
	uint8_t *data;
	size_t len, sent;
};

/* A summary made, or a full dump read, on the thread pool. */
struct ui_work {
	uv_work_t req;
	struct ui_incident *inc;        /* NULL for a fetch */
	bool full;
	char incident[FR_INCIDENT_MAX + 1];
	char job[FR_JOB_MAX + 1];
	uint32_t rank;
	char path[PATH_MAX];
	char comm[FR_COMM_ID_MAX + 1];
	bool has_seq;
	uint64_t seq;
	uint64_t max_size;
	uint8_t *data;
	size_t len;
	char err[FR_REASON_MAX + 1];
};

/*
 * Full dumps read for NODE_FETCH and not sent yet, at most: past it a
 * fetch is answered FAILED at once, so that a central daemon asking for
 * many cannot make the node hold them all.
 */
#define UI_FETCH_BYTES_MAX (128ull << 20)
/* Fetches waiting for room under it, at most; more are answered FAILED. */
#define UI_FETCHES_WAITING_MAX 256

/*
 * Answers queued and not yet sent, at most (in number, and in bytes with
 * their data): past either, upstream.c reads no more of the central
 * daemon's requests until the queue is down to half. Each request is
 * small and its answer (a failure at least) is not, so a central daemon
 * that sends requests without reading the answers must not be followed.
 * Reading again hangs on the answers being written, never on a request,
 * so a central daemon that reads cannot be deadlocked by it.
 */
#define UI_OUT_MAX 4096u
#define UI_OUT_BYTES_MAX (16ull << 20)

/* A NODE_FETCH waiting for room. */
struct ui_fetch {
	char incident[FR_INCIDENT_MAX + 1];
	char job[FR_JOB_MAX + 1];
	uint32_t rank;
	char path[PATH_MAX];
};

static struct {
	struct flightrecd *d;
	/* Bytes of full dumps queued, and fetches being read (counted at
	 * --max-dump-size each until read). */
	uint64_t fetch_bytes;
	struct ui_fetch *waiting;       /* a ring of UI_FETCHES_WAITING_MAX */
	size_t waiting_first, nwaiting;
	struct ui_incident inc[UPSTREAM_INCIDENTS_KEPT];
	uint64_t made;
	struct ui_out *head, **tail;
	size_t nout;                    /* answers queued, and their bytes */
	uint64_t out_bytes;
} ui = { .tail = &ui.head };

static uint64_t out_bytes(const struct ui_out *o)
{
	return sizeof(*o) + o->len;
}

static struct ui_out *out_new(unsigned type, const char *incident, const char *job)
{
	struct ui_out *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->type = type;
	snprintf(o->incident, sizeof(o->incident), "%s", incident);
	snprintf(o->job, sizeof(o->job), "%s", job);
	return o;
}

static void out_push(struct ui_out *o)
{
	*ui.tail = o;
	ui.tail = &o->next;
	ui.nout++;
	ui.out_bytes += out_bytes(o);
	upstream_incident_pump();
}

static void fetch_resume(void);

static void out_free(struct ui_out *o)
{
	bool full = o->flags & FR_NODE_SUMMARY_FULL;

	ui.nout--;
	ui.out_bytes -= out_bytes(o);
	if (full)
		ui.fetch_bytes -= o->len;
	free(o->data);
	free(o);
	if (full)
		fetch_resume();
}

/* Queues rank `rank`'s summary or full dump (`data` taken), or its failure (`data` NULL). */
static void send_rank(const char *incident, const char *job, uint32_t rank, bool full,
		      uint8_t *data, size_t len, const char *why)
{
	upstream_send_piece(incident, job, rank, full ? FR_NODE_SUMMARY_FULL : 0, data, len, why);
}

void upstream_send_piece(const char *incident, const char *job, uint32_t rank, uint8_t flags,
			 uint8_t *data, size_t len, const char *why)
{
	struct ui_out *o = out_new(FR_MSG_NODE_SUMMARY, incident, job);
	bool full = flags & FR_NODE_SUMMARY_FULL;

	if (!o) {
		free(data);
		daemon_log("out of memory sending rank %" PRIu32 " of incident %s upstream", rank,
			   incident);
		return;
	}
	o->rank = rank;
	o->flags = flags;
	if (!data || !len) {
		free(data);
		o->flags |= FR_NODE_SUMMARY_FAILED;
		snprintf(o->reason, sizeof(o->reason), "%s", why && why[0] ? why : "no dump");
	} else {
		o->data = data;
		o->len = len;
		if (full)
			ui.fetch_bytes += len;
	}
	out_push(o);
}

void upstream_send_frame(uint8_t *frame, size_t len)
{
	struct ui_out *o = out_new(0, "", "");

	if (!o) {
		free(frame);
		daemon_log("out of memory queueing a frame upstream");
		return;
	}
	o->data = frame;
	o->len = len;
	out_push(o);
}

/* Queues the node's kernel log of `inc` (a copy), when it has one. */
static void send_klog(const struct ui_incident *inc)
{
	struct ui_out *o = inc->klog ? out_new(FR_MSG_NODE_KERNEL_LOG, inc->id, inc->job) : NULL;

	if (!o)
		return;
	o->data = malloc(inc->klog_len);
	if (!o->data) {
		free(o);
		return;
	}
	memcpy(o->data, inc->klog, inc->klog_len);
	o->len = inc->klog_len;
	out_push(o);
}

static void send_done(const char *incident, const char *job, uint32_t answered, uint32_t failed)
{
	struct ui_out *o = out_new(FR_MSG_NODE_DUMP_DONE, incident, job);

	if (!o)
		return;
	o->answered = answered;
	o->failed = failed;
	out_push(o);
}

/* Encodes and queues the next frame of `o`; true when `o` is all sent. */
static bool out_next_frame(struct ui_out *o, size_t max_payload)
{
	uint8_t *frame;
	size_t size;
	int n;

	if (o->type == 0) {
		frame = upstream_frame(o->len);
		if (frame)
			memcpy(frame, o->data, o->len);
		n = (int)o->len;
		o->sent = o->len;
	} else if (o->type == FR_MSG_NODE_DUMP_DONE) {
		struct fr_msg_node_dump_done m = { .answered = o->answered, .failed = o->failed };

		memcpy(m.incident, o->incident, sizeof(m.incident));
		memcpy(m.job, o->job, sizeof(m.job));
		size = fr_wire_node_dump_done_size(&m);
		frame = upstream_frame(size);
		n = frame ? fr_wire_node_dump_done_encode(&m, frame, size) : -ENOMEM;
	} else if (o->type == FR_MSG_NODE_KERNEL_LOG) {
		struct fr_msg_node_kernel_log m = { .len = (uint32_t)o->len, .data = o->data };

		memcpy(m.incident, o->incident, sizeof(m.incident));
		memcpy(m.job, o->job, sizeof(m.job));
		size = fr_wire_node_kernel_log_size(&m);
		/* A central daemon of version 6 or older would close the
		 * connection on it, and one of a --max-frame-size below it
		 * too: its manifest says this node sent none. */
		if (upstream_central_version() < 7 || size - FR_WIRE_HEADER_SIZE > max_payload)
			return true;
		frame = upstream_frame(size);
		n = frame ? fr_wire_node_kernel_log_encode(&m, frame, size) : -ENOMEM;
		o->sent = o->len;
	} else {
		struct fr_msg_node_summary m = { .rank = o->rank, .flags = o->flags };
		size_t chunk = FR_WIRE_DUMP_CHUNK;

		memcpy(m.incident, o->incident, sizeof(m.incident));
		memcpy(m.job, o->job, sizeof(m.job));
		memcpy(m.reason, o->reason, sizeof(m.reason));
		/* A piece and its header within the peer's --max-frame-size. */
		if (max_payload > 1024 && chunk > max_payload - 1024)
			chunk = max_payload - 1024;
		if (o->data) {
			m.offset = o->sent;
			m.total = o->len;
			m.len = (uint32_t)(o->len - o->sent < chunk ? o->len - o->sent : chunk);
			m.data = o->data + o->sent;
		}
		size = fr_wire_node_summary_size(&m);
		frame = upstream_frame(size);
		n = frame ? fr_wire_node_summary_encode(&m, frame, size) : -ENOMEM;
		o->sent += m.len;
	}
	if (!frame || upstream_queue(frame, n)) {
		daemon_log("cannot queue a piece of incident %s upstream: %s", o->incident,
			   n < 0 ? strerror(-n) : "the connection is gone");
		return true;
	}
	return o->type == FR_MSG_NODE_DUMP_DONE || o->sent >= o->len;
}

void upstream_incident_pump(void)
{
	size_t max_payload = ui.d ? ui.d->cfg.max_frame_size : FR_WIRE_MAX_PAYLOAD;

	while (ui.head && upstream_ready() && upstream_queued() < UPSTREAM_QUEUE_MAX) {
		struct ui_out *o = ui.head;

		if (!out_next_frame(o, max_payload))
			continue;
		ui.head = o->next;
		if (!ui.head)
			ui.tail = &ui.head;
		out_free(o);
	}
}

void upstream_incident_free(void)
{
	upstream_incident_disconnected();
	for (size_t i = 0; i < UPSTREAM_INCIDENTS_KEPT; i++) {
		free(ui.inc[i].failed_ranks);
		free(ui.inc[i].klog);
		memset(&ui.inc[i], 0, sizeof(ui.inc[i]));
	}
}

bool upstream_incident_backlogged(void)
{
	return ui.nout >= UI_OUT_MAX || ui.out_bytes >= UI_OUT_BYTES_MAX;
}

bool upstream_incident_drained(void)
{
	return ui.nout <= UI_OUT_MAX / 2 && ui.out_bytes <= UI_OUT_BYTES_MAX / 2;
}

void upstream_incident_disconnected(void)
{
	/* First, so that freeing the queue starts none of them. */
	ui.nwaiting = 0;
	free(ui.waiting);
	ui.waiting = NULL;
	while (ui.head) {
		struct ui_out *o = ui.head;

		ui.head = o->next;
		out_free(o);
	}
	ui.tail = &ui.head;
	/* What was queued is lost: nothing of the open incidents is sent on
	 * the new connection until the central daemon asks for it again
	 * (reanswer()); it may have counted this node lost meanwhile. */
	for (size_t i = 0; i < UPSTREAM_INCIDENTS_KEPT; i++) {
		if (ui.inc[i].used && !ui.inc[i].done_sent)
			ui.inc[i].cut = true;
		ui.inc[i].done_sent = true;
	}
}

/* Reads a whole file of at most `max` bytes; 0 or -errno. */
static int read_file(const char *path, uint64_t max, uint8_t **data, size_t *len)
{
	struct stat st;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	int err = 0;

	*data = NULL;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		err = -errno;
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		err = -ENOENT;
		goto out_close;
	}
	if ((uint64_t)st.st_size > max || st.st_size == 0) {
		err = st.st_size ? -EFBIG : -ENODATA;
		goto out_close;
	}
	*data = malloc((size_t)st.st_size);
	if (!*data) {
		err = -ENOMEM;
		goto out_close;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, *data + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : -EIO;
			free(*data);
			*data = NULL;
			goto out_close;
		}
		got += (size_t)n;
	}
	*len = got;
out_close:
	close(fd);
	return err;
}

/*
 * The summary of rank dump `t` (on disk as `path`), around operation
 * `seq` of `comm` when the central daemon named one, as the text sent
 * upstream. 0 or -errno. Any thread.
 */
static int summarize(const struct fr_trace *t, const char *comm, bool has_seq, uint64_t seq,
		     const char *path, uint8_t **out, size_t *len)
{
	struct fr_summary_focus focus = { .comm = comm, .seq = seq };
	struct fr_summary_opts opts = { .node = upstream_node_name(), .full_dump = path };
	struct fr_trace sum = { 0 };
	char *text = NULL;
	int err;

	*out = NULL;
	err = fr_trace_summarize(t, comm[0] && has_seq ? &focus : NULL, &opts, &sum);
	if (!err)
		err = fr_dump_serialize(&sum, &text, len);
	fr_trace_free(&sum);
	*out = (uint8_t *)text;
	return err;
}

static void work_run(uv_work_t *req)
{
	struct ui_work *w = req->data;
	struct fr_trace t = { 0 };
	int err;

	pool_background();

	if (w->full) {
		err = read_file(w->path, w->max_size, &w->data, &w->len);
		if (err)
			snprintf(w->err, sizeof(w->err), "rank %" PRIu32 ": cannot read its full dump: %s",
				 w->rank, err == -ENOENT ? "none on this node" : strerror(-err));
		return;
	}
	if (fr_dump_read_file(w->path, &t, w->err, sizeof(w->err)))
		return;
	err = summarize(&t, w->comm, w->has_seq, w->seq, w->path, &w->data, &w->len);
	if (err)
		snprintf(w->err, sizeof(w->err), "rank %" PRIu32 ": cannot summarize its dump: %s",
			 w->rank, strerror(-err));
	fr_trace_free(&t);
}

static void incident_maybe_done(struct ui_incident *inc)
{
	if (!inc->closed || inc->works || inc->done_sent)
		return;
	inc->done_sent = true;
	send_klog(inc);
	send_done(inc->id, inc->job, inc->answered, inc->failed);
	daemon_log("incident %s of job %s (central daemon's): %" PRIu32 " ranks sent upstream, %" PRIu32
		   " without a dump", inc->id, inc->job, inc->answered, inc->failed);
}

static void work_after(uv_work_t *req, int status)
{
	struct ui_work *w = req->data;
	struct ui_incident *inc = w->inc;

	(void)status;
	if (w->full)
		ui.fetch_bytes -= w->max_size;
	/* Counted again below at its real size, before the next may start. */
	if (inc) {
		inc->works--;
		if (w->data)
			inc->answered++;
		else
			inc->failed++;
	}
	if (!inc || !inc->done_sent)
		send_rank(w->incident, w->job, w->rank, w->full, w->data, w->len, w->err);
	else
		free(w->data);
	if (inc)
		incident_maybe_done(inc);
	free(w);
}

/* Makes rank `rank`'s summary (`inc`) or reads its full dump (fetch) off the loop. */
static void work_queue(struct flightrecd *d, struct ui_incident *inc, const char *incident,
		       const char *job, uint32_t rank, const char *path, bool full)
{
	struct ui_work *w = calloc(1, sizeof(*w));

	if (!w) {
		if (inc)
			inc->failed++;
		send_rank(incident, job, rank, full, NULL, 0, "out of memory on the node");
		return;
	}
	w->req.data = w;
	w->inc = inc;
	w->full = full;
	snprintf(w->incident, sizeof(w->incident), "%s", incident);
	snprintf(w->job, sizeof(w->job), "%s", job);
	w->rank = rank;
	snprintf(w->path, sizeof(w->path), "%s", path);
	if (inc) {
		memcpy(w->comm, inc->comm, sizeof(w->comm));
		w->has_seq = inc->has_seq;
		w->seq = inc->seq;
		inc->works++;
	}
	w->max_size = d->cfg.max_dump_size;
	if (full)
		ui.fetch_bytes += w->max_size;
	if (uv_queue_work(d->loop, &w->req, work_run, work_after)) {
		work_run(&w->req);
		work_after(&w->req, 0);
	}
}

/* incident.c's hooks of the node's incident. */

/* On the thread pool: the summary of a dump as incident.c parsed it to check it. */
static int hook_digest(const void *arg, const struct fr_trace *t, const char *path, uint8_t **out,
		       size_t *len)
{
	const struct ui_incident *inc = arg;

	return summarize(t, inc->comm, inc->has_seq, inc->seq, path, out, len);
}

static void hook_written(void *arg, uint32_t rank, const char *path, uint8_t *summary, size_t len,
			 int err)
{
	struct ui_incident *inc = arg;
	char why[FR_REASON_MAX + 1];

	if (!summary) {
		snprintf(why, sizeof(why), "rank %" PRIu32 ": cannot summarize its dump: %s", rank,
			 strerror(-err));
		inc->failed++;
	} else {
		inc->answered++;
	}
	if (!inc->done_sent)
		send_rank(inc->id, inc->job, rank, false, summary, len, why);
	else
		free(summary);
	(void)path;
}

/* Remembers that `rank` failed, so that reanswer() can say so again. */
static void failed_mark(struct ui_incident *inc, uint32_t rank)
{
	if (rank >= inc->nfailed_bits) {
		uint32_t bits = (rank / 64 + 1) * 64;
		uint8_t *b = realloc(inc->failed_ranks, bits / 8);

		if (!b)
			return;
		memset(b + inc->nfailed_bits / 8, 0, (bits - inc->nfailed_bits) / 8);
		inc->failed_ranks = b;
		inc->nfailed_bits = bits;
	}
	inc->failed_ranks[rank / 8] |= (uint8_t)(1u << (rank % 8));
}

static bool failed_marked(const struct ui_incident *inc, uint32_t rank)
{
	return rank < inc->nfailed_bits && (inc->failed_ranks[rank / 8] & (1u << (rank % 8)));
}

/*
 * A rank without a dump. One that died is summarised from the node's
 * live view of it (`live`: its crash or exit, what it had in flight), so
 * that the central daemon's verdict can say how it died; its full dump
 * there is none.
 */
static void hook_failed(void *arg, uint32_t rank, const char *why, const struct fr_trace *live)
{
	struct ui_incident *inc = arg;
	uint8_t *summary = NULL;
	size_t len = 0;

	if (live && (live->crash || live->has_exit || live->has_nccl_error) &&
	    !summarize(live, inc->comm, inc->has_seq, inc->seq, NULL, &summary, &len)) {
		inc->answered++;
		if (!inc->done_sent)
			send_rank(inc->id, inc->job, rank, false, summary, len, NULL);
		else
			free(summary);
		return;
	}
	free(summary);
	failed_mark(inc, rank);
	inc->failed++;
	if (!inc->done_sent)
		send_rank(inc->id, inc->job, rank, false, NULL, 0, why);
}

static void hook_closed(void *arg, const char *klog, size_t klog_len)
{
	struct ui_incident *inc = arg;

	inc->closed = true;
	free(inc->klog);
	inc->klog = klog_len ? malloc(klog_len) : NULL;
	inc->klog_len = inc->klog ? klog_len : 0;
	if (inc->klog)
		memcpy(inc->klog, klog, klog_len);
	incident_maybe_done(inc);
}

/* Every rank the node holds of `job` fails with `why`, then the node is done. */
static void fail_all(const char *incident, const struct job *job, const char *why)
{
	uint32_t failed = 0;

	for (uint32_t i = 0; i < job->nslots; i++) {
		if (!job->ranks[i])
			continue;
		send_rank(incident, job->id, i, false, NULL, 0, why);
		failed++;
	}
	send_done(incident, job->id, 0, failed);
}

/* A slot for a new incident: a free one, else the oldest that is over. */
static struct ui_incident *slot_take(void)
{
	struct ui_incident *best = NULL;

	for (size_t i = 0; i < UPSTREAM_INCIDENTS_KEPT; i++) {
		struct ui_incident *s = &ui.inc[i];

		if (!s->used)
			return s;
		if (s->closed && !s->works && (!best || s->made < best->made))
			best = s;
	}
	return best;
}

static struct ui_incident *slot_find(const char *incident, const char *job)
{
	for (size_t i = 0; i < UPSTREAM_INCIDENTS_KEPT; i++)
		if (ui.inc[i].used && strcmp(ui.inc[i].id, incident) == 0 &&
		    strcmp(ui.inc[i].job, job) == 0)
			return &ui.inc[i];
	return NULL;
}

/* The incident of `job` the node is still answering, or NULL. */
static struct ui_incident *slot_answering(const char *job)
{
	for (size_t i = 0; i < UPSTREAM_INCIDENTS_KEPT; i++)
		if (ui.inc[i].used && !ui.inc[i].done_sent && strcmp(ui.inc[i].job, job) == 0)
			return &ui.inc[i];
	return NULL;
}

/*
 * The central daemon asks again for an incident whose answers the
 * connection took with it (it saw this node reconnect mid-incident):
 * every rank's summary again, from the full dumps in the node's incident
 * directory, and the failures the node remembers; ranks still to come
 * follow as they are written. The central daemon takes a summary again
 * from its start and ignores one it has already.
 */
static void reanswer(struct flightrecd *d, struct ui_incident *inc)
{
	DIR *dir = inc->dir[0] ? opendir(inc->dir) : NULL;
	struct dirent *e;
	char why[FR_REASON_MAX + 1];

	inc->cut = false;
	inc->done_sent = false;
	inc->answered = inc->failed = 0;
	daemon_log("incident %s of job %s asked for again by the central daemon (the connection went "
		   "while it was answered): sending its summaries again", inc->id, inc->job);
	while (dir && (e = readdir(dir))) {
		char path[PATH_MAX];
		unsigned long rank;
		char *end;

		if (strncmp(e->d_name, "rank-", 5) != 0)
			continue;
		rank = strtoul(e->d_name + 5, &end, 10);
		if (end == e->d_name + 5 || strcmp(end, ".json") != 0 || rank >= FR_RANK_UNKNOWN)
			continue;
		snprintf(path, sizeof(path), "%s/rank-%lu.json", inc->dir, rank);
		work_queue(d, inc, inc->id, inc->job, (uint32_t)rank, path, false);
	}
	if (dir)
		closedir(dir);
	for (uint32_t r = 0; r < inc->nfailed_bits; r++) {
		if (!failed_marked(inc, r))
			continue;
		snprintf(why, sizeof(why), "rank %" PRIu32 ": no dump on node %s (why was lost with "
			 "its connection)", r, upstream_node_name());
		inc->failed++;
		send_rank(inc->id, inc->job, r, false, NULL, 0, why);
	}
	incident_maybe_done(inc);
}

/* NODE_DUMP_REQUEST; the caller holds the lock. */
static void dump_request(struct flightrecd *d, const struct fr_msg_node_dump_request *m)
{
	struct job *job = registry_job_find(d, m->job);
	struct ui_incident *inc;
	struct incident_trigger t = { .rank = -1 };
	struct incident_hooks hooks = {
		.digest = hook_digest,
		.written = hook_written,
		.failed = hook_failed,
		.closed = hook_closed,
	};
	uint64_t retry_after = 0;
	char why[FR_REASON_MAX + 1];
	int err;

	inc = slot_find(m->incident, m->job);
	if (inc) {
		if (inc->cut)
			reanswer(d, inc);
		return;
	}
	if (!job) {
		/* The node holds none of it (any more). */
		send_done(m->incident, m->job, 0, 0);
		return;
	}
	/* The central daemon collects one incident of a job at a time: a
	 * second request while the node still answers the first is a
	 * confused (or hostile) peer, and failing each of its ranks again
	 * would queue an answer per rank per request. */
	inc = slot_answering(m->job);
	if (inc) {
		if (!inc->repeat_logged)
			daemon_log("incident %s of job %s asked for while the node still answers the "
				   "central daemon's %s: ignored (and any more like it)",
				   m->incident, m->job, inc->id);
		inc->repeat_logged = true;
		return;
	}
	if (job->active) {
		snprintf(why, sizeof(why), "node %s: an incident of the job is being collected there",
			 upstream_node_name());
		fail_all(m->incident, job, why);
		return;
	}
	if (!incident_rate_allows(d, job, daemon_mono_ns(), &retry_after)) {
		incident_suppress(d, job, m->reason, retry_after);
		snprintf(why, sizeof(why), "node %s: over --max-incidents-per-hour for %" PRIu64 " s",
			 upstream_node_name(), retry_after);
		fail_all(m->incident, job, why);
		return;
	}
	inc = slot_take();
	if (!inc) {
		snprintf(why, sizeof(why), "node %s: %u incidents are being sent upstream already",
			 upstream_node_name(), UPSTREAM_INCIDENTS_KEPT);
		fail_all(m->incident, job, why);
		return;
	}
	free(inc->failed_ranks);
	free(inc->klog);
	memset(inc, 0, sizeof(*inc));
	inc->used = true;
	inc->made = ++ui.made;
	memcpy(inc->id, m->incident, sizeof(inc->id));
	memcpy(inc->job, m->job, sizeof(inc->job));
	memcpy(inc->reason, m->reason[0] ? m->reason : "central", sizeof(inc->reason));
	memcpy(inc->comm, m->comm, sizeof(inc->comm));
	inc->has_seq = m->has_seq;
	inc->seq = m->seq;
	t.reason = inc->reason;
	memcpy(t.comm, m->comm, sizeof(t.comm));
	t.has_seq = m->has_seq;
	t.seq = m->seq;
	hooks.arg = inc;
	/* Before it opens: its dir is known once it is, and hooks may run. */
	err = incident_open_asked(d, job, &t, &hooks);
	if (err) {
		inc->used = false;
		snprintf(why, sizeof(why), "node %s: the incident could not be opened (%s)",
			 upstream_node_name(), err == -ENOMEM ? "out of memory" : "see its log");
		fail_all(m->incident, job, why);
		return;
	}
	snprintf(inc->dir, sizeof(inc->dir), "%s/%s/%s", d->cfg.dump_dir, job->id,
		 job->records[job->nrecords - 1].id);
	daemon_log("incident %s of job %s asked for by the central daemon (its %s): dumps in %s",
		   job->records[job->nrecords - 1].id, job->id, m->incident, inc->dir);
}

/* Whether a full dump of up to --max-dump-size fits under UI_FETCH_BYTES_MAX now. */
static bool fetch_room(const struct flightrecd *d)
{
	return ui.fetch_bytes + d->cfg.max_dump_size <= UI_FETCH_BYTES_MAX || !ui.fetch_bytes;
}

/* Starts the fetches that waited, while there is room. */
static void fetch_resume(void)
{
	while (ui.nwaiting && ui.d && fetch_room(ui.d)) {
		struct ui_fetch *f = &ui.waiting[ui.waiting_first];

		ui.waiting_first = (ui.waiting_first + 1) % UI_FETCHES_WAITING_MAX;
		ui.nwaiting--;
		work_queue(ui.d, NULL, f->incident, f->job, f->rank, f->path, true);
	}
}

/* NODE_FETCH: only a full dump of an incident this node made for the central daemon. */
static void fetch(struct flightrecd *d, const struct fr_msg_node_fetch *m)
{
	struct ui_incident *inc = slot_find(m->incident, m->job);
	struct ui_fetch *f;
	char path[PATH_MAX];

	if (!inc || !inc->dir[0]) {
		send_rank(m->incident, m->job, m->rank, true, NULL, 0,
			  "no such incident on this node (or forgotten: it keeps the newest 16)");
		return;
	}
	/* The rank is a number and the directory the node's own: no path
	 * the central daemon sends is followed. */
	snprintf(path, sizeof(path), "%s/rank-%" PRIu32 ".json", inc->dir, m->rank);
	if (fetch_room(d) && !ui.nwaiting) {
		work_queue(d, NULL, m->incident, m->job, m->rank, path, true);
		return;
	}
	/* Full dumps being read or sent already hold their share of memory. */
	if (!ui.waiting)
		ui.waiting = calloc(UI_FETCHES_WAITING_MAX, sizeof(*ui.waiting));
	if (!ui.waiting || ui.nwaiting == UI_FETCHES_WAITING_MAX) {
		send_rank(m->incident, m->job, m->rank, true, NULL, 0,
			  "the node has too many full dumps to send: ask again later");
		return;
	}
	f = &ui.waiting[(ui.waiting_first + ui.nwaiting++) % UI_FETCHES_WAITING_MAX];
	memcpy(f->incident, m->incident, sizeof(f->incident));
	memcpy(f->job, m->job, sizeof(f->job));
	f->rank = m->rank;
	memcpy(f->path, path, sizeof(f->path));
}

int upstream_incident_frame(struct flightrecd *d, unsigned type, const uint8_t *p, size_t len)
{
	ui.d = d;
	if (type == FR_MSG_NODE_DUMP_REQUEST) {
		struct fr_msg_node_dump_request m;

		if (fr_wire_node_dump_request_decode(p, len, &m))
			return -EPROTO;
		pthread_mutex_lock(&d->lock);
		dump_request(d, &m);
		pthread_mutex_unlock(&d->lock);
		return 0;
	}
	if (type == FR_MSG_NODE_FETCH) {
		struct fr_msg_node_fetch m;

		if (fr_wire_node_fetch_decode(p, len, &m))
			return -EPROTO;
		fetch(d, &m);
		return 0;
	}
	return -EPROTO;
}
