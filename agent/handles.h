/*
 * A fixed-size, lock-free map from a library's opaque handles (MPI_Comm,
 * MPI_Request, ncclComm_t: pointers or integers, never 0) to a 64-bit value
 * (never 0). Hooks look handles up on the hot path; inserting is also
 * lock-free so that threads may create requests concurrently.
 *
 * Keys are never removed, only their value cleared (a tombstone), because
 * libraries recycle handles: a recycled handle finds its old slot again.
 */
#ifndef FR_AGENT_HANDLES_H
#define FR_AGENT_HANDLES_H

#include <stdbool.h>
#include <stdint.h>

struct fr_handle_slot {
	uintptr_t key;
	uint64_t value;
};

struct fr_handle_map {
	uint64_t mask;
	struct fr_handle_slot *slots;
};

/* Allocates `capacity` slots (a power of two). Returns 0 or -ENOMEM. */
int fr_handles_init(struct fr_handle_map *m, uint64_t capacity);
void fr_handles_destroy(struct fr_handle_map *m);

/* Sets the value of `key`. Returns false when the map is full. */
bool fr_handles_put(struct fr_handle_map *m, uintptr_t key, uint64_t value);

/* The value of `key`, 0 when absent or cleared. */
uint64_t fr_handles_get(const struct fr_handle_map *m, uintptr_t key);

/* Returns the value of `key` and clears it atomically (0 when absent). */
uint64_t fr_handles_take(struct fr_handle_map *m, uintptr_t key);

/*
 * Clears `key` only if its value is still `expected`: a handle recycled by
 * another thread in between keeps its new value. Returns true if cleared.
 */
bool fr_handles_take_if(struct fr_handle_map *m, uintptr_t key, uint64_t expected);

#endif
