/* fuzz_http_parse.c: libFuzzer target for http_parse_request() (http_parse.h).
 *
 * The first input byte picks the limits (max_head, max_url), the rest is the
 * request bytes, copied into a buffer of exactly that size so AddressSanitizer
 * catches a read one past the end. Beyond "no crash", it asserts the
 * contract:
 *   - on OK: head_len <= len and <= max_head, the head ends in '\n'; target,
 *     query and authorization point inside the head; the target is
 *     origin-form ('/'...) or absolute-form (http(s)://authority, no '@'),
 *     is at most max_url bytes and has no byte <= 0x20 or 0x7f; [scheme and
 *     authority] + path + '?' + query is the target, and an empty path reads
 *     as "/"; flags are 0 or 1;
 *   - INCOMPLETE only while len < max_head;
 *   - streaming: a prefix of the input that gets a definite answer (anything
 *     but INCOMPLETE) gets the same answer, with the same fields, as the whole
 *     input. A server parses each time more bytes arrive, so a request split
 *     across packets must not be judged differently from one that came whole.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fuzz.h"
#include "http_parse.h"

static const struct {
    size_t max_head, max_url;
} limits[] = {
    { 8192, 2048 },             /* leafd's defaults */
    { 1024, 64 },               /* the smallest leafd accepts */
    { 65536, 65536 },
    { 64, 16 },                 /* below leafd's minimums: the parser must cope */
    { 16, 1 },
    { 1, 1 },
    { 0, 0 },
    { 200, 4096 },              /* max_url over max_head */
};
#define NLIMITS (sizeof limits / sizeof limits[0])

static int
inside(const char *p, size_t n, const char *buf, size_t len)
{
    return p >= buf && n <= len && (size_t)(p - buf) <= len - n;
}

static void
check_ok(const char *buf, size_t len, size_t max_head, size_t max_url,
         const struct http_msg *m)
{
    size_t origin, pathlen;

    FUZZ_ASSERT(m->head_len > 0);
    FUZZ_ASSERT(m->head_len <= len);
    FUZZ_ASSERT(m->head_len <= max_head);
    FUZZ_ASSERT(buf[m->head_len - 1] == '\n');
    FUZZ_ASSERT(m->method >= HTTP_GET && m->method <= HTTP_OTHER);
    FUZZ_ASSERT(http_method_name(m->method) != NULL);
    FUZZ_ASSERT(m->version_minor == 0 || m->version_minor == 1);
    FUZZ_ASSERT(m->keep_alive == 0 || m->keep_alive == 1);
    FUZZ_ASSERT(m->accept_json == 0 || m->accept_json == 1);
    FUZZ_ASSERT(m->chunked == 0 || m->chunked == 1);
    FUZZ_ASSERT(m->content_length >= -1);

    FUZZ_ASSERT(m->target != NULL && m->target_len >= 1);
    FUZZ_ASSERT(inside(m->target, m->target_len, buf, m->head_len));
    FUZZ_ASSERT(m->target_len <= max_url);
    for (size_t i = 0; i < m->target_len; i++) {
        unsigned char c = (unsigned char)m->target[i];
        FUZZ_ASSERT(c > 0x20 && c != 0x7f);
    }

    /* origin: where the origin-form part (path, then '?' query) starts. */
    if (m->target[0] == '/') {
        origin = 0;
    } else {
        size_t k = m->target_len >= 7 && strncasecmp(m->target, "http://", 7) == 0 ? 7
                 : m->target_len >= 8 && strncasecmp(m->target, "https://", 8) == 0 ? 8
                 : 0;

        FUZZ_ASSERT(k > 0);             /* absolute-form, http or https */
        origin = k;
        while (origin < m->target_len && m->target[origin] != '/' &&
               m->target[origin] != '?') {
            FUZZ_ASSERT(m->target[origin] != '@' && m->target[origin] != '#');
            origin++;
        }
        FUZZ_ASSERT(origin > k);        /* a non-empty authority */
    }
    FUZZ_ASSERT(m->path_len >= 1 && m->path[0] == '/');
    FUZZ_ASSERT(memchr(m->path, '?', m->path_len) == NULL);
    if (origin == m->target_len || m->target[origin] == '?') {
        FUZZ_ASSERT(m->path_len == 1);  /* empty path reads as "/" */
        pathlen = 0;
    } else {
        FUZZ_ASSERT(m->path == m->target + origin);
        FUZZ_ASSERT(m->path_len <= m->target_len - origin);
        pathlen = m->path_len;
    }
    if (m->query == NULL) {
        FUZZ_ASSERT(origin + pathlen == m->target_len);
        FUZZ_ASSERT(m->query_len == 0);
    } else {
        FUZZ_ASSERT(m->target[origin + pathlen] == '?');
        FUZZ_ASSERT(m->query == m->target + origin + pathlen + 1);
        FUZZ_ASSERT(origin + pathlen + 1 + m->query_len == m->target_len);
        FUZZ_ASSERT(inside(m->query, m->query_len, buf, m->head_len));
    }

    if (m->authorization != NULL) {
        FUZZ_ASSERT(inside(m->authorization, m->authorization_len, buf,
                           m->head_len));
        for (size_t i = 0; i < m->authorization_len; i++) {
            unsigned char c = (unsigned char)m->authorization[i];
            FUZZ_ASSERT(c != '\r' && c != '\n' && c != 0x7f &&
                        (c >= 0x20 || c == '\t'));
        }
        if (m->authorization_len > 0) {
            FUZZ_ASSERT(m->authorization[0] != ' ' && m->authorization[0] != '\t');
            FUZZ_ASSERT(m->authorization[m->authorization_len - 1] != ' ' &&
                        m->authorization[m->authorization_len - 1] != '\t');
        }
    } else {
        FUZZ_ASSERT(m->authorization_len == 0);
    }
}

