/*
 * A pickle decoder for plain data (see pickle.h for the mapping to values).
 *
 * The decoder is the pickle machine itself, run without its dangerous half:
 * a loop over opcodes with a stack, a stack of marks and a memo, all growable
 * arrays of value pointers, so that the input's nesting never becomes C
 * recursion and BINGET costs one pointer copy. Every container the reader
 * makes carries a "box" just before its value in the arena: the box
 * remembers the container's kind, height and size and whether it has been
 * put inside another container. A container that is inside another is
 * sealed and can no longer be changed. That one rule, which every pickler's
 * output obeys for acyclic data, keeps the tree acyclic (a cycle needs a
 * container put into itself, which is refused, or a change to one that is
 * already inside another) and makes the heights and sizes exact, so the
 * bounds on depth and on size written out hold although the memo shares
 * containers.
 *
 * Speed is the point: fr-analyze reads a thousand dumps of 2048 entries,
 * some 80 opcodes an entry. Values come from the document's arena in
 * blocks the reader carves itself, so that making one costs a few
 * instructions; a dict gets one member per key as SETITEM(S) fills it
 * (fill_dict()), and only a dict filled in two runs with another filled
 * between them is left to one pass after STOP (dedupe()). Most of the time
 * goes to the jump from one opcode's handler to the next, which run()
 * keeps as short and as predictable as it can.
 */
#include "pickle.h"
#include "pickle_text.h"
#include "value.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(FR_PICKLE_DEPTH_MAX == FR_VAL_DEPTH_MAX,
	       "the pickle reader nests as deep as value.h allows");


/*
 * Every opcode of protocols 0 to 5, once: its name and byte, what this
 * reader does with it, the form of its argument and what it means. Both
 * machines (run() and hook_item()) are made from this table: each reads an
 * opcode's argument by the form's ARG_ macro (below, shared) and acts on
 * it by its own act macro (RUN_, ITEM_), with the kind of container and
 * the count of stack items, 0 for all those above the topmost MARK, that
 * the act takes. The last column is Y for the opcodes hook_item() follows,
 * those picklers write into a hook's items; at the others it gives the
 * item up at once. Its table sends those to one place and it makes no
 * handler for them: with one of its own for each, GCC's register
 * allocator kept the input position on the stack, which cost every
 * opcode of an item a store and a load (some 8% of a load's time).
 *
 * OK opcodes are decoded; DENY opcodes name, call or build objects (or
 * fetch them from outside the pickle) and are refused as such; NOSUP
 * opcodes carry plain data in forms that protocol 2 to 5 picklers do not
 * write (protocol 0 text, Python 2 str) and are refused as unsupported.
 * Protocol 0's INT, LONG, GET and PUT, being cheap, are read.
 */
#define PICKLE_OPS(X)                                                   \
	X(MARK, 0x28, OK, NONE, MARK, 0, 0, Y)                          \
	X(STOP, 0x2e, OK, NONE, STOP, 0, 0, N)                          \
	X(POP, 0x30, OK, NONE, POP, 0, 0, N)                            \
	X(POP_MARK, 0x31, OK, NONE, POP_MARK, 0, 0, N)                  \
	X(DUP, 0x32, OK, NONE, DUP, 0, 0, N)                            \
	X(FLOAT, 0x46, NOSUP, NONE, REFUSE, 0, 0, N)                    \
	X(INT, 0x49, OK, LINE, INT_TEXT, 0, 0, N)                       \
	X(BININT, 0x4a, OK, I32, INT, 0, 0, Y)                          \
	X(BININT1, 0x4b, OK, U8, INT, 0, 0, Y)                          \
	X(LONG, 0x4c, OK, LINE, LONG_TEXT, 0, 0, N)                     \
	X(BININT2, 0x4d, OK, U16, INT, 0, 0, Y)                         \
	X(NONE, 0x4e, OK, NONE, CONST, none, 0, Y)                      \
	X(PERSID, 0x50, DENY, NONE, REFUSE, 0, 0, N)                    \
	X(BINPERSID, 0x51, DENY, NONE, REFUSE, 0, 0, N)                 \
	X(REDUCE, 0x52, DENY, NONE, REFUSE, 0, 0, N)                    \
	X(STRING, 0x53, NOSUP, NONE, REFUSE, 0, 0, N)                   \
	X(BINSTRING, 0x54, NOSUP, NONE, REFUSE, 0, 0, N)                \
	X(SHORT_BINSTRING, 0x55, NOSUP, NONE, REFUSE, 0, 0, N)          \
	X(UNICODE, 0x56, NOSUP, NONE, REFUSE, 0, 0, N)                  \
	X(BINUNICODE, 0x58, OK, BYTES4, STR, 0, 0, Y)                   \
	X(APPEND, 0x61, OK, NONE, ADD, LIST, 1, Y)                      \
	X(BUILD, 0x62, DENY, NONE, REFUSE, 0, 0, N)                     \
	X(GLOBAL, 0x63, DENY, NONE, REFUSE, 0, 0, N)                    \
	X(DICT, 0x64, OK, NONE, BUILD, DICT, 0, N)                      \
	X(EMPTY_DICT, 0x7d, OK, NONE, EMPTY, DICT, 0, Y)                \
	X(APPENDS, 0x65, OK, NONE, ADD, LIST, 0, Y)                     \
	X(GET, 0x67, OK, LINE_KEY, GET, 0, 0, N)                        \
	X(BINGET, 0x68, OK, U8, GET, 0, 0, Y)                           \
	X(INST, 0x69, DENY, NONE, REFUSE, 0, 0, N)                      \
	X(LONG_BINGET, 0x6a, OK, U32, GET, 0, 0, Y)                     \
	X(LIST, 0x6c, OK, NONE, BUILD, LIST, 0, Y)                      \
	X(EMPTY_LIST, 0x5d, OK, NONE, EMPTY, LIST, 0, Y)                \
	X(OBJ, 0x6f, DENY, NONE, REFUSE, 0, 0, N)                       \
	X(PUT, 0x70, OK, LINE_KEY, PUT, 0, 0, N)                        \
	X(BINPUT, 0x71, OK, U8, PUT, 0, 0, Y)                           \
	X(LONG_BINPUT, 0x72, OK, U32, PUT, 0, 0, Y)                     \
	X(SETITEM, 0x73, OK, NONE, ADD, DICT, 2, Y)                     \
	X(TUPLE, 0x74, OK, NONE, BUILD, TUPLE, 0, Y)                    \
	X(EMPTY_TUPLE, 0x29, OK, NONE, EMPTY, TUPLE, 0, Y)              \
	X(SETITEMS, 0x75, OK, NONE, ADD, DICT, 0, Y)                    \
	X(BINFLOAT, 0x47, OK, F64, REAL, 0, 0, Y)                       \
	X(PROTO, 0x80, OK, U8, PROTO, 0, 0, N)                          \
	X(NEWOBJ, 0x81, DENY, NONE, REFUSE, 0, 0, N)                    \
	X(EXT1, 0x82, DENY, NONE, REFUSE, 0, 0, N)                      \
	X(EXT2, 0x83, DENY, NONE, REFUSE, 0, 0, N)                      \
	X(EXT4, 0x84, DENY, NONE, REFUSE, 0, 0, N)                      \
	X(TUPLE1, 0x85, OK, NONE, BUILD, TUPLE, 1, Y)                   \
	X(TUPLE2, 0x86, OK, NONE, BUILD, TUPLE, 2, Y)                   \
	X(TUPLE3, 0x87, OK, NONE, BUILD, TUPLE, 3, Y)                   \
	X(NEWTRUE, 0x88, OK, NONE, CONST, yes, 0, Y)                    \
	X(NEWFALSE, 0x89, OK, NONE, CONST, no, 0, Y)                    \
	X(LONG1, 0x8a, OK, BYTES1, LONG, 0, 0, Y)                       \
	X(LONG4, 0x8b, OK, U32, LONG4, 0, 0, N)                         \
	X(BINBYTES, 0x42, OK, BYTES4, BYTES, 0, 0, N)                   \
	X(SHORT_BINBYTES, 0x43, OK, BYTES1, BYTES, 0, 0, N)             \
	X(SHORT_BINUNICODE, 0x8c, OK, BYTES1, STR, 0, 0, Y)             \
	X(BINUNICODE8, 0x8d, OK, BYTES8, STR, 0, 0, Y)                  \
	X(BINBYTES8, 0x8e, OK, BYTES8, BYTES, 0, 0, N)                  \
	X(EMPTY_SET, 0x8f, OK, NONE, EMPTY, SET, 0, N)                  \
	X(ADDITEMS, 0x90, OK, NONE, ADD, SET, 0, N)                     \
	X(FROZENSET, 0x91, OK, NONE, BUILD, FROZENSET, 0, N)            \
	X(NEWOBJ_EX, 0x92, DENY, NONE, REFUSE, 0, 0, N)                 \
	X(STACK_GLOBAL, 0x93, DENY, NONE, REFUSE, 0, 0, N)              \
	X(MEMOIZE, 0x94, OK, NEXT_KEY, PUT, 0, 0, Y)                    \
	X(FRAME, 0x95, OK, LEN8, FRAME, 0, 0, Y)                        \
	X(BYTEARRAY8, 0x96, OK, BYTES8, BYTES, 0, 0, N)                 \
	X(NEXT_BUFFER, 0x97, DENY, NONE, REFUSE, 0, 0, N)               \
	X(READONLY_BUFFER, 0x98, DENY, NONE, REFUSE, 0, 0, N)

enum op {
#define OP_ENUM(name, byte, class, form, act, kind, k, hook) OP_##name = byte,
	PICKLE_OPS(OP_ENUM)
#undef OP_ENUM
};

/* Zero (unknown) for bytes that are no opcode. */
enum op_class { UNKNOWN, OK, DENY, NOSUP };

static const char *const op_names[256] = {
#define OP_NAME(name, byte, class, form, act, kind, k, hook) [byte] = #name,
	PICKLE_OPS(OP_NAME)
#undef OP_NAME
};

static const unsigned char op_classes[256] = {
#define OP_CLASS(name, byte, class, form, act, kind, k, hook) [byte] = class,
	PICKLE_OPS(OP_CLASS)
#undef OP_CLASS
};

enum box_kind { BOX_LIST, BOX_DICT, BOX_TUPLE, BOX_SET, BOX_FROZENSET };

static const char *const box_names[] = {
	[BOX_LIST] = "list", [BOX_DICT] = "dict", [BOX_TUPLE] = "tuple",
	[BOX_SET] = "set", [BOX_FROZENSET] = "frozenset",
};

