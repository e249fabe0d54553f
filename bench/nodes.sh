#!/usr/bin/env bash
# The central daemon at the scale of issue 18: NODES node daemons
# (flightrecd --upstream, each in a UTS namespace of its own) with
# RANKS_PER_NODE simulated ranks each, all of one job (bench/loadgen,
# tests/e2e/node_daemons.sh), ranks on their node daemon's Unix socket.
# Every rank does RATE/2 collectives a second (RATE PROGRESS updates: one
# on entering, one on completing) and a heartbeat a second. Measures, each
# against its target, in lines that start "== nodes:":
#
#   - the time until the central daemon lists every rank connected, and
#     the startup's member-list bytes (every rank's COMM for world lists
#     the whole world: 4 x N bytes per rank);
#   - central daemon CPU (utime + stime from /proc over a WINDOW-second
#     window, % of one core) and RSS while every rank progresses (target:
#     under one core, under 2 GiB); the node daemons' CPU and RSS, mean and
#     max; the frames and bytes arriving at the central daemon per second
#     (frames_received_total in /metrics; bytes read, /proc/<pid>/io rchar);
#   - /healthz latency on the central daemon, polled every 100 ms through
#     the whole run (target: under 100 ms);
#   - each HTTP view of the job (GET /v1/jobs, /v1/jobs/<job> and
#     /v1/jobs/<job>/analysis; the page itself reads the first two), its
#     time (target: under 1 s), size and the central RSS it cost;
#   - a planted hang (one rank never enters a world all_reduce): the time
#     from its timeout to a complete incident on the central daemon
#     (target: within 5 s), its rank count, and fr-analyze's verdict.
#
# The node daemons' own watchdogs get NODE_TIMEOUT (300 s): on a machine
# that runs every node and every rank, a starved loadgen falls seconds
# behind its timeline, which a node daemon would take for a hang of its
# ranks; the hang measured here is the central daemon's.
#
# Startup stops, and says so, when the machine's available memory falls
# under MEM_FLOOR_MIB (2048): the run is cut short, not the machine's
# other work.
#
# The central daemon and the /healthz poller run at nice CENTRAL_NICE
# (-10): at scale the central daemon has a machine of its own, whereas
# here 64 node daemons and the loadgens queue for the same 2 cores, and a
# request would wait its turn behind 70 runnable processes. Its CPU is
# measured all the same; CENTRAL_NICE=0 measures it without.
#
# NODE_ENV adds VAR=value words to the node daemons' environment: with
# MALLOC_MMAP_THRESHOLD_=131072, glibc keeps a 256 KiB frame buffer (a
# COMM of 65,536 members) out of the heap once it is freed, where it
# otherwise costs a node daemon about that much RSS per rank for good.
#
# Environment: BUILD, NODES (64), RANKS_PER_NODE (1024), RATE (2), WINDOW
# (10), TIMEOUT (5), NODE_TIMEOUT (300), DUMP_SIZE (16384), DUMP_DEADLINE
# (30 s + 1 s per 600 ranks), INCIDENT_WAIT (DUMP_DEADLINE + 30), MEM_FLOOR_MIB (2048), CENTRAL_NICE (-10), NODE_ENV, LOADGENS (as
# few as RLIMIT_NOFILE allows), PROFILE (a file: perf record -g of the node
# daemons from the timeout to the complete incident).
. "$(dirname "$0")/../tests/e2e/lib.sh"
. "$(dirname "$0")/../tests/e2e/node_daemons.sh"

