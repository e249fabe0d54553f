/*
 * The codec of the node daemons' messages (node_wire.h), on the cursors of
 * wire_io.h, with wire.c's rules: encoders validate, size, then write;
 * decoders check each count against the bytes left (or against its cap,
 * for the arrays inside a NODE_PROGRESS record, which are fixed in the
 * struct) before allocating, and refuse what an encoder would refuse, so
 * that whatever one side accepts the other writes back byte for byte.
 *
 * Values refused beyond the string limits: counts over their caps, a rank
 * state or NODE_RANKS flag this build does not define (the receiver acts
 * on them; a new one takes a new version), a rank not below its job's
 * world size, a member run outside its communicator or one that overlaps
 * or goes back, a range that is empty, ends at FR_RANK_UNKNOWN or is not
 * after the previous one with a gap (ranges are built coalesced), lowest
 * above highest, a laggard not below the node's highest or below its
 * lowest, more ranks named than the record counts, and an operation
 * group of no rank or with flags wire.h refuses in PROGRESS.
 */
#include "node_wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire_io.h"

/* The smallest encodings of array elements: every string empty, no runs. */
#define NODE_JOB_MIN_SIZE (STR_SIZE(0) + 4 + 4)
#define NODE_RANK_MIN_SIZE (4 + 4 + STR_SIZE(0) + 1 + 8 + 4)
#define NODE_COMM_MIN_SIZE (STR_SIZE(0) + STR_SIZE(0) + 4 + 4)
#define NODE_MAP_SIZE FR_NODE_MAP_SIZE
#define NODE_RANGE_SIZE 8
#define NODE_LAGGARD_SIZE 20
/* A group without its ranges. */
#define NODE_GROUP_FIXED_SIZE (8 + 1 + 1 + 4 + 8 + 4)

/* Every encoded NODE_PROGRESS fits a frame, at every cap. */
#define NODE_PROGRESS_COMM_MAX_SIZE                                                    \
	(STR_SIZE(FR_COMM_ID_MAX) + 4 * 8 + 4 + 4 + FR_NODE_RANGES_MAX * NODE_RANGE_SIZE + \
	 4 + 4 + FR_NODE_LAGGARDS_MAX * NODE_LAGGARD_SIZE + 4 + 4 +                      \
	 FR_NODE_GROUPS_MAX * (NODE_GROUP_FIXED_SIZE + FR_NODE_RANGES_MAX * NODE_RANGE_SIZE))
_Static_assert(STR_SIZE(FR_JOB_MAX) + 4 + FR_NODE_PROGRESS_COMMS_MAX * NODE_PROGRESS_COMM_MAX_SIZE <=
		       FR_WIRE_MAX_PAYLOAD,
	       "a full NODE_PROGRESS fits one frame");
_Static_assert(STR_SIZE(FR_JOB_MAX) + 4 + 1 + 4 +
			       FR_NODE_RANKS_BATCH * (NODE_RANK_MIN_SIZE + FR_HOST_MAX) <=
		       FR_WIRE_MAX_PAYLOAD,
	       "a full NODE_RANKS batch fits one frame");
_Static_assert(STR_SIZE(FR_HOST_MAX) + 8 + 2 + 4 +
			       FR_NODE_JOBS_MAX * (NODE_JOB_MIN_SIZE + FR_JOB_MAX) <=
		       FR_WIRE_MAX_PAYLOAD,
	       "a full NODE_HELLO fits one frame");

/* Reads a count and refuses one over `cap`. */
static uint32_t rd_capped(struct rd *r, uint32_t cap)
{
	uint32_t n = rd_u32(r);

	if (n > cap) {
		rd_fail(r);
		return 0;
	}
	return n;
}

/* Ranges */

/*
 * Ascending runs, each non-empty, below FR_RANK_UNKNOWN, with a gap after
 * the previous one (coalesced); adds the ranks they hold to *total.
 */
static bool ranges_valid(const struct fr_node_range *r, uint32_t n, uint64_t *total)
{
	uint64_t next = 0; /* the lowest rank the next run may start at */

	for (uint32_t i = 0; i < n; i++) {
		uint64_t end = (uint64_t)r[i].first + r[i].count;

		if (r[i].count == 0 || end > FR_RANK_UNKNOWN || r[i].first < next)
			return false;
		next = end + 1;
		*total += r[i].count;
	}
	return true;
}

bool fr_node_ranges_add(struct fr_node_range *r, uint32_t *n, uint32_t cap, uint32_t rank)
{
	if (*n) {
		struct fr_node_range *last = &r[*n - 1];
		uint64_t end = (uint64_t)last->first + last->count;

		if (rank >= last->first && rank < end)
			return false;
		if (rank == end) {
			last->count++;
			return true;
		}
	}
	if (*n < cap)
		r[(*n)++] = (struct fr_node_range){ .first = rank, .count = 1 };
	return true;
}

static void wr_ranges(struct wr *w, const struct fr_node_range *r, uint32_t n)
{
	wr_u32(w, n);
	for (uint32_t i = 0; i < n; i++) {
		wr_u32(w, r[i].first);
		wr_u32(w, r[i].count);
	}
}

static uint32_t rd_ranges(struct rd *r, struct fr_node_range *out)
{
	uint32_t n = rd_capped(r, FR_NODE_RANGES_MAX);

	for (uint32_t i = 0; i < n && !r->bad; i++) {
		out[i].first = rd_u32(r);
		out[i].count = rd_u32(r);
	}
	return r->bad ? 0 : n;
}

/*
 * A job id from a node: a name fr_wire_valid_name() accepts, as agents'
 * job ids must be (registry.c), since the central daemon makes
 * directories of it (DIR/<job>/<incident>/) and writes it in log lines.
 */
static bool job_valid(const char *job)
{
	return str_len(job, FR_JOB_MAX) <= FR_JOB_MAX && fr_wire_valid_name(job);
}

/* NODE_HELLO */

_Static_assert(STR_SIZE(FR_HOST_MAX) + 8 + 2 + 4 +
			       FR_NODE_HELLO_JOBS_MAX * (STR_SIZE(FR_JOB_MAX) + 4 + 4) <=
		       FR_NODE_HELLO_MAX_PAYLOAD,
	       "FR_NODE_HELLO_JOBS_MAX jobs of the longest ids fit FR_NODE_HELLO_MAX_PAYLOAD");

size_t fr_wire_node_hello_size(const struct fr_msg_node_hello *m)
{
	size_t n = FR_WIRE_HEADER_SIZE + STR_SIZE(str_len(m->node, FR_HOST_MAX)) + 8 + 2 + 4;

	for (uint32_t i = 0; m->jobs && i < m->njobs; i++)
		n += STR_SIZE(str_len(m->jobs[i].job, FR_JOB_MAX)) + 4 + 4;
	return n;
}

