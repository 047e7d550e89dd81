/* fuzz_bundle: a gadget bundle's bytes (what gadgetctl install hands
 * gadgetd) through the parser, the signature check and the policy
 * template's rewrite. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "bundle.h"
#include "system/releases.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct bundle b;
        char why[600], *text = NULL;
        if (bundle_parse(data, size, &b, why, sizeof why) < 0)
                return 0;
        (void)bundle_verify(&b);
        if (releases_policy_text(&b, "/var/lib/gadgetd/releases/x/1/files", &text, why, sizeof why) == 0)
                free(text);
        bundle_clear(&b);
        return 0;
}
