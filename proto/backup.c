/* backup: the backup file's writer and its strict reader (backup.h). */
#include "backup.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract.h"
#include "gadget.pb-c.h"
#include "value.h"

#define WBUF (64u * 1024u)

struct backup_writer {
        backup_write_fn *fn;
        void *arg;
        EVP_MD_CTX *md;
        uint8_t buf[WBUF];
        size_t used;
        uint64_t n[2];              /* kv, alarms */
        struct backup_record last;  /* the previous record's kind, binding and key */
        uint8_t last_key[BACKUP_KEY_MAX];
        bool any;
};

struct backup_reader {
        backup_read_fn *fn;
        void *arg;
        EVP_MD_CTX *md;
        uint8_t *val;               /* the current value's bytes (grows to BACKUP_VALUE_MAX) */
        size_t val_cap;
        uint8_t key[BACKUP_KEY_MAX], last_key[BACKUP_KEY_MAX];
        struct backup_record last;
        bool any, ended;
        uint64_t n[2];
};

static void put_be(uint8_t *p, uint64_t v, int n)
{
        for (int i = n - 1; i >= 0; i--, v >>= 8)
                p[i] = (uint8_t)v;
}

static uint64_t get_be(const uint8_t *p, int n)
{
        uint64_t v = 0;
        for (int i = 0; i < n; i++)
                v = v << 8 | p[i];
        return v;
}

static int flush(struct backup_writer *w)
{
        int e = w->used ? w->fn(w->arg, w->buf, w->used) : 0;
        w->used = 0;
        return e;
}

/* Appends n bytes to the file, and to its checksum. */
static int emit(struct backup_writer *w, const void *p, size_t n)
{
        if (EVP_DigestUpdate(w->md, p, n) != 1)
                return -EIO;
        const uint8_t *b = p;
        while (n > 0) {
                size_t k = n < WBUF - w->used ? n : WBUF - w->used;
                memcpy(w->buf + w->used, b, k);
                w->used += k;
                b += k;
                n -= k;
                int e;
                if (w->used == WBUF && (e = flush(w)) < 0)
                        return e;
        }
        return 0;
}

static int emit_be(struct backup_writer *w, uint64_t v, int n)
{
        uint8_t b[8];
        put_be(b, v, n);
        return emit(w, b, (size_t)n);
}

/* -1, 0, 1 as (kind, binding, key) of a sorts before, with, after b's. */
static int order(const struct backup_record *a, const struct backup_record *b)
{
        if (a->kind != b->kind)
                return a->kind == BACKUP_KV ? -1 : 1;
        int c = strcmp(a->binding, b->binding);
        if (c)
                return c < 0 ? -1 : 1;
        size_t n = a->klen < b->klen ? a->klen : b->klen;
        c = memcmp(a->key, b->key, n);
        if (c)
                return c < 0 ? -1 : 1;
        return a->klen < b->klen ? -1 : a->klen > b->klen;
}

/* A record's fields within the format's bounds: what a reader checks
 * (before the value), and a writer too, so that it never writes a file
 * gadgetd would refuse. */
static int check_fields(const struct backup_record *rec, char *why, size_t len)
{
        if (rec->kind != BACKUP_KV && rec->kind != BACKUP_ALARM) {
                snprintf(why, len, "unknown record kind 0x%02x", (unsigned)rec->kind & 0xff);
                return -EBADMSG;
        }
        if (!gadget_identifier_ok(rec->binding) || strlen(rec->binding) > BACKUP_BINDING_MAX) {
                snprintf(why, len, "a binding name that is not an identifier");
                return -EBADMSG;
        }
        if (rec->klen < 1 || rec->klen > BACKUP_KEY_MAX) {
                snprintf(why, len, "binding %s: a key of %zu bytes (1 to %d)", rec->binding, rec->klen,
                         BACKUP_KEY_MAX);
                return -EBADMSG;
        }
        if (rec->kind == BACKUP_ALARM && !value_utf8_valid((const char *)rec->key, rec->klen)) {
                snprintf(why, len, "binding %s: an alarm id that is not UTF-8", rec->binding);
                return -EBADMSG;
        }
        if (rec->vlen > BACKUP_VALUE_MAX) {
                snprintf(why, len, "binding %s: a value of %zu bytes (at most %u)", rec->binding, rec->vlen,
                         BACKUP_VALUE_MAX);
                return -EBADMSG;
        }
        return 0;
}

