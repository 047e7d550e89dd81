/* tailbench: what a tail binding costs the gadget it observes, as the
 * ratio of a call to a tailed gadget to one to an untailed one in the
 * same run: two copies of the bench gadget, one named by another gadget's
 * tail binding (Of=), whose every call is recorded and sent on to that
 * tail in batches. Paired blocks (ctl_paired_blocks), a null argument:
 *   seq   one call at a time: each round trip (ns)
 *   pipe  DEPTH calls always in flight: calls per second of each block
 *
 * With a PREFIX, the samples' names start with it (a second run, the tail
 * gadget stopped: its events recorded and dropped, none delivered).
 *
 *   tailbench SOCKET UNTAILED TAILED METHOD ROUNDS SEQ PIPE DEPTH [PREFIX] */
#include <stdio.h>
#include <stdlib.h>

#include "benchutil.h"
#include "ctlclient.h"

int main(int argc, char **argv)
{
        struct ctl ctl;
        static const char *const names[] = { "untailed_seq_ns", "tailed_seq_ns", "untailed_pipe_per_s",
                                             "tailed_pipe_per_s" };
        char named[4][80];
        if (argc != 9 && argc != 10) {
                fprintf(stderr, "usage: tailbench SOCKET UNTAILED TAILED METHOD ROUNDS SEQ PIPE DEPTH [PREFIX]\n");
                return 2;
        }
        for (int i = 0; i < 4; i++)
                snprintf(named[i], sizeof named[i], "%s%s", argc == 10 ? argv[9] : "", names[i]);
        struct samples us = { .name = named[0] }, ts = { .name = named[1] }, up = { .name = named[2] },
                       tp = { .name = named[3] };
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
