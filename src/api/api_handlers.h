/* api_handlers.h: the API's handlers, which api_route.c's dispatch calls:
 * the HTTP routes' (api.c, api_lease.c, api_serial.c, api_tinyid.c,
 * api_pages.c), the Redis commands (api_resp.c), memcached's (api_memcache.c)
 * and gRPC's methods (api_grpc.c), and the token checks (api_token.c).
 *
 * The api_serve_* functions are the ID handlers every protocol shares: the
 * caller hands them its writer (api_writer.h); each answers through it or
 * parks the request. All run on the request's I/O thread.
 */
#ifndef LEAFD_API_HANDLERS_H
#define LEAFD_API_HANDLERS_H

#include <stddef.h>
#include <stdint.h>

#include "api_internal.h"
#include "api_reply.h"
#include "segment.h"

struct http_msg;
struct loader_lease;
struct sbuf;

/* The handlers of api_routes.h's rows that live in api.c (the others are
 * in api_route.c, beside the table). */
api_route_cb route_segment, route_snowflake, route_decode, route_decode_leaf,
             route_id128, route_id128_decode, route_segment_decode;

/* The ID handlers every protocol shares (api.c). api_*_disabled answer 404
 * mode_disabled and return 1 when the mode is off. */
int  api_segment_disabled(struct api *a, struct http_conn *c, enum route r);
int  api_sf_disabled(struct api *a, struct http_conn *c, enum route r);
/* enc: numbers, or strings (idstr.h) with the kind's prefix (decode.h). */
void api_serve_segment(struct api *a, struct http_conn *c, struct http_request *req,
                       enum route r, const char *tag, size_t len, int64_t n,
                       enum idstr_enc enc, const struct api_writer *w);
void api_serve_snowflake(struct api *a, struct http_conn *c,
                         struct http_request *req, enum route r, int64_t n,
                         enum idstr_enc enc, const struct api_writer *w);
void api_serve_id128(struct api *a, struct http_conn *c, enum route r, int64_t n,
                     const struct api_writer *w);

/* The Redis protocol's commands (api_resp.c), memcached's (api_memcache.c:
 * a call of a memcached connection, req->mc set) and a call of the gRPC
 * listener (api_grpc.c: req->proto == HTTP_REQ_GRPC). */
void api_resp_command(struct api *a, struct http_conn *c, struct http_request *req);
void api_mc_command(struct api *a, struct http_conn *c, struct http_request *req);
void api_grpc_request(struct api *a, struct http_conn *c, struct http_request *req);

/* Tokens (api_token.c). With a tokens file: does the request lack a token
 * for scope? With admin.token: does it lack that? Does it lack the token
 * its row's scope asks for (rest: the part of the path the row's '*'
 * stands for)? Each returns 1 after answering 401/403/400; the ID checks
 * run on a request's first call only. */
int api_id_denied(struct api *a, struct http_conn *c,
                  const struct http_request *req, enum route r,
                  const char *scope);
int api_admin_denied(struct api *a, struct http_conn *c,
                     const struct http_msg *m, enum route r);
int api_scope_denied(struct api *a, struct http_conn *c,
                     const struct http_request *req, enum route r,
                     const char *rest, size_t rlen);

/* Serials for every protocol (api_serial.c): definition i, n of them. */
void api_serve_serial(struct api *a, struct http_conn *c, struct http_request *req,
                      size_t i, int64_t n, const struct api_writer *w);

/* GET /serial/<code> (api_serial.c); raw is the path after /serial/. */
void api_serial(struct api *a, struct http_conn *c, struct http_request *req,
                const char *raw, size_t rawlen);
/* An admin page that reveals secrets (what: "decoding serials") on a node
 * with neither an admin listener nor admin.token: answers 403
 * admin_required and returns 1; else 0. */
int api_admin_unset(struct api *a, struct http_conn *c, enum route r,
                    const char *what);
/* GET /serial/decode/<code>/<serial> (admin): the period and the counter
 * behind a serial's digits (raw: the path after /serial/decode/). */
void api_serial_decode(struct api *a, struct http_conn *c, const char *raw,
                       size_t rawlen);
