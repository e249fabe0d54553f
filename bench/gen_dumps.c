/*
 * gen_dumps: writes the incident directory of a synthetic hung training job,
 * one flightrec dump per rank (rank-<N>.json, dumps/FORMAT.md), for
 * benchmarking fr-analyze at sizes no test machine can run.
 *
 *   gen_dumps DIR RANKS ENTRIES [--seed N] [--jobs N]
 *
 * The job is shaped like data- and tensor-parallel training over MPI:
 * MPI_COMM_WORLD, tensor-parallel groups of up to 8 consecutive ranks and
 * data-parallel groups across them, both made by MPI_Comm_split on world
 * (so named the way the agent names split communicators). Every step of
 * about 100 ms sends activations to the next rank and receives from the
 * previous one, then runs the tensor- and data-parallel collectives and
 * ends with a world all_reduce of the loss; a world broadcast and a world
 * barrier come every few dozen steps. Each rank keeps the last ENTRIES
 * operations of a run several times longer, as the agent's ring does.
 *
 * The planted hang: rank (RANKS/2 + 5) mod RANKS never enters the last
 * world all_reduce, in which every other rank waits. fr-analyze must name
 * that rank, reason not_entered.
 *
 * The dumps are made by the real writer (fr_dump_serialize()) from a filled
 * struct fr_trace, so they are byte for byte what the agent would write for
 * such a job. The output depends only on RANKS, ENTRIES and the seed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../dumps/dump.h"
#include "../dumps/trace.h"

#define PROG "gen_dumps"
#define MS 1000000ull
#define STEP_NS (100 * MS)
/* 2025-06-15T12:00:00Z: the run's first step. */
#define BASE_NS 1749988800000000000ull
/* Steps are written ahead of the kept window by this many ring lengths and
 * up to one more, so that every rank has dropped entries. */
#define HISTORY_RINGS 3
/* How long after the last world all_reduce the ranks are asked to dump. */
#define DUMP_DELAY_NS (5000 * MS)
#define RANKS_MAX (1u << 20)
#define ENTRIES_MAX (1u << 22)

enum group { WORLD, TP, DP };

/* One operation of a step's schedule, the same on every rank. */
struct slot {
	enum group group;
	enum fr_op_type type;
	uint64_t count;
	const char *dtype;
	uint32_t dsize;
	const char *redop;
	uint64_t gap_ns;   /* computation before it */
	unsigned every;    /* in every step, or every N steps */
	const char *caller; /* the application function calling it */
};

/*
 * A step: the exchange with the pipeline neighbours (not in this table: its
 * order depends on the rank's parity), the tensor-parallel collectives of
 * forward and backward passes, the data-parallel gradient exchange, the
 * occasional world broadcast and barrier, and the loss all_reduce last.
 */
static const struct slot schedule[] = {
	{ TP, FR_OP_ALL_REDUCE, 4u << 20, "MPI_FLOAT", 4, "sum", 2 * MS, 1, "forward_layer" },
	{ TP, FR_OP_ALL_GATHER, 8u << 20, "MPI_FLOAT", 4, "", 3 * MS, 1, "forward_layer" },
	{ TP, FR_OP_ALL_REDUCE, 16u << 20, "MPI_FLOAT", 4, "sum", 3 * MS, 1, "forward_layer" },
	{ TP, FR_OP_ALL_REDUCE, 1u << 20, "MPI_FLOAT", 4, "sum", 2 * MS, 1, "forward_layer" },
	{ TP, FR_OP_REDUCE_SCATTER, 8u << 20, "MPI_FLOAT", 4, "sum", 6 * MS, 1, "backward_layer" },
	{ TP, FR_OP_ALL_REDUCE, 512u << 10, "MPI_FLOAT", 4, "sum", 5 * MS, 1, "backward_layer" },
	{ DP, FR_OP_REDUCE_SCATTER, 32u << 20, "MPI_FLOAT", 4, "sum", 4 * MS, 1, "reduce_grads" },
	{ DP, FR_OP_ALL_REDUCE, 64u << 20, "MPI_FLOAT", 4, "sum", 1 * MS, 1, "reduce_grads" },
	{ DP, FR_OP_ALL_GATHER, 32u << 20, "MPI_FLOAT", 4, "", 3 * MS, 1, "gather_params" },
	{ WORLD, FR_OP_ALL_REDUCE, 1, "MPI_FLOAT", 4, "max", 1 * MS, 1, "clip_grad_norm" },
	{ WORLD, FR_OP_BROADCAST, 16, "MPI_INT", 4, "", 1 * MS, 25, "sync_schedule" },
	{ WORLD, FR_OP_BARRIER, 0, "derived", 0, "", 1 * MS, 50, "save_checkpoint" },
	{ WORLD, FR_OP_ALL_REDUCE, 1, "MPI_DOUBLE", 8, "sum", 1 * MS, 1, "reduce_loss" },
};
#define NSLOTS (sizeof(schedule) / sizeof(schedule[0]))
#define P2P_COUNT (2u << 20)
/* The world collectives before the first step: the two MPI_Comm_split. */
#define WORLD_SPLITS 2

