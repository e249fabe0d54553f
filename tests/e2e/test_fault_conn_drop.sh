#!/usr/bin/env bash
# One rank's connection is cut (by a proxy between the agents and the
# daemon, as a network failure would) and comes back, several times, while
# the job runs normally: the agent reconnects and resynchronises (the
# daemon still knows its communicators and its progress goes on from where
# it was), and no incident opens: a dropped connection is not a hang.
. "$(dirname "$0")/lib.sh"

completed() { # completed RANK: its last completed collective on world, as the daemon sees it
	http_get "/v1/jobs/$JOB" 2>/dev/null |
		jq -r --argjson r "$1" '.ranks[] | select(.rank == $r) | .comms.world.last_completed // 0' 2>/dev/null
}
progressed() { # progressed RANK SEQ: the rank completed past SEQ
	[ "$(completed "$1")" -gt "$2" ] 2>/dev/null
}
seen() { # seen N PATTERN FILE: PATTERN is on exactly N lines of FILE
	[ "$(grep -c -- "$2" "$3" 2>/dev/null)" -eq "$1" ]
}

start_daemon --timeout 2 --heartbeat-timeout 10
mkdir "$T/proxy"
python3 "$(dirname "$0")/tcp_proxy.py" "$T/proxy.port" "$LISTEN_PORT" "$T/proxy" >"$T/proxy.log" 2>&1 &
track_pid $!
wait_for 10 test -s "$T/proxy.port" || fail "the proxy did not start"

AGENT_ADDR=127.0.0.1:$(cat "$T/proxy.port") start_job 4 --scenario none
wait_for 20 ranks_connected 4 || fail "ranks did not connect through the proxy"
wait_for 20 progressed 2 0 || fail "rank 2 reported no progress"

for cut in 1 2 3; do
	before=$(completed 2)
	touch "$T/proxy/cut-2"
	wait_for 10 seen "$cut" '^cut 2 ' "$T/proxy.log" ||
		fail "cut $cut: the proxy did not cut rank 2: $(cat "$T/proxy.log")"
	wait_for 10 seen "$cut" "job $JOB rank 2 disconnected without saying goodbye" "$T/daemon.log" ||
		fail "cut $cut: the daemon did not see rank 2 go"
	# The agent comes back by itself, through a new connection.
	wait_for 20 seen $((cut + 1)) '^hello 2 ' "$T/proxy.log" ||
		fail "cut $cut: rank 2 did not reconnect: $(cat "$T/proxy.log")"
	wait_for 20 ranks_connected 4 || fail "cut $cut: rank 2 is not connected again: $(http_get "/v1/jobs/$JOB")"
	# Its progress goes on from where it was, not from zero.
	wait_for 20 progressed 2 "$before" || fail "cut $cut: rank 2's progress did not go past $before"
done
expect '.communicators[] | select(.id == "world") | .members == [0,1,2,3]' <(http_get "/v1/jobs/$JOB")

# Past --timeout and the disconnect grace: some 400 steps of 5 ms, timed
# by the job itself.
last=$(completed 2)
wait_for 30 progressed 2 $((last + 400)) || fail "the job stopped progressing after the cuts"
for r in 0 1 3; do
	progressed "$r" "$last" || fail "rank $r stopped progressing"
done
[ -e "$T/incidents/$JOB" ] && fail "a dropped connection opened an incident: $(ls -R "$T/incidents")"
[ "$(metric incidents_total)" = 0 ] || fail "incidents_total $(metric incidents_total), want 0"
[ "$(metric frames_rejected_total)" = 0 ] || fail "frames were rejected"
expect '.jobs[] | select(.job == "'"$JOB"'") | .status == "running"' <(http_get /v1/jobs)
ranks_connected 4 || fail "not every rank is connected at the end"
echo "PASS fault_conn_drop: rank 2's connection cut 3 times, reconnected each time, no incident"
