/*
 * What the readers of dumps (dump_read.c) and of manifests (manifest.c)
 * share: where their errors go, the getters of a document's fields and
 * the reading of a dump object. Internal to dumps/.
 */
#ifndef FR_DUMP_READ_H
#define FR_DUMP_READ_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dump.h"

/* Room for a JSON path such as "ranks[1023].threads[12].frames[63].name". */
#define AT_MAX 256

struct name_cache;

/* Where errors go: the file's name and the caller's buffer; and, while
 * entries are read, their names' cache (NULL: none). */
struct rd {
	const char *name;
	char *err;
	size_t errlen;
	struct name_cache *names;
	const struct fr_dump_visit *visit;  /* NULL: none */
};

/* Writes "<name>: <message>" into rd's buffer (none: nothing) and
 * returns rc. */
__attribute__((format(printf, 3, 4)))
int fr_rd_fail(const struct rd *rd, int rc, const char *fmt, ...);
int fr_rd_nomem(const struct rd *rd);

/*
 * Formats a place in the document into buf (AT_MAX bytes). A path too deep
 * to fit is cut short; it only ever ends up in a message, so it is only
 * ever formatted on the way to one.
 */
__attribute__((format(printf, 2, 3)))
const char *fr_rd_at(char *buf, const char *fmt, ...);
/* "entries[3]" + "count" -> "entries[3].count"; for messages. */
const char *fr_rd_path(char *buf, const char *at, const char *key);
/* "threads[3]" + "frames", 2 -> "threads[3].frames[2]". */
const char *fr_rd_item(char *buf, const char *at, const char *key, uint64_t i);
/* "" + "pg_config", "world" -> "pg_config.world". */
const char *fr_rd_member(char *buf, const char *at, const char *key, const char *name);

/* The getters' messages, made out of line. */
__attribute__((cold)) int fr_rd_missing(const struct rd *rd, const char *at, const char *key,
					const char *what);
__attribute__((cold)) int fr_rd_type(const struct rd *rd, const struct fr_val *v, const char *at,
				     const char *key, const char *what);
__attribute__((cold)) int fr_rd_range(const struct rd *rd, const char *at, const char *key,
				      int64_t i, int64_t lo, uint64_t hi);
__attribute__((cold)) int fr_rd_long(const struct rd *rd, const struct fr_val *v, const char *at,
				     const char *key, size_t max);

/*
 * Field getters: `v` is the value of field `key` of the object at `at`
 * (NULL when absent). A missing or null optional field leaves the default;
 * a present field of the wrong type is always an error, so that a typo in a
 * hand-written or converted dump is reported rather than silently ignored.
 * They are inline, called a dozen times for each of two million entries;
 * their messages are made out of line.
 */
static inline __attribute__((always_inline)) bool present(const struct fr_val *v)
{
	return v && v->type != FR_VAL_NULL;
}

static inline __attribute__((always_inline)) int
want(const struct rd *rd, const struct fr_val *v, const char *at, const char *key, bool required,
     const char *what)
{
	return required && !present(v) ? fr_rd_missing(rd, at, key, what) : 0;
}

static inline __attribute__((always_inline)) int
get_u64(const struct rd *rd, const struct fr_val *v, const char *at, const char *key, bool required,
	uint64_t max, uint64_t *out)
{
	if (!present(v))
		return want(rd, v, at, key, required, "an integer");
	if (v->type != FR_VAL_INT)
		return fr_rd_type(rd, v, at, key, "an integer");
	if (v->u.i < 0 || (uint64_t)v->u.i > max)
		return fr_rd_range(rd, at, key, v->u.i, 0, max);
	*out = (uint64_t)v->u.i;
	return 0;
}

static inline __attribute__((always_inline)) int
get_u32(const struct rd *rd, const struct fr_val *v, const char *at, const char *key, bool required,
	uint32_t *out)
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
static inline __attribute__((always_inline)) int
get_rank_or_none(const struct rd *rd, const struct fr_val *v, const char *at, const char *key,
		 int32_t *out)
{
	*out = -1;
	if (!present(v))
		return 0;
	if (v->type != FR_VAL_INT)
		return fr_rd_type(rd, v, at, key, "an integer");
	if (v->u.i < -1 || v->u.i > INT32_MAX)
		return fr_rd_range(rd, at, key, v->u.i, -1, INT32_MAX);
	*out = (int32_t)v->u.i;
	return 0;
}

static inline __attribute__((always_inline)) int
get_bool(const struct rd *rd, const struct fr_val *v, const char *at, const char *key,
	 bool required, bool *out)
{
	if (!present(v))
		return want(rd, v, at, key, required, "true or false");
	if (v->type != FR_VAL_BOOL)
		return fr_rd_type(rd, v, at, key, "true or false");
	*out = v->u.b;
	return 0;
}

/* Whether v is a string shorter than `cap` bytes (its terminator
 * included), to be used in place: a value's string ends with its only NUL. */
static inline __attribute__((always_inline)) int
str_check(const struct rd *rd, const struct fr_val *v, const char *at, const char *key, size_t cap)
{
	if (!fr_val_is(v, FR_VAL_STRING))
		return fr_rd_type(rd, v, at, key, "a string");
	if (v->n >= cap)
		return fr_rd_long(rd, v, at, key, cap - 1);
	return 0;
}

