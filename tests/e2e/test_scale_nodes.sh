#!/usr/bin/env bash
# bench/nodes.sh at a size make test affords: a central daemon, 4 node
# daemons (each in a UTS namespace of its own, so each is a node by name)
# and loadgen simulating 1,024 ranks of one job, 256 behind each node
# daemon on its Unix socket. The central daemon lists the 4 nodes and all
# 1,024 ranks of the job, each with the node its block is on; /healthz
# answers throughout; every view the API and the page offer of the job
# answers within a generous bound (not a timing target: bench/nodes.sh
# measures those).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/node_daemons.sh"

NODES=4
RANKS_PER_NODE=256
WORLD=$((NODES * RANKS_PER_NODE))
VIEW_LIMIT=10

uts_namespaces_ok || skip "no UTS namespaces here (root or CAP_SYS_ADMIN needed): the node daemons would share one name"
[ -x "$LOADGEN" ] || fail "$LOADGEN not built"

start_daemon --timeout 60 --heartbeat-timeout 60
start_nodes "$NODES" --timeout 60 --heartbeat-timeout 60

# /healthz, every 100 ms, all along: a line per poll, "fail" when it did
# not answer 200 within 2 s.
(
	while :; do
		code=$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$HTTP/healthz")
		[ "$code" = 200 ] && echo ok || echo "fail $code"
		sleep 0.1
	done
) >"$T/healthz.txt" 2>/dev/null &
track_pid "$!"

start_loadgens "$JOB" "$NODES" "$RANKS_PER_NODE" --rate 2 --hang-after -1
wait_for 90 nodes_all_up "$NODES" "$WORLD" ||
	fail "the central daemon lists $(nodes_ranks) (nodes, ranks) connected, want $NODES $WORLD: $(tail -n 3 "$T"/loadgen0.log)"

# Every rank, once, connected, on the node daemon its block is on.
http_get "/v1/jobs/$JOB" >"$T/job.json" || fail "GET /v1/jobs/$JOB failed"
jq -e --argjson n "$WORLD" --argjson r "$RANKS_PER_NODE" '
	.world_size == $n and ([.ranks[].rank] | sort) == [range($n)] and
	all(.ranks[]; .state == "connected" and .node == ("node" + ((.rank / $r | floor) | tostring | ("0000" + .)[-4:])))' \
	"$T/job.json" >/dev/null ||
	fail "GET /v1/jobs/$JOB does not list ranks 0..$((WORLD - 1)) connected on their nodes: $(head -c 600 "$T/job.json")"
http_get /v1/jobs | jq -e --arg j "$JOB" --argjson n "$WORLD" '.jobs | any(.job == $j and .world_size == $n)' >/dev/null ||
	fail "GET /v1/jobs does not list the job: $(http_get /v1/jobs | head -c 600)"

# Each view answers (any status but a server error or a timeout), the
# page's two included (it reads /v1/jobs and /v1/jobs/<job>).
http_headers
for path in / /v1/jobs /v1/nodes "/v1/jobs/$JOB" "/v1/jobs/$JOB/analysis" /metrics; do
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time "$VIEW_LIMIT" "${HTTP_HEADERS[@]}" "$HTTP$path")
	case $code in
	2?? | 404) ;;
	*) fail "GET $path answered $code within $VIEW_LIMIT s" ;;
	esac
done

# Still progressing: the central daemon keeps taking node frames.
before=$(metric frames_received_total)
wait_for 10 metric_at_least frames_received_total $((before + 4)) ||
	fail "the central daemon took no node frames for 10 s (was $before)"

polls=$(wc -l <"$T/healthz.txt")
[ "$polls" -ge 5 ] || fail "only $polls /healthz polls"
! grep -q fail "$T/healthz.txt" || fail "/healthz did not answer: $(grep -c fail "$T/healthz.txt") of $polls polls"
metric_is frames_rejected_total 0 || fail "the central daemon rejected frames"
echo "PASS: $NODES node daemons x $RANKS_PER_NODE ranks: the central daemon lists all $WORLD ranks on their nodes; /healthz answered $polls polls"
