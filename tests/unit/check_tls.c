/* check_tls.c: the TLS front end (http_tls.c) over in-memory BIO pairs:
 * files refused at load, reload keeping the old context on a bad file,
 * the non-blocking handshake, reads that leave bytes in SSL_pending, mutual
 * TLS and the certificate's name, the protocol floor; and the tokens file's
 * cert:CN= lines (auth.c); and the tls.* cross-key checks (config.c). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "auth.h"
#include "config.h"
#include "http_tls.h"
#include "tlsgen.h"

static char dir[64];
static char ca_pem[128], srv_pem[128], srv_key[128], cli_pem[128], cli_key[128];
static char other_pem[128], other_key[128], bad_pem[128];

/* A CA, a server and a client certificate signed by it, and a client
 * certificate from another CA, in a fresh directory. */
static void
setup(void)
{
    struct tlsgen_ca ca, other;
    FILE *f;

    snprintf(dir, sizeof dir, "/tmp/check_tls.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(ca_pem, sizeof ca_pem, "%s/ca.pem", dir);
    snprintf(srv_pem, sizeof srv_pem, "%s/srv.pem", dir);
    snprintf(srv_key, sizeof srv_key, "%s/srv.key", dir);
    snprintf(cli_pem, sizeof cli_pem, "%s/cli.pem", dir);
    snprintf(cli_key, sizeof cli_key, "%s/cli.key", dir);
    snprintf(other_pem, sizeof other_pem, "%s/other.pem", dir);
    snprintf(other_key, sizeof other_key, "%s/other.key", dir);
    snprintf(bad_pem, sizeof bad_pem, "%s/bad.pem", dir);
    ck_assert_int_eq(tlsgen_ca(&ca, "check_tls CA"), 0);
    ck_assert_int_eq(tlsgen_ca(&other, "another CA"), 0);
    ck_assert_int_eq(tlsgen_write_ca(&ca, ca_pem), 0);
    ck_assert_int_eq(tlsgen_leaf(&ca, "localhost", srv_pem, srv_key, NULL, NULL), 0);
    ck_assert_int_eq(tlsgen_leaf(&ca, "alice", cli_pem, cli_key, NULL, NULL), 0);
    ck_assert_int_eq(tlsgen_leaf(&other, "alice", other_pem, other_key, NULL, NULL), 0);
    tlsgen_ca_free(&ca);
    tlsgen_ca_free(&other);
    f = fopen(bad_pem, "w");
    ck_assert_ptr_nonnull(f);
    fputs("-----BEGIN CERTIFICATE-----\nnot base64 at all\n"
          "-----END CERTIFICATE-----\n", f);
    fclose(f);
}

static void
teardown(void)
{
    const char *names[] = { ca_pem, srv_pem, srv_key, cli_pem, cli_key,
                            other_pem, other_key, bad_pem };

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        unlink(names[i]);
    rmdir(dir);
}

static struct http_tls *
tls_make(const char *cert, const char *key, int client_auth, int min13,
         char **cause)
{
    struct http_tls_config tc = {
        .cert_file = cert, .key_file = key,
        .ca_file = client_auth != HTTP_TLS_AUTH_OFF ? ca_pem : "",
        .client_auth = client_auth, .min_tls13 = min13,
    };

    *cause = NULL;
    return http_tls_new(&tc, cause);
}

/* A client that trusts the test CA, with a certificate when cert is set. */
static SSL *
client_new(const char *cert, const char *key, int max_version)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl;

    ck_assert_ptr_nonnull(ctx);
    ck_assert_int_eq(SSL_CTX_load_verify_locations(ctx, ca_pem, NULL), 1);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if (max_version != 0)
        SSL_CTX_set_max_proto_version(ctx, max_version);
    if (cert != NULL) {
        ck_assert_int_eq(SSL_CTX_use_certificate_file(ctx, cert, SSL_FILETYPE_PEM), 1);
        ck_assert_int_eq(SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM), 1);
    }
    ssl = SSL_new(ctx);
    SSL_CTX_free(ctx);
    SSL_set_connect_state(ssl);
    return ssl;
}

