/* The central daemon's node daemons and what they said (nodes.h). */
#include "nodes.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "clock.h"
#include "log.h"

/* Nodes remembered at most: a name beyond is refused, so that peers
 * making up names cannot grow the daemon without bound. */
#define NODES_MAX 4096

static struct node *nodes;
static size_t nnodes;
static uint32_t nodes_numbered;

/* Makes room for `want` entries of `size` bytes in *arr (cap *cap), doubling. */
static int grow(void *arr, uint32_t *cap, uint32_t want, size_t size)
{
	void **p = arr;
	uint32_t n = *cap ? *cap : 8;
	void *b;

	if (want <= *cap)
		return 0;
	while (n < want)
		n *= 2;
	b = realloc(*p, (size_t)n * size);
	if (!b)
		return -ENOMEM;
	*p = b;
	*cap = n;
	return 0;
}

int node_job_ranks(struct node_job *j, const struct fr_msg_node_ranks *m)
{
	if (m->flags & FR_NODE_RANKS_FULL)
		j->nranks = 0;
	j->world_size = m->world_size;
	for (uint32_t i = 0; i < m->nranks; i++) {
		const struct fr_node_rank *r = &m->ranks[i];
		uint32_t at = 0;

		/* Ranks stay ascending: the listing reads in rank order. */
		while (at < j->nranks && j->ranks[at].rank < r->rank)
			at++;
		if (at < j->nranks && j->ranks[at].rank == r->rank) {
			j->ranks[at] = *r;
			continue;
		}
		if (grow(&j->ranks, &j->ranks_cap, j->nranks + 1, sizeof(*j->ranks)))
			return -ENOMEM;
		memmove(&j->ranks[at + 1], &j->ranks[at], (j->nranks - at) * sizeof(*j->ranks));
		j->ranks[at] = *r;
		j->nranks++;
	}
	return 0;
}

int node_job_progress(struct node_job *j, const struct fr_msg_node_progress *m)
{
	for (uint32_t i = 0; i < m->ncomms; i++) {
		const struct fr_node_comm_progress *rec = &m->comms[i];
		uint32_t at = 0;

		while (at < j->nprogress && strcmp(j->progress[at].comm, rec->comm) != 0)
			at++;
		if (at == j->nprogress) {
			uint32_t cap = j->progress_cap;
			uint64_t *when;

			if (grow(&j->progress, &j->progress_cap, at + 1, sizeof(*j->progress)))
				return -ENOMEM;
			when = realloc(j->progress_mono_ns, j->progress_cap * sizeof(*when));
			if (!when) {
				j->progress_cap = cap;
				return -ENOMEM;
			}
			j->progress_mono_ns = when;
			j->nprogress++;
		}
		j->progress[at] = *rec;
		j->progress_mono_ns[at] = daemon_mono_ns();
	}
	return 0;
}

void node_job_free(struct node_job *j)
{
	free(j->ranks);
	free(j->progress);
	free(j->progress_mono_ns);
	memset(j, 0, sizeof(*j));
}

static void node_forget_jobs(struct node *n)
{
	for (size_t i = 0; i < n->njobs; i++)
		node_job_free(&n->jobs[i]);
	free(n->jobs);
	n->jobs = NULL;
	n->njobs = 0;
}

/* The node's record of `job`, made when `create`; NULL when none (or out of memory). */
static struct node_job *node_job(struct node *n, const char *job, bool create)
{
	struct node_job *jobs;

	for (size_t i = 0; i < n->njobs; i++)
		if (strcmp(n->jobs[i].id, job) == 0)
			return &n->jobs[i];
	if (!create || n->njobs >= FR_NODE_JOBS_MAX)
		return NULL;
	jobs = realloc(n->jobs, (n->njobs + 1) * sizeof(*jobs));
	if (!jobs)
		return NULL;
	n->jobs = jobs;
	memset(&jobs[n->njobs], 0, sizeof(jobs[0]));
	snprintf(jobs[n->njobs].id, sizeof(jobs[0].id), "%s", job);
	return &jobs[n->njobs++];
}

struct node *nodes_hello(struct conn *c, const char *peer, const struct fr_msg_node_hello *m,
			 struct conn **old)
{
	struct node *n;

