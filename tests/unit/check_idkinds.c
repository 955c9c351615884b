/* check_idkinds.c: UUIDv7 and ULID: RFC 9562's example, text forms,
 * decoders' refusals, monotonicity under clock steps and counter overflow,
 * 4 threads x 1M IDs of each kind without a duplicate, fork, and a copy
 * of the process that runs no fork handler (what a VM clone does to it). */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "csprng.h"
#include "ulid.h"
#include "uuid7.h"

/* An injectable clock: tests set it. */
static _Atomic int64_t fake_ms;

static int64_t
fake_clock(void *arg)
{
    (void)arg;
    return atomic_load(&fake_ms);
}

START_TEST(uuid_rfc_example)
{
    /* RFC 9562 Appendix A.6: 2022-02-22 14:22:22.00 -05:00. */
    const char *ex = "017F22E2-79B0-7CC3-98C4-DC0C0C07398F";
    struct uuid7 u;
    struct uuid7_decoded d;
    char text[UUID7_TEXT_LEN + 1];
    char *cause = NULL;

    ck_assert_int_eq(uuid7_parse(ex, strlen(ex), &u, &cause), 0);
    uuid7_decode(&u, &d);
    ck_assert_int_eq(d.version, 7);
    ck_assert_str_eq(d.variant, "rfc9562");
    ck_assert(d.is_v7);
    ck_assert_int_eq(d.timestamp_ms, 0x017F22E279B0LL);
    ck_assert_str_eq(d.time, "2022-02-22T19:22:22.000Z");
    uuid7_format(&u, text);
    text[UUID7_TEXT_LEN] = '\0';
    ck_assert_str_eq(text, "017f22e2-79b0-7cc3-98c4-dc0c0c07398f");
}
END_TEST

START_TEST(uuid_parse_refusals)
{
    static const char *bad[] = {
        "", "017f22e2-79b0-7cc3-98c4-dc0c0c07398", "017f22e279b07cc398c4dc0c0c07398f",
        "017f22e2-79b0-7cc3-98c4-dc0c0c07398g", "017f22e2+79b0-7cc3-98c4-dc0c0c07398f",
        "017f22e2-79b0-7cc3-98c4-dc0c0c07398f0", " 17f22e2-79b0-7cc3-98c4-dc0c0c07398f",
    };
    struct uuid7 u;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *cause = NULL;

        ck_assert_int_eq(uuid7_parse(bad[i], strlen(bad[i]), &u, &cause), -1);
        ck_assert_ptr_nonnull(cause);
        free(cause);
    }
}
END_TEST

START_TEST(uuid_layout_and_round_trip)
{
    struct uuid7_gen *g = uuid7_gen_new(fake_clock, NULL);
    struct uuid7 u[3], back;
    struct uuid7_decoded d;
    char text[UUID7_TEXT_LEN];

    atomic_store(&fake_ms, 1700000000123LL);
    ck_assert_int_eq(uuid7_next(g, 3, u), 0);
    for (int i = 0; i < 3; i++) {
        uuid7_decode(&u[i], &d);
        ck_assert(d.is_v7);
        ck_assert_int_eq(d.timestamp_ms, 1700000000123LL);
        /* The rollover guard: a fresh seed is below 2^41. */
        ck_assert_uint_lt(d.counter, (UINT64_C(1) << 41) + 3);
        uuid7_format(&u[i], text);
        ck_assert_int_eq(uuid7_parse(text, sizeof text, &back, NULL), 0);
        ck_assert_mem_eq(back.b, u[i].b, 16);
        for (int k = 0; k < UUID7_TEXT_LEN; k++)
            ck_assert(text[k] == '-' || (text[k] >= '0' && text[k] <= '9') ||
                      (text[k] >= 'a' && text[k] <= 'f'));
    }
    uuid7_decode(&u[0], &d);
    {
        struct uuid7_decoded d1;

        uuid7_decode(&u[1], &d1);
        ck_assert_uint_eq(d1.counter, d.counter + 1);
    }
    uuid7_gen_free(g);
}
END_TEST

/* Strictly increasing as bytes over a clock that jumps about. */
START_TEST(uuid_monotonic_clock_steps)
{
    struct uuid7_gen *g = uuid7_gen_new(fake_clock, NULL);
    static const int64_t steps[] = { 0, 0, 1, -10, -10000, 5, 20000, -1, 0 };
    struct uuid7 prev, u[100];
    int have = 0;
    int64_t t = 1700000000000LL;

    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        t += steps[s];
        atomic_store(&fake_ms, t);
        ck_assert_int_eq(uuid7_next(g, 100, u), 0);
        for (int i = 0; i < 100; i++) {
            if (have)
                ck_assert(memcmp(prev.b, u[i].b, 16) < 0);
            prev = u[i];
            have = 1;
        }
    }
    uuid7_gen_free(g);
}
END_TEST

