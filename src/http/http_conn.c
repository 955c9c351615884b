/* http_conn.c: one HTTP connection on its I/O thread: read, parse, call the
 * handler, answer, close (see http.h; the threads are in http_server.c, a
 * parked request's wait in http_park.c).
 *
 * DESIGN
 *
 * Connections. One read event, persistent and level-triggered, stays added
 * while the connection may read, so a keep-alive request costs exactly one
 * recv(2) and one send(2). Input goes into a fixed buffer of max_header_bytes
 * + HTTP_IN_SLACK; all complete requests in it are answered into the output
 * buffer, which is then sent with one send(2). The unparsed tail is moved to
 * the front only before the next read, and only when no request is active
 * (a parked request's msg points into the buffer). Buffers come from a
 * per-thread free list and go back to it whenever the connection is idle, so
 * idle connections hold no buffer and requests do not allocate.
 *
 * Deadlines. Each connection has one timer, armed with the base's common
 * idle timeout (O(1)), and a deadline field that the request path merely
 * writes: idle keep-alive = last activity + idle; a partial request = its
 * first byte + idle (slowloris); blocked output = last progress + idle;
 * parked = none (the park timer rules). When the timer fires early it is
 * re-armed for the remaining time, so the request path never calls event_add.
 *
 * Parking: a request waiting for a key or a deadline is http_park.c's (its
 * DESIGN says why no wake is lost). A parked connection keeps reading into
 * the free part of its buffer (to see the client go away) but parses
 * nothing. The handler call (conn_call) reads the wake generation before and
 * after the handler; http_conn_retry calls the handler again for a parked
 * request, then sends its answer (a stream's through the send queue).
 *
 * Sends after reads. A read callback that leaves an answer to send does not
 * send it: the connection joins the thread's send queue and the thread's
 * send event is made active once. libevent runs active events in order, and
 * epoll's ready connections were all made active before it, so the queue is
 * sent after every connection that was ready in this loop iteration has been
 * read and answered, still in the same iteration (as Redis does in
 * beforeSleep). A client with many connections then gets its answers in one
 * burst instead of one wakeup per connection, and the thread finds the next
 * requests waiting instead of going to sleep between them. Other paths
 * (write ready, park timer, wake) send at once. A queued connection has
 * output, has not sent it and has not been updated (conn_update) yet; freeing
 * it takes it off the queue.
 *
 * RESP. A connection accepted on the RESP listener differs only where the
 * bytes do: conn_process_resp parses with resp_parse instead of
 * http_parse_request, and errors the layer answers itself are RESP errors.
 * Reading, buffers, deadlines (idle, slow command, slow reader), the output
 * high-water mark that stops parsing (so a client that never reads its
 * replies holds at most HTTP_OUT_HIGH plus one reply), parking and stop are
 * the same code. A command must fit in the input buffer; one that cannot is
 * refused and the connection closed, so nothing grows without bound. Unlike
 * HTTP, a RESP client that half-closes still gets an answer for every
 * complete command it sent before: the connection closes once they are all
 * answered.
 *
 * memcached. A connection accepted on the memcached listener is a RESP one
 * in all of the above but the parser (http_conn_mc.c: text or binary, by
 * the first byte), with one more step: the handler is called once per key
 * of a get, each call a request of its own (answered, or parked, in order).
 * A binary connection's errors the layer answers itself are error frames.
 *
 * HTTP/2. A connection that opens with the HTTP/2 preface (and every one on
 * the gRPC port) hands its input to http_h2.c's session instead of a parser;
 * reading, sending, deadlines, the high-water mark and closing stay here.
 * Each stream's request is a struct http_conn of its own (owner set, no
 * socket events): it parks and is retried by the same code as a connection,
 * and a retried stream's owner is then run from the send queue. While a
 * stream is with the handler, its owner has no idle deadline.
 *
 * TLS: a handshake first (conn_handshake), then only the bytes' path
 * differs; what holds and why is in http_tls.c's DESIGN.
 */
#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "http.h"
#include "http_internal.h"
#include "http_tls.h"
#include "log.h"
#include "util.h"

/* ---- connection plumbing ---- */

static void
conn_rev(struct http_conn *c, int on)
{
    if (on == c->rev_on)
        return;
    if (on)
        event_add(&c->rev, NULL);
    else
        event_del(&c->rev);
    c->rev_on = (unsigned char)on;
}

