#!/usr/bin/env bash
# Every rank enqueues its 5th all_reduce, but on rank 1 it never completes
# on the "GPU" (FAKE_NCCL_STUCK): the others' then wait for rank 1 forever.
# Nobody is missing from the collective: the verdict is stuck_in_op with
# every rank named, each with how long it has waited.
. "$(dirname "$0")/lib.sh"

start_daemon --timeout 2 --heartbeat-timeout 10
NCCL_ENV="FAKE_NCCL_STUCK=1:5" start_nccl_job 4 --scenario stuck --culprit 1 --at 5
wait_incident 40

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "hang"'
expect '[.culprits[].rank] == [0,1,2,3] and all(.culprits[]; .reason == "stuck_in_op")'
expect '.op.type == "all_reduce" and .op.seq == 5 and .op.state == "entered"'
expect '.op.gpu_state == "started"'
expect '.summary | test("every member enqueued .* does not complete on the GPU")'
expect '.waited_s >= 2'
# Every dump shows all_reduce #5 started on the GPU (the device reached its
# start event) and not completed; the four before it completed.
for r in 0 1 2 3; do
	expect '[.entries[] | select(.op == "all_reduce")] | map(.state) ==
		["completed","completed","completed","completed","started"]' "$INCIDENT/rank-$r.json"
	expect '[.entries[] | select(.op == "all_reduce" and .collective_seq_id == 5)][0] |
		.time_discovered_started_ns >= .time_created_ns' "$INCIDENT/rank-$r.json"
done
echo "PASS nccl stuck: all ranks enqueued all_reduce #5, none completed"
