/* http_tls.h: TLS on leafd's listeners (OpenSSL 3).
 *
 * A struct http_tls holds the server's SSL_CTX: certificate chain, key,
 * client CA, verification mode, protocol floor and ciphers. A listener marked
 * tls (HTTPS, RESP over TLS) makes one SSL per connection from the context
 * current at accept; http_tls_reload builds a new context from the same files
 * and swaps it in for later handshakes, while open connections keep the one
 * they started with (an SSL holds a reference to its SSL_CTX).
 *
 * The connection-level functions below work on a non-blocking SSL and map
 * OpenSSL's results onto what the event loop waits for; http_conn.c calls
 * them in place of recv(2)/send(2). They take an SSL, not a connection, so
 * the fuzz target (fuzz/fuzz_tls_conn.c) drives them over memory BIOs.
 *
 * Ownership: the caller of http_tls_new frees it with http_tls_free after
 * every server that uses it is freed. Thread safety: http_tls_ssl_new and
 * http_tls_reload may be called from any thread at once (a mutex guards the
 * context pointer, taken once per accepted TLS connection and per reload);
 * an SSL belongs to its connection's I/O thread.
 */
#ifndef LEAFD_HTTP_TLS_H
#define LEAFD_HTTP_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <openssl/ssl.h>

enum http_tls_auth { HTTP_TLS_AUTH_OFF, HTTP_TLS_AUTH_OPTIONAL,
                     HTTP_TLS_AUTH_REQUIRED };

struct http_tls_config {
    const char *cert_file;          /* PEM chain, leaf first */
    const char *key_file;           /* PEM private key */
    const char *ca_file;            /* "" or NULL: none (client_auth off) */
    int         client_auth;        /* enum http_tls_auth */
    int         min_tls13;          /* 0: TLS 1.2 and up; 1: TLS 1.3 only */
    const char *ciphers;            /* TLS 1.2 list; "" or NULL: default */
    const char *ciphersuites;       /* TLS 1.3 suites; "" or NULL: default */
};

/* What a listener offers by ALPN (the server picks the first of these that
 * the client also offers; none in common, or NONE: no ALPN, the client
 * goes on without). */
enum http_tls_alpn { HTTP_TLS_ALPN_NONE, HTTP_TLS_ALPN_HTTP1,
                     HTTP_TLS_ALPN_H2_HTTP1, HTTP_TLS_ALPN_H2 };

/* Largest subject CN kept for a connection (longer: no identity). */
#define HTTP_TLS_NAME_MAX 128

struct http_tls;

/* Loads and checks the files (a missing or bad file, or a key that does not
 * match its certificate, is an error naming the file and OpenSSL's reason).
 * The strings are copied. NULL with *cause (free it) on failure. */
struct http_tls *http_tls_new(const struct http_tls_config *cfg, char **cause);
/* Rereads the files into a new context and makes it current. 0, or -1 with
 * *cause, the current context kept. */
int  http_tls_reload(struct http_tls *tls, char **cause);
void http_tls_free(struct http_tls *tls);         /* NULL: no-op */
/* The current certificate's notAfter (Unix seconds; after a reload, the
 * new one's), for the expiry metric; 0 when unknown. */
int64_t http_tls_not_after(const struct http_tls *tls);

/* A server SSL on fd (fd -1: none; the caller sets BIOs) in accept state,
 * from the current context, offering alpn. Aborts on OOM like xmalloc. */
SSL *http_tls_ssl_new(struct http_tls *tls, int fd, enum http_tls_alpn alpn);

/* One step of a non-blocking handshake. */
enum http_tls_step { HTTP_TLS_DONE, HTTP_TLS_WANT_READ, HTTP_TLS_WANT_WRITE,
                     HTTP_TLS_FAIL };
enum http_tls_step http_tls_handshake(SSL *ssl);

/* Like recv(2)/send(2) on a non-blocking socket: bytes moved (> 0); 0 at the
 * peer's close_notify or EOF (recv only); -1 with errno EAGAIN when OpenSSL
 * wants the socket again (*want_write set to 1 if it waits for writability),
 * or errno ECONNRESET/EPROTO when the connection is broken. */
ssize_t http_tls_recv(SSL *ssl, void *buf, size_t len, int *want_write);
ssize_t http_tls_send(SSL *ssl, const void *buf, size_t len, int *want_read);

/* Bytes SSL holds (decrypted, or read ahead) that the socket will not
 * signal again. */
int  http_tls_pending(const SSL *ssl);
/* Send close_notify, best effort, without waiting for the peer's. */
void http_tls_close_notify(SSL *ssl);
/* The verified client certificate's subject CN into out (cap bytes,
 * NUL-terminated): 1, or 0 when there is no verified certificate or its CN
 * is missing, too long or holds a NUL or control byte. */
int  http_tls_peer_name(SSL *ssl, char *out, size_t cap);

/* --- for tests only: nothing in src/ calls these --------------------- */

/* Reloads that took effect. */
unsigned long http_tls_generation(const struct http_tls *tls);

#endif
