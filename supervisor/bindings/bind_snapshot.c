/* bind_snapshot: a gadget's backup and restore (gadgetctl backup,
 * restore) as its binding side knows it: where its store is, which of
 * its bindings keep state there, and their bounds, handed to
 * store/snapshot.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bindings.h"
#include "contract.h"
#include "ops.h"
#include "policy.h"
#include "store/snapshot.h"
#include "store/store.h"

/* The policy's kv and alarm bindings with their bounds; their number. */
static size_t state_bindings(const struct policy *p, struct snapshot_binding *out)
{
        size_t n = 0;
        for (size_t i = 0; i < p->n_bindings; i++) {
                const struct policy_binding *b = &p->bindings[i];
                if (b->type != BINDING_KV && b->type != BINDING_ALARM)
                        continue;
                struct snapshot_binding *sb = &out[n++];
                snprintf(sb->name, sizeof sb->name, "%s", b->name);
                if (b->type == BINDING_KV) {
                        sb->kind = BACKUP_KV;
                        sb->max_keys = b->max_keys;
                        sb->max_bytes = b->max_bytes;
                        sb->max_value = b->max_value_size;
                } else {
                        sb->kind = BACKUP_ALARM;
                        sb->max_keys = b->max_alarms;
                        sb->max_bytes = UINT64_MAX;
                        sb->max_value = b->max_payload;
                }
        }
        return n;
}

int bindings_snapshot(struct gadget_bindings *g, bool restore, int fd,
                      void (*done)(void *arg, int err, const char *why, const struct backup_info *info),
                      void *arg, char *why, size_t len)
{
        const struct bindings_env *env = g->env;
        const struct policy *p = g->policy;
        static const struct kv_type *types[KV_TYPES_MAX];
        struct snapshot_binding *sb = calloc(p->n_bindings + 1, sizeof *sb);
        struct snapshot *s;
        if (!sb) {
                close(fd);
                snprintf(why, len, "out of memory");
                return GADGET_EINTERNAL;
        }
        struct snapshot_job job = {
                .restore = restore, .fd = fd, .gadget = p->name, .state_dir = env->state_dir, .types = types,
                .n_types = binding_store_types(types, KV_TYPES_MAX), .conninfo = env->store_connection,
                .node = env->node, .bindings = sb, .n_bindings = state_bindings(p, sb), .state_max = p->state_max,
        };
        /* Fenced like any write: by this node's lease if it holds one
         * (an idle gadget), else only while no node holds one
         * (snapshot_pg.c). */
        if (restore && env->store_connection && env->lease)
                job.epoch = kvpg_lease_epoch(env->lease, p->name);
        int e = snapshot_start(env->base, &job, done, arg, &s);
        free(sb);
        if (e == -EBADF) {
                snprintf(why, len, "the file must be a regular file");
                return GADGET_EINVAL;
        }
        if (e < 0) {
                snprintf(why, len, "could not start: %s", strerror(-e));
                return GADGET_EINTERNAL;
        }
        return 0;
}

/* A backup into a file of gadgetd's own: removed if it fails. */
struct backup_file {
        void (*done)(void *arg, int err, const char *why, const struct backup_info *info);
        void *arg;
        char path[];
};

static void backup_file_done(void *arg, int err, const char *why, const struct backup_info *info)
{
        struct backup_file *b = arg;
        if (err < 0)
                unlink(b->path);
        b->done(b->arg, err, why, info);
        free(b);
}

int bindings_backup_file(struct gadget_bindings *g, const char *path,
                         void (*done)(void *arg, int err, const char *why, const struct backup_info *info),
                         void *arg, char *why, size_t len)
{
        struct backup_file *b = malloc(sizeof *b + strlen(path) + 1);
        if (!b) {
                snprintf(why, len, "out of memory");
                return GADGET_EINTERNAL;
        }
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
                snprintf(why, len, "%s: %s", path, strerror(errno));
                free(b);
                return GADGET_EINVAL;
        }
        b->done = done;
        b->arg = arg;
        strcpy(b->path, path);
        int code = bindings_snapshot(g, false, fd, backup_file_done, b, why, len);
        if (code) {
                unlink(path);
                free(b);
        }
        return code;
}
