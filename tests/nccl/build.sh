#!/bin/sh
# Builds the CPU stand-ins for NCCL and the CUDA runtime, and the NCCL test
# program, into OUTDIR:
#
#   tests/nccl/build.sh OUTDIR
#     -> OUTDIR/libcudart.so.13, OUTDIR/libnccl.so.2, OUTDIR/nccl_hang,
#        OUTDIR/nccl_hang_dlopen, OUTDIR/nccl_overhead,
#        OUTDIR/dlsym_probe and its OUTDIR/libprobe_*.so
#
# The programs and libnccl.so.2 find the libraries next to them ($ORIGIN).
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
# The same program, not linked against NCCL: it dlopens libnccl.so.2 with
# RTLD_LOCAL and looks every function up by handle.
# shellcheck disable=SC2086
$CC $warn -O1 -g -fno-omit-frame-pointer -fno-optimize-sibling-calls $EXTRA_CFLAGS \
	-DNCCL_BY_HANDLE -I"$agent" -o "$out/nccl_hang_dlopen" "$here/nccl_hang.c" \
	-L"$out" -l:libcudart.so.13 -Wl,-rpath,\$ORIGIN
# dlsym's caller-relative lookups, through the agent's dlsym: libraries in
# the order the program links them, two opened RTLD_LOCAL with their own
# dependencies (one of them NCCL), all from one source (see dlsym_probe.c).
# The program and libprobe_local.so call nothing in some of the libraries
# they need: no --as-needed.
probe="$CC $warn -O1 -g -fno-optimize-sibling-calls -fPIC $EXTRA_CFLAGS -I$agent -Wl,--no-as-needed"
for p in first second third dep; do
	P=$(echo "$p" | tr '[:lower:]' '[:upper:]')
	# shellcheck disable=SC2086
	$probe -shared "-DPROBE_$P" -Wl,-soname,"libprobe_$p.so" \
		-o "$out/libprobe_$p.so" "$here/dlsym_probe.c"
done
# shellcheck disable=SC2086
$probe -shared -DPROBE_LOCAL -Wl,-soname,libprobe_local.so -o "$out/libprobe_local.so" \
	"$here/dlsym_probe.c" -L"$out" -l:libprobe_dep.so -Wl,-rpath,\$ORIGIN
# shellcheck disable=SC2086
$probe -shared -DPROBE_NCCL -Wl,-soname,libprobe_nccl.so -o "$out/libprobe_nccl.so" \
	"$here/dlsym_probe.c" -L"$out" -l:libnccl.so.2 -Wl,-rpath,\$ORIGIN
# shellcheck disable=SC2086
$probe -o "$out/dlsym_probe" "$here/dlsym_probe.c" -L"$out" -l:libprobe_first.so \
	-l:libprobe_second.so -l:libprobe_third.so -Wl,-rpath,\$ORIGIN
# The agent's cost per NCCL call (bench/run).
# shellcheck disable=SC2086
$CC $warn -O2 $EXTRA_CFLAGS -I"$agent" -o "$out/nccl_overhead" "$here/overhead.c" \
	-L"$out" -l:libnccl.so.2 -l:libcudart.so.13 -Wl,-rpath,\$ORIGIN
