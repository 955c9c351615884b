/* http_h2_internal.h: what http_h2.c (the nghttp2 session, its streams and
 * their requests) and http_h2_reply.c (their answers) share. Only those two
 * files include it. Everything here belongs to the connection's I/O thread.
 */
#ifndef LEAFD_HTTP_H2_INTERNAL_H
#define LEAFD_HTTP_H2_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>

#include "grpc_frame.h"
#include "http.h"
#include "http_internal.h"

#define H2_MAX_EXTRA     16      /* extra header lines of one answer */
#define H2_EXTRA_BYTES   2048    /* and their bytes */
#define H2_GRPC_MSG_MAX  1024    /* grpc-message, encoded */
#define H2_BODY_MIN      256     /* a gRPC body buffer's first size */

struct h2_stream {
    int32_t           id;
    struct h2_stream *prev, *next;      /* h2->streams: every open stream */
    struct h2_stream *qnext;            /* h2->ready, oldest first */
    unsigned char     queued;           /* on h2->ready */
    unsigned char     handed;           /* with the handler, not answered */
    unsigned char     answered;         /* a response is submitted */
    unsigned char     ended;            /* END_STREAM received */
    unsigned char     reset_after;      /* RST_STREAM once answered */
    unsigned char     have_path, have_auth, accept_json;
    unsigned char     grpc_ct;          /* content-type application/grpc* */
    unsigned char     post;             /* :method POST */
    enum http_method  method;
    /* The first error found in the headers, answered at their end. */
    int               err_status, err_grpc;
    const char       *err_code, *err_msg;
    size_t            hdr_bytes;        /* header list size (RFC 9113 6.5.2) */
    char             *hbuf;             /* :path and authorization */
    size_t            hlen, path_off, path_len, auth_off, auth_len;
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
    struct http_conn  sc;               /* the request, as the handler sees it
                                           (http_internal.h) */
};

struct http_h2 {
    nghttp2_session  *ng;
    struct http_conn *c;
    struct h2_stream *streams;
    struct h2_stream *ready, *ready_tail;
    int               busy;             /* streams handed, not answered */
    size_t            buffered;         /* gRPC body bytes held */
    int               grpc;             /* the gRPC port */
    int               goaway;           /* GOAWAY submitted */
};

/* Answer st's request before it reaches the handler (a JSON error on h2c,
 * its gRPC form on the gRPC port); a no-op when st is answered already.
 * st must not be queued for the handler. */
void http_h2_refuse(struct http_h2 *h2, struct h2_stream *st, int status,
                    int grpc_status, const char *code, const char *message);

#endif
