/*
 * Fatal signals: the rank that dies is named, with the signal, the address
 * and the stack, and then dies exactly as it would have without the agent.
 *
 * Chaining. The handler saved at install (or at a later re-check) is the
 * application's, and it runs first, as if ours were not there: Python's
 * faulthandler prints its traceback, Open MPI its backtrace, a JVM handles
 * its own null checks. What happens next tells whether the signal is fatal:
 *   - the previous handler re-raised it (it is pending now, as faulthandler
 *     and Open MPI do, having restored the default): fatal;
 *   - a fault (SEGV, BUS, FPE, ILL with a kernel si_code) and the handler
 *     returned: it may have fixed it (a JVM moves the program counter), so
 *     we return too; the same fault again at the same place on the same
 *     thread is fatal;
 *   - SIGABRT the process sent itself (abort(), which kills whatever the
 *     handler does): fatal;
 *   - anything else the handler returned from: handled, nothing recorded.
 * With the default action before us the signal is fatal; ignored, it is
 * ignored unless the kernel raised it (it kills then anyway).
 *
 * A fatal signal is recorded once per process (a second thread crashing
 * meanwhile waits for the first to finish), then the default action is
 * restored and the signal raised again where returning would not raise it
 * (a signal sent by kill or raise, SIGABRT, SIGTRAP, SIGSYS): a fault
 * simply happens again on return. The exit status, and the core dump, are
 * the default action's.
 *
 * A handler the application installs later over ours: one that chains to
 * the previous handler (faulthandler restores it and raises again) reaches
 * ours; one that does not would hide the crash, so the link thread checks
 * every tick and installs ours over it again, keeping it as the one called
 * first (at most MAX_REINSTALLS times per signal, said once: an
 * application that fights for the signal keeps it). sigaction() is not
 * intercepted: the application always sees and restores what it installed.
 *
 * In the handler only async-signal-safe code runs: it unwinds its own stack
 * (stacks.c), fills a static CRASH message and wakes the link thread, which
 * names the frames (reading symbol tables allocates), sends the frame and
 * writes the local dump, then answers the incident the daemon opens for
 * the crash with this rank's dump (link.c: 0.5 to 1 s, so that the other
 * ranks, asked at once, answer before the launcher kills them), while the
 * handler waits at most LINK_WAIT_MS for the frame and DUMP_WAIT_MS for
 * the rest. A link thread that does not
 * answer in time (it may block on a lock the crashed thread holds, or the
 * link thread itself crashed) is overtaken: the handler encodes the frame
 * without names into a static buffer and writes it itself, if the
 * connection is between frames. The application waits for nothing else: a
 * process without a daemon, or whose daemon predates CRASH, dies as soon as
 * its local dump is written.
 *
 * Alternate stack: installed for the thread that starts the agent (the
 * main thread, usually) unless it has one. Other threads run the handler on
 * their own alternate stack if they set one, else on their stack: a stack
 * overflow in such a thread dies of the default action unrecorded.
 */
#include "crash.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "../dumps/trace.h"
#include "../protocol/wire.h"
#include "agent.h"
#include "link.h"
#include "stacks.h"
#include "symbols.h"

#define ALT_STACK_SIZE (256u << 10)
#define LINK_WAIT_MS 300
#define DUMP_WAIT_MS 1500
#define MAX_REINSTALLS 8
#define NFATAL 7
/* The largest CRASH frame: every name at its limit. */
#define CRASH_FRAME_MAX                                                 \
	(FR_WIRE_HEADER_SIZE + 38 +                                      \
	 FR_WIRE_CRASH_FRAMES_MAX * (8 + 8 + 2 + FR_WIRE_SYMBOL_MAX))

static const int fatal[NFATAL] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS };

/* What was installed before ours, per signal; written before ours is
 * installed, read by the handler. */
static struct sigaction previous[NFATAL];
static bool ours[NFATAL];
static unsigned reinstalls[NFATAL];
static bool said_fight;

/*
 * Who may write on the connection. GATE_LINK while the link thread has
 * bytes queued (a frame may be half-written); GATE_CRASH once a crash
 * frame is being or was written, after which the link sends nothing more.
 */
enum { GATE_IDLE, GATE_LINK, GATE_CRASH };
static int gate = GATE_LINK;    /* atomic */
static int crash_fd = -1;       /* atomic */

/* The crash being reported, in phases (atomic). */
enum {
	PHASE_NONE,     /* no crash */
	PHASE_CAPTURED, /* the handler filled `raw`; the link thread may take it */
	PHASE_NAMING,   /* the link thread names and sends it */
	PHASE_SENT,     /* sent (or not sendable); the local dump is being written */
	PHASE_DUMPED,   /* the link thread is done */
	PHASE_HANDLER,  /* the handler gave up waiting and went on alone */
};
static int phase;               /* atomic */
static int taken;               /* atomic: a thread is reporting */
static int done;                /* atomic: the report is over */
static struct fr_msg_crash raw;   /* the handler's: frames without names */
static struct fr_msg_crash named; /* the link thread's copy, with names */
static uint8_t frame_buf[CRASH_FRAME_MAX];

