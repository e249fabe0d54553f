/*
 * Agent connections that have not said HELLO yet, counted per peer address
 * (without its port; an IPv6 peer by its /64, daemon_addr_key()), so that one address cannot fill the daemon's
 * connections with sockets that never register: beyond
 * --max-pending-per-address, its next connection is refused at once. A
 * real agent says HELLO within milliseconds of connecting, so only a burst
 * of a node's ranks starting together is ever counted here at once.
 *
 * The event loop alone calls these, under the daemon's lock. One table per
 * process, as there is one daemon.
 */
#include "pending.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../protocol/hash.h"

#define PENDING_BUCKETS 1024

struct pending_addr {
	struct pending_addr *next;
	uint32_t n;
	char addr[];
};

static struct pending_addr *buckets[PENDING_BUCKETS];

/* FNV-1a: addresses are short and not chosen to collide by anyone who could
 * gain by it beyond a slower lookup of their own entries. */
static struct pending_addr **pending_bucket(const char *addr)
{
	return &buckets[fr_fnv1a(FR_FNV_INIT, addr, strlen(addr)) % PENDING_BUCKETS];
}

static struct pending_addr **pending_find(const char *addr)
{
	struct pending_addr **pp = pending_bucket(addr);

	while (*pp && strcmp((*pp)->addr, addr) != 0)
		pp = &(*pp)->next;
	return pp;
}

int pending_add(const char *addr, uint32_t max)
{
	struct pending_addr **pp = pending_find(addr);
	size_t len;

	if (*pp) {
		if ((*pp)->n >= max)
			return -EBUSY;
		(*pp)->n++;
		return 0;
	}
	if (max == 0)
		return -EBUSY;
	len = strlen(addr) + 1;
	*pp = malloc(sizeof(**pp) + len);
	if (!*pp)
		return -ENOMEM;
	(*pp)->next = NULL;
	(*pp)->n = 1;
	memcpy((*pp)->addr, addr, len);
	return 0;
}

void pending_remove(const char *addr)
{
	struct pending_addr **pp = pending_find(addr);
	struct pending_addr *p = *pp;

	if (!p)
		return;
	if (--p->n == 0) {
		*pp = p->next;
		free(p);
	}
}

void pending_clear(void)
{
	for (size_t i = 0; i < PENDING_BUCKETS; i++) {
		while (buckets[i]) {
			struct pending_addr *p = buckets[i];

			buckets[i] = p->next;
			free(p);
		}
	}
}
