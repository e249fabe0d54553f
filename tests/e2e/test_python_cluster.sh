#!/usr/bin/env bash
# Python frames through node daemons (protocol 8). The mpi4py training loop
# (tests/python/train_loop.py), 4 ranks, ranks 0-1 on node daemon node-a
# and 2-3 on node-b, both upstream of a central daemon; rank 2 sleeps in
# load_batch() before the allreduce of step 3. The central daemon's
# GET /v1/jobs/<job>/stacks, merged from the nodes' classes, groups the
# ranks by Python frames: rank 2 alone in load_batch on its line, ranks
# 0-1 and 3 (from both nodes) in one group on the allreduce line. An
# incident asked of the central daemon holds the nodes' summaries, which
# keep the Python frames, and fr-analyze's report of it names rank 2 in
# load_batch with its file and line and merges the stacks by Python frames.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/node_daemons.sh"
[ "$SANITIZER" = thread ] && skip "ThreadSanitizer holds the stack-capture signal back while a rank polls in uninstrumented libmpi"

need_train_loop
NAME=$(basename "$SCRIPT")

make_token
start_daemon --token-file "$TOKEN" --dump-deadline 20
# The node daemons' own watchdogs stay quiet: the central daemon asks.
PORT_A=$(free_port)
PORT_B=$(free_port)
NODE_NAMING=env start_node node-a "$PORT_A" --token-file "$TOKEN" --timeout 3600 --heartbeat-timeout 3600
NODE_NAMING=env start_node node-b "$PORT_B" --token-file "$TOKEN" --timeout 3600 --heartbeat-timeout 3600
AGENT_ENV="-x FLIGHTREC_TOKEN_FILE=$TOKEN" \
	start_split_program 4 "127.0.0.1:$PORT_A" "127.0.0.1:$PORT_B" $PY "$SCRIPT" 2 3 100

# The hang is in place once node-b's rank 3 has waited in the allreduce
# for a second and a half.
node_b_http=http://127.0.0.1:$(jq -r .http "$T/node-b-ports.json")
rank3_waits() {
	http_headers
	curl -sS --max-time 5 "${HTTP_HEADERS[@]}" "$node_b_http/v1/jobs/$JOB/analysis" |
		jq -e '(.waiting_ranks | index(3) != null) and .waited_s >= 1.5' >/dev/null 2>&1
}
wait_for 60 rank3_waits || fail "rank 3 never waited in the allreduce: $(tail -n 5 "$T/job.log")"

# The central daemon's merged stacks, from both nodes' classes.
http_get "/v1/jobs/$JOB/stacks" >"$T/stacks.json" ||
	fail "GET /v1/jobs/$JOB/stacks on the central daemon failed: $(cat "$T/stacks.json")"
expect '.ranks_answered == 4 and .nodes.answered == 2' "$T/stacks.json"
expect "[.groups[] | select(.ranks == \"2\")][0] | .nodes == 1 and
	(.python_frames[0] | .function == \"load_batch\" and .file == \"$SCRIPT\" and .line == $LOAD_LINE) and
	.python_frames[1].function == \"main\"" "$T/stacks.json"
expect "[.groups[] | select(.ranks == \"0-1,3\")][0] | .nodes == 2 and
	(.python_frames[0] | .function == \"train_step\" and .line == $REDUCE_LINE) and
	(.thread.python_frames[0].function == \"train_step\")" "$T/stacks.json"

# An incident asked of the central daemon: summaries from the nodes.
http_headers
curl -sS --max-time 10 -X POST "${HTTP_HEADERS[@]}" "$HTTP/v1/jobs/$JOB/dump" >"$T/post.json"
jq -e '.incident and .ranks_requested == 4' "$T/post.json" >/dev/null ||
	fail "POST dump on the central daemon: $(cat "$T/post.json")"
wait_incident 60
summary_of "$INCIDENT" 0 >"$T/summary-0.json"
expect "[.threads[] | select(.python_frames) | .python_frames[0]] |
	any(.function == \"train_step\" and .line == $REDUCE_LINE)" "$T/summary-0.json"

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '[.culprits[].rank] == [2] and .culprits[0].reason == "not_entered"'
expect ".culprits[0].python_frames[0] | .function == \"load_batch\" and .line == $LOAD_LINE"
"$BIN/fr-analyze" "$INCIDENT" >"$T/report.txt"
grep -q "load_batch ($NAME:$LOAD_LINE)" "$T/report.txt" ||
	fail "the report lacks rank 2's Python frame: $(cat "$T/report.txt")"
grep -qE "^  3 ranks \(0-1,3\): train_step \($NAME:$REDUCE_LINE\) <- main " "$T/report.txt" &&
	grep -qE "^  1 rank \(2\): load_batch \($NAME:$LOAD_LINE\) <- main " "$T/report.txt" ||
	fail "stacks not merged by Python frames: $(sed -n '/^Stacks/,$p' "$T/report.txt")"
stop_job
echo "PASS python cluster: the central daemon's stacks and the incident's report group the ranks by Python frames; rank 2 in load_batch ($NAME:$LOAD_LINE)"
