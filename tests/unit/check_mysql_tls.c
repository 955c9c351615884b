/* check_mysql_tls.c: unit tests for TLS to MySQL (db_mysql_url.c's ssl_*
 * parameters, db_mysql.c's file check and its refusal of a session without
 * TLS, and the password kept out of what leafd prints). The last case needs a MariaDB without TLS at LEAFD_TEST_MYSQL_URL
 * (tests/lib/mariadb.sh; make test starts one); without it the case skips,
 * and under CI=1 fails. The TLS handshakes themselves are black-box tests
 * (tests/blackbox/bb_dbtls.py), against a MariaDB with a throwaway CA. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db_mysql.h"
#include "db_mysql_url.h"
#include "util.h"

/* Parses url, expecting success; the caller frees t. */
static void
parse_ok(const char *url, struct db_mysql_target *t)
{
    char *cause = NULL;

    ck_assert_msg(db_mysql_url_parse(url, t, &cause) == 0, "%s: %s", url,
                  cause);
    ck_assert_ptr_null(cause);
}

/* Parses url, expecting a refusal whose cause holds want. */
static void
parse_bad(const char *url, const char *want)
{
    struct db_mysql_target t;
    char *cause = NULL;

    ck_assert_msg(db_mysql_url_parse(url, &t, &cause) == -1,
                  "accepted \"%s\"", url);
    ck_assert_msg(cause != NULL && strstr(cause, want) != NULL,
                  "%s: cause \"%s\" lacks \"%s\"", url, cause, want);
    ck_assert_ptr_null(t.host);
    ck_assert_ptr_null(t.ssl_ca);
    ck_assert_ptr_null(t.ssl_cert);
    ck_assert_ptr_null(t.ssl_key);
    ck_assert_int_eq(t.ssl_mode, DB_MYSQL_SSL_DISABLED);
    free(cause);
}

START_TEST(test_modes)
{
    struct db_mysql_target t;

    parse_ok("mysql://u@h/d", &t);
    ck_assert_int_eq(t.ssl_mode, DB_MYSQL_SSL_DISABLED);
    ck_assert_ptr_null(t.ssl_ca);
    db_mysql_target_free(&t);

    parse_ok("mysql://u@h/d?ssl_mode=required", &t);
    ck_assert_int_eq(t.ssl_mode, DB_MYSQL_SSL_REQUIRED);
    db_mysql_target_free(&t);

    /* MySQL's option spelling: '-' for '_', any case */
    parse_ok("mysql://u@h/d?ssl-mode=VERIFY-CA&ssl-ca=/etc/ca.pem", &t);
    ck_assert_int_eq(t.ssl_mode, DB_MYSQL_SSL_VERIFY_CA);
    ck_assert_str_eq(t.ssl_ca, "/etc/ca.pem");
    db_mysql_target_free(&t);

    parse_ok("mysql://u:p@h:3307/d?ssl_mode=Verify_Identity&ssl_ca=/a%20b/ca.pem"
             "&ssl_cert=/c/client.pem&ssl_key=/c/client.key&socket=/s", &t);
    ck_assert_int_eq(t.ssl_mode, DB_MYSQL_SSL_VERIFY_IDENTITY);
    ck_assert_str_eq(t.ssl_ca, "/a b/ca.pem");
    ck_assert_str_eq(t.ssl_cert, "/c/client.pem");
    ck_assert_str_eq(t.ssl_key, "/c/client.key");
    ck_assert_str_eq(t.socket, "/s");
    ck_assert_str_eq(t.password, "p");
    db_mysql_target_free(&t);
    ck_assert_ptr_null(t.ssl_ca);
    ck_assert_int_eq(t.ssl_mode, DB_MYSQL_SSL_DISABLED);

    /* no ssl_mode: a file means verify_identity, the strictest */
    parse_ok("mysql://u@h/d?ssl_ca=/ca.pem", &t);
    ck_assert_int_eq(t.ssl_mode, DB_MYSQL_SSL_VERIFY_IDENTITY);
    db_mysql_target_free(&t);
    parse_ok("mysql://u@h/d?ssl_cert=/c.pem&ssl_key=/k.pem", &t);
    ck_assert_int_eq(t.ssl_mode, DB_MYSQL_SSL_VERIFY_IDENTITY);
    ck_assert_ptr_null(t.ssl_ca);
    db_mysql_target_free(&t);

    /* verify_identity without a CA: the system's CAs */
    parse_ok("mysql://u@h/d?ssl_mode=verify_identity", &t);
    ck_assert_int_eq(t.ssl_mode, DB_MYSQL_SSL_VERIFY_IDENTITY);
    db_mysql_target_free(&t);

    /* the last of a repeated parameter wins */
    parse_ok("mysql://u@h/d?ssl_ca=/one&ssl_ca=/two&ssl_mode=required"
             "&ssl_mode=verify_ca", &t);
    ck_assert_str_eq(t.ssl_ca, "/two");
    ck_assert_int_eq(t.ssl_mode, DB_MYSQL_SSL_VERIFY_CA);
    db_mysql_target_free(&t);

    /* disabled said aloud */
    parse_ok("mysql://u@h/d?ssl_mode=disabled", &t);
    ck_assert_int_eq(t.ssl_mode, DB_MYSQL_SSL_DISABLED);
    db_mysql_target_free(&t);

    ck_assert_str_eq(db_mysql_ssl_mode_name(DB_MYSQL_SSL_DISABLED), "disabled");
    ck_assert_str_eq(db_mysql_ssl_mode_name(DB_MYSQL_SSL_VERIFY_IDENTITY),
                     "verify_identity");
}
END_TEST

