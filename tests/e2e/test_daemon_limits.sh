#!/usr/bin/env bash
# The daemon against fake agents speaking the wire protocol from bash:
# a job over the communicator limit keeps its connection (the extra
# communicator and what PROGRESS says of it are ignored and counted), an
# operation type this build does not know is shown as "unknown", a posted
# non-blocking operation never times out however old while a waited one
# does, a rank lost while another only has a posted receive from it opens
# no incident, a second process claiming a connected rank is refused while
# the same process may reconnect and a silent one is replaced, and a dump
# announcing a huge total costs the daemon no memory before its bytes come.
. "$(dirname "$0")/lib.sh"
# A connection the daemon closed must fail the test with a message, not
# kill the shell.
trap '' PIPE

. "$(dirname "$0")/frames.sh"

hello() { # hello FD JOB RANK WORLD PID HOST
	str "$2"; u32 "$3"; u32 "$4"; u32 "$5"; str "$6"; u32 2000; u64 $START_NS
	str "fake MPI 1.0"
	frame 1
	send "$1"
}
comm() { # comm FD ID RANK MEMBERS...
	local fd=$1 id=$2 rank=$3 m
	shift 3
	str "$id"; str "test"; u32 "$rank"; u32 $#
	for m in "$@"; do u32 "$m"; done
	frame 2
	send "$fd"
}
# An in-flight entry: COMM TYPE IS_P2P FLAGS PEER SEQ AGE_MS (1 double).
inflight() {
	# comm, type, is_p2p, flags, peer, peer_in_comm, seq, count, bytes, dtype
	str "$1"; u8 "$2"; u8 "$3"; u8 "$4"; u32 "$5"; u32 "$5"; u64 "$6"; u64 1; u64 8; str double
	u64 "$7"
}
heartbeat() {
	u64 $START_NS
	frame 4
	send "$1"
}
NONBLOCKING=1
WAITED=2
ALL_REDUCE=4
RECV=21

metric_at_least() { [ "$(metric "$1")" -ge "$2" ] 2>/dev/null; }
job_json() { http_get "/v1/jobs/$1" >"$T/job.json"; }
job_is() { # job_is JOB 'jq expression'
	job_json "$1" && jq -e "$2" "$T/job.json" >/dev/null 2>&1
}
daemon_vm_peak_kib() {
	awk '$1 == "VmPeak:" {print $2}' "/proc/$DAEMON_PID/status"
}

start_daemon --timeout 1 --heartbeat-timeout 60 --dump-deadline 8 --max-dump-size 20000000000

# A: 16384 communicators and one more, on one rank of a 2-rank job.
JA=$JOB-comms
connect A
hello "$A" "$JA" 0 2 4242 fakehost
comm "$A" world 0 0 1
P= PN=0
u32 0x43455246; u16 1; u16 2; u32 22; u32 0; u16 6
pre=$P
P= PN=0
u16 0; u32 0; u32 1; u32 0
post=$P
P= PN=0
for ((i = 0; i < 16384; i++)); do printf "${pre}c%05d${post}" "$i" || break; done >&"$A"
# world and c16383 (left out) progress; an op of a type from a newer agent
# on world, and one on the communicator left out that would have timed out.
u32 2
str world; u64 5; u64 4
str c16383; u64 9; u64 9
u32 2
inflight world 200 0 $NONBLOCKING -1 5 0
inflight c16383 $ALL_REDUCE 0 0 -1 9 100000
frame 3
send "$A"
heartbeat "$A"
wait_for 20 metric_at_least frames_received_total 16388 ||
	fail "the frames of job $JA were not all taken: $(http_get /metrics)"
metric_is comms_dropped_total 1 || fail "comms_dropped_total $(metric comms_dropped_total), want 1"
metric_is frames_rejected_total 0 || fail "a frame was rejected"
# What of the job matters here, without its 16384 communicators.
job_json "$JA"
jq '{communicators: (.communicators | length), rank: (.ranks[0] | {state, pid, host,
	ring_capacity, start_ns, inflight, world: .comms.world, comms: (.comms | length),
	dropped: (.comms | has("c16383"))})}' "$T/job.json" >"$T/comms.json"
expect '.communicators == 16384 and .rank.comms == 16384 and (.rank.dropped | not)' \
	"$T/comms.json"
expect '.rank | .state == "connected" and .pid == 4242 and .host == "fakehost"' "$T/comms.json"
expect ".rank | .ring_capacity == 2000 and .start_ns == $START_NS" "$T/comms.json"
expect '.rank.world | .last_entered == 5 and .last_completed == 4' "$T/comms.json"
expect '.rank.inflight | length == 1 and .[0].type == "unknown" and .[0].nonblocking' \
	"$T/comms.json"
[ "$(grep -c "has more than 16384 communicators" "$T/daemon.log")" = 1 ] ||
	fail "the communicator limit must be logged once"

# E: rank 1 goes away without goodbye; rank 0 only has a posted receive
# from it, which does not block rank 0: no disconnect incident.
JE=$JOB-lost
connect E0
connect E1
hello "$E0" "$JE" 0 2 501 fakehost
hello "$E1" "$JE" 1 2 502 fakehost
comm "$E0" world 0 0 1
comm "$E1" world 1 0 1
u32 0
u32 1
inflight world $RECV 1 $NONBLOCKING 1 1 60000
frame 3
send "$E0"
exec {E1}>&-

