/*
 * Every thread's stack, for a dump (stacks.c).
 */
#ifndef FR_AGENT_STACKS_H
#define FR_AGENT_STACKS_H

#include <stdint.h>

struct fr_trace;

/*
 * The stacks of every thread of this process: the calling thread's
 * directly, the others' by a signal whose handler unwinds them. Threads
 * that do not answer within a short bound are listed without frames.
 * Link thread only. Returns 0 or -ENOMEM.
 */
int fr_stacks_collect(struct fr_trace *t, int signo);

/*
 * Unwinds the calling thread from where a signal interrupted it (`uc`, the
 * handler's third argument) into `ips`, innermost first, at most `max`
 * (64 at most). Async-signal-safe: no allocation, no lock (the unwinder
 * finds frames through _dl_find_object). Returns how many.
 */
int fr_stacks_unwind_context(uint64_t *ips, int max, const void *uc);

#endif
