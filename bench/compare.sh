#!/usr/bin/env bash
# Compares two builds figure by figure, alternating them in one run, so that
# a change meant to keep performance (a refactor) can show it did on a
# shared, noisy machine: each figure is measured ROUNDS times per build,
# old and new taking turns, and reported as the best of each and new/old.
#
#   bench/compare.sh OLD_BUILD_DIR [NEW_BUILD_DIR]     (default new: build)
#
# Keep a copy of the build directory before the change (cp -a build
# /tmp/old-build), make the change, rebuild (make bench builds the
# generators), then compare. Figures:
#   1. agent cost per MPI_Allreduce (1 double, MPI_COMM_SELF), each build's
#      libflightrec.so preloaded into the same test program, and without it;
#   2. agent cost per ncclAllReduce over the CPU stand-in, host path;
#   3. fr-analyze on RANKS x ENTRIES synthetic dumps, our JSON and PyTorch
#      pickles (generated once, by the new build's generator).
#
# Environment: ROUNDS (default 5), CALLS (MPI calls per run, 2000000),
# NCALLS (NCCL calls, 200000), RANKS (512), ENTRIES (2048).
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OLD=${1:?usage: bench/compare.sh OLD_BUILD_DIR [NEW_BUILD_DIR]}
NEW=${2:-$ROOT/build}
ROUNDS=${ROUNDS:-5}
CALLS=${CALLS:-2000000}
NCALLS=${NCALLS:-200000}
RANKS=${RANKS:-512}
ENTRIES=${ENTRIES:-2048}

die() {
	echo "bench/compare.sh: $*" >&2
	exit 2
}
for b in "$OLD" "$NEW"; do
	for f in lib/libflightrec.so bin/fr-analyze; do
		[ -e "$b/$f" ] || die "$b/$f is missing (build it first)"
	done
done
OVERHEAD=$NEW/tests/mpi_overhead
NCCL_OVERHEAD=$NEW/tests/nccl/nccl_overhead
GEN=$NEW/bench/gen_dumps
for f in "$OVERHEAD" "$NCCL_OVERHEAD" "$GEN"; do
	[ -x "$f" ] || die "$f is missing: run make bench (or make $f) first"
done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl=self,vader
# The agents connect to nothing here: the hot path is the same, and the
# link's reconnect attempts back off to one every few seconds.
export FLIGHTREC_ADDR=127.0.0.1:9

T=$(mktemp -d /tmp/flightrec-compare.XXXXXX) || die "cannot make a temporary directory"
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT TERM

# min A B
min() { awk -v a="$1" -v b="$2" 'BEGIN { print (b == "" || a < b) ? a : b }'; }
# report WHAT UNIT OLD NEW
report() {
	awk -v w="$1" -v u="$2" -v o="$3" -v n="$4" 'BEGIN {
		printf "   %-34s old %8.3f %s   new %8.3f %s   new/old %s\n", w, o, u, n, u,
			(o > 0) ? sprintf("%.3f", n / o) : "-" }'
}

echo "== agent cost per MPI_Allreduce, best of $ROUNDS alternated runs ($CALLS calls each)"
b_none= b_old= b_new=
for i in $(seq "$ROUNDS"); do
	none=$(mpirun -np 1 "$OVERHEAD" "$CALLS") || die "mpi_overhead failed"
	old=$(mpirun -np 1 -x LD_PRELOAD="$OLD/lib/libflightrec.so" -x FLIGHTREC_ADDR \
		-x FLIGHTREC_JOB="cmp-old-$i" "$OVERHEAD" "$CALLS") || die "mpi_overhead (old) failed"
	new=$(mpirun -np 1 -x LD_PRELOAD="$NEW/lib/libflightrec.so" -x FLIGHTREC_ADDR \
		-x FLIGHTREC_JOB="cmp-new-$i" "$OVERHEAD" "$CALLS") || die "mpi_overhead (new) failed"
	echo "   run $i: without $none, old $old, new $new ns/call"
	b_none=$(min "$none" "$b_none") b_old=$(min "$old" "$b_old") b_new=$(min "$new" "$b_new")
done
report "added ns per call" ns "$(awk -v a="$b_old" -v b="$b_none" 'BEGIN { print a - b }')" \
	"$(awk -v a="$b_new" -v b="$b_none" 'BEGIN { print a - b }')"

echo "== agent cost per ncclAllReduce (CPU stand-in, host path), best of $ROUNDS ($NCALLS calls each)"
b_none= b_old= b_new=
for i in $(seq "$ROUNDS"); do
	none=$("$NCCL_OVERHEAD" "$NCALLS") || die "nccl_overhead failed"
	old=$(LD_PRELOAD="$OLD/lib/libflightrec.so" FLIGHTREC_GPU_EVENTS=0 "$NCCL_OVERHEAD" "$NCALLS")
	new=$(LD_PRELOAD="$NEW/lib/libflightrec.so" FLIGHTREC_GPU_EVENTS=0 "$NCCL_OVERHEAD" "$NCALLS")
	echo "   run $i: without $none, old $old, new $new ns/call"
	b_none=$(min "$none" "$b_none") b_old=$(min "$old" "$b_old") b_new=$(min "$new" "$b_new")
done
report "added ns per call" ns "$(awk -v a="$b_old" -v b="$b_none" 'BEGIN { print a - b }')" \
	"$(awk -v a="$b_new" -v b="$b_none" 'BEGIN { print a - b }')"

# analyze NAME DIR: both builds' fr-analyze on DIR, alternated.
analyze() {
	local name=$1 dir=$2 b_old= b_new= c_old= c_new= i t
	for i in $(seq "$ROUNDS"); do
		for which in old new; do
			local bin=$OLD/bin/fr-analyze
			[ "$which" = new ] && bin=$NEW/bin/fr-analyze
			/usr/bin/time -o "$T/time" -f '%e %U %S' "$bin" --json "$dir" >"$T/$which.json" 2>/dev/null
			[ $? -eq 1 ] || die "fr-analyze ($which) on $name did not name a hang"
			read -r t u s < <(tail -n 1 "$T/time")
			if [ "$which" = old ]; then
				b_old=$(min "$t" "$b_old") c_old=$(min "$(awk -v u="$u" -v s="$s" 'BEGIN { print u + s }')" "$c_old")
			else
				b_new=$(min "$t" "$b_new") c_new=$(min "$(awk -v u="$u" -v s="$s" 'BEGIN { print u + s }')" "$c_new")
			fi
		done
	done
	cmp -s "$T/old.json" "$T/new.json" || echo "   NOTE: the two builds' --json differ on $name"
	report "$name: wall (best)" s "$b_old" "$b_new"
	report "$name: CPU (least)" s "$c_old" "$c_new"
}

echo "== fr-analyze on $RANKS ranks x $ENTRIES entries, best of $ROUNDS alternated runs"
"$GEN" "$T/ours" "$RANKS" "$ENTRIES" >/dev/null || die "gen_dumps failed"
analyze "our JSON" "$T/ours"
rm -rf "$T/ours"
if python3 "$ROOT/bench/gen_pytorch.py" "$T/pt" "$RANKS" "$ENTRIES" >/dev/null; then
	analyze "PyTorch pickles" "$T/pt"
	rm -rf "$T/pt"
else
	echo "   (PyTorch pickles skipped: bench/gen_pytorch.py failed)"
fi
