/* idstr.c: IDs as fixed-width base62 / Crockford base32 strings with an
 * optional prefix (see idstr.h). */
#include <assert.h>
#include <string.h>

#include "idstr.h"

/* Both in ASCII order: a fixed-width string sorts as its number does. */
static const char b62[] =
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
static const char b32[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

int
idstr_enc_parse(const char *s, size_t len, enum idstr_enc *out)
{
    static const enum idstr_enc all[] = { IDSTR_DEC, IDSTR_BASE62, IDSTR_BASE32 };

    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *n = idstr_enc_name(all[i]);

        if (strlen(n) == len && memcmp(n, s, len) == 0) {
            *out = all[i];
            return 0;
        }
    }
    return -1;
}

const char *
idstr_enc_name(enum idstr_enc e)
{
    switch (e) {
    case IDSTR_DEC:    return "dec";
    case IDSTR_BASE62: return "base62";
    case IDSTR_BASE32: return "base32";
    }
    return "?";
}

int
idstr_prefix_valid(const char *p, size_t len)
{
    if (len < 1 || len > IDSTR_PREFIX_MAX || p[0] < 'a' || p[0] > 'z' ||
        p[len - 1] < 'a' || p[len - 1] > 'z')
        return 0;
    for (size_t i = 0; i < len; i++)
        if ((p[i] < 'a' || p[i] > 'z') && p[i] != '_')
            return 0;
    return 1;
}

size_t
idstr_encode(enum idstr_enc e, const char *prefix, size_t plen, uint64_t id,
             char *out)
{
    size_t width = e == IDSTR_BASE62 ? IDSTR_B62_LEN : IDSTR_B32_LEN, n = 0;
    char *d;

    assert(e == IDSTR_BASE62 || e == IDSTR_BASE32);
    assert(id <= (uint64_t)INT64_MAX);
    assert(plen == 0 || idstr_prefix_valid(prefix, plen));
    if (plen > 0) {
        memcpy(out, prefix, plen);
        out[plen] = '_';
        n = plen + 1;
    }
    d = out + n + width;
    for (size_t i = 0; i < width; i++) {
        if (e == IDSTR_BASE62) {
            *--d = b62[id % 62];
            id /= 62;
        } else {
            *--d = b32[id & 31];
            id >>= 5;
        }
    }
    assert(id == 0);                        /* 2^63 fits either width */
    return n + width;
}

/* The value of base32 character ch (Crockford: any case, I L -> 1, O -> 0),
 * or -1. */
static int
b32_value(char ch)
{
    const char *p;

    if (ch >= 'a' && ch <= 'z')
        ch = (char)(ch - 'a' + 'A');
    if (ch == 'I' || ch == 'L')
        return 1;
    if (ch == 'O')
        return 0;
    if (ch == '\0' || (p = memchr(b32, ch, 32)) == NULL)
        return -1;
    return (int)(p - b32);
}

static int
b62_value(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A' + 10;
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 36;
    return -1;
}

enum idstr_result
idstr_decode(const char *s, size_t len, enum idstr_enc want,
             struct idstr_parsed *out)
{
    const char *body = s, *us = NULL;
    size_t blen = len;
    uint64_t v = 0;
    unsigned base;

    memset(out, 0, sizeof *out);
    for (size_t i = len; i > 0; i--) {
        if (s[i - 1] == '_') {
            us = s + i - 1;
            break;
        }
    }
    if (us != NULL) {
        out->prefix = s;
        out->prefix_len = (size_t)(us - s);
        if (!idstr_prefix_valid(s, out->prefix_len))
            return IDSTR_BAD_PREFIX;
        body = us + 1;
        blen = len - out->prefix_len - 1;
    }
    if (want == IDSTR_DEC)
        want = blen == IDSTR_B62_LEN ? IDSTR_BASE62 :
               blen == IDSTR_B32_LEN ? IDSTR_BASE32 : IDSTR_DEC;
    if (want == IDSTR_DEC ||
        blen != (want == IDSTR_BASE62 ? IDSTR_B62_LEN : IDSTR_B32_LEN))
        return IDSTR_BAD_LENGTH;
    base = want == IDSTR_BASE62 ? 62 : 32;
    for (size_t i = 0; i < blen; i++) {
        int d = want == IDSTR_BASE62 ? b62_value(body[i]) : b32_value(body[i]);

        if (d < 0)
            return IDSTR_BAD_CHAR;
        if (v > ((uint64_t)INT64_MAX - (uint64_t)d) / base)
            return IDSTR_OVERFLOW;
        v = v * base + (uint64_t)d;
    }
    out->enc = want;
    out->id = v;
    return IDSTR_OK;
}

const char *
idstr_result_text(enum idstr_result r)
{
    switch (r) {
    case IDSTR_OK:
        return "ok";
    case IDSTR_BAD_LENGTH:
        return "wrong length: an ID string is [<prefix>_] then 11 characters "
               "of base62 or 13 of Crockford base32";
    case IDSTR_BAD_CHAR:
        return "bad character: base62 is 0-9A-Za-z, base32 is Crockford's "
               "0-9A-HJKMNP-TV-Z (any case; I L read as 1, O as 0; no hyphens)";
    case IDSTR_OVERFLOW:
        return "out of range: the value is over 2^63-1, the largest ID";
    case IDSTR_BAD_PREFIX:
        return "bad prefix: a prefix is 1 to 63 of [a-z_], starting and "
               "ending with a letter, then '_'";
    }
    return "?";
}
