/*
 * An incident directory's contents for the HTTP API, so that nobody needs a
 * shell on the daemon's node: what GET /v1/jobs/<job>/incidents/<id> lists
 * and the files GET .../incidents/<id>/<file> serves.
 *
 * Everything here reads the disk and none of it touches the daemon's
 * state, so the HTTP thread calls it without the lock. The ids come from
 * the router (fr_wire_valid_name: no '/', no leading '.'), and every
 * component below the dump directory is opened relative to its parent
 * with O_NOFOLLOW: a symbolic link planted in an incident directory, or
 * one in place of it, leads nowhere. Only the files the daemon writes
 * there are served: rank-<N>.json and manifest.json, regular files no
 * larger than --max-dump-size.
 */
#include "http_incidents.h"

#include "../dumps/grow.h"
#include "../protocol/wire.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MANIFEST_NAME "manifest.json"

/* One file of a listing. */
struct listed_file {
	/* "rank-9999999999.json", or "summaries-<node>.jsonl" with a node
	 * name fr_wire_valid_name() allows */
	char name[FR_JOB_MAX + 20];
	uint64_t size;
};

/* "<node>.jsonl" as cluster_incident.c names a node's summaries file
 * (summaries-<node>.jsonl): a name it may have, and nothing after. */
static bool summaries_name(const char *rest)
{
	size_t n = strlen(rest);
	char node[FR_JOB_MAX + 1];

	if (n <= 6 || n - 6 > FR_JOB_MAX || strcmp(rest + n - 6, ".jsonl") != 0)
		return false;
	memcpy(node, rest, n - 6);
	node[n - 6] = '\0';
	return fr_wire_valid_name(node);
}

bool http_incident_file_servable(const char *name)
{
	const char *digits;
	size_t n;

	if (strcmp(name, MANIFEST_NAME) == 0)
		return true;
	if (strncmp(name, "summaries-", 10) == 0)
		return summaries_name(name + 10);
	if (strncmp(name, "rank-", 5) != 0)
		return false;
	/* Exactly as incident.c names them: "rank-%u.json", so never a
	 * leading zero, and nothing after ".json" (a ".tmp.<pid>" being
	 * written is not the dump yet). */
	digits = name + 5;
	n = strspn(digits, "0123456789");
	if (n == 0 || n > 10 || (digits[0] == '0' && n > 1))
		return false;
	return strcmp(digits + n, ".json") == 0;
}

/*
 * Opens directory `name` under directory fd `at` without following a
 * link. Returns the fd, or a negative errno (-ENOENT for a link or
 * something that is not a directory, so that both read as "no such").
 */
static int open_dir_at(int at, const char *name)
{
	int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd >= 0)
		return fd;
	if (errno == ELOOP || errno == ENOTDIR)
		return -ENOENT;
	return -errno;
}

/*
 * Opens DUMP_DIR/<job>/<id>/: its fd, or a negative errno (-ENOENT when
 * either is missing, a link or not a directory); `*found` says how far it
 * got.
 */
static int open_incident_dir(const char *dump_dir, const char *job, const char *id,
			     enum http_incident_found *found)
{
	int top, jobfd, fd;

