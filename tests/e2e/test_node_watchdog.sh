#!/usr/bin/env bash
# The central daemon decides the hangs of a job that node daemons hold
# (docs/SCALE-OUT.md): a 4-rank MPI job whose ranks 0-1 report to node
# daemon nodeA and ranks 2-3 to nodeB (each in a UTS namespace of its own,
# so that each has its own host name, its node name), both reporting
# upstream to a central daemon with --timeout 2. Rank 3 never returns from
# a computation: the central daemon's /analysis names rank 3 on nodeB as
# the culprit, ranks 0-2 as waiting, and opens one incident. Then nodeA
# dies: after --heartbeat-timeout its ranks 0-1 read unresponsive, "node
# lost: nodeA", beside the hang; a node daemon started again for nodeA
# clears it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/node_daemons.sh"

start_two_node_hang --timeout 2 --heartbeat-timeout 3

analysis() { http_get "/v1/jobs/$JOB/analysis" >"$T/verdict.json" 2>/dev/null; }
analysis_says() { # analysis_says JQ: the central daemon's /analysis, now
	analysis && jq -e "$1" "$T/verdict.json" >/dev/null 2>&1
}
nodes_connected() {
	http_get /v1/nodes | jq -e '[.nodes[] | select(.connected and .ranks == 2) | .name] | sort == ["nodeA","nodeB"]' >/dev/null 2>&1
}

wait_for 30 nodes_connected || fail "the central daemon does not list nodeA and nodeB with 2 ranks each: $(http_get /v1/nodes)"

# The hang, named from the nodes' aggregates: rank 3, on nodeB, never
# entered the all_reduce ranks 0-2 wait in.
wait_for 40 analysis_says '.verdict == "hang" and .op != null' ||
	fail "the central daemon's /analysis shows no hang: $(cat "$T/verdict.json")"
expect '.op.type == "all_reduce" and .op.seq > 0 and .waited_s > 2'
expect '[.culprits[].rank] == [3] and .culprits[0].reason == "not_entered" and .culprits[0].node == "nodeB"'
expect '.culprits[0].last_entered < .op.seq and .culprits[0].pid > 0'
expect '.waiting_ranks == [0,1,2] and .waiting_ranges == "0-2" and .waiting_count == 3'
expect '.nodes_lost == [] and .world_size == 4 and (.summary | test("rank 3 \\(node nodeB\\) never entered all_reduce"))'
[ "$(http_get "/v1/jobs/$JOB/analysis?format=text" | head -n 1)" = "Verdict: hang (from the node daemons' aggregates)" ] ||
	fail "the text /analysis does not say hang: $(http_get "/v1/jobs/$JOB/analysis?format=text")"
http_headers
curl -sS -D - -o /dev/null --max-time 5 "${HTTP_HEADERS[@]}" "$HTTP/v1/jobs/$JOB/analysis" | grep -qi '^X-Flightrec-Verdict: hang' ||
	fail "no X-Flightrec-Verdict: hang header"
# The job views say so too, from the same decision.
http_get "/v1/jobs/$JOB" | jq -e '.verdict.verdict == "hang" and [.verdict.culprits[].rank] == [3]' >/dev/null ||
	fail "GET /v1/jobs/<job> has no verdict: $(http_get "/v1/jobs/$JOB")"
http_get /v1/jobs | jq -e --arg j "$JOB" '.jobs[] | select(.job == $j) | .verdict == "hang" and .stuck.type == "all_reduce" and .stuck.culprits == 1 and .stuck.ranks_waiting == 3' >/dev/null ||
	fail "GET /v1/jobs has no verdict for the job: $(http_get /v1/jobs)"
# One incident opened, and every rank's summary collected.
opened() { grep -cE "opened for job $JOB \(held by [0-9]+ nodes?\): reason $1" "$T/daemon.log"; }
wait_for 10 grep -qE "opened for job $JOB \(held by 2 nodes\): reason timeout" "$T/daemon.log" ||
	fail "the central daemon did not open an incident: $(grep "$JOB" "$T/daemon.log")"
wait_for 20 grep -q "of job $JOB closed: answered 4 of 4" "$T/daemon.log" ||
	fail "the incident did not collect every rank: $(grep "$JOB" "$T/daemon.log")"

# nodeA dies: after the heartbeat timeout its ranks are unresponsive, for
# one reason, beside the hang that still holds.
kill -KILL "$PID_nodeA"
{ wait "$PID_nodeA"; } 2>/dev/null
lost='.nodes_lost | length == 1 and .[0].node == "nodeA" and .[0].ranks == "0-1" and .[0].nranks == 2'
wait_for 20 analysis_says "$lost" || fail "nodeA is not lost in /analysis: $(cat "$T/verdict.json")"
expect '.verdict == "hang" and .culprits[0].rank == 3 and .culprits[0].reason == "not_entered"'
expect '[.culprits[1:][] | select(.reason == "unresponsive" and .detail == "node lost: nodeA" and .node == "nodeA") | .rank] == [0,1]'
expect '.summary | test("node nodeA lost [0-9.]+ s ago: ranks 0-1 unresponsive")'
wait_for 10 grep -qE "opened for job $JOB \(held by 2 nodes\): reason node_lost" "$T/daemon.log" ||
	fail "the central daemon did not open an incident of the lost node: $(grep "$JOB" "$T/daemon.log")"
[ "$(opened timeout)" -eq 1 ] ||
	fail "the same stuck operation was opened more than once: $(grep "$JOB" "$T/daemon.log")"

# nodeA back: its agents reconnect, it resends, the loss is gone.
start_node nodeA "$PORT_A" --token-file "$TOKEN"
wait_for 30 analysis_says '.nodes_lost == [] and [.culprits[].rank] == [3] and .waiting_ranks == [0,1,2]' ||
	fail "nodeA came back but is still lost: $(cat "$T/verdict.json")"
[ "$(opened node_lost)" -eq 1 ] ||
	fail "the node loss was opened more than once: $(grep "$JOB" "$T/daemon.log")"
echo PASS
