#!/usr/bin/env bash
# Connections that never say HELLO, from many addresses (issue 16, item 4;
# review finding 5): a local user can bind every address of 127.0.0.0/8,
# so the per-address cap alone does not keep --max-connections free.
#   - at most half of --max-connections wait for their HELLO at once: the
#     one waiting longest is closed for a newcomer (counted);
#   - at --max-connections, a newcomer closes the connection waiting
#     longest for its HELLO instead of being refused: ranks of a real job
#     still register, while 30 addresses keep 120 idle connections coming
#     and the HELLO deadline (60 s here) frees nothing;
#   - registered ranks are never closed for a newcomer.
. "$(dirname "$0")/lib.sh"

IDLE=$ROOT/tests/e2e/idle_conns.py
MAX=100

start_daemon --max-connections $MAX --max-pending-per-address 64 --hello-timeout 60 \
	--heartbeat-timeout 300 --timeout 300

sources=()
for i in $(seq 10 39); do sources+=("127.0.0.$i"); done
start_flood() {
	python3 "$IDLE" flood "$LISTEN_PORT" 120 "${sources[@]}" >"$T/flood.out" 2>&1 &
	FLOOD_PID=$!
	track_pid $FLOOD_PID
	wait_for 10 grep -q flooding "$T/flood.out" || fail "the flood did not start: $(cat "$T/flood.out")"
}

# 1. 30 addresses, 4 idle connections each: no more than half of
# --max-connections wait for their HELLO, the oldest closed for newer ones.
start_flood
wait_for 20 metric_at_least pending_evicted_total 50 ||
	fail "connections waiting for their HELLO were not closed for newer ones: pending_evicted_total $(metric pending_evicted_total)"
for _ in 1 2 3 4 5; do
	n=$(metric connections_pending)
	[ -n "$n" ] && [ "$n" -le $((MAX / 2)) ] ||
		fail "connections_pending is '$n' under the flood, want at most $((MAX / 2))"
done
stop_helpers
stop_daemon

# 2. A fresh daemon: 60 ranks register (two jobs of 30: a burst of
# connections accepted in one turn of the loop may not exceed the half
# either); the flood comes back and fills the rest: the daemon is at
# --max-connections (60 ranks, 40 idle connections).
start_daemon --max-connections $MAX --max-pending-per-address 64 --hello-timeout 60 \
	--heartbeat-timeout 300 --timeout 300
for j in a b; do
	python3 "$ROOT/tests/e2e/many_ranks.py" "$LISTEN_PORT" "$JOB-$j" 30 >"$T/ranks-$j.out" 2>&1 &
	track_pid $!
	wait_for 20 grep -q "up 30" "$T/ranks-$j.out" || fail "the 30 ranks did not connect: $(cat "$T/ranks-$j.out")"
	wait_for 10 ranks_connected "$JOB-$j" 30 || fail "the 30 ranks of $JOB-$j are not all connected"
done
start_flood
wait_for 10 metric_is connections $MAX || fail "the daemon is not at --max-connections: $(metric connections) open"

# 3. A real job's ranks still get in, in place of idle connections (the
# HELLO deadline, 60 s, frees nothing meanwhile), and no registered rank
# is closed for them.
evicted=$(metric pending_evicted_total)
start_job 2 --scenario mismatch --culprit 1 --at 1000
wait_for 30 ranks_connected 2 || fail "the job's ranks could not register at --max-connections under the flood"
ranks_connected "$JOB-a" 30 && ranks_connected "$JOB-b" 30 ||
	fail "registered ranks were closed for newcomers"
metric_at_least pending_evicted_total $((evicted + 1)) || fail "pending_evicted_total did not grow"
grep -q "no hello after .* a newer connection takes its place" "$T/daemon.log" ||
	fail "closing a connection for a newer one was not logged"
size=$(stat -c %s "$T/daemon.log")
[ "$size" -lt 65536 ] || fail "the log grew to $size bytes under the flood"
echo "PASS pending flood: at most $((MAX / 2)) without HELLO, ranks register at --max-connections, $(metric pending_evicted_total) idle connections closed for newer ones"
