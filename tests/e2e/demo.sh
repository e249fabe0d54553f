#!/usr/bin/env bash
# make demo: the daemon on loopback, a 4-rank MPI job with a planted hang
# (rank 2 never returns from a computation before its 6th allreduce) under
# the agent, and fr-analyze's verdict on the incident the daemon collected.
# Then, where /usr/bin/python3 has mpi4py (Debian's python3-mpi4py), the
# same for a 4-rank Python training loop (tests/python/train_loop.py) whose
# rank 2 stalls in load_batch(): its report shows where in the script each
# rank is. A wrong verdict fails the demo.
. "$(dirname "$0")/lib.sh"
JOB=demo

# show_incident JOB: waits for JOB's incident (60 s at most), lists its
# files, shows fr-analyze's report and its --json summary, and fails unless
# the verdict is a hang with rank 2 as its only culprit.
show_incident() {
	echo "== waiting for the daemon to notice the hang and collect every rank's dump"
	wait_incident 60
	echo "   incident: $INCIDENT"
	ls "$INCIDENT" | sed 's/^/     /'
	echo
	echo "== fr-analyze $INCIDENT"
	"$BIN/fr-analyze" "$INCIDENT"
	echo
	echo "== fr-analyze --json (for scripts)"
	analyze "$INCIDENT"
	jq -c '{verdict, culprits: [.culprits[] | {rank, reason}], op: {comm: .op.comm, seq: .op.seq, type: .op.type}, waiting_ranks}' \
		"$T/verdict.json"
	expect '.verdict == "hang" and [.culprits[].rank] == [2]'
}

echo "== starting flightrecd on loopback (timeout 3 s)"
start_daemon --timeout 3 --heartbeat-timeout 10
echo "   agents connect to 127.0.0.1:$LISTEN_PORT, HTTP on $HTTP"
echo "== mpirun -np 4 with LD_PRELOAD=build/lib/libflightrec.so; rank 2 will hang"
start_job 4 --scenario compute --culprit 2 --at 6
wait_for 20 sh -c "curl -s $HTTP/v1/jobs/demo | jq -e '.ranks | length == 4' >/dev/null" ||
	fail "the job's ranks did not connect"
echo "== live view while it runs: GET /v1/jobs/demo"
http_get /v1/jobs/demo | jq -c '.ranks[] | {rank, state, world: .comms.world}'
show_incident
stop_job

echo
PY=/usr/bin/python3
if ! $PY -c 'import mpi4py' 2>/dev/null; then
	echo "== no Python job: $PY cannot import mpi4py (install it with: apt-get install python3-mpi4py)"
	exit 0
fi
SCRIPT=$ROOT/tests/python/train_loop.py
JOB=demo-python
echo "== mpirun -np 4 $PY $(basename "$SCRIPT") with the agent; rank 2 will stall in load_batch()"
start_mpi_program 4 $PY "$SCRIPT" 2 3 100
show_incident
LOAD_LINE=$(grep -n 'LOAD_BATCH_LINE' "$SCRIPT" | cut -d: -f1)
expect ".culprits[0].python_frames[0] | .function == \"load_batch\" and .line == $LOAD_LINE"
exit 0
