#!/usr/bin/env bash
# flightrecd as a service: a bad --config file stops it at startup (exit 2,
# naming the file and line); under a stand-in for systemd's notify socket it
# says READY=1 only once its ports file exists and pings the watchdog from
# its loop; the config file's settings are used and the command line
# overrides them; SIGHUP applies a new timeout (a hang invisible under the
# old one is diagnosed), ignores a bad file and refuses to rebind; SIGTERM
# during an incident waiting on a frozen rank leaves its manifest marked
# incomplete and no temporary file, says STOPPING=1 and exits 0. An
# abstract notify address (@name) works too.
. "$(dirname "$0")/lib.sh"

LISTENERS=
stop_listeners() {
	local p
	for p in $LISTENERS; do kill "$p" 2>/dev/null && { wait "$p"; } 2>/dev/null; done
	LISTENERS=
}
trap 'st=$?; stop_listeners; (exit $st); cleanup' EXIT

# listen ADDR OUT: a stand-in for systemd's notify socket at ADDR (a path,
# or @name for an abstract address) writing each datagram's lines to OUT; a
# READY=1 line gets " ports=yes" when the ports file existed as it came.
listen() {
	rm -f "$2"
	python3 -c '
import os, socket, sys
addr, out, ports = sys.argv[1:4]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + addr[1:] if addr.startswith("@") else addr)
open(out + ".bound", "w").close()
with open(out, "a", buffering=1) as f:
    while True:
        for line in s.recv(4096).decode().splitlines():
            if line == "READY=1":
                line += " ports=" + ("yes" if os.path.exists(ports) and os.path.getsize(ports) else "no")
            f.write(line + "\n")
' "$1" "$2" "$T/ports.json" &
	LISTENERS="$LISTENERS $!"
	wait_for 10 test -e "$2.bound" || fail "the notify listener did not bind $1"
}
count() { grep -c "^$1" "$2" 2>/dev/null; }
at_least() { [ "$(count "$1" "$2")" -ge "${3:-1}" ]; }
logged() { grep -q -- "$1" "$T/daemon.log"; }

# stop_daemon_rc: SIGTERM, a bounded wait for the exit, its status in DAEMON_RC.
stop_daemon_rc() {
	kill -TERM "$DAEMON_PID"
	wait_for 20 sh -c "! kill -0 $DAEMON_PID 2>/dev/null" || fail "the daemon did not exit within 20 s of SIGTERM"
	wait "$DAEMON_PID"
	DAEMON_RC=$?
	DAEMON_PID=
}

# 1. A bad config file at startup: exit 2, the file and line named.
bad_start() { # bad_start WANT_IN_MESSAGE: runs the daemon on $T/bad.conf
	local rc=0
	timeout 10 "$BIN/flightrecd" --config "$T/bad.conf" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
		--dump-dir "$T/incidents" >"$T/bad.log" 2>&1 || rc=$?
	[ "$rc" -eq 2 ] || fail "a bad config file ($1) exited $rc, want 2: $(cat "$T/bad.log")"
	grep -qF -- "$1" "$T/bad.log" || fail "want '$1' in the error, got: $(cat "$T/bad.log")"
}
printf '# settings\ntimeout = 5\n\nbogus-key = 1\n' >"$T/bad.conf"
bad_start "$T/bad.conf:4: unknown setting 'bogus-key'"
printf 'heartbeat-timeout = 10\ntimeout = soon\n' >"$T/bad.conf"
bad_start "$T/bad.conf:2: invalid value for timeout: 'soon'"
printf 'timeout 5\n' >"$T/bad.conf"
bad_start "$T/bad.conf:1: expected 'key = value'"
rm -f "$T/bad.conf"
bad_start "$T/bad.conf: cannot read"

