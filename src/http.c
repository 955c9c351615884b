/* http.c: leafd's HTTP/1.1 front end (see http.h).
 *
 * DESIGN
 *
 * Threads. Each I/O thread owns an event_base (created NOLOCK: no other
 * thread ever touches it), a SO_REUSEPORT listening socket and every
 * connection accepted on it. Other threads talk to an I/O thread only through
 * its eventfd: they set bits in t->cmd (wake, stop, force) and write the
 * eventfd when the word was 0. So there is no lock anywhere on the request
 * path; the only shared atomics are the global connection count (touched per
 * connection) and the wake generation (touched per park).
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
 * Parking. A request parks under a wake key; the key picks one of
 * HTTP_WAKE_BUCKETS buckets, and each thread keeps one parked list per
 * bucket. A parked connection keeps reading into the free part of its buffer
 * (to see the client go away) but parses nothing. http_wake(key) bumps
 * s->wake_gen, then, for each thread whose count for the key's bucket is
 * non-zero, sets the bucket's bit in t->wake_bits and signals the thread,
 * which retries only the lists whose bits it finds set. http_wake_all does the
 * same for every bucket of every thread with a parked request. A request that
 * parks re-reads wake_gen after joining its list (a seq_cst increment of the
 * bucket's count); if it moved since before the handler ran, the thread
 * retries that bucket itself. Both sides are seq_cst, so either the waker sees
 * the count or the parker sees the new generation: a wake that races with a
 * park is never lost. Keys that share a bucket only cost spurious retries.
 */
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/event_struct.h>
#include <event2/thread.h>

#include "http.h"
#include "log.h"
#include "util.h"

#define HTTP_IN_SLACK         4096     /* input room past the head limit */
#define HTTP_OUT_CAP          16384    /* pooled output buffer */
#define HTTP_OUT_HIGH         (256 * 1024) /* unsent output: parse no more */
#define HTTP_POOL_MAX         1024     /* buffers kept per thread and kind */
#define HTTP_LINGER_MS        2000     /* drain input after a closing answer */
#define HTTP_ACCEPT_BATCH     64
#define HTTP_ACCEPT_BACKOFF_MS 100     /* EMFILE & co: pause the listener */
#define HTTP_BACKLOG          4096
#define HTTP_WAKE_BUCKETS     64       /* one bit each in a uint64_t */

#define HTTP_DEF_MAX_CONNECTIONS  10000
#define HTTP_DEF_IDLE_TIMEOUT_MS  60000
#define HTTP_DEF_MAX_HEADER_BYTES 8192
#define HTTP_DEF_MAX_URL_BYTES    4096
#define HTTP_DEF_MAX_BODY_BYTES   65536

enum { HTTP_CMD_WAKE = 1, HTTP_CMD_STOP = 2, HTTP_CMD_FORCE = 4,
       HTTP_CMD_WAKE_ALL = 8 };

struct http_pool {
    void  *head;                 /* free buffers, linked through their start */
    int    n;
};

struct http_thread {
    struct http_server *s;
    int                 index;
    pthread_t           tid;
    int                 running;        /* pthread created, not yet joined */
    int                 exited;         /* thread_main is done; s->exit_lock */
    struct event_base  *base;
    int                 lfd;
    struct event        lev;            /* listener */
    struct event        backoff_ev;     /* re-enables the listener */
    int                 efd;            /* eventfd: commands from others */
    struct event        cmd_ev;
    _Atomic unsigned    cmd;            /* HTTP_CMD_* bits */
    struct event        retry_ev;       /* local: retry retry_bits' lists */
    uint64_t            retry_bits;     /* owner only: buckets to retry */
    _Atomic uint64_t    wake_bits;      /* set by http_wake, taken by owner */
    const struct timeval *idle_tv;      /* common timeout */
    int64_t             accept_warned_ms; /* rate-limits the EMFILE log */
    int                 events_ready;   /* the events below are assigned */
    int                 stopping;
    int64_t             now_us;         /* batch request clock; 0: unset */
    struct http_conn   *conns;          /* every connection of this thread */
    struct http_conn   *parked[HTTP_WAKE_BUCKETS]; /* newest first */
    int                 nconns;
    struct http_pool    inpool, outpool;
    /* Written by this thread only; others read them relaxed. */
    _Atomic uint64_t    open, total, rejected, nparked, timeouts;
    _Atomic uint32_t    nparked_b[HTTP_WAKE_BUCKETS]; /* per bucket */
};

