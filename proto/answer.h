/* answer: the control protocol's answers (control.proto's Response), each
 * kind built in one place for every sender: gadgetd's control socket and
 * its node link. Nothing is allocated or copied: the answer and what it
 * points at (strings, values, lists) are the caller's until it is sent. */
#pragma once

#include <stdint.h>

#include "control.pb-c.h"

/* Room for one answer and the small message it carries. */
struct answer {
        Control__Response r;
        Gadget__Error error;
        Control__Done done;
};

/* Each fills a for request id and returns &a->r, ready to send. */
Control__Response *answer_error(struct answer *a, uint64_t id, int code, const char *message);
Control__Response *answer_done(struct answer *a, uint64_t id, const char *message);
Control__Response *answer_result(struct answer *a, uint64_t id, const Gadget__Value *result);
Control__Response *answer_list(struct answer *a, uint64_t id, Control__GadgetList *list);
Control__Response *answer_status(struct answer *a, uint64_t id, Control__GadgetStatus *status);
Control__Response *answer_logs(struct answer *a, uint64_t id, Control__LogLines *logs);
Control__Response *answer_reload(struct answer *a, uint64_t id, Control__ReloadReport *reload);
Control__Response *answer_approvals(struct answer *a, uint64_t id, Control__ApprovalList *approvals);
Control__Response *answer_nodes(struct answer *a, uint64_t id, Control__NodeList *nodes);
