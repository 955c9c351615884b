/* util.c: see util.h. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

static void
oom(size_t size)
{
    fprintf(stderr, "leafd: out of memory allocating %zu bytes\n", size);
    abort();
}

void *
xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (p == NULL)
        oom(size);
    return p;
}

void *
xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        oom(n * size);
    return p;
}

void *
xrealloc(void *old, size_t size)
{
    void *p = realloc(old, size ? size : 1);
    if (p == NULL)
        oom(size);
    return p;
}

void *
xaligned_zalloc(size_t align, size_t size)
{
    void *p;

    if (posix_memalign(&p, align, size ? size : 1) != 0)
        oom(size);
    memset(p, 0, size);
    return p;
}

char *
xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *
xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *
xasprintf(const char *fmt, ...)
{
    va_list ap;
    char *p;
    int n;

    va_start(ap, fmt);
    n = vasprintf(&p, fmt, ap);
    va_end(ap);
    if (n < 0)
        oom(0);
    return p;
}

void
util_vset_cause(char **cause, const char *fmt, va_list ap)
{
    char *p;

    if (cause == NULL)
        return;
    if (vasprintf(&p, fmt, ap) < 0)
        oom(0);
    *cause = p;
}

void
util_set_cause(char **cause, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    util_vset_cause(cause, fmt, ap);
    va_end(ap);
}

static int64_t
clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
util_wall_ms(void)
{
    return clock_ms(CLOCK_REALTIME);
}

int64_t
util_mono_ms(void)
{
    return clock_ms(CLOCK_MONOTONIC);
}

int64_t
util_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* "YYYY-MM-DDTHH:MM:SS.mmmZ" (UTC), or "YYYY-MM-DD HH:MM:SS.mmm" in the
 * local time zone; the decimal ms when the date cannot be broken down. */
static void
format_ms(int64_t unix_ms, char *buf, size_t size, int local)
{
    int64_t sec = unix_ms / 1000, ms = unix_ms % 1000;
    struct tm tm;
    time_t tt;

    if (ms < 0) {
        ms += 1000;
        sec--;
    }
    tt = (time_t)sec;
    if ((local ? localtime_r(&tt, &tm) : gmtime_r(&tt, &tm)) == NULL) {
        snprintf(buf, size, "%" PRId64, unix_ms);
        return;
    }
    snprintf(buf, size, local ? "%04d-%02d-%02d %02d:%02d:%02d.%03d"
                              : "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, (int)ms);
}

void
util_format_utc_ms(int64_t unix_ms, char *buf, size_t size)
{
    format_ms(unix_ms, buf, size, 0);
}

void
util_format_local_ms(int64_t unix_ms, char *buf, size_t size)
{
    format_ms(unix_ms, buf, size, 1);
}

int
util_parse_u64(const char *s, size_t len, uint64_t *out)
{
    uint64_t v = 0;

    if (len == 0 || len > 20)
        return -1;
    for (size_t i = 0; i < len; i++) {
        unsigned d = (unsigned char)s[i] - '0';
        if (d > 9)
            return -1;
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int
util_parse_i64(const char *s, size_t len, int allow_neg, int64_t *out)
{
    uint64_t v;
    int neg = 0;

    if (len > 0 && s[0] == '-') {
        if (!allow_neg)
            return -1;
        neg = 1;
        s++;
        len--;
    }
    if (util_parse_u64(s, len, &v) == -1)
        return -1;
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1)
            return -1;
        *out = (int64_t)(0 - v);
    } else {
        if (v > (uint64_t)INT64_MAX)
            return -1;
        *out = (int64_t)v;
    }
    return 0;
}

/* The byte at in[*i] after percent-decoding (a "%XX" escape moves *i to its
 * last digit), or -1 for a malformed escape or a decoded NUL. */
static int
pct_byte(const char *in, size_t len, size_t *i)
{
    int c = (unsigned char)in[*i], hi, lo;

    if (c == '%') {
        if (*i + 2 >= len)
            return -1;
        hi = util_hex_digit((unsigned char)in[*i + 1]);
        lo = util_hex_digit((unsigned char)in[*i + 2]);
        if (hi < 0 || lo < 0)
            return -1;
        c = hi * 16 + lo;
        *i += 2;
    }
    return c == 0 ? -1 : c;
}

long
util_pct_decode(const char *in, size_t len, char *out, size_t cap)
{
    size_t o = 0;

    for (size_t i = 0; i < len; i++) {
        int c = pct_byte(in, len, &i);

        if (c < 0 || o >= cap)
            return -1;
        out[o++] = (char)c;
    }
    return (long)o;
}

int
util_tag_valid(const char *s, size_t len)
{
    if (len == 0 || len > TAG_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' ||
              c == '-'))
            return 0;
    }
    return 1;
}