	*old = NULL;
	for (n = nodes; n && strcmp(n->name, m->node) != 0; n = n->next)
		;
	if (!n) {
		if (nnodes >= NODES_MAX)
			return NULL;
		n = calloc(1, sizeof(*n));
		if (!n)
			return NULL;
		snprintf(n->name, sizeof(n->name), "%s", m->node);
		n->number = nodes_numbered++;
		n->next = nodes;
		nodes = n;
		nnodes++;
	}
	/* A restart's state is gone from the node; a reconnect resends it
	 * all (FULL) too, so the old lists are forgotten either way. */
	if (n->boot_id != m->boot_id)
		daemon_log("node %s connected from %s (boot id %016" PRIx64 ")", n->name, peer,
			   m->boot_id);
	else
		daemon_log("node %s reconnected from %s", n->name, peer);
	node_forget_jobs(n);
	n->boot_id = m->boot_id;
	snprintf(n->addr, sizeof(n->addr), "%s", peer);
	*old = n->conn;
	n->conn = c;
	n->lost_mono_ns = 0;
	for (uint32_t i = 0; i < m->njobs; i++) {
		struct node_job *j = node_job(n, m->jobs[i].job, true);

		if (j)
			j->world_size = m->jobs[i].world_size;
	}
	return n;
}

int nodes_ranks(struct node *n, const struct fr_msg_node_ranks *m)
{
	struct node_job *j = node_job(n, m->job, true);

	return j ? node_job_ranks(j, m) : -ENOMEM;
}

int nodes_progress(struct node *n, const struct fr_msg_node_progress *m)
{
	struct node_job *j = node_job(n, m->job, true);

	return j ? node_job_progress(j, m) : -ENOMEM;
}

void nodes_conn_lost(struct node *n, struct conn *c)
{
	if (n->conn != c)
		return;
	n->conn = NULL;
	n->lost_mono_ns = daemon_mono_ns();
	daemon_log("node %s lost: its ranks are unresponsive until it reconnects", n->name);
}

void nodes_free(void)
{
	while (nodes) {
		struct node *n = nodes;

		nodes = n->next;
		node_forget_jobs(n);
		free(n);
	}
	nnodes = 0;
}

static const char *node_rank_state_name(const struct node *n, uint8_t state)
{
	/* What the node cannot tell any more: its ranks may be fine, but
	 * nobody watches them now. */
	if (!n->conn && state != FR_NODE_RANK_FINISHED)
		return "unresponsive";
	static const char *const names[] = { "connected", "unresponsive", "disconnected",
					      "finished" };

	return state <= FR_NODE_RANK_STATE_MAX ? names[state] : "unknown";
}

json_t *nodes_json(void)
{
	json_t *arr = json_array();

	for (const struct node *n = nodes; arr && n; n = n->next) {
		uint64_t ranks = 0;

		for (size_t i = 0; i < n->njobs; i++)
			ranks += n->jobs[i].nranks;
		json_array_append_new(arr, json_pack("{s:s, s:s, s:b, s:I, s:I}", "name", n->name,
						     "address", n->addr, "connected", n->conn != NULL,
						     "jobs", (json_int_t)n->njobs, "ranks",
						     (json_int_t)ranks));
	}
	return json_pack("{s:o}", "nodes", arr);
}

size_t nodes_job_ranks_json(const char *job, json_t *ranks)
{
	size_t count = 0;

	for (const struct node *n = nodes; n; n = n->next) {
		const struct node_job *j = node_job((struct node *)n, job, false);

		for (uint32_t i = 0; j && i < j->nranks; i++) {
			const struct fr_node_rank *r = &j->ranks[i];
			json_t *o = json_pack("{s:I, s:s, s:I, s:s, s:I, s:I, s:s}", "rank",
					      (json_int_t)r->rank, "host", r->host, "pid",
					      (json_int_t)r->pid, "state",
					      node_rank_state_name(n, r->state), "ring_capacity",
					      (json_int_t)r->ring_capacity, "start_ns",
					      (json_int_t)r->start_ns, "node", n->name);

			if (!n->conn && o)
				json_object_set_new(o, "reason", json_string("node lost"));
			json_array_append_new(ranks, o);
			count++;
		}
	}
	return count;
}

bool nodes_job_known(const char *job, uint32_t *world_size)
{
	for (const struct node *n = nodes; n; n = n->next) {
		const struct node_job *j = node_job((struct node *)n, job, false);

		if (j && j->nranks) {
			*world_size = j->world_size;
			return true;
		}
	}
	return false;
}

