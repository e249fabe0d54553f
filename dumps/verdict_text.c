/*
 * Rank ranges, durations and operations in words, for the verdicts'
 * summaries and the report.
 */
#include "correlate_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends what fits of `s` at *len, keeping buf NUL-terminated. */
static void put(char *buf, size_t cap, size_t *len, const char *s)
{
	size_t n = strlen(s);

	if (cap && *len < cap - 1) {
		size_t room = cap - 1 - *len;
		size_t k = n < room ? n : room;

		memcpy(buf + *len, s, k);
		buf[*len + k] = '\0';
	}
	*len += n;
}

size_t fr_format_ranks(char *buf, size_t cap, const uint32_t *ranks, size_t n)
{
	size_t len = 0;
	size_t i = 0;
	char num[32];

	if (cap)
		buf[0] = '\0';
	while (i < n) {
		uint32_t first = ranks[i];
		uint32_t last = first;

		/* Duplicates fold into the run; only +1 steps extend it. */
		for (i++; i < n && (ranks[i] == last || ranks[i] == last + 1); i++)
			last = ranks[i];
		if (len)
			put(buf, cap, &len, ",");
		if (first == last)
			snprintf(num, sizeof(num), "%" PRIu32, first);
		else
			snprintf(num, sizeof(num), "%" PRIu32 "-%" PRIu32, first, last);
		put(buf, cap, &len, num);
	}
	return len;
}

/*
 * Rank ranges for a person: when they do not fit, cut at a comma and end with
 * ",..." rather than leave half a number. Returns buf.
 */
const char *fr_corr_ranks_text(char *buf, size_t cap, const uint32_t *ranks, size_t n)
{
	size_t need = fr_format_ranks(buf, cap, ranks, n);

	if (need >= cap && cap > 8) {
		char *comma;

		buf[cap - 5] = '\0';
		comma = strrchr(buf, ',');
		if (comma)
			*comma = '\0';
		strcat(buf, ",...");
	}
	return buf;
}

int fr_corr_cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a;
	uint32_t y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Like fr_corr_ranks_text() for a communicator's members (in any order, some of
 * them FR_RANK_UNKNOWN): the known ones as ranges, then how many are
 * unknown, "0-1,3; 1 of 4 unknown".
 */
const char *fr_corr_members_text(char *buf, size_t cap, const uint32_t *ranks, size_t n)
{
	uint32_t *sorted = n ? malloc(n * sizeof(*sorted)) : NULL;
	size_t known = 0;
	char tail[64] = "";

	if (!sorted) {
		/* Out of memory (or no members) only costs the list. */
		if (n)
			snprintf(buf, cap, "%zu members", n);
		else if (cap)
			buf[0] = '\0';
		return buf;
	}
	for (size_t i = 0; i < n; i++)
		if (ranks[i] != FR_RANK_UNKNOWN)
			sorted[known++] = ranks[i];
	if (known < n)
		snprintf(tail, sizeof(tail), "%s%zu of %zu unknown", known ? "; " : "", n - known,
			 n);
	qsort(sorted, known, sizeof(*sorted), fr_corr_cmp_u32);
	/* Leave room for the count of unknown members: it must not be cut. */
	fr_corr_ranks_text(buf, cap > strlen(tail) + 9 ? cap - strlen(tail) : cap, sorted, known);
	if (strlen(buf) + strlen(tail) < cap)
		strcat(buf, tail);
	free(sorted);
	return buf;
}

__attribute__((format(printf, 2, 3)))
void fr_corr_line_add(struct line *l, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (l->len >= l->cap - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(l->buf + l->len, l->cap - l->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	l->len += (size_t)n;
	if (l->len > l->cap - 1)
		l->len = l->cap - 1;
}

void fr_corr_duration_text(char *buf, size_t cap, double s)
{
	if (s < 10)
		snprintf(buf, cap, "%.1f s", s);
	else
		snprintf(buf, cap, "%.0f s", s);
}

/*
 * "all_reduce #11", "send #4 to rank 3", "recv #2 from any rank",
 * "send #4 to an unknown rank (communicator rank 1)".
 */
void fr_corr_op_head(char *buf, size_t cap, const struct fr_op *op)
{
	const char *name = fr_op_name(op->type);
	const char *dir = op->type == FR_OP_SEND ? "to" : op->type == FR_OP_RECV ? "from" : "with";

	if (!is_p2p(op)) {
		snprintf(buf, cap, "%s #%" PRIu64, name, op->seq);
		return;
	}
	if (peer_unnamed(op))
		snprintf(buf, cap, "%s #%" PRIu64 " %s an unknown rank (communicator rank %" PRId32
			 ")", name, op->seq, dir, op->peer_in_comm);
	else if (op->peer < 0)
		snprintf(buf, cap, "%s #%" PRIu64 " %s any rank", name, op->seq,
			 op->type == FR_OP_SEND ? "to" : "from");
	else
		snprintf(buf, cap, "%s #%" PRIu64 " %s rank %" PRId32, name, op->seq, dir,
			 op->peer);
}

/* "count 1, double, root 0, sum": what a signature comparison looks at. */
void fr_corr_op_details(char *buf, size_t cap, const struct fr_op *op)
{
	struct line l = { buf, cap, 0 };

	buf[0] = '\0';
	fr_corr_line_add(&l, "count %" PRIu64 ", %s", op->count, op->dtype[0] ? op->dtype : "?");
	if (op->root >= 0)
		fr_corr_line_add(&l, ", root %" PRId32, op->root);
	else if (!is_p2p(op) && fr_op_is_rooted(op->type) && op->peer_in_comm >= 0)
		fr_corr_line_add(&l, ", root: communicator rank %" PRId32 " (global rank unknown)",
				 op->peer_in_comm);
	if (op->redop[0])
		fr_corr_line_add(&l, ", %s", op->redop);
	if (op->size_ratio == FR_SIZE_RATIO_UNEVEN)
		fr_corr_line_add(&l, op->type == FR_OP_ALL_GATHER ?
				     ", output not a whole multiple of input" :
				     ", input not a whole multiple of output");
	else if (op->size_ratio)
		fr_corr_line_add(&l, op->type == FR_OP_ALL_GATHER ? ", output %" PRIu32 "x input" :
							    ", input %" PRIu32 "x output",
				 op->size_ratio);
}
