/* Unit tests of proto/bundle.c and bundle_sign.c (a gadget bundle read as
 * hostile input: every truncation, every changed byte, bounds, paths,
 * kinds, modes, the manifest) and of the policy template's rewrite
 * (supervisor/system/releases.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "bundle.h"
#include "system/releases.h"
#include "tap.h"

static const char manifest[] = "Name=rel\nVersion=1.0\nProtocol=2\nSDK=0.9\n";
static const char policy[] = "[Gadget]\nName=rel\nExec=bin/x\nUI = ui/index.html\n\n[Binding KV]\nType=kv\n";

static struct bundle_member members[] = {
        { .path = "manifest", .data = (const uint8_t *)manifest, .size = sizeof manifest - 1 },
        { .path = "policy", .data = (const uint8_t *)policy, .size = sizeof policy - 1 },
        { .path = "bin/x", .exec = true, .data = (const uint8_t *)"\x7f" "ELF", .size = 4 },
        { .path = "ui/index.html", .data = (const uint8_t *)"<p>hi</p>", .size = 9 },
};
#define N_MEMBERS (sizeof members / sizeof *members)

static char why[600];

/* A record by hand: kind, mode, path, size said, data. */
static size_t record(uint8_t *p, char kind, unsigned mode, const char *path, uint64_t size, const void *data,
                     size_t n)
{
        size_t pl = strlen(path);
        p[0] = (uint8_t)kind;
        p[1] = (uint8_t)(mode >> 8);
        p[2] = (uint8_t)mode;
        p[3] = (uint8_t)(pl >> 8);
        p[4] = (uint8_t)pl;
        for (int i = 0; i < 8; i++)
                p[5 + i] = (uint8_t)(size >> (56 - 8 * i));
        memcpy(p + 13, path, pl);
        memcpy(p + 13 + pl, data, n);
        return 13 + pl + n;
}

/* manifest, policy, then one hostile record, then the end: parsed. */
static int with_member(char kind, unsigned mode, const char *path, uint64_t size, const void *data, size_t n)
{
        static uint8_t buf[4096];
        struct bundle b;
        size_t off = 8;
        memcpy(buf, BUNDLE_MAGIC, 8);
        off += record(buf + off, 'F', 0644, "manifest", sizeof manifest - 1, manifest, sizeof manifest - 1);
        off += record(buf + off, 'F', 0644, "policy", sizeof policy - 1, policy, sizeof policy - 1);
        off += record(buf + off, kind, mode, path, size, data, n);
        off += record(buf + off, 'E', 0, "", 0, "", 0);
        int r = bundle_parse(buf, off, &b, why, sizeof why);
        if (r == 0)
                bundle_clear(&b);
        return r;
}

