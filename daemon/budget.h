/*
 * The memory budget (--max-memory). budget_charge() adds `bytes` of `kind`
 * unless the total would go over the budget; then it counts a refusal and
 * returns false. budget_charge_job() also holds `job` (NULL: none) to half
 * of the budget and counts the bytes as the job's; the caller holds the
 * lock for those. Any thread may call the others.
 */
#ifndef FR_DAEMON_BUDGET_H
#define FR_DAEMON_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

struct job;

enum budget_kind {
	BUDGET_MEMBERS,             /* communicators' member lists */
	BUDGET_UPLOADS,             /* incident dumps being received */
	BUDGET_LIVE,                /* live looks' dumps, arriving or held */
	BUDGET_VIEWS,               /* HTTP requests' live views: traces, not member lists */
	BUDGET_NODES,               /* what node daemons said (nodes.c): ranks, records, index */
	BUDGET_KINDS,
};
/* The smallest default budget, whatever the machine's memory. */
#define BUDGET_MIN (256ull << 20)
/* A quarter of the machine's memory, at least BUDGET_MIN. */
uint64_t budget_default_max(void);
void budget_set_max(uint64_t max);
uint64_t budget_max(void);
bool budget_charge(enum budget_kind kind, uint64_t bytes);
void budget_release(enum budget_kind kind, uint64_t bytes);
bool budget_charge_job(struct job *job, enum budget_kind kind, uint64_t bytes);
void budget_release_job(struct job *job, enum budget_kind kind, uint64_t bytes);
uint64_t budget_used(enum budget_kind kind);
/*
 * Whether a job of `world` ranks fits what one job may hold (half the
 * budget) at `per_rank` bytes a rank of its world: what an incident of it
 * costs however few of its ranks connect (tables and manifest entries for
 * every rank). Checked when a job is first told of, so that one agent
 * claiming a world of a million cannot make an incident of 6 GB. Worlds
 * of up to BUDGET_WORLD_FREE (the largest accepted until 2026-12-04) fit
 * whatever the budget.
 */
#define BUDGET_WORLD_FREE (1u << 16)
bool budget_world_fits(uint32_t world, uint64_t per_rank);
/* Charges refused since startup. */
uint64_t budget_refused(enum budget_kind kind);

#endif
