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

#define ROUND_MS 1000
#define CONNECT_MS 3000
#define RETRY_MS 50
#define BUNDLES_PER_ROUND 4
#define STATES_PER_ROUND 64
#define REFUSALS 16

/* The thread's word to the loop. */
struct ds_msg {
        enum { M_STATE, M_INSTALLED, M_REFUSED, M_WRITTEN, M_ROUND } kind;
        struct kvpg_release_state st;   /* M_STATE */
        char gadget[64], version[80], node[64], why[600]; /* M_INSTALLED, M_REFUSED */
        int64_t gen;                    /* M_WRITTEN: the new gen, 0: another came first, <0: failed */
        struct ds_msg *next;
};

/* One gadget's row, as this node last read or wrote it. */
struct ds_gadget {
        struct kvpg_release_state st;   /* gen 0: none yet */
        int64_t applied;                /* the gen applied here */
        bool pending;                   /* st not applied yet: its bundle not here yet (tried each round) */
        bool busy;                      /* st not applied yet: a deploy ran here (tried when it ends) */
        bool settle;                    /* deployed here: its previous version set from st once it ended */
        char refused[300];              /* why this node refused a bundle of it ("" none) */
        struct ds_gadget *next;
};

struct deploy_store {
        /* The thread's and the loop's, under mu. */
        pthread_mutex_t mu;
        int wake_fd;                    /* the loop wakes the thread (eventfd) */
        bool stop;                      /* the loop went: the thread frees what is left */
        struct ds_msg *first, *last;
        bool has_write;                 /* w is the thread's to send */
        struct kvpg_release_state w;
        int64_t w_gen;
        /* The thread's (copied at start). */
        struct control_releases rel;
        char *conninfo, *node, *state_dir;
        uint8_t (*keys)[BUNDLE_KEY_LEN];
        int efd;
        /* The loop's. */
        struct control *ctl;
        const struct control_env *env;
        struct event *ev;
        struct event *ev_retry;         /* retry's timer */
        bool ready;                     /* the store's schema has the tables */
        bool writing;                   /* a write is out: its done below */
        void (*done)(void *arg, int err, const char *why);
        void *done_arg;
        struct kvpg_release_state wrote;
        struct ds_gadget *gadgets;
        struct refusal { char gadget[64], version[80], node[64], why[300]; } refused[REFUSALS];
        size_t n_refused;
};

/* Hands m to the loop (its eventfd). */
void ds_post(struct deploy_store *ds, struct ds_msg *m);
/* Wakes the thread (a write to send, or its stop). */
void ds_wake(struct deploy_store *ds);
/* What the thread and the loop shared, freed by the last of them (the
 * thread, once it saw stop; or the loop, if the thread never started). */
void ds_free_shared(struct deploy_store *ds);
/* The thread: its rounds until stop. */
void *ds_thread(void *arg);
