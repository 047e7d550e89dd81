/* traceparent: the W3C trace context (https://www.w3.org/TR/trace-context/)
 * of a call chain — a trace id (16 bytes), the parent's span id (8 bytes)
 * and flags — and its one text form, the `traceparent` header
 * "00-<32 hex>-<16 hex>-<2 hex>". Pure code: the gateway's header,
 * gadgetctl's --traceparent and a node's Call.traceparent are all read
 * here, strictly, and an invalid one is refused whole. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TRACE_ID_LEN 16
#define TRACE_SPAN_ID_LEN 8
#define TRACEPARENT_LEN 55      /* "00-" 32 "-" 16 "-" 2 */
#define TRACEPARENT_MAX 512     /* a longer text is refused without reading it */
#define TRACE_FLAG_SAMPLED 0x01

struct trace_ctx {
        uint8_t trace_id[TRACE_ID_LEN];
        uint8_t span_id[TRACE_SPAN_ID_LEN];
        uint8_t flags;
};

/* Reads a traceparent text (len bytes, not NUL-terminated): 0 with *out
 * set, or -EINVAL (any break of the format: length, a version it cannot
 * be, upper-case or other non-hex digits, an all-zero trace or span id).
 * A later version's longer text is read by its first 55 characters, as
 * the W3C text asks. */
int traceparent_parse(const char *s, size_t len, struct trace_ctx *out);
/* Its text, 55 characters and a NUL, version 00. */
void traceparent_format(const struct trace_ctx *t, char out[TRACEPARENT_LEN + 1]);
/* n bytes as 2n lower-case hex digits and a NUL. */
void trace_hex(const uint8_t *b, size_t n, char *out);
/* 2n lower-case hex digits (exactly) into n bytes: 0, or -EINVAL. */
int trace_unhex(const char *s, size_t n, uint8_t *out);
/* Whether id (n bytes) is all zero: the W3C text's invalid id. */
bool trace_id_zero(const uint8_t *id, size_t n);
