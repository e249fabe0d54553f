#!/usr/bin/env bash
# An agent that uploads its dump very slowly and then stops halfway does not
# hold up anyone else. A python agent speaks the protocol as rank 3 of a
# 4-rank job (the real rank 3 runs without the agent, and is the one that
# hangs); when asked to dump, it sends one piece of its dump, then the
# header and a few bytes of the next one, a byte every 200 ms, then
# nothing. Meanwhile /healthz answers within 100 ms every time, the real
# ranks' dumps arrive before the deadline, the incident closes at the dump
# deadline with rank 3 marked unresponsive (the manifest says how much of
# its upload came), and fr-analyze still names rank 3.
. "$(dirname "$0")/lib.sh"

AT=200

cat >"$T/fake_agent.py" <<'PY'
import os, socket, struct, sys, time

port, job, at = int(sys.argv[1]), sys.argv[2].encode(), int(sys.argv[3])
MAGIC = 0x43455246

def frame(type_, payload):
    return struct.pack('<IHHII', MAGIC, 1, type_, len(payload), 0) + payload

def s(b):
    return struct.pack('<H', len(b)) + b

def say(line):
    print(line, flush=True)

sock = socket.create_connection(('127.0.0.1', port), timeout=30)
hello = (s(job) + struct.pack('<III', 3, 4, os.getpid()) + s(b'fake-host') +
         struct.pack('<IQ', 64, time.time_ns()) + s(b'fake agent'))
comm = s(b'world') + s(b'MPI_COMM_WORLD') + struct.pack('<II', 3, 4) + struct.pack('<4I', 0, 1, 2, 3)
# Completed every all_reduce before #at, entered none after: rank 3 is where
# the real one stops.
progress = struct.pack('<I', 1) + s(b'world') + struct.pack('<QQ', at - 1, at - 1) + struct.pack('<I', 0)
sock.sendall(frame(1, hello) + frame(2, comm) + frame(3, progress))
say('registered')

buf = b''
sock.settimeout(1.0)
while True:
    sock.sendall(frame(4, struct.pack('<Q', time.time_ns())))
    try:
        data = sock.recv(65536)
    except socket.timeout:
        continue
    if not data:
        sys.exit('the daemon closed the connection before asking for a dump')
    buf += data
    if len(buf) >= 16:
        _, _, type_, length, _ = struct.unpack('<IHHII', buf[:16])
        if len(buf) >= 16 + length and type_ == 5:
            ilen, = struct.unpack('<H', buf[16:18])
            incident = buf[18:18 + ilen]
            break

say('dump requested ' + incident.decode())
total, piece = 100000, 1000
def dump_data(offset, length):
    return frame(6, s(incident) + struct.pack('<QQI', offset, total, length) + b' ' * length)
sock.sendall(dump_data(0, piece))
say('sent %d of %d' % (piece, total))
rest = dump_data(piece, piece)
sock.sendall(rest[:24])
for i in range(24, 34):
    time.sleep(0.2)
    sock.sendall(rest[i:i + 1])
say('stalled')
while True:
    time.sleep(60)
PY

# The job's rank 3 runs without the agent: the fake one speaks for it.
cat >"$T/rank.sh" <<WRAP
#!/bin/sh
[ "\$OMPI_COMM_WORLD_RANK" = 3 ] && unset LD_PRELOAD
exec "$HANG" "\$@"
WRAP
chmod +x "$T/rank.sh"
HANG=$T/rank.sh

start_daemon --timeout 2 --heartbeat-timeout 30 --dump-deadline 5
python3 "$T/fake_agent.py" "$LISTEN_PORT" "$JOB" "$AT" >"$T/fake.log" 2>&1 &
track_pid $!
wait_for 10 grep -q registered "$T/fake.log" || fail "the fake agent did not register: $(cat "$T/fake.log")"
start_job 4 --scenario compute --culprit 3 --at "$AT"
wait_for 20 ranks_connected 4 || fail "the real ranks did not join the fake one: $(http_get "/v1/jobs/$JOB")"

wait_for 30 grep -q "^dump requested" "$T/fake.log" || fail "the fake rank was never asked to dump"
# /healthz, again and again until the incident is complete: each answer
# within 100 ms, while the fake upload dribbles and stalls.
slowest=0 polls=0 start=$SECONDS
until incident_ready; do
	[ $((SECONDS - start)) -ge 30 ] && fail "the incident did not close within 30 s"
	t=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' --max-time 5 "$HTTP/healthz")
	[ "${t% *}" = 200 ] || fail "/healthz answered ${t% *}"
	slowest=$(awk -v a="$slowest" -v b="${t#* }" 'BEGIN {print (b > a) ? b : a}')
	polls=$((polls + 1))
	sleep 0.05
done
grep -q stalled "$T/fake.log" || fail "the incident closed before the fake upload stalled: $(cat "$T/fake.log")"
awk -v s="$slowest" 'BEGIN {exit !(s < 0.1)}' || fail "/healthz took ${slowest}s at worst over $polls polls"

# The real ranks' dumps arrived while rank 3's upload hung, before the
# deadline; the deadline closed the incident.
deadline_line=$(grep -n "incident .* of job $JOB: dump deadline passed" "$T/daemon.log" | head -n 1 | cut -d: -f1)
[ -n "$deadline_line" ] || fail "the incident did not close at the dump deadline"
for r in 0 1 2; do
	[ -s "$INCIDENT/rank-$r.json" ] || fail "rank $r's dump is missing: $(ls "$INCIDENT")"
	got=$(grep -n "received the dump of job $JOB rank $r " "$T/daemon.log" | head -n 1 | cut -d: -f1)
	[ -n "$got" ] && [ "$got" -lt "$deadline_line" ] || fail "rank $r's dump did not arrive before the deadline"
done
[ -e "$INCIDENT/rank-3.json" ] && fail "the half upload of rank 3 was stored"
expect '.ranks[] | select(.rank == 3) | .answer == "unresponsive" and .dump == null and
	.error == "upload incomplete: 1000 of 100000 bytes received"' "$INCIDENT/manifest.json"
expect '[.ranks[] | select(.rank < 3) | .answer] == ["received","received","received"]' "$INCIDENT/manifest.json"

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "hang" and [.culprits[].rank] == [3] and .culprits[0].reason == "not_entered"'
expect '.op.type == "all_reduce" and .op.seq == '"$AT"' and .op.comm_ranks == [0,1,2,3]'
expect '.waiting_ranks == [0,1,2]'
[ "$(http_status /healthz)" = 200 ] || fail "the daemon stopped serving /healthz"
echo "PASS fault_slow_upload: a stalled upload held up neither the other ranks nor /healthz (slowest ${slowest}s of $polls)"
