/* h2cli.c: a blocking HTTP/2 client for the unit tests (see h2cli.h). */
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "grpc_frame.h"
#include "h2cli.h"

static struct h2cli_resp *
h2cli_find(struct h2cli *k, int32_t id)
{
    for (int i = 0; i < k->n; i++)
        if (k->r[i].id == id)
            return &k->r[i];
    return NULL;
}

static ssize_t
h2cli_send_cb(nghttp2_session *ng, const uint8_t *data, size_t len, int flags,
            void *arg)
{
    struct h2cli *k = arg;
    ssize_t n;

    (void)ng;
    (void)flags;
    n = send(k->fd, data, len, MSG_NOSIGNAL);
    if (n < 0)
        return errno == EAGAIN ? NGHTTP2_ERR_WOULDBLOCK : NGHTTP2_ERR_CALLBACK_FAILURE;
    return n;
}

static int
h2cli_header_cb(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
              size_t nl, const uint8_t *value, size_t vl, uint8_t flags,
              void *arg)
{
    struct h2cli_resp *r = h2cli_find(arg, f->hd.stream_id);

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
h2cli_data_cb(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
            size_t len, void *arg)
{
    struct h2cli_resp *r = h2cli_find(arg, id);

    (void)ng;
    (void)flags;
    if (r != NULL && r->body_len + len <= sizeof r->body) {
        memcpy(r->body + r->body_len, data, len);
        r->body_len += len;
    }
    return 0;
}

static int
h2cli_close_cb(nghttp2_session *ng, int32_t id, uint32_t code, void *arg)
{
    struct h2cli_resp *r = h2cli_find(arg, id);

    (void)ng;
    if (r != NULL) {
        r->closed = 1;
        r->rst = code;
    }
    return 0;
}

static int
h2cli_frame_cb(nghttp2_session *ng, const nghttp2_frame *f, void *arg)
{
    struct h2cli *k = arg;

    (void)ng;
    if (f->hd.type == NGHTTP2_GOAWAY) {
        k->goaway = 1;
        k->goaway_last = f->goaway.last_stream_id;
    }
    return 0;
}

int
h2cli_connect(int port)
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
struct h2cli *
h2cli_new_opt(int port, uint32_t peer_streams)
{
    struct h2cli *k = calloc(1, sizeof *k);
    nghttp2_session_callbacks *cb;
    nghttp2_option *opt;

    k->fd = h2cli_connect(port);
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_send_callback(cb, h2cli_send_cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, h2cli_header_cb);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, h2cli_data_cb);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, h2cli_close_cb);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, h2cli_frame_cb);
    nghttp2_option_new(&opt);
    if (peer_streams > 0)
        nghttp2_option_set_peer_max_concurrent_streams(opt, peer_streams);
    ck_assert_int_eq(nghttp2_session_client_new2(&k->ng, cb, k, opt), 0);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
    ck_assert_int_eq(nghttp2_submit_settings(k->ng, NGHTTP2_FLAG_NONE, NULL, 0), 0);
    return k;
}

struct h2cli *
h2cli_new(int port)
{
    return h2cli_new_opt(port, 0);
}

void
h2cli_free(struct h2cli *k)
{
    nghttp2_session_del(k->ng);
    close(k->fd);
    free(k);
}

static ssize_t
h2cli_body_cb(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len,
            uint32_t *flags, nghttp2_data_source *src, void *arg)
{
    struct h2cli_resp *r = src->ptr;
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
struct h2cli_resp *
h2cli_req(struct h2cli *k, const char *method, const char *path, const char *body,
        size_t len, const char *const *extra)
{
    nghttp2_nv nv[16];
    size_t n = 0;
    nghttp2_data_provider prd;
    struct h2cli_resp *r;
    int32_t id;

    nv[n++] = H2CLI_NV(":method", method);
    nv[n++] = H2CLI_NV(":scheme", "http");
    nv[n++] = H2CLI_NV(":authority", "localhost");
    nv[n++] = H2CLI_NV(":path", path);
    for (; extra != NULL && *extra != NULL; extra += 2)
        nv[n++] = H2CLI_NV(extra[0], extra[1]);
    ck_assert_int_lt(k->n, H2CLI_MAX);
    r = &k->r[k->n++];
    memset(r, 0, sizeof *r);
    r->src = body;
    r->src_len = len;
    prd.source.ptr = r;
    prd.read_callback = h2cli_body_cb;
    id = nghttp2_submit_request(k->ng, NULL, nv, n, body != NULL ? &prd : NULL,
                                NULL);
    ck_assert_int_gt(id, 0);
    r->id = id;
    return r;
}

const char *const h2cli_grpc_hdrs[] = { "content-type", "application/grpc",
                                         "te", "trailers", NULL };

/* A framed gRPC request for msg into buf. */
size_t
h2cli_grpc_body(char *buf, const char *msg, size_t len)
{
    grpc_frame_prefix((unsigned char *)buf, len);
    memcpy(buf + GRPC_FRAME_PREFIX, msg, len);
    return GRPC_FRAME_PREFIX + len;
}

/* Send what the session has, read what comes for up to ms. */
void
h2cli_io(struct h2cli *k, int ms)
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
void
h2cli_wait(struct h2cli *k, struct h2cli_resp *r)
{
    for (int i = 0; i < 3000 && !r->closed && !k->eof; i++)
        h2cli_io(k, 10);
    ck_assert_msg(r->closed, "stream %d not answered", r->id);
}

/* The grpc reply's message, unframed. */
void
h2cli_ck_grpc_msg(const struct h2cli_resp *r, const char *want)
{
    const unsigned char *m;
    size_t mlen, used;

    ck_assert_int_eq(grpc_frame_parse((const unsigned char *)r->body, r->body_len,
                                      1 << 20, &m, &mlen, &used), GRPC_FRAME_OK);
    ck_assert_uint_eq(used, r->body_len);
    ck_assert_uint_eq(mlen, strlen(want));
    ck_assert(memcmp(m, want, mlen) == 0);
}
