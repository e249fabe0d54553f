/*
 * Turns this rank's recorder into a dump: identity, communicators, the ring
 * (oldest record first) and the stack of every thread, in the dump format of
 * dumps/FORMAT.md, written atomically to FLIGHTREC_DUMP_DIR. Runs on the
 * link thread, never on the application's.
 */
#ifndef FR_AGENT_DUMPER_H
#define FR_AGENT_DUMPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../dumps/trace.h"
#include "../protocol/wire.h"

/*
 * What goes into a dump: the scope of a live look (protocol/wire.h), for
 * FR_WIRE_LIVE_TRACE with the newest `last` entries. FR_WIRE_LIVE_NONE (an
 * incident's dump) and FR_WIRE_LIVE_WHOLE take everything.
 */
struct fr_dumper_scope {
	enum fr_wire_live_scope scope;
	uint32_t last;
};

/*
 * Fills `t` (caller frees with fr_trace_free) from the live recorder,
 * within `scope`; the ring entries it held and left out go to *left_out.
 * Only a scope with stacks signals the application's threads. Returns 0 or
 * -ENOMEM.
 */
int fr_dumper_build(struct fr_trace *t, const char *incident, const char *reason,
		    const struct fr_dumper_scope *scope, uint64_t *left_out);

/*
 * Builds and serialises the dump within `scope` into *buf (caller frees);
 * a dump scoped to stacks or a trace says so in "scope" and
 * "entries_left_out" (dumps/FORMAT.md). Returns 0 or -errno.
 */
int fr_dumper_serialize(const char *incident, const char *reason,
			const struct fr_dumper_scope *scope, char **buf, size_t *len);

/*
 * Writes serialised dump bytes atomically to
 * FLIGHTREC_DUMP_DIR/<job>/<incident>/rank-<N>.json (the path goes to
 * `path`), mode 0600, in directories created 0700 and opened as
 * fr_dir_open() says: each a directory of this user's or root's, no link
 * of another user's followed. `asked`: a daemon asked for the dump; this
 * process makes at most FR_DUMPER_MAX_INCIDENTS new incident directories
 * for such dumps (-EDQUOT past them), so that a daemon asking again and
 * again cannot fill the disk. The local watchdog's dumps and the
 * application's (fr_dump_now) are not counted, nor limited by what earlier
 * runs left in the directory: they are the dumps that matter when no
 * daemon is there. Link thread only. Returns 0 or -errno, with `err`
 * saying what is wrong (empty when strerror says it all).
 */
#define FR_DUMPER_MAX_INCIDENTS 64
int fr_dumper_save(const char *incident, const char *buf, size_t len, bool asked, char *path,
		   size_t pathlen, char *err, size_t errlen);

#endif
