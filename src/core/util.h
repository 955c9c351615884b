/* util.h: small helpers shared by every module: fatal-on-OOM allocation,
 * clocks, strict number parsing, percent-decoding, tag validation and fast
 * decimal formatting. All functions are thread-safe. */
#ifndef LEAFD_UTIL_H
#define LEAFD_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#define TAG_MAX 128             /* longest biz_tag, as in Leaf's varchar(128) */

/* Allocation never fails: on OOM these abort (redis/tmux style). */
void *xmalloc(size_t size);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t size);
void *xaligned_zalloc(size_t align, size_t size);   /* zeroed; free() it */
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* *cause = a malloc'd formatted message, unless cause is NULL (a reason
 * nobody asked for is not made). Aborts on out-of-memory, as xasprintf. */
void util_set_cause(char **cause, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void util_vset_cause(char **cause, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

int64_t util_wall_ms(void);     /* CLOCK_REALTIME in ms */
int64_t util_mono_ms(void);     /* CLOCK_MONOTONIC in ms */
int64_t util_mono_us(void);

/* ms since the Unix epoch as a date with ms into buf (>= 32 bytes): UTC,
 * ISO-8601 "2019-09-06T01:35:00.834Z"; or in the local time zone, as Leaf
 * (Java's SimpleDateFormat) prints it, "2019-09-06 09:35:00.834". The ms
 * in decimal when the date is out of range. No allocation (libleafd-client
 * decodes with them). */
void util_format_utc_ms(int64_t unix_ms, char *buf, size_t size);
void util_format_local_ms(int64_t unix_ms, char *buf, size_t size);

/* Strict decimal: optional leading '-' only if allow_neg, digits only, no
 * spaces, no overflow. Returns 0 or -1. */
int util_parse_i64(const char *s, size_t len, int allow_neg, int64_t *out);
int util_parse_u64(const char *s, size_t len, uint64_t *out);

/* Percent-decode [in, in+len) into out (capacity cap). '+' is not special
 * (paths). Returns the decoded length, or -1 on a malformed escape, a decoded
 * NUL byte, or output over cap. */
long util_pct_decode(const char *in, size_t len, char *out, size_t cap);

/* A valid biz_tag: 1..TAG_MAX bytes of [A-Za-z0-9._:-]. */
int util_tag_valid(const char *s, size_t len);

/* Writes v in decimal at p (no NUL), returns the end. p needs 20 bytes. */
char *util_u64_dec(char *p, uint64_t v);

/* Query strings ("a=1&b=2"), percent-decoded with util_pct_decode's rules
 * (the path's: '+' is not special), keys and values alike. */
enum util_query_result {
    UTIL_QUERY_ABSENT,      /* no pair with this key */
    UTIL_QUERY_FOUND,       /* exactly one: out holds its decoded value */
    UTIL_QUERY_REPEATED,    /* the key comes more than once */
    UTIL_QUERY_BAD,         /* a malformed escape or decoded NUL anywhere in
                               the query, or the value is over cap bytes */
};
/* 1 if every escape in q[0..qlen) is well-formed and none decodes to NUL. */
int util_query_valid(const char *q, size_t qlen);
/* Looks key up in q[0..qlen); on FOUND, out (cap bytes, no NUL added) holds
 * the decoded value and *outlen its length. A pair without '=' has an empty
 * value. No allocation. */
enum util_query_result util_query_param(const char *q, size_t qlen,
                                        const char *key, char *out,
                                        size_t cap, size_t *outlen);

/* JSON-escape s into a malloc'd string with quotes. */
char *util_json_str(const char *s);

/* A growable text buffer for building responses off the hot path
 * (/metrics, /cache, JSON errors). Zero-initialise; sbuf_free when done. */
struct sbuf {
    char  *p;
    size_t len;
    size_t cap;
};
void sbuf_append(struct sbuf *b, const char *s, size_t n);
void sbuf_puts(struct sbuf *b, const char *s);
void sbuf_printf(struct sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void sbuf_json_str(struct sbuf *b, const char *s);   /* quoted, escaped */
/* A Prometheus metric's head: "# HELP name help\n" (none when help is
 * NULL), then "# TYPE name type\n" (type: counter, gauge, histogram). */
void sbuf_metric_head(struct sbuf *b, const char *name, const char *type,
                      const char *help);
/* A metric of one sample without labels: its head, then "name v\n". */
void sbuf_metric_u64(struct sbuf *b, const char *name, const char *type,
                     const char *help, uint64_t v);
void sbuf_metric_i64(struct sbuf *b, const char *name, const char *type,
                     const char *help, int64_t v);
void sbuf_free(struct sbuf *b);

/* The value of a hex digit (either case), or -1. Inline, so that the pure
 * parsers (resp_parse.c, fuzzed alone) use it without linking util.o. */
static inline int
util_hex_digit(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

#endif