START_TEST(test_jdbc)
{
    struct db_mysql_target t;

    /* Leaf's usual URL: useSSL=false is clear text, as before */
    parse_ok("jdbc:mysql://h:3306/leaf?useUnicode=true&characterEncoding=utf8"
             "&useSSL=false", &t);
    ck_assert_int_eq(t.ssl_mode, DB_MYSQL_SSL_DISABLED);
    db_mysql_target_free(&t);

    /* Connector/J 5.1's flags: never weaker than asked */
    parse_ok("jdbc:mysql://h/leaf?useSSL=true", &t);
    ck_assert_int_eq(t.ssl_mode, DB_MYSQL_SSL_REQUIRED);
    db_mysql_target_free(&t);
    parse_ok("jdbc:mysql://h/leaf?requireSSL=TRUE&useSSL=yes", &t);
    ck_assert_int_eq(t.ssl_mode, DB_MYSQL_SSL_REQUIRED);
    db_mysql_target_free(&t);
    parse_ok("jdbc:mysql://h/leaf?useSSL=true&verifyServerCertificate=true"
             "&ssl_ca=/ca.pem&sslMode=VERIFY_CA", &t);
    ck_assert_int_eq(t.ssl_mode, DB_MYSQL_SSL_VERIFY_CA);
    db_mysql_target_free(&t);

    /* Connector/J 8's sslMode, and the MariaDB driver's names */
    parse_ok("jdbc:mysql://h/leaf?sslMode=VERIFY_IDENTITY&ssl_ca=/ca.pem"
             "&user=app&password=pw", &t);
    ck_assert_int_eq(t.ssl_mode, DB_MYSQL_SSL_VERIFY_IDENTITY);
    ck_assert_str_eq(t.user, "app");
    db_mysql_target_free(&t);
    parse_ok("jdbc:mariadb://h/leaf?sslMode=verify-full", &t);
    ck_assert_int_eq(t.ssl_mode, DB_MYSQL_SSL_VERIFY_IDENTITY);
    db_mysql_target_free(&t);
    parse_ok("jdbc:mariadb://h/leaf?sslmode=trust", &t);
    ck_assert_int_eq(t.ssl_mode, DB_MYSQL_SSL_REQUIRED);
    db_mysql_target_free(&t);
    parse_ok("jdbc:mariadb://h/leaf?sslMode=disable", &t);
    ck_assert_int_eq(t.ssl_mode, DB_MYSQL_SSL_DISABLED);
    db_mysql_target_free(&t);
}
END_TEST

