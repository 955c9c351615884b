/* http_tls.c: the TLS context of leafd's listeners and the non-blocking
 * handshake, read and write that http_conn.c uses on a TLS connection (see
 * http_tls.h).
 *
 * Defaults: TLS 1.2 and 1.3 (tls.min_version raises the floor), OpenSSL's
 * default cipher lists at its default security level (no RC4, 3DES, export
 * or anonymous suites; forward secrecy first), the server's cipher order, no
 * renegotiation, no compression. A peer that closes without close_notify is
 * an ordinary EOF: HTTP and RESP frame their own messages, and leafd only
 * acts on complete ones.
 *
 * DESIGN (the connection's side, in http_conn.c). A connection from a TLS
 * listener first runs its handshake on the same read and write events
 * (conn_handshake: OpenSSL's WANT_READ/WANT_WRITE pick the event), under its
 * own deadline, tls_handshake_timeout_ms after accept; it holds none of the
 * thread's buffers meanwhile (only OpenSSL's state) and counts against
 * max_connections like any other. After that only the bytes' path differs:
 * http_tls_recv and http_tls_send stand in for recv(2) and send(2), so every
 * limit of http_conn.c holds as it is. SSL_read may keep bytes that the
 * socket will not signal again (decrypted ones, a record larger than the
 * room left, and with read-ahead records read but not yet decrypted);
 * conn_update makes the read event active while SSL_has_pending says so,
 * so a pipelined request never waits for bytes that already arrived.
 */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "http_tls.h"
#include "log.h"
#include "util.h"

struct http_tls {
    /* The current context; lock guards the pointer (not the context, which
     * OpenSSL lets many threads use once it is set up). */
    pthread_mutex_t lock;
    SSL_CTX        *ctx;
    unsigned long   generation;     /* under lock */
    int64_t         not_after;      /* under lock: the certificate's notAfter
                                       (Unix seconds), 0 unknown */
    char           *cert_file, *key_file, *ca_file, *ciphers, *ciphersuites;
    int             client_auth, min_tls13;
};

/* OpenSSL's reason for the last failure, its queue emptied. */
static const char *
tls_reason(char *buf, size_t cap)
{
    unsigned long e, last = 0;

    while ((e = ERR_get_error()) != 0)
        last = e;
    if (last == 0)
        return "unknown OpenSSL error";
    ERR_error_string_n(last, buf, cap);
    return buf;
}

/* A file the context needs: readable, or a clear error naming its key. */
static int
tls_file_ok(const char *key, const char *path, char **cause)
{
    FILE *f = fopen(path, "r");

    if (f == NULL) {
        *cause = xasprintf("%s %s: %s", key, path, strerror(errno));
        return -1;
    }
    fclose(f);
    return 0;
}

/* ALPN wire lists by enum http_tls_alpn; an SSL's app data points to one. */
static const struct tls_alpn_list {
    const unsigned char *wire;
    unsigned             len;
} tls_alpn_lists[] = {
    [HTTP_TLS_ALPN_NONE] = { NULL, 0 },
    [HTTP_TLS_ALPN_HTTP1] = { (const unsigned char *)"\x08http/1.1", 9 },
    [HTTP_TLS_ALPN_H2_HTTP1] = { (const unsigned char *)"\x02h2\x08http/1.1",
                                 12 },
    [HTTP_TLS_ALPN_H2] = { (const unsigned char *)"\x02h2", 3 },
};