NODES=${NODES:-64}
RANKS_PER_NODE=${RANKS_PER_NODE:-1024}
RATE=${RATE:-2}
WINDOW=${WINDOW:-10}
TIMEOUT=${TIMEOUT:-5}
NODE_TIMEOUT=${NODE_TIMEOUT:-300}
MEM_FLOOR_MIB=${MEM_FLOOR_MIB:-2048}
CENTRAL_NICE=${CENTRAL_NICE:--10}
DUMP_SIZE=${DUMP_SIZE:-16384}
WORLD=$((NODES * RANKS_PER_NODE))
# On one machine every node daemon's part of the incident, and every
# simulated rank's dump, queue for the same cores: 150 s of CPU for
# 65,536 ranks (99 s on 2 cores), where on a cluster each node does its
# own 1,024 ranks in about a second. The dump deadlines (central and
# nodes) leave room for that, so that the incident is whole; the time
# measured is reported, whatever it is.
DUMP_DEADLINE=${DUMP_DEADLINE:-$((30 + WORLD / 600))}
INCIDENT_WAIT=${INCIDENT_WAIT:-$((DUMP_DEADLINE + 30))}
PLANTED=$(((WORLD / 2 + 5) % WORLD))
JOB=nodes-$$
HZ=$(getconf CLK_TCK)

say() { echo "== nodes: $*"; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
rchar() { awk '/^rchar:/ {print $2}' "/proc/$1/io" 2>/dev/null || echo 0; }
# The machine's busy CPU seconds (all cores) so far, from /proc/stat: the
# noise of whatever else runs.
busy_s() { awk -v hz="$HZ" '/^cpu / {print ($2 + $3 + $4 + $7 + $8) / hz}' /proc/stat; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }

uts_namespaces_ok || fail "no UTS namespaces here (root or CAP_SYS_ADMIN needed): $NODES node daemons of one host would share its name"
[ -x "$LOADGEN" ] || fail "$LOADGEN not built (make BUILD=${BUILD:-build} $LOADGEN)"

say "$NODES node daemons x $RANKS_PER_NODE ranks = $WORLD ranks of one job, $RATE PROGRESS/s per rank \
($(awk -v r="$RATE" 'BEGIN {print r / 2}') collectives/s per rank, $(awk -v r="$RATE" -v n="$WORLD" 'BEGIN {print r / 2 * n}') across the job) \
and 1 heartbeat/s; $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f", $2 / 1048576}' /proc/meminfo) GiB, \
RLIMIT_NOFILE $(ulimit -Hn), load average $(cut -d' ' -f1-3 /proc/loadavg) at the start; central daemon at nice $CENTRAL_NICE${NODE_ENV:+; node daemons run with $NODE_ENV}"

# What this machine can hold: descriptors (each rank is one in loadgen and
# one in its node daemon), the kernel's table, memory.
file_max=$(cat /proc/sys/fs/file-max)
[ $((2 * WORLD + 1024)) -le "$file_max" ] ||
	fail "$WORLD ranks need $((2 * WORLD)) descriptors; fs.file-max is $file_max"
[ "$(loadgen_fds)" -ge "$RANKS_PER_NODE" ] ||
	fail "RLIMIT_NOFILE $(ulimit -Hn) is below one node's $RANKS_PER_NODE ranks"

start_daemon --timeout "$TIMEOUT" --heartbeat-timeout 60 --dump-deadline "$DUMP_DEADLINE"
CENTRAL=$DAEMON_PID
# Every thread (threads started later inherit it).
for task in /proc/"$CENTRAL"/task/*; do
	renice -n "$CENTRAL_NICE" -p "${task##*/}" >/dev/null 2>&1 || say "cannot renice the central daemon to $CENTRAL_NICE"
done
c_rss0=$(rss_kib "$CENTRAL")

# /healthz on the central daemon, every 100 ms, for the whole run: one
# "PHASE SECONDS" line per poll (2 s: no answer), the phase being the
# word in $T/phase when the poll started.
phase() { echo "$1" >"$T/phase"; }
phase startup
(
	renice -n "$CENTRAL_NICE" -p "$BASHPID" >/dev/null 2>&1
	while :; do
		p=$(cat "$T/phase")
		echo "$p $(curl -s -o /dev/null -m 2 -w '%{time_total}' "$HTTP/healthz" || echo 2)"
		sleep 0.1
	done
) >"$T/healthz.txt" 2>/dev/null &
track_pid "$!"

