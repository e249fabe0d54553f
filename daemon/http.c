/*
 * The HTTP API (libmicrohttpd, a pool of its own threads): health, Prometheus metrics,
 * and JSON views of jobs, their live verdicts and their incidents. Handlers
 * hold the daemon's lock while they read the registry and build their
 * answer, and never change it.
 *
 * Who may ask what is decided before any handler runs (access.c): the
 * Host must name this daemon, a job's data needs the token or the job's
 * key when a token is configured, a live look a header no other site's
 * page can send. The connections are counted and timed (http_conns.c).
 *
 * The one request that acts, POST /v1/jobs/<job>/dump (a manual incident),
 * needs the daemon's token as a bearer token. It is carried out on the
 * event loop, which owns the state and the agents' connections: the
 * handler hands it over (handover.c) and replies once the loop answered,
 * without waiting for it.
 */
#include "http.h"
#include "daemon.h"
#include "access.h"
#include "addr.h"
#include "budget.h"
#include "clock.h"
#include "cluster_incident.h"
#include "handover.h"
#include "http_conns.h"
#include "http_incidents.h"
#include "incident.h"
#include "log.h"
#include "look.h"
#include "node_look.h"
#include "node_watchdog.h"
#include "nodes.h"
#include "ratelog.h"
#include "registry.h"
#include "route.h"
#include "straggler.h"
#include "web.h"
#include "../dumps/correlate.h"
#include "../dumps/dump.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <microhttpd.h>

/* An answer that stops moving this long is given up (headers: http_conns.h). */
#define HTTP_CONNECTION_TIMEOUT_S 10
/*
 * HTTP threads: a request that takes long to answer (a live look's dumps
 * parsed, a big job's view) holds one of them, and /healthz is answered
 * by another.
 */
#define HTTP_THREADS 4
/*
 * Requests whose handler works long on its HTTP thread (a big job's view
 * made into JSON): at most this many
 * at once, the others get 503, so that one thread is always free to
 * accept and answer /healthz. libmicrohttpd's pool has each thread accept
 * and serve its own connections: with all four in such handlers (four
 * GETs of a big job), /healthz waited in the listen backlog for seconds.
 */
#define HTTP_HEAVY_MAX (HTTP_THREADS - 1)
/*
 * A manual dump request handed to the event loop (handover.c), and what
 * the loop answered: h.status and h.error, and for 202 the incident.
 */
struct dump_req {
	struct handover h;
	char job[FR_JOB_MAX + 1];
	char client[INET6_ADDRSTRLEN + 8]; /* who asked, for the log */
	char incident[FR_INCIDENT_MAX + 1];
	char path[1024];
	uint32_t requested;
	uint64_t retry_after_s;     /* 429: when the job may open an incident */
};

/* What a request that passed the first call keeps between calls. */
static int request_seen;

/*
 * HTTP requests refused for their bearer token: counted here, by the HTTP
 * thread, since only the loop changes the daemon's state.
 */
static atomic_uint_fast64_t http_auth_failures;

/* Heavy requests being answered (HTTP_HEAVY_MAX), and those refused. */
static atomic_uint heavy_running;
static atomic_uint_fast64_t heavy_refused;

/*
 * Answers with `body` (len bytes, taken), of `type`, with one more header
 * when `header` is not NULL.
 */
static enum MHD_Result http_reply_with(struct MHD_Connection *mc, unsigned status,
				       const char *type, char *body, size_t len,
				       const char *header, const char *value)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (header)
		MHD_add_response_header(resp, header, value);
	if (status == MHD_HTTP_UNAUTHORIZED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"Bearer realm=\"flightrecd\"");
	ret = MHD_queue_response(mc, status, resp);
	MHD_destroy_response(resp);
	if (ret == MHD_YES)
		http_conns_answer(mc, len);
	return ret;
}

static enum MHD_Result http_reply(struct MHD_Connection *mc, unsigned status,
				  const char *type, char *body, size_t len)
{
	return http_reply_with(mc, status, type, body, len, NULL, NULL);
}

/*
 * Answers with a JSON document (reference taken), one line, with one more
 * header when `header` is not NULL.
 */
static enum MHD_Result http_reply_json_with(struct MHD_Connection *mc, unsigned status,
					    json_t *doc, const char *header, const char *value)
{
	char *body;
	size_t len;

	if (fr_json_text(doc, JSON_COMPACT, &body, &len))
		return MHD_NO;
	return http_reply_with(mc, status, "application/json", body, len, header, value);
}

static enum MHD_Result http_reply_json(struct MHD_Connection *mc, unsigned status, json_t *doc)
{
	return http_reply_json_with(mc, status, doc, NULL, NULL);
}

int http_reply_doc(struct MHD_Connection *mc, unsigned status, json_t *doc)
{
	return http_reply_json(mc, status, doc);
}

int http_reply_body(struct MHD_Connection *mc, unsigned status, char *body, size_t len)
{
	return http_reply(mc, status, "application/json", body, len);
}

static enum MHD_Result http_error(struct MHD_Connection *mc, unsigned status, const char *msg)
{
	return http_reply_json(mc, status, json_pack("{s:s}", "error", msg));
}

int http_reply_error(struct MHD_Connection *mc, unsigned status, const char *msg)
{
	return http_error(mc, status, msg);
}

static enum MHD_Result http_text(struct MHD_Connection *mc, unsigned status, const char *type,
				 const char *text)
{
	char *body = strdup(text);

	if (!body)
		return MHD_NO;
	return http_reply(mc, status, type, body, strlen(body));
}

static enum MHD_Result handle_healthz(struct flightrecd *d, struct MHD_Connection *mc)
{
	uint64_t last = atomic_load(&d->last_tick_ns);
	uint64_t now = daemon_mono_ns();

	if (now - last < DAEMON_HEALTH_MAX_AGE_NS)
		return http_text(mc, MHD_HTTP_OK, "text/plain", "ok\n");
	return http_text(mc, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain",
			 "event loop stalled\n");
}

static void metric(FILE *f, const char *name, const char *type, const char *help, uint64_t v)
{
	fprintf(f, "# HELP flightrec_%s %s\n# TYPE flightrec_%s %s\nflightrec_%s %" PRIu64 "\n",
		name, help, name, type, name, v);
}

static uint64_t incidents_open(const struct flightrecd *d)
{
	uint64_t n = 0;

	for (const struct job *job = d->jobs; job; job = job->next)
		n += job->active != NULL;
	return n;
}

