/* testgadget: a static gadget the integration tests drive. Its name comes
 * from GADGET_NAME, so one program serves any number of policies.
 * Started with "crash" as its argument it aborts at once (a crash loop). */
#include <errno.h>
#include <gadget.h>
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <linux/aio_abi.h>
#include <time.h>
#include <unistd.h>

/* Started with "tag T": the tag its method tag answers (the version of a
 * rollout, releases_test.py); "tag T fail": its echo fails. */
static const char *tag_text = "";
static bool echo_fails;

static gadget_value *echo(struct gadget_call *call, const gadget_value *args, void *data)
{
        /* Rebuild the argument: values passed in belong to libgadget. */
        const char *s = gadget_as_string(args);
        int64_t i;
        if (echo_fails)
                return gadget_fail(call, GADGET_EFAILED, "failing as asked (tag %s)", tag_text);
        if (s)
                return gadget_string(s);
        if (gadget_as_int(args, &i))
                return gadget_int(i);
        return gadget_null();
}

static gadget_value *tag(struct gadget_call *call, const gadget_value *args, void *data)
{
        return gadget_string(tag_text);
}

/* Its binding B's tag twice, within the call it serves: "T1/T2" (one call
 * tree: a rollout of B must answer both from one version). */
static gadget_value *tagchain(struct gadget_call *call, const gadget_value *args, void *data)
{
        gadget_value *r[2] = { NULL, NULL };
        for (int i = 0; i < 2; i++) {
                gadget_value *a = gadget_map();
                if (a)
                        gadget_map_set(a, "method", gadget_string("tag"));
                if (gadget_binding_call(gadget_call_gadget(call), "B", "call", a, &r[i]) < 0) {
                        gadget_value_free(r[0]);
                        return gadget_fail(call, GADGET_EFAILED, "%s", gadget_last_error(gadget_call_gadget(call)));
                }
        }
        const char *a = gadget_as_string(r[0]), *b = gadget_as_string(r[1]);
        gadget_value *out = gadget_stringf("%s/%s", a ? a : "?", b ? b : "?");
        gadget_value_free(r[0]);
        gadget_value_free(r[1]);
        return out;
}

/* The sleep calls this process started (sleeps: how many). */
static int64_t sleeps_started;

static gadget_value *sleep_ms(struct gadget_call *call, const gadget_value *args, void *data)
{
        int64_t ms = 0;
        if (!gadget_as_int(gadget_map_get(args, "ms"), &ms) || ms < 0)
                return gadget_fail(call, GADGET_EINVAL, "sleep needs {\"ms\": N}");
        sleeps_started++;
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };
        nanosleep(&ts, NULL);
        return gadget_string("slept");
}

static gadget_value *sleeps(struct gadget_call *call, const gadget_value *args, void *data)
{
        return gadget_int(sleeps_started);
}

static gadget_value *hang(struct gadget_call *call, const gadget_value *args, void *data)
{
        for (;;)
                pause();
        return NULL;
}

static gadget_value *crash(struct gadget_call *call, const gadget_value *args, void *data)
{
        raise(SIGSEGV);
        return NULL;
}

/* Hangs up: its channel closed (gadgetd reads its end), the process
 * lingers {"ms": N} before it exits 1: a gadget on its way out while
 * gadgetd still counts it ready (waits_test.py). */
static gadget_value *hangup(struct gadget_call *call, const gadget_value *args, void *data)
{
        int64_t ms = 0;
        const char *fd = getenv("GADGET_FD");
        gadget_as_int(gadget_map_get(args, "ms"), &ms);
        close(fd ? atoi(fd) : 3);
        fprintf(stderr, "hung up\n");
        fflush(stderr);
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };
        nanosleep(&ts, NULL);
        _exit(1);
}

/* Crashes of each kind (crash_test.py): each in a function of its own
 * name, which the cause and the backtrace must show. */
static volatile int *volatile null_pointer;

__attribute__((noinline)) static void crash_null_here(void)
{
        *null_pointer = 1;
}

static gadget_value *crash_null(struct gadget_call *call, const gadget_value *args, void *data)
{
        crash_null_here();
        return NULL;
}

__attribute__((noinline)) static void crash_abort_here(void)
{
        abort();
}

static gadget_value *crash_abort(struct gadget_call *call, const gadget_value *args, void *data)
{
        crash_abort_here();
        return NULL;
}

__attribute__((noinline)) static int crash_stack_here(volatile int depth)
{
        volatile char pad[4096];
        if (depth < 0) /* never: only so the recursion has an end */
                return 0;
        pad[0] = (char)depth;
        return crash_stack_here(depth + 1) + pad[0];
}

static gadget_value *crash_stack(struct gadget_call *call, const gadget_value *args, void *data)
{
        return gadget_int(crash_stack_here(0));
}

static void *crash_thread_here(void *arg)
{
        crash_null_here();
        return arg;
}

static gadget_value *crash_thread(struct gadget_call *call, const gadget_value *args, void *data)
{
        pthread_t t;
        if (pthread_create(&t, NULL, crash_thread_here, NULL) != 0)
                return gadget_fail(call, GADGET_EINVAL, "no thread");
        pthread_join(t, NULL);
        return NULL;
}

/* A program that handles its own faults (as a JVM does) is not crashing. */
static sigjmp_buf survive_at;

