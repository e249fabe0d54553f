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

/* A string from an array field (a pointer does not compile), or one from a
 * NUL-terminated string (an operation's strings). */
#define JSTR(field)                                                            \
	jstrn((field), sizeof(field) + 0 * sizeof(char[1 - 2 * __builtin_types_compatible_p( \
						      __typeof__(field), __typeof__(&(field)[0]))]))
#define JSTRZ(s) jstrn((s), SIZE_MAX)

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

/* Elements of an operation's output, as PyTorch's "output_sizes" says:
 * its count but where its size ratio says otherwise. */
static uint64_t output_count(const struct fr_op *op)
{
	if (!op->size_ratio || op->size_ratio == FR_SIZE_RATIO_UNEVEN)
		return op->count;
	if (op->type == FR_OP_ALL_GATHER)
		return op->count > UINT64_MAX / op->size_ratio ? op->count :
								 op->count * op->size_ratio;
	return op->type == FR_OP_REDUCE_SCATTER ? op->count / op->size_ratio : op->count;
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
	bad |= append(pg, JSTRZ(op->comm));
	bad |= append(pg, comm ? JSTR(comm->desc) : json_string(""));

	bad |= set(e, "record_id", ju64(op->record_id));
	bad |= set(e, "pg_id", JSTRZ(op->comm));
	bad |= set(e, "process_group", pg);
	pg = NULL;
	bad |= set(e, "collective_seq_id", ju64(op->is_p2p ? 0 : op->seq));
	bad |= set(e, "p2p_seq_id", ju64(op->is_p2p ? op->seq : 0));
	bad |= set(e, "op_id", ju64(op->record_id));
	bad |= set(e, "profiling_name", json_string(profiling));
	bad |= set(e, "time_created_ns", ju64(op->t_entered_ns));
	bad |= set(e, "input_sizes", sizes_json(op->count));
	bad |= set(e, "input_dtypes", single_json(JSTRZ(op->dtype)));
	bad |= set(e, "output_sizes", sizes_json(output_count(op)));
	bad |= set(e, "output_dtypes", single_json(JSTRZ(op->dtype)));
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
	if (op->size_ratio)
		bad |= set(e, "size_ratio", json_integer(op->size_ratio));
	bad |= set(e, "peer", json_integer(op->peer));
	bad |= set(e, "root", json_integer(op->root));
	bad |= set(e, "peer_in_comm", json_integer(op->peer_in_comm));
	bad |= set(e, "count", ju64(op->count));
	bad |= set(e, "bytes", ju64(op->bytes));
	bad |= set(e, "dtype", JSTRZ(op->dtype));
	bad |= set(e, "redop", JSTRZ(op->redop));
	if (bad)
		goto out_free;
	return e;

out_free:
	json_decref(pg);
	json_decref(e);
	return NULL;
}

/*
 * A communicator's members. A view that knows only its size writes none;
 * one that knows some (an NCCL rank knows its own) writes -1 for the rest.
 */
static json_t *members_json(const struct fr_comm *c)
{
	json_t *ranks = json_array();
	int bad = 0;

	if (!ranks)
		return NULL;
	for (uint32_t i = 0; c->members && i < c->size && !bad; i++)
		bad |= append(ranks, json_integer(c->members[i] == FR_RANK_UNKNOWN ?
							  -1 :
							  (json_int_t)c->members[i]));
	if (bad) {
		json_decref(ranks);
		return NULL;
	}
	return ranks;
}

