/* Unit tests of supervisor/system/loads.c: the recorded gadgetctl loads —
 * a record per name, replaced in place by a later load of the name,
 * forgotten on request, lines that are not records skipped, and no
 * temporary file left behind. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "system/loads.h"
#include "tap.h"

static char dir[64];

static void write_list(const char *text)
{
        char path[128];
        snprintf(path, sizeof path, "%s/%s", dir, LOADS_FILE);
        FILE *f = fopen(path, "w");
        fputs(text, f);
        fclose(f);
}

static void test_record_replace_forget(void)
{
        struct loads_entry *v;
        size_t n, bad;
        CHECK(loads_read(dir, &v, &n, &bad) == 0 && n == 0, "no list yet: no loads");
        CHECK(loads_record(dir, "a", "/p/a.policy", 0, 0) == 0, "record a");
        CHECK(loads_record(dir, "b", "/p/b one.policy", 1000, 1001) == 0, "record b");
        CHECK(loads_record(dir, "a", "/q/a.policy", 5, 6) == 0, "record a again");
        CHECK(loads_read(dir, &v, &n, &bad) == 0 && n == 2 && bad == 0, "two records, %zu", n);
        CHECK(n == 2 && strcmp(v[0].name, "a") == 0 && strcmp(v[0].path, "/q/a.policy") == 0 && v[0].uid == 5 &&
              v[0].gid == 6, "a's record replaced in place");
        CHECK(n == 2 && strcmp(v[1].name, "b") == 0 && strcmp(v[1].path, "/p/b one.policy") == 0 &&
              v[1].uid == 1000 && v[1].gid == 1001, "b's record, a path with a space");
        loads_free(v, n);
        CHECK(loads_forget(dir, "a") == 0 && loads_forget(dir, "nothing") == 0, "forget a, and a name never recorded");
        CHECK(loads_read(dir, &v, &n, &bad) == 0 && n == 1 && strcmp(v[0].name, "b") == 0, "b is left");
        loads_free(v, n);
        char tmp[128];
        snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, LOADS_FILE);
        CHECK(access(tmp, F_OK) != 0, "no temporary file left");
        CHECK(loads_record(dir, "c", "/p/c\n.policy", 0, 0) < 0, "a path with a newline is refused");
}

/* The list file's inode: a write replaces the file by a rename. */
static ino_t list_ino(void)
{
        char path[128];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, LOADS_FILE);
        return stat(path, &st) == 0 ? st.st_ino : 0;
}

/* A load of an unchanged file may come as often as its caller likes: the
 * same record again writes (and syncs) nothing; a changed one does. */
static void test_same_record_writes_nothing(void)
{
        CHECK(loads_record(dir, "s", "/p/s.policy", 7, 8) == 0, "record s");
        ino_t ino = list_ino();
        int i = 0;
        while (i < 50 && loads_record(dir, "s", "/p/s.policy", 7, 8) == 0)
                i++;
        CHECK(i == 50 && list_ino() == ino, "the same record 50 times: the list is not written again");
        CHECK(loads_record(dir, "s", "/p/s.policy", 7, 9) == 0 && list_ino() != ino,
              "another gid: written (a new file renamed over the list)");
        CHECK(loads_forget(dir, "s") == 0, "forget s");
}

/* A burst of loads applied at once (the daemon's records of one turn of
 * its loop): in order, each with its own result, one write for them all. */
static void test_apply_in_order(void)
{
        struct loads_entry *v;
        size_t n, bad;
        struct loads_change c[] = {
                { .name = "x", .path = "/p/x.policy" },
                { .name = "y", .path = "/p/y.policy", .uid = 3, .gid = 4 },
                { .name = "x" },                                /* forgotten again */
                { .name = "z", .path = "relative" },            /* refused, alone */
                { .name = "y", .path = "/q/y.policy", .uid = 3, .gid = 4 },
                { .name = "w", .path = "/p/w.policy" },
        };
        CHECK(loads_apply(dir, c, 6) == 0, "six changes applied");
        CHECK(c[0].result == 0 && c[1].result == 0 && c[2].result == 0 && c[3].result == -EINVAL &&
              c[4].result == 0 && c[5].result == 0, "each change's result, the bad path's its own");
        CHECK(loads_read(dir, &v, &n, &bad) == 0 && n == 3, "b (recorded before), y, w: %zu", n);
        CHECK(n == 3 && strcmp(v[1].name, "y") == 0 && strcmp(v[1].path, "/q/y.policy") == 0 &&
              strcmp(v[2].name, "w") == 0, "y replaced in place, then w; x forgotten, z never recorded");
        loads_free(v, n);
        ino_t ino = list_ino();
        struct loads_change same[] = { { .name = "y", .path = "/q/y.policy", .uid = 3, .gid = 4 },
                                       { .name = "gone" } };
        CHECK(loads_apply(dir, same, 2) == 0 && list_ino() == ino, "nothing changed: nothing written");
        struct loads_change end[] = { { .name = "y" }, { .name = "w" } };
        CHECK(loads_apply(dir, end, 2) == 0 && loads_read(dir, &v, &n, &bad) == 0 && n == 1, "both forgotten");
        loads_free(v, n);
}

static void test_bad_lines(void)
{
        struct loads_entry *v;
        size_t n, bad;
        write_list("a 0 0 /p/a.policy\nBad!Name 0 0 /p/x.policy\nb x 0 /p/b.policy\nc 0 0 relative\n\nd 1 2 /p/d.policy");
        CHECK(loads_read(dir, &v, &n, &bad) == 0 && n == 2 && bad == 3, "2 records, 3 bad lines: %zu, %zu", n, bad);
        CHECK(n == 2 && strcmp(v[1].name, "d") == 0 && strcmp(v[1].path, "/p/d.policy") == 0,
              "a last line without a newline");
        loads_free(v, n);
}

int main(void)
{
        snprintf(dir, sizeof dir, "/tmp/test-loads-XXXXXX");
        if (!mkdtemp(dir))
                return 1;
        test_record_replace_forget();
        test_same_record_writes_nothing();
        test_apply_in_order();
        test_bad_lines();
        char path[128];
        snprintf(path, sizeof path, "%s/%s", dir, LOADS_FILE);
        unlink(path);
        rmdir(dir);
        return tap_done();
}
