#!/usr/bin/env bash
# Connections that never say HELLO, without a token (issue 16, item 4):
#   - an idle connection is closed after --hello-timeout, and counted;
#   - one address may hold --max-pending-per-address connections that have
#     not said HELLO; its next ones are refused at once (counted), while
#     another address still connects;
#   - a connection that said HELLO is never closed by the deadline.
. "$(dirname "$0")/lib.sh"

IDLE=$ROOT/tests/e2e/idle_conns.py
AGENT_PY=$ROOT/tests/e2e/abuse_agent.py

start_daemon --hello-timeout 2 --max-pending-per-address 4 --heartbeat-timeout 30

# 1. One idle connection: closed by the daemon after 2 s (at most ~3.5 s).
out=$(python3 "$IDLE" count "$LISTEN_PORT" 1 8)
read -r _ closed _ after <<<"$out"
[ "$closed" -eq 1 ] || fail "an idle connection was not closed within 8 s ($out)"
awk -v a="$after" 'BEGIN { exit !(a >= 1.5 && a <= 4) }' ||
	fail "the idle connection was closed after $after s, want about 2 s (--hello-timeout)"
wait_for 5 metric_is hello_timeouts_total 1 || fail "hello_timeouts_total is $(metric hello_timeouts_total), want 1"

# 2. Ten idle connections from 127.0.0.1: four wait for their deadline, six
# are refused at once; 127.0.0.2 meanwhile is not refused.
python3 "$IDLE" count "$LISTEN_PORT" 10 1.2 >"$T/flood.out" &
flood=$!
track_pid "$flood"
out2=$(python3 "$IDLE" count "$LISTEN_PORT" 3 0.8 127.0.0.2)
wait "$flood"
out=$(cat "$T/flood.out")
[ "${out%% after*}" = "closed 6" ] || fail "from one address, want 6 of 10 idle connections refused at once, got: $out"
[ "${out2%% after*}" = "closed 0" ] || fail "another address was refused too: $out2"
wait_for 5 metric_is pending_rejected_total 6 || fail "pending_rejected_total is $(metric pending_rejected_total), want 6"
grep -q "have not said hello yet, the most --max-pending-per-address allows" "$T/daemon.log" ||
	fail "the refusal was not logged"
[ "$(grep -c 'max-pending-per-address allows' "$T/daemon.log")" -eq 1 ] ||
	fail "the refusals of one address were logged more than once a minute"

# 3. A rank that said HELLO stays connected past the deadline.
mkfifo "$T/a.ctl"
python3 "$AGENT_PY" "$LISTEN_PORT" - hold "$JOB" 0 1 <"$T/a.ctl" >"$T/a.out" 2>&1 &
track_pid $!
exec {ctl}>"$T/a.ctl"
wait_for 10 grep -q connected "$T/a.out" || fail "the agent did not connect: $(cat "$T/a.out")"
wait_for 5 ranks_connected 1 || fail "the rank is not connected"
# This checks that something does NOT happen, so it has to let time pass:
# a fixed wait of twice --hello-timeout (4 s), written as a bounded wait on
# the clock. Nothing to poll for could end it sooner.
start=$SECONDS
wait_for 5 sh -c "[ \$((\$SECONDS - $start)) -ge 4 ]"
ranks_connected 1 || fail "a rank that said HELLO was closed by the HELLO deadline"
metric_is hello_timeouts_total 1 || fail "hello_timeouts_total is $(metric hello_timeouts_total), want still 1"
echo quit >&"$ctl"
echo "PASS hello deadline: idle connections closed after --hello-timeout, one address capped at --max-pending-per-address"
