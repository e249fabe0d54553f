/*
 * Incidents of jobs the node daemons hold (cluster_incident.h; docs/
 * SCALE-OUT.md, "Incidents at scale"): the central daemon's side.
 *
 * An incident is named and laid out as the registry's (incident.c):
 * DIR/<job>/<UTC time>-<n>/ with rank-<N>.json and manifest.json written
 * last. It goes through three steps:
 *
 *   collecting   NODE_DUMP_REQUEST went to every connected node holding
 *                ranks of the job; each rank's summary arrives in
 *                NODE_SUMMARY pieces (upload.c puts them together, charged
 *                to the memory budget) and is checked and written on the
 *                thread pool; a node lost, a failure it reports or the
 *                deadline (--dump-deadline) says why a rank has none.
 *                Ends when every node said NODE_DUMP_DONE or went.
 *   fetching     the directory is judged as fr-analyze judges it (the
 *                evidence layer and the correlator, on the thread pool),
 *                and the culprits' full dumps are fetched (NODE_FETCH);
 *                each replaces its summary (written to a temporary name,
 *                renamed), so the directory holds the culprits' full dumps
 *                and the others' summaries. Bounded by the deadline again.
 *   finishing    manifest.json, then the incident is listed as closed.
 *
 * A job's record of incidents (GET /v1/jobs/<job>/incidents) and its
 * --max-incidents-per-hour bucket live here, the registry holding no job
 * for it. Everything runs on the loop under the daemon's lock, but the
 * work on the thread pool, which touches only what it was given.
 */
#include "cluster_incident.h"

#include "budget.h"
#include "clock.h"
#include "daemon.h"
#include "handover.h"
#include "incident.h"
#include "log.h"
#include "pool.h"
#include "nodes.h"
#include "ratelog.h"
#include "registry.h"
#include "server.h"
#include "upload.h"

#include "../dumps/correlate.h"
#include "../dumps/dump.h"
#include "../dumps/evidence.h"
#include "../dumps/grow.h"
#include "../dumps/kernel_log.h"
#include "../protocol/hash.h"
#include "../protocol/node_wire.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <microhttpd.h>

/* Jobs whose incident records are kept: the newest. */
#define CLUSTER_JOBS_MAX 1024
/* Rank fetches over HTTP waiting for their node at once. */
#define CLUSTER_FETCHES_MAX 64
/* Incidents open (collecting, judging, fetching) at once, all jobs
 * together: each asks every node of its job for dumps and holds a record
 * per rank, and a thousand jobs that lost their nodes at once must not
 * open a thousand. The others open on a later pass, if still due. */
#define CLUSTER_OPEN_MAX 16
_Static_assert(CLUSTER_OPEN_MAX < CLUSTER_JOBS_MAX, "cl_job_get() always finds an idle record to reuse");
/* At the summaries' deadline, nodes still sending (a piece within
 * CL_FLOWING_NS) are waited for, up to CL_STRETCH_DEADLINES times
 * --dump-deadline in all (cl_stretch()). */
#define CL_FLOWING_NS (2ull * NS_PER_S)
/* Deaths a job remembers as reported (cl_job.deaths). */
#define CL_DEATHS_KEPT 64
#define CL_STRETCH_DEADLINES 4
/* A node file not opened yet: no -errno is this low. */
#define CL_FD_NONE INT_MIN
/* Files of summaries an incident writes at most: one a node up to this
 * many nodes, a group of consecutive nodes a file past it. */
#define CL_NODE_FILES_MAX 256

enum cl_answer {
	CL_NOT_HELD,        /* no node holds the rank */
	CL_PENDING,
	CL_WRITING,
	CL_RECEIVED,
	CL_FAILED,          /* the node said why, or the dump was invalid */
	CL_LOST,            /* its node's connection went */
	CL_UNRESPONSIVE,    /* nothing by the deadline */
};

static const char *const cl_answer_names[] = {
	[CL_NOT_HELD] = "never_connected", [CL_PENDING] = "pending",
	[CL_WRITING] = "pending",          [CL_RECEIVED] = "received",
	[CL_FAILED] = "invalid",           [CL_LOST] = "unresponsive",
	[CL_UNRESPONSIVE] = "unresponsive",
};

struct cl_rank {
	enum cl_answer answer;
	int node;               /* index in inc->nodes; -1: none */
	bool written;           /* rank-N.json is on disk */
	bool full;              /* ... and is the full dump */
	bool fetching;          /* its full dump is asked for */
	bool fetch_asked;       /* it was: its manifest entry is made again at the end */
	char host[FR_HOST_MAX + 1];
	uint32_t pid;
	char *error;            /* owned */
	struct upload *up;      /* the piece being put together */
};

struct cl_node {
	char name[FR_HOST_MAX + 1];
	bool done;              /* NODE_DUMP_DONE, or lost */
	uint64_t piece_mono;    /* when the last piece of a summary came from it; 0: none */
	/* Its ranks' summaries, one a line (cl_node_file()): opened at the
	 * first, CL_FD_NONE before, or -errno when it could not be (-1 is
	 * EPERM's). */
	int fd;
	char file[FR_HOST_MAX + 32];
	/* Its kernel log (NODE_KERNEL_LOG) as read and written again, compact
	 * JSON of at most about FR_NODE_KERNEL_LOG_MAX bytes, owned; NULL
	 * while none came. */
	char *klog;
	/* The ranks it holds, ascending (owned): a node lost, or back, is
	 * about its ranks, not every rank of the job, which at 8,192 nodes
	 * lost at once was half a billion steps. */
	uint32_t *ranks;
	uint32_t nranks;
};

enum cl_phase { CL_COLLECTING, CL_JUDGING, CL_FETCHING, CL_FINISHING };

struct cl_job;

struct cl_incident {
	struct flightrecd *d;
	struct cl_job *job;
	char id[FR_INCIDENT_MAX + 1];
	char reason[16];
	char dir[PATH_MAX - 32];
	struct incident_trigger trigger;
	uint64_t detected_ns, opened_ns, closed_ns;
	uint64_t deadline_mono;
	/* The summaries' deadline as it may be stretched for nodes still
	 * sending (cl_stretch()); the stretching was logged. */
	uint64_t stretch_until_mono;
	bool stretch_logged;
	uint32_t world_size;
	struct cl_rank *ranks;
	size_t nnodes, nodes_cap;
	struct cl_node *nodes;
	/* The nodes by name (cl_node_index()): a node's every message finds
	 * its place, 8,192 nodes for a job of 8 GPUs a node. An open
	 * addressing table of node indices, NODE_SLOT_FREE where empty,
	 * `node_mask` + 1 slots, at most half full; NULL: look linearly. */
	uint32_t *node_slots;
	size_t node_mask;
	size_t nodes_pending;   /* nodes not done (cl_node_done()) */
	unsigned writes;        /* dumps on the thread pool */
	uint64_t charged;       /* `ranks`, charged to the memory budget */
	/* Each summary as it was parsed when checked, by rank, for the
	 * judging (which would otherwise read them all back and parse them
	 * again: two seconds at 65,536 ranks), charged as the bytes they
	 * came in; NULL when the array could not be had, and `traces_lost`
	 * when a summary written was not kept (the judging reads the
	 * directory then). */
	struct fr_trace **traces;
	uint64_t traces_charged;
	bool traces_lost;
	enum cl_phase phase;
	bool incomplete;
	json_t *verdict;        /* the live verdict when it opened, then the judged one */
	/* The manifest's ranks, made on the thread pool while the summaries
	 * are judged (cl_prebuild()); the judgement waits for it (`judged`)
	 * before any rank changes again. */
	bool prebuilding;
	json_t *prebuilt;
	struct cl_judgement *judged;
};

struct cl_job {
	struct cl_job *next;
	char id[FR_JOB_MAX + 1];
	size_t nrecords;
	struct incident_record *records;    /* oldest first */
	uint32_t *record_world;             /* each record's world size */
	struct cl_incident *active;
	bool budget_set;
	double budget;
	uint64_t budget_mono;
	/* Deaths already reported (an incident opened, or one collecting
	 * shows it), the last CL_DEATHS_KEPT: a node that reconnects says
	 * its dead ranks again, and that is no new death. */
	struct { uint32_t rank, pid; } deaths[CL_DEATHS_KEPT];
	size_t ndeaths;
};

/* A rank's full dump asked for over HTTP, until its node answers. */
struct cl_fetch {
	struct handover *h;
	char job[FR_JOB_MAX + 1];
	char incident[FR_INCIDENT_MAX + 1];
	uint32_t rank;
	char node[FR_HOST_MAX + 1];
	uint64_t deadline_mono;
	uint8_t **data;
	size_t *len;
	struct upload up;
};

static struct {
	struct cl_job *jobs;
	size_t njobs;
	struct cl_fetch *fetches[CLUSTER_FETCHES_MAX];
	struct cl_job *open[CLUSTER_OPEN_MAX];  /* the jobs with an active incident */
	size_t nopen;
} cl;

/* Sets the job's active incident (NULL: none), keeping cl.open in step. */
static void cl_set_active(struct cl_job *j, struct cl_incident *inc)
{
	size_t i = 0;

	if (!inc) {
		while (i < cl.nopen && cl.open[i] != j)
			i++;
		if (i < cl.nopen)
			cl.open[i] = cl.open[--cl.nopen];
	} else if (!j->active) {
		assert(cl.nopen < CLUSTER_OPEN_MAX);
		cl.open[cl.nopen++] = j;
	}
	j->active = inc;
}

