/*
 * scale_correlate: what one live verdict costs as the job grows. It builds
 * in memory the traces the daemon's live view of a hung job would hold,
 * runs fr_correlate() on them and prints the time and the peak memory.
 *
 *   scale_correlate [--unknown | --order] [RANKS...]     (default 4096 16384 65536)
 *
 * Each size runs in a child process of its own, so that its peak is its
 * own. The traces are shaped as live_view_build() (daemon/registry.c)
 * makes them: one world communicator whose member list every trace borrows
 * (the same array, by pointer), a node-local communicator per 8 ranks
 * whose list its 8 ranks borrow alike, and only operations in flight. Every
 * rank but one waits in world all_reduce #100 and has posted a receive from
 * the rank before it; the laggard, (RANKS/2 + 5) mod RANKS, computes and
 * has entered only #99. The verdict must be a hang naming the laggard,
 * not_entered. With --unknown the laggard never said HELLO, as an NCCL rank
 * that never started: the view has no trace of it, and its entry in the
 * world's list is unknown (an NCCL rank reports only its own); the verdict
 * must name it unresponsive. With --order the job deadlocks instead: two
 * more communicators a and b, as large as the world and borrowing its
 * list, and every rank waits in all_reduce #100 on a but the laggard, which
 * called b's first and waits in it; the verdict must be a deadlock naming
 * the laggard alone, the odd one out (a pass over the ranks that groups
 * them by what they wait in, not a comparison of every pair).
 *
 * Printed per size: the ranks, the seconds fr_correlate() took, the peak
 * resident memory of the whole process (getrusage), the resident memory
 * the traces alone took, and the verdict.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../dumps/correlate.h"
#include "../dumps/trace.h"

#define PROG "scale_correlate"
#define NODE 8
#define SEQ 100
/* 2025-06-15T12:00:00Z, and the waiters entered 30 s before it. */
#define NOW_NS 1749988800000000000ull
#define WAITED_NS 30000000000ull

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The resident set now, in KiB (VmRSS), 0 when not known. */
static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static int add_comm(struct fr_trace *t, size_t *cap, const char *id, uint32_t rank,
		    uint32_t size, uint32_t *members, uint64_t last_entered)
{
	struct fr_comm *c = fr_trace_add_comm(t, cap);

	if (!c)
		return -ENOMEM;
	snprintf(c->id, sizeof(c->id), "%s", id);
	snprintf(c->desc, sizeof(c->desc), "%s", id);
	c->rank = rank;
	c->size = size;
	c->members = members; /* borrowed, as a live view's are */
	c->last_entered = last_entered;
	c->last_completed = last_entered ? last_entered - 1 : 0;
	return 0;
}

static struct fr_op *add_op(struct fr_trace *t, size_t *cap, const char *comm,
			    enum fr_op_type type, uint64_t seq)
{
	struct fr_op *op = fr_trace_add_op(t, cap);

	if (!op)
		return NULL;
	op->type = type;
	op->state = FR_STATE_ENTERED;
	op->seq = seq;
	op->comm = fr_trace_str(t, comm);
	op->dtype = fr_trace_str(t, "MPI_FLOAT");
	if (!op->comm || !op->dtype)
		return NULL;
	op->record_id = t->nops - 1;
	return op;
}

/* --order: the laggard calls b's all_reduce first, the others a's. */
static bool order;

static int make_trace(struct fr_trace *t, uint32_t rank, uint32_t n, uint32_t laggard,
		      uint32_t *world, uint32_t *node_members)
{
	size_t ccap = order ? 4 : 2, ocap = 0;
	uint32_t node = rank / NODE;
	uint32_t nsize = n - node * NODE < NODE ? n - node * NODE : NODE;
	char nid[32];
	struct fr_op *op;

	t->status = FR_RANK_LIVE;
	snprintf(t->job, sizeof(t->job), "scale");
	t->rank = rank;
	t->world_size = n;
	snprintf(t->host, sizeof(t->host), "node%" PRIu32, node);
	t->pid = 1000 + rank;
	snprintf(t->comm_lib, sizeof(t->comm_lib), "Open MPI v4.1.4");
	t->time_ns = NOW_NS;
	snprintf(nid, sizeof(nid), "node.%" PRIu32, node);
	/* Allocated to size, as trace_add_comms() and trace_add_ops() do. */
	t->comms = malloc(ccap * sizeof(*t->comms));
	if (!t->comms || ((rank != laggard || order) && fr_trace_reserve_ops(t, 2, &ocap) < 0))
		return -ENOMEM;
	if (add_comm(t, &ccap, "world", rank, n, world, rank == laggard ? SEQ - 1 : SEQ) < 0 ||
	    add_comm(t, &ccap, nid, rank % NODE, nsize, node_members + node * NODE, 40) < 0)
		return -ENOMEM;
	if (order && (add_comm(t, &ccap, "a", rank, n, world, SEQ - (rank == laggard)) < 0 ||
		      add_comm(t, &ccap, "b", rank, n, world, SEQ - (rank != laggard)) < 0))
		return -ENOMEM;
	if (rank == laggard && !order)
		return 0;
	op = add_op(t, &ocap, order ? (rank == laggard ? "b" : "a") : "world", FR_OP_ALL_REDUCE,
		    SEQ);
	if (!op)
		return -ENOMEM;
	op->count = 1 << 20;
	op->bytes = 4 << 20;
	op->t_entered_ns = op->t_started_ns = NOW_NS - WAITED_NS;
	op = add_op(t, &ocap, "world", FR_OP_RECV, 7);
	if (!op)
		return -ENOMEM;
	op->is_p2p = true;
	op->nonblocking = true;
	op->peer = (int32_t)((rank + n - 1) % n);
	op->peer_in_comm = op->peer;
	op->count = 1024;
	op->bytes = 4096;
	op->t_entered_ns = NOW_NS - WAITED_NS - 1000000;
	return 0;
}

