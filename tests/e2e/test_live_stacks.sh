#!/usr/bin/env bash
# The debug server's live looks, against a real job: rank 2 of 4 computes
# forever before all_reduce #8 while the others wait in it, and the daemon's
# timeouts are long enough that no incident opens. A rank's stacks and its
# newest ring entries come back on demand, the job's stacks come back
# grouped, a rank that cannot answer (stopped) gets a 504 in bounded time
# while /healthz keeps answering, bad requests get 400/404, a rank that is
# gone 409, and no live look leaves a file anywhere. Looks are cheap and
# counted (/metrics): concurrent requests for one rank share one dump
# request, a request just after an answer reuses it, a trace look carries
# only the entries asked for and a look at stacks no entries, and an agent
# that predates scopes (a stand-in sending its whole dump) is still shown.
# A look without the X-Flightrec header (all a page of another site can
# send) or under a Host the daemon does not go by is refused, and asks no
# rank anything.
. "$(dirname "$0")/lib.sh"
[ "$SANITIZER" = thread ] && skip "ThreadSanitizer holds the stack-capture signal back while a rank polls in uninstrumented libmpi"

STOPPED=
# The stopped rank is let go before lib.sh's cleanup kills the job.
trap 'st=$?; [ -n "$STOPPED" ] && kill -CONT "$STOPPED" 2>/dev/null; (exit $st); cleanup' EXIT

start_daemon --timeout 600 --heartbeat-timeout 600
start_job 4 --scenario compute --culprit 2 --at 8

# get PATH NAME: the body into $T/NAME.json, the status into CODE.
get() {
	CODE=$(curl -sS -H 'X-Flightrec: 1' -o "$T/$2.json" -w '%{http_code}' --max-time 15 "$HTTP$1")
	LOOKED=$(date +%s.%N)
}

# metric NAME: the value of flightrec_NAME in /metrics.
metric() {
	http_get /metrics | awk -v m="flightrec_$1" '$1 == m { print $2; found = 1 } END { exit !found }' ||
		fail "no $1 in /metrics"
}

# A result answers looks for 1 s after it came (PROBE_FRESH_NS): a check
# that needs a new look first waits, bounded, until the last one is older.
stale() {
	awk -v s="$LOOKED" -v n="$(date +%s.%N)" 'BEGIN { exit !(n - s > 1.2) }'
}
wait_stale() {
	wait_for 5 stale || fail "the clock did not move"
}

# size FILE JQ: bytes of the compact JSON of JQ's value in FILE.
size() {
	jq -c "$2" "$1" | tr -d '\n' | wc -c
}

# Every rank connected, and the three others waiting in all_reduce #8.
stuck() {
	http_get "/v1/jobs/$JOB" >"$T/job.json" 2>/dev/null &&
		jq -e '(.ranks | length == 4) and (.ranks | all(.state == "connected")) and
			([.ranks[] | select(.rank != 2) | .inflight[] | select(.seq == 8)] | length == 3)' \
			"$T/job.json" >/dev/null 2>&1
}
wait_for 30 stuck || fail "the job did not reach its planted hang: $(cat "$T/job.json")"

# A look as a page of another site can ask for it (a plain GET, no header
# of its own): refused, and no rank is interrupted.
for url in "/v1/jobs/$JOB/ranks/1/stacks" "/v1/jobs/$JOB/stacks" "/v1/jobs/$JOB/ranks/1/trace"; do
	code=$(curl -s -o "$T/plain.json" -w '%{http_code}' --max-time 5 "$HTTP$url")
	[ "$code" = 403 ] || fail "GET $url without X-Flightrec: status $code, want 403"
	expect '.error | test("X-Flightrec: 1")' "$T/plain.json"
done
# Nor by a name the daemon does not go by (DNS rebinding).
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H 'X-Flightrec: 1' \
	-H "Host: rebind.example:$HTTP_PORT" "$HTTP/v1/jobs/$JOB/ranks/1/stacks")
[ "$code" = 421 ] || fail "a look with Host rebind.example: status $code, want 421"

