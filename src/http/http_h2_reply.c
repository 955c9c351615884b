/* http_h2_reply.c: the answers of HTTP/2 streams (see http_h2.c): h2c
 * responses from http_reply, gRPC responses (HEADERS, one DATA frame,
 * trailers) from http_reply_grpc, trailers-only gRPC answers, and the
 * errors the layer answers itself. An answer is submitted to the nghttp2
 * session; http_h2.c moves the session's output to the connection.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "grpc_frame.h"
#include "http.h"
#include "http_internal.h"
#include "http_h2_internal.h"
#include "log.h"
#include "util.h"

static nghttp2_nv
h2_nv(const char *name, const char *value)
{
    return (nghttp2_nv){ (uint8_t *)name, (uint8_t *)value, strlen(name),
                         strlen(value), NGHTTP2_NV_FLAG_NONE };
}

static ssize_t
h2_read_answer(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
               uint32_t *flags, nghttp2_data_source *src, void *arg)
{
    struct h2_stream *st = src->ptr;
    size_t n = st->out_len - st->out_off;

    (void)arg;
    if (n > length)
        n = length;
    memcpy(buf, st->out + st->out_off, n);
    st->out_off += n;
    if (st->out_off < st->out_len)
        return (ssize_t)n;
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (st->trailers) {
        char code[12];
        nghttp2_nv tv[2];
        size_t nt = 1;

        *util_u64_dec(code, (uint64_t)st->grpc_status) = '\0';
        tv[0] = h2_nv("grpc-status", code);
        if (st->grpc_msg != NULL)
            tv[nt++] = h2_nv("grpc-message", st->grpc_msg);
        if (nghttp2_submit_trailer(ng, id, tv, nt) == 0)
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
    return (ssize_t)n;
}

/* Submit the stream's answer: headers nv[0..n), then st->out (if any, or
 * if trailers follow). The stream must not be answered yet. */
static void
h2_submit(struct http_h2 *h2, struct h2_stream *st, nghttp2_nv *nv, size_t n,
          int with_data)
{
    nghttp2_data_provider prd;
    int rv;

    assert(!st->answered);
    st->answered = 1;
    if (st->handed) {
        st->handed = 0;
        h2->busy--;
    }
    prd.source.ptr = st;
    prd.read_callback = h2_read_answer;
    rv = nghttp2_submit_response(h2->ng, st->id, nv, n,
                                 with_data ? &prd : NULL);
    if (rv != 0)
        log_warn("nghttp2_submit_response stream %d: %s", st->id,
                 nghttp2_strerror(rv));
}

/* A gRPC answer with no message: HEADERS carrying grpc-status (and
 * grpc-message), ending the stream. */
static void
h2_grpc_trailers_only(struct http_h2 *h2, struct h2_stream *st, int http_status,
                      int grpc_status, const char *message)
{
    char status[12], code[12], msg[H2_GRPC_MSG_MAX];
    nghttp2_nv nv[5];
    size_t n = 0;

    *util_u64_dec(status, (uint64_t)http_status) = '\0';
    *util_u64_dec(code, (uint64_t)grpc_status) = '\0';
    nv[n++] = h2_nv(":status", status);
    nv[n++] = h2_nv("content-type", "application/grpc");
    nv[n++] = h2_nv("grpc-status", code);
    if (message != NULL) {
        grpc_message_encode(msg, sizeof msg, message);
        nv[n++] = h2_nv("grpc-message", msg);
    }
    if (grpc_status == GRPC_UNIMPLEMENTED)
        nv[n++] = h2_nv("grpc-accept-encoding", "identity");
    h2_submit(h2, st, nv, n, 0);
}

