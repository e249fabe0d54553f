/*
 * A pickle decoder for plain data (see pickle.h for the mapping to JSON).
 *
 * The decoder is the pickle machine itself, run without its dangerous half:
 * a loop over opcodes with a stack, a stack of marks and a memo, all growable
 * arrays, so that the input's nesting never becomes C recursion. Every
 * reference on the stack or in the memo carries the index of a "box" when it
 * is a container: the box remembers the container's kind, height and size
 * and whether it has been put inside another container. A container that
 * is inside another is sealed and can no longer be changed. That one rule,
 * which every pickler's output obeys for acyclic data, keeps the tree
 * acyclic (a cycle needs a container put into itself, which is refused, or
 * a change to one that is already inside another) and makes the heights
 * and sizes exact, so the bounds on depth and on size written out hold
 * although the memo shares containers.
 */
#include "pickle.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Every opcode of protocols 0 to 5, once: its name, its byte and what this
 * reader does with it. OK opcodes are decoded; DENY opcodes name, call or
 * build objects (or fetch them from outside the pickle) and are refused as
 * such; NOSUP opcodes carry plain data in forms that protocol 2 to 5
 * picklers do not write (protocol 0 text, Python 2 str) and are refused as
 * unsupported. Protocol 0's INT, LONG, GET and PUT, being cheap, are read.
 */
#define PICKLE_OPS(X)                       \
	X(MARK, 0x28, OK)                   \
	X(STOP, 0x2e, OK)                   \
	X(POP, 0x30, OK)                    \
	X(POP_MARK, 0x31, OK)               \
	X(DUP, 0x32, OK)                    \
	X(FLOAT, 0x46, NOSUP)               \
	X(INT, 0x49, OK)                    \
	X(BININT, 0x4a, OK)                 \
	X(BININT1, 0x4b, OK)                \
	X(LONG, 0x4c, OK)                   \
	X(BININT2, 0x4d, OK)                \
	X(NONE, 0x4e, OK)                   \
	X(PERSID, 0x50, DENY)               \
	X(BINPERSID, 0x51, DENY)            \
	X(REDUCE, 0x52, DENY)               \
	X(STRING, 0x53, NOSUP)              \
	X(BINSTRING, 0x54, NOSUP)           \
	X(SHORT_BINSTRING, 0x55, NOSUP)     \
	X(UNICODE, 0x56, NOSUP)             \
	X(BINUNICODE, 0x58, OK)             \
	X(APPEND, 0x61, OK)                 \
	X(BUILD, 0x62, DENY)                \
	X(GLOBAL, 0x63, DENY)               \
	X(DICT, 0x64, OK)                   \
	X(EMPTY_DICT, 0x7d, OK)             \
	X(APPENDS, 0x65, OK)                \
	X(GET, 0x67, OK)                    \
	X(BINGET, 0x68, OK)                 \
	X(INST, 0x69, DENY)                 \
	X(LONG_BINGET, 0x6a, OK)            \
	X(LIST, 0x6c, OK)                   \
	X(EMPTY_LIST, 0x5d, OK)             \
	X(OBJ, 0x6f, DENY)                  \
	X(PUT, 0x70, OK)                    \
	X(BINPUT, 0x71, OK)                 \
	X(LONG_BINPUT, 0x72, OK)            \
	X(SETITEM, 0x73, OK)                \
	X(TUPLE, 0x74, OK)                  \
	X(EMPTY_TUPLE, 0x29, OK)            \
	X(SETITEMS, 0x75, OK)               \
	X(BINFLOAT, 0x47, OK)               \
	X(PROTO, 0x80, OK)                  \
	X(NEWOBJ, 0x81, DENY)               \
	X(EXT1, 0x82, DENY)                 \
	X(EXT2, 0x83, DENY)                 \
	X(EXT4, 0x84, DENY)                 \
	X(TUPLE1, 0x85, OK)                 \
	X(TUPLE2, 0x86, OK)                 \
	X(TUPLE3, 0x87, OK)                 \
	X(NEWTRUE, 0x88, OK)                \
	X(NEWFALSE, 0x89, OK)               \
	X(LONG1, 0x8a, OK)                  \
	X(LONG4, 0x8b, OK)                  \
	X(BINBYTES, 0x42, OK)               \
	X(SHORT_BINBYTES, 0x43, OK)         \
	X(SHORT_BINUNICODE, 0x8c, OK)       \
	X(BINUNICODE8, 0x8d, OK)            \
	X(BINBYTES8, 0x8e, OK)              \
	X(EMPTY_SET, 0x8f, OK)              \
	X(ADDITEMS, 0x90, OK)               \
	X(FROZENSET, 0x91, OK)              \
	X(NEWOBJ_EX, 0x92, DENY)            \
	X(STACK_GLOBAL, 0x93, DENY)         \
	X(MEMOIZE, 0x94, OK)                \
	X(FRAME, 0x95, OK)                  \
	X(BYTEARRAY8, 0x96, OK)             \
	X(NEXT_BUFFER, 0x97, DENY)          \
	X(READONLY_BUFFER, 0x98, DENY)

enum op {
#define OP_ENUM(name, byte, class) OP_##name = byte,
	PICKLE_OPS(OP_ENUM)
#undef OP_ENUM
};

