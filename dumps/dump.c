/* For asprintf(). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "dump.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Dumps of a 2000-entry ring are a few MiB; anything this big is not one. */
#define DUMP_FILE_MAX (1ull << 30)

/* Room for a JSON path such as "ranks[1023].threads[12].frames[63].name". */
#define AT_MAX 256


/*
 * The largest world a dump may state: far beyond any MPI job, small enough
 * that arrays indexed by rank stay allocatable.
 */
#define DUMP_WORLD_MAX (1u << 24)

/* ------------------------------------------------------------------ */
/* Writing                                                             */
/* ------------------------------------------------------------------ */

/*
 * JSON integers are signed 64-bit in jansson. Every u64 we write (ns
 * timestamps until 2262, element counts, sequence numbers) is far below
 * 2^63; clamping keeps a corrupt value from turning into a negative number
 * that every reader would then refuse.
 */
static json_t *ju64(uint64_t v)
{
	return json_integer(v > INT64_MAX ? INT64_MAX : (json_int_t)v);
}

/*
 * A string from a fixed-size field. Names come from the application and the
 * system (host names, communicator descriptions, symbols) and JSON needs
 * UTF-8, so bytes that are not valid UTF-8 are written as '?' rather than
 * losing the whole dump.
 */
static json_t *jstrn(const char *s, size_t cap)
{
	size_t n = strnlen(s, cap);
	json_t *j = json_stringn(s, n);
	char *copy;

	if (j)
		return j;
	copy = malloc(n + 1);
	if (!copy)
		return NULL;
	for (size_t i = 0; i < n; i++)
		copy[i] = (unsigned char)s[i] < 0x80 && s[i] != '\0' ? s[i] : '?';
	copy[n] = '\0';
	j = json_stringn(copy, n);
	free(copy);
	return j;
}

#define JSTR(field) jstrn((field), sizeof(field))

/*
 * json_object_set_new() and json_array_append_new() take ownership of the
 * value even when they fail, and fail when given NULL, so the results of a
 * series of them can be or-ed together and checked once.
 */
static int set(json_t *obj, const char *key, json_t *v)
{
	return json_object_set_new(obj, key, v) ? -1 : 0;
}

static int append(json_t *arr, json_t *v)
{
	return json_array_append_new(arr, v) ? -1 : 0;
}

static json_t *sizes_json(uint64_t count)
{
	json_t *outer = json_array();
	json_t *inner = json_array();

	if (!outer || !inner || append(inner, ju64(count)) || append(outer, inner)) {
		json_decref(outer);
		return NULL;
	}
	return outer;
}

static json_t *single_json(json_t *v)
{
	json_t *arr = json_array();

	if (!arr || append(arr, v)) {
		json_decref(arr);
		return NULL;
	}
	return arr;
}

/* PyTorch's words for an operation on a GPU stream that has not completed:
 * "scheduled" until the device reaches it, then "started". */
static const char *state_text(const struct fr_op *op)
{
	if (op->state != FR_STATE_ENTERED || !op->gpu)
		return fr_state_name(op->state);
	return op->started ? "started" : "scheduled";
}

static json_t *entry_json(const struct fr_trace *t, const struct fr_op *op)
{
	const struct fr_comm *comm = fr_trace_comm(t, op->comm);
	const char *opname = fr_op_name(op->type);
	char profiling[64];
	json_t *e = json_object();
	json_t *pg = json_array();
	int bad = 0;

	snprintf(profiling, sizeof(profiling), "mpi:%s", opname);
	if (!e || !pg)
		goto out_free;
	bad |= append(pg, JSTR(op->comm));
	bad |= append(pg, comm ? JSTR(comm->desc) : json_string(""));

	bad |= set(e, "record_id", ju64(op->record_id));
	bad |= set(e, "pg_id", JSTR(op->comm));
	bad |= set(e, "process_group", pg);
	pg = NULL;
	bad |= set(e, "collective_seq_id", ju64(op->is_p2p ? 0 : op->seq));
	bad |= set(e, "p2p_seq_id", ju64(op->is_p2p ? op->seq : 0));
	bad |= set(e, "op_id", ju64(op->record_id));
	bad |= set(e, "profiling_name", json_string(profiling));
	bad |= set(e, "time_created_ns", ju64(op->t_entered_ns));
	bad |= set(e, "input_sizes", sizes_json(op->count));
	bad |= set(e, "input_dtypes", single_json(JSTR(op->dtype)));
	bad |= set(e, "output_sizes", sizes_json(op->count));
	bad |= set(e, "output_dtypes", single_json(JSTR(op->dtype)));
	bad |= set(e, "state", json_string(state_text(op)));
	bad |= set(e, "time_discovered_started_ns",
		   op->t_started_ns ? ju64(op->t_started_ns) : json_null());
	bad |= set(e, "time_discovered_completed_ns",
		   op->t_completed_ns ? ju64(op->t_completed_ns) : json_null());
	bad |= set(e, "retired", json_boolean(op->state == FR_STATE_COMPLETED));
	bad |= set(e, "is_p2p", json_boolean(op->is_p2p));
	bad |= set(e, "op", json_string(opname));
	bad |= set(e, "nonblocking", json_boolean(op->nonblocking));
	bad |= set(e, "waited", json_boolean(op->waited));
	if (op->captured)
		bad |= set(e, "captured", json_true());
	bad |= set(e, "peer", json_integer(op->peer));
	bad |= set(e, "root", json_integer(op->root));
	bad |= set(e, "peer_in_comm", json_integer(op->peer_in_comm));
	bad |= set(e, "count", ju64(op->count));
	bad |= set(e, "bytes", ju64(op->bytes));
	bad |= set(e, "dtype", JSTR(op->dtype));
	bad |= set(e, "redop", JSTR(op->redop));
	if (bad)
		goto out_free;
	return e;

out_free:
	json_decref(pg);
	json_decref(e);
	return NULL;
}

static json_t *pg_config_json(const struct fr_comm *c)
{
	json_t *o = json_object();
	json_t *ranks = json_array();
	int bad = 0;

	if (!o || !ranks)
		goto out_free;
	/* A view that knows only a communicator's size writes no members; one
	 * that knows some (an NCCL rank knows its own) writes -1 for the rest. */
	for (uint32_t i = 0; c->members && i < c->size; i++)
		bad |= append(ranks, json_integer(c->members[i] == FR_RANK_UNKNOWN ?
							  -1 :
							  (json_int_t)c->members[i]));
	bad |= set(o, "name", JSTR(c->id));
	bad |= set(o, "desc", JSTR(c->desc));
	bad |= set(o, "ranks", ranks);
	ranks = NULL;
	bad |= set(o, "rank", json_integer(c->rank));
	bad |= set(o, "size", json_integer(c->size));
	if (bad)
		goto out_free;
	return o;

out_free:
	json_decref(ranks);
	json_decref(o);
	return NULL;
}