struct http_server {
    struct http_config  cfg;
    char               *address;
    http_handler_cb     handler;
    http_thread_cb      thread_cb;
    void               *arg;
    int                 port;
    int                 nthreads;
    struct http_thread *threads;
    size_t              in_cap;
    _Atomic int         nconns;         /* global, against max_connections */
    _Atomic uint64_t    wake_gen;
    int                 started, stopped;
    /* http_server_stop waits on exit_cond (CLOCK_MONOTONIC) for the threads'
     * exited flags, which exit_lock guards, then joins them. */
    pthread_mutex_t     exit_lock;
    pthread_cond_t      exit_cond;
};

struct http_conn {
    struct http_thread *t;
    int                 fd;
    struct event        rev, wev, tev, pev;  /* read, write, deadline, park */
    char               *in;
    size_t              in_off, in_len;      /* unparsed: in[in_off..in_len) */
    char               *out;
    size_t              out_off, out_len, out_cap;
    uint64_t            body_left;           /* body bytes still to discard */
    int64_t             deadline_ms;         /* 0: none */
    int64_t             timer_at_ms;         /* when tev fires */
    int64_t             park_at_ms;
    unsigned char       rev_on, wev_on, park_armed;
    unsigned char       req_active;          /* a handler owns the request */
    unsigned char       in_handler, parked, closing, lingering, eof;
    unsigned char       partial, out_full;
    unsigned char       bucket;              /* wake bucket while parked */
    struct http_conn   *prev, *next;         /* t->conns */
    struct http_conn   *pprev, *pnext;       /* t->parked */
    struct http_request req;
};

static _Thread_local int http_tl_index = -1;
static pthread_once_t http_evthread_once = PTHREAD_ONCE_INIT;

static int conn_run(struct http_conn *c);

/* ---- small helpers ---- */

static int64_t
http_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct timeval
http_ms_tv(int64_t ms)
{
    struct timeval tv;

    if (ms < 0)
        ms = 0;
    tv.tv_sec = ms / 1000;
    tv.tv_usec = (ms % 1000) * 1000;
    return tv;
}

/* Owner-only counter update: no locked instruction needed. */
static void
ctr_add(_Atomic uint64_t *p, int64_t d)
{
    atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + d,
                          memory_order_relaxed);
}

static void *
pool_get(struct http_pool *pool, size_t size)
{
    void *b = pool->head;

    if (b == NULL)
        return xmalloc(size);
    memcpy(&pool->head, b, sizeof(void *));
    pool->n--;
    return b;
}

static void
pool_put(struct http_pool *pool, void *b)
{
    if (pool->n >= HTTP_POOL_MAX) {
        free(b);
        return;
    }
    memcpy(b, &pool->head, sizeof(void *));
    pool->head = b;
    pool->n++;
}

static void
pool_drain(struct http_pool *pool)
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

const char *
http_status_text(int status)
{
    switch (status) {
#define X(code, text) case code: return text;
    HTTP_STATUS_LIST
#undef X
    default:
        return "Unknown";
    }
}

/* Writes "HTTP/1.1 <code> <text>\r\n" at p; returns the end. */
static char *
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

