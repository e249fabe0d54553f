/*
 * PyTorch Flight Recorder dumps: wrapped in the header our reader expects
 * and read by it, so that both kinds of evidence go through one set of
 * checks. The dump's own containers are shared with the wrapper, not
 * copied: a 2048-entry dump costs one small object more.
 */
#include "pytorch.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"
#include "pickle.h"

/* The fewest bytes a pickled Flight Recorder entry takes, its keys shared
 * through the memo: its own record id, times and sizes are a few dozen. */
#define PICKLE_ENTRY_MIN 16

/* Frames of the latest operation, as the rank's one stack. */
#define FRAMES_MAX 64

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

bool fr_pytorch_rank_from_name(const char *path, uint32_t *rank)
{
	const char *base = strrchr(path, '/');
	size_t n, digits = 0;
	uint64_t r = 0;

	base = base ? base + 1 : path;
	n = strlen(base);
	/* "nccl_trace_rank_3", also "nccl_trace_rank_3.json" or ".pkl". */
	if (n > 5 && strcmp(base + n - 5, ".json") == 0)
		n -= 5;
	else if (n > 4 && strcmp(base + n - 4, ".pkl") == 0)
		n -= 4;
	while (digits < n && isdigit((unsigned char)base[n - 1 - digits]))
		digits++;
	if (!digits || digits > 9)
		return false;
	for (size_t i = n - digits; i < n; i++)
		r = r * 10 + (uint64_t)(base[i] - '0');
	*rank = (uint32_t)r;
	return true;
}

bool fr_pytorch_is_dump(const struct fr_val *root)
{
	const struct fr_val *entries = fr_val_get(root, "entries");

	/* PyTorch's JSON writer leaves "entries" out when it has none. */
	return fr_val_is(root, FR_VAL_OBJECT) && !fr_val_get(root, "format") &&
	       fr_val_is(fr_val_get(root, "version"), FR_VAL_STRING) &&
	       (fr_val_is(entries, FR_VAL_ARRAY) ||
		(!entries && fr_val_is(fr_val_get(root, "pg_config"), FR_VAL_OBJECT)));
}

/* The job's size as this rank knows it: one past the highest rank any of
 * its process groups names (the default group names them all). A group
 * whose ranks do not read is left to the dump reader to report. */
static uint64_t world_of(const struct fr_val *config, uint32_t rank)
{
	uint64_t world = (uint64_t)rank + 1;

	for (uint32_t g = 0; g < config->n; g++) {
		const struct fr_val *pc = config->u.items[2 * g + 1];
		uint32_t *members;
		size_t n;

		if (fr_dump_read_members(fr_val_get(pc, "ranks"), config->u.items[2 * g]->u.s,
					 &members, &n, NULL, 0))
			continue;
		for (size_t i = 0; i < n; i++)
			if (members[i] != FR_RANK_UNKNOWN && (uint64_t)members[i] + 1 > world)
				world = (uint64_t)members[i] + 1;
		free(members);
	}
	return world;
}

/* The fields of an entry scan_raw() reads, for an entry the dump reader has not. */
enum {
	PF_CREATED, PF_STARTED, PF_COMPLETED, PF_TIMEOUT, PF_STATE, PF_FRAMES, PF_THREAD_NAME,
	PF_PG_ID, PF_PROCESS_GROUP, PF__COUNT
};

static const struct fr_json_key entry_keys[PF__COUNT] = {
	{ "time_created_ns", 15, false },
	{ "time_discovered_started_ns", 26, false },
	{ "time_discovered_completed_ns", 28, false },
	{ "timeout_ms", 10, false },
	{ "state", 5, false },
	{ "frames", 6, false },
	{ "thread_name", 11, false },
	{ "pg_id", 5, false },
	{ "process_group", 13, false },
};

static uint64_t positive(const struct fr_val *v)
{
	return fr_val_is(v, FR_VAL_INT) && v->u.i > 0 ? (uint64_t)v->u.i : 0;
}

