/* fuzz_util.c: libFuzzer target for util.h's parsers of untrusted text:
 * util_parse_u64 / util_parse_i64 (?count=, config values), util_pct_decode
 * and util_tag_valid (the biz_tag in /segment/<tag>), util_query_param/util_query_valid, and the
 * formatters util_u64_dec and util_json_str. Each is compared with a plain
 * reference written from util.h's contract.
 *
 * Input: the first byte picks a capacity for util_pct_decode, the rest is
 * the text (exactly that many bytes on the heap).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "util.h"

static int
ref_u64(const char *s, size_t len, uint64_t *out)
{
    char tmp[32];
    char *end;
    unsigned long long v;

    if (len == 0 || len > 20)
        return -1;
    for (size_t i = 0; i < len; i++)
        if (s[i] < '0' || s[i] > '9')
            return -1;
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    errno = 0;
    v = strtoull(tmp, &end, 10);
    if (errno == ERANGE || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

static int
ref_i64(const char *s, size_t len, int allow_neg, int64_t *out)
{
    uint64_t v;

    if (len > 0 && s[0] == '-') {
        if (!allow_neg || ref_u64(s + 1, len - 1, &v) == -1 ||
            v > (uint64_t)INT64_MAX + 1)
            return -1;
        *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
        return 0;
    }
    if (ref_u64(s, len, &v) == -1 || v > (uint64_t)INT64_MAX)
        return -1;
    *out = (int64_t)v;
    return 0;
}

static int
ref_hex(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static long
ref_pct(const char *in, size_t len, char *out, size_t cap)
{
    size_t o = 0, i = 0;

    while (i < len) {
        int c = (unsigned char)in[i];
        if (c == '%') {
            if (len - i < 3 || ref_hex((unsigned char)in[i + 1]) < 0 ||
                ref_hex((unsigned char)in[i + 2]) < 0)
                return -1;
            c = ref_hex((unsigned char)in[i + 1]) * 16 +
                ref_hex((unsigned char)in[i + 2]);
            i += 3;
        } else {
            i++;
        }
        if (c == 0 || o == cap)
            return -1;
        out[o++] = (char)c;
    }
    return (long)o;
}

static int
ref_tag(const char *s, size_t len)
{
    if (len < 1 || len > TAG_MAX)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                    "0123456789._:-", s[i]) || s[i] == '\0')
            return 0;
    return 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t caps[] = { 0, 1, 2, 3, 16, TAG_MAX, TAG_MAX * 3, 4096 };
    size_t cap, len;
    char *in, *out, *ref, dec[24];
    long n, rn;
    uint64_t u, ru;
    int64_t i64, ri64;

    if (size < 1)
        return 0;
    cap = caps[data[0] % (sizeof caps / sizeof caps[0])];
    len = size - 1;
    in = malloc(len ? len : 1);
    out = malloc(cap ? cap : 1);
    ref = malloc(cap ? cap : 1);
    if (in == NULL || out == NULL || ref == NULL)
        abort();
    memcpy(in, data + 1, len);

    /* Numbers. */
    {
        int a = util_parse_u64(in, len, &u), b = ref_u64(in, len, &ru);
        FUZZ_ASSERT(a == b);
        if (a == 0) {
            FUZZ_ASSERT(u == ru);
            /* Formatting back gives the text without leading zeros. */
            char *e = util_u64_dec(dec, u);
            size_t z = 0;
            while (z + 1 < len && in[z] == '0')
                z++;
            FUZZ_ASSERT((size_t)(e - dec) == len - z);
            FUZZ_ASSERT(memcmp(dec, in + z, len - z) == 0);
        }
    }
    for (int neg = 0; neg <= 1; neg++) {
        int a = util_parse_i64(in, len, neg, &i64), b = ref_i64(in, len, neg, &ri64);
        FUZZ_ASSERT(a == b);
        if (a == 0)
            FUZZ_ASSERT(i64 == ri64);
    }

    /* Percent-decoding and the tag rule, as api.c applies them. */
    n = util_pct_decode(in, len, out, cap);
    rn = ref_pct(in, len, ref, cap);
    FUZZ_ASSERT(n == rn);
    if (n >= 0) {
        FUZZ_ASSERT((size_t)n <= cap);
        FUZZ_ASSERT(memcmp(out, ref, (size_t)n) == 0);
        FUZZ_ASSERT(memchr(out, '\0', (size_t)n) == NULL);
        FUZZ_ASSERT(util_tag_valid(out, (size_t)n) == ref_tag(out, (size_t)n));
    }
    FUZZ_ASSERT(util_tag_valid(in, len) == ref_tag(in, len));

    /* Query parameters: util_query_param against a reference built on
     * ref_pct, pair by pair in order. */
    {
        static const char *const keys[] = { "count", "format", "", "a", "token" };
        char *kbuf = malloc(len + 1), *vbuf = malloc(len + 1);
        char val[64], rval[64];

        FUZZ_ASSERT(util_query_valid(in, len) == (ref_pct(in, len, kbuf, len) >= 0));
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            size_t vcap = cap < sizeof val ? cap : sizeof val, vlen = 0, rlen = 0;
            enum util_query_result got, want = UTIL_QUERY_ABSENT;
            const char *p = in, *end = in + len;

            got = util_query_param(in, len, keys[k], val, vcap, &vlen);
            while (p < end && want != UTIL_QUERY_BAD && want != UTIL_QUERY_REPEATED) {
                const char *e = memchr(p, '&', (size_t)(end - p));
                const char *eq, *v;
                long kn, vn;

                if (e == NULL)
                    e = end;
                eq = memchr(p, '=', (size_t)(e - p));
                v = eq ? eq + 1 : e;
                kn = ref_pct(p, (size_t)((eq ? eq : e) - p), kbuf, len);
                if (kn < 0) {
                    want = UTIL_QUERY_BAD;
                } else if ((size_t)kn == strlen(keys[k]) &&
                           memcmp(kbuf, keys[k], (size_t)kn) == 0) {
                    if (want == UTIL_QUERY_FOUND) {
                        want = UTIL_QUERY_REPEATED;
                    } else {
                        vn = ref_pct(v, (size_t)(e - v), rval, vcap);
                        want = vn < 0 ? UTIL_QUERY_BAD : UTIL_QUERY_FOUND;
                        rlen = vn < 0 ? 0 : (size_t)vn;
                    }
                } else if (ref_pct(v, (size_t)(e - v), vbuf, len) < 0) {
                    want = UTIL_QUERY_BAD;
                }
                p = e + 1;
            }
            FUZZ_ASSERT(got == want);
            if (got == UTIL_QUERY_FOUND) {
                FUZZ_ASSERT(vlen == rlen && vlen <= vcap);
                FUZZ_ASSERT(memcmp(val, rval, vlen) == 0);
            }
        }
        free(kbuf);
        free(vbuf);
    }

    /* JSON string escaping of the text up to its first NUL. */
    {
        char *s = malloc(len + 1), *j;
        size_t jl;

        memcpy(s, in, len);
        s[len] = '\0';
        j = util_json_str(s);
        jl = strlen(j);
        FUZZ_ASSERT(jl >= 2 && j[0] == '"' && j[jl - 1] == '"');
        for (size_t i = 1; i + 1 < jl; i++) {
            FUZZ_ASSERT((unsigned char)j[i] >= 0x20);
            if (j[i] == '\\')
                i++;            /* the escaped character */
            else
                FUZZ_ASSERT(j[i] != '"');
        }
        free(j);
        free(s);
    }

    free(in);
    free(out);
    free(ref);
    return 0;
}
