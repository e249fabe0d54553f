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
#   - SIGTERM ends the daemon within seconds, flood or not;
#   - and within its stop deadline (10 s) even when its event loop is
#     blocked and never runs the signal's callback: here the reader of its
#     stderr stops reading (a stalled journald), so the loop blocks in
#     write() once the pipe is full.
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

# The loop blocked: a fresh daemon whose stderr goes to a one-page pipe
# whose reader stops reading. Frames of unknown types, each logged once (a
# new limit and offender pair), fill the pipe, and the loop blocks writing
# the next line. SIGTERM must still end it within the deadline, through
# the SIGALRM that the signal handler itself arms.
mkfifo "$T/log.fifo"
python3 "$ROOT/tests/e2e/log_pipe.py" "$T/log.fifo" "$T/stalled.log" "$T/stall" &
track_pid $!
rm -f "$T/ports.json"
"$BUILD_DIR/bin/flightrecd" --listen 127.0.0.1:0 --http 127.0.0.1:0 --dump-dir "$T/incidents2" \
	--ports-file "$T/ports.json" >/dev/null 2>"$T/log.fifo" &
DAEMON_PID=$!
wait_for 10 test -s "$T/ports.json" || fail "the second daemon did not write its ports file"
LISTEN_PORT=$(jq -r .listen "$T/ports.json")
HTTP=http://127.0.0.1:$(jq -r .http "$T/ports.json")
touch "$T/stall"
wait_for 5 grep -q "stopped reading" "$T/stalled.log" || fail "the log reader did not stall"
python3 - "$LISTEN_PORT" <<'PY' &
import socket, struct, sys, time
port = int(sys.argv[1])
for t in range(1000, 1400):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=1)
        s.sendall(struct.pack("<IHHII", 0x43455246, 1, t, 0, 0))
        s.close()
    except OSError:
        time.sleep(0.05)
PY
track_pid $!
# The loop's thread (the process's first) is then blocked in write(2) on
# stderr: /proc/PID/syscall names the system call it sleeps in and its
# first argument. (/healthz cannot tell: the loop blocks holding the lock.)
case $(uname -m) in
x86_64) write_nr=1 ;;
aarch64) write_nr=64 ;;
*) write_nr= ;;
esac
loop_in_write() {
	local nr fd rest
	read -r nr fd rest <"/proc/$DAEMON_PID/syscall" 2>/dev/null || return 1
	[ "$nr" = "$write_nr" ] && [ "$fd" = 0x2 ]
}
if [ -n "$write_nr" ]; then
	wait_for 20 loop_in_write ||
		fail "the event loop did not block on the stalled log: $(cat /proc/$DAEMON_PID/syscall)"
	# Still blocked a moment later: not a write that was about to return.
	wait_for 3 sh -c "[ \$((\$SECONDS - $SECONDS)) -ge 1 ]"
	loop_in_write || fail "the event loop was not blocked on the stalled log"
else
	# Elsewhere: /healthz stops answering 200 (stale, or waiting on the lock).
	wait_for 20 sh -c "! curl -sf -o /dev/null --max-time 1 $HTTP/healthz" ||
		fail "the event loop did not block on the stalled log"
fi
kill -TERM "$DAEMON_PID"
start=$SECONDS
wait_for 15 sh -c "! kill -0 $DAEMON_PID 2>/dev/null" ||
	fail "the daemon with a blocked loop did not end within 15 s of SIGTERM (stop deadline 10 s)"
wait "$DAEMON_PID"
rc=$?
DAEMON_PID=
[ "$rc" -eq 1 ] || fail "the daemon with a blocked loop exited $rc, want 1 (the stop deadline's exit)"
echo "PASS stop deadline: a daemon whose loop was blocked ended $((SECONDS - start)) s after SIGTERM"