static void survive(int sig)
{
        siglongjmp(survive_at, sig);
}

static gadget_value *segv_handled(struct gadget_call *call, const gadget_value *args, void *data)
{
        struct sigaction sa = { .sa_handler = survive }, old;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &old);
        int sig = sigsetjmp(survive_at, 1);
        if (sig == 0)
                crash_null_here();
        sigaction(SIGSEGV, &old, NULL);
        return gadget_int(sig);
}

/* An i386 system call: the seccomp filter kills the gadget (SIGSYS). */
static gadget_value *sigsys(struct gadget_call *call, const gadget_value *args, void *data)
{
        /* An x32 getpid: another ABI, killed by the filter on every x86-64
         * kernel (int $0x80 faults before it where the i386 entry is off). */
        return gadget_int(syscall(0x40000000L | 39));
}

/* A call the filter refuses, args {call, n (times, default 1), ms (or
 * for this long)}: {errno, times}, the errno of the last attempt. */
static gadget_value *deny(struct gadget_call *call, const gadget_value *args, void *data)
{
        const char *what = gadget_as_string(gadget_map_get(args, "call"));
        int64_t n = 1, ms = 0;
        (void)gadget_as_int(gadget_map_get(args, "n"), &n);
        (void)gadget_as_int(gadget_map_get(args, "ms"), &ms);
        struct timespec t0, t;
        int64_t times = 0;
        int e = 0;
        if (!what)
                return gadget_fail(call, GADGET_EINVAL, "call: a string");
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int64_t i = 0; ms > 0 || i < (n > 0 ? n : 1); i++) {
                long r;
                if (strcmp(what, "socket") == 0)
                        r = syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
                else if (strcmp(what, "ptrace") == 0)
                        r = syscall(SYS_ptrace, PTRACE_TRACEME, 0, 0, 0);
                else if (strcmp(what, "mount") == 0)
                        r = syscall(SYS_mount, "none", "/srv/outside", "tmpfs", 0, NULL);
                else if (strcmp(what, "chroot") == 0)
                        r = syscall(SYS_chroot, "/");
                else if (strcmp(what, "io_setup") == 0) /* in no list: ENOSYS */
                        r = syscall(SYS_io_setup, 1, &(aio_context_t){ 0 });
                else if (strcmp(what, "core_limit") == 0) /* RLIMIT_CORE stays the sandbox's */
                        r = syscall(SYS_prlimit64, 0, RLIMIT_CORE, &(struct rlimit){ 0, 0 }, NULL);
                else if (strcmp(what, "clone_newuser") == 0) /* refused by its flags */
                        r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
                else
                        return gadget_fail(call, GADGET_EINVAL, "unknown call");
                if (r == 0)
                        _exit(0); /* a child of clone, were it let through */
                e = r < 0 ? errno : 0;
                times++;
                if (ms > 0 && times % 1024 == 0) {
                        clock_gettime(CLOCK_MONOTONIC, &t);
                        if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= ms)
                                break;
                }
        }
        gadget_value *r = gadget_map();
        gadget_map_set(r, "errno", gadget_string(e ? strerrorname_np(e) : "none"));
        gadget_map_set(r, "times", gadget_int(times));
        return r;
}

static gadget_value *say(struct gadget_call *call, const gadget_value *args, void *data)
{
        const char *text = gadget_as_string(gadget_map_get(args, "text"));
        if (!text)
                return gadget_fail(call, GADGET_EINVAL, "say needs {\"text\": \"...\"}");
        printf("%s\n", text);
        fflush(stdout);
        return gadget_null();
}

/* log {"text": "...", "level": N}: a log message of syslog priority N. */
static gadget_value *log_msg(struct gadget_call *call, const gadget_value *args, void *data)
{
        const char *text = gadget_as_string(gadget_map_get(args, "text"));
        int64_t level = 6;
        gadget_as_int(gadget_map_get(args, "level"), &level);
        if (!text || level < 0 || level > 7)
                return gadget_fail(call, GADGET_EINVAL, "log needs {\"text\": \"...\", \"level\": 0..7}");
        gadget_log(gadget_call_gadget(call), (int)level, "%s", text);
        return gadget_null();
}

/* interleave: half a line on stdout, a line on stderr and a log message,
 * then the rest of the stdout line: each must stay whole in the log. */
static gadget_value *interleave(struct gadget_call *call, const gadget_value *args, void *data)
{
        struct timespec pause = { .tv_sec = 0, .tv_nsec = 200000000 };
        fputs("out-start ", stdout);
        fflush(stdout);
        nanosleep(&pause, NULL);
        fputs("err-line\n", stderr);
        nanosleep(&pause, NULL);
        gadget_log(gadget_call_gadget(call), 6, "log-line");
        nanosleep(&pause, NULL);
        puts("out-end");
        fflush(stdout);
        return gadget_null();
}

/* spew {"lines": N, "bytes": B}: N lines of B bytes on stdout, each of
 * control bytes that gadgetd's log escapes to four characters (\x01). */
