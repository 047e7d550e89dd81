/* unit_output: a running gadget's output — its stdout and stderr pipes
 * and its log messages over the RPC — into its log ring and gadgetd's
 * log, under its log budget (LogLinesPerSecond=, LogBytesPerSecond=). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core_int.h"
#include "link/peer.h"
#include "policy.h"
#include "system/log.h"
#include "system/monotime.h"

#define OUTPUT_SLICE 16384       /* bytes of one output read: one per pipe per loop turn */

/* A line of output the budget kept: to the ring and gadgetd's log. */
struct line_ctx {
        struct unit *u;
        struct logbuf_meta meta;  /* its time is taken per line */
        size_t added;
};

/* gadgetd's log level of a syslog priority. */
static enum log_level level_of(unsigned prio)
{
        return prio <= 3 ? L_ERR : prio == 4 ? L_WARN : L_INFO;
}

static void line_cb(void *arg, const char *line, size_t len)
{
        struct line_ctx *c = arg;
        c->meta.time_ms = logbuf_now_ms();
        const struct logbuf_entry *e = logbuf_add(&c->u->log, &c->meta, line, len);
        if (!e)
                return;
        log_msg(level_of(e->prio), c->u->policy->name, "%s", e->text);
        unit_events_logged(c->u, logbuf_source_name(e->source), e->text);
        c->added++;
}

/* Stops or starts reading the output pipes and, hold, the links of
 * each of its processes (a restart's new or old one too: one budget). */
static void output_watch(struct unit *u, bool on, bool hold)
{
        struct unit_run *runs[] = { u->run, u->next_run, u->old_run };
        for (size_t k = 0; k < 3; k++) {
                struct unit_run *r = runs[k];
                if (!r)
                        continue;
                struct event *evs[] = { r->ev_out, r->ev_err };
                for (size_t i = 0; i < 2; i++)
                        if (evs[i]) {
                                if (on)
                                        event_add(evs[i], NULL);
                                else
                                        event_del(evs[i]);
                        }
                if (hold && r->peer)
                        peer_hold(r->peer, !on);
        }
}

/* "N lines dropped" in gadgetd's log and, with ring, in the gadget's. */
static void say_dropped(struct unit *u, uint64_t dropped, uint64_t bytes, bool paused, bool ring)
{
        char line[300], tagged[320];
        snprintf(line, sizeof line, "%llu lines dropped (%llu bytes) over the log budget of "
                 "LogLinesPerSecond=%llu, LogBytesPerSecond=%llu%s", (unsigned long long)dropped,
                 (unsigned long long)bytes, (unsigned long long)u->log_budget.lines_max,
                 (unsigned long long)u->log_budget.bytes_max,
                 paused ? "; the rest of its output waited in the pipe" : "");
        log_msg(L_WARN, u->policy->name, "%s", line);
        snprintf(tagged, sizeof tagged, "gadgetd: %s", line);
        struct logbuf_meta m = { .time_ms = logbuf_now_ms(), .run = u->run->number, .source = LOGBUF_GADGETD,
                                 .prio = LOGBUF_PRIO_WARNING };
        if (ring && logbuf_add(&u->log, &m, tagged, strlen(tagged)))
                u->hooks->log_added(u->hooks->arg, u, 1);
}

/* Ends the log budget's window if it is over: says how many lines it
 * dropped, and reads the pipes again if they were left alone. */
static void log_window(struct unit *u)
{
        uint64_t dropped, bytes;
        bool paused = u->log_budget.paused;
        if (!logbuf_budget_roll(&u->log_budget, monotime_ms(), &dropped, &bytes))
                return;
        u->stats.log_dropped += dropped;
        if (dropped)
                say_dropped(u, dropped, bytes, paused, true);
        if (paused)
                output_watch(u, true, true);
}

/* After output was handled: past its read allowance the gadget's pipes
 * and its RPC socket are left unread until the window ends (its writes
 * then wait, which costs the gadget, not gadgetd: its calls' results wait
 * too); the window's end is awaited whenever there is something to report
 * or resume. */
