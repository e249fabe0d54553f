#!/usr/bin/env bash
# Rank 1 of a Python MPI job with faulthandler enabled dies of SIGSEGV.
# Whether faulthandler was enabled before the agent's handler was
# installed (MPI_Init) or after it, faulthandler still prints the Python
# traceback, the daemon names the crash (verdict crash, rank 1, SIGSEGV),
# and the job exits as it does without the agent.
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
SCRIPT=$ROOT/tests/python/crash.py
$PY -c 'import mpi4py' 2>/dev/null || fail "Debian's python3-mpi4py is not installed"
ulimit -c 0

(
	unset LD_PRELOAD
	timeout -k 5 60 mpirun -np 3 $PY "$SCRIPT" before 1 5 >"$T/plain.log" 2>&1
	echo $? >"$T/plain.rc"
)
PLAIN_RC=$(cat "$T/plain.rc")
[ "$PLAIN_RC" -ne 0 ] && [ "$PLAIN_RC" -ne 124 ] || fail "without the agent the job exited $PLAIN_RC"
grep -q 'Fatal Python error: Segmentation fault' "$T/plain.log" ||
	fail "no faulthandler output without the agent: $(cat "$T/plain.log")"

start_daemon --timeout 30 --heartbeat-timeout 30
for order in before after; do
	JOB=e2e-$$-$order
	: >"$T/job.log"
	start_mpi_program 3 $PY "$SCRIPT" $order 1 5
	wait_job_exit 60
	[ "$JOB_RC" = "$PLAIN_RC" ] || fail "$order: exit status $JOB_RC under the agent, $PLAIN_RC without it"
	grep -q 'Fatal Python error: Segmentation fault' "$T/job.log" ||
		fail "$order: faulthandler printed nothing under the agent"
	grep -q 'in read_shard' "$T/job.log" ||
		fail "$order: faulthandler's traceback lacks read_shard"
	wait_incident 20
	analyze "$INCIDENT"
	[ "$RC" -eq 1 ] || fail "$order: fr-analyze exit $RC: $(cat "$T/analyze.err")"
	expect '.verdict == "crash" and [.culprits[].rank] == [1]'
	expect '.culprits[0].signal == "SIGSEGV" and .culprits[0].fault_addr == "0xdeadbeef000"'
	INCIDENT=
done
echo "PASS crash_python: faulthandler still speaks, the crash is named, the exit status is kept"
