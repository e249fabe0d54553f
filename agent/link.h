/*
 * The link thread (link.c): the agent's connection to the daemon, its
 * local watchdog and the dumps it writes and uploads. Started once a
 * library has initialised (agent.c), never on the hot path.
 */
#ifndef FR_AGENT_LINK_H
#define FR_AGENT_LINK_H

int fr_link_start(void);
void fr_link_stop(void);
/* Asks the link thread to write a local dump (and upload it if connected). */
int fr_link_request_dump(const char *reason);
/* In a forked child: closes the parent's connection and loop descriptors
 * and forgets the link thread (which does not exist in the child). */
void fr_link_forget_in_child(void);

#endif
