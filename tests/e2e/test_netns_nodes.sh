#!/usr/bin/env bash
# The two tiers of docs/SCALE-OUT.md as on a cluster: four nodes (network
# namespaces on one bridge, tests/e2e/netns.sh), each with its own node
# daemon (flightrecd --upstream) listening for agents inside it, and a
# central daemon in the root namespace on the bridge's address. A real Open
# MPI job of 16 ranks, 4 a node, is told no daemon address: each rank finds
# its own node's daemon by its node socket (a path per node, as the nodes
# share this machine's file system). Rank 9, on node 2, computes forever
# before all_reduce #5.
#
#  1. The central daemon lists the 4 nodes connected, and the job's 16 ranks,
#     each on its own node.
#  2. Node 1's daemon is killed: its 4 ranks, and only they, are unresponsive
#     with reason "node lost"; started again, it reconnects and they are back.
#  3. The central daemon restarts mid-job: the nodes reconnect and resend, and
#     all 16 ranks are listed again.
#  4. The hang's verdict at the central daemon (GET /v1/jobs/<job>/analysis),
#     its incident, and fr-analyze on the incident directory name rank 9,
#     node 2 and all_reduce #5.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns.sh"
. "$(dirname "$0")/node_daemons.sh"

# Sixteen ranks busy-polling on a small machine starve the culprit's
# neighbours and the daemons: ranks that wait yield.
export OMPI_MCA_mpi_yield_when_idle=1
netns_up 4
netns_mpi 4

make_token

# The central daemon: no incident from the first one (a long timeout), so
# that the hang is diagnosed by the one started in step 3.
LISTEN_ADDR=$BRIDGE_ADDR:0 start_daemon --token-file "$TOKEN" --timeout 600 --heartbeat-timeout 10
CENTRAL=$BRIDGE_ADDR:$LISTEN_PORT

# Each node's agent socket, where netns_rsh tells its ranks to look.
NODES=$T/nodes
export NETNS_NODE_SOCKETS=$NODES
NODE_PIDS=()

# start_netns_node I: node I's daemon, inside its namespace (with its
# hostname, which is the node's name it gives upstream), on that
# namespace's own loopback and its own socket path; its log is
# $T/<node's name>.log.
start_netns_node() {
	local i=$1 dir=$NODES/${NODE_NAMES[$1]}
	mkdir -p -m 0755 "$dir"
	NODE_WRAP="netns_run $i" NODE_UPSTREAM=$CENTRAL start_node "${NODE_NAMES[i]}" 7420 \
		--token-file "$TOKEN" --agent-socket "$dir/agent.sock" --heartbeat-timeout 10
	NODE_PIDS[i]=$NODE_PID
}

# gone PID: the process has exited (a zombie counts: it is only not reaped).
gone() { ! [ -e "/proc/$1" ] || [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]; }

NAMES=$(printf '%s\n' "${NODE_NAMES[@]}" | jq -R . | jq -sc .)

# nodes_are CONNECTED...: GET /v1/nodes lists exactly the 4 nodes, node i
# connected or not as the i-th word says, each with its 4 ranks.
nodes_are() {
	local want
	want=$(printf '%s\n' "$@" | jq -sc .)
	http_get /v1/nodes | jq -e --argjson names "$NAMES" --argjson want "$want" '
		(.nodes | length) == 4 and ([.nodes[].name] | sort) == ($names | sort) and
		([range(4) as $i | .nodes[] | select(.name == $names[$i]) |
		  .connected == $want[$i] and .ranks == 4] | all)' >/dev/null 2>&1
}

