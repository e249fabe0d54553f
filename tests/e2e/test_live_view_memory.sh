#!/usr/bin/env bash
# What a live view costs (issue 16, item 7): 2048 ranks each in world (2048
# members). Every live view shares one copy of each member list among its
# ranks' traces, so that GET /v1/jobs, /analysis and /v1/jobs/<job> grow
# the daemon by about a per-rank constant, not by ranks x members (which
# copied 16 MiB of lists per view here).
. "$(dirname "$0")/lib.sh"
[ "$SANITIZER" = thread ] && skip "ThreadSanitizer maps shadow memory in proportion to what the daemon touches: its peak is not the one this test measures"
# A sanitizer build holds freed memory back for its own checks (ASan's
# quarantine): not the daemon's peak, which this test measures.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0:thread_local_quarantine_size_kb=0"

N=2048
start_daemon --timeout 1000 --heartbeat-timeout 1000 --max-pending-per-address 4096
python3 "$ROOT/tests/e2e/many_ranks.py" "$LISTEN_PORT" "$JOB" "$N" >"$T/ranks.out" 2>&1 &
track_pid $!
wait_for 60 grep -q "up $N" "$T/ranks.out" || fail "the ranks did not connect: $(cat "$T/ranks.out")"
wait_for 30 metric_is ranks_connected "$N" || fail "$(metric ranks_connected) of $N ranks connected"
# Every rank's COMM is in once /v1/jobs/<job> lists world with its members.
wait_for 30 sh -c "curl -s '$HTTP/v1/jobs/$JOB' | jq -e '.communicators[0].members | length == $N' >/dev/null" ||
	fail "world's members never reached the daemon"

hwm() { awk '/^VmHWM/ {print $2}' "/proc/$DAEMON_PID/status"; }
before=$(hwm)
for path in "/v1/jobs" "/v1/jobs/$JOB/analysis" "/v1/jobs" "/v1/jobs/$JOB/analysis"; do
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "$HTTP$path")
	[ "$code" = 200 ] || fail "GET $path answered $code"
done
after=$(hwm)
grown=$((after - before))
# Copying world once per rank costs 2048 x 8 KiB = 16 MiB per view (42 MiB
# for these four before the lists were shared); a shared view costs about
# 1.5 KiB per rank (12 MiB for the four, each HTTP thread's allocator
# keeping its own).
[ "$grown" -lt 24576 ] || fail "four live views grew the daemon's peak memory by $grown KiB (want under 24 MiB: member lists copied per rank?)"
echo "PASS live view memory: four views of $N ranks grew the peak by $grown KiB"
