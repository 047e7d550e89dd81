/* audit: the record of every binding call and every limit hit — one JSON
 * object per line in STATE_DIR/audit.log, and a line in gadgetd's log. */
#pragma once

#include <stddef.h>
#include <stdint.h>

enum audit_outcome { AUDIT_OK, AUDIT_DENIED, AUDIT_ERROR };

struct audit_record {
        const char *gadget;
        const char *binding;   /* the binding, or "limit" for a limit hit */
        const char *op;
        enum audit_outcome outcome;
        uint64_t bytes;        /* request + response payload */
        uint64_t duration_us;
        const char *detail;    /* error message or limit; never a secret */
};

struct audit;

/* Prepares STATE_DIR/audit.log (appending, created 0600 with its directory
 * at the first record). 0 or -errno. */
int audit_open(const char *state_dir, struct audit **out);
void audit_close(struct audit *a);
/* Writes one record; the line written (without newline) is passed to the
 * listener set with audit_listen, for `gadgetctl audit -f`. */
void audit_write(struct audit *a, const struct audit_record *r);
void audit_listen(struct audit *a, void (*fn)(void *arg, const char *gadget, const char *line), void *arg);
/* The last n records of gadget (all if n is 0, at most 10000), oldest
 * first, as malloc'd lines in *lines. Returns the count or -errno. */
int audit_tail(struct audit *a, const char *gadget, size_t n, char ***lines);
const char *audit_outcome_name(enum audit_outcome o);
