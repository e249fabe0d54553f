#!/usr/bin/env bash
# Point-to-point: ranks swap a message with their pair partner before each
# allreduce. At step 4, rank 1 receives its partner's message but never
# sends its own: rank 0 waits in recv #4 from rank 1, ranks 2-3 move on and
# wait in the allreduce. The answer names rank 1 and the recv waiting on it.
. "$(dirname "$0")/lib.sh"

start_daemon --timeout 2 --heartbeat-timeout 10
start_job 4 --scenario p2p --culprit 1 --at 4
wait_incident 40

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1"
expect '.verdict == "hang"'
expect '[.culprits[] | .rank] == [1]'
expect '.op.is_p2p == true and .op.type == "recv" and .op.peer == 1 and .op.seq == 4'
expect '(.waiting_ranks | index(0)) != null'
echo "PASS p2p: rank 1 named, rank 0's recv #4 waits on it"
