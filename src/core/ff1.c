/* ff1.c: FF1 (NIST SP 800-38G Rev. 1, section 6.2) on OpenSSL's AES-ECB;
 * see ff1.h. Written from the standard's text; the step numbers below are
 * its Algorithm 7 (FF1.Encrypt) and 8 (FF1.Decrypt).
 *
 * Two ways through the ten Feistel rounds, with the same PRF:
 *   integers  when radix^v <= 2^64 (v = ceil(n/2)): A and B are numbers,
 *             NUM_radix(B) fits 8 bytes, so b <= 8 and d <= 12; step vi is
 *             (a + y mod radix^m) mod radix^m in 64-bit arithmetic, y mod
 *             radix^m by a precomputed reciprocal when d = 8 (128-bit
 *             arithmetic only when radix^v is 2^64 exactly). Q's varying
 *             bytes are then one block (b + 1 <= 9), whatever the tweak's
 *             length: a round is one AES call on a block prepared per
 *             round at set-up.
 *   general   A and B are digit arrays. NUM_radix(B) is a small bignum
 *             (32-bit limbs, Horner by chunks of digits); y mod radix^m is
 *             read off as y's lowest m radix digits (y divided by the
 *             largest power of the radix below 2^32, chunk by chunk), and
 *             step vi adds them to A's digits (subtracts from B's when
 *             deciphering) with a carry that falls off the top digit:
 *             exactly the sum modulo radix^m, written as STR^m_radix.
 * The tests hold both to the NIST samples, to each other and to vectors
 * from an independent implementation (tests/unit/ff1_vectors.h).
 */
#include <assert.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "ff1.h"
#include "util.h"

struct ff1_key {
    EVP_CIPHER_CTX *ctx;        /* AES-ECB, no padding, key schedule set */
    uint64_t id;
};

static _Atomic uint64_t ff1_key_ids;
static __thread int ff1_general_only;

#define U128_2P64 ((unsigned __int128)1 << 64)

/* --- AES --------------------------------------------------------------- */

/* n whole blocks of in, enciphered into out (ECB). */
static void
ff1_aes(struct ff1_key *k, const uint8_t *in, uint8_t *out, size_t n)
{
    if (EVP_Cipher(k->ctx, out, in, (unsigned)(16 * n)) <= 0) {
        fprintf(stderr, "ff1: AES-ECB failed on a set-up context\n");
        abort();
    }
}

struct ff1_key *
ff1_key_new(const void *key, size_t key_len, char **cause)
{
    const EVP_CIPHER *c;
    struct ff1_key *k;

    switch (key_len) {
    case 16: c = EVP_aes_128_ecb(); break;
    case 24: c = EVP_aes_192_ecb(); break;
    case 32: c = EVP_aes_256_ecb(); break;
    default:
        util_set_cause(cause, "an FF1 key is 16, 24 or 32 bytes (AES-128, "
                       "-192, -256), not %zu", key_len);
        return NULL;
    }
    k = xcalloc(1, sizeof *k);
    k->ctx = EVP_CIPHER_CTX_new();
    if (k->ctx == NULL ||
        EVP_EncryptInit_ex(k->ctx, c, NULL, key, NULL) != 1 ||
        EVP_CIPHER_CTX_set_padding(k->ctx, 0) != 1) {
        util_set_cause(cause, "OpenSSL refused an AES-%zu-ECB key",
                       key_len * 8);
        ff1_key_free(k);
        return NULL;
    }
    k->id = atomic_fetch_add(&ff1_key_ids, 1) + 1;
    return k;
}

struct ff1_key *
ff1_key_dup(const struct ff1_key *k)
{
    struct ff1_key *c = xcalloc(1, sizeof *c);

    c->ctx = EVP_CIPHER_CTX_new();
    if (c->ctx == NULL || EVP_CIPHER_CTX_copy(c->ctx, k->ctx) != 1) {
        fprintf(stderr, "ff1_key_dup: EVP_CIPHER_CTX_copy failed\n");
        abort();
    }
    c->id = k->id;
    return c;
}

