/* fuzz-capture: runs a real gadget program outside any sandbox, plays a
 * minimal gadgetd on its fd 3 (welcome, the given calls, an answer to every
 * binding call, shutdown) and writes every frame the gadget sent, length
 * header included, as a seed for the worker fuzzer: OUTDIR/PREFIX-NN, and
 * the whole stream as OUTDIR/PREFIX-all.
 *
 * Usage: fuzz-capture OUTDIR PREFIX [--call METHOD JSON]... -- PROGRAM [ARGS...]
 * A binding call is answered with its own arguments, or, every third one,
 * with an error, so the gadget's code for both runs. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gadget.pb-c.h"
#include "json.h"
#include "value.h"
#include "wire.h"

struct capture {
        const char *dir, *prefix;
        int fd, n;
        FILE *all;
        unsigned binding_calls;
};

/* Writes one frame (header and payload) to its own file and to the stream. */
static int capture_save(struct capture *c, const uint8_t *data, size_t len)
{
        uint8_t hdr[WIRE_HEADER_SIZE] = { len & 0xff, (len >> 8) & 0xff, (len >> 16) & 0xff, (len >> 24) & 0xff };
        char path[4096];
        snprintf(path, sizeof path, "%s/%s-%02d", c->dir, c->prefix, c->n++);
        FILE *f = fopen(path, "we");
        if (!f)
                return -errno;
        fwrite(hdr, 1, sizeof hdr, f);
        fwrite(data, 1, len, f);
        fwrite(hdr, 1, sizeof hdr, c->all);
        fwrite(data, 1, len, c->all);
        return fclose(f) == 0 ? 0 : -errno;
}

static int capture_send(struct capture *c, Gadget__SupervisorMsg *m)
{
        return wire_send(c->fd, &m->base, WIRE_MAX_FRAME);
}

/* Answers a binding call: its own arguments back, or an error. */
static int capture_answer(struct capture *c, const Gadget__BindingCall *bc)
{
        Gadget__SupervisorMsg m = GADGET__SUPERVISOR_MSG__INIT;
        Gadget__BindingResult br = GADGET__BINDING_RESULT__INIT;
        Gadget__Error err = GADGET__ERROR__INIT;
        Gadget__Value null = GADGET__VALUE__INIT;
        null.kind_case = GADGET__VALUE__KIND_NULL_VALUE;
        br.id = bc->id;
        if (++c->binding_calls % 3 == 0) {
                err.code = 1;
                err.message = "refused by fuzz-capture";
                br.outcome_case = GADGET__BINDING_RESULT__OUTCOME_ERROR;
                br.error = &err;
        } else {
                br.outcome_case = GADGET__BINDING_RESULT__OUTCOME_VALUE;
                br.value = bc->args ? bc->args : &null;
        }
        m.msg_case = GADGET__SUPERVISOR_MSG__MSG_BINDING_RESULT;
        m.binding_result = &br;
        return capture_send(c, &m);
}

/* Reads frames until one answers call id (or, with id 0, until end of
 * file), saving each and answering binding calls and the hello. */
static int capture_until(struct capture *c, struct wire_reader *r, uint64_t id)
{
        for (;;) {
                const uint8_t *data;
                size_t len;
                int e = wire_recv(r, c->fd, &data, &len);
                if (e <= 0)
                        return id == 0 ? 0 : (e < 0 ? e : -EPIPE);
                if (capture_save(c, data, len) < 0)
                        return -EIO;
                Gadget__WorkerMsg *w = gadget__worker_msg__unpack(NULL, len, data);
                if (!w)
                        return -EBADMSG;
                int done = 0;
                Gadget__SupervisorMsg m = GADGET__SUPERVISOR_MSG__INIT;
                Gadget__Welcome wel = GADGET__WELCOME__INIT;
                switch (w->msg_case) {
                case GADGET__WORKER_MSG__MSG_HELLO:
                        wel.protocol_version = w->hello->protocol_version;
                        wel.max_frame = WIRE_MAX_FRAME;
                        m.msg_case = GADGET__SUPERVISOR_MSG__MSG_WELCOME;
                        m.welcome = &wel;
                        e = capture_send(c, &m);
                        done = id == UINT64_MAX;
                        break;
                case GADGET__WORKER_MSG__MSG_BINDING_CALL:
                        e = capture_answer(c, w->binding_call);
                        break;
                case GADGET__WORKER_MSG__MSG_RESULT:
                        done = w->result->id == id;
                        break;
                default:
                        break;
                }
                gadget__worker_msg__free_unpacked(w, NULL);
                if (e < 0)
                        return e;
                if (done)
                        return 0;
        }
}

