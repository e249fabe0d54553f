/*
 * Reading dumps (dump.h, format in dumps/FORMAT.md): from a tree of values
 * (value.h) or straight from JSON text, whose entries, when our writer
 * wrote them, skip the tree (written_entry()). Both ways hold an entry to
 * the same rules (entry_type() and the others before read_entry()). The
 * getters and the reading of a dump object are shared with the manifest's
 * reader (dump_read.h).
 */
#include "dump.h"
#include "dump_read.h"
#include "entry.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * The largest world a dump may state: far beyond any MPI job, small enough
 * that arrays indexed by rank stay allocatable.
 */
#define DUMP_WORLD_MAX (1u << 24)

/*
 * Names entries' strings were resolved from, and what they resolved to: a
 * dump's two thousand entries repeat a handful of operation and datatype
 * names, so each is looked up in its table once, and the oldest of more
 * than NAME_SLOTS makes way.
 */
#define NAME_SLOTS 8

struct name_slot {
	char name[64];
	uint32_t len;        /* 0: none yet (an empty name is not cached) */
	int value;
};

struct name_slots {
	struct name_slot at[NAME_SLOTS];
	unsigned next;
};

struct name_cache {
	struct name_slots op, profiling, dtype;
};
/* The slot of `slots` (NULL: no cache) that holds name s[0..n), or NULL;
 * a name is kept by slot_keep() once resolved. */
static inline const struct name_slot *slot_find(const struct name_slots *slots, const char *s,
						size_t n)
{
	for (unsigned i = 0; slots && n && i < NAME_SLOTS; i++)
		if (slots->at[i].len == n && fr_same_bytes(slots->at[i].name, s, n))
			return &slots->at[i];
	return NULL;
}

static inline void slot_keep(struct name_slots *slots, const char *s, size_t n, int value)
{
	struct name_slot *slot;

	if (!slots || n >= sizeof(slot->name))
		return;
	slot = &slots->at[slots->next++ % NAME_SLOTS];
	memcpy(slot->name, s, n);
	slot->len = (uint32_t)n;
	slot->value = value;
}

__attribute__((format(printf, 3, 4)))
int fr_rd_fail(const struct rd *rd, int rc, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!rd->err || !rd->errlen)
		return rc;
	n = snprintf(rd->err, rd->errlen, "%s: ", rd->name);
	if (n >= 0 && (size_t)n < rd->errlen) {
		va_start(ap, fmt);
		vsnprintf(rd->err + n, rd->errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return rc;
}

int fr_rd_nomem(const struct rd *rd)
{
	return fr_rd_fail(rd, -ENOMEM, "out of memory");
}

__attribute__((format(printf, 2, 3)))
const char *fr_rd_at(char *buf, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, AT_MAX, fmt, ap);
	va_end(ap);
	return buf;
}

/* Appends s to the n bytes of buf (AT_MAX), cut short as snprintf would;
 * returns the new length. */
static size_t at_put(char *buf, size_t n, const char *s)
{
	size_t len = strlen(s);

	if (len > AT_MAX - 1 - n)
		len = AT_MAX - 1 - n;
	memcpy(buf + n, s, len);
	buf[n + len] = '\0';
	return n + len;
}

/* These are formatted for every thread, frame and communicator of every
 * dump, before anything is known to be wrong: without printf, which cost
 * a tenth of reading an incident of small dumps. */
static size_t at_path(char *buf, const char *at, const char *key)
{
	size_t n = at_put(buf, 0, at);

	return at_put(buf, *at ? at_put(buf, n, ".") : n, key);
}

const char *fr_rd_path(char *buf, const char *at, const char *key)
{
	at_path(buf, at, key);
	return buf;
}

const char *fr_rd_item(char *buf, const char *at, const char *key, uint64_t i)
{
	char digits[24], *d = digits + sizeof(digits);
	size_t n = at_path(buf, at, key);

	*--d = '\0';
	*--d = ']';
	do
		*--d = (char)('0' + i % 10);
	while (i /= 10);
	*--d = '[';
	at_put(buf, n, d);
	return buf;
}

const char *fr_rd_member(char *buf, const char *at, const char *key, const char *name)
{
	at_put(buf, at_put(buf, at_path(buf, at, key), "."), name);
	return buf;
}

int fr_rd_missing(const struct rd *rd, const char *at,
		  const char *key, const char *what)
{
	char p[AT_MAX];

	return fr_rd_fail(rd, -EPROTO, "%s: missing (expected %s)", fr_rd_path(p, at, key), what);
}

int fr_rd_type(const struct rd *rd, const struct fr_val *v,
	       const char *at, const char *key,
	       const char *what)
{
	char p[AT_MAX];

	return fr_rd_fail(rd, -EPROTO, "%s: expected %s, got %s", fr_rd_path(p, at, key), what,
			  fr_val_type_name(v));
}

int fr_rd_range(const struct rd *rd, const char *at,
		const char *key, int64_t i, int64_t lo,
		uint64_t hi)
{
	char p[AT_MAX];

	return fr_rd_fail(rd, -EPROTO, "%s: %" PRId64 " is out of range (%" PRId64 "..%" PRIu64 ")",
			  fr_rd_path(p, at, key), i, lo, hi);
}

int fr_rd_long(const struct rd *rd, const struct fr_val *v,
	       const char *at, const char *key, size_t max)
{
	char p[AT_MAX];

	return fr_rd_fail(rd, -EPROTO, "%s: %" PRIu32 " bytes long, longer than the limit of %zu",
			  fr_rd_path(p, at, key), v->n, max);
}

int fr_rd_container(const struct rd *rd, const struct fr_val *obj, const char *at,
		    const char *key, bool required, enum fr_val_type type,
		    const struct fr_val **out)
{
	char p[AT_MAX];
	const char *what = type == FR_VAL_OBJECT ? "an object" : "an array";
	const struct fr_val *v = fr_val_get(obj, key);
	int rc = want(rd, v, at, key, required, what);

	*out = NULL;
	if (rc || !present(v))
		return rc;
	if (v->type != type)
		return fr_rd_fail(rd, -EPROTO, "%s: expected %s, got %s", fr_rd_path(p, at, key), what,
				  fr_val_type_name(v));
	*out = v;
	return 0;
}

static const struct doc_kind dump_kind = {
	FR_DUMP_FORMAT, "dump", FR_DUMP_VERSION, FR_DUMP_VERSION_MAJOR, FR_DUMP_VERSION_MAJOR,
};


int fr_rd_header(const struct rd *rd, const struct fr_val *root, const char *at,
		 const struct doc_kind *k, unsigned long *major)
{
	char p[AT_MAX];
	char reads[48];
	const struct fr_val *f, *v;
	const char *s;
	char *end;

	if (!fr_val_is(root, FR_VAL_OBJECT))
		return fr_rd_fail(rd, -EPROTO, "%s%snot a flightrec %s (%s, not an object)", at,
				  *at ? ": " : "", k->kind, fr_val_type_name(root));
	f = fr_val_get(root, "format");
	if (!fr_val_is(f, FR_VAL_STRING))
		return fr_rd_fail(rd, -EPROTO, "%s%snot a flightrec %s (no \"format\": \"%s\")", at,
				  *at ? ": " : "", k->kind, k->format);
	if (strcmp(f->u.s, k->format) != 0)
		return fr_rd_fail(rd, -EPROTO, "%s%snot a flightrec %s (format is \"%.64s\", not \"%s\")",
				  at, *at ? ": " : "", k->kind, f->u.s, k->format);

	v = fr_val_get(root, "version");
	if (!v)
		return fr_rd_fail(rd, -EPROTO, "%s: missing (expected a string such as \"%s\")",
				  fr_rd_path(p, at, "version"), k->version);
	if (!fr_val_is(v, FR_VAL_STRING))
		return fr_rd_fail(rd, -EPROTO, "%s: expected a string such as \"%s\", got %s",
				  fr_rd_path(p, at, "version"), k->version, fr_val_type_name(v));
	s = v->u.s;
	errno = 0;
	*major = strtoul(s, &end, 10);
	if (end == s || *end != '.' || end[1] < '0' || end[1] > '9' || errno || s[0] < '0' ||
	    s[0] > '9')
		return fr_rd_fail(rd, -EPROTO, "%s: \"%.32s\" is not of the form MAJOR.MINOR",
				  fr_rd_path(p, at, "version"), s);
	if (*major < k->oldest || *major > k->newest) {
		if (k->oldest == k->newest)
			snprintf(reads, sizeof(reads), "%lu.x", k->newest);
		else
			snprintf(reads, sizeof(reads), "%lu.x to %lu.x", k->oldest, k->newest);
		return fr_rd_fail(rd, -EPROTONOSUPPORT,
				  "%s%s%s format version %.32s is not supported (this build reads %s)",
				  at, *at ? ": " : "", k->kind, s, reads);
	}
	return 0;
}

int fr_rd_world(const struct rd *rd, const char *at, uint32_t world_size)
{
	char p[AT_MAX];

	if (world_size == 0 || world_size > DUMP_WORLD_MAX)
		return fr_rd_fail(rd, -EPROTO, "%s: %" PRIu32 " is not a valid world size (1..%u)",
				  fr_rd_path(p, at, "world_size"), world_size, DUMP_WORLD_MAX);
	return 0;
}


/*
 * Names PyTorch uses after "nccl:" (or "gloo:") in profiling_name that are
 * not spelled as ours, so that a converted PyTorch entry still gets a type.
 */
static const struct {
	const char *name;
	enum fr_op_type type;
} torch_aliases[] = {
	{ "allreduce", FR_OP_ALL_REDUCE },
	{ "all_reduce_coalesced", FR_OP_ALL_REDUCE },
	{ "allreduce_coalesced", FR_OP_ALL_REDUCE },
	{ "all_reduce_barrier", FR_OP_BARRIER },
	{ "allgather", FR_OP_ALL_GATHER },
	{ "_allgather_base", FR_OP_ALL_GATHER },
	{ "all_gather_into_tensor_coalesced", FR_OP_ALL_GATHER },
	{ "_reduce_scatter_base", FR_OP_REDUCE_SCATTER },
	{ "reduce_scatter_tensor_coalesced", FR_OP_REDUCE_SCATTER },
	{ "alltoall", FR_OP_ALL_TO_ALLV },
	{ "alltoall_base", FR_OP_ALL_TO_ALLV },
	{ "_broadcast_oop", FR_OP_BROADCAST },
	{ "_reduce_oop", FR_OP_REDUCE },
};

