/* sd_dl: libsystemd, loaded when gadgetd first needs it (the daemon's
 * notifications and socket activation, a log entry when stderr is the
 * journal, or the sd-bus calls that ask systemd for a delegated scope,
 * supervisor/limits/scope.c) instead of at every start: with the five libraries it pulls in
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
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>

#include "dl.h"

#define HIDDEN __attribute__((visibility("hidden")))
#define SONAME "libsystemd.so.0"

static struct {
        int state;      /* 0 not tried, 1 loaded, -1 not loadable */
        int (*notify)(int, const char *);
        int (*pid_notify_with_fds)(pid_t, int, const char *, const int *, unsigned);
        int (*watchdog_enabled)(int, uint64_t *);
        int (*listen_fds)(int);
        int (*is_socket_unix)(int, int, int, const char *, size_t);
        int (*journal_sendv)(const struct iovec *, int);
        int (*bus_open_system)(sd_bus **);
        sd_bus *(*bus_flush_close_unref)(sd_bus *);
        int (*bus_message_new_method_call)(sd_bus *, sd_bus_message **, const char *, const char *,
                                           const char *, const char *);
        int (*bus_message_appendv)(sd_bus_message *, const char *, va_list);
        int (*bus_message_open_container)(sd_bus_message *, char, const char *);
        int (*bus_message_close_container)(sd_bus_message *);
        int (*bus_message_readv)(sd_bus_message *, const char *, va_list);
        sd_bus_message *(*bus_message_unref)(sd_bus_message *);
        int (*bus_call)(sd_bus *, sd_bus_message *, uint64_t, sd_bus_error *, sd_bus_message **);
        int (*bus_match_signal)(sd_bus *, sd_bus_slot **, const char *, const char *, const char *,
                                const char *, sd_bus_message_handler_t, void *);
        int (*bus_process)(sd_bus *, sd_bus_message **);
        int (*bus_wait)(sd_bus *, uint64_t);
        void (*bus_error_free)(sd_bus_error *);
} fn;

/* 0 once loaded, -ENOSYS if it cannot be. */
static int load(void)
{
        static const struct dl_sym syms[] = {
                { (void **)&fn.notify, "sd_notify" },
                { (void **)&fn.pid_notify_with_fds, "sd_pid_notify_with_fds" },
                { (void **)&fn.watchdog_enabled, "sd_watchdog_enabled" },
                { (void **)&fn.listen_fds, "sd_listen_fds" },
                { (void **)&fn.is_socket_unix, "sd_is_socket_unix" },
                { (void **)&fn.journal_sendv, "sd_journal_sendv" },
                { (void **)&fn.bus_open_system, "sd_bus_open_system" },
                { (void **)&fn.bus_flush_close_unref, "sd_bus_flush_close_unref" },
                { (void **)&fn.bus_message_new_method_call, "sd_bus_message_new_method_call" },
                { (void **)&fn.bus_message_appendv, "sd_bus_message_appendv" },
                { (void **)&fn.bus_message_open_container, "sd_bus_message_open_container" },
                { (void **)&fn.bus_message_close_container, "sd_bus_message_close_container" },
                { (void **)&fn.bus_message_readv, "sd_bus_message_readv" },
                { (void **)&fn.bus_message_unref, "sd_bus_message_unref" },
                { (void **)&fn.bus_call, "sd_bus_call" },
                { (void **)&fn.bus_match_signal, "sd_bus_match_signal" },
                { (void **)&fn.bus_process, "sd_bus_process" },
                { (void **)&fn.bus_wait, "sd_bus_wait" },
                { (void **)&fn.bus_error_free, "sd_bus_error_free" },
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

HIDDEN int sd_pid_notify_with_fds(pid_t pid, int unset_environment, const char *state, const int *fds, unsigned n)
{
        return load() < 0 ? -ENOSYS : fn.pid_notify_with_fds(pid, unset_environment, state, fds, n);
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

HIDDEN int sd_bus_open_system(sd_bus **bus)
{
        return load() < 0 ? -ENOSYS : fn.bus_open_system(bus);
}

/* Only a bus this table opened reaches here, so the library is loaded. */
HIDDEN sd_bus *sd_bus_flush_close_unref(sd_bus *bus)
{
        return bus ? fn.bus_flush_close_unref(bus) : NULL;
}

HIDDEN int sd_bus_message_new_method_call(sd_bus *bus, sd_bus_message **m, const char *destination,
                                          const char *path, const char *interface, const char *member)
{
        return load() < 0 ? -ENOSYS : fn.bus_message_new_method_call(bus, m, destination, path, interface, member);
}

HIDDEN int sd_bus_message_append(sd_bus_message *m, const char *types, ...)
{
        va_list ap;
        if (load() < 0)
                return -ENOSYS;
        va_start(ap, types);
        int r = fn.bus_message_appendv(m, types, ap);
        va_end(ap);
        return r;
}

HIDDEN int sd_bus_message_open_container(sd_bus_message *m, char type, const char *contents)
{
        return load() < 0 ? -ENOSYS : fn.bus_message_open_container(m, type, contents);
}

HIDDEN int sd_bus_message_close_container(sd_bus_message *m)
{
        return load() < 0 ? -ENOSYS : fn.bus_message_close_container(m);
}

HIDDEN int sd_bus_message_read(sd_bus_message *m, const char *types, ...)
{
        va_list ap;
        if (load() < 0)
                return -ENOSYS;
        va_start(ap, types);
        int r = fn.bus_message_readv(m, types, ap);
        va_end(ap);
        return r;
}

HIDDEN sd_bus_message *sd_bus_message_unref(sd_bus_message *m)
{
        return m ? fn.bus_message_unref(m) : NULL;
}

HIDDEN int sd_bus_call(sd_bus *bus, sd_bus_message *m, uint64_t usec, sd_bus_error *ret_error,
                       sd_bus_message **reply)
{
        return load() < 0 ? -ENOSYS : fn.bus_call(bus, m, usec, ret_error, reply);
}

HIDDEN int sd_bus_match_signal(sd_bus *bus, sd_bus_slot **ret, const char *sender, const char *path,
                               const char *interface, const char *member, sd_bus_message_handler_t callback,
                               void *userdata)
{
        return load() < 0 ? -ENOSYS : fn.bus_match_signal(bus, ret, sender, path, interface, member, callback,
                                                          userdata);
}

HIDDEN int sd_bus_process(sd_bus *bus, sd_bus_message **r)
{
        return load() < 0 ? -ENOSYS : fn.bus_process(bus, r);
}

HIDDEN int sd_bus_wait(sd_bus *bus, uint64_t timeout_usec)
{
        return load() < 0 ? -ENOSYS : fn.bus_wait(bus, timeout_usec);
}

/* An error is only ever filled by the loaded library. */
HIDDEN void sd_bus_error_free(sd_bus_error *e)
{
        if (e && fn.state > 0)
                fn.bus_error_free(e);
}
