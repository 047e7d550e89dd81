/* dev: `gadgetctl dev DIR`, the edit-build-run loop of one gadget. It
 * watches DIR (inotify), builds with the command DIR's manifest names,
 * loads the gadget's policy, restarts the gadget when its program changed
 * (gadgetd's restart without a gap: no call is refused) or its policy
 * did, and keeps the running version when a build or a policy fails.
 * Everything it asks of gadgetd is what load, restart and unload ask. */
#include "cmd.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "client.h"
#include "policy.h"
#include "show.h"

/* The manifest's file name in DIR, and the longest line it may have. */
#define DEV_MANIFEST "gadget.dev"
#define DEV_LINE_MAX 4096
/* A build's output kept to print when it fails: its last bytes. */
#define DEV_OUTPUT_MAX (64 * 1024)
/* Changes closer than this to one another are one change (an editor's
 * save is several events; a build writes several files). */
#define DEV_SETTLE_MS 100
#define DEV_WATCHES 4
/* Names of DIR that changed, looked at once the changes settled; past
 * this many, DIR's sources changed whatever they were. */
#define DEV_NAMES 16

struct dev {
        const struct ctl *ctl;
        char dir[PATH_MAX];          /* DIR, absolute */
        char policy[PATH_MAX + 256]; /* the policy file, absolute */
        char *build;                 /* Build=, or NULL: the program is built elsewhere */
        char *name, *exec, *ui;      /* of the policy as last read without errors */
        struct stat prog;            /* the program as last started (st_ino 0: never) */
        bool loaded;                 /* gadgetd has it (loaded or restarted here) */
        bool loaded_here;            /* gadgetd did not know it before: unloaded at the end */
        bool failed;                 /* it cannot go on (said why): exit status 1 */
        int ifd;
        int wd[DEV_WATCHES];         /* DIR's, the policy's, the program's and the UI's folders */
        char wdir[DEV_WATCHES][PATH_MAX];
};

/* What changed since the last look. */
struct dev_changes {
        bool policy, program, ui, manifest;
        bool manifest_read;          /* the first round: the manifest was just read */
        char names[DEV_NAMES][NAME_MAX + 1]; /* other names of DIR that changed */
        int n_names;                 /* > DEV_NAMES: more than were kept */
};

static volatile sig_atomic_t dev_stop;

static void on_signal(int sig)
{
        dev_stop = 1;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fputs("dev: ", stdout);
        vprintf(fmt, ap);
        putchar('\n');
        fflush(stdout);
        va_end(ap);
}

static void trim(char *s)
{
        size_t n = strlen(s);
        while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
                s[--n] = '\0';
}

/* No Policy=: the one *.policy of DIR. 0, or -1 said why. */
static int find_policy(struct dev *d)
{
        int found = 0;
        DIR *dd = opendir(d->dir);
        struct dirent *e;
        while (dd && (e = readdir(dd))) {
                size_t l = strlen(e->d_name);
                if (l > 7 && strcmp(e->d_name + l - 7, ".policy") == 0 && e->d_name[0] != '.' && found++ == 0)
                        snprintf(d->policy, sizeof d->policy, "%s/%s", d->dir, e->d_name);
        }
        if (dd)
                closedir(dd);
        if (found == 1)
                return 0;
        fprintf(stderr, "gadgetctl dev: %s has %s: name the gadget's in %s (Policy=FILE)\n", d->dir,
                found ? "more than one *.policy" : "no *.policy", DEV_MANIFEST);
        return -1;
}

/* DIR/gadget.dev: Policy=FILE (relative to DIR) and Build=COMMAND, each
 * at most once; # comments and blank lines. Without the file, the one
 * *.policy of DIR and no build. 0, or -1 with every error printed
 * (FILE:LINE: why). */
