/* Unit tests of supervisor/reexec.c: the state gadgetctl daemon-reexec
 * hands to gadgetd's next image is read back whole, and read as hostile
 * input — every truncation and every changed byte of a real state is
 * refused with a reason, as are fds this process does not hold, fds named
 * twice, bad names, states, counts and versions. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "reexec.h"
#include "system/monotime.h"
#include "tap.h"

static int fds[16];

/* A state of three gadgets (one running, one stopped, one another node
 * runs) and one control connection, on real fds (pipes). */
static void make_state(struct reexec_state *s, struct unit_saved *u, struct control_handoff *h)
{
        static char *methods[] = { "echo", "add" }, *sigs[] = { "", "(a: int, b: int) -> int" };
        static const uint8_t input[] = { 5, 0, 0, 0, 'h', 'e', 'l', 'l', 'o' };
        static struct unit_saved_line log[] = {
                { .meta = { .time_ms = 1796000000123, .run = 2, .source = LOGBUF_STDOUT, .prio = 6 },
                  .text = "started (pid 4242)" },
                { .meta = { .time_ms = 1796000000456, .run = 3, .source = LOGBUF_MESSAGE, .prio = 3 },
                  .text = "a \\x1b line" },
        };
        u[0] = (struct unit_saved){ .name = "alpha", .path = "/etc/gadgetd/policy.d/alpha.policy",
                                    .policy_hash = 0x1234, .from_dir = true, .state = UNIT_READY, .cause = "",
                                    .restarts = 2, .runs = 3, .calls = 99, .text = "[Gadget]\nName=alpha\n", .text_len = 21,
                                    .n_log = 2, .log = log, .pid = 4242, .rpc_fd = fds[0],
                                    .report_fd = fds[1], .out_fd = fds[2], .err_fd = fds[3], .pidfd = fds[13],
                                    .core_fd = fds[15], .uid = 1879048200u,
                                    .started_ms = 5000, .start_us = 1200, .n_methods = 2, .methods = methods,
                                    .sig_texts = sigs };
        u[1] = (struct unit_saved){ .name = "beta", .path = "/srv/beta.policy", .state = UNIT_STOPPED,
                                    .cause = "stopped by gadgetctl", .pid = -1, .rpc_fd = -1, .report_fd = -1,
                                    .out_fd = -1, .err_fd = -1, .pidfd = -1, .core_fd = -1 };
        u[2] = (struct unit_saved){ .name = "gamma", .path = "/srv/gamma.policy", .state = UNIT_REMOTE,
                                    .cause = "runs on node node-a (epoch 7)", .owner = "node-a", .owner_epoch = 7,
                                    .dormant = true, .pid = -1, .rpc_fd = -1, .report_fd = -1, .out_fd = -1,
                                    .err_fd = -1, .pidfd = -1, .core_fd = -1 };
        h[0] = (struct control_handoff){ .fd = fds[5], .spoke = true, .input = input, .input_len = sizeof input };
        *s = (struct reexec_state){ .listen_fd = fds[4], .state_lock = fds[8], .socket_lock = fds[9],
                                    .uid_lock = fds[10], .activated = false, .answer_fd = fds[5], .answer_id = 7,
                                    .n = 3, .units = u, .n_clients = 1, .clients = h,
                                    .gateway = { .fd = fds[11],
                                                 .session = "0123456789abcdef0123456789abcdef"
                                                            "0123456789abcdef0123456789abcdef" },
                                    .lease_until_ms = monotime_ms() + 8000, .peer_fd = fds[12],
                                    .metrics_fd = fds[14] };
}

/* The state's bytes. */
static size_t bytes_of(const struct reexec_state *s, uint8_t *out, size_t max)
{
        int fd = reexec_state_write(s);
        ssize_t n = fd >= 0 ? pread(fd, out, max, 0) : -1;
        if (fd >= 0)
                close(fd);
        return n > 0 ? (size_t)n : 0;
}

static int memfd_of(const uint8_t *p, size_t n)
{
        int fd = memfd_create("test", MFD_CLOEXEC);
        if (fd >= 0 && n && write(fd, p, n) != (ssize_t)n) {
                close(fd);
                return -1;
        }
        return fd;
}

