/* secret_file: the one reader of a file whose content only gadgetd may
 * see (a secret binding's File=, an http binding's Credential=, the
 * gateway's TokenFile=, the node link's PeerKey= and certificates). */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* Who besides its owner the file's mode may let in. */
enum secret_rule {
        SECRET_ANY_MODE,  /* no rule (a file the operator's policy names: its mode is theirs) */
        SECRET_NOT_WORLD, /* not readable or writable by every user */
        SECRET_PRIVATE,   /* a private key, as libpq and ssh: mode 0600 or less; 0640 only as
                           * root:root (any other group, such as Debian's ssl-cert, would
                           * let its members read it) */
};

/* Reads path, a regular file of at most max bytes whose mode keeps rule,
 * into *out (NUL-terminated, one trailing newline dropped) with its length
 * in *len. The mode is checked on the open file, before a byte is read.
 * 0, or -errno: -EINVAL not a regular file, -EFBIG over max, -ELOOP a
 * symlink where none may be, -EPERM a mode rule forbids (then *st, if st
 * is not NULL, is the file's, for a message that names its mode and
 * owner). *out is the caller's: secret_file_free. */
int secret_file_read(const char *path, uint64_t max, enum secret_rule rule, struct stat *st, char **out,
                     size_t *len);
/* Wipes len bytes of s and frees it (NULL is fine). */
void secret_file_free(char *s, size_t len);
/* Why secret_file_read failed, in words for a message. */
const char *secret_file_why(int e);
