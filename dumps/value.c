/*
 * Documents of plain values in an arena, and a JSON parser that builds them
 * (value.h). The parser makes one pass over the text with an explicit stack
 * of open containers, so that deep input costs heap, not C stack; a
 * container's items are gathered on that stack and copied into the arena
 * once, when it closes.
 */
#include "value.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Arena chunks grow from 64 KiB to 4 MiB: a small manifest costs little,
 * a 2048-entry dump (about 5 MiB of values) a handful of mallocs. */
#define CHUNK_MIN (64u << 10)
#define CHUNK_MAX (4u << 20)

struct chunk {
	struct chunk *next;
	size_t size;
	size_t used;
	/* Keeps the data that follows 8-byte aligned. */
	uint64_t data[];
};

struct fr_doc {
	struct chunk *head;
	size_t next_size;
	/* The parser's state, kept from one parse into the document to the
	 * next (with its buffers) once reset: a reader of thousands of small
	 * dumps parses each into the same document. */
	struct fr_json_in *in;
};

struct fr_doc *fr_doc_new(void)
{
	struct fr_doc *d = calloc(1, sizeof(*d));

	if (d)
		d->next_size = CHUNK_MIN;
	return d;
}

static void json_in_free(struct fr_json_in *ps);

void fr_doc_free(struct fr_doc *d)
{
	struct chunk *c, *next;

	if (!d)
		return;
	for (c = d->head; c; c = next) {
		next = c->next;
		free(c);
	}
	json_in_free(d->in);
	free(d);
}

void fr_doc_reset(struct fr_doc *d)
{
	struct chunk *c, *next;

	if (!d->head)
		return;
	/* The newest chunk is the largest: keep it. */
	for (c = d->head->next; c; c = next) {
		next = c->next;
		free(c);
	}
	d->head->next = NULL;
	d->head->used = 0;
}

/* Starts a new chunk with room for `need` bytes, and takes them. */
static void *alloc_slow(struct fr_doc *d, size_t need)
{
	size_t csize = d->next_size;
	struct chunk *c;

	if (need > csize)
		csize = need;
	if (csize > SIZE_MAX - sizeof(*c))
		return NULL;
	c = malloc(sizeof(*c) + csize);
	if (!c)
		return NULL;
	c->size = csize;
	c->used = need;
	c->next = d->head;
	d->head = c;
	if (d->next_size < CHUNK_MAX)
		d->next_size *= 2;
	return c->data;
}

static inline void *alloc(struct fr_doc *d, size_t size)
{
	struct chunk *c = d->head;
	size_t need = (size + 7) & ~(size_t)7;
	void *p;

	if (need < size)
		return NULL;
	if (!c || c->size - c->used < need)
		return alloc_slow(d, need);
	p = (char *)c->data + c->used;
	c->used += need;
	return p;
}

void *fr_doc_alloc(struct fr_doc *d, size_t size)
{
	return alloc(d, size);
}

static struct fr_val *val_new(struct fr_doc *d, enum fr_val_type type)
{
	struct fr_val *v = alloc(d, sizeof(*v));

	if (v) {
		memset(v, 0, sizeof(*v));
		v->type = (uint8_t)type;
	}
	return v;
}

struct fr_val *fr_val_null(struct fr_doc *d)
{
	return val_new(d, FR_VAL_NULL);
}

struct fr_val *fr_val_bool(struct fr_doc *d, bool b)
{
	struct fr_val *v = val_new(d, FR_VAL_BOOL);

	if (v)
		v->u.b = b;
	return v;
}

struct fr_val *fr_val_int(struct fr_doc *d, int64_t i)
{
	struct fr_val *v = val_new(d, FR_VAL_INT);

	if (v)
		v->u.i = i;
	return v;
}

struct fr_val *fr_val_string(struct fr_doc *d, const char *s, size_t n)
{
	struct fr_val *v;
	char *copy;

	if (n > UINT32_MAX)
		return NULL;
	v = val_new(d, FR_VAL_STRING);
	copy = v ? alloc(d, n + 1) : NULL;
	if (!copy)
		return NULL;
	memcpy(copy, s, n);
	copy[n] = '\0';
	v->n = (uint32_t)n;
	v->u.s = copy;
	return v;
}

struct fr_val *fr_val_array(struct fr_doc *d)
{
	return val_new(d, FR_VAL_ARRAY);
}

struct fr_val *fr_val_object(struct fr_doc *d)
{
	return val_new(d, FR_VAL_OBJECT);
}

/*
 * Room for `more` pointers after the first `used` of v->u.items. The old
 * space stays in the arena; doubling keeps the waste below the final size.
 */