/* cli and a server SSL from tls joined by a BIO pair of room bytes each
 * way (0: OpenSSL's default, 17 kB). */
static SSL *
server_join_room(struct http_tls *tls, SSL *cli, size_t room)
{
    SSL *srv = http_tls_ssl_new(tls, -1, HTTP_TLS_ALPN_H2_HTTP1);
    BIO *a, *b;

    ck_assert_int_eq(BIO_new_bio_pair(&a, room, &b, room), 1);
    SSL_set_bio(srv, a, a);
    SSL_set_bio(cli, b, b);
    return srv;
}

static SSL *
server_join(struct http_tls *tls, SSL *cli)
{
    return server_join_room(tls, cli, 0);
}

/* Both handshakes to the end: 0, or -1 when either side gives up. With a
 * small BIO pair the server waits for writability too (counted in
 * *write_waits). */
static int
handshake_waits(SSL *cli, SSL *srv, int *write_waits)
{
    int cdone = 0, sdone = 0;

    for (int i = 0; i < 500 && !(cdone && sdone); i++) {
        int r = SSL_do_handshake(cli);
        enum http_tls_step st;

        if (r == 1) {
            char peek;

            cdone = 1;
            (void)SSL_peek(cli, &peek, 1);  /* take the session tickets */
        } else {
            int e = SSL_get_error(cli, r);
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                return -1;
        }
        st = http_tls_handshake(srv);
        if (st == HTTP_TLS_FAIL)
            return -1;
        if (st == HTTP_TLS_WANT_WRITE)
            (*write_waits)++;
        sdone = st == HTTP_TLS_DONE;
    }
    ERR_clear_error();
    return cdone && sdone ? 0 : -1;
}

static int
handshake(SSL *cli, SSL *srv)
{
    int waits = 0, rc = handshake_waits(cli, srv, &waits);

    ck_assert_int_eq(waits, 0);         /* a 17 kB pair always has room */
    return rc;
}

/* One client against tls: 0 when both handshakes finish (the server's peer
 * name, or "", into name), -1 when either side gives up. cert NULL: no
 * client certificate; max_version 0: any. */
static int
try_handshake(struct http_tls *tls, const char *cert, const char *key,
              int max_version, char *name, size_t cap, int *version)
{
    SSL *cli = client_new(cert, key, max_version), *srv = server_join(tls, cli);
    int rc = handshake(cli, srv);

    if (rc == 0) {
        if (!http_tls_peer_name(srv, name, cap))
            name[0] = '\0';
        *version = SSL_version(srv);
    }
    SSL_free(cli);
    SSL_free(srv);
    return rc;
}

START_TEST(bad_files_refused)
{
    struct http_tls *tls;
    char *cause, missing[160];

    snprintf(missing, sizeof missing, "%s/nope.pem", dir);
    tls = tls_make(missing, srv_key, HTTP_TLS_AUTH_OFF, 0, &cause);
    ck_assert_ptr_null(tls);
    ck_assert_msg(strstr(cause, "tls.cert_file") && strstr(cause, "nope.pem") &&
                  strstr(cause, "No such file"), "%s", cause);
    free(cause);
    tls = tls_make(bad_pem, srv_key, HTTP_TLS_AUTH_OFF, 0, &cause);
    ck_assert_ptr_null(tls);
    ck_assert_msg(strstr(cause, "tls.cert_file") != NULL, "%s", cause);
    free(cause);
    tls = tls_make(srv_pem, cli_key, HTTP_TLS_AUTH_OFF, 0, &cause);
    ck_assert_ptr_null(tls);
    ck_assert_msg(strstr(cause, "tls.key_file") && strstr(cause, "cli.key"),
                  "%s", cause);
    free(cause);
    {
        struct http_tls_config tc = { .cert_file = srv_pem, .key_file = srv_key,
                                      .client_auth = HTTP_TLS_AUTH_REQUIRED };
        tls = http_tls_new(&tc, &cause);
        ck_assert_ptr_null(tls);
        ck_assert_msg(strstr(cause, "tls.ca_file") != NULL, "%s", cause);
        free(cause);
    }
    {
        struct http_tls_config tc = { .cert_file = srv_pem, .key_file = srv_key,
                                      .ciphers = "NO-SUCH-CIPHER" };
        tls = http_tls_new(&tc, &cause);
        ck_assert_ptr_null(tls);
        ck_assert_msg(strstr(cause, "tls.ciphers") != NULL, "%s", cause);
        free(cause);
    }
    tls = tls_make(srv_pem, srv_key, HTTP_TLS_AUTH_OFF, 0, &cause);
    ck_assert_msg(tls != NULL, "%s", cause);
    http_tls_free(tls);
    http_tls_free(NULL);
}
END_TEST

