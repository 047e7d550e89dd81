/* approvals: calls that wait for a person's decision (approvals.h). */
#include "approvals.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <event2/event.h>

#include "audit.h"
#include "contract.h"
#include "json.h"
#include "log.h"
#include "monotime.h"
#include "timer.h"

struct approval {
        struct approvals *a;
        uint64_t id;
        char *caller, *via, *target, *method, *gadget, *args;
        char *party;                    /* whose slots it takes */
        uint64_t asked_ms, timeout_ms;
        approval_fn *decided;
        void *arg;
        struct event *timer;
        TAILQ_ENTRY(approval) link;
};

/* "Approve always": calls of method of target by caller through via. */
struct standing {
        char *caller, *via, *target, *method;
};

struct approvals {
        struct event_base *base;
        struct audit *audit;
        const char *no_approver;        /* no one decides here: deny at once */
        TAILQ_HEAD(, approval) waiting; /* oldest first */
        size_t n;
        uint64_t next_id;
        struct standing always[APPROVALS_ALWAYS_MAX];
        size_t n_always;
};

int approvals_new(struct event_base *base, struct audit *audit, const char *no_approver, struct approvals **out)
{
        struct approvals *a = calloc(1, sizeof *a);
        if (!a)
                return -ENOMEM;
        a->base = base;
        a->audit = audit;
        a->no_approver = no_approver;
        TAILQ_INIT(&a->waiting);
        a->next_id = 1;
        *out = a;
        return 0;
}

static void unlink_approval(struct approval *ap)
{
        struct approvals *a = ap->a;
        TAILQ_REMOVE(&a->waiting, ap, link);
        a->n--;
}

static void approval_free(struct approval *ap)
{
        if (ap->timer)
                event_free(ap->timer);
        free(ap->caller);
        free(ap->party);
        free(ap->via);
        free(ap->target);
        free(ap->method);
        free(ap->gadget);
        free(ap->args);
        free(ap);
}

static bool standing_matches(const struct standing *s, const struct approval_req *q)
{
        return strcmp(s->caller, q->caller) == 0 && strcmp(s->via, q->via) == 0 &&
               strcmp(s->target, q->target) == 0 && strcmp(s->method, q->method) == 0;
}

/* The decision, in the audit of the gadget asked for (and of the target
 * too, when it is another gadget) and in gadgetd's log. */
static void record(struct approval *ap, bool approved, const char *how)
{
        char detail[700];
        snprintf(detail, sizeof detail, "approval %llu: %s; %s called %s %s through %s",
                 (unsigned long long)ap->id, how, ap->caller, ap->target, ap->method, ap->via);
        struct audit_record rec = { .gadget = ap->gadget, .binding = "approval", .op = ap->method,
                                    .outcome = approved ? AUDIT_OK : AUDIT_DENIED, .detail = detail };
        audit_write(ap->a->audit, &rec);
        if (strcmp(ap->target, ap->gadget) != 0 && gadget_name_ok(ap->target)) {
                rec.gadget = ap->target;
                audit_write(ap->a->audit, &rec);
        }
        log_msg(L_INFO, ap->gadget, "%s", detail);
}

/* Ends ap with the outcome: unlinked, recorded, told, freed. */
static void finish(struct approval *ap, bool approved, const char *how, const char *why)
{
        unlink_approval(ap);
        record(ap, approved, how);
        approval_fn *fn = ap->decided;
        void *arg = ap->arg;
        approval_free(ap);
        fn(arg, approved, why);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
        struct approval *ap = arg;
        char why[120];
        (void)fd;
        (void)what;
        snprintf(why, sizeof why, "denied: no one approved the call within ApproveTimeout (%llu s)",
                 (unsigned long long)(ap->timeout_ms / 1000));
        finish(ap, false, "denied by its timeout (ApproveTimeout=)", why);
}

/* Whether the UTF-8 sequence at p is a bidirectional control (U+061C,
 * U+200E-200F, U+202A-202E, U+2066-2069), which would make the text shown
 * read otherwise than it is; its code point in *cp. */
