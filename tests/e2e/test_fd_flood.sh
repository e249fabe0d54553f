#!/usr/bin/env bash
# A flood of idle agent connections against a daemon with few descriptors
# (issue 16, item 3): soft RLIMIT_NOFILE 64, hard 320, and 400 idle
# connections held open (each reopened as soon as the daemon closes it).
#   - the daemon raises its soft limit to the hard one and holds
#     --max-connections to what it allows, and says so;
#   - the hang of a job connected before the flood still gets its incident,
#     manifest.json and every rank's dump;
#   - /healthz answers meanwhile, and the log stays small (no line per
#     refused connection);
#   - SIGTERM ends the daemon within seconds, flood or not.
. "$(dirname "$0")/lib.sh"

IDLE=$ROOT/tests/e2e/idle_conns.py

# The daemon alone runs under the low limit: the flood needs more.
mkdir -p "$T/wrap"
cat >"$T/wrap/flightrecd" <<WRAP
#!/bin/sh
ulimit -Sn 64 && ulimit -Hn 320 || exit 99
exec "$BIN/flightrecd" "\$@"
WRAP
chmod +x "$T/wrap/flightrecd"
BIN=$T/wrap start_daemon --timeout 4 --heartbeat-timeout 30 --dump-deadline 10

grep -q "max-connections 65536 held to 80: RLIMIT_NOFILE is 320" "$T/daemon.log" ||
	fail "the daemon did not raise its descriptor limit and size --max-connections to it"

start_job 2 --scenario mismatch --culprit 1 --at 4
wait_for 20 ranks_connected 2 || fail "the job's ranks did not connect"

python3 "$IDLE" flood "$LISTEN_PORT" 400 >"$T/flood.out" 2>&1 &
track_pid $!
wait_for 10 grep -q flooding "$T/flood.out" || fail "the flood did not start: $(cat "$T/flood.out")"
wait_for 10 metric_at_least connections_rejected_total 100 ||
	fail "the flood is not over --max-connections: $(metric connections_rejected_total) refused"

# The incident opens under the flood, and is written whole.
wait_incident 40
expect '.ranks | length == 2' "$INCIDENT/manifest.json"
[ -s "$INCIDENT/rank-0.json" ] && [ -s "$INCIDENT/rank-1.json" ] ||
	fail "the ranks' dumps were not written under the flood: $(ls "$INCIDENT")"
metric_is incident_write_errors_total 0 || fail "incident files failed: $(metric incident_write_errors_total)"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "$HTTP/healthz")
[ "$code" = 200 ] || fail "/healthz answered $code under the flood, want 200"

size=$(stat -c %s "$T/daemon.log")
[ "$size" -lt 65536 ] || fail "the log grew to $size bytes under the flood"

# SIGTERM under the flood: gone within 12 s.
kill -TERM "$DAEMON_PID"
start=$SECONDS
wait_for 12 sh -c "! kill -0 $DAEMON_PID 2>/dev/null" ||
	fail "the daemon did not end within 12 s of SIGTERM under the flood"
{ wait "$DAEMON_PID"; } 2>/dev/null
DAEMON_PID=
grep -q "^flightrecd: stopped" "$T/daemon.log" || fail "the daemon did not stop cleanly"
echo "PASS descriptor flood: incident written, /healthz up, log $size bytes, stopped in $((SECONDS - start)) s"
