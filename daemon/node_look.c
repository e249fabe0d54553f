/*
 * Live looks at jobs the node daemons hold (node_look.h).
 *
 * A look at a job's stacks asks each connected node that holds ranks of
 * the job once, keeps the frames of classes each sends (charged to the
 * memory budget as live looks' dumps are), and answers when every node
 * asked has sent its last frame, went away, or NODE_LOOK_DEADLINE_NS
 * passed. The answer is built on the loop: merging the classes costs a
 * sort of the classes and of their ranges, never a pass over the ranks,
 * and the HTTP thread only sends the body. A look of one rank asks the
 * rank's node and relays its body.
 *
 * Unlike look.c there is no sharing between viewers here: each node
 * shares the looks it runs among the requests that reach it (its own
 * HTTP viewers and the central daemon's), so that many viewers still cost
 * the ranks one capture every LOOK_FRESH_NS.
 */
#include "node_look.h"
#include "daemon.h"
#include "budget.h"
#include "clock.h"
#include "handover.h"
#include "http.h"
#include "look_merge.h"
#include "nodes.h"
#include "registry.h"
#include "route.h"
#include "server.h"
#include "upload.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "../dumps/dump.h"
#include "../dumps/trace.h"
#include "../protocol/node_wire.h"

#define NL_TICK_MS 100

/* A request handed to the loop. */
struct nl_req {
	struct handover h;          /* h.status 200: `body` holds the answer */
	enum route_kind kind;
	char job[FR_JOB_MAX + 1];
	uint32_t rank;
	uint32_t last;
	char *body;
	size_t len;
};

enum nl_state { NL_WAITING, NL_DONE, NL_LOST, NL_LATE, NL_REFUSED };

/* One node a job's look asked, or found lost. */
struct nl_node {
	char name[FR_HOST_MAX + 1];
	struct conn *conn;          /* while waiting */
	enum nl_state state;
	char why[FR_REASON_MAX + 1];  /* NL_REFUSED */
	size_t nmsgs, cap;
	struct fr_msg_node_look_stacks *msgs;  /* its frames, decoded */
	uint32_t nclasses;
	uint64_t charged;
};

struct nl_look {
	struct nl_look *next;
	uint64_t id;
	struct nl_req *req;
	char job[FR_JOB_MAX + 1];
	uint32_t world;
	uint64_t deadline_mono;
	/* A job's stacks. */
	size_t nnodes, pending;
	struct nl_node *nodes;
	/* One rank: its node's connection and the body arriving from it. */
	struct conn *conn;
	char node[FR_HOST_MAX + 1];
	struct upload up;
};

static struct {
	uv_timer_t timer;
	bool open, ticking;
	struct nl_look *looks;
	size_t nlooks;
	uint64_t seq;
} nl;

static void timer_update(void);

/* ---- the answers ---- */

static bool nl_charge(void *ctx, struct upload *up, uint64_t grow, uint32_t len, char *why,
		      size_t cap)
{
	(void)ctx;
	(void)grow;
	if (!budget_charge(BUDGET_LIVE, len)) {
		snprintf(why, cap, "over the daemon's memory budget (--max-memory); try again later");
		return false;
	}
	up->charged += len;
	return true;
}

static void look_free(struct nl_look *p)
{
	for (size_t i = 0; i < p->nnodes; i++) {
		struct nl_node *n = &p->nodes[i];

		for (size_t k = 0; k < n->nmsgs; k++)
			fr_wire_node_look_stacks_free(&n->msgs[k]);
		free(n->msgs);
		budget_release(BUDGET_LIVE, n->charged);
	}
	free(p->nodes);
	budget_release(BUDGET_LIVE, p->up.charged);
	upload_reset(&p->up);
	free(p);
}

/* Ends the look: answers its request, and forgets it. */
static void look_end(struct nl_look *p, unsigned status, const char *error, char *body,
		     size_t len)
{
	struct nl_look **pp;

	for (pp = &nl.looks; *pp && *pp != p; pp = &(*pp)->next)
		;
	if (*pp) {
		*pp = p->next;
		nl.nlooks--;
	}
	if (status == MHD_HTTP_OK) {
		p->req->body = body;
		p->req->len = len;
	} else {
		free(body);
	}
	handover_finish(&p->req->h, status, error);
	look_free(p);
	timer_update();
}

