/* Unit tests of supervisor/bindings/netaddr.c: each internal range of the
 * http binding, at its edges, and the addresses just outside it, so that
 * dropping or narrowing any range turns a check red. */
#include <arpa/inet.h>
#include <string.h>

#include "bindings/netaddr.h"
#include "tap.h"

static bool internal(const char *text)
{
        struct sockaddr_in v4 = { .sin_family = AF_INET };
        struct sockaddr_in6 v6 = { .sin6_family = AF_INET6 };
        if (inet_pton(AF_INET, text, &v4.sin_addr) == 1)
                return net_internal((struct sockaddr *)&v4);
        if (inet_pton(AF_INET6, text, &v6.sin6_addr) == 1)
                return net_internal((struct sockaddr *)&v6);
        return false;
}

int main(void)
{
        static const char *const in[] = {
                "127.0.0.1", "127.255.255.254", "0.0.0.0", "0.1.2.3", "10.0.0.0", "10.255.255.255",
                "172.16.0.0", "172.31.255.255", "192.168.0.1", "192.168.255.255", "169.254.169.254",
                "169.254.0.1", "100.64.0.0", "100.127.255.255", "224.0.0.1", "239.255.255.250",
                "255.255.255.255", "::1", "::", "fc00::1", "fdff:ffff::1", "fe80::1", "febf::1",
                "fec0::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:10.1.2.3", "::ffff:169.254.169.254",
                "::ffff:192.168.1.1",
        };
        static const char *const out[] = {
                "1.1.1.1", "9.255.255.255", "11.0.0.0", "126.255.255.255", "128.0.0.0", "172.15.255.255",
                "172.32.0.0", "192.167.255.255", "192.169.0.0", "169.253.255.255", "169.255.0.0",
                "100.63.255.255", "100.128.0.0", "223.255.255.255", "2001:db8::1", "2606:4700::1111",
                "fbff::1", "::ffff:8.8.8.8",
        };
        for (size_t i = 0; i < sizeof in / sizeof *in; i++)
                CHECK(internal(in[i]), "%s is internal", in[i]);
        for (size_t i = 0; i < sizeof out / sizeof *out; i++)
                CHECK(!internal(out[i]), "%s is not", out[i]);
        struct sockaddr other = { .sa_family = AF_UNIX };
        CHECK(net_internal(&other), "an address of another family is refused as internal");
        return tap_done();
}
