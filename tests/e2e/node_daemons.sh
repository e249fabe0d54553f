# Node daemons (flightrecd --upstream) for the end-to-end tests and
# bench/nodes.sh (docs/SCALE-OUT.md), upstream of a central daemon that
# lib.sh's start_daemon started: one at a time by name (start_node), many
# on one machine with loadgen simulating the ranks of one job behind them
# (start_nodes, start_loadgens), raw ones that lie (raw_node), an MPI job
# whose ranks are split over two node daemons (start_split_job), and the
# scene of a hang that two node daemons hold (start_two_node_hang).
#
# How a node daemon gets its node name, for start_node and spawn_node
# (NODE_NAMING):
#   uts    it runs in a UTS namespace of its own whose host name is the
#          name (a node daemon names itself by its host name, as on a
#          cluster); needs root or CAP_SYS_ADMIN (uts_namespaces_ok)
#   env    FLIGHTREC_NODE_NAME is the name
#   unset  this machine's host name (or what NODE_WRAP gives it)
# NODE_UPSTREAM is the central daemon's agent address (default
# 127.0.0.1:$LISTEN_PORT); NODE_ENV adds VAR=value words to the node
# daemon's environment; NODE_WRAP is a command (words) the node daemon runs
# under, such as netns.sh's "netns_run I".
#
# start_nodes runs many, named node0000, node0001, ..., each in a UTS
# namespace of its own (the name loadgen's ranks give as their host too),
# each agent on its node daemon's Unix socket, rank blocks of
# RANKS_PER_NODE in node order.
#
# Source after lib.sh. Each process is tracked (track_pid), so lib.sh's
# cleanup kills it.

NODE_PIDS=()
LOADGEN_PIDS=()
LOADGEN=${LOADGEN:-$BUILD_DIR/bench/loadgen}

uts_namespaces_ok() { unshare --uts true 2>/dev/null; }

node_name() { printf 'node%04d' "$1"; }

# spawn_node NAME LOG [flightrecd options...]: starts a node daemon named
# NAME (as NODE_NAMING says) upstream of the central daemon, its output
# appended to LOG, and does not wait for it. Its pid lands in $T/NAME.pid
# (the process that $! names is a wrapper under NODE_WRAP).
spawn_node() {
	local name=$1 log=$2 naming=()
	shift 2
	case ${NODE_NAMING:-} in
	uts) naming=(unshare --uts sh -c 'hostname "$1" && shift && exec "$@"' sh "$name") ;;
	env) naming=(env FLIGHTREC_NODE_NAME="$name") ;;
	esac
	rm -f "$T/$name.pid"
	${NODE_WRAP:-} "${naming[@]}" sh -c 'echo $$ >"$0" && exec "$@"' "$T/$name.pid" \
		env ${NODE_ENV:-} "$BIN/flightrecd" --upstream "${NODE_UPSTREAM:-127.0.0.1:$LISTEN_PORT}" \
		"$@" >>"$log" 2>&1 &
	track_pid "$!"
}

# node_pid NAME: the pid spawn_node's node daemon NAME wrote, in NODE_PID
# and tracked too.
node_pid() {
	wait_for 10 test -s "$T/$1.pid" || fail "node daemon $1 did not start"
	NODE_PID=$(cat "$T/$1.pid")
	track_pid "$NODE_PID"
}

# start_node NAME PORT [flightrecd options...]: one node daemon named NAME
# (NODE_NAMING), its agent port PORT (0: any; a fixed one lets the agents
# find it again after a restart), its HTTP port any, its ports file
# $T/NAME-ports.json (waited for), its dumps under $T/NAME-incidents, its
# log $T/NAME.log. Its pid is in NODE_PID and in PID_NAME (a '-' in NAME
# as '_').
start_node() {
	local name=$1 port=$2
	shift 2
	rm -f "$T/$name-ports.json"
	spawn_node "$name" "$T/$name.log" --listen "127.0.0.1:$port" --http 127.0.0.1:0 \
		--dump-dir "$T/$name-incidents" --ports-file "$T/$name-ports.json" "$@"
	wait_for 10 test -s "$T/$name-ports.json" ||
		fail "node daemon $name did not write its ports file: $(cat "$T/$name.log")"
	node_pid "$name"
	printf -v "PID_${name//-/_}" '%s' "$NODE_PID"
}

