/*
 * The wire codec. What wire.h does not say:
 *
 * Encoders validate every field first, then compute the frame size with the
 * message's _size function and check it against the buffer, so the writes
 * that follow cannot run past the end and are not checked one by one.
 *
 * Decoders read through a cursor whose failure is sticky: after the first
 * short read or bad value every later read yields zero, and the decoder
 * looks at the failure once, at the end, where it also rejects leftover
 * bytes. An array count is checked against the bytes left before anything
 * is allocated, using the smallest encoding one element can have, so a
 * hostile count costs no memory.
 *
 * Beyond the string limits, decoders refuse a few values no honest peer
 * sends, and encoders refuse the same ones so that they never produce a
 * frame the other side would drop: a COMM whose rank is not below its size
 * (so a COMM has at least one member), an in-flight operation whose is_p2p
 * is not 0 or 1, whose peer or peer_in_comm is below -1 or whose flags say
 * WAITED without NONBLOCKING, a DUMP_DATA piece that does not fit inside its dump, and a
 * BYE whose reserved field is not 0. COMM member values are not checked:
 * FR_RANK_UNKNOWN (a member an NCCL rank cannot know) is a valid entry, and
 * whether a known one is below the world size is for the receiver, which
 * knows that size from HELLO. The in-flight operation type is not
 * checked: a newer agent may record kinds this build does not name, and
 * fr_op_name() calls those "unknown". In-flight flags this build does not
 * define are cleared on decode, for the same reason; the encoder refuses
 * them, since no caller of this build can mean anything by them.
 *
 * fr_wire_header_decode() fills in the header's fields even when it refuses
 * them (all but -EAGAIN), so that the caller can say in its log line what it
 * was sent. A failed payload decode leaves the message zeroed.
 */
#include "wire.h"
#include "wire_io.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* The smallest encodings of array elements: every string empty. */
#define COMM_PROGRESS_MIN_SIZE (STR_SIZE(0) + 8 + 8)
#define TIMING_MIN_SIZE (STR_SIZE(0) + 8 + 1 + 1 + 8 + 8)
#define INFLIGHT_MIN_SIZE (STR_SIZE(0) + 1 + 1 + 1 + 4 + 4 + 8 + 8 + 8 + STR_SIZE(0) + 8)

/* The in-flight flags this build defines. */
#define INFLIGHT_KNOWN_FLAGS (FR_WIRE_INFLIGHT_NONBLOCKING | FR_WIRE_INFLIGHT_WAITED)

static const char *const msg_names[] = {
#define FR_MSG_NAME(T, v, n) [v] = #n,
	FR_WIRE_MESSAGES(FR_MSG_NAME)
#undef FR_MSG_NAME
};

const char *fr_msg_name(unsigned type)
{
	if (type >= ARRAY_SIZE(msg_names))
		return NULL;
	return msg_names[type];
}

unsigned fr_wire_msg_version(unsigned type)
{
	if (!fr_msg_name(type))
		return 0;
	if (type >= FR_MSG_TIMING)
		return 7;
	if (type >= FR_MSG_CRASH)
		return 6;
	if (type >= FR_MSG_VERSION)
		return 5;
	if (type >= FR_MSG_NODE_HELLO)
		return 4;
	return type >= FR_MSG_DAEMON_CHALLENGE ? 3 : type >= FR_MSG_CHALLENGE ? 2 : 1;
}

/* HELLO */

size_t fr_wire_hello_size(const struct fr_msg_hello *m)
{
	return FR_WIRE_HEADER_SIZE + STR_SIZE(str_len(m->job, FR_JOB_MAX)) + 4 + 4 + 4 +
	       STR_SIZE(str_len(m->host, FR_HOST_MAX)) + 4 + 8 +
	       STR_SIZE(str_len(m->comm_lib, FR_LIBVER_MAX));
}

int fr_wire_hello_encode(const struct fr_msg_hello *m, uint8_t *buf, size_t cap)
{
	size_t job = str_len(m->job, FR_JOB_MAX);
	size_t host = str_len(m->host, FR_HOST_MAX);
	size_t lib = str_len(m->comm_lib, FR_LIBVER_MAX);
	struct wr w;
	int total;

	if (job > FR_JOB_MAX || host > FR_HOST_MAX || lib > FR_LIBVER_MAX)
		return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_HELLO, fr_wire_hello_size(m));
	if (total < 0)
		return total;
	wr_str(&w, m->job, job);
	wr_u32(&w, m->rank);
	wr_u32(&w, m->world_size);
	wr_u32(&w, m->pid);
	wr_str(&w, m->host, host);
	wr_u32(&w, m->ring_capacity);
	wr_u64(&w, m->start_ns);
	wr_str(&w, m->comm_lib, lib);
	return wr_end(&w, buf, total);
}

int fr_wire_hello_decode(const uint8_t *payload, size_t len, struct fr_msg_hello *m)
{
	struct rd r = rd_init(payload, len);

	memset(m, 0, sizeof(*m));
	rd_str(&r, m->job, FR_JOB_MAX);
	m->rank = rd_u32(&r);
	m->world_size = rd_u32(&r);
	m->pid = rd_u32(&r);
	rd_str(&r, m->host, FR_HOST_MAX);
	m->ring_capacity = rd_u32(&r);
	m->start_ns = rd_u64(&r);
	rd_str(&r, m->comm_lib, FR_LIBVER_MAX);
	if (!rd_ok(&r)) {
		memset(m, 0, sizeof(*m));
		return -EPROTO;
	}
	return 0;
}