# Ten viewers of rank 1's stacks at once: one dump request between them.
[ "$(metric live_dump_requests_total)" = 0 ] || fail "dump requests before any look (or by a refused one)"
start=$(date +%s.%N)
pids=
for i in 0 1 2 3 4 5 6 7 8 9; do
	curl -sS -H 'X-Flightrec: 1' -o "$T/many$i.json" -w '%{http_code}' --max-time 15 \
		"$HTTP/v1/jobs/$JOB/ranks/1/stacks" >"$T/many$i.code" &
	pids="$pids $!"
	track_pid $!
done
for p in $pids; do wait "$p"; done
# One more at once, within the result's second: answered without asking
# the rank. The result came after $start and this answer before $LOOKED;
# on a machine so slow that a second passed in between, the result may be
# gone, and that is not what is tested here.
get "/v1/jobs/$JOB/ranks/1/stacks" again
[ "$CODE" = 200 ] || fail "rank 1 again: HTTP $CODE"
for i in 0 1 2 3 4 5 6 7 8 9; do
	[ "$(cat "$T/many$i.code")" = 200 ] || fail "viewer $i of rank 1: HTTP $(cat "$T/many$i.code")"
	expect '.rank == 1 and (.threads | length >= 2)' "$T/many$i.json"
	cmp -s "$T/many$i.json" "$T/many0.json" || fail "viewers 0 and $i of rank 1 saw different looks"
done
[ "$(metric live_requests_total)" = 11 ] || fail "live_requests_total $(metric live_requests_total), want 11"
if awk -v s="$start" -v n="$LOOKED" 'BEGIN { exit !(n - s < 0.95) }'; then
	[ "$(metric live_dump_requests_total)" = 1 ] ||
		fail "11 looks at rank 1 within 1 s made $(metric live_dump_requests_total) dump requests, want 1"
	[ "$(metric live_shared_total)" = 10 ] || fail "live_shared_total $(metric live_shared_total), want 10"
	cmp -s "$T/again.json" "$T/many0.json" || fail "the look within 1 s shows another answer"
else
	echo "note: reuse within 1 s not checked (the looks took $start to $LOOKED)" >&2
	# The ten viewers shared one request; the eleventh may have asked anew.
	[ $(($(metric live_dump_requests_total) + $(metric live_shared_total))) = 11 ] &&
		[ "$(metric live_shared_total)" -ge 9 ] ||
		fail "11 looks at rank 1: $(metric live_dump_requests_total) dump requests, $(metric live_shared_total) shared"
fi

# A rank's stacks: every thread, the culprit's application thread in its
# computation, the agent's own thread among them.
get "/v1/jobs/$JOB/ranks/2/stacks" rank2
[ "$CODE" = 200 ] || fail "rank 2's stacks: HTTP $CODE: $(cat "$T/rank2.json")"
expect ".job == \"$JOB\" and .rank == 2 and .pid > 0 and (.host | length) > 0" "$T/rank2.json"
expect '.threads | length >= 2' "$T/rank2.json"
expect '[.threads[].frames[].name] | index("stuck_in_compute")' "$T/rank2.json"
expect '[.threads[] | select(.name == "flightrec")] | length == 1' "$T/rank2.json"
expect '.threads | all(has("tid") and has("frames"))' "$T/rank2.json"
bytes0=$(metric live_bytes_total)
get "/v1/jobs/$JOB/ranks/0/stacks" rank0
[ "$CODE" = 200 ] || fail "rank 0's stacks: HTTP $CODE"
expect '[.threads[].frames[].name] | index("MPI_Allreduce")' "$T/rank0.json"
bytes_stacks=$(($(metric live_bytes_total) - bytes0))

# The newest 3 entries of rank 0's ring, oldest first: the last of them is
# the all_reduce it waits in.
bytes0=$(metric live_bytes_total)
get "/v1/jobs/$JOB/ranks/0/trace?last=3" trace3
[ "$CODE" = 200 ] || fail "rank 0's trace: HTTP $CODE: $(cat "$T/trace3.json")"
bytes_trace3=$(($(metric live_bytes_total) - bytes0))
get "/v1/jobs/$JOB/ranks/0/trace" trace
[ "$CODE" = 200 ] || fail "rank 0's trace (default last): HTTP $CODE"
expect '.last == 3 and .dropped == 0 and (.entries | length == 3)' "$T/trace3.json"
expect '[.entries[].record_id] as $r | $r == ($r | sort) and ($r | unique | length == 3)' \
	"$T/trace3.json"
