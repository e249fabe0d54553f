#!/usr/bin/env bash
# The daemon dies while a job runs and comes back on the same port: the
# agents reconnect by themselves, tell it everything again (identity,
# communicators, progress), and a hang after the restart is diagnosed.
. "$(dirname "$0")/lib.sh"


start_daemon --timeout 2 --heartbeat-timeout 10
# About 5 ms a step: rank 2 stalls some 4 s into the run.
start_job 4 --scenario compute --culprit 2 --at 800
wait_for 20 ranks_connected 4 || fail "ranks did not connect to the first daemon"
kill -KILL "$DAEMON_PID"
{ wait "$DAEMON_PID"; } 2>/dev/null
DAEMON_PID=

LISTEN_ADDR=127.0.0.1:$LISTEN_PORT start_daemon --timeout 2 --heartbeat-timeout 10
wait_for 20 ranks_connected 4 || fail "ranks did not reconnect to the restarted daemon"
expect '.communicators | map(.id) | index("world") != null' <(http_get "/v1/jobs/$JOB")
[ -e "$T/incidents/$JOB" ] && fail "an incident was opened before the hang"

wait_incident 60
analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1"
expect '.verdict == "hang" and [.culprits[].rank] == [2] and .culprits[0].reason == "not_entered"'
expect '.op.type == "all_reduce" and .op.seq == 800 and .op.comm_ranks == [0,1,2,3]'
echo "PASS reconnect: agents came back to a restarted daemon, hang diagnosed"
