#!/usr/bin/env bash
# Pairs of ranks swap a value in a ncclGroupStart/Send/Recv/GroupEnd block
# every step. At step 4 rank 1 skips its group: its partner's send and
# receive never complete. The answer names rank 1.
. "$(dirname "$0")/lib.sh"

start_daemon --timeout 2 --heartbeat-timeout 10
start_nccl_job 4 --scenario group --culprit 1 --at 4
wait_incident 40

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "hang"'
expect '[.culprits[].rank] == [1]'
expect '(.waiting_ranks | index(0)) != null'
# fr-analyze named the peer from the members every rank reported.
expect '.op.is_p2p and .op.peer == 1'
expect '.op.gpu_state == "started"'
# Rank 0's group: a send and a receive to its partner (communicator rank 1,
# whose global rank rank 0 cannot know), both launched at the group's end:
# the (stand-in) GPU reached them, and they do not complete.
expect '[.entries[] | select(.is_p2p and .peer_in_comm == 1 and .state == "started" and
	.time_discovered_started_ns >= .time_created_ns)] | length == 2' "$INCIDENT/rank-0.json"
echo "PASS nccl group: rank 1 skipped its send/recv group"
