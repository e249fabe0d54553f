/*
 * The index (see correlate_int.h for the structures).
 *
 * Everything is indexed in one pass over every rank's entries, at a constant
 * cost per entry: communicators by id, collective entries by (communicator,
 * seq), each rank's operations in flight, its window on each communicator
 * and its p2p operations per (communicator, peer, direction). What every
 * later check needs of all the entries of a collective (whether signatures
 * differ, how many are in flight, who entered last) is learnt as they are
 * added, so no later pass walks every entry. The work after that is
 * proportional to the collectives (mismatches, stragglers), the p2p
 * operations (pairing) and the stuck operations times their communicators'
 * sizes, never to ranks squared times ring length: 1024 ranks with 2048
 * entries each correlate in about 0.1 s on a laptop-class core.
 */
#include "correlate_int.h"

#include "../protocol/hash.h"

#include <assert.h>
#include <string.h>

/* ---- signatures ---- */

/*
 * Collectives whose count differs per rank by design. Every writer records
 * a count that all members share for the others: the input of an
 * all_gather, and for a reduce_scatter the total of MPI's receive counts
 * (the same array on every rank), NCCL's receive count or PyTorch's input.
 */
static bool count_varies(enum fr_op_type t)
{
	return t == FR_OP_ALL_GATHERV || t == FR_OP_GATHERV || t == FR_OP_SCATTERV ||
	       t == FR_OP_ALL_TO_ALLV;
}

/*
 * Collectives whose count or datatype may differ between ranks in a call
 * that the library matched and completed: a gather's root (in place, or by
 * its receive arguments) and a scatter's root describe the other side, and
 * PyTorch records an all_to_all with uneven splits by each rank's own input.
 * Only their type, root and reduction are compared once completed.
 */
static bool payload_varies_completed(enum fr_op_type t)
{
	return t == FR_OP_GATHER || t == FR_OP_SCATTER || t == FR_OP_ALL_TO_ALL;
}

/*
 * Whether two ranks named the same root. An NCCL rank knows the root's
 * global rank only when it is the root itself: the ranks in the
 * communicator, which every member knows, are what to compare then.
 */
static bool same_root(int32_t root_a, int32_t in_comm_a, int32_t root_b, int32_t in_comm_b)
{
	if (in_comm_a >= 0 && in_comm_b >= 0)
		return in_comm_a == in_comm_b;
	return root_a == root_b;
}

static struct sig sig_of(const struct fr_op *op)
{
	return (struct sig){ op->redop, op->dtype, op->count, op->bytes, op->root,
			     op->peer_in_comm, op->size_ratio, (uint8_t)op->type };
}

static bool is_derived(const struct sig *s)
{
	return s->dtype[0] == 'd' && same_str(s->dtype, "derived");
}

/*
 * Whether two ranks called the same thing. Vector collectives legitimately
 * differ in count per rank, communicator constructors have no payload, and a
 * derived datatype matches a basic one of the same size in bytes. `strict`
 * for a call still in flight; otherwise (a call that completed) the payload
 * of the collectives of payload_varies_completed() is not compared.
 */
static bool sig_match(const struct sig *a, const struct sig *b, bool strict)
{
	enum fr_op_type type = (enum fr_op_type)a->type;
	bool any_count;

	if (a->type != b->type)
		return false;
	if (type == FR_OP_COMM_SPLIT || type == FR_OP_COMM_DUP || type == FR_OP_COMM_CREATE)
		return true;
	/* A live view (the daemon's, from progress messages) knows no
	 * reduction: "" is unknown, not a different one. */
	if ((fr_op_is_rooted(type) && !same_root(a->root, a->peer_in_comm, b->root,
						    b->peer_in_comm)) ||
	    (a->redop[0] && b->redop[0] && !same_str(a->redop, b->redop)))
		return false;
	/* An all_gather's output is the group's size times its input on
	 * every member (a reduce_scatter's input, of its output); 0 is not
	 * recorded. */
	if (a->size_ratio && b->size_ratio && a->size_ratio != b->size_ratio)
		return false;
	if (!strict && payload_varies_completed(type))
		return true;
	any_count = count_varies(type);
	/*
	 * A completed call was matched by the library: what it moved must
	 * agree, not how each side spelled it (MPI_LONG and MPI_INT64_T, or 8
	 * MPI_BYTE received as one MPI_DOUBLE, are one message).
	 */
	if (!strict)
		return any_count || a->bytes == b->bytes;
	if (is_derived(a) || is_derived(b))
		return any_count || a->bytes == b->bytes;
	if (!same_str(a->dtype, b->dtype))
		return false;
	return any_count || a->count == b->count;
}

