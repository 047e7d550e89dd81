/* cmd: the gadgetctl commands that talk to gadgetd: the request each one
 * sends and how its answer is shown. Each returns an exit status. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Exit statuses, documented in `gadgetctl --help`. */
enum ctl_exit {
        CTL_EXIT_OK = 0,
        CTL_EXIT_FAILED = 1,    /* the operation failed */
        CTL_EXIT_USAGE = 2,     /* a bad command line */
        CTL_EXIT_NOTFOUND = 3,  /* no such gadget (GADGET_ENOTFOUND) */
        CTL_EXIT_NOCONNECT = 4, /* gadgetd not reachable, or permission denied */
};

/* What gadgetctl was asked to do. */
struct ctl {
        const char *socket; /* control socket path */
        bool json;          /* --json */
};

/* A command's arguments after option parsing. */
struct cmd_args {
        char **pos;     /* positional arguments */
        int n_pos;
        uint32_t lines; /* logs -n */
        bool lines_set;
        bool follow;    /* logs -f */
        bool always;    /* approve --always */
};

int cmd_load(const struct ctl *ctl, const struct cmd_args *a);
int cmd_stop(const struct ctl *ctl, const struct cmd_args *a);
int cmd_wake(const struct ctl *ctl, const struct cmd_args *a);
int cmd_restart(const struct ctl *ctl, const struct cmd_args *a);
int cmd_list(const struct ctl *ctl, const struct cmd_args *a);
int cmd_status(const struct ctl *ctl, const struct cmd_args *a);
int cmd_describe(const struct ctl *ctl, const struct cmd_args *a);
int cmd_call(const struct ctl *ctl, const struct cmd_args *a);
int cmd_logs(const struct ctl *ctl, const struct cmd_args *a);
int cmd_audit(const struct ctl *ctl, const struct cmd_args *a);
int cmd_reload(const struct ctl *ctl, const struct cmd_args *a);
/* Store=postgresql: the nodes sharing the store; a gadget handed over. */
int cmd_nodes(const struct ctl *ctl, const struct cmd_args *a);
int cmd_move(const struct ctl *ctl, const struct cmd_args *a);
int cmd_approvals(const struct ctl *ctl, const struct cmd_args *a);
int cmd_approve(const struct ctl *ctl, const struct cmd_args *a);
int cmd_deny(const struct ctl *ctl, const struct cmd_args *a);
/* selftest: runs the escape probe; no daemon needed (ctl/selftest.c). */
int cmd_selftest(const struct ctl *ctl, const struct cmd_args *a);