/* Counter overflow moves to the next ms, ahead of the clock, and stays
 * there (no creeping further ahead) until the clock catches up. */
START_TEST(uuid_counter_overflow)
{
    struct uuid7_gen *g = uuid7_gen_new(fake_clock, NULL);
    struct uuid7 u[4];
    struct uuid7_decoded d;

    atomic_store(&fake_ms, 1000);
    uuid7_gen_force(g, 1000, (UINT64_C(1) << UUID7_COUNTER_BITS) - 2);
    ck_assert_int_eq(uuid7_next(g, 4, u), 0);
    uuid7_decode(&u[0], &d);
    ck_assert_int_eq(d.timestamp_ms, 1000);
    uuid7_decode(&u[1], &d);
    ck_assert_int_eq(d.timestamp_ms, 1001);
    ck_assert_uint_lt(d.counter, UINT64_C(1) << 41);
    uuid7_decode(&u[3], &d);
    ck_assert_int_eq(d.timestamp_ms, 1001);
    for (int i = 1; i < 4; i++)
        ck_assert(memcmp(u[i - 1].b, u[i].b, 16) < 0);
    uuid7_gen_free(g);
}
END_TEST

START_TEST(ulid_spec_example)
{
    const char *ex = "01ARYZ6S41TSV4RRFFQ69G5FAV";
    struct ulid u;
    char text[ULID_TEXT_LEN];
    struct sbuf b = { 0 };

    ck_assert_int_eq(ulid_parse(ex, strlen(ex), &u, NULL), 0);
    ck_assert_int_eq(ulid_timestamp_ms(&u), 1469918176385LL);
    ulid_format(&u, text);
    ck_assert_mem_eq(text, ex, ULID_TEXT_LEN);
    /* Lower case and the aliases decode to the same value. */
    {
        struct ulid v;

        ck_assert_int_eq(ulid_parse("01aryz6s41tsv4rrffq69g5fav", 26, &v, NULL), 0);
        ck_assert_mem_eq(v.b, u.b, 16);
        ck_assert_int_eq(ulid_parse("OIARYZ6S4LTSV4RRFFQ69G5FAV", 26, &v, NULL), 0);
        ck_assert_mem_eq(v.b, u.b, 16);
    }
    ulid_decoded_json(&u, &b);
    ck_assert_ptr_nonnull(strstr(b.p, "\"timestamp\":1469918176385"));
    ck_assert_ptr_nonnull(strstr(b.p, "\"time\":\"2016-07-30T22:36:16.385Z\""));
    sbuf_free(&b);
}
END_TEST

START_TEST(ulid_parse_refusals)
{
    static const char *bad[] = {
        "", "01ARYZ6S41TSV4RRFFQ69G5FA", "01ARYZ6S41TSV4RRFFQ69G5FAVV",
        "01ARYZ6S41TSV4RRFFQ69G5FAU", "01ARYZ6S41TSV4RRFFQ69G5FA-",
        "8ZZZZZZZZZZZZZZZZZZZZZZZZZ", "ZZZZZZZZZZZZZZZZZZZZZZZZZZ",
        "01ARYZ6S41TSV4RRFFQ69G5FA\x80",
    };
    struct ulid u;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *cause = NULL;

        ck_assert_int_eq(ulid_parse(bad[i], strlen(bad[i]), &u, &cause), -1);
        ck_assert_ptr_nonnull(cause);
        free(cause);
    }
    ck_assert_int_eq(ulid_parse("7ZZZZZZZZZZZZZZZZZZZZZZZZZ", 26, &u, NULL), 0);
    for (int i = 0; i < 16; i++)
        ck_assert_uint_eq(u.b[i], 0xff);
}
END_TEST

START_TEST(ulid_monotonic_and_overflow)
{
    struct ulid_gen *g = ulid_gen_new(fake_clock, NULL);
    static const int64_t steps[] = { 0, 0, 1, -10, -10000, 5, 20000, -1, 0 };
    struct ulid prev, u[100];
    uint8_t top[10];
    char a[ULID_TEXT_LEN], b[ULID_TEXT_LEN];
    int have = 0;
    int64_t t = 1700000000000LL;

    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        t += steps[s];
        atomic_store(&fake_ms, t);
        ck_assert_int_eq(ulid_next(g, 100, u), 0);
        for (int i = 0; i < 100; i++) {
            if (have) {
                ck_assert(memcmp(prev.b, u[i].b, 16) < 0);
                ulid_format(&prev, a);
                ulid_format(&u[i], b);
                ck_assert(memcmp(a, b, ULID_TEXT_LEN) < 0);
            }
            prev = u[i];
            have = 1;
        }
    }
    /* Same ms: +1 with carry. */
    atomic_store(&fake_ms, 5000);
    memset(top, 0, sizeof top);
    top[9] = 0xff;
    ulid_gen_force(g, 5000, top);
    ck_assert_int_eq(ulid_next(g, 1, u), 0);
    ck_assert_uint_eq(u[0].b[14], 1);
    ck_assert_uint_eq(u[0].b[15], 0);
    /* Overflow of all 80 bits: the next ms, never an error. */
    memset(top, 0xff, sizeof top);
    ulid_gen_force(g, 5000, top);
    ck_assert_int_eq(ulid_next(g, 2, u), 0);
    ck_assert_int_eq(ulid_timestamp_ms(&u[0]), 5001);
    ck_assert_int_eq(ulid_timestamp_ms(&u[1]), 5001);
    ck_assert(memcmp(u[0].b, u[1].b, 16) < 0);
    ulid_gen_free(g);
}
END_TEST