static json_t *pg_status_json(const struct fr_comm *c)
{
	json_t *o = json_object();
	int bad = 0;

	if (!o)
		return NULL;
	bad |= set(o, "last_enqueued_collective", ju64(c->last_entered));
	bad |= set(o, "last_started_collective", ju64(c->last_entered));
	bad |= set(o, "last_completed_collective", ju64(c->last_completed));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *thread_json(const struct fr_thread *th)
{
	json_t *o = json_object();
	json_t *frames = json_array();
	int bad = 0;

	if (!o || !frames)
		goto out_free;
	for (size_t i = 0; i < th->nframes; i++) {
		const struct fr_frame *f = &th->frames[i];
		json_t *fo = json_object();
		char ip[2 + 16 + 1];

		snprintf(ip, sizeof(ip), "0x%" PRIx64, f->ip);
		bad |= append(frames, fo);
		if (!fo)
			break;
		bad |= set(fo, "name", f->name ? jstrn(f->name, SIZE_MAX) : json_null());
		bad |= set(fo, "offset", ju64(f->offset));
		bad |= set(fo, "ip", json_string(ip));
	}
	bad |= set(o, "tid", json_integer(th->tid));
	bad |= set(o, "name", JSTR(th->name));
	bad |= set(o, "current", json_boolean(th->current));
	bad |= set(o, "frames", frames);
	frames = NULL;
	if (bad)
		goto out_free;
	return o;

out_free:
	json_decref(frames);
	json_decref(o);
	return NULL;
}

/* The dump document of `t`; the manifest reuses it without threads. */
static json_t *trace_json(const struct fr_trace *t, bool with_threads)
{
	json_t *root = json_object();
	json_t *pg_config = json_object();
	json_t *pg_status = json_object();
	json_t *entries = json_array();
	json_t *threads = NULL;
	int bad = 0;

	if (!root || !pg_config || !pg_status || !entries)
		goto out_free;
	for (size_t i = 0; i < t->ncomms && !bad; i++) {
		/* The key is spelled as "pg_id" spells it, made UTF-8 alike. */
		json_t *id = JSTR(t->comms[i].id);

		if (!id)
			goto out_free;
		bad |= set(pg_config, json_string_value(id), pg_config_json(&t->comms[i]));
		bad |= set(pg_status, json_string_value(id), pg_status_json(&t->comms[i]));
		json_decref(id);
	}
	for (size_t i = 0; i < t->nops && !bad; i++)
		bad |= append(entries, entry_json(t, &t->ops[i]));
	if (with_threads && t->nthreads) {
		threads = json_array();
		if (!threads)
			goto out_free;
		for (size_t i = 0; i < t->nthreads && !bad; i++)
			bad |= append(threads, thread_json(&t->threads[i]));
	}

	bad |= set(root, "format", json_string(FR_DUMP_FORMAT));
	bad |= set(root, "version", json_string(FR_DUMP_VERSION));
	bad |= set(root, "job", JSTR(t->job));
	bad |= set(root, "rank", json_integer(t->rank));
	bad |= set(root, "world_size", json_integer(t->world_size));
	bad |= set(root, "host", JSTR(t->host));
	bad |= set(root, "pid", json_integer(t->pid));
	bad |= set(root, "status", json_string(fr_rank_status_name(t->status)));
	bad |= set(root, "comm_lib_version", JSTR(t->comm_lib));
	bad |= set(root, "incident", JSTR(t->incident));
	bad |= set(root, "dump_reason", JSTR(t->reason));
	bad |= set(root, "time_dumped_ns", ju64(t->time_ns));
	bad |= set(root, "dropped_entries", ju64(t->dropped));
	bad |= set(root, "pg_config", pg_config);
	bad |= set(root, "pg_status", pg_status);
	bad |= set(root, "entries", entries);
	pg_config = pg_status = entries = NULL;
	if (threads) {
		bad |= set(root, "threads", threads);
		threads = NULL;
	}
	if (bad)
		goto out_free;
	return root;

out_free:
	json_decref(threads);
	json_decref(entries);
	json_decref(pg_status);
	json_decref(pg_config);
	json_decref(root);
	return NULL;
}

json_t *fr_dump_to_json(const struct fr_trace *t)
{
	return trace_json(t, true);
}

int fr_dump_serialize(const struct fr_trace *t, char **out, size_t *len)
{
	json_t *root = fr_dump_to_json(t);
	char *s, *nl;
	size_t n;

	*out = NULL;
	*len = 0;
	if (!root)
		return -ENOMEM;
	s = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	if (!s)
		return -ENOMEM;
	/* A trailing newline so that the file reads well with cat and tail. */
	n = strlen(s);
	nl = realloc(s, n + 2);
	if (!nl) {
		free(s);
		return -ENOMEM;
	}
	nl[n] = '\n';
	nl[n + 1] = '\0';
	*out = nl;
	*len = n + 1;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Reading                                                             */
/* ------------------------------------------------------------------ */

/* Where errors go: the file's name and the caller's buffer. */
struct rd {
	const char *name;
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 3, 4)))
static int fail(const struct rd *rd, int rc, const char *fmt, ...)
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

static int fail_nomem(const struct rd *rd)
{
	return fail(rd, -ENOMEM, "out of memory");
}

/*
 * Formats a place in the document into buf (AT_MAX bytes). A path too deep
 * to fit is cut short; it only ever ends up in a message.
 */
__attribute__((format(printf, 2, 3)))
static const char *at_fmt(char *buf, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, AT_MAX, fmt, ap);
	va_end(ap);
	return buf;
}

/* "entries[3]" + "count" -> "entries[3].count"; for messages. */
static const char *path(char *buf, const char *at, const char *key)
{
	return at_fmt(buf, "%s%s%s", at, *at ? "." : "", key);
}

static const char *type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a real number";
	case JSON_TRUE:
		return "true";
	case JSON_FALSE:
		return "false";
	case JSON_NULL:
		return "null";
	}
	return "an unknown value";
}