static json_t *pg_config_json(const struct fr_comm *c)
{
	json_t *o = json_object();
	json_t *ranks = members_json(c);
	int bad = 0;

	if (!o || !ranks)
		goto out_free;
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

/*
 * A manifest's communicator table while it is written: "communicators"
 * itself, and for each of its ids (in `index`, valued by position) the
 * first view's communicator, which the other views are compared with.
 */
struct table_out {
	json_t *json;
	json_t *index;
	const struct fr_comm **first;
	size_t n;
	size_t cap;
	uint32_t world_size;        /* the manifest's; members must be below it */
};

/* Whether two views of one communicator id say the same of it. */
static bool same_comm(const struct fr_comm *a, const struct fr_comm *b)
{
	if (a->size != b->size || !a->members != !b->members ||
	    strncmp(a->desc, b->desc, sizeof(a->desc)) != 0)
		return false;
	return a->members == b->members ||
	       memcmp(a->members, b->members, a->size * sizeof(*a->members)) == 0;
}

/* Enters `c` into the table under `key`, as the communicator of that id. */
static int table_add(struct table_out *tab, const char *key, const struct fr_comm *c)
{
	json_t *o;
	int bad = 0;

	if (tab->n == tab->cap) {
		size_t ncap = tab->cap ? tab->cap * 2 : 16;
		const struct fr_comm **nf = realloc(tab->first, ncap * sizeof(*nf));

		if (!nf)
			return -ENOMEM;
		tab->first = nf;
		tab->cap = ncap;
	}
	o = json_object();
	if (!o)
		return -ENOMEM;
	bad |= set(o, "desc", JSTR(c->desc));
	bad |= set(o, "size", json_integer(c->size));
	bad |= set(o, "ranks", members_json(c));
	if (bad) {
		json_decref(o);
		return -ENOMEM;
	}
	if (set(tab->json, key, o) || set(tab->index, key, json_integer((json_int_t)tab->n)))
		return -ENOMEM;
	tab->first[tab->n++] = c;
	return 0;
}

/*
 * A view's pg_config entry in a manifest: its name and its rank in it when
 * the table says the rest, else the entry a dump would hold.
 */
static json_t *view_comm_json(struct table_out *tab, const char *key, const struct fr_comm *c)
{
	json_t *pos = json_object_get(tab->index, key);
	json_t *o;
	int bad = 0;

	if (!pos) {
		/* The table's members are checked against the manifest's world,
		 * a view's own against its world: one from a larger world keeps
		 * its own. */
		for (uint32_t i = 0; c->members && i < c->size; i++)
			if (c->members[i] != FR_RANK_UNKNOWN && c->members[i] >= tab->world_size)
				return pg_config_json(c);
		if (table_add(tab, key, c))
			return NULL;
	} else if (!same_comm(c, tab->first[json_integer_value(pos)])) {
		return pg_config_json(c);
	}
	o = json_object();
	if (!o)
		return NULL;
	bad |= set(o, "name", JSTR(c->id));
	bad |= set(o, "rank", json_integer(c->rank));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
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

/*
 * The dump document of `t`; a manifest reuses it without threads, with its
 * communicators entered in the manifest's table `tab` (NULL for a dump).
 */
static json_t *trace_json(const struct fr_trace *t, bool with_threads, struct table_out *tab)
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
		bad |= set(pg_config, json_string_value(id),
			   tab ? view_comm_json(tab, json_string_value(id), &t->comms[i]) :
				 pg_config_json(&t->comms[i]));
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
	return trace_json(t, true, NULL);
}

int fr_json_text(json_t *doc, size_t flags, char **out, size_t *len)
{
	char *s = doc ? json_dumps(doc, flags) : NULL;
	char *nl;
	size_t n;

	json_decref(doc);
	*out = NULL;
	*len = 0;
	if (!s)
		return -ENOMEM;
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

int fr_dump_serialize(const struct fr_trace *t, char **out, size_t *len)
{
	return fr_json_text(fr_dump_to_json(t), JSON_COMPACT, out, len);
}

/* ------------------------------------------------------------------ */
/* Reading                                                             */
/* ------------------------------------------------------------------ */

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

/* Where errors go: the file's name and the caller's buffer; and, while
 * entries are read, their names' cache (NULL: none). */
struct rd {
	const char *name;
	char *err;
	size_t errlen;
	struct name_cache *names;
	const struct fr_dump_visit *visit;  /* NULL: none */
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
 * to fit is cut short; it only ever ends up in a message, so it is only
 * ever formatted on the way to one.
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

/*
 * Field getters: `v` is the value of field `key` of the object at `at`
 * (NULL when absent). A missing or null optional field leaves the default;
 * a present field of the wrong type is always an error, so that a typo in a
 * hand-written or converted dump is reported rather than silently ignored.
 * They are inline, called a dozen times for each of two million entries;
 * their messages are made out of line.
 */
static inline bool present(const struct fr_val *v)
{
	return v && v->type != FR_VAL_NULL;
}

__attribute__((noinline, cold)) static int fail_missing(const struct rd *rd, const char *at,
							  const char *key, const char *what)
{
	char p[AT_MAX];

	return fail(rd, -EPROTO, "%s: missing (expected %s)", path(p, at, key), what);
}

__attribute__((noinline, cold)) static int fail_type(const struct rd *rd, const struct fr_val *v,
						       const char *at, const char *key,
						       const char *what)
{
	char p[AT_MAX];

	return fail(rd, -EPROTO, "%s: expected %s, got %s", path(p, at, key), what,
		    fr_val_type_name(v));
}

__attribute__((noinline, cold)) static int fail_range(const struct rd *rd, const char *at,
							const char *key, int64_t i, int64_t lo,
							uint64_t hi)
{
	char p[AT_MAX];

	return fail(rd, -EPROTO, "%s: %" PRId64 " is out of range (%" PRId64 "..%" PRIu64 ")",
		    path(p, at, key), i, lo, hi);
}

__attribute__((noinline, cold)) static int fail_long(const struct rd *rd, const struct fr_val *v,
						       const char *at, const char *key, size_t max)
{
	char p[AT_MAX];

	return fail(rd, -EPROTO, "%s: %" PRIu32 " bytes long, longer than the limit of %zu",
		    path(p, at, key), v->n, max);
}

static inline int want(const struct rd *rd, const struct fr_val *v, const char *at,
		       const char *key, bool required, const char *what)
{
	return required && !present(v) ? fail_missing(rd, at, key, what) : 0;
}

static inline int get_u64(const struct rd *rd, const struct fr_val *v, const char *at,
			  const char *key, bool required, uint64_t max, uint64_t *out)
{
	if (!present(v))
		return want(rd, v, at, key, required, "an integer");
	if (v->type != FR_VAL_INT)
		return fail_type(rd, v, at, key, "an integer");
	if (v->u.i < 0 || (uint64_t)v->u.i > max)
		return fail_range(rd, at, key, v->u.i, 0, max);
	*out = (uint64_t)v->u.i;
	return 0;
}

static int get_u32(const struct rd *rd, const struct fr_val *v, const char *at, const char *key,
		   bool required, uint32_t *out)
{
	uint64_t x = *out;
	int rc = get_u64(rd, v, at, key, required, UINT32_MAX, &x);

	if (!rc)
		*out = (uint32_t)x;
	return rc;
}

/*
 * A rank or -1 for none: a global one (peer, root) or one in a communicator
 * (peer_in_comm). Absent or null means none.
 */
static inline int get_rank_or_none(const struct rd *rd, const struct fr_val *v, const char *at,
				   const char *key, int32_t *out)
{
	*out = -1;
	if (!present(v))
		return 0;
	if (v->type != FR_VAL_INT)
		return fail_type(rd, v, at, key, "an integer");
	if (v->u.i < -1 || v->u.i > INT32_MAX)
		return fail_range(rd, at, key, v->u.i, -1, INT32_MAX);
	*out = (int32_t)v->u.i;
	return 0;
}

static inline int get_bool(const struct rd *rd, const struct fr_val *v, const char *at,
			   const char *key, bool required, bool *out)
{
	if (!present(v))
		return want(rd, v, at, key, required, "true or false");
	if (v->type != FR_VAL_BOOL)
		return fail_type(rd, v, at, key, "true or false");
	*out = v->u.b;
	return 0;
}

/* Whether v is a string shorter than `cap` bytes (its terminator
 * included), to be used in place: a value's string ends with its only NUL. */
static inline int str_check(const struct rd *rd, const struct fr_val *v, const char *at,
			    const char *key, size_t cap)
{
	if (!fr_val_is(v, FR_VAL_STRING))
		return fail_type(rd, v, at, key, "a string");
	if (v->n >= cap)
		return fail_long(rd, v, at, key, cap - 1);
	return 0;
}

/* A string value into a fixed buffer of `cap` bytes (terminator included);
 * `at` and `key` name it in messages. */
static int str_into(const struct rd *rd, const struct fr_val *v, const char *at,
		    const char *key, char *dst, size_t cap)
{
	int rc = str_check(rd, v, at, key, cap);

	if (!rc)
		memcpy(dst, v->u.s, v->n + 1);
	return rc;
}

static int get_str(const struct rd *rd, const struct fr_val *v, const char *at, const char *key,
		   bool required, char *dst, size_t cap)
{
	if (!present(v))
		return want(rd, v, at, key, required, "a string");
	return str_into(rd, v, at, key, dst, cap);
}

/* String v, of at most `max` bytes, as trace t's copy (fr_trace_strn) into
 * *dst. */
static inline int str_keep(const struct rd *rd, const struct fr_val *v, const char *at,
			   const char *key, size_t max, struct fr_trace *t, const char **dst)
{
	int rc = str_check(rd, v, at, key, max + 1);

	if (rc)
		return rc;
	if (!(*dst = fr_trace_strn(t, v->u.s, v->n)))
		return fail_nomem(rd);
	return 0;
}

static inline int get_str_keep(const struct rd *rd, const struct fr_val *v, const char *at,
			       const char *key, bool required, size_t max, struct fr_trace *t,
			       const char **dst)
{
	if (!present(v))
		return want(rd, v, at, key, required, "a string");
	return str_keep(rd, v, at, key, max, t, dst);
}

/* Field `key` of object `obj` as a string into array `field`. */
#define GET_STR(rd, obj, at, key, req, field) \
	get_str((rd), fr_val_get((obj), (key)), (at), (key), (req), (field), sizeof(field))

static int get_container(const struct rd *rd, const struct fr_val *obj, const char *at,
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
		return fail(rd, -EPROTO, "%s: expected %s, got %s", path(p, at, key), what,
			    fr_val_type_name(v));
	*out = v;
	return 0;
}

/* A kind of document: what its header must say, and which majors we read. */
struct doc_kind {
	const char *format;         /* "flightrec-dump" */
	const char *kind;           /* "dump", for messages */
	const char *version;        /* the version written now, for messages */
	unsigned long oldest;       /* majors read, oldest to newest */
	unsigned long newest;
};

static const struct doc_kind dump_kind = {
	FR_DUMP_FORMAT, "dump", FR_DUMP_VERSION, FR_DUMP_VERSION_MAJOR, FR_DUMP_VERSION_MAJOR,
};

static const struct doc_kind manifest_kind = {
	FR_MANIFEST_FORMAT, "manifest", FR_MANIFEST_VERSION, 1, FR_MANIFEST_VERSION_MAJOR,
};

/*
 * Checks "format" and "version" of a document of kind `k` and stores its
 * major version at *major.
 */
static int check_header(const struct rd *rd, const struct fr_val *root, const char *at,
			const struct doc_kind *k, unsigned long *major)
{
	char p[AT_MAX];
	char reads[48];
	const struct fr_val *f, *v;
	const char *s;
	char *end;

	if (!fr_val_is(root, FR_VAL_OBJECT))
		return fail(rd, -EPROTO, "%s%snot a flightrec %s (%s, not an object)", at,
			    *at ? ": " : "", k->kind, fr_val_type_name(root));
	f = fr_val_get(root, "format");
	if (!fr_val_is(f, FR_VAL_STRING))
		return fail(rd, -EPROTO, "%s%snot a flightrec %s (no \"format\": \"%s\")", at,
			    *at ? ": " : "", k->kind, k->format);
	if (strcmp(f->u.s, k->format) != 0)
		return fail(rd, -EPROTO, "%s%snot a flightrec %s (format is \"%.64s\", not \"%s\")",
			    at, *at ? ": " : "", k->kind, f->u.s, k->format);

	v = fr_val_get(root, "version");
	if (!v)
		return fail(rd, -EPROTO, "%s: missing (expected a string such as \"%s\")",
			    path(p, at, "version"), k->version);
	if (!fr_val_is(v, FR_VAL_STRING))
		return fail(rd, -EPROTO, "%s: expected a string such as \"%s\", got %s",
			    path(p, at, "version"), k->version, fr_val_type_name(v));
	s = v->u.s;
	errno = 0;
	*major = strtoul(s, &end, 10);
	if (end == s || *end != '.' || end[1] < '0' || end[1] > '9' || errno || s[0] < '0' ||
	    s[0] > '9')
		return fail(rd, -EPROTO, "%s: \"%.32s\" is not of the form MAJOR.MINOR",
			    path(p, at, "version"), s);
	if (*major < k->oldest || *major > k->newest) {
		if (k->oldest == k->newest)
			snprintf(reads, sizeof(reads), "%lu.x", k->newest);
		else
			snprintf(reads, sizeof(reads), "%lu.x to %lu.x", k->oldest, k->newest);
		return fail(rd, -EPROTONOSUPPORT,
			    "%s%s%s format version %.32s is not supported (this build reads %s)",
			    at, *at ? ": " : "", k->kind, s, reads);
	}
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
	{ "alltoall", FR_OP_ALL_TO_ALLV },
	{ "alltoall_base", FR_OP_ALL_TO_ALLV },
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

	if (!s || (!(arrow = strstr(s, "->")) && !(arrow = strstr(s, "<-"))))
		return -1;
	errno = 0;
	peer = strtol(arrow + 2, &end, 10);
	if (end == arrow + 2 || *end || errno || peer < 0 || peer > INT32_MAX)
		return -1;
	return (int32_t)peer;
}

/*
 * The fields of an entry the reader knows, in the order our writer writes
 * them (dumps/FORMAT.md), which is the order the JSON reader guesses them
 * in, then three of PyTorch's that only a visitor reads (fr_dump_entry); the
 * last column marks the fields the reader has no use for.
 */
#define ENTRY_FIELDS(X)                                                     \
	X(RECORD_ID, "record_id", 0) X(PG_ID, "pg_id", 0)                    \
	X(PROCESS_GROUP, "process_group", 0)                                 \
	X(COLL_SEQ, "collective_seq_id", 0) X(P2P_SEQ, "p2p_seq_id", 0)      \
	X(OP_ID, "op_id", 1) X(PROFILING_NAME, "profiling_name", 0)          \
	X(CREATED, "time_created_ns", 0) X(INPUT_SIZES, "input_sizes", 0)    \
	X(INPUT_DTYPES, "input_dtypes", 0) X(OUTPUT_SIZES, "output_sizes", 0) \
	X(OUTPUT_DTYPES, "output_dtypes", 1) X(STATE, "state", 0)            \
	X(STARTED, "time_discovered_started_ns", 0)                          \
	X(COMPLETED, "time_discovered_completed_ns", 0)                      \
	X(RETIRED, "retired", 1) X(IS_P2P, "is_p2p", 0) X(OP, "op", 0)       \
	X(NONBLOCKING, "nonblocking", 0) X(WAITED, "waited", 0)              \
	X(CAPTURED, "captured", 0) X(SIZE_RATIO, "size_ratio", 0)           \
	X(PEER, "peer", 0) X(ROOT, "root", 0)                                \
	X(PEER_IN_COMM, "peer_in_comm", 0) X(COUNT, "count", 0)              \
	X(BYTES, "bytes", 0) X(DTYPE, "dtype", 0) X(REDOP, "redop", 0)      \
	X(TIMEOUT, "timeout_ms", 1) X(FRAMES, "frames", 1)                 \
	X(THREAD_NAME, "thread_name", 1)

enum entry_field {
#define EF_ENUM(e, k, drop) EF_##e,
	ENTRY_FIELDS(EF_ENUM)
#undef EF_ENUM
	EF__COUNT
};

static const struct fr_json_key entry_keys[EF__COUNT] = {
#define EF_KEY(e, k, drop) { k, sizeof(k) - 1, drop },
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
		return fail(rd, -EPROTO, "%s: expected an array, got %s",
			    path(p, at, key), fr_val_type_name(sizes));
	if (sizes->n == 0)
		return 0;
	shape = sizes->u.items[0];
	if (shape->type != FR_VAL_ARRAY)
		return fail(rd, -EPROTO, "%s[0]: expected an array, got %s",
			    path(p, at, key), fr_val_type_name(shape));
	for (uint32_t i = 0; i < shape->n; i++) {
		const struct fr_val *dim = shape->u.items[i];
		uint64_t d;

		if (dim->type != FR_VAL_INT || dim->u.i < 0)
			return fail(rd, -EPROTO, "%s[0][%" PRIu32 "]: expected a non-negative integer",
				    path(p, at, key), i);
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

static int read_entry(const struct rd *rd, entry_fields f, const char *at, struct fr_trace *t,
		      struct fr_op *op)
{
	char p[AT_MAX];
	char buf[64];
	struct name_cache *names = rd->names;
	struct name_slots *slots;
	const struct name_slot *slot;
	const struct fr_val *v, *pg;
	uint64_t coll_seq = 0, p2p_seq = 0;
	bool running;
	int state;
	int rc;

	rc = get_u64(rd, FIELD(f, RECORD_ID), true, INT64_MAX, &op->record_id);
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
			return fail_nomem(rd);
	} else if ((rc = str_keep(rd, v, at, "pg_id", FR_COMM_ID_MAX, t, &op->comm))) {
		return rc;
	}

	if ((rc = get_u64(rd, FIELD(f, COLL_SEQ), true, INT64_MAX, &coll_seq)) ||
	    (rc = get_u64(rd, FIELD(f, P2P_SEQ), true, INT64_MAX, &p2p_seq)))
		return rc;

	/* Names are looked up where they are, strings of the document. */
	if (present(v = f[EF_OP])) {
		slots = names ? &names->op : NULL;
		if ((rc = str_check(rd, FIELD(f, OP), sizeof(slot->name))))
			return rc;
		if ((slot = slot_find(slots, v->u.s, v->n))) {
			op->type = (enum fr_op_type)slot->value;
		} else {
			op->type = fr_op_from_name(v->u.s);
			slot_keep(slots, v->u.s, v->n, op->type);
		}
	} else {
		v = f[EF_PROFILING_NAME];
		slots = names ? &names->profiling : NULL;
		if ((rc = want(rd, FIELD(f, PROFILING_NAME), true, "a string")))
			return rc;
		if ((rc = str_check(rd, FIELD(f, PROFILING_NAME), sizeof(slot->name))))
			return rc;
		if ((slot = slot_find(slots, v->u.s, v->n))) {
			op->type = (enum fr_op_type)slot->value;
		} else {
			op->type = type_from_profiling_name(v->u.s);
			slot_keep(slots, v->u.s, v->n, op->type);
		}
	}

	v = f[EF_STATE];
	if ((rc = want(rd, FIELD(f, STATE), true, "a string")) ||
	    (rc = str_check(rd, FIELD(f, STATE), sizeof(slot->name))))
		return rc;
	for (state = 0; state < (int)(sizeof(states) / sizeof(states[0])); state++)
		if (states[state].len == v->n && fr_same_bytes(v->u.s, states[state].name, v->n))
			break;
	if (state == (int)(sizeof(states) / sizeof(states[0])))
		return fail(rd, -EPROTO,
			    "%s: unknown state \"%s\" (expected entered, completed, scheduled or started)",
			    path(p, at, "state"), v->u.s);
	op->state = states[state].state;
	running = states[state].running;
	op->gpu = states[state].gpu;
	op->started = states[state].started;

	op->is_p2p = !fr_op_is_collective(op->type) && op->type != FR_OP_UNKNOWN;
	if ((rc = get_bool(rd, FIELD(f, IS_P2P), false, &op->is_p2p)))
		return rc;
	op->seq = op->is_p2p ? p2p_seq : coll_seq;

	if ((rc = get_u64(rd, FIELD(f, CREATED), true, INT64_MAX, &op->t_entered_ns)) ||
	    (rc = get_u64(rd, FIELD(f, STARTED), false, INT64_MAX, &op->t_started_ns)) ||
	    (rc = get_u64(rd, FIELD(f, COMPLETED), false, INT64_MAX, &op->t_completed_ns)) ||
	    (rc = get_bool(rd, FIELD(f, NONBLOCKING), false, &op->nonblocking)) ||
	    (rc = get_bool(rd, FIELD(f, WAITED), false, &op->waited)) ||
	    (rc = get_bool(rd, FIELD(f, CAPTURED), false, &op->captured)) ||
	    (rc = get_rank_or_none(rd, FIELD(f, PEER), &op->peer)) ||
	    (rc = get_rank_or_none(rd, FIELD(f, ROOT), &op->root)) ||
	    (rc = get_rank_or_none(rd, FIELD(f, PEER_IN_COMM), &op->peer_in_comm)))
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
	if (!present(f[EF_NONBLOCKING]) && running && !op->t_started_ns)
		op->t_started_ns = op->t_entered_ns;

	/* PyTorch names a point-to-point peer only in "nccl:send 0->1" or
	 * "nccl:recv 1<-0": ranks in the group, this one's first. */
	if (op->is_p2p && op->peer_in_comm < 0 && !f[EF_PEER_IN_COMM])
		op->peer_in_comm = peer_from_profiling_name(f[EF_PROFILING_NAME]);

	if (f[EF_COUNT]) {
		rc = get_u64(rd, FIELD(f, COUNT), false, INT64_MAX, &op->count);
	} else if (!(rc = count_from_sizes(rd, f[EF_INPUT_SIZES], at, "input_sizes",
					  &op->count)) &&
		   (op->type == FR_OP_ALL_GATHER || op->type == FR_OP_REDUCE_SCATTER)) {
		/* PyTorch records the output too: how it relates to the input. */
		uint64_t out = 0;

		rc = count_from_sizes(rd, f[EF_OUTPUT_SIZES], at, "output_sizes", &out);
		op->size_ratio = op->type == FR_OP_ALL_GATHER ? size_ratio(out, op->count) :
								 size_ratio(op->count, out);
	}
	if (rc || (rc = get_u64(rd, FIELD(f, BYTES), false, INT64_MAX, &op->bytes)))
		return rc;
	if (f[EF_SIZE_RATIO] && (rc = get_u32(rd, FIELD(f, SIZE_RATIO), false, &op->size_ratio)))
		return rc;

	if (f[EF_DTYPE]) {
		rc = get_str_keep(rd, FIELD(f, DTYPE), false, FR_DTYPE_MAX, t, &op->dtype);
	} else if (present(v = f[EF_INPUT_DTYPES])) {
		if (v->type != FR_VAL_ARRAY)
			return fail(rd, -EPROTO, "%s: expected an array, got %s",
				    path(p, at, "input_dtypes"), fr_val_type_name(v));
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
	char p[AT_MAX], eat[AT_MAX];
	int rc = read_entry(&quiet, f, "", t, op);

	if (rc == 0 || rc == -ENOMEM)
		return rc ? fail_nomem(rd) : 0;
	fr_op_init(op);
	at_fmt(eat, "%s[%zu]", path(p, at, "entries"), i);
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
		return fail(rd, -EPROTO, "%s[%zu]: expected an object, got %s",
			    path(p, at, "entries"), i, fr_val_type_name(e));
	/* The last of two members of one name wins, as in a Python dict;
	 * the JSON parser refuses them. */
	fr_val_fields(map, e, entry_keys, EF__COUNT, f);
	if (!(op = fr_trace_add_op(t, cap)))
		return fail_nomem(rd);
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
		return fail_nomem(rd);
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
		er->rc = fail(&keep, -EPROTO, "%s: expected %s, got %s", at, what,
			      fr_val_type_name(v));
	return rc;
}

/*
 * Entries exactly as our writer writes them (entry_json(), compact): every
 * key in its order, "captured" only when true and "size_ratio" only when
 * known, strings of printable ASCII
 * without escapes, integers without sign (but -1 for a rank), fraction or
 * exponent. written_entry() reads such an entry straight from the text
 * into an operation, checking each value as read_entry() does, with no
 * value built and no key looked up. At anything else (another writer's
 * entry, white space, an escape, an older format's keys, a value
 * read_entry() would refuse) it gives up, and the entry is read again from
 * its start by fr_json_object() and read_entry(), which accept or refuse
 * it with their usual message: the shortcut only ever accepts what they
 * accept, as the same operation. It reads our dumps two to two and a half
 * times as fast as they do.
 */

/* p past the literal `s`, or NULL when the text there is another. Its
 * length is a constant: the comparison is a few loads. */
#define W_LIT(p, end, s)                                                        \
	((end) - (p) >= (ptrdiff_t)sizeof(s) - 1 && fr_same_bytes((p), (s), sizeof(s) - 1) ? \
		 (p) + sizeof(s) - 1 :                                           \
		 NULL)

/* A string from p (just past its opening quote) to its closing quote,
 * into *s and *n; where it ends, past the quote. */
static inline const char *w_str(const char *p, const char *end, const char **s, size_t *n)
{
	const char *q = fr_json_plain_end(p, end);

	if (q >= end || *q != '"')
		return NULL;
	*s = p;
	*n = (size_t)(q - p);
	return q + 1;
}

/*
 * An integer from 0 to INT64_MAX as number() reads it (no leading zero),
 * eight digits at a time. What follows it is checked by the literal after
 * it: a fraction or an exponent makes that fail.
 */
static inline __attribute__((always_inline)) const char *w_u64(const char *p, const char *end,
								    uint64_t *out)
{
	static const uint64_t pow10[9] = {
		1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000,
	};
	uint64_t x, u, low;
	unsigned n;

	if (end - p < 24)
		return NULL;
	n = fr_digits_in(p, &x);
	if (n == 0 || (n > 1 && *p == '0'))
		return NULL;
	if (n < 8) {
		*out = fr_digits_value(x, n);
		return p + n;
	}
	u = fr_digits_value(x, 8);
	p += 8;
	if ((n = fr_digits_in(p, &x)) == 0) {
		*out = u;
		return p;
	}
	u = u * pow10[n] + fr_digits_value(x, n);
	p += n;
	if (n < 8) {
		*out = u;
		return p;
	}
	/* Sixteen digits so far: three more at most, within INT64_MAX. */
	if ((n = fr_digits_in(p, &x)) == 0) {
		*out = u;
		return p;
	}
	low = fr_digits_value(x, n);
	if (n > 3 || u > ((uint64_t)INT64_MAX - low) / pow10[n])
		return NULL;
	*out = u * pow10[n] + low;
	return p + n;
}

/* A rank or -1 for none, as get_rank_or_none() takes it. */
static inline const char *w_rank(const char *p, const char *end, int32_t *out)
{
	uint64_t u;

	if (end - p >= 3 && p[0] == '-' && p[1] == '1' && !fr_is_digit(p[2])) {
		*out = -1;
		return p + 2;
	}
	if (!(p = w_u64(p, end, &u)) || u > INT32_MAX)
		return NULL;
	*out = (int32_t)u;
	return p;
}

static inline const char *w_bool(const char *p, const char *end, bool *out)
{
	const char *q;

	if ((q = W_LIT(p, end, "true")))
		*out = true;
	else if ((q = W_LIT(p, end, "false")))
		*out = false;
	return q;
}

/* A time, or null for none (0, as get_u64() leaves an optional field). */
static inline const char *w_time(const char *p, const char *end, uint64_t *out)
{
	const char *q = W_LIT(p, end, "null");

	if (!q)
		return w_u64(p, end, out);
	*out = 0;
	return q;
}

/* An operation's type from its name, as read_entry() finds it. */
static bool w_type(struct name_cache *names, const char *s, size_t n, struct fr_op *op)
{
	const struct name_slot *slot = slot_find(&names->op, s, n);
	char name[sizeof(slot->name)];

	if (slot) {
		op->type = (enum fr_op_type)slot->value;
		return true;
	}
	if (n >= sizeof(name))
		return false;
	memcpy(name, s, n);
	name[n] = '\0';
	op->type = fr_op_from_name(name);
	slot_keep(&names->op, s, n, op->type);
	return true;
}

/*
 * The entry at p, of our writer's shape, into op (as fr_op_init() made it)
 * of trace t; where it ends, or NULL (op then half-filled) when it is not
 * of that shape or read_entry() would refuse it.
 */
static const char *written_entry(struct name_cache *names, struct fr_trace *t, const char *p,
				 const char *end, struct fr_op *op)
{
	const char *s, *comm, *state, *dtype, *redop;
	size_t n, ncomm, nstate, ndtype, nredop;
	uint64_t coll_seq, p2p_seq, unused;
	bool retired;
	size_t k;

/* Each step moves p on, or gives up. */
#define W(step)                    \
	do {                       \
		if (!(p = (step))) \
			return NULL; \
	} while (0)
#define LIT(s) W(W_LIT(p, end, s))
	LIT("{\"record_id\":");
	W(w_u64(p, end, &op->record_id));
	LIT(",\"pg_id\":\"");
	W(w_str(p, end, &s, &n));
	LIT(",\"process_group\":[\"");
	W(w_str(p, end, &comm, &ncomm));
	LIT(",\"");
	W(w_str(p, end, &s, &n));
	LIT("],\"collective_seq_id\":");
	W(w_u64(p, end, &coll_seq));
	LIT(",\"p2p_seq_id\":");
	W(w_u64(p, end, &p2p_seq));
	LIT(",\"op_id\":");
	W(w_u64(p, end, &unused));
	LIT(",\"profiling_name\":\"");
	W(w_str(p, end, &s, &n));
	LIT(",\"time_created_ns\":");
	W(w_u64(p, end, &op->t_entered_ns));
	/* Sizes and dtypes again, for PyTorch's tools: ours are below. */
	LIT(",\"input_sizes\":[[");
	W(w_u64(p, end, &unused));
	LIT("]],\"input_dtypes\":[\"");
	W(w_str(p, end, &s, &n));
	LIT("],\"output_sizes\":[[");
	W(w_u64(p, end, &unused));
	LIT("]],\"output_dtypes\":[\"");
	W(w_str(p, end, &s, &n));
	LIT("],\"state\":\"");
	W(w_str(p, end, &state, &nstate));
	LIT(",\"time_discovered_started_ns\":");
	W(w_time(p, end, &op->t_started_ns));
	LIT(",\"time_discovered_completed_ns\":");
	W(w_time(p, end, &op->t_completed_ns));
	LIT(",\"retired\":");
	W(w_bool(p, end, &retired));
	LIT(",\"is_p2p\":");
	W(w_bool(p, end, &op->is_p2p));
	LIT(",\"op\":\"");
	W(w_str(p, end, &s, &n));
	if (!w_type(names, s, n, op))
		return NULL;
	LIT(",\"nonblocking\":");
	W(w_bool(p, end, &op->nonblocking));
	LIT(",\"waited\":");
	W(w_bool(p, end, &op->waited));
	if ((s = W_LIT(p, end, ",\"captured\":")))
		W(w_bool(s, end, &op->captured));
	if ((s = W_LIT(p, end, ",\"size_ratio\":"))) {
		W(w_u64(s, end, &unused));
		if (unused > UINT32_MAX)
			return NULL;
		op->size_ratio = (uint32_t)unused;
	}
	LIT(",\"peer\":");
	W(w_rank(p, end, &op->peer));
	LIT(",\"root\":");
	W(w_rank(p, end, &op->root));
	LIT(",\"peer_in_comm\":");
	W(w_rank(p, end, &op->peer_in_comm));
	LIT(",\"count\":");
	W(w_u64(p, end, &op->count));
	LIT(",\"bytes\":");
	W(w_u64(p, end, &op->bytes));
	LIT(",\"dtype\":\"");
	W(w_str(p, end, &dtype, &ndtype));
	LIT(",\"redop\":\"");
	W(w_str(p, end, &redop, &nredop));
	LIT("}");
#undef LIT
#undef W

	for (k = 0; k < sizeof(states) / sizeof(states[0]); k++)
		if (states[k].len == nstate && fr_same_bytes(state, states[k].name, nstate))
			break;
	if (k == sizeof(states) / sizeof(states[0]) || (op->waited && !op->nonblocking) ||
	    ncomm > FR_COMM_ID_MAX || ndtype > FR_DTYPE_MAX || nredop > FR_REDOP_MAX)
		return NULL;
	op->state = states[k].state;
	op->gpu = states[k].gpu;
	op->started = states[k].started;
	op->seq = op->is_p2p ? p2p_seq : coll_seq;
	if (!(op->comm = fr_trace_strn(t, comm, ncomm)) ||
	    !(op->dtype = fr_trace_strn(t, dtype, ndtype)) ||
	    !(op->redop = fr_trace_strn(t, redop, nredop)))
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
	if ((p = written_entry(rd->names, er->t, p, end, op))) {
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
		er->rc = fail(&keep, -EPROTO, "entries: missing (expected an array)");
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

/*
 * PyTorch writes a group's ranks as a string, "[0, 1]"; ours is an array,
 * where -1 stands for a member the writer did not know (FR_RANK_UNKNOWN).
 * Parses either into a newly allocated array (the caller frees).
 */
static int read_members(const struct rd *rd, const struct fr_val *v, const char *where,
			uint32_t **out, size_t *n)
{
	size_t cap;
	uint32_t *m;
	size_t i = 0;

	*out = NULL;
	*n = 0;
	if (!fr_val_is(v, FR_VAL_ARRAY) && !fr_val_is(v, FR_VAL_STRING))
		return fail(rd, -EPROTO, "%s: expected an array, got %s", where,
			    fr_val_type_name(v));
	cap = v->type == FR_VAL_ARRAY ? v->n : v->n / 2 + 1;
	m = calloc(cap ? cap : 1, sizeof(*m));
	if (!m)
		return fail_nomem(rd);
	if (v->type == FR_VAL_ARRAY) {
		for (i = 0; i < v->n; i++) {
			const struct fr_val *r = v->u.items[i];

			if (r->type != FR_VAL_INT) {
				free(m);
				return fail(rd, -EPROTO, "%s[%zu]: expected an integer, got %s",
					    where, i, fr_val_type_name(r));
			}
			if (r->u.i < -1 || r->u.i >= UINT32_MAX) {
				free(m);
				return fail(rd, -EPROTO, "%s[%zu]: %" PRId64 " is not a rank", where,
					    i, r->u.i);
			}
			m[i] = r->u.i == -1 ? FR_RANK_UNKNOWN : (uint32_t)r->u.i;
		}
	} else {
		const char *s = v->u.s;

		/* Digits by hand: a thousand ranks in each of a thousand
		 * dumps made strtoul() and strspn() show in profiles. */
		while (*s == ' ')
			s++;
		if (*s++ != '[')
			goto out_bad_string;
		for (;;) {
			uint64_t x = 0;

			while (*s == ' ')
				s++;
			if (*s == ']' && i == 0)
				break;
			if (*s < '0' || *s > '9')
				goto out_bad_string;
			for (; *s >= '0' && *s <= '9'; s++) {
				x = x * 10 + (uint64_t)(*s - '0');
				if (x >= UINT32_MAX)
					goto out_bad_string;
			}
			if (i >= cap)
				goto out_bad_string;
			m[i++] = (uint32_t)x;
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
	return fail(rd, -EPROTO, "%s: \"%.64s\" is not a list of ranks", where, v->u.s);
}

int fr_dump_read_members(const struct fr_val *v, const char *name, uint32_t **out, size_t *n,
			 char *err, size_t errlen)
{
	struct rd rd = { name ? name : "ranks", err, errlen, NULL, NULL };

	return read_members(&rd, v, "ranks", out, n);
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
		return fail(rd, -EPROTO, "%s: expected an object, got %s", at,
			    fr_val_type_name(pc));
	v = fr_val_get(pc, "ranks");
	if ((rc = GET_STR(rd, pc, at, "desc", false, c->desc)) ||
	    (rc = want(rd, v, at, "ranks", true, "an array")) ||
	    (rc = read_members(rd, v, path(p, at, "ranks"), &c->members, &n)))
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

	if ((rc = get_u32(rd, fr_val_get(pc, "rank"), at, "rank", false, &c->rank)))
		return rc;
	if (c->size && c->rank >= c->size)
		return fail(rd, -EPROTO, "%s: %" PRIu32 " is not below size %" PRIu32,
			    path(p, at, "rank"), c->rank, c->size);
	return 0;
}

/*
 * The communicator table of a 2.x manifest while its views are read: each
 * communicator once, sorted by id, its members in fr_manifest.members.
 */
struct comm_table {
	size_t n;
	struct table_comm {
		struct fr_comm c;   /* members borrowed from the manifest */
		uint32_t top;       /* the highest known member + 1; 0 if none */
	} *comms;
};

static int table_comm_cmp(const void *a, const void *b)
{
	return strcmp(((const struct table_comm *)a)->c.id, ((const struct table_comm *)b)->c.id);
}

static const struct table_comm *table_find(const struct comm_table *tab, const char *id)
{
	struct table_comm key;

	snprintf(key.c.id, sizeof(key.c.id), "%s", id);
	return bsearch(&key, tab->comms, tab->n, sizeof(*tab->comms), table_comm_cmp);
}

/*
 * A 2.x manifest view's pg_config entry without "ranks": the communicator
 * is the table's, and the entry gives the view's rank in it (by default
 * its place in the members). Its members stay the table's (borrowed).
 */
static int read_comm_ref(const struct rd *rd, const struct fr_val *pc, const char *at,
			 const struct comm_table *tab, const struct fr_trace *t,
			 struct fr_comm *c)
{
	char p[AT_MAX];
	const struct table_comm *tc = table_find(tab, c->id);
	const struct fr_val *rank = fr_val_get(pc, "rank");
	int rc;

	if (!tc)
		return fail(rd, -EPROTO, "%s: no communicator \"%s\" in communicators", at, c->id);
	memcpy(c->desc, tc->c.desc, sizeof(c->desc));
	c->size = tc->c.size;
	c->members = tc->c.members;
	if (tc->top > t->world_size)
		return fail(rd, -EPROTO, "%s: communicators.%s lists rank %" PRIu32
			    ", not below world_size %" PRIu32, at, c->id, tc->top - 1,
			    t->world_size);
	for (uint32_t i = 0; !present(rank) && c->members && i < c->size; i++) {
		if (c->members[i] == t->rank) {
			c->rank = i;
			break;
		}
	}
	if ((rc = get_u32(rd, rank, at, "rank", false, &c->rank)))
		return rc;
	if (c->size && c->rank >= c->size)
		return fail(rd, -EPROTO, "%s: %" PRIu32 " is not below size %" PRIu32,
			    path(p, at, "rank"), c->rank, c->size);
	return 0;
}

static int read_comms(const struct rd *rd, const struct fr_val *root, const char *at,
		      const struct comm_table *tab, struct fr_trace *t)
{
	char p[AT_MAX], cat[AT_MAX];
	const struct fr_val *config, *status;
	size_t cap = 0;
	int rc;

	if ((rc = get_container(rd, root, at, "pg_config", true, FR_VAL_OBJECT, &config)) ||
	    (rc = get_container(rd, root, at, "pg_status", true, FR_VAL_OBJECT, &status)))
		return rc;

	for (uint32_t i = 0; i < config->n; i++) {
		const struct fr_val *id = config->u.items[2 * i];
		const struct fr_val *pc;
		struct fr_comm *c;

		at_fmt(cat, "%s.%s", path(p, at, "pg_config"), id->u.s);
		if (id->n > FR_COMM_ID_MAX)
			return fail(rd, -EPROTO, "%s: process group id longer than %d bytes",
				    cat, FR_COMM_ID_MAX);
		if (fr_trace_comm(t, id->u.s))
			return fail(rd, -EPROTO, "%s: the same process group twice", cat);
		c = fr_trace_add_comm(t, &cap);
		if (!c)
			return fail_nomem(rd);
		memcpy(c->id, id->u.s, id->n + 1);
		pc = config->u.items[2 * i + 1];
		if (tab && fr_val_is(pc, FR_VAL_OBJECT) && !present(fr_val_get(pc, "ranks")))
			rc = read_comm_ref(rd, pc, cat, tab, t, c);
		else
			rc = read_comm(rd, pc, cat, t, c);
		if (rc)
			return rc;
	}

	for (uint32_t i = 0; i < status->n; i++) {
		const struct fr_val *id = status->u.items[2 * i];
		const struct fr_val *ps = status->u.items[2 * i + 1];
		struct fr_comm *c = (struct fr_comm *)fr_trace_comm(t, id->u.s);

		at_fmt(cat, "%s.%s", path(p, at, "pg_status"), id->u.s);
		if (!c)
			return fail(rd, -EPROTO, "%s: no such process group in pg_config", cat);
		if (!fr_val_is(ps, FR_VAL_OBJECT))
			return fail(rd, -EPROTO, "%s: expected an object, got %s", cat,
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
		return fail(rd, -EPROTO, "%s: expected an object, got %s", at,
			    fr_val_type_name(fo));
	v = fr_val_get(fo, "name");
	if (present(v)) {
		if (v->type != FR_VAL_STRING)
			return fail(rd, -EPROTO, "%s: expected a string or null, got %s",
				    path(p, at, "name"), fr_val_type_name(v));
		f->name = strdup(v->u.s);
		if (!f->name)
			return fail_nomem(rd);
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
	return fail(rd, -EPROTO, "%s: expected a hex string such as \"0x4005d6\"",
		    path(p, at, "ip"));
}

static int read_threads(const struct rd *rd, const struct fr_val *root, const char *at,
			struct fr_trace *t)
{
	char p[AT_MAX], tat[AT_MAX], fat[AT_MAX];
	const struct fr_val *threads, *frames;
	int rc;

	if ((rc = get_container(rd, root, at, "threads", false, FR_VAL_ARRAY, &threads)) ||
	    !threads || threads->n == 0)
		return rc;
	t->threads = calloc(threads->n, sizeof(*t->threads));
	if (!t->threads)
		return fail_nomem(rd);

	for (uint32_t i = 0; i < threads->n; i++) {
		const struct fr_val *to = threads->u.items[i];
		struct fr_thread *th = &t->threads[i];

		t->nthreads = i + 1;
		at_fmt(tat, "%s[%" PRIu32 "]", path(p, at, "threads"), i);
		if (!fr_val_is(to, FR_VAL_OBJECT))
			return fail(rd, -EPROTO, "%s: expected an object, got %s", tat,
				    fr_val_type_name(to));
		if ((rc = get_u32(rd, fr_val_get(to, "tid"), tat, "tid", true, &th->tid)) ||
		    (rc = GET_STR(rd, to, tat, "name", false, th->name)) ||
		    (rc = get_bool(rd, fr_val_get(to, "current"), tat, "current", false,
				   &th->current)) ||
		    (rc = get_container(rd, to, tat, "frames", true, FR_VAL_ARRAY, &frames)))
			return rc;
		if (frames->n == 0)
			continue;
		th->frames = calloc(frames->n, sizeof(*th->frames));
		if (!th->frames)
			return fail_nomem(rd);
		for (uint32_t j = 0; j < frames->n; j++) {
			th->nframes = j + 1;
			at_fmt(fat, "%s[%" PRIu32 "]", path(p, tat, "frames"), j);
			if ((rc = read_frame(rd, frames->u.items[j], fat, &th->frames[j])))
				return rc;
		}
	}
	return 0;
}

/*
 * Reads one dump object; `at` is its place inside a larger document ("" for
 * a dump file, "ranks[3]" in a manifest), `tab` the communicator table of a
 * 2.x manifest (else NULL). When the JSON hook `er` read the
 * entries, they are already in `t` (or its error in `er`), and the object
 * holds null in their place. On error `t` may hold a partial trace, which
 * the caller frees.
 */
static int read_trace(const struct rd *rd, const struct fr_val *root, const char *at,
		      const struct entries_reader *er, const struct comm_table *tab,
		      struct fr_trace *t)
{
	char p[AT_MAX];
	char status[32];
	const struct fr_val *entries;
	unsigned long major;
	int st, rc;

	if ((rc = check_header(rd, root, at, &dump_kind, &major)))
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
		return fail(rd, -EPROTO, "%s: unknown rank status \"%s\"", path(p, at, "status"),
			    status);
	t->status = (enum fr_rank_status)st;
	if ((rc = check_world(rd, at, t->world_size)))
		return rc;
	if (t->rank >= t->world_size)
		return fail(rd, -EPROTO, "%s: %" PRIu32 " is not below world_size %" PRIu32,
			    path(p, at, "rank"), t->rank, t->world_size);

	if ((rc = read_comms(rd, root, at, tab, t)))
		return rc;
	if (er && er->done) {
		if (er->rc) {
			if (rd->err && rd->errlen)
				snprintf(rd->err, rd->errlen, "%s", er->err);
			return er->rc;
		}
	} else if ((rc = get_container(rd, root, at, "entries", true, FR_VAL_ARRAY, &entries)) ||
		   (rc = read_entries(rd, entries, at, t))) {
		return rc;
	}
	if (rd->visit && rd->visit->done && (rc = rd->visit->done(rd->visit->arg, t)))
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
	rc = read_trace(&rd, root, "", NULL, NULL, t);
	if (rc)
		fr_trace_free(t);
	return rc;
}

struct fr_dump_entries {
	/* What read_trace() learns of them: done, and the first error. */
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
	rc = read_trace(&rd, root, "", &r->er, NULL, r->t);
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

/* A JSON parser's error ("line 3, column 5: ..."), framed for a person. */
static int json_error(const struct rd *rd, int rc, const char *why)
{
	if (rc == -ENOMEM)
		return fail_nomem(rd);
	return fail(rd, rc, "invalid JSON at %s", why);
}

int fr_dump_parse(const char *buf, size_t len, const char *name, struct fr_trace *t,
		  char *err, size_t errlen)
{
	struct rd rd = { name ? name : "dump", err, errlen, NULL, NULL };
	struct entries_reader er = { &rd, t, NULL, len, false, 0, "" };
	struct fr_json_hook hook = { "entries", read_entries_json, &er };
	struct fr_doc *doc = fr_doc_new();
	struct fr_val *root;
	char why[256];
	int rc;

	memset(t, 0, sizeof(*t));
	if (err && errlen)
		err[0] = '\0';
	er.scratch = fr_doc_new();
	if (!doc || !er.scratch) {
		rc = fail_nomem(&rd);
		goto out_free;
	}
	why[0] = '\0';
	rc = fr_json_parse_with(doc, buf, len, &hook, &root, why, sizeof(why));
	/* An entry's own error is in err already; the parser's is in why. */
	if (rc && why[0])
		rc = json_error(&rd, rc, why);
	else if (rc == -ENOMEM)
		rc = fail_nomem(&rd);
	else if (!rc)
		rc = read_trace(&rd, root, "", &er, NULL, t);
out_free:
	fr_doc_free(er.scratch);
	fr_doc_free(doc);
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
			return fail_nomem(rd);
		*buf = nb;
		*cap = size_hint + 1;
	}
	for (;;) {
		ssize_t r;

		if (n == *cap) {
			size_t ncap = *cap < 65536 ? 65536 : *cap * 2;
			char *nb;

			if (n > FR_DUMP_FILE_MAX)
				return fail(rd, -EFBIG, "more than the limit of %llu bytes",
					    FR_DUMP_FILE_MAX);
			nb = realloc(*buf, ncap);
			if (!nb)
				return fail_nomem(rd);
			*buf = nb;
			*cap = ncap;
		}
		r = read(fd, *buf + n, *cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return fail(rd, -errno, "cannot read: %s", strerror(errno));
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > FR_DUMP_FILE_MAX)
		return fail(rd, -EFBIG, "more than the limit of %llu bytes", FR_DUMP_FILE_MAX);
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
	struct rd rd = { path, err, errlen, NULL, NULL };
	struct stat lst;
	int fd;

	if (err && errlen)
		err[0] = '\0';
	/* O_NONBLOCK: opening a FIFO for reading would wait for a writer. It
	 * changes nothing for a regular file, the only kind read. */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int rc = -errno;

		/* ELOOP: a link (O_NOFOLLOW); ENXIO: a socket. Say which. */
		if ((rc == -ELOOP || rc == -ENXIO) && lstat(path, &lst) == 0) {
			if (S_ISLNK(lst.st_mode))
				return fail(&rd, -ELOOP, "a symbolic link, not followed (put the "
					    "file itself in the directory)");
			if (!S_ISREG(lst.st_mode) && !S_ISDIR(lst.st_mode))
				return fail(&rd, -EINVAL, "%s, not a regular file",
					    file_type_name(lst.st_mode));
		}
		return fail(&rd, rc, "cannot open: %s", strerror(-rc));
	}
	if (fstat(fd, st) < 0) {
		int rc = -errno;

		close(fd);
		return fail(&rd, rc, "cannot stat: %s", strerror(-rc));
	}
	if (S_ISDIR(st->st_mode)) {
		close(fd);
		return fail(&rd, -EISDIR, "is a directory");
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return fail(&rd, -EINVAL, "%s, not a regular file", file_type_name(st->st_mode));
	}
	return fd;
}

static int slurp(const struct rd *rd, const char *path_, char **buf, size_t *cap, size_t *len)
{
	struct stat st;
	int fd, rc;

	*len = 0;
	fd = fr_dump_open(path_, &st, rd->err, rd->errlen);
	if (fd < 0)
		return fd;
	if ((uint64_t)st.st_size > FR_DUMP_FILE_MAX) {
		rc = fail(rd, -EFBIG, "%lld bytes, more than the limit of %llu",
			  (long long)st.st_size, FR_DUMP_FILE_MAX);
	} else {
		rc = read_fd(rd, fd, (size_t)st.st_size, buf, cap, len);
	}
	close(fd);
	return rc;
}

int fr_dump_read_file(const char *path_, struct fr_trace *t, char *err, size_t errlen)
{
	struct rd rd = { path_, err, errlen, NULL, NULL };
	char *buf = NULL;
	size_t cap = 0, len;
	int rc;

	memset(t, 0, sizeof(*t));
	if (err && errlen)
		err[0] = '\0';
	rc = slurp(&rd, path_, &buf, &cap, &len);
	if (!rc)
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

int fr_write_file_at(int dirfd, const char *name, const void *buf, size_t len, mode_t mode)
{
	char *tmp;
	int fd, rc;

	if (asprintf(&tmp, "%s.tmp.%ld", name, (long)getpid()) < 0)
		return -ENOMEM;
	/* O_NOFOLLOW: a link planted at the temporary name is not followed. */
	fd = openat(dirfd, tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0 && errno == EEXIST) {
		/*
		 * Left by an earlier process with our pid that died mid-write
		 * (pids repeat across container restarts); it is garbage.
		 */
		unlinkat(dirfd, tmp, 0);
		fd = openat(dirfd, tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, mode);
	}
	if (fd < 0) {
		rc = -errno;
		goto out_free;
	}
	/* The mode asked for, whatever the process's umask let through. */
	if (fchmod(fd, mode) < 0) {
		rc = -errno;
		close(fd);
		goto out_unlink;
	}
	rc = write_all(fd, buf, len);
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	/* close() can report a failed delayed write (NFS). */
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (!rc && renameat(dirfd, tmp, dirfd, name) < 0)
		rc = -errno;
out_unlink:
	if (rc) {
		unlinkat(dirfd, tmp, 0);
		goto out_free;
	}
	/*
	 * The file is in place now; a failure to make the rename durable is
	 * reported, but undoing it would lose the data rather than save it.
	 * Some file systems cannot sync a directory; the rename stands.
	 */
	if (fsync(dirfd) < 0 && errno != EINVAL && errno != EROFS)
		rc = -errno;

out_free:
	free(tmp);
	return rc;
}

int fr_write_file_atomic_mode(const char *path_, const void *buf, size_t len, mode_t mode)
{
	const char *slash = strrchr(path_, '/');
	char *dir;
	int dirfd, rc;

	if (!slash)
		dir = strdup(".");
	else if (slash == path_)
		dir = strdup("/");
	else
		dir = strndup(path_, (size_t)(slash - path_));
	if (!dir)
		return -ENOMEM;
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	if (dirfd < 0)
		return -errno;
	rc = fr_write_file_at(dirfd, slash ? slash + 1 : path_, buf, len, mode);
	close(dirfd);
	return rc;
}

int fr_write_file_atomic(const char *path_, const void *buf, size_t len)
{
	return fr_write_file_atomic_mode(path_, buf, len, 0644);
}

/* ------------------------------------------------------------------ */
/* Manifests                                                           */
/* ------------------------------------------------------------------ */

json_t *fr_manifest_to_json(const char *job, const char *incident, const char *reason,
			    uint32_t world_size, uint64_t opened_ns, uint64_t closed_ns,
			    const struct fr_trace *const *ranks, size_t nranks, json_t *verdict)
{
	struct table_out tab = { json_object(), json_object(), NULL, 0, 0, world_size };
	json_t *root = json_object();
	json_t *arr = json_array();
	int bad = 0;

	if (!root || !arr || !tab.json || !tab.index)
		goto out_free;
	bad |= set(root, "format", json_string(FR_MANIFEST_FORMAT));
	bad |= set(root, "version", json_string(FR_MANIFEST_VERSION));
	bad |= set(root, "job", jstrn(job, FR_JOB_MAX));
	bad |= set(root, "incident", jstrn(incident, FR_INCIDENT_MAX));
	bad |= set(root, "reason", jstrn(reason, FR_REASON_MAX));
	bad |= set(root, "world_size", json_integer(world_size));
	bad |= set(root, "opened_ns", ju64(opened_ns));
	bad |= set(root, "closed_ns", ju64(closed_ns));
	/* The table goes first, so that a reader meets it before the views;
	 * it fills as the views are written. */
	bad |= set(root, "communicators", json_incref(tab.json));
	for (size_t i = 0; i < nranks && !bad; i++)
		if (ranks[i])
			bad |= append(arr, trace_json(ranks[i], false, &tab));
	bad |= set(root, "ranks", arr);
	arr = NULL;
	bad |= set(root, "verdict", verdict ? json_incref(verdict) : json_null());
	if (bad)
		goto out_free;
	json_decref(tab.json);
	json_decref(tab.index);
	free(tab.first);
	return root;

out_free:
	json_decref(tab.json);
	json_decref(tab.index);
	free(tab.first);
	json_decref(arr);
	json_decref(root);
	return NULL;
}

/* A view's communicators share the table's lists: detach them first. */
void fr_manifest_free(struct fr_manifest *m)
{
	uintptr_t lo = (uintptr_t)m->members;
	uintptr_t hi = lo + m->nmembers * sizeof(*m->members);

	for (size_t i = 0; i < m->nranks; i++) {
		struct fr_trace *t = &m->ranks[i];

		for (size_t k = 0; m->members && k < t->ncomms; k++) {
			uintptr_t p = (uintptr_t)t->comms[k].members;

			if (p >= lo && p < hi)
				t->comms[k].members = NULL;
		}
		fr_trace_free(t);
	}
	free(m->ranks);
	free(m->members);
	memset(m, 0, sizeof(*m));
}

/*
 * Reads "communicators" of a 2.x manifest into `tab` (the caller frees
 * tab->comms) and the members of all into m->members, end to end.
 */
static int read_comm_table(const struct rd *rd, const struct fr_val *root,
			   struct fr_manifest *m, struct comm_table *tab)
{
	char at[AT_MAX], p[AT_MAX];
	const struct fr_val *comms;
	size_t total = 0, used = 0;
	int rc;

	if ((rc = get_container(rd, root, "", "communicators", true, FR_VAL_OBJECT, &comms)))
		return rc;
	for (uint32_t i = 0; i < comms->n; i++) {
		const struct fr_val *v = fr_val_get(comms->u.items[2 * i + 1], "ranks");

		if (fr_val_is(v, FR_VAL_ARRAY))
			total += v->n;
	}
	tab->comms = calloc(comms->n ? comms->n : 1, sizeof(*tab->comms));
	m->members = calloc(total ? total : 1, sizeof(*m->members));
	if (!tab->comms || !m->members)
		return fail_nomem(rd);
	m->nmembers = total;

	for (uint32_t i = 0; i < comms->n; i++) {
		const struct fr_val *id = comms->u.items[2 * i];
		const struct fr_val *e = comms->u.items[2 * i + 1];
		const struct fr_val *v;
		struct table_comm *tc = &tab->comms[i];
		uint32_t *members;
		uint64_t size;
		size_t n;

		at_fmt(at, "communicators.%s", id->u.s);
		if (id->n > FR_COMM_ID_MAX)
			return fail(rd, -EPROTO, "%s: communicator id longer than %d bytes", at,
				    FR_COMM_ID_MAX);
		memcpy(tc->c.id, id->u.s, id->n + 1);
		tab->n = i + 1;
		if (!fr_val_is(e, FR_VAL_OBJECT))
			return fail(rd, -EPROTO, "%s: expected an object, got %s", at,
				    fr_val_type_name(e));
		v = fr_val_get(e, "ranks");
		if ((rc = GET_STR(rd, e, at, "desc", false, tc->c.desc)) ||
		    (rc = want(rd, v, at, "ranks", true, "an array")))
			return rc;
		if (!fr_val_is(v, FR_VAL_ARRAY))
			return fail(rd, -EPROTO, "%s: expected an array, got %s",
				    path(p, at, "ranks"), fr_val_type_name(v));
		if ((rc = read_members(rd, v, path(p, at, "ranks"), &members, &n)))
			return rc;
		memcpy(m->members + used, members, n * sizeof(*members));
		free(members);
		size = n;
		if ((rc = get_u64(rd, fr_val_get(e, "size"), at, "size", false, UINT32_MAX, &size)))
			return rc;
		if (n && n != size)
			return fail(rd, -EPROTO, "%s: lists %zu ranks but size is %" PRIu64,
				    path(p, at, "ranks"), n, size);
		tc->c.size = (uint32_t)size;
		/* An empty list: the daemon knew only the size. */
		tc->c.members = n ? m->members + used : NULL;
		for (size_t k = 0; k < n; k++) {
			uint32_t r = tc->c.members[k];

			if (r == FR_RANK_UNKNOWN)
				continue;
			if (r >= m->world_size)
				return fail(rd, -EPROTO, "%s[%zu]: rank %" PRIu32
					    " is not below world_size %" PRIu32,
					    path(p, at, "ranks"), k, r, m->world_size);
			if (r >= tc->top)
				tc->top = r + 1;
		}
		used += n;
	}
	qsort(tab->comms, tab->n, sizeof(*tab->comms), table_comm_cmp);
	for (size_t i = 1; i < tab->n; i++)
		if (strcmp(tab->comms[i - 1].c.id, tab->comms[i].c.id) == 0)
			return fail(rd, -EPROTO, "communicators.%s: the same communicator twice",
				    tab->comms[i].c.id);
	return 0;
}

static int read_manifest(const struct rd *rd, const struct fr_val *root, struct fr_manifest *m)
{
	char at[AT_MAX];
	struct comm_table tab = { 0, NULL };
	const struct fr_val *ranks;
	unsigned long major;
	int rc;

	if ((rc = check_header(rd, root, "", &manifest_kind, &major)) ||
	    (rc = GET_STR(rd, root, "", "job", true, m->job)) ||
	    (rc = GET_STR(rd, root, "", "incident", true, m->incident)) ||
	    (rc = GET_STR(rd, root, "", "reason", true, m->reason)) ||
	    (rc = get_u32(rd, fr_val_get(root, "world_size"), "", "world_size", true,
			  &m->world_size)) ||
	    (rc = get_u64(rd, fr_val_get(root, "opened_ns"), "", "opened_ns", true, INT64_MAX,
			  &m->opened_ns)) ||
	    (rc = get_u64(rd, fr_val_get(root, "closed_ns"), "", "closed_ns", true, INT64_MAX,
			  &m->closed_ns)) ||
	    (rc = get_container(rd, root, "", "ranks", true, FR_VAL_ARRAY, &ranks)) ||
	    (rc = check_world(rd, "", m->world_size)))
		return rc;
	/* 1.x views are whole dumps; 2.x ones name the table's communicators. */
	if (major >= 2 && (rc = read_comm_table(rd, root, m, &tab)))
		goto out_free_table;
	if (ranks->n == 0)
		goto out_free_table;
	m->ranks = calloc(ranks->n, sizeof(*m->ranks));
	if (!m->ranks) {
		rc = fail_nomem(rd);
		goto out_free_table;
	}
	for (uint32_t i = 0; i < ranks->n; i++) {
		m->nranks = i + 1;
		at_fmt(at, "ranks[%" PRIu32 "]", i);
		rc = read_trace(rd, ranks->u.items[i], at, NULL, major >= 2 ? &tab : NULL,
				&m->ranks[i]);
		if (rc)
			break;
	}

out_free_table:
	free(tab.comms);
	return rc;
}

int fr_manifest_parse(const char *buf, size_t len, const char *name, struct fr_manifest *m,
		      char *err, size_t errlen)
{
	struct rd rd = { name ? name : "manifest", err, errlen, NULL, NULL };
	struct fr_doc *doc;
	struct fr_val *root;
	char why[256];
	int rc;

	memset(m, 0, sizeof(*m));
	if (err && errlen)
		err[0] = '\0';
	doc = fr_doc_new();
	if (!doc)
		return fail_nomem(&rd);
	rc = fr_json_parse(doc, buf, len, &root, why, sizeof(why));
	if (rc)
		rc = json_error(&rd, rc, why);
	else
		rc = read_manifest(&rd, root, m);
	fr_doc_free(doc);
	if (rc)
		fr_manifest_free(m);
	return rc;
}

int fr_manifest_read_file(const char *path_, struct fr_manifest *m, char *err, size_t errlen)
{
	struct rd rd = { path_, err, errlen, NULL, NULL };
	char *buf = NULL;
	size_t cap = 0, len;
	int rc;

	memset(m, 0, sizeof(*m));
	if (err && errlen)
		err[0] = '\0';
	rc = slurp(&rd, path_, &buf, &cap, &len);
	if (!rc && !len)
		rc = fail(&rd, -EPROTO, "an empty file");
	if (!rc)
		rc = fr_manifest_parse(buf, len, path_, m, err, errlen);
	free(buf);
	return rc;
}

/*
 * Opens component `name` of a path below `at` as a directory, creating it
 * with `mode` when it is missing, and checks it is one the caller may trust:
 * a directory owned by the caller or by root. A symbolic link is followed
 * only when it is owned by the caller or by root (a system's /scratch ->
 * /lustre/scratch); one planted by another user is refused. Returns the
 * directory's descriptor, or a negative errno with *why saying what is
 * wrong with it.
 */
static int open_trusted_dir(int at, const char *name, mode_t mode, const char **why)
{
	uid_t me = geteuid();
	struct stat st;
	int fd;

	*why = NULL;
	fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		if (mkdirat(at, name, mode) < 0 && errno != EEXIST)
			return -errno;
		fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0 && (errno == ELOOP || errno == ENOTDIR)) {
		int err = errno;

		if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
		if (!S_ISLNK(st.st_mode)) {
			*why = "exists and is not a directory";
			return -ENOTDIR;
		}
		if (st.st_uid != me && st.st_uid != 0) {
			*why = "is a symbolic link owned by another user";
			return -ELOOP;
		}
		fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			return errno == ENOTDIR ? -err : -errno;
	}
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	if (st.st_uid != me && st.st_uid != 0) {
		close(fd);
		*why = "is a directory owned by another user";
		return -EPERM;
	}
	return fd;
}

int fr_dir_open(int at, const char *path, mode_t mode, char *err, size_t errlen)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);
	const char *why = NULL;
	char *p, *name;
	int fd, rc = 0;

	if (err && errlen)
		err[0] = '\0';
	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	p = buf;
	if (*p == '/') {
		fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		while (*p == '/')
			p++;
	} else {
		fd = openat(at, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	if (fd < 0)
		return -errno;
	while (*p) {
		int next;

		name = p;
		while (*p && *p != '/')
			p++;
		if (*p) {
			*p++ = '\0';
			while (*p == '/')
				p++;
		}
		if (!strcmp(name, ".")) /* ".." is an ordinary name: checked like any other */
			continue;
		next = open_trusted_dir(fd, name, mode, &why);
		if (next < 0) {
			rc = next;
			if (err && errlen)
				snprintf(err, errlen, "%.*s %s", (int)(name + strlen(name) - buf), path,
					 why ? why : strerror(-rc));
			break;
		}
		close(fd);
		fd = next;
	}
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

int fr_mkdir_p(const char *path)
{
	int fd = fr_dir_open(AT_FDCWD, path, 0750, NULL, 0);

	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}
