/*
 * FNV-1a, 64 bits: the one hash every rank, the daemon and the tools
 * compute alike (communicator ids, incident keys, change signatures). Not
 * for anything an adversary chooses keys for.
 */
#ifndef FR_HASH_H
#define FR_HASH_H

#include <stddef.h>
#include <stdint.h>

#define FR_FNV_INIT UINT64_C(0xcbf29ce484222325)

static inline uint64_t fr_fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= UINT64_C(0x100000001b3);
	}
	return h;
}

#endif