/*
 * Field getters. A missing or null optional field leaves the default; a
 * present field of the wrong type is always an error, so that a typo in a
 * hand-written or converted dump is reported rather than silently ignored.
 */
static int want(const struct rd *rd, const json_t *obj, const char *at, const char *key,
		bool required, const char *what, const json_t **out)
{
	char p[AT_MAX];
	const json_t *v = json_object_get(obj, key);

	*out = NULL;
	if (!v || json_is_null(v)) {
		if (required)
			return fail(rd, -EPROTO, "%s: missing (expected %s)", path(p, at, key),
				    what);
		return 0;
	}
	*out = v;
	return 0;
}

static int get_u64(const struct rd *rd, const json_t *obj, const char *at, const char *key,
		   bool required, uint64_t max, uint64_t *out)
{
	char p[AT_MAX];
	const json_t *v;
	json_int_t i;
	int rc = want(rd, obj, at, key, required, "an integer", &v);

	if (rc || !v)
		return rc;
	if (!json_is_integer(v))
		return fail(rd, -EPROTO, "%s: expected an integer, got %s", path(p, at, key),
			    type_name(v));
	i = json_integer_value(v);
	if (i < 0 || (uint64_t)i > max)
		return fail(rd, -EPROTO, "%s: %lld is out of range (0..%" PRIu64 ")",
			    path(p, at, key), (long long)i, max);
	*out = (uint64_t)i;
	return 0;
}

static int get_u32(const struct rd *rd, const json_t *obj, const char *at, const char *key,
		   bool required, uint32_t *out)
{
	uint64_t v = *out;
	int rc = get_u64(rd, obj, at, key, required, UINT32_MAX, &v);

	if (!rc)
		*out = (uint32_t)v;
	return rc;
}

/*
 * A rank or -1 for none: a global one (peer, root) or one in a communicator
 * (peer_in_comm). Absent or null means none.
 */
static int get_rank_or_none(const struct rd *rd, const json_t *obj, const char *at,
			    const char *key, int32_t *out)
{
	char p[AT_MAX];
	const json_t *v;
	json_int_t i;
	int rc = want(rd, obj, at, key, false, "an integer", &v);

	*out = -1;
	if (rc || !v)
		return rc;
	if (!json_is_integer(v))
		return fail(rd, -EPROTO, "%s: expected an integer, got %s", path(p, at, key),
			    type_name(v));
	i = json_integer_value(v);
	if (i < -1 || i > INT32_MAX)
		return fail(rd, -EPROTO, "%s: %lld is out of range (-1..%d)", path(p, at, key),
			    (long long)i, INT32_MAX);
	*out = (int32_t)i;
	return 0;
}

static int get_bool(const struct rd *rd, const json_t *obj, const char *at, const char *key,
		    bool required, bool *out)
{
	char p[AT_MAX];
	const json_t *v;
	int rc = want(rd, obj, at, key, required, "true or false", &v);

	if (rc || !v)
		return rc;
	if (!json_is_boolean(v))
		return fail(rd, -EPROTO, "%s: expected true or false, got %s", path(p, at, key),
			    type_name(v));
	*out = json_is_true(v);
	return 0;
}

/* A string value into a fixed buffer of `cap` bytes (terminator included). */
static int str_into(const struct rd *rd, const json_t *v, const char *where, char *dst,
		    size_t cap)
{
	size_t n;

	if (!json_is_string(v))
		return fail(rd, -EPROTO, "%s: expected a string, got %s", where, type_name(v));
	n = json_string_length(v);
	if (n >= cap)
		return fail(rd, -EPROTO, "%s: %zu bytes long, longer than the limit of %zu",
			    where, n, cap - 1);
	memcpy(dst, json_string_value(v), n);
	dst[n] = '\0';
	return 0;
}

static int get_str(const struct rd *rd, const json_t *obj, const char *at, const char *key,
		   bool required, char *dst, size_t cap)
{
	char p[AT_MAX];
	const json_t *v;
	int rc = want(rd, obj, at, key, required, "a string", &v);

	if (rc || !v)
		return rc;
	return str_into(rd, v, path(p, at, key), dst, cap);
}

#define GET_STR(rd, obj, at, key, req, field) \
	get_str((rd), (obj), (at), (key), (req), (field), sizeof(field))

static int get_container(const struct rd *rd, const json_t *obj, const char *at,
			 const char *key, bool required, json_type type, const json_t **out)
{
	char p[AT_MAX];
	const char *what = type == JSON_OBJECT ? "an object" : "an array";
	int rc = want(rd, obj, at, key, required, what, out);

	if (rc || !*out)
		return rc;
	if (json_typeof(*out) != type)
		return fail(rd, -EPROTO, "%s: expected %s, got %s", path(p, at, key), what,
			    type_name(*out));
	return 0;
}

/*
 * Checks "format" and "version" of a document. `kind` is what the reader
 * expects ("dump", "manifest"), for messages.
 */
static int check_header(const struct rd *rd, const json_t *root, const char *at,
			const char *format, const char *kind)
{
	char p[AT_MAX];
	const json_t *f, *v;
	const char *s;
	char *end;
	unsigned long major;

	if (!json_is_object(root))
		return fail(rd, -EPROTO, "%s%snot a flightrec %s (%s, not an object)", at,
			    *at ? ": " : "", kind, type_name(root));
	f = json_object_get(root, "format");
	if (!json_is_string(f))
		return fail(rd, -EPROTO, "%s%snot a flightrec %s (no \"format\": \"%s\")", at,
			    *at ? ": " : "", kind, format);
	if (strcmp(json_string_value(f), format) != 0)
		return fail(rd, -EPROTO, "%s%snot a flightrec %s (format is \"%.64s\", not \"%s\")",
			    at, *at ? ": " : "", kind, json_string_value(f), format);

	v = json_object_get(root, "version");
	if (!v)
		return fail(rd, -EPROTO, "%s: missing (expected a string such as \"%s\")",
			    path(p, at, "version"), FR_DUMP_VERSION);
	if (!json_is_string(v))
		return fail(rd, -EPROTO, "%s: expected a string such as \"%s\", got %s",
			    path(p, at, "version"), FR_DUMP_VERSION, type_name(v));
	s = json_string_value(v);
	errno = 0;
	major = strtoul(s, &end, 10);
	if (end == s || *end != '.' || end[1] < '0' || end[1] > '9' || errno || s[0] < '0' ||
	    s[0] > '9')
		return fail(rd, -EPROTO, "%s: \"%.32s\" is not of the form MAJOR.MINOR",
			    path(p, at, "version"), s);
	if (major != FR_DUMP_VERSION_MAJOR)
		return fail(rd, -EPROTONOSUPPORT,
			    "%s%s%s format version %.32s is not supported (this build reads %d.x)",
			    at, *at ? ": " : "", kind, s, FR_DUMP_VERSION_MAJOR);
	return 0;
}

