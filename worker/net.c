/* net: the worker's network namespace, which holds only lo (libnl-route). */
#include "sandbox.h"

#include <errno.h>
#include <net/if.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>

/* Brings lo up in the gadget's own network namespace (Loopback=yes). The
 * netlink socket exists only during setup; the seccomp filter installed
 * later refuses every new socket. */
int net_loopback_up(const char **step)
{
        struct nl_sock *sk = NULL;
        struct rtnl_link *lo = NULL, *change = NULL;
        int e;

        *step = "loopback: netlink";
        sk = nl_socket_alloc();
        if (!sk)
                return -ENOMEM;
        if ((e = nl_connect(sk, NETLINK_ROUTE)) < 0)
                goto out;
        *step = "loopback: find lo";
        if ((e = rtnl_link_get_kernel(sk, 0, "lo", &lo)) < 0)
                goto out;
        *step = "loopback: set lo up";
        change = rtnl_link_alloc();
        if (!change) {
                e = -NLE_NOMEM;
                goto out;
        }
        rtnl_link_set_flags(change, IFF_UP);
        e = rtnl_link_change(sk, lo, change, 0);
out:
        rtnl_link_put(change);
        rtnl_link_put(lo);
        nl_socket_free(sk);
        /* libnl has its own error numbers; EIO stands for all of them. */
        if (e < 0)
                return e == -NLE_PERM ? -EPERM : e == -NLE_NOMEM ? -ENOMEM : -EIO;
        return 0;
}
