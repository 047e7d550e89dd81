/* fdstore: the handoff through systemd's fd store (fdstore.h). */
#include "fdstore.h"
#include "limits/scope.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif


/* Most fds taken back (LISTEN_FDS), and the highest number one may have. */
#define TAKE_MAX 65536
#define FD_NUMBER_MAX (1 << 20)

bool fdstore_available(void)
{
        const char *s = getenv("NOTIFY_SOCKET");
#ifdef HAVE_LIBSYSTEMD
        return s && *s;
#else
        (void)s;
        return false;
#endif
}

const char *fdstore_refusal(void)
{
        char job[32];
        if (!fdstore_available())
                return "no service manager to hand the gadgets to (NOTIFY_SOCKET is not set)";
        /* systemd closes the store after a stop: the gadgets are told to
         * stop (their shutdown message, SIGKILL after 3 s) rather than
         * ended by the store's closing. A restart, or no answer, hands on. */
        if (scope_own_job(job, sizeof job) == 1 && strcmp(job, "stop") == 0)
                return "systemd is stopping gadgetd's unit (its job is a stop, not a restart)";
        return NULL;
}

#ifdef HAVE_LIBSYSTEMD
static int push_one(int fd, const char *name)
{
        char msg[96];
        /* FDPOLL=0: systemd would drop a stored fd at its hangup (a control
         * connection whose client left), and the state would then name an
         * fd the next gadgetd lacks. */
        snprintf(msg, sizeof msg, "FDSTORE=1\nFDPOLL=0\nFDNAME=%s", name);
        int e = sd_pid_notify_with_fds(0, 0, msg, &fd, 1);
        return e > 0 ? 0 : e == 0 ? -ENOTCONN : e;
}

static void remove_one(const char *name)
{
        char msg[96];
        snprintf(msg, sizeof msg, "FDSTOREREMOVE=1\nFDNAME=%s", name);
        sd_notify(0, msg);
}
#else
static int push_one(int fd, const char *name)
{
        (void)fd;
        (void)name;
        return -EOPNOTSUPP;
}

static void remove_one(const char *name)
{
        (void)name;
}
#endif

/* One fd of the state (ctx), named by its number; the socket unit's
 * listener stays in systemd's hands. */
static int push_fd(int fd, const void *ctx)
{
        const struct reexec_state *s = ctx;
        char name[32];
        if (s->activated && fd == s->listen_fd)
                return 0;
        snprintf(name, sizeof name, FDSTORE_FD_PREFIX "%d", fd);
        return push_one(fd, name);
}

int fdstore_push(const struct reexec_state *s, int state_fd, char *err, size_t len)
{
        int e = reexec_fds_each(s, push_fd, s);
        /* Last: a store without the state is closed by the next gadgetd. */
        if (e == 0)
                e = push_one(state_fd, FDSTORE_STATE);
        if (e < 0)
                snprintf(err, len, "systemd's fd store: %s (FileDescriptorStoreMax= of gadgetd.service?)",
                         strerror(-e));
        return e;
}

/* The number a stored fd's name gives it (>= 3), or -1 for another name. */
static int name_fd(const char *name)
{
        size_t k = strlen(FDSTORE_FD_PREFIX);
        if (strncmp(name, FDSTORE_FD_PREFIX, k) != 0 || !name[k] || strspn(name + k, "0123456789") != strlen(name + k))
                return -1;
        long n = strtol(name + k, NULL, 10);
        return n >= 3 && n <= FD_NUMBER_MAX && strlen(name + k) <= 8 ? (int)n : -1;
}

/* LISTEN_FDS, LISTEN_FDNAMES for this process: the count and the names
 * (strdup'd, ':'-separated, NULL: none). -1 if not for it. */
static int listen_env(char **names)
{
        const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS"), *nm = getenv("LISTEN_FDNAMES");
        char *end;
        *names = NULL;
        if (!pid || !fds || strtol(pid, &end, 10) != (long)getpid() || *end)
                return -1;
        long n = strtol(fds, &end, 10);
        if (*end || n <= 0 || n > TAKE_MAX)
                return -1;
        *names = nm ? strdup(nm) : NULL;
        return (int)n;
}

int fdstore_take(char *note, size_t len)
{
        char *names, *save = NULL;
        int n = listen_env(&names);
        note[0] = '\0';
        if (n < 0 || !names) {
                free(names);
                return -1;
        }
        int *target = calloc((size_t)n, sizeof *target), state = -1, sockets = 0, top = 3 + n;
        char **name = calloc((size_t)n, sizeof *name);
        if (!target || !name) {
                free(target);
                free(name);
                free(names);
                return -1;
        }
        char *tok = strtok_r(names, ":", &save);
        for (int i = 0; i < n; i++, tok = tok ? strtok_r(NULL, ":", &save) : NULL) {
                name[i] = tok;
                target[i] = tok ? name_fd(tok) : -1;
                if (tok && strcmp(tok, FDSTORE_STATE) == 0)
                        target[i] = -2;
                else if (target[i] == -1 && (!tok || strncmp(tok, "gadgetd-", 8) != 0) && sockets == i)
                        sockets++; /* the socket units' fds come first */
                else if (target[i] > top - 1)
                        top = target[i] + 1;
        }
        /* Each number once, and none of a socket's: else that fd is closed
         * (and the state then names an fd it lacks: it fails closed). */
        for (int i = sockets; i < n; i++)
                for (int j = 0; j < n && target[i] >= 0; j++)
                        if (j != i && (target[j] == target[i] || (j < sockets && 3 + j == target[i])))
                                target[i] = -1;
        /* Above every number first, so that none is overwritten before it moved. */
        int *high = calloc((size_t)n, sizeof *high);
        for (int i = sockets; high && i < n; i++) {
                high[i] = target[i] == -1 ? -1 : fcntl(3 + i, F_DUPFD_CLOEXEC, top);
                close(3 + i);
        }
        for (int i = sockets; high && i < n; i++) {
                if (target[i] == -2 && state < 0)
                        state = high[i];
                else if (target[i] >= 0 && high[i] >= 0 && dup2(high[i], target[i]) >= 0) {
                        close(high[i]);
                        /* systemd passes them blocking (NonBlocking=no clears
                         * O_NONBLOCK on the open file, which gadgetd shares
                         * with no one): as they were, or a read of a link,
                         * a pipe or a control connection would stall the loop. */
                        int fl = fcntl(target[i], F_GETFL);
                        if (fl >= 0)
                                fcntl(target[i], F_SETFL, fl | O_NONBLOCK);
                }
                else if (high[i] >= 0)
                        close(high[i]);
                /* Out of the store: the fds are this process's alone now. */
                if (name[i])
                        remove_one(name[i]);
        }
        char count[16];
        snprintf(count, sizeof count, "%d", sockets);
        if (sockets > 0)
                setenv("LISTEN_FDS", count, 1);
        else
                unsetenv("LISTEN_FDS");
        if (n > sockets)
                snprintf(note, len, "systemd's fd store held %d fds of a previous gadgetd%s", n - sockets,
                         state >= 0 ? "" : " but no state: closed, its sandboxes end");
        free(high);
        free(target);
        free(name);
        free(names);
        return state;
}