int fr_wire_node_hello_encode(const struct fr_msg_node_hello *m, uint8_t *buf, size_t cap)
{
	struct wr w;
	int total;

	if (str_len(m->node, FR_HOST_MAX) > FR_HOST_MAX || m->njobs > FR_NODE_JOBS_MAX ||
	    (m->njobs && !m->jobs))
		return -EINVAL;
	for (uint32_t i = 0; i < m->njobs; i++)
		if (!job_valid(m->jobs[i].job))
			return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_NODE_HELLO, fr_wire_node_hello_size(m));
	if (total < 0)
		return total;
	wr_str(&w, m->node, str_len(m->node, FR_HOST_MAX));
	wr_u64(&w, m->boot_id);
	wr_u16(&w, m->protocol);
	wr_u32(&w, m->njobs);
	for (uint32_t i = 0; i < m->njobs; i++) {
		wr_str(&w, m->jobs[i].job, str_len(m->jobs[i].job, FR_JOB_MAX));
		wr_u32(&w, m->jobs[i].world_size);
		wr_u32(&w, m->jobs[i].nranks);
	}
	return wr_end(&w, buf, total);
}

int fr_wire_node_hello_decode(const uint8_t *payload, size_t len, struct fr_msg_node_hello *m)
{
	struct rd r = rd_init(payload, len);
	int ret = -EPROTO;

	memset(m, 0, sizeof(*m));
	rd_str(&r, m->node, FR_HOST_MAX);
	m->boot_id = rd_u64(&r);
	m->protocol = rd_u16(&r);
	m->njobs = rd_count(&r, NODE_JOB_MIN_SIZE, 0);
	if (m->njobs > FR_NODE_JOBS_MAX)
		rd_fail(&r);
	if (rd_array(&r, (void **)&m->jobs, m->njobs, sizeof(*m->jobs), &ret) < 0)
		goto out_free;
	for (uint32_t i = 0; i < m->njobs && !r.bad; i++) {
		rd_str(&r, m->jobs[i].job, FR_JOB_MAX);
		m->jobs[i].world_size = rd_u32(&r);
		m->jobs[i].nranks = rd_u32(&r);
		if (!r.bad && !job_valid(m->jobs[i].job))
			rd_fail(&r);
	}
	if (rd_ok(&r))
		return 0;
out_free:
	/* Frees what was taken; the message was zeroed first. */
	fr_wire_node_hello_free(m);
	return ret;
}

FR_WIRE_FREE_ONE(fr_wire_node_hello_free, struct fr_msg_node_hello, jobs)

/* NODE_RANKS */

static bool node_rank_valid(const struct fr_node_rank *e, uint32_t world_size)
{
	return e->rank < world_size && e->state <= FR_NODE_RANK_STATE_MAX &&
	       str_len(e->host, FR_HOST_MAX) <= FR_HOST_MAX;
}

size_t fr_wire_node_ranks_size(const struct fr_msg_node_ranks *m)
{
	size_t n = FR_WIRE_HEADER_SIZE + STR_SIZE(str_len(m->job, FR_JOB_MAX)) + 4 + 1 + 4;

	for (uint32_t i = 0; m->ranks && i < m->nranks; i++)
		n += NODE_RANK_MIN_SIZE + str_len(m->ranks[i].host, FR_HOST_MAX);
	return n;
}

int fr_wire_node_ranks_encode(const struct fr_msg_node_ranks *m, uint8_t *buf, size_t cap)
{
	struct wr w;
	int total;

	if (!job_valid(m->job) || (m->flags & ~FR_NODE_RANKS_FULL) ||
	    m->nranks > FR_NODE_RANKS_BATCH || (m->nranks && !m->ranks))
		return -EINVAL;
	for (uint32_t i = 0; i < m->nranks; i++)
		if (!node_rank_valid(&m->ranks[i], m->world_size))
			return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_NODE_RANKS, fr_wire_node_ranks_size(m));
	if (total < 0)
		return total;
	wr_str(&w, m->job, str_len(m->job, FR_JOB_MAX));
	wr_u32(&w, m->world_size);
	wr_u8(&w, m->flags);
	wr_u32(&w, m->nranks);
	for (uint32_t i = 0; i < m->nranks; i++) {
		const struct fr_node_rank *e = &m->ranks[i];

		wr_u32(&w, e->rank);
		wr_u32(&w, e->pid);
		wr_str(&w, e->host, str_len(e->host, FR_HOST_MAX));
		wr_u8(&w, e->state);
		wr_u64(&w, e->start_ns);
		wr_u32(&w, e->ring_capacity);
	}
	return wr_end(&w, buf, total);
}

int fr_wire_node_ranks_decode(const uint8_t *payload, size_t len, struct fr_msg_node_ranks *m)
{
	struct rd r = rd_init(payload, len);
	int ret = -EPROTO;

	memset(m, 0, sizeof(*m));
	rd_str(&r, m->job, FR_JOB_MAX);
	m->world_size = rd_u32(&r);
	m->flags = rd_u8(&r);
	if ((m->flags & ~FR_NODE_RANKS_FULL) || (!r.bad && !job_valid(m->job)))
		rd_fail(&r);
	m->nranks = rd_count(&r, NODE_RANK_MIN_SIZE, 0);
	if (m->nranks > FR_NODE_RANKS_BATCH)
		rd_fail(&r);
	if (rd_array(&r, (void **)&m->ranks, m->nranks, sizeof(*m->ranks), &ret) < 0)
		goto out_free;
	for (uint32_t i = 0; i < m->nranks && !r.bad; i++) {
		struct fr_node_rank *e = &m->ranks[i];

		e->rank = rd_u32(&r);
		e->pid = rd_u32(&r);
		rd_str(&r, e->host, FR_HOST_MAX);
		e->state = rd_u8(&r);
		e->start_ns = rd_u64(&r);
		e->ring_capacity = rd_u32(&r);
		if (!node_rank_valid(e, m->world_size))
			rd_fail(&r);
	}
	if (rd_ok(&r))
		return 0;
out_free:
	/* Frees what was taken; the message was zeroed first. */
	fr_wire_node_ranks_free(m);
	return ret;
}

FR_WIRE_FREE_ONE(fr_wire_node_ranks_free, struct fr_msg_node_ranks, ranks)

/* NODE_COMMS */

