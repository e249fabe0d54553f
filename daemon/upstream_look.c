/* A node daemon's side of live looks (upstream_look.h). */
#include "upstream_look.h"
#include "daemon.h"
#include "log.h"
#include "look.h"
#include "upstream.h"
#include "upstream_incident.h"

#include "../dumps/dump.h"
#include "../dumps/trace.h"
#include "../protocol/node_wire.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

/* Copies `src` into `dst` of `cap` bytes, cut to fit: reasons are longer here than the wire's. */
static void copy_cut(char *dst, size_t cap, const char *src)
{
	size_t n = strnlen(src, cap - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* What a NODE_LOOK_REQUEST asked, until look.c answers it. */
struct ul_req {
	struct flightrecd *d;
	uint64_t look;
	char job[FR_JOB_MAX + 1];
	uint8_t kind;               /* enum fr_node_look_kind */
	uint32_t rank;
	uint32_t last;
	size_t max_payload;
};

/*
 * A copy of `s` of at most FR_NODE_LOOK_PYSTR_MAX bytes, cut before a
 * UTF-8 character rather than inside one. NULL when out of memory.
 */
static char *pystr_cut(const char *s)
{
	size_t n = strnlen(s, FR_NODE_LOOK_PYSTR_MAX + 1);

	if (n > FR_NODE_LOOK_PYSTR_MAX)
		for (n = FR_NODE_LOOK_PYSTR_MAX; n && ((unsigned char)s[n] & 0xc0) == 0x80; n--)
			;
	return strndup(s, n);
}

/* The Python frames of a group told apart by them, into class `c`. 0 or -ENOMEM. */
static int class_pyframes(struct fr_node_look_class *c, const struct fr_stack_group *g)
{
	uint32_t n = (uint32_t)(g->npyframes < FR_NODE_LOOK_PYFRAMES_MAX ?
					g->npyframes :
					FR_NODE_LOOK_PYFRAMES_MAX);

	if (!g->pyframes || !n)
		return 0;
	c->py_truncated = g->thread->py_truncated || g->npyframes > n;
	c->pyframes = calloc(n, sizeof(*c->pyframes));
	if (!c->pyframes)
		return -ENOMEM;
	for (uint32_t j = 0; j < n; j++) {
		struct fr_node_look_pyframe *f = &c->pyframes[j];

		c->npyframes = j + 1;
		f->line = g->pyframes[j].line;
		if (!(f->function = pystr_cut(g->pyframes[j].function)) ||
		    !(f->file = pystr_cut(g->pyframes[j].file)))
			return -ENOMEM;
	}
	return 0;
}

/*
 * The classes of one group of stacks: the thread of its lowest rank and
 * its ranks, FR_NODE_RANGES_MAX runs a class (a group whose ranks are
 * scattered goes as several classes of the same stack, which the central
 * daemon merges again), with the Python frames it was told apart by, if
 * any. Returns how many classes it filled, at most `cap`.
 */
static uint32_t group_classes(const struct fr_stack_group *g, struct fr_node_look_class *out,
			      uint32_t cap)
{
	const struct fr_thread *th = g->thread;
	uint32_t n = 0;

	for (size_t i = 0; i < g->nranks && n < cap;) {
		struct fr_node_look_class *c = &out[n++];

		snprintf(c->thread, sizeof(c->thread), "%s", th->name);
		c->tid = th->tid;
		c->current = th->current;
		c->nframes = (uint32_t)(th->nframes < FR_NODE_LOOK_FRAMES_MAX ?
						th->nframes :
						FR_NODE_LOOK_FRAMES_MAX);
		c->frames = calloc(c->nframes ? c->nframes : 1, sizeof(*c->frames));
		if (!c->frames || class_pyframes(c, g)) {
			fr_node_look_class_free(c);
			return n - 1;
		}
		for (uint32_t j = 0; j < c->nframes; j++) {
			snprintf(c->frames[j].name, sizeof(c->frames[j].name), "%s",
				 th->frames[j].name ? th->frames[j].name : "");
			c->frames[j].offset = th->frames[j].offset;
			c->frames[j].ip = th->frames[j].ip;
		}
		c->start = (uint32_t)(g->frames - th->frames);
		if (c->start >= c->nframes)
			c->start = 0;
		c->nranges = 0;
		/* Only runs that fit: the next rank past them starts the next class. */
		for (; i < g->nranks; i++) {
			const struct fr_node_range *last = c->nranges ? &c->ranges[c->nranges - 1] : NULL;

			if (c->nranges == FR_NODE_RANGES_MAX &&
			    g->ranks[i] != last->first + last->count)
				break;
			fr_node_ranges_add(c->ranges, &c->nranges, FR_NODE_RANGES_MAX, g->ranks[i]);
		}
	}
	return n;
}

static void classes_free(struct fr_node_look_class *c, uint32_t n)
{
	for (uint32_t i = 0; c && i < n; i++)
		fr_node_look_class_free(&c[i]);
	free(c);
}

/* Encodes `m` into a frame of its own and queues it. */
static void send_stacks_frame(const struct fr_msg_node_look_stacks *m)
{
	size_t size = fr_wire_node_look_stacks_size(m);
	uint8_t *frame = malloc(size);
	int n = frame ? fr_wire_node_look_stacks_encode(m, frame, size) : -ENOMEM;

	if (n < 0) {
		free(frame);
		daemon_log("cannot send live look %" PRIu64 " of job %s upstream: %s", m->look,
			   m->job, strerror(-n));
		return;
	}
	upstream_send_frame(frame, (size_t)n);
}

/*
 * A job's stacks, as classes, in as many frames as they need: the counts,
 * missing ranks and reasons in the first, LAST on the last. A look that
 * failed as a whole (no rank of the job connected here, the daemon
 * stopping) is one frame with no class: its ranks are missing.
 */
static void send_job_stacks(const struct ul_req *q, const struct look_result *res)
{
	struct fr_msg_node_look_stacks *m = calloc(1, sizeof(*m));
	struct fr_node_look_class *classes = NULL;
	struct look_job_stacks js;
	uint32_t nclasses = 0;
	size_t budget;
	/* Python frames, and classes told apart by them, only for a central
	 * daemon that reads them: an older one gets the native classes. */
	bool python = upstream_central_version() >= 8;
	uint8_t flags = 0;

	if (!m)
		return;
	m->look = q->look;
	snprintf(m->job, sizeof(m->job), "%s", q->job);
	if (!res || look_job_stacks_build(res, python, &js)) {
		m->flags = FR_NODE_LOOK_LAST;
		send_stacks_frame(m);
		free(m);
		return;
	}
	m->asked = (uint32_t)js.asked;
	m->answered = (uint32_t)js.answered;
	m->nmissing = (uint32_t)js.nfailed;
	for (size_t i = 0; i < js.nfailed; i++)
		fr_node_ranges_add(m->missing, &m->nmranges, FR_NODE_RANGES_MAX, js.failed[i]);
	for (size_t i = 0; i < js.nwhy && m->nwhy < FR_NODE_LOOK_WHY_MAX; i++) {
		m->why[m->nwhy].rank = js.why[i].rank;
		copy_cut(m->why[m->nwhy].reason, sizeof(m->why[m->nwhy].reason), js.why[i].text);
		m->nwhy++;
	}
	m->threads_left_out = (uint32_t)js.threads_cut;
	m->frames_left_out = (uint32_t)js.frames_cut;
	classes = calloc(FR_NODE_LOOK_CLASSES_MAX, sizeof(*classes));
	for (size_t g = 0; classes && g < js.sg.ngroups; g++) {
		if (nclasses == FR_NODE_LOOK_CLASSES_MAX) {
			m->classes_left_out += (uint32_t)(js.sg.ngroups - g);
			break;
		}
		nclasses += group_classes(&js.sg.groups[g], classes + nclasses,
					  FR_NODE_LOOK_CLASSES_MAX - nclasses);
	}
	/* A job without Python sends what protocol 7 sends. */
	for (uint32_t i = 0; i < nclasses && !flags; i++)
		if (classes[i].npyframes || classes[i].py_truncated)
			flags = FR_NODE_LOOK_PYTHON;
	/* Frames of classes within the central daemon's frame size. */
	m->flags = flags;
	budget = q->max_payload > 2 * fr_node_look_stacks_base_size(m) ?
			 q->max_payload - fr_node_look_stacks_base_size(m) :
			 0;
	for (uint32_t i = 0; i <= nclasses;) {
		size_t used = 0;
		uint32_t j = i;

		while (j < nclasses && (j == i || used + fr_node_look_class_size(&classes[j]) <= budget))
			used += fr_node_look_class_size(&classes[j++]);
		m->classes = classes + i;
		m->nclasses = j - i;
		m->flags = flags | (j == nclasses ? FR_NODE_LOOK_LAST : 0);
		send_stacks_frame(m);
		if (j == nclasses)
			break;
		/* The counts went in the first frame. */
		m->asked = m->answered = m->nmissing = m->nmranges = m->nwhy = 0;
		m->classes_left_out = m->threads_left_out = m->frames_left_out = 0;
		i = j;
	}
	look_job_stacks_free(&js);
	classes_free(classes, nclasses);
	free(m);
}

/* One rank's look: its JSON body, or the status and reason it failed with. */
static void send_rank(const struct ul_req *q, unsigned status, const char *error,
		      const struct look_result *res)
{
	char id[FR_INCIDENT_MAX + 1];
	char why[FR_REASON_MAX + 1];
	char err[320];
	json_t *doc = NULL;
	char *body = NULL;
	size_t len = 0;
	bool oom = false;

	snprintf(id, sizeof(id), "look-%" PRIu64, q->look);
	if (res)
		doc = look_rank_json(res, q->kind == FR_NODE_LOOK_RANK_TRACE, q->rank, q->last,
				     &status, err, sizeof(err));
	else
		snprintf(err, sizeof(err), "%s", error ? error : "no answer");
	/* One line, as the node's own HTTP answer would be: relayed as it is. */
	if (doc && fr_json_text(doc, JSON_COMPACT, &body, &len))
		oom = true;
	if (body) {
		upstream_send_piece(id, q->job, q->rank, FR_NODE_SUMMARY_LOOK, (uint8_t *)body,
				    len, NULL);
		return;
	}
	if (oom)
		status = MHD_HTTP_INTERNAL_SERVER_ERROR;
	snprintf(why, sizeof(why), "%03u ", status);
	copy_cut(why + 4, sizeof(why) - 4, oom ? "out of memory" : err);
	upstream_send_piece(id, q->job, q->rank, FR_NODE_SUMMARY_LOOK, NULL, 0, why);
}

static void on_done(void *arg, unsigned status, const char *error, const struct look_result *res)
{
	struct ul_req *q = arg;

	/* A stopping node sends nothing more: the central daemon counts it lost. */
	if (q->d->stopping)
		;
	else if (q->kind == FR_NODE_LOOK_JOB_STACKS)
		send_job_stacks(q, res);
	else
		send_rank(q, status, error, res);
	free(q);
}

int upstream_look_frame(struct flightrecd *d, const uint8_t *p, size_t len)
{
	static const enum route_kind kinds[] = {
		[FR_NODE_LOOK_JOB_STACKS] = ROUTE_JOB_STACKS,
		[FR_NODE_LOOK_RANK_STACKS] = ROUTE_RANK_STACKS,
		[FR_NODE_LOOK_RANK_TRACE] = ROUTE_RANK_TRACE,
	};
	struct fr_msg_node_look_request m;
	struct ul_req *q;

	if (fr_wire_node_look_request_decode(p, len, &m))
		return -EPROTO;
	q = calloc(1, sizeof(*q));
	if (!q) {
		daemon_log("out of memory for live look %" PRIu64 " of job %s", m.look, m.job);
		return 0;
	}
	q->d = d;
	q->look = m.look;
	memcpy(q->job, m.job, sizeof(q->job));
	q->kind = m.kind;
	q->rank = m.rank;
	q->last = m.last;
	q->max_payload = d->cfg.max_frame_size < FR_WIRE_MAX_PAYLOAD ? d->cfg.max_frame_size :
								       FR_WIRE_MAX_PAYLOAD;
	pthread_mutex_lock(&d->lock);
	if (look_local(d, kinds[m.kind], m.job, m.rank, m.last, on_done, q)) {
		free(q);
		daemon_log("out of memory for live look %" PRIu64 " of job %s", m.look, m.job);
	}
	pthread_mutex_unlock(&d->lock);
	return 0;
}
