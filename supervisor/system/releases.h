/* releases: gadgetd's store of installed bundles (docs/releases.md), in
 * its state directory:
 *   releases/NAME/VERSION/files/...  the bundle's members, modes set here
 *   releases/NAME/VERSION/policy     its policy template, Exec=, UI= and
 *                                    AdminUI= made absolute into files/
 *   releases/NAME/VERSION/release    who installed it, when, signed by whom
 *   releases/NAME/policy             the policy gadgetd loads: a copy of
 *                                    the current version's
 *   releases/NAME/current            the current version's name
 *   releases/NAME/previous           the one before (rollback's)
 * Blocking file I/O: the unpacking runs in install's thread; the small
 * files (commit, list) on the loop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct bundle;

#define RELEASES_DIR "releases"      /* in the state directory */
#define RELEASES_KEEP 10             /* VersionsKept= */
#define RELEASES_POLICY_MAX (64u << 10) /* bytes of a bundle's policy template */

/* One installed version, as its release file says. */
struct release_info {
        char version[65];
        char signer[65];             /* the signing key, 64 hex digits; "" if unsigned */
        int64_t installed_ms;        /* wall clock, ms since the epoch */
        uid_t uid;                   /* who installed it */
        char sdk[65];
        bool current;
};

/* Unpacks b (checked by bundle_parse; its signer's key as hex, "" if
 * none) into releases/NAME/VERSION of state_dir: every file created anew
 * (O_EXCL, O_NOFOLLOW) with the mode gadgetd sets, the policy made from
 * the template. -EEXIST if that version is installed already; on any
 * failure nothing of it is left. The version's policy path into path.
 * 0 or -errno with why. */
int releases_unpack(const char *state_dir, const struct bundle *b, const char *signer, uid_t uid, char *path,
                    size_t plen, char *why, size_t wlen);
/* Makes version the current one of name: its policy copied to
 * releases/NAME/policy (that path into path), current written. 0 or -errno. */
int releases_commit(const char *state_dir, const char *name, const char *version, char *path, size_t plen);
/* Removes version's directory (and NAME's, if then empty); committed:
 * after releases_commit of it, which is undone back to prev ("" or NULL:
 * none current before). */
void releases_undo(const char *state_dir, const char *name, const char *version, const char *prev, bool committed);
/* The current version of name into out ("" if none). */
void releases_current(const char *state_dir, const char *name, char *out, size_t len);
/* The version before the current one (releases/NAME/previous, the one
 * rollback goes back to) into out ("" if none). */
void releases_previous(const char *state_dir, const char *name, char *out, size_t len);
/* Records version ("" or NULL: none) as the one before. 0 or -errno. */
int releases_set_previous(const char *state_dir, const char *name, const char *version);
/* Whether version of name is installed (its policy is there). */
bool releases_has(const char *state_dir, const char *name, const char *version);
/* The installed versions of name, newest install first. 0 (none: n 0) or -errno. */
int releases_list(const char *state_dir, const char *name, struct release_info **out, size_t *n);
/* At gadgetd's start (no install runs): removes what an install cut short
 * left (".staging-*" directories, ".*.new" files) and empty gadget
 * directories. The number of entries removed. */
size_t releases_sweep(const char *state_dir);
/* Removes the oldest versions of name beyond keep, never the current or
 * the previous one.
 * The number removed. */
size_t releases_prune(const char *state_dir, const char *name, unsigned keep);
/* releases_policy.c: */
/* The policy text of b's template with its paths under files (an absolute
 * directory): malloc'd into *out. 0 or -EINVAL with why. Pure. */
int releases_policy_text(const struct bundle *b, const char *files, char **out, char *why, size_t wlen);
/* The version a policy runs, if it is the store's (loaded from
 * releases/NAME/policy, its Exec= in releases/NAME/VERSION/files/): into
 * out, else "". Pure: from the paths alone. */
void releases_version_of(const char *state_dir, const char *name, const char *policy_path, const char *exec,
                         char *out, size_t len);
/* Whether path (as the policy reader normalizes one: no "//", "." or
 * "..") lies under dir, once dir is normalized alike. Pure. */
bool releases_path_within(const char *path, const char *dir);
