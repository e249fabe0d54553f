/*
 * A thread's stack in fr-analyze's report (dumps/verdict_report.c): its
 * Python frames among its native ones where each call of CPython's
 * evaluation loop pairs with one group of Python frames, and listed apart,
 * as before, wherever the pairing is not certain.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../dumps/correlate.h"
#include "../../dumps/trace.h"

#define EVAL "_PyEval_EvalFrameDefault"

/*
 * A thread of the python3 running main -> sorted(key=by_len) -> by_len ->
 * time.sleep: native frames innermost first (NULL for one without a
 * symbol), and Python frames innermost first, "*" before the name of an
 * entry frame.
 */
static const char *const native[] = {
	"clock_nanosleep", NULL, "PyObject_Vectorcall", EVAL, "_PyObject_Call",
	"list_sort_impl", NULL, EVAL, "PyEval_EvalCode", "Py_RunMain", "_start",
};
static const char *const python[] = { "*by_len", "main", "*<module>" };
#define NNATIVE (sizeof(native) / sizeof(native[0]))
#define NPYTHON (sizeof(python) / sizeof(python[0]))

static void make_thread(struct fr_thread *th, const char *const *names, size_t n,
			const char *const *py, size_t npy)
{
	memset(th, 0, sizeof(*th));
	th->tid = 77;
	snprintf(th->name, sizeof(th->name), "python3");
	th->frames = calloc(n, sizeof(*th->frames));
	th->pyframes = calloc(npy, sizeof(*th->pyframes));
	assert_true(th->frames && th->pyframes);
	for (size_t i = 0; i < n; i++) {
		th->frames[i].name = names[i] ? strdup(names[i]) : NULL;
		th->frames[i].offset = 0x10 + i;
		th->frames[i].ip = 0x400000 + i;
	}
	th->nframes = n;
	for (size_t i = 0; i < npy; i++) {
		struct fr_pyframe *f = &th->pyframes[i];

		f->entry = py[i][0] == '*';
		f->function = strdup(py[i] + f->entry);
		f->file = strdup("/srv/train.py");
		f->line = (uint32_t)(10 * (i + 1));
	}
	th->npyframes = npy;
}

/* What fr_thread_print prints of `th`; free it. */
static char *printed(const struct fr_thread *th)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);

	assert_non_null(out);
	fr_thread_print(out, th);
	fclose(out);
	return text;
}

/* Today's layout, the Python frames apart: what every thread whose
 * pairing is not certain gets. */
static const char apart[] =
	"  thread 77 \"python3\":\n"
	"    py#0 by_len (train.py:10)\n"
	"    py#1 main (train.py:20)\n"
	"    py#2 <module> (train.py:30)\n"
	"    native:\n"
	"    #0 clock_nanosleep+0x10\n"
	"    #1 ??+0x11\n"
	"    #2 PyObject_Vectorcall+0x12\n"
	"    #3 _PyEval_EvalFrameDefault+0x13\n"
	"    #4 _PyObject_Call+0x14\n"
	"    #5 list_sort_impl+0x15\n"
	"    #6 ??+0x16\n"
	"    #7 _PyEval_EvalFrameDefault+0x17\n"
	"    #8 PyEval_EvalCode+0x18\n"
	"    #9 Py_RunMain+0x19\n"
	"    #10 _start+0x1a\n";

static void interleaves_when_the_loops_match_the_entries(void **state)
{
	struct fr_thread th;
	char *text;

	(void)state;
	make_thread(&th, native, NNATIVE, python, NPYTHON);
	assert_true(fr_thread_interleaves(&th));
	text = printed(&th);
	/* by_len runs in the inner call of the loop (from sorted's key),
	 * main and <module> in the outer one (from PyEval_EvalCode). */
	assert_string_equal(text,
			    "  thread 77 \"python3\":\n"
			    "    #0 clock_nanosleep+0x10\n"
			    "    #1 ??+0x11\n"
			    "    #2 PyObject_Vectorcall+0x12\n"
			    "    py#0 by_len (train.py:10)\n"
			    "    #3 _PyEval_EvalFrameDefault+0x13\n"
			    "    #4 _PyObject_Call+0x14\n"
			    "    #5 list_sort_impl+0x15\n"
			    "    #6 ??+0x16\n"
			    "    py#1 main (train.py:20)\n"
			    "    py#2 <module> (train.py:30)\n"
			    "    #7 _PyEval_EvalFrameDefault+0x17\n"
			    "    #8 PyEval_EvalCode+0x18\n"
			    "    #9 Py_RunMain+0x19\n"
			    "    #10 _start+0x1a\n");
	free(text);
	fr_thread_free(&th);

	/* One call of the loop running every frame: all after it. */
	make_thread(&th, native + 4, NNATIVE - 4, (const char *const[]){ "by_len", "*main" }, 2);
	assert_true(fr_thread_interleaves(&th));
	text = printed(&th);
	assert_non_null(strstr(text, "    #2 ??+0x12\n"
				     "    py#0 by_len (train.py:10)\n"
				     "    py#1 main (train.py:20)\n"
				     "    #3 _PyEval_EvalFrameDefault+0x13\n"));
	free(text);
	fr_thread_free(&th);
}

