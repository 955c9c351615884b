/* http_h2.c: HTTP/2 connections on libnghttp2's server session: h2c with
 * prior knowledge on the HTTP port, and every connection of the gRPC port
 * (see http.h; the connection around the session is http_conn.c's).
 *
 * DESIGN
 *
 * One session per connection, on the connection's I/O thread, fed from the
 * connection's input buffer (nghttp2_session_mem_recv) and drained into its
 * output buffer (nghttp2_session_mem_send), so reading, sending, deadlines,
 * the output high-water mark and closing stay http_conn.c's. The session's
 * output is taken only while the unsent output is under HTTP_OUT_HIGH, and
 * input is fed only then: a client that never reads stops being read, and
 * the slow-reader deadline closes it, as on HTTP/1.1.
 *
 * Streams. A stream's request is complete at END_STREAM; it then joins the
 * connection's ready queue. Complete requests are handed to the handler one
 * at a time, in the order they completed, through the connection's single
 * struct http_request (c->req), exactly like pipelined HTTP/1.1 requests: a
 * parked stream holds back the ready ones behind it, while the session goes
 * on reading frames (and answering the ones the layer refuses itself). What
 * a request points to (:path, authorization, the gRPC message) is copied
 * into its stream, so the input buffer is always consumed whole. A stream
 * the client resets is dropped: unqueued, or, when it is the parked
 * request, unparked without calling the handler again.
 *
 * Limits. The session advertises SETTINGS_MAX_CONCURRENT_STREAMS
 * (h2_max_concurrent_streams) and SETTINGS_MAX_HEADER_LIST_SIZE
 * (max_header_bytes), and enforces both: more streams are refused by
 * nghttp2, a bigger header list gets 431 (gRPC: RESOURCE_EXHAUSTED). An h2c
 * request body is counted and dropped (over max_body_bytes: 413). A gRPC
 * message is buffered up to grpc_max_message_bytes (its prefix announcing
 * more: RESOURCE_EXHAUSTED at once), and the gRPC bodies buffered on one
 * connection never pass 2 x (grpc_max_message_bytes + 5); a stream that
 * would pass it gets RESOURCE_EXHAUSTED. A stream answered before its
 * request ended is reset by nghttp2 (RST_STREAM NO_ERROR) once the answer
 * is sent, and its further DATA is dropped. Flow-control windows are
 * nghttp2's (65535 per stream; WINDOW_UPDATE as data is consumed). An
 * answer the client's window holds back stays in its stream; streams are
 * capped, so that is bounded too.
 *
 * Stop. http_h2_stop submits GOAWAY (last stream: the last one the session
 * processed); the streams below it are still read, handed out and
 * answered; the connection closes when the session wants neither to read
 * nor to write.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "grpc_frame.h"
#include "http.h"
#include "http_internal.h"
#include "log.h"
#include "util.h"

#define H2_PREFACE       "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define H2_PREFACE_LEN   (sizeof H2_PREFACE - 1)
#define H2_MAX_EXTRA     16      /* extra header lines of one answer */
#define H2_EXTRA_BYTES   2048    /* and their bytes */
#define H2_GRPC_MSG_MAX  1024    /* grpc-message, encoded */

/* gRPC status codes the transport uses. */
enum { GRPC_OK = 0, GRPC_UNKNOWN = 2, GRPC_INVALID_ARGUMENT = 3,
       GRPC_PERMISSION_DENIED = 7, GRPC_RESOURCE_EXHAUSTED = 8,
       GRPC_UNIMPLEMENTED = 12, GRPC_INTERNAL = 13, GRPC_UNAVAILABLE = 14,
       GRPC_UNAUTHENTICATED = 16 };

