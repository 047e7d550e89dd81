/* nodelink_tls: what a node proves and trusts on the peer link — its
 * certificate, key and PeerCA read once, checked, and made into the TLS
 * contexts of both ends — and the rule that names a node by its
 * certificate. */
#include "nodelink_tls.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "system/secret_file.h"
#include "contract.h"

#define NODE_MAX NODELINK_NODE_MAX
#define PEM_MAX (1u << 20)     /* a certificate or CA file */
#define KEY_MAX (64u << 10)    /* a key file */
#define MAX_DEPTH 4            /* certificates between a node and PeerCA */

/* A PEM passphrase is never asked for: a prompt would block the loop. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
        return -1;
}

/* Copies an ASN.1 string that must be a node name. 1 if it is one. */
static int node_string(const unsigned char *s, int len, char name[NODE_MAX + 1])
{
        if (len <= 0 || len > NODE_MAX || memchr(s, '\0', (size_t)len))
                return 0;
        memcpy(name, s, (size_t)len);
        name[len] = '\0';
        return gadget_name_ok(name);
}

int nodelink_tls_node(X509 *x, char name[NODE_MAX + 1], char *why, size_t len)
{
        int n = 0, ok = 0;
        GENERAL_NAMES *gens = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
        for (int i = 0; gens && i < sk_GENERAL_NAME_num(gens); i++) {
                const GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, i);
                if (g->type != GEN_DNS)
                        continue;
                if (n++ == 0)
                        ok = node_string(ASN1_STRING_get0_data(g->d.dNSName), ASN1_STRING_length(g->d.dNSName), name);
        }
        GENERAL_NAMES_free(gens);
        /* No DNS subjectAltName: the commonName(s) of the subject. */
        X509_NAME *subject = n ? NULL : X509_get_subject_name(x);
        for (int i = -1; subject && (i = X509_NAME_get_index_by_NID(subject, NID_commonName, i)) >= 0;) {
                const ASN1_STRING *cn = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i));
                if (n++ == 0)
                        ok = node_string(ASN1_STRING_get0_data(cn), ASN1_STRING_length(cn), name);
        }
        if (n == 0)
                snprintf(why, len, "names no node (no DNS subjectAltName, no commonName)");
        else if (n > 1)
                snprintf(why, len, "names %d nodes, not one", n);
        else if (!ok)
                snprintf(why, len, "names something that is not a node name (1 to 63 of a-z 0-9 _ -)");
        else
                return 0;
        return -EPERM;
}

/* Reads a PEM file of certificates (at least one) into a new stack. */
static int load_certs(const char *setting, const char *path, STACK_OF(X509) **out, char *err, size_t len)
{
        char *text = NULL;
        size_t n = 0;
        int e = secret_file_read(path, PEM_MAX, SECRET_ANY_MODE, NULL, &text, &n);
        if (e < 0) {
                snprintf(err, len, "%s=%s: cannot read: %s", setting, path, secret_file_why(e));
                return e;
        }
        STACK_OF(X509) *certs = sk_X509_new_null();
        BIO *bio = BIO_new_mem_buf(text, (int)n);
        X509 *x;
        while (certs && bio && (x = PEM_read_bio_X509(bio, NULL, no_passphrase, NULL)))
                if (!sk_X509_push(certs, x))
                        X509_free(x);
        ERR_clear_error();
        BIO_free(bio);
        secret_file_free(text, n);
        if (!certs || sk_X509_num(certs) == 0) {
                snprintf(err, len, "%s=%s: no PEM certificate in it", setting, path);
                sk_X509_pop_free(certs, X509_free);
                return -EINVAL;
        }
        *out = certs;
        return 0;
}

/* Reads the private key. Why this is safe: the file is read once by
 * secret_file (wiped after), never with a passphrase prompt, and no error
 * quotes anything of it. */
static int load_key(const char *path, EVP_PKEY **out, char *err, size_t len)
{
        char *text = NULL;
        size_t n = 0;
        struct stat st;
        /* As libpq and ssh: a key others may read is refused, not used
         * (SECRET_PRIVATE). Why not any group, as libpq allows: a member
         * of a group such as Debian's ssl-cert could then be this node to
         * every other, gatekeepers' calls and all. */
        int e = secret_file_read(path, KEY_MAX, SECRET_PRIVATE, &st, &text, &n);
        if (e == -EPERM) {
                snprintf(err, len, "PeerKey=%s: the private key may be read or changed by others (mode %04o, "
                         "uid %u, gid %u): make it mode 0600 (0640 only as root:root)", path,
                         (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, (unsigned)st.st_gid);
                return e;
        }
        if (e < 0) {
                snprintf(err, len, "PeerKey=%s: cannot read: %s", path, secret_file_why(e));
                return e;
        }
        BIO *bio = BIO_new_mem_buf(text, (int)n);
        EVP_PKEY *key = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;
        ERR_clear_error();
        BIO_free(bio);
        secret_file_free(text, n);
        if (!key) {
                snprintf(err, len, "PeerKey=%s: not an unencrypted PEM private key", path);
                return -EINVAL;
        }
        *out = key;
        return 0;
}

/* What this node proves and trusts, read once at nodelink_new. */
struct creds {
        STACK_OF(X509) *chain;      /* this node's certificate first */
        STACK_OF(X509) *cas;
        EVP_PKEY *key;
};

static void creds_free(struct creds *c)
{
        sk_X509_pop_free(c->chain, X509_free);
        sk_X509_pop_free(c->cas, X509_free);
        EVP_PKEY_free(c->key);
}

/* Checks that this node's certificate chains to PeerCA (an operator's
 * mistake is told at start, not by every peer later). */
static int check_chain(const struct nodelink_config *cfg, const struct creds *c, char *err, size_t len)
{
        X509_STORE *store = X509_STORE_new();
        X509_STORE_CTX *ctx = X509_STORE_CTX_new();
        STACK_OF(X509) *rest = sk_X509_dup(c->chain);
        int e = -ENOMEM;
        if (!store || !ctx || !rest)
                goto out;
        (void)sk_X509_shift(rest);
        for (int i = 0; i < sk_X509_num(c->cas); i++)
                X509_STORE_add_cert(store, sk_X509_value(c->cas, i));
        if (!X509_STORE_CTX_init(ctx, store, sk_X509_value(c->chain, 0), rest))
                goto out;
        e = 0;
        if (X509_verify_cert(ctx) != 1) {
                snprintf(err, len, "PeerCertificate=%s: not accepted by PeerCA=%s: %s", cfg->cert, cfg->ca,
                         X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx)));
                e = -EPERM;
        }