/* COMM and COMM_RUNS start alike: id, desc, this rank's rank, size. */

static void wr_comm_head(struct wr *w, const char *id, const char *desc, uint32_t rank,
			 uint32_t size)
{
	wr_str(w, id, str_len(id, FR_COMM_ID_MAX));
	wr_str(w, desc, str_len(desc, FR_COMM_DESC_MAX));
	wr_u32(w, rank);
	wr_u32(w, size);
}

/* The head up to `size`, which each message reads its own way. */
static void rd_comm_head(struct rd *r, char *id, char *desc, uint32_t *rank)
{
	rd_str(r, id, FR_COMM_ID_MAX);
	rd_str(r, desc, FR_COMM_DESC_MAX);
	*rank = rd_u32(r);
}

/* COMM */

size_t fr_wire_comm_size(const struct fr_msg_comm *m)
{
	return FR_WIRE_HEADER_SIZE + STR_SIZE(str_len(m->id, FR_COMM_ID_MAX)) +
	       STR_SIZE(str_len(m->desc, FR_COMM_DESC_MAX)) + 4 + 4 + 4 * (size_t)m->size;
}

int fr_wire_comm_encode(const struct fr_msg_comm *m, uint8_t *buf, size_t cap)
{
	size_t id = str_len(m->id, FR_COMM_ID_MAX);
	size_t desc = str_len(m->desc, FR_COMM_DESC_MAX);
	struct wr w;
	int total;

	if (id > FR_COMM_ID_MAX || desc > FR_COMM_DESC_MAX)
		return -EINVAL;
	if (m->rank >= m->size || !m->members)
		return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_COMM, fr_wire_comm_size(m));
	if (total < 0)
		return total;
	wr_comm_head(&w, m->id, m->desc, m->rank, m->size);
	for (uint32_t i = 0; i < m->size; i++)
		wr_u32(&w, m->members[i]);
	return wr_end(&w, buf, total);
}

int fr_wire_comm_decode(const uint8_t *payload, size_t len, struct fr_msg_comm *m)
{
	struct rd r = rd_init(payload, len);
	int ret = -EPROTO;

	memset(m, 0, sizeof(*m));
	rd_comm_head(&r, m->id, m->desc, &m->rank);
	m->size = rd_count(&r, 4, 0);
	if (!r.bad && m->rank >= m->size)
		rd_fail(&r);
	if (r.bad)
		goto out_free;

	m->members = malloc(m->size * sizeof(*m->members));
	if (!m->members) {
		ret = -ENOMEM;
		goto out_free;
	}
	for (uint32_t i = 0; i < m->size; i++)
		m->members[i] = rd_u32(&r);
	if (rd_ok(&r))
		return 0;
out_free:
	/* Frees what was taken; the message was zeroed first. */
	fr_wire_comm_free(m);
	return ret;
}

FR_WIRE_FREE_ONE(fr_wire_comm_free, struct fr_msg_comm, members)

/* COMM_RUNS */

size_t fr_wire_comm_runs_size(const struct fr_msg_comm_runs *m)
{
	return FR_WIRE_HEADER_SIZE + STR_SIZE(str_len(m->id, FR_COMM_ID_MAX)) +
	       STR_SIZE(str_len(m->desc, FR_COMM_DESC_MAX)) + 4 + 4 + 4 +
	       FR_NODE_MAP_SIZE * (size_t)m->nruns;
}

int fr_wire_comm_runs_encode(const struct fr_msg_comm_runs *m, uint8_t *buf, size_t cap)
{
	size_t id = str_len(m->id, FR_COMM_ID_MAX);
	size_t desc = str_len(m->desc, FR_COMM_DESC_MAX);
	struct wr w;
	int total;

	if (id > FR_COMM_ID_MAX || desc > FR_COMM_DESC_MAX || m->rank >= m->size ||
	    (m->nruns && !m->runs) || fr_node_maps_check(m->runs, m->nruns, m->size))
		return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_COMM_RUNS, fr_wire_comm_runs_size(m));
	if (total < 0)
		return total;
	wr_comm_head(&w, m->id, m->desc, m->rank, m->size);
	wr_u32(&w, m->nruns);
	wr_runs(&w, m->runs, m->nruns);
	return wr_end(&w, buf, total);
}

/*
 * Decodes a COMM_RUNS payload, its runs checked only when `check`, so that
 * fr_wire_comm_runs_why() can ask fr_node_maps_check() what is wrong.
 */
static int comm_runs_read(const uint8_t *payload, size_t len, struct fr_msg_comm_runs *m,
			  bool check)
{
	struct rd r = rd_init(payload, len);
	int ret = -EPROTO;

	memset(m, 0, sizeof(*m));
	rd_comm_head(&r, m->id, m->desc, &m->rank);
	m->size = rd_u32(&r);
	m->nruns = rd_count(&r, FR_NODE_MAP_SIZE, 0);
	if (!r.bad && m->rank >= m->size)
		rd_fail(&r);
	if (rd_array(&r, (void **)&m->runs, m->nruns, sizeof(*m->runs), &ret) < 0)
		goto out_free;
	rd_runs(&r, m->runs, m->nruns);
	if (check && fr_node_maps_check(m->runs, m->nruns, m->size))
		rd_fail(&r);
	if (rd_ok(&r))
		return 0;
out_free:
	/* Frees what was taken; the message was zeroed first. */
	fr_wire_comm_runs_free(m);
	return ret;
}

