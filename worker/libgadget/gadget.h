/* libgadget: the C SDK for gadgets. A gadget registers named methods and
 * runs gadget_serve(); gadgetd calls the methods over the RPC fd and the
 * gadget reaches its declared bindings through gadget_binding_call() and the
 * helpers built on it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract.h"

#ifdef __cplusplus
extern "C" {
#endif

enum gadget_type {
        GADGET_INVALID, GADGET_NULL, GADGET_BOOL, GADGET_INT, GADGET_DOUBLE,
        GADGET_STRING, GADGET_BYTES, GADGET_LIST, GADGET_MAP,
};

typedef struct Gadget__Value gadget_value;
struct gadget;
struct gadget_call;

/* A method: returns a new value (owned by libgadget from then on), or
 * NULL after gadget_fail(). Returning NULL without gadget_fail is an
 * EFAILED error. */
typedef gadget_value *(*gadget_method_fn)(struct gadget_call *call, const gadget_value *args,
                                          void *data);

/* --- the gadget ------------------------------------------------------- */
/* name must be the Name= of the gadget's policy; NULL takes the name gadgetd
 * gives the program (GADGET_NAME in its environment), so that one program
 * serves under several policies. NULL on allocation failure. */
struct gadget *gadget_new(const char *name);
void gadget_free(struct gadget *g);
/* Registers a method by its signature, in the type language of gadgetd's
 * protocol (see docs/writing-gadgets.md, "Typed methods"):
 *     gadget_method_typed(g, "greet(name: string, times?: int(1..10)) -> string", greet, NULL);
 * The arguments are a record of the named parameters (no parameters:
 * null or {}). gadgetd checks every call's arguments and every result
 * against it, and this library hands the method only arguments that pass.
 * The signature is parsed once by gadget_serve, which fails with
 * -GADGET_EINVAL (gadget_last_error() says where) if it is not valid.
 * 0 or -GADGET_E*. */
int gadget_method_typed(struct gadget *g, const char *signature, gadget_method_fn fn, void *data);
/* Registers an untyped method (its name: gadget_method_name_ok of
 * contract.h): any arguments reach it, and a gadgetd that requires types
 * (RequireTypes=yes) refuses the gadget. 0 or -GADGET_E*. */
int gadget_method(struct gadget *g, const char *name, gadget_method_fn fn, void *data);
/* Says hello and serves calls until gadgetd asks the gadget to stop.
 * Returns 0 then, or -GADGET_E* if the connection failed (not under gadgetd,
 * refused hello, protocol error). */
