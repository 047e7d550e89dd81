/* nodelink_reexec: the link's side of gadgetctl daemon-reexec. A TLS
 * session cannot cross an exec: the node stops reading its sessions at a
 * frame boundary, waits until every request it read is answered and every
 * request it sent is, tells each node calling it goodbye (what it did not
 * answer it never read), closes its own sessions and hands the listening
 * socket on; the other nodes connect again into its backlog. */
#include "nodelink_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>

#include "system/conn.h"

void nodelink_reexec_hold(struct nodelink *nl, bool hold)
{
        struct nodelink_in *in, *next;
        nl->reexec_held = hold;
        if (nl->listener) {
                if (hold)
                        evconnlistener_disable(nl->listener);
                else
                        evconnlistener_enable(nl->listener);
        }
        for (in = TAILQ_FIRST(&nl->ins); in; in = next) {
                next = TAILQ_NEXT(in, link);
                if (!hold && in->bye) {
                        nodelink_in_end(in, true); /* told goodbye: ended, as its node expects */
                        continue;
                }
                if (in->conn)
                        conn_hold(in->conn, hold || (in->rate && in->rate->held));
        }
        if (!hold)
                nl->bye_sent = false;
}

/* Calls or moves this node sent and not answered yet, in why. */
static bool outs_busy(const struct nodelink *nl, char *why, size_t len)
{
        const struct out *o;
        TAILQ_FOREACH(o, &nl->outs, link)
                if (o->n_sends) {
                        snprintf(why, len, "%u calls sent to node %s wait for their answers", o->n_sends, o->node);
                        return true;
                }
        return false;
}

/* What is still under way on the link, in why; false when nothing. */
static bool busy(struct nodelink *nl, char *why, size_t len)
{
        const struct nodelink_in *in;
        if (nl->n_pre) {
                snprintf(why, len, "%u sessions of other nodes are in their handshake", nl->n_pre);
                return true;
        }
        TAILQ_FOREACH(in, &nl->ins, link)
                if (in->inflight) {
                        snprintf(why, len, "node %s has %u requests in flight here", in->from, in->inflight);
                        return true;
                }
        return outs_busy(nl, why, len);
}

/* Each accepted session is told goodbye and read from then on only to
 * drop what comes (its node closes it once it read the goodbye); each
 * outgoing one, idle, is closed. */
static void say_goodbye(struct nodelink *nl)
{
        Control__Goodbye bye = CONTROL__GOODBYE__INIT;
        Control__Response r = CONTROL__RESPONSE__INIT;
        struct nodelink_in *in, *next;
        r.resp_case = CONTROL__RESPONSE__RESP_GOODBYE;
        r.goodbye = &bye;
        for (in = TAILQ_FIRST(&nl->ins); in; in = next) {
                next = TAILQ_NEXT(in, link);
                if (!in->conn || in->refused || conn_send(in->conn, &r.base) < 0) {
                        nodelink_in_end(in, true);
                        continue;
                }
                in->bye = true;
                conn_hold(in->conn, in->rate && in->rate->held);
        }
        while (!TAILQ_EMPTY(&nl->outs))
                nodelink_out_free(TAILQ_FIRST(&nl->outs));
        nl->bye_sent = true;
}

int nodelink_reexec_quiet(struct nodelink *nl, char *why, size_t len)
{
        if (!nl->bye_sent) {
                if (busy(nl, why, len))
                        return -EBUSY;
                say_goodbye(nl);
        }
        const struct nodelink_in *in;
        /* Sent after the goodbyes (a gadget of this node calling one of
         * another): answered before the exec too, never cut off by it. */
        if (outs_busy(nl, why, len))
                return -EBUSY;
        TAILQ_FOREACH(in, &nl->ins, link)
                if (in->bye) {
                        snprintf(why, len, "node %s has not closed its session after the goodbye", in->from);
                        return -EBUSY;
                }
        return 0;
}

int nodelink_listen_fd(const struct nodelink *nl)
{
        return nl->listener ? evconnlistener_get_fd(nl->listener) : -1;
}
