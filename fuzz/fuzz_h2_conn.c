/* fuzz_h2_conn.c: libFuzzer target for the HTTP/2 glue (http_h2.c) inside
 * a real server connection: the bytes go through a socket pair into
 * http_conn.c's read path, the nghttp2 server session, the stream queue, a
 * trivial handler (answers, parks with a 0 ms timeout and is woken, gRPC
 * echo) and the answers, on the server's own event loop, run in this
 * thread.
 *
 * Checked on every input: nothing crashes or leaks (ASan), and once the
 * connection is gone the thread's counters are back at zero (no stream
 * still parked, no HTTP/2 session open).
 *
 * The memcached port too (http_conn_mc.c: text lines or binary frames, by
 * the first byte the client sends), its handler answering each call, or
 * parking, or answering nothing, as the key's first byte says.
 *
 * Input: the first byte picks the listener (bit 2: the memcached port;
 * else bit 0: the gRPC port, else the HTTP port) and, on the HTTP port,
 * whether the HTTP/2 preface is sent first (bit 1); the rest is what the
 * client sends.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "fuzz.h"
#include "http.h"
#include "http_internal.h"

static struct http_server *srv;

/* A memcached call: its key's first byte says park ('p', 0 ms), wait for
 * the wake ('w'), answer nothing ('s': the layer's 500), or answer. */
static void
handler_mc(struct http_conn *c, struct http_request *req)
{
    const struct mc_cmd *mc = req->mc;
    size_t tok = mc->kind == MC_GET ? req->mc_key : 1;
    char k = tok < mc->ntok && mc->len[tok] > 0 ? req->mc_line[mc->off[tok]] : 0;

    FUZZ_ASSERT(mc->kind != MC_GET || (req->mc_key >= 1 && req->mc_key <= mc->nkeys));
    FUZZ_ASSERT(!mc->binary || mc->nkeys <= 1);
    if ((k == 'p' && !req->timed_out) || (k == 'w' && !req->retry)) {
        http_park(c, k == 'p' ? 0 : 60000, 7);
        return;
    }
    if (k == 's')
        return;
    http_reply_mc(c, "VALUE x 0 1\r\n1\r\n", 16,
                  mc->kind == MC_QUIT ? HTTP_MC_END | HTTP_MC_CLOSE
                  : k == 'e' ? HTTP_MC_END : 0);
}

static void
handler(struct http_conn *c, struct http_request *req, void *arg)
{
    const struct http_msg *m = &req->msg;
    int park = m->path_len >= 2 && memcmp(m->path, "/p", 2) == 0;
    int wait = m->path_len >= 2 && memcmp(m->path, "/w", 2) == 0;

    (void)arg;
    if (req->mc != NULL) {
        handler_mc(c, req);
        return;
    }
    if ((park && !req->timed_out) || (wait && !req->retry)) {
        http_park(c, park ? 0 : 60000, 7);  /* /w: till the wake, or dropped */
        return;
    }
    if (req->proto == HTTP_REQ_GRPC) {
        FUZZ_ASSERT(req->body != NULL || req->body_len == 0);
        if (m->path_len > 2 && m->path[1] == 'e')
            http_reply_grpc(c, 3, "bad %", NULL, 0);
        else
            http_reply_grpc(c, 0, NULL, req->body, req->body_len);
        return;
    }
    FUZZ_ASSERT(req->proto == HTTP_REQ_H2 || req->proto == HTTP_REQ_HTTP1);
    if (m->path_len > 2 && m->path[1] == 's')
        return;                     /* answers nothing: the layer's 500 */
    http_reply(c, 200, "text/plain", "X-A: b\r\nConnection: close\r\n",
               m->path, m->path_len);
}

static void
init(void)
{
    struct http_config cfg;
    char *cause = NULL;

    memset(&cfg, 0, sizeof cfg);
    cfg.address = "127.0.0.1";
    cfg.threads = 1;
    cfg.max_body_bytes = 300;
    cfg.max_header_bytes = 1024;
    cfg.grpc_enable = 1;
    cfg.grpc_address = "127.0.0.1";
    cfg.grpc_max_message_bytes = 200;
    cfg.h2_max_concurrent_streams = 8;
    cfg.mc_enable = 1;
    cfg.mc_address = "127.0.0.1";
    srv = http_server_new(&cfg, handler, NULL, NULL, &cause);
    if (srv == NULL) {
        fprintf(stderr, "http_server_new: %s\n", cause);
        abort();
    }
}

static void
run(struct http_thread *t, int peer)
{
    char buf[65536];

    for (int i = 0; i < 4 && t->conns != NULL; i++) {
        if (i == 1)
            http_wake(srv, 7);      /* the parked streams, through the eventfd */
        event_base_loop(t->base, EVLOOP_NONBLOCK);
        while (read(peer, buf, sizeof buf) > 0)
            ;
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    struct http_thread *t;
    enum http_proto proto;
    size_t off = 0;
    ssize_t n;
    int sv[2];

    if (srv == NULL)
        init();
    if (size < 1)
        return 0;
    t = &srv->threads[0];
    proto = data[0] & 4 ? HTTP_PROTO_MC : data[0] & 1 ? HTTP_PROTO_GRPC
                                                      : HTTP_PROTO_HTTP;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0)
        return 0;
    atomic_fetch_add(&srv->nconns, 1);
    http_conn_new(t, sv[0], proto, 0);
    if (proto == HTTP_PROTO_HTTP && (data[0] & 2))
        (void)!write(sv[1], preface, sizeof preface - 1);
    data++;
    size--;
    while (off < size && t->conns != NULL) {
        n = write(sv[1], data + off, size - off > 4096 ? 4096 : size - off);
        if (n > 0)
            off += (size_t)n;
        else if (errno != EAGAIN)
            break;
        run(t, sv[1]);
    }
    run(t, sv[1]);
    shutdown(sv[1], SHUT_WR);       /* EOF: what is left finishes or closes */
    run(t, sv[1]);
    while (t->conns != NULL)
        http_conn_free(t->conns);
    close(sv[1]);
    FUZZ_ASSERT(t->nconns == 0);
    FUZZ_ASSERT(atomic_load(&t->nparked) == 0);
    FUZZ_ASSERT(atomic_load(&t->h2_open) == 0);
    FUZZ_ASSERT(atomic_load(&t->mc_open) == 0);
    FUZZ_ASSERT(atomic_load(&srv->nconns) == 0);
    return 0;
}
