/* uidpool: hands out host uids (used as uid and gid) from a configured
 * range, one per running gadget, across every gadgetd process on the host
 * (daemons and gadgetd run alike, whatever their --run-dir). */
#pragma once

#include <sys/types.h>

#define UIDPOOL_DEFAULT_BASE 1879048192u /* 0x70000000, above systemd's container range */
#define UIDPOOL_DEFAULT_COUNT 65536u
#define UIDPOOL_MAX_COUNT (1u << 24)
/* The one host-wide lock file: byte N locked = host uid N in use. A fixed
 * path, whatever --run-dir says; its directory is gadgetd.service's
 * runtime directory, which is writable under ProtectSystem=strict and
 * kept when the service stops (RuntimeDirectoryPreserve=yes), so the file
 * a gadgetd run holds stays the one every later gadgetd opens. */
#define UIDPOOL_LOCK_DIR "/run/gadgetd"
#define UIDPOOL_LOCK_FILE UIDPOOL_LOCK_DIR "/uids.lock"

struct uidpool {
        int lock_fd;   /* the host-wide lock file */
        uid_t base;
        unsigned count;
        unsigned char *taken; /* bitmap of this process's own uids: OFD locks
                               * do not conflict within one description */
};

/* Checks a range: base above 0, count 1..UIDPOOL_MAX_COUNT, the range
 * below the overflow uid. 0 or -EINVAL. */
int uidpool_check_range(uid_t base, unsigned long long count);
/* Opens (creating it and its directory) the lock file at lock_path, which
 * must be a regular file of gadgetd's own user. Returns 0 or -errno. */
int uidpool_open(struct uidpool *pool, const char *lock_path, uid_t base, unsigned count);
void uidpool_close(struct uidpool *pool);
/* The pool on the lock file's fd a re-executed gadgetd kept (gadgetctl
 * daemon-reexec): the same open file, so the uids its gadgets hold stay
 * held throughout (uidpool_adopt marks them this process's again). fd is
 * taken, closed on failure. 0 or -errno. */
int uidpool_open_kept(struct uidpool *pool, int fd, uid_t base, unsigned count);
/* The lock file's fd, for a re-exec to keep. */
int uidpool_lock_fd(const struct uidpool *pool);
/* Takes a free uid, trying the one derived from name first so a gadget
 * usually keeps its uid. Returns 0 with *uid set, -EUSERS if every uid of
 * the range is held (by this or any other gadgetd of the host). */
int uidpool_take(struct uidpool *pool, const char *name, uid_t *uid);
void uidpool_release(struct uidpool *pool, uid_t uid);
/* Takes uid again for a gadget a re-executed gadgetd adopts (gadgetctl
 * daemon-reexec; on a kept lock file it holds it already): 0, -ERANGE
 * outside the range, -EBUSY if another gadget or gadgetd holds it. */
int uidpool_adopt(struct uidpool *pool, uid_t uid);