static void cl_set_error(struct cl_rank *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void cl_set_error(struct cl_rank *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	incident_vset_text(&r->error, fmt, ap);
	va_end(ap);
}

static struct cl_job *cl_job_find(const char *id)
{
	for (struct cl_job *j = cl.jobs; j; j = j->next)
		if (strcmp(j->id, id) == 0)
			return j;
	return NULL;
}

static void cl_job_free(struct cl_job *j)
{
	free(j->records);
	free(j->record_world);
	free(j);
}

/* The job's record here, made when missing; the oldest idle one goes past the cap. */
static struct cl_job *cl_job_get(const char *id)
{
	struct cl_job *j = cl_job_find(id), **pp, **oldest = NULL;

	if (j)
		return j;
	if (cl.njobs >= CLUSTER_JOBS_MAX) {
		/* The list is newest first: the last idle one is the oldest. */
		for (pp = &cl.jobs; *pp; pp = &(*pp)->next)
			if (!(*pp)->active)
				oldest = pp;
		if (!oldest)
			return NULL;
		j = *oldest;
		*oldest = j->next;
		cl_job_free(j);
		cl.njobs--;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	snprintf(j->id, sizeof(j->id), "%s", id);
	j->next = cl.jobs;
	cl.jobs = j;
	cl.njobs++;
	return j;
}

bool cluster_incident_collecting(const char *job)
{
	/* The open ones, not every job's record: the watchdog asks per job per pass. */
	for (size_t i = 0; i < cl.nopen; i++)
		if (strcmp(cl.open[i]->id, job) == 0)
			return true;
	return false;
}

static struct incident_record *cl_record(struct cl_incident *inc)
{
	return &inc->job->records[inc->job->nrecords - 1];
}

static void cl_update_record(struct cl_incident *inc)
{
	struct incident_record *rec = cl_record(inc);

	rec->answered = rec->requested = 0;
	for (uint32_t i = 0; i < inc->world_size; i++) {
		enum cl_answer a = inc->ranks[i].answer;

		rec->requested += a != CL_NOT_HELD;
		rec->answered += a == CL_RECEIVED || a == CL_FAILED;
	}
}

/*
 * Rank `cr` answered (a summary kept, or why there is none): its record
 * counts it at once. cl_update_record() recounts every rank, which costs
 * the world size: once per summary that made an incident of 65,536 ranks
 * quadratic.
 */
static void cl_answered(struct cl_incident *inc, struct cl_rank *cr, enum cl_answer a)
{
	bool was = cr->answer == CL_RECEIVED || cr->answer == CL_FAILED;

	cr->answer = a;
	if (!was)
		cl_record(inc)->answered++;
}

static int cl_add_record(struct cl_incident *inc, const char *summary)
{
	struct cl_job *j = inc->job;
	size_t n = j->nrecords;
	uint32_t *w;

	if (n < DAEMON_MAX_INCIDENT_RECORDS) {
		w = realloc(j->record_world, (n + 1) * sizeof(*w));
		if (!w)
			return -ENOMEM;
		j->record_world = w;
	}
	if (!incident_record_push(&j->records, &j->nrecords, inc->id, inc->reason, summary,
				  inc->opened_ns))
		return -ENOMEM;
	/* The world sizes go with their records, the oldest dropped alike. */
	if (j->nrecords == n)
		memmove(j->record_world, j->record_world + 1, (n - 1) * sizeof(*j->record_world));
	j->record_world[j->nrecords - 1] = inc->world_size;
	return 0;
}

static void cl_drop_upload(struct cl_rank *r)
{
	if (!r->up)
		return;
	budget_release_job(NULL, BUDGET_UPLOADS, r->up->charged);
	upload_reset(r->up);
	free(r->up);
	r->up = NULL;
}

static void cl_free_traces(struct fr_trace **traces, uint32_t n)
{
	for (uint32_t r = 0; traces && r < n; r++) {
		if (traces[r]) {
			fr_trace_free(traces[r]);
			free(traces[r]);
		}
	}
	free(traces);
}

static void cl_incident_free(struct cl_incident *inc)
{
	cl_free_traces(inc->traces, inc->world_size);
	budget_release_job(NULL, BUDGET_UPLOADS, inc->traces_charged);
	for (uint32_t i = 0; inc->ranks && i < inc->world_size; i++) {
		cl_drop_upload(&inc->ranks[i]);
		free(inc->ranks[i].error);
	}
	free(inc->ranks);
	budget_release_job(NULL, BUDGET_UPLOADS, inc->charged);
	for (size_t i = 0; i < inc->nnodes; i++) {
		if (inc->nodes[i].fd >= 0)
			close(inc->nodes[i].fd);
		free(inc->nodes[i].klog);
		free(inc->nodes[i].ranks);
	}
	free(inc->nodes);
	free(inc->node_slots);
	json_decref(inc->verdict);
	json_decref(inc->prebuilt);
	free(inc);
}

#define NODE_SLOT_FREE UINT32_MAX

static size_t cl_node_slot(const struct cl_incident *inc, const char *node)
{
	return (size_t)fr_fnv1a(FR_FNV_INIT, node, strlen(node)) & inc->node_mask;
}

/* Indexes the incident's nodes by name, once they are all known; without
 * memory, cl_node_index() looks linearly. */
static void cl_index_nodes(struct cl_incident *inc)
{
	size_t nslots = 16;

	while (nslots < 2 * inc->nnodes)
		nslots *= 2;
	inc->node_slots = malloc(nslots * sizeof(*inc->node_slots));
	if (!inc->node_slots)
		return;
	inc->node_mask = nslots - 1;
	for (size_t i = 0; i < nslots; i++)
		inc->node_slots[i] = NODE_SLOT_FREE;
	for (size_t i = 0; i < inc->nnodes; i++) {
		size_t at = cl_node_slot(inc, inc->nodes[i].name);

		while (inc->node_slots[at] != NODE_SLOT_FREE)
			at = (at + 1) & inc->node_mask;
		inc->node_slots[at] = (uint32_t)i;
	}
}

static int cl_node_index(const struct cl_incident *inc, const char *node)
{
	if (!inc->node_slots) {
		for (size_t i = 0; i < inc->nnodes; i++)
			if (strcmp(inc->nodes[i].name, node) == 0)
				return (int)i;
		return -1;
	}
	for (size_t at = cl_node_slot(inc, node); inc->node_slots[at] != NODE_SLOT_FREE;
	     at = (at + 1) & inc->node_mask)
		if (strcmp(inc->nodes[inc->node_slots[at]].name, node) == 0)
			return (int)inc->node_slots[at];
	return -1;
}

/* Node `i` has answered, or will not: the collecting waits for it no more. */
static void cl_node_done(struct cl_incident *inc, size_t i)
{
	if (inc->nodes[i].done)
		return;
	inc->nodes[i].done = true;
	inc->nodes_pending--;
}

/* The connection of node `i` of the incident, NULL while lost. */
static struct conn *cl_node_conn(const struct cl_incident *inc, int i)
{
	/* Looked up each time, by name: a node that reconnected has another
	 * connection, and a rank says nothing of which node it is. */
	return nodes_conn_by_name(inc->nodes[i].name);
}

/* Rank `cr`'s full dump is not coming: why (its summary stays). */
static void cl_stop_fetch(struct cl_rank *cr, const char *why)
{
	cr->fetching = false;
	cl_drop_upload(cr);
	cl_set_error(cr, "its full dump was not fetched: %s", why);
}

/* Steps */

static void cl_judge(struct cl_incident *inc);
static void cl_prebuild(struct cl_incident *inc);
static void cl_finish(struct cl_incident *inc);

/* Collecting is over when every node is done or gone and every write applied. */
static void cl_check_collected(struct cl_incident *inc)
{
	/* Summaries still being written: the last one to finish looks again
	 * (looking over every rank once per write would be quadratic). */
	uint32_t received = 0;

	if (inc->phase != CL_COLLECTING || inc->writes || inc->nodes_pending)
		return;
	for (uint32_t r = 0; r < inc->world_size; r++) {
		struct cl_rank *cr = &inc->ranks[r];

		if (cr->answer == CL_PENDING) {
			/* Its node is done and said nothing of it. */
			cr->answer = CL_UNRESPONSIVE;
			cl_set_error(cr, "node %s sent no summary of it",
				     cr->node >= 0 ? inc->nodes[cr->node].name : "?");
			cl_drop_upload(cr);
		}
		received += cr->answer == CL_RECEIVED;
	}
	daemon_log("incident %s of job %s: collected the summaries of %" PRIu32 " of %" PRIu32
		   " ranks from %zu node%s in %.2f s", inc->id, inc->job->id, received,
		   inc->world_size, inc->nnodes, inc->nnodes == 1 ? "" : "s",
		   (double)(daemon_now_ns() - inc->opened_ns) / NS_PER_S);
	cl_update_record(inc);
	cl_judge(inc);
}

static void cl_check_fetched(struct cl_incident *inc)
{
	if (inc->phase != CL_FETCHING || inc->writes)
		return;
	for (uint32_t r = 0; r < inc->world_size; r++)
		if (inc->ranks[r].fetching)
			return;
	cl_finish(inc);
}

/* A dump on its way to disk: checked, written, its host and pid kept. */
struct cl_write {
	uv_work_t req;
	struct cl_incident *inc;
	uint32_t rank;
	bool full;
	char job[FR_JOB_MAX + 1];
	uint8_t *data;
	size_t len;
	uint64_t charged;
	int fd;                 /* a summary: its node's file; -1: `path` */
	char path[PATH_MAX];
	bool valid;
	int write_err;
	char host[FR_HOST_MAX + 1];
	uint32_t pid;
	struct fr_trace *trace; /* a summary written: as parsed */
	char err[512];
};

/*
 * Appends a checked summary to its node's file as one line. A valid
 * document has no raw line break inside a string, so those it has are
 * white space between tokens, and become spaces. One writev() on an
 * O_APPEND file: the writers of one node's file never interleave.
 */
static int cl_append_line(int fd, uint8_t *data, size_t len)
{
	struct iovec iov[2] = { { data, len }, { (void *)"\n", 1 } };
	ssize_t n;

	for (uint8_t *p = data; (p = memchr(p, '\n', len - (size_t)(p - data))); )
		*p++ = ' ';
	for (uint8_t *p = data; (p = memchr(p, '\r', len - (size_t)(p - data))); )
		*p++ = ' ';
	n = writev(fd, iov, 2);
	if (n < 0)
		return -errno;
	if ((size_t)n == len + 1)
		return 0;
	/* Cut short (a full disk): that line is lost, reported, and the
	 * reader leaves it out; its end is tried for, so that the next line
	 * (another node's, in a file of a group) stands on its own. */
	(void)!write(fd, "\n", 1);
	return -ENOSPC;
}

static void cl_write_work(uv_work_t *req)
{
	struct cl_write *w = req->data;
	struct fr_trace t = { 0 };

	pool_background();

	if (!incident_dump_check(w->data, w->len, w->job, w->rank, &t, w->err, sizeof(w->err)))
		return;
	if (!w->full && !t.summary) {
		snprintf(w->err, sizeof(w->err), "rank-%" PRIu32 ".json: a full dump where a summary was due",
			 w->rank);
	} else if (w->full && t.summary) {
		snprintf(w->err, sizeof(w->err), "rank-%" PRIu32 ".json: a summary where the full dump was due",
			 w->rank);
	} else {
		w->valid = true;
		snprintf(w->host, sizeof(w->host), "%s", t.host);
		w->pid = t.pid;
		/* Synced with the others before the manifest
		 * (incident_write_manifest()). A full dump goes to a
		 * temporary name, then rank-N.json, never seen half written. */
		w->write_err = w->fd >= 0 ? cl_append_line(w->fd, w->data, w->len) :
			       fr_write_file_unsynced(w->path, w->data, w->len, 0640);
		if (!w->full && !w->write_err && (w->trace = malloc(sizeof(*w->trace)))) {
			*w->trace = t;
			fr_trace_seal_ops(w->trace);
			return;
		}
	}
	fr_trace_free(&t);
}

static void cl_write_apply(struct cl_write *w)
{
	struct cl_incident *inc = w->inc;
	struct cl_rank *cr = &inc->ranks[w->rank];

	inc->writes--;
	if (!w->full) {
		if (!w->valid) {
			cl_answered(inc, cr, CL_FAILED);
			cl_set_error(cr, "%s", w->err);
			inc->d->m.dumps_invalid++;
			daemon_log("invalid summary of job %s rank %" PRIu32 " for incident %s: %s",
				   inc->job->id, w->rank, inc->id, w->err);
		} else {
			cl_answered(inc, cr, CL_RECEIVED);
			snprintf(cr->host, sizeof(cr->host), "%s", w->host);
			cr->pid = w->pid;
			cr->written = !w->write_err;
			if (cr->written && w->trace && inc->traces) {
				inc->traces[w->rank] = w->trace;
				w->trace = NULL;
				inc->traces_charged += w->charged;
				w->charged = 0;
			} else if (cr->written) {
				inc->traces_lost = true;
			}
			if (w->write_err)
				cl_set_error(cr, "cannot write its summary to %s: %s",
					     cr->node >= 0 ? inc->nodes[cr->node].file : "?",
					     strerror(-w->write_err));
		}
	} else {
		cr->fetching = false;
		if (!w->valid || w->write_err) {
			cl_set_error(cr, "its full dump was not kept: %s",
				     w->valid ? strerror(-w->write_err) : w->err);
		} else {
			cr->full = true;
			daemon_log("incident %s of job %s: rank %" PRIu32 "'s full dump fetched (%zu bytes)",
				   inc->id, inc->job->id, w->rank, w->len);
		}
	}
	if (w->write_err)
		inc->d->m.incident_write_errors++;
	budget_release_job(NULL, BUDGET_UPLOADS, w->charged);
	if (w->trace) {
		fr_trace_free(w->trace);
		free(w->trace);
	}
	free(w->data);
	free(w);
	if (inc->phase == CL_COLLECTING)
		cl_check_collected(inc);
	else
		cl_check_fetched(inc);
}

static void cl_write_after(uv_work_t *req, int status)
{
	struct cl_write *w = req->data;
	struct flightrecd *d = w->inc->d;

	(void)status;
	pthread_mutex_lock(&d->lock);
	cl_write_apply(w);
	pthread_mutex_unlock(&d->lock);
}

/*
 * The node whose file node `i`'s summaries go to: itself, or past
 * CL_NODE_FILES_MAX nodes the first of its group of consecutive nodes.
 * A file a node at 8,192 nodes (8 GPUs each) was 8,192 files created per
 * incident, 38% of the central daemon's CPU in ext4's inode allocation,
 * and as many descriptors held open beside the nodes' sockets.
 */
static size_t cl_nodes_per_file(const struct cl_incident *inc)
{
	return (inc->nnodes + CL_NODE_FILES_MAX - 1) / CL_NODE_FILES_MAX;
}

static int cl_file_node(const struct cl_incident *inc, int i)
{
	size_t per = cl_nodes_per_file(inc);

	return per > 1 ? (int)((size_t)i - (size_t)i % per) : i;
}

/*
 * The file node `i`'s summaries are appended to, opened at the first
 * summary of its group: summaries-<node>.jsonl, or summaries-node<i>.jsonl
 * when the node's name is not one a file may have; a group's
 * summaries-nodes<g>.jsonl. O_APPEND: each line is one write, whoever
 * shares the file. Returns its descriptor, or a negative errno.
 */
static int cl_node_file(struct cl_incident *inc, int i)
{
	struct cl_node *n, *f;
	char path[sizeof(inc->dir) + sizeof(n->file) + 1];
	int k;

	if (i < 0)
		return -EINVAL;
	n = &inc->nodes[i];
	k = cl_file_node(inc, i);
	f = &inc->nodes[k];
	if (f->fd == CL_FD_NONE) {
		if (cl_nodes_per_file(inc) > 1)
			snprintf(f->file, sizeof(f->file), "summaries-nodes%zu.jsonl",
				 (size_t)k / cl_nodes_per_file(inc));
		else if (fr_wire_valid_name(f->name))
			snprintf(f->file, sizeof(f->file), "summaries-%s.jsonl", f->name);
		else
			snprintf(f->file, sizeof(f->file), "summaries-node%d.jsonl", k);
		snprintf(path, sizeof(path), "%s/%s", inc->dir, f->file);
		f->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_CLOEXEC,
			     0640);
		if (f->fd < 0) {
			f->fd = -errno;
			daemon_log("incident %s of job %s: cannot create %s: %s", inc->id,
				   inc->job->id, path, strerror(errno));
		}
	}
	if (n != f)
		memcpy(n->file, f->file, sizeof(n->file));
	return f->fd;
}

/* Rank `rank`'s upload is whole: write it off the loop. */
static void cl_upload_complete(struct cl_incident *inc, uint32_t rank, bool full)
{
	struct cl_rank *cr = &inc->ranks[rank];
	struct cl_write *w = calloc(1, sizeof(*w));

	if (!w) {
		cl_set_error(cr, "out of memory");
		cl_drop_upload(cr);
		if (full)
			cr->fetching = false;
		else
			cr->answer = CL_FAILED;
		return;
	}
	w->req.data = w;
	w->inc = inc;
	w->rank = rank;
	w->full = full;
	w->fd = full ? -1 : cl_node_file(inc, cr->node);
	snprintf(w->job, sizeof(w->job), "%s", inc->job->id);
	snprintf(w->path, sizeof(w->path), "%s/rank-%" PRIu32 ".json", inc->dir, rank);
	if (!full && w->fd < 0) {
		cl_set_error(cr, "cannot create %s: %s",
			     cr->node >= 0 ? inc->nodes[cr->node].file : "its node's file",
			     strerror(-w->fd));
		cl_drop_upload(cr);
		free(w);
		cr->answer = CL_FAILED;
		inc->d->m.incident_write_errors++;
		return;
	}
	w->charged = cr->up->charged;
	w->data = upload_take(cr->up, &w->len);
	free(cr->up);
	cr->up = NULL;
	if (!full)
		cr->answer = CL_WRITING;
	inc->writes++;
	inc->d->m.dumps_received++;
	if (uv_queue_work(inc->d->loop, &w->req, cl_write_work, cl_write_after)) {
		cl_write_work(&w->req);
		cl_write_apply(w);
	}
}

/* Charges the budget (the daemon's; no registry job holds these). */
static bool cl_charge(void *ctx, struct upload *up, uint64_t grow, uint32_t len, char *why,
		      size_t cap)
{
	(void)ctx;
	(void)len;
	return incident_charge_upload(NULL, up, grow, why, cap);
}

/*
 * Adds piece `m` to `*upp` (started at offset 0). Returns the upload's
 * step; on UPLOAD_ERROR `why` says why and the upload is let go.
 */
static enum upload_step cl_append(struct upload **upp, const struct fr_msg_node_summary *m,
				  uint64_t max, char *why, size_t cap)
{
	struct fr_msg_dump_data piece = { .offset = m->offset, .total = m->total, .len = m->len,
					  .data = m->data };
	struct upload none = { 0 };
	enum upload_step step;
	int err;

	snprintf(piece.incident, sizeof(piece.incident), "%s", m->incident);
	if (m->offset == 0) {
		if (*upp) {
			budget_release_job(NULL, BUDGET_UPLOADS, (*upp)->charged);
			upload_reset(*upp);
		} else if (!(*upp = calloc(1, sizeof(**upp)))) {
			snprintf(why, cap, "out of memory");
			return UPLOAD_ERROR;
		}
		err = upload_begin(*upp, m->incident, m->total, max);
		if (err) {
			snprintf(why, cap, "dump of %" PRIu64 " bytes is over --max-dump-size %" PRIu64,
				 m->total, max);
			goto out_drop;
		}
	}
	step = upload_append(*upp ? *upp : &none, &piece, cl_charge, NULL, why, cap);
	if (step != UPLOAD_ERROR)
		return step;
out_drop:
	if (*upp) {
		budget_release_job(NULL, BUDGET_UPLOADS, (*upp)->charged);
		upload_reset(*upp);
		free(*upp);
		*upp = NULL;
	}
	return UPLOAD_ERROR;
}

/* Judging: the summaries as fr-analyze reads them from the directory. */

struct cl_judgement {
	uv_work_t req;
	struct cl_incident *inc;
	char dir[PATH_MAX];
	uint32_t world_size;
	/* The summaries as parsed (the incident's, handed over), or NULL:
	 * read the directory. `charged` goes with them. */
	struct fr_trace **traces;
	uint64_t charged;
	json_t *verdict;
	uint32_t *culprits;
	size_t nculprits;
	char summary[1024];
	char err[256];
	/* What was judged, freed on the thread pool (`release`) once the
	 * verdict is applied: 0.2 s at 65,536 ranks that the incident need
	 * not wait for. */
	struct fr_evidence ev;
	uv_work_t release;
};

static void cl_judge_work(uv_work_t *req)
{
	struct cl_judgement *jw = req->data;
	struct fr_evidence *ev = &jw->ev;
	struct fr_verdict v = { 0 };
	int rc;

	pool_background();

	if (jw->traces) {
		/* Each rank's node and node file are settled: no summary is
		 * taken while judging. */
		const struct cl_incident *inc = jw->inc;
		char path[PATH_MAX + sizeof(inc->nodes[0].file) + 1];

		rc = 0;
		for (uint32_t r = 0; !rc && r < jw->world_size; r++) {
			const struct cl_rank *cr = &inc->ranks[r];

			if (!jw->traces[r])
				continue;
			snprintf(path, sizeof(path), "%s/%s", jw->dir,
				 cr->node >= 0 ? inc->nodes[cr->node].file : "?");
			rc = fr_evidence_add_dump(ev, jw->traces[r], path);
			if (!rc)
				jw->traces[r] = NULL;
		}
		if (!rc)
			rc = fr_evidence_assemble(ev, jw->dir);
	} else {
		rc = fr_evidence_load_dir(ev, jw->dir);
	}
	if (rc) {
		snprintf(jw->err, sizeof(jw->err), "%s", ev->error ? ev->error : strerror(-rc));
		return;
	}
	rc = fr_correlate(ev->traces, ev->ntraces, ev->world_size ? ev->world_size : jw->world_size, &v);
	if (rc == 0 && fr_verdict_name_silent(&v, ev->traces, ev->ntraces) < 0)
		rc = -ENOMEM;
	if (rc) {
		snprintf(jw->err, sizeof(jw->err), "correlating: %s", strerror(-rc));
		return;
	}
	jw->verdict = fr_verdict_to_json(&v);
	snprintf(jw->summary, sizeof(jw->summary), "%s", v.summary);
	jw->culprits = calloc(v.nculprits ? v.nculprits : 1, sizeof(*jw->culprits));
	for (size_t i = 0; jw->culprits && i < v.nculprits; i++)
		jw->culprits[jw->nculprits++] = v.culprits[i].rank;
	fr_verdict_free(&v);
}

/* What a judgement read, freed: the bulk of it, and the part of its
 * memory the thread pool frees (cl_release_work()). */
static void cl_judged_free(struct cl_judgement *jw)
{
	fr_evidence_free(&jw->ev);
	cl_free_traces(jw->traces, jw->world_size);
	jw->traces = NULL;
}

/* A judgement, and all it holds, freed. */
static void cl_judgement_free(struct cl_judgement *jw)
{
	cl_judged_free(jw);
	budget_release_job(NULL, BUDGET_UPLOADS, jw->charged);
	json_decref(jw->verdict);
	free(jw->culprits);
	free(jw);
}

static void cl_release_work(uv_work_t *req)
{
	struct cl_judgement *jw = req->data;

	pool_background();
	cl_judged_free(jw);
}

static void cl_release_after(uv_work_t *req, int status)
{
	(void)status;
	cl_judgement_free(req->data);
}

/* Asks the culprits' nodes for their full dumps. */
static void cl_fetch_culprits(struct cl_incident *inc, const uint32_t *culprits, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t r = culprits[i];
		struct cl_rank *cr = r < inc->world_size ? &inc->ranks[r] : NULL;
		struct fr_msg_node_fetch m = { .rank = r };
		struct conn *c;

		if (!cr || !cr->written || cr->fetching || cr->node < 0)
			continue;
		c = cl_node_conn(inc, cr->node);
		if (!c) {
			cr->fetch_asked = true;
			cl_set_error(cr, "its full dump stays on node %s, which is lost",
				     inc->nodes[cr->node].name);
			continue;
		}
		snprintf(m.incident, sizeof(m.incident), "%s", inc->id);
		snprintf(m.job, sizeof(m.job), "%s", inc->job->id);
		cr->fetch_asked = true;
		if (conn_send_node_fetch(c, &m) == 0)
			cr->fetching = true;
	}
}

