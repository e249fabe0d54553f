#include "handles.h"

#include <errno.h>
#include <stdlib.h>

int fr_handles_init(struct fr_handle_map *m, uint64_t capacity)
{
	m->slots = calloc(capacity, sizeof(*m->slots));
	if (!m->slots)
		return -ENOMEM;
	m->mask = capacity - 1;
	return 0;
}

void fr_handles_destroy(struct fr_handle_map *m)
{
	free(m->slots);
	m->slots = NULL;
	m->mask = 0;
}

static uint64_t hash(uintptr_t key)
{
	uint64_t h = (uint64_t)key * UINT64_C(0x9e3779b97f4a7c15);

	return h ^ (h >> 29);
}

/* Index of the slot holding `key`, claiming an empty one when `claim`;
 * -1 when absent (or the map is full). */
static int64_t find(const struct fr_handle_map *m, uintptr_t key, bool claim)
{
	uint64_t i = hash(key) & m->mask;

	if (!m->slots || key == 0)
		return -1;
	for (uint64_t probes = 0; probes <= m->mask; probes++, i = (i + 1) & m->mask) {
		struct fr_handle_slot *s = &m->slots[i];
		uintptr_t k = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);

		if (k == key)
			return (int64_t)i;
		if (k != 0)
			continue;
		if (!claim)
			return -1;
		if (__atomic_compare_exchange_n(&s->key, &k, key, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE) || k == key)
			return (int64_t)i;
	}
	return -1;
}

bool fr_handles_put(struct fr_handle_map *m, uintptr_t key, uint64_t value)
{
	int64_t i = find(m, key, true);

	if (i < 0)
		return false;
	__atomic_store_n(&m->slots[i].value, value, __ATOMIC_RELEASE);
	return true;
}

uint64_t fr_handles_get(const struct fr_handle_map *m, uintptr_t key)
{
	int64_t i = find(m, key, false);

	return i < 0 ? 0 : __atomic_load_n(&m->slots[i].value, __ATOMIC_ACQUIRE);
}

uint64_t fr_handles_take(struct fr_handle_map *m, uintptr_t key)
{
	int64_t i = find(m, key, false);

	return i < 0 ? 0 : __atomic_exchange_n(&m->slots[i].value, 0, __ATOMIC_ACQ_REL);
}

bool fr_handles_take_if(struct fr_handle_map *m, uintptr_t key, uint64_t expected)
{
	int64_t i = find(m, key, false);

	return i >= 0 && expected != 0 &&
	       __atomic_compare_exchange_n(&m->slots[i].value, &expected, 0, false,
					   __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}
