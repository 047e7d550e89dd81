/* value: typed values crossing the gadget boundary (Gadget__Value from
 * proto/gadget.proto): limits, validation, builders. Pure code. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gadget.pb-c.h"

#define VALUE_MAX_DEPTH 32         /* nesting of lists/maps */
#define VALUE_MAX_ITEMS 65536      /* items of one list or entries of one map */
#define VALUE_MAX_NODES 262144     /* values in one tree, all levels */

/* Checks a value received from an untrusted peer: exactly one kind set,
 * depth <= max_depth, counts within limits, strings and map keys valid
 * UTF-8, map keys unique. Returns 0, or -EINVAL with a short reason written
 * to why (may be NULL). */
int value_check(const Gadget__Value *v, unsigned max_depth, char *why, size_t whylen);
bool value_utf8_valid(const char *s, size_t len);
/* Checks the raw bytes of a packed message before protobuf-c unpacks them:
 * protobuf-c recurses once per nested message with no limit, so a deeply
 * nested frame far below the size limit could exhaust the stack. Refuses
 * nesting beyond what a VALUE_MAX_DEPTH value needs. 0 or -EINVAL. */
int value_packed_check(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                       char *why, size_t whylen);
/* value_packed_check, and also counts the nested messages (each value, and
 * each list, map and map entry that holds values) into *values: what
 * unpacking will cost, known before it is paid. Refuses more than
 * max_values of them. 0 or -EINVAL with why. */
int value_packed_cost(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                      size_t max_values, size_t *values, char *why, size_t whylen);

/* Builders. All return NULL on allocation failure; every value is freed
 * with value_free (protobuf-c's own free of a malloc-built tree). */
Gadget__Value *value_new_null(void);
Gadget__Value *value_new_bool(bool b);
Gadget__Value *value_new_int(int64_t i);
Gadget__Value *value_new_double(double d);
Gadget__Value *value_new_string(const char *s);                 /* copies s */
Gadget__Value *value_new_string_len(const char *s, size_t len); /* copies */
Gadget__Value *value_new_bytes(const void *data, size_t len);   /* copies */
Gadget__Value *value_new_list(void);
Gadget__Value *value_new_map(void);
/* Takes ownership of item (freed on failure too). Returns 0 or -ENOMEM/-EINVAL. */
int value_list_append(Gadget__Value *list, Gadget__Value *item);
/* Sets key (copied) to item (owned), replacing an existing entry. */
int value_map_set(Gadget__Value *map, const char *key, Gadget__Value *item);
/* Looks key up in a map value; NULL if absent or map is not a map. */
const Gadget__Value *value_map_get(const Gadget__Value *map, const char *key);
/* The string of a string value, else NULL. */
const char *value_string(const Gadget__Value *v);
Gadget__Value *value_dup(const Gadget__Value *v);
/* A packed value read back from where a gadget's values are kept (its kv
 * store, an alarm's payload, a backup file): its nesting bounded on the raw
 * bytes (value_packed_check) before protobuf-c's recursive unpacker sees
 * them, then checked as a gadget's own value is (value_check). What is kept
 * may have been written by other hands than gadgetd's (another node of a
 * shared PostgreSQL, a copied file): read as hostile. protobuf-c's tree
 * (free it with value_free); NULL with why if it is not a valid value (or
 * out of memory). */
Gadget__Value *value_decode(const uint8_t *data, size_t len, char *why, size_t whylen);
/* value_decode's value copied into one of ours, which the builders may
 * change; NULL if it is not a valid value or out of memory. */
Gadget__Value *value_unpack(const uint8_t *data, size_t len);
void value_free(Gadget__Value *v);
/* value_preview.c: v as one line of JSON-like text into out (len bytes,
 * NUL included), bytes shown as their size ("<N bytes>"), control bytes
 * escaped; cut, with an ellipsis, at len - 4 bytes. v must have passed
 * value_check (its depth bounds the walk). The length written. */
size_t value_preview(const Gadget__Value *v, char *out, size_t len);
/* A UTF-8 text as one line (control bytes as spaces), cut the same way. */
size_t value_preview_text(const char *s, char *out, size_t len);
