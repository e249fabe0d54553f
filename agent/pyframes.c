/*
 * Python frames for dumps: which line of the script each thread is on.
 *
 * The native stack of a Python thread is the interpreter's evaluation loop
 * over and over; what a user needs is the Python stack, which lives in the
 * interpreter's own structures. They are read here, on the link thread,
 * when a dump is taken, and never on the hooked call path. The thread that
 * holds the GIL may be the one that is stuck, so nothing here takes it,
 * calls into Python or stops a thread: the link thread reads every thread
 * state from outside, as a debugger would, but from inside the process.
 *
 * Every read of interpreter memory is process_vm_readv on this process,
 * which answers EFAULT for an address that is not mapped instead of
 * faulting: the structures change under the reader (a thread pops a frame,
 * exits, a string is freed), so any pointer may be stale. What is read is
 * checked before it is believed: a code object, a str and a bytes must
 * have the type object's address the symbols give, lengths and offsets
 * must be sane, and a thread's walk stops at its first inconsistency,
 * marked py_truncated, rather than report a frame it is not sure of. Walks
 * are bounded in threads, depth and string length.
 *
 * Each frame at which a call of the evaluation loop began is marked as an
 * entry, so that fr-analyze can show each group of Python frames beside
 * the native frame of the call that runs it (dumps/FORMAT.md).
 *
 * The layout is chosen by the version the process carries (Py_Version):
 * CPython 3.11 (Debian 12's, the one required), 3.12 and 3.13; any other
 * gets a python_note instead. The offsets are written out here rather
 * than taken from Python's headers at build time: the agent must build
 * without them, and the headers of the build machine's Python say nothing
 * of the version an application runs. tests/unit/test_pyframes.c checks
 * 3.11's against the real headers where python3.11-dev is installed.
 * (3.13 also describes its layout itself, in _Py_DebugOffsets at the start
 * of _PyRuntime; reading that would serve 3.14 on, whose own structures
 * this file does not know.)
 */
#include "pyframes.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../dumps/trace.h"
#include "clock.h"
#include "dlsym.h"

/*
 * Where the fields read are, by version: byte offsets on a 64-bit build,
 * each offsetof() of the named field in that version's headers (the unit
 * test checks 3.11's against the real headers where python3.11-dev is
 * installed; 3.12's and 3.13's were taken from their headers the same
 * way, and test_python_versions reads those interpreters).
 */
struct layout {
	uint32_t version;          /* PY_VERSION_HEX >> 16 */
	uint16_t rt_interp_head;   /* _PyRuntimeState.interpreters.head */
	uint16_t is_next;          /* PyInterpreterState.next */
	uint16_t is_threads_head;  /* PyInterpreterState.threads.head */
	uint16_t ts_next;          /* PyThreadState.next */
	uint16_t ts_interp;        /* PyThreadState.interp */
	uint16_t ts_frame;         /* PyThreadState.cframe; from 3.13 .current_frame */
	int16_t cf_current_frame;  /* _PyCFrame.current_frame; -1: ts_frame is the frame */
	uint16_t ts_native_tid;    /* PyThreadState.native_thread_id */
	uint16_t fr_code;          /* _PyInterpreterFrame.f_code; from 3.13 .f_executable */
	uint16_t fr_previous;      /* _PyInterpreterFrame.previous */
	/* _PyInterpreterFrame.prev_instr, the last instruction begun; from
	 * 3.13 .instr_ptr, the one being executed or next: either way the
	 * interpreter's own "last instruction" for line numbers. */
	uint16_t fr_instr;
	uint16_t fr_owner;         /* _PyInterpreterFrame.owner (a char) */
	/* _PyInterpreterFrame.is_entry (a bool, 3.11 only); -1 from 3.12,
	 * where the evaluation loop's own frame on the C stack marks it. */
	int16_t fr_is_entry;
	uint8_t owner_max;         /* the highest FRAME_OWNED_BY_* */
	uint16_t co_firstlineno;   /* PyCodeObject.co_firstlineno (int) */
	uint16_t co_filename;
	uint16_t co_qualname;
	uint16_t co_linetable;
	uint16_t co_firsttraceable; /* PyCodeObject._co_firsttraceable (int) */
	uint16_t co_code;          /* PyCodeObject.co_code_adaptive */
	uint16_t str_ascii_data;   /* sizeof(PyASCIIObject) */
	uint16_t str_data;         /* sizeof(PyCompactUnicodeObject) */
	bool str_ready;            /* PyASCIIObject.state has `ready` (bit 7) */
};

