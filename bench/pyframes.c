/*
 * What reading Python frames costs a dump (agent/pyframes.c): an embedded
 * CPython 3.11 runs THREADS threads, each DEPTH Python frames deep and
 * waiting there, and the main thread, not holding the GIL, reads them all
 * as the agent's link thread does, ROUNDS times. Prints the best and the
 * median time of one reading, and what was read.
 *
 * usage: pyframes [THREADS [DEPTH [ROUNDS]]]  (defaults 64 50 20)
 *
 * With --stress ROUNDS, a stress test instead (tests/e2e/test_python_stress):
 * eight threads create and destroy frames, generators and threads as fast
 * as they can while the main thread reads them ROUNDS times. It must never
 * crash or hang, and every frame read of the churning script must name one
 * of its functions on one of its lines; exits 1 otherwise.
 */
#include <Python.h>

#include <dirent.h>
#include <stdbool.h>
#include <string.h>
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

/* The churn of --stress, compiled as "churn.py": its functions and lines
 * are all a reading may report of that file. */
static const char churn_src[] =
	"import random, threading\n"
	"stop = threading.Event()\n"
	"def rec(n):\n"
	"    if n:\n"
	"        return rec(n - 1)\n"
	"    return sum(range(50))\n"
	"def gen(k):\n"
	"    for i in range(k):\n"
	"        yield rec(i % 7)\n"
	"def churn(seed):\n"
	"    r = random.Random(seed)\n"
	"    while not stop.is_set():\n"
	"        list(gen(r.randrange(12)))\n"
	"        rec(r.randrange(60))\n"
	"        if r.random() < 0.05:\n"
	"            t = threading.Thread(target=lambda: rec(r.randrange(30)))\n"
	"            t.start()\n"
	"            t.join()\n"
	"workers = [threading.Thread(target=churn, args=(i,)) for i in range(8)]\n"
	"for w in workers:\n"
	"    w.start()\n";
#define CHURN_LINES 21

static bool churn_frame_ok(const struct fr_pyframe *f)
{
	static const char *const names[] = { "rec", "gen", "churn", "churn.<locals>.<lambda>",
					     "<module>" };

	if (strcmp(f->file, "churn.py") != 0)
		return strlen(f->file) > 0;
	if (f->line > CHURN_LINES)
		return false;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(f->function, names[i]) == 0)
			return true;
	return false;
}

/* Checks every frame of one reading; counts what it read into the totals. */
static void check_reading(const struct fr_trace *t, size_t *frames, size_t *truncated,
			  size_t *bad)
{
	for (size_t i = 0; i < t->nthreads; i++) {
		const struct fr_thread *th = &t->threads[i];

		*truncated += th->py_truncated;
		*frames += th->npyframes;
		for (size_t k = 0; k < th->npyframes; k++)
			if (!churn_frame_ok(&th->pyframes[k]) && (*bad)++ < 5)
				fprintf(stderr, "wrong frame: %s (%s:%u)\n", th->pyframes[k].function,
					th->pyframes[k].file, th->pyframes[k].line);
	}
}

static int stress(int rounds)
{
	size_t frames = 0, truncated = 0, bad = 0;
	PyObject *code, *globals, *r;
	PyThreadState *saved;
	double t0;

	Py_Initialize();
	code = Py_CompileString(churn_src, "churn.py", Py_file_input);
	globals = PyDict_New();
	if (!code || !globals || PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()))
		return 1;
	if (!(r = PyEval_EvalCode(code, globals, globals)))
		return 1;
	Py_DECREF(r);
	saved = PyEval_SaveThread();
	t0 = now_s();
	for (int n = 0; n < rounds; n++) {
		struct fr_trace t;

		list_threads(&t);
		if (fr_pyframes_collect(&t))
			return 1;
		check_reading(&t, &frames, &truncated, &bad);
		fr_trace_free(&t);
	}
	t0 = now_s() - t0;
	PyEval_RestoreThread(saved);
	if (!(r = PyRun_String("stop.set()\nfor w in workers: w.join()\n", Py_file_input, globals,
			       globals)))
		return 1;
	Py_DECREF(r);
	Py_DECREF(globals);
	Py_DECREF(code);
	printf("stress: %d readings in %.2f s, %zu frames read, %zu threads truncated, %zu wrong\n",
	       rounds, t0, frames, truncated, bad);
	return Py_FinalizeEx() < 0 || bad;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 64, depth = argc > 2 ? atoi(argv[2]) : 50;
	int rounds = argc > 3 ? atoi(argv[3]) : 20;
	double *took;
	char script[1024];
	size_t nthreads = 0, nframes = 0;
	PyThreadState *saved;

	if (argc > 2 && strcmp(argv[1], "--stress") == 0)
		return stress(atoi(argv[2]));
	took = calloc((size_t)rounds, sizeof(*took));
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