/* The daemon's own metrics, then its counters and the live looks'. */
static void write_metrics(struct flightrecd *d, FILE *f)
{
	const struct daemon_metrics *m = &d->m;
	struct look_metrics lm;

	metric(f, "up", "gauge", "Whether the daemon is running.", 1);
	metric(f, "connections", "gauge", "Open agent connections.", d->nconns);
	metric(f, "ranks_connected", "gauge", "Ranks with a live connection.",
	       registry_ranks_connected(d));
	metric(f, "jobs", "gauge", "Jobs the daemon knows.", d->njobs);
	metric(f, "incidents_open", "gauge", "Incidents being collected.", incidents_open(d));
	metric(f, "connections_pending", "gauge",
	       "Open agent connections that have not said HELLO yet.", d->npending);
	metric(f, "http_auth_failures_total", "counter",
	       "HTTP requests refused for a missing or wrong bearer token.",
	       atomic_load(&http_auth_failures));
	metric(f, "http_connections_dropped_total", "counter",
	       "HTTP connections closed for not sending a whole request within 5 s, over the per-address or total cap, or for not reading an answer in time.",
	       http_conns_dropped());
	metric(f, "http_busy_total", "counter",
	       "HTTP requests answered 503 because 64 others, 16 others from the same address, or 3 big ones were being answered.",
	       http_conns_busy_refused() + atomic_load(&heavy_refused));
	metric(f, "memory_max_bytes", "gauge", "The memory budget, --max-memory.", budget_max());
	metric(f, "memory_bytes", "gauge",
	       "Bytes of the memory budget held: member lists, incident uploads, live looks, live views and node state.",
	       budget_used(BUDGET_MEMBERS) + budget_used(BUDGET_UPLOADS) + budget_used(BUDGET_LIVE) +
		       budget_used(BUDGET_VIEWS) + budget_used(BUDGET_NODES));
	metric(f, "memory_member_lists_bytes", "gauge", "Bytes of communicators' member lists held.",
	       budget_used(BUDGET_MEMBERS));
	metric(f, "memory_uploads_bytes", "gauge", "Bytes of incident dumps being received.",
	       budget_used(BUDGET_UPLOADS));
	metric(f, "memory_live_bytes", "gauge", "Bytes of live looks' dumps held.",
	       budget_used(BUDGET_LIVE));
	metric(f, "memory_views_bytes", "gauge",
	       "Bytes of live views HTTP requests hold (their ranks' traces; member lists are shared).",
	       budget_used(BUDGET_VIEWS));
	metric(f, "memory_nodes_bytes", "gauge",
	       "Bytes of what node daemons said kept: their jobs' ranks, progress records and the index of them.",
	       budget_used(BUDGET_NODES));
	metric(f, "memory_refused_total", "counter",
	       "Member lists, dump uploads, live looks, live views and node state refused over --max-memory (or a job over half of it).",
	       budget_refused(BUDGET_MEMBERS) + budget_refused(BUDGET_UPLOADS) +
		       budget_refused(BUDGET_LIVE) + budget_refused(BUDGET_VIEWS) +
		       budget_refused(BUDGET_NODES));
	metric(f, "log_lines_suppressed_total", "counter",
	       "Log lines about a limit held back: an offender is logged once a minute.",
	       ratelog_held_total());
#define COUNTER(field, name, help) metric(f, name, "counter", help, m->field);
	DAEMON_COUNTERS(COUNTER)
#undef COUNTER
	look_metrics(&lm);
#define LOOK_METRIC(field, name, type, help) metric(f, name, type, help, lm.field);
	LOOK_METRICS(LOOK_METRIC)
#undef LOOK_METRIC
	straggler_metrics(d, f);
}

static enum MHD_Result handle_metrics(struct flightrecd *d, struct MHD_Connection *mc)
{
	char *body = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&body, &len);

	if (!f)
		return MHD_NO;
	pthread_mutex_lock(&d->lock);
	write_metrics(d, f);
	pthread_mutex_unlock(&d->lock);
	if (fclose(f)) {
		free(body);
		return MHD_NO;
	}
	return http_reply(mc, MHD_HTTP_OK, "text/plain; version=0.0.4", body, len);
}

/* What a request whose live view the memory budget refused is answered. */
#define HTTP_VIEW_REFUSED "the daemon's memory budget (--max-memory) is full: try again later"

/*
 * A job of GET /v1/jobs: its counts are read under the lock with its live
 * view (`lv`, a snapshot that shares the member lists: no work that grows
 * with them under the lock; `view_err` 0 when it could be made); the
 * verdict is added from the view once the lock is released.
 */
struct job_summary {
	json_t *o;
	int view_err;
	struct live_view lv;
};

static void job_summary_take(const struct flightrecd *d, const struct job *job,
			     struct job_summary *js)
{
	js->view_err = registry_request_view(d, job, &js->lv);
	js->o = json_pack("{s:s, s:I, s:I, s:s, s:I}", "job", job->id, "world_size",
			  (json_int_t)job->world_size, "ranks_connected",
			  (json_int_t)job->nconnected, "status", registry_job_status(job),
			  "incidents", (json_int_t)job->nrecords);
}

static json_t *job_summary_finish(struct job_summary *js)
{
	struct fr_verdict v = { 0 };
	const char *verdict = "unknown";

	if (!js->view_err) {
		if (registry_live_verdict(&js->lv, &v) == 0) {
			verdict = fr_verdict_name(v.kind);
			fr_verdict_free(&v);
		}
		live_view_free(&js->lv);
	}
	if (js->o)
		json_object_set_new(js->o, "verdict", json_string(verdict));
	return js->o;
}

/* For nodes_jobs_json(): whether the registry lists the job itself. */
static bool job_in_registry(void *arg, const char *job)
{
	return registry_job_find(arg, job) != NULL;
}

/* GET /v1/nodes: the node daemons that connected upstream. */
static enum MHD_Result handle_nodes(struct flightrecd *d, struct MHD_Connection *mc)
{
	json_t *doc;

	pthread_mutex_lock(&d->lock);
	doc = nodes_json();
	pthread_mutex_unlock(&d->lock);
	if (!doc)
		return http_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	return http_reply_json(mc, MHD_HTTP_OK, doc);
}

/*
 * GET /v1/jobs; with `own_key` (a bearer token that is not the daemon's),
 * only the jobs whose key it is, and 401 when it opens none. The key is
 * parsed once, before the lock (a value that is no key is refused without
 * it), and compared with each job's kept key: no HMAC per job under the
 * lock, whoever asks.
 */