void
ff1_key_free(struct ff1_key *k)
{
    if (k == NULL)
        return;
    EVP_CIPHER_CTX_free(k->ctx);    /* cleanses the key schedule */
    free(k);
}

void
ff1_key_check_value(struct ff1_key *k, uint8_t out[16])
{
    static const uint8_t zero[16];

    ff1_aes(k, zero, out, 1);
}

void
ff1_force_general_path(int on)
{
    ff1_general_only = on != 0;
}

/* --- a small unsigned bignum: 32-bit limbs, least significant first ---- */

/* 1024 bits: NUM_radix of v <= 128 digits of radix 36 is at most 662 bits,
 * y = NUM(S) at most d = 88 bytes (704 bits). */
#define BN_LIMBS 32

struct bn {
    uint32_t w[BN_LIMBS];
    unsigned n;                 /* limbs in use; w[n-1] != 0, or n == 0 */
};

static void
bn_mul_add(struct bn *x, uint32_t mul, uint32_t add)
{
    uint64_t carry = add;

    for (unsigned i = 0; i < x->n; i++) {
        uint64_t t = (uint64_t)x->w[i] * mul + carry;
        x->w[i] = (uint32_t)t;
        carry = t >> 32;
    }
    if (carry != 0) {
        assert(x->n < BN_LIMBS);
        x->w[x->n++] = (uint32_t)carry;
    }
}

/* x /= div; returns x mod div. */
static uint32_t
bn_divmod(struct bn *x, uint32_t div)
{
    uint64_t rem = 0;

    for (unsigned i = x->n; i-- > 0;) {
        uint64_t cur = (rem << 32) | x->w[i];
        x->w[i] = (uint32_t)(cur / div);
        rem = cur % div;
    }
    while (x->n > 0 && x->w[x->n - 1] == 0)
        x->n--;
    return (uint32_t)rem;
}

/* NUM(X) of len big-endian bytes. */
static void
bn_from_bytes(struct bn *x, const uint8_t *p, size_t len)
{
    assert(len <= 4 * BN_LIMBS);
    memset(x, 0, sizeof *x);
    for (size_t i = 0; i < len; i++) {
        size_t bit = 8 * (len - 1 - i);
        x->w[bit / 32] |= (uint32_t)p[i] << (bit % 32);
    }
    x->n = (unsigned)((len + 3) / 4);
    while (x->n > 0 && x->w[x->n - 1] == 0)
        x->n--;
}

static unsigned
bn_bits(const struct bn *x)
{
    unsigned bits;
    uint32_t top;

    if (x->n == 0)
        return 0;
    top = x->w[x->n - 1];
    bits = 32 * (x->n - 1);
    while (top != 0) {
        bits++;
        top >>= 1;
    }
    return bits;
}

/* [x]^len: x as len big-endian bytes; x must fit. */
static void
bn_to_bytes(const struct bn *x, uint8_t *p, size_t len)
{
    assert(bn_bits(x) <= 8 * len);
    for (size_t i = 0; i < len; i++) {
        size_t bit = 8 * (len - 1 - i);
        p[i] = bit / 32 < x->n ? (uint8_t)(x->w[bit / 32] >> (bit % 32)) : 0;
    }
}

/* The largest k with radix^k < 2^32, and radix^k. */
static unsigned
chunk_of(unsigned radix, uint32_t *pow)
{
    uint64_t p = 1;
    unsigned k = 0;

    while (p * radix <= UINT32_MAX) {
        p *= radix;
        k++;
    }
    *pow = (uint32_t)p;
    return k;
}

/* NUM_radix(X) of len digits, most significant first. */
static void
bn_from_digits(struct bn *x, const uint8_t *dig, unsigned len, unsigned radix)
{
    uint32_t pow;
    unsigned k = chunk_of(radix, &pow), i = 0;

    memset(x, 0, sizeof *x);
    while (i < len) {
        unsigned take = (len - i) % k != 0 ? (len - i) % k : k;
        uint32_t mul = 1, val = 0;

        for (unsigned j = 0; j < take; j++) {
            val = val * radix + dig[i + j];
            mul *= radix;
        }
        bn_mul_add(x, mul, val);
        i += take;
    }
}

