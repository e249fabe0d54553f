/*
 * member_bytes: what member lists cost at scale, before and after runs
 * (protocol 5 COMM_RUNS, dump format 1.6 "ranks" strings).
 *
 *   member_bytes [RANKS...]      (default 4096 65536)
 *
 * Per size: the bytes of the frames that tell the daemon world's members,
 * one per rank at start-up, as COMM and as COMM_RUNS; and one rank's dump
 * holding world, its tensor-parallel group of 8 consecutive ranks and its
 * data-parallel group (every 8th rank, which no run shortens), with no
 * entries (they cost the same either way), with arrays as format 1.4
 * writes them and as the writer writes it now.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../dumps/dump.h"
#include "../dumps/dump_write.h"
#include "../protocol/member_runs.h"
#include "../protocol/wire.h"

#define PROG "member_bytes"

static struct fr_comm *add(struct fr_trace *t, size_t *cap, const char *id, const char *desc,
			   uint32_t size, uint32_t first, uint32_t stride)
{
	struct fr_comm *c = fr_trace_add_comm(t, cap);

	if (!c || !(c->members = malloc(size * sizeof(*c->members))))
		return NULL;
	snprintf(c->id, sizeof(c->id), "%s", id);
	snprintf(c->desc, sizeof(c->desc), "%s", desc);
	c->size = size;
	for (uint32_t i = 0; i < size; i++)
		c->members[i] = first + i * stride;
	return c;
}

/* As format 1.4 wrote it: every list an array. */
static json_t *as_array(void *arg, const char *key, const struct fr_comm *c)
{
	(void)arg;
	(void)key;
	return dump_pg_config_json(c);
}

static int run(uint32_t n)
{
	struct dump_comm_writer arrays = { as_array, NULL };
	struct fr_trace t = { 0 };
	struct fr_node_map *runs = malloc(n * sizeof(*runs));
	char *before = NULL, *after = NULL;
	size_t blen = 0, alen = 0, cap = 0;
	struct fr_comm *world;
	int rc = -1;

	snprintf(t.job, sizeof(t.job), "bench");
	snprintf(t.host, sizeof(t.host), "node0000");
	snprintf(t.comm_lib, sizeof(t.comm_lib), "Open MPI v4.1.4");
	t.world_size = n;
	t.status = FR_RANK_DUMPED;
	world = add(&t, &cap, "world", "MPI_COMM_WORLD", n, 0, 1);
	if (!runs || !world || !add(&t, &cap, "world.split.0", "split of world", 8, 0, 1) ||
	    !add(&t, &cap, "world.split.1", "split of world", n / 8, 0, 8))
		goto out;
	{
		struct fr_msg_comm c = { .id = "world", .desc = "MPI_COMM_WORLD", .size = n,
					 .members = world->members };
		struct fr_msg_comm_runs r = { .id = "world", .desc = "MPI_COMM_WORLD", .size = n,
					      .runs = runs };

		r.nruns = fr_node_maps_from_members(world->members, n, runs);
		if (fr_dump_serialize(&t, &after, &alen) ||
		    fr_json_text(dump_trace_json(&t, true, &arrays), JSON_COMPACT, &before, &blen))
			goto out;
		printf("%8" PRIu32 " %10zu %10zu %14.1f %14.1f %10zu %10zu\n", n, fr_wire_comm_size(&c),
		       fr_wire_comm_runs_size(&r), (double)fr_wire_comm_size(&c) * n / (1 << 20),
		       (double)fr_wire_comm_runs_size(&r) * n / (1 << 20), blen, alen);
	}
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "%s: out of memory at %" PRIu32 " ranks\n", PROG, n);
	free(before);
	free(after);
	free(runs);
	fr_trace_free(&t);
	return rc;
}

int main(int argc, char **argv)
{
	static const uint32_t sizes[] = { 4096, 65536 };
	int bad = 0;

	printf("== member lists: world's COMM frame per rank and all ranks', one rank's dump (world, TP 8, DP n/8)\n");
	printf("%8s %10s %10s %14s %14s %10s %10s\n", "ranks", "comm_B", "runs_B", "comm_all_MiB",
	       "runs_all_MiB", "dump_1.4_B", "dump_B");
	if (argc > 1) {
		for (int i = 1; i < argc; i++) {
			unsigned long x = strtoul(argv[i], NULL, 10);

			if (x < 8 || x > (1ul << 24)) {
				fprintf(stderr, "%s: bad number of ranks '%s'\n", PROG, argv[i]);
				return 2;
			}
			bad |= run((uint32_t)x);
		}
		return bad ? 1 : 0;
	}
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		bad |= run(sizes[i]);
	return bad ? 1 : 0;
}