static unsigned
wake_bucket(uint64_t key)
{
    /* Fibonacci hashing: the top 6 bits of key * 2^64/phi. */
    return (unsigned)((key * UINT64_C(0x9E3779B97F4A7C15)) >> 58);
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

/* Take c off its thread's parked list; the park timer keeps running. */
static void
conn_unlist(struct http_conn *c)
{
    struct http_thread *t = c->t;

    if (!c->parked)
        return;
    assert(c->pprev != NULL || t->parked[c->bucket] == c);
    if (c->pprev != NULL)
        c->pprev->pnext = c->pnext;
    else
        t->parked[c->bucket] = c->pnext;
    if (c->pnext != NULL)
        c->pnext->pprev = c->pprev;
    c->pprev = c->pnext = NULL;
    c->parked = 0;
    assert(atomic_load_explicit(&t->nparked_b[c->bucket],
                                memory_order_relaxed) > 0);
    atomic_store_explicit(&t->nparked_b[c->bucket],
        atomic_load_explicit(&t->nparked_b[c->bucket], memory_order_relaxed) - 1,
        memory_order_relaxed);
    ctr_add(&t->nparked, -1);
}

static void
conn_unpark(struct http_conn *c)
{
    conn_unlist(c);
    if (c->park_armed) {
        event_del(&c->pev);
        c->park_armed = 0;
    }
}

static void
conn_free(struct http_conn *c)
{
    struct http_thread *t = c->t;

    assert(!c->in_handler);
    conn_unpark(c);
    event_del(&c->rev);
    event_del(&c->wev);
    event_del(&c->tev);
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
        pool_put(&t->inpool, c->in);
    if (c->out != NULL) {
        if (c->out_cap == HTTP_OUT_CAP)
            pool_put(&t->outpool, c->out);
        else
            free(c->out);
    }
    free(c);
    if (t->stopping && t->nconns == 0)
        event_base_loopbreak(t->base);
}

/* Append a whole response to the output buffer. */
static void
conn_respond(struct http_conn *c, int status, const char *content_type,
             const char *extra_headers, const char *body, size_t len,
             int head_only, int close)
{
    struct http_thread *t = c->t;
    size_t ctlen = content_type != NULL ? strlen(content_type) : 0;
    size_t exlen = extra_headers != NULL ? strlen(extra_headers) : 0;
    size_t need, cap;
    int no_body = status < 200 || status == 204 || status == 304;
    char *p;

    need = 32 + 64 + 16 + ctlen + 40 + 28 + exlen + 2 + len;
    if (c->out == NULL) {
        c->out = pool_get(&t->outpool, HTTP_OUT_CAP);
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
            pool_put(&t->outpool, c->out);
            c->out = p;
        } else {
            c->out = xrealloc(c->out, cap);
        }
        c->out_cap = cap;
    }

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

/* An error the HTTP layer answers itself: JSON body, then close. */
static void
conn_error(struct http_conn *c, int status, const char *code,
           const char *message)
{
    char body[256];
    int n;

    n = snprintf(body, sizeof body, "{\"error\":\"%s\",\"message\":\"%s\"}",
                 code, message);
    if (n < 0 || (size_t)n >= sizeof body)
        n = 0;
    conn_respond(c, status, "application/json", NULL, body, (size_t)n, 0, 1);
}

static void
conn_parse_error(struct http_conn *c, enum http_parse_result r)
{
    switch (r) {
    case HTTP_PARSE_URI_TOO_LONG:
        conn_error(c, 414, "uri_too_long", "request target too long");
        break;
    case HTTP_PARSE_HEADERS_TOO_LARGE:
        conn_error(c, 431, "headers_too_large", "request head too large");
        break;
    case HTTP_PARSE_BAD_VERSION:
        conn_error(c, 505, "version_not_supported", "only HTTP/1.0 and "
                   "HTTP/1.1 are supported");
        break;
    default:
        conn_error(c, 400, "bad_request", "malformed request");
        break;
    }
}

/* The request is answered: forget it. */
static void
conn_end_request(struct http_conn *c)
{
    c->req_active = 0;
    conn_unpark(c);
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
        log_error("handler neither answered nor parked %s %.*s",
                  http_method_name(c->req.msg.method),
                  (int)c->req.msg.target_len, c->req.msg.target);
        conn_error(c, 500, "internal", "request not answered");
        conn_end_request(c);
        return;
    }
    /* Pairs with http_wake and http_wake_all: see DESIGN. */
    if (atomic_load(&s->wake_gen) != gen0) {
        c->t->retry_bits |= UINT64_C(1) << c->bucket;
        event_active(&c->t->retry_ev, EV_TIMEOUT, 0);
    }
}

/* Parse and dispatch every complete request in the input buffer. */
static void
conn_process(struct http_conn *c)
{
    struct http_thread *t = c->t;
    const struct http_config *cfg = &t->s->cfg;
    struct http_msg *msg = &c->req.msg;
    enum http_parse_result r;
    size_t avail, take;

    while (!c->req_active && !c->closing) {
        avail = c->in_len - c->in_off;
        if (c->body_left > 0) {
            take = avail < c->body_left ? avail : (size_t)c->body_left;
            c->in_off += take;
            c->body_left -= take;
            avail -= take;
            if (c->body_left > 0)
                break;
        }
        if (avail == 0)
            break;
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
            conn_parse_error(c, r);
            break;
        }
        if (msg->chunked) {
            conn_error(c, 400, "bad_request", "Transfer-Encoding is not "
                       "supported; send no body or a Content-Length");
            break;
        }
        if (msg->content_length > (int64_t)cfg->max_body_bytes) {
            conn_error(c, 413, "body_too_large", "request body too large");
            break;
        }
        c->in_off += msg->head_len;
        c->body_left = msg->content_length > 0 ? (uint64_t)msg->content_length
                                               : 0;
        c->partial = 0;

        c->req.retry = 0;
        c->req.timed_out = 0;
        if (t->now_us == 0)
            t->now_us = util_mono_us();
        c->req.start_us = t->now_us;
        memset(c->req.scratch, 0, sizeof c->req.scratch);
        c->req_active = 1;
        conn_call(c);
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
    n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
             MSG_NOSIGNAL);
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return -1;
        n = 0;
    }
    c->out_off += (size_t)n;
    if (c->out_off == c->out_len) {
        if (c->out_cap == HTTP_OUT_CAP)
            pool_put(&t->outpool, c->out);
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

    shutdown(c->fd, SHUT_WR);
    c->lingering = 1;
    if (c->in != NULL) {
        pool_put(&t->inpool, c->in);
        c->in = NULL;
        c->in_off = c->in_len = 0;
    }
    conn_rev(c, 1);
    if (ms > t->s->cfg.idle_timeout_ms)
        ms = t->s->cfg.idle_timeout_ms;
    conn_set_deadline(c, now, now + ms);
}

