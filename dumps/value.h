/*
 * Documents read by fr-analyze and the daemon: a tree of plain values (null,
 * booleans, 64-bit integers, reals, strings, arrays, objects), built by the
 * JSON parser below or by the pickle reader (pickle.h), and read by the
 * dump readers (dump_read.c, manifest.c, pytorch.c).
 *
 * Every value of a document lives in the document's arena and is freed with
 * it, at once: reading a 2048-entry dump makes some 150 000 values, and one
 * malloc each (as a general-purpose JSON library does) would cost more than
 * parsing them. Nothing is reference-counted; a value may appear in several
 * places of one document (the pickle reader shares what the pickle's memo
 * shares), so the tree is a DAG, and readers must not change it.
 */
#ifndef FR_VALUE_H
#define FR_VALUE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "scan.h"

/* The deepest nesting either parser accepts (a scalar in a list in a dict
 * is 2); Flight Recorder dumps need 5. */
#define FR_VAL_DEPTH_MAX 256

enum fr_val_type {
	FR_VAL_NULL,
	FR_VAL_BOOL,
	FR_VAL_INT,
	FR_VAL_REAL,
	FR_VAL_STRING,
	FR_VAL_ARRAY,
	FR_VAL_OBJECT,
};

struct fr_val {
	uint8_t type;          /* enum fr_val_type */
	uint8_t mark;          /* free for a walker of the tree (e.g. "seen") */
	/* Bytes of a string (its NUL not counted), items of an array,
	 * members of an object. */
	uint32_t n;
	uint32_t cap;          /* room in items, for arrays and objects being built */
	union {
		bool b;
		int64_t i;
		double r;
		const char *s;            /* NUL-terminated; may hold no other NUL */
		struct fr_val **items;    /* array: n items; object: 2n, key then value */
	} u;
};

struct fr_doc;

/* A new empty document, or NULL when out of memory. */
struct fr_doc *fr_doc_new(void);
/* Frees the document and every value in it; NULL is allowed. */
void fr_doc_free(struct fr_doc *d);
/* Frees every value of the document at once, keeping some of its memory
 * for the next values. */
void fr_doc_reset(struct fr_doc *d);
/* `size` bytes from the document's arena, 8-byte aligned; NULL when out of
 * memory. Freed with the document. */
void *fr_doc_alloc(struct fr_doc *d, size_t size);

/* Builders: a new value in `d`, or NULL when out of memory. A string is
 * copied (`n` bytes, a NUL is added). */
struct fr_val *fr_val_null(struct fr_doc *d);
struct fr_val *fr_val_bool(struct fr_doc *d, bool b);
struct fr_val *fr_val_int(struct fr_doc *d, int64_t i);
struct fr_val *fr_val_string(struct fr_doc *d, const char *s, size_t n);
struct fr_val *fr_val_array(struct fr_doc *d);
struct fr_val *fr_val_object(struct fr_doc *d);

/* Appends `item` to array `arr`. Returns 0 or -ENOMEM. */
int fr_val_append(struct fr_doc *d, struct fr_val *arr, struct fr_val *item);
/* Appends the member `key` (a string value) -> `val` to object `obj`; an
 * earlier member with an equal key is not looked for (fr_val_get finds the
 * last). Returns 0 or -ENOMEM. */
int fr_val_add(struct fr_doc *d, struct fr_val *obj, struct fr_val *key, struct fr_val *val);
/* Same, with the key given as text (copied). */
int fr_val_add_str(struct fr_doc *d, struct fr_val *obj, const char *key, struct fr_val *val);

/* The value of the last member of `obj` named `key`; NULL when there is
 * none or `obj` is not an object. */
const struct fr_val *fr_val_get(const struct fr_val *obj, const char *key);

static inline bool fr_val_is(const struct fr_val *v, enum fr_val_type type)
{
	return v && v->type == type;
}

/* Item `i` of an array (NULL past the end or for another type). */
static inline const struct fr_val *fr_val_item(const struct fr_val *v, size_t i)
{
	return fr_val_is(v, FR_VAL_ARRAY) && i < v->n ? v->u.items[i] : NULL;
}

static inline const char *fr_val_str(const struct fr_val *v)
{
	return fr_val_is(v, FR_VAL_STRING) ? v->u.s : NULL;
}