static void test_hostile_members(void)
{
        CHECK(with_member('F', 0755, "bin/x", 1, "x", 1) == 0, "a good third member: parsed");
        CHECK(with_member('F', 0755, "bin/../../x", 0, "", 0) < 0 && strstr(why, "\"..\""), "\"..\" refused: %s", why);
        CHECK(with_member('F', 0755, "..", 0, "", 0) < 0, "\"..\" alone refused");
        CHECK(with_member('F', 0755, "/etc/x", 0, "", 0) < 0 && strstr(why, "absolute"), "an absolute path: %s", why);
        CHECK(with_member('F', 0755, "a//b", 0, "", 0) < 0, "an empty component refused");
        CHECK(with_member('F', 0755, "./a", 0, "", 0) < 0, "a \".\" component refused");
        CHECK(with_member('F', 0755, "a b", 0, "", 0) < 0, "a blank in a path refused");
        CHECK(with_member('F', 0755, "a/b/c/d/e/f/g/h/i", 0, "", 0) < 0, "9 components refused");
        CHECK(with_member('L', 0777, "bin/x", 11, "/etc/shadow", 11) < 0 && strstr(why, "symbolic link"),
              "a symlink: %s", why);
        CHECK(with_member('C', 0644, "dev", 0, "", 0) < 0 && strstr(why, "character device"), "a device: %s", why);
        CHECK(with_member('B', 0644, "dev", 0, "", 0) < 0, "a block device refused");
        CHECK(with_member('P', 0644, "fifo", 0, "", 0) < 0, "a FIFO refused");
        CHECK(with_member('D', 0755, "dir", 0, "", 0) < 0, "a directory record refused");
        CHECK(with_member('Z', 0644, "z", 0, "", 0) < 0 && strstr(why, "unknown kind"), "an unknown kind: %s", why);
        CHECK(with_member('F', 04755, "bin/x", 0, "", 0) < 0 && strstr(why, "setuid"), "setuid: %s", why);
        CHECK(with_member('F', 02755, "bin/x", 0, "", 0) < 0, "setgid refused");
        CHECK(with_member('F', 0777, "bin/x", 0, "", 0) < 0, "mode 0777 refused");
        CHECK(with_member('F', 0755, "bin/x", (uint64_t)BUNDLE_MEMBER_MAX + 1, "", 0) == -E2BIG,
              "a member past BUNDLE_MEMBER_MAX: %s", why);
        CHECK(with_member('F', 0755, "bin/x", UINT64_MAX, "", 0) == -E2BIG, "a size of 2^64-1 refused");
        CHECK(with_member('F', 0755, "bin/x", 100, "x", 1) < 0 && strstr(why, "truncated"), "a size past the end: %s",
              why);
        CHECK(with_member('F', 0644, "policy", 0, "", 0) < 0 && strstr(why, "repeated"), "a repeated path: %s", why);
        CHECK(with_member('F', 0644, "manifest/x", 0, "", 0) < 0 && strstr(why, "clashes"),
              "a file under another file: %s", why);
        CHECK(with_member('F', 0644, "a\x01", 0, "", 0) < 0, "a control byte in a path refused");
}

static uint8_t *made(size_t *len)
{
        uint8_t *p;
        if (bundle_write(members, N_MEMBERS, &p, len) < 0)
                abort();
        return p;
}

static void test_round_trip_and_truncations(void)
{
        size_t len;
        uint8_t *p = made(&len);
        struct bundle b;
        CHECK(bundle_parse(p, len, &b, why, sizeof why) == 0, "written, read back: %s", why);
        CHECK(b.n == N_MEMBERS && !b.is_signed && strcmp(b.name, "rel") == 0 && strcmp(b.version, "1.0") == 0 &&
              b.protocol == 2 && strcmp(b.sdk, "0.9") == 0 && b.m[2].exec && !b.m[3].exec && b.m[2].size == 4,
              "its manifest and members");
        CHECK(bundle_verify(&b) == -EBADMSG, "an unsigned bundle does not verify");
        bundle_clear(&b);
        unsigned bad = 0;
        for (size_t n = 0; n < len; n++)
                bad += bundle_parse(p, n, &b, why, sizeof why) < 0;
        CHECK(bad == len, "every truncation (%zu) refused", len);
        free(p);
}

static void test_manifest(void)
{
        static const char *const bad[] = {
                "Name=rel\nVersion=1\n",                     /* no Protocol */
                "Name=rel\nProtocol=2\n",                    /* no Version */
                "Version=1\nProtocol=2\n",                   /* no Name */
                "Name=rel\nVersion=1\nProtocol=9\n",
                "Name=rel\nVersion=1\nProtocol=2\nColor=red\n",
                "Name=rel\nName=rel\nVersion=1\nProtocol=2\n",
                "Name=Rel!\nVersion=1\nProtocol=2\n",
                "Name=rel\nVersion=../x\nProtocol=2\n",
                "Name=rel\nVersion=.hidden\nProtocol=2\n",
                "Name=rel\nVersion=1\nProtocol=2\nnonsense\n",
        };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
                struct bundle_member m[2] = { members[0], members[1] };
                struct bundle b;
                uint8_t *p;
                size_t len;
                m[0].data = (const uint8_t *)bad[i];
                m[0].size = strlen(bad[i]);
                if (bundle_write(m, 2, &p, &len) < 0)
                        abort();
                CHECK(bundle_parse(p, len, &b, why, sizeof why) < 0, "manifest %zu refused: %s", i, why);
                free(p);
        }
}