static void
conn_arm_timer(struct http_conn *c, int64_t now, int64_t at)
{
    struct timeval tv;

    if (at - now == c->t->s->cfg.idle_timeout_ms) {
        event_add(&c->tev, c->t->idle_tv);
    } else {
        tv = http_ms_tv(at - now);
        event_add(&c->tev, &tv);
    }
    c->timer_at_ms = at;
}

/* d is 0 (no deadline) or an absolute time in ms; only an earlier deadline
 * than the timer's needs the timer touched. */
static void
conn_set_deadline(struct http_conn *c, int64_t now, int64_t d)
{
    c->deadline_ms = d;
    if (d != 0 && d < c->timer_at_ms)
        conn_arm_timer(c, now, d);
}

/* The connection state machine's invariants (checked where it changes). */
static void
conn_check(const struct http_conn *c)
{
    assert(c->in_off <= c->in_len);
    assert(c->in == NULL ? c->in_len == 0 : c->in_len <= c->t->s->in_cap);
    assert(c->out_off <= c->out_len);
    assert(c->out == NULL ? c->out_len == 0 : c->out_len <= c->out_cap);
    assert(!c->parked || c->req_active);      /* only a live request parks */
    assert(!c->in_handler || c->req_active);
    assert(!c->lingering || (c->closing && !c->req_active && c->in == NULL));
    assert(!c->wev_on || c->out_off < c->out_len);
    assert(c->bucket < HTTP_WAKE_BUCKETS);
    (void)c;
}

static void
conn_unqueue(struct http_conn *c)
{
    struct http_thread *t = c->t;

    assert(c->queued);
    if (c->qprev != NULL)
        c->qprev->qnext = c->qnext;
    else
        t->sendq = c->qnext;
    if (c->qnext != NULL)
        c->qnext->qprev = c->qprev;
    c->qprev = c->qnext = NULL;
    c->queued = 0;
}

/* A request that goes away unanswered gives back what its handler holds
 * (http.h: on_drop). */
void
http_conn_drop_request(struct http_conn *c)
{
    void (*fn)(struct http_request *) = c->req.on_drop;

    if (c->req_active && fn != NULL) {
        c->req.on_drop = NULL;
        fn(&c->req);
    }
}

int
http_conn_idle(const struct http_conn *c)
{
    /* A lingering connection has its answer already: close it too. */
    return !c->req_active && c->in_len == c->in_off &&
           c->body_left == 0 && c->out_off == c->out_len &&
           (c->h2 == NULL || http_h2_idle(c));
}

void
http_conn_free(struct http_conn *c)
{
    struct http_thread *t = c->t;

    assert(!c->in_handler);
    http_conn_drop_request(c);
    http_conn_unpark(c);
    if (c->queued)
        conn_unqueue(c);
    event_del(&c->rev);
    event_del(&c->wev);
    event_del(&c->tev);
    SSL_free(c->ssl);               /* NULL: no-op */
    free(c->peer_name);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        t->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    t->nconns--;
    atomic_fetch_sub_explicit(&t->s->nconns, 1, memory_order_relaxed);
    ctr_add(&t->open, -1);
    close(c->fd);                   /* after the counters: the peer sees EOF
                                       only once the stats agree */
    if (c->in != NULL)
        http_pool_put(&t->inpool, c->in);
    if (c->out != NULL) {
        if (c->out_cap == HTTP_OUT_CAP)
            http_pool_put(&t->outpool, c->out);
        else
            free(c->out);
    }
    if (c->h2 != NULL)
        http_h2_free(c);
    if (c->resp != NULL) {
        if (t->s->cfg.resp_session_free != NULL)
            t->s->cfg.resp_session_free(c->resp->session);
        ctr_add(&t->resp_open, -1);
        free(c->resp->inl);
        free(c->resp);
    }
    if (c->mc != NULL) {
        ctr_add(&t->mc_open, -1);
        free(c->mc);
    }
    free(c);
    if (t->stopping && t->nconns == 0)
        event_base_loopbreak(t->base);
}

/* The request is answered: forget it. */
void
http_conn_end_request(struct http_conn *c)
{
    c->req_active = 0;
    http_conn_unpark(c);
}