bool fr_corr_sig_equal(const struct fr_op *a, const struct fr_op *b, bool strict)
{
	struct sig sa = sig_of(a), sb = sig_of(b);

	return sig_match(&sa, &sb, strict);
}

/* ---- indexes ---- */

static uint64_t hash_str(const char *s)
{
	return fr_fnv1a(FR_FNV_INIT, s, strlen(s));
}

/* Open addressing with a power-of-two table of indexes (NONE = empty). */
static int slots_init(uint32_t **slots, size_t *cap, size_t expect)
{
	size_t c = 64;

	while (c < expect * 2)
		c *= 2;
	*slots = malloc(c * sizeof(**slots));
	if (!*slots)
		return -ENOMEM;
	memset(*slots, 0xff, c * sizeof(**slots));
	*cap = c;
	return 0;
}

/*
 * Replaces a table with an empty one sized for n entries (a quarter full
 * at most), to be filled again; on failure the old one stays.
 */
static int slots_renew(uint32_t **slots, size_t *cap, size_t n)
{
	uint32_t *old = *slots;

	if (slots_init(slots, cap, n * 2) < 0) {
		*slots = old;
		return -ENOMEM;
	}
	free(old);
	return 0;
}

/* Puts index i at slot s, or at the first free slot after it. */
static void slot_put(uint32_t *slots, size_t cap, size_t s, uint32_t i)
{
	while (slots[s] != NONE)
		s = (s + 1) & (cap - 1);
	slots[s] = i;
}

static int comm_rehash(struct ctx *cx)
{
	if (slots_renew(&cx->cslots, &cx->cslots_cap, cx->ncomms) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < cx->ncomms; i++)
		slot_put(cx->cslots, cx->cslots_cap, hash_str(cx->comms[i].id) & (cx->cslots_cap - 1),
			 (uint32_t)i);
	return 0;
}

/* Index of the communicator `id`, added when new; NONE when out of memory. */
uint32_t fr_corr_comm_intern(struct ctx *cx, const char *id)
{
	size_t mask = cx->cslots_cap - 1;
	size_t s = hash_str(id) & mask;
	struct cinfo *c;

	for (; cx->cslots[s] != NONE; s = (s + 1) & mask)
		if (strcmp(cx->comms[cx->cslots[s]].id, id) == 0)
			return cx->cslots[s];
	if (grow_array((void **)&cx->comms, &cx->comms_cap, cx->ncomms + 1, sizeof(*c)) < 0)
		return NONE;
	c = &cx->comms[cx->ncomms];
	memset(c, 0, sizeof(*c));
	c->id = id;
	c->newest_group = NONE;
	cx->cslots[s] = (uint32_t)cx->ncomms++;
	if (cx->ncomms * 2 > cx->cslots_cap && comm_rehash(cx) < 0)
		return NONE;
	return (uint32_t)(cx->ncomms - 1);
}

static size_t group_slot(const struct ctx *cx, uint32_t comm, uint64_t seq)
{
	return mix64(seq * 0x9e3779b97f4a7c15ull + comm) & (cx->gslots_cap - 1);
}

static int group_rehash(struct ctx *cx)
{
	if (slots_renew(&cx->gslots, &cx->gslots_cap, cx->ngroups) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < cx->ngroups; i++)
		slot_put(cx->gslots, cx->gslots_cap,
			 group_slot(cx, cx->groups[i].comm, cx->groups[i].seq), (uint32_t)i);
	return 0;
}

uint32_t fr_corr_group_find(const struct ctx *cx, uint32_t comm, uint64_t seq)
{
	size_t s = group_slot(cx, comm, seq);

	for (; cx->gslots[s] != NONE; s = (s + 1) & (cx->gslots_cap - 1)) {
		const struct group *g = &cx->groups[cx->gslots[s]];

		if (g->comm == comm && g->seq == seq)
			return cx->gslots[s];
	}
	return NONE;
}

