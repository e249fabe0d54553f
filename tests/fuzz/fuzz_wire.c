/*
 * libFuzzer target for the frame decoder (protocol/wire.h).
 *
 * The input is a byte stream as a peer would send it: frames back to back.
 * Each frame is found by fr_frame_next() (protocol/frame.h), as the
 * daemon's and the agent's read loops find theirs, then goes through the
 * payload decoder of its type: of every type in FR_WIRE_MESSAGES, those the daemon decodes from agents and
 * those the agent decodes from the daemon alike. The cases are generated
 * from that table, so a message added to it is fuzzed without a change
 * here. The stream stops at the first header that is refused or at a frame
 * cut short, as a connection would be closed there.
 *
 * Besides memory errors, the target checks the contract wire.h and wire.c
 * state, and aborts when it is broken:
 *   - every return value is one wire.h documents;
 *   - a refused payload leaves its message zeroed;
 *   - whatever a decoder accepts, the matching encoder accepts too, into
 *     exactly _size() bytes and not into one byte less, and writes back the
 *     frame it was given (PROGRESS clears in-flight flags this build does
 *     not define, so there the frame written must decode to the same
 *     message instead);
 *   - the values decoders promise to refuse are refused (a COMM rank not
 *     below its size, a DUMP_DATA piece outside its dump, a node's count
 *     over its cap, a run of ranks out of order, a laggard not below its
 *     node's highest, ...).
 *
 * Each frame is copied into a buffer of its exact length, so that a decoder
 * reading past its payload is caught by AddressSanitizer even where the
 * next frame's bytes follow in the input.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "frame.h"
#include "node_wire.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                        \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "fuzz_wire: %s:%d: check failed: %s\n", \
				__FILE__, __LINE__, #cond);                     \
			abort();                                                \
		}                                                               \
	} while (0)

/* The oldest version a header may carry (wire.h names it once it has two). */
#ifdef FR_WIRE_VERSION_MIN
#define FUZZ_VERSION_MIN FR_WIRE_VERSION_MIN
#else
#define FUZZ_VERSION_MIN FR_WIRE_VERSION
#endif

