#!/usr/bin/env bash
# Slowloris against the HTTP API: 100 connections from the orchestrator's
# own address, each sending one more header line every second and never
# ending its request, reopened as soon as the daemon closes one. The
# daemon closes each within its 5 s whole-request deadline (the byte a
# second does not extend it) and makes room for newcomers, so /healthz and
# /v1/jobs keep answering within 2 s throughout; the closed connections
# are counted in /metrics. A lone dripping connection is closed at the 5 s
# deadline. With 64 requests being answered (live looks waiting on a rank
# that never answers), more are refused at once with 503 and /healthz still
# answers. One address with 16 looks being answered gets 503 for a 17th,
# and its /healthz is still answered (the per-address cap once closed it at
# accept, before anything knew it was /healthz).
. "$(dirname "$0")/lib.sh"

start_daemon

cat >"$T/slow.py" <<'PYEOF'
import json, socket, sys, time

port, n, seconds, ready = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
conns = {}   # socket -> opened at
lives = []   # how long each closed one lasted

def open_one():
    try:
        s = socket.create_connection(('127.0.0.1', port), timeout=2)
        s.sendall(b'GET /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n')
        s.setblocking(False)
        conns[s] = time.time()
    except OSError:
        pass

end = time.time() + seconds
while time.time() < end:
    while len(conns) < n:
        before = len(conns)
        open_one()
        if len(conns) == before:
            break
    if ready and len(conns) >= 64:
        open(ready, 'w').close()
        ready = None
    for s, opened in list(conns.items()):
        closed = False
        try:
            if s.recv(4096) == b'':
                closed = True
        except BlockingIOError:
            pass
        except OSError:
            closed = True
        if not closed:
            try:
                s.send(b'X-Slow: 1\r\n')
            except BlockingIOError:
                pass
            except OSError:
                closed = True
        if closed:
            lives.append(time.time() - opened)
            del conns[s]
            s.close()
    time.sleep(1)
oldest = max((time.time() - t for t in conns.values()), default=0)
print(json.dumps({'closed': len(lives), 'longest_closed': max(lives, default=0),
                  'oldest_open': oldest}))
PYEOF

python3 "$T/slow.py" "$HTTP_PORT" 100 16 "$T/slow.ready" >"$T/slow.json" 2>"$T/slow.err" &
SLOW=$!
track_pid $SLOW
# The flood holds as many connections as the old daemon had in all.
wait_for 10 test -e "$T/slow.ready" || fail "the flood never held 64 connections at once"
asked=0 failed=0
end=$(($(date +%s) + 12))
while [ "$(date +%s)" -lt "$end" ]; do
	for url in /healthz /v1/jobs; do
		code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 -H 'X-Flightrec: 1' "$HTTP$url")
		asked=$((asked + 1))
		[ "$code" = 200 ] || { failed=$((failed + 1)); echo "GET $url under the flood: $code" >&2; }
	done
done
wait "$SLOW" || fail "the flood's client failed: $(cat "$T/slow.err")"
[ "$failed" = 0 ] || fail "$failed of $asked requests under the flood were not answered 200 within 2 s"
[ "$asked" -ge 10 ] || fail "only $asked requests were made in 12 s"
# Every dripping connection was closed in time, none lived on.
expect '.closed >= 100' "$T/slow.json"
expect '.longest_closed < 7.5 and .oldest_open < 7.5' "$T/slow.json"
metric_at_least http_connections_dropped_total 100 ||
	fail "http_connections_dropped_total $(metric http_connections_dropped_total), want at least 100"
# Alone, a connection dripping a header line a second is closed at the
# whole-request deadline (5 s), not before and not much after.
python3 "$T/slow.py" "$HTTP_PORT" 1 9 "" >"$T/one.json" 2>"$T/one.err" ||
	fail "the lone slow client failed: $(cat "$T/one.err")"
expect '.closed >= 1 and .longest_closed > 4 and .longest_closed < 7.5' "$T/one.json"
# The API busy: 70 live looks at a rank that never answers (each waits
# 5 s for it), from five addresses. 64 are taken and end in 504, the
# others are refused at once (503), and /healthz, from its reserve, still
# answers at once.
python3 "$(dirname "$0")/live_agent.py" "$LISTEN_PORT" "silent-$JOB" 0 1 silent >"$T/silent.log" 2>&1 &
track_pid $!
wait_for 10 grep -q '^ready' "$T/silent.log" || fail "the silent stand-in did not connect: $(cat "$T/silent.log")"
looks=
for a in 2 3 4 5 6; do
	for i in $(seq 14); do
		curl -s -o /dev/null -w '%{http_code}\n' --max-time 20 --interface "127.0.0.$a" \
			-H 'X-Flightrec: 1' "$HTTP/v1/jobs/silent-$JOB/ranks/0/stacks" >>"$T/busy.codes" &
		looks="$looks $!"
		track_pid $!
	done
done
wait_for 10 metric_at_least http_busy_total 1 || fail "no look was refused for the API being busy"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$HTTP/healthz")
[ "$code" = 200 ] || fail "/healthz while the API is busy: $code, want 200 within 1 s"
for p in $looks; do wait "$p"; done
[ "$(grep -c '^504$' "$T/busy.codes")" = 64 ] ||
	fail "$(grep -c '^504$' "$T/busy.codes") looks waited for the rank, want 64: $(sort "$T/busy.codes" | uniq -c | tr '\n' ' ')"
[ "$(grep -c '^503$' "$T/busy.codes")" = 6 ] ||
	fail "$(grep -c '^503$' "$T/busy.codes") looks refused as busy, want 6: $(sort "$T/busy.codes" | uniq -c | tr '\n' ' ')"
# One address at its cap: 16 looks from 127.0.0.7 wait for the silent rank.
# A /healthz from the same address answers at once; a 17th look from it is
# refused at once; another address is still served.
before=$(metric live_requests_total)
looks=
for i in $(seq 16); do
	curl -s -o /dev/null -w '%{http_code}\n' --max-time 20 --interface 127.0.0.7 \
		-H 'X-Flightrec: 1' "$HTTP/v1/jobs/silent-$JOB/ranks/0/stacks" >>"$T/cap.codes" &
	looks="$looks $!"
	track_pid $!
done
wait_for 10 metric_at_least live_requests_total $((before + 16)) ||
	fail "the 16 looks from one address were not all taken: $(metric live_requests_total) - $before"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 --interface 127.0.0.7 "$HTTP/healthz")
[ "$code" = 200 ] || fail "/healthz from an address with 16 looks being answered: $code, want 200 within 1 s"
code=$(curl -s -o "$T/17th.json" -w '%{http_code}' --max-time 1 --interface 127.0.0.7 \
	-H 'X-Flightrec: 1' "$HTTP/v1/jobs/silent-$JOB/ranks/0/stacks")
[ "$code" = 503 ] && grep -q 'from this address' "$T/17th.json" ||
	fail "a 17th look from one address: $code $(cat "$T/17th.json"), want 503 naming the address's 16 requests"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 --interface 127.0.0.8 "$HTTP/v1/jobs")
[ "$code" = 200 ] || fail "GET /v1/jobs from another address while one is at its cap: $code"
for p in $looks; do wait "$p"; done
[ "$(grep -c '^504$' "$T/cap.codes")" = 16 ] ||
	fail "the 16 looks from one address: $(sort "$T/cap.codes" | uniq -c | tr '\n' ' '), want 16 x 504"
echo "PASS http_slowloris: $asked requests answered under a 100-connection slowloris; $(jq -c . "$T/slow.json")"