/* A string value into a fixed buffer of `cap` bytes (terminator included);
 * `at` and `key` name it in messages. */
static inline int str_into(const struct rd *rd, const struct fr_val *v, const char *at,
		    const char *key, char *dst, size_t cap)
{
	int rc = str_check(rd, v, at, key, cap);

	if (!rc)
		memcpy(dst, v->u.s, v->n + 1);
	return rc;
}

static inline int get_str(const struct rd *rd, const struct fr_val *v, const char *at,
			  const char *key, bool required, char *dst, size_t cap)
{
	if (!present(v))
		return want(rd, v, at, key, required, "a string");
	return str_into(rd, v, at, key, dst, cap);
}

/* String v, of at most `max` bytes, as trace t's copy (fr_trace_strn) into
 * *dst. */
static inline __attribute__((always_inline)) int
str_keep(const struct rd *rd, const struct fr_val *v, const char *at, const char *key, size_t max,
	 struct fr_trace *t, const char **dst)
{
	int rc = str_check(rd, v, at, key, max + 1);

	if (rc)
		return rc;
	if (!(*dst = fr_trace_strn(t, v->u.s, v->n)))
		return fr_rd_nomem(rd);
	return 0;
}

static inline __attribute__((always_inline)) int
get_str_keep(const struct rd *rd, const struct fr_val *v, const char *at, const char *key,
	     bool required, size_t max, struct fr_trace *t, const char **dst)
{
	if (!present(v))
		return want(rd, v, at, key, required, "a string");
	return str_keep(rd, v, at, key, max, t, dst);
}

/* Field `key` of object `obj` as a string into array `field`. */
#define GET_STR(rd, obj, at, key, req, field) \
	get_str((rd), fr_val_get((obj), (key)), (at), (key), (req), (field), sizeof(field))

/* Field `key` of `obj`, an object or an array as `type` says, at *out
 * (NULL when absent and not required). */
int fr_rd_container(const struct rd *rd, const struct fr_val *obj, const char *at,
		    const char *key, bool required, enum fr_val_type type,
		    const struct fr_val **out);

/* A manifest's "kernel_log" (2.1, optional) into a new array of *n logs
 * (fr_klogs_free() it, also after an error). In kernel_log.c. */
struct fr_klog;
int fr_rd_klogs(const struct rd *rd, const struct fr_val *root, struct fr_klog **out, size_t *n);

/* A kind of document: what its header must say, and which majors we read. */
struct doc_kind {
	const char *format;         /* "flightrec-dump" */
	const char *kind;           /* "dump", for messages */
	const char *version;        /* the version written now, for messages */
	unsigned long oldest;       /* majors read, oldest to newest */
	unsigned long newest;
};

/*
 * Checks "format" and "version" of a document of kind `k` and stores its
 * major version at *major.
 */
int fr_rd_header(const struct rd *rd, const struct fr_val *root, const char *at,
		 const struct doc_kind *k, unsigned long *major);

/*
 * A world size sizes arrays indexed by rank in every reader, so it is
 * checked here, once: 0 (which some early writers used for "unknown") and
 * absurd sizes are refused.
 */
int fr_rd_world(const struct rd *rd, const char *at, uint32_t world_size);

/*
 * PyTorch writes a group's ranks as a string, "[0, 1]"; ours is an array,
 * where -1 stands for a member the writer did not know (FR_RANK_UNKNOWN),
 * or since 1.6 a string of runs, "0-65535" or "?*3,3" (dumps/FORMAT.md).
 * Parses any of them into a newly allocated array (the caller frees).
 */
int fr_rd_members(const struct rd *rd, const struct fr_val *v, const char *where,
		  uint32_t **out, size_t *n);

/*
 * Reads one dump object; `at` is its place inside a larger document ("" for
 * a dump file, "ranks[3]" in a manifest), `tab` the communicator table of a
 * 2.x manifest (else NULL). When the JSON hook `er` read the entries, they
 * are already in `t` (or its error in `er`), and the object holds null in
 * their place. On error `t` may hold a partial trace, which the caller
 * frees.
 */
struct entries_reader;
struct comm_table;

int fr_rd_trace(const struct rd *rd, const struct fr_val *root, const char *at,
		const struct entries_reader *er, const struct comm_table *tab,
		struct fr_trace *t);

/*
 * A 2.x manifest view's pg_config entry `pc` without "ranks", for `c` (its
 * id set): the communicator is the table's, and the entry gives the view's
 * rank in it (by default its place in the members). Its members stay the
 * table's (borrowed). In manifest.c.
 */
int fr_rd_comm_ref(const struct rd *rd, const struct fr_val *pc, const char *at,
		   const struct comm_table *tab, const struct fr_trace *t, struct fr_comm *c);

/* A JSON parser's error ("line 3, column 5: ..."), framed for a person. */
int fr_rd_json_error(const struct rd *rd, int rc, const char *why);

/*
 * Reads file `path` (opened by fr_dump_open()) whole into a newly
 * allocated buffer at *buf, *len bytes of it, which the caller frees (also
 * on failure). Clears err, and names `path` in it on failure.
 */
int fr_rd_slurp(const char *path, char **buf, size_t *len, char *err, size_t errlen);

#endif