static void log_after(struct unit *u)
{
        const struct logbuf_budget *g = &u->log_budget;
        if (g->paused)
                output_watch(u, false, true);
        /* ev_logwin: made at its first worker, whose output this is. */
        if ((g->paused || g->dropped) && u->ev_logwin && !evtimer_pending(u->ev_logwin, NULL))
                timer_arm_ms(u->ev_logwin, logbuf_budget_left_ms(g, monotime_ms()));
}

void unit_output_window_cb(evutil_socket_t fd, short what, void *arg)
{
        struct unit *u = arg;
        log_window(u);
        log_after(u);
}

/* A pipe of the program's output: one bounded read per loop turn, its
 * lines charged to the gadget's log budget. */
static void output_cb(evutil_socket_t fd, short what, void *arg)
{
        struct unit_run *r = arg;
        struct unit *u = r->u;
        bool is_out = fd == r->out_fd;
        struct logbuf_stream *s = &r->lines[is_out ? 0 : 1];
        struct line_ctx c = { .u = u, .meta = { .run = r->number, .source = is_out ? LOGBUF_STDOUT : LOGBUF_STDERR,
                                                .prio = LOGBUF_PRIO_INFO } };
        char buf[OUTPUT_SLICE];

        log_window(u);
        size_t room = logbuf_budget_room(&u->log_budget);
        if (room == 0) {
                log_after(u);
                return;
        }
        ssize_t n = read(fd, buf, room < sizeof buf ? room : sizeof buf);
        if (n > 0) {
                logbuf_budget_read(&u->log_budget, (size_t)n);
                logbuf_split(s, &u->log_budget, buf, (size_t)n, line_cb, &c);
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                logbuf_split_flush(s, &u->log_budget, line_cb, &c);
                struct event **ev = is_out ? &r->ev_out : &r->ev_err;
                event_free(*ev);
                *ev = NULL;
        }
        if (c.added)
                u->hooks->log_added(u->hooks->arg, u, c.added);
        log_after(u);
}

/* A log message over the RPC: its lines (a message is at least one) are
 * charged to the same budget as the output pipes. */
void unit_output_log(struct unit_run *r, const Gadget__Log *l)
{
        struct unit *u = r->u;
        struct logbuf_stream s = { .len = 0 };
        struct line_ctx c = { .u = u, .meta = { .run = r->number, .source = LOGBUF_MESSAGE, .prio = l->level } };

        log_window(u);
        size_t len = strlen(l->text);
        /* Log messages count against the output read allowance as the
         * pipes' bytes do: past it, the RPC socket waits for the window. */
        logbuf_budget_read(&u->log_budget, len);
        size_t n = logbuf_split(&s, &u->log_budget, l->text, len, line_cb, &c);
        if (s.len || n == 0) {
                if (logbuf_budget_admit(&u->log_budget, s.len))
                        line_cb(&c, s.partial, s.len);
        }
        if (c.added)
                u->hooks->log_added(u->hooks->arg, u, c.added);
        log_after(u);
}

/* Opens a non-blocking pipe for one output stream of the program. */
int unit_output_pipe(struct unit_run *r, int *rd, int *wr, struct event **ev)
{
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) < 0)
                return -errno;
        fcntl(fds[0], F_SETFL, O_NONBLOCK);
        *rd = fds[0];
        *wr = fds[1];
        *ev = event_new(r->u->core->base, fds[0], EV_READ | EV_PERSIST, output_cb, r);
        if (!*ev || event_add(*ev, NULL) < 0)
                return -ENOMEM;
        return 0;
}

int unit_output_adopt(struct unit_run *r, int rd, struct event **ev)
{
        fcntl(rd, F_SETFD, FD_CLOEXEC);
        fcntl(rd, F_SETFL, O_NONBLOCK);
        *ev = event_new(r->u->core->base, rd, EV_READ | EV_PERSIST, output_cb, r);
        if (!*ev || event_add(*ev, NULL) < 0)
                return -ENOMEM;
        return 0;
}

void unit_output_end(struct unit *u)
{
        /* The drops of a window that has not ended are told now. */
        if (u->log_budget.dropped)
                say_dropped(u, u->log_budget.dropped, u->log_budget.dropped_bytes, u->log_budget.paused, false);
}
