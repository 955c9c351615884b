/* fuzz_tls_conn.c: libFuzzer target for leafd's TLS front end (http_tls.c):
 * the server side of a connection as http_conn.c drives it, over memory
 * BIOs instead of a socket.
 *
 * The first input byte picks a mode:
 *  - even: the rest is what a client sends from the first byte on (a
 *    ClientHello and whatever follows), fed in pieces whose sizes come from
 *    the input, through http_tls_handshake and, should it finish,
 *    http_tls_recv;
 *  - odd: a real client (OpenSSL, trusting the throwaway CA, with a client
 *    certificate when bit 1 is set) finishes the handshake, then sends the
 *    rest as application data in records whose sizes come from the input;
 *    the server reads it with http_tls_recv into a buffer of 1 to 64 bytes
 *    and while http_tls_pending says bytes remain, as conn_read_cb does.
 *
 * Checked on every input: a handshake step is one of the four results and
 * never WANT_WRITE (a memory BIO always takes the bytes); recv never returns
 * more than asked; every byte the client sent comes out, in order, with no
 * bytes left in SSL_pending when the reads stop; the peer name, when
 * there is one, is the client certificate's CN.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "fuzz.h"
#include "http_tls.h"
#include "tlsgen.h"

static struct http_tls *tls;
static SSL_CTX *cli_ctx;

static void
init(void)
{
    char dir[] = "/tmp/fuzz_tls.XXXXXX", ca_pem[64], cert[64], key[64];
    struct tlsgen_ca ca;
    EVP_PKEY *ckey = NULL;
    X509 *ccert = NULL;
    char *cause = NULL;
    struct http_tls_config tc = { 0 };

    FUZZ_ASSERT(mkdtemp(dir) != NULL);
    snprintf(ca_pem, sizeof ca_pem, "%s/ca.pem", dir);
    snprintf(cert, sizeof cert, "%s/srv.pem", dir);
    snprintf(key, sizeof key, "%s/srv.key", dir);
    FUZZ_ASSERT(tlsgen_ca(&ca, "fuzz CA") == 0);
    FUZZ_ASSERT(tlsgen_write_ca(&ca, ca_pem) == 0);
    FUZZ_ASSERT(tlsgen_leaf(&ca, "localhost", cert, key, NULL, NULL) == 0);
    FUZZ_ASSERT(tlsgen_leaf(&ca, "fuzz-client", NULL, NULL, &ckey, &ccert) == 0);
    tlsgen_ca_free(&ca);
    tc.cert_file = cert;
    tc.key_file = key;
    tc.ca_file = ca_pem;
    tc.client_auth = HTTP_TLS_AUTH_OPTIONAL;
    tls = http_tls_new(&tc, &cause);
    if (tls == NULL) {
        fprintf(stderr, "fuzz_tls_conn: %s\n", cause);
        abort();
    }
    cli_ctx = SSL_CTX_new(TLS_client_method());
    FUZZ_ASSERT(cli_ctx != NULL);
    FUZZ_ASSERT(SSL_CTX_load_verify_locations(cli_ctx, ca_pem, NULL) == 1);
    FUZZ_ASSERT(SSL_CTX_use_certificate(cli_ctx, ccert) == 1);
    FUZZ_ASSERT(SSL_CTX_use_PrivateKey(cli_ctx, ckey) == 1);
    X509_free(ccert);
    EVP_PKEY_free(ckey);
    unlink(ca_pem);
    unlink(cert);
    unlink(key);
    rmdir(dir);
}

/* A server SSL reading from rbio, writing into wbio (both kept by it). */
static SSL *
server_on(BIO *rbio, BIO *wbio)
{
    SSL *srv = http_tls_ssl_new(tls, -1, HTTP_TLS_ALPN_H2_HTTP1);

    BIO_set_mem_eof_return(rbio, -1);       /* empty: retry, as a socket */
    SSL_set_bio(srv, rbio, wbio);
    return srv;
}

