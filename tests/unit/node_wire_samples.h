/*
 * Sample node daemon messages (protocol 4) with every field set to
 * something distinguishable, small enough for test_wire.c's 2 KiB frames:
 * test_wire.c puts them through every message's common checks
 * (truncation, trailing bytes, small buffers), test_node_wire.c through
 * their own.
 */
#ifndef FR_TEST_NODE_WIRE_SAMPLES_H
#define FR_TEST_NODE_WIRE_SAMPLES_H

#include <stdint.h>
#include <string.h>

#include "node_wire.h"
#include "op.h"

static struct fr_node_job sample_node_jobs[] = {
	{ "job-42", 100000, 1024 },
	{ "train.7", 16, 4 },
};

static inline void sample_node_hello(struct fr_msg_node_hello *m)
{
	memset(m, 0, sizeof(*m));
	strcpy(m->node, "node-17.cluster");
	m->boot_id = 0x8877665544332211ull;
	m->protocol = 4;
	m->njobs = 2;
	m->jobs = sample_node_jobs;
}

static struct fr_node_rank sample_node_rank_list[] = {
	{ .rank = 4, .pid = 1001, .host = "node-17", .state = FR_NODE_RANK_CONNECTED,
	  .start_ns = 0x0102030405060708ull, .ring_capacity = 2000 },
	{ .rank = 5, .pid = 1002, .host = "node-17", .state = FR_NODE_RANK_FINISHED,
	  .start_ns = 0x1112131415161718ull, .ring_capacity = 4096 },
	{ .rank = 15, .pid = 77, .host = "", .state = FR_NODE_RANK_UNRESPONSIVE,
	  .start_ns = 1, .ring_capacity = 0 },
};

static inline void sample_node_ranks(struct fr_msg_node_ranks *m)
{
	memset(m, 0, sizeof(*m));
	strcpy(m->job, "job-42");
	m->world_size = 16;
	m->flags = FR_NODE_RANKS_FULL;
	m->nranks = 3;
	m->ranks = sample_node_rank_list;
}

static struct fr_node_map sample_node_world_maps[] = {
	{ .index = 0, .rank = 0, .count = 16 },
};
static struct fr_node_map sample_node_split_maps[] = {
	{ .index = 1, .rank = 5, .count = 1 },
	{ .index = 2, .rank = 9, .count = 3 },
};
static struct fr_node_comm sample_node_comm_list[] = {
	{ .id = "world", .desc = "MPI_COMM_WORLD", .size = 16, .nmaps = 1,
	  .maps = sample_node_world_maps },
	{ .id = "c9f3a1", .desc = "split of world", .size = 8, .nmaps = 2,
	  .maps = sample_node_split_maps },
	{ .id = "nccl-5d2e", .desc = "", .size = 4, .nmaps = 0, .maps = NULL },
};

static inline void sample_node_comms(struct fr_msg_node_comms *m)
{
	memset(m, 0, sizeof(*m));
	strcpy(m->job, "job-42");
	m->ncomms = 3;
	m->comms = sample_node_comm_list;
}

static struct fr_node_comm_progress sample_node_progress_list[2];

static inline void sample_node_progress(struct fr_msg_node_progress *m)
{
	struct fr_node_comm_progress *c = sample_node_progress_list;

	memset(m, 0, sizeof(*m));
	memset(c, 0, sizeof(sample_node_progress_list));
	strcpy(m->job, "job-42");
	/* Ranks 4-7 and 12-15 on world; 13 has not entered #41. */
	strcpy(c[0].comm, "world");
	c[0].lo_entered = 40;
	c[0].hi_entered = 41;
	c[0].lo_completed = 39;
	c[0].hi_completed = 40;
	c[0].nranks = 8;
	c[0].nmembers = 2;
	c[0].members[0] = (struct fr_node_range){ 4, 4 };
	c[0].members[1] = (struct fr_node_range){ 12, 4 };
	c[0].nlaggards = 1;
	c[0].laggards_omitted = 2;
	c[0].laggards[0] = (struct fr_node_laggard){ 13, 40, 39 };
	c[0].ngroups = 2;
	c[0].ops_omitted = 3;
	c[0].groups[0] = (struct fr_node_group){ .seq = 41, .type = FR_OP_ALL_REDUCE, .flags = 0,
						 .nranks = 7, .age_ms = 1500, .nranges = 3,
						 .ranges = { { 4, 4 }, { 12, 1 }, { 14, 2 } } };
	c[0].groups[1] = (struct fr_node_group){
		.seq = 40, .type = FR_OP_BARRIER,
		.flags = FR_WIRE_INFLIGHT_NONBLOCKING | FR_WIRE_INFLIGHT_WAITED, .nranks = 2,
		.age_ms = UINT64_MAX, .nranges = 1, .ranges = { { 13, 1 } } };
	/* A communicator the node's ranks have not used. */
	strcpy(c[1].comm, "c9f3a1");
	c[1].nranks = 1;
	c[1].nmembers = 1;
	c[1].members[0] = (struct fr_node_range){ 5, 1 };
	m->ncomms = 2;
	m->comms = c;
}

