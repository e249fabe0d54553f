/* The central daemon's node daemons and what they said (nodes.h). */
#include "nodes.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aggregate.h"
#include "budget.h"
#include "clock.h"
#include "daemon.h"
#include "log.h"
#include "ratelog.h"

#include "../protocol/hash.h"
#include "../protocol/wire.h"

_Static_assert(NODE_RANKS_MAX == DAEMON_MAX_WORLD, "a node holds at most a whole world");
_Static_assert(NODE_COMMS_MAX == DAEMON_MAX_COMMS, "a node's job has at most this many");
_Static_assert(NODE_JOBS_MAX == DAEMON_MAX_JOBS, "a node daemon holds at most this many");

/*
 * The index: every job some node holds, with the node records of it
 * (`holders`), in a hash table by id and in a list in the order first
 * seen (the order GET /v1/jobs lists them in).
 */
struct nodes_entry {
	char id[FR_JOB_MAX + 1];
	struct nodes_entry *hnext;
	struct nodes_entry *prev, *next;
	uint32_t nholders, cap;
	struct node_job **holders;
};

static struct node *nodes;
static size_t nnodes;
/* Nodes by number (agg_node.node): a forgotten node's number is reused;
 * the search for a free one starts after the last given. */
static struct node *numbered[NODES_MAX];
static uint32_t next_number;
/* Nodes by name, chained (hnext): a lookup per NODE_HELLO, and one per
 * node an incident asks or fetches from, at thousands of nodes. The seed
 * is the daemon's own, so that names chosen to collide (by peers that
 * proved the token) must guess it. */
#define NAME_BUCKETS (2 * NODES_MAX)
static struct node *by_name[NAME_BUCKETS];
static uint64_t name_seed;
static struct nodes_entry **buckets;
static size_t nbuckets, nentries;
static struct nodes_entry *entries_first, *entries_last;
/* How long a lost node's jobs are kept (nodes_forget_lost()). */
static uint64_t lost_grace_ns = (uint64_t)NODES_LOST_GRACE_MIN_S * NS_PER_S;

/* malloc()/realloc() of memory charged to BUDGET_NODES: *charged follows. */
static void *charged_realloc(void *p, size_t was, size_t want, uint64_t *charged)
{
	void *b;

	if (want > was && !budget_charge(BUDGET_NODES, want - was))
		return NULL;
	b = realloc(p, want ? want : 1);
	if (!b) {
		if (want > was)
			budget_release(BUDGET_NODES, want - was);
		return NULL;
	}
	if (want < was)
		budget_release(BUDGET_NODES, was - want);
	if (charged)
		*charged = *charged + want - was;
	return b;
}

static void charged_free(void *p, size_t size, uint64_t *charged)
{
	free(p);
	budget_release(BUDGET_NODES, size);
	if (charged)
		*charged -= size;
}

/*
 * Makes room for `want` entries of `size` bytes in *arr (cap *cap),
 * doubling, charged to the budget. Returns 0 or -EDQUOT (nothing changed).
 */
static int grow(void *arr, uint32_t *cap, uint32_t want, size_t size, uint64_t *charged)
{
	void **p = arr;
	uint32_t n = *cap ? *cap : 8;
	void *b;

	if (want <= *cap)
		return 0;
	while (n < want)
		n *= 2;
	b = charged_realloc(*p, (size_t)*cap * size, (size_t)n * size, charged);
	if (!b)
		return -EDQUOT;
	*p = b;
	*cap = n;
	return 0;
}

/* ---- ranks ---- */

/* A rank of a batch with its place in it: the last of a rank wins. */
struct batch_rank {
	const struct fr_node_rank *r;
	uint32_t at;
};

