/*
 * Stacks of every thread, for dumps: a rank that never entered the
 * collective shows where it is instead.
 *
 * The calling (link) thread unwinds the others one at a time: it sends the
 * thread a real-time signal whose handler unwinds its own stack into a
 * shared buffer, and waits a bounded time for the answer.
 *
 * The unwinder is the compiler runtime's (_Unwind_Backtrace, from
 * libgcc_eh, linked into the agent): it follows the DWARF call-frame
 * information every x86-64 object carries, and finds a frame's tables
 * through the C library's _dl_find_object, which takes no lock, so it may
 * run in a signal handler that interrupted anything. The handler takes bare
 * instruction pointers; naming them (which reads symbol tables and
 * allocates, symbols.c) happens afterwards, on the link thread. The handler is installed at the first
 * dump, only if the application does not use the signal, and stays: a
 * signal that arrives late (after the wait gave up) must find it, since the
 * default action of a real-time signal ends the process. Before every dump
 * the signal's disposition is looked at again: an application that installed
 * its own handler since (a library loaded later, a runtime that claims the
 * real-time signals) would have its handler run for our requests, so from
 * then on no thread is asked (said once on stderr) and dumps list threads
 * without frames, except the dumping thread's own.
 */
#include "stacks.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include <unwind.h>

#include "clock.h"
#include "dumper.h"
#include "symbols.h"

#define MAX_FRAMES 64
#define MAX_THREADS 1024
#define ANSWER_WAIT_MS 200
/* All threads together: past this, the rest are listed without frames, so
 * that the dump reaches the daemon within its deadline. */
#define TOTAL_WAIT_MS 1000
#define NAME_MAX_LEN 128

/* One thread's stack as the unwinder saw it: instruction pointers. */
struct raw_stack {
	int n;
	uint64_t ips[MAX_FRAMES];
};

/*
 * The one outstanding request. `state` packs a request number with its
 * phase, so that a handler that runs late -- after the link thread gave up
 * on it and moved on to another thread -- can never write into, or answer,
 * a later request: it claims the request with a compare-and-swap on the
 * exact state it saw when it started.
 */
enum { REQ_WAITING, REQ_WRITING, REQ_DONE, REQ_ABANDONED };

static struct {
	uint64_t state;          /* atomic: request number << 2 | phase */
	pid_t target;            /* atomic */
	struct raw_stack stack;  /* written by the claiming handler */
} req;

static pid_t my_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

struct unwind_walk {
	struct raw_stack *st;
	int skip;          /* frames still to drop: the unwinder's own */
	uintptr_t resume;  /* in a signal handler: where the thread was */
};

static _Unwind_Reason_Code take_frame(struct _Unwind_Context *ctx, void *arg)
{
	struct unwind_walk *w = arg;
	int exact = 0;
	uintptr_t ip = _Unwind_GetIPInfo(ctx, &exact);

	if (w->resume) {
		/* Frames of the handler and of the signal trampoline come
		 * first; the interrupted frame is the one the unwinder marks as
		 * resumed by a signal (its IP is exact, not a return address). */
		if (!exact && ip != w->resume)
			return _URC_NO_REASON;
		w->resume = 0;
	} else if (w->skip > 0) {
		w->skip--;
		return _URC_NO_REASON;
	}
	if (ip == 0)
		return _URC_END_OF_STACK;
	w->st->ips[w->st->n++] = ip;
	return w->st->n < MAX_FRAMES ? _URC_NO_REASON : _URC_END_OF_STACK;
}

/* Unwinds the current thread: from its caller, or, when `uc` is the context
 * a signal interrupted, from where the signal found the thread. */
static __attribute__((noinline)) void unwind_self(struct raw_stack *st, const ucontext_t *uc)
{
	struct unwind_walk w = { st, 1, 0 };

	st->n = 0;
#if defined(__x86_64__)
	/* From a signal: every frame up to the interrupted one is dropped by
	 * `resume`, and none after it (the caller of the interrupted function
	 * was lost when `skip` applied here too). */
	if (uc) {
		w.resume = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
		w.skip = 0;
	}
#else
	(void)uc;
	w.skip = 3; /* this function, the handler, the trampoline */
#endif
	_Unwind_Backtrace(take_frame, &w);
}

int fr_stacks_unwind_context(uint64_t *ips, int max, const void *uc)
{
	struct raw_stack st;
	int n;

	unwind_self(&st, uc);
	n = st.n < max ? st.n : max;
	memcpy(ips, st.ips, (size_t)n * sizeof(*ips));
	return n;
}

