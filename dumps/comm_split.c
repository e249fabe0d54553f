/*
 * Communicators that share an id, not their members: PyTorch's split_group
 * names each color's group alike, so before correlating, fr-analyze gives
 * each group its own id (fr_traces_split_comms()).
 */
#include "correlate_int.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../protocol/hash.h"
#include "ids.h"

/* One rank's member list of a communicator; `set` hashes its members as a
 * set (in any order), 0 for a list with members not known. */
struct comm_use {
	struct fr_trace *t;
	struct fr_comm *c;
	uint64_t set;
	const char *id;        /* c's */
	uint32_t id_rank;      /* fr_ids_rank() */
};

/*
 * A hash of a complete member list as a set: a sum of mixed members, so
 * that one group listed in two orders hashes alike (a list in another
 * order is the engine's to merge and warn of, not another group). Lists
 * of one size whose hashes agree count as the same group. 0 when a member
 * is not known.
 */
static uint64_t members_set(const struct fr_comm *c)
{
	uint64_t h = mix64(c->size);

	if (!c->size || !c->members)
		return 0;
	for (uint32_t k = 0; k < c->size; k++) {
		if (c->members[k] == FR_RANK_UNKNOWN)
			return 0;
		h += mix64(UINT64_C(0x9e3779b97f4a7c15) + c->members[k]);
	}
	return h ? h : 1;
}

/* members_set() of a list hashed before (a manifest lends all its views
 * one list per communicator), else hashed now. */
static uint64_t lists_set(struct fr_lists *hashed, const struct fr_comm *c)
{
	uint64_t *val;
	int seen = fr_lists_find(hashed, c, &val);

	if (seen < 0)
		return members_set(c);
	if (!seen)
		*val = members_set(c);
	return *val;
}

/* By id, then complete lists by size and set, then the incomplete ones. */
static int cmp_comm_use(const void *x, const void *y)
{
	const struct comm_use *a = x, *b = y;

	if (a->id_rank != b->id_rank)
		return a->id_rank < b->id_rank ? -1 : 1;
	if (!a->set != !b->set)
		return a->set ? -1 : 1;
	if (a->c->size != b->c->size)
		return a->c->size < b->c->size ? -1 : 1;
	return a->set < b->set ? -1 : a->set > b->set;
}

static bool same_group(const struct comm_use *a, const struct comm_use *b)
{
	return a->set && a->set == b->set && a->c->size == b->c->size;
}

/* Whether an incomplete list `part` fits complete list `full`: every
 * member it knows at the place `full` has it. */
static bool list_fits(const struct fr_comm *part, const struct fr_comm *full)
{
	if (part->size != full->size || !part->members)
		return false;
	for (uint32_t k = 0; k < part->size; k++)
		if (part->members[k] != FR_RANK_UNKNOWN && part->members[k] != full->members[k])
			return false;
	return true;
}

/* Every id any trace had (copies, sorted) and every one given, to keep a
 * new id from taking one. */
struct id_set {
	char (*ids)[FR_COMM_ID_MAX + 1];
	size_t n;
	char (*added)[FR_COMM_ID_MAX + 1];
	size_t nadded, cap;
};

static int cmp_id(const void *a, const void *b)
{
	return strcmp(a, b);
}

static bool id_taken(const struct id_set *ids, const char *id)
{
	if (bsearch(id, ids->ids, ids->n, sizeof(*ids->ids), cmp_id))
		return true;
	for (size_t i = 0; i < ids->nadded; i++)
		if (strcmp(ids->added[i], id) == 0)
			return true;
	return false;
}

static int id_add(struct id_set *ids, const char *id)
{
	if (fr_grow((void **)&ids->added, &ids->cap, ids->nadded + 1, sizeof(*ids->added), 8) < 0)
		return -ENOMEM;
	snprintf(ids->added[ids->nadded++], FR_COMM_ID_MAX + 1, "%s", id);
	return 0;
}

/*
 * A new id for group `c` of id `c->id`: "ID:RANKS", else (too long, or
 * taken) "ID:#HASH" of the id and the set. Returns 0, 1 when both are
 * taken, or -ENOMEM.
 */
static int split_id(const struct fr_comm *c, uint64_t set, const struct id_set *ids,
		    char out[FR_COMM_ID_MAX + 1])
{
	uint32_t *sorted = malloc(c->size * sizeof(*sorted));
	char ranks[FR_COMM_ID_MAX + 1];
	size_t n = strlen(c->id), need;
	uint64_t h;

	if (!sorted)
		return -ENOMEM;
	memcpy(sorted, c->members, c->size * sizeof(*sorted));
	qsort(sorted, c->size, sizeof(*sorted), fr_corr_cmp_u32);
	need = fr_format_ranks(ranks, sizeof(ranks), sorted, c->size);
	free(sorted);
	if (n + 1 + need <= FR_COMM_ID_MAX) {
		memcpy(out, c->id, n);
		out[n] = ':';
		memcpy(out + n + 1, ranks, need + 1);
		if (!id_taken(ids, out))
			return 0;
	}
	h = fr_fnv1a(FR_FNV_INIT, c->id, n) ^ set;
	snprintf(out, FR_COMM_ID_MAX + 1, "%.*s:#%016" PRIx64, FR_COMM_ID_MAX - 18, c->id, h);
	return id_taken(ids, out) ? 1 : 0;
}