START_TEST(reload_keeps_old_on_bad_file)
{
    char *cause, cert2[160], name[HTTP_TLS_NAME_MAX];
    int v;
    struct http_tls *tls = tls_make(srv_pem, srv_key, HTTP_TLS_AUTH_OFF, 0, &cause);
    struct tlsgen_ca ca;
    SSL *cli, *srv;
    FILE *f;

    ck_assert_ptr_nonnull(tls);
    /* An SSL made before the reload keeps working after it. */
    cli = client_new(NULL, NULL, 0);
    srv = server_join(tls, cli);
    ck_assert_int_eq(handshake(cli, srv), 0);

    ck_assert_int_eq(http_tls_reload(tls, &cause), 0);
    ck_assert_uint_eq(http_tls_generation(tls), 1);

    /* Break the certificate file: refused, the context kept. */
    snprintf(cert2, sizeof cert2, "%s/srv.pem.good", dir);
    ck_assert_int_eq(rename(srv_pem, cert2), 0);
    f = fopen(srv_pem, "w");
    fputs("garbage\n", f);
    fclose(f);
    cause = NULL;
    ck_assert_int_eq(http_tls_reload(tls, &cause), -1);
    ck_assert_msg(cause != NULL && strstr(cause, "tls.cert_file"), "%s", cause);
    free(cause);
    ck_assert_uint_eq(http_tls_generation(tls), 1);
    ck_assert_int_eq(try_handshake(tls, NULL, NULL, 0, name, sizeof name, &v), 0);
    /* A new certificate and key: the next handshake sees it. */
    ck_assert_int_eq(tlsgen_ca(&ca, "check_tls CA 2"), 0);
    ck_assert_int_eq(tlsgen_leaf(&ca, "localhost", srv_pem, srv_key, NULL, NULL), 0);
    tlsgen_ca_free(&ca);
    ck_assert_int_eq(http_tls_reload(tls, &cause), 0);
    ck_assert_uint_eq(http_tls_generation(tls), 2);
    /* The client trusts only the first CA: it refuses the new one. */
    ck_assert_int_eq(try_handshake(tls, NULL, NULL, 0, name, sizeof name, &v), -1);
    /* The connection from before every reload still talks. */
    {
        char buf[16];
        int wr = 0;

        ck_assert_int_eq(SSL_write(cli, "ping", 4), 4);
        ck_assert_int_eq(http_tls_recv(srv, buf, sizeof buf, &wr), 4);
        ck_assert_int_eq(memcmp(buf, "ping", 4), 0);
    }
    SSL_free(cli);
    SSL_free(srv);
    http_tls_free(tls);
    unlink(cert2);
}
END_TEST