/* Hand the current request to the handler and check what it did. */
static void
conn_call(struct http_conn *c)
{
    struct http_server *s = c->t->s;
    uint64_t gen0;

    assert(c->req_active && !c->in_handler && !c->parked);
    gen0 = atomic_load(&s->wake_gen);
    c->in_handler = 1;
    s->handler(c, &c->req, s->arg);
    c->in_handler = 0;
    conn_check(c);
    if (!c->req_active)
        return;
    if (!c->parked) {
        if (c->resp != NULL)
            log_error("handler neither answered nor parked a RESP %.*s",
                      (int)(c->req.cmd->argl[0] < 64 ? c->req.cmd->argl[0] : 64),
                      c->req.cmd->argv[0]);
        else if (c->mc != NULL)
            log_error("handler neither answered nor parked a memcached %.*s",
                      (int)c->req.mc->len[0], c->req.mc_line + c->req.mc->off[0]);
        else
            log_error("handler neither answered nor parked %s %.*s",
                      http_method_name(c->req.msg.method),
                      (int)c->req.msg.target_len, c->req.msg.target);
        http_out_error(c, 500, "internal", "request not answered");
        http_conn_end_request(c);
        return;
    }
    /* Pairs with http_wake and http_wake_all: see http_park.c's DESIGN. */
    if (atomic_load(&s->wake_gen) != gen0) {
        c->t->retry_bits |= UINT64_C(1) << c->bucket;
        event_active(&c->t->retry_ev, EV_TIMEOUT, 0);
    }
}

/* A parsed request (HTTP, HTTP/2) or command (RESP) starts: call the
 * handler. */
void
http_conn_start_request(struct http_conn *c)
{
    struct http_thread *t = c->t;

    c->partial = 0;
    c->req.retry = 0;
    c->req.timed_out = 0;
    if (t->now_us == 0)
        t->now_us = util_mono_us();
    c->req.start_us = t->now_us;
    c->req.on_drop = NULL;
    memset(c->req.scratch, 0, sizeof c->req.scratch);
    c->req_active = 1;
    conn_call(c);
}

int
http_conn_may_parse(struct http_conn *c)
{
    if (c->in_len == c->in_off)
        return 0;
    if (c->out_len - c->out_off >= HTTP_OUT_HIGH) {
        c->out_full = 1;
        return 0;
    }
    return 1;
}

/* Parse and dispatch every complete RESP command in the input buffer. */
static void
conn_process_resp(struct http_conn *c)
{
    struct http_thread *t = c->t;
    struct http_server *s = t->s;
    struct http_resp *rs = c->resp;
    enum resp_parse_result r;
    const char *err;
    size_t avail, used = 0;

    while (!c->req_active && !c->closing && http_conn_may_parse(c)) {
        avail = c->in_len - c->in_off;
        if (rs->inl == NULL && c->in[c->in_off] != '*')
            rs->inl = xmalloc(s->resp_lim.max_inline);
        r = resp_parse(c->in + c->in_off, avail, &s->resp_lim, rs->inl,
                       s->resp_lim.max_inline, &rs->cmd, &used, &err);
        if (r == RESP_PARSE_MORE) {
            if (avail == s->in_cap) {
                char msg[96];

                snprintf(msg, sizeof msg, "Protocol error: a command must "
                         "fit in %zu bytes", s->in_cap);
                http_out_error(c, 400, "bad_request", msg);
            }
            break;
        }
        if (r == RESP_PARSE_ERROR) {
            http_out_error(c, 400, "bad_request", err);
            break;
        }
        c->in_off += used;
        if (r == RESP_PARSE_EMPTY)
            continue;
        assert(rs->cmd.argc > 0);
        ctr_add(&t->resp_commands, 1);
        c->req.cmd = &rs->cmd;
        c->req.proto = HTTP_REQ_RESP;
        http_conn_start_request(c);
    }
}

int
http_conn_skip(struct http_conn *c)
{
    size_t avail = c->in_len - c->in_off;
    size_t take = avail < c->body_left ? avail : (size_t)c->body_left;

    c->in_off += take;
    c->body_left -= take;
    return c->body_left > 0;
}