t0=$(now_s)
start_nodes "$NODES" --timeout "$NODE_TIMEOUT" --heartbeat-timeout 60 --dump-deadline "$DUMP_DEADLINE"
n_rss0=$(for p in "${NODE_PIDS[@]}"; do rss_kib "$p"; done | awk '{s += $1} END {print s / NR}')
t1=$(now_s)
say "$NODES node daemons up in $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s"

start_loadgens "$JOB" "$NODES" "$RANKS_PER_NODE" --rate "$RATE" --hang-file "$T/hang" \
	--hang-rank "$PLANTED" --dump-size "$DUMP_SIZE" --dump-members-max 1024
say "${#LOADGEN_PIDS[@]} loadgen processes ($(((WORLD + ${#LOADGEN_PIDS[@]} - 1) / ${#LOADGEN_PIDS[@]})) ranks each, \
RLIMIT_NOFILE $(ulimit -n))"

mem_avail_mib() { awk '/^MemAvailable:/ {printf "%d", $2 / 1024}' /proc/meminfo; }
node_rss_line() {
	for p in "${NODE_PIDS[@]}"; do rss_kib "$p"; done | awk -v up="$1" -v n="$NODES" '
		{ s += $1; if ($1 > m) m = $1 }
		END { printf "node daemons %.0f MiB in all, max %.0f MiB, %.1f KiB per connected rank", s / 1024, m / 1024, up ? s / up : 0 }'
}
# Every rank up, within UP_LIMIT, while the machine keeps MEM_FLOOR_MIB.
UP_LIMIT=$((60 + WORLD / 256))
start=$SECONDS
while ! nodes_all_up "$NODES" "$WORLD"; do
	read -r _ up_now <<<"$(nodes_ranks)"
	why=
	[ "$(mem_avail_mib)" -lt "$MEM_FLOOR_MIB" ] && why="MEMORY: the machine has $(mem_avail_mib) MiB available (floor $MEM_FLOOR_MIB)"
	[ $((SECONDS - start)) -ge "$UP_LIMIT" ] && why="TIME: not up within $UP_LIMIT s"
	if [ -n "$why" ]; then
		say "NOT UP, limited by $why, with ${up_now:-0} of $WORLD ranks listed connected after $((SECONDS - start)) s: \
central RSS $(mib "$(rss_kib "$CENTRAL")") MiB; $(node_rss_line "${up_now:-0}"); load average $(cut -d' ' -f1-3 /proc/loadavg)"
		grep -h -i 'cannot\|refus\|error\|memory\|no hello' "$T"/node*.log | sed 's/[0-9]\+/N/g' | sort | uniq -c | head -n 5 | sed 's/^/   /'
		fail "not every rank came up"
	fi
	sleep 1
done
t2=$(now_s)
say "all $WORLD ranks listed connected by the central daemon in $(awk -v a="$t1" -v b="$t2" 'BEGIN {printf "%.1f", b - a}') s \
(member lists as agents send them: COMM_RUNS where shorter, world one run per rank)"