# ranks_are LOST_NODE: the job's 16 ranks, each once, each on its own node
# (ranks 4i..4i+3 on node i) with that node's hostname; those of node
# LOST_NODE (-1: none) unresponsive with reason "node lost", every other
# connected with no reason.
ranks_are() {
	http_get "/v1/jobs/$JOB" | jq -e --argjson names "$NAMES" --argjson lost "$1" '
		.world_size == 16 and ([.ranks[].rank] | sort) == [range(16)] and
		all(.ranks[]; (.rank / 4 | floor) as $n |
		    .node == $names[$n] and .host == $names[$n] and .pid > 0 and
		    if $n == $lost then .state == "unresponsive" and .reason == "node lost"
		    else .state == "connected" and .reason == null end)' >/dev/null 2>&1
}
job_ranks() { http_get "/v1/jobs/$JOB" | jq -c '[.ranks[] | {rank, node, host, state, reason}]'; }

for i in 0 1 2 3; do start_netns_node "$i"; done
# No FLIGHTREC_ADDR: each rank looks for its node's socket (netns_rsh
# names it), as on a node it looks for /run/flightrec/agent.sock.
AGENT_ADDR= AGENT_ENV="-x FLIGHTREC_TOKEN_FILE=$TOKEN" start_job 16 --scenario compute --culprit 9 --at 5

# 1. Four nodes, sixteen ranks, each on its node.
wait_for 40 nodes_are true true true true ||
	fail "the central daemon does not list 4 connected nodes of 4 ranks: $(http_get /v1/nodes); node 0: $(tail -n 5 "$T/${NODE_NAMES[0]}.log")"
wait_for 20 ranks_are -1 || fail "the job's ranks are not each connected on its node: $(job_ranks)"
for r in $(seq 0 15); do
	pid=$(http_get "/v1/jobs/$JOB" | jq -r --argjson r "$r" '.ranks[] | select(.rank == $r) | .pid')
	ns=$(ip netns identify "$pid" 2>/dev/null)
	[ "$ns" = "${NODE_NAMES[r / 4]}" ] || fail "rank $r (pid $pid) runs in namespace '$ns', not ${NODE_NAMES[r / 4]}"
done
echo "1. 4 nodes, 16 ranks each on its node"

# 2. Node 1's daemon dies: its ranks, and no other, are lost; it comes back.
kill -KILL "${NODE_PIDS[1]}"
wait_for 10 gone "${NODE_PIDS[1]}" || fail "node 1's daemon (pid ${NODE_PIDS[1]}) outlived SIGKILL"
wait_for 20 nodes_are true false true true || fail "node 1 is not shown disconnected: $(http_get /v1/nodes)"
wait_for 10 ranks_are 1 || fail "node 1's ranks, and only they, are not lost: $(job_ranks)"
[ ! -e "$T/incidents/$JOB" ] || fail "the lost node opened an incident: $(ls "$T/incidents/$JOB")"
start_netns_node 1
wait_for 40 nodes_are true true true true || fail "node 1 did not reconnect: $(http_get /v1/nodes); $(tail -n 5 "$T/${NODE_NAMES[1]}.log")"
wait_for 30 ranks_are -1 || fail "node 1's ranks did not come back: $(job_ranks)"
echo "2. node 1 lost and back"

# 3. The central daemon restarts on the same address: the nodes reconnect
# and resend everything. This one diagnoses the hang (step 4).
stop_daemon
before=$(wc -l <"$T/daemon.log")
LISTEN_ADDR=$CENTRAL start_daemon --token-file "$TOKEN" --timeout 2 --heartbeat-timeout 10
wait_for 40 nodes_are true true true true ||
	fail "the nodes did not reconnect to the restarted central daemon: $(http_get /v1/nodes); node 0: $(tail -n 5 "$T/${NODE_NAMES[0]}.log")"
wait_for 30 ranks_are -1 || fail "the restarted central daemon does not list the 16 ranks again: $(job_ranks)"
for i in 0 1 2 3; do
	tail -n +$((before + 1)) "$T/daemon.log" | grep -q "node ${NODE_NAMES[i]} connected from" ||
		fail "the restarted central daemon did not log node $i connecting: $(tail -n +$((before + 1)) "$T/daemon.log" | grep node)"
done
echo "3. central daemon restarted, nodes back"

# ---------------------------------------------------------------------------
# 4. The hang's verdict at the central daemon, from the nodes' aggregates,
# and its incident of the nodes' summaries.
# ---------------------------------------------------------------------------

