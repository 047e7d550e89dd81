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
        *c = (struct spawn_child){ .pid = -1, .pidfd = -1, .rpc_fd = -1, .report_fd = p[0], .go_fd = -1 };
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
        struct spawn_crash crash;
        char msg[1100];
        int wr;
        CHECK(child_new(&c, &wr) == 0, "pipe");
        char *two[] = { "crash_null+0x8 (testgadget) testgadget.c:54", "main+0x10 (testgadget)" };
        CHECK(send_crash(wr, SIGSEGV, 1, 0, two, 2) == 0, "crash sent");
        CHECK(spawn_read_report(&c, NULL, &crash, msg, sizeof msg) == SPAWN_REPORT_CRASH, "crash read");
        CHECK_STR(crash.cause, "killed by SIGSEGV (SEGV_MAPERR at 0x0) in crash_null", "its cause");
        CHECK(crash.n_frames == 2 && strcmp(crash.frames[1], two[1]) == 0, "its frames");
        CHECK(send_crash(wr, SIGABRT, -6, 0, NULL, 0) == 0, "abort sent");
        CHECK(spawn_read_report(&c, NULL, &crash, msg, sizeof msg) == SPAWN_REPORT_CRASH, "abort read");
        CHECK_STR(crash.cause, "killed by SIGABRT (SI_TKILL)", "no address, no function without frames");
        memset(longest, 'f', SANDBOX_CRASH_FRAME_MAX);
        for (size_t i = 0; i <= SANDBOX_CRASH_FRAMES_MAX; i++)
                frames[i] = longest;
        CHECK(send_crash(wr, SIGBUS, 2, 0x1000, frames, SANDBOX_CRASH_FRAMES_MAX) == 0,
              "the most frames of the longest text fit one atomic write");
        CHECK(spawn_read_report(&c, NULL, &crash, msg, sizeof msg) == SPAWN_REPORT_CRASH &&
                      crash.n_frames == SANDBOX_CRASH_FRAMES_MAX, "and pass: %s", msg);
        CHECK(send_crash(wr, SIGBUS, 2, 0x1000, frames, SANDBOX_CRASH_FRAMES_MAX + 1) == 0, "one frame more sent");
        CHECK(spawn_read_report(&c, NULL, &crash, msg, sizeof msg) == -EPROTO, "one frame more refused");
        longest[SANDBOX_CRASH_FRAME_MAX] = 'f';
        CHECK(send_crash(wr, SIGSEGV, 1, 0, frames, 1) == 0, "a frame one byte too long sent");
        CHECK(spawn_read_report(&c, NULL, &crash, msg, sizeof msg) == -EPROTO, "refused: %s", msg);
        char *bad[] = { "f\n(fake) record" };
        CHECK(send_crash(wr, SIGSEGV, 1, 0, bad, 1) == 0, "a frame with a newline sent");
        CHECK(spawn_read_report(&c, NULL, &crash, msg, sizeof msg) == -EPROTO, "refused: %s", msg);
        CHECK(send_crash(wr, SIGKILL, 0, 0, NULL, 0) == 0, "a crash of SIGKILL sent");
        CHECK(spawn_read_report(&c, NULL, &crash, msg, sizeof msg) == -EPROTO, "refused: %s", msg);
        close(wr);
        child_close(&c);
}

int main(void)
{
        test_crash();
        test_round_trip();
        test_texts_bounded();
        test_kinds_refused();
        test_framing();
        return tap_done();
}
