/*
 * Signal handlers of the application that the agent's crash handler must
 * chain to without changing what they do (agent/crash.c), one per
 * --scenario, in a rank that is otherwise idle:
 *
 *   fixup      a SIGSEGV handler that makes the page writable and returns,
 *              as incremental garbage collectors and dirty-page trackers
 *              do; the same instruction faults --times times on the same
 *              address, the page protected again each time. Exits 0.
 *   probe      a SIGSEGV handler that siglongjmp()s back to a probe of an
 *              unreadable address, used --times times. Exits 0.
 *   resethand  a SIGSEGV handler installed with SA_RESETHAND that says so
 *              and returns; the fault happens again under the default
 *              action: the process dies of SIGSEGV.
 *
 * The handler is installed after MPI_Init (which installs the agent's and
 * Open MPI's); under the agent, the rank waits (at most 10 s) until the
 * agent has put its own in front again, so that the chain is the agent's
 * handler calling this one. Prints "SCENARIO ok" when it completes.
 */
#include <mpi.h>
#include <dlfcn.h>
#include <getopt.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static char *page;
static long page_size;
static volatile sig_atomic_t faults;
static sigjmp_buf probe_env;

static void on_fixup(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	if ((char *)si->si_addr < page || (char *)si->si_addr >= page + page_size)
		abort(); /* not the planted fault */
	faults++;
	mprotect(page, (size_t)page_size, PROT_READ | PROT_WRITE);
}

static void on_probe(int sig)
{
	(void)sig;
	faults++;
	siglongjmp(probe_env, 1);
}

static void on_resethand(int sig)
{
	static const char msg[] = "on_resethand: SIGSEGV, returning\n";

	(void)sig;
	faults++;
	(void)!write(2, msg, sizeof(msg) - 1);
}

/* The one instruction that faults, whichever time. */
static void __attribute__((noinline)) poke(char *volatile p, int v)
{
	*p = (char)v;
}

static int __attribute__((noinline)) peek(const char *volatile p)
{
	return *p;
}

/* Whether `p` is readable, as a probe that catches the fault finds out. */
static int probe(const char *p)
{
	if (sigsetjmp(probe_env, 1) == 0)
		return 1 + peek(p);
	return 0;
}

static void install(void (*action)(int, siginfo_t *, void *), void (*handler)(int), int flags)
{
	struct sigaction sa, cur;
	struct timespec nap = { 0, 10000000 };

	memset(&sa, 0, sizeof(sa));
	if (action) {
		sa.sa_sigaction = action;
		sa.sa_flags = SA_SIGINFO | flags;
	} else {
		sa.sa_handler = handler;
		sa.sa_flags = flags;
	}
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	if (!dlsym(RTLD_DEFAULT, "fr_dump_now"))
		return; /* no agent */
	for (int i = 0; i < 1000; i++) {
		sigaction(SIGSEGV, NULL, &cur);
		if (action ? cur.sa_sigaction != action : cur.sa_handler != handler)
			return;
		nanosleep(&nap, NULL);
	}
	fprintf(stderr, "chain: the agent never put its handler in front of ours\n");
	exit(3);
}

int main(int argc, char **argv)
{
	const char *scenario = "none";
	int times = 5, rank;
	static const struct option opts[] = {
		{ "scenario", required_argument, NULL, 's' },
		{ "times", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};

	for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
		if (c == 's') {
			scenario = optarg;
		} else if (c == 't') {
			times = atoi(optarg);
		} else {
			fprintf(stderr, "usage: %s --scenario fixup|probe|resethand [--times N]\n",
				argv[0]);
			return 2;
		}
	}
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	page_size = sysconf(_SC_PAGESIZE);
	page = mmap(NULL, (size_t)page_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return 2;
	if (strcmp(scenario, "fixup") == 0) {
		install(on_fixup, NULL, 0);
		for (int i = 0; i < times; i++) {
			mprotect(page, (size_t)page_size, PROT_READ);
			poke(page, i + 1);
			if (page[0] != i + 1 || faults != i + 1) {
				fprintf(stderr, "fixup: cycle %d: byte %d, %d faults\n", i, page[0],
					(int)faults);
				return 1;
			}
		}
	} else if (strcmp(scenario, "probe") == 0) {
		int readable = 0;

		install(NULL, on_probe, 0);
		mprotect(page, (size_t)page_size, PROT_NONE);
		for (int i = 0; i < times; i++)
			readable += probe(page);
		if (readable || faults != times) {
			fprintf(stderr, "probe: %d readable, %d faults\n", readable, (int)faults);
			return 1;
		}
	} else if (strcmp(scenario, "resethand") == 0) {
		install(NULL, on_resethand, SA_RESETHAND);
		mprotect(page, (size_t)page_size, PROT_NONE);
		poke(page, 1);
		fprintf(stderr, "resethand: the fault did not happen again\n");
		return 1;
	} else {
		fprintf(stderr, "unknown scenario %s\n", scenario);
		return 2;
	}
	MPI_Barrier(MPI_COMM_WORLD);
	printf("%s ok\n", scenario);
	fflush(stdout);
	MPI_Finalize();
	return 0;
}
