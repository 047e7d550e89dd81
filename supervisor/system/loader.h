/* loader: reading and checking a policy file for `gadgetctl load`, off
 * gadgetd's loop, with the requesting user's rights. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "peercred.h"

struct event_base;
struct policy;

#define LOADER_MAX_LOADS 4 /* ControlMaxLoads= */

/* Called on the loop when the file has been read: p (taken over) and its
 * hash, or err < 0 with every problem in msg. */
typedef void loader_done_fn(void *arg, int err, struct policy *p, uint64_t hash, const char *msg);

struct loader_job;

/* Jobs in flight, and the budget they are held to. */
struct loader {
        struct event_base *base;
        LIST_HEAD(, loader_job) jobs;           /* reading, each in its thread */
        STAILQ_HEAD(, loader_job) waiting;      /* root's loads beyond its budget, oldest first */
        unsigned max;            /* of users other than root together (one per user); root has as many */
};

/* An empty loader on base, with max loads for users other than root. */
void loader_init(struct loader *l, struct event_base *base, unsigned max);
/* Reads path (opened with cred's rights; NULL: gadgetd's own) into *p, or
 * -errno with every problem in msg. For a cred other than root the
 * messages show no text of the file. A symlink as the last component is
 * followed only with follow. Blocking: the loop calls it only for its own
 * policy directory (root's files; root may link them from elsewhere). */
int loader_read(const char *path, const struct peercred *cred, bool follow, struct policy **p, uint64_t *hash,
                char *msg, size_t len);
/* Starts reading path in a thread of its own, not following a symlink as
 * its last component (a load names the file itself); done runs on d's loop.
 * 0, -EBUSY if cred's user (or everyone but root) is at the budget, or
 * -errno. Root's loads beyond its budget wait their turn instead (root may
 * load a thousand policies in one go). */
int loader_start(struct loader *l, const char *path, const struct peercred *cred, loader_done_fn *done,
                 void *arg);
/* At gadgetd's end: jobs still reading are left to their threads. */
void loader_close(struct loader *l);
