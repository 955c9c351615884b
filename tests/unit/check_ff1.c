/* check_ff1.c: FF1 (src/core/ff1.c): NIST's nine FF1 samples both ways on
 * both paths (integers and digit arrays); vectors from an independent
 * implementation (tests/lib/ff1_ref.py) whose PRF output is over 16 bytes
 * (step 6.iii); round trips at the limits (256 digits, 1024-byte tweaks,
 * every tweak length across a block); a full bijection over 10^6 (radix 10,
 * 6 digits) and 2^20 (radix 2, 20 digits); the refusals; a key copied for
 * other threads. */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ff1.h"
#include "ff1_vectors.h"

static const char alpha[] = "0123456789abcdefghijklmnopqrstuvwxyz";

static unsigned
to_digits(const char *s, uint8_t *d)
{
    unsigned n = 0;

    for (; *s; s++)
        d[n++] = (uint8_t)(strchr(alpha, *s) - alpha);
    return n;
}

static void
from_digits(const uint8_t *d, unsigned n, char *s)
{
    for (unsigned i = 0; i < n; i++)
        s[i] = alpha[d[i]];
    s[n] = '\0';
}

static void
unhex(const char *h, uint8_t *out, size_t *len)
{
    *len = 0;
    for (; h[0] && h[1]; h += 2) {
        unsigned v;

        ck_assert_int_eq(sscanf(h, "%2x", &v), 1);
        out[(*len)++] = (uint8_t)v;
    }
}

static struct ff1_key *
key_of(const void *k, size_t len)
{
    char *cause = NULL;
    struct ff1_key *key = ff1_key_new(k, len, &cause);

    if (key == NULL)
        ck_abort_msg("ff1_key_new: %s", cause);
    return key;
}

static void
domain(struct ff1_domain *dom, struct ff1_key *k, unsigned radix, unsigned len,
       const void *tw, size_t tl)
{
    char *cause = NULL;

    if (ff1_domain_init(dom, k, radix, len, tw, tl, &cause) != 0)
        ck_abort_msg("ff1_domain_init(%u, %u, %zu): %s", radix, len, tl, cause);
}

/* Enciphers pt, checks ct, deciphers it back, on the path asked for. */
static void
check_pair(struct ff1_key *k, const struct ff1_domain *dom, const char *pt,
           const char *ct, int general)
{
    uint8_t x[FF1_LEN_MAX], y[FF1_LEN_MAX];
    char got[FF1_LEN_MAX + 1];
    unsigned n = to_digits(pt, x);

    ck_assert_uint_eq(n, dom->len);
    ff1_force_general_path(general);
    ck_assert_int_eq(ff1_encrypt(k, dom, x, y), 0);
    from_digits(y, n, got);
    ck_assert_msg(strcmp(got, ct) == 0, "%s path: FF1(%s) = %s, want %s",
                  general ? "general" : "integer", pt, got, ct);
    ck_assert_int_eq(ff1_decrypt(k, dom, y, y), 0);       /* in place */
    from_digits(y, n, got);
    ck_assert_str_eq(got, pt);
    ff1_force_general_path(0);
}

static const struct {
    const char *key, *tweak, *pt, *ct;
    unsigned radix;
} samples[] = {
    /* NIST's "FF1samples" (Cryptographic Standards and Guidelines,
     * examples with intermediate values), samples 1 to 9 */
    {"2B7E151628AED2A6ABF7158809CF4F3C", "", "0123456789", "2433477484", 10},
    {"2B7E151628AED2A6ABF7158809CF4F3C", "39383736353433323130", "0123456789", "6124200773", 10},
    {"2B7E151628AED2A6ABF7158809CF4F3C", "3737373770717273373737", "0123456789abcdefghi",
     "a9tv40mll9kdu509eum", 36},
    {"2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F", "", "0123456789", "2830668132", 10},
    {"2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F", "39383736353433323130", "0123456789",
     "2496655549", 10},
    {"2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F", "3737373770717273373737",
     "0123456789abcdefghi", "xbj3kv35jrawxv32ysr", 36},
    {"2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F7F036D6F04FC6A94", "", "0123456789",
     "6657667009", 10},
    {"2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F7F036D6F04FC6A94",
     "39383736353433323130", "0123456789", "1001623463", 10},
    {"2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F7F036D6F04FC6A94",
     "3737373770717273373737", "0123456789abcdefghi", "xs8a0azh2avyalyzuwd", 36},
};

