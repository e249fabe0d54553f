/*
 * libFuzzer target for the readers that take a path (dumps/dump.h):
 * fr_manifest_read_file(), which reads an incident's manifest (the
 * daemon's live view of every rank, as a list of dump objects), and
 * fr_dump_read_file() on the same file. Each input is written to a memory
 * file (memfd) once made, and the readers open it by its /proc/self/fd
 * name, so that a run costs no disk.
 *
 * A manifest that is read must hold what fr_manifest_read_file() promises,
 * and each of its ranks, written out as a dump, must read back the same.
 * A file read by fr_dump_read_file() must read the same through
 * fr_dump_parse().
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dump.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int memfd = -1;
static char memfd_path[64];

static bool read_rc_ok(int rc)
{
	return rc == 0 || rc == -EPROTO || rc == -EPROTONOSUPPORT || rc == -ENOMEM;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fr_manifest m;
	struct fr_trace t, again;
	char err[512];
	int rc;

	if (memfd < 0) {
		memfd = memfd_create("fuzz_manifest", MFD_CLOEXEC);
		FUZZ_CHECK(memfd >= 0);
		snprintf(memfd_path, sizeof(memfd_path), "/proc/self/fd/%d", memfd);
	}
	FUZZ_CHECK(ftruncate(memfd, 0) == 0);
	FUZZ_CHECK(pwrite(memfd, data, size, 0) == (ssize_t)size);

	rc = fr_manifest_read_file(memfd_path, &m, err, sizeof(err));
	FUZZ_CHECK(read_rc_ok(rc));
	if (rc == 0) {
		FUZZ_CHECK(m.world_size > 0);
		FUZZ_CHECK(!m.nranks || m.ranks);
		FUZZ_CHECK(strlen(m.job) <= FR_JOB_MAX && strlen(m.incident) <= FR_INCIDENT_MAX &&
			   strlen(m.reason) <= FR_REASON_MAX);
		for (size_t i = 0; i < m.nranks; i++) {
			FUZZ_CHECK(m.ranks[i].rank < m.ranks[i].world_size);
			fuzz_roundtrip("fuzz_manifest: a rank written and read back", &m.ranks[i]);
		}
		fr_manifest_free(&m);
	} else {
		FUZZ_CHECK(err[0]);
		FUZZ_CHECK(!m.nranks && !m.ranks);
	}

	rc = fr_dump_read_file(memfd_path, &t, err, sizeof(err));
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
