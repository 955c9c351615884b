/* fuzz_idstr.c: libFuzzer target for the ID-string decoder idstr_decode()
 * (idstr.c alone), which reads untrusted text from /segment/decode/<s>,
 * /snowflake/decode/<s>, RESP's LEAF.DECODE, gRPC's Decode and
 * DecodeSegment, and `leafd decode`.
 *
 * The decoder is checked against a reference written from idstr.h's
 * contract (split at the last '_', the prefix rules, the widths, the
 * alphabets with Crockford's aliases, the 2^63-1 bound, computed in 128
 * bits): the same verdict, the same ID, encoding and prefix. An accepted
 * string encodes back to its canonical spelling (base62: the input itself;
 * base32: upper case with I L O resolved), which decodes to the same ID;
 * and the input's first 8 bytes, read as an ID, encode in both encodings
 * and decode back, and two such IDs' strings compare as the IDs do.
 *
 * Input: the first byte picks the encoding asked for (mod 3: any by width,
 * base62, base32), the rest is the text (exactly that many bytes on the
 * heap).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "idstr.h"

static const char b62[] =
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
static const char b32[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

static int
ref_digit(char ch, int base62)
{
    const char *p;

    if (base62) {
        p = ch != '\0' ? memchr(b62, ch, 62) : NULL;
        return p != NULL ? (int)(p - b62) : -1;
    }
    if (ch >= 'a' && ch <= 'z')
        ch = (char)(ch - 32);
    if (ch == 'I' || ch == 'L')
        return 1;
    if (ch == 'O')
        return 0;
    p = ch != '\0' ? memchr(b32, ch, 32) : NULL;
    return p != NULL ? (int)(p - b32) : -1;
}

/* The reference: the verdict, and on success the ID, encoding, prefix. */
static enum idstr_result
ref_decode(const char *s, size_t len, enum idstr_enc want, uint64_t *id,
           enum idstr_enc *enc, size_t *plen, int *has_prefix)
{
    size_t us = len, bl;
    const char *body = s;
    unsigned __int128 v = 0;
    int base62;

    for (size_t i = 0; i < len; i++)
        if (s[i] == '_')
            us = i;
    *has_prefix = us != len;
    *plen = *has_prefix ? us : 0;
    if (*has_prefix) {
        if (us < 1 || us > IDSTR_PREFIX_MAX || s[0] < 'a' || s[0] > 'z' ||
            s[us - 1] < 'a' || s[us - 1] > 'z')
            return IDSTR_BAD_PREFIX;
        for (size_t i = 0; i < us; i++)
            if (!((s[i] >= 'a' && s[i] <= 'z') || s[i] == '_'))
                return IDSTR_BAD_PREFIX;
        body = s + us + 1;
    }
    bl = len - (size_t)(body - s);
    if (want == IDSTR_DEC)
        want = bl == 11 ? IDSTR_BASE62 : bl == 13 ? IDSTR_BASE32 : IDSTR_DEC;
    if (want == IDSTR_DEC || bl != (want == IDSTR_BASE62 ? 11u : 13u))
        return IDSTR_BAD_LENGTH;
    base62 = want == IDSTR_BASE62;
    for (size_t i = 0; i < bl; i++) {
        int d = ref_digit(body[i], base62);

        if (d < 0)
            return IDSTR_BAD_CHAR;
        v = v * (base62 ? 62 : 32) + (unsigned)d;
        if (v > (unsigned __int128)INT64_MAX)
            return IDSTR_OVERFLOW;
    }
    *id = (uint64_t)v;
    *enc = want;
    return IDSTR_OK;
}

static void
check_encode(uint64_t a, uint64_t b)
{
    static const enum idstr_enc encs[] = { IDSTR_BASE62, IDSTR_BASE32 };
    char sa[IDSTR_TEXT_MAX], sb[IDSTR_TEXT_MAX];

    a &= (uint64_t)INT64_MAX;
    b &= (uint64_t)INT64_MAX;
    for (int e = 0; e < 2; e++) {
        struct idstr_parsed p;
        size_t na = idstr_encode(encs[e], "ord", 3, a, sa);
        size_t nb = idstr_encode(encs[e], "ord", 3, b, sb);
        int c = memcmp(sa, sb, na);

        FUZZ_ASSERT(na == nb && na == 4 + (e == 0 ? 11u : 13u));
        FUZZ_ASSERT(idstr_decode(sa, na, IDSTR_DEC, &p) == IDSTR_OK);
        FUZZ_ASSERT(p.id == a && p.enc == encs[e] && p.prefix_len == 3);
        FUZZ_ASSERT((c < 0) == (a < b) && (c == 0) == (a == b));
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const enum idstr_enc wants[] = { IDSTR_DEC, IDSTR_BASE62, IDSTR_BASE32 };
    enum idstr_enc want, renc = IDSTR_DEC;
    struct idstr_parsed p;
    enum idstr_result r, rr;
    uint64_t rid = 0, a = 0, b = 0;
    size_t len, rplen = 0;
    int has_prefix = 0;
    char *s;

    if (size < 1)
        return 0;
    want = wants[data[0] % 3];
    len = size - 1;
    s = malloc(len ? len : 1);
    if (s == NULL)
        return 0;
    memcpy(s, data + 1, len);
    r = idstr_decode(s, len, want, &p);
    rr = ref_decode(s, len, want, &rid, &renc, &rplen, &has_prefix);
    FUZZ_ASSERT(r == rr);
    FUZZ_ASSERT(idstr_result_text(r) != NULL);
    if (r == IDSTR_OK) {
        char canon[IDSTR_TEXT_MAX];
        struct idstr_parsed q;
        size_t n;

        FUZZ_ASSERT(p.id == rid && p.enc == renc && p.id <= (uint64_t)INT64_MAX);
        FUZZ_ASSERT(has_prefix ? p.prefix == s && p.prefix_len == rplen
                               : p.prefix == NULL && p.prefix_len == 0);
        n = idstr_encode(p.enc, p.prefix, p.prefix_len, p.id, canon);
        FUZZ_ASSERT(n == len);
        for (size_t i = 0, off = has_prefix ? p.prefix_len + 1 : 0; i < n; i++) {
            char want_ch = s[i];

            if (p.enc == IDSTR_BASE32 && i >= off)
                want_ch = b32[ref_digit(s[i], 0)];
            FUZZ_ASSERT(canon[i] == want_ch);
        }
        FUZZ_ASSERT(idstr_decode(canon, n, IDSTR_DEC, &q) == IDSTR_OK && q.id == p.id);
    }
    for (size_t i = 0; i < 8 && i < len; i++)
        a = a << 8 | (uint8_t)s[i];
    for (size_t i = 8; i < 16 && i < len; i++)
        b = b << 8 | (uint8_t)s[i];
    check_encode(a, b);
    check_encode(a, a + (b & 0xff));
    free(s);
    return 0;
}
