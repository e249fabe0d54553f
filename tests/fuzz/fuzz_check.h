/*
 * Checks shared by the fuzz targets that read documents and traces
 * (fuzz_dump, fuzz_pytorch, fuzz_manifest): the shape value.h promises of
 * a parsed tree, comparing two traces field by field, and writing a trace
 * out and reading it back.
 *
 * A broken check aborts with a line naming the target, the check and the
 * field, so that libFuzzer saves the input and the runner shows the line.
 */
#ifndef FR_FUZZ_CHECK_H
#define FR_FUZZ_CHECK_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"
#include "trace.h"
#include "value.h"

#define FUZZ_CHECK(cond)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "fuzz: %s:%d: check failed: %s\n", __FILE__,       \
				__LINE__, #cond);                                          \
			abort();                                                           \
		}                                                                          \
	} while (0)

/* Aborts with `what` and the field at which two traces differ. */
#define FUZZ_SAME_TRACE(what, a, b)                                                        \
	do {                                                                               \
		const char *field_ = fuzz_trace_diff((a), (b));                            \
		if (field_) {                                                              \
			fprintf(stderr, "fuzz: %s:%d: %s: traces differ at %s\n", __FILE__, \
				__LINE__, (what), field_);                                 \
			abort();                                                           \
		}                                                                          \
	} while (0)

/*
 * Whether s[0..n) is UTF-8 as RFC 3629 has it: shortest forms only, no
 * surrogates, nothing past U+10FFFF.
 */
static inline bool fuzz_utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned char c = s[i];
		uint32_t cp, min;
		size_t len;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			len = 2, cp = c & 0x1f, min = 0x80;
		} else if (c >= 0xe0 && c <= 0xef) {
			len = 3, cp = c & 0x0f, min = 0x800;
		} else if (c >= 0xf0 && c <= 0xf4) {
			len = 4, cp = c & 0x07, min = 0x10000;
		} else {
			return false;
		}
		if (n - i < len)
			return false;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += len;
	}
	return true;
}

/*
 * Checks what value.h promises of a document's tree: strings of n bytes of
 * UTF-8 with their NUL and no other, objects whose keys are strings, items
 * that are values, nesting no deeper than FR_VAL_DEPTH_MAX (the top value
 * at depth 0). Shared values are walked once per place; the readers bound
 * the places a tree may have, so this stays linear in the input.
 */
static inline void fuzz_check_tree(const struct fr_val *v, int depth)
{
	FUZZ_CHECK(v);
	FUZZ_CHECK(depth <= FR_VAL_DEPTH_MAX);
	switch (v->type) {
	case FR_VAL_NULL:
	case FR_VAL_BOOL:
	case FR_VAL_INT:
	case FR_VAL_REAL:
		break;
	case FR_VAL_STRING:
		FUZZ_CHECK(v->u.s);
		FUZZ_CHECK(strlen(v->u.s) == v->n);
		FUZZ_CHECK(fuzz_utf8_valid((const unsigned char *)v->u.s, v->n));
		break;
	case FR_VAL_ARRAY:
		FUZZ_CHECK(!v->n || v->u.items);
		for (uint32_t i = 0; i < v->n; i++)
			fuzz_check_tree(v->u.items[i], depth + 1);
		break;
	case FR_VAL_OBJECT:
		FUZZ_CHECK(!v->n || v->u.items);
		for (uint32_t i = 0; i < v->n; i++) {
			FUZZ_CHECK(fr_val_is(v->u.items[2 * i], FR_VAL_STRING));
			fuzz_check_tree(v->u.items[2 * i], depth + 1);
			fuzz_check_tree(v->u.items[2 * i + 1], depth + 1);
		}
		break;
	default:
		FUZZ_CHECK(!"a value of no known type");
	}
}

