/*
 * Python frames of every thread, for a dump (pyframes.c): where in the
 * script each thread is, read from the interpreter's memory without the
 * GIL, without ptrace and without running Python.
 */
#ifndef FR_AGENT_PYFRAMES_H
#define FR_AGENT_PYFRAMES_H

#include <stddef.h>
#include <stdint.h>

struct fr_trace;

/* Bounds of one reading: threads, frames a thread, bytes a name. */
#define FR_PY_MAX_THREADS 256
#define FR_PY_MAX_DEPTH 128
#define FR_PY_STR_MAX 255

/*
 * Gives the threads of `t` (already listed, with their tids) their Python
 * frames when this process runs a CPython the agent reads (3.11 to 3.13), or sets
 * t->python_note to say which version it does not read. Nothing for a
 * process without Python. Link thread only (it allocates). Returns 0 or
 * -ENOMEM.
 */
int fr_pyframes_collect(struct fr_trace *t);

/*
 * Where an interpreter's memory is: the addresses of _PyRuntime and of the
 * type objects whose addresses tell a code object, a str and a bytes from
 * anything else. fr_pyframes_collect finds them by symbol; tests make
 * their own.
 */
struct fr_py_target {
	uint64_t version; /* PY_VERSION_HEX */
	uint64_t runtime;
	uint64_t code_type;
	uint64_t unicode_type;
	uint64_t bytes_type;
};

/*
 * Reads the CPython interpreter at `py` (3.11, 3.12 or 3.13) into the
 * threads of `t` whose tid a thread state names. Every read goes through
 * process_vm_readv on this process, so that an address that is not mapped
 * is an error, never a fault; anything inconsistent ends that thread's
 * frames there, marked py_truncated. Returns 0, -ENOTSUP for a version it
 * does not read, or -ENOMEM.
 */
int fr_py_read(const struct fr_py_target *py, struct fr_trace *t);

/*
 * The line of the instruction at byte offset `addr` of a code object whose
 * first line is `firstlineno`, from its location table (co_linetable, in
 * the format of CPython 3.11 to 3.13, Objects/locations.md): 0 when the
 * table has none for it. Pure, for any bytes.
 */
uint32_t fr_py_addr2line(const uint8_t *table, size_t len, int32_t firstlineno, int64_t addr);

#endif
