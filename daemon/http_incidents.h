/*
 * An incident directory's files for the HTTP API, read without the daemon's
 * lock (they touch no state). Ids must have passed fr_wire_valid_name();
 * nothing below the dump directory is followed through a symbolic link.
 */
#ifndef FR_DAEMON_HTTP_INCIDENTS_H
#define FR_DAEMON_HTTP_INCIDENTS_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>

#include "daemon.h"

/*
 * Files an incident listing names at most (the first in name order, then
 * `truncated`): 65,536 ranks' dumps and the manifest, 5 MB of JSON. Not
 * the largest world (DAEMON_MAX_WORLD): a million names would be 80 MB
 * an answer; every file past the listing is still served by its name.
 */
#define HTTP_INCIDENT_FILES_MAX ((1u << 16) + 1)
/* Whether `name` is a file the API serves: "rank-<N>.json" or "manifest.json". */
bool http_incident_file_servable(const char *name);
/* How far a request for an incident's files got on disk. */
enum http_incident_found {
	HTTP_FOUND_NOTHING,  /* no directory DUMP_DIR/<job>/ */
	HTTP_FOUND_JOB,      /* that, but no DUMP_DIR/<job>/<id>/ */
	HTTP_FOUND_INCIDENT,
};
/*
 * The document of GET /v1/jobs/<job>/incidents/<id>, from the directory
 * DUMP_DIR/<job>/<id>/: {"job", "incident", "complete" (manifest.json is
 * there), "manifest" (its JSON, or null), "files": [{"name", "size"}]
 * (servable regular files, sorted, at most HTTP_INCIDENT_FILES_MAX),
 * "truncated"}, and "manifest_error" when the manifest is there but cannot
 * be read. Returns 0 with a new reference in `*out`, or a negative errno:
 * -ENOENT when a directory is missing, a link or not a directory.
 */
int http_incident_json(const char *dump_dir, const char *job, const char *id,
		       uint64_t max_size, json_t **out, enum http_incident_found *found);
/*
 * Opens servable file `name` of DUMP_DIR/<job>/<id>/ for reading. Returns
 * the fd (the caller owns it) and its size, or a negative errno: -ENOENT
 * for a missing directory, a name not served, a missing file, a link or
 * anything but a regular file; -EFBIG for one larger than `max_size`.
 */
int http_incident_open_file(const char *dump_dir, const char *job, const char *id,
			    const char *name, uint64_t max_size, uint64_t *size,
			    enum http_incident_found *found);

#endif