/* Whether a rank's library is an MPI ("Open MPI v4.1.4", "MPICH Version: ..."). */
bool fr_corr_mpi_rank(const struct ctx *cx, uint32_t r)
{
	return cx->by_rank[r] && strstr(cx->by_rank[r]->comm_lib, "MPI");
}

/*
 * What group `g` learns from `rank`'s entry `op`: whether it is in flight
 * and holds its rank up (`running`: the rank still runs), whether its
 * signature differs, and who entered last.
 */
static void group_note(struct group *g, uint32_t rank, const struct fr_op *op, bool running,
		       bool mpi)
{
	struct sig sig = sig_of(op);
	uint8_t timing = TIMED_BY_ENTRY;
	uint64_t t = op->t_entered_ns;

	if (mpi && !op->gpu && fr_op_ends_together(op->type)) {
		timing = TIMED_BY_WAIT;
		t = op->state == FR_STATE_COMPLETED && op->t_entered_ns &&
				    op->t_completed_ns >= op->t_entered_ns ?
			    UINT64_MAX - (op->t_completed_ns - op->t_entered_ns) :
			    0;
	}
	if (g->timing != TIMED_BY_NONE && g->timing != timing)
		t = 0;
	g->timing = timing;

	if (op->state == FR_STATE_ENTERED)
		g->ninflight++;
	if (running && op_blocks(op))
		g->nblocking++;
	if (!g->has_ref) {
		g->ref = sig;
		g->has_ref = true;
	} else if (!sig_match(&g->ref, &sig, true)) {
		g->differs = true;
		if (!sig_match(&g->ref, &sig, false))
			g->differs_loose = true;
	} else if (is_derived(&g->ref) && !is_derived(&sig)) {
		/* A basic datatype says more than a derived one of its size. */
		g->ref = sig;
	}
	if (!t) {
		g->untimed = true;
	} else if (t > g->key_last) {
		g->key_second = g->key_last;
		g->key_last = t;
		g->last_rank = rank;
	} else if (t > g->key_second) {
		g->key_second = t;
	}
}

static uint32_t group_new(struct ctx *cx, uint32_t comm, uint64_t seq)
{
	uint32_t gi;
	struct group *g;

	if (grow_array((void **)&cx->groups, &cx->groups_cap, cx->ngroups + 1, sizeof(*g)) < 0)
		return NONE;
	gi = (uint32_t)cx->ngroups++;
	g = &cx->groups[gi];
	memset(g, 0, sizeof(*g));
	g->comm = comm;
	g->seq = seq;
	g->head = NONE;
	g->after = NONE;
	if (cx->comms[comm].newest_group == NONE || seq > cx->comms[comm].seq_hi)
		cx->comms[comm].seq_hi = seq;
	if (cx->comms[comm].newest_group != NONE)
		cx->groups[cx->comms[comm].newest_group].after = gi;
	cx->comms[comm].newest_group = gi;
	if (cx->ngroups * 2 > cx->gslots_cap) {
		if (group_rehash(cx) < 0)
			return NONE;
	} else {
		slot_put(cx->gslots, cx->gslots_cap, group_slot(cx, comm, seq), gi);
	}
	return gi;
}

/*
 * Records that `rank` has `op` at (comm, seq); the latest entry of a rank
 * wins. `rc` is the rank's window on comm: its last group is the hint.
 * `mpi`: the rank's library is an MPI (fr_corr_mpi_rank()), found once per rank.
 */
static int group_add(struct ctx *cx, uint32_t comm, uint32_t rank, const struct fr_op *op,
		     struct rcomm *rc, bool running, bool mpi)
{
	const struct cinfo *c = &cx->comms[comm];
	uint32_t gi = rc->last_gi == NONE ? NONE : cx->groups[rc->last_gi].after;
	struct group *g;
	struct gentry *e;

