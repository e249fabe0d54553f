# A cluster of nodes on this machine for the end-to-end tests: each node is
# a network namespace with its own address on one Linux bridge in the root
# namespace, and (through netns_rsh, Open MPI's launcher agent) its own
# hostname, so a real mpirun job spans nodes that see each other only over
# TCP, as on a cluster. Source it after lib.sh, then:
#
#   netns_up N      N nodes; sets NODE_NAMES, NODE_ADDRS (arrays),
#                   BRIDGE_ADDR and NETNS_SUBNET, and tears it all down at
#                   exit (through lib.sh's cleanup), whatever happens
#   netns_run I COMMAND...
#                   runs COMMAND on node I (as netns_rsh does, but with its
#                   words as they are), for a process of the test's own
#                   there; it is killed at teardown with the rest
#   netns_mpi SLOTS makes mpirun (start_job) place SLOTS ranks on each node
#                   and talk over the bridge only
#
# A test that cannot create namespaces (not root, no privilege in a
# container) is skipped, not failed.
#
# Every name starts with a per-run prefix, fr<4 hex digits>: namespaces
# <prefix>n0.., bridge <prefix>br, the veths' root ends <prefix>v0.. (the
# other end is each node's eth0). The file $NETNS_RUN/<prefix> holds the pid
# and start time of the test that made them, so that a later run removes
# what a killed one (SIGKILL, a power cut of the runner) left behind.

NETNS_RUN=/run/flightrec-netns
NETNS_PREFIX=
NODE_NAMES=()
NODE_ADDRS=()

# proc_start PID: the process's start time in clock ticks since boot (empty
# when it is gone), which with the pid names one process even after the pid
# is reused.
proc_start() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	# The command name (field 2) may hold spaces: count from its ')'.
	set -- ${stat##*) }
	echo "${20}"
}

# netns_kill NAME: kills every process in namespace NAME (the daemons mpirun
# started there, their ranks) and waits until none is left.
netns_kill() {
	local pids start=$SECONDS
	while pids=$(ip netns pids "$1" 2>/dev/null) && [ -n "$pids" ]; do
		# A process may fork while we kill: go round until none is left.
		kill -KILL $pids 2>/dev/null
		[ $((SECONDS - start)) -ge 10 ] && { echo "warning: processes of namespace $1 outlived the test: $pids" >&2; return 1; }
		sleep 0.1
	done
	return 0
}

# netns_remove PREFIX: removes the namespaces, veths and bridge of one run,
# what Open MPI kept on the shared file systems under its nodes' hostnames
# (ranks killed before they could remove it: a killed run's), and its
# marker file.
netns_remove() {
	local prefix=$1 ns link
	for ns in $(ip netns list 2>/dev/null | awk -v p="^${prefix}n[0-9]+$" '$1 ~ p {print $1}'); do
		netns_kill "$ns"
		ip netns del "$ns" 2>/dev/null
	done
	# Deleting a namespace deletes its veth ends and with them their peers;
	# this catches the bridge and any veth whose namespace was never made.
	for link in $(ip -o link show 2>/dev/null | awk -F': ' -v p="^${prefix}" '{sub(/@.*/, "", $2)} $2 ~ p {print $2}'); do
		ip link del "$link" 2>/dev/null
	done
	rm -rf "${TMPDIR:-/tmp}/ompi.${prefix}n"* /dev/shm/vader_segment."${prefix}n"*
	rm -f "$NETNS_RUN/$prefix"
}

# netns_sweep: removes what earlier runs whose test process is gone left.
netns_sweep() {
	local marker pid start
	for marker in "$NETNS_RUN"/fr[0-9a-f][0-9a-f][0-9a-f][0-9a-f]; do
		[ -f "$marker" ] || continue
		pid= start=
		read -r pid start <"$marker" 2>/dev/null
		[ -n "$pid" ] && [ -n "$start" ] && [ "$(proc_start "$pid")" = "$start" ] && continue
		netns_remove "${marker##*/}"
	done
}

netns_down() {
	[ -n "$NETNS_PREFIX" ] && netns_remove "$NETNS_PREFIX"
	NETNS_PREFIX=
}

# netns_subnet_free A B: nothing on this machine uses 10.A.B.0/24: no
# address in it and no route into it but the default one.
netns_subnet_free() {
	! ip -4 -o addr show | grep -q " 10\.$1\.$2\." &&
		[ -z "$(ip -4 route show table all match "10.$1.$2.0/24" | grep -v '^default')" ]
}