int backup_writer_new(backup_write_fn *fn, void *arg, const struct backup_info *info, struct backup_writer **out)
{
        if (!gadget_name_ok(info->gadget) || !gadget_identifier_ok(info->source))
                return -EINVAL;
        struct backup_writer *w = calloc(1, sizeof *w);
        if (!w)
                return -ENOMEM;
        w->fn = fn;
        w->arg = arg;
        int e = -ENOMEM;
        char head[BACKUP_HEADER_MAX];
        if (!(w->md = EVP_MD_CTX_new()) || EVP_DigestInit_ex(w->md, EVP_sha256(), NULL) != 1)
                goto fail;
        int n = snprintf(head, sizeof head, BACKUP_MAGIC "format: %d\ngadget: %s\ntaken: %" PRId64 "\nsource: %s\n\n",
                         BACKUP_FORMAT, info->gadget, info->taken_ms, info->source);
        if (n < 0 || (size_t)n >= sizeof head) {
                e = -EINVAL;
                goto fail;
        }
        if ((e = emit(w, head, (size_t)n)) < 0)
                goto fail;
        *out = w;
        return 0;
fail:
        backup_writer_free(w);
        return e;
}

int backup_write(struct backup_writer *w, const struct backup_record *rec)
{
        char why[160];
        int e;
        if (check_fields(rec, why, sizeof why) < 0 || strlen(rec->binding) > 255)
                return -EINVAL;
        if (w->any && order(&w->last, rec) >= 0)
                return -EINVAL;
        uint8_t kind = (uint8_t)rec->kind;
        size_t bl = strlen(rec->binding);
        if ((e = emit(w, &kind, 1)) < 0 || (e = emit_be(w, bl, 1)) < 0 || (e = emit(w, rec->binding, bl)) < 0 ||
            (e = emit_be(w, rec->klen, 2)) < 0 || (e = emit(w, rec->key, rec->klen)) < 0)
                return e;
        if (rec->kind == BACKUP_ALARM &&
            ((e = emit_be(w, (uint64_t)rec->at, 8)) < 0 || (e = emit_be(w, (uint64_t)rec->due, 8)) < 0 ||
             (e = emit_be(w, rec->attempts, 4)) < 0))
                return e;
        if ((e = emit_be(w, rec->vlen, 4)) < 0 || (e = emit(w, rec->value, rec->vlen)) < 0)
                return e;
        w->n[rec->kind == BACKUP_ALARM]++;
        w->last = *rec;
        memcpy(w->last_key, rec->key, rec->klen);
        w->last.key = w->last_key;
        w->any = true;
        return 0;
}

int backup_writer_end(struct backup_writer *w, struct backup_info *info)
{
        uint8_t kind = 'E', sum[32];
        unsigned n = 0;
        int e;
        if ((e = emit(w, &kind, 1)) < 0 || (e = emit_be(w, w->n[0], 8)) < 0 || (e = emit_be(w, w->n[1], 8)) < 0)
                return e;
        if (EVP_DigestFinal_ex(w->md, sum, &n) != 1 || n != sizeof sum)
                return -EIO;
        /* The sum itself is not summed: written past emit. */
        if ((e = flush(w)) < 0 || (e = w->fn(w->arg, sum, sizeof sum)) < 0)
                return e;
        if (info) {
                info->n_kv = w->n[0];
                info->n_alarms = w->n[1];
                memcpy(info->sha256, sum, sizeof sum);
        }
        return 0;
}

void backup_writer_free(struct backup_writer *w)
{
        if (!w)
                return;
        EVP_MD_CTX_free(w->md);
        free(w);
}

/* Reads exactly n bytes, summed unless sum is false. */
static int take(struct backup_reader *r, void *p, size_t n, bool sum, char *why, size_t len)
{
        int e = n ? r->fn(r->arg, p, n) : 0;
        if (e == -ENODATA)
                snprintf(why, len, "the file ends early (truncated?)");
        else if (e < 0)
                snprintf(why, len, "reading the file: %s", strerror(-e));
        else if (sum && EVP_DigestUpdate(r->md, p, n) != 1)
                e = -EIO;
        return e;
}

static int take_be(struct backup_reader *r, uint64_t *v, int n, char *why, size_t len)
{
        uint8_t b[8];
        int e = take(r, b, (size_t)n, true, why, len);
        *v = e == 0 ? get_be(b, n) : 0; /* set on every path: its callers test e < 0 */
        return e;
}

/* One header line ("key: value\n", no NUL, at most what is left of the
 * header's bytes) into line. */