/* Zero (unknown) for bytes that are no opcode. */
enum op_class { UNKNOWN, OK, DENY, NOSUP };

static const char *const op_names[256] = {
#define OP_NAME(name, byte, class) [byte] = #name,
	PICKLE_OPS(OP_NAME)
#undef OP_NAME
};

static const unsigned char op_classes[256] = {
#define OP_CLASS(name, byte, class) [byte] = class,
	PICKLE_OPS(OP_CLASS)
#undef OP_CLASS
};

enum box_kind { BOX_LIST, BOX_DICT, BOX_TUPLE, BOX_SET, BOX_FROZENSET };

static const char *const box_names[] = {
	[BOX_LIST] = "list", [BOX_DICT] = "dict", [BOX_TUPLE] = "tuple",
	[BOX_SET] = "set", [BOX_FROZENSET] = "frozenset",
};

/* What the decoder knows of a container it built. */
struct box {
	/* Values in the container written out in full, shared parts repeated. */
	uint64_t size;
	uint32_t height;	/* levels of containers, itself included */
	uint8_t kind;		/* enum box_kind */
	bool sealed;		/* inside another container: no longer changeable */
};

/* Entries in the cache of ints. */
#define INT_CACHE_BITS 8
#define INT_CACHE (1 << INT_CACHE_BITS)

/* A reference held by the stack or the memo. */
struct slot {
	json_t *v;
	uint32_t box;		/* index into boxes for a container, 0 otherwise */
};

struct unpickler {
	const unsigned char *buf;
	size_t len;
	size_t pos;		/* next byte to read */
	size_t at;		/* offset of the opcode being decoded */
	unsigned char op;

	struct slot *stack;
	size_t nstack, stack_cap;
	uint32_t *marks;	/* stack lengths at each MARK */
	size_t nmarks, marks_cap;
	struct slot *memo;
	size_t nmemo, memo_cap;
	struct box *boxes;	/* boxes[0] is unused: box 0 means "no box" */
	size_t nboxes, boxes_cap;

	/*
	 * Bytes that dict keys may still copy. jansson copies every key into
	 * its object, so a long string shared through the memo and used as
	 * the key of many dicts would otherwise turn a small input into a
	 * large allocation.
	 */
	size_t key_budget;

	/*
	 * The largest size (see struct box) of a container. Sharing through
	 * the memo lets a few bytes stand for a tree of exponential size
	 * (x = [x, x] forty times); walking it, as json_dumps() or any
	 * recursive reader does, would never end.
	 */
	uint64_t size_max;

	/*
	 * Recently made ints by value, shared rather than made again: each
	 * entry of a dump repeats the same timeout, thread id, small sizes
	 * and zeros, and every json_integer() is a malloc.
	 */
	struct {
		int64_t v;
		json_t *j;
	} ints[INT_CACHE];

	char *err;
	size_t errlen;
	int errnum;
};

/* Decimal digits of the largest int accepted: 8 * FR_PICKLE_LONG_MAX * log10(2). */
#define LONG_DIGITS_MAX 2467

/* Values written out allowed per input byte, and in any case. */
#define SIZE_RATIO 64
#define SIZE_MIN (1u << 20)

/* Key bytes allowed per input byte, and in any case. */
#define KEY_BUDGET_RATIO 32
#define KEY_BUDGET_MIN (1u << 20)

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
	n = snprintf(u->err, u->errlen, "offset %zu: ", u->at);
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