START_TEST(test_bad)
{
    char big[1100];

    parse_bad("mysql://u@h/d?ssl_mode=preferred", "falls back to clear text");
    parse_bad("jdbc:mysql://h/d?sslMode=PREFERRED", "falls back to clear text");
    parse_bad("mysql://u@h/d?ssl_mode=maybe", "bad ssl_mode \"maybe\"");
    parse_bad("mysql://u@h/d?ssl_mode=", "bad ssl_mode value");
    parse_bad("mysql://u@h/d?ssl_mode", "bad ssl_mode value");
    parse_bad("mysql://u@h/d?ssl_mode=%zz", "bad ssl_mode value");
    parse_bad("mysql://u@h/d?ssl_mode=verify_identity_and_more_words_too_long",
              "longer than 32");
    parse_bad("mysql://u@h/d?ssl_ca=ca.pem", "ssl_ca must be an absolute path");
    parse_bad("mysql://u@h/d?ssl_key=", "ssl_key must be an absolute path");
    parse_bad("mysql://u@h/d?ssl_cert=/c%00", "bad ssl_cert");
    parse_bad("mysql://u@h/d?ssl_mode=disabled&ssl_ca=/ca.pem",
              "ssl_mode=disabled and ssl_ca");
    parse_bad("mysql://u@h/d?ssl_mode=required&ssl_ca=/ca.pem",
              "checks no certificate");
    parse_bad("mysql://u@h/d?ssl_mode=verify_ca", "verify_ca without ssl_ca");
    parse_bad("mysql://u@h/d?ssl_cert=/c.pem", "needs both");
    parse_bad("mysql://u@h/d?ssl_ca=/ca&ssl_key=/k.pem", "needs both");
    /* mysql:// knows no Connector/J flags */
    parse_bad("mysql://u@h/d?useSSL=true", "unknown parameter \"useSSL\"");
    parse_bad("mysql://u@h/d?sslMode=REQUIRED", "unknown parameter");
    parse_bad("jdbc:mysql://h/d?useSSL=sometimes", "want true or false");
    parse_bad("jdbc:mysql://h/d?verifyServerCertificate=true",
              "verify_ca without ssl_ca");
    parse_bad("jdbc:mysql://h/d?useSSL=true&trustCertificateKeyStoreUrl="
              "file:/ks.jks", "Java key store");
    parse_bad("jdbc:mysql://h/d?clientCertificateKeyStoreUrl=file:/k.jks",
              "Java key store");

    /* each path at most 512 bytes (the URL at most 1024) */
    strcpy(big, "mysql://h/d?ssl_ca=/");
    memset(big + strlen(big), 'a', 512);
    big[20 + 512] = '\0';
    parse_bad(big, "longer than 512");
    big[20 + 511] = '\0';
    {
        struct db_mysql_target t;
        parse_ok(big, &t);
        ck_assert_uint_eq(strlen(t.ssl_ca), 512);
        db_mysql_target_free(&t);
    }
}
END_TEST

START_TEST(test_redacted)
{
    static const char *const cases[][2] = {
        { "mysql://leaf:s3cret@db1:3306/leaf?ssl_ca=/ca.pem",
          "mysql://leaf:***@db1:3306/leaf?ssl_ca=/ca.pem" },
        { "mysql://u%40x:p%3Aa@h/d", "mysql://u%40x:***@h/d" },
        { "mysql://a:b@c@h:1/d", "mysql://a:***@h:1/d" },
        { "mysql://root@h/d", "mysql://root@h/d" },
        { "mysql://u:@h/d", "mysql://u:***@h/d" },
        { "jdbc:mysql://h/leaf?user=app&password=pw&useSSL=true&password=x",
          "jdbc:mysql://h/leaf?user=app&password=***&useSSL=true&password=***" },
        { "jdbc:mysql://h/leaf?password=", "jdbc:mysql://h/leaf?password=***" },
        { "jdbc:mysql://h/leaf?a&password&b", "jdbc:mysql://h/leaf?a&password=***&b" },
        { "jdbc:mysql://h/leaf?xpassword=1&passwordx=2",
          "jdbc:mysql://h/leaf?xpassword=1&passwordx=2" },
        { "not a url", "not a url" },
        { "", "" },
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = db_mysql_url_redacted(cases[i][0]);
        ck_assert_str_eq(got, cases[i][1]);
        free(got);
    }
}
END_TEST