static int header_line(struct backup_reader *r, char *line, size_t cap, size_t *left, char *why, size_t len)
{
        size_t n = 0;
        for (;;) {
                char c;
                int e;
                if (*left == 0 || n + 1 >= cap) {
                        snprintf(why, len, "not a gadgetd backup: its header is longer than %d bytes",
                                 BACKUP_HEADER_MAX);
                        return -EBADMSG;
                }
                if ((e = take(r, &c, 1, true, why, len)) < 0)
                        return e;
                (*left)--;
                if (c == '\n')
                        break;
                if (c == '\0') {
                        snprintf(why, len, "not a gadgetd backup: a NUL byte in its header");
                        return -EBADMSG;
                }
                line[n++] = c;
        }
        line[n] = '\0';
        return 0;
}

static int header(struct backup_reader *r, struct backup_info *info, char *why, size_t len)
{
        char magic[sizeof BACKUP_MAGIC - 1], line[BACKUP_HEADER_MAX];
        size_t left = BACKUP_HEADER_MAX;
        int e = take(r, magic, sizeof magic, true, why, len);
        if (e < 0 || memcmp(magic, BACKUP_MAGIC, sizeof magic) != 0) {
                if (e == 0 || e == -ENODATA)
                        snprintf(why, len, "not a gadgetd backup (no \"GADGETD-BACKUP\" at its start)");
                return -EBADMSG;
        }
        bool have_format = false;
        memset(info, 0, sizeof *info);
        while ((e = header_line(r, line, sizeof line, &left, why, len)) == 0 && line[0]) {
                char *v = strstr(line, ": ");
                if (!v) {
                        snprintf(why, len, "a header line without \": \"");
                        return -EBADMSG;
                }
                *v = '\0';
                v += 2;
                if (strcmp(line, "format") == 0) {
                        if (strcmp(v, "1") != 0) {
                                snprintf(why, len, "backup format %.20s: this gadgetd reads format %d", v,
                                         BACKUP_FORMAT);
                                return -ENOTSUP;
                        }
                        info->format = BACKUP_FORMAT;
                        have_format = true;
                } else if (strcmp(line, "gadget") == 0) {
                        snprintf(info->gadget, sizeof info->gadget, "%s", v);
                } else if (strcmp(line, "source") == 0) {
                        snprintf(info->source, sizeof info->source, "%s", v);
                } else if (strcmp(line, "taken") == 0) {
                        char *end;
                        errno = 0;
                        long long t = strtoll(v, &end, 10);
                        if (errno || *end || end == v) {
                                snprintf(why, len, "a bad \"taken\" time in the header");
                                return -EBADMSG;
                        }
                        info->taken_ms = t;
                }
                /* Other keys are a later writer's notes: read past. */
        }
        if (e < 0)
                return e;
        if (!have_format || !gadget_name_ok(info->gadget) ||
            (info->source[0] && !gadget_identifier_ok(info->source))) {
                snprintf(why, len, "the header lacks its format or a valid gadget name, or names a bad source");
                return -EBADMSG;
        }
        return 0;
}

int backup_reader_new(backup_read_fn *fn, void *arg, struct backup_info *info, struct backup_reader **out,
                      char *why, size_t len)
{
        struct backup_reader *r = calloc(1, sizeof *r);
        if (!r) {
                snprintf(why, len, "out of memory");
                return -ENOMEM;
        }
        r->fn = fn;
        r->arg = arg;
        int e = -ENOMEM;
        snprintf(why, len, "out of memory");
        if (!(r->md = EVP_MD_CTX_new()) || EVP_DigestInit_ex(r->md, EVP_sha256(), NULL) != 1)
                goto fail;
        if ((e = header(r, info, why, len)) < 0)
                goto fail;
        *out = r;
        return 0;
fail:
        backup_reader_free(r);
        return e;
}

/* A value's bytes as a Value within value.h's limits. Why here: restore
 * writes them to the store, where a gadget later reads them as its own. */
static int check_value(const struct backup_record *rec, char *why, size_t len)
{
        char w[120];
        Gadget__Value *v = value_decode(rec->value, rec->vlen, w, sizeof w);
        if (v) {
                value_free(v);
                return 0;
        }
        snprintf(why, len, "binding %s: a %s that is not a valid value (%s)", rec->binding,
                 rec->kind == BACKUP_KV ? "kv value" : "alarm payload", w);
        return -EBADMSG;
}

