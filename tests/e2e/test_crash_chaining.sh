#!/usr/bin/env bash
# The agent's crash handler runs the application's own SIGSEGV handler
# first and changes nothing it does (tests/mpi/chain.c, one rank each):
#   - a handler that makes the page writable and returns, the same
#     instruction faulting again and again (a garbage collector's write
#     barrier): the rank runs to the end, exit 0, no crash reported;
#   - a handler that siglongjmp()s out of a probe, several times: the rank
#     runs to the end, exit 0, no crash reported;
#   - a handler installed with SA_RESETHAND that returns: the fault happens
#     again and kills the rank; the crash is reported (an incident, reason
#     crash), and the exit status is the one the job has without the agent;
#   - abort() with no handler (hang.c's abort scenario): the crash is named
#     SIGABRT, and the exit status is the one without the agent.
. "$(dirname "$0")/lib.sh"

CHAIN=$BUILD_DIR/tests/mpi_chain
[ -x "$CHAIN" ] || fail "$CHAIN not built (make $CHAIN)"
ulimit -c 0

# plain_rc NAME PROGRAM ARGS...: the exit status of the one-rank job without
# the agent.
plain_rc() {
	local name=$1
	shift
	(
		unset LD_PRELOAD
		timeout -k 5 30 mpirun -np 1 "$@" >>"$T/$name-plain.log" 2>&1
		echo $? >"$T/$name-plain.rc"
	)
	cat "$T/$name-plain.rc"
}

# run_one NAME PROGRAM ARGS...: the one-rank job under the agent, as job
# $JOB-NAME, until it exits (at most 30 s); sets JOB and JOB_RC, keeps its
# output in $T/NAME.log.
run_one() {
	local name=$1
	shift
	JOB=$BASE-$name
	start_mpi_program 1 "$@"
	wait_job_exit 30
	mv "$T/job.log" "$T/$name.log"
}

no_crash() {
	grep -q "job $JOB rank 0 crashed" "$T/daemon.log" && fail "$1: the daemon was told of a crash"
	grep -q "flightrec: rank 0: crash" "$T/$1.log" && fail "$1: the agent reported a crash: $(cat "$T/$1.log")"
	[ -e "$T/incidents/$JOB" ] && fail "$1: an incident was opened: $(ls -R "$T/incidents/$JOB")"
	return 0
}

BASE=$JOB
start_daemon --timeout 30 --heartbeat-timeout 30

run_one fixup "$CHAIN" --scenario fixup --times 5
[ "$JOB_RC" -eq 0 ] || fail "fixup exited $JOB_RC: $(cat "$T/fixup.log")"
grep -q '^fixup ok' "$T/fixup.log" || fail "fixup did not complete: $(cat "$T/fixup.log")"
no_crash fixup

run_one probe "$CHAIN" --scenario probe --times 5
[ "$JOB_RC" -eq 0 ] || fail "probe exited $JOB_RC: $(cat "$T/probe.log")"
grep -q '^probe ok' "$T/probe.log" || fail "probe did not complete: $(cat "$T/probe.log")"
no_crash probe

# crash_reported NAME SIGNAL: the daemon heard of it and opened its incident.
crash_reported() {
	grep -q "job $JOB rank 0 crashed: $2" "$T/daemon.log" ||
		fail "$1: the daemon was not told of a $2 crash: $(cat "$T/$1.log")"
	wait_incident 20
	expect ".reason == \"crash\" and .trigger.rank == 0 and .verdict.verdict == \"crash\"" "$INCIDENT/manifest.json"
	expect "[.ranks[] | select(.rank == 0)][0].crash.signal == \"$2\"" "$INCIDENT/manifest.json"
}

want=$(plain_rc resethand "$CHAIN" --scenario resethand)
[ "$want" -ne 0 ] && [ "$want" -ne 124 ] || fail "resethand without the agent exited $want"
run_one resethand "$CHAIN" --scenario resethand
[ "$JOB_RC" = "$want" ] || fail "resethand: exit status $JOB_RC under the agent, $want without it"
grep -q 'on_resethand: SIGSEGV, returning' "$T/resethand.log" || fail "resethand: the application's handler did not run"
crash_reported resethand SIGSEGV

want=$(plain_rc abort "$HANG" --scenario abort --culprit 0 --at 2)
[ "$want" -ne 0 ] && [ "$want" -ne 124 ] || fail "abort without the agent exited $want"
run_one abort "$HANG" --scenario abort --culprit 0 --at 2
[ "$JOB_RC" = "$want" ] || fail "abort: exit status $JOB_RC under the agent, $want without it"
crash_reported abort SIGABRT
analyze "$INCIDENT"
expect '.verdict == "crash" and .culprits[0].signal == "SIGABRT"'
expect '[.culprits[0].stack[].name] | index("check_shard") != null'
echo "PASS crash_chaining: handlers that fix a fault or jump out of it keep the rank alive; SA_RESETHAND and abort() crashes are reported, exit status unchanged"
