/*
 * Ids' places in sorted order (ids.h): each distinct id is found in a hash
 * table, and only the distinct ids are sorted.
 */
#include "ids.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../protocol/hash.h"

/* A distinct id: its number (in order of first use), its hash. */
struct slot {
	uint32_t first; /* UINT32_MAX: empty */
	uint64_t hash;
};

/* A distinct id and its number, to be sorted. */
struct uniq {
	const char *s;
	uint32_t first;
};

static int cmp_uniq(const void *a, const void *b)
{
	return strcmp(((const struct uniq *)a)->s, ((const struct uniq *)b)->s);
}

static const char *id_of(const void *recs, size_t size, size_t id_at, size_t i)
{
	const char *id;

	memcpy(&id, (const char *)recs + i * size + id_at, sizeof(id));
	return id;
}

static void set_rank(void *recs, size_t size, size_t rank_at, size_t i, uint32_t rank)
{
	memcpy((char *)recs + i * size + rank_at, &rank, sizeof(rank));
}

static uint32_t rank_of(const void *recs, size_t size, size_t rank_at, size_t i)
{
	uint32_t rank;

	memcpy(&rank, (const char *)recs + i * size + rank_at, sizeof(rank));
	return rank;
}

int fr_ids_rank(void *recs, size_t n, size_t size, size_t id_at, size_t rank_at)
{
	size_t nslots = 16, mask, nuniq = 0;
	struct slot *slots;
	struct uniq *uniq;
	uint32_t *place;
	int rc = 0;

	if (n >= UINT32_MAX)
		return -ENOMEM;
	while (nslots < 2 * n)
		nslots *= 2;
	mask = nslots - 1;
	slots = malloc(nslots * sizeof(*slots));
	uniq = malloc((n ? n : 1) * sizeof(*uniq));
	/* A distinct id's place in order, by its number. */
	place = malloc((n ? n : 1) * sizeof(*place));
	if (!slots || !uniq || !place) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (size_t i = 0; i < nslots; i++)
		slots[i].first = UINT32_MAX;
	for (size_t i = 0; i < n; i++) {
		const char *id = id_of(recs, size, id_at, i);
		uint64_t h = fr_fnv1a(FR_FNV_INIT, id, strlen(id));
		size_t at = (size_t)h & mask;

		/* Linear probing; the table is never more than half full. */
		while (slots[at].first != UINT32_MAX &&
		       (slots[at].hash != h || strcmp(uniq[slots[at].first].s, id) != 0))
			at = (at + 1) & mask;
		if (slots[at].first == UINT32_MAX) {
			slots[at].first = (uint32_t)nuniq;
			slots[at].hash = h;
			uniq[nuniq] = (struct uniq){ id, (uint32_t)nuniq };
			nuniq++;
		}
		/* For now: the number of the distinct id. */
		set_rank(recs, size, rank_at, i, slots[at].first);
	}
	qsort(uniq, nuniq, sizeof(*uniq), cmp_uniq);
	for (size_t k = 0; k < nuniq; k++)
		place[uniq[k].first] = (uint32_t)k;
	for (size_t i = 0; i < n; i++)
		set_rank(recs, size, rank_at, i, place[rank_of(recs, size, rank_at, i)]);
out_free:
	free(slots);
	free(uniq);
	free(place);
	return rc;
}
