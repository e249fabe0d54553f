/*
 * The binary framing between agent and daemon (see protocol/PROTOCOL.md for
 * the byte-by-byte layout).
 *
 * Every frame is a 16-byte little-endian header followed by `length` bytes of
 * payload:
 *
 *   offset 0  u32 magic    0x43455246 ("FREC" on the wire)
 *   offset 4  u16 version  the version that defined the message (fr_wire_msg_version)
 *   offset 6  u16 type     one of FR_WIRE_MESSAGES
 *   offset 8  u32 length   payload bytes, at most FR_WIRE_MAX_PAYLOAD
 *   offset 12 u32 flags    reserved, must be 0
 *
 * Payload fields are little-endian integers and strings (u16 length, then
 * that many bytes, no terminator). Each message has three functions: _size
 * (bytes of the whole frame), _encode (writes the whole frame, header
 * included) and _decode (reads the payload only, after
 * fr_wire_header_decode() accepted the header). Decoders are pure: bytes in,
 * struct out, no I/O, and they reject trailing bytes, truncation, strings over
 * their limit and counts that do not fit the payload.
 *
 * A frame's version is the protocol version that defined its message and
 * that message's layout: 1 for HELLO to BYE, 2 for CHALLENGE, AUTH and
 * ERROR, 3 for DAEMON_CHALLENGE and DAEMON_PROOF, 4 for the node daemons'
 * NODE_* messages (node_wire.h), 5 for VERSION to NODE_LOOK_STACKS, 6 for
 * CRASH, EXIT and NCCL_ERROR, 7 for TIMING and NODE_KERNEL_LOG. Encoders write it, the header decoder insists on it, so a peer of
 * version 1 reads every frame it knows and refuses the others by their
 * version, and an agent that is not asked for a token sends exactly what a
 * version-1 agent sends.
 *
 * A version may also extend a message of an older one where the payload
 * says so itself (a flag the older decoder refuses): such a frame keeps
 * its message's version, and is sent only to a peer that said the newer
 * one (WELCOME). Version 7 adds rank states 4-6 to NODE_RANKS, version 8
 * Python frames to NODE_LOOK_STACKS's classes (FR_NODE_LOOK_PYTHON).
 *
 * Errors are negative errno values:
 *   -EAGAIN           fewer bytes than a header (read more)
 *   -EPROTO           bad magic, non-zero flags, or a malformed payload
 *   -EPROTONOSUPPORT  a version this build does not speak
 *   -EMSGSIZE         length over FR_WIRE_MAX_PAYLOAD, or an encode buffer too small
 *   -EBADMSG          a message type not in the table, or not of the frame's version
 *   -ENOMEM           allocation failed while decoding
 */
#ifndef FR_WIRE_H
#define FR_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "member_runs.h"

#define FR_WIRE_MAGIC 0x43455246u
/* The newest protocol version this build speaks, and the oldest it reads. */
#define FR_WIRE_VERSION 8
#define FR_WIRE_VERSION_MIN 1
#define FR_WIRE_HEADER_SIZE 16
/* Largest payload of one frame; dumps travel as several DUMP_DATA frames. */
#define FR_WIRE_MAX_PAYLOAD (1u << 20)
/* Bytes of dump carried by one DUMP_DATA frame at most. */
#define FR_WIRE_DUMP_CHUNK (256u << 10)

/* String limits (bytes, without the terminator the structs add). */
#define FR_JOB_MAX 64
#define FR_HOST_MAX 255
#define FR_COMM_ID_MAX 63
#define FR_COMM_DESC_MAX 63
#define FR_DTYPE_MAX 23
#define FR_INCIDENT_MAX 63
#define FR_REASON_MAX 127
#define FR_LIBVER_MAX 63
/* Largest HELLO payload: every string at its limit. */
#define FR_WIRE_HELLO_MAX_PAYLOAD \
	(2 + FR_JOB_MAX + 4 + 4 + 4 + 2 + FR_HOST_MAX + 4 + 8 + 2 + FR_LIBVER_MAX)

