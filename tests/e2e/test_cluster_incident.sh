#!/usr/bin/env bash
# An incident of a job whose ranks are behind two node daemons
# (docs/SCALE-OUT.md, "Incidents at scale"). A 4-rank MPI job, rank 2
# computing forever before all_reduce #5: ranks 0 and 1 report to node
# daemon "node-a", ranks 2 and 3 to "node-b", both upstream of a central
# daemon. A manual dump on the central daemon asks both nodes; each keeps
# its ranks' full dumps in its own --dump-dir and sends their summaries;
# the central daemon's incident directory then holds every rank, the
# culprit's full dump (fetched) and the others' summaries, and fr-analyze
# gives it the verdict it gives the nodes' full dumps. Any rank's full dump
# is fetched from its node over HTTP.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/node_daemons.sh"
[ "$SANITIZER" = thread ] && skip "ThreadSanitizer holds the stack-capture signal back while a rank polls in uninstrumented libmpi"

make_token

start_daemon --token-file "$TOKEN" --dump-deadline 20 --max-incidents-per-hour 2

# Two node daemons named by FLIGHTREC_NODE_NAME, whose own watchdogs stay
# quiet (the central daemon is the one asking).
PORT_A=$(free_port)
PORT_B=$(free_port)
NODE_NAMING=env start_node node-a "$PORT_A" --token-file "$TOKEN" --timeout 3600 --heartbeat-timeout 3600
NODE_NAMING=env start_node node-b "$PORT_B" --token-file "$TOKEN" --timeout 3600 --heartbeat-timeout 3600

# Each rank picks its node daemon by its rank, as a launcher would by host.
AGENT_ENV="-x FLIGHTREC_TOKEN_FILE=$TOKEN" \
	start_split_job 4 "127.0.0.1:$PORT_A" "127.0.0.1:$PORT_B" --scenario compute --culprit 2 --at 5

ranks_on_nodes() {
	http_get "/v1/jobs/$JOB" | jq -e '[.ranks[] | select(.state == "connected") | "\(.rank)@\(.node)"] | sort ==
		["0@node-a", "1@node-a", "2@node-b", "3@node-b"]' >/dev/null 2>&1
}
wait_for 30 ranks_on_nodes || fail "the central daemon does not list ranks 0-1 on node-a and 2-3 on node-b: $(http_get "/v1/jobs/$JOB")"

# The hang is in place once node-b's rank 3 has waited in all_reduce #5
# for a second: in a dump taken on request, a shorter wait is a job
# between two collectives, not a hang.
node_b_http=http://127.0.0.1:$(jq -r .http "$T/node-b-ports.json")
rank3_waits() {
	http_headers
	curl -sS --max-time 5 "${HTTP_HEADERS[@]}" "$node_b_http/v1/jobs/$JOB/analysis" |
		jq -e '(.waiting_ranks | index(3) != null) and .waited_s >= 1.5' >/dev/null 2>&1
}
wait_for 30 rank3_waits || fail "rank 3 never waited in all_reduce #5"

# A manual dump on the central daemon asks the nodes.
http_headers
curl -sS --max-time 10 -X POST "${HTTP_HEADERS[@]}" "$HTTP/v1/jobs/$JOB/dump" >"$T/post.json"
jq -e '.incident and .ranks_requested == 4' "$T/post.json" >/dev/null ||
	fail "POST dump on the central daemon: $(cat "$T/post.json")"
ID=$(jq -r .incident "$T/post.json")
wait_incident 60
[ "$(basename "$INCIDENT")" = "$ID" ] || fail "the incident directory is $INCIDENT, not $ID"

# Every rank is there: the culprit's full dump in rank-2.json, the others'
# summaries a line each in their node's file, each naming its node and
# where its full dump is kept there.
for r in 0 1 3; do
	node=node-a
	[ "$r" = 3 ] && node=node-b
	summary_of "$INCIDENT" "$r" >"$T/summary-$r.json"
	jq -e --arg n "$node" '.rank as $r | .summary.node == $n and (.summary.full_dump | endswith("/rank-\($r).json"))' \
		"$T/summary-$r.json" >/dev/null || fail "no summary of rank $r from $node in $INCIDENT: $(ls "$INCIDENT")"
	grep -q "\"rank\":$r," "$INCIDENT/summaries-$node.jsonl" || fail "rank $r's summary is not in summaries-$node.jsonl"
	[ ! -e "$INCIDENT/rank-$r.json" ] || fail "rank-$r.json in $INCIDENT: a summary has its own file"
done
jq -e '.summary == null and .rank == 2 and (.pg_config.world.ranks | length == 4)' "$INCIDENT/rank-2.json" >/dev/null ||
	fail "the culprit's file is not its full dump: $(head -c 600 "$INCIDENT/rank-2.json")"
expect '[.ranks[] | .answer] == ["received", "received", "received", "received"]' "$INCIDENT/manifest.json"
expect '[.ranks[] | .dump] == ["summaries-node-a.jsonl", "summaries-node-a.jsonl", "rank-2.json", "summaries-node-b.jsonl"]' \
	"$INCIDENT/manifest.json"
# The node's file is served as it is, and listed.
http_get "/v1/jobs/$JOB/incidents/$ID/summaries-node-a.jsonl" >"$T/served.jsonl"
cmp -s "$T/served.jsonl" "$INCIDENT/summaries-node-a.jsonl" || fail "GET .../summaries-node-a.jsonl: $(head -c 300 "$T/served.jsonl")"
http_get "/v1/jobs/$JOB/incidents/$ID" | jq -e '[.files[].name] | index("summaries-node-b.jsonl") != null' >/dev/null ||
	fail "the incident's listing has no summaries-node-b.jsonl: $(http_get "/v1/jobs/$JOB/incidents/$ID")"