/*
 * A world size sizes arrays indexed by rank in every reader, so it is
 * checked here, once: 0 (which some early writers used for "unknown") and
 * absurd sizes are refused.
 */
static int check_world(const struct rd *rd, const char *at, uint32_t world_size)
{
	char p[AT_MAX];

	if (world_size == 0 || world_size > DUMP_WORLD_MAX)
		return fail(rd, -EPROTO, "%s: %" PRIu32 " is not a valid world size (1..%u)",
			    path(p, at, "world_size"), world_size, DUMP_WORLD_MAX);
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
	{ "alltoall", FR_OP_ALL_TO_ALL },
	{ "alltoall_base", FR_OP_ALL_TO_ALL },
	{ "_broadcast_oop", FR_OP_BROADCAST },
	{ "_reduce_oop", FR_OP_REDUCE },
};

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
static int32_t peer_from_profiling_name(const json_t *v)
{
	const char *s = json_string_value(v), *arrow;
	long peer;
	char *end;

	if (!s || (!(arrow = strstr(s, "->")) && !(arrow = strstr(s, "<-"))))
		return -1;
	errno = 0;
	peer = strtol(arrow + 2, &end, 10);
	if (end == arrow + 2 || *end || errno || peer < 0 || peer > INT32_MAX)
		return -1;
	return (int32_t)peer;
}

/*
 * Elements of the first input tensor, for entries that carry PyTorch's
 * "input_sizes" (a list of shapes) but not our "count".
 */
static int count_from_sizes(const struct rd *rd, const json_t *e, const char *at,
			    uint64_t *count)
{
	char p[AT_MAX];
	const json_t *sizes, *shape, *dim;
	size_t i;
	uint64_t n = 1;
	int rc = get_container(rd, e, at, "input_sizes", false, JSON_ARRAY, &sizes);

	if (rc || !sizes || json_array_size(sizes) == 0)
		return rc;
	shape = json_array_get(sizes, 0);
	if (!json_is_array(shape))
		return fail(rd, -EPROTO, "%s[0]: expected an array, got %s",
			    path(p, at, "input_sizes"), type_name(shape));
	json_array_foreach(shape, i, dim) {
		json_int_t d = json_integer_value(dim);

		if (!json_is_integer(dim) || d < 0)
			return fail(rd, -EPROTO, "%s[0][%zu]: expected a non-negative integer",
				    path(p, at, "input_sizes"), i);
		n = d && n > UINT64_MAX / (uint64_t)d ? UINT64_MAX : n * (uint64_t)d;
	}
	*count = n;
	return 0;
}

static int read_entry(const struct rd *rd, const json_t *e, const char *at, struct fr_op *op)
{
	char p[AT_MAX];
	char buf[64];
	const json_t *v, *pg;
	uint64_t coll_seq = 0, p2p_seq = 0;
	bool running;
	int state;
	int rc;

	if (!json_is_object(e))
		return fail(rd, -EPROTO, "%s: expected an object, got %s", at, type_name(e));

	rc = get_u64(rd, e, at, "record_id", true, INT64_MAX, &op->record_id);
	if (rc)
		return rc;

	rc = want(rd, e, at, "pg_id", true, "a string", &v);
	if (rc)
		return rc;
	/* PyTorch keys pg_config by group name, which process_group holds;
	 * its pg_id is an index that need not match. Ours write both alike. */
	pg = json_object_get(e, "process_group");
	if (json_is_array(pg) && json_is_string(json_array_get(pg, 0))) {
		if ((rc = str_into(rd, json_array_get(pg, 0), path(p, at, "process_group"),
				   op->comm, sizeof(op->comm))))
			return rc;
	} else if (json_is_integer(v)) {
		/* PyTorch numbers some process groups. */
		snprintf(op->comm, sizeof(op->comm), "%lld", (long long)json_integer_value(v));
	} else if ((rc = str_into(rd, v, path(p, at, "pg_id"), op->comm, sizeof(op->comm)))) {
		return rc;
	}

	if ((rc = get_u64(rd, e, at, "collective_seq_id", true, INT64_MAX, &coll_seq)) ||
	    (rc = get_u64(rd, e, at, "p2p_seq_id", true, INT64_MAX, &p2p_seq)))
		return rc;

	rc = want(rd, e, at, "op", false, "a string", &v);
	if (rc)
		return rc;
	if (v) {
		if ((rc = GET_STR(rd, e, at, "op", true, buf)))
			return rc;
		op->type = fr_op_from_name(buf);
	} else {
		rc = want(rd, e, at, "profiling_name", true, "a string", &v);
		if (rc)
			return rc;
		if (!json_is_string(v))
			return fail(rd, -EPROTO, "%s: expected a string, got %s",
				    path(p, at, "profiling_name"), type_name(v));
		op->type = type_from_profiling_name(json_string_value(v));
	}

	if ((rc = GET_STR(rd, e, at, "state", true, buf)))
		return rc;
	state = fr_state_from_name(buf);
	/* PyTorch's "scheduled" and "started" both mean not yet completed. */
	if (state < 0 && (strcmp(buf, "scheduled") == 0 || strcmp(buf, "started") == 0))
		state = FR_STATE_ENTERED;
	if (state < 0)
		return fail(rd, -EPROTO,
			    "%s: unknown state \"%s\" (expected entered, completed, scheduled or started)",
			    path(p, at, "state"), buf);
	op->state = (enum fr_op_state)state;
	running = strcmp(buf, "entered") == 0 || strcmp(buf, "started") == 0;
	op->gpu = strcmp(buf, "scheduled") == 0 || strcmp(buf, "started") == 0;
	op->started = strcmp(buf, "started") == 0;

	op->is_p2p = !fr_op_is_collective(op->type) && op->type != FR_OP_UNKNOWN;
	if ((rc = get_bool(rd, e, at, "is_p2p", false, &op->is_p2p)))
		return rc;
	op->seq = op->is_p2p ? p2p_seq : coll_seq;

	if ((rc = get_u64(rd, e, at, "time_created_ns", true, INT64_MAX, &op->t_entered_ns)) ||
	    (rc = get_u64(rd, e, at, "time_discovered_started_ns", false, INT64_MAX,
			  &op->t_started_ns)) ||
	    (rc = get_u64(rd, e, at, "time_discovered_completed_ns", false, INT64_MAX,
			  &op->t_completed_ns)) ||
	    (rc = want(rd, e, at, "nonblocking", false, "true or false", &v)) ||
	    (rc = get_bool(rd, e, at, "nonblocking", false, &op->nonblocking)) ||
	    (rc = get_bool(rd, e, at, "waited", false, &op->waited)) ||
	    (rc = get_bool(rd, e, at, "captured", false, &op->captured)) ||
	    (rc = get_rank_or_none(rd, e, at, "peer", &op->peer)) ||
	    (rc = get_rank_or_none(rd, e, at, "root", &op->root)) ||
	    (rc = get_rank_or_none(rd, e, at, "peer_in_comm", &op->peer_in_comm)))
		return rc;
	/* As on the wire: only a non-blocking operation is waited on. */
	if (op->waited && !op->nonblocking)
		return fail(rd, -EPROTO, "%s: true for an operation that is not nonblocking",
			    path(p, at, "waited"));
	/*
	 * An entry without "nonblocking" comes from PyTorch, whose operations
	 * all block the rank from the moment they start; its start time is
	 * often null, and then entering is the best evidence of it.
	 */
	if (!v && running && !op->t_started_ns)
		op->t_started_ns = op->t_entered_ns;

	/* PyTorch names a point-to-point peer only in "nccl:send 0->1" or
	 * "nccl:recv 1<-0": ranks in the group, this one's first. */
	if (op->is_p2p && op->peer_in_comm < 0 && !json_object_get(e, "peer_in_comm"))
		op->peer_in_comm = peer_from_profiling_name(json_object_get(e, "profiling_name"));

	if (json_object_get(e, "count"))
		rc = get_u64(rd, e, at, "count", false, INT64_MAX, &op->count);
	else
		rc = count_from_sizes(rd, e, at, &op->count);
	if (rc || (rc = get_u64(rd, e, at, "bytes", false, INT64_MAX, &op->bytes)))
		return rc;

	if (json_object_get(e, "dtype")) {
		rc = GET_STR(rd, e, at, "dtype", false, op->dtype);
	} else {
		const json_t *dtypes;

		rc = get_container(rd, e, at, "input_dtypes", false, JSON_ARRAY, &dtypes);
		if (!rc && dtypes && json_array_size(dtypes) > 0) {
			char dat[AT_MAX];

			at_fmt(dat, "%s[0]", path(p, at, "input_dtypes"));
			rc = str_into(rd, json_array_get(dtypes, 0), dat, op->dtype,
				      sizeof(op->dtype));
		}
	}
	if (rc)
		return rc;
	if (!json_object_get(e, "bytes"))
		op->bytes = op->count * torch_dtype_size(op->dtype);
	return GET_STR(rd, e, at, "redop", false, op->redop);
}

