/*
 * The HTTP API's router (daemon/route.c): every route a user or an
 * orchestrator calls reaches its handler with its ids, and anything that
 * could reach a path unchecked routes nowhere.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../daemon/route.h"

static struct route route(const char *method, const char *path)
{
	struct route r;

	route_parse(method, path, &r);
	return r;
}

static void test_known_routes(void **state)
{
	struct route r;

	(void)state;
	assert_int_equal(route("GET", "/").kind, ROUTE_PAGE);
	assert_int_equal(route("GET", "/healthz").kind, ROUTE_HEALTHZ);
	assert_int_equal(route("HEAD", "/healthz").kind, ROUTE_HEALTHZ);
	assert_int_equal(route("GET", "/metrics").kind, ROUTE_METRICS);
	assert_int_equal(route("GET", "/v1/jobs").kind, ROUTE_JOBS);
	assert_int_equal(route("GET", "/v1/jobs/").kind, ROUTE_JOBS);
	assert_int_equal(route("GET", "/v1/nodes").kind, ROUTE_NODES);
	assert_int_equal(route("GET", "/v1/nodes/").kind, ROUTE_NODES);
	assert_int_equal(route("POST", "/v1/nodes").kind, ROUTE_BAD_METHOD);
	assert_int_equal(route("GET", "/v1/nodes/x").kind, ROUTE_NONE);
	r = route("GET", "/v1/jobs/train-7");
	assert_int_equal(r.kind, ROUTE_JOB);
	assert_string_equal(r.job, "train-7");
	assert_int_equal(route("GET", "/v1/jobs/j/analysis").kind, ROUTE_JOB_ANALYSIS);
	assert_int_equal(route("GET", "/v1/jobs/j/stacks/").kind, ROUTE_JOB_STACKS);
	assert_int_equal(route("GET", "/v1/jobs/j/incidents").kind, ROUTE_JOB_INCIDENTS);
	r = route("GET", "/v1/jobs/j/incidents/20261129T000000Z-1");
	assert_int_equal(r.kind, ROUTE_INCIDENT);
	assert_string_equal(r.incident, "20261129T000000Z-1");
	r = route("GET", "/v1/jobs/j/incidents/i1/rank-12.json");
	assert_int_equal(r.kind, ROUTE_INCIDENT_FILE);
	assert_string_equal(r.file, "rank-12.json");
	r = route("GET", "/v1/jobs/j/incidents/i1/ranks/12");
	assert_int_equal(r.kind, ROUTE_INCIDENT_RANK);
	assert_string_equal(r.incident, "i1");
	assert_int_equal(r.rank, 12);
	assert_int_equal(route("GET", "/v1/jobs/j/incidents/i1/ranks/12/").kind, ROUTE_INCIDENT_RANK);
	assert_int_equal(route("GET", "/v1/jobs/j/incidents/i1/ranks/012").kind, ROUTE_NONE);
	assert_int_equal(route("GET", "/v1/jobs/j/incidents/i1/ranks/..").kind, ROUTE_NONE);
	assert_int_equal(route("GET", "/v1/jobs/j/incidents/i1/ranks/1/x").kind, ROUTE_NONE);
	assert_int_equal(route("POST", "/v1/jobs/j/incidents/i1/ranks/1").kind, ROUTE_BAD_METHOD);
	r = route("GET", "/v1/jobs/j/ranks/517/stacks");
	assert_int_equal(r.kind, ROUTE_RANK_STACKS);
	assert_int_equal(r.rank, 517);
	r = route("GET", "/v1/jobs/j/ranks/0/trace");
	assert_int_equal(r.kind, ROUTE_RANK_TRACE);
	assert_int_equal(r.rank, 0);
	r = route("POST", "/v1/jobs/j/dump");
	assert_int_equal(r.kind, ROUTE_JOB_DUMP);
	assert_string_equal(r.job, "j");
}

static void test_wrong_method_names_the_right_one(void **state)
{
	struct route r;

	(void)state;
	r = route("GET", "/v1/jobs/j/dump");
	assert_int_equal(r.kind, ROUTE_BAD_METHOD);
	assert_string_equal(r.allow, "POST");
	r = route("POST", "/v1/jobs/j");
	assert_int_equal(r.kind, ROUTE_BAD_METHOD);
	assert_string_equal(r.allow, "GET");
	assert_int_equal(route("DELETE", "/healthz").kind, ROUTE_BAD_METHOD);
	/* An unknown URL is not found, whatever the method. */
	assert_int_equal(route("PUT", "/nothing").kind, ROUTE_NONE);
}

