# Shared helpers of the end-to-end tests: start the real daemon on
# ephemeral ports, run a real mpirun job with the agent preloaded, wait for
# conditions (never for a fixed time), assert on fr-analyze's JSON, and
# clean up every process on exit, whatever happens.
#
# Each test script sources this file, then calls its functions.

set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_DIR=$ROOT/${BUILD:-build}
BIN=$BUILD_DIR/bin
AGENT=$BUILD_DIR/lib/libflightrec.so
HANG=$BUILD_DIR/tests/mpi_hang
NCCL_HANG=$BUILD_DIR/tests/nccl/nccl_hang
T=$(mktemp -d /tmp/flightrec-e2e.XXXXXX)
DAEMON_PID=
JOB_PID=
JOB=e2e-$$-$RANDOM
INCIDENT=

# Open MPI as root, oversubscribed, on this host's shared memory only.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl=self,vader
export OMPI_MCA_btl_vader_single_copy_mechanism=none

# A sanitizer build of the agent needs the sanitizer's runtime loaded first;
# Open MPI's own allocations at exit are not ours to report.
PRELOAD=$AGENT
sanitizer_rt=$(ldd "$AGENT" 2>/dev/null | awk '/lib(asan|ubsan|tsan)\.so/ {print $3; exit}')
if [ -n "$sanitizer_rt" ]; then
	PRELOAD=$sanitizer_rt:$AGENT
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
fi
# Which sanitizer the build runs under (address, undefined, thread), or "".
case $sanitizer_rt in
*libasan*) SANITIZER=address ;;
*libtsan*)
	SANITIZER=thread
	export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS }suppressions=$ROOT/tests/e2e/tsan.supp"
	;;
*libubsan*) SANITIZER=undefined ;;
*) SANITIZER= ;;
esac

fail() {
	echo "FAIL: $*" >&2
	for f in "$T"/daemon.log "$T"/job.log; do
		[ -s "$f" ] && { echo "--- $f (last 30 lines)" >&2; tail -n 30 "$f" >&2; }
	done
	exit 1
}

# skip REASON: the test cannot run here (tests/e2e/run counts it as
# skipped, not failed, and prints the reason).
skip() {
	echo "SKIP: $*"
	exit 77
}

# need_train_loop: the Python training loop of the Python-frames tests:
# Debian's CPython 3.11 with mpi4py in PY, tests/python/train_loop.py in
# SCRIPT, and the lines its markers name in LOAD_LINE, REDUCE_LINE and
# SPIN_LINE; skips where that interpreter or mpi4py is missing.
need_train_loop() {
	PY=/usr/bin/python3
	SCRIPT=$ROOT/tests/python/train_loop.py
	$PY -c 'import mpi4py' 2>/dev/null ||
		skip "/usr/bin/python3 cannot import mpi4py (apt-get install python3-mpi4py)"
	[ "$($PY -c 'import sys; print(sys.version_info[:2] == (3, 11))')" = True ] ||
		skip "/usr/bin/python3 is not CPython 3.11, the version this test expects (Debian 12)"
	LOAD_LINE=$(grep -n 'LOAD_BATCH_LINE' "$SCRIPT" | cut -d: -f1)
	REDUCE_LINE=$(grep -n 'ALLREDUCE_LINE' "$SCRIPT" | cut -d: -f1)
	SPIN_LINE=$(grep -n 'SPIN_LINE' "$SCRIPT" | cut -d: -f1)
}

# wait_for SECONDS COMMAND...: polls COMMAND every 100 ms until it succeeds.
wait_for() {
	local limit=$1 start=$SECONDS
	shift
	until "$@"; do
		[ $((SECONDS - start)) -ge "$limit" ] && return 1
		sleep 0.1
	done
}

stop_job() {
	[ -n "$JOB_PID" ] || return 0
	# mpirun was started in its own session: kill the whole session (ranks
	# included, even stopped ones) and wait until none is left.
	pkill -KILL -s "$JOB_PID" 2>/dev/null
	wait_for 15 sh -c "! pgrep -s $JOB_PID >/dev/null" || echo "warning: ranks of session $JOB_PID outlived the test" >&2
	JOB_PID=
}