struct h2_stream {
    int32_t           id;
    struct h2_stream *prev, *next;      /* h2->streams: every open stream */
    struct h2_stream *qnext;            /* h2->ready, oldest first */
    unsigned char     queued;           /* on h2->ready */
    unsigned char     answered;         /* a response is submitted */
    unsigned char     have_path, have_auth, accept_json;
    unsigned char     grpc_ct, post;    /* content-type application/grpc*; POST */
    enum http_method  method;
    /* The first error found in the headers, answered at their end. */
    int               err_status, err_grpc;
    const char       *err_code, *err_msg;
    size_t            hdr_bytes;        /* header list size (RFC 9113 6.5.2) */
    char             *hbuf;             /* :path, then authorization */
    size_t            hlen, path_len, auth_off, auth_len;
    int64_t           content_length;   /* -1: none */
    int64_t           timeout_us;       /* grpc-timeout; 0: none */
    unsigned char    *body;             /* gRPC: the framed request */
    size_t            body_len, body_cap;
    uint64_t          dropped;          /* h2c: body bytes dropped */
    /* The answer: DATA bytes, then (gRPC) trailers. */
    char             *out;
    size_t            out_len, out_off;
    int               trailers;
    int               grpc_status;
    const char       *grpc_msg;         /* in out, past the data; or NULL */
};

struct http_h2 {
    nghttp2_session  *ng;
    struct http_conn *c;
    struct h2_stream *streams;
    struct h2_stream *ready, *ready_tail;
    struct h2_stream *cur;              /* the stream c->req is, or NULL */
    size_t            buffered;         /* gRPC body bytes held */
    int               grpc;             /* the gRPC port */
    int               goaway;           /* GOAWAY submitted */
};

static nghttp2_session_callbacks *h2_callbacks;
static nghttp2_option *h2_option;
static pthread_once_t h2_once = PTHREAD_ONCE_INIT;

int
http_h2_preface(const char *buf, size_t len)
{
    size_t n = len < H2_PREFACE_LEN ? len : H2_PREFACE_LEN;

    if (memcmp(buf, H2_PREFACE, n) != 0)
        return 0;
    return n == H2_PREFACE_LEN ? 1 : -1;
}

/* ---- streams ---- */

static struct h2_stream *
h2_stream_get(struct http_h2 *h2, int32_t id)
{
    return nghttp2_session_get_stream_user_data(h2->ng, id);
}

static void
h2_unqueue(struct http_h2 *h2, struct h2_stream *st)
{
    struct h2_stream **pp, *prev = NULL;

    for (pp = &h2->ready; *pp != NULL; prev = *pp, pp = &(*pp)->qnext) {
        if (*pp != st)
            continue;
        *pp = st->qnext;
        if (h2->ready_tail == st)
            h2->ready_tail = prev;
        st->qnext = NULL;
        st->queued = 0;
        return;
    }
    assert(!"a queued stream is on the ready list");
}

static void
h2_stream_free(struct http_h2 *h2, struct h2_stream *st)
{
    if (st->queued)
        h2_unqueue(h2, st);
    if (st->prev != NULL)
        st->prev->next = st->next;
    else
        h2->streams = st->next;
    if (st->next != NULL)
        st->next->prev = st->prev;
    assert(h2->buffered >= st->body_cap);
    h2->buffered -= st->body_cap;
    free(st->hbuf);
    free(st->body);
    free(st->out);
    free(st);
}

/* Append p[0..n) to the stream's header copies; returns its offset. */
static size_t
h2_hbuf_add(struct h2_stream *st, const uint8_t *p, size_t n)
{
    size_t off = st->hlen;

    st->hbuf = xrealloc(st->hbuf, st->hlen + n + 1);
    memcpy(st->hbuf + off, p, n);
    st->hlen += n;
    st->hbuf[st->hlen] = '\0';
    return off;
}

static void
h2_set_error(struct h2_stream *st, int status, int grpc, const char *code,
             const char *msg)
{
    if (st->err_status != 0)
        return;                     /* the first one wins */
    st->err_status = status;
    st->err_grpc = grpc;
    st->err_code = code;
    st->err_msg = msg;
}