/* After a run: what to wait for, by when, and which buffers to give back. */
static void
conn_update(struct http_conn *c)
{
    struct http_thread *t = c->t;
    int64_t now;

    conn_rev(c, !c->wev_on && !c->closing && !c->eof &&
             !(c->req_active && c->in_len == t->s->in_cap));

    if (c->req_active) {
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
        pool_put(&t->inpool, c->in);
        c->in = NULL;
        c->in_off = c->in_len = 0;
    }
    conn_check(c);
}

/* Process input, send, then close or wait. Returns -1 if c was freed. */
static int
conn_run(struct http_conn *c)
{
    for (;;) {
        /* A client that half-closed (shutdown(SHUT_WR)) after its request
         * still gets the answer of a parked request: the connection closes
         * once it is sent (or when the write fails, if the client is gone). */
        conn_process(c);
        if (conn_flush(c) < 0)
            goto close;
        if (!c->out_full || c->wev_on)
            break;
        c->out_full = 0;
    }
    if (c->eof)
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
    conn_free(c);
    return -1;
}

/* ---- connection callbacks ---- */

static void
conn_drain(struct http_conn *c)
{
    char buf[4096];
    ssize_t n;
    int i;

    for (i = 0; i < 16; i++) {
        n = read(c->fd, buf, sizeof buf);
        if (n > 0)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
                      errno == EINTR))
            return;
        conn_free(c);
        return;
    }
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
    if (c->in == NULL) {
        c->in = pool_get(&t->inpool, t->s->in_cap);
        c->in_off = c->in_len = 0;
    } else if (!c->req_active && c->in_off > 0) {
        memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
        c->in_len -= c->in_off;
        c->in_off = 0;
    }
    room = t->s->in_cap - c->in_len;
    if (room == 0) {
        conn_rev(c, 0);
        return;
    }
    n = recv(fd, c->in + c->in_len, room, 0);
    if (n > 0) {
        c->in_len += (size_t)n;
    } else if (n == 0) {
        c->eof = 1;
    } else {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return;
        conn_free(c);
        return;
    }
    t->now_us = 0;
    conn_run(c);
}

static void
conn_write_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    conn_run(arg);
}

static void
conn_timeout(struct http_conn *c)
{
    struct http_thread *t = c->t;

    if (c->lingering) {
        conn_free(c);
        return;
    }
    ctr_add(&t->timeouts, 1);
    if (!c->wev_on && (c->in_len > c->in_off || c->body_left > 0)) {
        /* A slow request: say why, best effort, without waiting. */
        conn_error(c, 408, "request_timeout", "request not received in time");
        (void)conn_flush(c);
    }
    conn_free(c);
}

static void
conn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct http_conn *c = arg;
    int64_t now = http_now_ms();

    (void)fd;
    (void)what;

    if (c->deadline_ms != 0 && now >= c->deadline_ms) {
        conn_timeout(c);
        return;
    }
    if (c->deadline_ms == 0)
        conn_arm_timer(c, now, now + c->t->s->cfg.idle_timeout_ms);
    else
        conn_arm_timer(c, now, c->deadline_ms);
}

/* Call the handler again for a parked request. */
static void
conn_retry(struct http_conn *c, int timed_out)
{
    if (timed_out)
        c->park_armed = 0;          /* it just fired */
    conn_unlist(c);
    c->req.retry = 1;
    c->req.timed_out = timed_out;
    conn_call(c);       /* may answer, or park again with a fresh timer */
    conn_run(c);
}

static void
conn_park_cb(evutil_socket_t fd, short what, void *arg)
{
    struct http_conn *c = arg;

    (void)fd;
    (void)what;

    c->t->now_us = 0;
    conn_retry(c, 1);
}