/* 4 threads x 1M of each kind on one generator: sorted, no two equal; each
 * thread's own IDs strictly increasing. Under ASan or TSan, which run this
 * 10-30 times slower (over 3 minutes on a busy machine), 250k each: the same
 * race, and the plain build still counts a million. */
#define NTHR 4
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PER  250000
#else
#define PER  1000000
#endif
#define BATCH 50

struct race {
    struct uuid7_gen *ug;
    struct ulid_gen  *lg;
    uint8_t          *out;           /* PER * 16 bytes */
    int               fail;
};

static void *
race_thread(void *arg)
{
    struct race *r = arg;

    /* Single IDs and batches in turn. */
    for (int i = 0, k = 0; i < PER; k++) {
        int n = k % 2 ? (PER - i < BATCH ? PER - i : BATCH) : 1;
        uint8_t *at = r->out + 16 * (size_t)i;

        if (r->ug != NULL ? uuid7_next(r->ug, (size_t)n, (struct uuid7 *)at)
                          : ulid_next(r->lg, (size_t)n, (struct ulid *)at))
            r->fail = 1;
        i += n;
    }
    for (int i = 1; i < PER; i++)
        if (memcmp(r->out + 16 * (size_t)(i - 1), r->out + 16 * (size_t)i, 16) >= 0)
            r->fail = 2;
    return NULL;
}

static int
cmp16(const void *a, const void *b)
{
    return memcmp(a, b, 16);
}

static void
race(int uuid)
{
    struct uuid7_gen *ug = uuid ? uuid7_gen_new(NULL, NULL) : NULL;
    struct ulid_gen *lg = uuid ? NULL : ulid_gen_new(NULL, NULL);
    struct race r[NTHR];
    pthread_t th[NTHR];
    uint8_t *all = malloc((size_t)NTHR * PER * 16);

    ck_assert_ptr_nonnull(all);
    for (int t = 0; t < NTHR; t++) {
        r[t] = (struct race){ ug, lg, all + (size_t)t * PER * 16, 0 };
        pthread_create(&th[t], NULL, race_thread, &r[t]);
    }
    for (int t = 0; t < NTHR; t++) {
        pthread_join(th[t], NULL);
        ck_assert_int_eq(r[t].fail, 0);
    }
    qsort(all, (size_t)NTHR * PER, 16, cmp16);
    for (size_t i = 1; i < (size_t)NTHR * PER; i++)
        /* check writes to its pipe at every assertion that holds: assert
         * only where it does not (1M writes otherwise) */
        if (memcmp(all + 16 * (i - 1), all + 16 * i, 16) == 0)
            ck_assert_msg(memcmp(all + 16 * (i - 1), all + 16 * i, 16) != 0,
                          "duplicate at %zu", i);
    free(all);
    uuid7_gen_free(ug);
    ulid_gen_free(lg);
}

START_TEST(uuid_race)
{
    race(1);
}
END_TEST

START_TEST(ulid_race)
{
    race(0);
}
END_TEST

/* A forked child reads random bytes of its own (none are buffered). */
START_TEST(csprng_fork)
{
    uint8_t a[32], b[32];
    int fd[2];
    pid_t pid;

    ck_assert_int_eq(csprng_fill(a, 1), 0);      /* fill the buffer */
    ck_assert_int_eq(pipe(fd), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        uint8_t c[32];

        if (csprng_fill(c, sizeof c) < 0 || write(fd[1], c, sizeof c) != sizeof c)
            _exit(1);
        _exit(0);
    }
    ck_assert_int_eq(csprng_fill(a, sizeof a), 0);
    ck_assert_int_eq(read(fd[0], b, sizeof b), (ssize_t)sizeof b);
    waitpid(pid, NULL, 0);
    ck_assert(memcmp(a, b, sizeof a) != 0);
    close(fd[0]);
    close(fd[1]);
}
END_TEST