int gadget_serve(struct gadget *g);
/* Records an error answer for the current call; returns NULL. */
gadget_value *gadget_fail(struct gadget_call *call, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
struct gadget *gadget_call_gadget(struct gadget_call *call);
/* The message of the last failed binding call, or "". */
const char *gadget_last_error(const struct gadget *g);
/* Sends a log line to gadgetd (priority 0..7 as syslog). */
int gadget_log(struct gadget *g, int priority, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* --- bindings ----------------------------------------------------------- */
/* Calls operation op of binding with args (owned, may be NULL for no
 * arguments). On success returns 0 and, if result is not NULL, the result
 * value (the caller frees it). On failure returns -GADGET_E* and
 * gadget_last_error() says why. Calls from gadgetd that arrive meanwhile
 * are served after the current method returns. */
int gadget_binding_call(struct gadget *g, const char *binding, const char *op,
                        gadget_value *args, gadget_value **result);

/* One function per binding operation, on gadget_binding_call. Each returns
 * 0 or -GADGET_E* (gadget_last_error says why); owned arguments are freed
 * whatever happens. Keys are strings of 1 to 512 bytes. */
/* kv: the value stored under key (-GADGET_ENOTFOUND if none). */
int gadget_kv_get(struct gadget *g, const char *binding, const char *key, gadget_value **value);
/* kv: stores value (owned) under key; durable once this returns 0. */
int gadget_kv_put(struct gadget *g, const char *binding, const char *key, gadget_value *value);
int gadget_kv_delete(struct gadget *g, const char *binding, const char *key, bool *existed);
/* kv: {"keys": [...], "cursor": K or null} for keys starting with prefix
 * (NULL for all), after cursor (NULL to begin), at most limit (0 = 100). */
int gadget_kv_list(struct gadget *g, const char *binding, const char *prefix, int limit, const char *cursor,
                   gadget_value **result);
/* kv: compare-and-set. Writes value (owned; NULL: deletes the key) only
 * if the key's stored value equals expect (owned; NULL: only if the key
 * does not exist), byte for byte as stored (a value read by get and
 * passed back unchanged is equal). *written says whether it was; if not,
 * *current (if not NULL) is the stored value (the caller frees it), NULL
 * if the key does not exist. Retrying a cas whose answer was lost is
 * safe: a second one finds the value it wrote and is not written. */
int gadget_kv_cas(struct gadget *g, const char *binding, const char *key, gadget_value *expect,
                  gadget_value *value, bool *written, gadget_value **current);
/* kv: adds one operation to ops (a list, gadget_list()) for gadget_kv_batch:
 * op "put" (value), "delete" (neither) or "cas" (expect and value as
 * gadget_kv_cas's, NULL for none); expect and value are owned. 0 or
 * -GADGET_E*. */
int gadget_kv_batch_add(gadget_value *ops, const char *op, const char *key, gadget_value *expect,
                        gadget_value *value);
/* kv: carries out ops (owned; 1 to 64 operations) in one transaction,
 * all or none. 0 with *result (if not NULL; the caller frees it):
 * {"applied": true, "results": [whether each op's key existed]}, or, when a
 * cas did not match, {"applied": false, "failed": I, "current": V} (no
 * "current" if op I's key does not exist) and nothing was written. A write
 * past MaxKeys=/MaxBytes= fails the whole batch (-GADGET_ELIMIT). */
int gadget_kv_batch(struct gadget *g, const char *binding, gadget_value *ops, gadget_value **result);
/* alarm: sets an alarm at at_ms (ms since the epoch), or, when at_ms is
 * negative, delay_ms from now, with payload (owned; NULL: null) and id
 * (NULL: gadgetd makes one); setting an id again replaces that alarm. The
 * id (malloc'd) in *id_out if not NULL. gadgetd calls the binding's
 * Method= with {binding, id, at, payload, attempt} once it is due. */
int gadget_alarm_set(struct gadget *g, const char *binding, int64_t at_ms, int64_t delay_ms, gadget_value *payload,
                     const char *id, char **id_out);
/* alarm: {"alarms": [{id, at, payload}...], "cursor": ID or null}, in id
 * order after cursor (NULL to begin), at most limit (0 = 100). */
int gadget_alarm_list(struct gadget *g, const char *binding, int limit, const char *cursor, gadget_value **result);
/* alarm: cancels alarm id; *existed says whether there was one. */
int gadget_alarm_cancel(struct gadget *g, const char *binding, const char *id, bool *existed);
/* gadget: calls method of the binding's target gadget with args (owned). */
int gadget_call(struct gadget *g, const char *binding, const char *method, gadget_value *args,
                gadget_value **result);
/* http: {"status": N, "headers": {...}, "body": bytes}. method NULL = GET;
 * headers (owned, a map of strings) and body may be NULL. */
int gadget_http(struct gadget *g, const char *binding, const char *method, const char *url,
                gadget_value *headers, const void *body, size_t body_len, gadget_value **response);
/* text or secret: the value, malloc'd. */
int gadget_text(struct gadget *g, const char *binding, char **value);

/* --- values ------------------------------------------------------------- */
gadget_value *gadget_null(void);
gadget_value *gadget_bool(bool b);
gadget_value *gadget_int(int64_t i);
gadget_value *gadget_double(double d);
gadget_value *gadget_string(const char *s);
gadget_value *gadget_stringf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
gadget_value *gadget_bytes(const void *data, size_t len);
gadget_value *gadget_list(void);
gadget_value *gadget_map(void);
/* Take ownership of item. 0 or -GADGET_EINVAL/-GADGET_EINTERNAL. */
int gadget_list_append(gadget_value *list, gadget_value *item);
int gadget_map_set(gadget_value *map, const char *key, gadget_value *item);
void gadget_value_free(gadget_value *v);
/* A deep copy (NULL on allocation failure). */
gadget_value *gadget_copy(const gadget_value *v);

enum gadget_type gadget_type_of(const gadget_value *v);
const gadget_value *gadget_map_get(const gadget_value *map, const char *key);
size_t gadget_len(const gadget_value *v);                  /* list items, map entries, string/bytes length */
const gadget_value *gadget_list_at(const gadget_value *list, size_t i);
const char *gadget_map_key_at(const gadget_value *map, size_t i);
const gadget_value *gadget_map_value_at(const gadget_value *map, size_t i);
const char *gadget_as_string(const gadget_value *v);       /* NULL unless a string */
const void *gadget_as_bytes(const gadget_value *v, size_t *len);
bool gadget_as_int(const gadget_value *v, int64_t *out);
bool gadget_as_double(const gadget_value *v, double *out); /* ints convert too */
bool gadget_as_bool(const gadget_value *v, bool *out);

#ifdef __cplusplus
}
#endif
