#!/usr/bin/env bash
# At the 4th collective on world, rank 2 calls broadcast while ranks 0, 1
# and 3 call all_reduce: the verdict is a mismatch naming rank 2 only.
. "$(dirname "$0")/lib.sh"

start_daemon --timeout 2 --heartbeat-timeout 10
start_job 4 --scenario mismatch --culprit 2 --at 4
wait_incident 40

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1"
expect '.verdict == "mismatch"'
expect '[.culprits[] | .rank] == [2]'
expect '.culprits[0].reason == "mismatch"'
expect '.culprits[0].called.type == "broadcast"'
expect '.op.type == "all_reduce" and .op.seq == 4 and .op.comm == "world"'
expect '.op.comm_ranks == [0,1,2,3]'
echo "PASS mismatch: rank 2 called broadcast where the others called all_reduce"
