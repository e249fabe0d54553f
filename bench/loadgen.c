/*
 * loadgen: simulates the agents of a large job from one process, over
 * loopback, speaking the real protocol (protocol/PROTOCOL.md) to a real
 * flightrecd, for measuring the daemon under load (bench/load.sh).
 *
 *   loadgen --addr HOST:PORT|unix:PATH [--addr ...] [--ranks N] [--job ID]
 *           [--first-rank F --count C] [--epoch T] [--rate UPDATES/S]
 *           [--hang-after SECONDS | --hang-at T | --hang-file FILE] [--hang-rank R]
 *           [--dump-size BYTES] [--dump-members-max M]
 *           [--token-file FILE] [--duration SECONDS]
 *
 * One process may simulate only part of the job (ranks F..F+C-1 of N), and
 * spread its ranks over several daemons (each --addr, in order, takes a
 * contiguous block): bench/nodes.sh runs the ranks of one job behind many
 * node daemons so. Several such processes make one job when they share its
 * timeline (--epoch, a time on the real-time clock) and the hang's moment
 * (--hang-at, likewise, or written to --hang-file once the script is
 * ready): each then works out the same operations and the same hung one.
 *
 * Every rank connects, says HELLO, sends a COMM or a COMM_RUNS (its members
 * as runs), the shorter, as agents send them to a daemon of protocol 5
 * (always COMM with --comm-lists)
 * for MPI_COMM_WORLD and for the two communicators a data- and
 * tensor-parallel job splits from it (named as the agent names splits),
 * then follows a job-wide timeline of
 * collectives: tensor-parallel all_reduce, data-parallel reduce_scatter,
 * world all_reduce, over and over. Entering and completing an operation are
 * one PROGRESS each, as the agent sends them: the changed communicator's
 * sequence numbers and the full list of operations in flight (the blocking
 * collective, or none). HEARTBEAT goes every second.
 *
 * The planted hang: --hang-after seconds after every rank is up, the
 * planted rank (default N/2 + 5) never enters the next world all_reduce,
 * in which every other rank then blocks. As with the real agent, a blocked
 * rank's in-flight set no longer changes, so it sends heartbeats only. The
 * daemon's timeout then fires and it asks every rank to dump: each answers
 * with a dump written by the real writer (fr_dump_serialize()) from its
 * recent history, of at most --dump-size bytes, in DUMP_DATA pieces.
 *
 * One thread, epoll, non-blocking sockets. Progress lines go to stdout for
 * the script that drives it:
 *   loadgen: up N ranks in S s
 *   loadgen: hang planted: rank R ...
 *   loadgen: dumps uploaded: N of N for INCIDENT in S s
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../dumps/dump.h"
#include "../dumps/trace.h"
#include "../protocol/auth.h"
#include "../protocol/frame.h"
#include "../protocol/member_runs.h"
#include "../protocol/wire.h"

#define PROG "loadgen"
#define NS_PER_MS 1000000ull
#define HEARTBEAT_MS 1000
#define TICK_MS 5
/* Connects in progress at once: the daemon's accept backlog is finite, and a
 * dropped SYN costs a second of retransmission. */
#define MAX_CONNECTING 128
#define RETRY_MS 1000
#define RETRY_BUSY_MS 50
/* Updates a rank may fall behind its timeline before it skips ahead. */
#define CATCH_UP_MAX 4
/* Communicators of every rank: the two splits and world. */
#define NCOMMS 3
#define C_TP 0
#define C_DP 1
#define C_WORLD 2
/* World's collectives before the first step: the two MPI_Comm_split. */
#define WORLD_SPLITS 2
#define DUMP_SIZE_MAX (1u << 20)
/* Entries in a dump at most, however large --dump-size. */
#define DUMP_OPS_MAX 8192
/* Ops of every rank before this program started. */
#define HISTORY_OPS 30000
/* Bytes of daemon -> agent frames this program reads at once. */
#define RBUF_SIZE 1024
/* Daemon addresses one process spreads its ranks over, at most. */
#define ADDRS_MAX 4096
/* A rank's output buffer above this size is freed once sent: COMM for a
 * large world is a quarter of a megabyte per rank, once. */
#define OUT_KEEP (64u << 10)

enum rstate { R_IDLE, R_CONNECTING, R_CHALLENGED, R_UP };

struct rank {
	int fd;
	uint32_t rank;          /* in the job */
	uint32_t addr;          /* which of G.addrs it connects to */
	enum rstate state;
	bool want_out;          /* EPOLLOUT armed */
	bool burst;             /* HELLO and COMMs queued, not all sent yet */
	uint8_t *out;
	size_t olen, ooff, ocap;
	uint8_t in[RBUF_SIZE];
	size_t ilen;
	uint64_t retry_ms;
	uint64_t update;        /* next update: op update/2, enter if even */
	uint64_t next_hb_ms;
	uint32_t phase_ms;      /* this rank's offset in the job's timeline */
	bool blocked;           /* in the hung all_reduce, or the planted rank */
	bool dumped;
};

struct addr {
	struct sockaddr_storage sa;
	socklen_t len;
};

static struct {
	uint32_t ranks;         /* the job's world size */
	uint32_t first, count;  /* the ranks this process simulates */
	char job[FR_JOB_MAX + 1];
	double rate;
	double hang_after_s;
	uint32_t hang_rank;
	size_t dump_size;
	double duration_s;
	struct fr_token token;

	int ep;
	struct rank *r;         /* G.count of them: rank first + i at i */
	struct addr *addrs;
	uint32_t naddrs;
	uint32_t dump_members_max; /* larger communicators are dumped with their size only */
	bool comm_lists;        /* COMM with every member, as agents before protocol 5 */
	uint32_t ranks_per_host;
	const char *hang_file;
	uint64_t t0_ms;         /* start of the job's timeline */
	uint64_t start_ms;
	uint32_t interval_ms;   /* between two updates of one rank */
	uint32_t tp, dp;
	uint32_t connecting, up;
	uint32_t bursting;      /* ranks up with their first frames not all sent */
	bool all_up;
	uint64_t all_up_ms;
	uint64_t hang_at_ms;    /* when the hang is planted (monotonic); 0: once all are up */
	uint64_t hang_op;       /* the world all_reduce the planted rank skips; 0: none yet */
	bool hang_planted;
	char incident[FR_INCIDENT_MAX + 1];
	uint64_t dump_first_ms;
	uint32_t dumps_requested, dumps_done;
	double bytes_per_op;    /* of a serialised entry, learnt when the hang is chosen */
	uint64_t frames, updates, disconnects, refused;
	uint64_t dump_build_ms;  /* spent making dumps: this program's own share */
	uint64_t dump_last_ms;   /* the last request's arrival */
	uint32_t dumps_ready;    /* answered with a dump written ahead */
} G;

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Monotonic milliseconds at real-time seconds `t`. */
static uint64_t mono_at(double t)
{
	return (uint64_t)((int64_t)mono_ms() + (int64_t)(t * 1000) - (int64_t)(real_ns() / NS_PER_MS));
}

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* ---- the job's timeline ---- */

