/* bundle: gadgetctl keygen and bundle (docs/releases.md). They need no
 * gadgetd: they make a signing key and a signed bundle from a directory,
 * with the caller's own rights. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>

#include "bundle.h"
#include "cmd.h"
#include "show.h"

/* keygen -o KEY: a new Ed25519 private key (PEM, mode 0600, never over an
 * existing file); its public key printed for TrustedKeys=. */
int cmd_keygen(const struct ctl *ctl, const struct cmd_args *a)
{
        EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
        uint8_t pub[BUNDLE_KEY_LEN];
        size_t n = sizeof pub;
        char hex[2 * BUNDLE_KEY_LEN + 1];
        int st = CTL_EXIT_FAILED, fd = -1;
        FILE *f = NULL;
        if (!a->output) {
                show_error(stderr, ctl->json, 0, "keygen needs -o KEY, the private key's file");
                return CTL_EXIT_USAGE;
        }
        if (!k || EVP_PKEY_get_raw_public_key(k, pub, &n) != 1) {
                show_error(stderr, ctl->json, 0, "cannot make an Ed25519 key");
                goto out;
        }
        if ((fd = open(a->output, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0 ||
            !(f = fdopen(fd, "w"))) {
                show_error(stderr, ctl->json, 0, "%s: %s", a->output, strerror(errno));
                goto out;
        }
        fd = -1;
        if (PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL) != 1 || fclose(f) != 0) {
                f = NULL;
                show_error(stderr, ctl->json, 0, "%s: cannot write the key", a->output);
                goto out;
        }
        f = NULL;
        bundle_key_hex(pub, hex);
        if (ctl->json)
                show_json(stdout, json_pack("{s:o, s:s}", "key", show_json_string(a->output), "public", hex));
        else
                printf("wrote %s (keep it secret)\npublic key, for TrustedKeys= in gadgetd.conf:\n%s\n", a->output,
                       hex);
        st = CTL_EXIT_OK;
out:
        if (f)
                fclose(f);
        if (fd >= 0)
                close(fd);
        EVP_PKEY_free(k);
        return st;
}

struct walk {
        struct bundle_member *m;
        size_t n;
        char err[8600];
};

static int by_path(const void *x, const void *y)
{
        const struct bundle_member *a = x, *b = y;
        /* manifest first, policy second, the rest by path */
        int ra = strcmp(a->path, BUNDLE_MANIFEST) == 0 ? 0 : strcmp(a->path, BUNDLE_POLICY) == 0 ? 1 : 2;
        int rb = strcmp(b->path, BUNDLE_MANIFEST) == 0 ? 0 : strcmp(b->path, BUNDLE_POLICY) == 0 ? 1 : 2;
        return ra != rb ? ra - rb : strcmp(a->path, b->path);
}

/* Every file under top/rel into w: regular files only. */
static int walk(struct walk *w, const char *top, const char *rel)
{
        char dir[4096];
        snprintf(dir, sizeof dir, "%s%s%s", top, rel[0] ? "/" : "", rel);
        DIR *d = opendir(dir);
        struct dirent *de;
        int e = 0;
        if (!d) {
                snprintf(w->err, sizeof w->err, "%s: %s", dir, strerror(errno));
                return -errno;
        }
        while (e == 0 && (de = readdir(d))) {
                char path[4096], full[8200];
                struct stat st;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                snprintf(path, sizeof path, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
                snprintf(full, sizeof full, "%s/%s", top, path);
                if (lstat(full, &st) < 0) {
                        snprintf(w->err, sizeof w->err, "%s: %s", full, strerror(errno));
                        e = -errno;
                } else if (S_ISDIR(st.st_mode)) {
                        e = walk(w, top, path);
                } else if (!S_ISREG(st.st_mode)) {
                        snprintf(w->err, sizeof w->err, "%s: not a regular file (a bundle holds regular files only)",
                                 full);
                        e = -EINVAL;
                } else if (!bundle_path_ok(path, w->err, sizeof w->err)) {
                        e = -EINVAL;
                } else if (w->n == BUNDLE_MEMBERS_MAX || st.st_size > (off_t)BUNDLE_MEMBER_MAX) {
                        snprintf(w->err, sizeof w->err, "%s: more than %d files, or larger than %u bytes", full,
                                 BUNDLE_MEMBERS_MAX, BUNDLE_MEMBER_MAX);
                        e = -E2BIG;
                } else {
                        struct bundle_member *m = &w->m[w->n];
                        uint8_t *data = malloc(st.st_size ? (size_t)st.st_size : 1);
                        FILE *f = fopen(full, "rb");
                        if (!data || !f || fread(data, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
                                snprintf(w->err, sizeof w->err, "%s: cannot read", full);
                                free(data);
                                e = -EIO;
                        } else {
                                *m = (struct bundle_member){ .path = strdup(path), .exec = st.st_mode & S_IXUSR,
                                                             .data = data, .size = (uint64_t)st.st_size };
                                w->n++;
                        }
                        if (f)
                                fclose(f);
                }
        }
        closedir(d);
        return e;
}

static EVP_PKEY *key_read(const char *path)
{
        FILE *f = fopen(path, "r");
        EVP_PKEY *k = f ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
        if (f)
                fclose(f);
        return k;
}

/* bundle DIR --key KEY -o FILE: DIR's files (manifest and policy among
 * them) in one signed bundle, checked as gadgetd will before it is written. */
int cmd_bundle(const struct ctl *ctl, const struct cmd_args *a)
{
        struct walk w = { .m = calloc(BUNDLE_MEMBERS_MAX, sizeof *w.m) };
        uint8_t *content = NULL, trailer[BUNDLE_TRAILER_LEN];
        size_t len = 0;
        struct bundle b = { 0 };
        EVP_PKEY *k = NULL;
        FILE *out = NULL;
        char why[600];
        int st = CTL_EXIT_FAILED;
        if (!a->output || !a->key) {
                show_error(stderr, ctl->json, 0, "bundle needs --key KEY and -o FILE");
                return CTL_EXIT_USAGE;
        }
        if (!w.m || walk(&w, a->pos[0], "") < 0) {
                show_error(stderr, ctl->json, 0, "%s", w.m ? w.err : "out of memory");
                goto out;
        }
        qsort(w.m, w.n, sizeof *w.m, by_path);
        if (!(k = key_read(a->key))) {
                show_error(stderr, ctl->json, 0, "%s: not a PEM private key gadgetctl can read", a->key);
                goto out;
        }
        if (bundle_write(w.m, w.n, &content, &len) < 0 || bundle_parse(content, len, &b, why, sizeof why) < 0) {
                show_error(stderr, ctl->json, 0, "%s: %s", a->pos[0], content ? why : "out of memory");
                goto out;
        }
        if (bundle_digest(content, len, b.digest) < 0 || bundle_sign(k, b.digest, trailer) < 0) {
                show_error(stderr, ctl->json, 0, "%s: cannot sign with it (an Ed25519 key is needed)", a->key);
                goto out;
        }
        if (!(out = fopen(a->output, "wb")) || fwrite(content, 1, len, out) != len ||
            fwrite(trailer, 1, sizeof trailer, out) != sizeof trailer || fclose(out) != 0) {
                out = NULL;
                show_error(stderr, ctl->json, 0, "%s: cannot write: %s", a->output, strerror(errno));
                unlink(a->output);
                goto out;
        }
        out = NULL;
        char hex[2 * BUNDLE_KEY_LEN + 1];
        bundle_key_hex(trailer + 8, hex);
        if (ctl->json)
                show_json(stdout, json_pack("{s:o, s:s, s:s, s:I, s:s}", "bundle", show_json_string(a->output), "name",
                                            b.name, "version", b.version, "files", (json_int_t)w.n, "signer", hex));
        else
                printf("wrote %s: %s %s, %zu files, signed by key %.16s\n", a->output, b.name, b.version, w.n, hex);
        st = CTL_EXIT_OK;
out:
        if (out)
                fclose(out);
        bundle_clear(&b);
        free(content);
        for (size_t i = 0; w.m && i < w.n; i++) {
                free(w.m[i].path);
                free((void *)w.m[i].data);
        }
        free(w.m);
        EVP_PKEY_free(k);
        return st;
}