static gadget_value *spew(struct gadget_call *call, const gadget_value *args, void *data)
{
        int64_t lines = 0, bytes = 0;
        if (!gadget_as_int(gadget_map_get(args, "lines"), &lines) || lines < 0 ||
            !gadget_as_int(gadget_map_get(args, "bytes"), &bytes) || bytes < 1 || bytes > 65536)
                return gadget_fail(call, GADGET_EINVAL, "spew needs {\"lines\": N, \"bytes\": 1..65536}");
        char *line = malloc((size_t)bytes + 1);
        if (!line)
                return gadget_fail(call, GADGET_EINTERNAL, "out of memory");
        memset(line, 1, (size_t)bytes);
        line[bytes] = '\n';
        for (int64_t i = 0; i < lines; i++)
                fwrite(line, 1, (size_t)bytes + 1, stdout);
        fflush(stdout);
        free(line);
        return gadget_null();
}

/* {"binding": B, "op": O, "args": A, "after_ms"?: T}: the binding call,
 * made T ms after the method's start, which it says first ("BINDING B.O
 * in T ms"): a node is paused meanwhile (lease_pg_test.py). */
static gadget_value *binding(struct gadget_call *call, const gadget_value *args, void *data)
{
        const char *name = gadget_as_string(gadget_map_get(args, "binding"));
        const char *op = gadget_as_string(gadget_map_get(args, "op"));
        gadget_value *result = NULL;
        int64_t after = 0;
        if (!name || !op)
                return gadget_fail(call, GADGET_EINVAL, "binding needs {\"binding\": B, \"op\": O, \"args\": A}");
        if (gadget_as_int(gadget_map_get(args, "after_ms"), &after) && after > 0 && after <= 60000) {
                printf("BINDING %s.%s in %lld ms\n", name, op, (long long)after); /* the test pauses the node then */
                fflush(stdout);
                usleep((useconds_t)after * 1000);
        }
        const gadget_value *bargs = gadget_map_get(args, "args");
        int e = gadget_binding_call(gadget_call_gadget(call), name, op, bargs ? gadget_copy(bargs) : NULL,
                                    &result);
        if (e < 0)
                return gadget_fail(call, -e, "%s", gadget_last_error(gadget_call_gadget(call)));
        return result ? result : gadget_null();
}

/* An alarm binding's Method= (alarms_test.py): logs each delivery as
 * "ALARM id=ID note=NOTE attempt=N" and fails while the attempt is at
 * most the payload's "fail" (a method that fails, then succeeds). */
static gadget_value *on_alarm(struct gadget_call *call, const gadget_value *args, void *data)
{
        const char *id = gadget_as_string(gadget_map_get(args, "id"));
        const gadget_value *payload = gadget_map_get(args, "payload");
        const char *note = payload ? gadget_as_string(gadget_map_get(payload, "note")) : NULL;
        int64_t attempt = 0, fail = 0;
        gadget_as_int(gadget_map_get(args, "attempt"), &attempt);
        if (payload)
                gadget_as_int(gadget_map_get(payload, "fail"), &fail);
        printf("ALARM id=%s note=%s attempt=%lld%s\n", id ? id : "?", note ? note : "-", (long long)attempt,
               attempt <= fail ? " failing" : "");
        fflush(stdout);
        if (attempt <= fail)
                return gadget_fail(call, GADGET_EFAILED, "failing as asked (attempt %lld)", (long long)attempt);
        return gadget_null();
}

/* {"binding": B}: libgadget's alarm helpers in turn (alarms_test.py): sets
 * "h1" in an hour with a payload and one with a generated id, lists a
 * page of one, cancels "h1" twice; returns what each said. */
static gadget_value *alarm_helpers(struct gadget_call *call, const gadget_value *args, void *data)
{
        struct gadget *g = gadget_call_gadget(call);
        const char *b = gadget_as_string(gadget_map_get(args, "binding"));
        char *id1 = NULL, *id2 = NULL;
        gadget_value *page = NULL;
        bool first = false, second = true;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t at = (int64_t)ts.tv_sec * 1000 + 3600 * 1000;
        if (!b || gadget_alarm_set(g, b, at, 0, gadget_string("p1"), "h1", &id1) < 0 ||
            gadget_alarm_set(g, b, -1, 3600 * 1000, NULL, NULL, &id2) < 0 ||
            gadget_alarm_list(g, b, 1, NULL, &page) < 0 || gadget_alarm_cancel(g, b, "h1", &first) < 0 ||
            gadget_alarm_cancel(g, b, "h1", &second) < 0) {
                free(id1);
                free(id2);
                gadget_value_free(page);
                return gadget_fail(call, GADGET_EFAILED, "%s", gadget_last_error(g));
        }
        gadget_value *r = gadget_map();
        gadget_map_set(r, "id1", gadget_string(id1));
        gadget_map_set(r, "id2", gadget_string(id2));
        gadget_map_set(r, "page", page);
        gadget_map_set(r, "cancelled", gadget_bool(first));
        gadget_map_set(r, "again", gadget_bool(second));
        free(id1);
        free(id2);
        return r;
}

/* {"binding": B}: libgadget's kv cas and batch in turn (kvchecks.py): a
 * cas of "h" from nothing to 1, one expecting 5 (not written: 1 is
 * there), then a batch: a cas of "h" from 1 to 2, a put of "h2", a
 * delete of "h3"; returns what each said. */
