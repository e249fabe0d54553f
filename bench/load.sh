#!/usr/bin/env bash
# The daemon under load (issue "Load" targets): the real flightrecd and
# bench/loadgen, which simulates RANKS agents from one process over
# loopback (world and two split communicators each, PROGRESS at RATE
# updates per second per rank, a heartbeat a second), then plants a hang
# on one rank. Measures, each against its target:
#
#   - time until the daemon counts every rank connected;
#   - daemon CPU (utime + stime from /proc) over a WINDOW-second window while
#     all ranks are connected and progressing (target: below one core);
#   - daemon RSS per connected rank (VmRSS after minus before, / RANKS;
#     aim: under 16 KiB);
#   - /healthz latency, polled every 50 ms during the whole run (target:
#     within 100 ms);
#   - from the planted hang's timeout expiring to manifest.json with all the
#     dumps (target: within 10 s), and whether fr-analyze names the rank;
#   - the manifest's size, and the daemon's peak RSS (VmHWM) at the
#     window's end (before the hang) and once the manifest is written: what
#     collecting the dumps and building the manifest cost at most.
#
# Environment: BUILD, RANKS (4096), RATE (10), DUMP_SIZE (65536, at most
# 1 MiB), WINDOW (10), TIMEOUT (3), TOKEN=1 to run with a token.
. "$(dirname "$0")/../tests/e2e/lib.sh"

RANKS=${RANKS:-4096}
RATE=${RATE:-10}
DUMP_SIZE=${DUMP_SIZE:-65536}
WINDOW=${WINDOW:-10}
TIMEOUT=${TIMEOUT:-3}
LOADGEN=${LOADGEN:-$BUILD_DIR/bench/loadgen}
PLANTED=$(((RANKS / 2 + 5) % RANKS))
LOADGEN_PID= POLL_PID=

[ -x "$LOADGEN" ] || fail "$LOADGEN not built (make BUILD=${BUILD:-build} $LOADGEN)"

# The daemon and the generator each hold one descriptor per rank.
want=$((RANKS + 1024))
[ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge "$want" ] ||
	fail "ulimit -Hn is $(ulimit -Hn), $want needed for $RANKS ranks"
ulimit -n "$want" || fail "cannot raise ulimit -n to $want"

stop_load() {
	[ -n "$POLL_PID" ] && kill "$POLL_PID" 2>/dev/null && wait "$POLL_PID" 2>/dev/null
	[ -n "$LOADGEN_PID" ] && kill "$LOADGEN_PID" 2>/dev/null && wait "$LOADGEN_PID" 2>/dev/null
	POLL_PID= LOADGEN_PID=
}
# lib.sh's cleanup stops the daemon; the generator and the poller first.
trap 'st=$?; stop_load; (exit $st); cleanup' EXIT

token_args=()
if [ -n "${TOKEN:-}" ]; then
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/token"
	chmod 600 "$T/token"
	token_args=(--token-file "$T/token")
fi

