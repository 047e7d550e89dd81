/* bundle_sign: a bundle's digest and Ed25519 signature (bundle.h), with
 * OpenSSL's libcrypto. The signed message is a fixed context string and
 * the SHA-256 of the content, so that a signature over a bundle can never
 * be taken for one over anything else the same key signs. */
#include "bundle.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#define SIGNED_CONTEXT "gadgetd bundle signature v1"   /* and its NUL */

static void signed_message(const uint8_t digest[BUNDLE_DIGEST_LEN], uint8_t *msg)
{
        memcpy(msg, SIGNED_CONTEXT, sizeof SIGNED_CONTEXT);
        memcpy(msg + sizeof SIGNED_CONTEXT, digest, BUNDLE_DIGEST_LEN);
}

int bundle_digest(const uint8_t *content, size_t len, uint8_t digest[BUNDLE_DIGEST_LEN])
{
        unsigned n = 0;
        return EVP_Digest(content, len, digest, &n, EVP_sha256(), NULL) == 1 && n == BUNDLE_DIGEST_LEN ? 0 : -EIO;
}

int bundle_verify(struct bundle *b)
{
        uint8_t msg[sizeof SIGNED_CONTEXT + BUNDLE_DIGEST_LEN];
        EVP_PKEY *key = NULL;
        EVP_MD_CTX *ctx = NULL;
        int r = bundle_digest(b->content, b->content_len, b->digest);
        if (r < 0 || !b->is_signed)
                return r < 0 ? r : -EBADMSG;
        signed_message(b->digest, msg);
        r = -EIO;
        key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, b->key, BUNDLE_KEY_LEN);
        ctx = EVP_MD_CTX_new();
        if (!key || !ctx || EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, key) != 1)
                goto out;
        r = EVP_DigestVerify(ctx, b->sig, BUNDLE_SIG_LEN, msg, sizeof msg) == 1 ? 0 : -EBADMSG;
out:
        EVP_MD_CTX_free(ctx);
        EVP_PKEY_free(key);
        return r;
}

int bundle_sign(void *pkey, const uint8_t digest[BUNDLE_DIGEST_LEN], uint8_t trailer[BUNDLE_TRAILER_LEN])
{
        uint8_t msg[sizeof SIGNED_CONTEXT + BUNDLE_DIGEST_LEN];
        size_t klen = BUNDLE_KEY_LEN, slen = BUNDLE_SIG_LEN;
        EVP_MD_CTX *ctx;
        int r = -EIO;
        if (EVP_PKEY_id(pkey) != EVP_PKEY_ED25519)
                return -EINVAL;
        signed_message(digest, msg);
        memcpy(trailer, BUNDLE_SIG_MAGIC, 8);
        if (EVP_PKEY_get_raw_public_key(pkey, trailer + 8, &klen) != 1 || klen != BUNDLE_KEY_LEN)
                return -EIO;
        if (!(ctx = EVP_MD_CTX_new()))
                return -ENOMEM;
        if (EVP_DigestSignInit(ctx, NULL, NULL, NULL, pkey) == 1 &&
            EVP_DigestSign(ctx, trailer + 8 + BUNDLE_KEY_LEN, &slen, msg, sizeof msg) == 1 && slen == BUNDLE_SIG_LEN)
                r = 0;
        EVP_MD_CTX_free(ctx);
        return r;
}

void bundle_key_hex(const uint8_t key[BUNDLE_KEY_LEN], char out[2 * BUNDLE_KEY_LEN + 1])
{
        for (size_t i = 0; i < BUNDLE_KEY_LEN; i++)
                snprintf(out + 2 * i, 3, "%02x", key[i]);
}

static int hexval(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        return c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int bundle_key_unhex(const char *hex, uint8_t key[BUNDLE_KEY_LEN])
{
        if (strlen(hex) != 2 * BUNDLE_KEY_LEN)
                return -EINVAL;
        for (size_t i = 0; i < BUNDLE_KEY_LEN; i++) {
                int h = hexval(hex[2 * i]), l = hexval(hex[2 * i + 1]);
                if (h < 0 || l < 0)
                        return -EINVAL;
                key[i] = (uint8_t)(h << 4 | l);
        }
        return 0;
}

void bundle_thread_idle(void)
{
        OPENSSL_thread_stop();
}
