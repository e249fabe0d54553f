#!/usr/bin/env bash
# Two real daemons as two tiers (docs/SCALE-OUT.md): a node daemon with
# --upstream holds a 4-rank MPI job's agents and reports them to a central
# daemon, both proving the cluster token. The central daemon lists the node
# (GET /v1/nodes) and the job's 4 ranks, each naming its node; when the
# node daemon is killed the central daemon shows it disconnected and its
# ranks unresponsive ("node lost"), without opening an incident; a node
# daemon started again reconnects and sends its ranks again. A node daemon
# with another token is refused.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/node_daemons.sh"

make_token
NODE=$(hostname)

start_daemon --token-file "$TOKEN"
CENTRAL_LISTEN=$LISTEN_PORT
# The node daemon's agent port is fixed, so that the agents find it again
# after a restart.
NODE_LISTEN=$(free_port)

node_is() { # node_is CONNECTED RANKS: the central daemon's view of the node
	http_get /v1/nodes | jq -e --arg n "$NODE" --argjson c "$1" --argjson r "$2" \
		'.nodes | any(.name == $n and .connected == $c and .ranks == $r)' >/dev/null 2>&1
}
ranks_of_node_are() { # ranks_of_node_are STATE: all 4 ranks on the central daemon
	http_get "/v1/jobs/$JOB" | jq -e --arg n "$NODE" --arg s "$1" \
		'[.ranks[] | select(.node == $n and .state == $s)] | length == 4' >/dev/null 2>&1
}

# A node daemon with another token is refused, and says why; the central
# daemon lists no node for it.
printf 'flightrec-e2e-wrong-token-0123456789\n' >"$T/wrong"
chmod 600 "$T/wrong"
start_node wrong 0 --token-file "$T/wrong"
wait_for 10 grep -q "upstream 127.0.0.1:$CENTRAL_LISTEN: refused: wrong or missing proof of the token" "$T/wrong.log" ||
	fail "a node daemon with another token was not refused: $(cat "$T/wrong.log")"
wait_for 10 metric_at_least auth_failures_total 1 || fail "the refused node daemon was not counted"
http_get /v1/nodes | jq -e '.nodes == []' >/dev/null || fail "a refused node daemon is listed: $(http_get /v1/nodes)"
kill -KILL "$PID_wrong"

start_node node "$NODE_LISTEN" --token-file "$TOKEN"
AGENT_ADDR=127.0.0.1:$NODE_LISTEN AGENT_ENV="-x FLIGHTREC_TOKEN_FILE=$TOKEN" \
	start_job 4 --scenario compute --culprit 2 --at 800

wait_for 30 node_is true 4 || fail "the central daemon does not list node $NODE with 4 ranks: $(http_get /v1/nodes); node log: $(cat "$T/node.log")"
grep -q "upstream 127.0.0.1:$CENTRAL_LISTEN: connected as a node daemon" "$T/node.log" ||
	fail "the node daemon did not say it connected upstream"
wait_for 10 ranks_of_node_are connected || fail "the central daemon does not list the job's 4 ranks as connected on $NODE: $(http_get "/v1/jobs/$JOB")"
http_get "/v1/jobs/$JOB" | jq -e '[.ranks[].rank] == [0,1,2,3] and .world_size == 4 and all(.ranks[]; .pid > 0 and .host != "")' >/dev/null ||
	fail "ranks without their number, pid or host: $(http_get "/v1/jobs/$JOB")"
http_get /v1/jobs | jq -e --arg j "$JOB" '.jobs | any(.job == $j and .world_size == 4)' >/dev/null ||
	fail "GET /v1/jobs on the central daemon does not list the job: $(http_get /v1/jobs)"
# The node's API needs the token like the rest.
[ "$(HTTP_TOKEN= http_status /v1/nodes)" = 401 ] || fail "GET /v1/nodes answered without the token"

# The node daemon dies: its ranks are not watched any more, and say so.
kill -KILL "$PID_node"
wait_for 10 node_is false 4 || fail "the central daemon still shows node $NODE connected: $(http_get /v1/nodes)"
ranks_of_node_are unresponsive || fail "the lost node's ranks are not unresponsive: $(http_get "/v1/jobs/$JOB")"
http_get "/v1/jobs/$JOB" | jq -e 'all(.ranks[]; .reason == "node lost")' >/dev/null ||
	fail "the lost node's ranks do not say why: $(http_get "/v1/jobs/$JOB")"

# Started again, it reconnects; the agents come back to it and it resends.
start_node node "$NODE_LISTEN" --token-file "$TOKEN"
wait_for 30 node_is true 4 || fail "the node daemon did not reconnect with its 4 ranks: $(http_get /v1/nodes); node log: $(tail -n 20 "$T/node.log")"
wait_for 30 ranks_of_node_are connected || fail "the ranks are not connected again on the central daemon: $(http_get "/v1/jobs/$JOB")"
[ "$(grep -c "node $NODE connected from" "$T/daemon.log")" -eq 2 ] ||
	fail "the central daemon did not log the node's restart: $(grep node "$T/daemon.log")"

# Every node frame was taken (NODE_PROGRESS included), none of it is an
# incident of the central daemon's.
metric_is frames_rejected_total 0 || fail "the central daemon rejected frames: $(grep -i refus "$T/daemon.log")"
metric_at_least frames_received_total 10 || fail "the central daemon counted no node frames"
[ ! -e "$T/incidents/$JOB" ] || fail "the central daemon opened an incident for the node's ranks"
echo PASS