/* The end record: the counts and the checksum, and nothing after it. */
static int end(struct backup_reader *r, struct backup_info *info, char *why, size_t len)
{
        uint64_t nk, na;
        uint8_t want[32], got[32], extra;
        unsigned n = 0;
        int e;
        if ((e = take_be(r, &nk, 8, why, len)) < 0 || (e = take_be(r, &na, 8, why, len)) < 0)
                return e;
        if (EVP_DigestFinal_ex(r->md, got, &n) != 1 || n != sizeof got)
                return -EIO;
        if ((e = take(r, want, sizeof want, false, why, len)) < 0)
                return e;
        if (memcmp(want, got, sizeof got) != 0) {
                snprintf(why, len, "the checksum does not match: the file is damaged");
                return -EBADMSG;
        }
        if (nk != r->n[0] || na != r->n[1]) {
                snprintf(why, len, "its end counts %" PRIu64 " keys and %" PRIu64 " alarms, it holds %" PRIu64
                         " and %" PRIu64, nk, na, r->n[0], r->n[1]);
                return -EBADMSG;
        }
        e = r->fn(r->arg, &extra, 1);
        if (e != -ENODATA) {
                snprintf(why, len, e == 0 ? "bytes follow its end" : "reading the file: %s", strerror(-e));
                return e == 0 ? -EBADMSG : e;
        }
        info->n_kv = nk;
        info->n_alarms = na;
        memcpy(info->sha256, got, sizeof got);
        r->ended = true;
        return 0;
}

int backup_read(struct backup_reader *r, struct backup_record *rec, struct backup_info *info, char *why,
                size_t len)
{
        uint8_t kind;
        uint64_t bl, kl, vl, v;
        int e;
        if (r->ended)
                return 0;
        if ((e = take(r, &kind, 1, true, why, len)) < 0)
                return e;
        if (kind == 'E')
                return end(r, info, why, len);
        memset(rec, 0, sizeof *rec);
        rec->kind = (enum backup_kind)kind;
        if (kind != BACKUP_KV && kind != BACKUP_ALARM)
                return check_fields(rec, why, len);
        if ((e = take_be(r, &bl, 1, why, len)) < 0)
                return e;
        if (bl == 0 || bl > BACKUP_BINDING_MAX) {
                snprintf(why, len, "a binding name of %u bytes", (unsigned)bl);
                return -EBADMSG;
        }
        if ((e = take(r, rec->binding, bl, true, why, len)) < 0 || (e = take_be(r, &kl, 2, why, len)) < 0)
                return e;
        rec->binding[bl] = '\0';
        rec->klen = kl;
        rec->key = r->key;
        if (strlen(rec->binding) != bl) {
                snprintf(why, len, "a NUL byte in a binding name");
                return -EBADMSG;
        }
        if (kl > BACKUP_KEY_MAX)
                return check_fields(rec, why, len);
        if ((e = take(r, r->key, kl, true, why, len)) < 0)
                return e;
        if (kind == BACKUP_ALARM) {
                if ((e = take_be(r, &v, 8, why, len)) < 0)
                        return e;
                rec->at = (int64_t)v;
                if ((e = take_be(r, &v, 8, why, len)) < 0)
                        return e;
                rec->due = (int64_t)v;
                if ((e = take_be(r, &v, 4, why, len)) < 0)
                        return e;
                rec->attempts = (uint32_t)v;
        }
        if ((e = take_be(r, &vl, 4, why, len)) < 0)
                return e;
        rec->vlen = vl;
        if ((e = check_fields(rec, why, len)) < 0)
                return e;
        if (r->any && order(&r->last, rec) >= 0) {
                snprintf(why, len, "binding %s: records out of order or repeated", rec->binding);
                return -EBADMSG;
        }
        /* Why this allocation is bounded: vl <= BACKUP_VALUE_MAX, checked above. */
        if (vl > r->val_cap) {
                uint8_t *p = realloc(r->val, vl);
                if (!p) {
                        snprintf(why, len, "out of memory");
                        return -ENOMEM;
                }
                r->val = p;
                r->val_cap = vl;
        }
        if ((e = take(r, r->val, vl, true, why, len)) < 0)
                return e;
        rec->value = r->val;
        if ((e = check_value(rec, why, len)) < 0)
                return e;
        r->n[kind == BACKUP_ALARM]++;
        r->last = *rec;
        memcpy(r->last_key, rec->key, rec->klen);
        r->last.key = r->last_key;
        r->any = true;
        return 1;
}

void backup_reader_free(struct backup_reader *r)
{
        if (!r)
                return;
        EVP_MD_CTX_free(r->md);
        free(r->val);
        free(r);
}
