/* binding: the keys of [Binding NAME]. They are kept until the section ends,
 * since Type= may come after the keys it decides on. */
#include "keys.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "contract.h"
#include "wire.h"

#define T_KV     (1u << BINDING_KV)
#define T_GADGET (1u << BINDING_GADGET)
#define T_HTTP   (1u << BINDING_HTTP)
#define T_TEXT   (1u << BINDING_TEXT)
#define T_SECRET (1u << BINDING_SECRET)
#define T_ALARM  (1u << BINDING_ALARM)
#define T_TAIL   (1u << BINDING_TAIL)
#define T_ALL    (T_KV | T_GADGET | T_HTTP | T_TEXT | T_SECRET | T_ALARM | T_TAIL)

static const char *const policy_type_names[] = {
        [BINDING_KV] = "kv",
        [BINDING_GADGET] = "gadget",
        [BINDING_HTTP] = "http",
        [BINDING_TEXT] = "text",
        [BINDING_SECRET] = "secret",
        [BINDING_ALARM] = "alarm",
        [BINDING_TAIL] = "tail",
};

const char *policy_binding_type_name(enum binding_type t)
{
        if ((size_t)t >= sizeof(policy_type_names) / sizeof(policy_type_names[0]))
                return "unknown";
        return policy_type_names[t];
}

static int policy_set_target(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy_binding *b = obj;

        if (!gadget_name_ok(value)) {
                policy_err(c, "%s=%s is not a valid gadget name", key, POLICY_Q(value));
                return -EINVAL;
        }
        b->target = strdup(value);
        return b->target ? 0 : -ENOMEM;
}

/* Of=: the gadgets a tail binding observes, each named once. */
static int policy_set_of(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy_binding *b = obj;
        char **words = NULL;
        size_t n = 0;
        int e = policy_words(c, key, value, &words, &n);
        if (e < 0)
                return e;
        for (size_t i = 0; i < n && e >= 0; i++) {
                if (!gadget_name_ok(words[i])) {
                        policy_err(c, "%s=%s: %s is not a valid gadget name", key, POLICY_Q(value), POLICY_Q(words[i]));
                        e = -EINVAL;
                } else if (policy_strv_has(words, i, words[i])) {
                        policy_err(c, "%s=%s names %s twice", key, POLICY_Q(value), words[i]);
                        e = -EINVAL;
                }
        }
        if (e >= 0 && n > POLICY_TAIL_OF_MAX) {
                policy_err(c, "%s= names %zu gadgets: at most %d", key, n, POLICY_TAIL_OF_MAX);
                e = -EINVAL;
        }
        if (e < 0) {
                policy_strv_free(words);
                return e;
        }
        b->of = words;
        b->n_of = n;
        return 0;
}

/* Method=: the gadget's own method that due alarms (or a tail's batches)
 * are delivered to. */
static int policy_set_method(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy_binding *b = obj;

        if (!gadget_method_name_ok(value)) {
                policy_err(c, "%s=%s is not a valid method name", key, POLICY_Q(value));
                return -EINVAL;
        }
        b->method = strdup(value);
        return b->method ? 0 : -ENOMEM;
}

/* Methods=: method names of the target gadget, or HTTP methods. */
static int policy_set_methods(struct policy_ctx *c, void *obj, const char *key,
                              const char *value)
{
        struct policy_binding *b = obj;
        return policy_method_words(c, key, value, b->type == BINDING_HTTP, &b->methods, &b->n_methods);
}

/* Approve=: the calls (gadget methods, or HTTP methods) that wait for a
 * person's approval. */
static int policy_set_approve(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy_binding *b = obj;
        return policy_method_words(c, key, value, b->type == BINDING_HTTP, &b->approve, &b->n_approve);
}

/* CredentialHeader=: "Name: text" where the text holds "{}" once, which
 * gadgetd replaces with the credential. Why the checks: the name must be
 * one header's (a token, not one curl or HTTP itself manages), and the
 * line must not be splittable. */
