/* keys: every key of [Gadget] and [Binding NAME], and the check of its value.
 * A bad value is reported as KEY="VALUE" with the reason; nothing is stored
 * for it. */
#include "keys.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

enum policy_kind {
        KIND_CUSTOM,
        KIND_BOOL,
        KIND_SIZE,
        KIND_COUNT,
        KIND_DURATION,
};

#define KEY_REPEAT   0x1u /* may be given again; the values accumulate */
#define KEY_INFINITY 0x2u /* accepts "infinity" (a duration stores it as 0) */
#define KEY_EMPTY_OK 0x4u /* may be empty */

#define T_KV     (1u << BINDING_KV)
#define T_GADGET (1u << BINDING_GADGET)
#define T_HTTP   (1u << BINDING_HTTP)
#define T_TEXT   (1u << BINDING_TEXT)
#define T_SECRET (1u << BINDING_SECRET)
#define T_ALL    (T_KV | T_GADGET | T_HTTP | T_TEXT | T_SECRET)

typedef int policy_set_fn(struct policy_ctx *c, void *obj, const char *key, const char *value);

/* One key: generic kinds store into the field at off of the policy or the
 * binding; custom ones call set. Generic numbers must be at least 1. */
struct policy_key {
        const char *name;
        enum policy_kind kind;
        unsigned flags;
        unsigned types;  /* binding keys: the types that take the key */
        size_t off;
        uint64_t max;    /* KIND_COUNT: largest value, 0 = no bound */
        policy_set_fn *set;
};

static const char *const policy_type_names[] = {
        [BINDING_KV] = "kv",
        [BINDING_GADGET] = "gadget",
        [BINDING_HTTP] = "http",
        [BINDING_TEXT] = "text",
        [BINDING_SECRET] = "secret",
};

const char *policy_binding_type_name(enum binding_type t)
{
        if ((size_t)t >= sizeof(policy_type_names) / sizeof(policy_type_names[0]))
                return "unknown";
        return policy_type_names[t];
}

const char *policy_restart_name(enum policy_restart r)
{
        switch (r) {
        case POLICY_RESTART_NO:
                return "no";
        case POLICY_RESTART_ON_FAILURE:
                return "on-failure";
        case POLICY_RESTART_ALWAYS:
                return "always";
        }
        return "unknown";
}

static bool policy_strv_has(char *const *v, size_t n, const char *s)
{
        for (size_t i = 0; i < n; i++) {
                if (strcmp(v[i], s) == 0)
                        return true;
        }
        return false;
}

/* Reads a number or boolean key into its field; -EINVAL if reported. */
static int policy_set_generic(struct policy_ctx *c, void *obj, const struct policy_key *k,
                              const char *value)
{
        void *field = (char *)obj + k->off;
        uint64_t v = 0;
        bool inf = (k->flags & KEY_INFINITY) != 0;
        int r = -EINVAL;

        switch (k->kind) {
        case KIND_BOOL:
                if (policy_parse_bool(value, field) < 0) {
                        policy_err(c, "%s=%s is not a boolean (yes or no)", k->name,
                                   POLICY_Q(value));
                        return -EINVAL;
                }
                return 0;
        case KIND_SIZE:
                r = policy_parse_size(value, &v);
                if (r < 0)
                        policy_err(c, "%s=%s is not a size (bytes, or a number with K, M, G or T%s)",
                                   k->name, POLICY_Q(value), inf ? ", or infinity" : "");
                break;
        case KIND_COUNT:
                r = policy_parse_count(value, &v);
                if (r < 0)
                        policy_err(c, "%s=%s is not a whole number%s", k->name, POLICY_Q(value),
                                   inf ? " or infinity" : "");
                break;
        case KIND_DURATION:
                if (inf && strcmp(value, "infinity") == 0) {
                        *(uint64_t *)field = 0;
                        return 0;
                }
                r = policy_parse_duration(value, &v);
                if (r < 0)
                        policy_err(c, "%s=%s is not a duration (a number with ms, s, min or h%s)",
                                   k->name, POLICY_Q(value), inf ? ", or infinity" : "");
                break;
        case KIND_CUSTOM:
                break;
        }
        if (r < 0)
                return r;
        if (v == POLICY_UNLIMITED && !inf) {
                policy_err(c, "%s=%s: a limit is required here, not infinity", k->name,
                           POLICY_Q(value));
                return -EINVAL;
        }
        if (v == 0) {
                policy_err(c, "%s=%s must be greater than 0", k->name, POLICY_Q(value));
                return -EINVAL;
        }
        if (k->max && v != POLICY_UNLIMITED && v > k->max) {
                policy_err(c, "%s=%s must be at most %llu", k->name, POLICY_Q(value),
                           (unsigned long long)k->max);
                return -EINVAL;
        }
        *(uint64_t *)field = v;
        return 0;
}