int fr_wire_comm_runs_decode(const uint8_t *payload, size_t len, struct fr_msg_comm_runs *m)
{
	return comm_runs_read(payload, len, m, true);
}

const char *fr_wire_comm_runs_why(const uint8_t *payload, size_t len)
{
	struct fr_msg_comm_runs m;
	const char *why;

	if (comm_runs_read(payload, len, &m, false))
		return "comm_runs malformed: truncated, over-long, or its rank not below its size";
	why = fr_node_maps_check(m.runs, m.nruns, m.size);
	fr_wire_comm_runs_free(&m);
	return why ? why : "comm_runs accepted";
}

FR_WIRE_FREE_ONE(fr_wire_comm_runs_free, struct fr_msg_comm_runs, runs)

/* VERSION and WELCOME: the newest version each side speaks, 5 or more. */

#define VERSION_CODEC(n, T)                                                           \
	size_t fr_wire_##n##_size(const struct fr_msg_##n *m)                         \
	{                                                                             \
		(void)m;                                                              \
		return FR_WIRE_HEADER_SIZE + 2;                                       \
	}                                                                             \
                                                                                      \
	int fr_wire_##n##_encode(const struct fr_msg_##n *m, uint8_t *buf, size_t cap) \
	{                                                                             \
		struct wr w;                                                          \
		int total;                                                            \
                                                                                      \
		if (m->version < 5)                                                   \
			return -EINVAL;                                               \
		total = wr_begin(&w, buf, cap, FR_MSG_##T, fr_wire_##n##_size(m));    \
		if (total < 0)                                                        \
			return total;                                                 \
		wr_u16(&w, m->version);                                               \
		return wr_end(&w, buf, total);                                        \
	}                                                                             \
                                                                                      \
	int fr_wire_##n##_decode(const uint8_t *payload, size_t len, struct fr_msg_##n *m) \
	{                                                                             \
		struct rd r = rd_init(payload, len);                                  \
                                                                                      \
		m->version = rd_u16(&r);                                              \
		if (!rd_ok(&r) || m->version < 5) {                                   \
			memset(m, 0, sizeof(*m));                                     \
			return -EPROTO;                                               \
		}                                                                     \
		return 0;                                                             \
	}

VERSION_CODEC(version, VERSION)
VERSION_CODEC(welcome, WELCOME)
#undef VERSION_CODEC

/*
 * CRASH. The encoder runs in a signal handler (agent/crash.c): it only
 * reads the struct and writes the buffer, no allocation, no lock.
 */

#define CRASH_FIXED_SIZE (4 + 4 + 8 + 8 + 8 + 4 + 2)

static bool crash_valid(const struct fr_msg_crash *m)
{
	if (m->signo == 0 || m->signo > 64 || m->nframes > FR_WIRE_CRASH_FRAMES_MAX)
		return false;
	for (unsigned i = 0; i < m->nframes; i++)
		if (str_len(m->frames[i].name, FR_WIRE_SYMBOL_MAX) > FR_WIRE_SYMBOL_MAX)
			return false;
	return true;
}

size_t fr_wire_crash_size(const struct fr_msg_crash *m)
{
	size_t n = FR_WIRE_HEADER_SIZE + CRASH_FIXED_SIZE;

	for (unsigned i = 0; i < m->nframes && i < FR_WIRE_CRASH_FRAMES_MAX; i++)
		n += 8 + 8 + STR_SIZE(str_len(m->frames[i].name, FR_WIRE_SYMBOL_MAX));
	return n;
}

int fr_wire_crash_encode(const struct fr_msg_crash *m, uint8_t *buf, size_t cap)
{
	struct wr w;
	int total;

	if (!crash_valid(m))
		return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_CRASH, fr_wire_crash_size(m));
	if (total < 0)
		return total;
	wr_u32(&w, m->signo);
	wr_u32(&w, (uint32_t)m->code);
	wr_u64(&w, m->fault_addr);
	wr_u64(&w, m->time_ns);
	wr_u64(&w, m->ring_head);
	wr_u32(&w, m->tid);
	wr_u16(&w, m->nframes);
	for (unsigned i = 0; i < m->nframes; i++) {
		const struct fr_wire_frame_sym *f = &m->frames[i];

		wr_u64(&w, f->ip);
		wr_u64(&w, f->offset);
		wr_str(&w, f->name, str_len(f->name, FR_WIRE_SYMBOL_MAX));
	}
	return wr_end(&w, buf, total);
}

