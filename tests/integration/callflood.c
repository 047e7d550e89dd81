/* callflood: sends N calls of one method to one gadget over gadgetd's
 * control socket, all at once, and counts the answers by outcome:
 * "ok N" and "error CODE N" lines. For tests of queues and concurrency. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "control.pb-c.h"
#include "json.h"
#include "value.h"
#include "wire.h"

static int answered_errors(const int *codes)
{
        int n = 0;
        for (int c = 0; c < 32; c++)
                n += codes[c];
        return n;
}

int main(int argc, char **argv)
{
        if (argc < 5) {
                fprintf(stderr, "usage: callflood SOCKET GADGET METHOD N [JSON]\n");
                return 2;
        }
        int n = atoi(argv[4]);
        Gadget__Value *args = NULL;
        char err[256];
        if (argc > 5 ? json_to_value(argv[5], strlen(argv[5]), &args, err, sizeof err) < 0
                     : !(args = value_new_null())) {
                fprintf(stderr, "callflood: bad JSON\n");
                return 2;
        }
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", argv[1]);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
                perror("callflood: connect");
                return 1;
        }
        struct wire_writer w;
        wire_writer_init(&w, (size_t)n * 256 + 4096);
        for (int i = 0; i < n; i++) {
                Control__Call call = CONTROL__CALL__INIT;
                call.name = argv[2];
                call.method = argv[3];
                call.args = args;
                Control__Request q = CONTROL__REQUEST__INIT;
                q.id = (uint64_t)i + 1;
                q.req_case = CONTROL__REQUEST__REQ_CALL;
                q.call = &call;
                if (wire_writer_put(&w, &q.base, WIRE_MAX_FRAME) < 0)
                        return 1;
        }
        if (wire_writer_flush(&w, fd) != 0)
                return 1;
        struct wire_reader r;
        wire_reader_init(&r, WIRE_MAX_FRAME);
        int ok = 0, codes[32] = { 0 };
        /* Answers still missing after 2 s of silence are not waited for
         * (calls to a hung method). */
        for (int got = 0; got < n; got++) {
                const uint8_t *data;
                size_t len;
                struct pollfd pfd = { .fd = fd, .events = POLLIN };
                int rr = wire_reader_next(&r, &data, &len);
                if (rr == 0) {
                        if (poll(&pfd, 1, 2000) <= 0)
                                break;
                        rr = wire_recv(&r, fd, &data, &len);
                }
                if (rr <= 0)
                        break;
                Control__Response *resp = control__response__unpack(NULL, len, data);
                if (!resp)
                        return 1;
                if (resp->resp_case == CONTROL__RESPONSE__RESP_RESULT)
                        ok++;
                else if (resp->resp_case == CONTROL__RESPONSE__RESP_ERROR)
                        codes[resp->error->code < 32 ? resp->error->code : 31]++;
                control__response__free_unpacked(resp, NULL);
        }
        printf("ok %d\n", ok);
        printf("unanswered %d\n", n - ok - answered_errors(codes));
        for (int c = 0; c < 32; c++)
                if (codes[c])
                        printf("error %d %d\n", c, codes[c]);
        value_free(args);
        wire_reader_free(&r);
        wire_writer_free(&w);
        close(fd);
        return 0;
}
