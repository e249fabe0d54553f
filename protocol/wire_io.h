/*
 * The cursors the codec files (wire.c, node_wire.c) share: a writer whose
 * bounds the encoder checked once, before writing, and a reader whose
 * failure is sticky (wire.c says why). Private to protocol/: nothing else
 * includes it.
 */
#ifndef FR_WIRE_IO_H
#define FR_WIRE_IO_H

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

/* Bytes of a string field: its u16 length, then the bytes. */
#define STR_SIZE(len) (2 + (size_t)(len))

/*
 * Length of a string field, counting at most one byte past its limit: enough
 * to tell that it is over the limit, and safe on an array whose terminator
 * is missing.
 */
static inline size_t str_len(const char *s, size_t max)
{
	return strnlen(s, max + 1);
}

struct wr {
	uint8_t *p;
};

static inline void wr_u8(struct wr *w, uint8_t v)
{
	*w->p++ = v;
}

static inline void wr_u16(struct wr *w, uint16_t v)
{
	w->p[0] = (uint8_t)v;
	w->p[1] = (uint8_t)(v >> 8);
	w->p += 2;
}

static inline void wr_u32(struct wr *w, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		w->p[i] = (uint8_t)(v >> (8 * i));
	w->p += 4;
}

static inline void wr_u64(struct wr *w, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		w->p[i] = (uint8_t)(v >> (8 * i));
	w->p += 8;
}

static inline void wr_bytes(struct wr *w, const void *b, size_t n)
{
	if (n) {
		memcpy(w->p, b, n);
		w->p += n;
	}
}

/* `len` comes from str_len() and was checked against the field's limit. */
static inline void wr_str(struct wr *w, const char *s, size_t len)
{
	assert(len <= UINT16_MAX);
	wr_u16(w, (uint16_t)len);
	wr_bytes(w, s, len);
}

/*
 * Checks that a frame of `total` bytes is allowed and fits `cap`, then writes
 * its header. Returns `total` or -EMSGSIZE.
 */
static inline int wr_begin(struct wr *w, uint8_t *buf, size_t cap, enum fr_msg_type type,
			   size_t total)
{
	size_t payload = total - FR_WIRE_HEADER_SIZE;

	if (payload > FR_WIRE_MAX_PAYLOAD || total > cap)
		return -EMSGSIZE;
	w->p = buf;
	wr_u32(w, FR_WIRE_MAGIC);
	wr_u16(w, (uint16_t)fr_wire_msg_version(type));
	wr_u16(w, (uint16_t)type);
	wr_u32(w, (uint32_t)payload);
	wr_u32(w, 0);
	return (int)total;
}

static inline int wr_end(const struct wr *w, const uint8_t *buf, int total)
{
	assert(w->p == buf + total);
	return total;
}

struct rd {
	const uint8_t *p;
	size_t left;
	bool bad;
};

static inline struct rd rd_init(const uint8_t *payload, size_t len)
{
	return (struct rd){ .p = payload, .left = len, .bad = false };
}

/* Returns the next `n` bytes; callers test r->bad, not the pointer. */
static inline const uint8_t *rd_take(struct rd *r, size_t n)
{
	const uint8_t *p = r->p;

	if (r->bad || n > r->left) {
		r->bad = true;
		return NULL;
	}
	r->p += n;
	r->left -= n;
	return p;
}

static inline uint8_t rd_u8(struct rd *r)
{
	const uint8_t *p = rd_take(r, 1);

	return r->bad ? 0 : p[0];
}

static inline uint16_t rd_u16(struct rd *r)
{
	const uint8_t *p = rd_take(r, 2);

	return r->bad ? 0 : (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t rd_u32(struct rd *r)
{
	const uint8_t *p = rd_take(r, 4);
	uint32_t v = 0;

	if (r->bad)
		return 0;
	for (int i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static inline uint64_t rd_u64(struct rd *r)
{
	const uint8_t *p = rd_take(r, 8);
	uint64_t v = 0;

	if (r->bad)
		return 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Reads a string into `dst`, which has room for `max` bytes and a NUL. */
static inline void rd_str(struct rd *r, char *dst, size_t max)
{
	uint16_t len = rd_u16(r);
	const uint8_t *p;

	dst[0] = '\0';
	if (len > max) {
		r->bad = true;
		return;
	}
	p = rd_take(r, len);
	if (r->bad || len == 0)
		return;
	if (memchr(p, '\0', len)) {
		r->bad = true;
		return;
	}
	memcpy(dst, p, len);
	dst[len] = '\0';
}

/*
 * Reads an array count and checks that that many elements of at least
 * `min_each` bytes fit in what is left, after keeping `reserve` bytes for the
 * fixed fields that follow the array.
 */
static inline uint32_t rd_count(struct rd *r, size_t min_each, size_t reserve)
{
	uint32_t n = rd_u32(r);

	if (r->bad)
		return 0;
	if (r->left < reserve || n > (r->left - reserve) / min_each) {
		r->bad = true;
		return 0;
	}
	return n;
}

static inline void rd_fail(struct rd *r)
{
	r->bad = true;
}

/* True when every byte was read and every value was acceptable. */
static inline bool rd_ok(const struct rd *r)
{
	return !r->bad && r->left == 0;
}

/*
 * Allocates a decoded array of `n` zeroed elements of `size` bytes into
 * *p; nothing for n == 0. Returns 0, or -ENOMEM.
 */
static inline int rd_alloc(void **p, size_t n, size_t size)
{
	if (!n)
		return 0;
	*p = calloc(n, size);
	return *p ? 0 : -ENOMEM;
}

/*
 * rd_alloc() after a read that may have failed: returns 0, or -1 with
 * *ret set to -ENOMEM when out of memory and left as it is (the caller's
 * -EPROTO) when the read before failed.
 */
static inline int rd_array(const struct rd *r, void **p, size_t n, size_t size, int *ret)
{
	if (r->bad)
		return -1;
	if (rd_alloc(p, n, size) < 0) {
		*ret = -ENOMEM;
		return -1;
	}
	return 0;
}

/* Runs of members (member_runs.h) as NODE_COMMS and COMM_RUNS carry them. */
static inline void wr_runs(struct wr *w, const struct fr_node_map *runs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		wr_u32(w, runs[i].index);
		wr_u32(w, runs[i].rank);
		wr_u32(w, runs[i].count);
	}
}

static inline void rd_runs(struct rd *r, struct fr_node_map *runs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		runs[i].index = rd_u32(r);
		runs[i].rank = rd_u32(r);
		runs[i].count = rd_u32(r);
	}
}

/*
 * A decoded message's free function when it holds one allocated array,
 * `field`: frees it and zeroes the message (NULL is left alone), so that a
 * decoder's error path and its caller free alike.
 */
#define FR_WIRE_FREE_ONE(name, type, field) \
	void name(type *m)                    \
	{                                     \
		if (!m)                       \
			return;               \
		free(m->field);               \
		memset(m, 0, sizeof(*m));     \
	}

#endif
