#!/usr/bin/env bash
# A communicator split from world (ranks 0-1 and 2-3): rank 1 never
# enqueues its all_reduce on its half at step 3. The answer names rank 1
# and its half's members as global ranks; the half's id derives from world's.
. "$(dirname "$0")/lib.sh"

start_daemon --timeout 2 --heartbeat-timeout 10
start_nccl_job 4 --scenario split --culprit 1 --at 3
wait_incident 40

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "hang"'
expect '[.culprits[].rank] == [1] and .culprits[0].reason == "not_entered"'
# The split was world's first collective: the half is "<world>/1c0".
world=$(jq -r '.pg_config | keys[] | select(test("^nccl-[0-9a-f]+$"))' "$INCIDENT/rank-0.json")
[ -n "$world" ] || fail "no NCCL world communicator in rank 0's dump"
jq -e --arg half "$world/1c0" '.pg_config[$half].ranks | length == 2' "$INCIDENT/rank-0.json" >/dev/null ||
	fail "rank 0's dump has no communicator $world/1c0"
expect '(.op.comm == "'"$world"'/1c0" and .op.comm_ranks == [0,1]) or
	(.op.comm == "'"$world"'" and .op.comm_ranks == [0,1,2,3])'
echo "PASS nccl split: rank 1 named on $(jq -r .op.comm "$T/verdict.json")"
