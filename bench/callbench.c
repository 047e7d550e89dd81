/* callbench: calls through gadgetd's control socket next to a raw
 * socketpair between two processes, in alternating blocks of one round:
 *   seq       one call at a time to GADGET.METHOD: each round trip (ns)
 *   pingpong  one 32-byte message to an echo process and back (ns)
 *   xcpu      the same with the two processes pinned to different CPUs:
 *             each hop is a wake-up on another CPU, as in a call chain of
 *             three processes on two CPUs
 *   relay     the same through a relay process in the middle (read, write
 *             on, read the answer, write it back; blocking reads): two
 *             hops with nothing done in between, the floor for a call
 *   pipe      DEPTH calls always in flight, answers read and new calls
 *             written in batches: calls per second of each block
 *   rawpipe   the same with 32-byte messages to the echo process
 *   relaypipe the same through a relay process that waits in poll and
 *             passes whatever each read brings on in one write, with
 *             messages of a call's size (its request frame): the floor
 *             for pipelined calls, which cross two hops and an event loop
 *
 *   callbench SOCKET GADGET METHOD ROUNDS SEQ PIPE DEPTH
 *
 * A call is two hops (client → gadgetd → gadget and back), a ping-pong one. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "benchutil.h"
#include "contract.h"
#include "ctlclient.h"

#define MSG 32

struct run {
        struct ctl ctl;
        struct ctl_call call;
        int echo_fd;
        int xcpu_fd;            /* echo pinned to CPU 1, -1 with one CPU */
        int relay_fd;
        int prelay_fd;          /* the polling relay's, for relaypipe */
        size_t call_size;       /* bytes of one call's request frame */
        Gadget__Value null;
};

/* The echo process: sends back whatever it reads, as it reads it. */
static _Noreturn void echo_loop(int fd)
{
        char buf[65536];
        for (;;) {
                ssize_t n = read(fd, buf, sizeof buf);
                if (n <= 0)
                        _exit(0);
                for (ssize_t o = 0; o < n;) {
                        ssize_t w = write(fd, buf + o, (size_t)(n - o));
                        if (w <= 0)
                                _exit(1);
                        o += w;
                }
        }
}

/* The relay process: passes each message from in to out, and out's answer
 * back to in. */
static _Noreturn void relay_loop(int in, int out)
{
        char buf[4096];
        for (;;) {
                ssize_t n = read(in, buf, sizeof buf);
                if (n <= 0 || write(out, buf, (size_t)n) != n)
                        _exit(0);
                n = read(out, buf, sizeof buf);
                if (n <= 0 || write(in, buf, (size_t)n) != n)
                        _exit(0);
        }
}

/* The pipelined relay: whatever either side sends goes on to the other
 * as it comes, each read's bytes in one write (the sockets are far from
 * full at 64 messages in flight, so a blocking write does not wait). */
static _Noreturn void poll_relay_loop(int in, int out)
{
        char buf[65536];
        struct pollfd p[2] = { { .fd = in, .events = POLLIN }, { .fd = out, .events = POLLIN } };
        for (;;) {
                if (poll(p, 2, -1) < 0)
                        _exit(1);
                for (int i = 0; i < 2; i++) {
                        if (!p[i].revents)
                                continue;
                        ssize_t n = read(p[i].fd, buf, sizeof buf);
                        if (n <= 0 || write(p[1 - i].fd, buf, (size_t)n) != n)
                                _exit(0);
                }
        }
}

/* In a helper process: closes every fd but 0-2 and the ones it uses, so
 * that no other process's socket stays open through it. */
static void close_others(int keep1, int keep2)
{
        for (int fd = 3; fd < 1024; fd++)
                if (fd != keep1 && fd != keep2)
                        close(fd);
}

/* Pins the calling process to one CPU. 0 or -1. */
static int pin(int cpu)
{
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        return sched_setaffinity(0, sizeof set, &set);
}

/* Starts an echo process on a new socketpair (pinned to cpu unless -1);
 * returns our end. */
static int start_echo(pid_t *pid, int cpu)
{
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return -1;
        if ((*pid = fork()) == 0) {
                close_others(sv[1], -1);
                if (cpu >= 0 && pin(cpu) < 0)
                        _exit(1);
                echo_loop(sv[1]);
        }
        close(sv[1]);
        return sv[0];
}

