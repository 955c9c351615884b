/* check_grpc_frame.c: grpc_frame.c, the gRPC message prefix, grpc-timeout
 * and grpc-message encoding (pure functions). */
#include <check.h>
#include <string.h>

#include "grpc_frame.h"

START_TEST(test_grpc_frame_parse)
{
    static const unsigned char ok[] = { 0, 0, 0, 0, 2, 'h', 'i', 'x' };
    static const unsigned char big[] = { 0, 0x80, 0, 0, 0 };
    static const unsigned char zip[] = { 1, 0, 0, 0, 0 };
    static const unsigned char bad[] = { 2, 0, 0, 0, 0 };
    const unsigned char *m = NULL;
    size_t ml = 0, used = 0;

    ck_assert_int_eq(grpc_frame_parse(ok, 8, 10, &m, &ml, &used), GRPC_FRAME_OK);
    ck_assert(m == ok + 5);
    ck_assert_uint_eq(ml, 2);
    ck_assert_uint_eq(used, 7);
    ck_assert_int_eq(grpc_frame_parse(ok, 6, 10, &m, &ml, &used), GRPC_FRAME_MORE);
    ck_assert_int_eq(grpc_frame_parse(ok, 4, 10, &m, &ml, &used), GRPC_FRAME_MORE);
    ck_assert_int_eq(grpc_frame_parse(ok, 8, 1, &m, &ml, &used),
                     GRPC_FRAME_TOO_LARGE);
    ck_assert_int_eq(grpc_frame_parse(big, 5, 1u << 30, &m, &ml, &used),
                     GRPC_FRAME_TOO_LARGE);
    ck_assert_int_eq(grpc_frame_parse(zip, 5, 10, &m, &ml, &used),
                     GRPC_FRAME_COMPRESSED);
    ck_assert_int_eq(grpc_frame_parse(bad, 5, 10, &m, &ml, &used),
                     GRPC_FRAME_BAD_FLAG);
    ck_assert_int_eq(grpc_frame_parse(ok, 5, 0, &m, &ml, &used),
                     GRPC_FRAME_TOO_LARGE);
}
END_TEST

START_TEST(test_grpc_timeout_parse)
{
    static const struct { const char *s; int rc; int64_t us; } cases[] = {
        { "1H", 0, INT64_C(3600000000) }, { "2M", 0, 120000000 },
        { "3S", 0, 3000000 }, { "250m", 0, 250000 }, { "7u", 0, 7 },
        { "1500n", 0, 2 }, { "1n", 0, 1 }, { "0S", 0, 1 },
        { "99999999S", 0, INT64_C(99999999000000) },
        { "99999999H", 0, GRPC_TIMEOUT_MAX_US },
        { "123456789S", -1, 0 }, { "S", -1, 0 }, { "", -1, 0 },
        { "10s", -1, 0 }, { "1.5S", -1, 0 }, { "-1S", -1, 0 }, { "10", -1, 0 },
        { " 1S", -1, 0 },
    };
    int64_t us;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        us = -5;
        ck_assert_int_eq(grpc_timeout_parse(cases[i].s, strlen(cases[i].s), &us),
                         cases[i].rc);
        if (cases[i].rc == 0)
            ck_assert_msg(us == cases[i].us, "%s: %lld", cases[i].s,
                          (long long)us);
    }
}
END_TEST

START_TEST(test_grpc_message_encode)
{
    char out[16];

    ck_assert_uint_eq(grpc_message_encode(out, sizeof out, "a b%\n"), 9);
    ck_assert_str_eq(out, "a b%25%0A");
    /* Cut at a whole character. */
    ck_assert_uint_eq(grpc_message_encode(out, 6, "abcd%"), 4);
    ck_assert_str_eq(out, "abcd");
    ck_assert_uint_eq(grpc_message_encode(out, 1, "abc"), 0);
    ck_assert_str_eq(out, "");
}
END_TEST

static Suite *
grpc_frame_suite(void)
{
    Suite *s = suite_create("grpc_frame");
    TCase *tc = tcase_create("grpc_frame");

    tcase_add_test(tc, test_grpc_frame_parse);
    tcase_add_test(tc, test_grpc_timeout_parse);
    tcase_add_test(tc, test_grpc_message_encode);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(grpc_frame_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
