#!/usr/bin/env bash
# Communication overlapped with computation: each step posts Irecv/Isend
# with the pair partner, computes, then waits. Rank 2 never returns from the
# computation after posting: its receive is pending but not waited on, so
# it waits on nobody. The others finish their exchange and wait in
# all_reduce #4 for rank 2, which must be named (not a deadlock through
# its pending receive). Every step also gathers to rank 0 with
# MPI_IN_PLACE, whose ignored send arguments must not look like a mismatch.
. "$(dirname "$0")/lib.sh"

start_daemon --timeout 2 --heartbeat-timeout 10
start_job 4 --scenario nonblock --culprit 2 --at 4 --gather
wait_incident 40

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1"
expect '.verdict == "hang"'
expect '[.culprits[] | .rank] == [2] and .culprits[0].reason == "not_entered"'
# Per step: gather, then all_reduce: step 4's all_reduce is world's 8th.
expect '.op.type == "all_reduce" and .op.seq == 8 and .op.comm == "world"'
expect '.waiting_ranks == [0,1,3]'
# Rank 2's dump shows its receive as posted, not waited on.
jq -e '[.entries[] | select(.op == "recv" and .state == "entered")] |
	length == 1 and all(.nonblocking and (.waited | not))' "$INCIDENT/rank-2.json" >/dev/null ||
	fail "rank 2's pending receive is not recorded as posted-not-waited"
echo "PASS non-blocking: a posted receive does not make the culprit a waiter"