/* Parse and dispatch every complete request in the input buffer. */
static void
conn_process(struct http_conn *c)
{
    struct http_thread *t = c->t;
    const struct http_config *cfg = &t->s->cfg;
    struct http_msg *msg = &c->req.msg;
    enum http_parse_result r;
    size_t avail;

    while (!c->req_active && !c->closing) {
        if (http_conn_skip(c))
            break;
        avail = c->in_len - c->in_off;
        if (avail == 0)
            break;
        if (!c->h1 && !cfg->h2_disable) {
            int h2 = http_h2_preface(c->in + c->in_off, avail);

            if (h2 < 0)
                break;
            if (h2 > 0) {
                http_h2_start(c, 0);
                http_h2_process(c);
                return;
            }
        }
        c->h1 = 1;
        if (c->out_len - c->out_off >= HTTP_OUT_HIGH) {
            c->out_full = 1;
            break;
        }
        r = http_parse_request(c->in + c->in_off, avail,
                               (size_t)cfg->max_header_bytes,
                               (size_t)cfg->max_url_bytes, msg);
        if (r == HTTP_PARSE_INCOMPLETE)
            break;
        if (r != HTTP_PARSE_OK) {
            http_out_parse_error(c, r);
            break;
        }
        if (msg->chunked) {
            http_out_error(c, 400, "bad_request", "Transfer-Encoding is not "
                       "supported; send no body or a Content-Length");
            break;
        }
        if (msg->content_length > (int64_t)cfg->max_body_bytes) {
            http_out_error(c, 413, "body_too_large", "request body too large");
            break;
        }
        c->in_off += msg->head_len;
        c->body_left = msg->content_length > 0 ? (uint64_t)msg->content_length
                                               : 0;
        c->req.proto = HTTP_REQ_HTTP1;
        http_conn_start_request(c);
    }
}

/* Send what is buffered: one send(2). 0, or -1 when the peer is gone. */
static int
conn_flush(struct http_conn *c)
{
    struct http_thread *t = c->t;
    ssize_t n;

    if (c->out_off == c->out_len)
        return 0;
    if (c->ssl != NULL) {
        int want_read = 0;

        n = http_tls_send(c->ssl, c->out + c->out_off,
                          c->out_len - c->out_off, &want_read);
        if (want_read)
            return -1;      /* only renegotiation asks, and it is off */
    } else {
        n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                 MSG_NOSIGNAL);
    }
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return -1;
        n = 0;
    }
    c->out_off += (size_t)n;
    if (c->out_off == c->out_len) {
        if (c->out_cap == HTTP_OUT_CAP)
            http_pool_put(&t->outpool, c->out);
        else
            free(c->out);
        c->out = NULL;
        c->out_off = c->out_len = c->out_cap = 0;
        if (c->wev_on) {
            event_del(&c->wev);
            c->wev_on = 0;
        }
        return 0;
    }
    if (!c->wev_on) {
        event_add(&c->wev, NULL);
        c->wev_on = 1;
    }
    if (n > 0 || c->deadline_ms == 0) {
        int64_t now = http_now_ms();
        conn_set_deadline(c, now, now + t->s->cfg.idle_timeout_ms);
    }
    return 0;
}

/* Half-close after a closing answer and drain the peer until it closes, so
 * unread input does not turn our close into a RST that eats the answer. */
static void
conn_linger(struct http_conn *c)
{
    struct http_thread *t = c->t;
    int64_t now = http_now_ms(), ms = HTTP_LINGER_MS;

    if (c->ssl != NULL)
        http_tls_close_notify(c->ssl);
    shutdown(c->fd, SHUT_WR);
    c->closing = c->lingering = 1;
    if (c->in != NULL) {
        http_pool_put(&t->inpool, c->in);
        c->in = NULL;
        c->in_off = c->in_len = 0;
    }
    c->body_left = 0;               /* what still comes is drained */
    conn_rev(c, 1);
    if (ms > t->s->cfg.idle_timeout_ms)
        ms = t->s->cfg.idle_timeout_ms;
    c->deadline_ms = now + ms;      /* armed anew: its timer may have fired */
    conn_arm_timer(c, now, now + ms);
}

