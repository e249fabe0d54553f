/*
 * What reading Python frames costs a dump (agent/pyframes.c): an embedded
 * CPython 3.11 runs THREADS threads, each DEPTH Python frames deep and
 * waiting there, and the main thread, not holding the GIL, reads them all
 * as the agent's link thread does, ROUNDS times. Prints the best and the
 * median time of one reading, and what was read.
 *
 * usage: pyframes [THREADS [DEPTH [ROUNDS]]]  (defaults 64 50 20)
 */
#include <Python.h>

#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../agent/pyframes.h"
#include "../dumps/trace.h"

void *fr_real_dlsym(void *handle, const char *name);
void *fr_real_dlsym(void *handle, const char *name)
{
	return dlsym(handle, name);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The threads of this process, as the agent lists them for a dump. */
static void list_threads(struct fr_trace *t)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

	memset(t, 0, sizeof(*t));
	t->threads = calloc(1024, sizeof(*t->threads));
	while (d && t->threads && (e = readdir(d)) && t->nthreads < 1024)
		if (atoi(e->d_name) > 0)
			t->threads[t->nthreads++].tid = (uint32_t)atoi(e->d_name);
	if (d)
		closedir(d);
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 64, depth = argc > 2 ? atoi(argv[2]) : 50;
	int rounds = argc > 3 ? atoi(argv[3]) : 20;
	double *took = calloc((size_t)rounds, sizeof(*took));
	char script[1024];
	size_t nthreads = 0, nframes = 0;
	PyThreadState *saved;

	snprintf(script, sizeof(script),
		 "import threading\n"
		 "ready = threading.Barrier(%d + 1)\n"
		 "stop = threading.Event()\n"
		 "def nest(n):\n"
		 "    if n > 1:\n"
		 "        return nest(n - 1)\n"
		 "    ready.wait()\n"
		 "    stop.wait()\n"
		 "ts = [threading.Thread(target=nest, args=(%d,)) for _ in range(%d)]\n"
		 "for t in ts: t.start()\n"
		 "ready.wait()\n",
		 threads, depth - 1, threads);
	Py_Initialize();
	if (!took || PyRun_SimpleString(script) != 0)
		return 1;
	saved = PyEval_SaveThread();
	for (int r = 0; r < rounds; r++) {
		struct fr_trace t;
		double t0;

		list_threads(&t);
		t0 = now_s();
		if (fr_pyframes_collect(&t))
			return 1;
		took[r] = now_s() - t0;
		nthreads = nframes = 0;
		for (size_t i = 0; i < t.nthreads; i++) {
			nthreads += t.threads[i].npyframes > 0;
			nframes += t.threads[i].npyframes;
		}
		fr_trace_free(&t);
	}
	PyEval_RestoreThread(saved);
	PyRun_SimpleString("stop.set()\nfor t in ts: t.join()\n");
	qsort(took, (size_t)rounds, sizeof(*took), cmp_double);
	printf("read %zu threads, %zu Python frames: best %.2f ms, median %.2f ms (%d rounds)\n",
	       nthreads, nframes, took[0] * 1e3, took[rounds / 2] * 1e3, rounds);
	free(took);
	return Py_FinalizeEx() < 0;
}
