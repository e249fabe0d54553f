/*
 * flightrec public API, for applications that want to talk to the agent
 * they run under (libflightrec.so, loaded with LD_PRELOAD or linked).
 *
 * Everything else the agent does needs no code change: it hooks the
 * communication library's calls by itself.
 */
#ifndef FLIGHTREC_H
#define FLIGHTREC_H

#ifdef __cplusplus
extern "C" {
#endif

#define FLIGHTREC_VERSION "0.1.0"

/* The agent's version string, e.g. "0.1.0". */
const char *fr_version(void);

/*
 * Asks the agent to write a flight-recorder dump now (to FLIGHTREC_DUMP_DIR,
 * and to the daemon when connected), tagged with `reason`. Returns at once:
 * the dump is written by the agent's own thread. Returns 0, or -ENOTCONN
 * when the agent is not recording (no communication library initialised).
 */
int fr_dump_now(const char *reason);

#ifdef __cplusplus
}
#endif

#endif
