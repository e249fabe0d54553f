/*
 * Who may ask the HTTP API what (daemon/access.c): a Host that does not
 * name the daemon reads nothing but /healthz and /metrics, a live look
 * needs a header no other site's page can send, and with a token a job's
 * data needs the token or that job's key and nothing else.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "../../daemon/access.h"

static struct sockaddr_in bound4;
static struct sockaddr_in any4;
static struct sockaddr_in6 bound6;
static struct fr_token token;
static struct fr_token none;

static int setup(void **state)
{
	(void)state;
	bound4.sin_family = AF_INET;
	inet_pton(AF_INET, "127.0.0.1", &bound4.sin_addr);
	any4.sin_family = AF_INET;
	any4.sin_addr.s_addr = htonl(INADDR_ANY);
	bound6.sin6_family = AF_INET6;
	inet_pton(AF_INET6, "::1", &bound6.sin6_addr);
	token.len = strlen("unit-test-token-0123456789");
	memcpy(token.bytes, "unit-test-token-0123456789", token.len);
	return 0;
}

static bool host_ok(const struct sockaddr *bound, const char *allowed, const char *host)
{
	struct access_policy pol = { .bound = bound, .allowed_hosts = allowed, .token = &none };

	return access_host_allowed(host, &pol);
}

static void test_host(void **state)
{
	const struct sockaddr *b4 = (const struct sockaddr *)&bound4;
	const struct sockaddr *any = (const struct sockaddr *)&any4;
	const struct sockaddr *b6 = (const struct sockaddr *)&bound6;

	(void)state;
	assert_true(host_ok(b4, NULL, "localhost"));
	assert_true(host_ok(b4, NULL, "LocalHost:7421"));
	assert_true(host_ok(b4, NULL, "127.0.0.1:7421"));
	assert_true(host_ok(b4, NULL, "127.0.0.1"));
	/* Another address, a name anybody can point here (rebinding). */
	assert_false(host_ok(b4, NULL, "127.0.0.2:7421"));
	assert_false(host_ok(b4, NULL, "evil.example:7421"));
	assert_false(host_ok(b4, NULL, "localhost.evil.example"));
	assert_false(host_ok(b4, NULL, "[::1]:7421"));
	assert_true(host_ok(b6, NULL, "[::1]:7421"));
	assert_false(host_ok(b6, NULL, "[::2]"));
	/* Bound to every address: every literal is one of ours. */
	assert_true(host_ok(any, NULL, "10.1.2.3:7421"));
	assert_true(host_ok(any, NULL, "[fe80::1]:7421"));
	assert_false(host_ok(any, NULL, "node1:7421"));
	/* --http-allowed-hosts: exact names, any case, blanks ignored. */
	assert_true(host_ok(any, "node1, node1.example.org", "node1:7421"));
	assert_true(host_ok(any, "node1, node1.example.org", "NODE1.example.ORG"));
	assert_false(host_ok(any, "node1, node1.example.org", "node1.example.org.evil"));
	assert_false(host_ok(any, "node1, node1.example.org", "node"));
	assert_false(host_ok(any, "node1", "xnode1"));
	/* Not a host at all. */
	const char *bad[] = { "", ":", ":7421", "localhost:", "localhost:x", "localhost:123456",
			      "a:b:c", "[::1", "[::1]x", "[]", "[localhost]", "127.0.0.1:80:80" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(host_ok(any, "localhost", bad[i]));
	assert_false(host_ok(b4, NULL, NULL));
}

static struct access_decision decide(const char *method, const char *path, const char *host,
				     const char *mark, const char *auth,
				     const struct fr_token *tok)
{
	struct access_policy pol = { .bound = (const struct sockaddr *)&bound4, .token = tok };
	struct access_decision d;
	struct route r;
	struct access_request req = { .route = &r, .host = host, .mark = mark,
				      .authorization = auth };

	route_parse(method, path, &r);
	access_decide(&req, &pol, &d);
	return d;
}

