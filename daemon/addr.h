/* Socket addresses as the daemon shows and counts them (addr.c). */
#ifndef FR_DAEMON_ADDR_H
#define FR_DAEMON_ADDR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/*
 * daemon_format_addr() writes "1.2.3.4:N" or "[::1]:N"; daemon_addr_key()
 * the peer as the per-address limits count it: an IPv4 address ("1.2.3.4"),
 * an IPv6 /64 ("2001:db8:1:2::/64"). Both return 0, or -EAFNOSUPPORT (and
 * write "?") for another family.
 */
int daemon_format_addr(const struct sockaddr *sa, char *buf, size_t cap);
int daemon_addr_key(const struct sockaddr *sa, char *buf, size_t cap);
/* Records the port actually bound (for port 0) in a configured address. */
void daemon_set_port(struct sockaddr_storage *ss, uint16_t port);

#endif
