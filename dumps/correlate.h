/*
 * The correlation engine: from every rank's evidence (struct fr_trace), find
 * the operation a job is stuck on and name the culprit rank(s) and why. The
 * daemon's live verdict and fr-analyze's offline verdict both come from
 * fr_correlate(); the JSON form (fr_verdict_to_json) is the stable contract
 * documented in the README.
 *
 * Model. Operations are matched across ranks by (communicator id, seq).
 * A rank "waits" when it has an operation in flight (state entered, not
 * completed) that blocks it: a blocking one, or a non-blocking one it is
 * waiting on (op.waited); a posted non-blocking op alone is not a wait. A collective (c, s) is stuck when some member has it in flight;
 * the members that have not entered it (last_entered on c < s, or no
 * evidence of it) are what the waiters wait for. A rank that waits on nothing
 * but is waited for is a sink: the root cause. A later collective that the
 * waiters of (c, s) pile into (e.g. a world barrier) is a consequence.
 */
#ifndef FR_CORRELATE_H
#define FR_CORRELATE_H

#include <jansson.h>
#include <stdio.h>

#include "trace.h"

#define FR_VERDICTS(X)                \
	X(OK, "ok")                   \
	X(HANG, "hang")               \
	X(MISMATCH, "mismatch")       \
	X(DEADLOCK, "deadlock")

enum fr_verdict_kind {
#define FR_V_ENUM(e, n) FR_VERDICT_##e,
	FR_VERDICTS(FR_V_ENUM)
#undef FR_V_ENUM
};

#define FR_REASONS(X)                                                         \
	X(NOT_ENTERED, "not_entered")   /* never entered the op its peers wait in */ \
	X(UNRESPONSIVE, "unresponsive") /* stopped heartbeating or answering */      \
	X(DISCONNECTED, "disconnected") /* lost its connection without finalising */ \
	X(FINISHED, "finished")         /* finalised while peers still wait on it */  \
	X(MISMATCH, "mismatch")         /* called a different op at the same seq */   \
	X(STUCK_IN_OP, "stuck_in_op")   /* every member entered; none completes */

enum fr_reason {
#define FR_R_ENUM(e, n) FR_REASON_##e,
	FR_REASONS(FR_R_ENUM)
#undef FR_R_ENUM
};

const char *fr_verdict_name(unsigned v);
const char *fr_reason_name(unsigned r);

struct fr_culprit {
	uint32_t rank;
	enum fr_reason reason;
	char host[FR_HOST_MAX + 1];
	uint32_t pid;
	bool has_last_completed;
	struct fr_op last_completed;  /* its last completed op on the stuck comm */
	bool has_op;
	/* What it called instead (mismatch), what it waits in (deadlock), its
	 * own copy of the stuck operation (stuck_in_op). */
	struct fr_op op;
	double waited_s;              /* stuck_in_op: how long it has waited in op; else 0 */
};

struct fr_verdict {
	enum fr_verdict_kind kind;
	size_t nculprits;
	struct fr_culprit *culprits;  /* owned */
	bool has_op;
	struct fr_op op;              /* the op the job is stuck on / disagrees on */
	uint32_t comm_size;
	uint32_t *comm_ranks;         /* owned: members of op.comm, global ranks in
	                               * communicator order; FR_RANK_UNKNOWN for a
	                               * member no evidence names */
	size_t nwaiting;
	uint32_t *waiting;            /* owned: ranks waiting, ascending */
	double waited_s;              /* longest wait among the waiting ranks */
	uint32_t world_size;
	size_t nranks_with_evidence;
	char summary[1024];           /* one line, for a person */
};

/*
 * Correlates the evidence of one job. `traces` holds at most one trace per
 * rank, in any order (NULL entries are skipped); ranks of `world_size` that
 * have no trace count as missing. Fills `v` (free with fr_verdict_free()).
 * Returns 0 or -ENOMEM.
 *
 * Precedence: a mismatch at the same (comm, seq) wins (culprits: the ranks
 * whose signature -- type, count, dtype, root, redop -- differs from the
 * majority's; on a tie, the ranks not sharing the lowest rank's signature);
 * then a hang: culprits are the unresponsive/disconnected/finished members of
 * the stuck communicator if any, else the sink ranks that never entered the
 * op (reason not_entered), else every member (stuck_in_op). No op in flight
 * anywhere and no mismatch: verdict ok.
 */
int fr_correlate(const struct fr_trace *const *traces, size_t ntraces, uint32_t world_size,
		 struct fr_verdict *v);

void fr_verdict_free(struct fr_verdict *v);

/*
 * The stable JSON contract:
 * {"verdict", "culprits": [{"rank","reason","host","pid", "last_completed": op?,
 *  "called": op?, "waited_s"}], "op": {"comm","comm_ranks","seq","type","count",
 *  "dtype","bytes","root","peer","is_p2p","state","nonblocking","waited",
 *  "comm_size", "gpu_state" (GPU operations only)}
 *  | null (comm_ranks: the known members only),
 *  "waiting_ranks": [...],
 *  "waited_s", "world_size", "summary"}
 * Returns a new reference.
 */
json_t *fr_verdict_to_json(const struct fr_verdict *v);
json_t *fr_op_to_json(const struct fr_op *op);

/*
 * The report for a person: the summary line first, then evidence (the op,
 * who waits, each culprit's last completed op and stack, taken from its
 * trace when present).
 */
void fr_verdict_print(FILE *out, const struct fr_verdict *v,
		      const struct fr_trace *const *traces, size_t ntraces);

/*
 * Formats ascending ranks as ranges, "0-2,4-5". Always NUL-terminates;
 * returns the length it needed (like snprintf).
 */
size_t fr_format_ranks(char *buf, size_t cap, const uint32_t *ranks, size_t n);

#endif