/* A file in a fresh temp directory holding text; its malloc'd path. */
static char *
temp_file(const char *dir, const char *name, const char *text)
{
    char *path = xasprintf("%s/%s", dir, name);
    FILE *f = fopen(path, "w");

    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

START_TEST(test_files_checked)
{
    char dir[] = "/tmp/check_mysql_tls.XXXXXX";
    char *ca, *junk, *url, *cause = NULL;
    struct db_mysql_target t;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    ca = temp_file(dir, "ca.pem", "subject=CN x\n-----BEGIN CERTIFICATE-----\n"
                   "MIIB\n-----END CERTIFICATE-----\n");
    junk = temp_file(dir, "junk.pem", "not a certificate\n");

    url = xasprintf("mysql://u@h/d?ssl_ca=%s", ca);
    ck_assert_msg(db_mysql_target_from_url(url, &t, &cause) == 0, "%s", cause);
    ck_assert_str_eq(t.ssl_ca, ca);
    db_mysql_target_free(&t);
    free(url);

    url = xasprintf("mysql://u@h/d?ssl_ca=%s", junk);
    ck_assert_int_eq(db_mysql_target_from_url(url, &t, &cause), -1);
    ck_assert_msg(strstr(cause, "ssl_ca") && strstr(cause, junk) &&
                  strstr(cause, "no PEM block"), "%s", cause);
    ck_assert_ptr_null(t.ssl_ca);
    free(cause);
    cause = NULL;
    free(url);

    url = xasprintf("mysql://u@h/d?ssl_ca=%s&ssl_cert=%s&ssl_key=%s/none.key",
                    ca, ca, dir);
    ck_assert_int_eq(db_mysql_target_from_url(url, &t, &cause), -1);
    ck_assert_msg(strstr(cause, "ssl_key") &&
                  strstr(cause, "No such file or directory"), "%s", cause);
    ck_assert_ptr_null(t.ssl_cert);
    free(cause);
    cause = NULL;
    free(url);

    /* parse errors come first, as from db_mysql_url_parse */
    ck_assert_int_eq(db_mysql_target_from_url("mysql://u@h/d?ssl_ca=x", &t,
                                              &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "absolute path"));
    free(cause);

    unlink(ca);
    unlink(junk);
    rmdir(dir);
    free(ca);
    free(junk);
}
END_TEST

/* A server without TLS: required and verify_ca are refused after the
 * handshake (Connector/C went on in clear text), verify_identity before it;
 * each cause says why and names the mode, never the password. */
START_TEST(test_server_without_tls_refused)
{
    static const char *const modes[] = { "required", "verify_ca",
                                         "verify_identity" };
    const char *base = getenv("LEAFD_TEST_MYSQL_URL");
    char dir[] = "/tmp/check_mysql_tls.XXXXXX";
    char *ca, *cause = NULL;
    struct db_mysql_target t;
    MYSQL *db;

    if (base == NULL || *base == '\0') {
        const char *ci = getenv("CI");
        ck_assert_msg(ci == NULL || (strcmp(ci, "1") != 0 &&
                                     strcmp(ci, "true") != 0),
                      "CI: LEAFD_TEST_MYSQL_URL is not set");
        printf("check_mysql_tls: LEAFD_TEST_MYSQL_URL not set: skipping the "
               "server case\n");
        return;
    }
    ck_assert_int_eq(db_mysql_thread_init(), 0);
    /* the server is one without TLS: a clear session works */
    ck_assert_int_eq(db_mysql_url_parse(base, &t, &cause), 0);
    db = db_mysql_connect(&t, "plain", 10, &cause);
    ck_assert_msg(db != NULL, "%s", cause);
    ck_assert_ptr_null(mysql_get_ssl_cipher(db));
    mysql_close(db);
    db_mysql_target_free(&t);

    ck_assert_ptr_nonnull(mkdtemp(dir));
    ca = temp_file(dir, "ca.pem", "-----BEGIN CERTIFICATE-----\n");
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        char sep = strchr(base, '?') != NULL ? '&' : '?';
        char *url = strcmp(modes[i], "required") == 0 ?
            xasprintf("%s%cssl_mode=required", base, sep) :
            xasprintf("%s%cssl_mode=%s&ssl_ca=%s", base, sep, modes[i], ca);
        ck_assert_msg(db_mysql_url_parse(url, &t, &cause) == 0, "%s", cause);
        db = db_mysql_connect(&t, "tls", 10, &cause);
        ck_assert_msg(db == NULL, "%s: a session without TLS", modes[i]);
        ck_assert_msg(strstr(cause, modes[i]) != NULL, "%s", cause);
        if (strcmp(modes[i], "verify_identity") == 0)
            ck_assert_msg(strstr(cause, "server does not support it") != NULL,
                          "%s", cause);
        else
            ck_assert_msg(strstr(cause, "did not start TLS") != NULL, "%s",
                          cause);
        free(cause);
        cause = NULL;
        db_mysql_target_free(&t);
        free(url);
    }
    unlink(ca);
    rmdir(dir);
    free(ca);
    db_mysql_thread_end();
}
END_TEST

static Suite *
mysql_tls_suite(void)
{
    Suite *s = suite_create("mysql_tls");
    TCase *tc = tcase_create("url");

    tcase_add_test(tc, test_modes);
    tcase_add_test(tc, test_jdbc);
    tcase_add_test(tc, test_bad);
    tcase_add_test(tc, test_files_checked);
    tcase_add_test(tc, test_redacted);
    suite_add_tcase(s, tc);
    tc = tcase_create("server");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_server_without_tls_refused);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(mysql_tls_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