static int reserve(struct fr_doc *d, struct fr_val *v, size_t used, size_t more)
{
	size_t cap = v->cap ? v->cap : 4;
	struct fr_val **items;

	if (used + more <= v->cap)
		return 0;
	while (cap < used + more)
		cap *= 2;
	if (cap > UINT32_MAX)
		return -ENOMEM;
	items = alloc(d, cap * sizeof(*items));
	if (!items)
		return -ENOMEM;
	if (used)
		memcpy(items, v->u.items, used * sizeof(*items));
	v->u.items = items;
	v->cap = (uint32_t)cap;
	return 0;
}

int fr_val_append(struct fr_doc *d, struct fr_val *arr, struct fr_val *item)
{
	if (arr->n == UINT32_MAX || reserve(d, arr, arr->n, 1))
		return -ENOMEM;
	arr->u.items[arr->n++] = item;
	return 0;
}

int fr_val_add(struct fr_doc *d, struct fr_val *obj, struct fr_val *key, struct fr_val *val)
{
	size_t used = 2 * (size_t)obj->n;

	if (obj->n >= UINT32_MAX / 2 || reserve(d, obj, used, 2))
		return -ENOMEM;
	obj->u.items[used] = key;
	obj->u.items[used + 1] = val;
	obj->n++;
	return 0;
}

int fr_val_add_str(struct fr_doc *d, struct fr_val *obj, const char *key, struct fr_val *val)
{
	struct fr_val *k = fr_val_string(d, key, strlen(key));

	return k ? fr_val_add(d, obj, k, val) : -ENOMEM;
}

const struct fr_val *fr_val_get(const struct fr_val *obj, const char *key)
{
	size_t n;

	if (!fr_val_is(obj, FR_VAL_OBJECT))
		return NULL;
	n = strlen(key);
	for (size_t i = obj->n; i-- > 0;) {
		const struct fr_val *k = obj->u.items[2 * i];

		if (k->n == n && memcmp(k->u.s, key, n) == 0)
			return obj->u.items[2 * i + 1];
	}
	return NULL;
}

const char *fr_val_type_name(const struct fr_val *v)
{
	if (!v)
		return "nothing";
	switch ((enum fr_val_type)v->type) {
	case FR_VAL_NULL:
		return "null";
	case FR_VAL_BOOL:
		return v->u.b ? "true" : "false";
	case FR_VAL_INT:
		return "an integer";
	case FR_VAL_REAL:
		return "a real number";
	case FR_VAL_STRING:
		return "a string";
	case FR_VAL_ARRAY:
		return "an array";
	case FR_VAL_OBJECT:
		return "an object";
	}
	return "an unknown value";
}

/* Iterative over containers would need a stack; the depth is bounded by
 * the parsers (FR_VAL_DEPTH_MAX), so recursion is bounded too. */
json_t *fr_val_to_json(const struct fr_val *v)
{
	json_t *j = NULL;

	switch ((enum fr_val_type)v->type) {
	case FR_VAL_NULL:
		return json_null();
	case FR_VAL_BOOL:
		return json_boolean(v->u.b);
	case FR_VAL_INT:
		return json_integer(v->u.i);
	case FR_VAL_REAL:
		return json_real(v->u.r);
	case FR_VAL_STRING:
		return json_stringn_nocheck(v->u.s, v->n);
	case FR_VAL_ARRAY:
		j = json_array();
		for (uint32_t i = 0; j && i < v->n; i++) {
			if (json_array_append_new(j, fr_val_to_json(v->u.items[i])) < 0) {
				json_decref(j);
				return NULL;
			}
		}
		return j;
	case FR_VAL_OBJECT:
		j = json_object();
		for (uint32_t i = 0; j && i < v->n; i++) {
			const struct fr_val *k = v->u.items[2 * i];

			if (json_object_setn_new_nocheck(j, k->u.s, k->n,
							 fr_val_to_json(v->u.items[2 * i + 1])) < 0) {
				json_decref(j);
				return NULL;
			}
		}
		return j;
	}
	return NULL;
}

/* ---- JSON ---------------------------------------------------------------- */

/* An open container: where its items start on the parser's item stack. */
struct open {
	struct fr_val *v;
	size_t first;
};

struct fr_json_in {
	struct fr_doc *d;
	const struct fr_json_hook *hook;
	const char *buf;
	const char *p;
	const char *end;
	/* Items of the open containers, innermost last; an object's are key,
	 * value pairs. */
	struct fr_val **items;
	size_t nitems, capitems;
	struct open open[FR_VAL_DEPTH_MAX];
	size_t depth;
	char *err;
	size_t errlen;
	/* Scratch for strings with escapes. */
	char *scratch;
	size_t capscratch;
};