/* Starts relay → echo; returns our end of the relay's socket. */
static int start_relay(pid_t *relay, pid_t *echo, bool polling)
{
        int sv[2];
        int e = start_echo(echo, -1);
        if (e < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return -1;
        if ((*relay = fork()) == 0) {
                close_others(sv[1], e);
                if (polling)
                        poll_relay_loop(sv[1], e);
                relay_loop(sv[1], e);
        }
        close(e);
        close(sv[1]);
        return sv[0];
}

/* Ping-pong with the echo on CPU 1 and this process on CPU 0. */
static int xcpu_block(int fd, int n, struct samples *s);

static int pingpong_block(int fd, int n, struct samples *s)
{
        char msg[MSG] = "ping";
        for (int i = 0; i < n; i++) {
                int64_t t0 = bench_now_ns();
                if (write(fd, msg, MSG) != MSG)
                        return -1;
                for (size_t got = 0; got < MSG;) {
                        ssize_t k = read(fd, msg + got, MSG - got);
                        if (k <= 0)
                                return -1;
                        got += (size_t)k;
                }
                samples_add(s, bench_now_ns() - t0);
        }
        return 0;
}

static int xcpu_block(int fd, int n, struct samples *s)
{
        cpu_set_t old;
        if (fd < 0)
                return 0;
        if (sched_getaffinity(0, sizeof old, &old) < 0 || pin(0) < 0)
                return -1;
        int e = pingpong_block(fd, n, s);
        sched_setaffinity(0, sizeof old, &old);
        return e;
}

/* The same pattern on a raw socket, messages of size bytes (at most
 * 256): messages per second. */
static int rawpipe_block(int fd, size_t size, int n, int depth, struct samples *s)
{
        static char buf[256 * 4096];
        int sent = 0, done = 0;
        size_t partial = 0;
        int64_t t0 = bench_now_ns();
        int first = depth < n ? depth : n;
        if (write(fd, buf, (size_t)first * size) != (ssize_t)(first * size))
                return -1;
        sent = first;
        while (done < n) {
                ssize_t k = read(fd, buf, sizeof buf);
                if (k <= 0)
                        return -1;
                partial += (size_t)k;
                int batch = (int)(partial / size);
                partial %= size;
                done += batch;
                int more = batch < n - sent ? batch : n - sent;
                if (more > 0 && write(fd, buf, (size_t)more * size) != (ssize_t)(more * size))
                        return -1;
                sent += more;
        }
        samples_add(s, (int64_t)((double)n * 1e9 / (double)(bench_now_ns() - t0)));
        return 0;
}

int main(int argc, char **argv)
{
        struct run r = { .null = GADGET__VALUE__INIT };
        struct samples seq = { .name = "seq_ns" }, pp = { .name = "pingpong_ns" }, xcpu = { .name = "xcpu_ns" },
                       relay = { .name = "relay_ns" }, pipe = { .name = "pipe_per_s" }, raw = { .name = "rawpipe_per_s" },
                       rpipe = { .name = "relaypipe_per_s" };
        pid_t echo, xcpu_echo = -1, relay_pid, relay_echo, prelay_pid, prelay_echo;
        if (argc != 8) {
                fprintf(stderr, "usage: callbench SOCKET GADGET METHOD ROUNDS SEQ PIPE DEPTH\n");
                return 2;
        }
        r.null.kind_case = GADGET__VALUE__KIND_NULL_VALUE;
        r.call = (struct ctl_call){ .gadget = argv[2], .method = argv[3], .args = &r.null };
        int rounds = atoi(argv[4]), nseq = atoi(argv[5]), npipe = atoi(argv[6]), depth = atoi(argv[7]);
        int e = ctl_open(&r.ctl, argv[1]);
        if (e < 0) {
                fprintf(stderr, "callbench: %s: %s\n", argv[1], strerror(-e));
                return 1;
        }
        if ((r.echo_fd = start_echo(&echo, -1)) < 0 || (r.relay_fd = start_relay(&relay_pid, &relay_echo, false)) < 0 ||
            (r.prelay_fd = start_relay(&prelay_pid, &prelay_echo, true)) < 0)
                return 1;
        /* A call's request frame as the blocks send it (ids of three bytes,
         * as most of a run's are). */
        Control__Call cc = CONTROL__CALL__INIT;
        Control__Request q = CONTROL__REQUEST__INIT;
        cc.name = argv[2];
        cc.method = argv[3];
        cc.args = &r.null;
        q.req_case = CONTROL__REQUEST__REQ_CALL;
        q.call = &cc;
        q.id = 100000;
        q.version = CONTROL_PROTOCOL_VERSION;
        r.call_size = WIRE_HEADER_SIZE + protobuf_c_message_get_packed_size(&q.base);
        if (r.call_size > 256)
                return 1;
        r.xcpu_fd = sysconf(_SC_NPROCESSORS_ONLN) > 1 ? start_echo(&xcpu_echo, 1) : -1;
        /* One warm-up round of each, not kept. */
        struct samples junk = { .name = "warmup" };
        int fail = ctl_seq_block(&r.ctl, &r.call, 100, &junk) < 0 || pingpong_block(r.echo_fd, 100, &junk) < 0 ||
                   pingpong_block(r.relay_fd, 100, &junk) < 0 || xcpu_block(r.xcpu_fd, 100, &junk) < 0 ||
                   ctl_pipe_block(&r.ctl, &r.call, npipe / 4 + 1, depth, &junk) < 0 ||
                   rawpipe_block(r.echo_fd, MSG, npipe / 4 + 1, depth, &junk) < 0 ||
                   rawpipe_block(r.prelay_fd, r.call_size, npipe / 4 + 1, depth, &junk) < 0;
        for (int i = 0; !fail && i < rounds; i++)
                fail = ctl_seq_block(&r.ctl, &r.call, nseq, &seq) < 0 || pingpong_block(r.echo_fd, nseq, &pp) < 0 ||
                       pingpong_block(r.relay_fd, nseq, &relay) < 0 || xcpu_block(r.xcpu_fd, nseq, &xcpu) < 0 ||
                       ctl_pipe_block(&r.ctl, &r.call, npipe, depth, &pipe) < 0 ||
                       rawpipe_block(r.echo_fd, MSG, npipe, depth, &raw) < 0 ||
                       rawpipe_block(r.prelay_fd, r.call_size, npipe, depth, &rpipe) < 0;
        close(r.echo_fd);
        close(r.relay_fd);
        close(r.prelay_fd);
        if (r.xcpu_fd >= 0) {
                close(r.xcpu_fd);
                waitpid(xcpu_echo, NULL, 0);
        }
        waitpid(echo, NULL, 0);
        waitpid(relay_pid, NULL, 0);
        waitpid(relay_echo, NULL, 0);
        waitpid(prelay_pid, NULL, 0);
        waitpid(prelay_echo, NULL, 0);
        ctl_close(&r.ctl);
        if (fail) {
                fprintf(stderr, "callbench: a block failed\n");
                return 1;
        }
        struct samples *sets[] = { &seq, &pp, &xcpu, &relay, &pipe, &raw, &rpipe };
        samples_print(sets, 7);
        return 0;
}
