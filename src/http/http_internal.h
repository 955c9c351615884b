/* http_internal.h: what the HTTP server (http_server.c: threads, listeners,
 * stop, wake) and its connections (http_conn.c: read, parse, answer;
 * http_park.c: park; http_out.c, http_h2.c, http_conn_info.c) share. Only
 * src/http/ includes it; every other module uses http.h.
 *
 * Every struct here belongs to one I/O thread and is touched only by it,
 * except the fields marked atomic (read by other threads) and the server's
 * exit_lock/exit_cond.
 */
#ifndef LEAFD_HTTP_INTERNAL_H
#define LEAFD_HTTP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <sys/time.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "http.h"
#include "mc_bin_parse.h"
#include "mc_parse.h"
#include "resp_parse.h"

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
#define HTTP_DEF_TLS_HANDSHAKE_MS 10000
#define HTTP_DEF_GRPC_MAX_MESSAGE 65536
#define HTTP_DEF_H2_STREAMS       100

/* RESP limits (resp_parse.h): a command must also fit in the input buffer
 * (max_header_bytes + HTTP_IN_SLACK), or it is refused and the connection
 * closed. */
#define HTTP_RESP_MAX_BULK    4096
#define HTTP_RESP_MAX_INLINE  8192

/* memcached limits (mc_parse.h): a line must also fit in the input buffer
 * (max_line is capped at its size); a get of more keys is answered
 * CLIENT_ERROR; a storage block up to max_data is skipped, a longer one
 * closes. */
#define HTTP_MC_MAX_LINE      8192
#define HTTP_MC_MAX_KEYS      128
#define HTTP_MC_MAX_DATA      (1024 * 1024)

enum http_proto { HTTP_PROTO_HTTP, HTTP_PROTO_RESP, HTTP_PROTO_MC, HTTP_PROTO_GRPC,
                  HTTP_PROTO_COUNT };
/* A thread's listeners: one per protocol in plain text, then one per
 * protocol over TLS (index proto + HTTP_PROTO_COUNT; http_tls.h). */
#define HTTP_LS_COUNT (2 * HTTP_PROTO_COUNT)

enum { HTTP_CMD_WAKE = 1, HTTP_CMD_STOP = 2, HTTP_CMD_FORCE = 4,
       HTTP_CMD_WAKE_ALL = 8 };

struct http_pool {
    void  *head;                 /* free buffers, linked through their start */
    int    n;
};

/* One listening socket of a thread: HTTP's, RESP's and gRPC's, each plain
 * or TLS. */
struct http_listener {
    struct http_thread *t;
    int                 fd;             /* -1: none */
    unsigned char       proto;          /* enum http_proto */
    unsigned char       tls;            /* connections start a TLS handshake */
    struct event        ev;
    struct event        backoff_ev;     /* re-enables the listener */
};

struct http_thread {
    struct http_server *s;
    int                 index;
    pthread_t           tid;
    int                 running;        /* pthread created, not yet joined */
    int                 exited;         /* thread_main is done; s->exit_lock */
    struct event_base  *base;
    struct http_listener ls[HTTP_LS_COUNT];
    int                 efd;            /* eventfd: commands from others */
    struct event        cmd_ev;
    _Atomic unsigned    cmd;            /* HTTP_CMD_* bits */
    struct event        retry_ev;       /* local: retry retry_bits' lists */
    struct event        send_ev;        /* local: send what sendq holds */
    struct http_conn   *sendq;          /* answers waiting for send_ev */
    int                 send_armed;     /* send_ev is active */
    uint64_t            reads;          /* read callbacks run (owner only) */
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
    _Atomic uint64_t    resp_open, resp_commands;
    _Atomic uint64_t    mc_open, mc_total, mc_commands;
    _Atomic uint64_t    tls_done, tls_failed;   /* handshakes */
    _Atomic uint64_t    h2_open, h2_streams;
    _Atomic uint32_t    nparked_b[HTTP_WAKE_BUCKETS]; /* per bucket */
};

