#!/usr/bin/env bash
# The kernel log through node daemons (protocol 7, NODE_KERNEL_LOG): a
# 4-rank job whose ranks 0-1 report to node daemon nodeA and ranks 2-3 to
# nodeB, both upstream of a central daemon with a token. Rank 3 never
# returns from a computation before all_reduce #4, and while the job hangs
# a synthetic Xid line naming rank 3's pid is written into /dev/kmsg. Each
# node reads the kernel log for its own incident (the central daemon's
# request) and sends it up: the central incident's manifest lists both
# nodes' logs, nodeB's holding the line (kind xid, rank 3) and nodeA's not
# (the pid is not one of its ranks), and fr-analyze on the central
# incident prints the line under culprit rank 3. Both lines carry this
# run's job name, so lines of other tests cannot make it pass or fail.
# Skipped where /dev/kmsg cannot be both read and written (not root, a
# container without it).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/node_daemons.sh"

{ printf '' >/dev/kmsg && dd if=/dev/kmsg iflag=nonblock bs=8192 count=1 of=/dev/null; } \
	2>/dev/null || skip "/dev/kmsg is not readable and writable here (needs root)"

make_token
start_daemon --token-file "$TOKEN" --timeout 6 --heartbeat-timeout 30
# Named by FLIGHTREC_NODE_NAME on this host, whose host name the ranks say
# too: each node daemon matches its own ranks' pids, as on a cluster.
NODE_NAMING=env
start_node nodeA "$(free_port)" --token-file "$TOKEN"
port_a=$(jq -r .listen "$T/nodeA-ports.json")
start_node nodeB "$(free_port)" --token-file "$TOKEN"
port_b=$(jq -r .listen "$T/nodeB-ports.json")
AGENT_ENV="-x FLIGHTREC_TOKEN_FILE=$TOKEN" \
	start_split_job 4 "127.0.0.1:$port_a" "127.0.0.1:$port_b" --scenario compute --culprit 3 --at 4

nodes_connected() {
	http_get /v1/nodes | jq -e '[.nodes[] | select(.connected and .ranks == 2) | .name] | sort == ["nodeA","nodeB"]' >/dev/null 2>&1
}
wait_for 30 nodes_connected || fail "the central daemon does not list nodeA and nodeB with 2 ranks each: $(http_get /v1/nodes)"
pid=$(http_get "/v1/jobs/$JOB" | jq -r '.ranks[] | select(.rank == 3) | .pid')
[ -n "$pid" ] && [ "$pid" -gt 1 ] || fail "no pid for rank 3: $(http_get "/v1/jobs/$JOB")"
# Before the watchdog's 6 s are up: in the window the nodes read.
plant_xid "$pid"
wait_incident 60
M=$INCIDENT/manifest.json

expect '.version == "2.1" and (.kernel_log | length) == 2' "$M"
expect '[.kernel_log[] | .available == true and .error == null] == [true, true]' "$M"
expect_xid_kept "$M" 3 "$pid"
# NodeB's own incident has it too: the central daemon's is what it sent.
node_m=$(ls -d "$T/nodeB-incidents/$JOB"/*/manifest.json | head -n 1)
jq -e --arg m "$KMSG_MARK" '[.kernel_log[0].lines[] | select(.text | endswith($m))] | length == 1' "$node_m" \
	>/dev/null || fail "nodeB's own manifest lacks the line: $(jq -c .kernel_log "$node_m")"

analyze "$INCIDENT"
[ "$RC" -eq 1 ] || fail "fr-analyze exit $RC, want 1: $(cat "$T/analyze.err")"
expect '.verdict == "hang" and [.culprits[].rank] == [3]'
jq -e --arg m "$KMSG_MARK" --argjson pid "$pid" \
	'[.culprits[0].kernel_log[] | select(.text | endswith($m))] | length == 1 and
	 (.[0] | .kind == "xid" and .rank == 3 and .pid == $pid and (.before_s | type) == "number")' \
	"$T/verdict.json" >/dev/null ||
	fail "the culprit's kernel_log lacks the line: $(jq -c .culprits "$T/verdict.json")"

"$BIN/fr-analyze" "$INCIDENT" >"$T/analyze.txt" 2>&1
line=$(grep -F "$KMSG_MARK" "$T/analyze.txt")
case $line in
"  kernel: "*": NVRM: Xid (PCI:0000:3b:00): 79, pid=$pid, GPU has fallen off the bus. $KMSG_MARK, "*" rank 3 stopped") ;;
*) fail "the report does not tell the line under rank 3: $(cat "$T/analyze.txt")" ;;
esac
awk -v m="$KMSG_MARK" '/^Culprit rank 3/ {c = 1} c && index($0, m) {found = 1} /^Kernel log/ {c = 0}
	END {exit !found}' "$T/analyze.txt" || fail "the line is not under culprit rank 3: $(cat "$T/analyze.txt")"
echo "PASS node kernel log: an Xid naming rank 3's pid reaches the central manifest from nodeB and is told under culprit rank 3"