/* A fault the previous handler returned from, on this thread: the same one
 * again is fatal. Initial-exec TLS: no allocation in the handler. */
static __thread __attribute__((tls_model("initial-exec"))) struct {
	int depth;
	int sig;
	uint64_t ip;
	uint64_t addr;
} here;

static int slot_of(int sig)
{
	for (int i = 0; i < NFATAL; i++)
		if (fatal[i] == sig)
			return i;
	return -1;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void nap_ms(void)
{
	struct timespec ts = { 0, 1000000 };

	nanosleep(&ts, NULL);
}

static uint64_t context_ip(const void *uc)
{
#if defined(__x86_64__)
	return uc ? (uint64_t)((const ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP] : 0;
#else
	(void)uc;
	return 0;
#endif
}

/* Writes all of buf on a non-blocking socket, waiting at most 200 ms for
 * room. Async-signal-safe. */
static void write_all(int fd, const uint8_t *buf, size_t len)
{
	uint64_t until = mono_ms() + 200;

	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n > 0) {
			buf += n;
			len -= (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && errno == EAGAIN && mono_ms() < until) {
			nap_ms();
		} else {
			return;
		}
	}
}

/* Encodes `m` and writes it, if the connection is between frames and the
 * daemon reads CRASH. Async-signal-safe. */
static void send_direct(const struct fr_msg_crash *m)
{
	int expected = GATE_IDLE;
	int fd, n;

	if (!__atomic_compare_exchange_n(&gate, &expected, GATE_CRASH, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return;
	fd = __atomic_load_n(&crash_fd, __ATOMIC_ACQUIRE);
	n = fr_wire_crash_encode(m, frame_buf, sizeof(frame_buf));
	if (fd >= 0 && n > 0)
		write_all(fd, frame_buf, (size_t)n);
}

/* Records the crash and hands it to the link thread; waits (bounded) for
 * it to be sent and dumped. Async-signal-safe. */
static void report(int sig, const siginfo_t *si, const void *uc)
{
	struct timespec now;
	uint64_t ips[FR_WIRE_CRASH_FRAMES_MAX];
	uint64_t until;
	int n, expected;

	clock_gettime(CLOCK_REALTIME, &now);
	raw.signo = (uint32_t)sig;
	raw.code = si ? si->si_code : 0;
	raw.fault_addr = si && sig != SIGABRT && sig != SIGSYS ? (uint64_t)(uintptr_t)si->si_addr : 0;
	raw.time_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	raw.ring_head = fr_agent.ring.slots ? fr_ring_head(&fr_agent.ring) : 0;
	raw.tid = (uint32_t)syscall(SYS_gettid);
	n = fr_stacks_unwind_context(ips, FR_WIRE_CRASH_FRAMES_MAX, uc);
	raw.nframes = (uint16_t)n;
	for (int i = 0; i < n; i++) {
		raw.frames[i].ip = ips[i];
		raw.frames[i].offset = 0;
		raw.frames[i].name[0] = '\0';
	}
	__atomic_store_n(&phase, PHASE_CAPTURED, __ATOMIC_RELEASE);
	if (fr_link_wake_from_signal()) {
		until = mono_ms() + LINK_WAIT_MS;
		while (__atomic_load_n(&phase, __ATOMIC_ACQUIRE) < PHASE_SENT && mono_ms() < until)
			nap_ms();
	}
	/* Not sent in time: take it back from the link thread, if it has not
	 * sent it meanwhile, and send it without names. */
	expected = __atomic_load_n(&phase, __ATOMIC_ACQUIRE);
	while (expected < PHASE_SENT &&
	       !__atomic_compare_exchange_n(&phase, &expected, PHASE_HANDLER, false,
					    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		;
	if (expected < PHASE_SENT) {
		send_direct(&raw);
		return;
	}
	until = mono_ms() + DUMP_WAIT_MS;
	while (__atomic_load_n(&phase, __ATOMIC_ACQUIRE) != PHASE_DUMPED && mono_ms() < until)
		nap_ms();
}

static bool pending(int sig)
{
	sigset_t set;

	return sigpending(&set) == 0 && sigismember(&set, sig) == 1;
}

/* Whether a signal the previous handler returned from was fatal after all. */
static bool fatal_after_return(int sig, const siginfo_t *si, const void *uc)
{
	uint64_t ip = context_ip(uc), addr = (uint64_t)(uintptr_t)si->si_addr;
	bool fault = si->si_code > 0 &&
		     (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL);

	if (pending(sig))
		return true;
	if (sig == SIGABRT && si->si_pid == getpid())
		return true;
	if (!fault)
		return false;
	if (here.sig == sig && here.ip == ip && here.addr == addr)
		return true;
	here.sig = sig;
	here.ip = ip;
	here.addr = addr;
	return false;
}

static void call_previous(const struct sigaction *p, int sig, siginfo_t *si, void *uc)
{
	if (p->sa_flags & SA_RESETHAND) {
		struct sigaction dfl;

		/* What the kernel does before calling such a handler. */
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		sigaction(sig, &dfl, NULL);
	}
	if (p->sa_flags & SA_SIGINFO)
		p->sa_sigaction(sig, si, uc);
	else
		p->sa_handler(sig);
}

static void die_by_default(int sig, const siginfo_t *si)
{
	struct sigaction dfl;

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(sig, &dfl, NULL);
	if (!pending(sig) &&
	    (si->si_code <= 0 || sig == SIGABRT || sig == SIGTRAP || sig == SIGSYS))
		syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), sig);
	/* Returning delivers the pending signal, or faults again: the
	 * default action either way. */
}

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;
	int i = slot_of(sig);
	const struct sigaction *p;

	if (i < 0)
		goto out;
	/* Called again from within the chain (a previous handler that calls
	 * the one it replaced, which it found to be ours): the outer call
	 * decides. */
	if (here.depth++ > 0)
		goto out_depth;
	p = &previous[i];
	if (p->sa_handler == SIG_IGN) {
		if (si->si_code <= 0)
			goto out_depth; /* sent by someone, and ignored as asked */
	} else if (p->sa_handler != SIG_DFL) {
		call_previous(p, sig, si, uc);
		if (!fatal_after_return(sig, si, uc))
			goto out_depth;
	}
	if (__atomic_exchange_n(&taken, 1, __ATOMIC_ACQ_REL) == 0) {
		if (fr_is_active())
			report(sig, si, uc);
		__atomic_store_n(&done, 1, __ATOMIC_RELEASE);
	} else {
		/* Another thread reports; let it finish before dying. */
		uint64_t until = mono_ms() + LINK_WAIT_MS + DUMP_WAIT_MS + 100;

		while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE) && mono_ms() < until)
			nap_ms();
	}
	die_by_default(sig, si);
out_depth:
	here.depth--;
out:
	errno = saved;
}

