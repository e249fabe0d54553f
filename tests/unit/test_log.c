/*
 * daemon/log.c: one line per call, whatever a peer put in the text: a
 * newline or another control character in an argument is written as '?',
 * so no peer can forge a line of its own ("...\nflightrecd: ...").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../daemon/log.h"

#include <unistd.h>

static void test_one_line_whatever_the_text(void **state)
{
	char path[] = "/tmp/test_log.XXXXXX";
	char buf[512] = "";
	int fd = mkstemp(path), saved = dup(2);
	FILE *f;

	(void)state;
	assert_true(fd >= 0 && saved >= 0);
	fflush(stderr);
	assert_int_equal(dup2(fd, 2), 2);
	daemon_log("node %s: job %s", "n1", "j\nflightrecd: forged\r\x1b[2K");
	fflush(stderr);
	assert_int_equal(dup2(saved, 2), 2);
	close(saved);
	f = fdopen(fd, "r");
	assert_non_null(f);
	rewind(f);
	assert_int_equal(fread(buf, 1, sizeof(buf) - 1, f) > 0, 1);
	fclose(f);
	unlink(path);
	assert_string_equal(buf, "flightrecd: node n1: job j?flightrecd: forged??[2K\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_line_whatever_the_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