/* After a run: what to wait for, by when, and which buffers to give back. */
static void
conn_update(struct http_conn *c)
{
    struct http_thread *t = c->t;
    int64_t now;

    conn_rev(c, !c->wev_on && !c->closing && !c->eof &&
             !(c->req_active && c->in_len == t->s->in_cap));
    if (c->ssl != NULL && c->rev_on && http_tls_pending(c->ssl))
        event_active(&c->rev, EV_READ, 0);      /* see DESIGN: TLS */

    if (c->req_active || (c->h2 != NULL && http_h2_busy(c))) {
        c->deadline_ms = 0;
    } else if (c->wev_on) {
        /* conn_flush set it */
    } else if (c->in_len > c->in_off || c->body_left > 0) {
        if (!c->partial || c->deadline_ms == 0) {
            c->partial = 1;
            now = http_now_ms();
            conn_set_deadline(c, now, now + t->s->cfg.idle_timeout_ms);
        }
    } else {
        c->partial = 0;
        now = http_now_ms();
        conn_set_deadline(c, now, now + t->s->cfg.idle_timeout_ms);
    }

    if (c->in != NULL && !c->req_active && c->in_off == c->in_len) {
        http_pool_put(&t->inpool, c->in);
        c->in = NULL;
        c->in_off = c->in_len = 0;
    }
    assert(!c->queued);             /* the queue is sent before updates */
    conn_check(c);
}

static void
conn_process_any(struct http_conn *c)
{
    if (c->h2 != NULL)
        http_h2_process(c);
    else if (c->resp != NULL)
        conn_process_resp(c);
    else if (c->mc != NULL)
        http_conn_process_mc(c);
    else
        conn_process(c);
}

/* Send, then close or wait. Returns -1 if c was freed. */
static int
conn_finish(struct http_conn *c)
{
    assert(!c->queued);
    for (;;) {
        if (conn_flush(c) < 0)
            goto close;
        if (!c->out_full || c->wev_on)
            break;
        c->out_full = 0;
        conn_process_any(c);
    }
    /* A client that half-closed (shutdown(SHUT_WR)) after its request still
     * gets the answer of a parked request: the connection closes once it is
     * sent (or when the write fails, if the client is gone). At EOF, RESP
     * answers every complete command first (see DESIGN). */
    if (c->eof && ((c->resp == NULL && c->mc == NULL) ||
                   (!c->req_active && !c->out_full)))
        c->closing = 1;
    if (c->closing && !c->req_active && !c->wev_on) {
        if (c->eof || c->t->stopping)
            goto close;
        conn_linger(c);
        return 0;
    }
    conn_update(c);
    return 0;

close:
    http_conn_free(c);
    return -1;
}

/* Process input, send, then close or wait. Returns -1 if c was freed. */
int
http_conn_run(struct http_conn *c)
{
    if (c->queued)
        conn_unqueue(c);
    conn_process_any(c);
    return conn_finish(c);
}

static void conn_queue_send(struct http_conn *c);

/* The read path: like conn_run, but an answer waits for the send queue. */
static void
conn_run_read(struct http_conn *c)
{
    struct http_thread *t = c->t;

    conn_process_any(c);
    if (c->out_len == c->out_off || c->wev_on || c->closing || c->eof ||
        t->stopping) {
        if (c->queued)
            conn_unqueue(c);
        (void)conn_finish(c);
        return;
    }
    conn_queue_send(c);
}

/* Join the thread's send queue (see DESIGN: sends after reads). */
static void
conn_queue_send(struct http_conn *c)
{
    struct http_thread *t = c->t;

    assert(c->owner == NULL);
    if (!c->queued) {
        c->queued = 1;
        c->qprev = NULL;
        c->qnext = t->sendq;
        if (t->sendq != NULL)
            t->sendq->qprev = c;
        t->sendq = c;
    }
    if (!t->send_armed) {
        t->send_armed = 1;
        event_active(&t->send_ev, EV_TIMEOUT, 0);
    }
}

void
http_conn_send_queued(struct http_thread *t)
{
    struct http_conn *c;

    t->send_armed = 0;
    while ((c = t->sendq) != NULL) {
        conn_unqueue(c);
        if (c->h2 != NULL)
            http_h2_process(c);     /* a stream answered after a retry */
        (void)conn_finish(c);
    }
}

/* ---- connection callbacks ---- */