/* Reads n bytes of p as a state: 0 or -errno, err set. */
/* p's n bytes read as a state into r (to free): 0 or -errno with err. */
static int read_into(const uint8_t *p, size_t n, struct reexec_state *r, char *err, size_t len)
{
        int fd = memfd_of(p, n);
        int e = reexec_state_read(fd, r, err, len);
        close(fd);
        return e;
}

static int read_bytes(const uint8_t *p, size_t n, char *err, size_t len)
{
        struct reexec_state r;
        int e = read_into(p, n, &r, err, len);
        reexec_state_free(&r);
        return e;
}

/* p's length and checksum made right for its m bytes: m. */
static size_t fix_header(uint8_t *p, size_t m)
{
        uint64_t body = m - 24, h = 14695981039346656037ull;
        for (size_t i = 24; i < m; i++)
                h = (h ^ p[i]) * 1099511628211ull;
        for (size_t i = 0; i < 4; i++)
                p[12 + i] = (uint8_t)(body >> (8 * i));
        for (size_t i = 0; i < 8; i++)
                p[16 + i] = (uint8_t)(h >> (8 * i));
        return m;
}

/* The state's bytes p (n of them) as version 7 wrote them: without alpha's
 * core memfd (the 4 bytes before its uid; no other gadget runs, and
 * without alpha nothing is cut). The new length. */
static size_t as_version7(uint8_t *p, size_t n)
{
        static const uint8_t uid[] = { 0x08, 0x00, 0x00, 0x70 }; /* 1879048200 */
        uint8_t *at = memmem(p, n, uid, sizeof uid);
        p[8] = 7;
        if (!at)
                return fix_header(p, n);
        memmove(at - 4, at, n - (size_t)(at - p));
        return fix_header(p, n - 4);
}

/* The state's bytes p (n of them) as version 6 wrote them: as version 7,
 * and without the metrics endpoint's socket, its last field. The new
 * length. */
static size_t as_version6(uint8_t *p, size_t n)
{
        n = as_version7(p, n);
        p[8] = 6;
        return fix_header(p, n - 4);
}

/* A version 7 state (the image before) is read: no run's core memfd (the
 * run keeps no core of its next crash), and the fd it would name is not
 * handed on. */
static void test_version7(void)
{
        struct reexec_state s, r;
        struct unit_saved u[3];
        struct control_handoff h[1];
        static uint8_t b[8192];
        char err[512] = "";
        make_state(&s, u, h);
        size_t n = as_version7(b, bytes_of(&s, b, sizeof b));
        int e = read_into(b, n, &r, err, sizeof err);
        CHECK(e == 0 && r.units[0].core_fd == -1 && r.units[0].uid == 1879048200u && r.units[0].start_us == 1200 &&
                      !reexec_fd_kept(&r, fds[15]) && r.metrics_fd == fds[14],
              "version 7 read, without a core memfd: %s", err);
        reexec_state_free(&r);
}

/* The state's bytes p (n of them, room for max) with gamma's owner
 * "node-x" and what follows it (epoch, flag) replaced, its length and
 * checksum made right: the new length, or 0. */
static size_t remote_rewritten(uint8_t *p, size_t n, size_t max, const char *owner, uint64_t epoch, uint8_t dormant)
{
        static const uint8_t was[] = { 7, 0, 0, 0, 'n', 'o', 'd', 'e', '-', 'x', 0 };
        uint8_t *at = memmem(p, n, was, sizeof was);
        size_t ol = strlen(owner) + 1, rest_at = at ? (size_t)(at - p) + sizeof was + 9 : 0;
        uint8_t mid[4 + 128 + 9];
        if (!at || ol > 128 || n - sizeof was - 9 + 4 + ol + 9 > max)
                return 0;
        for (size_t i = 0; i < 4; i++)
                mid[i] = (uint8_t)(ol >> (8 * i));
        memcpy(mid + 4, owner, ol);
        for (size_t i = 0; i < 8; i++)
                mid[4 + ol + i] = (uint8_t)(epoch >> (8 * i));
        mid[4 + ol + 8] = dormant;
        size_t tail = n - rest_at, m = (size_t)(at - p) + 4 + ol + 9 + tail;
        memmove(at + 4 + ol + 9, p + rest_at, tail);
        memcpy(at, mid, 4 + ol + 9);
        return fix_header(p, m);
}

