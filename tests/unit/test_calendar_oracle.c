/* test_calendar_oracle: policy/calendar.c against systemd itself. For each
 * zone and start time, runs `systemd-analyze calendar --base-time=@T
 * --iterations=N SPEC...` with TZ set, and compares its normalized forms
 * and elapse times with calendar_format and calendar_next. The start times
 * sit just before DST changes of the zones, so the specs cross gaps and
 * overlaps (Lord Howe Island's are 30 minutes). */
#include "calendar.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define ITERATIONS 40
#define OUTPUT_MAX (8u << 20)

static const char *const specs[] = {
        "minutely", "hourly", "daily", "weekly", "monthly", "yearly", "quarterly", "semiannually",
        "*:0/5", "*:0/15", "*:7/20:30", "*:*:0/30", "*-*-* 02:30", "*-*-* 2,3:30", "*-*-* 1..3:0/10",
        "*-*-* 02:00:00", "*-*-* 01:45", "Mon..Fri 09:00", "Sat,Sun 02:30:15", "Sun *-*-* 2:*:00",
        "Mon,Wed,Fri *-*-1..7 12:00", "*-*-1,15 03:00", "*-02-29 12:00", "Fri *-*-13",
        "*-1..6-31", "2026,2027-*-* 00:00", "*-*-* 00/6:00", "*-*-* 23:59:59", "daily UTC",
        "*:0/10 UTC", "Tue 1..3:00 UTC", "*-*-1/3 4:00", "*-02-30", "2027-01-01 00:00:00",
        "*:5..20/7,3..5/1", "Sat-Sun 26/3-*-1 12:30:0..59/20", "mon..FRI,Sun *-*-29/1",
        /* not "*-*~20/8": systemd 252 reports an infinite loop for it in Lord Howe's zone */
        "*-*~1 02:30", "Sun *-03,10~07/1 02:15", "*~3..6/2", "*-02~1..28/27 UTC",
};

/* Texts systemd refuses: so must calendar_parse. */
static const char *const refused[] = {
        "Fri..Mon", "*/2:00", "*:5/55", "*-*-31/1", "2200-01-01", "2199/1-1-1", "24:00", "*-13-1",
        "Mon, Tue", "*-*-*-*", "12:00:00 UTC UTC", "1969-12-31", "00:00:60", "*-*-* 9", ",12:00",
        "Mon..Tue..Wed", "0..5/0:00", "05..1:00", "*-*-* 12:00 Z", "*-*~29", "*-*~7..1", "*-*~5/5",
        "*-*-3~1", "*-*~1~2", "12:00~1",
};

static const char *const zones[] = { "UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe" };

/* Start times (UTC): before the 2026 DST changes of the zones, and a plain day. */
static const int64_t bases[] = {
        1774744200, /* 2026-03-29 00:30: Berlin's gap at 01:00 */
        1792884600, /* 2026-10-24 23:30: Berlin's overlap at 01:00 */
        1772951400, /* 2026-03-08 06:30: New York's gap at 07:00 */
        1793509200, /* 2026-11-01 05:00: New York's overlap at 06:00 */
        1775311200, /* 2026-04-04 14:00: Lord Howe's overlap at 15:00 */
        1791039600, /* 2026-10-03 15:00: Lord Howe's gap at 15:30 */
        1796194800, /* 2026-12-02 07:00 */
};

/* One spec's block of systemd-analyze's output. */
struct block {
        char normalized[CALENDAR_FORMAT_MAX];
        int64_t times[ITERATIONS];
        size_t n;
        int awaiting; /* the time of the last iteration line, if it was not in UTC */
};

/* Runs systemd-analyze with TZ=zone; its output in a malloc'd string, or NULL. */
static char *analyze(const char *zone, int64_t base)
{
        char tz[64], basearg[64], iter[32], **argv, **envp;
        size_t n_spec = sizeof(specs) / sizeof(specs[0]), n_env = 0, len = 0;
        char *buf = malloc(OUTPUT_MAX + 1);
        int fd[2], status;
        pid_t pid;
        ssize_t k;

        snprintf(tz, sizeof(tz), "TZ=%s", zone);
        snprintf(basearg, sizeof(basearg), "--base-time=@%lld", (long long)base);
        snprintf(iter, sizeof(iter), "--iterations=%d", ITERATIONS);
        argv = calloc(n_spec + 5, sizeof(*argv));
        while (environ[n_env])
                n_env++;
        envp = calloc(n_env + 2, sizeof(*envp));
        if (!buf || !argv || !envp || pipe(fd) < 0)
                abort();
        argv[0] = "systemd-analyze";
        argv[1] = "calendar";
        argv[2] = basearg;
        argv[3] = iter;
        memcpy(argv + 4, specs, n_spec * sizeof(*argv));
        envp[0] = tz;
        for (size_t i = 0, j = 1; i < n_env; i++) {
                if (strncmp(environ[i], "TZ=", 3) != 0)
                        envp[j++] = environ[i];
        }
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
        posix_spawn_file_actions_addclose(&fa, fd[0]);
        if (posix_spawnp(&pid, "systemd-analyze", &fa, NULL, argv, envp) != 0) {
                free(buf);
                buf = NULL;
                close(fd[1]);
                goto out;
        }
        close(fd[1]);
        while (len < OUTPUT_MAX && (k = read(fd[0], buf + len, OUTPUT_MAX - len)) > 0)
                len += (size_t)k;
        buf[len] = '\0';
        if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                free(buf);
                buf = NULL;
        }
out:
        posix_spawn_file_actions_destroy(&fa);
        close(fd[0]);
        free(argv);
        free(envp);
        return buf;
}