static inline void sample_node_dump_request(struct fr_msg_node_dump_request *m)
{
	memset(m, 0, sizeof(*m));
	strcpy(m->incident, "20261203T120000Z-7");
	strcpy(m->job, "train.7");
	strcpy(m->reason, "timeout");
	strcpy(m->comm, "a7f3c2");
	m->has_seq = 1;
	m->seq = 0x0102030405060708ull;
}

static const uint8_t sample_node_summary_bytes[] = "{\"format\": \"flightrec-dump\"}";

static inline void sample_node_summary(struct fr_msg_node_summary *m)
{
	memset(m, 0, sizeof(*m));
	strcpy(m->incident, "20261203T120000Z-7");
	strcpy(m->job, "train.7");
	m->rank = 99999;
	m->offset = 4096;
	m->total = 4096 + sizeof(sample_node_summary_bytes) + 10;
	m->len = sizeof(sample_node_summary_bytes);
	m->data = sample_node_summary_bytes;
}

static inline void sample_node_dump_done(struct fr_msg_node_dump_done *m)
{
	memset(m, 0, sizeof(*m));
	strcpy(m->incident, "20261203T120000Z-7");
	strcpy(m->job, "train.7");
	m->answered = 1023;
	m->failed = 1;
}

static const uint8_t sample_node_kernel_log_bytes[] =
	"{\"node\":\"node17\",\"available\":true,\"error\":null,\"from_ns\":1,"
	"\"to_ns\":2,\"dropped\":0,\"lines\":[]}";

static inline void sample_node_kernel_log(struct fr_msg_node_kernel_log *m)
{
	memset(m, 0, sizeof(*m));
	strcpy(m->incident, "20261203T120000Z-7");
	strcpy(m->job, "train.7");
	m->len = sizeof(sample_node_kernel_log_bytes) - 1;
	m->data = sample_node_kernel_log_bytes;
}

static inline void sample_node_fetch(struct fr_msg_node_fetch *m)
{
	memset(m, 0, sizeof(*m));
	strcpy(m->incident, "20261203T120000Z-7");
	strcpy(m->job, "train.7");
	m->rank = 4;
}

static inline void sample_node_look_request(struct fr_msg_node_look_request *m)
{
	memset(m, 0, sizeof(*m));
	m->look = 7;
	strcpy(m->job, "train.7");
	m->kind = FR_NODE_LOOK_RANK_TRACE;
	m->rank = 4;
	m->last = 50;
}

/*
 * Two classes: ranks 0-2 and 4 in MPI_Barrier, 3 in stuck_in_compute; 5
 * missing. The classes and frames are static: a test may change them
 * through m->classes before it encodes.
 */
static inline void sample_node_look_stacks(struct fr_msg_node_look_stacks *m)
{
	static struct fr_node_look_frame f[3];
	static struct fr_node_look_class c[2];

	memset(m, 0, sizeof(*m));
	memset(c, 0, sizeof(c));
	memset(f, 0, sizeof(f));
	m->look = 7;
	strcpy(m->job, "train.7");
	m->flags = FR_NODE_LOOK_LAST;
	m->asked = 6;
	m->answered = 5;
	m->nmissing = 1;
	m->nmranges = 1;
	m->missing[0] = (struct fr_node_range){ 5, 1 };
	m->nwhy = 1;
	m->why[0].rank = 5;
	strcpy(m->why[0].reason, "rank 5 did not answer within 5 s");
	m->frames_left_out = 3;
	strcpy(f[0].name, "PMPI_Barrier");
	f[0].offset = 16;
	f[0].ip = 0x401000;
	strcpy(f[1].name, "main");
	strcpy(f[2].name, "stuck_in_compute");
	strcpy(c[0].thread, "main");
	c[0].tid = 4242;
	c[0].nframes = 2;
	c[0].frames = f;
	c[0].nranges = 2;
	c[0].ranges[0] = (struct fr_node_range){ 0, 3 };
	c[0].ranges[1] = (struct fr_node_range){ 4, 1 };
	strcpy(c[1].thread, "main");
	c[1].tid = 4243;
	c[1].current = 1;
	c[1].nframes = 1;
	c[1].frames = f + 2;
	c[1].nranges = 1;
	c[1].ranges[0] = (struct fr_node_range){ 3, 1 };
	m->nclasses = 2;
	m->classes = c;
}

#endif
