/* fuzz_policy: policy-file text through the parser and validator. */
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct policy *p = NULL;
        struct policy_errors errs = { 0 };
        if (policy_parse("fuzz.policy", (const char *)data, size, &p, &errs) == 0)
                policy_free(p);
        policy_errors_clear(&errs);
        return 0;
}