/* "Www YYYY-MM-DD HH:MM:SS ZONE": 1 with *t set if ZONE is UTC, 0 if another zone, -1 if neither. */
static int stamp(const char *s, int64_t *t)
{
        struct tm tm = { 0 };
        char wd[8], zone[16];

        if (sscanf(s, "%7s %d-%d-%d %d:%d:%d %15s", wd, &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                   &tm.tm_min, &tm.tm_sec, zone) != 8)
                return -1;
        if (strcmp(zone, "UTC") != 0)
                return 0;
        tm.tm_year -= 1900;
        tm.tm_mon--;
        *t = (int64_t)timegm(&tm);
        return 1;
}

/* One line of output into the block b; false if it is not understood. */
static bool line(struct block *b, const char *l)
{
        const char *v;
        int64_t t;
        int r;

        while (*l == ' ')
                l++;
        if ((v = strchr(l, ':')) == NULL)
                return *l == '\0';
        v += 2;
        if (strncmp(l, "Original form:", 14) == 0 || strncmp(l, "From now:", 9) == 0)
                return true;
        if (strncmp(l, "Normalized form:", 16) == 0) {
                snprintf(b->normalized, sizeof(b->normalized), "%s", v);
                return true;
        }
        if (strcmp(l, "Next elapse: never") == 0)
                return true;
        if (strncmp(l, "Next elapse:", 12) == 0 || strncmp(l, "Iter. #", 7) == 0) {
                r = stamp(v, &t);
                if (r < 0 || b->n == ITERATIONS)
                        return false;
                if (r > 0)
                        b->times[b->n++] = t;
                b->awaiting = r == 0;
                return true;
        }
        if (strncmp(l, "(in UTC):", 9) == 0) {
                if (!b->awaiting || stamp(v, &t) != 1)
                        return false;
                b->times[b->n++] = t;
                b->awaiting = 0;
                return true;
        }
        return false;
}

/* calendar.c's answers for spec against systemd's block. */
static void compare(const char *zone, int64_t base, const char *spec, const struct block *b)
{
        struct calendar *c = NULL;
        char err[256] = "", norm[CALENDAR_FORMAT_MAX] = "";
        int64_t t = base, next = 0;
        size_t i;
        int r = 0;

        if (calendar_parse(spec, &c, err, sizeof(err)) < 0) {
                CHECK(0, "\"%s\" parses (%s)", spec, err);
                return;
        }
        calendar_format(c, norm, sizeof(norm));
        if (strcmp(zone, "UTC") == 0 && base == bases[0])
                CHECK_STR(norm, b->normalized, "\"%s\" normalizes as systemd does", spec);
        for (i = 0; i < b->n; i++) {
                r = calendar_next(c, t, &next);
                if (r < 0 || next != b->times[i])
                        break;
                t = next;
        }
        if (i == b->n && b->n < ITERATIONS)
                r = calendar_next(c, t, &next); /* systemd saw no more: neither must we */
        CHECK(i == b->n && (b->n == ITERATIONS || r == -ENOENT),
              "\"%s\" TZ=%s from @%lld: %zu of systemd's %zu times agree (%s at the first difference: ours %lld, "
              "systemd's %lld)", spec, zone, (long long)base, i, b->n, r < 0 ? "none" : "one",
              (long long)next, i < b->n ? (long long)b->times[i] : -1LL);
        calendar_free(c);
}

static void run(const char *zone, int64_t base)
{
        size_t n_spec = sizeof(specs) / sizeof(specs[0]), k = 0;
        struct block *blocks = calloc(n_spec, sizeof(*blocks));
        char *out = analyze(zone, base), *save = NULL;
        bool ok = true;

        CHECK(out != NULL, "systemd-analyze calendar runs (TZ=%s)", zone);
        if (!out || !blocks)
                goto out;
        setenv("TZ", zone, 1);
        tzset();
        for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                /* "Original form:" is left out when it is the normalized one */
                if (strstr(l, "Original form:"))
                        continue;
                if (strstr(l, "Normalized form:") && ++k > n_spec)
                        break;
                if (k == 0 || !line(&blocks[k - 1], l)) {
                        ok = false;
                        printf("# not understood: %s\n", l);
                }
        }
        CHECK(ok && k == n_spec, "systemd-analyze's output read: %zu blocks", k);
        for (size_t i = 0; ok && i < n_spec; i++)
                compare(zone, base, specs[i], &blocks[i]);
out:
        free(out);
        free(blocks);
}

/* Each of refused[] is refused by systemd-analyze and by calendar_parse. */
static void test_refused(void)
{
        for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
                char *argv[] = { "systemd-analyze", "calendar", (char *)refused[i], NULL }, err[256] = "";
                struct calendar *c = NULL;
                int status = -1, r = calendar_parse(refused[i], &c, err, sizeof(err));
                pid_t pid;
                posix_spawn_file_actions_t fa;

                posix_spawn_file_actions_init(&fa);
                posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
                posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
                if (posix_spawnp(&pid, "systemd-analyze", &fa, NULL, argv, environ) != 0 ||
                    waitpid(pid, &status, 0) < 0)
                        status = -1;
                posix_spawn_file_actions_destroy(&fa);
                CHECK(WIFEXITED(status) && WEXITSTATUS(status) != 0 && r == -EINVAL,
                      "\"%s\": refused by systemd-analyze (status %d) and by us (%s)", refused[i], status, err);
                if (r == 0)
                        calendar_free(c);
        }
}

int main(void)
{
        test_refused();
        for (size_t z = 0; z < sizeof(zones) / sizeof(zones[0]); z++) {
                for (size_t b = 0; b < sizeof(bases) / sizeof(bases[0]); b++)
                        run(zones[z], bases[b]);
        }
        return tap_done();
}