static void test_round_trip(void)
{
        struct reexec_state s, r;
        struct unit_saved u[3];
        struct control_handoff h[1];
        char err[512] = "";
        make_state(&s, u, h);
        int fd = reexec_state_write(&s);
        CHECK(fd >= 0, "written");
        CHECK(!(fcntl(fd, F_GETFD) & FD_CLOEXEC), "the state's fd is inherited by the exec");
        CHECK(reexec_state_read(fd, &r, err, sizeof err) == 0, "read back: %s", err);
        close(fd);
        CHECK(r.n == 3 && r.n_clients == 1 && r.listen_fd == fds[4] && r.answer_fd == fds[5] && r.answer_id == 7,
              "the counts and the listening socket");
        CHECK(r.state_lock == fds[8] && r.socket_lock == fds[9] && r.uid_lock == fds[10] &&
                      reexec_fd_kept(&r, fds[10]),
              "the locks, kept");
        CHECK(strcmp(r.units[0].name, "alpha") == 0 && strcmp(r.units[0].path, u[0].path) == 0 &&
                      r.units[0].policy_hash == 0x1234 && r.units[0].from_dir && r.units[0].state == UNIT_READY &&
                      r.units[0].restarts == 2 && r.units[0].calls == 99 && r.units[0].pid == 4242 &&
                      r.units[0].rpc_fd == fds[0] && r.units[0].err_fd == fds[3] && r.units[0].uid == 1879048200u &&
                      r.units[0].started_ms == 5000 && r.units[0].start_us == 1200 &&
                      r.units[0].pidfd == fds[13] && reexec_fd_kept(&r, fds[13]) &&
                      r.units[0].core_fd == fds[15] && reexec_fd_kept(&r, fds[15]),
              "the running gadget");
        CHECK(r.units[0].n_methods == 2 && strcmp(r.units[0].methods[1], "add") == 0 &&
                      strcmp(r.units[0].sig_texts[1], "(a: int, b: int) -> int") == 0 &&
                      strcmp(r.units[0].sig_texts[0], "") == 0,
              "its methods and signatures");
        CHECK(r.units[0].text_len == 21 && memcmp(r.units[0].text, "[Gadget]\nName=alpha\n", 21) == 0 &&
                      r.units[1].text_len == 0,
              "the policy text it runs");
        CHECK(r.units[0].n_log == 2 && strcmp(r.units[0].log[1].text, "a \\x1b line") == 0 && r.units[1].n_log == 0,
              "its log lines");
        const struct logbuf_meta *m0 = &r.units[0].log[0].meta, *m1 = &r.units[0].log[1].meta;
        CHECK(r.units[0].runs == 3 && m0->time_ms == 1796000000123 && m0->run == 2 && m0->source == LOGBUF_STDOUT &&
                      m0->prio == 6 && m1->run == 3 && m1->source == LOGBUF_MESSAGE && m1->prio == 3,
              "its runs, and each log line's time, run, source and priority");
        CHECK(strcmp(r.units[1].name, "beta") == 0 && r.units[1].state == UNIT_STOPPED &&
                      strcmp(r.units[1].cause, "stopped by gadgetctl") == 0 && r.units[1].rpc_fd == -1,
              "the stopped gadget, its cause");
        CHECK(strcmp(r.units[2].name, "gamma") == 0 && r.units[2].state == UNIT_REMOTE &&
                      strcmp(r.units[2].owner, "node-a") == 0 && r.units[2].owner_epoch == 7 && r.units[2].dormant &&
                      r.units[2].rpc_fd == -1,
              "the gadget another node runs: its owner, epoch and want");
        CHECK(r.clients[0].fd == fds[5] && r.clients[0].spoke && r.clients[0].input_len == 9 &&
                      memcmp(r.clients[0].input + 4, "hello", 5) == 0,
              "the control connection and its unread bytes");
        CHECK(reexec_fd_kept(&r, fds[0]) && reexec_fd_kept(&r, fds[4]) && reexec_fd_kept(&r, fds[5]) &&
                      !reexec_fd_kept(&r, fds[6]),
              "the fds kept, and only those");
        CHECK(r.gateway.fd == fds[11] && strcmp(r.gateway.session, s.gateway.session) == 0 &&
                      reexec_fd_kept(&r, fds[11]),
              "the gateway's socket, kept, and its session");
        CHECK(r.lease_until_ms == s.lease_until_ms, "the time to take the leases back by");
        CHECK(r.peer_fd == fds[12] && reexec_fd_kept(&r, fds[12]), "the node link's socket, kept");
        CHECK(r.metrics_fd == fds[14] && reexec_fd_kept(&r, fds[14]), "the metrics endpoint's socket, kept");
        reexec_fds_inherit(&r, true);
        CHECK(!(fcntl(fds[11], F_GETFD) & FD_CLOEXEC) && !(fcntl(fds[0], F_GETFD) & FD_CLOEXEC) && !(fcntl(fds[5], F_GETFD) & FD_CLOEXEC) &&
                      (fcntl(fds[6], F_GETFD) & FD_CLOEXEC),
              "close-on-exec cleared on exactly the fds handed on");
        reexec_fds_inherit(&r, false);
        CHECK((fcntl(fds[0], F_GETFD) & FD_CLOEXEC) && (fcntl(fds[4], F_GETFD) & FD_CLOEXEC), "and set again");
        reexec_state_free(&r);
}

