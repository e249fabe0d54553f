#!/usr/bin/env bash
# Live looks at a job the node daemons hold (docs/HTTP-API.md, "Jobs the
# node daemons hold"): a 4-rank MPI job whose ranks 0-1 report to node
# daemon nodeA and ranks 2-3 to nodeB (each in a UTS namespace of its own,
# its host name its node name), both upstream of a central daemon. Rank 3
# never returns from a computation. The central daemon's GET
# /v1/jobs/<job>/stacks asks both nodes, which send classes of stacks,
# not one stack per rank: one group for the waiting ranks 0-2 (from both
# nodes) and one for rank 3's stuck_in_compute. A rank's stacks and trace
# are relayed from its node, on either node. A node that stops answering
# is given up on after 6 s. Then nodeA dies: its ranks are missing, "node
# lost: nodeA", and a look at one of them is refused.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/node_daemons.sh"

start_two_node_hang --timeout 2

# look PATH FILE: the central daemon's answer into FILE, its status on
# stdout. A look waits for the nodes' (at most 6 s), so it gets longer
# than http_get's 5 s.
look() {
	http_headers
	curl -sS --max-time 15 "${HTTP_HEADERS[@]}" -o "$2" -w '%{http_code}' "$HTTP$1"
}
nodes_connected() {
	http_get /v1/nodes | jq -e '[.nodes[] | select(.connected and .ranks == 2) | .name] | sort == ["nodeA","nodeB"]' >/dev/null 2>&1
}
stuck() {
	http_get "/v1/jobs/$JOB/analysis" >"$T/verdict.json" 2>/dev/null &&
		jq -e '.verdict == "hang"' "$T/verdict.json" >/dev/null 2>&1
}
wait_for 30 nodes_connected || fail "the central daemon does not list nodeA and nodeB with 2 ranks each: $(http_get /v1/nodes)"
# Rank 3 is in its computation and ranks 0-2 wait for it.
wait_for 40 stuck || fail "the central daemon's /analysis shows no hang: $(cat "$T/verdict.json")"

# Every rank's stacks: two groups, the waiting one from both nodes.
status=$(look "/v1/jobs/$JOB/stacks" "$T/stacks.json")
[ "$status" = 200 ] || fail "GET /v1/jobs/<job>/stacks answered $status: $(cat "$T/stacks.json")"
expect '.job != null and .ranks_asked == 4 and .ranks_answered == 4 and .missing == "" and .why == {}' "$T/stacks.json"
expect '[.groups[] | {ranks, nranks, nodes}] == [{"ranks":"0-2","nranks":3,"nodes":2},{"ranks":"3","nranks":1,"nodes":1}]' "$T/stacks.json"
expect '.groups[0].frames[0] | test("MPI_Allreduce")' "$T/stacks.json"
expect '.groups[1].frames | index("stuck_in_compute")' "$T/stacks.json"
expect '.groups | all(.thread.frames | length > 0)' "$T/stacks.json"
expect '.limits == {"threads_per_rank": 64, "frames_per_thread": 128} and .more_groups == 0' "$T/stacks.json"
expect '.nodes == {"asked": 2, "answered": 2, "lost": []}' "$T/stacks.json"

# One rank's stacks and trace, on each node, as the node answers them.
for r in 1 3; do
	status=$(look "/v1/jobs/$JOB/ranks/$r/stacks" "$T/rank$r.json")
	[ "$status" = 200 ] || fail "GET .../ranks/$r/stacks answered $status: $(cat "$T/rank$r.json")"
	expect ".rank == $r and .pid > 0 and (.threads | length > 0)" "$T/rank$r.json"
	status=$(look "/v1/jobs/$JOB/ranks/$r/trace?last=3" "$T/trace$r.json")
	[ "$status" = 200 ] || fail "GET .../ranks/$r/trace answered $status: $(cat "$T/trace$r.json")"
	expect ".rank == $r and .last == 3 and (.entries | length > 0 and length <= 3)" "$T/trace$r.json"
done
expect '[.threads[].frames[].name] | index("stuck_in_compute")' "$T/rank3.json"
expect '[.threads[].frames[].name] | index("MPI_Allreduce")' "$T/rank1.json"
status=$(look "/v1/jobs/$JOB/ranks/9/stacks" "$T/rank9.json")
[ "$status" = 404 ] || fail "a rank past the world answered $status: $(cat "$T/rank9.json")"

# nodeB stops answering: the look ends when the central daemon stops
# waiting for it (6 s), its ranks missing for that reason.
kill -STOP "$PID_nodeB"
started=$SECONDS
status=$(look "/v1/jobs/$JOB/stacks" "$T/stacks-late.json")
took=$((SECONDS - started))
kill -CONT "$PID_nodeB"
[ "$status" = 200 ] || fail "GET /v1/jobs/<job>/stacks answered $status with nodeB stopped: $(cat "$T/stacks-late.json")"
[ "$took" -le 10 ] || fail "the look waited $took s for a node that does not answer"
expect '.missing == "2-3" and .why["2"] == "node nodeB did not answer within 6 s" and .ranks_answered == 2' "$T/stacks-late.json"
expect '.nodes == {"asked": 2, "answered": 1, "lost": []} and [.groups[].ranks] == ["0-1"]' "$T/stacks-late.json"

# nodeA dies: its ranks are missing, for that reason.
kill -KILL "$PID_nodeA"
{ wait "$PID_nodeA"; } 2>/dev/null
nodeA_lost() {
	http_get /v1/nodes | jq -e '.nodes[] | select(.name == "nodeA") | .connected == false' >/dev/null 2>&1
}
wait_for 20 nodeA_lost || fail "the central daemon still lists nodeA connected: $(http_get /v1/nodes)"
status=$(look "/v1/jobs/$JOB/stacks" "$T/stacks-lost.json")
[ "$status" = 200 ] || fail "GET /v1/jobs/<job>/stacks answered $status after nodeA died: $(cat "$T/stacks-lost.json")"
expect '.missing == "0-1" and .why == {"0": "node lost: nodeA", "1": "node lost: nodeA"}' "$T/stacks-lost.json"
expect '.ranks_answered == 2 and .nodes.lost == ["nodeA"] and .nodes.answered == 1' "$T/stacks-lost.json"
expect '[.groups[] | .ranks] | sort == ["2","3"]' "$T/stacks-lost.json"
status=$(look "/v1/jobs/$JOB/ranks/0/stacks" "$T/rank0-lost.json")
[ "$status" = 409 ] || fail "a look at a rank of the lost node answered $status: $(cat "$T/rank0-lost.json")"
expect '.error | test("node lost: nodeA")' "$T/rank0-lost.json"
echo PASS
