#!/usr/bin/env bash
# The job starts before the daemon: its agents find nothing listening on
# FLIGHTREC_ADDR, keep recording and retrying, and connect once the daemon
# appears on that port; a hang planted after that is diagnosed with the
# right culprit and operation.
. "$(dirname "$0")/lib.sh"

# links_started N: N processes of the job run the agent's link thread, so
# each has tried the address at least once.
links_started() {
	local n=0 p
	for p in $(pgrep -s "$JOB_PID"); do
		grep -qx flightrec /proc/"$p"/task/*/comm 2>/dev/null && n=$((n + 1))
	done
	[ "$n" -eq "$1" ]
}

PORT=$(free_port)
# About 5 ms a step: rank 1 stalls some 10 s into the run, well after the
# daemon has come up.
AGENT_ADDR=127.0.0.1:$PORT start_job 4 --scenario compute --culprit 1 --at 2000
wait_for 20 links_started 4 || fail "the agents' link threads did not start"
[ -s "$T/job.rc" ] && fail "the job ended without a daemon: $(cat "$T/job.rc")"

LISTEN_ADDR=127.0.0.1:$PORT start_daemon --timeout 2 --heartbeat-timeout 10
# The agents back off up to 5 s between attempts.
wait_for 20 ranks_connected 4 || fail "the ranks did not connect to the late daemon: $(http_get "/v1/jobs/$JOB")"
expect '[.ranks[].rank] | sort == [0,1,2,3]' <(http_get "/v1/jobs/$JOB")
expect '.communicators | map(.id) | index("world") != null' <(http_get "/v1/jobs/$JOB")
[ -e "$T/incidents/$JOB" ] && fail "an incident was opened before the hang"

wait_incident 60
analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "hang" and [.culprits[].rank] == [1] and .culprits[0].reason == "not_entered"'
expect '.op.type == "all_reduce" and .op.seq == 2000 and .op.comm_ranks == [0,1,2,3]'
expect '.waiting_ranks == [0,2,3]'
for r in 0 1 2 3; do
	[ -s "$INCIDENT/rank-$r.json" ] || fail "rank $r's dump is missing: $(ls "$INCIDENT")"
done
echo "PASS fault_late_daemon: agents started first connected to the late daemon, hang diagnosed"