static int policy_set_credential_header(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy_binding *b = obj;
        const char *colon = strchr(value, ':');
        const char *why = NULL;
        size_t nl = colon ? (size_t)(colon - value) : 0;

        if (!colon || nl == 0)
                why = "is not \"Name: value\"";
        for (size_t i = 0; !why && i < nl; i++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", value[i]))
                        why = "has a header name that is not letters, digits, - and _";
        if (!why && (strncasecmp(value, "Host:", 5) == 0 || strncasecmp(value, "Content-Length:", 15) == 0 ||
                     strncasecmp(value, "Transfer-Encoding:", 18) == 0 || strncasecmp(value, "Connection:", 11) == 0))
                why = "names a header HTTP itself manages";
        if (!why && (!strstr(colon, "{}") || strstr(strstr(colon, "{}") + 2, "{}")))
                why = "must hold {} (where the credential goes) exactly once";
        for (const char *s = value; !why && *s; s++)
                if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f)
                        why = "contains a control character";
        if (why) {
                policy_err(c, "%s=%s %s", key, POLICY_Q(value), why);
                return -EINVAL;
        }
        b->credential_header = strdup(value);
        return b->credential_header ? 0 : -ENOMEM;
}

static int policy_set_credential(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy_binding *b = obj;
        struct stat st;

        return policy_regular_file(c, key, value, &b->credential, &st);
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

static int policy_set_file(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy_binding *b = obj;
        struct stat st;

        return policy_regular_file(c, key, value, &b->file, &st);
}

static int policy_set_ca_file(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy_binding *b = obj;
        struct stat st;

        return policy_regular_file(c, key, value, &b->ca_file, &st);
}

#define B(field) offsetof(struct policy_binding, field)

static const struct policy_key policy_type_key = { "Type", KIND_CUSTOM, 0, T_ALL, 0, 0, NULL, 0 };

static const struct policy_key policy_binding_keys[] = {
        /* A value travels in one frame, with its key and the envelope. */
        { "MaxValueSize", KIND_SIZE, 0, T_KV, B(max_value_size),
          WIRE_MAX_FRAME - POLICY_HTTP_ENVELOPE, NULL, 1 << 20 },
        { "MaxKeys", KIND_COUNT, KEY_INFINITY, T_KV, B(max_keys), 0, NULL, POLICY_KV_MAX_KEYS },
        { "MaxBytes", KIND_SIZE, KEY_INFINITY, T_KV, B(max_bytes), 0, NULL, POLICY_KV_MAX_BYTES },
        /* Why a bound: each queued operation holds its value in gadgetd. */
        { "Target", KIND_TEXT, 0, T_GADGET, B(target), 0, policy_set_target, 0 },
        { "Allow", KIND_WORDS, KEY_REPEAT, T_HTTP, B(allow), B(n_allow), policy_set_allow, 0 },
        { "Methods", KIND_WORDS, 0, T_GADGET | T_HTTP, B(methods), B(n_methods), policy_set_methods, 0 },
        { "Timeout", KIND_DURATION, 0, T_HTTP, B(timeout_ms), 0, NULL, 10 * 1000 },
        { "MaxResponseSize", KIND_SIZE, 0, T_HTTP, B(max_response), 0, NULL, 1 << 20 },
        { "MaxRequestSize", KIND_SIZE, 0, T_HTTP, B(max_request), WIRE_MAX_FRAME - POLICY_HTTP_ENVELOPE,
          NULL, 1 << 20 },
        { "MaxResponseHeaders", KIND_COUNT, 0, T_HTTP, B(max_resp_headers),
          POLICY_HTTP_MAX_HEADERS, NULL, 100 },
        { "MaxResponseHeaderSize", KIND_SIZE, 0, T_HTTP, B(max_resp_header_bytes),
          POLICY_HTTP_MAX_HEADER_BYTES, NULL, 64 << 10 },
        { "CAFile", KIND_TEXT, 0, T_HTTP, B(ca_file), 0, policy_set_ca_file, 0 },
        { "Value", KIND_TEXT, KEY_EMPTY_OK, T_TEXT, B(value), 0, policy_set_value, 0 },
        { "File", KIND_TEXT, 0, T_SECRET, B(file), 0, policy_set_file, 0 },
        { "MaxSize", KIND_SIZE, 0, T_SECRET, B(max_size), POLICY_SECRET_SIZE_MAX, NULL, POLICY_SECRET_SIZE },
        { "Credential", KIND_TEXT, 0, T_HTTP, B(credential), 0, policy_set_credential, 0 },
        /* Set to POLICY_CREDENTIAL_HEADER by policy_binding_end if Credential= is given without it. */
        { "CredentialHeader", KIND_TEXT, 0, T_HTTP, B(credential_header), 0, policy_set_credential_header, 0 },
        { "Approve", KIND_WORDS, 0, T_GADGET | T_HTTP, B(approve), B(n_approve), policy_set_approve, 0 },
        { "ApproveTimeout", KIND_DURATION, 0, T_GADGET | T_HTTP, B(approve_timeout_ms),
          POLICY_APPROVE_TIMEOUT_MAX_MS, NULL, POLICY_APPROVE_TIMEOUT_MS },
        { "Method", KIND_TEXT, 0, T_ALARM | T_TAIL, B(method), 0, policy_set_method, 0 },
        { "Of", KIND_WORDS, 0, T_TAIL, B(of), B(n_of), policy_set_of, 0 },
        /* Why a bound: each waiting event is held in gadgetd's memory. */
        { "QueueMax", KIND_COUNT, 0, T_TAIL, B(queue_max), POLICY_TAIL_QUEUE_MAX, NULL, POLICY_TAIL_QUEUE },
        /* Why a bound: gadgetd encodes every event it delivers, on its loop. */
        { "EventsPerSecond", KIND_COUNT, 0, T_TAIL, B(events_per_s), POLICY_TAIL_EVENTS_PER_S_MAX, NULL,
          POLICY_TAIL_EVENTS_PER_S },
        /* Why bounds: each alarm is a row of gadgetd's store and, when
         * due, a call gadgetd makes; the payload travels in that call. */
        { "MaxAlarms", KIND_COUNT, 0, T_ALARM, B(max_alarms), 1000000, NULL, POLICY_ALARMS_MAX },
        { "MaxPayloadSize", KIND_SIZE, 0, T_ALARM, B(max_payload),
          POLICY_SECRET_SIZE_MAX, NULL, POLICY_ALARM_PAYLOAD },
        { "CallsMax", KIND_COUNT, 0, T_ALL, B(calls_max), 4096, NULL, POLICY_BINDING_CALLS },
};

const struct policy_key *policy_binding_key_table(size_t *n)
{
        *n = sizeof(policy_binding_keys) / sizeof(policy_binding_keys[0]);
        return policy_binding_keys;
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
        { BINDING_ALARM, "Method" },
        { BINDING_TAIL, "Of" },
        { BINDING_TAIL, "Method" },
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
                int t = policy_enum(c, "Type", c->pend[i].value, policy_type_names,
                                    sizeof(policy_type_names) / sizeof(policy_type_names[0]));
                if (t < 0)
                        return false;
                b->type = (enum binding_type)t;
                return true;
        }
        c->line = b->line;
        policy_err(c, "binding %s has no Type= (kv, gadget, http, text, secret, alarm or tail)", b->name);
        return false;
}

