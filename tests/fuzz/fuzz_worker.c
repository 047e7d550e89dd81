/* fuzz_worker: bytes from a worker socket through the framing module, the
 * nesting check, protobuf-c and gadgetd's worker-message validator. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gadget.pb-c.h"
#include "validate.h"
#include "value.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct wire_reader r;
        const uint8_t *frame;
        size_t len;
        char why[256];

        wire_reader_init(&r, 1u << 16);
        wire_reader_feed(&r, data, size);
        while (wire_reader_next(&r, &frame, &len) == 1) {
                if (value_packed_check(&gadget__worker_msg__descriptor, frame, len, why, sizeof why) < 0)
                        continue;
                Gadget__WorkerMsg *m = gadget__worker_msg__unpack(NULL, len, frame);
                if (!m)
                        continue;
                validate_worker_msg(m, "fuzz", why, sizeof why);
                gadget__worker_msg__free_unpacked(m, NULL);
        }
        wire_reader_free(&r);
        return 0;
}
