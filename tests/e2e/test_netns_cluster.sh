#!/usr/bin/env bash
# A real Open MPI job across four nodes (network namespaces on one bridge,
# each with its own hostname), 4 ranks a node, whose agents reach the one
# daemon over the bridge with the token: rank 9, on node 2, computes
# forever before all_reduce #5. The daemon opens one incident, every rank
# on every node dumps, and fr-analyze names rank 9 on node 2's host.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"

# Sixteen ranks busy-polling on a small machine starve the culprit's
# neighbours and the daemon: ranks that wait yield.
export OMPI_MCA_mpi_yield_when_idle=1
netns_up 4
netns_mpi 4

TOKEN=$T/token
printf 'flightrec-e2e-%s-0123456789abcdef\n' "$RANDOM$RANDOM" >"$TOKEN"
chmod 600 "$TOKEN"
LISTEN_ADDR=$BRIDGE_ADDR:0 start_daemon --token-file "$TOKEN" --timeout 2 --heartbeat-timeout 10
AGENT_ADDR=$BRIDGE_ADDR:$LISTEN_PORT AGENT_ENV="-x FLIGHTREC_TOKEN_FILE=$TOKEN" \
	start_job 16 --scenario compute --culprit 9 --at 5
wait_incident 40

names=$(printf '%s\n' "${NODE_NAMES[@]}" | jq -R . | jq -sc .)
for r in $(seq 0 15); do
	[ -s "$INCIDENT/rank-$r.json" ] || fail "rank $r (node ${NODE_NAMES[r / 4]}) did not dump into $INCIDENT"
done
expect '.reason == "timeout"' "$INCIDENT/manifest.json"
expect '[.ranks[] | .answer] | length == 16 and all(. == "received")' "$INCIDENT/manifest.json"
# Each rank reports its own node's hostname (ranks 4i..4i+3 on node i), and
# runs in that node's network namespace (the job is still stuck: its
# processes are there to look at).
jq -e --argjson names "$names" 'all(.ranks[]; .host == $names[.rank / 4 | floor])' "$INCIDENT/manifest.json" >/dev/null ||
	fail "ranks' hosts are not their nodes' ($names): $(jq -c '[.ranks[] | {rank, host}]' "$INCIDENT/manifest.json")"
expect '[.ranks[].host] | unique | length == 4' "$INCIDENT/manifest.json"
for r in $(seq 0 15); do
	pid=$(jq -r --argjson r "$r" '.ranks[] | select(.rank == $r) | .pid' "$INCIDENT/manifest.json")
	ns=$(ip netns identify "$pid" 2>/dev/null)
	[ "$ns" = "${NODE_NAMES[r / 4]}" ] || fail "rank $r (pid $pid) runs in namespace '$ns', not ${NODE_NAMES[r / 4]}"
done

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "hang"'
expect '[.culprits[].rank] == [9] and .culprits[0].reason == "not_entered"'
expect ".culprits[0].host == \"${NODE_NAMES[2]}\""
expect '.op.type == "all_reduce" and .op.seq == 5 and .op.comm == "world" and .op.comm_size == 16'
expect '.waiting_ranks == ([range(16)] - [9])'
jq -e '[.threads[].frames[].name] | index("stuck_in_compute")' "$INCIDENT/rank-9.json" >/dev/null ||
	fail "rank 9's stack does not show stuck_in_compute"
echo "PASS netns cluster: rank 9 named on ${NODE_NAMES[2]}, 16 ranks dumped from 4 nodes"
