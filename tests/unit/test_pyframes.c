/*
 * Python frames (agent/pyframes.c): the 3.11 location table decoded as
 * CPython decodes it, on a table CPython 3.11 wrote; a reader that walks a
 * made-up interpreter right and stops, without a fault, on every kind of
 * garbage; and, where python3.11-dev is installed, the agent's offsets
 * equal to the real headers', and the entry marks it reads from a real
 * interpreter (embedded) paired with that thread's native calls of the
 * evaluation loop.
 */
#ifdef FR_HAVE_PY311_HEADERS
/* Internal structures: _PyRuntimeState, _PyInterpreterFrame. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>
#endif

#include <dlfcn.h>
#include <execinfo.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../agent/pyframes.h"
#include "../../dumps/correlate.h"
#include "../../dumps/trace.h"

/* pyframes.c looks its symbols up through the agent's dlsym; these tests
 * never look any up. */
void *fr_real_dlsym(void *handle, const char *name);
void *fr_real_dlsym(void *handle, const char *name)
{
	return dlsym(handle, name);
}

/*
 * load_batch's table, as /usr/bin/python3 (3.11.2) compiled it from:
 *
 *   (line 2) def load_batch(a):
 *                x = a + 1
 *                for i in range(3):
 *                    x += i
 *            (three blank lines)
 *                try:
 *                    y = (x +
 *                         a)
 *                except ValueError:
 *                    y = 0
 *                return y
 *
 * (co_linetable), with the line of each code unit from co_lines() (-1:
 * none). It has entries of codes 0-2 (short), 11-12 (one line, +1, +2),
 * 14 (long, with a negative delta where the loop jumps back) and 15 (no
 * location).
 */
static const uint8_t lt_bytes[] = {
	0x80, 0x00, 0xd8, 0x08, 0x09, 0x88, 0x41, 0x89, 0x05, 0x80, 0x41, 0xdd, 0x0d, 0x12, 0x90,
	0x31, 0x89, 0x58, 0x8c, 0x58, 0xf0, 0x00, 0x01, 0x05, 0x0f, 0xf0, 0x00, 0x01, 0x05, 0x0f,
	0x88, 0x01, 0xd8, 0x08, 0x09, 0x88, 0x51, 0x89, 0x06, 0x88, 0x01, 0x88, 0x01, 0xf0, 0x08,
	0x04, 0x05, 0x0e, 0xd8, 0x0d, 0x0e, 0xd8, 0x0d, 0x0e, 0xf1, 0x03, 0x01, 0x0e, 0x0f, 0x88,
	0x01, 0x88, 0x01, 0xf8, 0xe5, 0x0b, 0x15, 0xf0, 0x00, 0x01, 0x05, 0x0e, 0xf0, 0x00, 0x01,
	0x05, 0x0e, 0xf0, 0x00, 0x01, 0x05, 0x0e, 0xd8, 0x0c, 0x0d, 0x88, 0x01, 0x88, 0x01, 0x88,
	0x01, 0xf0, 0x03, 0x01, 0x05, 0x0e, 0xf8, 0xf8, 0xf8, 0xe0, 0x0b, 0x0c, 0x80, 0x48,
};
#define LT_FIRSTLINENO 2
static const int lt_lines[] = {
	2,  3,  3,  3,  3,  3,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,
	4,  4,  4,  4,  5,  5,  5,  5,  5,  5,  9,  10, 11, 10, 10, 10, 10, -1, 12,
	12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 12, -1, -1, -1, 14, 14,
};
#define NUNITS (sizeof(lt_lines) / sizeof(lt_lines[0]))

static void line_table_as_cpython_reads_it(void **state)
{
	(void)state;
	for (size_t u = 0; u < NUNITS; u++) {
		uint32_t want = lt_lines[u] < 0 ? 0 : (uint32_t)lt_lines[u];

		assert_int_equal(fr_py_addr2line(lt_bytes, sizeof(lt_bytes), LT_FIRSTLINENO,
						    (int64_t)u * 2),
				 want);
	}
	/* Before the first instruction (a generator not started): the
	 * first line; past the table: none. */
	assert_int_equal(fr_py_addr2line(lt_bytes, sizeof(lt_bytes), LT_FIRSTLINENO, -2), 2);
	assert_int_equal(fr_py_addr2line(lt_bytes, sizeof(lt_bytes), LT_FIRSTLINENO,
					    NUNITS * 2),
			 0);
}