	/* Past the highest seq made on it, the group is new: the first rank
	 * to reach a collective makes it without a fruitless lookup. */
	if (gi == NONE || cx->groups[gi].comm != comm || cx->groups[gi].seq != op->seq)
		gi = c->newest_group != NONE && op->seq > c->seq_hi ?
			     NONE :
			     fr_corr_group_find(cx, comm, op->seq);
	if (gi == NONE && (gi = group_new(cx, comm, op->seq)) == NONE)
		return -ENOMEM;
	rc->last_gi = gi;
	g = &cx->groups[gi];
	/* Ranks are added in ascending order, so a repeat is at the head. */
	if (g->head != NONE && g->added == rank) {
		const struct fr_op *old = cx->ents[g->head].op;

		if (old->state == FR_STATE_ENTERED)
			g->ninflight--;
		if (running && op_blocks(old))
			g->nblocking--;
		cx->ents[g->head].op = op;
		group_note(g, rank, op, running, mpi);
		/* Which of its two entry times counts is not known. */
		g->untimed = true;
		return 0;
	}
	if (grow_array((void **)&cx->ents, &cx->ents_cap, cx->nents + 1, sizeof(*e)) < 0)
		return -ENOMEM;
	e = &cx->ents[cx->nents];
	e->rank = rank;
	e->op = op;
	e->next = g->head;
	g->head = (uint32_t)cx->nents++;
	g->added = rank;
	g->count++;
	group_note(g, rank, op, running, mpi);
	return 0;
}

void fr_corr_ctx_free(struct ctx *cx)
{
	for (size_t i = 0; i < cx->ncomms; i++) {
		free(cx->comms[i].merged);
		free(cx->comms[i].owned);
		free(cx->comms[i].extra);
		free(cx->comms[i].ent);
	}
	free(cx->comms);
	free(cx->cslots);
	free(cx->groups);
	free(cx->gslots);
	free(cx->ents);
	free(cx->cands);
	free(cx->blk);
	free(cx->mark);
	free(cx->by_rank);
	free(cx->waits);
	free(cx->wait_ns);
	free(cx->inflight);
	free(cx->infl_off);
	free(cx->infl_n);
	free(cx->rcs);
	free(cx->rc_off);
	free(cx->rc_n);
	for (size_t i = 0; i < cx->nstreams; i++)
		free(cx->streams[i].ops);
	free(cx->streams);
	free(cx->sslots);
}

/* A communicator that no trace lists takes as members the ranks that used it. */
static int comm_note_user(struct cinfo *c, uint32_t rank)
{
	if (c->members && !c->owned)
		return 0;
	if (c->n && c->owned[c->n - 1] == rank)
		return 0;
	if (grow_array((void **)&c->owned, &c->owned_cap, c->n + 1, sizeof(*c->owned)) < 0)
		return -ENOMEM;
	c->owned[c->n++] = rank;
	c->members = c->owned;
	return 0;
}

/*
 * Merges one trace's list of a communicator into what the traces before it
 * (lower ranks) said. An NCCL rank knows only its own entry and writes the
 * others FR_RANK_UNKNOWN: an unknown entry takes the value of any trace
 * that knows it. The first list fixes the size, and its known entries
 * stay: a later list of another size, or a later value for a known entry,
 * is ignored (evidence from another run, or corrupt), so that the lowest
 * rank's view decides, as it did before lists were partial.
 */
static int comm_merge(struct cinfo *c, const struct fr_comm *fc)
{
	/* A writer may list a communicator without knowing its members. */
	if (!fc->members || fc->size == 0 || fc->members == c->merged_from)
		return 0;
	c->merged_from = fc->members;
	if (!c->merged) {
		c->merged = malloc(fc->size * sizeof(*c->merged));
		c->ent = calloc(fc->size, sizeof(*c->ent));
		if (!c->merged || !c->ent)
			return -ENOMEM;
		memcpy(c->merged, fc->members, fc->size * sizeof(*c->merged));
		c->members = c->merged;
		c->n = fc->size;
		for (uint32_t k = 0; k < c->n; k++)
			if (c->merged[k] == FR_RANK_UNKNOWN)
				c->nunknown++;
		return 0;
	}
	if (fc->size != c->n)
		return 0;
	for (uint32_t k = 0; c->nunknown && k < c->n; k++) {
		if (c->merged[k] == FR_RANK_UNKNOWN && fc->members[k] != FR_RANK_UNKNOWN) {
			c->merged[k] = fc->members[k];
			c->nunknown--;
		}
	}
	return 0;
}

