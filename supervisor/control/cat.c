/* cat: gadgetctl cat, a gadget's policy as written and as in effect, in
 * one LogLines answer. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "contract.h"
#include "control.h"
#include "core/core.h"
#include "policy.h"
#include "value.h"

/* Appends the lines of text (len bytes) to *v; bytes that are not UTF-8
 * (a comment's, say) become '?'. 0 or -ENOMEM. */
static int add_lines(char ***v, size_t *n, const char *text, size_t len)
{
        size_t i = 0;
        while (i < len) {
                const char *nl = memchr(text + i, '\n', len - i);
                size_t k = (nl ? (size_t)(nl - text) : len) - i;
                char **nv = realloc(*v, (*n + 2) * sizeof *nv);
                if (!nv)
                        return -ENOMEM;
                *v = nv;
                char *line = strndup(text + i, k);
                if (!line)
                        return -ENOMEM;
                if (!value_utf8_valid(line, strlen(line)))
                        for (char *c = line; *c; c++)
                                if ((unsigned char)*c >= 0x80)
                                        *c = '?';
                nv[(*n)++] = line;
                i += k + 1;
        }
        return 0;
}

/* gadgetctl cat: the policy file's text as gadgetd read it at the
 * gadget's last load (kept since, in struct policy), then what is in
 * effect (policy_format). Root only: the file may hold what only root
 * may read (Environment=, a text binding's Value=), and gadgetd reads a
 * file loaded by another user with that user's rights. */
void request_cat(struct client *cl, const Control__Request *q)
{
        if (cl->cred.uid != 0) {
                client_error(cl, q->id, GADGET_EDENIED, "gadgetctl cat shows a policy's text and values: "
                             "root only");
                return;
        }
        struct unit *u = core_find(client_env(cl)->core, q->cat->name);
        if (!u) {
                client_error(cl, q->id, GADGET_ENOTFOUND, "no gadget named \"%s\"", q->cat->name);
                return;
        }
        static const char not_kept[] = "# (its text was not kept)\n";
        static const char in_effect[] = "\n# as in effect, defaults included\n";
        const struct policy *p = unit_policy(u);
        char **v = NULL, *head = NULL, *effect = NULL;
        size_t n = 0;
        int e = policy_format(p, &effect);
        if (e == 0 && asprintf(&head, "# %s, as gadgetd read it when it last loaded it\n", p->path) < 0)
                e = -ENOMEM;
        if (e == 0)
                e = add_lines(&v, &n, head, strlen(head));
        if (e == 0 && p->text)
                e = add_lines(&v, &n, p->text, p->text_len);
        else if (e == 0)
                e = add_lines(&v, &n, not_kept, strlen(not_kept));
        if (e == 0)
                e = add_lines(&v, &n, in_effect, strlen(in_effect));
        if (e == 0)
                e = add_lines(&v, &n, effect, strlen(effect));
        if (e < 0) {
                client_error(cl, q->id, GADGET_EINTERNAL, "out of memory");
        } else {
                Control__LogLines ll = CONTROL__LOG_LINES__INIT;
                ll.n_lines = n;
                ll.lines = v;
                client_answer(cl, q->id, &ll.base);
        }
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
        free(head);
        free(effect);
}
