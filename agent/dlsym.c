/*
 * dlsym, interposed. A program that dlopens NCCL (with RTLD_LOCAL, as some
 * frameworks do) and looks its functions up by handle would call NCCL
 * directly, past the hooks that LD_PRELOAD put in the global scope. The
 * agent's dlsym answers such a lookup of a function it hooks with the hook,
 * and makes the hooks forward to the NCCL behind that handle
 * (fr_nccl_dlsym, hooks_nccl.c). MPI functions looked up by handle (Julia's
 * ccall, Python's ctypes) are answered the same way (fr_mpi_dlsym,
 * hooks_mpi.c).
 *
 * glibc's dlsym reads its caller's return address: RTLD_NEXT means the next
 * object after the caller, and RTLD_DEFAULT also searches the caller's own
 * local scope. A wrapper in C that calls the real dlsym would become the
 * caller of every lookup in the process: another interposer's
 * dlsym(RTLD_NEXT, "malloc") would find the object after libflightrec.so,
 * not the one after itself. So the entry point is a stub in assembly: it
 * saves the argument registers, asks fr_dlsym_route() what to do, restores
 * them, and either returns the hook it was given or jumps (does not call)
 * to the real dlsym, which finds the original return address where a
 * direct call would have left it.
 *
 * The stub is exported under both versions that programs reference:
 * GLIBC_2.34 (dlsym's version since it moved into libc) and the
 * architecture's base version, for programs built against an older glibc.
 * A version of the agent's own would not interpose: the dynamic linker
 * binds a versioned reference only to a definition of that version (or to
 * an unversioned one).
 *
 * Only x86-64 and aarch64 have a stub. Elsewhere the agent leaves dlsym
 * alone: a C wrapper would break RTLD_NEXT for every other interposer in
 * the process, a worse fault than NCCL calls that go unrecorded.
 */
#include "dlsym.h"

#include <dlfcn.h>
#include <stddef.h>

#if defined(__x86_64__) || defined(__aarch64__)

#if defined(__x86_64__)
#define BASE_VERSION "GLIBC_2.2.5"
#else
#define BASE_VERSION "GLIBC_2.17"
#endif

/* How each architecture's stub ends: its sizes, and its two versions. */
#define STUB_END                                                  \
	"	.cfi_endproc\n"                                       \
	"	.size	fr_dlsym_stub, .-fr_dlsym_stub\n"             \
	"	.size	fr_dlsym_stub_base, .-fr_dlsym_stub_base\n"   \
	"	.symver	fr_dlsym_stub, dlsym@@GLIBC_2.34\n"           \
	"	.symver	fr_dlsym_stub_base, dlsym@" BASE_VERSION "\n"

/* A sanitizer's runtime finds the functions it intercepts with
 * dlsym(RTLD_NEXT, ...), possibly while it is still setting itself up:
 * no instrumentation in the code that every lookup runs. */
#define NOT_SANITIZED __attribute__((no_sanitize("address", "thread")))

/* The C library's dlsym (void * for the atomics), resolved once. */
static void *real_dlsym;

/*
 * Finds the real dlsym: the next definition after the agent, normally the
 * C library's (another interposer's if one comes later in the search
 * order). Our constructor calls it, and so does every lookup, because
 * another library's constructor may call dlsym before ours has run;
 * threads that race store the same value.
 */
NOT_SANITIZED static void *real_dlsym_get(void)
{
	void *f = __atomic_load_n(&real_dlsym, __ATOMIC_ACQUIRE);

	if (!f) {
		f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
		if (!f)
			f = dlvsym(RTLD_NEXT, "dlsym", BASE_VERSION);
		__atomic_store_n(&real_dlsym, f, __ATOMIC_RELEASE);
	}
	return f;
}

__attribute__((constructor)) static void dlsym_init(void)
{
	real_dlsym_get();
}

void *fr_real_dlsym(void *handle, const char *name)
{
	void *(*f)(void *, const char *) = (void *(*)(void *, const char *))real_dlsym_get();

	return f ? f(handle, name) : NULL;
}

/* Stands in for a C library that has no dlsym of either version. */
static void *no_dlsym(void *handle, const char *name)
{
	(void)handle;
	(void)name;
	return NULL;
}

/* What the stub does with a lookup: return `value`, or jump to `jump`
 * with the caller's arguments. Two pointers come back in registers (rax
 * and rdx on x86-64, x0 and x1 on aarch64). */
struct dlsym_route {
	void *value;
	void *jump;
};

/* Called by the stub only; global (hidden) so that the assembly can name
 * it. */
struct dlsym_route fr_dlsym_route(void *handle, const char *name);