/* ---- copies of a process: IDs made on both sides after it ---- */

#define COPY_IDS 20

struct copy_ids {
    struct uuid7 u[COPY_IDS];
    struct ulid  l[COPY_IDS];
};

/* COPY_IDS of each kind at the fake clock's ms. Returns 0 or -1. */
static int
copy_take(struct uuid7_gen *ug, struct ulid_gen *lg, struct copy_ids *out)
{
    for (int i = 0; i < COPY_IDS; i++)
        if (uuid7_next(ug, 1, &out->u[i]) != 0 || ulid_next(lg, 1, &out->l[i]) != 0)
            return -1;
    return 0;
}

/* Both sides of a copy made by copy_fn take IDs at ms after (the parent
 * took its last one at ms before); returns how many are equal on both. */
static int
ids_in_both(pid_t (*copy_fn)(void), int64_t before, int64_t after)
{
    struct uuid7_gen *ug = uuid7_gen_new(fake_clock, NULL);
    struct ulid_gen *lg = ulid_gen_new(fake_clock, NULL);
    struct copy_ids mine, theirs;
    struct uuid7 u;
    struct ulid l;
    int fd[2], same = 0;
    pid_t pid;

    atomic_store(&fake_ms, before);
    ck_assert_int_eq(uuid7_next(ug, 1, &u), 0);
    ck_assert_int_eq(ulid_next(lg, 1, &l), 0);
    ck_assert_int_eq(pipe(fd), 0);
    pid = copy_fn();
    ck_assert_int_ge(pid, 0);
    atomic_store(&fake_ms, after);
    if (pid == 0) {
        if (copy_take(ug, lg, &theirs) != 0 ||
            write(fd[1], &theirs, sizeof theirs) != (ssize_t)sizeof theirs)
            _exit(1);
        _exit(0);
    }
    ck_assert_int_eq(copy_take(ug, lg, &mine), 0);
    ck_assert_int_eq(read(fd[0], &theirs, sizeof theirs), (ssize_t)sizeof theirs);
    waitpid(pid, NULL, 0);
    for (int i = 0; i < COPY_IDS; i++)
        for (int j = 0; j < COPY_IDS; j++) {
            same += memcmp(&mine.u[i], &theirs.u[j], 16) == 0;
            same += memcmp(&mine.l[i], &theirs.l[j], 16) == 0;
        }
    close(fd[0]);
    close(fd[1]);
    uuid7_gen_free(ug);
    ulid_gen_free(lg);
    return same;
}

static pid_t
copy_by_fork(void)
{
    return fork();
}

/* The kernel's fork without glibc's: no pthread_atfork handler runs, so
 * the child is a copy of the process as a VM clone leaves it (on a host
 * whose kernel reseeds its CSPRNG on the clone). */
static pid_t
copy_by_clone(void)
{
    return (pid_t)syscall(SYS_clone, (unsigned long)SIGCHLD, 0UL, 0UL, 0UL, 0UL);
}

/* fork(): both sides go on in the same ms, and in a later one. */
START_TEST(fork_ids_differ)
{
    int same = ids_in_both(copy_by_fork, 7000, 7000);

    ck_assert_msg(same == 0, "fork, same ms: %d IDs made on both sides", same);
    same = ids_in_both(copy_by_fork, 7000, 7001);
    ck_assert_msg(same == 0, "fork, next ms: %d IDs made on both sides", same);
}
END_TEST

/* A copy that no handler sees: in a later ms, every random bit comes from
 * the kernel, none from memory that was copied. (In the same ms the copies
 * share the generator's state; docs/id-kinds.md says what to do.) */
START_TEST(clone_ids_differ_in_a_later_ms)
{
    int same = ids_in_both(copy_by_clone, 9000, 9001);

    ck_assert_msg(same == 0, "clone, next ms: %d IDs made on both sides", same);
}
END_TEST

static Suite *
idkinds_suite(void)
{
    Suite *s = suite_create("idkinds");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, uuid_rfc_example);
    tcase_add_test(tc, uuid_parse_refusals);
    tcase_add_test(tc, uuid_layout_and_round_trip);
    tcase_add_test(tc, uuid_monotonic_clock_steps);
    tcase_add_test(tc, uuid_counter_overflow);
    tcase_add_test(tc, ulid_spec_example);
    tcase_add_test(tc, ulid_parse_refusals);
    tcase_add_test(tc, ulid_monotonic_and_overflow);
    tcase_add_test(tc, uuid_race);
    tcase_add_test(tc, ulid_race);
    tcase_add_test(tc, csprng_fork);
    tcase_add_test(tc, fork_ids_differ);
    tcase_add_test(tc, clone_ids_differ_in_a_later_ms);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(idkinds_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
