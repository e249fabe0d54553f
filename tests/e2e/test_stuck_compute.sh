#!/usr/bin/env bash
# Rank 3 of 6 computes forever before all_reduce #5 on world: the daemon
# opens one incident, every rank dumps, and fr-analyze names rank 3.
. "$(dirname "$0")/lib.sh"
[ "$SANITIZER" = thread ] && skip "ThreadSanitizer holds the stack-capture signal back while a rank polls in uninstrumented libmpi"

start_daemon --timeout 2 --heartbeat-timeout 10
start_job 6 --scenario compute --culprit 3 --at 5
wait_incident 40

for r in 0 1 2 3 4 5; do
	[ -s "$INCIDENT/rank-$r.json" ] || fail "rank $r did not dump into $INCIDENT"
	[ -s "$T/local/$JOB/$(basename "$INCIDENT")/rank-$r.json" ] || fail "rank $r kept no local copy"
done
expect '[.ranks[] | .answer] | all(. == "received")' "$INCIDENT/manifest.json"
expect '.reason == "timeout"' "$INCIDENT/manifest.json"

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "hang"'
expect '.culprits | length == 1'
expect '.culprits[0].rank == 3 and .culprits[0].reason == "not_entered"'
expect '.culprits[0].pid > 0 and (.culprits[0].host | length) > 0'
expect '.op.type == "all_reduce" and .op.seq == 5 and .op.comm == "world"'
expect '.op.comm_ranks == [0,1,2,3,4,5]'
expect '.waiting_ranks == [0,1,2,4,5]'

# The culprit's dump shows where it is: its main thread's stack.
jq -e '[.threads[].frames[].name] | index("stuck_in_compute")' "$INCIDENT/rank-3.json" >/dev/null ||
	fail "rank 3's stack does not show stuck_in_compute"

# The text report leads with the verdict.
"$BIN/fr-analyze" "$INCIDENT" >"$T/report.txt"
head -n 1 "$T/report.txt" | grep -q 'rank 3 .*never entered all_reduce #5 on world' ||
	fail "text report's first line: $(head -n 1 "$T/report.txt")"
grep -q stuck_in_compute "$T/report.txt" || fail "text report lacks the culprit's stack"
# Stacks merged across ranks: rank 3 alone in its computation, the five
# others together in the collective.
grep -qE '^  5 ranks \(0-2,4-5\): .*Allreduce' "$T/report.txt" &&
	grep -qE '^  1 rank \(3\): .*stuck_in_compute' "$T/report.txt" ||
	fail "stacks not merged: $(sed -n '/^Stacks/,$p' "$T/report.txt")"

# One incident per hang, even though the job stays stuck.
wait_for 3 sh -c "[ \$(ls -d '$T/incidents/$JOB'/*/ | wc -l) -gt 1 ]" &&
	fail "a second incident was opened for the same hang"
echo "PASS stuck compute: rank 3 named, all_reduce #5"
