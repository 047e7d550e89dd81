/* secret_file: reading a file whose content only gadgetd may see (a
 * secret binding's File=, an http binding's Credential=). */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Reads path, a regular file of at most max bytes, into *out
 * (NUL-terminated, one trailing newline dropped) with its length in *len.
 * 0, or -errno: -EINVAL not a regular file, -EFBIG over max, -ELOOP a
 * symlink where none may be. *out is the caller's: secret_file_free. */
int secret_file_read(const char *path, uint64_t max, char **out, size_t *len);
/* Wipes len bytes of s and frees it (NULL is fine). */
void secret_file_free(char *s, size_t len);
/* Why secret_file_read failed, in words for a message. */
const char *secret_file_why(int e);
