#!/usr/bin/env bash
# Summaries (docs/SCALE-OUT.md, "Incidents at scale"): fr-analyze must give
# the same verdict on the summaries a node daemon sends up as on the ranks'
# full dumps. For the stored incidents (tests/data/analyze) and generated
# ones (bench/gen_dumps, bench/gen_pytorch.py), bench/summarize writes every
# rank's summary, focused on the stuck operation and unfocused, and
# fr-analyze --json must say the same of both directories but for
# "full_dumps" (only on summaries, naming each rank's full dump) and
# "aligned" (a summary keeps a window of each ring). No job, no daemon.
. "$(dirname "$0")/lib.sh"

SUMMARIZE=$BUILD_DIR/bench/summarize
GEN=$BUILD_DIR/bench/gen_dumps
[ -x "$SUMMARIZE" ] && [ -x "$GEN" ] || fail "build $SUMMARIZE and $GEN first (make e2e does)"

# fa NAME DIR: fr-analyze --json DIR into $T/NAME.json, stderr in $T/NAME.log.
fa() {
	timeout 60 "$BIN/fr-analyze" --json "$2" >"$T/$1.json" 2>"$T/$1.log"
	RC=$?
}

# same FULL_DIR NAME: summarize FULL_DIR both ways; the verdicts must agree.
same() {
	local full=$1 name=$2 how
	fa "$name" "$full"
	local want=$RC
	[ "$want" -le 1 ] || fail "$name: fr-analyze exit $want: $(cat "$T/$name.log")"
	expect 'has("full_dumps") | not' "$T/$name.json"
	for how in focus no-focus; do
		local s=$T/$name-$how flag=
		[ "$how" = no-focus ] && flag=--no-focus
		timeout 60 "$SUMMARIZE" $flag "$full" "$s" >"$T/$name-$how.size" 2>"$T/$name-$how.slog" ||
			fail "$name: summarize $flag: $(cat "$T/$name-$how.slog")"
		fa "$name-$how" "$s"
		[ "$RC" -eq "$want" ] || fail "$name ($how): exit $RC, the full dumps' $want: $(cat "$T/$name-$how.log")"
		jq -S 'del(.full_dumps, .aligned)' "$T/$name.json" >"$T/a.json"
		jq -S 'del(.full_dumps, .aligned)' "$T/$name-$how.json" >"$T/b.json"
		diff "$T/a.json" "$T/b.json" >"$T/diff" ||
			fail "$name ($how): the verdicts differ: $(cat "$T/diff")"
		# Every summarized rank is named, with a full dump that is there.
		local ndumps
		ndumps=$(ls "$s" | grep -c '^rank-.*\.json$')
		expect "(.full_dumps | length) == $ndumps and ([.full_dumps[].rank] | . == sort)" \
			"$T/$name-$how.json"
		local p paths
		mapfile -t paths < <(jq -r '.full_dumps[].path' "$T/$name-$how.json")
		for p in "${paths[@]}"; do
			[ -f "$p" ] || fail "$name ($how): full dump $p is not there"
		done
	done
}

same "$ROOT/tests/data/analyze/two-comms" two-comms
same "$ROOT/tests/data/analyze/nccl-pair" nccl-pair

# The report says which ranks' evidence is a summary, and where the
# culprit's full dump is.
"$BIN/fr-analyze" "$T/two-comms-focus" >"$T/report.out" 2>&1
grep -Eq '^Summaries: the evidence of ranks 0-2 is a summary' "$T/report.out" ||
	fail "no Summaries line: $(cat "$T/report.out")"
grep -Fq "  rank 1's full dump: node01:$ROOT/tests/data/analyze/two-comms/rank-1.json" "$T/report.out" ||
	fail "the culprit's full dump is not named: $(cat "$T/report.out")"
# Without summaries, no such line.
"$BIN/fr-analyze" "$ROOT/tests/data/analyze/two-comms" >"$T/plain.out" 2>&1
grep -q '^Summaries' "$T/plain.out" && fail "a Summaries line without summaries: $(cat "$T/plain.out")"

"$GEN" "$T/gen" 64 2048 >/dev/null 2>"$T/gen.log" || fail "gen_dumps: $(cat "$T/gen.log")"
same "$T/gen" gen
expect '.verdict == "hang" and .culprits[0].rank == 37 and .culprits[0].reason == "not_entered"' \
	"$T/gen-focus.json"
# The summaries of a 64 x 2048 incident are at least ten times smaller.
ratio=$(sed -n 's/.*(\([0-9]*\)\.[0-9]x)$/\1/p' "$T/gen-focus.size")
[ "${ratio:-0}" -ge 10 ] || fail "summaries only ${ratio}x smaller: $(cat "$T/gen-focus.size")"

python3 "$ROOT/bench/gen_pytorch.py" "$T/torch" 16 512 >/dev/null 2>"$T/torch.log" ||
	fail "gen_pytorch: $(cat "$T/torch.log")"
same "$T/torch" torch

echo "PASS summary: the same verdict from summaries as from full dumps (stored, generated MPI and PyTorch incidents; $(cat "$T/gen-focus.size"))"