/* Strings within their limits, and runs as member_runs.h has them. */
static bool node_comm_valid(const struct fr_node_comm *c)
{
	return str_len(c->id, FR_COMM_ID_MAX) <= FR_COMM_ID_MAX &&
	       str_len(c->desc, FR_COMM_DESC_MAX) <= FR_COMM_DESC_MAX && (!c->nmaps || c->maps) &&
	       !fr_node_maps_check(c->maps, c->nmaps, c->size);
}

static size_t node_comm_size(const struct fr_node_comm *c, uint32_t nmaps)
{
	return STR_SIZE(str_len(c->id, FR_COMM_ID_MAX)) + STR_SIZE(str_len(c->desc, FR_COMM_DESC_MAX)) +
	       4 + 4 + (size_t)nmaps * NODE_MAP_SIZE;
}

size_t fr_wire_node_comms_size(const struct fr_msg_node_comms *m)
{
	size_t n = FR_WIRE_HEADER_SIZE + STR_SIZE(str_len(m->job, FR_JOB_MAX)) + 4;

	for (uint32_t i = 0; m->comms && i < m->ncomms; i++)
		n += node_comm_size(&m->comms[i], m->comms[i].maps ? m->comms[i].nmaps : 0);
	return n;
}

int fr_wire_node_comms_encode(const struct fr_msg_node_comms *m, uint8_t *buf, size_t cap)
{
	struct wr w;
	int total;

	if (!job_valid(m->job) || (m->ncomms && !m->comms))
		return -EINVAL;
	for (uint32_t i = 0; i < m->ncomms; i++)
		if (!node_comm_valid(&m->comms[i]))
			return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_NODE_COMMS, fr_wire_node_comms_size(m));
	if (total < 0)
		return total;
	wr_str(&w, m->job, str_len(m->job, FR_JOB_MAX));
	wr_u32(&w, m->ncomms);
	for (uint32_t i = 0; i < m->ncomms; i++) {
		const struct fr_node_comm *c = &m->comms[i];

		wr_str(&w, c->id, str_len(c->id, FR_COMM_ID_MAX));
		wr_str(&w, c->desc, str_len(c->desc, FR_COMM_DESC_MAX));
		wr_u32(&w, c->size);
		wr_u32(&w, c->nmaps);
		wr_runs(&w, c->maps, c->nmaps);
	}
	return wr_end(&w, buf, total);
}

void fr_wire_node_comms_free(struct fr_msg_node_comms *m)
{
	if (!m)
		return;
	for (uint32_t i = 0; m->comms && i < m->ncomms; i++)
		free(m->comms[i].maps);
	free(m->comms);
	memset(m, 0, sizeof(*m));
}

int fr_wire_node_comms_decode(const uint8_t *payload, size_t len, struct fr_msg_node_comms *m)
{
	struct rd r = rd_init(payload, len);
	int ret = -EPROTO;

	memset(m, 0, sizeof(*m));
	rd_str(&r, m->job, FR_JOB_MAX);
	if (!r.bad && !job_valid(m->job))
		rd_fail(&r);
	m->ncomms = rd_count(&r, NODE_COMM_MIN_SIZE, 0);
	if (rd_array(&r, (void **)&m->comms, m->ncomms, sizeof(*m->comms), &ret) < 0)
		goto out_free;
	for (uint32_t i = 0; i < m->ncomms && !r.bad; i++) {
		struct fr_node_comm *c = &m->comms[i];

		rd_str(&r, c->id, FR_COMM_ID_MAX);
		rd_str(&r, c->desc, FR_COMM_DESC_MAX);
		c->size = rd_u32(&r);
		/* The communicators after this one take at least their minimum. */
		c->nmaps = rd_count(&r, NODE_MAP_SIZE, (size_t)(m->ncomms - 1 - i) * NODE_COMM_MIN_SIZE);
		if (r.bad || !c->nmaps)
			continue;
		c->maps = malloc(c->nmaps * sizeof(*c->maps));
		if (!c->maps) {
			ret = -ENOMEM;
			goto out_free;
		}
		rd_runs(&r, c->maps, c->nmaps);
		if (!node_comm_valid(c))
			rd_fail(&r);
	}
	if (rd_ok(&r))
		return 0;
out_free:
	/* Frees what was taken; the message was zeroed first. */
	fr_wire_node_comms_free(m);
	return ret;
}

int fr_node_comms_batch(struct fr_msg_node_comms *m, struct fr_node_comm *slots, uint32_t nslots,
			const struct fr_node_comm *comms, uint32_t ncomms, struct fr_node_cursor *at,
			size_t max_payload)
{
	size_t left = max_payload < FR_WIRE_MAX_PAYLOAD ? max_payload : FR_WIRE_MAX_PAYLOAD;
	size_t fixed = STR_SIZE(str_len(m->job, FR_JOB_MAX)) + 4;
	uint32_t n = 0;

	m->comms = slots;
	m->ncomms = 0;
	if (fixed > left)
		return -EMSGSIZE;
	left -= fixed;
	while (at->comm < ncomms && n < nslots) {
		const struct fr_node_comm *c = &comms[at->comm];
		size_t head = node_comm_size(c, 0);
		uint32_t rest = c->nmaps - at->map;
		uint32_t take;

		if (head > left || (rest && head + NODE_MAP_SIZE > left))
			break;
		take = rest;
		if (take > (left - head) / NODE_MAP_SIZE)
			take = (uint32_t)((left - head) / NODE_MAP_SIZE);
		slots[n] = *c;
		slots[n].maps = c->maps ? c->maps + at->map : NULL;
		slots[n].nmaps = take;
		left -= node_comm_size(c, take);
		n++;
		at->map += take;
		if (at->map == c->nmaps) {
			at->comm++;
			at->map = 0;
		}
	}
	if (n == 0 && at->comm < ncomms && nslots)
		return -EMSGSIZE;
	m->ncomms = n;
	return (int)n;
}

/* NODE_PROGRESS */

static bool group_valid(const struct fr_node_group *g, uint32_t nranks)
{
	uint64_t listed = 0;

	return g->nranks >= 1 && g->nranks <= nranks && g->nranges <= FR_NODE_RANGES_MAX &&
	       ranges_valid(g->ranges, g->nranges, &listed) && listed <= g->nranks &&
	       !(g->flags & ~(FR_WIRE_INFLIGHT_NONBLOCKING | FR_WIRE_INFLIGHT_WAITED)) &&
	       (!(g->flags & FR_WIRE_INFLIGHT_WAITED) || (g->flags & FR_WIRE_INFLIGHT_NONBLOCKING));
}