static enum MHD_Result handle_jobs(struct flightrecd *d, struct MHD_Connection *mc,
				   const char *own_key)
{
	uint8_t key[FR_WIRE_JOB_KEY_SIZE];
	struct job_summary *sums = NULL;
	json_t *node_json = NULL;
	bool refused = false;
	json_t *jobs;
	size_t n = 0;

	if (own_key && !access_job_key_parse(own_key, key)) {
		atomic_fetch_add(&http_auth_failures, 1);
		return http_error(mc, MHD_HTTP_UNAUTHORIZED,
				  "a valid bearer token is required: the daemon's token or a job's key");
	}
	jobs = json_array();
	pthread_mutex_lock(&d->lock);
	sums = calloc(d->njobs ? d->njobs : 1, sizeof(*sums));
	for (struct job *job = d->jobs; sums && job && n < d->njobs; job = job->next) {
		if (own_key && !registry_job_key_is(d, job, key))
			continue;
		job_summary_take(d, job, &sums[n]);
		refused |= sums[n++].view_err == -EDQUOT;
	}
	/* Jobs only node daemons hold, for the daemon's token (a job key
	 * narrows the list to jobs of this daemon's own registry), with the
	 * verdicts of their aggregates: under the lock, at a cost linear in
	 * the jobs and their nodes (nodes.h's index). */
	if (!own_key && jobs && (node_json = json_array())) {
		nodes_jobs_json(node_json, job_in_registry, d);
		node_watchdog_jobs_json(d, node_json, 0);
	}
	pthread_mutex_unlock(&d->lock);
	explicit_bzero(key, sizeof(key));
	if (jobs && node_json)
		json_array_extend(jobs, node_json);
	json_decref(node_json);
	/* The verdicts, the work that grows with the jobs' size, without the lock. */
	for (size_t i = 0; i < n; i++) {
		json_t *o = job_summary_finish(&sums[i]);

		if (jobs && o)
			json_array_append_new(jobs, o);
		else
			json_decref(o);
	}
	free(sums);
	if (!sums) {
		json_decref(jobs);
		return http_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	}
	/* A verdict left out would read as "unknown": say why instead. */
	if (refused) {
		json_decref(jobs);
		return http_reply_json_with(mc, MHD_HTTP_SERVICE_UNAVAILABLE,
					    json_pack("{s:s}", "error", HTTP_VIEW_REFUSED),
					    MHD_HTTP_HEADER_RETRY_AFTER, "1");
	}
	if (own_key && !n) {
		json_decref(jobs);
		atomic_fetch_add(&http_auth_failures, 1);
		return http_error(mc, MHD_HTTP_UNAUTHORIZED,
				  "a valid bearer token is required: the daemon's token or a job's key");
	}
	return http_reply_json(mc, MHD_HTTP_OK, json_pack("{s:o}", "jobs", jobs));
}

static json_t *rank_comms_json(const struct fr_trace *t)
{
	json_t *o = json_object();

	for (size_t i = 0; o && i < t->ncomms; i++)
		json_object_set_new(o, t->comms[i].id,
				    json_pack("{s:I, s:I}", "last_entered",
					      (json_int_t)t->comms[i].last_entered,
					      "last_completed",
					      (json_int_t)t->comms[i].last_completed));
	return o;
}

static json_t *inflight_json(const struct fr_trace *t, uint64_t now)
{
	json_t *arr = json_array();

	for (size_t i = 0; arr && i < t->nops; i++) {
		const struct fr_op *op = &t->ops[i];
		json_t *o = fr_op_to_json(op);
		/* A posted non-blocking op (t_started_ns 0) holds nobody. */
		double waited = op->t_started_ns && now > op->t_started_ns ?
					(double)(now - op->t_started_ns) / NS_PER_S :
					0.0;

		json_object_set_new(o, "waited_s", json_real(waited));
		json_array_append_new(arr, o);
	}
	return arr;
}

static json_t *rank_json(const struct live_rank *r, const struct fr_trace *t, uint64_t now,
			 uint64_t now_mono)
{
	double ago = now_mono > r->last_seen_mono ?
			     (double)(now_mono - r->last_seen_mono) / NS_PER_S :
			     0.0;

	json_t *o = json_pack("{s:I, s:s, s:I, s:s, s:f, s:I, s:I, s:o, s:o}", "rank",
			      (json_int_t)t->rank, "host", t->host, "pid", (json_int_t)t->pid,
			      "state", registry_rank_state_name(r->state), "last_seen_s_ago", ago,
			      "ring_capacity", (json_int_t)r->ring_capacity, "start_ns",
			      (json_int_t)r->start_ns, "comms", rank_comms_json(t), "inflight",
			      inflight_json(t, now));

	/* Only a rank on the Unix socket has a uid the kernel vouches for. */
	if (o && r->has_uid)
		json_object_set_new(o, "uid", json_integer((json_int_t)r->uid));
	if (o && t->crash)
		json_object_set_new(o, "crash", fr_crash_to_json(t->crash));
	if (o && t->has_exit)
		json_object_set_new(o, "exit", fr_exit_to_json(&t->exit));
	if (o && t->has_nccl_error)
		json_object_set_new(o, "nccl_error", fr_nccl_error_to_json(&t->nccl_error));
	return o;
}

/* Writes `s` as a JSON string. */
static void write_json_string(FILE *f, const char *s)
{
	json_t *j = json_string(s);
	char *text = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;

	fputs(text ? text : "\"\"", f);
	free(text);
	json_decref(j);
}

/*
 * The "communicators" array of GET /v1/jobs/<job>, as compact JSON text
 * written straight from the view's lists: a member as a JSON value costs
 * about fifty bytes where its text costs six, and 64 MiB of member lists
 * once took the answer to a 900 MB peak.
 */
static void write_communicators(FILE *f, const struct live_view *lv)
{
	fputc('[', f);
	for (size_t i = 0; i < lv->ncomms; i++) {
		const struct live_comm *jc = &lv->comms[i];

		fputs(i ? ",{\"id\":" : "{\"id\":", f);
		write_json_string(f, jc->id);
		fputs(",\"desc\":", f);
		write_json_string(f, jc->desc);
		fprintf(f, ",\"size\":%" PRIu32 ",\"members\":[", jc->size);
		/* -1: no member's report has told this entry yet. */
		for (uint32_t k = 0; jc->members && k < jc->size; k++) {
			char num[16];
			char *p = num + sizeof(num);
			uint32_t v = jc->members->v[k];

			*--p = '\0';
			if (v == FR_RANK_UNKNOWN) {
				p -= 2;
				memcpy(p, "-1", 2);
			} else {
				do
					*--p = (char)('0' + v % 10);
				while (v /= 10);
			}
			if (k)
				fputc(',', f);
			fputs(p, f);
		}
		fputs("]}", f);
	}
	fputc(']', f);
}

/*
 * The document's text with `placeholder`, a string value, replaced by the
 * communicators written from the view. A quote inside a JSON string is
 * escaped, so the placeholder's key and quoted value occur once, where the
 * key is. Takes `doc`. Returns 0 or -ENOMEM.
 */
