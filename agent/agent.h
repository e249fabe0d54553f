/*
 * The agent's core, shared by every hook family (hooks_mpi.c and
 * hooks_nccl.c): the process identity and settings, the communicator table, the
 * recording calls a hook makes around the real operation, and the life cycle
 * (start when a communication library initialises, stop at finalise, go
 * quiet in a forked child).
 *
 * A hook family only: registers its communicators (fr_comm_register),
 * describes its datatypes through the name tables it passes, and brackets
 * each operation with fr_op_enter()/fr_op_complete(). The ring, the link to
 * the daemon and the dumps know nothing about MPI.
 */
#ifndef FR_AGENT_H
#define FR_AGENT_H

#include <stdbool.h>
#include <stdint.h>

#include "../protocol/op.h"
#include "../protocol/wire.h"
#include "clock.h"
#include "ring.h"

/* Communicators per process; ring records index them with 16 bits. */
#define FR_MAX_COMMS 65535
/* Largest ring accepted from FLIGHTREC_BUFFER (64 MiB of records). */
#define FR_MAX_RING (1u << 20)

/* One communicator this process is a member of. Never freed while the
 * agent runs (dumps may name it after the library freed it). */
struct fr_comm_rec {
	uint16_t index;
	char id[FR_COMM_ID_MAX + 1];
	char desc[FR_COMM_DESC_MAX + 1];
	uint32_t rank;
	uint32_t size;
	uint32_t *members;        /* global ranks */
	uint64_t coll_entered;    /* last collective seq entered (atomic) */
	uint64_t coll_completed;  /* highest collective seq completed (atomic) */
	uint64_t *p2p_send;       /* per peer, p2p sends issued (atomic) */
	uint64_t *p2p_recv;       /* per peer, plus one for any-source (atomic) */
};

struct fr_settings {
	char addr[FR_HOST_MAX + 8];  /* FLIGHTREC_ADDR, "" when unset */
	char dump_dir[512];          /* FLIGHTREC_DUMP_DIR */
	uint64_t ring_capacity;      /* FLIGHTREC_BUFFER */
	double timeout_s;            /* FLIGHTREC_TIMEOUT */
	int stack_signal;            /* FLIGHTREC_STACK_SIGNAL */
};

struct fr_identity {
	char job[FR_JOB_MAX + 1];
	uint32_t rank;
	uint32_t world_size;
	char host[FR_HOST_MAX + 1];
	uint32_t pid;
	uint64_t start_ns;
	char comm_lib[FR_LIBVER_MAX + 1];
};

/*
 * Datatype and reduction names: each hook family stores small numbers in
 * ring records, from its own range (MPI from 0, NCCL from
 * FR_NAMES_NCCL_BASE), and registers their names once.
 */
#define FR_NAMES_MAX 256
#define FR_NAMES_NCCL_BASE 128

struct fr_agent {
	bool active;              /* hooks record only while true */
	struct fr_settings cfg;
	struct fr_identity id;
	struct fr_ring ring;
	struct fr_comm_rec *comms[FR_MAX_COMMS];
	uint32_t ncomms;          /* published with release ordering */
	const char *dtype_names[FR_NAMES_MAX];
	const char *redop_names[FR_NAMES_MAX];
};

extern struct fr_agent fr_agent;

static inline bool fr_is_active(void)
{
	return __atomic_load_n(&fr_agent.active, __ATOMIC_RELAXED);
}

/*
 * Starts recording once a library has initialised. `world_rank` and
 * `world_size` are what the library says (used when no environment variable
 * names them; -1 when it does not know). Starts the link thread.
 * Idempotent: a second library in the same process joins the recording.
 * Returns 0 or -errno; on failure the agent stays inactive and the
 * application runs untouched.
 */
int fr_agent_start(const char *comm_lib, int world_rank, int world_size);

/* Registers a hook family's names at `base` (before it records with them). */
void fr_agent_add_names(unsigned base, const char *const *dtypes, unsigned ndtypes,
			const char *const *redops, unsigned nredops);

/* Stops recording and closes the link (finalise). Bounded in time. */
void fr_agent_stop(void);

/* NCCL communicators learnt and not yet destroyed (hooks_nccl.c). */
uint32_t fr_nccl_live_comms(void);

struct fr_msg_nccl_error;
/*
 * Link thread, every tick: asks ncclCommGetAsyncError of each live NCCL
 * communicator not yet found failed; the first that says an error (not
 * ncclSuccess, not ncclInProgress) is written into *out with
 * ncclGetLastError's text and never asked again. Returns 1 then, else 0.
 * Never on the application's thread: the question may take NCCL's locks.
 */
int fr_nccl_poll_errors(struct fr_msg_nccl_error *out);

/* Global rank of communicator rank `peer` of `c`; -1 for none, out of
 * range or unknown to this rank. */
static inline int32_t fr_comm_global_rank(const struct fr_comm_rec *c, int32_t peer)
{
	if (peer < 0 || (uint32_t)peer >= c->size || c->members[peer] == FR_RANK_UNKNOWN)
		return -1;
	return (int32_t)c->members[peer];
}

/* Names of datatype and reduction numbers from ring records ("" if none). */
static inline const char *fr_dtype_name(unsigned i)
{
	return i < FR_NAMES_MAX && fr_agent.dtype_names[i] ? fr_agent.dtype_names[i] : "";
}

static inline const char *fr_redop_name(unsigned i)
{
	return i < FR_NAMES_MAX && fr_agent.redop_names[i] ? fr_agent.redop_names[i] : "";
}

/*
 * Registers a communicator; copies `members` (global ranks, `size` of
 * them). Returns the record, or NULL when the table is full or out of
 * memory. Not for the hot path.
 */
struct fr_comm_rec *fr_comm_register(const char *id, const char *desc, uint32_t rank,
				     uint32_t size, const uint32_t *members);

/*
 * Derives a child communicator's id from its parent's id, the seq of the
 * creating collective on the parent, a kind letter and a colour, so that
 * every member computes the same id without communicating. Long ids are
 * replaced by a hash of the same inputs.
 */
void fr_comm_derive_id(char out[FR_COMM_ID_MAX + 1], const char *parent, uint64_t seq,
		       char kind, long colour);

/* Ticket a hook keeps between entering and completing an operation. */
struct fr_ticket {
	uint64_t record;
	struct fr_comm_rec *comm;
	uint64_t seq;
	bool collective;
};

/*
 * Records that the calling rank enters an operation on `c`: assigns its seq
 * (next collective seq of the communicator, or next p2p seq towards `peer`;
 * `peer` -1 = any source) and pushes a ring record. Hot path.
 */
void fr_op_enter(struct fr_ticket *t, struct fr_comm_rec *c, enum fr_op_type type,
		 unsigned flags, int32_t peer, uint64_t count, uint8_t dtype,
		 uint32_t dtype_size, uint8_t redop);

/* Records completion of a ticket's operation. Hot path. */
void fr_op_complete(const struct fr_ticket *t);

/* Same, from a ring record id alone (non-blocking completions). */
void fr_op_complete_record(uint64_t record, uint16_t comm, uint64_t seq, bool collective);

#endif
