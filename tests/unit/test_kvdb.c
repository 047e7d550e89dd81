/* Unit tests of supervisor/store/kvdb.c and its types, kvdb_kv.c: the key
 * range a list reads (the pure successor of a prefix, and lists at its
 * edges: 0xff bytes, cursors before, inside and after the prefix), and
 * quotas, batches (all or nothing: a cas that does not match and a write
 * past the quota mid-batch leave everything as it was); kvdb_alarm.c: the alarms' jobs as the kv thread runs them; on a
 * database in a temporary directory. Through the queue (kvdb_queue.c,
 * kv.c): gets answered on the loop (kvdb_nowait.c) see every write
 * answered before them, a get behind a queued put waits for it, and a get
 * whose pages left the page cache is answered by the thread. */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "store/kv.h"
#include "store/kv_job.h"
#include "store/kvdb.h"
#include "store/kvdb_nowait.h"
#include "store/kvdb_queue.h"
#include "tap.h"

/* The two types as bind_kv.c and bind_alarm.c name them, their SQLite
 * halves only. */
KV_TYPE_HALVES(kv);
KV_TYPE_HALVES(alarm);
static const struct kv_op kv_ops[] = { { "get", false }, { "put", true },  { "delete", true },
                                       { "list", false }, { "cas", true }, { "batch", true } };
static const struct kv_op alarm_ops[] = {
        { "alarm set", true }, { "alarm cancel", true }, { "alarm list", false }, { "alarm look-up", false },
        { "alarm delivery's record", true },
};
static const struct kv_type kv_store = { .name = "kv", .ops = kv_ops, .n_ops = 6, .db = &kvdb_kv_type };
static const struct kv_type alarm_store = { .name = "alarm", .ops = alarm_ops, .n_ops = 5, .db = &kvdb_alarm_type };
static const struct kv_type *const types[] = { &kv_store, &alarm_store };

static void prefix_end_cases(void)
{
        uint8_t end[KV_MAX_KEY];
        CHECK(kvdb_prefix_end("ab", 2, end) == 2 && memcmp(end, "ac", 2) == 0, "successor of \"ab\" is \"ac\"");
        CHECK(kvdb_prefix_end("a\xff\xff", 3, end) == 1 && end[0] == 'b', "trailing 0xff bytes carry");
        CHECK(kvdb_prefix_end("\xff\xff", 2, end) == 0, "all 0xff: no successor");
        CHECK(kvdb_prefix_end("", 0, end) == 0, "empty prefix: no successor");
        CHECK(kvdb_prefix_end("\x00", 1, end) == 1 && end[0] == 1, "a zero byte");
}

struct got {
        char keys[16][16];
        size_t n;
};

static void collect(void *arg, const void *key, size_t klen)
{
        struct got *g = arg;
        if (g->n < 16 && klen < 16) {
                memcpy(g->keys[g->n], key, klen);
                g->keys[g->n][klen] = '\0';
        }
        g->n++;
}

/* The keys of a list, joined by ',' ("" for none), into out. */
static const char *list(struct kvdb *db, const char *prefix, size_t plen, const char *after, unsigned limit,
                        bool *more, char *out)
{
        struct got g = { .n = 0 };
        out[0] = '\0';
        if (kvdb_list(db, "B", prefix, plen, after, strlen(after), limit, collect, &g, more) < 0)
                return "error";
        for (size_t i = 0; i < g.n && i < 16; i++) {
                strcat(out, i ? "," : "");
                strcat(out, g.keys[i]);
        }
        return out;
}