/* ---- answers ---- */

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
        tv[0] = (nghttp2_nv){ (uint8_t *)"grpc-status", (uint8_t *)code, 11,
                              strlen(code), NGHTTP2_NV_FLAG_NONE };
        if (st->grpc_msg != NULL)
            tv[nt++] = (nghttp2_nv){ (uint8_t *)"grpc-message",
                                     (uint8_t *)st->grpc_msg, 12,
                                     strlen(st->grpc_msg), NGHTTP2_NV_FLAG_NONE };
        if (nghttp2_submit_trailer(ng, id, tv, nt) == 0)
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
    return (ssize_t)n;
}

static nghttp2_nv
h2_nv(const char *name, const char *value)
{
    return (nghttp2_nv){ (uint8_t *)name, (uint8_t *)value, strlen(name),
                         strlen(value), NGHTTP2_NV_FLAG_NONE };
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

/* The stream's request is refused before it reaches the handler. */
static void
h2_refuse(struct http_h2 *h2, struct h2_stream *st, int status, int grpc_status,
          const char *code, const char *message)
{
    if (st->answered)
        return;
    if (st->queued)
        h2_unqueue(h2, st);
    h2_error_answer(h2, st, status, grpc_status, code, message);
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
    struct h2_stream *st = h2->cur;
    char msg[256];

    assert(st != NULL && c->req_active);
    h2->cur = NULL;
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
    struct h2_stream *st = h2->cur;

    if (st == NULL || !c->req_active) {
        log_error("h2: error %d (%s) with no request", status, message);
        return;
    }
    h2->cur = NULL;
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
    st = h2->cur;
    assert(st != NULL);
    h2->cur = NULL;
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

/* ---- nghttp2 callbacks ---- */

static int
h2_on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *arg)
{
    struct http_h2 *h2 = arg;
    struct h2_stream *st;

    if (frame->hd.type != NGHTTP2_HEADERS ||
        frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    st = xcalloc(1, sizeof *st);
    st->id = frame->hd.stream_id;
    st->method = HTTP_OTHER;
    st->content_length = -1;
    st->next = h2->streams;
    if (h2->streams != NULL)
        h2->streams->prev = st;
    h2->streams = st;
    nghttp2_session_set_stream_user_data(ng, st->id, st);
    return 0;
}

static int
h2_name_is(const uint8_t *name, size_t n, const char *s)
{
    return n == strlen(s) && memcmp(name, s, n) == 0;
}

static int
h2_on_header(nghttp2_session *ng, const nghttp2_frame *frame,
             const uint8_t *name, size_t namelen, const uint8_t *value,
             size_t valuelen, uint8_t flags, void *arg)
{
    struct http_h2 *h2 = arg;
    const struct http_config *cfg = &h2->c->t->s->cfg;
    struct h2_stream *st;
    int64_t v;
    size_t i;

    (void)flags;
    if (frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    st = h2_stream_get(h2, frame->hd.stream_id);
    if (st == NULL || st->answered)
        return 0;
    st->hdr_bytes += namelen + valuelen + 32;
    if (st->hdr_bytes > (size_t)cfg->max_header_bytes)
        h2_set_error(st, 431, GRPC_RESOURCE_EXHAUSTED, "headers_too_large",
                     "request head too large");
    if (st->err_status != 0 || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    if (h2_name_is(name, namelen, ":method")) {
        st->method = http_method_parse((const char *)value, valuelen);
        st->post = st->method == HTTP_POST;
    } else if (h2_name_is(name, namelen, ":path")) {
        if (valuelen > (size_t)cfg->max_url_bytes) {
            h2_set_error(st, 414, GRPC_RESOURCE_EXHAUSTED, "uri_too_long",
                         "request target too long");
            return 0;
        }
        for (i = 0; i < valuelen; i++)
            if (value[i] < 0x21 || value[i] == 0x7f)
                break;
        if (valuelen == 0 || value[0] != '/' || i < valuelen) {
            h2_set_error(st, 400, GRPC_UNIMPLEMENTED, "bad_request",
                         "malformed request");
            return 0;
        }
        st->path_len = valuelen;
        (void)h2_hbuf_add(st, value, valuelen);   /* first: offset 0 */
        st->have_path = 1;
    } else if (h2_name_is(name, namelen, "authorization")) {
        if (st->have_auth) {
            h2_set_error(st, 400, GRPC_INVALID_ARGUMENT, "bad_request",
                         "malformed request");
            return 0;
        }
        st->have_auth = 1;
        st->auth_len = valuelen;
        st->auth_off = h2_hbuf_add(st, value, valuelen);
    } else if (h2_name_is(name, namelen, "accept")) {
        st->accept_json |= (unsigned char)http_accept_json((const char *)value,
                                                           valuelen);
    } else if (h2_name_is(name, namelen, "content-type")) {
        st->grpc_ct = valuelen >= 16 &&
            memcmp(value, "application/grpc", 16) == 0 &&
            (valuelen == 16 || value[16] == '+' || value[16] == ';');
    } else if (h2_name_is(name, namelen, "content-length")) {
        /* nghttp2 has checked it is digits and matches the DATA. */
        for (v = 0, i = 0; i < valuelen && i < 18; i++)
            v = v * 10 + (value[i] - '0');
        st->content_length = i < valuelen ? INT64_MAX : v;
    } else if (h2->grpc && h2_name_is(name, namelen, "grpc-timeout")) {
        if (grpc_timeout_parse((const char *)value, valuelen,
                               &st->timeout_us) < 0)
            h2_set_error(st, 200, GRPC_INVALID_ARGUMENT, "bad_request",
                         "malformed grpc-timeout");
    } else if (h2->grpc && h2_name_is(name, namelen, "grpc-encoding")) {
        if (!h2_name_is(value, valuelen, "identity"))
            h2_set_error(st, 200, GRPC_UNIMPLEMENTED, "bad_request",
                         "grpc-encoding is not supported: send identity");
    }
    (void)ng;
    return 0;
}

/* The request's headers are all in: refuse it now, or wait for its end. */
static void
h2_headers_done(struct http_h2 *h2, struct h2_stream *st)
{
    const struct http_config *cfg = &h2->c->t->s->cfg;

    if (st->err_status != 0) {
        h2_refuse(h2, st, st->err_status, st->err_grpc, st->err_code,
                  st->err_msg);
        return;
    }
    if (!st->have_path) {
        h2_refuse(h2, st, 400, GRPC_UNIMPLEMENTED, "bad_request",
                  "malformed request");
        return;
    }
    if (h2->grpc) {
        /* PROTOCOL-HTTP2.md: a content-type that is not application/grpc
         * gets 415; grpc-status says so too, for clients that read it. */
        if (!st->grpc_ct)
            h2_refuse(h2, st, 415, GRPC_INVALID_ARGUMENT, "bad_request",
                      "content-type must be application/grpc");
        else if (!st->post)
            h2_refuse(h2, st, 405, GRPC_INVALID_ARGUMENT, "bad_request",
                      "a gRPC call is a POST");
        return;
    }
    if (st->content_length > (int64_t)cfg->max_body_bytes)
        h2_refuse(h2, st, 413, GRPC_RESOURCE_EXHAUSTED, "body_too_large",
                  "request body too large");
}

/* END_STREAM: the request is complete; queue it for the handler. */
static void
h2_request_done(struct http_h2 *h2, struct h2_stream *st)
{
    const unsigned char *m;
    size_t mlen, used;
    enum grpc_frame_result r;

    if (st->answered || st->queued)
        return;
    if (h2->grpc) {
        r = grpc_frame_parse(st->body, st->body_len,
                             (size_t)h2->c->t->s->cfg.grpc_max_message_bytes,
                             &m, &mlen, &used);
        if (r == GRPC_FRAME_MORE) {
            h2_refuse(h2, st, 200, GRPC_INTERNAL, "bad_request",
                      st->body_len == 0 ? "no request message"
                                        : "truncated request message");
            return;
        }
        if (r != GRPC_FRAME_OK || used != st->body_len) {
            h2_refuse(h2, st, 200, r == GRPC_FRAME_OK ? GRPC_INTERNAL
                      : r == GRPC_FRAME_COMPRESSED ? GRPC_UNIMPLEMENTED
                      : r == GRPC_FRAME_TOO_LARGE ? GRPC_RESOURCE_EXHAUSTED
                      : GRPC_INTERNAL, "bad_request",
                      r == GRPC_FRAME_OK ? "more than one request message"
                                         : "bad request message");
            return;
        }
    }
    st->queued = 1;
    st->qnext = NULL;
    if (h2->ready_tail != NULL)
        h2->ready_tail->qnext = st;
    else
        h2->ready = st;
    h2->ready_tail = st;
}

static int
h2_on_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame, void *arg)
{
    struct http_h2 *h2 = arg;
    struct h2_stream *st;

    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
        return 0;
    st = h2_stream_get(h2, frame->hd.stream_id);
    if (st == NULL)
        return 0;
    if (frame->hd.type == NGHTTP2_HEADERS &&
        frame->headers.cat == NGHTTP2_HCAT_REQUEST)
        h2_headers_done(h2, st);
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
        h2_request_done(h2, st);
    (void)ng;
    return 0;
}

/* Append a gRPC stream's DATA, refusing what could never be one message
 * under the limit. */
static void
h2_grpc_data(struct http_h2 *h2, struct h2_stream *st, const uint8_t *data,
             size_t len)
{
    size_t max = (size_t)h2->c->t->s->cfg.grpc_max_message_bytes;
    size_t limit = max + GRPC_FRAME_PREFIX, cap, mlen, used;
    const unsigned char *m;
    enum grpc_frame_result r;

    if (len > limit - st->body_len) {
        h2_refuse(h2, st, 200, GRPC_RESOURCE_EXHAUSTED, "body_too_large",
                  "request message too large");
        return;
    }
    if (st->body_len + len > st->body_cap) {
        cap = st->body_cap * 2 > 256 ? st->body_cap * 2 : 256;
        if (cap < st->body_len + len)
            cap = st->body_len + len;
        if (cap > limit)
            cap = limit;
        if (h2->buffered - st->body_cap + cap > 2 * limit) {
            h2_refuse(h2, st, 200, GRPC_RESOURCE_EXHAUSTED, "body_too_large",
                      "too many request bytes in flight on this connection");
            return;
        }
        st->body = xrealloc(st->body, cap);
        h2->buffered += cap - st->body_cap;
        st->body_cap = cap;
    }
    memcpy(st->body + st->body_len, data, len);
    st->body_len += len;
    r = grpc_frame_parse(st->body, st->body_len, max, &m, &mlen, &used);
    if (r == GRPC_FRAME_COMPRESSED)
        h2_refuse(h2, st, 200, GRPC_UNIMPLEMENTED, "bad_request",
                  "compressed messages are not supported");
    else if (r == GRPC_FRAME_BAD_FLAG)
        h2_refuse(h2, st, 200, GRPC_INTERNAL, "bad_request",
                  "bad message flags");
    else if (r == GRPC_FRAME_TOO_LARGE)
        h2_refuse(h2, st, 200, GRPC_RESOURCE_EXHAUSTED, "body_too_large",
                  "request message too large");
}

static int
h2_on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id,
                 const uint8_t *data, size_t len, void *arg)
{
    struct http_h2 *h2 = arg;
    struct h2_stream *st = h2_stream_get(h2, id);

    (void)ng;
    (void)flags;
    if (st == NULL || st->answered)
        return 0;                   /* dropped */
    if (h2->grpc) {
        h2_grpc_data(h2, st, data, len);
        return 0;
    }
    st->dropped += len;
    if (st->dropped > (uint64_t)h2->c->t->s->cfg.max_body_bytes)
        h2_refuse(h2, st, 413, GRPC_RESOURCE_EXHAUSTED, "body_too_large",
                  "request body too large");
    return 0;
}

static int
h2_on_stream_close(nghttp2_session *ng, int32_t id, uint32_t error_code,
                   void *arg)
{
    struct http_h2 *h2 = arg;
    struct http_conn *c = h2->c;
    struct h2_stream *st = h2_stream_get(h2, id);

    (void)ng;
    (void)error_code;
    if (st == NULL)
        return 0;
    if (st == h2->cur) {
        /* Reset while parked: the handler never hears of it again. */
        assert(c->req_active && !c->in_handler);
        h2->cur = NULL;
        http_conn_end_request(c);
    }
    h2_stream_free(h2, st);
    return 0;
}

static void
h2_init_once(void)
{
    nghttp2_session_callbacks *cb;

    if (nghttp2_session_callbacks_new(&cb) != 0 ||
        nghttp2_option_new(&h2_option) != 0)
        abort();
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb,
                                                            h2_on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, h2_on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, h2_on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb,
                                                              h2_on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb,
                                                           h2_on_stream_close);
    h2_callbacks = cb;
    /* Closed streams are not kept for priorities: memory per connection
     * follows the open streams only. */
    nghttp2_option_set_no_closed_streams(h2_option, 1);
}

/* ---- the connection ---- */

static void
h2_goaway(struct http_h2 *h2)
{
    if (h2->goaway)
        return;
    h2->goaway = 1;
    (void)nghttp2_submit_goaway(h2->ng, NGHTTP2_FLAG_NONE,
                                nghttp2_session_get_last_proc_stream_id(h2->ng),
                                NGHTTP2_NO_ERROR, NULL, 0);
}

void
http_h2_start(struct http_conn *c, int grpc)
{
    const struct http_config *cfg = &c->t->s->cfg;
    struct http_h2 *h2;
    nghttp2_settings_entry iv[3];
    int rv;

    assert(c->h2 == NULL && c->resp == NULL);
    pthread_once(&h2_once, h2_init_once);
    h2 = xcalloc(1, sizeof *h2);
    h2->c = c;
    h2->grpc = grpc;
    if (nghttp2_session_server_new2(&h2->ng, h2_callbacks, h2, h2_option) != 0)
        abort();                    /* out of memory */
    iv[0] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
                                      (uint32_t)cfg->h2_max_concurrent_streams };
    iv[1] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
                                      (uint32_t)cfg->max_header_bytes };
    iv[2] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 };
    rv = nghttp2_submit_settings(h2->ng, NGHTTP2_FLAG_NONE, iv, 3);
    assert(rv == 0);
    (void)rv;
    c->h2 = h2;
    c->h1 = 0;
    ctr_add(&c->t->h2_open, 1);
    if (c->t->stopping)
        h2_goaway(h2);              /* sent with the SETTINGS */
}

