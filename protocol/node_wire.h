/*
 * The node daemons' messages (protocol version 4; protocol/PROTOCOL.md,
 * "Node daemons", and docs/SCALE-OUT.md): what a node daemon tells the
 * central daemon about the ranks it holds. Same framing, same rules as
 * wire.h: three functions per message, declared there from
 * FR_WIRE_MESSAGES, pure decoders that allocate what they return (free
 * with the message's _free function) and leave the message zeroed on
 * failure.
 *
 * Every message is bounded by FR_WIRE_MAX_PAYLOAD whatever the node holds:
 * what grows with the ranks is split into frames (NODE_RANKS in batches of
 * FR_NODE_RANKS_BATCH, NODE_COMMS by fr_node_comms_batch(), NODE_PROGRESS
 * by FR_NODE_PROGRESS_COMMS_MAX communicators a frame), and what a frame
 * says of one communicator is capped, with counts of what was left out.
 * Ranks are always global ranks, and rank lists are ascending ranges of
 * consecutive ranks, so that a node's 1,024 ranks in one state cost a few
 * bytes.
 */
#ifndef FR_NODE_WIRE_H
#define FR_NODE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "member_runs.h"
#include "wire.h"

/* Jobs one NODE_HELLO lists: the daemon holds at most 1,024. */
#define FR_NODE_JOBS_MAX 4096u
/*
 * The longest NODE_HELLO payload a central daemon takes (a longer one is
 * refused from its header, before it is read): a peer that has proven
 * nothing yet makes the daemon hold at most this much. A node lists at
 * most FR_NODE_HELLO_JOBS_MAX jobs in it, which fit whatever their ids;
 * its other jobs' ranks come as NODE_RANKS all the same.
 */
#define FR_NODE_HELLO_MAX_PAYLOAD 65536u
#define FR_NODE_HELLO_JOBS_MAX                                                 \
	((FR_NODE_HELLO_MAX_PAYLOAD - (2 + FR_HOST_MAX + 8 + 2 + 4)) / \
	 (2 + FR_JOB_MAX + 4 + 4))
/* Ranks one NODE_RANKS carries: 2,048 entries of at most 278 bytes. */
#define FR_NODE_RANKS_BATCH 2048u
/* Per communicator in NODE_PROGRESS: ranges of the node's members, ranks
 * named below the node's highest, operation groups, ranges of one group. */
#define FR_NODE_RANGES_MAX 256u
#define FR_NODE_LAGGARDS_MAX 64u
#define FR_NODE_GROUPS_MAX 16u
/* Communicator records one NODE_PROGRESS carries. */
#define FR_NODE_PROGRESS_COMMS_MAX 16u

/* Ranks first .. first + count - 1; count >= 1, and the last is below FR_RANK_UNKNOWN. */
struct fr_node_range {
	uint32_t first;
	uint32_t count;
};

/* A job the node holds ranks of, as NODE_HELLO lists it. */
struct fr_node_job {
	char job[FR_JOB_MAX + 1];
	uint32_t world_size;
	uint32_t nranks;        /* ranks of it the node holds now */
};

/*
 * Node -> central, first frame on the upstream connection: who the node
 * is. `boot_id` is random per start of the node daemon, so that the
 * central daemon tells a restart (resend everything, forget the old
 * state) from a reconnect. Decode allocates `jobs` (fr_wire_node_hello_free()).
 */
struct fr_msg_node_hello {
	char node[FR_HOST_MAX + 1];
	uint64_t boot_id;
	uint16_t protocol;      /* the newest protocol version the node speaks */
	uint32_t njobs;
	struct fr_node_job *jobs;
};

/*
 * A rank's state as the node sees it (registry_rank_state()). The last
 * three are of protocol 7: a node sends them only to a central daemon
 * that said 7 or more (WELCOME), and says disconnected to an older one,
 * whose decoder refuses them.
 */
enum fr_node_rank_state {
	FR_NODE_RANK_CONNECTED = 0,
	FR_NODE_RANK_UNRESPONSIVE = 1,
	FR_NODE_RANK_DISCONNECTED = 2,
	FR_NODE_RANK_FINISHED = 3,
	FR_NODE_RANK_CRASHED = 4,       /* said CRASH: died of a fatal signal */
	FR_NODE_RANK_EXITED = 5,        /* exited with work in flight or a non-zero status */
	FR_NODE_RANK_KILLED = 6,        /* its process went without a word while needed */
};
#define FR_NODE_RANK_STATE_MAX FR_NODE_RANK_KILLED

