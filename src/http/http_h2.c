/* http_h2.c: HTTP/2 connections on libnghttp2's server session: h2c with
 * prior knowledge on the HTTP port, and every connection of the gRPC port:
 * the session, its streams and their requests (see http.h; the connection
 * around the session is http_conn.c's, the answers http_h2_reply.c's).
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
 * connection's ready queue, and the queue is handed to the handler in the
 * order the requests completed. Each stream is handed over as a struct
 * http_conn of its own (st->sc, owner = the connection), so it parks, is
 * woken and times out on its own, with http_park.c's parking code: a parked
 * stream holds back no other stream. A retried stream's answer is sent by
 * the connection from the thread's send queue (http_conn_retry), so no
 * retry frees anything. What a request points to (:path, authorization,
 * the gRPC message) is copied into its stream, so the input buffer is
 * always consumed whole. A stream the client resets is dropped: unqueued,
 * or unparked without calling the handler again. While a stream is with the
 * handler the connection has no idle deadline (as a parked HTTP/1.1
 * request).
 *
 * Limits. The session advertises SETTINGS_MAX_CONCURRENT_STREAMS
 * (h2_max_concurrent_streams) and SETTINGS_MAX_HEADER_LIST_SIZE
 * (max_header_bytes), and enforces both: more streams are refused by
 * nghttp2, a bigger header list gets 431 (gRPC: RESOURCE_EXHAUSTED). An h2c
 * request body is counted and dropped (over max_body_bytes: 413). A gRPC
 * message is buffered up to grpc_max_message_bytes (its prefix announcing
 * more: RESOURCE_EXHAUSTED at once), and the gRPC bodies buffered on one
 * connection never pass 2 x (grpc_max_message_bytes + 5) + H2_BODY_MIN x
 * h2_max_concurrent_streams (so small messages on every stream always
 * fit); a stream that would pass it gets RESOURCE_EXHAUSTED. A stream
 * answered before its request ended is reset (RST_STREAM NO_ERROR, after
 * the answer), and DATA that still comes for it is dropped. Flow-control
 * windows are nghttp2's (65535 per stream; WINDOW_UPDATE as data is
 * consumed). An answer the client's window holds back stays in its stream;
 * streams are capped, so that is bounded too.
 *
 * Answers (http_h2_reply.c) are submitted to the session with a data
 * source reading from a copy the stream owns.
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
#include "http_h2_internal.h"
#include "log.h"
#include "util.h"

#define H2_PREFACE       "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define H2_PREFACE_LEN   (sizeof H2_PREFACE - 1)

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
        st->path_off = h2_hbuf_add(st, value, valuelen);
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
        /* nghttp2 checks it against the DATA; too big to parse is big. */
        if (util_parse_i64((const char *)value, valuelen, 0, &v) < 0)
            v = INT64_MAX;
        st->content_length = v;
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
        http_h2_refuse(h2, st, st->err_status, st->err_grpc, st->err_code,
                       st->err_msg);
        return;
    }
    if (!st->have_path) {
        http_h2_refuse(h2, st, 400, GRPC_UNIMPLEMENTED, "bad_request",
                       "malformed request");
        return;
    }
    if (h2->grpc) {
        /* PROTOCOL-HTTP2.md: a content-type that is not application/grpc
         * gets 415; grpc-status says so too, for clients that read it. */
        if (!st->grpc_ct)
            http_h2_refuse(h2, st, 415, GRPC_INVALID_ARGUMENT, "bad_request",
                           "content-type must be application/grpc");
        else if (!st->post)
            http_h2_refuse(h2, st, 405, GRPC_INVALID_ARGUMENT, "bad_request",
                           "a gRPC call is a POST");
        return;
    }
    if (st->content_length > (int64_t)cfg->max_body_bytes)
        http_h2_refuse(h2, st, 413, GRPC_RESOURCE_EXHAUSTED, "body_too_large",
                       "request body too large");
}

