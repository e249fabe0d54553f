/* The --agent-socket file: made safe to create, removed on a clean stop (agent_socket.c). */
#ifndef FR_DAEMON_AGENT_SOCKET_H
#define FR_DAEMON_AGENT_SOCKET_H

/*
 * Readies `path` for the daemon to bind its agent socket there: its
 * directory must exist and be one agents trust (fr_socket_dir_ok(): owned
 * by root or this user, not writable by its group or others unless
 * sticky); whatever is at `path` must be a socket of this user that no
 * daemon listens on any more (removed here) or nothing at all. Returns 0,
 * or -1 after logging what is wrong and how to fix it.
 */
int agent_socket_prepare(const char *path);

#endif
