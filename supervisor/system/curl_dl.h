/* curl_dl: libcurl loaded at its first use (dlopen), not at gadgetd's
 * start. Code that uses curl calls curl_dl_load first (http_ready does),
 * then libcurl's functions by their usual names. */
#pragma once

#include <stddef.h>
#include <curl/curl.h>

#define CURL_DL_SONAME "libcurl.so.4"

/* Loads libcurl and runs curl_global_init, once per process; later calls
 * return 0 at once. 0, or -errno with err saying why. */
int curl_dl_load(char *err, size_t errlen);
