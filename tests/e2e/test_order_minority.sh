#!/usr/bin/env bash
# The odd one out. Every step of the job does an allreduce on each of two
# duplicates of world, a then b; at the 4th, rank 1 calls b's first. Ranks
# 0, 2 and 3 wait in a's, rank 1 in b's: a deadlock, whose culprit is rank 1
# alone (not rank 0, the other end of the cycle the waits close), with what
# the majority did beside it.
. "$(dirname "$0")/lib.sh"

start_daemon --timeout 2 --heartbeat-timeout 10
start_job 4 --scenario order --culprit 1 --at 4
wait_incident 40

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "deadlock"'
expect '[.culprits[].rank] == [1]'
expect '.culprits[0].reason == "not_entered" and .culprits[0].called.type == "all_reduce"'
# The operation is the one the majority waits in, the culprit's is b's.
expect '.op.type == "all_reduce" and .op.seq == 4 and .op.comm_ranks == [0,1,2,3]'
expect '.culprits[0].called.comm != .op.comm'
expect '[.classes[] | {ranks, count, majority}] == [{"ranks": [0,2,3], "count": 3, "majority": true}, {"ranks": [1], "count": 1, "majority": false}]'
expect '.classes[1].called.comm == .culprits[0].called.comm and .classes[1].before.comm == .op.comm'
expect '.waiting_ranks == [0,1,2,3]'

# The report for a person says it in words, the majority beside the odd one.
"$BIN/fr-analyze" "$INCIDENT" >"$T/report.txt" 2>"$T/analyze.err"
a=$(jq -r .op.comm "$T/verdict.json")
b=$(jq -r .culprits[0].called.comm "$T/verdict.json")
want="rank 1 ($(jq -r .culprits[0].host "$T/verdict.json"), pid $(jq -r .culprits[0].pid "$T/verdict.json")) called all_reduce #4 on $b before all_reduce #4 on $a; ranks 0,2-3 called $a then $b"
head -n 1 "$T/report.txt" | grep -qF "deadlock: $want" ||
	fail "summary does not say \"deadlock: $want\": $(head -n 1 "$T/report.txt")"
grep -qF "3 ranks (0,2-3), the majority: called all_reduce #4 on $a before all_reduce #4 on $b" "$T/report.txt" ||
	fail "report does not list the majority's class: $(cat "$T/report.txt")"
# The daemon's live verdict (the same engine, on its live view) says so too.
http_get "/v1/jobs/$JOB/analysis" >"$T/live.json" || fail "GET /analysis failed"
expect '.verdict == "deadlock" and [.culprits[].rank] == [1]' "$T/live.json"
expect '[.classes[] | .ranks] == [[0,2,3],[1]] and .classes[0].majority' "$T/live.json"
echo "PASS order minority: rank 1 named alone, ranks 0,2-3 called $a then $b"
