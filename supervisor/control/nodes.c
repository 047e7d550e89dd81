/* nodes: gadgetctl nodes, the nodes that share the store as last read,
 * and gadgetctl nodes forget, which takes a down node off that list. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "client.h"
#include "contract.h"
#include "control.h"
#include "core/core.h"
#include "store/store.h"
#include "system/log.h"

void request_nodes(struct client *cl, const Control__Request *q)
{
        const struct kvpg_node *nodes;
        const char *self;
        uint64_t since;
        size_t n = core_nodes(client_env(cl)->core, &nodes, &self, &since);
        if (!self) {
                client_error(cl, q->id, GADGET_EUNAVAILABLE, "gadgetd does not share a store with other nodes "
                             "(Store=postgresql)");
                return;
        }
        Control__NodeInfo **infos = answer_items(&control__node_info__descriptor, n);
        if (!infos) {
                client_error(cl, q->id, GADGET_EINTERNAL, "out of memory");
                return;
        }
        for (size_t i = 0; i < n; i++) {
                infos[i]->name = (char *)nodes[i].name;
                infos[i]->peer = (char *)nodes[i].peer;
                infos[i]->last_seen_ms = nodes[i].age_ms + since;
                infos[i]->self = strcmp(nodes[i].name, self) == 0;
                infos[i]->leases = nodes[i].leases;
        }
        Control__NodeList nl = CONTROL__NODE_LIST__INIT;
        nl.n_nodes = n;
        nl.nodes = infos;
        nl.store_warning = (char *)core_store_warning(client_env(cl)->core);
        client_answer(cl, q->id, &nl.base);
        free(infos);
}

/* Root only: forgetting a node changes what every node lists. A live
 * node is refused (by the store's own clock). */
void request_forget_node(struct client *cl, const Control__Request *q)
{
        const char *node = q->forget_node->name;
        if (cl->cred.uid != 0) {
                client_error(cl, q->id, GADGET_EDENIED, "gadgetctl nodes forget changes the store's list of nodes: "
                             "root only");
                return;
        }
        struct client_load *c = client_load_begin(cl, q->id);
        char msg[400];
        int code = c ? core_forget_node(client_env(cl)->core, node, client_load_answer, c, msg, sizeof msg) : 1;
        if (code == 0)
                log_msg(L_INFO, NULL, "gadgetctl (uid %u) asks to forget node %s", (unsigned)cl->cred.uid, node);
        else if (c)
                client_load_answer(c, code, msg);
}