static int
tls_alpn_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
            const unsigned char *in, unsigned int inlen, void *arg)
{
    const struct tls_alpn_list *l = SSL_get_app_data(ssl);
    unsigned char *sel = NULL;

    (void)arg;
    if (l == NULL || l->wire == NULL ||
        SSL_select_next_proto(&sel, outlen, l->wire, l->len, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

/* The notAfter of ctx's certificate, in Unix seconds; 0 when it cannot be
 * read (OpenSSL has checked the certificate by then, so it never is). */
static int64_t
tls_not_after(SSL_CTX *ctx)
{
    X509 *cert = SSL_CTX_get0_certificate(ctx);
    const ASN1_TIME *t = cert != NULL ? X509_get0_notAfter(cert) : NULL;
    struct tm tm;

    if (t == NULL || ASN1_TIME_to_tm(t, &tm) != 1)
        return 0;
    return (int64_t)timegm(&tm);
}

/* A new context from tls's files and settings, or NULL with *cause. */
static SSL_CTX *
tls_ctx_build(struct http_tls *tls, char **cause)
{
    char why[256];
    SSL_CTX *ctx = NULL;
    int mode;

    if (tls_file_ok("tls.cert_file", tls->cert_file, cause) == -1 ||
        tls_file_ok("tls.key_file", tls->key_file, cause) == -1 ||
        (tls->ca_file[0] != '\0' &&
         tls_file_ok("tls.ca_file", tls->ca_file, cause) == -1))
        return NULL;
    ERR_clear_error();
    ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL) {
        *cause = xasprintf("SSL_CTX_new: %s", tls_reason(why, sizeof why));
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, tls->min_tls13 ? TLS1_3_VERSION
                                                      : TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                        SSL_OP_CIPHER_SERVER_PREFERENCE |
                        SSL_OP_IGNORE_UNEXPECTED_EOF);
    /* Partial writes: conn_flush keeps what is unsent, and its buffer may
     * move (grow) between tries. No auto chain: the chain sent is the one
     * in tls.cert_file, as documented, and a handshake does not build one
     * from the CA store (a chain verification each time, against
     * tls.ca_file's CAs when client certificates are on). */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                     SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                     SSL_MODE_RELEASE_BUFFERS | SSL_MODE_NO_AUTO_CHAIN);
    /* Read ahead: one read(2) takes what has arrived, not a record header
     * and then its body (http_tls_pending counts what it keeps). */
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"leafd", 5);
    /* Resumption by stateless tickets only: no server-side session store
     * to grow, lock and sweep (OpenSSL walks it every 255 handshakes). */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER |
                                   SSL_SESS_CACHE_NO_INTERNAL);
    if (tls->ciphers[0] != '\0' &&
        SSL_CTX_set_cipher_list(ctx, tls->ciphers) != 1) {
        *cause = xasprintf("tls.ciphers \"%s\": %s", tls->ciphers,
                           tls_reason(why, sizeof why));
        goto error;
    }
    if (tls->ciphersuites[0] != '\0' &&
        SSL_CTX_set_ciphersuites(ctx, tls->ciphersuites) != 1) {
        *cause = xasprintf("tls.ciphersuites \"%s\": %s", tls->ciphersuites,
                           tls_reason(why, sizeof why));
        goto error;
    }
    if (SSL_CTX_use_certificate_chain_file(ctx, tls->cert_file) != 1) {
        *cause = xasprintf("tls.cert_file %s: not a PEM certificate (chain): "
                           "%s", tls->cert_file, tls_reason(why, sizeof why));
        goto error;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, tls->key_file,
                                    SSL_FILETYPE_PEM) != 1) {
        *cause = xasprintf("tls.key_file %s: not a PEM private key that "
                           "matches the certificate in %s: %s", tls->key_file,
                           tls->cert_file, tls_reason(why, sizeof why));
        goto error;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        *cause = xasprintf("tls.key_file %s does not match the certificate "
                           "in tls.cert_file %s: %s", tls->key_file,
                           tls->cert_file, tls_reason(why, sizeof why));
        goto error;
    }
    if (tls->ca_file[0] != '\0') {
        STACK_OF(X509_NAME) *names;

        if (SSL_CTX_load_verify_locations(ctx, tls->ca_file, NULL) != 1 ||
            (names = SSL_load_client_CA_file(tls->ca_file)) == NULL) {
            *cause = xasprintf("tls.ca_file %s: no PEM CA certificate: %s",
                               tls->ca_file, tls_reason(why, sizeof why));
            goto error;
        }
        SSL_CTX_set_client_CA_list(ctx, names);
    }
    mode = SSL_VERIFY_NONE;
    if (tls->client_auth == HTTP_TLS_AUTH_OPTIONAL)
        mode = SSL_VERIFY_PEER;
    else if (tls->client_auth == HTTP_TLS_AUTH_REQUIRED)
        mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    SSL_CTX_set_verify(ctx, mode, NULL);
    SSL_CTX_set_alpn_select_cb(ctx, tls_alpn_cb, NULL);
    return ctx;