int fr_wire_crash_decode(const uint8_t *payload, size_t len, struct fr_msg_crash *m)
{
	struct rd r = rd_init(payload, len);

	memset(m, 0, sizeof(*m));
	m->signo = rd_u32(&r);
	m->code = (int32_t)rd_u32(&r);
	m->fault_addr = rd_u64(&r);
	m->time_ns = rd_u64(&r);
	m->ring_head = rd_u64(&r);
	m->tid = rd_u32(&r);
	m->nframes = rd_u16(&r);
	if (m->nframes > FR_WIRE_CRASH_FRAMES_MAX || m->signo == 0 || m->signo > 64)
		rd_fail(&r);
	for (unsigned i = 0; i < m->nframes && !r.bad; i++) {
		struct fr_wire_frame_sym *f = &m->frames[i];

		f->ip = rd_u64(&r);
		f->offset = rd_u64(&r);
		rd_str(&r, f->name, FR_WIRE_SYMBOL_MAX);
	}
	if (!rd_ok(&r)) {
		memset(m, 0, sizeof(*m));
		return -EPROTO;
	}
	return 0;
}

/* EXIT: fixed size, so that the agent's exit path never allocates for it. */

#define EXIT_PAYLOAD (4 + 4 + 4 + 8 + 8)

size_t fr_wire_exit_size(const struct fr_msg_exit *m)
{
	(void)m;
	return FR_WIRE_HEADER_SIZE + EXIT_PAYLOAD;
}

int fr_wire_exit_encode(const struct fr_msg_exit *m, uint8_t *buf, size_t cap)
{
	struct wr w;
	int total;

	if (m->flags & ~FR_WIRE_EXIT_FLAGS)
		return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_EXIT, fr_wire_exit_size(m));
	if (total < 0)
		return total;
	wr_u32(&w, (uint32_t)m->code);
	wr_u32(&w, m->flags);
	wr_u32(&w, m->inflight);
	wr_u64(&w, m->time_ns);
	wr_u64(&w, m->ring_head);
	return wr_end(&w, buf, total);
}

int fr_wire_exit_decode(const uint8_t *payload, size_t len, struct fr_msg_exit *m)
{
	struct rd r = rd_init(payload, len);

	memset(m, 0, sizeof(*m));
	m->code = (int32_t)rd_u32(&r);
	m->flags = rd_u32(&r);
	m->inflight = rd_u32(&r);
	m->time_ns = rd_u64(&r);
	m->ring_head = rd_u64(&r);
	if (m->flags & ~FR_WIRE_EXIT_FLAGS)
		rd_fail(&r);
	if (!rd_ok(&r)) {
		memset(m, 0, sizeof(*m));
		return -EPROTO;
	}
	return 0;
}

/* NCCL_ERROR */

size_t fr_wire_nccl_error_size(const struct fr_msg_nccl_error *m)
{
	return FR_WIRE_HEADER_SIZE + STR_SIZE(str_len(m->comm, FR_COMM_ID_MAX)) + 4 + 8 +
	       STR_SIZE(str_len(m->message, FR_WIRE_NCCL_MESSAGE_MAX));
}

int fr_wire_nccl_error_encode(const struct fr_msg_nccl_error *m, uint8_t *buf, size_t cap)
{
	struct wr w;
	int total;

	if (m->result == 0 || str_len(m->comm, FR_COMM_ID_MAX) > FR_COMM_ID_MAX ||
	    str_len(m->message, FR_WIRE_NCCL_MESSAGE_MAX) > FR_WIRE_NCCL_MESSAGE_MAX)
		return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_NCCL_ERROR, fr_wire_nccl_error_size(m));
	if (total < 0)
		return total;
	wr_str(&w, m->comm, str_len(m->comm, FR_COMM_ID_MAX));
	wr_u32(&w, m->result);
	wr_u64(&w, m->time_ns);
	wr_str(&w, m->message, str_len(m->message, FR_WIRE_NCCL_MESSAGE_MAX));
	return wr_end(&w, buf, total);
}

int fr_wire_nccl_error_decode(const uint8_t *payload, size_t len, struct fr_msg_nccl_error *m)
{
	struct rd r = rd_init(payload, len);

	memset(m, 0, sizeof(*m));
	rd_str(&r, m->comm, FR_COMM_ID_MAX);
	m->result = rd_u32(&r);
	m->time_ns = rd_u64(&r);
	rd_str(&r, m->message, FR_WIRE_NCCL_MESSAGE_MAX);
	if (m->result == 0)
		rd_fail(&r);
	if (!rd_ok(&r)) {
		memset(m, 0, sizeof(*m));
		return -EPROTO;
	}
	return 0;
}

/* PROGRESS */

size_t fr_wire_progress_size(const struct fr_msg_progress *m)
{
	size_t n = FR_WIRE_HEADER_SIZE + 4 + 4;

	/* Encode refuses a count without its array; do not follow NULL here. */
	for (uint32_t i = 0; m->comms && i < m->ncomms; i++)
		n += STR_SIZE(str_len(m->comms[i].comm, FR_COMM_ID_MAX)) + 8 + 8;
	for (uint32_t i = 0; m->inflight && i < m->ninflight; i++) {
		const struct fr_wire_inflight *op = &m->inflight[i];

		n += STR_SIZE(str_len(op->comm, FR_COMM_ID_MAX)) + 1 + 1 + 1 + 4 + 4 + 8 + 8 + 8 +
		     STR_SIZE(str_len(op->dtype, FR_DTYPE_MAX)) + 8;
	}
	return n;
}