/*
 * X(TYPE, value, lower-case name) -- the one table of message types. The
 * version that defined each is fr_wire_msg_version()'s.
 */
#define FR_WIRE_MESSAGES(X)                 \
	X(HELLO, 1, hello)                  \
	X(COMM, 2, comm)                    \
	X(PROGRESS, 3, progress)            \
	X(HEARTBEAT, 4, heartbeat)          \
	X(DUMP_REQUEST, 5, dump_request)    \
	X(DUMP_DATA, 6, dump_data)          \
	X(BYE, 7, bye)                      \
	X(CHALLENGE, 8, challenge)          \
	X(AUTH, 9, auth)                    \
	X(ERROR, 10, error)                 \
	X(DAEMON_CHALLENGE, 11, daemon_challenge) \
	X(DAEMON_PROOF, 12, daemon_proof)   \
	X(NODE_HELLO, 13, node_hello)       \
	X(NODE_RANKS, 14, node_ranks)       \
	X(NODE_COMMS, 15, node_comms)       \
	X(NODE_PROGRESS, 16, node_progress) \
	X(NODE_DUMP_REQUEST, 17, node_dump_request) \
	X(NODE_SUMMARY, 18, node_summary)   \
	X(NODE_DUMP_DONE, 19, node_dump_done) \
	X(NODE_FETCH, 20, node_fetch)       \
	X(VERSION, 21, version)             \
	X(WELCOME, 22, welcome)             \
	X(COMM_RUNS, 23, comm_runs)         \
	X(NODE_LOOK_REQUEST, 24, node_look_request) \
	X(NODE_LOOK_STACKS, 25, node_look_stacks) \
	X(CRASH, 26, crash)                 \
	X(EXIT, 27, exit)                   \
	X(NCCL_ERROR, 28, nccl_error)       \
	X(TIMING, 29, timing)       \
	X(NODE_KERNEL_LOG, 30, node_kernel_log)

enum fr_msg_type {
#define FR_MSG_ENUM(T, v, n) FR_MSG_##T = v,
	FR_WIRE_MESSAGES(FR_MSG_ENUM)
#undef FR_MSG_ENUM
};

/*
 * True for a name that may become a directory name: a job id or an
 * incident id. 1 to FR_JOB_MAX characters from [A-Za-z0-9._-], not starting
 * with '.'. Both ends check every id they receive with it.
 */
bool fr_wire_valid_name(const char *s);

/* A character fr_wire_valid_name() allows. */
static inline bool fr_wire_name_char(char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
	       ch == '.' || ch == '_' || ch == '-';
}

/* "hello", "comm", ...; NULL for a type not in the table. */
const char *fr_msg_name(unsigned type);

/* The protocol version whose frames carry `type`; 0 for a type not in the table. */
unsigned fr_wire_msg_version(unsigned type);

struct fr_wire_header {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t length;
	uint32_t flags;
};

/*
 * Checks and decodes a header from the first bytes of `buf`. Returns 0 when
 * the header is valid (magic, version, known type, flags 0, length within
 * limit), else one of the errors above. A frame is complete once
 * len >= FR_WIRE_HEADER_SIZE + h->length.
 */
int fr_wire_header_decode(const uint8_t *buf, size_t len, struct fr_wire_header *h);

/* Agent -> daemon, first frame on a connection: who this rank is. */
struct fr_msg_hello {
	char job[FR_JOB_MAX + 1];
	uint32_t rank;
	uint32_t world_size;
	uint32_t pid;
	char host[FR_HOST_MAX + 1];
	uint32_t ring_capacity;
	uint64_t start_ns;              /* agent start, CLOCK_REALTIME */
	char comm_lib[FR_LIBVER_MAX + 1]; /* e.g. "Open MPI v4.1.4" */
};

/*
 * A member whose global rank this rank does not know. A rank made an NCCL
 * communicator from an id, or by a split, knows only its own entry: the
 * daemon and fr-analyze assemble the full list from every member's report.
 */