static void on_stack_signal(int sig, siginfo_t *si, void *uc)
{
	uint64_t seen = __atomic_load_n(&req.state, __ATOMIC_ACQUIRE);
	struct raw_stack local;
	int saved = errno;

	(void)sig;
	(void)si;
	if ((seen & 3) != REQ_WAITING || my_tid() != __atomic_load_n(&req.target, __ATOMIC_ACQUIRE))
		goto out;
	unwind_self(&local, uc);
	if (!__atomic_compare_exchange_n(&req.state, &seen, (seen & ~UINT64_C(3)) | REQ_WRITING,
					 false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		goto out; /* too late: the request was abandoned */
	req.stack = local;
	__atomic_store_n(&req.state, (seen & ~UINT64_C(3)) | REQ_DONE, __ATOMIC_RELEASE);
out:
	errno = saved;
}

static int name_frames(struct fr_thread *th, const struct raw_stack *st)
{
	th->frames = calloc((size_t)(st->n > 0 ? st->n : 1), sizeof(*th->frames));
	if (!th->frames)
		return -ENOMEM;
	for (int i = 0; i < st->n; i++) {
		char name[NAME_MAX_LEN];
		/* Outer frames hold return addresses, just past their call:
		 * look up the call itself, which a noreturn call at the end of
		 * a function leaves inside that function. */
		uint64_t at = i > 0 ? st->ips[i] - 1 : st->ips[i];
		uint64_t off;

		th->frames[i].ip = st->ips[i];
		if (!fr_symbolize((uintptr_t)at, name, sizeof(name), &off))
			continue;
		th->frames[i].offset = off + (st->ips[i] - at);
		if (!(th->frames[i].name = strdup(name)))
			return -ENOMEM;
	}
	th->nframes = (size_t)st->n;
	return 0;
}

static void thread_name(pid_t tid, char *out, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/comm", (int)tid);
	out[0] = '\0';
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(out, (int)len, f))
		out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

/*
 * True when thread `tid` blocks signal `signo` (CUDA and other library
 * helper threads often block every signal): asking it would only wait.
 */
static bool blocks_signal(pid_t tid, int signo)
{
	char path[64], line[256];
	unsigned long long mask = 0;
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	f = fopen(path, "re");
	if (!f)
		return true; /* gone, or unknowable: do not wait for it */
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "SigBlk: %llx", &mask) == 1;
	fclose(f);
	return found && signo <= 64 && (mask >> (signo - 1)) & 1;
}

/* Asks thread `tid` for its stack into `out`, waiting at most `budget_ms`.
 * Returns false when it did not answer in time. */
static bool ask_thread(pid_t tid, int signo, int budget_ms, struct raw_stack *out)
{
	static uint64_t number;
	struct timespec pause = { 0, 1000000 };
	uint64_t base = ++number << 2, waiting = base | REQ_WAITING;

	__atomic_store_n(&req.target, tid, __ATOMIC_RELEASE);
	__atomic_store_n(&req.state, waiting, __ATOMIC_RELEASE);
	if (syscall(SYS_tgkill, getpid(), tid, signo) != 0)
		return false;
	for (int waited = 0; waited < budget_ms; waited++) {
		if (__atomic_load_n(&req.state, __ATOMIC_ACQUIRE) == (base | REQ_DONE)) {
			*out = req.stack;
			return true;
		}
		nanosleep(&pause, NULL);
	}
	/* Give up, unless a handler is writing its answer right now. */
	if (__atomic_compare_exchange_n(&req.state, &waiting, base | REQ_ABANDONED, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return false;
	while (__atomic_load_n(&req.state, __ATOMIC_ACQUIRE) != (base | REQ_DONE))
		nanosleep(&pause, NULL);
	*out = req.stack;
	return true;
}

/*
 * Whether the stack signal may be sent now: our handler is installed
 * (installing it if the signal is still unused), and the application has
 * not taken the signal since. Asked before each thread is signalled, not
 * once per dump: collecting stacks may take a second, and an application
 * that installs its handler meanwhile must not receive the rest. Link
 * thread only.
 */
static bool signal_ours(int signo)
{
	static bool installed, taken;
	struct sigaction sa, cur;

	if (taken || sigaction(signo, NULL, &cur) != 0)
		return false;
	if (installed) {
		if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_stack_signal)
			return true;
		/* Our handler was replaced: the signal is the application's now. */
		taken = true;
		fprintf(stderr, "flightrec: the application installed its own handler for signal %d (FLIGHTREC_STACK_SIGNAL); dumps no longer ask other threads for their stacks\n",
			signo);
		return false;
	}
	if (cur.sa_handler != SIG_DFL || (cur.sa_flags & SA_SIGINFO))
		return false;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_stack_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigfillset(&sa.sa_mask);
	installed = sigaction(signo, &sa, NULL) == 0;
	return installed;
}

int fr_stacks_collect(struct fr_trace *t, int signo)
{
	int budget_ms = TOTAL_WAIT_MS;
	pid_t self = my_tid();
	bool ask = true;
	DIR *d;
	struct dirent *e;
	int rc = 0;

	t->threads = calloc(MAX_THREADS, sizeof(*t->threads));
	if (!t->threads)
		return -ENOMEM;
	d = opendir("/proc/self/task");
	while (d && (e = readdir(d)) && t->nthreads < MAX_THREADS) {
		static struct raw_stack st;
		struct fr_thread *th;
		pid_t tid = (pid_t)atoi(e->d_name);

		if (tid <= 0)
			continue;
		th = &t->threads[t->nthreads++];
		th->tid = (uint32_t)tid;
		thread_name(tid, th->name, sizeof(th->name));
		st.n = 0;
		if (tid == self) {
			th->current = true;
			unwind_self(&st, NULL);
		} else if (ask && budget_ms > 0 && !blocks_signal(tid, signo) &&
			   (ask = signal_ours(signo))) {
			uint64_t t0 = fr_mono_ms();
			int wait = budget_ms < ANSWER_WAIT_MS ? budget_ms : ANSWER_WAIT_MS;

			if (!ask_thread(tid, signo, wait, &st))
				st.n = 0;
			budget_ms -= (int)(fr_mono_ms() - t0);
		}
		rc = name_frames(th, &st);
		if (rc)
			break;
	}
	if (d)
		closedir(d);
	return rc;
}
