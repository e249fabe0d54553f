/*
 * The watchdog: every 100 ms it looks at each job for a sign of a hang (an
 * operation waiting longer than --timeout, a rank silent longer than
 * --heartbeat-timeout, a rank gone without goodbye while others wait on it),
 * and opens an incident for it unless the last incident was already about
 * the same stuck state. It also ends incidents whose dump deadline passed.
 */
#include "watchdog.h"
#include "daemon.h"
#include "clock.h"
#include "cluster_incident.h"
#include "incident.h"
#include "log.h"
#include "node_watchdog.h"
#include "ratelog.h"
#include "registry.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../protocol/hash.h"
#include "../dumps/correlate.h"

/* After a check found the same stuck state again, wait this long to recheck. */
#define WATCHDOG_RECHECK_NS NS_PER_S

static double seconds_between(uint64_t from, uint64_t to)
{
	return to > from ? (double)(to - from) / NS_PER_S : 0.0;
}

static bool rank_active(const struct job_rank *r)
{
	return r && r->conn && !r->finished;
}

/*
 * (a) The longest wait of any connected rank's operation, over --timeout.
 * Only operations that hold their rank count: a posted non-blocking one
 * may rightly stay in flight for the whole run.
 */
static bool trigger_timeout(const struct flightrecd *d, const struct job *job, uint64_t now,
			    struct incident_trigger *t)
{
	const struct rank_op *worst = NULL;
	uint32_t worst_rank = 0;

	for (uint32_t i = 0; i < job->nslots; i++) {
		const struct job_rank *r = job->ranks[i];

		if (!rank_active(r))
			continue;
		for (size_t k = 0; k < r->nops; k++) {
			if (!rank_op_blocks(&r->ops[k]))
				continue;
			if (!worst || r->ops[k].entered_ns < worst->entered_ns) {
				worst = &r->ops[k];
				worst_rank = i;
			}
		}
	}
	if (!worst || seconds_between(worst->entered_ns, now) <= d->cfg.timeout_s)
		return false;
	*t = (struct incident_trigger){
		.reason = "timeout",
		.rank = (int32_t)worst_rank,
		.has_seq = true,
		.seq = worst->w.seq,
		.waited_s = seconds_between(worst->entered_ns, now),
	};
	snprintf(t->comm, sizeof(t->comm), "%s", worst->w.comm);
	return true;
}

/* (b) The longest silence of a connected rank, over --heartbeat-timeout. */
static bool trigger_heartbeat(const struct flightrecd *d, struct job *job, uint64_t now_mono,
			      struct incident_trigger *t)
{
	bool found = false;

	for (uint32_t i = 0; i < job->nslots; i++) {
		struct job_rank *r = job->ranks[i];
		double silent;

		if (!rank_active(r))
			continue;
		silent = seconds_between(r->last_seen_mono, now_mono);
		if (silent <= d->cfg.heartbeat_timeout_s)
			continue;
		if (!r->silence_logged) {
			r->silence_logged = true;
			daemon_log("job %s rank %" PRIu32 " is unresponsive: silent for %.1f s",
				   job->id, i, silent);
		}
		if (found && silent <= t->waited_s)
			continue;
		*t = (struct incident_trigger){
			.reason = "heartbeat",
			.rank = (int32_t)i,
			.waited_s = silent,
		};
		found = true;
	}
	return found;
}

/* The blocking op of another connected rank that waits on `lost`, or NULL. */
static const struct rank_op *op_waiting_on(const struct job *job, uint32_t lost)
{
	for (uint32_t i = 0; i < job->nslots; i++) {
		const struct job_rank *r = job->ranks[i];

		if (i == lost || !rank_active(r))
			continue;
		for (size_t k = 0; k < r->nops; k++) {
			const struct rank_op *op = &r->ops[k];
			const struct job_comm *jc;

			if (!rank_op_blocks(op))
				continue;
			/* A p2p operation whose peer the job can name waits
			 * on that rank only. One from any source, or to a
			 * member nobody has named yet, may wait on any. */
			if (op->w.is_p2p) {
				int32_t peer = registry_op_peer(job, op);

				if (peer >= 0) {
					if (peer == (int32_t)lost)
						return op;
					continue;
				}
			}
			jc = registry_job_comm(job, op->w.comm);
			if (jc && registry_comm_has_member(job, jc, lost))
				return op;
		}
	}
	return NULL;
}