static bool comm_progress_valid(const struct fr_node_comm_progress *c)
{
	uint64_t listed = 0;

	if (str_len(c->comm, FR_COMM_ID_MAX) > FR_COMM_ID_MAX || c->lo_entered > c->hi_entered ||
	    c->lo_completed > c->hi_completed || c->nmembers > FR_NODE_RANGES_MAX ||
	    !ranges_valid(c->members, c->nmembers, &listed) || listed > c->nranks ||
	    c->nlaggards > FR_NODE_LAGGARDS_MAX ||
	    (uint64_t)c->nlaggards + c->laggards_omitted > c->nranks || c->ngroups > FR_NODE_GROUPS_MAX)
		return false;
	for (uint32_t i = 0; i < c->nlaggards; i++)
		if (c->laggards[i].last_entered >= c->hi_entered ||
		    c->laggards[i].last_entered < c->lo_entered)
			return false;
	for (uint32_t i = 0; i < c->ngroups; i++)
		if (!group_valid(&c->groups[i], c->nranks))
			return false;
	return true;
}

static size_t comm_progress_size(const struct fr_node_comm_progress *c)
{
	size_t n = STR_SIZE(str_len(c->comm, FR_COMM_ID_MAX)) + 4 * 8 + 4 + 4 +
		   (size_t)c->nmembers * NODE_RANGE_SIZE + 4 + 4 +
		   (size_t)c->nlaggards * NODE_LAGGARD_SIZE + 4 + 4;

	for (uint32_t i = 0; i < c->ngroups; i++)
		n += NODE_GROUP_FIXED_SIZE + (size_t)c->groups[i].nranges * NODE_RANGE_SIZE;
	return n;
}

size_t fr_wire_node_progress_size(const struct fr_msg_node_progress *m)
{
	size_t n = FR_WIRE_HEADER_SIZE + STR_SIZE(str_len(m->job, FR_JOB_MAX)) + 4;

	for (uint32_t i = 0; m->comms && i < m->ncomms; i++)
		n += comm_progress_size(&m->comms[i]);
	return n;
}

int fr_wire_node_progress_encode(const struct fr_msg_node_progress *m, uint8_t *buf, size_t cap)
{
	struct wr w;
	int total;

	if (!job_valid(m->job) || m->ncomms > FR_NODE_PROGRESS_COMMS_MAX ||
	    (m->ncomms && !m->comms))
		return -EINVAL;
	for (uint32_t i = 0; i < m->ncomms; i++)
		if (!comm_progress_valid(&m->comms[i]))
			return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_NODE_PROGRESS, fr_wire_node_progress_size(m));
	if (total < 0)
		return total;
	wr_str(&w, m->job, str_len(m->job, FR_JOB_MAX));
	wr_u32(&w, m->ncomms);
	for (uint32_t i = 0; i < m->ncomms; i++) {
		const struct fr_node_comm_progress *c = &m->comms[i];

		wr_str(&w, c->comm, str_len(c->comm, FR_COMM_ID_MAX));
		wr_u64(&w, c->lo_entered);
		wr_u64(&w, c->hi_entered);
		wr_u64(&w, c->lo_completed);
		wr_u64(&w, c->hi_completed);
		wr_u32(&w, c->nranks);
		wr_ranges(&w, c->members, c->nmembers);
		wr_u32(&w, c->nlaggards);
		wr_u32(&w, c->laggards_omitted);
		for (uint32_t j = 0; j < c->nlaggards; j++) {
			wr_u32(&w, c->laggards[j].rank);
			wr_u64(&w, c->laggards[j].last_entered);
			wr_u64(&w, c->laggards[j].last_completed);
		}
		wr_u32(&w, c->ngroups);
		wr_u32(&w, c->ops_omitted);
		for (uint32_t j = 0; j < c->ngroups; j++) {
			const struct fr_node_group *g = &c->groups[j];

			wr_u64(&w, g->seq);
			wr_u8(&w, g->type);
			wr_u8(&w, g->flags);
			wr_u32(&w, g->nranks);
			wr_u64(&w, g->age_ms);
			wr_ranges(&w, g->ranges, g->nranges);
		}
	}
	return wr_end(&w, buf, total);
}

static void rd_comm_progress(struct rd *r, struct fr_node_comm_progress *c)
{
	rd_str(r, c->comm, FR_COMM_ID_MAX);
	c->lo_entered = rd_u64(r);
	c->hi_entered = rd_u64(r);
	c->lo_completed = rd_u64(r);
	c->hi_completed = rd_u64(r);
	c->nranks = rd_u32(r);
	c->nmembers = rd_ranges(r, c->members);
	c->nlaggards = rd_capped(r, FR_NODE_LAGGARDS_MAX);
	c->laggards_omitted = rd_u32(r);
	for (uint32_t j = 0; j < c->nlaggards && !r->bad; j++) {
		c->laggards[j].rank = rd_u32(r);
		c->laggards[j].last_entered = rd_u64(r);
		c->laggards[j].last_completed = rd_u64(r);
	}
	c->ngroups = rd_capped(r, FR_NODE_GROUPS_MAX);
	c->ops_omitted = rd_u32(r);
	for (uint32_t j = 0; j < c->ngroups && !r->bad; j++) {
		struct fr_node_group *g = &c->groups[j];

		g->seq = rd_u64(r);
		g->type = rd_u8(r);
		g->flags = rd_u8(r);
		g->nranks = rd_u32(r);
		g->age_ms = rd_u64(r);
		g->nranges = rd_ranges(r, g->ranges);
	}
	if (!r->bad && !comm_progress_valid(c))
		rd_fail(r);
}

int fr_wire_node_progress_decode(const uint8_t *payload, size_t len, struct fr_msg_node_progress *m)
{
	struct rd r = rd_init(payload, len);
	int ret = -EPROTO;

	memset(m, 0, sizeof(*m));
	rd_str(&r, m->job, FR_JOB_MAX);
	if (!r.bad && !job_valid(m->job))
		rd_fail(&r);
	m->ncomms = rd_capped(&r, FR_NODE_PROGRESS_COMMS_MAX);
	if (rd_array(&r, (void **)&m->comms, m->ncomms, sizeof(*m->comms), &ret) < 0)
		goto out_free;
	for (uint32_t i = 0; i < m->ncomms && !r.bad; i++)
		rd_comm_progress(&r, &m->comms[i]);
	if (rd_ok(&r))
		return 0;
out_free:
	/* Frees what was taken; the message was zeroed first. */
	fr_wire_node_progress_free(m);
	return ret;
}

FR_WIRE_FREE_ONE(fr_wire_node_progress_free, struct fr_msg_node_progress, comms)

/* Incidents: NODE_DUMP_REQUEST, NODE_SUMMARY, NODE_DUMP_DONE, NODE_FETCH */