NOT_SANITIZED __attribute__((used)) struct dlsym_route fr_dlsym_route(void *handle,
								       const char *name)
{
	struct dlsym_route r = { NULL, real_dlsym_get() };

	if (!r.jump) {
		r.jump = (void *)no_dlsym;
		return r;
	}
	/* Only a handle can reach an NCCL or an MPI that the global scope
	 * does not have; the cheap test on the name keeps every other lookup
	 * fast. */
	if (handle == RTLD_DEFAULT || handle == RTLD_NEXT || !name)
		return r;
	if (name[0] == 'n' && name[1] == 'c' && name[2] == 'c' && name[3] == 'l')
		r.value = fr_nccl_dlsym(handle, name);
	else if (name[0] == 'M' && name[1] == 'P' && name[2] == 'I' && name[3] == '_')
		r.value = fr_mpi_dlsym(handle, name);
	if (r.value)
		r.jump = NULL;
	return r;
}

#if defined(__x86_64__)

#if defined(__CET__)
#define STUB_LANDING "	endbr64\n"
#else
#define STUB_LANDING ""
#endif

/*
 * On entry the return address is at (%rsp), and %rsp is 8 past a 16-byte
 * boundary: two pushes and 8 bytes more align the call. Only %rdi and
 * %rsi carry arguments (no vector registers, so %al needs no care).
 */
__asm__("	.text\n"
	"	.p2align 4\n"
	"	.globl	fr_dlsym_stub\n"
	"	.type	fr_dlsym_stub, @function\n"
	"	.globl	fr_dlsym_stub_base\n"
	"	.type	fr_dlsym_stub_base, @function\n"
	"fr_dlsym_stub:\n"
	"fr_dlsym_stub_base:\n"
	"	.cfi_startproc\n"
	STUB_LANDING
	"	pushq	%rdi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	pushq	%rsi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	subq	$8, %rsp\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	call	fr_dlsym_route@PLT\n"
	"	addq	$8, %rsp\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	popq	%rsi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	popq	%rdi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	testq	%rdx, %rdx\n"
	"	jz	1f\n"
	"	jmp	*%rdx\n"
	"1:\n"
	"	ret\n"
	STUB_END);

#else /* __aarch64__ */

#if defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT
#define STUB_LANDING "	bti	c\n"
#else
#define STUB_LANDING ""
#endif

/*
 * The return address is in x30: the stub keeps it with the frame pointer
 * and the arguments (x0, x1) in a 32-byte frame (sp stays 16-byte
 * aligned), and restores all four before it jumps. The jump goes through
 * x16, the register a branch-target landing pad ("bti c") accepts from
 * br; x17 holds the hook meanwhile.
 */
__asm__("	.text\n"
	"	.p2align 2\n"
	"	.globl	fr_dlsym_stub\n"
	"	.type	fr_dlsym_stub, %function\n"
	"	.globl	fr_dlsym_stub_base\n"
	"	.type	fr_dlsym_stub_base, %function\n"
	"fr_dlsym_stub:\n"
	"fr_dlsym_stub_base:\n"
	"	.cfi_startproc\n"
	STUB_LANDING
	"	stp	x29, x30, [sp, #-32]!\n"
	"	.cfi_def_cfa_offset 32\n"
	"	.cfi_offset 29, -32\n"
	"	.cfi_offset 30, -24\n"
	"	mov	x29, sp\n"
	"	stp	x0, x1, [sp, #16]\n"
	"	bl	fr_dlsym_route\n"
	"	mov	x16, x1\n"
	"	mov	x17, x0\n"
	"	ldp	x0, x1, [sp, #16]\n"
	"	ldp	x29, x30, [sp], #32\n"
	"	.cfi_restore 30\n"
	"	.cfi_restore 29\n"
	"	.cfi_def_cfa_offset 0\n"
	"	cbz	x16, 1f\n"
	"	br	x16\n"
	"1:\n"
	"	mov	x0, x17\n"
	"	ret\n"
	STUB_END);

#endif

#else /* neither x86-64 nor aarch64: dlsym is not interposed */

void *fr_real_dlsym(void *handle, const char *name)
{
	return dlsym(handle, name);
}

#endif

/* ---- finding a library that is not in the global scope ---- */

void *fr_caller_scope(const void *caller)
{
	Dl_info info;

	if (!caller || !dladdr(caller, &info) || !info.dli_fname || !info.dli_fname[0])
		return NULL;
	return dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
}

void fr_pin_object(const void *addr)
{
	Dl_info info;

	if (addr && dladdr(addr, &info) && info.dli_fname)
		(void)dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
}
