/* contract: what both ends of gadgetd's protocols agree on besides the
 * messages themselves (gadget.proto, control.proto): the protocol versions
 * and the error codes of error answers. The SDK's gadget.h includes it
 * (and installs it beside itself), gadgetd and gadgetctl include it
 * directly. */
#pragma once

#include <stddef.h>

/* The gadget protocol (gadget.proto): a gadget's hello carries it.
 * Version 2 added the methods' signatures; gadgetd still accepts a
 * version 1 hello (every method untyped). */
#define GADGET_PROTOCOL_VERSION 2
#define GADGET_PROTOCOL_MIN 1
/* The control protocol (control.proto): every Request carries it, and
 * gadgetd answers the first request of a connection that speaks another
 * with an error (GADGET_EPROTO) and reads no more of it. */
#define CONTROL_PROTOCOL_VERSION 1
/* Nodes sharing a store (Request.nodes): one its store has not seen for
 * longer than this counts as down. gadgetd refuses a move to it and
 * gadgetctl nodes shows it so: one number for both. */
#define CONTROL_NODE_DOWN_MS 10000

/* Error codes carried in error answers (both directions). */
enum gadget_error {
        GADGET_OK = 0,
        GADGET_EINVAL = 1,       /* a bad argument */
        GADGET_ENOMETHOD = 2,    /* no such method */
        GADGET_EFAILED = 3,      /* the method or operation failed */
        GADGET_EDENIED = 4,      /* refused by the gadget's policy */
        GADGET_EUNAVAILABLE = 5, /* the target is not running */
        GADGET_ETIMEOUT = 6,     /* no answer in time */
        GADGET_EBUSY = 7,        /* too many calls queued */
        GADGET_EPROTO = 8,       /* a protocol violation */
        GADGET_ELIMIT = 9,       /* a size or quota limit */
        GADGET_ENOTFOUND = 10,   /* no such key or item */
        GADGET_EGONE = 11,       /* the gadget ended during the call */
        GADGET_EINTERNAL = 12,   /* a failure inside gadgetd */
};

#ifdef __cplusplus
extern "C" {
#endif

/* A method name: 1 to GADGET_NAME_MAX of A-Z a-z 0-9 _ . -, not starting
 * with "." or "-" (a name is a path segment of the gateway's URLs, and
 * never "." or ".."). The one rule: gadgetd, libgadget and the workshop
 * page (gateway/workshop.js, the same rule as a pattern) check it. */
#define GADGET_NAME_MAX 64
int gadget_method_name_ok(const char *s);
/* A gadget's name (Name=, the hello's): 1 to 63 of a-z 0-9 _ -, starting
 * with a letter or digit; it ends up in paths, cgroup names, hostnames and
 * log lines. */
int gadget_name_ok(const char *s);
/* A signal `gadgetctl kill` may send a gadget's program: one the
 * sandbox's PID 1 passes on (SANDBOX_FORWARDED_SIGNALS, the real-time
 * ones) or SIGKILL (which ends PID 1, and with it the program). Never
 * STOP, CONT, CHLD and the like, which PID 1 would take for itself. */
int gadget_signal_ok(int sig);
/* A signal by name (TERM, SIGTERM, any case; RTMIN+N) or number: its
 * number if gadget_signal_ok, else -1. */
int gadget_signal_parse(const char *s);
/* Its name without "SIG" ("TERM", "RTMIN+3"), into buf (16 bytes). */
const char *gadget_signal_name(int sig, char *buf, size_t len);
/* An identifier (a binding's name, a gadget binding's Methods=): 1 to 64
 * of A-Z a-z 0-9 _, not starting with a digit. */
int gadget_identifier_ok(const char *s);
/* The operations of each binding type (gadget.proto's BindingCall.op), as
 * libgadget's helpers name them; gadgetd's side names them in each type's
 * table (supervisor/bindings/bind_TYPE.c: an operation's signature). */
#define GADGET_OP_KV_GET "get"
#define GADGET_OP_KV_PUT "put"
#define GADGET_OP_KV_DELETE "delete"
#define GADGET_OP_KV_LIST "list"
#define GADGET_OP_KV_CAS "cas"
#define GADGET_OP_KV_BATCH "batch"
#define GADGET_OP_GADGET_CALL "call"
#define GADGET_OP_HTTP_REQUEST "request"
#define GADGET_OP_VALUE_GET "get"   /* text and secret bindings */
#define GADGET_OP_ALARM_SET "set"
#define GADGET_OP_ALARM_LIST "list"
#define GADGET_OP_ALARM_CANCEL "cancel"

/* An error code's name ("no_method", the gateway's JSON "code") and what
 * it means ("no such method"); an unknown code reads as GADGET_EFAILED. */
const char *gadget_error_name(unsigned code);
const char *gadget_error_text(unsigned code);

#ifdef __cplusplus
}
#endif
