/* http_out.c: the output side of a connection (see http_internal.h): the
 * per-thread buffer pools, status lines, whole HTTP responses and raw RESP
 * bytes appended to a connection's output buffer, the errors the layer
 * answers itself, and the fixed 503 at the connection cap. Sending is
 * http_conn.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http.h"
#include "http_internal.h"
#include "log.h"
#include "util.h"

void *
http_pool_get(struct http_pool *pool, size_t size)
{
    void *b = pool->head;

    if (b == NULL)
        return xmalloc(size);
    memcpy(&pool->head, b, sizeof(void *));
    pool->n--;
    return b;
}

void
http_pool_put(struct http_pool *pool, void *b)
{
    if (pool->n >= HTTP_POOL_MAX) {
        free(b);
        return;
    }
    memcpy(b, &pool->head, sizeof(void *));
    pool->head = b;
    pool->n++;
}

void
http_pool_drain(struct http_pool *pool)
{
    void *b;

    while ((b = pool->head) != NULL) {
        memcpy(&pool->head, b, sizeof(void *));
        free(b);
    }
    pool->n = 0;
}

/* ---- status lines ---- */

#define HTTP_STATUS_LIST \
    X(100, "Continue") X(200, "OK") X(201, "Created") X(202, "Accepted") \
    X(204, "No Content") X(301, "Moved Permanently") X(302, "Found") \
    X(304, "Not Modified") X(400, "Bad Request") X(401, "Unauthorized") \
    X(403, "Forbidden") X(404, "Not Found") X(405, "Method Not Allowed") \
    X(408, "Request Timeout") X(409, "Conflict") X(411, "Length Required") \
    X(413, "Content Too Large") X(414, "URI Too Long") \
    X(415, "Unsupported Media Type") X(422, "Unprocessable Content") \
    X(429, "Too Many Requests") X(431, "Request Header Fields Too Large") \
    X(500, "Internal Server Error") X(501, "Not Implemented") \
    X(502, "Bad Gateway") X(503, "Service Unavailable") \
    X(504, "Gateway Timeout") X(505, "HTTP Version Not Supported")

