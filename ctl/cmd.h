/* cmd: gadgetctl's command table, and the commands that talk to gadgetd:
 * the request each one sends and how its answer is shown. Each returns an
 * exit status. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control.pb-c.h"

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
        int64_t since_ms; /* logs --since, ms since the epoch (0: none) */
        bool all;       /* logs --all */
        bool cat;       /* logs -o cat */
        bool always;    /* approve --always */
        bool runtime;   /* load --runtime */
        bool no_block;  /* load, restart --no-block */
        bool trace;     /* call --trace */
        const char *traceparent; /* call --traceparent VALUE, or NULL */
        uint64_t delay_ms; /* top -d (0: not given) */
        bool frames;    /* trace --frames: NAME is a gadget's, even of 32 hex digits */
        const char *key;    /* bundle --key KEY */
        const char *output; /* bundle, keygen -o FILE */
        uint32_t percent;   /* deploy --percent P (0: not given) */
        uint32_t max_errors; /* deploy --max-errors PCT (0: not given) */
        uint64_t min_calls; /* deploy --min-calls N (0: not given) */
        bool with_state;    /* rollback --with-state */
};
/* getopt values of the long-only options (a command's opts name them 'R',
 * 'B', 'T', 'P', 'S', 'A', 'F', 'K', 'C', 'E', 'M', 'W'). */
enum { CMD_OPT_RUNTIME = 0x100, CMD_OPT_NO_BLOCK, CMD_OPT_TRACE, CMD_OPT_TRACEPARENT, CMD_OPT_SINCE, CMD_OPT_ALL,
       CMD_OPT_FRAMES, CMD_OPT_KEY, CMD_OPT_PERCENT, CMD_OPT_MAX_ERRORS, CMD_OPT_MIN_CALLS,
       CMD_OPT_WITH_STATE };

/* One command: its handler, how many positional arguments it takes, its
 * getopt option string and its help. gadgetctl --help and COMMAND --help
 * are made from it, and from those the bash completion and the fuzzers'
 * control seeds (their NAME, NODE, METHOD, FILE... words). */
struct command {
        const char *name;
        int (*run)(const struct ctl *ctl, const struct cmd_args *a);
        int min_pos, max_pos; /* max -1: any number */
        const char *opts;     /* getopt string after ':' (and '+' to stop at the first argument) */
        const char *synopsis; /* starting with NAME: main.c checks pos[0] is a gadget name */
        const char *summary;
        const char *help;     /* more lines for COMMAND --help, or "" */
};

/* Every command, in the order gadgetctl --help lists them (cmd.c). */
extern const struct command cmd_commands[];
extern const size_t cmd_n_commands;

/* Sends req and receives its one answer of kind want into *r (the
 * caller's: control__response__free_unpacked). The exit status. */
int cmd_ask(const struct ctl *ctl, Control__Request *req, Control__Response__RespCase want, Control__Response **r);
/* load FILE: validated here (its FILE:LINE errors printed), then loaded;
 * the answer printed. The exit status. */
int cmd_load_file(const struct ctl *ctl, const char *file, bool runtime, bool no_block);
/* A request of kind naming gadget name (stop, restart, unload ...), its
 * answer of kind want printed. The exit status. */
int cmd_name_request(const struct ctl *ctl, const char *name, Control__Request__ReqCase kind,
                     Control__Response__RespCase want, bool no_block);
/* dev DIR: the edit-build-run loop of one gadget (ctl/dev.c). */
int cmd_dev(const struct ctl *ctl, const struct cmd_args *a);

/* cmd_ask, with n_fds fds passed with req (SCM_RIGHTS). */
int cmd_ask_fds(const struct ctl *ctl, Control__Request *req, const int *fds, size_t n_fds,
                Control__Response__RespCase want, Control__Response **r);
/* Prints an answer as gadgetctl prints any (--json too); the exit status. */
int cmd_print_answer(const struct ctl *ctl, const Control__Response *r);
/* backup, restore, export (ctl/backup.c). */
int cmd_backup(const struct ctl *ctl, const struct cmd_args *a);
int cmd_restore(const struct ctl *ctl, const struct cmd_args *a);
int cmd_export(const struct ctl *ctl, const struct cmd_args *a);
/* top: repeated views of every gadget's counters (ctl/top.c). */
int cmd_top(const struct ctl *ctl, const struct cmd_args *a);

/* keygen and bundle: no daemon needed (ctl/bundle.c). */
int cmd_keygen(const struct ctl *ctl, const struct cmd_args *a);
int cmd_bundle(const struct ctl *ctl, const struct cmd_args *a);

/* selftest: runs the escape probe; no daemon needed (ctl/selftest.c). */
int cmd_selftest(const struct ctl *ctl, const struct cmd_args *a);
