/*
 * FLIGHTREC_ADDR and the trust rule of a daemon's Unix socket (endpoint.h).
 */
#include "endpoint.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int fr_endpoint_parse(const char *s, struct fr_endpoint *ep, const char **why)
{
	const char *colon;
	size_t hlen;

	memset(ep, 0, sizeof(*ep));
	*why = NULL;
	if (strncmp(s, FR_UNIX_PREFIX, sizeof(FR_UNIX_PREFIX) - 1) == 0) {
		const char *path = s + sizeof(FR_UNIX_PREFIX) - 1;

		if (path[0] != '/') {
			*why = "a socket path must be absolute (unix:/path)";
			return -EINVAL;
		}
		if (strlen(path) >= sizeof(ep->path)) {
			*why = "the socket path is longer than a Unix socket's 107 bytes";
			return -EINVAL;
		}
		ep->is_unix = true;
		snprintf(ep->path, sizeof(ep->path), "%s", path);
		return 0;
	}
	colon = strrchr(s, ':');
	if (!colon || colon == s || !colon[1] || strlen(colon + 1) >= sizeof(ep->port)) {
		*why = "not host:port, [v6]:port or unix:/path";
		return -EINVAL;
	}
	hlen = (size_t)(colon - s);
	if (s[0] == '[' && colon[-1] == ']') {
		s++;
		hlen -= 2;
	}
	if (hlen == 0 || hlen >= sizeof(ep->host)) {
		*why = "not host:port, [v6]:port or unix:/path";
		return -EINVAL;
	}
	memcpy(ep->host, s, hlen);
	ep->host[hlen] = '\0';
	snprintf(ep->port, sizeof(ep->port), "%s", colon + 1);
	return 0;
}

bool fr_socket_dir_ok(const struct stat *st, uid_t uid, const char **why)
{
	if (!S_ISDIR(st->st_mode)) {
		*why = "is not a directory";
		return false;
	}
	if (st->st_uid != 0 && st->st_uid != uid) {
		*why = "is owned by another user";
		return false;
	}
	if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX)) {
		*why = "is writable by its group or others and not sticky";
		return false;
	}
	return true;
}

int fr_socket_check(const char *path, uid_t uid, char *why, size_t cap)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	const char *dir_why;
	struct stat st;

	why[0] = '\0';
	if (lstat(path, &st) < 0) {
		int err = errno;

		if (err != ENOENT)
			snprintf(why, cap, "cannot be examined: %s", strerror(err));
		return -err;
	}
	if (S_ISLNK(st.st_mode)) {
		snprintf(why, cap, "is a symbolic link");
		return -ELOOP;
	}
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(why, cap, "is not a socket");
		return -ENOTSOCK;
	}
	if (st.st_uid != 0 && st.st_uid != uid) {
		snprintf(why, cap, "is owned by uid %u, neither root nor you", (unsigned)st.st_uid);
		return -EPERM;
	}
	if (!slash || (size_t)(slash - path) >= sizeof(dir)) {
		snprintf(why, cap, "is not an absolute path");
		return -EINVAL;
	}
	snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
	if (stat(dir, &st) < 0) {
		int err = errno;

		snprintf(why, cap, "its directory %s cannot be examined: %s", dir, strerror(err));
		return -err;
	}
	if (!fr_socket_dir_ok(&st, uid, &dir_why)) {
		snprintf(why, cap, "its directory %s %s", dir, dir_why);
		return -EPERM;
	}
	return 0;
}