# 2. Under a notify socket, with a config file the command line partly
# overrides; the file names the addresses and directories too.
cat >"$T/flightrecd.conf" <<EOF
listen = 127.0.0.1:0
http = 127.0.0.1:0
dump-dir = $T/incidents
ports-file = $T/ports.json
# The hang below is invisible under this timeout until a reload lowers it.
timeout = 600   # ten minutes
heartbeat-timeout = 2
dump-deadline = 5
max-connections = 64
EOF
listen "$T/notify.sock" "$T/notify.log"
NOTIFY_SOCKET=$T/notify.sock WATCHDOG_USEC=1000000 \
	"$BIN/flightrecd" --config "$T/flightrecd.conf" --dump-deadline 60 >>"$T/daemon.log" 2>&1 &
DAEMON_PID=$!
wait_for 10 test -s "$T/ports.json" || fail "daemon did not write the ports file its config file names"
LISTEN_PORT=$(jq -r .listen "$T/ports.json")
HTTP=http://127.0.0.1:$(jq -r .http "$T/ports.json")

wait_for 5 at_least READY=1 "$T/notify.log" || fail "no READY=1 on the notify socket"
grep -q '^READY=1 ports=yes$' "$T/notify.log" || fail "READY=1 came before the ports file: $(cat "$T/notify.log")"
grep -q "^MAINPID=$DAEMON_PID\$" "$T/notify.log" || fail "no MAINPID=$DAEMON_PID: $(cat "$T/notify.log")"
# Pings every 0.5 s; the two after READY=1 must come within about 2 s.
pings=$(count WATCHDOG=1 "$T/notify.log")
wait_for 3 at_least WATCHDOG=1 "$T/notify.log" $((pings + 2)) ||
	fail "fewer than 2 WATCHDOG=1 within 3 s: $(cat "$T/notify.log")"
http_get /healthz >/dev/null || fail "GET /healthz failed"

logged "settings (startup, config $T/flightrecd.conf):.* timeout 600 s, heartbeat-timeout 2 s, dump-deadline 60 s, .*max-connections 64" ||
	fail "the startup settings do not show the config file's values under the command line's"
logged "the command line sets dump-deadline over $T/flightrecd.conf" ||
	fail "the setting the command line overrides was not named"

# 3. SIGHUP: a bad file keeps the settings in effect.
cp "$T/flightrecd.conf" "$T/good.conf"
printf 'timeout = 2\nmax-connections = many\n' >"$T/flightrecd.conf"
kill -HUP "$DAEMON_PID"
wait_for 5 logged "not applied; the settings in effect stay" || fail "a bad file on SIGHUP was not refused"
logged "$T/flightrecd.conf:2: invalid value for max-connections: 'many'" || fail "the reload error names no line"
logged "reload: timeout" && fail "a bad file's timeout was applied"

# A good one: the timeout applies, a new agent address is refused.
# Nor does a daemon turn into a node daemon (upstream) or bind the node
# socket (agent-socket) on a reload.
sed -e 's/^timeout = 600.*/timeout = 2/' -e 's/^listen = .*/listen = 127.0.0.1:1/' "$T/good.conf" >"$T/flightrecd.conf"
printf 'upstream = 127.0.0.1:1\nagent-socket = %s\n' "$T/agent.sock" >>"$T/flightrecd.conf"
kill -HUP "$DAEMON_PID"
wait_for 5 logged "settings (reload," || fail "the reload did not log the new settings"
logged "reload: timeout 600 s -> 2 s" || fail "the timeout change was not logged"
logged "reload: listen changed from 127.0.0.1:0 to 127.0.0.1:1: needs a restart, ignored" ||
	fail "the listen change was not refused"
logged "reload: upstream changed from (none) to 127.0.0.1:1: needs a restart, ignored" ||
	fail "the upstream change was not refused"
logged "reload: agent-socket changed from (none) to $T/agent.sock: needs a restart, ignored" ||
	fail "the agent-socket change was not refused"
[ ! -e "$T/agent.sock" ] || fail "a reload bound the agent socket"
logged "reload: dump-deadline" && fail "the command line's --dump-deadline was overridden by the file"
at_least RELOADING=1 "$T/notify.log" 2 || fail "no RELOADING=1 around the reloads: $(cat "$T/notify.log")"
[ "$(count READY=1 "$T/notify.log")" -ge 3 ] || fail "no READY=1 after the reloads"

