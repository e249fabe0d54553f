#!/usr/bin/env bash
# fr-analyze on the incidents with the least evidence. The worst of all:
# every rank of a real job freezes at once (SIGSTOP between two
# collectives), none can dump, and the incident directory holds only the
# daemon's manifest: the verdict must name every rank unresponsive (exit 1,
# a hang), in text and JSON, and --rank/--comm must work on it. Then stored
# directories: a manifest whose ranks' dumps are all or partly missing, a
# directory with nothing in it (exit 2 and why), an empty or truncated
# manifest (an error naming it).
. "$(dirname "$0")/lib.sh"

D=$ROOT/tests/data/analyze/two-comms

# fa NAME ARGS...: fr-analyze ARGS, stdout in $T/NAME.out, stderr in
# $T/NAME.log (where the cleanup looks for sanitizer reports); sets RC.
# Bounded: a reader that blocks fails the test instead of hanging it.
fa() {
	local name=$1
	shift
	timeout 20 "$BIN/fr-analyze" "$@" >"$T/$name.out" 2>"$T/$name.log"
	RC=$?
}

want_rc() {
	[ "$RC" -eq "$2" ] || fail "$1: exit $RC, want $2; stdout: $(cat "$T/$1.out"); stderr: $(cat "$T/$1.log")"
}

has() {
	grep -Eq -- "$3" "$T/$1.$2" || fail "$1: no line matching '$3' in its $2: $(cat "$T/$1.$2")"
}

# --- Every rank frozen: a manifest and no dump. ---
start_daemon --timeout 60 --heartbeat-timeout 2 --dump-deadline 2
# 100 ms steps: the ranks' agents have reported their communicators (the
# link thread sends every 100 ms) well before they all stop, at step 20.
start_job 4 --scenario freeze --culprit -1 --at 20 --step-ms 100
wait_incident 40
stop_job
expect '.reason == "heartbeat"' "$INCIDENT/manifest.json"
expect '[.ranks[] | select(.answer == "unresponsive" and .dump == null)] | length == 4' \
	"$INCIDENT/manifest.json"
ls "$INCIDENT"/rank-*.json >/dev/null 2>&1 && fail "a frozen rank cannot have dumped: $(ls "$INCIDENT")"

fa frozen "$INCIDENT"
want_rc frozen 1
has frozen out '^ranks 0-3 are unresponsive; no rank dumped'
has frozen out '^Verdict: hang$'
has frozen out '^  no dump, unresponsive: ranks 0-3$'
for r in 0 1 2 3; do
	has frozen out "^Culprit rank $r \\(.*\\): unresponsive"
done
has frozen log 'no rank dumped; judging from the daemon.s live view in manifest.json only'

fa frozenjson --json "$INCIDENT"
want_rc frozenjson 1
expect '.verdict == "hang" and .op == null and .world_size == 4' "$T/frozenjson.out"
expect '[.culprits[] | [.rank, .reason]] == [[0,"unresponsive"],[1,"unresponsive"],[2,"unresponsive"],[3,"unresponsive"]]' \
	"$T/frozenjson.out"
expect '.culprits[0].pid > 0 and (.culprits[0].host | length) > 0' "$T/frozenjson.out"
expect '(.summary | startswith("ranks 0-3 are unresponsive")) and .waiting_ranks == []' \
	"$T/frozenjson.out"

# --rank: the manifest's view of the rank; a rank outside the job is exit 2.
fa frozenrank --rank 2 "$INCIDENT"
want_rc frozenrank 0
has frozenrank out '^Rank 2 of 4$'
has frozenrank out '^  status: +unresponsive \(no dump: the daemon.s live view of it, in .*manifest\.json\)$'
fa frozenrankjson --rank 2 --json "$INCIDENT"
want_rc frozenrankjson 0
expect '.rank == 2 and .status == "unresponsive"' "$T/frozenrankjson.out"
fa frozenrank9 --rank 9 "$INCIDENT"
want_rc frozenrank9 2
has frozenrank9 log 'no evidence of rank 9 \(the job has 4 ranks, 0 to 3\)'