#define FR_RANK_UNKNOWN UINT32_MAX

/*
 * Agent -> daemon: a communicator this rank belongs to. Sent once per
 * communicator (again after a reconnect). `members` lists global ranks in
 * communicator-rank order; decode allocates it (free with
 * fr_wire_comm_free()).
 */
struct fr_msg_comm {
	char id[FR_COMM_ID_MAX + 1];
	char desc[FR_COMM_DESC_MAX + 1]; /* "MPI_COMM_WORLD", "split of world", ... */
	uint32_t rank;                   /* this rank's rank in the communicator */
	uint32_t size;                   /* number of members */
	uint32_t *members;
};

/* Progress of one communicator: collective sequence numbers. */
struct fr_wire_comm_progress {
	char comm[FR_COMM_ID_MAX + 1];
	uint64_t last_entered;   /* highest collective seq entered */
	uint64_t last_completed; /* highest collective seq completed */
};

/* Flags of an in-flight operation. */
#define FR_WIRE_INFLIGHT_NONBLOCKING 0x1u /* posted by a non-blocking call */
#define FR_WIRE_INFLIGHT_WAITED 0x2u      /* ... and the rank now blocks in a Wait on it */

/*
 * One operation in flight on this rank. A non-blocking operation the rank
 * is not waiting on does not block it: it is reported, but no timeout
 * applies to it. age_ms counts from entry for blocking operations and from
 * the start of the wait for waited non-blocking ones.
 */
struct fr_wire_inflight {
	char comm[FR_COMM_ID_MAX + 1];
	uint8_t type;   /* enum fr_op_type */
	uint8_t is_p2p;
	uint8_t flags;  /* FR_WIRE_INFLIGHT_* */
	int32_t peer;   /* global rank of the peer (p2p) or of the root; -1 if none or unknown */
	int32_t peer_in_comm; /* its communicator rank; -1 if none */
	uint64_t seq;   /* collective seq, or p2p seq for p2p */
	uint64_t count;
	uint64_t bytes;
	char dtype[FR_DTYPE_MAX + 1];
	uint64_t age_ms; /* see above; measured when the frame was sent */
};

/*
 * Agent -> daemon: communicators whose progress changed since the last frame,
 * and the full list of operations in flight now. Decode allocates both arrays
 * (free with fr_wire_progress_free()).
 */
struct fr_msg_progress {
	uint32_t ncomms;
	struct fr_wire_comm_progress *comms;
	uint32_t ninflight;
	struct fr_wire_inflight *inflight;
};

/* Agent -> daemon, every second: still alive. */
struct fr_msg_heartbeat {
	uint64_t now_ns; /* agent's CLOCK_REALTIME */
};

/*
 * The incident ids of live looks start with this (protocol/PROTOCOL.md,
 * "Live looks"): the daemon's debug server asks for a dump to show a rank's
 * stacks or ring now, the agent uploads it as for an incident and keeps no
 * local copy. The daemon never gives an incident such an id.
 */
#define FR_WIRE_LIVE_PREFIX "live-"

/*
 * What a live look asks the agent to put in its dump, said by the rest of
 * its id (PROTOCOL.md, "Live looks"), so that a look costs the job and the
 * daemon only what it shows:
 *
 *   live-stacks-<n>     every thread's stack; no entries, no communicators
 *   live-trace<N>-<n>   the newest N ring entries and the communicators; no
 *                       stack, so no signal to the application's threads
 *   live-<other>        the whole dump
 *
 * N is 1 to FR_WIRE_LIVE_TRACE_MAX without leading zeros, <n> one or more
 * decimal digits that tell looks apart, and nothing follows it. Any other
 * id with the prefix asks for the whole dump, which is also what an agent
 * that predates scopes sends for every live look: it holds everything any
 * scope asks for, so the daemon accepts it whatever it asked.
 */
enum fr_wire_live_scope {
	FR_WIRE_LIVE_NONE,      /* not a live look's id */
	FR_WIRE_LIVE_WHOLE,
	FR_WIRE_LIVE_STACKS,
	FR_WIRE_LIVE_TRACE,
};
#define FR_WIRE_LIVE_TRACE_MAX 100000u