/* What the decoder knows of a container it made, kept just before its value. */
struct box {
	/* Values in the container written out in full, shared parts repeated. */
	uint64_t size;
	uint32_t height;	/* levels of containers, itself included */
	uint8_t kind;		/* enum box_kind */
	bool sealed;		/* inside another container: no longer changeable */
	/* For a dict: filled in two runs with another dict filled between, so
	 * that fill_dict() left its keys for dedupe() (see there). */
	bool dirty;
	/* For a dict: filled by its keys' order alone (see fill_dict()), so
	 * that its canons carry no marks of it. */
	bool unmarked;
	uint32_t serial;	/* for a dict: its number, from 1 */
	struct box *next_dirty;	/* for a dirty dict: the one made dirty before */
	struct fr_val v;
	/* Room for the first items: most lists of a dump hold one or two. */
	struct fr_val *room[2];
};

static inline struct box *box_of(struct fr_val *v)
{
	return (struct box *)((char *)v - offsetof(struct box, v));
}

static inline struct text *text_of(struct fr_val *v)
{
	return (struct text *)((char *)v - offsetof(struct text, v));
}

static inline bool is_box(const struct fr_val *v)
{
	return v->type == FR_VAL_ARRAY || v->type == FR_VAL_OBJECT;
}

struct unpickler {
	const unsigned char *buf;
	size_t len;
	size_t pos;		/* next byte to read, for helpers (run() keeps its own) */
	const unsigned char *at;	/* the opcode being decoded */

	struct fr_doc *doc;
	/* The block of the document's arena values are carved from. */
	char *block;
	char *block_end;
	size_t block_size;	/* of the next block */

	struct fr_val **stack;
	size_t nstack, stack_cap;
	uint32_t *marks;	/* stack lengths at each MARK */
	size_t nmarks, marks_cap;
	struct fr_val **memo;
	size_t nmemo, memo_cap;

	size_t nboxes;		/* containers made */
	uint32_t ndicts;	/* dicts made */
	struct box *last_dict;	/* the dict fill_dict() filled last */
	struct box *dirty;	/* the dirty dicts, newest first */
	/* The canon table degraded: every dict is left to dedupe(). */
	bool sorting;
	/*
	 * The canons of the keys of the last dict fill_dict() filled at once
	 * (with marks, so one member per key): a dict whose keys have the same
	 * texts in the same order has no key twice either.
	 */
	struct fr_val **model;
	size_t model_n, model_cap;
	/* One None, True and False per load: they cannot change. */
	struct fr_val *none, *yes, *no;

	/*
	 * Bytes that the text of keys that are not strs may still take. A
	 * tuple shared through the memo, used as a key many times or holding
	 * itself many times, would otherwise turn a small input into a large
	 * allocation.
	 */
	struct fr_pickle_keytext keys;

	/*
	 * The largest size (see struct box) of a container. Sharing through
	 * the memo lets a few bytes stand for a tree of exponential size
	 * (x = [x, x] forty times); walking it, as any recursive reader does,
	 * would never end.
	 */
	uint64_t size_max;

	struct fr_pickle_canons canons;

	/* Items read by a hook (fr_pickle_load_with(), "Items read by a hook"). */
	struct fr_pickle_hook *hook;
	struct hook_scratch *hs;
	struct fr_val *hook_list;	/* the list whose items it reads, once found */
	struct fr_val *hook_root;	/* the dict that holds it */
	struct fr_val *hook_seen;	/* the last list found not to be it */
	/* nmarks while items read stand (unmade) above the list's MARK: only
	 * the APPENDS into the list may take that MARK away. 0: none. */
	size_t hook_mark;
	uint32_t hook_adopted;	/* times the list was put in a container */
	bool hook_tried;	/* an item was tried: any failure is -EAGAIN */

	char *err;
	size_t errlen;
	int errnum;
};

/* Values written out allowed per input byte, and in any case. */
#define SIZE_RATIO 64
#define SIZE_MIN (1u << 20)

/* Key text bytes allowed per input byte, and in any case. */
#define KEY_BUDGET_RATIO 32
#define KEY_BUDGET_MIN (1u << 20)

/*
 * Blocks carved from the document for values: from 1 KiB (a small pickle
 * makes a small document) to 256 KiB (a 2048-entry dump takes a few dozen).
 * Requests over a quarter of the next block go to the document directly,
 * so that the end a block leaves unused is smaller than that.
 */
#define BLOCK_MIN (1u << 10)
#define BLOCK_MAX (256u << 10)

/*
 * Probes of the canon table beyond which the canons are found by sorting
 * instead (see fill_dict()); a build may set it lower to test that path.
 */
#ifndef PROBE_MAX
#define PROBE_MAX 64
#endif

