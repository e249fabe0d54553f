#!/usr/bin/env bash
# Rank 1 stalls before all_reduce #4 on its half of the job (a communicator
# split from world). Ranks 0 and 2 wait in that all_reduce; ranks 3-5 move
# on and pile into the next world barrier. The answer must name the
# sub-communicator's op, not the barrier.
. "$(dirname "$0")/lib.sh"

start_daemon --timeout 2 --heartbeat-timeout 10
start_job 6 --scenario subcomm --culprit 1 --at 4
wait_incident 40

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1"
expect '.verdict == "hang"'
expect '[.culprits[] | .rank] == [1]'
expect '.culprits[0].reason == "not_entered"'
expect '.op.type == "all_reduce" and .op.seq == 4'
# world seq 1 was the split: the half communicator's id derives from it.
expect '.op.comm == "world/1c0"'
expect '.op.comm_ranks == [0,1,2]'
expect '(.waiting_ranks | index(0)) != null and (.waiting_ranks | index(2)) != null'
echo "PASS sub-communicator: rank 1 named, all_reduce #4 on world/1c0"