/* Op k of every rank: tensor-parallel, data-parallel, world, in turn. */
static int op_comm(uint64_t k)
{
	return (int)(k % NCOMMS);
}

static enum fr_op_type op_type(int c)
{
	return c == C_DP ? FR_OP_REDUCE_SCATTER : FR_OP_ALL_REDUCE;
}

/* The sequence number on communicator c of the last of ops 0..k-1 on it. */
static uint64_t seq_before(int c, uint64_t k)
{
	uint64_t n = (k + NCOMMS - 1 - (uint64_t)c) / NCOMMS;

	return c == C_WORLD ? n + WORLD_SPLITS : n;
}

static void comm_id(int c, uint32_t rank, char *out, size_t len)
{
	if (c == C_WORLD)
		snprintf(out, len, "world");
	else if (c == C_TP)
		snprintf(out, len, "world/1s%u", rank / G.tp);
	else
		snprintf(out, len, "world/2s%u", rank % G.tp);
}

/*
 * When update u of rank r is due on the monotonic clock. The job ran for
 * HISTORY_OPS ops before this program started, so that the ranks' rings
 * are full when they dump: those updates fall before t0 (signed).
 */
static int64_t update_due(const struct rank *r, uint64_t u)
{
	return (int64_t)G.t0_ms + r->phase_ms + ((int64_t)u - 2 * HISTORY_OPS) * G.interval_ms;
}

/* The same instant on the real-time clock, for dump entries: past or, for
 * dumps written ahead, future. */
static uint64_t update_real_ns(const struct rank *r, uint64_t u, uint64_t now_ms, uint64_t now_ns)
{
	return (uint64_t)((int64_t)now_ns + (update_due(r, u) - (int64_t)now_ms) * (int64_t)NS_PER_MS);
}

static bool is_due(const struct rank *r, uint64_t u, uint64_t now)
{
	return (int64_t)now >= update_due(r, u);
}

/* ---- output ---- */

static int reserve(struct rank *r, size_t n)
{
	if (r->ooff && r->ooff == r->olen)
		r->ooff = r->olen = 0;
	if (r->olen + n <= r->ocap)
		return 0;
	if (r->ooff) {
		memmove(r->out, r->out + r->ooff, r->olen - r->ooff);
		r->olen -= r->ooff;
		r->ooff = 0;
		if (r->olen + n <= r->ocap)
			return 0;
	}
	size_t cap = r->ocap ? r->ocap : 4096;
	uint8_t *p;

	while (cap < r->olen + n)
		cap *= 2;
	p = realloc(r->out, cap);
	if (!p)
		return -ENOMEM;
	r->out = p;
	r->ocap = cap;
	return 0;
}

#define QUEUE(r, n, m)                                                                 \
	({                                                                             \
		size_t sz_ = fr_wire_##n##_size(m);                                    \
		int rc_ = reserve((r), sz_);                                           \
		if (!rc_)                                                              \
			rc_ = fr_wire_##n##_encode((m), (r)->out + (r)->olen, sz_);    \
		if (rc_ > 0) {                                                         \
			(r)->olen += (size_t)rc_;                                      \
			G.frames++;                                                    \
		} else {                                                               \
			fprintf(stderr, PROG ": rank %u: encoding " #n ": %s\n",       \
				(r)->rank, strerror(rc_ ? -rc_ : EINVAL));             \
		}                                                                      \
		rc_ > 0 ? 0 : -1;                                                      \
	})

static void set_out(struct rank *r, bool want)
{
	struct epoll_event ev = { .events = EPOLLIN | (want ? EPOLLOUT : 0u),
				  .data.u32 = (uint32_t)(r - G.r) };

	if (r->want_out == want)
		return;
	r->want_out = want;
	epoll_ctl(G.ep, EPOLL_CTL_MOD, r->fd, &ev);
}

static void drop(struct rank *r, const char *why);

static void flush(struct rank *r)
{
	while (r->ooff < r->olen) {
		ssize_t n = send(r->fd, r->out + r->ooff, r->olen - r->ooff, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == EINTR)
				continue;
			drop(r, strerror(errno));
			return;
		}
		r->ooff += (size_t)n;
	}
	if (r->ooff == r->olen) {
		if (r->burst) {
			r->burst = false;
			G.bursting--;
		}
		if (r->ocap > OUT_KEEP) {
			free(r->out);
			r->out = NULL;
			r->ocap = r->olen = r->ooff = 0;
		}
	}
	set_out(r, r->ooff < r->olen);
}

static void drop(struct rank *r, const char *why)
{
	if (r->fd >= 0) {
		close(r->fd);
		r->fd = -1;
	}
	if (r->state == R_CONNECTING || r->state == R_CHALLENGED)
		G.connecting--;
	if (r->state == R_UP)
		G.up--;
	if (r->burst) {
		r->burst = false;
		G.bursting--;
	}
	if (r->state != R_IDLE) {
		G.disconnects++;
		if (G.disconnects <= 10)
			fprintf(stderr, PROG ": rank %u: connection lost: %s; retrying\n", r->rank,
				why);
	}
	r->state = R_IDLE;
	r->want_out = false;
	r->olen = r->ooff = r->ilen = 0;
	r->retry_ms = mono_ms() + RETRY_MS;
}

/* ---- what a rank says ---- */