static inline bool fuzz_same_str(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

/*
 * The first field in which two traces differ, as "ops[3].seq", or NULL when
 * they hold the same evidence. The message is in a static buffer.
 */
static inline const char *fuzz_trace_diff(const struct fr_trace *a, const struct fr_trace *b)
{
	static char where[128];

#define DIFF(cond, ...)                                                    \
	do {                                                               \
		if (cond) {                                                \
			snprintf(where, sizeof(where), __VA_ARGS__);       \
			return where;                                      \
		}                                                          \
	} while (0)

	DIFF(a->status != b->status, "status");
	DIFF(strcmp(a->job, b->job), "job");
	DIFF(a->rank != b->rank, "rank");
	DIFF(a->world_size != b->world_size, "world_size");
	DIFF(strcmp(a->host, b->host), "host");
	DIFF(a->pid != b->pid, "pid");
	DIFF(strcmp(a->comm_lib, b->comm_lib), "comm_lib");
	DIFF(strcmp(a->incident, b->incident), "incident");
	DIFF(strcmp(a->reason, b->reason), "reason");
	DIFF(a->time_ns != b->time_ns, "time_ns");
	DIFF(a->dropped != b->dropped, "dropped");

	DIFF(a->ncomms != b->ncomms, "ncomms (%zu vs %zu)", a->ncomms, b->ncomms);
	for (size_t i = 0; i < a->ncomms; i++) {
		const struct fr_comm *x = &a->comms[i], *y = &b->comms[i];

		DIFF(strcmp(x->id, y->id), "comms[%zu].id", i);
		DIFF(strcmp(x->desc, y->desc), "comms[%zu].desc", i);
		DIFF(x->rank != y->rank, "comms[%zu].rank", i);
		DIFF(x->size != y->size, "comms[%zu].size", i);
		DIFF(!x->members != !y->members, "comms[%zu].members", i);
		for (uint32_t j = 0; x->members && j < x->size; j++)
			DIFF(x->members[j] != y->members[j], "comms[%zu].members[%u]", i, j);
		DIFF(x->last_entered != y->last_entered, "comms[%zu].last_entered", i);
		DIFF(x->last_completed != y->last_completed, "comms[%zu].last_completed", i);
	}

	DIFF(a->nops != b->nops, "nops (%zu vs %zu)", a->nops, b->nops);
	for (size_t i = 0; i < a->nops; i++) {
		const struct fr_op *x = &a->ops[i], *y = &b->ops[i];

		DIFF(x->record_id != y->record_id, "ops[%zu].record_id", i);
		DIFF(strcmp(x->comm, y->comm), "ops[%zu].comm", i);
		DIFF(x->type != y->type, "ops[%zu].type", i);
		DIFF(x->state != y->state, "ops[%zu].state", i);
		DIFF(x->is_p2p != y->is_p2p, "ops[%zu].is_p2p", i);
		DIFF(x->nonblocking != y->nonblocking, "ops[%zu].nonblocking", i);
		DIFF(x->waited != y->waited, "ops[%zu].waited", i);
		DIFF(x->gpu != y->gpu, "ops[%zu].gpu", i);
		DIFF(x->started != y->started, "ops[%zu].started", i);
		DIFF(x->captured != y->captured, "ops[%zu].captured", i);
		DIFF(x->seq != y->seq, "ops[%zu].seq", i);
		DIFF(x->peer != y->peer, "ops[%zu].peer", i);
		DIFF(x->root != y->root, "ops[%zu].root", i);
		DIFF(x->peer_in_comm != y->peer_in_comm, "ops[%zu].peer_in_comm", i);
		DIFF(x->count != y->count, "ops[%zu].count", i);
		DIFF(x->size_ratio != y->size_ratio, "ops[%zu].size_ratio", i);
		DIFF(x->bytes != y->bytes, "ops[%zu].bytes (%llu vs %llu)", i,
		     (unsigned long long)x->bytes, (unsigned long long)y->bytes);
		DIFF(strcmp(x->dtype, y->dtype), "ops[%zu].dtype", i);
		DIFF(strcmp(x->redop, y->redop), "ops[%zu].redop", i);
		DIFF(x->t_entered_ns != y->t_entered_ns, "ops[%zu].t_entered_ns", i);
		DIFF(x->t_started_ns != y->t_started_ns, "ops[%zu].t_started_ns", i);
		DIFF(x->t_completed_ns != y->t_completed_ns, "ops[%zu].t_completed_ns", i);
	}

	DIFF(a->nthreads != b->nthreads, "nthreads (%zu vs %zu)", a->nthreads, b->nthreads);
	for (size_t i = 0; i < a->nthreads; i++) {
		const struct fr_thread *x = &a->threads[i], *y = &b->threads[i];

		DIFF(x->tid != y->tid, "threads[%zu].tid", i);
		DIFF(strcmp(x->name, y->name), "threads[%zu].name", i);
		DIFF(x->current != y->current, "threads[%zu].current", i);
		DIFF(x->nframes != y->nframes, "threads[%zu].nframes", i);
		for (size_t j = 0; j < x->nframes; j++) {
			const struct fr_frame *f = &x->frames[j], *g = &y->frames[j];

			DIFF(!fuzz_same_str(f->name, g->name), "threads[%zu].frames[%zu].name", i, j);
			DIFF(f->offset != g->offset, "threads[%zu].frames[%zu].offset", i, j);
			DIFF(f->ip != g->ip, "threads[%zu].frames[%zu].ip", i, j);
		}
	}
#undef DIFF
	return NULL;
}

/*
 * Writes `t` out as a dump (fr_dump_serialize, what the agent and the
 * daemon write) and reads it back with fr_dump_parse, which must accept it
 * and find the same evidence: what our reader accepted, our writer must
 * write in a form our reader accepts again. Out of memory passes.
 */
static inline void fuzz_roundtrip(const char *what, const struct fr_trace *t)
{
	struct fr_trace back;
	char err[512];
	char *text = NULL;
	size_t len = 0;
	int rc;

	rc = fr_dump_serialize(t, &text, &len);
	if (rc == -ENOMEM)
		return;
	FUZZ_CHECK(rc == 0 && text);
	rc = fr_dump_parse(text, len, "roundtrip", &back, err, sizeof(err));
	if (rc && rc != -ENOMEM) {
		fprintf(stderr, "fuzz: %s: the dump written from an accepted trace is refused: %s\n",
			what, err);
		fprintf(stderr, "fuzz: the dump written: %.2000s\n", text);
		abort();
	}
	free(text);
	if (rc)
		return;
	FUZZ_SAME_TRACE(what, t, &back);
	fr_trace_free(&back);
}

#endif
