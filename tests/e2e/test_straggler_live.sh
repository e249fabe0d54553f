#!/usr/bin/env bash
# Stragglers, online. Four MPI ranks, rank 2 sleeping 10 ms more than the
# others before each all_reduce: while the job runs, /v1/jobs/<job> names
# rank 2 (and only it) in `stragglers`, /metrics counts one straggler, no
# incident opens, and fr-analyze on a manual dump names the same rank; the
# job runs to completion. Then a job with no slow rank: sampled all through
# its run, the live view never names anyone.
. "$(dirname "$0")/lib.sh"

make_token
AGENT_ENV="-x FLIGHTREC_TOKEN_FILE=$TOKEN"
start_daemon --token-file "$TOKEN" --timeout 30 --heartbeat-timeout 20 --straggler-min-duration 1

start_job 4 --scenario slow --culprit 2 --slow-ms 10 --step-ms 2 --iters 800
named() {
	http_get "/v1/jobs/$JOB" >"$T/job.json" 2>/dev/null &&
		jq -e '[.stragglers[].rank] == [2]' "$T/job.json" >/dev/null 2>&1
}
wait_for 30 named || fail "/v1/jobs/$JOB never named rank 2: $(cat "$T/job.json" 2>/dev/null)"
[ -s "$T/job.rc" ] && fail "the job ended before its straggler was looked at"
expect '.stragglers[0].lag_ms > 5 and .stragglers[0].last_fraction >= 0.5' "$T/job.json"
expect '.stragglers[0].since_s >= 1' "$T/job.json"
wait_for 10 metric_is "straggler_ranks{job=\"$JOB\"}" 1 ||
	fail "/metrics does not count one straggler: $(http_get /metrics | grep straggler)"
lag=$(metric "straggler_lag_seconds{job=\"$JOB\"}")
awk -v l="$lag" 'BEGIN {exit !(l > 0.005)}' || fail "straggler lag $lag s, want over 5 ms"
metric_is incidents_total 0 || fail "an incident opened for a straggler"

# A manual dump while it runs: fr-analyze names the same rank. Most
# catch the others already in an all_reduce that rank 2, asleep, has not
# entered: milliseconds of waiting in a dump taken on request are a job
# running, not a hang, so the verdict is ok, with rank 2 the straggler.
status=$(curl -s -o "$T/post.json" -w '%{http_code}' --max-time 10 -X POST \
	-H "Authorization: Bearer $HTTP_TOKEN" "$HTTP/v1/jobs/$JOB/dump")
[ "$status" = 202 ] || [ "$status" = 200 ] || fail "POST /v1/jobs/$JOB/dump: $status $(cat "$T/post.json")"
wait_incident 30
analyze "$INCIDENT"
[ "$RC" -eq 0 ] || fail "fr-analyze exit $RC on a running job's manual dump: $(jq -r .summary "$T/verdict.json" 2>/dev/null) $(cat "$T/analyze.err")"
expect '.verdict == "ok" and ([.stragglers[].rank] | unique) == [2] and .culprits == []'

wait_job_exit 60
[ "$JOB_RC" -eq 0 ] || fail "the job with a straggler exited $JOB_RC"
grep -q "done after 800 iterations" "$T/job.log" || fail "the job did not complete its iterations"
http_get "/v1/jobs/$JOB/incidents" >"$T/incidents.json"
expect '[.incidents[].reason] == ["manual"]' "$T/incidents.json"

# No slow rank: nobody is named, however often the view is looked at.
JOB=$JOB-even
start_job 4 --scenario none --step-ms 2 --iters 600
looks=0
while [ ! -s "$T/job.rc" ] && [ "$looks" -lt 2000 ]; do
	http_get "/v1/jobs/$JOB" >"$T/even.json" 2>/dev/null || continue
	jq -e '.stragglers == []' "$T/even.json" >/dev/null 2>&1 ||
		{ jq -e '.stragglers' "$T/even.json" >/dev/null 2>&1 || continue
		  fail "a job with no slow rank named a straggler: $(cat "$T/even.json")"; }
	metric_is "straggler_ranks{job=\"$JOB\"}" 0 ||
		fail "/metrics counts a straggler of a job with none"
	looks=$((looks + 1))
done
wait_job_exit 60
[ "$JOB_RC" -eq 0 ] || fail "the job with no slow rank exited $JOB_RC"
[ "$looks" -ge 5 ] || fail "the live view was looked at only $looks times while the job ran"
http_get "/v1/jobs/$JOB" >"$T/even.json"
expect '.stragglers == [] and (.slowest | length) >= 1' "$T/even.json"
echo "PASS straggler live: rank 2 named live and by fr-analyze, no incident; none named in a job without one ($looks looks)"
