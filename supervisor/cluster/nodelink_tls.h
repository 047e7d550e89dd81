/* nodelink_tls: the certificates of the peer link (supervisor/cluster/
 * nodelink.c) — reading and checking PeerCertificate=, PeerKey= and
 * PeerCA=, the TLS contexts, and which node a certificate names. */
#pragma once

#include <stddef.h>
#include <openssl/ssl.h>

#include "nodelink.h"

#define NODELINK_NODE_MAX 63

/* Reads cfg's certificate, key and CA once, checks that the key matches,
 * that the certificate chains to PeerCA and names cfg->node, and makes the
 * server's and the client's contexts (TLS 1.3 only, PeerCA the only trust,
 * the peer's certificate required). 0, or -errno with err naming the file
 * and what is wrong (never any key material). */
int nodelink_tls_new(const struct nodelink_config *cfg, SSL_CTX **server, SSL_CTX **client, char *err, size_t len);
/* The one node certificate x names (nodelink.h: its DNS subjectAltNames,
 * else its commonName; exactly one, a node name) into name. 0, or -EPERM
 * with why ("names 2 nodes, not one"). */
int nodelink_tls_node(X509 *x, char name[NODELINK_NODE_MAX + 1], char *why, size_t len);