# --comm: world is known (every rank's view lists it); anything else is
# bad usage that lists what is known.
fa frozenworld --comm world --json "$INCIDENT"
want_rc frozenworld 1
expect '.verdict == "hang" and ([.culprits[].rank] == [0,1,2,3])' "$T/frozenworld.out"
fa frozennope --comm nope "$INCIDENT"
want_rc frozennope 2
has frozennope log 'no evidence names communicator "nope"; known communicators: world'
stop_daemon

# --- A stored manifest whose ranks' dumps are all missing: the live view
# the manifest keeps of each rank gives the verdict. ---
mkdir "$T/manifest-only"
cp "$D/manifest.json" "$T/manifest-only/"
fa monly --json "$T/manifest-only"
want_rc monly 1
expect '.verdict == "hang" and [.culprits[] | [.rank, .reason]] == [[1,"not_entered"]]' "$T/monly.out"
expect '.op.comm == "w.split.a" and .op.seq == 5 and .waiting_ranks == [0]' "$T/monly.out"
fa monlytext "$T/manifest-only"
want_rc monlytext 1
has monlytext out '^  no dump, live: ranks 0-2$'
has monlytext out '^  no dump, unresponsive: rank 3$'
# Only w.split.b: nothing in flight, but no rank dumped and rank 3 went
# silent: that is the finding.
fa monlyb --comm w.split.b --json "$T/manifest-only"
want_rc monlyb 1
expect '.verdict == "hang" and [.culprits[] | [.rank, .reason]] == [[3,"unresponsive"]] and .op == null' \
	"$T/monlyb.out"

# Some dumps missing: rank 1's dump is there, the others' views stand in.
mkdir "$T/some"
cp "$D/manifest.json" "$D/rank-1.json" "$T/some/"
fa some "$T/some"
want_rc some 1
has some out '^rank 1 \(node01, pid 4201\) never entered all_reduce #5 on w.split.a'
has some out '^  no dump, live: ranks 0,2$'
has some out '^  thread 4201 "python":$'
# With one rank dumped, the idle communicator is no hang (as with all dumps).
fa someb --comm w.split.b --json "$T/some"
want_rc someb 0
expect '.verdict == "ok"' "$T/someb.out"

# --- Nothing at all: exit 2 and why, whatever the options. ---
mkdir "$T/empty"
for opts in "" "--json" "--rank 0" "--comm world"; do
	# shellcheck disable=SC2086 # the options are words
	fa empty $opts "$T/empty"
	want_rc empty 2
	has empty log "^fr-analyze: $T/empty: no usable dump \\(no rank-\\*\\.json or flightrec dump in it\\)$"
	[ -s "$T/empty.out" ] && fail "empty $opts: printed a verdict: $(cat "$T/empty.out")"
done
mkdir "$T/notes"
echo "nothing to see" >"$T/notes/README"
echo '{"not": "a dump"}' >"$T/notes/other.json"
fa notes "$T/notes"
want_rc notes 2
has notes log 'no usable dump'

# --- An empty or truncated manifest, and no dump: its name and what is
# wrong, exit 2. ---
mkdir "$T/em" "$T/tr"
: >"$T/em/manifest.json"
head -c 3000 "$D/manifest.json" >"$T/tr/manifest.json"
fa em "$T/em"
want_rc em 2
has em log "^fr-analyze: $T/em/manifest.json: an empty file; going on without the manifest$"
has em log 'no usable dump \(.*and its manifest\.json is unusable, see above\)'
fa tr --json "$T/tr"
want_rc tr 2
has tr log "^fr-analyze: $T/tr/manifest.json: invalid JSON at line [0-9]+, column [0-9]+: .*; going on without the manifest$"
# With the dumps beside it, the truncated manifest costs only itself.
cp "$D"/rank-*.json "$T/tr/"
fa trdumps --json "$T/tr"
want_rc trdumps 1
expect '.verdict == "hang" and [.culprits[].rank] == [1]' "$T/trdumps.out"
has trdumps log 'manifest\.json: invalid JSON'

echo "PASS analyze empty: every rank frozen is named unresponsive; manifest only, empty directory, bad manifest"
