/* bind_alarm: the operations of an alarm binding — set, list, cancel —
 * on the gadget's store (kv.c's queue, kvdb_alarm.c or the PostgreSQL
 * store), answered once the store is done: a set only once it is durable.
 * gadgetd delivers the alarms (alarms/alarms.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "bind_kv.h"
#include "bindings.h"
#include "contract.h"
#include "ops.h"
#include "store/store.h"
#include "policy.h"
#include "value.h"

/* Its operations on the store (kv_job.h), by their names, and their
 * halves: kvdb_alarm.c (SQLite), kvpg_alarm.c (PostgreSQL). The look-up
 * and the delivery's record are the scheduler's (alarms/). */
KV_TYPE_HALVES(alarm);
static const struct kv_op store_ops[] = {
        { "alarm set", true }, { "alarm cancel", true }, { "alarm list", false }, { "alarm look-up", false },
        { "alarm delivery's record", true },
};
static const struct kv_type alarm_store = { .name = "alarm", .ops = store_ops,
                                            .n_ops = sizeof store_ops / sizeof *store_ops,
                                            .db = &kvdb_alarm_type, .pg = &kvpg_alarm_type };

#define LIST_DEFAULT 100
/* An alarm's id: 1 to 128 characters (of UTF-8: at most KV_MAX_KEY bytes). */
#define ALARM_ID "string(1..128)"

int64_t bind_alarm_now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Why the id is checked beyond its signature: it is stored as text and
 * shown in logs and gadgetctl, so no NUL (a C string cannot hold one) and
 * no control characters. */
static int check_id(const Gadget__Value *v, const char *field, char *why, size_t len)
{
        if (!v)
                return 0;
        for (const char *s = v->string_value; *s; s++)
                if ((unsigned char)*s < 0x20 || *s == 0x7f) {
                        snprintf(why, len, "\"%s\" must not contain control characters", field);
                        return -EINVAL;
                }
        return 0;
}

static int check_set(const Gadget__Value *args, char *why, size_t len)
{
        bool at = value_map_get(args, "at"), delay = value_map_get(args, "delay");
        if (at == delay) {
                snprintf(why, len, "set needs one of \"at\" (ms since the epoch) or \"delay\" (ms from now)");
                return -EINVAL;
        }
        return check_id(value_map_get(args, "id"), "id", why, len);
}

static int check_cancel(const Gadget__Value *args, char *why, size_t len)
{
        return check_id(value_map_get(args, "id"), "id", why, len);
}

static int check_list(const Gadget__Value *args, char *why, size_t len)
{
        return check_id(value_map_get(args, "cursor"), "cursor", why, len);
}

/* The scheduler learns that the binding's alarms changed. */
static void changed(struct binding_req *r)
{
        if (r->g && r->g->alarms_changed)
                r->g->alarms_changed(r->g->alarms_arg);
}

static void set_done(struct kv_job *job)
{
        struct binding_req *r = job->arg;
        char msg[192];
        if (job->err == -EDQUOT) {
                snprintf(msg, sizeof msg, "alarm binding %s holds its MaxAlarms=%" PRIu64 " alarms already",
                         job->binding, job->quota.max_keys);
                bindings_reply(r, NULL, GADGET_ELIMIT, msg, 0);
                return;
        }
        if (job->err < 0) {
                bind_kv_failed(r, job);
                return;
        }
        Gadget__Value *id = value_new_string_len((const char *)job->key, job->klen);
        changed(r);
        bindings_reply(r, id, 0, NULL, 0);
        value_free(id);
}

static void cancel_done(struct kv_job *job)
{
        struct binding_req *r = job->arg;
        if (job->err < 0) {
                bind_kv_failed(r, job);
                return;
        }
        Gadget__Value *v = value_new_bool(job->existed);
        if (job->existed)
                changed(r);
        bindings_reply(r, v, 0, NULL, 0);
        value_free(v);
}

/* {id, at, payload} of one listed alarm; NULL if out of memory or its
 * payload does not decode. */
static Gadget__Value *alarm_value(const struct kv_row *a)
{
        Gadget__Value *m = value_new_map();
        Gadget__Value *payload = value_unpack(a->payload, a->plen);
        if (!m || !payload) {
                value_free(m);
                value_free(payload);
                return NULL;
        }
        value_map_set(m, "id", value_new_string_len(a->id, a->idlen));
        value_map_set(m, "at", value_new_int(a->at));
        value_map_set(m, "payload", payload);
        return m;
}

static void list_done(struct kv_job *job)
{
        struct binding_req *r = job->arg;
        if (job->err < 0) {
                bind_kv_failed(r, job);
                return;
        }
        Gadget__Value *alarms = value_new_list(), *res = value_new_map();
        struct kv_row a, last = { 0 };
        size_t pos = 0;
        if (!alarms || !res)
                goto fail;
        while (kv_job_next_row(job, &pos, &a)) {
                Gadget__Value *v = alarm_value(&a);
                if (!v || value_list_append(alarms, v) < 0)
                        goto fail;
                last = a;
        }
        /* The cursor is the last id returned; list again with it to go on. */
        value_map_set(res, "alarms", alarms);
        value_map_set(res, "cursor", job->more && last.id ? value_new_string_len(last.id, last.idlen)
                                                          : value_new_null());
        bindings_reply(r, res, 0, NULL, gadget__value__get_packed_size(res));
        value_free(res);
        return;
fail:
        value_free(alarms);
        value_free(res);
        bindings_reply(r, NULL, GADGET_EINTERNAL, "out of memory or a stored payload does not decode", 0);
}