__attribute__((format(printf, 3, 4)))
static int fail(struct unpickler *u, int errnum, const char *fmt, ...)
{
	va_list ap;
	int n;

	/* The first failure is the cause; what follows only reports it again. */
	if (u->errnum)
		return -1;
	u->errnum = errnum;
	if (!u->err || !u->errlen)
		return -1;
	n = snprintf(u->err, u->errlen, "offset %zu: ", (size_t)(u->at - u->buf));
	if (n >= 0 && (size_t)n < u->errlen) {
		va_start(ap, fmt);
		vsnprintf(u->err + n, u->errlen - n, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static int fail_nomem(struct unpickler *u)
{
	return fail(u, ENOMEM, "out of memory");
}

static const char *op_name(unsigned char op)
{
	return op_names[op] ? op_names[op] : "unknown";
}

/* The name of the opcode being decoded, for messages. */
static const char *cur_op(const struct unpickler *u)
{
	return op_name(u->at < u->buf + u->len ? *u->at : 0);
}

/* Doubles an array's capacity; returns the new array or NULL. */
static void *grow(void *arr, size_t *cap, size_t size)
{
	size_t n = *cap ? *cap * 2 : 64;
	void *p;

	if (n > SIZE_MAX / size)
		return NULL;
	p = realloc(arr, n * size);
	if (p)
		*cap = n;
	return p;
}

/* An argument of n bytes where `left` are. */
__attribute__((cold, noinline))
static int fail_truncated(struct unpickler *u, uint64_t n, size_t left)
{
	return fail(u, EPROTO, "truncated %s (needed %" PRIu64 " bytes, %zu left)",
		    cur_op(u), n, left);
}

static inline uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t le64(const unsigned char *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* LONG1's two's complement of n bytes, 1 to 8, at p (the input ends at
 * end): one load of eight bytes where the input has them. */
static inline int64_t le_signed(const unsigned char *p, size_t n, const unsigned char *end)
{
	uint64_t v = 0;

	if (end - p >= 8) {
		v = le64(p);
		if (n < 8)
			v &= ~(~0ull << (8 * n));
	} else {
		for (size_t i = n; i--;)
			v = v << 8 | p[i];
	}
	if (n < 8 && (p[n - 1] & 0x80))
		v |= ~0ull << (8 * n);
	return (int64_t)v;
}

/* BINFLOAT's big-endian IEEE 754 double at p. */
static inline double be_double(const unsigned char *p)
{
	uint64_t bits = 0;
	double d;

	for (int i = 0; i < 8; i++)
		bits = bits << 8 | p[i];
	memcpy(&d, &bits, sizeof(d));
	return d;
}

/* ------------------------------------------------------------------ */
/* Memory of the document                                              */
/* ------------------------------------------------------------------ */

/* alloc() when the block is used up. */
__attribute__((noinline))
static void *alloc_slow(struct unpickler *u, size_t size)
{
	char *p;

	if (size > u->block_size / 4) {
		p = fr_doc_alloc(u->doc, size);
		if (!p)
			fail_nomem(u);
		return p;
	}
	p = fr_doc_alloc(u->doc, u->block_size);
	if (!p) {
		fail_nomem(u);
		return NULL;
	}
	u->block = p + size;
	u->block_end = p + u->block_size;
	if (u->block_size < BLOCK_MAX)
		u->block_size *= 2;
	return p;
}

/* `size` bytes (a multiple of 8) of the document's arena, or NULL and an error. */
static inline __attribute__((always_inline)) void *alloc(struct unpickler *u, size_t size)
{
	void *p;

	if (__builtin_expect(size > (size_t)(u->block_end - u->block), 0))
		return alloc_slow(u, size);
	p = u->block;
	u->block += size;
	return p;
}

/* A new scalar value of `type`, its payload not set. */
static inline struct fr_val *scalar(struct unpickler *u, enum fr_val_type type)
{
	struct fr_val *v = alloc(u, sizeof(*v));

	if (v) {
		v->type = (uint8_t)type;
		v->mark = 0;
		v->n = 0;
		v->cap = 0;
	}
	return v;
}

static inline __attribute__((always_inline)) struct fr_val *integer(struct unpickler *u, int64_t i)
{
	struct fr_val *v = scalar(u, FR_VAL_INT);

	if (v)
		v->u.i = i;
	return v;
}

/* The load's None, True or False. */
static inline struct fr_val *constant(struct unpickler *u, struct fr_val **c,
				      enum fr_val_type type, bool b)
{
	if (__builtin_expect(!*c, 0) && (*c = scalar(u, type)))
		(*c)->u.b = b;
	return *c;
}

static inline struct fr_val *const_none(struct unpickler *u)
{
	return constant(u, &u->none, FR_VAL_NULL, false);
}

static inline struct fr_val *const_yes(struct unpickler *u)
{
	return constant(u, &u->yes, FR_VAL_BOOL, true);
}

static inline struct fr_val *const_no(struct unpickler *u)
{
	return constant(u, &u->no, FR_VAL_BOOL, false);
}

/*
 * A new string of n bytes, its text not set (but its NUL is). The rest of
 * the 8-byte word the NUL is in is zero, so that fr_pickle_text_hash() may read the
 * text a word at a time.
 */
static struct text *text_new(struct unpickler *u, size_t n)
{
	uint64_t zero = 0;

	struct text *t;

	if (n >= UINT32_MAX) {
		fail(u, EPROTO, "a string of %zu bytes (more than 4 GiB)", n);
		return NULL;
	}
	t = alloc(u, (offsetof(struct text, s) + n + 1 + 7) & ~(size_t)7);
	if (!t)
		return NULL;
	t->canon = NULL;
	t->stamp = 0;
	t->v.type = FR_VAL_STRING;
	t->v.mark = 0;
	t->v.n = (uint32_t)n;
	t->v.cap = 0;
	t->v.u.s = t->s;
	memcpy(t->s + (n & ~(size_t)7), &zero, 8);
	return t;
}

/* A string of n bytes of text that is valid UTF-8 without NUL. */
static struct fr_val *string(struct unpickler *u, const char *s, size_t n)
{
	struct text *t = text_new(u, n);

	if (!t)
		return NULL;
	memcpy(t->s, s, n);
	return &t->v;
}

/* A new container of `kind`, empty. */
static inline __attribute__((always_inline)) struct box *box_new(struct unpickler *u,
								 enum box_kind kind)
{
	struct box *b;

	/* Half the serials are for dedupe(). */
	if (__builtin_expect(u->nboxes >= UINT32_MAX / 2, 0)) {
		fail(u, EPROTO, "more than %u containers", UINT32_MAX / 2);
		return NULL;
	}
	b = alloc(u, sizeof(*b));
	if (!b)
		return NULL;
	u->nboxes++;
	b->size = 1;
	b->height = 1;
	b->kind = (uint8_t)kind;
	b->sealed = false;
	b->v.type = kind == BOX_DICT ? FR_VAL_OBJECT : FR_VAL_ARRAY;
	b->v.mark = 0;
	b->v.n = 0;
	b->v.cap = 2;
	b->v.u.items = b->room;
	b->dirty = false;
	b->unmarked = false;
	b->serial = kind == BOX_DICT ? ++u->ndicts : 0;
	b->next_dirty = NULL;
	return b;
}

/*
 * Room for `more` item pointers after the first `used` of container v, when
 * the room it has is too small: exactly that the first time, since most
 * containers are filled by one opcode, and at least double after, so that
 * appending one at a time costs amortised constant time. The old items
 * stay in the arena.
 */
__attribute__((noinline))
static int reserve_slow(struct unpickler *u, struct fr_val *v, size_t used, size_t more)
{
	struct fr_val **items;
	size_t cap;

	if (more > UINT32_MAX - used)
		return fail(u, EPROTO, "a container of more than %u items", UINT32_MAX);
	cap = used + more;
	if (cap < 2 * (size_t)v->cap)
		cap = 2 * (size_t)v->cap < UINT32_MAX ? 2 * (size_t)v->cap : UINT32_MAX;
	items = alloc(u, cap * sizeof(*items));
	if (!items)
		return -1;
	if (used)
		memcpy(items, v->u.items, used * sizeof(*items));
	v->u.items = items;
	v->cap = (uint32_t)cap;
	return 0;
}

static inline __attribute__((always_inline)) int reserve(struct unpickler *u, struct fr_val *v,
							 size_t used, size_t more)
{
	if (__builtin_expect(more <= v->cap - used, 1))
		return 0;
	return reserve_slow(u, v, used, more);
}

/* ------------------------------------------------------------------ */
/* Stack, marks and memo                                               */
/* ------------------------------------------------------------------ */

/* push() when v is NULL (its maker failed) or the stack is full. */
__attribute__((noinline))
static int push_slow(struct unpickler *u, struct fr_val *v)
{
	struct fr_val **s;

	if (!v)
		return -1;
	s = grow(u->stack, &u->stack_cap, sizeof(*s));
	if (!s)
		return fail_nomem(u);
	u->stack = s;
	u->stack[u->nstack++] = v;
	return 0;
}

static inline __attribute__((always_inline)) int push(struct unpickler *u, struct fr_val *v)
{
	if (__builtin_expect(!v || u->nstack == u->stack_cap, 0))
		return push_slow(u, v);
	u->stack[u->nstack++] = v;
	return 0;
}

/* The stack length at the topmost mark: plain opcodes see only what is above. */
static inline size_t fence(const struct unpickler *u)
{
	return u->nmarks ? u->marks[u->nmarks - 1] : 0;
}

/* Checks that n items stand above the topmost mark. */
static inline int need(struct unpickler *u, size_t n)
{
	size_t have = u->nstack - fence(u);

	if (__builtin_expect(have < n, 0))
		return fail(u, EPROTO, "stack underflow: %s needs %zu item%s, %zu above the %s",
			    cur_op(u), n, n == 1 ? "" : "s", have,
			    u->nmarks ? "last MARK" : "bottom");
	return 0;
}

/* Removes the topmost mark; *at receives the stack length it recorded. */
static inline int pop_mark(struct unpickler *u, size_t *at)
{
	if (__builtin_expect(!u->nmarks, 0))
		return fail(u, EPROTO, "%s without a MARK", cur_op(u));
	if (__builtin_expect(u->nmarks == u->hook_mark, 0)) {
		/* Items the hook read stand above it, unmade. */
		if (*u->at != OP_APPENDS)
			return fail(u, EPROTO, "%s takes the MARK of items a hook read", cur_op(u));
		u->hook_mark = 0;
	}
	*at = u->marks[--u->nmarks];
	return 0;
}

/*
 * Stores v under memo key idx. Python and PyTorch number memo
 * keys 0, 1, 2... in the order they store them, so a key beyond the next
 * one is refused: it keeps the memo a dense array no larger than the input.
 */
static inline __attribute__((always_inline)) int memo_set(struct unpickler *u, uint64_t idx,
							  struct fr_val *v)
{
	if (__builtin_expect(idx >= u->nmemo, 1)) {
		if (idx > u->nmemo)
			return fail(u, EPROTO, "memo key %" PRIu64 " is out of order (next is %zu)",
				    idx, u->nmemo);
		if (u->nmemo == u->memo_cap) {
			struct fr_val **m = grow(u->memo, &u->memo_cap, sizeof(*m));

			if (!m)
				return fail_nomem(u);
			u->memo = m;
		}
		u->nmemo++;
	}
	u->memo[idx] = v;
	return 0;
}

/* PUT: the stack's top under memo key idx. */
static inline __attribute__((always_inline)) int memo_put(struct unpickler *u, uint64_t idx)
{
	return need(u, 1) || memo_set(u, idx, u->stack[u->nstack - 1]);
}

/* ------------------------------------------------------------------ */
/* Scalars                                                             */
/* ------------------------------------------------------------------ */

/* A str from its UTF-8 bytes. */
static struct fr_val *text(struct unpickler *u, const unsigned char *p, size_t n)
{
	struct text *t;

	if (fr_pickle_utf8_valid(p, n))
		return string(u, (const char *)p, n);
	t = text_new(u, fr_pickle_utf8_repair(p, n, NULL));
	if (!t)
		return NULL;
	fr_pickle_utf8_repair(p, n, t->s);
	return &t->v;
}

/* Bytes as lowercase hex. */
static struct fr_val *hex(struct unpickler *u, const unsigned char *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	struct text *t;
	size_t i;

	t = text_new(u, n < SIZE_MAX / 2 ? 2 * n : SIZE_MAX);
	if (!t)
		return NULL;
	for (i = 0; i < n; i++) {
		t->s[2 * i] = digits[p[i] >> 4];
		t->s[2 * i + 1] = digits[p[i] & 15];
	}
	return &t->v;
}

static struct fr_val *real(struct unpickler *u, double d)
{
	struct fr_val *v;

	if (isnan(d))
		return string(u, "NaN", 3);
	if (isinf(d))
		return d > 0 ? string(u, "Infinity", 8) : string(u, "-Infinity", 9);
	v = scalar(u, FR_VAL_REAL);
	if (v)
		v->u.r = d;
	return v;
}
/* An int from LONG1 or LONG4 bytes. */
static struct fr_val *long_bytes(struct unpickler *u, const unsigned char *p, size_t n)
{
	uint64_t v = 0;
	unsigned char fill;
	size_t i;

	if (n == 0)
		return integer(u, 0);
	if (n > 8) {
		/* It fits int64 when the bytes past eight only repeat the sign. */
		fill = p[7] & 0x80 ? 0xff : 0;
		for (i = 8; i < n && p[i] == fill; i++)
			;
		if (i < n) {
			char digits[FR_PICKLE_DECIMAL_BUF];
			const char *d = fr_pickle_long_decimal(p, n, digits, &i);

			return string(u, d, i);
		}
		n = 8;
	}
	for (i = n; i--;)
		v = v << 8 | p[i];
	if (n < 8 && (p[n - 1] & 0x80))
		v |= ~0ull << (8 * n);
	return integer(u, (int64_t)v);
}

/*
 * An int in decimal text (protocol 0's INT and LONG, as Python writes them:
 * no leading zeros): an integer when it fits int64, else the digits.
 */
static struct fr_val *decimal(struct unpickler *u, const char *s, size_t n)
{
	bool neg = false, over = false;
	uint64_t v = 0, limit, digit;
	size_t i = 0, first;
	char buf[FR_PICKLE_DECIMAL_MAX + 2];

	if (n && (s[0] == '-' || s[0] == '+')) {
		neg = s[0] == '-';
		i++;
	}
	/* Python reads a leading zero as octal (INT) or refuses it (LONG). */
	if (i == n || (s[i] == '0' && i + 1 < n))
		goto out_bad;
	first = i;
	limit = neg ? (uint64_t)INT64_MAX + 1 : INT64_MAX;
	for (; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			goto out_bad;
		digit = (uint64_t)(s[i] - '0');
		if (v > (limit - digit) / 10)
			over = true;
		else
			v = v * 10 + digit;
	}
	if (!over)
		return integer(u, neg ? (int64_t)(0 - v) : (int64_t)v);
	if (n - first > FR_PICKLE_DECIMAL_MAX) {
		fail(u, EPROTO, "%s of %zu digits is longer than %d digits",
		     cur_op(u), n - first, FR_PICKLE_DECIMAL_MAX);
		return NULL;
	}
	i = 0;
	if (neg)
		buf[i++] = '-';
	memcpy(buf + i, s + first, n - first);
	return string(u, buf, i + n - first);
out_bad:
	fail(u, EPROTO, "%s argument \"%.*s\" is not a decimal integer",
	     cur_op(u), (int)(n > 40 ? 40 : n), s);
	return NULL;
}

/* The argument of a protocol 0 opcode: the text up to the next newline. */
static int take_line(struct unpickler *u, const char **s, size_t *n)
{
	const unsigned char *p = u->buf + u->pos;
	const unsigned char *nl = memchr(p, '\n', u->len - u->pos);

	if (!nl)
		return fail(u, EPROTO, "truncated %s (no end of line)", cur_op(u));
	*s = (const char *)p;
	*n = nl - p;
	u->pos += *n + 1;
	return 0;
}

/* A memo key in decimal text (protocol 0's GET and PUT). */
static int take_line_key(struct unpickler *u, uint64_t *idx)
{
	const char *s;
	size_t n, i;
	uint64_t v = 0;

	if (take_line(u, &s, &n))
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || v > UINT32_MAX)
			break;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (!n || i < n)
		return fail(u, EPROTO, "%s argument \"%.*s\" is not a memo key",
			    cur_op(u), (int)(n > 40 ? 40 : n), s);
	*idx = v;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Containers                                                          */
/* ------------------------------------------------------------------ */

/* What a stack item is, in Python's words, for messages. */
static const char *describe(struct fr_val *v)
{
	static const char *const boxes[] = {
		[BOX_LIST] = "a list", [BOX_DICT] = "a dict", [BOX_TUPLE] = "a tuple",
		[BOX_SET] = "a set", [BOX_FROZENSET] = "a frozenset",
	};

	switch ((enum fr_val_type)v->type) {
	case FR_VAL_ARRAY:
	case FR_VAL_OBJECT:
		return boxes[box_of(v)->kind];
	case FR_VAL_STRING:
		return "a str";
	case FR_VAL_INT:
		return "an int";
	case FR_VAL_REAL:
		return "a float";
	case FR_VAL_BOOL:
		return "a bool";
	case FR_VAL_NULL:
		break;
	}
	return "None";
}

__attribute__((cold, noinline))
static int fail_size(struct unpickler *u)
{
	return fail(u, EPROTO, "the data, its shared parts written out in full, "
		    "has more than %" PRIu64 " values (%d per byte of pickle)",
		    u->size_max, SIZE_RATIO);
}

/*
 * Accounts for putting container `child` into container `parent`: refuses
 * a container inside itself, a nesting deeper than the limit and a size
 * beyond it, and seals the child.
 */
static inline int adopt(struct unpickler *u, struct box *parent, struct box *child)
{
	if (__builtin_expect(child == parent, 0))
		return fail(u, EPROTO, "%s puts a %s inside itself (cycles are refused)",
			    cur_op(u), box_names[parent->kind]);
	if (__builtin_expect(&child->v == u->hook_list, 0))
		u->hook_adopted++;
	child->sealed = true;
	if (child->height + 1 > parent->height) {
		if (__builtin_expect(child->height + 1 > FR_PICKLE_DEPTH_MAX, 0))
			return fail(u, EPROTO, "containers nested deeper than %d levels",
				    FR_PICKLE_DEPTH_MAX);
		parent->height = child->height + 1;
	}
	/* No overflow: every size is at most size_max < 2^62. */
	parent->size += child->size;
	if (__builtin_expect(parent->size > u->size_max, 0))
		return fail_size(u);
	return 0;
}

/* Checks that a set element or dict key is hashable in Python. */
static int hashable(struct unpickler *u, struct fr_val *v)
{
	struct box *b;

	if (!is_box(v))
		return 0;
	b = box_of(v);
	if (b->kind != BOX_TUPLE && b->kind != BOX_FROZENSET)
		return fail(u, EPROTO, "%s uses a %s as a set element or key (unhashable)",
			    cur_op(u), box_names[b->kind]);
	return 0;
}

/* Checks that `target` is a container of kind `kind` that may still change. */
static inline int changeable(struct unpickler *u, struct fr_val *target, enum box_kind kind)
{
	if (__builtin_expect(!is_box(target) || box_of(target)->kind != kind, 0))
		return fail(u, EPROTO, "%s needs a %s below its items, found %s",
			    cur_op(u), box_names[kind], describe(target));
	if (__builtin_expect(box_of(target)->sealed, 0))
		return fail(u, EPROTO,
			    "%s changes a %s that is already inside another container "
			    "(refused: that is how pickles write cycles)",
			    cur_op(u), box_names[kind]);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Keys that are not strs                                              */
/* ------------------------------------------------------------------ */

static int fail_key_budget(struct unpickler *u)
{
	return fail(u, EPROTO, "dict keys copy more than %d bytes per byte of pickle "
		    "(a long key used many times)", KEY_BUDGET_RATIO);
}

/*
 * The key under which a dict stores `key`, an item of the stack: a str as
 * it is, anything else as a new string of its JSON text; NULL (and an
 * error) when it is unhashable or its text is over the budget.
 */
static struct fr_val *key_of(struct unpickler *u, struct fr_val *key)
{
	char buf[40];
	size_t n;
	int rc;

	if (key->type == FR_VAL_STRING)
		return key;
	if (is_box(key)) {
		if (hashable(u, key))
			return NULL;
		u->keys.len = 0;
		rc = fr_pickle_key_json(&u->keys, key);
		if (rc == -ENOMEM)
			fail_nomem(u);
		else if (rc == -ELOOP)
			fail(u, EPROTO, "containers nested deeper than %d levels",
			     FR_PICKLE_DEPTH_MAX);
		else if (rc)
			fail_key_budget(u);
		if (rc)
			return NULL;
		n = u->keys.len;
	} else {
		n = fr_pickle_scalar_json(key, buf, sizeof(buf));
	}
	/* The NUL counts too: a budget of 0 stops a flood of empty tuples. */
	if (n >= u->keys.budget) {
		fail_key_budget(u);
		return NULL;
	}
	u->keys.budget -= n + 1;
	return string(u, is_box(key) ? u->keys.s : buf, n);
}

/* ------------------------------------------------------------------ */
/* One member per key                                                  */
/* ------------------------------------------------------------------ */

/*
 * Sets t->canon (fr_pickle_intern()): 0, -1 on an error, or 1 when the
 * table's probes run past PROBE_MAX.
 */
static int intern(struct unpickler *u, struct text *t)
{
	int rc = fr_pickle_intern(&u->canons, t);

	return rc < 0 ? fail_nomem(u) : rc;
}

/*
 * A canon for every key of every dirty dict, found by sorting the keys by
 * text instead of with the hash table: O(n log n) whatever the hashes are.
 */
static int intern_by_sorting(struct unpickler *u)
{
	struct text **all = NULL, **tmp;
	size_t n = 0, cap = 0, i;
	struct box *b;
	int rc = -1;

	for (b = u->dirty; b; b = b->next_dirty) {
		for (i = 0; i < b->v.n; i++) {
			struct text *t = text_of(b->v.u.items[2 * i]);

			if (t->v.mark)
				continue;
			if (n == cap) {
				struct text **a = grow(all, &cap, sizeof(*a));

				if (!a)
					goto out_unmark;
				all = a;
			}
			t->v.mark = 1;
			if (!t->canon)
				t->hash = fr_pickle_text_hash(t);
			all[n++] = t;
		}
	}
	tmp = n ? malloc(n * sizeof(*tmp)) : NULL;
	if (n && !tmp)
		goto out_unmark;
	fr_pickle_intern_sorted(all, tmp, n);
	free(tmp);
	rc = 0;
out_unmark:
	for (i = 0; i < n; i++)
		all[i]->v.mark = 0;
	free(all);
	return rc ? fail_nomem(u) : 0;
}

/* ------------------------------------------------------------------ */
/* Filling containers                                                  */
/* ------------------------------------------------------------------ */

/*
 * Moves the stack's items from index `from` up into container `b` (a list,
 * set, tuple or frozenset: an array), in order.
 */
static inline __attribute__((always_inline)) int fill_array(struct unpickler *u,
							     struct box *b, size_t from)
{
	struct fr_val **item, **end, **dst;
	size_t k = u->nstack - from;

	/* (An empty stack may have no memory yet: no pointer into it.) */
	if (!k)
		return 0;
	item = u->stack + from;
	end = u->stack + u->nstack;
	if (b->kind == BOX_SET || b->kind == BOX_FROZENSET) {
		for (; item < end; item++)
			if (hashable(u, *item))
				return -1;
		item = u->stack + from;
	}
	if (reserve(u, &b->v, b->v.n, k))
		return -1;
	dst = b->v.u.items + b->v.n;
	for (; item < end; item++) {
		struct fr_val *v = *item;

		if (is_box(v)) {
			if (adopt(u, b, box_of(v)))
				return -1;
		} else if (__builtin_expect(++b->size > u->size_max, 0)) {
			return fail_size(u);
		}
		*dst++ = v;
	}
	b->v.n += (uint32_t)k;
	u->nstack = from;
	return 0;
}

/* Whether `key`, an item of the stack, is a str of the text of string m. */
__attribute__((noinline))
static bool same_key(const struct fr_val *key, const struct fr_val *m)
{
	return key->type == FR_VAL_STRING && key->n == m->n && memcmp(key->u.s, m->u.s, m->n) == 0;
}

/* Makes the canons of the n keys in `items` the model (struct unpickler). */
static int set_model(struct unpickler *u, struct fr_val *const *items, size_t n)
{
	size_t i;

	while (n > u->model_cap) {
		struct fr_val **m = grow(u->model, &u->model_cap, sizeof(*m));

		if (!m)
			return fail_nomem(u);
		u->model = m;
	}
	for (i = 0; i < n; i++)
		u->model[i] = &text_of(items[2 * i])->canon->v;
	u->model_n = n;
	return 0;
}

/* Leaves dict `b` to dedupe(). */
static void make_dirty(struct unpickler *u, struct box *b)
{
	if (!b->dirty) {
		b->dirty = true;
		b->next_dirty = u->dirty;
		u->dirty = b;
	}
}

/*
 * Moves key/value pairs from index `from` up into dict `b`, one member per
 * key: a key set again keeps its first place and takes the new value, as
 * in Python. The marks on the canons (struct text) are the dict's own only
 * while no other dict has been filled since it was: a dict filled again
 * after another is left to dedupe(), which Python's pickler does only to a
 * dict of more than 1000 items that holds dicts.
 *
 * The dicts of a dump mostly have the keys of the one before, in the same
 * order, and mostly the same strings (the memo's): while a new dict's keys
 * follow the model's, they need no canon and no marks, which saves a chain
 * of loads per key, or a hash where the pickle writes the keys again.
 */
static int fill_dict(struct unpickler *u, struct box *b, size_t from)
{
	struct fr_val **item, **end, **items, **model;
	size_t k = u->nstack - from;
	uint32_t n, serial, i;
	int rc;

	if (k % 2)
		return fail(u, EPROTO, "%s with an odd number of items (%zu)",
			    cur_op(u), k);
	if (!k)
		return 0;
	item = u->stack + from;
	end = u->stack + u->nstack;
	if (reserve(u, &b->v, 2 * (size_t)b->v.n, k))
		return -1;
	if (u->sorting || b->unmarked || (b->v.n && u->last_dict != b))
		make_dirty(u, b);
	u->last_dict = b;
	items = b->v.u.items;
	n = b->v.n;
	/* Serials start at 1: 0 for a dirty dict, whose members come as they are. */
	serial = b->dirty ? 0 : b->serial;
	model = serial && !n && u->model_n >= k / 2 ? u->model : NULL;
	for (; item < end; item += 2) {
		struct fr_val *key = item[0], *val = item[1];
		struct text *c;

		if (is_box(val)) {
			if (adopt(u, b, box_of(val)))
				return -1;
		} else if (__builtin_expect(++b->size > u->size_max, 0)) {
			return fail_size(u);
		}
		if (model) {
			const struct fr_val *m = model[n];

			/* The model's string, or (written again) its text: the
			 * member takes the model's, which has a canon should the
			 * dict go off the model later and become the model. */
			if (key == m || same_key(key, m)) {
				key = (struct fr_val *)m;
				goto append;
			}
			/* Off the model: mark its keys so far, and go on as usual. */
			for (i = 0; i < n; i++) {
				c = text_of(model[i]);
				c->stamp = serial;
				c->pos = i;
			}
			model = NULL;
		}
		if (key->type != FR_VAL_STRING && !(key = key_of(u, key)))
			return -1;
		if (serial) {
			c = text_of(key)->canon;
			if (!c) {
				rc = intern(u, text_of(key));
				if (rc < 0)
					return -1;
				if (rc > 0) {
					u->sorting = true;
					make_dirty(u, b);
					serial = 0;
					goto append;
				}
				c = text_of(key)->canon;
			}
			if (c->stamp == serial) {
				items[2 * c->pos + 1] = val;
				continue;
			}
			c->stamp = serial;
			c->pos = n;
		}
append:
		items[2 * n] = key;
		items[2 * n + 1] = val;
		n++;
	}
	if (model) {
		b->unmarked = true;
	} else if (serial && !b->v.n && set_model(u, items, n)) {
		return -1;
	}
	b->v.n = n;
	u->nstack = from;
	return 0;
}

/*
 * Reads a PUT at p that follows the opcode just read, which made v (on the
 * stack's top), as picklers write one after every str and container they
 * make: here, where it is
 * expected, rather than through run()'s jump to the next handler, which
 * the processor predicts worse. Returns the bytes read (0 when there is no
 * PUT, or one cut short, left to run()), or -1 on an error.
 */
static inline __attribute__((always_inline)) int put_after(struct unpickler *u,
							   const unsigned char *p, struct fr_val *v)
{
	size_t left = (size_t)(u->buf + u->len - p);

	if (left >= 5 && p[0] == OP_LONG_BINPUT) {
		u->at = p;
		return memo_set(u, le32(p + 1), v) ? -1 : 5;
	}
	if (left >= 1 && p[0] == OP_MEMOIZE) {
		u->at = p;
		return memo_set(u, u->nmemo, v) ? -1 : 1;
	}
	if (left >= 2 && p[0] == OP_BINPUT) {
		u->at = p;
		return memo_set(u, p[1], v) ? -1 : 2;
	}
	return 0;
}

/* The value of a new empty container of `kind`, or NULL and an error. */
static inline __attribute__((always_inline)) struct fr_val *new_box(struct unpickler *u,
								   enum box_kind kind)
{
	struct box *b = box_new(u, kind);

	return b ? &b->v : NULL;
}

/* Builds a new container of `kind` from the items above stack index `from`. */
static int build(struct unpickler *u, enum box_kind kind, size_t from)
{
	struct box *b = box_new(u, kind);

	if (!b || (kind == BOX_DICT ? fill_dict(u, b, from) : fill_array(u, b, from)))
		return -1;
	return push(u, &b->v);
}

/* APPEND(S), SETITEM(S), ADDITEMS: items above `from` into the container below them. */
static inline __attribute__((always_inline)) int add_to(struct unpickler *u,
							 enum box_kind kind, size_t from)
{
	struct fr_val *target;

	if (__builtin_expect(from <= fence(u), 0))
		return fail(u, EPROTO, "stack underflow: %s has no %s below its items",
			    cur_op(u), box_names[kind]);
	target = u->stack[from - 1];
	if (changeable(u, target, kind))
		return -1;
	if (kind == BOX_DICT)
		return fill_dict(u, box_of(target), from);
	return fill_array(u, box_of(target), from);
}

/*
 * Leaves one member per key in every dirty dict, as fill_dict() does in
 * the others: each key's canon first (by sorting if the hash table
 * degrades), then one pass over each dict with a serial of its own, so
 * that a dict of n members costs O(n).
 */
static int dedupe(struct unpickler *u)
{
	uint32_t serial = u->ndicts, i, out;
	struct box *b;
	int rc;

	for (b = u->dirty; b && !u->sorting; b = b->next_dirty) {
		for (i = 0; i < b->v.n; i++) {
			struct text *t = text_of(b->v.u.items[2 * i]);

			if (t->canon)
				continue;
			rc = intern(u, t);
			if (rc < 0)
				return -1;
			if (rc > 0) {
				u->sorting = true;
				break;
			}
		}
	}
	if (u->sorting && intern_by_sorting(u))
		return -1;
	for (b = u->dirty; b; b = b->next_dirty) {
		struct fr_val **items = b->v.u.items;

		serial++;
		for (i = out = 0; i < b->v.n; i++) {
			struct text *c = text_of(items[2 * i])->canon;

			if (c->stamp == serial) {
				items[2 * c->pos + 1] = items[2 * i + 1];
				continue;
			}
			c->stamp = serial;
			c->pos = out;
			items[2 * out] = items[2 * i];
			items[2 * out + 1] = items[2 * i + 1];
			out++;
		}
		b->v.n = out;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Opcode arguments                                                    */
/* ------------------------------------------------------------------ */

/*
 * How each form of argument in PICKLE_OPS is read, for both machines: at
 * ip, into `arg` (a number, signed ones as their two's complement), `d` (a
 * float) or p and n (bytes), ip past it. ENSURE(k) is the machine's: it
 * leaves the handler when fewer than k bytes are left. The forms of
 * protocol 0's text (LINE, LINE_KEY) and NEXT_KEY (the memo's next key)
 * are each machine's own.
 */
#define ARG_NONE()
/* A fixed-size argument: k bytes, read by `expr` into `into`. */
#define ARG_FIXED(into, k, expr)				\
	do {							\
		ENSURE(k);					\
		into = (expr);					\
		ip += (k);					\
	} while (0)
#define ARG_U8() ARG_FIXED(arg, 1, ip[0])
#define ARG_U16() ARG_FIXED(arg, 2, (uint64_t)(ip[0] | ip[1] << 8))
#define ARG_I32() ARG_FIXED(arg, 4, (uint64_t)(int64_t)(int32_t)le32(ip))
#define ARG_U32() ARG_FIXED(arg, 4, le32(ip))
#define ARG_F64() ARG_FIXED(d, 8, be_double(ip))
/* A length of 8 bytes, and that many bytes left after it (FRAME's). */
#define ARG_LEN8()						\
	do {							\
		ARG_FIXED(arg, 8, le64(ip));			\
		ENSURE(arg);					\
	} while (0)
/* n bytes, at p. */
#define ARG_TAKE_N()						\
	do {							\
		ENSURE(n);					\
		p = ip;						\
		ip += n;					\
	} while (0)
/* Bytes after a length of 1, 4 or 8 bytes. */
#define ARG_BYTES(k, len)					\
	do {							\
		ARG_FIXED(n, k, (size_t)(len));			\
		ARG_TAKE_N();					\
	} while (0)
#define ARG_BYTES1() ARG_BYTES(1, ip[0])
#define ARG_BYTES4() ARG_BYTES(4, le32(ip))
#define ARG_BYTES8() ARG_BYTES(8, le64(ip))

/*
 * The handlers of each machine, one per opcode of PICKLE_OPS: its
 * argument read by the form, then the machine's act (RUN_ for run(), ITEM_
 * for hook_item()), which ends in a jump: to the next opcode's handler
 * (NEXT), or to a tail that several opcodes share. hook_item() has
 * handlers only for the opcodes marked Y; the others' bytes go straight
 * to its `off`.
 */
#define HANDLER(mach, name, form, act, kind, k)			\
	op_##name:						\
		ARG_##form();					\
		mach##_##act(kind, k);
#define RUN_HANDLER(name, byte, class, form, act, kind, k, hook)	\
	HANDLER(RUN, name, form, act, kind, k)
#define HANDLER_ADDRESS(name, byte, class, form, act, kind, k, hook) [byte] = &&op_##name,
#define ITEM_HANDLER(name, byte, class, form, act, kind, k, hook)	\
	ITEM_HANDLER_##hook(name, form, act, kind, k)
#define ITEM_HANDLER_Y(name, form, act, kind, k) HANDLER(ITEM, name, form, act, kind, k)
#define ITEM_HANDLER_N(name, form, act, kind, k)
#define ITEM_ADDRESS(name, byte, class, form, act, kind, k, hook) ITEM_ADDRESS_##hook(name, byte)
#define ITEM_ADDRESS_Y(name, byte) [byte] = &&op_##name,
#define ITEM_ADDRESS_N(name, byte)

/* ------------------------------------------------------------------ */
/* Items read by a hook                                                */
/* ------------------------------------------------------------------ */

/*
 * fr_pickle_load_with(): the items of one list (a dump's two thousand
 * entries) go to a hook without being made into values. hook_item() reads
 * one item, a dict, straight from its opcodes with a small machine of its
 * own that knows only what picklers write into such items, and costs a
 * fraction of the main machine's work: no container of the item is made
 * in the document, no member is looked up. What may outlive the item is
 * made as the main machine makes it (strs, and the dicts in its lists,
 * such as the frames PyTorch shares between entries through the memo);
 * the rest (the item, its lists, tuples and numbers) lives in scratch
 * memory that the next item reuses, and its memo keys hold NULL, which
 * the main machine cannot push: used again, it fails the load (-EAGAIN).
 *
 * At anything else hook_item() gives up before it has changed what the
 * main machine reads (it stores only under new memo keys, and forgets
 * them), and the main machine reads the item from its start: the item is
 * then made, and the load ends in -EAGAIN, since the list must hold none.
 * What the tree would have said of a read item holds: the containers of
 * the document it holds are sealed as if put in it, and its size and
 * height (struct box) count in the list's, so that the same limits refuse
 * the same pickles.
 */

#define HOOK_VALS 1024		/* scratch values an item may make */
#define HOOK_ITEMS 4096		/* pointers in its lists and tuples */
#define HOOK_STACK 256
#define HOOK_MARKS 16
#define HOOK_PAIRS 256		/* its members */
#define HOOK_HELD 256		/* containers of the document it holds */

/* What hval.kind says of a number. */
#define HVAL_NUMBER 0xff

/* A scratch value: a number, or a list or tuple of the item. */
struct hval {
	struct fr_val v;
	uint64_t size;		/* as struct box: 1 for a number */
	uint32_t height;	/* as struct box: 0 for a number */
	uint8_t kind;		/* BOX_LIST, BOX_TUPLE or HVAL_NUMBER */
};

struct hook_scratch {
	struct hval vals[HOOK_VALS];
	struct fr_val *items[HOOK_ITEMS];
	struct fr_val *stack[HOOK_STACK];
	size_t marks[HOOK_MARKS];
	struct fr_val *pairs[2 * HOOK_PAIRS];
	struct box *held[HOOK_HELD];
	struct fr_val item;
};

/* How the dict about to be made would go into the hook's list: above the
 * list's MARK, for its APPENDS, or on its own, for an APPEND. */
enum hook_form { HOOK_NONE, HOOK_MARKED, HOOK_APPENDED };

static inline bool is_hval(const struct hook_scratch *hs, const struct fr_val *v)
{
	return (const char *)v >= (const char *)hs->vals &&
	       (const char *)v < (const char *)(hs->vals + HOOK_VALS);
}

/*
 * Whether the list on top of the stack (sn long) is hook->key's: the value
 * of that member being set in the dict at the stack's bottom, the top
 * level, by SETITEMS (its MARK at 1, the key at an odd place above it) or
 * by SETITEM (nothing else on the stack); still empty, and under no other
 * MARK than that of its own items.
 */
static bool hook_is_list(const struct unpickler *u, size_t sn)
{
	const char *want = u->hook->key;
	struct fr_val *l = u->stack[sn - 1], *root = u->stack[0], *key;
	size_t j = sn - 1, below = 0;

	if (j < 2 || !is_box(l) || box_of(l)->kind != BOX_LIST || box_of(l)->sealed || l->n)
		return false;
	key = u->stack[j - 1];
	if (!is_box(root) || box_of(root)->kind != BOX_DICT || key->type != FR_VAL_STRING ||
	    key->n != strlen(want) || memcmp(key->u.s, want, key->n) != 0)
		return false;
	while (below < u->nmarks && u->marks[below] <= j)
		below++;
	if (u->nmarks - below > 1)
		return false;
	return (below == 1 && u->marks[0] == 1 && j % 2 == 0) || (below == 0 && j == 2);
}

/* Whether the dict EMPTY_DICT is about to make (the stack sn long) is an
 * item of the hook's list, found at its first item. */
static enum hook_form hook_place(struct unpickler *u, size_t sn)
{
	struct fr_val *l = u->stack[sn - 1];

	if (l != u->hook_list) {
		if (u->hook_list || l == u->hook_seen)
			return HOOK_NONE;
		u->hook_seen = l;
		if (!hook_is_list(u, sn))
			return HOOK_NONE;
		u->hook_list = l;
		u->hook_root = u->stack[0];
	}
	if (u->nmarks && u->marks[u->nmarks - 1] == sn)
		return !u->hook_mark || u->hook_mark == u->nmarks ? HOOK_MARKED : HOOK_NONE;
	return HOOK_APPENDED;
}

/* What an item has taken of the scratch memory so far. */
struct hacc {
	size_t nv, ni, nh;	/* of vals[], items[] and held[] */
};

/*
 * Counts value v into a container of the item whose size and height are
 * *size and *height, as adopt() would, and keeps a container of the
 * document in held[] to be sealed. False to give up: held[] full, the
 * hook's list itself, a limit passed.
 */
static inline __attribute__((always_inline)) bool hook_adopt(struct unpickler *u,
							      struct hook_scratch *hs,
							      struct hacc *a, struct fr_val *v,
							      uint64_t *size, uint32_t *height)
{
	uint64_t s = 1;
	uint32_t h = 0;

	if (is_hval(hs, v)) {
		if (((const struct hval *)v)->kind != HVAL_NUMBER) {
			s = ((const struct hval *)v)->size;
			h = ((const struct hval *)v)->height;
		}
	} else if (is_box(v)) {
		if (a->nh == HOOK_HELD || v == u->hook_list)
			return false;
		hs->held[a->nh++] = box_of(v);
		s = box_of(v)->size;
		h = box_of(v)->height;
	}
	if (h && h + 1 > *height) {
		if (h + 1 > FR_PICKLE_DEPTH_MAX)
			return false;
		*height = h + 1;
	}
	*size += s;
	return *size <= u->size_max;
}

/* A new scratch value of `kind`, NULL when there is no room. */
static inline __attribute__((always_inline)) struct hval *hval_new(struct hook_scratch *hs,
								   struct hacc *a, uint8_t kind)
{
	struct hval *h;

	if (a->nv == HOOK_VALS)
		return NULL;
	h = &hs->vals[a->nv++];
	h->v.type = kind == HVAL_NUMBER ? FR_VAL_INT : FR_VAL_ARRAY;
	h->v.mark = 0;
	h->v.n = 0;
	h->v.cap = 0;
	h->kind = kind;
	if (kind != HVAL_NUMBER) {
		h->v.u.items = NULL;
		h->size = 1;
		h->height = 1;
	}
	return h;
}

/* Appends the k values at src to scratch list or tuple h; false to give up. */
static inline __attribute__((always_inline)) bool hval_fill(struct unpickler *u,
							     struct hook_scratch *hs,
							     struct hacc *a, struct hval *h,
							     struct fr_val *const *src, size_t k)
{
	size_t n = h->v.n;
	struct fr_val **dst;

	if (!k)
		return true;
	if (HOOK_ITEMS - a->ni < n + k)
		return false;
	/* A second batch moves the first up to it, so that the items stay in one run. */
	dst = hs->items + a->ni;
	if (n)
		memcpy(dst, h->v.u.items, n * sizeof(*dst));
	for (size_t i = 0; i < k; i++) {
		if (!hook_adopt(u, hs, a, src[i], &h->size, &h->height))
			return false;
		dst[n + i] = src[i];
	}
	a->ni += n + k;
	h->v.u.items = dst;
	h->v.n = (uint32_t)(n + k);
	return true;
}

/*
 * The k values at src into `b`, a container of the document made in this
 * item, through fill_dict() or fill_array() as the main machine would: a
 * dict (a frame) by SETITEM(S), of str keys; a tuple when it is made,
 * which a pickle may share between items through the memo (PyTorch's
 * process groups). Its values are of the document, or numbers (made in it
 * now). Returns 1, 0 to give up, -1 on an error.
 */
static int hook_fill_real(struct unpickler *u, struct hook_scratch *hs, struct box *b,
			  struct fr_val *const *src, size_t k)
{
	bool dict = b->kind == BOX_DICT;
	size_t from = u->nstack;

	for (size_t i = 0; i < k; i++)
		if (is_hval(hs, src[i]) ? (dict && i % 2 == 0) ||
						  ((struct hval *)src[i])->kind != HVAL_NUMBER :
					  dict && i % 2 == 0 && src[i]->type != FR_VAL_STRING)
			return 0;
	for (size_t i = 0; i < k; i++) {
		struct fr_val *x = src[i];

		if (is_hval(hs, x)) {
			struct fr_val *r = scalar(u, FR_VAL_INT);

			if (!r)
				return -1;
			r->u = x->u;
			x = r;
		}
		if (push(u, x))
			return -1;
	}
	return (dict ? fill_dict(u, b, from) : fill_array(u, b, from)) ? -1 : 1;
}

/* SETITEM(S) into `target`: only a dict the item made, not yet in one of
 * its lists (sealed once the item is read), takes them. */
static int hook_fill_dict(struct unpickler *u, struct hook_scratch *hs, size_t nh,
			  uint32_t ndicts, struct fr_val *target, struct fr_val *const *src,
			  size_t k)
{
	struct box *b;

	if (is_hval(hs, target) || !is_box(target) || k % 2)
		return 0;
	b = box_of(target);
	if (b->kind != BOX_DICT || b->sealed || b->serial <= ndicts)
		return 0;
	for (size_t i = 0; i < nh; i++)
		if (hs->held[i] == b)
			return 0;
	return hook_fill_real(u, hs, b, src, k);
}

/*
 * Reads the dict whose EMPTY_DICT is at ip - 1, an item of the hook's
 * list going in by `form`, and passes it to the hook. Returns where the
 * main machine goes on (past the item's APPEND for HOOK_APPENDED), ip
 * itself to have the main machine read the item, or NULL on an error.
 * Like run(), a handler per opcode of PICKLE_OPS, each jumping to the next
 * one's; an act this machine does not follow gives up (`off`).
 */
static const unsigned char *hook_item(struct unpickler *u, const unsigned char *ip,
				      enum hook_form form)
{
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
	static const void *const handlers[256] = {
		[0 ... 255] = &&off,
		PICKLE_OPS(ITEM_ADDRESS)
	};
#pragma GCC diagnostic pop
	const unsigned char *const start = ip, *const end = u->buf + u->len, *op = ip;
	const unsigned char *p = NULL;
	struct box *list = box_of(u->hook_list);
	struct hook_scratch *hs = u->hs;
	struct fr_val **stack, **memo = u->memo;
	size_t nmemo = u->nmemo, nmemo_at_start = nmemo, sn = 0, nm = 0, np = 0, n = 0;
	size_t at = 0, fence = 0;
	uint32_t ndicts = u->ndicts, height = 1;
	uint64_t size = 1, arg = 0;
	struct hacc a = { 0, 0, 0 };
	struct fr_val *v;
	struct hval *h;
	double d = 0;
	int rc;

	if (!hs && !(hs = u->hs = malloc(sizeof(*hs))))
		return start;
	u->hook_tried = true;
	stack = hs->stack;

/* k bytes of argument, or give up (the main machine says what is wrong). */
#define ENSURE(k)							\
	do {								\
		if (__builtin_expect((size_t)(k) > (size_t)(end - ip), 0)) \
			goto off;					\
	} while (0)
#define ARG_NEXT_KEY() (arg = nmemo)
/* Pushes x, a value of the document (NULL: its maker failed). */
#define HPUSH(x_)							\
	do {								\
		if (!(v = (x_)))					\
			return NULL;					\
		if (__builtin_expect(sn == HOOK_STACK, 0))		\
			goto off;					\
		stack[sn++] = v;					\
	} while (0)
#define NUMBER(i_)							\
	do {								\
		if (sn == HOOK_STACK || !(h = hval_new(hs, &a, HVAL_NUMBER))) \
			goto off;					\
		h->v.u.i = (i_);					\
		stack[sn++] = &h->v;					\
	} while (0)
#define FENCE() (nm ? hs->marks[nm - 1] : 0)
#define NEXT								\
	do {								\
		if (__builtin_expect(ip == end, 0))			\
			goto off;					\
		op = ip;						\
		goto *handlers[*ip++];					\
	} while (0)
/* Where the stack is empty and no MARK open: perhaps the item's end. */
#define NEXT_OR_BETWEEN							\
	do {								\
		if (!sn && !nm)						\
			goto between;					\
		NEXT;							\
	} while (0)

/* The acts of the opcodes PICKLE_OPS marks Y. Those on containers
 * follow only some kinds: marking Y an opcode on another fails here. */
#define ITEM_KINDS(kind, k1, k2, k3)					\
	_Static_assert(BOX_##kind == (k1) || BOX_##kind == (k2) ||	\
		       BOX_##kind == (k3), "hook_item() follows " #kind)
#define ITEM_GET(kind, k)						\
	do {								\
		if (__builtin_expect(arg >= nmemo || !memo[arg], 0))	\
			goto off;					\
		HPUSH(memo[arg]);					\
		NEXT;							\
	} while (0)
#define ITEM_PUT(kind, k) goto put
#define ITEM_CONST(kind, k)						\
	do {								\
		HPUSH(const_##kind(u));					\
		NEXT;							\
	} while (0)
#define ITEM_INT(kind, k)						\
	do {								\
		NUMBER((int64_t)arg);					\
		NEXT;							\
	} while (0)
#define ITEM_LONG(kind, k)						\
	do {								\
		if (!n || n > 8)					\
			goto off;					\
		NUMBER(le_signed(p, n, end));				\
		NEXT;							\
	} while (0)
#define ITEM_REAL(kind, k)						\
	do {								\
		HPUSH(real(u, d));					\
		NEXT;							\
	} while (0)
#define ITEM_STR(kind, k)						\
	do {								\
		if (n >= UINT32_MAX)					\
			goto off;					\
		HPUSH(text(u, p, n));					\
		NEXT;							\
	} while (0)
/* A list of the item in scratch memory; a tuple or a dict (a frame) in
 * the document, since items share them through the memo. */
#define ITEM_EMPTY(kind, k)						\
	do {								\
		ITEM_KINDS(kind, BOX_LIST, BOX_TUPLE, BOX_DICT);	\
		if (BOX_##kind == BOX_LIST) {				\
			if (sn == HOOK_STACK || !(h = hval_new(hs, &a, BOX_LIST))) \
				goto off;				\
			stack[sn++] = &h->v;				\
			NEXT;						\
		}							\
		if (BOX_##kind == BOX_TUPLE) {				\
			at = sn;					\
			goto tuple;					\
		}							\
		HPUSH(new_box(u, BOX_DICT));				\
		NEXT;							\
	} while (0)
/* k items (0: those above the MARK) into a list or a dict: the item
 * itself, below everything, takes SETITEM(S) too. */
#define ITEM_ADD(kind, k)						\
	do {								\
		ITEM_KINDS(kind, BOX_LIST, BOX_DICT, BOX_DICT);	\
		if (k) {						\
			fence = FENCE();				\
			if (sn < fence + (k) + (BOX_##kind == BOX_LIST)) \
				goto off;				\
			at = sn - (k);					\
		} else {						\
			if (!nm)					\
				goto off;				\
			at = hs->marks[--nm];				\
			fence = FENCE();				\
		}							\
		if (BOX_##kind == BOX_LIST)				\
			goto append;					\
		goto setitems;						\
	} while (0)
#define ITEM_BUILD(kind, k)						\
	do {								\
		ITEM_KINDS(kind, BOX_LIST, BOX_TUPLE, BOX_TUPLE);	\
		if (k) {						\
			if (sn < FENCE() + (k))			\
				goto off;				\
			at = sn - (k);					\
		} else {						\
			if (!nm)					\
				goto off;				\
			at = hs->marks[--nm];				\
		}							\
		if (BOX_##kind == BOX_LIST)				\
			goto list;					\
		goto tuple;						\
	} while (0)
#define ITEM_MARK(kind, k)						\
	do {								\
		if (nm == HOOK_MARKS)					\
			goto off;					\
		hs->marks[nm++] = sn;					\
		NEXT;							\
	} while (0)
#define ITEM_FRAME(kind, k) NEXT_OR_BETWEEN

between:
	/* Nothing on the stack, no MARK: more members, or the item's end,
	 * where the next one or the list's end begins. */
	if (ip == end)
		goto off;
	if (*ip == OP_EMPTY_DICT || *ip == OP_APPENDS) {
		if (form != HOOK_MARKED)
			goto off;
		goto done;
	}
	if (*ip == OP_APPEND) {
		if (form != HOOK_APPENDED || list->sealed)
			goto off;
		ip++;
		goto done;
	}
	NEXT;
	PICKLE_OPS(ITEM_HANDLER)

put:
	/* Only under a new key: forgotten if the main machine reads the
	 * item again. */
	if (arg != nmemo)
		goto off;
	if (sn > FENCE())
		v = is_hval(hs, stack[sn - 1]) ? NULL : stack[sn - 1];
	else if (op == start)
		v = NULL; /* the item's own */
	else
		goto off;
	if (memo_set(u, arg, v))
		return NULL;
	memo = u->memo;
	nmemo = u->nmemo;
	NEXT_OR_BETWEEN;
append:
	if (at <= fence)
		goto off;
	v = stack[at - 1];
	if (!is_hval(hs, v) || ((struct hval *)v)->kind != BOX_LIST ||
	    !hval_fill(u, hs, &a, (struct hval *)v, &stack[at], sn - at))
		goto off;
	sn = at;
	NEXT;
list:
	if (at == HOOK_STACK || !(h = hval_new(hs, &a, BOX_LIST)) ||
	    !hval_fill(u, hs, &a, h, &stack[at], sn - at))
		goto off;
	sn = at;
	stack[sn++] = &h->v;
	NEXT;
tuple: {
	/* Made in the document: items share tuples through the memo. */
	struct box *b;

	if (at == HOOK_STACK)
		goto off;
	if (!(b = box_new(u, BOX_TUPLE)))
		return NULL;
	rc = hook_fill_real(u, hs, b, &stack[at], sn - at);
	if (rc < 0)
		return NULL;
	if (!rc)
		goto off;
	sn = at;
	stack[sn++] = &b->v;
	NEXT;
}
setitems:
	n = sn - at;
	if (at > fence) {
		/* Into a dict the item made. */
		rc = hook_fill_dict(u, hs, a.nh, ndicts, stack[at - 1], &stack[at], n);
		if (rc < 0)
			return NULL;
		if (!rc)
			goto off;
		sn = at;
		NEXT;
	}
	/* Into the item itself, below everything. */
	if (at || nm || n % 2 || n > 2 * HOOK_PAIRS - np)
		goto off;
	for (size_t i = 0; i < n; i += 2) {
		struct fr_val *key = stack[i], *val = stack[i + 1];

		if (is_hval(hs, key) || key->type != FR_VAL_STRING ||
		    !hook_adopt(u, hs, &a, val, &size, &height))
			goto off;
		hs->pairs[np++] = key;
		hs->pairs[np++] = val;
	}
	sn = 0;
	goto between;

done:
	/* The item into the list, as fill_array() and adopt() would put it. */
	if (list->size + size > u->size_max || height + 1 > FR_PICKLE_DEPTH_MAX)
		goto off;
	for (size_t i = 0; i < a.nh; i++)
		hs->held[i]->sealed = true;
	list->size += size;
	if (height + 1 > list->height)
		list->height = height + 1;
	if (form == HOOK_MARKED)
		u->hook_mark = u->nmarks;
	hs->item.type = FR_VAL_OBJECT;
	hs->item.mark = 0;
	hs->item.n = (uint32_t)(np / 2);
	hs->item.cap = 0;
	hs->item.u.items = hs->pairs;
	u->hook->nitems++;
	rc = u->hook->item(u->hook->arg, &hs->item);
	if (rc) {
		if (rc == -ENOMEM)
			fail_nomem(u);
		else
			fail(u, -rc, "the reader of an item failed (%s)", strerror(-rc));
		return NULL;
	}
	return ip;
off:
	u->nmemo = nmemo_at_start;
	return start;
#undef NEXT_OR_BETWEEN
#undef NEXT
#undef FENCE
#undef NUMBER
#undef HPUSH
#undef ARG_NEXT_KEY
#undef ENSURE
}

/* ------------------------------------------------------------------ */
/* The machine                                                         */
/* ------------------------------------------------------------------ */

/* Refuses opcode c, which run() does not read. */
static int refuse(struct unpickler *u, unsigned char c)
{
	switch (op_classes[c]) {
	case DENY:
		return fail(u, EPROTO, "opcode 0x%02x (%s) is not allowed: "
			    "this reader only reads plain data", c, op_names[c]);
	case NOSUP:
		return fail(u, EPROTO, "opcode 0x%02x (%s) is not supported "
			    "(protocol 0 text or Python 2 str)", c, op_names[c]);
	default:
		return fail(u, EPROTO, "unknown opcode 0x%02x", c);
	}
}

/*
 * The pickle machine, up to STOP. Every handler ends by jumping to the next
 * opcode's handler (NEXT) instead of going back to one switch: a jump of
 * its own, which the processor predicts from the opcode before, where one
 * shared jump would be mispredicted at most opcodes of a dump. The input
 * position and the stack's length live in registers, `ip` and `sn`: the
 * chain from ip to the next jump is the one every misprediction waits for,
 * and one through memory would cost every opcode a store and a load.
 * Helpers find them in u->pos (SYNC before them, LOAD after) and u->nstack
 * (SP_SYNC, SP_LOAD); the opcodes that make up most of a dump need neither.
 */
static int run(struct unpickler *u)
{
	/* Bytes that are no opcode first, then the table over them. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
	static const void *const handlers[256] = {
		[0 ... 255] = &&refused,
		PICKLE_OPS(HANDLER_ADDRESS)
	};
#pragma GCC diagnostic pop
	const unsigned char *ip = u->buf + u->pos, *const end = u->buf + u->len;
	size_t sn = u->nstack, n = 0, at = 0;
	const unsigned char *p = NULL;
	const char *s = NULL;
	uint64_t arg = 0;
	double d = 0;
	unsigned char c;

#define SYNC() (u->pos = (size_t)(ip - u->buf))
#define LOAD() (ip = u->buf + u->pos)
#define SP_SYNC() (u->nstack = sn)
#define SP_LOAD() (sn = u->nstack)
/* Pushes v (NULL: its maker failed). */
#define PUSH(v)								\
	do {								\
		struct fr_val *v_ = (v);				\
									\
		if (__builtin_expect(!v_ || sn == u->stack_cap, 0)) {	\
			SP_SYNC();					\
			if (push_slow(u, v_))				\
				return -1;				\
			SP_LOAD();					\
		} else {						\
			u->stack[sn++] = v_;				\
		}							\
	} while (0)
/* Checks that k bytes of argument are left. */
#define ENSURE(k)							\
	do {								\
		if (__builtin_expect((size_t)(k) > (size_t)(end - ip), 0)) { \
			fail_truncated(u, (k), (size_t)(end - ip));	\
			return -1;					\
		}							\
	} while (0)
/* Protocol 0's argument: the text up to the next newline, or a memo key in it. */
#define ARG_LINE()							\
	do {								\
		SYNC();							\
		if (take_line(u, &s, &n))				\
			return -1;					\
		LOAD();							\
	} while (0)
#define ARG_LINE_KEY()							\
	do {								\
		SYNC();							\
		if (take_line_key(u, &arg))				\
			return -1;					\
		LOAD();							\
	} while (0)
#define ARG_NEXT_KEY() (arg = u->nmemo)
/* Reads the PUT that may follow (put_after()). */
#define PUT_AFTER()							\
	do {								\
		int put_ = put_after(u, ip, u->stack[sn - 1]);		\
									\
		if (put_ < 0)						\
			return -1;					\
		ip += put_;						\
	} while (0)
#define NEXT								\
	do {								\
		u->at = ip;						\
		if (__builtin_expect(ip >= end, 0))			\
			return fail(u, EPROTO, "truncated (the input "	\
				    "ends before STOP)");		\
		c = *ip++;						\
		goto *handlers[c];					\
	} while (0)
/* Runs a helper that works on u->nstack, not on sn. */
#define ON_STACK(call)							\
	do {								\
		SP_SYNC();						\
		if (call)						\
			return -1;					\
		SP_LOAD();						\
	} while (0)

/* The acts of PICKLE_OPS. */
#define RUN_REFUSE(kind, k) goto refused
#define RUN_GET(kind, k)						\
	do {								\
		if (__builtin_expect(arg >= u->nmemo, 0))		\
			return fail(u, EPROTO, "memo key %" PRIu64 " is not set", arg); \
		PUSH(u->memo[arg]);					\
		NEXT;							\
	} while (0)
#define RUN_PUT(kind, k)						\
	do {								\
		ON_STACK(memo_put(u, arg));				\
		NEXT;							\
	} while (0)
#define RUN_CONST(kind, k)						\
	do {								\
		PUSH(const_##kind(u));					\
		NEXT;							\
	} while (0)
#define RUN_INT(kind, k)						\
	do {								\
		PUSH(integer(u, (int64_t)arg));				\
		NEXT;							\
	} while (0)
/* Times in ns and thread ids: 8 bytes or fewer, an int64. */
#define RUN_LONG(kind, k)						\
	do {								\
		PUSH(n && n <= 8 ? integer(u, le_signed(p, n, end)) : long_bytes(u, p, n)); \
		NEXT;							\
	} while (0)
#define RUN_LONG4(kind, k) goto long4
#define RUN_INT_TEXT(kind, k) goto int_text
#define RUN_LONG_TEXT(kind, k) goto long_text
#define RUN_REAL(kind, k)						\
	do {								\
		PUSH(real(u, d));					\
		NEXT;							\
	} while (0)
#define RUN_STR(kind, k)						\
	do {								\
		PUSH(text(u, p, n));					\
		PUT_AFTER();						\
		NEXT;							\
	} while (0)
#define RUN_BYTES(kind, k)						\
	do {								\
		PUSH(hex(u, p, n));					\
		PUT_AFTER();						\
		NEXT;							\
	} while (0)
#define RUN_EMPTY(kind, k)						\
	do {								\
		if (BOX_##kind == BOX_DICT)				\
			HOOK_ITEM();					\
		PUSH(new_box(u, BOX_##kind));				\
		PUT_AFTER();						\
		NEXT;							\
	} while (0)
/* An EMPTY_DICT that may begin an item of the hook's list: hook_item()
 * reads it, or leaves it (and ip) to this machine. */
#define HOOK_ITEM()							\
	do {								\
		if (__builtin_expect(u->hook != NULL, 0) && sn) {	\
			enum hook_form form = hook_place(u, sn);	\
									\
			if (form != HOOK_NONE) {			\
				SP_SYNC();				\
				if (!(p = hook_item(u, ip, form)))	\
					return -1;			\
				SP_LOAD();				\
				if (p != ip) {				\
					ip = p;				\
					NEXT;				\
				}					\
			}						\
		}							\
	} while (0)
/* APPEND(S), SETITEM(S), ADDITEMS: k items (0: those above the MARK)
 * into the container below them. */
#define RUN_ADD(kind, k)						\
	do {								\
		if (k)							\
			ON_STACK(need(u, (k) + 1) ||			\
				 add_to(u, BOX_##kind, u->nstack - (k))); \
		else							\
			ON_STACK(pop_mark(u, &at) || add_to(u, BOX_##kind, at)); \
		NEXT;							\
	} while (0)
/* TUPLE1 to 3, TUPLE, LIST, DICT, FROZENSET: a new container of k items
 * (0: those above the MARK). */
#define RUN_BUILD(kind, k)						\
	do {								\
		if (k)							\
			ON_STACK(need(u, k) || build(u, BOX_##kind, u->nstack - (k))); \
		else							\
			ON_STACK(pop_mark(u, &at) || build(u, BOX_##kind, at)); \
		PUT_AFTER();						\
		NEXT;							\
	} while (0)
#define RUN_MARK(kind, k) goto mark
#define RUN_POP(kind, k) goto pop
#define RUN_POP_MARK(kind, k)						\
	do {								\
		ON_STACK(pop_mark(u, &at));				\
		sn = at;						\
		NEXT;							\
	} while (0)
#define RUN_DUP(kind, k)						\
	do {								\
		ON_STACK(need(u, 1) || push(u, u->stack[u->nstack - 1])); \
		NEXT;							\
	} while (0)
#define RUN_PROTO(kind, k)						\
	do {								\
		if (arg > 5)						\
			return fail(u, EPROTO, "protocol %u unknown", (unsigned)arg); \
		NEXT;							\
	} while (0)
/* Frames only help a streaming reader: their length is checked, and on. */
#define RUN_FRAME(kind, k) NEXT
#define RUN_STOP(kind, k) goto stop

	NEXT;
	PICKLE_OPS(RUN_HANDLER)

long4:
	if ((int32_t)arg < 0)
		return fail(u, EPROTO, "LONG4 with a negative length");
	n = (size_t)arg;
	if (n > FR_PICKLE_LONG_MAX)
		return fail(u, EPROTO, "LONG4 of %zu bytes is longer than %d bytes",
			    n, FR_PICKLE_LONG_MAX);
	ARG_TAKE_N();
	PUSH(long_bytes(u, p, n));
	NEXT;
int_text:
	/* Protocol 0 writes bools as INT 01 and 00. */
	if (n == 2 && s[0] == '0' && (s[1] == '0' || s[1] == '1'))
		PUSH(s[1] == '1' ? const_yes(u) : const_no(u));
	else
		PUSH(decimal(u, s, n));
	NEXT;
long_text:
	if (n && s[n - 1] == 'L')
		n--;
	PUSH(decimal(u, s, n));
	NEXT;
mark:
	if (sn > UINT32_MAX)
		return fail(u, EPROTO, "stack deeper than %u items", UINT32_MAX);
	if (__builtin_expect(u->nmarks == u->marks_cap, 0)) {
		uint32_t *m = grow(u->marks, &u->marks_cap, sizeof(*m));

		if (!m)
			return fail_nomem(u);
		u->marks = m;
	}
	u->marks[u->nmarks++] = (uint32_t)sn;
	NEXT;
pop:
	SP_SYNC();
	if (u->nstack > fence(u))
		u->nstack--;
	else if (u->nmarks && u->nmarks == u->hook_mark)
		return fail(u, EPROTO, "POP takes the MARK of items a hook read");
	else if (u->nmarks)
		u->nmarks--;
	else
		return need(u, 1);
	SP_LOAD();
	NEXT;
stop:
	SP_SYNC();
	if (u->nmarks)
		return fail(u, EPROTO, "STOP with %zu MARK%s open",
			    u->nmarks, u->nmarks == 1 ? "" : "s");
	if (u->nstack != 1)
		return fail(u, EPROTO, "STOP with %zu items on the stack (expected 1)",
			    u->nstack);
	if (ip != end) {
		u->at = ip;
		return fail(u, EPROTO, "%zu bytes after STOP", (size_t)(end - ip));
	}
	return 0;
refused:
	return refuse(u, c);
#undef ON_STACK
#undef NEXT
#undef PUT_AFTER
#undef ARG_NEXT_KEY
#undef ARG_LINE_KEY
#undef ARG_LINE
#undef ENSURE
#undef PUSH
#undef SP_LOAD
#undef SP_SYNC
#undef LOAD
#undef SYNC
}

bool fr_pickle_sniff(const void *buf, size_t len)
{
	const unsigned char *p = buf;

	return len >= 2 && p[0] == OP_PROTO && p[1] >= 2 && p[1] <= 5;
}

/*
 * Whether the load read items through a hook and made the document
 * fr_pickle_load() would, less those items: the hook's list the member
 * its key names in the top-level dict, put in no other container, and
 * holding none of the items the main machine made.
 */
static bool hook_followed(const struct unpickler *u, const struct fr_val *root)
{
	return root == u->hook_root && u->hook_adopted == 1 &&
	       fr_val_get(root, u->hook->key) == u->hook_list && u->hook_list->n == 0;
}

static int load(struct fr_doc *d, const void *buf, size_t len, struct fr_pickle_hook *hook,
		struct fr_val **out, char *err, size_t errlen)
{
	struct unpickler u = {
		.buf = buf,
		.len = len,
		.at = buf,
		.doc = d,
		.err = err,
		.errlen = errlen,
		.hook = hook,
		.canons.probe_max = PROBE_MAX,
	};

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	if (len > (SIZE_MAX - KEY_BUDGET_MIN) / KEY_BUDGET_RATIO)
		u.keys.budget = SIZE_MAX;
	else
		u.keys.budget = len * KEY_BUDGET_RATIO + KEY_BUDGET_MIN;
	if (len > ((1ull << 62) - SIZE_MIN) / SIZE_RATIO)
		u.size_max = 1ull << 62;
	else
		u.size_max = (uint64_t)len * SIZE_RATIO + SIZE_MIN;
	/* A first block as large as the input, within the bounds of blocks. */
	u.block_size = BLOCK_MIN;
	while (u.block_size < BLOCK_MAX && u.block_size < len)
		u.block_size *= 2;

	if (len == 0) {
		fail(&u, EPROTO, "not a pickle (empty input)");
		goto out;
	}
	if (u.buf[0] != OP_PROTO) {
		fail(&u, EPROTO, "not a pickle of protocol 2 to 5 (first byte 0x%02x, not PROTO 0x80)",
		     u.buf[0]);
		goto out;
	}
	if (len < 2) {
		fail(&u, EPROTO, "truncated PROTO (needed 1 bytes, 0 left)");
		goto out;
	}
	if (u.buf[1] > 5) {
		fail(&u, EPROTO, "not a pickle (protocol %u unknown)", u.buf[1]);
		goto out;
	}
	if (u.buf[1] < 2) {
		fail(&u, EPROTO, "pickle protocol %u is not read (only 2 to 5)", u.buf[1]);
		goto out;
	}
	u.pos = 2;
	if (run(&u) == 0 && dedupe(&u) == 0) {
		*out = u.stack[0];
		if (hook && hook->nitems && !hook_followed(&u, *out)) {
			fail(&u, EAGAIN, "the list of \"%s\" is used in a way its hook "
			     "does not follow", hook->key);
			*out = NULL;
		}
	}

out:
	free(u.hs);
	free(u.stack);
	free(u.marks);
	free(u.memo);
	free(u.keys.s);
	free(u.canons.slot);
	free(u.model);
	if (*out)
		return 0;
	if (u.errnum == ENOMEM)
		return -ENOMEM;
	if (u.hook_tried) {
		/* (A memo key of an item read is empty: its push failed silently.) */
		fail(&u, EAGAIN, "a value a hook read is used again");
		return -EAGAIN;
	}
	return -EPROTO;
}

int fr_pickle_load(struct fr_doc *d, const void *buf, size_t len, struct fr_val **out,
		   char *err, size_t errlen)
{
	return load(d, buf, len, NULL, out, err, errlen);
}

int fr_pickle_load_with(struct fr_doc *d, const void *buf, size_t len,
			struct fr_pickle_hook *hook, struct fr_val **out, char *err,
			size_t errlen)
{
	hook->nitems = 0;
	return load(d, buf, len, hook, out, err, errlen);
}
