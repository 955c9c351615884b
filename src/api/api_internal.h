/* api_internal.h: the state every file of the API shares: struct api, the
 * route table (api_route.c, its rows in api_routes.h) and each I/O
 * thread's counters and buffers (api_self). The files above it, lowest
 * first: api_writer.h (the writers), api_reply.h (reading and refusing a
 * request), api_handlers.h (the handlers, which api_route.c's dispatch
 * calls). Not for other modules: they use api.h. */
#ifndef LEAFD_API_INTERNAL_H
#define LEAFD_API_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "api.h"
#include "api_routes.h"
#include "segment.h"
#include "util.h"

struct api_writer;
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
    RT_BOTH  = 1 << 4,
    RT_LEAF  = 1 << 5
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
    "serial_unavailable", "serial_refused", "store_behind", "db_failover",
    "durability_degraded", "other"
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
    char            *text;         /* UUIDs or ULIDs of one request, as text */
    char            *idtext;       /* segment or snowflake IDs as strings
                                      (idstr.h), grown on demand */
    size_t           idtext_cap;
    void            *grpc;         /* api_writer_grpc.c's buffers, or NULL */
    /* The writer of the request in hand's protocol: dispatch sets it for
     * every call of the handler; api_reply_error refuses with it. */
    const struct api_writer *writer;
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
    struct conceal      *conceal;      /* concealed segment tags, or NULL */
    struct serials      *serials;      /* serial definitions, or NULL */
    struct serial_loader *serial_loader; /* segment-source serials, or NULL */
    struct serial_zgate *serial_zgate;  /* snowflake serials' zone gate, or
                                           NULL */
    int                  admin_apart;  /* admin pages on their own listener */
    int                  nthreads;
    struct api_thread   *threads;
    int64_t              started_ms;
};

/* The start of every parked request's scratch (api_state,
 * api_lease_state): the wait's end, and whether the request's last park
 * was armed to it, which tells the gRPC writer that the call's own
 * deadline ended a wait (a snowflake or /db wait parks for less). */
struct api_wait {
    int64_t             deadline_us;    /* wait_ms or grpc-timeout, sooner */
    int                 to_deadline;    /* the last park ends at deadline_us */
};

/* What a parked request remembers (lives in http_request.scratch). */
struct api_state {
    struct api_wait     wait;           /* first: see api_wait */
    uint64_t            refresh_gen;
    struct segment_take take;
};
_Static_assert(sizeof(struct api_state) <= HTTP_REQ_SCRATCH, "scratch too small");

/* The counters and buffers of the calling I/O thread (api.c; set by
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

/* Count an answer of route r with status. */
static inline void
api_count(enum route r, int status)
{
    size_t i = 0;

    if (api_self == NULL)
        return;
    while (i < NSTATUS && status_codes[i] != status)
        i++;
    api_stat_inc(&api_self->requests[r][i]);
}

#endif