static bool all_zero(const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

/* ---- what each message promises beyond its bytes ---- */

static void check_hello(struct fr_msg_hello *m, const uint8_t *p, size_t len)
{
	(void)p;
	(void)len;
	FUZZ_CHECK(strlen(m->job) <= FR_JOB_MAX && strlen(m->host) <= FR_HOST_MAX &&
		   strlen(m->comm_lib) <= FR_LIBVER_MAX);
#ifdef FR_WIRE_NONCE_SIZE
	/*
	 * The proof of AUTH covers every HELLO the daemon accepts: it can be
	 * computed for one, it verifies, and it stops verifying when one bit
	 * of it changes.
	 */
	{
		static const char secret[] = "fuzz-token-0123456789abcdef";
		static struct fr_token token;
		uint8_t nonce[FR_WIRE_NONCE_SIZE], proof[FR_WIRE_PROOF_SIZE];

		if (!token.len) {
			token.len = sizeof(secret) - 1;
			memcpy(token.bytes, secret, token.len);
		}
		for (size_t i = 0; i < sizeof(nonce); i++)
			nonce[i] = (uint8_t)(i * 37 + len);
		FUZZ_CHECK(fr_wire_auth_proof(&token, nonce, m, proof) == 0);
		FUZZ_CHECK(fr_wire_auth_verify(&token, nonce, m, proof));
		proof[len % sizeof(proof)] ^= (uint8_t)(1u << (len % 8));
		FUZZ_CHECK(!fr_wire_auth_verify(&token, nonce, m, proof));
	}
#endif
}

static void check_comm(struct fr_msg_comm *m, const uint8_t *p, size_t len)
{
	(void)p;
	(void)len;
	FUZZ_CHECK(m->rank < m->size && m->members);
	FUZZ_CHECK(strlen(m->id) <= FR_COMM_ID_MAX && strlen(m->desc) <= FR_COMM_DESC_MAX);
	/* Touch every member: the array must hold `size` of them. */
	for (uint32_t i = 0; i < m->size; i++)
		(void)*(volatile uint32_t *)&m->members[i];
}

static void check_progress(struct fr_msg_progress *m, const uint8_t *p, size_t len)
{
	(void)p;
	(void)len;
	FUZZ_CHECK(!m->ncomms == !m->comms && !m->ninflight == !m->inflight);
	for (uint32_t i = 0; i < m->ncomms; i++)
		FUZZ_CHECK(strlen(m->comms[i].comm) <= FR_COMM_ID_MAX);
	for (uint32_t i = 0; i < m->ninflight; i++) {
		const struct fr_wire_inflight *op = &m->inflight[i];

		FUZZ_CHECK(strlen(op->comm) <= FR_COMM_ID_MAX &&
			   strlen(op->dtype) <= FR_DTYPE_MAX);
		FUZZ_CHECK(op->is_p2p <= 1 && op->peer >= -1 && op->peer_in_comm >= -1);
		FUZZ_CHECK(!(op->flags & ~(FR_WIRE_INFLIGHT_NONBLOCKING | FR_WIRE_INFLIGHT_WAITED)));
		FUZZ_CHECK(!(op->flags & FR_WIRE_INFLIGHT_WAITED) ||
			   (op->flags & FR_WIRE_INFLIGHT_NONBLOCKING));
	}
}

static void check_dump_request(struct fr_msg_dump_request *m, const uint8_t *p, size_t len)
{
	(void)p;
	(void)len;
	FUZZ_CHECK(strlen(m->incident) <= FR_INCIDENT_MAX && strlen(m->reason) <= FR_REASON_MAX);
}

static void check_dump_data(struct fr_msg_dump_data *m, const uint8_t *p, size_t len)
{
	FUZZ_CHECK(strlen(m->incident) <= FR_INCIDENT_MAX);
	FUZZ_CHECK(m->len <= FR_WIRE_DUMP_CHUNK && m->offset <= m->total &&
		   m->len <= m->total - m->offset);
	/* The piece must lie inside the payload it was decoded from. */
	FUZZ_CHECK(!m->len || (m->data >= p && m->data + m->len <= p + len));
}

static void check_bye(struct fr_msg_bye *m, const uint8_t *p, size_t len)
{
	(void)p;
	(void)len;
	FUZZ_CHECK(m->reserved == 0);
}

static void check_node_hello(struct fr_msg_node_hello *m, const uint8_t *p, size_t len)
{
	(void)p;
	(void)len;
	FUZZ_CHECK(strlen(m->node) <= FR_HOST_MAX && m->njobs <= FR_NODE_JOBS_MAX);
	FUZZ_CHECK(!m->njobs == !m->jobs);
	for (uint32_t i = 0; i < m->njobs; i++)
		FUZZ_CHECK(strlen(m->jobs[i].job) <= FR_JOB_MAX);
}

static void check_node_dump_request(struct fr_msg_node_dump_request *m, const uint8_t *p,
				    size_t len)
{
	(void)p;
	(void)len;
	FUZZ_CHECK(fr_wire_valid_name(m->incident) && fr_wire_valid_name(m->job));
	FUZZ_CHECK(m->has_seq <= 1);
}

/* A piece's bytes lie inside the payload and its dump; a failure has none. */
static void check_node_summary(struct fr_msg_node_summary *m, const uint8_t *p, size_t len)
{
	FUZZ_CHECK(fr_wire_valid_name(m->incident) && fr_wire_valid_name(m->job));
	FUZZ_CHECK(!(m->flags & ~FR_NODE_SUMMARY_FLAGS) && m->rank != FR_RANK_UNKNOWN);
	if (m->flags & FR_NODE_SUMMARY_FAILED) {
		FUZZ_CHECK(m->reason[0] && !m->len && !m->total && !m->data);
		return;
	}
	FUZZ_CHECK(!m->reason[0] && m->total && m->len <= FR_WIRE_DUMP_CHUNK);
	FUZZ_CHECK(m->offset + m->len <= m->total);
	FUZZ_CHECK(!m->len || (m->data >= p && m->data + m->len == p + len));
}

static void check_node_fetch(struct fr_msg_node_fetch *m, const uint8_t *p, size_t len)
{
	(void)p;
	(void)len;
	FUZZ_CHECK(fr_wire_valid_name(m->incident) && fr_wire_valid_name(m->job));
	FUZZ_CHECK(m->rank != FR_RANK_UNKNOWN);
}

/* The kernel log's bytes are the rest of the payload, 1 to FR_NODE_KERNEL_LOG_MAX of them. */
static void check_node_kernel_log(struct fr_msg_node_kernel_log *m, const uint8_t *p, size_t len)
{
	FUZZ_CHECK(fr_wire_valid_name(m->incident) && fr_wire_valid_name(m->job));
	FUZZ_CHECK(m->len >= 1 && m->len <= FR_NODE_KERNEL_LOG_MAX);
	FUZZ_CHECK(m->data >= p && m->data + m->len == p + len);
}

static void check_node_look_request(struct fr_msg_node_look_request *m, const uint8_t *p,
				   size_t len)
{
	(void)p;
	(void)len;
	FUZZ_CHECK(fr_wire_valid_name(m->job) && m->kind <= FR_NODE_LOOK_KIND_MAX);
	FUZZ_CHECK((m->kind == FR_NODE_LOOK_JOB_STACKS) == (m->rank == FR_RANK_UNKNOWN));
	FUZZ_CHECK((m->kind == FR_NODE_LOOK_RANK_TRACE) == (m->last != 0));
}

/* Every count within its cap, every class with ranks and `start` among its frames. */
static void check_node_look_stacks(struct fr_msg_node_look_stacks *m, const uint8_t *p,
				   size_t len)
{
	(void)p;
	(void)len;
	FUZZ_CHECK(fr_wire_valid_name(m->job) &&
		   !(m->flags & ~(FR_NODE_LOOK_LAST | FR_NODE_LOOK_PYTHON)));
	FUZZ_CHECK(m->answered <= m->asked && m->nmranges <= FR_NODE_RANGES_MAX);
	FUZZ_CHECK(m->nwhy <= FR_NODE_LOOK_WHY_MAX && m->nclasses <= FR_NODE_LOOK_CLASSES_MAX);
	for (uint32_t i = 0; i < m->nclasses; i++) {
		const struct fr_node_look_class *c = &m->classes[i];

		FUZZ_CHECK(c->nranges >= 1 && c->nranges <= FR_NODE_RANGES_MAX);
		FUZZ_CHECK(c->nframes <= FR_NODE_LOOK_FRAMES_MAX);
		FUZZ_CHECK(c->nframes ? c->start < c->nframes : c->start == 0);
		/* Python frames only under the flag, within their caps. */
		FUZZ_CHECK((m->flags & FR_NODE_LOOK_PYTHON) || (!c->npyframes && !c->py_truncated));
		FUZZ_CHECK(c->npyframes <= FR_NODE_LOOK_PYFRAMES_MAX && c->py_truncated <= 1);
		for (uint32_t j = 0; j < c->npyframes; j++)
			FUZZ_CHECK(strlen(c->pyframes[j].function) <= FR_NODE_LOOK_PYSTR_MAX &&
				   strlen(c->pyframes[j].file) <= FR_NODE_LOOK_PYSTR_MAX);
	}
}

static void check_node_ranks(struct fr_msg_node_ranks *m, const uint8_t *p, size_t len)
{
	(void)p;
	(void)len;
	FUZZ_CHECK(strlen(m->job) <= FR_JOB_MAX && !(m->flags & ~FR_NODE_RANKS_FULL));
	FUZZ_CHECK(m->nranks <= FR_NODE_RANKS_BATCH && !m->nranks == !m->ranks);
	for (uint32_t i = 0; i < m->nranks; i++)
		FUZZ_CHECK(m->ranks[i].rank < m->world_size &&
			   m->ranks[i].state <= FR_NODE_RANK_STATE_MAX &&
			   strlen(m->ranks[i].host) <= FR_HOST_MAX);
}

/* Runs of members, checked apart from fr_node_maps_check(), which the decoders use. */
static void check_runs(const struct fr_node_map *runs, uint32_t n, uint32_t size)
{
	uint64_t next = 0;

	FUZZ_CHECK(!n == !runs);
	for (uint32_t k = 0; k < n; k++) {
		const struct fr_node_map *mp = &runs[k];

		FUZZ_CHECK(mp->count >= 1 && mp->index >= next &&
			   (uint64_t)mp->index + mp->count <= size &&
			   (uint64_t)mp->rank + mp->count <= FR_RANK_UNKNOWN);
		next = (uint64_t)mp->index + mp->count;
	}
}

static void check_node_comms(struct fr_msg_node_comms *m, const uint8_t *p, size_t len)
{
	(void)p;
	(void)len;
	FUZZ_CHECK(strlen(m->job) <= FR_JOB_MAX && !m->ncomms == !m->comms);
	for (uint32_t i = 0; i < m->ncomms; i++)
		check_runs(m->comms[i].maps, m->comms[i].nmaps, m->comms[i].size);
}

static void check_comm_runs(struct fr_msg_comm_runs *m, const uint8_t *p, size_t len)
{
	(void)p;
	(void)len;
	FUZZ_CHECK(strlen(m->id) <= FR_COMM_ID_MAX && strlen(m->desc) <= FR_COMM_DESC_MAX &&
		   m->rank < m->size);
	check_runs(m->runs, m->nruns, m->size);
}

static void check_version(struct fr_msg_version *m, const uint8_t *p, size_t len)
{
	(void)p;
	(void)len;
	FUZZ_CHECK(m->version >= 5);
}

static void check_welcome(struct fr_msg_welcome *m, const uint8_t *p, size_t len)
{
	(void)p;
	(void)len;
	FUZZ_CHECK(m->version >= 5);
}

static void check_crash(struct fr_msg_crash *m, const uint8_t *p, size_t len)
{
	(void)p;
	(void)len;
	FUZZ_CHECK(m->signo >= 1 && m->signo <= 64 && m->nframes <= FR_WIRE_CRASH_FRAMES_MAX);
	for (unsigned i = 0; i < m->nframes; i++)
		FUZZ_CHECK(strlen(m->frames[i].name) <= FR_WIRE_SYMBOL_MAX);
}

static void check_exit(struct fr_msg_exit *m, const uint8_t *p, size_t len)
{
	(void)p;
	(void)len;
	FUZZ_CHECK(!(m->flags & ~FR_WIRE_EXIT_FLAGS));
}

static void check_nccl_error(struct fr_msg_nccl_error *m, const uint8_t *p, size_t len)
{
	(void)p;
	(void)len;
	FUZZ_CHECK(m->result != 0 && strlen(m->comm) <= FR_COMM_ID_MAX &&
		   strlen(m->message) <= FR_WIRE_NCCL_MESSAGE_MAX);
}

static void check_timing(struct fr_msg_timing *m, const uint8_t *p, size_t len)
{
	(void)p;
	(void)len;
	FUZZ_CHECK(m->n <= FR_WIRE_TIMING_MAX);
	for (uint32_t i = 0; i < m->n; i++)
		FUZZ_CHECK(strlen(m->samples[i].comm) <= FR_COMM_ID_MAX &&
			   !(m->samples[i].flags & ~FR_WIRE_TIMING_FLAGS));
}

/* Runs ascending with a gap between them, holding at most `most` ranks. */
static void check_ranges(const struct fr_node_range *r, uint32_t n, uint64_t most)
{
	uint64_t next = 0, total = 0;

	FUZZ_CHECK(n <= FR_NODE_RANGES_MAX);
	for (uint32_t i = 0; i < n; i++) {
		FUZZ_CHECK(r[i].count >= 1 && r[i].first >= next &&
			   (uint64_t)r[i].first + r[i].count <= FR_RANK_UNKNOWN);
		next = (uint64_t)r[i].first + r[i].count + 1;
		total += r[i].count;
	}
	FUZZ_CHECK(total <= most);
}

static void check_node_progress(struct fr_msg_node_progress *m, const uint8_t *p, size_t len)
{
	(void)p;
	(void)len;
	FUZZ_CHECK(m->ncomms <= FR_NODE_PROGRESS_COMMS_MAX && !m->ncomms == !m->comms);
	for (uint32_t i = 0; i < m->ncomms; i++) {
		const struct fr_node_comm_progress *c = &m->comms[i];

		FUZZ_CHECK(c->lo_entered <= c->hi_entered && c->lo_completed <= c->hi_completed);
		check_ranges(c->members, c->nmembers, c->nranks);
		FUZZ_CHECK(c->nlaggards <= FR_NODE_LAGGARDS_MAX &&
			   (uint64_t)c->nlaggards + c->laggards_omitted <= c->nranks);
		for (uint32_t k = 0; k < c->nlaggards; k++)
			FUZZ_CHECK(c->laggards[k].last_entered < c->hi_entered &&
				   c->laggards[k].last_entered >= c->lo_entered);
		FUZZ_CHECK(c->ngroups <= FR_NODE_GROUPS_MAX);
		for (uint32_t k = 0; k < c->ngroups; k++) {
			const struct fr_node_group *g = &c->groups[k];

			FUZZ_CHECK(g->nranks >= 1 && g->nranks <= c->nranks);
			check_ranges(g->ranges, g->nranges, g->nranks);
		}
	}
}

static void check_nothing(const void *m, const uint8_t *p, size_t len)
{
	(void)m;
	(void)p;
	(void)len;
}

/* The check of message `m` by its type; none for a message added later. */
#define CHECK_MSG(m, p, len)                                        \
	_Generic((m),                                               \
		struct fr_msg_hello *: check_hello,                 \
		struct fr_msg_comm *: check_comm,                   \
		struct fr_msg_progress *: check_progress,           \
		struct fr_msg_dump_request *: check_dump_request,   \
		struct fr_msg_dump_data *: check_dump_data,         \
		struct fr_msg_bye *: check_bye,                     \
		struct fr_msg_node_hello *: check_node_hello,       \
		struct fr_msg_node_ranks *: check_node_ranks,       \
		struct fr_msg_node_comms *: check_node_comms,       \
		struct fr_msg_node_progress *: check_node_progress, \
		struct fr_msg_node_dump_request *: check_node_dump_request, \
		struct fr_msg_node_summary *: check_node_summary,   \
		struct fr_msg_node_fetch *: check_node_fetch,       \
		struct fr_msg_comm_runs *: check_comm_runs,         \
		struct fr_msg_version *: check_version,             \
		struct fr_msg_welcome *: check_welcome,             \
		struct fr_msg_node_look_request *: check_node_look_request, \
		struct fr_msg_node_look_stacks *: check_node_look_stacks, \
		struct fr_msg_crash *: check_crash,                 \
		struct fr_msg_exit *: check_exit,                   \
		struct fr_msg_nccl_error *: check_nccl_error,       \
		struct fr_msg_timing *: check_timing,               \
		struct fr_msg_node_kernel_log *: check_node_kernel_log, \
		default: check_nothing)((m), (p), (len))

static void free_nothing(const void *m)
{
	(void)m;
}

/* The messages that own memory: freeing them must zero them too. */
#define FREE_ZEROED(n)                                      \
	static void free_##n(struct fr_msg_##n *m)          \
	{                                                   \
		fr_wire_##n##_free(m);                      \
		FUZZ_CHECK(all_zero(m, sizeof(*m)));        \
	}
FREE_ZEROED(comm)
FREE_ZEROED(progress)
FREE_ZEROED(node_hello)
FREE_ZEROED(node_ranks)
FREE_ZEROED(node_comms)
FREE_ZEROED(node_progress)
FREE_ZEROED(comm_runs)
FREE_ZEROED(node_look_stacks)
FREE_ZEROED(timing)
#undef FREE_ZEROED

/* Frees what a decoded message owns. */
#define FREE_MSG(m)                                                  \
	_Generic((m),                                                \
		struct fr_msg_comm *: free_comm,                     \
		struct fr_msg_progress *: free_progress,             \
		struct fr_msg_node_hello *: free_node_hello,         \
		struct fr_msg_node_ranks *: free_node_ranks,         \
		struct fr_msg_node_comms *: free_node_comms,         \
		struct fr_msg_node_progress *: free_node_progress,   \
		struct fr_msg_comm_runs *: free_comm_runs,           \
		struct fr_msg_node_look_stacks *: free_node_look_stacks, \
		struct fr_msg_timing *: free_timing,                 \
		default: free_nothing)(m)

/* ---- reading a frame back ---- */

static bool progress_equal(const struct fr_msg_progress *a, const struct fr_msg_progress *b)
{
	if (a->ncomms != b->ncomms || a->ninflight != b->ninflight)
		return false;
	/* The arrays come from calloc, so their padding is zero in both. */
	if (a->ncomms && memcmp(a->comms, b->comms, a->ncomms * sizeof(*a->comms)))
		return false;
	if (a->ninflight && memcmp(a->inflight, b->inflight, a->ninflight * sizeof(*a->inflight)))
		return false;
	return true;
}

/*
 * PROGRESS drops unknown in-flight flags, so the frame written from an
 * accepted one may differ from the frame read: it must decode to the same
 * message instead.
 */
static void progress_again(const uint8_t *frame, size_t len, const struct fr_msg_progress *m)
{
	struct fr_msg_progress again;

	FUZZ_CHECK(fr_wire_progress_decode(frame + FR_WIRE_HEADER_SIZE,
					   len - FR_WIRE_HEADER_SIZE, &again) == 0);
	FUZZ_CHECK(progress_equal(m, &again));
	fr_wire_progress_free(&again);
}

/*
 * Decodes the payload of one frame (frame[0..flen), header included, in a
 * buffer of its own) with the decoder of its type, checks the message, then
 * encodes it again and compares.
 */
#define FUZZ_CASE(T, v, n)                                                               \
	case FR_MSG_##T: {                                                               \
		struct fr_msg_##n m;                                                     \
		size_t want;                                                             \
		uint8_t *out;                                                            \
		int rc;                                                                  \
                                                                                         \
		rc = fr_wire_##n##_decode(p, len, &m);                                   \
		FUZZ_CHECK(rc == 0 || rc == -EPROTO || rc == -ENOMEM);                   \
		if (rc) {                                                                \
			FUZZ_CHECK(all_zero(&m, sizeof(m)));                             \
			break;                                                           \
		}                                                                        \
		CHECK_MSG(&m, p, len);                                                   \
		want = fr_wire_##n##_size(&m);                                           \
		FUZZ_CHECK(want >= FR_WIRE_HEADER_SIZE);                                 \
		out = malloc(want);                                                      \
		FUZZ_CHECK(out);                                                         \
		FUZZ_CHECK(fr_wire_##n##_encode(&m, out, want - 1) == -EMSGSIZE);        \
		rc = fr_wire_##n##_encode(&m, out, want);                                \
		FUZZ_CHECK(rc >= 0 && (size_t)rc == want);                               \
		if (FR_MSG_##T == FR_MSG_PROGRESS) {                                     \
			progress_again(out, want, (const struct fr_msg_progress *)&m);   \
		} else {                                                                 \
			FUZZ_CHECK(want == flen);                                        \
			FUZZ_CHECK(memcmp(out, frame, flen) == 0);                       \
		}                                                                        \
		free(out);                                                               \
		FREE_MSG(&m);                                                            \
		break;                                                                   \
	}

static void decode_frame(unsigned type, const uint8_t *frame, size_t flen)
{
	const uint8_t *p = frame + FR_WIRE_HEADER_SIZE;
	size_t len = flen - FR_WIRE_HEADER_SIZE;

	switch (type) {
		FR_WIRE_MESSAGES(FUZZ_CASE)
	default:
		/* fr_wire_header_decode() let through a type not in the table. */
		FUZZ_CHECK(!"header accepted an unknown type");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	while (off < size) {
		struct fr_wire_frame f;
		size_t avail = size - off;
		uint8_t *frame;
		int rc;

		rc = fr_frame_next(data + off, avail, FR_WIRE_MAX_PAYLOAD, &f);
		FUZZ_CHECK(rc == 0 || rc == -EAGAIN || rc == -EPROTO || rc == -EPROTONOSUPPORT ||
			   rc == -EMSGSIZE || rc == -EBADMSG);
		FUZZ_CHECK(f.have_header == (avail >= FR_WIRE_HEADER_SIZE));
		if (!f.have_header) {
			FUZZ_CHECK(rc == -EAGAIN && f.size == FR_WIRE_HEADER_SIZE);
			FUZZ_CHECK(all_zero(&f.h, sizeof(f.h)) && !f.payload);
			break;
		}
		if (rc && rc != -EAGAIN)
			break;
		FUZZ_CHECK(f.h.magic == FR_WIRE_MAGIC && f.h.version >= FUZZ_VERSION_MIN &&
			   f.h.version <= FR_WIRE_VERSION && f.h.flags == 0 &&
			   f.h.length <= FR_WIRE_MAX_PAYLOAD && fr_msg_name(f.h.type));
		FUZZ_CHECK(f.size == FR_WIRE_HEADER_SIZE + (size_t)f.h.length);
		/* Incomplete exactly when the payload is cut short. */
		FUZZ_CHECK((rc == -EAGAIN) == (avail < f.size));
		if (rc == -EAGAIN) {
			FUZZ_CHECK(!f.payload);
			break;
		}
		FUZZ_CHECK(f.payload == data + off + FR_WIRE_HEADER_SIZE);

		/* The frame in a buffer of its own, exactly as long as it. */
		frame = malloc(f.size);
		FUZZ_CHECK(frame);
		memcpy(frame, data + off, f.size);
		decode_frame(f.h.type, frame, f.size);
		free(frame);
		off += f.size;
	}
	return 0;
}
