#!/usr/bin/env bash
# make demo: the daemon on loopback, a 4-rank MPI job with a planted hang
# (rank 2 never returns from a computation before its 6th allreduce) under
# the agent, and fr-analyze's verdict on the incident the daemon collected.
. "$(dirname "$0")/lib.sh"
JOB=demo

echo "== starting flightrecd on loopback (timeout 3 s)"
start_daemon --timeout 3 --heartbeat-timeout 10
echo "   agents connect to 127.0.0.1:$LISTEN_PORT, HTTP on $HTTP"
echo "== mpirun -np 4 with LD_PRELOAD=build/lib/libflightrec.so; rank 2 will hang"
start_job 4 --scenario compute --culprit 2 --at 6
wait_for 20 sh -c "curl -s $HTTP/v1/jobs/demo | jq -e '.ranks | length == 4' >/dev/null" ||
	fail "the job's ranks did not connect"
echo "== live view while it runs: GET /v1/jobs/demo"
http_get /v1/jobs/demo | jq -c '.ranks[] | {rank, state, world: .comms.world}'
echo "== waiting for the daemon to notice the hang and collect every rank's dump"
wait_incident 60
echo "   incident: $INCIDENT"
ls "$INCIDENT" | sed 's/^/     /'
echo
echo "== fr-analyze $INCIDENT"
"$BIN/fr-analyze" "$INCIDENT"
echo
echo "== fr-analyze --json (for scripts)"
"$BIN/fr-analyze" --json "$INCIDENT" | jq -c '{verdict, culprits: [.culprits[] | {rank, reason}], op: {comm: .op.comm, seq: .op.seq, type: .op.type}, waiting_ranks}'
exit 0
