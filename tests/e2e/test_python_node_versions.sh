#!/usr/bin/env bash
# A node daemon sends its stack classes' Python frames (protocol 8) only to
# a central daemon that said 8 in its WELCOME: to one that said 7, whose
# decoder would refuse the flag, its NODE_LOOK_STACKS are those of protocol
# 7. The mpi4py training loop, 2 ranks on one node daemon upstream of a
# fake central daemon (fake_central.py look), rank 1 asleep in
# load_batch(); the fake asks for the job's stacks after WELCOME 7, then
# after WELCOME 8.
. "$(dirname "$0")/lib.sh"
[ "$SANITIZER" = thread ] && skip "ThreadSanitizer holds the stack-capture signal back while a rank polls in uninstrumented libmpi"
need_train_loop

python3 "$ROOT/tests/e2e/fake_central.py" "$T/central.port" look "$JOB" 2 7 8 >"$T/central.out" 2>&1 &
track_pid $!
wait_for 10 test -s "$T/central.port" || fail "the fake central daemon did not start: $(cat "$T/central.out")"
NODE_LISTEN=$(free_port)
"$BIN/flightrecd" --listen "127.0.0.1:$NODE_LISTEN" --http 127.0.0.1:0 --dump-dir "$T/node-incidents" \
	--timeout 3600 --heartbeat-timeout 3600 --upstream "127.0.0.1:$(cat "$T/central.port")" \
	>>"$T/node.log" 2>&1 &
track_pid $!
wait_for 10 grep -q "connected as a node daemon" "$T/node.log" ||
	fail "the node daemon did not connect upstream: $(cat "$T/node.log")"
AGENT_ADDR=127.0.0.1:$NODE_LISTEN start_mpi_program 2 $PY "$SCRIPT" 1 1 100
wait_for 60 grep -q "^look 2 " "$T/central.out" ||
	fail "the node daemon did not answer both looks: $(cat "$T/central.out"); $(tail -n 5 "$T/node.log")"
# One frame each (LAST, 0x01), with PYTHON (0x04) after WELCOME 8 only.
[ "$(cat "$T/central.out")" = "hello
look 1 7 flags 1
look 2 8 flags 5" ] || fail "Python frames not sent as each central daemon's version says: $(cat "$T/central.out")"
stop_job
echo "PASS python node versions: Python frames go upstream to a central daemon of protocol 8 only"
