/*
 * Names for code addresses, from the ELF symbol tables on disk.
 *
 * dladdr alone names only exported functions, and the frame a person needs
 * to read in a hang (train_step, load_batch) is often a static function of
 * the executable. So each module that an address falls in is opened once,
 * mapped read-only, and its function symbols (.symtab when the file has
 * one, else .dynsym) sorted by address; the mapping stays, since the names
 * point into it. Every offset read from the file is checked against its
 * size: a library being replaced on disk while mapped must not crash the
 * application.
 */
#include <dlfcn.h>
#include <errno.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbols.h"

#define MAX_MODULES 512

struct func {
	uint64_t addr;
	uint64_t size;
	uint32_t name; /* offset into the string table */
};

struct module {
	const struct link_map *lm;
	uintptr_t bias;
	const char *strtab;
	size_t strsz;
	struct func *funcs;
	size_t nfuncs;
};

static struct module modules[MAX_MODULES];
static size_t nmodules;

static int by_addr(const void *a, const void *b)
{
	const struct func *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static bool in_file(uint64_t off, uint64_t len, size_t size)
{
	return off <= size && len <= size - off;
}

/* The section of `type` whose entries are symbols and whose string table is
 * in the file, or NULL. */
static const Elf64_Shdr *symbol_section(const unsigned char *map, size_t size,
					const Elf64_Ehdr *eh, uint32_t type)
{
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(map + eh->e_shoff);

	for (unsigned i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type != type || sh[i].sh_entsize != sizeof(Elf64_Sym) ||
		    !in_file(sh[i].sh_offset, sh[i].sh_size, size) || sh[i].sh_link >= eh->e_shnum ||
		    !in_file(sh[sh[i].sh_link].sh_offset, sh[sh[i].sh_link].sh_size, size))
			continue;
		return &sh[i];
	}
	return NULL;
}

/* Reads the function symbols of the file at `path` into `m`. Leaves `m`
 * without functions when the file is unreadable, not ELF64, or stripped. */
static void load_module(struct module *m, const char *path)
{
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *syms, *strs;
	const Elf64_Sym *sym;
	unsigned char *map;
	struct stat st;
	size_t n, count = 0;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		close(fd);
		return;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return;
	eh = (const Elf64_Ehdr *)map;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    !in_file(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), (size_t)st.st_size))
		goto unmap;
	syms = symbol_section(map, (size_t)st.st_size, eh, SHT_SYMTAB);
	if (!syms)
		syms = symbol_section(map, (size_t)st.st_size, eh, SHT_DYNSYM);
	if (!syms)
		goto unmap;
	strs = (const Elf64_Shdr *)(map + eh->e_shoff) + syms->sh_link;
	sym = (const Elf64_Sym *)(map + syms->sh_offset);
	n = syms->sh_size / sizeof(Elf64_Sym);
	for (size_t i = 0; i < n; i++)
		count += ELF64_ST_TYPE(sym[i].st_info) == STT_FUNC && sym[i].st_shndx != SHN_UNDEF;
	if (!count || !(m->funcs = malloc(count * sizeof(*m->funcs))))
		goto unmap;
	for (size_t i = 0; i < n; i++) {
		if (ELF64_ST_TYPE(sym[i].st_info) != STT_FUNC || sym[i].st_shndx == SHN_UNDEF ||
		    sym[i].st_name >= strs->sh_size)
			continue;
		m->funcs[m->nfuncs++] = (struct func){ sym[i].st_value, sym[i].st_size,
						       sym[i].st_name };
	}
	qsort(m->funcs, m->nfuncs, sizeof(*m->funcs), by_addr);
	m->strtab = (const char *)map + strs->sh_offset;
	m->strsz = strs->sh_size;
	return;

unmap:
	munmap(map, (size_t)st.st_size);
}

static struct module *module_of(const struct link_map *lm)
{
	struct module *m;

	for (size_t i = 0; i < nmodules; i++)
		if (modules[i].lm == lm && modules[i].bias == lm->l_addr)
			return &modules[i];
	if (nmodules == MAX_MODULES)
		return NULL;
	m = &modules[nmodules++];
	m->lm = lm;
	m->bias = lm->l_addr;
	/* The executable's link map has no name. */
	load_module(m, lm->l_name && lm->l_name[0] ? lm->l_name : "/proc/self/exe");
	return m;
}

/* The function of `m` containing file address `at`, or NULL. A symbol of
 * unknown size (hand-written assembly) counts as reaching the next one. */
static const struct func *function_at(const struct module *m, uint64_t at)
{
	size_t lo = 0, hi = m->nfuncs;
	const struct func *f;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->funcs[mid].addr <= at)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	f = &m->funcs[lo - 1];
	return !f->size || at - f->addr < f->size ? f : NULL;
}

bool fr_symbolize(uintptr_t addr, char *name, size_t len, uint64_t *offset)
{
	const struct link_map *lm = NULL;
	const struct module *m;
	const struct func *f;
	const char *module, *base;
	Dl_info info;

	if (!dladdr1((void *)addr, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
		return false;
	m = module_of(lm);
	f = m ? function_at(m, addr - m->bias) : NULL;
	if (f) {
		const char *s = m->strtab + f->name;

		snprintf(name, len, "%.*s", (int)strnlen(s, m->strsz - f->name), s);
		*offset = addr - m->bias - f->addr;
		return true;
	}
	/* No symbol table on disk (the vDSO, a deleted file): what the
	 * dynamic linker knows. */
	if (info.dli_sname && info.dli_saddr) {
		snprintf(name, len, "%s", info.dli_sname);
		*offset = addr - (uintptr_t)info.dli_saddr;
		return true;
	}
	/*
	 * No symbol covers it (a stripped library's static function: most
	 * of libpython's as Debian ships it): the module, in brackets, and
	 * the address in its file, which addr2line -e or a debug symbols
	 * package turns into a line later. Better than "??", and frames of
	 * one module still merge.
	 */
	module = lm->l_name && lm->l_name[0] ? lm->l_name :
		 info.dli_fname && info.dli_fname[0] ? info.dli_fname :
							 program_invocation_name;
	base = strrchr(module, '/');
	snprintf(name, len, "[%s]", base ? base + 1 : module);
	*offset = addr - lm->l_addr;
	return true;
}
