/* mailbox: what a thread hands to the loop — a locked list of items, one
 * eventfd that wakes the loop when the box goes from empty to non-empty,
 * and the loop's drain, which gives each item to its owner in the order
 * it was posted. The items are the owner's, linked through a struct
 * mailbox_item inside them: a post allocates nothing and cannot fail for
 * want of memory. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/queue.h>

struct event_base;

struct mailbox_item {
        STAILQ_ENTRY(mailbox_item) link;
};

/* The owner's item of type that holds item as its member. */
#define mailbox_entry(item, type, member) ((type *)(void *)((char *)(item) - offsetof(type, member)))

/* The owner's: take has each item posted, on the loop, in the order of
 * the posts (a thread's items in the order it posted them); end, if set,
 * follows the items of each drain; drop, if set, has each item that is
 * never taken (pending at mailbox_close, or posted after), on the thread
 * that closed or posted. With cost and turn_max set, a drain the box's
 * wake-up starts gives take at most turn_max of the items' costs (one
 * item at least) and leaves the rest, in order, to a drain after the
 * loop's next look at its other parties: what one thread's items cost
 * the loop is then bounded per turn, as a link's frames are. */
struct mailbox_owner {
        void (*take)(void *arg, struct mailbox_item *item);
        void (*end)(void *arg);
        void (*drop)(struct mailbox_item *item);
        size_t (*cost)(const struct mailbox_item *item);
        size_t turn_max;
};

struct mailbox;

/* A box drained on base, owner's functions called with arg (owner is
 * copied). 0, or -errno (-ENOMEM, an eventfd's failure). */
int mailbox_new(struct event_base *base, const struct mailbox_owner *owner, void *arg, struct mailbox **out);
/* Any thread: item into the box, the loop woken if the box was empty.
 * Never blocks but for the box's lock, which no one holds while calling
 * out. false: the box is closed and item was dropped (owner's drop). */
bool mailbox_post(struct mailbox *mb, struct mailbox_item *item);
/* The loop: all the box holds now, to take (what its eventfd calls,
 * within turn_max; an owner may call it itself, from take too). take may
 * close or free the box: the drain then stops. */
void mailbox_drain(struct mailbox *mb);
/* The loop: no more drains; the items pending are dropped and later
 * posts drop theirs. The box itself stays until mailbox_free, which a
 * thread that still posts may call once it is done. */
void mailbox_close(struct mailbox *mb);
/* Frees the box (closed first if it was not: then on the loop), once no
 * thread will post to it. NULL: nothing. */
void mailbox_free(struct mailbox *mb);