static int run(uint32_t n, bool unknown)
{
	uint32_t laggard = (n / 2 + 5) % n;
	uint32_t *world = malloc(n * sizeof(*world));
	uint32_t *node_members = malloc(n * sizeof(*node_members));
	struct fr_trace *traces = calloc(n, sizeof(*traces));
	const struct fr_trace **ptrs = malloc(n * sizeof(*ptrs));
	struct fr_verdict v;
	struct rusage ru;
	long rss0, rss1;
	uint64_t t0, t1;
	int rc;

	rss0 = rss_kib();
	if (!world || !node_members || !traces || !ptrs)
		return -ENOMEM;
	for (uint32_t r = 0; r < n; r++)
		world[r] = node_members[r] = r;
	if (unknown)
		world[laggard] = FR_RANK_UNKNOWN;
	for (uint32_t r = 0, k = 0; r < n; r++) {
		if (unknown && r == laggard)
			continue;
		if (make_trace(&traces[k], r, n, laggard, world, node_members) < 0)
			return -ENOMEM;
		ptrs[k] = &traces[k];
		k++;
	}
	rss1 = rss_kib();
	t0 = mono_ns();
	rc = fr_correlate(ptrs, unknown ? n - 1 : n, n, &v);
	t1 = mono_ns();
	if (rc < 0)
		return rc;
	getrusage(RUSAGE_SELF, &ru);
	printf("%8" PRIu32 " %10.3f %12ld %12ld  %s", n, (double)(t1 - t0) / 1e9, ru.ru_maxrss,
	       rss1 - rss0, fr_verdict_name(v.kind));
	if (v.nculprits)
		printf(" rank %" PRIu32 " %s%s", v.culprits[0].rank,
		       fr_reason_name(v.culprits[0].reason), v.nculprits > 1 ? " (and more)" : "");
	printf("\n");
	rc = v.kind == (order ? FR_VERDICT_DEADLOCK : FR_VERDICT_HANG) && v.nculprits == 1 &&
			     v.culprits[0].rank == laggard &&
			     v.culprits[0].reason ==
				     (unknown ? FR_REASON_UNRESPONSIVE : FR_REASON_NOT_ENTERED) ?
		     0 :
		     1;
	fr_verdict_free(&v);
	/* The process ends here: the traces (whose lists are borrowed) are
	 * left to the exit. */
	return rc;
}

int main(int argc, char **argv)
{
	static const uint32_t sizes[] = { 4096, 16384, 65536 };
	size_t nsizes = sizeof(sizes) / sizeof(sizes[0]);
	bool unknown = argc > 1 && strcmp(argv[1], "--unknown") == 0;
	int first;
	int bad = 0;

	order = argc > 1 && strcmp(argv[1], "--order") == 0;
	first = unknown || order ? 2 : 1;

	if (argc > first)
		nsizes = (size_t)(argc - first);

	printf("%8s %10s %12s %12s  %s\n", "ranks", "seconds", "peak_kib", "traces_kib",
	       "verdict");
	fflush(stdout);
	for (size_t i = 0; i < nsizes; i++) {
		uint32_t n;
		pid_t pid;
		int st;

		if (argc > first) {
			const char *arg = argv[first + (int)i];
			char *end;
			unsigned long x = strtoul(arg, &end, 10);

			if (*end || x < 2 || x > (1ul << 24)) {
				fprintf(stderr, "%s: bad number of ranks '%s'\n", PROG, arg);
				return 2;
			}
			n = (uint32_t)x;
		} else {
			n = sizes[i];
		}
		pid = fork();
		if (pid < 0) {
			perror(PROG ": fork");
			return 1;
		}
		if (pid == 0) {
			int rc = run(n, unknown);

			if (rc < 0)
				fprintf(stderr, "%s: %" PRIu32 " ranks: %s\n", PROG, n,
					strerror(-rc));
			fflush(stdout);
			_exit(rc ? 1 : 0);
		}
		if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "%s: %" PRIu32 " ranks: failed, or the wrong verdict\n",
				PROG, n);
			bad = 1;
		}
	}
	return bad;
}
