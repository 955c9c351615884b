/* check_h2.c: HTTP/2 on the HTTP front end, in process: a real server on
 * loopback ports (h2c on the HTTP port, and the gRPC port) with a test
 * handler, driven by nghttp2's client session over blocking sockets, and by
 * raw bytes where a client library would refuse to misbehave. */
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
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
};

struct cli {
    int              fd;
    nghttp2_session *ng;
    struct cli_resp  r[CLI_MAX];
    int              n;
    int              goaway;
    int32_t          goaway_last;
    int              eof;
    const char      *req_body;
    size_t           req_len, req_off;
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

static struct cli *
cli_new(int port)
{
    struct cli *k = calloc(1, sizeof *k);
    nghttp2_session_callbacks *cb;

    k->fd = tcp_connect(port);
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_send_callback(cb, cli_send_cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, cli_header_cb);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, cli_data_cb);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, cli_close_cb);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, cli_frame_cb);
    ck_assert_int_eq(nghttp2_session_client_new(&k->ng, cb, k), 0);
    nghttp2_session_callbacks_del(cb);
    ck_assert_int_eq(nghttp2_submit_settings(k->ng, NGHTTP2_FLAG_NONE, NULL, 0), 0);
    return k;
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
    struct cli *k = arg;
    size_t n = k->req_len - k->req_off;

    (void)ng;
    (void)id;
    (void)src;
    if (n > len)
        n = len;
    memcpy(buf, k->req_body + k->req_off, n);
    k->req_off += n;
    if (k->req_off == k->req_len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* Submit a request; extra: NULL or "name", "value", ..., NULL. The body is
 * sent whole before the next request's (one at a time). */
static struct cli_resp *
cli_req(struct cli *k, const char *method, const char *path, const char *body,
        size_t len, const char *const *extra)
{
    nghttp2_nv nv[16];
    size_t n = 0;
    nghttp2_data_provider prd;
    int32_t id;

#define NV(a, b) (nghttp2_nv){ (uint8_t *)(a), (uint8_t *)(b), strlen(a), \
                               strlen(b), NGHTTP2_NV_FLAG_NONE }
    nv[n++] = NV(":method", method);
    nv[n++] = NV(":scheme", "http");
    nv[n++] = NV(":authority", "localhost");
    nv[n++] = NV(":path", path);
    for (; extra != NULL && *extra != NULL; extra += 2)
        nv[n++] = NV(extra[0], extra[1]);
    k->req_body = body;
    k->req_len = len;
    k->req_off = 0;
    prd.source.ptr = NULL;
    prd.read_callback = cli_body_cb;
    id = nghttp2_submit_request(k->ng, NULL, nv, n, body != NULL ? &prd : NULL,
                                NULL);
    ck_assert_int_gt(id, 0);
    ck_assert_int_lt(k->n, CLI_MAX);
    memset(&k->r[k->n], 0, sizeof k->r[k->n]);
    k->r[k->n].id = id;
    return &k->r[k->n++];
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

static Suite *
h2_suite(void)
{
    Suite *s = suite_create("h2");
    TCase *tc = tcase_create("server");

    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_h2c_get);
    tcase_add_test(tc, test_grpc_unary);
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
