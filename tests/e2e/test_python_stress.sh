#!/usr/bin/env bash
# A thousand readings of a Python process busy creating and destroying
# frames, generators and threads (bench/pyframes --stress, an embedded
# CPython 3.11 read as the agent reads it): never a crash, never a hang,
# and every frame of the churning script named with one of its functions
# on one of its lines.
. "$(dirname "$0")/lib.sh"

STRESS=$BUILD_DIR/bench/pyframes
[ -x "$STRESS" ] || skip "$STRESS not built (it needs python3.11-dev)"
timeout 120 "$STRESS" --stress 1000 >"$T/stress.out" 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "the stress run ended with status $rc: $(cat "$T/stress.out")"
grep -q '^stress: 1000 readings .* 0 wrong$' "$T/stress.out" ||
	fail "unexpected: $(cat "$T/stress.out")"
echo "PASS python stress: $(cat "$T/stress.out")"
