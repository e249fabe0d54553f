#!/usr/bin/env bash
# NCCL over the CPU stand-in: rank 2 of 4 never enqueues its 5th
# all_reduce (it computes forever). The others' all_reduce #5 is enqueued
# and never completes on the "GPU". fr-analyze names rank 2, and the
# communicator's members, assembled from every rank's own report.
. "$(dirname "$0")/lib.sh"

run_nccl_skip
expect '.op.dtype == "float32" and .op.count == 1'
# Each rank knew only its own place in the communicator.
expect '.pg_config[] | select(.name | startswith("nccl-")) | .ranks == [-1,-1,-1,3]' "$INCIDENT/rank-3.json"
jq -e '[.threads[].frames[].name] | index("stuck_in_compute")' "$INCIDENT/rank-2.json" >/dev/null ||
	fail "rank 2's stack does not show stuck_in_compute"
echo "PASS nccl skip: rank 2 never enqueued all_reduce #5"
