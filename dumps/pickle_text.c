/*
 * The text the pickle reader (pickle.c) makes, apart from its machine:
 * strs checked, or repaired, as UTF-8; ints too long for int64 in decimal;
 * dict keys that are not strs as their JSON text; and one canon string for
 * each text used as a key, found through a hash table or by sorting.
 */
#include "pickle_text.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Strs and long ints                                                  */
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

bool fr_pickle_utf8_valid(const unsigned char *p, size_t n)
{
	const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
	size_t i = 0, k;
	uint64_t w;

	while (i < n) {
		/*
		 * Names in dumps are ASCII: take them eight bytes at a time.
		 * A byte of w - ones has its high bit set only where w has a
		 * byte of 0 or one over 0x80 (or after such a byte).
		 */
		if (n - i >= 8) {
			memcpy(&w, p + i, 8);
			if (!((w | (w - ones)) & highs)) {
				i += 8;
				continue;
			}
		}
		if (p[i] && p[i] < 0x80) {
			i++;
			continue;
		}
		k = p[i] ? utf8_seq(p + i, n - i) : 0;
		if (!k)
			return false;
		i += k;
	}
	return true;
}

size_t fr_pickle_utf8_repair(const unsigned char *p, size_t n, char *o)
{
	size_t i = 0, k, len = 0;

	while (i < n) {
		k = p[i] ? utf8_seq(p + i, n - i) : 0;
		if (k) {
			if (o)
				memcpy(o + len, p + i, k);
			len += k;
			i += k;
			continue;
		}
		if (p[i] == 0xed && n - i >= 3 && p[i + 1] >= 0xa0 && p[i + 1] <= 0xbf &&
		    (p[i + 2] & 0xc0) == 0x80)
			i += 3;
		else
			i++;
		if (o)
			memcpy(o + len, "\xef\xbf\xbd", 3);
		len += 3;
	}
	return len;
}

/* The magnitude in 32-bit limbs, divided by 10^9 until nothing is left. */
const char *fr_pickle_long_decimal(const unsigned char *p, size_t n,
				   char digits[FR_PICKLE_DECIMAL_BUF], size_t *len)
{
	uint32_t limb[FR_PICKLE_LONG_MAX / 4];
	char *d = digits + FR_PICKLE_DECIMAL_BUF;
	bool neg = p[n - 1] & 0x80;
	size_t nl = (n + 3) / 4, i;
	uint64_t carry = 1, cur;
	uint32_t rem;
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
	*len = (size_t)(digits + FR_PICKLE_DECIMAL_BUF - d);
	return d;
}

/* ------------------------------------------------------------------ */
/* Keys that are not strs                                              */
/* ------------------------------------------------------------------ */

/* Appends to the key text being written, within the budget. */
static int emit(struct fr_pickle_keytext *kt, const char *p, size_t n)
{
	if (n > kt->budget - kt->len)
		return kt->err = -E2BIG;
	if (n > kt->cap - kt->len) {
		size_t cap = kt->cap ? kt->cap : 256;
		char *s;

		while (cap - kt->len < n)
			cap *= 2;
		s = realloc(kt->s, cap);
		if (!s)
			return kt->err = -ENOMEM;
		kt->s = s;
		kt->cap = cap;
	}
	memcpy(kt->s + kt->len, p, n);
	kt->len += n;
	return 0;
}

/* A string in JSON, as Python's json.dumps(ensure_ascii=False) writes it. */
static int emit_json_string(struct fr_pickle_keytext *kt, const char *s, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	size_t i, from = 0;
	char esc[6];

	if (emit(kt, "\"", 1))
		return kt->err;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		size_t k = 2;

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		esc[0] = '\\';
		switch (c) {
		case '"': esc[1] = '"'; break;
		case '\\': esc[1] = '\\'; break;
		case '\b': esc[1] = 'b'; break;
		case '\f': esc[1] = 'f'; break;
		case '\n': esc[1] = 'n'; break;
		case '\r': esc[1] = 'r'; break;
		case '\t': esc[1] = 't'; break;
		default:
			memcpy(esc + 1, "u00", 3);
			esc[4] = digits[c >> 4];
			esc[5] = digits[c & 15];
			k = 6;
			break;
		}
		if (emit(kt, s + from, i - from) || emit(kt, esc, k))
			return kt->err;
		from = i + 1;
	}
	return emit(kt, s + from, n - from) || emit(kt, "\"", 1);
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

size_t fr_pickle_scalar_json(const struct fr_val *v, char *buf, size_t cap)
{
	switch ((enum fr_val_type)v->type) {
	case FR_VAL_INT:
		return (size_t)snprintf(buf, cap, "%" PRId64, v->u.i);
	case FR_VAL_REAL:
		return real_text(v->u.r, buf, cap);
	case FR_VAL_BOOL:
		memcpy(buf, v->u.b ? "true" : "false", v->u.b ? 5 : 6);
		return v->u.b ? 4 : 5;
	default:
		memcpy(buf, "null", 5);
		return 4;
	}
}