START_TEST(nist_samples)
{
    uint8_t key[32], tw[16];
    size_t kl, tl;
    struct ff1_key *k;
    struct ff1_domain dom;

    unhex(samples[_i].key, key, &kl);
    unhex(samples[_i].tweak, tw, &tl);
    k = key_of(key, kl);
    domain(&dom, k, samples[_i].radix, (unsigned)strlen(samples[_i].pt), tw, tl);
    ck_assert(dom.fast);                /* the samples fit the integer path */
    check_pair(k, &dom, samples[_i].pt, samples[_i].ct, 0);
    check_pair(k, &dom, samples[_i].pt, samples[_i].ct, 1);
    if (dom.fits_u64) {                 /* radix 10: as numbers too */
        uint64_t x = strtoull(samples[_i].pt, NULL, 10), y, back;

        for (int general = 0; general < 2; general++) {
            ff1_force_general_path(general);
            ck_assert_int_eq(ff1_encrypt_u64(k, &dom, x, &y), 0);
            ck_assert_uint_eq(y, strtoull(samples[_i].ct, NULL, 10));
            ck_assert_int_eq(ff1_decrypt_u64(k, &dom, y, &back), 0);
            ck_assert_uint_eq(back, x);
        }
        ff1_force_general_path(0);
    }
    ff1_key_free(k);
}
END_TEST

/* tests/lib/ff1_ref.py's vectors: most have d > 16, so S takes blocks
 * CIPH(R xor [j]^16) beyond R (step 6.iii), which no NIST sample does. */
START_TEST(independent_vectors)
{
    const struct ff1_vector *v = &ff1_vectors[_i];
    struct ff1_key *k = key_of(v->key, v->key_len);
    struct ff1_domain dom;

    domain(&dom, k, v->radix, (unsigned)strlen(v->pt), v->tweak, v->tweak_len);
    ck_assert_uint_eq(dom.d, v->d);
    check_pair(k, &dom, v->pt, v->ct, 1);
    if (dom.fast)
        check_pair(k, &dom, v->pt, v->ct, 0);
    ff1_key_free(k);
}
END_TEST

START_TEST(vectors_cover_long_prf)
{
    int over16 = 0, over32 = 0;

    for (size_t i = 0; i < sizeof ff1_vectors / sizeof ff1_vectors[0]; i++) {
        over16 += ff1_vectors[i].d > 16;
        over32 += ff1_vectors[i].d > 32;
    }
    ck_assert_int_ge(over16, 8);
    ck_assert_int_ge(over32, 1);
}
END_TEST

static unsigned rng_seed = 30;

static unsigned
rnd(void)
{
    return (unsigned)rand_r(&rng_seed);
}

/* Random domains, keys and tweaks: decrypt(encrypt(x)) = x, and where the
 * integer path applies it agrees with the general one. */
START_TEST(round_trips)
{
    static const unsigned key_lens[] = {16, 24, 32};
    uint8_t key[32], tw[FF1_TWEAK_MAX], x[FF1_LEN_MAX], y[FF1_LEN_MAX], z[FF1_LEN_MAX];

    for (int it = 0; it < 400; it++) {
        unsigned kl = key_lens[rnd() % 3], radix = 2 + (unsigned)(rnd() % 35), len;
        size_t tl = it % 50 == 0 ? FF1_TWEAK_MAX : (size_t)(rnd() % 70);
        struct ff1_domain dom;
        struct ff1_key *k;

        /* every 7th at the length limit, the rest short to long */
        len = it % 7 == 0 ? FF1_LEN_MAX : 2 + (unsigned)(rnd() % (it % 2 ? 30 : 120));
        if (ff1_domain_check(radix, len, NULL) != 0)
            continue;
        for (unsigned i = 0; i < kl; i++)
            key[i] = (uint8_t)rnd();
        for (size_t i = 0; i < tl; i++)
            tw[i] = (uint8_t)rnd();
        for (unsigned i = 0; i < len; i++)
            x[i] = (uint8_t)(rnd() % radix);
        k = key_of(key, kl);
        domain(&dom, k, radix, len, tw, tl);
        ff1_force_general_path(1);
        ck_assert_int_eq(ff1_encrypt(k, &dom, x, y), 0);
        ck_assert_int_eq(ff1_decrypt(k, &dom, y, z), 0);
        ck_assert(memcmp(x, z, len) == 0);
        ff1_force_general_path(0);
        if (dom.fast) {
            ck_assert_int_eq(ff1_encrypt(k, &dom, x, z), 0);
            ck_assert(memcmp(y, z, len) == 0);
        }
        ff1_key_free(k);
    }
}
END_TEST