struct job {
	const char *dir;
	uint32_t ranks;
	uint32_t entries;
	uint64_t seed;
	uint32_t tp;       /* tensor-parallel group size (1: none) */
	uint32_t dp;       /* data-parallel group size, ranks / tp (1: none) */
	uint32_t planted;  /* the rank that never enters the last all_reduce */
	uint64_t steps;
};

/* What a rank has done on a communicator so far. */
struct comm_state {
	uint64_t seq;
	uint64_t completed;
};

/* ---- deterministic randomness ---- */

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* A number below `n` drawn from the seed and up to three coordinates. */
static uint64_t draw(const struct job *j, uint64_t a, uint64_t b, uint64_t c, uint64_t n)
{
	return mix(mix(mix(j->seed ^ a) ^ b) ^ c) % n;
}

/* ---- the job's shape ---- */

static void plan(struct job *j)
{
	static const uint32_t sizes[] = { 8, 4, 2 };

	j->tp = 1;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		if (j->ranks % sizes[i] == 0 && j->ranks > sizes[i]) {
			j->tp = sizes[i];
			break;
		}
	}
	j->dp = j->ranks / j->tp;
	j->planted = (j->ranks / 2 + 5) % j->ranks;
	/* About NSLOTS operations a step, HISTORY_RINGS to HISTORY_RINGS + 1
	 * rings' worth of them. */
	j->steps = ((uint64_t)j->entries * HISTORY_RINGS + draw(j, 1, 0, 0, j->entries)) /
			   (NSLOTS - 1) + 2;
}

static bool in_step(const struct slot *s, uint64_t step)
{
	return step % s->every == 0;
}

static bool group_used(const struct job *j, enum group g)
{
	return g == WORLD || (g == TP && j->tp > 1) || (g == DP && j->dp > 1);
}

/* ---- per-operation timing, common to all ranks ---- */

/* How long an operation moves its bytes: a latency and a bandwidth per kind
 * of link (tensor-parallel groups share a node). */
static uint64_t transfer_ns(enum group g, uint64_t bytes)
{
	uint64_t gbps = g == TP ? 150 : g == DP ? 20 : 10;

	return 20000 + bytes / gbps;
}

/*
 * The job-wide timeline of one operation: when it is due (ranks enter it up
 * to 300 us after) and when it completes on every member.
 */
struct when {
	uint64_t due;
	uint64_t done;
};

#define ENTER_SPREAD_NS 300000u

static uint64_t rank_jitter(const struct job *j, uint32_t rank, uint64_t step, uint64_t k)
{
	return draw(j, 2, (uint64_t)rank << 32 | k, step, ENTER_SPREAD_NS);
}

/* ---- building one rank's trace ---- */

struct gen {
	const struct job *j;
	uint32_t rank;
	struct fr_op *ring;      /* j->entries slots, circular */
	uint64_t recorded;       /* record ids used */
	struct comm_state cs[3];
	uint64_t sent, received; /* p2p seqs with the right and left neighbour */
	const char *tp_id, *dp_id;
	uint64_t last_due;       /* of the last world all_reduce, for the dump time */
};

static const char *comm_id(const struct gen *g, enum group grp)
{
	return grp == WORLD ? "world" : grp == TP ? g->tp_id : g->dp_id;
}

static struct fr_op *record(struct gen *g)
{
	struct fr_op *op = &g->ring[g->recorded % g->j->entries];

	fr_op_init(op);
	op->record_id = g->recorded++;
	return op;
}

static void finish(struct fr_op *op, uint64_t entered, uint64_t done)
{
	op->state = FR_STATE_COMPLETED;
	op->t_entered_ns = entered;
	op->t_started_ns = entered;
	op->t_completed_ns = done > entered ? done : entered + 1000;
}

