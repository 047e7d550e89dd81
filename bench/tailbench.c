/* tailbench: what a tail binding costs the gadget it observes, as the
 * ratio of a call to a tailed gadget to one to an untailed one in the
 * same run: two copies of the bench gadget, one named by another gadget's
 * tail binding (Of=), whose every call is recorded and sent on to that
 * tail in batches. Paired blocks (ctl_paired_blocks), a null argument:
 *   seq   one call at a time: each round trip (ns)
 *   pipe  DEPTH calls always in flight: calls per second of each block
 *
 *   tailbench SOCKET UNTAILED TAILED METHOD ROUNDS SEQ PIPE DEPTH */
#include <stdio.h>
#include <stdlib.h>

#include "benchutil.h"
#include "ctlclient.h"

int main(int argc, char **argv)
{
        struct ctl ctl;
        struct samples us = { .name = "untailed_seq_ns" }, ts = { .name = "tailed_seq_ns" },
                       up = { .name = "untailed_pipe_per_s" }, tp = { .name = "tailed_pipe_per_s" };
        if (argc != 9) {
                fprintf(stderr, "usage: tailbench SOCKET UNTAILED TAILED METHOD ROUNDS SEQ PIPE DEPTH\n");
                return 2;
        }
        Gadget__Value null = GADGET__VALUE__INIT;
        null.kind_case = GADGET__VALUE__KIND_NULL_VALUE;
        const struct ctl_call plain = { argv[2], argv[4], &null }, tailed = { argv[3], argv[4], &null };
        const struct ctl_pairing n = { atoi(argv[5]), atoi(argv[6]), atoi(argv[7]), atoi(argv[8]) };
        if (ctl_open(&ctl, argv[1]) < 0) {
                fprintf(stderr, "tailbench: cannot connect\n");
                return 1;
        }
        struct samples *const sets[] = { &us, &ts, &up, &tp };
        int fail = ctl_paired_blocks(&ctl, &plain, &tailed, &n, sets);
        ctl_close(&ctl);
        if (fail) {
                fprintf(stderr, "tailbench: a block failed\n");
                return 1;
        }
        samples_print(sets, 4);
        return 0;
}