static const struct layout layouts[] = {
	{ .version = 0x030b, .rt_interp_head = 40, .is_next = 0, .is_threads_head = 16,
	  .ts_next = 8, .ts_interp = 16, .ts_frame = 56, .cf_current_frame = 8,
	  .ts_native_tid = 160, .fr_code = 32, .fr_previous = 48, .fr_instr = 56, .fr_owner = 69,
	  .fr_is_entry = 68, .owner_max = 2, .co_firstlineno = 72, .co_filename = 112,
	  .co_qualname = 128, .co_linetable = 136, .co_firsttraceable = 168, .co_code = 184,
	  .str_ascii_data = 48, .str_data = 72, .str_ready = true },
	{ .version = 0x030c, .rt_interp_head = 40, .is_next = 0, .is_threads_head = 72,
	  .ts_next = 8, .ts_interp = 16, .ts_frame = 56, .cf_current_frame = 0,
	  .ts_native_tid = 144, .fr_code = 0, .fr_previous = 8, .fr_instr = 56, .fr_owner = 70,
	  .fr_is_entry = -1, .owner_max = 3, .co_firstlineno = 68, .co_filename = 112,
	  .co_qualname = 128, .co_linetable = 136, .co_firsttraceable = 176, .co_code = 192,
	  .str_ascii_data = 40, .str_data = 56, .str_ready = false },
	{ .version = 0x030d, .rt_interp_head = 632, .is_next = 7264, .is_threads_head = 7344,
	  .ts_next = 8, .ts_interp = 16, .ts_frame = 72, .cf_current_frame = -1,
	  .ts_native_tid = 160, .fr_code = 0, .fr_previous = 8, .fr_instr = 56, .fr_owner = 70,
	  .fr_is_entry = -1, .owner_max = 3, .co_firstlineno = 68, .co_filename = 112,
	  .co_qualname = 128, .co_linetable = 136, .co_firsttraceable = 184, .co_code = 200,
	  .str_ascii_data = 40, .str_data = 56, .str_ready = false },
};

/* The same in every version read. */
enum {
	OB_TYPE = 8,               /* PyObject.ob_type */
	OB_SIZE = 16,              /* PyVarObject.ob_size */
	BYTES_DATA = 32,           /* PyBytesObject.ob_sval */
	STR_LENGTH = 16,           /* PyASCIIObject.length */
	STR_STATE = 32,            /* PyASCIIObject.state (bit fields) */
	FRAME_READ = 72,           /* bytes of a frame read: past every field */
	CODE_READ_MAX = 256,       /* bytes of a code object read, at most */
	TSTATE_READ_MAX = 256,
};

/* _PyInterpreterFrame.owner: FRAME_OWNED_BY_GENERATOR; from 3.12,
 * FRAME_OWNED_BY_CSTACK, the interpreter's entry frames, which run no code
 * of the script. */
#define OWNED_BY_GENERATOR 1
#define OWNED_BY_CSTACK 3
/* More than any real interpreter has; a longer list is a cycle. */
#define MAX_INTERPRETERS 64
/* Code units of one code object, and bytes of its location table, past
 * which it is taken for garbage. */
#define MAX_CODE_UNITS (1 << 24)
#define MAX_LINETABLE (1 << 20)

/* Copies `len` bytes at `addr` of this process; false when any of them is
 * not mapped (or the address is null). */
static bool peek(uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };

	/* getpid() each time, not kept: a forked child must read itself. */
	return addr && process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)len;
}

