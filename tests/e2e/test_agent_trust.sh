#!/usr/bin/env bash
# What a daemon, or something posing as one, can make the agent do to the
# application it lives in (issue 16, items 12 and 14):
#  1. a fake daemon that never reads and floods DUMP_REQUESTs gets dumps at
#     a bounded rate (the application's sleeps are cut short a few times a
#     second at most), incident directories left by earlier runs do not
#     stop this run's dumps, and with big dumps the rank's memory grows no
#     more than one unsent dump makes it grow; a daemon that asks faster
#     than the agent dumps gets an answer to every request (the oldest
#     waiting incident and the newest live look made, the others answered
#     empty);
#  2. an application that installs its own handler for the stack signal
#     after the first dump, or in the middle of one, never receives the
#     signal after that (said once on stderr);
#  3. an agent that holds a token refuses a daemon that cannot prove the
#     token too (mutual challenge): one that challenges but cannot answer
#     the agent's challenge, one that reflects the agent's own proof, one
#     that challenges twice, and one of protocol version 2 get no dump at
#     all and cut no sleep short, each said once on stderr; a daemon of
#     ours refusing the HELLO is said in its own words; one that never
#     proves is said to be late, not an impostor, and tried again soon; a
#     token file that cannot be read makes the agent connect to no one.
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

# start_fake MODE: the fake daemon, its port in $T/fake.port, its output in
# $T/fake.log.
start_fake() {
	rm -f "$T/fake.port"
	python3 "$ROOT/tests/e2e/fake_daemon.py" "$T/fake.port" "$1" >"$T/fake.log" 2>&1 &
	track_pid $!
	wait_for 10 test -s "$T/fake.port" || fail "the fake daemon ($1) did not start"
	FAKE=127.0.0.1:$(cat "$T/fake.port")
}

# 1. The flood. Earlier runs of the same job left as many incident
# directories as an agent makes for a daemon: they are not this run's.
start_fake flood
mkdir -p "$T/local/$JOB"
for i in $(seq 1 64); do mkdir "$T/local/$JOB/earlier-$i"; done
SECONDS_ASLEEP=6
run_sleeper "$FAKE" sleep $SECONDS_ASLEEP ||
	fail "the application failed under the flood: $(cat "$T/sleeper.log")"
cut=$(value interrupted)
[ -n "$cut" ] || fail "the sleeper did not finish: $(cat "$T/sleeper.log")"
echo "under the flood: $cut of $((SECONDS_ASLEEP * 20)) naps cut short"
# Incidents 1 s apart and live looks 0.5 s apart: 3 a second, plus the
# first of each at once, plus 2 for a loop of naps that overruns its time
# (before: every nap, 120).
allowed=$((SECONDS_ASLEEP * 3 + 4))
[ "$cut" -le $allowed ] || fail "the flood cut $cut naps short in $SECONDS_ASLEEP s (at most $allowed allowed)"
made=$(find "$T/local/$JOB" -mindepth 1 -maxdepth 1 -type d -name 'evil-*' | wc -l)
[ "$made" -ge 3 ] && [ "$made" -le $((SECONDS_ASLEEP + 2)) ] ||
	fail "$made incident directories made in $SECONDS_ASLEEP s of flood, want 3 to $((SECONDS_ASLEEP + 2)) (earlier runs' directories must not count)"
grep -q "incident directories" "$T/sleeper.log" &&
	fail "the agent refused a local dump for earlier runs' directories: $(cat "$T/sleeper.log")"

# 1b. The same flood against a rank whose dumps are big (20000 entries,
# about 7 MB each): the first one the daemon never takes holds back every
# later one, so the rank's memory stays what one unsent dump costs (about
# 140 MB here), measured against the same rank with one unsent dump and no
# flood (a baseline, so that a sanitizer's overhead counts on both sides),
# where every dump used to be queued (over 320 MB after 6 s, growing by
# some 30 MB a second).
rm -rf "$T/local"
AGENT_ENV="-x FLIGHTREC_BUFFER=20000" run_sleeper "$FAKE" sleep $SECONDS_ASLEEP 20000 ||
	fail "the application failed under the flood: $(cat "$T/sleeper.log")"
peak=$(value peak_rss_kb)
grep -q "dumps faster than one at a time" "$T/sleeper.log" ||
	fail "the agent did not say it drops requests: $(cat "$T/sleeper.log")"
stop_helpers
start_fake once
rm -rf "$T/local"
AGENT_ENV="-x FLIGHTREC_BUFFER=20000" run_sleeper "$FAKE" sleep 4 20000 ||
	fail "the application failed with one unsent dump: $(cat "$T/sleeper.log")"
base=$(value peak_rss_kb)
echo "with big dumps: peak RSS $peak KiB under the flood, $base KiB with one unsent dump"
[ -n "$peak" ] && [ -n "$base" ] && [ $((peak * 2)) -le $((base * 3)) ] ||
	fail "the rank grew to $peak KiB under the flood, more than 1.5 times the $base KiB of one unsent dump"
stop_helpers