static void fill_hello(const struct rank *r, struct fr_msg_hello *h)
{
	memset(h, 0, sizeof(*h));
	snprintf(h->job, sizeof(h->job), "%s", G.job);
	h->rank = r->rank;
	h->world_size = G.ranks;
	h->pid = 10000 + r->rank;
	snprintf(h->host, sizeof(h->host), "node%04u", r->rank / G.ranks_per_host);
	h->ring_capacity = 2048;
	h->start_ns = real_ns();
	snprintf(h->comm_lib, sizeof(h->comm_lib), "Open MPI v4.1.4");
}

/* Global ranks of communicator c of rank r, in communicator-rank order
 * (world: all; tensor-parallel: its block of G.tp; data-parallel: every
 * G.tp-th from its place in the block). */
static uint32_t comm_members(int c, uint32_t rank, uint32_t *members, uint32_t *my)
{
	uint32_t first = c == C_WORLD ? 0 : c == C_TP ? rank / G.tp * G.tp : rank % G.tp;
	uint32_t step = c == C_DP ? G.tp : 1;
	uint32_t n = c == C_WORLD ? G.ranks : c == C_TP ? G.tp : G.dp;

	for (uint32_t i = 0; i < n; i++)
		members[i] = first + i * step;
	*my = (rank - first) / step;
	return n;
}

/* The op a rank is in or last completed, for update u: op u/2. */
static bool blocked_at(const struct rank *r, uint64_t op)
{
	return G.hang_op && op >= G.hang_op && r->rank == G.hang_rank;
}

static int send_progress(struct rank *r, bool full)
{
	struct fr_wire_comm_progress comms[NCOMMS];
	struct fr_wire_inflight in;
	struct fr_msg_progress m = { .comms = comms, .inflight = &in };
	uint64_t k = r->update / 2;
	bool entering = r->update % 2 == 0;
	int c = op_comm(k);

	memset(comms, 0, sizeof(comms));
	memset(&in, 0, sizeof(in));
	/* Update u enters op u/2 when even, completes it when odd. */
	for (int i = 0; i < NCOMMS; i++) {
		uint64_t done = seq_before(i, k + (entering ? 0 : 1));
		uint64_t entered = seq_before(i, k + 1);

		if (!full && i != c)
			continue;
		comm_id(i, r->rank, comms[m.ncomms].comm, sizeof(comms[0].comm));
		comms[m.ncomms].last_entered = entered;
		comms[m.ncomms].last_completed = done;
		m.ncomms++;
	}
	if (entering) {
		comm_id(c, r->rank, in.comm, sizeof(in.comm));
		in.type = (uint8_t)op_type(c);
		in.peer = in.peer_in_comm = -1;
		in.seq = seq_before(c, k + 1);
		in.count = c == C_WORLD ? 1 : 1u << 20;
		in.bytes = in.count * 4;
		snprintf(in.dtype, sizeof(in.dtype), "MPI_FLOAT");
		in.age_ms = is_due(r, r->update, mono_ms()) ?
				    (uint64_t)((int64_t)mono_ms() - update_due(r, r->update)) :
				    0;
		m.ninflight = 1;
	}
	G.updates++;
	return QUEUE(r, progress, &m);
}

/* The update a rank resumes from at `now`: the last op it completed on
 * the timeline (odd: a completion), never past the hang. */
static uint64_t resume_update(const struct rank *r, uint64_t now)
{
	uint64_t u = (uint64_t)(((int64_t)now - update_due(r, 0)) / G.interval_ms) | 1;

	if (G.hang_op && u / 2 >= G.hang_op - 1)
		u = (G.hang_op - 1) * 2 + 1;
	return u;
}

static int send_hello_and_comms(struct rank *r, const uint8_t *nonce)
{
	struct fr_msg_hello h;
	uint32_t *members = malloc(G.ranks * sizeof(*members));
	struct fr_node_map *runs = malloc(G.ranks * sizeof(*runs));
	uint64_t now = mono_ms();
	int rc = 0;

	if (!members || !runs) {
		free(members);
		free(runs);
		return -1;
	}
	fill_hello(r, &h);
	if (nonce) {
		struct fr_msg_auth a;

		if (fr_wire_auth_proof(&G.token, nonce, &h, a.proof) < 0 || QUEUE(r, auth, &a))
			rc = -1;
	}
	if (!rc)
		rc = QUEUE(r, hello, &h);
	for (int c = 0; c < NCOMMS && !rc; c++) {
		struct fr_msg_comm m;

		memset(&m, 0, sizeof(m));
		comm_id(c, r->rank, m.id, sizeof(m.id));
		snprintf(m.desc, sizeof(m.desc), "%s", c == C_WORLD ? "MPI_COMM_WORLD" : "split of world");
		m.members = members;
		m.size = comm_members(c, r->rank, members, &m.rank);
		/* As agents send them to a daemon of protocol 5: the shorter of
		 * the two (a data-parallel group of every 8th rank is one run
		 * per member, longer than its list). */
		struct fr_msg_comm_runs cr = { .rank = m.rank, .size = m.size, .runs = runs };

		memcpy(cr.id, m.id, sizeof(cr.id));
		memcpy(cr.desc, m.desc, sizeof(cr.desc));
		cr.nruns = fr_node_maps_from_members(members, m.size, runs);
		if (G.comm_lists || fr_wire_comm_size(&m) <= fr_wire_comm_runs_size(&cr))
			rc = QUEUE(r, comm, &m);
		else
			rc = QUEUE(r, comm_runs, &cr);
	}
	free(members);
	free(runs);
	if (rc)
		return rc;
	/* A rank that comes up late has done what the job did meanwhile. */
	r->update = resume_update(r, now);
	rc = send_progress(r, true); /* what it completed so far */
	r->update++;
	if (!rc) {
		struct fr_msg_heartbeat hb = { .now_ns = real_ns() };

		rc = QUEUE(r, heartbeat, &hb);
	}
	r->next_hb_ms = now + HEARTBEAT_MS;
	if (!rc) {
		r->burst = true;
		G.bursting++;
	}
	return rc;
}

static void choose_hang(uint64_t at_ms);