/* An h2c answer; body (copied) unless HEAD or a bodiless status. */
static void
h2_http_answer(struct http_h2 *h2, struct h2_stream *st, int status,
               const char *content_type, const char *extra, const char *body,
               size_t len)
{
    char sbuf[12], lbuf[24], xbuf[H2_EXTRA_BYTES];
    nghttp2_nv nv[3 + H2_MAX_EXTRA];
    size_t n = 0, xlen;
    int no_body = status < 200 || status == 204 || status == 304;
    char *p, *end, *colon, *v;

    if (status < 100 || status > 999)
        status = 500;
    *util_u64_dec(sbuf, (uint64_t)status) = '\0';
    nv[n++] = h2_nv(":status", sbuf);
    if (content_type != NULL)
        nv[n++] = h2_nv("content-type", content_type);
    if (!no_body) {
        *util_u64_dec(lbuf, len) = '\0';
        nv[n++] = h2_nv("content-length", lbuf);
    }
    /* Extra header lines, "Name: value\r\n" each: names lowercased, and
     * HTTP/1.1's connection-specific ones left out (RFC 9113 8.2.2). */
    xlen = extra != NULL ? strlen(extra) : 0;
    if (xlen >= sizeof xbuf) {
        log_error("h2: %zu bytes of extra headers, over %d: dropped", xlen,
                  H2_EXTRA_BYTES);
        xlen = 0;
    }
    memcpy(xbuf, extra != NULL ? extra : "", xlen);
    xbuf[xlen] = '\0';
    for (p = xbuf; *p != '\0' && n < 3 + H2_MAX_EXTRA; p = end) {
        end = strchr(p, '\n');
        end = end != NULL ? end + 1 : p + strlen(p);
        colon = memchr(p, ':', (size_t)(end - p));
        if (colon == NULL || colon == p)
            continue;
        *colon = '\0';
        for (char *q = p; q < colon; q++)
            if (*q >= 'A' && *q <= 'Z')
                *q = (char)(*q - 'A' + 'a');
        for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
            ;
        for (char *e = end; e > v && (e[-1] == '\n' || e[-1] == '\r' ||
                                      e[-1] == '\0'); e--)
            e[-1] = '\0';
        if (strcmp(p, "connection") == 0 || strcmp(p, "keep-alive") == 0 ||
            strcmp(p, "proxy-connection") == 0 ||
            strcmp(p, "transfer-encoding") == 0 || strcmp(p, "upgrade") == 0 ||
            strcmp(p, "content-length") == 0)
            continue;
        nv[n++] = h2_nv(p, v);
    }
    if (!no_body && st->method != HTTP_HEAD && len > 0) {
        st->out = xmalloc(len);
        memcpy(st->out, body, len);
        st->out_len = len;
        h2_submit(h2, st, nv, n, 1);
    } else {
        h2_submit(h2, st, nv, n, 0);
    }
}

/* A JSON error the layer answers itself (h2c), or its gRPC form. */
static void
h2_error_answer(struct http_h2 *h2, struct h2_stream *st, int status,
                int grpc_status, const char *code, const char *message)
{
    char body[256];
    int n;

    if (h2->grpc) {
        h2_grpc_trailers_only(h2, st, status, grpc_status, message);
        return;
    }
    n = snprintf(body, sizeof body, "{\"error\":\"%s\",\"message\":\"%s\"}",
                 code, message);
    if (n < 0 || (size_t)n >= sizeof body)
        n = 0;
    h2_http_answer(h2, st, status, "application/json", NULL, body, (size_t)n);
}

void
http_h2_refuse(struct http_h2 *h2, struct h2_stream *st, int status,
               int grpc_status, const char *code, const char *message)
{
    /* A queued stream has ended: no more frames can refuse it. */
    assert(!st->queued);
    if (st->answered)
        return;
    h2_error_answer(h2, st, status, grpc_status, code, message);
    /* RFC 9113 8.1: answered before the request ended, the stream is reset
     * with NO_ERROR once the answer is out (http_h2.c: a reset submitted
     * now would go first, and nghttp2 would drop the answer). */
    st->reset_after = !st->ended;
}

/* The gRPC status for an HTTP status, as gRPC clients map them
 * (doc/http-grpc-status-mapping.md), with 500 as INTERNAL. */
