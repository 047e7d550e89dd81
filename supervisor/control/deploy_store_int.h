/* deploy_store_int: what deploy_store.c (the loop's side) and
 * deploy_store_thread.c (its thread: the store's rounds and the bundles
 * checked there) share. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <event2/event.h>

#include "bundle.h"
#include "control.h"
#include "store/kvpg_releases.h"
#include "system/mailbox.h"

#define ROUND_MS 1000
#define CONNECT_MS 3000
#define RETRY_MS 50
#define START_MS 200                    /* between rounds until the store answered once */
#define BUNDLES_PER_ROUND 4
#define STATES_PER_ROUND 64
#define CATCHUP 32                      /* full rounds a second at most, at once */
#define REFUSALS 16
#define WRITES_MAX 32                   /* this node's writes waiting (beyond: refused, counted) */
#define UNKNOWN_MAX 64                  /* rows of gadgets this node has no policy for (beyond: ignored, counted) */

/* The thread's word to the loop. */
struct ds_msg {
        enum { M_STATE, M_INSTALLED, M_REFUSED, M_WRITTEN, M_ROUND, M_OLD, M_UNUSABLE } kind; /* M_OLD: the schema is
                                        * below 15; M_UNUSABLE: past this node's (why) */
        struct kvpg_release_state st;   /* M_STATE */
        char gadget[64], version[80], node[64], why[600]; /* M_INSTALLED, M_REFUSED */
        int64_t gen;                    /* M_WRITTEN: the new gen, 0: another came first, <0: failed */
        struct mailbox_item link;
};

/* One gadget's row, as this node last read or wrote it. */
struct ds_gadget {
        struct kvpg_release_state st;   /* gen 0: none yet */
        int64_t applied;                /* the gen applied here */
        bool pending;                   /* st not applied yet: its bundle not here yet (tried each round) */
        bool busy;                      /* st not applied yet: a deploy ran here (tried when it ends) */
        bool settle;                    /* deployed here: its previous version set from st once it ended */
        bool known;                     /* this node has a policy or a release of it */
        int64_t armed;                  /* the gen whose rollout this node began as its owner (0: none) */
        char refused[300];              /* why this node refused a bundle of it ("" none) */
        struct ds_gadget *next;
};

struct deploy_store {
        /* The thread's and the loop's, under mu. */
        pthread_mutex_t mu;
        int wake_fd;                    /* the loop wakes the thread (eventfd) */
        bool stop;                      /* the loop went: the thread frees what is left */
        bool has_write;                 /* w is the thread's to send */
        struct kvpg_release_state w;
        int64_t w_gen;
        /* The thread's (copied at start). */
        struct control_releases rel;
        char *conninfo, *node, *state_dir;
        uint8_t (*keys)[BUNDLE_KEY_LEN];
        /* The thread's word to the loop: posted by the thread, drained
         * by the loop until deploy_store_free closes it (later posts
         * dropped), freed by the thread (ds_free_shared). */
        struct mailbox *mb;
        /* The loop's. */
        struct control *ctl;
        const struct control_env *env;
        struct event *ev_retry;         /* retry's timer */
        bool ready;                     /* the store's schema has the tables */
        bool old;                       /* the store's schema is below 15: each node's own versions */
        char unusable[300];             /* why this node may not use the store's schema ("": it may) */
        struct ds_write {               /* this node's writes, in order: the first is out (writing) */
                struct kvpg_release_state st;
                int64_t gen;            /* the gen st was made from */
                bool back;              /* an automatic rollback: st made again when sent */
                char version[80], to[80], previous[80], why[120];
                void (*done)(void *arg, int err, const char *why);
                void *arg;
                struct ds_write *next;
        } *writes, *writes_last;
        size_t n_writes;
        bool writing;                   /* the first of writes is out: its M_WRITTEN comes */
        uint64_t writes_refused;        /* writes refused: WRITES_MAX waited */
        size_t n_unknown;               /* gadgets entries not known here */
        uint64_t rows_ignored;          /* rows of unknown gadgets beyond UNKNOWN_MAX */
        struct ds_gadget *gadgets;
        struct refusal { char gadget[64], version[80], node[64], why[300]; } refused[REFUSALS];
        size_t n_refused;
};

/* Hands m to the loop (its mailbox; freed there if the loop went). */
void ds_post(struct deploy_store *ds, struct ds_msg *m);
/* Wakes the thread (a write to send, or its stop). */
void ds_wake(struct deploy_store *ds);
/* What the thread and the loop shared, freed by the last of them (the
 * thread, once it saw stop; or the loop, if the thread never started). */
void ds_free_shared(struct deploy_store *ds);
/* The thread: its rounds until stop. */
void *ds_thread(void *arg);