int fr_pickle_key_json(struct fr_pickle_keytext *kt, const struct fr_val *root)
{
	struct {
		const struct fr_val *c;
		uint32_t i;
	} open[FR_PICKLE_DEPTH_MAX + 1];
	const struct fr_val *v;
	size_t depth = 0, n;
	char buf[40];

	open[depth].c = root;
	open[depth++].i = 0;
	if (emit(kt, root->type == FR_VAL_OBJECT ? "{" : "[", 1))
		return kt->err;
	while (depth) {
		const struct fr_val *c = open[depth - 1].c;
		uint32_t i = open[depth - 1].i++;

		if (i == c->n) {
			depth--;
			if (emit(kt, c->type == FR_VAL_OBJECT ? "}" : "]", 1))
				return kt->err;
			continue;
		}
		if (i && emit(kt, ", ", 2))
			return kt->err;
		if (c->type == FR_VAL_OBJECT) {
			v = c->u.items[2 * i];
			if (emit_json_string(kt, v->u.s, v->n) || emit(kt, ": ", 2))
				return kt->err;
			v = c->u.items[2 * i + 1];
		} else {
			v = c->u.items[i];
		}
		if (v->type == FR_VAL_STRING) {
			if (emit_json_string(kt, v->u.s, v->n))
				return kt->err;
		} else if (v->type == FR_VAL_ARRAY || v->type == FR_VAL_OBJECT) {
			/* Every container is at most FR_PICKLE_DEPTH_MAX high. */
			if (depth > FR_PICKLE_DEPTH_MAX)
				return kt->err = -ELOOP;
			open[depth].c = v;
			open[depth++].i = 0;
			if (emit(kt, v->type == FR_VAL_OBJECT ? "{" : "[", 1))
				return kt->err;
		} else {
			n = fr_pickle_scalar_json(v, buf, sizeof(buf));
			if (emit(kt, buf, n))
				return kt->err;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* One canon per text                                                  */
/* ------------------------------------------------------------------ */

/* A word at a time, the last one padded with zeros (struct text). */
uint64_t fr_pickle_text_hash(const struct text *t)
{
	const char *s = t->s;
	uint64_t h = 0x9e3779b97f4a7c15ull ^ t->v.n, w;
	size_t words = t->v.n / 8 + 1, i;

	for (i = 0; i < words; i++, s += 8) {
		memcpy(&w, s, 8);
		h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
		h ^= h >> 31;
	}
	h ^= h >> 32;
	h *= 0x94d049bb133111ebull;
	return h ^ (h >> 29);
}

static inline bool same_text(const struct text *a, const struct text *b)
{
	return a->hash == b->hash && a->v.n == b->v.n && memcmp(a->s, b->s, a->v.n) == 0;
}

/*
 * Puts canon t into the table; 1 when that takes more than probe_max
 * probes.
 */
static int canon_insert(struct text **table, size_t cap, struct text *t, unsigned probe_max)
{
	size_t i = t->hash & (cap - 1), probes;

	for (probes = 0; table[i]; probes++) {
		if (probes == probe_max)
			return 1;
		i = (i + 1) & (cap - 1);
	}
	table[i] = t;
	return 0;
}

int fr_pickle_intern(struct fr_pickle_canons *c, struct text *t)
{
	size_t i, probes;

	if (2 * (c->n + 1) > c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 64;
		struct text **table;

		if (cap > SIZE_MAX / sizeof(*table) || !(table = calloc(cap, sizeof(*table))))
			return -ENOMEM;
		for (i = 0; i < c->cap; i++) {
			if (c->slot[i] && canon_insert(table, cap, c->slot[i], c->probe_max)) {
				free(table);
				return 1;
			}
		}
		free(c->slot);
		c->slot = table;
		c->cap = cap;
	}
	t->hash = fr_pickle_text_hash(t);
	i = t->hash & (c->cap - 1);
	for (probes = 0; c->slot[i]; probes++) {
		if (same_text(c->slot[i], t)) {
			t->canon = c->slot[i];
			return 0;
		}
		if (probes == c->probe_max)
			return 1;
		i = (i + 1) & (c->cap - 1);
	}
	c->slot[i] = t;
	c->n++;
	t->canon = t;
	return 0;
}

static int text_cmp(const struct text *a, const struct text *b)
{
	if (a->hash != b->hash)
		return a->hash < b->hash ? -1 : 1;
	if (a->v.n != b->v.n)
		return a->v.n < b->v.n ? -1 : 1;
	return memcmp(a->s, b->s, a->v.n);
}

/*
 * Sorts a[0..n) by text_cmp, bottom-up merge sort with tmp of n. A merge
 * charges each comparison to the string it outputs, whose length bounds
 * the memcmp, so each of the log n passes costs at most the total length:
 * shared long keys that differ only at the end cannot make it quadratic.
 */
static void sort_texts(struct text **a, struct text **tmp, size_t n)
{
	struct text **src = a, **dst = tmp, **t;
	size_t w, lo, mid, hi, i, j, k;

	for (w = 1; w < n; w *= 2) {
		for (lo = 0; lo < n; lo += 2 * w) {
			mid = lo + w < n ? lo + w : n;
			hi = lo + 2 * w < n ? lo + 2 * w : n;
			for (i = lo, j = mid, k = lo; k < hi; k++) {
				if (i < mid && (j == hi || text_cmp(src[i], src[j]) <= 0))
					dst[k] = src[i++];
				else
					dst[k] = src[j++];
			}
		}
		t = src;
		src = dst;
		dst = t;
	}
	if (src != a)
		memcpy(a, src, n * sizeof(*a));
}

void fr_pickle_intern_sorted(struct text **all, struct text **tmp, size_t n)
{
	size_t i, j, k;

	sort_texts(all, tmp, n);
	for (i = 0; i < n; i = j) {
		for (j = i; j < n && same_text(all[i], all[j]); j++)
			;
		for (k = i; k < j; k++)
			all[k]->canon = all[i];
	}
}
