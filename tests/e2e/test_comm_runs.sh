#!/usr/bin/env bash
# Member lists as runs on the wire (protocol 5, COMM_RUNS): an agent asks
# each daemon with VERSION whether it reads them, and
#  1. a daemon of protocol 5 (a stand-in that prints what it reads) gets
#     world of 6 ranks as one run from every rank, never a COMM;
#  2. a daemon of protocol 4 (the stand-in closing at the first frame of
#     version 5, as such a daemon does) is asked twice per rank (one
#     close could be a drop for another reason): each rank says so once on
#     stderr, reconnects and sends COMM with all 6 members, and is never
#     asked again;
#  2b. a daemon of protocol 5 that drops each rank's first connection at
#     its VERSION is asked again, and gets runs, not COMM;
#  3. flightrecd itself takes the runs into the job's member list: its job
#     view lists world's 6 members.
. "$(dirname "$0")/lib.sh"
SLEEPER=$BUILD_DIR/tests/mpi_sleeper
[ -x "$SLEEPER" ] || fail "$SLEEPER not built (make tests)"

# start_fake MODE: the stand-in daemon, its output in $T/fake.log.
start_fake() {
	rm -f "$T/fake.port"
	: >"$T/fake.log"
	python3 "$ROOT/tests/e2e/fake_daemon.py" "$T/fake.port" "$1" >"$T/fake.log" 2>&1 &
	FAKE_PID=$!
	track_pid $FAKE_PID
	wait_for 10 test -s "$T/fake.port" || fail "the fake daemon ($1) did not start"
	FAKE=127.0.0.1:$(cat "$T/fake.port")
}
# frames TYPE: lines of the stand-in's output about frames of TYPE.
frames() { grep -c "^frame [0-9]* $1\b" "$T/fake.log"; }

# 1. Protocol 5: every rank's world is one run.
start_fake v5
: >"$T/job.log"
AGENT_ADDR=$FAKE start_mpi_program 6 "$SLEEPER" sleep 30
wait_for 30 sh -c "[ \$(grep -c '^frame [0-9]* comm_runs 1\$' '$T/fake.log') -ge 6 ]" ||
	fail "the ranks did not send world as one run: $(cat "$T/fake.log")"
[ "$(frames comm)" = 0 ] || fail "a rank sent COMM to a daemon of protocol 5: $(cat "$T/fake.log")"
[ "$(frames version)" = 6 ] || fail "want one VERSION per rank: $(cat "$T/fake.log")"
stop_job
kill "$FAKE_PID" 2>/dev/null
wait "$FAKE_PID" 2>/dev/null

# 2. Protocol 4: asked once, then COMM in full.
start_fake v4
: >"$T/job.log"
AGENT_ADDR=$FAKE start_mpi_program 6 "$SLEEPER" sleep 30
wait_for 30 sh -c "[ \$(grep -c '^frame [0-9]* comm 6\$' '$T/fake.log') -ge 6 ]" ||
	fail "the ranks did not send COMM after the refusal: $(cat "$T/fake.log")"
[ "$(frames comm_runs)" = 0 ] || fail "a rank sent COMM_RUNS to a daemon of protocol 4"
[ "$(grep -c 'version: closing' "$T/fake.log")" = 12 ] ||
	fail "want each rank to ask twice: $(cat "$T/fake.log")"
[ "$(grep -c 'predates protocol 5' "$T/job.log")" = 6 ] ||
	fail "want each rank to say once that the daemon predates protocol 5: $(cat "$T/job.log")"
stop_job
kill "$FAKE_PID" 2>/dev/null
wait "$FAKE_PID" 2>/dev/null

# 2b. A connection dropped on the question: asked again, runs after all.
start_fake drop5
: >"$T/job.log"
AGENT_ADDR=$FAKE start_mpi_program 6 "$SLEEPER" sleep 30
wait_for 30 sh -c "[ \$(grep -c '^frame [0-9]* comm_runs 1\$' '$T/fake.log') -ge 6 ]" ||
	fail "after a dropped connection the ranks did not send world as one run: $(cat "$T/fake.log")"
[ "$(grep -c 'version: dropped' "$T/fake.log")" = 6 ] || fail "want each rank's first VERSION dropped: $(cat "$T/fake.log")"
[ "$(frames comm)" = 0 ] || fail "a rank took one dropped connection for protocol 4: $(cat "$T/fake.log")"
grep -q 'predates protocol 5' "$T/job.log" && fail "a rank said the daemon predates protocol 5: $(cat "$T/job.log")"
stop_job
kill "$FAKE_PID" 2>/dev/null
wait "$FAKE_PID" 2>/dev/null

# 3. flightrecd.
start_daemon
: >"$T/job.log"
start_mpi_program 6 "$SLEEPER" sleep 30
wait_for 30 sh -c "curl -s '$HTTP/v1/jobs/$JOB' | jq -e '.communicators[] | select(.size == 6) | .members == [0,1,2,3,4,5]' >/dev/null" ||
	fail "the daemon's view of world is not its 6 members: $(curl -s "$HTTP/v1/jobs/$JOB" | jq -c .communicators)"
metric_is frames_rejected_total 0 || fail "the daemon rejected frames: $(cat "$T/daemon.log")"
stop_job
echo "ok: runs to protocol 5, COMM to protocol 4, the daemon's list whole"