/* Normalises an absolute path into *out: repeated '/', "." components and a
 * trailing '/' go. ".." is refused so the path cannot climb out of what it
 * appears to name. Then stats it (following symlinks) into *st. */
static int policy_path(struct policy_ctx *c, const char *key, const char *value, char **out,
                       struct stat *st)
{
        size_t o = 0;
        char *n;

        if (value[0] != '/') {
                policy_err(c, "%s=%s is not an absolute path", key, POLICY_Q(value));
                return -EINVAL;
        }
        n = malloc(strlen(value) + 2);
        if (!n)
                return -ENOMEM;
        for (const char *p = value; *p;) {
                size_t len;

                while (*p == '/')
                        p++;
                len = strcspn(p, "/");
                if (len == 0 || (len == 1 && p[0] == '.')) {
                        p += len;
                        continue;
                }
                if (len == 2 && p[0] == '.' && p[1] == '.') {
                        policy_err(c, "%s=%s must not contain \"..\"", key, POLICY_Q(value));
                        free(n);
                        return -EINVAL;
                }
                n[o++] = '/';
                memcpy(n + o, p, len);
                o += len;
                p += len;
        }
        if (o == 0)
                n[o++] = '/';
        n[o] = '\0';
        if (stat(n, st) < 0) {
                policy_err(c, "%s=%s: %s", key, POLICY_Q(value), strerror(errno));
                free(n);
                return -EINVAL;
        }
        *out = n;
        return 0;
}

static int policy_set_name(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy *p = obj;

        if (!policy_name_valid(value)) {
                policy_err(c, "%s=%s is not a valid gadget name (a-z, 0-9, _ and -, "
                           "starting with a letter or digit, at most 63)", key, POLICY_Q(value));
                return -EINVAL;
        }
        p->name = strdup(value);
        return p->name ? 0 : -ENOMEM;
}

static int policy_set_exec(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy *p = obj;
        struct stat st;
        char *path;
        int r = policy_path(c, key, value, &path, &st);

        if (r < 0)
                return r;
        if (!S_ISREG(st.st_mode)) {
                policy_err(c, "%s=%s is not a regular file", key, POLICY_Q(value));
                free(path);
                return -EINVAL;
        }
        if (!(st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH))) {
                policy_err(c, "%s=%s is not executable", key, POLICY_Q(value));
                free(path);
                return -EINVAL;
        }
        p->exec = path;
        return 0;
}

/* Splits a value into words, reporting bad quoting. */
static int policy_words(struct policy_ctx *c, const char *key, const char *value, char ***w,
                        size_t *n)
{
        int r = policy_split_words(value, w, n);

        if (r == -EINVAL)
                policy_err(c, "%s=%s has an unterminated quote or a trailing backslash", key,
                           POLICY_Q(value));
        return r;
}