static uint64_t u64_at(const uint8_t *p, size_t off)
{
	uint64_t v;

	memcpy(&v, p + off, sizeof(v));
	return v;
}

static int32_t i32_at(const uint8_t *p, size_t off)
{
	int32_t v;

	memcpy(&v, p + off, sizeof(v));
	return v;
}

/* Appends code point `c` as UTF-8 to out[*n], room for `cap` bytes; false
 * when it does not fit. */
static bool put_utf8(char *out, size_t *n, size_t cap, uint32_t c)
{
	uint8_t b[4];
	size_t k;

	if (c < 0x80) {
		b[0] = (uint8_t)c;
		k = 1;
	} else if (c < 0x800) {
		b[0] = (uint8_t)(0xc0 | c >> 6);
		b[1] = (uint8_t)(0x80 | (c & 0x3f));
		k = 2;
	} else if (c < 0x10000) {
		b[0] = (uint8_t)(0xe0 | c >> 12);
		b[1] = (uint8_t)(0x80 | (c >> 6 & 0x3f));
		b[2] = (uint8_t)(0x80 | (c & 0x3f));
		k = 3;
	} else {
		b[0] = (uint8_t)(0xf0 | c >> 18);
		b[1] = (uint8_t)(0x80 | (c >> 12 & 0x3f));
		b[2] = (uint8_t)(0x80 | (c >> 6 & 0x3f));
		b[3] = (uint8_t)(0x80 | (c & 0x3f));
		k = 4;
	}
	if (*n + k > cap)
		return false;
	memcpy(out + *n, b, k);
	*n += k;
	return true;
}

/*
 * The str object at `addr` as UTF-8 into `out` (FR_PY_STR_MAX + 1 bytes),
 * cut at FR_PY_STR_MAX bytes on a character's boundary. False when it is
 * not a ready compact str, or not readable.
 */