/* The judgement applied: the verdict kept, the culprits' full dumps asked
 * for. The caller holds the lock. */
static void cl_judge_apply(struct cl_judgement *jw)
{
	struct cl_incident *inc = jw->inc;
	struct flightrecd *d = inc->d;

	if (jw->verdict) {
		json_decref(inc->verdict);
		inc->verdict = jw->verdict;
		snprintf(cl_record(inc)->summary, sizeof(cl_record(inc)->summary), "%s", jw->summary);
		daemon_log("incident %s of job %s: the summaries say: %s", inc->id, inc->job->id,
			   jw->summary);
	} else {
		daemon_log("incident %s of job %s: cannot judge its summaries: %s", inc->id,
			   inc->job->id, jw->err);
	}
	jw->verdict = NULL;
	inc->phase = CL_FETCHING;
	inc->deadline_mono = daemon_mono_ns() + (uint64_t)(d->cfg.dump_deadline_s * NS_PER_S);
	if (!inc->incomplete)
		cl_fetch_culprits(inc, jw->culprits, jw->nculprits);
	cl_check_fetched(inc);
	jw->release.data = jw;
	if (uv_queue_work(d->loop, &jw->release, cl_release_work, cl_release_after))
		cl_judgement_free(jw);
}

static void cl_judge_after(uv_work_t *req, int status)
{
	struct cl_judgement *jw = req->data;
	struct flightrecd *d = jw->inc->d;

	(void)status;
	pthread_mutex_lock(&d->lock);
	/* The manifest's ranks are still being read: nothing changes them
	 * until they are. */
	if (jw->inc->prebuilding)
		jw->inc->judged = jw;
	else
		cl_judge_apply(jw);
	pthread_mutex_unlock(&d->lock);
}