static void became_up(struct rank *r, const uint8_t *nonce)
{
	G.connecting--;
	r->state = R_UP;
	G.up++;
	if (send_hello_and_comms(r, nonce) < 0) {
		drop(r, "encoding");
		return;
	}
	flush(r);
	if (!G.all_up && G.up == G.count) {
		G.all_up = true;
		G.all_up_ms = mono_ms();
		printf(PROG ": up %u ranks in %.2f s\n", G.count,
		       (double)(G.all_up_ms - G.start_ms) / 1000);
		fflush(stdout);
		if (G.hang_after_s >= 0 && !G.hang_at_ms && !G.hang_file)
			choose_hang(G.all_up_ms + (uint64_t)(G.hang_after_s * 1000));
	}
}

/* ---- dumps ---- */

static void add_stack(struct fr_trace *t, bool planted)
{
	static const char *const waiting[] = { "opal_progress", "ompi_request_default_wait",
					       "PMPI_Allreduce", "MPI_Allreduce", "reduce_loss",
					       "train_step", "main" };
	static const char *const computing[] = { "decode_sample", "load_next_batch",
						 "data_loader_next", "train_step", "main" };
	const char *const *names = planted ? computing : waiting;
	size_t n = planted ? sizeof(computing) / sizeof(*computing) :
			     sizeof(waiting) / sizeof(*waiting);
	struct fr_thread *th;

	t->threads = calloc(1, sizeof(*t->threads));
	if (!t->threads)
		return;
	th = &t->threads[0];
	th->frames = calloc(n, sizeof(*th->frames));
	if (!th->frames)
		return;
	t->nthreads = 1;
	th->tid = t->pid;
	snprintf(th->name, sizeof(th->name), "main");
	for (size_t i = 0; i < n; i++) {
		th->frames[i].name = strdup(names[i]);
		th->frames[i].offset = 0x40 + i * 8;
		th->frames[i].ip = 0x400000 + i * 0x1000 + th->frames[i].offset;
		th->nframes++;
	}
}

/* What one dump says beyond the rank's history. */
struct dump_spec {
	uint32_t rank;
	uint64_t update;      /* the rank's next update: what it has done */
	const char *incident, *reason;
	uint64_t time_ns;     /* when it dumps */
	uint64_t now_ms, now_ns; /* one instant on both clocks */
};

/*
 * A rank's dump: its communicators and its last `nops` operations as the
 * timeline has them, the one it blocks in last.
 */
static int build_trace(const struct dump_spec *sp, size_t nops, struct fr_trace *t)
{
	const struct rank *r = &G.r[sp->rank - G.first];
	/* Ops entered so far: update u enters op u/2 when even. */
	uint64_t entered = (sp->update + 1) / 2, first;
	size_t cap = 0;

	memset(t, 0, sizeof(*t));
	t->status = FR_RANK_DUMPED;
	snprintf(t->job, sizeof(t->job), "%s", G.job);
	t->rank = sp->rank;
	t->world_size = G.ranks;
	snprintf(t->host, sizeof(t->host), "node%04u", sp->rank / G.ranks_per_host);
	t->pid = 10000 + sp->rank;
	snprintf(t->comm_lib, sizeof(t->comm_lib), "Open MPI v4.1.4");
	snprintf(t->incident, sizeof(t->incident), "%s", sp->incident);
	snprintf(t->reason, sizeof(t->reason), "%s", sp->reason);
	t->time_ns = sp->time_ns;
	first = entered > nops ? entered - nops : 0;
	t->dropped = first + WORLD_SPLITS;
	for (int c = 0; c < NCOMMS; c++) {
		struct fr_comm *fc = fr_trace_add_comm(t, &cap);

		if (!fc)
			return -ENOMEM;
		comm_id(c, sp->rank, fc->id, sizeof(fc->id));
		snprintf(fc->desc, sizeof(fc->desc), "%s", c == C_WORLD ? "MPI_COMM_WORLD" : "split of world");
		fc->members = malloc(G.ranks * sizeof(*fc->members));
		if (!fc->members)
			return -ENOMEM;
		fc->size = comm_members(c, sp->rank, fc->members, &fc->rank);
		if (fc->size > G.dump_members_max) {
			/* Its size only ("ranks": []): world's list in each of
			 * 65,536 dumps would be 24 GiB. */
			free(fc->members);
			fc->members = NULL;
		}
		fc->last_entered = seq_before(c, entered);
		fc->last_completed = seq_before(c, sp->update / 2);
	}
	cap = 0;
	for (uint64_t k = first; k < entered; k++) {
		struct fr_op *op = fr_trace_add_op(t, &cap);
		int c = op_comm(k);
		bool done = 2 * k + 1 < sp->update;

		if (!op)
			return -ENOMEM;
		op->record_id = k + WORLD_SPLITS;
		char id[FR_COMM_ID_MAX + 1];

		comm_id(c, sp->rank, id, sizeof(id));
		if (!(op->comm = fr_trace_str(t, id)))
			return -ENOMEM;
		op->type = op_type(c);
		op->seq = seq_before(c, k + 1);
		op->count = c == C_WORLD ? 1 : 1u << 20;
		op->bytes = op->count * 4;
		op->dtype = "MPI_FLOAT";
		op->redop = "sum";
		op->t_entered_ns = op->t_started_ns = update_real_ns(r, 2 * k, sp->now_ms, sp->now_ns);
		op->state = done ? FR_STATE_COMPLETED : FR_STATE_ENTERED;
		if (done)
			op->t_completed_ns = update_real_ns(r, 2 * k + 1, sp->now_ms, sp->now_ns);
	}
	add_stack(t, sp->rank == G.hang_rank && G.hang_op);
	return 0;
}

/* The serialised dump of at most `budget` bytes, as many entries as fit. */
static int make_dump(const struct dump_spec *sp, size_t budget, double bytes_per_op, char **doc,
		     size_t *len)
{
	size_t nops = bytes_per_op > 0 ? (size_t)((double)budget / bytes_per_op) : 64;
	struct fr_trace t;

	if (nops > DUMP_OPS_MAX)
		nops = DUMP_OPS_MAX;
	for (;;) {
		int rc = build_trace(sp, nops, &t);

		if (!rc)
			rc = fr_dump_serialize(&t, doc, len);
		fr_trace_free(&t);
		if (rc)
			return rc;
		if (*len <= budget || nops == 0)
			return 0;
		free(*doc);
		*doc = NULL;
		nops = nops * budget / *len * 97 / 100;
	}
}

