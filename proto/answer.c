/* answer: the control protocol's answers (answer.h). */
#include "answer.h"

#include <stddef.h>
#include <stdlib.h>

/* a's Response for id, its oneof set to kind. */
static Control__Response *start(struct answer *a, uint64_t id, Control__Response__RespCase kind)
{
        *a = (struct answer){ .r = CONTROL__RESPONSE__INIT, .error = GADGET__ERROR__INIT,
                              .done = CONTROL__DONE__INIT };
        a->r.id = id;
        a->r.resp_case = kind;
        return &a->r;
}

Control__Response *answer_error(struct answer *a, uint64_t id, int code, const char *message)
{
        start(a, id, CONTROL__RESPONSE__RESP_ERROR);
        a->error.code = (uint32_t)code;
        a->error.message = (char *)message;
        a->r.error = &a->error;
        return &a->r;
}

Control__Response *answer_done(struct answer *a, uint64_t id, const char *message)
{
        start(a, id, CONTROL__RESPONSE__RESP_DONE);
        a->done.message = (char *)message;
        a->r.done = &a->done;
        return &a->r;
}

Control__Response *answer_of(struct answer *a, uint64_t id, const ProtobufCMessage *body)
{
        const ProtobufCMessageDescriptor *d = &control__response__descriptor;

        for (unsigned i = 0; i < d->n_fields; i++) {
                const ProtobufCFieldDescriptor *f = &d->fields[i];
                /* Why this is safe: the member at f->offset is a pointer to
                 * a message of type f->descriptor, which body is. */
                if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && f->descriptor == body->descriptor) {
                        *(const ProtobufCMessage **)((char *)start(a, id, (Control__Response__RespCase)f->id) +
                                                     f->offset) = body;
                        return &a->r;
                }
        }
        return NULL;
}

void *answer_items(const ProtobufCMessageDescriptor *d, size_t n)
{
        /* The n + 1 pointers (the last NULL), then the messages, each at a
         * multiple of the strictest alignment. */
        const size_t align = _Alignof(max_align_t);
        size_t size = (d->sizeof_message + align - 1) / align * align;

        if (n >= (SIZE_MAX / 2 - align) / (size + sizeof(void *)))
                return NULL;
        size_t head = ((n + 1) * sizeof(void *) + align - 1) / align * align;
        void **items = calloc(1, head + n * size);

        if (!items)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                items[i] = (char *)items + head + i * size;
                protobuf_c_message_init(d, items[i]);
        }
        return items;
}