/*
 * The `n` bytes at s, fewer than 64, as a C string in buf. The rules of an
 * entry take strings by length: those of written_entry() are views of the
 * text, not NUL-terminated.
 */
static const char *name_str(char buf[64], const char *s, size_t n)
{
	assert(n < 64);
	memcpy(buf, s, n);
	buf[n] = '\0';
	return buf;
}

/* "mpi:all_reduce" -> all_reduce; "nccl:send 1->2" -> send. */
static enum fr_op_type type_from_profiling_name(const char *s)
{
	const char *colon = strchr(s, ':');
	char name[64];
	size_t n;
	enum fr_op_type type;

	if (colon)
		s = colon + 1;
	n = strcspn(s, " ");
	if (n >= sizeof(name))
		return FR_OP_UNKNOWN;
	memcpy(name, s, n);
	name[n] = '\0';
	type = fr_op_from_name(name);
	/* PyTorch's all_to_all may split unevenly: each rank records its own
	 * input, so counts are not compared, as for all_to_allv. */
	if (type == FR_OP_ALL_TO_ALL)
		return FR_OP_ALL_TO_ALLV;
	if (type != FR_OP_UNKNOWN)
		return type;
	for (size_t i = 0; i < sizeof(torch_aliases) / sizeof(torch_aliases[0]); i++)
		if (strcmp(torch_aliases[i].name, name) == 0)
			return torch_aliases[i].type;
	return FR_OP_UNKNOWN;
}

/* Bytes per element of a PyTorch dtype name ("Float", "BFloat16"), for
 * entries without our "bytes"; 0 when unknown. */
static uint64_t torch_dtype_size(const char *dtype)
{
	static const struct {
		const char *name;
		uint8_t size;
	} sizes[] = {
		{ "Double", 8 }, { "Long", 8 }, { "ComplexFloat", 8 }, { "ComplexDouble", 16 },
		{ "Float", 4 }, { "Int", 4 }, { "UInt32", 4 }, { "UInt64", 8 },
		{ "BFloat16", 2 }, { "Half", 2 }, { "Short", 2 }, { "UInt16", 2 },
		{ "Byte", 1 }, { "Char", 1 }, { "Bool", 1 },
	};

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		if (strcmp(sizes[i].name, dtype) == 0)
			return sizes[i].size;
	/* The 8-bit floats: Float8_e4m3fn, Float8_e5m2, ... */
	return strncmp(dtype, "Float8_", 7) == 0 ? 1 : 0;
}

/* The second rank of "x:send A->B" or "x:recv A<-B", or -1. */
static int32_t peer_from_profiling_name(const struct fr_val *v)
{
	const char *s = fr_val_str(v), *arrow;
	long peer;
	char *end;

	/* By length (name_str()): strtol() stops at the NUL or at the closing
	 * quote of a view, neither of which continues a number. */
	if (!s || (!(arrow = memmem(s, v->n, "->", 2)) && !(arrow = memmem(s, v->n, "<-", 2))))
		return -1;
	errno = 0;
	peer = strtol(arrow + 2, &end, 10);
	if (end == arrow + 2 || end != s + v->n || errno || peer < 0 || peer > INT32_MAX)
		return -1;
	return (int32_t)peer;
}

static const struct fr_json_key entry_keys[EF__COUNT] = {
#define EF_KEY(id, key, drop, ...) { key, sizeof(key) - 1, drop },
	ENTRY_FIELDS(EF_KEY)
#undef EF_KEY
};

/* An entry's fields, by enum entry_field; NULL where absent. */
typedef const struct fr_val *entry_fields[EF__COUNT];

#define FIELD(f, id) (f)[EF_##id], at, entry_keys[EF_##id].key

/*
 * Elements of the first tensor of `key` ("input_sizes", "output_sizes":
 * PyTorch's lists of shapes), for entries that carry them but not our
 * "count". *count is left alone when there is none.
 */
static int count_from_sizes(const struct rd *rd, const struct fr_val *sizes, const char *at,
			    const char *key, uint64_t *count)
{
	char p[AT_MAX];
	const struct fr_val *shape;
	uint64_t n = 1;

	if (!present(sizes))
		return 0;
	if (sizes->type != FR_VAL_ARRAY)
		return fr_rd_fail(rd, -EPROTO, "%s: expected an array, got %s",
				  fr_rd_path(p, at, key), fr_val_type_name(sizes));
	if (sizes->n == 0)
		return 0;
	shape = sizes->u.items[0];
	if (shape->type != FR_VAL_ARRAY)
		return fr_rd_fail(rd, -EPROTO, "%s[0]: expected an array, got %s",
				  fr_rd_path(p, at, key), fr_val_type_name(shape));
	for (uint32_t i = 0; i < shape->n; i++) {
		const struct fr_val *dim = shape->u.items[i];
		uint64_t d;

		if (dim->type != FR_VAL_INT || dim->u.i < 0)
			return fr_rd_fail(rd, -EPROTO, "%s[0][%" PRIu32 "]: expected a non-negative integer",
					  fr_rd_path(p, at, key), i);
		d = (uint64_t)dim->u.i;
		n = d && n > UINT64_MAX / d ? UINT64_MAX : n * d;
	}
	*count = n;
	return 0;
}

/*
 * fr_op.size_ratio of an all_gather (`more` output elements for `fewer`
 * input ones) or a reduce_scatter (the other way round): 0 when either is
 * unknown or none.
 */
static uint32_t size_ratio(uint64_t more, uint64_t fewer)
{
	if (!more || !fewer)
		return 0;
	if (more % fewer || more / fewer >= FR_SIZE_RATIO_UNEVEN)
		return FR_SIZE_RATIO_UNEVEN;
	return (uint32_t)(more / fewer);
}

/*
 * An entry's states: ours, and PyTorch's words for an operation on a GPU
 * stream, "scheduled" until the device reaches it and "started" after;
 * both mean not yet completed. Running: the operation blocks its rank.
 */
static const struct {
	const char *name;
	uint32_t len;
	enum fr_op_state state;
	bool running, gpu, started;
} states[] = {
	{ "completed", 9, FR_STATE_COMPLETED, false, false, false },
	{ "entered", 7, FR_STATE_ENTERED, true, false, false },
	{ "scheduled", 9, FR_STATE_ENTERED, false, true, false },
	{ "started", 7, FR_STATE_ENTERED, true, true, true },
};

/*
 * The rules of an entry, over its values once parsed into their types:
 * integers, and strings as pointer and length. read_entry() applies each
 * to the values of a tree as it gets them, saying which one an entry
 * breaks; written_entry() applies them to what it scans from our writer's
 * text, most as it scans each value, the others once it has them all. So
 * the two accept the same entries, as the same operations. The strings an
 * entry keeps have limits of their own: FR_COMM_ID_MAX, FR_DTYPE_MAX and
 * FR_REDOP_MAX bytes.
 */
#define ENTRY_INT_MAX INT64_MAX    /* an integer field: 0 to this */
#define ENTRY_RANK_MAX INT32_MAX   /* a rank: -1 (none) to this */
#define ENTRY_RATIO_MAX UINT32_MAX /* size_ratio: 0 to this */
#define ENTRY_NAME_MAX 63          /* bytes of a name looked up: op, profiling_name */

/* The type of the operation named s[0..n) (at most ENTRY_NAME_MAX bytes)
 * by "op" or, from PyTorch, by `profiling` "profiling_name"; through
 * names' cache (NULL: none). */
static inline __attribute__((always_inline)) enum fr_op_type
entry_type(struct name_cache *names, const char *s, size_t n, bool profiling)
{
	struct name_slots *slots = !names ? NULL : profiling ? &names->profiling : &names->op;
	const struct name_slot *slot = slot_find(slots, s, n);
	enum fr_op_type type;
	char buf[ENTRY_NAME_MAX + 1];

	if (slot)
		return (enum fr_op_type)slot->value;
	name_str(buf, s, n);
	type = profiling ? type_from_profiling_name(buf) : fr_op_from_name(buf);
	slot_keep(slots, s, n, type);
	return type;
}

/* The state named s[0..n) into op, and whether it blocks its rank into
 * *running; false when no state has that name. */
static inline __attribute__((always_inline)) bool
entry_state(struct fr_op *op, const char *s, size_t n, bool *running)
{
	for (size_t k = 0; k < sizeof(states) / sizeof(states[0]); k++) {
		if (states[k].len == n && fr_same_bytes(s, states[k].name, n)) {
			op->state = states[k].state;
			*running = states[k].running;
			op->gpu = states[k].gpu;
			op->started = states[k].started;
			return true;
		}
	}
	return false;
}

/* As on the wire: only a non-blocking operation is waited on. */
static inline __attribute__((always_inline)) bool entry_waited_ok(const struct fr_op *op)
{
	return !op->waited || op->nonblocking;
}

static int read_entry(const struct rd *rd, entry_fields f, const char *at, struct fr_trace *t,
		      struct fr_op *op)
{
	char p[AT_MAX];
	char buf[64];
	struct name_cache *names = rd->names;
	struct name_slots *slots;
	const struct name_slot *slot;
	const struct fr_val *v, *pg;
	uint64_t ratio;
	uint64_t coll_seq = 0, p2p_seq = 0;
	bool running;
	int rc;

	rc = get_u64(rd, FIELD(f, RECORD_ID), true, ENTRY_INT_MAX, &op->record_id);
	if (rc)
		return rc;

