/* check_http_parse.c: unit tests for the HTTP/1.x request-head parser. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "http_parse.h"

#define MAXH 8192
#define MAXU 4096

static enum http_parse_result
parse(const char *s, struct http_msg *m)
{
    return http_parse_request(s, strlen(s), MAXH, MAXU, m);
}

static int
streq(const char *p, size_t n, const char *s)
{
    return p != NULL && strlen(s) == n && memcmp(p, s, n) == 0;
}

START_TEST(test_simple_get)
{
    const char *r = "GET /api/segment/get/leaf-segment-test?x=1&y=2 HTTP/1.1\r\n"
                    "Host: localhost\r\n"
                    "Accept: text/html, Application/JSON;q=0.9\r\n"
                    "Authorization: Bearer abc \r\n"
                    "\r\n";
    struct http_msg m;

    ck_assert_int_eq(parse(r, &m), HTTP_PARSE_OK);
    ck_assert_int_eq(m.method, HTTP_GET);
    ck_assert_int_eq(m.version_minor, 1);
    ck_assert(streq(m.target, m.target_len,
                    "/api/segment/get/leaf-segment-test?x=1&y=2"));
    ck_assert(streq(m.path, m.path_len, "/api/segment/get/leaf-segment-test"));
    ck_assert(streq(m.query, m.query_len, "x=1&y=2"));
    ck_assert_int_eq(m.keep_alive, 1);
    ck_assert_int_eq(m.accept_json, 1);
    ck_assert_int_eq(m.chunked, 0);
    ck_assert_int_eq(m.content_length, -1);
    ck_assert(streq(m.authorization, m.authorization_len, "Bearer abc"));
    ck_assert_uint_eq(m.head_len, strlen(r));
}
END_TEST

START_TEST(test_methods_and_minimal)
{
    static const struct { const char *req; enum http_method m; } cases[] = {
        { "GET / HTTP/1.1\r\n\r\n", HTTP_GET },
        { "HEAD / HTTP/1.1\r\n\r\n", HTTP_HEAD },
        { "POST / HTTP/1.1\r\n\r\n", HTTP_POST },
        { "PUT / HTTP/1.1\r\n\r\n", HTTP_PUT },
        { "DELETE / HTTP/1.1\r\n\r\n", HTTP_DELETE },
        { "OPTIONS / HTTP/1.1\r\n\r\n", HTTP_OPTIONS },
        { "PATCH / HTTP/1.1\r\n\r\n", HTTP_PATCH },
        { "BREW / HTTP/1.1\r\n\r\n", HTTP_OTHER },
        { "get / HTTP/1.1\r\n\r\n", HTTP_OTHER },
    };
    struct http_msg m;
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_int_eq(parse(cases[i].req, &m), HTTP_PARSE_OK);
        ck_assert_int_eq(m.method, cases[i].m);
        ck_assert_ptr_null(m.query);
        ck_assert(streq(m.path, m.path_len, "/"));
    }
    ck_assert_str_eq(http_method_name(HTTP_HEAD), "HEAD");
    ck_assert_str_eq(http_method_name(HTTP_OTHER), "OTHER");
}
END_TEST

START_TEST(test_pipelined_head_len)
{
    const char *r = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                    "GET /bb HTTP/1.1\r\n\r\n"
                    "GET /c";
    struct http_msg m;
    size_t off = 0, len = strlen(r);

    ck_assert_int_eq(http_parse_request(r, len, MAXH, MAXU, &m), HTTP_PARSE_OK);
    ck_assert(streq(m.path, m.path_len, "/a"));
    off += m.head_len;
    ck_assert_int_eq(http_parse_request(r + off, len - off, MAXH, MAXU, &m),
                     HTTP_PARSE_OK);
    ck_assert(streq(m.path, m.path_len, "/bb"));
    ck_assert_uint_eq(m.head_len, strlen("GET /bb HTTP/1.1\r\n\r\n"));
    off += m.head_len;
    ck_assert_int_eq(http_parse_request(r + off, len - off, MAXH, MAXU, &m),
                     HTTP_PARSE_INCOMPLETE);
}
END_TEST

START_TEST(test_incomplete_every_split)
{
    static const char *reqs[] = {
        "GET /x?y=1 HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n"
        "Content-Length: 0\r\n\r\n",
        "\r\nHEAD / HTTP/1.0\nAccept: */*\n\n",
    };
    struct http_msg m;
    size_t i, k, n;

    for (i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
        n = strlen(reqs[i]);
        for (k = 0; k < n; k++)
            ck_assert_msg(http_parse_request(reqs[i], k, MAXH, MAXU, &m) ==
                          HTTP_PARSE_INCOMPLETE, "req %zu split %zu", i, k);
        ck_assert_int_eq(http_parse_request(reqs[i], n, MAXH, MAXU, &m),
                         HTTP_PARSE_OK);
        ck_assert_uint_eq(m.head_len, n);
    }
}
END_TEST

