/* check_conceal_ids.c: conceal_ids (src/segment/conceal.c) on batches.
 *
 * A batch's counters are concealed a run of one block at a time, the run's
 * offsets enciphered together (ff1_encrypt_u64_many). Checked: a batch
 * whose counters change block in its middle, runs longer than one call
 * enciphers, a lone counter and two tags give exactly the construction of
 * docs/id-kinds.md, B << bits | FF1(K, "tag:<tag>:<B>", offset), computed
 * here with ff1_encrypt_u64 value by value, the same as conceal_id one
 * counter at a time; and a whole block's offsets in one call are a
 * permutation of the block.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conceal.h"
#include "config.h"
#include "ff1.h"

#define BITS 20
static const char key_hex[] =
    "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

struct fixture {
    char path[64];
    struct config cfg;
    struct conceal *c;
    struct ff1_key *k;              /* the same key, for the reference */
};

static void
setup(struct fixture *f, const char *tags)
{
    uint8_t key[32];
    char *cause = NULL;
    int fd;

    snprintf(f->path, sizeof f->path, "/tmp/check_conceal_ids-XXXXXX");
    fd = mkstemp(f->path);                  /* mode 600 */
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, key_hex, strlen(key_hex)), (int)strlen(key_hex));
    close(fd);
    config_defaults(&f->cfg);
    free(f->cfg.conceal_tags);
    free(f->cfg.conceal_key_file);
    f->cfg.conceal_tags = strdup(tags);
    f->cfg.conceal_key_file = strdup(f->path);
    f->cfg.conceal_bits = BITS;
    f->c = conceal_new(&f->cfg, &cause);
    unlink(f->path);                        /* read: not needed any more */
    if (f->c == NULL)
        ck_abort_msg("conceal_new: %s", cause ? cause : "(no tag)");
    for (int i = 0; i < 32; i++)
        key[i] = (uint8_t)i;
    f->k = ff1_key_new(key, sizeof key, NULL);
    ck_assert_ptr_nonnull(f->k);
}

static void
teardown(struct fixture *f)
{
    conceal_free(f->c);
    ff1_key_free(f->k);
    config_free(&f->cfg);
}

/* The ID of counter v of tag, as docs/id-kinds.md builds it. */
static uint64_t
reference(struct fixture *f, const char *tag, uint64_t v)
{
    uint64_t b = v >> BITS, y;
    struct ff1_domain dom;
    char tweak[128];
    int n = snprintf(tweak, sizeof tweak, "tag:%s:%llu", tag, (unsigned long long)b);

    ck_assert_int_eq(ff1_domain_init(&dom, f->k, 2, BITS, tweak, (size_t)n, NULL), 0);
    ck_assert_int_eq(ff1_encrypt_u64(f->k, &dom, v & ((1u << BITS) - 1), &y), 0);
    return b << BITS | y;
}

START_TEST(batches_match_the_construction)
{
    static const char *tags[] = {"order", "hidden"};
    struct fixture f = { .c = NULL };
    uint64_t v[1200], got[1200];
    size_t n = 0;

    setup(&f, "order,hidden");
    /* block 1's last 300 counters, block 2's first 600 (over two runs of
     * one call), one of block 9, then block 2 again: blocks change in the
     * middle of the batch, and back */
    for (uint64_t i = 0; i < 300; i++)
        v[n++] = (UINT64_C(2) << BITS) - 300 + i;
    for (uint64_t i = 0; i < 600; i++)
        v[n++] = (UINT64_C(2) << BITS) + i;
    v[n++] = (UINT64_C(9) << BITS) + 12345;
    for (uint64_t i = 0; i < 299; i++)
        v[n++] = (UINT64_C(2) << BITS) + 1000 + i;
    for (int t = 0; t < 2; t++) {
        struct conceal_tag *ct = conceal_find(f.c, tags[t], strlen(tags[t]));

        ck_assert_ptr_nonnull(ct);
        memcpy(got, v, sizeof v[0] * n);
        conceal_ids(f.c, ct, got, n);
        for (size_t i = 0; i < n; i++) {
            uint64_t want = reference(&f, tags[t], v[i]);

            if (got[i] != want || conceal_id(f.c, ct, v[i]) != want)
                ck_abort_msg("%s: counter %zu (%llu): batch %llu, alone %llu, want %llu",
                             tags[t], i, (unsigned long long)v[i],
                             (unsigned long long)got[i],
                             (unsigned long long)conceal_id(f.c, ct, v[i]),
                             (unsigned long long)want);
            ck_assert_uint_eq(got[i] >> BITS, v[i] >> BITS);
        }
    }
    teardown(&f);
}
END_TEST

START_TEST(whole_block_one_call)
{
    struct fixture f = { .c = NULL };
    size_t size = (size_t)1 << BITS;
    uint64_t *v = malloc(sizeof *v * size);
    uint8_t *seen = calloc(size, 1);
    struct conceal_tag *ct;
    size_t moved = 0;

    ck_assert(v != NULL && seen != NULL);
    setup(&f, "order");
    ct = conceal_find(f.c, "order", 5);
    for (size_t i = 0; i < size; i++)
        v[i] = (UINT64_C(5) << BITS) + i;
    conceal_ids(f.c, ct, v, size);
    for (size_t i = 0; i < size; i++) {
        ck_assert_uint_eq(v[i] >> BITS, 5);
        if (seen[v[i] & (size - 1)]++)
            ck_abort_msg("offset %zu: ID %llu twice", i, (unsigned long long)v[i]);
        moved += (v[i] & (size - 1)) != i;
    }
    ck_assert_uint_gt(moved, size - 20);     /* a permutation, not the identity */
    ck_assert_uint_eq(v[777], reference(&f, "order", (UINT64_C(5) << BITS) + 777));
    free(v);
    free(seen);
    teardown(&f);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("conceal_ids");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, batches_match_the_construction);
    tcase_add_test(tc, whole_block_one_call);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