static void
conn_new(struct http_thread *t, int fd)
{
    struct http_conn *c = xcalloc(1, sizeof *c);
    int64_t now = http_now_ms();
    int one = 1;

    c->t = t;
    c->fd = fd;
    event_assign(&c->rev, t->base, fd, EV_READ | EV_PERSIST, conn_read_cb, c);
    event_assign(&c->wev, t->base, fd, EV_WRITE | EV_PERSIST, conn_write_cb,
                 c);
    event_assign(&c->tev, t->base, -1, 0, conn_timer_cb, c);
    event_assign(&c->pev, t->base, -1, 0, conn_park_cb, c);
    c->next = t->conns;
    if (t->conns != NULL)
        t->conns->prev = c;
    t->conns = c;
    t->nconns++;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

    conn_arm_timer(c, now, now + t->s->cfg.idle_timeout_ms);
    c->deadline_ms = c->timer_at_ms;
    ctr_add(&t->open, 1);
    ctr_add(&t->total, 1);
    conn_rev(c, 1);
}

/* Over max_connections: one non-blocking send of a fixed 503, then close at
 * once, so a flood holds no descriptor past this call and no memory. */
static void
conn_reject(struct http_thread *t, int fd)
{
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
    n = send(fd, msg, sizeof msg - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n;
    close(fd);
}

/* ---- thread-level callbacks ---- */

static void
thread_accept_cb(evutil_socket_t lfd, short what, void *arg)
{
    struct http_thread *t = arg;
    struct http_server *s = t->s;
    struct timeval tv;
    int i, fd;

    (void)what;

    for (i = 0; i < HTTP_ACCEPT_BATCH; i++) {
        fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            if (http_now_ms() - t->accept_warned_ms >= 10000) {
                t->accept_warned_ms = http_now_ms();
                log_warn("accept on thread %d: %s; pausing the listener "
                         "%d ms at a time", t->index, strerror(errno),
                         HTTP_ACCEPT_BACKOFF_MS);
            }
            event_del(&t->lev);
            tv = http_ms_tv(HTTP_ACCEPT_BACKOFF_MS);
            event_add(&t->backoff_ev, &tv);
            return;
        }
        if (atomic_fetch_add_explicit(&s->nconns, 1, memory_order_relaxed) >=
            s->cfg.max_connections) {
            atomic_fetch_sub_explicit(&s->nconns, 1, memory_order_relaxed);
            conn_reject(t, fd);
        } else {
            conn_new(t, fd);
        }
    }
}

static void
thread_backoff_cb(evutil_socket_t fd, short what, void *arg)
{
    struct http_thread *t = arg;

    (void)fd;
    (void)what;

    if (t->lfd >= 0 && !t->stopping)
        event_add(&t->lev, NULL);
}

/* Retry the parked lists of the buckets in bits. */
static void
thread_retry_parked(struct http_thread *t, uint64_t bits)
{
    struct http_conn *c, *next;
    unsigned b;

    /* Re-parked requests go to the head, behind the cursor: each parked
     * request is retried once per wake. A handler touches only its own
     * connection, so next stays valid. */
    t->now_us = 0;
    while (bits != 0) {
        b = (unsigned)__builtin_ctzll(bits);
        bits &= bits - 1;
        for (c = t->parked[b]; c != NULL; c = next) {
            next = c->pnext;
            conn_retry(c, 0);
        }
    }
}

static void
thread_retry_cb(evutil_socket_t fd, short what, void *arg)
{
    struct http_thread *t = arg;
    uint64_t bits = t->retry_bits;

    (void)fd;
    (void)what;
    t->retry_bits = 0;
    thread_retry_parked(t, bits);
}

static int
conn_idle(const struct http_conn *c)
{
    /* A lingering connection has its answer already: close it too. */
    return !c->req_active && c->in_len == c->in_off &&
           c->body_left == 0 && c->out_off == c->out_len;
}

static void
thread_stop(struct http_thread *t)
{
    struct http_conn *c, *next;

    if (t->stopping)
        return;
    t->stopping = 1;
    if (t->lfd >= 0) {
        event_del(&t->lev);
        event_del(&t->backoff_ev);
        close(t->lfd);
        t->lfd = -1;
    }
    for (c = t->conns; c != NULL; c = next) {
        next = c->next;
        if (conn_idle(c))
            conn_free(c);
    }
    if (t->nconns == 0)
        event_base_loopbreak(t->base);
}

