/* answer: the control protocol's answers (control.proto's Response), built
 * here for every sender: gadgetd's control socket and its node link. Nothing is allocated or copied: the answer and what it
 * points at (strings, values, lists) are the caller's until it is sent. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "control.pb-c.h"

/* Room for one answer and the small message it carries. */
struct answer {
        Control__Response r;
        Gadget__Error error;
        Control__Done done;
};

/* Each fills a for request id and returns &a->r, ready to send. */
Control__Response *answer_error(struct answer *a, uint64_t id, int code, const char *message);
Control__Response *answer_done(struct answer *a, uint64_t id, const char *message);
/* An answer of the kind whose message body is (a list, a status, a value,
 * ...: the member of Response's oneof resp of body's type); NULL if none
 * is of that type. */
Control__Response *answer_of(struct answer *a, uint64_t id, const ProtobufCMessage *body);
/* The n items of a list answer (a repeated message field): n messages of
 * type d, each initialized, and the array of pointers to them the field
 * takes, in one block; the array, to free(), or NULL (out of memory). */
void *answer_items(const ProtobufCMessageDescriptor *d, size_t n);
