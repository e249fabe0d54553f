#!/usr/bin/env bash
# A central daemon with a token against node daemons that misbehave (raw
# ones, abuse_node.py) and a real one whose job ends (docs/SCALE-OUT.md,
# protocol/PROTOCOL.md "Node daemons"):
# - a NODE_HELLO announcing a megabyte before any proof is refused from
#   its header, at once; one over 64 KiB after an AUTH too;
# - a second node daemon that takes a connected node's name with another
#   boot id is refused and told why, and the first keeps its place;
# - a job id is held by node daemons or by agents here, whichever came
#   first: the other side is refused, logged and counted;
# - an empty FULL NODE_RANKS retracts the job; a real node daemon sends one
#   when its job ends, and the central daemon forgets the job;
# - a node daemon whose upstream never completes the TCP connect (a full
#   accept queue drops its SYN) gives up after 10 s, says why, and tries
#   again.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/node_daemons.sh"

NODE_PY=$ROOT/tests/e2e/abuse_node.py
AGENT_PY=$ROOT/tests/e2e/abuse_agent.py
make_token

start_daemon --token-file "$TOKEN"
CENTRAL_LISTEN=$LISTEN_PORT

node_is() { # node_is NAME CONNECTED RANKS
	http_get /v1/nodes | jq -e --arg n "$1" --argjson c "$2" --argjson r "$3" \
		'.nodes | any(.name == $n and .connected == $c and .ranks == $r)' >/dev/null 2>&1
}
job_ranks_are() { # job_ranks_are JOB N: GET /v1/jobs/JOB lists N ranks
	http_get "/v1/jobs/$1" 2>/dev/null | jq -e --argjson n "$2" '.ranks | length == $n' >/dev/null
}
job_listed() { http_get /v1/jobs | jq -e --arg j "$1" '.jobs | any(.job == $j)' >/dev/null; }

# 1. An unproven NODE_HELLO of a megabyte: refused from its header, without
# waiting for the payload (the hello timeout is 10 s).
out=$(python3 "$NODE_PY" "$CENTRAL_LISTEN" "$TOKEN" oversize 1048576)
case $out in
closed\ [0-2].*) ;;
*) fail "an unproven 1 MiB node_hello was not refused at once: $out" ;;
esac
wait_for 10 grep -q "node_hello before the proof of the token" "$T/daemon.log" ||
	fail "the refusal of a node_hello before auth was not logged: $(tail -n 5 "$T/daemon.log")"
out=$(python3 "$NODE_PY" "$CENTRAL_LISTEN" "$TOKEN" oversize 65537 auth)
case $out in
closed\ [0-2].*) ;;
*) fail "a node_hello over 64 KiB was not refused at once: $out" ;;
esac
grep -q "node_hello longer than 65536 bytes" <<<"$out" ||
	fail "the node was not told its node_hello is too long: $out"
metric_at_least frames_rejected_total 2 || fail "the oversized node_hellos were not counted"

# 2. Node n-a holds ranks 0 and 1 of JN; n-a again with another boot id is refused.
JN=$JOB-nodes
raw_node NA n-a 1 "$JN" 4 0 1
wait_for 10 node_is n-a true 2 || fail "node n-a is not listed with 2 ranks: $(http_get /v1/nodes)"
raw_node NB n-a 2 "$JN" 4 2 3
wait_for 10 grep -q "^error 4 a node daemon of this name is connected with another boot id" "$T/NB.out" ||
	fail "a second node daemon of a connected node's name was not refused: $(cat "$T/NB.out")"
grep -q "refusing node n-a from .*: a node of that name is connected from .* with boot id 0000000000000001" "$T/daemon.log" ||
	fail "the refusal of the second n-a was not logged: $(grep n-a "$T/daemon.log")"
metric_is nodes_refused_total 1 || fail "the refused node was not counted: $(metric nodes_refused_total)"
node_is n-a true 2 || fail "the first n-a lost its place: $(http_get /v1/nodes)"
job_ranks_are "$JN" 2 || fail "the first n-a's ranks changed: $(http_get "/v1/jobs/$JN")"

# 3. Agents here vs node daemons: whichever came first holds the job id.
JL=$JOB-local
mkfifo "$T/agent.ctl"
python3 "$AGENT_PY" "$CENTRAL_LISTEN" "$TOKEN" hold "$JL" 0 2 <"$T/agent.ctl" >"$T/agent.out" 2>&1 &
track_pid $!
exec {AGENT_FD}>"$T/agent.ctl"
wait_for 10 grep -q connected "$T/agent.out" || fail "the agent did not connect: $(cat "$T/agent.out")"
echo "ranks $JL 2 1" >&"$NA"
wait_for 10 metric_at_least node_jobs_conflicting_total 1 ||
	fail "a node's ranks of a job agents here hold were not refused"