/* The summaries' write-back, started while they are judged: the
 * manifest's sync then finds little left to write (it took 0.8 s for
 * 1 GiB of summaries at 65,536 ranks when it found it all). */
struct cl_presync {
	uv_work_t req;
	char dir[PATH_MAX];
};

static void cl_presync_work(uv_work_t *req)
{
	struct cl_presync *ps = req->data;

	pool_background();

	/* An error here is the manifest's sync's to report. */
	(void)fr_sync_dir(ps->dir);
}

static void cl_presync_after(uv_work_t *req, int status)
{
	(void)status;
	free(req->data);
}

static void cl_presync(struct cl_incident *inc)
{
	struct cl_presync *ps = malloc(sizeof(*ps));

	if (!ps)
		return;
	ps->req.data = ps;
	snprintf(ps->dir, sizeof(ps->dir), "%s", inc->dir);
	if (uv_queue_work(inc->d->loop, &ps->req, cl_presync_work, cl_presync_after))
		free(ps);
}

static void cl_judge(struct cl_incident *inc)
{
	struct cl_judgement *jw = calloc(1, sizeof(*jw));

	cl_presync(inc);
	inc->phase = CL_JUDGING;
	if (!jw) {
		inc->phase = CL_FETCHING;
		cl_check_fetched(inc);
		return;
	}
	jw->req.data = jw;
	jw->inc = inc;
	jw->world_size = inc->world_size;
	snprintf(jw->dir, sizeof(jw->dir), "%s", inc->dir);
	if (inc->traces && !inc->traces_lost) {
		jw->traces = inc->traces;
		jw->charged = inc->traces_charged;
		inc->traces = NULL;
		inc->traces_charged = 0;
	}
	if (uv_queue_work(inc->d->loop, &jw->req, cl_judge_work, cl_judge_after)) {
		/* The lock is held: the work runs here and applies without it. */
		cl_judge_work(&jw->req);
		cl_judgement_free(jw);
		inc->phase = CL_FETCHING;
		cl_check_fetched(inc);
		return;
	}
	cl_prebuild(inc);
}

/* Finishing: the manifest, as incident.c writes it. */

static enum fr_rank_status cl_status(enum cl_answer a)
{
	switch (a) {
	case CL_RECEIVED:
		return FR_RANK_DUMPED;
	case CL_NOT_HELD:
		return FR_RANK_MISSING;
	default:
		return FR_RANK_UNRESPONSIVE;
	}
}

/*
 * The manifest's "kernel_log": each node's as it sent it, or why there is
 * none, so that fr-analyze says which nodes' logs it lacks. Without
 * memory for it, the manifest goes without.
 */
static void cl_manifest_klogs(const struct cl_incident *inc, json_t *doc)
{
	json_t *arr = json_array();
	int bad = !arr;

	for (size_t i = 0; i < inc->nnodes && !bad; i++) {
		const struct cl_node *n = &inc->nodes[i];
		struct fr_klog none = { .available = false };
		json_t *o = n->klog ? json_loads(n->klog, 0, NULL) : NULL;

		if (!n->klog) {
			snprintf(none.node, sizeof(none.node), "%s", n->name);
			snprintf(none.error, sizeof(none.error),
				 n->done ? "node %s sent no kernel log (a node daemon of protocol 6 or "
					   "older, or its incident did not open)" :
					   "node %s sent no kernel log (it did not finish its incident)",
				 n->name);
			o = fr_klog_to_json(&none);
		}
		bad |= !o || json_array_append_new(arr, o);
	}
	if (bad || json_object_set_new(doc, "kernel_log", arr) ||
	    json_object_set_new(doc, "version", json_string(FR_MANIFEST_VERSION_KLOG))) {
		if (bad)
			json_decref(arr);
		json_object_del(doc, "kernel_log");
	}
}