static gadget_value *kv_helpers(struct gadget_call *call, const gadget_value *args, void *data)
{
        struct gadget *g = gadget_call_gadget(call);
        const char *b = gadget_as_string(gadget_map_get(args, "binding"));
        gadget_value *cur = NULL, *res = NULL, *ops = NULL;
        bool first = false, second = true;
        if (!b || gadget_kv_cas(g, b, "h", NULL, gadget_int(1), &first, NULL) < 0 ||
            gadget_kv_cas(g, b, "h", gadget_int(5), gadget_int(2), &second, &cur) < 0)
                return gadget_fail(call, GADGET_EFAILED, "%s", gadget_last_error(g));
        if (!(ops = gadget_list()) || gadget_kv_batch_add(ops, "cas", "h", gadget_int(1), gadget_int(2)) < 0 ||
            gadget_kv_batch_add(ops, "put", "h2", NULL, gadget_string("x")) < 0 ||
            gadget_kv_batch_add(ops, "delete", "h3", NULL, NULL) < 0) {
                gadget_value_free(ops);
                gadget_value_free(cur);
                return gadget_fail(call, GADGET_EINTERNAL, "out of memory");
        }
        if (gadget_kv_batch(g, b, ops, &res) < 0) {
                gadget_value_free(cur);
                return gadget_fail(call, GADGET_EFAILED, "%s", gadget_last_error(g));
        }
        gadget_value *r = gadget_map();
        gadget_map_set(r, "first", gadget_bool(first));
        gadget_map_set(r, "second", gadget_bool(second));
        gadget_map_set(r, "current", cur ? cur : gadget_null());
        gadget_map_set(r, "batch", res);
        return r;
}

/* {"binding": B, "id": ID}: docs/writing-gadgets.md's increment, which
 * adds 1 to "count" once per request id however often it is called. */
static gadget_value *increment_once(struct gadget_call *call, const gadget_value *args, void *data)
{
        struct gadget *g = gadget_call_gadget(call);
        const char *b = gadget_as_string(gadget_map_get(args, "binding"));
        char done[80];
        snprintf(done, sizeof done, "done/%s", gadget_as_string(gadget_map_get(args, "id")));
        for (;;) {
                gadget_value *n = NULL, *r = NULL, *ops = gadget_list();
                int64_t v = 0, failed = -1;
                if (gadget_kv_get(g, b, "count", &n) == 0)
                        gadget_as_int(n, &v);
                gadget_kv_batch_add(ops, "cas", "count", n, gadget_int(v + 1));
                gadget_kv_batch_add(ops, "cas", done, NULL, gadget_int(v + 1));
                if (gadget_kv_batch(g, b, ops, &r) < 0)
                        return gadget_fail(call, GADGET_EFAILED, "%s", gadget_last_error(g));
                gadget_as_int(gadget_map_get(r, "failed"), &failed);
                gadget_value *answer = failed == 1 ? gadget_copy(gadget_map_get(r, "current"))
                                     : failed < 0 ? gadget_int(v + 1) : NULL;
                gadget_value_free(r);
                if (answer)
                        return answer;
        }
}

/* {"binding": B, "n": N}: sets N alarms due now whose delivery always
 * fails (payload {"fail": 1000}), through libgadget (alarms_test.py). */
static gadget_value *alarm_flood(struct gadget_call *call, const gadget_value *args, void *data)
{
        struct gadget *g = gadget_call_gadget(call);
        const char *b = gadget_as_string(gadget_map_get(args, "binding"));
        int64_t n = 0;
        if (!b || !gadget_as_int(gadget_map_get(args, "n"), &n))
                return gadget_fail(call, GADGET_EINVAL, "alarm_flood needs {\"binding\": B, \"n\": N}");
        for (int64_t i = 0; i < n; i++) {
                gadget_value *payload = gadget_map();
                gadget_map_set(payload, "fail", gadget_int(1000));
                gadget_map_set(payload, "note", gadget_string("flood"));
                if (gadget_alarm_set(g, b, -1, 0, payload, NULL, NULL) < 0)
                        return gadget_fail(call, GADGET_EFAILED, "set %lld: %s", (long long)i, gadget_last_error(g));
        }
        return gadget_int(n);
}

/* A Schedule= method (alarms_test.py): logs "TICK at=MS attempt=N" and
 * fails while the attempt is at most $TESTGADGET_TICK_FAILS. */
static gadget_value *tick(struct gadget_call *call, const gadget_value *args, void *data)
{
        int64_t at = 0, attempt = 0;
        const char *fails = getenv("TESTGADGET_TICK_FAILS");
        gadget_as_int(gadget_map_get(args, "at"), &at);
        gadget_as_int(gadget_map_get(args, "attempt"), &attempt);
        bool fail = fails && attempt <= atoll(fails);
        printf("TICK at=%lld attempt=%lld%s\n", (long long)at, (long long)attempt, fail ? " failing" : "");
        fflush(stdout);
        if (fail)
                return gadget_fail(call, GADGET_EFAILED, "failing as asked (attempt %lld)", (long long)attempt);
        return gadget_null();
}

/* As binding, {"n": N} times (up to 100000), one call after the other;
 * answers {"switches": the times this process slept meanwhile (voluntary
 * context switches)}: how often waiting for an answer woke it. */