# Rank 1 of 2 never returns from a computation: under the old timeout no
# incident would open for ten minutes; under the new one it does.
start_job 2 --scenario compute --culprit 1 --at 3
wait_incident 40
expect '.reason == "timeout" and .incomplete == false' "$INCIDENT/manifest.json"
expect '.trigger.waited_s > 2 and .trigger.waited_s < 60' "$INCIDENT/manifest.json"
stop_job

# 4. SIGTERM while an incident waits on a frozen rank (the dump deadline is
# 60 s): the manifest is written, marked incomplete, nothing half-written.
JOB=$JOB-frozen
start_job 2 --scenario freeze --culprit 1 --at 3
wait_for 40 sh -c "ls '$T/incidents/$JOB'/*/rank-0.json >/dev/null 2>&1" ||
	fail "no incident with rank 0's dump for the frozen job"
incident_ready && fail "the incident closed before SIGTERM: $(cat "$INCIDENT/manifest.json")"
stop_daemon_rc
[ "$DAEMON_RC" -eq 0 ] || fail "SIGTERM: exit status $DAEMON_RC, want 0"
incident_ready || fail "SIGTERM left the open incident without a manifest"
expect '.incomplete == true' "$INCIDENT/manifest.json"
expect '.ranks[] | select(.rank == 1) | .answer == "unresponsive" and .dump == null' "$INCIDENT/manifest.json"
expect '.ranks[] | select(.rank == 0) | .answer == "received"' "$INCIDENT/manifest.json"
tmp=$(find "$T/incidents" -name '*.tmp*')
[ -z "$tmp" ] || fail "half-written files left: $tmp"
grep -q '^STOPPING=1$' "$T/notify.log" || fail "no STOPPING=1: $(cat "$T/notify.log")"
logged "incident .* closed (incomplete)" || fail "the incomplete incident was not logged"
stop_job

# 5. An abstract notify address, and no watchdog for another pid.
listen @flightrec-e2e-$$ "$T/notify2.log"
export NOTIFY_SOCKET=@flightrec-e2e-$$ WATCHDOG_USEC=200000 WATCHDOG_PID=1
start_daemon
unset NOTIFY_SOCKET WATCHDOG_USEC WATCHDOG_PID
wait_for 5 at_least READY=1 "$T/notify2.log" || fail "no READY=1 on an abstract notify address"
stop_daemon_rc
[ "$DAEMON_RC" -eq 0 ] || fail "exit status $DAEMON_RC, want 0"
grep -q '^STOPPING=1$' "$T/notify2.log" || fail "no STOPPING=1 on the abstract address"
grep -q '^WATCHDOG=1' "$T/notify2.log" && fail "watchdog pings although WATCHDOG_PID names another process"

# 6. A node daemon (flightrecd-node.service) whose central daemon is not
# there: it is ready for its agents all the same (READY=1, the socket
# bound), pings the watchdog while it tries upstream, and stops cleanly.
listen "$T/notify3.sock" "$T/notify3.log"
mkdir -m 0755 "$T/run"
NOTIFY_SOCKET=$T/notify3.sock WATCHDOG_USEC=1000000 start_daemon --upstream "127.0.0.1:$(free_port)" \
	--agent-socket "$T/run/agent.sock"
wait_for 5 at_least READY=1 "$T/notify3.log" || fail "a node daemon without its central daemon never said READY=1"
test -S "$T/run/agent.sock" || fail "the node daemon's agent socket is not there"
wait_for 3 at_least WATCHDOG=1 "$T/notify3.log" 2 || fail "the node daemon does not ping the watchdog"
wait_for 10 logged "upstream 127.0.0.1:.*trying again with backoff" || fail "the node daemon does not say it is retrying upstream"
stop_daemon_rc
[ "$DAEMON_RC" -eq 0 ] || fail "the node daemon's exit status $DAEMON_RC, want 0"
[ ! -e "$T/run/agent.sock" ] || fail "the node daemon left its agent socket behind"

echo "PASS service: notify READY/WATCHDOG/STOPPING, config file and SIGHUP, clean SIGTERM mid-incident, node daemon ready without its central daemon"
