/* bundle: the container of a gadget release (bundle.h, docs/releases.md).
 * Pure code: bytes in, checked members out. */
#include "bundle.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract.h"

static uint64_t get_be(const uint8_t *p, size_t n)
{
        uint64_t v = 0;
        for (size_t i = 0; i < n; i++)
                v = v << 8 | p[i];
        return v;
}

static void put_be(uint8_t *p, uint64_t v, size_t n)
{
        for (size_t i = n; i-- > 0; v >>= 8)
                p[i] = (uint8_t)v;
}

static bool path_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
               c == '_' || c == '-' || c == '+' || c == '@';
}

/* Why this is safe: gadgetd joins a path accepted here to its own
 * directory and creates it component by component with openat: a path
 * that is absolute, holds "..", ".", an empty component or any byte but
 * a few printable ones could name something outside it or confuse a
 * reader of the store; none is accepted. */
bool bundle_path_ok(const char *path, char *why, size_t wlen)
{
        size_t len = strlen(path), depth = 1;
        if (len == 0 || len > BUNDLE_PATH_MAX) {
                snprintf(why, wlen, "a member's path has %zu bytes (1 to %d)", len, BUNDLE_PATH_MAX);
                return false;
        }
        if (path[0] == '/') {
                snprintf(why, wlen, "member \"%.64s\": an absolute path", path);
                return false;
        }
        for (const char *c = path; *c; c++) {
                if (*c == '/') {
                        depth++;
                        continue;
                }
                if (!path_char(*c)) {
                        snprintf(why, wlen, "member \"%.64s\": byte 0x%02x in its path (only A-Z a-z 0-9 . _ - "
                                 "+ @ and /)", path, (unsigned char)*c);
                        return false;
                }
        }
        if (depth > BUNDLE_DEPTH_MAX) {
                snprintf(why, wlen, "member \"%.64s\": deeper than %d components", path, BUNDLE_DEPTH_MAX);
                return false;
        }
        for (const char *s = path; s; s = strchr(s, '/') ? strchr(s, '/') + 1 : NULL) {
                size_t n = strcspn(s, "/");
                if (n == 2 && s[0] == '.' && s[1] == '.') {
                        snprintf(why, wlen, "member \"%.64s\": \"..\" in its path", path);
                        return false;
                }
                if (n == 0 || (n == 1 && s[0] == '.')) {
                        snprintf(why, wlen, "member \"%.64s\": an empty or \".\" component in its path", path);
                        return false;
                }
        }
        return true;
}

bool bundle_version_ok(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n > BUNDLE_VERSION_MAX || s[0] == '.' || s[0] == '-')
                return false;
        for (; *s; s++)
                if (!path_char(*s) || *s == '@')
                        return false;
        return true;
}

/* What a member kind other than a file would be, for the refusal. */
static const char *kind_name(uint8_t k)
{
        switch (k) {
        case 'D': return "a directory (directories are implied by the files' paths)";
        case 'L': return "a symbolic link";
        case 'H': return "a hard link";
        case 'C': return "a character device";
        case 'B': return "a block device";
        case 'P': return "a FIFO";
        case 'S': return "a socket";
        default: return NULL;
        }
}

/* The manifest: "Key=Value" lines, Name, Version and Protocol required,
 * SDK optional, nothing else. */
static int manifest_parse(const struct bundle_member *m, struct bundle *b, char *why, size_t wlen)
{
        char text[BUNDLE_MANIFEST_MAX + 1];
        bool name = false, version = false, protocol = false;
        if (m->size > BUNDLE_MANIFEST_MAX) {
                snprintf(why, wlen, "manifest: larger than %d bytes", BUNDLE_MANIFEST_MAX);
                return -EINVAL;
        }
        memcpy(text, m->data, m->size);
        text[m->size] = '\0';
        if (strlen(text) != m->size) {
                snprintf(why, wlen, "manifest: holds a NUL byte");
                return -EINVAL;
        }
        unsigned line = 0;
        for (char *s = text, *next; s && *s; s = next) {
                next = strchr(s, '\n');
                if (next)
                        *next++ = '\0';
                line++;
                if (!*s || *s == '#')
                        continue;
                char *eq = strchr(s, '=');
                if (!eq) {
                        snprintf(why, wlen, "manifest line %u: not Key=Value", line);
                        return -EINVAL;
                }
                *eq = '\0';
                const char *v = eq + 1;
                if (strcmp(s, "Name") == 0 && !name && gadget_name_ok(v)) {
                        snprintf(b->name, sizeof b->name, "%s", v);
                        name = true;
                } else if (strcmp(s, "Version") == 0 && !version && bundle_version_ok(v)) {
                        snprintf(b->version, sizeof b->version, "%s", v);
                        version = true;
                } else if (strcmp(s, "Protocol") == 0 && !protocol && strlen(v) == 1 &&
                           v[0] >= '0' + GADGET_PROTOCOL_MIN && v[0] <= '0' + GADGET_PROTOCOL_VERSION) {
                        b->protocol = (unsigned)(v[0] - '0');
                        protocol = true;
                } else if (strcmp(s, "SDK") == 0 && !b->sdk[0] && bundle_version_ok(v)) {
                        snprintf(b->sdk, sizeof b->sdk, "%s", v);
                } else {
                        snprintf(why, wlen, "manifest line %u: %.32s= is unknown, repeated or its value invalid "
                                 "(Name=, Version=, Protocol= %d to %d, SDK=)", line, s, GADGET_PROTOCOL_MIN,
                                 GADGET_PROTOCOL_VERSION);
                        return -EINVAL;
                }
        }
        if (!name || !version || !protocol) {
                snprintf(why, wlen, "manifest: %s= is missing", !name ? "Name" : !version ? "Version" : "Protocol");
                return -EINVAL;
        }
        return 0;
}

