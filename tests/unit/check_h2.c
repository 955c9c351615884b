/* check_h2.c: HTTP/2 on the HTTP front end, in process: a real server on
 * loopback ports (h2c on the HTTP port, and the gRPC port) with a test
 * handler, driven by nghttp2's client session over blocking sockets, and by
 * raw bytes where a client library would refuse to misbehave. */
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <nghttp2/nghttp2.h>

#include "grpc_frame.h"
#include "http.h"
#include "util.h"

static struct http_server *srv;
static atomic_int park_ready, park_calls;

#define PARK_KEY 42

/* ---- the test handler ---- */

static int
path_eq(const struct http_msg *m, const char *p)
{
    return m->path_len == strlen(p) && memcmp(m->path, p, m->path_len) == 0;
}

static void
handler(struct http_conn *c, struct http_request *req, void *arg)
{
    const struct http_msg *m = &req->msg;
    char body[512];
    int n;

    (void)arg;
    if (req->proto == HTTP_REQ_GRPC) {
        if (path_eq(m, "/test.Svc/Echo")) {
            http_reply_grpc(c, 0, NULL, req->body, req->body_len);
        } else if (path_eq(m, "/test.Svc/Fail")) {
            http_reply_grpc(c, 5, "no such tag: caf\xc3\xa9 100%", NULL, 0);
        } else if (path_eq(m, "/test.Svc/Timeout")) {
            n = snprintf(body, sizeof body, "%lld",
                         (long long)req->grpc_timeout_us);
            http_reply_grpc(c, 0, "ok", body, (size_t)n);
        } else if (path_eq(m, "/test.Svc/Park")) {
            atomic_fetch_add(&park_calls, 1);
            if (atomic_load(&park_ready) || req->timed_out)
                http_reply_grpc(c, req->timed_out ? 4 : 0, NULL, "woke", 4);
            else
                http_park(c, 10000, PARK_KEY);
        } else if (path_eq(m, "/test.Svc/Len")) {
            n = snprintf(body, sizeof body, "%zu %d", req->body_len,
                         req->body_len > 0 ? req->body[req->body_len - 1] : -1);
            http_reply_grpc(c, 0, NULL, body, (size_t)n);
        } else if (path_eq(m, "/test.Svc/ParkShort")) {
            if (req->timed_out)
                http_reply_grpc(c, 4, "deadline", NULL, 0);
            else
                http_park(c, 30, PARK_KEY + 1);
        } else if (path_eq(m, "/test.Svc/Http")) {
            http_reply(c, 503, "application/json", NULL, "busy", 4);
        } else {
            http_reply_grpc(c, 12, "unknown method", NULL, 0);
        }
        return;
    }
    if (path_eq(m, "/hello")) {
        n = snprintf(body, sizeof body, "hello %s %d %.*s%s",
                     req->proto == HTTP_REQ_H2 ? "h2" : "h1",
                     m->accept_json, (int)m->query_len,
                     m->query != NULL ? m->query : "",
                     m->query != NULL ? "" : "-");
        http_reply(c, 200, "text/plain", "X-Test: One\r\nConnection: keep-alive\r\n",
                   body, (size_t)n);
    } else if (path_eq(m, "/auth")) {
        n = snprintf(body, sizeof body, "%.*s", (int)m->authorization_len,
                     m->authorization != NULL ? m->authorization : "");
        http_reply(c, 200, "text/plain", NULL, body, (size_t)n);
    } else if (path_eq(m, "/park")) {
        atomic_fetch_add(&park_calls, 1);
        if (atomic_load(&park_ready) || req->timed_out)
            http_reply(c, req->timed_out ? 504 : 200, "text/plain", NULL,
                       "woke", 4);
        else
            http_park(c, 10000, PARK_KEY);
    } else if (path_eq(m, "/silent")) {
        /* answers nothing: the layer's 500 */
    } else {
        http_reply(c, 404, "application/json", NULL,
                   "{\"error\":\"not_found\"}", 21);
    }
}

static void
start_server(int max_message, int streams)
{
    struct http_config cfg;
    char *cause = NULL;

    memset(&cfg, 0, sizeof cfg);
    cfg.address = "127.0.0.1";
    cfg.threads = 2;
    cfg.idle_timeout_ms = 20000;
    cfg.max_body_bytes = 1000;
    cfg.grpc_enable = 1;
    cfg.grpc_address = "127.0.0.1";
    cfg.grpc_max_message_bytes = max_message;
    cfg.h2_max_concurrent_streams = streams;
    srv = http_server_new(&cfg, handler, NULL, NULL, &cause);
    ck_assert_msg(srv != NULL, "http_server_new: %s", cause);
    ck_assert_int_eq(http_server_start(srv, &cause), 0);
    ck_assert_int_gt(http_server_grpc_port(srv), 0);
    atomic_store(&park_ready, 0);
    atomic_store(&park_calls, 0);
}

static void
setup(void)
{
    start_server(0, 0);
}

static void
teardown(void)
{
    http_server_stop(srv, 5000);
    http_server_free(srv);
    srv = NULL;
}

/* ---- a blocking nghttp2 client ---- */

#define CLI_MAX 256

struct cli_resp {
    int32_t  id;
    int      status, grpc_status, closed;
    uint32_t rst;
    char     grpc_msg[256], ctype[64], xtest[32];
    char     body[8192];
    size_t   body_len;
    int      has_clen;
    const char *src;               /* the request body */
    size_t   src_len, src_off;
};

struct cli {
    int              fd;
    nghttp2_session *ng;
    struct cli_resp  r[CLI_MAX];
    int              n;
    int              goaway;
    int32_t          goaway_last;
    int              eof;
};