/* The next n bytes of argument, or NULL (and an error) when there are fewer. */
static inline const unsigned char *take(struct unpickler *u, size_t n)
{
	const unsigned char *p;

	if (n > u->len - u->pos) {
		fail(u, EPROTO, "truncated %s (needed %zu bytes, %zu left)",
		     op_name(u->op), n, u->len - u->pos);
		return NULL;
	}
	p = u->buf + u->pos;
	u->pos += n;
	return p;
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* A length argument of 1, 4 or 8 bytes, checked against what is left. */
static int take_len(struct unpickler *u, size_t width, size_t *n)
{
	const unsigned char *p = take(u, width);
	uint64_t v;

	if (!p)
		return -1;
	v = width == 1 ? p[0] : width == 4 ? le32(p) : le64(p);
	if (v > u->len - u->pos)
		return fail(u, EPROTO, "truncated %s (needed %" PRIu64 " bytes, %zu left)",
			    op_name(u->op), v, u->len - u->pos);
	*n = (size_t)v;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Stack, marks and memo                                               */
/* ------------------------------------------------------------------ */

/* push() when v is NULL or the stack is full. */
__attribute__((noinline))
static int push_slow(struct unpickler *u, json_t *v, uint32_t box)
{
	struct slot *s;

	if (!v)
		return fail_nomem(u);
	s = grow(u->stack, &u->stack_cap, sizeof(*s));
	if (!s) {
		json_decref(v);
		return fail_nomem(u);
	}
	u->stack = s;
	u->stack[u->nstack].v = v;
	u->stack[u->nstack].box = box;
	u->nstack++;
	return 0;
}

/* Pushes a reference, which the stack takes over (also on failure). */
static inline int push(struct unpickler *u, json_t *v, uint32_t box)
{
	if (__builtin_expect(!v || u->nstack == u->stack_cap, 0))
		return push_slow(u, v, box);
	u->stack[u->nstack].v = v;
	u->stack[u->nstack].box = box;
	u->nstack++;
	return 0;
}

/* A new box for a container of `kind`; 0 (and an error) on failure. */
static uint32_t new_box(struct unpickler *u, enum box_kind kind)
{
	if (u->nboxes == u->boxes_cap) {
		struct box *b;

		if (u->nboxes >= UINT32_MAX) {
			fail(u, EPROTO, "more than %u containers", UINT32_MAX - 1);
			return 0;
		}
		b = grow(u->boxes, &u->boxes_cap, sizeof(*b));
		if (!b) {
			fail_nomem(u);
			return 0;
		}
		u->boxes = b;
	}
	u->boxes[u->nboxes].size = 1;
	u->boxes[u->nboxes].height = 1;
	u->boxes[u->nboxes].kind = (uint8_t)kind;
	u->boxes[u->nboxes].sealed = false;
	return (uint32_t)u->nboxes++;
}

/* Pushes a new empty container (a reference the stack takes over). */
static int push_box(struct unpickler *u, json_t *v, enum box_kind kind)
{
	uint32_t box;

	if (!v)
		return fail_nomem(u);
	box = new_box(u, kind);
	if (!box) {
		json_decref(v);
		return -1;
	}
	return push(u, v, box);
}

/* The stack length at the topmost mark: plain opcodes see only what is above. */
static size_t fence(const struct unpickler *u)
{
	return u->nmarks ? u->marks[u->nmarks - 1] : 0;
}

/* Checks that n items stand above the topmost mark. */
static int need(struct unpickler *u, size_t n)
{
	size_t have = u->nstack - fence(u);

	if (have < n)
		return fail(u, EPROTO, "stack underflow: %s needs %zu item%s, %zu above the %s",
			    op_name(u->op), n, n == 1 ? "" : "s", have,
			    u->nmarks ? "last MARK" : "bottom");
	return 0;
}

/* Removes the topmost mark; *at receives the stack length it recorded. */
static int pop_mark(struct unpickler *u, size_t *at)
{
	if (!u->nmarks)
		return fail(u, EPROTO, "%s without a MARK", op_name(u->op));
	*at = u->marks[--u->nmarks];
	return 0;
}

/* Drops the stack's items from index `from` up. */
static void drop_from(struct unpickler *u, size_t from)
{
	while (u->nstack > from)
		json_decref(u->stack[--u->nstack].v);
}

/*
 * Stores the stack's top under memo key idx. Python and PyTorch number memo
 * keys 0, 1, 2... in the order they store them, so a key beyond the next
 * one is refused: it keeps the memo a dense array no larger than the input.
 */
static int memo_put(struct unpickler *u, uint64_t idx)
{
	struct slot *top;

	if (need(u, 1))
		return -1;
	if (idx > u->nmemo)
		return fail(u, EPROTO, "memo key %" PRIu64 " is out of order (next is %zu)",
			    idx, u->nmemo);
	if (idx == u->nmemo) {
		if (u->nmemo == u->memo_cap) {
			struct slot *m = grow(u->memo, &u->memo_cap, sizeof(*m));

			if (!m)
				return fail_nomem(u);
			u->memo = m;
		}
		u->nmemo++;
	} else {
		json_decref(u->memo[idx].v);
	}
	top = &u->stack[u->nstack - 1];
	u->memo[idx].v = json_incref(top->v);
	u->memo[idx].box = top->box;
	return 0;
}

static inline int memo_get(struct unpickler *u, uint64_t idx)
{
	if (idx >= u->nmemo)
		return fail(u, EPROTO, "memo key %" PRIu64 " is not set", idx);
	return push(u, json_incref(u->memo[idx].v), u->memo[idx].box);
}

/* ------------------------------------------------------------------ */
/* Scalars                                                             */
/* ------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at p, or 0 when there is none. */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
	unsigned c = p[0];

	if (c < 0x80)
		return 1;
	if (c < 0xc2)
		return 0;
	if (c < 0xe0)
		return n >= 2 && (p[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c < 0xf0) {
		if (n < 3 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80)
			return 0;
		/* Overlong forms and UTF-16 surrogates are not UTF-8. */
		if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0))
			return 0;
		return 3;
	}
	if (c < 0xf5) {
		if (n < 4 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 ||
		    (p[3] & 0xc0) != 0x80)
			return 0;
		if ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))
			return 0;
		return 4;
	}
	return 0;
}

static bool utf8_valid(const unsigned char *p, size_t n)
{
	size_t i = 0, k;
	uint64_t w;

	while (i < n) {
		/* Names in dumps are ASCII: take them eight bytes at a time. */
		if (n - i >= 8) {
			memcpy(&w, p + i, 8);
			if (!(w & 0x8080808080808080ull)) {
				i += 8;
				continue;
			}
		}
		if (p[i] < 0x80) {
			i++;
			continue;
		}
		k = utf8_seq(p + i, n - i);
		if (!k)
			return false;
		i += k;
	}
	return true;
}

/*
 * A string from bytes that are not all UTF-8: each byte outside a valid
 * sequence becomes U+FFFD, except that an encoded surrogate (what Python's
 * surrogatepass writes for a lone surrogate) becomes one U+FFFD for its
 * three bytes.
 */