# The steady state: settle, then the window.
startup_cpu=$(for p in "$CENTRAL" "${NODE_PIDS[@]}" "${LOADGEN_PIDS[@]}"; do ticks "$p"; done |
	awk -v hz="$HZ" -v c="$(ticks "$CENTRAL")" -v n="$NODES" '
		NR == 1 { next } NR <= n + 1 { nd += $1; next } { lg += $1 }
		END { printf "startup CPU: central %.1f s, node daemons %.1f s, loadgen %.1f s", c / hz, nd / hz, lg / hz }')
say "$startup_cpu; central peak RSS $(mib "$(hwm_kib "$CENTRAL")") MiB, node daemons' peak RSS max \
$(mib "$(for p in "${NODE_PIDS[@]}"; do hwm_kib "$p"; done | sort -n | tail -n 1)") MiB"
phase steady
sleep 3
# What the agents really send (a starved loadgen falls behind its rate):
# the node daemons' frames, summed.
node_frames() {
	local i
	for ((i = 0; i < NODES; i++)); do
		curl -s -m 5 "http://127.0.0.1:$(jq -r .http "$T/node$i/ports.json")/metrics" |
			awk '$1 == "flightrec_frames_received_total" {print $2}'
	done | awk '{s += $1} END {print s + 0}'
}
# The node daemons' frames at the midpoint of the time it took to ask.
node_frames_at() { # prints "FRAMES SECONDS"
	local a b n
	a=$(now_s) n=$(node_frames) b=$(now_s)
	echo "$n $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", (a + b) / 2}')"
}
read -r nf0 tn0 <<<"$(node_frames_at)"
metric_frames() { metric frames_received_total; }
for p in "${NODE_PIDS[@]}"; do ticks "$p"; done >"$T/node_ticks0"
f0=$(metric_frames) r0=$(rchar "$CENTRAL") c0=$(ticks "$CENTRAL") b0=$(busy_s) w0=$(now_s)
for p in "${LOADGEN_PIDS[@]}"; do ticks "$p"; done | awk '{s += $1} END {print s}' >"$T/lg_ticks0"
sleep "$WINDOW"
f1=$(metric_frames) r1=$(rchar "$CENTRAL") c1=$(ticks "$CENTRAL") b1=$(busy_s) w1=$(now_s)
for p in "${NODE_PIDS[@]}"; do ticks "$p"; done >"$T/node_ticks1"
lg1=$(for p in "${LOADGEN_PIDS[@]}"; do ticks "$p"; done | awk '{s += $1} END {print s}')
read -r nf1 tn1 <<<"$(node_frames_at)"
c_rss1=$(rss_kib "$CENTRAL")
for p in "${NODE_PIDS[@]}"; do rss_kib "$p"; done >"$T/node_rss"
span=$(awk -v a="$w0" -v b="$w1" 'BEGIN {print b - a}')

c_pct=$(awk -v a="$c0" -v b="$c1" -v s="$span" -v hz="$HZ" 'BEGIN {printf "%.1f", 100 * (b - a) / hz / s}')
say "central CPU ${c_pct}% of one core over ${WINDOW} s [target < 100%: $(pass "$c_pct" 100)]"
say "central RSS $(mib "$c_rss1") MiB (idle $(mib "$c_rss0") MiB; $(awk -v a="$c_rss0" -v b="$c_rss1" -v n="$WORLD" \
	'BEGIN {printf "%.2f", (b - a) / n}') KiB per rank) [target < 2048 MiB: $(pass "$(mib "$c_rss1")" 2048)]"
paste "$T/node_ticks0" "$T/node_ticks1" | awk -v s="$span" -v hz="$HZ" '
	{ p = 100 * ($2 - $1) / hz / s; sum += p; if (p > max) max = p }
	END { printf "== nodes: node daemon CPU mean %.1f%% max %.1f%% of one core (%d daemons, %.1f%% in all)\n", sum / NR, max, NR, sum }'
awk -v idle="$n_rss0" -v r="$RANKS_PER_NODE" '{ s += $1; if ($1 > m) m = $1 }
	END { printf "== nodes: node daemon RSS mean %.1f MiB max %.1f MiB (idle %.1f MiB; %.2f KiB per rank)\n",
		s / NR / 1024, m / 1024, idle / 1024, (s / NR - idle) / r }' "$T/node_rss"
