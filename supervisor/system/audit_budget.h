/* audit_budget: each gadget's audit records per second. Within the budget
 * a record is written as it is; beyond it, it is counted into a summary of
 * its binding, operation and outcome, written when the second ends. Write
 * failures are counted per gadget and second the same way. Pure code: the
 * caller passes the time. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "audit.h"
#include "nametab.h"

#define AUDIT_WINDOW_MS 1000
#define AUDIT_SUMMARIES_MAX 16   /* distinct binding/op/outcome per gadget and second */
#define AUDIT_SUMMARY_SLOTS (AUDIT_SUMMARIES_MAX + AUDIT_N_OUTCOMES)

/* The records of one kind not written one by one in a window. */
struct audit_summary {
        char *binding, *op;      /* NULL, NULL: every other kind together */
        enum audit_outcome outcome;
        uint64_t count, bytes, duration_us;
};

/* One gadget's current window. */
struct audit_window {
        char *gadget;
        uint64_t start_ms;
        uint32_t written;        /* records taken within the budget */
        /* AUDIT_SUMMARY_SLOTS, then "other" by outcome: made at the
         * window's first record over the budget (NULL until then: most
         * windows never need one, and a burst of starts makes a window
         * for each gadget). */
        struct audit_summary *sums;
        size_t n_sums;
        uint64_t unwritten;      /* records (or summaries) the file refused */
        int error;               /* the last reason, -errno */
        LIST_ENTRY(audit_window) link;
        struct nametab_link name_link;   /* in by_name */
};

struct audit_budget {
        uint32_t rate;           /* records per window per gadget; 0: no limit */
        LIST_HEAD(, audit_window) windows;  /* zeroed: empty */
        /* The windows by gadget name, so that a record's look-up costs the
         * same with 10 gadgets at work as with 10,000. */
        struct nametab by_name;
        uint64_t summarized;     /* records counted into a summary, since the start */
};

/* 1: write r; 0: counted into a summary; -ENOMEM (write it anyway). */
int audit_budget_take(struct audit_budget *b, const struct audit_record *r, uint64_t now_ms);
/* Counts a record of gadget that could not be written (e < 0). */
void audit_budget_failed(struct audit_budget *b, const char *gadget, int e, uint64_t now_ms);
/* Calls ended(arg, w) for every window over at now_ms (all with force) that
 * has summaries or failures, then forgets it. Returns whether windows
 * remain that hold something (the caller's timer is still needed). */
bool audit_budget_flush(struct audit_budget *b, uint64_t now_ms, bool force,
                        void (*ended)(void *arg, const struct audit_window *w), void *arg);
void audit_budget_free(struct audit_budget *b);