/* The scope of incident id `id`; *last is N for FR_WIRE_LIVE_TRACE, else 0. */
enum fr_wire_live_scope fr_wire_live_scope(const char *id, uint32_t *last);

/*
 * Writes the id of live look `n` of `scope` (FR_WIRE_LIVE_TRACE: of the
 * newest `last` entries) into `out`. Returns 0, -EINVAL for
 * FR_WIRE_LIVE_NONE or a `last` out of bounds, -EMSGSIZE when `cap` is too
 * small.
 */
int fr_wire_live_id(char *out, size_t cap, enum fr_wire_live_scope scope, uint32_t last,
		    uint64_t n);

/* Daemon -> agent: write a dump now and upload it for this incident. */
struct fr_msg_dump_request {
	char incident[FR_INCIDENT_MAX + 1];
	char reason[FR_REASON_MAX + 1];
};

/*
 * Agent -> daemon: a piece of a dump. Pieces of one dump are sent in order;
 * the dump is complete when offset + len == total. `data` points into the
 * decoded buffer (no copy; valid as long as that buffer is).
 */
struct fr_msg_dump_data {
	char incident[FR_INCIDENT_MAX + 1];
	uint64_t offset;
	uint64_t total;
	uint32_t len;
	const uint8_t *data;
};

/* Agent -> daemon: the rank is finalising; its disconnect is not a fault. */
struct fr_msg_bye {
	uint32_t reserved;
};

/*
 * Daemon -> agent, version 2: the first frame of a daemon that has a token,
 * sent as soon as it accepts the connection. A new nonce for every
 * connection, from the kernel's random source.
 */
#define FR_WIRE_NONCE_SIZE 32
struct fr_msg_challenge {
	uint8_t nonce[FR_WIRE_NONCE_SIZE];
};

/*
 * Agent -> daemon, version 2: the answer to a CHALLENGE, sent just before
 * HELLO; `proof` is fr_wire_auth_proof() (auth.h) of that HELLO.
 */
#define FR_WIRE_PROOF_SIZE 32
struct fr_msg_auth {
	uint8_t proof[FR_WIRE_PROOF_SIZE];
};

/*
 * Agent -> daemon, version 3: the agent's own nonce, sent just before AUTH,
 * asking the daemon to prove that it holds the token too (DAEMON_PROOF).
 * A daemon of version 2 refuses the frame (ERROR 4), and an agent with a
 * token refuses such a daemon.
 */
struct fr_msg_daemon_challenge {
	uint8_t nonce[FR_WIRE_NONCE_SIZE];
};

/*
 * Daemon -> agent, version 3: the answer to a DAEMON_CHALLENGE, sent once
 * the HELLO it follows is proven, before any other frame:
 * fr_wire_daemon_proof() (auth.h) of that HELLO.
 */
struct fr_msg_daemon_proof {
	uint8_t proof[FR_WIRE_PROOF_SIZE];
};

/* Why the daemon is closing the connection (ERROR `code`). */
enum fr_wire_error_code {
	FR_WIRE_ERR_AUTH_REQUIRED = 1, /* the daemon has a token; no AUTH came */
	FR_WIRE_ERR_AUTH_FAILED = 2,   /* the proof is wrong: another token, or a replay */
	FR_WIRE_ERR_RANK_HELD = 3,     /* another live process holds this job's rank */
	FR_WIRE_ERR_PROTOCOL = 4,      /* a frame the daemon refused */
};

/*
 * Daemon -> agent, version 2: the daemon refuses the connection and closes
 * it. Sent only on connections it challenged (an agent of version 1 could
 * not read it). `code` is never 0; codes this build does not name are
 * accepted, as refusals for a reason not known here.
 */
struct fr_msg_error {
	uint16_t code;                   /* enum fr_wire_error_code */
	char message[FR_REASON_MAX + 1]; /* for people */
};

