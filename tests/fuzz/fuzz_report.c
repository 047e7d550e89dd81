/* fuzz_report: bytes from a sandbox's report pipe through the framing
 * module (at the report's size cap), protobuf-c and gadgetd's report
 * validator, as supervisor/spawn/spawn_report.c reads them. */
#include <stddef.h>
#include <stdint.h>

#include "sandbox.pb-c.h"
#include "sandbox_abi.h"
#include "validate.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct wire_reader r;
        const uint8_t *frame;
        size_t len;
        char why[256];

        wire_reader_init(&r, SANDBOX_REPORT_MAX);
        wire_reader_feed(&r, data, size);
        while (wire_reader_next(&r, &frame, &len) == 1) {
                Sandbox__Report *m = sandbox__report__unpack(NULL, len, frame);
                if (!m)
                        continue;
                validate_sandbox_report(m, why, sizeof why);
                sandbox__report__free_unpacked(m, NULL);
        }
        wire_reader_free(&r);
        return 0;
}
