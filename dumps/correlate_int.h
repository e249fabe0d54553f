/*
 * The correlation engine's own declarations, shared by its files and by
 * nothing else (the daemon, fr-analyze and the tests use correlate.h):
 *
 *   correlate.c         fr_correlate(): the index, then the checks in the
 *                       order of precedence correlate.h gives; culprits and
 *                       the wording every verdict shares
 *   correlate_index.c   the one pass over every rank's entries: signatures,
 *                       communicators, collectives, windows, p2p streams
 *   mismatch.c          collectives and p2p messages whose sides disagree
 *   hang.c              what a hung job is stuck on and whom it waits for
 *   deadlock.c          waits that go round in a cycle
 *   straggler.c         ranks consistently late to the collectives of a job
 *                       that does not hang
 *   verdict_text.c      rank ranges, durations and operations in words
 *   verdict_json.c      the --json contract (fr_verdict_to_json())
 *   verdict_report.c    the report for a person (fr_verdict_print())
 *   comm_split.c        communicators that share an id, not their members
 *
 * What one file calls in another is prefixed fr_corr_ and hidden, so that
 * no shared object exports it and the compiler may still inline it within
 * its own file under -fPIC; the small helpers that the hot loops of several
 * files call are static inline here.
 */
#ifndef FR_CORRELATE_INT_H
#define FR_CORRELATE_INT_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "grow.h"
#include "correlate.h"

#define NONE UINT32_MAX

#pragma GCC visibility push(hidden)

/* A growing line of text that silently truncates at its capacity. */
struct line {
	char *buf;
	size_t cap;
	size_t len;
};

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
	/* The list merged last: a live view lends all its ranks one list,
	 * which merged once has nothing more to give. */
	const uint32_t *merged_from;
	uint32_t *owned;           /* members made up from ops when no trace lists it */
	size_t owned_cap;
	/* Members known without their place in the list: the ranks missing
	 * from a communicator as large as the world. */
	uint32_t *extra;
	uint32_t nextra;
	const struct fr_comm **ent; /* per member: that member's own view of it */
	/* While fr_corr_ctx_build() reads rank stamp - 1: its rcomm for this one. */
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
static inline uint32_t cinfo_member(const struct cinfo *c, uint32_t i)
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
	bool differs : 1;      /* some signature differs from ref's (fr_corr_sig_equal strict) */
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

/* In a dump taken on request, a wait shorter than this is a collective
 * in progress, not a hang (verdict_of()). */
#define FR_CORR_REQUEST_WAIT_MIN_NS (1000ull * 1000 * 1000)

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

/* A send and the receive paired with it by seq (see mismatch.c). */
struct p2p_pair {
	const struct fr_op *send;
	const struct fr_op *recv;
	uint32_t from;
	uint32_t to;
	uint32_t ci;
};

static inline double ns_to_s(uint64_t ns)
{
	return (double)ns / 1e9;
}

static inline bool is_p2p(const struct fr_op *op)
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
static inline bool op_blocks(const struct fr_op *op)
{
	return op->state == FR_STATE_ENTERED && (!op->nonblocking || op->waited);
}

/*
 * How long `op` has held its rank up by the trace's time: from the start of
 * the Wait for a waited non-blocking operation, else from entering it.
 */
static inline uint64_t op_wait_ns(const struct fr_trace *t, const struct fr_op *op)
{
	uint64_t since = op->t_started_ns ? op->t_started_ns : op->t_entered_ns;

	return t->time_ns > since ? t->time_ns - since : 0;
}

/*
 * A p2p operation addressed to one member whose global rank is not named
 * (an NCCL rank records only its rank in the communicator). It waits on
 * that one member, not on any: it is no receive from any source. Asked of
 * an op as recorded, before fr_corr_op_named() looked the member up, it says only
 * that its rank could not name it.
 */
