/* loads: the policy files gadgetctl load added (not --runtime), kept in
 * gadgetd's state directory so that its next start loads them again. One
 * record per gadget name: "NAME UID GID PATH", one a line; a later load of
 * the name replaces its record. Blocking file I/O on the loop (as the
 * audit file's): ~60 bytes a gadget, written whole with two syncs, so the
 * daemon writes the loads of one turn of its loop at once (loads_apply). */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#define LOADS_FILE "loaded"    /* in the state directory */

/* One recorded load: the gadget's name, who loaded it (its file is read
 * again with that user's rights), the policy file. */
struct loads_entry {
        char *name;
        uid_t uid;
        gid_t gid;
        char *path;
};

/* One change of the list: name's record made or replaced (path: its
 * file, loaded by uid:gid), or forgotten (path NULL). */
struct loads_change {
        const char *name;
        const char *path;
        uid_t uid;
        gid_t gid;
        int result;     /* loads_apply's: 0, or -errno (-EINVAL: a path that is no absolute one-line path) */
};
/* Applies n changes in order, with one read of the list and at most one
 * write and sync (a burst of loads pays one, not one each); the list is
 * written as loads_record says. 0 or -errno (then every change's result
 * says so too). */
int loads_apply(const char *state_dir, struct loads_change *c, size_t n);
/* Records that name was loaded from path by uid:gid, replacing any record
 * of name. Written whole to a temporary file, synced and renamed over the
 * old one: a crash leaves the old list or the new one; the same record
 * again writes nothing. 0 or -errno. */
int loads_record(const char *state_dir, const char *name, const char *path, uid_t uid, gid_t gid);
/* Forgets the recorded load of name (gadgetctl unload, or a load with
 * --runtime): its file is not loaded at the next start. 0 (also when there
 * was none) or -errno. */
int loads_forget(const char *state_dir, const char *name);
/* The recorded loads, in the order they were first recorded; lines that
 * are not records are skipped (*bad counts them). 0 (none: an empty list)
 * or -errno. */
int loads_read(const char *state_dir, struct loads_entry **out, size_t *n, size_t *bad);
void loads_free(struct loads_entry *v, size_t n);
