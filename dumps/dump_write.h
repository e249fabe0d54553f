/*
 * The dump writer's parts that the manifest's writer (manifest.c) builds
 * on: internal to dumps/. Documents are built as jansson values.
 */
#ifndef FR_DUMP_WRITE_H
#define FR_DUMP_WRITE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "trace.h"

/*
 * JSON integers are signed 64-bit in jansson. Every u64 we write (ns
 * timestamps until 2262, element counts, sequence numbers) is far below
 * 2^63; clamping keeps a corrupt value from turning into a negative number
 * that every reader would then refuse.
 */
static inline json_t *ju64(uint64_t v)
{
	return json_integer(v > INT64_MAX ? INT64_MAX : (json_int_t)v);
}

/*
 * A string from a fixed-size field of `cap` bytes. Names come from the
 * application and the system (host names, communicator descriptions,
 * symbols) and JSON needs UTF-8, so bytes that are not valid UTF-8 are
 * written as '?' rather than losing the whole dump.
 */
json_t *dump_jstrn(const char *s, size_t cap);

/* A string from an array field (a pointer does not compile), or one from a
 * NUL-terminated string (an operation's strings). */
#define JSTR(field)                                                            \
	dump_jstrn((field), sizeof(field) + 0 * sizeof(char[1 - 2 * __builtin_types_compatible_p( \
						      __typeof__(field), __typeof__(&(field)[0]))]))
#define JSTRZ(s) dump_jstrn((s), SIZE_MAX)

/*
 * json_object_set_new() and json_array_append_new() take ownership of the
 * value even when they fail, and fail when given NULL, so the results of a
 * series of them can be or-ed together and checked once.
 */
static inline int set(json_t *obj, const char *key, json_t *v)
{
	return json_object_set_new(obj, key, v) ? -1 : 0;
}

static inline int append(json_t *arr, json_t *v)
{
	return json_array_append_new(arr, v) ? -1 : 0;
}

/*
 * A communicator's members. A view that knows only its size writes none;
 * one that knows some (an NCCL rank knows its own) writes -1 for the rest.
 */
json_t *dump_members_json(const struct fr_comm *c);

/* A communicator's pg_config entry in a dump. */
json_t *dump_pg_config_json(const struct fr_comm *c);

/*
 * The dump document of `t`, with its threads or without. A manifest reuses
 * it for its views, whose pg_config entries `comm` writes (called with the
 * entry's key, the communicator's id made UTF-8); NULL writes each as a
 * dump does. Returns a new reference, NULL when out of memory.
 */
struct dump_comm_writer {
	json_t *(*comm)(void *arg, const char *key, const struct fr_comm *c);
	void *arg;
};

json_t *dump_trace_json(const struct fr_trace *t, bool with_threads,
			const struct dump_comm_writer *w);

#endif