/*
 * PyTorch writes a group's ranks as a string, "[0, 1]"; ours is an array,
 * where -1 stands for a member the writer did not know (FR_RANK_UNKNOWN).
 * Parses either into a newly allocated array (the caller frees).
 */
static int read_members(const struct rd *rd, const json_t *v, const char *where,
			uint32_t **out, size_t *n)
{
	size_t cap = json_is_array(v) ? json_array_size(v) : json_string_length(v) / 2 + 1;
	uint32_t *m;
	size_t i = 0;

	*out = NULL;
	*n = 0;
	if (!json_is_array(v) && !json_is_string(v))
		return fail(rd, -EPROTO, "%s: expected an array, got %s", where, type_name(v));
	m = calloc(cap ? cap : 1, sizeof(*m));
	if (!m)
		return fail_nomem(rd);
	if (json_is_array(v)) {
		const json_t *r;

		json_array_foreach(v, i, r) {
			json_int_t x = json_integer_value(r);

			if (!json_is_integer(r)) {
				free(m);
				return fail(rd, -EPROTO, "%s[%zu]: expected an integer, got %s",
					    where, i, type_name(r));
			}
			if (x < -1 || x >= UINT32_MAX) {
				free(m);
				return fail(rd, -EPROTO, "%s[%zu]: %lld is not a rank", where, i,
					    (long long)x);
			}
			m[i] = x == -1 ? FR_RANK_UNKNOWN : (uint32_t)x;
		}
	} else {
		const char *s = json_string_value(v);
		char *end;

		s += strspn(s, " ");
		if (*s++ != '[')
			goto out_bad_string;
		for (;;) {
			unsigned long x;

			s += strspn(s, " ");
			if (*s == ']' && i == 0)
				break;
			if (*s < '0' || *s > '9')
				goto out_bad_string;
			errno = 0;
			x = strtoul(s, &end, 10);
			if (errno || x >= UINT32_MAX || i >= cap)
				goto out_bad_string;
			m[i++] = (uint32_t)x;
			s = end + strspn(end, " ");
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
	return fail(rd, -EPROTO, "%s: \"%.64s\" is not a list of ranks", where,
		    json_string_value(v));
}

int fr_dump_read_members(const json_t *v, const char *name, uint32_t **out, size_t *n,
			 char *err, size_t errlen)
{
	struct rd rd = { name ? name : "ranks", err, errlen };

	return read_members(&rd, v, "ranks", out, n);
}

static int read_comm(const struct rd *rd, const json_t *pc, const char *at,
		     const struct fr_trace *t, struct fr_comm *c)
{
	char p[AT_MAX];
	const json_t *v;
	size_t n = 0;
	uint64_t size;
	int rc;

	if (!json_is_object(pc))
		return fail(rd, -EPROTO, "%s: expected an object, got %s", at, type_name(pc));
	if ((rc = GET_STR(rd, pc, at, "desc", false, c->desc)) ||
	    (rc = want(rd, pc, at, "ranks", true, "an array", &v)) ||
	    (rc = read_members(rd, v, path(p, at, "ranks"), &c->members, &n)))
		return rc;

	size = n;
	if ((rc = get_u64(rd, pc, at, "size", false, UINT32_MAX, &size)))
		return rc;
	c->size = (uint32_t)size;
	/* An empty list stands for members the writer did not know. */
	if (n == 0) {
		free(c->members);
		c->members = NULL;
	} else if (n != size) {
		return fail(rd, -EPROTO, "%s: lists %zu ranks but size is %" PRIu64,
			    path(p, at, "ranks"), n, size);
	}
	for (size_t i = 0; i < n; i++) {
		if (c->members[i] == FR_RANK_UNKNOWN)
			continue;
		if (c->members[i] >= t->world_size)
			return fail(rd, -EPROTO, "%s[%zu]: rank %" PRIu32
				    " is not below world_size %" PRIu32,
				    path(p, at, "ranks"), i, c->members[i], t->world_size);
		/* PyTorch does not write our rank in the group; find it. */
		if (c->members[i] == t->rank)
			c->rank = (uint32_t)i;
	}

	if ((rc = get_u32(rd, pc, at, "rank", false, &c->rank)))
		return rc;
	if (c->size && c->rank >= c->size)
		return fail(rd, -EPROTO, "%s: %" PRIu32 " is not below size %" PRIu32,
			    path(p, at, "rank"), c->rank, c->size);
	return 0;
}

static int read_comms(const struct rd *rd, const json_t *root, const char *at,
		      struct fr_trace *t)
{
	char p[AT_MAX], cat[AT_MAX];
	const json_t *config, *status, *pc, *ps;
	const char *id;
	size_t cap = 0;
	int rc;

	if ((rc = get_container(rd, root, at, "pg_config", true, JSON_OBJECT, &config)) ||
	    (rc = get_container(rd, root, at, "pg_status", true, JSON_OBJECT, &status)))
		return rc;

	json_object_foreach((json_t *)config, id, pc) {
		struct fr_comm *c;

		at_fmt(cat, "%s.%s", path(p, at, "pg_config"), id);
		if (strlen(id) > FR_COMM_ID_MAX)
			return fail(rd, -EPROTO, "%s: process group id longer than %d bytes",
				    cat, FR_COMM_ID_MAX);
		c = fr_trace_add_comm(t, &cap);
		if (!c)
			return fail_nomem(rd);
		strcpy(c->id, id);
		if ((rc = read_comm(rd, pc, cat, t, c)))
			return rc;
	}

	json_object_foreach((json_t *)status, id, ps) {
		struct fr_comm *c = (struct fr_comm *)fr_trace_comm(t, id);

		at_fmt(cat, "%s.%s", path(p, at, "pg_status"), id);
		if (!c)
			return fail(rd, -EPROTO, "%s: no such process group in pg_config", cat);
		if (!json_is_object(ps))
			return fail(rd, -EPROTO, "%s: expected an object, got %s", cat,
				    type_name(ps));
		if ((rc = get_u64(rd, ps, cat, "last_enqueued_collective", true, INT64_MAX,
				  &c->last_entered)) ||
		    (rc = get_u64(rd, ps, cat, "last_completed_collective", true, INT64_MAX,
				  &c->last_completed)))
			return rc;
	}
	return 0;
}

static int read_frame(const struct rd *rd, const json_t *fo, const char *at, struct fr_frame *f)
{
	char p[AT_MAX];
	const json_t *v;
	const char *s;
	char *end;
	int rc;

	if (!json_is_object(fo))
		return fail(rd, -EPROTO, "%s: expected an object, got %s", at, type_name(fo));
	if ((rc = want(rd, fo, at, "name", false, "a string", &v)))
		return rc;
	if (v) {
		if (!json_is_string(v))
			return fail(rd, -EPROTO, "%s: expected a string or null, got %s",
				    path(p, at, "name"), type_name(v));
		f->name = strdup(json_string_value(v));
		if (!f->name)
			return fail_nomem(rd);
	}
	if ((rc = get_u64(rd, fo, at, "offset", true, INT64_MAX, &f->offset)) ||
	    (rc = want(rd, fo, at, "ip", true, "a hex string", &v)))
		return rc;
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		f->ip = (uint64_t)json_integer_value(v);
		return 0;
	}
	s = json_string_value(v);
	if (!s || strncmp(s, "0x", 2) != 0 || !s[2] || strlen(s) > 18)
		goto out_bad_ip;
	errno = 0;
	f->ip = strtoull(s + 2, &end, 16);
	if (*end || errno || s[2] == '-' || s[2] == '+' || s[2] == ' ')
		goto out_bad_ip;
	return 0;

out_bad_ip:
	return fail(rd, -EPROTO, "%s: expected a hex string such as \"0x4005d6\"",
		    path(p, at, "ip"));
}

static int read_threads(const struct rd *rd, const json_t *root, const char *at,
			struct fr_trace *t)
{
	char p[AT_MAX], tat[AT_MAX], fat[AT_MAX];
	const json_t *threads, *to, *frames, *fo;
	size_t i, j;
	int rc;

	if ((rc = get_container(rd, root, at, "threads", false, JSON_ARRAY, &threads)) ||
	    !threads || json_array_size(threads) == 0)
		return rc;
	t->threads = calloc(json_array_size(threads), sizeof(*t->threads));
	if (!t->threads)
		return fail_nomem(rd);

	json_array_foreach(threads, i, to) {
		struct fr_thread *th = &t->threads[i];

		t->nthreads = i + 1;
		at_fmt(tat, "%s[%zu]", path(p, at, "threads"), i);
		if (!json_is_object(to))
			return fail(rd, -EPROTO, "%s: expected an object, got %s", tat,
				    type_name(to));
		if ((rc = get_u32(rd, to, tat, "tid", true, &th->tid)) ||
		    (rc = GET_STR(rd, to, tat, "name", false, th->name)) ||
		    (rc = get_bool(rd, to, tat, "current", false, &th->current)) ||
		    (rc = get_container(rd, to, tat, "frames", true, JSON_ARRAY, &frames)))
			return rc;
		if (json_array_size(frames) == 0)
			continue;
		th->frames = calloc(json_array_size(frames), sizeof(*th->frames));
		if (!th->frames)
			return fail_nomem(rd);
		json_array_foreach(frames, j, fo) {
			th->nframes = j + 1;
			at_fmt(fat, "%s[%zu]", path(p, tat, "frames"), j);
			if ((rc = read_frame(rd, fo, fat, &th->frames[j])))
				return rc;
		}
	}
	return 0;
}

/*
 * Reads one dump object; `at` is its place inside a larger document ("" for
 * a dump file, "ranks[3]" in a manifest). On error `t` may hold a partial
 * trace, which the caller frees.
 */
static int read_trace(const struct rd *rd, const json_t *root, const char *at,
		      struct fr_trace *t)
{
	char p[AT_MAX], eat[AT_MAX];
	char status[32];
	const json_t *entries, *e;
	size_t i, cap = 0;
	int st, rc;

	if ((rc = check_header(rd, root, at, FR_DUMP_FORMAT, "dump")))
		return rc;

	if ((rc = GET_STR(rd, root, at, "job", true, t->job)) ||
	    (rc = get_u32(rd, root, at, "rank", true, &t->rank)) ||
	    (rc = get_u32(rd, root, at, "world_size", true, &t->world_size)) ||
	    (rc = GET_STR(rd, root, at, "host", true, t->host)) ||
	    (rc = get_u32(rd, root, at, "pid", true, &t->pid)) ||
	    (rc = GET_STR(rd, root, at, "status", true, status)) ||
	    (rc = GET_STR(rd, root, at, "comm_lib_version", true, t->comm_lib)) ||
	    (rc = GET_STR(rd, root, at, "incident", true, t->incident)) ||
	    (rc = GET_STR(rd, root, at, "dump_reason", true, t->reason)) ||
	    (rc = get_u64(rd, root, at, "time_dumped_ns", true, INT64_MAX, &t->time_ns)) ||
	    (rc = get_u64(rd, root, at, "dropped_entries", true, INT64_MAX, &t->dropped)))
		return rc;
	st = fr_rank_status_from_name(status);
	if (st < 0)
		return fail(rd, -EPROTO, "%s: unknown rank status \"%s\"", path(p, at, "status"),
			    status);
	t->status = (enum fr_rank_status)st;
	if ((rc = check_world(rd, at, t->world_size)))
		return rc;
	if (t->rank >= t->world_size)
		return fail(rd, -EPROTO, "%s: %" PRIu32 " is not below world_size %" PRIu32,
			    path(p, at, "rank"), t->rank, t->world_size);

	if ((rc = read_comms(rd, root, at, t)) ||
	    (rc = get_container(rd, root, at, "entries", true, JSON_ARRAY, &entries)))
		return rc;
	json_array_foreach(entries, i, e) {
		struct fr_op *op = fr_trace_add_op(t, &cap);

		if (!op)
			return fail_nomem(rd);
		at_fmt(eat, "%s[%zu]", path(p, at, "entries"), i);
		if ((rc = read_entry(rd, e, eat, op)))
			return rc;
	}
	return read_threads(rd, root, at, t);
}

int fr_dump_from_json(const json_t *root, const char *name, struct fr_trace *t, char *err,
		      size_t errlen)
{
	struct rd rd = { name ? name : "dump", err, errlen };
	int rc;

	memset(t, 0, sizeof(*t));
	if (err && errlen)
		err[0] = '\0';
	rc = read_trace(&rd, root, "", t);
	if (rc)
		fr_trace_free(t);
	return rc;
}

/*
 * Parses JSON text into a new reference at *out. Duplicate keys are refused:
 * two values for one field would make the dump mean two things.
 */
static int load(const struct rd *rd, const char *buf, size_t len, json_t **out)
{
	json_error_t je;

	*out = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (*out)
		return 0;
	if (json_error_code(&je) == json_error_out_of_memory)
		return fail_nomem(rd);
	return fail(rd, -EPROTO, "invalid JSON at line %d, column %d: %s", je.line, je.column,
		    je.text);
}

int fr_dump_parse(const char *buf, size_t len, const char *name, struct fr_trace *t,
		  char *err, size_t errlen)
{
	struct rd rd = { name ? name : "dump", err, errlen };
	json_t *root;
	int rc;

	memset(t, 0, sizeof(*t));
	if (err && errlen)
		err[0] = '\0';
	rc = load(&rd, buf, len, &root);
	if (rc)
		return rc;
	rc = fr_dump_from_json(root, name, t, err, errlen);
	json_decref(root);
	return rc;
}

/* Reads a whole file into a new buffer (the caller frees). */
/* Reads what is left of open file `fd` into a new buffer (*out, *len);
 * `size_hint` is its size as fstat saw it. Closes nothing. */
static int read_fd(const struct rd *rd, int fd, size_t size_hint, char **out, size_t *len)
{
	size_t cap, n = 0;
	char *buf;
	int rc;

	/* The size is only a hint: pipes report 0 and files can grow. */
	cap = size_hint + 1;
	buf = malloc(cap);
	if (!buf)
		return fail_nomem(rd);
	for (;;) {
		ssize_t r;

		if (n == cap) {
			size_t ncap = cap < 65536 ? 65536 : cap * 2;
			char *nb;

			if (n > DUMP_FILE_MAX) {
				rc = fail(rd, -EFBIG, "more than the limit of %llu bytes",
					  DUMP_FILE_MAX);
				goto out_free;
			}
			nb = realloc(buf, ncap);
			if (!nb) {
				rc = fail_nomem(rd);
				goto out_free;
			}
			buf = nb;
			cap = ncap;
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = fail(rd, -errno, "cannot read: %s", strerror(errno));
			goto out_free;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > DUMP_FILE_MAX) {
		rc = fail(rd, -EFBIG, "more than the limit of %llu bytes", DUMP_FILE_MAX);
		goto out_free;
	}
	*out = buf;
	*len = n;
	return 0;

out_free:
	free(buf);
	return rc;
}

int fr_read_fd(int fd, const char *name, char **out, size_t *len, char *err, size_t errlen)
{
	struct rd rd = { name ? name : "file", err, errlen };
	struct stat st;

	*out = NULL;
	*len = 0;
	if (err && errlen)
		err[0] = '\0';
	if (fstat(fd, &st) < 0)
		return fail(&rd, -errno, "cannot stat: %s", strerror(errno));
	return read_fd(&rd, fd, S_ISREG(st.st_mode) ? (size_t)st.st_size : 0, out, len);
}

static int slurp(const struct rd *rd, const char *path_, char **out, size_t *len)
{
	struct stat st;
	int fd, rc;

	*out = NULL;
	*len = 0;
	fd = open(path_, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(rd, -errno, "cannot open: %s", strerror(errno));
	if (fstat(fd, &st) < 0) {
		rc = fail(rd, -errno, "cannot stat: %s", strerror(errno));
	} else if (S_ISDIR(st.st_mode)) {
		rc = fail(rd, -EISDIR, "is a directory");
	} else if ((uint64_t)st.st_size > DUMP_FILE_MAX) {
		rc = fail(rd, -EFBIG, "%lld bytes, more than the limit of %llu",
			  (long long)st.st_size, DUMP_FILE_MAX);
	} else {
		rc = read_fd(rd, fd, (size_t)st.st_size, out, len);
	}
	close(fd);
	return rc;
}

int fr_dump_read_file(const char *path_, struct fr_trace *t, char *err, size_t errlen)
{
	struct rd rd = { path_, err, errlen };
	char *buf;
	size_t len;
	int rc;

	memset(t, 0, sizeof(*t));
	if (err && errlen)
		err[0] = '\0';
	rc = slurp(&rd, path_, &buf, &len);
	if (rc)
		return rc;
	rc = fr_dump_parse(buf, len, path_, t, err, errlen);
	free(buf);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Atomic files                                                        */
/* ------------------------------------------------------------------ */

static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, buf, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		/* A regular file that accepts nothing is as good as full. */
		if (w == 0)
			return -ENOSPC;
		buf += w;
		len -= (size_t)w;
	}
	return 0;
}

static int fsync_dir_of(const char *path_)
{
	const char *slash = strrchr(path_, '/');
	char *dir;
	int fd, rc = 0;

	if (!slash)
		dir = strdup(".");
	else if (slash == path_)
		dir = strdup("/");
	else
		dir = strndup(path_, (size_t)(slash - path_));
	if (!dir)
		return -ENOMEM;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	if (fd < 0)
		return -errno;
	/* Some file systems cannot sync a directory; the rename stands. */
	if (fsync(fd) < 0 && errno != EINVAL && errno != EROFS)
		rc = -errno;
	close(fd);
	return rc;
}

int fr_write_file_atomic(const char *path_, const void *buf, size_t len)
{
	char *tmp;
	int fd, rc;

	if (asprintf(&tmp, "%s.tmp.%ld", path_, (long)getpid()) < 0)
		return -ENOMEM;
	fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0 && errno == EEXIST) {
		/*
		 * Left by an earlier process with our pid that died mid-write
		 * (pids repeat across container restarts); it is garbage.
		 */
		unlink(tmp);
		fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
	}
	if (fd < 0) {
		rc = -errno;
		goto out_free;
	}
	rc = write_all(fd, buf, len);
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	/* close() can report a failed delayed write (NFS). */
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path_) < 0)
		rc = -errno;
	if (rc) {
		unlink(tmp);
		goto out_free;
	}
	/*
	 * The file is in place now; a failure to make the rename durable is
	 * reported, but undoing it would lose the data rather than save it.
	 */
	rc = fsync_dir_of(path_);