static void line_table_garbage(void **state)
{
	uint8_t junk[512];

	(void)state;
	/* Cut anywhere, even inside a varint, it answers for what it has
	 * and nothing past. */
	for (size_t len = 0; len <= sizeof(lt_bytes); len++)
		for (size_t u = 0; u < NUNITS; u++)
			(void)fr_py_addr2line(lt_bytes, len, LT_FIRSTLINENO, (int64_t)u * 2);
	/* A table that does not start on an entry is no table. */
	assert_int_equal(fr_py_addr2line((const uint8_t[]){ 0x01, 0x80 }, 2, 5, 0), 0);
	/* A varint that never ends. */
	memset(junk, 0xf0, 1);
	memset(junk + 1, 0x7f, sizeof(junk) - 1);
	assert_int_equal(fr_py_addr2line(junk, sizeof(junk), 5, 0), 0);
	srand(20);
	for (int round = 0; round < 2000; round++) {
		for (size_t i = 0; i < sizeof(junk); i++)
			junk[i] = (uint8_t)rand();
		(void)fr_py_addr2line(junk, sizeof(junk), rand() - RAND_MAX / 2, rand() % 4096);
	}
}

/*
 * A made-up 3.11 interpreter in this process's memory, laid out at the
 * offsets the agent reads: one interpreter, one thread state for `tid`,
 * and a chain of frames running the code objects below.
 */
static uint64_t code_type_obj, unicode_type_obj, bytes_type_obj;

struct fake_str {
	uint8_t b[48 + 64];
};

struct fake_code {
	uint8_t b[184 + 2 * NUNITS];
};

struct fake_bytes {
	uint8_t b[32 + sizeof(lt_bytes)];
};

struct fake {
	uint8_t runtime[64];
	uint8_t interp[64];
	uint8_t tstate[168];
	uint8_t cframe[16];
	uint8_t frames[3][72];
	struct fake_code code[2];
	struct fake_str names[2], file;
	struct fake_bytes table;
};

static void put64(uint8_t *p, size_t off, uint64_t v)
{
	memcpy(p + off, &v, sizeof(v));
}

static void put32(uint8_t *p, size_t off, uint32_t v)
{
	memcpy(p + off, &v, sizeof(v));
}

static uint64_t addr(const void *p)
{
	return (uint64_t)(uintptr_t)p;
}

/* A compact ASCII str. */
static void make_str(struct fake_str *s, const char *text)
{
	size_t n = strlen(text);

	memset(s, 0, sizeof(*s));
	put64(s->b, 8, addr(&unicode_type_obj));
	put64(s->b, 16, n);
	/* kind 1, compact, ascii, ready */
	put32(s->b, 32, 1u << 2 | 1u << 5 | 1u << 6 | 1u << 7);
	memcpy(s->b + 48, text, n);
}

static void make_code(struct fake *f, int i, const char *name)
{
	struct fake_code *c = &f->code[i];

	memset(c, 0, sizeof(*c));
	make_str(&f->names[i], name);
	put64(c->b, 8, addr(&code_type_obj));
	put64(c->b, 16, NUNITS);
	put32(c->b, 72, LT_FIRSTLINENO);
	put64(c->b, 112, addr(&f->file));
	put64(c->b, 128, addr(&f->names[i]));
	put64(c->b, 136, addr(&f->table));
	put32(c->b, 168, 1); /* _co_firsttraceable */
}

/* Frame `i` runs code `code` at code unit `unit`, called from `prev`. */
static void make_frame(struct fake *f, int i, int code, size_t unit, const void *prev)
{
	memset(f->frames[i], 0, sizeof(f->frames[i]));
	put64(f->frames[i], 32, addr(&f->code[code]));
	put64(f->frames[i], 48, addr(prev));
	put64(f->frames[i], 56, addr(f->code[code].b + 184 + 2 * unit));
}