awk -v a="$nf0" -v b="$nf1" -v s="$(awk -v a="$tn0" -v b="$tn1" 'BEGIN {print b - a}')" -v n="$WORLD" -v r="$RATE" 'BEGIN {
	printf "== nodes: agents -> node daemons: %.0f frames/s measured, %.0f nominal (%.2f per rank per s; nominal: PROGRESS at %s/s and a heartbeat; below it, loadgen fell behind its timeline)\n",
		(b - a) / s, n * (r + 1), (b - a) / s / n, r }'
awk -v f0="$f0" -v f1="$f1" -v r0="$r0" -v r1="$r1" -v s="$span" 'BEGIN {
	printf "== nodes: upstream into the central daemon: %.0f frames/s, %.1f KiB/s (bytes read, rchar)\n",
		(f1 - f0) / s, (r1 - r0) / 1024 / s }'
# Per rank and per node, for sizes this machine cannot hold: the central
# daemon's cost is taken as linear in ranks (RSS over idle, CPU).
awk -v c_pct="$c_pct" -v r0="$c_rss0" -v r1="$c_rss1" -v n="$WORLD" -v nodes="$NODES" \
	-v f0="$f0" -v f1="$f1" -v s="$span" 'BEGIN {
	kib = (r1 - r0) / n; pct = c_pct / n * 1000
	printf "== nodes: per rank at the central: %.2f KiB RSS, %.3f%% of a core per 1000 ranks; per node: %.1f frames/s; ", kib, pct, (f1 - f0) / s / nodes
	printf "linear at 131072 ranks: %.0f MiB, %.0f%% of a core\n", (r0 + kib * 131072) / 1024, pct * 131.072 }'
awk -v a="$(cat "$T/lg_ticks0")" -v b="$lg1" -v b0="$b0" -v b1="$b1" -v s="$span" -v hz="$HZ" -v n="$(nproc)" 'BEGIN {
	printf "== nodes: noise: the machine was %.0f%% busy over the window (of %d cores; loadgen %.0f%% of one core)\n",
		100 * (b1 - b0) / s / n, n, 100 * (b - a) / hz / s }'

# The views, three times each: the slowest time, the size, what they cost
# the central daemon's RSS.
http_headers
view() { # view NAME PATH
	local i t code size max=0 rss_a hwm_a
	rss_a=$(rss_kib "$CENTRAL") hwm_a=$(hwm_kib "$CENTRAL")
	for i in 1 2 3; do
		read -r code t size < <(curl -s -o /dev/null --max-time 30 "${HTTP_HEADERS[@]}" \
			-w '%{http_code} %{time_total} %{size_download}\n' "$HTTP$2")
		max=$(awk -v a="$max" -v b="$t" 'BEGIN {print (b > a) ? b : a}')
	done
	if [ "$code" != 200 ]; then
		say "GET $2: HTTP $code in $(awk -v t="$max" 'BEGIN {printf "%.0f", t * 1000}') ms (not served on this branch) [target < 1000 ms: n/a]"
		return
	fi
	ms=$(awk -v t="$max" 'BEGIN {printf "%.0f", t * 1000}')
	say "GET $2 ($1): $ms ms max of 3, $(numfmt --to=iec "$size")B, central RSS $(awk -v a="$rss_a" -v b="$(rss_kib "$CENTRAL")" \
		'BEGIN {printf "%+.1f", (b - a) / 1024}') MiB (peak $(awk -v a="$hwm_a" -v b="$(hwm_kib "$CENTRAL")" \
		'BEGIN {printf "%+.1f", (b - a) / 1024}') MiB) [target < 1000 ms: $(pass "$ms" 1000)]"
}
phase views
view "jobs list; the page's first read" /v1/jobs
view "the job; the page's job view" "/v1/jobs/$JOB"
view "live analysis" "/v1/jobs/$JOB/analysis"
view "node daemons" /v1/nodes
view "the page" /