/*
 * Agent -> daemon, version 5: the newest protocol version the agent speaks
 * (5 or more), sent right after HELLO (after DAEMON_PROOF when the daemon
 * proved the token). A daemon of version 5 answers WELCOME; an older one
 * refuses the frame and closes the connection (after ERROR 4 when it
 * challenged it), and the agent then sends that daemon only what version 4
 * has (protocol/PROTOCOL.md, "Versions in use").
 */
struct fr_msg_version {
	uint16_t version;
};

/* Daemon -> agent, version 5: the answer to VERSION, the newest version the daemon speaks. */
struct fr_msg_welcome {
	uint16_t version;
};

/*
 * Agent -> daemon, version 5: COMM with the known members as runs
 * (member_runs.h), sent instead of COMM to a daemon that answered WELCOME
 * whenever it is the shorter frame: world is one run of 12 bytes where
 * COMM takes 4 bytes a member, 256 KiB at 65,536 ranks, from every rank.
 * Members in no run are not known (FR_RANK_UNKNOWN in COMM). Decode
 * allocates `runs` (fr_wire_comm_runs_free()) and refuses runs that
 * fr_node_maps_check() refuses; fr_wire_comm_runs_why() says why.
 */
struct fr_msg_comm_runs {
	char id[FR_COMM_ID_MAX + 1];
	char desc[FR_COMM_DESC_MAX + 1];
	uint32_t rank;                   /* this rank's rank in the communicator, below size */
	uint32_t size;                   /* number of members */
	uint32_t nruns;
	struct fr_node_map *runs;
};

/*
 * Agent -> daemon, version 6: the rank is dying of a fatal signal. Sent
 * once, from the agent's signal handler (agent/crash.c), and only to a
 * daemon whose WELCOME said 6 or more. Fixed-size, so that the handler
 * fills and encodes it without allocating; `frames` is the crashing
 * thread's stack, innermost first, names "" where the agent had none.
 */
#define FR_WIRE_CRASH_FRAMES_MAX 64
#define FR_WIRE_SYMBOL_MAX 127
struct fr_wire_frame_sym {
	uint64_t ip;
	uint64_t offset;                 /* from the start of `name` */
	char name[FR_WIRE_SYMBOL_MAX + 1];
};

struct fr_msg_crash {
	uint32_t signo;                  /* 1 to 64 */
	int32_t code;                    /* si_code */
	uint64_t fault_addr;             /* si_addr for SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP */
	uint64_t time_ns;                /* CLOCK_REALTIME of the signal */
	uint64_t ring_head;              /* ring records taken so far (the next record id) */
	uint32_t tid;                    /* the crashing thread */
	uint16_t nframes;                /* at most FR_WIRE_CRASH_FRAMES_MAX */
	struct fr_wire_frame_sym frames[FR_WIRE_CRASH_FRAMES_MAX];
};

/*
 * Agent -> daemon, version 6: the process is ending without having
 * finalised (exit(), _exit() or a return from main without MPI_Finalize),
 * or with operations in flight. Sent instead of BYE, and only to a daemon
 * whose WELCOME said 6 or more; a rank that finalised says BYE as ever.
 * The daemon takes one with code 0 and nothing in flight for a goodbye,
 * kept in case its peers turn out to wait for it; any other opens an
 * incident at once.
 */
#define FR_WIRE_EXIT_CODE_KNOWN 0x1u  /* `code` is the exit status it asked for */
#define FR_WIRE_EXIT_UNDERSCORE 0x2u  /* by _exit() or _Exit(): no atexit handlers ran */
#define FR_WIRE_EXIT_FINALISED 0x4u   /* every communicator had been destroyed (NCCL) */
#define FR_WIRE_EXIT_FLAGS 0x7u
struct fr_msg_exit {
	int32_t code;                    /* the status passed to exit(), 0 when not known */
	uint32_t flags;                  /* FR_WIRE_EXIT_* */
	uint32_t inflight;               /* operations in flight that block it */
	uint64_t time_ns;                /* CLOCK_REALTIME of the exit */
	uint64_t ring_head;              /* ring records taken so far */
};

