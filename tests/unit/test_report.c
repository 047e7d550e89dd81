/* Unit tests of the sandbox's report (sandbox.proto Report): written as
 * the sandbox writes it (wire_send_atomic), through a real non-blocking
 * pipe, read and checked as gadgetd reads it (supervisor/spawn/
 * spawn_report.c, proto/validate.c); and hostile reports refused: texts
 * too long or not UTF-8, a kind gadgetd does not know, a wait status no
 * process ends with, a frame too big, one that ends half way. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "wire.h"
#include "sandbox.pb-c.h"
#include "sandbox_abi.h"
#include "spawn/spawn.h"
#include "validate.h"

/* A child with a fresh report pipe: gadgetd's end non-blocking, as spawn.c
 * makes it; the sandbox's end in *wr. */
static int child_new(struct spawn_child *c, int *wr)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0 || fcntl(p[0], F_SETFL, O_NONBLOCK) < 0)
                return -1;
        *c = (struct spawn_child){ .pid = -1, .pidfd = -1, .rpc_fd = -1, .report_fd = p[0], .go_fd = -1,
                                    .start_fd = -1 };
        wire_reader_init(&c->report, SANDBOX_REPORT_MAX);
        *wr = p[1];
        return 0;
}

/* What spawn_child_close does to the report's end. */
static void child_close(struct spawn_child *c)
{
        close(c->report_fd);
        wire_reader_free(&c->report);
}

static int send_failed(int fd, const char *step, const char *reason)
{
        Sandbox__Failure f = SANDBOX__FAILURE__INIT;
        Sandbox__Report r = SANDBOX__REPORT__INIT;
        f.step = (char *)step;
        f.reason = (char *)reason;
        r.kind_case = SANDBOX__REPORT__KIND_FAILED;
        r.failed = &f;
        return wire_send_atomic(fd, &r.base);
}

static int send_status(int fd, uint32_t status)
{
        Sandbox__Report r = SANDBOX__REPORT__INIT;
        r.kind_case = SANDBOX__REPORT__KIND_WAIT_STATUS;
        r.wait_status = status;
        return wire_send_atomic(fd, &r.base);
}

static int send_ready(int fd)
{
        Sandbox__Report r = SANDBOX__REPORT__INIT;
        r.kind_case = SANDBOX__REPORT__KIND_READY;
        r.ready = true;
        return wire_send_atomic(fd, &r.base);
}

/* Every kind there and back, in order, then end of file. */
static void test_round_trip(void)
{
        struct spawn_child c;
        char msg[1100];
        int wr, status = -1;
        CHECK(child_new(&c, &wr) == 0, "pipe");
        CHECK(spawn_read_report(&c, &status, NULL, msg, sizeof msg) == -EAGAIN, "nothing yet: -EAGAIN");
        Sandbox__Report warm = SANDBOX__REPORT__INIT;
        warm.kind_case = SANDBOX__REPORT__KIND_WARM;
        warm.warm = true;
        CHECK(wire_send_atomic(wr, &warm.base) == 0, "warm sent");
        CHECK(send_ready(wr) == 0, "ready sent");
        CHECK(send_failed(wr, "bind /srv/data", "Permission denied") == 0, "failure sent");
        CHECK(send_status(wr, 0) == 0, "status 0 sent");
        CHECK(send_status(wr, SIGKILL) == 0, "status SIGKILL sent");
        CHECK(send_status(wr, 3 << 8) == 0, "status exit 3 sent");
        CHECK(spawn_read_report(&c, &status, NULL, msg, sizeof msg) == SPAWN_REPORT_WARM, "warm");
        CHECK(spawn_read_report(&c, &status, NULL, msg, sizeof msg) == SPAWN_REPORT_READY, "ready");
        CHECK(spawn_read_report(&c, &status, NULL, msg, sizeof msg) == SPAWN_REPORT_FAILED, "failed");
        CHECK_STR(msg, "bind /srv/data: Permission denied", "the user reads \"step: reason\"");
        /* A oneof member is sent even when it is 0: exit status 0 is a report. */
        CHECK(spawn_read_report(&c, &status, NULL, msg, sizeof msg) == SPAWN_REPORT_STATUS && status == 0,
              "status 0 (%#x)", status);
        CHECK(spawn_read_report(&c, &status, NULL, msg, sizeof msg) == SPAWN_REPORT_STATUS && WIFSIGNALED(status) &&
                      WTERMSIG(status) == SIGKILL, "status: killed by SIGKILL (%#x)", status);
        CHECK(spawn_read_report(&c, &status, NULL, msg, sizeof msg) == SPAWN_REPORT_STATUS && WIFEXITED(status) &&
                      WEXITSTATUS(status) == 3, "status: exited 3 (%#x)", status);
        CHECK(spawn_read_report(&c, &status, NULL, msg, sizeof msg) == -EAGAIN, "all read: -EAGAIN");
        close(wr);
        CHECK(spawn_read_report(&c, &status, NULL, msg, sizeof msg) == 0, "end of file: 0");
        child_close(&c);
}