expect '.entries[-1].op == "all_reduce" and .entries[-1].collective_seq_id == 8 and
	.entries[-1].state != "completed"' "$T/trace3.json"
expect '.last == 50 and (.entries | length) >= 8' "$T/trace.json"
newest=$(jq -c '[.entries[-3:][].record_id]' "$T/trace.json")
expect "[.entries[].record_id] == $newest" "$T/trace3.json"

# What the looks carried. Rank 0's whole ring is in trace.json (under 50
# entries, none dropped), and its entries weigh more than a dump's header,
# so a look at stacks that carried them would show here.
expect '(.entries | length) < 50 and .dropped == 0' "$T/trace.json"
ring=$(size "$T/trace.json" .entries)
threads=$(size "$T/rank0.json" .threads)
[ "$ring" -gt 2048 ] || fail "rank 0's ring is only $ring bytes of JSON: the checks below prove nothing"
[ "$bytes_stacks" -ge "$threads" ] && [ "$bytes_stacks" -lt $((threads + 2048)) ] ||
	fail "the look at stacks carried $bytes_stacks bytes for $threads of threads (ring: $ring)"
# The trace of 3 carried those 3 entries and no stacks: small.
entries3=$(size "$T/trace3.json" .entries)
[ "$bytes_trace3" -lt 8192 ] && [ "$bytes_trace3" -lt $((entries3 + 2048)) ] ||
	fail "the trace of 3 carried $bytes_trace3 bytes for $entries3 of entries (stacks: $threads)"
echo "note: bytes carried: stacks $bytes_stacks (threads $threads), trace of 3 $bytes_trace3 (entries $entries3), ring $ring" >&2

# The whole job: the culprit apart, the three others together in the
# collective, nobody missing.
get "/v1/jobs/$JOB/stacks" jobstacks
[ "$CODE" = 200 ] || fail "the job's stacks: HTTP $CODE: $(cat "$T/jobstacks.json")"
expect '.ranks_asked == 4 and .ranks_answered == 4 and .missing == "" and .more_groups == 0' \
	"$T/jobstacks.json"
expect '[.groups[] | {ranks, nranks}] | sort_by(.nranks) == [{"ranks":"2","nranks":1},{"ranks":"0-1,3","nranks":3}]' \
	"$T/jobstacks.json"
expect '.groups[] | select(.ranks == "2") | .frames | index("stuck_in_compute")' "$T/jobstacks.json"
expect '.groups[] | select(.ranks == "0-1,3") | .frames[0] | test("MPI_Allreduce")' "$T/jobstacks.json"
expect '.groups | all(.thread.frames | length > 0)' "$T/jobstacks.json"

# Hostile stand-ins (tests/e2e/live_agent.py; this daemon needs no token).
AGENT_PY=$ROOT/tests/e2e/live_agent.py
# agent NAME JOB RANK WORLD MODE [ARGS]: a stand-in, connected ("ready").
agent() {
	local name=$1
	shift
	python3 "$AGENT_PY" "$LISTEN_PORT" "$@" >"$T/$name.log" 2>&1 &
	track_pid $!
	wait_for 10 grep -q '^ready' "$T/$name.log" || fail "stand-in $name did not connect: $(cat "$T/$name.log")"
}
# held_below BYTES: live looks hold less than that now.
held_below() {
	[ "$(metric live_bytes_held)" -lt "$1" ]
}

