/* http_parse.c: the strict HTTP/1.x request-head parser (see http_parse.h).
 *
 * One forward pass over buf, never reading past min(len, max_head). Running
 * out of bytes gives INCOMPLETE, or HEADERS_TOO_LARGE once max_head bytes are
 * there; every byte is checked against the RFC 9112 grammar, so arbitrary
 * input ends in a definite result without reading out of bounds.
 */
#include <string.h>

#include "http_parse.h"

#define METHOD_MAX 32           /* longer method tokens are garbage */

/* RFC 9110 tchar. */
static int
parse_is_tchar(unsigned char ch)
{
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
        (ch >= '0' && ch <= '9'))
        return 1;
    switch (ch) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*':
    case '+': case '-': case '.': case '^': case '_': case '`': case '|':
    case '~':
        return 1;
    default:
        return 0;
    }
}

static int
parse_lower(unsigned char ch)
{
    return ch >= 'A' && ch <= 'Z' ? ch + ('a' - 'A') : ch;
}

/* Case-insensitive equality of p[0..n) with the lower-case literal s. */
static int
parse_ieq(const unsigned char *p, size_t n, const char *s)
{
    size_t i;

    if (strlen(s) != n)
        return 0;
    for (i = 0; i < n; i++)
        if (parse_lower(p[i]) != (unsigned char)s[i])
            return 0;
    return 1;
}

/* Does p[0..n) contain the lower-case literal s, ignoring case? */
static int
parse_icontains(const unsigned char *p, size_t n, const char *s)
{
    size_t m = strlen(s), i;

    for (i = 0; i + m <= n; i++)
        if (parse_ieq(p + i, m, s))
            return 1;
    return 0;
}

static enum http_method
parse_method(const unsigned char *p, size_t n)
{
    switch (n) {
    case 3:
        if (memcmp(p, "GET", 3) == 0)
            return HTTP_GET;
        if (memcmp(p, "PUT", 3) == 0)
            return HTTP_PUT;
        break;
    case 4:
        if (memcmp(p, "HEAD", 4) == 0)
            return HTTP_HEAD;
        if (memcmp(p, "POST", 4) == 0)
            return HTTP_POST;
        break;
    case 5:
        if (memcmp(p, "PATCH", 5) == 0)
            return HTTP_PATCH;
        break;
    case 6:
        if (memcmp(p, "DELETE", 6) == 0)
            return HTTP_DELETE;
        break;
    case 7:
        if (memcmp(p, "OPTIONS", 7) == 0)
            return HTTP_OPTIONS;
        break;
    }
    return HTTP_OTHER;
}

/* Connection: a comma list of tokens; sets *close / *keep. */
static void
parse_connection(const unsigned char *p, size_t n, int *close, int *keep)
{
    size_t i = 0, s, e;

    while (i < n) {
        while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == ','))
            i++;
        s = i;
        while (i < n && p[i] != ',')
            i++;
        e = i;
        while (e > s && (p[e - 1] == ' ' || p[e - 1] == '\t'))
            e--;
        if (parse_ieq(p + s, e - s, "close"))
            *close = 1;
        else if (parse_ieq(p + s, e - s, "keep-alive"))
            *keep = 1;
    }
}

/* Content-Length: 1DIGIT*, more than 18 digits saturate. 0 or -1. */
static int
parse_content_length(const unsigned char *p, size_t n, int64_t *out)
{
    int64_t v = 0;
    size_t i;

    if (n == 0)
        return -1;
    for (i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        if (i < 18)
            v = v * 10 + (p[i] - '0');
    }
    *out = n > 18 ? INT64_MAX : v;
    return 0;
}

/* An absolute-form target (RFC 9112 section 3.2.2): "http://" or "https://"
 * (scheme in any case), a non-empty authority without userinfo, then the
 * path and query. Returns the offset where the path (or '?', or the end)
 * starts, or -1. */