static void
thread_cmd_cb(evutil_socket_t fd, short what, void *arg)
{
    struct http_thread *t = arg;
    uint64_t v;
    unsigned cmd;

    (void)what;

    if (read(fd, &v, sizeof v) < 0 && errno != EAGAIN)
        log_warn("read eventfd: %s", strerror(errno));
    cmd = atomic_exchange(&t->cmd, 0);
    if (cmd & HTTP_CMD_FORCE) {
        thread_stop(t);
        while (t->conns != NULL)
            conn_free(t->conns);
        event_base_loopbreak(t->base);
        return;
    }
    if (cmd & HTTP_CMD_STOP)
        thread_stop(t);
    if (cmd & HTTP_CMD_WAKE_ALL) {
        (void)atomic_exchange(&t->wake_bits, 0);
        thread_retry_parked(t, UINT64_MAX);
    } else if (cmd & HTTP_CMD_WAKE) {
        thread_retry_parked(t, atomic_exchange(&t->wake_bits, 0));
    }
}

static void
thread_send(struct http_thread *t, unsigned cmd)
{
    uint64_t one = 1;

    if (atomic_fetch_or(&t->cmd, cmd) == 0 &&
        write(t->efd, &one, sizeof one) < 0 && errno != EAGAIN)
        log_warn("write eventfd: %s", strerror(errno));
}

static void *
thread_main(void *arg)
{
    struct http_thread *t = arg;
    struct http_server *s = t->s;

    http_tl_index = t->index;
    if (s->thread_cb != NULL)
        s->thread_cb(t->index, 1, s->arg);
    event_base_loop(t->base, EVLOOP_NO_EXIT_ON_EMPTY);
    while (t->conns != NULL)
        conn_free(t->conns);
    if (s->thread_cb != NULL)
        s->thread_cb(t->index, 0, s->arg);
    http_tl_index = -1;
    pthread_mutex_lock(&s->exit_lock);
    t->exited = 1;
    pthread_cond_broadcast(&s->exit_cond);
    pthread_mutex_unlock(&s->exit_lock);
    return NULL;
}

/* ---- setup ---- */

static void
http_evthread_init(void)
{
    evthread_use_pthreads();
}

static int
http_listen_fd(const struct addrinfo *ai, int port, int reuseport,
               char **cause)
{
    struct sockaddr_storage ss;
    int fd, one = 1;

    memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
    if (ss.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *cause = xasprintf("socket: %s", strerror(errno));
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuseport &&
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) {
        *cause = xasprintf("SO_REUSEPORT: %s", strerror(errno));
        goto error;
    }
    if (bind(fd, (struct sockaddr *)&ss, ai->ai_addrlen) < 0) {
        *cause = xasprintf("bind port %d: %s", port, strerror(errno));
        goto error;
    }
    return fd;

error:
    close(fd);
    return -1;
}

static int
http_sock_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;

    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return -1;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* Bind one SO_REUSEPORT socket per thread. A plain probe bind first makes a
 * taken port fail even when its owner also uses SO_REUSEPORT, and picks the
 * port when cfg->port is 0. */
static int
http_bind_all(struct http_server *s, char **cause)
{
    struct addrinfo hints, *ai = NULL;
    const char *node = s->address[0] != '\0' ? s->address : NULL;
    int i, rc, probe = -1, ret = -1;

    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    rc = getaddrinfo(node, NULL, &hints, &ai);
    if (rc != 0) {
        *cause = xasprintf("address %s: %s", s->address, gai_strerror(rc));
        goto cleanup;
    }
    probe = http_listen_fd(ai, s->cfg.port, 0, cause);
    if (probe < 0)
        goto cleanup;
    s->port = http_sock_port(probe);
    close(probe);
    probe = -1;
    for (i = 0; i < s->nthreads; i++) {
        struct http_thread *t = &s->threads[i];

        t->lfd = http_listen_fd(ai, s->port, 1, cause);
        if (t->lfd < 0)
            goto cleanup;
        if (listen(t->lfd, HTTP_BACKLOG) < 0) {
            *cause = xasprintf("listen port %d: %s", s->port,
                               strerror(errno));
            goto cleanup;
        }
    }
    ret = 0;

cleanup:
    if (ai != NULL)
        freeaddrinfo(ai);
    return ret;
}

