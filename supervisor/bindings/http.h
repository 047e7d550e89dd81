/* http: libcurl's multi interface on gadgetd's libevent loop, so HTTP
 * requests made for gadgets never block the loop. It also keeps the
 * budget of HTTP requests in flight: per binding of a gadget and in total
 * (a request beyond either is refused before any curl handle exists). */
#pragma once

#include <curl/curl.h>
#include <event2/event.h>

/* HTTPRequestsMax= (daemon): requests in flight for every gadget together. */
#define HTTP_MAX_TOTAL_DEFAULT 256u
#define HTTP_MAX_TOTAL_LIMIT 16384u

struct http;
/* One request's place in the budget, from http_slot_take to its end. */
struct http_slot;

/* done runs once when the transfer ends (result from curl). */
typedef void http_done_fn(void *arg, CURL *easy, CURLcode result);

/* Nothing of libcurl is loaded yet: http_ready does that. max_total is
 * HTTPRequestsMax= (0: HTTP_MAX_TOTAL_DEFAULT). */
int http_new(struct event_base *base, unsigned max_total, struct http **out);
/* Loads libcurl (at the first request) and sets up the multi handle.
 * 0, or -errno with err saying why HTTP is unavailable. */
int http_ready(struct http *h, char *err, size_t errlen);
void http_free(struct http *h);
/* Takes a place for one request of gadget's binding, which may have at
 * most binding_max in flight. 0 with *out set; -EBUSY when the binding
 * has binding_max in flight, -EAGAIN when gadgetd has its total in
 * flight (both counted and logged, at most once per window and gadget),
 * -ENOMEM. */
int http_slot_take(struct http *h, const char *gadget, const char *binding, unsigned binding_max,
                   struct http_slot **out);
/* Gives back a slot whose request never started. Accepts NULL. */
void http_slot_put(struct http *h, struct http_slot *s);
/* Starts a transfer set up on easy in slot s; done is called when it ends
 * (also on failure) and the slot goes with it. 0, or -errno and the slot
 * is still the caller's. */
int http_start(struct http *h, struct http_slot *s, CURL *easy, http_done_fn *done, void *arg);
/* Ends a transfer started on easy without its done (its owner goes):
 * easy is taken off the multi handle and its slot given back; the caller
 * still cleans easy up. */
void http_abandon(struct http *h, CURL *easy);
