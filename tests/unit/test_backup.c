/* test_backup: the backup file (proto/backup.c) — what the writer writes
 * reads back the same; every bound, order and damage the reader must
 * refuse is refused with its reason; the writer never writes a file the
 * reader would refuse. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backup.h"
#include "tap.h"

struct buf {
        uint8_t *p;
        size_t len, pos, cap;
        int fail_write;             /* the write that fails (1 the first), 0 none */
};

static int buf_write(void *arg, const void *data, size_t n)
{
        struct buf *b = arg;
        if (b->fail_write && --b->fail_write == 0)
                return -ENOSPC;
        if (b->len + n > b->cap) {
                b->cap = (b->len + n) * 2;
                b->p = realloc(b->p, b->cap);
        }
        memcpy(b->p + b->len, data, n);
        b->len += n;
        return 0;
}

static int buf_read(void *arg, void *data, size_t n)
{
        struct buf *b = arg;
        if (b->pos + n > b->len)
                return -ENODATA;
        memcpy(data, b->p + b->pos, n);
        b->pos += n;
        return 0;
}

/* A packed gadget.Value int_value of small n. */
static const uint8_t one[] = { 0x18, 0x02 };

static struct backup_record rec(enum backup_kind kind, const char *binding, const char *key)
{
        struct backup_record r = { .kind = kind, .key = (const uint8_t *)key, .klen = strlen(key),
                                   .value = one, .vlen = sizeof one, .at = -5, .due = 1LL << 40, .attempts = 7 };
        snprintf(r.binding, sizeof r.binding, "%s", binding);
        return r;
}

static const struct backup_info head = { .gadget = "notes", .source = "sqlite", .taken_ms = 1234 };

/* A file of the records: what the writer made of them. */
static struct buf file_of(const struct backup_record *recs, size_t n)
{
        struct buf b = { 0 };
        struct backup_writer *w;
        if (backup_writer_new(buf_write, &b, &head, &w) == 0) {
                for (size_t i = 0; i < n; i++)
                        backup_write(w, &recs[i]);
                backup_writer_end(w, NULL);
                backup_writer_free(w);
        }
        return b;
}

/* Reads b to its end: 0 with the records counted, or the error and why. */
static int read_all(struct buf *b, size_t *n, char *why, size_t len)
{
        struct backup_info info;
        struct backup_reader *r;
        struct backup_record rec_;
        b->pos = 0;
        *n = 0;
        why[0] = '\0';
        int e = backup_reader_new(buf_read, b, &info, &r, why, len);
        if (e < 0)
                return e;
        while ((e = backup_read(r, &rec_, &info, why, len)) == 1)
                (*n)++;
        backup_reader_free(r);
        return e;
}

static void round_trip(void)
{
        struct backup_record recs[] = { rec(BACKUP_KV, "A", "a"), rec(BACKUP_KV, "A", "ab"), rec(BACKUP_KV, "B", "a"),
                                        rec(BACKUP_ALARM, "W", "x1"), rec(BACKUP_ALARM, "W", "x2") };
        struct buf b = file_of(recs, 5);
        struct backup_info info;
        struct backup_reader *r;
        struct backup_record got;
        char why[200] = "";
        CHECK(backup_reader_new(buf_read, &b, &info, &r, why, sizeof why) == 0, "the header reads: %s", why);
        CHECK_STR(info.gadget, "notes", "its gadget");
        CHECK_STR(info.source, "sqlite", "its source");
        CHECK(info.taken_ms == 1234 && info.format == 1, "its time and format");
        size_t i = 0;
        int e;
        while ((e = backup_read(r, &got, &info, why, sizeof why)) == 1 && i < 5) {
                const struct backup_record *w = &recs[i++];
                CHECK(got.kind == w->kind && strcmp(got.binding, w->binding) == 0 && got.klen == w->klen &&
                              memcmp(got.key, w->key, w->klen) == 0 && got.vlen == 2 &&
                              memcmp(got.value, one, 2) == 0 &&
                              (got.kind == BACKUP_KV || (got.at == -5 && got.due == 1LL << 40 && got.attempts == 7)),
                      "record %zu reads back", i);
        }
        CHECK(e == 0 && i == 5 && info.n_kv == 3 && info.n_alarms == 2, "a sound end: %s", why);
        CHECK(backup_read(r, &got, &info, why, sizeof why) == 0, "and stays at its end");
        backup_reader_free(r);
        free(b.p);
}

static void writer_bounds(void)
{
        struct buf b = { 0 };
        struct backup_writer *w;
        struct backup_info bad = head;
        snprintf(bad.gadget, sizeof bad.gadget, "Not A Name");
        CHECK(backup_writer_new(buf_write, &b, &bad, &w) == -EINVAL, "a bad gadget name is not written");
        CHECK(backup_writer_new(buf_write, &b, &head, &w) == 0, "a writer");
        struct backup_record r = rec(BACKUP_KV, "B", "b");
        CHECK(backup_write(w, &r) == 0, "a record");
        r = rec(BACKUP_KV, "A", "z");
        CHECK(backup_write(w, &r) == -EINVAL, "one out of order is not written");
        r = rec(BACKUP_KV, "B", "b");
        CHECK(backup_write(w, &r) == -EINVAL, "nor one repeated");
        r = rec(BACKUP_KV, "B", "");
        CHECK(backup_write(w, &r) == -EINVAL, "nor an empty key");
        r = rec(BACKUP_KV, "9x", "c");
        CHECK(backup_write(w, &r) == -EINVAL, "nor a binding that is no identifier");
        r = rec(BACKUP_ALARM, "A", "a");
        CHECK(backup_write(w, &r) == 0, "alarms after kv keys, whatever their binding");
        r = rec(BACKUP_KV, "C", "a");
        CHECK(backup_write(w, &r) == -EINVAL, "no kv key after an alarm");
        backup_writer_free(w);
        free(b.p);
        struct buf f = { .fail_write = 1 };
        struct backup_record big = rec(BACKUP_KV, "A", "a");
        CHECK(backup_writer_new(buf_write, &f, &head, &w) == 0, "a writer (buffered)");
        CHECK(backup_write(w, &big) == 0 && backup_writer_end(w, NULL) == -ENOSPC, "a failed write is told");
        backup_writer_free(w);
        free(f.p);
}

