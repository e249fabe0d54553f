#!/usr/bin/env bash
# Agents over the daemon's Unix socket (issue 18's node transport):
#  1. flightrecd --agent-socket makes a socket of mode 0666 in a trusted
#     directory; a job with FLIGHTREC_ADDR=unix:PATH registers over it, its
#     ranks show the uid the kernel gives (0 here) in GET /v1/jobs/<job>,
#     the log names them "unix:uid=0,pid=N", and a planted hang is
#     diagnosed with the right culprit from the dumps sent over it;
#  2. with FLIGHTREC_ADDR unset, an agent finds the node socket
#     (FLIGHTREC_NODE_SOCKET stands in for /run/flightrec/agent.sock);
#  3. a socket planted by another user (nobody) is refused by the agent,
#     given or found, with a clear line on stderr, and never connected to;
#     the daemon will not remove it either;
#  4. a daemon refuses to start with its socket in a world-writable
#     directory that is not sticky, naming the directory, and refuses a
#     socket another live daemon listens on;
#  5. a socket left by a daemon killed with SIGKILL is replaced on restart,
#     and a clean stop removes the socket.
. "$(dirname "$0")/lib.sh"
SLEEPER=$BUILD_DIR/tests/mpi_sleeper
[ -x "$SLEEPER" ] || fail "$SLEEPER not built (make tests)"
[ "$(id -u)" -eq 0 ] || { echo "SKIP unix_socket: needs root to plant another user's socket"; exit 0; }
NOBODY=$(id -u nobody) || fail "no user nobody"

# The helper running as nobody must reach its directory under $T.
chmod 0711 "$T"
mkdir -m 0755 "$T/run"
SOCK=$T/run/agent.sock

# sleeper_cmd JOB SECONDS [VAR=value...]: the command line of one rank of
# the sleeper under the agent, FLIGHTREC_ADDR unset unless given.
sleeper_cmd() {
	local job=$1 secs=$2 v
	shift 2
	SLEEPER_CMD=(env -u FLIGHTREC_ADDR "$@" timeout 60 mpirun -np 1 -x LD_PRELOAD="$PRELOAD"
		${ASAN_OPTIONS:+-x ASAN_OPTIONS} -x FLIGHTREC_JOB="$job" -x FLIGHTREC_DUMP_DIR="$T/local")
	for v in "$@"; do SLEEPER_CMD+=(-x "${v%%=*}"); done
	SLEEPER_CMD+=("$SLEEPER" sleep "$secs")
}

# run_sleeper JOB SECONDS [VAR=value...]: in the foreground (bounded), its
# output in $T/sleeper.log.
run_sleeper() {
	sleeper_cmd "$@"
	"${SLEEPER_CMD[@]}" >"$T/sleeper.log" 2>&1
}

# start_sleeper JOB SECONDS [VAR=value...]: in a session of its own, as
# start_job runs a job (JOB_PID; stop_job ends it).
start_sleeper() {
	sleeper_cmd "$@"
	rm -f "$T/job.pid"
	setsid -f sh -c 'echo $$ >"$0/job.pid"; exec "$@"' "$T" "${SLEEPER_CMD[@]}" \
		>"$T/sleeper.log" 2>&1
	wait_for 10 test -s "$T/job.pid" || fail "the sleeper did not start"
	JOB_PID=$(cat "$T/job.pid")
}