/* Whether a rank in state `s` died (crashed, exited or killed). */
static inline bool fr_node_rank_died(uint8_t s)
{
	return s == FR_NODE_RANK_CRASHED || s == FR_NODE_RANK_EXITED || s == FR_NODE_RANK_KILLED;
}

struct fr_node_rank {
	uint32_t rank;
	uint32_t pid;
	char host[FR_HOST_MAX + 1];
	uint8_t state;          /* enum fr_node_rank_state */
	uint64_t start_ns;      /* agent start, CLOCK_REALTIME, from its HELLO */
	uint32_t ring_capacity;
};

/*
 * NODE_RANKS `flags`: this frame starts the node's full list of the job's
 * ranks (after a (re)connect): the receiver forgets what the node said of
 * the job before and takes this frame and the ones that follow.
 */
#define FR_NODE_RANKS_FULL 0x1u

/*
 * Node -> central: ranks of a job that joined or changed state, at most
 * FR_NODE_RANKS_BATCH a frame. Decode allocates `ranks`
 * (fr_wire_node_ranks_free()).
 */
struct fr_msg_node_ranks {
	char job[FR_JOB_MAX + 1];
	uint32_t world_size;
	uint8_t flags;          /* FR_NODE_RANKS_* */
	uint32_t nranks;
	struct fr_node_rank *ranks;
};

/*
 * What the node knows of a communicator's member list: the entries its
 * ranks' COMM frames gave, as runs. A communicator whose runs do not fit
 * one frame is sent as several pieces, each with the id, description and
 * size; the receiver merges pieces as it merges COMM frames.
 */
struct fr_node_comm {
	char id[FR_COMM_ID_MAX + 1];
	char desc[FR_COMM_DESC_MAX + 1];
	uint32_t size;
	uint32_t nmaps;         /* ascending by index, not overlapping */
	struct fr_node_map *maps;
};

/*
 * Node -> central: communicators of a job, once per node. Decode allocates
 * `comms` and each one's `maps` (fr_wire_node_comms_free()); on the
 * encoding side the arrays are the caller's.
 */
struct fr_msg_node_comms {
	char job[FR_JOB_MAX + 1];
	uint32_t ncomms;
	struct fr_node_comm *comms;
};

/* A rank of the node below the node's highest seq entered on a communicator. */
struct fr_node_laggard {
	uint32_t rank;
	uint64_t last_entered;
	uint64_t last_completed;
};

/*
 * The node's ranks that have one operation in flight: same communicator,
 * seq, type and flags (FR_WIRE_INFLIGHT_*). `nranks` counts them all;
 * `ranges` lists them unless there were more than FR_NODE_RANGES_MAX runs
 * (then the first runs only).
 */
struct fr_node_group {
	uint64_t seq;
	uint8_t type;           /* enum fr_op_type */
	uint8_t flags;
	uint32_t nranks;
	uint64_t age_ms;        /* of the earliest entry (or wait), when the frame was sent */
	uint32_t nranges;
	struct fr_node_range ranges[FR_NODE_RANGES_MAX];
};

/* One communicator's progress over the node's ranks that belong to it. */
struct fr_node_comm_progress {
	char comm[FR_COMM_ID_MAX + 1];
	uint64_t lo_entered, hi_entered;
	uint64_t lo_completed, hi_completed;
	uint32_t nranks;        /* the node's ranks on the communicator */
	uint32_t nmembers;      /* their runs (the first FR_NODE_RANGES_MAX) */
	struct fr_node_range members[FR_NODE_RANGES_MAX];
	uint32_t nlaggards;     /* ranks with last_entered below hi_entered ... */
	uint32_t laggards_omitted; /* ... and how many more there were */
	struct fr_node_laggard laggards[FR_NODE_LAGGARDS_MAX];
	uint32_t ngroups;
	uint32_t ops_omitted;   /* operations in flight in no group: over FR_NODE_GROUPS_MAX */
	struct fr_node_group groups[FR_NODE_GROUPS_MAX];
};

