/*
 * Stacks of every thread, for dumps: a rank that never entered the
 * collective shows where it is instead.
 *
 * The calling (link) thread unwinds the others one at a time: it sends the
 * thread a real-time signal whose handler unwinds its own stack with
 * libunwind into a shared buffer, and waits a bounded time for the answer.
 * The handler calls only what libunwind documents as async-signal-safe
 * (unw_getcontext, unw_init_local, unw_step, unw_get_reg) and takes bare
 * instruction pointers; naming them (which reads symbol tables and
 * allocates) happens afterwards, on the link thread. The handler is installed at the first
 * dump, only if the application does not use the signal, and stays: a
 * signal that arrives late (after the wait gave up) must find it, since the
 * default action of a real-time signal ends the process.
 */
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "dumper.h"

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

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static pid_t my_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* Unwinds the current thread. When `from_signal`, frames up to and
 * including the signal trampoline (the handler itself) are skipped. */
static void unwind_self(struct raw_stack *st, bool from_signal)
{
	unw_context_t ctx;
	unw_cursor_t cur;
	bool past_signal = !from_signal;

	st->n = 0;
	if (unw_getcontext(&ctx) != 0 || unw_init_local(&cur, &ctx) != 0)
		return;
	while (st->n < MAX_FRAMES && unw_step(&cur) > 0) {
		unw_word_t ip;

		if (!past_signal) {
			if (unw_is_signal_frame(&cur) > 0)
				past_signal = true;
			continue;
		}
		if (unw_get_reg(&cur, UNW_REG_IP, &ip) != 0 || ip == 0)
			break;
		st->ips[st->n++] = ip;
	}
}

static void on_stack_signal(int sig, siginfo_t *si, void *uc)
{
	uint64_t seen = __atomic_load_n(&req.state, __ATOMIC_ACQUIRE);
	struct raw_stack local;
	int saved = errno;

	(void)sig;
	(void)si;
	(void)uc;
	if ((seen & 3) != REQ_WAITING || my_tid() != __atomic_load_n(&req.target, __ATOMIC_ACQUIRE))
		goto out;
	unwind_self(&local, true);
	if (!__atomic_compare_exchange_n(&req.state, &seen, (seen & ~UINT64_C(3)) | REQ_WRITING,
					 false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		goto out; /* too late: the request was abandoned */
	req.stack = local;
	__atomic_store_n(&req.state, (seen & ~UINT64_C(3)) | REQ_DONE, __ATOMIC_RELEASE);
out:
	errno = saved;
}

/*
 * Names an instruction pointer of this process: the function containing it
 * (static functions included, from the symbol tables) and the offset into
 * it. libunwind 1.6 names only a cursor's frame, so a cursor of our own is
 * pointed at the address.
 */
static bool name_ip(uint64_t ip, char *name, size_t len, uint64_t *offset)
{
	unw_context_t ctx;
	unw_cursor_t cur;
	unw_word_t off = 0;

	if (unw_getcontext(&ctx) != 0 || unw_init_local(&cur, &ctx) != 0 ||
	    unw_set_reg(&cur, UNW_REG_IP, (unw_word_t)ip) != 0 ||
	    unw_get_proc_name(&cur, name, len, &off) != 0)
		return false;
	*offset = off;
	return true;
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
		if (!name_ip(at, name, sizeof(name), &off))
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

int fr_stacks_collect(struct fr_trace *t, int signo)
{
	static bool installed;
	int budget_ms = TOTAL_WAIT_MS;
	struct sigaction sa, old;
	pid_t self = my_tid();
	DIR *d;
	struct dirent *e;
	int rc = 0;

	t->threads = calloc(MAX_THREADS, sizeof(*t->threads));
	if (!t->threads)
		return -ENOMEM;
	if (!installed && sigaction(signo, NULL, &old) == 0 && old.sa_handler == SIG_DFL &&
	    !(old.sa_flags & SA_SIGINFO)) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_stack_signal;
		sa.sa_flags = SA_SIGINFO | SA_RESTART;
		sigfillset(&sa.sa_mask);
		installed = sigaction(signo, &sa, NULL) == 0;
	}
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
			unwind_self(&st, false);
		} else if (installed && budget_ms > 0 && !blocks_signal(tid, signo)) {
			uint64_t t0 = mono_ms();
			int wait = budget_ms < ANSWER_WAIT_MS ? budget_ms : ANSWER_WAIT_MS;

			if (!ask_thread(tid, signo, wait, &st))
				st.n = 0;
			budget_ms -= (int)(mono_ms() - t0);
		}
		rc = name_frames(th, &st);
		if (rc)
			break;
	}
	if (d)
		closedir(d);
	return rc;
}
