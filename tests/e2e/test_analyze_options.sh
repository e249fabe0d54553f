#!/usr/bin/env bash
# fr-analyze --rank and --comm on stored incidents (tests/data/analyze/, see
# its README). two-comms: world of 4, rank 0 waits in all_reduce #5 on
# w.split.a [0,1] that rank 1 never entered, w.split.b [2,3] is idle, rank 3
# has no dump (the manifest's live view of it only). nccl-pair: two NCCL
# ranks, each knowing only its own entry of their communicator. No job, no
# daemon.
. "$(dirname "$0")/lib.sh"

D=$ROOT/tests/data/analyze/two-comms
NP=$ROOT/tests/data/analyze/nccl-pair

# fa NAME ARGS...: fr-analyze ARGS, stdout in $T/NAME.out, stderr in
# $T/NAME.log (where the cleanup looks for sanitizer reports); sets RC.
fa() {
	local name=$1
	shift
	"$BIN/fr-analyze" "$@" >"$T/$name.out" 2>"$T/$name.log"
	RC=$?
}

# want_rc NAME RC: the run NAME exited with RC.
want_rc() {
	[ "$RC" -eq "$2" ] || fail "$1: exit $RC, want $2; stdout: $(cat "$T/$1.out"); stderr: $(cat "$T/$1.log")"
}

# has NAME FILE-SUFFIX REGEX: a line of the run's stdout (out) or stderr (log) matches.
has() {
	grep -Eq -- "$3" "$T/$1.$2" || fail "$1: no line matching '$3' in its $2: $(cat "$T/$1.$2")"
}

hasnt() {
	! grep -Eq -- "$3" "$T/$1.$2" || fail "$1: a line matches '$3' in its $2: $(cat "$T/$1.$2")"
}

# --rank 1: its header, every entry oldest first with times before the
# dump, and its application thread's stack without the agent's own thread.
fa r1 --rank 1 "$D"
want_rc r1 0
has r1 out '^Rank 1 of 4$'
has r1 out '^  host: +node01, pid 4201$'
has r1 out '^  status: +dumped \(its own dump, .*/rank-1\.json\)$'
has r1 out '^  dumped at: 2023-11-14 22:14:20\.001 UTC$'
has r1 out '^  incident: +inc-0001$'
has r1 out '^  w\.split\.a +split of world, color 0 +1 +2 +#4 +#4$'
has r1 out '^Entries \(6, oldest first'
has r1 out '^ +0 +world +1 +barrier +completed +0 +byte +- +-59\.001s +412\.0us$'
has r1 out '^ +4 +w\.split\.a +4 +all_reduce +completed +1024 +double +- +-20\.001s +1\.254ms$'
has r1 out '^ +5 +world +1 +send +completed +16 +int32 +peer 2 +-15\.001s +82\.0us +nonblocking$'
[ "$(grep -Ec '^ +[0-9]+ +(world|w\.split\.a) ' "$T/r1.out")" -eq 6 ] || fail "r1: not 6 entries: $(cat "$T/r1.out")"
has r1 out '^  thread 4201 "python":$'
has r1 out '^    #0 compute_loss\+0x2c$'
has r1 out '^    #2 main\+0x88$'
hasnt r1 out 'fr_agent_dump'
[ ! -s "$T/r1.log" ] || fail "r1: warnings: $(cat "$T/r1.log")"

# --rank 1 --json: the dump object, which fr-analyze reads back as rank 1.
fa r1json --rank 1 --json "$D"
want_rc r1json 0
expect '.format == "flightrec-dump" and .rank == 1 and .world_size == 4 and .status == "dumped"' "$T/r1json.out"
expect '[.entries[].record_id] == [0,1,2,3,4,5] and (.pg_config | keys) == ["w.split.a","world"]' "$T/r1json.out"
expect '.threads[0].frames[0].name == "compute_loss"' "$T/r1json.out"
mkdir "$T/again"
cp "$T/r1json.out" "$T/again/rank-1.json"
fa again --rank 1 "$T/again"
want_rc again 0
diff <(grep -v '^  status:' "$T/r1.out") <(grep -v '^  status:' "$T/again.out") >"$T/again.diff" ||
	fail "the JSON of rank 1 does not read back the same: $(cat "$T/again.diff")"

# --rank 3: no dump; the manifest's live view is its evidence.
fa r3 --rank 3 "$D"
want_rc r3 0
has r3 out '^  status: +unresponsive \(no dump: the daemon.s live view of it, in .*/manifest\.json\)$'
has r3 out '^  w\.split\.b +split of world, color 1 +1 +2 +#3 +#3$'
has r3 out '^  none in its evidence \(the daemon.s live view has none\)$'

