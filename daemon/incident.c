/*
 * Incidents: when the watchdog sees a hang, every connected rank of the job
 * is asked for a dump; the dumps arrive in pieces over the agents'
 * connections, are checked and written as DIR/<job>/<id>/rank-<N>.json, and
 * once every asked rank has answered (or the deadline passed, or the rest
 * went away) manifest.json is written last, with the daemon's live view of
 * every rank and what became of each request.
 *
 * Validation and file writes run on the libuv thread pool, so a big dump
 * never stalls the loop; the manifest waits for them.
 */
#include "incident.h"
#include "daemon.h"
#include "budget.h"
#include "clock.h"
#include "kmsg.h"
#include "log.h"
#include "pool.h"
#include "ratelog.h"
#include "registry.h"
#include "upstream.h"
#include "server.h"
#include "upload.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../dumps/correlate.h"
#include "../dumps/dump.h"


/* How long to wait before trying again when an incident could not be opened. */
#define INCIDENT_RETRY_NS (10ull * NS_PER_S)

/* What became of the dump request to one rank. */
enum incident_answer {
	ANSWER_NEVER_CONNECTED,
	ANSWER_PENDING,       /* asked; no complete dump yet */
	ANSWER_WRITING,       /* complete dump being validated and written */
	ANSWER_RECEIVED,
	ANSWER_INVALID,       /* its dump was malformed or its upload rejected */
	ANSWER_UNRESPONSIVE,  /* connected, but no dump by the deadline */
	ANSWER_DISCONNECTED,
	ANSWER_FINISHED,
};

static const char *const answer_names[] = {
	[ANSWER_NEVER_CONNECTED] = "never_connected",
	[ANSWER_PENDING] = "pending",
	[ANSWER_WRITING] = "pending",
	[ANSWER_RECEIVED] = "received",
	[ANSWER_INVALID] = "invalid",
	[ANSWER_UNRESPONSIVE] = "unresponsive",
	[ANSWER_DISCONNECTED] = "disconnected",
	[ANSWER_FINISHED] = "finished",
};

struct incident_rank {
	enum incident_answer answer;
	bool requested;
	bool dumped;        /* sent a valid dump */
	bool written;       /* rank-N.json is on disk */
	char *error;        /* owned; why the dump is invalid or was not written */
	bool told;          /* the hooks heard of it */
	/* Its dump arriving, while the answer is pending; NULL before the
	 * first piece. Its buffer is charged to the memory budget, and to the
	 * job, as it grows. */
	struct upload *up;
};

struct incident {
	struct flightrecd *d;
	struct job *job;
	char id[FR_INCIDENT_MAX + 1];
	char reason[16];
	/* Short enough that every file name inside fits in PATH_MAX. */
	char dir[PATH_MAX - 32];
	struct incident_trigger trigger;
	uint64_t detected_ns;
	uint64_t opened_ns;
	uint64_t closed_ns;
	uint64_t deadline_mono;
	uint32_t world_size;
	struct incident_rank *ranks;    /* world_size entries */
	unsigned writes;                /* dumps on the thread pool */
	bool closing;
	bool incomplete;                /* closed by shutdown */
	json_t *verdict;                /* live verdict when it opened */
	struct incident_hooks hooks;
	struct live_view snapshot;      /* every rank, taken when it closed */
	/* The manifest's kernel log query, owned by its manifest_write:
	 * borrowed from incident_finish() until incident_done() returns, for
	 * the text hooks.closed is given. */
	struct kmsg_query *kq;
};

/* A complete dump on its way to disk; owns its bytes. */
struct dump_write {
	uv_work_t req;
	struct incident *inc;
	uint32_t rank;
	char job[FR_JOB_MAX + 1];
	uint8_t *data;
	size_t len;
	struct job *charged_job;    /* the memory budget's charge for data */
	uint64_t charged;
	char path[PATH_MAX];
	bool valid;
	int write_err;
	char err[512];
	/* What the hooks' digest made of the dump (incident_hooks). */
	int (*digest)(const void *arg, const struct fr_trace *t, const char *path, uint8_t **out,
		      size_t *len);
	const void *digest_arg;
	uint8_t *digested;
	size_t digested_len;
	int digest_err;
};

/* Manifests of more ranks are written without indentation. */
#define MANIFEST_INDENT_RANKS_MAX 4096

struct manifest_write {
	uv_work_t req;
	struct flightrecd *d;
	void (*done)(void *arg, int err);
	void *arg;
	json_t *doc;
	json_t *(*build)(void *arg);    /* makes `doc` on the thread pool */
	struct kmsg_query *kq;          /* owned; the kernel log to add, or NULL */
	char dir[PATH_MAX - 16];
	char path[PATH_MAX];
	int sync_err;   /* making the dumps durable */
	int err;
};

bool incident_collecting(const struct incident *inc)
{
	return inc && !inc->closing;
}