static void list_cases(struct kvdb *db)
{
        static const char *const keys[] = { "a", "ab", "ab\xff", "ac", "b", "\xff", "\xff\xff" };
        struct kvdb_quota q = { UINT64_MAX, UINT64_MAX };
        char out[512];
        bool more, existed;
        for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
                kvdb_put(db, "B", keys[i], strlen(keys[i]), "v", 1, &q);
        kvdb_put(db, "OTHER", "ab0", 3, "v", 1, &q);
        CHECK_STR(list(db, "ab", 2, "", 100, &more, out), "ab,ab\xff", "prefix ab");
        CHECK(!more, "nothing more after the prefix");
        CHECK_STR(list(db, "a", 1, "", 2, &more, out), "a,ab", "limit 2");
        CHECK(more, "more when the limit cut the list");
        CHECK_STR(list(db, "a", 1, "ab", 100, &more, out), "ab\xff,ac", "cursor inside the prefix");
        CHECK_STR(list(db, "ab", 2, "a", 100, &more, out), "ab,ab\xff", "cursor before the prefix");
        CHECK_STR(list(db, "a", 1, "b", 100, &more, out), "", "cursor past the prefix");
        CHECK_STR(list(db, "zz", 2, "", 100, &more, out), "", "unmatched prefix");
        CHECK_STR(list(db, "\xff", 1, "", 100, &more, out), "\xff,\xff\xff", "0xff prefix: up to the end");
        CHECK_STR(list(db, "", 0, "ac", 100, &more, out), "b,\xff,\xff\xff", "no prefix, a cursor");
        CHECK(kvdb_delete(db, "B", "ab", 2, &existed) == 0 && existed, "delete");
        CHECK_STR(list(db, "ab", 2, "", 100, &more, out), "ab\xff", "after the delete");
}

static void quota_cases(struct kvdb *db)
{
        struct kvdb_quota q = { 2, 10 };
        bool existed;
        CHECK(kvdb_put(db, "Q", "k1", 2, "123", 3, &q) == 0, "first put in quota");
        CHECK(kvdb_put(db, "Q", "k2", 2, "45678", 5, &q) == -EDQUOT, "bytes over MaxBytes");
        CHECK(kvdb_put(db, "Q", "k2", 2, "4", 1, &q) == 0, "second key");
        CHECK(kvdb_put(db, "Q", "k3", 2, "5", 1, &q) == -EDQUOT, "a third key over MaxKeys");
        CHECK(kvdb_delete(db, "Q", "k1", 2, &existed) == 0 && existed, "delete frees quota");
        CHECK(kvdb_put(db, "Q", "k3", 2, "5", 1, &q) == 0, "then a put fits");
}

/* A batch job on binding R of quota q, its ops added from (key, cas,
 * expect, value) strings (NULL: none). */
static struct kv_job *batch_job(const struct kvdb_quota *q, const char *const (*ops)[4], size_t n)
{
        struct kv_job *job = kv_job_new(&kv_store, "batch", "R", NULL, NULL);
        for (size_t i = 0; job && i < n; i++) {
                struct kv_batch_op o = { .key = ops[i][0], .klen = strlen(ops[i][0]), .cas = ops[i][1] != NULL,
                                         .expect = ops[i][2], .elen = ops[i][2] ? strlen(ops[i][2]) : 0,
                                         .value = ops[i][3], .vlen = ops[i][3] ? strlen(ops[i][3]) : 0 };
                kv_job_add_op(job, &o);
        }
        job->quota = *q;
        return job;
}

/* The value of key in binding R, or "-" if none, into buf. */
static const char *value_of(struct kvdb *db, const char *key, char *buf)
{
        void *v = NULL;
        size_t n = 0;
        strcpy(buf, "-");
        if (kvdb_get(db, "R", key, strlen(key), &v, &n) == 0 && n < 16) {
                memcpy(buf, v, n);
                buf[n] = '\0';
        }
        free(v);
        return buf;
}

