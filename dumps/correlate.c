/*
 * The correlation engine (see correlate.h for the model).
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
#include "correlate.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../protocol/hash.h"

#define NONE UINT32_MAX

/*
 * Culprits described one by one in fr_verdict_print(). Beyond that many,
 * they are listed by reason as rank ranges and only the first
 * PRINT_CULPRITS_DETAIL are described.
 */
#define PRINT_CULPRITS_MAX 8
#define PRINT_CULPRITS_DETAIL 3
/* Stragglers listed in the report. */
#define PRINT_STRAGGLERS_MAX 8
/* Lines of "who waits in what" in fr_verdict_print(). */
#define PRINT_WAIT_GROUPS_MAX 16
/* A culprit's posted, unwaited non-blocking operations listed in the report. */
#define PRINT_POSTED_MAX 4
/* Ranks of a cycle spelled out in a deadlock summary. */
#define SUMMARY_CYCLE_MAX 6

static const char *const verdict_names[] = {
#define FR_V_NAME(e, n) [FR_VERDICT_##e] = n,
	FR_VERDICTS(FR_V_NAME)
#undef FR_V_NAME
};

static const char *const reason_names[] = {
#define FR_R_NAME(e, n) [FR_REASON_##e] = n,
	FR_REASONS(FR_R_NAME)
#undef FR_R_NAME
};

const char *fr_verdict_name(unsigned v)
{
	if (v >= sizeof(verdict_names) / sizeof(verdict_names[0]))
		return "unknown";
	return verdict_names[v];
}

const char *fr_reason_name(unsigned r)
{
	if (r >= sizeof(reason_names) / sizeof(reason_names[0]))
		return "unknown";
	return reason_names[r];
}

/* ---- small text helpers ---- */

/* Appends what fits of `s` at *len, keeping buf NUL-terminated. */
static void put(char *buf, size_t cap, size_t *len, const char *s)
{
	size_t n = strlen(s);

	if (cap && *len < cap - 1) {
		size_t room = cap - 1 - *len;
		size_t k = n < room ? n : room;

		memcpy(buf + *len, s, k);
		buf[*len + k] = '\0';
	}
	*len += n;
}

size_t fr_format_ranks(char *buf, size_t cap, const uint32_t *ranks, size_t n)
{
	size_t len = 0;
	size_t i = 0;
	char num[32];

	if (cap)
		buf[0] = '\0';
	while (i < n) {
		uint32_t first = ranks[i];
		uint32_t last = first;

		/* Duplicates fold into the run; only +1 steps extend it. */
		for (i++; i < n && (ranks[i] == last || ranks[i] == last + 1); i++)
			last = ranks[i];
		if (len)
			put(buf, cap, &len, ",");
		if (first == last)
			snprintf(num, sizeof(num), "%" PRIu32, first);
		else
			snprintf(num, sizeof(num), "%" PRIu32 "-%" PRIu32, first, last);
		put(buf, cap, &len, num);
	}
	return len;
}

/*
 * Rank ranges for a person: when they do not fit, cut at a comma and end with
 * ",..." rather than leave half a number. Returns buf.
 */
static const char *ranks_text(char *buf, size_t cap, const uint32_t *ranks, size_t n)
{
	size_t need = fr_format_ranks(buf, cap, ranks, n);

	if (need >= cap && cap > 8) {
		char *comma;

		buf[cap - 5] = '\0';
		comma = strrchr(buf, ',');
		if (comma)
			*comma = '\0';
		strcat(buf, ",...");
	}
	return buf;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a;
	uint32_t y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Like ranks_text() for a communicator's members (in any order, some of
 * them FR_RANK_UNKNOWN): the known ones as ranges, then how many are
 * unknown, "0-1,3; 1 of 4 unknown".
 */
static const char *members_text(char *buf, size_t cap, const uint32_t *ranks, size_t n)
{
	uint32_t *sorted = n ? malloc(n * sizeof(*sorted)) : NULL;
	size_t known = 0;
	char tail[64] = "";

	if (!sorted) {
		/* Out of memory (or no members) only costs the list. */
		if (n)
			snprintf(buf, cap, "%zu members", n);
		else if (cap)
			buf[0] = '\0';
		return buf;
	}
	for (size_t i = 0; i < n; i++)
		if (ranks[i] != FR_RANK_UNKNOWN)
			sorted[known++] = ranks[i];
	if (known < n)
		snprintf(tail, sizeof(tail), "%s%zu of %zu unknown", known ? "; " : "", n - known,
			 n);
	qsort(sorted, known, sizeof(*sorted), cmp_u32);
	/* Leave room for the count of unknown members: it must not be cut. */
	ranks_text(buf, cap > strlen(tail) + 9 ? cap - strlen(tail) : cap, sorted, known);
	if (strlen(buf) + strlen(tail) < cap)
		strcat(buf, tail);
	free(sorted);
	return buf;
}

/* A growing line of text that silently truncates at its capacity. */
struct line {
	char *buf;
	size_t cap;
	size_t len;
};

