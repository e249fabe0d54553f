/*
 * Growing an array by doubling, the one way the readers, the engine and
 * the daemon do it.
 */
#ifndef FR_GROW_H
#define FR_GROW_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/*
 * Makes *arr (*cap elements of `size` bytes) hold at least `need`: *cap
 * doubles, from `first` when the array has none yet, until it does.
 * Returns 0, or -ENOMEM with *arr and *cap as they were.
 */
static inline int fr_grow(void **arr, size_t *cap, size_t need, size_t size, size_t first)
{
	size_t ncap;
	void *p;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap : first;
	while (ncap < need)
		ncap *= 2;
	if (ncap > SIZE_MAX / size)
		return -ENOMEM;
	p = realloc(*arr, ncap * size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

#endif
