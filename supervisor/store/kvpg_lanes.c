/* kvpg_lanes: gadgets take turns on the PostgreSQL store's connection. */
#include "kvpg_lanes.h"

#include <errno.h>
#include <stdlib.h>

#include "kv_job.h"

struct kvpg_lane {
        const struct kv *owner;
        struct kv_job *todo, **tail;
        struct kvpg_lane *next;
};

void kvpg_lanes_init(struct kvpg_lanes *q)
{
        q->first = NULL;
        q->tail = &q->first;
}

bool kvpg_lanes_empty(const struct kvpg_lanes *q)
{
        return !q->first;
}

static void append(struct kvpg_lanes *q, struct kvpg_lane *l)
{
        l->next = NULL;
        *q->tail = l;
        q->tail = &l->next;
}

int kvpg_lanes_put(struct kvpg_lanes *q, struct kv_job *job)
{
        struct kvpg_lane *l = q->first;
        while (l && l->owner != job->kv)
                l = l->next;
        if (!l) {
                if (!(l = calloc(1, sizeof *l)))
                        return -ENOMEM;
                l->owner = job->kv;
                l->tail = &l->todo;
                append(q, l);
        }
        job->next = NULL;
        *l->tail = job;
        l->tail = &job->next;
        return 0;
}

struct kv_job *kvpg_lanes_next(struct kvpg_lanes *q)
{
        struct kvpg_lane *l = q->first;
        if (!l)
                return NULL;
        struct kv_job *job = l->todo;
        if (!(l->todo = job->next))
                l->tail = &l->todo;
        job->next = NULL;
        if (!(q->first = l->next))
                q->tail = &q->first;
        if (l->todo)
                append(q, l);
        else
                free(l);
        return job;
}

struct kv_job *kvpg_lanes_take(struct kvpg_lanes *q, const struct kv *owner)
{
        struct kv_job *list = NULL, **tail = &list;
        struct kvpg_lane **pp = &q->first;
        while (*pp) {
                struct kvpg_lane *l = *pp;
                if (owner && l->owner != owner) {
                        pp = &l->next;
                        continue;
                }
                *tail = l->todo;
                tail = l->tail;
                *pp = l->next;
                free(l);
        }
        q->tail = &q->first;
        while (*q->tail)
                q->tail = &(*q->tail)->next;
        return list;
}