struct http_server {
    struct http_config  cfg;
    char               *address;
    char               *resp_address;
    int                 resp_port;      /* -1: no RESP listener */
    char               *grpc_address;
    int                 grpc_port;      /* -1: no gRPC listener */
    struct resp_limits  resp_lim;
    char               *mc_address;
    int                 mc_port;        /* -1: no memcached listener */
    struct mc_limits    mc_lim;
    _Atomic uint64_t    next_conn_id;
    http_handler_cb     handler;
    http_thread_cb      thread_cb;
    void               *arg;
    int                 port;           /* -1: no plain HTTP listener */
    int                 tls_ports[HTTP_PROTO_COUNT]; /* -1: none */
    struct http_tls    *tls;            /* cfg.tls: not owned */
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

/* What a RESP connection has beyond an HTTP one (allocated at accept). */
struct http_resp {
    struct resp_cmd     cmd;            /* the current command */
    char               *inl;            /* inline arguments (lazy) */
    uint64_t            id;
    int64_t             born_ms;
    unsigned char       session[HTTP_SESSION_BYTES] __attribute__((aligned(8)));
};

/* What a memcached connection has beyond an HTTP one (allocated at
 * accept). Its protocol, text or binary, is the first byte's (0x80, the
 * binary request magic), and stays for the connection's life. A get's line
 * (or binary frame) stays in the input buffer (at in_off) until its
 * last key is dispatched: cmd's tokens are offsets into it. */
struct http_mc {
    struct mc_cmd       cmd;            /* the current command */
    size_t              key;            /* MC_GET: keys dispatched */
    size_t              used;           /* bytes of the pending line */
    unsigned char       pending;        /* a get has keys left */
    unsigned char       mode;           /* HTTP_MC_TEXT or HTTP_MC_BINARY, by
                                           the first byte; 0: none yet */
};
enum { HTTP_MC_TEXT = 1, HTTP_MC_BINARY = 2 };

/* A connection, or one HTTP/2 stream's request (owner set): a stream is
 * handed to the handler, parked and retried as a connection of its own,
 * whose parking fields, park timer and req are its own, and whose answer
 * goes to its owner's HTTP/2 session (h2st: its stream). Such a struct is
 * never on t->conns or t->sendq and has no socket events. */
struct http_conn {
    struct http_thread *t;
    struct http_resp   *resp;           /* NULL: not a RESP connection */
    struct http_mc     *mc;             /* NULL: not a memcached one */
    struct ssl_st      *ssl;            /* NULL: plain text (http_tls.h) */
    char               *peer_name;      /* verified client certificate's CN */
    struct http_h2     *h2;             /* an HTTP/2 session (http_h2.c) */
    struct http_conn   *owner;          /* a stream's connection, or NULL */
    void               *h2st;           /* a stream's struct h2_stream */
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
    unsigned char       tls_hs;              /* TLS handshake not done */
    unsigned char       tls_rw;              /* TLS read waits for writable */
    unsigned char       h1;                  /* an HTTP/1 request came: no h2c */
    unsigned char       queued;              /* on t->sendq */
    unsigned char       bucket;              /* wake bucket while parked */
    struct http_conn   *prev, *next;         /* t->conns */
    struct http_conn   *pprev, *pnext;       /* t->parked */
    struct http_conn   *qprev, *qnext;       /* t->sendq */
    struct http_request req;
};

static inline int64_t
http_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline struct timeval
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
static inline void
ctr_add(_Atomic uint64_t *p, int64_t d)
{
    atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + d,
                          memory_order_relaxed);
}

static inline unsigned
wake_bucket(uint64_t key)
{
    /* Fibonacci hashing: the top 6 bits of key * 2^64/phi. */
    return (unsigned)((key * UINT64_C(0x9E3779B97F4A7C15)) >> 58);
}

/* http_conn.c, for the server's threads. */
void http_conn_new(struct http_thread *t, int fd, enum http_proto proto,
                   int tls);
void http_conn_reject(struct http_thread *t, int fd, enum http_proto proto,
                      int tls);
void http_conn_free(struct http_conn *c);
/* Call an unanswered request's on_drop (http.h), if it has one. */
void http_conn_drop_request(struct http_conn *c);
/* Is there input to parse, and room for its answers? 0 also when the
 * unsent output is over HTTP_OUT_HIGH (then out_full is set). */