static void batch_cases(struct kvdb *db)
{
        struct kvdb_quota q = { 3, 100 };
        char a[16], b[16], c[16];
        const char *const first[][4] = { { "a", NULL, NULL, "1" }, { "b", NULL, NULL, "2" } };
        struct kv_job *job = batch_job(&q, first, 2);
        CHECK(kvdb_run(db, job) == 0 && job->failed == -1 && job->existed_ops == 0, "two puts applied");
        kv_job_free(job);
        /* A put, then a cas that does not match: nothing written. */
        const char *const stale[][4] = { { "a", NULL, NULL, "9" }, { "c", NULL, NULL, "3" },
                                         { "b", "cas", "1", "x" } };
        job = batch_job(&q, stale, 3);
        CHECK(kvdb_run(db, job) == 0 && job->failed == 2 && job->existed && job->vlen == 1 &&
              memcmp(job->val, "2", 1) == 0, "a stale cas fails the batch, naming it and what is stored");
        kv_job_free(job);
        CHECK(strcmp(value_of(db, "a", a), "1") == 0 && strcmp(value_of(db, "c", c), "-") == 0,
              "nothing of it written (a=%s c=%s)", a, c);
        /* A cas of a key that does not exist, expecting one. */
        const char *const missing[][4] = { { "z", "cas", "1", "x" } };
        job = batch_job(&q, missing, 1);
        CHECK(kvdb_run(db, job) == 0 && job->failed == 0 && !job->existed, "a cas of a missing key");
        kv_job_free(job);
        /* Past MaxKeys= mid-batch: nothing written, the op named. */
        const char *const over[][4] = { { "c", NULL, NULL, "3" }, { "d", NULL, NULL, "4" } };
        job = batch_job(&q, over, 2);
        CHECK(kvdb_run(db, job) == -EDQUOT && job->failed == 1, "a fourth key mid-batch is over MaxKeys");
        kv_job_free(job);
        CHECK(strcmp(value_of(db, "c", c), "-") == 0, "the third key stayed unwritten (c=%s)", c);
        /* A delete makes room; cas with and without a value. */
        const char *const room[][4] = { { "a", NULL, NULL, NULL }, { "c", NULL, NULL, "3" },
                                        { "d", "cas", NULL, "4" }, { "b", "cas", "2", NULL } };
        job = batch_job(&q, room, 4);
        CHECK(kvdb_run(db, job) == 0 && job->failed == -1 && job->existed_ops == 0x9,
              "applied, saying which keys existed (%#llx)", (unsigned long long)job->existed_ops);
        kv_job_free(job);
        CHECK(strcmp(value_of(db, "a", a), "-") == 0 && strcmp(value_of(db, "b", b), "-") == 0 &&
              strcmp(value_of(db, "c", c), "3") == 0, "a and b deleted, c written (%s %s %s)", a, b, c);
        bool existed;
        CHECK(kvdb_delete(db, "R", "c", 1, &existed) == 0 && kvdb_delete(db, "R", "d", 1, &existed) == 0,
              "cleanup");
        struct kvdb_quota one = { 1, 12 };
        CHECK(kvdb_put(db, "R", "k1", 2, "abcdefghij", 10, &one) == 0, "the usage the batches left is right");
}

struct alarms_seen {
        char ids[8][16];
        int64_t due[8];
        unsigned attempts[8];
        size_t n;
};

static void alarm_seen(struct alarms_seen *s, const struct kv_row *a)
{
        if (s->n < 8 && a->idlen < 16) {
                memcpy(s->ids[s->n], a->id, a->idlen);
                s->ids[s->n][a->idlen] = '\0';
                s->due[s->n] = a->due;
                s->attempts[s->n] = a->attempts;
        }
        s->n++;
}

static struct kv_row make_alarm(const char *id, int64_t at, const char *payload)
{
        return (struct kv_row){ .id = id, .idlen = strlen(id), .at = at, .due = at, .payload = payload,
                                    .plen = strlen(payload) };
}

/* A job of op on binding W of alarm a (id, times, payload), as the kv
 * thread is given it. */
static struct kv_job *alarm_job(const char *op, const struct kv_row *a)
{
        struct kv_job *job = kv_job_new(&alarm_store, op, "W", NULL, NULL);
        if (job && a) {
                memcpy(job->key, a->id, a->idlen);
                job->klen = a->idlen;
                job->at = a->at;
                job->due = a->due;
                job->vlen = a->plen;
                if ((job->val = malloc(a->plen + 1)))
                        memcpy(job->val, a->payload, a->plen);
        }
        return job;
}

/* Runs job on db as the kv thread does, and frees it: 0 or -errno. */
static int run(struct kvdb *db, struct kv_job *job)
{
        int e = job ? kvdb_run(db, job) : -ENOMEM;
        e = e < 0 ? e : job->err;
        kv_job_free(job);
        return e;
}

static int alarm_set(struct kvdb *db, const char *binding, const struct kv_row *a, uint64_t max)
{
        struct kv_job *job = alarm_job("alarm set", a);
        if (job) {
                snprintf(job->binding, sizeof job->binding, "%s", binding);
                job->quota.max_keys = max;
        }
        return run(db, job);
}

static int alarm_settle(struct kvdb *db, const struct kv_row *a, int64_t retry_due)
{
        struct kv_job *job = alarm_job("alarm delivery's record", a);
        if (job)
                job->retry_due = retry_due;
        return run(db, job);
}

