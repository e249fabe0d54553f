/*
 * SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the agents' proof
 * that they hold the daemon's token (protocol/PROTOCOL.md, version 2).
 *
 * Header-only (static inline), so that every part that includes it gets
 * its own copy without a source file to list in the Makefile. Written from
 * the standards; tests/unit/test_auth.c checks it against the FIPS 180-4
 * examples and the RFC 4231 test cases.
 *
 * Nothing here is secret-dependent in its timing except through the data's
 * length: the rounds are straight-line arithmetic, and fr_ct_equal()
 * compares without stopping at the first difference.
 */
#ifndef FR_SHA256_H
#define FR_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define FR_SHA256_SIZE 32
#define FR_SHA256_BLOCK 64

struct fr_sha256 {
	uint32_t h[8];
	uint64_t bytes;                 /* message bytes hashed so far */
	uint8_t block[FR_SHA256_BLOCK]; /* the partial block being filled */
	size_t fill;
};

struct fr_hmac_sha256 {
	struct fr_sha256 inner;
	struct fr_sha256 outer;
};

static inline uint32_t fr_sha256_rotr(uint32_t x, unsigned n)
{
	return (x >> n) | (x << (32 - n));
}

/* FIPS 180-4, 6.2.2: one 512-bit block into the hash value. */
static inline void fr_sha256_block(struct fr_sha256 *s, const uint8_t *p)
{
	/* FIPS 180-4, 4.2.2: the first 32 bits of the fractional parts of
	 * the cube roots of the first 64 primes. */
	static const uint32_t k[64] = {
		0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
		0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
		0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
		0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
		0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
		0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
		0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
		0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
		0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
		0xc67178f2,
	};
	uint32_t w[64];
	uint32_t a, b, c, d, e, f, g, h;

	for (int t = 0; t < 16; t++)
		w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 |
		       (uint32_t)p[4 * t + 2] << 8 | (uint32_t)p[4 * t + 3];
	for (int t = 16; t < 64; t++) {
		uint32_t s0 = fr_sha256_rotr(w[t - 15], 7) ^ fr_sha256_rotr(w[t - 15], 18) ^
			      (w[t - 15] >> 3);
		uint32_t s1 = fr_sha256_rotr(w[t - 2], 17) ^ fr_sha256_rotr(w[t - 2], 19) ^
			      (w[t - 2] >> 10);

		w[t] = w[t - 16] + s0 + w[t - 7] + s1;
	}
	a = s->h[0];
	b = s->h[1];
	c = s->h[2];
	d = s->h[3];
	e = s->h[4];
	f = s->h[5];
	g = s->h[6];
	h = s->h[7];
	for (int t = 0; t < 64; t++) {
		uint32_t S1 = fr_sha256_rotr(e, 6) ^ fr_sha256_rotr(e, 11) ^ fr_sha256_rotr(e, 25);
		uint32_t ch = (e & f) ^ (~e & g);
		uint32_t t1 = h + S1 + ch + k[t] + w[t];
		uint32_t S0 = fr_sha256_rotr(a, 2) ^ fr_sha256_rotr(a, 13) ^ fr_sha256_rotr(a, 22);
		uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
		uint32_t t2 = S0 + maj;

		h = g;
		g = f;
		f = e;
		e = d + t1;
		d = c;
		c = b;
		b = a;
		a = t1 + t2;
	}
	s->h[0] += a;
	s->h[1] += b;
	s->h[2] += c;
	s->h[3] += d;
	s->h[4] += e;
	s->h[5] += f;
	s->h[6] += g;
	s->h[7] += h;
}

static inline void fr_sha256_init(struct fr_sha256 *s)
{
	/* FIPS 180-4, 5.3.3: the fractional parts of the square roots of the
	 * first 8 primes. */
	static const uint32_t h0[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
					0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };

	memcpy(s->h, h0, sizeof(h0));
	s->bytes = 0;
	s->fill = 0;
}

static inline void fr_sha256_update(struct fr_sha256 *s, const void *data, size_t len)
{
	const uint8_t *p = data;

	s->bytes += len;
	if (s->fill) {
		size_t take = FR_SHA256_BLOCK - s->fill < len ? FR_SHA256_BLOCK - s->fill : len;

		memcpy(s->block + s->fill, p, take);
		s->fill += take;
		p += take;
		len -= take;
		if (s->fill < FR_SHA256_BLOCK)
			return;
		fr_sha256_block(s, s->block);
		s->fill = 0;
	}
	for (; len >= FR_SHA256_BLOCK; p += FR_SHA256_BLOCK, len -= FR_SHA256_BLOCK)
		fr_sha256_block(s, p);
	if (len) {
		memcpy(s->block, p, len);
		s->fill = len;
	}
}

