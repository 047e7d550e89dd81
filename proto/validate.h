/* validate: the one place where every message gadgetd receives — from a
 * worker, from a control client, from a sandbox's PID 1 on its report
 * pipe — is checked before any handler sees it (ranges, lengths, UTF-8,
 * identifiers, depth, counts). protobuf-c has
 * already checked the structure; the arguments of binding operations are
 * checked by the table of supervisor/bindings/ops.c. */
#pragma once

#include <stddef.h>
#include "gadget.pb-c.h"

#define VALIDATE_MAX_METHODS 256
/* The gadgets a forwarded call's chain may name (control Call.chain). */
#define CONTROL_CHAIN_MAX 4096
/* Types in all of a hello's signatures together: gadgetd keeps them parsed
 * while the gadget runs (about 170 bytes each), so one gadget's hello may
 * cost it at most about 170 KiB however its 256 signatures are shaped. */
#define VALIDATE_MAX_SIGNATURE_TYPES 1024
#define VALIDATE_MAX_LOG 4096
#define VALIDATE_MAX_ERROR 4096

/* Returns 0 if m, from the gadget whose policy names it name, may be acted
 * on, or -EPROTO with the reason in why. */
int validate_worker_msg(const Gadget__WorkerMsg *m, const char *name, char *why, size_t len);
/* Returns 0 if a control request may be handled, or -EINVAL with the
 * reason in why (gadget names, method names, paths, argument values). */
struct Control__Request;
int validate_control_request(const struct Control__Request *q, char *why, size_t len);
/* Returns 0 if a report from gadgetd-sandbox may be acted on, or -EPROTO
 * with the reason in why (a kind gadgetd knows, texts of a failure within
 * SANDBOX_REPORT_TEXT_MAX and UTF-8, a wait status waitpid could give). */
/* The most nodes a NodeList may carry, and a peer address's longest text:
 * gadgetd keeps no more (KVPG_NODES_MAX, struct kvpg_node's peer). */
#define VALIDATE_NODES_MAX 256
#define VALIDATE_PEER_MAX 127
/* The most spans a TraceTree may carry (and gadgetd gathers for one
 * trace), and the most nodes it may name as unreached. */
#define CONTROL_TRACE_SPANS_MAX 1024
#define CONTROL_TRACE_NODES_MAX 16
/* gadgetctl exec's command: at most this many words of at most this many
 * bytes each (the probe's argv, which gadgetd copies into its setup), and
 * the fds that come with the request (stdin, stdout, stderr). */
#define CONTROL_EXEC_ARGS_MAX 256
#define CONTROL_EXEC_ARG_MAX 4096
#define CONTROL_EXEC_FDS 3
/* gadgetctl backup and restore: the one fd that comes with the request
 * (the file; gadgetd checks it is a regular file). */
#define CONTROL_SNAPSHOT_FDS 1
/* gadgetctl trace NAME: the frames one follower may have waiting (past
 * them, new ones are dropped and counted, and a FrameBatch carries at
 * most this many), the bytes of a frame's preview (a value's text, a log
 * line), the followers of one gadget and of all gadgets together. */
#define CONTROL_FRAMES_QUEUE 256
#define CONTROL_FRAME_PREVIEW 120
#define CONTROL_FRAMES_PER_GADGET 4
#define CONTROL_FRAMES_FOLLOWERS 16
/* Returns 0 if a control response (gadgetd's to gadgetctl, a node's to
 * another) may be read, or -EPROTO with the reason in why (every text
 * present and UTF-8, a value within value.h's limits, a known kind). */
struct Control__Response;
int validate_control_response(const struct Control__Response *r, char *why, size_t whylen);
struct Sandbox__Report;
int validate_sandbox_report(const struct Sandbox__Report *r, char *why, size_t len);
