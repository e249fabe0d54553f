/*
 * Scanning bytes eight at a time, for the JSON parser (value.c) and for the
 * reader that scans our writer's own text itself (dump_read.c's entries):
 * comparing short strings, finding where a string's plain text ends,
 * reading digits; one set of helpers for both. Bytes are read
 * little-endian; elsewhere one at a time.
 */
#ifndef FR_SCAN_H
#define FR_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Whether a[0..n) equals b[0..n): inline, eight bytes at a time, for the
 * short keys and names of a dump, where calling memcmp costs more than
 * comparing. */
static inline __attribute__((always_inline)) bool fr_same_bytes(const char *a, const char *b,
								  size_t n)
{
	uint64_t x, y;
	uint32_t u, v;

	if (n >= 8) {
		for (size_t i = 0; i + 8 < n; i += 8) {
			memcpy(&x, a + i, 8);
			memcpy(&y, b + i, 8);
			if (x != y)
				return false;
		}
		/* The last eight, overlapping what was compared. */
		memcpy(&x, a + n - 8, 8);
		memcpy(&y, b + n - 8, 8);
		return x == y;
	}
	if (n >= 4) {
		memcpy(&u, a, 4);
		memcpy(&v, b, 4);
		if (u != v)
			return false;
		memcpy(&u, a + n - 4, 4);
		memcpy(&v, b + n - 4, 4);
		return u == v;
	}
	for (; n; n--)
		if (*a++ != *b++)
			return false;
	return true;
}

#define FR_ONES 0x0101010101010101u

/*
 * Where the bytes from p on stop being JSON string content that needs no
 * decoding: printable ASCII other than '"' and '\\' (a control character,
 * a quote, a backslash or a byte of a multi-byte sequence stops it). A byte
 * below 0x20 borrows in x - 0x20.., a quote or backslash is a zero byte of
 * x ^ that byte repeated, and a byte past 0x7f has its top bit set; a false
 * hit only ever follows a true one, so the lowest is the first.
 */
static inline __attribute__((always_inline)) const char *
fr_json_plain_end(const char *p, const char *end)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	while (end - p >= 8) {
		uint64_t x, q, b, hit;

		memcpy(&x, p, 8);
		q = x ^ (FR_ONES * '"');
		b = x ^ (FR_ONES * '\\');
		hit = ((x - FR_ONES * 0x20) & ~x) | ((q - FR_ONES) & ~q) | ((b - FR_ONES) & ~b) | x;
		hit &= FR_ONES * 0x80;
		if (hit)
			return p + (__builtin_ctzll(hit) >> 3);
		p += 8;
	}
#endif
	while (p < end && (unsigned char)*p >= 0x20 && (unsigned char)*p < 0x80 && *p != '"' &&
	       *p != '\\')
		p++;
	return p;
}

/*
 * A JSON string from p, just past its opening quote, when it needs no
 * decoding: its *n bytes from p, the plain text (in any case); returns
 * where it ends, past its closing quote, or NULL when the plain text ends
 * otherwise (an escape, a byte to check, the end of the text).
 */
static inline __attribute__((always_inline)) const char *
fr_json_plain_string(const char *p, const char *end, size_t *n)
{
	const char *q = fr_json_plain_end(p, end);

	*n = (size_t)(q - p);
	return q < end && *q == '"' ? q + 1 : NULL;
}

static inline bool fr_is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/*
 * How many of the eight bytes at p are ASCII digits before the first that
 * is not; *x gets the eight bytes for fr_digits_value(). With t = x - '0'
 * in each byte, a digit leaves 0..9, which adding 0x76 keeps below 0x80;
 * any other byte sets the top bit of t or of t + 0x76. A borrow or carry
 * between bytes only comes from a byte that is not a digit, and only
 * changes bytes after it.
 */
static inline __attribute__((always_inline)) unsigned fr_digits_in(const char *p, uint64_t *x)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	uint64_t t, y;

	memcpy(x, p, 8);
	t = *x - FR_ONES * '0';
	y = (t | (t + FR_ONES * 0x76)) & (FR_ONES * 0x80);
	return y ? (unsigned)__builtin_ctzll(y) >> 3 : 8;
#else
	unsigned n = 0;

	memcpy(x, p, 8);
	while (n < 8 && fr_is_digit(p[n]))
		n++;
	return n;
#endif
}

/* The value of the first n (1 to 8) digits of x, as fr_digits_in() read
 * it: pairs, quads and halves combined by multiplies. */
static inline __attribute__((always_inline)) uint64_t fr_digits_value(uint64_t x, unsigned n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	uint64_t v = x - FR_ONES * '0';

	/* The digits to the top, the bytes before them zeros: leading
	 * zeros of an eight-digit number. */
	v <<= 8 * (8 - n);
	v = v * 10 + (v >> 8);
	return ((v & 0x000000ff000000ffu) * (100 + (1000000ull << 32)) +
		((v >> 16) & 0x000000ff000000ffu) * (1 + (10000ull << 32))) >> 32;
#else
	const unsigned char *b = (const unsigned char *)&x;
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v = v * 10 + (uint64_t)(b[i] - '0');
	return v;
#endif
}

/*
 * The run of ASCII digits at p (before end), read as an unsigned integer:
 * where it ends, its value at *u, and *overflow set when that does not fit
 * in 64 bits (*u then the value of its first digits). Nineteen digits
 * always fit: they go eight at a time where the text has room to read
 * them so (times in nanoseconds have nineteen), and only longer runs are
 * checked, so that the common case costs no division.
 */
static inline __attribute__((always_inline)) const char *
fr_scan_digits(const char *p, const char *end, uint64_t *u, bool *overflow)
{
	static const uint64_t pow10[9] = {
		1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000,
	};
	const char *digits = p;
	uint64_t v = 0, x;
	unsigned n;

	*overflow = false;
	if (end - p >= 24) {
		if ((n = fr_digits_in(p, &x)) < 8) {
			*u = n ? fr_digits_value(x, n) : 0;
			return p + n;
		}
		v = fr_digits_value(x, 8);
		p += 8;
		if ((n = fr_digits_in(p, &x)))
			v = v * pow10[n] + fr_digits_value(x, n);
		p += n;
		if (n < 8) {
			*u = v;
			return p;
		}
		/* Sixteen: three more fit; a longer run goes on below. */
		if ((n = fr_digits_in(p, &x)) <= 3) {
			*u = n ? v * pow10[n] + fr_digits_value(x, n) : v;
			return p + n;
		}
	}
	for (; p < end && fr_is_digit(*p); p++) {
		unsigned d = (unsigned)(*p - '0');

		if (p - digits >= 19 && v > (UINT64_MAX - d) / 10)
			*overflow = true;
		else
			v = v * 10 + d;
	}
	*u = v;
	return p;
}

#endif