/* Mode 0: raw client bytes. */
static void
raw_client(const uint8_t *data, size_t size)
{
    BIO *rbio = BIO_new(BIO_s_mem()), *wbio = BIO_new(BIO_s_mem());
    SSL *srv = server_on(rbio, wbio);
    enum http_tls_step st = HTTP_TLS_WANT_READ;
    char buf[64];
    size_t pos = 0;

    while (pos < size && st == HTTP_TLS_WANT_READ) {
        size_t piece = 1 + data[pos] % 200;

        pos++;
        if (piece > size - pos)
            piece = size - pos;
        BIO_write(rbio, data + pos, (int)piece);
        pos += piece;
        st = http_tls_handshake(srv);
        FUZZ_ASSERT(st == HTTP_TLS_DONE || st == HTTP_TLS_WANT_READ ||
                    st == HTTP_TLS_FAIL);
        (void)BIO_reset(wbio);
    }
    if (st == HTTP_TLS_DONE) {
        int wr = 0;
        ssize_t n;

        while ((n = http_tls_recv(srv, buf, sizeof buf, &wr)) > 0)
            FUZZ_ASSERT((size_t)n <= sizeof buf);
    }
    SSL_free(srv);
    ERR_clear_error();
}

/* Move what one side wrote to the other's input. */
static void
shuttle(BIO *from, BIO *to)
{
    char buf[4096];
    int n;

    while ((n = BIO_read(from, buf, sizeof buf)) > 0)
        BIO_write(to, buf, n);
}

/* Mode 1: a real client, then application data. */
static void
real_client(const uint8_t *data, size_t size, int with_cert)
{
    BIO *s_in = BIO_new(BIO_s_mem()), *s_out = BIO_new(BIO_s_mem());
    BIO *c_in = BIO_new(BIO_s_mem()), *c_out = BIO_new(BIO_s_mem());
    SSL *srv = server_on(s_in, s_out), *cli = SSL_new(cli_ctx);
    char name[HTTP_TLS_NAME_MAX], *got = malloc(size + 1);
    size_t rlen, pos = 0, have = 0;
    int cdone = 0, sdone = 0;

    FUZZ_ASSERT(cli != NULL && got != NULL);
    BIO_set_mem_eof_return(c_in, -1);
    SSL_set_bio(cli, c_in, c_out);
    SSL_set_connect_state(cli);
    if (!with_cert)
        SSL_certs_clear(cli);
    for (int i = 0; i < 20 && !(cdone && sdone); i++) {
        enum http_tls_step st;

        cdone = SSL_do_handshake(cli) == 1;
        shuttle(c_out, s_in);
        st = http_tls_handshake(srv);
        FUZZ_ASSERT(st != HTTP_TLS_WANT_WRITE && st != HTTP_TLS_FAIL);
        sdone = st == HTTP_TLS_DONE;
        shuttle(s_out, c_in);
    }
    FUZZ_ASSERT(cdone && sdone);
    if (http_tls_peer_name(srv, name, sizeof name))
        FUZZ_ASSERT(with_cert && strcmp(name, "fuzz-client") == 0);
    else
        FUZZ_ASSERT(!with_cert);
    if (size == 0)
        goto cleanup;
    rlen = 1 + data[0] % 64;
    pos = 1;
    while (pos < size) {
        size_t rec = 1 + (size_t)data[pos - 1] * 37 % 5000;

        if (rec > size - pos)
            rec = size - pos;
        FUZZ_ASSERT(SSL_write(cli, data + pos, (int)rec) == (int)rec);
        pos += rec;
    }
    shuttle(c_out, s_in);
    for (;;) {
        char buf[64];
        int wr = 0;
        ssize_t n = http_tls_recv(srv, buf, rlen, &wr);

        if (n <= 0) {
            FUZZ_ASSERT(n == -1 && errno == EAGAIN && !wr);
            FUZZ_ASSERT(!http_tls_pending(srv));
            break;
        }
        FUZZ_ASSERT((size_t)n <= rlen && have + (size_t)n <= size - 1);
        memcpy(got + have, buf, (size_t)n);
        have += (size_t)n;
    }
    FUZZ_ASSERT(have == size - 1 && memcmp(got, data + 1, have) == 0);

cleanup:
    free(got);
    SSL_free(cli);
    SSL_free(srv);
    ERR_clear_error();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (tls == NULL)
        init();
    if (size == 0)
        return 0;
    if (data[0] & 1)
        real_client(data + 1, size - 1, (data[0] & 2) != 0);
    else
        raw_client(data + 1, size - 1);
    return 0;
}