out_free:
	free(tmp);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Manifests                                                           */
/* ------------------------------------------------------------------ */

json_t *fr_manifest_to_json(const char *job, const char *incident, const char *reason,
			    uint32_t world_size, uint64_t opened_ns, uint64_t closed_ns,
			    const struct fr_trace *const *ranks, size_t nranks, json_t *verdict)
{
	json_t *root = json_object();
	json_t *arr = json_array();
	int bad = 0;

	if (!root || !arr)
		goto out_free;
	for (size_t i = 0; i < nranks && !bad; i++)
		if (ranks[i])
			bad |= append(arr, trace_json(ranks[i], false));
	bad |= set(root, "format", json_string(FR_MANIFEST_FORMAT));
	bad |= set(root, "version", json_string(FR_DUMP_VERSION));
	bad |= set(root, "job", jstrn(job, FR_JOB_MAX));
	bad |= set(root, "incident", jstrn(incident, FR_INCIDENT_MAX));
	bad |= set(root, "reason", jstrn(reason, FR_REASON_MAX));
	bad |= set(root, "world_size", json_integer(world_size));
	bad |= set(root, "opened_ns", ju64(opened_ns));
	bad |= set(root, "closed_ns", ju64(closed_ns));
	bad |= set(root, "ranks", arr);
	arr = NULL;
	bad |= set(root, "verdict", verdict ? json_incref(verdict) : json_null());
	if (bad)
		goto out_free;
	return root;

out_free:
	json_decref(arr);
	json_decref(root);
	return NULL;
}