/* A waited operation is a non-blocking one the rank now waits on. */
static bool inflight_flags_valid(uint8_t flags)
{
	return !(flags & FR_WIRE_INFLIGHT_WAITED) || (flags & FR_WIRE_INFLIGHT_NONBLOCKING);
}

static bool inflight_valid(const struct fr_wire_inflight *op)
{
	return str_len(op->comm, FR_COMM_ID_MAX) <= FR_COMM_ID_MAX &&
	       str_len(op->dtype, FR_DTYPE_MAX) <= FR_DTYPE_MAX && op->is_p2p <= 1 &&
	       op->peer >= -1 && op->peer_in_comm >= -1 && !(op->flags & ~INFLIGHT_KNOWN_FLAGS) &&
	       inflight_flags_valid(op->flags);
}

int fr_wire_progress_encode(const struct fr_msg_progress *m, uint8_t *buf, size_t cap)
{
	struct wr w;
	int total;

	if ((m->ncomms && !m->comms) || (m->ninflight && !m->inflight))
		return -EINVAL;
	for (uint32_t i = 0; i < m->ncomms; i++)
		if (str_len(m->comms[i].comm, FR_COMM_ID_MAX) > FR_COMM_ID_MAX)
			return -EINVAL;
	for (uint32_t i = 0; i < m->ninflight; i++)
		if (!inflight_valid(&m->inflight[i]))
			return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_PROGRESS, fr_wire_progress_size(m));
	if (total < 0)
		return total;

	wr_u32(&w, m->ncomms);
	for (uint32_t i = 0; i < m->ncomms; i++) {
		const struct fr_wire_comm_progress *c = &m->comms[i];

		wr_str(&w, c->comm, str_len(c->comm, FR_COMM_ID_MAX));
		wr_u64(&w, c->last_entered);
		wr_u64(&w, c->last_completed);
	}
	wr_u32(&w, m->ninflight);
	for (uint32_t i = 0; i < m->ninflight; i++) {
		const struct fr_wire_inflight *op = &m->inflight[i];

		wr_str(&w, op->comm, str_len(op->comm, FR_COMM_ID_MAX));
		wr_u8(&w, op->type);
		wr_u8(&w, op->is_p2p);
		wr_u8(&w, op->flags);
		wr_u32(&w, (uint32_t)op->peer);
		wr_u32(&w, (uint32_t)op->peer_in_comm);
		wr_u64(&w, op->seq);
		wr_u64(&w, op->count);
		wr_u64(&w, op->bytes);
		wr_str(&w, op->dtype, str_len(op->dtype, FR_DTYPE_MAX));
		wr_u64(&w, op->age_ms);
	}
	return wr_end(&w, buf, total);
}

void fr_wire_progress_free(struct fr_msg_progress *m)
{
	if (!m)
		return;
	free(m->comms);
	free(m->inflight);
	memset(m, 0, sizeof(*m));
}

int fr_wire_progress_decode(const uint8_t *payload, size_t len, struct fr_msg_progress *m)
{
	struct rd r = rd_init(payload, len);
	int ret = -EPROTO;

	memset(m, 0, sizeof(*m));
	/* Keep room for the in-flight count that follows the comms. */
	m->ncomms = rd_count(&r, COMM_PROGRESS_MIN_SIZE, 4);
	if (rd_array(&r, (void **)&m->comms, m->ncomms, sizeof(*m->comms), &ret) < 0)
		goto out_free;
	for (uint32_t i = 0; i < m->ncomms && !r.bad; i++) {
		struct fr_wire_comm_progress *c = &m->comms[i];

		rd_str(&r, c->comm, FR_COMM_ID_MAX);
		c->last_entered = rd_u64(&r);
		c->last_completed = rd_u64(&r);
	}

	m->ninflight = rd_count(&r, INFLIGHT_MIN_SIZE, 0);
	if (rd_array(&r, (void **)&m->inflight, m->ninflight, sizeof(*m->inflight), &ret) < 0)
		goto out_free;
	for (uint32_t i = 0; i < m->ninflight && !r.bad; i++) {
		struct fr_wire_inflight *op = &m->inflight[i];

		rd_str(&r, op->comm, FR_COMM_ID_MAX);
		op->type = rd_u8(&r);
		op->is_p2p = rd_u8(&r);
		op->flags = rd_u8(&r);
		op->peer = (int32_t)rd_u32(&r);
		op->peer_in_comm = (int32_t)rd_u32(&r);
		op->seq = rd_u64(&r);
		op->count = rd_u64(&r);
		op->bytes = rd_u64(&r);
		rd_str(&r, op->dtype, FR_DTYPE_MAX);
		op->age_ms = rd_u64(&r);
		if (op->is_p2p > 1 || op->peer < -1 || op->peer_in_comm < -1 ||
		    !inflight_flags_valid(op->flags))
			rd_fail(&r);
		op->flags &= INFLIGHT_KNOWN_FLAGS;
	}
	if (rd_ok(&r))
		return 0;
out_free:
	/* Frees what was taken; the message was zeroed first. */
	fr_wire_progress_free(m);
	return ret;
}

/* TIMING */

size_t fr_wire_timing_size(const struct fr_msg_timing *m)
{
	size_t n = FR_WIRE_HEADER_SIZE + 4;

	for (uint32_t i = 0; m->samples && i < m->n; i++)
		n += STR_SIZE(str_len(m->samples[i].comm, FR_COMM_ID_MAX)) + 8 + 1 + 1 + 8 + 8;
	return n;
}