void nodes_jobs_json(json_t *jobs, bool (*skip)(void *arg, const char *job), void *arg)
{
	for (const struct node *n = nodes; n; n = n->next) {
		for (size_t i = 0; i < n->njobs; i++) {
			const struct node_job *j = &n->jobs[i];
			bool seen = false;
			uint64_t connected = 0;

			if (!j->nranks || skip(arg, j->id))
				continue;
			/* Listed once, from the first node that holds it. */
			for (const struct node *e = nodes; e != n && !seen; e = e->next)
				seen = node_job((struct node *)e, j->id, false) != NULL;
			if (seen)
				continue;
			for (const struct node *e = n; e; e = e->next) {
				const struct node_job *ej = node_job((struct node *)e, j->id, false);

				for (uint32_t r = 0; e->conn && ej && r < ej->nranks; r++)
					connected += ej->ranks[r].state == FR_NODE_RANK_CONNECTED;
			}
			json_array_append_new(jobs, json_pack("{s:s, s:I, s:I, s:s, s:I, s:s}", "job",
							      j->id, "world_size",
							      (json_int_t)j->world_size,
							      "ranks_connected", (json_int_t)connected,
							      "status", "running", "incidents",
							      (json_int_t)0, "verdict", "unknown"));
		}
	}
}

void nodes_each_job(void (*fn)(void *arg, const char *job, uint32_t world_size), void *arg)
{
	for (const struct node *n = nodes; n; n = n->next) {
		for (size_t i = 0; i < n->njobs; i++) {
			const struct node_job *j = &n->jobs[i];
			bool seen = false;

			if (!j->nranks)
				continue;
			for (const struct node *e = nodes; e != n && !seen; e = e->next) {
				const struct node_job *ej = node_job((struct node *)e, j->id, false);

				seen = ej && ej->nranks;
			}
			if (!seen)
				fn(arg, j->id, j->world_size);
		}
	}
}

void nodes_job_each_comm(const char *job, uint64_t now_mono_ns,
			 void (*fn)(void *arg, const char *comm, const struct agg_node *recs,
				    size_t n),
			 void *arg)
{
	struct agg_node *recs = calloc(nnodes ? nnodes : 1, sizeof(*recs));

	if (!recs)
		return;
	for (const struct node *n = nodes; n; n = n->next) {
		const struct node_job *j = node_job((struct node *)n, job, false);

		for (uint32_t c = 0; j && c < j->nprogress; c++) {
			const char *comm = j->progress[c].comm;
			bool seen = false;
			size_t k = 0;

			for (const struct node *e = nodes; e != n && !seen; e = e->next) {
				const struct node_job *ej = node_job((struct node *)e, job, false);

				for (uint32_t x = 0; ej && x < ej->nprogress && !seen; x++)
					seen = strcmp(ej->progress[x].comm, comm) == 0;
			}
			if (seen)
				continue;
			for (const struct node *e = n; e; e = e->next) {
				const struct node_job *ej = node_job((struct node *)e, job, false);

				for (uint32_t x = 0; ej && x < ej->nprogress; x++) {
					if (strcmp(ej->progress[x].comm, comm) != 0)
						continue;
					recs[k].node = e->number;
					recs[k].rec = &ej->progress[x];
					recs[k].held_ms =
						now_mono_ns > ej->progress_mono_ns[x]
							? (now_mono_ns - ej->progress_mono_ns[x]) / 1000000u
							: 0;
					k++;
					break;
				}
			}
			fn(arg, comm, recs, k);
		}
	}
	free(recs);
}

void nodes_job_each_lost(const char *job,
			 void (*fn)(void *arg, const char *node, uint64_t lost_mono_ns,
				    const struct fr_node_rank *ranks, uint32_t nranks),
			 void *arg)
{
	for (const struct node *n = nodes; n; n = n->next) {
		const struct node_job *j = node_job((struct node *)n, job, false);

		if (!n->conn && j && j->nranks)
			fn(arg, n->name, n->lost_mono_ns, j->ranks, j->nranks);
	}
}

const char *nodes_node_name(uint32_t node)
{
	for (const struct node *n = nodes; n; n = n->next)
		if (n->number == node)
			return n->name;
	return "";
}

/* read side: cluster incidents */

void nodes_job_each_node(const char *job,
			 void (*fn)(void *arg, const char *node, struct conn *conn,
				    const struct fr_node_rank *ranks, uint32_t nranks),
			 void *arg)
{
	for (const struct node *n = nodes; n; n = n->next) {
		const struct node_job *j = node_job((struct node *)n, job, false);

		if (j && j->nranks)
			fn(arg, n->name, n->conn, j->ranks, j->nranks);
	}
}

bool nodes_rank_node(const char *job, uint32_t rank, struct conn **conn, const char **node)
{
	for (const struct node *n = nodes; n; n = n->next) {
		const struct node_job *j = node_job((struct node *)n, job, false);
		uint32_t lo = 0, hi = j ? j->nranks : 0;

		/* Ranks are ascending (node_job_ranks()). */
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;

			if (j->ranks[mid].rank < rank)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (j && lo < j->nranks && j->ranks[lo].rank == rank) {
			*conn = n->conn;
			*node = n->name;
			return true;
		}
	}
	return false;
}