static bool is_ours(const struct sigaction *sa)
{
	return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_fatal;
}

/* Installs ours over whatever `sig` has now, keeping that to call first. */
static bool install_one(int i)
{
	struct sigaction sa, cur;

	if (sigaction(fatal[i], NULL, &cur) != 0)
		return false;
	if (is_ours(&cur))
		return true;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fatal;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigfillset(&sa.sa_mask);
	/* The handler reads `previous` only once ours is installed. */
	previous[i] = cur;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	if (sigaction(fatal[i], &sa, NULL) != 0)
		return false;
	ours[i] = true;
	return true;
}

static void alt_stack(void)
{
	stack_t cur, ss;
	void *mem;

	if (sigaltstack(NULL, &cur) != 0 || !(cur.ss_flags & SS_DISABLE))
		return; /* the thread has its own */
	mem = mmap(NULL, ALT_STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		   0);
	if (mem == MAP_FAILED)
		return;
	ss.ss_sp = mem;
	ss.ss_size = ALT_STACK_SIZE;
	ss.ss_flags = 0;
	if (sigaltstack(&ss, NULL) != 0)
		munmap(mem, ALT_STACK_SIZE);
}

void fr_crash_install(void)
{
	if (getenv("FLIGHTREC_NO_CRASH_HANDLER"))
		return;
	alt_stack();
	for (int i = 0; i < NFATAL; i++)
		install_one(i);
}

void fr_crash_recheck(void)
{
	struct sigaction cur;

	for (int i = 0; i < NFATAL; i++) {
		if (!ours[i] || sigaction(fatal[i], NULL, &cur) != 0 || is_ours(&cur))
			continue;
		if (reinstalls[i] >= MAX_REINSTALLS) {
			if (!said_fight)
				fprintf(stderr, "flightrec: rank %u: the application keeps replacing the handler of signal %d; a crash by it may be reported as a disconnection\n",
					fr_agent.id.rank, fatal[i]);
			said_fight = true;
			continue;
		}
		reinstalls[i]++;
		install_one(i);
	}
}

void fr_crash_set_fd(int fd)
{
	if (fd < 0) {
		/* A handler writing now keeps the descriptor until done. */
		uint64_t until = mono_ms() + 250;
		int expected = GATE_IDLE;

		while (!__atomic_compare_exchange_n(&gate, &expected, GATE_LINK, false,
						    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) &&
		       expected != GATE_LINK && mono_ms() < until) {
			if (__atomic_load_n(&phase, __ATOMIC_ACQUIRE) == PHASE_NONE ||
			    __atomic_load_n(&done, __ATOMIC_ACQUIRE))
				break;
			expected = GATE_IDLE;
			nap_ms();
		}
	}
	__atomic_store_n(&crash_fd, fd, __ATOMIC_RELEASE);
}

