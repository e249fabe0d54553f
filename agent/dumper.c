#include "dumper.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../dumps/dump.h"
#include "agent.h"
#include "crash.h"
#include "link.h"
#include "pyframes.h"
#include "stacks.h"

/* Fills op, of trace t, from its record; -ENOMEM when it cannot. */
static int op_from_record(struct fr_trace *t, struct fr_op *op, const struct fr_rec *rec,
			  const struct fr_comm_rec *c)
{
	int32_t global = fr_comm_global_rank(c, rec->peer);

	op->record_id = rec->record_id;
	if (!(op->comm = fr_trace_strn(t, c->id, strnlen(c->id, sizeof(c->id)))))
		return -ENOMEM;
	op->type = (enum fr_op_type)rec->type;
	op->state = (enum fr_op_state)rec->state;
	op->is_p2p = !!(rec->flags & FR_REC_P2P);
	op->nonblocking = !!(rec->flags & FR_REC_NONBLOCKING);
	op->waited = !!(rec->flags & FR_REC_WAITED);
	op->gpu = !!(rec->flags & FR_REC_GPU);
	op->started = !!(rec->flags & FR_REC_STARTED);
	op->captured = !!(rec->flags & FR_REC_CAPTURED);
	op->seq = rec->seq;
	op->peer = op->is_p2p ? global : -1;
	op->root = fr_op_is_rooted(rec->type) ? global : -1;
	op->peer_in_comm = op->is_p2p || fr_op_is_rooted(rec->type) ? rec->peer : -1;
	op->count = rec->count;
	op->bytes = rec->count * rec->dtype_size;
	/* Names that live as long as the program. */
	op->dtype = fr_dtype_name(rec->dtype);
	op->redop = fr_redop_name(rec->redop);
	op->t_entered_ns = fr_ticks_to_ns(rec->t_entered);
	op->t_completed_ns = fr_ticks_to_ns(rec->t_completed);
	/* When it began to block the rank: at once, at the start of a Wait, or
	 * when the GPU reached it. */
	if (op->waited || op->started)
		op->t_started_ns = fr_ticks_to_ns(rec->t_started);
	else if (!op->nonblocking && !op->gpu)
		op->t_started_ns = op->t_entered_ns;
	return 0;
}

static int add_comms(struct fr_trace *t)
{
	uint32_t n = __atomic_load_n(&fr_agent.ncomms, __ATOMIC_ACQUIRE);
	size_t cap = 0;

	for (uint32_t i = 0; i < n; i++) {
		const struct fr_comm_rec *c = __atomic_load_n(&fr_agent.comms[i], __ATOMIC_ACQUIRE);
		struct fr_comm *out;

		if (!c)
			continue;
		out = fr_trace_add_comm(t, &cap);
		if (!out)
			return -ENOMEM;
		memcpy(out->id, c->id, sizeof(out->id));
		memcpy(out->desc, c->desc, sizeof(out->desc));
		out->rank = c->rank;
		out->size = c->size;
		out->members = malloc(c->size * sizeof(*out->members));
		if (!out->members)
			return -ENOMEM;
		memcpy(out->members, c->members, c->size * sizeof(*out->members));
		out->last_entered = __atomic_load_n(&c->coll_entered, __ATOMIC_RELAXED);
		out->last_completed = __atomic_load_n(&c->coll_completed, __ATOMIC_RELAXED);
	}
	return 0;
}

/*
 * The ring's records from the newest `last` (UINT64_MAX: all it holds, 0:
 * none) on; those it holds and leaves out go to *left_out. `dropped` stays
 * what wrap-around lost, whatever is left out.
 */
static int add_ops(struct fr_trace *t, uint64_t last, uint64_t *left_out)
{
	const struct fr_ring *r = &fr_agent.ring;
	uint64_t head = fr_ring_head(r);
	uint64_t first = head > r->capacity ? head - r->capacity : 0;
	uint64_t from = head - first > last ? head - last : first;
	size_t cap = 0;

	t->dropped = first;
	*left_out = from - first;
	for (uint64_t id = from; id < head; id++) {
		struct fr_rec rec;
		const struct fr_comm_rec *c;
		struct fr_op *op;

		if (!fr_ring_read(r, id, &rec) || !(c = fr_agent.comms[rec.comm]))
			continue;
		op = fr_trace_add_op(t, &cap);
		if (!op)
			return -ENOMEM;
		if (op_from_record(t, op, &rec, c) < 0)
			return -ENOMEM;
	}
	return 0;
}

