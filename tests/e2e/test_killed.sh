#!/usr/bin/env bash
# Rank 2 of a 4-rank job is killed with SIGKILL mid-training (as the OOM
# killer would): no handler runs, its connection just drops. The daemon
# finds its process gone without a goodbye while its peers run and opens an
# incident at once (reason killed), even though mpirun then tears the other
# ranks down; fr-analyze's verdict is crash, culprit rank 2 with reason
# killed, "killed or lost".
. "$(dirname "$0")/lib.sh"

start_running 4 2
pid=$RANK_PID
kill -KILL "$pid"
wait_job_exit 60
[ "$JOB_RC" -ne 0 ] || fail "the job exited 0 although a rank was killed"

wait_incident 20
M=$INCIDENT/manifest.json
expect '.reason == "killed" and .trigger.rank == 2' "$M"
expect '.verdict.verdict == "crash" and [.verdict.culprits[].rank] == [2]' "$M"
expect '[.ranks[] | select(.rank == 2)][0] | .dump == null and .exit.how == "killed" and (.error | startswith("killed or lost"))' "$M"
expect '[.ranks[] | select(.dump == null)] | all(.error != null)' "$M"
grep -q "job $JOB rank 2 killed or lost: its process $pid is gone" "$T/daemon.log" ||
	fail "the daemon did not log the kill"
http_get "/v1/jobs/$JOB" >"$T/job.json"
expect '[.ranks[] | select(.rank == 2)][0] | .state == "killed" and .exit.how == "killed"' "$T/job.json"

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "crash"'
expect '[.culprits[].rank] == [2] and .culprits[0].reason == "killed" and .culprits[0].oom_killed == false'
expect '.summary | startswith("rank 2 ") and contains("was killed or lost (its connection dropped without a goodbye)")'
"$BIN/fr-analyze" "$INCIDENT" >"$T/analyze.txt" 2>&1
grep -q "killed or lost: its connection dropped without a goodbye" "$T/analyze.txt" ||
	fail "the report does not say it: $(cat "$T/analyze.txt")"
echo "PASS killed: a rank killed with SIGKILL is named at once, from what the daemon holds"
