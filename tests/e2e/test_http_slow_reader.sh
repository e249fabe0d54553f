#!/usr/bin/env bash
# Slowloris by reading slowly: a client that asks for a big answer (GET
# /v1/jobs/<job> of a job with 28 communicators of 65536 members, about
# 11 MB) through a small receive window and reads it at 256 KiB/s never
# lets libmicrohttpd's own timeout fire (bytes keep moving) and, on the old
# daemon, held its connection, its API slot and the answer's memory for as
# long as the whole read took (40 s here; hours for a big job read slower). The daemon now closes it once its
# answer deadline (5 s plus a second per MiB) has passed, and counts it in
# http_connections_dropped_total; a client reading at 2 MiB/s gets the
# whole answer.
. "$(dirname "$0")/lib.sh"

start_daemon --timeout 1000 --heartbeat-timeout 1000
python3 "$ROOT/tests/e2e/comm_flood.py" "$LISTEN_PORT" - "$JOB" 65536 28 65536 >"$T/flood.out" 2>&1 &
track_pid $!
wait_for 60 grep -q "sent 28" "$T/flood.out" || fail "the communicators were not sent: $(cat "$T/flood.out")"
wait_for 30 sh -c "[ \$(curl -s '$HTTP/metrics' | awk '\$1 == \"flightrec_frames_received_total\" {print \$2}') -ge 29 ]" ||
	fail "the daemon did not take the 28 communicators"
size=$(curl -s -o /dev/null -w '%{size_download}' --max-time 30 "$HTTP/v1/jobs/$JOB")
[ "$size" -gt 10000000 ] || fail "the answer is only $size bytes, want more than 10 MB"

cat >"$T/reader.py" <<'PYEOF'
import json, socket, sys, time

port, job, rcvbuf, chunk, every, limit = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
s.connect(('127.0.0.1', port))
s.sendall(('GET /v1/jobs/%s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' % job).encode())
start = time.time()
got = 0
how = 'limit'
while time.time() - start < limit:
    try:
        b = s.recv(chunk)
    except OSError as e:
        how = 'error %s' % e
        break
    if not b:
        how = 'closed'
        break
    got += len(b)
    time.sleep(every)
print(json.dumps({'got': got, 'seconds': time.time() - start, 'how': how}))
PYEOF
dropped=$(metric http_connections_dropped_total)
# 32 KiB every 125 ms: 256 KiB/s, the whole answer in about 42 s. Its
# deadline is 5 s + about 10 s.
python3 "$T/reader.py" "$HTTP_PORT" "$JOB" 16384 32768 0.125 40 >"$T/slow.json" 2>"$T/slow.err" ||
	fail "the slow reader failed: $(cat "$T/slow.err")"
jq -e --argjson size "$size" '.how != "limit" and .got < $size' "$T/slow.json" >/dev/null ||
	fail "a client reading 256 KiB/s held its answer for 40 s: $(cat "$T/slow.json")"
secs=$(jq '.seconds | floor' "$T/slow.json")
[ "$secs" -ge 12 ] && [ "$secs" -le 22 ] ||
	fail "the slow reader was closed after $secs s, want its deadline (5 s + 1 s per MiB of $size bytes): $(cat "$T/slow.json")"
metric_at_least http_connections_dropped_total $((dropped + 1)) ||
	fail "the slow reader's connection was not counted in http_connections_dropped_total"
# A client reading at up to 2 MiB/s (64 KiB every 31 ms) is within its
# deadline and gets the whole answer.
python3 "$T/reader.py" "$HTTP_PORT" "$JOB" 65536 65536 0.031 40 >"$T/fast.json" 2>"$T/fast.err" ||
	fail "the 2 MiB/s reader failed: $(cat "$T/fast.err")"
jq -e --argjson size "$size" '.how == "closed" and .got > $size' "$T/fast.json" >/dev/null ||
	fail "a client reading 2 MiB/s did not get the whole answer: $(cat "$T/fast.json")"
echo "PASS http_slow_reader: a 256 KiB/s reader of a $size-byte answer was closed after $secs s; $(jq -c . "$T/fast.json")"
