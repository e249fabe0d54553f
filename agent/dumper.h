/*
 * Turns this rank's recorder into a dump: identity, communicators, the ring
 * (oldest record first) and the stack of every thread, in the dump format of
 * dumps/FORMAT.md, written atomically to FLIGHTREC_DUMP_DIR. Runs on the
 * link thread, never on the application's.
 */
#ifndef FR_AGENT_DUMPER_H
#define FR_AGENT_DUMPER_H

#include <stddef.h>

#include "../dumps/trace.h"

/*
 * Fills `t` (caller frees with fr_trace_free) from the live recorder.
 * Returns 0 or -ENOMEM.
 */
int fr_dumper_build(struct fr_trace *t, const char *incident, const char *reason);

/*
 * Builds and serialises the dump into *buf (caller frees). Returns 0 or
 * -errno.
 */
int fr_dumper_serialize(const char *incident, const char *reason, char **buf, size_t *len);

/*
 * Writes serialised dump bytes atomically to
 * FLIGHTREC_DUMP_DIR/<job>/<incident>/rank-<N>.json (the path goes to
 * `path`). Returns 0 or -errno.
 */
int fr_dumper_save(const char *incident, const char *buf, size_t len, char *path,
		   size_t pathlen);

/*
 * The stacks of every thread of this process (stacks.c): the calling
 * thread's directly, the others' by a signal whose handler unwinds them.
 * Threads that do not answer within a short bound are listed without
 * frames. Returns 0 or -ENOMEM.
 */
int fr_stacks_collect(struct fr_trace *t, int signo);

#endif
