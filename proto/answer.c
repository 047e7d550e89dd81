/* answer: the control protocol's answers, one builder per kind (answer.h). */
#include "answer.h"

/* a's Response for id, its oneof set to kind. */
static Control__Response *start(struct answer *a, uint64_t id, Control__Response__RespCase kind)
{
        *a = (struct answer){ .r = CONTROL__RESPONSE__INIT, .error = GADGET__ERROR__INIT,
                              .done = CONTROL__DONE__INIT };
        a->r.id = id;
        a->r.resp_case = kind;
        return &a->r;
}

Control__Response *answer_error(struct answer *a, uint64_t id, int code, const char *message)
{
        start(a, id, CONTROL__RESPONSE__RESP_ERROR);
        a->error.code = (uint32_t)code;
        a->error.message = (char *)message;
        a->r.error = &a->error;
        return &a->r;
}

Control__Response *answer_done(struct answer *a, uint64_t id, const char *message)
{
        start(a, id, CONTROL__RESPONSE__RESP_DONE);
        a->done.message = (char *)message;
        a->r.done = &a->done;
        return &a->r;
}

Control__Response *answer_result(struct answer *a, uint64_t id, const Gadget__Value *result)
{
        start(a, id, CONTROL__RESPONSE__RESP_RESULT)->result = (Gadget__Value *)result;
        return &a->r;
}

Control__Response *answer_list(struct answer *a, uint64_t id, Control__GadgetList *list)
{
        start(a, id, CONTROL__RESPONSE__RESP_LIST)->list = list;
        return &a->r;
}

Control__Response *answer_status(struct answer *a, uint64_t id, Control__GadgetStatus *status)
{
        start(a, id, CONTROL__RESPONSE__RESP_STATUS)->status = status;
        return &a->r;
}

Control__Response *answer_logs(struct answer *a, uint64_t id, Control__LogLines *logs)
{
        start(a, id, CONTROL__RESPONSE__RESP_LOGS)->logs = logs;
        return &a->r;
}

Control__Response *answer_reload(struct answer *a, uint64_t id, Control__ReloadReport *reload)
{
        start(a, id, CONTROL__RESPONSE__RESP_RELOAD)->reload = reload;
        return &a->r;
}

Control__Response *answer_approvals(struct answer *a, uint64_t id, Control__ApprovalList *approvals)
{
        start(a, id, CONTROL__RESPONSE__RESP_APPROVALS)->approvals = approvals;
        return &a->r;
}

Control__Response *answer_nodes(struct answer *a, uint64_t id, Control__NodeList *nodes)
{
        start(a, id, CONTROL__RESPONSE__RESP_NODES)->nodes = nodes;
        return &a->r;
}
