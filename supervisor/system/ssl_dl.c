/* ssl_dl: libssl, libcrypto and libevent_openssl, loaded when gadgetd
 * first needs them (the peer link of a cluster node, a bundle's signature
 * at gadgetctl install, a backup's checksum) instead of at every start. Their loading and relocation took about 1 ms of each `gadgetd
 * run`, which never uses TLS (bench/notes.md, issue 36).
 *
 * The functions below carry the libraries' own names and forward to the
 * loaded ones; they are hidden, so nothing but gadgetd's own code binds to
 * them. Only the peer link, a bundle's digest and signature
 * (proto/bundle_sign.c) and a backup's checksum (proto/backup.c) call
 * them, and only after ssl_dl_load succeeded (cluster/forward.c,
 * control/install.c, store/snapshot.c); before that each returns as the library
 * does when out of memory (0 or NULL), never calling through an empty
 * slot. The table is this process's one copy of the entry points, as the
 * dynamic linker's would be: it never changes after loading. */
#include "ssl_dl.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "dl.h"

#define HIDDEN __attribute__((visibility("hidden")))

/* Every function the peer link calls (nm -D --undefined-only gadgetd,
 * where these libraries were linked): return type, name, parameters,
 * arguments. The macros of the headers (SSL_CTX_set_mode, sk_X509_push,
 * ...) expand to some of these. */
