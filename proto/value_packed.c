/* value_packed: a packed message's cost read from its bytes, before
 * protobuf-c unpacks it: nesting and values counted in one linear walk,
 * never the allocations of unpacking. Pure code, no syscalls. */
#include "value.h"
#include "value_int.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>

/* Most nested messages a packed message may hold: a value of VALUE_MAX_DEPTH
 * nests three messages per map level (Value, Map, MapEntry), plus room for
 * the envelope (WorkerMsg, CallResult, ...). */
#define VALUE_PACKED_MAX_NESTING (3u * VALUE_MAX_DEPTH + 16u)

/* Reads a varint of at most max bytes (protobuf-c reads 5 for field
 * headers and lengths, 10 for values): 0 or -EINVAL. */
static int packed_varint(const uint8_t *p, size_t len, size_t *pos, unsigned max, uint64_t *out)
{
        uint64_t v = 0;
        for (unsigned i = 0; i < max && *pos + i < len; i++) {
                v |= (uint64_t)(p[*pos + i] & 0x7f) << (7 * i);
                if (!(p[*pos + i] & 0x80)) {
                        *pos += i + 1;
                        *out = v;
                        return 0;
                }
        }
        return -EINVAL;
}

/* Nested messages seen by one packed walk, and the most allowed. */
struct packed_count {
        size_t n, max;
};

/* Walks one packed message of type desc, descending into sub-messages while
 * levels remain. */
static int packed_walk(const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t len,
                       unsigned levels, struct packed_count *pc, char *why, size_t whylen)
{
        size_t pos = 0;

        while (pos < len) {
                uint64_t key, n;
                size_t skip;
                if (packed_varint(p, len, &pos, 5, &key) < 0)
                        return value_fail(why, whylen, "bad field header in %s", desc->name);
                switch (key & 7) {
                case PROTOBUF_C_WIRE_TYPE_VARINT:
                        if (packed_varint(p, len, &pos, 10, &n) < 0)
                                return value_fail(why, whylen, "bad varint in %s", desc->name);
                        skip = 0;
                        break;
                case PROTOBUF_C_WIRE_TYPE_64BIT:
                        skip = 8;
                        break;
                case PROTOBUF_C_WIRE_TYPE_32BIT:
                        skip = 4;
                        break;
                case PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED: {
                        if (packed_varint(p, len, &pos, 5, &n) < 0)
                                return value_fail(why, whylen, "bad length in %s", desc->name);
                        /* protobuf-c keeps 32 bits of lengths and field
                         * numbers; do the same so both see the same fields. */
                        skip = (uint32_t)n;
                        if (skip > len - pos)
                                break;
                        const ProtobufCFieldDescriptor *f =
                                protobuf_c_message_descriptor_get_field(desc, (uint32_t)(key >> 3));
                        if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                                if (levels == 0)
                                        return value_fail(why, whylen, "messages nested deeper than %u",
                                                    VALUE_PACKED_MAX_NESTING);
                                /* Each nested message costs protobuf-c an
                                 * allocation and a walk: counted before it is
                                 * paid, so a frame over the bound costs no more. */
                                if (++pc->n > pc->max)
                                        return value_fail(why, whylen, "more than %zu values", pc->max);
                                int e = packed_walk(f->descriptor, p + pos, skip, levels - 1, pc, why,
                                                    whylen);
                                if (e < 0)
                                        return e;
                        }
                        break;
                }
                default:
                        return value_fail(why, whylen, "unsupported wire type %u in %s", (unsigned)(key & 7), desc->name);
                }
                if (skip > len - pos)
                        return value_fail(why, whylen, "field runs past the end of %s", desc->name);
                pos += skip;
        }
        return 0;
}

/* Checks the packed bytes of a desc message before
 * protobuf_c_message_unpack, which recurses once per nested message with
 * no limit (a few dozen KiB of nested Values overflow the stack): refuses
 * nesting deeper than any valid value needs and framing protobuf-c would
 * misread. Returns 0 or -EINVAL with a reason in why. */
int value_packed_check(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                       char *why, size_t whylen)
{
        if (!desc || (!data && len > 0))
                return value_fail(why, whylen, "nothing to check");
        struct packed_count pc = { .max = SIZE_MAX };
        /* Why this is safe: this walk recurses at most
         * VALUE_PACKED_MAX_NESTING times and reads only inside data. */
        return packed_walk(desc, data, len, VALUE_PACKED_MAX_NESTING - 1, &pc, why, whylen);
}

int value_packed_cost(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                      size_t max_values, size_t *values, char *why, size_t whylen)
{
        if (!desc || (!data && len > 0))
                return value_fail(why, whylen, "nothing to check");
        struct packed_count pc = { .max = max_values };
        /* Why this is safe: as value_packed_check, and the walk stops at the
         * first nested message past max_values. */
        int e = packed_walk(desc, data, len, VALUE_PACKED_MAX_NESTING - 1, &pc, why, whylen);
        if (e < 0)
                return e;
        *values = pc.n;
        return 0;
}
