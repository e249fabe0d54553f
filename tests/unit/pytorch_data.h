/*
 * The PyTorch Flight Recorder test files (tests/data/pytorch, made by its
 * make.py), shared by the pickle reader's and the PyTorch reader's tests.
 * Include after <cmocka.h>.
 */
#ifndef FR_TEST_PYTORCH_DATA_H
#define FR_TEST_PYTORCH_DATA_H

#include <stdio.h>
#include <stdlib.h>

/* The data directory: $FR_TEST_DATA (tests/run-unit sets it) or tests/data. */
static inline const char *pytorch_data_dir(void)
{
	const char *d = getenv("FR_TEST_DATA");

	return d && *d ? d : "tests/data";
}

/* Reads tests/data/pytorch/<name> into a new buffer (caller frees). */
static inline unsigned char *read_data(const char *name, size_t *len)
{
	unsigned char *buf;
	char *path;
	FILE *f;
	long n;

	assert_true(asprintf(&path, "%s/pytorch/%s", pytorch_data_dir(), name) > 0);
	f = fopen(path, "rb");
	if (!f)
		fail_msg("cannot open %s", path);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	buf = malloc(n ? (size_t)n : 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	free(path);
	*len = (size_t)n;
	return buf;
}

#endif
