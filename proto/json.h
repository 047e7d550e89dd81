/* json: conversion between JSON text and typed values (jansson).
 * Mapping: null/true/false/strings/arrays/objects map directly; a JSON
 * integer becomes an int, any other number a double; bytes are written as
 * {"$bytes": "<base64>"} and that exact one-key object is read back as bytes
 * (so a real map of that one key cannot be expressed in JSON). Doubles are
 * written with the fewest digits that read back exactly; NaN and infinities
 * are written as null, as JavaScript's JSON.stringify does. */
#pragma once

#include <stddef.h>
#include "gadget.pb-c.h"

/* Parses text (len bytes). Returns 0 with *out set, or -EINVAL with a
 * message naming the problem and position in err. Limits of value.h apply. */
int json_to_value(const char *text, size_t len, Gadget__Value **out, char *err, size_t errlen);
/* Renders v as compact JSON (malloc'd, NUL-terminated), or NULL on failure. */
char *json_from_value(const Gadget__Value *v);