static int perr(struct fr_json_in *ps, const char *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int perr(struct fr_json_in *ps, const char *at, const char *fmt, ...)
{
	size_t line = 1, col = 1;
	va_list ap;
	int n;

	if (!ps->err || !ps->errlen)
		return -EPROTO;
	for (const char *q = ps->buf; q < at; q++) {
		if (*q == '\n') {
			line++;
			col = 1;
		} else if (((unsigned char)*q & 0xc0) != 0x80) {
			col++;
		}
	}
	n = snprintf(ps->err, ps->errlen, "line %zu, column %zu: ", line, col);
	if (n >= 0 && (size_t)n < ps->errlen) {
		va_start(ap, fmt);
		vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -EPROTO;
}

/* What is at `at`, for messages: "'}'", "end of input". */
static const char *seen(const struct fr_json_in *ps, const char *at, char buf[16])
{
	unsigned char c;

	if (at >= ps->end)
		return "end of input";
	c = (unsigned char)*at;
	if (c >= 0x20 && c < 0x7f)
		snprintf(buf, 16, "'%c'", c);
	else
		snprintf(buf, 16, "byte 0x%02x", c);
	return buf;
}

static inline void skip_ws(struct fr_json_in *ps)
{
	const char *p = ps->p;

	while (p < ps->end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r'))
		p++;
	ps->p = p;
}

static int push_item(struct fr_json_in *ps, struct fr_val *v)
{
	if (ps->nitems == ps->capitems) {
		size_t ncap = ps->capitems ? ps->capitems * 2 : 256;
		struct fr_val **n = realloc(ps->items, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		ps->items = n;
		ps->capitems = ncap;
	}
	ps->items[ps->nitems++] = v;
	return 0;
}

/* Length of the valid UTF-8 sequence at p (p < end, *p >= 0x80), or 0. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
	size_t n;
	uint32_t cp;

	if (*p >= 0xc2 && *p <= 0xdf)
		n = 2, cp = *p & 0x1f;
	else if (*p >= 0xe0 && *p <= 0xef)
		n = 3, cp = *p & 0x0f;
	else if (*p >= 0xf0 && *p <= 0xf4)
		n = 4, cp = *p & 0x07;
	else
		return 0;
	if ((size_t)(end - p) < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	/* Overlong forms, surrogates and code points past U+10FFFF. */
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

static int hex4(const char *p, uint32_t *out)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++) {
		char c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (uint32_t)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

static size_t utf8_put(char *o, uint32_t cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Makes `v` the string s[0..n), copied into the document. */
static inline int set_string(struct fr_doc *d, struct fr_val *v, const char *s, size_t n)
{
	char *copy;

	if (n > UINT32_MAX || !(copy = alloc(d, n + 1)))
		return -ENOMEM;
	memcpy(copy, s, n);
	copy[n] = '\0';
	v->type = FR_VAL_STRING;
	v->n = (uint32_t)n;
	v->u.s = copy;
	return 0;
}

/*
 * A string whose opening quote is at ps->p - 1, when the fast scan stopped
 * at `q` on an escape or a non-ASCII byte: decoded into scratch (it never
 * grows: an escape is at least as long as what it stands for).
 */
static int string_slow(struct fr_json_in *ps, const char *q, struct fr_val *out)
{
	const char *start = ps->p, *r;
	size_t need;
	char *o;

	/* Room for the string as written, which its decoding never exceeds
	 * (an escape is at least as long as what it stands for). */
	for (r = q; r < ps->end && *r != '"'; r++)
		if (*r == '\\')
			r++;
	need = (size_t)((r < ps->end ? r : ps->end) - start);

	if (need + 1 > ps->capscratch) {
		char *s = realloc(ps->scratch, need + 1);

		if (!s)
			return -ENOMEM;
		ps->scratch = s;
		ps->capscratch = need + 1;
	}
	memcpy(ps->scratch, start, (size_t)(q - start));
	o = ps->scratch + (q - start);
	for (;;) {
		unsigned char c;

		if (q >= ps->end)
			return perr(ps, q, "unterminated string");
		c = (unsigned char)*q;
		if (c == '"')
			break;
		if (c < 0x20)
			return perr(ps, q, "control character 0x%02x in a string (write it as "
				    "\\u%04x)", c, c);
		if (c >= 0x80) {
			size_t n = utf8_len((const unsigned char *)q, (const unsigned char *)ps->end);

			if (!n)
				return perr(ps, q, "invalid UTF-8 in a string");
			memcpy(o, q, n);
			o += n;
			q += n;
			continue;
		}
		if (c != '\\') {
			*o++ = (char)c;
			q++;
			continue;
		}
		if (q + 1 >= ps->end)
			return perr(ps, q, "unterminated string");
		switch (q[1]) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u': {
			uint32_t cp, lo;

			if (ps->end - q < 6 || hex4(q + 2, &cp))
				return perr(ps, q, "\\u must be followed by four hex digits");
			if (cp >= 0xdc00 && cp <= 0xdfff)
				return perr(ps, q, "lone low surrogate \\u%04" PRIx32, cp);
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (ps->end - q < 12 || q[6] != '\\' || q[7] != 'u' ||
				    hex4(q + 8, &lo) || lo < 0xdc00 || lo > 0xdfff)
					return perr(ps, q, "high surrogate \\u%04" PRIx32
						    " without a low one after it", cp);
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				q += 6;
			}
			if (cp == 0)
				return perr(ps, q, "\\u0000 is not allowed in a string");
			o += utf8_put(o, cp);
			q += 6;
			continue;
		}
		default:
			return perr(ps, q, "invalid escape '\\%c' in a string",
				    q[1] >= 0x20 && q[1] < 0x7f ? q[1] : '?');
		}
		q += 2;
	}
	ps->p = q + 1;
	return set_string(ps->d, out, ps->scratch, (size_t)(o - ps->scratch));
}

/* A string; ps->p is just past its opening quote. */
static int string(struct fr_json_in *ps, struct fr_val *out)
{
	const char *s = ps->p;
	size_t n;
	const char *q = fr_json_plain_string(s, ps->end, &n);

	if (q) {
		ps->p = q;
		return set_string(ps->d, out, s, n);
	}
	return string_slow(ps, s + n, out);
}

static int number(struct fr_json_in *ps, struct fr_val *out)
{
	const char *start = ps->p, *q = ps->p;
	bool neg = false, real = false;
	uint64_t u = 0;
	bool overflow = false;

	if (q < ps->end && *q == '-') {
		neg = true;
		q++;
	}
	if (q >= ps->end || *q < '0' || *q > '9')
		return perr(ps, start, "invalid number");
	if (*q == '0' && q + 1 < ps->end && q[1] >= '0' && q[1] <= '9')
		return perr(ps, start, "invalid number (a leading zero)");
	q = fr_scan_digits(q, ps->end, &u, &overflow);
	if (q < ps->end && *q == '.') {
		real = true;
		q++;
		if (q >= ps->end || *q < '0' || *q > '9')
			return perr(ps, start, "invalid number (no digit after '.')");
		while (q < ps->end && *q >= '0' && *q <= '9')
			q++;
	}
	if (q < ps->end && (*q == 'e' || *q == 'E')) {
		real = true;
		q++;
		if (q < ps->end && (*q == '+' || *q == '-'))
			q++;
		if (q >= ps->end || *q < '0' || *q > '9')
			return perr(ps, start, "invalid number (no digit in the exponent)");
		while (q < ps->end && *q >= '0' && *q <= '9')
			q++;
	}
	ps->p = q;
	if (!real) {
		if (overflow || u > (uint64_t)INT64_MAX + neg)
			return perr(ps, start, "integer %.*s does not fit in 64 bits",
				    (int)(q - start > 40 ? 40 : q - start), start);
		out->type = FR_VAL_INT;
		out->u.i = neg ? (int64_t)(0 - u) : (int64_t)u;
	} else {
		char text[64];
		double r;

		if ((size_t)(q - start) >= sizeof(text))
			return perr(ps, start, "real number longer than %zu characters",
				    sizeof(text) - 1);
		memcpy(text, start, (size_t)(q - start));
		text[q - start] = '\0';
		r = strtod(text, NULL);
		if (isinf(r))
			return perr(ps, start, "real number %s is out of range", text);
		out->type = FR_VAL_REAL;
		out->u.r = r;
	}
	return 0;
}

static int literal(struct fr_json_in *ps, struct fr_val *out)
{
	size_t left = (size_t)(ps->end - ps->p);

	if (left >= 4 && memcmp(ps->p, "true", 4) == 0) {
		ps->p += 4;
		out->type = FR_VAL_BOOL;
		out->u.b = true;
	} else if (left >= 5 && memcmp(ps->p, "false", 5) == 0) {
		ps->p += 5;
		out->type = FR_VAL_BOOL;
		out->u.b = false;
	} else if (left >= 4 && memcmp(ps->p, "null", 4) == 0) {
		ps->p += 4;
		out->type = FR_VAL_NULL;
	} else {
		char b[16];

		return perr(ps, ps->p, "expected a value, got %s", seen(ps, ps->p, b));
	}
	return 0;
}

/* A cheap hash of a key, for the duplicate check. */
static inline unsigned key_bit(const struct fr_val *k)
{
	unsigned h = k->n * 31u;

	if (k->n)
		h += (unsigned char)k->u.s[0] * 7u + (unsigned char)k->u.s[k->n - 1];
	return h & 255;
}

static int cmp_keys(const void *a, const void *b)
{
	const struct fr_val *x = *(const struct fr_val *const *)a;
	const struct fr_val *y = *(const struct fr_val *const *)b;

	if (x->n != y->n)
		return x->n < y->n ? -1 : 1;
	return memcmp(x->u.s, y->u.s, x->n);
}

/* Objects up to this many members are checked by the filter below; larger
 * ones (which fill it) by sorting their keys. */
#define DUP_FILTER_MAX 32

/*
 * Refuses an object with two members of one name: it would mean two
 * things. keys[0], keys[stride], ... are the n keys. In a small object a
 * 256-bit filter of the keys seen lets most keys through with no
 * comparison at all, and only a key whose bit is taken is compared with
 * the keys before it; a large one, where that would be quadratic, is
 * checked by sorting a copy of its keys.
 */
static int check_duplicates(struct fr_json_in *ps, struct fr_val *const *keys, size_t n,
			    size_t stride, const char *at)
{
	uint64_t seen_bits[4] = { 0 };
	const struct fr_val *dup = NULL;

	if (n > DUP_FILTER_MAX) {
		const struct fr_val **sorted = malloc(n * sizeof(*sorted));

		if (!sorted)
			return -ENOMEM;
		for (size_t i = 0; i < n; i++)
			sorted[i] = keys[i * stride];
		qsort(sorted, n, sizeof(*sorted), cmp_keys);
		for (size_t i = 1; i < n && !dup; i++)
			if (cmp_keys(&sorted[i - 1], &sorted[i]) == 0)
				dup = sorted[i];
		free(sorted);
	}
	for (size_t i = 0; i < n && n <= DUP_FILTER_MAX && !dup; i++) {
		const struct fr_val *k = keys[i * stride];
		unsigned b = key_bit(k);

		if (seen_bits[b >> 6] & (1ull << (b & 63))) {
			for (size_t j = 0; j < i && !dup; j++) {
				const struct fr_val *o = keys[j * stride];

				if (o->n == k->n && memcmp(o->u.s, k->u.s, k->n) == 0)
					dup = k;
			}
		}
		seen_bits[b >> 6] |= 1ull << (b & 63);
	}
	if (dup)
		return perr(ps, at, "duplicate key \"%.64s\" in the object that ends here",
			    dup->u.s);
	return 0;
}

/* Closes the innermost container, which ends at ps->p. */
static int close_container(struct fr_json_in *ps)
{
	struct open *o = &ps->open[--ps->depth];
	size_t n = ps->nitems - o->first;
	struct fr_val *v = o->v;
	int rc;

	if (v->type == FR_VAL_OBJECT &&
	    (rc = check_duplicates(ps, ps->items + o->first, n / 2, 2, ps->p)))
		return rc;
	if (n) {
		v->u.items = alloc(ps->d, n * sizeof(*v->u.items));
		if (!v->u.items)
			return -ENOMEM;
		memcpy(v->u.items, ps->items + o->first, n * sizeof(*v->u.items));
	}
	if (n > UINT32_MAX)
		return -ENOMEM;
	v->n = (uint32_t)(v->type == FR_VAL_OBJECT ? n / 2 : n);
	v->cap = (uint32_t)n;
	ps->nitems = o->first;
	ps->p++;
	return 0;
}

/*
 * Reads the array at ps->p and checks it as parse() would, building none
 * of it: for values a reader drops. An object inside one is parsed (for
 * its duplicate-key check) into the current document.
 */
static int parse(struct fr_json_in *ps, size_t base, struct fr_val **out);
static inline int scalar(struct fr_json_in *ps, struct fr_val *v);

static int skip_array(struct fr_json_in *ps)
{
	size_t levels = 0;
	struct fr_val dummy;
	char b[16];
	int rc;

	do {
		/* A value; at the start, the array itself. */
		skip_ws(ps);
		if (ps->p >= ps->end)
			return perr(ps, ps->p, "expected a value, got end of input");
		if (*ps->p == '[') {
			if (ps->depth + levels >= FR_VAL_DEPTH_MAX)
				return perr(ps, ps->p, "nested deeper than %d", FR_VAL_DEPTH_MAX);
			ps->p++;
			levels++;
			skip_ws(ps);
			if (ps->p >= ps->end || *ps->p != ']')
				continue;
			ps->p++;
			levels--;
		} else if (*ps->p == '{') {
			struct fr_val *o;

			/* The arrays open here count towards its depth. */
			ps->depth += levels;
			rc = parse(ps, ps->depth, &o);
			ps->depth -= levels;
			if (rc)
				return rc;
		} else if ((rc = scalar(ps, &dummy))) {
			return rc;
		}
		/* What follows a value: the next one, or the arrays it ends. */
		while (levels) {
			skip_ws(ps);
			if (ps->p < ps->end && *ps->p == ',') {
				ps->p++;
				break;
			}
			if (ps->p < ps->end && *ps->p == ']') {
				ps->p++;
				levels--;
				continue;
			}
			return perr(ps, ps->p, "expected ',' or ']' in an array, got %s",
				    seen(ps, ps->p, b));
		}
	} while (levels);
	return 0;
}

/* A string, number, true, false or null at ps->p (white space skipped)
 * into `v`. */
static inline int scalar(struct fr_json_in *ps, struct fr_val *v)
{
	switch (*ps->p) {
	case '"':
		ps->p++;
		return string(ps, v);
	case '-':
	case '0' ... '9':
		return number(ps, v);
	default:
		return literal(ps, v);
	}
}

/*
 * Parses one value at ps->p into *out: the containers it opens are above
 * depth `base`, and it returns when the value is complete. Each turn of the
 * loop reads one value, then what follows it in its container.
 */
static int parse(struct fr_json_in *ps, size_t base, struct fr_val **out)
{
	char b[16];
	struct fr_val *v;
	int rc;

	for (;;) {
		skip_ws(ps);
		if (ps->p >= ps->end)
			return perr(ps, ps->p, "expected a value, got end of input");
		switch (*ps->p) {
		case '{':
		case '[':
			if (ps->depth == FR_VAL_DEPTH_MAX)
				return perr(ps, ps->p, "nested deeper than %d", FR_VAL_DEPTH_MAX);
			v = *ps->p == '{' ? fr_val_object(ps->d) : fr_val_array(ps->d);
			if (!v)
				return -ENOMEM;
			ps->p++;
			skip_ws(ps);
			if (ps->p < ps->end && *ps->p == (v->type == FR_VAL_OBJECT ? '}' : ']')) {
				ps->p++;
				goto deliver;
			}
			ps->open[ps->depth++] = (struct open){ v, ps->nitems };
			if (v->type == FR_VAL_ARRAY)
				continue;
			goto key;
		default:
			if (!(v = val_new(ps->d, FR_VAL_NULL)))
				return -ENOMEM;
			rc = scalar(ps, v);
			break;
		}
		if (rc)
			return rc;
deliver:
		/* Hand the finished value to its container, closing every
		 * container that ends after it. */
		for (;;) {
			struct open *o;
			char close;

			if (ps->depth == base) {
				*out = v;
				return 0;
			}
			if ((rc = push_item(ps, v)))
				return rc;
			o = &ps->open[ps->depth - 1];
			close = o->v->type == FR_VAL_OBJECT ? '}' : ']';
			skip_ws(ps);
			if (ps->p < ps->end && *ps->p == ',') {
				ps->p++;
				if (o->v->type == FR_VAL_OBJECT)
					goto key;
				break;
			}
			if (ps->p < ps->end && *ps->p == close) {
				v = o->v;
				if ((rc = close_container(ps)))
					return rc;
				continue;
			}
			return perr(ps, ps->p, "expected ',' or '%c' in %s, got %s", close,
				    close == '}' ? "an object" : "an array", seen(ps, ps->p, b));
		}
		continue;
key:
		/* An object member: its key and colon; its value is next. */
		skip_ws(ps);
		if (ps->p >= ps->end || *ps->p != '"')
			return perr(ps, ps->p, "expected a string key, got %s", seen(ps, ps->p, b));
		ps->p++;
		if (!(v = val_new(ps->d, FR_VAL_NULL)))
			return -ENOMEM;
		if ((rc = string(ps, v)) || (rc = push_item(ps, v)))
			return rc;
		skip_ws(ps);
		if (ps->p >= ps->end || *ps->p != ':')
			return perr(ps, ps->p, "expected ':' after an object key, got %s",
				    seen(ps, ps->p, b));
		ps->p++;
		if (ps->hook && ps->depth == 1 && base == 0 && strcmp(v->u.s, ps->hook->key) == 0) {
			/* The hook reads the value; the tree gets a null in
			 * its place, which still counts for duplicates. */
			if ((rc = ps->hook->read(ps, ps->hook->arg)))
				return rc;
			if (!(v = fr_val_null(ps->d)))
				return -ENOMEM;
			goto deliver;
		}
	}
}

int fr_json_value(struct fr_json_in *ps, struct fr_doc *d, struct fr_val **out)
{
	struct fr_doc *outer = ps->d;
	int rc;

	ps->d = d;
	rc = parse(ps, ps->depth, out);
	ps->d = outer;
	return rc;
}

const char *fr_json_cursor(const struct fr_json_in *ps, const char **end)
{
	*end = ps->end;
	return ps->p;
}

void fr_json_set_cursor(struct fr_json_in *ps, const char *p)
{
	assert(p >= ps->p && p <= ps->end);
	ps->p = p;
}

char fr_json_peek(struct fr_json_in *ps)
{
	skip_ws(ps);
	return ps->p < ps->end ? *ps->p : '\0';
}

bool fr_json_accept(struct fr_json_in *ps, char c)
{
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == c) {
		ps->p++;
		return true;
	}
	return false;
}

int fr_json_expect(struct fr_json_in *ps, char c, const char *what)
{
	char b[16];

	if (fr_json_accept(ps, c))
		return 0;
	return perr(ps, ps->p, "expected %s, got %s", what, seen(ps, ps->p, b));
}

static inline bool key_is(struct fr_json_in *ps, const char *key, size_t n)
{
	const char *p = ps->p;

	/* "key": as a compact writer puts it; anything else takes the
	 * general path. */
	if ((size_t)(ps->end - p) < n + 3 || p[0] != '"' || p[n + 1] != '"' || p[n + 2] != ':' ||
	    !fr_same_bytes(p + 1, key, n))
		return false;
	ps->p = p + n + 3;
	return true;
}

/* Keeps key `k` of a member the caller does not know, for the duplicate
 * check at the end of its object. */
static int keep_unknown(struct fr_json_in *ps, struct fr_val ***keys, size_t *n, size_t *cap,
			const struct fr_val *k)
{
	struct fr_val *copy = val_new(ps->d, FR_VAL_STRING);

	if (!copy)
		return -ENOMEM;
	*copy = *k;
	if (*n == *cap) {
		size_t ncap = *cap ? 2 * *cap : 8;
		struct fr_val **a = realloc(*keys, ncap * sizeof(*a));

		if (!a)
			return -ENOMEM;
		*keys = a;
		*cap = ncap;
	}
	(*keys)[(*n)++] = copy;
	return 0;
}

int fr_json_object(struct fr_json_in *ps, struct fr_doc *d, const struct fr_json_key *keys,
		   int nkeys, struct fr_val *vals, uint64_t *present)
{
	struct fr_doc *outer = ps->d;
	struct fr_val **unknown = NULL;
	size_t nunknown = 0, capunknown = 0;
	int guess = 0;
	char b[16];
	int rc = 0;

	*present = 0;
	skip_ws(ps);
	if (ps->p >= ps->end || *ps->p != '{')
		return perr(ps, ps->p, "expected an object, got %s", seen(ps, ps->p, b));
	if (ps->depth == FR_VAL_DEPTH_MAX)
		return perr(ps, ps->p, "nested deeper than %d", FR_VAL_DEPTH_MAX);
	ps->p++;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == '}') {
		ps->p++;
		return 0;
	}
	/* The object counts towards the depth of what it holds. */
	ps->depth++;
	ps->d = d;
	for (;;) {
		struct fr_val *v;
		int index = -1;

		skip_ws(ps);
		if (guess < nkeys && key_is(ps, keys[guess].key, keys[guess].len)) {
			index = guess;
		} else if (guess + 1 < nkeys && key_is(ps, keys[guess + 1].key, keys[guess + 1].len)) {
			index = guess + 1;
		} else {
			struct fr_val key;

			if (ps->p >= ps->end || *ps->p != '"') {
				rc = perr(ps, ps->p, "expected a string key, got %s",
					  seen(ps, ps->p, b));
				break;
			}
			ps->p++;
			memset(&key, 0, sizeof(key));
			if ((rc = string(ps, &key)))
				break;
			for (int i = 0; i < nkeys; i++) {
				if (keys[i].len == key.n && fr_same_bytes(keys[i].key, key.u.s, key.n)) {
					index = i;
					break;
				}
			}
			if (index < 0 &&
			    (rc = keep_unknown(ps, &unknown, &nunknown, &capunknown, &key)))
				break;
			skip_ws(ps);
			if (ps->p >= ps->end || *ps->p != ':') {
				rc = perr(ps, ps->p, "expected ':' after an object key, got %s",
					  seen(ps, ps->p, b));
				break;
			}
			ps->p++;
		}
		if (index >= 0) {
			if (*present & (1ull << index)) {
				rc = perr(ps, ps->p, "duplicate key \"%s\" in an object", keys[index].key);
				break;
			}
			*present |= 1ull << index;
			guess = index + 1;
			v = &vals[index];
		} else {
			v = &vals[nkeys];
		}
		skip_ws(ps);
		if (ps->p >= ps->end) {
			rc = perr(ps, ps->p, "expected a value, got end of input");
			break;
		}
		if (index >= 0 && keys[index].drop && *ps->p == '[') {
			if ((rc = skip_array(ps)))
				break;
			v->type = FR_VAL_NULL;
		} else if (*ps->p == '{' || *ps->p == '[') {
			struct fr_val *c;

			if ((rc = parse(ps, ps->depth, &c)))
				break;
			*v = *c;
		} else if ((rc = scalar(ps, v))) {
			break;
		}
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == '}') {
			ps->p++;
			/* Members of other keys may not repeat either. */
			if (nunknown > 1)
				rc = check_duplicates(ps, unknown, nunknown, 1, ps->p - 1);
			break;
		}
		rc = perr(ps, ps->p, "expected ',' or '}' in an object, got %s", seen(ps, ps->p, b));
		break;
	}
	free(unknown);
	ps->depth--;
	ps->d = outer;
	return rc;
}