static struct cli_resp *
cli_find(struct cli *k, int32_t id)
{
    for (int i = 0; i < k->n; i++)
        if (k->r[i].id == id)
            return &k->r[i];
    return NULL;
}

static ssize_t
cli_send_cb(nghttp2_session *ng, const uint8_t *data, size_t len, int flags,
            void *arg)
{
    struct cli *k = arg;
    ssize_t n;

    (void)ng;
    (void)flags;
    n = send(k->fd, data, len, MSG_NOSIGNAL);
    if (n < 0)
        return errno == EAGAIN ? NGHTTP2_ERR_WOULDBLOCK : NGHTTP2_ERR_CALLBACK_FAILURE;
    return n;
}

static int
cli_header_cb(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
              size_t nl, const uint8_t *value, size_t vl, uint8_t flags,
              void *arg)
{
    struct cli_resp *r = cli_find(arg, f->hd.stream_id);

    (void)ng;
    (void)flags;
    if (r == NULL)
        return 0;
    if (nl == 7 && memcmp(name, ":status", 7) == 0)
        r->status = atoi((const char *)value);
    else if (nl == 11 && memcmp(name, "grpc-status", 11) == 0)
        r->grpc_status = atoi((const char *)value);
    else if (nl == 12 && memcmp(name, "grpc-message", 12) == 0)
        snprintf(r->grpc_msg, sizeof r->grpc_msg, "%.*s", (int)vl, value);
    else if (nl == 12 && memcmp(name, "content-type", 12) == 0)
        snprintf(r->ctype, sizeof r->ctype, "%.*s", (int)vl, value);
    else if (nl == 6 && memcmp(name, "x-test", 6) == 0)
        snprintf(r->xtest, sizeof r->xtest, "%.*s", (int)vl, value);
    else if (nl == 14 && memcmp(name, "content-length", 14) == 0)
        r->has_clen = 1;
    ck_assert_msg(!(nl == 10 && memcmp(name, "connection", 10) == 0),
                  "a connection header over HTTP/2");
    return 0;
}

static int
cli_data_cb(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
            size_t len, void *arg)
{
    struct cli_resp *r = cli_find(arg, id);

    (void)ng;
    (void)flags;
    if (r != NULL && r->body_len + len <= sizeof r->body) {
        memcpy(r->body + r->body_len, data, len);
        r->body_len += len;
    }
    return 0;
}

static int
cli_close_cb(nghttp2_session *ng, int32_t id, uint32_t code, void *arg)
{
    struct cli_resp *r = cli_find(arg, id);

    (void)ng;
    if (r != NULL) {
        r->closed = 1;
        r->rst = code;
    }
    return 0;
}

static int
cli_frame_cb(nghttp2_session *ng, const nghttp2_frame *f, void *arg)
{
    struct cli *k = arg;

    (void)ng;
    if (f->hd.type == NGHTTP2_GOAWAY) {
        k->goaway = 1;
        k->goaway_last = f->goaway.last_stream_id;
    }
    return 0;
}

static int
tcp_connect(int port)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

    ck_assert_int_ge(fd, 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* peer_streams > 0: assume the server allows that many streams until its
 * SETTINGS say otherwise (a client that does not wait for them). */
static struct cli *
cli_new_opt(int port, uint32_t peer_streams)
{
    struct cli *k = calloc(1, sizeof *k);
    nghttp2_session_callbacks *cb;
    nghttp2_option *opt;

    k->fd = tcp_connect(port);
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_send_callback(cb, cli_send_cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, cli_header_cb);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, cli_data_cb);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, cli_close_cb);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, cli_frame_cb);
    nghttp2_option_new(&opt);
    if (peer_streams > 0)
        nghttp2_option_set_peer_max_concurrent_streams(opt, peer_streams);
    ck_assert_int_eq(nghttp2_session_client_new2(&k->ng, cb, k, opt), 0);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
    ck_assert_int_eq(nghttp2_submit_settings(k->ng, NGHTTP2_FLAG_NONE, NULL, 0), 0);
    return k;
}

static struct cli *
cli_new(int port)
{
    return cli_new_opt(port, 0);
}

static void
cli_free(struct cli *k)
{
    nghttp2_session_del(k->ng);
    close(k->fd);
    free(k);
}