static void test_unsafe_ids_route_nowhere(void **state)
{
	static const char *const bad[] = {
		"/v1/jobs/..",
		"/v1/jobs/.hidden",
		"/v1/jobs//analysis",
		"/v1/jobs/j/incidents/..",
		"/v1/jobs/j/incidents/i/..",
		"/v1/jobs/j/incidents/i/.manifest.json",
		"/v1/jobs/j/incidents/i/a/b",
		"/v1/jobs/j/incidents/i%2f..",
		"/v1/jobs/j/ranks/-1/stacks",
		"/v1/jobs/j/ranks/01/stacks",
		"/v1/jobs/j/ranks/4294967295/stacks",
		"/v1/jobs/j/ranks/99999999999/stacks",
		"/v1/jobs/j/ranks/1/stacks/more",
		"/v1/jobs/j/ranks/1",
		"/v1/jobsX",
		"/v1/jobs/a b",
		"",
		"healthz",
	};
	char longjob[FR_JOB_MAX + 16];
	struct route r;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		r = route("GET", bad[i]);
		if (r.kind != ROUTE_NONE)
			fail_msg("%s routed to %s", bad[i], route_kind_name(r.kind));
		assert_non_null(r.error);
	}
	memcpy(longjob, "/v1/jobs/", 9);
	memset(longjob + 9, 'a', FR_JOB_MAX + 1);
	longjob[9 + FR_JOB_MAX + 1] = '\0';
	assert_int_equal(route("GET", longjob).kind, ROUTE_NONE);
	longjob[9 + FR_JOB_MAX] = '\0';
	assert_int_equal(route("GET", longjob).kind, ROUTE_JOB);
	assert_int_equal(route("GET", "/v1/jobs/j/ranks/4294967294/trace").rank, 4294967294u);
}

/*
 * Found worth pinning while fuzzing (tests/fuzz/fuzz_route.c): "." segments
 * and doubled slashes anywhere, and a trailing "//", route nowhere; a HEAD
 * of a job's URL routes as its GET, with the same ids.
 */
static void test_dot_segments_and_slashes(void **state)
{
	static const char *const bad[] = {
		"/v1/jobs/j/incidents/i/.",
		"/v1/jobs/j/incidents/./rank-0.json",
		"/v1/jobs/./incidents",
		"//v1/jobs/j",
		"/v1/jobs/j//incidents",
		"/v1/jobs/j/dump//",
		"/healthz/",
		"/v1/jobs/j/ranks/+1/trace",
		"/v1/jobs/j/ranks/-0/trace",
	};
	struct route get, head;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		get = route("GET", bad[i]);
		if (get.kind != ROUTE_NONE)
			fail_msg("%s routed to %s", bad[i], route_kind_name(get.kind));
	}
	get = route("GET", "/v1/jobs/j/incidents/i/rank-3.json/");
	head = route("HEAD", "/v1/jobs/j/incidents/i/rank-3.json/");
	assert_int_equal(get.kind, ROUTE_INCIDENT_FILE);
	assert_int_equal(head.kind, ROUTE_INCIDENT_FILE);
	assert_string_equal(head.job, "j");
	assert_string_equal(head.incident, "i");
	assert_string_equal(head.file, "rank-3.json");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_routes),
		cmocka_unit_test(test_wrong_method_names_the_right_one),
		cmocka_unit_test(test_unsafe_ids_route_nowhere),
		cmocka_unit_test(test_dot_segments_and_slashes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