/* "train_step (train.py:201)" */
static struct fr_val *frame_val(struct fr_doc *d, const struct fr_val *f)
{
	const char *name = fr_val_str(fr_val_get(f, "name"));
	const char *file = fr_val_str(fr_val_get(f, "filename"));
	const struct fr_val *line = fr_val_get(f, "line");
	const char *slash = file ? strrchr(file, '/') : NULL;
	struct fr_val *o = fr_val_object(d);
	char text[256];

	if (file && fr_val_is(line, FR_VAL_INT))
		snprintf(text, sizeof(text), "%s (%s:%" PRId64 ")", name ? name : "?",
			 slash ? slash + 1 : file, line->u.i);
	else
		snprintf(text, sizeof(text), "%s", name ? name : "?");
	if (!o || fr_val_add_str(d, o, "name", fr_val_string(d, text, strlen(text))) ||
	    fr_val_add_str(d, o, "offset", fr_val_int(d, 0)) ||
	    fr_val_add_str(d, o, "ip", fr_val_string(d, "0x0", 3)))
		return NULL;
	return o;
}

/*
 * An entry's stack, as the scan keeps it: its thread's name and its frames
 * (objects; NULL for any other item, which reads as a frame of no name),
 * copied, since a pickle's hook sees an entry's containers only while it
 * reads the entry.
 */
struct stack {
	bool set;
	const char *thread_name;	/* NULL when not a string */
	uint32_t n;
	const struct fr_val *frames[FRAMES_MAX];
};

static void stack_keep(struct stack *st, const struct fr_val *frames,
		       const struct fr_val *thread_name)
{
	st->set = true;
	st->thread_name = fr_val_str(thread_name);
	st->n = frames->n < FRAMES_MAX ? frames->n : FRAMES_MAX;
	for (uint32_t i = 0; i < st->n; i++) {
		const struct fr_val *f = frames->u.items[i];

		st->frames[i] = f->type == FR_VAL_OBJECT ? f : NULL;
	}
}

/* The rank's stack: that of entry `pick` (NULL: none). */
static struct fr_val *threads_val(struct fr_doc *d, const struct stack *pick)
{
	struct fr_val *thread, *out, *list;
	const char *tname;

	out = fr_val_array(d);
	if (!out || !pick)
		return out;
	tname = pick->thread_name ? pick->thread_name : "";
	list = fr_val_array(d);
	thread = fr_val_object(d);
	if (!list || !thread || fr_val_add_str(d, thread, "tid", fr_val_int(d, 0)) ||
	    fr_val_add_str(d, thread, "name", fr_val_string(d, tname, strlen(tname))) ||
	    fr_val_add_str(d, thread, "current", fr_val_bool(d, false)) ||
	    fr_val_add_str(d, thread, "frames", list) || fr_val_append(d, out, thread))
		return NULL;
	for (uint32_t i = 0; i < pick->n; i++) {
		struct fr_val *f = frame_val(d, pick->frames[i]);

		if (!f || fr_val_append(d, list, f))
			return NULL;
	}
	return out;
}

/* Adds member `key` -> `v` to `o`; false when out of memory (v NULL
 * included), so that a chain of them reads as one condition. */
static bool put(struct fr_doc *d, struct fr_val *o, const char *key, struct fr_val *v)
{
	return v && fr_val_add_str(d, o, key, v) == 0;
}

static struct fr_val *text(struct fr_doc *d, const char *s)
{
	return fr_val_string(d, s, strlen(s));
}

/* The process groups whose pg_id a scan learns; more are rare. */
#define SCAN_GROUPS 64

/*
 * What the entries say beyond what the dump reader reads of them: the
 * latest time and longest timeout they name, and the rank's stack, the
 * Python frames of its latest operation not completed (what it waits in),
 * else of its latest one (PyTorch records frames per operation, at its
 * creation, not per thread). Learnt from each entry as the dump reader
 * reads it (fr_dump_visit), so that a dump's entries are walked once.
 */