/* Every tweak length 0..48 moves where Q's varying bytes start in its
 * block: both paths agree and round-trip for each. */
START_TEST(tweak_lengths)
{
    uint8_t tw[48], x[40], y[40], z[40];
    struct ff1_key *k = key_of("0123456789abcdef", 16);

    for (unsigned i = 0; i < sizeof tw; i++)
        tw[i] = (uint8_t)(i * 7);
    for (unsigned shape = 0; shape < 3; shape++) {
        static const unsigned radix[] = {10, 2, 36}, len[] = {6, 20, 40};

        for (size_t tl = 0; tl <= sizeof tw; tl++) {
            struct ff1_domain dom;

            domain(&dom, k, radix[shape], len[shape], tw, tl);
            for (unsigned i = 0; i < len[shape]; i++)
                x[i] = (uint8_t)((i * 5 + tl) % radix[shape]);
            ff1_force_general_path(1);
            ck_assert_int_eq(ff1_encrypt(k, &dom, x, y), 0);
            ff1_force_general_path(0);
            if (dom.fast) {
                ck_assert_int_eq(ff1_encrypt(k, &dom, x, z), 0);
                ck_assert(memcmp(y, z, len[shape]) == 0);
            }
            ck_assert_int_eq(ff1_decrypt(k, &dom, y, z), 0);
            ck_assert(memcmp(x, z, len[shape]) == 0);
        }
    }
    ff1_key_free(k);
}
END_TEST

/* Where the integer path ends: radix^v just below 2^64 (64-bit arithmetic
 * with y up to 96 bits), exactly 2^64 (128-bit), just above (digit arrays
 * only). Both paths agree on random strings, and round-trip. */
START_TEST(integer_path_edges)
{
    static const struct { unsigned radix, len; int fast; } e[] = {
        {10, 38, 1}, {10, 39, 0}, {3, 80, 1}, {3, 81, 0}, {36, 24, 1}, {36, 25, 0},
        {2, 127, 1}, {2, 128, 1}, {2, 129, 0}, {16, 32, 1}, {16, 33, 0}, {4, 64, 1},
        {7, 44, 1}, {7, 45, 0}, {35, 24, 1},
    };
    struct ff1_key *k = key_of("0123456789abcdef01234567", 24);
    uint8_t x[FF1_LEN_MAX], y[FF1_LEN_MAX], z[FF1_LEN_MAX];

    for (size_t c = 0; c < sizeof e / sizeof e[0]; c++) {
        struct ff1_domain dom;

        domain(&dom, k, e[c].radix, e[c].len, "edge", 4);
        ck_assert_int_eq((int)dom.fast, e[c].fast);
        for (int it = 0; it < 200; it++) {
            for (unsigned i = 0; i < e[c].len; i++)     /* all-max strings too */
                x[i] = (uint8_t)(it % 50 == 0 ? e[c].radix - 1 : rnd() % e[c].radix);
            ck_assert_int_eq(ff1_encrypt(k, &dom, x, y), 0);
            ff1_force_general_path(1);
            ck_assert_int_eq(ff1_encrypt(k, &dom, x, z), 0);
            ff1_force_general_path(0);
            if (memcmp(y, z, e[c].len) != 0)
                ck_abort_msg("radix %u, %u digits: the paths differ", e[c].radix, e[c].len);
            ck_assert_int_eq(ff1_decrypt(k, &dom, y, z), 0);
            ck_assert(memcmp(x, z, e[c].len) == 0);
        }
    }
    ff1_key_free(k);
}
END_TEST

/* The whole domain: every output in range, none twice, each deciphers
 * back. _i: 0 = radix 10, 6 digits (10^6); 1 = radix 2, 20 digits (2^20). */
