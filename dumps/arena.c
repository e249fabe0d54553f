#include "arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)
/* Large enough that a chunk holds dozens of one rank's operations and that
 * the block left at a chunk's end wastes little; small enough that one
 * reading thread's last chunk is not much unused memory. */
#define CHUNK_SIZE ((size_t)32 << 20)
#define ALIGN 64

struct chunk {
	char *base;
	size_t size;
};

struct fr_arena {
	struct chunk *chunks;
	size_t nchunks, cap;
	char *top;  /* where the next block starts */
	char *end;  /* of the current chunk */
	char *open; /* the block that may still grow, or NULL */
};

static size_t round_up(size_t n, size_t to)
{
	return n > SIZE_MAX - (to - 1) ? 0 : (n + to - 1) / to * to;
}

/* A chunk of `size` bytes (a multiple of HUGE_PAGE) aligned on a huge page,
 * so that all of it can be backed by huge pages. */
static char *chunk_map(size_t size)
{
	size_t len = size + HUGE_PAGE;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *base;
	size_t head;

	if (p == MAP_FAILED)
		return NULL;
	base = (char *)round_up((uintptr_t)p, HUGE_PAGE);
	head = (size_t)(base - p);
	if (head)
		munmap(p, head);
	munmap(base + size, HUGE_PAGE - head);
	/* Only a hint: without transparent huge pages the chunk is ordinary
	 * memory, as fast as malloc's. */
	madvise(base, size, MADV_HUGEPAGE);
	return base;
}

struct fr_arena *fr_arena_new(void)
{
	return calloc(1, sizeof(struct fr_arena));
}

void fr_arena_free(struct fr_arena *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->nchunks; i++)
		munmap(a->chunks[i].base, a->chunks[i].size);
	free(a->chunks);
	free(a);
}

void *fr_arena_grow(struct fr_arena *a, void *block, size_t used, size_t size)
{
	char *start = block ? (char *)block : a->top;
	struct chunk *c;
	size_t csize;

	if (block && block != a->open)
		return NULL; /* only the open block grows */
	if (!(size = round_up(size ? size : 1, ALIGN)))
		return NULL;
	if (start && size <= (size_t)(a->end - start)) {
		a->open = start;
		a->top = start + size;
		return start;
	}
	/* A new chunk; what was left of the old one stays unused. */
	if (a->nchunks == a->cap) {
		size_t ncap = a->cap ? a->cap * 2 : 16;

		c = realloc(a->chunks, ncap * sizeof(*c));
		if (!c)
			return NULL;
		a->chunks = c;
		a->cap = ncap;
	}
	csize = round_up(size, HUGE_PAGE);
	if (!csize)
		return NULL;
	if (csize < CHUNK_SIZE)
		csize = CHUNK_SIZE;
	c = &a->chunks[a->nchunks];
	if (!(c->base = chunk_map(csize)))
		return NULL;
	c->size = csize;
	a->nchunks++;
	if (block && used)
		memcpy(c->base, block, used);
	a->open = c->base;
	a->top = c->base + size;
	a->end = c->base + csize;
	return c->base;
}

void fr_arena_seal(struct fr_arena *a, void *block, size_t used)
{
	if (!block || block != a->open)
		return;
	used = round_up(used, ALIGN);
	if (used && used <= (size_t)(a->top - a->open))
		a->top = a->open + used;
	a->open = NULL;
}