/* The lowest m radix digits of x (so STR^m_radix(x mod radix^m)), most
 * significant first; x is consumed. */
static void
bn_low_digits(struct bn *x, unsigned radix, uint8_t *dig, unsigned m)
{
    uint32_t pow;
    unsigned k = chunk_of(radix, &pow), i = m;

    while (i > 0) {
        uint32_t r = bn_divmod(x, pow);

        for (unsigned j = 0; j < k && i > 0; j++) {
            dig[--i] = (uint8_t)(r % radix);
            r /= radix;
        }
    }
}

/* --- domains ----------------------------------------------------------- */

int
ff1_domain_check(unsigned radix, unsigned len, char **cause)
{
    uint64_t size = 1;

    if (radix < 2 || radix > FF1_RADIX_MAX) {
        util_set_cause(cause, "FF1 radix %u is outside 2..%d", radix,
                       FF1_RADIX_MAX);
        return -1;
    }
    if (len < 2 || len > FF1_LEN_MAX) {
        util_set_cause(cause, "FF1 length %u is outside 2..%d digits", len,
                       FF1_LEN_MAX);
        return -1;
    }
    for (unsigned i = 0; i < len && size < FF1_DOMAIN_MIN; i++)
        size *= radix;
    if (size < FF1_DOMAIN_MIN) {
        util_set_cause(cause, "an FF1 domain of %u digits of radix %u has "
                       "%" PRIu64 " values, fewer than the %d that SP "
                       "800-38G Rev. 1 requires", len, radix, size,
                       FF1_DOMAIN_MIN);
        return -1;
    }
    return 0;
}

/* radix^e if it is at most 2^64, else 0. */
static unsigned __int128
pow_u128(unsigned radix, unsigned e)
{
    unsigned __int128 p = 1;

    for (unsigned i = 0; i < e; i++) {
        p *= radix;
        if (p > U128_2P64)
            return 0;
    }
    return p;
}

/* CBC-MAC step: y = CIPH(y xor blk). */
static void
mac_block(struct ff1_key *k, uint8_t y[16], const uint8_t *blk)
{
    uint8_t x[16];

    for (int i = 0; i < 16; i++)
        x[i] = y[i] ^ blk[i];
    ff1_aes(k, x, y, 1);
}