/* "0-3,5": ascending, coalesced ranges as fr_format_ranks() writes ranks. NULL when out of memory. */
static char *ranges_text(const struct fr_node_range *r, size_t n)
{
	char *s = malloc(n * 24 + 1);
	size_t len = 0;

	if (!s)
		return NULL;
	s[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		uint32_t last = r[i].first + r[i].count - 1;

		if (r[i].count == 1)
			len += (size_t)sprintf(s + len, "%s%" PRIu32, i ? "," : "", r[i].first);
		else
			len += (size_t)sprintf(s + len, "%s%" PRIu32 "-%" PRIu32, i ? "," : "",
					       r[i].first, last);
	}
	return s;
}

/*
 * The thread of class `c` as the dump reader would give it, its strings
 * borrowed from the class (the dump writer only reads them): `th` owns
 * only its arrays (free them, not the strings). 0 or -ENOMEM.
 */
static int class_thread(const struct fr_node_look_class *c, struct fr_thread *th)
{
	memset(th, 0, sizeof(*th));
	th->tid = c->tid;
	th->current = c->current;
	th->py_truncated = c->py_truncated;
	snprintf(th->name, sizeof(th->name), "%s", c->thread);
	th->frames = calloc(c->nframes ? c->nframes : 1, sizeof(*th->frames));
	th->pyframes = calloc(c->npyframes ? c->npyframes : 1, sizeof(*th->pyframes));
	if (!th->frames || !th->pyframes) {
		free(th->frames);
		free(th->pyframes);
		return -ENOMEM;
	}
	th->nframes = c->nframes;
	for (uint32_t i = 0; i < c->nframes; i++) {
		th->frames[i].name = c->frames[i].name[0] ? (char *)c->frames[i].name : NULL;
		th->frames[i].offset = c->frames[i].offset;
		th->frames[i].ip = c->frames[i].ip;
	}
	th->npyframes = c->npyframes;
	look_class_pyframes(c, th->pyframes);
	return 0;
}

/* The "thread" of a group, as the dump writes a thread: its class's. */
static json_t *class_thread_json(const struct fr_thread *th)
{
	struct fr_trace shell;
	json_t *threads, *o = NULL;

	memset(&shell, 0, sizeof(shell));
	threads = look_threads_json(&shell, th);
	if (json_array_get(threads, 0))
		o = json_incref(json_array_get(threads, 0));
	json_decref(threads);
	return o;
}

static json_t *group_json(const struct look_merge_group *g)
{
	const struct fr_node_look_class *c = g->rep;
	char *ranks = ranges_text(g->ranges, g->nranges);
	json_t *frames = json_array();
	json_t *o = NULL;
	struct fr_thread th;

	if (class_thread(c, &th)) {
		free(ranks);
		json_decref(frames);
		return NULL;
	}
	if (!ranks || !frames)
		goto out_free;
	for (uint32_t i = c->start; i < c->nframes; i++)
		if (json_array_append_new(frames, json_string(c->frames[i].name[0] ?
								     c->frames[i].name :
								     "??")))
			goto out_free;
	o = json_pack("{s:s, s:I, s:O, s:o*, s:I}", "ranks", ranks, "nranks",
		      (json_int_t)g->nranks, "frames", frames, "thread", class_thread_json(&th),
		      "nodes", (json_int_t)g->nnodes);
	/* A class told apart by its Python frames shows them, as look.c's groups do. */
	if (o && (!json_object_get(o, "thread") ||
		  (th.npyframes &&
		   json_object_set_new(o, "python_frames", fr_pyframes_to_json(&th))))) {
		json_decref(o);
		o = NULL;
	}
out_free:
	json_decref(frames);
	free(ranks);
	free(th.frames);
	free(th.pyframes);
	return o;
}

struct why_ctx {
	struct nl_look *p;
	json_t *why;
	uint64_t more;
	uint64_t asked;
};

