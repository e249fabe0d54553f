#include "ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/*
 * Generation protocol of a slot holding record id R. Each record owns the
 * generations 8R+1 .. 8R+7:
 *   8R + 1        the writer that pushed R is storing it
 *   8R + 2        stable, as pushed (entered)
 *   8R + 3, + 5   an update (waited or started, completed) is being written
 *   8R + 4, + 6   stable after one, two updates
 * Every change moves the generation forward, so a reader that sees the
 * same even generation before and after copying the fields has a record
 * no one touched in between. Updates claim the slot with a compare-and-swap
 * from the exact stable value they read and publish with another, so an
 * update loses (and reports it) when the ring wrapped onto the slot.
 *
 * Fields are stored and loaded with relaxed atomics so that concurrent
 * copies are well defined; the fences order them against the generation.
 *
 * One window remains: a thread descheduled in the middle of an update
 * while the whole ring wraps onto its slot can still write two fields of
 * the newer record. Pushes wait for an update in progress to finish before
 * taking a slot, which leaves only the few instructions between that check
 * and the push's own store.
 */

/* The ring does not depend on protocol/op.h; these mirror its states. */
#define FR_STATE_ENTERED_ 0
#define FR_STATE_COMPLETED_ 1

#define GEN_PUSHING(id) (8 * (id) + 1)
#define GEN_PUSHED(id) (8 * (id) + 2)
#define GEN_LAST(id) (8 * (id) + 6)

#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

static void pack(const struct fr_rec *rec, uint64_t w[7])
{
	w[0] = rec->record_id;
	w[1] = rec->seq;
	w[2] = rec->count;
	w[3] = rec->t_entered;
	/* The completion time, or while entered when it began to block. */
	w[4] = rec->state == FR_STATE_COMPLETED_ ? rec->t_completed : rec->t_started;
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
	rec->t_completed = 0;
	rec->t_started = 0;
	rec->comm = (uint16_t)w[5];
	rec->type = (uint8_t)(w[5] >> 16);
	rec->state = (uint8_t)(w[5] >> 24);
	rec->flags = (uint8_t)(w[5] >> 32);
	rec->dtype = (uint8_t)(w[5] >> 40);
	rec->redop = (uint8_t)(w[5] >> 48);
	rec->peer = (int32_t)(uint32_t)w[6];
	rec->dtype_size = (uint32_t)(w[6] >> 32);
	if (rec->state == FR_STATE_COMPLETED_)
		rec->t_completed = w[4];
	else if (rec->flags & (FR_REC_WAITED | FR_REC_STARTED))
		rec->t_started = w[4];
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
	/* An update of the record we replace may be in progress (odd): it
	 * takes a few nanoseconds unless its thread was descheduled. */
	while (__builtin_expect(__atomic_load_n(&s->gen, __ATOMIC_ACQUIRE) & 1, 0))
		;
	STORE(&s->gen, GEN_PUSHING(id));
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (int i = 0; i < 7; i++)
		STORE(&s->w[i], w[i]);
	__atomic_store_n(&s->gen, GEN_PUSHED(id), __ATOMIC_RELEASE);
	return id;
}

/*
 * Applies one update to record `id`: `flag` set in the flags (0 for none),
 * the state moved to `state`, and word 4 set to `t`, provided the record is
 * still there, entered, and `flag` not yet set.
 */
static bool update(struct fr_ring *r, uint64_t id, uint8_t flag, uint8_t state, uint64_t t)
{
	struct fr_ring_slot *s = &r->slots[id & r->mask];
	uint64_t g = __atomic_load_n(&s->gen, __ATOMIC_ACQUIRE);
	uint64_t w5;

	for (;;) {
		if (g < GEN_PUSHED(id) || g >= GEN_LAST(id) || (g & 1))
			return false; /* not pushed yet, overwritten, or no room */
		if (__atomic_compare_exchange_n(&s->gen, &g, g + 1, false, __ATOMIC_ACQUIRE,
						__ATOMIC_ACQUIRE))
			break;
	}
	__atomic_thread_fence(__ATOMIC_RELEASE);
	w5 = LOAD(&s->w[5]);
	if (((w5 >> 24) & 0xff) != FR_STATE_ENTERED_ || ((w5 >> 32) & flag)) {
		__atomic_store_n(&s->gen, g, __ATOMIC_RELEASE); /* unchanged: undo */
		return false;
	}
	w5 = (w5 & ~(UINT64_C(0xff) << 24)) | (uint64_t)state << 24 | (uint64_t)flag << 32;
	STORE(&s->w[4], t);
	STORE(&s->w[5], w5);
	g++;
	return __atomic_compare_exchange_n(&s->gen, &g, g + 1, false, __ATOMIC_RELEASE,
					   __ATOMIC_RELAXED);
}

bool fr_ring_complete(struct fr_ring *r, uint64_t id, uint64_t t)
{
	return update(r, id, 0, FR_STATE_COMPLETED_, t);
}

bool fr_ring_mark_waited(struct fr_ring *r, uint64_t id, uint64_t t)
{
	return update(r, id, FR_REC_WAITED, FR_STATE_ENTERED_, t);
}

bool fr_ring_mark_started(struct fr_ring *r, uint64_t id, uint64_t t)
{
	return update(r, id, FR_REC_STARTED, FR_STATE_ENTERED_, t);
}

bool fr_ring_read(const struct fr_ring *r, uint64_t id, struct fr_rec *out)
{
	const struct fr_ring_slot *s = &r->slots[id & r->mask];
	uint64_t w[7];

	/* A writer holds a slot for a few nanoseconds; retry a few times. */
	for (int attempt = 0; attempt < 64; attempt++) {
		uint64_t g1 = __atomic_load_n(&s->gen, __ATOMIC_ACQUIRE);

		if (g1 > GEN_LAST(id) + 1)
			return false; /* overwritten by a newer record */
		if (g1 < GEN_PUSHING(id))
			return false; /* not written yet */
		if (g1 & 1)
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