int
ff1_domain_init(struct ff1_domain *dom, struct ff1_key *k, unsigned radix,
                unsigned len, const void *tweak, size_t tweak_len,
                char **cause)
{
    const uint8_t *tw = tweak;
    uint8_t p[16], blk[16];
    struct bn pv;
    size_t qconst, fill = 0;

    if (ff1_domain_check(radix, len, cause) != 0)
        return -1;
    if (tweak_len > FF1_TWEAK_MAX) {
        util_set_cause(cause, "an FF1 tweak of %zu bytes is over the limit "
                       "of %d", tweak_len, FF1_TWEAK_MAX);
        return -1;
    }
    memset(dom, 0, sizeof *dom);
    dom->key_id = k->id;
    dom->radix = radix;
    dom->len = len;
    dom->u = len / 2;                                   /* step 1 */
    dom->v = len - dom->u;
    /* step 3: b = ceil(ceil(v log2 radix) / 8); ceil(v log2 radix) is the
     * bit length of radix^v - 1, computed exactly */
    memset(&pv, 0, sizeof pv);
    pv.w[0] = 1;
    pv.n = 1;
    for (unsigned i = 0; i < dom->v; i++)
        bn_mul_add(&pv, radix, 0);
    for (unsigned i = 0; pv.w[i]-- == 0; i++)         /* radix^v - 1 */
        ;
    while (pv.n > 0 && pv.w[pv.n - 1] == 0)
        pv.n--;
    dom->b = (bn_bits(&pv) + 7) / 8;
    dom->d = 4 * ((dom->b + 3) / 4) + 4;                /* step 4 */
    dom->pow_u = pow_u128(radix, dom->u);
    dom->pow_v = pow_u128(radix, dom->v);
    dom->fast = dom->pow_v != 0;
    dom->fits_u64 = pow_u128(radix, len) != 0;
    assert(!dom->fast || (dom->b <= 8 && dom->d <= 12));

    /* step 5: P = [1]^1 [2]^1 [1]^1 [radix]^3 [10]^1 [u mod 256]^1 [n]^4 [t]^4 */
    p[0] = 1;
    p[1] = 2;
    p[2] = 1;
    p[3] = (uint8_t)(radix >> 16);
    p[4] = (uint8_t)(radix >> 8);
    p[5] = (uint8_t)radix;
    p[6] = 10;
    p[7] = (uint8_t)(dom->u % 256);
    p[8] = (uint8_t)(len >> 24);
    p[9] = (uint8_t)(len >> 16);
    p[10] = (uint8_t)(len >> 8);
    p[11] = (uint8_t)len;
    p[12] = (uint8_t)(tweak_len >> 24);
    p[13] = (uint8_t)(tweak_len >> 16);
    p[14] = (uint8_t)(tweak_len >> 8);
    p[15] = (uint8_t)tweak_len;
    memset(dom->mac, 0, sizeof dom->mac);
    mac_block(k, dom->mac, p);

    /* step 6.i: Q = T || [0]^((-t-b-1) mod 16) || [i]^1 || [NUM_radix(B)]^b.
     * Its first t + pad bytes are the same in every round: MAC their whole
     * blocks now, keep the rest for the round's first block. */
    qconst = tweak_len + (16 - (tweak_len + dom->b + 1) % 16) % 16;
    for (size_t i = 0; i < qconst; i++) {
        blk[fill++] = i < tweak_len ? tw[i] : 0;
        if (fill == 16) {
            mac_block(k, dom->mac, blk);
            fill = 0;
        }
    }
    dom->tail_len = (unsigned)fill;
    memcpy(dom->tail, blk, fill);
    /* with b <= 8, tail_len + 1 + b (a multiple of 16) is 16: Q's varying
     * bytes are its last block, whatever the tweak's length; that block's
     * constant part, xored with the MAC state, for each round */
    assert(!dom->fast || dom->tail_len + 1 + dom->b == 16);
    for (unsigned i = 0; i < 10 && dom->fast; i++) {
        uint8_t base[16];

        memcpy(base, dom->mac, 16);
        for (size_t j = 0; j < fill; j++)
            base[j] ^= blk[j];
        base[dom->tail_len] ^= (uint8_t)i;
        memcpy(&dom->round_in[i], base, 16);
    }
    if (dom->fast && dom->pow_v < U128_2P64) {
        dom->recip_u = UINT64_MAX / (uint64_t)dom->pow_u;
        dom->recip_v = UINT64_MAX / (uint64_t)dom->pow_v;
    }
    assert((dom->tail_len + 1 + dom->b) % 16 == 0);
    return 0;
}

/* --- one round's PRF --------------------------------------------------- */

/* Steps 6.i-iii: S (dom->d bytes) for round i, with numb the b bytes of
 * [NUM_radix(B)]^b (B when enciphering, A when deciphering). */
static void
ff1_round_s(struct ff1_key *k, const struct ff1_domain *dom, unsigned i,
            const uint8_t *numb, uint8_t *s)
{
    uint8_t q[128], r[16], more[8 * 16];
    size_t qlen = dom->tail_len + 1 + dom->b, extra;

    memcpy(q, dom->tail, dom->tail_len);
    q[dom->tail_len] = (uint8_t)i;
    memcpy(q + dom->tail_len + 1, numb, dom->b);
    memcpy(r, dom->mac, 16);                            /* 6.ii: R = PRF(P || Q) */
    for (size_t off = 0; off < qlen; off += 16) {
        for (int j = 0; j < 16; j++)
            r[j] ^= q[off + j];
        ff1_aes(k, r, r, 1);
    }
    /* 6.iii: S = the first d bytes of R || CIPH(R xor [1]^16) || ... ||
     * CIPH(R xor [ceil(d/16) - 1]^16) */
    memcpy(s, r, dom->d < 16 ? dom->d : 16);
    extra = (dom->d + 15) / 16 - 1;
    if (extra == 0)
        return;
    assert(extra <= sizeof more / 16);
    for (size_t j = 1; j <= extra; j++) {
        memcpy(more + 16 * (j - 1), r, 16);
        more[16 * (j - 1) + 15] ^= (uint8_t)j;          /* j < 256 */
    }
    ff1_aes(k, more, more, extra);
    memcpy(s + 16, more, dom->d - 16);
}