# The hang: every loadgen plants it at one instant, 2 s from now.
phase hang
# The central daemon's log lines from here on, each with the time it was read.
tail -n 0 -F "$T/daemon.log" 2>/dev/null | while IFS= read -r line; do echo "$EPOCHREALTIME $line"; done >"$T/stamped.log" &
track_pid "$!"
awk -v t="$(now_s)" 'BEGIN {printf "%.3f\n", t + 2}' >"$T/hang.tmp" && mv "$T/hang.tmp" "$T/hang"
planted() { grep -q 'hang planted' "$T"/loadgen*.log; }
wait_for 30 planted || fail "loadgen did not plant its hang"
entered=$(sed -n 's/.*entered from \([0-9.]*\).*/\1/p' "$T"/loadgen*.log | sort -n | head -n 1)
expiry=$(awk -v e="$entered" -v t="$TIMEOUT" 'BEGIN {printf "%.3f", e + t}')
say "hang planted: rank $PLANTED never enters a world all_reduce the others enter from $entered (timeout expires at $expiry)"
# CPU seconds of the central daemon, the node daemons and the loadgens
# (the ranks), in all: from the timeout to the complete incident.
cpu_snapshot() {
	echo "$(ticks "$CENTRAL") $(for p in "${NODE_PIDS[@]}"; do ticks "$p"; done | awk '{s += $1} END {print s}') \
$(for p in "${LOADGEN_PIDS[@]}"; do ticks "$p"; done | awk '{s += $1} END {print s}')"
}
until awk -v e="$expiry" -v t="$(now_s)" 'BEGIN {exit !(t >= e)}'; do sleep 0.05; done
cpu_at_timeout=$(cpu_snapshot)
# PROFILE=FILE: perf record of the node daemons, from the timeout to the incident.
if [ -n "${PROFILE:-}" ]; then
	perf record ${PROFILE_OPTS:--g} -o "$PROFILE" -p "$(IFS=,; echo "${NODE_PIDS[*]}")" >"$T/perf.log" 2>&1 &
	PERF_PID=$!
fi

# An incident record of the job, complete; its time is closed_ns.
incident_complete() {
	http_get "/v1/jobs/$JOB/incidents" >"$T/incidents.json" 2>/dev/null &&
		jq -e '[.incidents[]? | select(.status == "complete")] | length > 0' "$T/incidents.json" >/dev/null 2>&1
}
if wait_for $((TIMEOUT + INCIDENT_WAIT)) incident_complete; then
	rec=$(jq -c '[.incidents[] | select(.status == "complete")][0]' "$T/incidents.json")
	lat=$(jq -r --arg e "$expiry" '.closed_ns / 1e9 - ($e | tonumber) | . * 100 | floor / 100' <<<"$rec")
	say "incident $(jq -r .id <<<"$rec") complete $lat s after the timeout, $(jq -r .ranks_answered <<<"$rec") of \
$(jq -r .ranks_requested <<<"$rec") ranks [target < 5 s: $(pass "$lat" 5)]"
	read -r c0 n0 l0 c1 n1 l1 <<<"$cpu_at_timeout $(cpu_snapshot)"
	[ -n "${PROFILE:-}" ] && kill -INT "$PERF_PID" && wait "$PERF_PID"
	# Where the time went, from the central daemon's log (s after the timeout).
	at() { awk -v t0="$expiry" -v pat="$1" 'index($0, pat) {t = $1} END {if (t) printf "%.2f", t - t0; else printf "?"}' "$T/stamped.log"; }
	say "phases (s after the timeout): opened $(at ' opened for job'), summaries collected $(at 'collected the summaries'), \
judged $(at 'the summaries say'), closed $(at ' closed')"
	say "CPU from the timeout to the complete incident: central $(awk -v a="$c0" -v b="$c1" -v hz="$HZ" 'BEGIN {printf "%.1f", (b - a) / hz}') s, \
node daemons $(awk -v a="$n0" -v b="$n1" -v hz="$HZ" 'BEGIN {printf "%.1f", (b - a) / hz}') s in all, \
ranks (loadgen) $(awk -v a="$l0" -v b="$l1" -v hz="$HZ" 'BEGIN {printf "%.1f", (b - a) / hz}') s; $(nproc) cores"
	# What a cluster would see: each node daemon does its own share on
	# cores of its own, and the central daemon its part.
	awk -v a="$n0" -v b="$n1" -v c0="$c0" -v c1="$c1" -v hz="$HZ" -v nodes="$NODES" -v n="$WORLD" -v r="$RANKS_PER_NODE" 'BEGIN {
		printf "== nodes: per node: %.2f CPU-s for its %d ranks (%.0f us a rank): on a cluster, a node daemon'"'"'s part of the incident; the central daemon: %.0f us of CPU a rank\n",
			(b - a) / hz / nodes, r, (b - a) / hz / n * 1e6, (c1 - c0) / hz / n * 1e6 }'
	"$BIN/fr-analyze" --json "$(jq -r .path <<<"$rec")" >"$T/verdict.json" 2>"$T/analyze.err"
	if jq -e --argjson r "$PLANTED" '[.culprits[].rank] == [$r]' "$T/verdict.json" >/dev/null 2>&1; then
		say "verdict names the planted rank $PLANTED: $(jq -r .summary "$T/verdict.json")"
	else
		say "verdict does NOT name the planted rank $PLANTED: $(jq -r .summary "$T/verdict.json" 2>/dev/null || head -c 300 "$T/analyze.err")"
	fi
