/* fuzz_json: JSON text to a typed value and back, which must parse again
 * to the same rendering. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "value.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        Gadget__Value *v = NULL, *w = NULL;
        char err[256];
        if (json_to_value((const char *)data, size, &v, err, sizeof err) < 0)
                return 0;
        char *a = json_from_value(v);
        if (a) {
                if (json_to_value(a, strlen(a), &w, err, sizeof err) < 0)
                        abort(); /* what we write must read back */
                char *b = json_from_value(w);
                if (!b || strcmp(a, b) != 0)
                        abort(); /* and render the same */
                free(b);
        }
        free(a);
        value_free(v);
        value_free(w);
        return 0;
}