# Twenty connections each upload the first piece of a live look nobody
# asked of them, announcing --max-dump-size (64 MiB): together more than
# every look may hold. Ignored, counted and logged once for their address;
# they hold nothing, and an honest look still answers.
wait_stale
agent flood "flood-$JOB" 0 20 flood 20 67108864
ignored() {
	[ "$(metric live_uploads_ignored_total)" -ge 20 ]
}
wait_for 10 ignored || fail "unsolicited uploads not counted: $(metric live_uploads_ignored_total)"
held_below 1048576 || fail "unsolicited uploads hold $(metric live_bytes_held) bytes"
get "/v1/jobs/$JOB/ranks/0/stacks" afterflood
[ "$CODE" = 200 ] || fail "a look after unsolicited uploads: HTTP $CODE: $(cat "$T/afterflood.json")"
held_below 1048576 || fail "live looks hold $(metric live_bytes_held) bytes after the flood"
[ "$(grep -c 'that was not asked of it; ignored' "$T/daemon.log")" = 1 ] ||
	fail "unsolicited uploads logged $(grep -c 'not asked of it' "$T/daemon.log") times, want once"

# Requests that cannot be answered.
for q in 0 abc 999999999 -1 "" 1e3; do
	get "/v1/jobs/$JOB/ranks/0/trace?last=$q" bad
	[ "$CODE" = 400 ] || fail "trace?last=$q: HTTP $CODE, want 400"
	expect '.error | test("last")' "$T/bad.json"
done
get "/v1/jobs/no-such-job/ranks/0/stacks" nojob
[ "$CODE" = 404 ] && expect '.error == "no such job"' "$T/nojob.json" || fail "unknown job: HTTP $CODE"
get "/v1/jobs/no-such-job/stacks" nojob
[ "$CODE" = 404 ] || fail "unknown job's stacks: HTTP $CODE"
get "/v1/jobs/$JOB/ranks/4/trace" norank
[ "$CODE" = 404 ] && expect '.error == "no such rank"' "$T/norank.json" || fail "rank 4 of 4: HTTP $CODE"
get "/v1/jobs/$JOB/ranks/99/stacks" norank
[ "$CODE" = 404 ] || fail "rank 99: HTTP $CODE"

# A rank that cannot answer: 504 within the daemon's 5 s (and a margin),
# while /healthz answers promptly all along; no result of the job's stacks
# above may answer for it.
wait_stale
timeouts0=$(metric live_timeouts_total)
STOPPED=$(jq -r '.ranks[] | select(.rank == 3) | .pid' "$T/job.json")
kill -STOP "$STOPPED" || fail "cannot stop rank 3 (pid $STOPPED)"
start=$(date +%s.%N)
curl -sS -H 'X-Flightrec: 1' -o "$T/stopped.json" -w '%{http_code} %{time_total}\n' --max-time 20 \
	"$HTTP/v1/jobs/$JOB/ranks/3/stacks" >"$T/stopped.code" &
slow_pid=$!
curl -sS -H 'X-Flightrec: 1' -o "$T/stopped-job.json" -w '%{http_code}\n' --max-time 20 \
	"$HTTP/v1/jobs/$JOB/stacks" >"$T/stopped-job.code" &
job_pid=$!
track_pid "$slow_pid"
track_pid "$job_pid"
checks=0
while kill -0 "$slow_pid" 2>/dev/null; do
	out=$(curl -sS -H 'X-Flightrec: 1' -o /dev/null -w '%{http_code} %{time_total}' --max-time 2 "$HTTP/healthz")
	set -- $out
	[ "$1" = 200 ] || fail "/healthz answered $out while a look waited on a stopped rank"
	awk -v t="$2" 'BEGIN { exit !(t < 1.0) }' ||
		fail "/healthz took $2 s while a look waited on a stopped rank"
	checks=$((checks + 1))
	awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN { exit !(n - s < 15) }' ||
		fail "no answer about the stopped rank within 15 s"
	sleep 0.2