static int
http_thread_init(struct http_server *s, struct http_thread *t, char **cause)
{
    struct event_config *ec;
    struct timeval tv;

    ec = event_config_new();
    event_config_set_flag(ec, EVENT_BASE_FLAG_NOLOCK);
    t->base = event_base_new_with_config(ec);
    event_config_free(ec);
    if (t->base == NULL) {
        *cause = xasprintf("event_base_new failed");
        return -1;
    }
    t->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (t->efd < 0) {
        *cause = xasprintf("eventfd: %s", strerror(errno));
        return -1;
    }
    tv = http_ms_tv(s->cfg.idle_timeout_ms);
    t->idle_tv = event_base_init_common_timeout(t->base, &tv);
    if (t->idle_tv == NULL) {
        *cause = xasprintf("event_base_init_common_timeout failed");
        return -1;
    }
    event_assign(&t->lev, t->base, t->lfd, EV_READ | EV_PERSIST,
                 thread_accept_cb, t);
    event_assign(&t->backoff_ev, t->base, -1, 0, thread_backoff_cb, t);
    event_assign(&t->cmd_ev, t->base, t->efd, EV_READ | EV_PERSIST,
                 thread_cmd_cb, t);
    event_assign(&t->retry_ev, t->base, -1, 0, thread_retry_cb, t);
    t->events_ready = 1;
    event_add(&t->lev, NULL);
    event_add(&t->cmd_ev, NULL);
    return 0;
}

struct http_server *
http_server_new(const struct http_config *cfg, http_handler_cb handler,
                http_thread_cb thread_cb, void *arg, char **cause)
{
    struct http_server *s;
    int i;

    if (cfg->threads < 1 || cfg->port < 0 || cfg->port > 65535 ||
        handler == NULL) {
        *cause = xasprintf("bad http config (threads %d, port %d)",
                           cfg->threads, cfg->port);
        return NULL;
    }
    pthread_once(&http_evthread_once, http_evthread_init);

    s = xcalloc(1, sizeof *s);
    s->cfg = *cfg;
    {
        pthread_condattr_t ca;

        pthread_mutex_init(&s->exit_lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&s->exit_cond, &ca);
        pthread_condattr_destroy(&ca);
    }
    if (s->cfg.max_connections <= 0)
        s->cfg.max_connections = HTTP_DEF_MAX_CONNECTIONS;
    if (s->cfg.idle_timeout_ms <= 0)
        s->cfg.idle_timeout_ms = HTTP_DEF_IDLE_TIMEOUT_MS;
    if (s->cfg.max_header_bytes <= 0)
        s->cfg.max_header_bytes = HTTP_DEF_MAX_HEADER_BYTES;
    if (s->cfg.max_url_bytes <= 0)
        s->cfg.max_url_bytes = HTTP_DEF_MAX_URL_BYTES;
    if (s->cfg.max_body_bytes <= 0)
        s->cfg.max_body_bytes = HTTP_DEF_MAX_BODY_BYTES;
    s->address = xstrdup(cfg->address != NULL ? cfg->address : "");
    s->cfg.address = s->address;
    s->handler = handler;
    s->thread_cb = thread_cb;
    s->arg = arg;
    s->in_cap = (size_t)s->cfg.max_header_bytes + HTTP_IN_SLACK;
    s->nthreads = cfg->threads;
    s->threads = xcalloc((size_t)s->nthreads, sizeof *s->threads);
    for (i = 0; i < s->nthreads; i++) {
        s->threads[i].s = s;
        s->threads[i].index = i;
        s->threads[i].lfd = -1;
        s->threads[i].efd = -1;
        s->threads[i].accept_warned_ms = INT64_MIN / 2;
    }
    if (http_bind_all(s, cause) < 0)
        goto error;
    for (i = 0; i < s->nthreads; i++)
        if (http_thread_init(s, &s->threads[i], cause) < 0)
            goto error;
    return s;

error:
    http_server_free(s);
    return NULL;
}

int
http_server_port(const struct http_server *s)
{
    return s->port;
}

int
http_server_start(struct http_server *s, char **cause)
{
    int i, rc;

    if (s->started) {
        *cause = xasprintf("http server already started");
        return -1;
    }
    s->started = 1;
    for (i = 0; i < s->nthreads; i++) {
        rc = pthread_create(&s->threads[i].tid, NULL, thread_main,
                            &s->threads[i]);
        if (rc != 0) {
            *cause = xasprintf("pthread_create: %s", strerror(rc));
            http_server_stop(s, 0);
            return -1;
        }
        s->threads[i].running = 1;
    }
    return 0;
}

void
http_server_stop(struct http_server *s, int timeout_ms)
{
    struct timespec dl;
    int i;

    if (s == NULL || !s->started || s->stopped)
        return;
    s->stopped = 1;
    for (i = 0; i < s->nthreads; i++)
        if (s->threads[i].running)
            thread_send(&s->threads[i], HTTP_CMD_STOP);
    /* Monotonic: a wall-clock step must not stretch or cut the drain. */
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    for (i = 0; i < s->nthreads; i++) {
        struct http_thread *t = &s->threads[i];

        int done;

        if (!t->running)
            continue;
        pthread_mutex_lock(&s->exit_lock);
        while (!t->exited &&
               pthread_cond_timedwait(&s->exit_cond, &s->exit_lock, &dl) == 0)
            ;
        done = t->exited;
        pthread_mutex_unlock(&s->exit_lock);
        if (!done)
            thread_send(t, HTTP_CMD_FORCE);
        pthread_join(t->tid, NULL);
        t->running = 0;
    }
}

