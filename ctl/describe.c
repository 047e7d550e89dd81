/* describe: a gadget's methods as signatures, or as JSON Schema for
 * clients in any language (`gadgetctl describe NAME [--json]`). */
#include "show.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "types.h"

/* {"name": N, "signature": ..., "params": SCHEMA, "result": SCHEMA}, or
 * {"name": N, "untyped": true}. NULL when out of memory or unreadable. */
static json_t *method_json(const char *name, const char *text)
{
        struct type_sig *sig;
        char err[160];
        if (!text[0])
                return json_pack("{s:s, s:b}", "name", name, "untyped", 1);
        if (types_sig_parse(text, &sig, err, sizeof err) < 0)
                return NULL; /* gadgetd sent a signature it had parsed: not to be */
        char *schema = types_json_schema(sig);
        types_sig_free(sig);
        json_t *o = schema ? json_loads(schema, 0, NULL) : NULL;
        free(schema);
        return o;
}

static int describe_json(FILE *f, const Control__GadgetStatus *s)
{
        json_t *methods = json_array();
        for (size_t i = 0; methods && i < s->n_methods; i++) {
                json_t *m = method_json(s->methods[i], i < s->n_signatures ? s->signatures[i] : "");
                if (!m || json_array_append_new(methods, m) < 0) {
                        json_decref(methods);
                        return -ENOMEM;
                }
        }
        return show_json(f, json_pack("{s:s, s:o}", "name", s->info->name, "methods", methods));
}

int show_describe(FILE *f, const Control__GadgetStatus *s, bool json)
{
        if (json)
                return describe_json(f, s);
        for (size_t i = 0; i < s->n_methods; i++) {
                const char *sig = i < s->n_signatures ? s->signatures[i] : "";
                if (sig[0])
                        fprintf(f, "%s\n", sig);
                else
                        fprintf(f, "%s (untyped)\n", s->methods[i]);
        }
        return ferror(f) ? -EIO : 0;
}
