/* uidpool: hands out host uids (used as uid and gid) from a configured
 * range, one per running gadget, across every gadgetd process on the host. */
#pragma once

#include <sys/types.h>

#define UIDPOOL_DEFAULT_BASE 1879048192u /* 0x70000000, above systemd's container range */
#define UIDPOOL_DEFAULT_COUNT 65536u

struct uidpool {
        int lock_fd;   /* lock file; byte i locked = base + i in use */
        uid_t base;
        unsigned count;
        unsigned char *taken; /* bitmap of this process's own uids: OFD locks
                               * do not conflict within one description */
};

/* Opens (creating) the lock file under run_dir. Returns 0 or -errno. */
int uidpool_open(struct uidpool *pool, const char *run_dir, uid_t base, unsigned count);
void uidpool_close(struct uidpool *pool);
/* Takes a free uid, trying the one derived from name first so a gadget
 * usually keeps its uid. Returns 0 with *uid set, -EUSERS if all are taken. */
int uidpool_take(struct uidpool *pool, const char *name, uid_t *uid);
void uidpool_release(struct uidpool *pool, uid_t uid);
