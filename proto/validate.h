/* validate: the one place where every message gadgetd receives — from a
 * worker, from a control client — is checked before any handler sees it
 * (ranges, lengths, UTF-8, identifiers, depth, counts). protobuf-c has
 * already checked the structure; the arguments of binding operations are
 * checked by the table of supervisor/bindings/ops.c. */
#pragma once

#include <stddef.h>
#include "gadget.pb-c.h"

#define VALIDATE_MAX_METHODS 256
#define VALIDATE_MAX_LOG 4096
#define VALIDATE_MAX_ERROR 4096

/* Returns 0 if m, from the gadget whose policy names it name, may be acted
 * on, or -EPROTO with the reason in why. */
int validate_worker_msg(const Gadget__WorkerMsg *m, const char *name, char *why, size_t len);
/* Returns 0 if a control request may be handled, or -EINVAL with the
 * reason in why (gadget names, method names, paths, argument values). */
struct Control__Request;
int validate_control_request(const struct Control__Request *q, char *why, size_t len);
