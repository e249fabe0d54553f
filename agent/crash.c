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
 *     returned: it may have fixed it (a JVM moves the program counter, a
 *     garbage collector makes the page writable), so we return too. One
 *     that did not fix it is called again at once by the same fault, for
 *     ever: the same fault at the same place on the same thread,
 *     REPEAT_MAX times in a row, each within REPEAT_GAP_MS of the
 *     handler's return, is fatal. (A handler that fixes the same fault at
 *     the same place that many times back to back is taken for one that
 *     does not: a known limit.) A handler installed with SA_RESETHAND left
 *     the default action behind it, as the kernel would have: ours is put
 *     back in front of the default action, so that the fault, if it comes
 *     again, is reported before it kills;
 *   - SIGABRT the process sent itself (abort(), which kills whatever the
 *     handler does): fatal;
 *   - anything else the handler returned from: handled, nothing recorded.
 * With the default action before us the signal is fatal; ignored, it is
 * ignored unless the kernel raised it (it kills then anyway).
 *
 * Previous handlers run with the signal mask they asked for (their
 * sa_mask, and the signal itself, SA_NODEFER or not) on top of the
 * interrupted code's, not with ours (everything blocked). One may leave by
 * siglongjmp() rather than return (a probe of an address); a previous
 * handler may also call ours, having found it installed before it: the
 * call nested in our frame, on the same stack, with the same siginfo, is
 * such a call, and the outer one decides. The handler frame's address,
 * not a depth count, tells it, as a siglongjmp() leaves no count behind.
 *
 * A fatal signal is recorded once per process (a second thread crashing
 * meanwhile waits for the first to finish), then the default action is
 * restored and the signal raised again unless it is pending already, so
 * that the process dies of it whatever it was (a fault that would not
 * happen again on return, such as an asynchronous machine-check, or one
 * judged fatal by repetition alone) and never goes on half-dead with the
 * crash reported. The exit status, and the core dump (taken at the
 * faulting instruction, where the handler returns to), are the default
 * action's.
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
 *
 * Known limits. A synchronous fault in a thread that blocks the signal is
 * not seen: the kernel applies the default action (the link thread keeps
 * SEGV, BUS, FPE, ILL, TRAP and SYS unblocked for this reason; a thread of
 * the application or of a library that blocks them dies unrecorded). A
 * fault while the handler unwinds a corrupted stack happens with every
 * signal blocked, and the kernel kills the process with SIGSEGV, whatever
 * the signal it was dying of. A previous handler that calls ours with a
 * copy of the siginfo, rather than the one it was given, is not known as
 * a chained call, and runs again.
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
#define REPEAT_MAX 32
#define REPEAT_GAP_MS 5
#define NFATAL 7
/* The largest CRASH frame: every name at its limit. */
#define CRASH_FRAME_MAX                                                 \
	(FR_WIRE_HEADER_SIZE + 38 +                                      \
	 FR_WIRE_CRASH_FRAMES_MAX * (8 + 8 + 2 + FR_WIRE_SYMBOL_MAX))

static const int fatal[NFATAL] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS };

/*
 * What was installed before ours, per signal, twice: the link thread's
 * re-check (and the handler, after an SA_RESETHAND handler) writes the
 * copy not in use, then publishes its index, so that a handler running on
 * another thread meanwhile never reads one half-written. One writer at a
 * time per signal (`writing`).
 */
static struct sigaction previous[NFATAL][2];
static int current[NFATAL];     /* atomic: the index in use */
static int writing[NFATAL];     /* atomic */
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

/*
 * This thread's handler call in progress (its frame's address, its signal
 * and siginfo: a call nested in it with the same ones is the chain's), and
 * the fault the previous handler last returned from, with how many times
 * in a row it came again right after. Initial-exec TLS: no allocation in
 * the handler.
 */
