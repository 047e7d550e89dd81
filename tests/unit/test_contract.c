/* Unit tests of proto/contract.c: the one method-name rule, and the names
 * and texts of the error codes. */
#include <string.h>

#include "contract.h"
#include "gadget.pb-c.h"
#include "tap.h"

int main(void)
{
        char longest[GADGET_NAME_MAX + 2];
        memset(longest, 'm', sizeof longest - 1);
        longest[sizeof longest - 1] = '\0';
        static const char *const ok[] = { "get", "increment", "a.b-c_d", "_x", "9lives", "v1.2" };
        static const char *const bad[] = { "", ".", "..", ".hidden", "-x", "a/b", "a b", "é", "get?" };
        for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
                CHECK(gadget_method_name_ok(ok[i]), "%s is a method name", ok[i]);
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
                CHECK(!gadget_method_name_ok(bad[i]), "\"%s\" is refused", bad[i]);
        CHECK(!gadget_method_name_ok(NULL), "NULL is refused");
        CHECK(!gadget_method_name_ok(longest), "%d characters are refused", GADGET_NAME_MAX + 1);
        longest[GADGET_NAME_MAX] = '\0';
        CHECK(gadget_method_name_ok(longest), "%d characters are a name", GADGET_NAME_MAX);

        CHECK_STR(gadget_error_name(GADGET_ENOMETHOD), "no_method", "the name of ENOMETHOD");
        CHECK_STR(gadget_error_text(GADGET_ETIMEOUT), "no answer in time", "the text of ETIMEOUT");
        CHECK_STR(gadget_error_name(0), "failed", "code 0 reads as failed");
        CHECK_STR(gadget_error_name(999), "failed", "an unknown code reads as failed");
        for (unsigned c = GADGET_EINVAL; c <= GADGET_EINTERNAL; c++)
                CHECK(*gadget_error_name(c) && *gadget_error_text(c), "code %u has a name and a text", c);
        /* gadget.proto's ErrorCode is the same table: each code's name there
         * is its name here in upper case, and it has no other value. */
        const ProtobufCEnumDescriptor *e = &gadget__error_code__descriptor;
        CHECK(e->n_values == GADGET_EINTERNAL + 1, "ErrorCode has %u values", e->n_values);
        for (unsigned c = GADGET_EINVAL; c <= GADGET_EINTERNAL; c++) {
                const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(e, (int)c);
                char lower[32] = "";
                for (size_t i = 0; v && v->name[i] && i < sizeof lower - 1; i++)
                        lower[i] = (char)(v->name[i] >= 'A' && v->name[i] <= 'Z' ? v->name[i] + 32 : v->name[i]);
                CHECK(v && strcmp(lower, gadget_error_name(c)) == 0, "ErrorCode %u is %s in gadget.proto: %s", c,
                      gadget_error_name(c), v ? v->name : "(none)");
        }
        return tap_done();
}
