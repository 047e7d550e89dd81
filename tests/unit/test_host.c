/* Unit tests of what keeps gadgetd processes of one host apart: the
 * instance lock files (supervisor/system/instance.c) and the host-wide uid pool
 * (supervisor/spawn/uidpool.c), on files in a temporary directory. OFD locks of
 * two open file descriptions conflict even within one process, so one
 * process can play two gadgetd. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "system/instance.h"
#include "tap.h"
#include "spawn/uidpool.h"

static void test_pid_bytes(void)
{
        CHECK(instance_pid_byte(1) == 2 && instance_byte_pid(2) == 1, "pid 1 <-> byte 2");
        CHECK(instance_byte_pid(instance_pid_byte(4194304)) == 4194304, "the largest pid_max round-trips");
        CHECK(instance_pid_byte(4194304) < INSTANCE_PID_SPAN + 1, "pid bytes stay in the span");
        CHECK(instance_byte_pid(0) == 0, "byte 0 (the instance) is no pid");
        CHECK(instance_byte_pid((uint64_t)INSTANCE_PID_SPAN + 1) == 0, "past the span is no pid");
}

static void test_instance(const char *dir)
{
        char path[4096], other[4096];
        pid_t holder = -1;
        snprintf(path, sizeof path, "%s/gadgetd.lock", dir);
        int a = instance_lock(path, false, &holder);
        CHECK(a >= 0, "exclusive lock taken");
        int b = instance_lock(path, false, &holder);
        CHECK(b == -EBUSY && holder == getpid(), "a second exclusive lock: -EBUSY naming the holder (%d)", b);
        b = instance_lock(path, true, &holder);
        CHECK(b == -EBUSY && holder == getpid(), "a shared lock while exclusive: -EBUSY");
        close(a);
        a = instance_lock(path, true, &holder);
        b = instance_lock(path, true, &holder);
        CHECK(a >= 0 && b >= 0, "two shared locks");
        int c = instance_lock(path, false, &holder);
        CHECK(c == -EBUSY && holder == getpid(), "exclusive while shared: -EBUSY naming a holder");
        close(a);
        close(b);
        c = instance_lock(path, false, &holder);
        CHECK(c >= 0, "exclusive once every holder is gone");
        close(c);

        snprintf(other, sizeof other, "%s/link.lock", dir);
        CHECK(symlink(path, other) == 0, "symlink made");
        CHECK(instance_lock(other, false, &holder) == -ELOOP, "a symlink is refused");
        snprintf(other, sizeof other, "%s/fifo.lock", dir);
        CHECK(mkfifo(other, 0600) == 0, "fifo made");
        CHECK(instance_lock(other, false, &holder) == -EPERM, "a FIFO is refused, without blocking");
        snprintf(other, sizeof other, "%s/hard.lock", dir);
        CHECK(link(path, other) == 0, "hard link made");
        CHECK(instance_lock(path, false, &holder) == -EPERM, "a file with two links is refused");
}

static void test_uidpool(const char *dir)
{
        char path[4096];
        struct uidpool a, b;
        uid_t ua = 0, ub = 0, uc = 0;
        snprintf(path, sizeof path, "%s/uids.lock", dir);
        CHECK(uidpool_check_range(0, 10) == -EINVAL, "host uid 0 is never in a range");
        CHECK(uidpool_check_range(100, 0) == -EINVAL, "an empty range is refused");
        CHECK(uidpool_check_range(0xfffffff0u, 100) == -EINVAL, "a range past the top is refused");
        CHECK(uidpool_check_range(100000, UIDPOOL_MAX_COUNT + 1ull) == -EINVAL, "a range over the most");
        CHECK(uidpool_check_range(UIDPOOL_DEFAULT_BASE, UIDPOOL_DEFAULT_COUNT) == 0, "the default range");
        CHECK(uidpool_open(&a, path, 100000, 4) == 0 && uidpool_open(&b, path, 100000, 4) == 0,
              "two pools on one lock file");
        CHECK(uidpool_take(&a, "same", &ua) == 0 && uidpool_take(&b, "same", &ub) == 0 && ua != ub,
              "the same name in two pools: two uids (%u, %u)", (unsigned)ua, (unsigned)ub);
        uidpool_close(&b);
        /* A pool of another range that overlaps: the same uid is the same byte. */
        CHECK(uidpool_open(&b, path, 100000 + (ua - 100000), 1) == 0, "an overlapping range");
        CHECK(uidpool_take(&b, "other", &uc) == -EUSERS, "its only uid is held by the first pool: -EUSERS");
        uidpool_release(&a, ua);
        CHECK(uidpool_take(&b, "other", &uc) == 0 && uc == ua, "free again once released");
        uidpool_close(&a);
        uidpool_close(&b);
}

int main(void)
{
        char dir[] = "/tmp/gadgetd-unit-XXXXXX";
        if (!mkdtemp(dir))
                return 1;
        test_pid_bytes();
        test_instance(dir);
        test_uidpool(dir);
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0)
                printf("# could not remove %s\n", dir);
        return tap_done();
}
