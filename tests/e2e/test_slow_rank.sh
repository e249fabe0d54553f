#!/usr/bin/env bash
# Rank 1 is slow (1.2 s per step against a 3 s timeout) but every
# collective completes: no incident, and the job ends normally.
. "$(dirname "$0")/lib.sh"

start_daemon --timeout 3 --heartbeat-timeout 10
start_job 4 --scenario slow --culprit 1 --slow-ms 1200 --iters 5
wait_job_exit 60
[ "$JOB_RC" -eq 0 ] || fail "slow job exited $JOB_RC"
grep -q "done after 5 iterations" "$T/job.log" || fail "job did not complete its iterations"

[ -e "$T/incidents/$JOB" ] && fail "an incident was opened for a slow but healthy job: $(ls -R "$T/incidents")"
http_get "/v1/jobs/$JOB" >"$T/job.json" || fail "GET /v1/jobs/$JOB failed"
expect '.verdict.verdict == "ok"' "$T/job.json"
expect '.status == "finished"' "$T/job.json"
expect '[.ranks[] | .state] | all(. == "finished")' "$T/job.json"
echo "PASS slow rank: no incident"