/* One member's header at p (len bytes left): checked, into m. 1 for the
 * end record, 0 for a file, -errno with why. */
static int member_read(const uint8_t *p, size_t len, struct bundle_member *m, size_t *used, char *why,
                       size_t wlen)
{
        if (len < BUNDLE_HEADER_LEN) {
                snprintf(why, wlen, "truncated: no end record");
                return -EINVAL;
        }
        uint8_t kind = p[0];
        unsigned mode = (unsigned)get_be(p + 1, 2), plen = (unsigned)get_be(p + 3, 2);
        uint64_t size = get_be(p + 5, 8);
        if (kind == 'E') {
                if (mode || plen || size) {
                        snprintf(why, wlen, "the end record holds data");
                        return -EINVAL;
                }
                *used = BUNDLE_HEADER_LEN;
                return 1;
        }
        if (plen == 0 || plen > BUNDLE_PATH_MAX || plen > len - BUNDLE_HEADER_LEN) {
                snprintf(why, wlen, "a member's path length %u is out of bounds", plen);
                return -EINVAL;
        }
        if (!(m->path = strndup((const char *)p + BUNDLE_HEADER_LEN, plen)))
                return -ENOMEM;
        if (strlen(m->path) != plen) {
                snprintf(why, wlen, "a member's path holds a NUL byte");
                return -EINVAL;
        }
        if (!bundle_path_ok(m->path, why, wlen))
                return -EINVAL;
        if (kind != 'F') {
                const char *k = kind_name(kind);
                if (k)
                        snprintf(why, wlen, "member \"%.64s\" is %s: a bundle holds regular files only", m->path, k);
                else
                        snprintf(why, wlen, "member \"%.64s\": unknown kind 0x%02x", m->path, kind);
                return -EINVAL;
        }
        /* Why: gadgetd sets every mode itself; setuid, setgid, sticky or
         * any other bits are refused, not dropped quietly. */
        if (mode != 0644 && mode != 0755) {
                snprintf(why, wlen, "member \"%.64s\": mode %04o%s (only 0644 and 0755)", m->path, mode,
                         mode & 04000 ? " is setuid" : mode & 02000 ? " is setgid" : "");
                return -EINVAL;
        }
        if (size > BUNDLE_MEMBER_MAX) {
                snprintf(why, wlen, "member \"%.64s\": %llu bytes, more than a member may hold (%u)", m->path,
                         (unsigned long long)size, BUNDLE_MEMBER_MAX);
                return -E2BIG;
        }
        if (size > len - BUNDLE_HEADER_LEN - plen) {
                snprintf(why, wlen, "member \"%.64s\": truncated (%llu bytes said, fewer left)", m->path,
                         (unsigned long long)size);
                return -EINVAL;
        }
        m->exec = mode == 0755;
        m->data = p + BUNDLE_HEADER_LEN + plen;
        m->size = size;
        *used = BUNDLE_HEADER_LEN + plen + (size_t)size;
        return 0;
}

/* Why this is safe: no two members share a path, and none is the
 * directory of another (a file "a" beside "a/b"); checked before anything
 * is unpacked. Quadratic, within BUNDLE_MEMBERS_MAX. */
static int paths_distinct(const struct bundle *b, char *why, size_t wlen)
{
        for (size_t i = 0; i < b->n; i++)
                for (size_t j = 0; j < i; j++) {
                        const char *x = b->m[i].path, *y = b->m[j].path;
                        size_t nx = strlen(x), ny = strlen(y), n = nx < ny ? nx : ny;
                        if (strncmp(x, y, n) == 0 && (nx == ny || (nx > ny ? x : y)[n] == '/')) {
                                snprintf(why, wlen, "member \"%.64s\" %s \"%.64s\"", x,
                                         nx == ny ? "is repeated:" : "clashes with", y);
                                return -EINVAL;
                        }
                }
        return 0;
}

