/* contract: the rules of proto/contract.h that code on both sides runs. */
#include "contract.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sandbox_abi.h"

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

/* The signals by name; the real-time ones are RTMIN+N. */
static const struct {
        const char *name;
        int sig;
} signals[] = {
        { "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
        { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "ALRM", SIGALRM }, { "TERM", SIGTERM },
        { "STKFLT", SIGSTKFLT }, { "XCPU", SIGXCPU }, { "XFSZ", SIGXFSZ }, { "VTALRM", SIGVTALRM },
        { "PROF", SIGPROF }, { "IO", SIGIO }, { "PWR", SIGPWR },
};

int gadget_signal_ok(int sig)
{
        static const int forwarded[] = { SANDBOX_FORWARDED_SIGNALS };
        if (sig == SIGKILL || (sig >= SIGRTMIN && sig <= SIGRTMAX))
                return 1;
        for (size_t i = 0; i < sizeof forwarded / sizeof *forwarded; i++)
                if (forwarded[i] == sig)
                        return 1;
        return 0;
}

int gadget_signal_parse(const char *s)
{
        char *end;
        if (!s || !*s)
                return -1;
        if (*s >= '0' && *s <= '9') {
                long n = strtol(s, &end, 10);
                return !*end && n > 0 && n < 1000 && gadget_signal_ok((int)n) ? (int)n : -1;
        }
        if (strncasecmp(s, "SIG", 3) == 0)
                s += 3;
        if (strncasecmp(s, "RTMIN+", 6) == 0 && s[6] >= '0' && s[6] <= '9') {
                long n = strtol(s + 6, &end, 10);
                return !*end && n <= SIGRTMAX - SIGRTMIN ? SIGRTMIN + (int)n : -1;
        }
        for (size_t i = 0; i < sizeof signals / sizeof *signals; i++)
                if (strcasecmp(s, signals[i].name) == 0)
                        return signals[i].sig;
        return -1;
}

const char *gadget_signal_name(int sig, char *buf, size_t len)
{
        for (size_t i = 0; i < sizeof signals / sizeof *signals; i++)
                if (signals[i].sig == sig) {
                        snprintf(buf, len, "%s", signals[i].name);
                        return buf;
                }
        if (sig >= SIGRTMIN && sig <= SIGRTMAX)
                snprintf(buf, len, "RTMIN+%d", sig - SIGRTMIN);
        else
                snprintf(buf, len, "%d", sig);
        return buf;
}
