#!/usr/bin/env bash
# The daemon's limits under abuse, set from a --config file and reloaded on
# SIGHUP, against raw agents (abuse_agent.py) that prove the token:
#   - 200 reconnects of a rank over --max-job-connections, 50 frames over
#     --max-frame-size and 200 connections over --max-connections are all
#     refused and counted in /metrics, and each offender is logged once;
#   - a job whose hang keeps moving opens --max-incidents-per-hour
#     incidents, the rest are suppressed, counted and logged once;
#   - POST /v1/jobs/<job>/dump over the rate answers 429 with Retry-After;
#   - SIGHUP applies new limits: the job may open an incident again, a
#     second rank may connect.
. "$(dirname "$0")/lib.sh"
trap '' PIPE

AGENT_PY=$ROOT/tests/e2e/abuse_agent.py

log_count() { grep -c -- "$1" "$T/daemon.log"; }
# at_most_lines PATTERN N WHAT: the log holds at least one and at most N lines matching.
at_most_lines() {
	local n
	n=$(log_count "$1")
	[ "$n" -ge 1 ] && [ "$n" -le "$2" ] ||
		fail "$3: $n log lines match '$1', want 1 to $2"
}
post_dump() { # post_dump JOB: the status; headers in $T/post.h, body in $T/post.json
	curl -s -D "$T/post.h" -o "$T/post.json" -w '%{http_code}' --max-time 10 -X POST \
		-H "Authorization: Bearer $TOKEN_VALUE" "$HTTP/v1/jobs/$1/dump"
}
post_is() { [ "$(post_dump "$1")" = "$2" ]; }
# hold NAME JOB RANK WORLD: a connected rank that takes commands on fd $NAME.
hold() {
	local name=$1 fd pid
	mkfifo "$T/$name.ctl"
	python3 "$AGENT_PY" "$LISTEN_PORT" "$TOKEN" hold "$2" "$3" "$4" <"$T/$name.ctl" \
		>"$T/$name.out" 2>&1 &
	pid=$!
	track_pid "$pid"
	exec {fd}>"$T/$name.ctl"
	printf -v "$name" '%s' "$fd"
	wait_for 10 grep -q connected "$T/$name.out" || fail "agent $name did not connect: $(cat "$T/$name.out")"
}
job_connected() { # job_connected JOB N
	http_get "/v1/jobs/$1" 2>/dev/null | jq -e --argjson n "$2" '.ranks | map(select(.state == "connected")) | length == $n' >/dev/null
}
incident_closed() { # incident_closed N: N incidents opened, none being collected
	metric_is incidents_total "$1" && metric_is incidents_open 0
}

TOKEN_VALUE=flightrec-e2e-$RANDOM$RANDOM-0123456789abcdef
# The reads of the API carry it (a daemon with a token wants it for job data).
HTTP_TOKEN=$TOKEN_VALUE
TOKEN=$T/token
printf '%s\n' "$TOKEN_VALUE" >"$TOKEN"
chmod 600 "$TOKEN"

cat >"$T/flightrecd.conf" <<EOF
# The limits under test; the command line gives the rest.
max-connections = 4
max-job-connections = 1
max-frame-size = 262229
max-incidents-per-hour = 2
EOF
start_daemon --timeout 1 --heartbeat-timeout 120 --dump-deadline 1 --token-file "$TOKEN" \
	--config "$T/flightrecd.conf"
grep -q "max-connections 4, max-job-connections 1, max-frame-size 262229, max-incidents-per-hour 2" \
	"$T/daemon.log" || fail "the config file's limits are not in effect"

# 1. --max-job-connections 1: rank 0 of JA holds the job's one place; rank 1
# tries 200 times.
JA=$JOB-a
hold HA "$JA" 0 2
n=$(python3 "$AGENT_PY" "$LISTEN_PORT" "$TOKEN" join "$JA" 1 2 200) || fail "join agent failed"
[ "$n" = 200 ] || fail "$n of 200 connections over --max-job-connections were closed"
metric_is job_connections_rejected_total 200 ||
	fail "job_connections_rejected_total $(metric job_connections_rejected_total), want 200"
metric_is connections_rejected_total 200 ||
	fail "connections_rejected_total $(metric connections_rejected_total), want 200"
at_most_lines "job $JA: refusing the connection of rank 1" 2 "--max-job-connections"
job_connected "$JA" 1 || fail "rank 0 of $JA lost its place"

# 2. --max-frame-size: a rank that reconnects and sends a frame too big, 50 times.
JB=$JOB-b
n=$(python3 "$AGENT_PY" "$LISTEN_PORT" "$TOKEN" oversize "$JB" 0 1 50 300000) ||
	fail "oversize agent failed"
