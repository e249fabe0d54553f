/*
 * Where an agent finds its daemon, and when a Unix socket may be trusted
 * to be the daemon's. The agent reads FLIGHTREC_ADDR with
 * fr_endpoint_parse() and checks a socket with fr_socket_check() before
 * connecting to it; the daemon holds the directory of its --agent-socket
 * to the same rule (fr_socket_dir_ok()), so that a socket it creates is
 * one every agent accepts.
 *
 * Why the rule: on a shared node anyone can create a socket anywhere they
 * may write. A socket owned by root or by the agent's own user, in a
 * directory where no one else can add, rename or remove entries, can only
 * have been put there by root or by that user. Without a token nothing
 * else tells an impostor from the daemon.
 */
#ifndef FR_ENDPOINT_H
#define FR_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "wire.h"

struct stat;

/* sun_path's size on Linux: a path must fit with its terminator. */
#define FR_UNIX_PATH_MAX 108
/* FLIGHTREC_ADDR's prefix for a Unix socket: "unix:/run/flightrec/agent.sock". */
#define FR_UNIX_PREFIX "unix:"

/* A daemon's address as FLIGHTREC_ADDR gives it. */
struct fr_endpoint {
	bool is_unix;
	char path[FR_UNIX_PATH_MAX];  /* is_unix: an absolute path */
	char host[FR_HOST_MAX + 1];   /* otherwise: a name or literal, no brackets */
	char port[8];
};

/*
 * Parses "unix:/path", "host:port" or "[v6]:port" into `ep`. Returns 0,
 * or -EINVAL with `*why` saying what is wrong (a relative or too long
 * socket path, no port, an empty host).
 */
int fr_endpoint_parse(const char *s, struct fr_endpoint *ep, const char **why);

/*
 * Whether a directory (its stat(), `st`) may hold a socket that `uid`
 * trusts: a directory, owned by root or by `uid`, that neither its group
 * nor others may write to, unless it is sticky (as /tmp is: then only an
 * entry's owner can rename or remove it). Returns true, or false with
 * `*why` naming the problem.
 */
bool fr_socket_dir_ok(const struct stat *st, uid_t uid, const char **why);

/*
 * Whether the socket at `path` may be the daemon for a process of `uid`:
 * a socket (not a symbolic link), owned by root or by `uid`, in a
 * directory fr_socket_dir_ok() accepts. Returns 0; -ENOENT when nothing
 * is there; another negative errno with `why` (`cap` bytes) naming the
 * problem ("is owned by uid 65534, neither root nor you").
 */
int fr_socket_check(const char *path, uid_t uid, char *why, size_t cap);

#endif