/* The binding being read's entry for key, or NULL if it was not given. */
static const struct policy_pending *policy_pending_find(const struct policy_ctx *c, const char *key)
{
        for (size_t i = 0; i < c->n_pend; i++) {
                if (strcmp(c->pend[i].key->name, key) == 0)
                        return &c->pend[i];
        }
        return NULL;
}

/* Why this is safe: an answer larger than a frame could never reach the
 * gadget, so a response that fits MaxResponseSize must also fit one frame
 * with its headers and envelope; a larger setting is refused here rather
 * than failing every large response later. */
static void policy_http_sizes_check(struct policy_ctx *c, const struct policy_binding *b)
{
        uint64_t room = (uint64_t)WIRE_MAX_FRAME - POLICY_HTTP_ENVELOPE - b->max_resp_header_bytes -
                        b->max_resp_headers * POLICY_HTTP_HEADER_OVERHEAD;
        const struct policy_pending *given = policy_pending_find(c, "MaxResponseSize");

        if (b->max_response <= room || !given)
                return;
        c->line = given->line;
        policy_err(c, "MaxResponseSize=%s is more than one answer can carry: at most %llu bytes "
                   "(one frame holds %u bytes, with the headers that MaxResponseHeaderSize= and "
                   "MaxResponseHeaders= allow)", POLICY_Q(given->value), (unsigned long long)room,
                   WIRE_MAX_FRAME);
}

