# Node daemons on one machine, for tests/e2e/test_scale_nodes.sh and
# bench/nodes.sh (docs/SCALE-OUT.md): a central daemon (lib.sh's
# start_daemon), NODES node daemons (flightrecd --upstream) and loadgen
# processes that simulate the ranks of one job behind them, rank blocks of
# RANKS_PER_NODE in node order, every agent on its node daemon's Unix
# socket.
#
# A node daemon names itself to the central daemon by its host name, so
# each runs in a UTS namespace of its own, named node0000, node0001, ...
# (the name loadgen's ranks give as their host too); that needs root or
# CAP_SYS_ADMIN (uts_namespaces_ok says whether this machine allows it).
#
# Source after lib.sh. Each process is tracked (track_pid), so lib.sh's
# cleanup kills it.

NODE_PIDS=()
LOADGEN_PIDS=()
LOADGEN=${LOADGEN:-$BUILD_DIR/bench/loadgen}

uts_namespaces_ok() { unshare --uts true 2>/dev/null; }

node_name() { printf 'node%04d' "$1"; }

# start_nodes N [flightrecd options...]: N node daemons reporting to the
# central daemon on LISTEN_PORT, each with its files under $T/node<i>/ and
# its log in $T/node<i>.log.
# NODE_ENV adds VAR=value words to their environment.
start_nodes() {
	local n=$1 i dir
	shift
	for ((i = 0; i < n; i++)); do
		dir=$T/node$i
		mkdir -p "$dir"
		unshare --uts sh -c 'hostname "$0" && exec "$@"' "$(node_name "$i")" \
			env ${NODE_ENV:-} "$BIN/flightrecd" --listen 127.0.0.1:0 --agent-socket "$dir/agent.sock" \
			--http 127.0.0.1:0 --dump-dir "$dir/incidents" --ports-file "$dir/ports.json" \
			--upstream "127.0.0.1:$LISTEN_PORT" "$@" >>"$T/node$i.log" 2>&1 &
		NODE_PIDS+=("$!")
		track_pid "$!"
	done
	for ((i = 0; i < n; i++)); do
		wait_for 30 test -S "$T/node$i/agent.sock" ||
			fail "node daemon $i did not open its agent socket: $(tail -n 5 "$T/node$i.log")"
	done
}

# The descriptors one loadgen may hold: the soft limit raised to the hard
# one, less some for itself.
loadgen_fds() {
	ulimit -n "$(ulimit -Hn)" 2>/dev/null
	local soft
	soft=$(ulimit -n)
	[ "$soft" = unlimited ] && soft=1048576
	echo $((soft - 256))
}

# start_loadgens JOB NODES RANKS_PER_NODE [loadgen options...]: the job's
# NODES x RANKS_PER_NODE ranks, node i's block (ranks i*R .. i*R+R-1) on
# node i's socket, from as few loadgen processes as the descriptor limit
# allows (LOADGENS overrides), which share one timeline (--epoch). Logs in
# $T/loadgen<g>.log.
start_loadgens() {
	local job=$1 nodes=$2 rpn=$3 fds per count g i first last epoch
	shift 3
	fds=$(loadgen_fds)
	[ "$fds" -ge "$rpn" ] || fail "RLIMIT_NOFILE $(ulimit -n) holds fewer than $rpn ranks per process"
	count=${LOADGENS:-$(((nodes * rpn + fds - 1) / fds))}
	per=$(((nodes + count - 1) / count))
	epoch=$(date +%s.%N)
	for ((g = 0; g * per < nodes; g++)); do
		first=$((g * per))
		last=$((first + per < nodes ? first + per : nodes))
		local addrs=()
		for ((i = first; i < last; i++)); do
			addrs+=(--addr "unix:$T/node$i/agent.sock")
		done
		"$LOADGEN" "${addrs[@]}" --ranks $((nodes * rpn)) --first-rank $((first * rpn)) \
			--count $(((last - first) * rpn)) --ranks-per-host "$rpn" --job "$job" \
			--epoch "$epoch" "$@" >"$T/loadgen$g.log" 2>&1 &
		LOADGEN_PIDS+=("$!")
		track_pid "$!"
	done
}

# stop_loadgens: each loadgen ends at SIGTERM and prints its totals.
stop_loadgens() {
	local p
	for p in "${LOADGEN_PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	for p in "${LOADGEN_PIDS[@]}"; do
		wait_for 10 sh -c "! kill -0 $p 2>/dev/null" || kill -KILL "$p" 2>/dev/null
		{ wait "$p"; } 2>/dev/null
	done
	LOADGEN_PIDS=()
}

# nodes_ranks: "NODES RANKS" that the central daemon lists connected.
nodes_ranks() {
	http_get /v1/nodes 2>/dev/null |
		jq -r '[.nodes[] | select(.connected)] | "\(length) \(map(.ranks) | add // 0)"' 2>/dev/null
}

# nodes_all_up NODES RANKS: the central daemon lists them all connected.
nodes_all_up() { [ "$(nodes_ranks)" = "$1 $2" ]; }
