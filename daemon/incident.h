/* Incidents (incident.c): a hang's dumps collected and written. */
#ifndef FR_DAEMON_INCIDENT_H
#define FR_DAEMON_INCIDENT_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>

#include "../protocol/wire.h"

struct conn;
struct flightrecd;
struct fr_verdict;
struct incident;
struct job;

struct incident_trigger {
	const char *reason;         /* "timeout", "heartbeat", "disconnect" */
	int32_t rank;               /* the rank that showed it, -1 if none */
	char comm[FR_COMM_ID_MAX + 1]; /* "" when no op is involved */
	bool has_seq;
	uint64_t seq;
	double waited_s;            /* how long the condition had lasted */
};

/*
 * Opens an incident, unless the job is over --max-incidents-per-hour: then
 * the incident is suppressed (counted, logged once per job a minute) and the
 * stuck state `key` counts as reported.
 */
void incident_open(struct flightrecd *d, struct job *job, const struct incident_trigger *t,
		   const struct fr_verdict *v, uint64_t key);
/*
 * Whether the job may open an incident now under --max-incidents-per-hour;
 * when not, `retry_after_s` says in how many seconds it may.
 */
bool incident_rate_allows(struct flightrecd *d, struct job *job, uint64_t now_mono,
			  uint64_t *retry_after_s);
/* Counts and logs an incident refused by the rate limit. */
void incident_suppress(struct flightrecd *d, struct job *job, const char *reason,
		       uint64_t retry_after_s);
void incident_close(struct incident *inc, bool incomplete);
bool incident_collecting(const struct incident *inc);
void incident_check_deadline(struct incident *inc, uint64_t now_mono);
void incident_dump_data(struct conn *c, const struct fr_msg_dump_data *m);
/* A rank of the job connected (HELLO), went away, or said BYE. */
void incident_rank_joined(struct incident *inc, struct conn *c);
void incident_rank_left(struct incident *inc, uint32_t rank, bool finished);
json_t *incident_records_json(const struct flightrecd *d, const struct job *job);

#endif
