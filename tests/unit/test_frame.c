/*
 * Unit tests of the frame reader (protocol/frame.c): a stream of frames
 * read back whatever the reads' sizes (split at every byte, one byte at a
 * time, everything at once), a header judged before its payload arrives,
 * and the refusals: bad magic, a version not spoken, non-zero flags, an
 * unknown type, a length over the protocol's limit and over the caller's,
 * and a stream that ends inside a frame.
 *
 * Each read is copied into a heap buffer of exactly the bytes received so
 * far, so that under AddressSanitizer a look past them fails the run.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frame.h"
#include "wire.h"

/* Three frames back to back: HEARTBEAT, DUMP_REQUEST and BYE. */
struct stream {
	uint8_t bytes[512];
	size_t len;
	size_t ends[3]; /* where each frame ends */
};

static void make_stream(struct stream *s)
{
	struct fr_msg_heartbeat hb = { .now_ns = 0x0102030405060708ull };
	struct fr_msg_dump_request req = { .incident = "inc-1", .reason = "rank 3 stuck" };
	struct fr_msg_bye bye = { 0 };
	int n;

	memset(s, 0, sizeof(*s));
	n = fr_wire_heartbeat_encode(&hb, s->bytes, sizeof(s->bytes));
	assert_true(n > 0);
	s->len = (size_t)n;
	s->ends[0] = s->len;
	n = fr_wire_dump_request_encode(&req, s->bytes + s->len, sizeof(s->bytes) - s->len);
	assert_true(n > 0);
	s->len += (size_t)n;
	s->ends[1] = s->len;
	n = fr_wire_bye_encode(&bye, s->bytes + s->len, sizeof(s->bytes) - s->len);
	assert_true(n > 0);
	s->len += (size_t)n;
	s->ends[2] = s->len;
}

/*
 * A reader as the callers are: a buffer it owns, appended to by each read
 * and handed to fr_frame_next() until it answers -EAGAIN, what is left of
 * a frame kept at the start.
 */
struct reader {
	uint8_t buf[512];
	size_t len;
	unsigned frames;     /* complete frames seen */
	uint16_t types[8];
	size_t need;         /* f.size of the last -EAGAIN */
	int err;             /* the first refusal; 0 while none */
};

/* Feeds one read of `n` bytes. */
static void reader_feed(struct reader *r, const uint8_t *data, size_t n)
{
	size_t off = 0;
	uint8_t *copy;

	assert_true(r->len + n <= sizeof(r->buf));
	memcpy(r->buf + r->len, data, n);
	r->len += n;
	/* Exactly the bytes received so far. */
	copy = malloc(r->len ? r->len : 1);
	assert_non_null(copy);
	memcpy(copy, r->buf, r->len);
	while (!r->err) {
		struct fr_wire_frame f;
		int rc = fr_frame_next(copy + off, r->len - off, FR_WIRE_MAX_PAYLOAD, &f);

		if (rc == -EAGAIN) {
			assert_null(f.payload);
			assert_true(f.size > r->len - off);
			r->need = f.size;
			break;
		}
		if (rc) {
			r->err = rc;
			break;
		}
		assert_true(f.have_header);
		assert_ptr_equal(f.payload, copy + off + FR_WIRE_HEADER_SIZE);
		assert_int_equal(f.size, FR_WIRE_HEADER_SIZE + f.h.length);
		assert_true(r->frames < 8);
		r->types[r->frames++] = f.h.type;
		off += f.size;
	}
	free(copy);
	memmove(r->buf, r->buf + off, r->len - off);
	r->len -= off;
}

static void assert_whole_stream(const struct reader *r)
{
	assert_int_equal(r->err, 0);
	assert_int_equal(r->frames, 3);
	assert_int_equal(r->types[0], FR_MSG_HEARTBEAT);
	assert_int_equal(r->types[1], FR_MSG_DUMP_REQUEST);
	assert_int_equal(r->types[2], FR_MSG_BYE);
	assert_int_equal(r->len, 0);
}

/* Two reads, split at every byte of the stream. */
static void test_split_everywhere(void **state)
{
	struct stream s;

	(void)state;
	make_stream(&s);
	for (size_t cut = 0; cut <= s.len; cut++) {
		struct reader r = { 0 };
		unsigned before = cut >= s.ends[2] ? 3 : cut >= s.ends[1] ? 2 : cut >= s.ends[0] ? 1 : 0;

		reader_feed(&r, s.bytes, cut);
		assert_int_equal(r.err, 0);
		assert_int_equal(r.frames, before);
		reader_feed(&r, s.bytes + cut, s.len - cut);
		assert_whole_stream(&r);
	}
}

/* One byte per read: every frame is complete exactly at its last byte. */
static void test_byte_by_byte(void **state)
{
	struct stream s;
	struct reader r = { 0 };
	unsigned next = 0;

	(void)state;
	make_stream(&s);
	for (size_t i = 0; i < s.len; i++) {
		reader_feed(&r, s.bytes + i, 1);
		if (next < 3 && i + 1 == s.ends[next])
			next++;
		assert_int_equal(r.frames, next);
		/* Once the header is in, the reader asks for the whole frame. */
		if (next < 3 && r.len >= FR_WIRE_HEADER_SIZE)
			assert_int_equal(r.need, s.ends[next] - (next ? s.ends[next - 1] : 0));
		else if (next < 3)
			assert_int_equal(r.need, FR_WIRE_HEADER_SIZE);
	}
	assert_whole_stream(&r);
}

