#!/usr/bin/env bash
# fr-analyze at scale: the time to a verdict and the peak memory on a large
# synthetic incident (RANKS ranks x ENTRIES entries, by default 1024 x 2048),
# in our JSON dumps, PyTorch's pickles and PyTorch's JSON, and whether the
# time grows linearly with the number of entries.
#
# The dumps are generated into a temporary directory (bench/gen_dumps,
# bench/gen_pytorch.py), each set removed once measured, all of it at exit.
# They have just been written, so they are read from a warm page cache:
# this measures parsing and correlation, not the disk. Each measurement is
# the best elapsed time of ROUNDS runs, the least CPU time (user + system,
# both cores together: on a shared machine it varies less than the elapsed
# time) and the highest peak resident memory among them (/usr/bin/time).
#
# Environment: BUILD (build directory, default build), RANKS, ENTRIES,
# ROUNDS (default 3), SEED (default 1), PYTORCH_JSON=0 to skip PyTorch's
# JSON, LINEARITY=0 to skip the linearity check.
#
# Exits 1 when a verdict does not name the planted rank, 2 when it cannot
# run; missed targets are reported, not failed.
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=$ROOT/${BUILD:-build}
BIN=$BUILD_DIR/bin
GEN=$BUILD_DIR/bench/gen_dumps
GEN_PYTORCH=$ROOT/bench/gen_pytorch.py
RANKS=${RANKS:-1024}
ENTRIES=${ENTRIES:-2048}
ROUNDS=${ROUNDS:-3}
SEED=${SEED:-1}
PYTORCH_JSON=${PYTORCH_JSON:-1}
LINEARITY=${LINEARITY:-1}
TIME_TARGET_S=1
MEM_TARGET_MIB=1024

die() {
	echo "bench/analyze.sh: $*" >&2
	exit 2
}

[ -x /usr/bin/time ] || die "/usr/bin/time is missing: install the Debian package \`time\` (apt-get install time)"
[ -x "$BIN/fr-analyze" ] || die "$BIN/fr-analyze is missing: run make BUILD=${BUILD:-build} first"
[ -x "$GEN" ] || die "$GEN is missing: run make bench BUILD=${BUILD:-build} (it builds the generator)"
command -v python3 >/dev/null || die "python3 is missing (bench/gen_pytorch.py needs it)"
for v in RANKS ENTRIES ROUNDS SEED; do
	case ${!v} in '' | *[!0-9]*) die "$v must be a number, not '${!v}'" ;; esac
done
[ "$RANKS" -ge 2 ] && [ "$ENTRIES" -ge 1 ] && [ "$ROUNDS" -ge 1 ] ||
	die "RANKS must be at least 2, ENTRIES and ROUNDS at least 1"
# The rank the generators plant the hang on.
PLANTED=$(( (RANKS / 2 + 5) % RANKS ))

T=$(mktemp -d /tmp/flightrec-bench.XXXXXX) || die "cannot make a temporary directory"
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT TERM

# human BYTES: "1.23 GiB", "512 MiB"
human() {
	awk -v b="$1" 'BEGIN {
		if (b >= 2^30) printf "%.2f GiB", b / 2^30
		else if (b >= 2^20) printf "%.0f MiB", b / 2^20
		else printf "%.0f KiB", b / 2^10 }'
}

# measure DIR: runs fr-analyze on DIR ROUNDS times. Sets BEST_S (the best
# elapsed seconds), CPU_S (the least CPU seconds), PEAK_KIB (the highest
# peak memory), RUNS (every time) and VERDICT (the first line of its
# report); exits 1 when the verdict does not name the planted rank.
measure() {
	local dir=$1 i rc s kib user sys cpu
	BEST_S= CPU_S= PEAK_KIB=0 RUNS= VERDICT=
	for i in $(seq "$ROUNDS"); do
		/usr/bin/time -o "$T/time" -f '%e %M %U %S' "$BIN/fr-analyze" "$dir" >"$T/out" 2>"$T/err"
		rc=$?
		# 1: a problem was named (the hang); 0 or 2 is wrong here.
		if [ "$rc" -ne 1 ]; then
			echo "WRONG VERDICT: fr-analyze $dir exited $rc (1 expected: a hang named)"
			head -n 5 "$T/out" "$T/err"
			exit 1
		fi
		# With a non-zero status, time writes a line of its own first.
		read -r s kib user sys < <(tail -n 1 "$T/time")
		RUNS="$RUNS $s"
		if [ -z "$BEST_S" ] || awk -v a="$s" -v b="$BEST_S" 'BEGIN { exit !(a < b) }'; then
			BEST_S=$s
		fi
		cpu=$(awk -v u="$user" -v y="$sys" 'BEGIN { printf "%.2f", u + y }')
		if [ -z "$CPU_S" ] || awk -v a="$cpu" -v b="$CPU_S" 'BEGIN { exit !(a < b) }'; then
			CPU_S=$cpu
		fi
		[ "$kib" -gt "$PEAK_KIB" ] && PEAK_KIB=$kib
		VERDICT=$(head -n 1 "$T/out")
		if ! grep -Eq "^rank $PLANTED[ (].*never entered" <<<"$VERDICT"; then
			echo "WRONG VERDICT: expected rank $PLANTED named as never entering; got:"
			echo "   $VERDICT"
			exit 1
		fi
	done
	if [ -s "$T/err" ]; then
		echo "   fr-analyze wrote on stderr:"
		head -n 5 "$T/err" | sed 's/^/     /'
	fi
}