error:
    SSL_CTX_free(ctx);
    return NULL;
}

struct http_tls *
http_tls_new(const struct http_tls_config *cfg, char **cause)
{
    struct http_tls *tls = xcalloc(1, sizeof *tls);

    pthread_mutex_init(&tls->lock, NULL);
    tls->cert_file = xstrdup(cfg->cert_file != NULL ? cfg->cert_file : "");
    tls->key_file = xstrdup(cfg->key_file != NULL ? cfg->key_file : "");
    tls->ca_file = xstrdup(cfg->ca_file != NULL ? cfg->ca_file : "");
    tls->ciphers = xstrdup(cfg->ciphers != NULL ? cfg->ciphers : "");
    tls->ciphersuites = xstrdup(cfg->ciphersuites != NULL ? cfg->ciphersuites
                                                          : "");
    tls->client_auth = cfg->client_auth;
    tls->min_tls13 = cfg->min_tls13;
    if (tls->client_auth != HTTP_TLS_AUTH_OFF && tls->ca_file[0] == '\0') {
        *cause = xasprintf("tls.client_auth needs tls.ca_file");
        goto error;
    }
    tls->ctx = tls_ctx_build(tls, cause);
    if (tls->ctx == NULL)
        goto error;
    tls->not_after = tls_not_after(tls->ctx);
    return tls;

error:
    http_tls_free(tls);
    return NULL;
}

int
http_tls_reload(struct http_tls *tls, char **cause)
{
    SSL_CTX *fresh = tls_ctx_build(tls, cause), *old;

    if (fresh == NULL)
        return -1;
    pthread_mutex_lock(&tls->lock);
    old = tls->ctx;
    tls->ctx = fresh;
    tls->generation++;
    tls->not_after = tls_not_after(fresh);
    pthread_mutex_unlock(&tls->lock);
    SSL_CTX_free(old);              /* open connections hold references */
    return 0;
}

unsigned long
http_tls_generation(const struct http_tls *tls)
{
    unsigned long g;

    pthread_mutex_lock((pthread_mutex_t *)&tls->lock);
    g = tls->generation;
    pthread_mutex_unlock((pthread_mutex_t *)&tls->lock);
    return g;
}

int64_t
http_tls_not_after(const struct http_tls *tls)
{
    int64_t t;

    pthread_mutex_lock((pthread_mutex_t *)&tls->lock);
    t = tls->not_after;
    pthread_mutex_unlock((pthread_mutex_t *)&tls->lock);
    return t;
}

void
http_tls_free(struct http_tls *tls)
{
    if (tls == NULL)
        return;
    SSL_CTX_free(tls->ctx);
    pthread_mutex_destroy(&tls->lock);
    free(tls->cert_file);
    free(tls->key_file);
    free(tls->ca_file);
    free(tls->ciphers);
    free(tls->ciphersuites);
    free(tls);
}

SSL *
http_tls_ssl_new(struct http_tls *tls, int fd, enum http_tls_alpn alpn)
{
    SSL *ssl;

    pthread_mutex_lock(&tls->lock);
    ssl = SSL_new(tls->ctx);        /* takes a reference to the context */
    pthread_mutex_unlock(&tls->lock);
    if (ssl == NULL || (fd >= 0 && SSL_set_fd(ssl, fd) != 1)) {
        log_error("http_tls_ssl_new: out of memory");
        abort();
    }
    assert(alpn >= HTTP_TLS_ALPN_NONE && alpn <= HTTP_TLS_ALPN_H2);
    SSL_set_app_data(ssl, (void *)&tls_alpn_lists[alpn]);
    SSL_set_accept_state(ssl);
    return ssl;
}