START_TEST(test_bare_lf_and_leading_empty_lines)
{
    struct http_msg m;

    ck_assert_int_eq(parse("GET /a HTTP/1.1\nHost: x\n\n", &m), HTTP_PARSE_OK);
    ck_assert_uint_eq(m.head_len, 25);
    ck_assert_int_eq(parse("\r\n\r\nGET /a HTTP/1.1\r\n\r\n", &m),
                     HTTP_PARSE_OK);
    ck_assert(streq(m.path, m.path_len, "/a"));
    ck_assert_int_eq(parse("GET /a HTTP/1.1\r\nA: b\n\r\n", &m), HTTP_PARSE_OK);
}
END_TEST

START_TEST(test_bad_requests)
{
    static const char *bad[] = {
        " GET / HTTP/1.1\r\n\r\n",            /* leading space */
        "GET  / HTTP/1.1\r\n\r\n",            /* empty target */
        "GET / HTTP/1.1 \r\n\r\n",            /* trailing space */
        "GET / http/1.1\r\n\r\n",             /* lower-case version */
        "GET / HTTP/1.x\r\n\r\n",
        "GET / HTTP/11\r\n\r\n",
        "GET / HTTP/1.1x\r\n\r\n",
        "GET x HTTP/1.1\r\n\r\n",             /* target not starting with / */
        "GET * HTTP/1.1\r\n\r\n",
        "OPTIONS * HTTP/1.1\r\n\r\n",
        "GET http:// HTTP/1.1\r\n\r\n",      /* absolute-form, no host */
        "GET http:///a HTTP/1.1\r\n\r\n",
        "GET http://u@h/a HTTP/1.1\r\n\r\n",  /* userinfo */
        "GET http://h#f/a HTTP/1.1\r\n\r\n",
        "GET ftp://h/a HTTP/1.1\r\n\r\n",
        "GET http:/h/a HTTP/1.1\r\n\r\n",
        "GET h/a HTTP/1.1\r\n\r\n",
        "GET /a\x01 HTTP/1.1\r\n\r\n",
        "GET /a\x7f HTTP/1.1\r\n\r\n",
        "GET /\tb HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\r\n\r\n",            /* CR not before LF */
        "GET / HTTP/1.1\r\nHost : x\r\n\r\n",  /* space before colon */
        "GET / HTTP/1.1\r\n: x\r\n\r\n",       /* empty name */
        "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
        "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n",   /* obs-fold */
        "GET / HTTP/1.1\r\n Host: x\r\n\r\n",
        "GET / HTTP/1.1\r\nA: b\x01\r\n\r\n",     /* control in value */
        "GET / HTTP/1.1\r\nA: b\rc\r\n\r\n",
        "GET / HTTP/1.1\r\nA: b\r\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: +1\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: \r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        "GET / HTTP/1.1\r\nAuthorization: a\r\nAuthorization: b\r\n\r\n",
        "\rGET / HTTP/1.1\r\n\r\n",
        "G\"T / HTTP/1.1\r\n\r\n",
        "GETGETGETGETGETGETGETGETGETGETGETGETGET / HTTP/1.1\r\n\r\n",
    };
    struct http_msg m;
    size_t i;

    for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(parse(bad[i], &m) == HTTP_PARSE_BAD, "case %zu", i);
    /* an embedded NUL is not a string terminator to the parser */
    ck_assert_int_eq(http_parse_request("GET /\0 HTTP/1.1\r\n\r\n", 20, MAXH,
                                        MAXU, &m), HTTP_PARSE_BAD);
    ck_assert_int_eq(http_parse_request("GET / HTTP/1.1\r\nA: \0\r\n\r\n", 24,
                                        MAXH, MAXU, &m), HTTP_PARSE_BAD);
}
END_TEST

/* RFC 9112 section 3.2.2: a server must accept the absolute-form; the path
 * and query come from after the authority. */