/* The file of one kv record with byte at (from the end if negative) set. */
static void refused(struct buf *good, long at, uint8_t v, int want, const char *reason, const char *what)
{
        struct buf b = { .p = malloc(good->len), .len = good->len };
        memcpy(b.p, good->p, good->len);
        b.p[at < 0 ? (long)b.len + at : at] = v;
        size_t n;
        char why[300];
        int e = read_all(&b, &n, why, sizeof why);
        CHECK(e == want && strstr(why, reason), "%s: refused (%d, \"%s\")", what, e, why);
        free(b.p);
}

static void reader_refuses(void)
{
        struct backup_record r = rec(BACKUP_KV, "A", "k");
        struct buf good = file_of(&r, 1);
        size_t n, hl = strstr((char *)good.p, "\n\n") - (char *)good.p + 2;
        char why[300];
        CHECK(read_all(&good, &n, why, sizeof why) == 0 && n == 1, "the good file reads: %s", why);
        refused(&good, 0, 'X', -EBADMSG, "not a gadgetd backup", "another magic");
        refused(&good, (long)strlen(BACKUP_MAGIC) + 8, '2', -ENOTSUP, "format 2", "another format");
        refused(&good, -1, good.p[good.len - 1] ^ 1, -EBADMSG, "checksum", "a damaged checksum");
        refused(&good, (long)hl, 'Z', -EBADMSG, "unknown record kind", "an unknown kind");
        refused(&good, (long)hl + 1, 0, -EBADMSG, "binding name of 0 bytes", "an empty binding");
        refused(&good, (long)hl + 1, 72, -EBADMSG, "binding name of 72 bytes", "a long binding");
        refused(&good, (long)hl + 3, 0x02, -EBADMSG, "a key of 513 bytes", "a long key");
        refused(&good, (long)hl + 6, 0x01, -EBADMSG, "a value of", "a value over its bound");
        refused(&good, (long)hl + 10, 0x0a, -EBADMSG, "not a valid value", "a value that does not decode");
        refused(&good, (long)hl + 2, 0, -EBADMSG, "NUL", "a NUL in a binding");
        refused(&good, -33, 9, -EBADMSG, "checksum", "a changed count (the sum first)");
        struct buf cut = good;
        size_t taken = 0;
        for (cut.len = 0; cut.len < good.len; cut.len++)
                taken += read_all(&cut, &n, why, sizeof why) >= 0;
        CHECK(taken == 0, "every cut of the file is refused (%zu taken)", taken);
        cut.len = good.len - 1;
        CHECK(read_all(&cut, &n, why, sizeof why) == -ENODATA && strstr(why, "ends early"), "truncated: %s", why);
        struct buf more = { .p = malloc(good.len + 1), .len = good.len + 1 };
        memcpy(more.p, good.p, good.len);
        more.p[good.len] = 0;
        CHECK(read_all(&more, &n, why, sizeof why) == -EBADMSG && strstr(why, "follow its end"), "bytes after: %s",
              why);
        free(more.p);
        static const char *const heads[] = {
                BACKUP_MAGIC "gadget: notes\n\n",                              /* no format */
                BACKUP_MAGIC "format: 1\ngadget: Bad\n\n",                     /* a bad name */
                BACKUP_MAGIC "format: 1\ngadget: notes\nsource: a\"b\n\n",     /* a bad source */
                BACKUP_MAGIC "format: 1\ngadget: notes\ntaken: x\n\n",         /* a bad time */
                BACKUP_MAGIC "format: 1\nno colon\n\n",                        /* not key: value */
        };
        for (size_t i = 0; i < sizeof heads / sizeof *heads; i++) {
                struct buf h = { .p = (uint8_t *)heads[i], .len = strlen(heads[i]) };
                CHECK(read_all(&h, &n, why, sizeof why) == -EBADMSG, "header %zu refused: %s", i, why);
        }
        char *long_head = malloc(BACKUP_HEADER_MAX + 64);
        snprintf(long_head, 64, "%s", BACKUP_MAGIC "format: 1\nnote: ");
        size_t at = strlen(long_head);
        memset(long_head + at, 'x', BACKUP_HEADER_MAX + 10);
        struct buf h = { .p = (uint8_t *)long_head, .len = at + BACKUP_HEADER_MAX + 10 };
        CHECK(read_all(&h, &n, why, sizeof why) == -EBADMSG && strstr(why, "longer than"), "a long header: %s", why);
        free(long_head);
        free(good.p);
}

int main(void)
{
        round_trip();
        writer_bounds();
        reader_refuses();
        return tap_done();
}
