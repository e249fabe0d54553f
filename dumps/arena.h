/*
 * Big arrays in huge pages. Reading a 1024-rank incident makes two million
 * operations (hundreds of MiB): from malloc, each 4 KiB page of them costs a
 * page fault when first written, and on a virtual machine the faults were a
 * third of fr-analyze's time. An arena hands out blocks of large chunks
 * that the kernel backs with 2 MiB pages (transparent huge pages, asked for
 * with madvise), so the same memory costs a few hundred faults.
 *
 * One block is open at a time: the last one handed out, which can grow in
 * place (or move, when its chunk is full) until it is sealed at the size it
 * ended with. Blocks are never freed one by one; everything goes with the
 * arena. An arena is not thread-safe: each reading thread has its own.
 */
#ifndef FR_ARENA_H
#define FR_ARENA_H

#include <stddef.h>

struct fr_arena;

/* NULL when out of memory. */
struct fr_arena *fr_arena_new(void);
/* Returns every block of `a` (NULL: nothing) to the kernel. */
void fr_arena_free(struct fr_arena *a);

/*
 * Makes `block` (NULL for a new one, else the open block, of which `used`
 * bytes matter) `size` bytes long, 64-byte aligned. Returns the block, which
 * may have moved with its first `used` bytes, or NULL when out of memory (the
 * block then untouched). A new block seals the one open before it.
 */
void *fr_arena_grow(struct fr_arena *a, void *block, size_t used, size_t size);
/* Done growing the open `block`: only its first `used` bytes are kept. */
void fr_arena_seal(struct fr_arena *a, void *block, size_t used);

#endif
