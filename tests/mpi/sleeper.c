/*
 * An application that sleeps, for the tests of what the agent may do to
 * it (tests/e2e/test_agent_trust.sh).
 *
 *   sleeper sleep SECONDS [OPS]
 *                           makes OPS barriers (0: none), so that a dump
 *                           holds that many entries, then sleeps in 50 ms
 *                           naps for SECONDS and prints "interrupted N": how
 *                           many naps a signal cut short, and "peak_rss_kb
 *                           N" (VmHWM)
 *   sleeper late-handler    asks for a dump (fr_dump_now), waits for it in
 *                           FLIGHTREC_DUMP_DIR/FLIGHTREC_JOB, then installs
 *                           its own handler for the agent's stack signal
 *                           (SIGRTMIN+7), asks for a second dump, waits for
 *                           it and prints "deliveries N": how often its
 *                           handler ran
 *   sleeper mid-handler     starts 32 idle threads, asks for a dump,
 *                           and installs its own handler for the stack
 *                           signal as soon as the agent's signal reaches
 *                           the main thread (the first one asked), in the
 *                           middle of the dump; waits for the dump and
 *                           prints "deliveries N"
 *   sleeper dump            asks for one dump and finalises (the agent
 *                           writes the dump before it stops)
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t deliveries;

static void on_signal(int sig)
{
	(void)sig;
	deliveries++;
}

/* An idle thread of the application: one more for a dump to ask. */
static void *idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

/* Naps 50 ms; true when a signal cut the nap short. */
static int nap(void)
{
	struct timespec ts = { 0, 50 * 1000 * 1000 };

	return nanosleep(&ts, NULL) != 0 && errno == EINTR;
}

/* Incident directories the agent wrote for this job so far. */
static int dumps_written(void)
{
	char path[1024];
	const char *dir = getenv("FLIGHTREC_DUMP_DIR"), *job = getenv("FLIGHTREC_JOB");
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "%s/%s", dir ? dir : ".", job ? job : "");
	d = opendir(path);
	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

/* Asks for a dump and waits (at most 10 s) until it is on disk. */
static int dump_and_wait(const char *reason, int want)
{
	int (*dump_now)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "fr_dump_now");

	if (!dump_now || dump_now(reason) != 0)
		return -1;
	for (int i = 0; i < 200 && dumps_written() < want; i++)
		nap();
	return dumps_written() >= want ? 0 : -1;
}

/* The process's peak resident size (VmHWM), in KiB; -1 if unknown. */
static long peak_rss_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

int main(int argc, char **argv)
{
	int rc = 0;

	MPI_Init(&argc, &argv);
	if ((argc == 3 || argc == 4) && strcmp(argv[1], "sleep") == 0) {
		int naps = atoi(argv[2]) * 20, cut = 0, ops = argc == 4 ? atoi(argv[3]) : 0;

		for (int i = 0; i < ops; i++)
			MPI_Barrier(MPI_COMM_WORLD);
		printf("ready\n");
		fflush(stdout);
		for (int i = 0; i < naps; i++)
			cut += nap();
		printf("interrupted %d\n", cut);
		printf("peak_rss_kb %ld\n", peak_rss_kb());
	} else if (argc == 2 && strcmp(argv[1], "late-handler") == 0) {
		if (dump_and_wait("first", 1) != 0) {
			printf("first dump not written\n");
			rc = 1;
		} else {
			signal(SIGRTMIN + 7, on_signal);
			if (dump_and_wait("second", 2) != 0) {
				printf("second dump not written\n");
				rc = 1;
			}
			printf("deliveries %d\n", (int)deliveries);
		}
	} else if (argc == 2 && strcmp(argv[1], "mid-handler") == 0) {
		int (*dump_now)(const char *) =
			(int (*)(const char *))dlsym(RTLD_DEFAULT, "fr_dump_now");
		struct timespec ts = { 0, 1000 * 1000 };
		pthread_t t;
		int i;

		for (i = 0; i < 32; i++)
			pthread_create(&t, NULL, idle, NULL);
		if (!dump_now || dump_now("mid") != 0) {
			printf("dump not asked for\n");
			rc = 1;
		} else {
			/* 1 ms naps, for at most 10 s: the first one cut short is
			 * the agent asking this thread for its stack. */
			for (i = 0; i < 10000 && !(nanosleep(&ts, NULL) != 0 && errno == EINTR); i++)
				;
			signal(SIGRTMIN + 7, on_signal);
			for (i = 0; i < 200 && dumps_written() < 1; i++)
				nap();
			printf("%s\n", dumps_written() >= 1 ? "dump written" : "dump not written");
			printf("deliveries %d\n", (int)deliveries);
		}
	} else if (argc == 2 && strcmp(argv[1], "dump") == 0) {
		int (*dump_now)(const char *) =
			(int (*)(const char *))dlsym(RTLD_DEFAULT, "fr_dump_now");

		rc = dump_now && dump_now("asked") == 0 ? 0 : 1;
	} else {
		fprintf(stderr, "usage: sleeper sleep SECONDS [OPS] | sleeper late-handler | sleeper mid-handler | sleeper dump\n");
		rc = 2;
	}
	fflush(stdout);
	MPI_Finalize();
	return rc;
}
