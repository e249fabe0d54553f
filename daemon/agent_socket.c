/*
 * The --agent-socket file on a shared node. Another user must not be able
 * to plant a socket agents would take for the daemon's, nor to make the
 * daemon remove or replace a file that is not its own: the daemon creates
 * its socket only in a directory agents trust, and removes what it finds
 * at the path only when it is a socket of its own user that nothing
 * answers on (a daemon killed without its clean stop left it).
 */
#include "agent_socket.h"
#include "log.h"

#include "../protocol/endpoint.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/*
 * Whether a daemon answers on the socket at `path`: connect() is
 * immediate on a Unix socket (ECONNREFUSED when no one listens), so this
 * never blocks. EAGAIN, a full backlog, is someone listening.
 */
static bool socket_answers(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	bool answers;

	if (fd < 0)
		return true; /* cannot tell: assume it is live, and refuse */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	answers = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EAGAIN ||
		  errno == EINPROGRESS;
	close(fd);
	return answers;
}

/* What is at `path` already: nothing, or a stale socket of ours, removed. */
static int remove_stale(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		daemon_log("cannot use --agent-socket %s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISSOCK(st.st_mode)) {
		daemon_log("cannot use --agent-socket %s: something that is not a socket is there; not removing it",
			   path);
		return -1;
	}
	if (st.st_uid != geteuid()) {
		daemon_log("cannot use --agent-socket %s: a socket of uid %u is there, not this daemon's (uid %u); not removing it",
			   path, (unsigned)st.st_uid, (unsigned)geteuid());
		return -1;
	}
	if (socket_answers(path)) {
		daemon_log("cannot use --agent-socket %s: another daemon is listening on it", path);
		return -1;
	}
	if (unlink(path) < 0 && errno != ENOENT) {
		daemon_log("cannot remove the stale --agent-socket %s: %s", path, strerror(errno));
		return -1;
	}
	daemon_log("removed the stale --agent-socket %s (an earlier daemon did not stop cleanly)",
		   path);
	return 0;
}

int agent_socket_prepare(const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	const char *why;
	struct stat st;

	if (path[0] != '/' || strlen(path) >= FR_UNIX_PATH_MAX) {
		daemon_log("cannot use --agent-socket %s: it must be an absolute path of at most %d bytes",
			   path, FR_UNIX_PATH_MAX - 1);
		return -1;
	}
	snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
	if (stat(dir, &st) < 0) {
		daemon_log("cannot use --agent-socket %s: directory %s: %s (create it, owned by this user or root and not writable by others, e.g. systemd's RuntimeDirectory=)",
			   path, dir, strerror(errno));
		return -1;
	}
	if (!fr_socket_dir_ok(&st, geteuid(), &why)) {
		daemon_log("cannot use --agent-socket %s: directory %s %s: another user could plant a socket there that agents would take for this daemon's; agents refuse such a directory too (use one owned by this user or root that only its owner may write to)",
			   path, dir, why);
		return -1;
	}
	return remove_stale(path);
}