static int job_detail_text(json_t *doc, const struct live_view *lv, char **body, size_t *len)
{
	static const char mark[] = "\"communicators\":\"@communicators@\"";
	char *text;
	size_t tlen;
	char *at;
	FILE *f;
	int err;

	*body = NULL;
	*len = 0;
	err = fr_json_text(doc, JSON_COMPACT, &text, &tlen);
	if (err)
		return err;
	at = strstr(text, mark);
	f = at ? open_memstream(body, len) : NULL;
	if (!f) {
		free(text);
		return -ENOMEM;
	}
	fwrite(text, 1, (size_t)(at - text), f);
	fputs("\"communicators\":", f);
	write_communicators(f, lv);
	fputs(at + sizeof(mark) - 1, f);
	free(text);
	if (fclose(f)) {
		free(*body);
		*body = NULL;
		return -ENOMEM;
	}
	return 0;
}

/*
 * GET /v1/jobs/<job> from `head` (job, world_size, status, incidents: read
 * under the lock, bounded in size) and the job's live view, a snapshot: the
 * verdict, the ranks and the member lists, whose size grows with the job's,
 * are made into JSON after the lock is released, so that a big job's answer
 * never stalls the event loop or /healthz. Takes `head`; frees the view.
 * Returns 0 with the answer in `body`, or -ENOMEM.
 */
static int job_detail(json_t *head, struct live_view *lv, json_t *node_ranks, char **body,
		      size_t *len)
{
	int err = -ENOMEM;
	uint64_t now = daemon_now_ns();
	uint64_t now_mono = daemon_mono_ns();
	struct fr_verdict v = { 0 };
	json_t *ranks;
	json_t *verdict;

	verdict = registry_live_verdict(lv, &v) == 0 ? fr_verdict_to_json(&v) : NULL;
	fr_verdict_free(&v);
	ranks = json_array();
	for (size_t i = 0; ranks && i < lv->n; i++)
		if (lv->ranks[i].known)
			json_array_append_new(ranks, rank_json(&lv->ranks[i], &lv->traces[i], now,
							       now_mono));
	*body = NULL;
	if (ranks && node_ranks)
		json_array_extend(ranks, node_ranks);
	json_decref(node_ranks);
	if (head && ranks) {
		json_object_set_new(head, "ranks", ranks);
		json_object_set_new(head, "communicators", json_string("@communicators@"));
		json_object_set_new(head, "verdict", verdict ? verdict : json_null());
		err = job_detail_text(head, lv, body, len);
	} else {
		json_decref(head);
		json_decref(ranks);
		json_decref(verdict);
	}
	live_view_free(lv);
	return err;
}

static enum MHD_Result handle_job(struct flightrecd *d, struct MHD_Connection *mc,
				  const char *id, bool incidents)
{
	struct live_view lv;
	bool have_view = false;
	struct job *job;
	json_t *doc = NULL;
	json_t *node_ranks = NULL;
	struct nodes_ranks_copy copy;
	uint32_t world_size;
	char *body;
	size_t len;
	int err = 0;

	pthread_mutex_lock(&d->lock);
	job = registry_job_find(d, id);
	if (!job && incidents) {
		/* A job the nodes hold, or held: its incidents are the central daemon's. */
		json_t *records = cluster_incident_records_json(d, id);
		bool known = records || nodes_job_known(id, &world_size);

		pthread_mutex_unlock(&d->lock);
		if (!known)
			return http_error(mc, MHD_HTTP_NOT_FOUND, "no such job");
		doc = json_pack("{s:o}", "incidents", records ? records : json_array());
		if (!doc)
			return http_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		return http_reply_json(mc, MHD_HTTP_OK, doc);
	}
	/* The nodes' ranks are copied under the lock, made into JSON without it. */
	err = incidents ? 0 : nodes_job_ranks_take(id, &copy);
	if (err || incidents)
		memset(&copy, 0, sizeof(copy));
	if (err == -EDQUOT) {
		pthread_mutex_unlock(&d->lock);
		return http_reply_json_with(mc, MHD_HTTP_SERVICE_UNAVAILABLE,
					    json_pack("{s:s}", "error", HTTP_VIEW_REFUSED),
					    MHD_HTTP_HEADER_RETRY_AFTER, "1");
	}
	if (err) {
		pthread_mutex_unlock(&d->lock);
		return http_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	}
	if (!job && !incidents && nodes_job_known(id, &world_size)) {
		/* A job whose ranks all connected to node daemons: what they
		 * said of it and the verdict of their aggregates, no live view
		 * (the central daemon holds none). */
		json_t *verdict = node_watchdog_verdict(d, id);
		json_t *records = cluster_incident_records_json(d, id);

		pthread_mutex_unlock(&d->lock);
		node_ranks = json_array();
		if (node_ranks)
			nodes_ranks_copy_json(&copy, node_ranks);
		nodes_ranks_copy_free(&copy);
		doc = json_pack("{s:s, s:I, s:s, s:o, s:[], s:o, s:o}", "job", id, "world_size",
				(json_int_t)world_size, "status", "running", "ranks",
				node_ranks ? node_ranks : json_array(), "communicators",
				"verdict", verdict ? verdict : json_null(), "incidents",
				records ? records : json_array());
		if (!doc)
			return http_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		return http_reply_json(mc, MHD_HTTP_OK, doc);
	}
	if (job && incidents) {
		doc = json_pack("{s:o}", "incidents", incident_records_json(d, job));
	} else if (job && (err = registry_request_view(d, job, &lv)) == 0) {
		have_view = true;
		/* Keys in the order the answer always had them. */
		doc = json_pack("{s:s, s:I, s:s, s:n, s:n, s:n, s:o}", "job", job->id,
				"world_size", (json_int_t)job->world_size, "status",
				registry_job_status(job), "ranks", "communicators", "verdict",
				"incidents", incident_records_json(d, job));
		if (doc) {
			json_object_set_new(doc, "stragglers", straggler_json(d, job, true));
			json_object_set_new(doc, "slowest", straggler_json(d, job, false));
		}
	}
	pthread_mutex_unlock(&d->lock);
	if (have_view && copy.n && (node_ranks = json_array()))
		nodes_ranks_copy_json(&copy, node_ranks);
	nodes_ranks_copy_free(&copy);
	if (have_view) {
		if (job_detail(doc, &lv, node_ranks, &body, &len))
			return http_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		return http_reply_with(mc, MHD_HTTP_OK, "application/json", body, len, NULL, NULL);
	}
	if (!job)
		return http_error(mc, MHD_HTTP_NOT_FOUND, "no such job");
	if (err == -EDQUOT)
		return http_reply_json_with(mc, MHD_HTTP_SERVICE_UNAVAILABLE,
					    json_pack("{s:s}", "error", HTTP_VIEW_REFUSED),
					    MHD_HTTP_HEADER_RETRY_AFTER, "1");
	if (!doc)
		return http_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
	return http_reply_json(mc, MHD_HTTP_OK, doc);
}

