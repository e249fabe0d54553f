#!/usr/bin/env bash
# The daemon's memory budget (issue 16, item 5), --max-memory 16 MiB:
#   - one rank reports 256 communicators of 65536 members (64 MiB): a job
#     holds at most half the budget, so 32 lists (8 MiB) are kept and the
#     next COMM is refused (ERROR frame, connection closed, counted,
#     logged); the daemon grows by far less than 64 MiB;
#   - another job's lists still fit (the first job could not take it all);
#   - two ranks upload 6 MiB dumps at once for an incident: one fits, the
#     other is refused over the job's half (its connection stays: the daemon
#     asked for the dump), and the manifest says why;
#     once written, the uploads give their memory back.
. "$(dirname "$0")/lib.sh"
[ "$SANITIZER" = thread ] && skip "ThreadSanitizer maps shadow memory in proportion to what the daemon touches: its peak is not the one this test measures"

TOKEN=$T/token
printf 'flightrec-e2e-%s-0123456789abcdef\n' "$RANDOM$RANDOM" >"$TOKEN"
chmod 600 "$TOKEN"
FLOOD=$ROOT/tests/e2e/comm_flood.py
MIB=1048576

start_daemon --token-file "$TOKEN" --max-memory $((16 * MIB)) --timeout 1000 --heartbeat-timeout 1000
vm_peak() { awk '/^VmHWM/ {print $2}' "/proc/$DAEMON_PID/status"; }
peak=$(vm_peak)

# 1. 64 MiB of member lists from one rank of job A.
python3 "$FLOOD" "$LISTEN_PORT" "$TOKEN" "$JOB-a" 65536 256 65536 >"$T/a.out" 2>&1 &
track_pid $!
wait_for 60 grep -q closed "$T/a.out" || fail "the daemon did not close the flooding rank: $(cat "$T/a.out")"
wait_for 10 metric_is memory_member_lists_bytes $((8 * MIB)) ||
	fail "member lists held: $(metric memory_member_lists_bytes), want 8 MiB (half of --max-memory)"
metric_at_least memory_refused_total 1 || fail "the refusal was not counted"
grep -q "rejected frame from .*comm: over the daemon's memory budget (--max-memory)" "$T/daemon.log" ||
	fail "the refusal was not logged"
grown=$(($(vm_peak) - peak))
[ "$grown" -lt $((40 * 1024)) ] || fail "64 MiB of member lists grew the daemon by $grown KiB under a 16 MiB budget"

# 2. Job B's lists still fit.
python3 "$FLOOD" "$LISTEN_PORT" "$TOKEN" "$JOB-b" 65536 8 65536 >"$T/b.out" 2>&1 &
track_pid $!
wait_for 30 metric_is memory_member_lists_bytes $((10 * MIB)) ||
	fail "job B's lists did not fit: $(metric memory_member_lists_bytes) bytes held"
grep -q "^error" "$T/b.out" && fail "job B was refused: $(cat "$T/b.out")"

# 3. Two 6 MiB uploads at once for an incident of job D (half: 8 MiB).
stop_daemon
start_daemon --token-file "$TOKEN" --max-memory $((16 * MIB)) --timeout 1 --heartbeat-timeout 1000 \
	--dump-deadline 20
JOB=$JOB-d
python3 "$ROOT/tests/e2e/upload_agent.py" "$LISTEN_PORT" "$TOKEN" "$JOB" 2 $((6 * MIB)) >"$T/d.out" 2>&1 &
track_pid $!
wait_incident 60
# The dumps are 6 MiB of '{': the one that fit arrives whole and is judged
# (invalid JSON); the other is refused as it grows past the job's half.
expect '[.ranks[] | select((.error // "") | test("memory budget"))] | length == 1' "$INCIDENT/manifest.json"
expect '[.ranks[] | select((.error // "") | test("invalid JSON"))] | length == 1' "$INCIDENT/manifest.json"
metric_at_least memory_refused_total 1 || fail "the upload's refusal was not counted"
wait_for 10 metric_is memory_uploads_bytes 0 || fail "uploads still hold $(metric memory_uploads_bytes) bytes"
echo "PASS memory budget: member lists held to half of --max-memory per job (64 MiB sent, peak +$grown KiB), uploads refused over it, memory given back"
