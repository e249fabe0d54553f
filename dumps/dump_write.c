/*
 * Writing a dump (dump.h, format in dumps/FORMAT.md): a trace as a jansson
 * document, and that document as text. The agent links this writer and
 * nothing of the readers: it references no reader, manifest or parser.
 */
#include "dump.h"
#include "dump_write.h"
#include "entry.h"
#include "../protocol/member_runs.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *dump_jstrn(const char *s, size_t cap)
{
	size_t n = strnlen(s, cap);
	json_t *j = json_stringn(s, n);
	char *copy;

	if (j)
		return j;
	copy = malloc(n + 1);
	if (!copy)
		return NULL;
	for (size_t i = 0; i < n; i++)
		copy[i] = (unsigned char)s[i] < 0x80 && s[i] != '\0' ? s[i] : '?';
	copy[n] = '\0';
	j = json_stringn(copy, n);
	free(copy);
	return j;
}

static json_t *sizes_json(uint64_t count)
{
	json_t *outer = json_array();
	json_t *inner = json_array();

	if (!outer || !inner || append(inner, ju64(count)) || append(outer, inner)) {
		json_decref(outer);
		return NULL;
	}
	return outer;
}

static json_t *single_json(json_t *v)
{
	json_t *arr = json_array();

	if (!arr || append(arr, v)) {
		json_decref(arr);
		return NULL;
	}
	return arr;
}

/* PyTorch's words for an operation on a GPU stream that has not completed:
 * "scheduled" until the device reaches it, then "started". */
static const char *state_text(const struct fr_op *op)
{
	if (op->state != FR_STATE_ENTERED || !op->gpu)
		return fr_state_name(op->state);
	return op->started ? "started" : "scheduled";
}

/* Elements of an operation's output, as PyTorch's "output_sizes" says:
 * its count but where its size ratio says otherwise. */
static uint64_t output_count(const struct fr_op *op)
{
	if (!op->size_ratio || op->size_ratio == FR_SIZE_RATIO_UNEVEN)
		return op->count;
	if (op->type == FR_OP_ALL_GATHER)
		return op->count > UINT64_MAX / op->size_ratio ? op->count :
								 op->count * op->size_ratio;
	return op->type == FR_OP_REDUCE_SCATTER ? op->count / op->size_ratio : op->count;
}

/* [a, b]; takes the reference to b. */
static json_t *pair_json(const char *a, json_t *b)
{
	json_t *arr = json_array();
	int bad = 0;

	if (!arr) {
		json_decref(b);
		return NULL;
	}
	bad |= append(arr, JSTRZ(a));
	bad |= append(arr, b);
	if (bad) {
		json_decref(arr);
		return NULL;
	}
	return arr;
}

/* The writers of the shapes of an entry's fields (entry.h). */
#define put_u64(e, key, v) set((e), (key), ju64(v))
#define put_str(e, key, s) set((e), (key), JSTRZ(s))
#define put_pair(e, key, a, b) set((e), (key), pair_json((a), (b)))
#define put_sizes(e, key, n) set((e), (key), sizes_json(n))
#define put_strs(e, key, s) set((e), (key), single_json(JSTRZ(s)))
#define put_time(e, key, t) set((e), (key), (t) ? ju64(t) : json_null())
#define put_flag(e, key, b) set((e), (key), json_boolean(b))
#define put_if_true(e, key, b) ((b) ? set((e), (key), json_true()) : 0)
#define put_ratio(e, key, r) ((r) ? set((e), (key), json_integer(r)) : 0)
#define put_rank(e, key, r) set((e), (key), json_integer(r))
#define put_none(e, key, v) 0

/* An entry, its fields as entry.h lists them; a summary's without
 * PyTorch's copies. */
