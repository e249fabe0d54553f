#!/usr/bin/env bash
# Random bytes and an oversized frame sent to the daemon's agent port:
# those connections are closed and counted, and the daemon keeps serving
# and still diagnoses a real hang.
. "$(dirname "$0")/lib.sh"

start_daemon --timeout 2 --heartbeat-timeout 10

send() { # send FILE: write bytes to the agent port, then hang up
	exec 3<>"/dev/tcp/127.0.0.1/$LISTEN_PORT" || fail "cannot connect to the agent port"
	cat "$1" >&3 2>/dev/null
	exec 3>&-
}
head -c 65536 /dev/urandom >"$T/random.bin"
send "$T/random.bin"
# A valid header (magic "FREC", version 1, type HELLO) announcing 2 GiB.
printf 'FREC\x01\x00\x01\x00\xff\xff\xff\x7f\x00\x00\x00\x00' >"$T/oversized.bin"
send "$T/oversized.bin"
for f in "$ROOT"/tests/data/wire/*.bin; do send "$f"; done

rejected() {
	n=$(http_get /metrics | awk '$1 == "flightrec_frames_rejected_total" {print $2}')
	[ "${n:-0}" -ge 2 ]
}
wait_for 10 rejected || fail "rejected frames not counted: $(http_get /metrics)"
[ "$(http_status /healthz)" = 200 ] || fail "healthz not 200 after bad input"
kill -0 "$DAEMON_PID" || fail "daemon died"

start_job 4 --scenario compute --culprit 1 --at 3
wait_incident 40
analyze "$INCIDENT"
expect '.verdict == "hang" and .culprits[0].rank == 1 and .op.seq == 3'
[ "$(http_status /healthz)" = 200 ] || fail "healthz not 200 at the end"
echo "PASS bad input: daemon kept serving and diagnosing"