/* The longest texts the sandbox sends pass; one byte more is refused, and
 * so is a text that is not UTF-8 or an empty step. */
static void test_texts_bounded(void)
{
        static char longest[SANDBOX_REPORT_TEXT_MAX + 2];
        struct spawn_child c;
        char msg[1100];
        int wr;
        memset(longest, 'a', SANDBOX_REPORT_TEXT_MAX);
        CHECK(child_new(&c, &wr) == 0, "pipe");
        CHECK(send_failed(wr, longest, longest) == 0, "the longest failure fits one atomic write");
        CHECK(spawn_read_report(&c, NULL, NULL, msg, sizeof msg) == SPAWN_REPORT_FAILED &&
                      strlen(msg) == 2 * SANDBOX_REPORT_TEXT_MAX + 2, "the longest texts pass");
        longest[SANDBOX_REPORT_TEXT_MAX] = 'a';
        CHECK(send_failed(wr, longest, "x") == 0, "step one byte too long sent");
        CHECK(spawn_read_report(&c, NULL, NULL, msg, sizeof msg) == -EPROTO && strstr(msg, "longer than 512"),
              "step one byte too long refused: %s", msg);
        CHECK(send_failed(wr, "x", longest) == 0, "reason one byte too long sent");
        CHECK(spawn_read_report(&c, NULL, NULL, msg, sizeof msg) == -EPROTO, "reason one byte too long refused");
        CHECK(send_failed(wr, "bind /srv/\xff", "x") == 0, "step not UTF-8 sent");
        CHECK(spawn_read_report(&c, NULL, NULL, msg, sizeof msg) == -EPROTO, "step not UTF-8 refused: %s", msg);
        CHECK(send_failed(wr, "", "x") == 0, "empty step sent");
        CHECK(spawn_read_report(&c, NULL, NULL, msg, sizeof msg) == -EPROTO, "empty step refused");
        close(wr);
        child_close(&c);
}

/* Unknown kinds and impossible statuses are refused, with the reason. */
static void test_kinds_refused(void)
{
        /* Field 9 (varint 1): a kind of a later sandbox, unknown here. */
        static const uint8_t unknown[] = { 2, 0, 0, 0, 9 << 3, 1 };
        static const uint8_t empty[] = { 0, 0, 0, 0 };
        struct spawn_child c;
        char msg[1100];
        int wr, status = 7;
        CHECK(child_new(&c, &wr) == 0, "pipe");
        CHECK(write(wr, unknown, sizeof unknown) == sizeof unknown, "unknown kind written");
        CHECK(spawn_read_report(&c, &status, NULL, msg, sizeof msg) == -EPROTO, "unknown kind refused");
        CHECK_STR(msg, "unknown report kind 0", "the reason names it");
        CHECK(write(wr, empty, sizeof empty) == sizeof empty, "empty report written");
        CHECK(spawn_read_report(&c, &status, NULL, msg, sizeof msg) == -EPROTO, "a report of no kind refused");
        CHECK(write(wr, "\4\0\0\0\xff\xff\xff\xff", 8) == 8, "garbage written");
        CHECK(spawn_read_report(&c, &status, NULL, msg, sizeof msg) == -EPROTO, "garbage refused: %s", msg);
        static const uint32_t bad[] = { 0x7f, 0x137f, 0x10000, 0x17f, 0xff00 | 9, 65 };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
                CHECK(send_status(wr, bad[i]) == 0, "status %#x sent", bad[i]);
                CHECK(spawn_read_report(&c, &status, NULL, msg, sizeof msg) == -EPROTO && strstr(msg, "wait status"),
                      "status %#x refused: %s", bad[i], msg);
        }
        CHECK(status == 7, "status untouched by refused reports");
        close(wr);
        child_close(&c);
}