static int batch_cmp(const void *a, const void *b)
{
	const struct batch_rank *x = a, *y = b;

	if (x->r->rank != y->r->rank)
		return x->r->rank < y->r->rank ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

static uint32_t count_connected(const struct fr_node_rank *r, uint32_t n)
{
	uint32_t c = 0;

	for (uint32_t i = 0; i < n; i++)
		c += r[i].state == FR_NODE_RANK_CONNECTED;
	return c;
}

int node_job_ranks(struct node_job *j, const struct fr_msg_node_ranks *m)
{
	struct batch_rank *b = NULL;
	uint32_t nb = 0, kept, total, i, k, out;

	if (m->world_size > NODE_RANKS_MAX)
		return -ENOSPC;
	if (!budget_world_fits(m->world_size, NODES_BYTES_PER_WORLD_RANK))
		return -EDQUOT;
	if (m->nranks) {
		b = malloc(m->nranks * sizeof(*b));
		if (!b)
			return -EDQUOT;
	}
	/* The batch sorted by rank, one entry a rank (its last). */
	for (i = 0; i < m->nranks; i++)
		b[i] = (struct batch_rank){ .r = &m->ranks[i], .at = i };
	qsort(b, m->nranks, sizeof(*b), batch_cmp);
	for (i = 0; i < m->nranks; i++) {
		if (nb && b[nb - 1].r->rank == b[i].r->rank)
			nb--;
		if (b[i].r->rank < m->world_size)
			b[nb++] = b[i];
	}
	/* The ranks kept: none after FULL, and none a smaller world has. */
	kept = m->flags & FR_NODE_RANKS_FULL ? 0 : j->nranks;
	while (kept && j->ranks[kept - 1].rank >= m->world_size)
		kept--;
	/* How many the merge gives, to make room before changing anything. */
	for (i = 0, k = 0, total = 0; i < kept || k < nb; total++) {
		if (k == nb || (i < kept && j->ranks[i].rank < b[k].r->rank))
			i++;
		else if (i == kept || b[k].r->rank < j->ranks[i].rank)
			k++;
		else
			i++, k++;
	}
	if (grow(&j->ranks, &j->ranks_cap, total, sizeof(*j->ranks), &j->charged)) {
		free(b);
		return -EDQUOT;
	}
	/* Merged from the back, in place: each kept rank moves once. */
	i = kept;
	k = nb;
	out = total;
	while (k) {
		const struct fr_node_rank *r = b[k - 1].r;

		if (i && j->ranks[i - 1].rank > r->rank) {
			j->ranks[--out] = j->ranks[--i];
			continue;
		}
		if (i && j->ranks[i - 1].rank == r->rank)
			i--;
		j->ranks[--out] = *r;
		k--;
	}
	j->nranks = total;
	j->world_size = m->world_size;
	j->nconnected = count_connected(j->ranks, j->nranks);
	free(b);
	return 0;
}

/* ---- progress records ---- */

/* An operation group of a packed record; its runs follow the members'. */
struct prog_group {
	uint64_t seq;
	uint64_t age_ms;
	uint32_t nranks;
	uint32_t nranges;
	uint8_t type;
	uint8_t flags;
};

static uint32_t min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

/* Packs `rec` into *p (its data allocated, charged). Returns 0 or -EDQUOT. */
static int prog_pack(const struct fr_node_comm_progress *rec, struct node_prog *p,
		     uint64_t *charged)
{
	uint32_t ngroups = min_u32(rec->ngroups, FR_NODE_GROUPS_MAX);
	uint32_t nmembers = min_u32(rec->nmembers, FR_NODE_RANGES_MAX);
	uint32_t nlaggards = min_u32(rec->nlaggards, FR_NODE_LAGGARDS_MAX);
	size_t size = nlaggards * sizeof(struct fr_node_laggard) +
		      ngroups * sizeof(struct prog_group) + nmembers * sizeof(struct fr_node_range);
	struct fr_node_laggard *lag;
	struct prog_group *grp;
	struct fr_node_range *rng;

	for (uint32_t g = 0; g < ngroups; g++)
		size += min_u32(rec->groups[g].nranges, FR_NODE_RANGES_MAX) *
			sizeof(struct fr_node_range);
	p->data = charged_realloc(NULL, 0, size, charged);
	if (!p->data)
		return -EDQUOT;
	p->size = size;
	memcpy(p->comm, rec->comm, sizeof(p->comm));
	p->lo_entered = rec->lo_entered;
	p->hi_entered = rec->hi_entered;
	p->lo_completed = rec->lo_completed;
	p->hi_completed = rec->hi_completed;
	p->nranks = rec->nranks;
	p->nmembers = nmembers;
	p->nlaggards = nlaggards;
	p->laggards_omitted = rec->laggards_omitted;
	p->ngroups = ngroups;
	p->ops_omitted = rec->ops_omitted;
	p->mono_ns = daemon_mono_ns();
	/* 8-byte fields first, so that every array is aligned. */
	lag = p->data;
	memcpy(lag, rec->laggards, nlaggards * sizeof(*lag));
	grp = (struct prog_group *)(lag + nlaggards);
	rng = (struct fr_node_range *)(grp + ngroups);
	memcpy(rng, rec->members, nmembers * sizeof(*rng));
	rng += nmembers;
	for (uint32_t g = 0; g < ngroups; g++) {
		const struct fr_node_group *s = &rec->groups[g];

		grp[g] = (struct prog_group){ .seq = s->seq, .age_ms = s->age_ms,
					      .nranks = s->nranks,
					      .nranges = min_u32(s->nranges, FR_NODE_RANGES_MAX),
					      .type = s->type, .flags = s->flags };
		memcpy(rng, s->ranges, grp[g].nranges * sizeof(*rng));
		rng += grp[g].nranges;
	}
	return 0;
}

void node_prog_unpack(const struct node_prog *p, struct fr_node_comm_progress *out)
{
	const struct fr_node_laggard *lag = p->data;
	const struct prog_group *grp = (const struct prog_group *)(lag + p->nlaggards);
	const struct fr_node_range *rng = (const struct fr_node_range *)(grp + p->ngroups);

	/* Only the entries the counts name are written: the rest is never read. */
	memcpy(out->comm, p->comm, sizeof(out->comm));
	out->lo_entered = p->lo_entered;
	out->hi_entered = p->hi_entered;
	out->lo_completed = p->lo_completed;
	out->hi_completed = p->hi_completed;
	out->nranks = p->nranks;
	out->nmembers = p->nmembers;
	out->nlaggards = p->nlaggards;
	out->laggards_omitted = p->laggards_omitted;
	out->ngroups = p->ngroups;
	out->ops_omitted = p->ops_omitted;
	memcpy(out->laggards, lag, p->nlaggards * sizeof(*lag));
	memcpy(out->members, rng, p->nmembers * sizeof(*rng));
	rng += p->nmembers;
	for (uint32_t g = 0; g < p->ngroups; g++) {
		struct fr_node_group *d = &out->groups[g];

		d->seq = grp[g].seq;
		d->age_ms = grp[g].age_ms;
		d->nranks = grp[g].nranks;
		d->nranges = grp[g].nranges;
		d->type = grp[g].type;
		d->flags = grp[g].flags;
		memcpy(d->ranges, rng, d->nranges * sizeof(*rng));
		rng += d->nranges;
	}
}

/* Where `comm` is, or would go, in j->by_comm. */
static uint32_t by_comm_find(const struct node_job *j, const char *comm, bool *found)
{
	uint32_t lo = 0, hi = j->nprogress;

	*found = false;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c = strcmp(j->progress[j->by_comm[mid]].comm, comm);

		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Room for one more record in j->progress and j->by_comm. Returns 0 or -EDQUOT. */
static int progress_grow(struct node_job *j)
{
	uint32_t cap = j->progress_cap ? j->progress_cap * 2 : 8;
	size_t delta = (size_t)(cap - j->progress_cap) * (sizeof(*j->progress) + sizeof(*j->by_comm));
	void *p, *b = NULL;

	if (j->nprogress < j->progress_cap)
		return 0;
	if (!budget_charge(BUDGET_NODES, delta))
		return -EDQUOT;
	/* Either may move; the capacity grows when both did. */
	p = realloc(j->progress, cap * sizeof(*j->progress));
	if (p) {
		j->progress = p;
		b = realloc(j->by_comm, cap * sizeof(*j->by_comm));
	}
	if (!b) {
		budget_release(BUDGET_NODES, delta);
		return -EDQUOT;
	}
	j->by_comm = b;
	j->charged += delta;
	j->progress_cap = cap;
	return 0;
}

/* A communicator id goes into log lines (the verdict's summary): printable
 * ASCII only, as agents make them ("mpi-...", "nccl-..."). */
static bool comm_printable(const char *comm)
{
	for (; *comm; comm++)
		if ((unsigned char)*comm < 0x20 || (unsigned char)*comm >= 0x7f)
			return false;
	return true;
}

int node_job_progress(struct node_job *j, const struct fr_msg_node_progress *m)
{
	int ret = 0;

	for (uint32_t i = 0; i < m->ncomms; i++) {
		const struct fr_node_comm_progress *rec = &m->comms[i];
		struct node_prog p;
		bool found;
		uint32_t at;

		if (!comm_printable(rec->comm)) {
			ret = -EILSEQ;
			continue;
		}
		at = by_comm_find(j, rec->comm, &found);
		if (!found && j->nprogress >= NODE_COMMS_MAX) {
			ret = -ENOSPC;
			continue;
		}
		if (prog_pack(rec, &p, &j->charged)) {
			ret = -EDQUOT;
			continue;
		}
		if (found) {
			struct node_prog *old = &j->progress[j->by_comm[at]];

			charged_free(old->data, old->size, &j->charged);
			*old = p;
			continue;
		}
		if (progress_grow(j)) {
			charged_free(p.data, p.size, &j->charged);
			ret = -EDQUOT;
			continue;
		}
		memmove(&j->by_comm[at + 1], &j->by_comm[at],
			(j->nprogress - at) * sizeof(*j->by_comm));
		j->by_comm[at] = j->nprogress;
		j->progress[j->nprogress++] = p;
	}
	return ret;
}

void node_job_free(struct node_job *j)
{
	for (uint32_t i = 0; i < j->nprogress; i++)
		free(j->progress[i].data);
	free(j->ranks);
	free(j->progress);
	free(j->by_comm);
	budget_release(BUDGET_NODES, j->charged);
	memset(j, 0, sizeof(*j));
}

/* ---- the index ---- */

static uint64_t hash_id(const char *s)
{
	return fr_fnv1a(FR_FNV_INIT, s, strlen(s));
}

static struct nodes_entry *entry_find(const char *job)
{
	if (!nbuckets)
		return NULL;
	for (struct nodes_entry *e = buckets[hash_id(job) & (nbuckets - 1)]; e; e = e->hnext)
		if (strcmp(e->id, job) == 0)
			return e;
	return NULL;
}

/* Doubles the table when it holds more entries than buckets. */
static int index_grow(void)
{
	size_t n = nbuckets ? nbuckets * 2 : 64;
	struct nodes_entry **b;

	if (nentries < nbuckets)
		return 0;
	b = charged_realloc(NULL, 0, n * sizeof(*b), NULL);
	if (!b)
		return -EDQUOT;
	memset(b, 0, n * sizeof(*b));
	for (struct nodes_entry *e = entries_first; e; e = e->next) {
		size_t h = hash_id(e->id) & (n - 1);

		e->hnext = b[h];
		b[h] = e;
	}
	if (buckets)
		charged_free(buckets, nbuckets * sizeof(*buckets), NULL);
	buckets = b;
	nbuckets = n;
	return 0;
}

/* Takes the entry, which no node holds any more, off the index and frees it. */
static void entry_free(struct nodes_entry *e)
{
	struct nodes_entry **pp;

	for (pp = &buckets[hash_id(e->id) & (nbuckets - 1)]; *pp != e; pp = &(*pp)->hnext)
		;
	*pp = e->hnext;
	if (e->prev)
		e->prev->next = e->next;
	else
		entries_first = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		entries_last = e->prev;
	nentries--;
	charged_free(e->holders, e->cap * sizeof(*e->holders), NULL);
	charged_free(e, sizeof(*e), NULL);
}

/* Lists `j` under its job's entry, made when none. Returns 0, -EDQUOT, or
 * -EMLINK for a new job over NODES_JOBS_TOTAL_MAX. */
static int index_add(struct node_job *j)
{
	struct nodes_entry *e = entry_find(j->id);

	if (!e) {
		size_t h;

		if (nentries >= NODES_JOBS_TOTAL_MAX)
			return -EMLINK;
		if (index_grow())
			return -EDQUOT;
		e = charged_realloc(NULL, 0, sizeof(*e), NULL);
		if (!e)
			return -EDQUOT;
		memset(e, 0, sizeof(*e));
		memcpy(e->id, j->id, sizeof(e->id));
		h = hash_id(e->id) & (nbuckets - 1);
		e->hnext = buckets[h];
		buckets[h] = e;
		e->prev = entries_last;
		if (entries_last)
			entries_last->next = e;
		else
			entries_first = e;
		entries_last = e;
		nentries++;
	}
	if (grow(&e->holders, &e->cap, e->nholders + 1, sizeof(*e->holders), NULL)) {
		if (!e->nholders)
			entry_free(e);
		return -EDQUOT;
	}
	j->entry = e;
	j->slot = e->nholders;
	e->holders[e->nholders++] = j;
	return 0;
}

/* Takes `j` off its entry, and the entry off the index when no node holds it. */
static void index_remove(struct node_job *j)
{
	struct nodes_entry *e = j->entry;

	if (!e)
		return;
	j->entry = NULL;
	e->holders[j->slot] = e->holders[--e->nholders];
	e->holders[j->slot]->slot = j->slot;
	if (!e->nholders)
		entry_free(e);
}

/* ---- nodes ---- */

/*
 * Logs a refusal once per connection of the node; the caller counts it
 * (node_state_refused_total: all come back as -ENOSPC or -EDQUOT). `job`
 * is a valid name, or NULL for one that is not, which is not logged.
 */
static int node_refuse(struct node *n, const char *job, int err, const char *what)
{
	const char *why = err == -EDQUOT ? "over --max-memory" :
			  err == -EMLINK ? "node daemons hold " NODES_JOBS_TOTAL_MAX_S
					   " jobs here already (the cap on all nodes' jobs together)" :
			  err == -EINVAL ? "the job id is not a name (letters, digits, '.', '_', '-'; no leading '.')" :
			  err == -EILSEQ ? "a communicator id that is not printable ASCII" :
					   "over the cap on what a node may hold";

	if (!n->refusal_logged)
		daemon_log("node %s: refusing %s of job %s: %s (kept what it sent before; further refusals on this connection are counted in node_state_refused_total, not logged)",
			   n->name, what, fr_wire_valid_name(job) ? job : "(not shown)", why);
	n->refusal_logged = true;
	return err == -EDQUOT ? err : -ENOSPC;
}

static void node_job_drop(struct node *n, size_t i)
{
	struct node_job *j = n->jobs[i];

	index_remove(j);
	node_job_free(j);
	charged_free(j, sizeof(*j), NULL);
	n->jobs[i] = n->jobs[--n->njobs];
}

static void node_forget_jobs(struct node *n)
{
	while (n->njobs)
		node_job_drop(n, n->njobs - 1);
	charged_free(n->jobs, n->jobs_cap * sizeof(*n->jobs), NULL);
	n->jobs = NULL;
	n->jobs_cap = 0;
}

static size_t node_job_at(const struct node *n, const char *job)
{
	size_t i = 0;

	while (i < n->njobs && strcmp(n->jobs[i]->id, job) != 0)
		i++;
	return i;
}

/* The node's record of `job`, made when `create`; NULL with *err when none. */
static struct node_job *node_job(struct node *n, const char *job, bool create, int *err)
{
	size_t i = node_job_at(n, job);
	struct node_job *j;

	*err = 0;
	if (i < n->njobs)
		return n->jobs[i];
	if (!create)
		return NULL;
	/* The decoders refused such an id already; the index must never hold
	 * one, since cluster incidents make directories of it. */
	if (!fr_wire_valid_name(job)) {
		*err = -EINVAL;
		return NULL;
	}
	if (n->njobs >= NODE_JOBS_MAX) {
		*err = -ENOSPC;
		return NULL;
	}
	if (grow(&n->jobs, &n->jobs_cap, n->njobs + 1, sizeof(*n->jobs), NULL)) {
		*err = -EDQUOT;
		return NULL;
	}
	j = charged_realloc(NULL, 0, sizeof(*j), NULL);
	if (!j) {
		*err = -EDQUOT;
		return NULL;
	}
	memset(j, 0, sizeof(*j));
	snprintf(j->id, sizeof(j->id), "%s", job);
	j->node = n;
	*err = index_add(j);
	if (*err) {
		charged_free(j, sizeof(*j), NULL);
		return NULL;
	}
	n->jobs[n->njobs++] = j;
	return j;
}

static struct node **name_slot(const char *name)
{
	if (!name_seed)
		name_seed = fr_fnv1a(FR_FNV_INIT, &(uint64_t){ daemon_mono_ns() ^ (uint64_t)getpid() },
				     sizeof(uint64_t)) | 1;
	return &by_name[fr_fnv1a(name_seed, name, strlen(name)) % NAME_BUCKETS];
}

static struct node *node_by_name(const char *name)
{
	struct node *n = *name_slot(name);

	while (n && strcmp(n->name, name) != 0)
		n = n->hnext;
	return n;
}

static void node_free(struct node *n)
{
	struct node **pp = name_slot(n->name);

	while (*pp != n)
		pp = &(*pp)->hnext;
	*pp = n->hnext;
	node_forget_jobs(n);
	numbered[n->number] = NULL;
	charged_free(n, sizeof(*n), NULL);
}

/* Forgets the node disconnected longest, to make room. Returns false when none is. */
static bool nodes_evict_oldest(void)
{
	struct node **victim = NULL;
	struct node *n;

	for (struct node **pp = &nodes; *pp; pp = &(*pp)->next)
		if (!(*pp)->conn && (!victim || (*pp)->lost_mono_ns < (*victim)->lost_mono_ns))
			victim = pp;
	if (!victim)
		return false;
	n = *victim;

	daemon_log("forgetting node %s, disconnected for %.0f s, to make room for a new one (%u nodes kept at most)",
		   n->name, (double)(daemon_mono_ns() - n->lost_mono_ns) / NS_PER_S, NODES_MAX);
	*victim = n->next;
	nnodes--;
	node_free(n);
	return true;
}

static struct node *node_new(const char *name, const char **why)
{
	struct node *n;
	uint32_t number = 0;

	if (nnodes >= NODES_MAX && !nodes_evict_oldest()) {
		*why = "the central daemon keeps " NODES_MAX_S " nodes at most and all are connected";
		return NULL;
	}
	n = charged_realloc(NULL, 0, sizeof(*n), NULL);
	if (!n) {
		*why = "the central daemon is over --max-memory";
		return NULL;
	}
	memset(n, 0, sizeof(*n));
	/* There is a free number: fewer than NODES_MAX nodes are kept. */
	for (number = next_number % NODES_MAX; numbered[number]; number = (number + 1) % NODES_MAX)
		;
	next_number = number + 1;
	snprintf(n->name, sizeof(n->name), "%s", name);
	n->number = number;
	numbered[number] = n;
	n->next = nodes;
	nodes = n;
	n->hnext = *name_slot(n->name);
	*name_slot(n->name) = n;
	nnodes++;
	return n;
}

/*
 * The world size the other connected holders of `j`'s job agree on, in
 * *world; false when none holds ranks. A lost node's word does not count:
 * the job may have been restarted elsewhere with another size.
 */
static bool established_world(const struct nodes_entry *e, const struct node_job *self,
			      uint32_t *world)
{
	for (uint32_t h = 0; e && h < e->nholders; h++) {
		const struct node_job *o = e->holders[h];

		if (o != self && o->nranks && o->node && o->node->conn) {
			*world = o->world_size;
			return true;
		}
	}
	return false;
}

/* Rank `rank` among the node's ranks of the job (ascending by rank), or NULL. */
static const struct fr_node_rank *node_job_find_rank(const struct node_job *j, uint32_t rank)
{
	uint32_t lo = 0, hi = j->nranks;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (j->ranks[mid].rank < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < j->nranks && j->ranks[lo].rank == rank ? &j->ranks[lo] : NULL;
}

/* A rank of a NODE_RANKS batch, with its place there, sorted by rank. */
struct claim {
	uint32_t rank;
	uint32_t at;
};

static int claim_cmp(const void *a, const void *b)
{
	const struct claim *x = a, *y = b;

	return (x->rank > y->rank) - (x->rank < y->rank);
}

/* The first of `c` (n, ascending) at `rank` or above. */
static uint32_t claim_lower(const struct claim *c, uint32_t n, uint32_t rank)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (c[mid].rank < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Marks (at = UINT32_MAX) each of `c` (n, ascending) that record `o`
 * holds, searching from whichever side is shorter: over a job's
 * connected holders, whose ranks never overlap, that costs at most the
 * job's world size, never the batch times the holders.
 */
static void claims_drop_held(const struct node_job *o, struct claim *c, uint32_t n)
{
	if (o->nranks < n) {
		for (uint32_t r = 0; r < o->nranks; r++)
			for (uint32_t i = claim_lower(c, n, o->ranks[r].rank);
			     i < n && c[i].rank == o->ranks[r].rank; i++)
				c[i].at = UINT32_MAX;
		return;
	}
	for (uint32_t i = 0; i < n; i++)
		if (node_job_find_rank(o, c[i].rank))
			c[i].at = UINT32_MAX;
}

/* Takes the ranks in `c` (n, ascending) off `o`, a lost node's record:
 * they run on another node now. */
static void node_job_unclaim(struct node_job *o, const struct claim *c, uint32_t n)
{
	uint32_t out = 0;

	for (uint32_t i = 0; i < o->nranks; i++) {
		uint32_t k = claim_lower(c, n, o->ranks[i].rank);

		if (k == n || c[k].rank != o->ranks[i].rank)
			o->ranks[out++] = o->ranks[i];
	}
	o->nranks = out;
	o->nconnected = count_connected(o->ranks, o->nranks);
}

/*
 * One holder of a rank (docs/SCALE-OUT.md): drops from `m` the ranks that
 * another connected node of the job holds, and takes off lost nodes'
 * records those that moved here. Returns how many were dropped; -ENOMEM.
 */
static int ranks_claim(struct node_job *j, struct fr_msg_node_ranks *m)
{
	struct nodes_entry *e = j->entry;
	uint32_t n = m->nranks, kept = 0, dropped = 0, k = 0;
	struct claim *c;

	if (!e || e->nholders < 2 || !n)
		return 0;
	c = malloc(n * sizeof(*c));
	if (!c)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		c[i] = (struct claim){ .rank = m->ranks[i].rank, .at = i };
	qsort(c, n, sizeof(*c), claim_cmp);
	for (uint32_t h = 0; h < e->nholders; h++) {
		const struct node_job *o = e->holders[h];

		if (o != j && o->node && o->node->conn && o->nranks)
			claims_drop_held(o, c, n);
	}
	/* The batch in its order, less what was dropped; `c` keeps the rest. */
	for (uint32_t i = 0; i < n; i++) {
		if (c[i].at == UINT32_MAX) {
			dropped++;
			continue;
		}
		c[k++] = c[i];
	}
	for (uint32_t i = 0; i < m->nranks; i++) {
		uint32_t at = claim_lower(c, k, m->ranks[i].rank);

		if (at < k && c[at].rank == m->ranks[i].rank)
			m->ranks[kept++] = m->ranks[i];
	}
	m->nranks = kept;
	for (uint32_t h = 0; h < e->nholders && k; h++) {
		struct node_job *o = e->holders[h];

		if (o != j && o->node && !o->node->conn && o->nranks)
			node_job_unclaim(o, c, k);
	}
	free(c);
	return (int)dropped;
}

struct node *nodes_admit(struct conn *c, const char *peer, const struct fr_msg_node_hello *m,
			 struct conn **old, const char **why)
{
	struct node *n;

	*old = NULL;
	*why = NULL;
	/* The name goes into log lines and JSON: a host name, nothing a
	 * peer could forge a line with. */
	for (const char *p = m->node; *p; p++) {
		if (*p <= 0x20 || *p >= 0x7f) {
			daemon_log("refusing a node from %s: its name is not printable ASCII", peer);
			*why = "the node's name must be printable ASCII without spaces";
			return NULL;
		}
	}
	if (!m->node[0]) {
		daemon_log("refusing a node from %s: its name is empty", peer);
		*why = "the node's name is empty";
		return NULL;
	}
	n = node_by_name(m->node);
	if (n && n->conn && n->boot_id != m->boot_id) {
		/* Another daemon that says it is this node (a copied
		 * configuration, or a peer making up names) must not
		 * evict the one connected. */
		daemon_log("refusing node %s from %s (boot id %016" PRIx64
			   "): a node of that name is connected from %s with boot id %016" PRIx64,
			   m->node, peer, m->boot_id, n->addr, n->boot_id);
		*why = "a node daemon of this name is connected with another boot id: give each node its own host name";
		return NULL;
	}
	if (!n && !(n = node_new(m->node, why))) {
		daemon_log("refusing node %s from %s: %s", m->node, peer, *why);
		return NULL;
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
	n->refusal_logged = false;
	for (uint32_t i = 0; i < m->njobs; i++) {
		int err;
		uint32_t world;
		struct node_job *j = node_job(n, m->jobs[i].job, true, &err);

		if (j && established_world(j->entry, j, &world) && world != m->jobs[i].world_size) {
			/* Its NODE_RANKS will be refused too, and logged then. */
			node_job_drop(n, n->njobs - 1);
			continue;
		}
		if (j && m->jobs[i].world_size <= NODE_RANKS_MAX)
			j->world_size = m->jobs[i].world_size;
		else if (err)
			node_refuse(n, m->jobs[i].job, err, "the job its node_hello lists");
	}
	return n;
}

struct node *nodes_hello(struct conn *c, const char *peer, const struct fr_msg_node_hello *m,
			 struct conn **old)
{
	const char *why;

	return nodes_admit(c, peer, m, old, &why);
}

int nodes_ranks(struct node *n, const struct fr_msg_node_ranks *cm)
{
	struct fr_msg_node_ranks m = *cm;
	uint32_t world;
	int err, dropped;
	struct node_job *j;

	/* An empty full list: the job ended on the node. */
	if ((m.flags & FR_NODE_RANKS_FULL) && !m.nranks) {
		size_t i = node_job_at(n, m.job);

		if (i < n->njobs) {
			daemon_log("node %s: job %s ended there", n->name, m.job);
			node_job_drop(n, i);
		}
		return 0;
	}
	j = node_job(n, m.job, true, &err);
	if (!j)
		return node_refuse(n, m.job, err, "ranks");
	/* One world size a job: a node that says another is refused rather
	 * than shrinking or growing the job under the others. */
	if (m.world_size <= NODE_RANKS_MAX && established_world(j->entry, j, &world) &&
	    world != m.world_size) {
		ratelog("node world conflict", m.job,
			"node %s: refusing its ranks of job %s: it says the world has %" PRIu32
			" ranks, the job's other nodes say %" PRIu32,
			n->name, m.job, m.world_size, world);
		if (!j->nranks)
			node_job_drop(n, node_job_at(n, m.job));
		return -EDOM;
	}
	dropped = ranks_claim(j, &m);
	if (dropped < 0)
		return dropped;
	if (dropped)
		ratelog("node rank conflict", m.job,
			"node %s: refusing %d rank%s of job %s that another connected node holds (one holder a rank; a lost node's ranks may move)",
			n->name, dropped, dropped == 1 ? "" : "s", m.job);
	err = node_job_ranks(j, &m);
	if (err)
		return node_refuse(n, m.job, err, "ranks");
	return dropped ? -EADDRINUSE : 0;
}

/* Rank `rank`'s state as node job `j` holds it; FR_NODE_RANK_STATE_MAX + 1 when it holds none. */
static uint8_t held_state(const struct node_job *j, uint32_t rank)
{
	uint32_t lo = 0, hi = j ? j->nranks : 0;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (j->ranks[mid].rank == rank)
			return j->ranks[mid].state;
		if (j->ranks[mid].rank < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	return FR_NODE_RANK_STATE_MAX + 1;
}

bool nodes_ranks_new_death(struct node *n, const struct fr_msg_node_ranks *m, uint32_t *rank,
			   uint32_t *pid, uint8_t *state)
{
	struct node_job *j;
	int err;

	if (!m->nranks)
		return false;
	j = node_job(n, m->job, false, &err);
	for (uint32_t i = 0; i < m->nranks; i++) {
		const struct fr_node_rank *r = &m->ranks[i];

		if (fr_node_rank_died(r->state) && !fr_node_rank_died(held_state(j, r->rank))) {
			*rank = r->rank;
			*pid = r->pid;
			*state = r->state;
			return true;
		}
	}
	return false;
}

int nodes_progress(struct node *n, const struct fr_msg_node_progress *m)
{
	int err;
	struct node_job *j = node_job(n, m->job, true, &err);

	if (j)
		err = node_job_progress(j, m);
	return err ? node_refuse(n, m->job, err, "progress records") : 0;
}

/*
 * Nodes lost are logged each by name, up to NODES_LOST_LOG_BURST within
 * NODES_LOST_LOG_WINDOW_NS; past that (a switch down, the central
 * daemon's network, a cluster's nodes killed at once: thousands in a
 * second) one line a minute says how many more (ratelog.h). The nodes'
 * states stay in GET /v1/nodes.
 */
#define NODES_LOST_LOG_BURST 16u
#define NODES_LOST_LOG_WINDOW_NS (10ull * NS_PER_S)

static struct {
	uint64_t since;
	unsigned n;
} lost_log;

void nodes_conn_lost(struct node *n, struct conn *c)
{
	if (n->conn != c)
		return;
	n->conn = NULL;
	n->lost_mono_ns = daemon_mono_ns();
	if (!lost_log.n || n->lost_mono_ns - lost_log.since > NODES_LOST_LOG_WINDOW_NS) {
		lost_log.since = n->lost_mono_ns;
		lost_log.n = 0;
	}
	if (lost_log.n++ < NODES_LOST_LOG_BURST)
		daemon_log("node %s lost: its ranks are unresponsive until it reconnects", n->name);
	else
		ratelog("nodes lost", "many", "node %s lost, and more than %u nodes within %llu s: "
			"each is counted here; GET /v1/nodes lists them", n->name,
			NODES_LOST_LOG_BURST, NODES_LOST_LOG_WINDOW_NS / NS_PER_S);
}

uint64_t nodes_lost_grace_ns(double heartbeat_timeout_s)
{
	double s = 10.0 * heartbeat_timeout_s;

	return (uint64_t)((s > NODES_LOST_GRACE_MIN_S ? s : NODES_LOST_GRACE_MIN_S) * NS_PER_S);
}

/* Whether node `n` still speaks for its jobs: connected, or lost within the grace. */
static bool node_current(const struct node *n, uint64_t now_mono_ns)
{
	return n->conn || now_mono_ns - n->lost_mono_ns <= lost_grace_ns;
}

void nodes_forget_lost(uint64_t now_mono_ns, uint64_t grace_ns)
{
	lost_grace_ns = grace_ns;
	for (struct node *n = nodes; n; n = n->next) {
		if (node_current(n, now_mono_ns) || !n->njobs)
			continue;
		daemon_log("node %s: lost for %.0f s: forgetting its %" PRIu32
			   " job%s (it resends them if it comes back)",
			   n->name, (double)(now_mono_ns - n->lost_mono_ns) / NS_PER_S, n->njobs,
			   n->njobs == 1 ? "" : "s");
		node_forget_jobs(n);
	}
}

struct conn *nodes_conn_by_name(const char *node)
{
	const struct node *n = node_by_name(node);

	return n ? n->conn : NULL;
}

void nodes_free(void)
{
	while (nodes) {
		struct node *n = nodes;

		nodes = n->next;
		node_free(n);
	}
	nnodes = 0;
	if (buckets)
		charged_free(buckets, nbuckets * sizeof(*buckets), NULL);
	buckets = NULL;
	nbuckets = 0;
}

/* ---- listings ---- */

static const char *node_rank_state_name(bool lost, uint8_t state)
{
	static const char *const names[] = { "connected", "unresponsive", "disconnected",
					      "finished", "crashed", "exited", "killed" };

	/* What the node cannot tell any more: its ranks may be fine, but
	 * nobody watches them now. */
	if (lost && state != FR_NODE_RANK_FINISHED)
		return "unresponsive";
	return state <= FR_NODE_RANK_STATE_MAX ? names[state] : "unknown";
}

json_t *nodes_json(void)
{
	json_t *arr = json_array();

	for (const struct node *n = nodes; arr && n; n = n->next) {
		uint64_t ranks = 0;

		for (size_t i = 0; i < n->njobs; i++)
			ranks += n->jobs[i]->nranks;
		json_array_append_new(arr, json_pack("{s:s, s:s, s:b, s:I, s:I}", "name", n->name,
						     "address", n->addr, "connected", n->conn != NULL,
						     "jobs", (json_int_t)n->njobs, "ranks",
						     (json_int_t)ranks));
	}
	return json_pack("{s:o}", "nodes", arr);
}

int nodes_job_ranks_take(const char *job, struct nodes_ranks_copy *out)
{
	struct nodes_entry *e = entry_find(job);
	size_t k = 0;

	memset(out, 0, sizeof(*out));
	for (uint32_t h = 0; e && h < e->nholders; h++)
		out->n += e->holders[h]->nranks;
	if (!out->n)
		return 0;
	out->charged = out->n * (sizeof(*out->ranks) + sizeof(*out->from)) +
		       e->nholders * sizeof(*out->nodes);
	if (!budget_charge(BUDGET_VIEWS, out->charged)) {
		out->charged = 0;
		out->n = 0;
		return -EDQUOT;
	}
	out->ranks = malloc(out->n * sizeof(*out->ranks));
	out->from = malloc(out->n * sizeof(*out->from));
	out->nodes = malloc(e->nholders * sizeof(*out->nodes));
	if (!out->ranks || !out->from || !out->nodes) {
		nodes_ranks_copy_free(out);
		return -ENOMEM;
	}
	for (uint32_t h = 0; h < e->nholders; h++) {
		const struct node_job *j = e->holders[h];

		memcpy(out->nodes[h].name, j->node->name, sizeof(out->nodes[h].name));
		out->nodes[h].lost = !j->node->conn;
		memcpy(&out->ranks[k], j->ranks, j->nranks * sizeof(*j->ranks));
		for (uint32_t i = 0; i < j->nranks; i++)
			out->from[k++] = h;
	}
	out->nnodes = e->nholders;
	return 0;
}

void nodes_ranks_copy_free(struct nodes_ranks_copy *v)
{
	free(v->ranks);
	free(v->from);
	free(v->nodes);
	if (v->charged)
		budget_release(BUDGET_VIEWS, v->charged);
	memset(v, 0, sizeof(*v));
}

void nodes_ranks_copy_json(const struct nodes_ranks_copy *v, json_t *ranks)
{
	for (size_t i = 0; i < v->n; i++) {
		const struct fr_node_rank *r = &v->ranks[i];
		const struct nodes_copy_node *n = &v->nodes[v->from[i]];
		json_t *o = json_pack("{s:I, s:s, s:I, s:s, s:I, s:I, s:s}", "rank",
				      (json_int_t)r->rank, "host", r->host, "pid", (json_int_t)r->pid,
				      "state", node_rank_state_name(n->lost, r->state),
				      "ring_capacity", (json_int_t)r->ring_capacity, "start_ns",
				      (json_int_t)r->start_ns, "node", n->name);

		if (n->lost && o)
			json_object_set_new(o, "reason", json_string("node lost"));
		json_array_append_new(ranks, o);
	}
}

size_t nodes_job_ranks_json(const char *job, json_t *ranks)
{
	struct nodes_ranks_copy v;
	size_t n;

	if (nodes_job_ranks_take(job, &v))
		return 0;
	nodes_ranks_copy_json(&v, ranks);
	n = v.n;
	nodes_ranks_copy_free(&v);
	return n;
}

/* A holder of the entry with ranks, a connected one first (its world size
 * is the job's: nodes_ranks()); NULL when none has any. */
static const struct node_job *entry_with_ranks(const struct nodes_entry *e)
{
	const struct node_job *any = NULL;

	for (uint32_t h = 0; h < e->nholders; h++) {
		const struct node_job *j = e->holders[h];

		if (j->nranks && j->node && j->node->conn)
			return j;
		if (j->nranks && !any)
			any = j;
	}
	return any;
}

bool nodes_job_held(const char *job, const char **node)
{
	struct nodes_entry *e = entry_find(job);
	uint64_t now = daemon_mono_ns();

	/* A node gone longer than the grace no longer keeps the id from agents. */
	for (uint32_t h = 0; e && h < e->nholders; h++) {
		const struct node_job *j = e->holders[h];

		if (j->nranks && (!j->node || node_current(j->node, now))) {
			if (node)
				*node = j->node ? j->node->name : "";
			return true;
		}
	}
	return false;
}

bool nodes_job_known(const char *job, uint32_t *world_size)
{
	struct nodes_entry *e = entry_find(job);
	const struct node_job *j = e ? entry_with_ranks(e) : NULL;

	if (j)
		*world_size = j->world_size;
	return j != NULL;
}

void nodes_jobs_json(json_t *jobs, bool (*skip)(void *arg, const char *job), void *arg)
{
	for (const struct nodes_entry *e = entries_first; e; e = e->next) {
		const struct node_job *j = entry_with_ranks(e);
		uint64_t connected = 0;

		if (!j || skip(arg, e->id))
			continue;
		for (uint32_t h = 0; h < e->nholders; h++)
			if (e->holders[h]->node && e->holders[h]->node->conn)
				connected += e->holders[h]->nconnected;
		json_array_append_new(jobs, json_pack("{s:s, s:I, s:I, s:s, s:I, s:s}", "job", e->id,
						      "world_size", (json_int_t)j->world_size,
						      "ranks_connected", (json_int_t)connected,
						      "status", "running", "incidents",
						      (json_int_t)0, "verdict", "unknown"));
	}
}

/* ---- the read side ---- */

void nodes_each_job(void (*fn)(void *arg, const char *job, uint32_t world_size), void *arg)
{
	for (const struct nodes_entry *e = entries_first; e; e = e->next) {
		const struct node_job *j = entry_with_ranks(e);

		if (j)
			fn(arg, e->id, j->world_size);
	}
}

/* A record of a holder, for nodes_job_each_comm() to group by communicator. */
struct comm_rec {
	const struct node_prog *p;
	const struct node_job *j;
	uint32_t holder;
};

static int comm_rec_cmp(const void *a, const void *b)
{
	const struct comm_rec *x = a, *y = b;
	int c = strcmp(x->p->comm, y->p->comm);

	return c ? c : (x->holder > y->holder) - (x->holder < y->holder);
}

void nodes_job_each_comm(const char *job, uint64_t now_mono_ns,
			 void (*fn)(void *arg, const char *comm, const struct agg_node *recs,
				    size_t n),
			 void *arg)
{
	struct nodes_entry *e = entry_find(job);
	struct fr_node_comm_progress *full = NULL;
	struct agg_node *recs = NULL;
	struct comm_rec *all = NULL;
	size_t total = 0, k = 0;

	for (uint32_t h = 0; e && h < e->nholders; h++)
		total += e->holders[h]->nprogress;
	if (!total)
		return;
	all = malloc(total * sizeof(*all));
	recs = malloc(e->nholders * sizeof(*recs));
	/* Untouched pages of a big malloc() cost nothing: only what the
	 * records use is written. */
	full = malloc(e->nholders * sizeof(*full));
	if (!all || !recs || !full)
		goto out_free;
	for (uint32_t h = 0; h < e->nholders; h++) {
		const struct node_job *j = e->holders[h];

		for (uint32_t c = 0; c < j->nprogress; c++)
			all[k++] = (struct comm_rec){ .p = &j->progress[c], .j = j, .holder = h };
	}
	qsort(all, total, sizeof(*all), comm_rec_cmp);
	for (size_t i = 0; i < total;) {
		size_t n = 0;

		for (size_t x = i; x < total && strcmp(all[x].p->comm, all[i].p->comm) == 0; x++) {
			const struct node_prog *p = all[x].p;

			node_prog_unpack(p, &full[n]);
			recs[n].node = all[x].j->node ? all[x].j->node->number : 0;
			recs[n].rec = &full[n];
			recs[n].held_ms =
				now_mono_ns > p->mono_ns ? (now_mono_ns - p->mono_ns) / 1000000u : 0;
			n++;
		}
		fn(arg, all[i].p->comm, recs, n);
		i += n;
	}
out_free:
	free(all);
	free(recs);
	free(full);
}

void nodes_job_each_lost(const char *job,
			 void (*fn)(void *arg, const char *node, uint64_t lost_mono_ns,
				    const struct fr_node_rank *ranks, uint32_t nranks),
			 void *arg)
{
	struct nodes_entry *e = entry_find(job);

	for (uint32_t h = 0; e && h < e->nholders; h++) {
		const struct node_job *j = e->holders[h];

		if (j->node && !j->node->conn && j->nranks)
			fn(arg, j->node->name, j->node->lost_mono_ns, j->ranks, j->nranks);
	}
}

const char *nodes_node_name(uint32_t node)
{
	return node < NODES_MAX && numbered[node] ? numbered[node]->name : "";
}


/* read side: node_watchdog */
const struct fr_node_rank *nodes_job_rank(const char *job, const char *node, uint32_t rank)
{
	struct nodes_entry *e = entry_find(job);

	/* The job's holders, not every node: linear in the nodes that hold it. */
	for (uint32_t h = 0; e && h < e->nholders; h++) {
		const struct node_job *j = e->holders[h];

		if (j->node && strcmp(j->node->name, node) == 0)
			return node_job_find_rank(j, rank);
	}
	return NULL;
}

/* read side: cluster incidents */

void nodes_job_each_node(const char *job,
			 void (*fn)(void *arg, const char *node, struct conn *conn,
				    const struct fr_node_rank *ranks, uint32_t nranks),
			 void *arg)
{
	struct nodes_entry *e = entry_find(job);

	for (uint32_t h = 0; e && h < e->nholders; h++) {
		const struct node_job *j = e->holders[h];

		if (j->node && j->nranks)
			fn(arg, j->node->name, j->node->conn, j->ranks, j->nranks);
	}
}

bool nodes_rank_node(const char *job, uint32_t rank, struct conn **conn, const char **node)
{
	struct nodes_entry *e = entry_find(job);

	for (uint32_t h = 0; e && h < e->nholders; h++) {
		const struct node_job *j = e->holders[h];

		if (j->node && node_job_find_rank(j, rank)) {
			*conn = j->node->conn;
			*node = j->node->name;
			return true;
		}
	}
	return false;
}
