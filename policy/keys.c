/* keys: the keys of [Gadget] and the checks shared by every key. A bad
 * value is reported as KEY="VALUE" with the reason; nothing is stored for it. */
#include "keys.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "contract.h"

static const char *const policy_restart_names[] = {
        [POLICY_RESTART_NO] = "no",
        [POLICY_RESTART_ON_FAILURE] = "on-failure",
        [POLICY_RESTART_ALWAYS] = "always",
};

static const char *const policy_start_names[] = {
        [POLICY_START_ALWAYS] = "always",
        [POLICY_START_ON_DEMAND] = "on-demand",
};

static const char *const policy_netns_names[] = {
        [POLICY_NETNS_PRIVATE] = "private",
        [POLICY_NETNS_SHARED] = "shared",
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

const char *policy_restart_name(enum policy_restart r)
{
        return (size_t)r < N_OF(policy_restart_names) ? policy_restart_names[r] : "unknown";
}

const char *policy_start_name(enum policy_start s)
{
        return (size_t)s < N_OF(policy_start_names) ? policy_start_names[s] : "unknown";
}

const char *policy_netns_name(enum policy_netns n)
{
        return (size_t)n < N_OF(policy_netns_names) ? policy_netns_names[n] : "unknown";
}

int policy_enum(struct policy_ctx *c, const char *key, const char *value, const char *const *names,
                size_t n)
{
        char list[256] = "";
        size_t len = 0;

        for (size_t i = 0; i < n; i++) {
                if (strcmp(value, names[i]) == 0)
                        return (int)i;
        }
        for (size_t i = 0; i < n && len < sizeof(list); i++)
                len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "", names[i]);
        policy_err(c, "%s=%s is not one of %s", key, POLICY_Q(value), list);
        return -EINVAL;
}

bool policy_strv_has(char *const *v, size_t n, const char *s)
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
                        policy_err(c, "%s=%s is not a size (bytes, or a number with "
                                   "K, M, G or T%s)", k->name, POLICY_Q(value),
                                   inf ? ", or infinity" : "");
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
        case KIND_TEXT:
        case KIND_WORDS:
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
int policy_path(struct policy_ctx *c, const char *key, const char *value, char **out,
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

/* Splits a value into words, reporting bad quoting. */
int policy_words(struct policy_ctx *c, const char *key, const char *value, char ***w,
                 size_t *n)
{
        int r = policy_split_words(value, w, n);

        if (r == -EINVAL)
                policy_err(c, "%s=%s has an unterminated quote or a trailing backslash", key,
                           POLICY_Q(value));
        return r;
}

/* An HTTP method an http binding may name. */
static bool policy_http_method_valid(const char *m)
{
        static const char *const ok[] = { "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD" };

        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                if (strcmp(m, ok[i]) == 0)
                        return true;
        }
        return false;
}

/* A gadget method's name (gadget_identifier_ok, as a policy_word_ok_fn). */
static bool policy_method_name_valid(const char *m)
{
        return gadget_identifier_ok(m);
}

/* As Node= is checked: 1 to 63 of a-z 0-9 _ -. */
static bool policy_node_name_valid(const char *m)
{
        size_t len = strlen(m);
        return len >= 1 && len <= 63 && strspn(m, "abcdefghijklmnopqrstuvwxyz0123456789_-") == len;
}

