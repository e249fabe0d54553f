#include "trace.h"

#include <stdlib.h>
#include <string.h>

static const char *const rank_status_names[FR_RANK__COUNT] = {
#define FR_RS_NAME(e, n) [FR_RANK_##e] = n,
	FR_RANK_STATUSES(FR_RS_NAME)
#undef FR_RS_NAME
};

const char *fr_rank_status_name(unsigned s)
{
	if (s >= FR_RANK__COUNT)
		return "unknown";
	return rank_status_names[s];
}

int fr_rank_status_from_name(const char *name)
{
	for (unsigned i = 0; i < FR_RANK__COUNT; i++)
		if (strcmp(rank_status_names[i], name) == 0)
			return (int)i;
	return -1;
}

void fr_trace_free(struct fr_trace *t)
{
	for (size_t i = 0; i < t->ncomms; i++)
		free(t->comms[i].members);
	free(t->comms);
	free(t->ops);
	for (size_t i = 0; i < t->nthreads; i++) {
		struct fr_thread *th = &t->threads[i];

		for (size_t j = 0; j < th->nframes; j++)
			free(th->frames[j].name);
		free(th->frames);
	}
	free(t->threads);
	memset(t, 0, sizeof(*t));
}

const struct fr_comm *fr_trace_comm(const struct fr_trace *t, const char *id)
{
	for (size_t i = 0; i < t->ncomms; i++)
		if (strcmp(t->comms[i].id, id) == 0)
			return &t->comms[i];
	return NULL;
}

/*
 * Makes room for one more element of `size` bytes in *arr, which holds `n`
 * of a capacity of *cap, doubling the capacity when full. Returns the new
 * element, zeroed, or NULL (the array untouched) when out of memory.
 */
static void *grow(void **arr, size_t n, size_t *cap, size_t size)
{
	if (n >= *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		void *p;

		if (ncap < n + 1)
			ncap = n + 1;
		if (ncap > SIZE_MAX / size)
			return NULL;
		p = realloc(*arr, ncap * size);
		if (!p)
			return NULL;
		*arr = p;
		*cap = ncap;
	}
	memset((char *)*arr + n * size, 0, size);
	return (char *)*arr + n * size;
}

struct fr_op *fr_trace_add_op(struct fr_trace *t, size_t *cap)
{
	void *arr = t->ops;
	struct fr_op *op = grow(&arr, t->nops, cap, sizeof(*op));

	t->ops = arr;
	if (op) {
		t->nops++;
		/* No peer, root or communicator rank until one is set. */
		op->peer = op->root = op->peer_in_comm = -1;
	}
	return op;
}

struct fr_comm *fr_trace_add_comm(struct fr_trace *t, size_t *cap)
{
	void *arr = t->comms;
	struct fr_comm *c = grow(&arr, t->ncomms, cap, sizeof(*c));

	t->comms = arr;
	if (c)
		t->ncomms++;
	return c;
}
