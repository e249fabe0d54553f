#!/bin/sh
# Builds the CPU stand-ins for NCCL and the CUDA runtime, and the NCCL test
# program, into OUTDIR:
#
#   tests/nccl/build.sh OUTDIR
#     -> OUTDIR/libcudart.so.13, OUTDIR/libnccl.so.2, OUTDIR/nccl_hang,
#        OUTDIR/nccl_overhead
#
# nccl_hang and libnccl.so.2 find the libraries next to them ($ORIGIN).
# CC picks the compiler; EXTRA_CFLAGS is added to every command (for
# instance a sanitizer, which the stand-ins do not need to share with the
# agent).
set -eu

if [ $# -ne 1 ]; then
	echo "usage: $0 OUTDIR" >&2
	exit 2
fi
out=$1
here=$(cd "$(dirname "$0")" && pwd)
agent=$(cd "$here/../../agent" && pwd)
CC=${CC:-gcc}
EXTRA_CFLAGS=${EXTRA_CFLAGS:-}
warn="-std=gnu11 -Wall -Wextra -Wshadow -Wstrict-prototypes -Wformat=2 -Wvla -Wmissing-prototypes -Werror"
# Frame pointers and no tail calls in the libraries too: a host thread
# blocked in cudaStreamSynchronize shows that frame in a dump.
lib="-O2 -g -fno-omit-frame-pointer -fno-optimize-sibling-calls -fPIC -fvisibility=hidden -shared -pthread"

mkdir -p "$out"
# shellcheck disable=SC2086 # flag lists split on purpose
$CC $warn $lib $EXTRA_CFLAGS -I"$agent" -Wl,-soname,libcudart.so.13 \
	-o "$out/libcudart.so.13" "$here/fake_cudart.c"
# ncclBcast must reach ncclBroadcast through the PLT, as in NCCL: no
# -Bsymbolic, and the alias is weak so the compiler cannot bind it.
# shellcheck disable=SC2086
$CC $warn $lib -fno-semantic-interposition $EXTRA_CFLAGS -I"$agent" \
	-Wl,-soname,libnccl.so.2 -o "$out/libnccl.so.2" "$here/fake_nccl.c" \
	-L"$out" -l:libcudart.so.13 -Wl,-rpath,\$ORIGIN
# Frame pointers and no tail calls: stacks in dumps show every frame.
# shellcheck disable=SC2086
$CC $warn -O1 -g -fno-omit-frame-pointer -fno-optimize-sibling-calls $EXTRA_CFLAGS \
	-I"$agent" -o "$out/nccl_hang" "$here/nccl_hang.c" \
	-L"$out" -l:libnccl.so.2 -l:libcudart.so.13 -Wl,-rpath,\$ORIGIN
# The agent's cost per NCCL call (bench/run).
# shellcheck disable=SC2086
$CC $warn -O2 $EXTRA_CFLAGS -I"$agent" -o "$out/nccl_overhead" "$here/overhead.c" \
	-L"$out" -l:libnccl.so.2 -l:libcudart.so.13 -Wl,-rpath,\$ORIGIN