# start_nodes N [flightrecd options...]: N node daemons reporting to the
# central daemon on LISTEN_PORT, each in a UTS namespace of its own, with
# its files under $T/node<i>/ and its log in $T/node<i>.log; their pids in
# NODE_PIDS. All start before any is waited for.
start_nodes() {
	local n=$1 i dir
	shift
	for ((i = 0; i < n; i++)); do
		dir=$T/node$i
		mkdir -p "$dir"
		NODE_NAMING=uts spawn_node "$(node_name "$i")" "$T/node$i.log" --listen 127.0.0.1:0 \
			--agent-socket "$dir/agent.sock" --http 127.0.0.1:0 --dump-dir "$dir/incidents" \
			--ports-file "$dir/ports.json" "$@"
	done
	for ((i = 0; i < n; i++)); do
		wait_for 30 test -S "$T/node$i/agent.sock" ||
			fail "node daemon $i did not open its agent socket: $(tail -n 5 "$T/node$i.log")"
		NODE_PIDS+=("$(cat "$T/$(node_name "$i").pid")")
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

# raw_node NAME NODE BOOT JOB WORLD RANK...: a raw node daemon
# (abuse_node.py) that proves TOKEN to the central daemon on LISTEN_PORT
# and says NODE_HELLO as node NODE with boot id BOOT, holding RANK... of
# JOB of WORLD ranks; it takes further commands on the file descriptor in
# $NAME, and what it hears is in $T/NAME.out.
raw_node() {
	local name=$1 fd
	shift
	mkfifo "$T/$name.ctl"
	python3 "$ROOT/tests/e2e/abuse_node.py" "$LISTEN_PORT" "$TOKEN" node "$@" <"$T/$name.ctl" >"$T/$name.out" 2>&1 &
	track_pid "$!"
	exec {fd}>"$T/$name.ctl"
	printf -v "$name" '%s' "$fd"
	wait_for 10 grep -q sent "$T/$name.out" || fail "node $name did not connect: $(cat "$T/$name.out")"
}

# start_split_job NP ADDR_A ADDR_B [mpi_hang options...]: start_job's
# planted-fault job with ranks 0-1 told the daemon at ADDR_A and the others
# the one at ADDR_B, as a launcher tells each rank its own node's daemon.
# Open MPI says a rank's number before MPI_Init, so a wrapper
# ($T/split.sh) picks the address, and preloads the agent into the program
# alone. AGENT_ENV adds "-x VAR=..." words as for start_job.
start_split_job() {
	local np=$1 addr_a=$2 addr_b=$3
	shift 3
	start_split_program "$np" "$addr_a" "$addr_b" "$HANG" "$@"
}

# start_split_program NP ADDR_A ADDR_B PROGRAM [arguments...]: any program
# (a Python script's interpreter), as start_split_job runs the planted-fault one.
start_split_program() {
	local np=$1 addr_a=$2 addr_b=$3 preload=$PRELOAD
	shift 3
	cat >"$T/split.sh" <<'EOF'
#!/bin/sh
if [ "${OMPI_COMM_WORLD_RANK:-0}" -lt 2 ]; then FLIGHTREC_ADDR=$NW_ADDR_A; else FLIGHTREC_ADDR=$NW_ADDR_B; fi
LD_PRELOAD=$NW_PRELOAD
export FLIGHTREC_ADDR LD_PRELOAD
exec "$@"
EOF
	chmod +x "$T/split.sh"
	PRELOAD= AGENT_ENV="-x NW_PRELOAD=$preload -x NW_ADDR_A=$addr_a -x NW_ADDR_B=$addr_b ${AGENT_ENV:-}" \
		start_mpi_program "$np" "$T/split.sh" "$@"
}

# start_two_node_hang [central daemon options...]: the scene of the tests
# of a job that two node daemons hold (test_node_watchdog, test_node_looks):
# a central daemon with a token (make_token) and the options; node daemons
# nodeA and nodeB, each in a UTS namespace of its own (its host name its
# node name), their agent ports PORT_A and PORT_B fixed (the agents find
# them again after a restart: NODE_NAMING stays uts for one); and a 4-rank
# job, ranks 0-1 on nodeA and 2-3 on nodeB, whose rank 3 computes forever
# before all_reduce #5. Skips where no UTS namespace can be made.
start_two_node_hang() {
	command -v unshare >/dev/null || skip "no unshare (util-linux) for the nodes' host names"
	unshare --uts true 2>/dev/null || skip "cannot make a UTS namespace here (needs CAP_SYS_ADMIN)"
	make_token
	start_daemon --token-file "$TOKEN" "$@"
	PORT_A=$(free_port)
	PORT_B=$(free_port)
	NODE_NAMING=uts
	start_node nodeA "$PORT_A" --token-file "$TOKEN"
	start_node nodeB "$PORT_B" --token-file "$TOKEN"
	AGENT_ENV="-x FLIGHTREC_TOKEN_FILE=$TOKEN" \
		start_split_job 4 "127.0.0.1:$PORT_A" "127.0.0.1:$PORT_B" --scenario compute --culprit 3 --at 5
}