static int
same_msg(const struct http_msg *a, const struct http_msg *b)
{
    return a->method == b->method && a->version_minor == b->version_minor &&
           a->target == b->target && a->target_len == b->target_len &&
           a->path == b->path && a->path_len == b->path_len &&
           a->query == b->query && a->query_len == b->query_len &&
           a->keep_alive == b->keep_alive && a->accept_json == b->accept_json &&
           a->chunked == b->chunked && a->content_length == b->content_length &&
           a->authorization == b->authorization &&
           a->authorization_len == b->authorization_len &&
           a->head_len == b->head_len;
}

static enum http_parse_result
parse_checked(const char *buf, size_t len, size_t max_head, size_t max_url,
              struct http_msg *m)
{
    enum http_parse_result r = http_parse_request(buf, len, max_head, max_url, m);

    FUZZ_ASSERT(r >= HTTP_PARSE_OK && r <= HTTP_PARSE_BAD_VERSION);
    if (r == HTTP_PARSE_INCOMPLETE)
        FUZZ_ASSERT(len < max_head);
    if (r == HTTP_PARSE_OK)
        check_ok(buf, len, max_head, max_url, m);
    return r;
}

/* The answer for the prefix buf[0..plen) against the whole input's. */
static void
check_prefix(const char *buf, size_t plen, size_t max_head, size_t max_url,
             enum http_parse_result full, const struct http_msg *fm)
{
    struct http_msg m;
    enum http_parse_result r = parse_checked(buf, plen, max_head, max_url, &m);

    if (r == HTTP_PARSE_INCOMPLETE)
        return;
    if (r != full) {
        fprintf(stderr, "fuzz_http_parse: prefix of %zu bytes gives %d, the "
                "whole input gives %d (max_head %zu, max_url %zu)\n", plen,
                (int)r, (int)full, max_head, max_url);
        abort();
    }
    if (r == HTTP_PARSE_OK)
        FUZZ_ASSERT(same_msg(&m, fm));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t max_head, max_url, len, step;
    struct http_msg fm;
    enum http_parse_result full;
    char *buf;

    if (size < 1)
        return 0;
    max_head = limits[data[0] % NLIMITS].max_head;
    max_url = limits[data[0] % NLIMITS].max_url;
    len = size - 1;
    /* Exactly len bytes on the heap: a read past the end is an ASan report. */
    buf = malloc(len ? len : 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data + 1, len);

    full = parse_checked(buf, len, max_head, max_url, &fm);

    /* Streaming: every prefix of short inputs, a sample of long ones plus
     * the lengths around the head's end and max_head. */
    step = len <= 512 ? 1 : len / 128;
    for (size_t plen = 0; plen < len; plen += step)
        check_prefix(buf, plen, max_head, max_url, full, &fm);
    if (full == HTTP_PARSE_OK) {
        check_prefix(buf, fm.head_len, max_head, max_url, full, &fm);
        check_prefix(buf, fm.head_len - 1, max_head, max_url, full, &fm);
    }
    if (max_head > 0 && max_head <= len) {
        check_prefix(buf, max_head, max_head, max_url, full, &fm);
        check_prefix(buf, max_head - 1, max_head, max_url, full, &fm);
    }

    free(buf);
    return 0;
}