static void make_fake(struct fake *f, uint32_t tid)
{
	memset(f, 0, sizeof(*f));
	put64(f->runtime, 40, addr(f->interp));
	put64(f->interp, 16, addr(f->tstate));
	put64(f->tstate, 16, addr(f->interp));
	put64(f->tstate, 56, addr(f->cframe));
	put64(f->tstate, 160, tid);
	put64(f->cframe, 8, addr(f->frames[0]));
	make_str(&f->file, "/srv/train.py");
	make_code(f, 0, "Loader.load_batch");
	make_code(f, 1, "main");
	put64(f->table.b, 8, addr(&bytes_type_obj));
	put64(f->table.b, 16, sizeof(lt_bytes));
	memcpy(f->table.b + 32, lt_bytes, sizeof(lt_bytes));
	make_frame(f, 0, 0, 30, NULL); /* line 10 */
	make_frame(f, 1, 1, 7, NULL);  /* line 4 */
	put64(f->frames[0], 48, addr(f->frames[1]));
}

static const struct fr_py_target target = {
	0x030b02f0, 0, (uint64_t)(uintptr_t)&code_type_obj, (uint64_t)(uintptr_t)&unicode_type_obj,
	(uint64_t)(uintptr_t)&bytes_type_obj,
};

/* Reads `f` into a trace of two threads, 41 and 42; returns thread 42. */
static struct fr_thread *read_fake(struct fake *f, struct fr_trace *t)
{
	struct fr_py_target py = target;

	memset(t, 0, sizeof(*t));
	t->threads = calloc(2, sizeof(*t->threads));
	assert_non_null(t->threads);
	t->nthreads = 2;
	t->threads[0].tid = 41;
	t->threads[1].tid = 42;
	py.runtime = addr(f->runtime);
	assert_int_equal(fr_py_read(&py, t), 0);
	return &t->threads[1];
}

static void reads_a_thread(void **state)
{
	struct fake *f = calloc(1, sizeof(*f));
	struct fr_trace t;
	struct fr_thread *th;

	(void)state;
	make_fake(f, 42);
	th = read_fake(f, &t);
	assert_int_equal(t.threads[0].npyframes, 0);
	assert_int_equal(th->npyframes, 2);
	assert_false(th->py_truncated);
	assert_string_equal(th->pyframes[0].function, "Loader.load_batch");
	assert_string_equal(th->pyframes[0].file, "/srv/train.py");
	assert_int_equal(th->pyframes[0].line, 10);
	assert_string_equal(th->pyframes[1].function, "main");
	assert_int_equal(th->pyframes[1].line, 4);
	fr_trace_free(&t);

	/* A frame not yet begun (before _co_firsttraceable) is left out, as
	 * tracebacks leave it out; the rest is read. */
	make_frame(f, 0, 0, 0, f->frames[1]);
	th = read_fake(f, &t);
	assert_int_equal(th->npyframes, 1);
	assert_string_equal(th->pyframes[0].function, "main");
	assert_false(th->py_truncated);
	fr_trace_free(&t);

	/* A thread state of a thread the dump does not list is skipped. */
	put64(f->tstate, 160, 7);
	th = read_fake(f, &t);
	assert_int_equal(th->npyframes, 0);
	fr_trace_free(&t);
	free(f);
}

/* 3.11's entry marks (_PyInterpreterFrame.is_entry, at 68) read as the
 * frames' `entry`; a thread with a mark it cannot place gets none. */
