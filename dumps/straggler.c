/*
 * Stragglers: ranks consistently late entering the collectives of one
 * communicator, in a job that does not hang. Information, not a fault.
 */
#include "correlate_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A straggler is judged on at least this many collectives... */
#define STRAGGLER_MIN_MATCHED 8
/* ... and, when last, entered at least this long after the next-latest
 * member (median): less is scheduling noise, not a slow rank. */
#define STRAGGLER_MIN_LATE_NS 1000000ull
/* ... and at least this many times as late as the last member of the
 * collectives where another member was last (median). */
#define STRAGGLER_RATIO 2

/* A matched collective: who entered it last, and how long after the next-latest member. */
struct late {
	uint32_t ci;
	uint32_t rank;
	uint64_t lead;
};

static int cmp_late(const void *a, const void *b)
{
	const struct late *x = a;
	const struct late *y = b;

	if (x->ci != y->ci)
		return x->ci < y->ci ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return (x->lead > y->lead) - (x->lead < y->lead);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a;
	uint64_t y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static int cmp_straggler(const void *a, const void *b)
{
	const struct fr_straggler *x = a;
	const struct fr_straggler *y = b;

	if (x->median_late_s != y->median_late_s)
		return x->median_late_s > y->median_late_s ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return strcmp(x->comm, y->comm);
}

/*
 * The median of the leads of late[lo, hi) outside [skip_lo, skip_hi), NONE
 * as UINT64_MAX when there are none; `tmp` holds hi - lo values.
 */
static uint64_t median_lead_outside(const struct late *late, size_t lo, size_t hi,
				   size_t skip_lo, size_t skip_hi, uint64_t *tmp)
{
	size_t n = 0;

	for (size_t i = lo; i < hi; i++)
		if (i < skip_lo || i >= skip_hi)
			tmp[n++] = late[i].lead;
	if (!n)
		return UINT64_MAX;
	qsort(tmp, n, sizeof(*tmp), cmp_u64);
	return tmp[(n - 1) / 2];
}

/*
 * Ranks consistently late entering the collectives of a communicator. The
 * collectives judged are those every member entered with an entry time
 * kept (every member's entry in its window, no member unknown). A member
 * is a straggler when, over at least STRAGGLER_MIN_MATCHED of them, it
 * entered last in at least half (three quarters in a communicator of two,
 * where one of the two is always last), its lead over the next-latest
 * member when last has a median of at least STRAGGLER_MIN_LATE_NS, and
 * that median is at least STRAGGLER_RATIO times the median lead of the
 * last member of the others. Several members equally late share the last
 * place and none is named.
 */
int fr_corr_find_stragglers(const struct ctx *cx, struct fr_verdict *v)
{
	struct late *late = malloc((cx->ngroups ? cx->ngroups : 1) * sizeof(*late));
	uint64_t *tmp = malloc((cx->ngroups ? cx->ngroups : 1) * sizeof(*tmp));
	size_t n = 0;
	size_t cap = 0;
	int rc = -ENOMEM;

	if (!late || !tmp)
		goto out_free;
	for (size_t i = 0; i < cx->ngroups; i++) {
		const struct group *g = &cx->groups[i];
		const struct cinfo *c = &cx->comms[g->comm];

		if (g->untimed || c->n < 2 || c->nunknown || c->nextra || g->count != c->n)
			continue;
		late[n++] = (struct late){ g->comm, g->last_rank, g->key_last - g->key_second };
	}
	qsort(late, n, sizeof(*late), cmp_late);
	for (size_t i = 0, j; i < n; i = j) {
		const struct cinfo *c = &cx->comms[late[i].ci];
		size_t m;

		for (j = i; j < n && late[j].ci == late[i].ci; j++)
			;
		m = j - i;
		if (m < STRAGGLER_MIN_MATCHED)
			continue;
		for (size_t a = i, b; a < j; a = b) {
			struct fr_straggler *st;
			uint64_t med, others;
			size_t cnt;

			for (b = a; b < j && late[b].rank == late[a].rank; b++)
				;
			cnt = b - a;
			if (cnt * 2 < m || (c->n == 2 && cnt * 4 < 3 * m))
				continue;
			med = late[a + (cnt - 1) / 2].lead;
			if (med < STRAGGLER_MIN_LATE_NS)
				continue;
			others = median_lead_outside(late, i, j, a, b, tmp);
			if (others != UINT64_MAX && med / STRAGGLER_RATIO < others)
				continue;
			if (grow_array((void **)&v->stragglers, &cap, v->nstragglers + 1,
				       sizeof(*st)) < 0)
				goto out_free;
			st = &v->stragglers[v->nstragglers++];
			memset(st, 0, sizeof(*st));
			st->rank = late[a].rank;
			snprintf(st->comm, sizeof(st->comm), "%s", c->id);
			st->late_count = (uint32_t)cnt;
			st->matched = (uint32_t)m;
			st->median_late_s = ns_to_s(med);
		}
	}
	if (v->nstragglers)
		qsort(v->stragglers, v->nstragglers, sizeof(*v->stragglers), cmp_straggler);
	rc = 0;
out_free:
	free(late);
	free(tmp);
	return rc;
}

/* "12.3 ms", "1.25 s" */
static void late_text(char *buf, size_t cap, double s)
{
	if (s < 1)
		snprintf(buf, cap, "%.1f ms", s * 1e3);
	else
		snprintf(buf, cap, "%.2f s", s);
}

/* "rank 5 entered last in 93 of 100 collectives on world, by 12.3 ms (median)" */
void fr_corr_straggler_text(char *buf, size_t cap, const struct fr_straggler *st)
{
	char d[32];

	late_text(d, sizeof(d), st->median_late_s);
	snprintf(buf, cap, "rank %" PRIu32 " entered last in %" PRIu32 " of %" PRIu32
		 " collectives on %s, by %s (median)", st->rank, st->late_count, st->matched,
		 st->comm, d);
}
