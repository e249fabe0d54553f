#!/usr/bin/env bash
# MPI called through a handle, as Julia's ccall and Python's ctypes call it:
# libmpi dlopened RTLD_LOCAL, every function looked up with
# dlsym(handle, name). The agent's dlsym answers with its hooks: the job
# runs unchanged, and rank 1's stuck computation before barrier #3 is named.
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
SCRIPT=$ROOT/tests/python/ctypes_hang.py

mpirun -np 2 -x LD_PRELOAD="$PRELOAD" ${ASAN_OPTIONS:+-x ASAN_OPTIONS} \
	-x FLIGHTREC_ADDR=127.0.0.1:1 -x FLIGHTREC_DUMP_DIR="$T/local" \
	$PY "$SCRIPT" -1 0 10 >"$T/clean.log" 2>&1 ||
	fail "a clean run fails under the agent: $(tail -n 20 "$T/clean.log")"
grep -qx done "$T/clean.log" || fail "a clean run did not finish: $(cat "$T/clean.log")"

start_daemon --timeout 2 --heartbeat-timeout 10
start_mpi_program 3 $PY "$SCRIPT" 1 3 100
wait_incident 40
analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "hang"'
expect '[.culprits[].rank] == [1] and .culprits[0].reason == "not_entered"'
expect '.op.type == "barrier" and .op.seq == 3 and .op.comm == "world"'
expect '.waiting_ranks == [0,2]'
echo "PASS mpi by handle: MPI looked up with dlsym(handle) is recorded; rank 1 named before barrier #3"