# netns_up N: N nodes on one bridge (see the top of this file).
netns_up() {
	local n=$1 i a b ns addr try err
	[ "$(id -u)" = 0 ] || skip "network namespaces need root (uid $(id -u))"
	command -v unshare >/dev/null || skip "no unshare (util-linux) for the nodes' hostnames"
	mkdir -p "$NETNS_RUN" 2>/dev/null && [ -w "$NETNS_RUN" ] || skip "cannot write $NETNS_RUN"
	netns_sweep
	# Claim a prefix no other run holds: the marker is made with noclobber,
	# before anything it names exists.
	for try in 1 2 3 4 5 6 7 8 9 10; do
		NETNS_PREFIX=fr$(printf '%04x' $(((RANDOM << 1 ^ RANDOM) & 0xffff)))
		(set -C; echo "$$ $(proc_start $$)" >"$NETNS_RUN/$NETNS_PREFIX") 2>/dev/null && break
		NETNS_PREFIX=
	done
	[ -n "$NETNS_PREFIX" ] || fail "no free prefix under $NETNS_RUN"
	on_cleanup netns_down

	if ! err=$(ip netns add "${NETNS_PREFIX}n0" 2>&1); then
		skip "cannot create a network namespace: $err"
	fi
	for try in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
		a=$((64 + RANDOM % 128)) b=$((RANDOM % 256))
		netns_subnet_free $a $b && break
		a=
	done
	[ -n "$a" ] || fail "no free 10.x.y.0/24 for the bridge"
	NETNS_SUBNET=10.$a.$b.0/24
	BRIDGE_ADDR=10.$a.$b.1
	ip link add "${NETNS_PREFIX}br" type bridge || fail "cannot create bridge ${NETNS_PREFIX}br"
	ip addr add "$BRIDGE_ADDR/24" dev "${NETNS_PREFIX}br" &&
		ip link set "${NETNS_PREFIX}br" up || fail "cannot bring up bridge ${NETNS_PREFIX}br"

	NODE_NAMES=() NODE_ADDRS=() NETNS_HOSTS=
	for ((i = 0; i < n; i++)); do
		ns=${NETNS_PREFIX}n$i
		addr=10.$a.$b.$((i + 2))
		[ "$i" -eq 0 ] || ip netns add "$ns" || fail "cannot create namespace $ns"
		ip link add "${NETNS_PREFIX}v$i" type veth peer name eth0 netns "$ns" &&
			ip link set "${NETNS_PREFIX}v$i" master "${NETNS_PREFIX}br" up &&
			ip -n "$ns" link set lo up &&
			ip -n "$ns" addr add "$addr/24" dev eth0 &&
			ip -n "$ns" link set eth0 up &&
			ip -n "$ns" route add default via "$BRIDGE_ADDR" || fail "cannot wire node $ns ($addr)"
		NODE_NAMES+=("$ns")
		NODE_ADDRS+=("$addr")
		NETNS_HOSTS="$NETNS_HOSTS $addr=$ns"
	done
	# netns_rsh, which mpirun runs, finds a node's namespace from its address.
	export NETNS_HOSTS NETNS_SUBNET BRIDGE_ADDR
}

# netns_run I COMMAND...: COMMAND in node I's network namespace and a UTS
# namespace with its hostname. Run in the background, $! is the pid of the
# subshell bash makes for the function, not the command's: find the
# command with "ip netns pids" (teardown kills it there in any case).
netns_run() {
	local node=${NODE_NAMES[$1]}
	shift
	ip netns exec "$node" unshare --uts sh -c 'hostname "$1" && shift && exec "$@"' sh "$node" "$@"
}

# netns_mpi SLOTS: Open MPI settings (as OMPI_MCA_ variables, which mpirun
# reads and passes on to its daemons and the ranks) for a job over the
# nodes: a hostfile of their addresses, daemons launched by netns_rsh from
# mpirun itself (not from one another), and every connection, mpirun's own
# included, over the bridge's subnet.
netns_mpi() {
	local addr
	for addr in "${NODE_ADDRS[@]}"; do
		echo "$addr slots=$1"
	done >"$T/hostfile"
	export OMPI_MCA_orte_default_hostfile=$T/hostfile
	export OMPI_MCA_plm_rsh_agent=$ROOT/tests/e2e/netns_rsh
	export OMPI_MCA_plm_rsh_no_tree_spawn=1
	export OMPI_MCA_oob_tcp_if_include=$NETNS_SUBNET
	export OMPI_MCA_btl_tcp_if_include=$NETNS_SUBNET
	export OMPI_MCA_btl=self,vader,tcp
}
