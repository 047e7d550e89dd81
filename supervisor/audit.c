/* audit: JSON lines, written with one write() each (O_APPEND). */
#include "audit.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define AUDIT_TAIL_MAX 10000

struct audit {
        int fd;                 /* -1 until the first record */
        char *path, *dir;
        void (*listener)(void *arg, const char *gadget, const char *line);
        void *listener_arg;
};

const char *audit_outcome_name(enum audit_outcome o)
{
        static const char *const names[] = { "ok", "denied", "error" };
        return names[o];
}

int audit_open(const char *state_dir, struct audit **out)
{
        struct audit *a = calloc(1, sizeof *a);
        if (!a)
                return -ENOMEM;
        a->fd = -1;
        if (asprintf(&a->path, "%s/audit.log", state_dir) < 0 || !(a->dir = strdup(state_dir))) {
                free(a->path);
                free(a);
                return -ENOMEM;
        }
        *out = a;
        return 0;
}

/* The file is opened at the first record, so a `gadgetd run` of a gadget
 * without bindings leaves no trace in the state directory. */
static int open_file(struct audit *a)
{
        if (a->fd >= 0)
                return 0;
        if (mkdir(a->dir, 0700) < 0 && errno != EEXIST)
                return -errno;
        a->fd = open(a->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        return a->fd < 0 ? -errno : 0;
}

void audit_close(struct audit *a)
{
        if (!a)
                return;
        if (a->fd >= 0)
                close(a->fd);
        free(a->path);
        free(a->dir);
        free(a);
}

void audit_listen(struct audit *a, void (*fn)(void *arg, const char *gadget, const char *line), void *arg)
{
        a->listener = fn;
        a->listener_arg = arg;
}

static void now_rfc3339(char *buf, size_t len)
{
        struct timeval tv;
        struct tm tm;
        gettimeofday(&tv, NULL);
        gmtime_r(&tv.tv_sec, &tm);
        size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf + n, len - n, ".%03dZ", (int)(tv.tv_usec / 1000));
}

void audit_write(struct audit *a, const struct audit_record *r)
{
        char when[40];
        now_rfc3339(when, sizeof when);
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I}", "time", when, "gadget", r->gadget,
                              "binding", r->binding, "op", r->op, "outcome", audit_outcome_name(r->outcome),
                              "bytes", (json_int_t)r->bytes, "duration_us", (json_int_t)r->duration_us);
        if (!o)
                return;
        if (r->detail)
                json_object_set_new(o, "detail", json_string(r->detail));
        char *line = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (!line)
                return;
        log_audit(r->outcome == AUDIT_DENIED ? L_WARN : L_INFO, r, line);
        if (a && open_file(a) == 0) {
                size_t n = strlen(line);
                line[n] = '\n';
                /* One write with O_APPEND: records never interleave. */
                ssize_t w = write(a->fd, line, n + 1);
                (void)w;
                line[n] = '\0';
                if (a->listener)
                        a->listener(a->listener_arg, r->gadget, line);
        }
        free(line);
}

/* True if line is a record of gadget. */
static bool line_of(const char *line, const char *gadget)
{
        json_t *o = json_loads(line, 0, NULL);
        const char *g = o ? json_string_value(json_object_get(o, "gadget")) : NULL;
        bool match = g && strcmp(g, gadget) == 0;
        json_decref(o);
        return match;
}

int audit_tail(struct audit *a, const char *gadget, size_t n, char ***lines)
{
        if (n == 0 || n > AUDIT_TAIL_MAX)
                n = AUDIT_TAIL_MAX;
        char **ring = calloc(n, sizeof *ring);
        size_t count = 0, head = 0;
        char *buf = NULL;
        size_t cap = 0;
        FILE *f = fopen(a->path, "re");
        if (!f && errno == ENOENT) { /* no record written yet */
                free(ring);
                *lines = calloc(1, sizeof **lines);
                return *lines ? 0 : -ENOMEM;
        }
        if (!ring || !f) {
                free(ring);
                if (f)
                        fclose(f);
                return f ? -ENOMEM : -errno;
        }
        ssize_t len;
        while ((len = getline(&buf, &cap, f)) > 0) {
                if (buf[len - 1] == '\n')
                        buf[len - 1] = '\0';
                if (!line_of(buf, gadget))
                        continue;
                char *copy = strdup(buf);
                if (!copy)
                        break;
                if (count == n) {
                        free(ring[head]);
                        ring[head] = copy;
                        head = (head + 1) % n;
                } else {
                        ring[count++] = copy;
                }
        }
        free(buf);
        fclose(f);
        char **outv = calloc(count + 1, sizeof *outv);
        if (!outv) {
                for (size_t i = 0; i < count; i++)
                        free(ring[i]);
                free(ring);
                return -ENOMEM;
        }
        for (size_t i = 0; i < count; i++)
                outv[i] = ring[(head + i) % n];
        free(ring);
        *lines = outv;
        return (int)count;
}