static void entry_marks(void **state)
{
	struct fake *f = calloc(1, sizeof(*f));
	struct fr_trace t;
	struct fr_thread *th;

	(void)state;
	make_fake(f, 42);
	f->frames[1][68] = 1;
	th = read_fake(f, &t);
	assert_int_equal(th->npyframes, 2);
	assert_false(th->pyframes[0].entry);
	assert_true(th->pyframes[1].entry);
	fr_trace_free(&t);

	f->frames[0][68] = 1;
	th = read_fake(f, &t);
	assert_true(th->pyframes[0].entry && th->pyframes[1].entry);
	fr_trace_free(&t);

	/* The inner call of the loop is at a frame not yet begun, which is
	 * left out: its mark has no frame, and main's would pair with the
	 * wrong native call. */
	make_frame(f, 0, 0, 0, f->frames[1]);
	f->frames[0][68] = 1;
	th = read_fake(f, &t);
	assert_int_equal(th->npyframes, 1);
	assert_false(th->pyframes[0].entry);
	fr_trace_free(&t);

	/* A bool that is not 0 or 1: changing as it was read, no marks. */
	make_fake(f, 42);
	f->frames[1][68] = 1;
	f->frames[0][68] = 7;
	th = read_fake(f, &t);
	assert_int_equal(th->npyframes, 2);
	assert_false(th->pyframes[0].entry || th->pyframes[1].entry);
	fr_trace_free(&t);
	free(f);
}

/* Makes `f` wrong in way `how`; false when there are no more ways. */
static bool spoil(struct fake *f, int how)
{
	switch (how) {
	case 0: put64(f->code[1].b, 8, addr(&unicode_type_obj)); return true;   /* not a code */
	case 1: put64(f->frames[1], 32, 16); return true;                       /* unmapped */
	case 2: put64(f->frames[1], 56, addr(f->code[1].b) + 184 + 2 * NUNITS); return true;
	case 3: put64(f->frames[1], 56, addr(f->code[1].b) + 185); return true; /* odd */
	case 4: put64(f->code[1].b, 16, (uint64_t)-5); return true;             /* size */
	case 5: put64(f->code[1].b, 128, addr(&f->table)); return true;        /* name a bytes */
	case 6: put64(f->names[1].b, 16, (uint64_t)1 << 40); return true;       /* length */
	case 7: put32(f->names[1].b, 32, 1u << 2 | 1u << 7); return true;       /* not compact */
	case 8: f->names[1].b[48] = 0; return true;                             /* NUL inside */
	case 9: f->frames[1][69] = 9; return true;                              /* owner */
	case 10: put64(f->frames[0], 48, 0x10); return true;                    /* previous */
	default: return false;
	}
}

static void garbage_truncates_never_faults(void **state)
{
	struct fake *f = calloc(1, sizeof(*f));
	struct fr_trace t;
	struct fr_thread *th;

	(void)state;
	/* Each inconsistency in the outer frame: the inner one is kept, the
	 * thread marked truncated. */
	for (int how = 0;; how++) {
		make_fake(f, 42);
		if (!spoil(f, how))
			break;
		th = read_fake(f, &t);
		assert_int_equal(th->npyframes, 1);
		assert_string_equal(th->pyframes[0].function, "Loader.load_batch");
		assert_true(th->py_truncated);
		fr_trace_free(&t);
	}

	/* A location table that is not a bytes: the frame, line unknown. */
	make_fake(f, 42);
	put64(f->table.b, 8, addr(&code_type_obj));
	th = read_fake(f, &t);
	assert_int_equal(th->npyframes, 2);
	assert_int_equal(th->pyframes[0].line, 0);
	fr_trace_free(&t);

	/* A cycle of frames stops at the depth bound, truncated. */
	make_fake(f, 42);
	put64(f->frames[1], 48, addr(f->frames[0]));
	th = read_fake(f, &t);
	assert_int_equal(th->npyframes, FR_PY_MAX_DEPTH);
	assert_true(th->py_truncated);
	fr_trace_free(&t);

	/* A cycle of thread states, of interpreters: bounded, no frames lost. */
	make_fake(f, 42);
	put64(f->tstate, 8, addr(f->tstate));
	put64(f->interp, 0, addr(f->interp));
	th = read_fake(f, &t);
	assert_int_equal(th->npyframes, 2);
	fr_trace_free(&t);

	/* A thread state of another interpreter ends the list. */
	make_fake(f, 42);
	put64(f->tstate, 16, addr(f->runtime));
	th = read_fake(f, &t);
	assert_int_equal(th->npyframes, 0);
	fr_trace_free(&t);

	/* Random bytes everywhere, pointers into the fake or nowhere. */
	srand(11);
	for (int round = 0; round < 3000; round++) {
		uint8_t *b = (uint8_t *)f;

		make_fake(f, 42);
		for (int k = 0; k < 8; k++) {
			size_t at = (size_t)rand() % (sizeof(*f) - 8);

			if (rand() % 2)
				put64(b, at & ~(size_t)7, addr(b + (size_t)rand() % sizeof(*f)));
			else
				b[at] = (uint8_t)rand();
		}
		th = read_fake(f, &t);
		assert_true(th->npyframes <= FR_PY_MAX_DEPTH);
		for (size_t i = 0; i < th->npyframes; i++)
			assert_true(strlen(th->pyframes[i].function) <= FR_PY_STR_MAX &&
				    strlen(th->pyframes[i].file) <= FR_PY_STR_MAX);
		fr_trace_free(&t);
	}
	free(f);
}

