#!/usr/bin/env bash
# fr-analyze maps dump files rather than reading them; a file cut short
# while mapped (rewritten under it) raises SIGBUS at the first byte past its
# new end. That file must be reported and left out, and the others judged:
# the verdict still comes. A preloaded shim cuts every large file to 4 KiB
# right after fr-analyze maps it.
. "$(dirname "$0")/lib.sh"

cat >"$T/cut.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	static void *(*real)(void *, size_t, int, int, int, off_t);
	char link[64], path[4096];
	ssize_t n;
	void *p;

	if (!real)
		real = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
	p = real(addr, len, prot, flags, fd, off);
	if (fd >= 0 && p != MAP_FAILED && len > 100000) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		n = readlink(link, path, sizeof(path) - 1);
		if (n > 0) {
			path[n] = '\0';
			if (truncate(path, 4096) != 0)
				perror("truncate");
		}
	}
	return p;
}
C
cc -shared -fPIC -o "$T/cut.so" "$T/cut.c" -ldl || fail "cannot build the shim"
# A sanitizer build of fr-analyze needs its runtime loaded first (its mmap
# then reaches the shim's as the next one).
SHIM=$T/cut.so
rt=$(ldd "$BIN/fr-analyze" 2>/dev/null | awk '/lib(asan|ubsan|tsan)\.so/ {print $3; exit}')
[ -n "$rt" ] && SHIM=$rt:$SHIM

# Rank 0's dump is large (3000 entries), rank 1's small: only rank 0's is cut.
mkdir -p "$T/inc"
# (python3, not jq: jq 1.6 turns integers past 2^53 into reals.)
python3 - "$ROOT/tests/data/dumps/good-rank-0.json" "$T/inc" <<'PY' || fail "cannot write the dumps"
import copy, json, sys
d = json.load(open(sys.argv[1]))
big = copy.deepcopy(d)
big["entries"] = [dict(d["entries"][0], record_id=i) for i in range(3000)]
json.dump(big, open(sys.argv[2] + "/rank-0.json", "w"))
d["rank"] = 1
json.dump(d, open(sys.argv[2] + "/rank-1.json", "w"))
PY
[ "$(stat -c %s "$T/inc/rank-0.json")" -gt 100000 ] || fail "rank 0's dump is too small to be cut"

LD_PRELOAD="$SHIM" "$BIN/fr-analyze" "$T/inc" >"$T/out" 2>"$T/err.log"
rc=$?
[ "$(stat -c %s "$T/inc/rank-0.json")" -eq 4096 ] || fail "the shim did not cut rank 0's dump"
grep -q 'rank-0.json: the file was cut short while being read; leaving this file out' "$T/err.log" ||
	fail "no message for the cut file: $(cat "$T/err.log")"
[ "$rc" -eq 1 ] || fail "exit $rc, want 1 (a verdict from the other rank): $(cat "$T/err.log")"
grep -q '^Verdict: hang' "$T/out" || fail "no verdict: $(cat "$T/out")"
grep -q 'Evidence: 1 of 4 ranks' "$T/out" || fail "rank 1 not judged alone: $(cat "$T/out")"
echo "PASS analyze cut short: a dump cut while mapped is reported and left out, the verdict still comes"
