/*
 * The flight recorder: a fixed-size, lock-free, multi-writer ring of
 * operation records.
 *
 * Writers (the application's threads, inside hooked calls) claim a record
 * with one atomic increment and fill it; the operation's completion later
 * updates the same record in place. Readers (the agent's link thread, for
 * progress and dumps) copy records out without ever blocking writers: each
 * slot carries a generation number, odd while a writer is inside it, so a
 * reader detects and skips a record that changed under it (a seqlock).
 *
 * Each slot is one 64-byte cache line. Nothing here allocates after
 * fr_ring_init(), takes a lock or makes a system call.
 */
#ifndef FR_AGENT_RING_H
#define FR_AGENT_RING_H

#include <stdbool.h>
#include <stdint.h>

/* Flags of a record. */
#define FR_REC_P2P 0x1u
#define FR_REC_NONBLOCKING 0x2u
#define FR_REC_WAITED 0x4u  /* non-blocking, and a thread now blocks in a Wait on it */
#define FR_REC_GPU 0x8u     /* enqueued on a GPU stream (NCCL): completes on the device */
#define FR_REC_STARTED 0x10u /* on a GPU stream, and the device has reached it */
#define FR_REC_CAPTURED 0x20u /* enqueued during CUDA graph capture: runs at each replay */

/* What a hook knows about an operation when it enters it. */
struct fr_rec {
	uint64_t record_id; /* filled by the ring */
	uint64_t seq;
	uint64_t count;
	uint64_t t_entered;   /* fr_ticks() when entered */
	uint64_t t_completed; /* fr_ticks() when completed, 0 before */
	/* fr_ticks() when it began to block: a Wait on it began (waited) or
	 * the GPU reached it (started); else 0 */
	uint64_t t_started;
	uint16_t comm;      /* index in the agent's communicator table */
	uint8_t type;       /* enum fr_op_type */
	uint8_t state;      /* enum fr_op_state */
	uint8_t flags;      /* FR_REC_* */
	uint8_t dtype;      /* index in the hook family's datatype table */
	uint8_t redop;      /* index in the hook family's reduction table */
	int32_t peer;       /* communicator rank of the peer or root, -1 if none */
	uint32_t dtype_size;
};

/* One slot: a generation word and the record, packed in 7 words. */
struct fr_ring_slot {
	uint64_t gen;
	uint64_t w[7];
} __attribute__((aligned(64)));

struct fr_ring {
	uint64_t head;      /* next record id; atomic */
	uint64_t mask;      /* capacity - 1 */
	uint64_t capacity;  /* a power of two */
	struct fr_ring_slot *slots;
};

/*
 * Allocates a ring of at least `capacity` records (rounded up to a power of
 * two, at least 16). Returns 0 or -ENOMEM.
 */
int fr_ring_init(struct fr_ring *r, uint64_t capacity);
void fr_ring_destroy(struct fr_ring *r);

/*
 * Records an operation entering: claims the next record id, stores `rec`
 * (its record_id is set) and returns the id. Lock-free, wait-free.
 */
uint64_t fr_ring_push(struct fr_ring *r, struct fr_rec *rec);

/*
 * Marks record `id` completed at tick `t`. Returns false when the record
 * was already overwritten by newer ones (ring wrap) or is not entered.
 */
bool fr_ring_complete(struct fr_ring *r, uint64_t id, uint64_t t);

/*
 * Marks the entered non-blocking record `id` as waited on since tick `t`
 * (a thread entered a blocking Wait on it). Returns false when the record
 * was overwritten, is completed or is already marked.
 */
bool fr_ring_mark_waited(struct fr_ring *r, uint64_t id, uint64_t t);

/*
 * Marks the entered GPU record `id` as started at tick `t` (the device
 * reached it). Returns false as fr_ring_mark_waited does.
 */
bool fr_ring_mark_started(struct fr_ring *r, uint64_t id, uint64_t t);

/*
 * Copies record `id` into `out` if it is still in the ring and not being
 * written. Returns false otherwise.
 */
bool fr_ring_read(const struct fr_ring *r, uint64_t id, struct fr_rec *out);

/* Next record id to be written (records [head - capacity, head) may exist). */
uint64_t fr_ring_head(const struct fr_ring *r);

#endif
