/* bundle: a gadget release in one file (docs/releases.md) — its members
 * (a manifest, a policy template, the program, its UI) in a length-prefixed
 * container, and an Ed25519 signature over the SHA-256 of that content.
 * bundle_parse reads a hostile file strictly (gadgetd installs what it
 * accepts); bundle_write and bundle_sign make one (gadgetctl bundle). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BUNDLE_MAGIC "GDBUNDL1"
#define BUNDLE_MAGIC_LEN 8
#define BUNDLE_SIG_MAGIC "GDSIG1\0\0"
#define BUNDLE_HEADER_LEN 13            /* kind u8, mode u16, path length u16, size u64 (big-endian) */
#define BUNDLE_KEY_LEN 32               /* an Ed25519 public key */
#define BUNDLE_SIG_LEN 64               /* an Ed25519 signature */
#define BUNDLE_TRAILER_LEN (8 + BUNDLE_KEY_LEN + BUNDLE_SIG_LEN)
#define BUNDLE_DIGEST_LEN 32            /* SHA-256 */
/* Bounds of what gadgetd reads and unpacks. */
#define BUNDLE_SIZE_MAX (64u << 20)     /* the whole file */
#define BUNDLE_MEMBER_MAX (32u << 20)   /* one member */
#define BUNDLE_MEMBERS_MAX 1024
#define BUNDLE_PATH_MAX 200             /* bytes of a member's path */
#define BUNDLE_DEPTH_MAX 8              /* components of a member's path */
#define BUNDLE_MANIFEST_MAX 4096
#define BUNDLE_VERSION_MAX 64
/* The member names every bundle holds. */
#define BUNDLE_MANIFEST "manifest"
#define BUNDLE_POLICY "policy"

struct bundle_member {
        char *path;                     /* checked: relative, no ".." or ".", [A-Za-z0-9._+@-] */
        bool exec;                      /* installed 0755 (else 0644) */
        const uint8_t *data;            /* in the parsed buffer */
        uint64_t size;
};

struct bundle {
        struct bundle_member *m;
        size_t n;
        const uint8_t *content;         /* the parsed buffer */
        size_t content_len;             /* bytes signed: from the magic to the end record */
        bool is_signed;
        uint8_t key[BUNDLE_KEY_LEN];    /* the signer's public key (is_signed) */
        uint8_t sig[BUNDLE_SIG_LEN];
        uint8_t digest[BUNDLE_DIGEST_LEN]; /* SHA-256 of the content (set by bundle_verify) */
        /* From the manifest. */
        char name[64];
        char version[BUNDLE_VERSION_MAX + 1];
        unsigned protocol;              /* the gadget protocol its program speaks */
        char sdk[BUNDLE_VERSION_MAX + 1]; /* the SDK it was built with ("" if not said) */
        const struct bundle_member *policy;
};

/* Parses buf (len bytes) into b, whose members point into buf. Checks
 * every bound, path, kind and mode, and the manifest; not the signature
 * (bundle_verify). 0, or -EINVAL / -E2BIG / -ENOMEM with why. */
int bundle_parse(const uint8_t *buf, size_t len, struct bundle *b, char *why, size_t wlen);
void bundle_clear(struct bundle *b);
/* Whether s is a version (1 to BUNDLE_VERSION_MAX of [A-Za-z0-9._+-], not
 * starting with '.' or '-'): it names a directory of gadgetd's store. */
bool bundle_version_ok(const char *s);
/* Whether path is a member path bundle_parse accepts; why says why not. */
bool bundle_path_ok(const char *path, char *why, size_t wlen);
/* The container of members m[0..n) (manifest and policy first): malloc'd
 * into *out. 0 or -errno. */
int bundle_write(const struct bundle_member *m, size_t n, uint8_t **out, size_t *out_len);

/* bundle_sign.c (OpenSSL's libcrypto). */
/* SHA-256 of the content into digest. 0 or -EIO. */
int bundle_digest(const uint8_t *content, size_t len, uint8_t digest[BUNDLE_DIGEST_LEN]);
/* Computes b's digest; whether b's signature is its key's over it: 0,
 * -EBADMSG (not, or unsigned), -EIO. */
int bundle_verify(struct bundle *b);
/* Signs digest with the Ed25519 private key pkey (an EVP_PKEY *): the
 * trailer's bytes into trailer. 0 or -EINVAL (not an Ed25519 key), -EIO. */
int bundle_sign(void *pkey, const uint8_t digest[BUNDLE_DIGEST_LEN], uint8_t trailer[BUNDLE_TRAILER_LEN]);
/* Frees the calling thread's OpenSSL state (its error queue): a thread
 * that verified bundles and lives on (deploy_store's) calls it before it
 * waits, so none is left held at the process's exit. */
void bundle_thread_idle(void);
/* A key as 64 lower-case hex digits (and NUL), and its id: the first 16. */
void bundle_key_hex(const uint8_t key[BUNDLE_KEY_LEN], char out[2 * BUNDLE_KEY_LEN + 1]);
int bundle_key_unhex(const char *hex, uint8_t key[BUNDLE_KEY_LEN]);