struct scan {
	struct fr_val_keymap map;
	uint64_t latest, timeout;
	struct stack latest_framed, open_framed;
	/* Which pg_id each process group's entries carry, by group name (a
	 * string of the trace or the document): pg_status is keyed by it. */
	struct {
		const char *name;
		char pg_id[FR_COMM_ID_MAX + 1];
	} groups[SCAN_GROUPS];
	uint32_t ngroups, last_group;
	bool groups_lost;	/* more groups than it keeps */
	/* For scan_done(): where the file's time and the stack go. */
	struct fr_doc *d;
	struct fr_val *threads;
	uint64_t time_ns;
	const char *name;
	char *err;
	size_t errlen;
};

/* Notes that entries of the process group named `name` (a string that
 * outlives the scan) carry pg_id `id` (an integer or a string). */
static void scan_group(struct scan *s, const char *name, const struct fr_val *id)
{
	uint32_t i = s->last_group;

	if (i < s->ngroups && s->groups[i].name == name)
		return;
	for (i = 0; i < s->ngroups; i++)
		if (strcmp(s->groups[i].name, name) == 0)
			break;
	if (i == s->ngroups) {
		char *out;

		if (i == SCAN_GROUPS) {
			s->groups_lost = true;
			return;
		}
		out = s->groups[i].pg_id;
		if (fr_val_is(id, FR_VAL_INT))
			snprintf(out, sizeof(s->groups[i].pg_id), "%" PRId64, id->u.i);
		else if (fr_val_is(id, FR_VAL_STRING) && id->n <= FR_COMM_ID_MAX)
			memcpy(out, id->u.s, id->n + 1);
		else
			return;
		s->groups[i].name = name;
		s->ngroups++;
	}
	s->last_group = i;
}

/* What an entry adds to the scan: `latest`, its latest time; its
 * "timeout_ms", "frames" and "thread_name"; `open` when it has not
 * completed. */
static void scan_note(struct scan *s, uint64_t latest, const struct fr_val *timeout_ms,
		      const struct fr_val *frames, const struct fr_val *thread_name, bool open)
{
	uint64_t to;

	if (latest > s->latest)
		s->latest = latest;
	/* (A timeout past a day says nothing about when it dumped.) */
	to = positive(timeout_ms);
	to = to > 86400000u ? 0 : to * 1000000u;
	if (to > s->timeout)
		s->timeout = to;
	if (!fr_val_is(frames, FR_VAL_ARRAY))
		return;
	/* The latest one is wanted only while none is open. */
	if (open)
		stack_keep(&s->open_framed, frames, thread_name);
	else if (!s->open_framed.set)
		stack_keep(&s->latest_framed, frames, thread_name);
}

/* An entry as the dump reader read it: its times are the operation's
 * (a start it lacked is its entry, which is no later). */
static void scan_entry(void *arg, const struct fr_dump_entry *e)
{
	const struct fr_op *op = e->op;
	uint64_t latest = op->t_entered_ns;

	if (op->t_started_ns > latest)
		latest = op->t_started_ns;
	if (op->t_completed_ns > latest)
		latest = op->t_completed_ns;
	scan_group(arg, op->comm, e->pg_id);
	scan_note(arg, latest, e->timeout_ms, e->frames, e->thread_name,
		  op->state != FR_STATE_COMPLETED);
}

/* An entry not read, from its values (see fr_pytorch_from_val()). */
static void scan_raw(struct scan *s, const struct fr_val *e)
{
	const struct fr_val *f[PF__COUNT];
	uint64_t latest = 0;
	const char *st;

	fr_val_fields(&s->map, e, entry_keys, PF__COUNT, f);
	for (int k = PF_CREATED; k <= PF_COMPLETED; k++)
		if (positive(f[k]) > latest)
			latest = positive(f[k]);
	st = fr_val_str(f[PF_STATE]);
	scan_note(s, latest, f[PF_TIMEOUT], f[PF_FRAMES], f[PF_THREAD_NAME],
		  !st || strcmp(st, "completed") != 0);
	if (fr_val_is(fr_val_item(f[PF_PROCESS_GROUP], 0), FR_VAL_STRING))
		scan_group(s, f[PF_PROCESS_GROUP]->u.items[0]->u.s, f[PF_PG_ID]);
}

