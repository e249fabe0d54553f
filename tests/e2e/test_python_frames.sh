#!/usr/bin/env bash
# A Python training loop under the agent (Debian's mpi4py), 4 ranks: its
# output and exit status are what they are without the agent; when rank 2
# stalls in load_batch() before an allreduce, the dumps carry each thread's
# Python frames (read by the agent without the GIL), rank 2's innermost is
# load_batch on the sleeping line, the others' is train_step on the
# allreduce line, the data-loader thread's are its own, a live look shows
# them too, the job's live stacks are grouped by them, and fr-analyze
# names rank 2, shows its Python stack among its native frames (each group
# of Python frames beside the call of the interpreter's loop that runs it)
# and merges the ranks' stacks by Python frames. A rank spinning in pure
# Python while
# holding the GIL is read as well.
. "$(dirname "$0")/lib.sh"

need_train_loop

# No daemon, no stall: the same output and status with and without the agent.
mpirun -np 4 $PY "$SCRIPT" -1 0 20 >"$T/plain.out" 2>&1
plain_rc=$?
mpirun -np 4 -x LD_PRELOAD="$PRELOAD" ${ASAN_OPTIONS:+-x ASAN_OPTIONS} \
	-x FLIGHTREC_ADDR=127.0.0.1:1 -x FLIGHTREC_DUMP_DIR="$T/local" \
	$PY "$SCRIPT" -1 0 20 >"$T/agent.raw" 2>&1
agent_rc=$?
grep -v "^flightrec:" "$T/agent.raw" >"$T/agent.out"
[ "$plain_rc" -eq 0 ] && [ "$(wc -l <"$T/plain.out")" -eq 1 ] ||
	fail "the job fails without the agent (exit $plain_rc): $(cat "$T/plain.out")"
[ "$agent_rc" -eq "$plain_rc" ] || fail "exit status $agent_rc under the agent, $plain_rc without"
cmp -s "$T/plain.out" "$T/agent.out" ||
	fail "the agent changed the job's output: $(diff "$T/plain.out" "$T/agent.out")"

# Rank 2 sleeps in load_batch() before the allreduce of step 3.
start_daemon --timeout 3 --heartbeat-timeout 10
start_mpi_program 4 $PY "$SCRIPT" 2 3 100
wait_incident 40
analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "hang"'
expect '[.culprits[].rank] == [2] and .culprits[0].reason == "not_entered"'
expect '.waiting_ranks == [0,1,3]'

# The stalled rank's dump: a thread whose innermost Python frame is
# load_batch, in the script, on the line that sleeps, called from main.
D2=$INCIDENT/rank-2.json
expect '.version == "1.11"' "$D2"
expect "[.threads[] | select(.python_frames) | .python_frames[0]] |
	any(.function == \"load_batch\" and .file == \"$SCRIPT\" and .line == $LOAD_LINE)" "$D2"
expect '[.threads[] | select(.python_frames) | .python_frames | map(.function)] |
	any(. == ["load_batch", "main", "<module>"])' "$D2"
# The data-loader thread has its own Python frames: prefetch, under
# threading's own.
expect '[.threads[] | select(.python_frames) | .python_frames | map(.function)] |
	any(index("prefetch") and index("Thread.run"))' "$D2"
# Where each call of the interpreter's loop began: main runs in <module>'s
# call; the thread's start calls Thread._bootstrap, and Thread.run calls
# prefetch through a C call (target(*args)), each in a call of its own.
expect '[.threads[] | select(.python_frames) | .python_frames | map(.entry // false)] |
	any(. == [false, false, true])' "$D2"
expect '[.threads[] | select(.python_frames) | .python_frames | map(select(.entry) | .function)] |
	any(. == ["prefetch", "Thread._bootstrap"])' "$D2"
# A waiting rank is in train_step, on its allreduce line.
expect "[.threads[] | select(.python_frames) | .python_frames[0]] |
	any(.function == \"train_step\" and .line == $REDUCE_LINE)" "$INCIDENT/rank-0.json"
# --json carries the culprit's Python frames.
expect ".culprits[0].python_frames[0] | .function == \"load_batch\" and .line == $LOAD_LINE"

# The report shows them under the culprit.
"$BIN/fr-analyze" "$INCIDENT" >"$T/report.txt"
grep -q "load_batch ($(basename "$SCRIPT"):$LOAD_LINE)" "$T/report.txt" ||
	fail "the report lacks rank 2's Python frame: $(cat "$T/report.txt")"
# ... among its native frames: after the C calls time.sleep made, before
# the call of the loop that runs them.
grep -A 3 "py#0 load_batch" "$T/report.txt" | tr -d '\n' | grep -qE \
	"py#0 load_batch .*py#1 main .*py#2 <module> .* #[0-9]+ _PyEval_EvalFrameDefault\+" ||
	fail "rank 2's Python frames are not among its native ones: $(cat "$T/report.txt")"
# Merged stacks group ranks by Python frames: the three waiting ranks are on
# the same line of the script, whatever MPI call each is caught in.
NAME=$(basename "$SCRIPT")
grep -qE "^  3 ranks \(0-1,3\): train_step \($NAME:$REDUCE_LINE\) <- main " "$T/report.txt" &&
	grep -qE "^  1 rank \(2\): load_batch \($NAME:$LOAD_LINE\) <- main " "$T/report.txt" ||
	fail "stacks not merged by Python frames: $(sed -n '/^Stacks/,$p' "$T/report.txt")"
# While the job stays stuck, a live look at rank 2's stacks carries them too.
http_get "/v1/jobs/$JOB/ranks/2/stacks" >"$T/live2.json" ||
	fail "live look at rank 2's stacks failed: $(cat "$T/live2.json")"
expect "[.threads[] | select(.python_frames) | .python_frames[0]] |
	any(.function == \"load_batch\" and .line == $LOAD_LINE)" "$T/live2.json"
# The job's live stacks are grouped by Python frames as fr-analyze groups
# them: rank 2 alone in load_batch, the others on their allreduce line.
http_get "/v1/jobs/$JOB/stacks" >"$T/live-job.json" ||
	fail "live look at the job's stacks failed: $(cat "$T/live-job.json")"
expect "[.groups[] | select(.ranks == \"2\")][0].python_frames[0] |
	.function == \"load_batch\" and .file == \"$SCRIPT\" and .line == $LOAD_LINE" "$T/live-job.json"
expect "[.groups[] | select(.ranks == \"0-1,3\")][0].python_frames[0] |
	.function == \"train_step\" and .line == $REDUCE_LINE" "$T/live-job.json"
stop_job

# Rank 2 spinning in pure Python, holding the GIL, is read just as well.
JOB=$JOB-spin
start_mpi_program 4 $PY "$SCRIPT" 2 3 100 spin
wait_incident 40
expect "[.threads[] | select(.python_frames) | .python_frames[0]] |
	any(.function == \"load_batch\" and (.line == $SPIN_LINE or .line == $SPIN_LINE - 1))" \
	"$INCIDENT/rank-2.json"
echo "PASS python frames: output unchanged; rank 2 named, in load_batch (line $LOAD_LINE)"
