/*
 * The binary framing between agent and daemon (see protocol/PROTOCOL.md for
 * the byte-by-byte layout).
 *
 * Every frame is a 16-byte little-endian header followed by `length` bytes of
 * payload:
 *
 *   offset 0  u32 magic    0x43455246 ("FREC" on the wire)
 *   offset 4  u16 version  FR_WIRE_VERSION
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
 * Errors are negative errno values:
 *   -EAGAIN           fewer bytes than a header (read more)
 *   -EPROTO           bad magic, non-zero flags, or a malformed payload
 *   -EPROTONOSUPPORT  a version this build does not speak
 *   -EMSGSIZE         length over FR_WIRE_MAX_PAYLOAD, or an encode buffer too small
 *   -EBADMSG          a message type not in the table
 *   -ENOMEM           allocation failed while decoding
 */
#ifndef FR_WIRE_H
#define FR_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FR_WIRE_MAGIC 0x43455246u
#define FR_WIRE_VERSION 1
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

/* X(TYPE, value, lower-case name) -- the one table of message types. */
#define FR_WIRE_MESSAGES(X)                 \
	X(HELLO, 1, hello)                  \
	X(COMM, 2, comm)                    \
	X(PROGRESS, 3, progress)            \
	X(HEARTBEAT, 4, heartbeat)          \
	X(DUMP_REQUEST, 5, dump_request)    \
	X(DUMP_DATA, 6, dump_data)          \
	X(BYE, 7, bye)

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
void fr_wire_progress_free(struct fr_msg_progress *m);

#endif