static void collective(struct gen *g, const struct slot *s, uint64_t step, uint64_t k,
		       const struct when *w, bool in_flight)
{
	struct comm_state *c = &g->cs[s->group];
	struct fr_op *op = record(g);
	uint64_t entered = w->due + rank_jitter(g->j, g->rank, step, k);

	/* The generator's strings outlive the trace written from them. */
	op->comm = comm_id(g, s->group);
	op->type = s->type;
	op->seq = ++c->seq;
	op->count = s->count;
	op->bytes = s->count * s->dsize;
	op->dtype = s->dtype;
	op->redop = s->redop;
	if (fr_op_is_rooted(s->type))
		op->root = op->peer_in_comm = 0;
	if (in_flight) {
		op->state = FR_STATE_ENTERED;
		op->t_entered_ns = op->t_started_ns = entered;
		return;
	}
	finish(op, entered, w->done + draw(g->j, 3, g->rank, op->record_id, 20000));
	c->completed = c->seq;
}

static void p2p(struct gen *g, enum fr_op_type type, uint64_t step, const struct when *w)
{
	uint32_t n = g->j->ranks;
	uint32_t peer = type == FR_OP_SEND ? (g->rank + 1) % n : (g->rank + n - 1) % n;
	struct fr_op *op = record(g);
	uint64_t entered = w->due + rank_jitter(g->j, g->rank, step, type);

	op->comm = "world";
	op->type = type;
	op->is_p2p = true;
	op->seq = type == FR_OP_SEND ? ++g->sent : ++g->received;
	op->peer = op->peer_in_comm = (int32_t)peer;
	op->count = P2P_COUNT;
	op->bytes = P2P_COUNT * 2;
	op->dtype = "MPI_SHORT";
	finish(op, entered, w->done + draw(g->j, 4, g->rank, op->record_id, 20000));
}

/*
 * Runs the whole history of one rank through its ring: the two splits, then
 * every step. The times come from the job-wide timeline, so the ranks agree
 * on them up to their entry jitter.
 */
static void run(struct gen *g)
{
	const struct job *j = g->j;
	bool even = g->rank % 2 == 0;

	for (int i = 0; i < WORLD_SPLITS; i++) {
		struct fr_op *op = record(g);

		op->comm = "world";
		op->type = FR_OP_COMM_SPLIT;
		op->seq = ++g->cs[WORLD].seq;
		op->dtype = "derived";
		finish(op, BASE_NS - 2000 * MS + (uint64_t)i * 40 * MS + draw(j, 5, g->rank, i, MS),
		       BASE_NS - 1990 * MS + (uint64_t)i * 40 * MS);
		g->cs[WORLD].completed = op->seq;
	}
	for (uint64_t step = 0; step < j->steps; step++) {
		bool last_step = step + 1 == j->steps;
		uint64_t t = BASE_NS + step * STEP_NS + draw(j, 6, step, 0, 2 * MS);
		struct when w;

		/* Forward computation, then the activations move on. */
		t += 20 * MS + draw(j, 7, step, 0, 2 * MS);
		w.due = t;
		w.done = t + ENTER_SPREAD_NS + transfer_ns(WORLD, P2P_COUNT * 2);
		if (j->ranks > 1) {
			p2p(g, even ? FR_OP_SEND : FR_OP_RECV, step, &w);
			p2p(g, even ? FR_OP_RECV : FR_OP_SEND, step, &w);
		}
		t = w.done;
		for (size_t k = 0; k < NSLOTS; k++) {
			const struct slot *s = &schedule[k];
			bool last = last_step && k == NSLOTS - 1;

			if (!in_step(s, step) || !group_used(j, s->group))
				continue;
			w.due = t + s->gap_ns + draw(j, 8, step, k, s->gap_ns / 4 + 1);
			w.done = w.due + ENTER_SPREAD_NS + transfer_ns(s->group, s->count * s->dsize);
			t = w.done;
			if (last) {
				g->last_due = w.due;
				if (g->rank == j->planted)
					break;
			}
			collective(g, s, step, k, &w, last);
		}
	}
}

/* Innermost first; the application's and the libraries' functions at
 * offsets from per-process load addresses (ASLR). */
struct frame_spec {
	const char *name;
	int lib;          /* 0 the program, 1 libmpi, 2 libc, 3 the agent, 4 libuv */
	uint32_t fn;      /* function's offset in its object */
	uint32_t off;
};