/* What became of rank `rank`, in its object of the manifest's "ranks". */
static void cl_manifest_rank(json_t *obj, const struct cl_incident *inc, uint32_t rank)
{
	const struct cl_rank *cr = &inc->ranks[rank];
	char name[32];

	snprintf(name, sizeof(name), "rank-%" PRIu32 ".json", rank);
	json_object_set_new(obj, "dump", !cr->written ? json_null() :
					 cr->full || cr->node < 0 ? json_string(name) :
					 json_string(inc->nodes[cr->node].file));
	json_object_set_new(obj, "answer", json_string(cl_answer_names[cr->answer]));
	json_object_set_new(obj, "error", cr->error ? json_string(cr->error) : json_null());
	json_object_set_new(obj, "node", cr->node >= 0 ? json_string(inc->nodes[cr->node].name) :
							 json_null());
	json_object_set_new(obj, "full_dump", json_boolean(cr->full));
}

/* Ranks whose views are made at a time (cl_manifest_ranks()): a view is
 * a whole struct fr_trace, 1.2 KB, 160 MB at once for a world of 131,072. */
#define CL_VIEWS_CHUNK 4096u

/*
 * The manifest with every rank's entry, as of `view_ns`, and `verdict`
 * (borrowed, may be NULL): a rank's entry reads its cl_rank, nothing
 * else of the incident that changes. The views (identity and status:
 * the summaries say the rest) are made CL_VIEWS_CHUNK ranks at a time.
 */
static json_t *cl_manifest_ranks(const struct cl_incident *inc, uint64_t view_ns, json_t *verdict)
{
	uint32_t chunk = inc->world_size < CL_VIEWS_CHUNK ? inc->world_size : CL_VIEWS_CHUNK;
	struct fr_trace *views = calloc(chunk ? chunk : 1, sizeof(*views));
	const struct fr_trace **ptrs = calloc(chunk ? chunk : 1, sizeof(*ptrs));
	json_t *doc = NULL, *ranks = NULL, *part, *obj;
	size_t i;

	if (!views || !ptrs)
		goto out;
	for (uint32_t first = 0; first < inc->world_size; first += chunk) {
		uint32_t n = inc->world_size - first < chunk ? inc->world_size - first : chunk;

		memset(views, 0, n * sizeof(*views));
		for (uint32_t k = 0; k < n; k++) {
			uint32_t r = first + k;
			struct fr_trace *t = &views[k];

			t->status = cl_status(inc->ranks[r].answer);
			snprintf(t->job, sizeof(t->job), "%s", inc->job->id);
			t->rank = r;
			t->world_size = inc->world_size;
			snprintf(t->host, sizeof(t->host), "%s", inc->ranks[r].host);
			t->pid = inc->ranks[r].pid;
			snprintf(t->incident, sizeof(t->incident), "%s", inc->id);
			snprintf(t->reason, sizeof(t->reason), "%s", inc->reason);
			t->time_ns = view_ns;
			ptrs[k] = t;
		}
		part = fr_manifest_to_json(inc->job->id, inc->id, inc->reason, inc->world_size,
					   inc->opened_ns, view_ns, ptrs, n, verdict);
		if (!part)
			goto fail;
		json_array_foreach(json_object_get(part, "ranks"), i, obj) {
			json_t *jr = json_object_get(obj, "rank");
			json_int_t rank = json_is_integer(jr) ? json_integer_value(jr) :
								(json_int_t)(first + i);

			if (rank >= 0 && (uint64_t)rank < inc->world_size)
				cl_manifest_rank(obj, inc, (uint32_t)rank);
		}
		if (!doc) {
			doc = part;
			ranks = json_object_get(doc, "ranks");
			continue;
		}
		/* The first part's document takes the others' ranks. */
		if (json_array_extend(ranks, json_object_get(part, "ranks"))) {
			json_decref(part);
			goto fail;
		}
		json_decref(part);
	}
	goto out;
fail:
	json_decref(doc);
	doc = NULL;
out:
	free(views);
	free(ptrs);
	return doc;
}

/* What the manifest says of the incident as it closes. */
static void cl_manifest_close(struct cl_incident *inc, json_t *doc)
{
	json_object_set_new(doc, "closed_ns", json_integer((json_int_t)inc->closed_ns));
	json_object_set(doc, "verdict", inc->verdict ? inc->verdict : json_null());
	json_object_set_new(doc, "trigger", incident_trigger_json(&inc->trigger));
	json_object_set_new(doc, "detected_ns", json_integer((json_int_t)inc->detected_ns));
	json_object_set_new(doc, "incomplete", json_boolean(inc->incomplete));
	cl_manifest_klogs(inc, doc);
}

static json_t *cl_manifest_doc(struct cl_incident *inc)
{
	json_t *doc = cl_manifest_ranks(inc, inc->closed_ns, inc->verdict);

	if (doc)
		cl_manifest_close(inc, doc);
	return doc;
}

/*
 * The manifest made while the summaries were judged, brought up to date:
 * the entries of the ranks whose full dump was asked for since, and what
 * it says of the incident as it closes.
 */
static json_t *cl_manifest_prebuilt(struct cl_incident *inc)
{
	json_t *doc = inc->prebuilt, *ranks = json_object_get(doc, "ranks");

	inc->prebuilt = NULL;
	for (uint32_t r = 0; r < inc->world_size; r++) {
		json_t *obj = json_array_get(ranks, r);

		if (inc->ranks[r].fetch_asked && obj)
			cl_manifest_rank(obj, inc, r);
	}
	cl_manifest_close(inc, doc);
	return doc;
}

/* The manifest's ranks, made on the thread pool while the summaries are judged. */
struct cl_prebuild {
	uv_work_t req;
	struct cl_incident *inc;
	uint64_t view_ns;
	json_t *doc;
};

static void cl_prebuild_work(uv_work_t *req)
{
	struct cl_prebuild *pb = req->data;

	pool_background();

	pb->doc = cl_manifest_ranks(pb->inc, pb->view_ns, NULL);
}

static void cl_prebuild_after(uv_work_t *req, int status)
{
	struct cl_prebuild *pb = req->data;
	struct cl_incident *inc = pb->inc;
	struct flightrecd *d = inc->d;

	(void)status;
	pthread_mutex_lock(&d->lock);
	inc->prebuilding = false;
	inc->prebuilt = pb->doc;
	if (inc->judged) {
		struct cl_judgement *jw = inc->judged;

		inc->judged = NULL;
		cl_judge_apply(jw);
	}
	pthread_mutex_unlock(&d->lock);
	free(pb);
}

/* Starts making the manifest's ranks: every answer is in, none changes
 * before the judgement is applied. Without memory, the manifest is made
 * whole at the end. */
static void cl_prebuild(struct cl_incident *inc)
{
	struct cl_prebuild *pb = calloc(1, sizeof(*pb));

	if (!pb)
		return;
	pb->req.data = pb;
	pb->inc = inc;
	pb->view_ns = daemon_now_ns();
	inc->prebuilding = true;
	if (uv_queue_work(inc->d->loop, &pb->req, cl_prebuild_work, cl_prebuild_after)) {
		inc->prebuilding = false;
		free(pb);
	}
}

/* The manifest is written (or could not be): the incident is over. */
static void cl_done(void *arg, int err)
{
	struct cl_incident *inc = arg;
	struct incident_record *rec = cl_record(inc);

	(void)err;
	cl_update_record(inc);
	rec->closed_ns = inc->closed_ns;
	rec->incomplete = inc->incomplete;
	incident_log_closed(rec, inc->job->id, inc->dir);
	cl_set_active(inc->job, NULL);
	cl_incident_free(inc);
}

/* incident_build_manifest()'s builder: nothing the manifest says of the
 * incident changes while it is finishing (answers come no more). */
static json_t *cl_manifest_build(void *arg)
{
	return cl_manifest_doc(arg);
}

static void cl_finish(struct cl_incident *inc)
{
	inc->phase = CL_FINISHING;
	inc->closed_ns = daemon_now_ns();
	if (inc->prebuilt)
		incident_write_manifest(inc->d, inc->dir, cl_manifest_prebuilt(inc), cl_done, inc);
	else
		incident_build_manifest(inc->d, inc->dir, cl_manifest_build, cl_done, inc);
}

/* Opening */

struct cl_open_ctx {
	struct cl_incident *inc;
	int err;
};