/*
 * The incident and job every incident message starts with: both names
 * the node makes directories of (fr_wire_valid_name()), so neither end
 * takes one that is not.
 */
static bool ids_valid(const char *incident, const char *job)
{
	return str_len(incident, FR_INCIDENT_MAX) <= FR_INCIDENT_MAX && fr_wire_valid_name(incident) &&
	       job_valid(job);
}

static size_t ids_size(const char *incident, const char *job)
{
	return STR_SIZE(str_len(incident, FR_INCIDENT_MAX)) + STR_SIZE(str_len(job, FR_JOB_MAX));
}

static void wr_ids(struct wr *w, const char *incident, const char *job)
{
	wr_str(w, incident, str_len(incident, FR_INCIDENT_MAX));
	wr_str(w, job, str_len(job, FR_JOB_MAX));
}

static void rd_ids(struct rd *r, char *incident, char *job)
{
	rd_str(r, incident, FR_INCIDENT_MAX);
	rd_str(r, job, FR_JOB_MAX);
	if (!r->bad && !ids_valid(incident, job))
		rd_fail(r);
}

/* NODE_DUMP_REQUEST */

static bool node_dump_request_valid(const struct fr_msg_node_dump_request *m)
{
	return ids_valid(m->incident, m->job) && str_len(m->reason, FR_REASON_MAX) <= FR_REASON_MAX &&
	       str_len(m->comm, FR_COMM_ID_MAX) <= FR_COMM_ID_MAX && m->has_seq <= 1;
}

size_t fr_wire_node_dump_request_size(const struct fr_msg_node_dump_request *m)
{
	return FR_WIRE_HEADER_SIZE + ids_size(m->incident, m->job) +
	       STR_SIZE(str_len(m->reason, FR_REASON_MAX)) +
	       STR_SIZE(str_len(m->comm, FR_COMM_ID_MAX)) + 1 + 8;
}

int fr_wire_node_dump_request_encode(const struct fr_msg_node_dump_request *m, uint8_t *buf,
				     size_t cap)
{
	struct wr w;
	int total;

	if (!node_dump_request_valid(m))
		return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_NODE_DUMP_REQUEST, fr_wire_node_dump_request_size(m));
	if (total < 0)
		return total;
	wr_ids(&w, m->incident, m->job);
	wr_str(&w, m->reason, str_len(m->reason, FR_REASON_MAX));
	wr_str(&w, m->comm, str_len(m->comm, FR_COMM_ID_MAX));
	wr_u8(&w, m->has_seq);
	wr_u64(&w, m->seq);
	return wr_end(&w, buf, total);
}

int fr_wire_node_dump_request_decode(const uint8_t *payload, size_t len,
				     struct fr_msg_node_dump_request *m)
{
	struct rd r = rd_init(payload, len);

	memset(m, 0, sizeof(*m));
	rd_ids(&r, m->incident, m->job);
	rd_str(&r, m->reason, FR_REASON_MAX);
	rd_str(&r, m->comm, FR_COMM_ID_MAX);
	m->has_seq = rd_u8(&r);
	m->seq = rd_u64(&r);
	if (!rd_ok(&r) || !node_dump_request_valid(m)) {
		memset(m, 0, sizeof(*m));
		return -EPROTO;
	}
	return 0;
}

/* NODE_SUMMARY */

/*
 * A piece lies inside its dump as DUMP_DATA's do; a failure carries a
 * reason and no bytes, a piece no reason; no flag this build does not
 * define.
 */
static bool node_summary_valid(const struct fr_msg_node_summary *m)
{
	size_t reason = str_len(m->reason, FR_REASON_MAX);

	if (!ids_valid(m->incident, m->job) || m->rank == FR_RANK_UNKNOWN ||
	    (m->flags & ~FR_NODE_SUMMARY_FLAGS) || reason > FR_REASON_MAX ||
	    ((m->flags & FR_NODE_SUMMARY_LOOK) && (m->flags & FR_NODE_SUMMARY_FULL)))
		return false;
	if (m->flags & FR_NODE_SUMMARY_FAILED)
		return reason > 0 && m->offset == 0 && m->total == 0 && m->len == 0;
	return reason == 0 && m->total > 0 && m->len <= FR_WIRE_DUMP_CHUNK &&
	       m->offset <= m->total && m->len <= m->total - m->offset;
}

size_t fr_wire_node_summary_size(const struct fr_msg_node_summary *m)
{
	return FR_WIRE_HEADER_SIZE + ids_size(m->incident, m->job) + 4 + 1 +
	       STR_SIZE(str_len(m->reason, FR_REASON_MAX)) + 8 + 8 + 4 + m->len;
}

int fr_wire_node_summary_encode(const struct fr_msg_node_summary *m, uint8_t *buf, size_t cap)
{
	struct wr w;
	int total;

	if (!node_summary_valid(m) || (m->len && !m->data))
		return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_NODE_SUMMARY, fr_wire_node_summary_size(m));
	if (total < 0)
		return total;
	wr_ids(&w, m->incident, m->job);
	wr_u32(&w, m->rank);
	wr_u8(&w, m->flags);
	wr_str(&w, m->reason, str_len(m->reason, FR_REASON_MAX));
	wr_u64(&w, m->offset);
	wr_u64(&w, m->total);
	wr_u32(&w, m->len);
	wr_bytes(&w, m->data, m->len);
	return wr_end(&w, buf, total);
}

int fr_wire_node_summary_decode(const uint8_t *payload, size_t len, struct fr_msg_node_summary *m)
{
	struct rd r = rd_init(payload, len);

	memset(m, 0, sizeof(*m));
	rd_ids(&r, m->incident, m->job);
	m->rank = rd_u32(&r);
	m->flags = rd_u8(&r);
	rd_str(&r, m->reason, FR_REASON_MAX);
	m->offset = rd_u64(&r);
	m->total = rd_u64(&r);
	m->len = rd_u32(&r);
	if (!r.bad && (!node_summary_valid(m) || m->len != r.left))
		rd_fail(&r);
	m->data = rd_take(&r, m->len);
	if (!rd_ok(&r)) {
		memset(m, 0, sizeof(*m));
		return -EPROTO;
	}
	if (!m->len)
		m->data = NULL;
	return 0;
}

/* NODE_DUMP_DONE */

size_t fr_wire_node_dump_done_size(const struct fr_msg_node_dump_done *m)
{
	return FR_WIRE_HEADER_SIZE + ids_size(m->incident, m->job) + 4 + 4;
}