expect '.reason == "manual" and .incident == "'"$ID"'"' "$INCIDENT/manifest.json"
expect '[.ranks[] | .node] == ["node-a", "node-a", "node-b", "node-b"]' "$INCIDENT/manifest.json"

# fr-analyze names the stuck rank and the operation ...
analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "hang"'
expect '[.culprits[] | .rank] == [2] and .culprits[0].reason == "not_entered"'
expect '.op.type == "all_reduce" and .op.seq == 5 and .op.comm == "world"'
jq '{verdict, culprits: [.culprits[] | {rank, reason}], op: {type: .op.type, seq: .op.seq, comm: .op.comm}}' \
	"$T/verdict.json" >"$T/central-verdict.json"

# ... the same verdict as on the nodes' full dumps, put together.
mkdir "$T/full"
cp "$T"/node-a-incidents/"$JOB"/*/rank-*.json "$T"/node-b-incidents/"$JOB"/*/rank-*.json "$T/full/"
[ "$(ls "$T/full" | wc -l)" -eq 4 ] || fail "the nodes do not hold 4 full dumps: $(ls -R "$T/node-a-incidents" "$T/node-b-incidents")"
analyze "$T/full"
jq '{verdict, culprits: [.culprits[] | {rank, reason}], op: {type: .op.type, seq: .op.seq, comm: .op.comm}}' \
	"$T/verdict.json" >"$T/full-verdict.json"
cmp -s "$T/central-verdict.json" "$T/full-verdict.json" ||
	fail "the verdicts differ: central $(cat "$T/central-verdict.json"), full dumps $(cat "$T/full-verdict.json")"

# The incident is listed as complete, with the judged summary.
http_get "/v1/jobs/$JOB/incidents" | jq -e --arg id "$ID" \
	'.incidents | any(.id == $id and .status == "complete" and .ranks_answered == 4 and (.summary | test("rank 2")))' >/dev/null ||
	fail "GET incidents: $(http_get "/v1/jobs/$JOB/incidents")"

# Any rank's full dump, from its node on demand; 404 for what does not exist.
http_get "/v1/jobs/$JOB/incidents/$ID/ranks/1" >"$T/rank1.json"
jq -e '.rank == 1 and .summary == null and (.entries | length) > 0' "$T/rank1.json" >/dev/null ||
	fail "GET .../ranks/1 is not rank 1's full dump: $(head -c 600 "$T/rank1.json")"
# What the summaries and full dumps held of the memory budget is given back.
wait_for 5 metric_is memory_uploads_bytes 0 || fail "the central daemon still holds $(metric memory_uploads_bytes) bytes of uploads"
[ "$(http_status "/v1/jobs/$JOB/incidents/$ID/ranks/4")" = 404 ] || fail "a rank past the world is not 404"
[ "$(http_status "/v1/jobs/$JOB/incidents/20990101T000000Z-1/ranks/1")" = 404 ] || fail "an unknown incident is not 404"

# A lost node: its ranks' full dumps cannot be fetched, and the answer says why.
kill -KILL "$PID_node_b"
node_b_lost() { http_get /v1/nodes | jq -e '.nodes | any(.name == "node-b" and .connected == false)' >/dev/null 2>&1; }
wait_for 10 node_b_lost || fail "node-b is not shown lost: $(http_get /v1/nodes)"
[ "$(http_status "/v1/jobs/$JOB/incidents/$ID/ranks/3")" = 503 ] || fail "a lost node's rank is not 503"
http_get "/v1/jobs/$JOB/incidents/$ID/ranks/3" | jq -e '.error | test("node-b is not connected")' >/dev/null ||
	fail "the 503 does not say why: $(http_get "/v1/jobs/$JOB/incidents/$ID/ranks/3")"

# An incident while node-b is lost: its ranks are recorded without dumps,
# saying why; node-a's are there.
curl -sS --max-time 10 -X POST "${HTTP_HEADERS[@]}" "$HTTP/v1/jobs/$JOB/dump" >"$T/post2.json"
ID2=$(jq -r .incident "$T/post2.json")
[ -n "$ID2" ] && [ "$ID2" != null ] || fail "the second POST dump: $(cat "$T/post2.json")"
wait_for 60 test -s "$T/incidents/$JOB/$ID2/manifest.json" || fail "the second incident did not close"
M2=$T/incidents/$JOB/$ID2/manifest.json
expect '[.ranks[] | .answer] == ["received", "received", "unresponsive", "unresponsive"]' "$M2"
expect '[.ranks[2,3] | .error] == ["node lost: node-b", "node lost: node-b"] and .ranks[2].dump == null' "$M2"
[ -n "$(summary_of "$T/incidents/$JOB/$ID2" 0)" ] && [ ! -e "$T/incidents/$JOB/$ID2/summaries-node-b.jsonl" ] ||
	fail "the second incident's files: $(ls "$T/incidents/$JOB/$ID2")"

# --max-incidents-per-hour holds for node-held jobs too.
[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X POST "${HTTP_HEADERS[@]}" "$HTTP/v1/jobs/$JOB/dump")" = 429 ] ||
	fail "a third incident within the hour was not refused"
echo PASS