/* The header that names the verdict, so that a client needs no parsing. */
#define HTTP_VERDICT_HEADER "X-Flightrec-Verdict"

/* An /analysis answer: `body` (taken) with its verdict's header, or the error `err`. */
static enum MHD_Result analysis_reply(struct MHD_Connection *mc, int err, char *body, size_t len,
				      bool text, const char *verdict)
{
	if (err) {
		free(body);
		return http_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, strerror(-err));
	}
	return http_reply_with(mc, MHD_HTTP_OK,
			       text ? "text/plain; charset=utf-8" : "application/json", body, len,
			       HTTP_VERDICT_HEADER, verdict);
}

/*
 * The /analysis of a job only node daemons hold: their aggregates' verdict
 * (node_watchdog_verdict()) as JSON, or as a few lines for a person: the
 * verdict, the summary and each culprit named. Takes `v`.
 */
static enum MHD_Result node_analysis(struct MHD_Connection *mc, json_t *v, bool text)
{
	const char *verdict = json_string_value(json_object_get(v, "verdict"));
	char hdr[16];
	char *body = NULL;
	size_t len = 0, i;
	json_t *c;
	int err = 0;
	FILE *f;

	snprintf(hdr, sizeof(hdr), "%s", verdict ? verdict : "unknown");
	if (!text) {
		err = fr_json_text(v, JSON_INDENT(2), &body, &len);
	} else if ((f = open_memstream(&body, &len))) {
		fprintf(f, "Verdict: %s (from the node daemons' aggregates)\n%s\n", hdr,
			json_string_value(json_object_get(v, "summary")));
		json_array_foreach(json_object_get(v, "culprits"), i, c) {
			const char *detail = json_string_value(json_object_get(c, "detail"));

			fprintf(f, "  rank %" JSON_INTEGER_FORMAT " (node %s, %s, pid %" JSON_INTEGER_FORMAT
				   "): %s%s%s\n",
				json_integer_value(json_object_get(c, "rank")),
				json_string_value(json_object_get(c, "node")),
				json_string_value(json_object_get(c, "host")),
				json_integer_value(json_object_get(c, "pid")),
				json_string_value(json_object_get(c, "reason")), detail ? ", " : "",
				detail ? detail : "");
		}
		err = fclose(f) ? -ENOMEM : 0;
		json_decref(v);
	} else {
		err = -ENOMEM;
		json_decref(v);
	}
	return analysis_reply(mc, err, body, len, text, hdr);
}

/*
 * GET /v1/jobs/<job>/analysis[?format=text]: the live verdict now, open
 * incident or not. The body is exactly what fr-analyze prints for the same
 * evidence: fr_verdict_to_json() indented by 2 with a newline (--json), or
 * the report for a person, so that `fr-analyze --live` can print it as it
 * comes.
 */
static enum MHD_Result handle_analysis(struct flightrecd *d, struct MHD_Connection *mc,
				       const char *id)
{
	const char *format = MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "format");
	struct fr_verdict v = { 0 };
	struct live_view lv;
	const char *verdict = "unknown";
	struct job *job;
	char *body = NULL;
	size_t len = 0;
	bool text;
	int err = 0;

	if (!format || strcmp(format, "json") == 0)
		text = false;
	else if (strcmp(format, "text") == 0)
		text = true;
	else
		return http_error(mc, MHD_HTTP_BAD_REQUEST, "format must be json or text");
	pthread_mutex_lock(&d->lock);
	job = registry_job_find(d, id);
	if (!job) {
		json_t *nv = node_watchdog_verdict(d, id);

		pthread_mutex_unlock(&d->lock);
		if (!nv)
			return http_error(mc, MHD_HTTP_NOT_FOUND, "no such job");
		return node_analysis(mc, nv, text);
	}
	err = registry_request_view(d, job, &lv);
	/* The view is a snapshot: the verdict and its text are made without the lock. */
	pthread_mutex_unlock(&d->lock);
	if (err == -EDQUOT)
		return http_reply_json_with(mc, MHD_HTTP_SERVICE_UNAVAILABLE,
					    json_pack("{s:s}", "error", HTTP_VIEW_REFUSED),
					    MHD_HTTP_HEADER_RETRY_AFTER, "1");
	if (!err) {
		err = registry_live_verdict(&lv, &v);
		if (!err && text) {
			FILE *f = open_memstream(&body, &len);

			if (f) {
				fr_verdict_print(f, &v, lv.ptrs, lv.n);
				err = fclose(f) ? -ENOMEM : 0;
			} else {
				err = -ENOMEM;
			}
		} else if (!err) {
			err = fr_json_text(fr_verdict_to_json(&v), JSON_INDENT(2), &body, &len);
		}
		verdict = fr_verdict_name(v.kind);
		fr_verdict_free(&v);
		live_view_free(&lv);
	}
	return analysis_reply(mc, err, body, len, text, verdict);
}

/*
 * What the registry says for an incident request: whether it knows the job,
 * and --max-dump-size (a reload may change it), read under the lock; the
 * disk is read without it.
 */
static bool incident_job_known(struct flightrecd *d, const char *id, uint64_t *max_size)
{
	bool known;

	pthread_mutex_lock(&d->lock);
	known = registry_job_find(d, id) != NULL;
	*max_size = d->cfg.max_dump_size;
	pthread_mutex_unlock(&d->lock);
	return known;
}

/*
 * The 404 for an incident request that found no directory: "no such job"
 * when neither the registry nor the dump directory knows the job (a job
 * the daemon forgot keeps its incidents on disk, and they are served).
 */
static enum MHD_Result incident_not_found(struct MHD_Connection *mc, bool known,
					  enum http_incident_found found)
{
	if (found == HTTP_FOUND_INCIDENT)
		return http_error(mc, MHD_HTTP_NOT_FOUND, "no such file");
	return http_error(mc, MHD_HTTP_NOT_FOUND,
			  known || found == HTTP_FOUND_JOB ? "no such incident" : "no such job");
}

/* GET /v1/jobs/<job>/incidents/<id>: what the incident directory holds. */
static enum MHD_Result handle_incident(struct flightrecd *d, struct MHD_Connection *mc,
				       const struct route *r)
{
	enum http_incident_found found;
	uint64_t max_size;
	bool known = incident_job_known(d, r->job, &max_size);
	json_t *doc;
	int err;

	err = http_incident_json(d->cfg.dump_dir, r->job, r->incident, max_size, &doc, &found);
	if (err == -ENOENT)
		return incident_not_found(mc, known, found);
	if (err)
		return http_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, strerror(-err));
	return http_reply_json(mc, MHD_HTTP_OK, doc);
}

