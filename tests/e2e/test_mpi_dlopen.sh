#!/usr/bin/env bash
# MPI loaded at run time from C: a host not linked against MPI dlopens
# (RTLD_LOCAL) a plug-in that links libmpi and runs the planted-fault
# program there. The agent finds libmpi through the plug-in: the job runs
# under it, and rank 2's stuck computation is named as in a linked program.
. "$(dirname "$0")/lib.sh"

HOST=$BUILD_DIR/tests/dlopen_mpi
PLUGIN=$BUILD_DIR/tests/mpi_hang_plugin.so
nm -D "$HOST" | grep -qi mpi && fail "the host program references MPI itself"

# A clean run: every rank finishes and exits 0 under the agent.
mpirun -np 3 -x LD_PRELOAD="$PRELOAD" ${ASAN_OPTIONS:+-x ASAN_OPTIONS} \
	-x FLIGHTREC_ADDR=127.0.0.1:1 -x FLIGHTREC_DUMP_DIR="$T/local" \
	"$HOST" "$PLUGIN" --iters 10 --scenario none >"$T/clean.log" 2>&1 ||
	fail "a clean run fails under the agent: $(tail -n 20 "$T/clean.log")"

start_daemon --timeout 2 --heartbeat-timeout 10
start_mpi_program 4 "$HOST" "$PLUGIN" --scenario compute --culprit 2 --at 3
wait_incident 40
analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "hang"'
expect '[.culprits[].rank] == [2] and .culprits[0].reason == "not_entered"'
expect '.op.type == "all_reduce" and .op.seq == 3 and .op.comm == "world"'
expect '.waiting_ranks == [0,1,3]'
echo "PASS mpi dlopen: MPI loaded late through a plug-in; rank 2 named before all_reduce #3"