static int read_manifest(struct dev *d)
{
        char path[PATH_MAX + 16], line[DEV_LINE_MAX + 2], *policy = NULL;
        int bad = 0, n = 0;
        snprintf(path, sizeof path, "%s/%s", d->dir, DEV_MANIFEST);
        FILE *f = fopen(path, "re");
        free(d->build);
        d->build = NULL;
        if (!f && errno != ENOENT) {
                show_error(stderr, false, 0, "%s: %s", path, strerror(errno));
                return -1;
        }
        while (f && fgets(line, sizeof line, f)) {
                n++;
                if (!strchr(line, '\n') && !feof(f)) {
                        fprintf(stderr, "%s:%d: line longer than %d bytes\n", path, n, DEV_LINE_MAX);
                        bad = 1;
                        break;
                }
                trim(line);
                char *s = line + strspn(line, " \t"), *eq = strchr(s, '=');
                if (!*s || *s == '#')
                        continue;
                char **to = eq && strncmp(s, "Policy=", 7) == 0 ? &policy
                            : eq && strncmp(s, "Build=", 6) == 0 ? &d->build : NULL;
                if (!to) {
                        fprintf(stderr, "%s:%d: expected Policy=FILE or Build=COMMAND\n", path, n);
                        bad = 1;
                } else if (*to) {
                        fprintf(stderr, "%s:%d: %.*s given twice\n", path, n, (int)(eq - s), s);
                        bad = 1;
                } else if (!(*to = strdup(eq + 1 + strspn(eq + 1, " \t"))) || !**to) {
                        fprintf(stderr, "%s:%d: %.*s needs a value\n", path, n, (int)(eq - s), s);
                        bad = 1;
                }
        }
        if (f)
                fclose(f);
        if (!bad && policy) {
                if (snprintf(d->policy, sizeof d->policy, "%s%s%s", *policy == '/' ? "" : d->dir,
                             *policy == '/' ? "" : "/", policy) >= (int)sizeof d->policy) {
                        fprintf(stderr, "%s: Policy= names too long a path\n", path);
                        bad = 1;
                }
        } else if (!bad && find_policy(d) < 0) {
                bad = 1;
        }
        free(policy);
        return bad ? -1 : 0;
}

/* Reads the policy: its name, program and UI. 0, or -1 with its FILE:LINE
 * errors printed (check_policy's). */
static int read_policy(struct dev *d)
{
        struct policy *p = NULL;
        struct policy_errors errs = { 0 };
        if (check_policy(d->ctl, d->policy) != CTL_EXIT_OK)
                return -1;
        if (policy_load(d->policy, &p, &errs) < 0) {
                policy_errors_clear(&errs);
                return -1;
        }
        if (d->name && strcmp(d->name, p->name) != 0) {
                fprintf(stderr, "%s: Name= changed from %s to %s: end gadgetctl dev and start it again\n",
                        d->policy, d->name, p->name);
                policy_free(p);
                return -1;
        }
        free(d->name);
        free(d->exec);
        free(d->ui);
        d->name = strdup(p->name);
        d->exec = strdup(p->exec);
        d->ui = p->ui ? strdup(p->ui) : NULL;
        policy_free(p);
        return d->name && d->exec ? 0 : -1;
}

/* Watches path's folder (at most DEV_WATCHES folders in all). */
static void watch_folder_of(struct dev *d, const char *path, bool is_dir)
{
        char folder[PATH_MAX];
        snprintf(folder, sizeof folder, "%s", path);
        char *slash = strrchr(folder, '/');
        if (!is_dir && slash)
                *(slash == folder ? slash + 1 : slash) = '\0';
        for (int i = 0; i < DEV_WATCHES; i++) {
                if (d->wd[i] >= 0 && strcmp(d->wdir[i], folder) == 0)
                        return;
                if (d->wd[i] < 0) {
                        d->wd[i] = inotify_add_watch(d->ifd, folder, IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE |
                                                     IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR);
                        if (d->wd[i] < 0)
                                fprintf(stderr, "gadgetctl dev: cannot watch %s: %s\n", folder, strerror(errno));
                        else
                                snprintf(d->wdir[i], sizeof d->wdir[i], "%s", folder);
                        return;
                }
        }
        fprintf(stderr, "gadgetctl dev: %s is not watched: %d folders are already\n", folder, DEV_WATCHES);
}

/* A name in DIR that is no source of the build: hidden files, editors'
 * backups and swap files, objects. */
static bool ignored(const char *name)
{
        size_t n = strlen(name);
        static const char *const tails[] = { "~", ".swp", ".swx", ".tmp", ".o" };
        if (name[0] == '.' || name[0] == '#')
                return true;
        for (size_t i = 0; i < sizeof tails / sizeof *tails; i++) {
                size_t t = strlen(tails[i]);
                if (n >= t && strcmp(name + n - t, tails[i]) == 0)
                        return true;
        }
        return false;
}

