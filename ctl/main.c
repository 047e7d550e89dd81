/* gadgetctl: the command-line client of gadgetd's control socket. This file
 * parses the command line and dispatches from the command table. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cmd.h"
#include "show.h"

#define DEFAULT_SOCKET "/run/gadgetd/control.sock"

/* One command: its handler, how many positional arguments it takes, its
 * getopt option string and its help. */
struct command {
        const char *name;
        int (*run)(const struct ctl *ctl, const struct cmd_args *a);
        int min_pos, max_pos; /* max -1: any number */
        const char *opts;     /* getopt string after ':' (and '+' to stop at the first argument) */
        const char *synopsis;
        const char *summary;
        const char *help;     /* more lines for COMMAND --help, or "" */
};

static const struct command commands[] = {
        { "load", cmd_load, 1, 1, "h", "FILE",
          "validate a policy file, then load and start it",
          "Every FILE:LINE error is printed and nothing is sent if the file is invalid.\n"
          "gadgetd is given the file's absolute path and reads it itself.\n" },
        { "stop", cmd_stop, 1, 1, "h", "NAME", "stop a gadget", "" },
        { "restart", cmd_restart, 1, 1, "h", "NAME", "stop a gadget and start it again", "" },
        { "wake", cmd_wake, 1, 1, "h", "NAME", "start an idle gadget without calling it",
          "Answers once the gadget is ready. An idle gadget (Start=on-demand, IdleStop=)\n"
          "also starts at its first call; wake spares that call the start's wait.\n"
          "A gadget that is stopped or failed is not idle: use restart.\n"
          "On a shared store, a gadget another node holds is woken on that node.\n" },
        { "list", cmd_list, 0, 0, "h", "",
          "list the gadgets with their state and usage",
          "When gadgetd shares its store with other nodes (Store=postgresql), a NODE\n"
          "column names the node that runs each gadget (\"-\": none yet); on the others\n"
          "its state is remote.\n"
          "With --json: an array of objects with the fields name, state, cause, pid,\n"
          "uptime_ms, restarts, calls, memory_bytes, tasks, cpu_usec, start_us, start\n"
          "and active_ago_ms (0: unknown; start_us: from the start of this run to the\n"
          "gadget's hello; start: Start=; active_ago_ms: since its last call or binding\n"
          "call, 0 if none yet) and in_flight (calls taken and not answered yet);\n"
          "an idle gadget's state is idle,\n"
          "and node and epoch (its lease's) when a node runs it.\n" },
        { "status", cmd_status, 1, 1, "h", "NAME",
          "show one gadget in detail, with its last log lines",
          "With --json: one object with the fields of `list --json` and policy_path,\n"
          "limits_mode, limits, bindings ([{name, type, ops, credential}]: ops are the\n"
          "operations' signatures, credential an http binding's Credential= file, if it\n"
          "has one), methods, signatures (per method, \"\" if untyped) and log_tail.\n"
          "With a shared store, a Node line names the node that runs it and its lease's\n"
          "epoch (\"none yet\" if no node does).\n" },
        { "describe", cmd_describe, 1, 1, "h", "NAME",
          "show a gadget's methods with their signatures",
          "One signature per line, \"NAME (untyped)\" for a method declared without one.\n"
          "With --json: {\"name\", \"methods\"}, each method {\"name\", \"signature\", \"params\",\n"
          "\"result\"} with params and result as JSON Schema (2020-12) of the JSON that\n"
          "`gadgetctl call` and the gateway take and give, or {\"name\", \"untyped\": true}.\n" },
        { "call", cmd_call, 2, 3, "+h", "NAME METHOD [JSON]",
          "call a gadget's method and print its result as JSON",
          "JSON is the argument value (default null). Bytes are written {\"$bytes\": \"<base64>\"}.\n"
          "The method's errors are printed on stderr (exit status 1; 3 for not found).\n" },
        { "logs", cmd_logs, 1, 1, "hn:f", "NAME [-n N] [-f]",
          "print the log lines gadgetd keeps for a gadget",
          "  -n, --lines N   only the last N lines (0: none, only new ones with -f; default all, 10 with -f)\n"
          "  -f, --follow    keep printing new lines until interrupted\n"
          "With --json: one {\"line\": \"...\"} object per line.\n" },
        { "audit", cmd_audit, 1, 1, "hn:f", "NAME [-n N] [-f]",
          "print a gadget's audit records (its binding calls and limit hits)",
          "Each record is a JSON object: time, gadget, binding, op, outcome (ok, denied,\n"
          "error), bytes, duration_us and, for failures, detail.\n"
          "  -n, --lines N   only the last N records (0: none, only new ones with -f; default all, 10 with -f)\n"
          "  -f, --follow    keep printing new records until interrupted\n" },
        { "selftest", cmd_selftest, 0, 1, "h", "[POLICY]",
          "run the escape probe in a sandbox on this host and show every attempt",
          "Runs `gadgetd run` (as root) with the escape probe under the default policy, or\n"
          "under POLICY with the probe as its program, and prints each way out it tried\n"
          "with its verdict. Exit status 1 if anything escaped. No daemon is needed.\n"
          "GADGETD and GADGETD_ESCAPE_PROBE override the paths of gadgetd and the probe.\n"
          "With --json: [{\"attempt\", \"verdict\", \"detail\"}].\n" },
        { "check", check_run, 1, -1, "h", "FILE...",
          "validate policy files here, without gadgetd",
          "Prints \"FILE: ok\" or every FILE:LINE error; exit status 1 if any file is invalid.\n"
          "With --json: [{\"file\": ..., \"ok\": true|false, \"errors\": [...]}].\n" },
        { "approvals", cmd_approvals, 0, 0, "h", "",
          "list the calls waiting for a person's approval (Approve=)",
          "Each: its ID, who calls (a gadget, gadgetctl, the workshop) and through what,\n"
          "the gadget and method called (or an http binding's URL and method), its\n"
          "arguments, how long it has waited and when it will be denied (ApproveTimeout=).\n"
          "With --json: {\"approvals\": [{\"id\", \"caller\", \"via\", \"target\", \"method\",\n"
          "\"args\", \"age_ms\", \"timeout_ms\"}], \"total\"}.\n" },
        { "approve", cmd_approve, 1, 1, "ha", "ID [--always]",
          "let a waiting call go on",
          "  -a, --always    also approve this caller's calls of this method from now on,\n"
          "                  until gadgetd restarts\n"
          "The decision is an audit record of the gadget that asked, naming your user.\n" },
        { "deny", cmd_deny, 1, 1, "h", "ID",
          "refuse a waiting call: its caller gets a \"denied\" error",
          "The decision is an audit record of the gadget that asked, naming your user.\n" },
        { "nodes", cmd_nodes, 0, 0, "h", "",
          "list the gadgetd nodes that share the store, when each was last seen",
          "Each node writes to the store every second; one not seen for more than\n"
          "10 s is shown as down. \"(this node)\" marks the gadgetd that answered.\n"
          "Fails (exit status 1) if gadgetd shares no store (Store=postgresql).\n"
          "With --json: {\"nodes\": [{\"name\", \"peer\", \"last_seen_ms\", \"self\", \"up\"}]}.\n" },
        { "move", cmd_move, 2, 2, "h", "NAME NODE",
          "hand a gadget over to another node of the store",
          "The node running NAME stops it gracefully (as gadgetctl stop), gives its\n"
          "lease back, and only NODE may take it for the next 10 s; NODE starts it with\n"
          "its kv state as it was. gadgetctl waits until NODE has taken it (exit status 0)\n"
          "or fails: NODE unknown or down, not in NAME's Nodes=, already running it, or\n"
          "not taking it in time (then any node may). Calls to NAME during the hand-over\n"
          "may fail (it is stopping, or no node runs it yet) or time out: retry them\n"
          "once NODE runs it.\n" },
        { "reload", cmd_reload, 0, 0, "h", "",
          "re-read the policy directory",
          "New files are loaded, removed ones stopped, changed ones restarted.\n"
          "Policy errors are printed on stderr and give exit status 1.\n"
          "With --json: {\"loaded\", \"stopped\", \"restarted\", \"unchanged\", \"errors\"} arrays.\n" },
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

/* `gadgetctl --help`: commands, options, exit statuses. */
static void usage(FILE *f)
{
        fprintf(f, "usage: gadgetctl [--socket PATH] [--json] COMMAND [ARGS...]\n"
                   "Controls gadgetd, the gadget supervisor, through its control socket.\n\n"
                   "Commands:\n");
        for (size_t i = 0; i < N_COMMANDS; i++) {
                char head[64];
                snprintf(head, sizeof(head), "%s %s", commands[i].name, commands[i].synopsis);
                fprintf(f, "  %-26s %s\n", head, commands[i].summary);
        }
        fprintf(f, "\nOptions:\n"
                   "  -s, --socket PATH  the control socket (default: $GADGETD_SOCKET, else\n"
                   "                     " DEFAULT_SOCKET ")\n"
                   "  -j, --json         JSON output for scripts; errors are\n"
                   "                     {\"error\": {\"code\": N, \"message\": \"...\"}} on stderr\n"
                   "                     (code: a GADGET_E* number, 0 for errors found here)\n"
                   "  -h, --help         this help; gadgetctl COMMAND --help for one command\n"
                   "      --version      print the version\n\n"
                   "Exit status:\n"
                   "  0  success\n"
                   "  1  the operation failed (a call's error, a failed load, an invalid policy)\n"
                   "  2  usage error: a bad command line, name or JSON argument\n"
                   "  3  not found: no gadget of that name (or the method reported not found)\n"
                   "  4  cannot connect to gadgetd, or permission denied on its socket\n");
}

/* `gadgetctl COMMAND --help`. */
static void command_usage(const struct command *c, FILE *f)
{
        fprintf(f, "usage: gadgetctl [--socket PATH] [--json] %s%s%s\n%c%s.\n", c->name,
                *c->synopsis ? " " : "", c->synopsis, toupper((unsigned char)c->summary[0]),
                c->summary + 1);
        if (*c->help)
                fprintf(f, "\n%s", c->help);
        fprintf(f, "\nSee gadgetctl --help for the exit statuses.\n");
}

/* The command called name, or NULL. */
static const struct command *command_find(const char *name)
{
        for (size_t i = 0; i < N_COMMANDS; i++)
                if (strcmp(commands[i].name, name) == 0)
                        return &commands[i];
        return NULL;
}

/* A usage error: the message, a hint, exit status 2. */
static int usage_error(const struct ctl *ctl, const char *cmd, const char *what, const char *arg)
{
        show_error(stderr, ctl->json, 0, "%s%s%s%s%s%s", cmd ? cmd : "", cmd ? ": " : "", what,
                   arg ? " \"" : "", arg ? arg : "", arg ? "\"" : "");
        if (!ctl->json)
                fprintf(stderr, "Try 'gadgetctl %s%s--help'.\n", cmd ? cmd : "", cmd ? " " : "");
        return CTL_EXIT_USAGE;
}

/* The option getopt just refused: "-x" or the long option as written. */
static const char *bad_option(char **argv, char *buf, size_t len)
{
        if (optopt) {
                snprintf(buf, len, "-%c", optopt);
                return buf;
        }
        return argv[optind - 1];
}

/* -n N: 0 .. UINT32_MAX. */
static int parse_lines(const char *s, uint32_t *out)
{
        char *end;
        unsigned long long v;

        if (*s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno || *end || v > UINT32_MAX)
                return -EINVAL;
        *out = (uint32_t)v;
        return 0;
}

/* Parses one command's options and arguments, then runs it. --json may
 * follow the command too (gadgetctl list --json), as scripts write it. */
static int command_run(struct ctl *ctl, const struct command *c, int argc, char **argv)
{
        static const struct option longopts[] = {
                { "help", no_argument, NULL, 'h' },
                { "json", no_argument, NULL, 'j' },
                { "lines", required_argument, NULL, 'n' },
                { "follow", no_argument, NULL, 'f' },
                { "always", no_argument, NULL, 'a' },
                { NULL, 0, NULL, 0 },
        };
        struct cmd_args a = { 0 };
        char optstring[16], opt[4];
        int o;

        snprintf(optstring, sizeof(optstring), "%s:j%s", c->opts[0] == '+' ? "+" : "",
                 c->opts + (c->opts[0] == '+'));
        opterr = 0;
        optind = 0; /* glibc: start over on the command's own argv */
        while ((o = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
                /* The long options are shared: refuse those this command lacks. */
                if ((o == 'n' || o == 'f' || o == 'a') && !strchr(c->opts, o))
                        return usage_error(ctl, c->name, "unknown option",
                                           o == 'n' ? "--lines" : o == 'f' ? "--follow" : "--always");
                switch (o) {
                case 'h':
                        command_usage(c, stdout);
                        return CTL_EXIT_OK;
                case 'j':
                        ctl->json = true;
                        break;
                case 'n':
                        if (parse_lines(optarg, &a.lines) < 0)
                                return usage_error(ctl, c->name, "-n needs a number of lines, not", optarg);
                        a.lines_set = true;
                        break;
                case 'a':
                        a.always = true;
                        break;
                case 'f':
                        a.follow = true;
                        break;
                case ':':
                        return usage_error(ctl, c->name, "missing value of option",
                                           bad_option(argv, opt, sizeof(opt)));
                default:
                        return usage_error(ctl, c->name, "unknown option",
                                           bad_option(argv, opt, sizeof(opt)));
                }
        }
        a.pos = argv + optind;
        a.n_pos = argc - optind;
        if (a.n_pos < c->min_pos)
                return usage_error(ctl, c->name, "missing arguments, expected", c->synopsis);
        if (c->max_pos >= 0 && a.n_pos > c->max_pos)
                return usage_error(ctl, c->name, "unexpected argument", a.pos[c->max_pos]);
        return c->run(ctl, &a);
}

int main(int argc, char **argv)
{
        static const struct option longopts[] = {
                { "socket", required_argument, NULL, 's' },
                { "json", no_argument, NULL, 'j' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                { NULL, 0, NULL, 0 },
        };
        struct ctl ctl = { .socket = getenv("GADGETD_SOCKET") };
        const struct command *c;
        char opt[4];
        int o;

        if (!ctl.socket || !*ctl.socket)
                ctl.socket = DEFAULT_SOCKET;
        opterr = 0;
        while ((o = getopt_long(argc, argv, "+:s:jh", longopts, NULL)) != -1) {
                switch (o) {
                case 's':
                        ctl.socket = optarg;
                        break;
                case 'j':
                        ctl.json = true;
                        break;
                case 'h':
                        usage(stdout);
                        return CTL_EXIT_OK;
                case 'V':
                        printf("gadgetctl %s\n", GADGETCTL_VERSION);
                        return CTL_EXIT_OK;
                case ':':
                        return usage_error(&ctl, NULL, "missing value of option",
                                           bad_option(argv, opt, sizeof(opt)));
                default:
                        return usage_error(&ctl, NULL, "unknown option",
                                           bad_option(argv, opt, sizeof(opt)));
                }
        }
        if (optind >= argc) {
                usage(stderr);
                return CTL_EXIT_USAGE;
        }
        c = command_find(argv[optind]);
        if (!c)
                return usage_error(&ctl, NULL, "unknown command", argv[optind]);
        return command_run(&ctl, c, argc - optind, argv + optind);
}