static void test_signature(void)
{
        EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519"), *other = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
        size_t len;
        uint8_t *p = made(&len), trailer[BUNDLE_TRAILER_LEN], digest[BUNDLE_DIGEST_LEN];
        struct bundle b;
        CHECK(k && bundle_digest(p, len, digest) == 0 && bundle_sign(k, digest, trailer) == 0, "signed");
        uint8_t *s = malloc(len + BUNDLE_TRAILER_LEN);
        memcpy(s, p, len);
        memcpy(s + len, trailer, BUNDLE_TRAILER_LEN);
        CHECK(bundle_parse(s, len + BUNDLE_TRAILER_LEN, &b, why, sizeof why) == 0 && b.is_signed &&
              bundle_verify(&b) == 0, "a signed bundle verifies");
        bundle_clear(&b);
        /* Every single changed byte: refused by the parser, or its
         * signature fails (never both pass). */
        unsigned passed = 0;
        for (size_t i = 0; i < len + BUNDLE_TRAILER_LEN; i++) {
                s[i] ^= 0x20;
                if (bundle_parse(s, len + BUNDLE_TRAILER_LEN, &b, why, sizeof why) == 0) {
                        passed += bundle_verify(&b) == 0;
                        bundle_clear(&b);
                }
                s[i] ^= 0x20;
        }
        CHECK(passed == 0, "no changed byte of %zu passes (%u did)", len + BUNDLE_TRAILER_LEN, passed);
        /* Another key's signature over the same content, under this key. */
        uint8_t t2[BUNDLE_TRAILER_LEN];
        CHECK(other && bundle_sign(other, digest, t2) == 0, "signed by another key");
        memcpy(s + len + 8 + BUNDLE_KEY_LEN, t2 + 8 + BUNDLE_KEY_LEN, BUNDLE_SIG_LEN);
        CHECK(bundle_parse(s, len + BUNDLE_TRAILER_LEN, &b, why, sizeof why) == 0 && bundle_verify(&b) == -EBADMSG,
              "another key's signature under this key's name fails");
        bundle_clear(&b);
        CHECK(bundle_parse(s, len + BUNDLE_TRAILER_LEN - 1, &b, why, sizeof why) < 0, "a cut signature refused");
        char hex[2 * BUNDLE_KEY_LEN + 1];
        uint8_t back[BUNDLE_KEY_LEN];
        bundle_key_hex(trailer + 8, hex);
        CHECK(bundle_key_unhex(hex, back) == 0 && memcmp(back, trailer + 8, BUNDLE_KEY_LEN) == 0 &&
              bundle_key_unhex("12", back) < 0 && bundle_key_unhex(hex + 1, back) < 0,
              "keys in hex, read back; short or odd refused");
        free(s);
        free(p);
        EVP_PKEY_free(k);
        EVP_PKEY_free(other);
}

static int template(const char *text, char **out)
{
        struct bundle_member m[N_MEMBERS];
        struct bundle b;
        uint8_t *p;
        size_t len;
        memcpy(m, members, sizeof m);
        m[1].data = (const uint8_t *)text;
        m[1].size = strlen(text);
        if (bundle_write(m, N_MEMBERS, &p, &len) < 0 || bundle_parse(p, len, &b, why, sizeof why) < 0)
                abort();
        int r = releases_policy_text(&b, "/s/releases/rel/1.0/files", out, why, sizeof why);
        bundle_clear(&b);
        free(p);
        return r;
}