/*
 * A communicator's members are distinct, so one as large as the world holds
 * every rank: those missing from its known entries are its unknown ones.
 * When one entry is unknown, that places the one missing rank; when more
 * are, the missing ranks are members all the same (`extra`), only their
 * places are not known. Any other count means the lists disagree (a rank
 * listed twice): nothing is inferred then.
 */
static int comm_complete(struct ctx *cx, struct cinfo *c)
{
	uint32_t nknown = 0;
	uint32_t n = 0;
	uint32_t *missing;

	if (!c->merged || !c->nunknown || c->n != cx->world)
		return 0;
	/* cx->mark is free until the candidates are built. */
	for (uint32_t k = 0; k < c->n; k++) {
		uint32_t m = c->merged[k];

		if (m < cx->world && !cx->mark[m]) {
			cx->mark[m] = 1;
			nknown++;
		}
	}
	missing = nknown + c->nunknown == cx->world ?
			  malloc(c->nunknown * sizeof(*missing)) :
			  NULL;
	for (uint32_t r = 0; r < cx->world; r++) {
		if (missing && !cx->mark[r])
			missing[n++] = r;
		cx->mark[r] = 0;
	}
	if (nknown + c->nunknown != cx->world)
		return 0;
	if (!missing)
		return -ENOMEM;
	assert(n == c->nunknown);
	if (n == 1) {
		for (uint32_t k = 0; k < c->n; k++)
			if (c->merged[k] == FR_RANK_UNKNOWN)
				c->merged[k] = missing[0];
		c->nunknown = 0;
		free(missing);
		return 0;
	}
	c->extra = missing;
	c->nextra = n;
	return 0;
}

/* Rank r's window on communicator ci, added when new; NULL when out of memory. */
static struct rcomm *rank_comm(struct ctx *cx, uint32_t r, uint32_t ci)
{
	struct cinfo *c = &cx->comms[ci];
	struct rcomm *rc;

	if (c->stamp == r + 1)
		return &cx->rcs[c->slot];
	if (grow_array((void **)&cx->rcs, &cx->rcs_cap, cx->nrcs + 1, sizeof(*rc)) < 0)
		return NULL;
	c->stamp = r + 1;
	c->slot = (uint32_t)cx->nrcs;
	rc = &cx->rcs[cx->nrcs++];
	memset(rc, 0, sizeof(*rc));
	rc->ci = ci;
	rc->last_gi = NONE;
	rc->first = UINT64_MAX;
	cx->rc_n[r]++;
	return rc;
}

/* What rank r kept of communicator ci, NULL when nothing. */
const struct rcomm *fr_corr_rank_window(const struct ctx *cx, uint32_t r, uint32_t ci)
{
	for (uint32_t i = 0; i < cx->rc_n[r]; i++)
		if (cx->rcs[cx->rc_off[r] + i].ci == ci)
			return &cx->rcs[cx->rc_off[r] + i];
	return NULL;
}

static size_t stream_slot(const struct ctx *cx, uint32_t ci, uint32_t owner, uint32_t peer,
			  uint8_t type)
{
	uint64_t k = mix64(((uint64_t)ci << 32 | owner) * 0x9e3779b97f4a7c15ull ^
			   ((uint64_t)peer << 8 | type));

	return k & (cx->sslots_cap - 1);
}

static int stream_rehash(struct ctx *cx)
{
	if (slots_renew(&cx->sslots, &cx->sslots_cap, cx->nstreams) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < cx->nstreams; i++) {
		const struct stream *st = &cx->streams[i];

		slot_put(cx->sslots, cx->sslots_cap,
			 stream_slot(cx, st->ci, st->owner, st->peer, st->type), (uint32_t)i);
	}
	return 0;
}

/* The stream (ci, owner, peer, type), NONE when there is none. */
uint32_t fr_corr_stream_find(const struct ctx *cx, uint32_t ci, uint32_t owner, uint32_t peer,
			     uint8_t type)
{
	size_t s = stream_slot(cx, ci, owner, peer, type);

	for (; cx->sslots[s] != NONE; s = (s + 1) & (cx->sslots_cap - 1)) {
		const struct stream *st = &cx->streams[cx->sslots[s]];

		if (st->ci == ci && st->owner == owner && st->peer == peer && st->type == type)
			return cx->sslots[s];
	}
	return NONE;
}

