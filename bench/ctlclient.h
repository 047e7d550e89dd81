/* ctlclient: a blocking client of gadgetd's control socket for the
 * benchmarks. Requests are queued and leave in one write per flush;
 * answers are read in as large chunks as the socket holds. */
#pragma once

#include <stdint.h>

#include "control.pb-c.h"
#include "wire.h"

struct ctl {
        int fd;
        struct wire_reader rd;
        struct wire_writer wr;
        uint64_t next_id;
        const uint8_t *held; /* a whole answer ctl_buffered found, for ctl_recv */
        size_t held_len;
};

/* Connects to the control socket at path. 0 or -errno. */
int ctl_open(struct ctl *c, const char *path);
void ctl_close(struct ctl *c);
/* Queue one request each; the id used is returned (> 0), or -errno. */
int64_t ctl_put_call(struct ctl *c, const char *gadget, const char *method, Gadget__Value *args);
int64_t ctl_put_load(struct ctl *c, const char *policy_path);
int64_t ctl_put_status(struct ctl *c, const char *gadget);
/* Writes every queued request. 0 or -errno. */
int ctl_flush(struct ctl *c);
/* The next answer (free with control__response__free_unpacked), or NULL
 * when the connection ended or sent garbage. Blocks. */
Control__Response *ctl_recv(struct ctl *c);
/* Whether a whole answer is already buffered (ctl_recv will not block). */
int ctl_buffered(struct ctl *c);

struct samples;
/* A call's target and its arguments (borrowed), for the blocks below. */
struct ctl_call {
        const char *gadget, *method;
        Gadget__Value *args;
};
/* Reads one answer: 0 for a result, -1 (an error is printed) else. */
int ctl_take_result(struct ctl *c);
/* n calls one at a time: each round trip's ns into s. 0 or -1. */
int ctl_seq_block(struct ctl *c, const struct ctl_call *call, int n, struct samples *s);
/* n calls, depth in flight: after each read, one new call per answer
 * taken, all written at once. Calls per second into s. 0 or -1. */
int ctl_pipe_block(struct ctl *c, const struct ctl_call *call, int n, int depth, struct samples *s);
/* Two kinds of call compared in the same run: a warm-up of each, then
 * rounds of alternating blocks, each round in the other order so neither
 * always runs first: seq calls one at a time (each round trip's ns into
 * out[0] for a, out[1] for b), then pipe calls, depth in flight (calls
 * per second into out[2], out[3]). 0 or -1. */
struct ctl_pairing {
        int rounds, seq, pipe, depth;
};
int ctl_paired_blocks(struct ctl *c, const struct ctl_call *a, const struct ctl_call *b, const struct ctl_pairing *n,
                      struct samples *const out[4]);
/* Calls GADGET.method {"n": n}, a benchmark gadget's loop of n operations
 * inside it, and adds the "ns" list of its answer to s. 0 or -1 (printed). */
int ctl_gadget_loop(struct ctl *c, const char *gadget, const char *method, int n, struct samples *s);