int fr_wire_timing_encode(const struct fr_msg_timing *m, uint8_t *buf, size_t cap)
{
	struct wr w;
	int total;

	if ((m->n && !m->samples) || m->n > FR_WIRE_TIMING_MAX)
		return -EINVAL;
	for (uint32_t i = 0; i < m->n; i++)
		if (str_len(m->samples[i].comm, FR_COMM_ID_MAX) > FR_COMM_ID_MAX ||
		    (m->samples[i].flags & ~FR_WIRE_TIMING_FLAGS))
			return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_TIMING, fr_wire_timing_size(m));
	if (total < 0)
		return total;
	wr_u32(&w, m->n);
	for (uint32_t i = 0; i < m->n; i++) {
		const struct fr_wire_timing *t = &m->samples[i];

		wr_str(&w, t->comm, str_len(t->comm, FR_COMM_ID_MAX));
		wr_u64(&w, t->seq);
		wr_u8(&w, t->type);
		wr_u8(&w, t->flags);
		wr_u64(&w, t->entered_ns);
		wr_u64(&w, t->wait_ns);
	}
	return wr_end(&w, buf, total);
}

void fr_wire_timing_free(struct fr_msg_timing *m)
{
	if (!m)
		return;
	free(m->samples);
	memset(m, 0, sizeof(*m));
}

/* Flags this build does not define are refused: a later version that
 * defines more says so in its frames' version. */
int fr_wire_timing_decode(const uint8_t *payload, size_t len, struct fr_msg_timing *m)
{
	struct rd r = rd_init(payload, len);
	int ret = -EPROTO;

	memset(m, 0, sizeof(*m));
	m->n = rd_count(&r, TIMING_MIN_SIZE, 0);
	if (m->n > FR_WIRE_TIMING_MAX)
		goto out_free;
	if (rd_array(&r, (void **)&m->samples, m->n, sizeof(*m->samples), &ret) < 0)
		goto out_free;
	for (uint32_t i = 0; i < m->n && !r.bad; i++) {
		struct fr_wire_timing *t = &m->samples[i];

		rd_str(&r, t->comm, FR_COMM_ID_MAX);
		t->seq = rd_u64(&r);
		t->type = rd_u8(&r);
		t->flags = rd_u8(&r);
		t->entered_ns = rd_u64(&r);
		t->wait_ns = rd_u64(&r);
		if (t->flags & ~FR_WIRE_TIMING_FLAGS)
			rd_fail(&r);
	}
	if (rd_ok(&r))
		return 0;
out_free:
	fr_wire_timing_free(m);
	return ret;
}

/* HEARTBEAT */

size_t fr_wire_heartbeat_size(const struct fr_msg_heartbeat *m)
{
	(void)m;
	return FR_WIRE_HEADER_SIZE + 8;
}

int fr_wire_heartbeat_encode(const struct fr_msg_heartbeat *m, uint8_t *buf, size_t cap)
{
	struct wr w;
	int total;

	total = wr_begin(&w, buf, cap, FR_MSG_HEARTBEAT, fr_wire_heartbeat_size(m));
	if (total < 0)
		return total;
	wr_u64(&w, m->now_ns);
	return wr_end(&w, buf, total);
}

int fr_wire_heartbeat_decode(const uint8_t *payload, size_t len, struct fr_msg_heartbeat *m)
{
	struct rd r = rd_init(payload, len);

	memset(m, 0, sizeof(*m));
	m->now_ns = rd_u64(&r);
	if (!rd_ok(&r)) {
		memset(m, 0, sizeof(*m));
		return -EPROTO;
	}
	return 0;
}

/* DUMP_REQUEST */

size_t fr_wire_dump_request_size(const struct fr_msg_dump_request *m)
{
	return FR_WIRE_HEADER_SIZE + STR_SIZE(str_len(m->incident, FR_INCIDENT_MAX)) +
	       STR_SIZE(str_len(m->reason, FR_REASON_MAX));
}

int fr_wire_dump_request_encode(const struct fr_msg_dump_request *m, uint8_t *buf, size_t cap)
{
	size_t incident = str_len(m->incident, FR_INCIDENT_MAX);
	size_t reason = str_len(m->reason, FR_REASON_MAX);
	struct wr w;
	int total;

	if (incident > FR_INCIDENT_MAX || reason > FR_REASON_MAX)
		return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_DUMP_REQUEST, fr_wire_dump_request_size(m));
	if (total < 0)
		return total;
	wr_str(&w, m->incident, incident);
	wr_str(&w, m->reason, reason);
	return wr_end(&w, buf, total);
}

int fr_wire_dump_request_decode(const uint8_t *payload, size_t len,
				struct fr_msg_dump_request *m)
{
	struct rd r = rd_init(payload, len);

	memset(m, 0, sizeof(*m));
	rd_str(&r, m->incident, FR_INCIDENT_MAX);
	rd_str(&r, m->reason, FR_REASON_MAX);
	if (!rd_ok(&r)) {
		memset(m, 0, sizeof(*m));
		return -EPROTO;
	}
	return 0;
}

/* DUMP_DATA */

