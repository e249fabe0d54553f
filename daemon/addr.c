/*
 * Socket addresses as the daemon shows and counts them: "1.2.3.4:N" and
 * "[::1]:N" in log lines and the ports file, and the key under which a
 * peer's connections are counted against the per-address limits.
 */
#include "addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

int daemon_format_addr(const struct sockaddr *sa, char *buf, size_t cap)
{
	char ip[INET6_ADDRSTRLEN];

	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, cap, "[%s]:%u", ip, ntohs(s6->sin6_port));
	} else if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
		snprintf(buf, cap, "%s:%u", ip, ntohs(s4->sin_port));
	} else {
		snprintf(buf, cap, "?");
		return -EAFNOSUPPORT;
	}
	return 0;
}

void daemon_set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET6)
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
	else
		((struct sockaddr_in *)ss)->sin_port = htons(port);
}

/*
 * An IPv4 peer is its address. An IPv6 peer is its /64: a host is given a
 * whole /64 (SLAAC, privacy addresses), so counting /128s would let one
 * host open 2^64 "addresses". An IPv4-mapped IPv6 address is the IPv4 one
 * it maps, so that a dual-stack listener counts a peer as an IPv4 one does.
 */
int daemon_addr_key(const struct sockaddr *sa, char *buf, size_t cap)
{
	static const uint8_t v4_mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	char ip[INET6_ADDRSTRLEN];

	if (sa->sa_family == AF_INET6) {
		struct in6_addr a = ((const struct sockaddr_in6 *)sa)->sin6_addr;

		if (memcmp(a.s6_addr, v4_mapped, sizeof(v4_mapped)) == 0) {
			inet_ntop(AF_INET, &a.s6_addr[12], ip, sizeof(ip));
			snprintf(buf, cap, "%s", ip);
			return 0;
		}
		memset(&a.s6_addr[8], 0, 8);
		inet_ntop(AF_INET6, &a, ip, sizeof(ip));
		snprintf(buf, cap, "%s/64", ip);
	} else if (sa->sa_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, ip, sizeof(ip));
		snprintf(buf, cap, "%s", ip);
	} else {
		snprintf(buf, cap, "?");
		return -EAFNOSUPPORT;
	}
	return 0;
}
