#!/usr/bin/env bash
# fr-analyze in an incident directory that someone else can write to: a
# dump or the manifest replaced by a FIFO just before fr-analyze opens it
# (after any look at it) must not block it, a FIFO, a socket or a symbolic
# link in place of a dump is refused and named, and the other ranks' dumps
# are still read. A symbolic link is not followed: one planted by another
# user could point at any file fr-analyze's user may read. Every run is
# bounded by `timeout`: a reader that blocks fails the test.
. "$(dirname "$0")/lib.sh"

D=$ROOT/tests/data/analyze/two-comms

# A shim that, right before fr-analyze opens a file whose name is listed in
# FIFO_NAMES (':'-separated), replaces it with a FIFO: the race between a
# look at a file and its opening, made certain.
cat >"$T/swap.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void swap_at(int dirfd, const char *path)
{
	const char *names = getenv("FIFO_NAMES");
	const char *base = strrchr(path, '/');
	char list[512], *save = NULL;
	struct stat st;

	base = base ? base + 1 : path;
	if (!names || snprintf(list, sizeof(list), "%s", names) >= (int)sizeof(list))
		return;
	for (char *n = strtok_r(list, ":", &save); n; n = strtok_r(NULL, ":", &save)) {
		if (strcmp(n, base) != 0 || fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (unlinkat(dirfd, path, 0) != 0 || mkfifoat(dirfd, path, 0600) != 0)
			perror("swap");
	}
}

static void swap(const char *path)
{
	swap_at(AT_FDCWD, path);
}

#define OPEN_SHIM(fn)                                                        \
	int fn(const char *path, int flags, ...)                             \
	{                                                                    \
		static int (*real)(const char *, int, ...);                  \
		mode_t mode = 0;                                             \
		va_list ap;                                                  \
                                                                             \
		if (!real)                                                   \
			real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, #fn); \
		va_start(ap, flags);                                         \
		if (flags & (O_CREAT | O_TMPFILE))                           \
			mode = va_arg(ap, mode_t);                           \
		va_end(ap);                                                  \
		swap(path);                                                  \
		return real(path, flags, mode);                              \
	}
OPEN_SHIM(open)
OPEN_SHIM(open64)

/* fr-analyze opens dumps by name inside the directory it listed. */
#define OPENAT_SHIM(fn)                                                      \
	int fn(int dirfd, const char *path, int flags, ...)                  \
	{                                                                    \
		static int (*real)(int, const char *, int, ...);             \
		mode_t mode = 0;                                             \
		va_list ap;                                                  \
                                                                             \
		if (!real)                                                   \
			real = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, #fn); \
		va_start(ap, flags);                                         \
		if (flags & (O_CREAT | O_TMPFILE))                           \
			mode = va_arg(ap, mode_t);                           \
		va_end(ap);                                                  \
		swap_at(dirfd, path);                                        \
		return real(dirfd, path, flags, mode);                       \
	}
OPENAT_SHIM(openat)
OPENAT_SHIM(openat64)

int __openat_2(int dirfd, const char *path, int flags)
{
	return openat(dirfd, path, flags);
}

int __openat64_2(int dirfd, const char *path, int flags)
{
	return openat64(dirfd, path, flags);
}

int __open_2(const char *path, int flags)
{
	return open(path, flags);
}

int __open64_2(const char *path, int flags)
{
	return open64(path, flags);
}
C
cc -shared -fPIC -o "$T/swap.so" "$T/swap.c" -ldl || fail "cannot build the shim"
# A sanitizer build of fr-analyze needs its runtime loaded first.
SHIM=$T/swap.so
rt=$(ldd "$BIN/fr-analyze" 2>/dev/null | awk '/lib(asan|ubsan|tsan)\.so/ {print $3; exit}')
[ -n "$rt" ] && SHIM=$rt:$SHIM

# fa NAME ARGS...: fr-analyze ARGS (at most 20 s), stdout in $T/NAME.out,
# stderr in $T/NAME.log; sets RC.
fa() {
	local name=$1
	shift
	timeout 20 "$BIN/fr-analyze" "$@" >"$T/$name.out" 2>"$T/$name.log"
	RC=$?
	[ "$RC" -ne 124 ] || fail "$name: fr-analyze blocked (killed after 20 s); stderr: $(cat "$T/$name.log")"
}

want_rc() {
	[ "$RC" -eq "$2" ] || fail "$1: exit $RC, want $2; stdout: $(cat "$T/$1.out"); stderr: $(cat "$T/$1.log")"
}

has() {
	grep -Eq -- "$3" "$T/$1.$2" || fail "$1: no line matching '$3' in its $2: $(cat "$T/$1.$2")"
}

# incident DIR: a copy of the stored incident (ranks 0-2 dumped, rank 3's
# live view in the manifest).
incident() {
	mkdir -p "$1"
	cp "$D"/manifest.json "$D"/rank-*.json "$1/"
}

# rank-1.json becomes a FIFO as it is opened: rank 1 is left out and named,
# ranks 0 and 2 are read, and the manifest's view of rank 1 stands in for it
# (the verdict is unchanged: rank 1 never entered all_reduce #5).
incident "$T/swapped"
FIFO_NAMES=rank-1.json LD_PRELOAD="$SHIM" fa swapped --json "$T/swapped"
[ -p "$T/swapped/rank-1.json" ] || fail "the shim did not swap rank-1.json for a FIFO"
want_rc swapped 1
has swapped log "^fr-analyze: $T/swapped/rank-1\\.json: a FIFO, not a regular file; leaving this file out$"
expect '.verdict == "hang" and [.culprits[] | [.rank, .reason]] == [[1,"not_entered"]]' "$T/swapped.out"
fa swappedtext "$T/swapped"
want_rc swappedtext 1
has swappedtext out '^  no dump, live: rank 1$'
has swappedtext out '^  1 rank \(0\): PMPI_Allreduce'
has swappedtext out '^  1 rank \(2\): next_batch'

# The manifest becomes a FIFO as it is opened: named, and the dumps judged
# without it.
incident "$T/swappedm"
FIFO_NAMES=manifest.json LD_PRELOAD="$SHIM" fa swappedm --json "$T/swappedm"
[ -p "$T/swappedm/manifest.json" ] || fail "the shim did not swap manifest.json for a FIFO"
want_rc swappedm 1
has swappedm log "^fr-analyze: $T/swappedm/manifest\\.json: a FIFO, not a regular file; going on without the manifest$"
expect '.verdict == "hang" and [.culprits[].rank] == [1]' "$T/swappedm.out"

# Already there when fr-analyze looks: a FIFO by a PyTorch dump's name, a
# socket by a dump's name, a symbolic link by a dump's name (to a good
# dump: not followed all the same), a directory by a dump's name (nothing
# to read, passed over).
incident "$T/planted"
rm "$T/planted/rank-1.json"
mkfifo "$T/planted/nccl_trace_rank_1"
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$T/planted/rank-5.json" ||
	fail "cannot make a socket"
ln -s "$D/rank-1.json" "$T/planted/rank-1.json"
mkdir "$T/planted/rank-6.json"
fa planted --json "$T/planted"
want_rc planted 1
has planted log "^fr-analyze: $T/planted/nccl_trace_rank_1: a FIFO, not a regular file; leaving this file out$"
has planted log "^fr-analyze: $T/planted/rank-5\\.json: a socket, not a regular file; leaving this file out$"
has planted log "^fr-analyze: $T/planted/rank-1\\.json: a symbolic link, not followed \\(put the file itself in the directory\\); leaving this file out$"
grep -q 'rank-6.json' "$T/planted.log" && fail "planted: a directory was reported: $(cat "$T/planted.log")"
expect '.verdict == "hang" and [.culprits[] | [.rank, .reason]] == [[1,"not_entered"]]' "$T/planted.out"
# The link was not followed: rank 1's evidence is the manifest's view.
fa plantedrank --rank 1 "$T/planted"
want_rc plantedrank 0
has plantedrank out '^  status: +live \(no dump: the daemon.s live view of it, in .*manifest\.json\)$'

# A symbolic link as the manifest: not followed either.
incident "$T/linkm"
mv "$T/linkm/manifest.json" "$T/manifest-elsewhere.json"
ln -s "$T/manifest-elsewhere.json" "$T/linkm/manifest.json"
fa linkm --json "$T/linkm"
want_rc linkm 1
has linkm log "^fr-analyze: $T/linkm/manifest\\.json: a symbolic link, not followed .*; going on without the manifest$"

echo "PASS analyze special files: a FIFO swapped in does not block, FIFOs, sockets and symbolic links are named and left out"