[ "$n" = 50 ] || fail "$n of 50 connections sending frames over --max-frame-size were closed"
metric_is frames_oversized_total 50 ||
	fail "frames_oversized_total $(metric frames_oversized_total), want 50"
metric_is frames_rejected_total 50 || fail "frames_rejected_total $(metric frames_rejected_total), want 50"
at_most_lines "rejected frame from .*(job $JB rank 0): progress: frame of 300000 bytes over --max-frame-size 262229" \
	2 "--max-frame-size"

# 3. --max-connections 4: four ranks connected, then 200 more connections.
JC=$JOB-c
hold HC "$JC" 0 1
hold HD "$JOB-d" 0 1
hold HE "$JOB-e" 0 1
wait_for 10 metric_is connections 4 || fail "connections $(metric connections), want 4"
n=$(python3 "$AGENT_PY" "$LISTEN_PORT" - connect 200) || fail "connect agent failed"
[ "$n" = 200 ] || fail "$n of 200 connections over --max-connections were closed"
metric_is connections_rejected_total 400 ||
	fail "connections_rejected_total $(metric connections_rejected_total), want 400"
at_most_lines "refusing the connection from 127.0.0.1:[0-9]*: 4 agent connections are open" 2 \
	"--max-connections"

# 4. --max-incidents-per-hour 2: JC's hang moves on four times; two
# incidents, two suppressed, one line.
for seq in 1 2; do
	echo "progress $seq" >&"$HC"
	wait_for 20 incident_closed "$seq" || fail "incident $seq of $JC not opened and closed"
done
echo "progress 3" >&"$HC"
wait_for 10 metric_is incidents_suppressed_total 1 ||
	fail "incidents_suppressed_total $(metric incidents_suppressed_total), want 1"
echo "progress 4" >&"$HC"
wait_for 10 metric_is incidents_suppressed_total 2 ||
	fail "incidents_suppressed_total $(metric incidents_suppressed_total), want 2"
metric_is incidents_total 2 || fail "incidents_total $(metric incidents_total), want 2"
[ "$(ls "$T/incidents/$JC" | wc -l)" = 2 ] || fail "incident directories: $(ls "$T/incidents/$JC")"
at_most_lines "job $JC: incident (timeout) suppressed: over --max-incidents-per-hour 2" 1 \
	"the incident rate"

# 5. POST /v1/jobs/<job>/dump over the rate: 429, Retry-After, counted.
status=$(post_dump "$JC")
[ "$status" = 429 ] || fail "POST over the rate: status $status: $(cat "$T/post.json")"
retry=$(tr -d '\r' <"$T/post.h" | awk -F': ' 'tolower($1) == "retry-after" {print $2}')
[ -n "$retry" ] && [ "$retry" -ge 1 ] && [ "$retry" -le 1800 ] || fail "Retry-After '$retry'"
expect ".retry_after_s == $retry and (.error | test(\"max-incidents-per-hour\"))" "$T/post.json"
metric_is incidents_suppressed_total 3 ||
	fail "incidents_suppressed_total $(metric incidents_suppressed_total), want 3"
metric_is incidents_total 2 || fail "the refused POST opened an incident"

# 6. SIGHUP: the new limits apply without a restart.
cat >"$T/flightrecd.conf" <<EOF
max-connections = 8
max-job-connections = 2
max-frame-size = 262229
max-incidents-per-hour = 3600
max-dump-size = 1048576
max-memory = 536870912
EOF
kill -HUP "$DAEMON_PID"
wait_for 10 grep -q "reload: max-incidents-per-hour 2 -> 3600" "$T/daemon.log" ||
	fail "the reload did not apply max-incidents-per-hour"
grep -q "reload: max-job-connections 1 -> 2" "$T/daemon.log" ||
	fail "the reload did not apply max-job-connections"
grep -q "reload: max-dump-size 67108864 -> 1048576" "$T/daemon.log" ||
	fail "the reload did not apply max-dump-size"
grep -Eq "reload: max-memory [0-9]+ -> 536870912" "$T/daemon.log" ||
	fail "the reload did not apply max-memory"
# 3600 an hour refills one a second.
wait_for 10 post_is "$JC" 202 || fail "POST after the reload: $(cat "$T/post.json")"
hold HA1 "$JA" 1 2
wait_for 10 job_connected "$JA" 2 || fail "rank 1 of $JA not connected after the reload"
metric_is job_connections_rejected_total 200 || fail "rank 1 refused after the reload"

suppressed=$(metric log_lines_suppressed_total)
[ "$suppressed" -ge 400 ] || fail "log_lines_suppressed_total $suppressed, want at least 400"
echo "PASS limits under abuse: job connections, frame size, connections, incident rate, 429, reload"