/* Approve= names calls the binding can make at all: a method of Methods=
 * (when the list is given), an HTTP method the binding allows. */
static void policy_binding_approve_check(struct policy_ctx *c, const struct policy_binding *b)
{
        const struct policy_pending *given = policy_pending_find(c, "Approve");
        bool http = b->type == BINDING_HTTP;

        if (!given || !b->approve)
                return;
        for (size_t i = 0; i < b->n_approve; i++) {
                bool ok = http ? (b->n_methods ? policy_listed(b->methods, b->approve[i])
                                               : strcmp(b->approve[i], "GET") == 0)
                               : !b->n_methods || policy_listed(b->methods, b->approve[i]);
                if (!ok) {
                        c->line = given->line;
                        policy_err(c, "Approve=%s: %s is not one of the binding's Methods=", POLICY_Q(given->value),
                                   b->approve[i]);
                }
        }
        c->line = b->line;
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
                if (policy_required[i].type != b->type)
                        continue;
                if (!policy_pending_has(c, policy_required[i].key))
                        policy_err(c, "binding %s of type %s has no %s=", b->name,
                                   policy_type_names[b->type], policy_required[i].key);
        }
        if (b->type == BINDING_HTTP && !c->oom)
                policy_http_sizes_check(c, b);
        policy_binding_approve_check(c, b);
        if (policy_pending_has(c, "CredentialHeader") && !policy_pending_has(c, "Credential"))
                policy_err(c, "binding %s has CredentialHeader= but no Credential= (the file it names)", b->name);
        if (b->credential && !b->credential_header && !(b->credential_header = strdup(POLICY_CREDENTIAL_HEADER)))
                policy_oom(c);
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

/* A new binding named name (taken over) on line, with every key's default. */
static void policy_binding_init(struct policy_binding *b, char *name, unsigned line)
{
        *b = (struct policy_binding){ .name = name, .line = line };
        policy_key_defaults(b, policy_binding_keys, sizeof(policy_binding_keys) / sizeof(policy_binding_keys[0]));
}

/* Opens [Binding NAME]: a new binding, unless the name is bad or taken. */
enum policy_section policy_binding_begin(struct policy_ctx *c, const char *name)
{
        struct policy *p = c->p;
        struct policy_binding *nb;
        char *copy;

        if (!gadget_identifier_ok(name)) {
                policy_err(c, "binding name %s is not an identifier (letters, digits and _, "
                           "not starting with a digit, at most 64)", POLICY_Q(name));
                return POLICY_SECT_SKIP;
        }
        const struct policy_binding *old = policy_binding_find(p, name);
        if (old) {
                policy_err(c, "duplicate binding %s (first on line %u)", name, old->line);
                return POLICY_SECT_SKIP;
        }
        copy = strdup(name);
        nb = copy ? realloc(p->bindings, (p->n_bindings + 1) * sizeof(*nb)) : NULL;
        if (!nb) {
                free(copy);
                policy_oom(c);
                return POLICY_SECT_SKIP;
        }
        p->bindings = nb;
        policy_binding_init(&nb[p->n_bindings++], copy, c->line);
        return POLICY_SECT_BINDING;
}

/* Frees what a binding holds (not the binding itself). */
void policy_binding_clear(struct policy_binding *b)
{
        free(b->name);
        free(b->target);
        free(b->method);
        policy_strv_free(b->methods);
        policy_strv_free(b->allow);
        free(b->value);
        free(b->file);
        free(b->ca_file);
        free(b->credential);
        free(b->credential_header);
        policy_strv_free(b->approve);
        policy_strv_free(b->of);
}