/* A piece is acceptable when it is small enough and lies inside its dump. */
static bool dump_piece_valid(uint64_t offset, uint64_t total, uint32_t len)
{
	return len <= FR_WIRE_DUMP_CHUNK && offset <= total && len <= total - offset;
}

size_t fr_wire_dump_data_size(const struct fr_msg_dump_data *m)
{
	return FR_WIRE_HEADER_SIZE + STR_SIZE(str_len(m->incident, FR_INCIDENT_MAX)) + 8 + 8 +
	       4 + m->len;
}

int fr_wire_dump_data_encode(const struct fr_msg_dump_data *m, uint8_t *buf, size_t cap)
{
	size_t incident = str_len(m->incident, FR_INCIDENT_MAX);
	struct wr w;
	int total;

	if (incident > FR_INCIDENT_MAX || !dump_piece_valid(m->offset, m->total, m->len) ||
	    (m->len && !m->data))
		return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_DUMP_DATA, fr_wire_dump_data_size(m));
	if (total < 0)
		return total;
	wr_str(&w, m->incident, incident);
	wr_u64(&w, m->offset);
	wr_u64(&w, m->total);
	wr_u32(&w, m->len);
	wr_bytes(&w, m->data, m->len);
	return wr_end(&w, buf, total);
}

int fr_wire_dump_data_decode(const uint8_t *payload, size_t len, struct fr_msg_dump_data *m)
{
	struct rd r = rd_init(payload, len);

	memset(m, 0, sizeof(*m));
	rd_str(&r, m->incident, FR_INCIDENT_MAX);
	m->offset = rd_u64(&r);
	m->total = rd_u64(&r);
	m->len = rd_u32(&r);
	if (!r.bad && (!dump_piece_valid(m->offset, m->total, m->len) || m->len != r.left))
		rd_fail(&r);
	m->data = rd_take(&r, m->len);
	if (!rd_ok(&r)) {
		memset(m, 0, sizeof(*m));
		return -EPROTO;
	}
	return 0;
}

/* BYE */

size_t fr_wire_bye_size(const struct fr_msg_bye *m)
{
	(void)m;
	return FR_WIRE_HEADER_SIZE + 4;
}

int fr_wire_bye_encode(const struct fr_msg_bye *m, uint8_t *buf, size_t cap)
{
	struct wr w;
	int total;

	if (m->reserved != 0)
		return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_BYE, fr_wire_bye_size(m));
	if (total < 0)
		return total;
	wr_u32(&w, m->reserved);
	return wr_end(&w, buf, total);
}

int fr_wire_bye_decode(const uint8_t *payload, size_t len, struct fr_msg_bye *m)
{
	struct rd r = rd_init(payload, len);

	memset(m, 0, sizeof(*m));
	m->reserved = rd_u32(&r);
	if (m->reserved != 0)
		rd_fail(&r);
	if (!rd_ok(&r)) {
		memset(m, 0, sizeof(*m));
		return -EPROTO;
	}
	return 0;
}

/*
 * CHALLENGE, AUTH, DAEMON_CHALLENGE and DAEMON_PROOF: each payload is one
 * 32-byte value (a nonce or a proof), and nothing else.
 */
_Static_assert(FR_WIRE_NONCE_SIZE == 32 && FR_WIRE_PROOF_SIZE == 32, "nonces and proofs are 32 bytes");

static int bytes32_decode(const uint8_t *payload, size_t len, uint8_t out[32])
{
	struct rd r = rd_init(payload, len);
	const uint8_t *p = rd_take(&r, 32);

	memset(out, 0, 32);
	if (!rd_ok(&r))
		return -EPROTO;
	memcpy(out, p, 32);
	return 0;
}

static int bytes32_encode(unsigned type, const uint8_t in[32], uint8_t *buf, size_t cap)
{
	struct wr w;
	int total = wr_begin(&w, buf, cap, type, FR_WIRE_HEADER_SIZE + 32);

	if (total < 0)
		return total;
	wr_bytes(&w, in, 32);
	return wr_end(&w, buf, total);
}