# verdict_names_culprit FILE: the verdict in FILE (fr-analyze --json's form)
# names rank 9 alone, on node 2 (its host, or a node field if the verdict
# has one), not having entered all_reduce #5 of world.
verdict_names_culprit() {
	jq -e --arg n "${NODE_NAMES[2]}" '
		.verdict == "hang" and [.culprits[].rank] == [9] and
		.culprits[0].reason == "not_entered" and
		((.culprits[0].node // .culprits[0].host) == $n) and
		.op.type == "all_reduce" and .op.seq == 5 and .op.comm == "world"' "$1" >/dev/null 2>&1
}
live_verdict() {
	http_get "/v1/jobs/$JOB/analysis" >"$T/live.json" 2>/dev/null && verdict_names_culprit "$T/live.json"
}
status=$(http_status "/v1/jobs/$JOB/analysis")
[ "$status" = 200 ] ||
	fail "GET /v1/jobs/$JOB/analysis of a job held by node daemons answers $status"
wait_for 40 live_verdict ||
	fail "the central daemon's verdict does not name rank 9 on ${NODE_NAMES[2]} in all_reduce #5: $(cat "$T/live.json")"
echo "4. live verdict: rank 9 on ${NODE_NAMES[2]}, all_reduce #5"

# An incident: listed by the central daemon, complete, its directory
# analysed offline to the same verdict.
incident_listed() {
	INCIDENT=$(http_get "/v1/jobs/$JOB/incidents" 2>/dev/null |
		jq -er '[.incidents[] | select(.status != "collecting")][0].path' 2>/dev/null) &&
		[ -s "$INCIDENT/manifest.json" ]
}
wait_for 60 incident_listed ||
	fail "no closed incident in GET /v1/jobs/$JOB/incidents: $(http_get "/v1/jobs/$JOB/incidents")"
analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
verdict_names_culprit "$T/verdict.json" ||
	fail "fr-analyze on $INCIDENT does not name rank 9 on ${NODE_NAMES[2]} in all_reduce #5: $(cat "$T/verdict.json")"
# Every other rank's summary is in the incident, waiting in it, its full
# dump left on its own node; the culprit's full dump was fetched, its stack
# in the computation that never returns.
expect '.op.comm_size == 16 and .waiting_ranks == ([range(16)] - [9])'
jq -e --argjson names "$NAMES" '[.ranks[] | .answer == "received" and .node == $names[.rank / 4 | floor]] |
	length == 16 and all' "$INCIDENT/manifest.json" >/dev/null ||
	fail "the manifest does not have every rank received from its node: $(jq -c '[.ranks[] | {rank, answer, node}]' "$INCIDENT/manifest.json")"
jq -e --argjson names "$NAMES" '([.full_dumps[].rank] | sort) == ([range(16)] - [9]) and
	all(.full_dumps[]; .node == $names[.rank / 4 | floor])' "$T/verdict.json" >/dev/null ||
	fail "fr-analyze does not name each summarised rank's node: $(jq -c .full_dumps "$T/verdict.json")"
jq -e '.summary == null and ([.threads[].frames[].name] | index("stuck_in_compute"))' "$INCIDENT/rank-9.json" >/dev/null ||
	fail "rank 9's full dump with its stack in stuck_in_compute is not in $INCIDENT"
# Any rank's full dump, from its node, over the central daemon's API.
http_get "/v1/jobs/$JOB/incidents/${INCIDENT##*/}/ranks/6" >"$T/rank-6.json"
jq -e --arg n "${NODE_NAMES[1]}" '.rank == 6 and .host == $n and .summary == null' "$T/rank-6.json" >/dev/null ||
	fail "GET .../ranks/6 did not give rank 6's full dump from ${NODE_NAMES[1]}: $(head -c 300 "$T/rank-6.json")"
echo "PASS netns nodes: 16 ranks on 4 node daemons, node lost and back, central restart; rank 9 named on ${NODE_NAMES[2]} centrally and offline"