START_TEST(full_bijection)
{
    unsigned radix = _i == 0 ? 10 : 2, len = _i == 0 ? 6 : 20;
    uint64_t size = _i == 0 ? 1000000 : 1u << 20;
    uint8_t *seen = calloc(size, 1);
    struct ff1_key *k = key_of("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10"
                               "\x11\x12\x13\x14\x15\x16\x17\x18", 24);
    struct ff1_domain dom;
    uint64_t fixed = 0;

    domain(&dom, k, radix, len, "PAY20261128", 11);
    ck_assert(dom.fits_u64 && dom.fast);
    for (uint64_t x = 0; x < size; x++) {
        uint64_t y, back;

        ck_assert_int_eq(ff1_encrypt_u64(k, &dom, x, &y), 0);
        if (y >= size || seen[y])
            ck_abort_msg("FF1(%llu) = %llu: %s", (unsigned long long)x,
                         (unsigned long long)y, y >= size ? "out of range" : "twice");
        seen[y] = 1;
        fixed += y == x;
        ck_assert_int_eq(ff1_decrypt_u64(k, &dom, y, &back), 0);
        if (back != x)
            ck_assert_uint_eq(back, x);
    }
    /* a random permutation fixes about one point; a broken one (the
     * identity, a rotation) many or none in a pattern */
    ck_assert_uint_lt(fixed, 20);
    /* the digit-array path agrees on a sample of the domain */
    for (uint64_t x = 0; x < size; x += 997) {
        uint8_t d[20];
        uint64_t y, v = x, from_digits_y = 0;

        for (unsigned i = len; i-- > 0;) {
            d[i] = (uint8_t)(v % radix);
            v /= radix;
        }
        ck_assert_int_eq(ff1_encrypt_u64(k, &dom, x, &y), 0);
        ff1_force_general_path(1);
        ck_assert_int_eq(ff1_encrypt(k, &dom, d, d), 0);
        ff1_force_general_path(0);
        for (unsigned i = 0; i < len; i++)
            from_digits_y = from_digits_y * radix + d[i];
        ck_assert_uint_eq(from_digits_y, y);
    }
    free(seen);
    ff1_key_free(k);
}
END_TEST

/* ff1_encrypt_u64_many gives what ff1_encrypt_u64 gives value by value:
 * on 64-bit lanes (d = 8, and d = 12 with 10^19), over a whole uint64
 * (2^64) and on digit arrays (forced), for counts around the lane width,
 * in place and not; a value outside the domain, or a domain too large for
 * uint64, is refused with out untouched. */
START_TEST(many_agrees)
{
    static const struct { unsigned radix, len; } dm[] = {
        {2, 20}, {2, 30}, {10, 6}, {10, 10}, {10, 18}, {10, 19}, {36, 12}, {2, 64},
    };
    static const size_t counts[] = {1, 2, 7, 31, 32, 33, 64, 65, 100, 257};
    struct ff1_key *k = key_of("0123456789abcdef0123456789abcdef", 32);
    uint64_t x[300], y[300], z[300];

    for (size_t c = 0; c < sizeof dm / sizeof dm[0]; c++) {
        struct ff1_domain dom;
        unsigned __int128 size = 1;

        for (unsigned i = 0; i < dm[c].len && size <= UINT64_MAX; i++)
            size *= dm[c].radix;
        domain(&dom, k, dm[c].radix, dm[c].len, "tag:hidden:7", 12);
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
            size_t n = counts[ci];

            for (size_t i = 0; i < n; i++) {
                uint64_t r = (uint64_t)rnd() << 42 ^ (uint64_t)rnd() << 21 ^ rnd();

                x[i] = size > UINT64_MAX ? r : (uint64_t)(r % (uint64_t)size);
                if (i % 17 == 3)                        /* the ends of the domain */
                    x[i] = i % 2 ? 0 : (uint64_t)(size > UINT64_MAX ? UINT64_MAX : size - 1);
            }
            for (int general = 0; general < 2; general++) {
                ff1_force_general_path(general);
                ck_assert_int_eq(ff1_encrypt_u64_many(k, &dom, x, y, n), 0);
                memcpy(z, x, sizeof x[0] * n);
                ck_assert_int_eq(ff1_encrypt_u64_many(k, &dom, z, z, n), 0);
                ff1_force_general_path(0);
                for (size_t i = 0; i < n; i++) {
                    uint64_t want;

                    ck_assert_int_eq(ff1_encrypt_u64(k, &dom, x[i], &want), 0);
                    if (y[i] != want || z[i] != want)
                        ck_abort_msg("radix %u, %u digits, %zu values: value %zu: %llu, "
                                     "%llu in place, want %llu", dm[c].radix, dm[c].len,
                                     n, i, (unsigned long long)y[i],
                                     (unsigned long long)z[i], (unsigned long long)want);
                }
            }
            if (size <= UINT64_MAX) {
                memset(y, 0x5a, sizeof y);
                x[n - 1] = (uint64_t)size;              /* one past the domain */
                ck_assert_int_eq(ff1_encrypt_u64_many(k, &dom, x, y, n), -1);
                for (size_t i = 0; i < n; i++)
                    ck_assert_uint_eq(y[i], 0x5a5a5a5a5a5a5a5aULL);
            }
        }
    }
    {
        struct ff1_domain big;

        domain(&big, k, 10, 39, "", 0);                 /* 10^39 > 2^64 */
        ck_assert(!big.fits_u64);
        x[0] = 1;
        y[0] = 7;
        ck_assert_int_eq(ff1_encrypt_u64_many(k, &big, x, y, 1), -1);
        ck_assert_uint_eq(y[0], 7);
    }
    ff1_key_free(k);
}
END_TEST

