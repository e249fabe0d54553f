/*
 * The link thread (link.c): the agent's connection to the daemon, its
 * local watchdog and the dumps it writes and uploads. Started once a
 * library has initialised (agent.c), never on the hot path.
 */
#ifndef FR_AGENT_LINK_H
#define FR_AGENT_LINK_H

#include <stdbool.h>

struct fr_trace;

int fr_link_start(void);
void fr_link_stop(void);
/*
 * The process is ending without having finalised (agent.c: exit(),
 * _exit(), a return from main): stops the link as fr_link_stop() does,
 * but a daemon of protocol 6 is told EXIT (with `code` when `code_known`)
 * instead of BYE, and, when that is a fault (operations in flight, or a
 * non-zero status), the link waits a little (at most 1 s) for the daemon's
 * incident to take this rank's dump, as after a crash. Bounded in time;
 * takes no lock, so that an _exit() from a signal handler cannot hang.
 */
void fr_link_exit(int code, bool code_known, bool underscore, bool finalised);
/* Asks the link thread to write a local dump (and upload it if connected). */
int fr_link_request_dump(const char *reason);
/* In a forked child: closes the parent's connection and loop descriptors
 * and forgets the link thread (which does not exist in the child). */
void fr_link_forget_in_child(void);
/* From a signal handler (crash.c): wakes the link thread to serve a crash.
 * False when there is no link thread. Async-signal-safe. */
bool fr_link_wake_from_signal(void);

/* The exit this process is ending by, into a dump's trace (none: nothing). */
void fr_link_exit_to_trace(struct fr_trace *t);
/* The first asynchronous NCCL error the link found, into a dump's trace. */
void fr_link_nccl_error_to_trace(struct fr_trace *t);

#endif