/* FIPS 180-4, 5.1.1: a 1 bit, zeros, then the length in bits, big-endian. */
static inline void fr_sha256_final(struct fr_sha256 *s, uint8_t out[FR_SHA256_SIZE])
{
	uint64_t bits = s->bytes * 8;
	uint8_t len[8];

	for (int i = 0; i < 8; i++)
		len[i] = (uint8_t)(bits >> (56 - 8 * i));
	s->block[s->fill++] = 0x80;
	if (s->fill > FR_SHA256_BLOCK - 8) {
		memset(s->block + s->fill, 0, FR_SHA256_BLOCK - s->fill);
		fr_sha256_block(s, s->block);
		s->fill = 0;
	}
	memset(s->block + s->fill, 0, FR_SHA256_BLOCK - 8 - s->fill);
	memcpy(s->block + FR_SHA256_BLOCK - 8, len, 8);
	fr_sha256_block(s, s->block);
	for (int i = 0; i < 8; i++) {
		out[4 * i] = (uint8_t)(s->h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
		out[4 * i + 3] = (uint8_t)s->h[i];
	}
	memset(s, 0, sizeof(*s));
}

static inline void fr_sha256(const void *data, size_t len, uint8_t out[FR_SHA256_SIZE])
{
	struct fr_sha256 s;

	fr_sha256_init(&s);
	fr_sha256_update(&s, data, len);
	fr_sha256_final(&s, out);
}

/*
 * RFC 2104: H((K ^ opad) || H((K ^ ipad) || text)), K the key padded with
 * zeros to a block, or first hashed when longer than a block.
 */
static inline void fr_hmac_sha256_init(struct fr_hmac_sha256 *m, const void *key, size_t len)
{
	uint8_t k[FR_SHA256_BLOCK] = { 0 };
	uint8_t pad[FR_SHA256_BLOCK];

	if (len > FR_SHA256_BLOCK)
		fr_sha256(key, len, k);
	else if (len)
		memcpy(k, key, len);
	for (int i = 0; i < FR_SHA256_BLOCK; i++)
		pad[i] = k[i] ^ 0x36;
	fr_sha256_init(&m->inner);
	fr_sha256_update(&m->inner, pad, sizeof(pad));
	for (int i = 0; i < FR_SHA256_BLOCK; i++)
		pad[i] = k[i] ^ 0x5c;
	fr_sha256_init(&m->outer);
	fr_sha256_update(&m->outer, pad, sizeof(pad));
	memset(k, 0, sizeof(k));
	memset(pad, 0, sizeof(pad));
}

static inline void fr_hmac_sha256_update(struct fr_hmac_sha256 *m, const void *data, size_t len)
{
	fr_sha256_update(&m->inner, data, len);
}

static inline void fr_hmac_sha256_final(struct fr_hmac_sha256 *m, uint8_t out[FR_SHA256_SIZE])
{
	uint8_t inner[FR_SHA256_SIZE];

	fr_sha256_final(&m->inner, inner);
	fr_sha256_update(&m->outer, inner, sizeof(inner));
	fr_sha256_final(&m->outer, out);
	memset(inner, 0, sizeof(inner));
}

static inline void fr_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
				  uint8_t out[FR_SHA256_SIZE])
{
	struct fr_hmac_sha256 m;

	fr_hmac_sha256_init(&m, key, key_len);
	fr_hmac_sha256_update(&m, data, len);
	fr_hmac_sha256_final(&m, out);
}

/*
 * Whether two buffers hold the same bytes, in a time that depends only on
 * `len`: every byte is looked at, whatever the first difference, so that
 * a peer guessing a proof learns nothing from how fast it was refused.
 */
static inline bool fr_ct_equal(const void *a, const void *b, size_t len)
{
	const volatile uint8_t *x = a;
	const volatile uint8_t *y = b;
	uint8_t diff = 0;

	for (size_t i = 0; i < len; i++)
		diff |= (uint8_t)(x[i] ^ y[i]);
	return diff == 0;
}

#endif