stop_daemon() {
	[ -n "$DAEMON_PID" ] || return 0
	kill -TERM "$DAEMON_PID" 2>/dev/null
	wait_for 10 sh -c "! kill -0 $DAEMON_PID 2>/dev/null" || kill -KILL "$DAEMON_PID" 2>/dev/null
	{ wait "$DAEMON_PID"; } 2>/dev/null
	DAEMON_PID=
}

# Helper processes a test starts itself (a proxy, a fake agent): each is
# killed and reaped at exit. Add one with track_pid PID.
HELPER_PIDS=
track_pid() {
	HELPER_PIDS="$HELPER_PIDS $1"
}

stop_helpers() {
	local p
	for p in $HELPER_PIDS; do
		kill -KILL "$p" 2>/dev/null
		{ wait "$p"; } 2>/dev/null
	done
	HELPER_PIDS=
}

# Teardown that a sourced helper file adds (netns.sh's namespaces, bridge
# and veths): each function runs at exit once the job and the daemon are
# stopped, the last added first. Add one with on_cleanup FUNCTION.
CLEANUP_HOOKS=()
on_cleanup() {
	CLEANUP_HOOKS=("$1" "${CLEANUP_HOOKS[@]}")
}

cleanup() {
	local status=$? report hook
	stop_helpers
	stop_job
	stop_daemon
	for hook in "${CLEANUP_HOOKS[@]}"; do
		"$hook"
	done
	# A sanitizer report from any process of the test fails it.
	report=$(grep -h -A 12 -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|WARNING: ThreadSanitizer' \
		"$T"/*.log 2>/dev/null | head -n 40)
	if [ -n "$report" ]; then
		echo "FAIL: sanitizer report:" >&2
		echo "$report" >&2
		status=1
	fi
	if [ -z "${KEEP:-}" ]; then rm -rf "$T"; else echo "kept $T" >&2; fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_daemon [flightrecd options...]: ephemeral ports (LISTEN_ADDR picks
# the agent port), dumps under $T.
start_daemon() {
	rm -f "$T/ports.json"
	"$BIN/flightrecd" --listen "${LISTEN_ADDR:-127.0.0.1:0}" --http 127.0.0.1:0 --dump-dir "$T/incidents" \
		--ports-file "$T/ports.json" "$@" >>"$T/daemon.log" 2>&1 &
	DAEMON_PID=$!
	wait_for 10 test -s "$T/ports.json" || fail "daemon did not write its ports file"
	LISTEN_PORT=$(jq -r .listen "$T/ports.json")
	HTTP_PORT=$(jq -r .http "$T/ports.json")
	HTTP=http://127.0.0.1:$HTTP_PORT
}

# start_job NP [mpi_hang options...]: the planted-fault program under the
# agent (AGENT_ADDR overrides the daemon address; set and empty, the agent
# is told none and looks for its node daemon's socket; AGENT_ENV adds
# "-x VAR=..."), in a session of its own (JOB_PID is its id) so that every
# process of the job can be killed together; its exit status lands in
# $T/job.rc.
start_job() {
	local np=$1
	shift
	start_mpi_program "$np" "$HANG" "$@"
}

# start_mpi_program NP PROGRAM [arguments...]: any program, as start_job
# runs the planted-fault one.
start_mpi_program() {
	local np=$1
	shift
	rm -f "$T/job.pid" "$T/job.rc"
	setsid -f sh -c 'echo $$ >"$0/job.pid"; "$@"; echo $? >"$0/job.rc"' "$T" \
		mpirun -np "$np" -x LD_PRELOAD="$PRELOAD" ${ASAN_OPTIONS:+-x ASAN_OPTIONS} \
		-x FLIGHTREC_ADDR="${AGENT_ADDR-127.0.0.1:$LISTEN_PORT}" \
		-x FLIGHTREC_JOB="$JOB" -x FLIGHTREC_DUMP_DIR="$T/local" ${AGENT_ENV:-} \
		"$@" >>"$T/job.log" 2>&1
	wait_for 10 test -s "$T/job.pid" || fail "the job did not start"
	JOB_PID=$(cat "$T/job.pid")
}

# start_nccl_job NP [nccl_hang options...]: NP processes of the NCCL test
# program over the CPU stand-in for NCCL and CUDA (tests/nccl), under the
# agent, launched the way torchrun does (RANK, WORLD_SIZE in the
# environment), in a session of their own. NCCL_ENV adds VAR=value words
# (fault injection).
start_nccl_job() {
	local np=$1
	shift
	rm -f "$T/job.pid" "$T/job.rc" "$T/nccl.id"
	setsid -f sh -c '
		echo $$ >"$0/job.pid"
		dir=$0 np=$1 pids= rc=0 r=0
		shift
		while [ $r -lt $np ]; do
			RANK=$r WORLD_SIZE=$np "$@" --rank $r --nranks $np --id-file "$dir/nccl.id" &
			pids="$pids $!"
			r=$((r + 1))
		done
		for p in $pids; do wait $p || rc=$?; done
		echo $rc >"$dir/job.rc"' "$T" "$np" \
		env LD_PRELOAD="$PRELOAD" FLIGHTREC_ADDR="${AGENT_ADDR-127.0.0.1:$LISTEN_PORT}" \
		FLIGHTREC_JOB="$JOB" FLIGHTREC_DUMP_DIR="$T/local" ${NCCL_ENV:-} \
		"$NCCL_HANG" "$@" >>"$T/job.log" 2>&1
	wait_for 10 test -s "$T/job.pid" || fail "the NCCL job did not start"
	JOB_PID=$(cat "$T/job.pid")
}

# wait_job_exit SECONDS: until the job ends by itself; sets JOB_RC.
wait_job_exit() {
	wait_for "$1" test -s "$T/job.rc" || fail "the job did not finish within $1 s"
	JOB_RC=$(cat "$T/job.rc")
	JOB_PID=
}

incident_ready() {
	local m
	m=$(ls -d "$T/incidents/$JOB"/*/manifest.json 2>/dev/null | head -n 1)
	[ -n "$m" ] && INCIDENT=$(dirname "$m")
}

# wait_incident SECONDS: until an incident of $JOB is complete; sets INCIDENT.
wait_incident() {
	wait_for "$1" incident_ready || fail "no complete incident for job $JOB within $1 s"
}

# analyze [options] DIR: runs fr-analyze --json into $T/verdict.json, sets RC.
analyze() {
	"$BIN/fr-analyze" --json "$@" >"$T/verdict.json" 2>"$T/analyze.err"
	RC=$?
}

# The NCCL "skip" scenario's run and verdict (4 ranks; rank 2 never enqueues
# all_reduce #5), whichever way the program reaches NCCL: NCCL_HANG may
# name another build of the program.
run_nccl_skip() {
	start_daemon --timeout 2 --heartbeat-timeout 10
	start_nccl_job 4 --scenario skip --culprit 2 --at 5
	wait_incident 40
	analyze "$INCIDENT"
	[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
	expect '.verdict == "hang"'
	expect '[.culprits[].rank] == [2] and .culprits[0].reason == "not_entered"'
	expect '.op.type == "all_reduce" and .op.seq == 5 and (.op.comm | startswith("nccl-"))'
	expect '.op.comm_ranks == [0,1,2,3] and .op.comm_size == 4'
	expect '.waiting_ranks == [0,1,3]'
}

# expect 'jq expression' [file]: the expression must be true.
expect() {
	local file=${2:-$T/verdict.json}
	jq -e "$1" "$file" >/dev/null 2>&1 || fail "expected $1 in $file, got: $(cat "$file")"
}

# The headers every API call of a test sends: X-Flightrec (which live
# looks need, as no other site's page can send it) and, when HTTP_TOKEN is
# set (the daemon's token or a job's key), the bearer token that a
# daemon with --token-file wants for a job's data.
http_headers() {
	HTTP_HEADERS=(-H "X-Flightrec: 1")
	[ -n "${HTTP_TOKEN:-}" ] && HTTP_HEADERS+=(-H "Authorization: Bearer $HTTP_TOKEN")
	return 0
}

http_get() {
	http_headers
	curl -sS --max-time 5 "${HTTP_HEADERS[@]}" "$HTTP$1"
}

# For the benches that report against targets: the time now (seconds,
# real time), PASS or FAIL for VALUE under TARGET, and a process's peak RSS
# in KiB (0 once it is gone).
now_s() { date +%s.%N; }
pass() { awk -v v="$1" -v t="$2" 'BEGIN {print (v + 0 < t + 0) ? "PASS" : "FAIL"}'; }
hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# summary_of DIR RANK: rank RANK's summary in a central daemon's incident
# DIR (a line of its node's summaries-<node>.jsonl), or nothing.
summary_of() {
	cat "$1"/summaries-*.jsonl 2>/dev/null | jq -c --argjson r "$2" 'select(.rank == $r)' 2>/dev/null
}

# make_token: a cluster token in $T/token (TOKEN), private to its owner as
# the daemon wants it, and the same token in HTTP_TOKEN for the API calls.
make_token() {
	TOKEN=$T/token
	printf 'flightrec-e2e-%s-0123456789abcdef\n' "$RANDOM$RANDOM" >"$TOKEN"
	chmod 600 "$TOKEN"
	HTTP_TOKEN=$(cat "$TOKEN")
}

# free_port: prints a TCP port of 127.0.0.1 that nothing listens on now.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

http_status() {
	http_headers
	curl -s -o /dev/null -w '%{http_code}' --max-time 5 "${HTTP_HEADERS[@]}" "$HTTP$1"
}

# metric NAME: the value of flightrec_NAME in /metrics (empty when absent).
metric() {
	http_get /metrics | awk -v m="flightrec_$1" '$1 == m {print $2}'
}
metric_is() { [ "$(metric "$1")" = "$2" ]; }
metric_at_least() { [ "$(metric "$1")" -ge "$2" ] 2>/dev/null; }

# ranks_connected [JOB] N: the daemon sees N connected ranks of JOB ($JOB).
# start_running NP RANK: a daemon and NP ranks of the planted-fault
# program with no fault (each step an all_reduce, 20 ms apart), once every
# rank has completed 4 of them; RANK_PID is then rank RANK's pid.
world_progressed() {
	http_get "/v1/jobs/$JOB" 2>/dev/null |
		jq -e '[.ranks[] | .comms.world.last_completed // 0] | min > 3' >/dev/null 2>&1
}
start_running() {
	start_daemon --timeout 30 --heartbeat-timeout 30
	start_job "$1" --scenario none --step-ms 20
	wait_for 20 ranks_connected "$1" || fail "ranks did not connect: $(http_get "/v1/jobs/$JOB")"
	wait_for 20 world_progressed || fail "the job made no progress: $(http_get "/v1/jobs/$JOB")"
	RANK_PID=$(http_get "/v1/jobs/$JOB" | jq -r --argjson r "$2" '.ranks[] | select(.rank == $r) | .pid')
	[ -n "$RANK_PID" ] && [ "$RANK_PID" -gt 1 ] || fail "no pid for rank $2"
}

# For the kernel log tests (root, /dev/kmsg): plant_xid PID writes an Xid
# line naming PID and one naming pid 1, both marked with this job's name
# ($KMSG_MARK); expect_xid_kept MANIFEST RANK PID checks that the first,
# and not the second, is in MANIFEST's kernel logs, attributed to RANK.
plant_xid() {
	KMSG_MARK="flightrec-e2e $JOB"
	echo "NVRM: Xid (PCI:0000:3b:00): 79, pid=$1, GPU has fallen off the bus. $KMSG_MARK" >/dev/kmsg
	echo "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus. $KMSG_MARK other" >/dev/kmsg
}
expect_xid_kept() {
	local lines
	lines=$(jq --arg m "$KMSG_MARK" '[.kernel_log[].lines[] | select(.text | endswith($m))]' "$1")
	[ "$(jq length <<<"$lines")" = 1 ] || fail "the rank's Xid line is not in $1 once: $(jq -c .kernel_log "$1")"
	jq -e --argjson pid "$3" --argjson r "$2" '.[0] | .kind == "xid" and .pid == $pid and .rank == $r and .time_ns > 0' \
		<<<"$lines" >/dev/null || fail "the Xid line is not attributed to rank $2: $lines"
	jq -e --arg m "$KMSG_MARK other" '[.kernel_log[].lines[] | select(.text | endswith($m))] | length == 0' "$1" \
		>/dev/null || fail "a line naming a pid that is not the job's was kept"
}

ranks_connected() {
	local job=$JOB
	[ $# -ge 2 ] && { job=$1; shift; }
	http_get "/v1/jobs/$job" 2>/dev/null |
		jq -e --argjson n "$1" '[.ranks[] | select(.state == "connected")] | length == $n' >/dev/null 2>&1
}
