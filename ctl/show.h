/* show: renders gadgetd's answers for a person (text) or a script (JSON,
 * one document per line). Answers reach here already checked by client.c. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <jansson.h>

#include "control.pb-c.h"

/* `list`: an aligned table, or a JSON array of gadget objects. 0 or -errno. */
int show_list(FILE *f, const Control__GadgetList *l, bool json);
/* `status`: a systemctl-like block, or one JSON object. 0 or -errno. */
int show_status(FILE *f, const Control__GadgetStatus *s, bool json);
/* A gadget's methods: one signature per line ("NAME (untyped)" for one
 * without), or with json {"name", "methods": [JSON Schema of each]}. */
int show_describe(FILE *f, const Control__GadgetStatus *s, bool json);
/* `gadgetctl denials`: the status's refused system calls (denials.c). */
int show_denials(FILE *f, const Control__GadgetStatus *s, bool json);
/* A Done answer: its message (if any), or {"ok":true,"message":...}. */
int show_done(FILE *f, const Control__Done *d, bool json);
/* How log entries are printed: as journalctl's short-precise (time, gadget,
 * run, stream and priority before the text), their text alone (cat), or
 * one JSON object each. */
enum show_logs_as { SHOW_LOGS_SHORT, SHOW_LOGS_CAT, SHOW_LOGS_JSON };
/* A LogLines' lines (audit records' text) and entries (log lines, as
 * show_log_entries), one per line, or one JSON object per line. */
int show_logs(FILE *f, const Control__LogLines *l, bool json);
/* Its entries alone: "Dec 06 05:03:50.123 NAME[RUN] STREAM.PRIORITY: TEXT"
 * (local time; "-" for a time or run unknown, or a line before any run), TEXT, or
 * {"time", "time_ms", "gadget", "run", "stream", "priority", "line"}. */
int show_log_entries(FILE *f, const Control__LogLines *l, enum show_logs_as as);
/* Audit records: one per line, or with json each record's own object (a
 * line that is no JSON object as {"line":...}). */
int show_audit(FILE *f, const Control__LogLines *l, bool json);
/* `reload`: what changed on out and the policy errors on err, or one JSON
 * object on out. */
int show_reload(FILE *out, FILE *err, const Control__ReloadReport *r, bool json);
/* A value as compact JSON and a newline. */
int show_value(FILE *f, const Gadget__Value *v);
/* gadgetctl approvals: the calls waiting, or {"approvals": [...], "total": N}. */
int show_approvals(FILE *f, const Control__ApprovalList *l, bool json);
/* gadgetctl nodes: NAME, PEER, LAST SEEN (a node unseen for longer than
 * CONTROL_NODE_DOWN_MS as down; the node answering marked "(this node)"),
 * or {"nodes": [{"name", "peer", "last_seen_ms", "self", "up"}]}. */
int show_nodes(FILE *f, const Control__NodeList *l, bool json);
int show_cores(FILE *f, const Control__CoreList *l, bool json);
int show_versions(FILE *f, const Control__VersionList *l, bool json);
/* gadgetctl trace: the spans as a tree (the nodes that did not answer on err). */
int show_trace(FILE *f, FILE *err, const Control__TraceTree *t, bool json);
/* gadgetctl trace NAME: a part's first max frames of gadget, one a line
 * (or a JSON object each), after a line saying how many were dropped
 * before them, if any. 0 or -errno. */
int show_frames(FILE *f, const Control__FrameBatch *b, const char *gadget, size_t max, bool json);
/* gadgetctl top: GADGET, STATE, CPU%, MEMORY, TASKS, CALLS/S, ERRORS/S,
 * the rates over the time between before and now ("-" without before, or
 * across a restart), busiest first; with json, now's counters as they are
 * ([{name, state, cpu_usec, memory_bytes, tasks, calls, errors}]). */
int show_top(FILE *f, const Control__TopReport *now, const Control__TopReport *before, bool json);
/* Any answer by its kind on out (reload's policy errors and a note of log
 * lines on err); audit: LogLines are audit records. *failed is set when
 * the answer tells of a failure (policy errors of a reload). 0 or -errno
 * (-EPROTO: a kind gadgetctl does not know). */
int show_answer(FILE *out, FILE *err, const Control__Response *r, bool json, bool audit, bool *failed);
/* Prints json (taking it over) compactly and a newline. 0, -ENOMEM if json
 * is NULL, -EIO. */
int show_json(FILE *f, json_t *json);
/* A JSON string of s, escaped like output_escape if s is not valid UTF-8
 * (jansson refuses those). NULL if out of memory. */
json_t *show_json_string(const char *s);
/* A JSON array of n strings (as show_json_string), or NULL if out of memory. */
json_t *show_json_strv(char *const *v, size_t n);
/* s escaped for a terminal (tabs kept) and a newline. 0 or -ENOMEM. */
int show_line(FILE *f, const char *s);
/* A note about an answer, on its own line: "gadgetctl: note: NOTE"
 * (escaped), or {"note":NOTE}. */
void show_note(FILE *f, const char *note, bool json);
/* An error: "gadgetctl: MESSAGE" (escaped), or
 * {"error":{"code":CODE,"message":MESSAGE}}; code is a GADGET_E* number, 0
 * for an error found by gadgetctl itself. */
void show_error(FILE *f, bool json, uint32_t code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