void fr_val_fields(struct fr_val_keymap *map, const struct fr_val *obj,
		   const struct fr_json_key *keys, int nkeys, const struct fr_val **out)
{
	struct fr_val *const *items;
	uint32_t m = 0, n;

	for (int i = 0; i < nkeys; i++)
		out[i] = NULL;
	if (!fr_val_is(obj, FR_VAL_OBJECT))
		return;
	items = obj->u.items;
	n = obj->n;
	/* The members whose keys are where the last object had them. */
	for (; m < n && m < FR_KEYMAP_POSITIONS && map->at[m].key == items[2 * m]; m++)
		if (map->at[m].index >= 0)
			out[map->at[m].index] = items[2 * m + 1];
	for (; m < n; m++) {
		const struct fr_val *k = items[2 * m];
		size_t slot = ((uintptr_t)k >> 3) % (sizeof(map->seen) / sizeof(map->seen[0]));
		int index;

		if (m < FR_KEYMAP_POSITIONS && map->at[m].key == k) {
			index = map->at[m].index;
		} else {
			if (map->seen[slot].key == k) {
				index = map->seen[slot].index;
			} else {
				index = -1;
				for (int i = 0; i < nkeys; i++) {
					if (keys[i].len == k->n &&
					    fr_same_bytes(keys[i].key, k->u.s, k->n)) {
						index = i;
						break;
					}
				}
				map->seen[slot].key = k;
				map->seen[slot].index = index;
			}
			if (m < FR_KEYMAP_POSITIONS) {
				map->at[m].key = k;
				map->at[m].index = index;
			}
		}
		if (index >= 0)
			out[index] = items[2 * m + 1];
	}
}