static void test_policy_template(void)
{
        char *out = NULL;
        CHECK(template(policy, &out) == 0 && strstr(out, "Exec=/s/releases/rel/1.0/files/bin/x\n") &&
                      strstr(out, "UI=/s/releases/rel/1.0/files/ui/index.html\n") && strstr(out, "[Binding KV]\nType=kv"),
              "Exec= and UI= made absolute into the store, the rest kept (%s)", out ? "made" : why);
        free(out);
        out = NULL;
        CHECK(template("[Gadget]\nName=rel\nExec=/bin/sh\n", &out) < 0 && strstr(why, "Exec="),
              "an absolute Exec= refused: %s", why);
        CHECK(template("[Gadget]\nName=rel\nExec=bin/y\n", &out) < 0, "an Exec= of no member refused");
        CHECK(template("[Gadget]\nName=rel\nExec=bin/../bin/x\n", &out) < 0, "a \"..\" in Exec= refused");
        CHECK(template("[Gadget]\nName=other\nExec=bin/x\n", &out) < 0 && strstr(why, "Name="),
              "another Name= refused: %s", why);
        CHECK(template("[Gadget]\nName=rel\nExec=bin/x\n  /etc\n", &out) < 0 && strstr(why, "blank"),
              "a continuation line refused: %s", why);
        CHECK(template("[Binding X]\nExec=/bin/sh\n[Gadget]\nName=rel\nExec=bin/x\n", &out) == 0,
              "Exec= outside [Gadget] left to the policy's own checks");
        free(out);
        out = NULL;
        /* Read as the policy's reader reads a line: a header with a
         * comment after it is [Gadget]; blanks around '='; a comment
         * after a value; a byte-order mark. */
        CHECK(template("[Gadget] ; the gadget\nName=rel\nExec=/bin/sh\n", &out) < 0, "[Gadget] with a comment: %s", why);
        CHECK(template("[Gadget]\nName=rel\nExec =  /bin/sh\n", &out) < 0, "blanks around '=': %s", why);
        CHECK(template("[Gadget]\nName=rel\nExec=/bin/sh #x\n", &out) < 0, "a comment after the value: %s", why);
        CHECK(template("\xef\xbb\xbf[Gadget]\nName=rel\nExec=/bin/sh\n", &out) < 0, "a byte-order mark: %s", why);
        CHECK(template("[Gadget]\nName=rel\n  ; a comment\nExec=bin/x ; the program\n", &out) == 0 &&
                      strstr(out, "Exec=/s/releases/rel/1.0/files/bin/x\n"),
              "an indented comment kept, a value's comment dropped");
        free(out);
}

/* What an install cut short leaves, swept at the next start; the
 * versions stay. */
static void test_sweep(void)
{
        char top[] = "/tmp/test-bundle-XXXXXX", p[256];
        struct stat st;
        if (!mkdtemp(top))
                abort();
        static const char *const dirs[] = { "releases", "releases/x", "releases/x/1", "releases/x/.staging-2-ab",
                                            "releases/x/.staging-2-ab/files", "releases/empty" };
        for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
                snprintf(p, sizeof p, "%s/%s", top, dirs[i]);
                mkdir(p, 0755);
        }
        static const char *const files[] = { "releases/x/1/policy", "releases/x/.staging-2-ab/files/a",
                                             "releases/x/.policy.new", "releases/x/current" };
        for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
                snprintf(p, sizeof p, "%s/%s", top, files[i]);
                close(open(p, O_WRONLY | O_CREAT, 0644));
        }
        CHECK(releases_sweep(top) == 2, "the staging directory and the .new file swept");
        snprintf(p, sizeof p, "%s/releases/x/.staging-2-ab", top);
        CHECK(lstat(p, &st) < 0, "no staging directory left");
        snprintf(p, sizeof p, "%s/releases/empty", top);
        CHECK(lstat(p, &st) < 0, "an empty gadget directory removed");
        snprintf(p, sizeof p, "%s/releases/x/1/policy", top);
        bool kept = lstat(p, &st) == 0;
        snprintf(p, sizeof p, "%s/releases/x/current", top);
        CHECK(kept && lstat(p, &st) == 0, "the versions and current kept");
        static const char *const rm[] = { "releases/x/1/policy", "releases/x/current", "releases/x/1", "releases/x",
                                          "releases", "" };
        for (size_t i = 0; i < sizeof rm / sizeof *rm; i++) {
                snprintf(p, sizeof p, "%s/%s", top, rm[i]);
                remove(p);
        }
}