static int policy_set_arguments(struct policy_ctx *c, void *obj, const char *key,
                                const char *value)
{
        struct policy *p = obj;
        char **w;
        size_t n;
        int r = policy_words(c, key, value, &w, &n);

        if (r < 0)
                return r;
        if (n == 0) {
                policy_strv_free(w);
                return 0;
        }
        p->argv = w;
        p->argc = n;
        return 0;
}

/* KEY of a KEY=VALUE item: a portable environment variable name. */
static bool policy_env_name_valid(const char *s, size_t len)
{
        if (len == 0 || (s[0] >= '0' && s[0] <= '9'))
                return false;
        for (size_t i = 0; i < len; i++) {
                char ch = s[i];
                if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                      (ch >= '0' && ch <= '9') || ch == '_'))
                        return false;
        }
        return true;
}

static bool policy_env_has(const struct policy *p, const char *item, size_t len)
{
        for (size_t i = 0; i < p->n_env; i++) {
                if (strncmp(p->env[i], item, len + 1) == 0)
                        return true;
        }
        return false;
}

static int policy_set_environment(struct policy_ctx *c, void *obj, const char *key,
                                  const char *value)
{
        struct policy *p = obj;
        char **w;
        size_t n;
        int r = policy_words(c, key, value, &w, &n);

        if (r < 0)
                return r;
        for (size_t i = 0; i < n && r == 0; i++) {
                const char *eq = strchr(w[i], '=');
                size_t len = eq ? (size_t)(eq - w[i]) : 0;

                if (!eq || !policy_env_name_valid(w[i], len))
                        policy_err(c, "%s=%s: %s is not NAME=VALUE with NAME a variable name",
                                   key, POLICY_Q(value), POLICY_Q(w[i]));
                else if (policy_env_has(p, w[i], len))
                        policy_err(c, "%s=%s sets %.*s a second time", key, POLICY_Q(value),
                                   (int)len, w[i]);
                else if ((r = policy_strv_push(&p->env, &p->n_env, w[i])) == 0)
                        w[i] = NULL;
        }
        /* Items pushed were taken over (and set to NULL here): free the rest. */
        for (size_t i = 0; i < n; i++)
                free(w[i]);
        free(w);
        return r;
}

static int policy_set_ro_paths(struct policy_ctx *c, void *obj, const char *key,
                               const char *value)
{
        struct policy *p = obj;
        struct stat st;
        char **w, *path = NULL;
        size_t n;
        int r = policy_words(c, key, value, &w, &n);

        if (r < 0)
                return r;
        for (size_t i = 0; i < n && r != -ENOMEM; i++) {
                r = policy_path(c, key, w[i], &path, &st);
                if (r < 0)
                        continue;
                /* Why: the sandbox shows only what the policy lists; "/" would list everything. */
                if (strcmp(path, "/") == 0) {
                        policy_err(c, "%s=%s would expose the whole host file system", key,
                                   POLICY_Q(w[i]));
                        free(path);
                } else if (policy_strv_has(p->ro_paths, p->n_ro_paths, path)) {
                        policy_err(c, "%s=%s is listed twice", key, POLICY_Q(w[i]));
                        free(path);
                } else {
                        r = policy_strv_push(&p->ro_paths, &p->n_ro_paths, path);
                        if (r < 0)
                                free(path);
                }
        }
        policy_strv_free(w);
        return r == -ENOMEM ? r : 0;
}

static int policy_set_cpu_quota(struct policy_ctx *c, void *obj, const char *key,
                                const char *value)
{
        struct policy *p = obj;
        size_t len = strlen(value);
        uint64_t v = 0;
        char *num;
        int r = -EINVAL;

        if (len >= 2 && value[len - 1] == '%') {
                num = strndup(value, len - 1);
                if (!num)
                        return -ENOMEM;
                r = policy_parse_count(num, &v);
                free(num);
        }
        if (r < 0 || v == 0 || v > UINT32_MAX) {
                policy_err(c, "%s=%s is not a percentage above 0%% like 20%%", key,
                           POLICY_Q(value));
                return -EINVAL;
        }
        p->cpu_quota = (uint32_t)v;
        return 0;
}