done
wait "$slow_pid"
wait "$job_pid"
[ "$checks" -ge 5 ] || fail "only $checks health checks during the wait"
read -r code secs <"$T/stopped.code"
[ "$code" = 504 ] || fail "stopped rank: HTTP $code, want 504: $(cat "$T/stopped.json")"
awk -v t="$secs" 'BEGIN { exit !(t >= 4 && t < 8) }' || fail "stopped rank's 504 after $secs s"
expect '.error | test("rank 3 .*did not answer within 5 s")' "$T/stopped.json"
[ "$(cat "$T/stopped-job.code")" = 200 ] || fail "job's stacks with a stopped rank: $(cat "$T/stopped-job.code")"
expect '.ranks_asked == 4 and .ranks_answered == 3 and .missing == "3"' "$T/stopped-job.json"
# Rank 3 did not answer twice: for its own look and for the job's.
[ "$(metric live_timeouts_total)" = $((timeouts0 + 2)) ] ||
	fail "live_timeouts_total $(metric live_timeouts_total), want $((timeouts0 + 2))"

# Let go, the rank answers again.
kill -CONT "$STOPPED"
STOPPED=
wait_for 15 sh -c "[ \$(curl -s -H 'X-Flightrec: 1' -o /dev/null -w '%{http_code}' --max-time 10 '$HTTP/v1/jobs/$JOB/ranks/3/stacks') = 200 ]" ||
	fail "rank 3 did not answer after SIGCONT"

# No file from any live look, on either side, and no incident.
found=$(find "$T/incidents" "$T/local" -name 'live-*' 2>/dev/null | head -n 3)
[ -z "$found" ] || fail "live looks left files: $found"
get "/v1/jobs/$JOB/incidents" incidents
expect '.incidents | length == 0' "$T/incidents.json"
# A rank the daemon knows but that is gone: 409, not a wait.
kill -KILL "$(jq -r '.ranks[] | select(.rank == 3) | .pid' "$T/job.json")"
gone() {
	http_get "/v1/jobs/$JOB" | jq -e '.ranks[] | select(.rank == 3) | .state != "connected"' >/dev/null 2>&1
}
wait_for 10 gone || fail "rank 3 still connected after SIGKILL"
get "/v1/jobs/$JOB/ranks/3/stacks" gone
[ "$CODE" = 409 ] || fail "stacks of a disconnected rank: HTTP $CODE, want 409: $(cat "$T/gone.json")"
expect '.error | test("rank 3 .*not connected")' "$T/gone.json"

# An agent that predates scopes answers every live look with its whole
# dump: the daemon asks it by scope and shows what was asked from the
# whole dump. This stand-in (job $OLD, rank 0) sends tests/data's dump,
# whose host is node07: the answer names the host its HELLO gave.
OLD=old-$JOB
agent old "$OLD" 0 4 whole
get "/v1/jobs/$OLD/ranks/0/stacks" oldstacks
[ "$CODE" = 200 ] || fail "an old agent's stacks: HTTP $CODE: $(cat "$T/oldstacks.json")"
expect '.host == "stand-in" and ([.threads[].tid] == [31337, 31340]) and
	.threads[0].frames[0].name == "PMPI_Bcast"' "$T/oldstacks.json"
get "/v1/jobs/$OLD/ranks/0/trace?last=2" oldtrace
[ "$CODE" = 200 ] || fail "an old agent's trace: HTTP $CODE: $(cat "$T/oldtrace.json")"
expect '[.entries[].record_id] == [41, 42]' "$T/oldtrace.json"
grep -Eq '^asked live-stacks-[0-9]+$' "$T/old.log" && grep -Eq '^asked live-trace2-[0-9]+$' "$T/old.log" &&
	[ "$(grep -c '^asked' "$T/old.log")" = 2 ] || fail "the old agent was asked: $(cat "$T/old.log")"

# A rank asked for its stacks that announces more than a look at stacks
# takes (4 MiB): refused at once, not waited for.
agent huge "huge-$JOB" 0 1 stall 67108864
get "/v1/jobs/huge-$JOB/ranks/0/stacks" huge
[ "$CODE" = 502 ] || fail "an oversized look: HTTP $CODE: $(cat "$T/huge.json")"
expect '.error | test("over the limit of a look at stacks")' "$T/huge.json"

