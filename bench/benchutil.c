/* benchutil: clock and sample output of the benchmark programs. */
#include "benchutil.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gadget.pb-c.h"
#include "wire.h"

int64_t bench_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int samples_add(struct samples *s, int64_t v)
{
        if (s->n == s->cap) {
                size_t ncap = s->cap ? 2 * s->cap : 256;
                int64_t *nv = realloc(s->v, ncap * sizeof *nv);
                if (!nv)
                        return -ENOMEM;
                s->v = nv;
                s->cap = ncap;
        }
        s->v[s->n++] = v;
        return 0;
}

void samples_free(struct samples *s)
{
        free(s->v);
        s->v = NULL;
        s->n = s->cap = 0;
}

void samples_print(struct samples *const *sets, size_t n)
{
        printf("{");
        for (size_t i = 0; i < n; i++) {
                printf("%s\"%s\": [", i ? ", " : "", sets[i]->name);
                for (size_t j = 0; j < sets[i]->n; j++)
                        printf("%s%lld", j ? ", " : "", (long long)sets[i]->v[j]);
                printf("]");
        }
        printf("}\n");
        fflush(stdout);
}

/* fork+exec of the program with its RPC socket as fd 3, until the first
 * frame (its hello) is read. */
int bench_forkexec(const char *prog, const char *name, struct samples *s)
{
        char fdenv[] = "GADGET_FD=3", nameenv[300];
        snprintf(nameenv, sizeof nameenv, "GADGET_NAME=%s", name);
        char *argv[] = { (char *)prog, NULL }, *envp[] = { fdenv, nameenv, NULL };
        int sv[2];
        int64_t t0 = bench_now_ns();
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return -1;
        pid_t pid = fork();
        if (pid == 0) {
                if (dup2(sv[1], 3) < 0)
                        _exit(127);
                execve(prog, argv, envp);
                _exit(127);
        }
        close(sv[1]);
        struct wire_reader rd;
        const uint8_t *data;
        size_t len;
        wire_reader_init(&rd, WIRE_MAX_FRAME);
        int got = pid > 0 ? wire_recv(&rd, sv[0], &data, &len) : -1;
        Gadget__WorkerMsg *m = got == 1 ? gadget__worker_msg__unpack(NULL, len, data) : NULL;
        int ok = m && m->msg_case == GADGET__WORKER_MSG__MSG_HELLO;
        int64_t t1 = bench_now_ns();
        if (m)
                gadget__worker_msg__free_unpacked(m, NULL);
        wire_reader_free(&rd);
        close(sv[0]);
        if (pid > 0) {
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
        }
        if (!ok)
                return -1;
        samples_add(s, t1 - t0);
        return 0;
}
