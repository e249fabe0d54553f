#!/usr/bin/env bash
# tests/gpu/run, the check meant for a GPU machine, run over the CPU
# stand-ins of NCCL and the CUDA runtime: its build, its three checks and its
# summary line must work here, so that the day it runs on a GPU only the GPU
# is new.
. "$(dirname "$0")/lib.sh"

if [ -n "$sanitizer_rt" ]; then
	# The script preloads the agent alone; a sanitizer build needs its
	# runtime first. The plain build runs it.
	echo "PASS gpu stand-in: not run for a sanitizer build"
	exit 0
fi
out=$(BUILD=${BUILD:-build} timeout 120 "$ROOT/tests/gpu/run" --stand-in 2>"$T/gpu.err")
rc=$?
[ "$rc" -eq 0 ] || fail "tests/gpu/run --stand-in exited $rc: $out $(tail -n 20 "$T/gpu.err")"
case $out in
"gpu (stand-in): completed-with-events ok, stuck-on-gpu ok"*) ;;
*) fail "unexpected summary: $out" ;;
esac
echo "PASS gpu stand-in: $out"
