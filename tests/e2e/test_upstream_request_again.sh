#!/usr/bin/env bash
# A node daemon asked again and again for incidents of a job while it still
# answers the central daemon's first one (fake_central.py request-again: a
# confused or hostile central daemon; a real one collects one incident of
# a job at a time): the later requests are ignored, and said so once,
# rather than each answered with a failure of every rank the node holds.
# The job's one rank (abuse_agent.py hold) never answers its dump request,
# so the node's incident stays open until its --dump-deadline (60 s).
. "$(dirname "$0")/lib.sh"

AGENT_PY=$ROOT/tests/e2e/abuse_agent.py
python3 "$ROOT/tests/e2e/fake_central.py" "$T/central.port" request-again "$JOB" 500 \
	>"$T/central.out" 2>&1 &
track_pid $!
wait_for 10 test -s "$T/central.port" || fail "the fake central daemon did not start: $(cat "$T/central.out")"
NODE_LISTEN=$(free_port)
"$BIN/flightrecd" --listen "127.0.0.1:$NODE_LISTEN" --http 127.0.0.1:0 --dump-dir "$T/node-incidents" \
	--dump-deadline 60 --upstream "127.0.0.1:$(cat "$T/central.port")" >>"$T/node.log" 2>&1 &
track_pid $!
wait_for 10 grep -q "connected as a node daemon" "$T/node.log" ||
	fail "the node daemon did not connect upstream: $(cat "$T/node.log")"
# The rank connects first: the fake central daemon asks once it is there.
mkfifo "$T/agent.ctl"
python3 "$AGENT_PY" "$NODE_LISTEN" - hold "$JOB" 0 2 <"$T/agent.ctl" >"$T/agent.out" 2>&1 &
track_pid $!
exec {AGENT_FD}>"$T/agent.ctl"
wait_for 10 grep -q connected "$T/agent.out" || fail "the rank did not connect: $(cat "$T/agent.out")"
wait_for 10 grep -q hello "$T/central.out" || fail "no NODE_HELLO came: $(cat "$T/central.out")"
wait_for 30 grep -q "^again " "$T/central.out" ||
	fail "the node daemon did not answer the marker fetch: $(cat "$T/central.out"); $(tail -n 5 "$T/node.log")"
grep -q "^again 0$" "$T/central.out" ||
	fail "the node daemon answered requests for a job it still answers for: $(cat "$T/central.out")"
[ "$(grep -c "asked for while the node still answers the central daemon's first: ignored" "$T/node.log")" = 1 ] ||
	fail "the ignored requests were not logged once: $(grep -c ignored "$T/node.log") lines"
echo quit >&"$AGENT_FD"
echo PASS