static int alarm_cancel(struct kvdb *db, const char *id, bool *existed)
{
        struct kv_row a = make_alarm(id, 0, "");
        struct kv_job *job = alarm_job("alarm cancel", &a);
        int e = job ? kvdb_run(db, job) : -ENOMEM;
        if (e == 0)
                *existed = job->existed;
        kv_job_free(job);
        return e;
}

/* The ids after the cursor, at most limit, into s (rows carry no due
 * time or attempts). */
static int alarm_list(struct kvdb *db, const char *after, unsigned limit, struct alarms_seen *s, bool *more)
{
        struct kv_job *job = alarm_job("alarm list", NULL);
        if (!job)
                return -ENOMEM;
        memcpy(job->after, after, job->alen = strlen(after));
        job->limit = limit;
        int e = kvdb_run(db, job);
        struct kv_row a;
        for (size_t pos = 0; e == 0 && kv_job_next_row(job, &pos, &a);)
                alarm_seen(s, &a);
        *more = job->more;
        kv_job_free(job);
        return e;
}

static int alarm_next(struct kvdb *db, struct alarms_seen *s)
{
        struct kv_job *job = alarm_job("alarm look-up", NULL);
        int e = job ? kvdb_run(db, job) : -ENOMEM;
        if (e == 0) {
                struct kv_row a = { .id = job->key, .idlen = job->klen, .at = job->at, .due = job->due,
                                        .attempts = job->attempts, .payload = job->val, .plen = job->vlen };
                alarm_seen(s, &a);
        }
        kv_job_free(job);
        return e;
}

/* The alarms' table, through the jobs of kvdb_run: MaxAlarms (a
 * replacement is not one more), list in id order with a cursor, the next
 * due one, a delivery's settling (only of the alarm delivered), retries
 * moving its due time. */
static void alarm_cases(struct kvdb *db)
{
        struct kv_row a = make_alarm("b", 200, "p"), c = make_alarm("a", 300, "q"), d = make_alarm("c", 100, "r");
        struct alarms_seen s = { .n = 0 };
        bool more, existed;
        CHECK(alarm_set(db, "W", &a, 2) == 0 && alarm_set(db, "W", &c, 2) == 0, "two alarms set");
        CHECK(alarm_set(db, "W", &d, 2) == -EDQUOT, "a third refused (MaxAlarms=2)");
        CHECK(alarm_set(db, "W", &a, 2) == 0, "setting one again replaces it");
        CHECK(alarm_set(db, "OTHER", &d, 2) == 0, "another binding counts apart");
        CHECK(alarm_list(db, "", 1, &s, &more) == 0 && s.n == 1 && more && strcmp(s.ids[0], "a") == 0,
              "list: ids in order, a page of one");
        s.n = 0;
        CHECK(alarm_list(db, "a", 10, &s, &more) == 0 && s.n == 1 && !more && strcmp(s.ids[0], "b") == 0,
              "list on from the cursor");
        s.n = 0;
        CHECK(alarm_next(db, &s) == 0 && s.n == 1 && strcmp(s.ids[0], "b") == 0 && s.due[0] == 200,
              "next: the first due");
        CHECK(alarm_settle(db, &a, 900) == 0, "a failed delivery moves its due time");
        s.n = 0;
        CHECK(alarm_next(db, &s) == 0 && strcmp(s.ids[0], "a") == 0, "then the other is first");
        struct kv_row stale = make_alarm("a", 300, "other payload");
        CHECK(alarm_settle(db, &stale, -1) == 0 && alarm_cancel(db, "a", &existed) == 0 && existed,
              "settling another alarm than the one delivered deletes nothing");
        s.n = 0;
        CHECK(alarm_next(db, &s) == 0 && strcmp(s.ids[0], "b") == 0 && s.due[0] == 900 && s.attempts[0] == 1,
              "its attempts counted");
        struct kv_row moved = make_alarm("b", 200, "p");
        moved.due = 900;
        CHECK(alarm_settle(db, &moved, -1) == 0, "a delivered alarm deleted");
        s.n = 0;
        CHECK(alarm_next(db, &s) == -ENOENT && s.n == 0, "none left");
        CHECK(alarm_cancel(db, "a", &existed) == 0 && !existed, "cancel of none");
}

