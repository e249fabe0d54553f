#!/usr/bin/env bash
# fr-analyze on an incident of summaries at the scale of issue 18: RANKS
# ranks (default 65,536) of ENTRIES entries each (default 64), written by
# bench/gen_dumps with a planted hang, cut by bench/summarize to the
# summaries node daemons send up (dumps/FORMAT.md, "Summaries"), the full
# dumps then removed. Reports the best elapsed time, the least CPU time and
# the peak memory of ROUNDS runs of fr-analyze on the summaries, against
# the targets (under 2 s, under 2 GiB), and checks that the verdict names
# the planted rank.
#
# Environment: BUILD (default build), RANKS, ENTRIES, ROUNDS (default 3),
# SEED (default 1). Exits 1 on a wrong verdict, 2 when it cannot run;
# missed targets are reported, not failed.
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=$ROOT/${BUILD:-build}
BIN=$BUILD_DIR/bin
RANKS=${RANKS:-65536}
ENTRIES=${ENTRIES:-64}
ROUNDS=${ROUNDS:-3}
SEED=${SEED:-1}

die() {
	echo "bench/summaries.sh: $*" >&2
	exit 2
}

[ -x /usr/bin/time ] || die "/usr/bin/time is missing (apt-get install time)"
for p in "$BIN/fr-analyze" "$BUILD_DIR/bench/gen_dumps" "$BUILD_DIR/bench/summarize"; do
	[ -x "$p" ] || die "$p is missing: run make bench BUILD=${BUILD:-build}"
done
for v in RANKS ENTRIES ROUNDS SEED; do
	case ${!v} in '' | *[!0-9]*) die "$v must be a number, not '${!v}'" ;; esac
done
PLANTED=$(( (RANKS / 2 + 5) % RANKS ))
T=$(mktemp -d /tmp/flightrec-bench.XXXXXX) || die "cannot make a temporary directory"
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT TERM

echo "== summaries: $RANKS ranks x $ENTRIES entries, planted culprit rank $PLANTED; $(nproc) CPUs"
start=$(date +%s.%N)
"$BUILD_DIR/bench/gen_dumps" "$T/full" "$RANKS" "$ENTRIES" --seed "$SEED" >/dev/null ||
	die "gen_dumps failed"
full_bytes=$(du -sb "$T/full" | cut -f1)
"$BUILD_DIR/bench/summarize" "$T/full" "$T/summaries" >"$T/summarize.out" 2>&1 ||
	die "summarize failed: $(tail -n 3 "$T/summarize.out")"
sum_bytes=$(du -sb "$T/summaries" | cut -f1)
rm -rf "$T/full"
awk -v r="$RANKS" -v f="$full_bytes" -v s="$sum_bytes" -v t0="$start" -v t1="$(date +%s.%N)" 'BEGIN {
	printf "   full dumps %.1f MiB, summaries %.1f MiB (%.1f KiB a rank), made in %.0f s\n",
		f / 2^20, s / 2^20, s / r / 1024, t1 - t0 }'

best= cpu_best= peak=0 runs=
for i in $(seq "$ROUNDS"); do
	/usr/bin/time -o "$T/time" -f '%e %M %U %S' "$BIN/fr-analyze" "$T/summaries" >"$T/out" 2>"$T/err"
	rc=$?
	[ "$rc" -eq 1 ] || { echo "WRONG VERDICT: fr-analyze exited $rc (1 expected)"; head -n 5 "$T/out" "$T/err"; exit 1; }
	read -r s kib user sys < <(tail -n 1 "$T/time")
	runs="$runs $s"
	cpu=$(awk -v u="$user" -v y="$sys" 'BEGIN { printf "%.2f", u + y }')
	{ [ -z "$best" ] || awk -v a="$s" -v b="$best" 'BEGIN { exit !(a < b) }'; } && best=$s
	{ [ -z "$cpu_best" ] || awk -v a="$cpu" -v b="$cpu_best" 'BEGIN { exit !(a < b) }'; } && cpu_best=$cpu
	[ "$kib" -gt "$peak" ] && peak=$kib
	verdict=$(head -n 1 "$T/out")
	grep -Eq "^rank $PLANTED[ (].*never entered" <<<"$verdict" ||
		{ echo "WRONG VERDICT: expected rank $PLANTED; got: $verdict"; exit 1; }
done
awk -v r="$RANKS" -v s="$best" -v c="$cpu_best" -v kib="$peak" 'BEGIN {
	mib = kib / 1024
	printf "== fr-analyze on %d ranks of summaries: best %.2f s (CPU %.2f s), peak %.0f MiB [target < 2 s: %s; < 2 GiB: %s]\n",
		r, s, c, mib, (s < 2 ? "PASS" : "FAIL"), (mib < 2048 ? "PASS" : "FAIL") }'
echo "   runs (s):$runs"
echo "   verdict: $verdict"