static int members_read(const uint8_t *buf, size_t len, struct bundle *b, size_t *end, char *why, size_t wlen)
{
        size_t off = BUNDLE_MAGIC_LEN, used;
        b->m = calloc(BUNDLE_MEMBERS_MAX, sizeof *b->m);
        if (!b->m)
                return -ENOMEM;
        for (;;) {
                if (b->n == BUNDLE_MEMBERS_MAX && len - off >= 1 && buf[off] != 'E') {
                        snprintf(why, wlen, "more than %d members", BUNDLE_MEMBERS_MAX);
                        return -E2BIG;
                }
                int r = member_read(buf + off, len - off, &b->m[b->n], &used, why, wlen);
                if (r < 0) {
                        free(b->m[b->n].path);
                        b->m[b->n].path = NULL;
                        return r;
                }
                off += used;
                if (r == 1)
                        break;
                b->n++;
        }
        *end = off;
        return 0;
}

int bundle_parse(const uint8_t *buf, size_t len, struct bundle *b, char *why, size_t wlen)
{
        size_t end = 0;
        int r;
        *b = (struct bundle){ 0 };
        if (len > BUNDLE_SIZE_MAX) {
                snprintf(why, wlen, "%zu bytes, more than a bundle may hold (%u)", len, BUNDLE_SIZE_MAX);
                return -E2BIG;
        }
        if (len < BUNDLE_MAGIC_LEN || memcmp(buf, BUNDLE_MAGIC, BUNDLE_MAGIC_LEN) != 0) {
                snprintf(why, wlen, "not a gadget bundle (no %s magic)", BUNDLE_MAGIC);
                return -EINVAL;
        }
        if ((r = members_read(buf, len, b, &end, why, wlen)) < 0)
                goto fail;
        b->content = buf;
        b->content_len = end;
        if (len - end == BUNDLE_TRAILER_LEN && memcmp(buf + end, BUNDLE_SIG_MAGIC, 8) == 0) {
                b->is_signed = true;
                memcpy(b->key, buf + end + 8, BUNDLE_KEY_LEN);
                memcpy(b->sig, buf + end + 8 + BUNDLE_KEY_LEN, BUNDLE_SIG_LEN);
        } else if (len != end) {
                snprintf(why, wlen, "%zu bytes after the end record that are not a signature", len - end);
                r = -EINVAL;
                goto fail;
        }
        r = -EINVAL;
        if (b->n < 2 || strcmp(b->m[0].path, BUNDLE_MANIFEST) != 0 || strcmp(b->m[1].path, BUNDLE_POLICY) != 0) {
                snprintf(why, wlen, "the first members must be \"%s\" and \"%s\"", BUNDLE_MANIFEST, BUNDLE_POLICY);
                goto fail;
        }
        if ((r = paths_distinct(b, why, wlen)) < 0 || (r = manifest_parse(&b->m[0], b, why, wlen)) < 0)
                goto fail;
        b->policy = &b->m[1];
        return 0;
fail:
        bundle_clear(b);
        return r;
}

void bundle_clear(struct bundle *b)
{
        if (b->m)
                for (size_t i = 0; i < b->n; i++)
                        free(b->m[i].path);
        free(b->m);
        *b = (struct bundle){ 0 };
}

int bundle_write(const struct bundle_member *m, size_t n, uint8_t **out, size_t *out_len)
{
        size_t len = BUNDLE_MAGIC_LEN + BUNDLE_HEADER_LEN, off;
        for (size_t i = 0; i < n; i++)
                len += BUNDLE_HEADER_LEN + strlen(m[i].path) + m[i].size;
        uint8_t *p = malloc(len);
        if (!p)
                return -ENOMEM;
        memcpy(p, BUNDLE_MAGIC, BUNDLE_MAGIC_LEN);
        off = BUNDLE_MAGIC_LEN;
        for (size_t i = 0; i < n; i++) {
                size_t pl = strlen(m[i].path);
                p[off] = 'F';
                put_be(p + off + 1, m[i].exec ? 0755 : 0644, 2);
                put_be(p + off + 3, pl, 2);
                put_be(p + off + 5, m[i].size, 8);
                memcpy(p + off + BUNDLE_HEADER_LEN, m[i].path, pl);
                if (m[i].size)
                        memcpy(p + off + BUNDLE_HEADER_LEN + pl, m[i].data, m[i].size);
                off += BUNDLE_HEADER_LEN + pl + m[i].size;
        }
        memset(p + off, 0, BUNDLE_HEADER_LEN);
        p[off] = 'E';
        *out = p;
        *out_len = len;
        return 0;
}