	v = f[EF_PG_ID];
	if ((rc = want(rd, FIELD(f, PG_ID), true, "a string")))
		return rc;
	/* PyTorch keys pg_config by group name, which process_group holds;
	 * its pg_id is an index that need not match. Ours write both alike. */
	pg = f[EF_PROCESS_GROUP];
	if (fr_val_is(fr_val_item(pg, 0), FR_VAL_STRING)) {
		if ((rc = str_keep(rd, pg->u.items[0], at, "process_group", FR_COMM_ID_MAX, t,
				   &op->comm)))
			return rc;
	} else if (v->type == FR_VAL_INT) {
		/* PyTorch numbers some process groups. */
		snprintf(buf, sizeof(buf), "%" PRId64, v->u.i);
		if (!(op->comm = fr_trace_str(t, buf)))
			return fr_rd_nomem(rd);
	} else if ((rc = str_keep(rd, v, at, "pg_id", FR_COMM_ID_MAX, t, &op->comm))) {
		return rc;
	}

	if ((rc = get_u64(rd, FIELD(f, COLL_SEQ), true, ENTRY_INT_MAX, &coll_seq)) ||
	    (rc = get_u64(rd, FIELD(f, P2P_SEQ), true, ENTRY_INT_MAX, &p2p_seq)))
		return rc;

	/* Names are looked up where they are, strings of the document. */
	if (present(v = f[EF_OP])) {
		if ((rc = str_check(rd, FIELD(f, OP), ENTRY_NAME_MAX + 1)))
			return rc;
		op->type = entry_type(names, v->u.s, v->n, false);
	} else {
		v = f[EF_PROFILING_NAME];
		if ((rc = want(rd, FIELD(f, PROFILING_NAME), true, "a string")))
			return rc;
		if ((rc = str_check(rd, FIELD(f, PROFILING_NAME), ENTRY_NAME_MAX + 1)))
			return rc;
		op->type = entry_type(names, v->u.s, v->n, true);
	}

	v = f[EF_STATE];
	if ((rc = want(rd, FIELD(f, STATE), true, "a string")) ||
	    (rc = str_check(rd, FIELD(f, STATE), ENTRY_NAME_MAX + 1)))
		return rc;
	if (!entry_state(op, v->u.s, v->n, &running))
		return fr_rd_fail(rd, -EPROTO,
				  "%s: unknown state \"%.*s\" (expected entered, completed, scheduled or started)",
				  fr_rd_path(p, at, "state"), (int)v->n, v->u.s);

	op->is_p2p = !fr_op_is_collective(op->type) && op->type != FR_OP_UNKNOWN;
	if ((rc = get_bool(rd, FIELD(f, IS_P2P), false, &op->is_p2p)))
		return rc;
	op->seq = op->is_p2p ? p2p_seq : coll_seq;

	if ((rc = get_u64(rd, FIELD(f, CREATED), true, ENTRY_INT_MAX, &op->t_entered_ns)) ||
	    (rc = get_u64(rd, FIELD(f, STARTED), false, ENTRY_INT_MAX, &op->t_started_ns)) ||
	    (rc = get_u64(rd, FIELD(f, COMPLETED), false, ENTRY_INT_MAX, &op->t_completed_ns)) ||
	    (rc = get_bool(rd, FIELD(f, NONBLOCKING), false, &op->nonblocking)) ||
	    (rc = get_bool(rd, FIELD(f, WAITED), false, &op->waited)) ||
	    (rc = get_bool(rd, FIELD(f, CAPTURED), false, &op->captured)) ||
	    (rc = get_rank_or_none(rd, FIELD(f, PEER), &op->peer)) ||
	    (rc = get_rank_or_none(rd, FIELD(f, ROOT), &op->root)) ||
	    (rc = get_rank_or_none(rd, FIELD(f, PEER_IN_COMM), &op->peer_in_comm)))
		return rc;
	if (!entry_waited_ok(op))
		return fr_rd_fail(rd, -EPROTO, "%s: true for an operation that is not nonblocking",
				  fr_rd_path(p, at, "waited"));
	/*
	 * An entry without "nonblocking" comes from PyTorch, whose operations
	 * all block the rank from the moment they start; its start time is
	 * often null, and then entering is the best evidence of it.
	 */
	if (!present(f[EF_NONBLOCKING]) && running && !op->t_started_ns)
		op->t_started_ns = op->t_entered_ns;

	/* PyTorch names a point-to-point peer only in "nccl:send 0->1" or
	 * "nccl:recv 1<-0": ranks in the group, this one's first. */
	if (op->is_p2p && op->peer_in_comm < 0 && !f[EF_PEER_IN_COMM])
		op->peer_in_comm = peer_from_profiling_name(f[EF_PROFILING_NAME]);

	if (f[EF_COUNT]) {
		rc = get_u64(rd, FIELD(f, COUNT), false, ENTRY_INT_MAX, &op->count);
	} else if (!(rc = count_from_sizes(rd, f[EF_INPUT_SIZES], at, "input_sizes",
					  &op->count)) &&
		   (op->type == FR_OP_ALL_GATHER || op->type == FR_OP_REDUCE_SCATTER)) {
		/* PyTorch records the output too: how it relates to the input. */
		uint64_t out = 0;

		rc = count_from_sizes(rd, f[EF_OUTPUT_SIZES], at, "output_sizes", &out);
		op->size_ratio = op->type == FR_OP_ALL_GATHER ? size_ratio(out, op->count) :
								 size_ratio(op->count, out);
	}
	if (rc || (rc = get_u64(rd, FIELD(f, BYTES), false, ENTRY_INT_MAX, &op->bytes)))
		return rc;
	if (f[EF_SIZE_RATIO]) {
		ratio = op->size_ratio;
		if ((rc = get_u64(rd, FIELD(f, SIZE_RATIO), false, ENTRY_RATIO_MAX, &ratio)))
			return rc;
		op->size_ratio = (uint32_t)ratio;
	}

	if (f[EF_DTYPE]) {
		rc = get_str_keep(rd, FIELD(f, DTYPE), false, FR_DTYPE_MAX, t, &op->dtype);
	} else if (present(v = f[EF_INPUT_DTYPES])) {
		if (v->type != FR_VAL_ARRAY)
			return fr_rd_fail(rd, -EPROTO, "%s: expected an array, got %s",
					  fr_rd_path(p, at, "input_dtypes"), fr_val_type_name(v));
		if (v->n > 0)
			rc = str_keep(rd, v->u.items[0], at, "input_dtypes[0]", FR_DTYPE_MAX, t,
				      &op->dtype);
	}
	if (rc)
		return rc;
	if (!f[EF_BYTES]) {
		size_t n = strlen(op->dtype);
		uint64_t size;

		slots = names ? &names->dtype : NULL;
		if ((slot = slot_find(slots, op->dtype, n))) {
			size = (uint64_t)slot->value;
		} else {
			size = torch_dtype_size(op->dtype);
			slot_keep(slots, op->dtype, n, (int)size);
		}
		op->bytes = op->count * size;
	}
	return get_str_keep(rd, FIELD(f, REDOP), false, FR_REDOP_MAX, t, &op->redop);
}

/*
 * Reads entry `i` of the array at `at` into op, of trace t. The first attempt formats
 * no message; only a failing entry is read again to say where it failed,
 * so that two million good entries cost no snprintf of their place.
 */
static int read_entry_at(const struct rd *rd, entry_fields f, const char *at, size_t i,
			 struct fr_trace *t, struct fr_op *op)
{
	struct rd quiet = { rd->name, NULL, 0, rd->names, NULL };
	char eat[AT_MAX];
	int rc = read_entry(&quiet, f, "", t, op);

	if (rc == 0 || rc == -ENOMEM)
		return rc ? fr_rd_nomem(rd) : 0;
	fr_op_init(op);
	fr_rd_item(eat, at, "entries", i);
	return read_entry(rd, f, eat, t, op);
}

/* Entry i of the array at `at`, a value of a tree, into a new operation
 * of t (its array `cap` long), and to the visitor. */
static int read_entry_val(const struct rd *rd, struct fr_val_keymap *map,
			  const struct fr_val *e, const char *at, size_t i, struct fr_trace *t,
			  size_t *cap)
{
	char p[AT_MAX];
	entry_fields f;
	struct fr_op *op;
	int rc;

	if (e->type != FR_VAL_OBJECT)
		return fr_rd_fail(rd, -EPROTO, "%s[%zu]: expected an object, got %s",
				  fr_rd_path(p, at, "entries"), i, fr_val_type_name(e));
	/* The last of two members of one name wins, as in a Python dict;
	 * the JSON parser refuses them. */
	fr_val_fields(map, e, entry_keys, EF__COUNT, f);
	if (!(op = fr_trace_add_op(t, cap)))
		return fr_rd_nomem(rd);
	rc = read_entry_at(rd, f, at, i, t, op);
	/* After the read, which brought the entry into the cache. */
	if (!rc && rd->visit && rd->visit->entry) {
		struct fr_dump_entry de = { op, f[EF_TIMEOUT], f[EF_FRAMES], f[EF_THREAD_NAME],
					    f[EF_PG_ID] };

		rd->visit->entry(rd->visit->arg, &de);
	}
	return rc;
}

/* The entries of a parsed document: each an object. */
static int read_entries(const struct rd *rd, const struct fr_val *entries, const char *at,
			struct fr_trace *t)
{
	struct fr_val_keymap *map = calloc(1, sizeof(*map));
	struct name_cache names;
	struct rd named = *rd;
	size_t cap = 0;
	int rc = 0;

	if (!map)
		return fr_rd_nomem(rd);
	/* Failing leaves the array to grow as it goes. */
	(void)fr_trace_reserve_ops(t, entries->n, &cap);
	memset(&names, 0, sizeof(names));
	named.names = &names;
	for (uint32_t i = 0; i < entries->n && !rc; i++)
		rc = read_entry_val(&named, map, entries->u.items[i], at, i, t, &cap);
	free(map);
	return rc;
}

/*
 * The "entries" of a dump, read straight from its JSON text into the
 * trace's operations (a fr_json_hook): each entry's values are parsed into
 * a scratch document that is emptied for the next, so that a dump's two
 * thousand entries never exist as a tree. Keys are first tried in the
 * order our writer puts them, which skips scanning them.
 */
struct entries_reader {
	const struct rd *rd;
	struct fr_trace *t;
	struct fr_doc *scratch;
	size_t text_len;   /* of the whole document, to size the operations */
	bool done;
	/*
	 * The first entry that does not read: reported only once the rest of
	 * the document is read and its header checked, so that a dump of
	 * another format or version says so rather than what its entries lack,
	 * as when reading from a tree.
	 */
	int rc;
	char err[512];
};