# C: a posted receive 10 minutes old never times out; a waited one does.
JP=$JOB-posted
JW=$JOB-waited
connect CP
connect CW
hello "$CP" "$JP" 0 1 601 fakehost
hello "$CW" "$JW" 0 1 602 fakehost
comm "$CP" world 0 0
comm "$CW" world 0 0
u32 0
u32 1
inflight world $RECV 1 $NONBLOCKING -1 1 600000
frame 3
send "$CP"
u32 0
u32 1
inflight world $RECV 1 $((NONBLOCKING | WAITED)) -1 1 5000
frame 3
send "$CW"

# B: a second process claiming a connected rank is refused, once logged;
# the same process reconnecting takes the rank over.
JB=$JOB-shared
connect B1
hello "$B1" "$JB" 0 1 100 host-one
wait_for 10 job_is "$JB" '.ranks[0].pid == 100' || fail "rank 0 of $JB not connected"
connect B2
hello "$B2" "$JB" 0 1 200 host-two
wait_for 10 metric_is connections_rejected_total 1 || fail "second process not refused"
connect B3
hello "$B3" "$JB" 0 1 200 host-two
wait_for 10 metric_is connections_rejected_total 2 || fail "second process not refused again"
job_is "$JB" '.ranks[0] | .pid == 100 and .host == "host-one" and .state == "connected"' ||
	fail "the refused process took the rank: $(cat "$T/job.json")"
[ "$(grep -c "job $JB rank 0: refusing a connection" "$T/daemon.log")" = 1 ] ||
	fail "the refusal must be logged once"
connect B4
hello "$B4" "$JB" 0 1 100 host-one
wait_for 10 grep -q "job $JB rank 0 reconnected" "$T/daemon.log" ||
	fail "the same process could not reconnect"
metric_is connections_rejected_total 2 || fail "the reconnect was refused"

# D: four ranks stuck in all_reduce; asked for dumps, each announces one of
# 4 GB and sends 16 bytes of it. Allocating what is announced would add
# 16 GB to the daemon's address space (or fail, refusing the dumps).
JD=$JOB-upload
declare -a D
for r in 0 1 2 3; do
	connect fd
	D[r]=$fd
	hello "$fd" "$JD" "$r" 4 $((700 + r)) fakehost
	comm "$fd" world "$r" 0 1 2 3
	u32 0
	u32 1
	inflight world $ALL_REDUCE 0 0 -1 1 5000
	frame 3
	send "$fd"
done
collecting() {
	inc=$(http_get "/v1/jobs/$JD/incidents" | jq -r '.incidents[] | select(.status == "collecting") | .id')
	[ -n "$inc" ]
}
wait_for 20 collecting || fail "no incident for job $JD"
peak=$(daemon_vm_peak_kib)
received=$(metric frames_received_total)
for r in 0 1 2 3; do
	str "$inc"; u64 0; u64 4000000000; u32 16
	for ((i = 0; i < 16; i++)); do byte 123; done
	frame 6
	send "${D[r]}"
done
wait_for 10 metric_at_least frames_received_total $((received + 4)) || fail "dump pieces not taken"
metric_is dumps_rejected_total 0 || fail "a dump announcement was refused"
grown=$(($(daemon_vm_peak_kib) - peak))
[ "$grown" -lt 1048576 ] || fail "announcing 4 dumps of 4 GB grew the daemon by $grown KiB"

# The waited receive times out: an incident, about it.
JOB=$JW
wait_incident 30
expect '.reason == "timeout" and .trigger.waited_s >= 5' "$INCIDENT/manifest.json"
# By now the watchdog has looked at every job many times.
for j in "$JA" "$JE" "$JP"; do
	[ -e "$T/incidents/$j" ] && fail "job $j got an incident: $(ls -R "$T/incidents/$j")"
	job_is "$j" '.status == "running" and (.incidents | length == 0)' ||
		fail "job $j: $(cat "$T/job.json")"
done
job_is "$JP" '.ranks[0].inflight[0] | .nonblocking and .waited_s == 0' ||
	fail "posted receive shown as waited: $(cat "$T/job.json")"
grep -q "job $JE rank 1 disconnected without saying goodbye" "$T/daemon.log" ||
	fail "rank 1 of $JE was not seen leaving"

# B, continued: an old connection silent past --heartbeat-timeout is replaced
# even by another process.
stop_daemon
start_daemon --timeout 60 --heartbeat-timeout 1 --dump-deadline 1
connect S1
hello "$S1" "$JB" 0 1 100 host-one
wait_for 10 job_is "$JB" '.ranks[0].state == "unresponsive"' || fail "rank 0 of $JB never went silent"
connect S2
hello "$S2" "$JB" 0 1 300 host-three
wait_for 10 job_is "$JB" '.ranks[0] | .pid == 300 and .host == "host-three"' ||
	fail "a silent connection was not replaced: $(cat "$T/job.json")"
metric_is connections_rejected_total 0 || fail "the replacement was refused"
echo "PASS daemon limits: comm limit, unknown ops, non-blocking timeouts, takeover, upload memory"
