/* kvpg_wants: the gadgets a node's lease session wants (kvpg_lease.c), by
 * name through a hash table and in the order they were wanted through a
 * list, so that finding one (every kv write asks for its epoch) and giving
 * one back cost the same with 10,000 as with one, and a poll round walks
 * them once. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "system/nametab.h"

struct kvpg_want {
        char *gadget;
        unsigned rank;
        char **ahead;             /* the rank nodes before this one in Nodes=, or NULL (unknown) */
        unsigned free_seen;       /* polls in a row that saw its lock free */
        bool held;
        bool told;                /* hooks->owner was told of owner */
        bool looked;              /* owner, owner_inc and owner_changes were read */
        long sent;                /* its slot in the statement out, -1 if not in it */
        int64_t epoch;            /* held: ours */
        char owner[64];           /* not held: who has it, as last read ("": free) */
        int64_t owner_epoch;
        int64_t owner_inc;        /* the incarnation of its owner's lease */
        int64_t owner_changes;    /* its owner's changes as read before that look */
        /* A move asked for (kvpg_lease_move): to, and whom to tell. */
        char move_to[64];
        void (*move_done)(void *arg, const char *why);
        void *move_arg;
        struct kvpg_want *next, *prev;  /* in the order wanted */
        struct nametab_link name_link;  /* in kvpg_wants' by_name */
};

struct kvpg_wants {
        struct kvpg_want *first, *last;
        struct nametab by_name;   /* .n: how many */
};

struct kvpg_want *kvpg_wants_find(const struct kvpg_wants *t, const char *gadget);
/* A new want of gadget (rank 0, not held), last in the order. NULL: out
 * of memory. */
struct kvpg_want *kvpg_wants_add(struct kvpg_wants *t, const char *gadget);
/* Takes w out of t (not freed). */
void kvpg_wants_remove(struct kvpg_wants *t, struct kvpg_want *w);
void kvpg_want_free(struct kvpg_want *w);
/* Frees w's ahead (its rank names), leaving it NULL. */
void kvpg_want_ahead_free(struct kvpg_want *w);
/* Frees every want and the table. */
void kvpg_wants_clear(struct kvpg_wants *t);
