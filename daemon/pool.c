/* The daemon's work on libuv's thread pool (pool.h). */
#include "pool.h"

#include <stdbool.h>
#include <sys/resource.h>
#include <unistd.h>

void pool_background(void)
{
	static _Thread_local bool lowered;

	/* The event loop's thread, the process's first, runs a work
	 * function itself when the pool cannot take it: never lowered. */
	if (lowered || gettid() == getpid())
		return;
	lowered = true;
	/* On Linux, PRIO_PROCESS with a thread's id sets that thread's
	 * nice value alone. */
	(void)setpriority(PRIO_PROCESS, (id_t)gettid(),
			  getpriority(PRIO_PROCESS, (id_t)gettid()) + POOL_NICE);
}