START_TEST(refusals)
{
    static const struct { unsigned radix, len; } bad[] = {
        {10, 5}, {2, 19}, {36, 3}, {1, 30}, {0, 30}, {37, 10}, {256, 4},
        {10, 1}, {10, 0}, {10, FF1_LEN_MAX + 1}, {4, 9}, {100, 3},
    };
    static const struct { unsigned radix, len; } edge[] = {
        {10, 6}, {2, 20}, {36, 4}, {4, 10}, {10, FF1_LEN_MAX}, {36, FF1_LEN_MAX},
    };
    static const size_t bad_keys[] = {0, 1, 15, 17, 20, 23, 25, 31, 33, 64};
    uint8_t key[64] = {0}, tw[FF1_TWEAK_MAX + 1] = {0};
    struct ff1_domain dom;
    struct ff1_key *k;
    char *cause = NULL;
    uint64_t y = 12345;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(ff1_domain_check(bad[i].radix, bad[i].len, &cause), -1);
        ck_assert_ptr_nonnull(cause);
        free(cause);
        cause = NULL;
    }
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++)
        ck_assert_int_eq(ff1_domain_check(edge[i].radix, edge[i].len, NULL), 0);
    for (size_t i = 0; i < sizeof bad_keys / sizeof bad_keys[0]; i++) {
        ck_assert_ptr_null(ff1_key_new(key, bad_keys[i], &cause));
        ck_assert_ptr_nonnull(strstr(cause, "16, 24 or 32"));
        free(cause);
        cause = NULL;
    }
    k = key_of(key, 32);
    ck_assert_int_eq(ff1_domain_init(&dom, k, 10, 5, NULL, 0, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "1000000"));
    free(cause);
    cause = NULL;
    ck_assert_int_eq(ff1_domain_init(&dom, k, 10, 6, tw, FF1_TWEAK_MAX + 1, &cause), -1);
    free(cause);
    cause = NULL;

    /* a digit out of range: refused, output untouched */
    domain(&dom, k, 10, 8, tw, FF1_TWEAK_MAX);
    {
        uint8_t x[8] = {1, 2, 3, 4, 5, 6, 7, 10}, out[8];

        for (int general = 0; general < 2; general++) {
            ff1_force_general_path(general);
            memset(out, 0xee, sizeof out);
            ck_assert_int_eq(ff1_encrypt(k, &dom, x, out), -1);
            ck_assert_int_eq(ff1_decrypt(k, &dom, x, out), -1);
            ck_assert_uint_eq(out[0], 0xee);
            x[7] = 255;
            ck_assert_int_eq(ff1_encrypt(k, &dom, x, out), -1);
            x[7] = 10;
        }
        ff1_force_general_path(0);
    }
    /* numbers outside the domain, and a domain wider than uint64 */
    ck_assert_int_eq(ff1_encrypt_u64(k, &dom, 100000000, &y), -1);
    ck_assert_int_eq(ff1_decrypt_u64(k, &dom, UINT64_MAX, &y), -1);
    ck_assert_uint_eq(y, 12345);
    ck_assert_int_eq(ff1_encrypt_u64(k, &dom, 99999999, &y), 0);
    ck_assert_uint_lt(y, 100000000);
    domain(&dom, k, 10, 20, NULL, 0);
    ck_assert(!dom.fits_u64);
    ck_assert_int_eq(ff1_encrypt_u64(k, &dom, 5, &y), -1);
    domain(&dom, k, 2, 64, NULL, 0);      /* 2^64 exactly: every uint64 */
    ck_assert(dom.fits_u64);
    ck_assert_int_eq(ff1_encrypt_u64(k, &dom, UINT64_MAX, &y), 0);
    ck_assert_int_eq(ff1_decrypt_u64(k, &dom, y, &y), 0);
    ck_assert_uint_eq(y, UINT64_MAX);
    ff1_key_free(k);
    ff1_key_free(NULL);
}
END_TEST