/*
 * Our writer's entries are some 550 to 650 bytes each: room for one per
 * 400 bytes of the document saves growing the array ten times over. What
 * is never written to costs no memory; a document of shorter entries grows
 * it.
 */
#define ENTRY_BYTES_MIN 400

/* Reads the value at the cursor into scratch and keeps the error "`at`:
 * expected `what`, got <what it is>". */
static int keep_type_error(struct entries_reader *er, struct fr_json_in *in, const char *at,
			   const char *what)
{
	struct rd keep = { er->rd->name, er->err, sizeof(er->err), NULL, NULL };
	struct fr_val *v;
	int rc = fr_json_value(in, er->scratch, &v);

	if (!rc)
		er->rc = fr_rd_fail(&keep, -EPROTO, "%s: expected %s, got %s", at, what,
				    fr_val_type_name(v));
	return rc;
}

/*
 * Entries exactly as our writer writes them (entry_json(), compact): every
 * field of entry.h in its order and shape, "captured" and "size_ratio"
 * only when written, strings of printable ASCII without escapes, integers
 * without sign (but -1 for a rank), fraction or exponent. written_entry()
 * reads such an entry straight from the text into the operation, with no
 * value built and no key looked up, and puts what it read to the rules of
 * an entry that read_entry() applies. At anything else (another writer's
 * entry, white space, an escape, an older format's keys) it gives up, as
 * it does when a rule refuses the entry, and the entry is read again from
 * its start by fr_json_object() and read_entry(), which accept or refuse
 * it with their usual message: the shortcut accepts what they accept, as
 * the same operation. It reads our dumps about twice as fast as they do.
 */

/* p past the literal `s`, or NULL when the text there is another. Its
 * length is a constant: the comparison is a few loads. */
#define W_LIT(p, end, s)                                                        \
	((end) - (p) >= (ptrdiff_t)sizeof(s) - 1 && fr_same_bytes((p), (s), sizeof(s) - 1) ? \
		 (p) + sizeof(s) - 1 :                                           \
		 NULL)

/* An integer from 0 to ENTRY_INT_MAX as the JSON parser reads it (no
 * leading zero). What follows it is checked by the literal after it: a
 * fraction or an exponent makes that fail. */
static inline __attribute__((always_inline)) const char *w_u64(const char *p, const char *end,
							       uint64_t *out)
{
	bool overflow;
	const char *q = fr_scan_digits(p, end, out, &overflow);

	if (q == p || (q - p > 1 && *p == '0') || overflow || *out > ENTRY_INT_MAX)
		return NULL;
	return q;
}

/* A string of the text, from its opening quote to its closing one, not
 * NUL-terminated: the rules take strings by length. */
struct text {
	const char *s;
	size_t n;
};

/* What written_entry() scans that is not the operation's own (entry.h's
 * `into`): the values the rules take, and what it only skips. */
struct written {
	struct text pg_id, pg[2], profiling, dtypes, state, op, dtype, redop;
	uint64_t coll_seq, p2p_seq, unused;
	bool retired;
};

/*
 * The readers of the shapes of entry.h, each into the type of its value:
 * where the value ends, or NULL when it is not of that shape or a rule of
 * its type refuses it. Each starts past its key's literal, which takes the
 * opening of a string or an array (OPEN_<shape>).
 */
#define OPEN_u64 ""
#define OPEN_str "\""
#define OPEN_pair "[\""
#define OPEN_sizes "[["
#define OPEN_strs "[\""
#define OPEN_time ""
#define OPEN_flag ""
#define OPEN_rank ""

static inline __attribute__((always_inline)) const char *
scan_u64(const char *p, const char *end, uint64_t *out)
{
	return w_u64(p, end, out);
}

/* From p, just past the opening quote, to past the closing one. */
static inline __attribute__((always_inline)) const char *
scan_str(const char *p, const char *end, struct text *out)
{
	const char *q = fr_json_plain_string(p, end, &out->n);

	out->s = p;
	return q;
}

static inline __attribute__((always_inline)) const char *
scan_pair(const char *p, const char *end, struct text (*out)[2])
{
	if (!(p = scan_str(p, end, &(*out)[0])) || !(p = W_LIT(p, end, ",\"")) ||
	    !(p = scan_str(p, end, &(*out)[1])))
		return NULL;
	return W_LIT(p, end, "]");
}

static inline __attribute__((always_inline)) const char *
scan_sizes(const char *p, const char *end, uint64_t *out)
{
	if (!(p = w_u64(p, end, out)))
		return NULL;
	return W_LIT(p, end, "]]");
}

static inline __attribute__((always_inline)) const char *
scan_strs(const char *p, const char *end, struct text *out)
{
	if (!(p = scan_str(p, end, out)))
		return NULL;
	return W_LIT(p, end, "]");
}

/* null for none: 0, as get_u64() leaves an absent time. */
static inline __attribute__((always_inline)) const char *
scan_time(const char *p, const char *end, uint64_t *out)
{
	const char *q = W_LIT(p, end, "null");

	if (!q)
		return w_u64(p, end, out);
	*out = 0;
	return q;
}

static inline __attribute__((always_inline)) const char *
scan_flag(const char *p, const char *end, bool *out)
{
	const char *q;

	if ((q = W_LIT(p, end, "true")))
		*out = true;
	else if ((q = W_LIT(p, end, "false")))
		*out = false;
	return q;
}

static inline __attribute__((always_inline)) const char *
scan_rank(const char *p, const char *end, int32_t *out)
{
	uint64_t u;

	if (end - p >= 3 && p[0] == '-' && p[1] == '1' && !fr_is_digit(p[2])) {
		*out = -1;
		return p + 2;
	}
	if (!(p = w_u64(p, end, &u)) || u > ENTRY_RANK_MAX)
		return NULL;
	*out = (int32_t)u;
	return p;
}

static inline __attribute__((always_inline)) const char *
scan_ratio(const char *p, const char *end, uint32_t *out)
{
	uint64_t u;

	if (!(p = w_u64(p, end, &u)) || u > ENTRY_RATIO_MAX)
		return NULL;
	*out = (uint32_t)u;
	return p;
}

/*
 * The entry at p, of our writer's shape, into op (as fr_op_init() made it)
 * of trace t, its values scanned straight into their places (entry.h's
 * `into`) and put to the rules of an entry; where it ends, or NULL (op
 * then half-filled) when it is not of that shape or breaks a rule.
 */
