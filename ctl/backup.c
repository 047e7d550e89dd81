/* backup: gadgetctl backup, restore and export. gadgetctl opens the file
 * and passes it to gadgetd with the request (SCM_RIGHTS), which writes or
 * reads it (proto/backup.h's format); export takes a backup into a
 * temporary file and prints it as JSON, one record at a time. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backup.h"
#include "cmd.h"
#include "contract.h"
#include "gadget.pb-c.h"
#include "json.h"
#include "show.h"
#include "value.h"

/* Asks gadgetd for a backup or restore of name with fd: the exit status;
 * *r the answer when it is CTL_EXIT_OK. */
static int ask(const struct ctl *ctl, const char *name, bool restore, int fd, Control__Response **r)
{
        Control__Request req = CONTROL__REQUEST__INIT;
        Control__Snapshot s = CONTROL__SNAPSHOT__INIT;
        s.name = (char *)name;
        req.req_case = restore ? CONTROL__REQUEST__REQ_RESTORE : CONTROL__REQUEST__REQ_BACKUP;
        if (restore)
                req.restore = &s;
        else
                req.backup = &s;
        return cmd_ask_fds(ctl, &req, &fd, 1, CONTROL__RESPONSE__RESP_DONE, r);
}

/* Writes beside path, then links the file in at once when it is whole:
 * never a half-written backup under its name, never one overwritten. */
int cmd_backup(const struct ctl *ctl, const struct cmd_args *a)
{
        const char *path = a->pos[1];
        char part[4200];
        Control__Response *r = NULL;
        snprintf(part, sizeof part, "%s.partial", path);
        if (access(path, F_OK) == 0) {
                show_error(stderr, ctl->json, 0, "%s exists: gadgetctl backup writes a new file only", path);
                return CTL_EXIT_FAILED;
        }
        int fd = open(part, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
                show_error(stderr, ctl->json, 0, "cannot create %s: %s", part, strerror(errno));
                return CTL_EXIT_FAILED;
        }
        int st = ask(ctl, a->pos[0], false, fd, &r);
        close(fd);
        if (st == CTL_EXIT_OK && link(part, path) < 0) {
                show_error(stderr, ctl->json, 0, "cannot name the backup %s: %s", path, strerror(errno));
                st = CTL_EXIT_FAILED;
        }
        unlink(part);
        if (st == CTL_EXIT_OK)
                st = cmd_print_answer(ctl, r);
        if (r)
                control__response__free_unpacked(r, NULL);
        return st;
}

int cmd_restore(const struct ctl *ctl, const struct cmd_args *a)
{
        Control__Response *r = NULL;
        int fd = open(a->pos[1], O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                show_error(stderr, ctl->json, 0, "cannot open %s: %s", a->pos[1], strerror(errno));
                return CTL_EXIT_FAILED;
        }
        int st = ask(ctl, a->pos[0], true, fd, &r);
        close(fd);
        if (st == CTL_EXIT_OK)
                st = cmd_print_answer(ctl, r);
        if (r)
                control__response__free_unpacked(r, NULL);
        return st;
}

static int fd_read(void *arg, void *buf, size_t n)
{
        FILE *f = arg;
        if (fread(buf, 1, n, f) == n)
                return 0;
        return ferror(f) ? -EIO : -ENODATA;
}