int fr_wire_node_dump_done_encode(const struct fr_msg_node_dump_done *m, uint8_t *buf, size_t cap)
{
	struct wr w;
	int total;

	if (!ids_valid(m->incident, m->job))
		return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_NODE_DUMP_DONE, fr_wire_node_dump_done_size(m));
	if (total < 0)
		return total;
	wr_ids(&w, m->incident, m->job);
	wr_u32(&w, m->answered);
	wr_u32(&w, m->failed);
	return wr_end(&w, buf, total);
}

int fr_wire_node_dump_done_decode(const uint8_t *payload, size_t len,
				  struct fr_msg_node_dump_done *m)
{
	struct rd r = rd_init(payload, len);

	memset(m, 0, sizeof(*m));
	rd_ids(&r, m->incident, m->job);
	m->answered = rd_u32(&r);
	m->failed = rd_u32(&r);
	if (!rd_ok(&r)) {
		memset(m, 0, sizeof(*m));
		return -EPROTO;
	}
	return 0;
}

/* NODE_KERNEL_LOG */

size_t fr_wire_node_kernel_log_size(const struct fr_msg_node_kernel_log *m)
{
	return FR_WIRE_HEADER_SIZE + ids_size(m->incident, m->job) + 4 + m->len;
}

int fr_wire_node_kernel_log_encode(const struct fr_msg_node_kernel_log *m, uint8_t *buf,
				   size_t cap)
{
	struct wr w;
	int total;

	if (!ids_valid(m->incident, m->job) || !m->len || m->len > FR_NODE_KERNEL_LOG_MAX ||
	    !m->data)
		return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_NODE_KERNEL_LOG, fr_wire_node_kernel_log_size(m));
	if (total < 0)
		return total;
	wr_ids(&w, m->incident, m->job);
	wr_u32(&w, m->len);
	wr_bytes(&w, m->data, m->len);
	return wr_end(&w, buf, total);
}

int fr_wire_node_kernel_log_decode(const uint8_t *payload, size_t len,
				   struct fr_msg_node_kernel_log *m)
{
	struct rd r = rd_init(payload, len);

	memset(m, 0, sizeof(*m));
	rd_ids(&r, m->incident, m->job);
	m->len = rd_u32(&r);
	if (!r.bad && (!m->len || m->len > FR_NODE_KERNEL_LOG_MAX || m->len != r.left))
		rd_fail(&r);
	m->data = rd_take(&r, m->len);
	if (!rd_ok(&r)) {
		memset(m, 0, sizeof(*m));
		return -EPROTO;
	}
	return 0;
}

/* NODE_FETCH */

size_t fr_wire_node_fetch_size(const struct fr_msg_node_fetch *m)
{
	return FR_WIRE_HEADER_SIZE + ids_size(m->incident, m->job) + 4;
}

int fr_wire_node_fetch_encode(const struct fr_msg_node_fetch *m, uint8_t *buf, size_t cap)
{
	struct wr w;
	int total;

	if (!ids_valid(m->incident, m->job) || m->rank == FR_RANK_UNKNOWN)
		return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_NODE_FETCH, fr_wire_node_fetch_size(m));
	if (total < 0)
		return total;
	wr_ids(&w, m->incident, m->job);
	wr_u32(&w, m->rank);
	return wr_end(&w, buf, total);
}

int fr_wire_node_fetch_decode(const uint8_t *payload, size_t len, struct fr_msg_node_fetch *m)
{
	struct rd r = rd_init(payload, len);

	memset(m, 0, sizeof(*m));
	rd_ids(&r, m->incident, m->job);
	m->rank = rd_u32(&r);
	if (!rd_ok(&r) || m->rank == FR_RANK_UNKNOWN) {
		memset(m, 0, sizeof(*m));
		return -EPROTO;
	}
	return 0;
}

/* NODE_LOOK_REQUEST */

static bool node_look_request_valid(const struct fr_msg_node_look_request *m)
{
	if (!fr_wire_valid_name(m->job) || m->kind > FR_NODE_LOOK_KIND_MAX)
		return false;
	if (m->kind == FR_NODE_LOOK_JOB_STACKS)
		return m->rank == FR_RANK_UNKNOWN && m->last == 0;
	if (m->rank == FR_RANK_UNKNOWN)
		return false;
	if (m->kind == FR_NODE_LOOK_RANK_TRACE)
		return m->last >= 1 && m->last <= FR_WIRE_LIVE_TRACE_MAX;
	return m->last == 0;
}

size_t fr_wire_node_look_request_size(const struct fr_msg_node_look_request *m)
{
	return FR_WIRE_HEADER_SIZE + 8 + STR_SIZE(str_len(m->job, FR_JOB_MAX)) + 1 + 4 + 4;
}

int fr_wire_node_look_request_encode(const struct fr_msg_node_look_request *m, uint8_t *buf,
				     size_t cap)
{
	struct wr w;
	int total;

	if (!node_look_request_valid(m))
		return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_NODE_LOOK_REQUEST, fr_wire_node_look_request_size(m));
	if (total < 0)
		return total;
	wr_u64(&w, m->look);
	wr_str(&w, m->job, str_len(m->job, FR_JOB_MAX));
	wr_u8(&w, m->kind);
	wr_u32(&w, m->rank);
	wr_u32(&w, m->last);
	return wr_end(&w, buf, total);
}

int fr_wire_node_look_request_decode(const uint8_t *payload, size_t len,
				     struct fr_msg_node_look_request *m)
{
	struct rd r = rd_init(payload, len);

	memset(m, 0, sizeof(*m));
	m->look = rd_u64(&r);
	rd_str(&r, m->job, FR_JOB_MAX);
	m->kind = rd_u8(&r);
	m->rank = rd_u32(&r);
	m->last = rd_u32(&r);
	if (!rd_ok(&r) || !node_look_request_valid(m)) {
		memset(m, 0, sizeof(*m));
		return -EPROTO;
	}
	return 0;
}

/* NODE_LOOK_STACKS */

#define LOOK_FRAME_MIN_SIZE (STR_SIZE(0) + 8 + 8)
#define LOOK_CLASS_MIN_SIZE (STR_SIZE(0) + 4 + 1 + 4 + 4 + 4)
#define LOOK_PYFRAME_MIN_SIZE (STR_SIZE(0) + STR_SIZE(0) + 4)
/* A class's Python part: its index, truncated, count. */
#define LOOK_PY_FIXED_SIZE (4 + 1 + 4)

void fr_node_look_class_free(struct fr_node_look_class *c)
{
	for (uint32_t i = 0; c->pyframes && i < c->npyframes; i++) {
		free(c->pyframes[i].function);
		free(c->pyframes[i].file);
	}
	free(c->pyframes);
	free(c->frames);
	c->pyframes = NULL;
	c->frames = NULL;
	c->npyframes = c->nframes = 0;
}