static int
h2_grpc_of_http(int status)
{
    switch (status) {
    case 400: case 500: return GRPC_INTERNAL;
    case 401: return GRPC_UNAUTHENTICATED;
    case 403: return GRPC_PERMISSION_DENIED;
    case 404: return GRPC_UNIMPLEMENTED;
    case 413: case 431: return GRPC_RESOURCE_EXHAUSTED;
    case 429: case 502: case 503: case 504: return GRPC_UNAVAILABLE;
    default: return GRPC_UNKNOWN;
    }
}

void
http_h2_reply(struct http_conn *c, int status, const char *content_type,
              const char *extra_headers, const char *body, size_t len)
{
    struct http_h2 *h2 = c->h2;
    struct h2_stream *st = c->h2st;
    char msg[256];

    assert(st != NULL && c->owner != NULL && c->req_active);
    if (h2->grpc) {
        /* A handler that answers a gRPC call the HTTP way: its status, as
         * a gRPC status, and its body as the message. */
        if (status < 300)
            log_error("h2: an HTTP %d answer to the gRPC call %.*s", status,
                      (int)c->req.msg.path_len, c->req.msg.path);
        snprintf(msg, sizeof msg, "%.*s", (int)(len < 255 ? len : 255),
                 body != NULL ? body : "");
        h2_grpc_trailers_only(h2, st, 200, status < 300 ? GRPC_INTERNAL
                                                      : h2_grpc_of_http(status),
                              msg);
        return;
    }
    h2_http_answer(h2, st, status, content_type, extra_headers, body, len);
}

void
http_h2_error(struct http_conn *c, int status, const char *code,
              const char *message)
{
    struct http_h2 *h2 = c->h2;
    struct h2_stream *st = c->h2st;

    if (st == NULL || !c->req_active) {
        log_error("h2: error %d (%s) with no request", status, message);
        return;
    }
    h2_error_answer(h2, st, status, h2_grpc_of_http(status), code, message);
}

void
http_reply_grpc(struct http_conn *c, int grpc_status, const char *grpc_message,
                const void *msg, size_t len)
{
    struct http_h2 *h2 = c->h2;
    struct h2_stream *st;
    nghttp2_nv nv[2];
    size_t enc;

    if (!c->req_active || !c->in_handler) {
        log_error("http_reply_grpc outside the handler of a live request");
        return;
    }
    if (h2 == NULL || !h2->grpc) {
        log_error("http_reply_grpc on a request that is not a gRPC call");
        http_out_error(c, 500, "internal", "internal error: a gRPC answer to "
                       "an HTTP request");
        http_conn_end_request(c);
        return;
    }
    st = c->h2st;
    assert(st != NULL && c->owner != NULL);
    if (msg == NULL || len > UINT32_MAX) {
        if (msg != NULL) {
            log_error("http_reply_grpc: a %zu-byte message", len);
            grpc_status = GRPC_INTERNAL;
            grpc_message = "answer too large";
        }
        h2_grpc_trailers_only(h2, st, 200, grpc_status, grpc_message);
        http_conn_end_request(c);
        return;
    }
    /* One allocation: prefix, message, then the encoded grpc-message. */
    st->out = xmalloc(GRPC_FRAME_PREFIX + len + H2_GRPC_MSG_MAX);
    grpc_frame_prefix((unsigned char *)st->out, len);
    memcpy(st->out + GRPC_FRAME_PREFIX, msg, len);
    st->out_len = GRPC_FRAME_PREFIX + len;
    st->trailers = 1;
    st->grpc_status = grpc_status;
    if (grpc_message != NULL) {
        enc = st->out_len;
        grpc_message_encode(st->out + enc, H2_GRPC_MSG_MAX, grpc_message);
        st->grpc_msg = st->out + enc;
    }
    nv[0] = h2_nv(":status", "200");
    nv[1] = h2_nv("content-type", "application/grpc");
    h2_submit(h2, st, nv, 2, 1);
    http_conn_end_request(c);
}