	*found = HTTP_FOUND_NOTHING;
	if (!fr_wire_valid_name(job) || !fr_wire_valid_name(id))
		return -ENOENT;
	/* The dump directory itself is the administrator's choice: it may
	 * be a link. */
	top = open(dump_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (top < 0)
		return -errno;
	jobfd = open_dir_at(top, job);
	close(top);
	if (jobfd < 0)
		return jobfd;
	*found = HTTP_FOUND_JOB;
	fd = open_dir_at(jobfd, id);
	close(jobfd);
	if (fd >= 0)
		*found = HTTP_FOUND_INCIDENT;
	return fd;
}

/* Opens servable file `name` of directory `dirfd`; see http_incident_open_file(). */
static int open_file_at(int dirfd, const char *name, uint64_t max_size, uint64_t *size)
{
	struct stat st;
	int fd;

	if (!http_incident_file_servable(name))
		return -ENOENT;
	/* O_NONBLOCK: a FIFO planted under a dump's name must not hold the
	 * HTTP thread in open(); it is refused below like any non-file. */
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return errno == ELOOP ? -ENOENT : -errno;
	if (fstat(fd, &st) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return -ENOENT;
	}
	*size = (uint64_t)st.st_size;
	if (*size > max_size) {
		close(fd);
		return -EFBIG;
	}
	return fd;
}

/*
 * Reads the manifest, bounded by `max_size`: its JSON (a new reference), or
 * NULL. `*present` says whether the file is there; when it is and cannot be
 * read, `why` says why (else it is "").
 */
static json_t *read_manifest(int dirfd, uint64_t max_size, bool *present, char *why, size_t cap)
{
	json_error_t jerr;
	uint64_t size;
	json_t *doc = NULL;
	char *buf;
	size_t got = 0;
	int fd;

	why[0] = '\0';
	*present = false;
	fd = open_file_at(dirfd, MANIFEST_NAME, max_size, &size);
	if (fd == -ENOENT)
		return NULL;
	*present = true;
	if (fd < 0) {
		snprintf(why, cap, "%s", fd == -EFBIG ? "larger than --max-dump-size" : strerror(-fd));
		return NULL;
	}
	/* The size fstat saw is all that is read: the writer renames a
	 * complete file into place, so it is the whole manifest. */
	buf = malloc(size ? size : 1);
	if (!buf) {
		snprintf(why, cap, "out of memory");
		goto out_close;
	}
	while (got < size) {
		ssize_t n = read(fd, buf + got, size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(why, cap, "%s", n < 0 ? strerror(errno) : "cut short while read");
			goto out_free;
		}
		got += (size_t)n;
	}
	doc = json_loadb(buf, got, 0, &jerr);
	if (!doc)
		snprintf(why, cap, "line %d: %s", jerr.line, jerr.text);
out_free:
	free(buf);
out_close:
	close(fd);
	return doc;
}

static int cmp_listed(const void *a, const void *b)
{
	/* rank-2.json before rank-10.json; manifest.json first. */
	return strverscmp(((const struct listed_file *)a)->name,
			  ((const struct listed_file *)b)->name);
}

/*
 * Restores the max-heap order of `files` (by cmp_listed(), n entries) from
 * entry `i` down, after that entry was replaced.
 */
static void heap_sift_down(struct listed_file *files, size_t n, size_t i)
{
	for (;;) {
		size_t big = i, l = 2 * i + 1, r = l + 1;
		struct listed_file tmp;

		if (l < n && cmp_listed(&files[l], &files[big]) > 0)
			big = l;
		if (r < n && cmp_listed(&files[r], &files[big]) > 0)
			big = r;
		if (big == i)
			return;
		tmp = files[i];
		files[i] = files[big];
		files[big] = tmp;
		i = big;
	}
}

/* Adds the last of `n` entries to the max-heap of the n - 1 before it. */
static void heap_sift_up(struct listed_file *files, size_t n)
{
	size_t i = n - 1;

	while (i > 0) {
		size_t parent = (i - 1) / 2;
		struct listed_file tmp;

		if (cmp_listed(&files[i], &files[parent]) <= 0)
			return;
		tmp = files[i];
		files[i] = files[parent];
		files[parent] = tmp;
		i = parent;
	}
}

/*
 * The servable regular files of the incident directory, sorted, at most
 * HTTP_INCIDENT_FILES_MAX (`*truncated` when there were more): the first
 * ones in that order (the manifest, the lowest ranks), whatever order the
 * directory lists them in, kept in a max-heap while reading. Returns a
 * new array or NULL with a negative errno in `*err`.
 */
static json_t *list_files(int dirfd, bool *truncated, int *err)
{
	struct listed_file *files = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	json_t *arr = NULL;
	DIR *dir;
	int fd;

	*truncated = false;
	/* fdopendir() takes the fd it is given: a copy, so that the caller's
	 * stays open. */
	fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		*err = -errno;
		return NULL;
	}
	dir = fdopendir(fd);
	if (!dir) {
		*err = -errno;
		close(fd);
		return NULL;
	}
	*err = -ENOMEM;
	while ((de = readdir(dir))) {
		struct stat st;

		if (!http_incident_file_servable(de->d_name) ||
		    fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (n == HTTP_INCIDENT_FILES_MAX) {
			struct listed_file cand;

			/* Full: the name replaces the last kept, if before it. */
			*truncated = true;
			memcpy(cand.name, de->d_name, strlen(de->d_name) + 1);
			cand.size = (uint64_t)st.st_size;
			if (cmp_listed(&cand, &files[0]) < 0) {
				files[0] = cand;
				heap_sift_down(files, n, 0);
			}
			continue;
		}
		if (fr_grow((void **)&files, &cap, n + 1, sizeof(*files), 64) < 0)
			goto out_free;
		/* A servable name fits: it was checked above. */
		memcpy(files[n].name, de->d_name, strlen(de->d_name) + 1);
		files[n].size = (uint64_t)st.st_size;
		n++;
		heap_sift_up(files, n);
	}
	if (n)
		qsort(files, n, sizeof(*files), cmp_listed);
	arr = json_array();
	for (size_t i = 0; arr && i < n; i++) {
		if (json_array_append_new(arr, json_pack("{s:s, s:I}", "name", files[i].name, "size",
							 (json_int_t)files[i].size))) {
			json_decref(arr);
			arr = NULL;
		}
	}
	if (arr)
		*err = 0;
out_free:
	free(files);
	closedir(dir);
	return arr;
}

int http_incident_json(const char *dump_dir, const char *job, const char *id,
		       uint64_t max_size, json_t **out, enum http_incident_found *found)
{
	char why[256];
	bool present, truncated;
	json_t *manifest, *files, *doc;
	int dirfd, err;

	*out = NULL;
	dirfd = open_incident_dir(dump_dir, job, id, found);
	if (dirfd < 0)
		return dirfd;
	files = list_files(dirfd, &truncated, &err);
	if (!files)
		goto out_close;
	manifest = read_manifest(dirfd, max_size, &present, why, sizeof(why));
	doc = json_pack("{s:s, s:s, s:b, s:o, s:o, s:b}", "job", job, "incident", id, "complete",
			present, "manifest", manifest ? manifest : json_null(), "files", files,
			"truncated", truncated);
	err = -ENOMEM;
	if (!doc)
		goto out_close;
	/* A manifest that is there but cannot be read says why. */
	if (why[0] && json_object_set_new(doc, "manifest_error", json_string(why))) {
		json_decref(doc);
		goto out_close;
	}
	*out = doc;
	err = 0;
out_close:
	close(dirfd);
	return err;
}

int http_incident_open_file(const char *dump_dir, const char *job, const char *id,
			    const char *name, uint64_t max_size, uint64_t *size,
			    enum http_incident_found *found)
{
	int dirfd, fd;

	dirfd = open_incident_dir(dump_dir, job, id, found);
	if (dirfd < 0)
		return dirfd;
	fd = open_file_at(dirfd, name, max_size, size);
	close(dirfd);
	return fd;
}
