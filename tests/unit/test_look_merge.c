/*
 * The central daemon's merge of the nodes' classes of stacks
 * (daemon/look_merge.c): one stack on two nodes is one group with both
 * nodes' ranks; different stacks stay apart; the ranks are unioned as
 * ranges and the groups ordered as GET /v1/jobs/<job>/stacks lists them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../daemon/look_merge.h"

static struct fr_node_look_frame barrier[] = {
	{ "poll_progress", 0, 0 }, { "PMPI_Barrier", 0, 0 }, { "main", 0, 0 }
};
static struct fr_node_look_frame barrier_deeper[] = {
	{ "other_progress", 0, 0 }, { "PMPI_Barrier", 0, 0 }, { "main", 0, 0 }
};
static struct fr_node_look_frame compute[] = { { "stuck_in_compute", 0, 0 }, { "main", 0, 0 } };

static void class_of(struct fr_node_look_class *c, const char *thread,
		     struct fr_node_look_frame *f, uint32_t nframes, uint32_t start,
		     const struct fr_node_range *r, uint32_t nr)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->thread, thread);
	c->frames = f;
	c->nframes = nframes;
	c->start = start;
	memcpy(c->ranges, r, nr * sizeof(*r));
	c->nranges = nr;
}

/* Two nodes, ranks 0-3 and 4-7: all wait in the barrier but rank 5. */
static void test_two_nodes_one_stack(void **state)
{
	struct fr_node_look_class c[4];
	struct look_merge_in in[4];
	struct look_merged m;

	(void)state;
	class_of(&c[0], "main", barrier, 3, 1, (struct fr_node_range[]){ { 0, 4 } }, 1);
	/* The same from PMPI_Barrier up, caught in another progress function. */
	class_of(&c[1], "main", barrier_deeper, 3, 1,
		 (struct fr_node_range[]){ { 4, 1 }, { 6, 2 } }, 2);
	class_of(&c[2], "main", compute, 2, 0, (struct fr_node_range[]){ { 5, 1 } }, 1);
	in[0] = (struct look_merge_in){ &c[1], 1 };
	in[1] = (struct look_merge_in){ &c[2], 1 };
	in[2] = (struct look_merge_in){ &c[0], 0 };
	assert_int_equal(look_merge(in, 3, &m), 0);
	assert_int_equal(m.ngroups, 2);
	assert_int_equal(m.groups[0].nranks, 7);
	assert_int_equal(m.groups[0].nnodes, 2);
	/* 0-3 and 4 touch: one run, then 6-7. */
	assert_int_equal(m.groups[0].nranges, 2);
	assert_int_equal(m.groups[0].ranges[0].first, 0);
	assert_int_equal(m.groups[0].ranges[0].count, 5);
	assert_int_equal(m.groups[0].ranges[1].first, 6);
	assert_int_equal(m.groups[0].ranges[1].count, 2);
	/* The lowest rank's class is the one shown. */
	assert_ptr_equal(m.groups[0].rep, &c[0]);
	assert_int_equal(m.groups[1].nranks, 1);
	assert_int_equal(m.groups[1].nnodes, 1);
	assert_string_equal(m.groups[1].rep->frames[0].name, "stuck_in_compute");
	{
		/* Of a world of 10, ranks 8-9 are in no group. */
		struct fr_node_range gaps[4];

		assert_int_equal(look_merge_gaps(&m, 10, gaps), 1);
		assert_int_equal(gaps[0].first, 8);
		assert_int_equal(gaps[0].count, 2);
		/* ... and none of a world of 8. */
		assert_int_equal(look_merge_gaps(&m, 8, gaps), 0);
	}
	look_merged_free(&m);

	/* One node's class split in two (too many runs) is one group again. */
	class_of(&c[3], "main", barrier, 3, 1, (struct fr_node_range[]){ { 10, 1 } }, 1);
	in[3] = (struct look_merge_in){ &c[3], 0 };
	assert_int_equal(look_merge(in, 4, &m), 0);
	assert_int_equal(m.ngroups, 2);
	assert_int_equal(m.groups[0].nranks, 8);
	assert_int_equal(m.groups[0].nnodes, 2);
	look_merged_free(&m);
}

/* Same frames, other thread name; other frames, same thread: apart. */
static void test_different_stacks_apart(void **state)
{
	struct fr_node_look_class c[3];
	struct look_merge_in in[3];
	struct look_merged m;

	(void)state;
	class_of(&c[0], "main", barrier, 3, 1, (struct fr_node_range[]){ { 0, 2 } }, 1);
	class_of(&c[1], "worker", barrier, 3, 1, (struct fr_node_range[]){ { 2, 3 } }, 1);
	class_of(&c[2], "main", compute, 2, 0, (struct fr_node_range[]){ { 5, 1 } }, 1);
	for (int i = 0; i < 3; i++)
		in[i] = (struct look_merge_in){ &c[i], (uint32_t)i };
	assert_int_equal(look_merge(in, 3, &m), 0);
	assert_int_equal(m.ngroups, 3);
	/* Most ranks first, then the lowest rank first. */
	assert_string_equal(m.groups[0].rep->thread, "worker");
	assert_int_equal(m.groups[1].ranges[0].first, 0);
	assert_int_equal(m.groups[2].ranges[0].first, 5);
	look_merged_free(&m);
}