/* A Python frame's string: present and within the limit. */
static bool look_pystr_valid(const char *s)
{
	return s && str_len(s, FR_NODE_LOOK_PYSTR_MAX) <= FR_NODE_LOOK_PYSTR_MAX;
}

/* Reads a Python frame's string into a new allocation (NULL on a bad read
 * or out of memory, with *ret -ENOMEM for the latter). */
static char *rd_pystr(struct rd *r, int *ret)
{
	char buf[FR_NODE_LOOK_PYSTR_MAX + 1];
	char *s;

	rd_str(r, buf, FR_NODE_LOOK_PYSTR_MAX);
	if (r->bad)
		return NULL;
	if (!(s = strdup(buf))) {
		*ret = -ENOMEM;
		rd_fail(r);
	}
	return s;
}

/*
 * A class has a name-length thread, frames within the cap, `start` among
 * them, and at least one run of ranks, coalesced.
 */
static bool look_class_valid(const struct fr_node_look_class *c, bool python)
{
	uint64_t total = 0;

	if (!python && (c->npyframes || c->py_truncated))
		return false;
	if (c->py_truncated > 1 || c->npyframes > FR_NODE_LOOK_PYFRAMES_MAX ||
	    (c->npyframes && !c->pyframes))
		return false;
	for (uint32_t i = 0; i < c->npyframes; i++)
		if (!look_pystr_valid(c->pyframes[i].function) ||
		    !look_pystr_valid(c->pyframes[i].file))
			return false;

	if (str_len(c->thread, FR_NODE_LOOK_THREAD_MAX) > FR_NODE_LOOK_THREAD_MAX ||
	    c->current > 1 || c->nframes > FR_NODE_LOOK_FRAMES_MAX ||
	    (c->nframes ? c->start >= c->nframes : c->start != 0) || c->nranges == 0 ||
	    c->nranges > FR_NODE_RANGES_MAX || !ranges_valid(c->ranges, c->nranges, &total))
		return false;
	for (uint32_t i = 0; i < c->nframes; i++)
		if (str_len(c->frames[i].name, FR_NODE_LOOK_NAME_MAX) > FR_NODE_LOOK_NAME_MAX)
			return false;
	return true;
}

/* Whether a class has a Python part on the wire. */
static bool has_python(const struct fr_node_look_class *c)
{
	return c->npyframes || c->py_truncated;
}

size_t fr_node_look_class_size(const struct fr_node_look_class *c)
{
	size_t n = STR_SIZE(str_len(c->thread, FR_NODE_LOOK_THREAD_MAX)) + 4 + 1 + 4 + 4 +
		   4 + (size_t)c->nranges * NODE_RANGE_SIZE;

	for (uint32_t i = 0; i < c->nframes; i++)
		n += STR_SIZE(str_len(c->frames[i].name, FR_NODE_LOOK_NAME_MAX)) + 8 + 8;
	if (!has_python(c))
		return n;
	n += LOOK_PY_FIXED_SIZE;
	for (uint32_t i = 0; i < c->npyframes; i++)
		n += STR_SIZE(str_len(c->pyframes[i].function, FR_NODE_LOOK_PYSTR_MAX)) +
		     STR_SIZE(str_len(c->pyframes[i].file, FR_NODE_LOOK_PYSTR_MAX)) + 4;
	return n;
}

/* Whether NODE_LOOK_STACKS `m`'s classes go with their Python part. */
static bool look_python(const struct fr_msg_node_look_stacks *m)
{
	return m->flags & FR_NODE_LOOK_PYTHON;
}

size_t fr_node_look_stacks_base_size(const struct fr_msg_node_look_stacks *m)
{
	size_t n = 8 + STR_SIZE(str_len(m->job, FR_JOB_MAX)) + 1 + 4 + 4 + 4 + 4 +
		   (size_t)m->nmranges * NODE_RANGE_SIZE + 4 + 4 + 4 + 4 + 4;

	for (uint32_t i = 0; i < m->nwhy && i < FR_NODE_LOOK_WHY_MAX; i++)
		n += 4 + STR_SIZE(str_len(m->why[i].reason, FR_REASON_MAX));
	/* The count of the classes' Python parts. */
	return n + (look_python(m) ? 4 : 0);
}

static bool node_look_stacks_valid(const struct fr_msg_node_look_stacks *m)
{
	uint64_t missing = 0;

	if (!fr_wire_valid_name(m->job) || (m->flags & ~(FR_NODE_LOOK_LAST | FR_NODE_LOOK_PYTHON)) ||
	    m->answered > m->asked || m->nmissing > m->asked - m->answered ||
	    m->nmranges > FR_NODE_RANGES_MAX || !ranges_valid(m->missing, m->nmranges, &missing) ||
	    missing > m->nmissing || m->nwhy > FR_NODE_LOOK_WHY_MAX ||
	    m->nclasses > FR_NODE_LOOK_CLASSES_MAX)
		return false;
	for (uint32_t i = 0; i < m->nwhy; i++)
		if (m->why[i].rank == FR_RANK_UNKNOWN ||
		    str_len(m->why[i].reason, FR_REASON_MAX) > FR_REASON_MAX)
			return false;
	for (uint32_t i = 0; i < m->nclasses; i++)
		if (!look_class_valid(&m->classes[i], look_python(m)))
			return false;
	return true;
}

size_t fr_wire_node_look_stacks_size(const struct fr_msg_node_look_stacks *m)
{
	size_t n = FR_WIRE_HEADER_SIZE + fr_node_look_stacks_base_size(m);

	for (uint32_t i = 0; i < m->nclasses; i++)
		n += fr_node_look_class_size(&m->classes[i]);
	return n;
}