static json_t *text_repaired(struct unpickler *u, const unsigned char *p, size_t n)
{
	char *s, *o;
	size_t i = 0, k;
	json_t *j;

	if (n > SIZE_MAX / 3) {
		fail_nomem(u);
		return NULL;
	}
	s = malloc(3 * n);
	if (!s) {
		fail_nomem(u);
		return NULL;
	}
	o = s;
	while (i < n) {
		k = utf8_seq(p + i, n - i);
		if (k) {
			memcpy(o, p + i, k);
			o += k;
			i += k;
			continue;
		}
		if (p[i] == 0xed && n - i >= 3 && p[i + 1] >= 0xa0 && p[i + 1] <= 0xbf &&
		    (p[i + 2] & 0xc0) == 0x80)
			i += 3;
		else
			i++;
		memcpy(o, "\xef\xbf\xbd", 3);
		o += 3;
	}
	j = json_stringn_nocheck(s, o - s);
	free(s);
	if (!j)
		fail_nomem(u);
	return j;
}

static json_t *text(struct unpickler *u, const unsigned char *p, size_t n)
{
	json_t *j;

	if (!utf8_valid(p, n))
		return text_repaired(u, p, n);
	j = json_stringn_nocheck((const char *)p, n);
	if (!j)
		fail_nomem(u);
	return j;
}

/* Bytes as lowercase hex. */
static json_t *hex(struct unpickler *u, const unsigned char *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	char small[256], *s = small;
	json_t *j;
	size_t i;

	if (n > sizeof(small) / 2) {
		if (n > SIZE_MAX / 2 || !(s = malloc(2 * n))) {
			fail_nomem(u);
			return NULL;
		}
	}
	for (i = 0; i < n; i++) {
		s[2 * i] = digits[p[i] >> 4];
		s[2 * i + 1] = digits[p[i] & 15];
	}
	j = json_stringn_nocheck(s, 2 * n);
	if (s != small)
		free(s);
	if (!j)
		fail_nomem(u);
	return j;
}

static json_t *integer(struct unpickler *u, int64_t v)
{
	/* Fibonacci hashing: the top bits of v times 2^64 / phi. */
	size_t h = (size_t)(((uint64_t)v * 0x9e3779b97f4a7c15ull) >> (64 - INT_CACHE_BITS));
	json_t *j;

	if (u->ints[h].j && u->ints[h].v == v)
		return json_incref(u->ints[h].j);
	j = json_integer(v);
	if (!j) {
		fail_nomem(u);
		return NULL;
	}
	json_decref(u->ints[h].j);
	u->ints[h].v = v;
	u->ints[h].j = json_incref(j);
	return j;
}

static json_t *real(struct unpickler *u, double d)
{
	json_t *j;

	if (isnan(d))
		j = json_string_nocheck("NaN");
	else if (isinf(d))
		j = json_string_nocheck(d > 0 ? "Infinity" : "-Infinity");
	else
		j = json_real(d);
	if (!j)
		fail_nomem(u);
	return j;
}

/*
 * An int from n > 8 bytes of little-endian two's complement that does not
 * fit int64, as decimal text: the magnitude in 32-bit limbs, divided by 10^9
 * until nothing is left.
 */
static json_t *long_text(struct unpickler *u, const unsigned char *p, size_t n)
{
	uint32_t limb[FR_PICKLE_LONG_MAX / 4];
	char digits[LONG_DIGITS_MAX + 16];
	char *d = digits + sizeof(digits);
	bool neg = p[n - 1] & 0x80;
	size_t nl = (n + 3) / 4, i;
	uint64_t carry = 1, cur;
	uint32_t rem;
	json_t *j;
	int k;

	for (i = 0; i < nl; i++)
		limb[i] = 0;
	for (i = 0; i < nl * 4; i++) {
		uint32_t byte = i < n ? p[i] : neg ? 0xff : 0;

		limb[i / 4] |= byte << (8 * (i % 4));
	}
	if (neg) {
		for (i = 0; i < nl; i++) {
			cur = (uint64_t)(uint32_t)~limb[i] + carry;
			limb[i] = (uint32_t)cur;
			carry = cur >> 32;
		}
	}
	while (nl && !limb[nl - 1])
		nl--;
	while (nl) {
		rem = 0;
		for (i = nl; i--;) {
			cur = (uint64_t)rem << 32 | limb[i];
			limb[i] = (uint32_t)(cur / 1000000000u);
			rem = (uint32_t)(cur % 1000000000u);
		}
		while (nl && !limb[nl - 1])
			nl--;
		/* Nine digits per division, except no leading zeros in the last. */
		for (k = 0; k < 9 && (nl || rem); k++) {
			*--d = (char)('0' + rem % 10);
			rem /= 10;
		}
	}
	if (neg)
		*--d = '-';
	j = json_stringn_nocheck(d, digits + sizeof(digits) - d);
	if (!j)
		fail_nomem(u);
	return j;
}

