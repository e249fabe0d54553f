#!/usr/bin/env bash
# A read of a big job does not stall the daemon (issue 16, item 6): one rank
# of a 65536-rank job reports 256 communicators of 65536 members (64 MiB of
# member lists). GET /v1/jobs/<job> turns them into about 100 MB of JSON;
# the daemon's lock is held only to take a view of them (a reference to each
# list since finding 2 of the review, a copy before), so that the event loop keeps
# ticking and /healthz answers 200 all the while (it said 503, and took 5 s
# to answer, while the lock was held for the whole answer), and the answer
# costs the daemon a few times its size in memory, not ten. Four such GETs
# at once, more than the HTTP threads can work on and still accept, leave
# /healthz answering within 1 s: the fourth is refused at once with 503
# (all four threads busy building answers once kept /healthz in the
# listen backlog for seconds).
. "$(dirname "$0")/lib.sh"

start_daemon --timeout 1000 --heartbeat-timeout 1000
python3 "$ROOT/tests/e2e/comm_flood.py" "$LISTEN_PORT" - "$JOB" 65536 256 65536 >"$T/flood.out" 2>&1 &
track_pid $!
wait_for 60 grep -q "sent 256" "$T/flood.out" || fail "the communicators were not sent: $(cat "$T/flood.out")"
# The last COMM is in once the summary (which copies them all) sees it.
wait_for 30 sh -c "curl -s '$HTTP/v1/jobs/$JOB/analysis' >/dev/null && [ \$(curl -s '$HTTP/metrics' | awk '\$1 == \"flightrec_frames_received_total\" {print \$2}') -ge 257 ]" ||
	fail "the daemon did not take the 256 communicators"

hwm() { awk '/^VmHWM/ {print $2}' "/proc/$DAEMON_PID/status"; }
fds() { ls "/proc/$DAEMON_PID/fd" | wc -l; }
peak=$(hwm)
fds0=$(fds)
# Read at 40 MB/s: the GET lasts a few seconds however fast the machine,
# so that the polls below overlap it (the daemon's answer deadline allows
# 1 MiB/s).
curl -s -o "$T/job.json" -w '%{http_code}' --max-time 60 --limit-rate 40M "$HTTP/v1/jobs/$JOB" >"$T/get.code" &
get=$!
track_pid "$get"
# As below: polls start once the daemon has accepted the GET's connection.
wait_for 10 sh -c "[ \$(ls /proc/$DAEMON_PID/fd | wc -l) -ge $((fds0 + 1)) ]" ||
	fail "the daemon did not accept the GET's connection"
polls=0 worst=0
while kill -0 "$get" 2>/dev/null; do
	start=$(date +%s%N)
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "$HTTP/healthz")
	ms=$((($(date +%s%N) - start) / 1000000))
	[ "$ms" -gt "$worst" ] && worst=$ms
	polls=$((polls + 1))
	[ "$code" = 200 ] || fail "/healthz answered $code while GET /v1/jobs/<job> was being answered"
	sleep 0.05
done
wait "$get"
# The GET lasted long enough for its polls to mean something.
[ "$polls" -ge 5 ] || fail "/healthz was polled only $polls times during the GET, want at least 5"
[ "$(cat "$T/get.code")" = 200 ] || fail "GET /v1/jobs/<job> answered $(cat "$T/get.code")"
[ "$worst" -lt 1500 ] || fail "/healthz took $worst ms to answer during the big read"
# The member lists are written as text, not made into JSON values first
# (which peaked at 850 MB more for this answer).
grown=$(($(hwm) - peak))
[ "$grown" -lt $((400 * 1024)) ] || fail "the answer grew the daemon's peak memory by $grown KiB"
# The answer is whole: 256 lists of 65536 members, the last one 65535.
size=$(stat -c %s "$T/job.json")
[ "$size" -gt 90000000 ] || fail "the answer is only $size bytes"
grep -q '"c255"' "$T/job.json" && grep -q '65534, *65535\]' "$T/job.json" ||
	fail "the answer lacks the last communicator or a whole member list"
# Four big GETs at once: /healthz answers within 1 s all the while, at
# most one GET is refused (503, at once), the others are answered whole.
# The polls start once the daemon has accepted the four connections: a
# /healthz connection accepted by an HTTP thread in the same turn as a big
# GET waits for that GET's answer to be built (libmicrohttpd serves a
# connection on the thread that accepted it), a race this test does not
# measure.
fds0=$(fds)
gets=
for i in 1 2 3 4; do
	curl -s -o /dev/null -w '%{http_code} %{size_download}\n' --max-time 60 --limit-rate 40M \
		"$HTTP/v1/jobs/$JOB" >"$T/get$i.code" &
	gets="$gets $!"
	track_pid $!
done
# (At least three: the fourth may already have had its 503 and gone.)
wait_for 10 sh -c "[ \$(ls /proc/$DAEMON_PID/fd | wc -l) -ge $((fds0 + 3)) ]" || true
any_alive() { for p; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
polls4=0 worst4=0
while any_alive $gets; do
	start=$(date +%s%N)
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$HTTP/healthz")
	ms=$((($(date +%s%N) - start) / 1000000))
	[ "$ms" -gt "$worst4" ] && worst4=$ms
	polls4=$((polls4 + 1))
	[ "$code" = 200 ] || fail "/healthz answered $code (000: not within 1 s, after $ms ms) during four big GETs"
	sleep 0.05
done
for p in $gets; do wait "$p"; done
[ "$polls4" -ge 5 ] || fail "/healthz was polled only $polls4 times during the four GETs, want at least 5"
cat "$T"/get[1-4].code >"$T/gets.codes"
whole=$(awk '$1 == 200 && $2 > 90000000' "$T/gets.codes" | wc -l)
busy=$(grep -c '^503 ' "$T/gets.codes")
[ "$whole" -ge 3 ] && [ $((whole + busy)) = 4 ] ||
	fail "four big GETs at once: $(tr '\n' ' ' <"$T/gets.codes"), want at least 3 answered whole (over 90 MB), the others 503"
echo "PASS big job read: /healthz answered $polls times during a $size-byte GET, worst $worst ms, peak +$grown KiB; $polls4 times during four GETs, worst $worst4 ms ($(sort "$T/gets.codes" | cut -d' ' -f1 | uniq -c | tr -s ' \n' ' '))"