static const struct frame_spec waiting_stack[] = {
	{ "mca_btl_vader_component_progress", 1, 0x1f3a40, 0x1c4 },
	{ "opal_progress", 1, 0x0a1220, 0x34 },
	{ "ompi_request_default_wait", 1, 0x0c7f10, 0x5d },
	{ "ompi_coll_base_allreduce_intra_recursivedoubling", 1, 0x11b6e0, 0x2f1 },
	{ "ompi_coll_tuned_allreduce_intra_dec_fixed", 1, 0x1a04c0, 0x8b },
	{ "PMPI_Allreduce", 1, 0x0e2d30, 0x10e },
	{ "MPI_Allreduce", 3, 0x01a8f0, 0x7c },
	{ "reduce_loss", 0, 0x004a10, 0x3e },
	{ "train_step", 0, 0x0051c0, 0x1a2 },
	{ "run_epoch", 0, 0x005600, 0x9b },
	{ "main", 0, 0x0058d0, 0x11f },
	{ "__libc_start_call_main", 2, 0x0271c0, 0x8a },
	{ "__libc_start_main_impl", 2, 0x027280, 0x85 },
	{ "_start", 0, 0x0031e0, 0x25 },
};

static const struct frame_spec planted_stack[] = {
	{ "__memmove_avx_unaligned_erms", 2, 0x1a2d40, 0x1be },
	{ "decode_sample", 0, 0x003f20, 0xc4 },
	{ "load_next_batch", 0, 0x0041b0, 0x73 },
	{ "data_loader_next", 0, 0x004400, 0x2a },
	{ "train_step", 0, 0x0051c0, 0x5e },
	{ "run_epoch", 0, 0x005600, 0x9b },
	{ "main", 0, 0x0058d0, 0x11f },
	{ "__libc_start_call_main", 2, 0x0271c0, 0x8a },
	{ "__libc_start_main_impl", 2, 0x027280, 0x85 },
	{ "_start", 0, 0x0031e0, 0x25 },
};

static const struct frame_spec agent_stack[] = {
	{ "fr_stacks_collect", 3, 0x012340, 0x1d8 },
	{ "fr_dumper_build", 3, 0x00f7a0, 0x15a },
	{ "fr_dumper_serialize", 3, 0x00f9c0, 0x3c },
	{ "link_on_dump", 3, 0x0148b0, 0x9e },
	{ "link_on_frame", 3, 0x014e20, 0x141 },
	{ "uv__read", 4, 0x01c5b0, 0x2e6 },
	{ "uv__stream_io", 4, 0x01cb80, 0xa8 },
	{ "uv__io_poll", 4, 0x0231d0, 0x4f2 },
	{ "uv_run", 4, 0x0134a0, 0x112 },
	{ "link_main", 3, 0x015a00, 0x61 },
	{ "start_thread", 2, 0x089130, 0x2f2 },
	{ "clone3", 2, 0x109f50, 0x2c },
};

static int add_thread(struct fr_trace *t, uint32_t tid, const char *name, bool current,
		      const struct frame_spec *spec, size_t n, const uint64_t base[5])
{
	struct fr_thread *th = &t->threads[t->nthreads];

	memset(th, 0, sizeof(*th));
	th->tid = tid;
	snprintf(th->name, sizeof(th->name), "%s", name);
	th->current = current;
	th->frames = calloc(n, sizeof(*th->frames));
	if (!th->frames)
		return -ENOMEM;
	t->nthreads++;
	for (size_t i = 0; i < n; i++) {
		th->frames[i].name = strdup(spec[i].name);
		if (!th->frames[i].name)
			return -ENOMEM;
		th->frames[i].offset = spec[i].off;
		th->frames[i].ip = base[spec[i].lib] + spec[i].fn + spec[i].off;
		th->nframes++;
	}
	return 0;
}

static int add_comm(struct fr_trace *t, const char *id, const char *desc, uint32_t rank,
		    uint32_t size, uint32_t first, uint32_t stride, const struct comm_state *cs)
{
	struct fr_comm *c = &t->comms[t->ncomms];

	memset(c, 0, sizeof(*c));
	snprintf(c->id, sizeof(c->id), "%s", id);
	snprintf(c->desc, sizeof(c->desc), "%s", desc);
	c->rank = rank;
	c->size = size;
	c->members = malloc(size * sizeof(*c->members));
	if (!c->members)
		return -ENOMEM;
	t->ncomms++;
	for (uint32_t i = 0; i < size; i++)
		c->members[i] = first + i * stride;
	if (cs) {
		c->last_entered = cs->seq;
		c->last_completed = cs->completed;
	}
	return 0;
}

