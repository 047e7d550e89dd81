/* trace_export: the spans of this node (system/trace.h) sent to an
 * OpenTelemetry collector over OTLP/HTTP (protobuf, POST URL, which ends
 * in /v1/traces as a collector's does), in batches, through libcurl on
 * the loop (bindings/http.h: no transfer ever blocks it). One batch is in
 * flight at a time; the spans wait in the ring meanwhile, and those
 * overwritten before they were sent, or in a batch the collector did not
 * take, are counted as dropped (traces_dropped). */
#pragma once

struct event_base;
struct traces;
struct trace_export;

/* Starts the export of t's spans to url (TraceExport=); libcurl is loaded
 * at the first batch. 0 or -errno. */
int trace_export_new(struct event_base *base, struct traces *t, const char *url, struct trace_export **out);
/* Ends the export (a batch in flight is abandoned). Accepts NULL. */
void trace_export_free(struct trace_export *x);