/* One step of a TLS handshake, on either event (see DESIGN: TLS). */
static void
conn_handshake(struct http_conn *c)
{
    char name[HTTP_TLS_NAME_MAX];
    int64_t now;

    switch (http_tls_handshake(c->ssl)) {
    case HTTP_TLS_WANT_READ:
        event_del(&c->wev);
        conn_rev(c, 1);
        return;
    case HTTP_TLS_WANT_WRITE:
        conn_rev(c, 0);
        event_add(&c->wev, NULL);
        return;
    case HTTP_TLS_FAIL:
        ctr_add(&c->t->tls_failed, 1);
        http_conn_free(c);
        return;
    case HTTP_TLS_DONE:
        break;
    }
    ctr_add(&c->t->tls_done, 1);
    c->tls_hs = 0;
    event_del(&c->wev);
    if (http_tls_peer_name(c->ssl, name, sizeof name))
        c->peer_name = xstrdup(name);
    now = http_now_ms();
    c->deadline_ms = 0;
    conn_set_deadline(c, now, now + c->t->s->cfg.idle_timeout_ms);
    conn_rev(c, 1);
    if (http_tls_pending(c->ssl))
        event_active(&c->rev, EV_READ, 0);
}

static void
conn_drain(struct http_conn *c)
{
    char buf[4096];
    ssize_t n = 1;

    for (int i = 0; i < 16 && n > 0; i++)
        n = read(c->fd, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                   errno != EINTR))
        http_conn_free(c);
}

static void
conn_read_cb(evutil_socket_t fd, short what, void *arg)
{
    struct http_conn *c = arg;
    struct http_thread *t = c->t;
    size_t room;
    ssize_t n;

    (void)what;

    if (c->lingering) {
        conn_drain(c);
        return;
    }
    if (c->tls_hs) {
        conn_handshake(c);
        return;
    }
    if (c->in == NULL) {
        c->in = http_pool_get(&t->inpool, t->s->in_cap);
        c->in_off = c->in_len = 0;
    } else if ((!c->req_active || c->h2 != NULL) && c->in_off > 0) {
        /* HTTP/2 requests own copies of what they need from the input. */
        memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
        c->in_len -= c->in_off;
        c->in_off = 0;
    }
    room = t->s->in_cap - c->in_len;
    if (room == 0) {
        conn_rev(c, 0);
        return;
    }
    if (c->ssl != NULL) {
        int want_write = 0;

        n = http_tls_recv(c->ssl, c->in + c->in_len, room, &want_write);
        if (want_write) {
            /* A read that must write first (a TLS 1.3 KeyUpdate answer
             * into a full socket): retried once the socket is writable. */
            c->tls_rw = 1;
            event_add(&c->wev, NULL);
        }
    } else {
        n = recv(fd, c->in + c->in_len, room, 0);
    }
    if (n > 0) {
        c->in_len += (size_t)n;
    } else if (n == 0) {
        c->eof = 1;
    } else {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return;
        http_conn_free(c);
        return;
    }
    t->now_us = 0;
    t->reads++;
    conn_run_read(c);
}

static void
conn_write_cb(evutil_socket_t fd, short what, void *arg)
{
    struct http_conn *c = arg;

    (void)what;
    if (c->tls_hs) {
        conn_handshake(c);
        return;
    }
    if (c->tls_rw) {
        c->tls_rw = 0;
        if (!c->wev_on)
            event_del(&c->wev);
        conn_read_cb(fd, EV_READ, c);
        return;
    }
    http_conn_run(c);
}

static void
conn_timeout(struct http_conn *c)
{
    struct http_thread *t = c->t;
    int said = 1;

    if (c->lingering) {
        http_conn_free(c);
        return;
    }
    ctr_add(&t->timeouts, 1);
    if (c->tls_hs)
        ctr_add(&t->tls_failed, 1);
    /* A slow request: say why (408); an idle HTTP/2 connection: that it
     * closes (GOAWAY, RFC 9113 6.8). Sent at once or not at all, then a
     * lingering close: input still arriving must not turn it into a RST. */
    if (c->h2 == NULL && !c->wev_on &&
        (c->in_len > c->in_off || c->body_left > 0))
        http_out_error(c, 408, "request_timeout", "request not received in time");
    else if (c->h2 != NULL && !c->wev_on && !c->closing && http_h2_idle(c))
        http_h2_idle_goaway(c);
    else
        said = 0;
    if (said && !c->req_active && conn_flush(c) == 0 && !c->wev_on &&
        !t->stopping)
        conn_linger(c);
    else
        http_conn_free(c);
}

