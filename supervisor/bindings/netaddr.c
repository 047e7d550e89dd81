/* netaddr: which addresses are internal (netaddr.h). */
#include "netaddr.h"

#include <stdint.h>
#include <string.h>
#include <netinet/in.h>

/* An IPv4 address in host order. */
static bool v4_internal(uint32_t a)
{
        return (a >> 24) == 0 || (a >> 24) == 10 || (a >> 24) == 127 || (a >> 16) == 0xa9fe ||
               (a >> 20) == 0xac1 || (a >> 16) == 0xc0a8 || (a >> 22) == (100u << 2 | 1) || (a >> 28) >= 0xe;
}

/* Why the IPv4-mapped form is read into an integer, not checked through a
 * struct sockaddr_in made on the stack: reading that one through a
 * struct sockaddr pointer broke strict aliasing, and at -O2 GCC 12 read
 * the family before it was written (::ffff:8.8.8.8 came out internal;
 * tests/unit/test_netaddr.c). */
bool net_internal(const struct sockaddr *sa)
{
        if (sa->sa_family == AF_INET) {
                struct sockaddr_in in;
                memcpy(&in, sa, sizeof in);
                return v4_internal(ntohl(in.sin_addr.s_addr));
        }
        if (sa->sa_family == AF_INET6) {
                struct sockaddr_in6 in6;
                memcpy(&in6, sa, sizeof in6);
                const struct in6_addr *a = &in6.sin6_addr;
                if (IN6_IS_ADDR_V4MAPPED(a)) {
                        uint32_t v4;
                        memcpy(&v4, &a->s6_addr[12], 4);
                        return v4_internal(ntohl(v4));
                }
                return IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_UNSPECIFIED(a) || IN6_IS_ADDR_LINKLOCAL(a) ||
                       IN6_IS_ADDR_SITELOCAL(a) || IN6_IS_ADDR_MULTICAST(a) || (a->s6_addr[0] & 0xfe) == 0xfc;
        }
        return true;
}