/*
 * Adds rank r's send or receive `op` on communicator ci to its stream with
 * the peer, whose index goes to *out. Receives from any source, operations
 * addressed to a member no evidence names and sendrecvs are in no stream
 * (*out NONE).
 */
static int stream_add(struct ctx *cx, uint32_t r, uint32_t ci, const struct fr_op *op,
		      uint32_t *out)
{
	int32_t peer;
	uint32_t si;
	struct stream *st;

	*out = NONE;
	if (op->type != FR_OP_SEND && op->type != FR_OP_RECV)
		return 0;
	peer = fr_corr_op_peer(cx, op);
	if (peer < 0 || (uint32_t)peer >= cx->world || (uint32_t)peer == r)
		return 0;
	si = fr_corr_stream_find(cx, ci, r, (uint32_t)peer, (uint8_t)op->type);
	if (si == NONE) {
		if (grow_array((void **)&cx->streams, &cx->streams_cap, cx->nstreams + 1,
			       sizeof(*st)) < 0)
			return -ENOMEM;
		si = (uint32_t)cx->nstreams++;
		st = &cx->streams[si];
		memset(st, 0, sizeof(*st));
		st->ci = ci;
		st->owner = r;
		st->peer = (uint32_t)peer;
		st->type = (uint8_t)op->type;
		st->first = op->seq;
		if (cx->nstreams * 2 > cx->sslots_cap) {
			if (stream_rehash(cx) < 0)
				return -ENOMEM;
		} else {
			slot_put(cx->sslots, cx->sslots_cap,
				 stream_slot(cx, ci, r, (uint32_t)peer, (uint8_t)op->type), si);
		}
	}
	*out = si;
	st = &cx->streams[si];
	if (st->gapped)
		return 0;
	if (op->seq != st->first + st->n) {
		st->gapped = true;
		return 0;
	}
	if (st->n == st->cap) {
		size_t cap = st->cap;

		if (grow_array((void **)&st->ops, &cap, st->n + 1, sizeof(*st->ops)) < 0)
			return -ENOMEM;
		st->cap = (uint32_t)cap;
	}
	st->ops[st->n++] = op;
	return 0;
}

/*
 * A rank whose p2p operations on a communicator fall in several streams
 * and yet carry seqs that each follow the one before numbers them in one
 * sequence, not per (peer, direction): its streams are not paired by seq.
 * (Numbered per stream, its streams would repeat each other's seqs; a rank
 * with one stream numbers it alike either way.)
 */
static void streams_check(struct ctx *cx)
{
	for (size_t i = 0; i < cx->nstreams; i++) {
		struct stream *st = &cx->streams[i];
		const struct rcomm *rc = fr_corr_rank_window(cx, st->owner, st->ci);

		if (rc && rc->p2p_several && !rc->p2p_stepped)
			st->gapped = true;
	}
}

/*
 * The world: one more than the highest rank any trace is or lists, and at
 * least `world_size`. Each distinct list is read once (struct fr_lists).
 */
static int world_of(const struct fr_trace *const *traces, size_t ntraces, uint32_t world_size,
		    uint32_t *out)
{
	struct fr_lists ls = { 0 };
	uint32_t w = world_size;
	uint64_t *val;
	int rc = 0;

	for (size_t i = 0; i < ntraces; i++) {
		const struct fr_trace *t = traces[i];

		if (!t || t->rank == NONE)
			continue;
		if (t->rank >= w)
			w = t->rank + 1;
		for (size_t j = 0; j < t->ncomms; j++) {
			const struct fr_comm *fc = &t->comms[j];

			if (!fc->members || !fc->size)
				continue;
			if ((rc = fr_lists_find(&ls, fc, &val)) < 0)
				goto out_free;
			for (uint32_t k = 0; !rc && k < fc->size; k++)
				if (fc->members[k] != NONE && fc->members[k] >= w)
					w = fc->members[k] + 1;
		}
	}
	rc = 0;
	*out = w;
out_free:
	fr_lists_free(&ls);
	return rc;
}