static int policy_set_restart(struct policy_ctx *c, void *obj, const char *key,
                              const char *value)
{
        struct policy *p = obj;

        for (int i = POLICY_RESTART_NO; i <= POLICY_RESTART_ALWAYS; i++) {
                if (strcmp(value, policy_restart_name(i)) == 0) {
                        p->restart = i;
                        return 0;
                }
        }
        policy_err(c, "%s=%s is not one of no, on-failure, always", key, POLICY_Q(value));
        return -EINVAL;
}

static int policy_set_target(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy_binding *b = obj;

        if (!policy_name_valid(value)) {
                policy_err(c, "%s=%s is not a valid gadget name", key, POLICY_Q(value));
                return -EINVAL;
        }
        b->target = strdup(value);
        return b->target ? 0 : -ENOMEM;
}

static bool policy_http_method_valid(const char *m)
{
        static const char *const ok[] = { "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD" };

        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                if (strcmp(m, ok[i]) == 0)
                        return true;
        }
        return false;
}

/* Methods=: method names of the target gadget, or HTTP methods. */
static int policy_set_methods(struct policy_ctx *c, void *obj, const char *key,
                              const char *value)
{
        struct policy_binding *b = obj;
        bool http = b->type == BINDING_HTTP;
        char **w;
        size_t n;
        int r = policy_words(c, key, value, &w, &n);

        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                if (http ? !policy_http_method_valid(w[i]) : !policy_identifier_valid(w[i])) {
                        policy_err(c, "%s=%s: %s is not %s", key, POLICY_Q(value),
                                   POLICY_Q(w[i]), http ?
                                   "one of GET, POST, PUT, DELETE, PATCH, HEAD" :
                                   "a method name (letters, digits and _)");
                        r = -EINVAL;
                } else if (policy_strv_has(w, i, w[i])) {
                        policy_err(c, "%s=%s lists %s twice", key, POLICY_Q(value), w[i]);
                        r = -EINVAL;
                }
        }
        if (r < 0) {
                policy_strv_free(w);
                return r;
        }
        b->methods = w;
        b->n_methods = n;
        return 0;
}