/* Why each rank of a node that did not answer is missing, up to JOB_STACK_WHY_MAX in all. */
static void why_node(void *arg, const char *node, struct conn *conn,
		     const struct fr_node_rank *ranks, uint32_t nranks)
{
	struct why_ctx *w = arg;
	const struct nl_node *n = NULL;
	char text[FR_HOST_MAX + FR_REASON_MAX + 64];
	char key[16];
	uint32_t i;

	(void)conn;
	for (size_t k = 0; k < w->p->nnodes && !n; k++)
		if (strcmp(w->p->nodes[k].name, node) == 0)
			n = &w->p->nodes[k];
	if (!n || n->state == NL_DONE)
		return;
	if (n->state == NL_LOST)
		snprintf(text, sizeof(text), "node lost: %s", node);
	else if (n->state == NL_LATE)
		snprintf(text, sizeof(text), "node %s did not answer within %llu s", node,
			 (unsigned long long)(NODE_LOOK_DEADLINE_NS / NS_PER_S));
	else
		snprintf(text, sizeof(text), "node %s: %s", node, n->why);
	if (n->state == NL_LATE || n->state == NL_REFUSED)
		w->asked += nranks;
	for (i = 0; i < nranks && json_object_size(w->why) < JOB_STACK_WHY_MAX; i++) {
		snprintf(key, sizeof(key), "%" PRIu32, ranks[i].rank);
		json_object_set_new(w->why, key, json_string(text));
	}
	w->more += nranks - i;
}

/* The ranks of the world in no group, as text. NULL when out of memory. */
static char *missing_text(const struct look_merged *m, uint32_t world)
{
	struct fr_node_range *gaps = malloc((m->nranges + 1) * sizeof(*gaps));
	char *s;

	if (!gaps)
		return NULL;
	s = ranges_text(gaps, look_merge_gaps(m, world, gaps));
	free(gaps);
	return s;
}

/* GET /v1/jobs/<job>/stacks from what the nodes sent. Under the lock. */
static json_t *job_doc(struct nl_look *p)
{
	struct why_ctx w = { .p = p, .why = json_object() };
	struct look_merge_in *in = NULL;
	struct look_merged m = { 0 };
	size_t nin = 0, ncls = 0, answered = 0, nodes_answered = 0;
	uint64_t threads_cut = 0, frames_cut = 0, classes_cut = 0, nodes_missing = 0;
	json_t *groups = NULL, *lost = json_array(), *doc = NULL;
	char *missing = NULL;
	char key[16];

	for (size_t i = 0; i < p->nnodes; i++)
		ncls += p->nodes[i].nclasses;
	in = malloc((ncls ? ncls : 1) * sizeof(*in));
	if (!in || !w.why || !lost)
		goto out_free;
	for (size_t i = 0; i < p->nnodes; i++) {
		const struct nl_node *n = &p->nodes[i];

		if (n->state == NL_LOST && json_array_append_new(lost, json_string(n->name)))
			goto out_free;
		if (n->state != NL_DONE)
			continue;
		nodes_answered++;
		for (size_t k = 0; k < n->nmsgs; k++) {
			const struct fr_msg_node_look_stacks *f = &n->msgs[k];

			w.asked += f->asked;
			answered += f->answered;
			nodes_missing += f->nmissing;
			threads_cut += f->threads_left_out;
			frames_cut += f->frames_left_out;
			classes_cut += f->classes_left_out;
			for (uint32_t j = 0; j < f->nwhy; j++) {
				if (json_object_size(w.why) >= JOB_STACK_WHY_MAX)
					break;
				snprintf(key, sizeof(key), "%" PRIu32, f->why[j].rank);
				json_object_set_new(w.why, key, json_string(f->why[j].reason));
			}
			for (uint32_t j = 0; j < f->nclasses; j++)
				in[nin++] = (struct look_merge_in){ &f->classes[j], (uint32_t)i };
		}
	}
	if (nodes_missing > json_object_size(w.why))
		w.more += nodes_missing - json_object_size(w.why);
	/* The nodes that did not answer: each of their ranks, by name. */
	nodes_job_each_node(p->job, why_node, &w);
	if (look_merge(in, nin, &m))
		goto out_free;
	missing = missing_text(&m, p->world);
	groups = json_array();
	for (size_t g = 0; groups && g < m.ngroups && g < JOB_STACK_GROUPS_MAX; g++) {
		if (json_array_append_new(groups, group_json(&m.groups[g]))) {
			json_decref(groups);
			groups = NULL;
		}
	}
	if (groups && missing)
		doc = json_pack("{s:s, s:I, s:I, s:s, s:O, s:I, s:o, s:I, s:{s:I, s:I}, s:I, s:I, "
				"s:I, s:{s:I, s:I, s:O}}",
				"job", p->job, "ranks_asked", (json_int_t)w.asked,
				"ranks_answered", (json_int_t)answered, "missing", missing, "why",
				w.why, "more_why", (json_int_t)w.more, "groups", groups,
				"more_groups",
				(json_int_t)(m.ngroups > JOB_STACK_GROUPS_MAX ?
						     m.ngroups - JOB_STACK_GROUPS_MAX :
						     0),
				"limits", "threads_per_rank", (json_int_t)JOB_STACK_THREADS_MAX,
				"frames_per_thread", (json_int_t)JOB_STACK_FRAMES_MAX,
				"threads_left_out", (json_int_t)threads_cut, "frames_left_out",
				(json_int_t)frames_cut, "classes_left_out", (json_int_t)classes_cut,
				"nodes", "asked", (json_int_t)p->nnodes - (json_int_t)json_array_size(lost),
				"answered", (json_int_t)nodes_answered, "lost", lost);
	else
		json_decref(groups);
out_free:
	json_decref(w.why);
	json_decref(lost);
	look_merged_free(&m);
	free(in);
	free(missing);
	return doc;
}

