#!/usr/bin/env bash
# Rank 1 never finishes its last computation while ranks 0, 2 and 3 are
# already in MPI_Finalize, which waits for every rank: the hang is in
# finalize, and rank 1 is named.
. "$(dirname "$0")/lib.sh"

start_daemon --timeout 2 --heartbeat-timeout 10
start_job 4 --scenario finalize --culprit 1 --iters 3
wait_incident 40

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1"
expect '.verdict == "hang"'
expect '[.culprits[] | .rank] == [1] and .culprits[0].reason == "not_entered"'
expect '.op.type == "finalize" and .op.seq == 4 and .op.comm == "world"'
expect '.waiting_ranks == [0,2,3]'
echo "PASS finalize: the rank that never reaches MPI_Finalize is named"
