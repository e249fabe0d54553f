/*
 * Files of an incident directory, written safely (dump.h): atomic writes,
 * and directories opened without trusting what another user may have put
 * on the way. The agent writes its dumps with these, the daemon its
 * manifests.
 */
/* For asprintf(). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "dump.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, buf, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		/* A regular file that accepts nothing is as good as full. */
		if (w == 0)
			return -ENOSPC;
		buf += w;
		len -= (size_t)w;
	}
	return 0;
}

/* fr_write_file_at(), and without `sync` fr_write_file_unsynced()'s part. */
static int write_file_at(int dirfd, const char *name, const void *buf, size_t len, mode_t mode,
			 bool sync)
{
	char *tmp;
	int fd, rc;

	if (asprintf(&tmp, "%s.tmp.%ld", name, (long)getpid()) < 0)
		return -ENOMEM;
	/* O_NOFOLLOW: a link planted at the temporary name is not followed. */
	fd = openat(dirfd, tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0 && errno == EEXIST) {
		/*
		 * Left by an earlier process with our pid that died mid-write
		 * (pids repeat across container restarts); it is garbage.
		 */
		unlinkat(dirfd, tmp, 0);
		fd = openat(dirfd, tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, mode);
	}
	if (fd < 0) {
		rc = -errno;
		goto out_free;
	}
	/* The mode asked for, whatever the process's umask let through. */
	if (fchmod(fd, mode) < 0) {
		rc = -errno;
		close(fd);
		goto out_unlink;
	}
	rc = write_all(fd, buf, len);
	if (!rc && sync && fsync(fd) < 0)
		rc = -errno;
	/* close() can report a failed delayed write (NFS). */
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (!rc && renameat(dirfd, tmp, dirfd, name) < 0)
		rc = -errno;
out_unlink:
	if (rc) {
		unlinkat(dirfd, tmp, 0);
		goto out_free;
	}
	if (!sync)
		goto out_free;
	/*
	 * The file is in place now; a failure to make the rename durable is
	 * reported, but undoing it would lose the data rather than save it.
	 * Some file systems cannot sync a directory; the rename stands.
	 */
	if (fsync(dirfd) < 0 && errno != EINVAL && errno != EROFS)
		rc = -errno;

out_free:
	free(tmp);
	return rc;
}

int fr_write_file_at(int dirfd, const char *name, const void *buf, size_t len, mode_t mode)
{
	return write_file_at(dirfd, name, buf, len, mode, true);
}

/* `path`'s directory, opened; a negative errno when it cannot be. */
static int open_parent(const char *path, const char **base)
{
	const char *slash = strrchr(path, '/');
	char *dir;
	int dirfd;

	*base = slash ? slash + 1 : path;
	if (!slash)
		dir = strdup(".");
	else if (slash == path)
		dir = strdup("/");
	else
		dir = strndup(path, (size_t)(slash - path));
	if (!dir)
		return -ENOMEM;
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	return dirfd < 0 ? -errno : dirfd;
}

/* write_file_at() of `path`, in its directory. */
static int write_file_path(const char *path, const void *buf, size_t len, mode_t mode, bool sync)
{
	const char *base;
	int dirfd = open_parent(path, &base), rc;

	if (dirfd < 0)
		return dirfd;
	rc = write_file_at(dirfd, base, buf, len, mode, sync);
	close(dirfd);
	return rc;
}

int fr_write_file_unsynced(const char *path, const void *buf, size_t len, mode_t mode)
{
	return write_file_path(path, buf, len, mode, false);
}

/* Whether entry `e` of the directory open at `fd` is a regular file (some
 * file systems leave d_type unknown). */
