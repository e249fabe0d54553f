#!/usr/bin/env bash
# Rank 2's NCCL communicator fails under its 5th all_reduce (the stand-in's
# FAKE_NCCL_ASYNC_ERROR: ncclCommGetAsyncError says ncclRemoteError, and
# ncclGetLastError why), while ranks 0, 1 and 3 wait in that all_reduce.
# The agent's link thread finds it, the daemon opens an incident at once
# (reason nccl_error, long before the 30 s timeout), and fr-analyze's
# verdict is crash, rank 2 the culprit with reason nccl_error, the result
# and NCCL's text.
. "$(dirname "$0")/lib.sh"

start_daemon --timeout 30 --heartbeat-timeout 30
NCCL_ENV="FAKE_NCCL_ASYNC_ERROR=2:5" start_nccl_job 4 --scenario none
wait_incident 20
M=$INCIDENT/manifest.json
expect '.reason == "nccl_error" and .trigger.rank == 2' "$M"
expect '[.ranks[] | select(.rank == 2)][0].nccl_error | .result == 6 and .result_name == "ncclRemoteError" and (.comm | startswith("nccl-"))' "$M"
grep -q "job $JOB rank 2 NCCL error on nccl-.*: ncclRemoteError (6): fake-nccl: remote process exited" "$T/daemon.log" ||
	fail "the daemon did not log the NCCL error"
grep -q "flightrec: rank 2: NCCL error on nccl-.*: ncclRemoteError" "$T/job.log" ||
	fail "the agent did not say it on stderr"
http_get "/v1/jobs/$JOB" >"$T/job.json"
expect '[.ranks[] | select(.rank == 2)][0].nccl_error.result == 6' "$T/job.json"

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "crash"'
expect '[.culprits[].rank] == [2] and .culprits[0].reason == "nccl_error"'
expect '.culprits[0].nccl_result == 6 and .culprits[0].nccl_result_name == "ncclRemoteError"'
expect '.culprits[0].message | contains("remote process exited or there was a network error")'
expect '.summary | startswith("rank 2 ") and contains("hit an NCCL error (ncclRemoteError on nccl-")'
"$BIN/fr-analyze" "$INCIDENT" >"$T/analyze.txt" 2>&1
grep -q "NCCL error: ncclRemoteError (6) on nccl-" "$T/analyze.txt" ||
	fail "the report does not say it: $(cat "$T/analyze.txt")"
echo "PASS nccl_async_error: an asynchronous NCCL error is named at once, with NCCL's result and text"
