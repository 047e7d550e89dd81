/* trace: the spans of this node's call chains. Every hop of a chain — a
 * call of a gadget's method, a binding operation — is a span (its trace,
 * its own id, its parent's, the gadget, method or operation, node, start,
 * duration, outcome). The recent ones are kept in a bounded ring (the
 * oldest overwritten), which `gadgetctl trace` reads and from which the
 * OTLP export (trace_export.c) takes its batches: spans overwritten before
 * they were taken are counted as dropped. Nothing here blocks or does
 * I/O. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "traceparent.h"

#define TRACE_KEEP_DEFAULT 4096u   /* TraceKeep=: spans kept */
#define TRACE_KEEP_MAX (1u << 20)

enum span_kind { SPAN_CALL, SPAN_BINDING };

struct span {
        struct trace_ctx ctx;                    /* its trace, its own id, flags */
        uint8_t parent_id[TRACE_SPAN_ID_LEN];    /* zero: the chain's first hop here */
        uint8_t kind;                            /* enum span_kind */
        char gadget[65];                         /* the gadget called, or whose binding it is */
        char name[96];                           /* the method, or "BINDING.op" */
        char node[64];                           /* the node it ran on */
        char peer[64];                           /* the node it came from or went to, "" if none */
        char outcome[16];                        /* "ok", or an error's name (contract.h) */
        uint64_t start_ns;                       /* since the epoch */
        uint64_t duration_ns;
};

struct traces;

/* A ring of keep spans (0: tracing off, every call below does nothing)
 * of node (borrowed); sample: the share of new traces marked sampled, the
 * only ones exported (TraceSample=, 0 to 1). 0 or -ENOMEM. */
int traces_new(const char *node, size_t keep, double sample, struct traces **out);
void traces_free(struct traces *t);
/* Whether t records spans (not NULL, keep > 0). */
bool traces_on(const struct traces *t);
const char *traces_node(const struct traces *t);
/* A new span's context: under parent's trace and flags (NULL: a new
 * trace, sampled as TraceSample= says), with a new span id. */
void trace_begin(struct traces *t, const struct trace_ctx *parent, struct trace_ctx *out);
/* The next span's place in the ring (the oldest's, overwritten), with
 * its context ctx written and indexed by its trace id; the caller fills
 * every other field at once (they hold the old span's). NULL when
 * tracing is off. */
struct span *traces_next(struct traces *t, const struct trace_ctx *ctx);
/* src into dst of size bytes, cut to fit: the spans' strings, on every
 * call's path (snprintf's parsing costs more than the span). */
static inline void trace_copy(char *dst, size_t size, const char *src)
{
        size_t n = strnlen(src, size - 1);
        memcpy(dst, src, n);
        dst[n] = '\0';
}
/* The kept spans of trace id, oldest first: the newest max of them, as
 * pointers into the ring (valid until the next traces_next). Their
 * number. Found through an index by trace id (a keyed hash, so no caller
 * choosing ids makes them collide): the work is the spans of that trace
 * and a few others, never the whole ring — an asking node or user cannot
 * make gadgetd read TraceKeep= spans per request. */
size_t traces_find(const struct traces *t, const uint8_t id[TRACE_ID_LEN], const struct span **out, size_t max);
/* For the export: copies up to max sampled spans not taken yet, oldest
 * first, and takes them (the others are passed over). Spans overwritten before they were taken are counted in
 * traces_dropped. Their number. */
size_t traces_take(struct traces *t, struct span *out, size_t max);
/* Spans the export lost (overwritten before taken, or a batch the
 * collector did not accept), since gadgetd started. */
uint64_t traces_dropped(const struct traces *t);
void traces_count_dropped(struct traces *t, uint64_t n);
/* Turns taking on (the export exists): until then nothing counts as
 * dropped. */
void traces_export_start(struct traces *t);
/* The wall-clock time (ns since the epoch) of mono_ns, a CLOCK_MONOTONIC
 * reading the caller took anyway: a span's start without a clock reading
 * of its own on the call's path. The offset between the two clocks is
 * read again once a second, so a step of the wall clock shows within one. */
uint64_t traces_wall_ns(struct traces *t, uint64_t mono_ns);