/* Move the session's output to c->out while under HTTP_OUT_HIGH. -1: the
 * session failed. */
static int
h2_pump(struct http_conn *c)
{
    const uint8_t *p;
    ssize_t n;

    while (c->out_len - c->out_off < HTTP_OUT_HIGH) {
        n = nghttp2_session_mem_send(c->h2->ng, &p);
        if (n < 0) {
            log_debug("h2: nghttp2_session_mem_send: %s",
                      nghttp2_strerror((int)n));
            return -1;
        }
        if (n == 0)
            return 0;
        http_out_append(c, (const char *)p, (size_t)n);
    }
    return 0;
}

/* Hand the oldest ready stream to the handler. */
static void
h2_start_next(struct http_conn *c)
{
    struct http_h2 *h2 = c->h2;
    struct h2_stream *st = h2->ready;
    struct http_msg *msg = &c->req.msg;
    const char *q;

    h2->ready = st->qnext;
    if (h2->ready == NULL)
        h2->ready_tail = NULL;
    st->qnext = NULL;
    st->queued = 0;
    h2->cur = st;

    memset(msg, 0, sizeof *msg);
    msg->method = st->method;
    msg->version_minor = 1;
    msg->target = st->hbuf;
    msg->target_len = st->path_len;
    msg->path = st->hbuf;
    q = memchr(st->hbuf, '?', st->path_len);
    msg->path_len = q != NULL ? (size_t)(q - st->hbuf) : st->path_len;
    if (q != NULL) {
        msg->query = q + 1;
        msg->query_len = st->path_len - msg->path_len - 1;
    }
    msg->keep_alive = 1;
    msg->accept_json = st->accept_json;
    msg->content_length = st->content_length;
    if (st->have_auth) {
        msg->authorization = st->hbuf + st->auth_off;
        msg->authorization_len = st->auth_len;
    }
    c->req.cmd = NULL;
    if (h2->grpc) {
        c->req.proto = HTTP_REQ_GRPC;
        c->req.body = st->body + GRPC_FRAME_PREFIX;
        c->req.body_len = st->body_len - GRPC_FRAME_PREFIX;
        c->req.grpc_timeout_us = st->timeout_us;
    } else {
        c->req.proto = HTTP_REQ_H2;
        c->req.body = NULL;
        c->req.body_len = 0;
        c->req.grpc_timeout_us = 0;
    }
    ctr_add(&c->t->h2_streams, 1);
    http_conn_start_request(c);
}