int fr_corr_ctx_build(struct ctx *cx, const struct fr_trace *const *traces, size_t ntraces,
		      uint32_t world_size)
{
	size_t total_ops = 0, most_ops = 0;
	size_t total_infl = 0;
	size_t infl_cap = 0;
	uint32_t w;

	if (world_of(traces, ntraces, world_size, &w) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < ntraces; i++) {
		const struct fr_trace *t = traces[i];

		if (!t || t->rank == NONE)
			continue;
		total_ops += t->nops;
		if (t->nops > most_ops)
			most_ops = t->nops;
	}
	cx->world = w;
	cx->by_rank = calloc(w ? w : 1, sizeof(*cx->by_rank));
	cx->waits = calloc(w ? w : 1, sizeof(*cx->waits));
	cx->wait_ns = calloc(w ? w : 1, sizeof(*cx->wait_ns));
	cx->mark = calloc(w ? w : 1, sizeof(*cx->mark));
	cx->infl_off = calloc(w ? w : 1, sizeof(*cx->infl_off));
	cx->infl_n = calloc(w ? w : 1, sizeof(*cx->infl_n));
	cx->rc_off = calloc(w ? w : 1, sizeof(*cx->rc_off));
	cx->rc_n = calloc(w ? w : 1, sizeof(*cx->rc_n));
	if (!cx->by_rank || !cx->waits || !cx->wait_ns || !cx->mark || !cx->infl_off ||
	    !cx->infl_n || !cx->rc_off || !cx->rc_n)
		return -ENOMEM;
	/* The first trace of a rank is its evidence; a duplicate is ignored. */
	for (size_t i = 0; i < ntraces; i++)
		if (traces[i] && traces[i]->rank != NONE && !cx->by_rank[traces[i]->rank])
			cx->by_rank[traces[i]->rank] = traces[i];

	if (slots_init(&cx->cslots, &cx->cslots_cap, 16) < 0 ||
	    /* Ranks mostly share their collectives: about one rank's
	     * entries make groups, and the table grows if more do. Sized
	     * by all of them, it would be megabytes of cache misses. */
	    slots_init(&cx->gslots, &cx->gslots_cap, most_ops + 16) < 0 ||
	    slots_init(&cx->sslots, &cx->sslots_cap, 64) < 0)
		return -ENOMEM;

	/* Membership: every trace's list merged, the lowest rank's first. */
	for (uint32_t r = 0; r < w; r++) {
		const struct fr_trace *t = evidence_of(cx, r);

		for (size_t j = 0; t && j < t->ncomms; j++) {
			uint32_t ci = fr_corr_comm_intern(cx, t->comms[j].id);

			if (ci == NONE || comm_merge(&cx->comms[ci], &t->comms[j]) < 0)
				return -ENOMEM;
		}
	}
	for (size_t i = 0; i < cx->ncomms; i++)
		if (comm_complete(cx, &cx->comms[i]) < 0)
			return -ENOMEM;
	/* Each member's own view of each communicator, for its last_entered. */
	for (uint32_t r = 0; r < w; r++) {
		const struct fr_trace *t = evidence_of(cx, r);

		for (size_t j = 0; t && j < t->ncomms; j++) {
			const struct fr_comm *fc = &t->comms[j];
			struct cinfo *c = &cx->comms[fr_corr_comm_intern(cx, fc->id)];
			uint32_t idx = fc->rank;

			if (!c->ent)
				continue;
			if (idx >= c->n || c->members[idx] != r)
				for (idx = 0; idx < c->n && c->members[idx] != r; idx++)
					;
			if (idx < c->n)
				c->ent[idx] = fc;
		}
	}

	/* Entries of collectives are at most every entry: no regrowth. */
	if (grow_array((void **)&cx->ents, &cx->ents_cap, total_ops ? total_ops : 1,
		       sizeof(*cx->ents)) < 0)
		return -ENOMEM;
	total_infl = 0;
	for (uint32_t r = 0; r < w; r++) {
		const struct fr_trace *t = cx->by_rank[r];
		uint32_t ci = NONE;
		bool running = status_good(t);
		bool mpi = fr_corr_mpi_rank(cx, r);

		cx->infl_off[r] = total_infl;
		cx->rc_off[r] = cx->nrcs;
		if (!t || t->status == FR_RANK_MISSING)
			continue;
		for (size_t j = 0; j < t->nops; j++) {
			const struct fr_op *op = &t->ops[j];
			struct rcomm *rc;


			/* A rank's entries mostly name the communicator the
			 * entry before did: no hashing then. */
			if (ci == NONE || !same_str(cx->comms[ci].id, op->comm))
				ci = fr_corr_comm_intern(cx, op->comm);
			if (ci == NONE || comm_note_user(&cx->comms[ci], r) < 0)
				return -ENOMEM;
			if (op->state == FR_STATE_ENTERED) {
				uint64_t age = op_wait_ns(t, op);

				/* Posted operations stay listed: a peer's
				 * blocking send may match one of them. */
				if (grow_array((void **)&cx->inflight, &infl_cap, total_infl + 1,
					       sizeof(*cx->inflight)) < 0)
					return -ENOMEM;
				cx->inflight[total_infl++] = op;
				cx->infl_n[r]++;
				/* Only a rank that still runs can be said to wait. */
				if (status_good(t) && op_blocks(op)) {
					cx->waits[r] = true;
					if (age > cx->wait_ns[r])
						cx->wait_ns[r] = age;
				}
			}
			rc = rank_comm(cx, r, ci);
			if (!rc)
				return -ENOMEM;
			if (is_p2p(op)) {
				uint32_t si;

				if (stream_add(cx, r, ci, op, &si) < 0)
					return -ENOMEM;
				if (rc->p2p_n && (si == NONE || si != rc->p2p_stream))
					rc->p2p_several = true;
				if (rc->p2p_n && op->seq != rc->p2p_last + 1)
					rc->p2p_stepped = true;
				if (!rc->p2p_n++)
					rc->p2p_stream = si;
				rc->p2p_last = op->seq;
				continue;
			}
			if (op->seq < rc->first)
				rc->first = op->seq;
			if (op->seq > rc->last)
				rc->last = op->seq;
			if (group_add(cx, ci, r, op, rc, running, mpi) < 0)
				return -ENOMEM;
		}
	}
	streams_check(cx);
	return 0;
}