/* PyTorch's collective timeout when none is set (10 minutes), for
 * entries that name none. */
#define TORCH_TIMEOUT_NS (600ull * 1000000000ull)

/*
 * When the dump was written: its file's time, unless the file was copied
 * since. PyTorch dumps when an operation times out, so the dump is at most
 * a timeout after the latest time it holds (PyTorch's default when no
 * entry names one). At most the larger of the file's time and the latest
 * entry time.
 */
static uint64_t scan_dumped(const struct scan *s)
{
	uint64_t dumped = s->time_ns;
	uint64_t timeout = s->timeout ? s->timeout : TORCH_TIMEOUT_NS;

	if (s->latest && dumped > s->latest + timeout)
		dumped = s->latest + timeout;
	if (dumped < s->latest)
		dumped = s->latest;
	return dumped;
}

/* The stack of the entry the scan picked, as the wrapper's "threads"
 * (NULL when out of memory). */
static struct fr_val *scan_threads(const struct scan *s)
{
	return threads_val(s->d, s->open_framed.set ? &s->open_framed :
				 s->latest_framed.set ? &s->latest_framed : NULL);
}

/* Once the entries are read: the stack into the wrapper, before the
 * reader reads it, and the dump's time into the trace. */
static int scan_done(void *arg, struct fr_trace *t)
{
	struct scan *s = arg;
	struct fr_val *threads = scan_threads(s);

	if (!threads)
		return fail(s->err, s->errlen, -ENOMEM, "%s: out of memory", s->name);
	*s->threads = *threads;
	t->time_ns = scan_dumped(s);
	return 0;
}

/*
 * A number of pg_status: PyTorch's pickles write integers, its JSON writer
 * wrote the same as strings ("5", "-1"); -1 (none yet) and anything that
 * is not a count read as 0.
 */
static uint64_t status_count(const struct fr_val *v)
{
	unsigned long long n;
	char *end;

	if (fr_val_is(v, FR_VAL_INT))
		return v->u.i > 0 ? (uint64_t)v->u.i : 0;
	/* (Digits only: strtoull() would take a sign or white space.) */
	if (!fr_val_is(v, FR_VAL_STRING) || !v->n || !isdigit((unsigned char)v->u.s[0]))
		return 0;
	errno = 0;
	n = strtoull(v->u.s, &end, 10);
	return *end || errno || n > INT64_MAX ? 0 : (uint64_t)n;
}

/*
 * The process group that pg_status key `key` stands for. PyTorch keys
 * pg_status by pg_id and pg_config by group name, which often agree but
 * need not: the group whose entries carry that pg_id; else, when every
 * group the entries show is named by its pg_id (PyTorch's default naming),
 * the group of that name (its entries lost to the ring); else none (NULL).
 */
static struct fr_comm *status_comm(const struct scan *s, struct fr_trace *t, const char *key)
{
	for (uint32_t i = 0; i < s->ngroups; i++)
		if (strcmp(s->groups[i].pg_id, key) == 0)
			return (struct fr_comm *)fr_trace_comm(t, s->groups[i].name);
	if (s->groups_lost)
		return NULL;
	for (uint32_t i = 0; i < s->ngroups; i++)
		if (strcmp(s->groups[i].name, s->groups[i].pg_id) != 0)
			return NULL;
	return (struct fr_comm *)fr_trace_comm(t, key);
}

/*
 * Each process group's progress: the highest collective seq its entries
 * show entered and completed, or what the dump's pg_status says where
 * that is higher (a group whose entries the ring lost). pg_status is
 * left out by some versions and spelled differently by others; its
 * entries are what every version writes alike.
 */