/* Fills `t` with rank `rank`'s dump. Allocates what `t` owns (free it with
 * fr_trace_free(), also on failure). `ring` is scratch of j->entries ops. */
static int build(const struct job *j, uint32_t rank, struct fr_op *ring, struct fr_trace *t)
{
	char tp_id[FR_COMM_ID_MAX + 1], dp_id[FR_COMM_ID_MAX + 1], self_id[FR_COMM_ID_MAX + 1];
	struct gen g = { .j = j, .rank = rank, .ring = ring, .tp_id = tp_id, .dp_id = dp_id };
	uint64_t kept, first, base[5];
	uint32_t pid = 2000 + (uint32_t)draw(j, 9, rank, 0, 4000000);
	int rc;

	/* Ids as the agent derives them for MPI_Comm_split (world's seq 1
	 * and 2, colour the group's number). */
	snprintf(tp_id, sizeof(tp_id), "world/1s%u", rank / j->tp);
	snprintf(dp_id, sizeof(dp_id), "world/2s%u", rank % j->tp);
	snprintf(self_id, sizeof(self_id), "self.%u", rank);
	run(&g);

	memset(t, 0, sizeof(*t));
	t->status = FR_RANK_DUMPED;
	snprintf(t->job, sizeof(t->job), "bench-train");
	t->rank = rank;
	t->world_size = j->ranks;
	snprintf(t->host, sizeof(t->host), "node%04u", rank / 8);
	t->pid = pid;
	snprintf(t->comm_lib, sizeof(t->comm_lib), "Open MPI v4.1.4");
	snprintf(t->incident, sizeof(t->incident), "20250615T120500Z-1");
	snprintf(t->reason, sizeof(t->reason), "timeout");
	t->time_ns = g.last_due + DUMP_DELAY_NS + draw(j, 10, rank, 0, 200 * MS);

	kept = g.recorded < j->entries ? g.recorded : j->entries;
	first = g.recorded - kept;
	t->dropped = first;
	t->ops = malloc(kept * sizeof(*t->ops));
	t->comms = calloc(4, sizeof(*t->comms));
	t->threads = calloc(2, sizeof(*t->threads));
	if (!t->ops || !t->comms || !t->threads)
		return -ENOMEM;
	for (uint64_t i = 0; i < kept; i++)
		t->ops[i] = ring[(first + i) % j->entries];
	t->nops = kept;

	rc = add_comm(t, "world", "MPI_COMM_WORLD", rank, j->ranks, 0, 1, &g.cs[WORLD]);
	if (!rc)
		rc = add_comm(t, self_id, "MPI_COMM_SELF", 0, 1, rank, 1, NULL);
	if (!rc && group_used(j, TP))
		rc = add_comm(t, tp_id, "split of world", rank % j->tp, j->tp,
			      rank / j->tp * j->tp, 1, &g.cs[TP]);
	if (!rc && group_used(j, DP))
		rc = add_comm(t, dp_id, "split of world", rank / j->tp, j->dp, rank % j->tp,
			      j->tp, &g.cs[DP]);
	if (rc)
		return rc;

	base[0] = 0x55d000000000ull + (draw(j, 11, rank, 0, 1u << 20) << 12);
	base[1] = 0x7f2000000000ull + (draw(j, 11, rank, 1, 1u << 24) << 12);
	base[2] = base[1] + 0x3a00000;
	base[3] = base[1] + 0x5c00000;
	base[4] = base[1] + 0x6100000;
	if (rank == j->planted)
		rc = add_thread(t, pid, "python3", false, planted_stack,
				sizeof(planted_stack) / sizeof(planted_stack[0]), base);
	else
		rc = add_thread(t, pid, "python3", false, waiting_stack,
				sizeof(waiting_stack) / sizeof(waiting_stack[0]), base);
	if (!rc)
		rc = add_thread(t, pid + 7, "flightrec", true, agent_stack,
				sizeof(agent_stack) / sizeof(agent_stack[0]), base);
	return rc;
}

static int write_file(const char *path, const char *buf, size_t len)
{
	FILE *f = fopen(path, "w");
	int rc = 0;

	if (!f)
		return -errno;
	if (fwrite(buf, 1, len, f) != len)
		rc = -errno;
	if (fclose(f) && !rc)
		rc = -errno;
	return rc;
}

