/* api_internal.h: what the API's files share: the route table
 * (api_route.c, its rows in api_routes.h), the replies and counters
 * (api_reply.c), the ID handlers (api.c, api_lease.c, api_serial.c,
 * api_tinyid.c, api_resp.c) and the operator pages (api_pages.c). Not for
 * other modules: they use api.h. */
#ifndef LEAFD_API_INTERNAL_H
#define LEAFD_API_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "api.h"
#include "api_routes.h"
#include "segment.h"
#include "util.h"

struct auth;
struct config;
struct loader;
struct serial_loader;
struct serials;
struct loader_lease;
struct snowflake;

/* The routes (api_routes.h): one enum value per row, in the table's order. */
#define API_ROUTE_ENUM(id, name, path, flags, scope, fn) id,
enum route { API_ROUTES(API_ROUTE_ENUM) R_COUNT };
#undef API_ROUTE_ENUM

enum api_route_flag {
    RT_IDS   = 1 << 0,
    RT_BARE  = 1 << 1,
    RT_RAW   = 1 << 2,
    RT_ADMIN = 1 << 3,
    RT_BOTH  = 1 << 4
};

enum api_route_scope { SC_NONE, SC_TAG, SC_SNOWFLAKE };

/* A handler: rest is the part of the path the row's pattern leaves
 * (undecoded), r the row it matched. */
typedef void api_route_cb(struct api *a, struct http_conn *c,
                          struct http_request *req, enum route r,
                          const char *rest, size_t rlen);

struct api_route {
    const char          *name;      /* the route label in /metrics */
    const char          *path;      /* the pattern, or NULL */
    unsigned             flags;     /* enum api_route_flag */
    enum api_route_scope scope;
    api_route_cb        *handler;
};

/* The table (api_route.c), indexed by enum route. */
extern const struct api_route api_routes[R_COUNT];

/* The first row whose pattern matches path (len bytes), or R_OTHER; rest
 * and rlen get the part of the path the pattern's '*' stands for. */
enum route api_route_find(const char *path, size_t len, const char **rest,
                          size_t *rlen);

static const int status_codes[] = { 200, 400, 401, 403, 404, 405, 503 };
#define NSTATUS (sizeof status_codes / sizeof status_codes[0])

/* 503 answers are also counted by their error code (/metrics
 * leafd_http_503_total{route,code}); codes not listed count as "other". */
static const char *const codes_503[] = {
    "ids_exhausted", "tag_lookup_unavailable", "bad_leaf_alloc_row",
    "batch_fragmented", "random_unavailable", "serial_exhausted",
    "serial_unavailable", "serial_refused", "other"
};
#define NCODES_503 (sizeof codes_503 / sizeof codes_503[0])

/* Requests on Leaf's /api/snowflake/get/<key>, by key: the key only labels
 * this metric. Each I/O thread counts its own first LEAF_KEYS_MAX keys; later
 * ones count as "other". A name is written before nkeys is published
 * (release) and never changes after, so /metrics reads it without a lock. */
#define LEAF_KEYS_MAX 64
struct leaf_key {
    uint64_t         hash;
    _Atomic uint64_t count;
    char             name[TAG_MAX + 1];
};

/* Counters of one I/O thread: written by that thread only (plain load+store,
 * no locked instruction), read by /metrics with relaxed loads. */
struct api_thread {
    _Atomic uint64_t requests[R_COUNT][NSTATUS + 1];
    _Atomic uint64_t unavailable[R_COUNT][NCODES_503];   /* 503s by code */
    _Atomic uint64_t parked;
    char            *out;          /* response body buffer */
    size_t           out_cap;
    uint64_t        *ids;          /* snowflake IDs of one request */
    void            *id128;        /* UUIDs or ULIDs of one request */
    _Atomic uint64_t uuids, ulids;  /* issued by this thread */
    _Atomic uint64_t mc_hits, mc_misses; /* memcached get keys answered */
    _Atomic uint32_t nkeys;        /* leaf_keys[0..nkeys) are published */
    _Atomic uint64_t other_keys;
    struct leaf_key  leaf_keys[LEAF_KEYS_MAX];
    void            *grpc;         /* api_grpc.c's reply buffers, or NULL */
} __attribute__((aligned(64)));

struct api {
    const struct config *cfg;
    struct segments     *segs;
    struct loader       *loader;
    struct snowflake    *sf;
    struct uuid7_gen    *uuid;
    struct ulid_gen     *ulid;
    struct http_server  *server;
    struct auth         *auth;         /* per-tag tokens, or NULL */
    struct serials      *serials;      /* serial definitions, or NULL */
    struct serial_loader *serial_loader; /* segment-source serials, or NULL */
    int                  admin_apart;  /* admin pages on their own listener */
    int                  nthreads;
    struct api_thread   *threads;
    int64_t              started_ms;
};

