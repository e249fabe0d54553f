/*
 * The link thread (link.c): the agent's connection to the daemon, its
 * local watchdog and the dumps it writes and uploads. Started once a
 * library has initialised (agent.c), never on the hot path.
 */
#ifndef FR_AGENT_LINK_H
#define FR_AGENT_LINK_H

#include <stdbool.h>

int fr_link_start(void);
void fr_link_stop(void);
/* Asks the link thread to write a local dump (and upload it if connected). */
int fr_link_request_dump(const char *reason);
/* In a forked child: closes the parent's connection and loop descriptors
 * and forgets the link thread (which does not exist in the child). */
void fr_link_forget_in_child(void);
/* From a signal handler (crash.c): wakes the link thread to serve a crash.
 * False when there is no link thread. Async-signal-safe. */
bool fr_link_wake_from_signal(void);

#endif