static bool read_str(const struct fr_py_target *py, const struct layout *l, uint64_t addr,
		     char *out)
{
	/* Code units of a string cut at the limit: the widest takes 4 bytes. */
	uint8_t h[STR_STATE + 4], raw[FR_PY_STR_MAX * 4];
	uint32_t state, kind;
	int64_t length;
	size_t n = 0, take;

	if (!peek(addr, h, STR_STATE + 4) || u64_at(h, OB_TYPE) != py->unicode_type)
		return false;
	memcpy(&length, h + STR_LENGTH, sizeof(length));
	memcpy(&state, h + STR_STATE, sizeof(state));
	/* state: interned:2, kind:3, compact:1, ascii:1, then ready:1 in 3.11 */
	kind = state >> 2 & 7;
	if (!(state >> 5 & 1) || (l->str_ready && !(state >> 7 & 1)) || length < 0 ||
	    length > MAX_CODE_UNITS ||
	    (kind != 1 && kind != 2 && kind != 4))
		return false;
	take = (size_t)length < FR_PY_STR_MAX ? (size_t)length : FR_PY_STR_MAX;
	if (state >> 6 & 1) {
		if (kind != 1 || !peek(addr + l->str_ascii_data, out, take))
			return false;
		for (size_t i = 0; i < take; i++)
			if (!out[i] || (uint8_t)out[i] >= 0x80)
				return false;
		out[take] = '\0';
		return true;
	}
	/* Not ASCII: the code units follow the compact header, 1, 2 or 4
	 * bytes each (the UTF-8 copy exists only once asked for). */
	if (!peek(addr + l->str_data, raw, take * kind))
		return false;
	for (size_t i = 0; i < take; i++) {
		uint32_t c = kind == 1 ? raw[i] :
			     kind == 2 ? (uint32_t)raw[2 * i] | (uint32_t)raw[2 * i + 1] << 8 :
					 (uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 |
						 (uint32_t)raw[4 * i + 2] << 16 |
						 (uint32_t)raw[4 * i + 3] << 24;

		if (!c || c > 0x10ffff || (c >= 0xd800 && c < 0xe000))
			return false;
		if (!put_utf8(out, &n, FR_PY_STR_MAX, c))
			break;
	}
	out[n] = '\0';
	return true;
}

/* A location table's varint at t[*i]: 6 bits a byte, low first, bit 6
 * saying more follow. False when it runs past the table. */
static bool scan_varint(const uint8_t *t, size_t len, size_t *i, uint32_t *out)
{
	uint32_t v = 0;

	for (unsigned shift = 0; *i < len && shift < 32; shift += 6) {
		uint8_t b = t[(*i)++];

		v |= (uint32_t)(b & 63) << shift;
		if (!(b & 64)) {
			*out = v;
			return true;
		}
	}
	return false;
}

uint32_t fr_py_addr2line(const uint8_t *t, size_t len, int32_t firstlineno, int64_t addr)
{
	int64_t line = firstlineno, end = 0;
	size_t i = 0;

	if (addr < 0)
		return firstlineno > 0 ? (uint32_t)firstlineno : 0;
	/* Each entry: a byte with bit 7 set, its code in bits 3-6 and the
	 * code units it covers less one in bits 0-2, then the code's operands.
	 * Codes 0-9: same line (short form); 10-12: line + 0, 1, 2 (one-line
	 * form); 13: line + svarint, no columns; 14: line + svarint, then end
	 * line and columns (long form); 15: no location. */
	while (i < len) {
		uint8_t b = t[i];
		int code = b >> 3 & 15;
		uint32_t uv;

		if (!(b & 0x80))
			return 0; /* not an entry's first byte: not a table */
		end += ((b & 7) + 1) * 2;
		i++;
		if (code == 13 || code == 14) {
			if (!scan_varint(t, len, &i, &uv))
				return 0;
			line += uv & 1 ? -(int64_t)(uv >> 1) : (int64_t)(uv >> 1);
		} else if (code == 11 || code == 12) {
			line += code - 10;
		}
		if (addr < end)
			return code == 15 || line <= 0 || line > UINT32_MAX ? 0 : (uint32_t)line;
		while (i < len && !(t[i] & 0x80))
			i++;
	}
	return 0;
}

/*
 * What a reading keeps of each code object it met, so that the frames of
 * 64 threads running the same functions read each name and location
 * table once: a code object is immutable in what is kept here, and an
 * entry is used only while the code object still points at the same
 * name, file and table objects. Direct-mapped on the code's address.
 */
#define CODE_CACHE 256

struct code_info {
	uint64_t code, qualname, filename, table; /* addresses: the key */
	bool named;                               /* the names read */
	char function[FR_PY_STR_MAX + 1];
	char file[FR_PY_STR_MAX + 1];
	uint8_t *lines;                           /* the location table, owned */
	size_t nlines;
};

struct reading {
	const struct fr_py_target *py;
	const struct layout *l;
	struct code_info *codes;                  /* CODE_CACHE of them */
};

/* The location table of a code object whose bytes object is at `table`,
 * into `ci`; left empty when it cannot be read (its lines are then 0). */
static void read_lines(const struct fr_py_target *py, uint64_t table, struct code_info *ci)
{
	uint8_t h[BYTES_DATA];
	int64_t len;

	if (!peek(table, h, sizeof(h)) || u64_at(h, OB_TYPE) != py->bytes_type)
		return;
	memcpy(&len, h + OB_SIZE, sizeof(len));
	if (len <= 0 || len > MAX_LINETABLE || !(ci->lines = malloc((size_t)len)))
		return;
	if (peek(table + BYTES_DATA, ci->lines, (size_t)len)) {
		ci->nlines = (size_t)len;
	} else {
		free(ci->lines);
		ci->lines = NULL;
	}
}

/* The kept names and lines of the code object at `co`, whose first bytes
 * are `code`; NULL when its names are not strs. */
static const struct code_info *code_info(struct reading *rd, uint64_t co, const uint8_t *code)
{
	struct code_info *ci = &rd->codes[(co >> 4) % CODE_CACHE];
	uint64_t qualname = u64_at(code, rd->l->co_qualname);
	uint64_t filename = u64_at(code, rd->l->co_filename);
	uint64_t table = u64_at(code, rd->l->co_linetable);

	if (ci->code == co && ci->qualname == qualname && ci->filename == filename &&
	    ci->table == table)
		return ci->named ? ci : NULL;
	free(ci->lines);
	memset(ci, 0, sizeof(*ci));
	ci->code = co;
	ci->qualname = qualname;
	ci->filename = filename;
	ci->table = table;
	ci->named = read_str(rd->py, rd->l, qualname, ci->function) &&
		    read_str(rd->py, rd->l, filename, ci->file);
	if (!ci->named)
		return NULL;
	read_lines(rd->py, table, ci);
	return ci;
}

/* The thread of `t` with kernel thread id `tid`, or NULL. */
static struct fr_thread *thread_of(struct fr_trace *t, uint64_t tid)
{
	for (size_t i = 0; i < t->nthreads; i++)
		if (t->threads[i].tid == tid)
			return &t->threads[i];
	return NULL;
}

/*
 * One frame: kept in th->pyframes (room for FR_PY_MAX_DEPTH), skipped
 * (returns 0 with nothing added) when the interpreter has not begun it,
 * -EPROTO when it is not consistent, -ENOMEM.
 */
static int add_frame(struct reading *rd, const uint8_t *frame, struct fr_thread *th)
{
	const struct layout *l = rd->l;
	uint8_t code[CODE_READ_MAX], owner = frame[l->fr_owner];
	uint64_t co = u64_at(frame, l->fr_code), instr = u64_at(frame, l->fr_instr);
	int64_t units, first, lasti;
	const struct code_info *ci;
	struct fr_pyframe *f;

	if (owner > l->owner_max)
		return -EPROTO;
	if (owner == OWNED_BY_CSTACK)
		return 0; /* the interpreter's entry frame: no code of the script */
	if (!peek(co, code, l->co_code) || u64_at(code, OB_TYPE) != rd->py->code_type)
		return -EPROTO;
	memcpy(&units, code + OB_SIZE, sizeof(units));
	first = i32_at(code, l->co_firsttraceable);
	if (units <= 0 || units > MAX_CODE_UNITS || first < 0 || first >= units)
		return -EPROTO;
	/* The instruction pointer points into the code's instructions, which
	 * start co_code bytes into the code object. A frame whose function
	 * has not reached its first traceable instruction is still being set
	 * up: the interpreter itself leaves such a frame out of tracebacks
	 * (_PyFrame_IsIncomplete). */
	lasti = ((int64_t)instr - (int64_t)(co + l->co_code)) / 2;
	if (lasti < -1 || lasti >= units || (instr - co) % 2)
		return -EPROTO;
	if (owner != OWNED_BY_GENERATOR && lasti < first)
		return 0;
	if (!(ci = code_info(rd, co, code)))
		return -EPROTO;
	f = &th->pyframes[th->npyframes];
	f->line = fr_py_addr2line(ci->lines, ci->nlines, i32_at(code, l->co_firstlineno), lasti * 2);
	if (!(f->function = strdup(ci->function)) || !(f->file = strdup(ci->file))) {
		free(f->function);
		f->function = NULL;
		return -ENOMEM;
	}
	th->npyframes++;
	return 0;
}

/*
 * Marks the entry frames (struct fr_pyframe.entry) as the walk meets them,
 * `listed` saying whether it kept the frame just read, `inner_listed`
 * whether it kept the one before (inner to) it. In 3.11 a frame says so
 * itself (is_entry); from 3.12 the evaluation loop links a frame of its
 * own, owned by the C stack, between the frame it was called for and that
 * frame's caller (Python/ceval.c, entry_frame), so the frame walked just
 * before such a one is the entry. False when an entry cannot be marked:
 * it is a frame left out (not yet begun) or not a sane bool.
 */
static bool mark_entry(const struct layout *l, const uint8_t *frame, bool listed,
		       bool inner_listed, struct fr_thread *th)
{
	bool entry = l->fr_is_entry >= 0 ? frame[l->fr_is_entry] != 0 :
					   frame[l->fr_owner] == OWNED_BY_CSTACK;
	bool kept = l->fr_is_entry >= 0 ? listed : inner_listed;

	if (l->fr_is_entry >= 0 && frame[l->fr_is_entry] > 1)
		return false;
	if (!entry)
		return true;
	if (!kept)
		return false;
	th->pyframes[th->npyframes - 1].entry = true;
	return true;
}

/* The frames of the thread state read into `ts`, into `th`. */
static int read_thread_frames(struct reading *rd, const uint8_t *ts, struct fr_thread *th)
{
	uint8_t frame[FRAME_READ];
	uint64_t at = u64_at(ts, rd->l->ts_frame);
	bool listed = false, marks_known = true;
	int depth, rc = 0;

	if (th->pyframes)
		return 0; /* a second thread state naming the same thread */
	/* Up to 3.12 the thread state points at the innermost C frame of the
	 * evaluation loop (_PyCFrame), which points at the Python frame. */
	if (rd->l->cf_current_frame >= 0 && at &&
	    !peek(at + (uint64_t)rd->l->cf_current_frame, &at, sizeof(at))) {
		th->py_truncated = true;
		return 0;
	}
	if (!at)
		return 0; /* not running Python */
	th->pyframes = calloc(FR_PY_MAX_DEPTH, sizeof(*th->pyframes));
	if (!th->pyframes)
		return -ENOMEM;
	for (depth = 0; at && depth < FR_PY_MAX_DEPTH; depth++) {
		size_t before = th->npyframes;
		bool inner_listed = listed;

		if (!peek(at, frame, sizeof(frame)) || (rc = add_frame(rd, frame, th)) == -EPROTO) {
			rc = 0;
			break;
		}
		if (rc)
			return rc;
		listed = th->npyframes > before;
		marks_known &= mark_entry(rd->l, frame, listed, inner_listed, th);
		at = u64_at(frame, rd->l->fr_previous);
	}
	/* A call of the loop whose entry is not marked would pair the
	 * report's groups with the wrong native frames: none are marked. */
	for (size_t i = 0; !marks_known && i < th->npyframes; i++)
		th->pyframes[i].entry = false;
	th->py_truncated = at != 0;
	if (!th->npyframes) {
		free(th->pyframes);
		th->pyframes = NULL;
	}
	return 0;
}

/* Walks every interpreter's thread states. */
static int read_interpreters(struct reading *rd, struct fr_trace *t)
{
	const struct layout *l = rd->l;
	uint64_t interp, ts;
	unsigned nthreads = 0;

	if (!peek(rd->py->runtime + l->rt_interp_head, &interp, sizeof(interp)))
		return 0;
	for (int ni = 0; interp && ni < MAX_INTERPRETERS; ni++) {
		uint64_t next;

		if (!peek(interp + l->is_next, &next, sizeof(next)) ||
		    !peek(interp + l->is_threads_head, &ts, sizeof(ts)))
			break;
		for (; ts && nthreads < FR_PY_MAX_THREADS; nthreads++) {
			uint8_t state[TSTATE_READ_MAX];
			struct fr_thread *th;
			int rc;

			/* A thread state of another interpreter, or none at
			 * all: the list changed under the reader. */
			if (!peek(ts, state, l->ts_native_tid + 8u) ||
			    u64_at(state, l->ts_interp) != interp)
				break;
			th = thread_of(t, u64_at(state, l->ts_native_tid));
			if (th && (rc = read_thread_frames(rd, state, th)))
				return rc;
			ts = u64_at(state, l->ts_next);
		}
		interp = next;
	}
	return 0;
}

/* The layout of version `hex` (PY_VERSION_HEX), or NULL. */
static const struct layout *layout_of(uint64_t hex)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].version == hex >> 16)
			return &layouts[i];
	return NULL;
}