/* The offsets pyframes.c reads at, from CPython 3.11's own headers. */
static void offsets_match_python_headers(void **state)
{
	(void)state;
#ifdef FR_HAVE_PY311_HEADERS
#if PY_VERSION_HEX >> 16 != 0x030b
	skip();
#else
	/* Include/internal/pycore_runtime.h */
	assert_int_equal(offsetof(_PyRuntimeState, interpreters.head), 40);
	/* Include/internal/pycore_interp.h */
	assert_int_equal(offsetof(PyInterpreterState, next), 0);
	assert_int_equal(offsetof(PyInterpreterState, threads.head), 16);
	/* Include/cpython/pystate.h */
	assert_int_equal(offsetof(PyThreadState, next), 8);
	assert_int_equal(offsetof(PyThreadState, interp), 16);
	assert_int_equal(offsetof(PyThreadState, cframe), 56);
	assert_int_equal(offsetof(PyThreadState, native_thread_id), 160);
	assert_int_equal(offsetof(_PyCFrame, current_frame), 8);
	/* Include/internal/pycore_frame.h */
	assert_int_equal(offsetof(_PyInterpreterFrame, f_code), 32);
	assert_int_equal(offsetof(_PyInterpreterFrame, previous), 48);
	assert_int_equal(offsetof(_PyInterpreterFrame, prev_instr), 56);
	assert_int_equal(offsetof(_PyInterpreterFrame, is_entry), 68);
	assert_int_equal(offsetof(_PyInterpreterFrame, owner), 69);
	assert_int_equal(FRAME_OWNED_BY_GENERATOR, 1);
	assert_int_equal(FRAME_OWNED_BY_FRAME_OBJECT, 2);
	/* Include/cpython/code.h */
	assert_int_equal(offsetof(PyCodeObject, co_firstlineno), 72);
	assert_int_equal(offsetof(PyCodeObject, co_filename), 112);
	assert_int_equal(offsetof(PyCodeObject, co_qualname), 128);
	assert_int_equal(offsetof(PyCodeObject, co_linetable), 136);
	assert_int_equal(offsetof(PyCodeObject, _co_firsttraceable), 168);
	assert_int_equal(offsetof(PyCodeObject, co_code_adaptive), 184);
	/* Include/object.h, Include/cpython/bytesobject.h, unicodeobject.h */
	assert_int_equal(offsetof(PyObject, ob_type), 8);
	assert_int_equal(offsetof(PyVarObject, ob_size), 16);
	assert_int_equal(offsetof(PyBytesObject, ob_sval), 32);
	assert_int_equal(offsetof(PyASCIIObject, length), 16);
	assert_int_equal(sizeof(PyASCIIObject), 48);
	assert_int_equal(sizeof(PyCompactUnicodeObject), 72);
#endif
#else
	skip(); /* python3.11-dev is not installed */
#endif
}

#ifdef FR_HAVE_PY311_HEADERS
/*
 * The real thing: Python calling C calling Python, twice over. probe() is a
 * C builtin that, called from leaf(), reads its own thread as the agent
 * does (its Python frames, and its native stack by name) and describes
 * them: "leaf* mid* top <module>* | 3 loops | together", a "*" after each
 * entry frame.
 */
