/* tlsgen.h: a throwaway CA and certificates signed by it, made in memory
 * with OpenSSL and written as PEM files (tests/unit/check_tls.c and
 * fuzz/fuzz_tls_conn.c). Not for production: P-256 keys, one day. */
#ifndef LEAFD_TLSGEN_H
#define LEAFD_TLSGEN_H

#include <openssl/evp.h>
#include <openssl/x509.h>

struct tlsgen_ca {
    EVP_PKEY *key;
    X509     *cert;
};

/* A self-signed CA named cn. 0 or -1. */
int  tlsgen_ca(struct tlsgen_ca *ca, const char *cn);
void tlsgen_ca_free(struct tlsgen_ca *ca);
/* A certificate for cn signed by ca (ca NULL: self-signed), with its key,
 * written to cert_path and key_path (NULL: not written); the pair is also
 * returned when out_key/out_cert are not NULL (the caller frees them). 0 or
 * -1. */
int  tlsgen_leaf(const struct tlsgen_ca *ca, const char *cn,
                 const char *cert_path, const char *key_path,
                 EVP_PKEY **out_key, X509 **out_cert);
/* Write ca's certificate to path. 0 or -1. */
int  tlsgen_write_ca(const struct tlsgen_ca *ca, const char *path);

#endif