int fr_py_read(const struct fr_py_target *py, struct fr_trace *t)
{
	struct reading rd = { py, layout_of(py->version), NULL };
	int rc;

	/* The offsets are those of a 64-bit build. */
	if (!rd.l || sizeof(void *) != 8)
		return -ENOTSUP;
	if (!(rd.codes = calloc(CODE_CACHE, sizeof(struct code_info))))
		return -ENOMEM;
	rc = read_interpreters(&rd, t);
	for (size_t i = 0; i < CODE_CACHE; i++)
		free(rd.codes[i].lines);
	free(rd.codes);
	return rc;
}

/* A libpython the program loaded privately (RTLD_LOCAL), which the global
 * scope does not reach: its file name, from the list of loaded objects. */
static int find_libpython(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;

	(void)size;
	base = base ? base + 1 : info->dlpi_name;
	if (!base || strncmp(base, "libpython3", 10) != 0)
		return 0;
	snprintf(arg, PATH_MAX, "%s", info->dlpi_name);
	return 1;
}

static uint64_t sym(void *h, const char *name)
{
	return (uint64_t)(uintptr_t)fr_real_dlsym(h, name);
}

/*
 * Finds the interpreter: in the executable (Debian's python3.11 links
 * libpython statically and exports its symbols) or a libpython in the
 * global scope, else one loaded privately. Fills `py` (its version 0
 * before 3.11, which has no Py_Version); false when the process has no
 * Python. Found in the global scope, the answer is kept:
 * the lookups take the dynamic linker's locks, which an application thread
 * stuck in dlopen would hold, so a process that runs Python pays them once.
 */