int policy_checked_words(struct policy_ctx *c, const char *key, const char *value, policy_word_ok_fn *ok,
                         const char *what, char ***out, size_t *n_out)
{
        char **w;
        size_t n;
        int r = policy_words(c, key, value, &w, &n);

        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                if (!ok(w[i])) {
                        policy_err(c, "%s=%s: %s is not %s", key, POLICY_Q(value), POLICY_Q(w[i]), what);
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
        *out = w;
        *n_out = n;
        return 0;
}

int policy_method_words(struct policy_ctx *c, const char *key, const char *value, bool http, char ***out,
                        size_t *n_out)
{
        if (http)
                return policy_checked_words(c, key, value, policy_http_method_valid,
                                            "one of GET, POST, PUT, DELETE, PATCH, HEAD", out, n_out);
        return policy_checked_words(c, key, value, policy_method_name_valid, "a method name (letters, digits and _)",
                                    out, n_out);
}

/* Finds key in table, or reports it as unknown in the section named where. */
const struct policy_key *policy_key_find(struct policy_ctx *c, const struct policy_key *t,
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
void policy_apply(struct policy_ctx *c, void *obj, const struct policy_key *k,
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

int policy_regular_file(struct policy_ctx *c, const char *key, const char *value, char **out,
                        struct stat *st)
{
        char *path;
        int r = policy_path(c, key, value, &path, st);

        if (r < 0)
                return r;
        if (!S_ISREG(st->st_mode)) {
                policy_err(c, "%s=%s is not a regular file", key, POLICY_Q(value));
                free(path);
                return -EINVAL;
        }
        *out = path;
        return 0;
}

static int policy_set_name(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy *p = obj;

        if (!gadget_name_ok(value)) {
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
        int r = policy_regular_file(c, key, value, &path, &st);

        if (r < 0)
                return r;
        if (!(st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH))) {
                policy_err(c, "%s=%s is not executable", key, POLICY_Q(value));
                free(path);
                return -EINVAL;
        }
        p->exec = path;
        return 0;
}

static int policy_set_arguments(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy *p = obj;
        int r = policy_words(c, key, value, &p->argv, &p->argc);

        if (r == 0 && p->argc == 0) { /* no words: no arguments, as without the key */
                policy_strv_free(p->argv);
                p->argv = NULL;
        }
        return r;
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

/* MemoryMax=: a size or infinity, and at least POLICY_MEMORY_MIN. Why a
 * floor: below it the sandbox setup itself is killed before it can report,
 * and the gadget would fail without a word of the limit. */
static int policy_set_memory_max(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        static const struct policy_key size = { "MemoryMax", KIND_SIZE, KEY_INFINITY, 0, 0, 0, NULL, 0 };
        struct policy *p = obj;
        uint64_t v = 0;
        int r = policy_set_generic(c, &v, &size, value);

        if (r < 0)
                return r;
        if (v < POLICY_MEMORY_MIN) {
                policy_err(c, "%s=%s must be at least %uM: less cannot hold the sandbox setup and a program",
                           key, POLICY_Q(value), POLICY_MEMORY_MIN >> 20);
                return -EINVAL;
        }
        p->memory_max = v;
        return 0;
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

/* One of names into an enum field; -EINVAL if reported. */
static int policy_set_enum(struct policy_ctx *c, const char *key, const char *value, const char *const *names,
                           size_t n, int *field)
{
        int i = policy_enum(c, key, value, names, n);
        if (i >= 0)
                *field = i;
        return i < 0 ? i : 0;
}

static int policy_set_restart(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy *p = obj;
        return policy_set_enum(c, key, value, policy_restart_names, N_OF(policy_restart_names), (int *)&p->restart);
}

static int policy_set_start(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy *p = obj;
        return policy_set_enum(c, key, value, policy_start_names, N_OF(policy_start_names), (int *)&p->start);
}

static int policy_set_netns(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy *p = obj;
        return policy_set_enum(c, key, value, policy_netns_names, N_OF(policy_netns_names), (int *)&p->netns);
}

static int policy_set_require_types(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy *p = obj;
        bool b;
        if (policy_parse_bool(value, &b) < 0) {
                policy_err(c, "%s=%s is not a boolean (yes or no)", key, POLICY_Q(value));
                return -EINVAL;
        }
        p->require_types = b ? POLICY_TYPES_REQUIRED : POLICY_TYPES_OPTIONAL;
        return 0;
}

/* Loopback=: deprecated. It brought lo up in the gadget's network
 * namespace, but a gadget can create no socket (seccomp), so lo had no
 * use; the key still loads, so that old policies keep working, and is
 * ignored with a warning. */
static int policy_set_loopback(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        bool b;

        (void)obj;
        if (policy_parse_bool(value, &b) < 0) {
                policy_err(c, "%s=%s is not a boolean (yes/no)", key, POLICY_Q(value));
                return -EINVAL;
        }
        policy_warn(c, "%s= is deprecated and ignored (lo stays down): a gadget cannot create sockets, "
                    "so lo had no use; remove the line", key);
        return 0;
}

/* UI=: the gadget's HTML UI, which gadgetd (root) reads and serves to
 * whoever holds the gateway's token. Why the checks are safe: a regular
 * file (a FIFO or device could block gadgetd), named *.html or *.htm, at
 * most POLICY_UI_MAX, and readable by every user: a UI is public by
 * nature, and a policy must not turn gadgetd into a reader of files only
 * root may read (/etc/shadow named as a UI would be refused here). */
static int policy_html_file(struct policy_ctx *c, const char *key, const char *value, char **out)
{
        struct stat st;
        char *path;
        int r = policy_regular_file(c, key, value, &path, &st);
        const char *dot;

        if (r < 0)
                return r;
        dot = strrchr(path, '.');
        if (!dot || strchr(dot, '/') || (strcmp(dot, ".html") != 0 && strcmp(dot, ".htm") != 0))
                policy_err(c, "%s=%s is not an HTML file (*.html or *.htm)", key, POLICY_Q(value));
        else if (!(st.st_mode & S_IROTH))
                policy_err(c, "%s=%s is not readable by every user (a UI is public: chmod a+r)", key,
                           POLICY_Q(value));
        else if (st.st_size > POLICY_UI_MAX)
                policy_err(c, "%s=%s is larger than %d bytes", key, POLICY_Q(value), POLICY_UI_MAX);
        else {
                *out = path;
                return 0;
        }
        free(path);
        return -EINVAL;
}

static int policy_set_ui(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        return policy_html_file(c, key, value, &((struct policy *)obj)->ui);
}

/* AdminUI=: a gatekeeper's management UI, checked as UI= is. */
static int policy_set_admin_ui(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        return policy_html_file(c, key, value, &((struct policy *)obj)->admin_ui);
}

static int policy_set_admin_methods(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy *p = obj;
        return policy_method_words(c, key, value, false, &p->admin_methods, &p->n_admin_methods);
}

static int policy_set_approve(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy *p = obj;
        return policy_method_words(c, key, value, false, &p->approve, &p->n_approve);
}

/* Nodes=: the gadgetd nodes (Node=) that may run it, the preferred first;
 * checked as Node= is (1 to 63 of a-z 0-9 _ -). */
static int policy_set_nodes(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy *p = obj;
        char **w;
        size_t n;
        int r = policy_checked_words(c, key, value, policy_node_name_valid, "a node name (1 to 63 of a-z 0-9 _ -)",
                                     &w, &n);
        if (r < 0)
                return r;
        policy_strv_free(p->nodes);
        p->nodes = w;
        p->n_nodes = n;
        return 0;
}

#define G(field) offsetof(struct policy, field)

/* Name and Exec first: POLICY_KEY_NAME and POLICY_KEY_EXEC index them. */
static const struct policy_key policy_gadget_keys[] = {
        { "Name", KIND_CUSTOM, 0, 0, 0, 0, policy_set_name, 0 },
        { "Exec", KIND_CUSTOM, 0, 0, 0, 0, policy_set_exec, 0 },
        { "Arguments", KIND_CUSTOM, KEY_EMPTY_OK, 0, 0, 0, policy_set_arguments, 0 },
        { "Environment", KIND_CUSTOM, KEY_REPEAT, 0, 0, 0, policy_set_environment, 0 },
        { "ReadOnlyPaths", KIND_CUSTOM, KEY_REPEAT, 0, 0, 0, policy_set_ro_paths, 0 },
        { "SystemLibraries", KIND_BOOL, 0, 0, G(system_libraries), 0, NULL, 0 },
        { "RecordDenials", KIND_BOOL, 0, 0, G(record_denials), 0, NULL, 0 },
        { "Loopback", KIND_CUSTOM, 0, 0, 0, 0, policy_set_loopback, 0 },
        { "NetworkNamespace", KIND_CUSTOM, 0, 0, 0, 0, policy_set_netns, 0 },
        /* Why neither 0 nor infinity: /tmp is a tmpfs, where size=0 means no limit. */
        { "TmpSize", KIND_SIZE, 0, 0, G(tmp_size), 0, NULL, 16 << 20 },
        { "CoreDump", KIND_SIZE, 0, 0, G(core_dump), POLICY_CORE_DUMP_MAX, NULL, 0 },
        /* The state quota: cores are kept within it, beside the kv store. */
        { "StateMax", KIND_SIZE, KEY_INFINITY, 0, G(state_max), 0, NULL, POLICY_STATE_MAX },
        { "MemoryMax", KIND_CUSTOM, 0, 0, 0, 0, policy_set_memory_max, 0 },
        { "TasksMax", KIND_COUNT, KEY_INFINITY, 0, G(tasks_max), 0, NULL, POLICY_UNLIMITED },
        { "CPUQuota", KIND_CUSTOM, 0, 0, 0, 0, policy_set_cpu_quota, 0 },
        { "LimitNOFILE", KIND_COUNT, 0, 0, G(limit_nofile), 1048576, NULL, 1024 },
        /* Why no infinity: a call that never times out would hold its caller forever. */
        { "CallTimeout", KIND_DURATION, 0, 0, G(call_timeout_ms), 0, NULL, 30 * 1000 },
        { "RuntimeMax", KIND_DURATION, KEY_INFINITY, 0, G(runtime_max_ms), 0, NULL, 0 },
        /* Why no infinity: a gadget that never says hello would stay "starting" for ever. */
        { "StartTimeout", KIND_DURATION, 0, 0, G(start_timeout_ms), 0, NULL, 10 * 1000 },
        /* The log budget: what is over it is dropped and counted (gadgetd's log cost). */
        { "LogLinesPerSecond", KIND_COUNT, 0, 0, G(log_lines), 1000000, NULL, 0 },
        { "LogBytesPerSecond", KIND_SIZE, 0, 0, G(log_bytes), 64ull << 20, NULL, 0 },
        { "Restart", KIND_CUSTOM, 0, 0, 0, 0, policy_set_restart, 0 },
        { "Start", KIND_CUSTOM, 0, 0, 0, 0, policy_set_start, 0 },
        /* infinity: never stopped for being idle (the default). */
        { "IdleStop", KIND_DURATION, KEY_INFINITY, 0, G(idle_stop_ms), 0, NULL, 0 },
        { "RequireTypes", KIND_CUSTOM, 0, 0, 0, 0, policy_set_require_types, 0 },
        { "UI", KIND_CUSTOM, 0, 0, 0, 0, policy_set_ui, 0 },
        { "Gatekeeper", KIND_BOOL, 0, 0, G(gatekeeper), 0, NULL, 0 },
        { "AdminMethods", KIND_CUSTOM, 0, 0, 0, 0, policy_set_admin_methods, 0 },
        { "AdminUI", KIND_CUSTOM, 0, 0, 0, 0, policy_set_admin_ui, 0 },
        { "Approve", KIND_CUSTOM, 0, 0, 0, 0, policy_set_approve, 0 },
        { "ApproveTimeout", KIND_DURATION, 0, 0, G(approve_timeout_ms),
          POLICY_APPROVE_TIMEOUT_MAX_MS, NULL, POLICY_APPROVE_TIMEOUT_MS },
        { "Nodes", KIND_CUSTOM, 0, 0, 0, 0, policy_set_nodes, 0 },
        { "Schedule", KIND_CUSTOM, KEY_REPEAT, 0, 0, 0, policy_set_schedule, 0 },
        /* The budgets of the gadget's peer in gadgetd: no infinity, since
         * each bounds what one gadget can make gadgetd's loop do. */
        { "BindingCallsMax", KIND_COUNT, 0, 0, G(binding_calls_max), 4096, NULL, POLICY_BINDING_CALLS_MAX },
        { "FrameValuesMax", KIND_COUNT, 0, 0, G(frame_values_max),
          POLICY_FRAME_VALUES_LIMIT, NULL, POLICY_FRAME_VALUES },
        { "FrameValuesPerSecond", KIND_COUNT, 0, 0, G(frame_values_per_s),
          1u << 30, NULL, POLICY_FRAME_VALUES_PER_S },
        { "FrameBytesPerSecond", KIND_SIZE, 0, 0, G(frame_bytes_per_s),
          64ull << 30, NULL, POLICY_FRAME_BYTES_PER_S },
        { "TurnFramesMax", KIND_COUNT, 0, 0, G(turn_frames_max), 65536, NULL, POLICY_TURN_FRAMES },
        { "TurnBytesMax", KIND_SIZE, 0, 0, G(turn_bytes_max), 64u << 20, NULL, POLICY_TURN_BYTES },
        { "CallsQueuedMax", KIND_COUNT, 0, 0, G(calls_queued_max),
          POLICY_CALLS_QUEUED_LIMIT, NULL, POLICY_CALLS_QUEUED },
};

_Static_assert(sizeof(policy_gadget_keys) / sizeof(policy_gadget_keys[0]) == POLICY_N_GADGET_KEYS,
               "gadget_seen has a slot per [Gadget] key");

void policy_key_defaults(void *obj, const struct policy_key *t, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (t[i].def)
                        *(uint64_t *)((char *)obj + t[i].off) = t[i].def;
}

void policy_gadget_defaults(struct policy *p)
{
        policy_key_defaults(p, policy_gadget_keys, POLICY_N_GADGET_KEYS);
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

/* The line [Gadget] gave key on, or the section's own line. */
static unsigned policy_gadget_line_of(const struct policy_ctx *c, const char *key)
{
        for (size_t i = 0; i < POLICY_N_GADGET_KEYS; i++)
                if (strcmp(policy_gadget_keys[i].name, key) == 0 && c->gadget_seen[i])
                        return c->gadget_seen[i];
        return c->gadget_line;
}

void policy_gadget_end(struct policy_ctx *c)
{
        const struct policy *p = c->p;

        if (!p->gatekeeper) {
                static const char *const only[] = { "AdminMethods", "AdminUI" };
                for (size_t i = 0; i < sizeof only / sizeof *only; i++) {
                        unsigned line = policy_gadget_line_of(c, only[i]);
                        if (line == c->gadget_line)
                                continue;
                        c->line = line;
                        policy_err(c, "%s= is only for a gatekeeper: add Gatekeeper=yes", only[i]);
                }
        }
        for (size_t i = 0; i < p->n_approve; i++) {
                if (!policy_admin_method(p, p->approve[i]))
                        continue;
                c->line = policy_gadget_line_of(c, "Approve");
                policy_err(c, "Approve=: %s is an admin method, which only the admin UI calls (no approval "
                           "is asked there)", p->approve[i]);
        }
        if (p->core_dump && p->state_max != POLICY_UNLIMITED && p->core_dump > p->state_max) {
                c->line = policy_gadget_line_of(c, "CoreDump");
                policy_err(c, "CoreDump= is more than StateMax=, the gadget's state quota, which every core it "
                           "keeps counts against: raise StateMax= or lower CoreDump=");
        }
        policy_schedules_check(c);
}
