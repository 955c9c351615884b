/* fuzz_ff1.c: libFuzzer target for FF1 (src/core/ff1.c, with util.c):
 * any radix, length, key length, tweak and digits.
 *
 * Checked: a domain is accepted exactly when radix is 2..36, the length
 * 2..FF1_LEN_MAX and radix^length >= 1,000,000, and a tweak up to
 * FF1_TWEAK_MAX; a key exactly at 16, 24 or 32 bytes; every refusal has a
 * reason. An encipherment is refused exactly when a digit is >= radix;
 * otherwise its digits are in range, deciphering gives the input back, the
 * general (digit array) path gives what the integer path gives, and where
 * the domain fits uint64 the number functions agree with the digits, and
 * ff1_encrypt_u64_many with ff1_encrypt_u64.
 *
 * Input: byte 0 the radix (0..39), byte 1 the length (0..263), byte 2 the
 * key length (0..39), bytes 3-4 the tweak length (big-endian, capped at
 * what is left and 1100), then the key, the tweak, and the digits (each
 * byte modulo radix + 2, so that some are out of range; missing ones 0).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ff1.h"
#include "fuzz.h"

static int
ref_domain_ok(unsigned radix, unsigned len)
{
    uint64_t size = 1;

    if (radix < 2 || radix > 36 || len < 2 || len > FF1_LEN_MAX)
        return 0;
    for (unsigned i = 0; i < len && size < 1000000; i++)
        size *= radix;
    return size >= 1000000;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned radix, len, key_len;
    size_t tl, pos = 5;
    uint8_t x[FF1_LEN_MAX], y[FF1_LEN_MAX], z[FF1_LEN_MAX], g[FF1_LEN_MAX];
    struct ff1_key *k;
    struct ff1_domain dom;
    char *cause = NULL;
    int bad_digit = 0, ok;

    if (size < 5)
        return 0;
    radix = data[0] % 40;
    len = data[1] + (data[1] >= 250 ? 8 : 0);       /* 250..255 -> 258..263 */
    key_len = data[2] % 40;
    tl = ((size_t)data[3] << 8 | data[4]) % 1101;

    ok = ff1_domain_check(radix, len, &cause) == 0;
    FUZZ_ASSERT(ok == ref_domain_ok(radix, len));
    FUZZ_ASSERT(ok ? cause == NULL : cause != NULL && cause[0] != '\0');
    free(cause);
    cause = NULL;

    if (size - pos < key_len)
        return 0;
    k = ff1_key_new(data + pos, key_len, &cause);
    FUZZ_ASSERT((k != NULL) == (key_len == 16 || key_len == 24 || key_len == 32));
    FUZZ_ASSERT(k != NULL ? cause == NULL : cause != NULL && cause[0] != '\0');
    free(cause);
    cause = NULL;
    if (k == NULL)
        return 0;
    pos += key_len;
    if (tl > size - pos)
        tl = size - pos;
    if (ff1_domain_init(&dom, k, radix, len, data + pos, tl, &cause) != 0) {
        FUZZ_ASSERT(cause != NULL && cause[0] != '\0');
        FUZZ_ASSERT(!ok || tl > FF1_TWEAK_MAX);
        free(cause);
        ff1_key_free(k);
        return 0;
    }
    FUZZ_ASSERT(ok && tl <= FF1_TWEAK_MAX && cause == NULL);
    pos += tl;
    for (unsigned i = 0; i < len; i++) {
        x[i] = pos + i < size ? (uint8_t)(data[pos + i] % (radix + 2)) : 0;
        bad_digit |= x[i] >= radix;
    }

    memset(y, 0xee, sizeof y);
    if (ff1_encrypt(k, &dom, x, y) != 0) {
        FUZZ_ASSERT(bad_digit);
        FUZZ_ASSERT(y[0] == 0xee);
        FUZZ_ASSERT(ff1_decrypt(k, &dom, x, y) != 0);
        ff1_key_free(k);
        return 0;
    }
    FUZZ_ASSERT(!bad_digit);
    for (unsigned i = 0; i < len; i++)
        FUZZ_ASSERT(y[i] < radix);
    FUZZ_ASSERT(ff1_decrypt(k, &dom, y, z) == 0);
    FUZZ_ASSERT(memcmp(x, z, len) == 0);

    ff1_force_general_path(1);
    FUZZ_ASSERT(ff1_encrypt(k, &dom, x, g) == 0);
    FUZZ_ASSERT(memcmp(g, y, len) == 0);
    FUZZ_ASSERT(ff1_decrypt(k, &dom, y, g) == 0);
    FUZZ_ASSERT(memcmp(g, x, len) == 0);
    ff1_force_general_path(0);

    if (dom.fits_u64) {
        uint64_t xv = 0, yv = 0, got, back;

        for (unsigned i = 0; i < len; i++) {
            xv = xv * radix + x[i];
            yv = yv * radix + y[i];
        }
        uint64_t many[3], want;

        FUZZ_ASSERT(ff1_encrypt_u64(k, &dom, xv, &got) == 0 && got == yv);
        FUZZ_ASSERT(ff1_decrypt_u64(k, &dom, yv, &back) == 0 && back == xv);
        many[0] = xv;
        many[1] = yv;
        many[2] = 0;
        FUZZ_ASSERT(ff1_encrypt_u64_many(k, &dom, many, many, 3) == 0);
        FUZZ_ASSERT(many[0] == yv);
        FUZZ_ASSERT(ff1_encrypt_u64(k, &dom, yv, &want) == 0 && many[1] == want);
        FUZZ_ASSERT(ff1_encrypt_u64(k, &dom, 0, &want) == 0 && many[2] == want);
    } else {
        uint64_t got = 7;

        FUZZ_ASSERT(ff1_encrypt_u64(k, &dom, 0, &got) == -1 && got == 7);
        FUZZ_ASSERT(ff1_encrypt_u64_many(k, &dom, &got, &got, 1) == -1 && got == 7);
    }
    ff1_key_free(k);
    return 0;
}