/* The size, encoder and decoder of a message whose payload is `field`. */
#define BYTES32_MESSAGE(name, TYPE, field)                                                  \
	size_t fr_wire_##name##_size(const struct fr_msg_##name *m)                         \
	{                                                                                   \
		(void)m;                                                                    \
		return FR_WIRE_HEADER_SIZE + 32;                                            \
	}                                                                                   \
	int fr_wire_##name##_encode(const struct fr_msg_##name *m, uint8_t *buf, size_t cap) \
	{                                                                                   \
		return bytes32_encode(FR_MSG_##TYPE, m->field, buf, cap);                   \
	}                                                                                   \
	int fr_wire_##name##_decode(const uint8_t *payload, size_t len,                     \
				    struct fr_msg_##name *m)                                \
	{                                                                                   \
		return bytes32_decode(payload, len, m->field);                              \
	}

BYTES32_MESSAGE(challenge, CHALLENGE, nonce)
BYTES32_MESSAGE(auth, AUTH, proof)
BYTES32_MESSAGE(daemon_challenge, DAEMON_CHALLENGE, nonce)
BYTES32_MESSAGE(daemon_proof, DAEMON_PROOF, proof)

/* ERROR */

size_t fr_wire_error_size(const struct fr_msg_error *m)
{
	return FR_WIRE_HEADER_SIZE + 2 + STR_SIZE(str_len(m->message, FR_REASON_MAX));
}

int fr_wire_error_encode(const struct fr_msg_error *m, uint8_t *buf, size_t cap)
{
	size_t message = str_len(m->message, FR_REASON_MAX);
	struct wr w;
	int total;

	if (m->code == 0 || message > FR_REASON_MAX)
		return -EINVAL;
	total = wr_begin(&w, buf, cap, FR_MSG_ERROR, fr_wire_error_size(m));
	if (total < 0)
		return total;
	wr_u16(&w, m->code);
	wr_str(&w, m->message, message);
	return wr_end(&w, buf, total);
}

int fr_wire_error_decode(const uint8_t *payload, size_t len, struct fr_msg_error *m)
{
	struct rd r = rd_init(payload, len);

	memset(m, 0, sizeof(*m));
	m->code = rd_u16(&r);
	if (m->code == 0)
		rd_fail(&r);
	rd_str(&r, m->message, FR_REASON_MAX);
	if (!rd_ok(&r)) {
		memset(m, 0, sizeof(*m));
		return -EPROTO;
	}
	return 0;
}

/* Header */

int fr_wire_header_decode(const uint8_t *buf, size_t len, struct fr_wire_header *h)
{
	struct rd r = rd_init(buf, len);

	memset(h, 0, sizeof(*h));
	if (len < FR_WIRE_HEADER_SIZE)
		return -EAGAIN;
	h->magic = rd_u32(&r);
	h->version = rd_u16(&r);
	h->type = rd_u16(&r);
	h->length = rd_u32(&r);
	h->flags = rd_u32(&r);
	if (h->magic != FR_WIRE_MAGIC)
		return -EPROTO;
	if (h->version < FR_WIRE_VERSION_MIN || h->version > FR_WIRE_VERSION)
		return -EPROTONOSUPPORT;
	if (h->flags != 0)
		return -EPROTO;
	if (h->length > FR_WIRE_MAX_PAYLOAD)
		return -EMSGSIZE;
	if (fr_wire_msg_version(h->type) != h->version)
		return -EBADMSG;
	return 0;
}

bool fr_wire_valid_name(const char *s)
{
	size_t n = 0;

	if (s[0] == '.')
		return false;
	for (; s[n]; n++)
		if (!fr_wire_name_char(s[n]) || n >= FR_JOB_MAX)
			return false;
	return n > 0;
}

/* Live looks' scopes */

/*
 * Reads the decimal number at *s into *v: digits only, no leading zero
 * unless `zero_ok`, at most `max`. Moves *s past it; false when there is
 * none or it is out of bounds.
 */
static bool live_number(const char **s, uint64_t max, bool zero_ok, uint64_t *v)
{
	const char *p = *s;

	*v = 0;
	if (*p < '0' || *p > '9' || (!zero_ok && *p == '0' && p[1] >= '0' && p[1] <= '9'))
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (*v > (max - (uint64_t)(*p - '0')) / 10)
			return false;
		*v = *v * 10 + (uint64_t)(*p - '0');
	}
	*s = p;
	return true;
}

enum fr_wire_live_scope fr_wire_live_scope(const char *id, uint32_t *last)
{
	const char *p = id + sizeof(FR_WIRE_LIVE_PREFIX) - 1;
	uint64_t n, v;

	*last = 0;
	if (strncmp(id, FR_WIRE_LIVE_PREFIX, sizeof(FR_WIRE_LIVE_PREFIX) - 1) != 0)
		return FR_WIRE_LIVE_NONE;
	if (strncmp(p, "stacks-", 7) == 0) {
		p += 7;
		if (live_number(&p, UINT64_MAX, true, &n) && !*p)
			return FR_WIRE_LIVE_STACKS;
	} else if (strncmp(p, "trace", 5) == 0) {
		p += 5;
		if (live_number(&p, FR_WIRE_LIVE_TRACE_MAX, false, &v) && v > 0 && *p++ == '-' &&
		    live_number(&p, UINT64_MAX, true, &n) && !*p) {
			*last = (uint32_t)v;
			return FR_WIRE_LIVE_TRACE;
		}
	}
	return FR_WIRE_LIVE_WHOLE;
}

int fr_wire_live_id(char *out, size_t cap, enum fr_wire_live_scope scope, uint32_t last,
		    uint64_t n)
{
	int len;

	switch (scope) {
	case FR_WIRE_LIVE_WHOLE:
		len = snprintf(out, cap, FR_WIRE_LIVE_PREFIX "%" PRIu64, n);
		break;
	case FR_WIRE_LIVE_STACKS:
		len = snprintf(out, cap, FR_WIRE_LIVE_PREFIX "stacks-%" PRIu64, n);
		break;
	case FR_WIRE_LIVE_TRACE:
		if (last == 0 || last > FR_WIRE_LIVE_TRACE_MAX)
			return -EINVAL;
		len = snprintf(out, cap, FR_WIRE_LIVE_PREFIX "trace%" PRIu32 "-%" PRIu64, last, n);
		break;
	default:
		return -EINVAL;
	}
	return len < 0 || (size_t)len >= cap ? -EMSGSIZE : 0;
}
