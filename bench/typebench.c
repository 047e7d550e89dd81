/* typebench: what checking a call against its method's signature costs,
 * on the control socket's call path, as the ratio of a typed call to an
 * untyped one in the same run. Both methods of the bench gadget do
 * nothing and take the same 5-field record; the typed one declares
 *     rec_typed(a: int, b: string, c: double, d: bool, e: list<int>) -> null
 * so gadgetd checks the arguments (and libgadget again) and the result.
 * Alternating blocks, a warm-up of each first:
 *   seq   one call at a time: each round trip (ns)
 *   pipe  DEPTH calls always in flight: calls per second of each block
 *
 *   typebench SOCKET GADGET ROUNDS SEQ PIPE DEPTH */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchutil.h"
#include "ctlclient.h"
#include "value.h"

/* {a: 1, b: "bench", c: 2.5, d: true, e: [1, 2, 3]} */
static Gadget__Value *record(void)
{
        Gadget__Value *m = value_new_map(), *e = value_new_list();
        if (!m || !e)
                return NULL;
        for (int i = 1; i <= 3; i++)
                value_list_append(e, value_new_int(i));
        value_map_set(m, "a", value_new_int(1));
        value_map_set(m, "b", value_new_string("bench"));
        value_map_set(m, "c", value_new_double(2.5));
        value_map_set(m, "d", value_new_bool(true));
        value_map_set(m, "e", e);
        return m;
}

int main(int argc, char **argv)
{
        struct ctl ctl;
        struct samples us = { .name = "untyped_seq_ns" }, ts = { .name = "typed_seq_ns" },
                       up = { .name = "untyped_pipe_per_s" }, tp = { .name = "typed_pipe_per_s" };
        if (argc != 7) {
                fprintf(stderr, "usage: typebench SOCKET GADGET ROUNDS SEQ PIPE DEPTH\n");
                return 2;
        }
        Gadget__Value *args = record();
        const struct ctl_call plain = { argv[2], "rec", args }, typed = { argv[2], "rec_typed", args };
        const struct ctl_pairing n = { atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]) };
        if (!args || ctl_open(&ctl, argv[1]) < 0) {
                fprintf(stderr, "typebench: cannot start\n");
                return 1;
        }
        struct samples *const sets[] = { &us, &ts, &up, &tp };
        int fail = ctl_paired_blocks(&ctl, &plain, &typed, &n, sets);
        ctl_close(&ctl);
        value_free(args);
        if (fail) {
                fprintf(stderr, "typebench: a block failed\n");
                return 1;
        }
        samples_print(sets, 4);
        return 0;
}