/* --- the rounds on integers (radix^v <= 2^64) --------------------------- */

static unsigned __int128
be_num(const uint8_t *p, size_t len)
{
    unsigned __int128 x = 0;

    for (size_t i = 0; i < len; i++)
        x = (x << 8) | p[i];
    return x;
}

static uint64_t
be64(const uint8_t *p)
{
    uint64_t x;

    memcpy(&x, p, 8);
    return __builtin_bswap64(x);
}

/* Steps 6.iv-ix of round i on integers, from S (the round's AES output):
 * radix^m < 2^64 here (dom->pow_v < 2^64) and b <= 8, d <= 12: 64-bit
 * arithmetic, with one 128-bit remainder per round only when d == 12. */
static inline void
ff1_fast64_round(const struct ff1_domain *dom, unsigned i, int enc,
                 const uint8_t *s, uint64_t *a, uint64_t *b)
{
    uint64_t m = i % 2 == 0 ? (uint64_t)dom->pow_u : (uint64_t)dom->pow_v; /* 6.v */
    uint64_t y, c;

    if (dom->d == 8) {                                    /* 6.iv, mod radix^m */
        /* y mod m by a reciprocal (Barrett): q = floor(y * r / 2^64) with
         * r = floor((2^64 - 1) / m) is floor(y / m) or one less */
        uint64_t yy = be64(s), r = i % 2 == 0 ? dom->recip_u : dom->recip_v;

        y = yy - (uint64_t)(((unsigned __int128)yy * r) >> 64) * m;
        if (y >= m)
            y -= m;
    } else {
        y = (uint64_t)((((unsigned __int128)be64(s) << 32) |
                        ((uint32_t)s[8] << 24 | (uint32_t)s[9] << 16 |
                         (uint32_t)s[10] << 8 | s[11])) % m);
    }
    if (enc) {
        c = *a + y;                                       /* 6.vi: both < m */
        c = c >= m || c < y ? c - m : c;
        *a = *b;                                          /* 6.viii */
        *b = c;                                           /* 6.ix */
    } else {
        c = *b >= y ? *b - y : *b + (m - y);
        *b = *a;
        *a = c;
    }
}

/* R = CIPH(round_in[i] xor (0... || [in]^b)): Q's varying bytes are one
 * block here; built in registers and stored at once, so the AES load is
 * forwarded from the store. */
static inline ff1_v2
ff1_fast64_block(const struct ff1_domain *dom, unsigned i, uint64_t in)
{
    return dom->round_in[i] ^ (ff1_v2){0, __builtin_bswap64(in)};
}

static void
ff1_fast64(struct ff1_key *k, const struct ff1_domain *dom, int enc,
           uint64_t *a, uint64_t *b)
{
    uint8_t s[16];

    for (int step = 0; step < 10; step++) {
        unsigned i = enc ? (unsigned)step : 9 - (unsigned)step;
        ff1_v2 blk = ff1_fast64_block(dom, i, enc ? *b : *a);

        ff1_aes(k, (const uint8_t *)&blk, s, 1);
        ff1_fast64_round(dom, i, enc, s, a, b);
    }
}

/* The same for n <= FF1_LANES values at once: each round's n AES blocks in
 * one ECB call, which AES-NI pipelines (a value's ten rounds are a chain;
 * different values' are not). */
#define FF1_LANES 32

static void
ff1_fast64_lanes(struct ff1_key *k, const struct ff1_domain *dom, int enc,
                 uint64_t *a, uint64_t *b, size_t n)
{
    ff1_v2 blk[FF1_LANES], s[FF1_LANES];

    assert(n >= 1 && n <= FF1_LANES);
    for (int step = 0; step < 10; step++) {
        unsigned i = enc ? (unsigned)step : 9 - (unsigned)step;

        for (size_t j = 0; j < n; j++)
            blk[j] = ff1_fast64_block(dom, i, enc ? b[j] : a[j]);
        ff1_aes(k, (const uint8_t *)blk, (uint8_t *)s, n);
        for (size_t j = 0; j < n; j++)
            ff1_fast64_round(dom, i, enc, (const uint8_t *)&s[j], &a[j], &b[j]);
    }
}

