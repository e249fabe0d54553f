/*
 * Incident manifests (dump.h, format in dumps/FORMAT.md): the daemon
 * writes one per incident, each rank's live view a dump without threads
 * and each communicator once in "communicators"; fr-analyze reads it back
 * with the dump reader's parts (dump_read.h).
 */
#include "dump.h"
#include "dump_read.h"
#include "dump_write.h"
#include "grow.h"
#include "kernel_log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct doc_kind manifest_kind = {
	FR_MANIFEST_FORMAT, "manifest", FR_MANIFEST_VERSION, 1, FR_MANIFEST_VERSION_MAJOR,
};

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

	if (fr_grow((void **)&tab->first, &tab->cap, tab->n + 1, sizeof(*tab->first), 16) < 0)
		return -ENOMEM;
	o = json_object();
	if (!o)
		return -ENOMEM;
	bad |= set(o, "desc", JSTR(c->desc));
	bad |= set(o, "size", json_integer(c->size));
	bad |= set(o, "ranks", dump_members_json(c));
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
static json_t *view_comm_json(void *arg, const char *key, const struct fr_comm *c)
{
	struct table_out *tab = arg;
	json_t *pos = json_object_get(tab->index, key);
	json_t *o;
	int bad = 0;

	if (!pos) {
		/* The table's members are checked against the manifest's world,
		 * a view's own against its world: one from a larger world keeps
		 * its own. */
		for (uint32_t i = 0; c->members && i < c->size; i++)
			if (c->members[i] != FR_RANK_UNKNOWN && c->members[i] >= tab->world_size)
				return dump_pg_config_json(c);
		if (table_add(tab, key, c))
			return NULL;
	} else if (!same_comm(c, tab->first[json_integer_value(pos)])) {
		return dump_pg_config_json(c);
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
json_t *fr_manifest_to_json(const char *job, const char *incident, const char *reason,
			    uint32_t world_size, uint64_t opened_ns, uint64_t closed_ns,
			    const struct fr_trace *const *ranks, size_t nranks, json_t *verdict)
{
	struct table_out tab = { json_object(), json_object(), NULL, 0, 0, world_size };
	struct dump_comm_writer views = { view_comm_json, &tab };
	json_t *root = json_object();
	json_t *arr = json_array();
	int bad = 0;

	if (!root || !arr || !tab.json || !tab.index)
		goto out_free;
	bad |= set(root, "format", json_string(FR_MANIFEST_FORMAT));
	bad |= set(root, "version", json_string(FR_MANIFEST_VERSION));
	bad |= set(root, "job", dump_jstrn(job, FR_JOB_MAX));
	bad |= set(root, "incident", dump_jstrn(incident, FR_INCIDENT_MAX));
	bad |= set(root, "reason", dump_jstrn(reason, FR_REASON_MAX));
	bad |= set(root, "world_size", json_integer(world_size));
	bad |= set(root, "opened_ns", ju64(opened_ns));
	bad |= set(root, "closed_ns", ju64(closed_ns));
	/* The table goes first, so that a reader meets it before the views;
	 * it fills as the views are written. */
	bad |= set(root, "communicators", json_incref(tab.json));
	for (size_t i = 0; i < nranks && !bad; i++)
		if (ranks[i])
			bad |= append(arr, dump_trace_json(ranks[i], false, &views));
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
	fr_klogs_free(m->klogs, m->nklogs);
	memset(m, 0, sizeof(*m));
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

int fr_rd_comm_ref(const struct rd *rd, const struct fr_val *pc, const char *at,
		   const struct comm_table *tab, const struct fr_trace *t,
		   struct fr_comm *c)
{
	char p[AT_MAX];
	const struct table_comm *tc = table_find(tab, c->id);
	const struct fr_val *rank = fr_val_get(pc, "rank");
	int rc;

	if (!tc)
		return fr_rd_fail(rd, -EPROTO, "%s: no communicator \"%s\" in communicators", at, c->id);
	memcpy(c->desc, tc->c.desc, sizeof(c->desc));
	c->size = tc->c.size;
	c->members = tc->c.members;
	if (tc->top > t->world_size)
		return fr_rd_fail(rd, -EPROTO, "%s: communicators.%s lists rank %" PRIu32
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
		return fr_rd_fail(rd, -EPROTO, "%s: %" PRIu32 " is not below size %" PRIu32,
				  fr_rd_path(p, at, "rank"), c->rank, c->size);
	return 0;
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

	if ((rc = fr_rd_container(rd, root, "", "communicators", true, FR_VAL_OBJECT, &comms)))
		return rc;
	for (uint32_t i = 0; i < comms->n; i++) {
		const struct fr_val *v = fr_val_get(comms->u.items[2 * i + 1], "ranks");

		if (fr_val_is(v, FR_VAL_ARRAY))
			total += v->n;
	}
	tab->comms = calloc(comms->n ? comms->n : 1, sizeof(*tab->comms));
	m->members = calloc(total ? total : 1, sizeof(*m->members));
	if (!tab->comms || !m->members)
		return fr_rd_nomem(rd);
	m->nmembers = total;

	for (uint32_t i = 0; i < comms->n; i++) {
		const struct fr_val *id = comms->u.items[2 * i];
		const struct fr_val *e = comms->u.items[2 * i + 1];
		const struct fr_val *v;
		struct table_comm *tc = &tab->comms[i];
		uint32_t *members;
		uint64_t size;
		size_t n;

		fr_rd_at(at, "communicators.%s", id->u.s);
		if (id->n > FR_COMM_ID_MAX)
			return fr_rd_fail(rd, -EPROTO, "%s: communicator id longer than %d bytes", at,
					  FR_COMM_ID_MAX);
		memcpy(tc->c.id, id->u.s, id->n + 1);
		tab->n = i + 1;
		if (!fr_val_is(e, FR_VAL_OBJECT))
			return fr_rd_fail(rd, -EPROTO, "%s: expected an object, got %s", at,
					  fr_val_type_name(e));
		v = fr_val_get(e, "ranks");
		if ((rc = GET_STR(rd, e, at, "desc", false, tc->c.desc)) ||
		    (rc = want(rd, v, at, "ranks", true, "an array")))
			return rc;
		if (!fr_val_is(v, FR_VAL_ARRAY))
			return fr_rd_fail(rd, -EPROTO, "%s: expected an array, got %s",
					  fr_rd_path(p, at, "ranks"), fr_val_type_name(v));
		if ((rc = fr_rd_members(rd, v, fr_rd_path(p, at, "ranks"), &members, &n)))
			return rc;
		memcpy(m->members + used, members, n * sizeof(*members));
		free(members);
		size = n;
		if ((rc = get_u64(rd, fr_val_get(e, "size"), at, "size", false, UINT32_MAX, &size)))
			return rc;
		if (n && n != size)
			return fr_rd_fail(rd, -EPROTO, "%s: lists %zu ranks but size is %" PRIu64,
					  fr_rd_path(p, at, "ranks"), n, size);
		tc->c.size = (uint32_t)size;
		/* An empty list: the daemon knew only the size. */
		tc->c.members = n ? m->members + used : NULL;
		for (size_t k = 0; k < n; k++) {
			uint32_t r = tc->c.members[k];

			if (r == FR_RANK_UNKNOWN)
				continue;
			if (r >= m->world_size)
				return fr_rd_fail(rd, -EPROTO, "%s[%zu]: rank %" PRIu32
						  " is not below world_size %" PRIu32,
						  fr_rd_path(p, at, "ranks"), k, r, m->world_size);
			if (r >= tc->top)
				tc->top = r + 1;
		}
		used += n;
	}
	qsort(tab->comms, tab->n, sizeof(*tab->comms), table_comm_cmp);
	for (size_t i = 1; i < tab->n; i++)
		if (strcmp(tab->comms[i - 1].c.id, tab->comms[i].c.id) == 0)
			return fr_rd_fail(rd, -EPROTO, "communicators.%s: the same communicator twice",
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

	if ((rc = fr_rd_header(rd, root, "", &manifest_kind, &major)) ||
	    (rc = GET_STR(rd, root, "", "job", true, m->job)) ||
	    (rc = GET_STR(rd, root, "", "incident", true, m->incident)) ||
	    (rc = GET_STR(rd, root, "", "reason", true, m->reason)) ||
	    (rc = get_u32(rd, fr_val_get(root, "world_size"), "", "world_size", true,
			  &m->world_size)) ||
	    (rc = get_u64(rd, fr_val_get(root, "opened_ns"), "", "opened_ns", true, INT64_MAX,
			  &m->opened_ns)) ||
	    (rc = get_u64(rd, fr_val_get(root, "closed_ns"), "", "closed_ns", true, INT64_MAX,
			  &m->closed_ns)) ||
	    (rc = fr_rd_container(rd, root, "", "ranks", true, FR_VAL_ARRAY, &ranks)) ||
	    (rc = fr_rd_world(rd, "", m->world_size)) ||
	    (rc = fr_rd_klogs(rd, root, &m->klogs, &m->nklogs)))
		return rc;
	/* 1.x views are whole dumps; 2.x ones name the table's communicators. */
	if (major >= 2 && (rc = read_comm_table(rd, root, m, &tab)))
		goto out_free_table;
	if (ranks->n == 0)
		goto out_free_table;
	m->ranks = calloc(ranks->n, sizeof(*m->ranks));
	if (!m->ranks) {
		rc = fr_rd_nomem(rd);
		goto out_free_table;
	}
	for (uint32_t i = 0; i < ranks->n; i++) {
		m->nranks = i + 1;
		fr_rd_at(at, "ranks[%" PRIu32 "]", i);
		rc = fr_rd_trace(rd, ranks->u.items[i], at, NULL, major >= 2 ? &tab : NULL,
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
		return fr_rd_nomem(&rd);
	rc = fr_json_parse(doc, buf, len, &root, why, sizeof(why));
	if (rc)
		rc = fr_rd_json_error(&rd, rc, why);
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
	char *buf;
	size_t len;
	int rc;

	memset(m, 0, sizeof(*m));
	rc = fr_rd_slurp(path_, &buf, &len, err, errlen);
	if (!rc && !len)
		rc = fr_rd_fail(&rd, -EPROTO, "an empty file");
	if (!rc)
		rc = fr_manifest_parse(buf, len, path_, m, err, errlen);
	free(buf);
	return rc;
}