static void set_progress(const struct scan *s, const struct fr_val *status, struct fr_trace *t)
{
	const char *last = NULL;
	struct fr_comm *c = NULL;

	for (size_t i = 0; i < t->nops; i++) {
		const struct fr_op *op = &t->ops[i];

		if (op->is_p2p)
			continue;
		if (op->comm != last) {
			c = (struct fr_comm *)fr_trace_comm(t, op->comm);
			last = op->comm;
		}
		if (!c)
			continue;
		if (op->seq > c->last_entered)
			c->last_entered = op->seq;
		if (op->state == FR_STATE_COMPLETED && op->seq > c->last_completed)
			c->last_completed = op->seq;
	}
	if (!fr_val_is(status, FR_VAL_OBJECT))
		return;
	for (uint32_t g = 0; g < status->n; g++) {
		const struct fr_val *ps = status->u.items[2 * g + 1];
		uint64_t entered = status_count(fr_val_get(ps, "last_enqueued_collective"));
		uint64_t completed = status_count(fr_val_get(ps, "last_completed_collective"));

		if (!(c = status_comm(s, t, status->u.items[2 * g]->u.s)))
			continue;
		if (entered > c->last_entered)
			c->last_entered = entered;
		if (completed > c->last_completed)
			c->last_completed = completed;
	}
}

/*
 * A pickle's entries, read as it is loaded (fr_pickle_load_with()): each
 * goes to the dump reader and the scan as it is decoded, never a value of
 * the document, and the rest of the dump is read once it is loaded.
 */
struct early {
	struct fr_dump_entries *entries;
	struct fr_dump_visit visit;
	struct scan *scan;
	uint64_t first_id;	/* the first entry's record_id */
};

/*
 * Bytes of pickle an entry takes, for the room made for the operations:
 * PyTorch's share their keys and repeated strings through the memo, some
 * 200 bytes an entry. Room never written to costs no memory.
 */
#define PICKLE_ENTRY_BYTES 128

static int early_entry(void *arg, const struct fr_val *e)
{
	struct early *ea = arg;

	if (!fr_dump_entries_count(ea->entries))
		ea->first_id = positive(fr_val_get(e, "record_id"));
	return fr_dump_entries_add(ea->entries, e);
}

static void early_free(struct early *ea)
{
	if (!ea)
		return;
	fr_dump_entries_free(ea->entries);
	free(ea->scan);
	free(ea);
}

/* The scan of a dump's entries, as of `time_ns` (NULL when out of memory). */
static struct scan *scan_new(struct fr_doc *d, const char *name, uint64_t time_ns, char *err,
			     size_t errlen)
{
	struct scan *s = calloc(1, sizeof(*s));

	if (s)
		*s = (struct scan){ .d = d, .time_ns = time_ns, .name = name, .err = err,
				    .errlen = errlen };
	return s;
}

static struct early *early_new(struct fr_doc *d, size_t len, const char *name, uint64_t time_ns,
			       struct fr_trace *t, char *err, size_t errlen)
{
	struct early *ea = calloc(1, sizeof(*ea));

	if (!ea || !(ea->scan = scan_new(d, name, time_ns, err, errlen))) {
		early_free(ea);
		return NULL;
	}
	ea->visit = (struct fr_dump_visit){ scan_entry, scan_done, ea->scan };
	ea->entries = fr_dump_entries_new(name, t, &ea->visit, len / PICKLE_ENTRY_BYTES);
	if (!ea->entries) {
		early_free(ea);
		return NULL;
	}
	return ea;
}