/* A job's answer through the queue, and whether it came before
 * kv_submit returned (on the loop, not through the thread). */
struct answer {
        bool done, at_once;
        int err;
        char val[32];
        size_t vlen;
};

static bool submitting;

static void answered(struct kv_job *job)
{
        struct answer *a = job->arg;
        a->done = true;
        a->at_once = submitting;
        a->err = job->err;
        a->vlen = job->vlen;
        snprintf(a->val, sizeof a->val, "%.*s", job->err == 0 ? (int)job->vlen : 0, (const char *)job->val);
}

static void submit(struct kv *kv, const char *op, const char *key, const char *val, struct answer *a)
{
        struct kv_job *job = kv_job_new(&kv_store, op, "B", answered, a);
        *a = (struct answer){ .err = 1 };
        job->klen = strlen(key);
        memcpy(job->key, key, job->klen);
        job->quota = (struct kvdb_quota){ UINT64_MAX, UINT64_MAX };
        if (val) {
                job->val = strdup(val);
                job->vlen = strlen(val);
        }
        submitting = true;
        if (kv_submit(kv, job, 100) < 0) {
                a->err = -EIO;
                a->done = true;
                kv_job_free(job);
        }
        submitting = false;
}

/* Runs the loop until a is answered (the thread's answer wakes it). */
static void wait_answer(struct event_base *base, struct answer *a)
{
        while (!a->done)
                event_base_loop(base, EVLOOP_ONCE);
}

/* Drops the database's pages from the page cache (clean: the WAL is
 * synced at each commit). */
static void drop_cache(const char *dir)
{
        static const char *const ext[] = { "sqlite", "sqlite-wal" };
        char path[256];
        for (size_t i = 0; i < 2; i++) {
                snprintf(path, sizeof path, "%s/kv/q.%s", dir, ext[i]);
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd >= 0) {
                        fdatasync(fd);
                        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
                        close(fd);
                }
        }
}