/* Everything in one read, two frames in another. */
static void test_frames_in_one_read(void **state)
{
	struct stream s;
	struct reader r = { 0 };

	(void)state;
	make_stream(&s);
	reader_feed(&r, s.bytes, s.len);
	assert_whole_stream(&r);

	memset(&r, 0, sizeof(r));
	reader_feed(&r, s.bytes, s.ends[1]);
	assert_int_equal(r.frames, 2);
	assert_int_equal(r.len, 0);
	reader_feed(&r, s.bytes + s.ends[1], s.len - s.ends[1]);
	assert_whole_stream(&r);
}

/* A stream that ends inside a frame: no frame, and what is missing. */
static void test_truncated(void **state)
{
	struct stream s;
	struct fr_wire_frame f;

	(void)state;
	make_stream(&s);
	assert_int_equal(fr_frame_next(s.bytes, 0, FR_WIRE_MAX_PAYLOAD, &f), -EAGAIN);
	assert_false(f.have_header);
	assert_int_equal(f.size, FR_WIRE_HEADER_SIZE);
	assert_int_equal(fr_frame_next(s.bytes, FR_WIRE_HEADER_SIZE - 1, FR_WIRE_MAX_PAYLOAD, &f),
			 -EAGAIN);
	assert_false(f.have_header);
	assert_null(f.payload);
	/* The DUMP_REQUEST, cut one byte short. */
	assert_int_equal(fr_frame_next(s.bytes + s.ends[0], s.ends[1] - s.ends[0] - 1,
				       FR_WIRE_MAX_PAYLOAD, &f),
			 -EAGAIN);
	assert_true(f.have_header);
	assert_int_equal(f.h.type, FR_MSG_DUMP_REQUEST);
	assert_int_equal(f.size, s.ends[1] - s.ends[0]);
	assert_null(f.payload);
}

static void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

/* A header is refused as soon as it is in, before any of its payload. */
static void test_refused_headers(void **state)
{
	struct stream s;
	struct fr_wire_frame f;
	uint8_t h[FR_WIRE_HEADER_SIZE];

	(void)state;
	make_stream(&s);

	memcpy(h, s.bytes, sizeof(h));
	h[0] ^= 0xff;
	assert_int_equal(fr_frame_next(h, sizeof(h), FR_WIRE_MAX_PAYLOAD, &f), -EPROTO);
	assert_true(f.have_header);
	assert_int_not_equal(f.h.magic, FR_WIRE_MAGIC);

	memcpy(h, s.bytes, sizeof(h));
	put_u16(h + 4, FR_WIRE_VERSION + 1);
	assert_int_equal(fr_frame_next(h, sizeof(h), FR_WIRE_MAX_PAYLOAD, &f), -EPROTONOSUPPORT);
	put_u16(h + 4, 0);
	assert_int_equal(fr_frame_next(h, sizeof(h), FR_WIRE_MAX_PAYLOAD, &f), -EPROTONOSUPPORT);

	memcpy(h, s.bytes, sizeof(h));
	put_u32(h + 12, 1);
	assert_int_equal(fr_frame_next(h, sizeof(h), FR_WIRE_MAX_PAYLOAD, &f), -EPROTO);

	memcpy(h, s.bytes, sizeof(h));
	put_u16(h + 6, 200);
	assert_int_equal(fr_frame_next(h, sizeof(h), FR_WIRE_MAX_PAYLOAD, &f), -EBADMSG);
	assert_int_equal(f.h.type, 200);

	/* A bad magic in the middle of a stream stops it there. */
	{
		struct reader r = { 0 };
		struct stream bad = s;

		bad.bytes[bad.ends[0]] ^= 0xff;
		reader_feed(&r, bad.bytes, bad.len);
		assert_int_equal(r.frames, 1);
		assert_int_equal(r.err, -EPROTO);
	}
}

/*
 * Too long: over the protocol's limit (-EMSGSIZE, whatever the caller
 * allows), or over the caller's (-EFBIG, the header still read), both
 * from the header alone. Exactly the caller's limit is allowed.
 */
static void test_too_long(void **state)
{
	struct stream s;
	struct fr_wire_frame f;
	uint8_t h[FR_WIRE_HEADER_SIZE];

	(void)state;
	make_stream(&s);
	memcpy(h, s.bytes, sizeof(h));

	put_u32(h + 8, FR_WIRE_MAX_PAYLOAD + 1);
	assert_int_equal(fr_frame_next(h, sizeof(h), FR_WIRE_MAX_PAYLOAD, &f), -EMSGSIZE);
	assert_int_equal(f.h.length, FR_WIRE_MAX_PAYLOAD + 1);

	put_u32(h + 8, 1000);
	assert_int_equal(fr_frame_next(h, sizeof(h), 999, &f), -EFBIG);
	assert_true(f.have_header);
	assert_int_equal(f.h.type, FR_MSG_HEARTBEAT);
	assert_int_equal(f.h.length, 1000);
	assert_null(f.payload);
	assert_int_equal(fr_frame_next(h, sizeof(h), 1000, &f), -EAGAIN);
	assert_int_equal(f.size, FR_WIRE_HEADER_SIZE + 1000);

	/* The caller's limit holds for a complete frame too. */
	assert_int_equal(fr_frame_next(s.bytes, s.ends[0], 8, &f), 0);
	assert_int_equal(fr_frame_next(s.bytes, s.ends[0], 7, &f), -EFBIG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_everywhere),
		cmocka_unit_test(test_byte_by_byte),
		cmocka_unit_test(test_frames_in_one_read),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_refused_headers),
		cmocka_unit_test(test_too_long),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