static gadget_value *repeat(struct gadget_call *call, const gadget_value *args, void *data)
{
        const char *name = gadget_as_string(gadget_map_get(args, "binding"));
        const char *op = gadget_as_string(gadget_map_get(args, "op"));
        const gadget_value *bargs = gadget_map_get(args, "args");
        int64_t n = 0;
        struct rusage r0, r1;
        if (!name || !op || !gadget_as_int(gadget_map_get(args, "n"), &n) || n < 1 || n > 100000)
                return gadget_fail(call, GADGET_EINVAL, "repeat needs {\"binding\": B, \"op\": O, \"args\": A, "
                                   "\"n\": 1..100000}");
        getrusage(RUSAGE_SELF, &r0);
        for (int64_t i = 0; i < n; i++) {
                gadget_value *result = NULL;
                int e = gadget_binding_call(gadget_call_gadget(call), name, op, bargs ? gadget_copy(bargs) : NULL,
                                            &result);
                gadget_value_free(result);
                if (e < 0)
                        return gadget_fail(call, -e, "%s", gadget_last_error(gadget_call_gadget(call)));
        }
        getrusage(RUSAGE_SELF, &r1);
        gadget_value *res = gadget_map();
        if (!res || gadget_map_set(res, "switches", gadget_int(r1.ru_nvcsw - r0.ru_nvcsw)) < 0) {
                gadget_value_free(res);
                return gadget_fail(call, GADGET_EINTERNAL, "out of memory");
        }
        return res;
}

/* {"n": N}: N bytes (up to 4 MiB), for answers near or over a frame. */
static gadget_value *big(struct gadget_call *call, const gadget_value *args, void *data)
{
        int64_t n = 0;
        if (!gadget_as_int(gadget_map_get(args, "n"), &n) || n < 0 || n > (4 << 20))
                return gadget_fail(call, GADGET_EINVAL, "big needs {\"n\": N}, N up to 4 MiB");
        /* The answer's copies (this buffer, the value, the packed frame)
         * stay in the heap for the next call: a gadget asked for many big
         * answers is bounded by gadgetd's budgets, not by page faults. */
        static bool kept;
        if (!kept)
                kept = mallopt(M_MMAP_THRESHOLD, 16 << 20) && mallopt(M_TRIM_THRESHOLD, 64 << 20);
        char *buf = calloc(1, (size_t)n + 1);
        if (!buf)
                return gadget_fail(call, GADGET_EFAILED, "out of memory");
        memset(buf, 'x', (size_t)n);
        gadget_value *v = gadget_bytes(buf, (size_t)n);
        free(buf);
        return v;
}

/* A fork bomb: every process forks for ever (after a refused fork it
 * tries again 1 ms later), so the gadget grows until a limit holds it. */
static gadget_value *forkbomb(struct gadget_call *call, const gadget_value *args, void *data)
{
        pid_t p = fork();
        if (p < 0)
                return gadget_fail(call, GADGET_EFAILED, "fork: %s", strerror(errno));
        if (p == 0)
                for (;;)
                        if (fork() < 0)
                                usleep(1000);
        return gadget_string("started");
}

/* Allocates and touches {"mb": N} MiB, then frees them. */
static gadget_value *alloc(struct gadget_call *call, const gadget_value *args, void *data)
{
        int64_t mb = 0;
        if (!gadget_as_int(gadget_map_get(args, "mb"), &mb) || mb <= 0 || mb > 65536)
                return gadget_fail(call, GADGET_EINVAL, "alloc needs {\"mb\": N}");
        size_t len = (size_t)mb << 20;
        volatile char *p = malloc(len);
        if (!p)
                return gadget_fail(call, GADGET_EFAILED, "malloc of %lld MiB failed", (long long)mb);
        for (size_t i = 0; i < len; i += 4096)
                p[i] = 1;
        free((void *)p);
        return gadget_int(mb);
}

/* Starts {"procs": N} processes that spin on the CPU for ever. */
static gadget_value *spin(struct gadget_call *call, const gadget_value *args, void *data)
{
        int64_t n = 0;
        if (!gadget_as_int(gadget_map_get(args, "procs"), &n) || n <= 0 || n > 64)
                return gadget_fail(call, GADGET_EINVAL, "spin needs {\"procs\": N}");
        for (int64_t i = 0; i < n; i++) {
                pid_t p = fork();
                if (p < 0)
                        return gadget_fail(call, GADGET_EFAILED, "fork: %s", strerror(errno));
                if (p == 0)
                        for (volatile unsigned long x = 0;; x++)
                                ;
        }
        return gadget_int(n);
}

/* The wall clock, for the tests of restart delays. */
static void say_time(const char *what)
{
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        fprintf(stderr, "%s at %lld.%09ld\n", what, (long long)t.tv_sec, t.tv_nsec);
}

/* `lives FILE`: a life that never says hello and fails as FILE says: "slow
 * MS" after MS ms ("slow" alone: 10.5 s, past the default 10 s of a quick
 * failure), otherwise at once. */
static int lives(const char *path)
{
        char mode[16] = "";
        FILE *f = fopen(path, "r");
        if (f) {
                if (!fgets(mode, sizeof mode, f))
                        mode[0] = 0;
                fclose(f);
        }
        say_time("life");
        if (strncmp(mode, "slow", 4) == 0) {
                long ms = mode[4] == ' ' ? strtol(mode + 5, NULL, 10) : 0;
                if (ms <= 0)
                        ms = 10500;
                struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000 };
                nanosleep(&ts, NULL);
        }
        say_time("ending");
        return 1;
}