/*
 * GET /v1/jobs/<job>/incidents/<id>/<file>: a dump or the manifest, sent
 * from the file (never read whole into memory). A file larger than
 * --max-dump-size is not served (500): the daemon writes none, so such a
 * file is not one it stored.
 */
static enum MHD_Result handle_incident_file(struct flightrecd *d, struct MHD_Connection *mc,
					    const struct route *r)
{
	enum http_incident_found found;
	struct MHD_Response *resp;
	enum MHD_Result ret;
	uint64_t max_size, size;
	bool known = incident_job_known(d, r->job, &max_size);
	char msg[160];
	int fd;

	fd = http_incident_open_file(d->cfg.dump_dir, r->job, r->incident, r->file, max_size,
				     &size, &found);
	if (fd == -ENOENT)
		return incident_not_found(mc, known, found);
	if (fd == -EFBIG) {
		snprintf(msg, sizeof(msg), "%s is larger than --max-dump-size (%" PRIu64 " bytes)",
			 r->file, max_size);
		return http_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, msg);
	}
	if (fd < 0)
		return http_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, strerror(-fd));
	/* The response owns the fd and closes it; when it cannot be made,
	 * the fd is still ours (close() from <unistd.h>, which microhttpd.h
	 * includes on POSIX systems). */
	resp = MHD_create_response_from_fd64(size, fd);
	if (!resp) {
		close(fd);
		return MHD_NO;
	}
	/* A node's summaries are one document a line. */
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				strncmp(r->file, "summaries-", 10) == 0 ? "application/x-ndjson" :
									  "application/json");
	ret = MHD_queue_response(mc, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	if (ret == MHD_YES)
		http_conns_answer(mc, size);
	return ret;
}

/*
 * Carries out a manual dump request on the event loop: opens an incident
 * for the job as the watchdog would, with reason "manual" and no trigger
 * rank, and answers the request. The watchdog's memory of the last
 * stuck state it reported is left as it was, so that a manual incident
 * neither hides a hang from it nor makes it report one twice.
 */
static void dump_take(struct flightrecd *d, struct handover *h, uint64_t now_mono)
{
	struct dump_req *dr = (struct dump_req *)h;
	const char *id = dr->job;
	struct incident_trigger t = { .reason = "manual", .rank = -1 };
	uint32_t world_size;
	struct job *job;
	unsigned status = MHD_HTTP_ACCEPTED;
	char error[sizeof(h->error)] = "";
	uint64_t retry_after = 0;

	job = registry_job_find(d, id);
	if (d->stopping) {
		status = MHD_HTTP_SERVICE_UNAVAILABLE;
		snprintf(error, sizeof(error), "the daemon is stopping");
	} else if (!job && nodes_job_known(id, &world_size)) {
		/* A job the node daemons hold: they dump it (cluster_incident.c). */
		status = cluster_incident_manual(d, id, dr->incident, sizeof(dr->incident),
						 &dr->requested, &retry_after, error, sizeof(error));
		if (status == MHD_HTTP_ACCEPTED) {
			snprintf(dr->path, sizeof(dr->path), "%s/%s/%s", d->cfg.dump_dir, id,
				 dr->incident);
			daemon_log("incident %s of job %s was asked for over HTTP by %s", dr->incident,
				   id, dr->client);
		}
	} else if (!job) {
		status = MHD_HTTP_NOT_FOUND;
		snprintf(error, sizeof(error), "no such job");
	} else if (job->active) {
		status = MHD_HTTP_CONFLICT;
		snprintf(error, sizeof(error), "incident %s of the job is being collected",
			 job->nrecords ? job->records[job->nrecords - 1].id : "?");
	} else if (!job->nconnected) {
		status = MHD_HTTP_CONFLICT;
		snprintf(error, sizeof(error), "no rank of the job is connected");
	} else if (!incident_rate_allows(d, job, now_mono, &retry_after)) {
		/* A script asking in a loop must not fill the disk either. */
		incident_suppress(d, job, "manual", retry_after);
		status = MHD_HTTP_TOO_MANY_REQUESTS;
		snprintf(error, sizeof(error),
			 "the job opened --max-incidents-per-hour %" PRIu32
			 " incidents; the next may open in %" PRIu64 " s",
			 d->cfg.max_incidents_per_hour, retry_after);
	} else if (incident_open_asked(d, job, &t, NULL)) {
		status = MHD_HTTP_INTERNAL_SERVER_ERROR;
		snprintf(error, sizeof(error), "the incident could not be opened (see the daemon's log)");
	} else {
		const struct incident_record *rec = &job->records[job->nrecords - 1];

		snprintf(dr->incident, sizeof(dr->incident), "%s", rec->id);
		snprintf(dr->path, sizeof(dr->path), "%s/%s/%s", d->cfg.dump_dir, job->id, rec->id);
		dr->requested = rec->requested;
		daemon_log("incident %s of job %s was asked for over HTTP by %s", rec->id, job->id,
			   dr->client);
	}
	dr->retry_after_s = retry_after;
	handover_finish(h, status, error[0] ? error : NULL);
}

static void dump_free(struct handover *h)
{
	free(h);
}

/*
 * 429 with Retry-After (whole seconds), so that a client, or curl --retry,
 * waits as long as the job's incident budget needs. Takes `doc`.
 */
static enum MHD_Result dump_reply_limited(struct MHD_Connection *mc, json_t *doc,
					  uint64_t retry_after_s)
{
	char retry[24];

	snprintf(retry, sizeof(retry), "%" PRIu64, retry_after_s);
	return http_reply_json_with(mc, MHD_HTTP_TOO_MANY_REQUESTS, doc,
				    MHD_HTTP_HEADER_RETRY_AFTER, retry);
}

/*
 * Hands a validated job id to the loop, and once the loop answered (the
 * handler's next call, the same *req_cls), replies with what it did.
 */
static enum MHD_Result handle_dump(struct MHD_Connection *mc, const char *id, void **req_cls)
{
	const union MHD_ConnectionInfo *info;
	struct dump_req *dr;
	unsigned status;
	json_t *doc;
	bool done;
	size_t n;

