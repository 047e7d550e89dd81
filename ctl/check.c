/* check: policy files validated by gadgetctl itself, as gadgetd will. */
#include "check.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract.h"
#include "policy.h"
#include "show.h"

/* The result of one file as {"file":...,"ok":...,"errors":[...],"warnings":[...]};
 * errs holds the errors of a bad file, the warnings of a good one. */
static json_t *file_json(const char *path, bool ok, const struct policy_errors *errs)
{
        return json_pack("{s:o, s:b, s:o, s:o}", "file", show_json_string(path), "ok", ok, "errors",
                         show_json_strv(ok ? NULL : errs->msgs, ok ? 0 : errs->n), "warnings",
                         show_json_strv(ok ? errs->msgs : NULL, ok ? errs->n : 0));
}

/* Loads path; on failure makes sure errs says why, on success it holds the
 * policy's warnings. 0 or -errno. */
static int load(const char *path, struct policy_errors *errs)
{
        struct policy *p = NULL;
        int e = policy_load(path, &p, errs);

        if (e >= 0) {
                errs->msgs = p->warnings;
                errs->n = p->n_warnings;
                p->warnings = NULL;
                p->n_warnings = 0;
        }
        policy_free(p);
        if (e < 0 && errs->n == 0) {
                char msg[512], *m;
                snprintf(msg, sizeof(msg), "%s: %s", path, strerror(-e));
                m = strdup(msg);
                if (!m || policy_strv_push(&errs->msgs, &errs->n, m) < 0)
                        return -ENOMEM;
        }
        return e;
}

int check_run(const struct ctl *ctl, const struct cmd_args *a)
{
        json_t *all = ctl->json ? json_array() : NULL;
        int status = CTL_EXIT_OK;

        if (ctl->json && !all)
                goto oom;
        for (int i = 0; i < a->n_pos; i++) {
                struct policy_errors errs = { 0 };
                const char *path = a->pos[i];
                int e = load(path, &errs);

                if (e < 0)
                        status = CTL_EXIT_FAILED;
                if (all) {
                        e = json_array_append_new(all, file_json(path, e >= 0, &errs));
                } else if (e >= 0) {
                        char *line = NULL;
                        e = 0;
                        for (size_t j = 0; j < errs.n && e >= 0; j++)
                                e = show_line(stdout, errs.msgs[j]);
                        if (e >= 0)
                                e = asprintf(&line, "%s: ok", path) < 0 ? -ENOMEM : show_line(stdout, line);
                        free(line);
                } else {
                        e = 0;
                        for (size_t j = 0; j < errs.n && e >= 0; j++)
                                e = show_line(stdout, errs.msgs[j]);
                }
                policy_errors_clear(&errs);
                if (e < 0) {
                        json_decref(all);
                        goto oom;
                }
        }
        if (all && show_json(stdout, all) < 0)
                goto oom;
        return status;
oom:
        show_error(stderr, ctl->json, 0, "cannot print the result: %s", strerror(ENOMEM));
        return CTL_EXIT_FAILED;
}

int check_policy(const struct ctl *ctl, const char *path)
{
        struct policy_errors errs = { 0 };
        int e = load(path, &errs), status = CTL_EXIT_OK;

        if (e < 0) {
                status = CTL_EXIT_FAILED;
                if (ctl->json) {
                        json_t *j = json_pack("{s:{s:i, s:s, s:o}}", "error", "code", GADGET_EINVAL, "message",
                                              "invalid policy", "errors",
                                              show_json_strv(errs.msgs, errs.n));
                        show_json(stderr, j);
                } else {
                        for (size_t j = 0; j < errs.n; j++)
                                show_line(stderr, errs.msgs[j]);
                }
        }
        policy_errors_clear(&errs);
        return status;
}
