/*
 * daemon/addr.c: the key a peer is counted under by the per-address
 * limits. An IPv6 host owns a whole /64, so every address of one /64 must
 * be one key (else one host opens 2^64 "addresses"); IPv4 addresses and
 * IPv4-mapped IPv6 ones are their address; ports never matter.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/un.h>

#include <cmocka.h>

#include "../../daemon/addr.h"

static void key_of(const char *ip, uint16_t port, char *out, size_t cap)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (strchr(ip, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		assert_int_equal(inet_pton(AF_INET6, ip, &s6->sin6_addr), 1);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		assert_int_equal(inet_pton(AF_INET, ip, &s4->sin_addr), 1);
	}
	assert_int_equal(daemon_addr_key((const struct sockaddr *)&ss, out, cap), 0);
}

static void test_ipv6_by_64(void **state)
{
	char a[INET6_ADDRSTRLEN + 8], b[INET6_ADDRSTRLEN + 8];

	(void)state;
	key_of("2001:db8:1:2:aaaa:bbbb:cccc:dddd", 1000, a, sizeof(a));
	key_of("2001:db8:1:2::1", 2000, b, sizeof(b));
	assert_string_equal(a, "2001:db8:1:2::/64");
	assert_string_equal(a, b);
	key_of("2001:db8:1:3::1", 1000, b, sizeof(b));
	assert_string_equal(b, "2001:db8:1:3::/64");
	key_of("::1", 7420, a, sizeof(a));
	assert_string_equal(a, "::/64");
}

static void test_ipv4(void **state)
{
	char a[INET6_ADDRSTRLEN + 8], b[INET6_ADDRSTRLEN + 8];

	(void)state;
	key_of("127.0.0.2", 1000, a, sizeof(a));
	key_of("127.0.0.2", 2000, b, sizeof(b));
	assert_string_equal(a, "127.0.0.2");
	assert_string_equal(a, b);
	key_of("127.0.0.3", 1000, b, sizeof(b));
	assert_string_equal(b, "127.0.0.3");
	key_of("::ffff:10.1.2.3", 1000, a, sizeof(a));
	assert_string_equal(a, "10.1.2.3");
}

static void test_other_family(void **state)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	char out[16];

	(void)state;
	assert_int_equal(daemon_addr_key((const struct sockaddr *)&un, out, sizeof(out)),
			 -EAFNOSUPPORT);
	assert_string_equal(out, "?");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ipv6_by_64),
		cmocka_unit_test(test_ipv4),
		cmocka_unit_test(test_other_family),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
