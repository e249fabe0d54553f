#!/usr/bin/env bash
# A node daemon that reconnects while an incident collects from it
# (docs/SCALE-OUT.md, "Incidents at scale"): its new connection, with the
# same boot id, takes the place of one the central daemon has not seen go.
# A node drops what it had queued for the central daemon when it loses the
# link, so the answers it owed are lost: the central daemon gives its ranks
# up at once, saying why, instead of waiting the whole --dump-deadline
# (60 s here) and calling them unresponsive.
#
# The node is raw (abuse_node.py): it holds ranks 0-3 of the job and never
# answers NODE_DUMP_REQUEST, as a node whose answers were lost.
. "$(dirname "$0")/lib.sh"

NODE_PY=$ROOT/tests/e2e/abuse_node.py
make_token
start_daemon --token-file "$TOKEN" --dump-deadline 60
JOB=$JOB-reconnect

# raw_node NAME NODE BOOT: node NODE (boot id BOOT) holding ranks 0-3 of $JOB.
raw_node() {
	local name=$1 fd
	mkfifo "$T/$name.ctl"
	python3 "$NODE_PY" "$LISTEN_PORT" "$TOKEN" node "$2" "$3" "$JOB" 4 0 1 2 3 \
		<"$T/$name.ctl" >"$T/$name.out" 2>&1 &
	track_pid $!
	exec {fd}>"$T/$name.ctl"
	printf -v "$name" '%s' "$fd"
	wait_for 10 grep -q sent "$T/$name.out" || fail "node $name did not connect: $(cat "$T/$name.out")"
}
job_ranks_are() { http_get "/v1/jobs/$JOB" 2>/dev/null | jq -e --argjson n "$1" '.ranks | length == $n' >/dev/null; }

raw_node NA n-a 7
wait_for 10 job_ranks_are 4 || fail "the central daemon does not list the node's 4 ranks: $(http_get "/v1/jobs/$JOB")"
http_headers
curl -sS --max-time 10 -X POST "${HTTP_HEADERS[@]}" "$HTTP/v1/jobs/$JOB/dump" >"$T/post.json"
jq -e '.incident and .ranks_requested == 4' "$T/post.json" >/dev/null ||
	fail "POST dump on the central daemon: $(cat "$T/post.json")"

# The same node comes back (the same boot id) on a new connection.
raw_node NB n-a 7
wait_incident 15
expect '[.ranks[] | .answer] == ["unresponsive", "unresponsive", "unresponsive", "unresponsive"]' "$INCIDENT/manifest.json"
expect '[.ranks[] | .error] | all(. == "node n-a reconnected mid-incident: its answers were lost")' \
	"$INCIDENT/manifest.json"
echo quit >&"$NB"
echo PASS
