/* check_resp_parse.c: the RESP request parser: multibulk and inline
 * commands, pipelines, commands split at every byte, quotes and escapes,
 * and every limit and malformed form refused with Redis's wording. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "resp_parse.h"

static const struct resp_limits lim = { 8, 64, 128 };
static char scratch[256];

static enum resp_parse_result
parse(const char *s, size_t len, struct resp_cmd *cmd, size_t *used, const char **err)
{
    return resp_parse(s, len, &lim, scratch, sizeof scratch, cmd, used, err);
}

static void
expect_args(const struct resp_cmd *cmd, int n, const char **want)
{
    ck_assert_uint_eq(cmd->argc, (size_t)n);
    for (int i = 0; i < n; i++) {
        ck_assert_uint_eq(cmd->argl[i], strlen(want[i]));
        ck_assert(memcmp(cmd->argv[i], want[i], cmd->argl[i]) == 0);
    }
}

START_TEST(multibulk)
{
    const char *s = "*2\r\n$4\r\nINCR\r\n$4\r\ndemo\r\n*1\r\n$4\r\nPING\r\n";
    const char *w1[] = { "INCR", "demo" }, *w2[] = { "PING" };
    struct resp_cmd cmd;
    size_t used, used2;
    const char *err;

    ck_assert_int_eq(parse(s, strlen(s), &cmd, &used, &err), RESP_PARSE_OK);
    ck_assert_uint_eq(used, 24);
    expect_args(&cmd, 2, w1);
    ck_assert_int_eq(parse(s + used, strlen(s) - used, &cmd, &used2, &err), RESP_PARSE_OK);
    expect_args(&cmd, 1, w2);
    /* Every proper prefix needs more. */
    for (size_t k = 0; k < used; k++)
        ck_assert_int_eq(parse(s, k, &cmd, &used2, &err), RESP_PARSE_MORE);
    /* Binary-safe: CR, LF and NUL inside a bulk string. */
    ck_assert_int_eq(parse("*1\r\n$3\r\na\r\0\r\n", 13, &cmd, &used, &err), RESP_PARSE_OK);
    ck_assert_uint_eq(cmd.argl[0], 3);
    ck_assert_int_eq(parse("*0\r\n", 4, &cmd, &used, &err), RESP_PARSE_EMPTY);
    ck_assert_uint_eq(used, 4);
}
END_TEST

START_TEST(inline_commands)
{
    const char *w1[] = { "INCR", "demo" };
    const char *w2[] = { "ECHO", "a b\n", "it's", "\x01" };
    const char *s2 = "ECHO \"a b\\n\" 'it\\'s' \"\\x01\"\r\n";
    struct resp_cmd cmd;
    size_t used;
    const char *err;

    ck_assert_int_eq(parse("INCR demo\r\n", 11, &cmd, &used, &err), RESP_PARSE_OK);
    ck_assert(cmd.is_inline);
    ck_assert_uint_eq(used, 11);
    expect_args(&cmd, 2, w1);
    ck_assert_int_eq(parse("  INCR\tdemo  \n", 14, &cmd, &used, &err), RESP_PARSE_OK);
    expect_args(&cmd, 2, w1);
    ck_assert_int_eq(parse(s2, strlen(s2), &cmd, &used, &err), RESP_PARSE_OK);
    expect_args(&cmd, 4, w2);
    ck_assert_int_eq(parse("\r\n", 2, &cmd, &used, &err), RESP_PARSE_EMPTY);
    ck_assert_uint_eq(used, 2);
    ck_assert_int_eq(parse("INCR de", 7, &cmd, &used, &err), RESP_PARSE_MORE);
}
END_TEST

START_TEST(refusals)
{
    static const struct { const char *in; size_t len; } bad[] = {
        { "*9\r\n", 4 },                          /* over max_args */
        { "*x\r\n", 4 },
        { "*1\r\n:1\r\n", 8 },                    /* not a bulk string */
        { "*1\r\n$65\r\n", 9 },                   /* over max_bulk */
        { "*1\r\n$-1\r\n", 9 },
        { "*1\r\n$1\r\nab\r\n", 12 },             /* no CRLF after the data */
        { "*1\r$1\r\n", 7 },
        { "*1234567890123456789\r\n", 22 },
        { "*1\r\n$12345678901234567890123", 29 }, /* endless header */
        { "ECHO \"abc\r\n", 11 },                 /* unbalanced quotes */
        { "ECHO \"a\"b\r\n", 11 },
        { "a b c d e f g h i\r\n", 19 },          /* 9 inline arguments */
    };
    char big[300];
    struct resp_cmd cmd;
    size_t used;
    const char *err;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err = NULL;
        ck_assert_msg(parse(bad[i].in, bad[i].len, &cmd, &used, &err) == RESP_PARSE_ERROR,
                      "case %zu accepted", i);
        ck_assert_ptr_nonnull(err);
        ck_assert(strncmp(err, "Protocol error: ", 16) == 0);
    }
    /* An inline line longer than max_inline, with or without its newline. */
    memset(big, 'a', sizeof big);
    ck_assert_int_eq(parse(big, sizeof big, &cmd, &used, &err), RESP_PARSE_ERROR);
    big[200] = '\n';
    ck_assert_int_eq(parse(big, sizeof big, &cmd, &used, &err), RESP_PARSE_ERROR);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("resp_parse");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, multibulk);
    tcase_add_test(tc, inline_commands);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
