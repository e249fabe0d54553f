/*
 * The daemon's memory budget (--max-memory): the bytes peers can make it
 * hold, counted by kind (communicators' member lists, incident uploads,
 * live looks, HTTP requests' live views, what node daemons said) in total,
 * and per job for what a job holds (its member lists and its ranks'
 * uploads), so that a job can take at most half of it and never starve
 * the others. What would go over
 * is refused, the newest offender, never what is held already: the daemon
 * stays up whatever peers send.
 *
 * A member list is counted once, as the registry's, however many live
 * views share it (registry.c): from its allocation until the registry lets
 * go of it. A view that still holds it then keeps it for one request at
 * most, uncounted (struct member_list in registry.h says why that is
 * bounded). What a view adds of its own, its ranks' traces, is counted as
 * BUDGET_VIEWS while an HTTP request holds it.
 *
 * Counters are atomic: live looks' buffers are freed in HTTP threads. The
 * per-job counts live in struct job, under the daemon's lock.
 */
#include "budget.h"
#include "registry.h"

#include <stdatomic.h>
#include <unistd.h>

static atomic_uint_fast64_t budget_max_bytes = UINT64_MAX;
static atomic_uint_fast64_t budget_total;
static atomic_uint_fast64_t budget_kind_used[BUDGET_KINDS];
static atomic_uint_fast64_t budget_kind_refused[BUDGET_KINDS];

uint64_t budget_default_max(void)
{
	long pages = sysconf(_SC_PHYS_PAGES);
	long page = sysconf(_SC_PAGESIZE);
	uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
	uint64_t max = ram / 4;

	return max > BUDGET_MIN ? max : BUDGET_MIN;
}

void budget_set_max(uint64_t max)
{
	atomic_store(&budget_max_bytes, max);
}

uint64_t budget_max(void)
{
	return atomic_load(&budget_max_bytes);
}

bool budget_charge(enum budget_kind kind, uint64_t bytes)
{
	uint64_t max = atomic_load(&budget_max_bytes);
	uint64_t was = atomic_fetch_add(&budget_total, bytes);

	if (was + bytes > max || was + bytes < was) {
		atomic_fetch_sub(&budget_total, bytes);
		atomic_fetch_add(&budget_kind_refused[kind], 1);
		return false;
	}
	atomic_fetch_add(&budget_kind_used[kind], bytes);
	return true;
}

void budget_release(enum budget_kind kind, uint64_t bytes)
{
	atomic_fetch_sub(&budget_kind_used[kind], bytes);
	atomic_fetch_sub(&budget_total, bytes);
}

bool budget_charge_job(struct job *job, enum budget_kind kind, uint64_t bytes)
{
	if (job && job->mem_bytes + bytes > atomic_load(&budget_max_bytes) / 2) {
		atomic_fetch_add(&budget_kind_refused[kind], 1);
		return false;
	}
	if (!budget_charge(kind, bytes))
		return false;
	if (job)
		job->mem_bytes += bytes;
	return true;
}

void budget_release_job(struct job *job, enum budget_kind kind, uint64_t bytes)
{
	budget_release(kind, bytes);
	if (job)
		job->mem_bytes -= bytes;
}

bool budget_world_fits(uint32_t world, uint64_t per_rank)
{
	/* Up to the former largest world, whatever the budget: what was
	 * admitted before still is. */
	if (world <= BUDGET_WORLD_FREE)
		return true;
	return (uint64_t)world * per_rank <= atomic_load(&budget_max_bytes) / 2;
}

uint64_t budget_used(enum budget_kind kind)
{
	return atomic_load(&budget_kind_used[kind]);
}

uint64_t budget_refused(enum budget_kind kind)
{
	return atomic_load(&budget_kind_refused[kind]);
}