START_TEST(recv_pending_send)
{
    char *cause, big[3000], buf[7], got[3000];
    struct http_tls *tls = tls_make(srv_pem, srv_key, HTTP_TLS_AUTH_OFF, 0, &cause);
    SSL *cli = client_new(NULL, NULL, 0), *srv = server_join(tls, cli);
    size_t have = 0;
    ssize_t n;
    int wr = 0, rd = 0;

    ck_assert_int_eq(handshake(cli, srv), 0);
    ck_assert_ptr_null(SSL_get0_peer_certificate(srv));
    ck_assert_int_eq(http_tls_peer_name(srv, got, sizeof got), 0);
    /* Nothing sent yet: the read would block. */
    n = http_tls_recv(srv, buf, sizeof buf, &wr);
    ck_assert_int_eq(n, -1);
    ck_assert_int_eq(errno, EAGAIN);
    ck_assert_int_eq(wr, 0);
    /* One record, read 7 bytes at a time: the rest waits in SSL_pending,
     * which the socket would never signal again. */
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (char)('a' + i % 26);
    ck_assert_int_eq(SSL_write(cli, big, sizeof big), (int)sizeof big);
    n = http_tls_recv(srv, buf, sizeof buf, &wr);
    ck_assert_int_eq(n, 7);
    ck_assert(http_tls_pending(srv));
    memcpy(got, buf, 7);
    have = 7;
    while (http_tls_pending(srv)) {
        n = http_tls_recv(srv, buf, sizeof buf, &wr);
        ck_assert(n > 0);
        memcpy(got + have, buf, (size_t)n);
        have += (size_t)n;
    }
    ck_assert_uint_eq(have, sizeof big);
    ck_assert_int_eq(memcmp(got, big, sizeof big), 0);
    /* The server's answer reaches the client. */
    n = http_tls_send(srv, big, sizeof big, &rd);
    ck_assert_int_eq(n, (ssize_t)sizeof big);
    ck_assert_int_eq(SSL_read(cli, got, sizeof got), (int)sizeof big);
    /* close_notify reads as EOF. */
    ck_assert_int_ge(SSL_shutdown(cli), 0);
    ck_assert_int_eq(http_tls_recv(srv, buf, sizeof buf, &wr), 0);
    SSL_free(cli);
    SSL_free(srv);
    http_tls_free(tls);
}
END_TEST

/* A peer that reads slowly: the handshake and the answer wait for
 * writability (WANT_WRITE, EAGAIN) and then go on where they stopped. */
START_TEST(small_socket_buffers)
{
    char *cause, big[5000], got[5000];
    struct http_tls *tls = tls_make(srv_pem, srv_key, HTTP_TLS_AUTH_OFF, 0, &cause);
    SSL *cli = client_new(NULL, NULL, 0), *srv = server_join_room(tls, cli, 64);
    int waits = 0, rd = 0, eagain = 0;
    size_t sent = 0, have = 0;

    ck_assert_int_eq(handshake_waits(cli, srv, &waits), 0);
    ck_assert_int_gt(waits, 0);
    memset(big, 'x', sizeof big);
    while (have < sizeof big) {
        ssize_t n = sent < sizeof big
                        ? http_tls_send(srv, big + sent, sizeof big - sent, &rd)
                        : 0;
        int r;

        if (n < 0) {
            ck_assert_int_eq(errno, EAGAIN);
            eagain++;
        } else {
            sent += (size_t)n;
        }
        r = SSL_read(cli, got + have, (int)(sizeof got - have));
        if (r > 0)
            have += (size_t)r;
    }
    ck_assert_int_eq(rd, 0);
    ck_assert_int_gt(eagain, 0);
    ck_assert_int_eq(memcmp(got, big, sizeof big), 0);
    ERR_clear_error();
    SSL_free(cli);
    SSL_free(srv);
    http_tls_free(tls);
}
END_TEST

START_TEST(mutual_tls)
{
    char *cause, name[HTTP_TLS_NAME_MAX];
    struct http_tls *req = tls_make(srv_pem, srv_key, HTTP_TLS_AUTH_REQUIRED, 0, &cause);
    struct http_tls *opt = tls_make(srv_pem, srv_key, HTTP_TLS_AUTH_OPTIONAL, 0, &cause);
    int v;

    ck_assert_ptr_nonnull(req);
    ck_assert_ptr_nonnull(opt);
    /* required + a certificate from the CA: its CN is the identity, unless
     * it does not fit. */
    ck_assert_int_eq(try_handshake(req, cli_pem, cli_key, 0, name, sizeof name, &v), 0);
    ck_assert_str_eq(name, "alice");
    ck_assert_int_eq(try_handshake(req, cli_pem, cli_key, 0, name, 3, &v), 0);
    ck_assert_str_eq(name, "");
    /* required, no certificate, or one from another CA: no handshake. */
    ck_assert_int_eq(try_handshake(req, NULL, NULL, 0, name, sizeof name, &v), -1);
    ck_assert_int_eq(try_handshake(req, other_pem, other_key, 0, name, sizeof name, &v), -1);
    /* optional: none is fine (no identity); an untrusted one is not. */
    ck_assert_int_eq(try_handshake(opt, NULL, NULL, 0, name, sizeof name, &v), 0);
    ck_assert_str_eq(name, "");
    ck_assert_int_eq(try_handshake(opt, other_pem, other_key, 0, name, sizeof name, &v), -1);
    http_tls_free(req);
    http_tls_free(opt);
}
END_TEST