char *
util_u64_dec(char *p, uint64_t v)
{
    static const char digits2[] =
        "0001020304050607080910111213141516171819"
        "2021222324252627282930313233343536373839"
        "4041424344454647484950515253545556575859"
        "6061626364656667686970717273747576777879"
        "8081828384858687888990919293949596979899";
    char tmp[20];
    int n = 20;

    while (v >= 100) {
        unsigned i = (unsigned)(v % 100) * 2;
        v /= 100;
        tmp[--n] = digits2[i + 1];
        tmp[--n] = digits2[i];
    }
    if (v >= 10) {
        unsigned i = (unsigned)v * 2;
        tmp[--n] = digits2[i + 1];
        tmp[--n] = digits2[i];
    } else {
        tmp[--n] = (char)('0' + v);
    }
    memcpy(p, tmp + n, (size_t)(20 - n));
    return p + (20 - n);
}

/* Decode [in, in+len) and compare with key (NUL-terminated): 1 equal, 0
 * not, -1 malformed. */
static int
query_key_is(const char *in, size_t len, const char *key)
{
    size_t k = 0;
    int eq = 1;

    for (size_t i = 0; i < len; i++) {
        int c = pct_byte(in, len, &i);

        if (c < 0)
            return -1;
        if (eq && (key[k] == '\0' || (unsigned char)key[k] != c))
            eq = 0;
        if (eq)
            k++;
    }
    return eq && key[k] == '\0';
}

int
util_query_valid(const char *q, size_t qlen)
{
    return query_key_is(q, qlen, "") >= 0;
}

enum util_query_result
util_query_param(const char *q, size_t qlen, const char *key, char *out,
                 size_t cap, size_t *outlen)
{
    const char *p = q, *end = q + qlen;
    enum util_query_result r = UTIL_QUERY_ABSENT;

    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *e = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(e - p));
        const char *v = eq ? eq + 1 : e;
        int is = query_key_is(p, (size_t)((eq ? eq : e) - p), key);
        long n;

        if (is < 0)
            return UTIL_QUERY_BAD;
        if (is && r == UTIL_QUERY_FOUND)
            return UTIL_QUERY_REPEATED;
        if (is) {
            n = util_pct_decode(v, (size_t)(e - v), out, cap);
            if (n < 0)
                return UTIL_QUERY_BAD;
            *outlen = (size_t)n;
            r = UTIL_QUERY_FOUND;
        } else if (query_key_is(v, (size_t)(e - v), "") < 0) {
            return UTIL_QUERY_BAD;      /* checks the escapes only */
        }
        p = e + 1;
    }
    return r;
}

char *
util_json_str(const char *s)
{
    size_t n = strlen(s);
    char *out = xmalloc(n * 6 + 3), *o = out;

    *o++ = '"';
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            *o++ = '\\';
            *o++ = (char)c;
        } else if (c < 0x20) {
            o += sprintf(o, "\\u%04x", c);
        } else {
            *o++ = (char)c;
        }
    }
    *o++ = '"';
    *o = '\0';
    return out;
}

static void
sbuf_grow(struct sbuf *b, size_t need)
{
    size_t cap = b->cap ? b->cap : 256;

    if (b->len + need + 1 <= b->cap)
        return;
    while (cap < b->len + need + 1)
        cap *= 2;
    b->p = xrealloc(b->p, cap);
    b->cap = cap;
}

void
sbuf_append(struct sbuf *b, const char *s, size_t n)
{
    sbuf_grow(b, n);
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void
sbuf_puts(struct sbuf *b, const char *s)
{
    sbuf_append(b, s, strlen(s));
}

void
sbuf_printf(struct sbuf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    sbuf_grow(b, 128);
    va_start(ap, fmt);
    n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= b->cap - b->len) {
        sbuf_grow(b, (size_t)n);
        va_start(ap, fmt);
        vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

void
sbuf_json_str(struct sbuf *b, const char *s)
{
    char *q = util_json_str(s);
    sbuf_puts(b, q);
    free(q);
}

void
sbuf_metric_head(struct sbuf *b, const char *name, const char *type,
                 const char *help)
{
    if (help != NULL)
        sbuf_printf(b, "# HELP %s %s\n", name, help);
    sbuf_printf(b, "# TYPE %s %s\n", name, type);
}

void
sbuf_metric_u64(struct sbuf *b, const char *name, const char *type,
                const char *help, uint64_t v)
{
    sbuf_metric_head(b, name, type, help);
    sbuf_printf(b, "%s %" PRIu64 "\n", name, v);
}

void
sbuf_metric_i64(struct sbuf *b, const char *name, const char *type,
                const char *help, int64_t v)
{
    sbuf_metric_head(b, name, type, help);
    sbuf_printf(b, "%s %" PRId64 "\n", name, v);
}

void
sbuf_free(struct sbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}