/* Every prefix and every single changed byte is refused, with a reason. */
static void test_damage_refused(void)
{
        struct reexec_state s;
        struct unit_saved u[3];
        struct control_handoff h[1];
        static uint8_t b[8192], c[8192];
        char err[512];
        make_state(&s, u, h);
        size_t n = bytes_of(&s, b, sizeof b);
        CHECK(n > 100 && n < sizeof b, "a state of %zu bytes", n);
        size_t cut_ok = 0, flip_ok = 0;
        for (size_t k = 0; k < n; k++) {
                err[0] = '\0';
                cut_ok += read_bytes(b, k, err, sizeof err) == 0 || !err[0];
        }
        CHECK(cut_ok == 0, "%zu of %zu truncations read, or refused without a reason", cut_ok, n);
        for (size_t k = 0; k < n; k++) {
                memcpy(c, b, n);
                c[k] ^= 0x40;
                err[0] = '\0';
                flip_ok += read_bytes(c, n, err, sizeof err) == 0 || !err[0];
        }
        CHECK(flip_ok == 0, "%zu of %zu changed bytes read, or refused without a reason", flip_ok, n);
        b[8] = 3; /* the image before: never a remote gadget, no pidfds */
        CHECK(read_bytes(b, n, err, sizeof err) < 0, "version 3 with a remote gadget and pidfds refused");
        b[8] = 1; /* another version: the one before the gateway's fields */
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "version is 1"), "version: %s", err);
        make_state(&s, u, h);
        s.n = 0; /* no gadget: versions 3 and 4 (no pidfds) read as version 5 */
        n = as_version6(b, bytes_of(&s, b, sizeof b));
        b[8] = 3;
        CHECK(read_bytes(b, n, err, sizeof err) == 0, "version 3 without gadgets: %s", err);
        b[8] = 4;
        CHECK(read_bytes(b, n, err, sizeof err) == 0, "version 4 without gadgets: %s", err);
}

/* The state's bytes p (n of them) as version 5 wrote them: as version 6,
 * and alpha without its runs and its log lines without their time, run,
 * source and priority (8 + 4 + 1 + 1 bytes each); its length and checksum
 * made right. The new length. */
static size_t as_version5(uint8_t *p, size_t n, const struct unit_saved *alpha)
{
        n = as_version6(p, n);
        uint8_t *text = memmem(p, n, alpha->text, alpha->text_len);
        size_t at = (size_t)(text - p) - 8, m = n; /* runs, then the text's length */
        memmove(p + at, p + at + 4, m - at - 4);
        m -= 4;
        at = (size_t)(text - p) - 4 + alpha->text_len + 4; /* past the text and the count of lines */
        for (size_t i = 0; i < alpha->n_log; i++) {
                at += 4 + strlen(alpha->log[i].text) + 1;
                memmove(p + at, p + at + 14, m - at - 14);
                m -= 14;
        }
        p[8] = 5;
        return fix_header(p, m);
}

