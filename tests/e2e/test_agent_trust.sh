#!/usr/bin/env bash
# What a daemon, or something posing as one, can make the agent do to the
# application it lives in (issue 16, items 12 and 14):
#  1. a fake daemon that never reads and floods DUMP_REQUESTs gets dumps at
#     a bounded rate (the application's sleeps are cut short a few times a
#     second at most), the job's local dump directories stop at the cap
#     (said once on stderr), and with big dumps the rank's memory stays
#     what one dump costs;
#  2. an application that installs its own handler for the stack signal
#     after the first dump never receives the signal from a later dump
#     (said once on stderr);
#  3. an agent that holds a token refuses a daemon that cannot prove the
#     token too (mutual challenge): one that challenges but cannot answer
#     the agent's challenge gets no dump at all, and neither does one of
#     protocol version 2, which refuses the agent's challenge; each is said
#     once on stderr, and the application runs on.
. "$(dirname "$0")/lib.sh"
SLEEPER=$BUILD_DIR/tests/mpi_sleeper
[ -x "$SLEEPER" ] || fail "$SLEEPER not built (make tests)"

# run_sleeper ADDR ARGS...: one rank of the sleeper under the agent, in the
# foreground (bounded), its output in $T/sleeper.log.
run_sleeper() {
	local addr=$1
	shift
	timeout 60 mpirun -np 1 -x LD_PRELOAD="$PRELOAD" ${ASAN_OPTIONS:+-x ASAN_OPTIONS} \
		-x FLIGHTREC_ADDR="$addr" -x FLIGHTREC_JOB="$JOB" -x FLIGHTREC_DUMP_DIR="$T/local" \
		${AGENT_ENV:-} "$SLEEPER" "$@" >"$T/sleeper.log" 2>&1
}
value() { sed -n "s/^$1 //p" "$T/sleeper.log"; }

# 1. The flood. The job already holds all but one of the incident
# directories an agent may add, so the cap is reached within the test.
python3 "$ROOT/tests/e2e/fake_daemon.py" "$T/fake.port" flood >"$T/fake.log" 2>&1 &
track_pid $!
wait_for 10 test -s "$T/fake.port" || fail "the fake daemon did not start"
mkdir -p "$T/local/$JOB"
for i in $(seq 1 63); do mkdir "$T/local/$JOB/earlier-$i"; done
SECONDS_ASLEEP=6
run_sleeper "127.0.0.1:$(cat "$T/fake.port")" sleep $SECONDS_ASLEEP ||
	fail "the application failed under the flood: $(cat "$T/sleeper.log")"
cut=$(value interrupted)
[ -n "$cut" ] || fail "the sleeper did not finish: $(cat "$T/sleeper.log")"
echo "under the flood: $cut of $((SECONDS_ASLEEP * 20)) naps cut short"
# Incidents 1 s apart and live looks 0.5 s apart: 3 a second, plus the
# first of each at once, plus 2 for a loop of naps that overruns its time
# (before: every nap, 120).
allowed=$((SECONDS_ASLEEP * 3 + 4))
[ "$cut" -le $allowed ] || fail "the flood cut $cut naps short in $SECONDS_ASLEEP s (at most $allowed allowed)"
dirs=$(find "$T/local/$JOB" -mindepth 1 -maxdepth 1 -type d | wc -l)
[ "$dirs" -eq 64 ] || fail "$dirs incident directories in $T/local/$JOB, want the cap of 64"
[ "$(grep -c 'already holds 64 incident directories' "$T/sleeper.log")" = 1 ] ||
	fail "the cap on local dumps was not said exactly once: $(cat "$T/sleeper.log")"

# 1b. The same flood against a rank whose dumps are big (20000 entries,
# about 7 MB each): the first one the daemon never takes holds back every
# later one, so the rank's memory stays what one dump costs to build
# (about 140 MB here) where every dump used to be queued (over 320 MB
# after 6 s, growing by some 30 MB a second).
rm -rf "$T/local"
AGENT_ENV="-x FLIGHTREC_BUFFER=20000" run_sleeper "127.0.0.1:$(cat "$T/fake.port")" sleep $SECONDS_ASLEEP 20000 ||
	fail "the application failed under the flood: $(cat "$T/sleeper.log")"
peak=$(value peak_rss_kb)
echo "under the flood with big dumps: peak RSS $peak KiB, $(value interrupted) naps cut short"
[ -n "$peak" ] && [ "$peak" -le $((200 * 1024)) ] || fail "the rank grew to $peak KiB under the flood"
grep -q "dumps faster than one at a time" "$T/sleeper.log" ||
	fail "the agent did not say it drops requests: $(cat "$T/sleeper.log")"
stop_helpers

# 2. The application takes the stack signal after the first dump (no
# daemon: the dumps are local).
rm -rf "$T/local"
run_sleeper "127.0.0.1:1" late-handler || fail "late-handler failed: $(cat "$T/sleeper.log")"
first=$(ls "$T"/local/"$JOB"/*/rank-0.json | head -n 1)
# The first dump did ask the other threads (the main thread's frames are
# there), so the signal was in use before the application took it.
jq -e '[.threads[] | select(.current | not) | .frames | length] | max > 0' "$first" >/dev/null ||
	fail "the first dump has no other thread's stack: $first"
[ "$(value deliveries)" = 0 ] ||
	fail "the application's handler ran $(value deliveries) times after it took the signal"
grep -q "the application installed its own handler for signal" "$T/sleeper.log" ||
	fail "the agent did not say it stopped using the signal: $(cat "$T/sleeper.log")"
# 3. Impersonators, with the agent holding a token.
TOKEN=$T/token
printf 'flightrec-e2e-%s-0123456789abcdef\n' "$RANDOM$RANDOM" >"$TOKEN"
chmod 600 "$TOKEN"
for mode in challenge v2; do
	rm -rf "$T/local" "$T/fake.port"
	python3 "$ROOT/tests/e2e/fake_daemon.py" "$T/fake.port" $mode >"$T/fake.log" 2>&1 &
	track_pid $!
	wait_for 10 test -s "$T/fake.port" || fail "the fake daemon ($mode) did not start"
	AGENT_ENV="-x FLIGHTREC_TOKEN_FILE=$TOKEN" run_sleeper "127.0.0.1:$(cat "$T/fake.port")" sleep 3 ||
		fail "the application failed next to an impersonator ($mode): $(cat "$T/sleeper.log")"
	[ "$(value interrupted)" = 0 ] ||
		fail "an impersonator ($mode) that cannot prove the token had $(value interrupted) naps cut short"
	[ ! -e "$T/local" ] || fail "an impersonator ($mode) made the agent dump: $(ls -R "$T/local")"
	case $mode in
	challenge) why="it spoke before proving it" ;;
	v2) why="it refused to, as a daemon older than protocol version 3 does" ;;
	esac
	[ "$(grep -c "did not prove it holds the token ($why)" "$T/sleeper.log")" = 1 ] ||
		fail "the refusal of the impersonator ($mode) was not said once: $(cat "$T/sleeper.log")"
	stop_helpers
done
echo "PASS agent trust: a flooding daemon is rate-limited and bounded; a signal the application takes is left alone; a daemon that cannot prove the token is refused"
