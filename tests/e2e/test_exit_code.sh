#!/usr/bin/env bash
# Rank 2 of a 4-rank job calls exit(3) mid-training, without MPI_Finalize,
# while ranks 0, 1 and 3 go on into all_reduce #10; mpirun then tears the
# job down. Today's "finished" would hide it: the daemon names the exit at
# once (rank 2 "exited" in the live view, an incident with reason exited
# within 2 s), and fr-analyze's verdict is crash, culprit reason exited with
# exit_code 3. The job's exit status is the one it has without the agent.
# _exit(3) is named alike. A job that finalises and exits cleanly stays
# "finished", with no incident.
. "$(dirname "$0")/lib.sh"

# Without the agent: the exit status to keep.
(
	unset LD_PRELOAD
	timeout -k 5 60 mpirun -np 4 "$HANG" --scenario exit --culprit 2 --at 10 --step-ms 100 \
		>>"$T/plain.log" 2>&1
	echo $? >"$T/plain.rc"
)
PLAIN_RC=$(cat "$T/plain.rc")
[ "$PLAIN_RC" -ne 0 ] && [ "$PLAIN_RC" -ne 124 ] || fail "the exiting job without the agent exited $PLAIN_RC"

start_daemon --timeout 30 --heartbeat-timeout 30
start_job 4 --scenario exit --culprit 2 --at 10 --step-ms 100
wait_job_exit 60
[ "$JOB_RC" = "$PLAIN_RC" ] || fail "exit status $JOB_RC under the agent, $PLAIN_RC without it"

wait_incident 20
M=$INCIDENT/manifest.json
expect '.reason == "exited" and .trigger.rank == 2' "$M"
expect '.verdict.verdict == "crash" and .verdict.culprits[0].rank == 2' "$M"
expect '[.ranks[] | select(.rank == 2)][0].exit | .how == "exited" and .code == 3' "$M"
expect '[.ranks[] | select(.dump == null)] | all(.error != null)' "$M"
exit_ns=$(jq -r '[.ranks[] | select(.rank == 2)][0].exit.time_ns' "$M")
detected_ns=$(jq -r '.detected_ns' "$M")
[ $((detected_ns - exit_ns)) -lt 2000000000 ] ||
	fail "incident detected $(((detected_ns - exit_ns) / 1000000)) ms after the exit"

http_get "/v1/jobs/$JOB" >"$T/job.json"
expect '[.ranks[] | select(.rank == 2)][0] | .state == "exited" and .exit.code == 3' "$T/job.json"
grep -q "job $JOB rank 2 exited (code 3)" "$T/daemon.log" || fail "the daemon did not log the exit"

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "crash"'
expect '[.culprits[].rank] == [2] and .culprits[0].reason == "exited" and .culprits[0].exit_code == 3'
expect '.op.type == "all_reduce" and .op.seq == 10 and .waiting_ranks == [0,1,3]'
expect '.summary | startswith("rank 2 ") and contains("exited (code 3) during all_reduce #10 on world; ranks 0-1,3 wait for it")'
"$BIN/fr-analyze" "$INCIDENT" >"$T/analyze.txt" 2>&1
grep -q "exited without finalising" "$T/analyze.txt" || fail "the report does not say it: $(cat "$T/analyze.txt")"

# _exit(3), which runs no atexit handler and no destructor: the same, said
# by the agent's _exit.
JOB=e2e-underscore-$$-$RANDOM
start_job 4 --scenario _exit --culprit 2 --at 10 --step-ms 100
wait_job_exit 60
[ "$JOB_RC" = "$PLAIN_RC" ] || fail "_exit: exit status $JOB_RC under the agent, $PLAIN_RC without it"
wait_incident 20
expect '.reason == "exited" and ([.ranks[] | select(.rank == 2)][0].exit | .code == 3 and .underscore)' "$INCIDENT/manifest.json"
analyze "$INCIDENT"
expect '[.culprits[].rank] == [2] and .culprits[0].reason == "exited" and .culprits[0].exit_code == 3'
expect '.summary | contains("exited (_exit, code 3)")'

# A clean job: every rank finalises and exits 0. Nothing to report.
JOB=e2e-clean-$$-$RANDOM
start_job 4 --scenario none --iters 5 --step-ms 10
wait_job_exit 60
[ "$JOB_RC" = 0 ] || fail "the clean job exited $JOB_RC"
job_finished() { http_get "/v1/jobs/$JOB" 2>/dev/null | jq -e '.status == "finished"' >/dev/null; }
wait_for 10 job_finished || fail "the clean job is not finished: $(http_get "/v1/jobs/$JOB")"
http_get "/v1/jobs/$JOB" >"$T/clean.json"
expect '(.ranks | all(.state == "finished" and .exit == null))' "$T/clean.json"
! grep -q "job $JOB.*exited\|incident.*$JOB" "$T/daemon.log" || fail "the clean job was taken for an exit: $(grep "$JOB" "$T/daemon.log")"
echo "PASS exit_code: a rank that exits mid-training is named with its code at once; a clean exit stays finished"
