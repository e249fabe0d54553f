/*
 * Agent connections that have not said HELLO yet, per peer address (as
 * daemon_addr_key() writes it: an IPv6 peer by its /64). pending_add()
 * counts one more unless `max` are counted already (-EBUSY); -ENOMEM when
 * out of memory. The loop calls these under the lock.
 */
#ifndef FR_DAEMON_PENDING_H
#define FR_DAEMON_PENDING_H

#include <stdint.h>

int pending_add(const char *addr, uint32_t max);
void pending_remove(const char *addr);
void pending_clear(void);

#endif