/* nodes_job_each_node(): notes a node and its ranks. */
static void cl_open_node(void *arg, const char *node, struct conn *conn,
			 const struct fr_node_rank *ranks, uint32_t nranks)
{
	struct cl_open_ctx *ctx = arg;
	struct cl_incident *inc = ctx->inc;
	struct cl_node *nodes;
	int idx = (int)inc->nnodes;

	if (fr_grow((void **)&inc->nodes, &inc->nodes_cap, inc->nnodes + 1, sizeof(*nodes), 64)) {
		ctx->err = -ENOMEM;
		return;
	}
	nodes = inc->nodes;
	memset(&nodes[idx], 0, sizeof(nodes[idx]));
	nodes[idx].fd = CL_FD_NONE;
	snprintf(nodes[idx].name, sizeof(nodes[idx].name), "%s", node);
	nodes[idx].done = !conn;
	inc->nodes_pending += !!conn;
	inc->nnodes++;
	if (nranks && !(nodes[idx].ranks = malloc(nranks * sizeof(*nodes[idx].ranks)))) {
		ctx->err = -ENOMEM;
		return;
	}
	for (uint32_t i = 0; i < nranks; i++) {
		struct cl_rank *cr;

		if (ranks[i].rank >= inc->world_size)
			continue;
		nodes[idx].ranks[nodes[idx].nranks++] = ranks[i].rank;
		cr = &inc->ranks[ranks[i].rank];
		if (cr->node >= 0) {
			/* nodes.c gives a rank one holder; should two still
			 * say so, the first keeps it and the other's summary
			 * of it is refused. */
			ratelog("cluster rank conflict", inc->job->id,
				"incident %s of job %s: rank %" PRIu32
				" is claimed by node %s and node %s; %s keeps it",
				inc->id, inc->job->id, ranks[i].rank, nodes[cr->node].name, node,
				nodes[cr->node].name);
			continue;
		}
		cr->node = idx;
		snprintf(cr->host, sizeof(cr->host), "%s", ranks[i].host);
		cr->pid = ranks[i].pid;
		if (conn) {
			cr->answer = CL_PENDING;
		} else {
			cr->answer = CL_LOST;
			cl_set_error(cr, "node lost: %s", node);
		}
	}
}

/* The incident's NODE_DUMP_REQUEST. */
static void cl_request_msg(const struct cl_incident *inc, struct fr_msg_node_dump_request *m)
{
	*m = (struct fr_msg_node_dump_request){ .has_seq = inc->trigger.has_seq,
						.seq = inc->trigger.seq };
	snprintf(m->incident, sizeof(m->incident), "%s", inc->id);
	snprintf(m->job, sizeof(m->job), "%s", inc->job->id);
	snprintf(m->reason, sizeof(m->reason), "%s", inc->reason);
	snprintf(m->comm, sizeof(m->comm), "%s", inc->trigger.comm);
}

/* Sends NODE_DUMP_REQUEST to every node connected; one that cannot be sent to is lost. */
static void cl_request_all(struct cl_incident *inc)
{
	struct fr_msg_node_dump_request m;

	cl_request_msg(inc, &m);
	for (size_t i = 0; i < inc->nnodes; i++) {
		struct conn *c;

		if (inc->nodes[i].done)
			continue;
		c = cl_node_conn(inc, (int)i);
		if (!c || conn_send_node_dump_request(c, &m))
			cluster_incident_node_lost(inc->d, inc->nodes[i].name);
	}
}

/* Opens the incident; returns 0, -EBUSY (one collecting), -EDQUOT (rate; *retry set), or an error. */
static int cl_open(struct flightrecd *d, const char *job, const struct incident_trigger *t,
		   json_t *verdict, uint64_t *retry_after)
{
	struct cl_job *j = cl_job_find(job);
	struct cl_open_ctx ctx = { 0 };
	struct cl_incident *inc;
	uint32_t world_size = 0;
	json_t *summary;
	int err;

	if (j && j->active)
		return -EBUSY;
	/* Before cl_job_get(), which finds no record to reuse while every
	 * one is active. */
	if (cl.nopen >= CLUSTER_OPEN_MAX) {
		d->m.cluster_incidents_deferred++;
		ratelog("cluster incidents open", job,
			"job %s: incident (%s) not opened: %d incidents are collecting already (the cap on node-held jobs' incidents at once); tried again on a later pass",
			job, t->reason, CLUSTER_OPEN_MAX);
		return -ENOSPC;
	}
	if (!nodes_job_known(job, &world_size) || !world_size)
		return -ENOENT;
	j = cl_job_get(job);
	if (!j)
		return -ENOMEM;
	if (!incident_bucket_allows(d, &j->budget, &j->budget_set, &j->budget_mono,
				    daemon_mono_ns(), retry_after)) {
		d->m.incidents_suppressed++;
		ratelog("incident rate", job,
			"job %s: incident (%s) suppressed: over --max-incidents-per-hour %" PRIu32
			"; the next may open in %" PRIu64 " s",
			job, t->reason, d->cfg.max_incidents_per_hour, *retry_after);
		return -EDQUOT;
	}
	inc = calloc(1, sizeof(*inc));
	if (!inc)
		return -ENOMEM;
	/* A rank's record costs some 300 bytes: 30 MB at 100,000 ranks, held
	 * like the uploads it waits for, within --max-memory. */
	inc->charged = (uint64_t)world_size * sizeof(*inc->ranks);
	if (!budget_charge_job(NULL, BUDGET_UPLOADS, inc->charged)) {
		daemon_log("cannot open an incident for job %s: its %" PRIu32
			   " ranks' records are over the daemon's memory budget (--max-memory %" PRIu64 ")",
			   job, world_size, budget_max());
		free(inc);
		return -ENOMEM;
	}
	inc->ranks = calloc(world_size, sizeof(*inc->ranks));
	if (!inc->ranks) {
		cl_incident_free(inc);
		return -ENOMEM;
	}
	/* Without it (no memory), the judging reads the directory. */
	if (budget_charge_job(NULL, BUDGET_UPLOADS, (uint64_t)world_size * sizeof(*inc->traces))) {
		inc->traces = calloc(world_size, sizeof(*inc->traces));
		if (inc->traces)
			inc->charged += (uint64_t)world_size * sizeof(*inc->traces);
		else
			budget_release_job(NULL, BUDGET_UPLOADS, (uint64_t)world_size * sizeof(*inc->traces));
	}
	inc->d = d;
	inc->job = j;
	inc->world_size = world_size;
	inc->trigger = *t;
	snprintf(inc->reason, sizeof(inc->reason), "%s", t->reason);
	inc->trigger.reason = inc->reason;
	for (uint32_t r = 0; r < world_size; r++)
		inc->ranks[r].node = -1;
	inc->detected_ns = daemon_now_ns();
	err = incident_make_dir_for(d, job, inc->detected_ns, inc->id, sizeof(inc->id), inc->dir,
				    sizeof(inc->dir));
	if (err) {
		daemon_log("cannot create the incident directory for job %s under %s: %s", job,
			   d->cfg.dump_dir, strerror(-err));
		d->m.incident_write_errors++;
		cl_incident_free(inc);
		return err;
	}
	/* Before its record, which says when it opened. */
	inc->opened_ns = daemon_now_ns();
	ctx.inc = inc;
	nodes_job_each_node(job, cl_open_node, &ctx);
	cl_index_nodes(inc);
	summary = verdict ? json_object_get(verdict, "summary") : NULL;
	if (ctx.err || cl_add_record(inc, json_is_string(summary) ? json_string_value(summary) :
				     "asked for; the nodes' summaries are being collected")) {
		cl_incident_free(inc);
		return -ENOMEM;
	}
	inc->verdict = verdict ? json_incref(verdict) : NULL;
	inc->deadline_mono = daemon_mono_ns() + (uint64_t)(d->cfg.dump_deadline_s * NS_PER_S);
	inc->stretch_until_mono = inc->deadline_mono +
				  (uint64_t)(d->cfg.dump_deadline_s * NS_PER_S) * (CL_STRETCH_DEADLINES - 1);
	cl_set_active(j, inc);
	j->budget -= 1.0;
	d->m.incidents++;
	daemon_log("incident %s opened for job %s (held by %zu node%s): reason %s%s%s", inc->id, job,
		   inc->nnodes, inc->nnodes == 1 ? "" : "s", inc->reason,
		   t->comm[0] ? ", comm " : "", t->comm);
	cl_request_all(inc);
	cl_update_record(inc);
	cl_check_collected(inc);
	return 0;
}

int cluster_incident_open(struct flightrecd *d, const char *job, const struct incident_trigger *t,
			  json_t *verdict)
{
	uint64_t retry_after = 0;
	int err = cl_open(d, job, t, verdict, &retry_after);

	if (err && err != -EDQUOT && err != -EBUSY && err != -ENOSPC)
		daemon_log("cannot open an incident for job %s: %s", job, strerror(-err));
	return err;
}

/* Whether the death of `rank` (process `pid`) was reported. */
static bool cl_death_seen(const struct cl_job *j, uint32_t rank, uint32_t pid)
{
	size_t n = j->ndeaths < CL_DEATHS_KEPT ? j->ndeaths : CL_DEATHS_KEPT;

	for (size_t i = 0; i < n; i++)
		if (j->deaths[i].rank == rank && j->deaths[i].pid == pid)
			return true;
	return false;
}

static void cl_death_note(struct cl_job *j, uint32_t rank, uint32_t pid)
{
	size_t i = j->ndeaths++ % CL_DEATHS_KEPT;

	j->deaths[i].rank = rank;
	j->deaths[i].pid = pid;
}

void cluster_incident_death(struct flightrecd *d, const char *job, uint32_t rank, uint32_t pid,
			    uint8_t state)
{
	struct incident_trigger t = { .rank = (int32_t)rank };
	const char *what = state == FR_NODE_RANK_CRASHED ? "crashed" :
			   state == FR_NODE_RANK_EXITED	 ? "exited" :
							   "was killed";
	struct cl_job *j = cl_job_get(job);
	uint64_t retry_after = 0;
	int err;

	if (j && cl_death_seen(j, rank, pid))
		return;
	t.reason = state == FR_NODE_RANK_CRASHED ? "crash" :
		   state == FR_NODE_RANK_EXITED	 ? "exited" :
						   "killed";
	err = cl_open(d, job, &t, NULL, &retry_after);
	if (j && (!err || err == -EBUSY))
		cl_death_note(j, rank, pid);
	if (err == -EBUSY)
		daemon_log("job %s: rank %" PRIu32 " %s while an incident is collecting; its manifest "
			   "shows it", job, rank, what);
	else if (err && err != -EDQUOT && err != -ENOSPC)
		daemon_log("cannot open an incident for job %s: %s", job, strerror(-err));
}

