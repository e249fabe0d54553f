#!/usr/bin/env bash
# Rank 2 of 4 is frozen (SIGSTOP) before all_reduce #4: it stops
# heartbeating, cannot dump, and is named unresponsive.
. "$(dirname "$0")/lib.sh"

start_daemon --timeout 60 --heartbeat-timeout 2 --dump-deadline 2
start_job 4 --scenario freeze --culprit 2 --at 4
wait_incident 40

expect '.reason == "heartbeat"' "$INCIDENT/manifest.json"
expect '.ranks[] | select(.rank == 2) | .answer == "unresponsive" and .dump == null' \
	"$INCIDENT/manifest.json"
[ -e "$INCIDENT/rank-2.json" ] && fail "a frozen rank cannot have dumped"

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1"
expect '.verdict == "hang"'
expect '[.culprits[] | .rank] == [2]'
expect '.culprits[0].reason == "unresponsive"'
expect '.op.type == "all_reduce" and .op.seq == 4 and .op.comm == "world"'
expect '.op.comm_ranks == [0,1,2,3]'
expect '.waiting_ranks == [0,1,3]'
echo "PASS frozen rank: rank 2 named unresponsive"