	dr = (struct dump_req *)handover_resumed(*req_cls, &done);
	if (!dr) {
		dr = calloc(1, sizeof(*dr));
		if (!dr)
			return http_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		dr->h.take = dump_take;
		dr->h.free = dump_free;
		/* A valid name: at most FR_JOB_MAX bytes. */
		n = strnlen(id, FR_JOB_MAX);
		memcpy(dr->job, id, n);
		dr->job[n] = '\0';
		info = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		if (!info || !info->client_addr ||
		    daemon_format_addr(info->client_addr, dr->client, sizeof(dr->client)))
			snprintf(dr->client, sizeof(dr->client), "an unknown client");
		if (handover_submit(&dr->h, mc)) {
			free(dr);
			return http_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE,
					  "the daemon is busy or stopping");
		}
		*req_cls = dr;
		return MHD_YES;
	}
	if (!done)
		return http_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "resumed before its answer");
	status = dr->h.status;
	if (status == MHD_HTTP_ACCEPTED)
		doc = json_pack("{s:s, s:s, s:s, s:I}", "job", dr->job, "incident", dr->incident,
				"path", dr->path, "ranks_requested", (json_int_t)dr->requested);
	else if (status == MHD_HTTP_TOO_MANY_REQUESTS)
		doc = json_pack("{s:s, s:I}", "error", dr->h.error, "retry_after_s",
				(json_int_t)dr->retry_after_s);
	else
		doc = json_pack("{s:s}", "error", dr->h.error);
	if (!doc)
		return MHD_NO;
	if (status == MHD_HTTP_TOO_MANY_REQUESTS)
		return dump_reply_limited(mc, doc, dr->retry_after_s);
	return http_reply_json(mc, status, doc);
}

/*
 * GET /v1/jobs/<job>/incidents/<id>/ranks/<rank> of a job the node
 * daemons hold: the rank's full dump, which stays on its node, fetched
 * now (cluster_incident_fetch_rank() on the loop, handover.c).
 */
struct rank_req {
	struct handover h;
	char job[FR_JOB_MAX + 1];
	char incident[FR_INCIDENT_MAX + 1];
	uint32_t rank;
	uint8_t *data;              /* the dump, once answered 200 */
	size_t len;
};

static void rank_take(struct flightrecd *d, struct handover *h, uint64_t now_mono)
{
	struct rank_req *rr = (struct rank_req *)h;

	(void)now_mono;
	if (d->stopping) {
		handover_finish(h, MHD_HTTP_SERVICE_UNAVAILABLE, "the daemon is stopping");
		return;
	}
	cluster_incident_fetch_rank(d, h, rr->job, rr->incident, rr->rank, &rr->data, &rr->len);
}

static void rank_free(struct handover *h)
{
	free(((struct rank_req *)h)->data);
	free(h);
}

static enum MHD_Result handle_incident_rank(struct MHD_Connection *mc, const struct route *r,
					    void **req_cls)
{
	struct rank_req *rr;
	uint8_t *body;
	bool done;

	rr = (struct rank_req *)handover_resumed(*req_cls, &done);
	if (!rr) {
		rr = calloc(1, sizeof(*rr));
		if (!rr)
			return http_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
		rr->h.take = rank_take;
		rr->h.free = rank_free;
		memcpy(rr->job, r->job, sizeof(rr->job));
		memcpy(rr->incident, r->incident, sizeof(rr->incident));
		rr->rank = r->rank;
		if (handover_submit(&rr->h, mc)) {
			free(rr);
			return http_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE,
					  "the daemon is busy or stopping");
		}
		*req_cls = rr;
		return MHD_YES;
	}
	if (!done)
		return http_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "resumed before its answer");
	if (rr->h.status != MHD_HTTP_OK || !rr->data)
		return http_error(mc, rr->h.status, rr->h.error[0] ? rr->h.error : "no dump");
	/* The reply owns the bytes now. */
	body = rr->data;
	rr->data = NULL;
	return http_reply_with(mc, MHD_HTTP_OK, "application/json", (char *)body, rr->len, NULL,
			       NULL);
}

/*
 * What access.c decides for request `r` of `mc`, with the token as it is
 * now (SIGHUP may be replacing it under the lock).
 */
static void http_access(struct flightrecd *d, struct MHD_Connection *mc, const struct route *r,
			struct access_decision *dec)
{
	struct access_request req = {
		.route = r,
		.host = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST),
		.mark = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, ACCESS_MARK_HEADER),
		.authorization = MHD_lookup_connection_value(mc, MHD_HEADER_KIND,
							     MHD_HTTP_HEADER_AUTHORIZATION),
	};
	struct access_policy pol = {
		.bound = (const struct sockaddr *)&d->cfg.http_addr,
		.allowed_hosts = d->cfg.http_allowed_hosts,
		.token = &d->cfg.token,
	};

	pthread_mutex_lock(&d->lock);
	access_decide(&req, &pol, dec);
	pthread_mutex_unlock(&d->lock);
	if (dec->auth_failure)
		atomic_fetch_add(&http_auth_failures, 1);
}

/*
 * Whether a request says a body follows: a Content-Length above 0, or a
 * chunked one. Refused before the body is read (a client that asked
 * "Expect: 100-continue" never sends it), the refusal reaches the client.
 */
static bool announces_body(struct MHD_Connection *mc)
{
	const char *len = MHD_lookup_connection_value(mc, MHD_HEADER_KIND,
						      MHD_HTTP_HEADER_CONTENT_LENGTH);
	const char *te = MHD_lookup_connection_value(mc, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_TRANSFER_ENCODING);

	if (te)
		return true;
	if (!len)
		return false;
	while (*len == ' ' || *len == '0')
		len++;
	return *len != '\0';
}

/*
 * Whether a request's handler may work long on its HTTP thread: those that
 * build a job's live view (its size grows with the job's). A live look's
 * work is bounded by LOOK_MEMORY_MAX, and it and the manual dump are
 * suspended while the loop works on them (handover.c).
 */
static bool route_heavy(enum route_kind kind)
{
	return kind == ROUTE_JOBS || kind == ROUTE_JOB || kind == ROUTE_JOB_ANALYSIS;
}

/* Takes one of the HTTP_HEAVY_MAX places; false when all are taken. */
static bool heavy_take(void)
{
	unsigned n = atomic_load(&heavy_running);

	do {
		if (n >= HTTP_HEAVY_MAX)
			return false;
	} while (!atomic_compare_exchange_weak(&heavy_running, &n, n + 1));
	return true;
}