START_TEST(test_absolute_form)
{
    struct http_msg m;

    ck_assert_int_eq(parse("GET http://host/segment/demo HTTP/1.1\r\n\r\n", &m),
                     HTTP_PARSE_OK);
    ck_assert(streq(m.target, m.target_len, "http://host/segment/demo"));
    ck_assert(streq(m.path, m.path_len, "/segment/demo"));
    ck_assert_ptr_null(m.query);

    ck_assert_int_eq(parse("GET HTTPS://h.example:8080/snowflake?count=2 "
                           "HTTP/1.1\r\nHost: other\r\n\r\n", &m), HTTP_PARSE_OK);
    ck_assert(streq(m.path, m.path_len, "/snowflake"));
    ck_assert(streq(m.query, m.query_len, "count=2"));

    ck_assert_int_eq(parse("GET http://h HTTP/1.1\r\n\r\n", &m), HTTP_PARSE_OK);
    ck_assert(streq(m.path, m.path_len, "/"));
    ck_assert_ptr_null(m.query);

    ck_assert_int_eq(parse("GET http://h?a=1 HTTP/1.0\r\n\r\n", &m), HTTP_PARSE_OK);
    ck_assert(streq(m.path, m.path_len, "/"));
    ck_assert(streq(m.query, m.query_len, "a=1"));

    ck_assert_int_eq(parse("GET http://[::1]:80/a/b?c HTTP/1.1\r\n\r\n", &m),
                     HTTP_PARSE_OK);
    ck_assert(streq(m.path, m.path_len, "/a/b"));
    ck_assert(streq(m.query, m.query_len, "c"));
}
END_TEST

START_TEST(test_versions)
{
    struct http_msg m;

    ck_assert_int_eq(parse("GET / HTTP/2.0\r\n\r\n", &m),
                     HTTP_PARSE_BAD_VERSION);
    ck_assert_int_eq(parse("GET / HTTP/0.9\r\n\r\n", &m),
                     HTTP_PARSE_BAD_VERSION);
    ck_assert_int_eq(parse("GET / HTTP/3.0\r\nHost: x", &m),
                     HTTP_PARSE_BAD_VERSION);
    ck_assert_int_eq(parse("GET / HTTP/1.0\r\n\r\n", &m), HTTP_PARSE_OK);
    ck_assert_int_eq(m.version_minor, 0);
    ck_assert_int_eq(parse("GET / HTTP/1.9\r\n\r\n", &m), HTTP_PARSE_OK);
    ck_assert_int_eq(m.version_minor, 1);
}
END_TEST

START_TEST(test_limits)
{
    struct http_msg m;
    char buf[200];

    /* target of exactly max_url is fine, one more is 414 (even unfinished) */
    ck_assert_int_eq(http_parse_request("GET /abcd HTTP/1.1\r\n\r\n", 22, 100,
                                        5, &m), HTTP_PARSE_OK);
    ck_assert_int_eq(http_parse_request("GET /abcde HTTP/1.1\r\n\r\n", 23, 100,
                                        5, &m), HTTP_PARSE_URI_TOO_LONG);
    ck_assert_int_eq(http_parse_request("GET /abcdef", 11, 100, 5, &m),
                     HTTP_PARSE_URI_TOO_LONG);
    /* head limits: exactly max_head is fine */
    ck_assert_int_eq(http_parse_request("GET / HTTP/1.1\r\n\r\n", 18, 18, 5, &m),
                     HTTP_PARSE_OK);
    ck_assert_int_eq(http_parse_request("GET / HTTP/1.1\r\n\r\n", 18, 17, 5, &m),
                     HTTP_PARSE_HEADERS_TOO_LARGE);
    ck_assert_int_eq(http_parse_request("GET / HTTP/1.1\r\n\r", 17, 17, 5, &m),
                     HTTP_PARSE_HEADERS_TOO_LARGE);
    ck_assert_int_eq(http_parse_request("GET / HTTP/1.1\r\n\r", 17, 18, 5, &m),
                     HTTP_PARSE_INCOMPLETE);
    /* a long header line with no end in sight */
    memset(buf, 'a', sizeof buf);
    memcpy(buf, "GET / HTTP/1.1\r\nX: ", 19);
    ck_assert_int_eq(http_parse_request(buf, sizeof buf, 100, 50, &m),
                     HTTP_PARSE_HEADERS_TOO_LARGE);
    ck_assert_int_eq(http_parse_request(buf, 99, 100, 50, &m),
                     HTTP_PARSE_INCOMPLETE);
    /* a target longer than max_head but under max_url: 431 */
    ck_assert_int_eq(http_parse_request("GET /abcdefghij", 15, 10, 100, &m),
                     HTTP_PARSE_HEADERS_TOO_LARGE);
}
END_TEST

START_TEST(test_keep_alive_rules)
{
    static const struct { const char *req; int ka; } cases[] = {
        { "GET / HTTP/1.1\r\n\r\n", 1 },
        { "GET / HTTP/1.1\r\nConnection: close\r\n\r\n", 0 },
        { "GET / HTTP/1.1\r\nconnection: CLOSE\r\n\r\n", 0 },
        { "GET / HTTP/1.1\r\nConnection: keep-alive, close\r\n\r\n", 0 },
        { "GET / HTTP/1.1\r\nConnection: Upgrade ,close \r\n\r\n", 0 },
        { "GET / HTTP/1.1\r\nConnection: closed\r\n\r\n", 1 },
        { "GET / HTTP/1.1\r\nConnection: te\r\nConnection: close\r\n\r\n", 0 },
        { "GET / HTTP/1.0\r\n\r\n", 0 },
        { "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 1 },
        { "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", 1 },
        { "GET / HTTP/1.0\r\nConnection: x,keep-alive\r\n\r\n", 1 },
        { "GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", 0 },
        { "GET / HTTP/1.0\r\nKeep-Alive: timeout=5\r\n\r\n", 0 },
    };
    struct http_msg m;
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_int_eq(parse(cases[i].req, &m), HTTP_PARSE_OK);
        ck_assert_msg(m.keep_alive == cases[i].ka, "case %zu", i);
    }
}
END_TEST