void fr_manifest_free(struct fr_manifest *m)
{
	for (size_t i = 0; i < m->nranks; i++)
		fr_trace_free(&m->ranks[i]);
	free(m->ranks);
	memset(m, 0, sizeof(*m));
}

static int read_manifest(const struct rd *rd, const json_t *root, struct fr_manifest *m)
{
	char at[AT_MAX];
	const json_t *ranks, *r;
	size_t i;
	int rc;

	if ((rc = check_header(rd, root, "", FR_MANIFEST_FORMAT, "manifest")) ||
	    (rc = GET_STR(rd, root, "", "job", true, m->job)) ||
	    (rc = GET_STR(rd, root, "", "incident", true, m->incident)) ||
	    (rc = GET_STR(rd, root, "", "reason", true, m->reason)) ||
	    (rc = get_u32(rd, root, "", "world_size", true, &m->world_size)) ||
	    (rc = get_u64(rd, root, "", "opened_ns", true, INT64_MAX, &m->opened_ns)) ||
	    (rc = get_u64(rd, root, "", "closed_ns", true, INT64_MAX, &m->closed_ns)) ||
	    (rc = get_container(rd, root, "", "ranks", true, JSON_ARRAY, &ranks)) ||
	    (rc = check_world(rd, "", m->world_size)))
		return rc;
	if (json_array_size(ranks) == 0)
		return 0;
	m->ranks = calloc(json_array_size(ranks), sizeof(*m->ranks));
	if (!m->ranks)
		return fail_nomem(rd);
	json_array_foreach(ranks, i, r) {
		m->nranks = i + 1;
		at_fmt(at, "ranks[%zu]", i);
		if ((rc = read_trace(rd, r, at, &m->ranks[i])))
			return rc;
	}
	return 0;
}

int fr_manifest_read_file(const char *path_, struct fr_manifest *m, char *err, size_t errlen)
{
	struct rd rd = { path_, err, errlen };
	json_t *root;
	char *buf;
	size_t len;
	int rc;

	memset(m, 0, sizeof(*m));
	if (err && errlen)
		err[0] = '\0';
	rc = slurp(&rd, path_, &buf, &len);
	if (rc)
		return rc;
	rc = load(&rd, buf, len, &root);
	free(buf);
	if (rc)
		return rc;
	rc = read_manifest(&rd, root, m);
	json_decref(root);
	if (rc)
		fr_manifest_free(m);
	return rc;
}

int fr_mkdir_p(const char *path)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}