enum http_tls_step
http_tls_handshake(SSL *ssl)
{
    char why[256];
    int r;

    ERR_clear_error();
    r = SSL_do_handshake(ssl);
    if (r == 1)
        return HTTP_TLS_DONE;
    switch (SSL_get_error(ssl, r)) {
    case SSL_ERROR_WANT_READ:
        return HTTP_TLS_WANT_READ;
    case SSL_ERROR_WANT_WRITE:
        return HTTP_TLS_WANT_WRITE;
    default:
        log_debug("TLS handshake failed: %s", tls_reason(why, sizeof why));
        return HTTP_TLS_FAIL;
    }
}

/* The result of an SSL_read or SSL_write that returned n <= 0, as
 * recv(2)/send(2) would give it (http_tls.h). other: the "want" that means
 * the opposite direction (*flag set then). eof: what a close_notify gives,
 * 0 (a read) or -1 with EPIPE (a write). */
static ssize_t
tls_io_fail(SSL *ssl, int n, int other, int *flag, int eof)
{
    int e = SSL_get_error(ssl, n);

    switch (e) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        if (e == other)
            *flag = 1;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        if (eof == 0)
            return 0;
        errno = EPIPE;
        break;
    case SSL_ERROR_SYSCALL:
        /* The socket's own errno, never one that reads as "retry". */
        if (errno == 0 || errno == EAGAIN || errno == EWOULDBLOCK ||
            errno == EINTR)
            errno = ECONNRESET;
        break;
    default:
        errno = EPROTO;
        break;
    }
    ERR_clear_error();
    return -1;
}

ssize_t
http_tls_recv(SSL *ssl, void *buf, size_t len, int *want_write)
{
    int n;

    ERR_clear_error();
    errno = 0;
    n = SSL_read(ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
    if (n > 0)
        return n;
    return tls_io_fail(ssl, n, SSL_ERROR_WANT_WRITE, want_write, 0);
}

ssize_t
http_tls_send(SSL *ssl, const void *buf, size_t len, int *want_read)
{
    int n;

    ERR_clear_error();
    errno = 0;
    n = SSL_write(ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
    if (n > 0)
        return n;
    return tls_io_fail(ssl, n, SSL_ERROR_WANT_READ, want_read, -1);
}

int
http_tls_pending(const SSL *ssl)
{
    return SSL_has_pending(ssl);
}

void
http_tls_close_notify(SSL *ssl)
{
    if (SSL_is_init_finished(ssl))
        (void)SSL_shutdown(ssl);
    ERR_clear_error();
}

int
http_tls_peer_name(SSL *ssl, char *out, size_t cap)
{
    X509 *cert = SSL_get0_peer_certificate(ssl);
    X509_NAME *subject;
    X509_NAME_ENTRY *e;
    unsigned char *utf8 = NULL;
    int i, n, ok = 0;

    out[0] = '\0';
    if (cert == NULL || SSL_get_verify_result(ssl) != X509_V_OK)
        return 0;
    subject = X509_get_subject_name(cert);
    i = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
    if (i < 0 || (e = X509_NAME_get_entry(subject, i)) == NULL)
        return 0;
    n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(e));
    if (n <= 0 || (size_t)n >= cap)
        goto cleanup;
    for (i = 0; i < n; i++)
        if (utf8[i] < 0x20 || utf8[i] == 0x7f)
            goto cleanup;
    memcpy(out, utf8, (size_t)n);
    out[n] = '\0';
    ok = 1;

cleanup:
    OPENSSL_free(utf8);
    return ok;
}