/* ---- peers and roots named through the merged member lists ---- */

/* Index of communicator `id`, NONE when no evidence has it. */
uint32_t fr_corr_comm_find(const struct ctx *cx, const char *id)
{
	size_t mask = cx->cslots_cap - 1;

	for (size_t s = hash_str(id) & mask; cx->cslots[s] != NONE; s = (s + 1) & mask)
		if (strcmp(cx->comms[cx->cslots[s]].id, id) == 0)
			return cx->cslots[s];
	return NONE;
}

/*
 * The global rank of member `k` of communicator `id` as the merged lists
 * name it; -1 when none does. A communicator no trace lists has only the
 * ranks that used it as members, in no order: it names nobody.
 */
static int32_t member_of(const struct ctx *cx, const char *id, int32_t k)
{
	const struct cinfo *c;
	uint32_t ci;

	if (k < 0 || (ci = fr_corr_comm_find(cx, id)) == NONE)
		return -1;
	c = &cx->comms[ci];
	if (!c->merged || (uint32_t)k >= c->n || c->merged[k] >= cx->world)
		return -1;
	return (int32_t)c->merged[k];
}

/*
 * The global rank a p2p operation is addressed to: what its rank recorded,
 * else its peer_in_comm through the merged lists. -1 for a receive from any
 * source, and for a member no evidence names (peer_unnamed() after this).
 */
int32_t fr_corr_op_peer(const struct ctx *cx, const struct fr_op *op)
{
	if (!is_p2p(op))
		return -1;
	return op->peer >= 0 ? op->peer : member_of(cx, op->comm, op->peer_in_comm);
}

/* A copy of `op` with the peer or root its rank could not name, named. */
struct fr_op fr_corr_op_named(const struct ctx *cx, const struct fr_op *op)
{
	struct fr_op o = *op;

	if (is_p2p(op))
		o.peer = fr_corr_op_peer(cx, op);
	else if (fr_op_is_rooted(op->type) && o.root < 0)
		o.root = member_of(cx, op->comm, op->peer_in_comm);
	return o;
}
