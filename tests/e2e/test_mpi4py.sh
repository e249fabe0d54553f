#!/usr/bin/env bash
# A Python MPI job (Debian's mpi4py, which loads libmpi with dlopen after
# the agent): under the agent it runs and prints exactly what it prints
# without it, and a planted hang is diagnosed like a C program's.
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
SCRIPT=$ROOT/tests/python/mpi_hang.py
$PY -c 'import mpi4py' 2>/dev/null || fail "Debian's python3-mpi4py is not installed"

# No daemon, no hang: the same output with and without the agent.
mpirun -np 3 $PY "$SCRIPT" -1 0 20 >"$T/plain.out" 2>&1 ||
	fail "the job fails without the agent: $(cat "$T/plain.out")"
mpirun -np 3 -x LD_PRELOAD="$PRELOAD" ${ASAN_OPTIONS:+-x ASAN_OPTIONS} \
	-x FLIGHTREC_ADDR=127.0.0.1:1 -x FLIGHTREC_DUMP_DIR="$T/local" \
	$PY "$SCRIPT" -1 0 20 >"$T/agent.raw" 2>&1 ||
	fail "the job fails under the agent: $(cat "$T/agent.raw")"
grep -v "^flightrec:" "$T/agent.raw" >"$T/agent.out"
[ "$(wc -l <"$T/plain.out")" -eq 3 ] || fail "unexpected output: $(cat "$T/plain.out")"
cmp -s "$T/plain.out" "$T/agent.out" ||
	fail "the agent changed the job's output: $(diff "$T/plain.out" "$T/agent.out")"

# Rank 1 of 3 computes forever before all_reduce #4.
start_daemon --timeout 2 --heartbeat-timeout 10
start_mpi_program 3 $PY "$SCRIPT" 1 4 100
wait_incident 40
analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "hang"'
expect '[.culprits[].rank] == [1] and .culprits[0].reason == "not_entered"'
expect '.op.type == "all_reduce" and .op.seq == 4 and .op.comm == "world"'
expect '.op.comm_ranks == [0,1,2]'
expect '.waiting_ranks == [0,2]'
echo "PASS mpi4py: output unchanged under the agent; rank 1 named before all_reduce #4"