/* Framing: a length above SANDBOX_REPORT_MAX is refused before anything of
 * that size is read; a report that comes in two parts is waited for; one
 * cut by the end of file is refused. */
static void test_framing(void)
{
        static uint8_t big[PIPE_BUF];
        struct spawn_child c;
        char msg[200];
        int wr;
        CHECK(child_new(&c, &wr) == 0, "pipe");
        CHECK(write(wr, "\x01\x08\0\0", 4) == 4, "header of 2049 bytes written");
        CHECK(spawn_read_report(&c, NULL, NULL, msg, sizeof msg) == -EPROTO && strstr(msg, "more than 2048"),
              "oversized frame refused: %s", msg);
        close(wr);
        child_close(&c);

        CHECK(child_new(&c, &wr) == 0, "pipe");
        Sandbox__Report r = SANDBOX__REPORT__INIT;
        r.kind_case = SANDBOX__REPORT__KIND_READY;
        r.ready = true;
        size_t n = protobuf_c_message_pack(&r.base, big + 4);
        big[0] = (uint8_t)n;
        CHECK(write(wr, big, 3) == 3, "part of a header");
        CHECK(spawn_read_report(&c, NULL, NULL, msg, sizeof msg) == -EAGAIN, "part of a report: -EAGAIN");
        CHECK(write(wr, big + 3, 2) == 2, "more of it");
        CHECK(spawn_read_report(&c, NULL, NULL, msg, sizeof msg) == -EAGAIN, "still part: -EAGAIN");
        CHECK(write(wr, big + 5, 4 + n - 5) == (ssize_t)(4 + n - 5), "the rest");
        CHECK(spawn_read_report(&c, NULL, NULL, msg, sizeof msg) == SPAWN_REPORT_READY, "whole: ready");
        CHECK(write(wr, big, 5) == 5, "a report cut short");
        close(wr);
        CHECK(spawn_read_report(&c, NULL, NULL, msg, sizeof msg) == -EPROTO && strstr(msg, "ended inside"),
              "cut by end of file: refused (%s)", msg);
        child_close(&c);

        /* The writer's side: more than one atomic pipe write is refused. */
        memset(big, 'a', sizeof big - 1);
        big[sizeof big - 1] = '\0';
        CHECK(child_new(&c, &wr) == 0, "pipe");
        CHECK(send_failed(wr, (char *)big, "x") == -EMSGSIZE, "wire_send_atomic: -EMSGSIZE above PIPE_BUF");
        CHECK(spawn_read_report(&c, NULL, NULL, msg, sizeof msg) == -EAGAIN, "and nothing was written");
        close(wr);
        child_close(&c);
}

/* n Denials, the i-th (nr 41 + i, errno 13) with count, times and path. */
static int send_denials(int fd, size_t n, uint64_t count, uint64_t first, uint64_t last, const char *path)
{
        Sandbox__Denial d[SANDBOX_DENIALS_MAX + 1], *dp[SANDBOX_DENIALS_MAX + 1];
        Sandbox__Denials list = SANDBOX__DENIALS__INIT;
        Sandbox__Report r = SANDBOX__REPORT__INIT;
        for (size_t i = 0; i < n; i++) {
                sandbox__denial__init(&d[i]);
                d[i].nr = 41 + (uint32_t)i;
                d[i].error = 13;
                d[i].count = count;
                d[i].first_ms = first;
                d[i].last_ms = last;
                d[i].path = (char *)path;
                dp[i] = &d[i];
        }
        list.n_calls = n;
        list.calls = dp;
        r.kind_case = SANDBOX__REPORT__KIND_DENIALS;
        r.denials = &list;
        return wire_send_atomic(fd, &r.base);
}

/* The refused calls a sandbox counted: the most it sends, with the longest
 * paths, pass and are read back; a count of 0, times out of order, a path
 * too long or with a control byte, too many calls, a pair twice, a call
 * number out of range: refused. */
