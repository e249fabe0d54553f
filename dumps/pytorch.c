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

bool fr_pytorch_is_dump(const json_t *root)
{
	return json_is_object(root) && !json_object_get(root, "format") &&
	       json_is_string(json_object_get(root, "version")) &&
	       json_is_array(json_object_get(root, "entries"));
}

/* The job's size as this rank knows it: one past the highest rank any of
 * its process groups names (the default group names them all). A group
 * whose ranks do not read is left to the dump reader to report. */
static uint64_t world_of(const json_t *config, uint32_t rank)
{
	uint64_t world = (uint64_t)rank + 1;
	const char *id;
	json_t *pc;

	json_object_foreach((json_t *)config, id, pc) {
		uint32_t *members;
		size_t n;

		if (fr_dump_read_members(json_object_get(pc, "ranks"), id, &members, &n, NULL, 0))
			continue;
		for (size_t i = 0; i < n; i++)
			if (members[i] != FR_RANK_UNKNOWN && (uint64_t)members[i] + 1 > world)
				world = (uint64_t)members[i] + 1;
		free(members);
	}
	return world;
}

static uint64_t ns_field(const json_t *e, const char *key)
{
	const json_t *v = json_object_get(e, key);

	return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

/* PyTorch writes -1 for "none yet"; our counters start at 0. */
static json_t *status_copy(const json_t *status)
{
	json_t *out = json_object();
	const char *id, *k;
	json_t *ps, *v;

	if (!out || !json_is_object(status))
		return out;
	json_object_foreach((json_t *)status, id, ps) {
		json_t *c = json_is_object(ps) ? json_object() : json_incref(ps);

		if (!c || json_object_set_new(out, id, c) < 0)
			goto out_nomem;
		if (!json_is_object(ps))
			continue;
		json_object_foreach(ps, k, v) {
			json_t *nv = json_is_integer(v) && json_integer_value(v) == -1 ?
					     json_integer(0) : json_incref(v);

			if (!nv || json_object_set_new(c, k, nv) < 0)
				goto out_nomem;
		}
	}
	return out;

out_nomem:
	json_decref(out);
	return NULL;
}

/* "train_step (train.py:201)" */
static json_t *frame_json(const json_t *f)
{
	const char *name = json_string_value(json_object_get(f, "name"));
	const char *file = json_string_value(json_object_get(f, "filename"));
	const json_t *line = json_object_get(f, "line");
	const char *slash = file ? strrchr(file, '/') : NULL;
	char text[256];

	if (file && line && json_is_integer(line))
		snprintf(text, sizeof(text), "%s (%s:%" JSON_INTEGER_FORMAT ")", name ? name : "?",
			 slash ? slash + 1 : file, json_integer_value(line));
	else
		snprintf(text, sizeof(text), "%s", name ? name : "?");
	return json_pack("{s:s, s:i, s:s}", "name", text, "offset", 0, "ip", "0x0");
}

/*
 * The rank's stack: the Python frames of its latest operation not
 * completed (what it waits in), else of its latest one. PyTorch records
 * frames per operation, at its creation, not per thread.
 */
static json_t *threads_json(const json_t *entries)
{
	const json_t *latest = NULL, *open = NULL, *pick, *e, *frames, *f;
	json_t *thread, *out, *list;
	const char *tname;
	size_t i;

	json_array_foreach(entries, i, e) {
		const char *st = json_string_value(json_object_get(e, "state"));

		if (!json_is_array(json_object_get(e, "frames")))
			continue;
		latest = e;
		if (!st || strcmp(st, "completed") != 0)
			open = e;
	}
	pick = open ? open : latest;
	out = json_array();
	if (!out || !pick)
		return out;
	frames = json_object_get(pick, "frames");
	tname = json_string_value(json_object_get(pick, "thread_name"));
	list = json_array();
	thread = json_pack("{s:i, s:s, s:b, s:o}", "tid", 0, "name", tname ? tname : "",
			   "current", 0, "frames", list);
	if (!thread || json_array_append_new(out, thread) < 0)
		goto out_nomem;
	json_array_foreach(frames, i, f) {
		if (i == FRAMES_MAX)
			break;
		if (json_array_append_new(list, frame_json(f)) < 0)
			goto out_nomem;
	}
	return out;

out_nomem:
	json_decref(out);
	return NULL;
}

int fr_pytorch_from_json(const json_t *root, const char *name, uint32_t rank,
			 uint64_t time_ns, struct fr_trace *t, char *err, size_t errlen)
{
	const char *version = json_string_value(json_object_get(root, "version"));
	const json_t *entries = json_object_get(root, "entries");
	const json_t *config = json_object_get(root, "pg_config");
	const json_t *lib = json_object_get(root, "comm_lib_version");
	const json_t *e;
	char reason[64];
	uint64_t latest = 0, timeout = 0, dumped, first_id = 0;
	json_t *w;
	size_t i;
	int rc;

	memset(t, 0, sizeof(*t));
	if (!version || strncmp(version, "2.", 2) != 0)
		return fail(err, errlen, -EPROTO,
			    "%s: PyTorch Flight Recorder version \"%s\" is not supported "
			    "(this build reads 2.x)", name, version ? version : "?");
	if (!json_is_object(config))
		return fail(err, errlen, -EPROTO, "%s: pg_config: expected an object", name);
	json_array_foreach(entries, i, e) {
		uint64_t ts[3] = { ns_field(e, "time_created_ns"),
				   ns_field(e, "time_discovered_started_ns"),
				   ns_field(e, "time_discovered_completed_ns") };
		uint64_t to = ns_field(e, "timeout_ms") * 1000000u;

		for (int k = 0; k < 3; k++)
			if (ts[k] > latest)
				latest = ts[k];
		if (to > timeout)
			timeout = to;
		if (i == 0)
			first_id = ns_field(e, "record_id");
	}
	/*
	 * When the dump was written: its file's time, unless the file was
	 * copied since. PyTorch dumps when an operation times out, so the dump
	 * is at most a timeout after the latest time it holds.
	 */
	dumped = time_ns;
	if (timeout && dumped > latest + timeout)
		dumped = latest + timeout;
	if (dumped < latest)
		dumped = latest;
	snprintf(reason, sizeof(reason), "PyTorch Flight Recorder %s", version);
	/* Entries before the first one kept were lost to the ring's wrap. */
	w = json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:i, s:s, s:s, s:s, s:s, s:I, s:I,"
		      " s:O, s:o, s:O, s:o}",
		      "format", FR_DUMP_FORMAT, "version", FR_DUMP_VERSION, "job", "",
		      "rank", (json_int_t)rank, "world_size", (json_int_t)world_of(config, rank),
		      "host", "", "pid", 0, "status", "dumped", "comm_lib_version",
		      json_is_string(lib) ? json_string_value(lib) : "", "incident", "",
		      "dump_reason", reason, "time_dumped_ns", (json_int_t)dumped,
		      "dropped_entries", (json_int_t)first_id, "pg_config", config, "pg_status",
		      status_copy(json_object_get(root, "pg_status")), "entries", entries,
		      "threads", threads_json(entries));
	if (!w)
		return fail(err, errlen, -ENOMEM, "%s: out of memory", name);
	rc = fr_dump_from_json(w, name, t, err, errlen);
	json_decref(w);
	return rc;
}

int fr_pytorch_parse(const void *buf, size_t len, const char *name, uint32_t rank,
		     uint64_t time_ns, struct fr_trace *t, char *err, size_t errlen)
{
	char why[256];
	json_error_t je;
	json_t *root;
	int rc;

	if (fr_pickle_sniff(buf, len)) {
		root = fr_pickle_load(buf, len, why, sizeof(why));
		if (!root)
			return fail(err, errlen, errno == ENOMEM ? -ENOMEM : -EPROTO,
				    "%s: %s", name, why);
	} else {
		root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
		if (!root)
			return 1;
	}
	if (!fr_pytorch_is_dump(root)) {
		json_decref(root);
		return 1;
	}
	rc = fr_pytorch_from_json(root, name, rank, time_ns, t, err, errlen);
	json_decref(root);
	return rc;
}
