/* top: gadgetctl top, views of every gadget's CPU, memory, tasks, calls
 * and errors a second, made from two of gadgetd's counters reports a
 * delay apart (the control request Top). On a terminal each view replaces
 * the last, as systemd-cgtop's; otherwise they follow one another. */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "show.h"

static int report(const struct ctl *ctl, Control__Response **r)
{
        Control__Request req = CONTROL__REQUEST__INIT;
        Control__Top top = CONTROL__TOP__INIT;
        req.req_case = CONTROL__REQUEST__REQ_TOP;
        req.top = &top;
        return cmd_ask(ctl, &req, CONTROL__RESPONSE__RESP_TOP, r);
}

static void pause_ms(uint64_t ms)
{
        struct timespec ts = { .tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000 };
        while (nanosleep(&ts, &ts) < 0)
                ;
}

int cmd_top(const struct ctl *ctl, const struct cmd_args *a)
{
        Control__Response *before = NULL, *now = NULL;
        uint64_t delay = a->delay_ms ? a->delay_ms : 1000;
        bool tty = isatty(STDOUT_FILENO);
        uint32_t views = a->lines_set ? a->lines : ctl->json ? 1 : 0;
        int st = report(ctl, &before);
        if (st != CTL_EXIT_OK)
                return st;
        if (ctl->json) {
                /* One view of the counters as they are: no rates, no wait. */
                st = show_top(stdout, before->top, NULL, true) < 0 ? CTL_EXIT_FAILED : CTL_EXIT_OK;
                control__response__free_unpacked(before, NULL);
                return st;
        }
        for (uint32_t i = 0; views == 0 || i < views; i++) {
                pause_ms(delay);
                if ((st = report(ctl, &now)) != CTL_EXIT_OK)
                        break;
                if (tty)
                        fputs("\033[H\033[2J", stdout);
                else if (i > 0)
                        fputc('\n', stdout);
                if (show_top(stdout, now->top, before->top, false) < 0) {
                        st = CTL_EXIT_FAILED;
                        break;
                }
                fflush(stdout);
                control__response__free_unpacked(before, NULL);
                before = now;
                now = NULL;
        }
        if (now)
                control__response__free_unpacked(now, NULL);
        control__response__free_unpacked(before, NULL);
        return st;
}