int fr_dumper_build(struct fr_trace *t, const char *incident, const char *reason,
		    const struct fr_dumper_scope *scope, uint64_t *left_out)
{
	const struct fr_identity *id = &fr_agent.id;
	bool stacks = scope->scope != FR_WIRE_LIVE_TRACE;
	uint64_t last = UINT64_MAX;
	int rc = 0;

	memset(t, 0, sizeof(*t));
	t->status = FR_RANK_DUMPED;
	memcpy(t->job, id->job, sizeof(t->job));
	t->rank = id->rank;
	t->world_size = id->world_size;
	memcpy(t->host, id->host, sizeof(t->host));
	t->pid = id->pid;
	memcpy(t->comm_lib, id->comm_lib, sizeof(t->comm_lib));
	snprintf(t->incident, sizeof(t->incident), "%s", incident);
	snprintf(t->reason, sizeof(t->reason), "%s", reason);
	t->time_ns = fr_now_ns();
	if (scope->scope == FR_WIRE_LIVE_STACKS)
		last = 0;
	else if (scope->scope == FR_WIRE_LIVE_TRACE)
		last = scope->last;
	/* The entries' communicators; a look at stacks shows none. */
	if (last)
		rc = add_comms(t);
	if (!rc)
		rc = add_ops(t, last, left_out);
	if (!rc && stacks)
		rc = fr_stacks_collect(t, fr_agent.cfg.stack_signal);
	if (!rc && stacks)
		rc = fr_pyframes_collect(t);
	if (!rc)
		rc = fr_crash_to_trace(t);
	if (!rc) {
		fr_link_exit_to_trace(t);
		fr_link_nccl_error_to_trace(t);
	}
	if (rc)
		fr_trace_free(t);
	return rc;
}

/*
 * The serialised document of a scoped dump: the dump's, with the scope and
 * the entries left out, so that empty "entries" or no "threads" read as
 * not asked for rather than as none.
 */
static int serialize_scoped(const struct fr_trace *t, const char *scope, uint64_t left_out,
			    char **buf, size_t *len)
{
	json_t *root = fr_dump_to_json(t);

	if (!root || json_object_set_new(root, "scope", json_string(scope)) ||
	    json_object_set_new(root, "entries_left_out", json_integer((json_int_t)left_out))) {
		json_decref(root);
		return -ENOMEM;
	}
	return fr_json_text(root, JSON_COMPACT, buf, len);
}

int fr_dumper_serialize(const char *incident, const char *reason,
			const struct fr_dumper_scope *scope, char **buf, size_t *len)
{
	uint64_t left_out = 0;
	struct fr_trace t;
	int rc;

	*buf = NULL;
	*len = 0;
	rc = fr_dumper_build(&t, incident, reason, scope, &left_out);
	if (rc)
		return rc;
	if (scope->scope == FR_WIRE_LIVE_STACKS)
		rc = serialize_scoped(&t, "stacks", left_out, buf, len);
	else if (scope->scope == FR_WIRE_LIVE_TRACE)
		rc = serialize_scoped(&t, "trace", left_out, buf, len);
	else
		rc = fr_dump_serialize(&t, buf, len);
	fr_trace_free(&t);
	return rc;
}

int fr_dumper_save(const char *incident, const char *buf, size_t len, bool asked, char *path,
		   size_t pathlen, char *err, size_t errlen)
{
	/* Incident directories this process made for a daemon's requests. */
	static unsigned made_for_daemon;
	char name[32];
	bool is_new;
	int top, job, dir, rc;

	err[0] = '\0';
	snprintf(path, pathlen, "%s/%s/%s/rank-%u.json", fr_agent.cfg.dump_dir, fr_agent.id.job,
		 incident, fr_agent.id.rank);
	top = fr_dir_open(AT_FDCWD, fr_agent.cfg.dump_dir, 0700, err, errlen);
	if (top < 0)
		return top;
	job = fr_dir_open(top, fr_agent.id.job, 0700, err, errlen);
	if (job < 0) {
		rc = job;
		goto out_close_top;
	}
	/* A daemon that asks for dump after dump must not fill the disk: a
	 * new incident directory for it only while this process has made
	 * fewer than the cap. A directory another rank of the incident made
	 * already costs nothing. */
	is_new = faccessat(job, incident, F_OK, AT_SYMLINK_NOFOLLOW) != 0;
	if (asked && is_new && made_for_daemon >= FR_DUMPER_MAX_INCIDENTS) {
		snprintf(err, errlen, "this process already made %d incident directories in %s/%s for the daemon's requests, the most it makes",
			 FR_DUMPER_MAX_INCIDENTS, fr_agent.cfg.dump_dir, fr_agent.id.job);
		rc = -EDQUOT;
		goto out_close_job;
	}
	dir = fr_dir_open(job, incident, 0700, err, errlen);
	if (dir < 0) {
		rc = dir;
		goto out_close_job;
	}
	made_for_daemon += asked && is_new;
	snprintf(name, sizeof(name), "rank-%u.json", fr_agent.id.rank);
	rc = fr_write_file_at(dir, name, buf, len, 0600);
	close(dir);
out_close_job:
	close(job);
out_close_top:
	close(top);
	return rc;
}