# GPU operations in flight are enqueued or started, as in the report; a
# peer its rank knows only by communicator rank is named from the other
# rank's evidence, else shown as such.
fa n0 --rank 0 "$NP"
want_rc n0 0
has n0 out '^ +1 +nccl-5f3a9c0e +1 +send +enqueued +256 +float +peer 1 +-10\.000s +-$'
fa n1 --rank 1 "$NP"
want_rc n1 0
has n1 out '^ +1 +nccl-5f3a9c0e +1 +recv +started +256 +float +peer 0 +-10\.001s +-$'
mkdir "$T/alone"
cp "$NP/rank-0.json" "$T/alone/"
fa alone --rank 0 "$T/alone"
want_rc alone 0
has alone out '^ +1 +nccl-5f3a9c0e +1 +send +enqueued +256 +float +peer c1 +-10\.000s +-$'
has alone out '^  \(cN: communicator rank N, whose global rank no evidence names\)$'

# --rank of a rank the job does not have.
fa r99 --rank 99 "$D"
want_rc r99 2
has r99 log "^fr-analyze: .*two-comms: no evidence of rank 99 \(the job has 4 ranks"
[ ! -s "$T/r99.out" ] || fail "r99: printed $(cat "$T/r99.out")"
# ... and of one it has, but without a dump or a manifest.
fa a1 --rank 1 "$T/alone"
want_rc a1 2
has a1 log "^fr-analyze: .*/alone: no evidence of rank 1 \(no dump of it\)$"

# Bad values: exit 2 with a message, before reading anything.
for v in x -1 16777216 1x ""; do
	fa bad --rank "$v" "$D"
	want_rc bad 2
	has bad log "^fr-analyze: --rank '$v': (not a rank|a rank is not negative|too large)"
	[ ! -s "$T/bad.out" ] || fail "--rank '$v' printed $(cat "$T/bad.out")"
done
fa noval "$D" --rank
want_rc noval 2
has noval log "option '--rank' needs a value"

# --comm: the whole job hangs on w.split.a; w.split.b alone is fine.
fa all --json "$D"
want_rc all 1
expect '.verdict == "hang" and .op.comm == "w.split.a"' "$T/all.out"
fa ca --comm w.split.a --json "$D"
want_rc ca 1
expect '.verdict == "hang" and [.culprits[] | [.rank, .reason]] == [[1, "not_entered"]]' "$T/ca.out"
expect '.op.comm == "w.split.a" and .op.seq == 5 and .waiting_ranks == [0]' "$T/ca.out"
fa cb --comm w.split.b --json "$D"
want_rc cb 0
expect '.verdict == "ok" and .culprits == [] and .op == null' "$T/cb.out"
fa cbtext --comm w.split.b "$D"
want_rc cbtext 0
has cbtext out '^Verdict: ok$'

# --comm with --rank: the rank's table shows that communicator only.
fa r0a --rank 0 --comm w.split.a "$D"
want_rc r0a 0
has r0a out '^Entries on w\.split\.a \(5, oldest first'
has r0a out '^ +5 +w\.split\.a +5 +all_reduce +entered +1024 +double +- +-10\.000s +-$'
hasnt r0a out 'barrier|MPI_COMM_WORLD'
fa r0ajson --rank 0 --comm w.split.a --json "$D"
want_rc r0ajson 0
expect '(.pg_config | keys) == ["w.split.a"] and ([.entries[].pg_id] | unique) == ["w.split.a"]' "$T/r0ajson.out"

# An unknown communicator: exit 2, listing the ids the evidence knows.
fa nosuch --comm nosuch "$D"
want_rc nosuch 2
has nosuch log 'no evidence names communicator "nosuch"; known communicators: w\.split\.a, w\.split\.b, world$'
[ ! -s "$T/nosuch.out" ] || fail "--comm nosuch printed $(cat "$T/nosuch.out")"
# ... at most 10 of them, then how many more.
mkdir "$T/many"
# (jq 1.6 turns integers past 2^53 into reals: keep none.)
jq '.rank = 0 | .world_size = 1 | .time_dumped_ns = 1700000000 | .entries = [] |
	.pg_status = {} | del(.threads) |
	.pg_config = ([range(12)] | map("c\(if . < 10 then "0" else "" end)\(.)" |
		{key: ., value: {name: ., desc: "", ranks: [0]}}) | from_entries)' \
	"$ROOT/tests/data/dumps/good-rank-0.json" >"$T/many/rank-0.json" || fail "jq could not make the dump"
fa many --comm nosuch "$T/many"
want_rc many 2
has many log 'known communicators: c00, c01, c02, c03, c04, c05, c06, c07, c08, c09, and 2 more$'

# The help documents both options.
fa help --help
want_rc help 0
has help out '^Usage: fr-analyze \[--json\] \[--rank N\] \[--comm ID\] PATH$'
has help out '^  --rank N '
has help out '^  --comm ID '
echo "PASS analyze options: --rank shows one rank's evidence (dump or live view, text or JSON); --comm narrows the verdict to one communicator"
