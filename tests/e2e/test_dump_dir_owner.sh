#!/usr/bin/env bash
# The agent's local dumps in a directory other users can write to (issue
# 16, item 13): another user (nobody) who plants a symbolic link where a
# root rank will write its dump, hands it a directory of theirs, or puts a
# file at the default path, makes the rank refuse with a clear error (the
# dump lands nowhere else); the default is per user ($XDG_RUNTIME_DIR
# here), and what the agent creates is private (directories 0700, dumps
# 0600).
. "$(dirname "$0")/lib.sh"
SLEEPER=$BUILD_DIR/tests/mpi_sleeper
[ -x "$SLEEPER" ] || fail "$SLEEPER not built (make tests)"
[ "$(id -u)" = 0 ] || { echo "SKIP dump dir owner: needs root to act as nobody"; exit 0; }
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }

# dump_as_root ENV...: one root rank that asks for a dump, no daemon; its
# output in $T/rank.log.
dump_as_root() {
	env "$@" timeout 60 mpirun -np 1 -x LD_PRELOAD="$PRELOAD" ${ASAN_OPTIONS:+-x ASAN_OPTIONS} \
		-x FLIGHTREC_ADDR=127.0.0.1:1 -x FLIGHTREC_JOB="$JOB" -x FLIGHTREC_DUMP_DIR \
		-x XDG_RUNTIME_DIR "$SLEEPER" dump >"$T/rank.log" 2>&1 ||
		fail "the application failed: $(cat "$T/rank.log")"
}

# A shared directory, as /tmp is: everyone may create in it.
mkdir -m 1777 "$T/shared"
mkdir -m 1777 "$T/loot"
chmod 755 "$T"

# 1. A link planted where the job's directory will be.
mkdir -m 755 "$T/shared/dumps"
chmod 1777 "$T/shared/dumps"
as_nobody ln -s "$T/loot" "$T/shared/dumps/$JOB" || fail "nobody could not plant a link"
dump_as_root FLIGHTREC_DUMP_DIR="$T/shared/dumps" XDG_RUNTIME_DIR=
grep -q "local dump $T/shared/dumps/$JOB/.*not written: $JOB is a symbolic link owned by another user" "$T/rank.log" ||
	fail "no clear error for the planted link: $(cat "$T/rank.log")"
[ -z "$(ls -A "$T/loot")" ] || fail "the dump went through nobody's link: $(ls -R "$T/loot")"

# 2. A directory of nobody's at the dump directory itself.
as_nobody mkdir "$T/shared/theirs"
dump_as_root FLIGHTREC_DUMP_DIR="$T/shared/theirs" XDG_RUNTIME_DIR=
grep -q "not written: $T/shared/theirs is a directory owned by another user" "$T/rank.log" ||
	fail "no clear error for another user's directory: $(cat "$T/rank.log")"
[ -z "$(ls -A "$T/shared/theirs")" ] || fail "the dump went into nobody's directory"

# 3. The default, per user: a file planted there stops the dump with a
# clear error; without it, the dump is private.
mkdir -m 1777 "$T/xdg"
as_nobody touch "$T/xdg/flightrec"
dump_as_root FLIGHTREC_DUMP_DIR= XDG_RUNTIME_DIR="$T/xdg"
grep -q "not written: $T/xdg/flightrec exists and is not a directory" "$T/rank.log" ||
	fail "no clear error for a file at the default path: $(cat "$T/rank.log")"
rm -f "$T/xdg/flightrec"
dump_as_root FLIGHTREC_DUMP_DIR= XDG_RUNTIME_DIR="$T/xdg"
dump=$(ls "$T"/xdg/flightrec/"$JOB"/*/rank-0.json 2>/dev/null) ||
	fail "no dump under the default \$XDG_RUNTIME_DIR/flightrec: $(cat "$T/rank.log")"
[ "$(stat -c %a "$T/xdg/flightrec")" = 700 ] || fail "the default dump directory is $(stat -c %a "$T/xdg/flightrec"), want 700"
[ "$(stat -c %a "$(dirname "$dump")")" = 700 ] || fail "the incident directory is not 700"
[ "$(stat -c %a "$dump")" = 600 ] || fail "the dump is $(stat -c %a "$dump"), want 600"
echo "PASS dump dir owner: planted links, others' directories and files refused; defaults private"