/* A message its prefix refuses. */
static void
h2_refuse_frame(struct http_h2 *h2, struct h2_stream *st,
                enum grpc_frame_result r)
{
    if (r == GRPC_FRAME_COMPRESSED)
        http_h2_refuse(h2, st, 200, GRPC_UNIMPLEMENTED, "bad_request",
                       "compressed messages are not supported");
    else if (r == GRPC_FRAME_TOO_LARGE)
        http_h2_refuse(h2, st, 200, GRPC_RESOURCE_EXHAUSTED, "body_too_large",
                       "request message too large");
    else
        http_h2_refuse(h2, st, 200, GRPC_INTERNAL, "bad_request",
                       "bad message flags");
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
    if (st->err_status != 0) {      /* found in the trailers */
        http_h2_refuse(h2, st, st->err_status, st->err_grpc, st->err_code,
                       st->err_msg);
        return;
    }
    if (h2->grpc) {
        r = grpc_frame_parse(st->body, st->body_len,
                             (size_t)h2->c->t->s->cfg.grpc_max_message_bytes,
                             &m, &mlen, &used);
        if (r == GRPC_FRAME_MORE) {
            http_h2_refuse(h2, st, 200, GRPC_INTERNAL, "bad_request",
                           st->body_len == 0 ? "no request message"
                                             : "truncated request message");
            return;
        }
        if (r == GRPC_FRAME_OK && used != st->body_len) {
            http_h2_refuse(h2, st, 200, GRPC_INTERNAL, "bad_request",
                           "more than one request message");
            return;
        }
        if (r != GRPC_FRAME_OK) {
            /* Refused as the DATA came, unless the limit was passed
             * within the prefix's own 5 bytes. */
            h2_refuse_frame(h2, st, r);
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
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
        st->ended = 1;
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
        http_h2_refuse(h2, st, 200, GRPC_RESOURCE_EXHAUSTED, "body_too_large",
                       "request message too large");
        return;
    }
    if (st->body_len + len > st->body_cap) {
        cap = st->body_cap * 2 > H2_BODY_MIN ? st->body_cap * 2 : H2_BODY_MIN;
        if (cap < st->body_len + len)
            cap = st->body_len + len;
        if (cap > limit)
            cap = limit;
        if (h2->buffered - st->body_cap + cap >
            2 * limit + H2_BODY_MIN *
            (size_t)h2->c->t->s->cfg.h2_max_concurrent_streams) {
            http_h2_refuse(h2, st, 200, GRPC_RESOURCE_EXHAUSTED,
                           "body_too_large", "too many request bytes in "
                           "flight on this connection");
            return;
        }
        st->body = xrealloc(st->body, cap);
        h2->buffered += cap - st->body_cap;
        st->body_cap = cap;
    }
    memcpy(st->body + st->body_len, data, len);
    st->body_len += len;
    r = grpc_frame_parse(st->body, st->body_len, max, &m, &mlen, &used);
    if (r != GRPC_FRAME_OK && r != GRPC_FRAME_MORE)
        h2_refuse_frame(h2, st, r);
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
        http_h2_refuse(h2, st, 413, GRPC_RESOURCE_EXHAUSTED, "body_too_large",
                       "request body too large");
    return 0;
}

/* A stream the handler has (parked) goes away unanswered. */
static void
h2_drop_request(struct http_h2 *h2, struct h2_stream *st)
{
    if (!st->handed)
        return;
    assert(st->sc.req_active && !st->sc.in_handler);
    st->handed = 0;
    h2->busy--;
    http_conn_drop_request(&st->sc);
    http_conn_end_request(&st->sc);
}

static int
h2_on_stream_close(nghttp2_session *ng, int32_t id, uint32_t error_code,
                   void *arg)
{
    struct http_h2 *h2 = arg;
    struct h2_stream *st = h2_stream_get(h2, id);

    (void)ng;
    (void)error_code;
    if (st == NULL)
        return 0;
    h2_drop_request(h2, st);        /* reset while parked: the handler never
                                       hears of it again */
    h2_stream_free(h2, st);
    return 0;
}

/* The answer of a stream refused early is out: reset it (reset_after). */
static int
h2_on_frame_send(nghttp2_session *ng, const nghttp2_frame *frame, void *arg)
{
    struct h2_stream *st;

    if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM) ||
        (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA))
        return 0;
    st = h2_stream_get(arg, frame->hd.stream_id);
    if (st != NULL && st->reset_after && !st->ended) {
        st->reset_after = 0;
        (void)nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, st->id,
                                        NGHTTP2_NO_ERROR);
    }
    return 0;
}