static const char *written_entry(const struct rd *rd, struct fr_trace *t, const char *p,
				 const char *end, struct fr_op *op)
{
	struct written w;
	const char *q;
	bool running;
	char sep = '{';

	/* A summary leaves out process_group: the group is then pg_id. */
	w.pg[0] = (struct text){ NULL, 0 };

/* Each step moves p on, or gives up. */
#define W(step)                    \
	do {                       \
		if (!(p = (step))) \
			return NULL; \
	} while (0)
/* A field that is always written: after the '{' for the first, a ','. */
#define SCAN(key, shape, into)                                           \
	do {                                                             \
		if (p >= end || *p != sep)                               \
			return NULL;                                     \
		sep = ',';                                               \
		W(W_LIT(p + 1, end, "\"" key "\":" OPEN_##shape));       \
		W(scan_##shape(p, end, &(into)));                        \
	} while (0);
/* A field written only when it says something: else as fr_op_init() left
 * it. */
#define SCAN_OPTIONAL(key, shape, into)                                        \
	do {                                                                   \
		if (p < end && *p == ',' && (q = W_LIT(p + 1, end, "\"" key "\":"))) \
			W(scan_##shape(q, end, &(into)));                      \
	} while (0);
/* One of PyTorch's copies (entry.h's `copy`), which a summary leaves out:
 * read when it is there. Never the first field. */
#define SCAN_COPY(key, shape, into)                                              \
	do {                                                                     \
		if (p < end && *p == ',' &&                                      \
		    (q = W_LIT(p + 1, end, "\"" key "\":" OPEN_##shape)))         \
			W(scan_##shape(q, end, &(into)));                        \
	} while (0);
#define SCAN_u64(key, into) SCAN(key, u64, into)
#define SCAN_str(key, into) SCAN(key, str, into)
#define SCAN_pair(key, into) SCAN(key, pair, into)
#define SCAN_sizes(key, into) SCAN(key, sizes, into)
#define SCAN_strs(key, into) SCAN(key, strs, into)
#define SCAN_time(key, into) SCAN(key, time, into)
#define SCAN_flag(key, into) SCAN(key, flag, into)
#define SCAN_rank(key, into) SCAN(key, rank, into)
#define SCAN_if_true(key, into) SCAN_OPTIONAL(key, flag, into)
#define SCAN_ratio(key, into) SCAN_OPTIONAL(key, ratio, into)
#define SCAN_none(key, into)
#define SCAN_COPY_0(key, shape, into) SCAN_##shape(key, into)
#define SCAN_COPY_1(key, shape, into) SCAN_COPY(key, shape, into)
#define EF_SCAN(id, key, drop, copy, shape, into, ...) SCAN_COPY_##copy(key, shape, into)
	ENTRY_FIELDS(EF_SCAN)
	W(W_LIT(p, end, "}"));
#undef EF_SCAN
#undef SCAN_COPY_1
#undef SCAN_COPY_0
#undef SCAN_none
#undef SCAN_ratio
#undef SCAN_if_true
#undef SCAN_rank
#undef SCAN_flag
#undef SCAN_time
#undef SCAN_strs
#undef SCAN_sizes
#undef SCAN_pair
#undef SCAN_str
#undef SCAN_u64
#undef SCAN_COPY
#undef SCAN_OPTIONAL
#undef SCAN
#undef W

	if (!w.pg[0].s)
		w.pg[0] = w.pg_id;
	/* The rules, of what the shapes do not settle. */
	if (w.op.n > ENTRY_NAME_MAX || !entry_state(op, w.state.s, w.state.n, &running) ||
	    !entry_waited_ok(op) || w.pg[0].n > FR_COMM_ID_MAX || w.dtype.n > FR_DTYPE_MAX ||
	    w.redop.n > FR_REDOP_MAX)
		return NULL;
	op->type = entry_type(rd->names, w.op.s, w.op.n, false);
	op->seq = op->is_p2p ? w.p2p_seq : w.coll_seq;
	if (!(op->comm = fr_trace_strn(t, w.pg[0].s, w.pg[0].n)) ||
	    !(op->dtype = fr_trace_strn(t, w.dtype.s, w.dtype.n)) ||
	    !(op->redop = fr_trace_strn(t, w.redop.s, w.redop.n)))
		return NULL;
	return p;
}

/*
 * The entry at the cursor, an object, into a new operation of er->t: as
 * our writer wrote it, or through fr_json_object() and read_entry(). An
 * entry that does not read is kept in er->rc; returns the parser's errors
 * only.
 */
static int read_entry_json(struct entries_reader *er, const struct rd *rd, struct fr_json_in *in,
			   size_t i, size_t *cap)
{
	struct fr_val vals[EF__COUNT + 1];
	const char *end, *p = fr_json_cursor(in, &end);
	struct fr_op *op = fr_trace_add_op(er->t, cap);
	entry_fields f;
	uint64_t seen;
	int rc;

	if (!op)
		return -ENOMEM;
	if ((p = written_entry(rd, er->t, p, end, op))) {
		fr_json_set_cursor(in, p);
		return 0;
	}
	fr_op_init(op);
	if ((rc = fr_json_object(in, er->scratch, entry_keys, EF__COUNT, vals, &seen)))
		return rc;
	for (int k = 0; k < EF__COUNT; k++)
		f[k] = seen & (1ull << k) ? &vals[k] : NULL;
	if ((rc = read_entry_at(rd, f, "", i, er->t, op)) == -ENOMEM)
		return rc;
	if (rc) {
		er->rc = rc;
		snprintf(er->err, sizeof(er->err), "%s", er->rd->err ? er->rd->err : "");
	}
	return 0;
}

static int read_entries_json(struct fr_json_in *in, void *arg)
{
	struct entries_reader *er = arg;
	struct name_cache names;
	struct rd rd = *er->rd;
	size_t cap = 0;
	int rc = 0;

	memset(&names, 0, sizeof(names));
	rd.names = &names;

	er->done = true;
	if (fr_json_peek(in) == 'n') {
		struct rd keep = { er->rd->name, er->err, sizeof(er->err), NULL, NULL };
		struct fr_val *v;

		/* null, as if absent: the message of a tree's reader. */
		if ((rc = fr_json_value(in, er->scratch, &v)))
			return rc;
		er->rc = fr_rd_fail(&keep, -EPROTO, "entries: missing (expected an array)");
		return 0;
	}
	if (fr_json_peek(in) != '[')
		return keep_type_error(er, in, "entries", "an array");
	if ((rc = fr_json_expect(in, '[', "an array")) || fr_json_accept(in, ']'))
		return rc;
	/* At most this many: failing leaves the array to grow as it goes. */
	(void)fr_trace_reserve_ops(er->t, er->text_len / ENTRY_BYTES_MIN, &cap);
	for (size_t i = 0;; i++) {
		char at[32];

		fr_doc_reset(er->scratch);
		if (er->rc) {
			/* An entry failed: the rest is only checked as JSON. */
			struct fr_val *v;

			if ((rc = fr_json_value(in, er->scratch, &v)))
				return rc;
		} else if (fr_json_peek(in) != '{') {
			snprintf(at, sizeof(at), "entries[%zu]", i);
			if ((rc = keep_type_error(er, in, at, "an object")))
				return rc;
		} else if ((rc = read_entry_json(er, &rd, in, i, &cap))) {
			return rc;
		}
		if (!fr_json_accept(in, ','))
			break;
	}
	return fr_json_expect(in, ']', "',' or ']' after an entry");
}

/* A decimal number below UINT32_MAX at *s, which moves past it; false if
 * none. Digits by hand: a thousand ranks in each of a thousand dumps made
 * strtoul() show in profiles. */
static bool runs_number(const char **s, uint32_t *out)
{
	uint64_t x = 0;
	const char *p = *s;

	if (*p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		x = x * 10 + (uint64_t)(*p - '0');
		if (x >= UINT32_MAX)
			return false;
	}
	*s = p;
	*out = (uint32_t)x;
	return true;
}

/*
 * Members spelled as runs (dumps/FORMAT.md, 1.6): items separated by
 * commas, each "A" (global rank A), "A-B" (ranks A to B, B not below A),
 * "?" (a member not known) or "?*N" (N of them). Run twice: with `m` NULL
 * it counts the members into *n, then fills `m`. The count is bounded
 * before anything is allocated: no communicator has more members than a
 * world has ranks. Returns 0 or fails naming the item.
 */
static int runs_members(const struct rd *rd, const char *text, const char *where, uint32_t *m,
			size_t *n)
{
	const char *s = text;
	size_t i = 0;

	for (;;) {
		uint32_t a, b, count;
		bool known = *s != '?';

		if (!known) {
			s++;
			count = 1;
			if (*s == '*' && (s++, !runs_number(&s, &count) || count == 0))
				goto out_bad;
		} else {
			if (!runs_number(&s, &a))
				goto out_bad;
			b = a;
			if (*s == '-' && (s++, !runs_number(&s, &b) || b < a))
				goto out_bad;
			count = b - a + 1;
		}
		if (count > DUMP_WORLD_MAX - i)
			return fr_rd_fail(rd, -EPROTO, "%s: \"%.64s\" lists more than %u members",
					  where, text, DUMP_WORLD_MAX);
		for (uint32_t k = 0; m && k < count; k++)
			m[i + k] = known ? a + k : FR_RANK_UNKNOWN;
		i += count;
		if (*s == '\0')
			break;
		if (*s++ != ',')
			goto out_bad;
	}
	*n = i;
	return 0;

out_bad:
	return fr_rd_fail(rd, -EPROTO, "%s: \"%.64s\" is not a list of ranks (near \"%.16s\")",
			  where, text, s);
}

int fr_rd_members(const struct rd *rd, const struct fr_val *v, const char *where,
		  uint32_t **out, size_t *n)
{
	size_t cap;
	uint32_t *m;
	size_t i = 0;

	*out = NULL;
	*n = 0;
	if (!fr_val_is(v, FR_VAL_ARRAY) && !fr_val_is(v, FR_VAL_STRING))
		return fr_rd_fail(rd, -EPROTO, "%s: expected an array, got %s", where,
				  fr_val_type_name(v));
	if (v->type == FR_VAL_STRING && v->u.s[strspn(v->u.s, " ")] != '[') {
		int rc = runs_members(rd, v->u.s, where, NULL, &cap);

		if (rc)
			return rc;
		m = calloc(cap ? cap : 1, sizeof(*m));
		if (!m)
			return fr_rd_nomem(rd);
		runs_members(rd, v->u.s, where, m, n);
		*out = m;
		return 0;
	}
	cap = v->type == FR_VAL_ARRAY ? v->n : v->n / 2 + 1;
	m = calloc(cap ? cap : 1, sizeof(*m));
	if (!m)
		return fr_rd_nomem(rd);
	if (v->type == FR_VAL_ARRAY) {
		for (i = 0; i < v->n; i++) {
			const struct fr_val *r = v->u.items[i];

			if (r->type != FR_VAL_INT) {
				free(m);
				return fr_rd_fail(rd, -EPROTO, "%s[%zu]: expected an integer, got %s",
						  where, i, fr_val_type_name(r));
			}
			if (r->u.i < -1 || r->u.i >= UINT32_MAX) {
				free(m);
				return fr_rd_fail(rd, -EPROTO, "%s[%zu]: %" PRId64 " is not a rank", where,
						  i, r->u.i);
			}
			m[i] = r->u.i == -1 ? FR_RANK_UNKNOWN : (uint32_t)r->u.i;
		}
	} else {
		const char *s = v->u.s;

		/* Spaces by hand, as digits: strspn() showed in profiles. */
		while (*s == ' ')
			s++;
		if (*s++ != '[')
			goto out_bad_string;
		for (;;) {
			uint32_t x;

			while (*s == ' ')
				s++;
			if (*s == ']' && i == 0)
				break;
			if (!runs_number(&s, &x) || i >= cap)
				goto out_bad_string;
			m[i++] = x;
			while (*s == ' ')
				s++;
			if (*s == ']')
				break;
			if (*s++ != ',')
				goto out_bad_string;
		}
	}
	*out = m;
	*n = i;
	return 0;

out_bad_string:
	free(m);
	return fr_rd_fail(rd, -EPROTO, "%s: \"%.64s\" is not a list of ranks", where, v->u.s);
}

int fr_dump_read_members(const struct fr_val *v, const char *name, uint32_t **out, size_t *n,
			 char *err, size_t errlen)
{
	struct rd rd = { name ? name : "ranks", err, errlen, NULL, NULL };

	return fr_rd_members(&rd, v, "ranks", out, n);
}

static int read_comm(const struct rd *rd, const struct fr_val *pc, const char *at,
		     const struct fr_trace *t, struct fr_comm *c)
{
	char p[AT_MAX];
	const struct fr_val *v;
	size_t n = 0;
	uint64_t size;
	int rc;

	if (!fr_val_is(pc, FR_VAL_OBJECT))
		return fr_rd_fail(rd, -EPROTO, "%s: expected an object, got %s", at,
				  fr_val_type_name(pc));
	v = fr_val_get(pc, "ranks");
	if ((rc = GET_STR(rd, pc, at, "desc", false, c->desc)) ||
	    (rc = want(rd, v, at, "ranks", true, "an array")) ||
	    (rc = fr_rd_members(rd, v, fr_rd_path(p, at, "ranks"), &c->members, &n)))
		return rc;

	size = n;
	if ((rc = get_u64(rd, fr_val_get(pc, "size"), at, "size", false, UINT32_MAX, &size)))
		return rc;
	c->size = (uint32_t)size;
	/* An empty list stands for members the writer did not know. */
	if (n == 0) {
		free(c->members);
		c->members = NULL;
	} else if (n != size) {
		return fr_rd_fail(rd, -EPROTO, "%s: lists %zu ranks but size is %" PRIu64,
				  fr_rd_path(p, at, "ranks"), n, size);
	}
	for (size_t i = 0; i < n; i++) {
		if (c->members[i] == FR_RANK_UNKNOWN)
			continue;
		if (c->members[i] >= t->world_size)
			return fr_rd_fail(rd, -EPROTO, "%s[%zu]: rank %" PRIu32
					  " is not below world_size %" PRIu32,
					  fr_rd_path(p, at, "ranks"), i, c->members[i], t->world_size);
		/* PyTorch does not write our rank in the group; find it. */
		if (c->members[i] == t->rank)
			c->rank = (uint32_t)i;
	}

	if ((rc = get_u32(rd, fr_val_get(pc, "rank"), at, "rank", false, &c->rank)))
		return rc;
	if (c->size && c->rank >= c->size)
		return fr_rd_fail(rd, -EPROTO, "%s: %" PRIu32 " is not below size %" PRIu32,
				  fr_rd_path(p, at, "rank"), c->rank, c->size);
	return 0;
}

static int read_comms(const struct rd *rd, const struct fr_val *root, const char *at,
		      const struct comm_table *tab, struct fr_trace *t)
{
	char cat[AT_MAX];
	const struct fr_val *config, *status;
	size_t cap = 0;
	int rc;

	if ((rc = fr_rd_container(rd, root, at, "pg_config", true, FR_VAL_OBJECT, &config)) ||
	    (rc = fr_rd_container(rd, root, at, "pg_status", true, FR_VAL_OBJECT, &status)))
		return rc;
	/* As many as there are: grown from 16 (2.5 KiB), the array of a
	 * summary's four communicators left most of a page untouched but
	 * faulted, a third of an incident of summaries' page faults. */
	if (config->n && !t->comms) {
		t->comms = malloc(config->n * sizeof(*t->comms));
		if (!t->comms)
			return fr_rd_nomem(rd);
		cap = config->n;
	}

	for (uint32_t i = 0; i < config->n; i++) {
		const struct fr_val *id = config->u.items[2 * i];
		const struct fr_val *pc;
		struct fr_comm *c;

		fr_rd_member(cat, at, "pg_config", id->u.s);
		if (id->n > FR_COMM_ID_MAX)
			return fr_rd_fail(rd, -EPROTO, "%s: process group id longer than %d bytes",
					  cat, FR_COMM_ID_MAX);
		if (fr_trace_comm(t, id->u.s))
			return fr_rd_fail(rd, -EPROTO, "%s: the same process group twice", cat);
		c = fr_trace_add_comm(t, &cap);
		if (!c)
			return fr_rd_nomem(rd);
		memcpy(c->id, id->u.s, id->n + 1);
		pc = config->u.items[2 * i + 1];
		if (tab && fr_val_is(pc, FR_VAL_OBJECT) && !present(fr_val_get(pc, "ranks")))
			rc = fr_rd_comm_ref(rd, pc, cat, tab, t, c);
		else
			rc = read_comm(rd, pc, cat, t, c);
		if (rc)
			return rc;
	}

	for (uint32_t i = 0; i < status->n; i++) {
		const struct fr_val *id = status->u.items[2 * i];
		const struct fr_val *ps = status->u.items[2 * i + 1];
		struct fr_comm *c = (struct fr_comm *)fr_trace_comm(t, id->u.s);

		fr_rd_member(cat, at, "pg_status", id->u.s);
		if (!c)
			return fr_rd_fail(rd, -EPROTO, "%s: no such process group in pg_config", cat);
		if (!fr_val_is(ps, FR_VAL_OBJECT))
			return fr_rd_fail(rd, -EPROTO, "%s: expected an object, got %s", cat,
					  fr_val_type_name(ps));
		if ((rc = get_u64(rd, fr_val_get(ps, "last_enqueued_collective"), cat,
				  "last_enqueued_collective", true, INT64_MAX, &c->last_entered)) ||
		    (rc = get_u64(rd, fr_val_get(ps, "last_completed_collective"), cat,
				  "last_completed_collective", true, INT64_MAX, &c->last_completed)))
			return rc;
	}
	return 0;
}

static int read_frame(const struct rd *rd, const struct fr_val *fo, const char *at,
		      struct fr_frame *f)
{
	char p[AT_MAX];
	const struct fr_val *v;
	const char *s;
	char *end;
	int rc;

	if (!fr_val_is(fo, FR_VAL_OBJECT))
		return fr_rd_fail(rd, -EPROTO, "%s: expected an object, got %s", at,
				  fr_val_type_name(fo));
	v = fr_val_get(fo, "name");
	if (present(v)) {
		if (v->type != FR_VAL_STRING)
			return fr_rd_fail(rd, -EPROTO, "%s: expected a string or null, got %s",
					  fr_rd_path(p, at, "name"), fr_val_type_name(v));
		f->name = strdup(v->u.s);
		if (!f->name)
			return fr_rd_nomem(rd);
	}
	v = fr_val_get(fo, "ip");
	if ((rc = get_u64(rd, fr_val_get(fo, "offset"), at, "offset", true, INT64_MAX,
			  &f->offset)) ||
	    (rc = want(rd, v, at, "ip", true, "a hex string")))
		return rc;
	if (v->type == FR_VAL_INT && v->u.i >= 0) {
		f->ip = (uint64_t)v->u.i;
		return 0;
	}
	s = fr_val_str(v);
	if (!s || strncmp(s, "0x", 2) != 0 || !s[2] || strlen(s) > 18)
		goto out_bad_ip;
	errno = 0;
	f->ip = strtoull(s + 2, &end, 16);
	if (*end || errno || s[2] == '-' || s[2] == '+' || s[2] == ' ')
		goto out_bad_ip;
	return 0;

out_bad_ip:
	return fr_rd_fail(rd, -EPROTO, "%s: expected a hex string such as \"0x4005d6\"",
			  fr_rd_path(p, at, "ip"));
}

/* The longest Python function or file name read: the agent writes at most
 * 255 bytes (agent/pyframes.c); a PyTorch-converted name may be longer. */
#define PYFRAME_STR_MAX 4095

static int read_pystr(const struct rd *rd, const struct fr_val *fo, const char *at,
		      const char *key, char **dst)
{
	const struct fr_val *v = fr_val_get(fo, key);
	int rc;

	if (!present(v))
		return want(rd, v, at, key, true, "a string");
	if ((rc = str_check(rd, v, at, key, PYFRAME_STR_MAX + 1)))
		return rc;
	if (!(*dst = strdup(v->u.s)))
		return fr_rd_nomem(rd);
	return 0;
}

/* A thread's "python_frames" (1.9, optional): [{function, file, line}],
 * and from 1.11 "entry" (optional, default false). */
static int read_pyframes(const struct rd *rd, const struct fr_val *to, const char *tat,
			 struct fr_thread *th)
{
	char fat[AT_MAX];
	const struct fr_val *frames;
	int rc;

	if ((rc = fr_rd_container(rd, to, tat, "python_frames", false, FR_VAL_ARRAY, &frames)) ||
	    !frames || frames->n == 0)
		return rc;
	th->pyframes = calloc(frames->n, sizeof(*th->pyframes));
	if (!th->pyframes)
		return fr_rd_nomem(rd);
	for (uint32_t j = 0; j < frames->n; j++) {
		const struct fr_val *fo = frames->u.items[j];
		struct fr_pyframe *f = &th->pyframes[j];

		th->npyframes = j + 1;
		fr_rd_item(fat, tat, "python_frames", j);
		if (!fr_val_is(fo, FR_VAL_OBJECT))
			return fr_rd_fail(rd, -EPROTO, "%s: expected an object, got %s", fat,
					  fr_val_type_name(fo));
		if ((rc = read_pystr(rd, fo, fat, "function", &f->function)) ||
		    (rc = read_pystr(rd, fo, fat, "file", &f->file)) ||
		    (rc = get_u32(rd, fr_val_get(fo, "line"), fat, "line", true, &f->line)) ||
		    (rc = get_bool(rd, fr_val_get(fo, "entry"), fat, "entry", false, &f->entry)))
			return rc;
	}
	return 0;
}

/* One thread object: tid, name, current, frames, python_frames. */
static int read_thread(const struct rd *rd, const struct fr_val *to, const char *tat,
		       struct fr_thread *th)
{
	char fat[AT_MAX];
	const struct fr_val *frames;
	int rc;

	if (!fr_val_is(to, FR_VAL_OBJECT))
		return fr_rd_fail(rd, -EPROTO, "%s: expected an object, got %s", tat,
				  fr_val_type_name(to));
	if ((rc = get_u32(rd, fr_val_get(to, "tid"), tat, "tid", true, &th->tid)) ||
	    (rc = GET_STR(rd, to, tat, "name", false, th->name)) ||
	    (rc = get_bool(rd, fr_val_get(to, "current"), tat, "current", false,
			   &th->current)) ||
	    (rc = get_bool(rd, fr_val_get(to, "python_truncated"), tat, "python_truncated",
			   false, &th->py_truncated)) ||
	    (rc = read_pyframes(rd, to, tat, th)) ||
	    (rc = fr_rd_container(rd, to, tat, "frames", true, FR_VAL_ARRAY, &frames)))
		return rc;
	if (frames->n == 0)
		return 0;
	th->frames = calloc(frames->n, sizeof(*th->frames));
	if (!th->frames)
		return fr_rd_nomem(rd);
	for (uint32_t j = 0; j < frames->n; j++) {
		th->nframes = j + 1;
		fr_rd_item(fat, tat, "frames", j);
		if ((rc = read_frame(rd, frames->u.items[j], fat, &th->frames[j])))
			return rc;
	}
	return 0;
}

static int read_threads(const struct rd *rd, const struct fr_val *root, const char *at,
			struct fr_trace *t)
{
	char tat[AT_MAX];
	const struct fr_val *threads;
	int rc;

	if ((rc = fr_rd_container(rd, root, at, "threads", false, FR_VAL_ARRAY, &threads)) ||
	    !threads || threads->n == 0)
		return rc;
	t->threads = calloc(threads->n, sizeof(*t->threads));
	if (!t->threads)
		return fr_rd_nomem(rd);

	for (uint32_t i = 0; i < threads->n; i++) {
		t->nthreads = i + 1;
		fr_rd_item(tat, at, "threads", i);
		if ((rc = read_thread(rd, threads->u.items[i], tat, &t->threads[i])))
			return rc;
	}
	return 0;
}

/* "crash", when the rank died of a fatal signal (FORMAT.md, "Crashes"). */
static int read_crash(const struct rd *rd, const struct fr_val *root, const char *at,
		      struct fr_trace *t)
{
	char p[AT_MAX], tat[AT_MAX], addr[24];
	const struct fr_val *o, *th, *code;
	struct fr_crash *c;
	char *end;
	int rc;

	if ((rc = fr_rd_container(rd, root, at, "crash", false, FR_VAL_OBJECT, &o)) || !o)
		return rc;
	c = t->crash = calloc(1, sizeof(*c));
	if (!c)
		return fr_rd_nomem(rd);
	fr_rd_path(p, at, "crash");
	if ((rc = get_u32(rd, fr_val_get(o, "signo"), p, "signo", true, &c->signo)) ||
	    (rc = want(rd, code = fr_val_get(o, "si_code"), p, "si_code", true, "an integer")) ||
	    (rc = GET_STR(rd, o, p, "fault_addr", true, addr)) ||
	    (rc = get_u64(rd, fr_val_get(o, "time_ns"), p, "time_ns", false, INT64_MAX,
			  &c->time_ns)) ||
	    (rc = get_u64(rd, fr_val_get(o, "ring_head"), p, "ring_head", false, INT64_MAX,
			  &c->ring_head)) ||
	    (rc = fr_rd_container(rd, o, p, "thread", true, FR_VAL_OBJECT, &th)))
		return rc;
	if (code->type != FR_VAL_INT)
		return fr_rd_type(rd, code, p, "si_code", "an integer");
	if (code->u.i < INT32_MIN || code->u.i > INT32_MAX)
		return fr_rd_range(rd, p, "si_code", code->u.i, INT32_MIN, INT32_MAX);
	c->code = (int32_t)code->u.i;
	errno = 0;
	c->fault_addr = strtoull(addr + 2, &end, 16);
	if (strncmp(addr, "0x", 2) || !addr[2] || *end || errno || !isxdigit((unsigned char)addr[2]))
		return fr_rd_fail(rd, -EPROTO, "%s: expected a hex string such as \"0x0\"",
				  fr_rd_path(tat, p, "fault_addr"));
	fr_rd_path(tat, p, "thread");
	return read_thread(rd, th, tat, &c->thread);
}

/* "exit", when the rank exited without finalising or was killed
 * (FORMAT.md, "Exits"). */
static int read_exit(const struct rd *rd, const struct fr_val *root, const char *at,
		     struct fr_trace *t)
{
	char p[AT_MAX], hat[AT_MAX], how[16];
	const struct fr_val *o, *code;
	struct fr_exit *e = &t->exit;
	int rc;

	if ((rc = fr_rd_container(rd, root, at, "exit", false, FR_VAL_OBJECT, &o)) || !o)
		return rc;
	fr_rd_path(p, at, "exit");
	if ((rc = GET_STR(rd, o, p, "how", true, how)) ||
	    (rc = get_bool(rd, fr_val_get(o, "underscore"), p, "underscore", false,
			   &e->underscore)) ||
	    (rc = get_bool(rd, fr_val_get(o, "finalised"), p, "finalised", false, &e->finalised)) ||
	    (rc = get_u32(rd, fr_val_get(o, "inflight"), p, "inflight", false, &e->inflight)) ||
	    (rc = get_u64(rd, fr_val_get(o, "time_ns"), p, "time_ns", false, INT64_MAX,
			  &e->time_ns)) ||
	    (rc = get_u64(rd, fr_val_get(o, "ring_head"), p, "ring_head", false, INT64_MAX,
			  &e->ring_head)))
		return rc;
	if (!strcmp(how, "exited"))
		e->kind = FR_EXIT_EXITED;
	else if (!strcmp(how, "killed"))
		e->kind = FR_EXIT_KILLED;
	else
		return fr_rd_fail(rd, -EPROTO, "%s: unknown way to end \"%s\" (exited, killed)",
				  fr_rd_path(hat, p, "how"), how);
	code = fr_val_get(o, "code");
	if (present(code)) {
		if (code->type != FR_VAL_INT)
			return fr_rd_type(rd, code, p, "code", "an integer");
		if (code->u.i < INT32_MIN || code->u.i > INT32_MAX)
			return fr_rd_range(rd, p, "code", code->u.i, INT32_MIN, INT32_MAX);
		e->has_code = true;
		e->code = (int32_t)code->u.i;
	}
	t->has_exit = true;
	return 0;
}

/* "nccl_error", when an NCCL communicator of the rank failed
 * (FORMAT.md, "NCCL errors"). */
static int read_nccl_error(const struct rd *rd, const struct fr_val *root, const char *at,
			   struct fr_trace *t)
{
	char p[AT_MAX];
	const struct fr_val *o;
	struct fr_nccl_error *e = &t->nccl_error;
	int rc;

	if ((rc = fr_rd_container(rd, root, at, "nccl_error", false, FR_VAL_OBJECT, &o)) || !o)
		return rc;
	fr_rd_path(p, at, "nccl_error");
	if ((rc = GET_STR(rd, o, p, "comm", true, e->comm)) ||
	    (rc = get_u32(rd, fr_val_get(o, "result"), p, "result", true, &e->result)) ||
	    (rc = get_u64(rd, fr_val_get(o, "time_ns"), p, "time_ns", false, INT64_MAX,
			  &e->time_ns)) ||
	    (rc = GET_STR(rd, o, p, "message", false, e->message)))
		return rc;
	if (e->result == 0)
		return fr_rd_range(rd, p, "result", 0, 1, UINT32_MAX);
	t->has_nccl_error = true;
	return 0;
}

/* "summary", when the dump is one (FORMAT.md, "Summaries"). */
static int read_summary(const struct rd *rd, const struct fr_val *root, const char *at,
			struct fr_trace *t)
{
	char p[AT_MAX], full_dump[FR_SUMMARY_PATH_MAX + 1];
	const struct fr_val *o;
	struct fr_trace_summary *s;
	int rc;

	if ((rc = fr_rd_container(rd, root, at, "summary", false, FR_VAL_OBJECT, &o)) || !o)
		return rc;
	s = t->summary = calloc(1, sizeof(*s));
	if (!s)
		return fr_rd_nomem(rd);
	fr_rd_path(p, at, "summary");
	if ((rc = GET_STR(rd, o, p, "node", true, s->node)) ||
	    (rc = GET_STR(rd, o, p, "full_dump", true, full_dump)) ||
	    (rc = get_u64(rd, fr_val_get(o, "entries_left_out"), p, "entries_left_out", false,
			  INT64_MAX, &s->entries_left_out)) ||
	    (rc = get_u64(rd, fr_val_get(o, "threads_left_out"), p, "threads_left_out", false,
			  INT64_MAX, &s->threads_left_out)))
		return rc;
	s->full_dump = strdup(full_dump);
	return s->full_dump ? 0 : fr_rd_nomem(rd);
}

int fr_rd_trace(const struct rd *rd, const struct fr_val *root, const char *at,
		const struct entries_reader *er, const struct comm_table *tab,
		struct fr_trace *t)
{
	char p[AT_MAX];
	char status[32];
	const struct fr_val *entries;
	unsigned long major;
	int st, rc;

	if ((rc = fr_rd_header(rd, root, at, &dump_kind, &major)))
		return rc;

	if ((rc = GET_STR(rd, root, at, "job", true, t->job)) ||
	    (rc = get_u32(rd, fr_val_get(root, "rank"), at, "rank", true, &t->rank)) ||
	    (rc = get_u32(rd, fr_val_get(root, "world_size"), at, "world_size", true,
			  &t->world_size)) ||
	    (rc = GET_STR(rd, root, at, "host", true, t->host)) ||
	    (rc = get_u32(rd, fr_val_get(root, "pid"), at, "pid", true, &t->pid)) ||
	    (rc = GET_STR(rd, root, at, "status", true, status)) ||
	    (rc = GET_STR(rd, root, at, "comm_lib_version", true, t->comm_lib)) ||
	    (rc = GET_STR(rd, root, at, "incident", true, t->incident)) ||
	    (rc = GET_STR(rd, root, at, "dump_reason", true, t->reason)) ||
	    (rc = get_u64(rd, fr_val_get(root, "time_dumped_ns"), at, "time_dumped_ns", true,
			  INT64_MAX, &t->time_ns)) ||
	    (rc = get_u64(rd, fr_val_get(root, "dropped_entries"), at, "dropped_entries", true,
			  INT64_MAX, &t->dropped)))
		return rc;
	st = fr_rank_status_from_name(status);
	if (st < 0)
		return fr_rd_fail(rd, -EPROTO, "%s: unknown rank status \"%s\"", fr_rd_path(p, at, "status"),
				  status);
	t->status = (enum fr_rank_status)st;
	if ((rc = fr_rd_world(rd, at, t->world_size)))
		return rc;
	if (t->rank >= t->world_size)
		return fr_rd_fail(rd, -EPROTO, "%s: %" PRIu32 " is not below world_size %" PRIu32,
				  fr_rd_path(p, at, "rank"), t->rank, t->world_size);

	if ((rc = read_comms(rd, root, at, tab, t)))
		return rc;
	if (er && er->done) {
		if (er->rc) {
			if (rd->err && rd->errlen)
				snprintf(rd->err, rd->errlen, "%s", er->err);
			return er->rc;
		}
	} else if ((rc = fr_rd_container(rd, root, at, "entries", true, FR_VAL_ARRAY, &entries)) ||
		   (rc = read_entries(rd, entries, at, t))) {
		return rc;
	}
	if (rd->visit && rd->visit->done && (rc = rd->visit->done(rd->visit->arg, t)))
		return rc;
	if ((rc = read_summary(rd, root, at, t)) || (rc = read_crash(rd, root, at, t)) ||
	    (rc = read_exit(rd, root, at, t)) || (rc = read_nccl_error(rd, root, at, t)) ||
	    (rc = GET_STR(rd, root, at, "python_note", false, t->python_note)))
		return rc;
	return read_threads(rd, root, at, t);
}

int fr_dump_from_val_visit(const struct fr_val *root, const char *name, struct fr_trace *t,
			   char *err, size_t errlen, const struct fr_dump_visit *visit)
{
	struct rd rd = { name ? name : "dump", err, errlen, NULL, visit };
	int rc;

	memset(t, 0, sizeof(*t));
	if (err && errlen)
		err[0] = '\0';
	rc = fr_rd_trace(&rd, root, "", NULL, NULL, t);
	if (rc)
		fr_trace_free(t);
	return rc;
}

struct fr_dump_entries {
	/* What fr_rd_trace() learns of them: done, and the first error. */
	struct entries_reader er;
	struct rd rd;
	struct name_cache names;
	struct fr_val_keymap map;
	struct fr_trace *t;
	size_t cap, n;
};

struct fr_dump_entries *fr_dump_entries_new(const char *name, struct fr_trace *t,
					    const struct fr_dump_visit *visit, size_t expect)
{
	struct fr_dump_entries *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	memset(t, 0, sizeof(*t));
	r->rd = (struct rd){ name ? name : "dump", r->er.err, sizeof(r->er.err), &r->names, visit };
	r->er.rd = &r->rd;
	r->er.t = t;
	r->er.done = true;
	r->t = t;
	/* Failing leaves the array to grow as it goes. */
	(void)fr_trace_reserve_ops(t, expect, &r->cap);
	return r;
}

int fr_dump_entries_add(struct fr_dump_entries *r, const struct fr_val *entry)
{
	int rc;

	/* After one that does not read, the rest are only counted. */
	if (r->er.rc) {
		r->n++;
		return 0;
	}
	rc = read_entry_val(&r->rd, &r->map, entry, "", r->n++, r->t, &r->cap);
	if (rc == -ENOMEM)
		return rc;
	r->er.rc = rc;
	return 0;
}

size_t fr_dump_entries_count(const struct fr_dump_entries *r)
{
	return r->n;
}

int fr_dump_from_val_entries(const struct fr_val *root, struct fr_dump_entries *r, char *err,
			     size_t errlen)
{
	struct rd rd = { r->rd.name, err, errlen, NULL, r->rd.visit };
	int rc;

	if (err && errlen)
		err[0] = '\0';
	rc = fr_rd_trace(&rd, root, "", &r->er, NULL, r->t);
	if (rc)
		fr_trace_free(r->t);
	return rc;
}

void fr_dump_entries_free(struct fr_dump_entries *r)
{
	free(r);
}

int fr_dump_from_val(const struct fr_val *root, const char *name, struct fr_trace *t,
		     char *err, size_t errlen)
{
	return fr_dump_from_val_visit(root, name, t, err, errlen, NULL);
}

int fr_dump_from_json(const json_t *root, const char *name, struct fr_trace *t, char *err,
		      size_t errlen)
{
	char *s = json_dumps(root, JSON_COMPACT | JSON_ENCODE_ANY);
	int rc;

	memset(t, 0, sizeof(*t));
	if (!s)
		return -ENOMEM;
	rc = fr_dump_parse(s, strlen(s), name, t, err, errlen);
	free(s);
	return rc;
}

int fr_rd_json_error(const struct rd *rd, int rc, const char *why)
{
	if (rc == -ENOMEM)
		return fr_rd_nomem(rd);
	return fr_rd_fail(rd, rc, "invalid JSON at %s", why);
}

static __thread struct fr_doc *lent_doc, *lent_scratch;

void fr_dump_use_docs(struct fr_doc *doc, struct fr_doc *scratch)
{
	lent_doc = doc;
	lent_scratch = scratch;
}

int fr_dump_parse(const char *buf, size_t len, const char *name, struct fr_trace *t,
		  char *err, size_t errlen)
{
	struct rd rd = { name ? name : "dump", err, errlen, NULL, NULL };
	struct entries_reader er = { &rd, t, NULL, len, false, 0, "" };
	struct fr_json_hook hook = { "entries", read_entries_json, &er };
	bool lent = lent_doc && lent_scratch;
	struct fr_doc *doc = lent ? lent_doc : fr_doc_new();
	struct fr_val *root;
	char why[256];
	int rc;

	memset(t, 0, sizeof(*t));
	if (err && errlen)
		err[0] = '\0';
	er.scratch = lent ? lent_scratch : fr_doc_new();
	if (!doc || !er.scratch) {
		rc = fr_rd_nomem(&rd);
		goto out_free;
	}
	why[0] = '\0';
	rc = fr_json_parse_with(doc, buf, len, &hook, &root, why, sizeof(why));
	/* An entry's own error is in err already; the parser's is in why. */
	if (rc && why[0])
		rc = fr_rd_json_error(&rd, rc, why);
	else if (rc == -ENOMEM)
		rc = fr_rd_nomem(&rd);
	else if (!rc)
		rc = fr_rd_trace(&rd, root, "", &er, NULL, t);
out_free:
	if (lent) {
		fr_doc_reset(er.scratch);
		fr_doc_reset(doc);
	} else {
		fr_doc_free(er.scratch);
		fr_doc_free(doc);
	}
	if (rc)
		fr_trace_free(t);
	return rc;
}

/*
 * Reads what is left of open file `fd` into *buf, which holds *cap bytes
 * and grows as needed (NULL and 0 to start); `size_hint` is its size as
 * fstat saw it. The buffer stays the caller's, also on failure. Closes
 * nothing.
 */
static int read_fd(const struct rd *rd, int fd, size_t size_hint, char **buf, size_t *cap,
		   size_t *len)
{
	size_t n = 0;

	*len = 0;
	/* The size is only a hint: pipes report 0 and files can grow. */
	if (*cap < size_hint + 1) {
		char *nb = realloc(*buf, size_hint + 1);

		if (!nb)
			return fr_rd_nomem(rd);
		*buf = nb;
		*cap = size_hint + 1;
	}
	for (;;) {
		ssize_t r;

		if (n == *cap) {
			size_t ncap = *cap < 65536 ? 65536 : *cap * 2;
			char *nb;

			if (n > FR_DUMP_FILE_MAX)
				return fr_rd_fail(rd, -EFBIG, "more than the limit of %llu bytes",
						  FR_DUMP_FILE_MAX);
			nb = realloc(*buf, ncap);
			if (!nb)
				return fr_rd_nomem(rd);
			*buf = nb;
			*cap = ncap;
		}
		r = read(fd, *buf + n, *cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return fr_rd_fail(rd, -errno, "cannot read: %s", strerror(errno));
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > FR_DUMP_FILE_MAX)
		return fr_rd_fail(rd, -EFBIG, "more than the limit of %llu bytes", FR_DUMP_FILE_MAX);
	*len = n;
	return 0;
}

/* What a file that is not a regular one is, for a message. */
static const char *file_type_name(mode_t mode)
{
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISSOCK(mode))
		return "a socket";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	return "not a plain file";
}

int fr_dump_open(const char *path, struct stat *st, char *err, size_t errlen)
{
	return fr_dump_openat(AT_FDCWD, path, path, st, err, errlen);
}

int fr_dump_openat(int dirfd, const char *name, const char *path, struct stat *st, char *err,
		   size_t errlen)
{
	struct rd rd = { path, err, errlen, NULL, NULL };
	struct stat lst;
	int fd;

	if (err && errlen)
		err[0] = '\0';
	/* O_NONBLOCK: opening a FIFO for reading would wait for a writer. It
	 * changes nothing for a regular file, the only kind read. */
	fd = openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int rc = -errno;

		/* ELOOP: a link (O_NOFOLLOW); ENXIO: a socket. Say which. */
		if ((rc == -ELOOP || rc == -ENXIO) &&
		    fstatat(dirfd, name, &lst, AT_SYMLINK_NOFOLLOW) == 0) {
			if (S_ISLNK(lst.st_mode))
				return fr_rd_fail(&rd, -ELOOP, "a symbolic link, not followed (put the "
						  "file itself in the directory)");
			if (!S_ISREG(lst.st_mode) && !S_ISDIR(lst.st_mode))
				return fr_rd_fail(&rd, -EINVAL, "%s, not a regular file",
						  file_type_name(lst.st_mode));
		}
		return fr_rd_fail(&rd, rc, "cannot open: %s", strerror(-rc));
	}
	if (fstat(fd, st) < 0) {
		int rc = -errno;

		close(fd);
		return fr_rd_fail(&rd, rc, "cannot stat: %s", strerror(-rc));
	}
	if (S_ISDIR(st->st_mode)) {
		close(fd);
		return fr_rd_fail(&rd, -EISDIR, "is a directory");
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return fr_rd_fail(&rd, -EINVAL, "%s, not a regular file", file_type_name(st->st_mode));
	}
	return fd;
}

int fr_rd_slurp(const char *path_, char **buf, size_t *len, char *err, size_t errlen)
{
	struct rd rd = { path_, err, errlen, NULL, NULL };
	struct stat st;
	size_t cap = 0;
	int fd, rc;

	*buf = NULL;
	*len = 0;
	if (err && errlen)
		err[0] = '\0';
	fd = fr_dump_open(path_, &st, err, errlen);
	if (fd < 0)
		return fd;
	if ((uint64_t)st.st_size > FR_DUMP_FILE_MAX) {
		rc = fr_rd_fail(&rd, -EFBIG, "%lld bytes, more than the limit of %llu",
				(long long)st.st_size, FR_DUMP_FILE_MAX);
	} else {
		rc = read_fd(&rd, fd, (size_t)st.st_size, buf, &cap, len);
	}
	close(fd);
	return rc;
}

int fr_dump_read_file(const char *path_, struct fr_trace *t, char *err, size_t errlen)
{
	char *buf;
	size_t len;
	int rc;

	memset(t, 0, sizeof(*t));
	rc = fr_rd_slurp(path_, &buf, &len, err, errlen);
	if (!rc)
		rc = fr_dump_parse(buf, len, path_, t, err, errlen);
	free(buf);
	return rc;
}
