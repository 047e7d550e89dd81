/* fuzz_types: a method signature (the input up to its first NUL) through
 * the type language's parser; a signature that parses must print, parse
 * back to the same print, and give one JSON object as JSON Schema. The
 * rest of the input is a packed Value, checked (as gadgetd would, after
 * value_check) as arguments and as result, against the signature and its
 * reprint, which must agree. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gadget.pb-c.h"
#include "types.h"
#include "value.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Checks v against both signatures, as args and as result: same verdicts,
 * same messages. */
static void check_both(const struct type_sig *a, const struct type_sig *b, const Gadget__Value *v)
{
        char ea[512], eb[512];

        int ra = types_check_args(a, v, ea, sizeof ea), rb = types_check_args(b, v, eb, sizeof eb);
        if (ra != rb || (ra < 0 && (ea[0] == '\0' || strcmp(ea, eb) != 0)))
                abort();
        ra = types_check_result(a, v, ea, sizeof ea);
        rb = types_check_result(b, v, eb, sizeof eb);
        if (ra != rb || (ra < 0 && (ea[0] == '\0' || strcmp(ea, eb) != 0)))
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static char a[TYPES_MAX_TEXT + 1], b[TYPES_MAX_TEXT + 1];
        struct type_sig *sig = NULL, *again = NULL;
        const uint8_t *nul = memchr(data, 0, size);
        size_t tlen = nul ? (size_t)(nul - data) : size;
        char err[256], *text = malloc(tlen + 1);

        if (!text)
                return 0;
        memcpy(text, data, tlen);
        text[tlen] = '\0';
        if (types_sig_parse(text, &sig, err, sizeof err) < 0) {
                if (err[0] == '\0')
                        abort(); /* every refusal says why */
                goto out;
        }
        if (types_sig_print(sig, a, sizeof a) > TYPES_MAX_TEXT)
                abort(); /* the canonical text stays within the limit */
        if (types_sig_parse(a, &again, err, sizeof err) < 0)
                abort(); /* what we print must parse */
        types_sig_print(again, b, sizeof b);
        if (strcmp(a, b) != 0)
                abort(); /* and print the same */
        char *schema = types_json_schema(sig);
        json_t *j = schema ? json_loads(schema, 0, NULL) : NULL;
        if (schema && !json_is_object(j))
                abort(); /* the schema is one JSON object */
        json_decref(j);
        free(schema);
        if (nul) {
                const uint8_t *rest = nul + 1;
                size_t rlen = size - tlen - 1;
                if (value_packed_check(&gadget__value__descriptor, rest, rlen, err, sizeof err) < 0)
                        goto out;
                Gadget__Value *v = gadget__value__unpack(NULL, rlen, rest);
                if (v && value_check(v, VALUE_MAX_DEPTH, err, sizeof err) == 0)
                        check_both(sig, again, v);
                if (v)
                        gadget__value__free_unpacked(v, NULL);
        }
out:
        types_sig_free(sig);
        types_sig_free(again);
        free(text);
        return 0;
}