static ssize_t
cli_body_cb(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len,
            uint32_t *flags, nghttp2_data_source *src, void *arg)
{
    struct cli_resp *r = src->ptr;
    size_t n = r->src_len - r->src_off;

    (void)ng;
    (void)id;
    (void)arg;
    if (n > len)
        n = len;
    memcpy(buf, r->src + r->src_off, n);
    r->src_off += n;
    if (r->src_off == r->src_len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* Submit a request; extra: NULL or "name", "value", ..., NULL. body must
 * live until it is sent. */
static struct cli_resp *
cli_req(struct cli *k, const char *method, const char *path, const char *body,
        size_t len, const char *const *extra)
{
    nghttp2_nv nv[16];
    size_t n = 0;
    nghttp2_data_provider prd;
    struct cli_resp *r;
    int32_t id;

#define NV(a, b) (nghttp2_nv){ (uint8_t *)(a), (uint8_t *)(b), strlen(a), \
                               strlen(b), NGHTTP2_NV_FLAG_NONE }
    nv[n++] = NV(":method", method);
    nv[n++] = NV(":scheme", "http");
    nv[n++] = NV(":authority", "localhost");
    nv[n++] = NV(":path", path);
    for (; extra != NULL && *extra != NULL; extra += 2)
        nv[n++] = NV(extra[0], extra[1]);
    ck_assert_int_lt(k->n, CLI_MAX);
    r = &k->r[k->n++];
    memset(r, 0, sizeof *r);
    r->src = body;
    r->src_len = len;
    prd.source.ptr = r;
    prd.read_callback = cli_body_cb;
    id = nghttp2_submit_request(k->ng, NULL, nv, n, body != NULL ? &prd : NULL,
                                NULL);
    ck_assert_int_gt(id, 0);
    r->id = id;
    return r;
}

static const char *const grpc_hdrs[] = { "content-type", "application/grpc",
                                         "te", "trailers", NULL };

/* A framed gRPC request for msg into buf. */
static size_t
grpc_body(char *buf, const char *msg, size_t len)
{
    grpc_frame_prefix((unsigned char *)buf, len);
    memcpy(buf + GRPC_FRAME_PREFIX, msg, len);
    return GRPC_FRAME_PREFIX + len;
}

/* Send what the session has, read what comes for up to ms. */
static void
cli_io(struct cli *k, int ms)
{
    struct pollfd p = { k->fd, POLLIN, 0 };
    uint8_t buf[16384];
    ssize_t n;

    ck_assert_int_eq(nghttp2_session_send(k->ng), 0);
    if (poll(&p, 1, ms) <= 0)
        return;
    n = recv(k->fd, buf, sizeof buf, 0);
    if (n <= 0) {
        k->eof = 1;
        return;
    }
    ck_assert_int_eq(nghttp2_session_mem_recv(k->ng, buf, (size_t)n), n);
}

/* Run until r is closed (or the connection is). */
static void
cli_wait(struct cli *k, struct cli_resp *r)
{
    for (int i = 0; i < 3000 && !r->closed && !k->eof; i++)
        cli_io(k, 10);
    ck_assert_msg(r->closed, "stream %d not answered", r->id);
}

/* Run until the handler has parked n calls. */
static void
cli_until_parked(struct cli *k, int n)
{
    for (int i = 0; i < 3000 && atomic_load(&park_calls) < n; i++)
        cli_io(k, 10);
}

/* The grpc reply's message, unframed. */
static void
ck_grpc_msg(const struct cli_resp *r, const char *want)
{
    const unsigned char *m;
    size_t mlen, used;

    ck_assert_int_eq(grpc_frame_parse((const unsigned char *)r->body, r->body_len,
                                      1 << 20, &m, &mlen, &used), GRPC_FRAME_OK);
    ck_assert_uint_eq(used, r->body_len);
    ck_assert_uint_eq(mlen, strlen(want));
    ck_assert(memcmp(m, want, mlen) == 0);
}

/* ---- tests ---- */

START_TEST(test_h2c_get)
{
    struct cli *k = cli_new(http_server_port(srv));
    static const char *const acc[] = { "accept", "application/json", NULL };
    struct cli_resp *a = cli_req(k, "GET", "/hello?x=1", NULL, 0, acc);
    struct cli_resp *b = cli_req(k, "GET", "/nope", NULL, 0, NULL);
    struct cli_resp *h = cli_req(k, "HEAD", "/hello", NULL, 0, NULL);
    struct http_stats st;

    cli_wait(k, a);
    cli_wait(k, b);
    cli_wait(k, h);
    ck_assert_int_eq(a->status, 200);
    ck_assert_str_eq(a->ctype, "text/plain");
    ck_assert_str_eq(a->xtest, "One");          /* name lowercased */
    ck_assert_uint_eq(a->body_len, strlen("hello h2 1 x=1"));
    ck_assert(memcmp(a->body, "hello h2 1 x=1", a->body_len) == 0);
    ck_assert_int_eq(b->status, 404);
    ck_assert_int_eq(h->status, 200);
    ck_assert_uint_eq(h->body_len, 0);
    ck_assert(h->has_clen);
    http_server_stats(srv, &st);
    ck_assert_uint_eq(st.h2_open, 1);
    ck_assert_uint_ge(st.h2_streams, 3);
    cli_free(k);
}
END_TEST

START_TEST(test_grpc_unary)
{
    struct cli *k = cli_new(http_server_grpc_port(srv));
    char buf[64];
    size_t n = grpc_body(buf, "ping", 4);
    struct cli_resp *r = cli_req(k, "POST", "/test.Svc/Echo", buf, n, grpc_hdrs);

    cli_wait(k, r);
    ck_assert_int_eq(r->status, 200);
    ck_assert_str_eq(r->ctype, "application/grpc");
    ck_assert_int_eq(r->grpc_status, 0);
    ck_grpc_msg(r, "ping");
    ck_assert_uint_eq(r->rst, 0);

    /* Trailers-only, with a percent-encoded message. */
    n = grpc_body(buf, "", 0);
    r = cli_req(k, "POST", "/test.Svc/Fail", buf, n, grpc_hdrs);
    cli_wait(k, r);
    ck_assert_int_eq(r->status, 200);
    ck_assert_int_eq(r->grpc_status, 5);
    ck_assert_str_eq(r->grpc_msg, "no such tag: caf%C3%A9 100%25");
    ck_assert_uint_eq(r->body_len, 0);

    /* An HTTP answer to a gRPC call comes as its gRPC status. */
    r = cli_req(k, "POST", "/test.Svc/Http", buf, n, grpc_hdrs);
    cli_wait(k, r);
    ck_assert_int_eq(r->grpc_status, 14);
    ck_assert_str_eq(r->grpc_msg, "busy");
    cli_free(k);
}
END_TEST


START_TEST(test_many_streams)
{
    struct cli *k = cli_new(http_server_grpc_port(srv));
    struct cli_resp *r[200];
    char buf[200][32], want[32];
    size_t n;
    int i;

    /* More calls than SETTINGS_MAX_CONCURRENT_STREAMS (100): nghttp2's
     * client queues the rest until streams close. */
    for (i = 0; i < 200; i++) {
        snprintf(want, sizeof want, "call-%d", i);
        n = grpc_body(buf[i], want, strlen(want));
        r[i] = cli_req(k, "POST", "/test.Svc/Echo", buf[i], n, grpc_hdrs);
        cli_io(k, 0);
    }
    for (i = 0; i < 200; i++) {
        cli_wait(k, r[i]);
        snprintf(want, sizeof want, "call-%d", i);
        ck_assert_int_eq(r[i]->grpc_status, 0);
        ck_grpc_msg(r[i], want);
    }
    ck_assert_uint_le(nghttp2_session_get_remote_settings(k->ng,
                      NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS), 100);
    cli_free(k);
}
END_TEST

START_TEST(test_park_and_wake)
{
    struct cli *k = cli_new(http_server_grpc_port(srv));
    char buf[32];
    size_t n = grpc_body(buf, "x", 1);
    struct cli_resp *p = cli_req(k, "POST", "/test.Svc/Park", buf, n, grpc_hdrs);
    struct cli_resp *e;

    cli_until_parked(k, 1);
    ck_assert_int_eq(atomic_load(&park_calls), 1);
    /* A call after the parked one is answered while it waits. */
    e = cli_req(k, "POST", "/test.Svc/Echo", buf, n, grpc_hdrs);
    cli_wait(k, e);
    ck_grpc_msg(e, "x");
    ck_assert(!p->closed);
    ck_assert_int_eq(atomic_load(&park_calls), 1);
    atomic_store(&park_ready, 1);
    http_wake(srv, PARK_KEY);
    cli_wait(k, p);
    ck_assert_int_eq(p->grpc_status, 0);
    ck_grpc_msg(p, "woke");
    cli_free(k);
}
END_TEST

/* Streams park, wake, time out and reset independently. */
START_TEST(test_many_parked)
{
    struct cli *k = cli_new(http_server_grpc_port(srv));
    struct cli_resp *p[40], *e[10], *t;
    struct http_stats st;
    char buf[32];
    size_t n = grpc_body(buf, "x", 1);
    int i;

    for (i = 0; i < 40; i++)
        p[i] = cli_req(k, "POST", "/test.Svc/Park", buf, n, grpc_hdrs);
    cli_until_parked(k, 40);
    ck_assert_int_eq(atomic_load(&park_calls), 40);
    http_server_stats(srv, &st);
    ck_assert_uint_eq(st.requests_parked, 40);
    for (i = 0; i < 10; i++)
        e[i] = cli_req(k, "POST", "/test.Svc/Echo", buf, n, grpc_hdrs);
    t = cli_req(k, "POST", "/test.Svc/ParkShort", buf, n, grpc_hdrs);
    for (i = 0; i < 10; i++) {
        cli_wait(k, e[i]);
        ck_grpc_msg(e[i], "x");
    }
    cli_wait(k, t);
    ck_assert_int_eq(t->grpc_status, 4);
    for (i = 0; i < 10; i++)
        ck_assert_int_eq(nghttp2_submit_rst_stream(k->ng, NGHTTP2_FLAG_NONE,
                                                   p[i]->id, NGHTTP2_CANCEL), 0);
    for (i = 0; i < 3000; i++) {
        cli_io(k, 10);
        http_server_stats(srv, &st);
        if (st.requests_parked == 30)
            break;
    }
    ck_assert_uint_eq(st.requests_parked, 30);
    atomic_store(&park_ready, 1);
    http_wake(srv, PARK_KEY);
    for (i = 10; i < 40; i++) {
        cli_wait(k, p[i]);
        ck_assert_int_eq(p[i]->grpc_status, 0);
        ck_grpc_msg(p[i], "woke");
    }
    ck_assert_int_eq(atomic_load(&park_calls), 70);  /* 40 parks, 30 wakes */
    http_server_stats(srv, &st);
    ck_assert_uint_eq(st.requests_parked, 0);
    cli_free(k);
}
END_TEST

START_TEST(test_reset_while_parked)
{
    struct cli *k = cli_new(http_server_port(srv));
    struct cli_resp *p = cli_req(k, "GET", "/park", NULL, 0, NULL);
    struct cli_resp *a;
    struct http_stats st;

    cli_until_parked(k, 1);
    ck_assert_int_eq(atomic_load(&park_calls), 1);
    ck_assert_int_eq(nghttp2_submit_rst_stream(k->ng, NGHTTP2_FLAG_NONE, p->id,
                                               NGHTTP2_CANCEL), 0);
    /* The next request is served: the reset one no longer holds it back. */
    a = cli_req(k, "GET", "/hello", NULL, 0, NULL);
    cli_wait(k, a);
    ck_assert_int_eq(a->status, 200);
    http_server_stats(srv, &st);
    ck_assert_uint_eq(st.requests_parked, 0);
    /* A wake finds nothing: the handler is not called for it again. */
    atomic_store(&park_ready, 1);
    http_wake(srv, PARK_KEY);
    a = cli_req(k, "GET", "/hello", NULL, 0, NULL);
    cli_wait(k, a);
    ck_assert_int_eq(atomic_load(&park_calls), 1);
    ck_assert_int_eq(p->status, 0);
    cli_free(k);
}
END_TEST

START_TEST(test_grpc_refusals)
{
    struct cli *k = cli_new(http_server_grpc_port(srv));
    static const char *const json_hdrs[] = { "content-type", "application/json",
                                             NULL };
    static const char *const gzip_hdrs[] = { "content-type", "application/grpc",
                                             "grpc-encoding", "gzip", NULL };
    static const char *const bad_to[] = { "content-type", "application/grpc+proto",
                                          "grpc-timeout", "123456789S", NULL };
    static const char *const to[] = { "content-type", "application/grpc",
                                      "grpc-timeout", "250m", NULL };
    char buf[256], big[300];
    size_t n = grpc_body(buf, "x", 1);
    struct cli_resp *r;

    r = cli_req(k, "POST", "/test.Svc/Echo", buf, n, json_hdrs);
    cli_wait(k, r);
    ck_assert_int_eq(r->status, 415);
    ck_assert_int_eq(r->grpc_status, 3);

    r = cli_req(k, "GET", "/test.Svc/Echo", NULL, 0, grpc_hdrs);
    cli_wait(k, r);
    ck_assert_int_eq(r->status, 405);
    ck_assert_int_eq(r->grpc_status, 3);

    r = cli_req(k, "POST", "/test.Svc/Echo", buf, n, gzip_hdrs);
    cli_wait(k, r);
    ck_assert_int_eq(r->grpc_status, 12);

    r = cli_req(k, "POST", "/test.Svc/Echo", buf, n, bad_to);
    cli_wait(k, r);
    ck_assert_int_eq(r->grpc_status, 3);

    r = cli_req(k, "POST", "/test.Svc/Timeout", buf, n, to);
    cli_wait(k, r);
    ck_assert_int_eq(r->grpc_status, 0);
    ck_grpc_msg(r, "250000");
    ck_assert_str_eq(r->grpc_msg, "ok");

    /* The compressed flag. */
    buf[0] = 1;
    r = cli_req(k, "POST", "/test.Svc/Echo", buf, n, grpc_hdrs);
    cli_wait(k, r);
    ck_assert_int_eq(r->grpc_status, 12);
    buf[0] = 0;

    /* No message, a truncated one, two. */
    r = cli_req(k, "POST", "/test.Svc/Echo", "", 0, grpc_hdrs);
    cli_wait(k, r);
    ck_assert_int_eq(r->grpc_status, 13);
    r = cli_req(k, "POST", "/test.Svc/Echo", buf, n - 1, grpc_hdrs);
    cli_wait(k, r);
    ck_assert_int_eq(r->grpc_status, 13);
    memcpy(buf + n, buf, n);
    r = cli_req(k, "POST", "/test.Svc/Echo", buf, 2 * n, grpc_hdrs);
    cli_wait(k, r);
    ck_assert_int_eq(r->grpc_status, 13);

    /* Over grpc_max_message_bytes (100 here): refused from its prefix. */
    memset(big, 'a', sizeof big);
    n = grpc_body(buf, big, 101);
    r = cli_req(k, "POST", "/test.Svc/Echo", buf, n, grpc_hdrs);
    cli_wait(k, r);
    ck_assert_int_eq(r->grpc_status, 8);
    n = grpc_body(buf, big, 100);
    r = cli_req(k, "POST", "/test.Svc/Echo", buf, n, grpc_hdrs);
    cli_wait(k, r);
    ck_assert_int_eq(r->grpc_status, 0);
    ck_assert_uint_eq(r->body_len, 105);

    /* An unknown method is the handler's to answer. */
    n = grpc_body(buf, "x", 1);
    r = cli_req(k, "POST", "/test.Svc/Nope", buf, n, grpc_hdrs);
    cli_wait(k, r);
    ck_assert_int_eq(r->grpc_status, 12);
    ck_assert(!k->eof);
    cli_free(k);
}
END_TEST

static ssize_t
cli_never_cb(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len,
             uint32_t *flags, nghttp2_data_source *src, void *arg)
{
    (void)ng; (void)id; (void)buf; (void)len; (void)flags; (void)src; (void)arg;
    return NGHTTP2_ERR_DEFERRED;
}

/* A call refused from its headers while its body is still coming: the
 * answer, then RST_STREAM NO_ERROR (the client may stop sending). */
START_TEST(test_early_answer_resets)
{
    struct cli *k = cli_new(http_server_grpc_port(srv));
    nghttp2_nv nv[5];
    nghttp2_data_provider prd = { .source.ptr = NULL, .read_callback = cli_never_cb };
    struct cli_resp *r = &k->r[k->n++];

    memset(r, 0, sizeof *r);
    nv[0] = NV(":method", "POST");
    nv[1] = NV(":scheme", "http");
    nv[2] = NV(":authority", "x");
    nv[3] = NV(":path", "/test.Svc/Echo");
    nv[4] = NV("content-type", "text/plain");
    r->id = nghttp2_submit_request(k->ng, NULL, nv, 5, &prd, NULL);
    ck_assert_int_gt(r->id, 0);
    cli_wait(k, r);
    ck_assert_int_eq(r->status, 415);
    ck_assert_int_eq(r->grpc_status, 3);
    ck_assert_uint_eq(r->rst, NGHTTP2_NO_ERROR);
    cli_free(k);
}
END_TEST

START_TEST(test_h2c_limits)
{
    struct cli *k = cli_new(http_server_port(srv));
    static const char *const auth[] = { "authorization", "Bearer s3cret", NULL };
    static char big[3000], huge[9000];
    const char *hh[] = { "x-big", huge, NULL };
    struct cli_resp *r;

    memset(big, 'b', sizeof big);
    r = cli_req(k, "GET", "/auth", NULL, 0, auth);
    cli_wait(k, r);
    ck_assert_int_eq(r->status, 200);
    ck_assert_uint_eq(r->body_len, 13);
    ck_assert(memcmp(r->body, "Bearer s3cret", 13) == 0);

    /* A body is read and dropped, up to max_body_bytes (1000 here). */
    r = cli_req(k, "POST", "/hello", big, 900, NULL);
    cli_wait(k, r);
    ck_assert_int_eq(r->status, 200);
    r = cli_req(k, "POST", "/hello", big, 3000, NULL);
    cli_wait(k, r);
    ck_assert_int_eq(r->status, 413);
    ck_assert_str_eq(r->ctype, "application/json");
    ck_assert(strstr(r->body, "\"error\":\"body_too_large\"") != NULL);

    /* The layer's own 500, as on HTTP/1.1. */
    r = cli_req(k, "GET", "/silent", NULL, 0, NULL);
    cli_wait(k, r);
    ck_assert_int_eq(r->status, 500);

    /* A header list over max_header_bytes (8192 by default). */
    memset(huge, 'h', sizeof huge - 1);
    r = cli_req(k, "GET", "/hello", NULL, 0, hh);
    cli_wait(k, r);
    ck_assert_int_eq(r->status, 431);

    r = cli_req(k, "GET", "/hello", NULL, 0, NULL);
    cli_wait(k, r);
    ck_assert_int_eq(r->status, 200);
    cli_free(k);
}
END_TEST

/* Raw bytes: what no HTTP/2 client library would send. */
static size_t
read_all(int fd, char *buf, size_t cap)
{
    struct pollfd p = { fd, POLLIN, 0 };
    size_t n = 0;
    ssize_t r;

    while (n < cap && poll(&p, 1, 10000) > 0) {
        r = recv(fd, buf + n, cap - n, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    return n;
}

START_TEST(test_bad_preface)
{
    static const char not_h2[] = "PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n";
    static const char h1[] = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
    char buf[4096];
    size_t n;
    int fd;

    /* On the HTTP port: not the preface, so HTTP/1.1 and an error. */
    fd = tcp_connect(http_server_port(srv));
    ck_assert_int_eq(send(fd, not_h2, sizeof not_h2 - 1, 0), sizeof not_h2 - 1);
    n = read_all(fd, buf, sizeof buf - 1);
    buf[n] = '\0';
    ck_assert_msg(strncmp(buf, "HTTP/1.1 505", 12) == 0 ||
                  strncmp(buf, "HTTP/1.1 400", 12) == 0, "got %s", buf);
    close(fd);

    /* HTTP/1.1 still works there, sent a byte at a time. */
    fd = tcp_connect(http_server_port(srv));
    for (size_t i = 0; i < sizeof h1 - 1; i++)
        ck_assert_int_eq(send(fd, h1 + i, 1, 0), 1);
    n = recv(fd, buf, sizeof buf - 1, 0);
    ck_assert_int_gt(n, 12);
    ck_assert(strncmp(buf, "HTTP/1.1 200", 12) == 0);
    close(fd);

    /* On the gRPC port: HTTP/1.1 gets the connection closed. */
    fd = tcp_connect(http_server_grpc_port(srv));
    ck_assert_int_eq(send(fd, h1, sizeof h1 - 1, 0), sizeof h1 - 1);
    n = read_all(fd, buf, sizeof buf);
    ck_assert(n < 12 || strncmp(buf, "HTTP/1.1", 8) != 0);
    close(fd);
}
END_TEST

static void *
stop_thread(void *arg)
{
    (void)arg;
    http_server_stop(srv, 20000);
    return NULL;
}

START_TEST(test_stop_with_streams)
{
    struct cli *k = cli_new(http_server_grpc_port(srv));
    char buf[32];
    size_t n = grpc_body(buf, "x", 1);
    struct cli_resp *p = cli_req(k, "POST", "/test.Svc/Park", buf, n, grpc_hdrs);
    struct cli_resp *e = cli_req(k, "POST", "/test.Svc/Echo", buf, n, grpc_hdrs);
    pthread_t th;
    int i;

    cli_until_parked(k, 1);
    ck_assert_int_eq(atomic_load(&park_calls), 1);
    for (i = 0; i < 10; i++)
        cli_io(k, 10);
    ck_assert_int_eq(pthread_create(&th, NULL, stop_thread, NULL), 0);
    for (i = 0; i < 3000 && !k->goaway; i++)
        cli_io(k, 10);
    ck_assert(k->goaway);
    ck_assert_int_ge(k->goaway_last, e->id);     /* both will be answered */
    ck_assert(!p->closed);
    atomic_store(&park_ready, 1);
    http_wake(srv, PARK_KEY);
    cli_wait(k, p);
    cli_wait(k, e);
    ck_grpc_msg(p, "woke");
    ck_grpc_msg(e, "x");
    for (i = 0; i < 3000 && !k->eof; i++)
        cli_io(k, 10);
    ck_assert(k->eof);                          /* then the server closes */
    pthread_join(th, NULL);
    cli_free(k);
}
END_TEST

START_TEST(test_grpc_frame_parse)
{
    static const unsigned char ok[] = { 0, 0, 0, 0, 2, 'h', 'i', 'x' };
    static const unsigned char big[] = { 0, 0x80, 0, 0, 0 };
    static const unsigned char zip[] = { 1, 0, 0, 0, 0 };
    static const unsigned char bad[] = { 2, 0, 0, 0, 0 };
    const unsigned char *m = NULL;
    size_t ml = 0, used = 0;

    ck_assert_int_eq(grpc_frame_parse(ok, 8, 10, &m, &ml, &used), GRPC_FRAME_OK);
    ck_assert(m == ok + 5);
    ck_assert_uint_eq(ml, 2);
    ck_assert_uint_eq(used, 7);
    ck_assert_int_eq(grpc_frame_parse(ok, 6, 10, &m, &ml, &used), GRPC_FRAME_MORE);
    ck_assert_int_eq(grpc_frame_parse(ok, 4, 10, &m, &ml, &used), GRPC_FRAME_MORE);
    ck_assert_int_eq(grpc_frame_parse(ok, 8, 1, &m, &ml, &used),
                     GRPC_FRAME_TOO_LARGE);
    ck_assert_int_eq(grpc_frame_parse(big, 5, 1u << 30, &m, &ml, &used),
                     GRPC_FRAME_TOO_LARGE);
    ck_assert_int_eq(grpc_frame_parse(zip, 5, 10, &m, &ml, &used),
                     GRPC_FRAME_COMPRESSED);
    ck_assert_int_eq(grpc_frame_parse(bad, 5, 10, &m, &ml, &used),
                     GRPC_FRAME_BAD_FLAG);
    ck_assert_int_eq(grpc_frame_parse(ok, 5, 0, &m, &ml, &used),
                     GRPC_FRAME_TOO_LARGE);
}
END_TEST

START_TEST(test_grpc_timeout_parse)
{
    static const struct { const char *s; int rc; int64_t us; } cases[] = {
        { "1H", 0, INT64_C(3600000000) }, { "2M", 0, 120000000 },
        { "3S", 0, 3000000 }, { "250m", 0, 250000 }, { "7u", 0, 7 },
        { "1500n", 0, 2 }, { "1n", 0, 1 }, { "0S", 0, 1 },
        { "99999999S", 0, INT64_C(99999999000000) },
        { "99999999H", 0, GRPC_TIMEOUT_MAX_US },
        { "123456789S", -1, 0 }, { "S", -1, 0 }, { "", -1, 0 },
        { "10s", -1, 0 }, { "1.5S", -1, 0 }, { "-1S", -1, 0 }, { "10", -1, 0 },
        { " 1S", -1, 0 },
    };
    int64_t us;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        us = -5;
        ck_assert_int_eq(grpc_timeout_parse(cases[i].s, strlen(cases[i].s), &us),
                         cases[i].rc);
        if (cases[i].rc == 0)
            ck_assert_msg(us == cases[i].us, "%s: %lld", cases[i].s,
                          (long long)us);
    }
}
END_TEST

START_TEST(test_grpc_message_encode)
{
    char out[16];

    ck_assert_uint_eq(grpc_message_encode(out, sizeof out, "a b%\n"), 9);
    ck_assert_str_eq(out, "a b%25%0A");
    /* Cut at a whole character. */
    ck_assert_uint_eq(grpc_message_encode(out, 6, "abcd%"), 4);
    ck_assert_str_eq(out, "abcd");
    ck_assert_uint_eq(grpc_message_encode(out, 1, "abc"), 0);
    ck_assert_str_eq(out, "");
}
END_TEST


/* A client that floods PINGs and never reads: the output high-water mark
 * stops leafd reading it, other clients are served meanwhile, and the
 * slow-reader deadline closes it. */
START_TEST(test_never_reads)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                                  "\0\0\0\x04\0\0\0\0\0";
    static char pings[17 * 1024];
    struct http_stats st;
    struct cli *k;
    struct cli_resp *r;
    size_t sent = 0;
    ssize_t n;
    int fd, small = 4096, i;

    for (i = 0; i < 1024; i++)
        memcpy(pings + 17 * i, "\0\0\x08\x06\0\0\0\0\0pingpong", 17);
    fd = tcp_connect(http_server_port(srv));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    ck_assert_int_eq(send(fd, preface, sizeof preface - 1, 0), sizeof preface - 1);
    /* Send until the kernel's buffers and leafd's input are full. */
    for (i = 0; i < 4000 && sent < (64u << 20); i++) {
        n = send(fd, pings, sizeof pings, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            sent += (size_t)n;
            continue;
        }
        if (errno != EAGAIN)
            break;
        usleep(2000);
        if (i > 200 && n < 0)
            break;
    }
    /* More PINGs than 256 KiB of ACKs, and then leafd stopped reading. */
    ck_assert_uint_gt(sent, 300u << 10);
    ck_assert_uint_lt(sent, 64u << 20);

    k = cli_new(http_server_port(srv));
    r = cli_req(k, "GET", "/hello", NULL, 0, NULL);
    cli_wait(k, r);
    ck_assert_int_eq(r->status, 200);
    cli_free(k);

    for (i = 0; i < 3000; i++) {
        http_server_stats(srv, &st);
        if (st.timeouts >= 1 && st.connections_open == 0)
            break;
        usleep(10000);
    }
    ck_assert_uint_ge(st.timeouts, 1);
    ck_assert_uint_eq(st.connections_open, 0);
    ck_assert_uint_eq(st.h2_open, 0);
    close(fd);
}
END_TEST

/* An HTTP/2 connection with nothing in flight is closed after the idle
 * timeout (400 ms here); one with a parked stream is not. */
START_TEST(test_idle_close)
{
    struct cli *k = cli_new(http_server_port(srv));
    struct cli *w = cli_new(http_server_port(srv));
    struct cli_resp *r = cli_req(k, "GET", "/hello", NULL, 0, NULL);
    struct cli_resp *p = cli_req(w, "GET", "/park", NULL, 0, NULL);
    int i;

    cli_wait(k, r);
    ck_assert_int_eq(r->status, 200);
    for (i = 0; i < 3000 && !k->eof; i++) {
        cli_io(k, 10);
        cli_io(w, 0);
    }
    ck_assert(k->eof);
    ck_assert(!w->eof && !p->closed);
    ck_assert_int_eq(atomic_load(&park_calls), 1);
    atomic_store(&park_ready, 1);
    http_wake(srv, PARK_KEY);
    cli_wait(w, p);
    ck_assert_int_eq(p->status, 200);
    cli_free(k);
    cli_free(w);
}
END_TEST

static void
setup_short_idle(void)
{
    struct http_config cfg;
    char *cause = NULL;

    memset(&cfg, 0, sizeof cfg);
    cfg.address = "127.0.0.1";
    cfg.threads = 1;
    cfg.idle_timeout_ms = 400;
    srv = http_server_new(&cfg, handler, NULL, NULL, &cause);
    ck_assert_msg(srv != NULL, "http_server_new: %s", cause);
    ck_assert_int_eq(http_server_start(srv, &cause), 0);
    atomic_store(&park_ready, 0);
    atomic_store(&park_calls, 0);
}

/* A message in many DATA frames, up to grpc_max_message_bytes. */
START_TEST(test_grpc_big_message)
{
    struct cli *k = cli_new(http_server_grpc_port(srv));
    static char msg[65536], buf[65536 + 10];
    size_t n;
    struct cli_resp *r;
    char want[32];

    memset(msg, 'm', sizeof msg);
    msg[sizeof msg - 1] = 'z';
    n = grpc_body(buf, msg, sizeof msg);
    r = cli_req(k, "POST", "/test.Svc/Len", buf, n, grpc_hdrs);
    cli_wait(k, r);
    ck_assert_int_eq(r->grpc_status, 0);
    snprintf(want, sizeof want, "65536 %d", 'z');
    ck_grpc_msg(r, want);
    n = grpc_body(buf, msg, sizeof msg);
    buf[4] = 1;                                 /* 65537 bytes announced */
    r = cli_req(k, "POST", "/test.Svc/Len", buf, n, grpc_hdrs);
    cli_wait(k, r);
    ck_assert_int_eq(r->grpc_status, 8);
    cli_free(k);
}
END_TEST

/* A client that opens more streams than SETTINGS_MAX_CONCURRENT_STREAMS
 * (100 here) before it reads the server's SETTINGS: the ones past 100 are
 * refused (REFUSED_STREAM), the rest served. */
START_TEST(test_stream_limit)
{
    struct cli *k = cli_new_opt(http_server_grpc_port(srv), 1000);
    struct cli_resp *r[150];
    struct http_stats st;
    char buf[32];
    size_t n = grpc_body(buf, "x", 1);
    int i, refused = 0;

    for (i = 0; i < 150; i++)
        r[i] = cli_req(k, "POST", "/test.Svc/Park", buf, n, grpc_hdrs);
    ck_assert_int_eq(nghttp2_session_send(k->ng), 0);
    cli_until_parked(k, 100);
    for (i = 0; i < 100; i++)
        cli_io(k, 10);
    ck_assert_int_eq(atomic_load(&park_calls), 100);
    http_server_stats(srv, &st);
    ck_assert_uint_eq(st.requests_parked, 100);
    for (i = 0; i < 150; i++)
        if (r[i]->closed && r[i]->rst == NGHTTP2_REFUSED_STREAM)
            refused++;
    ck_assert_int_eq(refused, 50);
    atomic_store(&park_ready, 1);
    http_wake(srv, PARK_KEY);
    for (i = 0; i < 150; i++) {
        cli_wait(k, r[i]);
        if (r[i]->rst != NGHTTP2_REFUSED_STREAM)
            ck_grpc_msg(r[i], "woke");
    }
    ck_assert(!k->eof);
    cli_free(k);
}
END_TEST

static void
setup_small(void)
{
    start_server(100, 100);
}

static Suite *
h2_suite(void)
{
    Suite *s = suite_create("h2");
    TCase *tc = tcase_create("server");

    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_h2c_get);
    tcase_add_test(tc, test_grpc_unary);
    tcase_add_test(tc, test_many_streams);
    tcase_add_test(tc, test_park_and_wake);
    tcase_add_test(tc, test_reset_while_parked);
    tcase_add_test(tc, test_many_parked);
    tcase_add_test(tc, test_early_answer_resets);
    tcase_add_test(tc, test_grpc_big_message);
    tcase_add_test(tc, test_h2c_limits);
    tcase_add_test(tc, test_bad_preface);
    tcase_add_test(tc, test_stop_with_streams);
    suite_add_tcase(s, tc);

    tc = tcase_create("limits");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup_small, teardown);
    tcase_add_test(tc, test_grpc_refusals);
    tcase_add_test(tc, test_stream_limit);
    suite_add_tcase(s, tc);

    tc = tcase_create("slow_reader");
    tcase_set_timeout(tc, 90);
    tcase_add_checked_fixture(tc, setup_short_idle, teardown);
    tcase_add_test(tc, test_never_reads);
    tcase_add_test(tc, test_idle_close);
    suite_add_tcase(s, tc);

    tc = tcase_create("grpc_frame");
    tcase_add_test(tc, test_grpc_frame_parse);
    tcase_add_test(tc, test_grpc_timeout_parse);
    tcase_add_test(tc, test_grpc_message_encode);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(h2_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