/* Reads what inotify has (the fd is non-blocking) into ch. */
static void take_events(struct dev *d, struct dev_changes *ch)
{
        char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
        ssize_t n;
        while ((n = read(d->ifd, buf, sizeof buf)) > 0) {
                for (char *p = buf; p < buf + n;) {
                        const struct inotify_event *e = (const struct inotify_event *)p;
                        p += sizeof *e + e->len;
                        const char *folder = NULL;
                        for (int i = 0; i < DEV_WATCHES; i++)
                                if (d->wd[i] >= 0 && d->wd[i] == e->wd)
                                        folder = d->wdir[i];
                        if (!folder || !e->len)
                                continue;
                        char path[2 * PATH_MAX];
                        snprintf(path, sizeof path, "%s%s%s", folder, strcmp(folder, "/") ? "/" : "", e->name);
                        bool in_dir = strcmp(folder, d->dir) == 0;
                        if (strcmp(path, d->policy) == 0)
                                ch->policy = true;
                        else if (d->exec && strcmp(path, d->exec) == 0)
                                ch->program = true;
                        else if (d->ui && strcmp(path, d->ui) == 0)
                                ch->ui = true;
                        else if (in_dir && strcmp(e->name, DEV_MANIFEST) == 0)
                                ch->manifest = true;
                        else if (in_dir && !ignored(e->name) && ch->n_names++ < DEV_NAMES)
                                snprintf(ch->names[ch->n_names - 1], sizeof ch->names[0], "%s", e->name);
                }
        }
}

/* Whether a source of DIR changed: one of the names that changed is
 * there now (an editor's or sed's file renamed away is no source). */
static bool source_changed(const struct dev *d, const struct dev_changes *ch)
{
        if (ch->n_names > DEV_NAMES)
                return true;
        for (int i = 0; i < ch->n_names; i++) {
                struct stat st;
                char path[2 * PATH_MAX];
                snprintf(path, sizeof path, "%s/%s", d->dir, ch->names[i]);
                if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
                        return true;
        }
        return false;
}

/* Waits for a change (or a signal: false), then for DEV_SETTLE_MS without
 * one, and says what changed in ch. */
static bool wait_changes(struct dev *d, const sigset_t *open_mask, struct dev_changes *ch)
{
        struct pollfd pf = { .fd = d->ifd, .events = POLLIN };
        struct timespec settle = { 0, DEV_SETTLE_MS * 1000000L };
        memset(ch, 0, sizeof *ch);
        for (bool first = true;; first = false) {
                int r = ppoll(&pf, 1, first ? NULL : &settle, open_mask);
                if (dev_stop)
                        return false;
                if (r < 0 && errno != EINTR)
                        return false;
                if (r == 0)
                        return true;
                if (r > 0)
                        take_events(d, ch);
        }
}

static int64_t now_ms(void)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Reads the build's output from fd to its end, keeping the last
 * DEV_OUTPUT_MAX bytes in out (*len of them; *cut if some were lost). */
static void gather(int fd, char *out, size_t *len, bool *cut)
{
        char chunk[4096];
        ssize_t n;
        while ((n = read(fd, chunk, sizeof chunk)) != 0) {
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 || !out)
                        break;
                if (*len + (size_t)n > DEV_OUTPUT_MAX) {
                        size_t drop = *len + (size_t)n - DEV_OUTPUT_MAX;
                        drop = drop > *len ? *len : drop;
                        memmove(out, out + drop, *len - drop);
                        *len -= drop;
                        *cut = true;
                }
                memcpy(out + *len, chunk, (size_t)n);
                *len += (size_t)n;
        }
}

/* Runs Build= with sh in DIR, its output (stdout and stderr) gathered and
 * printed: on stderr if it fails. True if it succeeded. The child gets
 * the signals this process holds back (Ctrl-C ends the build too). */
static bool build(struct dev *d)
{
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) < 0) {
                fprintf(stderr, "gadgetctl dev: build: %s\n", strerror(errno));
                return false;
        }
        int64_t t0 = now_ms();
        say("building: %s", d->build);
        pid_t pid = fork();
        if (pid == 0) {
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                if (chdir(d->dir) < 0 || dup2(fds[1], 1) < 0 || dup2(fds[1], 2) < 0)
                        _exit(127);
                execl("/bin/sh", "sh", "-c", d->build, (char *)NULL);
                _exit(127);
        }
        close(fds[1]);
        if (pid < 0) {
                close(fds[0]);
                fprintf(stderr, "gadgetctl dev: build: %s\n", strerror(errno));
                return false;
        }
        char *out = malloc(DEV_OUTPUT_MAX);
        size_t len = 0;
        bool cut = false;
        gather(fds[0], out, &len, &cut);
        close(fds[0]);
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        FILE *f = ok ? stdout : stderr;
        if (cut)
                fputs("...\n", f);
        if (out && len) {
                fwrite(out, 1, len, f);
                if (out[len - 1] != '\n')
                        fputc('\n', f);
        }
        fflush(f);
        free(out);
        if (ok)
                say("built in %lld ms", (long long)(now_ms() - t0));
        else
                say("build failed (%s %d)%s", WIFEXITED(st) ? "exit status" : "signal",
                    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), d->loaded ? ": the running version serves on" : "");
        return ok;
}

