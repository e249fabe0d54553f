/*
 * The central daemon's merge of the node daemons' classes of stacks for
 * GET /v1/jobs/<job>/stacks of a job the nodes hold (node_look.c), as a
 * pure function for the tests. Classes with the same thread name and the
 * same frames compared (from the class's `start`, at most
 * LOOK_MERGE_FRAMES, as look.c's grouping compares them) are one group,
 * their ranks unioned as ranges; classes with Python frames are grouped by
 * those alone, by fr-analyze's rule (fr_pyframes_cmp()), so that ranks on
 * one line of the script are one group across nodes. A group shows the
 * thread of the class with its lowest rank. Cost: a sort of the classes
 * and of each group's ranges, whatever the ranks.
 */
#ifndef FR_DAEMON_LOOK_MERGE_H
#define FR_DAEMON_LOOK_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "../dumps/correlate.h"
#include "../protocol/node_wire.h"

/* Frames two stacks are compared by, as fr-analyze compares them. */
#define LOOK_MERGE_FRAMES FR_MERGE_FRAMES

/* One node's class: `node` tells nodes apart for the groups' node counts. */
struct look_merge_in {
	const struct fr_node_look_class *c;
	uint32_t node;
};

struct look_merge_group {
	const struct fr_node_look_class *rep;   /* the class with the group's lowest rank */
	uint64_t nranks;
	uint32_t nnodes;                        /* nodes with ranks in it */
	size_t nranges;
	struct fr_node_range *ranges;           /* ascending, coalesced; in the merge's array */
};

struct look_merged {
	size_t ngroups;
	struct look_merge_group *groups;        /* most ranks first, then lowest rank first */
	size_t nranges;
	struct fr_node_range *ranges;           /* every group's, one group after the other */
};

/* Returns 0 or -ENOMEM; `out` borrows the classes, which must outlive it. */
int look_merge(const struct look_merge_in *in, size_t n, struct look_merged *out);
void look_merged_free(struct look_merged *m);
/* Class `c`'s Python frames as dumps/ reads them (fr_pyframes_cmp(), the
 * dump writer) into `out` (room for c->npyframes), the strings borrowed. */
void look_class_pyframes(const struct fr_node_look_class *c, struct fr_pyframe *out);
/*
 * The ranks below `world` in no group, as ascending runs into `gaps`
 * (room for m->nranges + 1). Returns how many.
 */
size_t look_merge_gaps(const struct look_merged *m, uint32_t world, struct fr_node_range *gaps);

#endif