/* Every node asked has answered, gone or been given up on: the job's answer. */
static void job_finish(struct nl_look *p)
{
	char *body;
	size_t len;

	/* One line, as every JSON answer (fr_json_text() takes the doc). */
	if (fr_json_text(job_doc(p), JSON_COMPACT, &body, &len)) {
		look_end(p, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory", NULL, 0);
		return;
	}
	look_end(p, MHD_HTTP_OK, NULL, body, len);
}

/* A node of the look is done with, one way or another. */
static void node_settle(struct nl_look *p, struct nl_node *n, enum nl_state state,
			const char *why)
{
	if (n->state != NL_WAITING)
		return;
	n->state = state;
	n->conn = NULL;
	if (why)
		snprintf(n->why, sizeof(n->why), "%s", why);
	if (state != NL_DONE) {
		for (size_t k = 0; k < n->nmsgs; k++)
			fr_wire_node_look_stacks_free(&n->msgs[k]);
		n->nmsgs = 0;
		n->nclasses = 0;
	}
	if (--p->pending == 0)
		job_finish(p);
}

/* ---- the loop: starting looks ---- */

static int send_request(struct conn *c, const struct nl_look *p, uint8_t kind, uint32_t rank,
			uint32_t last)
{
	struct fr_msg_node_look_request m = { .look = p->id, .kind = kind, .rank = rank,
					      .last = last };

	memcpy(m.job, p->job, sizeof(m.job));
	return conn_send_node_look_request(c, &m);
}

struct begin_ctx {
	struct nl_look *p;
	size_t cap;
};

static void begin_node(void *arg, const char *node, struct conn *conn,
		       const struct fr_node_rank *ranks, uint32_t nranks)
{
	struct begin_ctx *b = arg;
	struct nl_look *p = b->p;
	struct nl_node *n;

	(void)ranks;
	if (!nranks || p->nnodes == b->cap)
		return;
	n = &p->nodes[p->nnodes++];
	snprintf(n->name, sizeof(n->name), "%s", node);
	if (!conn || conn->closing) {
		n->state = NL_LOST;
		return;
	}
	n->conn = conn;
	n->state = NL_WAITING;
	p->pending++;
	/* A failed write may close the connection, which settles the node first. */
	if (send_request(conn, p, FR_NODE_LOOK_JOB_STACKS, FR_RANK_UNKNOWN, 0))
		node_settle(p, n, NL_REFUSED, "the request could not be sent");
}

static void count_node(void *arg, const char *node, struct conn *conn,
		       const struct fr_node_rank *ranks, uint32_t nranks)
{
	(void)node;
	(void)conn;
	(void)ranks;
	(void)nranks;
	(*(size_t *)arg)++;
}

static void begin_job(struct nl_look *p)
{
	struct begin_ctx b = { .p = p };

	nodes_job_each_node(p->job, count_node, &b.cap);
	p->nodes = calloc(b.cap ? b.cap : 1, sizeof(*p->nodes));
	if (!p->nodes) {
		look_end(p, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory", NULL, 0);
		return;
	}
	/* One more pending while the nodes are asked: none of them ends the look. */
	p->pending = 1;
	nodes_job_each_node(p->job, begin_node, &b);
	if (--p->pending == 0)
		job_finish(p);
}

static void begin_rank(struct flightrecd *d, struct nl_look *p)
{
	struct nl_req *q = p->req;
	const char *node = NULL;
	struct conn *c = NULL;
	char why[FR_HOST_MAX + FR_JOB_MAX + 96];

	(void)d;
	if (q->rank >= p->world) {
		look_end(p, MHD_HTTP_NOT_FOUND, "no such rank", NULL, 0);
		return;
	}
	if (!nodes_rank_node(p->job, q->rank, &c, &node)) {
		snprintf(why, sizeof(why), "rank %" PRIu32 " of job %s is held by no node", q->rank,
			 p->job);
		look_end(p, MHD_HTTP_CONFLICT, why, NULL, 0);
		return;
	}
	if (!c || c->closing) {
		snprintf(why, sizeof(why), "rank %" PRIu32 " of job %s is not connected (node lost: %s)",
			 q->rank, p->job, node);
		look_end(p, MHD_HTTP_CONFLICT, why, NULL, 0);
		return;
	}
	snprintf(p->node, sizeof(p->node), "%s", node);
	/* The connection is the look's once the request went: a failed write
	 * that closes it must not end the look twice. */
	if (send_request(c, p,
			 q->kind == ROUTE_RANK_TRACE ? FR_NODE_LOOK_RANK_TRACE :
						       FR_NODE_LOOK_RANK_STACKS,
			 q->rank, q->kind == ROUTE_RANK_TRACE ? q->last : 0)) {
		look_end(p, MHD_HTTP_SERVICE_UNAVAILABLE, "cannot write to the rank's node", NULL, 0);
		return;
	}
	p->conn = c;
}

static void req_take(struct flightrecd *d, struct handover *h, uint64_t now)
{
	struct nl_req *q = (struct nl_req *)h;
	struct nl_look *p;
	uint32_t world = 0;

	if (d->stopping) {
		handover_finish(h, MHD_HTTP_SERVICE_UNAVAILABLE, "the daemon is stopping");
		return;
	}
	if (!nodes_job_known(q->job, &world)) {
		handover_finish(h, MHD_HTTP_NOT_FOUND, "no such job");
		return;
	}
	if (nl.nlooks >= NODE_LOOKS_MAX) {
		handover_finish(h, MHD_HTTP_SERVICE_UNAVAILABLE,
				"too many live looks in progress; try again in a few seconds");
		return;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		handover_finish(h, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		return;
	}
	p->id = ++nl.seq;
	p->req = q;
	memcpy(p->job, q->job, sizeof(p->job));
	p->world = world;
	p->deadline_mono = now + NODE_LOOK_DEADLINE_NS;
	p->next = nl.looks;
	nl.looks = p;
	nl.nlooks++;
	timer_update();
	if (q->kind == ROUTE_JOB_STACKS)
		begin_job(p);
	else
		begin_rank(d, p);
}

/* ---- the loop: answers arriving ---- */

static struct nl_look *look_find(uint64_t id, const char *job)
{
	for (struct nl_look *p = nl.looks; p; p = p->next)
		if (p->id == id && strcmp(p->job, job) == 0)
			return p;
	return NULL;
}

void node_look_stacks(struct flightrecd *d, struct conn *c, struct fr_msg_node_look_stacks *m)
{
	struct nl_look *p = look_find(m->look, m->job);
	struct nl_node *n = NULL;
	uint64_t size = fr_wire_node_look_stacks_size(m);

	(void)d;
	for (size_t i = 0; p && i < p->nnodes && !n; i++)
		if (p->nodes[i].conn == c && p->nodes[i].state == NL_WAITING)
			n = &p->nodes[i];
	/* A look given up on, or not this node's: nothing to keep. */
	if (!n)
		goto out_free;
	if (n->nclasses + m->nclasses > FR_NODE_LOOK_CLASSES_MAX) {
		node_settle(p, n, NL_REFUSED, "it sent more classes of stacks than a node may");
		goto out_free;
	}
	if (!budget_charge(BUDGET_LIVE, size)) {
		node_settle(p, n, NL_REFUSED, "over the central daemon's memory budget");
		goto out_free;
	}
	n->charged += size;
	if (n->nmsgs == n->cap) {
		size_t cap = n->cap ? 2 * n->cap : 4;
		struct fr_msg_node_look_stacks *grown = realloc(n->msgs, cap * sizeof(*grown));

		if (!grown) {
			node_settle(p, n, NL_REFUSED, "out of memory");
			goto out_free;
		}
		n->msgs = grown;
		n->cap = cap;
	}
	n->nclasses += m->nclasses;
	n->msgs[n->nmsgs++] = *m;
	memset(m, 0, sizeof(*m));
	if (n->msgs[n->nmsgs - 1].flags & FR_NODE_LOOK_LAST)
		node_settle(p, n, NL_DONE, NULL);
	return;
out_free:
	fr_wire_node_look_stacks_free(m);
}

void node_look_piece(struct flightrecd *d, struct conn *c, const struct fr_msg_node_summary *m)
{
	struct nl_look *p;
	unsigned long long id;
	char why[FR_REASON_MAX + FR_HOST_MAX + 16];
	unsigned status;
	int used = 0;

	if (sscanf(m->incident, "look-%llu%n", &id, &used) != 1 || m->incident[used])
		return;
	p = look_find(id, m->job);
	if (!p || p->conn != c || p->req->rank != m->rank)
		return;
	if (m->flags & FR_NODE_SUMMARY_FAILED) {
		/* "504 rank 3 ...": the node's look's status, then why. */
		if (sscanf(m->reason, "%3u %n", &status, &used) != 1 || status < 400 || status > 599)
			status = MHD_HTTP_BAD_GATEWAY, used = 0;
		snprintf(why, sizeof(why), "%s (node %s)", m->reason + used, p->node);
		look_end(p, status, why, NULL, 0);
		return;
	}
	if (m->offset == 0) {
		budget_release(BUDGET_LIVE, p->up.charged);
		upload_reset(&p->up);
		if (upload_begin(&p->up, m->incident, m->total, d->cfg.max_dump_size)) {
			look_end(p, MHD_HTTP_BAD_GATEWAY, "the node's answer is over --max-dump-size",
				 NULL, 0);
			return;
		}
	}
	{
		struct fr_msg_dump_data piece = { .offset = m->offset, .total = m->total,
						  .len = m->len, .data = m->data };
		uint8_t *body;
		size_t len;

		switch (upload_append(&p->up, &piece, nl_charge, NULL, why, sizeof(why))) {
		case UPLOAD_ERROR:
			look_end(p, MHD_HTTP_BAD_GATEWAY, why, NULL, 0);
			break;
		case UPLOAD_COMPLETE:
			/* The bytes go to the request; the budget's charge ends here. */
			body = upload_take(&p->up, &len);
			look_end(p, MHD_HTTP_OK, NULL, (char *)body, len);
			break;
		case UPLOAD_MORE:
			break;
		}
	}
}

void node_look_conn_closed(struct conn *c)
{
	struct nl_look *p, *next;

	for (p = nl.looks; p; p = next) {
		next = p->next;
		if (p->conn == c) {
			char why[FR_HOST_MAX + 64];

			snprintf(why, sizeof(why), "node lost: %s", p->node);
			look_end(p, MHD_HTTP_SERVICE_UNAVAILABLE, why, NULL, 0);
			continue;
		}
		/* node_settle() may end the look: it is the last thing done with it. */
		for (size_t i = 0; i < p->nnodes; i++) {
			if (p->nodes[i].conn == c && p->nodes[i].state == NL_WAITING) {
				node_settle(p, &p->nodes[i], NL_LOST, NULL);
				break;
			}
		}
	}
}

static void on_tick(uv_timer_t *t)
{
	struct flightrecd *d = t->data;
	uint64_t now = daemon_mono_ns();
	struct nl_look *p, *next;

	pthread_mutex_lock(&d->lock);
	for (p = nl.looks; p; p = next) {
		next = p->next;
		if (now < p->deadline_mono)
			continue;
		if (p->req->kind != ROUTE_JOB_STACKS) {
			char why[FR_HOST_MAX + 64];

			snprintf(why, sizeof(why), "node %s did not answer within %llu s", p->node,
				 (unsigned long long)(NODE_LOOK_DEADLINE_NS / NS_PER_S));
			look_end(p, MHD_HTTP_GATEWAY_TIMEOUT, why, NULL, 0);
			continue;
		}
		for (size_t i = 0; i < p->nnodes; i++) {
			if (p->nodes[i].state != NL_WAITING)
				continue;
			/* The last one ends the look. */
			if (p->pending == 1) {
				node_settle(p, &p->nodes[i], NL_LATE, NULL);
				break;
			}
			node_settle(p, &p->nodes[i], NL_LATE, NULL);
		}
	}
	timer_update();
	pthread_mutex_unlock(&d->lock);
}

static void timer_update(void)
{
	bool want = nl.open && nl.looks;

	if (want == nl.ticking)
		return;
	nl.ticking = want;
	if (want)
		uv_timer_start(&nl.timer, on_tick, NL_TICK_MS, NL_TICK_MS);
	else
		uv_timer_stop(&nl.timer);
}

/* ---- the HTTP thread ---- */

static void req_free(struct handover *h)
{
	free(((struct nl_req *)h)->body);
	free(h);
}

bool node_look_claims(struct flightrecd *d, const struct route *r, void *req_cls)
{
	const char *node;
	bool held;

	if (req_cls)
		return ((struct handover *)req_cls)->free == req_free;
	pthread_mutex_lock(&d->lock);
	held = !registry_job_find(d, r->job) && nodes_job_held(r->job, &node);
	pthread_mutex_unlock(&d->lock);
	return held;
}

int node_look_http(struct flightrecd *d, struct MHD_Connection *mc, const struct route *r,
		   uint32_t last, void **req_cls)
{
	struct nl_req *q;
	char *body;
	bool done;

	(void)d;
	q = (struct nl_req *)handover_resumed(*req_cls, &done);
	if (!q) {
		q = calloc(1, sizeof(*q));
		if (!q)
			return http_reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		q->h.take = req_take;
		q->h.free = req_free;
		q->kind = r->kind;
		memcpy(q->job, r->job, sizeof(q->job));
		q->rank = r->rank;
		q->last = last;
		if (handover_submit(&q->h, mc)) {
			free(q);
			return http_reply_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE, "the daemon is stopping");
		}
		*req_cls = q;
		return MHD_YES;
	}
	if (!done)
		return http_reply_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "resumed before its answer");
	if (q->h.status != MHD_HTTP_OK || !q->body)
		return http_reply_error(mc, q->h.status, q->h.error[0] ? q->h.error : "no answer");
	/* The reply owns the bytes now. */
	body = q->body;
	q->body = NULL;
	return http_reply_body(mc, MHD_HTTP_OK, body, q->len);
}

/* ---- start and stop ---- */

int node_look_start(struct flightrecd *d)
{
	uv_timer_init(d->loop, &nl.timer);
	nl.timer.data = d;
	uv_unref((uv_handle_t *)&nl.timer);
	nl.open = true;
	return 0;
}

void node_look_stop(struct flightrecd *d)
{
	/* Their requests were answered by handover_stop(). */
	while (nl.looks) {
		struct nl_look *p = nl.looks;

		nl.looks = p->next;
		look_free(p);
	}
	nl.nlooks = 0;
	if (nl.open) {
		nl.open = false;
		nl.ticking = false;
		if (!uv_is_closing((uv_handle_t *)&nl.timer)) {
			uv_close((uv_handle_t *)&nl.timer, NULL);
			uv_run(d->loop, UV_RUN_NOWAIT);
		}
	}
}
