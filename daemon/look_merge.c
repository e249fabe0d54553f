/* Merging the nodes' classes of stacks (look_merge.h). */
#include "look_merge.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The frames a class is compared by: from `start`, at most LOOK_MERGE_FRAMES. */
static uint32_t compared(const struct fr_node_look_class *c)
{
	uint32_t n = c->nframes - c->start;

	return c->nframes ? (n < LOOK_MERGE_FRAMES ? n : LOOK_MERGE_FRAMES) : 0;
}

/* A class being merged, with its Python frames as fr_pyframes_cmp() reads them. */
struct sorted_class {
	struct look_merge_in in;
	const struct fr_pyframe *py;    /* borrowed from the class; NULL when it has none */
	uint32_t npy;
};

/*
 * A total order in which classes of one stack are adjacent, by node within:
 * classes with Python frames first, by those; the others by thread name
 * and native frames.
 */
static int cmp_class(const void *a, const void *b)
{
	const struct sorted_class *x = a, *y = b;
	const struct fr_node_look_class *p = x->in.c, *q = y->in.c;
	uint32_t np = compared(p), nq = compared(q);
	int d;

	if (!x->py != !y->py)
		return x->py ? -1 : 1;
	if (x->py) {
		d = fr_pyframes_cmp(x->py, x->npy, y->py, y->npy);
		return d ? d : (x->in.node > y->in.node) - (x->in.node < y->in.node);
	}
	d = strcmp(p->thread, q->thread);
	if (d)
		return d;
	if (np != nq)
		return np < nq ? -1 : 1;
	for (uint32_t i = 0; i < np; i++) {
		d = strcmp(p->frames[p->start + i].name, q->frames[q->start + i].name);
		if (d)
			return d;
	}
	return (x->in.node > y->in.node) - (x->in.node < y->in.node);
}

static int cmp_range(const void *a, const void *b)
{
	const struct fr_node_range *x = a, *y = b;

	return (x->first > y->first) - (x->first < y->first);
}

static int cmp_group(const void *a, const void *b)
{
	const struct look_merge_group *x = a, *y = b;

	if (x->nranks != y->nranks)
		return x->nranks > y->nranks ? -1 : 1;
	return (x->ranges[0].first > y->ranges[0].first) - (x->ranges[0].first < y->ranges[0].first);
}

static int same_stack(const struct sorted_class *a, const struct sorted_class *b)
{
	struct sorted_class x = *a, y = *b;

	x.in.node = y.in.node = 0;
	return cmp_class(&x, &y) == 0;
}

void look_merged_free(struct look_merged *m)
{
	free(m->groups);
	free(m->ranges);
	memset(m, 0, sizeof(*m));
}

void look_class_pyframes(const struct fr_node_look_class *c, struct fr_pyframe *out)
{
	for (uint32_t k = 0; k < c->npyframes; k++)
		out[k] = (struct fr_pyframe){ .function = c->pyframes[k].function,
					      .file = c->pyframes[k].file,
					      .line = c->pyframes[k].line };
}

int look_merge(const struct look_merge_in *in, size_t n, struct look_merged *out)
{
	struct sorted_class *sorted = malloc((n ? n : 1) * sizeof(*sorted));
	struct fr_pyframe *py = NULL;
	size_t total = 0, npy = 0;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < n; i++) {
		total += in[i].c->nranges;
		npy += in[i].c->npyframes;
	}
	out->groups = malloc((n ? n : 1) * sizeof(*out->groups));
	out->ranges = malloc((total ? total : 1) * sizeof(*out->ranges));
	py = malloc((npy ? npy : 1) * sizeof(*py));
	if (!sorted || !out->groups || !out->ranges || !py) {
		free(sorted);
		free(py);
		look_merged_free(out);
		return -ENOMEM;
	}
	/* The wire's Python frames as dumps/ compares them: the same strings. */
	npy = 0;
	for (size_t i = 0; i < n; i++) {
		const struct fr_node_look_class *c = in[i].c;

		sorted[i] = (struct sorted_class){ in[i], c->npyframes ? py + npy : NULL,
						   c->npyframes };
		look_class_pyframes(c, py + npy);
		npy += c->npyframes;
	}
	qsort(sorted, n, sizeof(*sorted), cmp_class);
	for (size_t i = 0; i < n;) {
		struct look_merge_group *g = &out->groups[out->ngroups++];
		struct fr_node_range *r = out->ranges + out->nranges;
		size_t j = i, nr = 0, kept = 0;

		g->rep = sorted[i].in.c;
		g->nnodes = 0;
		for (; j < n && same_stack(&sorted[j], &sorted[i]); j++) {
			const struct fr_node_look_class *c = sorted[j].in.c;

			if (j == i || sorted[j].in.node != sorted[j - 1].in.node)
				g->nnodes++;
			if (c->ranges[0].first < g->rep->ranges[0].first)
				g->rep = c;
			memcpy(r + nr, c->ranges, c->nranges * sizeof(*r));
			nr += c->nranges;
		}
		/* Union: sorted, then runs that touch or overlap become one. */
		qsort(r, nr, sizeof(*r), cmp_range);
		g->nranks = 0;
		for (size_t k = 0; k < nr; k++) {
			uint64_t end = (uint64_t)r[k].first + r[k].count;

			if (kept) {
				struct fr_node_range *last = &r[kept - 1];
				uint64_t last_end = (uint64_t)last->first + last->count;

				if (r[k].first <= last_end) {
					if (end > last_end)
						last->count = (uint32_t)(end - last->first);
					continue;
				}
			}
			r[kept++] = r[k];
		}
		for (size_t k = 0; k < kept; k++)
			g->nranks += r[k].count;
		g->ranges = r;
		g->nranges = kept;
		out->nranges += kept;
		i = j;
	}
	qsort(out->groups, out->ngroups, sizeof(*out->groups), cmp_group);
	free(sorted);
	free(py);
	return 0;
}

size_t look_merge_gaps(const struct look_merged *m, uint32_t world, struct fr_node_range *gaps)
{
	struct fr_node_range *r = malloc((m->nranges ? m->nranges : 1) * sizeof(*r));
	size_t ngaps = 0;
	uint64_t next = 0;

	/* Without room to sort, the whole world reads missing: never less. */
	if (!r) {
		if (world)
			gaps[ngaps++] = (struct fr_node_range){ 0, world };
		return ngaps;
	}
	memcpy(r, m->ranges, m->nranges * sizeof(*r));
	qsort(r, m->nranges, sizeof(*r), cmp_range);
	for (size_t i = 0; i <= m->nranges; i++) {
		uint64_t first = i < m->nranges ? r[i].first : world;

		if (first > world)
			first = world;
		if (first > next)
			gaps[ngaps++] = (struct fr_node_range){ (uint32_t)next,
								(uint32_t)(first - next) };
		if (i < m->nranges && (uint64_t)r[i].first + r[i].count > next)
			next = (uint64_t)r[i].first + r[i].count;
	}
	free(r);
	return ngaps;
}