static inline bool peer_unnamed(const struct fr_op *op)
{
	return is_p2p(op) && op->peer < 0 && op->peer_in_comm >= 0;
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

/* A 64-bit mixer (splitmix64's finaliser) for the hash tables and sets. */
static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/* Grows *arr (*cap elements of `size` bytes) to hold at least `need`; on
 * failure *arr is left as it was. */
static inline int grow_array(void **arr, size_t *cap, size_t need, size_t size)
{
	return fr_grow(arr, cap, need, size, 16);
}

/* Whether a rank still runs: it dumped, or the daemon sees it live. */
static inline bool status_good(const struct fr_trace *t)
{
	return t && (t->status == FR_RANK_DUMPED || t->status == FR_RANK_LIVE);
}

/* Rank r's trace when the rank gave any evidence, else NULL. */
static inline const struct fr_trace *evidence_of(const struct ctx *cx, uint32_t r)
{
	const struct fr_trace *t = cx->by_rank[r];

	return t && t->status != FR_RANK_MISSING ? t : NULL;
}

/* How many reasons FR_REASONS lists. */
#define FR_R_COUNT(e, n) +1
enum { FR_CORR_NREASONS = 0 FR_REASONS(FR_R_COUNT) };
#undef FR_R_COUNT

/* correlate.c: culprits, and the verdict's communicator */
void fr_corr_culprit_fill(const struct ctx *cx, struct fr_culprit *cu, uint32_t rank,
			  enum fr_reason reason, const char *comm);
int fr_corr_cmp_culprit(const void *a, const void *b);
int fr_corr_verdict_set_comm(struct fr_verdict *v, const struct cinfo *c);
void fr_corr_who_text(char *buf, size_t cap, const struct ctx *cx, const uint32_t *ranks, size_t n);
void fr_corr_waited_text(struct line *l, const uint32_t *ranks, size_t n, double s);
void fr_corr_where_text(char *buf, size_t cap, const struct fr_verdict *v);
/*
 * Makes the verdict's classes (correlate.h) of `n` ranks, ascending, rank i
 * of class cls[i] below k: the FR_CLASSES_MAX largest, each class's ranks
 * ascending, with `majority` set on the largest when it is larger than
 * every other. slot[c] (k entries) becomes class c's index in v->classes,
 * NONE when left out; *major the majority's class, NONE on a tie. The
 * caller fills in what each class did. Returns 0 or -ENOMEM.
 */
int fr_corr_classes_build(struct fr_verdict *v, const uint32_t *ranks, const uint32_t *cls,
			  size_t n, uint32_t k, uint32_t *slot, uint32_t *major);

/* correlate_index.c */
int fr_corr_ctx_build(struct ctx *cx, const struct fr_trace *const *traces, size_t ntraces,
		      uint32_t world_size);
void fr_corr_ctx_free(struct ctx *cx);
bool fr_corr_sig_equal(const struct fr_op *a, const struct fr_op *b, bool strict);
uint32_t fr_corr_comm_intern(struct ctx *cx, const char *id);
uint32_t fr_corr_comm_find(const struct ctx *cx, const char *id);
uint32_t fr_corr_group_find(const struct ctx *cx, uint32_t comm, uint64_t seq);
uint32_t fr_corr_stream_find(const struct ctx *cx, uint32_t ci, uint32_t owner, uint32_t peer,
			     uint8_t type);
const struct rcomm *fr_corr_rank_window(const struct ctx *cx, uint32_t r, uint32_t ci);
bool fr_corr_mpi_rank(const struct ctx *cx, uint32_t r);
int32_t fr_corr_op_peer(const struct ctx *cx, const struct fr_op *op);
struct fr_op fr_corr_op_named(const struct ctx *cx, const struct fr_op *op);

/* mismatch.c */
uint32_t fr_corr_find_mismatch(const struct ctx *cx, bool strict);
int fr_corr_verdict_mismatch(const struct ctx *cx, uint32_t gi, bool strict, struct fr_verdict *v);
bool fr_corr_find_p2p_mismatch(const struct ctx *cx, bool inflight, struct p2p_pair *out);
int fr_corr_verdict_p2p_mismatch(const struct ctx *cx, const struct p2p_pair *p, bool inflight,
				 struct fr_verdict *v);

/* hang.c */
int fr_corr_hang(struct ctx *cx, struct fr_verdict *v);
int fr_corr_cand_cmp(const struct cand *a, const struct cand *b);
size_t fr_corr_cand_waiters(const struct ctx *cx, const struct cand *k, uint32_t *out);
int fr_corr_verdict_from_cand(struct ctx *cx, const struct cand *k, struct fr_verdict *v);

/* deadlock.c */
int fr_corr_verdict_deadlock(struct ctx *cx, const struct cand *k, struct fr_verdict *v);

/* straggler.c */
int fr_corr_find_stragglers(const struct ctx *cx, struct fr_verdict *v);
void fr_corr_straggler_text(char *buf, size_t cap, const struct fr_straggler *st);

/* verdict_report.c: the trace of `rank` among `traces`, or NULL. */
const struct fr_trace *fr_corr_trace_of(const struct fr_trace *const *traces, size_t ntraces,
					uint32_t rank);

/* verdict_text.c */
const char *fr_corr_ranks_text(char *buf, size_t cap, const uint32_t *ranks, size_t n);
const char *fr_corr_members_text(char *buf, size_t cap, const uint32_t *ranks, size_t n);
int fr_corr_cmp_u32(const void *a, const void *b);
__attribute__((format(printf, 2, 3)))
void fr_corr_line_add(struct line *l, const char *fmt, ...);
void fr_corr_duration_text(char *buf, size_t cap, double s);
void fr_corr_op_head(char *buf, size_t cap, const struct fr_op *op);
void fr_corr_op_details(char *buf, size_t cap, const struct fr_op *op);

/* verdict_json.c */
const char *fr_corr_gpu_state_name(const struct fr_op *op);

#pragma GCC visibility pop

#endif
