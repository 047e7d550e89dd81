/* clusterbench: a call to a gadget another node runs (forwarded over the
 * mutual-TLS link between two gadgetd nodes) beside the same call made on
 * the node that runs it, and beside the link's own round trip, in
 * alternating blocks of one run:
 *   local     one call at a time through the owner's control socket (ns)
 *   remote    the same through the other node's socket: forwarded to the
 *             owner and back (ns)
 *   link      a call through the other node that the owner refuses at once
 *             (a method the gadget does not have): the link's round trip
 *             with the owner's own check, without the gadget (ns)
 *
 *   clusterbench OWNER_SOCKET OTHER_SOCKET GADGET METHOD ROUNDS N
 *
 * Prints each block's round trips as JSON (benchutil.h). */
#include <stdio.h>
#include <stdlib.h>

#include "benchutil.h"
#include "ctlclient.h"

/* n calls one at a time; each must end in an error (refused): its ns. */
static int refused_block(struct ctl *c, const struct ctl_call *call, int n, struct samples *s)
{
        for (int i = 0; i < n; i++) {
                int64_t t0 = bench_now_ns();
                if (ctl_put_call(c, call->gadget, call->method, call->args) < 0 || ctl_flush(c) < 0)
                        return -1;
                Control__Response *r = ctl_recv(c);
                if (!r)
                        return -1;
                int refused = r->resp_case == CONTROL__RESPONSE__RESP_ERROR;
                control__response__free_unpacked(r, NULL);
                if (!refused) {
                        fprintf(stderr, "clusterbench: the refused call was answered\n");
                        return -1;
                }
                samples_add(s, bench_now_ns() - t0);
        }
        return 0;
}

int main(int argc, char **argv)
{
        struct samples local = { .name = "local_ns" }, remote = { .name = "remote_ns" },
                       link = { .name = "link_ns" }, junk = { .name = "warmup" };
        struct ctl owner, other;
        if (argc != 7) {
                fprintf(stderr, "usage: clusterbench OWNER_SOCKET OTHER_SOCKET GADGET METHOD ROUNDS N\n");
                return 2;
        }
        int rounds = atoi(argv[5]), n = atoi(argv[6]);
        Gadget__Value null = GADGET__VALUE__INIT;
        null.kind_case = GADGET__VALUE__KIND_NULL_VALUE;
        const struct ctl_call call = { argv[3], argv[4], &null };
        const struct ctl_call none = { argv[3], "clusterbench_no_such_method", &null };
        if (ctl_open(&owner, argv[1]) < 0 || ctl_open(&other, argv[2]) < 0) {
                fprintf(stderr, "clusterbench: cannot connect\n");
                return 1;
        }
        int fail = ctl_seq_block(&owner, &call, 50, &junk) < 0 || ctl_seq_block(&other, &call, 50, &junk) < 0 ||
                   refused_block(&other, &none, 50, &junk) < 0;
        for (int r = 0; !fail && r < rounds; r++)
                fail = ctl_seq_block(&owner, &call, n, &local) < 0 || ctl_seq_block(&other, &call, n, &remote) < 0 ||
                       refused_block(&other, &none, n, &link) < 0;
        ctl_close(&owner);
        ctl_close(&other);
        if (fail) {
                fprintf(stderr, "clusterbench: a block failed\n");
                return 1;
        }
        struct samples *sets[] = { &local, &remote, &link };
        samples_print(sets, 3);
        return 0;
}