/* An int from LONG1 or LONG4 bytes. */
static json_t *long_bytes(struct unpickler *u, const unsigned char *p, size_t n)
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
		if (i < n)
			return long_text(u, p, n);
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
static json_t *decimal(struct unpickler *u, const char *s, size_t n)
{
	bool neg = false, over = false;
	uint64_t v = 0, limit, digit;
	size_t i = 0, first;
	char buf[LONG_DIGITS_MAX + 2];

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
	if (n - first > LONG_DIGITS_MAX) {
		fail(u, EPROTO, "%s of %zu digits is longer than %d digits",
		     op_name(u->op), n - first, LONG_DIGITS_MAX);
		return NULL;
	}
	i = 0;
	if (neg)
		buf[i++] = '-';
	memcpy(buf + i, s + first, n - first);
	return text(u, (const unsigned char *)buf, i + n - first);
out_bad:
	fail(u, EPROTO, "%s argument \"%.*s\" is not a decimal integer",
	     op_name(u->op), (int)(n > 40 ? 40 : n), s);
	return NULL;
}

/* The argument of a protocol 0 opcode: the text up to the next newline. */
static int take_line(struct unpickler *u, const char **s, size_t *n)
{
	const unsigned char *p = u->buf + u->pos;
	const unsigned char *nl = memchr(p, '\n', u->len - u->pos);

	if (!nl)
		return fail(u, EPROTO, "truncated %s (no end of line)", op_name(u->op));
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
			    op_name(u->op), (int)(n > 40 ? 40 : n), s);
	*idx = v;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Containers                                                          */
/* ------------------------------------------------------------------ */

/* What a stack item is, in Python's words, for messages. */
static const char *describe(const struct unpickler *u, const struct slot *s)
{
	static const char *const boxes[] = {
		[BOX_LIST] = "a list", [BOX_DICT] = "a dict", [BOX_TUPLE] = "a tuple",
		[BOX_SET] = "a set", [BOX_FROZENSET] = "a frozenset",
	};

	if (s->box)
		return boxes[u->boxes[s->box].kind];
	switch (json_typeof(s->v)) {
	case JSON_STRING:
		return "a str";
	case JSON_INTEGER:
		return "an int";
	case JSON_REAL:
		return "a float";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a bool";
	default:
		return "None";
	}
}

/*
 * Accounts for putting `child` into the container of box `parent`: refuses
 * a container inside itself, a nesting deeper than the limit and a size
 * beyond it, and seals the child.
 */
static inline int adopt(struct unpickler *u, uint32_t parent, const struct slot *child)
{
	struct box *b = &u->boxes[parent];
	uint32_t h = 1;
	uint64_t size = 1;

	if (child->box) {
		if (child->box == parent)
			return fail(u, EPROTO, "%s puts a %s inside itself (cycles are refused)",
				    op_name(u->op), box_names[b->kind]);
		u->boxes[child->box].sealed = true;
		h = u->boxes[child->box].height + 1;
		size = u->boxes[child->box].size;
	}
	if (h > b->height) {
		if (h > FR_PICKLE_DEPTH_MAX)
			return fail(u, EPROTO, "containers nested deeper than %d levels",
				    FR_PICKLE_DEPTH_MAX);
		b->height = h;
	}
	/* No overflow: every size is at most size_max < 2^62. */
	b->size += size;
	if (b->size > u->size_max)
		return fail(u, EPROTO, "the data, its shared parts written out in full, "
			    "has more than %" PRIu64 " values (%d per byte of pickle)",
			    u->size_max, SIZE_RATIO);
	return 0;
}

/* Checks that a set or frozenset element is hashable in Python. */
static int hashable(struct unpickler *u, const struct slot *s)
{
	if (s->box && u->boxes[s->box].kind != BOX_TUPLE &&
	    u->boxes[s->box].kind != BOX_FROZENSET)
		return fail(u, EPROTO, "%s uses a %s as a set element or key (unhashable)",
			    op_name(u->op), box_names[u->boxes[s->box].kind]);
	return 0;
}

/* Checks that `target` is a container of kind `kind` that may still change. */
static int changeable(struct unpickler *u, const struct slot *target, enum box_kind kind)
{
	if (!target->box || u->boxes[target->box].kind != kind)
		return fail(u, EPROTO, "%s needs a %s below its items, found %s",
			    op_name(u->op), box_names[kind], describe(u, target));
	if (u->boxes[target->box].sealed)
		return fail(u, EPROTO,
			    "%s changes a %s that is already inside another container "
			    "(refused: that is how pickles write cycles)",
			    op_name(u->op), box_names[kind]);
	return 0;
}

/* Text growing under the key budget, for keys that are tuples. */
struct key_buf {
	struct unpickler *u;
	char *s;
	size_t n, cap;
	bool over;
};

static int key_buf_add(const char *p, size_t n, void *data)
{
	struct key_buf *k = data;
	char *s;

	if (n > k->u->key_budget - k->n) {
		k->over = true;
		return -1;
	}
	if (n > k->cap - k->n) {
		size_t cap = k->cap ? k->cap : 64;

		while (cap - k->n < n)
			cap *= 2;
		s = realloc(k->s, cap);
		if (!s)
			return -1;
		k->s = s;
		k->cap = cap;
	}
	memcpy(k->s + k->n, p, n);
	k->n += n;
	return 0;
}

