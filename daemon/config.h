/* The --config file and the descriptor limit (config.c). */
#ifndef FR_DAEMON_CONFIG_H
#define FR_DAEMON_CONFIG_H

#include <stddef.h>
#include <stdint.h>

struct option;
struct daemon_config;
struct flightrecd;

/* The --config file's settings as arguments; see config_read(). */
struct config_args {
	const char *path;
	int argc;
	char **argv;                /* argv[0] is a program name, then "--key=value", owned */
	unsigned *lines;            /* the line each argv[i] came from */
};

/*
 * The --config file. config_read() turns FILE's "key = value" lines into
 * arguments "--key=value" for the command-line parser, so the file takes
 * exactly the command line's settings; a key must name one of `opts` that
 * takes an argument, other than "config". Returns 0, or a negative errno
 * with the file, the line and the reason in `err`; on success `out` owns
 * its memory until config_args_free().
 */
int config_read(const char *path, const struct option *opts, struct config_args *out, char *err,
		size_t errcap);
void config_args_free(struct config_args *ca);
/*
 * Whether `cfg` may run: an address beyond loopback (agents' or HTTP)
 * needs a token, or --insecure. Returns 0, or -EPERM after saying why on
 * stderr.
 */
int config_check_exposure(const struct daemon_config *cfg);
/* Logs the settings in effect, after `when` ("startup", "reload"). */
void config_log_settings(const struct daemon_config *cfg, const char *when);
/*
 * Applies what a reload may change from `next` to the running daemon (the
 * caller holds the lock), logs each change and each setting that needs a
 * restart; returns how many settings changed.
 */
int config_apply_reload(struct flightrecd *d, const struct daemon_config *next);

/*
 * Raises the soft RLIMIT_NOFILE to the hard one, once at start; the limit
 * in effect after it; the descriptors kept for everything but agent
 * connections (HTTP's connections and the files they serve, incident files
 * being written, the loop's own handles), so that a flood of agents can
 * never cost an incident or /healthz; and the agent connections the limit
 * allows beyond that reserve, given the --max-connections asked for.
 */
void config_raise_fd_limit(void);
uint64_t config_fd_limit(void);
unsigned config_fd_reserve(void);
uint32_t config_fd_max_connections(uint32_t asked);

#endif