# daemon_refuses PATH WHY: a daemon given --agent-socket PATH exits at
# startup (within 10 s), saying "cannot use --agent-socket PATH: WHY".
daemon_refuses() {
	local rc
	timeout 10 "$BIN/flightrecd" --listen 127.0.0.1:0 --http 127.0.0.1:0 --dump-dir "$T/incidents" \
		--agent-socket "$1" >"$T/refused.log" 2>&1
	rc=$?
	[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "a daemon ran (exit $rc) with --agent-socket $1 ($2)"
	grep -qF "cannot use --agent-socket $1: $2" "$T/refused.log" ||
		fail "the daemon did not say '$2': $(cat "$T/refused.log")"
}

# 1. The job over the socket.
start_daemon --timeout 2 --heartbeat-timeout 10 --agent-socket "$SOCK"
[ -S "$SOCK" ] || fail "no socket at $SOCK"
[ "$(stat -c %a "$SOCK")" = 666 ] || fail "the socket's mode is $(stat -c %a "$SOCK"), want 666"
AGENT_ADDR=unix:$SOCK start_job 4 --scenario compute --culprit 1 --at 400
wait_for 20 ranks_connected 4 || fail "the ranks did not connect over the socket: $(http_get "/v1/jobs/$JOB")"
expect '[.ranks[].uid] == [0,0,0,0]' <(http_get "/v1/jobs/$JOB")
grep -q "job $JOB rank [0-3]/4 connected from unix:uid=0,pid=[0-9]" "$T/daemon.log" ||
	fail "no 'connected from unix:uid=0,pid=N' line in the log"
wait_incident 60
analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "hang" and [.culprits[].rank] == [1] and .culprits[0].reason == "not_entered"'
expect '.op.type == "all_reduce" and .op.seq == 400 and .waiting_ranks == [0,2,3]'
for r in 0 1 2 3; do
	[ -s "$INCIDENT/rank-$r.json" ] || fail "rank $r's dump is missing: $(ls "$INCIDENT")"
done
stop_job
echo "over the socket: 4 ranks with uid 0, hang diagnosed"

# 2. FLIGHTREC_ADDR unset: the node socket is found. The rank shows its uid
# while it sleeps, so it came over the socket, not TCP.
start_sleeper "$JOB-node" 10 FLIGHTREC_NODE_SOCKET="$SOCK"
wait_for 20 ranks_connected "$JOB-node" 1 ||
	fail "an agent without FLIGHTREC_ADDR did not find the node socket: $(cat "$T/sleeper.log")"
expect '[.ranks[].uid] == [0]' <(http_get "/v1/jobs/$JOB-node")
stop_job
echo "without FLIGHTREC_ADDR: the node socket found"

# 3. A socket of nobody's, listening, moved into a directory of root's (as
# a socket left there by someone else would be); every connection it gets
# is counted in $T/planted.log.
mkdir -m 0755 "$T/planted"
mkdir -m 0777 "$T/nobody"
setpriv --reuid="$NOBODY" --regid="$NOBODY" --clear-groups /usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(16)
open(sys.argv[1] + ".ready", "w").close()
while True:
    c, _ = s.accept()
    print("accepted", flush=True)
' "$T/nobody/agent.sock" >"$T/planted.log" 2>&1 &
track_pid $!
wait_for 10 test -e "$T/nobody/agent.sock.ready" || fail "the planted socket was not made"
mv "$T/nobody/agent.sock" "$T/planted/agent.sock"
PLANTED=$T/planted/agent.sock
[ "$(stat -c %u "$PLANTED")" = "$NOBODY" ] || fail "the planted socket is not nobody's"

run_sleeper "$JOB-planted" 1 FLIGHTREC_ADDR="unix:$PLANTED" ||
	fail "the application failed: $(cat "$T/sleeper.log")"
grep -q "FLIGHTREC_ADDR=unix:$PLANTED: not connecting: the socket is owned by uid $NOBODY, neither root nor you" "$T/sleeper.log" ||
	fail "no refusal of the given socket on stderr: $(cat "$T/sleeper.log")"
[ "$(grep -c 'not connecting' "$T/sleeper.log")" -eq 1 ] || fail "the refusal was said more than once: $(cat "$T/sleeper.log")"
run_sleeper "$JOB-planted" 1 FLIGHTREC_NODE_SOCKET="$PLANTED" ||
	fail "the application failed: $(cat "$T/sleeper.log")"
grep -q "not connecting to the node daemon's socket $PLANTED: it is owned by uid $NOBODY, neither root nor you (anyone could have put it there)" "$T/sleeper.log" ||
	fail "no refusal of the found socket on stderr: $(cat "$T/sleeper.log")"
grep -q accepted "$T/planted.log" && fail "an agent connected to the planted socket"
# The daemon will not take it over either.
daemon_refuses "$PLANTED" "a socket of uid $NOBODY is there, not this daemon's (uid 0); not removing it"
[ -S "$PLANTED" ] || fail "the daemon removed another user's socket"
stop_helpers
echo "planted socket refused by the agent (given and found) and by the daemon"

# 4. A directory anyone may write to, not sticky; then a live daemon's socket.
mkdir "$T/open"
chmod 0777 "$T/open"
daemon_refuses "$T/open/agent.sock" "directory $T/open is writable by its group or others and not sticky"
[ -e "$T/open/agent.sock" ] && fail "a socket was made in the world-writable directory"
daemon_refuses "$SOCK" "another daemon is listening on it"
[ -S "$SOCK" ] || fail "the refused daemon removed the live daemon's socket"
echo "daemon refuses a world-writable directory and a live daemon's socket"

# 5. SIGKILL leaves the socket; the next daemon replaces it; SIGTERM removes it.
kill -KILL "$DAEMON_PID"
{ wait "$DAEMON_PID"; } 2>/dev/null
DAEMON_PID=
[ -S "$SOCK" ] || fail "no stale socket after SIGKILL"
start_daemon --agent-socket "$SOCK"
grep -q "removed the stale --agent-socket $SOCK" "$T/daemon.log" || fail "the stale socket was not replaced"
start_sleeper "$JOB-restart" 10 FLIGHTREC_ADDR="unix:$SOCK"
wait_for 20 ranks_connected "$JOB-restart" 1 ||
	fail "an agent did not connect to the restarted daemon's socket: $(cat "$T/sleeper.log")"
stop_job
stop_daemon
[ -e "$SOCK" ] && fail "the socket is still there after a clean stop"
echo "PASS unix_socket: hang diagnosed over the socket with uids, node socket found, planted sockets and unsafe directories refused, stale socket replaced, socket removed on stop"