/*
 * Node -> central: the progress of a job's communicators that changed,
 * each record the node's whole state of it, at most
 * FR_NODE_PROGRESS_COMMS_MAX a frame. Decode allocates `comms`
 * (fr_wire_node_progress_free()).
 */
struct fr_msg_node_progress {
	char job[FR_JOB_MAX + 1];
	uint32_t ncomms;
	struct fr_node_comm_progress *comms;
};

/*
 * Central -> node: dump the node's ranks of `job` for incident `incident`
 * (the central daemon's id), which is about operation `seq` of `comm`
 * when the central daemon knows it (`comm` "" and has_seq 0 when not). The
 * node answers with a NODE_SUMMARY per rank and one NODE_DUMP_DONE. Both
 * ids pass fr_wire_valid_name(): the node names files after them.
 */
struct fr_msg_node_dump_request {
	char incident[FR_INCIDENT_MAX + 1];
	char job[FR_JOB_MAX + 1];
	char reason[FR_REASON_MAX + 1];
	char comm[FR_COMM_ID_MAX + 1];
	uint8_t has_seq;        /* 0 or 1 */
	uint64_t seq;
};

/* NODE_SUMMARY `flags`. */
#define FR_NODE_SUMMARY_FULL 0x1u   /* the rank's full dump (NODE_FETCH's answer), not its summary */
#define FR_NODE_SUMMARY_FAILED 0x2u /* no dump: `reason` says why; no bytes */
/* A live look's answer to a one-rank NODE_LOOK_REQUEST, not an incident's:
 * `incident` is "look-<look id>", the bytes are the JSON body GET
 * .../ranks/<r>/stacks or .../trace answers, and with FAILED `reason`
 * starts with the HTTP status the node's look gave ("504 rank 3 ..."). */
#define FR_NODE_SUMMARY_LOOK 0x8u  /* 0x4 stays refused: tests pin it */
#define FR_NODE_SUMMARY_FLAGS (FR_NODE_SUMMARY_FULL | FR_NODE_SUMMARY_FAILED | FR_NODE_SUMMARY_LOOK)

/*
 * Node -> central: a piece of one rank's summary (or, with FULL, of its
 * full dump), as DUMP_DATA carries a dump: pieces in order, at most
 * FR_WIRE_DUMP_CHUNK bytes each, complete when offset + len == total.
 * With FAILED there is no dump: offset, total and len are 0 and `reason`
 * (not empty) says why; without it `reason` is empty and total above 0.
 * `data` points into the decoded buffer.
 */
struct fr_msg_node_summary {
	char incident[FR_INCIDENT_MAX + 1];
	char job[FR_JOB_MAX + 1];
	uint32_t rank;          /* below FR_RANK_UNKNOWN */
	uint8_t flags;          /* FR_NODE_SUMMARY_* */
	char reason[FR_REASON_MAX + 1];
	uint64_t offset;
	uint64_t total;
	uint32_t len;
	const uint8_t *data;
};

/*
 * Node -> central: every rank of `job` the node holds has been answered
 * for incident `incident` (a NODE_SUMMARY each): `answered` with a
 * summary, `failed` with a reason.
 */
struct fr_msg_node_dump_done {
	char incident[FR_INCIDENT_MAX + 1];
	char job[FR_JOB_MAX + 1];
	uint32_t answered;
	uint32_t failed;
};

/* The longest kernel log object one NODE_KERNEL_LOG carries. */
#define FR_NODE_KERNEL_LOG_MAX 65536u

/*
 * Node -> central (protocol 7), before NODE_DUMP_DONE, to a central
 * daemon that said WELCOME 7 or more: the node's kernel log of incident
 * `incident`, the "kernel_log" object its own manifest holds
 * (dumps/FORMAT.md, "Kernel log"), as compact JSON text of 1 to
 * FR_NODE_KERNEL_LOG_MAX bytes. The codec checks its size only; the
 * receiver reads it as it reads a manifest's. `data` points into the
 * decoded buffer.
 */
struct fr_msg_node_kernel_log {
	char incident[FR_INCIDENT_MAX + 1];
	char job[FR_JOB_MAX + 1];
	uint32_t len;
	const uint8_t *data;
};