/* What a dump entry costs, from the difference entries make. */
static double learn_bytes_per_op(const struct dump_spec *sp)
{
	char *a = NULL, *b = NULL;
	size_t alen = 0, blen = 0;
	double per = 0;

	if (!make_dump(sp, SIZE_MAX, 0, &a, &alen) && !make_dump(sp, 0, 0, &b, &blen) &&
	    alen > blen)
		per = (double)(alen - blen) / 64;
	free(a);
	free(b);
	return per;
}

/*
 * Dumps are JSON written by jansson, which costs this one process several
 * milliseconds per 64 KiB dump: 4096 of them would take it longer than the
 * daemon's whole target, whereas real ranks write theirs in parallel. So a
 * thread writes every rank's dump ahead, once the hang is known, with
 * placeholders for what only the request tells (incident, reason, time),
 * and the answer substitutes them. A rank whose dump is not ready, or not
 * for the state it is in, writes it on demand.
 */
#define PH_INCIDENT "LOADGEN-INCIDENT-PLACEHOLDER"
#define PH_REASON "LOADGEN-REASON-PLACEHOLDER"
#define PH_TIME 1111111111111111111ull
#define PH_TIME_STR "1111111111111111111"

struct pre {
	char *doc;
	size_t len;
	uint64_t update;
};
static struct pre *pre;
static uint32_t pre_ready; /* atomic: dumps 0 .. pre_ready-1 are written */
static pthread_t pre_thread;
static bool pre_started;

/* The update a rank is at once the hang holds it. */
static uint64_t update_at_hang(uint32_t rank)
{
	return rank == G.hang_rank ? 2 * G.hang_op : 2 * G.hang_op + 1;
}

static void *pre_main(void *arg)
{
	struct dump_spec sp = { .incident = PH_INCIDENT, .reason = PH_REASON, .time_ns = PH_TIME };
	double per_op = G.bytes_per_op; /* the event loop may learn it again */

	(void)arg;
	/* Behind the daemon and the event loop. */
	setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
	sp.now_ms = mono_ms();
	sp.now_ns = real_ns();
	for (uint32_t i = 0; i < G.count && !stop; i++) {
		sp.rank = G.first + i;
		sp.update = update_at_hang(sp.rank);
		pre[i].update = sp.update;
		if (make_dump(&sp, G.dump_size - 64, per_op, &pre[i].doc, &pre[i].len))
			pre[i].doc = NULL;
		__atomic_store_n(&pre_ready, i + 1, __ATOMIC_RELEASE);
	}
	if (!stop) {
		printf(PROG ": dumps written ahead: %u in %.1f s\n", G.count,
		       (double)(mono_ms() - sp.now_ms) / 1000);
		fflush(stdout);
	}
	return NULL;
}

/* Appends `n` bytes to *out, which has room (sized by the caller). */
static char *put(char *out, const char *s, size_t n)
{
	memcpy(out, s, n);
	return out + n;
}

/* The ready dump with the request's values in place of the placeholders. */
static char *fill_in(const struct pre *p, const char *incident, const char *reason,
		     uint64_t time_ns, size_t *len)
{
	static const char *const ph[] = { PH_INCIDENT, PH_REASON, PH_TIME_STR };
	char tbuf[24];
	const char *val[3] = { incident, reason, tbuf };
	size_t cap = p->len + strlen(incident) + strlen(reason) + sizeof(tbuf) + 1;
	char *out = malloc(cap), *o = out;
	const char *s = p->doc, *end = p->doc + p->len;

	if (!out)
		return NULL;
	snprintf(tbuf, sizeof(tbuf), "%" PRIu64, time_ns);
	/* Each placeholder appears once, in this order, in the document's head. */
	for (int i = 0; i < 3; i++) {
		const char *at = strstr(s, ph[i]);

		if (!at) {
			free(out);
			return NULL;
		}
		o = put(o, s, (size_t)(at - s));
		o = put(o, val[i], strlen(val[i]));
		s = at + strlen(ph[i]);
	}
	o = put(o, s, (size_t)(end - s));
	*len = (size_t)(o - out);
	return out;
}

/* A reason that needs no escaping in JSON, so it can replace the placeholder. */
static bool plain(const char *s)
{
	for (; *s; s++)
		if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20)
			return false;
	return true;
}

static void answer_dump(struct rank *r, const struct fr_msg_dump_request *req)
{
	uint64_t t_start = mono_ms();
	uint32_t ready = pre ? __atomic_load_n(&pre_ready, __ATOMIC_ACQUIRE) : 0;
	uint32_t i = (uint32_t)(r - G.r);
	char *doc = NULL;
	size_t len = 0;

	if (!G.dumps_requested++)
		G.dump_first_ms = t_start;
	G.dump_last_ms = t_start;
	snprintf(G.incident, sizeof(G.incident), "%s", req->incident);
	if (i < ready && pre[i].doc && pre[i].update == r->update && plain(req->reason))
		doc = fill_in(&pre[i], req->incident, req->reason, real_ns(), &len);
	if (doc) {
		G.dumps_ready++;
	} else {
		struct dump_spec sp = { .rank = r->rank, .update = r->update,
					.incident = req->incident, .reason = req->reason,
					.time_ns = real_ns(), .now_ms = mono_ms(),
					.now_ns = real_ns() };
		int rc;

		if (G.bytes_per_op <= 0)
			G.bytes_per_op = learn_bytes_per_op(&sp);
		rc = make_dump(&sp, G.dump_size, G.bytes_per_op, &doc, &len);
		if (rc) {
			fprintf(stderr, PROG ": rank %u: building its dump: %s\n", r->rank,
				strerror(-rc));
			return;
		}
	}
	struct fr_msg_dump_data d;
	size_t off = 0;

	memset(&d, 0, sizeof(d));
	snprintf(d.incident, sizeof(d.incident), "%s", req->incident);
	d.total = len;
	do {
		size_t chunk = len - off < FR_WIRE_DUMP_CHUNK ? len - off : FR_WIRE_DUMP_CHUNK;

		d.offset = off;
		d.len = (uint32_t)chunk;
		d.data = (const uint8_t *)doc + off;
		if (QUEUE(r, dump_data, &d))
			break;
		off += chunk;
	} while (off < len);
	free(doc);
	r->dumped = true;
	G.dump_build_ms += mono_ms() - t_start;
	flush(r);
}

