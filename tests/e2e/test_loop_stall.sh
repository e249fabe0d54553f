#!/usr/bin/env bash
# A daemon whose event loop is stuck (its thread stopped, every other
# thread running) answers a manual dump with 503 within about 5 s instead
# of holding the request for ever, keeps answering /healthz (with 503: the
# loop is not turning) while the dump waits, logs it, and serves the
# manual dump normally once the loop turns again.
. "$(dirname "$0")/lib.sh"

TOKEN=$T/token
printf 'flightrec-e2e-loop-%s%s-0123456789abcdef\n' "$RANDOM" "$RANDOM" >"$TOKEN"
chmod 600 "$TOKEN"
TOKEN_VALUE=$(cat "$TOKEN")
start_daemon --token-file "$TOKEN"

post_dump() { # post_dump JOB: prints the status, the body in $T/post.json
	curl -s -o "$T/post.json" -w '%{http_code}' --max-time 20 -X POST \
		-H "Authorization: Bearer $TOKEN_VALUE" "$HTTP/v1/jobs/$1/dump"
}

[ "$(post_dump nojob)" = 404 ] || fail "POST dump of an unknown job: $(cat "$T/post.json")"

# freeze: stops the loop's thread (the daemon's main thread) through
# freeze_thread.py, fed from a FIFO held open on fd $FREEZE_FD.
FREEZE_FD= FREEZE_PID=
freeze() {
	rm -f "$T/freeze.ctl" "$T/freeze.out"
	mkfifo "$T/freeze.ctl"
	python3 "$(dirname "$0")/freeze_thread.py" "$DAEMON_PID" <"$T/freeze.ctl" >"$T/freeze.out" 2>&1 &
	FREEZE_PID=$!
	track_pid "$FREEZE_PID"
	exec {FREEZE_FD}>"$T/freeze.ctl"
	wait_for 10 grep -q frozen "$T/freeze.out" || fail "could not stop the loop: $(cat "$T/freeze.out")"
}
thaw() {
	echo go >&"$FREEZE_FD"
	exec {FREEZE_FD}>&-
	wait_for 10 sh -c '! kill -0 "$1" 2>/dev/null' _ "$FREEZE_PID" || fail "the loop was not let go"
}
# The loop may have been stopped while it held the daemon's lock, which
# the HTTP threads need too: then let it go and stop it again.
for try in 1 2 3 4 5; do
	freeze
	curl -s -o /dev/null --max-time 2 -H "Authorization: Bearer $TOKEN_VALUE" "$HTTP/v1/jobs" && break
	thaw
	[ "$try" = 5 ] && fail "the loop held the daemon's lock each time it was stopped"
done

start=$SECONDS
post_dump nojob >"$T/post.status" &
post_pid=$!
track_pid "$post_pid"
# While the dump waits, /healthz is answered at once, and says the loop is stuck.
wait_for 10 sh -c '[ "$(curl -s -o /dev/null -w "%{http_code}" --max-time 2 "$1/healthz")" = 503 ]' _ "$HTTP" ||
	fail "/healthz did not say 503 while the loop was stopped"
wait "$post_pid"
elapsed=$((SECONDS - start))
[ "$(cat "$T/post.status")" = 503 ] || fail "POST dump with the loop stopped: $(cat "$T/post.status") $(cat "$T/post.json")"
expect '.error == "the event loop did not answer in time"' "$T/post.json"
[ "$elapsed" -ge 4 ] && [ "$elapsed" -le 9 ] || fail "the 503 came after $elapsed s, not about 5"
grep -q "waited 5 s for the event loop" "$T/daemon.log" || fail "the stalled loop was not logged"

thaw
wait_for 10 sh -c '[ "$(curl -s -o /dev/null -w "%{http_code}" --max-time 2 "$1/healthz")" = 200 ]' _ "$HTTP" ||
	fail "/healthz did not recover once the loop turned again"
[ "$(post_dump nojob)" = 404 ] || fail "POST dump after the loop came back: $(cat "$T/post.json")"
echo "PASS loop stall: manual dump answered 503 in ${elapsed} s while the loop was stopped, /healthz answered, served again after"