/* fr_pytorch_from_val(), its entries read already by `ea` when not NULL. */
static int from_val(struct fr_doc *d, const struct fr_val *root, const char *name,
		    uint32_t rank, uint64_t time_ns, struct fr_trace *t, char *err,
		    size_t errlen, struct early *ea)
{
	const char *version = fr_val_str(fr_val_get(root, "version"));
	struct fr_val *entries = (struct fr_val *)fr_val_get(root, "entries");
	struct fr_val *config = (struct fr_val *)fr_val_get(root, "pg_config");
	const char *lib = fr_val_str(fr_val_get(root, "comm_lib_version"));
	struct fr_dump_visit visit = { scan_entry, scan_done, NULL };
	struct scan *s;
	char reason[64];
	uint64_t dumped = time_ns, first_id = 0;
	struct fr_val *w;
	int rc;

	if (!ea)
		memset(t, 0, sizeof(*t));
	if (!version || strncmp(version, "2.", 2) != 0)
		return fail(err, errlen, -EPROTO,
			    "%s: PyTorch Flight Recorder version \"%s\" is not supported "
			    "(this build reads 2.x)", name, version ? version : "?");
	if (!fr_val_is(config, FR_VAL_OBJECT))
		return fail(err, errlen, -EPROTO, "%s: pg_config: expected an object", name);
	/* 2.6 to 2.9 name the library "nccl_version" ("xccl_version" on
	 * Intel GPUs); 2.10 "comm_lib_version"; older ones not at all. */
	if (!lib)
		lib = fr_val_str(fr_val_get(root, "nccl_version"));
	if (!lib)
		lib = fr_val_str(fr_val_get(root, "xccl_version"));
	if (!entries && !(entries = fr_val_array(d)))
		return fail(err, errlen, -ENOMEM, "%s: out of memory", name);
	s = ea ? ea->scan : scan_new(d, name, time_ns, err, errlen);
	if (!s)
		return fail(err, errlen, -ENOMEM, "%s: out of memory", name);
	visit.arg = s;
	if (ea)
		first_id = ea->first_id;
	else if (entries->n)
		first_id = positive(fr_val_get(entries->u.items[0], "record_id"));
	/*
	 * The wrapper's time and stack are learnt from the entries as the
	 * dump reader reads them, and set once it has (scan_done()); its
	 * time until then is the file's, which the reader accepts. A time
	 * past what a dump may say (from a caller, not a file) is worked out
	 * first instead, for the reader to judge as before (never with `ea`).
	 */
	if (time_ns > INT64_MAX && !ea) {
		for (uint32_t i = 0; i < entries->n; i++)
			scan_raw(s, entries->u.items[i]);
		dumped = scan_dumped(s);
		visit.entry = NULL;
		visit.done = NULL;
	}
	snprintf(reason, sizeof(reason), "PyTorch Flight Recorder %s", version);
	/* The wrapper shares the dump's own pg_config and entries. Entries
	 * before the first one kept were lost to the ring's wrap. */
	w = fr_val_object(d);
	s->threads = visit.done ? fr_val_array(d) : scan_threads(s);
	if (!w || !put(d, w, "format", text(d, FR_DUMP_FORMAT)) ||
	    !put(d, w, "version", text(d, FR_DUMP_VERSION)) || !put(d, w, "job", text(d, "")) ||
	    !put(d, w, "rank", fr_val_int(d, rank)) ||
	    !put(d, w, "world_size", fr_val_int(d, (int64_t)world_of(config, rank))) ||
	    !put(d, w, "host", text(d, "")) || !put(d, w, "pid", fr_val_int(d, 0)) ||
	    !put(d, w, "status", text(d, "dumped")) ||
	    !put(d, w, "comm_lib_version", text(d, lib ? lib : "")) ||
	    !put(d, w, "incident", text(d, "")) || !put(d, w, "dump_reason", text(d, reason)) ||
	    !put(d, w, "time_dumped_ns", fr_val_int(d, (int64_t)dumped)) ||
	    !put(d, w, "dropped_entries", fr_val_int(d, (int64_t)first_id)) ||
	    !put(d, w, "pg_config", config) ||
	    !put(d, w, "pg_status", fr_val_object(d)) || !put(d, w, "entries", entries) ||
	    !put(d, w, "threads", s->threads)) {
		rc = fail(err, errlen, -ENOMEM, "%s: out of memory", name);
		goto out_free;
	}
	rc = ea ? fr_dump_from_val_entries(w, ea->entries, err, errlen) :
		  fr_dump_from_val_visit(w, name, t, err, errlen, &visit);
	/* (pg_status is left out of the wrapper: read here, from the entries.) */
	if (rc == 0)
		set_progress(s, fr_val_get(root, "pg_status"), t);
out_free:
	if (!ea)
		free(s);
	return rc;
}