/* A new alarm's id: 16 random hex digits, "a-" before them. */
static int new_id(char *out, size_t len)
{
        uint8_t rnd[8];
        if (getrandom(rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
                return -EAGAIN;
        size_t o = (size_t)snprintf(out, len, "a-");
        for (size_t i = 0; i < sizeof rnd && o + 2 < len; i++)
                o += (size_t)snprintf(out + o, len - o, "%02x", rnd[i]);
        return 0;
}

/* The set's id, time and packed payload into job; false (answered) if
 * refused. */
static bool set_args(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args,
                     struct kv_job *job)
{
        char msg[192], gen[40];
        const Gadget__Value *at = value_map_get(args, "at"), *delay = value_map_get(args, "delay");
        const Gadget__Value *id = value_map_get(args, "id"), *payload = value_map_get(args, "payload");
        const char *ids = id ? id->string_value : gen;
        Gadget__Value *null = NULL;

        if (!id && new_id(gen, sizeof gen) < 0) {
                bindings_reply(r, NULL, GADGET_EUNAVAILABLE, "no randomness for an alarm id yet", 0);
                return false;
        }
        job->klen = strlen(ids);
        memcpy(job->key, ids, job->klen);
        job->at = at ? at->int_value : bind_alarm_now_ms() + delay->int_value;
        if (!payload && !(payload = null = value_new_null())) {
                bindings_reply(r, NULL, GADGET_EINTERNAL, "out of memory", 0);
                return false;
        }
        size_t len = gadget__value__get_packed_size(payload);
        if (len > b->max_payload) {
                snprintf(msg, sizeof msg, "payload of %zu bytes is over MaxPayloadSize (%" PRIu64 ")", len,
                         b->max_payload);
                bindings_reply(r, NULL, GADGET_ELIMIT, msg, 0);
                value_free(null);
                return false;
        }
        if (!(job->val = malloc(len ? len : 1))) {
                bindings_reply(r, NULL, GADGET_EINTERNAL, "out of memory", 0);
                value_free(null);
                return false;
        }
        gadget__value__pack(payload, job->val);
        job->vlen = len;
        job->quota.max_keys = b->max_alarms;
        value_free(null);
        return true;
}

/* The job of r's operation; NULL (answered) if the call is refused. */
static struct kv_job *make_job(struct binding_req *r, const struct policy_binding *b, const char *op,
                               kv_done_fn *done, const Gadget__Value *args)
{
        struct kv_job *job = kv_job_new(&alarm_store, op, b->name, done, r);
        const Gadget__Value *v;
        if (!job) {
                bindings_reply(r, NULL, GADGET_EINTERNAL, "out of memory", 0);
                return NULL;
        }
        if (kv_job_is(job, "alarm set") && !set_args(r, b, args, job)) {
                kv_job_free(job);
                return NULL;
        }
        if (kv_job_is(job, "alarm cancel") && (v = value_map_get(args, "id"))) {
                job->klen = strlen(v->string_value);
                memcpy(job->key, v->string_value, job->klen);
        }
        if (kv_job_is(job, "alarm list")) {
                if ((v = value_map_get(args, "cursor"))) {
                        job->alen = strlen(v->string_value);
                        memcpy(job->after, v->string_value, job->alen);
                }
                v = value_map_get(args, "limit");
                job->limit = v ? (unsigned)v->int_value : LIST_DEFAULT;
        }
        return job;
}

static void set(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args)
{
        bind_kv_start(r, b, "alarm set", set_done, args, make_job);
}

static void list(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args)
{
        bind_kv_start(r, b, "alarm list", list_done, args, make_job);
}

static void cancel(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args)
{
        bind_kv_start(r, b, "alarm cancel", cancel_done, args, make_job);
}

/* Each signature is checked first, then the row's check for what a type
 * cannot say (an id's characters, one of at and delay). */
static struct binding_op ops[] = {
        BINDING_OP("set(at?: int(0..253402300799999), delay?: int(0..315360000000), payload?: any, id?: " ALARM_ID
                   ") -> string", check_set, set),
        BINDING_OP("list(cursor?: " ALARM_ID ", limit?: int(1..1000)) -> "
                   "{alarms: list<{id: string, at: int, payload: any}>, cursor: string?}", check_list, list),
        BINDING_OP("cancel(id: " ALARM_ID ") -> bool", check_cancel, cancel),
};

const struct binding_type_ops bind_alarm_type = {
        .type = BINDING_ALARM, .ops = ops, .n_ops = sizeof ops / sizeof *ops, .store = &alarm_store,
};
