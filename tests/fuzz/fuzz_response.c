/* fuzz_response: a control Response through the doors of its two readers,
 * one of them hostile: another node's answer on the node link
 * (cluster/nodelink_out.c: the values bounded on the raw bytes, then
 * protobuf-c, then the one answer validator) and gadgetctl's answer from
 * gadgetd (ctl/client.c: the nesting check first). */
#include <stddef.h>
#include <stdint.h>

#include "control.pb-c.h"
#include "validate.h"
#include "value.h"

/* NODELINK_FRAME_VALUES_MAX (cluster/nodelink.h, not built here). */
#define LINK_VALUES_MAX 131072

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char why[256];
        size_t values = 0;
        int link = value_packed_cost(&control__response__descriptor, data, size, LINK_VALUES_MAX, &values, why,
                                     sizeof why);
        int ctl = value_packed_check(&control__response__descriptor, data, size, why, sizeof why);
        if (link < 0 && ctl < 0)
                return 0;
        Control__Response *r = control__response__unpack(NULL, size, data);
        if (!r)
                return 0;
        validate_control_response(r, why, sizeof why);
        control__response__free_unpacked(r, NULL);
        return 0;
}