/* ---- input ---- */

static void on_frame(struct rank *r, const struct fr_wire_header *h, const uint8_t *p)
{
	switch (h->type) {
	case FR_MSG_CHALLENGE: {
		struct fr_msg_challenge c;

		if (r->state != R_CHALLENGED || fr_wire_challenge_decode(p, h->length, &c) < 0) {
			drop(r, "unexpected challenge");
			return;
		}
		became_up(r, c.nonce);
		return;
	}
	case FR_MSG_DUMP_REQUEST: {
		struct fr_msg_dump_request m;

		if (fr_wire_dump_request_decode(p, h->length, &m) < 0) {
			drop(r, "bad dump request");
			return;
		}
		answer_dump(r, &m);
		return;
	}
	case FR_MSG_ERROR: {
		struct fr_msg_error e;

		if (fr_wire_error_decode(p, h->length, &e) == 0 && G.refused++ < 10)
			fprintf(stderr, PROG ": rank %u refused (%u): %s\n", r->rank, e.code,
				e.message);
		drop(r, "refused");
		return;
	}
	default:
		drop(r, "unexpected frame");
	}
}

static void on_readable(struct rank *r)
{
	for (;;) {
		ssize_t n = recv(r->fd, r->in + r->ilen, sizeof(r->in) - r->ilen, 0);
		size_t off = 0;

		if (n == 0) {
			drop(r, "closed by the daemon");
			return;
		}
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (errno == EINTR)
				continue;
			drop(r, strerror(errno));
			return;
		}
		r->ilen += (size_t)n;
		for (;;) {
			struct fr_wire_frame f;
			int rc = fr_frame_next(r->in + off, r->ilen - off,
					       sizeof(r->in) - FR_WIRE_HEADER_SIZE, &f);

			if (rc == -EAGAIN)
				break;
			if (rc < 0) {
				drop(r, "bad frame from the daemon");
				return;
			}
			on_frame(r, &f.h, f.payload);
			if (r->fd < 0)
				return;
			off += f.size;
		}
		memmove(r->in, r->in + off, r->ilen - off);
		r->ilen -= off;
	}
}

/* ---- connections ---- */

static void start_connect(struct rank *r)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.u32 = (uint32_t)(r - G.r) };
	const struct addr *a = &G.addrs[r->addr];
	int one = 1;

	r->fd = socket(a->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (r->fd < 0) {
		fprintf(stderr, PROG ": socket: %s (raise ulimit -n)\n", strerror(errno));
		r->retry_ms = mono_ms() + RETRY_MS;
		return;
	}
	if (a->sa.ss_family != AF_UNIX)
		setsockopt(r->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(r->fd, (const struct sockaddr *)&a->sa, a->len) < 0 && errno != EINPROGRESS) {
		/* A Unix socket's full backlog (EAGAIN) clears as soon as the
		 * daemon accepts: no need for TCP's second of backoff. */
		r->retry_ms = mono_ms() + (errno == EAGAIN ? RETRY_BUSY_MS : RETRY_MS);
		close(r->fd);
		r->fd = -1;
		return;
	}
	r->state = R_CONNECTING;
	r->want_out = true;
	G.connecting++;
	epoll_ctl(G.ep, EPOLL_CTL_ADD, r->fd, &ev);
}

static void on_connected(struct rank *r)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(r->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
		drop(r, strerror(err ? err : errno));
		return;
	}
	set_out(r, false);
	if (G.token.len) {
		/* HELLO waits for the daemon's CHALLENGE. */
		r->state = R_CHALLENGED;
		return;
	}
	became_up(r, NULL);
}

static void on_event(struct rank *r, uint32_t events)
{
	if (r->fd < 0)
		return;
	if (r->state == R_CONNECTING) {
		if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			on_connected(r);
		return;
	}
	if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
		on_readable(r);
	if (r->fd >= 0 && (events & EPOLLOUT))
		flush(r);
}

/* ---- the timeline's clock ---- */

/*
 * Fixes the hang at `at_ms` (monotonic), once every rank is up or, with
 * --hang-at, at the start: the first world op due after it. Knowing it
 * this early lets the dumps be written ahead.
 */
static void choose_hang(uint64_t at_ms)
{
	uint64_t at = at_ms - G.t0_ms;
	uint64_t k = at / G.interval_ms / 2 + HISTORY_OPS + 1;
	struct dump_spec sp = { .rank = G.first, .incident = PH_INCIDENT, .reason = PH_REASON,
				.time_ns = PH_TIME, .now_ms = mono_ms(), .now_ns = real_ns() };

	while (op_comm(k) != C_WORLD)
		k++;
	G.hang_op = k;
	G.hang_at_ms = at_ms;
	sp.update = update_at_hang(sp.rank);
	G.bytes_per_op = learn_bytes_per_op(&sp);
	pre = calloc(G.count, sizeof(*pre));
	if (pre && pthread_create(&pre_thread, NULL, pre_main, NULL) == 0)
		pre_started = true;
}

static void plant_hang(void)
{
	/* When the job's first ranks enter the hung op (phase 0): what a
	 * script measures the timeout from. */
	int64_t enter_ms = (int64_t)G.t0_ms + (int64_t)(2 * G.hang_op - 2 * HISTORY_OPS) * G.interval_ms;
	double enter_s = (double)real_ns() / 1e9 + (double)(enter_ms - (int64_t)mono_ms()) / 1000;

	G.hang_planted = true;
	printf(PROG ": hang planted: rank %u never enters all_reduce #%" PRIu64
		    " on world (op %" PRIu64 ", entered from %.3f); the other ranks block in it\n",
	       G.hang_rank, seq_before(C_WORLD, G.hang_op + 1), G.hang_op, enter_s);
	fflush(stdout);
}

/* --hang-file: once the file holds a time (real-time seconds), the hang is
 * planted then. Every process of the job reads the same time. */
static void poll_hang_file(uint64_t now)
{
	static uint64_t next_ms;
	double at;
	FILE *f;

	if (!G.hang_file || G.hang_op || now < next_ms)
		return;
	next_ms = now + 100;
	f = fopen(G.hang_file, "r");
	if (!f)
		return;
	if (fscanf(f, "%lf", &at) == 1 && at > 0)
		choose_hang(mono_at(at));
	fclose(f);
}