static long
absolute_origin(const char *t, size_t len)
{
    size_t k;

    const unsigned char *u = (const unsigned char *)t;

    if (len >= 7 && parse_ieq(u, 7, "http://"))
        k = 7;
    else if (len >= 8 && parse_ieq(u, 8, "https://"))
        k = 8;
    else
        return -1;
    if (k == len || t[k] == '/' || t[k] == '?')
        return -1;                  /* no host */
    for (; k < len && t[k] != '/' && t[k] != '?'; k++)
        if (t[k] == '@' || t[k] == '#')
            return -1;              /* userinfo, fragment */
    return (long)k;
}

enum http_parse_result
http_parse_request(const char *buf, size_t len, size_t max_head,
                   size_t max_url, struct http_msg *msg)
{
    const unsigned char *p = (const unsigned char *)buf;
    size_t lim = len < max_head ? len : max_head;
    size_t i = 0, s, ts, k, vs, ve;
    int major, minor, conn_close = 0, conn_keep = 0, hosts = 0;
    long origin;
    enum http_parse_result more;

    /* What running out of bytes means: wait, or the head is too big. */
    more = len >= max_head ? HTTP_PARSE_HEADERS_TOO_LARGE
                           : HTTP_PARSE_INCOMPLETE;

    memset(msg, 0, sizeof *msg);
    msg->content_length = -1;

    /* RFC 9112 2.2: ignore empty lines before the request line. */
    while (i < lim && (p[i] == '\r' || p[i] == '\n')) {
        if (p[i] == '\r') {
            if (i + 1 >= lim)
                return more;
            if (p[i + 1] != '\n')
                return HTTP_PARSE_BAD;
            i++;
        }
        i++;
    }

    /* method SP */
    s = i;
    while (i < lim && parse_is_tchar(p[i])) {
        if (i - s >= METHOD_MAX)
            return HTTP_PARSE_BAD;
        i++;
    }
    if (i >= lim)
        return more;
    if (i == s || p[i] != ' ')
        return HTTP_PARSE_BAD;
    msg->method = parse_method(p + s, i - s);
    i++;

    /* request-target SP */
    ts = i;
    while (i < lim && p[i] > 0x20 && p[i] != 0x7f) {
        if (i - ts >= max_url)
            return HTTP_PARSE_URI_TOO_LONG;
        i++;
    }
    if (i >= lim)
        return more;
    if (i == ts || p[i] != ' ')
        return HTTP_PARSE_BAD;
    msg->target = buf + ts;
    msg->target_len = i - ts;
    if (p[ts] == '/')
        origin = 0;
    else if ((origin = absolute_origin(msg->target, msg->target_len)) < 0)
        return HTTP_PARSE_BAD;
    i++;

    /* HTTP-version: "HTTP/" DIGIT "." DIGIT, then CRLF or LF */
    for (k = 0; k < 8; k++) {
        if (i + k >= lim)
            return more;
        if (k < 5 ? p[i + k] != (unsigned char)"HTTP/"[k]
                  : k == 6 ? p[i + k] != '.'
                           : (p[i + k] < '0' || p[i + k] > '9'))
            return HTTP_PARSE_BAD;
    }
    major = p[i + 5] - '0';
    minor = p[i + 7] - '0';
    i += 8;
    if (i >= lim)
        return more;
    if (p[i] == '\r') {
        if (i + 1 >= lim)
            return more;
        if (p[i + 1] != '\n')
            return HTTP_PARSE_BAD;
        i++;
    } else if (p[i] != '\n') {
        return HTTP_PARSE_BAD;
    }
    i++;
    if (major != 1)
        return HTTP_PARSE_BAD_VERSION;
    msg->version_minor = minor >= 1 ? 1 : 0;

    /* header fields, up to the empty line */
    for (;;) {
        if (i >= lim)
            return more;
        if (p[i] == '\r' || p[i] == '\n') {
            if (p[i] == '\r') {
                if (i + 1 >= lim)
                    return more;
                if (p[i + 1] != '\n')
                    return HTTP_PARSE_BAD;
                i++;
            }
            i++;
            break;
        }

        /* field-name ":" (no obs-fold, no whitespace before the colon) */
        s = i;
        while (i < lim && parse_is_tchar(p[i]))
            i++;
        if (i >= lim)
            return more;
        if (i == s || p[i] != ':')
            return HTTP_PARSE_BAD;
        k = i - s;
        i++;

        /* OWS field-value OWS line-end */
        while (i < lim && (p[i] == ' ' || p[i] == '\t'))
            i++;
        vs = i;
        while (i < lim && p[i] != '\r' && p[i] != '\n') {
            if ((p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7f)
                return HTTP_PARSE_BAD;
            i++;
        }
        if (i >= lim)
            return more;
        ve = i;
        while (ve > vs && (p[ve - 1] == ' ' || p[ve - 1] == '\t'))
            ve--;
        if (p[i] == '\r') {
            if (i + 1 >= lim)
                return more;
            if (p[i + 1] != '\n')
                return HTTP_PARSE_BAD;
            i++;
        }
        i++;

        switch (k) {
        case 4:
            if (parse_ieq(p + s, k, "host") && ++hosts > 1)
                return HTTP_PARSE_BAD;
            break;
        case 6:
            if (parse_ieq(p + s, k, "accept") &&
                parse_icontains(p + vs, ve - vs, "application/json"))
                msg->accept_json = 1;
            break;
        case 10:
            if (parse_ieq(p + s, k, "connection"))
                parse_connection(p + vs, ve - vs, &conn_close, &conn_keep);
            break;
        case 13:
            if (parse_ieq(p + s, k, "authorization")) {
                if (msg->authorization != NULL)
                    return HTTP_PARSE_BAD;
                msg->authorization = buf + vs;
                msg->authorization_len = ve - vs;
            }
            break;
        case 14:
            if (parse_ieq(p + s, k, "content-length")) {
                int64_t cl;

                if (parse_content_length(p + vs, ve - vs, &cl) < 0)
                    return HTTP_PARSE_BAD;
                if (msg->content_length >= 0 && msg->content_length != cl)
                    return HTTP_PARSE_BAD;
                msg->content_length = cl;
            }
            break;
        case 17:
            if (parse_ieq(p + s, k, "transfer-encoding"))
                msg->chunked = 1;
            break;
        }
    }

    if (msg->version_minor >= 1)
        msg->keep_alive = !conn_close;
    else
        msg->keep_alive = conn_keep && !conn_close;

    msg->path = msg->target + origin;
    msg->path_len = msg->target_len - (size_t)origin;
    for (k = (size_t)origin; k < msg->target_len; k++) {
        if (msg->target[k] == '?') {
            msg->path_len = k - (size_t)origin;
            msg->query = msg->target + k + 1;
            msg->query_len = msg->target_len - k - 1;
            break;
        }
    }
    if (msg->path_len == 0) {
        /* "http://host" or "http://host?q": the path is "/" (RFC 9112
         * section 3.2.2). */
        msg->path = "/";
        msg->path_len = 1;
    }
    msg->head_len = i;
    return HTTP_PARSE_OK;
}

enum http_method
http_method_parse(const char *p, size_t n)
{
    return parse_method((const unsigned char *)p, n);
}

int
http_accept_json(const char *p, size_t n)
{
    return parse_icontains((const unsigned char *)p, n, "application/json");
}

const char *
http_method_name(enum http_method m)
{
    switch (m) {
    case HTTP_GET:     return "GET";
    case HTTP_HEAD:    return "HEAD";
    case HTTP_POST:    return "POST";
    case HTTP_PUT:     return "PUT";
    case HTTP_DELETE:  return "DELETE";
    case HTTP_OPTIONS: return "OPTIONS";
    case HTTP_PATCH:   return "PATCH";
    default:           return "OTHER";
    }
}
