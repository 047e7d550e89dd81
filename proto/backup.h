/* backup: the file of a gadget's state (gadgetctl backup, restore,
 * export) — its kv keys and values and its alarms, as either store
 * backend keeps them — written and read here, the same for both backends.
 * Pure code: the bytes come and go through the caller's callbacks.
 *
 * Format, version 1 (docs/operating.md, "Backup and restore"):
 *   "GADGETD-BACKUP\n", then header lines "key: value\n" (format, gadget,
 *   taken, source; at most BACKUP_HEADER_MAX bytes) and an empty line;
 *   then records, each a kind byte and its fields, integers big-endian:
 *     'K' binding (1-byte length), key (2), value (4): a kv key, its
 *         value a packed gadget.Value as stored;
 *     'A' binding (1), id (2), at (8, signed), due (8, signed),
 *         attempts (4), payload (4): an alarm;
 *     'E' the kv records' count (8), the alarms' count (8), then the
 *         SHA-256 of every byte of the file before these 32.
 *   kv records come first, then alarms, each kind in strictly increasing
 *   (binding, key) byte order, so no key appears twice; nothing follows
 *   'E'. A reader refuses anything else, with the reason. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BACKUP_MAGIC "GADGETD-BACKUP\n"
#define BACKUP_FORMAT 1
#define BACKUP_HEADER_MAX 4096
/* A value's or payload's bytes at most: a value is put in one frame. */
#define BACKUP_VALUE_MAX (2u << 20)
#define BACKUP_KEY_MAX 512
#define BACKUP_BINDING_MAX 71

/* Where a writer's bytes go, and a reader's come from: 0, or -errno
 * (read: exactly n bytes, -ENODATA when the input ends first). */
typedef int backup_write_fn(void *arg, const void *buf, size_t n);
typedef int backup_read_fn(void *arg, void *buf, size_t n);

enum backup_kind { BACKUP_KV = 'K', BACKUP_ALARM = 'A' };

/* One record: a kv key (binding, key, value) or an alarm (binding, key
 * as its id, at, due, attempts, value as its payload). A reader's point
 * into its own buffers, valid until its next call. */
struct backup_record {
        enum backup_kind kind;
        char binding[BACKUP_BINDING_MAX + 1];
        const uint8_t *key;
        size_t klen;
        const uint8_t *value;
        size_t vlen;
        int64_t at, due;
        uint32_t attempts;
};

/* What a file says of itself (its header) and, at its end, holds. */
struct backup_info {
        unsigned format;
        char gadget[128];
        char source[32];            /* "sqlite", "postgresql" */
        int64_t taken_ms;           /* ms since the epoch */
        uint64_t n_kv, n_alarms;    /* a reader's: once its end is read */
        uint8_t sha256[32];         /* the checksum, once written or read */
};

struct backup_writer;
struct backup_reader;

/* A writer to fn(arg) of the file of info's gadget, source and time; its
 * header is written at once. 0 or -errno (fn's; -EINVAL: a bad name). */
int backup_writer_new(backup_write_fn *fn, void *arg, const struct backup_info *info,
                      struct backup_writer **out);
/* Appends rec (records in the order the format says: -EINVAL if not,
 * or if it breaks a bound). 0 or -errno. */
int backup_write(struct backup_writer *w, const struct backup_record *rec);
/* Writes the end (counts and checksum) and flushes: 0 or -errno; info
 * (may be NULL) gets the counts and the checksum. */
int backup_writer_end(struct backup_writer *w, struct backup_info *info);
void backup_writer_free(struct backup_writer *w);

/* A reader of fn(arg); reads and checks the header into info. 0 or
 * -errno with why: -EBADMSG (not a backup, a bad header), -ENODATA
 * (it ends early), -ENOTSUP (a format this gadgetd does not read). */
int backup_reader_new(backup_read_fn *fn, void *arg, struct backup_info *info, struct backup_reader **out,
                      char *why, size_t len);
/* The next record: 1 with it, 0 at a sound end (the counts and the
 * checksum match, nothing follows: info filled), or -errno with why
 * (-EBADMSG: a bound broken, out of order, a bad checksum; -ENODATA: the
 * file ends early). Each value and payload is checked as a Value
 * (depth, counts, UTF-8) before it is handed out. */
int backup_read(struct backup_reader *r, struct backup_record *rec, struct backup_info *info, char *why,
                size_t len);
void backup_reader_free(struct backup_reader *r);
