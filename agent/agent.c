/*
 * Agent life cycle, settings, identity and the communicator table.
 *
 * Loading the library does nothing: no thread, no socket, no file. The agent
 * starts when a hook family sees its library initialise (MPI_Init), so that
 * launchers, compilers and other programs that inherit LD_PRELOAD run
 * untouched. A forked child stops recording at once and never uses the
 * parent's connection; it starts afresh only if it initialises a library
 * itself.
 */
#include "agent.h"
#include "crash.h"
#include "link.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../include/flightrec.h"
#include "../protocol/hash.h"

struct fr_agent fr_agent;

static bool started;
static pid_t started_pid;
/* The status exit() was called with (on_exit()), for EXIT. */
static int exit_status;
static bool exit_status_known;

static const char *env_first(const char *const *names)
{
	for (; *names; names++) {
		const char *v = getenv(*names);

		if (v && *v)
			return v;
	}
	return NULL;
}

static bool parse_u32(const char *s, uint32_t *out)
{
	char *end;
	unsigned long v;

	if (!s)
		return false;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

/* Job ids name directories: keep what fr_wire_valid_name() allows,
 * replace the rest, so any launcher's id becomes a valid one. */
static void set_job(char *dst, const char *src)
{
	size_t i;

	for (i = 0; src[i] && i < FR_JOB_MAX; i++)
		dst[i] = fr_wire_name_char(src[i]) ? src[i] : '_';
	dst[i] = '\0';
	if (dst[0] == '.' || dst[0] == '\0')
		dst[0] = '_';
}

static void read_settings(struct fr_settings *s)
{
	const char *v;
	uint32_t u;

	memset(s, 0, sizeof(*s));
	v = getenv("FLIGHTREC_ADDR");
	if (v)
		snprintf(s->addr, sizeof(s->addr), "%s", v);
	/* A directory of this user's own by default: /tmp is every user's, and
	 * a shared default would let one user's dumps land in (or be blocked
	 * by) another's. */
	v = getenv("FLIGHTREC_DUMP_DIR");
	if (v && *v)
		snprintf(s->dump_dir, sizeof(s->dump_dir), "%s", v);
	else if ((v = getenv("XDG_RUNTIME_DIR")) && v[0] == '/')
		snprintf(s->dump_dir, sizeof(s->dump_dir), "%s/flightrec", v);
	else
		snprintf(s->dump_dir, sizeof(s->dump_dir), "/tmp/flightrec-%u", (unsigned)geteuid());
	s->ring_capacity = parse_u32(getenv("FLIGHTREC_BUFFER"), &u) && u > 0 ? u : 2048;
	if (s->ring_capacity > FR_MAX_RING) {
		fprintf(stderr, "flightrec: FLIGHTREC_BUFFER=%u is over the limit; using %u entries\n",
			u, FR_MAX_RING);
		s->ring_capacity = FR_MAX_RING;
	}
	s->timeout_s = 600;
	v = getenv("FLIGHTREC_TIMEOUT");
	if (v && *v) {
		char *end;
		double t = strtod(v, &end);

		if (end != v && !*end && t > 0)
			s->timeout_s = t;
	}
	s->stack_signal = SIGRTMIN + 7;
	if (parse_u32(getenv("FLIGHTREC_STACK_SIGNAL"), &u) && (int)u >= SIGRTMIN &&
	    (int)u <= SIGRTMAX)
		s->stack_signal = (int)u;
}

static void read_identity(struct fr_identity *id, const char *comm_lib, int mpi_rank,
			  int mpi_size)
{
	static const char *const rank_vars[] = { "FLIGHTREC_RANK", "OMPI_COMM_WORLD_RANK",
		"PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "RANK", NULL };
	static const char *const size_vars[] = { "FLIGHTREC_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE",
		"PMI_SIZE", "SLURM_NTASKS", "WORLD_SIZE", NULL };
	static const char *const job_vars[] = { "FLIGHTREC_JOB", "SLURM_JOB_ID",
		"TORCHELASTIC_RUN_ID", NULL };
	const char *v;
	char buf[FR_JOB_MAX + 16];

	memset(id, 0, sizeof(*id));
	if (!parse_u32(env_first(rank_vars), &id->rank))
		id->rank = mpi_rank >= 0 ? (uint32_t)mpi_rank : 0;
	if (!parse_u32(env_first(size_vars), &id->world_size) || id->world_size == 0)
		id->world_size = mpi_size > 0 ? (uint32_t)mpi_size : 1;
	v = env_first(job_vars);
	if (!v && (v = getenv("PMIX_NAMESPACE")) && *v) {
		/* Open MPI / PMIx: the namespace is shared by all ranks of a job. */
		snprintf(buf, sizeof(buf), "mpi-%s", v);
		v = buf;
	}
	set_job(id->job, v ? v : "default");
	if (gethostname(id->host, sizeof(id->host) - 1) != 0)
		snprintf(id->host, sizeof(id->host), "unknown");
	id->pid = (uint32_t)getpid();
	id->start_ns = fr_now_ns();
	snprintf(id->comm_lib, sizeof(id->comm_lib), "%s", comm_lib);
}

static void note_exit_status(int status, void *arg)
{
	(void)arg;
	exit_status = status;
	exit_status_known = true;
}

/* In a forked child the parent's link thread does not exist and its socket
 * is not ours: record nothing until the child initialises a library. */
static void atfork_child(void)
{
	__atomic_store_n(&fr_agent.active, false, __ATOMIC_RELAXED);
	if (started)
		fr_link_forget_in_child();
	fr_crash_forget_in_child();
	started = false;
}

void fr_agent_add_names(unsigned base, const char *const *dtypes, unsigned ndtypes,
			const char *const *redops, unsigned nredops)
{
	for (unsigned i = 0; i < ndtypes && base + i < FR_NAMES_MAX; i++)
		fr_agent.dtype_names[base + i] = dtypes[i];
	for (unsigned i = 0; i < nredops && base + i < FR_NAMES_MAX; i++)
		fr_agent.redop_names[base + i] = redops[i];
}

int fr_agent_start(const char *comm_lib, int world_rank, int world_size)
{
	static bool atfork_set;
	int rc;

	if (started && started_pid == getpid())
		return 0;
	read_settings(&fr_agent.cfg);
	read_identity(&fr_agent.id, comm_lib, world_rank, world_size);
	/* A child that re-initialises keeps the parent's table and ring memory
	 * but starts a fresh recording. */
	if (fr_agent.ring.slots)
		fr_ring_destroy(&fr_agent.ring);
	fr_clock_init();
	rc = fr_ring_init(&fr_agent.ring, fr_agent.cfg.ring_capacity);
	if (rc)
		return rc;
	if (!atfork_set) {
		pthread_atfork(NULL, NULL, atfork_child);
		/* Registered after the library's own (MPI_Init's): runs before
		 * them, and before the destructors that say goodbye. */
		on_exit(note_exit_status, NULL);
		atfork_set = true;
	}
	started = true;
	started_pid = getpid();
	__atomic_store_n(&fr_agent.active, true, __ATOMIC_RELEASE);
	/* After the library's own initialisation: a handler it installed
	 * (Open MPI's backtrace) is kept and called first. */
	fr_crash_install();
	rc = fr_link_start();
	if (rc)
		fprintf(stderr, "flightrec: rank %u: link thread not started (%s); recording locally only\n",
			fr_agent.id.rank, strerror(-rc));
	return 0;
}

/*
 * The process is ending while the agent records: it did not finalise MPI
 * (MPI_Finalize stops the agent), or it uses NCCL, which has no finalise.
 * The daemon hears EXIT, with the status when it is known, rather than
 * BYE (link.c): an exit with work in flight or a non-zero status is a
 * rank its peers will wait for in vain. In a forked or vfork()ed child the
 * recording is the parent's: nothing.
 */
static void agent_exiting(bool code_known, int code, bool underscore)
{
	bool finalised;

	if (!started || started_pid != getpid())
		return;
	/* NCCL whose every communicator was destroyed (an MPI process here
	 * has not finalised). */
	finalised = !strstr(fr_agent.id.comm_lib, "MPI") && fr_nccl_live_comms() == 0;
	fr_link_exit(code, code_known, underscore, finalised);
	__atomic_store_n(&fr_agent.active, false, __ATOMIC_RELAXED);
	started = false;
}

/* A process that exits without finalising a library (NCCL has no
 * finalise; MPI programs may just exit) still says goodbye, or EXIT. */
__attribute__((destructor)) static void agent_at_exit(void)
{
	agent_exiting(exit_status_known, exit_status, false);
}

/*
 * _exit() and _Exit() run no atexit handler and no destructor: the agent
 * says EXIT from here, then ends the process as they would (exit_group,
 * which is what both are). The C library's own exit() reaches its _exit
 * internally, not through these. They carry the C library's version (the
 * architecture's base one, the only one both have): the dynamic linker
 * binds a versioned reference only to a definition of that version
 * (dlsym.c says the same of dlsym). Elsewhere they are not hooked.
 */
#if defined(__x86_64__) || defined(__aarch64__)
#if defined(__x86_64__)
#define EXIT_VERSION "GLIBC_2.2.5"
#else
#define EXIT_VERSION "GLIBC_2.17"
#endif
__attribute__((visibility("default"), noreturn)) void fr_hook_exit(int status);
__attribute__((visibility("default"), noreturn)) void fr_hook_Exit(int status);
__asm__(".symver fr_hook_exit, _exit@@" EXIT_VERSION "\n"
	".symver fr_hook_Exit, _Exit@@" EXIT_VERSION "\n");

void fr_hook_exit(int status)
{
	agent_exiting(true, status, true);
	for (;;)
		syscall(SYS_exit_group, status);
}

void fr_hook_Exit(int status)
{
	fr_hook_exit(status);
}
#endif

void fr_agent_stop(void)
{
	if (!started || started_pid != getpid())
		return;
	fr_link_stop();
	__atomic_store_n(&fr_agent.active, false, __ATOMIC_RELAXED);
	started = false;
}

void fr_comm_derive_id(char out[FR_COMM_ID_MAX + 1], const char *parent, uint64_t seq,
		       char kind, long colour)
{
	char full[FR_COMM_ID_MAX * 2 + 64];
	int n = snprintf(full, sizeof(full), "%s/%llu%c%ld", parent, (unsigned long long)seq,
			 kind, colour);

	if (n > 0 && n <= FR_COMM_ID_MAX) {
		memcpy(out, full, (size_t)n + 1);
		return;
	}
	snprintf(out, FR_COMM_ID_MAX + 1, "h%016llx",
		 (unsigned long long)fr_fnv1a(FR_FNV_INIT, full, strlen(full)));
}

struct fr_comm_rec *fr_comm_register(const char *id, const char *desc, uint32_t rank,
				     uint32_t size, const uint32_t *members)
{
	uint32_t n = __atomic_load_n(&fr_agent.ncomms, __ATOMIC_ACQUIRE);
	struct fr_comm_rec *c;

	if (n >= FR_MAX_COMMS || size == 0)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->members = calloc(size, sizeof(*c->members));
	c->p2p_send = calloc(size, sizeof(*c->p2p_send));
	c->p2p_recv = calloc((size_t)size + 1, sizeof(*c->p2p_recv));
	if (!c->members || !c->p2p_send || !c->p2p_recv)
		goto out_free;
	memcpy(c->members, members, size * sizeof(*members));
	snprintf(c->id, sizeof(c->id), "%s", id);
	snprintf(c->desc, sizeof(c->desc), "%s", desc);
	c->rank = rank;
	c->size = size;
	/* Registration happens outside the hot path, but two threads may
	 * create communicators at once: claim the slot atomically. */
	n = __atomic_fetch_add(&fr_agent.ncomms, 0, __ATOMIC_ACQUIRE);
	for (;;) {
		if (n >= FR_MAX_COMMS)
			goto out_free;
		c->index = (uint16_t)n;
		if (__atomic_compare_exchange_n(&fr_agent.ncomms, &n, n + 1, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			break;
	}
	__atomic_store_n(&fr_agent.comms[c->index], c, __ATOMIC_RELEASE);
	return c;

out_free:
	free(c->members);
	free(c->p2p_send);
	free(c->p2p_recv);
	free(c);
	return NULL;
}

void fr_op_enter(struct fr_ticket *t, struct fr_comm_rec *c, enum fr_op_type type,
		 unsigned flags, int32_t peer, uint64_t count, uint8_t dtype,
		 uint32_t dtype_size, uint8_t redop)
{
	struct fr_rec rec;

	t->comm = c;
	t->collective = !(flags & FR_REC_P2P);
	if (t->collective) {
		/* MPI and NCCL require collectives on one communicator to be
		 * issued in one order by one thread at a time, so a plain
		 * increment suffices; the atomic store is for the reader. */
		t->seq = __atomic_load_n(&c->coll_entered, __ATOMIC_RELAXED) + 1;
		__atomic_store_n(&c->coll_entered, t->seq, __ATOMIC_RELAXED);
	} else {
		uint64_t *ctr;

		if (type == FR_OP_RECV)
			ctr = &c->p2p_recv[peer >= 0 && (uint32_t)peer < c->size ? (uint32_t)peer : c->size];
		else
			ctr = &c->p2p_send[peer >= 0 && (uint32_t)peer < c->size ? (uint32_t)peer : 0];
		t->seq = __atomic_add_fetch(ctr, 1, __ATOMIC_RELAXED);
	}
	rec.seq = t->seq;
	rec.count = count;
	rec.t_entered = fr_ticks();
	rec.t_completed = 0;
	rec.comm = c->index;
	rec.type = (uint8_t)type;
	rec.state = FR_STATE_ENTERED;
	rec.flags = (uint8_t)flags;
	rec.dtype = dtype;
	rec.redop = redop;
	rec.peer = peer;
	rec.dtype_size = dtype_size;
	t->record = fr_ring_push(&fr_agent.ring, &rec);
}

void fr_op_complete_record(uint64_t record, uint16_t comm, uint64_t seq, bool collective)
{
	fr_ring_complete(&fr_agent.ring, record, fr_ticks());
	if (collective) {
		struct fr_comm_rec *c = fr_agent.comms[comm];
		uint64_t prev = __atomic_load_n(&c->coll_completed, __ATOMIC_RELAXED);

		/* Non-blocking collectives may complete out of order, and in
		 * Waits on different threads: keep the highest. */
		while (seq > prev && !__atomic_compare_exchange_n(&c->coll_completed, &prev, seq,
								  true, __ATOMIC_RELAXED,
								  __ATOMIC_RELAXED))
			;
	}
}

void fr_op_complete(const struct fr_ticket *t)
{
	fr_op_complete_record(t->record, t->comm->index, t->seq, t->collective);
}

/* Public API (include/flightrec.h). */

__attribute__((visibility("default"))) const char *fr_version(void)
{
	return FLIGHTREC_VERSION;
}

__attribute__((visibility("default"))) int fr_dump_now(const char *reason)
{
	if (!fr_is_active())
		return -ENOTCONN;
	return fr_link_request_dump(reason ? reason : "requested by the application");
}
