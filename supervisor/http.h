/* http: libcurl's multi interface on gadgetd's libevent loop, so HTTP
 * requests made for gadgets never block the loop. */
#pragma once

#include <curl/curl.h>
#include <event2/event.h>

struct http;

/* done runs once when the transfer ends (result from curl). */
typedef void http_done_fn(void *arg, CURL *easy, CURLcode result);

/* Nothing of libcurl is loaded yet: http_ready does that. */
int http_new(struct event_base *base, struct http **out);
/* Loads libcurl (at the first request) and sets up the multi handle.
 * 0, or -errno with err saying why HTTP is unavailable. */
int http_ready(struct http *h, char *err, size_t errlen);
void http_free(struct http *h);
/* Starts a transfer set up on easy; done is called when it ends (also on
 * failure). 0 or -errno. */
int http_start(struct http *h, CURL *easy, http_done_fn *done, void *arg);