/* Typed methods (types_test.py): how many calls of shape ran. */
static int64_t shape_calls;

static gadget_value *shape(struct gadget_call *call, const gadget_value *args, void *data)
{
        shape_calls++;
        gadget_value *r = gadget_map();
        gadget_map_set(r, "ok", gadget_bool(true));
        return r;
}

static gadget_value *seen(struct gadget_call *call, const gadget_value *args, void *data)
{
        return gadget_int(shape_calls);
}

/* The calls this process got so far, this one included: the order
 * calls are delivered in. */
static gadget_value *next(struct gadget_call *call, const gadget_value *args, void *data)
{
        static int64_t n;
        return gadget_int(++n);
}

/* {"kind": K}: a result of {id: int} as declared ("ok"), or one that breaks
 * it ("string", "extra", "nested", "null"). */
static gadget_value *liar(struct gadget_call *call, const gadget_value *args, void *data)
{
        const char *kind = gadget_as_string(gadget_map_get(args, "kind"));
        gadget_value *r = gadget_map();
        if (strcmp(kind, "string") == 0) {
                gadget_value_free(r);
                return gadget_string("x");
        }
        if (strcmp(kind, "null") == 0) {
                gadget_value_free(r);
                return gadget_null();
        }
        gadget_map_set(r, "id", strcmp(kind, "nested") == 0 ? gadget_string("1") : gadget_int(1));
        if (strcmp(kind, "extra") == 0)
                gadget_map_set(r, "z", gadget_int(2));
        return r;
}

/* `hold PATH`: a tail batch waits while PATH exists (tail_test.py). */
static const char *hold_path;

/* A tail binding's batch, as one line: "TAIL dropped=D n=N" then each
 * event " SEQ:GADGET:KIND:WHAT" (a call's method/outcome@TRACE, a log line's
 * text with its blanks as _, an exit's signal), then a wait while hold_path exists
 * (at most a minute). */
static gadget_value *tail(struct gadget_call *call, const gadget_value *args, void *data)
{
        int64_t dropped = -1, seq = 0;
        const gadget_value *events = gadget_map_get(args, "events"), *e;
        gadget_as_int(gadget_map_get(args, "dropped"), &dropped);
        char line[16384];
        size_t n = 0, len = (size_t)snprintf(line, sizeof line, "TAIL dropped=%lld", (long long)dropped);
        for (size_t i = 0; (e = gadget_list_at(events, i)); i++, n++) {
                const char *kind = gadget_as_string(gadget_map_get(e, "kind"));
                const char *what = gadget_as_string(gadget_map_get(e, kind && !strcmp(kind, "call") ? "method" :
                                                                      kind && !strcmp(kind, "log") ? "line" : "signal"));
                const char *outcome = gadget_as_string(gadget_map_get(e, "outcome"));
                const char *trace = gadget_as_string(gadget_map_get(e, "trace"));
                gadget_as_int(gadget_map_get(e, "seq"), &seq);
                size_t at = len;
                if (len < sizeof line)
                        len += (size_t)snprintf(line + len, sizeof line - len, " %lld:%s:%s:%s%s%s%s%s",
                                                (long long)seq, gadget_as_string(gadget_map_get(e, "gadget")),
                                                kind, what ? what : "", outcome ? "/" : "", outcome ? outcome : "",
                                                trace && *trace ? "@" : "", trace && *trace ? trace : "");
                for (size_t k = at + 1; k < len && k < sizeof line; k++) /* one word per event */
                        if (line[k] == ' ')
                                line[k] = '_';
        }
        printf("%s n=%zu\n", line, n);
        fflush(stdout);
        for (int i = 0; hold_path && i < 6000 && access(hold_path, F_OK) == 0; i++)
                usleep(10000);
        return gadget_null();
}

#define SHAPE "shape(name: string(1..20), id: int | string, times?: int(1..10), ratio?: double, " \
              "tags?: list<string>(..3), point?: {x: int, y: int, label?: string?}, blob?: bytes, " \
              "meta?: map<int>, extra?: any) -> {ok: bool}"

/* fop {"op": "incr"|"read"|"write"|"alarm", "key": K, "value": N, "id": ID}:
 * one operation of the fault tests' workload (faults_pg_test.py) on the kv
 * binding KV: read K, write N to K, or increment K (a read and a write,
 * as the counter example does); or set an alarm on WAKE due N ms from now
 * (its firings: fwake). Each run prints one line, "FREC NODE
 * INSTANCE ID OP KEY VALUE T0 T1 ERR E0 E1" (CLOCK_MONOTONIC ns, the
 * host's: the sandbox has no time namespace; NODE from the policy's
 * FAULT_NODE; INSTANCE this process's random name: one per start, so one
 * per lease held), whatever the outcome, so a call that ran is found even
 * when its caller was told it failed. E0..E1 is the window of its effect:
 * just before its write (the kv put, the alarm set) was sent and just
 * after its answer came (the write took effect somewhere inside it; 0 0
 * for a read, which has none). Two nodes that ran the gadget at once are
 * seen from their effects' windows interleaving (faultchecks.double_runs),
 * not from their methods' spans: a process paused after its write ends
 * its method late but does nothing more. Answers {v, node, inst}. */
static char fop_inst[17];

