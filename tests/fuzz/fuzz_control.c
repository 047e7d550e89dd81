/* fuzz_control: a control-socket request through the nesting check,
 * protobuf-c and gadgetd's request validator. */
#include <stddef.h>
#include <stdint.h>

#include "control.pb-c.h"
#include "validate.h"
#include "value.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char why[256];
        if (value_packed_check(&control__request__descriptor, data, size, why, sizeof why) < 0)
                return 0;
        Control__Request *q = control__request__unpack(NULL, size, data);
        if (!q)
                return 0;
        validate_control_request(q, why, sizeof why);
        control__request__free_unpacked(q, NULL);
        return 0;
}