/* Writes "HTTP/1.1 <code> <text>\r\n" at p; returns the end. */
char *
http_status_line(char *p, int status)
{
    const char *s;
    size_t n;

    switch (status) {
#define X(code, text) \
    case code: \
        s = "HTTP/1.1 " #code " " text "\r\n"; \
        n = sizeof("HTTP/1.1 " #code " " text "\r\n") - 1; \
        break;
    HTTP_STATUS_LIST
#undef X
    default:
        if (status < 100 || status > 999)
            status = 500;
        memcpy(p, "HTTP/1.1 ", 9);
        p[9] = (char)('0' + status / 100);
        p[10] = (char)('0' + status / 10 % 10);
        p[11] = (char)('0' + status % 10);
        memcpy(p + 12, " Unknown\r\n", 10);
        return p + 22;
    }
    memcpy(p, s, n);
    return p + n;
}

/* Room for need more bytes in the output buffer. */
void
http_out_reserve(struct http_conn *c, size_t need)
{
    struct http_thread *t = c->t;
    size_t cap;
    char *p;

    if (c->out == NULL) {
        c->out = http_pool_get(&t->outpool, HTTP_OUT_CAP);
        c->out_cap = HTTP_OUT_CAP;
        c->out_off = c->out_len = 0;
    }
    if (c->out_len + need > c->out_cap) {
        cap = c->out_cap * 2;
        if (cap < c->out_len + need)
            cap = c->out_len + need;
        if (c->out_cap == HTTP_OUT_CAP) {
            p = xmalloc(cap);
            memcpy(p, c->out, c->out_len);
            http_pool_put(&t->outpool, c->out);
            c->out = p;
        } else {
            c->out = xrealloc(c->out, cap);
        }
        c->out_cap = cap;
    }
}

/* Append a whole response to the output buffer. */
void
http_out_respond(struct http_conn *c, int status, const char *content_type,
             const char *extra_headers, const char *body, size_t len,
             int head_only, int close)
{
    size_t ctlen = content_type != NULL ? strlen(content_type) : 0;
    size_t exlen = extra_headers != NULL ? strlen(extra_headers) : 0;
    int no_body = status < 200 || status == 204 || status == 304;
    char *p;

    http_out_reserve(c, 32 + 64 + 16 + ctlen + 40 + 28 + exlen + 2 + len);
    p = http_status_line(c->out + c->out_len, status);
    if (content_type != NULL) {
        memcpy(p, "Content-Type: ", 14);
        memcpy(p + 14, content_type, ctlen);
        p += 14 + ctlen;
        *p++ = '\r';
        *p++ = '\n';
    }
    if (!no_body) {
        memcpy(p, "Content-Length: ", 16);
        p = util_u64_dec(p + 16, len);
        *p++ = '\r';
        *p++ = '\n';
    }
    if (close) {
        memcpy(p, "Connection: close\r\n", 19);
        p += 19;
        c->closing = 1;
    } else if (c->req.msg.version_minor == 0) {
        memcpy(p, "Connection: keep-alive\r\n", 24);
        p += 24;
    }
    if (exlen > 0) {
        memcpy(p, extra_headers, exlen);
        p += exlen;
    }
    *p++ = '\r';
    *p++ = '\n';
    if (!head_only && !no_body && len > 0) {
        memcpy(p, body, len);
        p += len;
    }
    c->out_len = (size_t)(p - c->out);
}

/* Append raw bytes to the output buffer (RESP answers). */
void
http_out_append(struct http_conn *c, const char *data, size_t len)
{
    http_out_reserve(c, len);
    memcpy(c->out + c->out_len, data, len);
    c->out_len += len;
}

void
http_out_mc_bin_error(struct http_conn *c, uint16_t status, const char *code,
                      const char *message)
{
    unsigned char out[MC_BIN_HEADER + 256];
    uint8_t opcode = 0;
    uint32_t opaque = 0;
    int n;

    c->closing = 1;
    if (status == 0)
        return;
    if (c->req_active || c->body_left > 0) {
        /* the frame answered now, or the refused one whose body is skipped */
        opcode = c->mc->cmd.opcode;
        opaque = c->mc->cmd.opaque;
    } else if (c->in != NULL && c->in_len - c->in_off >= 2) {
        /* the frame not yet whole at the input's start */
        const unsigned char *in = (const unsigned char *)c->in + c->in_off;

        if (in[0] == MC_BIN_REQ_MAGIC)
            opcode = in[1];
        if (in[0] == MC_BIN_REQ_MAGIC && c->in_len - c->in_off >= 16)
            opaque = (uint32_t)in[12] << 24 | (uint32_t)in[13] << 16 |
                     (uint32_t)in[14] << 8 | in[15];
    }
    n = snprintf((char *)out + MC_BIN_HEADER, sizeof out - MC_BIN_HEADER,
                 "%s: %s", code, message);
    if (n < 0 || (size_t)n >= sizeof out - MC_BIN_HEADER)
        n = 0;
    mc_bin_header(out, opcode, opaque, status, 0, 0, (uint32_t)n, 0);
    http_out_append(c, (const char *)out, MC_BIN_HEADER + (size_t)n);
}

/* An error the layer answers itself, then close: a JSON body over HTTP, a
 * RESP error ("-ERR <message>") over RESP, over memcached CLIENT_ERROR (a
 * 4xx) or SERVER_ERROR <message>, or a binary memcached error frame. */
void
http_out_error(struct http_conn *c, int status, const char *code,
           const char *message)
{
    char body[256];
    int n;

    if (c->h2 != NULL) {
        http_h2_error(c, status, code, message);
        return;
    }
    if (c->resp != NULL) {
        n = snprintf(body, sizeof body, "-ERR %s\r\n", message);
        if (n < 0 || (size_t)n >= sizeof body)
            n = 0;
        http_out_append(c, body, (size_t)n);
        c->closing = 1;
        return;
    }
    if (c->mc != NULL && c->mc->mode == HTTP_MC_BINARY) {
        http_out_mc_bin_error(c, status == 413 ? MC_BIN_E2BIG
                              : status < 500 ? MC_BIN_EINVAL
                              : status == 503 ? MC_BIN_ETMPFAIL
                              : MC_BIN_EINTERNAL, code, message);
        return;
    }
    if (c->mc != NULL) {
        n = snprintf(body, sizeof body, "%s %s\r\n", status < 500 ?
                     "CLIENT_ERROR" : "SERVER_ERROR", message);
        if (n < 0 || (size_t)n >= sizeof body)
            n = 0;
        http_out_append(c, body, (size_t)n);
        c->closing = 1;
        return;
    }

    n = snprintf(body, sizeof body, "{\"error\":\"%s\",\"message\":\"%s\"}",
                 code, message);
    if (n < 0 || (size_t)n >= sizeof body)
        n = 0;
    http_out_respond(c, status, "application/json", NULL, body, (size_t)n, 0, 1);
}

void
http_out_parse_error(struct http_conn *c, enum http_parse_result r)
{
    switch (r) {
    case HTTP_PARSE_URI_TOO_LONG:
        http_out_error(c, 414, "uri_too_long", "request target too long");
        break;
    case HTTP_PARSE_HEADERS_TOO_LARGE:
        http_out_error(c, 431, "headers_too_large", "request head too large");
        break;
    case HTTP_PARSE_BAD_VERSION:
        http_out_error(c, 505, "version_not_supported", "only HTTP/1.0 and "
                   "HTTP/1.1 are supported");
        break;
    default:
        http_out_error(c, 400, "bad_request", "malformed request");
        break;
    }
}

/* Over max_connections: one non-blocking send of a fixed 503, then close at
 * once, so a flood holds no descriptor past this call and no memory. */
void
http_conn_reject(struct http_thread *t, int fd, enum http_proto proto,
                 int tls)
{
    static const char resp_msg[] = "-ERR max number of clients reached\r\n";
    static const char mc_msg[] = "SERVER_ERROR too many open connections\r\n";
#define HTTP_REJECT_BODY \
    "{\"error\":\"too_many_connections\",\"message\":\"connection limit reached\"}\n"
    static const char msg[] =
        "HTTP/1.1 503 Service Unavailable\r\n"
        "Content-Type: application/json\r\n"
        "Content-Length: 70\r\n"
        "Connection: close\r\n"
        "Retry-After: 1\r\n"
        "\r\n" HTTP_REJECT_BODY;
    ssize_t n;

    _Static_assert(sizeof HTTP_REJECT_BODY - 1 == 70, "Content-Length");
    ctr_add(&t->rejected, 1);
    if (tls || proto == HTTP_PROTO_GRPC)
        n = 0;          /* TLS: no handshake spent on a refusal; gRPC: HTTP/2
                           only, no bytes a client reads */
    else if (proto == HTTP_PROTO_RESP)
        n = send(fd, resp_msg, sizeof resp_msg - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    else if (proto == HTTP_PROTO_MC)
        n = send(fd, mc_msg, sizeof mc_msg - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    else
        n = send(fd, msg, sizeof msg - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n;
    close(fd);
}

/* The answers a handler gives (http.h): written here, then the request
 * ends (http_conn.c). */
void
http_reply(struct http_conn *c, int status, const char *content_type,
           const char *extra_headers, const char *body, size_t len)
{
    const struct http_msg *msg = &c->req.msg;

    if (!c->req_active || !c->in_handler) {
        log_error("http_reply(%d) outside the handler of a live request",
                  status);
        return;
    }
    if (c->resp != NULL || c->mc != NULL) {
        log_error("http_reply(%d) on a RESP or memcached connection", status);
        http_out_error(c, 500, "internal", "internal error: an HTTP answer to a "
                   "RESP command");
        http_conn_end_request(c);
        return;
    }
    if (c->h2 != NULL) {
        http_h2_reply(c, status, content_type, extra_headers, body, len);
        http_conn_end_request(c);
        return;
    }
    http_out_respond(c, status, content_type, extra_headers, body, len,
                 msg->method == HTTP_HEAD,
                 !msg->keep_alive || c->t->stopping || c->eof);
    http_conn_end_request(c);
}

void
http_reply_resp(struct http_conn *c, const char *data, size_t len,
                int close_after)
{
    if (!c->req_active || !c->in_handler || c->resp == NULL) {
        log_error("http_reply_resp outside the handler of a live RESP command");
        return;
    }
    http_out_append(c, data, len);
    if (close_after || c->t->stopping)
        c->closing = 1;
    http_conn_end_request(c);
}
