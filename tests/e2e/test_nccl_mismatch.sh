#!/usr/bin/env bash
# At step 5 rank 3 calls ncclAllReduce with 2 elements where ranks 0-2 pass
# 1: the verdict is a mismatch naming rank 3.
. "$(dirname "$0")/lib.sh"

start_daemon --timeout 2 --heartbeat-timeout 10
start_nccl_job 4 --scenario mismatch --culprit 3 --at 5
wait_incident 40

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "mismatch"'
expect '[.culprits[].rank] == [3] and .culprits[0].reason == "mismatch"'
expect '.culprits[0].called.count == 2 and .op.count == 1 and .op.seq == 5'
echo "PASS nccl mismatch: rank 3 passed 2 elements where the others passed 1"