void
http_server_free(struct http_server *s)
{
    int i;

    if (s == NULL)
        return;
    http_server_stop(s, 0);
    for (i = 0; i < s->nthreads; i++) {
        struct http_thread *t = &s->threads[i];

        while (t->conns != NULL)
            conn_free(t->conns);
        if (t->events_ready) {
            event_del(&t->lev);
            event_del(&t->backoff_ev);
            event_del(&t->cmd_ev);
            event_del(&t->retry_ev);
        }
        if (t->base != NULL)
            event_base_free(t->base);
        if (t->lfd >= 0)
            close(t->lfd);
        if (t->efd >= 0)
            close(t->efd);
        pool_drain(&t->inpool);
        pool_drain(&t->outpool);
    }
    free(s->threads);
    free(s->address);
    pthread_cond_destroy(&s->exit_cond);
    pthread_mutex_destroy(&s->exit_lock);
    free(s);
}

void
http_wake_all(struct http_server *s)
{
    int i;

    atomic_fetch_add(&s->wake_gen, 1);
    for (i = 0; i < s->nthreads; i++)
        if (atomic_load(&s->threads[i].nparked) != 0)
            thread_send(&s->threads[i], HTTP_CMD_WAKE_ALL);
}

void
http_wake(struct http_server *s, uint64_t key)
{
    unsigned b = wake_bucket(key);
    uint64_t bit = UINT64_C(1) << b;
    int i;

    atomic_fetch_add(&s->wake_gen, 1);
    for (i = 0; i < s->nthreads; i++) {
        struct http_thread *t = &s->threads[i];

        if (atomic_load(&t->nparked_b[b]) == 0)
            continue;
        /* Skip the signal when the bit was set already: that wake is still
         * pending and the thread has not taken the bits yet. */
        if ((atomic_fetch_or(&t->wake_bits, bit) & bit) == 0)
            thread_send(t, HTTP_CMD_WAKE);
    }
}

int
http_thread_index(void)
{
    return http_tl_index;
}

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
    conn_respond(c, status, content_type, extra_headers, body, len,
                 msg->method == HTTP_HEAD,
                 !msg->keep_alive || c->t->stopping || c->eof);
    conn_end_request(c);
}

void
http_park(struct http_conn *c, int timeout_ms, uint64_t key)
{
    struct http_thread *t = c->t;
    unsigned b = wake_bucket(key);
    int64_t now, at;
    struct timeval tv;

    if (!c->req_active || !c->in_handler) {
        log_error("http_park outside the handler of a live request");
        return;
    }
    if (c->parked && c->bucket != b)
        conn_unlist(c);             /* parked twice in one call, new key */
    if (!c->parked) {
        c->parked = 1;
        c->bucket = (unsigned char)b;
        c->pprev = NULL;
        c->pnext = t->parked[b];
        if (t->parked[b] != NULL)
            t->parked[b]->pprev = c;
        t->parked[b] = c;
        /* seq_cst: ordered before conn_call's second wake_gen load, and
         * against the loads in http_wake and http_wake_all. */
        atomic_fetch_add(&t->nparked, 1);
        atomic_fetch_add(&t->nparked_b[b], 1);
    }
    if (timeout_ms < 0)
        timeout_ms = 0;
    now = http_now_ms();
    at = now + timeout_ms;
    if (!c->park_armed || at < c->park_at_ms) {
        tv = http_ms_tv(timeout_ms);
        event_add(&c->pev, &tv);
        c->park_armed = 1;
        c->park_at_ms = at;
    }
}

void
http_server_stats(const struct http_server *s, struct http_stats *out)
{
    int i;

    memset(out, 0, sizeof *out);
    for (i = 0; i < s->nthreads; i++) {
        const struct http_thread *t = &s->threads[i];

        out->connections_open +=
            atomic_load_explicit(&t->open, memory_order_relaxed);
        out->connections_total +=
            atomic_load_explicit(&t->total, memory_order_relaxed);
        out->connections_rejected +=
            atomic_load_explicit(&t->rejected, memory_order_relaxed);
        out->requests_parked +=
            atomic_load_explicit(&t->nparked, memory_order_relaxed);
        out->timeouts +=
            atomic_load_explicit(&t->timeouts, memory_order_relaxed);
    }
}