__attribute__((format(printf, 2, 3)))
static void line_add(struct line *l, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (l->len >= l->cap - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(l->buf + l->len, l->cap - l->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	l->len += (size_t)n;
	if (l->len > l->cap - 1)
		l->len = l->cap - 1;
}

static double ns_to_s(uint64_t ns)
{
	return (double)ns / 1e9;
}

static void duration_text(char *buf, size_t cap, double s)
{
	if (s < 10)
		snprintf(buf, cap, "%.1f s", s);
	else
		snprintf(buf, cap, "%.0f s", s);
}

static bool is_p2p(const struct fr_op *op)
{
	return op->is_p2p || op->type == FR_OP_SEND || op->type == FR_OP_RECV ||
	       op->type == FR_OP_SENDRECV;
}

/*
 * Whether `op` holds its rank up: in flight and either blocking, or
 * non-blocking with the rank now blocked in a Wait on it. A non-blocking
 * operation merely posted does not stop its rank from running on, so a rank
 * with nothing else in flight does not wait (and may be what others wait
 * for).
 */
static bool op_blocks(const struct fr_op *op)
{
	return op->state == FR_STATE_ENTERED && (!op->nonblocking || op->waited);
}

/*
 * How long `op` has held its rank up by the trace's time: from the start of
 * the Wait for a waited non-blocking operation, else from entering it.
 */
static uint64_t op_wait_ns(const struct fr_trace *t, const struct fr_op *op)
{
	uint64_t since = op->t_started_ns ? op->t_started_ns : op->t_entered_ns;

	return t->time_ns > since ? t->time_ns - since : 0;
}

/*
 * A p2p operation addressed to one member whose global rank is not named
 * (an NCCL rank records only its rank in the communicator). It waits on
 * that one member, not on any: it is no receive from any source. Asked of
 * an op as recorded, before op_named() looked the member up, it says only
 * that its rank could not name it.
 */
static bool peer_unnamed(const struct fr_op *op)
{
	return is_p2p(op) && op->peer < 0 && op->peer_in_comm >= 0;
}

/*
 * "all_reduce #11", "send #4 to rank 3", "recv #2 from any rank",
 * "send #4 to an unknown rank (communicator rank 1)".
 */
static void op_head(char *buf, size_t cap, const struct fr_op *op)
{
	const char *name = fr_op_name(op->type);
	const char *dir = op->type == FR_OP_SEND ? "to" : op->type == FR_OP_RECV ? "from" : "with";

	if (!is_p2p(op)) {
		snprintf(buf, cap, "%s #%" PRIu64, name, op->seq);
		return;
	}
	if (peer_unnamed(op))
		snprintf(buf, cap, "%s #%" PRIu64 " %s an unknown rank (communicator rank %" PRId32
			 ")", name, op->seq, dir, op->peer_in_comm);
	else if (op->peer < 0)
		snprintf(buf, cap, "%s #%" PRIu64 " %s any rank", name, op->seq,
			 op->type == FR_OP_SEND ? "to" : "from");
	else
		snprintf(buf, cap, "%s #%" PRIu64 " %s rank %" PRId32, name, op->seq, dir,
			 op->peer);
}

/* "count 1, double, root 0, sum": what a signature comparison looks at. */
static void op_details(char *buf, size_t cap, const struct fr_op *op)
{
	struct line l = { buf, cap, 0 };

	buf[0] = '\0';
	line_add(&l, "count %" PRIu64 ", %s", op->count, op->dtype[0] ? op->dtype : "?");
	if (op->root >= 0)
		line_add(&l, ", root %" PRId32, op->root);
	else if (!is_p2p(op) && fr_op_is_rooted(op->type) && op->peer_in_comm >= 0)
		line_add(&l, ", root: communicator rank %" PRId32 " (global rank unknown)",
			 op->peer_in_comm);
	if (op->redop[0])
		line_add(&l, ", %s", op->redop);
	if (op->size_ratio == FR_SIZE_RATIO_UNEVEN)
		line_add(&l, op->type == FR_OP_ALL_GATHER ?
				     ", output not a whole multiple of input" :
				     ", input not a whole multiple of output");
	else if (op->size_ratio)
		line_add(&l, op->type == FR_OP_ALL_GATHER ? ", output %" PRIu32 "x input" :
							    ", input %" PRIu32 "x output",
			 op->size_ratio);
}

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

/*
 * strcmp() == 0 for the short names compared once per entry (datatypes,
 * reductions, communicator ids), without a call.
 */
static inline bool same_str(const char *a, const char *b)
{
	while (*a && *a == *b) {
		a++;
		b++;
	}
	return *a == *b;
}

/*
 * What ranks must agree on to have called the same thing, copied out of an
 * operation: a collective's group keeps its reference's by value, so that
 * comparing each member's entry with it reads no other trace's memory.
 */
struct sig {
	const char *redop;
	const char *dtype;
	uint64_t count;
	uint64_t bytes;
	int32_t root;
	int32_t peer_in_comm;
	uint32_t size_ratio;
	uint8_t type;
};

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

static bool sig_equal(const struct fr_op *a, const struct fr_op *b, bool strict)
{
	struct sig sa = sig_of(a), sb = sig_of(b);

	return sig_match(&sa, &sb, strict);
}

/* ---- indexes ---- */

/*
 * A communicator, interned by id. Its members are every trace's list of it
 * merged (see comm_merge()); `ent` points into the traces.
 */
struct cinfo {
	const char *id;
	uint32_t n;
	/* Global ranks in communicator order, FR_RANK_UNKNOWN where no trace
	 * knows; either `merged` or `owned`. */
	const uint32_t *members;
	uint32_t *merged;          /* the traces' lists merged, owned */
	uint32_t nunknown;         /* entries of `merged` still unknown */
	uint32_t *owned;           /* members made up from ops when no trace lists it */
	size_t owned_cap;
	/* Members known without their place in the list: the ranks missing
	 * from a communicator as large as the world. */
	uint32_t *extra;
	uint32_t nextra;
	const struct fr_comm **ent; /* per member: that member's own view of it */
	/* While ctx_build() reads rank stamp - 1: its rcomm for this one. */
	uint32_t stamp;
	uint32_t slot;
	uint32_t newest_group;     /* the group made last on it, NONE before one */
	uint64_t seq_hi;           /* the highest seq of its groups, when it has one */
};

/*
 * Member `i` of `c`, for i below n + nextra: the list's entries first, then
 * the members known without a place. FR_RANK_UNKNOWN (never below the
 * world) for an entry no trace knows: such members cannot be checked, so
 * every loop over members skips the ranks not below the world.
 */
static uint32_t cinfo_member(const struct cinfo *c, uint32_t i)
{
	return i < c->n ? c->members[i] : c->extra[i - c->n];
}

/* One rank's entry at a (comm, seq); entries of a group chain by `next`. */
struct gentry {
	uint32_t rank;
	uint32_t next;
	const struct fr_op *op;
};

/*
 * All ranks' entries for one collective (comm, seq), and what is learnt of
 * them as they are added, so that no later pass walks every entry: whether
 * their signatures differ, how many are in flight, who entered last.
 */
struct group {
	uint32_t comm;
	uint32_t head;
	uint32_t count;
	uint32_t added;        /* the rank of the entry at head */
	uint32_t ninflight;    /* entries in flight, posted ones included */
	uint32_t nblocking;    /* entries that hold a running rank up */
	uint32_t last_rank;    /* the member that entered last */
	/* The group made next on the same communicator, NONE until one is:
	 * mostly the next seq, so a rank's next entry on it finds its group
	 * here, with no hashing and no cache miss on the hash table. */
	uint32_t after;
	bool differs : 1;      /* some signature differs from ref's (sig_equal strict) */
	bool differs_loose : 1; /* ... even as compared once completed (not strict) */
	bool untimed : 1;      /* an entry without an entry time, or a rank twice */
	bool has_ref : 1;
	uint64_t seq;
	struct sig ref;        /* the signature the others are compared with */
	/*
	 * Who entered last, on a key that grows the later a member entered:
	 * its entry time, or (timed by waits) UINT64_MAX less how long it
	 * waited in the call. key_last - key_second is how long after the
	 * next-latest member it came.
	 */
	uint8_t timing;        /* TIMED_BY_* of the entries so far */
	uint64_t key_last;
	uint64_t key_second;
};

/*
 * How a group orders its members' arrivals. Entry times come from each
 * host's clock, which may be skewed by more than a straggler's lateness;
 * the time a member waited in a collective that ends for all at once (a
 * reduction, a gather to all, a barrier) is measured on one clock, and the
 * member that waited least came last. Waits are used where the evidence
 * times completions precisely: an MPI rank's own blocking calls. A GPU
 * operation's completion is found by polling, and PyTorch's by a watchdog
 * that wakes every so often: their entry times are used.
 */
enum { TIMED_BY_NONE, TIMED_BY_ENTRY, TIMED_BY_WAIT };

static bool ends_together(enum fr_op_type t)
{
	return t == FR_OP_ALL_REDUCE || t == FR_OP_ALL_GATHER || t == FR_OP_ALL_GATHERV ||
	       t == FR_OP_REDUCE_SCATTER || t == FR_OP_BARRIER || t == FR_OP_ALL_TO_ALL ||
	       t == FR_OP_ALL_TO_ALLV;
}

/*
 * What one rank kept of one communicator: its collectives (its ring window
 * on it, first..last, first UINT64_MAX when none) and the group its latest
 * one joined (a rank's next collective on a communicator is almost always
 * the group after it), and how its p2p operations are numbered.
 */
struct rcomm {
	uint32_t ci;
	uint32_t last_gi;
	uint64_t first;
	uint64_t last;
	uint64_t p2p_last;     /* seq of its latest p2p operation */
	uint32_t p2p_n;
	uint32_t p2p_stream;   /* the stream of its first one, NONE when in none */
	bool p2p_several;      /* p2p operations in several streams, or in none */
	bool p2p_stepped;      /* a p2p seq that is not its predecessor's plus one */
};

/*
 * One rank's sends to one peer, or receives from one, on one communicator:
 * its side of a stream of messages, numbered per (communicator, peer,
 * direction) by the agent so that a's send #k to b is b's receive #k from
 * a. Other writers number p2p operations otherwise (PyTorch counts every
 * p2p operation of a process group in one sequence): a side whose seqs are
 * not consecutive, or whose rank numbered all its p2p operations on the
 * communicator in one sequence across several streams, is not paired by
 * seq (see streams_check()).
 */
struct stream {
	uint32_t ci;
	uint32_t owner;
	uint32_t peer;
	uint8_t type;          /* FR_OP_SEND or FR_OP_RECV */
	bool gapped;           /* or numbered with the rank's other streams */
	uint64_t first;        /* seq of ops[0] */
	const struct fr_op **ops;
	uint32_t n;
	uint32_t cap;
};

enum blocker_kind {
	BK_NOT_ENTERED,
	BK_UNRESPONSIVE,
	BK_MISSING,
	BK_DISCONNECTED,
	BK_FINISHED,
};

struct blocker {
	uint32_t rank;
	uint8_t kind;
	bool waits;   /* the blocker itself waits on something (not a sink) */
	/* Never posted the p2p operation matching the candidate's, and waits
	 * only in collectives that the candidate's owner, held in that
	 * operation, has not entered (see p2p_behind()). */
	bool behind;
};

/*
 * A stuck operation: a collective (comm, seq) some rank has in flight, or one
 * rank's p2p operation in flight. `cls` orders the candidates for the root
 * cause: 0 when some blocker is a sink, 1 when nobody is missing from it,
 * 2 when every blocker itself waits (a cycle somewhere).
 */
struct cand {
	int cls;
	bool bad;     /* a blocker is unresponsive, missing, disconnected or finished */
	bool pure;    /* every blocker is a sink */
	uint64_t wait_ns;
	const struct fr_op *op;
	const char *comm_id;
	uint32_t comm;
	uint32_t owner;    /* the rank whose op `op` is */
	uint32_t group;    /* collectives: group index; p2p: NONE */
	uint32_t partner;  /* p2p: the peer whose op matches, or NONE */
	size_t boff;
	size_t nb;
};

struct ctx {
	uint32_t world;
	const struct fr_trace **by_rank;
	/* Each rank's windows: rcs[rc_off[r] .. + rc_n[r]]. */
	struct rcomm *rcs;
	size_t nrcs;
	size_t rcs_cap;
	size_t *rc_off;
	uint32_t *rc_n;
	struct stream *streams;
	size_t nstreams;
	size_t streams_cap;
	uint32_t *sslots;
	size_t sslots_cap;
	bool *waits;
	uint64_t *wait_ns;
	/* Operations in flight, per rank: inflight[infl_off[r] .. + infl_n[r]]. */
	const struct fr_op **inflight;
	size_t *infl_off;
	uint32_t *infl_n;

	struct cinfo *comms;
	size_t ncomms;
	size_t comms_cap;
	uint32_t *cslots;
	size_t cslots_cap;

	struct group *groups;
	size_t ngroups;
	size_t groups_cap;
	uint32_t *gslots;
	size_t gslots_cap;
	struct gentry *ents;
	size_t nents;
	size_t ents_cap;

	struct cand *cands;
	size_t ncands;
	size_t cands_cap;
	struct blocker *blk;
	size_t nblk;
	size_t blk_cap;
	uint32_t *mark;
};

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

static int grow_array(void **arr, size_t *cap, size_t need, size_t size)
{
	size_t ncap;
	void *p;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap : 16;
	while (ncap < need)
		ncap *= 2;
	if (ncap > SIZE_MAX / size)
		return -ENOMEM;
	p = realloc(*arr, ncap * size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
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

static int comm_rehash(struct ctx *cx)
{
	uint32_t *slots;
	size_t cap;

	if (slots_init(&slots, &cap, cx->ncomms * 2) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < cx->ncomms; i++) {
		size_t s = hash_str(cx->comms[i].id) & (cap - 1);

		while (slots[s] != NONE)
			s = (s + 1) & (cap - 1);
		slots[s] = (uint32_t)i;
	}
	free(cx->cslots);
	cx->cslots = slots;
	cx->cslots_cap = cap;
	return 0;
}

/* Index of the communicator `id`, added when new; NONE when out of memory. */
static uint32_t comm_intern(struct ctx *cx, const char *id)
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
	uint32_t *old = cx->gslots;

	if (slots_init(&cx->gslots, &cx->gslots_cap, cx->ngroups * 2) < 0) {
		cx->gslots = old;
		return -ENOMEM;
	}
	free(old);
	for (size_t i = 0; i < cx->ngroups; i++) {
		size_t s = group_slot(cx, cx->groups[i].comm, cx->groups[i].seq);

		while (cx->gslots[s] != NONE)
			s = (s + 1) & (cx->gslots_cap - 1);
		cx->gslots[s] = (uint32_t)i;
	}
	return 0;
}

static uint32_t group_find(const struct ctx *cx, uint32_t comm, uint64_t seq)
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
static bool mpi_rank(const struct ctx *cx, uint32_t r)
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

	if (mpi && !op->gpu && ends_together(op->type)) {
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
		size_t s = group_slot(cx, comm, seq);

		while (cx->gslots[s] != NONE)
			s = (s + 1) & (cx->gslots_cap - 1);
		cx->gslots[s] = gi;
	}
	return gi;
}

/*
 * Records that `rank` has `op` at (comm, seq); the latest entry of a rank
 * wins. `rc` is the rank's window on comm: its last group is the hint.
 * `mpi`: the rank's library is an MPI (mpi_rank()), found once per rank.
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
		gi = c->newest_group != NONE && op->seq > c->seq_hi ? NONE :
									   group_find(cx, comm, op->seq);
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

static bool status_good(const struct fr_trace *t)
{
	return t && (t->status == FR_RANK_DUMPED || t->status == FR_RANK_LIVE);
}

static void ctx_free(struct ctx *cx)
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
	if (!fc->members || fc->size == 0)
		return 0;
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

static int32_t op_peer(const struct ctx *cx, const struct fr_op *op);

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
static const struct rcomm *rank_window(const struct ctx *cx, uint32_t r, uint32_t ci)
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
	uint32_t *old = cx->sslots;

	if (slots_init(&cx->sslots, &cx->sslots_cap, cx->nstreams * 2) < 0) {
		cx->sslots = old;
		return -ENOMEM;
	}
	free(old);
	for (size_t i = 0; i < cx->nstreams; i++) {
		const struct stream *st = &cx->streams[i];
		size_t s = stream_slot(cx, st->ci, st->owner, st->peer, st->type);

		while (cx->sslots[s] != NONE)
			s = (s + 1) & (cx->sslots_cap - 1);
		cx->sslots[s] = (uint32_t)i;
	}
	return 0;
}

/* The stream (ci, owner, peer, type), NONE when there is none. */
static uint32_t stream_find(const struct ctx *cx, uint32_t ci, uint32_t owner, uint32_t peer,
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
	peer = op_peer(cx, op);
	if (peer < 0 || (uint32_t)peer >= cx->world || (uint32_t)peer == r)
		return 0;
	si = stream_find(cx, ci, r, (uint32_t)peer, (uint8_t)op->type);
	if (si == NONE) {
		size_t s;

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
			for (s = stream_slot(cx, ci, r, (uint32_t)peer, (uint8_t)op->type);
			     cx->sslots[s] != NONE; s = (s + 1) & (cx->sslots_cap - 1))
				;
			cx->sslots[s] = si;
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
		const struct rcomm *rc = rank_window(cx, st->owner, st->ci);

		if (rc && rc->p2p_several && !rc->p2p_stepped)
			st->gapped = true;
	}
}

static int ctx_build(struct ctx *cx, const struct fr_trace *const *traces, size_t ntraces,
		     uint32_t world_size)
{
	size_t total_ops = 0, most_ops = 0;
	size_t total_infl = 0;
	size_t infl_cap = 0;
	uint32_t w = world_size;

	for (size_t i = 0; i < ntraces; i++) {
		const struct fr_trace *t = traces[i];

		if (!t || t->rank == NONE)
			continue;
		if (t->rank >= w)
			w = t->rank + 1;
		for (size_t j = 0; j < t->ncomms; j++)
			for (uint32_t k = 0; t->comms[j].members && k < t->comms[j].size; k++)
				if (t->comms[j].members[k] != NONE && t->comms[j].members[k] >= w)
					w = t->comms[j].members[k] + 1;
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
		const struct fr_trace *t = cx->by_rank[r];

		if (!t || t->status == FR_RANK_MISSING)
			continue;
		for (size_t j = 0; j < t->ncomms; j++) {
			uint32_t ci = comm_intern(cx, t->comms[j].id);

			if (ci == NONE || comm_merge(&cx->comms[ci], &t->comms[j]) < 0)
				return -ENOMEM;
		}
	}
	for (size_t i = 0; i < cx->ncomms; i++)
		if (comm_complete(cx, &cx->comms[i]) < 0)
			return -ENOMEM;
	/* Each member's own view of each communicator, for its last_entered. */
	for (uint32_t r = 0; r < w; r++) {
		const struct fr_trace *t = cx->by_rank[r];

		if (!t || t->status == FR_RANK_MISSING)
			continue;
		for (size_t j = 0; j < t->ncomms; j++) {
			const struct fr_comm *fc = &t->comms[j];
			struct cinfo *c = &cx->comms[comm_intern(cx, fc->id)];
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
		bool mpi = mpi_rank(cx, r);

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
				ci = comm_intern(cx, op->comm);
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
static uint32_t comm_find(const struct ctx *cx, const char *id)
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

	if (k < 0 || (ci = comm_find(cx, id)) == NONE)
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
static int32_t op_peer(const struct ctx *cx, const struct fr_op *op)
{
	if (!is_p2p(op))
		return -1;
	return op->peer >= 0 ? op->peer : member_of(cx, op->comm, op->peer_in_comm);
}

/* A copy of `op` with the peer or root its rank could not name, named. */
static struct fr_op op_named(const struct ctx *cx, const struct fr_op *op)
{
	struct fr_op o = *op;

	if (is_p2p(op))
		o.peer = op_peer(cx, op);
	else if (fr_op_is_rooted(op->type) && o.root < 0)
		o.root = member_of(cx, op->comm, op->peer_in_comm);
	return o;
}

/* ---- verdict assembly ---- */

static void culprit_fill(const struct ctx *cx, struct fr_culprit *cu, uint32_t rank,
			 enum fr_reason reason, const char *comm)
{
	const struct fr_trace *t = cx->by_rank[rank];

	memset(cu, 0, sizeof(*cu));
	cu->rank = rank;
	cu->reason = reason;
	if (!t)
		return;
	snprintf(cu->host, sizeof(cu->host), "%s", t->host);
	cu->pid = t->pid;
	for (size_t j = t->nops; j-- > 0;) {
		if (t->ops[j].state == FR_STATE_COMPLETED && strcmp(t->ops[j].comm, comm) == 0) {
			cu->has_last_completed = true;
			cu->last_completed = op_named(cx, &t->ops[j]);
			break;
		}
	}
}

static int cmp_culprit(const void *a, const void *b)
{
	const struct fr_culprit *x = a;
	const struct fr_culprit *y = b;

	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static int verdict_set_comm(struct fr_verdict *v, const struct cinfo *c)
{
	v->comm_size = c->n;
	if (!c->n)
		return 0;
	v->comm_ranks = malloc(c->n * sizeof(*v->comm_ranks));
	if (!v->comm_ranks)
		return -ENOMEM;
	memcpy(v->comm_ranks, c->members, c->n * sizeof(*v->comm_ranks));
	return 0;
}

/* "rank 3 (node7, pid 4242)", or "ranks 1,3" for several. */
static void who_text(char *buf, size_t cap, const struct ctx *cx, const uint32_t *ranks,
		     size_t n)
{
	char r[256];

	if (n == 1) {
		const struct fr_trace *t = cx->by_rank[ranks[0]];

		if (t && t->host[0] && t->pid)
			snprintf(buf, cap, "rank %" PRIu32 " (%s, pid %" PRIu32 ")", ranks[0],
				 t->host, t->pid);
		else if (t && t->pid)
			snprintf(buf, cap, "rank %" PRIu32 " (pid %" PRIu32 ")", ranks[0], t->pid);
		else if (t && t->host[0])
			snprintf(buf, cap, "rank %" PRIu32 " (%s)", ranks[0], t->host);
		else
			snprintf(buf, cap, "rank %" PRIu32, ranks[0]);
		return;
	}
	snprintf(buf, cap, "ranks %s", ranks_text(r, sizeof(r), ranks, n));
}

/* "ranks 0-2,4-5 have waited 42 s" */
static void waited_text(struct line *l, const uint32_t *ranks, size_t n, double s)
{
	char r[256];
	char d[32];

	if (!n)
		return;
	duration_text(d, sizeof(d), s);
	line_add(l, "%s %s %s waited %s", n == 1 ? "rank" : "ranks",
		 ranks_text(r, sizeof(r), ranks, n), n == 1 ? "has" : "have", d);
}

/* "all_reduce #11 on world [0-5]" */
static void where_text(char *buf, size_t cap, const struct fr_verdict *v)
{
	char head[128];
	char m[256];

	op_head(head, sizeof(head), &v->op);
	snprintf(buf, cap, "%s on %s [%s]", head, v->op.comm[0] ? v->op.comm : "?",
		 members_text(m, sizeof(m), v->comm_ranks, v->comm_size));
}

static void summary_ok(const struct ctx *cx, struct fr_verdict *v)
{
	struct line l = { v->summary, sizeof(v->summary), 0 };
	uint32_t *none = malloc(cx->world * sizeof(*none) + 1);
	size_t n = 0;
	size_t posted = 0;

	for (uint32_t r = 0; r < cx->world; r++)
		for (uint32_t i = 0; i < cx->infl_n[r]; i++)
			if (!op_blocks(cx->inflight[cx->infl_off[r] + i]))
				posted++;
	if (posted)
		line_add(&l, "no hang: no rank waits in an operation, %zu non-blocking %s "
			 "posted and not waited on (%zu of %" PRIu32 " ranks with evidence",
			 posted, posted == 1 ? "one is" : "ones are", v->nranks_with_evidence,
			 cx->world);
	else
		line_add(&l, "no hang: no rank has an operation in flight (%zu of %" PRIu32
			 " ranks with evidence", v->nranks_with_evidence, cx->world);
	for (uint32_t r = 0; none && r < cx->world; r++)
		if (!cx->by_rank[r] || cx->by_rank[r]->status == FR_RANK_MISSING)
			none[n++] = r;
	if (n) {
		char rt[256];

		line_add(&l, "; none from %s %s", n == 1 ? "rank" : "ranks",
			 ranks_text(rt, sizeof(rt), none, n));
	}
	line_add(&l, ")");
	free(none);
}

/* ---- mismatch ---- */

/*
 * The earliest collective whose members' signatures differ: among those
 * some member still has in flight when `strict`, else among those every
 * member completed, compared as completed calls (sig_equal()). What
 * completed was matched by the library itself, so only what it cannot
 * have matched rightly counts then.
 */
static uint32_t find_mismatch(const struct ctx *cx, bool strict)
{
	uint32_t best = NONE;

	for (size_t i = 0; i < cx->ngroups; i++) {
		const struct group *g = &cx->groups[i];
		const struct group *b;

		if (g->count < 2 || (strict ? !g->ninflight || !g->differs :
				     g->ninflight || !g->differs_loose))
			continue;
		if (best == NONE) {
			best = (uint32_t)i;
			continue;
		}
		b = &cx->groups[best];
		if (g->seq < b->seq ||
		    (g->seq == b->seq && strcmp(cx->comms[g->comm].id, cx->comms[b->comm].id) < 0))
			best = (uint32_t)i;
	}
	return best;
}

/*
 * The verdict for the mismatched collective `gi`: the ranks whose signature
 * is not the majority's (on a tie, not the lowest rank's) are the culprits.
 * Returns 1, leaving `v` alone, when every signature is the majority's after
 * all (a derived datatype matches basic ones that differ among themselves).
 */
static int verdict_mismatch(const struct ctx *cx, uint32_t gi, bool strict, struct fr_verdict *v)
{
	const struct group *g = &cx->groups[gi];
	const struct cinfo *c = &cx->comms[g->comm];
	struct gentry *list;
	uint32_t *cls = NULL;
	uint32_t *ccount = NULL;
	uint32_t *same = NULL;
	uint32_t ref;
	uint32_t refcount = 0;
	bool tie = false;
	size_t n = 0;
	size_t nsame = 0;
	int rc = -ENOMEM;

	list = malloc(g->count * sizeof(*list));
	cls = malloc(g->count * sizeof(*cls));
	ccount = calloc(g->count, sizeof(*ccount));
	same = malloc(g->count * sizeof(*same));
	if (!list || !cls || !ccount || !same)
		goto out_free;
	/* The chain runs from the highest rank down; lay it out ascending. */
	n = g->count;
	for (uint32_t e = g->head, i = 0; e != NONE; e = cx->ents[e].next, i++)
		list[n - 1 - i] = cx->ents[e];

	for (size_t i = 0; i < n; i++) {
		uint32_t k;

		for (k = 0; k < i; k++)
			if (cls[k] == k && sig_equal(list[k].op, list[i].op, strict))
				break;
		cls[i] = k < i ? cls[k] : (uint32_t)i;
		ccount[cls[i]]++;
	}
	/* The majority's signature, or on a tie the lowest rank's (class 0). */
	ref = 0;
	for (size_t k = 0; k < n; k++) {
		if (ccount[k] > refcount) {
			refcount = ccount[k];
			ref = (uint32_t)k;
			tie = false;
		} else if (ccount[k] == refcount && ccount[k]) {
			tie = true;
		}
	}
	if (tie)
		ref = 0;
	if (ccount[ref] == n) {
		rc = 1;
		goto out_free;
	}

	v->kind = FR_VERDICT_MISMATCH;
	v->culprits = calloc(n - ccount[ref], sizeof(*v->culprits));
	if (!v->culprits)
		goto out_free;
	if (verdict_set_comm(v, c) < 0)
		goto out_free;
	v->waiting = malloc(n * sizeof(*v->waiting));
	if (!v->waiting)
		goto out_free;
	v->has_op = true;
	v->op = op_named(cx, list[ref].op);
	for (size_t i = 0; i < n; i++) {
		const struct fr_trace *t = cx->by_rank[list[i].rank];

		if (cls[i] != ref) {
			struct fr_culprit *cu = &v->culprits[v->nculprits++];

			culprit_fill(cx, cu, list[i].rank, FR_REASON_MISMATCH, c->id);
			cu->has_op = true;
			cu->op = op_named(cx, list[i].op);
			continue;
		}
		same[nsame++] = list[i].rank;
		if (op_blocks(list[i].op) && status_good(t)) {
			uint64_t age = op_wait_ns(t, list[i].op);

			v->waiting[v->nwaiting++] = list[i].rank;
			if (ns_to_s(age) > v->waited_s)
				v->waited_s = ns_to_s(age);
		}
	}

	{
		struct line l = { v->summary, sizeof(v->summary), 0 };
		const struct fr_culprit *c0 = &v->culprits[0];
		bool one_sig = true;
		uint32_t *cr = malloc(v->nculprits * sizeof(*cr));
		char who[512];
		char det[128];
		char rt[256];

		if (!cr)
			goto out_free;
		for (size_t i = 0; i < v->nculprits; i++) {
			cr[i] = v->culprits[i].rank;
			if (!sig_equal(&v->culprits[i].op, &c0->op, strict))
				one_sig = false;
		}
		who_text(who, sizeof(who), cx, cr, v->nculprits);
		free(cr);
		line_add(&l, "%s called ", who);
		if (one_sig) {
			line_add(&l, "%s #%" PRIu64, fr_op_name(c0->op.type), c0->op.seq);
			if (c0->op.type == v->op.type) {
				op_details(det, sizeof(det), &c0->op);
				line_add(&l, " (%s)", det);
			}
		} else {
			line_add(&l, "different operations at #%" PRIu64, v->op.seq);
		}
		op_details(det, sizeof(det), &v->op);
		line_add(&l, " on %s where %s %s called %s (%s)", c->id,
			 nsame == 1 ? "rank" : "ranks", ranks_text(rt, sizeof(rt), same, nsame),
			 fr_op_name(v->op.type), det);
		if (!strict)
			line_add(&l, "; it completed all the same (no hang)");
		if (v->nwaiting) {
			line_add(&l, "; ");
			waited_text(&l, v->waiting, v->nwaiting, v->waited_s);
		}
	}
	rc = 0;
out_free:
	free(list);
	free(cls);
	free(ccount);
	free(same);
	return rc;
}

/* ---- point-to-point messages that do not fit ---- */

struct p2p_pair {
	const struct fr_op *send;
	const struct fr_op *recv;
	uint32_t from;
	uint32_t to;
	uint32_t ci;
};


/*
 * Whether send #k from a to b and b's receive #k from a disagree on the
 * message. NCCL (and PyTorch over it) matches a pair's messages in order
 * and a receive must take exactly what is sent: any other number of bytes
 * is a mismatch, which hangs or corrupts. MPI matches by tag as well, which
 * the evidence does not hold: the k-th send and the k-th receive may be
 * two different messages (a halo exchange posts its receives in any order),
 * so MPI pairs are not compared. A side that recorded no datatype is not
 * compared. `mpi`: either rank's library is an MPI.
 */
static bool p2p_sizes_differ(const struct p2p_pair *p, bool mpi)
{
	if (!p->send->dtype[0] || !p->recv->dtype[0])
		return false;
	if (mpi && !p->send->gpu && !p->recv->gpu)
		return false;
	return p->send->bytes != p->recv->bytes;
}

/*
 * The earliest send and matched receive that disagree (p2p_sizes_differ()):
 * in flight on either side when `inflight`, else completed on both. A
 * rank's sends to a peer are paired by seq with the peer's receives from
 * it, over the seqs both rings kept. Returns whether there is one.
 */
static bool find_p2p_mismatch(const struct ctx *cx, bool inflight, struct p2p_pair *out)
{
	bool found = false;

	for (size_t i = 0; i < cx->nstreams; i++) {
		const struct stream *s = &cx->streams[i];
		const struct stream *r;
		uint64_t lo, hi;
		uint32_t ri;
		bool mpi;

		if (s->type != FR_OP_SEND || s->gapped || !s->n)
			continue;
		ri = stream_find(cx, s->ci, s->peer, s->owner, FR_OP_RECV);
		if (ri == NONE || cx->streams[ri].gapped || !cx->streams[ri].n)
			continue;
		r = &cx->streams[ri];
		mpi = mpi_rank(cx, s->owner) || mpi_rank(cx, s->peer);
		lo = s->first > r->first ? s->first : r->first;
		hi = s->first + s->n < r->first + r->n ? s->first + s->n : r->first + r->n;
		for (uint64_t k = lo; k < hi; k++) {
			struct p2p_pair p = { s->ops[k - s->first], r->ops[k - r->first], s->owner,
					      s->peer, s->ci };
			bool fl = p.send->state == FR_STATE_ENTERED ||
				  p.recv->state == FR_STATE_ENTERED;
			int c;

			if (fl != inflight || !p2p_sizes_differ(&p, mpi))
				continue;
			c = found ? strcmp(cx->comms[s->ci].id, cx->comms[out->ci].id) : -1;
			if (!found || k < out->send->seq || (k == out->send->seq && c < 0) ||
			    (k == out->send->seq && c == 0 && s->owner < out->from)) {
				*out = p;
				found = true;
			}
			break;
		}
	}
	return found;
}

/*
 * A send and its receive that disagree: no majority names one side, so
 * both ranks are culprits, each with its own operation; the verdict's op is
 * the send.
 */
static int verdict_p2p_mismatch(const struct ctx *cx, const struct p2p_pair *p, bool inflight,
				struct fr_verdict *v)
{
	const struct fr_op *ops[2] = { p->send, p->recv };
	const uint32_t ranks[2] = { p->from, p->to };
	struct line l = { v->summary, sizeof(v->summary), 0 };
	char head[128];
	char det[2][128];
	char who[2][256];

	v->kind = FR_VERDICT_MISMATCH;
	v->has_op = true;
	v->op = op_named(cx, p->send);
	if (verdict_set_comm(v, &cx->comms[p->ci]) < 0)
		return -ENOMEM;
	v->culprits = calloc(2, sizeof(*v->culprits));
	v->waiting = malloc(2 * sizeof(*v->waiting));
	if (!v->culprits || !v->waiting)
		return -ENOMEM;
	for (int i = 0; i < 2; i++) {
		const struct fr_trace *t = cx->by_rank[ranks[i]];
		struct fr_culprit *cu = &v->culprits[v->nculprits++];

		culprit_fill(cx, cu, ranks[i], FR_REASON_MISMATCH, cx->comms[p->ci].id);
		cu->has_op = true;
		cu->op = op_named(cx, ops[i]);
		if (op_blocks(ops[i]) && status_good(t)) {
			double w = ns_to_s(op_wait_ns(t, ops[i]));

			v->waiting[v->nwaiting++] = ranks[i];
			if (w > v->waited_s)
				v->waited_s = w;
		}
		who_text(who[i], sizeof(who[i]), cx, &ranks[i], 1);
		op_details(det[i], sizeof(det[i]), ops[i]);
	}
	qsort(v->culprits, v->nculprits, sizeof(*v->culprits), cmp_culprit);
	qsort(v->waiting, v->nwaiting, sizeof(*v->waiting), cmp_u32);
	op_head(head, sizeof(head), &v->op);
	line_add(&l, "%s on %s does not match its receive: %s sends %" PRIu64 " bytes (%s), "
		 "%s receives %" PRIu64 " bytes (%s)", head, cx->comms[p->ci].id, who[0],
		 p->send->bytes, det[0], who[1], p->recv->bytes, det[1]);
	if (!inflight)
		line_add(&l, "; it completed all the same (no hang)");
	if (v->nwaiting) {
		line_add(&l, "; ");
		waited_text(&l, v->waiting, v->nwaiting, v->waited_s);
	}
	return 0;
}

/* ---- hang ---- */

static int add_blocker(struct ctx *cx, uint32_t rank, enum blocker_kind kind)
{
	struct blocker *b;

	if (grow_array((void **)&cx->blk, &cx->blk_cap, cx->nblk + 1, sizeof(*b)) < 0)
		return -ENOMEM;
	b = &cx->blk[cx->nblk++];
	b->rank = rank;
	b->kind = (uint8_t)kind;
	b->waits = kind == BK_NOT_ENTERED && cx->waits[rank];
	b->behind = false;
	return 0;
}

/* Unless a rank runs normally, why it cannot take part; -1 when it can. */
static int bad_kind(const struct fr_trace *t)
{
	if (!t)
		return BK_MISSING;
	switch (t->status) {
	case FR_RANK_MISSING:
		return BK_MISSING;
	case FR_RANK_UNRESPONSIVE:
		return BK_UNRESPONSIVE;
	case FR_RANK_DISCONNECTED:
		return BK_DISCONNECTED;
	case FR_RANK_FINISHED:
		return BK_FINISHED;
	default:
		return -1;
	}
}

static enum fr_reason kind_reason(int kind)
{
	switch (kind) {
	case BK_DISCONNECTED:
		return FR_REASON_DISCONNECTED;
	case BK_FINISHED:
		return FR_REASON_FINISHED;
	case BK_UNRESPONSIVE:
	case BK_MISSING:
		return FR_REASON_UNRESPONSIVE;
	default:
		return FR_REASON_NOT_ENTERED;
	}
}

static void cand_classify(struct ctx *cx, struct cand *k)
{
	bool sink = false;
	bool waiting = false;

	k->nb = cx->nblk - k->boff;
	for (size_t i = k->boff; i < cx->nblk; i++) {
		if (cx->blk[i].kind != BK_NOT_ENTERED)
			k->bad = true;
		if (cx->blk[i].waits)
			waiting = true;
		else
			sink = true;
	}
	k->pure = sink && !waiting;
	k->cls = sink ? 0 : k->nb == 0 ? 1 : 2;
}

static struct cand *cand_new(struct ctx *cx)
{
	struct cand *k;

	if (grow_array((void **)&cx->cands, &cx->cands_cap, cx->ncands + 1, sizeof(*k)) < 0)
		return NULL;
	k = &cx->cands[cx->ncands++];
	memset(k, 0, sizeof(*k));
	k->boff = cx->nblk;
	k->group = NONE;
	k->partner = NONE;
	return k;
}

/*
 * How far member `m` (member i of communicator ci; i NONE when not known)
 * got in ci's collectives: the seq its own view of ci says it entered last,
 * or the newest collective of ci its ring kept when that is later (a writer
 * without progress counters). A member whose ring kept nothing as old as a
 * collective has entered it all the same.
 */
static uint64_t member_reached(const struct ctx *cx, uint32_t ci, uint32_t i, uint32_t m)
{
	const struct cinfo *c = &cx->comms[ci];
	const struct rcomm *w = rank_window(cx, m, ci);
	const struct fr_comm *fc = NULL;
	uint64_t seq = w ? w->last : 0;

	if (i < c->n && c->ent)
		fc = c->ent[i];
	if (!fc && cx->by_rank[m])
		fc = fr_trace_comm(cx->by_rank[m], c->id);
	if (fc && fc->last_entered > seq)
		seq = fc->last_entered;
	return seq;
}

/* A collective (comm, seq) that some running rank has in flight. */
static int cand_collective(struct ctx *cx, uint32_t gi)
{
	const struct group *g = &cx->groups[gi];
	const struct cinfo *c = &cx->comms[g->comm];
	uint32_t stamp = gi + 1;
	struct cand *k;

	/* Stuck only when a rank that still runs waits in it. */
	if (!g->nblocking)
		return 0;
	k = cand_new(cx);
	if (!k)
		return -ENOMEM;
	k->group = gi;
	k->comm = g->comm;
	k->comm_id = c->id;
	for (uint32_t e = g->head; e != NONE; e = cx->ents[e].next) {
		const struct gentry *en = &cx->ents[e];
		const struct fr_trace *t = cx->by_rank[en->rank];

		/* A rank that only posted it has entered it all the same. */
		cx->mark[en->rank] = stamp;
		if (!op_blocks(en->op) || !status_good(t))
			continue;
		/* The chain is descending: the last in-flight one is the lowest rank. */
		k->op = en->op;
		k->owner = en->rank;
		if (op_wait_ns(t, en->op) > k->wait_ns)
			k->wait_ns = op_wait_ns(t, en->op);
	}
	for (uint32_t i = 0; i < c->n + c->nextra; i++) {
		uint32_t m = cinfo_member(c, i);
		const struct fr_trace *t;
		int bad;
		int rc = 0;

		/* A member no trace names cannot be checked; the summary says
		 * how many there are. */
		if (m >= cx->world)
			continue;
		t = cx->by_rank[m];
		bad = bad_kind(t);
		if (bad >= 0)
			rc = add_blocker(cx, m, (enum blocker_kind)bad);
		else if (cx->mark[m] == stamp)
			continue;
		else if (member_reached(cx, g->comm, i, m) >= g->seq)
			continue;
		else
			rc = add_blocker(cx, m, BK_NOT_ENTERED);
		if (rc < 0)
			return rc;
	}
	cand_classify(cx, k);
	return 0;
}

/*
 * Whether p2p `o` is addressed to `rank`, when no evidence names the global
 * rank it is addressed to: `rank`'s own view of the communicator still
 * tells its rank in it.
 */
static bool unnamed_is(const struct ctx *cx, const struct fr_op *o, uint32_t rank)
{
	const struct fr_comm *fc = fr_trace_comm(cx->by_rank[rank], o->comm);

	return fc && fc->rank == (uint32_t)o->peer_in_comm;
}

/* Whether `peer` has in flight the counterpart of `rank`'s p2p `op`. */
static bool p2p_matched(const struct ctx *cx, uint32_t rank, const struct fr_op *op,
			uint32_t peer)
{
	for (uint32_t i = 0; i < cx->infl_n[peer]; i++) {
		const struct fr_op *o = cx->inflight[cx->infl_off[peer] + i];
		int32_t to;

		if (!is_p2p(o) || strcmp(o->comm, op->comm) != 0)
			continue;
		to = op_peer(cx, o);
		if (to >= 0 && (uint32_t)to != rank)
			continue;
		/* Addressed to one member no evidence names: perhaps `rank`. */
		if (to < 0 && o->peer_in_comm >= 0 && !unnamed_is(cx, o, rank))
			continue;
		if (to < 0 && o->peer_in_comm < 0 && o->type != FR_OP_RECV)
			continue;
		if (op->type == FR_OP_SEND && o->type == FR_OP_SEND)
			continue;
		if (op->type == FR_OP_RECV && o->type == FR_OP_RECV)
			continue;
		return true;
	}
	return false;
}

/*
 * A receive from any source waits for any member of its communicator, so
 * the members that could send (those not waiting themselves, or that cannot
 * run: unresponsive, gone, missing) are its blockers. When every other
 * member waits, none is added and the receive itself is what is stuck.
 */
static int any_source_blockers(struct ctx *cx, uint32_t rank, const struct cinfo *c)
{
	for (uint32_t i = 0; i < c->n + c->nextra; i++) {
		uint32_t m = cinfo_member(c, i);
		int bad;
		int rc;

		if (m >= cx->world || m == rank)
			continue;
		bad = bad_kind(cx->by_rank[m]);
		if (bad >= 0)
			rc = add_blocker(cx, m, (enum blocker_kind)bad);
		else if (!cx->waits[m])
			rc = add_blocker(cx, m, BK_NOT_ENTERED);
		else
			continue;
		if (rc < 0)
			return rc;
	}
	return 0;
}

/*
 * How far `b` got with the p2p operations that match `a`'s `op`: the
 * highest seq among b's receives from a on op's communicator when op is a
 * send, among its sends to a when op is a receive (counted per peer and
 * direction, so b's receive #k from a matches a's send #k to b), whether
 * completed or not; 0 when b's evidence holds none. False when op is
 * neither a send nor a receive: no count to compare then.
 */
static bool p2p_reached(const struct ctx *cx, uint32_t b, uint32_t a, const struct fr_op *op,
			uint64_t *reached)
{
	const struct fr_trace *t = cx->by_rank[b];
	enum fr_op_type want;

	if (op->type == FR_OP_SEND)
		want = FR_OP_RECV;
	else if (op->type == FR_OP_RECV)
		want = FR_OP_SEND;
	else
		return false;
	*reached = 0;
	for (size_t j = 0; t && j < t->nops; j++) {
		const struct fr_op *o = &t->ops[j];

		if (o->type != want || strcmp(o->comm, op->comm) != 0 ||
		    op_peer(cx, o) != (int32_t)a)
			continue;
		if (o->seq > *reached)
			*reached = o->seq;
	}
	return true;
}

/* Whether `m`, a member of group `gi`'s communicator, entered that collective. */
static bool member_entered(struct ctx *cx, uint32_t gi, uint32_t m)
{
	const struct group *g = &cx->groups[gi];

	if (cx->mark[m] == gi + 1)
		return true;
	return member_reached(cx, g->comm, NONE, m) >= g->seq;
}

/*
 * Whether `a` is the one member of collective group `gi` that has not
 * entered it, every other member (each named by some evidence) having
 * entered it and still running.
 */
static bool only_missing(struct ctx *cx, uint32_t gi, uint32_t a)
{
	const struct cinfo *c = &cx->comms[cx->groups[gi].comm];
	bool member = false;

	/* Stamps mean "has an entry in group stamp - 1", as in cand_collective(). */
	for (uint32_t e = cx->groups[gi].head; e != NONE; e = cx->ents[e].next)
		cx->mark[cx->ents[e].rank] = gi + 1;
	for (uint32_t i = 0; i < c->n + c->nextra; i++) {
		uint32_t m = cinfo_member(c, i);

		/* A member no evidence names may be missing as well. */
		if (m >= cx->world)
			return false;
		if (m == a) {
			if (member_entered(cx, gi, m))
				return false;
			member = true;
		} else if (bad_kind(cx->by_rank[m]) >= 0 || !member_entered(cx, gi, m)) {
			return false;
		}
	}
	return member;
}

/*
 * Whether everything that holds `b` up is a collective that `a` alone has
 * not entered: then b waits on a, and on nobody else.
 */
static bool waits_only_on(struct ctx *cx, uint32_t b, uint32_t a)
{
	bool any = false;

	for (uint32_t i = 0; i < cx->infl_n[b]; i++) {
		const struct fr_op *o = cx->inflight[cx->infl_off[b] + i];
		uint32_t ci, gi;

		if (!op_blocks(o))
			continue;
		if (is_p2p(o))
			return false;
		ci = comm_find(cx, o->comm);
		gi = ci == NONE ? NONE : group_find(cx, ci, o->seq);
		if (gi == NONE || !only_missing(cx, gi, a))
			return false;
		any = true;
	}
	return any;
}

/*
 * Rank `owner` waits in p2p `op`, whose peer `b` (blocker `bl`) never
 * posted the matching operation and waits itself. When b's count of
 * operations matching owner's is behind op's seq, and b waits only in
 * collectives that owner alone has not entered, the two wait on each
 * other; but b is the one out of step: it went on to a collective without
 * posting its part of an exchange its partner had already posted, while
 * owner, held in that exchange, cannot reach the collective. (The other
 * members did reach it, as owner would have.) b is then the root cause,
 * not half of a deadlock. A cycle of p2p waits alone, or of collectives
 * alone, has no such side and stays a deadlock.
 */
static void p2p_behind(struct ctx *cx, uint32_t owner, const struct fr_op *op,
		       struct blocker *bl)
{
	uint64_t reached;

	if (!bl->waits || !p2p_reached(cx, bl->rank, owner, op, &reached) ||
	    reached >= op->seq || !waits_only_on(cx, bl->rank, owner))
		return;
	bl->waits = false;
	bl->behind = true;
}

/* One running rank's p2p op in flight; its peer is what it waits for. */
static int cand_p2p(struct ctx *cx, uint32_t rank, const struct fr_op *op)
{
	const struct fr_trace *t = cx->by_rank[rank];
	struct cand *k = cand_new(cx);
	int32_t to = op_peer(cx, op);
	uint32_t ci;

	if (!k)
		return -ENOMEM;
	ci = comm_intern(cx, op->comm);
	if (ci == NONE)
		return -ENOMEM;
	k->comm = ci;
	k->comm_id = cx->comms[ci].id;
	k->op = op;
	k->owner = rank;
	k->wait_ns = op_wait_ns(t, op);
	if (to < 0 && op->peer_in_comm >= 0) {
		/* Addressed to one member no evidence names: it waits on
		 * nobody known (and not on anyone, as from any source). */
	} else if (to < 0) {
		int rc = any_source_blockers(cx, rank, &cx->comms[ci]);

		if (rc < 0)
			return rc;
	} else if ((uint32_t)to < cx->world && (uint32_t)to != rank) {
		uint32_t p = (uint32_t)to;
		int bad = bad_kind(cx->by_rank[p]);
		int rc = 0;

		if (bad >= 0) {
			rc = add_blocker(cx, p, (enum blocker_kind)bad);
		} else if (p2p_matched(cx, rank, op, p)) {
			k->partner = p;
		} else {
			rc = add_blocker(cx, p, BK_NOT_ENTERED);
			if (rc == 0)
				p2p_behind(cx, rank, op, &cx->blk[cx->nblk - 1]);
		}
		if (rc < 0)
			return rc;
	}
	cand_classify(cx, k);
	return 0;
}

/* Negative when `a` is the better explanation of the hang. */
static int cand_cmp(const struct cand *a, const struct cand *b)
{
	int c;

	if (a->cls != b->cls)
		return a->cls - b->cls;
	if (a->bad != b->bad)
		return a->bad ? -1 : 1;
	if (a->pure != b->pure)
		return a->pure ? -1 : 1;
	if (a->wait_ns != b->wait_ns)
		return a->wait_ns > b->wait_ns ? -1 : 1;
	c = strcmp(a->comm_id, b->comm_id);
	if (c)
		return c;
	if (a->op->seq != b->op->seq)
		return a->op->seq < b->op->seq ? -1 : 1;
	if ((a->group == NONE) != (b->group == NONE))
		return a->group == NONE ? 1 : -1;
	return a->owner < b->owner ? -1 : a->owner > b->owner;
}

/* The ranks that wait in candidate `k`, ascending; returns how many. */
static size_t cand_waiters(const struct ctx *cx, const struct cand *k, uint32_t *out)
{
	size_t n = 0;

	if (k->group == NONE) {
		out[0] = k->owner;
		return 1;
	}
	for (uint32_t e = cx->groups[k->group].head; e != NONE; e = cx->ents[e].next) {
		const struct gentry *en = &cx->ents[e];

		if (op_blocks(en->op) && status_good(cx->by_rank[en->rank]))
			out[n++] = en->rank;
	}
	/* Entries chain from the highest rank down. */
	for (size_t i = 0; i < n / 2; i++) {
		uint32_t x = out[i];

		out[i] = out[n - 1 - i];
		out[n - 1 - i] = x;
	}
	return n;
}

/* The latest op a rank has in flight, for a culprit's "called" evidence. */
static const struct fr_op *latest_inflight(const struct ctx *cx, uint32_t r)
{
	if (!cx->infl_n[r])
		return NULL;
	return cx->inflight[cx->infl_off[r] + cx->infl_n[r] - 1];
}

static const char *kind_phrase(int kind, bool plural)
{
	switch (kind) {
	case BK_UNRESPONSIVE:
		return plural ? "are unresponsive (stopped heartbeating)" :
				"is unresponsive (stopped heartbeating)";
	case BK_MISSING:
		return "sent no evidence (no dump, no live view)";
	case BK_DISCONNECTED:
		return "disconnected without finalising";
	case BK_FINISHED:
		return "finalised";
	default:
		return "never entered";
	}
}

/* How many of the verdict's communicator members are known. */
static uint32_t comm_ranks_known(const struct fr_verdict *v)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < v->comm_size; i++)
		if (v->comm_ranks[i] != FR_RANK_UNKNOWN)
			n++;
	return n;
}

/*
 * For a culprit behind in an exchange (p2p_behind()): how far it got in it,
 * and where it waits instead. "(its last receive from rank 0 is #3) and
 * waits instead in all_reduce #4, which rank 0, held in its send, has not
 * entered".
 */
static void summary_behind(const struct ctx *cx, const struct cand *k,
			   const struct fr_verdict *v, struct line *l)
{
	const struct fr_culprit *cu = &v->culprits[0];
	bool behind = false;
	uint64_t reached;
	char head[128];

	for (size_t i = k->boff; i < k->boff + k->nb; i++)
		if (cx->blk[i].rank == cu->rank && cx->blk[i].behind)
			behind = true;
	if (!behind || v->nculprits != 1)
		return;
	if (p2p_reached(cx, cu->rank, k->owner, k->op, &reached) && reached)
		line_add(l, " (its last %s rank %" PRIu32 " is #%" PRIu64 ")",
			 k->op->type == FR_OP_SEND ? "receive from" : "send to", k->owner, reached);
	if (!cu->has_op)
		return;
	op_head(head, sizeof(head), &cu->op);
	line_add(l, " and waits instead in %s, which rank %" PRIu32 ", held in its %s, has not "
		 "entered", head, k->owner, fr_op_name(k->op->type));
}

static void summary_hang(const struct ctx *cx, const struct cand *k, struct fr_verdict *v,
			 const uint32_t *opw, size_t nopw)
{
	struct line l = { v->summary, sizeof(v->summary), 0 };
	uint32_t *r = malloc((v->nculprits ? v->nculprits : 1) * sizeof(*r));
	char where[512];
	char who[512];
	char rt[256];

	if (!r) {
		snprintf(v->summary, sizeof(v->summary), "hang (out of memory describing it)");
		return;
	}
	where_text(where, sizeof(where), v);
	if (!v->nculprits) {
		/* Only when the evidence names no member that could be at fault. */
		line_add(&l, "%s does not complete; ", where);
		waited_text(&l, v->waiting, v->nwaiting, v->waited_s);
		goto out;
	}
	if (v->culprits[0].reason == FR_REASON_STUCK_IN_OP) {
		if (k->group != NONE)
			line_add(&l, "every %smember %s %s and it does not complete%s",
				 comm_ranks_known(v) < v->comm_size ? "known " : "",
				 v->op.gpu ? "enqueued" : "entered", where,
				 v->op.gpu ? " on the GPU" : "");
		else if (k->partner != NONE)
			line_add(&l, "ranks %" PRIu32 " and %" PRIu32 " both posted %s and it "
				 "does not complete", k->owner, k->partner, where);
		else if (peer_unnamed(&v->op))
			line_add(&l, "rank %" PRIu32 " waits in %s; no evidence names that rank, "
				 "so whether it posted the matching %s is not known", k->owner,
				 where, v->op.type == FR_OP_SEND ? "receive" :
				 v->op.type == FR_OP_RECV ? "send" : "operation");
		else
			line_add(&l, "rank %" PRIu32 " waits in %s and no rank is known to "
				 "match it", k->owner, where);
		line_add(&l, "; ");
		waited_text(&l, v->waiting, v->nwaiting, v->waited_s);
		goto out;
	}
	if (v->culprits[0].reason == FR_REASON_NOT_ENTERED) {
		for (size_t i = 0; i < v->nculprits; i++)
			r[i] = v->culprits[i].rank;
		who_text(who, sizeof(who), cx, r, v->nculprits);
		if (k->group != NONE)
			line_add(&l, "%s never entered %s", who, where);
		else
			line_add(&l, "%s never posted the %s matching rank %" PRIu32 "'s %s",
				 who, v->op.type == FR_OP_SEND ? "receive" :
				 v->op.type == FR_OP_RECV ? "send" : "operation", k->owner, where);
		if (k->group == NONE)
			summary_behind(cx, k, v, &l);
		line_add(&l, "; ");
		waited_text(&l, v->waiting, v->nwaiting, v->waited_s);
		goto out;
	}
	/* Bad-status culprits, grouped by what became of them. */
	{
		bool first = true;
		char d[32];

		for (int kind = BK_UNRESPONSIVE; kind <= BK_FINISHED; kind++) {
			size_t n = 0;

			for (size_t i = 0; i < v->nculprits; i++)
				if (bad_kind(cx->by_rank[v->culprits[i].rank]) == kind)
					r[n++] = v->culprits[i].rank;
			if (!n)
				continue;
			who_text(who, sizeof(who), cx, r, n);
			line_add(&l, "%s%s %s", first ? "" : " and ", who, kind_phrase(kind, n > 1));
			first = false;
		}
		duration_text(d, sizeof(d), v->waited_s);
		line_add(&l, " while %s %s %s in %s (longest wait %s)",
			 nopw == 1 ? "rank" : "ranks", ranks_text(rt, sizeof(rt), opw, nopw),
			 nopw == 1 ? "waits" : "wait", where, d);
	}
out:
	free(r);
}

static void summary_deadlock(const struct ctx *cx, struct fr_verdict *v, const uint32_t *cycle,
			     const struct cand *const *hop, size_t n)
{
	struct line l = { v->summary, sizeof(v->summary), 0 };
	char head[128];

	line_add(&l, "deadlock: ");
	for (size_t i = 0; i < n && i < SUMMARY_CYCLE_MAX; i++) {
		const struct cand *k = hop[i];
		struct fr_op named = op_named(cx, k->op);

		op_head(head, sizeof(head), &named);
		line_add(&l, "%srank %" PRIu32 " waits in %s on %s", i ? "; " : "", cycle[i],
			 head, k->comm_id);
		/* A p2p op names its peer already. */
		if (k->group != NONE)
			line_add(&l, " for rank %" PRIu32, cycle[(i + 1) % n]);
	}
	if (n > SUMMARY_CYCLE_MAX)
		line_add(&l, "; ... (%zu ranks in the cycle)", n);
}

/*
 * Follows "waits for" edges from `start` until a rank repeats. Each rank's
 * edge is its best candidate's lowest waiting blocker. Returns the cycle's
 * length (0 when the walk ends at a rank with no edge) and writes the cycle,
 * starting at its lowest rank, with the candidate each rank waits in.
 */
static int find_cycle(struct ctx *cx, uint32_t start, uint32_t **cycle_out,
		      const struct cand ***hop_out, size_t *n_out)
{
	const struct cand **best = calloc(cx->world, sizeof(*best));
	uint32_t *pos = malloc(cx->world * sizeof(*pos));
	uint32_t *path = malloc(cx->world * sizeof(*path));
	uint32_t *w = malloc(cx->world * sizeof(*w));
	uint32_t *cycle = NULL;
	const struct cand **hop = NULL;
	size_t len = 0;
	size_t at;
	uint32_t cur;
	int rc = -ENOMEM;

	*n_out = 0;
	if (!best || !pos || !path || !w)
		goto out_free;
	for (size_t i = 0; i < cx->ncands; i++) {
		const struct cand *k = &cx->cands[i];
		size_t nw;

		if (!k->nb)
			continue;
		nw = cand_waiters(cx, k, w);
		for (size_t j = 0; j < nw; j++)
			if (!best[w[j]] || cand_cmp(k, best[w[j]]) < 0)
				best[w[j]] = k;
	}
	memset(pos, 0xff, cx->world * sizeof(*pos));
	rc = 0;
	for (cur = start; pos[cur] == NONE;) {
		const struct cand *k = best[cur];
		uint32_t next = NONE;

		pos[cur] = (uint32_t)len;
		path[len++] = cur;
		if (!k)
			goto out_free;
		for (size_t i = k->boff; i < k->boff + k->nb; i++)
			if (cx->blk[i].waits && (next == NONE || cx->blk[i].rank < next))
				next = cx->blk[i].rank;
		if (next == NONE)
			goto out_free;
		cur = next;
	}
	at = pos[cur];
	{
		size_t n = len - at;
		size_t low = 0;

		cycle = malloc(n * sizeof(*cycle));
		hop = malloc(n * sizeof(*hop));
		if (!cycle || !hop) {
			rc = -ENOMEM;
			goto out_free;
		}
		for (size_t i = 1; i < n; i++)
			if (path[at + i] < path[at + low])
				low = i;
		for (size_t i = 0; i < n; i++) {
			cycle[i] = path[at + (low + i) % n];
			hop[i] = best[cycle[i]];
		}
		*n_out = n;
	}
	*cycle_out = cycle;
	*hop_out = hop;
	cycle = NULL;
	hop = NULL;
out_free:
	free(cycle);
	free(hop);
	free(best);
	free(pos);
	free(path);
	free(w);
	return rc;
}

/*
 * Rank b is behind in the exchange that candidate `k` waits in (see
 * p2p_behind()): its evidence is its last completed operation of that
 * exchange, rather than of the communicator, and the collective it waits
 * in instead.
 */
static void culprit_behind(const struct ctx *cx, struct fr_culprit *cu, const struct cand *k)
{
	const struct fr_trace *t = cx->by_rank[cu->rank];
	enum fr_op_type want = k->op->type == FR_OP_SEND ? FR_OP_RECV : FR_OP_SEND;

	for (size_t j = t->nops; j-- > 0;) {
		const struct fr_op *o = &t->ops[j];

		if (o->state == FR_STATE_COMPLETED && o->type == want &&
		    strcmp(o->comm, k->op->comm) == 0 && op_peer(cx, o) == (int32_t)k->owner) {
			cu->has_last_completed = true;
			cu->last_completed = op_named(cx, o);
			break;
		}
	}
	for (uint32_t i = 0; i < cx->infl_n[cu->rank]; i++) {
		const struct fr_op *o = cx->inflight[cx->infl_off[cu->rank] + i];

		if (op_blocks(o)) {
			cu->has_op = true;
			cu->op = op_named(cx, o);
			break;
		}
	}
}

/*
 * Stuck in an operation every member entered: each culprit's own copy of it
 * (where it is: on a GPU, started or still queued) and how long it has
 * waited in it.
 */
static int culprits_in_group(const struct ctx *cx, const struct group *g,
			     struct fr_verdict *v)
{
	uint32_t *at = malloc(cx->world * sizeof(*at));

	if (!at)
		return -ENOMEM;
	for (uint32_t r = 0; r < cx->world; r++)
		at[r] = NONE;
	for (size_t i = 0; i < v->nculprits; i++)
		at[v->culprits[i].rank] = (uint32_t)i;
	for (uint32_t e = g->head; e != NONE; e = cx->ents[e].next) {
		const struct gentry *en = &cx->ents[e];
		struct fr_culprit *cu;

		if (en->rank >= cx->world || at[en->rank] == NONE)
			continue;
		cu = &v->culprits[at[en->rank]];
		cu->has_op = true;
		cu->op = op_named(cx, en->op);
		if (op_blocks(en->op) && cx->by_rank[en->rank])
			cu->waited_s = ns_to_s(op_wait_ns(cx->by_rank[en->rank], en->op));
	}
	free(at);
	return 0;
}

static int verdict_from_cand(struct ctx *cx, const struct cand *k, struct fr_verdict *v)
{
	const struct cinfo *c = &cx->comms[k->comm];
	uint32_t *opw = malloc(cx->world * sizeof(*opw));
	size_t nopw;
	int rc = -ENOMEM;

	if (!opw)
		return -ENOMEM;
	v->kind = FR_VERDICT_HANG;
	v->has_op = true;
	v->op = op_named(cx, k->op);
	if (verdict_set_comm(v, c) < 0)
		goto out_free;
	nopw = cand_waiters(cx, k, opw);

	if (k->cls == 0) {
		v->culprits = calloc(k->nb, sizeof(*v->culprits));
		if (!v->culprits)
			goto out_free;
		for (size_t i = k->boff; i < k->boff + k->nb; i++) {
			const struct blocker *b = &cx->blk[i];
			struct fr_culprit *cu;

			if (k->bad ? b->kind == BK_NOT_ENTERED : b->waits)
				continue;
			cu = &v->culprits[v->nculprits++];
			culprit_fill(cx, cu, b->rank, kind_reason(b->kind), k->comm_id);
			if (b->behind)
				culprit_behind(cx, cu, k);
			if (b->kind != BK_NOT_ENTERED) {
				const struct fr_op *o = latest_inflight(cx, b->rank);

				if (o) {
					cu->has_op = true;
					cu->op = op_named(cx, o);
				}
			}
		}
	} else if (k->cls == 1) {
		size_t n = k->group != NONE ? c->n + c->nextra : k->partner != NONE ? 2 : 1;

		v->culprits = calloc(n ? n : 1, sizeof(*v->culprits));
		if (!v->culprits)
			goto out_free;
		if (k->group != NONE) {
			for (uint32_t i = 0; i < c->n + c->nextra; i++)
				if (cinfo_member(c, i) < cx->world)
					culprit_fill(cx, &v->culprits[v->nculprits++],
						     cinfo_member(c, i), FR_REASON_STUCK_IN_OP,
						     k->comm_id);
			if (culprits_in_group(cx, &cx->groups[k->group], v) < 0)
				goto out_free;
		} else {
			culprit_fill(cx, &v->culprits[v->nculprits++], k->owner,
				     FR_REASON_STUCK_IN_OP, k->comm_id);
			if (k->partner != NONE)
				culprit_fill(cx, &v->culprits[v->nculprits++], k->partner,
					     FR_REASON_STUCK_IN_OP, k->comm_id);
		}
	}
	qsort(v->culprits, v->nculprits, sizeof(*v->culprits), cmp_culprit);
	summary_hang(cx, k, v, opw, nopw);
	rc = 0;
out_free:
	free(opw);
	return rc;
}

static int verdict_deadlock(struct ctx *cx, const struct cand *k, struct fr_verdict *v)
{
	uint32_t *cycle = NULL;
	const struct cand **hop = NULL;
	uint32_t *w = malloc(cx->world * sizeof(*w));
	size_t n = 0;
	int rc;

	if (!w)
		return -ENOMEM;
	cand_waiters(cx, k, w);
	rc = find_cycle(cx, w[0], &cycle, &hop, &n);
	free(w);
	if (rc < 0)
		return rc;
	if (!n) {
		/* Not expected (every waiter then has an edge); say what is stuck. */
		struct cand k2 = *k;

		k2.cls = 1;
		k2.nb = 0;
		return verdict_from_cand(cx, &k2, v);
	}
	v->kind = FR_VERDICT_DEADLOCK;
	v->has_op = true;
	v->op = op_named(cx, hop[0]->op);
	rc = verdict_set_comm(v, &cx->comms[hop[0]->comm]);
	if (rc < 0)
		goto out_free;
	v->culprits = calloc(n, sizeof(*v->culprits));
	if (!v->culprits) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (size_t i = 0; i < n; i++) {
		struct fr_culprit *cu = &v->culprits[v->nculprits++];
		const struct fr_op *o = hop[i]->op;

		culprit_fill(cx, cu, cycle[i], FR_REASON_NOT_ENTERED, hop[i]->comm_id);
		/* What the rank waits in instead: its own op of that stuck op. */
		if (hop[i]->group != NONE) {
			for (uint32_t e = cx->groups[hop[i]->group].head; e != NONE;
			     e = cx->ents[e].next)
				if (cx->ents[e].rank == cycle[i])
					o = cx->ents[e].op;
		}
		cu->has_op = true;
		cu->op = op_named(cx, o);
	}
	summary_deadlock(cx, v, cycle, hop, n);
	qsort(v->culprits, v->nculprits, sizeof(*v->culprits), cmp_culprit);
out_free:
	free(cycle);
	free(hop);
	return rc;
}

static int correlate_hang(struct ctx *cx, struct fr_verdict *v)
{
	const struct cand *best = NULL;
	int rc;

	for (size_t i = 0; i < cx->ngroups; i++) {
		rc = cand_collective(cx, (uint32_t)i);
		if (rc < 0)
			return rc;
	}
	for (uint32_t r = 0; r < cx->world; r++) {
		if (!cx->waits[r])
			continue;
		for (uint32_t i = 0; i < cx->infl_n[r]; i++) {
			const struct fr_op *op = cx->inflight[cx->infl_off[r] + i];

			if (is_p2p(op) && op_blocks(op)) {
				rc = cand_p2p(cx, r, op);
				if (rc < 0)
					return rc;
			}
		}
	}
	for (size_t i = 0; i < cx->ncands; i++)
		if (!best || cand_cmp(&cx->cands[i], best) < 0)
			best = &cx->cands[i];
	assert(best);
	if (best->cls == 2)
		return verdict_deadlock(cx, best, v);
	return verdict_from_cand(cx, best, v);
}

/* ---- ring windows ---- */

/*
 * Whether the members' ring windows on some communicator start at
 * different seqs; for the verdict's communicator `prefer` when they differ
 * on it, else for the one where they start furthest apart, the members
 * with the latest and the earliest start and the seqs that every member
 * with entries kept.
 */
static int find_alignment(const struct ctx *cx, uint32_t prefer, struct fr_alignment *a)
{
	struct span {
		struct fr_window lo;  /* the earliest start */
		struct fr_window hi;  /* the latest start */
		uint64_t last;        /* the earliest end */
		bool any;
	} *sp = calloc(cx->ncomms ? cx->ncomms : 1, sizeof(*sp));
	uint32_t best = NONE;

	if (!sp)
		return -ENOMEM;
	for (uint32_t r = 0; r < cx->world; r++) {
		for (uint32_t i = 0; i < cx->rc_n[r]; i++) {
			const struct rcomm *rc = &cx->rcs[cx->rc_off[r] + i];
			struct span *x = &sp[rc->ci];
			struct fr_window w = { r, rc->first, rc->last };

			if (rc->first == UINT64_MAX)
				continue;
			if (!x->any || w.first < x->lo.first)
				x->lo = w;
			if (!x->any || w.first > x->hi.first)
				x->hi = w;
			if (!x->any || w.last < x->last)
				x->last = w.last;
			x->any = true;
		}
	}
	for (uint32_t ci = 0; ci < cx->ncomms; ci++) {
		const struct span *x = &sp[ci];

		if (!x->any || x->hi.first == x->lo.first)
			continue;
		a->ncomms++;
		if (best == NONE || ci == prefer ||
		    (best != prefer &&
		     x->hi.first - x->lo.first > sp[best].hi.first - sp[best].lo.first))
			best = ci;
	}
	if (best != NONE) {
		snprintf(a->comm, sizeof(a->comm), "%s", cx->comms[best].id);
		a->latest = sp[best].hi;
		a->earliest = sp[best].lo;
		a->common_first = sp[best].hi.first;
		a->common_last = sp[best].last;
	}
	free(sp);
	return 0;
}

/* ---- stragglers ---- */

/* A straggler is judged on at least this many collectives... */
#define STRAGGLER_MIN_MATCHED 8
/* ... and, when last, entered at least this long after the next-latest
 * member (median): less is scheduling noise, not a slow rank. */
#define STRAGGLER_MIN_LATE_NS 1000000ull
/* ... and at least this many times as late as the last member of the
 * collectives where another member was last (median). */
#define STRAGGLER_RATIO 2

/* A matched collective: who entered it last, and how long after the next-latest member. */
struct late {
	uint32_t ci;
	uint32_t rank;
	uint64_t lead;
};

static int cmp_late(const void *a, const void *b)
{
	const struct late *x = a;
	const struct late *y = b;

	if (x->ci != y->ci)
		return x->ci < y->ci ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return (x->lead > y->lead) - (x->lead < y->lead);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a;
	uint64_t y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static int cmp_straggler(const void *a, const void *b)
{
	const struct fr_straggler *x = a;
	const struct fr_straggler *y = b;

	if (x->median_late_s != y->median_late_s)
		return x->median_late_s > y->median_late_s ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return strcmp(x->comm, y->comm);
}

/*
 * The median of the leads of late[lo, hi) outside [skip_lo, skip_hi), NONE
 * as UINT64_MAX when there are none; `tmp` holds hi - lo values.
 */
static uint64_t median_lead_outside(const struct late *late, size_t lo, size_t hi,
				   size_t skip_lo, size_t skip_hi, uint64_t *tmp)
{
	size_t n = 0;

	for (size_t i = lo; i < hi; i++)
		if (i < skip_lo || i >= skip_hi)
			tmp[n++] = late[i].lead;
	if (!n)
		return UINT64_MAX;
	qsort(tmp, n, sizeof(*tmp), cmp_u64);
	return tmp[(n - 1) / 2];
}

/*
 * Ranks consistently late entering the collectives of a communicator. The
 * collectives judged are those every member entered with an entry time
 * kept (every member's entry in its window, no member unknown). A member
 * is a straggler when, over at least STRAGGLER_MIN_MATCHED of them, it
 * entered last in at least half (three quarters in a communicator of two,
 * where one of the two is always last), its lead over the next-latest
 * member when last has a median of at least STRAGGLER_MIN_LATE_NS, and
 * that median is at least STRAGGLER_RATIO times the median lead of the
 * last member of the others. Several members equally late share the last
 * place and none is named.
 */
static int find_stragglers(const struct ctx *cx, struct fr_verdict *v)
{
	struct late *late = malloc((cx->ngroups ? cx->ngroups : 1) * sizeof(*late));
	uint64_t *tmp = malloc((cx->ngroups ? cx->ngroups : 1) * sizeof(*tmp));
	size_t n = 0;
	size_t cap = 0;
	int rc = -ENOMEM;

	if (!late || !tmp)
		goto out_free;
	for (size_t i = 0; i < cx->ngroups; i++) {
		const struct group *g = &cx->groups[i];
		const struct cinfo *c = &cx->comms[g->comm];

		if (g->untimed || c->n < 2 || c->nunknown || c->nextra || g->count != c->n)
			continue;
		late[n++] = (struct late){ g->comm, g->last_rank, g->key_last - g->key_second };
	}
	qsort(late, n, sizeof(*late), cmp_late);
	for (size_t i = 0, j; i < n; i = j) {
		const struct cinfo *c = &cx->comms[late[i].ci];
		size_t m;

		for (j = i; j < n && late[j].ci == late[i].ci; j++)
			;
		m = j - i;
		if (m < STRAGGLER_MIN_MATCHED)
			continue;
		for (size_t a = i, b; a < j; a = b) {
			struct fr_straggler *st;
			uint64_t med, others;
			size_t cnt;

			for (b = a; b < j && late[b].rank == late[a].rank; b++)
				;
			cnt = b - a;
			if (cnt * 2 < m || (c->n == 2 && cnt * 4 < 3 * m))
				continue;
			med = late[a + (cnt - 1) / 2].lead;
			if (med < STRAGGLER_MIN_LATE_NS)
				continue;
			others = median_lead_outside(late, i, j, a, b, tmp);
			if (others != UINT64_MAX && med / STRAGGLER_RATIO < others)
				continue;
			if (grow_array((void **)&v->stragglers, &cap, v->nstragglers + 1,
				       sizeof(*st)) < 0)
				goto out_free;
			st = &v->stragglers[v->nstragglers++];
			memset(st, 0, sizeof(*st));
			st->rank = late[a].rank;
			snprintf(st->comm, sizeof(st->comm), "%s", c->id);
			st->late_count = (uint32_t)cnt;
			st->matched = (uint32_t)m;
			st->median_late_s = ns_to_s(med);
		}
	}
	if (v->nstragglers)
		qsort(v->stragglers, v->nstragglers, sizeof(*v->stragglers), cmp_straggler);
	rc = 0;
out_free:
	free(late);
	free(tmp);
	return rc;
}

/* "12.3 ms", "1.25 s" */
static void late_text(char *buf, size_t cap, double s)
{
	if (s < 1)
		snprintf(buf, cap, "%.1f ms", s * 1e3);
	else
		snprintf(buf, cap, "%.2f s", s);
}

/* "rank 5 entered last in 93 of 100 collectives on world, by 12.3 ms (median)" */
static void straggler_text(char *buf, size_t cap, const struct fr_straggler *st)
{
	char d[32];

	late_text(d, sizeof(d), st->median_late_s);
	snprintf(buf, cap, "rank %" PRIu32 " entered last in %" PRIu32 " of %" PRIu32
		 " collectives on %s, by %s (median)", st->rank, st->late_count, st->matched,
		 st->comm, d);
}

/* ---- the verdict ---- */

/* The verdict, in the order of precedence correlate.h gives. */
static int verdict_of(struct ctx *cx, struct fr_verdict *v)
{
	struct p2p_pair pair;
	uint64_t longest = 0;
	uint32_t gi;
	int rc;

	/* A disagreement in what is still in flight explains what hangs. */
	while ((gi = find_mismatch(cx, true)) != NONE) {
		rc = verdict_mismatch(cx, gi, true, v);
		if (rc != 1)
			return rc;
		cx->groups[gi].differs = false;
	}
	if (find_p2p_mismatch(cx, true, &pair))
		return verdict_p2p_mismatch(cx, &pair, true, v);

	v->waiting = malloc((cx->world ? cx->world : 1) * sizeof(*v->waiting));
	if (!v->waiting)
		return -ENOMEM;
	for (uint32_t r = 0; r < cx->world; r++) {
		if (!cx->waits[r])
			continue;
		v->waiting[v->nwaiting++] = r;
		if (cx->wait_ns[r] > longest)
			longest = cx->wait_ns[r];
	}
	v->waited_s = ns_to_s(longest);
	if (v->nwaiting)
		return correlate_hang(cx, v);

	/* Nothing hangs: what completed may still disagree. */
	free(v->waiting);
	v->waiting = NULL;
	while ((gi = find_mismatch(cx, false)) != NONE) {
		rc = verdict_mismatch(cx, gi, false, v);
		if (rc != 1)
			return rc;
		cx->groups[gi].differs_loose = false;
	}
	if (find_p2p_mismatch(cx, false, &pair))
		return verdict_p2p_mismatch(cx, &pair, false, v);

	v->kind = FR_VERDICT_OK;
	summary_ok(cx, v);
	rc = find_stragglers(cx, v);
	if (rc == 0 && v->nstragglers) {
		struct line l = { v->summary, sizeof(v->summary), strlen(v->summary) };
		char st[256];

		straggler_text(st, sizeof(st), &v->stragglers[0]);
		line_add(&l, "; straggler: %s", st);
		if (v->nstragglers > 1)
			line_add(&l, " (and %zu more)", v->nstragglers - 1);
	}
	return rc;
}

/* Op `o` of the verdict names its strings from the verdict's own pool. */
static int own_op_strings(struct fr_verdict *v, struct fr_op *o)
{
	const char **s[] = { &o->comm, &o->dtype, &o->redop };

	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
		if (!(*s[i] = fr_strs_keep(&v->strs, *s[i], strlen(*s[i]))))
			return -ENOMEM;
	return 0;
}

/*
 * The verdict's operations are copies of the traces': their strings are
 * the traces' until copied, and a verdict may outlive its traces (the
 * daemon frees them first).
 */
static int own_strings(struct fr_verdict *v)
{
	int rc = v->has_op ? own_op_strings(v, &v->op) : 0;

	for (size_t i = 0; i < v->nculprits && !rc; i++) {
		struct fr_culprit *cu = &v->culprits[i];

		if (cu->has_op)
			rc = own_op_strings(v, &cu->op);
		if (!rc && cu->has_last_completed)
			rc = own_op_strings(v, &cu->last_completed);
	}
	return rc;
}

int fr_correlate(const struct fr_trace *const *traces, size_t ntraces, uint32_t world_size,
		 struct fr_verdict *v)
{
	struct ctx cx;
	int rc;

	memset(v, 0, sizeof(*v));
	memset(&cx, 0, sizeof(cx));
	rc = ctx_build(&cx, traces, ntraces, world_size);
	if (rc < 0)
		goto out_free;
	v->world_size = cx.world;
	for (uint32_t r = 0; r < cx.world; r++)
		if (cx.by_rank[r] && cx.by_rank[r]->status != FR_RANK_MISSING)
			v->nranks_with_evidence++;
	rc = verdict_of(&cx, v);
	if (rc < 0)
		goto out_free;
	rc = find_alignment(&cx, v->has_op ? comm_find(&cx, v->op.comm) : NONE, &v->aligned);
	if (rc == 0)
		rc = own_strings(v);
out_free:
	ctx_free(&cx);
	if (rc < 0)
		fr_verdict_free(v);
	return rc;
}

/* The reason a silent rank is named for, or -1 for a rank that is not. */
static int silent_reason(const struct fr_trace *t)
{
	if (t->status == FR_RANK_UNRESPONSIVE)
		return FR_REASON_UNRESPONSIVE;
	if (t->status == FR_RANK_DISCONNECTED)
		return FR_REASON_DISCONNECTED;
	return -1;
}

/* "ranks 0-3 are unresponsive", "rank 2 (node7, pid 42) lost its connection". */
static void silent_text(struct line *l, const struct fr_culprit *cu, size_t ncu,
			enum fr_reason reason, uint32_t *r)
{
	char rt[256];
	size_t n = 0;
	const struct fr_culprit *one = NULL;

	for (size_t i = 0; i < ncu; i++) {
		if (cu[i].reason != reason)
			continue;
		r[n++] = cu[i].rank;
		one = &cu[i];
	}
	if (!n)
		return;
	if (l->len)
		line_add(l, "; ");
	if (n == 1 && one->host[0] && one->pid)
		line_add(l, "rank %" PRIu32 " (%s, pid %" PRIu32 ")", one->rank, one->host,
			 one->pid);
	else
		line_add(l, "%s %s", n == 1 ? "rank" : "ranks", ranks_text(rt, sizeof(rt), r, n));
	if (reason == FR_REASON_UNRESPONSIVE)
		line_add(l, " %s unresponsive", n == 1 ? "is" : "are");
	else
		line_add(l, " lost %s connection without finalising", n == 1 ? "its" : "their");
}

int fr_verdict_name_silent(struct fr_verdict *v, const struct fr_trace *const *traces,
			   size_t ntraces)
{
	struct line l = { v->summary, sizeof(v->summary), 0 };
	struct fr_culprit *cu;
	uint32_t *r;
	size_t n = 0;

	if (v->kind != FR_VERDICT_OK)
		return 0;
	for (size_t i = 0; i < ntraces; i++) {
		if (traces[i] && traces[i]->status == FR_RANK_DUMPED)
			return 0;
		if (traces[i] && traces[i]->rank < v->world_size && silent_reason(traces[i]) >= 0)
			n++;
	}
	if (!n)
		return 0;
	cu = calloc(n, sizeof(*cu));
	r = malloc(n * sizeof(*r));
	if (!cu || !r) {
		free(cu);
		free(r);
		return -ENOMEM;
	}
	n = 0;
	for (size_t i = 0; i < ntraces; i++) {
		const struct fr_trace *t = traces[i];
		struct fr_culprit *c;

		if (!t || t->rank >= v->world_size || silent_reason(t) < 0)
			continue;
		c = &cu[n++];
		c->rank = t->rank;
		c->reason = (enum fr_reason)silent_reason(t);
		snprintf(c->host, sizeof(c->host), "%s", t->host);
		c->pid = t->pid;
		/* No communicator is stuck: its last completed operation on any. */
		for (size_t j = t->nops; j-- > 0;) {
			if (t->ops[j].state == FR_STATE_COMPLETED) {
				c->has_last_completed = true;
				c->last_completed = t->ops[j];
				break;
			}
		}
	}
	qsort(cu, n, sizeof(*cu), cmp_culprit);
	for (size_t i = 0; i < n; i++) {
		if (cu[i].has_last_completed && own_op_strings(v, &cu[i].last_completed) < 0) {
			free(cu);
			free(r);
			return -ENOMEM;
		}
	}
	/* A job that went silent as a whole: not an ok job with stragglers. */
	free(v->stragglers);
	v->stragglers = NULL;
	v->nstragglers = 0;
	v->kind = FR_VERDICT_HANG;
	v->culprits = cu;
	v->nculprits = n;
	silent_text(&l, cu, n, FR_REASON_UNRESPONSIVE, r);
	silent_text(&l, cu, n, FR_REASON_DISCONNECTED, r);
	line_add(&l, "; no rank dumped, and the daemon's live view has no operation in flight "
		 "(%zu of %" PRIu32 " ranks with evidence)", v->nranks_with_evidence,
		 v->world_size);
	free(r);
	return 1;
}

void fr_verdict_free(struct fr_verdict *v)
{
	free(v->culprits);
	free(v->comm_ranks);
	free(v->waiting);
	free(v->stragglers);
	fr_strs_free(v->strs);
	memset(v, 0, sizeof(*v));
}

/* ---- JSON ---- */

static json_t *ju64(uint64_t x)
{
	return json_integer(x > INT64_MAX ? INT64_MAX : (json_int_t)x);
}

static int jset(json_t *obj, const char *key, json_t *val)
{
	return val ? json_object_set_new(obj, key, val) : -1;
}

static json_t *ranks_json(const uint32_t *r, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < n; i++) {
		if (json_array_append_new(a, json_integer(r[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* The known members of the verdict's communicator, in communicator order. */
static json_t *comm_ranks_json(const struct fr_verdict *v)
{
	json_t *a = json_array();

	for (uint32_t i = 0; a && i < v->comm_size; i++) {
		if (v->comm_ranks[i] == FR_RANK_UNKNOWN)
			continue;
		if (json_array_append_new(a, json_integer(v->comm_ranks[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* Where a GPU operation is: "enqueued" (the device has not reached it),
 * "started", "completed", or "captured" into a CUDA graph; NULL for an
 * operation not on a GPU. */
static const char *gpu_state_name(const struct fr_op *op)
{
	if (!op->gpu && !op->captured)
		return NULL;
	if (op->captured)
		return "captured";
	if (op->state == FR_STATE_COMPLETED)
		return "completed";
	return op->started ? "started" : "enqueued";
}

static json_t *op_json(const struct fr_op *op, const struct fr_verdict *v)
{
	json_t *o = json_object();
	int rc = 0;

	if (!o)
		return NULL;
	rc |= jset(o, "comm", json_string(op->comm));
	/* comm_size tells how many members comm_ranks leaves out as unknown. */
	if (v) {
		rc |= jset(o, "comm_ranks", comm_ranks_json(v));
		rc |= jset(o, "comm_size", json_integer(v->comm_size));
	}
	rc |= jset(o, "seq", ju64(op->seq));
	rc |= jset(o, "type", json_string(fr_op_name(op->type)));
	rc |= jset(o, "count", ju64(op->count));
	rc |= jset(o, "dtype", json_string(op->dtype));
	rc |= jset(o, "bytes", ju64(op->bytes));
	if (op->size_ratio)
		rc |= jset(o, "size_ratio", json_integer(op->size_ratio));
	rc |= jset(o, "root", json_integer(op->root));
	rc |= jset(o, "peer", json_integer(op->peer));
	rc |= jset(o, "is_p2p", json_boolean(is_p2p(op)));
	rc |= jset(o, "nonblocking", json_boolean(op->nonblocking));
	rc |= jset(o, "waited", json_boolean(op->waited));
	rc |= jset(o, "state", json_string(fr_state_name(op->state)));
	if (gpu_state_name(op))
		rc |= jset(o, "gpu_state", json_string(gpu_state_name(op)));
	if (rc) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *fr_op_to_json(const struct fr_op *op)
{
	return op_json(op, NULL);
}

/*
 * The summary is cut to fit its buffer, possibly inside a UTF-8 sequence of
 * a host or communicator name: drop the broken tail rather than the summary.
 */
static json_t *summary_json(const char *s)
{
	size_t n = strlen(s);
	json_t *j = json_string(s);

	for (size_t cut = 1; !j && cut <= 3 && cut <= n; cut++)
		j = json_stringn(s, n - cut);
	return j ? j : json_string("");
}

static json_t *stragglers_json(const struct fr_verdict *v)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < v->nstragglers; i++) {
		const struct fr_straggler *st = &v->stragglers[i];
		json_t *o = json_pack("{s:I, s:s, s:I, s:I, s:f}", "rank", (json_int_t)st->rank,
				      "comm", st->comm, "late_count", (json_int_t)st->late_count,
				      "matched", (json_int_t)st->matched, "median_late_s",
				      st->median_late_s);

		if (!o || json_array_append_new(a, o) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *window_json(const struct fr_window *w)
{
	return json_pack("{s:I, s:o, s:o}", "rank", (json_int_t)w->rank, "first", ju64(w->first),
			 "last", ju64(w->last));
}

/* {"comms": 0} when every rank kept the same stretch of each communicator. */
static json_t *aligned_json(const struct fr_alignment *a)
{
	json_t *o = json_pack("{s:I}", "comms", (json_int_t)a->ncomms);
	int rc = 0;

	if (!o || !a->ncomms)
		return o;
	rc |= jset(o, "comm", json_string(a->comm));
	rc |= jset(o, "common_first", ju64(a->common_first));
	rc |= jset(o, "common_last", ju64(a->common_last));
	rc |= jset(o, "latest", window_json(&a->latest));
	rc |= jset(o, "earliest", window_json(&a->earliest));
	if (rc) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *fr_verdict_to_json(const struct fr_verdict *v)
{
	json_t *o = json_object();
	json_t *cs = json_array();
	int rc = 0;

	if (!o || !cs)
		goto out_free;
	for (size_t i = 0; i < v->nculprits; i++) {
		const struct fr_culprit *cu = &v->culprits[i];
		json_t *c = json_object();

		if (!c || json_array_append_new(cs, c) < 0)
			goto out_free;
		rc |= jset(c, "rank", json_integer(cu->rank));
		rc |= jset(c, "reason", json_string(fr_reason_name(cu->reason)));
		rc |= jset(c, "host", json_string(cu->host));
		rc |= jset(c, "pid", json_integer(cu->pid));
		rc |= jset(c, "last_completed", cu->has_last_completed ?
						fr_op_to_json(&cu->last_completed) : json_null());
		rc |= jset(c, "called", cu->has_op ? fr_op_to_json(&cu->op) : json_null());
		rc |= jset(c, "waited_s", json_real(cu->waited_s));
	}
	rc |= jset(o, "verdict", json_string(fr_verdict_name(v->kind)));
	rc |= json_object_set_new(o, "culprits", cs);
	cs = NULL;
	rc |= jset(o, "op", v->has_op ? op_json(&v->op, v) : json_null());
	rc |= jset(o, "waiting_ranks", ranks_json(v->waiting, v->nwaiting));
	rc |= jset(o, "waited_s", json_real(v->waited_s));
	rc |= jset(o, "world_size", json_integer(v->world_size));
	rc |= jset(o, "stragglers", stragglers_json(v));
	rc |= jset(o, "aligned", aligned_json(&v->aligned));
	rc |= jset(o, "summary", summary_json(v->summary));
	if (rc)
		goto out_free;
	return o;
out_free:
	json_decref(cs);
	json_decref(o);
	return NULL;
}

/* ---- report for a person ---- */

static const struct fr_trace *trace_of(const struct fr_trace *const *traces, size_t ntraces,
				       uint32_t rank)
{
	for (size_t i = 0; i < ntraces; i++)
		if (traces[i] && traces[i]->rank == rank)
			return traces[i];
	return NULL;
}

static void print_op_line(FILE *out, const char *label, const struct fr_op *op)
{
	const char *gpu = gpu_state_name(op);
	char head[128];
	char det[128];

	op_head(head, sizeof(head), op);
	op_details(det, sizeof(det), op);
	fprintf(out, "%s%s on %s (%s, %" PRIu64 " bytes), %s%s\n", label, head,
		op->comm[0] ? op->comm : "?", det, op->bytes,
		gpu ? gpu : fr_state_name(op->state),
		op->gpu && op->state == FR_STATE_ENTERED ? " on the GPU" : "");
}

/*
 * A copy of `op` with the peer or root its rank could not name, named by
 * the verdict's member list when op is on the verdict's communicator.
 */
static struct fr_op op_named_v(const struct fr_verdict *v, const struct fr_op *op)
{
	struct fr_op o = *op;
	int32_t k = op->peer_in_comm;
	uint32_t m;

	if (!v->has_op || k < 0 || (uint32_t)k >= v->comm_size ||
	    strcmp(op->comm, v->op.comm) != 0)
		return o;
	m = v->comm_ranks[k];
	if (m == FR_RANK_UNKNOWN || m > INT32_MAX)
		return o;
	if (is_p2p(op) && o.peer < 0)
		o.peer = (int32_t)m;
	else if (!is_p2p(op) && fr_op_is_rooted(op->type) && o.root < 0)
		o.root = (int32_t)m;
	return o;
}

/* What one waiting rank waits in; `op` is NULL when nothing, else &named. */
struct wait_item {
	const struct fr_op *op;
	struct fr_op named;
	uint32_t rank;
	uint64_t wait_ns;
};

static int cmp_wait_item(const void *a, const void *b)
{
	const struct wait_item *x = a;
	const struct wait_item *y = b;
	int c;

	if (!x->op || !y->op)
		return x->op ? -1 : y->op ? 1 : (x->rank > y->rank) - (x->rank < y->rank);
	c = strcmp(x->named.comm, y->named.comm);
	if (c)
		return c;
	if (x->named.seq != y->named.seq)
		return x->named.seq < y->named.seq ? -1 : 1;
	if (x->named.type != y->named.type)
		return x->named.type < y->named.type ? -1 : 1;
	if (x->named.peer != y->named.peer)
		return x->named.peer < y->named.peer ? -1 : 1;
	if (x->named.peer_in_comm != y->named.peer_in_comm)
		return x->named.peer_in_comm < y->named.peer_in_comm ? -1 : 1;
	return (x->rank > y->rank) - (x->rank < y->rank);
}

static bool same_wait(const struct wait_item *a, const struct wait_item *b)
{
	if (!a->op || !b->op)
		return !a->op && !b->op;
	return strcmp(a->named.comm, b->named.comm) == 0 && a->named.seq == b->named.seq &&
	       a->named.type == b->named.type && a->named.peer == b->named.peer &&
	       a->named.peer_in_comm == b->named.peer_in_comm;
}

/*
 * Who waits in what: each waiting rank's oldest operation in flight, grouped
 * so that 1024 ranks in the same barrier make one line.
 */
static void print_waiting(FILE *out, const struct fr_verdict *v,
			  const struct fr_trace *const *traces, size_t ntraces,
			  const struct fr_trace **idx)
{
	struct wait_item *it = malloc((v->nwaiting ? v->nwaiting : 1) * sizeof(*it));
	uint32_t *r = malloc((v->nwaiting ? v->nwaiting : 1) * sizeof(*r));
	size_t lines = 0;
	char d[32];
	char rt[512];

	duration_text(d, sizeof(d), v->waited_s);
	fprintf(out, "Waiting: %s %s (%zu), longest %s\n", v->nwaiting == 1 ? "rank" : "ranks",
		ranks_text(rt, sizeof(rt), v->waiting, v->nwaiting), v->nwaiting, d);
	if (!it || !r)
		goto out_free;
	for (size_t i = 0; i < v->nwaiting; i++) {
		uint32_t rank = v->waiting[i];
		const struct fr_trace *t = idx ? (rank < v->world_size ? idx[rank] : NULL) :
					   trace_of(traces, ntraces, rank);

		it[i].rank = rank;
		it[i].op = NULL;
		it[i].wait_ns = 0;
		/* What it waits in is what has held it longest. */
		for (size_t j = 0; t && j < t->nops; j++) {
			const struct fr_op *op = &t->ops[j];

			if (!op_blocks(op))
				continue;
			if (!it[i].op || op_wait_ns(t, op) > it[i].wait_ns) {
				it[i].op = op;
				it[i].wait_ns = op_wait_ns(t, op);
			}
		}
		if (it[i].op)
			it[i].named = op_named_v(v, it[i].op);
	}
	/* From here on `op` only says whether there is one: sorting moves
	 * `named`, and a pointer to it would not follow. */
	qsort(it, v->nwaiting, sizeof(*it), cmp_wait_item);
	for (size_t i = 0; i < v->nwaiting;) {
		size_t j = i;
		size_t n = 0;
		uint64_t longest = 0;
		char head[128];

		for (; j < v->nwaiting && same_wait(&it[i], &it[j]); j++) {
			r[n++] = it[j].rank;
			if (it[j].wait_ns > longest)
				longest = it[j].wait_ns;
		}
		if (lines++ == PRINT_WAIT_GROUPS_MAX) {
			fprintf(out, "  ... and more\n");
			break;
		}
		qsort(r, n, sizeof(*r), cmp_u32);
		duration_text(d, sizeof(d), ns_to_s(longest));
		if (it[i].op) {
			op_head(head, sizeof(head), &it[i].named);
			fprintf(out, "  %s %s: in %s on %s, up to %s\n", n == 1 ? "rank" : "ranks",
				ranks_text(rt, sizeof(rt), r, n), head, it[i].named.comm, d);
		} else {
			fprintf(out, "  %s %s: (no operation in its evidence)\n",
				n == 1 ? "rank" : "ranks", ranks_text(rt, sizeof(rt), r, n));
		}
		i = j;
	}
out_free:
	free(it);
	free(r);
}

void fr_thread_print(FILE *out, const struct fr_thread *th)
{
	fprintf(out, "  thread %" PRIu32 "%s%s%s:\n", th->tid, th->name[0] ? " \"" : "", th->name,
		th->name[0] ? "\"" : "");
	if (!th->nframes)
		fprintf(out, "    (no frames)\n");
	for (size_t j = 0; j < th->nframes; j++) {
		const struct fr_frame *f = &th->frames[j];

		/* Frames without an address are source-level (Python, from a
		 * PyTorch dump): the name says it all. */
		if (!f->ip && !f->offset)
			fprintf(out, "    #%zu %s\n", j, f->name ? f->name : "??");
		else
			fprintf(out, "    #%zu %s+0x%" PRIx64 "\n", j, f->name ? f->name : "??",
				f->offset);
	}
}

static void print_stack(FILE *out, const struct fr_trace *t)
{
	if (!t->nthreads) {
		fprintf(out, "  stack: none in its evidence\n");
		return;
	}
	for (size_t i = 0; i < t->nthreads; i++) {
		const struct fr_thread *th = &t->threads[i];

		/* The thread that wrote the dump is the agent's own: it says
		 * nothing about the application (it stays in the dump file). */
		if (th->current)
			continue;
		fr_thread_print(out, th);
	}
}

static const char *reason_text(enum fr_reason r)
{
	switch (r) {
	case FR_REASON_NOT_ENTERED:
		return "never entered the operation its peers wait in";
	case FR_REASON_UNRESPONSIVE:
		return "unresponsive (stopped heartbeating or answering)";
	case FR_REASON_DISCONNECTED:
		return "lost its connection without finalising";
	case FR_REASON_FINISHED:
		return "finalised while its peers still wait on it";
	case FR_REASON_MISMATCH:
		return "called a different operation at the same seq";
	case FR_REASON_STUCK_IN_OP:
		return "entered the operation, which does not complete";
	}
	return "?";
}

/*
 * Non-blocking operations the rank posted and has not waited on: they do not
 * hold it up, but one may be what a peer needs it to complete.
 */
static void print_posted(FILE *out, const struct fr_verdict *v, const struct fr_trace *t)
{
	size_t n = 0;

	for (size_t j = 0; j < t->nops; j++) {
		const struct fr_op *op = &t->ops[j];

		if (op->state != FR_STATE_ENTERED || op_blocks(op))
			continue;
		if (n++ < PRINT_POSTED_MAX) {
			struct fr_op named = op_named_v(v, op);

			print_op_line(out, "  posted, not waited on: ", &named);
		}
	}
	if (n > PRINT_POSTED_MAX)
		fprintf(out, "  ... and %zu more posted\n", n - PRINT_POSTED_MAX);
}

static void print_culprit(FILE *out, const struct fr_verdict *v, const struct fr_culprit *cu,
			  const struct fr_trace *t)
{
	fprintf(out, "\nCulprit rank %" PRIu32, cu->rank);
	if (cu->host[0] || cu->pid)
		fprintf(out, " (%s, pid %" PRIu32 ")", cu->host[0] ? cu->host : "?", cu->pid);
	if (v->kind == FR_VERDICT_DEADLOCK)
		fprintf(out, ": waits in a cycle: it never entered what the rank before it "
			"waits in, being stuck in the operation below\n");
	else if (cu->reason == FR_REASON_MISMATCH && v->has_op && is_p2p(&v->op))
		fprintf(out, ": its side of the message does not match the other side's\n");
	else if (cu->reason == FR_REASON_NOT_ENTERED && v->has_op && is_p2p(&v->op))
		fprintf(out, ": never posted the %s matching the operation above\n",
			v->op.type == FR_OP_SEND ? "receive" :
			v->op.type == FR_OP_RECV ? "send" : "operation");
	else
		fprintf(out, ": %s\n", reason_text(cu->reason));
	if (cu->has_op)
		print_op_line(out, cu->reason == FR_REASON_MISMATCH ? "  called: " :
				   "  in flight: ", &cu->op);
	if (cu->waited_s > 0) {
		char d[32];

		duration_text(d, sizeof(d), cu->waited_s);
		fprintf(out, "  waited: %s\n", d);
	}
	if (cu->has_last_completed)
		print_op_line(out, "  last completed: ", &cu->last_completed);
	else if (t && !v->has_op)
		fprintf(out, "  last completed: none in its evidence\n");
	else if (t)
		fprintf(out, "  last completed: none on %s in its evidence\n",
			v->op.comm[0] ? v->op.comm : "this communicator");
	if (!t || t->status == FR_RANK_MISSING) {
		fprintf(out, "  no dump: %s\n", t ? "missing" : "no evidence at all (missing)");
		return;
	}
	print_posted(out, v, t);
	if (t->status != FR_RANK_DUMPED) {
		fprintf(out, "  no dump: %s (the daemon's live view only)\n",
			fr_rank_status_name(t->status));
		if (!t->nthreads)
			return;
	}
	if (t->dropped)
		fprintf(out, "  (%" PRIu64 " older entries lost to ring wrap)\n", t->dropped);
	print_stack(out, t);
}

/* Frames compared and shown when stacks are merged. */
#define MERGE_FRAMES 16
#define MERGE_SHOWN 6
#define MERGE_GROUPS 8

/* A rank's application stack: its first thread with frames that is not the
 * agent's own (the main thread, as threads are listed). */
static const struct fr_thread *app_thread(const struct fr_trace *t)
{
	for (size_t i = 0; t && i < t->nthreads; i++)
		if (!t->threads[i].current && t->threads[i].nframes)
			return &t->threads[i];
	return NULL;
}

/*
 * Where a stack is compared from: the outermost call into the communication
 * library (MPI_Allreduce, ncclAllReduce) when there is one. Below it, ranks
 * waiting in the same collective differ only in which progress function
 * they were caught in.
 */
static bool is_api_frame(const char *name)
{
	return name && (strncmp(name, "MPI_", 4) == 0 || strncmp(name, "PMPI_", 5) == 0 ||
			strncmp(name, "nccl", 4) == 0 || strncmp(name, "pnccl", 5) == 0);
}

struct stack_ref {
	uint64_t hash;
	uint32_t rank;
	const struct fr_frame *frames; /* from the first frame compared */
	size_t n;                      /* frames compared */
	size_t total;                  /* frames from `frames` to the outermost */
};

static struct stack_ref stack_ref_of(uint32_t rank, const struct fr_thread *th)
{
	struct stack_ref ref = { FR_FNV_INIT, rank, th->frames, 0, th->nframes };
	size_t start = 0;

	for (size_t i = 0; i < th->nframes; i++)
		if (is_api_frame(th->frames[i].name))
			start = i;
	ref.frames = th->frames + start;
	ref.total = th->nframes - start;
	ref.n = ref.total < MERGE_FRAMES ? ref.total : MERGE_FRAMES;
	for (size_t i = 0; i < ref.n; i++) {
		const char *name = ref.frames[i].name ? ref.frames[i].name : "";

		ref.hash = fr_fnv1a(ref.hash, name, strlen(name) + 1);
	}
	return ref;
}

static bool same_stack(const struct stack_ref *a, const struct stack_ref *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const char *x = a->frames[i].name, *y = b->frames[i].name;

		if (x != y && (!x || !y || strcmp(x, y) != 0))
			return false;
	}
	return true;
}

static int cmp_stack_ref(const void *a, const void *b)
{
	const struct stack_ref *x = a, *y = b;

	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

struct stack_group {
	size_t first, n; /* a run of refs */
};

static int cmp_group(const void *a, const void *b)
{
	const struct stack_group *x = a, *y = b;

	return x->n != y->n ? (x->n > y->n ? -1 : 1) : (x->first > y->first) - (x->first < y->first);
}

void fr_stack_groups_free(struct fr_stack_groups *g)
{
	free(g->groups);
	free(g->ranks);
	memset(g, 0, sizeof(*g));
}

int fr_stack_groups_build(const struct fr_trace *const *idx, uint32_t world,
			  struct fr_stack_groups *out)
{
	struct stack_ref *refs = malloc((world ? world : 1) * sizeof(*refs));
	struct stack_group *runs = malloc((world ? world : 1) * sizeof(*runs));
	size_t n = 0, ng = 0;
	int rc = -ENOMEM;

	memset(out, 0, sizeof(*out));
	out->groups = malloc((world ? world : 1) * sizeof(*out->groups));
	out->ranks = malloc((world ? world : 1) * sizeof(*out->ranks));
	if (!refs || !runs || !out->groups || !out->ranks)
		goto out_free;
	for (uint32_t r = 0; r < world; r++) {
		const struct fr_thread *th = idx[r] ? app_thread(idx[r]) : NULL;

		if (th)
			refs[n++] = stack_ref_of(r, th);
	}
	qsort(refs, n, sizeof(*refs), cmp_stack_ref);
	/* Equal hashes are adjacent; within them, split on a real difference. */
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;

		while (j < n && refs[j].hash == refs[i].hash && same_stack(&refs[j], &refs[i]))
			j++;
		runs[ng++] = (struct stack_group){ i, j - i };
		i = j;
	}
	qsort(runs, ng, sizeof(*runs), cmp_group);
	/* Each group's ranks, ascending (a run is sorted by rank), one after
	 * the other in out->ranks. */
	for (size_t g = 0; g < ng; g++) {
		const struct stack_ref *ref = &refs[runs[g].first];
		struct fr_stack_group *sg = &out->groups[g];

		sg->ranks = out->ranks + out->nranks;
		sg->nranks = runs[g].n;
		for (size_t k = 0; k < runs[g].n; k++)
			out->ranks[out->nranks++] = refs[runs[g].first + k].rank;
		sg->thread = app_thread(idx[ref->rank]);
		sg->frames = ref->frames;
		sg->nframes = ref->total;
	}
	out->ngroups = ng;
	rc = 0;
out_free:
	if (rc)
		fr_stack_groups_free(out);
	free(refs);
	free(runs);
	return rc;
}

/*
 * Ranks grouped by identical application stack (function names, innermost
 * first), largest group first, as STAT does: at 1024 ranks, "1023 ranks:
 * PMPI_Allreduce <- train_step <- main" and the odd one out.
 */
static void print_merged_stacks(FILE *out, const struct fr_trace *const *idx, uint32_t world)
{
	struct fr_stack_groups sg;
	char rt[256];

	if (fr_stack_groups_build(idx, world, &sg))
		return;
	if (sg.nranks < 2)
		goto out_free;
	fprintf(out, "\nStacks (%zu ranks, %zu distinct):\n", sg.nranks, sg.ngroups);
	for (size_t g = 0; g < sg.ngroups && g < MERGE_GROUPS; g++) {
		const struct fr_stack_group *grp = &sg.groups[g];

		fprintf(out, "  %zu %s (%s):", grp->nranks, grp->nranks == 1 ? "rank" : "ranks",
			ranks_text(rt, sizeof(rt), grp->ranks, grp->nranks));
		for (size_t i = 0; i < grp->nframes && i < MERGE_SHOWN; i++)
			fprintf(out, "%s%s", i ? " <- " : " ",
				grp->frames[i].name ? grp->frames[i].name : "??");
		fprintf(out, "%s\n", grp->nframes > MERGE_SHOWN ? " <- ..." : "");
	}
	if (sg.ngroups > MERGE_GROUPS)
		fprintf(out, "  ... and %zu more distinct stacks\n", sg.ngroups - MERGE_GROUPS);
out_free:
	fr_stack_groups_free(&sg);
}

/*
 * "Ring windows differ (rank 3 kept seq 120-2167 of world, rank 5 kept
 * 0-2047); compared on the common range 120-2047"
 */
static void print_alignment(FILE *out, const struct fr_alignment *a)
{
	if (!a->ncomms)
		return;
	fprintf(out, "Ring windows differ (rank %" PRIu32 " kept seq %" PRIu64 "-%" PRIu64
		" of %s, rank %" PRIu32 " kept %" PRIu64 "-%" PRIu64 "); ", a->latest.rank,
		a->latest.first, a->latest.last, a->comm, a->earliest.rank, a->earliest.first,
		a->earliest.last);
	if (a->common_first <= a->common_last)
		fprintf(out, "compared on the common range %" PRIu64 "-%" PRIu64, a->common_first,
			a->common_last);
	else
		fprintf(out, "no seq of it was kept by every rank");
	if (a->ncomms > 1)
		fprintf(out, " (windows differ on %" PRIu32 " communicators)", a->ncomms);
	fprintf(out, "\n");
}

static void print_stragglers(FILE *out, const struct fr_verdict *v)
{
	char line[256];

	if (!v->nstragglers)
		return;
	if (v->nstragglers == 1) {
		straggler_text(line, sizeof(line), &v->stragglers[0]);
		fprintf(out, "Stragglers (information, not a hang): %s\n", line);
		return;
	}
	fprintf(out, "Stragglers (information, not a hang):\n");
	for (size_t i = 0; i < v->nstragglers && i < PRINT_STRAGGLERS_MAX; i++) {
		straggler_text(line, sizeof(line), &v->stragglers[i]);
		fprintf(out, "  %s\n", line);
	}
	if (v->nstragglers > PRINT_STRAGGLERS_MAX)
		fprintf(out, "  ... and %zu more\n", v->nstragglers - PRINT_STRAGGLERS_MAX);
}

/*
 * Many culprits (every member of a large stuck communicator): one line per
 * reason with rank ranges. `r` has room for every culprit.
 */
static void print_culprit_reasons(FILE *out, const struct fr_verdict *v, uint32_t *r)
{
	char rt[512];

	fprintf(out, "\nCulprits: %zu\n", v->nculprits);
	for (unsigned reason = 0; reason < sizeof(reason_names) / sizeof(reason_names[0]);
	     reason++) {
		size_t n = 0;

		for (size_t i = 0; i < v->nculprits; i++)
			if (v->culprits[i].reason == reason)
				r[n++] = v->culprits[i].rank;
		if (!n)
			continue;
		fprintf(out, "  %s: %s %s (%zu): %s\n", fr_reason_name(reason),
			n == 1 ? "rank" : "ranks", ranks_text(rt, sizeof(rt), r, n), n,
			reason_text((enum fr_reason)reason));
	}
}

void fr_verdict_print(FILE *out, const struct fr_verdict *v,
		      const struct fr_trace *const *traces, size_t ntraces)
{
	/* An index by rank; without memory, a linear search per lookup. */
	const struct fr_trace **idx = calloc(v->world_size ? v->world_size : 1, sizeof(*idx));
	char rt[512];
	uint32_t *r = NULL;
	size_t n = 0;

	for (size_t i = 0; idx && i < ntraces; i++)
		if (traces[i] && traces[i]->rank < v->world_size && !idx[traces[i]->rank])
			idx[traces[i]->rank] = traces[i];

	fprintf(out, "%s\n", v->summary);
	fprintf(out, "\nVerdict: %s\n", fr_verdict_name(v->kind));
	if (v->has_op) {
		print_op_line(out, v->kind != FR_VERDICT_MISMATCH ? "Operation: " :
				   is_p2p(&v->op) ? "Operation (the send): " :
				   "Operation (majority): ", &v->op);
		fprintf(out, "Communicator: %s, %" PRIu32 " ranks [%s]\n", v->op.comm,
			v->comm_size, members_text(rt, sizeof(rt), v->comm_ranks, v->comm_size));
	}
	if (v->nwaiting)
		print_waiting(out, v, traces, ntraces, idx);
	fprintf(out, "Evidence: %zu of %" PRIu32 " ranks\n", v->nranks_with_evidence,
		v->world_size);
	r = malloc((v->world_size ? v->world_size : 1) * sizeof(*r));
	if (r && idx) {
		for (uint32_t i = 0; i < v->world_size; i++)
			if (!idx[i] || idx[i]->status == FR_RANK_MISSING)
				r[n++] = i;
		if (n)
			fprintf(out, "  no evidence: %s %s\n", n == 1 ? "rank" : "ranks",
				ranks_text(rt, sizeof(rt), r, n));
		for (int s = FR_RANK_LIVE; s < FR_RANK_MISSING; s++) {
			n = 0;
			for (uint32_t i = 0; i < v->world_size; i++)
				if (idx[i] && (int)idx[i]->status == s)
					r[n++] = i;
			if (n)
				fprintf(out, "  no dump, %s: %s %s\n", fr_rank_status_name((unsigned)s),
					n == 1 ? "rank" : "ranks", ranks_text(rt, sizeof(rt), r, n));
		}
	}

	print_alignment(out, &v->aligned);
	print_stragglers(out, v);

	if (v->nculprits > PRINT_CULPRITS_MAX && r)
		print_culprit_reasons(out, v, r);
	for (size_t i = 0; i < v->nculprits; i++) {
		uint32_t rank = v->culprits[i].rank;
		const struct fr_trace *t = idx ? (rank < v->world_size ? idx[rank] : NULL) :
					   trace_of(traces, ntraces, rank);

		if (v->nculprits > PRINT_CULPRITS_MAX && i == PRINT_CULPRITS_DETAIL) {
			fprintf(out, "\n... and %zu more culprits, listed by reason above\n",
				v->nculprits - i);
			break;
		}
		print_culprit(out, v, &v->culprits[i], t);
	}
	if (idx)
		print_merged_stacks(out, idx, v->world_size);
	free(r);
	free(idx);
}

/* ---- communicators that share an id, not their members ---- */

/* One rank's member list of a communicator; `set` hashes its members as a
 * set (in any order), 0 for a list with members not known. */
struct comm_use {
	struct fr_trace *t;
	struct fr_comm *c;
	uint64_t set;
};

/*
 * A hash of a complete member list as a set: a sum of mixed members, so
 * that one group listed in two orders hashes alike (a list in another
 * order is the engine's to merge and warn of, not another group). Lists
 * of one size whose hashes agree count as the same group. 0 when a member
 * is not known.
 */
static uint64_t members_set(const struct fr_comm *c)
{
	uint64_t h = mix64(c->size);

	if (!c->size || !c->members)
		return 0;
	for (uint32_t k = 0; k < c->size; k++) {
		if (c->members[k] == FR_RANK_UNKNOWN)
			return 0;
		h += mix64(UINT64_C(0x9e3779b97f4a7c15) + c->members[k]);
	}
	return h ? h : 1;
}

/* By id, then complete lists by size and set, then the incomplete ones. */
static int cmp_comm_use(const void *x, const void *y)
{
	const struct comm_use *a = x, *b = y;
	int c = strcmp(a->c->id, b->c->id);

	if (c)
		return c;
	if (!a->set != !b->set)
		return a->set ? -1 : 1;
	if (a->c->size != b->c->size)
		return a->c->size < b->c->size ? -1 : 1;
	return a->set < b->set ? -1 : a->set > b->set;
}

static bool same_group(const struct comm_use *a, const struct comm_use *b)
{
	return a->set && a->set == b->set && a->c->size == b->c->size;
}

/* Whether an incomplete list `part` fits complete list `full`: every
 * member it knows at the place `full` has it. */
static bool list_fits(const struct fr_comm *part, const struct fr_comm *full)
{
	if (part->size != full->size || !part->members)
		return false;
	for (uint32_t k = 0; k < part->size; k++)
		if (part->members[k] != FR_RANK_UNKNOWN && part->members[k] != full->members[k])
			return false;
	return true;
}

/* Every id any trace had (copies, sorted) and every one given, to keep a
 * new id from taking one. */
struct id_set {
	char (*ids)[FR_COMM_ID_MAX + 1];
	size_t n;
	char (*added)[FR_COMM_ID_MAX + 1];
	size_t nadded, cap;
};

static int cmp_id(const void *a, const void *b)
{
	return strcmp(a, b);
}

static bool id_taken(const struct id_set *ids, const char *id)
{
	if (bsearch(id, ids->ids, ids->n, sizeof(*ids->ids), cmp_id))
		return true;
	for (size_t i = 0; i < ids->nadded; i++)
		if (strcmp(ids->added[i], id) == 0)
			return true;
	return false;
}

static int id_add(struct id_set *ids, const char *id)
{
	if (ids->nadded == ids->cap) {
		size_t ncap = ids->cap ? ids->cap * 2 : 8;
		void *p = realloc(ids->added, ncap * sizeof(*ids->added));

		if (!p)
			return -ENOMEM;
		ids->added = p;
		ids->cap = ncap;
	}
	snprintf(ids->added[ids->nadded++], FR_COMM_ID_MAX + 1, "%s", id);
	return 0;
}

/*
 * A new id for group `c` of id `c->id`: "ID:RANKS", else (too long, or
 * taken) "ID:#HASH" of the id and the set. Returns 0, 1 when both are
 * taken, or -ENOMEM.
 */
static int split_id(const struct fr_comm *c, uint64_t set, const struct id_set *ids,
		    char out[FR_COMM_ID_MAX + 1])
{
	uint32_t *sorted = malloc(c->size * sizeof(*sorted));
	char ranks[FR_COMM_ID_MAX + 1];
	size_t n = strlen(c->id), need;
	uint64_t h;

	if (!sorted)
		return -ENOMEM;
	memcpy(sorted, c->members, c->size * sizeof(*sorted));
	qsort(sorted, c->size, sizeof(*sorted), cmp_u32);
	need = fr_format_ranks(ranks, sizeof(ranks), sorted, c->size);
	free(sorted);
	if (n + 1 + need <= FR_COMM_ID_MAX) {
		memcpy(out, c->id, n);
		out[n] = ':';
		memcpy(out + n + 1, ranks, need + 1);
		if (!id_taken(ids, out))
			return 0;
	}
	h = fr_fnv1a(FR_FNV_INIT, c->id, n) ^ set;
	snprintf(out, FR_COMM_ID_MAX + 1, "%.*s:#%016" PRIx64, FR_COMM_ID_MAX - 18, c->id, h);
	return id_taken(ids, out) ? 1 : 0;
}

/* Renames communicator `c` of trace `t` to `id`, in its operations too. */
static int rename_comm(struct fr_trace *t, struct fr_comm *c, const char *id)
{
	const char *to = fr_trace_str(t, id);
	char from[FR_COMM_ID_MAX + 1];

	if (!to)
		return -ENOMEM;
	memcpy(from, c->id, sizeof(from));
	for (size_t i = 0; i < t->nops; i++)
		if (same_str(t->ops[i].comm, from))
			t->ops[i].comm = to;
	snprintf(c->id, sizeof(c->id), "%s", id);
	return 0;
}

/*
 * Splits the uses [i, j) of one id, complete lists first (sorted into
 * groups) and `npart` incomplete ones last: each group gets a new id, and
 * each incomplete list that of the one group it fits. Returns 1 when the
 * id is left alone (an incomplete list fits no group or several, or no
 * free id), 0 once renamed (the note in `line`), or -ENOMEM.
 */
static int split_one(struct comm_use *u, size_t n, size_t npart, struct id_set *ids,
		     char *line, size_t cap, size_t len)
{
	size_t nfull = n - npart;
	size_t *group = malloc(n * sizeof(*group));
	char (*to)[FR_COMM_ID_MAX + 1] = malloc(n * sizeof(*to));
	int rc = -ENOMEM;

	if (!group || !to)
		goto out_free;
	for (size_t k = 0; k < nfull; k++) {
		if (k && same_group(&u[k - 1], &u[k])) {
			group[k] = group[k - 1];
			continue;
		}
		group[k] = k;
	}
	rc = 1;
	for (size_t k = nfull; k < n; k++) {
		size_t fits = 0;

		for (size_t g = 0; g < nfull; g++)
			if (group[g] == g && list_fits(u[k].c, u[g].c)) {
				group[k] = g;
				fits++;
			}
		if (fits != 1)
			goto out_free;
	}
	for (size_t k = 0; k < nfull; k++) {
		if (group[k] != k)
			continue;
		if ((rc = split_id(u[k].c, u[k].set, ids, to[k])) ||
		    (rc = id_add(ids, to[k])))
			goto out_free;
		len += (size_t)snprintf(line + (len < cap ? len : cap), len < cap ? cap - len : 0,
					"%s %s", k ? "," : "", to[k]);
	}
	for (size_t k = 0; k < n && !rc; k++)
		rc = rename_comm(u[k].t, u[k].c, to[group[k]]);
out_free:
	free(group);
	free(to);
	return rc;
}

int fr_traces_split_comms(struct fr_trace *const *traces, size_t n, FILE *note,
			  const char *prog)
{
	struct id_set ids = { 0 };
	struct comm_use *uses;
	size_t total = 0;
	int nsplit = 0, rc = 0;

	for (size_t i = 0; i < n; i++)
		total += traces[i]->ncomms;
	if (!total)
		return 0;
	uses = malloc(total * sizeof(*uses));
	ids.ids = malloc(total * sizeof(*ids.ids));
	if (!uses || !ids.ids) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (size_t i = 0, k = 0; i < n; i++) {
		for (size_t j = 0; j < traces[i]->ncomms; j++, k++) {
			struct fr_comm *c = &traces[i]->comms[j];

			uses[k] = (struct comm_use){ traces[i], c, members_set(c) };
		}
	}
	qsort(uses, total, sizeof(*uses), cmp_comm_use);
	for (size_t k = 0; k < total; k++)
		memcpy(ids.ids[k], uses[k].c->id, sizeof(ids.ids[k]));
	ids.n = total;
	for (size_t i = 0, j; i < total && rc >= 0; i = j) {
		char id[FR_COMM_ID_MAX + 1];
		char line[512];
		size_t nfull, len;

		for (j = i + 1; j < total && strcmp(uses[j].c->id, uses[i].c->id) == 0; j++)
			;
		for (nfull = 0; i + nfull < j && uses[i + nfull].set; nfull++)
			;
		if (nfull < 2 || same_group(&uses[i], &uses[i + nfull - 1]))
			continue;
		snprintf(id, sizeof(id), "%s", uses[i].c->id);
		len = (size_t)snprintf(line, sizeof(line),
				       "%s: communicator %s names different groups on different "
				       "ranks (PyTorch's split_group names each color's group "
				       "alike); told apart as", prog, id);
		rc = split_one(&uses[i], j - i, j - i - nfull, &ids, line, sizeof(line), len);
		if (rc == 0) {
			nsplit++;
			if (note)
				fprintf(note, "%s\n", line);
		} else if (rc > 0 && note) {
			fprintf(note, "%s: communicator %s names different groups on different "
				"ranks, which cannot be told apart (lists with unknown members "
				"fit several, or none)\n", prog, id);
		}
	}
out_free:
	free(uses);
	free(ids.ids);
	free(ids.added);
	return rc < 0 ? rc : nsplit;
}
