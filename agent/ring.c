#include "ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/*
 * Generation protocol of a slot holding record id R:
 *   2R + 1  a writer is storing or updating the record
 *   2R + 2  the record is stable
 * A generation only grows, except that completion moves a stable slot back
 * to odd for the duration of the update. Fields are stored and loaded with
 * relaxed atomics so that concurrent copies are well defined; the fences
 * order them against the generation word.
 */

#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

static void pack(const struct fr_rec *rec, uint64_t w[7])
{
	w[0] = rec->record_id;
	w[1] = rec->seq;
	w[2] = rec->count;
	w[3] = rec->t_entered;
	w[4] = rec->t_completed;
	w[5] = (uint64_t)rec->comm | (uint64_t)rec->type << 16 | (uint64_t)rec->state << 24 |
	       (uint64_t)rec->flags << 32 | (uint64_t)rec->dtype << 40 | (uint64_t)rec->redop << 48;
	w[6] = (uint64_t)(uint32_t)rec->peer | (uint64_t)rec->dtype_size << 32;
}

static void unpack(const uint64_t w[7], struct fr_rec *rec)
{
	rec->record_id = w[0];
	rec->seq = w[1];
	rec->count = w[2];
	rec->t_entered = w[3];
	rec->t_completed = w[4];
	rec->comm = (uint16_t)w[5];
	rec->type = (uint8_t)(w[5] >> 16);
	rec->state = (uint8_t)(w[5] >> 24);
	rec->flags = (uint8_t)(w[5] >> 32);
	rec->dtype = (uint8_t)(w[5] >> 40);
	rec->redop = (uint8_t)(w[5] >> 48);
	rec->peer = (int32_t)(uint32_t)w[6];
	rec->dtype_size = (uint32_t)(w[6] >> 32);
}

int fr_ring_init(struct fr_ring *r, uint64_t capacity)
{
	uint64_t cap = 16;

	while (cap < capacity && cap < (UINT64_C(1) << 40))
		cap <<= 1;
	memset(r, 0, sizeof(*r));
	r->slots = aligned_alloc(64, cap * sizeof(*r->slots));
	if (!r->slots)
		return -ENOMEM;
	memset(r->slots, 0, cap * sizeof(*r->slots));
	r->capacity = cap;
	r->mask = cap - 1;
	return 0;
}

void fr_ring_destroy(struct fr_ring *r)
{
	free(r->slots);
	memset(r, 0, sizeof(*r));
}

uint64_t fr_ring_head(const struct fr_ring *r)
{
	return __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
}

uint64_t fr_ring_push(struct fr_ring *r, struct fr_rec *rec)
{
	uint64_t id = __atomic_fetch_add(&r->head, 1, __ATOMIC_RELAXED);
	struct fr_ring_slot *s = &r->slots[id & r->mask];
	uint64_t w[7];

	rec->record_id = id;
	pack(rec, w);
	STORE(&s->gen, 2 * id + 1);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (int i = 0; i < 7; i++)
		STORE(&s->w[i], w[i]);
	__atomic_store_n(&s->gen, 2 * id + 2, __ATOMIC_RELEASE);
	return id;
}

bool fr_ring_complete(struct fr_ring *r, uint64_t id, uint64_t t)
{
	struct fr_ring_slot *s = &r->slots[id & r->mask];
	uint64_t stable = 2 * id + 2;
	uint64_t w5;

	if (!__atomic_compare_exchange_n(&s->gen, &stable, 2 * id + 1, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return false;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	w5 = LOAD(&s->w[5]);
	w5 = (w5 & ~(UINT64_C(0xff) << 24)) | (uint64_t)1 << 24; /* FR_STATE_COMPLETED */
	STORE(&s->w[4], t);
	STORE(&s->w[5], w5);
	__atomic_store_n(&s->gen, 2 * id + 2, __ATOMIC_RELEASE);
	return true;
}

bool fr_ring_read(const struct fr_ring *r, uint64_t id, struct fr_rec *out)
{
	const struct fr_ring_slot *s = &r->slots[id & r->mask];
	uint64_t want = 2 * id + 2;
	uint64_t w[7];

	/* A writer holds a slot for a few nanoseconds; retry a few times. */
	for (int attempt = 0; attempt < 64; attempt++) {
		uint64_t g1 = __atomic_load_n(&s->gen, __ATOMIC_ACQUIRE);

		if (g1 > want)
			return false; /* overwritten by a newer record */
		if (g1 < want - 1)
			return false; /* not written yet */
		if (g1 != want)
			continue;
		for (int i = 0; i < 7; i++)
			w[i] = LOAD(&s->w[i]);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (LOAD(&s->gen) == g1) {
			unpack(w, out);
			return true;
		}
	}
	return false;
}
