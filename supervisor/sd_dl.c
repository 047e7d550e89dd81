/* sd_dl: libsystemd, loaded when gadgetd first needs it (the daemon's
 * notifications and socket activation, or a log entry when stderr is the
 * journal) instead of at every start: with the five libraries it pulls in
 * it was a tenth of a `gadgetd run` that needs none of it.
 *
 * The functions below carry libsystemd's names and forward to the loaded
 * library; they are hidden, so nothing but gadgetd's own code binds to
 * them. They load it at their first call; if it cannot be loaded they
 * fail with -ENOSYS, and gadgetd goes on as without systemd (plain log
 * lines on stderr, no notifications). The table is this process's one
 * copy of libsystemd's entry points, as the dynamic linker's would be. */
#define SD_JOURNAL_SUPPRESS_LOCATION
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>

#include "dl.h"

#define HIDDEN __attribute__((visibility("hidden")))
#define SONAME "libsystemd.so.0"

static struct {
        int state;      /* 0 not tried, 1 loaded, -1 not loadable */
        int (*notify)(int, const char *);
        int (*watchdog_enabled)(int, uint64_t *);
        int (*listen_fds)(int);
        int (*is_socket_unix)(int, int, int, const char *, size_t);
        int (*journal_sendv)(const struct iovec *, int);
} fn;

/* 0 once loaded, -ENOSYS if it cannot be. */
static int load(void)
{
        static const struct dl_sym syms[] = {
                { (void **)&fn.notify, "sd_notify" },
                { (void **)&fn.watchdog_enabled, "sd_watchdog_enabled" },
                { (void **)&fn.listen_fds, "sd_listen_fds" },
                { (void **)&fn.is_socket_unix, "sd_is_socket_unix" },
                { (void **)&fn.journal_sendv, "sd_journal_sendv" },
        };
        if (fn.state)
                return fn.state > 0 ? 0 : -ENOSYS;
        fn.state = -1;
        char err[256];
        if (!dl_load(SONAME, syms, sizeof syms / sizeof *syms, err, sizeof err))
                return -ENOSYS;
        fn.state = 1;
        return 0;
}

HIDDEN int sd_notify(int unset_environment, const char *state)
{
        return load() < 0 ? -ENOSYS : fn.notify(unset_environment, state);
}

HIDDEN int sd_watchdog_enabled(int unset_environment, uint64_t *usec)
{
        return load() < 0 ? -ENOSYS : fn.watchdog_enabled(unset_environment, usec);
}

HIDDEN int sd_listen_fds(int unset_environment)
{
        return load() < 0 ? -ENOSYS : fn.listen_fds(unset_environment);
}

HIDDEN int sd_is_socket_unix(int fd, int type, int listening, const char *path, size_t length)
{
        return load() < 0 ? -ENOSYS : fn.is_socket_unix(fd, type, listening, path, length);
}

HIDDEN int sd_journal_sendv(const struct iovec *iov, int n)
{
        return load() < 0 ? -ENOSYS : fn.journal_sendv(iov, n);
}
