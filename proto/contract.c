/* contract: the rules of proto/contract.h that code on both sides runs. */
#include "contract.h"

#include <stddef.h>
#include <string.h>

static const struct {
        const char *name; /* the gateway's JSON code */
        const char *text; /* what it means, for people */
} errors[] = {
        [GADGET_EINVAL] = { "invalid", "invalid argument" },
        [GADGET_ENOMETHOD] = { "no_method", "no such method" },
        [GADGET_EFAILED] = { "failed", "operation failed" },
        [GADGET_EDENIED] = { "denied", "permission denied" },
        [GADGET_EUNAVAILABLE] = { "unavailable", "the gadget is not running" },
        [GADGET_ETIMEOUT] = { "timeout", "no answer in time" },
        [GADGET_EBUSY] = { "busy", "the gadget is busy: too many calls queued" },
        [GADGET_EPROTO] = { "protocol", "protocol error" },
        [GADGET_ELIMIT] = { "limit", "a size or quota limit was reached" },
        [GADGET_ENOTFOUND] = { "not_found", "not found" },
        [GADGET_EGONE] = { "gone", "the gadget ended during the call" },
        [GADGET_EINTERNAL] = { "internal", "internal error in gadgetd" },
};

static int known(unsigned code)
{
        return code < sizeof errors / sizeof *errors && errors[code].name;
}

const char *gadget_error_name(unsigned code)
{
        return known(code) ? errors[code].name : errors[GADGET_EFAILED].name;
}

const char *gadget_error_text(unsigned code)
{
        return known(code) ? errors[code].text : errors[GADGET_EFAILED].text;
}

int gadget_method_name_ok(const char *s)
{
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > GADGET_NAME_MAX || *s == '.' || *s == '-')
                return 0;
        for (; *s; s++)
                if (!(*s == '_' || *s == '-' || *s == '.' || (*s >= '0' && *s <= '9') ||
                      (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
                        return 0;
        return 1;
}

static int lower_or_digit(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

int gadget_name_ok(const char *s)
{
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > 63 || !lower_or_digit(s[0]))
                return 0;
        for (; *s; s++)
                if (!(lower_or_digit(*s) || *s == '_' || *s == '-'))
                        return 0;
        return 1;
}

int gadget_identifier_ok(const char *s)
{
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > 64 || (s[0] >= '0' && s[0] <= '9'))
                return 0;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
                        return 0;
        return 1;
}