/* The same with 128-bit integers: radix^v == 2^64 exactly (radix 2, 4 or
 * 16 with v = 64, 32 or 16). */
static void
ff1_fast128(struct ff1_key *k, const struct ff1_domain *dom, int enc,
            unsigned __int128 *a, unsigned __int128 *b)
{
    uint8_t numb[8] = {0}, s[16];

    for (int step = 0; step < 10; step++) {
        unsigned i = enc ? (unsigned)step : 9 - (unsigned)step;
        unsigned __int128 m = i % 2 == 0 ? dom->pow_u : dom->pow_v;
        unsigned __int128 in = enc ? *b : *a, y, c;

        for (unsigned j = dom->b; j-- > 0;) {
            numb[j] = (uint8_t)in;
            in >>= 8;
        }
        ff1_round_s(k, dom, i, numb, s);
        y = be_num(s, dom->d) % m;
        if (enc) {
            c = (*a + y) % m;
            *a = *b;
            *b = c;
        } else {
            c = (*b + m - y) % m;
            *b = *a;
            *a = c;
        }
    }
}

static void
ff1_fast(struct ff1_key *k, const struct ff1_domain *dom, int enc,
         unsigned __int128 *a, unsigned __int128 *b)
{
    if (dom->pow_v < U128_2P64) {
        uint64_t a64 = (uint64_t)*a, b64 = (uint64_t)*b;

        ff1_fast64(k, dom, enc, &a64, &b64);
        *a = a64;
        *b = b64;
    } else {
        ff1_fast128(k, dom, enc, a, b);
    }
}

/* --- the rounds on digit arrays ------------------------------------------ */

static void
ff1_general(struct ff1_key *k, const struct ff1_domain *dom, int enc,
            const uint8_t *in, uint8_t *out)
{
    uint8_t a[FF1_LEN_MAX], b[FF1_LEN_MAX], c[FF1_LEN_MAX], yd[FF1_LEN_MAX];
    uint8_t numb[4 * BN_LIMBS], s[4 * BN_LIMBS];
    unsigned radix = dom->radix, la = dom->u, lb = dom->v;
    struct bn x;

    memcpy(a, in, la);                                  /* step 2 */
    memcpy(b, in + la, lb);
    for (int step = 0; step < 10; step++) {
        unsigned i = enc ? (unsigned)step : 9 - (unsigned)step;
        unsigned m = i % 2 == 0 ? dom->u : dom->v;
        int carry = 0;

        if (enc)
            bn_from_digits(&x, b, lb, radix);
        else
            bn_from_digits(&x, a, la, radix);
        bn_to_bytes(&x, numb, dom->b);
        ff1_round_s(k, dom, i, numb, s);
        bn_from_bytes(&x, s, dom->d);                   /* y = NUM(S) */
        bn_low_digits(&x, radix, yd, m);                /* y mod radix^m */
        if (enc) {
            assert(la == m);
            for (unsigned j = m; j-- > 0;) {            /* A + y mod radix^m */
                int t = a[j] + yd[j] + carry;
                carry = t >= (int)radix;
                c[j] = (uint8_t)(carry ? t - (int)radix : t);
            }
            memcpy(a, b, lb);
            la = lb;
            memcpy(b, c, m);
            lb = m;
        } else {
            assert(lb == m);
            for (unsigned j = m; j-- > 0;) {            /* B - y mod radix^m */
                int t = b[j] - yd[j] - carry;
                carry = t < 0;
                c[j] = (uint8_t)(carry ? t + (int)radix : t);
            }
            memcpy(b, a, la);
            lb = la;
            memcpy(a, c, m);
            la = m;
        }
    }
    assert(la == dom->u && lb == dom->v);
    memcpy(out, a, la);                                 /* step 7: A || B */
    memcpy(out + la, b, lb);
}

/* --- the calls ------------------------------------------------------------ */