static void queue_cases(const char *dir)
{
        struct event_base *base = event_base_new();
        struct kv_backend *be = NULL;
        struct kv *kv = NULL;
        struct answer put, get;
        char why[160];
        CHECK(kvdb_backend_new(base, dir, types, 2, &be, why, sizeof why) == 0 && kv_open(base, "q", be, &kv) == 0,
              "a queue: %s", why);
        if (!kv)
                return;
        /* The get is submitted while the put is still queued: it waits. */
        submit(kv, "put", "k", "one", &put);
        submit(kv, "get", "k", NULL, &get);
        wait_answer(base, &put);
        wait_answer(base, &get);
        CHECK(put.err == 0 && !get.at_once && get.err == 0 && strcmp(get.val, "one") == 0,
              "a get behind a queued put sees it (at once: %d, err %d, %s)", get.at_once, get.err, get.val);
        submit(kv, "get", "k", NULL, &get);
        CHECK(get.at_once && get.err == 0 && strcmp(get.val, "one") == 0,
              "a get on an idle queue is answered on the loop (at once: %d, %s)", get.at_once, get.val);
        /* Again, now that the loop has its connection. */
        submit(kv, "put", "k", "queued", &put);
        submit(kv, "get", "k", NULL, &get);
        wait_answer(base, &put);
        wait_answer(base, &get);
        CHECK(!get.at_once && strcmp(get.val, "queued") == 0,
              "a get behind a queued put waits for it, the loop's connection open (at once: %d, %s)", get.at_once,
              get.val);
        submit(kv, "put", "k", "two", &put);
        wait_answer(base, &put);
        submit(kv, "get", "k", NULL, &get);
        CHECK(get.at_once && strcmp(get.val, "two") == 0, "the loop's get sees the put answered before it: %s",
              get.val);
        submit(kv, "delete", "k", NULL, &put);
        wait_answer(base, &put);
        submit(kv, "get", "k", NULL, &get);
        CHECK(get.at_once && get.err == -ENOENT, "the loop's get sees the delete: %d", get.err);
        submit(kv, "get", "missing", NULL, &get);
        CHECK(get.at_once && get.err == -ENOENT, "a missing key, on the loop: %d", get.err);

        /* A value of a few KiB (on an overflow page) still on the loop; one
         * past what the loop reads for a get (32 KiB) is the thread's.
         * (The small one first: a lookup that passes the large record
         * reads all of it, and goes to the thread too.) */
        char value[100001];
        memset(value, 's', 3000);
        value[3000] = 0;
        submit(kv, "put", "small", value, &put);
        wait_answer(base, &put);
        submit(kv, "get", "small", NULL, &get);
        CHECK(get.at_once && get.err == 0 && strncmp(get.val, "sss", 3) == 0,
              "a 3,000-byte value, on the loop (at once: %d, err %d)", get.at_once, get.err);
        memset(value, 'b', sizeof value - 1);
        value[sizeof value - 1] = 0;
        submit(kv, "put", "big", value, &put);
        wait_answer(base, &put);
        for (int i = 0; i < 2; i++) {
                struct kvdb_nowait_counts c0, c1;
                kvdb_nowait_counts(&c0);
                submit(kv, "get", "big", NULL, &get);
                wait_answer(base, &get);
                kvdb_nowait_counts(&c1);
                CHECK(!get.at_once && get.err == 0 && get.vlen == sizeof value - 1 && strncmp(get.val, "bbb", 3) == 0 &&
                              c1.over_budget > c0.over_budget && c1.answered == c0.answered,
                      "a 100,000-byte value goes to the thread (get %d: at once %d, err %d, over budget %llu -> %llu)",
                      i, get.at_once, get.err, (unsigned long long)c0.over_budget,
                      (unsigned long long)c1.over_budget);
        }
        submit(kv, "delete", "big", NULL, &put);
        wait_answer(base, &put);
        submit(kv, "delete", "small", NULL, &put);
        wait_answer(base, &put);

        /* Pages out of the page cache: the loop's read is refused at once
         * and the thread answers. (On tmpfs nothing leaves the cache.) */
        struct statfs sf;
        if (statfs(dir, &sf) == 0 && sf.f_type != TMPFS_MAGIC) {
                submit(kv, "put", "k", "three", &put);
                wait_answer(base, &put);
                drop_cache(dir);
                uint64_t refused = kvdb_nowait_refused();
                submit(kv, "get", "k", NULL, &get);
                wait_answer(base, &get);
                CHECK(!get.at_once && get.err == 0 && strcmp(get.val, "three") == 0 &&
                      kvdb_nowait_refused() > refused,
                      "a get whose pages are not cached goes to the thread (at once: %d, refused %llu -> %llu, %s)",
                      get.at_once, (unsigned long long)refused, (unsigned long long)kvdb_nowait_refused(),
                      get.val);
                submit(kv, "get", "k", NULL, &get);
                CHECK(get.at_once && strcmp(get.val, "three") == 0, "then, cached again, on the loop: %s", get.val);
        }
        kv_close(kv);
        kv_backend_free(be);
        event_base_free(base);
}

int main(void)
{
        char dir[] = "/tmp/kvdb-test-XXXXXX";
        struct kvdb *db = NULL;
        prefix_end_cases();
        CHECK(mkdtemp(dir) != NULL, "temporary directory");
        char why[160];
        CHECK(kvdb_types_ok(types, 2, why, sizeof why), "both types' halves carry out their operations: %s", why);
        const struct kv_op more[] = { { "alarm set", true }, { "alarm snooze", true } };
        struct kv_type lacking = { .name = "alarm", .ops = more, .n_ops = 2, .db = &kvdb_alarm_type };
        const struct kv_type *bad[] = { &kv_store, &lacking };
        CHECK(!kvdb_types_ok(bad, 2, why, sizeof why) && strstr(why, "\"alarm snooze\"") && strstr(why, "SQLite"),
              "a half lacking an operation is refused, naming it: %s", why);
        CHECK(kvdb_open(dir, "g", types, 2, &db) == 0, "open");
        if (db) {
                list_cases(db);
                quota_cases(db);
                batch_cases(db);
                alarm_cases(db);
                struct kv_job *job = kv_job_new(&lacking, "alarm snooze", "W", NULL, NULL);
                CHECK(run(db, job) == -EINVAL, "a job of an operation its half lacks is refused");
                kvdb_close(db);
        }
        queue_cases(dir);
        char cmd[64];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0)
                CHECK(0, "cleanup");
        return tap_done();
}
