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

// MARK: TLS (AccessoryTLS)

/// SNI: `SSL_set_tlsext_host_name` is a macro over `SSL_ctrl`.
static inline long accessory_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}

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

/// The subject alternative names of `cert` as text ("DNS:a, IP:1.2.3.4"), written into `out`
/// (NUL-terminated, truncated to `capacity`). Returns the number of names.
static inline int accessory_X509_san_text(X509 *cert, char *out, size_t capacity) {
    if (capacity == 0) return 0;
    out[0] = 0;
    GENERAL_NAMES *names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
    if (names == NULL) return 0;
    int count = sk_GENERAL_NAME_num(names);
    size_t used = 0;
    for (int i = 0; i < count; i++) {
        const GENERAL_NAME *name = sk_GENERAL_NAME_value(names, i);
        char item[300];
        item[0] = 0;
        if (name->type == GEN_DNS) {
            const unsigned char *data = ASN1_STRING_get0_data(name->d.dNSName);
            int length = ASN1_STRING_length(name->d.dNSName);
            snprintf(item, sizeof item, "DNS:%.*s", length > 255 ? 255 : length, (const char *)data);
        } else if (name->type == GEN_IPADD) {
            const unsigned char *data = ASN1_STRING_get0_data(name->d.iPAddress);
            int length = ASN1_STRING_length(name->d.iPAddress);
            if (length == 4) {
                snprintf(item, sizeof item, "IP:%u.%u.%u.%u", data[0], data[1], data[2], data[3]);
            } else {
                snprintf(item, sizeof item, "IP:(IPv6)");
            }
        } else {
            continue;
        }
        int written = snprintf(out + used, capacity - used, "%s%s", used == 0 ? "" : ", ", item);
        if (written < 0 || (size_t)written >= capacity - used) break;
        used += (size_t)written;
    }
    GENERAL_NAMES_free(names);
    return count;
}

#endif