int  http_conn_may_parse(struct http_conn *c);
/* Drop what has arrived of a body (HTTP) or data block (memcached) still
 * to skip (body_left); 1 while more of it is to come. */
int  http_conn_skip(struct http_conn *c);
/* Parse and dispatch what a memcached connection has read (http_conn_mc.c). */
void http_conn_process_mc(struct http_conn *c);
/* Call the handler again for a parked request (timed_out: its park timer
 * fired), then run its connection, or queue it (a stream's owner). */
void http_conn_retry(struct http_conn *c, int timed_out);
void http_conn_send_queued(struct http_thread *t);
int  http_conn_idle(const struct http_conn *c);
/* For http_h2.c: make sc the request of a stream of owner; hand c->req
 * (filled) to the handler; forget the answered (or abandoned) request;
 * process, send, then close or wait (-1: c was freed). */
void http_conn_stream_init(struct http_conn *sc, struct http_conn *owner,
                           void *h2st);
void http_conn_start_request(struct http_conn *c);
void http_conn_end_request(struct http_conn *c);
int  http_conn_run(struct http_conn *c);

/* Parking (http_park.c). unlist: take c off its parked list, the park
 * timer keeps running; unpark: that and stop the timer (both no-ops when c
 * is not parked); park_cb: the park timer's callback (c->pev). */
void http_conn_unlist(struct http_conn *c);
void http_conn_unpark(struct http_conn *c);
void http_conn_park_cb(evutil_socket_t fd, short what, void *arg);

/* HTTP/2 (http_h2.c). http_h2_preface: 1 when buf starts with the client
 * preface, 0 when it cannot, -1 when len is too short to tell. start: turn
 * c into an HTTP/2 connection (c->h2 set; its unread input is the session's
 * first input). process: feed the input, hand complete streams to the
 * handler, queue output below HTTP_OUT_HIGH. stop: GOAWAY, then answer the
 * streams in flight. reply, error: answer the stream sc is (http_reply,
 * http_out_error). idle: no stream open; idle_goaway: GOAWAY into the
 * output before the idle close. busy: a stream is with the handler
 * (parked). free: the session and its streams. */
int  http_h2_preface(const char *buf, size_t len);
void http_h2_start(struct http_conn *c, int grpc);
void http_h2_process(struct http_conn *c);
void http_h2_stop(struct http_conn *c);
void http_h2_reply(struct http_conn *c, int status, const char *content_type,
                   const char *extra_headers, const char *body, size_t len);
void http_h2_error(struct http_conn *c, int status, const char *code,
                   const char *message);
int  http_h2_idle(const struct http_conn *c);
void http_h2_idle_goaway(struct http_conn *c);
int  http_h2_busy(const struct http_conn *c);  /* a stream's request is out */
void http_h2_free(struct http_conn *c);
/* The output side (http_out.c). Buffers: from the thread's pool, or
 * malloc'd when it is empty; back to it (freed past HTTP_POOL_MAX). */
void *http_pool_get(struct http_pool *pool, size_t size);
void  http_pool_put(struct http_pool *pool, void *b);
void http_pool_drain(struct http_pool *pool);
/* "HTTP/1.1 <code> <text>\r\n" at p; returns the end. */
char *http_status_line(char *p, int status);
/* Room for need more bytes in c's output buffer; a whole response, or raw
 * bytes (RESP), appended to it; an error the layer answers itself (a JSON
 * body over HTTP, "-ERR <message>" over RESP), then close; the error for a
 * request the parser refused. */
void http_out_reserve(struct http_conn *c, size_t need);
void http_out_respond(struct http_conn *c, int status, const char *content_type,
                      const char *extra_headers, const char *body, size_t len,
                      int head_only, int close);
void http_out_append(struct http_conn *c, const char *data, size_t len);
void http_out_error(struct http_conn *c, int status, const char *code,
                    const char *message);
/* A binary memcached connection's error frame (status MC_BIN_*; 0: none),
 * its value "<code>: <message>", for the frame being answered or skipped
 * (or else the one at the input's start); then close. */
void http_out_mc_bin_error(struct http_conn *c, uint16_t status,
                           const char *code, const char *message);
void http_out_parse_error(struct http_conn *c, enum http_parse_result r);

#endif
