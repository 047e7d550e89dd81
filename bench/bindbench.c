/* bindbench: bindings timed inside a gadget (benchgadget), next to the
 * machine's own limits in the same run, in alternating blocks:
 *   put / get      N kv puts (durable) / gets through the KV binding
 *   rawput/rawget  the same on a plain SQLite database (WAL,
 *                  synchronous=FULL, one transaction per put) in DBDIR,
 *                  opened by this process: what the disk and SQLite allow
 *   call           N gadget-to-gadget calls (PEER binding → "nop")
 *   pingpong       N 32-byte round trips over a raw socketpair
 *
 *   bindbench SOCKET GADGET ROUNDS N DBDIR
 *
 * Prints each operation's duration in ns. */
#include <errno.h>
#include <stdbool.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "benchutil.h"
#include "ctlclient.h"

struct raw {
        sqlite3 *db;
        sqlite3_stmt *put, *get;
};

static int raw_open(struct raw *raw, const char *dir)
{
        char path[4096];
        snprintf(path, sizeof path, "%s/raw.sqlite", dir);
        unlink(path);
        if (sqlite3_open(path, &raw->db) != SQLITE_OK ||
            sqlite3_exec(raw->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                         "CREATE TABLE kv (binding TEXT NOT NULL, key BLOB NOT NULL, value BLOB NOT NULL,"
                         " PRIMARY KEY (binding, key)) WITHOUT ROWID;", NULL, NULL, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(raw->db, "INSERT INTO kv VALUES ('KV', ?1, ?2) ON CONFLICT (binding, key)"
                               " DO UPDATE SET value = excluded.value", -1, &raw->put, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(raw->db, "SELECT value FROM kv WHERE binding = 'KV' AND key = ?1", -1,
                               &raw->get, NULL) != SQLITE_OK)
                return -1;
        return 0;
}

static int raw_loop(struct raw *raw, bool put, int n, struct samples *s)
{
        char key[32];
        for (int i = 0; i < n; i++) {
                int64_t t0 = bench_now_ns();
                sqlite3_stmt *st = put ? raw->put : raw->get;
                snprintf(key, sizeof key, "k%d", i % 1000);
                sqlite3_reset(st);
                sqlite3_bind_blob(st, 1, key, (int)strlen(key), SQLITE_TRANSIENT);
                if (put)
                        sqlite3_bind_int64(st, 2, i);
                int r = sqlite3_step(st);
                if (r != SQLITE_DONE && r != SQLITE_ROW)
                        return -1;
                samples_add(s, bench_now_ns() - t0);
        }
        return 0;
}

static _Noreturn void echo_loop(int fd)
{
        char buf[64];
        ssize_t n;
        while ((n = read(fd, buf, sizeof buf)) > 0)
                if (write(fd, buf, (size_t)n) != n)
                        break;
        _exit(0);
}

static int pingpong(int fd, int n, struct samples *s)
{
        char msg[32] = "ping";
        for (int i = 0; i < n; i++) {
                int64_t t0 = bench_now_ns();
                if (write(fd, msg, sizeof msg) != (ssize_t)sizeof msg)
                        return -1;
                for (size_t got = 0; got < sizeof msg;) {
                        ssize_t k = read(fd, msg + got, sizeof msg - got);
                        if (k <= 0)
                                return -1;
                        got += (size_t)k;
                }
                samples_add(s, bench_now_ns() - t0);
        }
        return 0;
}

int main(int argc, char **argv)
{
        struct samples put = { .name = "put_ns" }, get = { .name = "get_ns" }, rput = { .name = "rawput_ns" },
                       rget = { .name = "rawget_ns" }, call = { .name = "call_ns" }, pp = { .name = "pingpong_ns" },
                       junk = { .name = "warmup" };
        struct ctl c;
        struct raw raw = { 0 };
        int sv[2];
        if (argc != 6) {
                fprintf(stderr, "usage: bindbench SOCKET GADGET ROUNDS N DBDIR\n");
                return 2;
        }
        const char *g = argv[2];
        int rounds = atoi(argv[3]), n = atoi(argv[4]);
        int e = ctl_open(&c, argv[1]);
        if (e < 0 || raw_open(&raw, argv[5]) < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
                fprintf(stderr, "bindbench: cannot set up: %s\n", e < 0 ? strerror(-e) : "sqlite or socketpair");
                return 1;
        }
        pid_t echo = fork();
        if (echo == 0) {
                close(sv[0]);
                echo_loop(sv[1]);
        }
        close(sv[1]);
        int fail = ctl_gadget_loop(&c, g, "kv_put", 50, &junk) < 0 || ctl_gadget_loop(&c, g, "call", 50, &junk) < 0 ||
                   raw_loop(&raw, true, 50, &junk) < 0;
        for (int r = 0; !fail && r < rounds; r++)
                fail = ctl_gadget_loop(&c, g, "kv_put", n, &put) < 0 || raw_loop(&raw, true, n, &rput) < 0 ||
                       ctl_gadget_loop(&c, g, "kv_get", n, &get) < 0 || raw_loop(&raw, false, n, &rget) < 0 ||
                       ctl_gadget_loop(&c, g, "call", n, &call) < 0 || pingpong(sv[0], n, &pp) < 0;
        close(sv[0]);
        waitpid(echo, NULL, 0);
        ctl_close(&c);
        sqlite3_finalize(raw.put);
        sqlite3_finalize(raw.get);
        sqlite3_close(raw.db);
        if (fail) {
                fprintf(stderr, "bindbench: a block failed\n");
                return 1;
        }
        struct samples *sets[] = { &put, &rput, &get, &rget, &call, &pp };
        samples_print(sets, 6);
        return 0;
}