/* The shortest text that reads back as d, with ".0" on whole numbers as Python writes them. */
static size_t real_text(double d, char *buf, size_t cap)
{
	int prec, n = 0;

	for (prec = 15; prec <= 17; prec++) {
		n = snprintf(buf, cap, "%.*g", prec, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	if (n > 0 && (size_t)n + 2 < cap && !strpbrk(buf, ".e")) {
		memcpy(buf + n, ".0", 3);
		n += 2;
	}
	return n > 0 ? (size_t)n : 0;
}

/*
 * Stores value under key in the dict, taking over both references (also on
 * failure). A key that is not a str is stored under its JSON text.
 */
static int set_item(struct unpickler *u, json_t *dict, struct slot *key, json_t *value)
{
	char small[40];
	struct key_buf kb = { u, NULL, 0, 0, false };
	const char *k = small;
	size_t klen = 0;
	int rc = -1;

	switch (json_typeof(key->v)) {
	case JSON_STRING:
		k = json_string_value(key->v);
		klen = json_string_length(key->v);
		break;
	case JSON_INTEGER:
		klen = snprintf(small, sizeof(small), "%" JSON_INTEGER_FORMAT,
				json_integer_value(key->v));
		break;
	case JSON_REAL:
		klen = real_text(json_real_value(key->v), small, sizeof(small));
		break;
	case JSON_TRUE:
		k = "true";
		klen = 4;
		break;
	case JSON_FALSE:
		k = "false";
		klen = 5;
		break;
	case JSON_NULL:
		k = "null";
		klen = 4;
		break;
	default:
		if (hashable(u, key))
			goto out_drop;
		if (json_dump_callback(key->v, key_buf_add, &kb, JSON_ENCODE_ANY)) {
			if (kb.over)
				fail(u, EPROTO, "dict keys copy more than %d bytes per byte "
				     "of pickle (a long key used many times)", KEY_BUDGET_RATIO);
			else
				fail_nomem(u);
			goto out_drop;
		}
		k = kb.s ? kb.s : "";
		klen = kb.n;
		break;
	}
	if (klen >= u->key_budget) {
		fail(u, EPROTO, "dict keys copy more than %d bytes per byte of pickle "
		     "(a long key used many times)", KEY_BUDGET_RATIO);
		goto out_drop;
	}
	u->key_budget -= klen + 1;
	rc = json_object_setn_new_nocheck(dict, k, klen, value);
	value = NULL;
	if (rc)
		fail_nomem(u);
out_drop:
	json_decref(value);
	json_decref(key->v);
	key->v = NULL;
	free(kb.s);
	return rc;
}

/*
 * Moves the stack's items from index `from` up into the container of box
 * `box` (a list, set, tuple or frozenset: a JSON array), in order.
 */
static int fill_array(struct unpickler *u, json_t *arr, uint32_t box, size_t from)
{
	bool check_hash = u->boxes[box].kind == BOX_SET || u->boxes[box].kind == BOX_FROZENSET;
	size_t i;

	for (i = from; i < u->nstack; i++) {
		if ((check_hash && hashable(u, &u->stack[i])) || adopt(u, box, &u->stack[i]))
			return -1;
		if (json_array_append_new(arr, u->stack[i].v)) {
			u->stack[i].v = NULL;
			return fail_nomem(u);
		}
		u->stack[i].v = NULL;
	}
	u->nstack = from;
	return 0;
}

/* Moves key/value pairs from index `from` up into the dict of box `box`. */
static int fill_dict(struct unpickler *u, json_t *dict, uint32_t box, size_t from)
{
	size_t i;

	if ((u->nstack - from) % 2)
		return fail(u, EPROTO, "%s with an odd number of items (%zu)",
			    op_name(u->op), u->nstack - from);
	for (i = from; i < u->nstack; i += 2) {
		if (adopt(u, box, &u->stack[i + 1]))
			return -1;
		if (set_item(u, dict, &u->stack[i], u->stack[i + 1].v)) {
			u->stack[i + 1].v = NULL;
			return -1;
		}
		u->stack[i + 1].v = NULL;
	}
	u->nstack = from;
	return 0;
}

/* Builds a new container of `kind` from the items above stack index `from`. */
static int build(struct unpickler *u, enum box_kind kind, size_t from)
{
	json_t *c = kind == BOX_DICT ? json_object() : json_array();
	uint32_t box;
	int rc;

	if (!c)
		return fail_nomem(u);
	box = new_box(u, kind);
	if (!box)
		goto out_free;
	if (kind == BOX_DICT)
		rc = fill_dict(u, c, box, from);
	else
		rc = fill_array(u, c, box, from);
	if (rc)
		goto out_free;
	return push(u, c, box);
out_free:
	json_decref(c);
	return -1;
}

/* APPEND(S), SETITEM(S), ADDITEMS: items above `from` into the container below them. */
static int add_to(struct unpickler *u, enum box_kind kind, size_t from)
{
	struct slot *target;

	if (from <= fence(u))
		return fail(u, EPROTO, "stack underflow: %s has no %s below its items",
			    op_name(u->op), box_names[kind]);
	target = &u->stack[from - 1];
	if (changeable(u, target, kind))
		return -1;
	if (kind == BOX_DICT)
		return fill_dict(u, target->v, target->box, from);
	return fill_array(u, target->v, target->box, from);
}

/* ------------------------------------------------------------------ */
/* The machine                                                         */
/* ------------------------------------------------------------------ */

static int run(struct unpickler *u)
{
	const unsigned char *p;
	const char *s;
	size_t n, at;
	uint64_t idx;
	unsigned char c;

	for (;;) {
		u->at = u->pos;
		if (u->pos >= u->len)
			return fail(u, EPROTO, "truncated (the input ends before STOP)");
		c = u->op = u->buf[u->pos++];

		if (op_classes[c] != OK) {
			if (op_classes[c] == DENY)
				return fail(u, EPROTO, "opcode 0x%02x (%s) is not allowed: "
					    "this reader only reads plain data", c, op_names[c]);
			if (op_classes[c] == NOSUP)
				return fail(u, EPROTO, "opcode 0x%02x (%s) is not supported "
					    "(protocol 0 text or Python 2 str)", c, op_names[c]);
			return fail(u, EPROTO, "unknown opcode 0x%02x", c);
		}

		switch ((enum op)c) {
		case OP_NONE:
			if (push(u, json_null(), 0))
				return -1;
			break;
		case OP_NEWTRUE:
			if (push(u, json_true(), 0))
				return -1;
			break;
		case OP_NEWFALSE:
			if (push(u, json_false(), 0))
				return -1;
			break;
		case OP_BININT:
			if (!(p = take(u, 4)) || push(u, integer(u, (int32_t)le32(p)), 0))
				return -1;
			break;
		case OP_BININT1:
			if (!(p = take(u, 1)) || push(u, integer(u, p[0]), 0))
				return -1;
			break;
		case OP_BININT2:
			if (!(p = take(u, 2)) || push(u, integer(u, p[0] | p[1] << 8), 0))
				return -1;
			break;
		case OP_LONG1:
			if (take_len(u, 1, &n) || push(u, long_bytes(u, take(u, n), n), 0))
				return -1;
			break;
		case OP_LONG4:
			if (!(p = take(u, 4)))
				return -1;
			if ((int32_t)le32(p) < 0)
				return fail(u, EPROTO, "LONG4 with a negative length");
			n = le32(p);
			if (n > FR_PICKLE_LONG_MAX)
				return fail(u, EPROTO, "LONG4 of %zu bytes is longer than %d bytes",
					    n, FR_PICKLE_LONG_MAX);
			if (!(p = take(u, n)) || push(u, long_bytes(u, p, n), 0))
				return -1;
			break;
		case OP_INT:
			if (take_line(u, &s, &n))
				return -1;
			/* Protocol 0 writes bools as INT 01 and 00. */
			if (n == 2 && s[0] == '0' && (s[1] == '0' || s[1] == '1')) {
				if (push(u, s[1] == '1' ? json_true() : json_false(), 0))
					return -1;
			} else if (push(u, decimal(u, s, n), 0)) {
				return -1;
			}
			break;
		case OP_LONG:
			if (take_line(u, &s, &n))
				return -1;
			if (n && s[n - 1] == 'L')
				n--;
			if (push(u, decimal(u, s, n), 0))
				return -1;
			break;
		case OP_BINFLOAT: {
			uint64_t bits;
			double d;

			if (!(p = take(u, 8)))
				return -1;
			bits = (uint64_t)p[0] << 56 | (uint64_t)p[1] << 48 | (uint64_t)p[2] << 40 |
			       (uint64_t)p[3] << 32 | (uint64_t)p[4] << 24 | (uint64_t)p[5] << 16 |
			       (uint64_t)p[6] << 8 | p[7];
			memcpy(&d, &bits, sizeof(d));
			if (push(u, real(u, d), 0))
				return -1;
			break;
		}
		case OP_SHORT_BINUNICODE:
		case OP_BINUNICODE:
		case OP_BINUNICODE8:
			if (take_len(u, c == OP_SHORT_BINUNICODE ? 1 : c == OP_BINUNICODE ? 4 : 8, &n))
				return -1;
			p = take(u, n);
			if (push(u, text(u, p, n), 0))
				return -1;
			break;
		case OP_SHORT_BINBYTES:
		case OP_BINBYTES:
		case OP_BINBYTES8:
		case OP_BYTEARRAY8:
			if (take_len(u, c == OP_SHORT_BINBYTES ? 1 : c == OP_BINBYTES ? 4 : 8, &n))
				return -1;
			p = take(u, n);
			if (push(u, hex(u, p, n), 0))
				return -1;
			break;

		case OP_EMPTY_LIST:
			if (push_box(u, json_array(), BOX_LIST))
				return -1;
			break;
		case OP_EMPTY_DICT:
			if (push_box(u, json_object(), BOX_DICT))
				return -1;
			break;
		case OP_EMPTY_TUPLE:
			if (push_box(u, json_array(), BOX_TUPLE))
				return -1;
			break;
		case OP_EMPTY_SET:
			if (push_box(u, json_array(), BOX_SET))
				return -1;
			break;

		case OP_MARK:
			if (u->nstack > UINT32_MAX)
				return fail(u, EPROTO, "stack deeper than %u items", UINT32_MAX);
			if (u->nmarks == u->marks_cap) {
				uint32_t *m = grow(u->marks, &u->marks_cap, sizeof(*m));

				if (!m)
					return fail_nomem(u);
				u->marks = m;
			}
			u->marks[u->nmarks++] = (uint32_t)u->nstack;
			break;
		case OP_POP:
			if (u->nstack > fence(u))
				drop_from(u, u->nstack - 1);
			else if (u->nmarks)
				u->nmarks--;
			else
				return need(u, 1);
			break;
		case OP_POP_MARK:
			if (pop_mark(u, &at))
				return -1;
			drop_from(u, at);
			break;
		case OP_DUP:
			if (need(u, 1))
				return -1;
			if (push(u, json_incref(u->stack[u->nstack - 1].v), u->stack[u->nstack - 1].box))
				return -1;
			break;

		case OP_APPEND:
		case OP_SETITEM:
			n = c == OP_APPEND ? 1 : 2;
			if (need(u, n + 1) ||
			    add_to(u, c == OP_APPEND ? BOX_LIST : BOX_DICT, u->nstack - n))
				return -1;
			break;
		case OP_APPENDS:
		case OP_SETITEMS:
		case OP_ADDITEMS:
			if (pop_mark(u, &at) ||
			    add_to(u, c == OP_APPENDS ? BOX_LIST : c == OP_SETITEMS ? BOX_DICT : BOX_SET, at))
				return -1;
			break;
		case OP_TUPLE1:
		case OP_TUPLE2:
		case OP_TUPLE3:
			n = c - OP_TUPLE1 + 1;
			if (need(u, n) || build(u, BOX_TUPLE, u->nstack - n))
				return -1;
			break;
		case OP_TUPLE:
		case OP_LIST:
		case OP_DICT:
		case OP_FROZENSET:
			if (pop_mark(u, &at) ||
			    build(u, c == OP_TUPLE ? BOX_TUPLE : c == OP_LIST ? BOX_LIST :
				  c == OP_DICT ? BOX_DICT : BOX_FROZENSET, at))
				return -1;
			break;

		case OP_MEMOIZE:
			if (memo_put(u, u->nmemo))
				return -1;
			break;
		case OP_BINPUT:
			if (!(p = take(u, 1)) || memo_put(u, p[0]))
				return -1;
			break;
		case OP_LONG_BINPUT:
			if (!(p = take(u, 4)) || memo_put(u, le32(p)))
				return -1;
			break;
		case OP_PUT:
			if (take_line_key(u, &idx) || memo_put(u, idx))
				return -1;
			break;
		case OP_BINGET:
			if (!(p = take(u, 1)) || memo_get(u, p[0]))
				return -1;
			break;
		case OP_LONG_BINGET:
			if (!(p = take(u, 4)) || memo_get(u, le32(p)))
				return -1;
			break;
		case OP_GET:
			if (take_line_key(u, &idx) || memo_get(u, idx))
				return -1;
			break;

		case OP_PROTO:
			if (!(p = take(u, 1)))
				return -1;
			if (p[0] > 5)
				return fail(u, EPROTO, "protocol %u unknown", p[0]);
			break;
		case OP_FRAME:
			/* Frames only help a streaming reader; check the length and go on. */
			if (take_len(u, 8, &n))
				return -1;
			break;
		case OP_STOP:
			if (u->nmarks)
				return fail(u, EPROTO, "STOP with %zu MARK%s open",
					    u->nmarks, u->nmarks == 1 ? "" : "s");
			if (u->nstack != 1)
				return fail(u, EPROTO, "STOP with %zu items on the stack (expected 1)",
					    u->nstack);
			if (u->pos != u->len) {
				u->at = u->pos;
				return fail(u, EPROTO, "%zu bytes after STOP", u->len - u->pos);
			}
			return 0;
		default:
			/* The class table and this switch disagree. */
			return fail(u, EPROTO, "opcode 0x%02x (%s) not handled", c, op_name(c));
		}
	}
}

bool fr_pickle_sniff(const void *buf, size_t len)
{
	const unsigned char *p = buf;

	return len >= 2 && p[0] == OP_PROTO && p[1] >= 2 && p[1] <= 5;
}

json_t *fr_pickle_load(const void *buf, size_t len, char *err, size_t errlen)
{
	struct unpickler u = {
		.buf = buf,
		.len = len,
		.err = err,
		.errlen = errlen,
	};
	json_t *root = NULL;
	size_t i;

	if (err && errlen)
		err[0] = '\0';
	if (len > (SIZE_MAX - KEY_BUDGET_MIN) / KEY_BUDGET_RATIO)
		u.key_budget = SIZE_MAX;
	else
		u.key_budget = len * KEY_BUDGET_RATIO + KEY_BUDGET_MIN;
	if (len > ((1ull << 62) - SIZE_MIN) / SIZE_RATIO)
		u.size_max = 1ull << 62;
	else
		u.size_max = (uint64_t)len * SIZE_RATIO + SIZE_MIN;

	if (len == 0) {
		fail(&u, EPROTO, "not a pickle (empty input)");
		goto out;
	}
	u.op = u.buf[0];
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
	/* Box 0 stands for "not a container". */
	u.nboxes = 1;
	u.boxes = grow(NULL, &u.boxes_cap, sizeof(*u.boxes));
	if (!u.boxes) {
		fail_nomem(&u);
		goto out;
	}

	if (run(&u) == 0) {
		root = u.stack[0].v;
		u.stack[0].v = NULL;
	}

out:
	for (i = 0; i < u.nstack; i++)
		json_decref(u.stack[i].v);
	for (i = 0; i < u.nmemo; i++)
		json_decref(u.memo[i].v);
	for (i = 0; i < INT_CACHE; i++)
		json_decref(u.ints[i].j);
	free(u.stack);
	free(u.marks);
	free(u.memo);
	free(u.boxes);
	if (!root)
		errno = u.errnum ? u.errnum : EPROTO;
	return root;
}
