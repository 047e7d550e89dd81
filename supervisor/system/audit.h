/* audit: the record of every binding call and every limit hit — one JSON
 * object per line in STATE_DIR/audit.log, and a line in gadgetd's log.
 * Each gadget has a budget of records per second; the rest are counted
 * into one summary record per binding, operation and outcome at the end
 * of the second. The file is rotated at a size (audit.log.1, .2, ...). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"

struct event_base;

/* not_found: what was asked is not there (a kv get of a missing key), an
 * answer rather than a failure. */
enum audit_outcome { AUDIT_OK, AUDIT_DENIED, AUDIT_ERROR, AUDIT_NOT_FOUND, AUDIT_N_OUTCOMES };

struct audit_record {
        const char *gadget;
        const char *binding;   /* the binding, or "limit" for a limit hit */
        const char *op;
        enum audit_outcome outcome;
        uint64_t bytes;        /* request + response payload */
        uint64_t duration_us;
        const char *detail;    /* error message or limit; never a secret */
        const char *trace;     /* the call chain's trace id (32 hex digits), or NULL */
        bool has_uid;          /* a local user's call (gadgetctl call): uid is the caller's */
        uint32_t uid;
        /* More fields (a lifecycle event's: RUN, PID, EXIT_STATUS ...):
         * in the JSON lower-cased, a value of digits alone as a number. */
        const struct log_field *fields;
        size_t n_fields;
        bool logged;           /* its line in gadgetd's log was written already (the event's own) */
        uint64_t now_ms;       /* monotime_ms() as the caller read it (a call's end), or 0: read here */
};

/* The daemon's [Audit] settings. */
struct audit_config {
        uint32_t rate;         /* RecordsPerSecond=: records per gadget per second */
        uint64_t max_size;     /* MaxFileSize=: audit.log is rotated beyond this */
        uint32_t keep;         /* KeepFiles=: rotated files kept (audit.log.1 ...) */
        uint32_t store_keep_days; /* StoreKeepDays=: Store=postgresql keeps rows this long (0: default) */
};

#define AUDIT_DEFAULT_RATE 200
#define AUDIT_DEFAULT_MAX_SIZE (16ull << 20)
#define AUDIT_DEFAULT_KEEP 3
#define AUDIT_KEEP_MAX 32
#define AUDIT_STORE_KEEP_DAYS_MAX 36500
#define AUDIT_DEFAULT_CONFIG { AUDIT_DEFAULT_RATE, AUDIT_DEFAULT_MAX_SIZE, AUDIT_DEFAULT_KEEP, 0 }

struct audit;
struct audit_reader;

/* Parses one [Audit] key of the daemon's configuration file into cfg.
 * 0, or -EINVAL with the reason in why. */
int audit_config_key(struct audit_config *cfg, const char *key, const char *value, char *why, size_t len);

/* Prepares STATE_DIR/audit.log (appending, created 0600 with its directory
 * at the first record); base runs the once-a-second summaries. 0 or -errno. */
int audit_open(const char *state_dir, const struct audit_config *cfg, struct event_base *base,
               struct audit **out);
/* Writes the pending summaries, then frees a (NULL is fine). */
void audit_close(struct audit *a);
/* Writes one record, or counts it into its gadget's summary when the
 * gadget's budget for this second is spent; each line written (without
 * newline) is passed to the listener set with audit_listen, for
 * `gadgetctl audit -f`. */
void audit_write(struct audit *a, const struct audit_record *r);
void audit_listen(struct audit *a, void (*fn)(void *arg, const char *gadget, const char *line), void *arg);
/* Why a record of a gadget's was not written one by one. */
enum audit_drop { AUDIT_DROP_SUMMARIZED, AUDIT_DROP_UNWRITTEN, AUDIT_N_DROPS };
/* fn(arg, gadget, why) for each record of gadget's not written one by one:
 * counted into its summary over RecordsPerSecond=, or refused by the file
 * (the core counts them per gadget, for its metrics). */
void audit_on_drop(struct audit *a, void (*fn)(void *arg, const char *gadget, enum audit_drop why), void *arg);
/* With a shared store (Store=postgresql): every line then names node
 * ("node":"NODE", after the other fields) and carries its sequence
 * ("seq":N right after it: this node's records numbered, rising across
 * restarts: the first is past the last one in audit.log and past the
 * clock's microseconds at the call), and is also given to fn, once
 * written to the file (or not: the store's copy does not depend on it). */
void audit_set_store(struct audit *a, const char *node, void (*fn)(void *arg, const char *gadget, const char *line),
                     void *arg);
/* The state directory and KeepFiles=, for audit_reader_new. */
const char *audit_dir(const struct audit *a);
uint32_t audit_keep(const struct audit *a);
/* Records that could not be written to the file since gadgetd started
 * (disk full, ...), and the last reason (0 if none). */
uint64_t audit_unwritten(const struct audit *a, int *last_error);
/* Records over a gadget's RecordsPerSecond= counted into a summary line
 * instead of written one by one, since gadgetd started. */
uint64_t audit_summarized(const struct audit *a);
const char *audit_outcome_name(enum audit_outcome o);
/* The outcome of an answer of GADGET_E* code (0: a value): ok, denied
 * (GADGET_EDENIED), not_found (GADGET_ENOTFOUND) or error. */
enum audit_outcome audit_outcome_of(int code);

/* Reading the records of one gadget, in bounded slices (audit_read.c). */

/* True if the record line at p (len bytes, or up to its newline) is one of
 * gadget's. Only the line's start is read. */
bool audit_line_of(const char *p, size_t len, const char *gadget);
/* The sequence of the record line at p (len bytes, or up to its newline):
 * its "seq", or 0 if it has none. */
uint64_t audit_seq_of(const char *p, size_t len);
/* The highest sequence among the last whole lines of DIR/audit.log and
 * its KEEP rotated files (each file's last AUDIT_SLICE bytes), 0 if none. */
uint64_t audit_last_seq(const char *dir, uint32_t keep);
/* A reader of gadget's last n records (every kept one if n is 0; every
 * line of the files if gadget is NULL, with n 0), oldest first, over DIR/audit.log and its KEEP rotated files as they are now: records
 * written later are not part of it. 0 or -errno. */
int audit_reader_new(const char *dir, uint32_t keep, const char *gadget, size_t n,
                     struct audit_reader **out);
/* Receives one line (len bytes, no newline): 1 taken, 0 not taken (no
 * room now: the same line comes again at the next step), -errno. */
typedef int audit_emit_fn(void *arg, const char *line, size_t len);
/* One slice of work: at most one read of AUDIT_SLICE bytes. Returns 1 if
 * there is more to do, 0 when every line was given, or -errno. */
int audit_reader_step(struct audit_reader *r, audit_emit_fn *emit, void *arg);
void audit_reader_free(struct audit_reader *r);
/* The paths of audit.log and its rotated files (audit_read.c and audit.c). */
int audit_file_path(const char *dir, uint32_t k, char *buf, size_t len);

#define AUDIT_SLICE (64u << 10)