START_TEST(min_version)
{
    char *cause, name[HTTP_TLS_NAME_MAX];
    struct http_tls *t13 = tls_make(srv_pem, srv_key, HTTP_TLS_AUTH_OFF, 1, &cause);
    struct http_tls *t12 = tls_make(srv_pem, srv_key, HTTP_TLS_AUTH_OFF, 0, &cause);
    int v = 0;

    ck_assert_int_eq(try_handshake(t13, NULL, NULL, TLS1_2_VERSION, name, sizeof name, &v), -1);
    ck_assert_int_eq(try_handshake(t13, NULL, NULL, 0, name, sizeof name, &v), 0);
    ck_assert_int_eq(v, TLS1_3_VERSION);
    ck_assert_int_eq(try_handshake(t12, NULL, NULL, TLS1_2_VERSION, name, sizeof name, &v), 0);
    ck_assert_int_eq(v, TLS1_2_VERSION);
    ck_assert_int_eq(try_handshake(t12, NULL, NULL, TLS1_1_VERSION, name, sizeof name, &v), -1);
    http_tls_free(t13);
    http_tls_free(t12);
}
END_TEST

START_TEST(tokens_file_cert_lines)
{
    char *cause = NULL;
    struct auth *a = auth_parse("tokens", "cert:CN=alice demo,@snowflake\n"
                                "secret-token-1 *\n", &cause);

    ck_assert_msg(a != NULL, "%s", cause);
    ck_assert_int_eq(auth_check_cert(a, "demo", "alice"), 0);
    ck_assert_int_eq(auth_check_cert(a, "@snowflake", "alice"), 0);
    ck_assert_int_eq(auth_check_cert(a, "other", "alice"), 403);
    ck_assert_int_eq(auth_check_cert(a, "demo", "bob"), 403);
    ck_assert_int_eq(auth_check_cert(a, "demo", "secret-token-1"), 403);
    /* A bearer token that names the certificate gets nothing. */
    ck_assert_int_eq(auth_check(a, "demo", "cert:CN=alice", 13), 403);
    ck_assert_int_eq(auth_known(a, "cert:CN=alice", 13), 0);
    ck_assert_int_eq(auth_check(a, "demo", "secret-token-1", 14), 0);
    auth_free(a);
}
END_TEST

START_TEST(config_cross_checks)
{
    struct config c;
    char *cause = NULL;

    config_defaults(&c);
    ck_assert_int_eq(config_load_string(&c, "t", "listen.tls_port = 8443\n", &cause), 0);
    ck_assert_int_eq(config_validate(&c, &cause), -1);
    ck_assert_msg(strstr(cause, "tls.cert_file") != NULL, "%s", cause);
    free(cause);
    config_free(&c);
    config_defaults(&c);
    ck_assert_int_eq(config_load_string(&c, "t", "tls.client_auth = required\n",
                                        &cause), 0);
    ck_assert_int_eq(config_validate(&c, &cause), -1);
    ck_assert_msg(strstr(cause, "tls.ca_file") != NULL, "%s", cause);
    free(cause);
    config_free(&c);
    config_defaults(&c);
    ck_assert_int_eq(config_load_string(&c, "t", "tls.min_version = 1.1\n",
                                        &cause), -1);
    free(cause);
    config_free(&c);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("tls");
    TCase *tc = tcase_create("tls");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, bad_files_refused);
    tcase_add_test(tc, reload_keeps_old_on_bad_file);
    tcase_add_test(tc, recv_pending_send);
    tcase_add_test(tc, small_socket_buffers);
    tcase_add_test(tc, mutual_tls);
    tcase_add_test(tc, min_version);
    tcase_add_test(tc, tokens_file_cert_lines);
    tcase_add_test(tc, config_cross_checks);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