/* The session is over (failed, or GOAWAY done): close once sent. */
static void
h2_end(struct http_conn *c)
{
    c->closing = 1;
    c->in_off = c->in_len;
    if (c->req_active && !c->in_handler) {
        c->h2->cur = NULL;
        http_conn_end_request(c);
    }
}

void
http_h2_process(struct http_conn *c)
{
    struct http_h2 *h2 = c->h2;
    ssize_t n;

    while (!c->closing) {
        if (h2_pump(c) < 0) {
            h2_end(c);
            return;
        }
        if (c->out_len - c->out_off >= HTTP_OUT_HIGH) {
            c->out_full = 1;
            return;
        }
        if (!c->req_active && h2->ready != NULL) {
            h2_start_next(c);
            continue;
        }
        if (c->in_off == c->in_len)
            break;
        n = nghttp2_session_mem_recv(h2->ng, (const uint8_t *)c->in + c->in_off,
                                     c->in_len - c->in_off);
        if (n < 0) {
            log_debug("h2: nghttp2_session_mem_recv: %s",
                      nghttp2_strerror((int)n));
            (void)h2_pump(c);      /* a GOAWAY, if the session has one */
            h2_end(c);
            return;
        }
        c->in_off += (size_t)n;
    }
    if (!c->closing && !nghttp2_session_want_read(h2->ng) &&
        !nghttp2_session_want_write(h2->ng))
        h2_end(c);
}

void
http_h2_stop(struct http_conn *c)
{
    h2_goaway(c->h2);
    if (!c->in_handler)
        (void)http_conn_run(c);
}

int
http_h2_idle(const struct http_conn *c)
{
    return c->h2->streams == NULL;
}

void
http_h2_free(struct http_conn *c)
{
    struct http_h2 *h2 = c->h2;

    nghttp2_session_del(h2->ng);    /* calls no stream-close callback */
    while (h2->streams != NULL)
        h2_stream_free(h2, h2->streams);
    ctr_add(&c->t->h2_open, -1);
    free(h2);
    c->h2 = NULL;
}
