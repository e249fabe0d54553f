/*
 * A program that is not linked against MPI and loads it at run time, the
 * way Python (mpi4py), Julia and plug-in hosts do: it dlopens, with
 * RTLD_LOCAL, a plug-in that links libmpi (the planted-fault program
 * tests/mpi/hang.c built as a shared object, its main renamed plugin_main)
 * and runs it. libmpi is then in no scope the agent's hooks see at load
 * time, only in the plug-in's.
 *
 * usage: dlopen_mpi PLUGIN [hang.c options...]
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int (*plugin_main)(int, char **);
	void *h;

	if (argc < 2) {
		fprintf(stderr, "usage: %s PLUGIN [options...]\n", argv[0]);
		return 2;
	}
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlopen_mpi: %s\n", dlerror());
		return 2;
	}
	*(void **)&plugin_main = dlsym(h, "plugin_main");
	if (!plugin_main) {
		fprintf(stderr, "dlopen_mpi: %s\n", dlerror());
		return 2;
	}
	/* The plug-in sees its own name as argv[0]. */
	return plugin_main(argc - 1, argv + 1);
}
