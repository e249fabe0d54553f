#!/usr/bin/env bash
# The central daemon's part of an incident at scale, alone: NODES node
# daemons (bench/fakenodes, one process, which answers a dump request at
# once from summaries it holds in memory) hold RANKS ranks of one job; a
# dump is asked of the job (POST /v1/jobs/<job>/dump), and the central
# daemon receives every rank's summary, checks and writes it, judges the
# incident and fetches the culprit's full dump. Reports, in lines that
# start "== central:":
#
#   - the time from the request to the complete incident (target: within
#     5 s at 65,536 ranks) and the time the fake nodes took to send;
#   - the central daemon's CPU over that time (user and system), per
#     rank, and its peak RSS (target: under 2 GiB);
#   - /healthz latency through the incident (target: under 100 ms);
#   - fr-analyze's verdict on the incident, which must name the planted
#     rank (exit 1 otherwise).
#
# This is the part of an incident that does not spread over the cluster:
# a real node daemon's work (ask its ranks, write their dumps, cut the
# summaries) runs on each node at once, and bench/nodes.sh measures it
# with everything on this machine.
#
# Environment: BUILD (default build), RANKS (65536), NODES (64), ENTRIES
# (64, per rank dump), SEED (1), CACHE (a directory to keep the summaries
# in for the next run), PROFILE (a file: perf record -g of the
# central daemon through the incident). Exits 1 on a wrong verdict or a missing
# incident, 2 when it cannot run; missed targets are reported, not failed.
. "$(dirname "$0")/../tests/e2e/lib.sh"

RANKS=${RANKS:-65536}
NODES=${NODES:-64}
ENTRIES=${ENTRIES:-64}
SEED=${SEED:-1}
PLANTED=$(((RANKS / 2 + 5) % RANKS))
JOB=bench-train
FAKENODES=$BUILD_DIR/bench/fakenodes
HZ=$(getconf CLK_TCK)

say() { echo "== central: $*"; }
cpu_ticks() { awk '{print $14, $15}' "/proc/$1/stat"; }

for p in "$FAKENODES" "$BUILD_DIR/bench/gen_dumps" "$BUILD_DIR/bench/summarize" "$BIN/fr-analyze"; do
	[ -x "$p" ] || { echo "bench/central.sh: $p is missing: run make bench" >&2; exit 2; }
done

say "$RANKS ranks behind $NODES fake node daemons, $ENTRIES entries a rank, planted culprit rank $PLANTED; $(nproc) CPUs"
# CACHE=DIR keeps the summaries made for one RANKS, ENTRIES and SEED
# there, for the next run (making them takes minutes at 65,536 ranks).
src=$T
if [ -n "${CACHE:-}" ]; then
	src=$CACHE/central-$RANKS-$ENTRIES-$SEED
	[ -s "$src/made" ] || rm -rf "$src"
fi
if [ ! -d "$src/summaries" ]; then
	mkdir -p "$src"
	"$BUILD_DIR/bench/gen_dumps" "$src/full" "$RANKS" "$ENTRIES" --seed "$SEED" >/dev/null || fail "gen_dumps failed"
	"$BUILD_DIR/bench/summarize" "$src/full" "$src/summaries" >"$T/summarize.out" 2>&1 ||
		fail "summarize failed: $(tail -n 3 "$T/summarize.out")"
	# The fake nodes hold the culprit's full dump only: the others are
	# never fetched, and would cost their memory.
	mkdir "$src/kept" && mv "$src/full/rank-$PLANTED.json" "$src/kept/" && rm -rf "$src/full"
	date >"$src/made"
fi
say "summaries: $(du -sb "$src/summaries" | awk -v r="$RANKS" '{printf "%.1f MiB, %.1f KiB a rank", $1 / 2^20, $1 / r / 1024}')"

make_token
# The fake nodes stand for other machines: at nice 19 they take what CPU
# the central daemon leaves, rather than half of it.
# Every fake node connects from 127.0.0.1, where real ones come each from
# its own address: the per-address cap on connections not yet introduced
# must hold them all.
start_daemon --token-file "$TOKEN" --heartbeat-timeout 60 --dump-deadline 60 \
	--max-pending-per-address "$((NODES + 64))"
nice -n 19 "$FAKENODES" "127.0.0.1:$LISTEN_PORT" "$JOB" "$RANKS" "$NODES" "$src/summaries" --full "$src/kept" --token "$TOKEN" \
	>"$T/fakenodes.out" 2>"$T/fakenodes.err" &
track_pid "$!"
all_up() {
	[ "$(http_get /v1/nodes 2>/dev/null | jq -r '[.nodes[] | select(.connected) | .ranks] | add // 0')" = "$RANKS" ]
}
wait_for 120 all_up || fail "the central daemon does not list $RANKS ranks: $(cat "$T/fakenodes.err")"

# /healthz every 100 ms from here on, one latency a line (2: no answer).
(
	while :; do
		curl -s -o /dev/null -m 2 -w '%{time_total}\n' "$HTTP/healthz" || echo 2
		sleep 0.1
	done
) >"$T/healthz.txt" 2>/dev/null &
track_pid "$!"

# PROFILE=FILE: perf record of the central daemon through the incident.
if [ -n "${PROFILE:-}" ]; then
	perf record -g -o "$PROFILE" -p "$DAEMON_PID" >"$T/perf.log" 2>&1 &
	PERF_PID=$!
	sleep 1
