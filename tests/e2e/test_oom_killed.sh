#!/usr/bin/env bash
# Rank 2 of a 4-rank job is killed with SIGKILL mid-training right after
# the kernel's OOM-killer line naming its pid (written into /dev/kmsg, as
# the kernel writes it before the kill). fr-analyze's verdict names it
# killed by the OOM killer, not "killed or lost", from the kernel log the
# daemon put in the manifest; the report says it and shows the line under
# it. Skipped where /dev/kmsg cannot be both read and written (not root).
. "$(dirname "$0")/lib.sh"

{ printf '' >/dev/kmsg && dd if=/dev/kmsg iflag=nonblock bs=8192 count=1 of=/dev/null; } \
	2>/dev/null || skip "/dev/kmsg is not readable and writable here (needs root)"

start_running 4 2
pid=$RANK_PID
echo "Out of memory: Killed process $pid (mpi_hang) total-vm:123456kB, anon-rss:65432kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:200kB oom_score_adj:0 ($JOB)" >/dev/kmsg
kill -KILL "$pid"
wait_job_exit 60

wait_incident 20
expect '.reason == "killed" and ([.kernel_log[].lines[] | select(.kind == "oom" and .rank == 2)] | length) == 1' \
	"$INCIDENT/manifest.json"
analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "crash" and [.culprits[].rank] == [2]'
expect '.culprits[0].reason == "killed" and .culprits[0].oom_killed == true'
expect '.summary | startswith("rank 2 ") and contains("was killed by the OOM killer")'
"$BIN/fr-analyze" "$INCIDENT" >"$T/analyze.txt" 2>&1
grep -q "killed by the OOM killer" "$T/analyze.txt" || fail "the report does not say it: $(cat "$T/analyze.txt")"
grep -q "kernel: .*Out of memory: Killed process $pid" "$T/analyze.txt" ||
	fail "the report does not show the kernel's line under rank 2: $(cat "$T/analyze.txt")"
echo "PASS oom killed: a rank the OOM killer killed is named so, from its node's kernel log"