/* Frames past LOOK_MERGE_FRAMES do not tell stacks apart; nothing in, nothing out. */
static void test_compared_frames_capped(void **state)
{
	struct fr_node_look_frame a[LOOK_MERGE_FRAMES + 1], b[LOOK_MERGE_FRAMES + 1];
	struct fr_node_look_class c[2];
	struct look_merge_in in[2];
	struct look_merged m;

	(void)state;
	memset(a, 0, sizeof(a));
	memset(b, 0, sizeof(b));
	strcpy(a[LOOK_MERGE_FRAMES].name, "start_a");
	strcpy(b[LOOK_MERGE_FRAMES].name, "start_b");
	class_of(&c[0], "main", a, LOOK_MERGE_FRAMES + 1, 0, (struct fr_node_range[]){ { 0, 1 } }, 1);
	class_of(&c[1], "main", b, LOOK_MERGE_FRAMES + 1, 0, (struct fr_node_range[]){ { 1, 1 } }, 1);
	in[0] = (struct look_merge_in){ &c[0], 0 };
	in[1] = (struct look_merge_in){ &c[1], 1 };
	assert_int_equal(look_merge(in, 2, &m), 0);
	assert_int_equal(m.ngroups, 1);
	assert_int_equal(m.groups[0].nranks, 2);
	look_merged_free(&m);
	assert_int_equal(look_merge(in, 0, &m), 0);
	assert_int_equal(m.ngroups, 0);
	/* Nothing answered: the whole world is missing. */
	{
		struct fr_node_range gaps[1];

		assert_int_equal(look_merge_gaps(&m, 4, gaps), 1);
		assert_int_equal(gaps[0].first, 0);
		assert_int_equal(gaps[0].count, 4);
	}
	look_merged_free(&m);
}

/*
 * Classes with Python frames merge by those alone, by fr-analyze's rule:
 * function, file and line; native frames and thread names do not tell
 * them apart, a line does, and they never merge with a native class.
 */
static void test_python_classes(void **state)
{
	struct fr_node_look_pyframe reduce[] = { { "train_step", "/srv/train.py", 88 },
						 { "main", "/srv/train.py", 120 } };
	struct fr_node_look_pyframe reduce2[] = { { "train_step", "/srv/train.py", 88 },
						  { "main", "/srv/train.py", 120 } };
	struct fr_node_look_pyframe load[] = { { "load_batch", "/srv/train.py", 41 },
					       { "main", "/srv/train.py", 120 } };
	struct fr_node_look_pyframe other_line[] = { { "train_step", "/srv/train.py", 89 },
						     { "main", "/srv/train.py", 120 } };
	struct fr_node_look_class c[5];
	struct look_merge_in in[5];
	struct look_merged m;

	/* Each class's Python frames, native frames and thread name, ranks. */
	const struct {
		struct fr_node_look_pyframe *py;
		struct fr_node_look_frame *f;
		uint32_t nf;
		const char *thread;
		struct fr_node_range r;
	} cls[] = {
		/* Node 0: ranks 0-1 on the allreduce line, caught in barrier's frames. */
		{ reduce, barrier, 3, "python3", { 0, 2 } },
		/* Node 1: rank 3 on the same line, other native frames and
		 * thread name; rank 2 in load_batch. */
		{ reduce2, compute, 2, "python3.11", { 3, 1 } },
		{ load, compute, 2, "python3", { 2, 1 } },
		/* Rank 4 one line further; rank 5 native only, with rank 0's frames. */
		{ other_line, barrier, 3, "python3", { 4, 1 } },
		{ NULL, barrier, 3, "python3", { 5, 1 } },
	};

	(void)state;
	for (uint32_t i = 0; i < 5; i++) {
		class_of(&c[i], cls[i].thread, cls[i].f, cls[i].nf, 0, &cls[i].r, 1);
		c[i].pyframes = cls[i].py;
		c[i].npyframes = cls[i].py ? 2 : 0;
		in[i] = (struct look_merge_in){ &c[i], i == 0 ? 0 : 1 };
	}
	assert_int_equal(look_merge(in, 5, &m), 0);
	assert_int_equal(m.ngroups, 4);
	assert_int_equal(m.groups[0].nranks, 3);
	assert_int_equal(m.groups[0].nnodes, 2);
	assert_int_equal(m.groups[0].nranges, 2);
	assert_int_equal(m.groups[0].ranges[0].first, 0);
	assert_int_equal(m.groups[0].ranges[1].first, 3);
	assert_ptr_equal(m.groups[0].rep, &c[0]);
	/* Then one rank each, lowest first: load_batch, the other line, native. */
	assert_ptr_equal(m.groups[1].rep, &c[2]);
	assert_ptr_equal(m.groups[2].rep, &c[3]);
	assert_ptr_equal(m.groups[3].rep, &c[4]);
	look_merged_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_nodes_one_stack),
		cmocka_unit_test(test_different_stacks_apart),
		cmocka_unit_test(test_compared_frames_capped),
		cmocka_unit_test(test_python_classes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