# report WHAT BYTES: the result line of the last measure().
report() {
	local what=$1 bytes=$2 entries=$((RANKS * ENTRIES))
	awk -v r="$RANKS" -v e="$ENTRIES" -v n="$entries" -v size="$(human "$bytes")" \
		-v what="$what" -v s="$BEST_S" -v kib="$PEAK_KIB" -v ts="$TIME_TARGET_S" \
		-v tm="$MEM_TARGET_MIB" -v cpu="$CPU_S" 'BEGIN {
		mib = kib / 1024
		missed = ""
		if (s >= ts) missed = missed " time"
		if (mib >= tm) missed = missed " memory"
		printf "== fr-analyze on %d ranks x %d entries (%d entries, %s of %s): best %.2f s (CPU %.2f s), peak %.0f MiB (targets: < %g s, < %g GiB)%s\n",
			r, e, n, size, what, s, cpu, mib, ts, tm / 1024, (missed == "" ? "" : ";  MISSED:" missed) }'
	echo "   runs (s):$RUNS"
	echo "   verdict: $VERDICT"
}

dir_bytes() {
	find "$1" -type f -printf '%s\n' | awk '{ n += $1 } END { printf "%d", n }'
}

echo "== fr-analyze at scale: $RANKS ranks x $ENTRIES entries, best of $ROUNDS runs each," \
	"warm page cache (the dumps were just written; nothing is dropped from the cache);" \
	"$(nproc) CPUs; planted culprit: rank $PLANTED"

# Our JSON dumps.
d=$T/ours
"$GEN" "$d" "$RANKS" "$ENTRIES" --seed "$SEED" | sed 's/^/   generated /' || die "gen_dumps failed"
measure "$d"
report "our JSON" "$(dir_bytes "$d")"
ours_s=$BEST_S
rm -rf "$d"

# PyTorch's pickles (protocol 2, as its C++ writer).
d=$T/pytorch
python3 "$GEN_PYTORCH" "$d" "$RANKS" "$ENTRIES" --seed "$SEED" | sed 's/^/   generated /' ||
	die "gen_pytorch.py failed"
measure "$d"
report "PyTorch pickles" "$(dir_bytes "$d")"
pickle_s=$BEST_S
rm -rf "$d"

if [ "$PYTORCH_JSON" != 0 ]; then
	d=$T/pytorch-json
	python3 "$GEN_PYTORCH" "$d" "$RANKS" "$ENTRIES" --seed "$SEED" --json |
		sed 's/^/   generated /' || die "gen_pytorch.py --json failed"
	measure "$d"
	report "PyTorch JSON" "$(dir_bytes "$d")"
	rm -rf "$d"
fi

# Linearity: a quarter of the entries should take about a quarter of the time.
if [ "$LINEARITY" != 0 ]; then
	quarter=$((ENTRIES / 4))
	[ "$quarter" -ge 1 ] || quarter=1
	for kind in ours pickle; do
		d=$T/quarter-$kind
		if [ "$kind" = ours ]; then
			"$GEN" "$d" "$RANKS" "$quarter" --seed "$SEED" >/dev/null || die "gen_dumps failed"
			full_s=$ours_s what="our JSON"
		else
			python3 "$GEN_PYTORCH" "$d" "$RANKS" "$quarter" --seed "$SEED" >/dev/null ||
				die "gen_pytorch.py failed"
			full_s=$pickle_s what="PyTorch pickles"
		fi
		measure "$d"
		awk -v what="$what" -v r="$RANKS" -v q="$quarter" -v e="$ENTRIES" -v qs="$BEST_S" \
			-v fs="$full_s" -v kib="$PEAK_KIB" 'BEGIN {
			printf "== linearity, %s: %d ranks x %d entries best %.2f s (peak %.0f MiB), x %d entries best %.2f s: ", what, r, q, qs, kib / 1024, e, fs
			# Under 50 ms, time has too few digits for a ratio.
			if (qs < 0.05) printf "ratio not measurable (too fast to time)\n"
			else printf "ratio %.1f for %.0fx the entries (linear: about %.0f)\n", fs / qs, e / q, e / q }'
		rm -rf "$d"
	done
fi