/* The authority of an Allow= URL: a host name or [IPv6], then :PORT. */
static bool policy_authority_valid(const char *h, size_t len)
{
        size_t i = 0, port_at;

        if (len > 0 && h[0] == '[') {
                for (i = 1; i < len && h[i] != ']'; i++) {
                        if (!strchr("0123456789abcdefABCDEF:.", h[i]))
                                return false;
                }
                if (i == len || i == 1)
                        return false;
                i++;
        } else {
                for (; i < len && h[i] != ':'; i++) {
                        char ch = h[i];
                        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                              (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_'))
                                return false;
                }
                if (i == 0)
                        return false;
        }
        if (i == len)
                return true;
        if (h[i] != ':' || len - i < 2 || len - i > 6)
                return false;
        port_at = ++i;
        unsigned port = 0;
        for (; i < len; i++) {
                if (h[i] < '0' || h[i] > '9')
                        return false;
                port = port * 10 + (unsigned)(h[i] - '0');
        }
        return i > port_at && port >= 1 && port <= 65535;
}

/* Allow= is a prefix that request URLs are compared against, so it must pin
 * a scheme and a whole host. Why the '/' is added after a bare host: without
 * it, "http://example.com" would also admit "http://example.com.evil.net/". */
static int policy_set_allow(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy_binding *b = obj;
        size_t skip = 0, hlen;
        const char *why = NULL;
        char *url;

        if (strncmp(value, "http://", 7) == 0)
                skip = 7;
        else if (strncmp(value, "https://", 8) == 0)
                skip = 8;
        hlen = skip ? strcspn(value + skip, "/?#") : 0;
        for (const char *s = value; *s && !why; s++) {
                if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
                        why = "contains a blank, control or non-ASCII character";
        }
        if (!why && !skip)
                why = "does not start with http:// or https://";
        if (!why && memchr(value + skip, '@', hlen))
                why = "has user information ('@') before the host";
        if (!why && !policy_authority_valid(value + skip, hlen))
                why = "has no valid host[:port] after the scheme";
        if (!why && strchr(value, '#'))
                why = "has a fragment ('#')";
        if (!why && value[skip + hlen] == '?')
                why = "needs a '/' between the host and the query";
        if (why) {
                policy_err(c, "%s=%s %s", key, POLICY_Q(value), why);
                return -EINVAL;
        }
        if (asprintf(&url, "%s%s", value, value[skip + hlen] ? "" : "/") < 0)
                return -ENOMEM;
        if (policy_strv_has(b->allow, b->n_allow, url)) {
                policy_err(c, "%s=%s is listed twice", key, POLICY_Q(value));
                free(url);
                return -EINVAL;
        }
        if (policy_strv_push(&b->allow, &b->n_allow, url) < 0) {
                free(url);
                return -ENOMEM;
        }
        return 0;
}

static int policy_set_value(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy_binding *b = obj;

        (void)c;
        (void)key;
        b->value = strdup(value);
        return b->value ? 0 : -ENOMEM;
}

/* Why a regular file only: gadgetd reads it, and a FIFO or device could
 * block it or never end. */
static int policy_set_file(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy_binding *b = obj;
        struct stat st;
        char *path;
        int r = policy_path(c, key, value, &path, &st);

        if (r < 0)
                return r;
        if (!S_ISREG(st.st_mode)) {
                policy_err(c, "%s=%s is not a regular file", key, POLICY_Q(value));
                free(path);
                return -EINVAL;
        }
        b->file = path;
        return 0;
}

#define G(field) offsetof(struct policy, field)
#define B(field) offsetof(struct policy_binding, field)

static const struct policy_key policy_gadget_keys[POLICY_N_GADGET_KEYS] = {
        { "Name", KIND_CUSTOM, 0, 0, 0, 0, policy_set_name },
        { "Exec", KIND_CUSTOM, 0, 0, 0, 0, policy_set_exec },
        { "Arguments", KIND_CUSTOM, KEY_EMPTY_OK, 0, 0, 0, policy_set_arguments },
        { "Environment", KIND_CUSTOM, KEY_REPEAT, 0, 0, 0, policy_set_environment },
        { "ReadOnlyPaths", KIND_CUSTOM, KEY_REPEAT, 0, 0, 0, policy_set_ro_paths },
        { "SystemLibraries", KIND_BOOL, 0, 0, G(system_libraries), 0, NULL },
        { "Loopback", KIND_BOOL, 0, 0, G(loopback), 0, NULL },
        /* Why no infinity: tmpfs takes size=0 as no limit at all. */
        { "TmpSize", KIND_SIZE, 0, 0, G(tmp_size), 0, NULL },
        { "MemoryMax", KIND_SIZE, KEY_INFINITY, 0, G(memory_max), 0, NULL },
        { "TasksMax", KIND_COUNT, KEY_INFINITY, 0, G(tasks_max), 0, NULL },
        { "CPUQuota", KIND_CUSTOM, 0, 0, 0, 0, policy_set_cpu_quota },
        { "LimitNOFILE", KIND_COUNT, 0, 0, G(limit_nofile), 1048576, NULL },
        /* Why no infinity: a call that never times out would hold its caller forever. */
        { "CallTimeout", KIND_DURATION, 0, 0, G(call_timeout_ms), 0, NULL },
        { "RuntimeMax", KIND_DURATION, KEY_INFINITY, 0, G(runtime_max_ms), 0, NULL },
        { "Restart", KIND_CUSTOM, 0, 0, 0, 0, policy_set_restart },
};

static const struct policy_key policy_type_key = { "Type", KIND_CUSTOM, 0, T_ALL, 0, 0, NULL };

static const struct policy_key policy_binding_keys[] = {
        { "MaxValueSize", KIND_SIZE, 0, T_KV, B(max_value_size), 0, NULL },
        { "MaxKeys", KIND_COUNT, KEY_INFINITY, T_KV, B(max_keys), 0, NULL },
        { "MaxBytes", KIND_SIZE, KEY_INFINITY, T_KV, B(max_bytes), 0, NULL },
        { "Target", KIND_CUSTOM, 0, T_GADGET, 0, 0, policy_set_target },
        { "Methods", KIND_CUSTOM, 0, T_GADGET | T_HTTP, 0, 0, policy_set_methods },
        { "Allow", KIND_CUSTOM, KEY_REPEAT, T_HTTP, 0, 0, policy_set_allow },
        { "Timeout", KIND_DURATION, 0, T_HTTP, B(timeout_ms), 0, NULL },
        { "MaxResponseSize", KIND_SIZE, 0, T_HTTP, B(max_response), 0, NULL },
        { "MaxRequestSize", KIND_SIZE, 0, T_HTTP, B(max_request), 0, NULL },
        { "Value", KIND_CUSTOM, KEY_EMPTY_OK, T_TEXT, 0, 0, policy_set_value },
        { "File", KIND_CUSTOM, 0, T_SECRET, 0, 0, policy_set_file },
};

/* Finds key in table, or reports it as unknown in the section named where. */
static const struct policy_key *policy_key_find(struct policy_ctx *c, const struct policy_key *t,
                                                size_t n, const char *key, const char *where)
{
        for (size_t i = 0; i < n; i++) {
                if (strcmp(t[i].name, key) == 0)
                        return &t[i];
        }
        for (size_t i = 0; i < n; i++) {
                if (strcasecmp(t[i].name, key) == 0) {
                        policy_err(c, "unknown key %s in %s (keys are case-sensitive: %s)",
                                   POLICY_Q(key), where, t[i].name);
                        return NULL;
                }
        }
        policy_err(c, "unknown key %s in %s", POLICY_Q(key), where);
        return NULL;
}

/* Stores one value; reports -ENOMEM to the context. */
static void policy_apply(struct policy_ctx *c, void *obj, const struct policy_key *k,
                         const char *value)
{
        int r;

        if (k->set)
                r = k->set(c, obj, k->name, value);
        else
                r = policy_set_generic(c, obj, k, value);
        if (r == -ENOMEM)
                policy_oom(c);
}

void policy_gadget_key(struct policy_ctx *c, const char *key, const char *value)
{
        const struct policy_key *k = policy_key_find(c, policy_gadget_keys, POLICY_N_GADGET_KEYS,
                                                     key, "[Gadget]");
        if (!k)
                return;
        size_t i = (size_t)(k - policy_gadget_keys);
        if (c->gadget_seen[i] && !(k->flags & KEY_REPEAT)) {
                policy_err(c, "%s= given twice (first on line %u)", key, c->gadget_seen[i]);
                return;
        }
        c->gadget_seen[i] = c->line;
        if (!value[0] && !(k->flags & KEY_EMPTY_OK)) {
                policy_err(c, "%s= needs a value", key);
                return;
        }
        policy_apply(c, c->p, k, value);
}

void policy_binding_key(struct policy_ctx *c, const char *key, const char *value)
{
        struct policy_binding *b = &c->p->bindings[c->p->n_bindings - 1];
        char where[80];
        const struct policy_key *k = &policy_type_key;

        snprintf(where, sizeof(where), "[Binding %s]", b->name);
        if (strcmp(key, "Type") != 0) {
                k = policy_key_find(c, policy_binding_keys,
                                    sizeof(policy_binding_keys) / sizeof(policy_binding_keys[0]),
                                    key, where);
                if (!k)
                        return;
        }
        for (size_t i = 0; i < c->n_pend && !(k->flags & KEY_REPEAT); i++) {
                if (c->pend[i].key == k) {
                        policy_err(c, "%s= given twice (first on line %u)", key, c->pend[i].line);
                        return;
                }
        }
        if (!value[0] && !(k->flags & KEY_EMPTY_OK)) {
                policy_err(c, "%s= needs a value", key);
                return;
        }
        struct policy_pending *np = realloc(c->pend, (c->n_pend + 1) * sizeof(*np));
        if (!np) {
                policy_oom(c);
                return;
        }
        c->pend = np;
        np[c->n_pend] = (struct policy_pending){ k, strdup(value), c->line };
        if (!np[c->n_pend].value) {
                policy_oom(c);
                return;
        }
        c->n_pend++;
}

void policy_pending_clear(struct policy_ctx *c)
{
        for (size_t i = 0; i < c->n_pend; i++)
                free(c->pend[i].value);
        free(c->pend);
        c->pend = NULL;
        c->n_pend = 0;
}

/* The keys each type cannot do without. */
static const struct {
        enum binding_type type;
        const char *key;
} policy_required[] = {
        { BINDING_GADGET, "Target" },
        { BINDING_HTTP, "Allow" },
        { BINDING_TEXT, "Value" },
        { BINDING_SECRET, "File" },
};

/* Whether the binding being read gave key at all, even with a bad value. */
static bool policy_pending_has(const struct policy_ctx *c, const char *key)
{
        for (size_t i = 0; i < c->n_pend; i++) {
                if (strcmp(c->pend[i].key->name, key) == 0)
                        return true;
        }
        return false;
}

/* Reads Type=; false if it is missing or bad (and reported). */
static bool policy_binding_type(struct policy_ctx *c, struct policy_binding *b)
{
        for (size_t i = 0; i < c->n_pend; i++) {
                if (c->pend[i].key != &policy_type_key)
                        continue;
                c->line = c->pend[i].line;
                for (size_t t = 0; t < sizeof(policy_type_names) / sizeof(policy_type_names[0]); t++) {
                        if (strcmp(c->pend[i].value, policy_type_names[t]) == 0) {
                                b->type = (enum binding_type)t;
                                return true;
                        }
                }
                policy_err(c, "Type=%s is not one of kv, gadget, http, text, secret",
                           POLICY_Q(c->pend[i].value));
                return false;
        }
        c->line = b->line;
        policy_err(c, "binding %s has no Type= (kv, gadget, http, text or secret)", b->name);
        return false;
}

void policy_binding_end(struct policy_ctx *c)
{
        struct policy_binding *b = &c->p->bindings[c->p->n_bindings - 1];
        unsigned line = c->line;

        if (!policy_binding_type(c, b))
                goto out;
        for (size_t i = 0; i < c->n_pend && !c->oom; i++) {
                const struct policy_key *k = c->pend[i].key;

                c->line = c->pend[i].line;
                if (k == &policy_type_key)
                        continue;
                if (!(k->types & (1u << b->type)))
                        policy_err(c, "key %s is not valid for a binding of type %s", k->name,
                                   policy_type_names[b->type]);
                else
                        policy_apply(c, b, k, c->pend[i].value);
        }
        c->line = b->line;
        for (size_t i = 0; i < sizeof(policy_required) / sizeof(policy_required[0]); i++) {
                if (policy_required[i].type == b->type && !policy_pending_has(c, policy_required[i].key))
                        policy_err(c, "binding %s of type %s has no %s=", b->name,
                                   policy_type_names[b->type], policy_required[i].key);
        }
        if (b->type == BINDING_HTTP && !policy_pending_has(c, "Methods")) {
                char *get = strdup("GET");
                if (!get || policy_strv_push(&b->methods, &b->n_methods, get) < 0) {
                        free(get);
                        policy_oom(c);
                }
        }
out:
        policy_pending_clear(c);
        c->line = line;
}
