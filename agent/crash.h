/*
 * The agent's handlers of fatal signals (crash.c): a rank that dies of
 * SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP or SIGSYS tells the
 * daemon (CRASH, protocol 6) and writes a local dump before it dies as it
 * would have without the agent.
 *
 * The link thread (link.c) lends the handler its connection: it says which
 * descriptor to write to once the daemon reads CRASH, and brackets every
 * write of its own with fr_crash_wire_claim()/fr_crash_wire_release(), so
 * that the handler writes only between whole frames.
 */
#ifndef FR_AGENT_CRASH_H
#define FR_AGENT_CRASH_H

#include <stdbool.h>

struct fr_trace;

/*
 * Installs the handlers, chained to what was installed before, and an
 * alternate signal stack on the calling thread when it has none. At agent
 * start (after the communication library's own initialisation, which may
 * install handlers of its own).
 */
void fr_crash_install(void);

/*
 * Link thread, every tick: a handler the application installed over ours
 * since is kept, and called first, by installing ours over it again (at
 * most a few times per signal; said once).
 */
void fr_crash_recheck(void);

/* Link thread: the connection's descriptor once the daemon reads CRASH, -1
 * when there is none (disconnected, or an older daemon). */
void fr_crash_set_fd(int fd);

/*
 * Link thread, before it queues bytes on the connection: false when a
 * crash has the connection (the frame is then not sent). Released once
 * its write queue is empty again.
 */
bool fr_crash_wire_claim(void);
void fr_crash_wire_release(void);

/*
 * Link thread, when woken: a crash the handler captured is named (symbols),
 * sent and dumped locally. `send` writes a frame the link way when the
 * connection has bytes of its own queued (it takes the buffer), `save`
 * writes the local dump. Returns true when there was one; the link thread
 * then calls fr_crash_dumped() when it is done with it.
 */
bool fr_crash_serve(int (*send)(void *buf, unsigned long len),
		    void (*save)(const char *incident, const char *reason));

/* Link thread: what it had to do for the crash is done (the local dump
 * written, and the daemon's request for one answered or given up on): the
 * handler may let the process die. */
void fr_crash_dumped(void);

/* The crash this process is dying of, into a dump's trace (none: nothing).
 * 0 or -ENOMEM. */
int fr_crash_to_trace(struct fr_trace *t);

/* In a forked child: the parent's connection is not the child's. */
void fr_crash_forget_in_child(void);

#endif