/* Sends call number id of METHOD with JSON arguments and waits for its result. */
static int capture_call(struct capture *c, struct wire_reader *r, uint64_t id, const char *method,
                        const char *json)
{
        Gadget__Value *args = NULL;
        char err[256];
        if (json_to_value(json, strlen(json), &args, err, sizeof err) < 0) {
                fprintf(stderr, "fuzz-capture: bad JSON for %s: %s\n", method, err);
                return -EINVAL;
        }
        Gadget__SupervisorMsg m = GADGET__SUPERVISOR_MSG__INIT;
        Gadget__Call call = GADGET__CALL__INIT;
        call.id = id;
        call.method = (char *)method;
        call.args = args;
        m.msg_case = GADGET__SUPERVISOR_MSG__MSG_CALL;
        m.call = &call;
        int e = capture_send(c, &m);
        value_free(args);
        return e < 0 ? e : capture_until(c, r, id);
}

int main(int argc, char **argv)
{
        int i = 3, sv[2], status = 1;
        if (argc < 4) {
                fprintf(stderr, "usage: fuzz-capture OUTDIR PREFIX [--call METHOD JSON]... -- PROGRAM [ARGS...]\n");
                return 2;
        }
        struct capture c = { .dir = argv[1], .prefix = argv[2] };
        while (i < argc && strcmp(argv[i], "--") != 0)
                i += strcmp(argv[i], "--call") == 0 ? 3 : 1;
        if (i + 1 >= argc)
                return 2;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s-all", c.dir, c.prefix);
        c.all = fopen(path, "we");
        if (!c.all || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
                perror("fuzz-capture");
                return 1;
        }
        alarm(30); /* a gadget that never answers must not hang the capture */
        pid_t pid = fork();
        if (pid == 0) {
                if (dup2(sv[1], 3) < 0)
                        _exit(127);
                setenv("GADGET_FD", "3", 1);
                if (!getenv("GADGET_NAME"))
                        setenv("GADGET_NAME", c.prefix, 1);
                execv(argv[i + 1], argv + i + 1);
                _exit(127);
        }
        close(sv[1]);
        c.fd = sv[0];
        struct wire_reader r;
        wire_reader_init(&r, WIRE_MAX_FRAME);
        int e = capture_until(&c, &r, UINT64_MAX);
        uint64_t id = 1;
        for (int a = 3; e >= 0 && a < i; a++)
                if (strcmp(argv[a], "--call") == 0 && a + 2 < i) {
                        e = capture_call(&c, &r, id++, argv[a + 1], argv[a + 2]);
                        a += 2;
                }
        if (e >= 0) {
                Gadget__SupervisorMsg m = GADGET__SUPERVISOR_MSG__INIT;
                Gadget__Shutdown sd = GADGET__SHUTDOWN__INIT;
                m.msg_case = GADGET__SUPERVISOR_MSG__MSG_SHUTDOWN;
                m.shutdown = &sd;
                e = capture_send(&c, &m);
                if (e >= 0)
                        e = capture_until(&c, &r, 0);
        }
        if (e < 0)
                fprintf(stderr, "fuzz-capture: %s: %s\n", c.prefix, strerror(-e));
        else
                status = 0;
        close(c.fd);
        waitpid(pid, NULL, 0);
        wire_reader_free(&r);
        fclose(c.all);
        return status;
}
