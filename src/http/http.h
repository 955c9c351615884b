/* http.h: leafd's network front end on libevent: one server with
 * listeners for HTTP/1.1 (and h2c), RESP, memcached and gRPC, each also
 * over TLS where configured, that hands every request, whatever its
 * protocol, to one handler as a struct http_request, and sends what the
 * handler answers.
 *
 * N I/O threads, each with its own event_base and its own SO_REUSEPORT
 * listening sockets, so the kernel spreads connections and a connection
 * lives on one thread for its whole life. The files: http_server.c (the
 * threads, listeners, accept, stop and wake), http_conn.c (a connection:
 * read, parse, call the handler, send; http_conn_mc.c its memcached side,
 * http_conn_info.c what it tells its handler), http_park.c (a request
 * waiting for a key or a deadline), http_out.c (the
 * answers written into its output buffer), http_h2.c and http_h2_reply.c
 * (HTTP/2 and gRPC streams on libnghttp2), http_tls.c (TLS), and the pure
 * parsers: http_parse.c (HTTP/1.x heads), resp_parse.c, mc_parse.c and
 * grpc_frame.c. No evhttp. Keep-alive and pipelining: requests on a
 * connection are answered strictly in order (HTTP/2 streams excepted).
 *
 * A handler runs on the connection's I/O thread and must, before returning,
 * either answer (http_reply*) or park the request (http_park). A parked request
 * is handed to the handler again, unchanged, when another thread calls
 * http_wake() with its wake key or http_wake_all(), or when its park timeout
 * passes (req->timed_out set); the
 * connection reads no further requests meanwhile, but the thread goes on
 * serving every other connection.
 *
 * RESP. With resp_enable, each I/O thread also listens for the Redis
 * protocol (resp_parse.h) on resp_address:resp_port. A RESP connection is an
 * HTTP connection in every other way: the same threads, buffers, limits,
 * deadlines, parking and stop. The same handler gets its commands, with
 * req->cmd set (req->msg is then unused), and answers them with
 * http_reply_resp. Pipelined commands are answered strictly in order, and a
 * parked one holds back the commands behind it.
 *
 * memcached. With mc_enable, each I/O thread also listens for memcached's
 * text protocol (mc_parse.h) and its binary protocol (mc_bin_parse.h; the
 * connection's first byte tells which) on mc_address:mc_port, a connection
 * like a RESP one. The handler gets req->mc set (req->mc->binary for a
 * binary frame): once per key of a get (req->mc_key is the key's token),
 * once for any other command, and answers with http_reply_mc. A storage
 * command's data block (a refused frame's body) is skipped by the layer.
 *
 * HTTP/2 (http_h2.c, on libnghttp2). The HTTP port also takes cleartext
 * HTTP/2 with prior knowledge (h2c): a connection that opens with the
 * 24-byte HTTP/2 preface runs an HTTP/2 session instead. With grpc_enable,
 * each I/O thread also listens for gRPC on grpc_address:grpc_port, where
 * every connection is HTTP/2 and every stream a gRPC call. Each stream is a
 * request (req->proto HTTP_REQ_H2 or HTTP_REQ_GRPC) for the same handler,
 * answered with http_reply (or http_reply_grpc) or parked with http_park as
 * on HTTP/1.1. The c a stream's handler gets is the stream's own: streams
 * park, wake and are answered independently, in any order, and a parked one
 * holds back no other (docs/http2.md).
 */
#ifndef LEAFD_HTTP_H
#define LEAFD_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "http_parse.h"

struct http_server;
struct http_conn;
struct resp_cmd;
struct mc_cmd;

/* Per-request scratch that survives parking: zeroed when a request starts. */
#define HTTP_REQ_SCRATCH 256

/* What a request came over (req->proto). */
enum http_req_proto { HTTP_REQ_HTTP1 = 0, HTTP_REQ_RESP, HTTP_REQ_H2, HTTP_REQ_GRPC };