static void tick(uint64_t now)
{
	for (uint32_t i = 0; i < G.count; i++) {
		struct rank *r = &G.r[i];

		if (r->state == R_IDLE) {
			/* A rank's first frames count as connecting until sent:
			 * otherwise a large world's COMMs of every rank would
			 * be queued here at once. */
			if (G.connecting + G.bursting < MAX_CONNECTING && now >= r->retry_ms)
				start_connect(r);
			continue;
		}
		if (r->state != R_UP)
			continue;
		/* A rank more than CATCH_UP_MAX updates behind (this process
		 * was starved) says where the timeline is in one PROGRESS, as
		 * a real rank's coalesced progress would: replaying each update
		 * would send several times the rate asked for. */
		if (is_due(r, r->update + CATCH_UP_MAX, now)) {
			uint64_t u = resume_update(r, now);

			if (u > r->update) {
				r->update = u;
				if (send_progress(r, true) == 0)
					r->update++;
			}
		}
		/* One update per tick at most: one a little behind catches up
		 * at the tick rate. */
		if (is_due(r, r->update, now)) {
			uint64_t k = r->update / 2;
			bool entering = r->update % 2 == 0;

			if (G.hang_op && (blocked_at(r, k) || (k == G.hang_op && !entering) ||
					  k > G.hang_op)) {
				r->blocked = true;
			} else if (send_progress(r, false) == 0) {
				r->update++;
			}
		}
		if (now >= r->next_hb_ms) {
			struct fr_msg_heartbeat hb = { .now_ns = real_ns() };

			QUEUE(r, heartbeat, &hb);
			r->next_hb_ms += HEARTBEAT_MS;
			if (r->next_hb_ms < now)
				r->next_hb_ms = now + HEARTBEAT_MS;
		}
		if (r->olen > r->ooff && !r->want_out)
			flush(r);
	}
	if (!G.hang_planted && G.hang_op && now >= G.hang_at_ms)
		plant_hang();
}

static void report_dumps(uint64_t now)
{
	uint32_t done = 0;

	if (!G.dumps_requested || G.dumps_done == G.count)
		return;
	for (uint32_t i = 0; i < G.count; i++)
		if (G.r[i].dumped && G.r[i].state == R_UP && G.r[i].ooff == G.r[i].olen)
			done++;
	if (done == G.count && G.dumps_done != done) {
		printf(PROG ": dumps uploaded: %u of %u for %s in %.2f s (requests over %.2f s; "
			    "%.2f s spent answering here, %u of them written ahead)\n",
		       done, G.count, G.incident, (double)(now - G.dump_first_ms) / 1000,
		       (double)(G.dump_last_ms - G.dump_first_ms) / 1000,
		       (double)G.dump_build_ms / 1000, G.dumps_ready);
		fflush(stdout);
	}
	G.dumps_done = done;
}

/* ---- main ---- */

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: " PROG " --addr HOST:PORT|unix:PATH [--addr ...] [OPTIONS]\n"
		"Simulates N flightrec agents from one process.\n\n"
		"  --addr ADDR           a daemon; given again, the ranks are spread over them,\n"
		"                        a contiguous block each, in order\n"
		"  --ranks N             the job's ranks (default 4096)\n"
		"  --first-rank F        simulate ranks F.. only (default 0)\n"
		"  --count C             ... C of them (default N - F)\n"
		"  --ranks-per-host K    ranks name host node<rank / K> in HELLO (default 8)\n"
		"  --job ID              job id (default load)\n"
		"  --epoch T             the job's timeline starts at T (real-time seconds;\n"
		"                        default: now): processes of one job share it\n"
		"  --rate N              PROGRESS updates per second per rank (default 10)\n"
		"  --hang-after SECONDS  plant the hang this long after all are up (default 15; <0: never)\n"
		"  --hang-at T           plant it at T (real-time seconds) instead\n"
		"  --hang-file FILE      plant it at the time FILE holds, once it exists\n"
		"  --hang-rank R         the rank that stops (default N/2 + 5 mod N)\n"
		"  --dump-size BYTES     largest dump per rank (default 65536, at most 1 MiB)\n"
		"  --dump-members-max M  a communicator of more members is dumped with its size\n"
		"                        only (default: every list in full)\n"
		"  --comm-lists          send each communicator as COMM with every member, as\n"
		"                        agents before protocol 5 did (default: COMM_RUNS\n"
		"                        where that is shorter)\n"
		"  --token-file FILE     prove this token when the daemon challenges\n"
		"  --duration SECONDS    exit after this long (default: at SIGTERM)\n");
}