cpu_ticks() { awk '{print $14 + $15}' "/proc/$DAEMON_PID/stat"; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$DAEMON_PID/status"; }
hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$DAEMON_PID/status"; }
connected() {
	curl -sf "$HTTP/metrics" | awk '/^flightrec_ranks_connected / {print $2}'
}

start_daemon --timeout "$TIMEOUT" --heartbeat-timeout 30 --dump-deadline 30 "${token_args[@]}"
rss0=$(rss_kib)

# /healthz, every 50 ms, for the whole run: one time_total per line.
(
	while :; do
		curl -s -o /dev/null -m 2 -w '%{time_total}\n' "$HTTP/healthz" || echo 2
		sleep 0.05
	done
) >"$T/healthz.txt" 2>/dev/null &
POLL_PID=$!

# The hang comes after the measuring window (up, 2 s to settle, the
# window) and after loadgen has written every rank's dump ahead (about
# 7 ms each at 64 KiB, at low priority: see bench/loadgen.c).
HANG_AFTER=${HANG_AFTER:-$((WINDOW + 3 + RANKS * DUMP_SIZE / 65536 / 128))}
t_start=$(now_s)
"$LOADGEN" --addr "127.0.0.1:$LISTEN_PORT" --ranks "$RANKS" --rate "$RATE" --job load \
	--dump-size "$DUMP_SIZE" --hang-after "$HANG_AFTER" --hang-rank "$PLANTED" \
	"${token_args[@]}" >"$T/loadgen.log" 2>&1 &
LOADGEN_PID=$!

all_connected() { [ "$(connected)" = "$RANKS" ]; }
wait_for 120 all_connected || fail "daemon counts $(connected) of $RANKS ranks connected after 120 s"
t_up=$(now_s)
echo "== load: $RANKS ranks connected in $(echo "$t_start $t_up" | awk '{printf "%.2f", $2 - $1}') s"

sleep 2
rss1=$(rss_kib)
c0=$(cpu_ticks) w0=$(now_s)
sleep "$WINDOW"
c1=$(cpu_ticks) w1=$(now_s)
hwm1=$(hwm_kib)
hz=$(getconf CLK_TCK)
cores=$(awk -v a="$c0" -v b="$c1" -v s="$w0" -v e="$w1" -v hz="$hz" \
	'BEGIN {printf "%.2f", (b - a) / hz / (e - s)}')
per_rank=$(awk -v a="$rss0" -v b="$rss1" -v n="$RANKS" 'BEGIN {printf "%.1f", (b - a) / n}')
echo "== load: daemon $cores cores at $RATE updates/s/rank (target < 1); \
$per_rank KiB RSS per rank (aim < 16; ${rss0} KiB idle, ${rss1} KiB with $RANKS ranks)"
wait_for $((HANG_AFTER + 10)) grep -q 'hang planted' "$T/loadgen.log" ||
	fail "loadgen did not plant its hang"

wait_incident_manifest() {
	INCIDENT=$(dirname "$(find "$T/incidents" -name manifest.json 2>/dev/null | head -n 1)")
	[ "$INCIDENT" != . ]
}
wait_for $((TIMEOUT + 60)) wait_incident_manifest || fail "no manifest.json within $((TIMEOUT + 60)) s"
kill "$POLL_PID" 2>/dev/null && wait "$POLL_PID" 2>/dev/null
POLL_PID=
rss2=$(rss_kib)
hwm2=$(hwm_kib)
c2=$(cpu_ticks) w2=$(now_s)

m=$INCIDENT/manifest.json
files=$(find "$INCIDENT" -name 'rank-*.json' | wc -l)
jq -r --arg files "$files" --arg timeout "$TIMEOUT" '. as $m |
	(($m.closed_ns - $m.detected_ns) / 1e9 + ($m.trigger.waited_s - ($timeout | tonumber))) as $lat |
	"== load: hang -> \([$m.ranks[] | select(.answer == "received")] | length) dumps received " +
	"(\($files) files) in \($lat * 100 | floor / 100) s after the timeout (target: all within 10 s); " +
	"collection \((($m.closed_ns - $m.opened_ns) / 1e6) | floor) ms"' "$m"
sort -n "$T/healthz.txt" | awk '{v[NR] = $1} END {
	if (!NR) { print "== load: /healthz: no answers"; exit }
	p = int(NR * 0.99); if (p < 1) p = 1
	printf "== load: /healthz max %.1f ms (p99 %.1f ms) over %d polls (target < 100 ms)\n",
		v[NR] * 1000, v[p] * 1000, NR }'
echo "== load: daemon RSS ${rss2} KiB after the incident ($(awk -v a="$rss1" -v b="$rss2" \
	'BEGIN {printf "%+.1f", (b - a) / 1024}') MiB while collecting $(numfmt --to=iec "$DUMP_SIZE")B dumps); \
$(awk -v a="$c1" -v b="$c2" -v s="$w1" -v e="$w2" -v hz="$hz" \
	'BEGIN {printf "%.1f CPU-s over the %.1f s from the window'"'"'s end to the manifest", (b - a) / hz, e - s}')"
echo "== load: manifest.json $(stat -c %s "$m") bytes ($(numfmt --to=iec "$(stat -c %s "$m")")B, \
version $(jq -r .version "$m")); daemon peak RSS ${hwm1} KiB at the window's end (before the hang), ${hwm2} KiB \
with the manifest written ($(awk -v a="$hwm1" -v b="$hwm2" 'BEGIN {printf "%+.1f", (b - a) / 1024}') MiB)"

"$BIN/fr-analyze" --json "$INCIDENT" >"$T/verdict.json" 2>"$T/analyze.err"
summary=$(jq -r .summary "$T/verdict.json" 2>/dev/null)
if jq -e --argjson r "$PLANTED" '[.culprits[].rank] == [$r]' "$T/verdict.json" >/dev/null 2>&1; then
	echo "== load: verdict names the planted rank $PLANTED: $summary"
else
	echo "== load: verdict does NOT name the planted rank $PLANTED: ${summary:-$(head -c 300 "$T/analyze.err")}"
fi
stop_load
grep -v '^loadgen: \(up\|hang planted\)' "$T/loadgen.log" | sed 's/^/   /'