/* What rollback goes back to: recorded, read, kept by the pruning. */
static void test_previous(void)
{
        char top[] = "/tmp/test-bundle-XXXXXX", p[256], v[80];
        if (!mkdtemp(top))
                abort();
        snprintf(p, sizeof p, "%s/releases", top);
        mkdir(p, 0755);
        snprintf(p, sizeof p, "%s/releases/x", top);
        mkdir(p, 0755);
        for (int i = 1; i <= 3; i++) {
                snprintf(p, sizeof p, "%s/releases/x/%d", top, i);
                mkdir(p, 0755);
                snprintf(p, sizeof p, "%s/releases/x/%d/policy", top, i);
                close(open(p, O_WRONLY | O_CREAT, 0644));
                snprintf(p, sizeof p, "%s/releases/x/%d/release", top, i);
                FILE *f = fopen(p, "w");
                fprintf(f, "Version=%d\nInstalled=%d\n", i, 1000 * i);
                fclose(f);
        }
        snprintf(p, sizeof p, "%s/releases/x/current", top);
        FILE *f = fopen(p, "w");
        fputs("3", f);
        fclose(f);
        releases_previous(top, "x", v, sizeof v);
        CHECK(v[0] == '\0', "no previous yet: \"%s\"", v);
        CHECK(releases_set_previous(top, "x", "1") == 0, "previous recorded");
        releases_previous(top, "x", v, sizeof v);
        CHECK(strcmp(v, "1") == 0, "previous read: \"%s\"", v);
        CHECK(releases_has(top, "x", "2") && !releases_has(top, "x", "4") && !releases_has(top, "x", "../x/1") &&
                      !releases_has(top, "x", ".staging-1"),
              "installed versions, and names that are none");
        CHECK(releases_prune(top, "x", 1) == 1, "one version pruned");
        CHECK(releases_has(top, "x", "1") && releases_has(top, "x", "3") && !releases_has(top, "x", "2"),
              "the current and the previous versions kept, the other pruned");
        CHECK(releases_set_previous(top, "x", "") == 0, "previous forgotten");
        releases_previous(top, "x", v, sizeof v);
        CHECK(v[0] == '\0', "no previous: \"%s\"", v);
        static const char *const rm[] = { "releases/x/1/policy", "releases/x/1/release", "releases/x/3/policy",
                                          "releases/x/3/release", "releases/x/current", "releases/x/1",
                                          "releases/x/3", "releases/x", "releases", "" };
        for (size_t i = 0; i < sizeof rm / sizeof *rm; i++) {
                snprintf(p, sizeof p, "%s/%s", top, rm[i]);
                remove(p);
        }
}

static void test_path_within(void)
{
        CHECK(releases_path_within("/s/r/n/1/files/bin/x", "/s//r/./n/1/files/"), "a path under the files dir");
        CHECK(!releases_path_within("/s/r/n/1/filesx/bin/x", "/s/r/n/1/files"), "a sibling's prefix is not under it");
        CHECK(!releases_path_within("/etc/x", "/s/r/n/1/files") && !releases_path_within(NULL, "/s"),
              "elsewhere, or none");
        CHECK(!releases_path_within("/s/b/x", "/s/a/../b"), "a dir with \"..\" fails closed");
}

int main(void)
{
        test_hostile_members();
        test_round_trip_and_truncations();
        test_manifest();
        test_signature();
        test_policy_template();
        test_previous();
        test_path_within();
        test_sweep();
        return tap_done();
}
