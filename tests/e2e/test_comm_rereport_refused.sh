#!/usr/bin/env bash
# A re-report refused over the memory budget keeps the list it would have
# replaced (review of issue 16, finding 7). With --max-memory 16 MiB a job
# holds 8 MiB of member lists: rank 0 reports c0 with 16 members and c1..c31
# with 65536 (7.75 MiB), and its c32 is refused. A new process of rank 0 (a
# new run under the job id) makes the lists stale, reports x (16 members)
# and then c0 with 65536 members: that is over the job's half, refused,
# and c0 keeps its 16 members. The daemon freed the old list before asking
# the budget for the new one, so the refusal left c0 with no members.
. "$(dirname "$0")/lib.sh"

MIB=1048576
REPORTS=$ROOT/tests/e2e/comm_reports.py
start_daemon --max-memory $((16 * MIB)) --timeout 1000 --heartbeat-timeout 1000
python3 "$REPORTS" "$LISTEN_PORT" - "$JOB" 65536 c0:16 c1:65536 c2:65536 c3:65536 c4:65536 c5:65536 c6:65536 c7:65536 c8:65536 c9:65536 c10:65536 c11:65536 c12:65536 c13:65536 c14:65536 c15:65536 c16:65536 c17:65536 c18:65536 c19:65536 c20:65536 c21:65536 c22:65536 c23:65536 c24:65536 c25:65536 c26:65536 c27:65536 c28:65536 c29:65536 c30:65536 c31:65536 c32:65536 >"$T/a.out" 2>&1 &
track_pid $!
wait_for 60 grep -q closed "$T/a.out" || fail "the daemon did not refuse c32: $(cat "$T/a.out")"
grep -q "^sent 33" "$T/a.out" || fail "the first run's reports did not all go out: $(cat "$T/a.out")"
wait_for 10 metric_is ranks_connected 0 || fail "the daemon did not see rank 0 go"
jq -e '.communicators | map(select(.id == "c0"))[0].members | length == 16' <(curl -s "$HTTP/v1/jobs/$JOB") >/dev/null ||
	fail "c0 does not hold its 16 members before the new run"
metric_is memory_refused_total 1 || fail "refusals counted: $(metric memory_refused_total), want 1 (c32)"

python3 "$REPORTS" "$LISTEN_PORT" - "$JOB" 65536 x:16 c0:65536 >"$T/b.out" 2>&1 &
track_pid $!
wait_for 30 grep -q closed "$T/b.out" || fail "the re-report of c0 was not refused: $(cat "$T/b.out")"
metric_is memory_refused_total 2 || fail "the re-report's refusal was not counted: $(metric memory_refused_total)"
curl -s "$HTTP/v1/jobs/$JOB" >"$T/job.json"
jq -e '.communicators | map(select(.id == "x"))[0].members | length == 16' "$T/job.json" >/dev/null ||
	fail "x was not kept"
jq -e '.communicators | map(select(.id == "c0"))[0] | .size == 16 and (.members | length) == 16 and .members[15] == 15' "$T/job.json" >/dev/null ||
	fail "the refused re-report lost c0's list: $(jq -c '.communicators | map(select(.id == "c0"))[0] | {size, n: (.members | length)}' "$T/job.json")"
# The budget counts what is held: 31 lists of 65536, c0 and x.
metric_is memory_member_lists_bytes $((31 * 262144 + 64 + 64)) ||
	fail "member lists counted: $(metric memory_member_lists_bytes)"
echo "PASS comm re-report refused: c0 kept its 16 members, the budget counts $(metric memory_member_lists_bytes) bytes"