int fr_wire_node_look_stacks_encode(const struct fr_msg_node_look_stacks *m, uint8_t *buf,
				    size_t cap)
{
	struct wr w;
	uint32_t npy;
	int total;

	if (!node_look_stacks_valid(m) || (m->nclasses && !m->classes))
		return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_NODE_LOOK_STACKS, fr_wire_node_look_stacks_size(m));
	if (total < 0)
		return total;
	wr_u64(&w, m->look);
	wr_str(&w, m->job, str_len(m->job, FR_JOB_MAX));
	wr_u8(&w, m->flags);
	wr_u32(&w, m->asked);
	wr_u32(&w, m->answered);
	wr_u32(&w, m->nmissing);
	wr_ranges(&w, m->missing, m->nmranges);
	wr_u32(&w, m->nwhy);
	for (uint32_t i = 0; i < m->nwhy; i++) {
		wr_u32(&w, m->why[i].rank);
		wr_str(&w, m->why[i].reason, str_len(m->why[i].reason, FR_REASON_MAX));
	}
	wr_u32(&w, m->classes_left_out);
	wr_u32(&w, m->threads_left_out);
	wr_u32(&w, m->frames_left_out);
	wr_u32(&w, m->nclasses);
	for (uint32_t i = 0; i < m->nclasses; i++) {
		const struct fr_node_look_class *c = &m->classes[i];

		wr_str(&w, c->thread, str_len(c->thread, FR_NODE_LOOK_THREAD_MAX));
		wr_u32(&w, c->tid);
		wr_u8(&w, c->current);
		wr_u32(&w, c->start);
		wr_u32(&w, c->nframes);
		for (uint32_t j = 0; j < c->nframes; j++) {
			wr_str(&w, c->frames[j].name, str_len(c->frames[j].name, FR_NODE_LOOK_NAME_MAX));
			wr_u64(&w, c->frames[j].offset);
			wr_u64(&w, c->frames[j].ip);
		}
		wr_ranges(&w, c->ranges, c->nranges);
	}
	if (!look_python(m))
		return wr_end(&w, buf, total);
	npy = 0;
	for (uint32_t i = 0; i < m->nclasses; i++)
		npy += has_python(&m->classes[i]);
	wr_u32(&w, npy);
	for (uint32_t i = 0; i < m->nclasses; i++) {
		const struct fr_node_look_class *c = &m->classes[i];

		if (!has_python(c))
			continue;
		wr_u32(&w, i);
		wr_u8(&w, c->py_truncated);
		wr_u32(&w, c->npyframes);
		for (uint32_t j = 0; j < c->npyframes; j++) {
			const struct fr_node_look_pyframe *f = &c->pyframes[j];

			wr_str(&w, f->function, str_len(f->function, FR_NODE_LOOK_PYSTR_MAX));
			wr_str(&w, f->file, str_len(f->file, FR_NODE_LOOK_PYSTR_MAX));
			wr_u32(&w, f->line);
		}
	}
	return wr_end(&w, buf, total);
}

/*
 * The Python parts after the classes: each of a class with a higher index
 * than the one before, with at least one frame or truncated (as the
 * encoder writes them). 0 (r->bad on a malformed one) or -ENOMEM.
 */
static int rd_look_python(struct rd *r, struct fr_msg_node_look_stacks *m)
{
	uint32_t n = rd_count(r, LOOK_PY_FIXED_SIZE, 0);
	int ret = 0;

	if (n > m->nclasses)
		rd_fail(r);
	for (uint32_t i = 0, next = 0; i < n && !r->bad; i++) {
		uint32_t at = rd_u32(r);
		struct fr_node_look_class *c;

		if (r->bad || at < next || at >= m->nclasses) {
			rd_fail(r);
			break;
		}
		next = at + 1;
		c = &m->classes[at];
		c->py_truncated = rd_u8(r);
		c->npyframes = rd_count(r, LOOK_PYFRAME_MIN_SIZE, 0);
		if (c->npyframes > FR_NODE_LOOK_PYFRAMES_MAX || !has_python(c))
			rd_fail(r);
		if (!r->bad &&
		    rd_array(r, (void **)&c->pyframes, c->npyframes, sizeof(*c->pyframes), &ret))
			return ret;
		for (uint32_t j = 0; j < c->npyframes && !r->bad; j++) {
			struct fr_node_look_pyframe *f = &c->pyframes[j];

			f->function = rd_pystr(r, &ret);
			f->file = rd_pystr(r, &ret);
			f->line = rd_u32(r);
		}
		if (ret)
			return ret;
	}
	return 0;
}

void fr_wire_node_look_stacks_free(struct fr_msg_node_look_stacks *m)
{
	for (uint32_t i = 0; m->classes && i < m->nclasses; i++)
		fr_node_look_class_free(&m->classes[i]);
	free(m->classes);
	memset(m, 0, sizeof(*m));
}

int fr_wire_node_look_stacks_decode(const uint8_t *payload, size_t len,
				    struct fr_msg_node_look_stacks *m)
{
	struct rd r = rd_init(payload, len);
	int ret = 0;

	memset(m, 0, sizeof(*m));
	m->look = rd_u64(&r);
	rd_str(&r, m->job, FR_JOB_MAX);
	m->flags = rd_u8(&r);
	m->asked = rd_u32(&r);
	m->answered = rd_u32(&r);
	m->nmissing = rd_u32(&r);
	m->nmranges = rd_ranges(&r, m->missing);
	m->nwhy = rd_capped(&r, FR_NODE_LOOK_WHY_MAX);
	for (uint32_t i = 0; i < m->nwhy && !r.bad; i++) {
		m->why[i].rank = rd_u32(&r);
		rd_str(&r, m->why[i].reason, FR_REASON_MAX);
	}
	m->classes_left_out = rd_u32(&r);
	m->threads_left_out = rd_u32(&r);
	m->frames_left_out = rd_u32(&r);
	m->nclasses = rd_count(&r, LOOK_CLASS_MIN_SIZE, 0);
	if (m->nclasses > FR_NODE_LOOK_CLASSES_MAX)
		rd_fail(&r);
	if (!r.bad && rd_array(&r, (void **)&m->classes, m->nclasses, sizeof(*m->classes), &ret))
		goto out_fail;
	for (uint32_t i = 0; i < m->nclasses && !r.bad; i++) {
		struct fr_node_look_class *c = &m->classes[i];

		rd_str(&r, c->thread, FR_NODE_LOOK_THREAD_MAX);
		c->tid = rd_u32(&r);
		c->current = rd_u8(&r);
		c->start = rd_u32(&r);
		c->nframes = rd_count(&r, LOOK_FRAME_MIN_SIZE, 4);
		if (c->nframes > FR_NODE_LOOK_FRAMES_MAX)
			rd_fail(&r);
		if (!r.bad && rd_array(&r, (void **)&c->frames, c->nframes, sizeof(*c->frames), &ret))
			goto out_fail;
		for (uint32_t j = 0; j < c->nframes && !r.bad; j++) {
			rd_str(&r, c->frames[j].name, FR_NODE_LOOK_NAME_MAX);
			c->frames[j].offset = rd_u64(&r);
			c->frames[j].ip = rd_u64(&r);
		}
		c->nranges = rd_ranges(&r, c->ranges);
	}
	if (look_python(m) && !r.bad && (ret = rd_look_python(&r, m)))
		goto out_fail;
	if (rd_ok(&r) && node_look_stacks_valid(m))
		return 0;
	ret = -EPROTO;
out_fail:
	fr_wire_node_look_stacks_free(m);
	return ret ? ret : -EPROTO;
}
