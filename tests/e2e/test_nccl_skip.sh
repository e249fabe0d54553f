#!/usr/bin/env bash
# NCCL over the CPU stand-in: rank 2 of 4 never enqueues its 5th
# all_reduce (it computes forever). The others' all_reduce #5 is enqueued
# and never completes on the "GPU". fr-analyze names rank 2, and the
# communicator's members, assembled from every rank's own report.
. "$(dirname "$0")/lib.sh"

start_daemon --timeout 2 --heartbeat-timeout 10
start_nccl_job 4 --scenario skip --culprit 2 --at 5
wait_incident 40

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "hang"'
expect '[.culprits[].rank] == [2] and .culprits[0].reason == "not_entered"'
expect '.op.type == "all_reduce" and .op.seq == 5 and (.op.comm | startswith("nccl-"))'
expect '.op.comm_ranks == [0,1,2,3] and .op.comm_size == 4'
expect '.op.dtype == "float32" and .op.count == 1'
expect '.waiting_ranks == [0,1,3]'
# Each rank knew only its own place in the communicator.
expect '.pg_config[] | select(.name | startswith("nccl-")) | .ranks == [-1,-1,-1,3]' "$INCIDENT/rank-3.json"
jq -e '[.threads[].frames[].name] | index("stuck_in_compute")' "$INCIDENT/rank-2.json" >/dev/null ||
	fail "rank 2's stack does not show stuck_in_compute"
echo "PASS nccl skip: rank 2 never enqueued all_reduce #5"