int fr_pytorch_from_val(struct fr_doc *d, const struct fr_val *root, const char *name,
			uint32_t rank, uint64_t time_ns, struct fr_trace *t, char *err,
			size_t errlen)
{
	return from_val(d, root, name, rank, time_ns, t, err, errlen, NULL);
}

/*
 * Loads a pickle into `d`, its entries read into `t` through *ea as it is
 * (NULL when they are in the document instead: the hook was not followed,
 * or read none). Returns as fr_pickle_load(), `why` its message.
 */
static int load_pickle(struct fr_doc *d, const void *buf, size_t len, const char *name,
		       uint64_t time_ns, struct fr_trace *t, struct early **ea, struct fr_val **root,
		       char *why, size_t whylen, char *err, size_t errlen)
{
	struct fr_pickle_hook hook = { "entries", early_entry, NULL, 0 };
	int rc = -EAGAIN;

	/* (A time past what a dump may say is worked out from the tree.) */
	if (time_ns <= INT64_MAX && (*ea = early_new(d, len, name, time_ns, t, err, errlen))) {
		hook.arg = *ea;
		rc = fr_pickle_load_with(d, buf, len, &hook, root, why, whylen);
		if (rc == 0 && hook.nitems)
			return 0;
	}
	early_free(*ea);
	*ea = NULL;
	/* Whatever the hook left in the trace goes (room made for entries
	 * that never came, too): from_val() reads them from the tree. */
	fr_trace_free(t);
	if (rc == 0)
		return 0;
	/* Read again, plainly, the load of record. */
	if (rc == -ENOMEM)
		return rc;
	fr_doc_reset(d);
	return fr_pickle_load(d, buf, len, root, why, whylen);
}

int fr_pytorch_parse(const void *buf, size_t len, const char *name, uint32_t rank,
		     uint64_t time_ns, struct fr_trace *t, char *err, size_t errlen)
{
	struct fr_doc *d = fr_doc_new();
	const struct fr_val *entries;
	struct early *ea = NULL;
	struct fr_val *root;
	char why[256];
	size_t n;
	int rc;

	memset(t, 0, sizeof(*t));
	if (!d)
		return fail(err, errlen, -ENOMEM, "%s: out of memory", name);
	if (fr_pickle_sniff(buf, len)) {
		rc = load_pickle(d, buf, len, name, time_ns, t, &ea, &root, why, sizeof(why), err,
				 errlen);
		if (rc) {
			rc = fail(err, errlen, rc, "%s: %s", name, why);
			goto out_free;
		}
		/*
		 * Each entry becomes an operation of 104 bytes: a pickle that
		 * lists one entry many times through its memo (a few bytes
		 * each) would make a small file cost gigabytes.
		 */
		entries = fr_val_get(root, "entries");
		n = fr_val_is(entries, FR_VAL_ARRAY) ? entries->n : 0;
		if (ea)
			n += fr_dump_entries_count(ea->entries);
		if (n > len / PICKLE_ENTRY_MIN) {
			rc = fail(err, errlen, -EPROTO, "%s: %zu entries in %zu bytes: "
				  "entries repeated through the pickle's memo, not a Flight "
				  "Recorder dump", name, n, len);
			goto out_free;
		}
	} else {
		rc = fr_json_parse(d, buf, len, &root, why, sizeof(why));
		if (rc == -ENOMEM) {
			rc = fail(err, errlen, rc, "%s: out of memory", name);
			goto out_free;
		}
		if (rc) {
			rc = 1;
			goto out_free;
		}
	}
	rc = fr_pytorch_is_dump(root) ?
		     from_val(d, root, name, rank, time_ns, t, err, errlen, ea) : 1;
out_free:
	/* (Entries read early are the trace's until it is whole.) */
	if (rc)
		fr_trace_free(t);
	early_free(ea);
	fr_doc_free(d);
	return rc;
}
