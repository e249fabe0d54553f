#!/usr/bin/env bash
# Live views share member lists (review of issue 16, finding 2): one rank of
# a 65536-rank job reports 256 communicators of 65536 members (64 MiB of
# member lists, charged to the memory budget), then a new process takes its
# place (a new run under the same job id): the lists stay, stale, until
# reported again, and no rank's trace names them. Eight clients then ask
# GET /v1/jobs at once, four times each. A view takes a reference on each
# list, not a copy, so the daemon's peak memory grows by a few MiB; when
# every view copied the 64 MiB under the daemon's lock, the same requests
# grew it by 300-500 MiB (up to 8 x 64 MiB: with a budget that fills the
# machine, an OOM kill) and held the lock for each copy.
. "$(dirname "$0")/lib.sh"
[ "$SANITIZER" = thread ] && skip "ThreadSanitizer maps shadow memory in proportion to what the daemon touches: its peak is not the one this test measures"
# A sanitizer build holds freed memory back for its own checks (ASan's
# quarantine): not the daemon's peak, which this test measures.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0:thread_local_quarantine_size_kb=0"

MIB=1048576
start_daemon --timeout 1000 --heartbeat-timeout 1000 --max-memory $((1024 * MIB))
python3 "$ROOT/tests/e2e/comm_flood.py" "$LISTEN_PORT" - "$JOB" 65536 256 65536 >"$T/flood.out" 2>&1 &
flood=$!
track_pid $flood
wait_for 60 grep -q "sent 256" "$T/flood.out" || fail "the communicators were not sent: $(cat "$T/flood.out")"
wait_for 30 metric_is memory_member_lists_bytes $((64 * MIB)) ||
	fail "member lists held: $(metric memory_member_lists_bytes), want 64 MiB"
kill -KILL $flood
wait_for 10 grep -q "rank 0 disconnected" "$T/daemon.log" || fail "the daemon did not see rank 0 go"
python3 "$ROOT/tests/e2e/comm_reports.py" "$LISTEN_PORT" - "$JOB" 65536 >"$T/new.out" 2>&1 &
track_pid $!
wait_for 10 metric_is ranks_connected 1 || fail "the new process of rank 0 did not connect: $(cat "$T/new.out")"
metric_is memory_member_lists_bytes $((64 * MIB)) || fail "the stale lists were not kept"

hwm() { awk '/^VmHWM/ {print $2}' "/proc/$DAEMON_PID/status"; }
# A first request warms each HTTP thread's allocator.
curl -s -o /dev/null --max-time 30 "$HTTP/v1/jobs"
before=$(hwm)
start=$(date +%s%N)
pids=
for c in 1 2 3 4 5 6 7 8; do
	(
		# The daemon works on 3 big requests at once and answers the
		# others 503 at once, saying so: those are asked again.
		for i in 1 2 3 4; do
			tries=0
			while :; do
				code=$(curl -s -o "$T/jobs.$c.json" -w '%{http_code}' --max-time 60 "$HTTP/v1/jobs")
				[ "$code" = 503 ] && grep -q 'big requests' "$T/jobs.$c.json" &&
					[ $((tries += 1)) -lt 200 ] && { sleep 0.05; continue; }
				break
			done
			[ "$code" = 200 ] || { echo "GET /v1/jobs answered $code: $(head -c 200 "$T/jobs.$c.json")" >"$T/client.$c.err"; exit 1; }
		done
	) &
	pids="$pids $!"
	track_pid $!
done
for p in $pids; do
	wait "$p" || fail "$(cat "$T"/client.*.err 2>/dev/null)"
done
ms=$((($(date +%s%N) - start) / 1000000))
grown=$(($(hwm) - before))
jq -e --arg job "$JOB" '.jobs | map(select(.job == $job)) | length == 1' "$T/jobs.1.json" >/dev/null ||
	fail "GET /v1/jobs does not list the job: $(head -c 300 "$T/jobs.1.json")"
# Copying the lists cost one 64 MiB copy per request in flight; sharing
# them costs the summaries, a few MiB.
[ "$grown" -lt $((24 * 1024)) ] ||
	fail "32 GET /v1/jobs (8 at once) grew the daemon's peak memory by $grown KiB in $ms ms (member lists copied?)"
# The lists are still whole: /v1/jobs/<job> writes them from a view.
curl -s --max-time 60 "$HTTP/v1/jobs/$JOB" >"$T/job.json"
jq -e '(.communicators | length) == 256 and (.communicators[255].members | length) == 65536 and .communicators[255].members[65535] == 65535' "$T/job.json" >/dev/null ||
	fail "the job's member lists are not whole after the views"
echo "PASS live view shared: 32 GET /v1/jobs over 64 MiB of member lists, 8 at once, in $ms ms, peak +$grown KiB"
