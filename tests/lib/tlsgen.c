/* tlsgen.c: throwaway certificates for tests (see tlsgen.h). */
#include <stdio.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "tlsgen.h"

static X509 *
make_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key,
          int is_ca)
{
    static long serial = 1;
    X509 *x = X509_new();
    X509_NAME *name;
    X509V3_CTX v3;
    X509_EXTENSION *ext;

    if (x == NULL)
        return NULL;
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, key);
    name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, issuer != NULL ? X509_get_subject_name(issuer)
                                           : name);
    X509V3_set_ctx(&v3, issuer != NULL ? issuer : x, x, NULL, NULL, 0);
    ext = X509V3_EXT_conf_nid(NULL, &v3, NID_basic_constraints,
                              is_ca ? "critical,CA:TRUE" : "CA:FALSE");
    if (ext != NULL) {
        X509_add_ext(x, ext, -1);
        X509_EXTENSION_free(ext);
    }
    if (!is_ca) {
        ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name,
                                  "DNS:localhost,IP:127.0.0.1");
        if (ext != NULL) {
            X509_add_ext(x, ext, -1);
            X509_EXTENSION_free(ext);
        }
    }
    if (X509_sign(x, issuer_key != NULL ? issuer_key : key, EVP_sha256()) == 0) {
        X509_free(x);
        return NULL;
    }
    return x;
}

int
tlsgen_ca(struct tlsgen_ca *ca, const char *cn)
{
    ca->key = EVP_EC_gen("P-256");
    ca->cert = ca->key != NULL ? make_cert(ca->key, cn, NULL, NULL, 1) : NULL;
    if (ca->cert == NULL) {
        tlsgen_ca_free(ca);
        return -1;
    }
    return 0;
}

void
tlsgen_ca_free(struct tlsgen_ca *ca)
{
    EVP_PKEY_free(ca->key);
    X509_free(ca->cert);
    ca->key = NULL;
    ca->cert = NULL;
}

static int
write_pem(const char *path, EVP_PKEY *key, X509 *cert)
{
    FILE *f = fopen(path, "w");
    int ok;

    if (f == NULL)
        return -1;
    ok = key != NULL ? PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL)
                     : PEM_write_X509(f, cert);
    return fclose(f) == 0 && ok ? 0 : -1;
}

int
tlsgen_leaf(const struct tlsgen_ca *ca, const char *cn, const char *cert_path,
            const char *key_path, EVP_PKEY **out_key, X509 **out_cert)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *cert = NULL;
    int rc = -1;

    if (key == NULL)
        return -1;
    cert = make_cert(key, cn, ca != NULL ? ca->cert : NULL,
                     ca != NULL ? ca->key : NULL, 0);
    if (cert == NULL)
        goto cleanup;
    if ((cert_path != NULL && write_pem(cert_path, NULL, cert) == -1) ||
        (key_path != NULL && write_pem(key_path, key, NULL) == -1))
        goto cleanup;
    if (out_key != NULL) {
        *out_key = key;
        key = NULL;
    }
    if (out_cert != NULL) {
        *out_cert = cert;
        cert = NULL;
    }
    rc = 0;

cleanup:
    EVP_PKEY_free(key);
    X509_free(cert);
    return rc;
}

int
tlsgen_write_ca(const struct tlsgen_ca *ca, const char *path)
{
    return write_pem(path, NULL, ca->cert);
}