static bool bidi_control(const unsigned char *p, unsigned *cp)
{
        if (p[0] == 0xd8 && p[1] == 0x9c) {
                *cp = 0x061c;
                return true;
        }
        if (p[0] != 0xe2 || !p[1] || !p[2])
                return false;
        *cp = (unsigned)(p[0] & 0x0f) << 12 | (unsigned)(p[1] & 0x3f) << 6 | (p[2] & 0x3f);
        return (*cp >= 0x200e && *cp <= 0x200f) || (*cp >= 0x202a && *cp <= 0x202e) ||
               (*cp >= 0x2066 && *cp <= 0x2069);
}

/* The arguments as JSON, every bidi control written as its \uXXXX escape
 * (they are only ever inside JSON strings, so the text stays the same
 * JSON); NULL with *too_long if longer than APPROVAL_ARGS_MAX. */
static char *args_text(const Gadget__Value *args, size_t *too_long)
{
        char *j = args ? json_from_value(args) : strdup("null");
        size_t n = j ? strlen(j) : 0, extra = 0, cut = 0;
        unsigned cp;
        *too_long = 0;
        for (size_t i = 0; j && j[i]; i++)
                if (bidi_control((const unsigned char *)j + i, &cp)) {
                        extra += 6 - (cp == 0x061c ? 2 : 3);
                        cut++;
                }
        if (j && n + extra > APPROVAL_ARGS_MAX) {
                *too_long = n + extra;
                free(j);
                return NULL;
        }
        if (!j || !cut)
                return j;
        char *out = malloc(n + extra + 1), *o = out;
        for (size_t i = 0; out && j[i];) {
                if (bidi_control((const unsigned char *)j + i, &cp)) {
                        o += sprintf(o, "\\u%04x", cp);
                        i += cp == 0x061c ? 2 : 3;
                } else {
                        *o++ = j[i++];
                }
        }
        if (out)
                *o = '\0';
        free(j);
        return out;
}

int approvals_ask(struct approvals *a, const struct approval_req *q, struct approval **out, char *msg, size_t len)
{
        for (size_t i = 0; i < a->n_always; i++)
                if (standing_matches(&a->always[i], q))
                        return 1;
        if (a->no_approver) {
                snprintf(msg, len, "%s", a->no_approver);
                return GADGET_EDENIED;
        }
        size_t mine = 0;
        const char *party = q->party ? q->party : q->caller;
        const struct approval *w;
        TAILQ_FOREACH(w, &a->waiting, link)
                mine += strcmp(w->party, party) == 0;
        if (mine >= APPROVALS_PER_CALLER) {
                snprintf(msg, len, "busy: %zu calls of %s wait for approval already (at most %d)", mine, party,
                         APPROVALS_PER_CALLER);
                return GADGET_EBUSY;
        }
        if (a->n >= APPROVALS_MAX) {
                snprintf(msg, len, "too many calls are waiting for approval (%d); try again later", APPROVALS_MAX);
                return GADGET_EBUSY;
        }
        size_t too_long;
        char *args = args_text(q->args, &too_long);
        if (!args && too_long) {
                snprintf(msg, len, "the call's arguments are %zu bytes as JSON, more than the %d a person is shown to "
                         "approve it (Approve=): send less, or leave the method out of Approve=", too_long,
                         APPROVAL_ARGS_MAX);
                return GADGET_ELIMIT;
        }
        struct approval *ap = args ? calloc(1, sizeof *ap) : NULL;
        if (!ap) {
                free(args);
                goto oom;
        }
        *ap = (struct approval){ .a = a, .caller = strdup(q->caller), .party = strdup(party), .via = strdup(q->via),
                                 .target = strdup(q->target), .method = strdup(q->method),
                                 .gadget = strdup(q->gadget), .args = args,
                                 .asked_ms = monotime_ms(), .timeout_ms = q->timeout_ms,
                                 .decided = q->decided, .arg = q->arg };
        ap->timer = evtimer_new(a->base, on_timeout, ap);
        if (!ap->caller || !ap->party || !ap->via || !ap->target || !ap->method || !ap->gadget || !ap->args || !ap->timer) {
                approval_free(ap);
                goto oom;
        }
        timer_arm_ms(ap->timer, q->timeout_ms);
        ap->id = a->next_id++;
        TAILQ_INSERT_TAIL(&a->waiting, ap, link);
        a->n++;
        log_msg(L_INFO, ap->gadget, "approval %llu waits: %s calls %s %s through %s (gadgetctl approve %llu)",
                (unsigned long long)ap->id, ap->caller, ap->target, ap->method, ap->via,
                (unsigned long long)ap->id);
        if (out)
                *out = ap;
        return 0;
oom:
        snprintf(msg, len, "out of memory");
        return GADGET_EINTERNAL;
}

