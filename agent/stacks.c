/*
 * Stacks of every thread, for dumps: a rank that never entered the
 * collective shows where it is instead.
 *
 * The calling (link) thread unwinds the others one at a time: it sends the
 * thread a real-time signal whose handler unwinds its own stack with
 * libunwind into a shared buffer, and waits a bounded time for the answer.
 * The handler also names each frame (unw_get_proc_name reads the symbol
 * tables, including static functions, through mmap without allocating);
 * libunwind 1.6 has no way to name a bare address later. The handler is installed at the first
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
#define NAME_MAX_LEN 128

/* One thread's stack as the unwinder saw it. */
struct raw_stack {
	int n;
	uint64_t ips[MAX_FRAMES];
	uint64_t offsets[MAX_FRAMES];
	char names[MAX_FRAMES][NAME_MAX_LEN];
};

/* The one outstanding request: written by the link thread, filled by the
 * handler running on the target thread. */
static struct {
	pid_t target;
	struct raw_stack stack;
	int done; /* atomic */
} req;

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
		unw_word_t ip, off = 0;

		if (!past_signal) {
			if (unw_is_signal_frame(&cur) > 0)
				past_signal = true;
			continue;
		}
		if (unw_get_reg(&cur, UNW_REG_IP, &ip) != 0 || ip == 0)
			break;
		st->ips[st->n] = ip;
		if (unw_get_proc_name(&cur, st->names[st->n], NAME_MAX_LEN, &off) != 0)
			st->names[st->n][0] = '\0';
		st->offsets[st->n] = off;
		st->n++;
	}
}

static void on_stack_signal(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;

	(void)sig;
	(void)si;
	(void)uc;
	if (my_tid() == req.target && !__atomic_load_n(&req.done, __ATOMIC_ACQUIRE)) {
		unwind_self(&req.stack, true);
		__atomic_store_n(&req.done, 1, __ATOMIC_RELEASE);
	}
	errno = saved;
}

static int copy_frames(struct fr_thread *th, const struct raw_stack *st)
{
	th->frames = calloc((size_t)(st->n > 0 ? st->n : 1), sizeof(*th->frames));
	if (!th->frames)
		return -ENOMEM;
	for (int i = 0; i < st->n; i++) {
		th->frames[i].ip = st->ips[i];
		th->frames[i].offset = st->offsets[i];
		if (st->names[i][0] && !(th->frames[i].name = strdup(st->names[i])))
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

/* Asks thread `tid` for its stack into `out`. Returns false when it did
 * not answer in time. */
static bool ask_thread(pid_t tid, int signo, struct raw_stack *out)
{
	struct timespec pause = { 0, 1000000 };

	req.target = tid;
	req.stack.n = 0;
	__atomic_store_n(&req.done, 0, __ATOMIC_RELEASE);
	if (syscall(SYS_tgkill, getpid(), tid, signo) != 0)
		return false;
	for (int waited = 0; waited < ANSWER_WAIT_MS; waited++) {
		if (__atomic_load_n(&req.done, __ATOMIC_ACQUIRE)) {
			*out = req.stack;
			return true;
		}
		nanosleep(&pause, NULL);
	}
	/* Late answers must not land in the next request. */
	__atomic_store_n(&req.done, 1, __ATOMIC_RELEASE);
	return false;
}

int fr_stacks_collect(struct fr_trace *t, int signo)
{
	static bool installed;
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
		} else if (!installed || !ask_thread(tid, signo, &st)) {
			st.n = 0;
		}
		rc = copy_frames(th, &st);
		if (rc)
			break;
	}
	if (d)
		closedir(d);
	return rc;
}
