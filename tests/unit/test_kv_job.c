/* Unit tests of supervisor/store/kv_job.c: the rows a list or an alarm
 * look-up packs in a job read back as they went in, the alarm rows stop at
 * their byte bound, a stand-in answers for a running job, a job is one of
 * its type's operations (which says whether it writes: a lost connection
 * leaves only those unknown), and a type's half is checked against them;
 * a batch's operations read back as they went in, and bytes that are not
 * a well-formed batch (cut short, lengths past the end) are refused
 * without reading past them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/kv_job.h"
#include "tap.h"

/* A type of the test's own (its halves are not used here). */
static const struct kv_op ops[] = { { "get", false }, { "put", true }, { "list", false }, { "settle", true } };
static const struct kv_type type = { .name = "t", .ops = ops, .n_ops = 4 };

static void test_keys(void)
{
        struct kv_job *job = kv_job_new(&type, "list", "b", NULL, NULL);
        static uint8_t big[KV_MAX_KEY];
        memset(big, 0xab, sizeof big);
        kv_job_add_key(job, "a", 1);
        kv_job_add_key(job, big, sizeof big);
        kv_job_add_key(job, "", 0);
        const void *k;
        size_t klen, pos = 0;
        CHECK(job->n_keys == 3 && job->err == 0, "3 keys added");
        CHECK(kv_job_next_key(job, &pos, &k, &klen) && klen == 1 && memcmp(k, "a", 1) == 0, "the first key");
        CHECK(kv_job_next_key(job, &pos, &k, &klen) && klen == sizeof big && memcmp(k, big, klen) == 0,
              "the longest key, whole");
        CHECK(kv_job_next_key(job, &pos, &k, &klen) && klen == 0, "an empty key");
        CHECK(!kv_job_next_key(job, &pos, &k, &klen), "then the end");
        kv_job_free(job);
}

static void test_alarms(void)
{
        struct kv_job *job = kv_job_new(&type, "list", "al", NULL, NULL);
        size_t big = KV_ROWS_BYTES;
        char *payload = calloc(1, big);
        struct kv_row a = { .id = "one", .idlen = 3, .at = -5, .payload = "p", .plen = 1 };
        kv_job_add_row(job, &a);
        a = (struct kv_row){ .id = "two", .idlen = 3, .at = 1700000000000, .payload = payload, .plen = big };
        kv_job_add_row(job, &a);
        CHECK(job->n_keys == 1 && job->more, "a row past KV_ROWS_BYTES is left for the next list");
        struct kv_row r;
        size_t pos = 0;
        CHECK(kv_job_next_row(job, &pos, &r) && r.idlen == 3 && memcmp(r.id, "one", 3) == 0 && r.at == -5 &&
                      r.plen == 1 && memcmp(r.payload, "p", 1) == 0,
              "the row reads back: id, time, payload");
        CHECK(!kv_job_next_row(job, &pos, &r), "then the end");
        kv_job_free(job);

        job = kv_job_new(&type, "list", "al", NULL, NULL);
        kv_job_add_row(job, &a);
        CHECK(job->n_keys == 1 && !job->more, "a first row is taken, even past the bound");
        kv_job_free(job);

        job = kv_job_new(&type, "get", "al", NULL, NULL);
        a = (struct kv_row){ .id = "x", .idlen = 1, .at = 7, .due = 9, .attempts = 2, .payload = "pp", .plen = 2 };
        kv_job_take_row(job, &a);
        CHECK(job->klen == 1 && job->key[0] == 'x' && job->at == 7 && job->due == 9 && job->attempts == 2 &&
                      job->vlen == 2 && memcmp(job->val, "pp", 2) == 0 && job->val != a.payload,
              "a look-up copies the alarm into the job");
        kv_job_free(job);
        free(payload);
}

static void answered(struct kv_job *job)
{
        (void)job;
}

static void test_stand_in(void)
{
        struct kv_job *job = kv_job_new(&type, "put", "bind", answered, &tap_n);
        job->user_done = answered;
        job->kv = (struct kv *)job;
        struct kv_job s = kv_job_stand_in(job);
        CHECK(s.type == &type && s.op == &ops[1] && strcmp(s.binding, "bind") == 0 && s.done == answered &&
                      s.user_done == answered && s.arg == &tap_n && s.kv == job->kv && s.err == -ECANCELED &&
                      !s.val && !s.keys,
              "a stand-in: the caller, the store and the binding, cancelled, owning nothing");
        kv_job_free(job);
}