/* A version 5 state (the image before) is read: its log lines with run 0
 * and time 0 (unknown), its runs counted from its restarts. */
static void test_version5(void)
{
        struct reexec_state s, r;
        struct unit_saved u[3];
        struct control_handoff h[1];
        static uint8_t b[8192];
        char err[512] = "";
        make_state(&s, u, h);
        s.n = 1; /* alpha alone */
        size_t n = as_version5(b, bytes_of(&s, b, sizeof b), &u[0]);
        int e = read_into(b, n, &r, err, sizeof err);
        CHECK(e == 0, "version 5 read: %s", err);
        CHECK(e == 0 && r.units[0].n_log == 2 && strcmp(r.units[0].log[1].text, "a \\x1b line") == 0 &&
                      r.units[0].log[1].meta.run == 0 && r.units[0].log[1].meta.time_ms == 0 &&
                      r.units[0].log[1].meta.source == LOGBUF_STDOUT && r.units[0].runs == 3 &&
                      r.units[0].restarts == 2 && r.units[0].calls == 99 && r.units[0].n_methods == 2,
              "version 5: its log lines without time or run, runs = restarts + the running one");
        reexec_state_free(&r);
}

/* A version 6 state (the image before) is read: no metrics endpoint's
 * socket (the next image listens again); the metrics socket it would name
 * is one it does not hand on. */
static void test_version6(void)
{
        struct reexec_state s, r;
        struct unit_saved u[3];
        struct control_handoff h[1];
        static uint8_t b[8192];
        char err[512] = "";
        make_state(&s, u, h);
        size_t n = as_version6(b, bytes_of(&s, b, sizeof b));
        int e = read_into(b, n, &r, err, sizeof err);
        CHECK(e == 0 && r.metrics_fd == -1 && r.peer_fd == fds[12] && r.n == 3 && !reexec_fd_kept(&r, fds[14]),
              "version 6 read, without a metrics socket: %s", err);
        reexec_state_free(&r);
}