/* Writes the dumps of ranks first, first + stride, ... Returns 0 or -errno
 * after saying what failed. */
static int write_ranks(const struct job *j, uint32_t first, uint32_t stride)
{
	struct fr_op *ring = calloc(j->entries, sizeof(*ring));
	char path[4096];
	int rc = 0;

	if (!ring) {
		fprintf(stderr, PROG ": out of memory\n");
		return -ENOMEM;
	}
	for (uint32_t r = first; r < j->ranks && !rc; r += stride) {
		struct fr_trace t;
		char *buf = NULL;
		size_t len = 0;

		rc = build(j, r, ring, &t);
		if (!rc)
			rc = fr_dump_serialize(&t, &buf, &len);
		fr_trace_free(&t);
		if (rc) {
			fprintf(stderr, PROG ": rank %u: %s\n", r, strerror(-rc));
			break;
		}
		snprintf(path, sizeof(path), "%s/rank-%u.json", j->dir, r);
		rc = write_file(path, buf, len);
		free(buf);
		if (rc)
			fprintf(stderr, PROG ": %s: %s\n", path, strerror(-rc));
	}
	free(ring);
	return rc;
}

static bool parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v > max)
		return false;
	*out = v;
	return true;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: " PROG " DIR RANKS ENTRIES [--seed N] [--jobs N]\n"
		"Writes DIR/rank-<N>.json, the flightrec dumps of a RANKS-rank training job\n"
		"that hangs in a world all_reduce which rank (RANKS/2+5) mod RANKS never\n"
		"entered, ENTRIES entries per rank. --jobs: processes writing (default 2).\n");
}

int main(int argc, char **argv)
{
	struct job j = { .seed = 1 };
	const char *pos[3];
	uint64_t v, jobs = 2, total = 0;
	struct timespec t0, t1;
	int npos = 0, failed = 0, rc;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc &&
		    parse_u64(argv[i + 1], UINT64_MAX, &j.seed)) {
			i++;
		} else if (strcmp(argv[i], "--jobs") == 0 && i + 1 < argc &&
			   parse_u64(argv[i + 1], 64, &jobs) && jobs > 0) {
			i++;
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (argv[i][0] != '-' && npos < 3) {
			pos[npos++] = argv[i];
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (npos != 3) {
		usage(stderr);
		return 2;
	}
	j.dir = pos[0];
	if (!parse_u64(pos[1], RANKS_MAX, &v) || v < 2) {
		fprintf(stderr, PROG ": RANKS must be 2 to %u\n", RANKS_MAX);
		return 2;
	}
	j.ranks = (uint32_t)v;
	if (!parse_u64(pos[2], ENTRIES_MAX, &v) || v < 1) {
		fprintf(stderr, PROG ": ENTRIES must be 1 to %u\n", ENTRIES_MAX);
		return 2;
	}
	j.entries = (uint32_t)v;
	plan(&j);
	rc = fr_mkdir_p(j.dir);
	if (rc < 0) {
		fprintf(stderr, PROG ": %s: %s\n", j.dir, strerror(-rc));
		return 1;
	}

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (jobs > j.ranks)
		jobs = j.ranks;
	/* Each process writes every jobs-th rank; the files do not depend on
	 * how many write them. */
	for (uint32_t k = 1; k < jobs; k++) {
		pid_t pid = fork();

		if (pid == 0)
			_exit(write_ranks(&j, k, (uint32_t)jobs) ? 1 : 0);
		if (pid < 0) {
			fprintf(stderr, PROG ": fork: %s\n", strerror(errno));
			failed = 1;
			break;
		}
	}
	if (!failed)
		failed = write_ranks(&j, 0, (uint32_t)jobs) != 0;
	for (;;) {
		int status;
		pid_t pid = wait(&status);

		if (pid < 0)
			break;
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			failed = 1;
	}
	if (failed)
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &t1);

	for (uint32_t r = 0; r < j.ranks; r++) {
		char path[4096];
		struct stat st;

		snprintf(path, sizeof(path), "%s/rank-%u.json", j.dir, r);
		if (stat(path, &st) == 0)
			total += (uint64_t)st.st_size;
	}
	printf("%s: %u files, %u ranks x %u entries, %" PRIu64 " bytes (%.2f GiB), "
	       "planted rank %u, %.1f s\n",
	       j.dir, j.ranks, j.ranks, j.entries, total, (double)total / (1u << 30), j.planted,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
}
