/* parse: the value parsers of the policy format (sizes, durations, booleans,
 * identifiers, gadget names) and its shell-like word splitter. Pure code. */
#include "policy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ASCII classes by hand: the C library's depend on the locale. */
static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

static bool is_blank(char c)
{
        return c == ' ' || c == '\t';
}

/* Reads the leading decimal digits of s into *out; returns how many there
 * were (0 if none) or -EINVAL on overflow. No sign, no spaces, no base
 * prefixes: strtoull would accept all three. */
static int policy_digits(const char *s, uint64_t *out)
{
        uint64_t v = 0;
        int n = 0;

        for (; is_digit(s[n]); n++) {
                uint64_t d = (uint64_t)(s[n] - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return -EINVAL;
                v = v * 10 + d;
        }
        *out = v;
        return n;
}

/* Multiplies *v by m, failing on overflow. */
static int policy_scale(uint64_t *v, uint64_t m)
{
        if (m && *v > UINT64_MAX / m)
                return -EINVAL;
        *v *= m;
        return 0;
}

int policy_parse_size(const char *s, uint64_t *out)
{
        static const struct {
                char suffix;
                unsigned shift;
        } units[] = {
                { 'K', 10 }, { 'M', 20 }, { 'G', 30 }, { 'T', 40 },
        };
        size_t len = s ? strlen(s) : 0;
        uint64_t v;

        for (size_t i = 0; len >= 2 && i < sizeof(units) / sizeof(units[0]); i++) {
                if (s[len - 1] != units[i].suffix)
                        continue;
                int n = policy_digits(s, &v);
                if (n < 0 || (size_t)n != len - 1 || v > (UINT64_MAX >> units[i].shift))
                        return -EINVAL;
                *out = v << units[i].shift;
                return 0;
        }
        /* Plain bytes or infinity: read as a count, which also refuses
         * UINT64_MAX itself (it would read back as infinity). */
        return policy_parse_count(s, out);
}

int policy_parse_count(const char *s, uint64_t *out)
{
        uint64_t v;

        if (!s)
                return -EINVAL;
        if (strcmp(s, "infinity") == 0) {
                *out = POLICY_UNLIMITED;
                return 0;
        }
        int n = policy_digits(s, &v);
        if (n <= 0 || s[n] != '\0' || v == POLICY_UNLIMITED)
                return -EINVAL;
        *out = v;
        return 0;
}

int policy_parse_duration(const char *s, uint64_t *ms)
{
        static const struct {
                const char *unit;
                uint64_t ms;
        } units[] = {
                { "", 1000 }, { "ms", 1 }, { "s", 1000 }, { "min", 60000 }, { "h", 3600000 },
        };
        uint64_t v;

        if (!s)
                return -EINVAL;
        int n = policy_digits(s, &v);
        if (n <= 0)
                return -EINVAL;
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
                if (strcmp(s + n, units[i].unit) != 0)
                        continue;
                if (policy_scale(&v, units[i].ms) < 0)
                        return -EINVAL;
                *ms = v;
                return 0;
        }
        return -EINVAL;
}

int policy_parse_bool(const char *s, bool *out)
{
        static const char *const yes[] = { "yes", "true", "on", "1" };
        static const char *const no[] = { "no", "false", "off", "0" };

        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
                if (strcasecmp(s, yes[i]) == 0) {
                        *out = true;
                        return 0;
                }
                if (strcasecmp(s, no[i]) == 0) {
                        *out = false;
                        return 0;
                }
        }
        return -EINVAL;
}

void policy_strv_free(char **v)
{
        if (!v)
                return;
        for (char **p = v; *p; p++)
                free(*p);
        free(v);
}

int policy_strv_push(char ***v, size_t *n, char *s)
{
        char **nv = realloc(*v, (*n + 2) * sizeof(**v));
        if (!nv)
                return -ENOMEM;
        nv[*n] = s;
        nv[*n + 1] = NULL;
        *v = nv;
        (*n)++;
        return 0;
}

/* Copies one word starting at *pp to dst (which has room for it, a word is
 * never longer than its source), leaving *pp after it. */
static int policy_word(const char **pp, char *dst)
{
        const char *p = *pp;
        char quote = 0;

        for (; *p; p++) {
                if (quote == '\'') {
                        if (*p == '\'')
                                quote = 0;
                        else
                                *dst++ = *p;
                } else if (quote == '"') {
                        if (*p == '"')
                                quote = 0;
                        else if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
                                *dst++ = *++p;
                        else
                                *dst++ = *p;
                } else if (is_blank(*p)) {
                        break;
                } else if (*p == '"' || *p == '\'') {
                        quote = *p;
                } else if (*p == '\\') {
                        if (!p[1])
                                return -EINVAL;
                        *dst++ = *++p;
                } else {
                        *dst++ = *p;
                }
        }
        *dst = '\0';
        *pp = p;
        return quote ? -EINVAL : 0;
}

int policy_split_words(const char *s, char ***words, size_t *n_words)
{
        char **v = NULL, *w = NULL;
        size_t n = 0;
        int r;

        v = calloc(1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        for (const char *p = s;;) {
                while (is_blank(*p))
                        p++;
                if (!*p)
                        break;
                w = malloc(strlen(p) + 1);
                if (!w) {
                        r = -ENOMEM;
                        goto out;
                }
                r = policy_word(&p, w);
                if (r < 0)
                        goto out;
                r = policy_strv_push(&v, &n, w);
                if (r < 0)
                        goto out;
                w = NULL;
        }
        *words = v;
        *n_words = n;
        v = NULL;
        r = 0;
out:
        free(w);
        policy_strv_free(v);
        return r;
}