struct http_request {
    struct http_msg  msg;          /* parsed request line and headers */
    const struct resp_cmd *cmd;    /* a RESP command, or NULL for HTTP */
    const struct mc_cmd *mc;       /* a memcached command, or NULL */
    const char      *mc_line;      /* its line: mc->off[] are offsets in it */
    size_t           mc_key;       /* MC_GET: the token of the key to answer */
    int              retry;        /* handler called again after a wake */
    int              timed_out;    /* handler called because the park expired */
    int64_t          start_us;     /* monotonic time the request was parsed */
    int                  proto;        /* enum http_req_proto */
    const unsigned char *body;         /* HTTP_REQ_GRPC: the request message, unframed
                                          (the 5-byte gRPC prefix removed); NULL otherwise */
    size_t               body_len;
    int64_t              grpc_timeout_us; /* HTTP_REQ_GRPC: the grpc-timeout header,
                                          0 when absent */
    /* Set by a handler whose parked request holds something to give back
     * (a lease's database job): called once, on the I/O thread, if the
     * request is discarded unanswered (its connection or HTTP/2 stream went
     * away). NULL when a request starts; the handler clears it when it
     * gives the thing back itself. */
    void           (*on_drop)(struct http_request *req);
    unsigned char    scratch[HTTP_REQ_SCRATCH] __attribute__((aligned(8)));
};

typedef void (*http_handler_cb)(struct http_conn *c, struct http_request *req,
                                void *arg);
/* Called on each I/O thread once at start (index 0..n-1) and at exit. */
typedef void (*http_thread_cb)(int index, int starting, void *arg);

struct http_config {
    const char *address;           /* "127.0.0.1" */
    int         port;              /* 0: pick a free port (tests) */
    int         threads;           /* >= 1 */
    int         max_connections;   /* over this, a new connection gets one
                                      send of a 503 and is closed at once */
    int         idle_timeout_ms;   /* keep-alive idle and slow-header limit */
    int         max_header_bytes;  /* request line + headers; over: 431 */
    int         max_url_bytes;     /* request target; over: 414 */
    int         max_body_bytes;    /* Content-Length over this: 413 */
    int         busy_poll_us;      /* poll this long before sleeping; 0 */
    int         resp_enable;       /* also listen for RESP (see above) */
    const char *resp_address;      /* "" or NULL: any address */
    int         resp_port;         /* 0: pick a free port (tests) */
    void      (*resp_session_free)(void *session); /* at close, or NULL */
    int         mc_enable;         /* also listen for memcached (see above) */
    const char *mc_address;        /* "" or NULL: any address */
    int         mc_port;           /* 0: pick a free port (tests) */
    int         grpc_enable;       /* also listen for gRPC (see above) */
    const char *grpc_address;      /* "" or NULL: any address */
    int         grpc_port;         /* 0: pick a free port (tests) */
    int         grpc_max_message_bytes; /* a request message over: 8 */
    int         h2_max_concurrent_streams; /* per HTTP/2 connection */
    int         h2_disable;        /* 1: no h2c on the HTTP port */
    /* TLS (http_tls.h): with tls set, HTTPS on tls_port when tls_enable,
     * RESP over TLS on resp_tls_port when resp_tls_enable, gRPC over TLS on
     * grpc_tls_port when grpc_tls_enable (0: pick a free port), on the same
     * threads, addresses, limits and handler as their plain listeners.
     * port -1: no plain HTTP listener. */
    struct http_tls *tls;          /* not owned; outlives the server */
    int         tls_enable;
    int         tls_port;
    int         resp_tls_enable;
    int         resp_tls_port;
    int         grpc_tls_enable;
    int         grpc_tls_port;
    int         mc_tls_enable;     /* memcached over TLS, on mc_address */
    int         mc_tls_port;
    int         tls_handshake_timeout_ms; /* <= 0: 10000 */
};
/* A field <= 0 takes its default: max_connections 10000, idle_timeout_ms
 * 60000, max_header_bytes 8192, max_url_bytes 4096, max_body_bytes 65536,
 * grpc_max_message_bytes 65536, h2_max_concurrent_streams 100.
 * Bodies up to max_body_bytes are read and dropped (handlers never see one);
 * any Transfer-Encoding gets 400 bad_request and a close. Errors the layer
 * answers itself (400, 408, 413, 414, 431, 500, 503, 505) carry
 * {"error":"<code>","message":"<text>"} as application/json and close. */