static void test_denials(void)
{
        static char longest[SANDBOX_DENIAL_PATH_MAX + 2];
        struct spawn_child c;
        struct spawn_report_out den;
        char msg[300];
        int wr;
        memset(longest, 'p', SANDBOX_DENIAL_PATH_MAX);
        CHECK(child_new(&c, &wr) == 0, "pipe");
        CHECK(send_denials(wr, SANDBOX_DENIALS_MAX, UINT64_MAX, 1, UINT64_MAX, longest) == 0,
              "the largest Denials report fits one atomic write");
        CHECK(spawn_read_report(&c, NULL, &den, msg, sizeof msg) == SPAWN_REPORT_DENIALS &&
                      den.denials.n == SANDBOX_DENIALS_MAX && den.denials.calls[3].nr == 44 &&
                      den.denials.calls[3].error == 13 && den.denials.calls[3].count == UINT64_MAX &&
                      strcmp(den.denials.calls[3].path, longest) == 0,
              "read back: %s", msg);
        longest[SANDBOX_DENIAL_PATH_MAX] = 'p';
        static const struct { size_t n; uint64_t count, first, last; const char *path; const char *what; } bad[] = {
                { 1, 0, 1, 1, "", "count 0" },
                { 1, 1, 2, 1, "", "first after last" },
                { 1, 1, 1, 1, "/a\nb", "a control byte" },
                { 0, 1, 1, 1, "", "no call" },
                { SANDBOX_DENIALS_MAX + 1, 1, 1, 1, "", "too many calls" },
        };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
                CHECK(send_denials(wr, bad[i].n, bad[i].count, bad[i].first, bad[i].last, bad[i].path) == 0,
                      "%s sent", bad[i].what);
                CHECK(spawn_read_report(&c, NULL, &den, msg, sizeof msg) == -EPROTO && strstr(msg, "denials"),
                      "%s refused: %s", bad[i].what, msg);
        }
        CHECK(send_denials(wr, 1, 1, 1, 1, longest) == 0, "a path one byte too long sent");
        CHECK(spawn_read_report(&c, NULL, &den, msg, sizeof msg) == -EPROTO, "a path one byte too long refused");
        /* A pair twice and a number past the table, by hand. */
        Sandbox__Denial d = SANDBOX__DENIAL__INIT, *two[] = { &d, &d };
        Sandbox__Denials list = SANDBOX__DENIALS__INIT;
        Sandbox__Report r = SANDBOX__REPORT__INIT;
        d.count = 1;
        list.n_calls = 2;
        list.calls = two;
        r.kind_case = SANDBOX__REPORT__KIND_DENIALS;
        r.denials = &list;
        CHECK(wire_send_atomic(wr, &r.base) == 0, "a pair twice sent");
        CHECK(spawn_read_report(&c, NULL, &den, msg, sizeof msg) == -EPROTO && strstr(msg, "twice"),
              "a pair twice refused: %s", msg);
        d.nr = 1024;
        list.n_calls = 1;
        CHECK(wire_send_atomic(wr, &r.base) == 0, "call 1024 sent");
        CHECK(spawn_read_report(&c, NULL, &den, msg, sizeof msg) == -EPROTO, "call 1024 refused: %s", msg);
        close(wr);
        child_close(&c);
}

/* A learning run's path: absolute and printable, or refused. */
static void test_learned(void)
{
        struct spawn_child c;
        struct spawn_report_out out;
        char msg[300];
        int wr;
        static const struct { const char *path, *of; bool ok; } cases[] = {
                { "/etc/java-17-openjdk/jvm.cfg", "", true },
                { "/lib64/ld-linux-x86-64.so.2", "/usr/bin/ls", true },
                { "etc/relative", "", false },
                { "/a\033[2Jb", "", false },
                { "/ok", "/of\nline", false },
                { "", "", false },
        };
        CHECK(child_new(&c, &wr) == 0, "pipe");
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
                Sandbox__Learned l = SANDBOX__LEARNED__INIT;
                Sandbox__Report r = SANDBOX__REPORT__INIT;
                l.path = (char *)cases[i].path;
                l.interpreter_of = (char *)cases[i].of;
                l.nr = 2;
                r.kind_case = SANDBOX__REPORT__KIND_LEARNED;
                r.learned = &l;
                CHECK(wire_send_atomic(wr, &r.base) == 0, "learned %zu sent", i);
                int k = spawn_read_report(&c, NULL, &out, msg, sizeof msg);
                if (cases[i].ok)
                        CHECK(k == SPAWN_REPORT_LEARNED && strcmp(out.learned.path, cases[i].path) == 0 &&
                                      strcmp(out.learned.interpreter_of, cases[i].of) == 0 && out.learned.nr == 2,
                              "learned %zu read back", i);
                else
                        CHECK(k == -EPROTO && strstr(msg, "learned"), "learned %zu refused: %s", i, msg);
        }
        close(wr);
        child_close(&c);
}