/* What a value is, for messages: "a string", "an integer", "null", ... */
const char *fr_val_type_name(const struct fr_val *v);

/*
 * Parses JSON text (RFC 8259, UTF-8) into `d`; the top value at *out.
 * Strict: one value and nothing after it but white space, no NUL in a
 * string (\u0000), no duplicate key in an object, integers that fit in 64
 * bits, depth at most FR_VAL_DEPTH_MAX. Returns 0, -ENOMEM, or -EPROTO with
 * `err` saying where and what, "line 3, column 17: expected ':' after an
 * object key, got '}'". Values already made stay in `d` on failure.
 */
int fr_json_parse(struct fr_doc *d, const char *buf, size_t len, struct fr_val **out,
		  char *err, size_t errlen);

/*
 * Reading one part of a document without building its tree: a hook is
 * called for the member `key` of the top-level object (when the document is
 * an object) to read that member's value itself, from `in`, with the
 * functions below; it must consume exactly one value. The tree gets null
 * in that member's place. The dump reader reads the 2048 entries of a dump
 * this way, straight into its operations.
 */
struct fr_json_in;

struct fr_json_hook {
	const char *key;
	/* Returns 0, or a negative errno (the parse stops with it). */
	int (*read)(struct fr_json_in *in, void *arg);
	void *arg;
};

int fr_json_parse_with(struct fr_doc *d, const char *buf, size_t len,
		       const struct fr_json_hook *hook, struct fr_val **out, char *err,
		       size_t errlen);

/*
 * The text not yet read, up to *end, and moving the cursor forward to `p`
 * (at most *end): for a hook that scans a value of a shape it knows itself
 * and leaves anything else to the functions below, from where it started.
 * What it skips is not checked by the parser.
 */
const char *fr_json_cursor(const struct fr_json_in *in, const char **end);
void fr_json_set_cursor(struct fr_json_in *in, const char *p);

/* One value at the cursor into `d`, as fr_json_parse would. */
int fr_json_value(struct fr_json_in *in, struct fr_doc *d, struct fr_val **out);
/* Skips white space; the next byte, or '\0' at the end of the text. */
char fr_json_peek(struct fr_json_in *in);
/* Skips white space; consumes `c` and returns true if it is next. */
bool fr_json_accept(struct fr_json_in *in, char c);
/* Same, or fails: "expected `what`, got ...". */
int fr_json_expect(struct fr_json_in *in, char c, const char *what);
/*
 * Reads an object of a known shape: each member whose key is keys[i] has
 * its value put in vals[i] (a scalar in place, a container made in `d`)
 * and bit i of *present set; members of other keys are read and dropped
 * (through vals[nkeys]); a key of `keys` given twice is refused. Keys are
 * first tried in the order of `keys`, as `"key":` written compactly, so
 * that a reader of many objects of one writer pays for no tree, no lookup
 * and no scan of a key. At most 64 keys.
 */
struct fr_json_key {
	const char *key;
	uint8_t len;
	/* The reader has no use for the value: an array is checked but not
	 * built, and vals[i] is null. */
	bool drop;
};

int fr_json_object(struct fr_json_in *in, struct fr_doc *d, const struct fr_json_key *keys,
		   int nkeys, struct fr_val *vals, uint64_t *present);

/*
 * The same for an object already in a tree: out[i] is the value of the
 * last member named keys[i], NULL when none. A pickle shares the key
 * strings of its many dicts (its memo), and its dicts list them in the same
 * order, so `map` remembers which key value was which key, by position in
 * the object and by address: start it zeroed, keep it across the objects
 * of one document, and most members cost one pointer compare.
 */
#define FR_KEYMAP_POSITIONS 48
struct fr_val_keymap {
	struct {
		const struct fr_val *key;
		int index;
	} at[FR_KEYMAP_POSITIONS], seen[64];
};

void fr_val_fields(struct fr_val_keymap *map, const struct fr_val *obj,
		   const struct fr_json_key *keys, int nkeys, const struct fr_val **out);

/* The same tree as a jansson value (a new reference), for writers and
 * tests; NULL when out of memory. Shared values are copied. */
json_t *fr_val_to_json(const struct fr_val *v);

#endif
