/* http: libcurl's multi interface on gadgetd's libevent loop, so HTTP
 * requests made for gadgets never block the loop. */
#pragma once

#include <curl/curl.h>
#include <event2/event.h>

struct http;

/* done runs once when the transfer ends (result from curl). */
typedef void http_done_fn(void *arg, CURL *easy, CURLcode result);

int http_new(struct event_base *base, struct http **out);
void http_free(struct http *h);
/* Starts a transfer set up on easy; done is called when it ends (also on
 * failure). 0 or -errno. */
int http_start(struct http *h, CURL *easy, http_done_fn *done, void *arg);