/* Adds ADDR (HOST:PORT, [V6]:PORT or unix:PATH) to G.addrs. */
static int parse_addr(const char *addr)
{
	char host[256], port[16];
	const char *colon = strrchr(addr, ':');
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	struct addr *a;
	size_t hl;
	int rc;

	if (G.naddrs == ADDRS_MAX)
		return -E2BIG;
	a = &G.addrs[G.naddrs];
	if (strncmp(addr, "unix:", 5) == 0) {
		struct sockaddr_un *un = (struct sockaddr_un *)&a->sa;

		if (strlen(addr + 5) >= sizeof(un->sun_path) || !addr[5])
			return -EINVAL;
		un->sun_family = AF_UNIX;
		snprintf(un->sun_path, sizeof(un->sun_path), "%s", addr + 5);
		a->len = sizeof(*un);
		G.naddrs++;
		return 0;
	}
	if (!colon || colon == addr || strlen(colon + 1) >= sizeof(port))
		return -EINVAL;
	hl = (size_t)(colon - addr);
	if (addr[0] == '[' && colon[-1] == ']') {
		addr++;
		hl -= 2;
	}
	if (hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, addr, hl);
	host[hl] = '\0';
	snprintf(port, sizeof(port), "%s", colon + 1);
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc) {
		fprintf(stderr, PROG ": %s: %s\n", addr, gai_strerror(rc));
		return -EINVAL;
	}
	memcpy(&a->sa, ai->ai_addr, ai->ai_addrlen);
	a->len = ai->ai_addrlen;
	freeaddrinfo(ai);
	G.naddrs++;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "addr", required_argument, NULL, 'a' },
		{ "ranks", required_argument, NULL, 'n' },
		{ "first-rank", required_argument, NULL, 'f' },
		{ "count", required_argument, NULL, 'c' },
		{ "ranks-per-host", required_argument, NULL, 'k' },
		{ "job", required_argument, NULL, 'j' },
		{ "epoch", required_argument, NULL, 'e' },
		{ "rate", required_argument, NULL, 'r' },
		{ "hang-after", required_argument, NULL, 'H' },
		{ "hang-at", required_argument, NULL, 'A' },
		{ "hang-file", required_argument, NULL, 'F' },
		{ "hang-rank", required_argument, NULL, 'R' },
		{ "dump-size", required_argument, NULL, 's' },
		{ "dump-members-max", required_argument, NULL, 'm' },
		{ "comm-lists", no_argument, NULL, 'L' },
		{ "token-file", required_argument, NULL, 't' },
		{ "duration", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *token_file = NULL;
	long hang_rank = -1, count = -1;
	double epoch = -1, hang_at = -1;
	struct epoll_event evs[256];
	bool bad_addr = false;
	int c;

	G.ranks = 4096;
	G.rate = 10;
	G.hang_after_s = 15;
	G.dump_size = 64 << 10;
	G.dump_members_max = UINT32_MAX;
	G.ranks_per_host = 8;
	G.duration_s = -1;
	G.addrs = calloc(ADDRS_MAX, sizeof(*G.addrs));
	if (!G.addrs) {
		perror(PROG);
		return 1;
	}
	snprintf(G.job, sizeof(G.job), "load");
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			if (parse_addr(optarg) < 0) {
				fprintf(stderr, PROG ": bad --addr %s\n", optarg);
				bad_addr = true;
			}
			break;
		case 'n': G.ranks = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'f': G.first = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'c': count = strtol(optarg, NULL, 10); break;
		case 'k': G.ranks_per_host = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'j': snprintf(G.job, sizeof(G.job), "%s", optarg); break;
		case 'e': epoch = strtod(optarg, NULL); break;
		case 'r': G.rate = strtod(optarg, NULL); break;
		case 'H': G.hang_after_s = strtod(optarg, NULL); break;
		case 'A': hang_at = strtod(optarg, NULL); break;
		case 'F': G.hang_file = optarg; break;
		case 'R': hang_rank = strtol(optarg, NULL, 10); break;
		case 's': G.dump_size = strtoul(optarg, NULL, 10); break;
		case 'm': G.dump_members_max = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'L': G.comm_lists = true; break;
		case 't': token_file = optarg; break;
		case 'd': G.duration_s = strtod(optarg, NULL); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (count < 0 && G.first < G.ranks)
		count = G.ranks - G.first;
	if (bad_addr || !G.naddrs || G.ranks < 2 || G.ranks > (1u << 20) || G.rate <= 0 ||
	    G.rate > 1000 || G.dump_size < 1024 || G.dump_size > DUMP_SIZE_MAX ||
	    hang_rank >= (long)G.ranks || !fr_wire_valid_name(G.job) || count < 1 ||
	    G.first + (uint64_t)count > G.ranks || (uint64_t)count < G.naddrs ||
	    !G.ranks_per_host) {
		usage(stderr);
		return 2;
	}
	G.count = (uint32_t)count;
	G.hang_rank = hang_rank >= 0 ? (uint32_t)hang_rank : (G.ranks / 2 + 5) % G.ranks;
	if (token_file) {
		const char *why = NULL;
		bool others;
		int rc = fr_wire_token_read(token_file, &G.token, &why, &others);

		if (rc) {
			fprintf(stderr, PROG ": %s: %s\n", token_file, why ? why : strerror(-rc));
			return 1;
		}
	}
	G.tp = G.ranks % 8 == 0 ? 8 : G.ranks % 4 == 0 ? 4 : G.ranks % 2 == 0 ? 2 : 1;
	G.dp = G.ranks / G.tp;
	G.interval_ms = (uint32_t)(1000 / G.rate);
	if (!G.interval_ms)
		G.interval_ms = 1;
	G.r = calloc(G.count, sizeof(*G.r));
	G.ep = epoll_create1(EPOLL_CLOEXEC);
	if (!G.r || G.ep < 0) {
		perror(PROG);
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	G.start_ms = G.t0_ms = mono_ms();
	if (epoch >= 0)
		G.t0_ms = mono_at(epoch);
	for (uint32_t i = 0; i < G.count; i++) {
		G.r[i].fd = -1;
		G.r[i].rank = G.first + i;
		G.r[i].addr = (uint32_t)((uint64_t)i * G.naddrs / G.count);
		/* Ranks enter an op within the first half of an update interval
		 * of each other, so every op completes after all have entered. */
		G.r[i].phase_ms = (uint32_t)(mix(G.r[i].rank) % (G.interval_ms / 2 + 1));
	}
	if (hang_at >= 0)
		choose_hang(mono_at(hang_at));
	while (!stop) {
		uint64_t now = mono_ms();
		int n;

		if (G.duration_s >= 0 && now - G.start_ms >= (uint64_t)(G.duration_s * 1000))
			break;
		poll_hang_file(now);
		tick(now);
		report_dumps(now);
		n = epoll_wait(G.ep, evs, 256, TICK_MS);
		for (int i = 0; i < n; i++)
			on_event(&G.r[evs[i].data.u32], evs[i].events);
	}
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	printf(PROG ": %" PRIu64 " frames, %" PRIu64 " progress updates, %" PRIu64
		    " disconnects, %" PRIu64 " refusals; %.1f s CPU over %.1f s\n",
	       G.frames, G.updates, G.disconnects, G.refused,
	       (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
		       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6,
	       (double)(mono_ms() - G.start_ms) / 1000);
	stop = 1;
	if (pre_started)
		pthread_join(pre_thread, NULL);
	for (uint32_t i = 0; pre && i < G.count; i++)
		free(pre[i].doc);
	free(pre);
	for (uint32_t i = 0; i < G.count; i++) {
		if (G.r[i].fd >= 0)
			close(G.r[i].fd);
		free(G.r[i].out);
	}
	free(G.r);
	free(G.addrs);
	close(G.ep);
	return 0;
}
