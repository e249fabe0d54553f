#!/usr/bin/env bash
# What a central daemon takes from node daemons (raw ones, abuse_node.py)
# that lie (docs/SCALE-OUT.md, protocol/PROTOCOL.md "Node daemons"):
# - a job id that is not a name ("../escape-x") is refused with the frame
#   that carries it, and nothing is made outside --dump-dir;
# - a rank has one holder: a node that claims a rank another connected
#   node of the job holds is refused (logged, counted), and an incident of
#   the job asks the node that holds it;
# - a job has one world size: a node that says another is refused;
# - incidents open at once over all node-held jobs are capped: a node lost
#   with 20 jobs opens 16, the others wait, and none fails for "memory".
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/node_daemons.sh"

make_token

start_daemon --token-file "$TOKEN" --heartbeat-timeout 1 --dump-deadline 120

job_listed() { http_get /v1/jobs | jq -e --arg j "$1" '.jobs | any(.job == $j)' >/dev/null; }
rank_node_is() { # rank_node_is JOB RANK NODE
	http_get "/v1/jobs/$1" | jq -e --argjson r "$2" --arg n "$3" \
		'[.ranks[] | select(.rank == $r)] | length == 1 and .[0].node == $n' >/dev/null 2>&1
}

# 1. A job id that would be a path: its node_hello is refused and closed;
# a node that said hello fine is closed for a NODE_RANKS of one.
raw_node ESC n-esc 1 "../escape-x" 4 0 1
wait_for 10 grep -q closed "$T/ESC.out" || fail "a node_hello of job ../escape-x was not refused: $(cat "$T/ESC.out")"
raw_node ESC2 n-esc2 1 "$JOB-ok" 4 0
echo "ranks ../escape-x 4 0 1" >&"$ESC2"
wait_for 10 grep -q closed "$T/ESC2.out" || fail "a NODE_RANKS of job ../escape-x was not refused: $(cat "$T/ESC2.out")"
job_listed "../escape-x" && fail "job ../escape-x is listed: $(http_get /v1/jobs)"
[ ! -e "$T/escape-x" ] || fail "a directory was made outside --dump-dir: $(ls -R "$T/escape-x")"

# 2. One holder a rank: n-b's claim on rank 0, which n-a holds, is refused.
JR=$JOB-ranks
raw_node NA n-a 1 "$JR" 4 0 1 2 3
wait_for 10 rank_node_is "$JR" 0 n-a || fail "n-a's ranks are not listed: $(http_get "/v1/jobs/$JR")"
raw_node NB n-b 2 "$JR" 4 0
wait_for 10 metric_at_least node_ranks_conflicting_total 1 ||
	fail "n-b's claim on rank 0 was not refused: $(http_get "/v1/jobs/$JR")"
grep -q "node n-b: refusing 1 rank of job $JR that another connected node holds" "$T/daemon.log" ||
	fail "the refused claim was not logged: $(tail -n 5 "$T/daemon.log")"
rank_node_is "$JR" 0 n-a || fail "rank 0 is not n-a's: $(http_get "/v1/jobs/$JR")"
http_headers
curl -sS --max-time 10 -X POST "${HTTP_HEADERS[@]}" "$HTTP/v1/jobs/$JR/dump" >"$T/post.json"
ID=$(jq -r .incident "$T/post.json")
[ -n "$ID" ] && [ "$ID" != null ] || fail "POST dump of $JR: $(cat "$T/post.json")"
wait_for 10 grep -q "^dump_request $ID $JR" "$T/NA.out" || fail "n-a, which holds the ranks, was not asked: $(cat "$T/NA.out")"

# 3. One world size a job: n-c says 2 where n-a says 4.
raw_node NC n-c 3 "$JR" 2 1
wait_for 10 grep -q "node n-c: refusing its ranks of job $JR: it says the world has 2 ranks, the job's other nodes say 4" "$T/daemon.log" ||
	fail "n-c's world size was not refused: $(tail -n 5 "$T/daemon.log")"
[ "$(http_get /v1/jobs | jq --arg j "$JR" '.jobs[] | select(.job == $j) | .world_size')" = 4 ] ||
	fail "the job's world size changed: $(http_get /v1/jobs)"
rank_node_is "$JR" 1 n-a || fail "rank 1 is not n-a's: $(http_get "/v1/jobs/$JR")"

# 4. n-l holds rank 1 of 20 jobs whose rank 0 n-k holds and never dumps;
# n-l goes: 20 jobs have a node lost, 16 incidents open, the rest wait.
raw_node NK n-k 1 "$JOB-c0" 2 0
raw_node NL n-l 1 "$JOB-c0" 2 1
for i in $(seq 1 19); do
	echo "ranks $JOB-c$i 2 0" >&"$NK"
	echo "ranks $JOB-c$i 2 1" >&"$NL"
done
wait_for 10 eval 'http_get /v1/nodes | jq -e ".nodes | any(.name == \"n-l\" and .jobs == 20)" >/dev/null' ||
	fail "n-l does not hold 20 jobs: $(http_get /v1/nodes)"
echo quit >&"$NL"
wait_for 20 grep -q "incidents are collecting already" "$T/daemon.log" ||
	fail "no incident was held back: $(grep -c "incident .* opened for job $JOB-c" "$T/daemon.log") opened"
opened=$(grep -c "incident .* opened for job $JOB-c" "$T/daemon.log")
[ "$opened" -le 16 ] || fail "$opened incidents opened at once"
ls -d "$T"/incidents/"$JOB"-c*/* >/dev/null || fail "no incident directory was made"
[ "$(ls -d "$T"/incidents/"$JOB"-c*/* | wc -l)" -le 16 ] || fail "more than 16 incident directories: $(ls "$T/incidents")"
metric_at_least cluster_incidents_deferred_total 1 || fail "the incidents held back were not counted"
grep -q "Cannot allocate memory" "$T/daemon.log" && fail "an incident failed for memory: $(grep -m1 "Cannot allocate" "$T/daemon.log")"
echo PASS