static int send_crash(int fd, uint32_t sig, int32_t code, uint64_t addr, char **frames, size_t n)
{
        Sandbox__Crash c = SANDBOX__CRASH__INIT;
        Sandbox__Report r = SANDBOX__REPORT__INIT;
        c.signal = sig;
        c.code = code;
        c.address = addr;
        c.thread = 2;
        c.frames = frames;
        c.n_frames = n;
        r.kind_case = SANDBOX__REPORT__KIND_CRASH;
        r.crash = &c;
        return wire_send_atomic(fd, &r.base);
}

/* A crash becomes its cause (signal, code, address, top function) and its
 * frames; the most frames of the longest text fit one report; more
 * frames, a longer or unprintable one, or a signal that is no crash's are
 * refused. */
static void test_crash(void)
{
        static char longest[SANDBOX_CRASH_FRAME_MAX + 2];
        char *frames[SANDBOX_CRASH_FRAMES_MAX + 1];
        struct spawn_child c;
        struct spawn_report_out out;
        char msg[1100];
        int wr;
        CHECK(child_new(&c, &wr) == 0, "pipe");
        char *two[] = { "crash_null+0x8 (testgadget) testgadget.c:54", "main+0x10 (testgadget)" };
        CHECK(send_crash(wr, SIGSEGV, 1, 0, two, 2) == 0, "crash sent");
        CHECK(spawn_read_report(&c, NULL, &out, msg, sizeof msg) == SPAWN_REPORT_CRASH, "crash read");
        CHECK_STR(out.crash.cause, "killed by SIGSEGV (SEGV_MAPERR at 0x0) in crash_null", "its cause");
        CHECK(out.crash.n_frames == 2 && strcmp(out.crash.frames[1], two[1]) == 0, "its frames");
        CHECK(send_crash(wr, SIGABRT, -6, 0, NULL, 0) == 0, "abort sent");
        CHECK(spawn_read_report(&c, NULL, &out, msg, sizeof msg) == SPAWN_REPORT_CRASH, "abort read");
        CHECK_STR(out.crash.cause, "killed by SIGABRT (SI_TKILL)", "no address, no function without frames");
        memset(longest, 'f', SANDBOX_CRASH_FRAME_MAX);
        for (size_t i = 0; i <= SANDBOX_CRASH_FRAMES_MAX; i++)
                frames[i] = longest;
        CHECK(send_crash(wr, SIGBUS, 2, 0x1000, frames, SANDBOX_CRASH_FRAMES_MAX) == 0,
              "the most frames of the longest text fit one atomic write");
        CHECK(spawn_read_report(&c, NULL, &out, msg, sizeof msg) == SPAWN_REPORT_CRASH &&
                      out.crash.n_frames == SANDBOX_CRASH_FRAMES_MAX, "and pass: %s", msg);
        CHECK(send_crash(wr, SIGBUS, 2, 0x1000, frames, SANDBOX_CRASH_FRAMES_MAX + 1) == 0, "one frame more sent");
        CHECK(spawn_read_report(&c, NULL, &out, msg, sizeof msg) == -EPROTO, "one frame more refused");
        longest[SANDBOX_CRASH_FRAME_MAX] = 'f';
        CHECK(send_crash(wr, SIGSEGV, 1, 0, frames, 1) == 0, "a frame one byte too long sent");
        CHECK(spawn_read_report(&c, NULL, &out, msg, sizeof msg) == -EPROTO, "refused: %s", msg);
        char *bad[] = { "f\n(fake) record" };
        CHECK(send_crash(wr, SIGSEGV, 1, 0, bad, 1) == 0, "a frame with a newline sent");
        CHECK(spawn_read_report(&c, NULL, &out, msg, sizeof msg) == -EPROTO, "refused: %s", msg);
        CHECK(send_crash(wr, SIGKILL, 0, 0, NULL, 0) == 0, "a crash of SIGKILL sent");
        CHECK(spawn_read_report(&c, NULL, &out, msg, sizeof msg) == -EPROTO, "refused: %s", msg);
        close(wr);
        child_close(&c);
}

int main(void)
{
        test_learned();
        test_crash();
        test_round_trip();
        test_denials();
        test_texts_bounded();
        test_kinds_refused();
        test_framing();
        return tap_done();
}