/*
 * Central -> node: send rank `rank`'s full dump of incident `incident`
 * (NODE_SUMMARY with FULL, or FAILED when the node has none).
 */
struct fr_msg_node_fetch {
	char incident[FR_INCIDENT_MAX + 1];
	char job[FR_JOB_MAX + 1];
	uint32_t rank;          /* below FR_RANK_UNKNOWN */
};

/*
 * Live looks at jobs the node daemons hold (protocol/PROTOCOL.md, "Live
 * looks through node daemons"): what GET /v1/jobs/<job>/stacks,
 * .../ranks/<r>/stacks and .../ranks/<r>/trace show, asked of the nodes.
 */
enum fr_node_look_kind {
	FR_NODE_LOOK_JOB_STACKS = 0,    /* every rank of the node: NODE_LOOK_STACKS */
	FR_NODE_LOOK_RANK_STACKS = 1,   /* one rank: NODE_SUMMARY with LOOK */
	FR_NODE_LOOK_RANK_TRACE = 2,    /* one rank's newest `last` entries: NODE_SUMMARY with LOOK */
};
#define FR_NODE_LOOK_KIND_MAX FR_NODE_LOOK_RANK_TRACE

/*
 * Central -> node: look at the node's ranks of `job`. `rank` is below
 * FR_RANK_UNKNOWN for the one-rank kinds and FR_RANK_UNKNOWN for
 * JOB_STACKS; `last` is 1 to FR_WIRE_LIVE_TRACE_MAX for RANK_TRACE and 0
 * otherwise.
 */
struct fr_msg_node_look_request {
	uint64_t look;
	char job[FR_JOB_MAX + 1];
	uint8_t kind;           /* enum fr_node_look_kind */
	uint32_t rank;
	uint32_t last;
};

/* What a stack class keeps of each frame (look.c reads at most this many a thread). */
#define FR_NODE_LOOK_FRAMES_MAX 128u
#define FR_NODE_LOOK_NAME_MAX 255u      /* longer symbols are cut */
#define FR_NODE_LOOK_THREAD_MAX 31u
/* Ranks a NODE_LOOK_STACKS says why of. */
#define FR_NODE_LOOK_WHY_MAX 16u
/* Classes a node sends for one look; the rest are counted. */
#define FR_NODE_LOOK_CLASSES_MAX 256u

struct fr_node_look_frame {
	char name[FR_NODE_LOOK_NAME_MAX + 1];   /* "" when unknown */
	uint64_t offset;
	uint64_t ip;
};

/* What a class keeps of its Python frames (protocol 8): as many as of its
 * native ones, each string cut to the agent's own limit. */
#define FR_NODE_LOOK_PYFRAMES_MAX FR_NODE_LOOK_FRAMES_MAX
#define FR_NODE_LOOK_PYSTR_MAX 255u

/* A Python frame (dumps/FORMAT.md, "python_frames"); the strings are the
 * class's (fr_node_look_class_free()), never NULL. */
struct fr_node_look_pyframe {
	char *function;
	char *file;
	uint32_t line;
};

/*
 * One class of stacks: the application thread of the class's lowest rank
 * (as the dump writes it: name, tid, the dump's own thread or not, its
 * frames innermost first; its first thread that runs Python, when the
 * class was told apart by Python frames) and `start`, the first frame the class was told
 * apart by (GET /stacks's "frames" are frames[start..]), with the ranks
 * whose stacks fall in it as ranges. A class with more runs than
 * FR_NODE_RANGES_MAX is sent as several, with the same thread and frames.
 */
struct fr_node_look_class {
	char thread[FR_NODE_LOOK_THREAD_MAX + 1];
	uint32_t tid;
	uint8_t current;        /* 0 or 1 */
	uint32_t start;         /* below nframes, or 0 when there are none */
	uint32_t nframes;
	struct fr_node_look_frame *frames;
	uint32_t nranges;       /* at least one */
	struct fr_node_range ranges[FR_NODE_RANGES_MAX];
	/* Protocol 8, in a frame with FR_NODE_LOOK_PYTHON only: the thread's
	 * Python frames, innermost first, by which the class was told apart
	 * (then `start` is 0), and whether outer ones could not be read. */
	uint8_t py_truncated;   /* 0 or 1 */
	uint32_t npyframes;
	struct fr_node_look_pyframe *pyframes;
};

