/*
 * The text the pickle reader makes, apart from its machine (pickle.c, the
 * only user): UTF-8 checks, long ints in decimal, the JSON text of keys
 * that are not strs, and the canon of each text used as a key.
 */
#ifndef FR_PICKLE_TEXT_H
#define FR_PICKLE_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pickle.h"
#include "value.h"

/*
 * A string the reader made, with what it needs of it as a dict key kept
 * just before its value. A dict has one member per key, and a pickle may
 * write one text as several strs (Python memoizes by identity, not by
 * text), so each text used as a key is named by one of its strings, the
 * canon, found once per string in a hash table; the canon remembers the
 * dict (by serial) and member that last took the text, so that a key set
 * again is found in constant time. The rest of the 8-byte word its NUL is
 * in is zero, so that fr_pickle_text_hash() may read it a word at a time.
 */
struct text {
	struct text *canon;	/* NULL until the string is a key */
	uint64_t hash;		/* of the text, once it is a key */
	uint32_t stamp;		/* for a canon: the serial of the last dict to take it */
	uint32_t pos;		/* ... and the member that holds it there */
	struct fr_val v;
	char s[];
};

/* Whether p[0..n) is UTF-8 without NUL, as a value's string must be. */
bool fr_pickle_utf8_valid(const unsigned char *p, size_t n);

/*
 * Writes into o (when not NULL) the text of p[0..n) with each byte outside
 * a valid sequence, and each NUL, replaced by U+FFFD, except that an
 * encoded surrogate (what Python's surrogatepass writes for a lone
 * surrogate) becomes one U+FFFD for its three bytes. Returns its length.
 */
size_t fr_pickle_utf8_repair(const unsigned char *p, size_t n, char *o);

/* Decimal digits of the largest int accepted: 8 * FR_PICKLE_LONG_MAX * log10(2). */
#define FR_PICKLE_DECIMAL_MAX 2467
#define FR_PICKLE_DECIMAL_BUF (FR_PICKLE_DECIMAL_MAX + 16)

/*
 * The decimal text of the int of n bytes, 8 < n <= FR_PICKLE_LONG_MAX, of
 * little-endian two's complement at p: written at the end of `digits`,
 * its start returned and its length at *len.
 */
const char *fr_pickle_long_decimal(const unsigned char *p, size_t n,
				   char digits[FR_PICKLE_DECIMAL_BUF], size_t *len);

/* The JSON text of a key that is not a str, being written. */
struct fr_pickle_keytext {
	char *s;		/* malloc'd; the caller frees it */
	size_t len, cap;
	size_t budget;		/* bytes len may reach */
	int err;		/* of the last failure */
};

/*
 * Appends to kt the JSON text of container `root` (a tuple or frozenset
 * key, at most FR_PICKLE_DEPTH_MAX high), as Python's json.dumps writes it
 * (", " and ": " between items). Returns 0, -E2BIG past kt->budget,
 * -ENOMEM, or -ELOOP for a container deeper than the limit.
 */
int fr_pickle_key_json(struct fr_pickle_keytext *kt, const struct fr_val *root);

/* The JSON text of a scalar that is not a str into buf (of 40 bytes); its length. */
size_t fr_pickle_scalar_json(const struct fr_val *v, char *buf, size_t cap);

/* The canons, by hash: open addressing, at most half full. */
struct fr_pickle_canons {
	struct text **slot;	/* malloc'd; the caller frees it */
	size_t n, cap;
	/* Probes past which fr_pickle_intern() gives up (pickle.c's PROBE_MAX). */
	unsigned probe_max;
};

/* The hash of t's text, which the canon table and the sort compare first. */
uint64_t fr_pickle_text_hash(const struct text *t);

/*
 * Sets t->canon to the string of the table with t's text, or to t itself
 * when it is the first. Returns 0, -ENOMEM, or 1 when the table's probes
 * run past c->probe_max (many texts with colliding hashes, which only a
 * pickle made for it has): the caller goes on by sorting.
 */
int fr_pickle_intern(struct fr_pickle_canons *c, struct text *t);

/*
 * Sets the canon of each of all[0..n), their hashes set, to the first of
 * them with its text, by sorting `all` (with tmp of n): O(n log n) however
 * the hashes collide.
 */
void fr_pickle_intern_sorted(struct text **all, struct text **tmp, size_t n);

#endif
