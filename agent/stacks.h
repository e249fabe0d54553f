/*
 * Every thread's stack, for a dump (stacks.c).
 */
#ifndef FR_AGENT_STACKS_H
#define FR_AGENT_STACKS_H

struct fr_trace;

/*
 * The stacks of every thread of this process: the calling thread's
 * directly, the others' by a signal whose handler unwinds them. Threads
 * that do not answer within a short bound are listed without frames.
 * Link thread only. Returns 0 or -ENOMEM.
 */
int fr_stacks_collect(struct fr_trace *t, int signo);

#endif