static void test_no_token(void **state)
{
	struct access_decision d;

	(void)state;
	/* Health and metrics: any Host, no header. */
	assert_int_equal(decide("GET", "/healthz", "evil.example", NULL, NULL, &none).grant, ACCESS_ALL);
	assert_int_equal(decide("GET", "/metrics", "evil.example", NULL, NULL, &none).grant, ACCESS_ALL);
	/* Everything else: a Host naming us. */
	d = decide("GET", "/", "evil.example", NULL, NULL, &none);
	assert_int_equal(d.grant, ACCESS_DENIED);
	assert_int_equal(d.status, 421);
	assert_int_equal(decide("GET", "/v1/jobs/j", "evil.example:1", NULL, NULL, &none).status, 421);
	assert_int_equal(decide("GET", "/nowhere", "evil.example", NULL, NULL, &none).status, 421);
	assert_int_equal(decide("GET", "/v1/jobs/j", "localhost", NULL, NULL, &none).grant, ACCESS_ALL);
	/* HTTP/1.0 without a Host is no browser. */
	assert_int_equal(decide("GET", "/v1/jobs/j", NULL, NULL, NULL, &none).grant, ACCESS_ALL);
	/* A live look needs the mark: a cross-site GET cannot send it. */
	const char *looks[] = { "/v1/jobs/j/stacks", "/v1/jobs/j/ranks/0/stacks",
				"/v1/jobs/j/ranks/3/trace" };
	for (size_t i = 0; i < 3; i++) {
		d = decide("GET", looks[i], "localhost", NULL, NULL, &none);
		assert_int_equal(d.grant, ACCESS_DENIED);
		assert_int_equal(d.status, 403);
		assert_false(d.auth_failure);
		assert_int_equal(decide("GET", looks[i], "localhost", "", NULL, &none).status, 403);
		assert_int_equal(decide("GET", looks[i], "localhost", "1", NULL, &none).grant, ACCESS_ALL);
	}
	/* No token, no manual dumps. */
	d = decide("POST", "/v1/jobs/j/dump", "localhost", "1", "Bearer x", &none);
	assert_int_equal(d.status, 403);
	/* Reads stay open without a token. */
	assert_int_equal(decide("GET", "/v1/jobs", "localhost", NULL, NULL, &none).grant, ACCESS_ALL);
	assert_int_equal(decide("GET", "/v1/jobs/j/incidents/i/manifest.json", "localhost", NULL,
				NULL, &none).grant, ACCESS_ALL);
}

/* "Bearer <hex of job's key>" into buf. */
static const char *key_bearer(const char *job, char *buf, size_t cap)
{
	uint8_t key[FR_WIRE_JOB_KEY_SIZE];
	int n = snprintf(buf, cap, "Bearer ");

	assert_int_equal(fr_wire_job_key(&token, job, key), 0);
	for (size_t i = 0; i < sizeof(key); i++)
		n += snprintf(buf + n, cap - (size_t)n, "%02X", key[i]);
	return buf;
}