# A rank that starts its answer and stalls: 504, and what it sent is let go.
agent stall "stall-$JOB" 0 1 stall 3000000
get "/v1/jobs/stall-$JOB/ranks/0/stacks" stall
[ "$CODE" = 504 ] || fail "a stalled upload: HTTP $CODE: $(cat "$T/stall.json")"
wait_for 3 held_below 65536 || fail "a stalled upload still holds $(metric live_bytes_held) bytes"

# A dump that names another rank is not shown as this one's; host and pid
# come from the rank's connection, not from its dump.
agent liar "liar-$JOB" 0 2 liar
get "/v1/jobs/liar-$JOB/ranks/0/stacks" liar
[ "$CODE" = 502 ] && expect '.error | test("another job or rank")' "$T/liar.json" ||
	fail "a dump of another rank: HTTP $CODE: $(cat "$T/liar.json")"
get "/v1/jobs/liar-$JOB/stacks" liarjob
[ "$CODE" = 200 ] || fail "the liar's job stacks: HTTP $CODE"
expect '.ranks_answered == 0 and .missing == "0-1" and (.why["0"] | test("another job or rank")) and
	.more_why == 0' "$T/liarjob.json"

# A rank with a dump of a few MB (85000 frames): while looks at it are
# parsed and answered, /healthz answers within 100 ms every time; the job's
# stacks read at most 128 frames of a thread and say what they left out.
agent big "big-$JOB" 0 1 big 85000
(for i in 1 2 3 4; do
	curl -sS -H 'X-Flightrec: 1' -o "$T/big$i.json" -w '%{http_code}\n' --max-time 15 "$HTTP/v1/jobs/big-$JOB/ranks/0/stacks"
	curl -sS -H 'X-Flightrec: 1' -o "$T/bigjob$i.json" -w '%{http_code}\n' --max-time 15 "$HTTP/v1/jobs/big-$JOB/stacks"
done >"$T/big.codes") &
big_pid=$!
track_pid "$big_pid"
checks=0
while kill -0 "$big_pid" 2>/dev/null; do
	out=$(curl -sS -H 'X-Flightrec: 1' -o /dev/null -w '%{http_code} %{time_total}' --max-time 2 "$HTTP/healthz")
	set -- $out
	[ "$1" = 200 ] && awk -v t="$2" 'BEGIN { exit !(t < 0.1) }' ||
		fail "/healthz answered $out while big looks were answered"
	checks=$((checks + 1))
	sleep 0.02
done
wait "$big_pid"
[ "$checks" -ge 5 ] || fail "only $checks health checks during the big looks"
[ "$(sort -u "$T/big.codes")" = 200 ] || fail "big looks: $(tr '\n' ' ' <"$T/big.codes")"
expect '.host == "stand-in" and (.threads[0].frames | length) == 85000' "$T/big1.json"
expect '.limits == {"threads_per_rank": 64, "frames_per_thread": 128} and
	.frames_left_out == 84872 and .threads_left_out == 0 and
	(.groups[0].frames | length) <= 128 and (.groups[0].thread.frames | length) == 128' "$T/bigjob1.json"
echo "note: $checks health checks while big looks were answered" >&2

# A stopping daemon answers a look still waiting with 503, not with a job
# whose every rank is missing.
agent silent "silent-$JOB" 0 1 silent
curl -sS -H 'X-Flightrec: 1' -o "$T/stopping.json" -w '%{http_code}' --max-time 15 "$HTTP/v1/jobs/silent-$JOB/stacks" \
	>"$T/stopping.code" &
stopping_pid=$!
track_pid "$stopping_pid"
wait_for 5 grep -q '^asked' "$T/silent.log" || fail "the silent stand-in was not asked"
kill -TERM "$DAEMON_PID"
wait "$stopping_pid"
[ "$(cat "$T/stopping.code")" = 503 ] && expect '.error == "the daemon is stopping"' "$T/stopping.json" ||
	fail "a look during shutdown: HTTP $(cat "$T/stopping.code"): $(cat "$T/stopping.json")"
echo "PASS live stacks: rank and job stacks, trace?last, 504 for a stopped rank, no files, shared and small looks, old agents, hostile agents, big dumps, shutdown"
