// The parts of the system OpenSSL (libssl, libcrypto) that accessory-http calls.
// Function-like macros that Swift cannot call are wrapped here as static inline functions.
#ifndef ACCESSORY_HTTP_COPENSSL_SHIM_H
#define ACCESSORY_HTTP_COPENSSL_SHIM_H

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <stdlib.h>
#include <string.h>

// MARK: TLS (AccessoryTLS)

/// SNI: `SSL_set_tlsext_host_name` is a macro over `SSL_ctrl`.
static inline long accessory_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}

/// ALPN on a server (RFC 7301): the first of the server's protocols that the client offered;
/// none in common means the handshake goes on without ALPN (the client may still speak what it
/// knows the server speaks, as HTTP/2 with prior knowledge does).
typedef struct {
    unsigned int length;
    unsigned char protocols[];
} accessory_alpn_list;

static int accessory_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                                 unsigned int inlen, void *arg) {
    (void)ssl;
    const accessory_alpn_list *list = arg;
    unsigned char *selected = NULL;
    if (SSL_select_next_proto(&selected, outlen, list->protocols, list->length, in, inlen) != OPENSSL_NPN_NEGOTIATED) {
        return SSL_TLSEXT_ERR_NOACK;
    }
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
}

/// Installs the server's ALPN choice over `protocols` (wire format: length-prefixed names).
/// Returns the copy the callback reads, which the caller frees with `free` after the SSL_CTX.
static inline void *accessory_SSL_CTX_set_alpn_server(SSL_CTX *ctx, const unsigned char *protocols, unsigned int length) {
    accessory_alpn_list *list = malloc(sizeof(accessory_alpn_list) + length);
    if (list == NULL) return NULL;
    list->length = length;
    memcpy(list->protocols, protocols, length);
    SSL_CTX_set_alpn_select_cb(ctx, accessory_alpn_select, list);
    return list;
}

static inline void accessory_alpn_free(void *list) { free(list); }

static inline long accessory_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return SSL_CTX_set_min_proto_version(ctx, version);
}

static inline long accessory_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version) {
    return SSL_CTX_set_max_proto_version(ctx, version);
}

static inline long accessory_SSL_CTX_add1_chain_cert(SSL_CTX *ctx, X509 *cert) {
    return SSL_CTX_add1_chain_cert(ctx, cert);
}

/// Makes a drained memory BIO report end of file (instead of "retry") to the next read.
static inline long accessory_BIO_set_mem_eof_return(BIO *bio, int value) {
    return BIO_set_mem_eof_return(bio, value);
}

static inline int accessory_sk_X509_num(const STACK_OF(X509) *stack) {
    return sk_X509_num(stack);
}

static inline X509 *accessory_sk_X509_value(const STACK_OF(X509) *stack, int index) {
    return sk_X509_value(stack, index);
}

static inline void accessory_sk_X509_pop_free(STACK_OF(X509) *stack) {
    sk_X509_pop_free(stack, X509_free);
}

static inline uint64_t accessory_SSL_OP_NO_RENEGOTIATION(void) { return SSL_OP_NO_RENEGOTIATION; }
static inline uint64_t accessory_SSL_OP_NO_COMPRESSION(void) { return SSL_OP_NO_COMPRESSION; }
static inline uint64_t accessory_SSL_OP_IGNORE_UNEXPECTED_EOF(void) { return SSL_OP_IGNORE_UNEXPECTED_EOF; }
static inline unsigned long accessory_XN_FLAG_ONELINE(void) { return XN_FLAG_ONELINE & ~ASN1_STRFLGS_ESC_MSB; }

static inline STACK_OF(X509_NAME) *accessory_sk_X509_NAME_new_null(void) { return sk_X509_NAME_new_null(); }
static inline void accessory_sk_X509_NAME_pop_free(STACK_OF(X509_NAME) *stack) { sk_X509_NAME_pop_free(stack, X509_NAME_free); }