/* Answers request `r` of `mc`, which access.c let through as `dec`. */
static enum MHD_Result route_answer(struct flightrecd *d, struct MHD_Connection *mc,
				    const struct route *r, const struct access_decision *dec,
				    void **req_cls)
{
	switch (r->kind) {
	case ROUTE_BAD_METHOD:
		/* The Allow header names what the URL takes: POST for the one
		 * URL that takes it, GET for every other. */
		return http_reply_json_with(mc, MHD_HTTP_METHOD_NOT_ALLOWED,
					    json_pack("{s:s}", "error", "method not allowed"),
					    MHD_HTTP_HEADER_ALLOW, r->allow);
	case ROUTE_PAGE:
		return web_page_reply(mc) == MHD_YES ? MHD_YES : MHD_NO;
	case ROUTE_HEALTHZ:
		return handle_healthz(d, mc);
	case ROUTE_METRICS:
		return handle_metrics(d, mc);
	case ROUTE_NODES:
		return handle_nodes(d, mc);
	case ROUTE_JOBS:
		return handle_jobs(d, mc,
				   dec->grant == ACCESS_OWN_JOB ?
					   MHD_lookup_connection_value(mc, MHD_HEADER_KIND,
								       MHD_HTTP_HEADER_AUTHORIZATION) :
					   NULL);
	case ROUTE_JOB:
		return handle_job(d, mc, r->job, false);
	case ROUTE_JOB_INCIDENTS:
		return handle_job(d, mc, r->job, true);
	case ROUTE_JOB_DUMP:
		return handle_dump(mc, r->job, req_cls);
	case ROUTE_JOB_ANALYSIS:
		return handle_analysis(d, mc, r->job);
	case ROUTE_INCIDENT:
		return handle_incident(d, mc, r);
	case ROUTE_INCIDENT_FILE:
		return handle_incident_file(d, mc, r);
	case ROUTE_INCIDENT_RANK:
		return handle_incident_rank(mc, r, req_cls);
	case ROUTE_RANK_STACKS:
	case ROUTE_RANK_TRACE:
	case ROUTE_JOB_STACKS:
		return (enum MHD_Result)look_http(d, mc, r, req_cls);
	default:
		return http_error(mc, MHD_HTTP_NOT_FOUND, r->error ? r->error : "not found");
	}
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_size, void **req_cls)
{
	struct flightrecd *d = cls;
	struct access_decision dec;
	enum MHD_Result ret;
	struct route r;

	(void)version;
	(void)upload_data;
	if (strcmp(method, MHD_HTTP_METHOD_POST) == 0) {
		/* The first call only says a POST is coming. The one POST takes
		 * no body: one is refused at its first byte, so that nobody can
		 * keep the HTTP thread reading. */
		if (!*req_cls) {
			*req_cls = &request_seen;
			if (announces_body(mc))
				return http_error(mc, MHD_HTTP_CONTENT_TOO_LARGE,
						  "this request takes no body");
			return MHD_YES;
		}
		if (*upload_size)
			return http_error(mc, MHD_HTTP_CONTENT_TOO_LARGE,
					  "this request takes no body");
	}
	route_parse(method, url, &r);
	/*
	 * A request handed to the loop and answered (handover.c) was let in
	 * at its first call: its answer goes out as the loop made it, whatever
	 * a reload did to the token meanwhile (a manual dump it opened is not
	 * then refused to its asker).
	 */
	if (*req_cls && *req_cls != &request_seen) {
		dec = (struct access_decision){ .grant = ACCESS_ALL };
		return route_answer(d, mc, &r, &dec, req_cls);
	}
	http_access(d, mc, &r, &dec);
	if (dec.grant == ACCESS_DENIED)
		return http_error(mc, dec.status, dec.error);
	switch (http_conns_request_begin(mc, r.kind != ROUTE_HEALTHZ)) {
	case 0:
		break;
	case -EUSERS:
		return http_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE,
				  "the HTTP API is answering 16 requests from this address: try again");
	default:
		return http_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE,
				  "the HTTP API is answering 64 requests: try again");
	}
	if (!route_heavy(r.kind))
		return route_answer(d, mc, &r, &dec, req_cls);
	if (!heavy_take()) {
		atomic_fetch_add(&heavy_refused, 1);
		return http_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE,
				  "the HTTP API is answering 3 big requests: try again");
	}
	ret = route_answer(d, mc, &r, &dec, req_cls);
	atomic_fetch_sub(&heavy_running, 1);
	return ret;
}

/*
 * libmicrohttpd's messages, each kind (its format string) logged once a
 * minute with a count: out of descriptors it retries accept() in a loop and
 * says so every time, which once wrote a gigabyte of log in seconds.
 */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	char kind[48];
	size_t n;

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = '\0';
	snprintf(kind, sizeof(kind), "%s", fmt);
	ratelog("http", kind, "http: %s", msg);
}

/* A request is over (answered, or its client gone): one handed to the loop is freed. */
static void on_completed(void *cls, struct MHD_Connection *mc, void **req_cls,
			 enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)toe;
	http_conns_request_end(mc);
	if (*req_cls && *req_cls != &request_seen)
		handover_completed(*req_cls);
}

int http_start(struct flightrecd *d)
{
	const struct sockaddr *sa = (const struct sockaddr *)&d->cfg.http_addr;
	/* Live looks suspend their request while a rank answers (look.c). */
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG |
			 MHD_ALLOW_SUSPEND_RESUME;
	const union MHD_DaemonInfo *info;
	char addr[INET6_ADDRSTRLEN + 8];

	if (sa->sa_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	daemon_format_addr(sa, addr, sizeof(addr));
	/* Before the HTTP thread exists: it may hand requests over at once. */
	if (handover_start(d)) {
		daemon_log("cannot start the HTTP API's link to the event loop");
		return -1;
	}
	if (node_look_start(d) || look_start(d)) {
		daemon_log("cannot start the live looks' timer");
		return -1;
	}
	if (http_conns_start()) {
		daemon_log("cannot start the HTTP API's request deadline");
		return -1;
	}
	/* The logger goes first, so that every message gets our prefix. */
	d->http = MHD_start_daemon(flags, 0, NULL, NULL, on_request, d,
				   MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
				   MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
				   MHD_OPTION_SOCK_ADDR, sa,
				   MHD_OPTION_NOTIFY_CONNECTION, http_conns_notify, NULL,
				   MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONN_SLOTS,
				   MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_CONNECTION_TIMEOUT_S,
				   MHD_OPTION_THREAD_POOL_SIZE, (unsigned)HTTP_THREADS,
				   MHD_OPTION_END);
	if (!d->http) {
		daemon_log("cannot serve HTTP on %s", addr);
		return -1;
	}
	info = MHD_get_daemon_info(d->http, MHD_DAEMON_INFO_BIND_PORT);
	if (!info || !info->port) {
		daemon_log("cannot find the HTTP port bound on %s", addr);
		return -1;
	}
	d->http_port = info->port;
	daemon_set_port(&d->cfg.http_addr, d->http_port);
	return 0;
}

void http_quiesce(void)
{
	handover_quiesce();
}

void http_stop(struct flightrecd *d)
{
	/* libmicrohttpd must not stop with a request suspended: those still
	 * waiting on the loop, which no longer runs, are answered first. */
	handover_stop(d);
	look_stop(d);
	node_look_stop(d);
	if (d->http)
		MHD_stop_daemon(d->http);
	d->http = NULL;
	http_conns_stop();
}
