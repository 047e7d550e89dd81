/* ssl_dl: libssl, libcrypto and libevent_openssl loaded at their first use
 * (dlopen), not at gadgetd's start. The peer link (cluster/forward.c)
 * calls ssl_dl_load before it makes its TLS contexts, then OpenSSL's and
 * bufferevent_openssl's functions by their usual names. */
#pragma once

#include <stddef.h>

/* libevent_openssl: loading it loads libssl and libcrypto, its own
 * dependencies, whose functions are found through its handle. */
#define SSL_DL_SONAME "libevent_openssl-2.1.so.7"

/* Loads the three once per process; later calls return 0 at once. 0, or
 * -errno with err saying why. */
int ssl_dl_load(char *err, size_t errlen);
