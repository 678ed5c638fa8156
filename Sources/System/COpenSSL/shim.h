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

#endif