/* Frees what a class owns (its frames, Python frames and their strings). */
void fr_node_look_class_free(struct fr_node_look_class *c);

struct fr_node_look_why {
	uint32_t rank;
	char reason[FR_REASON_MAX + 1];
};

/* NODE_LOOK_STACKS `flags`: the node's last frame for this look. */
#define FR_NODE_LOOK_LAST 0x1u
/*
 * ... and (protocol 8) the Python frames of its classes that have some
 * follow the classes on the wire, each with its class's index. A node
 * sets it only for a central daemon that said 8 or more in its WELCOME
 * (an older one refuses the flag), and only when a class has Python
 * frames, so that a job without Python sends what protocol 7 sends.
 */
#define FR_NODE_LOOK_PYTHON 0x4u  /* 0x2 stays refused: tests pin it */

/*
 * Node -> central: the answer to a JOB_STACKS look, as one or more frames
 * (the last with FR_NODE_LOOK_LAST). The counts add up over the frames:
 * the node puts its ranks asked and answered, the ranks that did not
 * answer (`nmissing`, the first runs of them in `missing`, why for the
 * first few) and what it left out in its first frame, and its classes in
 * as many frames as they need. Decode allocates `classes` and each one's
 * `frames` and `pyframes` (fr_wire_node_look_stacks_free()).
 */
struct fr_msg_node_look_stacks {
	uint64_t look;
	char job[FR_JOB_MAX + 1];
	uint8_t flags;          /* FR_NODE_LOOK_* */
	uint32_t asked;
	uint32_t answered;
	uint32_t nmissing;      /* ranks asked that did not answer */
	uint32_t nmranges;
	struct fr_node_range missing[FR_NODE_RANGES_MAX];
	uint32_t nwhy;
	struct fr_node_look_why why[FR_NODE_LOOK_WHY_MAX];
	uint32_t classes_left_out;
	uint32_t threads_left_out;
	uint32_t frames_left_out;
	uint32_t nclasses;
	struct fr_node_look_class *classes;
};

/* The encoded size of one class, for filling frames. */
size_t fr_node_look_class_size(const struct fr_node_look_class *c);
/* A NODE_LOOK_STACKS payload without its classes. */
size_t fr_node_look_stacks_base_size(const struct fr_msg_node_look_stacks *m);

void fr_wire_node_look_stacks_free(struct fr_msg_node_look_stacks *m);
void fr_wire_node_hello_free(struct fr_msg_node_hello *m);
void fr_wire_node_ranks_free(struct fr_msg_node_ranks *m);
void fr_wire_node_comms_free(struct fr_msg_node_comms *m);
void fr_wire_node_progress_free(struct fr_msg_node_progress *m);

/*
 * Adds global rank `rank` to the ascending runs r[0 .. *n): extends the
 * last run when `rank` follows it, starts a run when there is room for one
 * (`cap`). Ranks come in ascending order; one already in the last run is
 * not added again. Returns true when `rank` is new (whether or not a run
 * could hold it), false for a repeat.
 */
bool fr_node_ranges_add(struct fr_node_range *r, uint32_t *n, uint32_t cap, uint32_t rank);

/* Where fr_node_comms_batch() goes on from: communicator, then run. */
struct fr_node_cursor {
	uint32_t comm;
	uint32_t map;
};

/*
 * Fills the next NODE_COMMS frame of job `m->job` with the communicators
 * `comms[0 .. ncomms)` from `*at` on: as many pieces as a payload of
 * `max_payload` (at most FR_WIRE_MAX_PAYLOAD) holds, into `slots` (room
 * for `nslots`), which m->comms then points to. A piece borrows its runs
 * from `comms`. Moves `*at` past what it took; all is sent when
 * at->comm == ncomms. Returns the number of pieces, or -EMSGSIZE when not
 * even one run fits the payload.
 */
int fr_node_comms_batch(struct fr_msg_node_comms *m, struct fr_node_comm *slots, uint32_t nslots,
			const struct fr_node_comm *comms, uint32_t ncomms, struct fr_node_cursor *at,
			size_t max_payload);

#endif