static void rank_set_error(struct incident_rank *ir, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

void incident_vset_text(char **slot, const char *fmt, va_list ap)
{
	char msg[512];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	free(*slot);
	*slot = strdup(msg);
}

static void rank_set_error(struct incident_rank *ir, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	incident_vset_text(&ir->error, fmt, ap);
	va_end(ap);
}

static struct incident_record *incident_record(struct incident *inc)
{
	struct job *job = inc->job;

	/* The incident being collected is always the newest record. */
	return &job->records[job->nrecords - 1];
}

static void incident_count(const struct incident *inc, uint32_t *answered, uint32_t *requested)
{
	*answered = 0;
	*requested = 0;
	for (uint32_t i = 0; i < inc->world_size; i++) {
		const struct incident_rank *ir = &inc->ranks[i];

		*requested += ir->requested;
		*answered += ir->answer == ANSWER_RECEIVED || ir->answer == ANSWER_INVALID;
	}
}

static void incident_update_record(struct incident *inc)
{
	struct incident_record *rec = incident_record(inc);

	incident_count(inc, &rec->answered, &rec->requested);
}

/* Whether the daemon's rank `rank` died: crashed, exited or was killed. */
static bool rank_died(const struct incident *inc, uint32_t rank)
{
	const struct job_rank *r = registry_rank(inc->job, rank);
	enum rank_state st = r ? registry_rank_state(inc->d, r, daemon_mono_ns()) : RANK_STATE_DISCONNECTED;

	return st == RANK_STATE_CRASHED || st == RANK_STATE_EXITED || st == RANK_STATE_KILLED;
}

/* The closing snapshot's live view of `rank` (ascending by rank), or NULL. */
static const struct fr_trace *snapshot_trace(const struct incident *inc, uint32_t rank)
{
	size_t lo = 0, hi = inc->snapshot.n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct fr_trace *t = &inc->snapshot.traces[mid];

		if (t->rank == rank)
			return t;
		if (t->rank < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/*
 * Tells the hooks that `rank` gave no dump on disk, once, with why. One
 * that died is told once the incident closes, with its live view then.
 */
static void incident_tell_failed(struct incident *inc, uint32_t rank)
{
	struct incident_rank *ir = &inc->ranks[rank];
	const struct fr_trace *live = NULL;
	char why[FR_REASON_MAX + 1];

	if (ir->told || !inc->hooks.failed)
		return;
	if (rank_died(inc, rank)) {
		if (!inc->closing)
			return;
		live = snapshot_trace(inc, rank);
	}
	ir->told = true;
	snprintf(why, sizeof(why), "rank %" PRIu32 ": %s%s%s", rank, answer_names[ir->answer],
		 ir->error ? ": " : "", ir->error ? ir->error : "");
	inc->hooks.failed(inc->hooks.arg, rank, why, live);
}

/* Lets a rank's dump arriving go, with the memory budget's charge for it. */
static void rank_drop_upload(struct incident *inc, struct incident_rank *ir)
{
	if (!ir->up)
		return;
	budget_release_job(inc->job, BUDGET_UPLOADS, ir->up->charged);
	upload_reset(ir->up);
	free(ir->up);
	ir->up = NULL;
}

static void incident_free(struct incident *inc)
{
	for (uint32_t i = 0; inc->ranks && i < inc->world_size; i++) {
		rank_drop_upload(inc, &inc->ranks[i]);
		free(inc->ranks[i].error);
	}
	free(inc->ranks);
	json_decref(inc->verdict);
	live_view_free(&inc->snapshot);
	free(inc);
}

/* The time part of incident ids: when the hang was detected, in UTC. */
static void stamp_of(uint64_t detected_ns, char *stamp, size_t len)
{
	time_t secs = (time_t)(detected_ns / NS_PER_S);
	struct tm tm;

	gmtime_r(&secs, &tm);
	strftime(stamp, len, "%Y%m%dT%H%M%SZ", &tm);
}

static void incident_stamp(const struct incident *inc, char *stamp, size_t len)
{
	stamp_of(inc->detected_ns, stamp, len);
}

int incident_make_dir_for(struct flightrecd *d, const char *job, uint64_t detected_ns, char *id,
			  size_t idcap, char *dir, size_t dircap)
{
	char jobdir[PATH_MAX];
	char stamp[32];
	int err;

	/* Every caller had the id checked; a path outside DIR must still
	 * never come of one that was not ("../x", "a/b"). */
	if (!fr_wire_valid_name(job))
		return -EINVAL;
	stamp_of(detected_ns, stamp, sizeof(stamp));
	if ((size_t)snprintf(jobdir, sizeof(jobdir), "%s/%s", d->cfg.dump_dir, job) >=
	    sizeof(jobdir))
		return -ENAMETOOLONG;
	err = fr_mkdir_p(jobdir);
	if (err)
		return err;
	for (int tries = 0; tries < 1000; tries++) {
		snprintf(id, idcap, "%s-%" PRIu64, stamp, ++d->incident_seq);
		if ((size_t)snprintf(dir, dircap, "%s/%s", jobdir, id) >= dircap)
			return -ENAMETOOLONG;
		if (mkdir(dir, 0755) == 0)
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

/* Creates DIR/<job>/<id>/, choosing an id whose directory does not exist yet. */
static int incident_make_dir(struct incident *inc)
{
	return incident_make_dir_for(inc->d, inc->job->id, inc->detected_ns, inc->id,
				     sizeof(inc->id), inc->dir, sizeof(inc->dir));
}

struct incident_record *incident_record_push(struct incident_record **records, size_t *n,
					     const char *id, const char *reason,
					     const char *summary, uint64_t opened_ns)
{
	struct incident_record *rec;

	if (*n == DAEMON_MAX_INCIDENT_RECORDS) {
		memmove(*records, *records + 1, (*n - 1) * sizeof(**records));
		(*n)--;
	} else {
		rec = realloc(*records, (*n + 1) * sizeof(*rec));
		if (!rec)
			return NULL;
		*records = rec;
	}
	rec = &(*records)[(*n)++];
	memset(rec, 0, sizeof(*rec));
	snprintf(rec->id, sizeof(rec->id), "%s", id);
	snprintf(rec->reason, sizeof(rec->reason), "%s", reason);
	snprintf(rec->summary, sizeof(rec->summary), "%s", summary);
	rec->opened_ns = opened_ns;
	return rec;
}

static int incident_add_record(struct incident *inc, const struct fr_verdict *v)
{
	struct job *job = inc->job;

	return incident_record_push(&job->records, &job->nrecords, inc->id, inc->reason,
				    v->summary, inc->opened_ns) ? 0 : -ENOMEM;
}

/*
 * Why rank `rank`, gone without goodbye, gave no dump, when the daemon can
 * tell: it crashed itself, or its connection dropped right after another
 * rank's crash.
 */
static void incident_note_gone(struct incident *inc, uint32_t rank)
{
	const struct job *job = inc->job;
	const struct job_rank *r = registry_rank(job, rank);
	struct incident_rank *ir = &inc->ranks[rank];
	char sname[16];

	if (!r || r->finished || ir->error)
		return;
	if (r->crash) {
		rank_set_error(ir, "crashed: %s at 0x%" PRIx64 "; it died before its dump was taken",
			       fr_signal_name(r->crash->signo, sname), r->crash->fault_addr);
	} else if (r->has_nccl_error) {
		rank_set_error(ir, "NCCL error on %s (result %" PRIu32 "); it left before its dump was taken",
			       r->nccl_error.comm, r->nccl_error.result);
	} else if (r->has_exit && r->exit.kind == FR_EXIT_KILLED) {
		rank_set_error(ir, "killed or lost: its process is gone without a goodbye; it died before its dump was taken");
	} else if (r->has_exit && r->exit.has_code) {
		rank_set_error(ir, "exited (code %" PRId32 ") before its dump was taken",
			       r->exit.code);
	} else if (r->has_exit) {
		rank_set_error(ir, "exited before its dump was taken");
	} else if (job->has_crash && r->disconnected && r->disconnected_mono >= job->crash_mono &&
		   r->disconnected_mono - job->crash_mono <= INCIDENT_KILL_WINDOW_NS) {
		rank_set_error(ir, "killed by the launcher: its connection dropped without a goodbye %.0f ms after rank %" PRIu32 " %s",
			       (double)(r->disconnected_mono - job->crash_mono) / 1e6,
			       job->crash_rank, job->crash_what ? job->crash_what : "crashed");
	}
}

static void incident_request(struct incident *inc, struct conn *c)
{
	struct incident_rank *ir = &inc->ranks[c->rank];
	int err = conn_send_dump_request(c, inc->id, inc->reason);

	ir->requested = true;
	if (err) {
		daemon_log("cannot send the dump request of incident %s to job %s rank %" PRIu32 ": %s",
			   inc->id, inc->job->id, c->rank, strerror(-err));
		ir->answer = ANSWER_DISCONNECTED;
		return;
	}
	ir->answer = ANSWER_PENDING;
}

/* Asks every connected rank for its dump; notes why the others cannot answer. */
static void incident_request_all(struct incident *inc)
{
	for (uint32_t i = 0; i < inc->world_size; i++) {
		struct job_rank *r = registry_rank(inc->job, i);
		struct incident_rank *ir = &inc->ranks[i];

		if (!r)
			ir->answer = ANSWER_NEVER_CONNECTED;
		else if (r->finished)
			ir->answer = ANSWER_FINISHED;
		else if (!r->conn) {
			ir->answer = ANSWER_DISCONNECTED;
			incident_note_gone(inc, i);
		} else
			incident_request(inc, r->conn);
	}
}

/*
 * The incident cannot be stored: the ranks are still asked to dump, so that
 * the evidence survives in their local copies (FLIGHTREC_DUMP_DIR), once per
 * stuck state rather than at every retry. Their uploads are then ignored,
 * since no incident of that id is being collected.
 */
static void incident_request_local(struct incident *inc, uint64_t key)
{
	struct job *job = inc->job;
	char stamp[32];
	uint32_t asked = 0;

	if (job->has_local_key && job->local_key == key)
		return;
	job->has_local_key = true;
	job->local_key = key;
	incident_stamp(inc, stamp, sizeof(stamp));
	snprintf(inc->id, sizeof(inc->id), "%s-%" PRIu64, stamp, ++inc->d->incident_seq);
	for (uint32_t i = 0; i < inc->world_size; i++) {
		struct job_rank *r = registry_rank(job, i);

		if (r && r->conn && !r->finished &&
		    conn_send_dump_request(r->conn, inc->id, inc->reason) == 0)
			asked++;
	}
	daemon_log("incident %s of job %s is not stored: asked %" PRIu32 " of %" PRIu32
		   " ranks to keep their dumps locally", inc->id, job->id, asked, inc->world_size);
}

static void incident_log_open(const struct incident *inc, const struct fr_verdict *v)
{
	const struct incident_trigger *t = &inc->trigger;
	char what[160];

	if (t->comm[0])
		snprintf(what, sizeof(what), "rank %" PRId32 ", comm %s seq %" PRIu64 ", %.1f s",
			 t->rank, t->comm, t->seq, t->waited_s);
	else
		snprintf(what, sizeof(what), "rank %" PRId32 ", %.1f s", t->rank, t->waited_s);
	daemon_log("incident %s opened for job %s: reason %s (%s); live verdict: %s", inc->id,
		   inc->job->id, inc->reason, what, v->summary);
}

static void incident_check_done(struct incident *inc)
{
	if (inc->closing)
		return;
	for (uint32_t i = 0; i < inc->world_size; i++) {
		enum incident_answer a = inc->ranks[i].answer;

		if (a == ANSWER_PENDING || a == ANSWER_WRITING)
			return;
	}
	incident_close(inc, false);
}

/*
 * Brings the job's incident budget up to now: --max-incidents-per-hour is a
 * token bucket holding at most that many, refilled at that many an hour,
 * so a job may open a burst of them and then one every 3600/N seconds. A
 * lowered limit takes effect at once; a raised one fills up over time.
 */
static void incident_budget_refill(const struct flightrecd *d, double *budget, bool *set,
				   uint64_t *mono, uint64_t now_mono)
{
	double limit = d->cfg.max_incidents_per_hour;

	if (!*set) {
		*budget = limit;
		*set = true;
	} else if (now_mono > *mono) {
		*budget += (double)(now_mono - *mono) / (3600.0 * NS_PER_S) * limit;
	}
	if (*budget > limit)
		*budget = limit;
	*mono = now_mono;
}

bool incident_bucket_allows(const struct flightrecd *d, double *budget, bool *set, uint64_t *mono,
			    uint64_t now_mono, uint64_t *retry_after_s)
{
	double limit = d->cfg.max_incidents_per_hour;

	incident_budget_refill(d, budget, set, mono, now_mono);
	if (*budget >= 1.0)
		return true;
	/* Whole seconds, rounded up: asking again then succeeds. */
	*retry_after_s = (uint64_t)((1.0 - *budget) * 3600.0 / limit) + 1;
	return false;
}

bool incident_rate_allows(struct flightrecd *d, struct job *job, uint64_t now_mono,
			  uint64_t *retry_after_s)
{
	return incident_bucket_allows(d, &job->incident_budget, &job->incident_budget_set,
				      &job->incident_budget_mono, now_mono, retry_after_s);
}

void incident_suppress(struct flightrecd *d, struct job *job, const char *reason,
		       uint64_t retry_after_s)
{
	d->m.incidents_suppressed++;
	ratelog("incident rate", job->id,
		"job %s: incident (%s) suppressed: over --max-incidents-per-hour %" PRIu32
		"; the next may open in %" PRIu64 " s",
		job->id, reason, d->cfg.max_incidents_per_hour, retry_after_s);
}

static void incident_open_with(struct flightrecd *d, struct job *job,
			       const struct incident_trigger *t, const struct fr_verdict *v,
			       uint64_t key, const struct incident_hooks *hooks);

void incident_open(struct flightrecd *d, struct job *job, const struct incident_trigger *t,
		   const struct fr_verdict *v, uint64_t key)
{
	incident_open_with(d, job, t, v, key, NULL);
}

int incident_open_asked(struct flightrecd *d, struct job *job, const struct incident_trigger *t,
			const struct incident_hooks *hooks)
{
	struct fr_verdict v = { 0 };
	struct live_view lv;
	bool had_key = job->has_last_key;
	bool had_local = job->has_local_key;
	uint64_t key = job->last_key;
	uint64_t local_key = job->local_key;
	uint64_t recheck = job->recheck_mono;
	uint64_t opened = d->m.incidents;
	int err;

	if (registry_live_view(d, job, false, &lv))
		return -ENOMEM;
	err = registry_live_verdict(&lv, &v);
	if (!err) {
		incident_open_with(d, job, t, &v, key, hooks);
		fr_verdict_free(&v);
	}
	live_view_free(&lv);
	/* Not the watchdog's: its memory of which hang it reported stays. */
	job->has_last_key = had_key;
	job->last_key = key;
	job->has_local_key = had_local;
	job->local_key = local_key;
	job->recheck_mono = recheck;
	if (err)
		return err;
	return d->m.incidents == opened ? -EIO : 0;
}

void incident_open_death(struct flightrecd *d, struct job *job, uint32_t rank,
			 const char *reason)
{
	struct incident_trigger t = { .reason = reason, .rank = (int32_t)rank };
	const struct job_rank *r = registry_rank(job, rank);
	uint64_t retry_after;

	if (job->crash_reported)
		return;
	/* A node daemon whose central daemon hears of deaths (protocol 7:
	 * NODE_RANKS says crashed, exited, killed) leaves the incident to
	 * it: it asks every node of the job at once, this one too. An NCCL
	 * error changes no rank's state: the node opens that one. */
	if (d->cfg.upstream && upstream_central_version() >= 7 && strcmp(reason, "nccl_error") != 0) {
		daemon_log("job %s: rank %" PRIu32 " %s: the central daemon is told, and opens the "
			   "incident", job->id, rank, job->crash_what ? job->crash_what : "died");
		job->crash_reported = true;
		return;
	}
	if (job->active) {
		daemon_log("job %s: rank %" PRIu32 " %s while incident %s is collecting; its manifest shows it",
			   job->id, rank, job->crash_what ? job->crash_what : "crashed",
			   job->active->id);
		job->crash_reported = true;
		return;
	}
	if (!incident_rate_allows(d, job, daemon_mono_ns(), &retry_after)) {
		incident_suppress(d, job, t.reason, retry_after);
		return;
	}
	/* The operation it died in, if it was in one. */
	for (size_t i = 0; r && i < r->nops; i++) {
		if (!rank_op_blocks(&r->ops[i]))
			continue;
		snprintf(t.comm, sizeof(t.comm), "%s", r->ops[i].w.comm);
		t.has_seq = true;
		t.seq = r->ops[i].w.seq;
		break;
	}
	job->crash_reported = true;
	if (incident_open_asked(d, job, &t, NULL))
		job->crash_reported = false;
}

static void incident_open_with(struct flightrecd *d, struct job *job,
			       const struct incident_trigger *t, const struct fr_verdict *v,
			       uint64_t key, const struct incident_hooks *hooks)
{
	struct incident *inc;
	uint64_t retry_after;
	int err;

	if (!incident_rate_allows(d, job, daemon_mono_ns(), &retry_after)) {
		incident_suppress(d, job, t->reason, retry_after);
		/* A stuck state is suppressed once, as it would be reported once. */
		job->has_last_key = true;
		job->last_key = key;
		return;
	}
	inc = calloc(1, sizeof(*inc));
	if (!inc || !(inc->ranks = calloc(job->world_size, sizeof(*inc->ranks))))
		goto out_nomem;
	inc->d = d;
	inc->job = job;
	inc->world_size = job->world_size;
	inc->trigger = *t;
	if (hooks)
		inc->hooks = *hooks;
	snprintf(inc->reason, sizeof(inc->reason), "%s", t->reason);
	inc->detected_ns = daemon_now_ns();
	err = incident_make_dir(inc);
	if (err) {
		daemon_log("cannot create the incident directory for job %s under %s: %s", job->id,
			   d->cfg.dump_dir, strerror(-err));
		d->m.incident_write_errors++;
		incident_request_local(inc, key);
		/* Retrying every second would only repeat this line. */
		job->recheck_mono = daemon_mono_ns() + INCIDENT_RETRY_NS;
		incident_free(inc);
		return;
	}
	inc->opened_ns = daemon_now_ns();
	inc->deadline_mono = daemon_mono_ns() + (uint64_t)(d->cfg.dump_deadline_s * NS_PER_S);
	inc->verdict = fr_verdict_to_json(v);
	if (!inc->verdict || incident_add_record(inc, v))
		goto out_nomem;
	job->active = inc;
	job->has_last_key = true;
	job->last_key = key;
	d->m.incidents++;
	job->incident_budget -= 1.0;
	incident_log_open(inc, v);
	incident_request_all(inc);
	incident_update_record(inc);
	incident_check_done(inc);
	return;

out_nomem:
	daemon_log("out of memory opening an incident for job %s", job->id);
	if (inc)
		incident_free(inc);
}

void incident_rank_joined(struct incident *inc, struct conn *c)
{
	enum incident_answer a;

	if (inc->closing || c->rank >= inc->world_size)
		return;
	a = inc->ranks[c->rank].answer;
	if (a == ANSWER_RECEIVED || a == ANSWER_INVALID || a == ANSWER_WRITING)
		return;
	/* A new connection of the rank sends its dump from the start. */
	rank_drop_upload(inc, &inc->ranks[c->rank]);
	incident_request(inc, c);
	incident_update_record(inc);
}

void incident_rank_left(struct incident *inc, uint32_t rank, bool finished)
{
	struct incident_rank *ir;

	if (inc->closing || rank >= inc->world_size)
		return;
	ir = &inc->ranks[rank];
	if (ir->answer != ANSWER_PENDING)
		return;
	ir->answer = finished ? ANSWER_FINISHED : ANSWER_DISCONNECTED;
	rank_drop_upload(inc, ir);
	if (!finished)
		incident_note_gone(inc, rank);
	incident_check_done(inc);
}

void incident_check_deadline(struct incident *inc, uint64_t now_mono)
{
	if (inc->closing || now_mono < inc->deadline_mono)
		return;
	daemon_log("incident %s of job %s: dump deadline passed", inc->id, inc->job->id);
	incident_close(inc, false);
}

/* Gives up on a rank still owing its dump when the incident closes. */
static void incident_give_up(struct incident *inc, uint32_t rank)
{
	struct incident_rank *ir = &inc->ranks[rank];
	struct job_rank *r = registry_rank(inc->job, rank);
	struct conn *c = r ? r->conn : NULL;

	if (ir->answer != ANSWER_PENDING)
		return;
	if (!c) {
		ir->answer = ANSWER_DISCONNECTED;
		rank_drop_upload(inc, ir);
		incident_note_gone(inc, rank);
		return;
	}
	ir->answer = ANSWER_UNRESPONSIVE;
	if (ir->up && ir->up->active)
		rank_set_error(ir, "upload incomplete: %" PRIu64 " of %" PRIu64 " bytes received",
			       ir->up->received, ir->up->total);
	rank_drop_upload(inc, ir);
}

static void incident_finish(struct incident *inc);

void incident_close(struct incident *inc, bool incomplete)
{
	if (inc->closing)
		return;
	inc->closing = true;
	inc->incomplete = incomplete;
	inc->closed_ns = daemon_now_ns();
	for (uint32_t i = 0; i < inc->world_size; i++)
		incident_give_up(inc, i);
	incident_update_record(inc);
	if (registry_manifest_view(inc->d, inc->job, &inc->snapshot))
		daemon_log("out of memory taking the live view of incident %s", inc->id);
	for (size_t i = 0; i < inc->snapshot.n; i++) {
		struct fr_trace *t = &inc->snapshot.traces[i];

		snprintf(t->incident, sizeof(t->incident), "%s", inc->id);
		snprintf(t->reason, sizeof(t->reason), "%s", inc->reason);
	}
	if (inc->writes == 0)
		incident_finish(inc);
}

json_t *incident_trigger_json(const struct incident_trigger *t)
{
	return json_pack("{s:o, s:o, s:o, s:f}", "rank",
			 t->rank >= 0 ? json_integer(t->rank) : json_null(), "comm",
			 t->comm[0] ? json_string(t->comm) : json_null(), "seq",
			 t->has_seq ? json_integer((json_int_t)t->seq) : json_null(), "waited_s",
			 t->waited_s);
}

/* Adds what became of the request to one rank's object in the manifest. */
static void annotate_rank(json_t *obj, uint32_t rank, const struct incident_rank *ir)
{
	char name[32];

	snprintf(name, sizeof(name), "rank-%" PRIu32 ".json", rank);
	json_object_set_new(obj, "dump", ir->written ? json_string(name) : json_null());
	json_object_set_new(obj, "answer", json_string(answer_names[ir->answer]));
	json_object_set_new(obj, "error", ir->error ? json_string(ir->error) : json_null());
}

static json_t *incident_manifest(struct incident *inc)
{
	struct live_view *lv = &inc->snapshot;
	json_t *doc;
	json_t *ranks;
	json_t *obj;
	size_t i;

	for (i = 0; i < lv->n; i++)
		if (lv->traces[i].rank < inc->world_size && inc->ranks[lv->traces[i].rank].dumped)
			lv->traces[i].status = FR_RANK_DUMPED;
	doc = fr_manifest_to_json(inc->job->id, inc->id, inc->reason, inc->world_size,
				  inc->opened_ns, inc->closed_ns, lv->ptrs, lv->n, inc->verdict);
	if (!doc)
		return NULL;
	ranks = json_object_get(doc, "ranks");
	json_array_foreach(ranks, i, obj) {
		json_t *jr = json_object_get(obj, "rank");
		json_int_t rank = json_is_integer(jr) ? json_integer_value(jr) : (json_int_t)i;

		if (rank >= 0 && (uint64_t)rank < inc->world_size)
			annotate_rank(obj, (uint32_t)rank, &inc->ranks[rank]);
	}
	json_object_set_new(doc, "trigger", incident_trigger_json(&inc->trigger));
	json_object_set_new(doc, "detected_ns", json_integer((json_int_t)inc->detected_ns));
	json_object_set_new(doc, "incomplete", json_boolean(inc->incomplete));
	return doc;
}

static void manifest_work(uv_work_t *req)
{
	struct manifest_write *w = req->data;
	char *text;

	pool_background();

	if (!w->doc && w->build)
		w->doc = w->build(w->arg);
	/* Without memory for it, the manifest goes without. */
	if (w->doc && w->kq)
		(void)kmsg_add_to_manifest(w->doc, w->kq);
	/* Indented for a person up to a few thousand ranks; past that the
	 * white space was a third of a 41 MB manifest at 65,536 ranks, and
	 * half the time it took to write. */
	text = w->doc ? json_dumps(w->doc, json_array_size(json_object_get(w->doc, "ranks")) >
						   MANIFEST_INDENT_RANKS_MAX ? JSON_COMPACT :
									       JSON_INDENT(2)) :
			NULL;

	if (!text) {
		w->err = -ENOMEM;
		return;
	}
	/* The dumps went to disk unsynced: durable first, then the
	 * manifest that says the incident is whole. */
	w->sync_err = fr_sync_dir(w->dir);
	w->err = fr_write_file_atomic_mode(w->path, text, strlen(text), 0640);
	free(text);
}

/* The manifest is on disk, or could not be (logged, counted); the caller holds the lock. */
static void manifest_apply(struct manifest_write *w)
{
	if (w->sync_err) {
		daemon_log("cannot make the dumps in %s durable: %s", w->dir, strerror(-w->sync_err));
		w->d->m.incident_write_errors++;
	}
	if (w->err) {
		daemon_log("cannot write %s: %s", w->path, strerror(-w->err));
		w->d->m.incident_write_errors++;
	}
	w->done(w->arg, w->err);
	json_decref(w->doc);
	kmsg_query_free(w->kq);
	free(w);
}

static void manifest_after(uv_work_t *req, int status)
{
	struct manifest_write *w = req->data;
	struct flightrecd *d = w->d;

	(void)status;
	pthread_mutex_lock(&d->lock);
	manifest_apply(w);
	pthread_mutex_unlock(&d->lock);
}

static void write_manifest(struct flightrecd *d, const char *dir, json_t *doc,
			   json_t *(*build)(void *arg), struct kmsg_query *kq,
			   void (*done)(void *arg, int err), void *arg)
{
	struct manifest_write *w = calloc(1, sizeof(*w));

	if (!w) {
		json_decref(doc);
		daemon_log("cannot write %s/manifest.json: out of memory", dir);
		d->m.incident_write_errors++;
		done(arg, -ENOMEM);
		/* After done(), which may read it as manifest_apply() lets it. */
		kmsg_query_free(kq);
		return;
	}
	w->req.data = w;
	w->d = d;
	w->done = done;
	w->arg = arg;
	w->doc = doc;
	w->build = build;
	w->kq = kq;
	snprintf(w->dir, sizeof(w->dir), "%s", dir);
	snprintf(w->path, sizeof(w->path), "%s/manifest.json", dir);
	if ((!doc && !build) || uv_queue_work(d->loop, &w->req, manifest_work, manifest_after)) {
		manifest_work(&w->req);
		manifest_apply(w);
	}
}

void incident_write_manifest(struct flightrecd *d, const char *dir, json_t *doc,
			     void (*done)(void *arg, int err), void *arg)
{
	write_manifest(d, dir, doc, NULL, NULL, done, arg);
}

void incident_build_manifest(struct flightrecd *d, const char *dir, json_t *(*build)(void *arg),
			     void (*done)(void *arg, int err), void *arg)
{
	write_manifest(d, dir, NULL, build, NULL, done, arg);
}

void incident_log_closed(const struct incident_record *rec, const char *job, const char *dir)
{
	daemon_log("incident %s of job %s closed%s: answered %" PRIu32 " of %" PRIu32 ", %s",
		   rec->id, job, rec->incomplete ? " (incomplete)" : "", rec->answered,
		   rec->requested, dir);
}

/* The manifest is on disk (or could not be): the incident is over. */
static void incident_done(void *arg, int err)
{
	struct incident *inc = arg;
	struct incident_record *rec = incident_record(inc);

	(void)err;
	incident_update_record(inc);
	rec->closed_ns = inc->closed_ns;
	rec->incomplete = inc->incomplete;
	incident_log_closed(rec, inc->job->id, inc->dir);
	inc->job->active = NULL;
	/* The ranks the daemon holds or held and that gave nothing. */
	for (uint32_t i = 0; i < inc->world_size; i++)
		if (!inc->ranks[i].written && registry_rank(inc->job, i))
			incident_tell_failed(inc, i);
	if (inc->hooks.closed)
		inc->hooks.closed(inc->hooks.arg, inc->kq ? inc->kq->text : NULL,
				  inc->kq ? inc->kq->text_len : 0);
	incident_free(inc);
}

/* Builds the manifest and writes it last, on the thread pool, with the
 * node's kernel log of the incident (read there: kmsg.h). */
static void incident_finish(struct incident *inc)
{
	inc->kq = kmsg_query_of_view(&inc->snapshot, inc->detected_ns);
	if (inc->kq)
		inc->kq->keep_text = inc->hooks.closed != NULL;
	write_manifest(inc->d, inc->dir, incident_manifest(inc), NULL, inc->kq, incident_done,
		       inc);
}

bool incident_dump_check(const uint8_t *data, size_t len, const char *job, uint32_t rank,
			 struct fr_trace *t, char *err, size_t cap)
{
	char name[32];

	snprintf(name, sizeof(name), "rank-%" PRIu32 ".json", rank);
	if (fr_dump_parse((const char *)data, len, name, t, err, cap))
		return false;
	if (t->rank != rank || strcmp(t->job, job) != 0) {
		snprintf(err, cap, "%s: dump is of job %s rank %" PRIu32 ", expected job %s rank %" PRIu32,
			 name, t->job, t->rank, job, rank);
		fr_trace_free(t);
		return false;
	}
	return true;
}

static void dump_work(uv_work_t *req)
{
	struct dump_write *w = req->data;
	struct fr_trace t = { 0 };

	pool_background();

	if (!incident_dump_check(w->data, w->len, w->job, w->rank, &t, w->err, sizeof(w->err)))
		return;
	w->valid = true;
	/* Synced with the others before the manifest (manifest_work()). */
	w->write_err = fr_write_file_unsynced(w->path, w->data, w->len, 0640);
	/* Its bytes are not needed any more: only the digest waits for the loop. */
	free(w->data);
	w->data = NULL;
	if (w->digest && !w->write_err)
		w->digest_err = w->digest(w->digest_arg, &t, w->path, &w->digested, &w->digested_len);
	fr_trace_free(&t);
}

static void dump_record_result(struct incident *inc, struct dump_write *w)
{
	struct flightrecd *d = inc->d;
	struct incident_rank *ir = &inc->ranks[w->rank];

	if (!w->valid) {
		ir->answer = ANSWER_INVALID;
		rank_set_error(ir, "%s", w->err);
		incident_tell_failed(inc, w->rank);
		d->m.dumps_invalid++;
		daemon_log("invalid dump from job %s rank %" PRIu32 " for incident %s: %s",
			   inc->job->id, w->rank, inc->id, w->err);
		return;
	}
	ir->answer = ANSWER_RECEIVED;
	ir->dumped = true;
	if (w->write_err) {
		daemon_log("cannot write %s: %s", w->path, strerror(-w->write_err));
		rank_set_error(ir, "cannot write rank-%" PRIu32 ".json: %s", w->rank,
			       strerror(-w->write_err));
		d->m.incident_write_errors++;
		incident_tell_failed(inc, w->rank);
		return;
	}
	ir->written = true;
	if (inc->hooks.written) {
		ir->told = true;
		inc->hooks.written(inc->hooks.arg, w->rank, w->path, w->digested, w->digested_len,
				   w->digested	      ? 0 :
				   !w->digest	      ? -ENOENT :
				   w->digest_err      ? w->digest_err :
							-EIO);
		w->digested = NULL;
	}
	daemon_log("received the dump of job %s rank %" PRIu32 " for incident %s (%zu bytes)",
		   inc->job->id, w->rank, inc->id, w->len);
}

/* Applies a finished dump write; the caller holds the lock. */
static void dump_apply(struct dump_write *w)
{
	struct incident *inc = w->inc;

	inc->writes--;
	dump_record_result(inc, w);
	if (inc->closing) {
		if (inc->writes == 0)
			incident_finish(inc);
	} else {
		incident_update_record(inc);
		incident_check_done(inc);
	}
	budget_release_job(w->charged_job, BUDGET_UPLOADS, w->charged);
	free(w->digested);
	free(w->data);
	free(w);
}

static void dump_after(uv_work_t *req, int status)
{
	struct dump_write *w = req->data;
	struct flightrecd *d = w->inc->d;

	(void)status;
	pthread_mutex_lock(&d->lock);
	dump_apply(w);
	pthread_mutex_unlock(&d->lock);
}

/* The last piece arrived: validate and write the dump off the loop. */
static void upload_complete(struct incident *inc, uint32_t rank)
{
	struct incident_rank *ir = &inc->ranks[rank];
	struct dump_write *w = calloc(1, sizeof(*w));

	if (!w) {
		ir->answer = ANSWER_INVALID;
		rank_set_error(ir, "out of memory");
		rank_drop_upload(inc, ir);
		incident_check_done(inc);
		return;
	}
	w->req.data = w;
	w->inc = inc;
	w->rank = rank;
	snprintf(w->job, sizeof(w->job), "%s", inc->job->id);
	snprintf(w->path, sizeof(w->path), "%s/rank-%" PRIu32 ".json", inc->dir, rank);
	/* The budget's charge goes with the bytes, until they are written. */
	w->charged_job = inc->job;
	w->charged = ir->up->charged;
	w->data = upload_take(ir->up, &w->len);
	w->digest = inc->hooks.digest;
	w->digest_arg = inc->hooks.arg;
	free(ir->up);
	ir->up = NULL;
	ir->answer = ANSWER_WRITING;
	inc->writes++;
	inc->d->m.dumps_received++;
	if (uv_queue_work(inc->d->loop, &w->req, dump_work, dump_after)) {
		dump_work(&w->req);
		dump_apply(w);
	}
}

/* Refuses a rank's upload for `why`: its answer becomes invalid, the connection stays. */
static void upload_reject(struct incident *inc, uint32_t rank, const char *why)
{
	struct incident_rank *ir = &inc->ranks[rank];

	inc->d->m.dumps_rejected++;
	ir->answer = ANSWER_INVALID;
	rank_set_error(ir, "%s", why);
	/* Once per job a minute: every rank of a job may send one too big. */
	ratelog("dump upload", inc->job->id,
		"rejected the dump of job %s rank %" PRIu32 " for incident %s: %s", inc->job->id,
		rank, inc->id, why);
	rank_drop_upload(inc, ir);
	incident_update_record(inc);
	incident_check_done(inc);
}

/*
 * Charges the memory budget for what the upload's buffer is about to
 * grow by. Over the budget (the daemon's, or half of it for the job), the
 * upload is refused: the rank's dump is recorded as refused with the
 * reason, the memory held by others stays, and the connection stays too
 * (the daemon asked for this dump: the rank is no offender).
 */
static bool upload_charge(void *ctx, struct upload *up, uint64_t grow, uint32_t len, char *why,
			  size_t cap)
{
	struct incident *inc = ctx;

	(void)len;
	return incident_charge_upload(inc->job, up, grow, why, cap);
}

bool incident_charge_upload(struct job *job, struct upload *up, uint64_t grow, char *why,
			    size_t cap)
{
	if (!grow || budget_charge_job(job, BUDGET_UPLOADS, grow)) {
		up->charged += grow;
		return true;
	}
	snprintf(why, cap,
		 "over the daemon's memory budget (--max-memory %" PRIu64 "): %" PRIu64
		 " more bytes of a dump of %" PRIu64 " refused",
		 budget_max(), grow, up->total);
	return false;
}

/*
 * The first piece of a rank's dump: whatever arrived before is let go,
 * and the dump's size must fit --max-dump-size.
 */
static int upload_start(struct incident *inc, uint32_t rank, const struct fr_msg_dump_data *m)
{
	struct incident_rank *ir = &inc->ranks[rank];
	char why[256];
	int err;

	rank_drop_upload(inc, ir);
	ir->up = calloc(1, sizeof(*ir->up));
	if (!ir->up) {
		upload_reject(inc, rank, "out of memory");
		return -ENOMEM;
	}
	err = upload_begin(ir->up, inc->id, m->total, inc->d->cfg.max_dump_size);
	if (err == -EPROTO)
		upload_reject(inc, rank, "empty dump");
	else if (err) {
		snprintf(why, sizeof(why), "dump of %" PRIu64 " bytes is over --max-dump-size %" PRIu64,
			 m->total, inc->d->cfg.max_dump_size);
		upload_reject(inc, rank, why);
	}
	return err;
}

void incident_dump_data(struct conn *c, const struct fr_msg_dump_data *m)
{
	struct incident *inc = c->job ? c->job->active : NULL;
	struct upload none = { 0 };
	struct incident_rank *ir;
	char why[256];

	if (!c->job)
		return;
	if (!incident_collecting(inc) || strcmp(inc->id, m->incident) != 0 ||
	    c->rank >= inc->world_size || inc->ranks[c->rank].answer != ANSWER_PENDING) {
		if (m->offset == 0)
			daemon_log("ignoring a dump from job %s rank %" PRIu32 " for incident %s: not being collected from it",
				   c->job->id, c->rank, m->incident);
		return;
	}
	ir = &inc->ranks[c->rank];
	if (m->offset == 0 && upload_start(inc, c->rank, m))
		return;
	switch (upload_append(ir->up ? ir->up : &none, m, upload_charge, inc, why, sizeof(why))) {
	case UPLOAD_ERROR:
		upload_reject(inc, c->rank, why);
		break;
	case UPLOAD_COMPLETE:
		upload_complete(inc, c->rank);
		break;
	case UPLOAD_MORE:
		break;
	}
}

json_t *incident_records_json(const struct flightrecd *d, const struct job *job)
{
	return incident_records_json_of(d, job->id, job->records, job->nrecords);
}

json_t *incident_records_json_of(const struct flightrecd *d, const char *job,
				 const struct incident_record *records, size_t n)
{
	json_t *arr = json_array();
	char path[PATH_MAX];

	for (size_t i = 0; arr && i < n; i++) {
		const struct incident_record *rec = &records[i];

		snprintf(path, sizeof(path), "%s/%s/%s", d->cfg.dump_dir, job, rec->id);
		json_array_append_new(
			arr, json_pack("{s:s, s:s, s:I, s:o, s:s, s:I, s:I, s:s, s:s}", "id", rec->id,
				       "reason", rec->reason, "opened_ns", (json_int_t)rec->opened_ns,
				       "closed_ns",
				       rec->closed_ns ? json_integer((json_int_t)rec->closed_ns) :
							json_null(),
				       "path", path, "ranks_answered", (json_int_t)rec->answered,
				       "ranks_requested", (json_int_t)rec->requested, "summary",
				       rec->summary, "status",
				       !rec->closed_ns ? "collecting" :
				       rec->incomplete ? "incomplete" :
							 "complete"));
	}
	return arr;
}