static void test_ops(void)
{
        for (size_t i = 0; i < 4; i++) {
                struct kv_job *job = kv_job_new(&type, ops[i].name, "b", NULL, NULL);
                CHECK(job && job->type == &type && job->op == &ops[i] && kv_job_is(job, ops[i].name) &&
                              job->op->writes == ops[i].writes,
                      "a %s job is the type's %s, which %s", ops[i].name, ops[i].name,
                      ops[i].writes ? "writes" : "reads");
                kv_job_free(job);
        }
        CHECK(kv_job_new(&type, "delete", "b", NULL, NULL) == NULL, "no job of an operation the type lacks");

        static const char *const names[] = { "settle", "list", "get", "put" };
        char why[160] = "";
        CHECK(kv_op_find(names, 4, "get") == 2 && kv_op_find(names, 4, "got") == -1, "a half's operation by name");
        CHECK(kv_type_covered(&type, "SQLite", names, 4, why, sizeof why), "a half with every operation");
        CHECK(!kv_type_covered(&type, "PostgreSQL", names, 3, why, sizeof why), "a half lacking one");
        CHECK_STR(why, "the PostgreSQL half of the t type has no operation \"put\"", "says which");
}

static void test_batch_ops(void)
{
        struct kv_job *job = kv_job_new(&type, "put", "b", NULL, NULL);
        static uint8_t big[KV_MAX_KEY];
        memset(big, 0xcd, sizeof big);
        struct kv_batch_op in[] = {
                { .cas = false, .key = "a", .klen = 1, .value = "v1", .vlen = 2 },
                { .cas = false, .key = big, .klen = sizeof big },
                { .cas = true, .key = "c", .klen = 1, .expect = "old", .elen = 3 },
                { .cas = true, .key = "d", .klen = 1, .value = "", .vlen = 0 },
        }, out;
        CHECK(job->failed == -1, "a new job names no failed operation");
        for (size_t i = 0; i < 4; i++)
                CHECK(kv_job_add_op(job, &in[i]) == 0, "op %zu added", i);
        size_t pos = 0, n = 0;
        int r;
        while ((r = kv_job_next_op(job, &pos, &out)) > 0) {
                const struct kv_batch_op *o = &in[n++];
                CHECK(out.cas == o->cas && out.klen == o->klen && memcmp(out.key, o->key, o->klen) == 0 &&
                      !out.expect == !o->expect && out.elen == o->elen &&
                      (!o->elen || memcmp(out.expect, o->expect, o->elen) == 0) && !out.value == !o->value &&
                      out.vlen == o->vlen && (!o->vlen || memcmp(out.value, o->value, o->vlen) == 0),
                      "op %zu read back as it went in", n - 1);
        }
        CHECK(r == 0 && n == 4, "4 ops, then the end (%d, %zu)", r, n);
        /* Each cut of the bytes short of an op's end is refused. */
        size_t whole = job->vlen, refused = 0, cuts = 0;
        for (size_t cut = 1; cut < whole; cut++) {
                job->vlen = cut;
                pos = 0;
                while ((r = kv_job_next_op(job, &pos, &out)) > 0)
                        ;
                cuts++;
                refused += r < 0 || pos == cut;
        }
        CHECK(refused == cuts, "every cut is refused or ends on an op's end (%zu of %zu)", refused, cuts);
        job->vlen = whole;
        uint8_t *b = job->val;
        b[1] = 0xff; /* the first key's length past the end */
        pos = 0;
        CHECK(kv_job_next_op(job, &pos, &out) == -EIO, "a key length past the end refused");
        b[1] = 0;
        b[0] = 0x80;
        pos = 0;
        CHECK(kv_job_next_op(job, &pos, &out) == -EIO, "unknown flags refused");
        b[0] = 4;
        b[4] = 0xff; /* the first expect's length: 4 GiB */
        pos = 0;
        CHECK(kv_job_next_op(job, &pos, &out) == -EIO, "an expect length past the end refused");
        kv_job_free(job);
}

int main(void)
{
        test_keys();
        test_batch_ops();
        test_alarms();
        test_stand_in();
        test_ops();
        return tap_done();
}