/* {"kv": B, "alarms": A, "ms": T}: for T ms, write after write, each
 * acknowledged before the next: log/I = I in B, then counter = I in B,
 * then alarm aI in A (in a day). At any instant the store holds log/1..K,
 * counter K or K-1, alarms a1..M with M counter or counter-1
 * (backup_test.py checks a restored state against it). Returns K. */
static gadget_value *writes(struct gadget_call *call, const gadget_value *args, void *data)
{
        struct gadget *g = gadget_call_gadget(call);
        const char *b = gadget_as_string(gadget_map_get(args, "kv"));
        const char *a = gadget_as_string(gadget_map_get(args, "alarms"));
        int64_t ms = 0, i = 0;
        struct timespec t0, now;
        gadget_as_int(gadget_map_get(args, "ms"), &ms);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (;;) {
                clock_gettime(CLOCK_MONOTONIC, &now);
                if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 >= ms)
                        break;
                char key[40];
                i++;
                snprintf(key, sizeof key, "log/%08lld", (long long)i);
                int e = b && a ? gadget_kv_put(g, b, key, gadget_int(i)) : -GADGET_EINVAL;
                if (e == 0)
                        e = gadget_kv_put(g, b, "counter", gadget_int(i));
                snprintf(key, sizeof key, "a%08lld", (long long)i);
                if (e == 0)
                        e = gadget_alarm_set(g, a, -1, 86400 * 1000, gadget_int(i), key, NULL);
                if (e < 0)
                        return gadget_fail(call, GADGET_EFAILED, "write %lld: %s", (long long)i, gadget_last_error(g));
        }
        return gadget_int(i);
}

static int64_t mono_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t real_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void fop_name_instance(int64_t t0)
{
        if (!fop_inst[0]) {
                unsigned long long r = 0;
                if (getentropy(&r, sizeof r) < 0)
                        r = (unsigned long long)t0 ^ (unsigned long long)getpid();
                snprintf(fop_inst, sizeof fop_inst, "%016llx", r);
        }
}

/* The alarm binding WAKE's Method= in the fault tests: each firing of an
 * alarm fop set prints "FREC NODE INSTANCE ID fire BINDING NOW_MS T0 T1
 * 0 T0 T1" (NOW_MS this host's real-time clock, to compare with the due
 * time; T0 and T1 as fop's; the firing is itself the effect): a firing on
 * two nodes at once is two instances' effects overlapping, as for calls. */
static gadget_value *fwake(struct gadget_call *call, const gadget_value *args, void *data)
{
        const char *id = gadget_as_string(gadget_map_get(args, "id"));
        const char *b = gadget_as_string(gadget_map_get(args, "binding"));
        const char *node = getenv("FAULT_NODE");
        int64_t t0 = mono_ns();
        (void)call;
        (void)data;
        fop_name_instance(t0);
        if (!id || !b || strpbrk(id, " \n") || strpbrk(b, " \n"))
                return gadget_null();
        int64_t t1 = mono_ns();
        printf("FREC %s %s %s fire %s %lld %lld %lld 0 %lld %lld\n", node ? node : "-", fop_inst, id, b,
               (long long)real_ms(), (long long)t0, (long long)t1, (long long)t0, (long long)t1);
        fflush(stdout);
        return gadget_null();
}

static gadget_value *fop(struct gadget_call *call, const gadget_value *args, void *data)
{
        struct gadget *g = gadget_call_gadget(call);
        const char *op = gadget_as_string(gadget_map_get(args, "op"));
        const char *key = gadget_as_string(gadget_map_get(args, "key"));
        const char *id = gadget_as_string(gadget_map_get(args, "id"));
        const char *node = getenv("FAULT_NODE");
        int64_t v = 0, t0 = mono_ns(), e0 = 0, e1 = 0;
        if (!op || !key || !id || strpbrk(id, " \n") || strpbrk(key, " \n"))
                return gadget_fail(call, GADGET_EINVAL, "fop needs {op, key, id}");
        fop_name_instance(t0);
        int e = 0;
        if (strcmp(op, "write") == 0) {
                if (!gadget_as_int(gadget_map_get(args, "value"), &v))
                        return gadget_fail(call, GADGET_EINVAL, "write needs a value");
                e0 = mono_ns();
                e = gadget_kv_put(g, "KV", key, gadget_int(v));
                e1 = mono_ns();
        } else if (strcmp(op, "read") == 0 || strcmp(op, "incr") == 0) {
                gadget_value *cur = NULL;
                e = gadget_kv_get(g, "KV", key, &cur);
                if (e == 0)
                        gadget_as_int(cur, &v);
                else if (e == -GADGET_ENOTFOUND)
                        e = 0;
                gadget_value_free(cur);
                if (e == 0 && strcmp(op, "incr") == 0) {
                        e0 = mono_ns();
                        e = gadget_kv_put(g, "KV", key, gadget_int(++v));
                        e1 = mono_ns();
                }
        } else if (strcmp(op, "alarm") == 0) {
                /* Due value ms from now (this host's clock, gadgetd's):
                 * id "w" + ID, fired to fwake; v is when it is due. */
                char aid[80];
                int64_t in = 0;
                if (!gadget_as_int(gadget_map_get(args, "value"), &in))
                        return gadget_fail(call, GADGET_EINVAL, "alarm needs a value (ms)");
                v = real_ms() + in;
                snprintf(aid, sizeof aid, "w%s", id);
                e0 = mono_ns();
                e = gadget_alarm_set(g, "WAKE", v, 0, NULL, aid, NULL);
                e1 = mono_ns();
        } else {
                return gadget_fail(call, GADGET_EINVAL, "fop: unknown op");
        }
        printf("FREC %s %s %s %s %s %lld %lld %lld %d %lld %lld\n", node ? node : "-", fop_inst, id, op, key,
               (long long)v, (long long)t0, (long long)mono_ns(), e, (long long)e0, (long long)e1);
        fflush(stdout);
        if (e < 0)
                return gadget_fail(call, -e, "%s", gadget_last_error(g));
        gadget_value *r = gadget_map();
        gadget_map_set(r, "v", gadget_int(v));
        gadget_map_set(r, "node", gadget_string(node ? node : "-"));
        gadget_map_set(r, "inst", gadget_string(fop_inst));
        return r;
}

