/*
 * protocol/endpoint.c: FLIGHTREC_ADDR's forms ("unix:/path", "host:port",
 * "[v6]:port") and the rule by which an agent trusts a Unix socket (and
 * the daemon its directory): a planted socket or a directory others may
 * write to is refused, naming why.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../protocol/endpoint.h"

static void test_parse_unix(void **state)
{
	struct fr_endpoint ep;
	const char *why;

	(void)state;
	assert_int_equal(fr_endpoint_parse("unix:/run/flightrec/agent.sock", &ep, &why), 0);
	assert_true(ep.is_unix);
	assert_string_equal(ep.path, "/run/flightrec/agent.sock");
	/* A path with colons is still one path. */
	assert_int_equal(fr_endpoint_parse("unix:/tmp/a:b:7420", &ep, &why), 0);
	assert_true(ep.is_unix);
	assert_string_equal(ep.path, "/tmp/a:b:7420");
}

static void test_parse_unix_refused(void **state)
{
	char longpath[FR_UNIX_PATH_MAX + 16];
	struct fr_endpoint ep;
	const char *why;

	(void)state;
	assert_int_equal(fr_endpoint_parse("unix:run/agent.sock", &ep, &why), -EINVAL);
	assert_non_null(strstr(why, "absolute"));
	assert_int_equal(fr_endpoint_parse("unix:", &ep, &why), -EINVAL);
	/* The longest path that fits sun_path with its terminator, then one more. */
	memset(longpath, 0, sizeof(longpath));
	memcpy(longpath, "unix:/", 6);
	memset(longpath + 6, 'a', FR_UNIX_PATH_MAX - 2);
	assert_int_equal(fr_endpoint_parse(longpath, &ep, &why), 0);
	longpath[6 + FR_UNIX_PATH_MAX - 2] = 'a';
	assert_int_equal(fr_endpoint_parse(longpath, &ep, &why), -EINVAL);
	assert_non_null(strstr(why, "longer"));
}

static void test_parse_tcp(void **state)
{
	struct fr_endpoint ep;
	const char *why;

	(void)state;
	assert_int_equal(fr_endpoint_parse("127.0.0.1:7420", &ep, &why), 0);
	assert_false(ep.is_unix);
	assert_string_equal(ep.host, "127.0.0.1");
	assert_string_equal(ep.port, "7420");
	assert_int_equal(fr_endpoint_parse("[::1]:7420", &ep, &why), 0);
	assert_string_equal(ep.host, "::1");
	assert_int_equal(fr_endpoint_parse("daemon-host:7420", &ep, &why), 0);
	assert_string_equal(ep.host, "daemon-host");
	/* "unixhost:1" is a host named so, not a socket. */
	assert_int_equal(fr_endpoint_parse("unixhost:1", &ep, &why), 0);
	assert_false(ep.is_unix);
	assert_string_equal(ep.host, "unixhost");
}

static void test_parse_tcp_refused(void **state)
{
	static const char *const bad[] = { "", "host", "host:", ":7420", "[]:7420", "h:123456789" };
	struct fr_endpoint ep;
	const char *why;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why = NULL;
		assert_int_equal(fr_endpoint_parse(bad[i], &ep, &why), -EINVAL);
		assert_non_null(why);
	}
}

static void test_dir_rule(void **state)
{
	struct stat st = { .st_mode = S_IFDIR | 0755, .st_uid = 1000 };
	const char *why = NULL;

	(void)state;
	assert_true(fr_socket_dir_ok(&st, 1000, &why));
	st.st_uid = 0;
	assert_true(fr_socket_dir_ok(&st, 1000, &why));
	st.st_uid = 1001;
	assert_false(fr_socket_dir_ok(&st, 1000, &why));
	assert_non_null(strstr(why, "another user"));
	st.st_uid = 0;
	st.st_mode = S_IFDIR | 0777;
	assert_false(fr_socket_dir_ok(&st, 1000, &why));
	assert_non_null(strstr(why, "writable"));
	st.st_mode = S_IFDIR | 0775;
	assert_false(fr_socket_dir_ok(&st, 1000, &why));
	/* Sticky, as /tmp: only an entry's owner may rename or remove it. */
	st.st_mode = S_IFDIR | S_ISVTX | 0777;
	assert_true(fr_socket_dir_ok(&st, 1000, &why));
	st.st_mode = S_IFREG | 0755;
	assert_false(fr_socket_dir_ok(&st, 1000, &why));
}

static void make_socket(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
}

static void test_socket_check(void **state)
{
	char dir[] = "/tmp/fr-endpoint.XXXXXX";
	char path[64], file[64], link_[64], why[256];

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/agent.sock", dir);
	snprintf(file, sizeof(file), "%s/file", dir);
	snprintf(link_, sizeof(link_), "%s/link", dir);
	assert_int_equal(chmod(dir, 0755), 0);
	assert_int_equal(fr_socket_check(path, geteuid(), why, sizeof(why)), -ENOENT);
	make_socket(path);
	assert_int_equal(fr_socket_check(path, geteuid(), why, sizeof(why)), 0);
	assert_int_equal(symlink(path, link_), 0);
	assert_int_equal(fr_socket_check(link_, geteuid(), why, sizeof(why)), -ELOOP);
	fclose(fopen(file, "w"));
	assert_int_equal(fr_socket_check(file, geteuid(), why, sizeof(why)), -ENOTSOCK);
	/* The same socket in a directory anyone may write to. */
	assert_int_equal(chmod(dir, 0777), 0);
	assert_int_equal(fr_socket_check(path, geteuid(), why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "its directory"));
	assert_non_null(strstr(why, dir));
	/* Owned by neither root nor the asking user (made so as root, else
	 * asked as another user). */
	assert_int_equal(chmod(dir, 0755), 0);
	if (geteuid() == 0) {
		assert_int_equal(lchown(path, 65534, 65534), 0);
		assert_int_equal(fr_socket_check(path, 1000, why, sizeof(why)), -EPERM);
		assert_non_null(strstr(why, "owned by uid 65534"));
	} else {
		assert_int_equal(fr_socket_check(path, geteuid() + 1, why, sizeof(why)), -EPERM);
		assert_non_null(strstr(why, "owned by uid"));
	}
	unlink(path);
	unlink(file);
	unlink(link_);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_unix),
		cmocka_unit_test(test_parse_unix_refused),
		cmocka_unit_test(test_parse_tcp),
		cmocka_unit_test(test_parse_tcp_refused),
		cmocka_unit_test(test_dir_rule),
		cmocka_unit_test(test_socket_check),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