void approval_cancel(struct approval *ap)
{
        if (!ap)
                return;
        unlink_approval(ap);
        log_msg(L_INFO, ap->gadget, "approval %llu: no longer asked (the caller is gone)",
                (unsigned long long)ap->id);
        approval_fn *fn = ap->decided;
        void *arg = ap->arg;
        approval_free(ap);
        fn(arg, false, "the caller is gone");
}

static void keep_standing(struct approvals *a, const struct approval *ap)
{
        if (a->n_always == APPROVALS_ALWAYS_MAX)
                return;
        struct standing *s = &a->always[a->n_always];
        *s = (struct standing){ strdup(ap->caller), strdup(ap->via), strdup(ap->target), strdup(ap->method) };
        if (s->caller && s->via && s->target && s->method) {
                a->n_always++;
                return;
        }
        free(s->caller);
        free(s->via);
        free(s->target);
        free(s->method);
}

int approvals_decide(struct approvals *a, uint64_t id, bool approve, bool always, const char *who, bool own_ok,
                     char *msg, size_t len)
{
        struct approval *ap;
        TAILQ_FOREACH(ap, &a->waiting, link)
                if (ap->id == id)
                        break;
        if (!ap) {
                snprintf(msg, len, "no call waits for approval %llu (decided, timed out, or its caller left)",
                         (unsigned long long)id);
                return GADGET_ENOTFOUND;
        }
        /* Why this is safe: the one who asked is not the person asked; a
         * member of the control group cannot approve its own call. */
        if (approve && !own_ok && strcmp(who, ap->caller) == 0) {
                snprintf(msg, len, "%s asked for call %llu itself: another person approves it", who,
                         (unsigned long long)id);
                return GADGET_EDENIED;
        }
        char how[200], why[240];
        bool keep = approve && always && a->n_always < APPROVALS_ALWAYS_MAX;
        snprintf(how, sizeof how, "%s by %s%s", approve ? "approved" : "denied", who,
                 keep ? ", always for this caller" : "");
        snprintf(why, sizeof why, "denied by %s", who);
        if (keep)
                keep_standing(a, ap);
        finish(ap, approve, how, why);
        if (approve && always && !keep) {
                snprintf(msg, len, "approved once: gadgetd keeps at most %d standing approvals",
                         APPROVALS_ALWAYS_MAX);
                return 0;
        }
        snprintf(msg, len, "%s", how);
        return 0;
}

size_t approvals_list(const struct approvals *a, struct approval_info *out, size_t max)
{
        uint64_t now = monotime_ms();
        size_t i = 0;
        const struct approval *ap;
        TAILQ_FOREACH(ap, &a->waiting, link) {
                if (i == max)
                        break;
                out[i++] = (struct approval_info){ .id = ap->id, .caller = ap->caller, .via = ap->via,
                                                   .target = ap->target, .method = ap->method, .args = ap->args,
                                                   .age_ms = now - ap->asked_ms, .timeout_ms = ap->timeout_ms };
        }
        return a->n;
}

void approvals_free(struct approvals *a)
{
        if (!a)
                return;
        struct approval *ap;
        while ((ap = TAILQ_FIRST(&a->waiting)))
                finish(ap, false, "denied: gadgetd stopped", "denied: gadgetd is stopping");
        for (size_t i = 0; i < a->n_always; i++) {
                free(a->always[i].caller);
                free(a->always[i].via);
                free(a->always[i].target);
                free(a->always[i].method);
        }
        free(a);
}