int main(int argc, char **argv)
{
        if (argc > 1 && strcmp(argv[1], "crash") == 0) {
                say_time("crashing");
                abort();
        }
        if (argc > 2 && strcmp(argv[1], "lives") == 0)
                return lives(argv[2]);
        if (argc > 2 && strcmp(argv[1], "mute") == 0) { /* never says hello */
                sleep((unsigned)atoi(argv[2]));
                return 0;
        }
        if (argc > 2 && strcmp(argv[1], "hold") == 0)
                hold_path = argv[2];
        if (argc > 2 && strcmp(argv[1], "tag") == 0) {
                tag_text = argv[2];
                echo_fails = argc > 3 && strcmp(argv[3], "fail") == 0;
        }
        if (argc > 2 && strcmp(argv[1], "slowstart") == 0) { /* its start (until its hello) takes N ms */
                /* "noterm": a stop during that start takes its whole
                 * grace (SIGTERM held off until the hello), as a program
                 * busy in its start would. */
                sigset_t term;
                sigemptyset(&term);
                sigaddset(&term, SIGTERM);
                if (argc > 3 && strcmp(argv[3], "noterm") == 0)
                        sigprocmask(SIG_BLOCK, &term, NULL);
                usleep((useconds_t)atoi(argv[2]) * 1000);
                sigprocmask(SIG_UNBLOCK, &term, NULL);
        }
        struct gadget *g = gadget_new(getenv("GADGET_NAME"));
        gadget_method(g, "echo", echo, NULL);
        gadget_method(g, "tag", tag, NULL);
        gadget_method(g, "tagchain", tagchain, NULL);
        gadget_method(g, "sleep", sleep_ms, NULL);
        gadget_method(g, "sleeps", sleeps, NULL);
        gadget_method(g, "hang", hang, NULL);
        gadget_method(g, "crash", crash, NULL);
        gadget_method(g, "hangup", hangup, NULL);
        gadget_method(g, "crash_null", crash_null, NULL);
        gadget_method(g, "crash_abort", crash_abort, NULL);
        gadget_method(g, "crash_stack", crash_stack, NULL);
        gadget_method(g, "crash_thread", crash_thread, NULL);
        gadget_method(g, "segv_handled", segv_handled, NULL);
        gadget_method(g, "say", say, NULL);
        gadget_method(g, "log", log_msg, NULL);
        gadget_method(g, "interleave", interleave, NULL);
        gadget_method(g, "sigsys", sigsys, NULL);
        gadget_method(g, "deny", deny, NULL);
        gadget_method(g, "binding", binding, NULL);
        gadget_method(g, "repeat", repeat, NULL);
        gadget_method(g, "spew", spew, NULL);
        gadget_method(g, "forkbomb", forkbomb, NULL);
        gadget_method(g, "alloc", alloc, NULL);
        gadget_method(g, "spin", spin, NULL);
        gadget_method(g, "big", big, NULL);
        gadget_method(g, "alarm", on_alarm, NULL);
        gadget_method(g, "tick", tick, NULL);
        gadget_method(g, "alarm_helpers", alarm_helpers, NULL);
        gadget_method(g, "alarm_flood", alarm_flood, NULL);
        gadget_method(g, "kv_helpers", kv_helpers, NULL);
        gadget_method(g, "increment_once", increment_once, NULL);
        gadget_method(g, "next", next, NULL);
        gadget_method(g, "tail", tail, NULL);
        gadget_method(g, "fop", fop, NULL);
        gadget_method(g, "fwake", fwake, NULL);
        gadget_method(g, "writes", writes, NULL);
        if (!getenv("TESTGADGET_UNTYPED")) {
                gadget_method_typed(g, SHAPE, shape, NULL);
                gadget_method_typed(g, "seen() -> int", seen, NULL);
                gadget_method_typed(g, "liar(kind: string) -> {id: int}", liar, NULL);
        }
        if (getenv("TESTGADGET_SIGNATURE"))  /* a signature gadget_serve refuses */
                gadget_method_typed(g, getenv("TESTGADGET_SIGNATURE"), seen, NULL);
        int e = gadget_serve(g);
        if (e < 0)
                fprintf(stderr, "testgadget: %s\n", gadget_last_error(g));
        gadget_free(g);
        if (argc > 2 && strcmp(argv[1], "slowstop") == 0) /* asked to stop, it takes its time */
                sleep((unsigned)atoi(argv[2]));
        return e < 0 ? 1 : 0;
}
