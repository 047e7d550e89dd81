/* ctlclient: the benchmarks' control-socket client. */
#include "ctlclient.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "benchutil.h"
#include "client.h"
#include "contract.h"

int ctl_open(struct ctl *c, const char *path)
{
        int fd = client_dial(path);

        if (fd < 0)
                return fd;
        *c = (struct ctl){ .fd = fd };
        wire_reader_init(&c->rd, WIRE_MAX_FRAME);
        wire_writer_init(&c->wr, 64u << 20);
        return 0;
}

void ctl_close(struct ctl *c)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
        wire_reader_free(&c->rd);
        wire_writer_free(&c->wr);
}

/* Queues one request of the kind given, carrying msg, under the next id. */
static int64_t put(struct ctl *c, Control__Request__ReqCase kind, void *msg)
{
        Control__Request q = CONTROL__REQUEST__INIT;

        q.req_case = kind;
        if (kind == CONTROL__REQUEST__REQ_CALL)
                q.call = msg;
        else if (kind == CONTROL__REQUEST__REQ_LOAD)
                q.load = msg;
        else
                q.status = msg;
        q.id = ++c->next_id;
        q.version = CONTROL_PROTOCOL_VERSION;
        int e = wire_writer_put(&c->wr, &q.base, WIRE_MAX_FRAME);
        return e < 0 ? e : (int64_t)q.id;
}

int64_t ctl_put_call(struct ctl *c, const char *gadget, const char *method, Gadget__Value *args)
{
        Control__Call call = CONTROL__CALL__INIT;
        call.name = (char *)gadget;
        call.method = (char *)method;
        call.args = args;
        return put(c, CONTROL__REQUEST__REQ_CALL, &call);
}

int64_t ctl_put_load(struct ctl *c, const char *policy_path)
{
        Control__Load load = CONTROL__LOAD__INIT;
        load.path = (char *)policy_path;
        /* Answered once loaded, not once ready: a connection may await
         * only a few ready-answers at once, and the caller asks for each
         * gadget's state itself. */
        load.no_block = true;
        return put(c, CONTROL__REQUEST__REQ_LOAD, &load);
}

int64_t ctl_put_status(struct ctl *c, const char *gadget)
{
        Control__Name name = CONTROL__NAME__INIT;
        name.name = (char *)gadget;
        return put(c, CONTROL__REQUEST__REQ_STATUS, &name);
}

int ctl_flush(struct ctl *c)
{
        int e = wire_writer_flush(&c->wr, c->fd);
        return e == 1 ? -EAGAIN : e;
}

Control__Response *ctl_recv(struct ctl *c)
{
        const uint8_t *data = c->held;
        size_t len = c->held_len;

        c->held = NULL;
        if (!data && wire_recv(&c->rd, c->fd, &data, &len) != 1)
                return NULL;
        return control__response__unpack(NULL, len, data);
}

int ctl_buffered(struct ctl *c)
{
        /* The frame is taken from the reader here (wire.c is the one code
         * that reads the framing) and held for ctl_recv: nothing reads the
         * socket in between, so it stays valid. */
        if (!c->held && wire_reader_next(&c->rd, &c->held, &c->held_len) != 1)
                c->held = NULL;
        return c->held != NULL;
}

int ctl_take_result(struct ctl *c)
{
        Control__Response *resp = ctl_recv(c);
        int ok = resp && resp->resp_case == CONTROL__RESPONSE__RESP_RESULT;
        if (resp && !ok && resp->resp_case == CONTROL__RESPONSE__RESP_ERROR)
                fprintf(stderr, "bench: call failed: %s\n", resp->error->message);
        if (resp)
                control__response__free_unpacked(resp, NULL);
        return ok ? 0 : -1;
}

int ctl_seq_block(struct ctl *c, const struct ctl_call *call, int n, struct samples *s)
{
        for (int i = 0; i < n; i++) {
                int64_t t0 = bench_now_ns();
                if (ctl_put_call(c, call->gadget, call->method, call->args) < 0 || ctl_flush(c) < 0 ||
                    ctl_take_result(c) < 0)
                        return -1;
                samples_add(s, bench_now_ns() - t0);
        }
        return 0;
}

