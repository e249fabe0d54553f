#!/usr/bin/env bash
# A node daemon that reconnects while an incident collects from it
# (docs/SCALE-OUT.md, "Incidents at scale"): its link breaks under it
# mid-answer, and its new connection (the same boot id) takes the place of
# one the central daemon has not seen go. What the node had queued went
# with the old connection; the central daemon asks the node again on the
# new one, the node sends every rank's summary again, and the incident
# completes with all of them, long before --dump-deadline (60 s here).
#
# The break: a proxy between the node daemon and the central daemon
# (tcp_proxy.py, HALF_CUT_TYPE 18) drops the node's first NODE_SUMMARY and
# closes the node's side only, keeping the central daemon's side open, as
# a path that fails silently does.
# The job: 4 ranks simulated by bench/loadgen on the node daemon.
. "$(dirname "$0")/lib.sh"

LOADGEN=$BUILD_DIR/bench/loadgen
[ -x "$LOADGEN" ] || fail "no $LOADGEN: make e2e builds it"
make_token
start_daemon --token-file "$TOKEN" --dump-deadline 60

mkdir "$T/proxy"
python3 "$ROOT/tests/e2e/tcp_proxy.py" "$T/proxy.port" "$LISTEN_PORT" "$T/proxy" 18 >"$T/proxy.out" 2>&1 &
track_pid $!
wait_for 10 test -s "$T/proxy.port" || fail "the proxy did not start: $(cat "$T/proxy.out")"
PROXY_PORT=$(cat "$T/proxy.port")

NODE_LISTEN=$(free_port)
FLIGHTREC_NODE_NAME=n-a "$BIN/flightrecd" --listen "127.0.0.1:$NODE_LISTEN" --http 127.0.0.1:0 \
	--dump-dir "$T/node-incidents" --token-file "$TOKEN" --timeout 3600 --heartbeat-timeout 3600 \
	--upstream "127.0.0.1:$PROXY_PORT" >>"$T/node.log" 2>&1 &
track_pid $!
wait_for 10 grep -q "connected as a node daemon" "$T/node.log" ||
	fail "the node daemon did not connect upstream: $(cat "$T/node.log")"
"$LOADGEN" --addr "127.0.0.1:$NODE_LISTEN" --ranks 4 --job "$JOB" --rate 2 --hang-after -1 \
	--dump-size 16384 --token-file "$TOKEN" >"$T/loadgen.out" 2>&1 &
track_pid $!
job_ranks_are() { http_get "/v1/jobs/$JOB" 2>/dev/null | jq -e --argjson n "$1" '.ranks | length == $n' >/dev/null; }
wait_for 20 job_ranks_are 4 || fail "the central daemon does not list the node's 4 ranks: $(http_get "/v1/jobs/$JOB")"

http_headers
curl -sS --max-time 10 -X POST "${HTTP_HEADERS[@]}" "$HTTP/v1/jobs/$JOB/dump" >"$T/post.json"
jq -e '.incident and .ranks_requested == 4' "$T/post.json" >/dev/null ||
	fail "POST dump on the central daemon: $(cat "$T/post.json")"
wait_for 20 grep -q "^half-cut" "$T/proxy.out" || fail "the node daemon sent no summary: $(tail -n 5 "$T/node.log")"
wait_incident 20
expect '[.ranks[] | .answer] == ["received", "received", "received", "received"]' "$INCIDENT/manifest.json"
expect '[.ranks[] | .node] == ["n-a", "n-a", "n-a", "n-a"]' "$INCIDENT/manifest.json"
for r in 0 1 2 3; do
	[ -n "$(summary_of "$INCIDENT" "$r")" ] || [ -s "$INCIDENT/rank-$r.json" ] ||
		fail "no dump of rank $r in $INCIDENT: $(ls "$INCIDENT")"
done
# Asked twice, each rank's summary is there once.
[ "$(cat "$INCIDENT"/summaries-*.jsonl | wc -l)" -le 4 ] || fail "a rank's summary is in twice: $(cat "$INCIDENT"/summaries-*.jsonl | jq -c .rank)"
grep -q "node n-a reconnected mid-incident; asked for its ranks again" "$T/daemon.log" ||
	fail "the central daemon did not say it asked again: $(grep n-a "$T/daemon.log")"
grep -q "asked for again by the central daemon" "$T/node.log" ||
	fail "the node daemon did not say it answers again: $(tail -n 5 "$T/node.log")"
echo PASS
