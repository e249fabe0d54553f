#!/usr/bin/env bash
# A program that is not linked against NCCL: it dlopens libnccl.so.2 with
# RTLD_LOCAL and looks every function up by handle (nccl_hang_dlopen), so
# the hooks in the global scope are reached only through the agent's dlsym.
# Rank 2 of 4 never enqueues its 5th all_reduce: fr-analyze names rank 2,
# the operation and the communicator, which it can only know if the hooks
# recorded the calls and forwarded them to the NCCL behind the handle.
#
# First, dlsym_probe: the agent's dlsym keeps the caller-relative meaning of
# RTLD_NEXT and RTLD_DEFAULT (a lookup answered as if the agent were the
# caller finds other definitions), for both versions of dlsym; and a
# library loaded with RTLD_LOCAL that links NCCL reaches its NCCL through
# the hooks.
. "$(dirname "$0")/lib.sh"

PROBE=$BUILD_DIR/tests/nccl/dlsym_probe
NCCL_HANG=$BUILD_DIR/tests/nccl/nccl_hang_dlopen

readelf -d "$NCCL_HANG" | grep -q 'NEEDED.*libnccl' && fail "$NCCL_HANG is linked against NCCL"

LD_PRELOAD=$PRELOAD "$PROBE" >"$T/probe.log" 2>&1 || fail "dlsym_probe under the agent: $(cat "$T/probe.log")"
grep -q '^dlsym@GLIBC_2.34 is answered by .*/libflightrec\.so$' "$T/probe.log" ||
	fail "the agent did not interpose dlsym@GLIBC_2.34: $(cat "$T/probe.log")"
grep -q '^dlsym@base version is answered by .*/libflightrec\.so$' "$T/probe.log" ||
	fail "the agent did not interpose dlsym's base version: $(cat "$T/probe.log")"
grep -q '^ncclGetVersion in a library opened with RTLD_LOCAL is answered by .*/libflightrec\.so$' "$T/probe.log" ||
	fail "the hooks were not in the way of a library opened with RTLD_LOCAL: $(cat "$T/probe.log")"
[ "$(grep -c '^ok ' "$T/probe.log")" -eq 7 ] || fail "dlsym_probe: $(cat "$T/probe.log")"

run_nccl_skip
# The agent's own call (ncclGetVersion, at the first communicator) went to
# the NCCL bound from the handle too.
expect '.comm_lib_version == "NCCL 2.28.9"' "$INCIDENT/rank-0.json"
echo "PASS nccl dlopen: hooks reached by handle, rank 2 never enqueued all_reduce #5; dlsym kept RTLD_NEXT and RTLD_DEFAULT; NCCL in a local scope reached"
