#!/usr/bin/env bash
# A rank that segfaults in a job behind node daemons (protocol 7). A
# 4-rank MPI job, ranks 0-1 on node daemon node-a and 2-3 on node-b,
# rank 2 segfaulting in load_shard before all_reduce #10; mpirun then
# tears the job down. node-b tells the central daemon rank 2 crashed
# (NODE_RANKS), which opens the incident at once (reason crash) and asks
# both nodes; node-b, whose rank is dead, sends the summary of its live
# view of it (signal, stack, where it was). The central incident's
# verdict, and fr-analyze's on its directory, is crash: rank 2 SIGSEGV in
# load_shard, not a disconnection.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/node_daemons.sh"
[ "$SANITIZER" = thread ] && skip "ThreadSanitizer holds the stack-capture signal back while a rank polls in uninstrumented libmpi"

make_token
start_daemon --token-file "$TOKEN" --dump-deadline 10
PORT_A=$(free_port)
PORT_B=$(free_port)
NODE_NAMING=env start_node node-a "$PORT_A" --token-file "$TOKEN" --timeout 3600 --heartbeat-timeout 3600
NODE_NAMING=env start_node node-b "$PORT_B" --token-file "$TOKEN" --timeout 3600 --heartbeat-timeout 3600
AGENT_ENV="-x FLIGHTREC_TOKEN_FILE=$TOKEN" \
	start_split_job 4 "127.0.0.1:$PORT_A" "127.0.0.1:$PORT_B" --scenario segv --culprit 2 --at 10 --step-ms 100
wait_job_exit 60
[ "$JOB_RC" -ne 0 ] || fail "the job exited 0 although a rank segfaulted"

wait_incident 30
M=$INCIDENT/manifest.json
expect '.reason == "crash" and .trigger.rank == 2' "$M"
expect '.verdict.verdict == "crash" and ([.verdict.culprits[] | select(.rank == 2)][0].signal == "SIGSEGV")' "$M"
expect '[.ranks[] | select(.rank == 2)][0] | .answer == "received" and .node == "node-b"' "$M"
grep -q "job $JOB: rank 2 crashed: the central daemon is told" "$T"/node-b.log ||
	fail "node-b opened its own incident instead of leaving it to the central daemon: $(grep -i "incident\|crash" "$T"/node-b.log)"

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "crash"'
expect '[.culprits[] | select(.rank == 2)][0] | .reason == "crashed" and .signal == "SIGSEGV" and .fault_addr == "0x0"'
expect '[.culprits[] | select(.rank == 2)][0] | [.stack[].name] | index("load_shard") == 0'
expect '.summary | contains("crashed (SIGSEGV at 0x0 in load_shard)")'
echo "PASS cluster crash: a rank that segfaults behind a node daemon is named crashed, SIGSEGV in load_shard, by the central daemon at once"