#define SSL_DL_FUNCS(F, V) \
        F(const unsigned char *, ASN1_STRING_get0_data, (const ASN1_STRING *x), (x)) \
        F(int, ASN1_STRING_length, (const ASN1_STRING *x), (x)) \
        F(int, BIO_free, (BIO *a), (a)) \
        F(BIO *, BIO_new_mem_buf, (const void *buf, int len), (buf, len)) \
        V(ERR_clear_error, (void), ()) \
        V(OPENSSL_thread_stop, (void), ()) \
        F(const char *, ERR_reason_error_string, (unsigned long e), (e)) \
        F(int, EVP_Digest, (const void *d, size_t n, unsigned char *md, unsigned int *len, const EVP_MD *t, \
                            ENGINE *e), (d, n, md, len, t, e)) \
        F(int, EVP_DigestFinal_ex, (EVP_MD_CTX *c, unsigned char *md, unsigned int *n), (c, md, n)) \
        F(int, EVP_DigestInit_ex, (EVP_MD_CTX *c, const EVP_MD *t, ENGINE *e), (c, t, e)) \
        F(int, EVP_DigestSign, (EVP_MD_CTX *c, unsigned char *sig, size_t *n, const unsigned char *m, size_t mn), \
          (c, sig, n, m, mn)) \
        F(int, EVP_DigestSignInit, (EVP_MD_CTX *c, EVP_PKEY_CTX **pc, const EVP_MD *t, ENGINE *e, EVP_PKEY *k), \
          (c, pc, t, e, k)) \
        F(int, EVP_DigestVerify, (EVP_MD_CTX *c, const unsigned char *sig, size_t n, const unsigned char *m, \
                                  size_t mn), (c, sig, n, m, mn)) \
        F(int, EVP_DigestUpdate, (EVP_MD_CTX *c, const void *d, size_t n), (c, d, n)) \
        F(int, EVP_DigestVerifyInit, (EVP_MD_CTX *c, EVP_PKEY_CTX **pc, const EVP_MD *t, ENGINE *e, EVP_PKEY *k), \
          (c, pc, t, e, k)) \
        V(EVP_MD_CTX_free, (EVP_MD_CTX *c), (c)) \
        F(EVP_MD_CTX *, EVP_MD_CTX_new, (void), ()) \
        F(int, EVP_PKEY_get_id, (const EVP_PKEY *k), (k)) \
        F(int, EVP_PKEY_get_raw_public_key, (const EVP_PKEY *k, unsigned char *pub, size_t *n), (k, pub, n)) \
        F(EVP_PKEY *, EVP_PKEY_new_raw_public_key, (int type, ENGINE *e, const unsigned char *pub, size_t n), \
          (type, e, pub, n)) \
        F(const EVP_MD *, EVP_sha256, (void), ()) \
        V(EVP_PKEY_free, (EVP_PKEY *k), (k)) \
        V(GENERAL_NAMES_free, (GENERAL_NAMES *a), (a)) \
        F(OPENSSL_STACK *, OPENSSL_sk_dup, (const OPENSSL_STACK *st), (st)) \
        V(OPENSSL_sk_free, (OPENSSL_STACK *st), (st)) \
        F(OPENSSL_STACK *, OPENSSL_sk_new_null, (void), ()) \
        F(int, OPENSSL_sk_num, (const OPENSSL_STACK *st), (st)) \
        V(OPENSSL_sk_pop_free, (OPENSSL_STACK *st, void (*func)(void *)), (st, func)) \
        F(int, OPENSSL_sk_push, (OPENSSL_STACK *st, const void *data), (st, data)) \
        F(void *, OPENSSL_sk_shift, (OPENSSL_STACK *st), (st)) \
        F(void *, OPENSSL_sk_value, (const OPENSSL_STACK *st, int i), (st, i)) \
        F(EVP_PKEY *, PEM_read_bio_PrivateKey, (BIO *b, EVP_PKEY **x, pem_password_cb *cb, void *u), (b, x, cb, u)) \
        F(X509 *, PEM_read_bio_X509, (BIO *b, X509 **x, pem_password_cb *cb, void *u), (b, x, cb, u)) \
        F(int, SSL_CTX_check_private_key, (const SSL_CTX *ctx), (ctx)) \
        F(long, SSL_CTX_ctrl, (SSL_CTX *ctx, int cmd, long larg, void *parg), (ctx, cmd, larg, parg)) \
        V(SSL_CTX_free, (SSL_CTX *ctx), (ctx)) \
        F(X509_STORE *, SSL_CTX_get_cert_store, (const SSL_CTX *ctx), (ctx)) \
        F(SSL_CTX *, SSL_CTX_new, (const SSL_METHOD *m), (m)) \
        F(int, SSL_CTX_set_num_tickets, (SSL_CTX *ctx, size_t n), (ctx, n)) \
        F(uint64_t, SSL_CTX_set_options, (SSL_CTX *ctx, uint64_t op), (ctx, op)) \
        V(SSL_CTX_set_verify, (SSL_CTX *ctx, int mode, SSL_verify_cb cb), (ctx, mode, cb)) \
        V(SSL_CTX_set_verify_depth, (SSL_CTX *ctx, int depth), (ctx, depth)) \
        F(int, SSL_CTX_use_PrivateKey, (SSL_CTX *ctx, EVP_PKEY *k), (ctx, k)) \
        F(int, SSL_CTX_use_certificate, (SSL_CTX *ctx, X509 *x), (ctx, x)) \
        F(int, SSL_do_handshake, (SSL *s), (s)) \
        V(SSL_free, (SSL *s), (s)) \
        F(X509 *, SSL_get0_peer_certificate, (const SSL *s), (s)) \
        F(int, SSL_get_error, (const SSL *s, int ret), (s, ret)) \
        F(long, SSL_get_verify_result, (const SSL *s), (s)) \
        F(SSL *, SSL_new, (SSL_CTX *ctx), (ctx)) \
        F(int, SSL_set1_host, (SSL *s, const char *host), (s, host)) \
        V(SSL_set_accept_state, (SSL *s), (s)) \
        F(int, SSL_set_fd, (SSL *s, int fd), (s, fd)) \
        V(SSL_set_hostflags, (SSL *s, unsigned int flags), (s, flags)) \
        F(const SSL_METHOD *, TLS_client_method, (void), ()) \
        F(const SSL_METHOD *, TLS_server_method, (void), ()) \
        F(ASN1_STRING *, X509_NAME_ENTRY_get_data, (const X509_NAME_ENTRY *ne), (ne)) \
        F(X509_NAME_ENTRY *, X509_NAME_get_entry, (const X509_NAME *n, int loc), (n, loc)) \
        F(int, X509_NAME_get_index_by_NID, (const X509_NAME *n, int nid, int last), (n, nid, last)) \
        V(X509_STORE_CTX_free, (X509_STORE_CTX *ctx), (ctx)) \
        F(int, X509_STORE_CTX_get_error, (const X509_STORE_CTX *ctx), (ctx)) \
        F(int, X509_STORE_CTX_init, (X509_STORE_CTX *ctx, X509_STORE *st, X509 *x, STACK_OF(X509) *chain), \
          (ctx, st, x, chain)) \
        F(X509_STORE_CTX *, X509_STORE_CTX_new, (void), ()) \
        F(int, X509_STORE_add_cert, (X509_STORE *st, X509 *x), (st, x)) \
        V(X509_STORE_free, (X509_STORE *st), (st)) \
        F(X509_STORE *, X509_STORE_new, (void), ()) \
        F(int, X509_check_private_key, (const X509 *x, const EVP_PKEY *k), (x, k)) \
        V(X509_free, (X509 *x), (x)) \
        F(void *, X509_get_ext_d2i, (const X509 *x, int nid, int *crit, int *idx), (x, nid, crit, idx)) \
        F(X509_NAME *, X509_get_subject_name, (const X509 *x), (x)) \
        F(int, X509_verify_cert, (X509_STORE_CTX *ctx), (ctx)) \
        F(const char *, X509_verify_cert_error_string, (long n), (n)) \
        F(unsigned long, bufferevent_get_openssl_error, (struct bufferevent *bev), (bev)) \
        F(struct ssl_st *, bufferevent_openssl_get_ssl, (struct bufferevent *bev), (bev)) \
        V(bufferevent_openssl_set_allow_dirty_shutdown, (struct bufferevent *bev, int allow), (bev, allow)) \
        F(struct bufferevent *, bufferevent_openssl_socket_new, \
          (struct event_base *base, evutil_socket_t fd, struct ssl_st *ssl, enum bufferevent_ssl_state state, \
           int options), (base, fd, ssl, state, options))

/* The slots: each typed as the header declares its function. */
#define SLOT(ret, name, params, args) __typeof__(&name) name;
#define SLOT_V(name, params, args) __typeof__(&name) name;
static struct {
        void *lib;
        SSL_DL_FUNCS(SLOT, SLOT_V)
} fn;

#define ENTRY(ret, name, params, args) { (void **)&fn.name, #name },
#define ENTRY_V(name, params, args) { (void **)&fn.name, #name },

int ssl_dl_load(char *err, size_t errlen)
{
        static const struct dl_sym syms[] = { SSL_DL_FUNCS(ENTRY, ENTRY_V) };
        if (fn.lib)
                return 0;
        void *lib = dl_load(SSL_DL_SONAME, syms, sizeof syms / sizeof *syms, err, errlen);
        if (!lib)
                return -ENOENT;
        fn.lib = lib;
        return 0;
}

#define FORWARD(ret, name, params, args) \
        HIDDEN ret name params \
        { \
                return fn.lib ? fn.name args : (ret)0; \
        }
#define FORWARD_V(name, params, args) \
        HIDDEN void name params \
        { \
                if (fn.lib) \
                        fn.name args; \
        }
SSL_DL_FUNCS(FORWARD, FORWARD_V)