#define FIND_PYTHON_AGAIN_MS 30000u

static bool find_python(struct fr_py_target *py)
{
	static struct fr_py_target kept;
	/* A process without Python is looked at again at most every
	 * FIND_PYTHON_AGAIN_MS (an interpreter may be loaded late): the
	 * lookups take the dynamic linker's locks, and a process dumped
	 * again and again must not take them each time. */
	static uint64_t not_found_ms;
	char path[PATH_MAX] = "";
	void *h = RTLD_DEFAULT, *own = NULL;
	uint64_t vaddr, now = fr_mono_ms();

	if (kept.runtime) {
		*py = kept;
		return true;
	}
	if (not_found_ms && now - not_found_ms < FIND_PYTHON_AGAIN_MS)
		return false;
	memset(py, 0, sizeof(*py));
	if (!(py->runtime = sym(h, "_PyRuntime")) && dl_iterate_phdr(find_libpython, path) &&
	    (own = dlopen(path, RTLD_LAZY | RTLD_NOLOAD)))
		py->runtime = sym(h = own, "_PyRuntime");
	if (!py->runtime) {
		not_found_ms = now ? now : 1;
		return false;
	}
	/* Py_Version, PY_VERSION_HEX as an unsigned long, exists from 3.11 on. */
	if ((vaddr = sym(h, "Py_Version")) && !peek(vaddr, &py->version, sizeof(py->version)))
		py->version = 0;
	py->code_type = sym(h, "PyCode_Type");
	py->unicode_type = sym(h, "PyUnicode_Type");
	py->bytes_type = sym(h, "PyBytes_Type");
	if (own) {
		dlclose(own);
	} else {
		kept = *py;
	}
	return true;
}

int fr_pyframes_collect(struct fr_trace *t)
{
	struct fr_py_target py;
	int rc;

	if (!find_python(&py))
		return 0; /* nothing changes for a process without Python */
	if (!py.code_type || !py.unicode_type || !py.bytes_type)
		return 0;
	rc = py.version ? fr_py_read(&py, t) : -ENOTSUP;
	if (rc != -ENOTSUP)
		return rc;
	if (!py.version)
		snprintf(t->python_note, sizeof(t->python_note),
			 "Python frames unavailable: Python older than 3.11 (the agent reads 3.11 to 3.13)");
	else
		snprintf(t->python_note, sizeof(t->python_note),
			 "Python frames unavailable for Python %u.%u%s (the agent reads 3.11 to 3.13)",
			 (unsigned)(py.version >> 24 & 0xff), (unsigned)(py.version >> 16 & 0xff),
			 sizeof(void *) != 8 ? " on a 32-bit target" : "");
	return 0;
}
