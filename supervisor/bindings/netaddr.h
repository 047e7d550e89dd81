/* netaddr: the addresses an http binding never connects to unless its
 * Allow= entry names the address itself — loopback (127/8, ::1), "this
 * network" (0/8, ::), private (10/8, 172.16/12, 192.168/16, fc00::/7),
 * shared (100.64/10), link-local (169.254/16: the cloud metadata address;
 * fe80::/10, and fec0::/10), multicast and reserved (224/3, ff00::/8), and
 * IPv4-mapped forms of all of them. Anything but IPv4 and IPv6 too. */
#pragma once

#include <stdbool.h>
#include <sys/socket.h>

bool net_internal(const struct sockaddr *sa);
