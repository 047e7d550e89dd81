/* schedule: the Schedule= key of [Gadget], "METHOD CALENDAR": gadgetd calls
 * METHOD of the gadget (caller "schedule") whenever the calendar event
 * (policy/calendar.h, systemd.time(7)) elapses. */
#include "keys.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calendar.h"
#include "contract.h"

/* Splits value into its method (the first word) and calendar (the rest,
 * blanks around it removed), stored as the next of p->schedules. Why the
 * bounds are safe: at most POLICY_SCHEDULES_MAX of them, each a parsed
 * calendar of bounded size (CALENDAR_TEXT_MAX, CALENDAR_ITEMS_MAX), so a
 * policy cannot make gadgetd hold or search more than that. */
int policy_set_schedule(struct policy_ctx *c, void *obj, const char *key, const char *value)
{
        struct policy *p = obj;
        struct policy_schedule *s, *v;
        struct calendar *cal = NULL;
        size_t mlen = strcspn(value, " \t");
        const char *text = value + mlen + strspn(value + mlen, " \t");
        size_t tlen = strlen(text);
        char err[256] = "", *method;
        int64_t next;
        int r;

        while (tlen > 0 && (text[tlen - 1] == ' ' || text[tlen - 1] == '\t'))
                tlen--;
        if (p->n_schedules == POLICY_SCHEDULES_MAX) {
                policy_err(c, "%s=: more than %d schedules in one gadget", key, POLICY_SCHEDULES_MAX);
                return -EINVAL;
        }
        if (tlen == 0) {
                policy_err(c, "%s=%s: expected METHOD CALENDAR, e.g. %s=cleanup daily", key, POLICY_Q(value), key);
                return -EINVAL;
        }
        method = strndup(value, mlen);
        if (!method)
                return -ENOMEM;
        if (!gadget_identifier_ok(method)) {
                policy_err(c, "%s=: %s is not a method name (letters, digits and _)", key, POLICY_Q(method));
                free(method);
                return -EINVAL;
        }
        char *calendar = strndup(text, tlen);
        if (!calendar) {
                free(method);
                return -ENOMEM;
        }
        r = calendar_parse(calendar, &cal, err, sizeof(err));
        if (r < 0) {
                if (r == -EINVAL)
                        policy_err(c, "%s=: calendar event %s: %s (see systemd.time(7))", key, POLICY_Q(calendar),
                                   err);
                goto fail;
        }
        /* Loads (systemd takes it too), but is most likely a mistake. The
         * message shows no text of the file: warnings are not redacted. */
        if (calendar_next(cal, (int64_t)time(NULL), &next) == -ENOENT)
                policy_warn(c, "%s= never elapses: its calendar event has no time after now (a past date, or "
                            "one like February 30)", key);
        v = realloc(p->schedules, (p->n_schedules + 1) * sizeof(*v));
        if (!v) {
                r = -ENOMEM;
                goto fail;
        }
        p->schedules = v;
        s = &v[p->n_schedules++];
        *s = (struct policy_schedule){ .method = method, .calendar = calendar, .cal = cal, .line = c->line };
        return 0;
fail:
        calendar_free(cal);
        free(calendar);
        free(method);
        return r;
}

/* Admin methods are only the admin UI's to call (policy_admin_method):
 * a schedule naming one is refused, at its own line. */
void policy_schedules_check(struct policy_ctx *c)
{
        const struct policy *p = c->p;

        for (size_t i = 0; i < p->n_schedules; i++) {
                if (!policy_admin_method(p, p->schedules[i].method))
                        continue;
                c->line = p->schedules[i].line;
                policy_err(c, "Schedule=: %s is an admin method, which only the admin UI calls",
                           p->schedules[i].method);
        }
}

void policy_schedules_free(struct policy_schedule *s, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(s[i].method);
                free(s[i].calendar);
                calendar_free(s[i].cal);
        }
        free(s);
}
