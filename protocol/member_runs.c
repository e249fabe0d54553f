/*
 * Member lists as runs (member_runs.h).
 */
#include "member_runs.h"

#include "wire.h"

uint32_t fr_node_maps_from_members(const uint32_t *members, uint32_t size, struct fr_node_map *out)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < size; i++) {
		struct fr_node_map *last = n ? &out[n - 1] : NULL;

		if (members[i] == FR_RANK_UNKNOWN)
			continue;
		if (last && last->index + last->count == i && members[i] > last->rank &&
		    members[i] - last->rank == last->count)
			last->count++;
		else
			out[n++] = (struct fr_node_map){ .index = i, .rank = members[i], .count = 1 };
	}
	return n;
}

const char *fr_node_maps_check(const struct fr_node_map *maps, uint32_t n, uint32_t size)
{
	uint64_t next = 0;

	for (uint32_t i = 0; i < n; i++) {
		const struct fr_node_map *mp = &maps[i];

		if (mp->count == 0)
			return "a run of no members";
		if (mp->index < next)
			return "runs overlap or are not ascending";
		if ((uint64_t)mp->index + mp->count > size)
			return "a run reaches past the communicator's size";
		if ((uint64_t)mp->rank + mp->count > FR_RANK_UNKNOWN)
			return "a run reaches global rank 0xFFFFFFFF";
		next = (uint64_t)mp->index + mp->count;
	}
	return NULL;
}
