/* kvpg_lanes: the PostgreSQL store's queue of jobs not yet sent, one lane
 * per gadget's store (job->kv), each in its order. The lanes take turns,
 * one job each: a gadget with many operations queued delays another's by
 * one of them, not by all. Pure code. */
#pragma once

#include <stdbool.h>

struct kv;
struct kv_job;
struct kvpg_lane;

struct kvpg_lanes {
        struct kvpg_lane *first, **tail;  /* the lane whose turn it is first */
};

void kvpg_lanes_init(struct kvpg_lanes *q);
bool kvpg_lanes_empty(const struct kvpg_lanes *q);
/* Queues job last in its store's lane (a new lane goes last). 0 or -ENOMEM. */
int kvpg_lanes_put(struct kvpg_lanes *q, struct kv_job *job);
/* The first job of the lane whose turn it is, that lane going last; NULL
 * if none. */
struct kv_job *kvpg_lanes_next(struct kvpg_lanes *q);
/* Takes out owner's jobs (every job if owner is NULL) as one list linked
 * by next, each lane's in order; their lanes are freed. */
struct kv_job *kvpg_lanes_take(struct kvpg_lanes *q, const struct kv *owner);
