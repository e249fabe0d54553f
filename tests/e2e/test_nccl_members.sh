#!/usr/bin/env bash
# The daemon assembles an NCCL communicator's member list from its members'
# COMM frames, each knowing only its own entry: /v1/jobs shows unknown
# entries as -1 until a member fills them; a report of another size or one
# contradicting a known entry is ignored and logged once; a known member
# not below the world size is refused. A rank that never enters the
# collective is named, by the live verdict and by fr-analyze from the
# manifest alone.
. "$(dirname "$0")/lib.sh"
trap '' PIPE

. "$(dirname "$0")/frames.sh"

hello() { # hello FD JOB RANK WORLD PID
	str "$2"; u32 "$3"; u32 "$4"; u32 "$5"; str fakehost; u32 2000; u64 $START_NS
	str "fake NCCL 2.28.9"
	frame 1
	send "$1"
}
U=4294967295
comm() { # comm FD ID RANK MEMBERS... (U: unknown)
	local fd=$1 id=$2 rank=$3 m
	shift 3
	str "$id"; str "ncclCommInitRank"; u32 "$rank"; u32 $#
	for m in "$@"; do u32 "$m"; done
	frame 2
	send "$fd"
}
inflight() {
	# comm, type, is_p2p, flags, peer, peer_in_comm, seq, count, bytes, dtype
	str "$1"; u8 "$2"; u8 "$3"; u8 "$4"; u32 "$5"; u32 "$5"; u64 "$6"; u64 1; u64 8; str float
	u64 "$7"
}
ALL_REDUCE=4
job_is() { http_get "/v1/jobs/$1" >"$T/job.json" && jq -e "$2" "$T/job.json" >/dev/null 2>&1; }

start_daemon --timeout 1 --heartbeat-timeout 60 --dump-deadline 1

declare -a F
for r in 0 1 2 3; do
	connect fd
	F[r]=$fd
	hello "$fd" "$JOB" "$r" 4 $((900 + r))
done
comm "${F[0]}" nccl-abc 0 0 $U $U $U
comm "${F[1]}" nccl-abc 1 $U 1 $U $U
wait_for 10 job_is "$JOB" '.communicators[0].members == [0,1,-1,-1]' ||
	fail "members after two reports: $(cat "$T/job.json")"
# Rank 3 contradicts rank 0's entry, twice; rank 2 gives another size.
comm "${F[3]}" nccl-abc 3 3 $U $U 3
comm "${F[3]}" nccl-abc 3 3 $U $U 3
comm "${F[2]}" nccl-abc 0 2 $U $U
comm "${F[2]}" nccl-abc 2 $U $U 2 $U
wait_for 10 job_is "$JOB" '.communicators[0] | .members == [0,1,2,3] and .size == 4' ||
	fail "merged members: $(cat "$T/job.json")"
[ "$(grep -c "communicator nccl-abc: rank 3 reports member 0 as global rank 3 where an earlier report gave 0; keeping 0" "$T/daemon.log")" = 1 ] ||
	fail "the conflict must be logged once"
[ "$(grep -c "communicator nccl-abc: rank 2 reports 3 members where an earlier report gave 4" "$T/daemon.log")" = 1 ] ||
	fail "the size conflict must be logged once"
[ "$(metric frames_rejected_total)" = 0 ] || fail "a frame was rejected"

# Ranks 0, 1, 3 wait in all_reduce #3; rank 2 is at #2. They have just
# entered it: the timeout then expires once all four reports are in, not
# on the first one the daemon reads.
for r in 0 1 2 3; do
	u32 1
	str nccl-abc; u64 $((r == 2 ? 2 : 3)); u64 2
	if [ "$r" = 2 ]; then
		u32 0
	else
		u32 1
		inflight nccl-abc $ALL_REDUCE 0 0 -1 3 0
	fi
	frame 3
	send "${F[r]}"
done
wait_incident 30
expect '.verdict.culprits | length == 1 and .[0].rank == 2 and .[0].reason == "not_entered"' "$INCIDENT/manifest.json"
expect '.verdict.op.comm_ranks == [0,1,2,3] and .verdict.op.comm_size == 4' "$INCIDENT/manifest.json"
expect '.communicators["nccl-abc"].ranks == [0,1,2,3]' "$INCIDENT/manifest.json"
expect '[.ranks[].pg_config["nccl-abc"].rank] == [0,1,2,3]' "$INCIDENT/manifest.json"
analyze "$INCIDENT"
expect '.culprits[0].rank == 2 and .op.comm_ranks == [0,1,2,3] and .op.comm_size == 4'

# A new run under the same job id (new processes) maps the communicator
# the other way round: its list starts afresh rather than conflicting.
for r in 0 1 2 3; do exec {F[r]}>&-; done
wait_for 10 job_is "$JOB" '[.ranks[].state] | all(. == "disconnected")' ||
	fail "the first run did not go away: $(cat "$T/job.json")"
for r in 0 1 2 3; do
	connect fd
	F[r]=$fd
	hello "$fd" "$JOB" "$r" 4 $((1900 + r))
done
comm "${F[0]}" nccl-abc 3 $U $U $U 0
wait_for 10 job_is "$JOB" '.communicators[0].members == [-1,-1,-1,0]' ||
	fail "the new run's list did not start afresh: $(cat "$T/job.json")"
for r in 1 2 3; do
	set -- $U $U $U $U
	m=("$@")
	m[3 - r]=$r
	comm "${F[r]}" nccl-abc $((3 - r)) "${m[@]}"
done
wait_for 10 job_is "$JOB" '.communicators[0].members == [3,2,1,0]' ||
	fail "the new run's list: $(cat "$T/job.json")"
[ "$(grep -c "communicator nccl-abc: rank . reports member" "$T/daemon.log")" = 1 ] ||
	fail "the new run's list was taken for a conflict"

# A known member not below the world size closes that connection.
connect X
hello "$X" "$JOB-bad" 0 2 999
comm "$X" nccl-bad 0 0 7
wait_for 10 grep -q "communicator member not below world size" "$T/daemon.log" ||
	fail "a member outside the world was not refused"
echo "PASS NCCL member lists: merged from partial reports, conflicts ignored and logged, culprit named"