/* Binds the listening sockets (so a taken port fails here, not later, even
 * against another SO_REUSEPORT owner). address "" or NULL: any address.
 * Returns NULL with *cause (free it) on failure. Calls
 * evthread_use_pthreads() once. */
struct http_server *http_server_new(const struct http_config *cfg,
                                    http_handler_cb handler,
                                    http_thread_cb thread_cb, void *arg,
                                    char **cause);
int  http_server_port(const struct http_server *s);  /* the bound port; -1: none */
int  http_server_resp_port(const struct http_server *s); /* -1: no RESP */
int  http_server_mc_port(const struct http_server *s);   /* -1: none */
int  http_server_grpc_port(const struct http_server *s); /* -1: no gRPC listener */
/* The bound TLS port of a protocol (which: HTTP_TLS_*), -1 when there is
 * none. */
enum { HTTP_TLS_HTTP = 0, HTTP_TLS_RESP = 1, HTTP_TLS_MC = 2, HTTP_TLS_GRPC = 3 };
int  http_server_tls_port(const struct http_server *s, int which);
/* Starts the I/O threads. 0 or -1. */
int  http_server_start(struct http_server *s, char **cause);
/* Stop accepting; answer the requests in flight (parked ones included, until
 * their park expires); close idle connections; join the threads. Waits at
 * most timeout_ms, then closes whatever is left. Call from a non-I/O thread. */
void http_server_stop(struct http_server *s, int timeout_ms);
void http_server_free(struct http_server *s);

/* Wake keys. A request parks under a key (http_park); http_wake(key)
 * retries the requests parked under that key, and perhaps a few others that
 * share its bucket; http_wake_all retries every parked request. Any thread may
 * call either (a few relaxed loads when nothing is parked there). A wake that
 * races with a handler deciding to park is not lost: the request is retried
 * right after. Spurious retries happen: a retried handler re-checks and may
 * park again. */
void http_wake(struct http_server *s, uint64_t key);
void http_wake_all(struct http_server *s);

/* --- for tests only: nothing in src/ calls these --------------------- */

/* Index of the calling I/O thread, or -1 on any other thread. */
int  http_thread_index(void);

/* --- end of for tests only ------------------------------------------- */

/* Answer the current request; only from the handler, on its I/O thread, once
 * per request. c and req are valid only during the handler call: keep no
 * pointers to them. content_type NULL: no Content-Type. Status 1xx/204/304
 * get neither body nor Content-Length. body is copied; for HEAD the body is
 * dropped but Content-Length is kept. extra_headers is NULL or complete
 * header lines, each ending in "\r\n". The connection closes after the
 * answer when the client asked for it, on HTTP/1.0 without keep-alive, or
 * when the server is stopping. (A request body the layer accepted is read and
 * dropped, so an error status alone does not close.) */
void http_reply(struct http_conn *c, int status, const char *content_type,
                const char *extra_headers, const char *body, size_t len);

/* Park the current request under a wake key (only from the handler, which
 * then returns without answering). The deadline is set by the first park of a request;
 * a park on a wake-up retry can shorten it, never extend it. When it passes
 * the handler is called with retry = timed_out = 1 and answers, or parks
 * again with a new timeout (the handler keeps its own overall deadline, as
 * api.c does: a snowflake request waiting out a borrowed millisecond parks
 * for 1 ms more than once). A client that half-closes while its request is
 * parked still gets the answer; one that has gone away fails the write and
 * the connection is closed then. */