fi
# The daemon's log lines from here on, each with the time it was read.
tail -n 0 -F "$T/daemon.log" 2>/dev/null | while IFS= read -r line; do echo "$EPOCHREALTIME $line"; done >"$T/stamped.log" &
track_pid "$!"
read -r u0 s0 <<<"$(cpu_ticks "$DAEMON_PID")"
t0=$(now_s)
http_headers
code=$(curl -s -o "$T/post.json" -w '%{http_code}' -X POST "${HTTP_HEADERS[@]}" "$HTTP/v1/jobs/$JOB/dump")
[ "$code" = 202 ] || [ "$code" = 200 ] || fail "POST /v1/jobs/$JOB/dump: HTTP $code: $(cat "$T/post.json")"
# Polled every 50 ms: when every rank had answered, and when the incident
# was complete (judged, the culprit's full dump fetched, the manifest on disk).
t_answered=
while :; do
	http_get "/v1/jobs/$JOB/incidents" >"$T/incidents.json" 2>/dev/null
	[ -z "$t_answered" ] && jq -e --argjson n "$RANKS" '.incidents[0].ranks_answered == $n' "$T/incidents.json" >/dev/null 2>&1 &&
		t_answered=$(now_s)
	jq -e '[.incidents[]? | select(.status == "complete")] | length > 0' "$T/incidents.json" >/dev/null 2>&1 && break
	awk -v a="$t0" -v b="$(now_s)" 'BEGIN {exit !(b - a > 300)}' && fail "no complete incident within 300 s: $(cat "$T/incidents.json")"
	sleep 0.05
done
t1=$(now_s)
read -r u1 s1 <<<"$(cpu_ticks "$DAEMON_PID")"
[ -n "${PROFILE:-}" ] && kill -INT "$PERF_PID" && wait "$PERF_PID"
rec=$(jq -c '[.incidents[] | select(.status == "complete")][0]' "$T/incidents.json")
sent=$(awk '$1 == "sent" && $3 > m {m = $3} END {printf "%.2f", m}' "$T/fakenodes.out")
lat=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
say "incident complete $lat s after the request (the fake nodes had sent everything by $sent s, every rank \
answered by $(awk -v a="$t0" -v b="${t_answered:-$t1}" 'BEGIN {printf "%.2f", b - a}') s), \
$(jq -r .ranks_answered <<<"$rec") of $RANKS ranks answered [target < 5 s: $(pass "$lat" 5)]"
awk -v u="$((u1 - u0))" -v s="$((s1 - s0))" -v hz="$HZ" -v r="$RANKS" -v t="$lat" 'BEGIN {
	printf "== central: central CPU %.2f s (user %.2f s, system %.2f s): %.0f us a rank, %.0f%% of one core over the incident\n",
		(u + s) / hz, u / hz, s / hz, 1e6 * (u + s) / hz / r, 100 * (u + s) / hz / t }'
# Where the time went, from the daemon's log: the last node done, the
# summaries judged, the culprit's full dump in, the incident closed.
wait_for 10 grep -q " closed" "$T/stamped.log" || true
at() { awk -v t0="$t0" -v pat="$1" 'index($0, pat) {t = $1} END {if (t) printf "%.2f", t - t0; else printf "?"}' "$T/stamped.log"; }
say "phases (s after the request): summaries collected $(at 'collected the summaries'), judged $(at 'the summaries say'), \
culprit's full dump $(at 'full dump fetched'), closed $(at ' closed')"
# What an operator's journal gets of one incident: a few lines, whatever
# the number of nodes.
say "daemon log: $(wc -l <"$T/stamped.log") lines through the incident ($NODES nodes)"
hwm=$(hwm_kib "$DAEMON_PID")
say "central peak RSS $(awk -v k="$hwm" 'BEGIN {printf "%.0f", k / 1024}') MiB [target < 2048 MiB: $(pass "$((hwm / 1024))" 2048)]"
sort -n "$T/healthz.txt" | awk '{v[NR] = $1} END {
	p99 = v[int(NR * 0.99) > 0 ? int(NR * 0.99) : 1]
	printf "== central: /healthz during the incident: %d polls, median %.0f ms, p99 %.0f ms, max %.0f ms [target < 100 ms: %s]\n",
		NR, 1000 * v[int((NR + 1) / 2)], 1000 * p99, 1000 * v[NR], (v[NR] < 0.1 ? "PASS" : "FAIL") }'

dir=$T/incidents/$JOB/$(jq -r .id <<<"$rec")
# Every rank in the manifest, each with its summary's file.
listed=$(jq '[.ranks[] | select(.answer == "received" and .dump != null)] | length' "$dir/manifest.json")
[ "$listed" = "$RANKS" ] || fail "the manifest lists $listed of $RANKS ranks as received with a file"
/usr/bin/time -o "$T/time" -f '%e %M' "$BIN/fr-analyze" "$dir" >"$T/verdict.txt" 2>&1
verdict=$(head -n 1 "$T/verdict.txt")
grep -Eq "^rank $PLANTED[ (]" <<<"$verdict" || fail "WRONG VERDICT: expected rank $PLANTED; got: $verdict"
say "verdict: $verdict"
read -r fa_s fa_kib < <(tail -n 1 "$T/time")
say "fr-analyze on the incident ($(ls "$dir" | wc -l) files, $(du -sb "$dir" | awk '{printf "%.0f MiB", $1 / 2^20}')): \
$fa_s s, peak $((fa_kib / 1024)) MiB [target < 2 s: $(pass "$fa_s" 2); < 2 GiB: $(pass "$((fa_kib / 1024))" 2048)]"
say "full dumps fetched: $(grep -c "full dump fetched" "$T/daemon.log")"