static inline int accessory_ERR_GET_LIB(unsigned long error) { return ERR_GET_LIB(error); }
static inline int accessory_ERR_GET_REASON(unsigned long error) { return ERR_GET_REASON(error); }
/// "unsupported": an algorithm no loaded provider implements (RC2 of a legacy PKCS#12, say).
static inline int accessory_ERR_R_UNSUPPORTED(void) { return ERR_R_UNSUPPORTED; }

/// TLS 1.2 signature algorithms, a macro over `SSL_CTX_ctrl`.
static inline long accessory_SSL_CTX_set1_sigalgs_list(SSL_CTX *ctx, const char *list) {
    return SSL_CTX_set1_sigalgs_list(ctx, list);
}

// MARK: Subject alternative names, read one by one so Swift sees the raw bytes (a name may
// hold any byte, NUL and control characters included; Swift escapes them before printing).

static inline GENERAL_NAMES *accessory_X509_subject_alt_names(X509 *cert) {
    return X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
}

static inline int accessory_GENERAL_NAMES_count(const GENERAL_NAMES *names) {
    return sk_GENERAL_NAME_num(names);
}

/// The type (GEN_DNS, GEN_IPADD, …) of name `index`; for DNS and IP names, its raw bytes.
static inline int accessory_GENERAL_NAMES_get(const GENERAL_NAMES *names, int index, const unsigned char **data, int *length) {
    const GENERAL_NAME *name = sk_GENERAL_NAME_value(names, index);
    *data = NULL;
    *length = 0;
    if (name == NULL) return -1;
    if (name->type == GEN_DNS) {
        *data = ASN1_STRING_get0_data(name->d.dNSName);
        *length = ASN1_STRING_length(name->d.dNSName);
    } else if (name->type == GEN_IPADD) {
        *data = ASN1_STRING_get0_data(name->d.iPAddress);
        *length = ASN1_STRING_length(name->d.iPAddress);
    }
    return name->type;
}

static inline void accessory_GENERAL_NAMES_free(GENERAL_NAMES *names) { GENERAL_NAMES_free(names); }

static inline int accessory_GEN_DNS(void) { return GEN_DNS; }
static inline int accessory_GEN_IPADD(void) { return GEN_IPADD; }

// MARK: Verification against one pinned CA

/// Whether `leaf` verifies, with `untrusted` (the peer's other certificates) as intermediates,
/// to `anchor` as the ONLY trust anchor: the built chain must end at `anchor`, every signature
/// on the way must verify, CA constraints and the TLS server purpose hold. Dates are checked
/// only when `check_time` is non-zero (pins ignore them, see docs/tls.md). `auth_level` is the
/// minimum security level of keys and signatures on the chain. The system roots and every
/// other anchor play no part, so a pin on a CA can be met only by a chain that CA signed, and
/// never by a copy of the CA's certificate appended to someone else's chain.
static inline int accessory_X509_verify_with_sole_anchor(X509 *leaf, STACK_OF(X509) *untrusted, X509 *anchor, int check_time, int auth_level) {
    int verified = 0;
    X509_STORE *store = X509_STORE_new();
    X509_STORE_CTX *context = X509_STORE_CTX_new();
    if (store != NULL && context != NULL && X509_STORE_add_cert(store, anchor) == 1
        && X509_STORE_CTX_init(context, store, leaf, untrusted) == 1) {
        X509_VERIFY_PARAM *param = X509_STORE_CTX_get0_param(context);
        unsigned long flags = X509_V_FLAG_PARTIAL_CHAIN;
        if (!check_time) flags |= X509_V_FLAG_NO_CHECK_TIME;
        X509_VERIFY_PARAM_set_flags(param, flags);
        X509_VERIFY_PARAM_set_auth_level(param, auth_level);
        X509_STORE_CTX_set_purpose(context, X509_PURPOSE_SSL_SERVER);
        if (X509_verify_cert(context) == 1) {
            STACK_OF(X509) *chain = X509_STORE_CTX_get0_chain(context);
            int count = chain == NULL ? 0 : sk_X509_num(chain);
            verified = count > 1 && X509_cmp(sk_X509_value(chain, count - 1), anchor) == 0;
        }
    }
    X509_STORE_CTX_free(context);
    X509_STORE_free(store);
    ERR_clear_error();
    return verified;
}

#endif
