/* h2cli.h: a blocking HTTP/2 client on nghttp2's client session for the
 * unit tests (tests/unit/check_h2.c): requests on one loopback connection,
 * their answers recorded per stream, check assertions on failure. */
#ifndef LEAFD_H2CLI_H
#define LEAFD_H2CLI_H

#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>

#define H2CLI_MAX 256                  /* requests per client */

/* One request and what came back for it. */
struct h2cli_resp {
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

struct h2cli {
    int                fd;
    nghttp2_session   *ng;
    struct h2cli_resp  r[H2CLI_MAX];  /* per request, in submit order */
    int                n;
    int                goaway;         /* a GOAWAY came */
    int32_t            goaway_last;    /* its last stream ID */
    int                eof;            /* the server closed */
};

/* A header field from two strings (not copied). */
#define H2CLI_NV(a, b) (nghttp2_nv){ (uint8_t *)(a), (uint8_t *)(b), \
                                     strlen(a), strlen(b), NGHTTP2_NV_FLAG_NONE }

/* content-type application/grpc and te trailers, for h2cli_req. */
extern const char *const h2cli_grpc_hdrs[];

/* A TCP connection to 127.0.0.1:port (TCP_NODELAY). */
int  h2cli_connect(int port);
/* A client on a new connection; its SETTINGS are queued. peer_streams > 0:
 * assume the server allows that many streams until its SETTINGS say
 * otherwise (a client that does not wait for them). */
struct h2cli *h2cli_new_opt(int port, uint32_t peer_streams);
struct h2cli *h2cli_new(int port);
void h2cli_free(struct h2cli *k);
/* Submit a request; extra: NULL or "name", "value", ..., NULL. body (NULL:
 * none) must live until it is sent. */
struct h2cli_resp *h2cli_req(struct h2cli *k, const char *method,
                             const char *path, const char *body, size_t len,
                             const char *const *extra);
/* A framed (uncompressed) gRPC message for msg into buf; its length. */
size_t h2cli_grpc_body(char *buf, const char *msg, size_t len);
/* Send what the session has, then read what comes within ms. */
void h2cli_io(struct h2cli *k, int ms);
/* Run until r's stream is closed (fails the test after 30 s of polls). */
void h2cli_wait(struct h2cli *k, struct h2cli_resp *r);
/* r's body is one gRPC message equal to want. */
void h2cli_ck_grpc_msg(const struct h2cli_resp *r, const char *want);

#endif