/* Whether the program on disk is another file than the one last started. */
static bool program_changed(const struct dev *d)
{
        struct stat st;
        if (!d->exec || stat(d->exec, &st) < 0)
                return false;
        return st.st_ino != d->prog.st_ino || st.st_dev != d->prog.st_dev || st.st_size != d->prog.st_size ||
               st.st_mtim.tv_sec != d->prog.st_mtim.tv_sec || st.st_mtim.tv_nsec != d->prog.st_mtim.tv_nsec;
}

/* Whether gadgetd has a gadget of this name now. -1: it cannot say (said
 * why). */
static int known(const struct dev *d);

/* Whether the gadget gadgetd has of this name was loaded from another
 * file than DIR's policy (said so): then restarting it would not read
 * DIR's policy, and loading DIR's is refused. */
static bool loaded_elsewhere(const struct dev *d)
{
        Control__Request req = CONTROL__REQUEST__INIT;
        Control__Name n = CONTROL__NAME__INIT;
        Control__Response *r = NULL;
        n.name = d->name;
        req.req_case = CONTROL__REQUEST__REQ_STATUS;
        req.status = &n;
        if (cmd_ask(d->ctl, &req, CONTROL__RESPONSE__RESP_STATUS, &r) != CTL_EXIT_OK)
                return false;
        char *ours = realpath(d->policy, NULL);
        bool other = ours && strcmp(ours, r->status->policy_path) != 0;
        if (other)
                show_error(stderr, d->ctl->json, 0, "gadget %s is loaded from %s, not from %s: unload it (or "
                           "remove it from the policy directory), or name that file in %s (Policy=)", d->name,
                           r->status->policy_path, ours, DEV_MANIFEST);
        free(ours);
        control__response__free_unpacked(r, NULL);
        return other;
}

static int known(const struct dev *d)
{
        Control__Request req = CONTROL__REQUEST__INIT;
        Control__List list = CONTROL__LIST__INIT;
        Control__Response *r = NULL;
        req.req_case = CONTROL__REQUEST__REQ_LIST;
        req.list = &list;
        if (cmd_ask(d->ctl, &req, CONTROL__RESPONSE__RESP_LIST, &r) != CTL_EXIT_OK)
                return -1;
        int found = 0;
        for (size_t i = 0; i < r->list->n_gadgets; i++)
                if (strcmp(r->list->gadgets[i]->name, d->name) == 0)
                        found = 1;
        control__response__free_unpacked(r, NULL);
        return found;
}

/* Prints the gadget's page on gadgetd's gateway, if it has one. */
static void workshop_link(const struct dev *d)
{
        Control__Request req = CONTROL__REQUEST__INIT;
        Control__Name n = CONTROL__NAME__INIT;
        Control__Response *r = NULL;
        struct client c = { .fd = -1 };
        char why[200];
        n.name = d->name;
        req.req_case = CONTROL__REQUEST__REQ_WORKSHOP;
        req.workshop = &n;
        /* No gateway is no error of dev's: the answer is looked at here,
         * not printed as one. */
        if (client_connect(&c, d->ctl->socket) == 0 && client_send(&c, &req) == 0 &&
            client_recv(&c, &r, why, sizeof why) == 1 && r->resp_case == CONTROL__RESPONSE__RESP_DONE)
                say("workshop: %s (log in at the gateway's /?token=TOKEN first)", r->done->message);
        else if (r && r->resp_case == CONTROL__RESPONSE__RESP_ERROR)
                say("no workshop link: %s", r->error->message);
        if (r)
                control__response__free_unpacked(r, NULL);
        client_close(&c);
}

/* Loads the gadget (the first time) or restarts it: its policy file is
 * read again and its program started beside the serving one, which serves
 * until the new one is ready (or on, if it does not start). */
static void deploy(struct dev *d)
{
        struct stat st;
        bool have = stat(d->exec, &st) == 0, first = !d->loaded;
        int e;
        if (first) {
                int k = known(d);
                if (k < 0)
                        return;
                if (k && loaded_elsewhere(d)) {
                        dev_stop = 1;
                        d->failed = true;
                        return;
                }
                d->loaded_here = !k;
                /* --runtime: a dev session's gadget is not loaded again
                 * at gadgetd's next start. */
                e = k ? cmd_name_request(d->ctl, d->name, CONTROL__REQUEST__REQ_RESTART,
                                         CONTROL__RESPONSE__RESP_DONE, false)
                      : cmd_load_file(d->ctl, d->policy, true, false);
                /* Loaded, even if it did not start: restarts from now on. */
                d->loaded = e == CTL_EXIT_OK || (e == CTL_EXIT_FAILED && known(d) == 1);
        } else {
                e = cmd_name_request(d->ctl, d->name, CONTROL__REQUEST__REQ_RESTART, CONTROL__RESPONSE__RESP_DONE,
                                     false);
        }
        /* Started or not, this program was tried: not again until it
         * changes. */
        if (have)
                d->prog = st;
        if (first && d->loaded)
                workshop_link(d);
}