static void
h2_init_once(void)
{
    nghttp2_session_callbacks *cb;

    if (nghttp2_session_callbacks_new(&cb) != 0 ||
        nghttp2_option_new(&h2_option) != 0)
        abort();
    nghttp2_session_callbacks_set_on_begin_headers_callback(
        cb, h2_on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, h2_on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, h2_on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb,
                                                              h2_on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb,
                                                           h2_on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, h2_on_frame_send);
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
    iv[0] = (nghttp2_settings_entry){
        NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
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

/* Hand the oldest ready stream to the handler, as a connection of its own
 * (st->sc). */
static void
h2_start_next(struct http_conn *c)
{
    struct http_h2 *h2 = c->h2;
    struct h2_stream *st = h2->ready;
    struct http_conn *sc = &st->sc;
    struct http_msg *msg = &sc->req.msg;
    const char *q;

    h2->ready = st->qnext;
    if (h2->ready == NULL)
        h2->ready_tail = NULL;
    st->qnext = NULL;
    st->queued = 0;
    http_conn_stream_init(sc, c, st);

    memset(msg, 0, sizeof *msg);
    msg->method = st->method;
    msg->version_minor = 1;
    msg->target = st->hbuf + st->path_off;
    msg->target_len = st->path_len;
    msg->path = msg->target;
    q = memchr(msg->target, '?', st->path_len);
    msg->path_len = q != NULL ? (size_t)(q - msg->target) : st->path_len;
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
    sc->req.cmd = NULL;
    if (h2->grpc) {
        sc->req.proto = HTTP_REQ_GRPC;
        sc->req.body = st->body + GRPC_FRAME_PREFIX;
        sc->req.body_len = st->body_len - GRPC_FRAME_PREFIX;
        sc->req.grpc_timeout_us = st->timeout_us;
    } else {
        sc->req.proto = HTTP_REQ_H2;
    }
    st->handed = 1;
    h2->busy++;
    ctr_add(&c->t->h2_streams, 1);
    http_conn_start_request(sc);
}

/* The session is over (failed, or GOAWAY done): close once sent. */
static void
h2_end(struct http_conn *c)
{
    c->closing = 1;
    c->in_off = c->in_len;
    for (struct h2_stream *st = c->h2->streams; st != NULL; st = st->next)
        h2_drop_request(c->h2, st);
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
        if (h2->ready != NULL) {
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

/* The idle deadline closes c: GOAWAY (NO_ERROR, the last stream processed)
 * goes into its output first, so the client knows no stream was lost.
 * Best effort: the caller sends it once, without waiting. */
void
http_h2_idle_goaway(struct http_conn *c)
{
    h2_goaway(c->h2);
    (void)h2_pump(c);
}

int
http_h2_idle(const struct http_conn *c)
{
    return c->lingering || c->h2->streams == NULL;
}

int
http_h2_busy(const struct http_conn *c)
{
    return c->h2->busy > 0;
}

void
http_h2_free(struct http_conn *c)
{
    struct http_h2 *h2 = c->h2;

    nghttp2_session_del(h2->ng);    /* calls no stream-close callback */
    while (h2->streams != NULL) {
        h2_drop_request(h2, h2->streams);
        h2_stream_free(h2, h2->streams);
    }
    assert(h2->busy == 0);
    ctr_add(&c->t->h2_open, -1);
    free(h2);
    c->h2 = NULL;
}