/* A temporary file, gone once closed: under TMPDIR, else in memory. */
static int temp_file(void)
{
        const char *dir = getenv("TMPDIR");
        int fd = open(dir && *dir ? dir : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        return fd >= 0 ? fd : memfd_create("gadgetctl-export", MFD_CLOEXEC);
}

/* A JSON string of s (n bytes, UTF-8), or {"$bytes": ...} if not UTF-8:
 * as json.h writes a value's. */
static void put_text(FILE *out, const void *s, size_t n)
{
        Gadget__Value v = GADGET__VALUE__INIT;
        char *str = NULL;
        if (value_utf8_valid(s, n) && !memchr(s, 0, n) && (str = strndup(s, n))) {
                v.kind_case = GADGET__VALUE__KIND_STRING_VALUE;
                v.string_value = str;
        } else {
                v.kind_case = GADGET__VALUE__KIND_BYTES_VALUE;
                v.bytes_value.data = (uint8_t *)s;
                v.bytes_value.len = n;
        }
        char *j = json_from_value(&v);
        fputs(j ? j : "null", out);
        free(j);
        free(str);
}

static void put_record(FILE *out, const struct backup_record *rec, bool first)
{
        Gadget__Value *v = gadget__value__unpack(NULL, rec->vlen, rec->value);
        char *j = v ? json_from_value(v) : NULL;
        fprintf(out, "%s\n    {\"binding\": \"%s\", \"%s\": ", first ? "" : ",", rec->binding,
                rec->kind == BACKUP_KV ? "key" : "id");
        put_text(out, rec->key, rec->klen);
        if (rec->kind == BACKUP_ALARM)
                fprintf(out, ", \"at_ms\": %" PRId64 ", \"due_ms\": %" PRId64 ", \"attempts\": %" PRIu32, rec->at,
                        rec->due, rec->attempts);
        fprintf(out, ", \"%s\": %s}", rec->kind == BACKUP_KV ? "value" : "payload", j ? j : "null");
        free(j);
        if (v)
                gadget__value__free_unpacked(v, NULL);
}

/* The file's records as one JSON object, written as they are read (a
 * record at a time in memory, whatever the store's size). */
static int print_json(const struct ctl *ctl, FILE *in, FILE *out)
{
        struct backup_info info;
        struct backup_reader *rd = NULL;
        struct backup_record rec;
        char why[300];
        int e = backup_reader_new(fd_read, in, &info, &rd, why, sizeof why), n = 0;
        enum backup_kind kind = BACKUP_KV;
        if (e == 0) {
                fprintf(out, "{\"gadget\": \"%s\", \"format\": %u, \"source\": \"%s\", \"taken_ms\": %" PRId64
                        ",\n  \"kv\": [", info.gadget, info.format, info.source, info.taken_ms);
                while ((e = backup_read(rd, &rec, &info, why, sizeof why)) == 1) {
                        if (rec.kind != kind) {
                                fprintf(out, "%s],\n  \"alarms\": [", n ? "\n  " : "");
                                kind = rec.kind;
                                n = 0;
                        }
                        put_record(out, &rec, n++ == 0);
                }
        }
        if (e == 0) {
                char sum[65];
                for (int i = 0; i < 32; i++)
                        snprintf(sum + 2 * i, 3, "%02x", info.sha256[i]);
                if (kind == BACKUP_KV)
                        fprintf(out, "%s],\n  \"alarms\": [", n ? "\n  " : "");
                else if (n)
                        fputs("\n  ", out);
                fprintf(out, "],\n  \"keys\": %" PRIu64 ", \"alarm_count\": %" PRIu64 ", \"sha256\": \"%s\"}\n",
                        info.n_kv, info.n_alarms, sum);
        }
        backup_reader_free(rd);
        if (e < 0) {
                fflush(out);
                show_error(stderr, ctl->json, 0, "export: %s", why);
                return CTL_EXIT_FAILED;
        }
        return fflush(out) == EOF ? CTL_EXIT_FAILED : CTL_EXIT_OK;
}

int cmd_export(const struct ctl *ctl, const struct cmd_args *a)
{
        Control__Response *r = NULL;
        int fd = temp_file();
        if (fd < 0) {
                show_error(stderr, ctl->json, 0, "export: no temporary file: %s", strerror(errno));
                return CTL_EXIT_FAILED;
        }
        int st = ask(ctl, a->pos[0], false, fd, &r);
        if (r)
                control__response__free_unpacked(r, NULL);
        FILE *in = st == CTL_EXIT_OK && lseek(fd, 0, SEEK_SET) == 0 ? fdopen(fd, "r") : NULL;
        if (st == CTL_EXIT_OK && !in) {
                show_error(stderr, ctl->json, 0, "export: reading the backup: %s", strerror(errno));
                st = CTL_EXIT_FAILED;
        }
        if (st == CTL_EXIT_OK)
                st = print_json(ctl, in, stdout);
        if (in)
                fclose(in);
        else
                close(fd);
        return st;
}