bool fr_crash_wire_claim(void)
{
	int expected = GATE_IDLE;

	if (__atomic_compare_exchange_n(&gate, &expected, GATE_LINK, false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE))
		return true;
	return expected == GATE_LINK;
}

void fr_crash_wire_release(void)
{
	int expected = GATE_LINK;

	__atomic_compare_exchange_n(&gate, &expected, GATE_IDLE, false, __ATOMIC_ACQ_REL,
				    __ATOMIC_ACQUIRE);
}

/* Names the frames of `m` as dumps name them (symbols.c). */
static void name_frames(struct fr_msg_crash *m)
{
	for (unsigned i = 0; i < m->nframes; i++) {
		struct fr_wire_frame_sym *f = &m->frames[i];
		/* Outer frames hold return addresses: name the call. */
		uint64_t at = i > 0 ? f->ip - 1 : f->ip;
		uint64_t off;

		if (fr_symbolize((uintptr_t)at, f->name, sizeof(f->name), &off))
			f->offset = off + (f->ip - at);
		else
			f->name[0] = '\0';
	}
}

bool fr_crash_serve(int (*send)(void *buf, unsigned long len),
		    void (*save)(const char *incident, const char *reason))
{
	int expected = PHASE_CAPTURED;
	char incident[FR_INCIDENT_MAX + 1], reason[FR_REASON_MAX + 1], sname[16];
	struct fr_crash *c = NULL;
	const char *fn = NULL;
	int n;

	if (!__atomic_compare_exchange_n(&phase, &expected, PHASE_NAMING, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return false;
	named = raw;
	name_frames(&named);
	/* The handler may have given up on us meanwhile: it sends it. */
	if (__atomic_load_n(&phase, __ATOMIC_ACQUIRE) != PHASE_NAMING)
		return true;
	if (__atomic_load_n(&crash_fd, __ATOMIC_ACQUIRE) >= 0) {
		int g = GATE_IDLE;

		if (__atomic_compare_exchange_n(&gate, &g, GATE_LINK, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			/* Between frames: written at once, not left in a queue. */
			n = fr_wire_crash_encode(&named, frame_buf, sizeof(frame_buf));
			if (n > 0)
				write_all(crash_fd, frame_buf, (size_t)n);
			fr_crash_wire_release();
		} else if (g == GATE_LINK) {
			/* Behind the link's own bytes. */
			uint8_t *copy = malloc(sizeof(frame_buf));

			n = copy ? fr_wire_crash_encode(&named, copy, sizeof(frame_buf)) : -ENOMEM;
			if (n > 0)
				send(copy, (unsigned long)n);
			else
				free(copy);
		}
	}
	expected = PHASE_NAMING;
	if (!__atomic_compare_exchange_n(&phase, &expected, PHASE_SENT, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return true;
	if (fr_crash_from_wire(&c, &named) == 0)
		fn = fr_crash_function(c);
	snprintf(incident, sizeof(incident), "crash-%llu-rank%u",
		 (unsigned long long)(named.time_ns / 1000000000u), fr_agent.id.rank);
	snprintf(reason, sizeof(reason), "crash: %s (si_code %d) at 0x%llx%s%s",
		 fr_signal_name(named.signo, sname), named.code,
		 (unsigned long long)named.fault_addr, fn ? " in " : "", fn ? fn : "");
	fr_crash_free(c);
	fprintf(stderr, "flightrec: rank %u: %s; writing a local dump\n", fr_agent.id.rank,
		reason);
	save(incident, reason);
	return true;
}

void fr_crash_dumped(void)
{
	int expected = PHASE_SENT;

	__atomic_compare_exchange_n(&phase, &expected, PHASE_DUMPED, false, __ATOMIC_ACQ_REL,
				    __ATOMIC_ACQUIRE);
}

int fr_crash_to_trace(struct fr_trace *t)
{
	int p = __atomic_load_n(&phase, __ATOMIC_ACQUIRE);

	if (p != PHASE_SENT && p != PHASE_NAMING)
		return 0;
	return fr_crash_from_wire(&t->crash, &named);
}

void fr_crash_forget_in_child(void)
{
	__atomic_store_n(&crash_fd, -1, __ATOMIC_RELEASE);
	__atomic_store_n(&gate, GATE_LINK, __ATOMIC_RELEASE);
	__atomic_store_n(&phase, PHASE_NONE, __ATOMIC_RELEASE);
	__atomic_store_n(&taken, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&done, 0, __ATOMIC_RELEASE);
}