int ctl_pipe_block(struct ctl *c, const struct ctl_call *call, int n, int depth, struct samples *s)
{
        int sent = 0, done = 0;
        int64_t t0 = bench_now_ns();
        for (; sent < depth && sent < n; sent++)
                if (ctl_put_call(c, call->gadget, call->method, call->args) < 0)
                        return -1;
        if (ctl_flush(c) < 0)
                return -1;
        while (done < n) {
                int batch = 0;
                do {
                        if (ctl_take_result(c) < 0)
                                return -1;
                        done++;
                        batch++;
                } while (ctl_buffered(c));
                for (; batch > 0 && sent < n; batch--, sent++)
                        if (ctl_put_call(c, call->gadget, call->method, call->args) < 0)
                                return -1;
                if (ctl_flush(c) < 0)
                        return -1;
        }
        samples_add(s, (int64_t)((double)n * 1e9 / (double)(bench_now_ns() - t0)));
        return 0;
}

int ctl_paired_blocks(struct ctl *c, const struct ctl_call *a, const struct ctl_call *b, const struct ctl_pairing *n,
                      struct samples *const out[4])
{
        struct samples junk = { .name = "warmup" };
        int fail = ctl_seq_block(c, a, 200, &junk) < 0 || ctl_seq_block(c, b, 200, &junk) < 0 ||
                   ctl_pipe_block(c, a, n->pipe / 4 + 1, n->depth, &junk) < 0 ||
                   ctl_pipe_block(c, b, n->pipe / 4 + 1, n->depth, &junk) < 0;
        samples_free(&junk);
        for (int i = 0; !fail && i < n->rounds; i++) {
                const struct ctl_call *x = i % 2 ? b : a, *y = i % 2 ? a : b;
                struct samples *xs = out[i % 2], *ys = out[1 - i % 2], *xp = out[2 + i % 2], *yp = out[3 - i % 2];
                fail = ctl_seq_block(c, x, n->seq, xs) < 0 || ctl_seq_block(c, y, n->seq, ys) < 0 ||
                       ctl_pipe_block(c, x, n->pipe, n->depth, xp) < 0 || ctl_pipe_block(c, y, n->pipe, n->depth, yp) < 0;
        }
        return fail ? -1 : 0;
}

int ctl_gadget_loop(struct ctl *c, const char *gadget, const char *method, int n, struct samples *s)
{
        Gadget__Value nv = GADGET__VALUE__INIT, args = GADGET__VALUE__INIT;
        Gadget__MapEntry ent = GADGET__MAP_ENTRY__INIT, *ents[] = { &ent };
        Gadget__Map map = GADGET__MAP__INIT;
        nv.kind_case = GADGET__VALUE__KIND_INT_VALUE;
        nv.int_value = n;
        ent.key = "n";
        ent.value = &nv;
        map.n_entries = 1;
        map.entries = ents;
        args.kind_case = GADGET__VALUE__KIND_MAP_VALUE;
        args.map_value = &map;
        if (ctl_put_call(c, gadget, method, &args) < 0 || ctl_flush(c) < 0)
                return -1;
        Control__Response *r = ctl_recv(c);
        int e = -1;
        if (r && r->resp_case == CONTROL__RESPONSE__RESP_ERROR)
                fprintf(stderr, "%s.%s: %s\n", gadget, method, r->error->message);
        if (r && r->resp_case == CONTROL__RESPONSE__RESP_RESULT &&
            r->result->kind_case == GADGET__VALUE__KIND_MAP_VALUE && r->result->map_value->n_entries == 1) {
                const Gadget__Value *l = r->result->map_value->entries[0]->value;
                if (l->kind_case == GADGET__VALUE__KIND_LIST_VALUE) {
                        for (size_t i = 0; i < l->list_value->n_items; i++)
                                samples_add(s, l->list_value->items[i]->int_value);
                        e = 0;
                }
        }
        if (r)
                control__response__free_unpacked(r, NULL);
        return e;
}
