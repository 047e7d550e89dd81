/* scope: a transient systemd scope with Delegate=yes, through sd-bus
 * (libsystemd, loaded at first use by sd_dl.c). */
#include "scope.h"
#include "system/monotime.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

bool scope_systemd_running(void)
{
        struct stat st;
        return lstat("/run/systemd/system", &st) == 0 && S_ISDIR(st.st_mode);
}

#if HAVE_LIBSYSTEMD
#include <systemd/sd-bus.h>

/* For the call and for the job after it: systemd answers in milliseconds. */
#define SCOPE_TIMEOUT_USEC (10 * 1000000ull)
/* Asked at SIGTERM, while calls wait: a second at most. */
#define SCOPE_JOB_TIMEOUT_USEC (1000000ull)
#define SYSTEMD "org.freedesktop.systemd1"
#define SYSTEMD_PATH "/org/freedesktop/systemd1"
#define MANAGER "org.freedesktop.systemd1.Manager"

/* The job gadgetd waits for, and how it ended. */
struct job_wait {
        const char *path;
        char result[32];
        bool done;
};

/* JobRemoved(id, job, unit, result): notes the result of our job. */
static int job_removed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error)
{
        struct job_wait *w = userdata;
        const char *path, *unit, *result;
        uint32_t id;
        (void)ret_error;
        if (!w->path || sd_bus_message_read(m, "uoss", &id, &path, &unit, &result) < 0 ||
            strcmp(path, w->path) != 0)
                return 0;
        snprintf(w->result, sizeof w->result, "%s", result);
        w->done = true;
        return 0;
}

/* The properties of the scope: its description, Delegate=yes, PIDs, and
 * collected even if it fails (a stale unit would block the name). */