static const char nested_src[] =
	"def leaf(x):\n"
	"    return probe(x)\n"
	"def mid(x):\n"
	"    return list(map(leaf, [x]))\n"
	"def top():\n"
	"    return sorted([1], key=mid)\n"
	"top()\n";

static char described[512];

static void describe_this_thread(char *out, size_t cap)
{
	struct fr_thread th = { .tid = (uint32_t)gettid() };
	struct fr_trace t = { .threads = &th, .nthreads = 1 };
	void *ips[64];
	int n = backtrace(ips, 64);
	size_t len = 0, loops = 0;

	th.frames = calloc((size_t)n, sizeof(*th.frames));
	for (int i = 0; th.frames && i < n; i++) {
		Dl_info info;

		th.frames[i].ip = (uint64_t)(uintptr_t)ips[i];
		if (dladdr(ips[i], &info) && info.dli_sname)
			th.frames[i].name = strdup(info.dli_sname);
		loops += th.frames[i].name &&
			 strcmp(th.frames[i].name, "_PyEval_EvalFrameDefault") == 0;
		th.nframes = (size_t)i + 1;
	}
	if (fr_pyframes_collect(&t) != 0)
		snprintf(out, cap, "reading failed");
	for (size_t i = 0; i < th.npyframes && len < cap; i++)
		len += (size_t)snprintf(out + len, cap - len, "%s%s ", th.pyframes[i].function,
					th.pyframes[i].entry ? "*" : "");
	if (len < cap)
		snprintf(out + len, cap - len, "| %zu loops | %s", loops,
			 fr_thread_interleaves(&th) ? "together" : "apart");
	fr_thread_free(&th);
}

static PyObject *probe(PyObject *self, PyObject *arg)
{
	(void)self;
	if (!described[0])
		describe_this_thread(described, sizeof(described));
	Py_INCREF(arg);
	return arg;
}

static PyMethodDef probe_def = { "probe", probe, METH_O, NULL };

/* In a child, which ends with _exit: the interpreter stays out of this
 * process, and its memory out of a sanitizer's leak report. */
static void run_nested(int fd)
{
	PyObject *globals, *fn, *r;

	Py_InitializeEx(0);
	globals = PyModule_GetDict(PyImport_AddModule("__main__"));
	fn = PyCFunction_New(&probe_def, NULL);
	if (!globals || !fn || PyDict_SetItemString(globals, "probe", fn) ||
	    !(r = PyRun_String(nested_src, Py_file_input, globals, globals)))
		snprintf(described, sizeof(described), "the script failed");
	if (write(fd, described, strlen(described)) < 0)
		_exit(2);
	_exit(0);
}
#endif

static void entry_marks_of_a_real_interpreter(void **state)
{
	(void)state;
#if defined(FR_HAVE_PY311_HEADERS) && PY_VERSION_HEX >> 16 == 0x030b
	char got[sizeof(described)] = "";
	int fds[2], status;
	ssize_t n, len = 0;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		run_nested(fds[1]);
	}
	close(fds[1]);
	while (len < (ssize_t)sizeof(got) - 1 &&
	       (n = read(fds[0], got + len, sizeof(got) - 1 - (size_t)len)) > 0)
		len += n;
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* sorted() and map() each call the loop again: leaf and mid are
	 * entries; top runs in <module>'s call (a Python call of Python),
	 * which PyRun_String began. */
	assert_string_equal(got, "leaf* mid* top <module>* | 3 loops | together");
#else
	skip(); /* python3.11-dev is not installed */
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(line_table_as_cpython_reads_it),
		cmocka_unit_test(line_table_garbage),
		cmocka_unit_test(reads_a_thread),
		cmocka_unit_test(entry_marks),
		cmocka_unit_test(garbage_truncates_never_faults),
		cmocka_unit_test(offsets_match_python_headers),
		cmocka_unit_test(entry_marks_of_a_real_interpreter),
	};

	return cmocka_run_group_tests_name("pyframes", tests, NULL, NULL);
}