/* Renames communicator `c` of trace `t` to `id`, in its operations too. */
static int rename_comm(struct fr_trace *t, struct fr_comm *c, const char *id)
{
	const char *to = fr_trace_str(t, id);
	char from[FR_COMM_ID_MAX + 1];

	if (!to)
		return -ENOMEM;
	memcpy(from, c->id, sizeof(from));
	for (size_t i = 0; i < t->nops; i++)
		if (same_str(t->ops[i].comm, from))
			t->ops[i].comm = to;
	snprintf(c->id, sizeof(c->id), "%s", id);
	return 0;
}

/*
 * Splits the uses [i, j) of one id, complete lists first (sorted into
 * groups) and `npart` incomplete ones last: each group gets a new id, and
 * each incomplete list that of the one group it fits. Returns 1 when the
 * id is left alone (an incomplete list fits no group or several, or no
 * free id), 0 once renamed (the note in `line`), or -ENOMEM.
 */
static int split_one(struct comm_use *u, size_t n, size_t npart, struct id_set *ids,
		     char *line, size_t cap, size_t len)
{
	size_t nfull = n - npart;
	size_t *group = malloc(n * sizeof(*group));
	char (*to)[FR_COMM_ID_MAX + 1] = malloc(n * sizeof(*to));
	int rc = -ENOMEM;

	if (!group || !to)
		goto out_free;
	for (size_t k = 0; k < nfull; k++) {
		if (k && same_group(&u[k - 1], &u[k])) {
			group[k] = group[k - 1];
			continue;
		}
		group[k] = k;
	}
	rc = 1;
	for (size_t k = nfull; k < n; k++) {
		size_t fits = 0;

		for (size_t g = 0; g < nfull; g++)
			if (group[g] == g && list_fits(u[k].c, u[g].c)) {
				group[k] = g;
				fits++;
			}
		if (fits != 1)
			goto out_free;
	}
	for (size_t k = 0; k < nfull; k++) {
		if (group[k] != k)
			continue;
		if ((rc = split_id(u[k].c, u[k].set, ids, to[k])) ||
		    (rc = id_add(ids, to[k])))
			goto out_free;
		len += (size_t)snprintf(line + (len < cap ? len : cap), len < cap ? cap - len : 0,
					"%s %s", k ? "," : "", to[k]);
	}
	for (size_t k = 0; k < n && !rc; k++)
		rc = rename_comm(u[k].t, u[k].c, to[group[k]]);
out_free:
	free(group);
	free(to);
	return rc;
}

int fr_traces_split_comms(struct fr_trace *const *traces, size_t n, FILE *note,
			  const char *prog)
{
	struct id_set ids = { 0 };
	struct fr_lists hashed = { 0 };
	struct comm_use *uses;
	size_t total = 0;
	int nsplit = 0, rc = 0;

	for (size_t i = 0; i < n; i++)
		total += traces[i]->ncomms;
	if (!total)
		return 0;
	uses = malloc(total * sizeof(*uses));
	ids.ids = malloc(total * sizeof(*ids.ids));
	if (!uses || !ids.ids) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (size_t i = 0, k = 0; i < n; i++) {
		for (size_t j = 0; j < traces[i]->ncomms; j++, k++) {
			struct fr_comm *c = &traces[i]->comms[j];

			uses[k] = (struct comm_use){ traces[i], c, lists_set(&hashed, c), c->id, 0 };
		}
	}
	fr_lists_free(&hashed);
	rc = fr_ids_rank(uses, total, sizeof(*uses), offsetof(struct comm_use, id),
			 offsetof(struct comm_use, id_rank));
	if (rc < 0)
		goto out_free;
	qsort(uses, total, sizeof(*uses), cmp_comm_use);
	for (size_t k = 0; k < total; k++)
		memcpy(ids.ids[k], uses[k].c->id, sizeof(ids.ids[k]));
	ids.n = total;
	for (size_t i = 0, j; i < total && rc >= 0; i = j) {
		char id[FR_COMM_ID_MAX + 1];
		char line[512];
		size_t nfull, len;

		for (j = i + 1; j < total && uses[j].id_rank == uses[i].id_rank; j++)
			;
		for (nfull = 0; i + nfull < j && uses[i + nfull].set; nfull++)
			;
		if (nfull < 2 || same_group(&uses[i], &uses[i + nfull - 1]))
			continue;
		snprintf(id, sizeof(id), "%s", uses[i].c->id);
		len = (size_t)snprintf(line, sizeof(line),
				       "%s: communicator %s names different groups on different "
				       "ranks (PyTorch's split_group names each color's group "
				       "alike); told apart as", prog, id);
		rc = split_one(&uses[i], j - i, j - i - nfull, &ids, line, sizeof(line), len);
		if (rc == 0) {
			nsplit++;
			if (note)
				fprintf(note, "%s\n", line);
		} else if (rc > 0 && note) {
			fprintf(note, "%s: communicator %s names different groups on different "
				"ranks, which cannot be told apart (lists with unknown members "
				"fit several, or none)\n", prog, id);
		}
	}
out_free:
	free(uses);
	free(ids.ids);
	free(ids.added);
	return rc < 0 ? rc : nsplit;
}