/* gadgetctl dev's end: a gadget this session loaded goes with it; one
 * gadgetd had before stays, running the last version. */
static void finish(struct dev *d)
{
        if (d->loaded && d->loaded_here)
                cmd_name_request(d->ctl, d->name, CONTROL__REQUEST__REQ_UNLOAD, CONTROL__RESPONSE__RESP_DONE, false);
        else if (d->loaded)
                say("%s stays loaded, on its last version", d->name);
}

/* One settled batch of changes: build, check, restart as they need. */
static void on_changes(struct dev *d, struct dev_changes *ch)
{
        if (ch->manifest && read_manifest(d) < 0) {
                say("%s has errors: it is read again when it changes", DEV_MANIFEST);
                return;
        }
        if (ch->manifest) {
                /* Policy= may name another file now. */
                watch_folder_of(d, d->policy, false);
                ch->policy = true;
        }
        bool redeploy = false, built = true, source = source_changed(d, ch);
        /* Without a build, a source is read by the program itself (a
         * script, a file its policy names): a changed one restarts it. */
        if (source && !d->build && d->loaded)
                redeploy = true;
        if ((source || ch->manifest || ch->manifest_read) && d->build) {
                built = build(d);
                /* What the build wrote is its own doing: of it, only the
                 * program counts, looked at below. */
                struct dev_changes during;
                memset(&during, 0, sizeof during);
                take_events(d, &during);
                ch->policy |= during.policy;
                ch->ui |= during.ui;
        }
        /* Until the policy was read once (its Exec= may be the build's
         * to make), every change is a reason to read it, once a build
         * made the program. */
        if (!d->name && !built)
                return;
        if (ch->policy || !d->name) {
                if (read_policy(d) < 0) {
                        say("%s has errors%s", d->policy, d->loaded ? ": the running version serves on" : "");
                        return;
                }
                watch_folder_of(d, d->exec, false);
                if (d->ui)
                        watch_folder_of(d, d->ui, false);
                redeploy = true;
        }
        /* A failed build leaves the program as it was, or with no
         * program: the running version serves on until a build works. */
        if (built && (program_changed(d) || !d->loaded))
                redeploy = true;
        if (redeploy)
                deploy(d);
        else if (ch->ui && d->loaded)
                say("the UI changed: reload its page");
}

int cmd_dev(const struct ctl *ctl, const struct cmd_args *a)
{
        struct dev d = { .ctl = ctl, .ifd = -1 };
        int st = CTL_EXIT_FAILED;
        for (int i = 0; i < DEV_WATCHES; i++)
                d.wd[i] = -1;
        if (!realpath(a->pos[0], d.dir)) {
                show_error(stderr, ctl->json, 0, "%s: %s", a->pos[0], strerror(errno));
                return CTL_EXIT_USAGE;
        }
        if (read_manifest(&d) < 0)
                goto out;
        /* SIGINT, SIGTERM and SIGHUP are held back except while waiting
         * for a change: a load or restart asked is answered and shown
         * first, and the end is clean. */
        sigset_t mask, open_mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, &open_mask);
        struct sigaction sa = { .sa_handler = on_signal };
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        if ((d.ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0) {
                show_error(stderr, ctl->json, 0, "inotify: %s", strerror(errno));
                goto out;
        }
        watch_folder_of(&d, d.dir, true);
        watch_folder_of(&d, d.policy, false);
        say("watching %s (policy %s%s%s)", d.dir, d.policy, d.build ? ", build: " : "", d.build ? d.build : "");
        /* The first round is a change of everything: built, the policy
         * read (its Exec= may be the build's), loaded. */
        struct dev_changes ch;
        memset(&ch, 0, sizeof ch);
        ch.manifest_read = true;
        on_changes(&d, &ch);
        while (!d.failed && wait_changes(&d, &open_mask, &ch))
                on_changes(&d, &ch);
        say("ending");
        finish(&d);
        st = d.failed ? CTL_EXIT_FAILED : CTL_EXIT_OK;
out:
        if (d.ifd >= 0)
                close(d.ifd);
        free(d.build);
        free(d.name);
        free(d.exec);
        free(d.ui);
        return st;
}
