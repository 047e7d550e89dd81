/* Unit tests of supervisor/store/kv_job.c: the rows a list or an alarm
 * look-up packs in a job read back as they went in, the alarm rows stop at
 * their byte bound, a stand-in answers for a running job, and which
 * operations write (a lost connection leaves only those unknown). */
#include <stdlib.h>
#include <string.h>

#include "store/kv_job.h"
#include "tap.h"

static void test_keys(void)
{
        struct kv_job *job = kv_job_new(KV_LIST, "b", NULL, NULL);
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
        struct kv_job *job = kv_job_new(KV_ALARM_LIST, "al", NULL, NULL);
        size_t big = KV_ALARM_LIST_BYTES;
        char *payload = calloc(1, big);
        struct kvdb_alarm a = { .id = "one", .idlen = 3, .at = -5, .payload = "p", .plen = 1 };
        kv_job_add_alarm(job, &a);
        a = (struct kvdb_alarm){ .id = "two", .idlen = 3, .at = 1700000000000, .payload = payload, .plen = big };
        kv_job_add_alarm(job, &a);
        CHECK(job->n_keys == 1 && job->more, "a row past KV_ALARM_LIST_BYTES is left for the next list");
        struct kvdb_alarm r;
        size_t pos = 0;
        CHECK(kv_job_next_alarm(job, &pos, &r) && r.idlen == 3 && memcmp(r.id, "one", 3) == 0 && r.at == -5 &&
                      r.plen == 1 && memcmp(r.payload, "p", 1) == 0,
              "the row reads back: id, time, payload");
        CHECK(!kv_job_next_alarm(job, &pos, &r), "then the end");
        kv_job_free(job);

        job = kv_job_new(KV_ALARM_LIST, "al", NULL, NULL);
        kv_job_add_alarm(job, &a);
        CHECK(job->n_keys == 1 && !job->more, "a first row is taken, even past the bound");
        kv_job_free(job);

        job = kv_job_new(KV_ALARM_NEXT, "al", NULL, NULL);
        a = (struct kvdb_alarm){ .id = "x", .idlen = 1, .at = 7, .due = 9, .attempts = 2, .payload = "pp", .plen = 2 };
        kv_job_take_alarm(job, &a);
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
        struct kv_job *job = kv_job_new(KV_PUT, "bind", answered, &tap_n);
        job->user_done = answered;
        job->kv = (struct kv *)job;
        struct kv_job s = kv_job_stand_in(job);
        CHECK(s.op == KV_PUT && strcmp(s.binding, "bind") == 0 && s.done == answered && s.user_done == answered &&
                      s.arg == &tap_n && s.kv == job->kv && s.err == -ECANCELED && !s.val && !s.keys,
              "a stand-in: the caller, the store and the binding, cancelled, owning nothing");
        kv_job_free(job);
}

static void test_ops(void)
{
        static const enum kv_op writes[] = { KV_PUT, KV_DELETE, KV_ALARM_SET, KV_ALARM_CANCEL, KV_ALARM_SETTLE };
        static const enum kv_op reads[] = { KV_GET, KV_LIST, KV_ALARM_LIST, KV_ALARM_NEXT };
        for (size_t i = 0; i < sizeof writes / sizeof *writes; i++)
                CHECK(kv_op_writes(writes[i]), "%s writes", kv_op_name(writes[i]));
        for (size_t i = 0; i < sizeof reads / sizeof *reads; i++)
                CHECK(!kv_op_writes(reads[i]), "%s reads", kv_op_name(reads[i]));
        CHECK_STR(kv_op_name(KV_ALARM_SETTLE), "alarm delivery's record", "a settle's name");
        CHECK_STR(kv_op_name((enum kv_op)99), "operation", "an unknown operation's name");
        CHECK(!kv_op_writes((enum kv_op)99), "an unknown operation does not write");
}

int main(void)
{
        test_keys();
        test_alarms();
        test_stand_in();
        test_ops();
        return tap_done();
}