static void apart_when_the_counts_differ(void **state)
{
	static const char *const one_entry[] = { "by_len", "main", "*<module>" };
	static const char *const three_entries[] = { "*by_len", "*main", "*<module>" };
	const char *names[NNATIVE];
	struct fr_thread th;
	char *text;

	(void)state;
	/* Fewer entries than calls of the loop (marks from a writer that
	 * had none, or lost), more entries than calls. */
	make_thread(&th, native, NNATIVE, one_entry, NPYTHON);
	assert_false(fr_thread_interleaves(&th));
	text = printed(&th);
	assert_string_equal(text, apart);
	free(text);
	fr_thread_free(&th);
	make_thread(&th, native, NNATIVE, three_entries, NPYTHON);
	assert_false(fr_thread_interleaves(&th));
	fr_thread_free(&th);

	/* No marks at all: a 1.9 dump reads as before. */
	make_thread(&th, native, NNATIVE, (const char *const[]){ "by_len", "main", "<module>" },
		    NPYTHON);
	assert_false(fr_thread_interleaves(&th));
	text = printed(&th);
	assert_string_equal(text, apart);
	free(text);
	fr_thread_free(&th);

	/* A call of the loop whose symbol was not found: one loop frame for
	 * two entries. */
	memcpy(names, native, sizeof(names));
	names[7] = NULL;
	make_thread(&th, names, NNATIVE, python, NPYTHON);
	assert_false(fr_thread_interleaves(&th));
	fr_thread_free(&th);

	/* The outermost Python frame not an entry: frames no call claims. */
	make_thread(&th, native, NNATIVE, (const char *const[]){ "*by_len", "*main", "<module>" },
		    NPYTHON);
	assert_false(fr_thread_interleaves(&th));
	fr_thread_free(&th);

	/* No Python frames, or no native ones. */
	make_thread(&th, native, NNATIVE, python, 0);
	assert_false(fr_thread_interleaves(&th));
	fr_thread_free(&th);
	make_thread(&th, native, 0, python, NPYTHON);
	assert_false(fr_thread_interleaves(&th));
	text = printed(&th);
	assert_non_null(strstr(text, "py#2 <module> (train.py:30)\n    (no frames)\n"));
	free(text);
	fr_thread_free(&th);
}

static void apart_when_a_stack_is_cut_short(void **state)
{
	struct fr_thread th;
	char *text;

	(void)state;
	/* The native stack cut before the outer call of the loop (the
	 * agent keeps 64 frames). */
	make_thread(&th, native, 7, python, NPYTHON);
	assert_false(fr_thread_interleaves(&th));
	fr_thread_free(&th);

	/* The Python frames cut short (too deep, or changing as they were
	 * read), even where the counts happen to agree: the outer ones are
	 * not known, nor which call runs them. */
	make_thread(&th, native, NNATIVE, python, NPYTHON);
	th.py_truncated = true;
	assert_false(fr_thread_interleaves(&th));
	text = printed(&th);
	assert_non_null(strstr(text, "    py#2 <module> (train.py:30)\n"
				     "    py#3 (outer Python frames not read: too deep, or changing as they were read)\n"
				     "    native:\n"));
	free(text);
	fr_thread_free(&th);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(interleaves_when_the_loops_match_the_entries),
		cmocka_unit_test(apart_when_the_counts_differ),
		cmocka_unit_test(apart_when_a_stack_is_cut_short),
	};

	return cmocka_run_group_tests_name("verdict_report", tests, NULL, NULL);
}