static int
ff1_digits(struct ff1_key *k, const struct ff1_domain *dom, int enc,
           const uint8_t *in, uint8_t *out)
{
    assert(dom->key_id == k->id);
    for (unsigned i = 0; i < dom->len; i++)
        if (in[i] >= dom->radix)
            return -1;
    if (dom->fast && !ff1_general_only) {
        unsigned __int128 a = 0, b = 0;

        for (unsigned i = 0; i < dom->u; i++)
            a = a * dom->radix + in[i];
        for (unsigned i = dom->u; i < dom->len; i++)
            b = b * dom->radix + in[i];
        ff1_fast(k, dom, enc, &a, &b);
        for (unsigned i = dom->len; i-- > dom->u;) {
            out[i] = (uint8_t)(b % dom->radix);
            b /= dom->radix;
        }
        for (unsigned i = dom->u; i-- > 0;) {
            out[i] = (uint8_t)(a % dom->radix);
            a /= dom->radix;
        }
        return 0;
    }
    ff1_general(k, dom, enc, in, out);
    return 0;
}

int
ff1_encrypt(struct ff1_key *k, const struct ff1_domain *dom,
            const uint8_t *in, uint8_t *out)
{
    return ff1_digits(k, dom, 1, in, out);
}

int
ff1_decrypt(struct ff1_key *k, const struct ff1_domain *dom,
            const uint8_t *in, uint8_t *out)
{
    return ff1_digits(k, dom, 0, in, out);
}

static int
ff1_u64(struct ff1_key *k, const struct ff1_domain *dom, int enc, uint64_t x,
        uint64_t *out)
{
    unsigned __int128 a, b;

    assert(dom->key_id == k->id);
    if (!dom->fits_u64 || x >= dom->pow_u * dom->pow_v)
        return -1;
    if (ff1_general_only) {
        uint8_t dig[64] = {0};

        for (unsigned i = dom->len; i-- > 0;) {
            dig[i] = (uint8_t)(x % dom->radix);
            x /= dom->radix;
        }
        ff1_general(k, dom, enc, dig, dig);
        *out = 0;
        for (unsigned i = 0; i < dom->len; i++)
            *out = *out * dom->radix + dig[i];
        return 0;
    }
    a = x / dom->pow_v;
    b = x % dom->pow_v;
    ff1_fast(k, dom, enc, &a, &b);
    *out = (uint64_t)(a * dom->pow_v + b);
    return 0;
}

int
ff1_encrypt_u64(struct ff1_key *k, const struct ff1_domain *dom, uint64_t x,
                uint64_t *out)
{
    return ff1_u64(k, dom, 1, x, out);
}

int
ff1_decrypt_u64(struct ff1_key *k, const struct ff1_domain *dom, uint64_t x,
                uint64_t *out)
{
    return ff1_u64(k, dom, 0, x, out);
}

int
ff1_encrypt_u64_many(struct ff1_key *k, const struct ff1_domain *dom,
                     const uint64_t *x, uint64_t *out, size_t n)
{
    uint64_t a[FF1_LANES], b[FF1_LANES];

    assert(dom->key_id == k->id);
    if (!dom->fits_u64)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (x[i] >= dom->pow_u * dom->pow_v)
            return -1;
    if (!dom->fast || dom->pow_v >= U128_2P64 || ff1_general_only) {
        for (size_t i = 0; i < n; i++) {
            int rc = ff1_u64(k, dom, 1, x[i], &out[i]);

            assert(rc == 0);            /* every x checked above */
            (void)rc;
        }
        return 0;
    }
    for (size_t at = 0; at < n; at += FF1_LANES) {
        size_t m = n - at < FF1_LANES ? n - at : FF1_LANES;

        for (size_t j = 0; j < m; j++) {
            a[j] = x[at + j] / (uint64_t)dom->pow_v;
            b[j] = x[at + j] % (uint64_t)dom->pow_v;
        }
        ff1_fast64_lanes(k, dom, 1, a, b, m);
        for (size_t j = 0; j < m; j++)
            out[at + j] = a[j] * (uint64_t)dom->pow_v + b[j];
    }
    return 0;
}
