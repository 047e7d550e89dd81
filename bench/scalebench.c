/* scalebench: loads many gadgets at once and waits until all are ready.
 *
 *   scalebench SOCKET POLICY...
 *
 * The load requests leave as fast as gadgetd takes them: a connection may
 * have only 16 of them unanswered (LOADS_IN_FLIGHT), so the
 * first that many leave in one write and each answer lets the next one go
 * (loads answered once loaded, not once ready: no_block); then each
 * gadget's status is asked until it is ready (one at a time, 1 ms apart
 * while one is still starting). Prints {"loaded_ns": [every load answered], "ready_ns": [all
 * ready]}, both from the moment the requests were written. The gadget
 * names are the policy file names without ".policy". */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "benchutil.h"
#include "ctlclient.h"

/* CONTROL_WAITING_MAX (supervisor/control/control.h, which bench/ may not
 * include): the unanswered loads a connection may have. */
#define LOADS_IN_FLIGHT 16

/* 1 ready, 0 not yet, -1 failed or gone. */
static int is_ready(struct ctl *c, const char *name)
{
        if (ctl_put_status(c, name) < 0 || ctl_flush(c) < 0)
                return -1;
        Control__Response *r = ctl_recv(c);
        int st = -1;
        if (r && r->resp_case == CONTROL__RESPONSE__RESP_STATUS) {
                const char *s = r->status->info->state;
                st = strcmp(s, "ready") == 0 ? 1 : strcmp(s, "starting") == 0 ? 0 : -1;
                if (st < 0)
                        fprintf(stderr, "scalebench: %s is %s: %s\n", name, s, r->status->info->cause);
        }
        if (r)
                control__response__free_unpacked(r, NULL);
        return st;
}

int main(int argc, char **argv)
{
        struct samples loaded = { .name = "loaded_ns" }, ready = { .name = "ready_ns" };
        struct ctl c;
        if (argc < 3) {
                fprintf(stderr, "usage: scalebench SOCKET POLICY...\n");
                return 2;
        }
        int n = argc - 2;
        int e = ctl_open(&c, argv[1]);
        if (e < 0) {
                fprintf(stderr, "scalebench: %s: %s\n", argv[1], strerror(-e));
                return 1;
        }
        int64_t t0 = bench_now_ns();
        int sent = 0;
        for (; sent < n && sent < LOADS_IN_FLIGHT; sent++)
                if (ctl_put_load(&c, argv[2 + sent]) < 0)
                        return 1;
        if (ctl_flush(&c) < 0)
                return 1;
        for (int i = 0; i < n; i++) {
                Control__Response *r = ctl_recv(&c);
                if (r && sent < n && (ctl_put_load(&c, argv[2 + sent++]) < 0 || ctl_flush(&c) < 0))
                        return 1;
                if (!r || r->resp_case != CONTROL__RESPONSE__RESP_DONE) {
                        fprintf(stderr, "scalebench: load %d failed: %s\n", i,
                                r && r->resp_case == CONTROL__RESPONSE__RESP_ERROR ? r->error->message : "?");
                        return 1;
                }
                control__response__free_unpacked(r, NULL);
        }
        samples_add(&loaded, bench_now_ns() - t0);
        for (int i = 0; i < n; i++) {
                char name[4096];
                snprintf(name, sizeof name, "%s", basename(argv[2 + i]));
                char *dot = strrchr(name, '.');
                if (dot)
                        *dot = '\0';
                int st;
                while ((st = is_ready(&c, name)) == 0)
                        nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
                if (st < 0)
                        return 1;
        }
        samples_add(&ready, bench_now_ns() - t0);
        ctl_close(&c);
        struct samples *sets[] = { &loaded, &ready };
        samples_print(sets, 2);
        return 0;
}
