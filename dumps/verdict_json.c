/*
 * The verdict as JSON (fr_verdict_to_json()): the stable contract that
 * fr-analyze --json and the daemon's incidents print, documented in the
 * README. Keys are added, never renamed or dropped.
 */
#include "correlate_int.h"
#include "dump.h"

#include <string.h>

static json_t *ju64(uint64_t x)
{
	return json_integer(x > INT64_MAX ? INT64_MAX : (json_int_t)x);
}

static int jset(json_t *obj, const char *key, json_t *val)
{
	return val ? json_object_set_new(obj, key, val) : -1;
}

static json_t *ranks_json(const uint32_t *r, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < n; i++) {
		if (json_array_append_new(a, json_integer(r[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* The known members of the verdict's communicator, in communicator order. */
static json_t *comm_ranks_json(const struct fr_verdict *v)
{
	json_t *a = json_array();

	for (uint32_t i = 0; a && i < v->comm_size; i++) {
		if (v->comm_ranks[i] == FR_RANK_UNKNOWN)
			continue;
		if (json_array_append_new(a, json_integer(v->comm_ranks[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* Where a GPU operation is: "enqueued" (the device has not reached it),
 * "started", "completed", or "captured" into a CUDA graph; NULL for an
 * operation not on a GPU. */
const char *fr_corr_gpu_state_name(const struct fr_op *op)
{
	if (!op->gpu && !op->captured)
		return NULL;
	if (op->captured)
		return "captured";
	if (op->state == FR_STATE_COMPLETED)
		return "completed";
	return op->started ? "started" : "enqueued";
}

static json_t *op_json(const struct fr_op *op, const struct fr_verdict *v)
{
	json_t *o = json_object();
	int rc = 0;

	if (!o)
		return NULL;
	rc |= jset(o, "comm", json_string(op->comm));
	/* comm_size tells how many members comm_ranks leaves out as unknown. */
	if (v) {
		rc |= jset(o, "comm_ranks", comm_ranks_json(v));
		rc |= jset(o, "comm_size", json_integer(v->comm_size));
	}
	rc |= jset(o, "seq", ju64(op->seq));
	rc |= jset(o, "type", json_string(fr_op_name(op->type)));
	rc |= jset(o, "count", ju64(op->count));
	rc |= jset(o, "dtype", json_string(op->dtype));
	rc |= jset(o, "bytes", ju64(op->bytes));
	if (op->size_ratio)
		rc |= jset(o, "size_ratio", json_integer(op->size_ratio));
	rc |= jset(o, "root", json_integer(op->root));
	rc |= jset(o, "peer", json_integer(op->peer));
	rc |= jset(o, "is_p2p", json_boolean(is_p2p(op)));
	rc |= jset(o, "nonblocking", json_boolean(op->nonblocking));
	rc |= jset(o, "waited", json_boolean(op->waited));
	rc |= jset(o, "state", json_string(fr_state_name(op->state)));
	if (fr_corr_gpu_state_name(op))
		rc |= jset(o, "gpu_state", json_string(fr_corr_gpu_state_name(op)));
	if (rc) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *fr_op_to_json(const struct fr_op *op)
{
	return op_json(op, NULL);
}

/*
 * The summary (or a class's behaviour) is cut to fit its buffer, possibly
 * inside a UTF-8 sequence of a host or communicator name: drop the broken
 * tail rather than the summary.
 */
static json_t *summary_json(const char *s)
{
	size_t n = strlen(s);
	json_t *j = json_string(s);

	for (size_t cut = 1; !j && cut <= 3 && cut <= n; cut++)
		j = json_stringn(s, n - cut);
	return j ? j : json_string("");
}

static json_t *stragglers_json(const struct fr_verdict *v)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < v->nstragglers; i++) {
		const struct fr_straggler *st = &v->stragglers[i];
		json_t *o = json_pack("{s:I, s:s, s:I, s:I, s:f}", "rank", (json_int_t)st->rank,
				      "comm", st->comm, "late_count", (json_int_t)st->late_count,
				      "matched", (json_int_t)st->matched, "median_late_s",
				      st->median_late_s);

		if (!o || json_array_append_new(a, o) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *window_json(const struct fr_window *w)
{
	return json_pack("{s:I, s:o, s:o}", "rank", (json_int_t)w->rank, "first", ju64(w->first),
			 "last", ju64(w->last));
}

/* {"comms": 0} when every rank kept the same stretch of each communicator. */
static json_t *aligned_json(const struct fr_alignment *a)
{
	json_t *o = json_pack("{s:I}", "comms", (json_int_t)a->ncomms);
	int rc = 0;

	if (!o || !a->ncomms)
		return o;
	rc |= jset(o, "comm", json_string(a->comm));
	rc |= jset(o, "common_first", ju64(a->common_first));
	rc |= jset(o, "common_last", ju64(a->common_last));
	rc |= jset(o, "latest", window_json(&a->latest));
	rc |= jset(o, "earliest", window_json(&a->earliest));
	if (rc) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/*
 * [{"ranks", "count", "majority", "behaviour", "called", "before"}]: the
 * classes of ranks by what they did, the largest first.
 */
static json_t *classes_json(const struct fr_verdict *v)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < v->nclasses; i++) {
		const struct fr_rank_class *c = &v->classes[i];
		json_t *o = json_object();
		int rc = 0;

		if (!o || json_array_append_new(a, o) < 0) {
			json_decref(a);
			return NULL;
		}
		rc |= jset(o, "ranks", ranks_json(c->ranks, c->nranks));
		rc |= jset(o, "count", json_integer((json_int_t)c->nranks));
		rc |= jset(o, "majority", json_boolean(c->majority));
		rc |= jset(o, "behaviour", summary_json(c->behaviour));
		rc |= jset(o, "called", fr_op_to_json(&c->op));
		rc |= jset(o, "before", c->has_before ? fr_op_to_json(&c->before) : json_null());
		if (rc) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* A crashed culprit's "signal", "si_code", "fault_addr" and "stack", as
 * its dump's "crash" says them. */
static int crash_fields(json_t *c, const struct fr_crash *crash)
{
	json_t *cj = fr_crash_to_json(crash);
	json_t *th = json_object_get(cj, "thread");
	int rc = cj ? 0 : -1;

	rc |= jset(c, "signal", json_incref(json_object_get(cj, "signal")));
	rc |= jset(c, "si_code", json_incref(json_object_get(cj, "si_code")));
	rc |= jset(c, "fault_addr", json_incref(json_object_get(cj, "fault_addr")));
	rc |= jset(c, "stack", json_incref(json_object_get(th, "frames")));
	json_decref(cj);
	return rc;
}

/* An nccl_error culprit's "nccl_result", "nccl_result_name", "comm" and
 * "message". */
static int nccl_error_fields(json_t *c, const struct fr_nccl_error *e)
{
	char name[24];
	int rc = 0;

	rc |= jset(c, "nccl_result", json_integer(e->result));
	rc |= jset(c, "nccl_result_name", json_string(fr_nccl_result_name(e->result, name)));
	rc |= jset(c, "comm", json_string(e->comm));
	rc |= jset(c, "message", json_string(e->message));
	return rc;
}

json_t *fr_verdict_to_json(const struct fr_verdict *v)
{
	json_t *o = json_object();
	json_t *cs = json_array();
	int rc = 0;

	if (!o || !cs)
		goto out_free;
	for (size_t i = 0; i < v->nculprits; i++) {
		const struct fr_culprit *cu = &v->culprits[i];
		json_t *c = json_object();

		if (!c || json_array_append_new(cs, c) < 0)
			goto out_free;
		rc |= jset(c, "rank", json_integer(cu->rank));
		rc |= jset(c, "reason", json_string(fr_reason_name(cu->reason)));
		rc |= jset(c, "host", json_string(cu->host));
		rc |= jset(c, "pid", json_integer(cu->pid));
		rc |= jset(c, "last_completed", cu->has_last_completed ?
						fr_op_to_json(&cu->last_completed) : json_null());
		rc |= jset(c, "called", cu->has_op ? fr_op_to_json(&cu->op) : json_null());
		rc |= jset(c, "waited_s", json_real(cu->waited_s));
		if (cu->crash)
			rc |= crash_fields(c, cu->crash);
		if (cu->has_exit && cu->reason == FR_REASON_EXITED)
			rc |= jset(c, "exit_code", cu->exit.has_code ? json_integer(cu->exit.code) :
								       json_null());
		if (cu->has_exit)
			rc |= jset(c, "inflight", json_integer(cu->exit.inflight));
		if (cu->reason == FR_REASON_KILLED)
			rc |= jset(c, "oom_killed", json_boolean(cu->oom_killed));
		if (cu->has_nccl_error)
			rc |= nccl_error_fields(c, &cu->nccl_error);
		if (cu->py_thread)
			rc |= jset(c, "python_frames", fr_pyframes_to_json(cu->py_thread));
		if (cu->py_thread && cu->py_thread->py_truncated)
			rc |= jset(c, "python_truncated", json_true());
	}
	rc |= jset(o, "verdict", json_string(fr_verdict_name(v->kind)));
	rc |= json_object_set_new(o, "culprits", cs);
	cs = NULL;
	rc |= jset(o, "op", v->has_op ? op_json(&v->op, v) : json_null());
	rc |= jset(o, "waiting_ranks", ranks_json(v->waiting, v->nwaiting));
	rc |= jset(o, "waited_s", json_real(v->waited_s));
	rc |= jset(o, "world_size", json_integer(v->world_size));
	rc |= jset(o, "stragglers", stragglers_json(v));
	rc |= jset(o, "aligned", aligned_json(&v->aligned));
	rc |= jset(o, "classes", classes_json(v));
	rc |= jset(o, "summary", summary_json(v->summary));
	if (rc)
		goto out_free;
	return o;
out_free:
	json_decref(cs);
	json_decref(o);
	return NULL;
}
