/*
 * dlsym, interposed (dlsym.c). libflightrec.so exports dlsym so that a
 * program that dlopens NCCL and looks its functions up by handle gets the
 * agent's hooks, as a program linked against NCCL does. Every other lookup
 * reaches the C library's dlsym untouched, with the original caller's
 * return address, which RTLD_NEXT and RTLD_DEFAULT depend on.
 *
 * The agent's own lookups must not go through the interposed dlsym: they
 * call fr_real_dlsym().
 */
#ifndef FR_AGENT_DLSYM_H
#define FR_AGENT_DLSYM_H

/*
 * The C library's dlsym. Its caller is libflightrec.so: RTLD_NEXT means
 * the next object after the agent, RTLD_DEFAULT the global scope. Returns
 * NULL, with dlerror() set, as dlsym does.
 */
void *fr_real_dlsym(void *handle, const char *name);

/*
 * For dlsym(handle, name) with a real handle (not RTLD_DEFAULT or
 * RTLD_NEXT) and a name that starts with "nccl": the agent's hook to
 * return instead, once the hooks forward to the NCCL behind `handle`; NULL
 * to leave the lookup to the C library. Defined by the NCCL hooks
 * (hooks_nccl.c); may allocate; any thread.
 */
void *fr_nccl_dlsym(void *handle, const char *name);

/*
 * The same for a name that starts with "MPI_": the agent's hook when it
 * hooks that function and `handle` reaches the libmpi the hooks forward to
 * (binding it, when none is bound yet); NULL otherwise. Defined by the MPI
 * hooks (hooks_mpi.c); any thread.
 */
void *fr_mpi_dlsym(void *handle, const char *name);

/*
 * A library that a program loaded with dlopen(RTLD_LOCAL), itself or as the
 * dependency of one it loaded (Python's extension modules), is not in the
 * global scope, but the object that calls a hook sees it. Given a hook's
 * return address: a handle on the calling object, whose dlsym() reaches its
 * dependencies (a new reference: dlclose it), or NULL for the main program
 * (the global scope is its scope) and for an address in no object.
 */
void *fr_caller_scope(const void *caller);

/*
 * Keeps the object holding `addr` loaded for good (RTLD_NODELETE): a hook
 * table that points into a library must not outlive the library's code
 * when the application dlcloses it.
 */
void fr_pin_object(const void *addr);

#endif