static void
conn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct http_conn *c = arg;
    int64_t now = http_now_ms();

    (void)fd;
    (void)what;

    if (c->deadline_ms != 0 && now >= c->deadline_ms) {
        /* Queued: read from in the same loop pass, its answer not sent
         * yet. Judged again after the send queue has run. */
        if (c->queued)
            conn_arm_timer(c, now, now + 1);
        else
            conn_timeout(c);
        return;
    }
    if (c->deadline_ms == 0)
        conn_arm_timer(c, now, now + c->t->s->cfg.idle_timeout_ms);
    else
        conn_arm_timer(c, now, c->deadline_ms);
}

/* Call the handler again for a parked request. A stream's connection is
 * run later, from the send queue: a retry frees nothing, so a caller walking
 * a parked list keeps a valid next pointer. */
void
http_conn_retry(struct http_conn *c, int timed_out)
{
    if (timed_out)
        c->park_armed = 0;          /* it just fired */
    http_conn_unlist(c);
    c->req.retry = 1;
    c->req.timed_out = timed_out;
    conn_call(c);       /* may answer, or park again with a fresh timer */
    if (c->owner != NULL)
        conn_queue_send(c->owner);
    else
        http_conn_run(c);
}

void
http_conn_new(struct http_thread *t, int fd, enum http_proto proto, int tls)
{
    struct http_conn *c = xcalloc(1, sizeof *c);
    int64_t now = http_now_ms();
    int one = 1, first_ms = t->s->cfg.idle_timeout_ms;

    c->t = t;
    c->fd = fd;
    if (proto == HTTP_PROTO_RESP) {
        c->resp = xcalloc(1, sizeof *c->resp);
        c->resp->id = atomic_fetch_add_explicit(&t->s->next_conn_id, 1,
                                                memory_order_relaxed) + 1;
        c->resp->born_ms = now;
        ctr_add(&t->resp_open, 1);
    } else if (proto == HTTP_PROTO_MC) {
        c->mc = xcalloc(1, sizeof *c->mc);
        ctr_add(&t->mc_open, 1);
        ctr_add(&t->mc_total, 1);
    }
    event_assign(&c->rev, t->base, fd, EV_READ | EV_PERSIST, conn_read_cb, c);
    event_assign(&c->wev, t->base, fd, EV_WRITE | EV_PERSIST, conn_write_cb,
                 c);
    event_assign(&c->tev, t->base, -1, 0, conn_timer_cb, c);
    event_assign(&c->pev, t->base, -1, 0, http_conn_park_cb, c);
    c->next = t->conns;
    if (t->conns != NULL)
        t->conns->prev = c;
    t->conns = c;
    t->nconns++;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (tls) {
        /* ALPN: each listener offers what it speaks. */
        c->ssl = http_tls_ssl_new(t->s->tls, fd,
            proto == HTTP_PROTO_GRPC ? HTTP_TLS_ALPN_H2
            : proto == HTTP_PROTO_RESP || proto == HTTP_PROTO_MC
                ? HTTP_TLS_ALPN_NONE
            : t->s->cfg.h2_disable ? HTTP_TLS_ALPN_HTTP1
            : HTTP_TLS_ALPN_H2_HTTP1);
        c->tls_hs = 1;
        first_ms = t->s->cfg.tls_handshake_timeout_ms;
    }

    conn_arm_timer(c, now, now + first_ms);
    c->deadline_ms = c->timer_at_ms;
    ctr_add(&t->open, 1);
    ctr_add(&t->total, 1);
    if (proto == HTTP_PROTO_GRPC)
        http_h2_start(c, 1);
    conn_rev(c, 1);
}

void
http_conn_stream_init(struct http_conn *sc, struct http_conn *owner,
                      void *h2st)
{
    sc->t = owner->t;
    sc->fd = owner->fd;
    sc->h2 = owner->h2;
    sc->owner = owner;
    sc->h2st = h2st;
    event_assign(&sc->pev, owner->t->base, -1, 0, http_conn_park_cb, sc);
}