START_TEST(test_header_fields)
{
    struct http_msg m;

    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nACCEPT:application/json\r\n\r\n",
                           &m), HTTP_PARSE_OK);
    ck_assert_int_eq(m.accept_json, 1);
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nAccept: */*\r\n"
                           "X-Accept: application/json\r\n\r\n", &m),
                     HTTP_PARSE_OK);
    ck_assert_int_eq(m.accept_json, 0);
    ck_assert_int_eq(parse("POST / HTTP/1.1\r\nContent-Length: 0012\r\n"
                           "content-length:12\r\n\r\n", &m), HTTP_PARSE_OK);
    ck_assert_int_eq(m.content_length, 12);
    ck_assert_int_eq(parse("POST / HTTP/1.1\r\nContent-Length: "
                           "99999999999999999999999\r\n\r\n", &m),
                     HTTP_PARSE_OK);
    ck_assert(m.content_length == INT64_MAX);
    ck_assert_int_eq(parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                           "\r\n", &m), HTTP_PARSE_OK);
    ck_assert_int_eq(m.chunked, 1);
    ck_assert_int_eq(parse("POST / HTTP/1.1\r\ntransfer-encoding: gzip\r\n\r\n",
                           &m), HTTP_PARSE_OK);
    ck_assert_int_eq(m.chunked, 1);
    /* empty values, tabs, obs-text, trailing whitespace trimmed */
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nX-Empty:\r\nX-Tab:\ta\tb\t\r\n"
                           "X-Utf8: \xc3\xa9\r\nAuthorization:\r\n\r\n", &m),
                     HTTP_PARSE_OK);
    ck_assert_ptr_nonnull(m.authorization);
    ck_assert_uint_eq(m.authorization_len, 0);
    /* query edge cases: empty query, '?' later in query, raw escapes */
    ck_assert_int_eq(parse("GET /a%20b? HTTP/1.1\r\n\r\n", &m), HTTP_PARSE_OK);
    ck_assert(streq(m.path, m.path_len, "/a%20b"));
    ck_assert_ptr_nonnull(m.query);
    ck_assert_uint_eq(m.query_len, 0);
    ck_assert_int_eq(parse("GET /?a=?b HTTP/1.1\r\n\r\n", &m), HTTP_PARSE_OK);
    ck_assert(streq(m.query, m.query_len, "a=?b"));
    ck_assert_int_eq(parse("GET /\xc3\xa9 HTTP/1.1\r\n\r\n", &m), HTTP_PARSE_OK);
}
END_TEST

START_TEST(test_random_garbage)
{
    char buf[512];
    struct http_msg m;
    enum http_parse_result r;
    unsigned seed = 12345;
    size_t len;
    int i, j;

    for (i = 0; i < 20000; i++) {
        len = (size_t)(rand_r(&seed) % (int)sizeof buf);
        for (j = 0; j < (int)len; j++)
            buf[j] = (char)(rand_r(&seed) & 0xff);
        if (i % 3 == 0 && len > 16)
            memcpy(buf, "GET / HTTP/1.1\r\n", 16);
        r = http_parse_request(buf, len, 300, 100, &m);
        ck_assert(r >= HTTP_PARSE_OK && r <= HTTP_PARSE_BAD_VERSION);
        if (r == HTTP_PARSE_OK)
            ck_assert(m.head_len <= len && m.head_len <= 300);
        if (r == HTTP_PARSE_INCOMPLETE)
            ck_assert(len < 300);
    }
}
END_TEST

static Suite *
http_parse_suite(void)
{
    Suite *s = suite_create("http_parse");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_simple_get);
    tcase_add_test(tc, test_methods_and_minimal);
    tcase_add_test(tc, test_pipelined_head_len);
    tcase_add_test(tc, test_incomplete_every_split);
    tcase_add_test(tc, test_bare_lf_and_leading_empty_lines);
    tcase_add_test(tc, test_bad_requests);
    tcase_add_test(tc, test_absolute_form);
    tcase_add_test(tc, test_versions);
    tcase_add_test(tc, test_limits);
    tcase_add_test(tc, test_keep_alive_rules);
    tcase_add_test(tc, test_header_fields);
    tcase_add_test(tc, test_random_garbage);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(http_parse_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