void http_park(struct http_conn *c, int timeout_ms, uint64_t key);

/* Answer the current RESP command with data, which is already in RESP form
 * (copied). close_after: close the connection once it is sent (QUIT). Same
 * rules as http_reply otherwise. */
void http_reply_resp(struct http_conn *c, const char *data, size_t len,
                     int close_after);

/* Answer the current memcached call with data (copied), already in the
 * protocol's form. HTTP_MC_END: the command is over, the get's keys not yet
 * answered are dropped (after an error line); HTTP_MC_CLOSE: close once it
 * is sent. Same rules as http_reply otherwise. */
enum { HTTP_MC_END = 1, HTTP_MC_CLOSE = 2 };
void http_reply_mc(struct http_conn *c, const char *data, size_t len,
                   int flags);
/* Answer the current gRPC request (only for req->proto == HTTP_REQ_GRPC): HEADERS
 * (:status 200, content-type application/grpc), then, when msg != NULL, one DATA frame
 * carrying the 5-byte prefix and msg (copied), then trailers grpc-status and, when
 * grpc_message is not NULL, grpc-message (percent-encoded by the transport). msg == NULL
 * with status != 0: a trailers-only answer. */
void http_reply_grpc(struct http_conn *c, int grpc_status, const char *grpc_message,
                     const void *msg, size_t len);

/* A RESP connection's session: HTTP_SESSION_BYTES zeroed at accept, kept
 * until close, for the handler's per-connection state (protocol version,
 * token, name). NULL on an HTTP connection. I/O thread only. */
#define HTTP_SESSION_BYTES 512
void *http_conn_session(struct http_conn *c);

/* The request the handler was called with (c's current request); only from
 * the handler, on its I/O thread. So a reply function given c alone can
 * tell what the request came over (req->proto, req->mc). */
struct http_request *http_conn_request(struct http_conn *c);

/* What CLIENT INFO tells about a connection. */
struct http_conn_info {
    uint64_t id;                   /* unique per server, from 1 */
    int      fd;
    int64_t  age_s;                /* since accept */
    char     addr[64], laddr[64];  /* "ip:port" of the peer and our end */
};
void http_conn_info(struct http_conn *c, struct http_conn_info *out);

/* The subject CN of the client certificate this connection's TLS handshake
 * verified (tls client_auth optional/required), or NULL: plain text, no
 * certificate, or no usable CN. Valid while the connection is; I/O thread. */
const char *http_conn_peer_name(const struct http_conn *c);

/* Live counters for /metrics (sums over threads; any thread may call; each
 * counter is read relaxed, so the sums are not one snapshot).
 * connections_total counts accepted connections, not rejected ones;
 * timeouts counts idle, slow-request (answered 408) and slow-reader closes. */
struct http_stats {
    uint64_t connections_open;
    uint64_t connections_total;
    uint64_t connections_rejected;  /* over max_connections */
    uint64_t requests_parked;       /* parked right now */
    uint64_t timeouts;              /* idle/slow connections closed */
    uint64_t resp_open;             /* RESP connections open (in the above) */
    uint64_t resp_commands;         /* RESP commands handled */
    uint64_t mc_open;               /* memcached connections open */
    uint64_t mc_total;              /* memcached connections accepted */
    uint64_t mc_commands;           /* memcached command lines handled */
    uint64_t tls_handshakes;        /* TLS handshakes done */
    uint64_t tls_failures;          /* TLS handshakes failed or timed out */
    uint64_t h2_open;               /* HTTP/2 connections open (h2c, gRPC) */
    uint64_t h2_streams;            /* HTTP/2 streams handed to the handler */
    int64_t  tls_not_after;         /* the TLS certificate's notAfter (Unix
                                       seconds); 0: no TLS, or unknown */
};
void http_server_stats(const struct http_server *s, struct http_stats *out);

#endif
