/* helpdesk: a user gadget of the tickets example. It files and lists
 * tickets only through the tickets gatekeeper (its gadget binding TICKETS,
 * whose creates wait for an operator's approval); it holds no credential
 * and cannot reach the tickets API itself.
 *   report({"title": T, "body": B}) -> {"id": N}
 *   tickets() -> [{"id", "title", "label"}] */
#include <gadget.h>

#define TICKET_T "{id: int, title: string, label: string}"

/* Calls method of the gatekeeper through the binding TICKETS; its error is the caller's. */
static gadget_value *forward(struct gadget_call *call, const char *method, const gadget_value *args)
{
        struct gadget *g = gadget_call_gadget(call);
        gadget_value *r = NULL;
        int e = gadget_call(g, "TICKETS", method, args ? gadget_copy(args) : NULL, &r);

        if (e < 0)
                return gadget_fail(call, -e, "%s", gadget_last_error(g));
        return r;
}

/* report: a new ticket, once an operator approves it. The arguments have
 * the gatekeeper's create signature: passed on as they are. */
static gadget_value *report(struct gadget_call *call, const gadget_value *args, void *data)
{
        return forward(call, "create", args);
}

/* tickets: the gatekeeper's list. */
static gadget_value *tickets(struct gadget_call *call, const gadget_value *args, void *data)
{
        return forward(call, "list", NULL);
}

int main(void)
{
        struct gadget *g = gadget_new("helpdesk");
        gadget_method_typed(g, "report(title: string(1..120), body?: string(..2000)) -> {id: int}", report, NULL);
        gadget_method_typed(g, "tickets() -> list<" TICKET_T ">(..1000)", tickets, NULL);
        int e = gadget_serve(g);
        gadget_free(g);
        return e < 0 ? 1 : 0;
}