static void json_in_free(struct fr_json_in *ps)
{
	if (!ps)
		return;
	free(ps->items);
	free(ps->scratch);
	free(ps);
}

int fr_json_parse_with(struct fr_doc *d, const char *buf, size_t len,
		       const struct fr_json_hook *hook, struct fr_val **out, char *err,
		       size_t errlen)
{
	struct fr_json_in *ps = d->in ? d->in : malloc(sizeof(*ps));
	struct fr_val **items = d->in ? ps->items : NULL;
	size_t capitems = d->in ? ps->capitems : 0;
	char *scratch = d->in ? ps->scratch : NULL;
	size_t capscratch = d->in ? ps->capscratch : 0;
	char b[16];
	int rc;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	if (!ps)
		return -ENOMEM;
	/* Taken while in use: a parse into `d` from a hook makes its own. */
	d->in = NULL;
	memset(ps, 0, offsetof(struct fr_json_in, open));
	ps->d = d;
	ps->buf = ps->p = buf;
	ps->end = buf + len;
	ps->hook = hook;
	ps->err = err;
	ps->errlen = errlen;
	ps->depth = 0;
	/* The buffers of the last parse into `d`, if any. */
	ps->items = items;
	ps->capitems = capitems;
	ps->scratch = scratch;
	ps->capscratch = capscratch;
	rc = parse(ps, 0, out);
	if (!rc) {
		skip_ws(ps);
		if (ps->p < ps->end) {
			rc = perr(ps, ps->p, "%s after the end of the document",
				  seen(ps, ps->p, b));
			*out = NULL;
		}
	}
	/* Kept for the next parse into `d` (fr_doc_reset()), freed with it. */
	json_in_free(d->in);
	d->in = ps;
	return rc;
}

int fr_json_parse(struct fr_doc *d, const char *buf, size_t len, struct fr_val **out,
		  char *err, size_t errlen)
{
	return fr_json_parse_with(d, buf, len, NULL, out, err, errlen);
}
