/* calls: the one door for calling a gadget's method. gadgetctl's calls
 * (control/requests.c), the gateway (gateway/gateway_api.c), gadget-to-gadget
 * bindings (bindings/bind_gadget.c) and `gadgetd run --call` (run.c) all
 * come here; each turns the code it gets into its own transport's answer.
 * A call in flight has a CallTimeout timer; a gadget that answered nothing
 * for that long is killed (cause "timeout"). */
#pragma once

#include <stddef.h>

#include "gadget.pb-c.h"

struct unit;
struct peer_chain;

/* The outcome of a call: res NULL means it failed with code/message. */
typedef void (*call_fn)(void *cbdata, const Gadget__Value *res, int code, const char *message);

/* Calls method of u with args (borrowed); chain tells where a
 * gadget-to-gadget call comes from (NULL for others). 0 when the call is
 * on its way: cb gets its outcome once. Else a GADGET_E* code, with msg
 * saying why in words for the caller (not ready, no such method, busy,
 * too large), and cb is never called. */
int calls_start(struct unit *u, const char *method, const Gadget__Value *args, const struct peer_chain *chain,
                call_fn cb, void *cbdata, char *msg, size_t len);