static json_t *entry_json(const struct fr_trace *t, const struct fr_op *op)
{
	const bool copies = !t->summary;
	const struct fr_comm *comm = fr_trace_comm(t, op->comm);
	const char *opname = fr_op_name(op->type);
	char profiling[64];
	json_t *e = json_object();
	/* Taken by process_group, the only field that writes it. */
	json_t *desc = !copies ? NULL : comm ? JSTR(comm->desc) : json_string("");
	int bad = 0;

	snprintf(profiling, sizeof(profiling), "mpi:%s", opname);
	if (!e || (copies && !desc)) {
		json_decref(desc);
		json_decref(e);
		return NULL;
	}
#define EF_PUT(id, key, drop, copy, shape, into, ...) \
	if (!(copy) || copies)                        \
		bad |= put_##shape(e, key, __VA_ARGS__);
	ENTRY_FIELDS(EF_PUT)
#undef EF_PUT
	if (bad) {
		json_decref(e);
		return NULL;
	}
	return e;
}

/*
 * A communicator's members. A view that knows only its size writes none;
 * one that knows some (an NCCL rank knows its own) writes -1 for the rest.
 */
json_t *dump_members_json(const struct fr_comm *c)
{
	json_t *ranks = json_array();
	int bad = 0;

	if (!ranks)
		return NULL;
	for (uint32_t i = 0; c->members && i < c->size && !bad; i++)
		bad |= append(ranks, json_integer(c->members[i] == FR_RANK_UNKNOWN ?
							  -1 :
							  (json_int_t)c->members[i]));
	if (bad) {
		json_decref(ranks);
		return NULL;
	}
	return ranks;
}

/* Characters of the array dump_members_json() makes, as JSON_COMPACT writes it. */
static size_t members_array_len(const struct fr_comm *c)
{
	size_t n = 2;

	for (uint32_t i = 0; i < c->size; i++) {
		uint32_t v = c->members[i];

		n += (i ? 1 : 0) + (v == FR_RANK_UNKNOWN ? 2 : 1);
		for (; v != FR_RANK_UNKNOWN && v >= 10; v /= 10)
			n++;
	}
	return n;
}

/* Appends one item of a runs string at `p` (room for RUN_ITEM_MAX bytes). */
#define RUN_ITEM_MAX 24
static char *runs_item(char *p, bool first, bool known, uint32_t rank, uint32_t count)
{
	if (!first)
		*p++ = ',';
	if (!known)
		return p + (count == 1 ? sprintf(p, "?") : sprintf(p, "?*%" PRIu32, count));
	if (count == 1)
		return p + sprintf(p, "%" PRIu32, rank);
	return p + sprintf(p, "%" PRIu32 "-%" PRIu32, rank, rank + count - 1);
}

/*
 * The members as runs of consecutive global ranks (dumps/FORMAT.md,
 * version 1.6): "0-65535" for world, where the array would take 382 KiB in
 * each of 65,536 dumps. NULL when the array is as short (so small or
 * shuffled communicators stay arrays, as 1.4 writes them), or out of
 * memory, which the array then reports. Runs are found as the node
 * daemon's messages find them (fr_node_maps_from_members()).
 */
static json_t *members_runs_json(const struct fr_comm *c)
{
	struct fr_node_map *maps;
	uint32_t nmaps, at = 0;
	json_t *j = NULL;
	char *text, *p;

	if (!c->members || c->size < DUMP_RUNS_MIN_MEMBERS)
		return NULL;
	maps = malloc(c->size * sizeof(*maps));
	if (!maps)
		return NULL;
	nmaps = fr_node_maps_from_members(c->members, c->size, maps);
	/* Each run may follow a gap of unknown members, and one gap may end the list. */
	text = malloc(((size_t)nmaps * 2 + 1) * RUN_ITEM_MAX + 1);
	if (!text)
		goto out_free_maps;
	p = text;
	for (uint32_t i = 0; i < nmaps; i++) {
		if (maps[i].index > at)
			p = runs_item(p, p == text, false, 0, maps[i].index - at);
		p = runs_item(p, p == text, true, maps[i].rank, maps[i].count);
		at = maps[i].index + maps[i].count;
	}
	if (at < c->size)
		p = runs_item(p, p == text, false, 0, c->size - at);
	*p = '\0';
	/* The string's two quotes against the array's brackets. */
	if ((size_t)(p - text) < members_array_len(c) - 2)
		j = json_stringn(text, (size_t)(p - text));
	free(text);
out_free_maps:
	free(maps);
	return j;
}

