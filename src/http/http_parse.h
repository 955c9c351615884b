/* http_parse.h: a small, strict HTTP/1.x request-head parser.
 *
 * Pure: no allocation, no I/O, no global state; the result points into the
 * caller's buffer. Safe on any bytes (a libFuzzer target drives it).
 */
#ifndef LEAFD_HTTP_PARSE_H
#define LEAFD_HTTP_PARSE_H

#include <stddef.h>
#include <stdint.h>

enum http_method { HTTP_GET, HTTP_HEAD, HTTP_POST, HTTP_PUT, HTTP_DELETE,
                   HTTP_OPTIONS, HTTP_PATCH, HTTP_OTHER };

struct http_msg {
    enum http_method method;
    int         version_minor;     /* 0 or 1 (HTTP/1.0, HTTP/1.1) */
    const char *target;  size_t target_len;  /* raw request target */
    const char *path;    size_t path_len;    /* target up to '?', raw */
    const char *query;   size_t query_len;   /* after '?', raw; NULL if none */
    int         keep_alive;        /* after Connection + version rules */
    int         accept_json;       /* Accept mentions application/json */
    int         chunked;           /* any Transfer-Encoding (chunked or other):
                                      such a body cannot be framed here, so
                                      http_conn.c answers 400 and closes */
    int64_t     content_length;    /* -1 if absent */
    const char *authorization; size_t authorization_len;  /* header value or NULL */
    size_t      head_len;          /* bytes of request line + headers + CRLFCRLF */
};

enum http_parse_result {
    HTTP_PARSE_OK = 0,        /* msg filled; the head is head_len bytes */
    HTTP_PARSE_INCOMPLETE,    /* need more bytes */
    HTTP_PARSE_BAD,           /* malformed: answer 400 and close */
    HTTP_PARSE_URI_TOO_LONG,  /* target over max_url: 414 and close */
    HTTP_PARSE_HEADERS_TOO_LARGE, /* head over max_head: 431 and close */
    HTTP_PARSE_BAD_VERSION,   /* not HTTP/1.x: 505 and close */
};

/* Parse the request head at buf[0..len). max_head bounds the whole head,
 * max_url the target; INCOMPLETE is only returned while len < max_head.
 * URI_TOO_LONG may come before the head is complete. On OK, msg points into
 * buf; on any other result msg's contents are unspecified.
 *
 * Accepted: optional empty lines before the request line; CRLF or bare LF
 * line ends; methods are case-sensitive tokens; the target starts with '/'
 * and has no byte < 0x21 or 0x7f; versions HTTP/1.0 and HTTP/1.1 (HTTP/1.2+
 * counts as 1.1; any other HTTP/d.d is BAD_VERSION). Rejected as BAD:
 * obs-fold, whitespace before ':', control bytes in values, a non-digit or
 * conflicting Content-Length, a second Host or Authorization. Host is not
 * required. A Content-Length of more than 18 digits reads as INT64_MAX. */
enum http_parse_result http_parse_request(const char *buf, size_t len,
                                          size_t max_head, size_t max_url,
                                          struct http_msg *msg);

const char *http_method_name(enum http_method m);
/* The method token p[0..n) (case-sensitive), HTTP_OTHER when unknown; and
 * whether an Accept value mentions application/json, as the parser decides
 * accept_json (HTTP/2 requests come with their headers split already). */
enum http_method http_method_parse(const char *p, size_t n);
int http_accept_json(const char *p, size_t n);

#endif