static int append_properties(sd_bus_message *m, const char *desc, const pid_t *pids, size_t n)
{
        int r;
        if ((r = sd_bus_message_open_container(m, 'a', "(sv)")) < 0 ||
            (r = sd_bus_message_append(m, "(sv)(sv)(sv)", "Description", "s", desc, "Delegate", "b", 1,
                                       "CollectMode", "s", "inactive-or-failed")) < 0 ||
            (r = sd_bus_message_open_container(m, 'r', "sv")) < 0 ||
            (r = sd_bus_message_append(m, "s", "PIDs")) < 0 ||
            (r = sd_bus_message_open_container(m, 'v', "au")) < 0 ||
            (r = sd_bus_message_open_container(m, 'a', "u")) < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                if ((r = sd_bus_message_append(m, "u", (uint32_t)pids[i])) < 0)
                        return r;
        for (int i = 0; i < 4; i++) /* au, v, (sv), a(sv) */
                if ((r = sd_bus_message_close_container(m)) < 0)
                        return r;
        return 0;
}

/* StartTransientUnit(name, "fail", properties, no auxiliary units). */
static int request(sd_bus *bus, const char *name, const char *desc, const pid_t *pids, size_t n,
                   sd_bus_message **reply, sd_bus_error *error)
{
        sd_bus_message *m = NULL;
        int r;
        if ((r = sd_bus_message_new_method_call(bus, &m, SYSTEMD, SYSTEMD_PATH, MANAGER, "StartTransientUnit")) < 0)
                return r;
        if ((r = sd_bus_message_append(m, "ss", name, "fail")) >= 0 &&
            (r = append_properties(m, desc, pids, n)) >= 0 &&
            (r = sd_bus_message_append(m, "a(sa(sv))", 0)) >= 0)
                r = sd_bus_call(bus, m, SCOPE_TIMEOUT_USEC, error, reply);
        sd_bus_message_unref(m);
        return r;
}

/* Runs the bus until our job is removed, or the time is up. */
static int wait_job(sd_bus *bus, struct job_wait *w)
{
        uint64_t deadline = monotime_us() + SCOPE_TIMEOUT_USEC;
        while (!w->done) {
                int r = sd_bus_process(bus, NULL);
                if (r < 0)
                        return r;
                if (r > 0)
                        continue;
                uint64_t now = monotime_us();
                if (now >= deadline)
                        return -ETIMEDOUT;
                if ((r = sd_bus_wait(bus, deadline - now)) < 0)
                        return r;
        }
        return 0;
}

int scope_start(const char *name, const char *desc, const pid_t *pids, size_t n, char *err, size_t errlen)
{
        sd_bus *bus = NULL;
        sd_bus_message *reply = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        struct job_wait w = { 0 };
        int r = sd_bus_open_system(&bus);
        if (r == -ENOSYS) {
                snprintf(err, errlen, "libsystemd.so.0 cannot be loaded");
                goto out;
        }
        if (r < 0) {
                snprintf(err, errlen, "cannot connect to the system bus: %s", strerror(-r));
                goto out;
        }
        /* Why this is safe: only systemd's own signals match (the bus
         * daemon checks the sender), so no other peer can make gadgetd
         * believe its job is done; and the match is in place before the
         * call, so the signal cannot come first. */
        if ((r = sd_bus_match_signal(bus, NULL, SYSTEMD, SYSTEMD_PATH, MANAGER, "JobRemoved", job_removed, &w)) < 0) {
                snprintf(err, errlen, "cannot watch systemd's jobs: %s", strerror(-r));
                goto out;
        }
        if ((r = request(bus, name, desc, pids, n, &reply, &error)) < 0) {
                snprintf(err, errlen, "systemd refused the scope %s: %s", name,
                         error.message ? error.message : strerror(-r));
                goto out;
        }
        if ((r = sd_bus_message_read(reply, "o", &w.path)) < 0) {
                snprintf(err, errlen, "systemd's answer for the scope %s: %s", name, strerror(-r));
                goto out;
        }
        if ((r = wait_job(bus, &w)) < 0) {
                snprintf(err, errlen, "waiting for systemd to start the scope %s: %s", name, strerror(-r));
                goto out;
        }
        if (strcmp(w.result, "done") != 0) {
                snprintf(err, errlen, "systemd could not start the scope %s (job result \"%s\")", name, w.result);
                r = -EIO;
        }
out:
        sd_bus_error_free(&error);
        sd_bus_message_unref(reply);
        sd_bus_flush_close_unref(bus);
        return r < 0 ? r : 0;
}

/* Properties.Get(iface, prop) of the object at path, waiting usec at
 * most: *reply is at the variant. */
static int get_property(sd_bus *bus, const char *path, const char *iface, const char *prop, uint64_t usec,
                        sd_bus_message **reply, sd_bus_error *error)
{
        sd_bus_message *m = NULL;
        int r;
        if ((r = sd_bus_message_new_method_call(bus, &m, SYSTEMD, path, "org.freedesktop.DBus.Properties",
                                                "Get")) >= 0 &&
            (r = sd_bus_message_append(m, "ss", iface, prop)) >= 0)
                r = sd_bus_call(bus, m, usec, error, reply);
        sd_bus_message_unref(m);
        return r;
}

/* Manager.GetUnit(unit), then Properties.Get(iface, "Delegate"). */
static int get_delegate(sd_bus *bus, const char *unit, const char *iface, int *delegate, sd_bus_error *error)
{
        sd_bus_message *m = NULL, *reply = NULL, *value = NULL;
        const char *path;
        int r;
        if ((r = sd_bus_message_new_method_call(bus, &m, SYSTEMD, SYSTEMD_PATH, MANAGER, "GetUnit")) < 0 ||
            (r = sd_bus_message_append(m, "s", unit)) < 0 ||
            (r = sd_bus_call(bus, m, SCOPE_TIMEOUT_USEC, error, &reply)) < 0 ||
            (r = sd_bus_message_read(reply, "o", &path)) < 0)
                goto out;
        if ((r = get_property(bus, path, iface, "Delegate", SCOPE_TIMEOUT_USEC, &value, error)) >= 0)
                r = sd_bus_message_read(value, "v", "b", delegate);
out:
        sd_bus_message_unref(m);
        sd_bus_message_unref(reply);
        sd_bus_message_unref(value);
        return r;
}

int scope_own_job(char *type, size_t len)
{
        sd_bus *bus = NULL;
        sd_bus_message *m = NULL, *unit = NULL, *job = NULL, *jtype = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        const char *path, *job_path, *t;
        uint32_t id = 0;
        int r;
        if ((r = sd_bus_open_system(&bus)) < 0 ||
            (r = sd_bus_message_new_method_call(bus, &m, SYSTEMD, SYSTEMD_PATH, MANAGER, "GetUnitByPID")) < 0 ||
            (r = sd_bus_message_append(m, "u", (uint32_t)getpid())) < 0 ||
            (r = sd_bus_call(bus, m, SCOPE_JOB_TIMEOUT_USEC, &error, &unit)) < 0 ||
            (r = sd_bus_message_read(unit, "o", &path)) < 0 ||
            (r = get_property(bus, path, "org.freedesktop.systemd1.Unit", "Job", SCOPE_JOB_TIMEOUT_USEC, &job, &error)) < 0 ||
            (r = sd_bus_message_read(job, "v", "(uo)", &id, &job_path)) < 0)
                goto out;
        r = 0;
        if (id == 0)
                goto out;
        if ((r = get_property(bus, job_path, "org.freedesktop.systemd1.Job", "JobType", SCOPE_JOB_TIMEOUT_USEC, &jtype,
                                 &error)) < 0 ||
            (r = sd_bus_message_read(jtype, "v", "s", &t)) < 0)
                goto out;
        snprintf(type, len, "%s", t);
        r = 1;
out:
        sd_bus_message_unref(m);
        sd_bus_message_unref(unit);
        sd_bus_message_unref(job);
        sd_bus_message_unref(jtype);
        sd_bus_error_free(&error);
        sd_bus_flush_close_unref(bus);
        return r;
}

int scope_delegated(const char *unit, char *err, size_t errlen)
{
        size_t n = strlen(unit);
        const char *iface = n > 8 && strcmp(unit + n - 8, ".service") == 0 ? "org.freedesktop.systemd1.Service"
                            : n > 6 && strcmp(unit + n - 6, ".scope") == 0 ? "org.freedesktop.systemd1.Scope"
                            : NULL;
        sd_bus *bus = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        int delegate = 0, r;
        if (!iface) {
                snprintf(err, errlen, "%.200s is not a service or scope", unit);
                return -EINVAL;
        }
        if ((r = sd_bus_open_system(&bus)) < 0) {
                snprintf(err, errlen, "%s", r == -ENOSYS ? "libsystemd.so.0 cannot be loaded"
                                                         : "cannot connect to the system bus");
                goto out;
        }
        if ((r = get_delegate(bus, unit, iface, &delegate, &error)) < 0)
                snprintf(err, errlen, "systemd's Delegate= of %.200s: %s", unit,
                         error.message ? error.message : strerror(-r));
out:
        sd_bus_error_free(&error);
        sd_bus_flush_close_unref(bus);
        return r < 0 ? r : delegate != 0;
}

#else

int scope_own_job(char *type, size_t len)
{
        (void)type;
        (void)len;
        return -ENOSYS;
}

int scope_delegated(const char *unit, char *err, size_t errlen)
{
        (void)unit;
        snprintf(err, errlen, "gadgetd was built without libsystemd");
        return -ENOSYS;
}

int scope_start(const char *name, const char *desc, const pid_t *pids, size_t n, char *err, size_t errlen)
{
        (void)name;
        (void)desc;
        (void)pids;
        (void)n;
        snprintf(err, errlen, "gadgetd was built without libsystemd");
        return -ENOSYS;
}

#endif