out:
        if (e == -ENOMEM)
                snprintf(err, len, "PeerCertificate=%s: out of memory", cfg->cert);
        ERR_clear_error();
        sk_X509_free(rest);
        X509_STORE_CTX_free(ctx);
        X509_STORE_free(store);
        return e;
}

static int creds_load(const struct nodelink_config *cfg, struct creds *c, char *err, size_t len)
{
        char name[NODE_MAX + 1], why[128];
        int e;
        if ((e = load_certs("PeerCertificate", cfg->cert, &c->chain, err, len)) < 0 ||
            (e = load_key(cfg->key, &c->key, err, len)) < 0 ||
            (e = load_certs("PeerCA", cfg->ca, &c->cas, err, len)) < 0)
                return e;
        if (X509_check_private_key(sk_X509_value(c->chain, 0), c->key) != 1) {
                ERR_clear_error();
                snprintf(err, len, "PeerKey=%s: does not match PeerCertificate=%s", cfg->key, cfg->cert);
                return -EINVAL;
        }
        if (nodelink_tls_node(sk_X509_value(c->chain, 0), name, why, sizeof why) < 0) {
                snprintf(err, len, "PeerCertificate=%s: %s", cfg->cert, why);
                return -EINVAL;
        }
        if (strcmp(name, cfg->node) != 0) {
                snprintf(err, len, "PeerCertificate=%s: names node %s, not %s", cfg->cert, name, cfg->node);
                return -EINVAL;
        }
        return check_chain(cfg, c, err, len);
}

/* One side's TLS context: TLS 1.3 only, this node's certificate and key,
 * PeerCA as the only trust (no default verify paths are ever loaded), the
 * peer's certificate required, no session resumption (every session proves
 * its key again). */
static SSL_CTX *ctx_new(const struct creds *c, bool server)
{
        SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
        if (!ctx)
                return NULL;
        X509_STORE *store = SSL_CTX_get_cert_store(ctx);
        bool ok = SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) &&
                  SSL_CTX_use_certificate(ctx, sk_X509_value(c->chain, 0)) == 1 &&
                  SSL_CTX_use_PrivateKey(ctx, c->key) == 1 && SSL_CTX_check_private_key(ctx) == 1;
        for (int i = 1; ok && i < sk_X509_num(c->chain); i++)
                ok = SSL_CTX_add1_chain_cert(ctx, sk_X509_value(c->chain, i));
        for (int i = 0; ok && i < sk_X509_num(c->cas); i++)
                ok = X509_STORE_add_cert(store, sk_X509_value(c->cas, i));
        if (!ok) {
                SSL_CTX_free(ctx);
                ERR_clear_error();
                return NULL;
        }
        /* Why this is safe: a server without FAIL_IF_NO_PEER_CERT would
         * take a session with no certificate at all. */
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | (server ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), NULL);
        SSL_CTX_set_verify_depth(ctx, MAX_DEPTH);
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
        /* The chain sent is PeerCertificate='s file, not PeerCA. */
        SSL_CTX_set_mode(ctx, SSL_MODE_NO_AUTO_CHAIN);
        if (server)
                SSL_CTX_set_num_tickets(ctx, 0);
        return ctx;
}

int nodelink_tls_new(const struct nodelink_config *cfg, SSL_CTX **server, SSL_CTX **client, char *err, size_t len)
{
        struct creds c = { 0 };
        SSL_CTX *s = NULL, *cl = NULL;
        int e = creds_load(cfg, &c, err, len);
        if (e == 0 && (!(s = ctx_new(&c, true)) || !(cl = ctx_new(&c, false)))) {
                snprintf(err, len, "the peer link: cannot set up TLS (out of memory?)");
                SSL_CTX_free(s);
                e = -ENOMEM;
        }
        creds_free(&c);
        if (e < 0)
                return e;
        *server = s;
        *client = cl;
        return 0;
}
