#!/usr/bin/env bash
# The summaries' deadline of an incident behind node daemons, with
# --dump-deadline 1 and fake nodes (bench/fakenodes) of 16 ranks each:
#   - nodes that send a summary every 200 ms are still sending at the
#     deadline: the central daemon waits while they do (up to 4 deadlines)
#     and the incident has every rank's summary and names the planted rank;
#   - a node that sends 3 summaries and then nothing more is not waited
#     for past the 2 s it has been silent: the incident completes soon
#     after the deadline, that node's 13 other ranks without a summary,
#     the other node's all in.
. "$(dirname "$0")/lib.sh"

RANKS=32
JOB=bench-train
PLANTED=$(((RANKS / 2 + 5) % RANKS))
FAKENODES=$BUILD_DIR/bench/fakenodes
for p in "$FAKENODES" "$BUILD_DIR/bench/gen_dumps" "$BUILD_DIR/bench/summarize"; do
	[ -x "$p" ] || fail "$p is missing: make $p"
done
"$BUILD_DIR/bench/gen_dumps" "$T/full" "$RANKS" 16 --seed 1 >/dev/null || fail "gen_dumps failed"
"$BUILD_DIR/bench/summarize" "$T/full" "$T/summaries" >"$T/summarize.out" 2>&1 || fail "summarize failed: $(cat "$T/summarize.out")"
make_token

# run_nodes NAME FAKENODES_OPTION...: a central daemon, 2 fake nodes
# answering as told, one manual incident; its record in $T/NAME.json.
run_nodes() {
	local name=$1 fake_pid
	shift
	start_daemon --token-file "$TOKEN" --heartbeat-timeout 60 --dump-deadline 1
	"$FAKENODES" "127.0.0.1:$LISTEN_PORT" bench-train "$RANKS" 2 "$T/summaries" --full "$T/full" \
		--token "$TOKEN" "$@" >"$T/$name.fake.out" 2>"$T/$name.fake.err" &
	fake_pid=$!
	track_pid "$fake_pid"
	all_up() {
		[ "$(http_get /v1/nodes 2>/dev/null | jq -r '[.nodes[] | select(.connected) | .ranks] | add // 0')" = "$RANKS" ]
	}
	wait_for 20 all_up || fail "$name: the central daemon does not list $RANKS ranks: $(cat "$T/$name.fake.err")"
	http_headers
	curl -s -o "$T/$name.post.json" -X POST "${HTTP_HEADERS[@]}" "$HTTP/v1/jobs/bench-train/dump" ||
		fail "$name: POST dump failed"
	wait_incident 30
	http_get "/v1/jobs/bench-train/incidents" | jq '.incidents[0]' >"$T/$name.json"
	kill "$fake_pid" 2>/dev/null
	stop_daemon
	mv "$T/daemon.log" "$T/$name.daemon.log"
	mv "$T/incidents" "$T/$name.incidents"
	INCIDENT=$T/$name.incidents/${INCIDENT#"$T/incidents/"}
}

run_nodes paced --pace 200
expect '.ranks_answered == 32 and .ranks_requested == 32' "$T/paced.json"
expect '[.ranks[] | .answer] | all(. == "received")' "$INCIDENT/manifest.json"
grep -q "summary deadline passed with [12] node(s) still sending" "$T/paced.daemon.log" ||
	fail "the daemon did not say it waited for the nodes still sending: $(grep incident "$T/paced.daemon.log")"
analyze "$INCIDENT"
expect "[.culprits[].rank] == [$PLANTED]"

run_nodes stalled --stall 1:3
expect '.ranks_answered == 19 and .ranks_requested == 32 and .opened_ns > 0' "$T/stalled.json"
lasted=$(jq -r '(.closed_ns - .opened_ns) / 1e9' "$T/stalled.json")
awk -v s="$lasted" 'BEGIN {exit !(s < 3.9)}' ||
	fail "the incident waited $lasted s on a node silent since its third summary (deadline 1 s)"
expect '[.ranks[] | select(.node == "fake0001" and .answer != "received")] | length == 13' "$INCIDENT/manifest.json"
echo "PASS cluster deadline: nodes still sending are waited for (32 of 32), a silent one is not ($lasted s, 19 of 32)"
