/* gadgetctl: the command-line client of gadgetd's control socket. This file
 * parses the command line and dispatches from the command table (cmd.c). */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "contract.h"
#include "output.h"
#include "show.h"

#define DEFAULT_SOCKET "/run/gadgetd/control.sock"

/* `gadgetctl --help`: commands, options, exit statuses. */
static void usage(FILE *f)
{
        fprintf(f, "usage: gadgetctl [--socket PATH] [--json] COMMAND [ARGS...]\n"
                   "Controls gadgetd, the gadget supervisor, through its control socket.\n\n"
                   "Commands:\n");
        for (size_t i = 0; i < cmd_n_commands; i++) {
                char head[64];
                snprintf(head, sizeof(head), "%s %s", cmd_commands[i].name, cmd_commands[i].synopsis);
                fprintf(f, "  %-26s %s\n", head, cmd_commands[i].summary);
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
                   "  4  cannot connect to gadgetd, or permission denied on its socket\n"
                   "is-active and is-failed exit as systemctl's: 0 in that state, 3 (is-active)\n"
                   "or 1 (is-failed) in another, 4 for a gadget gadgetd does not know.\n");
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
        for (size_t i = 0; i < cmd_n_commands; i++)
                if (strcmp(cmd_commands[i].name, name) == 0)
                        return &cmd_commands[i];
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

/* -d SECS: 0.1 .. 3600 seconds, in ms. */
static int parse_delay(const char *s, uint64_t *out)
{
        char *end;
        if ((*s < '0' || *s > '9') && *s != '.')
                return -EINVAL;
        errno = 0;
        double v = strtod(s, &end);
        if (errno || *end || !(v >= 0.1 && v <= 3600))
                return -EINVAL;
        *out = (uint64_t)(v * 1000 + 0.5);
        return 0;
}

/* Parses one command's options and arguments, then runs it. --json may
 * follow the command too (gadgetctl list --json), as scripts write it. */
static int command_run(struct ctl *ctl, const struct command *c, int argc, char **argv)
{
        /* The long-only options, shared: the letter a command's opts name
         * each by. */
        static const struct {
                int opt;
                char letter;
                const char *name;
        } long_only[] = {
                { CMD_OPT_RUNTIME, 'R', "--runtime" }, { CMD_OPT_NO_BLOCK, 'B', "--no-block" },
                { CMD_OPT_TRACE, 'T', "--trace" },     { CMD_OPT_TRACEPARENT, 'P', "--traceparent" },
                { CMD_OPT_SINCE, 'S', "--since" },     { CMD_OPT_ALL, 'A', "--all" },
                { CMD_OPT_FRAMES, 'F', "--frames" },   { CMD_OPT_KEY, 'K', "--key" },
                { CMD_OPT_PERCENT, 'C', "--percent" }, { CMD_OPT_MAX_ERRORS, 'E', "--max-errors" },
                { CMD_OPT_MIN_CALLS, 'M', "--min-calls" }, { CMD_OPT_WITH_STATE, 'W', "--with-state" },
        };
        static const struct option longopts[] = {
                { "help", no_argument, NULL, 'h' },
                { "json", no_argument, NULL, 'j' },
                { "lines", required_argument, NULL, 'n' },
                { "follow", no_argument, NULL, 'f' },
                { "always", no_argument, NULL, 'a' },
                { "output", required_argument, NULL, 'o' },
                { "delay", required_argument, NULL, 'd' },
                /* Long only: in a command's opts by long_only's letters,
                 * never in its getopt string. */
                { "runtime", no_argument, NULL, CMD_OPT_RUNTIME },
                { "no-block", no_argument, NULL, CMD_OPT_NO_BLOCK },
                { "trace", no_argument, NULL, CMD_OPT_TRACE },
                { "traceparent", required_argument, NULL, CMD_OPT_TRACEPARENT },
                { "since", required_argument, NULL, CMD_OPT_SINCE },
                { "all", no_argument, NULL, CMD_OPT_ALL },
                { "frames", no_argument, NULL, CMD_OPT_FRAMES },
                { "key", required_argument, NULL, CMD_OPT_KEY },
                { "percent", required_argument, NULL, CMD_OPT_PERCENT },
                { "max-errors", required_argument, NULL, CMD_OPT_MAX_ERRORS },
                { "min-calls", required_argument, NULL, CMD_OPT_MIN_CALLS },
                { "with-state", no_argument, NULL, CMD_OPT_WITH_STATE },
                { NULL, 0, NULL, 0 },
        };
        struct cmd_args a = { 0 };
        char optstring[16], opt[4];
        int o;
        size_t k = 0;

        if (c->opts[0] == '+')
                optstring[k++] = '+';
        optstring[k++] = ':';
        optstring[k++] = 'j';
        for (const char *s = c->opts + (c->opts[0] == '+'); *s && k + 1 < sizeof(optstring); s++)
                if (!strchr("RBTPSAFKCEMW", *s))
                        optstring[k++] = *s;
        optstring[k] = '\0';
        opterr = 0;
        optind = 0; /* glibc: start over on the command's own argv */
        while ((o = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
                /* The long options are shared: refuse those this command lacks. */
                if ((o == 'n' || o == 'f' || o == 'a' || o == 'o' || o == 'd') && !strchr(c->opts, o))
                        return usage_error(ctl, c->name, "unknown option",
                                           o == 'n' ? "--lines" : o == 'f' ? "--follow" : o == 'a' ? "--always"
                                           : o == 'o' ? "--output" : "--delay");
                for (size_t i = 0; i < sizeof long_only / sizeof long_only[0]; i++)
                        if (o == long_only[i].opt && !strchr(c->opts, long_only[i].letter))
                                return usage_error(ctl, c->name, "unknown option", long_only[i].name);
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
                case 'd':
                        if (parse_delay(optarg, &a.delay_ms) < 0)
                                return usage_error(ctl, c->name, "-d needs seconds from 0.1 to 3600, not", optarg);
                        break;
                case 'f':
                        a.follow = true;
                        break;
                case CMD_OPT_RUNTIME:
                        a.runtime = true;
                        break;
                case CMD_OPT_NO_BLOCK:
                        a.no_block = true;
                        break;
                case CMD_OPT_TRACE:
                        a.trace = true;
                        break;
                case CMD_OPT_TRACEPARENT:
                        a.traceparent = optarg;
                        break;
                case 'o':
                        /* bundle and keygen: the file written; logs: a format. */
                        if (strcmp(c->name, "logs") != 0) {
                                a.output = optarg;
                                break;
                        }
                        if (strcmp(optarg, "cat") != 0 && strcmp(optarg, "short-precise") != 0)
                                return usage_error(ctl, c->name, "-o takes short-precise or cat, not", optarg);
                        a.cat = strcmp(optarg, "cat") == 0;
                        break;
                case CMD_OPT_SINCE: {
                        struct timespec now;
                        clock_gettime(CLOCK_REALTIME, &now);
                        int64_t now_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
                        if (output_parse_since(optarg, now_ms, &a.since_ms) < 0)
                                return usage_error(ctl, c->name, "--since needs a duration ago (5min) or a time "
                                                   "(YYYY-MM-DD HH:MM:SS), not", optarg);
                        break;
                }
                case CMD_OPT_ALL:
                        a.all = true;
                        break;
                case CMD_OPT_FRAMES:
                        a.frames = true;
                        break;
                case CMD_OPT_KEY:
                        a.key = optarg;
                        break;
                case CMD_OPT_WITH_STATE:
                        a.with_state = true;
                        break;
                case CMD_OPT_PERCENT:
                case CMD_OPT_MAX_ERRORS:
                case CMD_OPT_MIN_CALLS: {
                        char *end;
                        errno = 0;
                        unsigned long long v = strtoull(optarg, &end, 10);
                        unsigned long long max = o == CMD_OPT_MIN_CALLS ? 1000000000ull : 100;
                        if (!optarg[0] || *end || errno || optarg[0] == '-' || v < (o == CMD_OPT_MAX_ERRORS ? 0 : 1) ||
                            v > max)
                                return usage_error(ctl, c->name, o == CMD_OPT_PERCENT ? "--percent takes 1 to 100, not"
                                                   : o == CMD_OPT_MAX_ERRORS ? "--max-errors takes 0 to 100, not"
                                                   : "--min-calls takes 1 to 1000000000, not", optarg);
                        if (o == CMD_OPT_PERCENT)
                                a.percent = (uint32_t)v;
                        else if (o == CMD_OPT_MAX_ERRORS)
                                a.max_errors = (uint32_t)v;
                        else
                                a.min_calls = v;
                        break;
                }
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
        /* A NAME no policy could declare is refused before asking gadgetd,
         * here for every command whose synopsis starts with NAME. */
        if (strncmp(c->synopsis, "NAME", 4) == 0 && !gadget_name_ok(a.pos[0])) {
                show_error(stderr, ctl->json, 0,
                           "\"%s\" is not a gadget name (lower case letters, digits, - and _)", a.pos[0]);
                return CTL_EXIT_USAGE;
        }
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