/* /health's "concealed" member (appended after a ','): 1 when a tag is
 * refused (degraded), else 0; /metrics' gauge per concealed tag. */
int  api_conceal_health(struct api *a, struct sbuf *b, struct sbuf *reasons);
void api_conceal_metrics(struct api *a, struct sbuf *b);
/* GET /segment/reveal/<biz_tag>/<id> (api_conceal.c). */
void api_segment_reveal(struct api *a, struct http_conn *c, const char *raw,
                        size_t rawlen);
/* The "serial" member of /health; returns 0 ok, 1 degraded (database down,
 * numbers held), 2 unavailable (database down, a code holds none). */
int  api_serial_health(struct api *a, struct sbuf *b, struct sbuf *reasons);

/* Leases (api_lease.c): GET /segment/<tag>/lease?size=N (raw: the
 * undecoded tag), and Tinyid's /tinyid/id/<op> (api_tinyid.c). */
void api_lease_handle(struct api *a, struct http_conn *c, struct http_request *req,
                      const char *raw, size_t rawlen);
/* A lease of n IDs of tag (valid; n <= 0: the row's step) for a request of
 * any protocol whose writer has a lease: answer through w, or park. */
void api_serve_lease(struct api *a, struct http_conn *c, struct http_request *req,
                     const char *tag, int64_t n, const struct api_writer *w);
void api_tinyid_handle(struct api *a, struct http_conn *c, struct http_request *req,
                       const char *op, size_t oplen);

/* One lease for a handler, across parks (api_lease.c). */
struct api_lease_state {
    struct api_wait      wait;          /* first: see api_wait */
    int                  started;
    struct loader_lease *job;          /* a lease from the table in flight */
    struct segment_take  take;
};
_Static_assert(sizeof(struct api_lease_state) <= HTTP_REQ_SCRATCH, "scratch too small");

enum api_lease_result {
    API_LEASE_DONE,          /* out holds the ranges (sorted, disjoint) */
    API_LEASE_PARKED,        /* the request is parked: return */
    API_LEASE_UNKNOWN,       /* no such biz_tag */
    API_LEASE_BROKEN,        /* the row cannot give IDs */
    API_LEASE_UNAVAILABLE,   /* database down or slow, or lookups full */
};
struct conceal_tag;
#define API_LEASE_MAX_RANGES (SEGMENT_MAX_RANGES + 1)
/* The message of a lease refused for a concealed tag (format: the tag). */
#define API_LEASE_CONCEALED_MSG "biz_tag '%s' is concealed (segment.conceal): " \
    "a lease is a range of its counters and would show how many IDs were " \
    "issued; take IDs instead (GET /segment/<biz_tag>?count=N, Tinyid's nextId)"
/* n IDs of a concealed tag for a route that answers with a lease's result
 * (Tinyid's nextId): the counters taken from the buffers (segment_take), in
 * out; the caller enciphers them (conceal_ids). Results as api_lease_take;
 * API_LEASE_BROKEN's why names a key refusal. */
enum api_lease_result api_conceal_take(struct api *a, struct http_conn *c,
                                       struct http_request *req,
                                       struct conceal_tag *ct, int64_t n,
                                       struct segment_range *out, int *nout,
                                       char *why, size_t whylen);
/* Take a lease of n IDs of tag (valid, NUL-terminated; n <= 0: the row's
 * step; contiguous: one range). Call again, unchanged, when the request is
 * retried after API_LEASE_PARKED. why gets the reason of a failure. */
enum api_lease_result api_lease_take(struct api *a, struct http_conn *c,
                                     struct http_request *req, const char *tag,
                                     int64_t n, int contiguous,
                                     struct segment_range *out, int *nout,
                                     char *why, size_t whylen);

/* The operator pages (api_pages.c). */
void api_page_cache(struct api *a, struct http_conn *c);
void api_page_sf_state(struct api *a, struct http_conn *c);
void api_page_db(struct api *a, struct http_conn *c, struct http_request *req);
void api_page_metrics(struct api *a, struct http_conn *c);

#endif