unsigned cluster_incident_manual(struct flightrecd *d, const char *job, char *id, size_t idcap,
				 uint32_t *requested, uint64_t *retry_after_s, char *error,
				 size_t errcap)
{
	struct incident_trigger t = { .reason = "manual", .rank = -1 };
	struct cl_job *j;
	int err = cl_open(d, job, &t, NULL, retry_after_s);

	switch (err) {
	case 0:
		j = cl_job_find(job);
		snprintf(id, idcap, "%s", j->records[j->nrecords - 1].id);
		*requested = j->records[j->nrecords - 1].requested;
		return MHD_HTTP_ACCEPTED;
	case -ENOENT:
		snprintf(error, errcap, "no such job");
		return MHD_HTTP_NOT_FOUND;
	case -EBUSY:
		j = cl_job_find(job);
		snprintf(error, errcap, "incident %s of the job is being collected",
			 j && j->active ? j->active->id : "?");
		return MHD_HTTP_CONFLICT;
	case -ENOSPC:
		snprintf(error, errcap,
			 "%d incidents are collecting already; try again once one closed",
			 CLUSTER_OPEN_MAX);
		return MHD_HTTP_SERVICE_UNAVAILABLE;
	case -EDQUOT:
		snprintf(error, errcap,
			 "the job opened --max-incidents-per-hour %" PRIu32
			 " incidents; the next may open in %" PRIu64 " s",
			 d->cfg.max_incidents_per_hour, *retry_after_s);
		return MHD_HTTP_TOO_MANY_REQUESTS;
	default:
		snprintf(error, errcap, "the incident could not be opened: %s", strerror(-err));
		return MHD_HTTP_INTERNAL_SERVER_ERROR;
	}
}

/* What the nodes send */

/* Rank `cr` has no summary (or, `full`, no full dump) for `why`. */
static void cl_refuse(struct cl_incident *inc, struct cl_rank *cr, bool full, const char *why)
{
	if (full) {
		cl_stop_fetch(cr, why);
		cl_check_fetched(inc);
		return;
	}
	cl_drop_upload(cr);
	cl_answered(inc, cr, CL_FAILED);
	cl_set_error(cr, "%s", why);
}

/* A piece of a full dump asked for over HTTP; true when one was waiting for it. */
static bool cl_fetch_piece(struct flightrecd *d, const char *node,
			   const struct fr_msg_node_summary *m);

void cluster_incident_summary(struct flightrecd *d, const char *node,
			      const struct fr_msg_node_summary *m)
{
	struct cl_job *j = cl_job_find(m->job);
	struct cl_incident *inc = j ? j->active : NULL;
	struct cl_rank *cr;
	bool full = m->flags & FR_NODE_SUMMARY_FULL;
	char why[256];

	if (full && cl_fetch_piece(d, node, m))
		return;
	if (!inc || strcmp(inc->id, m->incident) != 0 || m->rank >= inc->world_size)
		goto ignore;
	cr = &inc->ranks[m->rank];
	/* A node answers for its own ranks only, at the step it was asked. */
	if (cr->node < 0 || strcmp(inc->nodes[cr->node].name, node) != 0)
		goto ignore;
	if (full ? !cr->fetching || inc->phase != CL_FETCHING :
		   cr->answer != CL_PENDING || inc->phase != CL_COLLECTING)
		goto ignore;
	if (!full)
		inc->nodes[cr->node].piece_mono = daemon_mono_ns();
	if (m->flags & FR_NODE_SUMMARY_FAILED) {
		cl_refuse(inc, cr, full, m->reason);
		return;
	}
	switch (cl_append(&cr->up, m, d->cfg.max_dump_size, why, sizeof(why))) {
	case UPLOAD_ERROR:
		d->m.dumps_rejected++;
		ratelog("dump upload", j->id, "rejected the %s of job %s rank %" PRIu32 " for incident %s: %s",
			full ? "full dump" : "summary", j->id, m->rank, inc->id, why);
		cl_refuse(inc, cr, full, why);
		break;
	case UPLOAD_COMPLETE:
		cl_upload_complete(inc, m->rank, full);
		break;
	case UPLOAD_MORE:
		break;
	}
	return;
ignore:
	/* Once per node a minute: a node that answers late answers for
	 * every one of its ranks. */
	if (m->offset == 0)
		ratelog("late answer", node,
			"ignoring node %s's %s of job %s rank %" PRIu32 " for incident %s: not being collected from it",
			node, full ? "full dump" : "summary", m->job, m->rank, m->incident);
}

void cluster_incident_node_done(struct flightrecd *d, const char *node,
				const struct fr_msg_node_dump_done *m)
{
	struct cl_job *j = cl_job_find(m->job);
	struct cl_incident *inc = j ? j->active : NULL;
	int i;

	(void)d;
	if (!inc || strcmp(inc->id, m->incident) != 0 || (i = cl_node_index(inc, node)) < 0)
		return;
	cl_node_done(inc, (size_t)i);
	/* A node that answered for every rank says so in the incident's
	 * count only: 8,192 lines an incident otherwise. */
	if (m->failed)
		daemon_log("incident %s of job %s: node %s is done (%" PRIu32 " summaries, %" PRIu32
			   " ranks without one)", inc->id, j->id, node, m->answered, m->failed);
	cl_check_collected(inc);
}

void cluster_incident_node_klog(struct flightrecd *d, const char *node,
				const struct fr_msg_node_kernel_log *m)
{
	struct cl_job *j = cl_job_find(m->job);
	struct cl_incident *inc = j ? j->active : NULL;
	struct fr_klog k;
	char err[256];
	json_t *o;
	int i, rc;

	(void)d;
	if (!inc || strcmp(inc->id, m->incident) != 0 || (i = cl_node_index(inc, node)) < 0 ||
	    inc->phase == CL_FINISHING)
		return;
	memset(&k, 0, sizeof(k));
	rc = fr_klog_parse((const char *)m->data, m->len, &k, err, sizeof(err));
	if (rc == -EPROTO) {
		/* Said in the manifest in its place, where a reader looks. */
		ratelog("kernel log", node, "incident %s of job %s: node %s sent a kernel log that "
			"cannot be read: %s", inc->id, j->id, node, err);
		free(k.lines);
		memset(&k, 0, sizeof(k));
		snprintf(k.node, sizeof(k.node), "%s", node);
		snprintf(k.error, sizeof(k.error), "node %.64s sent a kernel log that cannot be read: %.140s",
			 node, err);
	}
	/* Written again from what was read: only what this daemon understood
	 * goes into its manifest. */
	o = rc && rc != -EPROTO ? NULL : fr_klog_to_json(&k);
	free(k.lines);
	free(inc->nodes[i].klog);
	inc->nodes[i].klog = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
}

static void cl_fetch_answer(struct cl_fetch *f, unsigned status, const char *why);

void cluster_incident_node_lost(struct flightrecd *d, const char *node)
{
	char why[FR_HOST_MAX + 32];

	snprintf(why, sizeof(why), "node lost: %s", node);
	cluster_incident_node_gone(d, node, why);
}

/* Node `i` of `inc` answers no more: what it owes is lost, for `why`. */
static void cl_node_gone_in(struct cl_incident *inc, int i, const char *why)
{
	cl_node_done(inc, (size_t)i);
	for (uint32_t k = 0; k < inc->nodes[i].nranks; k++) {
		struct cl_rank *cr = &inc->ranks[inc->nodes[i].ranks[k]];

		if (cr->node != i)
			continue;
		if (cr->answer == CL_PENDING) {
			cr->answer = CL_LOST;
			cl_set_error(cr, "%s", why);
			cl_drop_upload(cr);
		}
		if (cr->fetching)
			cl_stop_fetch(cr, why);
	}
	if (inc->phase == CL_COLLECTING) {
		cl_update_record(inc);
		cl_check_collected(inc);
	} else {
		cl_check_fetched(inc);
	}
}

/* The HTTP fetches waiting on `node`'s connection are answered 503 for `why`. */
static void cl_node_fetches_fail(const char *node, const char *why)
{
	for (size_t k = 0; k < CLUSTER_FETCHES_MAX; k++)
		if (cl.fetches[k] && strcmp(cl.fetches[k]->node, node) == 0)
			cl_fetch_answer(cl.fetches[k], MHD_HTTP_SERVICE_UNAVAILABLE, why);
}

void cluster_incident_node_gone(struct flightrecd *d, const char *node, const char *why)
{
	(void)d;
	for (struct cl_job *j = cl.jobs; j; j = j->next) {
		int i = j->active ? cl_node_index(j->active, node) : -1;

		if (i >= 0)
			cl_node_gone_in(j->active, i, why);
	}
	cl_node_fetches_fail(node, why);
}

/*
 * Asks node `i` of `inc` again on its new connection `conn`: its ranks
 * not answered yet start over (a summary comes again from offset 0).
 * Returns 0 or the error sending.
 */
static int cl_ask_again(struct cl_incident *inc, int i, struct conn *conn)
{
	struct fr_msg_node_dump_request m;

	for (uint32_t k = 0; k < inc->nodes[i].nranks; k++) {
		struct cl_rank *cr = &inc->ranks[inc->nodes[i].ranks[k]];

		if (cr->node == i && cr->answer == CL_PENDING)
			cl_drop_upload(cr);
	}
	cl_request_msg(inc, &m);
	if (conn_send_node_dump_request(conn, &m))
		return -EPIPE;
	daemon_log("incident %s of job %s: node %s reconnected mid-incident; asked for its ranks again",
		   inc->id, inc->job->id, inc->nodes[i].name);
	return 0;
}

