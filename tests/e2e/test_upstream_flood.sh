#!/usr/bin/env bash
# A node daemon under a central daemon that asks without reading
# (fake_central.py fetch-flood: a million NODE_FETCH frames, 32 MiB, each
# answered by a failure ten times its size, none of them read): the node
# stops reading the requests once its answers wait over their bound, says
# so, and keeps its memory bounded (RSS under 64 MiB) and its /healthz
# answering.
. "$(dirname "$0")/lib.sh"

RSS_MAX_KIB=$((64 * 1024))
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

python3 "$ROOT/tests/e2e/fake_central.py" "$T/central.port" fetch-flood 1000000 >"$T/central.out" 2>&1 &
track_pid $!
wait_for 10 test -s "$T/central.port" || fail "the fake central daemon did not start: $(cat "$T/central.out")"
"$BIN/flightrecd" --listen 127.0.0.1:0 --http 127.0.0.1:0 --dump-dir "$T/node-incidents" \
	--ports-file "$T/node-ports.json" --upstream "127.0.0.1:$(cat "$T/central.port")" >>"$T/node.log" 2>&1 &
NODE_PID=$!
track_pid $NODE_PID
wait_for 10 test -s "$T/node-ports.json" || fail "the node daemon did not start: $(cat "$T/node.log")"
NODE_HTTP=$(jq -r .http "$T/node-ports.json")
wait_for 10 grep -q hello "$T/central.out" || fail "the node daemon did not say NODE_HELLO: $(cat "$T/node.log")"

# The flood ends when all went or when the node took nothing for 3 s.
wait_for 120 grep -qE "^(sent|blocked) " "$T/central.out" ||
	fail "the flood did not end: $(cat "$T/central.out"); node RSS $(rss_kib $NODE_PID) KiB"
# What the node took is being answered; its memory stays bounded all the while.
for _ in 1 2 3 4 5 6 7 8 9 10; do
	rss=$(rss_kib $NODE_PID) || fail "the node daemon died: $(tail -n 5 "$T/node.log")"
	[ "$rss" -lt "$RSS_MAX_KIB" ] ||
		fail "the node daemon's RSS grew to $rss KiB under the flood ($(cat "$T/central.out"))"
	curl -fsS -m 2 "http://127.0.0.1:$NODE_HTTP/healthz" >/dev/null ||
		fail "the node daemon's /healthz did not answer under the flood"
	sleep 0.2
done
grep -q "^blocked " "$T/central.out" ||
	fail "the node daemon read every request it could not answer: $(cat "$T/central.out")"
grep -q "the central daemon asks faster than it reads the answers; not reading its requests" "$T/node.log" ||
	fail "the node daemon did not say why it stopped reading: $(tail -n 5 "$T/node.log")"
echo "node RSS $(rss_kib $NODE_PID) KiB; $(cat "$T/central.out" | tail -n 1)"
echo PASS
