/*
 * Checks that dlsym keeps its caller-relative meaning when the agent's
 * dlsym (agent/dlsym.c) stands in front of the C library's: RTLD_NEXT is
 * the next object after the caller, and RTLD_DEFAULT also searches the
 * caller's own local scope. A dlsym that looked symbols up as if the agent
 * were the caller would give other answers, as each check says. Also that
 * an NCCL seen only by a library loaded with RTLD_LOCAL is still reached
 * through the agent's hooks. Built several times from this one file
 * (tests/nccl/build.sh):
 *
 *   libprobe_first.so, libprobe_second.so, libprobe_third.so
 *       each defines probe_who(). The first asks dlsym(RTLD_NEXT,
 *       "probe_who") from its constructor, which runs before the agent's,
 *       and again when called: the answer is the second's (relative to the
 *       agent, which comes before all three, it would be the first's). The
 *       second asks the same through dlsym's older version (as a program
 *       built against glibc before 2.34 does): the third's.
 *   libprobe_local.so, needing libprobe_dep.so
 *       dlopened with RTLD_LOCAL: its dlsym(RTLD_DEFAULT, "probe_dep_only")
 *       finds the function of libprobe_dep.so in its own local scope (from
 *       the agent, nothing would be found).
 *   libprobe_nccl.so, needing libnccl.so.2
 *       dlopened with RTLD_LOCAL: its call to ncclGetVersion reaches the
 *       agent's hook through the global scope, and the hook must find the
 *       NCCL that is only in this library's local scope.
 *   dlsym_probe
 *       links the three libraries in that order, dlopens libprobe_local.so
 *       and libprobe_nccl.so from its own directory, and checks. It also
 *       prints which object answers each version of dlsym, and the NCCL
 *       call, so that a test can tell that the agent's did.
 *
 * One line per check; exit status 1 when one failed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl_abi.h"

#define PROBE_API __attribute__((visibility("default")))

PROBE_API const char *probe_who(void);
PROBE_API const char *probe_next_who(void);
PROBE_API const char *probe_next_who_at_load(void);
PROBE_API const char *probe_old_next_who(void);
PROBE_API const char *probe_old_dlsym_owner(void);
PROBE_API const char *probe_dep_only(void);
PROBE_API const char *probe_default_dep(void);
PROBE_API const char *probe_nccl_version(void);
PROBE_API const char *probe_nccl_owner(void);

/* Calls `f`, a function like probe_who, or says that there is none. */
static inline const char *call(void *f)
{
	return f ? ((const char *(*)(void))f)() : "(not found)";
}

/* The file name of the object that defines address `p`. */
static inline const char *owner(void *p)
{
	Dl_info info;

	return dladdr(p, &info) && info.dli_fname ? info.dli_fname : "(unknown)";
}

#if defined(PROBE_FIRST)

static const char *at_load;

const char *probe_who(void)
{
	return "libprobe_first";
}

__attribute__((constructor)) static void first_init(void)
{
	at_load = call(dlsym(RTLD_NEXT, "probe_who"));
}

const char *probe_next_who(void)
{
	return call(dlsym(RTLD_NEXT, "probe_who"));
}

const char *probe_next_who_at_load(void)
{
	return at_load;
}

#elif defined(PROBE_SECOND)

/* The version a program built against glibc before 2.34 references. */
#if defined(__x86_64__)
__asm__(".symver dlsym, dlsym@GLIBC_2.2.5");
#elif defined(__aarch64__)
__asm__(".symver dlsym, dlsym@GLIBC_2.17");
#endif

const char *probe_who(void)
{
	return "libprobe_second";
}

const char *probe_old_next_who(void)
{
	return call(dlsym(RTLD_NEXT, "probe_who"));
}

const char *probe_old_dlsym_owner(void)
{
	return owner((void *)dlsym);
}

#elif defined(PROBE_THIRD)

const char *probe_who(void)
{
	return "libprobe_third";
}

#elif defined(PROBE_DEP)

const char *probe_dep_only(void)
{
	return "libprobe_dep";
}

#elif defined(PROBE_LOCAL)

const char *probe_default_dep(void)
{
	return call(dlsym(RTLD_DEFAULT, "probe_dep_only"));
}

#elif defined(PROBE_NCCL)

const char *probe_nccl_version(void)
{
	static char answer[64];
	int version = 0;
	ncclResult_t rc = ncclGetVersion(&version);

	if (rc == ncclSuccess)
		snprintf(answer, sizeof(answer), "%d", version);
	else
		snprintf(answer, sizeof(answer), "error %d", (int)rc);
	return answer;
}

const char *probe_nccl_owner(void)
{
	return owner((void *)ncclGetVersion);
}

#else /* the program */

static int failures;

static void check(const char *what, const char *got, const char *want)
{
	bool ok = strcmp(got, want) == 0;

	printf("%s %s: %s\n", ok ? "ok  " : "FAIL", what, got);
	if (!ok) {
		printf("     expected %s\n", want);
		failures++;
	}
}

/* A lookup by handle of what the object does not have fails, with an error. */
static void check_missing(void *h, const char *name)
{
	void *f;
	const char *err;

	dlerror();
	f = dlsym(h, name);
	err = dlerror();
	printf("%s dlsym(handle, \"%s\") of a name it lacks: %s\n", !f && err ? "ok  " : "FAIL",
	       name, f ? "found" : err ? "NULL, with an error" : "NULL, without an error");
	if (f || !err)
		failures++;
}

static void *open_beside(const char *name)
{
	char path[4096];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 64);
	char *slash = NULL;
	void *h;

	if (n > 0) {
		path[n] = '\0';
		slash = strrchr(path, '/');
	}
	if (!slash) {
		fprintf(stderr, "dlsym_probe: cannot find where this program is\n");
		exit(2);
	}
	snprintf(slash + 1, 64, "%s", name);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlsym_probe: %s\n", dlerror());
		exit(2);
	}
	return h;
}

int main(void)
{
	void *local, *nccl_user;

	printf("dlsym@GLIBC_2.34 is answered by %s\n", owner((void *)dlsym));
	printf("dlsym@base version is answered by %s\n", probe_old_dlsym_owner());
	check("dlsym(RTLD_NEXT) from libprobe_first's constructor", probe_next_who_at_load(),
	      "libprobe_second");
	check("dlsym(RTLD_NEXT) from libprobe_first", probe_next_who(), "libprobe_second");
	check("dlsym(RTLD_NEXT) from libprobe_second, older version", probe_old_next_who(),
	      "libprobe_third");
	local = open_beside("libprobe_local.so");
	check("dlsym(RTLD_DEFAULT) from a library opened with RTLD_LOCAL",
	      call(dlsym(local, "probe_default_dep")), "libprobe_dep");
	check_missing(local, "probe_missing");
	check_missing(local, "ncclAllReduce");
	nccl_user = open_beside("libprobe_nccl.so");
	printf("ncclGetVersion in a library opened with RTLD_LOCAL is answered by %s\n",
	       call(dlsym(nccl_user, "probe_nccl_owner")));
	check("ncclGetVersion from a library opened with RTLD_LOCAL that links NCCL",
	      call(dlsym(nccl_user, "probe_nccl_version")), "22809");
	printf("%d failed\n", failures);
	return failures ? 1 : 0;
}

#endif