void cluster_incident_node_back(struct flightrecd *d, const char *node, struct conn *conn)
{
	char why[FR_HOST_MAX + 64];

	(void)d;
	snprintf(why, sizeof(why), "node %s reconnected mid-incident: its answers were lost", node);
	for (struct cl_job *j = cl.jobs; j; j = j->next) {
		struct cl_incident *inc = j->active;
		int i = inc ? cl_node_index(inc, node) : -1;

		if (i < 0 || inc->nodes[i].done)
			continue;
		if (inc->phase != CL_COLLECTING || cl_ask_again(inc, i, conn))
			cl_node_gone_in(inc, i, why);
	}
	cl_node_fetches_fail(node, why);
}

/* Gives up what is still owed at the deadline (or when stopping). */
static void cl_give_up(struct cl_incident *inc)
{
	for (uint32_t r = 0; r < inc->world_size; r++) {
		struct cl_rank *cr = &inc->ranks[r];
		const char *node = cr->node >= 0 ? inc->nodes[cr->node].name : "?";

		if (cr->answer == CL_PENDING) {
			cr->answer = CL_UNRESPONSIVE;
			if (cr->up && cr->up->active)
				cl_set_error(cr, "node %s: summary incomplete at the deadline: %" PRIu64
					     " of %" PRIu64 " bytes received",
					     node, cr->up->received, cr->up->total);
			else
				cl_set_error(cr, "node %s sent no summary of it by the deadline", node);
			cl_drop_upload(cr);
		}
		if (cr->fetching)
			cl_stop_fetch(cr, "its node did not send it by the deadline");
	}
	for (size_t i = 0; i < inc->nnodes; i++)
		cl_node_done(inc, i);
}

/*
 * At the summaries' deadline: whether to wait on, because a node not done
 * has sent a piece within CL_FLOWING_NS (a node with many ranks, or one
 * slowed by its machine, is still delivering: cutting it off would judge
 * its ranks as silent) and the stretched deadline is not reached. Then
 * the deadline moves a second on, to look again.
 */
static bool cl_stretch(struct cl_incident *inc, uint64_t now_mono)
{
	size_t flowing = 0;

	if (inc->phase != CL_COLLECTING || now_mono >= inc->stretch_until_mono)
		return false;
	for (size_t i = 0; i < inc->nnodes; i++)
		flowing += !inc->nodes[i].done && inc->nodes[i].piece_mono &&
			   now_mono - inc->nodes[i].piece_mono < CL_FLOWING_NS;
	if (!flowing)
		return false;
	if (!inc->stretch_logged)
		daemon_log("incident %s of job %s: summary deadline passed with %zu node(s) still "
			   "sending: waiting while they do, %.0f s more at most", inc->id,
			   inc->job->id, flowing,
			   (double)(inc->stretch_until_mono - now_mono) / NS_PER_S);
	inc->stretch_logged = true;
	inc->deadline_mono = now_mono + NS_PER_S;
	return true;
}

/*
 * Gives up, at the deadline or when stopping (`stopping`), on what the
 * incidents waiting on their nodes are still owed, and answers the rank
 * fetches over HTTP past theirs (all of them when stopping).
 */
static void cl_expire(uint64_t now_mono, bool stopping)
{
	for (struct cl_job *j = cl.jobs; j; j = j->next) {
		struct cl_incident *inc = j->active;

		if (!inc || (!stopping && now_mono < inc->deadline_mono) ||
		    (inc->phase != CL_COLLECTING && inc->phase != CL_FETCHING))
			continue;
		if (!stopping && cl_stretch(inc, now_mono))
			continue;
		if (stopping)
			inc->incomplete = true;
		else
			daemon_log("incident %s of job %s: %s deadline passed", inc->id, j->id,
				   inc->phase == CL_COLLECTING ? "summary" : "full dump");
		cl_give_up(inc);
		if (inc->phase == CL_COLLECTING)
			cl_check_collected(inc);
		else
			cl_check_fetched(inc);
	}
	for (size_t k = 0; k < CLUSTER_FETCHES_MAX; k++)
		if (cl.fetches[k] && (stopping || now_mono >= cl.fetches[k]->deadline_mono))
			cl_fetch_answer(cl.fetches[k], MHD_HTTP_SERVICE_UNAVAILABLE,
					stopping ? "the daemon is stopping" :
						   "the rank's node did not send its full dump in time");
}

void cluster_incident_tick(struct flightrecd *d, uint64_t now_mono)
{
	(void)d;
	cl_expire(now_mono, false);
}

void cluster_incident_stop(struct flightrecd *d)
{
	(void)d;
	cl_expire(0, true);
}

void cluster_incident_free_all(void)
{
	while (cl.jobs) {
		struct cl_job *j = cl.jobs;

		cl.jobs = j->next;
		if (j->active)
			cl_incident_free(j->active);
		cl_job_free(j);
	}
	cl.njobs = 0;
}

json_t *cluster_incident_records_json(const struct flightrecd *d, const char *job)
{
	struct cl_job *j = cl_job_find(job);

	if (!j || !j->nrecords)
		return NULL;
	return incident_records_json_of(d, j->id, j->records, j->nrecords);
}

/* Full dumps over HTTP */

static void cl_fetch_answer(struct cl_fetch *f, unsigned status, const char *why)
{
	uint64_t charged = f->up.charged;

	for (size_t k = 0; k < CLUSTER_FETCHES_MAX; k++)
		if (cl.fetches[k] == f)
			cl.fetches[k] = NULL;
	/* The bytes go to the request, which sends them and frees them;
	 * the budget's charge ends here. */
	if (status == MHD_HTTP_OK)
		*f->data = upload_take(&f->up, f->len);
	budget_release_job(NULL, BUDGET_UPLOADS, charged);
	upload_reset(&f->up);
	handover_finish(f->h, status, why);
	free(f);
}

static bool cl_fetch_piece(struct flightrecd *d, const char *node,
			   const struct fr_msg_node_summary *m)
{
	struct cl_fetch *f = NULL;
	struct upload *up;
	char why[256];

	for (size_t k = 0; k < CLUSTER_FETCHES_MAX && !f; k++)
		if (cl.fetches[k] && cl.fetches[k]->rank == m->rank &&
		    strcmp(cl.fetches[k]->node, node) == 0 &&
		    strcmp(cl.fetches[k]->incident, m->incident) == 0 &&
		    strcmp(cl.fetches[k]->job, m->job) == 0)
			f = cl.fetches[k];
	if (!f)
		return false;
	if (m->flags & FR_NODE_SUMMARY_FAILED) {
		snprintf(why, sizeof(why), "node %s has no full dump of it: %s", node, m->reason);
		cl_fetch_answer(f, MHD_HTTP_SERVICE_UNAVAILABLE, why);
		return true;
	}
	up = &f->up;
	if (m->offset == 0) {
		budget_release_job(NULL, BUDGET_UPLOADS, up->charged);
		upload_reset(up);
		if (upload_begin(up, m->incident, m->total, d->cfg.max_dump_size)) {
			cl_fetch_answer(f, MHD_HTTP_SERVICE_UNAVAILABLE,
					"the rank's full dump is over --max-dump-size");
			return true;
		}
	}
	{
		struct fr_msg_dump_data piece = { .offset = m->offset, .total = m->total,
						  .len = m->len, .data = m->data };

		switch (upload_append(up, &piece, cl_charge, NULL, why, sizeof(why))) {
		case UPLOAD_ERROR:
			cl_fetch_answer(f, MHD_HTTP_SERVICE_UNAVAILABLE, why);
			break;
		case UPLOAD_COMPLETE:
			cl_fetch_answer(f, MHD_HTTP_OK, NULL);
			break;
		case UPLOAD_MORE:
			break;
		}
	}
	return true;
}

void cluster_incident_fetch_rank(struct flightrecd *d, struct handover *h, const char *job,
				 const char *incident, uint32_t rank, uint8_t **data, size_t *len)
{
	struct cl_job *j = cl_job_find(job);
	struct fr_msg_node_fetch m = { .rank = rank };
	struct cl_fetch *f;
	const char *node = NULL;
	struct conn *c = NULL;
	uint32_t world = 0;
	char why[FR_HOST_MAX + 64];
	size_t slot;

	for (size_t i = 0; j && i < j->nrecords && !world; i++)
		if (strcmp(j->records[i].id, incident) == 0)
			world = j->record_world[i];
	if (!world) {
		handover_finish(h, MHD_HTTP_NOT_FOUND,
				j ? "no such incident" : "no incident of a job the node daemons hold");
		return;
	}
	if (rank >= world) {
		handover_finish(h, MHD_HTTP_NOT_FOUND, "no such rank in the incident");
		return;
	}
	if (!nodes_rank_node(job, rank, &c, &node)) {
		handover_finish(h, MHD_HTTP_SERVICE_UNAVAILABLE, "no node holds the rank now");
		return;
	}
	if (!c) {
		snprintf(why, sizeof(why), "the rank's node %s is not connected", node);
		handover_finish(h, MHD_HTTP_SERVICE_UNAVAILABLE, why);
		return;
	}
	for (slot = 0; slot < CLUSTER_FETCHES_MAX && cl.fetches[slot]; slot++)
		;
	if (slot == CLUSTER_FETCHES_MAX || !(f = calloc(1, sizeof(*f)))) {
		handover_finish(h, MHD_HTTP_SERVICE_UNAVAILABLE, "too many full dumps being fetched");
		return;
	}
	f->h = h;
	snprintf(f->job, sizeof(f->job), "%s", job);
	snprintf(f->incident, sizeof(f->incident), "%s", incident);
	snprintf(f->node, sizeof(f->node), "%s", node);
	f->rank = rank;
	f->data = data;
	f->len = len;
	f->deadline_mono = daemon_mono_ns() + (uint64_t)(d->cfg.dump_deadline_s * NS_PER_S);
	memcpy(m.incident, f->incident, sizeof(m.incident));
	memcpy(m.job, f->job, sizeof(m.job));
	cl.fetches[slot] = f;
	if (conn_send_node_fetch(c, &m))
		cl_fetch_answer(f, MHD_HTTP_SERVICE_UNAVAILABLE, "cannot write to the rank's node");
}