/* What a parked request remembers (lives in http_request.scratch). */
struct api_state {
    int64_t             deadline_us;
    uint64_t            refresh_gen;
    struct segment_take take;
};
_Static_assert(sizeof(struct api_state) <= HTTP_REQ_SCRATCH, "scratch too small");

/* The counters and buffers of the calling I/O thread (api_reply.c; set by
 * api_thread), NULL on other threads. */
extern _Thread_local struct api_thread *api_self;

/* One more on a counter only its own thread writes: a plain load and
 * store, no locked instruction; /metrics reads it with a relaxed load. */
static inline void
api_stat_inc(_Atomic uint64_t *p)
{
    atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* Answer and count (api_reply.c): an ID route's answer gets Cache-Control:
 * no-store. api_reply_sbuf frees b. */
void api_reply(struct http_conn *c, enum route r, int status, const char *ctype,
               const char *extra, const char *body, size_t len);
void api_reply_error(struct http_conn *c, enum route r, int status,
                     const char *code, const char *extra, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
void api_reply_sbuf(struct http_conn *c, enum route r, int status,
                    const char *ctype, struct sbuf *b);

/* How an ID answer is written: HTTP text or JSON, a RESP array of bulk
 * strings, a RESP integer (INCR, one ID), one memcached VALUE (one ID,
 * api_mc_reply_value), or a gRPC reply message (api_grpc.c). */
enum api_fmt { FMT_TEXT, FMT_JSON, FMT_RESP, FMT_RESP_INT, FMT_MC, FMT_GRPC };

/* Count an answer of route r with status (api_reply.c). */
void api_count(enum route r, int status);

/* When a request's wait (segment.wait_ms) ends: from its start, shortened
 * by a gRPC request's grpc-timeout, never lengthened (api_reply.c). */
int64_t api_wait_deadline(const struct api *a, const struct http_request *req);

/* gRPC (api_grpc.c). api_grpc_request answers a request of the gRPC
 * listener (req->proto == HTTP_REQ_GRPC); api_reply_error answers such a
 * request's errors with api_grpc_reply_error (req: c's request), and the
 * handlers its IDs with the FMT_GRPC answers below. */
void api_grpc_request(struct api *a, struct http_conn *c, struct http_request *req);
void api_grpc_reply_error(struct http_conn *c, const struct http_request *req,
                          enum route r, int status, const char *code,
                          const char *msg);
void api_grpc_reply_ranges(struct http_conn *c, enum route r,
                           const struct segment_range *ranges, int nranges);
void api_grpc_reply_u64s(struct http_conn *c, enum route r, const uint64_t *ids,
                         size_t n);
/* Texts one per line ('\n'-ended; text is overwritten) as a StringsReply. */
void api_grpc_reply_lines(struct http_conn *c, enum route r, char *text, size_t len);
void api_grpc_reply_lease(struct http_conn *c, const char *tag,
                          const struct segment_range *ranges, int nranges);
/* An I/O thread's gRPC buffers (api_thread.grpc). */
void api_grpc_thread_free(void *bufs);

/* RESP answers (api_reply.c): counted as 200 on route r, or as status. */
void api_reply_resp(struct http_conn *c, enum route r, const char *data,
                    size_t len, int close_after);
void api_reply_resp_error(struct http_conn *c, enum route r, int status,
                          const char *code, const char *msg);

/* IDs written as text (one per line), JSON or RESP into the thread's
 * buffer, and answered (api_reply.c): ranges of a segment tag (JSON names
 * tag unless NULL), or single IDs. */
void api_reply_ranges(struct http_conn *c, enum route r, enum api_fmt fmt,
                      const char *tag, const struct segment_range *ranges,
                      int nranges);
void api_reply_u64s(struct http_conn *c, enum route r, enum api_fmt fmt,
                    const uint64_t *ids, size_t n);
/* "$<len>\r\n" and "*<n>\r\n" at p; return the end. */
char *api_resp_bulk_head(char *p, size_t len);
char *api_resp_array_head(char *p, size_t n);

/* The handlers of api_routes.h's rows that live in api.c (the others are
 * in api_route.c, beside the table). */
api_route_cb route_segment, route_snowflake, route_decode, route_decode_leaf,
             route_id128, route_id128_decode;

/* The ID handlers both protocols share (api.c). Each answers or parks;
 * api_*_disabled answer 404 mode_disabled and return 1 when the mode is
 * off. */
int  api_segment_disabled(struct api *a, struct http_conn *c, enum route r);
int  api_sf_disabled(struct api *a, struct http_conn *c, enum route r);
void api_serve_segment(struct api *a, struct http_conn *c, struct http_request *req,
                       enum route r, const char *tag, size_t len, int64_t n,
                       enum api_fmt fmt);
void api_serve_snowflake(struct api *a, struct http_conn *c,
                         struct http_request *req, enum route r, int64_t n,
                         enum api_fmt fmt);
void api_serve_id128(struct api *a, struct http_conn *c, enum route r, int64_t n,
                     enum api_fmt fmt);

/* The Redis protocol's commands (api_resp.c). */
void api_resp_command(struct api *a, struct http_conn *c, struct http_request *req);

/* A RESP answer of c's request while a transaction holds it
 * (api_resp_multi.c): EXEC running a queued command, or MULTI checking one.
 * Returns 1 after appending data to the transaction's buffer (not sent),
 * 0 if the caller sends it. api_reply_resp* call it. */
int  api_resp_capture(struct http_conn *c, const char *data, size_t len);
/* memcached's commands (api_memcache.c): a call of a memcached connection
 * (req->mc set). The ID handlers' answers (FMT_MC) and api_reply_error's
 * errors for such a request go to api_mc_reply_value/api_mc_reply_error,
 * which write them for the key c's request names (req->mc_key). Count an
 * answer on route r. */
void api_mc_command(struct api *a, struct http_conn *c, struct http_request *req);
void api_mc_reply_value(struct http_conn *c, enum route r, const char *val,
                        size_t len, uint64_t cas);
void api_mc_reply_error(struct http_conn *c, const struct http_request *req,
                        enum route r, int status, const char *code,
                        const char *msg);

/* The ?count= and format of an ID request (count in [1, max]). 0, or -1
 * after answering 4xx. */
int api_id_request_start(struct api *a, struct http_conn *c,
                         struct http_request *req, enum route r, int64_t max,
                         int64_t *n, int *json);

/* The biz_tag in s (len bytes) of a request, as form says it came: a path
 * part (percent-encoded), a RESP argument or a memcached key (as is).
 * Copies it, decoded and NUL-terminated, to out and returns its length,
 * or -1 when it is not a valid biz_tag (util_tag_valid), after answering
 * 400 invalid_biz_tag on route r; c NULL: without answering (api_reply.c). */
enum api_tag_form { API_TAG_PATH, API_TAG_ARG, API_TAG_KEY };
long api_tag_arg(struct http_conn *c, enum route r, const char *s, size_t len,
                 enum api_tag_form form, char out[TAG_MAX + 1]);

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

/* Serials for either protocol (api_serial.c): definition i, n of them. */
void api_serve_serial(struct api *a, struct http_conn *c, struct http_request *req,
                      size_t i, int64_t n, enum api_fmt fmt);

/* GET /serial/<code> (api_serial.c); raw is the path after /serial/. */
void api_serial(struct api *a, struct http_conn *c, struct http_request *req,
                const char *raw, size_t rawlen);
/* The "serial" member of /health; returns 0 ok, 1 degraded (database down,
 * numbers held), 2 unavailable (database down, a code holds none). */
int  api_serial_health(struct api *a, struct sbuf *b, struct sbuf *reasons);
/* JSON if Accept asks for it or ?format=json (api_reply.c): 1 json, 0 text, or
 * -1 after answering 400. */
int  api_want_json(struct http_conn *c, enum route r, const struct http_msg *m);

/* Leases (api_lease.c): GET /segment/<tag>/lease?size=N (raw: the
 * undecoded tag), and Tinyid's /tinyid/id/<op> (api_tinyid.c). */
void api_lease_handle(struct api *a, struct http_conn *c, struct http_request *req,
                      const char *raw, size_t rawlen);
/* A lease of n IDs of tag (valid; n <= 0: the row's step) for a request of
 * either protocol: answer (fmt FMT_TEXT, FMT_JSON or FMT_GRPC), or park. */
void api_serve_lease(struct api *a, struct http_conn *c, struct http_request *req,
                     const char *tag, int64_t n, enum api_fmt fmt);
void api_tinyid_handle(struct api *a, struct http_conn *c, struct http_request *req,
                       const char *op, size_t oplen);

/* One lease for a handler, across parks (api_lease.c). */
struct api_lease_state {
    int64_t              deadline_us;
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
#define API_LEASE_MAX_RANGES (SEGMENT_MAX_RANGES + 1)
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