# 1c. Requests faster than the agent's intervals, from a daemon that
# reads: each is answered, so the daemon never waits for one until its
# deadline and calls the rank frozen.
start_fake answers
rm -rf "$T/local"
run_sleeper "$FAKE" sleep 3 || fail "the application failed: $(cat "$T/sleeper.log")"
answered() { grep -q "^upload $1 " "$T/fake.log"; }
total() { sed -n "s/^upload $1 //p" "$T/fake.log" | head -n 1; }
for i in first second third live-stacks-1 live-stacks-2 live-stacks-3; do
	wait_for 5 answered $i || fail "request $i got no answer: $(cat "$T/fake.log")"
done
[ "$(total first)" -gt 0 ] && [ "$(total second)" -gt 0 ] ||
	fail "the oldest waiting incident was not dumped: $(cat "$T/fake.log")"
[ "$(total third)" = 0 ] || fail "the incident asked for last was dumped, not the one waiting: $(cat "$T/fake.log")"
[ "$(total live-stacks-3)" -gt 0 ] || fail "the newest live look was not made: $(cat "$T/fake.log")"
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
# 2b. The application takes the signal in the middle of a dump, as soon as
# the agent has asked its main thread: none of its 32 other threads is
# signalled after that (one may be, in the microseconds between the
# agent's check and its signal; before, every thread until the dump's
# time ran out).
rm -rf "$T/local"
run_sleeper "127.0.0.1:1" mid-handler || fail "mid-handler failed: $(cat "$T/sleeper.log")"
grep -q "^dump written" "$T/sleeper.log" || fail "no dump: $(cat "$T/sleeper.log")"
echo "signal taken mid-dump: the application's handler ran $(value deliveries) times"
[ "$(value deliveries)" -le 1 ] ||
	fail "the application's handler ran $(value deliveries) times after it took the signal mid-dump"
# 3. Impersonators, with the agent holding a token.
TOKEN=$T/token
printf 'flightrec-e2e-%s-0123456789abcdef\n' "$RANDOM$RANDOM" >"$TOKEN"
chmod 600 "$TOKEN"
# unreadable: a token file that cannot be read, next to a flooding peer.
for mode in challenge v2 reflect rechallenge busy unreadable silent; do
	rm -rf "$T/local"
	token=$TOKEN naps=3
	case $mode in
	unreadable) start_fake flood; token=$T/no-such-token ;;
	silent) start_fake silent; naps=13 ;;
	*) start_fake $mode ;;
	esac
	AGENT_ENV="-x FLIGHTREC_TOKEN_FILE=$token" run_sleeper "$FAKE" sleep $naps ||
		fail "the application failed next to an impersonator ($mode): $(cat "$T/sleeper.log")"
	[ "$(value interrupted)" = 0 ] ||
		fail "an impersonator ($mode) that cannot prove the token had $(value interrupted) naps cut short"
	[ ! -e "$T/local" ] || fail "an impersonator ($mode) made the agent dump: $(ls -R "$T/local")"
	case $mode in
	challenge) want="did not prove it holds the token (it spoke before proving it)" ;;
	v2) want="did not prove it holds the token (it refused to, as a daemon older than protocol version 3 does)" ;;
	reflect) want="did not prove it holds the token (its proof is wrong: another token, or not flightrecd)" ;;
	rechallenge) want="did not prove it holds the token (it spoke before proving it)" ;;
	busy) want="refused the connection: too many ranks of this job are connected (--max-job-connections) (code 4)" ;;
	unreadable) want="FLIGHTREC_TOKEN_FILE=$token: No such file or directory; not connecting to the daemon at $FAKE" ;;
	silent) want="did not answer in time (no proof of the token within 10 s of the HELLO); recording locally, retrying" ;;
	esac
	[ "$(grep -cF "$want" "$T/sleeper.log")" = 1 ] ||
		fail "$mode: the agent did not say once \"$want\": $(cat "$T/sleeper.log")"
	case $mode in
	busy | silent)
		grep -q "did not prove" "$T/sleeper.log" &&
			fail "$mode: a daemon that refused or was late was called an impostor: $(cat "$T/sleeper.log")" ;;
	unreadable)
		grep -q "^connection" "$T/fake.log" &&
			fail "the agent connected without its unreadable token: $(cat "$T/fake.log")" ;;
	esac
	# Late is not refused: tried again on the normal schedule (10 s of
	# waiting, then 0.1 s), not 30 s on, and while the application still
	# runs (its last 3 s of naps; finalising connects once more anyway).
	if [ $mode = silent ]; then
		again=$(awk '$1 == "connection" && $2 == 2 { print int($3) }' "$T/fake.log")
		[ -n "$again" ] && [ "$again" -lt 12 ] ||
			fail "the agent did not try the late daemon again within 12 s: $(cat "$T/fake.log")"
	fi
	stop_helpers
done
echo "PASS agent trust: a flooding daemon is rate-limited, bounded and answered; a signal the application takes is left alone, even mid-dump; a daemon that cannot prove the token is refused, a late one retried, an unreadable token connects to no one"