grep -q "node n-a: refusing its ranks of job $JL: agents connected to this daemon hold job $JL" "$T/daemon.log" ||
	fail "the conflict was not logged: $(tail -n 5 "$T/daemon.log")"
job_ranks_are "$JL" 1 || fail "node ranks were mixed into the local job: $(http_get "/v1/jobs/$JL")"
[ "$(python3 "$AGENT_PY" "$CENTRAL_LISTEN" "$TOKEN" join "$JN" 3 4 1)" = 1 ] ||
	fail "an agent of a job node daemons hold was not closed"
grep -q "refusing rank 3 of job $JN from .*: node daemons hold job $JN (node n-a among them)" "$T/daemon.log" ||
	fail "the agent's refusal was not logged: $(tail -n 5 "$T/daemon.log")"
metric_at_least node_jobs_conflicting_total 2 || fail "the agent's refusal was not counted"
job_ranks_are "$JN" 2 || fail "the refused agent changed the node's job: $(http_get "/v1/jobs/$JN")"
echo quit >&"$AGENT_FD"

# 4. An empty FULL list: the job ended on n-a, the only node that held it.
job_listed "$JN" || fail "GET /v1/jobs does not list $JN: $(http_get /v1/jobs)"
echo "retract $JN 4" >&"$NA"
wait_for 10 eval '! job_listed "$JN"' || fail "a retracted job is still listed: $(http_get /v1/jobs)"
[ "$(http_status "/v1/jobs/$JN")" = 404 ] || fail "a retracted job still answers: $(http_get "/v1/jobs/$JN")"
node_is n-a true 0 || fail "n-a still counts ranks of the retracted job: $(http_get /v1/nodes)"
echo quit >&"$NA"
wait_for 10 node_is n-a false 0 || fail "n-a was not seen to go: $(http_get /v1/nodes)"

# 5. A real node daemon whose job ends: the central daemon forgets the job.
NODE_LISTEN=$(free_port)
start_node node "$NODE_LISTEN" --token-file "$TOKEN"
wait_for 10 grep -q "connected as a node daemon" "$T/node.log" ||
	fail "the node daemon did not connect upstream: $(cat "$T/node.log")"
AGENT_ADDR=127.0.0.1:$NODE_LISTEN AGENT_ENV="-x FLIGHTREC_TOKEN_FILE=$TOKEN" \
	start_job 2 --scenario none --iters 1000
wait_for 30 job_ranks_are "$JOB" 2 || fail "the central daemon does not list the node's job: $(http_get "/v1/jobs/$JOB")"
wait_job_exit 60
[ "$JOB_RC" = 0 ] || fail "the job failed: $(tail -n 20 "$T/job.log")"
wait_for 10 eval '! job_listed "$JOB"' || fail "the job that ended on the node is still listed: $(http_get /v1/jobs)"
grep -q "node $(hostname): job $JOB ended there" "$T/daemon.log" ||
	fail "the central daemon did not log the end of the job: $(grep node "$T/daemon.log")"
metric_is node_state_refused_total 0 || fail "node state was refused: $(grep refusing "$T/daemon.log")"

# 6. An upstream whose accept queue is full: the SYN is dropped, the
# connect hangs. Once the queue is drained the node's next try gets in.
cat >"$T/stuck.py" <<'PY'
import socket, struct, sys
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(0)
filler = socket.create_connection(l.getsockname())
print(l.getsockname()[1], flush=True)
sys.stdin.readline()
l.settimeout(60)
while True:
    c, _ = l.accept()
    c.settimeout(5)
    try:
        head = c.recv(16)
    except OSError:
        continue
    if len(head) == 16 and struct.unpack("<IHHII", head)[2] == 13:
        print("node_hello", flush=True)
        break
PY
mkfifo "$T/stuck.ctl"
python3 "$T/stuck.py" <"$T/stuck.ctl" >"$T/stuck.out" 2>&1 &
track_pid $!
exec {STUCK_FD}>"$T/stuck.ctl"
wait_for 10 test -s "$T/stuck.out" || fail "the stuck upstream did not start: $(cat "$T/stuck.out")"
STUCK_PORT=$(head -n 1 "$T/stuck.out")
NODE_UPSTREAM=127.0.0.1:$STUCK_PORT start_node stuck-node 0
wait_for 20 grep -q "upstream 127.0.0.1:$STUCK_PORT: no connection within 10 s (connect timed out); trying again with backoff" "$T/stuck-node.log" ||
	fail "the node daemon did not give up its hanging connect: $(cat "$T/stuck-node.log")"
echo accept >&"$STUCK_FD"
wait_for 60 grep -q node_hello "$T/stuck.out" ||
	fail "the node daemon did not try again after its connect timed out: $(cat "$T/stuck-node.log")"
echo PASS