/* (c) A rank gone without goodbye for a while, that someone waits on. */
static bool trigger_disconnect(const struct flightrecd *d, const struct job *job,
			       uint64_t now_mono, struct incident_trigger *t)
{
	double grace = d->cfg.heartbeat_timeout_s < DAEMON_DISCONNECT_GRACE_S ?
			       d->cfg.heartbeat_timeout_s :
			       DAEMON_DISCONNECT_GRACE_S;

	for (uint32_t i = 0; i < job->nslots; i++) {
		const struct job_rank *r = job->ranks[i];
		const struct rank_op *op;
		double gone;

		if (!r || r->conn || r->finished || !r->disconnected)
			continue;
		gone = seconds_between(r->disconnected_mono, now_mono);
		if (gone < grace)
			continue;
		op = op_waiting_on(job, i);
		if (!op)
			continue;
		*t = (struct incident_trigger){
			.reason = "disconnect",
			.rank = (int32_t)i,
			.has_seq = true,
			.seq = op->w.seq,
			.waited_s = gone,
		};
		snprintf(t->comm, sizeof(t->comm), "%s", op->w.comm);
		return true;
	}
	return false;
}

static bool find_trigger(const struct flightrecd *d, struct job *job, uint64_t now,
			 uint64_t now_mono, struct incident_trigger *t)
{
	struct incident_trigger hb;
	bool silent = trigger_heartbeat(d, job, now_mono, &hb);

	if (trigger_timeout(d, job, now, t))
		return true;
	if (silent) {
		*t = hb;
		return true;
	}
	return trigger_disconnect(d, job, now_mono, t);
}

/*
 * Identifies a stuck state: the verdict kind and the op it is about. Ages,
 * wait times and the culprits are left out, so the same hang seen later
 * gives the same key even when what is known of its culprits changes (a
 * late rank connects, a silent one is declared unresponsive).
 */
static uint64_t verdict_key(const struct fr_verdict *v)
{
	uint64_t h = FR_FNV_INIT;
	uint32_t kind = (uint32_t)v->kind;

	h = fr_fnv1a(h, &kind, sizeof(kind));
	if (v->has_op) {
		h = fr_fnv1a(h, v->op.comm, strlen(v->op.comm) + 1);
		h = fr_fnv1a(h, &v->op.seq, sizeof(v->op.seq));
	}
	return h;
}

static void watchdog_check_job(struct flightrecd *d, struct job *job, uint64_t now,
			       uint64_t now_mono)
{
	struct incident_trigger t;
	struct fr_verdict v = { 0 };
	struct live_view lv;
	uint64_t key;

	if (job->active) {
		incident_check_deadline(job->active, now_mono);
		return;
	}
	if (!find_trigger(d, job, now, now_mono, &t)) {
		if (job->has_last_key)
			daemon_log("job %s: the condition of its last incident has cleared", job->id);
		job->has_last_key = false;
		job->has_local_key = false;
		return;
	}
	if (now_mono < job->recheck_mono)
		return;
	job->recheck_mono = now_mono + WATCHDOG_RECHECK_NS;
	if (registry_live_view(d, job, false, &lv))
		return;
	if (registry_live_verdict(&lv, &v) == 0) {
		key = verdict_key(&v);
		/* A crash had its incident at once (incident_open_crash());
		 * its peers' wait is its consequence, not another incident. */
		if (v.kind == FR_VERDICT_CRASH && job->crash_reported) {
			job->has_last_key = true;
			job->last_key = key;
		} else if (!job->has_last_key || key != job->last_key) {
			incident_open(d, job, &t, &v, key);
		}
	}
	fr_verdict_free(&v);
	live_view_free(&lv);
}

/* registry_kill_checks() found a rank killed: its incident, at once. */
static void open_killed(struct flightrecd *d, struct job *job, uint32_t rank)
{
	incident_open_death(d, job, rank, "killed");
}

static void on_watchdog(uv_timer_t *timer)
{
	struct flightrecd *d = timer->data;
	uint64_t now = daemon_now_ns();
	uint64_t now_mono = daemon_mono_ns();

	/* Counts held back for offenders that went quiet get their line. */
	ratelog_sweep(now_mono);
	pthread_mutex_lock(&d->lock);
	registry_forget_idle(d, now_mono);
	for (struct job *job = d->jobs; job; job = job->next) {
		if (job->nkill_pending)
			registry_kill_checks(d, job, now_mono, open_killed);
		watchdog_check_job(d, job, now, now_mono);
	}
	/* Jobs whose ranks connected to node daemons: from their aggregates. */
	node_watchdog_check(d, now_mono);
	cluster_incident_tick(d, now_mono);
	pthread_mutex_unlock(&d->lock);
}

int watchdog_start(struct flightrecd *d)
{
	uv_timer_init(d->loop, &d->watchdog_timer);
	d->watchdog_timer.data = d;
	return uv_timer_start(&d->watchdog_timer, on_watchdog, DAEMON_WATCHDOG_MS,
			      DAEMON_WATCHDOG_MS);
}
