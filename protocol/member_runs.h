/*
 * Member lists as runs: members index .. index + count - 1 of a
 * communicator are global ranks rank .. rank + count - 1. World in order
 * is one run, so a list that grows with the job costs a few bytes where
 * an array of its members costs four bytes a member; the node daemons'
 * NODE_COMMS (node_wire.h), the agents' COMM_RUNS (wire.h) and the dumps'
 * "ranks" strings (dumps/FORMAT.md, 1.6) all spell lists so, from the one
 * helper below.
 */
#ifndef FR_MEMBER_RUNS_H
#define FR_MEMBER_RUNS_H

#include <stdint.h>

struct fr_node_map {
	uint32_t index;
	uint32_t rank;
	uint32_t count;
};

/* Bytes of one run on the wire: index, rank, count. */
#define FR_NODE_MAP_SIZE 12

/*
 * The runs of a member list (global ranks in communicator order,
 * FR_RANK_UNKNOWN where not known) into `out`, which has room for `size`
 * runs (one per member when no two follow each other). Members not known
 * are in no run. Returns the count.
 */
uint32_t fr_node_maps_from_members(const uint32_t *members, uint32_t size, struct fr_node_map *out);

/*
 * Why `n` runs are not a member list of a communicator of `size` members,
 * for a log line; NULL when they are: ascending by index without overlap,
 * each of at least one member, inside the communicator (index + count at
 * most size), and naming no rank FR_RANK_UNKNOWN (rank + count at most
 * FR_RANK_UNKNOWN).
 */
const char *fr_node_maps_check(const struct fr_node_map *maps, uint32_t n, uint32_t size);

#endif