/*
 * A communicator's entry in pg_config. Its members are written as runs
 * when `runs` is not NULL and that is shorter (then *runs is set: the dump
 * needs version 1.6), else as an array.
 */
static json_t *pg_config_json(const struct fr_comm *c, bool *runs)
{
	json_t *o = json_object();
	json_t *ranks = runs ? members_runs_json(c) : NULL;
	int bad = 0;

	if (ranks)
		*runs = true;
	else
		ranks = dump_members_json(c);
	if (!o || !ranks)
		goto out_free;
	bad |= set(o, "name", JSTR(c->id));
	bad |= set(o, "desc", JSTR(c->desc));
	bad |= set(o, "ranks", ranks);
	ranks = NULL;
	bad |= set(o, "rank", json_integer(c->rank));
	bad |= set(o, "size", json_integer(c->size));
	if (bad)
		goto out_free;
	return o;

out_free:
	json_decref(ranks);
	json_decref(o);
	return NULL;
}

json_t *dump_pg_config_json(const struct fr_comm *c)
{
	return pg_config_json(c, NULL);
}

static json_t *pg_status_json(const struct fr_comm *c)
{
	json_t *o = json_object();
	int bad = 0;

	if (!o)
		return NULL;
	bad |= set(o, "last_enqueued_collective", ju64(c->last_entered));
	bad |= set(o, "last_started_collective", ju64(c->last_entered));
	bad |= set(o, "last_completed_collective", ju64(c->last_completed));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *fr_pyframes_to_json(const struct fr_thread *th)
{
	json_t *a = json_array();
	int bad = !a;

	for (size_t i = 0; a && i < th->npyframes && !bad; i++) {
		const struct fr_pyframe *f = &th->pyframes[i];
		json_t *fo = json_object();

		bad |= append(a, fo);
		if (!fo)
			break;
		bad |= set(fo, "function", JSTRZ(f->function));
		bad |= set(fo, "file", JSTRZ(f->file));
		bad |= set(fo, "line", json_integer(f->line));
		if (f->entry)
			bad |= set(fo, "entry", json_true());
	}
	if (bad) {
		json_decref(a);
		return NULL;
	}
	return a;
}

/* The version a dump of `t` that carries Python frames, or says why it
 * has none, is written as (1.11 with entry marks, else 1.9); NULL when it
 * has nothing of Python. */
static const char *python_version(const struct fr_trace *t)
{
	bool python = t->python_note[0];

	for (size_t i = 0; i < t->nthreads; i++) {
		const struct fr_thread *th = &t->threads[i];

		for (size_t j = 0; j < th->npyframes; j++)
			if (th->pyframes[j].entry)
				return FR_DUMP_VERSION_PYENTRY;
		python |= th->npyframes || th->py_truncated;
	}
	return python ? FR_DUMP_VERSION_PYTHON : NULL;
}

static json_t *thread_json(const struct fr_thread *th)
{
	json_t *o = json_object();
	json_t *frames = json_array();
	int bad = 0;

	if (!o || !frames)
		goto out_free;
	for (size_t i = 0; i < th->nframes; i++) {
		const struct fr_frame *f = &th->frames[i];
		json_t *fo = json_object();
		char ip[2 + 16 + 1];

		snprintf(ip, sizeof(ip), "0x%" PRIx64, f->ip);
		bad |= append(frames, fo);
		if (!fo)
			break;
		bad |= set(fo, "name", f->name ? JSTRZ(f->name) : json_null());
		bad |= set(fo, "offset", ju64(f->offset));
		bad |= set(fo, "ip", json_string(ip));
	}
	bad |= set(o, "tid", json_integer(th->tid));
	bad |= set(o, "name", JSTR(th->name));
	bad |= set(o, "current", json_boolean(th->current));
	bad |= set(o, "frames", frames);
	frames = NULL;
	if (th->npyframes)
		bad |= set(o, "python_frames", fr_pyframes_to_json(th));
	if (th->py_truncated)
		bad |= set(o, "python_truncated", json_true());
	if (bad)
		goto out_free;
	return o;

out_free:
	json_decref(frames);
	json_decref(o);
	return NULL;
}

/* How the rank died (FORMAT.md, "Crashes"). */
json_t *fr_crash_to_json(const struct fr_crash *c)
{
	json_t *o = json_object();
	char addr[2 + 16 + 1], sname[16];
	int bad = 0;

	if (!o)
		return NULL;
	snprintf(addr, sizeof(addr), "0x%" PRIx64, c->fault_addr);
	bad |= set(o, "signal", json_string(fr_signal_name(c->signo, sname)));
	bad |= set(o, "signo", json_integer(c->signo));
	bad |= set(o, "si_code", json_integer(c->code));
	bad |= set(o, "fault_addr", json_string(addr));
	bad |= set(o, "time_ns", ju64(c->time_ns));
	bad |= set(o, "ring_head", ju64(c->ring_head));
	bad |= set(o, "thread", thread_json(&c->thread));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* How the rank ended (FORMAT.md, "Exits"). */
json_t *fr_exit_to_json(const struct fr_exit *e)
{
	json_t *o = json_object();
	int bad = 0;

	if (!o)
		return NULL;
	bad |= set(o, "how", json_string(fr_exit_kind_name(e->kind)));
	bad |= set(o, "code", e->has_code ? json_integer(e->code) : json_null());
	bad |= set(o, "underscore", json_boolean(e->underscore));
	bad |= set(o, "finalised", json_boolean(e->finalised));
	bad |= set(o, "inflight", json_integer(e->inflight));
	bad |= set(o, "time_ns", ju64(e->time_ns));
	bad |= set(o, "ring_head", ju64(e->ring_head));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* The rank's asynchronous NCCL error (FORMAT.md, "NCCL errors"). */
json_t *fr_nccl_error_to_json(const struct fr_nccl_error *e)
{
	json_t *o = json_object();
	char name[24];
	int bad = 0;

	if (!o)
		return NULL;
	bad |= set(o, "comm", JSTR(e->comm));
	bad |= set(o, "result", json_integer(e->result));
	bad |= set(o, "result_name", json_string(fr_nccl_result_name(e->result, name)));
	bad |= set(o, "time_ns", ju64(e->time_ns));
	bad |= set(o, "message", JSTR(e->message));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* What a summary says of itself (FORMAT.md, "Summaries"). */
static json_t *summary_json(const struct fr_trace_summary *s)
{
	json_t *o = json_object();
	int bad = 0;

	if (!o)
		return NULL;
	bad |= set(o, "node", JSTR(s->node));
	bad |= set(o, "full_dump", JSTRZ(s->full_dump));
	bad |= set(o, "entries_left_out", ju64(s->entries_left_out));
	bad |= set(o, "threads_left_out", ju64(s->threads_left_out));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/*
 * The version a dump of `t` is written as: the highest of what it holds,
 * entry marks (1.11, `pyver` says), a summary (1.10; 1.5 before), Python
 * frames (1.9, `pyver`), an exit (1.8), a crash (1.7), member runs (1.6).
 * A dump of none of them stays a 1.4 one, byte for byte.
 */
static const char *dump_version(const struct fr_trace *t, const char *pyver, bool runs)
{
	if (pyver && strcmp(pyver, FR_DUMP_VERSION_PYENTRY) == 0)
		return pyver;
	if (t->summary)
		return FR_DUMP_VERSION_SUMMARY_OURS;
	if (pyver)
		return pyver;
	if (t->has_exit || t->has_nccl_error)
		return FR_DUMP_VERSION_EXIT;
	if (t->crash)
		return FR_DUMP_VERSION_CRASH;
	return runs ? FR_DUMP_VERSION_RUNS : FR_DUMP_VERSION;
}

/*
 * The dump document of `t`; a manifest reuses it without threads, its
 * communicators written by `w` (NULL for a dump).
 */
json_t *dump_trace_json(const struct fr_trace *t, bool with_threads,
			const struct dump_comm_writer *w)
{
	json_t *root = json_object();
	json_t *pg_config = json_object();
	json_t *pg_status = json_object();
	json_t *entries = json_array();
	json_t *threads = NULL;
	const char *pyver = python_version(t);
	bool runs = false;
	int bad = 0;

	if (!root || !pg_config || !pg_status || !entries)
		goto out_free;
	for (size_t i = 0; i < t->ncomms && !bad; i++) {
		/* The key is spelled as "pg_id" spells it, made UTF-8 alike. */
		json_t *id = JSTR(t->comms[i].id);

		if (!id)
			goto out_free;
		bad |= set(pg_config, json_string_value(id),
			   w ? w->comm(w->arg, json_string_value(id), &t->comms[i]) :
			       pg_config_json(&t->comms[i], &runs));
		bad |= set(pg_status, json_string_value(id), pg_status_json(&t->comms[i]));
		json_decref(id);
	}
	for (size_t i = 0; i < t->nops && !bad; i++)
		bad |= append(entries, entry_json(t, &t->ops[i]));
	if (with_threads && t->nthreads) {
		threads = json_array();
		if (!threads)
			goto out_free;
		for (size_t i = 0; i < t->nthreads && !bad; i++)
			bad |= append(threads, thread_json(&t->threads[i]));
	}

	bad |= set(root, "format", json_string(FR_DUMP_FORMAT));
	bad |= set(root, "version", json_string(dump_version(t, with_threads ? pyver : NULL, runs)));
	bad |= set(root, "job", JSTR(t->job));
	bad |= set(root, "rank", json_integer(t->rank));
	bad |= set(root, "world_size", json_integer(t->world_size));
	bad |= set(root, "host", JSTR(t->host));
	bad |= set(root, "pid", json_integer(t->pid));
	bad |= set(root, "status", json_string(fr_rank_status_name(t->status)));
	bad |= set(root, "comm_lib_version", JSTR(t->comm_lib));
	bad |= set(root, "incident", JSTR(t->incident));
	bad |= set(root, "dump_reason", JSTR(t->reason));
	bad |= set(root, "time_dumped_ns", ju64(t->time_ns));
	bad |= set(root, "dropped_entries", ju64(t->dropped));
	bad |= set(root, "pg_config", pg_config);
	bad |= set(root, "pg_status", pg_status);
	bad |= set(root, "entries", entries);
	pg_config = pg_status = entries = NULL;
	if (threads) {
		bad |= set(root, "threads", threads);
		threads = NULL;
	}
	if (t->summary)
		bad |= set(root, "summary", summary_json(t->summary));
	if (t->crash)
		bad |= set(root, "crash", fr_crash_to_json(t->crash));
	if (t->has_exit)
		bad |= set(root, "exit", fr_exit_to_json(&t->exit));
	if (t->has_nccl_error)
		bad |= set(root, "nccl_error", fr_nccl_error_to_json(&t->nccl_error));
	if (with_threads && t->python_note[0])
		bad |= set(root, "python_note", JSTR(t->python_note));
	if (bad)
		goto out_free;
	return root;

out_free:
	json_decref(threads);
	json_decref(entries);
	json_decref(pg_status);
	json_decref(pg_config);
	json_decref(root);
	return NULL;
}

json_t *fr_dump_to_json(const struct fr_trace *t)
{
	return dump_trace_json(t, true, NULL);
}

int fr_json_text(json_t *doc, size_t flags, char **out, size_t *len)
{
	char *s = doc ? json_dumps(doc, flags) : NULL;
	char *nl;
	size_t n;

	json_decref(doc);
	*out = NULL;
	*len = 0;
	if (!s)
		return -ENOMEM;
	n = strlen(s);
	nl = realloc(s, n + 2);
	if (!nl) {
		free(s);
		return -ENOMEM;
	}
	nl[n] = '\n';
	nl[n + 1] = '\0';
	*out = nl;
	*len = n + 1;
	return 0;
}

int fr_dump_serialize(const struct fr_trace *t, char **out, size_t *len)
{
	return fr_json_text(fr_dump_to_json(t), JSON_COMPACT, out, len);
}