/* States that are whole (a right checksum) but lie. */
static void test_lies_refused(void)
{
        struct reexec_state s;
        struct unit_saved u[3];
        struct control_handoff h[1];
        static uint8_t b[8192];
        char err[512];
        make_state(&s, u, h);
        u[0].rpc_fd = 999; /* not open */
        size_t n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "not an fd this process holds"), "%s", err);
        make_state(&s, u, h);
        u[0].out_fd = u[0].rpc_fd;
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "is named twice"), "an fd twice: %s", err);
        make_state(&s, u, h);
        u[0].pidfd = u[0].report_fd; /* the fd store's mapping must not hand one fd on twice */
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "is named twice"), "a pidfd twice: %s", err);
        make_state(&s, u, h);
        u[0].pidfd = 998; /* not open */
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "its pidfd (998)"), "%s", err);
        make_state(&s, u, h);
        u[0].core_fd = 997; /* not open */
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "its core's memfd (997)"), "%s", err);
        make_state(&s, u, h);
        u[0].core_fd = u[0].out_fd;
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "is named twice"), "a core memfd twice: %s", err);
        make_state(&s, u, h);
        u[1].name = "alpha";
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "gadget alpha is named twice"), "%s", err);
        make_state(&s, u, h);
        u[1].name = "../etc";
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "is not a gadget name"), "%s", err);
        make_state(&s, u, h);
        u[1].path = "relative.policy";
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "not an absolute path"), "%s", err);
        make_state(&s, u, h);
        u[1].state = UNIT_STARTING;
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "unknown state"), "%s", err);
        make_state(&s, u, h);
        u[2].owner = "Node A";
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) == 0, "an owner that is no node name is not handed on: %s", err);
        make_state(&s, u, h);
        u[2].owner = "";
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) == 0, "no owner: %s", err);
        /* What a writer never makes, each with a right checksum. */
        static const struct { const char *owner; uint64_t epoch; uint8_t dormant; const char *why; } lie[] = {
                { "Node A", 7, 0, "is not a node's lease" },  { "", 7, 0, "is not a node's lease" },
                { "node-a", 1ull << 63, 0, "is not a node's lease" }, { "node-a", 7, 2, "unknown flag 2" },
                { "../b", 1, 0, "is not a node's lease" },
        };
        for (size_t i = 0; i < sizeof lie / sizeof *lie; i++) {
                make_state(&s, u, h);
                u[2].owner = "node-x";
                n = bytes_of(&s, b, sizeof b);
                n = remote_rewritten(b, n, sizeof b, lie[i].owner, lie[i].epoch, lie[i].dormant);
                CHECK(n && read_bytes(b, n, err, sizeof err) < 0 && strstr(err, lie[i].why), "lie %zu: %s", i, err);
        }
        make_state(&s, u, h);
        char longname[80];
        memset(longname, 'a', sizeof longname - 1);
        longname[sizeof longname - 1] = '\0';
        u[2].owner = "node-x";
        n = bytes_of(&s, b, sizeof b);
        n = remote_rewritten(b, n, sizeof b, longname, 7, 0);
        CHECK(n && read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "its owner has a length of 80"), "%s", err);
        make_state(&s, u, h);
        u[0].log[1].meta.run = 4; /* more than its runs */
        n = bytes_of(&s, b, sizeof b);
        u[0].log[1].meta.run = 3;
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "has a log line of time"), "%s", err);
        make_state(&s, u, h);
        u[0].log[0].meta.prio = 8;
        n = bytes_of(&s, b, sizeof b);
        u[0].log[0].meta.prio = 6;
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "priority 8"), "%s", err);
        make_state(&s, u, h);
        u[0].pid = 1;
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "has pid 1"), "%s", err);
        make_state(&s, u, h);
        s.answer_fd = fds[6];
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "none of the connections"), "%s", err);
        make_state(&s, u, h);
        s.uid_lock = fds[0];
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "is named twice"), "a lock twice: %s", err);
        make_state(&s, u, h);
        s.listen_fd = 2;
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "not an fd this process holds"), "%s", err);
        make_state(&s, u, h);
        s.gateway.session[5] = 'G';
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "not 64 hexadecimal digits"), "%s", err);
        make_state(&s, u, h);
        s.gateway.session[63] = '\0';
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "not 64 hexadecimal digits"), "short: %s", err);
        make_state(&s, u, h);
        s.gateway.fd = -1; /* no gateway: the writer leaves its session out */
        s.peer_fd = -1;
        s.metrics_fd = -1;
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) == 0, "no gateway: %s", err);
        make_state(&s, u, h);
        s.gateway.fd = fds[4];
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "is named twice"), "the gateway's fd: %s", err);
        make_state(&s, u, h);
        s.gateway.fd = 998;
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "gateway's socket (998)"), "%s", err);
        make_state(&s, u, h);
        s.metrics_fd = 997;
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "metrics endpoint's socket (997)"), "%s", err);
        make_state(&s, u, h);
        s.metrics_fd = fds[12];
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "is named twice"), "the metrics fd: %s", err);
        make_state(&s, u, h);
        s.lease_until_ms = monotime_ms() + REEXEC_LEASE_AHEAD_MS + 5000;
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) < 0 && strstr(err, "the leases' time lies"), "%s", err);
        make_state(&s, u, h);
        s.lease_until_ms = 0;
        n = bytes_of(&s, b, sizeof b);
        CHECK(read_bytes(b, n, err, sizeof err) == 0, "no shared store: %s", err);
        CHECK(read_bytes((const uint8_t *)"GDREEXEC", 8, err, sizeof err) < 0 && strstr(err, "no header"),
              "a header cut short: %s", err);
}

int main(void)
{
        for (size_t i = 0; i < 16; i += 2)
                if (pipe2(fds + i, O_CLOEXEC) < 0)
                        return 1;
        test_round_trip();
        test_damage_refused();
        test_version5();
        test_version6();
        test_version7();
        test_lies_refused();
        return tap_done();
}
