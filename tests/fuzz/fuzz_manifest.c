/*
 * libFuzzer target for the readers that take a path (dumps/dump.h):
 * fr_manifest_read_file(), which reads an incident's manifest (the
 * daemon's live view of every rank, as a list of dump objects; from format
 * 2.0 with each communicator's members once, in a table the views refer
 * to), and fr_dump_read_file() on the same file.
 *
 * A manifest that is read must hold what fr_manifest_read_file() promises,
 * each of its ranks, written out as a dump, must read back the same, and
 * the manifest written out again (format 2.0, whatever it was read from)
 * must read back the same. A file read by fr_dump_read_file() must read
 * the same through fr_dump_parse().
 *
 * The readers open a path as fr_dump_open() does: no symbolic link (so not
 * a memfd's /proc/self/fd name), a regular file only. Each input is written
 * over one temporary file, in /dev/shm where there is one (no disk), made
 * at the first input and removed at exit.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dump.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int file_fd = -1;
static char file_path[64];

static void remove_file(void)
{
	unlink(file_path);
}

static bool read_rc_ok(int rc)
{
	return rc == 0 || rc == -EPROTO || rc == -EPROTONOSUPPORT || rc == -ENOMEM;
}

/*
 * Writes `m` as a manifest and reads it back: the same views, whose
 * communicators' members are the table's or their own (so that
 * fr_manifest_free() frees each list once).
 */
static void manifest_roundtrip(const struct fr_manifest *m)
{
	const struct fr_trace **ptrs = calloc(m->nranks ? m->nranks : 1, sizeof(*ptrs));
	struct fr_manifest again;
	char err[512];
	json_t *doc;
	char *text;
	int rc;

	FUZZ_CHECK(ptrs);
	for (size_t i = 0; i < m->nranks; i++)
		ptrs[i] = &m->ranks[i];
	doc = fr_manifest_to_json(m->job, m->incident, m->reason, m->world_size, m->opened_ns,
				  m->closed_ns, ptrs, m->nranks, NULL);
	free(ptrs);
	if (!doc)
		return;
	text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	if (!text)
		return;
	rc = fr_manifest_parse(text, strlen(text), "again", &again, err, sizeof(err));
	if (rc != 0 && rc != -ENOMEM) {
		fprintf(stderr, "fuzz_manifest: a manifest written back does not read: %s\n", err);
		abort();
	}
	free(text);
	if (rc)
		return;
	FUZZ_CHECK(again.nranks == m->nranks && again.world_size == m->world_size);
	FUZZ_CHECK(!again.nmembers || again.members);
	for (size_t i = 0; i < m->nranks; i++)
		FUZZ_SAME_TRACE("fuzz_manifest: a manifest written and read back", &m->ranks[i],
				&again.ranks[i]);
	fr_manifest_free(&again);
	FUZZ_CHECK(!again.ranks && !again.members && !again.nranks);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fr_manifest m;
	struct fr_trace t, again;
	char err[512];
	int rc;

	if (file_fd < 0) {
		snprintf(file_path, sizeof(file_path), "%s/fuzz_manifest.XXXXXX",
			 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
		file_fd = mkstemp(file_path);
		FUZZ_CHECK(file_fd >= 0);
		atexit(remove_file);
	}
	FUZZ_CHECK(ftruncate(file_fd, 0) == 0);
	FUZZ_CHECK(pwrite(file_fd, data, size, 0) == (ssize_t)size);

	rc = fr_manifest_read_file(file_path, &m, err, sizeof(err));
	FUZZ_CHECK(read_rc_ok(rc));
	if (rc == 0) {
		FUZZ_CHECK(m.world_size > 0);
		FUZZ_CHECK(!m.nranks || m.ranks);
		FUZZ_CHECK(!m.nmembers || m.members);
		FUZZ_CHECK(strlen(m.job) <= FR_JOB_MAX && strlen(m.incident) <= FR_INCIDENT_MAX &&
			   strlen(m.reason) <= FR_REASON_MAX);
		for (size_t i = 0; i < m.nranks; i++) {
			FUZZ_CHECK(m.ranks[i].rank < m.ranks[i].world_size);
			fuzz_roundtrip("fuzz_manifest: a rank written and read back", &m.ranks[i]);
		}
		manifest_roundtrip(&m);
		fr_manifest_free(&m);
	} else {
		FUZZ_CHECK(err[0]);
		FUZZ_CHECK(!m.nranks && !m.ranks && !m.members);
	}

	rc = fr_dump_read_file(file_path, &t, err, sizeof(err));
	FUZZ_CHECK(read_rc_ok(rc));
	if (rc == 0) {
		char *buf = malloc(size);

		FUZZ_CHECK(buf || !size);
		if (size)
			memcpy(buf, data, size);
		rc = fr_dump_parse(buf, size, "fuzz", &again, err, sizeof(err));
		FUZZ_CHECK(rc == 0 || rc == -ENOMEM);
		if (rc == 0) {
			FUZZ_SAME_TRACE("fr_dump_read_file vs fr_dump_parse", &t, &again);
			fr_trace_free(&again);
		}
		free(buf);
		fr_trace_free(&t);
	}
	return 0;
}