struct thread_arg {
    struct ff1_key *k;
    const struct ff1_domain *dom;
    uint64_t sum;
};

static void *
encipher_many(void *p)
{
    struct thread_arg *a = p;

    for (uint64_t x = 0; x < 20000; x++) {
        uint64_t y;

        ck_assert_int_eq(ff1_encrypt_u64(a->k, a->dom, x, &y), 0);
        a->sum += y * (x + 1);
    }
    return NULL;
}

/* Copies of a key, one per thread, share one domain and give the same
 * values as the original; other keys give other values. */
START_TEST(key_copies_and_check_value)
{
    struct ff1_key *k = key_of("0123456789abcdef", 16), *other = key_of("0123456789abcdeF", 16);
    struct ff1_domain dom;
    struct thread_arg a[3];
    pthread_t th[3];
    uint8_t kcv1[16], kcv2[16], kcv3[16];

    domain(&dom, k, 10, 6, "t", 1);
    for (int i = 0; i < 3; i++) {
        a[i] = (struct thread_arg){i == 0 ? k : ff1_key_dup(k), &dom, 0};
        pthread_create(&th[i], NULL, encipher_many, &a[i]);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    ck_assert_uint_eq(a[0].sum, a[1].sum);
    ck_assert_uint_eq(a[0].sum, a[2].sum);
    ff1_key_check_value(k, kcv1);
    ff1_key_check_value(a[1].k, kcv2);
    ff1_key_check_value(other, kcv3);
    ck_assert(memcmp(kcv1, kcv2, 16) == 0);
    ck_assert(memcmp(kcv1, kcv3, 16) != 0);
    {
        struct ff1_domain od;
        uint64_t y1, y2;

        domain(&od, other, 10, 6, "t", 1);
        ck_assert_int_eq(ff1_encrypt_u64(k, &dom, 1, &y1), 0);
        ck_assert_int_eq(ff1_encrypt_u64(other, &od, 1, &y2), 0);
        ck_assert_uint_ne(y1, y2);
        domain(&od, k, 10, 6, "u", 1);    /* another tweak */
        ck_assert_int_eq(ff1_encrypt_u64(k, &od, 1, &y2), 0);
        ck_assert_uint_ne(y1, y2);
    }
    for (int i = 1; i < 3; i++)
        ff1_key_free(a[i].k);
    ff1_key_free(k);
    ff1_key_free(other);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("ff1");
    TCase *tc = tcase_create("core"), *th = tcase_create("threads");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, nist_samples, 0, (int)(sizeof samples / sizeof samples[0]));
    tcase_add_loop_test(tc, independent_vectors, 0,
                        (int)(sizeof ff1_vectors / sizeof ff1_vectors[0]));
    tcase_add_test(tc, vectors_cover_long_prf);
    tcase_add_test(tc, round_trips);
    tcase_add_test(tc, tweak_lengths);
    tcase_add_test(tc, integer_path_edges);
    tcase_add_loop_test(tc, full_bijection, 0, 2);
    tcase_add_test(tc, many_agrees);
    tcase_add_test(tc, refusals);
    tcase_set_timeout(th, 300);
    tcase_add_test(th, key_copies_and_check_value);
    /* under ThreadSanitizer (make test's unit-tsan lane) only the threads:
     * the rest is single-threaded and runs in the plain and ASan lanes */
#ifndef __SANITIZE_THREAD__
    suite_add_tcase(s, tc);
#endif
    suite_add_tcase(s, th);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