/*
 * Agent -> daemon, version 6: ncclCommGetAsyncError, which the agent's
 * link thread asks of every live communicator at most every 100 ms, said
 * an error (not ncclSuccess, not ncclInProgress). Sent once per
 * communicator, only to a daemon whose WELCOME said 6 or more.
 */
#define FR_WIRE_NCCL_MESSAGE_MAX 255
struct fr_msg_nccl_error {
	char comm[FR_COMM_ID_MAX + 1];   /* the communicator's id, as its COMM said */
	uint32_t result;                 /* the ncclResult_t, never 0 */
	uint64_t time_ns;                /* CLOCK_REALTIME when the agent saw it */
	char message[FR_WIRE_NCCL_MESSAGE_MAX + 1]; /* ncclGetLastError's text, may be "" */
};

/*
 * Agent -> daemon, version 7: when the rank entered, and how long it
 * waited in, some of the collectives it completed since the last TIMING
 * (protocol/PROTOCOL.md, TIMING), from which the daemon tells a straggler
 * while the job runs. Every rank samples the same sequence numbers, those
 * that are multiples of FR_WIRE_TIMING_EVERY, so that the daemon sees every
 * member of a sampled collective and no other.
 */
#define FR_WIRE_TIMING_EVERY 8
/* Samples one TIMING carries at most (the agent sends the rest next time). */
#define FR_WIRE_TIMING_MAX 256
#define FR_WIRE_TIMING_GPU 0x1u /* enqueued on a GPU stream: its wait is the host's, not the device's */
#define FR_WIRE_TIMING_FLAGS FR_WIRE_TIMING_GPU
struct fr_wire_timing {
	char comm[FR_COMM_ID_MAX + 1];
	uint64_t seq;           /* its collective sequence number on `comm` */
	uint8_t type;           /* enum fr_op_type */
	uint8_t flags;          /* FR_WIRE_TIMING_* */
	uint64_t entered_ns;    /* CLOCK_REALTIME of the agent's host when the rank entered it */
	uint64_t wait_ns;       /* completion less entry, on the agent's clock */
};

struct fr_msg_timing {
	uint32_t n;
	struct fr_wire_timing *samples; /* decode allocates (fr_wire_timing_free()) */
};

/* The node daemons' messages, defined in node_wire.h. */
struct fr_msg_node_hello;
struct fr_msg_node_ranks;
struct fr_msg_node_comms;
struct fr_msg_node_progress;
struct fr_msg_node_dump_request;
struct fr_msg_node_summary;
struct fr_msg_node_dump_done;
struct fr_msg_node_fetch;
struct fr_msg_node_look_request;
struct fr_msg_node_look_stacks;
struct fr_msg_node_kernel_log;

/*
 * For each message M: size of the whole frame, encode the whole frame into
 * buf (returns bytes written or -EMSGSIZE when cap is too small, -EINVAL when
 * a field is over its limit), and decode a payload.
 */
#define FR_WIRE_PROTOS(T, v, n)                                                        \
	size_t fr_wire_##n##_size(const struct fr_msg_##n *m);                         \
	int fr_wire_##n##_encode(const struct fr_msg_##n *m, uint8_t *buf, size_t cap); \
	int fr_wire_##n##_decode(const uint8_t *payload, size_t len, struct fr_msg_##n *m);
FR_WIRE_MESSAGES(FR_WIRE_PROTOS)
#undef FR_WIRE_PROTOS

void fr_wire_comm_free(struct fr_msg_comm *m);
void fr_wire_comm_runs_free(struct fr_msg_comm_runs *m);

/* Why fr_wire_comm_runs_decode() refused `payload`, for a log line. */
const char *fr_wire_comm_runs_why(const uint8_t *payload, size_t len);
void fr_wire_progress_free(struct fr_msg_progress *m);
void fr_wire_timing_free(struct fr_msg_timing *m);

#endif