else
	say "no incident (cluster incidents not built): none complete within $((TIMEOUT + INCIDENT_WAIT)) s of the hang \
(GET /v1/jobs/$JOB/incidents: $(http_status "/v1/jobs/$JOB/incidents")) [target < 5 s: FAIL]"
fi
# What the node daemons did meanwhile (their own watchdogs see the hang).
say "node daemons' own incidents: $(find "$T" -path "$T/node*/incidents/*/manifest.json" 2>/dev/null | wc -l) of $NODES with a manifest"
say "node daemons' peak RSS over the run (the incident included): $(for p in "${NODE_PIDS[@]}"; do hwm_kib "$p"; done |
	awk '{ s += $1; if ($1 > m) m = $1 } END { printf "mean %.1f MiB, max %.1f MiB", s / NR / 1024, m / 1024 }')"

# /healthz over the whole run, then in each phase.
healthz() { # healthz LABEL [PHASE]
	awk -v p="${2:-}" 'p == "" || $1 == p {print $2}' "$T/healthz.txt" | sort -n | awk -v l="$1" '{v[NR] = $1} END {
		if (!NR) { printf "== nodes: /healthz %s: no polls\n", l; exit }
		p50 = v[int(NR * 0.5) > 0 ? int(NR * 0.5) : 1]; p99 = v[int(NR * 0.99) > 0 ? int(NR * 0.99) : 1]
		printf "== nodes: /healthz %s: p50 %.1f ms p99 %.1f ms max %.1f ms over %d polls [target < 100 ms: %s]\n",
			l, p50 * 1000, p99 * 1000, v[NR] * 1000, NR, (v[NR] < 0.1) ? "PASS" : "FAIL" }'
}
healthz "through the run"
healthz "while the ranks connect" startup
healthz "while every rank progresses" steady
healthz "during the views" views
healthz "from the hang on" hang
say "central peak RSS $(mib "$(hwm_kib "$CENTRAL")") MiB over the run; load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
stop_loadgens
cat "$T"/loadgen*.log | grep '^loadgen: [0-9]* frames' | awk '
	{ f += $2; u += $4; d += $7; cpu += $11; if ($15 > wall) wall = $15 }
	END { printf "== nodes: loadgen: %d frames, %d progress updates, %d disconnects; %.1f CPU-s over %.0f s\n", f, u, d, cpu, wall }'