static bool is_file(int fd, const struct dirent *e)
{
	struct stat st;

	if (e->d_type != DT_UNKNOWN)
		return e->d_type == DT_REG;
	return fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

/*
 * fdatasync()s each regular file of the directory open at `fd` when it
 * holds at most FR_SYNC_EACH_MAX; returns 0, -errno of the first that
 * failed, or 1 when it holds more or cannot be read to its end (syncfs()
 * is for the caller then).
 */
static int sync_each(int fd)
{
	int dup_fd = dup(fd), rc = 0;
	DIR *dir = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	struct dirent *e;
	size_t n = 0;

	if (!dir) {
		if (dup_fd >= 0)
			close(dup_fd);
		return 1;
	}
	/* Counted first: past the limit, syncfs() is the cheaper. A
	 * directory that cannot be read to its end is synced by syncfs()
	 * too, never taken for one of fewer files. */
	errno = 0;
	while ((e = readdir(dir)))
		if (is_file(fd, e) && ++n > FR_SYNC_EACH_MAX)
			break;
	if (n > FR_SYNC_EACH_MAX || (!e && errno)) {
		closedir(dir);
		return 1;
	}
	rewinddir(dir);
	for (;;) {
		int f;

		errno = 0;
		if (!(e = readdir(dir))) {
			if (errno && !rc)
				rc = 1;
			break;
		}
		if (!is_file(fd, e))
			continue;
		/* O_NONBLOCK: an entry swapped for a FIFO meanwhile must not
		 * block the opener. */
		f = openat(fd, e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		if (f < 0) {
			/* One renamed or removed meanwhile is someone else's. */
			if (errno != ENOENT && !rc)
				rc = -errno;
			continue;
		}
		if (fdatasync(f) < 0 && !rc)
			rc = -errno;
		close(f);
	}
	closedir(dir);
	return rc;
}

int fr_sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd < 0)
		return -errno;
	/*
	 * A few files (a node daemon's incident: its 8 ranks' dumps) are
	 * synced each, a journal commit each (a millisecond here). Many
	 * (thousands of ranks' dumps) are synced in one flush of the file
	 * system, syncfs(), which also flushes whatever else is waiting to
	 * be written there: on a node where the training job has just
	 * written its checkpoint to the same file system, seconds, and 512
	 * node daemons sharing one disk in bench/nodes.sh held their
	 * incidents up by 3 s. Then the directory's entries.
	 */
	rc = sync_each(fd);
	if (rc == 1)
		rc = syncfs(fd) < 0 ? -errno : 0;
	if (!rc && fsync(fd) < 0 && errno != EINVAL && errno != EROFS)
		rc = -errno;
	close(fd);
	return rc;
}

int fr_write_file_atomic_mode(const char *path, const void *buf, size_t len, mode_t mode)
{
	return write_file_path(path, buf, len, mode, true);
}

int fr_write_file_atomic(const char *path_, const void *buf, size_t len)
{
	return fr_write_file_atomic_mode(path_, buf, len, 0644);
}

/*
 * Opens component `name` of a path below `at` as a directory, creating it
 * with `mode` when it is missing, and checks it is one the caller may trust:
 * a directory owned by the caller or by root. A symbolic link is followed
 * only when it is owned by the caller or by root (a system's /scratch ->
 * /lustre/scratch); one planted by another user is refused. Returns the
 * directory's descriptor, or a negative errno with *why saying what is
 * wrong with it.
 */
static int open_trusted_dir(int at, const char *name, mode_t mode, const char **why)
{
	uid_t me = geteuid();
	struct stat st;
	int fd;

	*why = NULL;
	fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		if (mkdirat(at, name, mode) < 0 && errno != EEXIST)
			return -errno;
		fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0 && (errno == ELOOP || errno == ENOTDIR)) {
		int err = errno;

		if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
		if (!S_ISLNK(st.st_mode)) {
			*why = "exists and is not a directory";
			return -ENOTDIR;
		}
		if (st.st_uid != me && st.st_uid != 0) {
			*why = "is a symbolic link owned by another user";
			return -ELOOP;
		}
		fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			return errno == ENOTDIR ? -err : -errno;
	}
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	if (st.st_uid != me && st.st_uid != 0) {
		close(fd);
		*why = "is a directory owned by another user";
		return -EPERM;
	}
	return fd;
}

int fr_dir_open(int at, const char *path, mode_t mode, char *err, size_t errlen)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);
	const char *why = NULL;
	char *p, *name;
	int fd, rc = 0;

	if (err && errlen)
		err[0] = '\0';
	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	p = buf;
	if (*p == '/') {
		fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		while (*p == '/')
			p++;
	} else {
		fd = openat(at, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	if (fd < 0)
		return -errno;
	while (*p) {
		int next;

		name = p;
		while (*p && *p != '/')
			p++;
		if (*p) {
			*p++ = '\0';
			while (*p == '/')
				p++;
		}
		if (!strcmp(name, ".")) /* ".." is an ordinary name: checked like any other */
			continue;
		next = open_trusted_dir(fd, name, mode, &why);
		if (next < 0) {
			rc = next;
			if (err && errlen)
				snprintf(err, errlen, "%.*s %s", (int)(name + strlen(name) - buf), path,
					 why ? why : strerror(-rc));
			break;
		}
		close(fd);
		fd = next;
	}
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

int fr_mkdir_p(const char *path)
{
	int fd = fr_dir_open(AT_FDCWD, path, 0750, NULL, 0);

	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}