static __thread __attribute__((tls_model("initial-exec"))) struct {
	uintptr_t frame;
	int sig;
	const siginfo_t *si;
	int last_sig;
	uint64_t last_ip;
	uint64_t last_addr;
	uint64_t returned_ms;
	unsigned repeats;
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

/*
 * Whether a signal the previous handler returned from was fatal after all.
 * `ip` is where the fault was before the handler ran, `entered_ms` when
 * ours was called.
 */
static bool fatal_after_return(int sig, const siginfo_t *si, const void *uc, uint64_t ip,
			       uint64_t entered_ms)
{
	uint64_t addr = (uint64_t)(uintptr_t)si->si_addr;
	bool fault = si->si_code > 0 &&
		     (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL);

	if (pending(sig))
		return true;
	if (sig == SIGABRT && si->si_pid == getpid())
		return true;
	/* Not a fault, or one the handler moved on from: nothing to watch. */
	if (!fault || context_ip(uc) != ip) {
		here.last_sig = 0;
		return false;
	}
	if (here.last_sig == sig && here.last_ip == ip && here.last_addr == addr &&
	    entered_ms - here.returned_ms <= REPEAT_GAP_MS) {
		if (++here.repeats >= REPEAT_MAX)
			return true;
	} else {
		here.last_sig = sig;
		here.last_ip = ip;
		here.last_addr = addr;
		here.repeats = 0;
	}
	here.returned_ms = mono_ms();
	return false;
}

/* Calls the previous handler as the kernel would have: with its mask
 * added to the interrupted code's, and its SA_RESETHAND done. The signal
 * itself stays blocked even under SA_NODEFER: a handler that raises it
 * again (faulthandler, which asks for SA_NODEFER) leaves it pending, for
 * us to see before it kills. */
static void call_previous(const struct sigaction *p, int sig, siginfo_t *si, void *uc)
{
	sigset_t mask, old;

	if (p->sa_flags & SA_RESETHAND) {
		struct sigaction dfl;

		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		sigaction(sig, &dfl, NULL);
	}
	if (uc)
		mask = ((const ucontext_t *)uc)->uc_sigmask;
	else
		sigemptyset(&mask);
	for (int s = 1; s < NSIG; s++)
		if (sigismember(&p->sa_mask, s) == 1)
			sigaddset(&mask, s);
	sigaddset(&mask, sig);
	sigprocmask(SIG_SETMASK, &mask, &old);
	if (p->sa_flags & SA_SIGINFO)
		p->sa_sigaction(sig, si, uc);
	else
		p->sa_handler(sig);
	sigprocmask(SIG_SETMASK, &old, NULL);
}

static void die_by_default(int sig)
{
	struct sigaction dfl;

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(sig, &dfl, NULL);
	if (!pending(sig))
		syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), sig);
	/* Returning (which unblocks it) delivers it: the default action. */
}

static bool install_one(int i);

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;
	int i = slot_of(sig);
	uintptr_t frame = (uintptr_t)__builtin_frame_address(0);
	uintptr_t outer_frame = here.frame;
	int outer_sig = here.sig;
	const siginfo_t *outer_si = here.si;
	uint64_t entered_ms = mono_ms(), ip = context_ip(uc);
	struct sigaction p;

	if (i < 0)
		goto out;
	/* Called from within the chain (a previous handler that calls the one
	 * it replaced, which it found to be ours): the outer call decides. A
	 * frame left by siglongjmp() is above ours, or holds another siginfo. */
	if (outer_frame && frame < outer_frame && outer_sig == sig && outer_si == si)
		goto out;
	here.frame = frame;
	here.sig = sig;
	here.si = si;
	p = previous[i][__atomic_load_n(&current[i], __ATOMIC_ACQUIRE)];
	if (p.sa_handler == SIG_IGN) {
		if (si->si_code <= 0)
			goto out_frame; /* sent by someone, and ignored as asked */
	} else if (p.sa_handler != SIG_DFL) {
		call_previous(&p, sig, si, uc);
		if (!fatal_after_return(sig, si, uc, ip, entered_ms)) {
			/* What the kernel left behind such a handler is the
			 * default action: ours goes in front of it again. */
			for (int t = 0; (p.sa_flags & SA_RESETHAND) && !install_one(i) && t < 10; t++)
				nap_ms(); /* the link thread's re-check holds it */
			goto out_frame;
		}
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
	die_by_default(sig);
out_frame:
	here.frame = outer_frame;
	here.sig = outer_sig;
	here.si = outer_si;
out:
	errno = saved;
}

static bool is_ours(const struct sigaction *sa)
{
	return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_fatal;
}

/* Installs ours over whatever `sig` has now, keeping that to call first.
 * Async-signal-safe. False when it could not, or another thread is at it. */
static bool install_one(int i)
{
	struct sigaction sa, cur;
	int next, expected = 0;
	bool ok = false;

	if (!__atomic_compare_exchange_n(&writing[i], &expected, 1, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return false;
	if (sigaction(fatal[i], NULL, &cur) != 0)
		goto out_unlock;
	ok = true;
	if (is_ours(&cur))
		goto out_unlock;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fatal;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigfillset(&sa.sa_mask);
	/* The handler reads `previous` only once ours is installed. */
	next = !__atomic_load_n(&current[i], __ATOMIC_ACQUIRE);
	previous[i][next] = cur;
	__atomic_store_n(&current[i], next, __ATOMIC_RELEASE);
	ok = sigaction(fatal[i], &sa, NULL) == 0;
	if (ok)
		ours[i] = true;
out_unlock:
	__atomic_store_n(&writing[i], 0, __ATOMIC_RELEASE);
	return ok;
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
