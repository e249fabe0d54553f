#!/usr/bin/env bash
# Rank 2 of a 4-rank job dies of SIGSEGV in load_shard mid-training while
# ranks 0, 1 and 3 wait for it in all_reduce #10; mpirun then tears the job
# down. The daemon names the crash at once: rank 2 is "crashed" in the live
# view, an incident (reason crash) opens within 2 s of the crash with every
# rank's dump, and fr-analyze's verdict is crash, naming rank 2, SIGSEGV at
# 0x0 and load_shard. The job's exit status is the one it has without the
# agent.
. "$(dirname "$0")/lib.sh"

# Cores of the planted crash are not the test's to keep.
ulimit -c 0

# Without the agent: the exit status to keep.
(
	unset LD_PRELOAD
	timeout -k 5 60 mpirun -np 4 "$HANG" --scenario segv --culprit 2 --at 10 --step-ms 100 \
		>>"$T/plain.log" 2>&1
	echo $? >"$T/plain.rc"
)
PLAIN_RC=$(cat "$T/plain.rc")
[ "$PLAIN_RC" -ne 0 ] && [ "$PLAIN_RC" -ne 124 ] || fail "the crashing job without the agent exited $PLAIN_RC"

start_daemon --timeout 30 --heartbeat-timeout 30
start_job 4 --scenario segv --culprit 2 --at 10 --step-ms 100
wait_job_exit 60
[ "$JOB_RC" = "$PLAIN_RC" ] || fail "exit status $JOB_RC under the agent, $PLAIN_RC without it"

wait_incident 20
M=$INCIDENT/manifest.json
expect '.reason == "crash" and .trigger.rank == 2' "$M"
expect '.verdict.verdict == "crash" and .verdict.culprits[0].rank == 2' "$M"
expect '.verdict.summary | contains("crashed (SIGSEGV at 0x0 in load_shard)")' "$M"
expect '[.ranks[] | select(.rank == 2)][0].crash.signal == "SIGSEGV"' "$M"
expect '[.ranks[] | select(.dump == null)] | all(.error != null)' "$M"
# The incident opened within 2 s of the crash (the agent's clock and the
# daemon's are this host's).
crash_ns=$(jq -r '[.ranks[] | select(.rank == 2)][0].crash.time_ns' "$M")
detected_ns=$(jq -r '.detected_ns' "$M")
[ $((detected_ns - crash_ns)) -lt 2000000000 ] ||
	fail "incident detected $(((detected_ns - crash_ns) / 1000000)) ms after the crash"

# The live view says it too.
http_get "/v1/jobs/$JOB" >"$T/job.json"
expect '[.ranks[] | select(.rank == 2)][0] | .state == "crashed" and .crash.signal == "SIGSEGV"' "$T/job.json"

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "crash"'
expect '[.culprits[].rank] == [2] and .culprits[0].reason == "crashed"'
expect '.culprits[0].signal == "SIGSEGV" and .culprits[0].fault_addr == "0x0"'
expect '[.culprits[0].stack[].name] | index("load_shard") == 0'
expect '.op.type == "all_reduce" and .op.seq == 10 and .waiting_ranks == [0,1,3]'
expect '.summary | startswith("rank 2 ") and contains("crashed (SIGSEGV at 0x0 in load_shard) during all_reduce #10 on world; ranks 0-1,3 wait for it")'
echo "PASS crash_segv: the rank that segfaults is named, with its signal and function, at once"