static void test_token(void **state)
{
	char a[128], b[128];
	struct access_decision d;
	const char *reads[] = { "/v1/jobs/ja", "/v1/jobs/ja/analysis", "/v1/jobs/ja/incidents",
				"/v1/jobs/ja/incidents/i1", "/v1/jobs/ja/incidents/i1/rank-0.json",
				"/v1/jobs/ja/stacks", "/v1/jobs/ja/ranks/1/stacks",
				"/v1/jobs/ja/ranks/1/trace" };

	(void)state;
	key_bearer("ja", a, sizeof(a));
	key_bearer("jb", b, sizeof(b));
	for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {
		d = decide("GET", reads[i], "localhost", "1", NULL, &token);
		assert_int_equal(d.status, 401);
		assert_true(d.auth_failure);
		assert_int_equal(decide("GET", reads[i], "localhost", NULL,
					"Bearer unit-test-token-0123456789", &token).grant, ACCESS_ALL);
		/* The job's own key, in either case; not another job's. */
		assert_int_equal(decide("GET", reads[i], "localhost", NULL, a, &token).grant, ACCESS_ALL);
		assert_int_equal(decide("GET", reads[i], "localhost", NULL, b, &token).status, 401);
		assert_int_equal(decide("GET", reads[i], "localhost", NULL, "Bearer unit-test-token",
					&token).status, 401);
		assert_int_equal(decide("GET", reads[i], "localhost", NULL,
					"Basic unit-test-token-0123456789", &token).status, 401);
		/* The token does not make a foreign Host ours. */
		assert_int_equal(decide("GET", reads[i], "evil.example", NULL,
					"Bearer unit-test-token-0123456789", &token).status, 421);
	}
	/* The list: all with the token, narrowed with anything else given. */
	assert_int_equal(decide("GET", "/v1/jobs", "localhost", NULL, NULL, &token).status, 401);
	assert_int_equal(decide("GET", "/v1/jobs", "localhost", NULL,
				"Bearer unit-test-token-0123456789", &token).grant, ACCESS_ALL);
	assert_int_equal(decide("GET", "/v1/jobs", "localhost", NULL, a, &token).grant, ACCESS_OWN_JOB);
	/* A manual dump: the daemon's token only. */
	assert_int_equal(decide("POST", "/v1/jobs/ja/dump", "localhost", NULL, a, &token).status, 401);
	assert_int_equal(decide("POST", "/v1/jobs/ja/dump", "localhost", NULL, NULL, &token).status, 401);
	assert_int_equal(decide("POST", "/v1/jobs/ja/dump", "localhost", NULL,
				"Bearer unit-test-token-0123456789", &token).grant, ACCESS_ALL);
	/* Open whatever the token. */
	assert_int_equal(decide("GET", "/healthz", NULL, NULL, NULL, &token).grant, ACCESS_ALL);
	assert_int_equal(decide("GET", "/metrics", NULL, NULL, NULL, &token).grant, ACCESS_ALL);
	assert_int_equal(decide("GET", "/", "localhost", NULL, NULL, &token).grant, ACCESS_ALL);
	assert_true(access_job_key_ok(a, &token, "ja"));
	assert_false(access_job_key_ok(a, &token, "jb"));
	assert_false(access_job_key_ok(a, &none, "ja"));
	/* Parsed once for GET /v1/jobs: a key in either case, nothing else. */
	{
		uint8_t want[FR_WIRE_JOB_KEY_SIZE];
		uint8_t got[FR_WIRE_JOB_KEY_SIZE];
		char upper[sizeof(a)];

		assert_int_equal(fr_wire_job_key(&token, "ja", want), 0);
		assert_true(access_job_key_parse(a, got));
		assert_memory_equal(got, want, sizeof(want));
		for (size_t i = 0; i < sizeof(a); i++)
			upper[i] = i >= 7 && a[i] >= 'a' && a[i] <= 'f' ? (char)(a[i] - 32) : a[i];
		assert_true(access_job_key_parse(upper, got));
		assert_memory_equal(got, want, sizeof(want));
		assert_false(access_job_key_parse(NULL, got));
		assert_false(access_job_key_parse("Bearer unit-test-token-0123456789", got));
		assert_false(access_job_key_parse("Basic 00", got));
		upper[strlen(upper) - 1] = '\0';
		assert_false(access_job_key_parse(upper, got));
	}
}

static void test_allowed_hosts_check(void **state)
{
	char long_name[300];

	(void)state;
	assert_null(access_allowed_hosts_check("node1"));
	assert_null(access_allowed_hosts_check("node1,node1.example.org"));
	assert_null(access_allowed_hosts_check("node1, node2 ,node-3"));
	assert_non_null(access_allowed_hosts_check(""));
	assert_non_null(access_allowed_hosts_check("node1,"));
	assert_non_null(access_allowed_hosts_check(",node1"));
	assert_non_null(access_allowed_hosts_check("a,,b"));
	assert_non_null(access_allowed_hosts_check("node1:7421"));
	assert_non_null(access_allowed_hosts_check("*.example.org"));
	assert_non_null(access_allowed_hosts_check(".example.org"));
	assert_non_null(access_allowed_hosts_check("a b"));
	memset(long_name, 'a', 254);
	long_name[254] = '\0';
	assert_non_null(access_allowed_hosts_check(long_name));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host),
		cmocka_unit_test(test_no_token),
		cmocka_unit_test(test_token),
		cmocka_unit_test(test_allowed_hosts_check),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
