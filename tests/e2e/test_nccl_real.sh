#!/usr/bin/env bash
# The agent under a program linked with the real NCCL (2.28.9 here, no
# GPU): the program sees exactly NCCL's own results, and the agent's hooks
# ran (it started at ncclCommInitRank and reached the daemon).
. "$(dirname "$0")/lib.sh"

NCCL_LIB=${NCCL_LIB:-/usr/local/cuda/lib64}
if [ ! -e "$NCCL_LIB/libnccl.so.2" ]; then
	echo "SKIP real NCCL: no libnccl.so.2 in $NCCL_LIB"
	exit 0
fi
cc -std=gnu11 -O1 "$ROOT/tests/nccl/real_init.c" -L"$NCCL_LIB" -l:libnccl.so.2 \
	-Wl,-rpath,"$NCCL_LIB" -o "$T/real_init" || fail "cannot build against the real NCCL"
nm -D "$NCCL_LIB/libnccl.so.2" | grep -q ' T pncclAllReduce$' || fail "real NCCL lacks pncclAllReduce"

start_daemon --timeout 30 --heartbeat-timeout 30
"$T/real_init" >"$T/without.txt" 2>/dev/null || fail "program failed without the agent"
LD_PRELOAD=$PRELOAD FLIGHTREC_ADDR=127.0.0.1:$LISTEN_PORT FLIGHTREC_JOB=$JOB FLIGHTREC_RANK=0 \
	FLIGHTREC_WORLD_SIZE=1 FLIGHTREC_DUMP_DIR=$T/local "$T/real_init" >"$T/with.txt" 2>"$T/job.log" ||
	fail "program failed under the agent"
diff -u "$T/without.txt" "$T/with.txt" >&2 || fail "NCCL's results changed under the agent"
grep -q '^ncclGetVersion -> 0 (22809)$' "$T/with.txt" || fail "unexpected NCCL version: $(cat "$T/with.txt")"
grep -q '^ncclCommInitRank -> [1-9]' "$T/with.txt" || fail "ncclCommInitRank did not fail here: $(cat "$T/with.txt")"
# The hooks ran: the agent started at ncclCommInitRank and said hello.
wait_for 10 sh -c "curl -s $HTTP/v1/jobs/$JOB | jq -e '.ranks[0].pid > 0' >/dev/null" ||
	fail "the agent never reached the daemon: the hooks did not run"
echo "PASS real NCCL: results unchanged, hooks reached ($(grep CommInitRank "$T/with.txt"))"
