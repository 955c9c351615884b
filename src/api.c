/* api.c: routes and handlers of leafd's HTTP API (see api.h).
 *
 * The hot paths are GET /segment/<tag> and GET /snowflake: they format IDs
 * into a per-thread buffer and hand it to http_reply; no allocation, lock or
 * syscall of their own. Every error is JSON: {"error":"<code>","message":...}.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "auth.h"
#include "config.h"
#include "loader.h"
#include "log.h"
#include "segment.h"
#include "snowflake.h"
#include "util.h"

enum route {
    R_SEGMENT, R_SEGMENT_LEAF, R_SNOWFLAKE, R_SNOWFLAKE_LEAF, R_DECODE,
    R_DECODE_LEAF, R_SF_STATE, R_HEALTH, R_METRICS, R_CACHE, R_DB, R_OTHER,
    R_COUNT
};
static const char *const route_names[R_COUNT] = {
    "segment", "leaf_segment", "snowflake", "leaf_snowflake", "decode",
    "leaf_decode", "snowflake_state", "health", "metrics", "cache", "db", "other"
};

static const int status_codes[] = { 200, 400, 401, 403, 404, 405, 503 };
#define NSTATUS (sizeof status_codes / sizeof status_codes[0])

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
    _Atomic uint64_t parked;
    char            *out;          /* response body buffer */
    size_t           out_cap;
    uint64_t        *ids;          /* snowflake IDs of one request */
    _Atomic uint32_t nkeys;        /* leaf_keys[0..nkeys) are published */
    _Atomic uint64_t other_keys;
    struct leaf_key  leaf_keys[LEAF_KEYS_MAX];
} __attribute__((aligned(64)));

struct api {
    const struct config *cfg;
    struct segments     *segs;
    struct loader       *loader;
    struct snowflake    *sf;
    struct http_server  *server;
    struct auth         *auth;         /* per-tag tokens, or NULL */
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

static _Thread_local struct api_thread *self;

uint64_t
api_segment_key(const char *tag, size_t len)
{
    uint64_t h = UINT64_C(14695981039346656037);    /* FNV-1a */

    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)tag[i]) * UINT64_C(1099511628211);
    return h;
}

/* Routes that hand out IDs: never cached, never taken by HEAD. */
static int
route_takes_ids(enum route r)
{
    return r == R_SEGMENT || r == R_SEGMENT_LEAF || r == R_SNOWFLAKE ||
           r == R_SNOWFLAKE_LEAF;
}

static void
stat_inc(_Atomic uint64_t *p)
{
    atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

struct api *
api_new(const struct config *cfg, struct segments *segs, struct loader *loader,
        struct snowflake *sf, int nthreads)
{
    struct api *a = xcalloc(1, sizeof *a);
    size_t maxn = (size_t)(cfg->count_max > cfg->sf_count_max ? cfg->count_max
                                                              : cfg->sf_count_max);

    a->cfg = cfg;
    a->segs = segs;
    a->loader = loader;
    a->sf = sf;
    a->nthreads = nthreads;
    /* One more slot for the admin listener's thread. */
    a->threads = aligned_alloc(64, sizeof *a->threads * (size_t)(nthreads + 1));
    if (a->threads == NULL)
        abort();
    memset(a->threads, 0, sizeof *a->threads * (size_t)(nthreads + 1));
    for (int i = 0; i <= nthreads; i++) {
        /* An ID is at most 19 digits; JSON adds 3 bytes and the tag. */
        a->threads[i].out_cap = maxn * 24 + TAG_MAX * 2 + 256;
        a->threads[i].out = xmalloc(a->threads[i].out_cap);
        a->threads[i].ids = xcalloc((size_t)cfg->sf_count_max, sizeof(uint64_t));
    }
    a->started_ms = util_wall_ms();
    return a;
}

void
api_free(struct api *a)
{
    if (a == NULL)
        return;
    for (int i = 0; i <= a->nthreads; i++) {
        free(a->threads[i].out);
        free(a->threads[i].ids);
    }
    free(a->threads);
    auth_free(a->auth);
    free(a);
}

void
api_set_server(struct api *a, struct http_server *s)
{
    a->server = s;
}

void
api_set_snowflake(struct api *a, struct snowflake *sf)
{
    a->sf = sf;
}

void
api_set_auth(struct api *a, struct auth *auth, int admin_apart)
{
    a->auth = auth;
    a->admin_apart = admin_apart;
}

void
api_thread(int index, int starting, void *arg)
{
    struct api *a = arg;

    self = starting ? &a->threads[index] : NULL;
}

void
api_thread_admin(int index, int starting, void *arg)
{
    struct api *a = arg;

    (void)index;
    self = starting ? &a->threads[a->nthreads] : NULL;
}

static void
count(enum route r, int status)
{
    size_t i = 0;

    if (self == NULL)
        return;
    while (i < NSTATUS && status_codes[i] != status)
        i++;
    stat_inc(&self->requests[r][i]);
}

/* ---- replies ---- */

#define NO_STORE "Cache-Control: no-store\r\n"

static void
reply(struct http_conn *c, enum route r, int status, const char *ctype,
      const char *extra, const char *body, size_t len)
{
    char both[256];

    count(r, status);
    /* A cache in front of an ID route would hand one ID out twice. */
    if (route_takes_ids(r)) {
        if (extra == NULL) {
            extra = NO_STORE;
        } else {
            size_t n = strlen(extra);

            assert(n < sizeof both - sizeof NO_STORE);
            memcpy(both, NO_STORE, sizeof NO_STORE - 1);
            memcpy(both + sizeof NO_STORE - 1, extra, n + 1);
            extra = both;
        }
    }
    http_reply(c, status, ctype, extra, body, len);
}

static void
reply_error(struct http_conn *c, enum route r, int status, const char *code,
            const char *extra, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static void
reply_error(struct http_conn *c, enum route r, int status, const char *code,
            const char *extra, const char *fmt, ...)
{
    char msg[512], body[1024];
    char *q;
    va_list ap;
    int n;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    q = util_json_str(msg);
    n = snprintf(body, sizeof body, "{\"error\":\"%s\",\"message\":%s}\n", code, q);
    free(q);
    if (n < 0 || (size_t)n >= sizeof body)
        n = snprintf(body, sizeof body, "{\"error\":\"%s\"}\n", code);
    reply(c, r, status, "application/json", extra, body, (size_t)n);
}

static void
reply_sbuf(struct http_conn *c, enum route r, int status, const char *ctype,
           struct sbuf *b)
{
    reply(c, r, status, ctype, NULL, b->p ? b->p : "", b->len);
    sbuf_free(b);
}

/* Write the IDs of ranges as text (one per line) or JSON into the thread's
 * buffer and reply. */
static void
reply_ids(struct http_conn *c, enum route r, int json, const char *tag,
          const struct segment_range *ranges, int nranges)
{
    char *p = self->out, *start = self->out;

    if (json) {
        if (tag != NULL) {
            p = memcpy(p, "{\"biz_tag\":\"", 12), p += 12;
            memcpy(p, tag, strlen(tag));     /* tags are [A-Za-z0-9._:-] */
            p += strlen(tag);
            memcpy(p, "\",\"ids\":[", 9);
            p += 9;
        } else {
            memcpy(p, "{\"ids\":[", 8);
            p += 8;
        }
    }
    for (int i = 0; i < nranges; i++) {
        for (int64_t k = 0; k < ranges[i].count; k++) {
            uint64_t id = (uint64_t)(ranges[i].start + k);
            if (json) {
                *p++ = '"';
                p = util_u64_dec(p, id);
                *p++ = '"';
                *p++ = ',';
            } else {
                p = util_u64_dec(p, id);
                *p++ = '\n';
            }
        }
    }
    if (json) {
        if (p[-1] == ',')
            p--;
        memcpy(p, "]}\n", 3);
        p += 3;
    }
    reply(c, r, 200, json ? "application/json" : "text/plain", NULL, start,
          (size_t)(p - start));
}

/* ---- request helpers ---- */

/* ?count=N in [1, max] (1 if absent). Returns N, or -1 after answering 400
 * (malformed, out of range, or given twice). */
static int64_t
query_count(struct http_conn *c, enum route r, const struct http_msg *m,
            int64_t max)
{
    char v[24];
    size_t vlen = 0;
    int64_t n;

    if (m->query == NULL)
        return 1;
    switch (util_query_param(m->query, m->query_len, "count", v, sizeof v, &vlen)) {
    case UTIL_QUERY_ABSENT:
        return 1;
    case UTIL_QUERY_REPEATED:
        reply_error(c, r, 400, "repeated_parameter", NULL,
                    "count is given more than once");
        return -1;
    case UTIL_QUERY_FOUND:
        if (util_parse_i64(v, vlen, 0, &n) == 0 && n >= 1 && n <= max)
            return n;
        break;
    case UTIL_QUERY_BAD:
        break;
    }
    reply_error(c, r, 400, "invalid_count", NULL,
                "count must be an integer from 1 to %lld", (long long)max);
    return -1;
}

/* JSON if Accept asks for it or ?format=json; ?format=text wins over Accept.
 * Returns 1 json, 0 text, or -1 after answering 400. */
static int
want_json(struct http_conn *c, enum route r, const struct http_msg *m)
{
    char v[8];
    size_t vlen = 0;

    if (m->query == NULL)
        return m->accept_json;
    switch (util_query_param(m->query, m->query_len, "format", v, sizeof v, &vlen)) {
    case UTIL_QUERY_ABSENT:
        return m->accept_json;
    case UTIL_QUERY_REPEATED:
        reply_error(c, r, 400, "repeated_parameter", NULL,
                    "format is given more than once");
        return -1;
    case UTIL_QUERY_FOUND:
        if (vlen == 4 && memcmp(v, "json", 4) == 0)
            return 1;
        if ((vlen == 4 && memcmp(v, "text", 4) == 0) ||
            (vlen == 5 && memcmp(v, "plain", 5) == 0))
            return 0;
        break;
    case UTIL_QUERY_BAD:
        break;
    }
    reply_error(c, r, 400, "invalid_format", NULL, "format must be json or text");
    return -1;
}

static int
path_is(const struct http_msg *m, const char *s)
{
    size_t n = strlen(s);
    return m->path_len == n && memcmp(m->path, s, n) == 0;
}

static int
path_prefix(const struct http_msg *m, const char *s, const char **rest, size_t *rlen)
{
    size_t n = strlen(s);

    if (m->path_len < n || memcmp(m->path, s, n) != 0)
        return 0;
    *rest = m->path + n;
    *rlen = m->path_len - n;
    return 1;
}

/* The ?count= and format of an ID request, and its deadline on the first
 * call. Returns 0, or -1 after answering 400. */
static int
id_request_start(struct api *a, struct http_conn *c, struct http_request *req,
                 enum route r, int64_t max, int64_t *n, int *json)
{
    struct api_state *st = (struct api_state *)req->scratch;

    if (req->msg.method == HTTP_HEAD) {
        reply_error(c, r, 405, "method_not_allowed", "Allow: GET\r\n",
                    "HEAD would take IDs and drop them: use GET (probe with "
                    "GET /health)");
        return -1;
    }
    *n = query_count(c, r, &req->msg, max);
    if (*n < 0)
        return -1;
    *json = want_json(c, r, &req->msg);
    if (*json < 0)
        return -1;
    if (!req->retry && !req->timed_out)
        st->deadline_us = req->start_us + a->cfg->wait_ms * 1000;
    return 0;
}

/* ---- segment mode ---- */

/* 503 for a segment request with no ID to give: ls is the loader's status,
 * or NULL to read it here. */
static void
reply_no_ids(struct api *a, struct http_conn *c, enum route r,
             const struct api_state *st, const char *tag,
             const struct loader_status *ls)
{
    struct loader_status mine;

    if (ls == NULL) {
        loader_status(a->loader, &mine);
        ls = &mine;
    }
    if (st->take.tag == NULL)
        reply_error(c, r, 503, "tag_lookup_unavailable", "Retry-After: 1\r\n",
                    "cannot tell whether biz_tag '%s' exists: %s%s%s; retry later",
                    tag, ls->db_up ? "the database did not answer in time"
                                   : "the database is unreachable (",
                    ls->db_up ? "" : ls->last_error, ls->db_up ? "" : ")");
    else
        reply_error(c, r, 503, "ids_exhausted", "Retry-After: 1\r\n",
                    "no ID for biz_tag '%s': both buffers are empty and %s%s%s; "
                    "retry later", tag,
                    ls->db_up ? "the next segment did not arrive in time"
                              : "the database is unreachable (",
                    ls->db_up ? "" : ls->last_error, ls->db_up ? "" : ")");
}

static void
handle_segment(struct api *a, struct http_conn *c, struct http_request *req,
               enum route r, const char *raw, size_t rawlen)
{
    struct api_state *st = (struct api_state *)req->scratch;
    char tag[TAG_MAX + 1];
    long len;
    int64_t n;
    int json;
    enum segment_result res;

    if (a->segs == NULL) {
        reply_error(c, r, 404, "mode_disabled", NULL,
                    "segment mode is off on this node (leaf.segment.enable = false)");
        return;
    }
    len = util_pct_decode(raw, rawlen, tag, TAG_MAX);
    if (len < 0 || !util_tag_valid(tag, (size_t)len)) {
        reply_error(c, r, 400, "invalid_biz_tag", NULL,
                    "biz_tag must be 1 to %d characters of [A-Za-z0-9._:-] after "
                    "percent-decoding", TAG_MAX);
        return;
    }
    tag[len] = '\0';
    if (id_request_start(a, c, req, r, a->cfg->count_max, &n, &json) == -1)
        return;

    if (req->timed_out) {
        reply_no_ids(a, c, r, st, tag, NULL);
        return;
    }

    res = segment_take(a->segs, tag, (size_t)len, n, &st->take);
    switch (res) {
    case SEGMENT_OK:
        if (r == R_SEGMENT_LEAF && !json && n == 1) {
            /* Leaf's path answers the bare number, as Leaf does. */
            char buf[24], *e = util_u64_dec(buf, (uint64_t)st->take.ranges[0].start);
            reply(c, r, 200, "text/plain", NULL, buf, (size_t)(e - buf));
            return;
        }
        reply_ids(c, r, json, tag, st->take.ranges, st->take.nranges);
        return;
    case SEGMENT_UNKNOWN:
        reply_error(c, r, 404, "unknown_biz_tag", NULL,
                    "biz_tag '%s' is not in leaf_alloc; insert a row for it first",
                    tag);
        return;
    case SEGMENT_BUSY:
        reply_error(c, r, 503, "tag_lookup_unavailable", "Retry-After: 1\r\n",
                    "too many unknown biz_tags are being looked up right now; "
                    "biz_tag '%s' was not looked up; retry later", tag);
        return;
    case SEGMENT_BROKEN:
        reply_error(c, r, 503, "bad_leaf_alloc_row", "Retry-After: 60\r\n",
                    "the leaf_alloc row of biz_tag '%s' cannot give IDs (step "
                    "outside [1, 2147483647], or max_id at its limit); a DBA "
                    "must fix the row (the log says what is wrong)", tag);
        return;
    case SEGMENT_WAIT: {
        int64_t left = (st->deadline_us - util_mono_us() + 999) / 1000;

        /* Nothing to wait for while the database is known to be down (the
         * loader is backing off): say so now rather than after wait_ms. One
         * atomic load: a parked request checks this on every retry. */
        if (!loader_db_up(a->loader)) {
            reply_no_ids(a, c, r, st, tag, NULL);
            return;
        }
        if (left <= 0)
            left = 1;
        http_park(c, (int)left, api_segment_key(tag, (size_t)len));
        return;
    }
    }
}

/* ---- snowflake mode ---- */

static int
sf_disabled(struct api *a, struct http_conn *c, enum route r)
{
    if (a->sf != NULL)
        return 0;
    reply_error(c, r, 404, "mode_disabled", NULL,
                "snowflake mode is off on this node (leaf.snowflake.enable = false)");
    return 1;
}

static void
reply_u64s(struct http_conn *c, enum route r, int json, const uint64_t *ids, size_t n)
{
    char *p = self->out, *start = self->out;

    if (json) {
        memcpy(p, "{\"ids\":[", 8);
        p += 8;
        for (size_t i = 0; i < n; i++) {
            *p++ = '"';
            p = util_u64_dec(p, ids[i]);
            *p++ = '"';
            *p++ = ',';
        }
        if (p[-1] == ',')
            p--;
        memcpy(p, "]}\n", 3);
        p += 3;
    } else {
        for (size_t i = 0; i < n; i++) {
            p = util_u64_dec(p, ids[i]);
            *p++ = '\n';
        }
    }
    reply(c, r, 200, json ? "application/json" : "text/plain", NULL, start,
          (size_t)(p - start));
}

static void
handle_snowflake(struct api *a, struct http_conn *c, struct http_request *req,
                 enum route r)
{
    struct api_state *st = (struct api_state *)req->scratch;
    struct sf_refusal why;
    int64_t n, now;
    int json, rc;

    if (sf_disabled(a, c, r))
        return;
    if (id_request_start(a, c, req, r, a->cfg->sf_count_max, &n, &json) == -1)
        return;

    rc = snowflake_next(a->sf, (uint32_t)n, self->ids, &why);
    if (rc == SF_OK) {
        if (r == R_SNOWFLAKE_LEAF && !json && n == 1) {
            char buf[24], *e = util_u64_dec(buf, self->ids[0]);
            reply(c, r, 200, "text/plain", NULL, buf, (size_t)(e - buf));
            return;
        }
        reply_u64s(c, r, json, self->ids, (size_t)n);
        return;
    }
    now = util_mono_us();
    if (rc == SF_WAIT && now + why.wait_ms * 1000 <= st->deadline_us) {
        http_park(c, (int)why.wait_ms, API_SNOWFLAKE_KEY);
        return;
    }
    {
        char extra[64];
        snprintf(extra, sizeof extra, "Retry-After: %d\r\n",
                 why.retry_after_s > 0 ? why.retry_after_s : 1);
        reply_error(c, r, 503, why.code, extra, "%s", why.message);
    }
}

/* Count one request on /api/snowflake/get/<key> in this thread's table: no
 * lock, no locked instruction (the owner is the only writer). */
static void
count_leaf_key(const char *raw, size_t rawlen)
{
    char key[TAG_MAX + 1];
    long n;
    uint64_t h;
    uint32_t i, nk;

    if (self == NULL)
        return;
    n = util_pct_decode(raw, rawlen, key, TAG_MAX);
    if (n < 0 || !util_tag_valid(key, (size_t)n)) {
        stat_inc(&self->other_keys);
        return;
    }
    h = api_segment_key(key, (size_t)n);
    nk = atomic_load_explicit(&self->nkeys, memory_order_relaxed);
    for (i = 0; i < nk; i++) {
        struct leaf_key *k = &self->leaf_keys[i];
        if (k->hash == h && strncmp(k->name, key, (size_t)n) == 0 &&
            k->name[n] == '\0') {
            stat_inc(&k->count);
            return;
        }
    }
    if (nk == LEAF_KEYS_MAX) {
        stat_inc(&self->other_keys);
        return;
    }
    self->leaf_keys[nk].hash = h;
    memcpy(self->leaf_keys[nk].name, key, (size_t)n);
    self->leaf_keys[nk].name[n] = '\0';
    atomic_store_explicit(&self->leaf_keys[nk].count, 1, memory_order_relaxed);
    atomic_store_explicit(&self->nkeys, nk + 1, memory_order_release);
}

static void
handle_decode(struct api *a, struct http_conn *c, enum route r, const char *id,
              long len)
{
    struct sbuf b = { 0 };
    char *cause = NULL;

    if (sf_disabled(a, c, r))
        return;
    if (len < 0) {
        reply_error(c, r, 400, "invalid_id", NULL,
                    "not a snowflake ID: expected a decimal number of at most 19 digits");
        return;
    }
    if (snowflake_decode_json(a->sf, id, (size_t)len, r == R_DECODE_LEAF, &b, &cause) == -1) {
        reply_error(c, r, 400, "invalid_id", NULL, "%s", cause ? cause : "not an ID");
        free(cause);
        sbuf_free(&b);
        return;
    }
    sbuf_puts(&b, "\n");
    reply_sbuf(c, r, 200, "application/json", &b);
}

static void
handle_sf_state(struct api *a, struct http_conn *c)
{
    struct sbuf b = { 0 };

    if (sf_disabled(a, c, R_SF_STATE))
        return;
    snowflake_state_json(a->sf, &b);
    sbuf_puts(&b, "\n");
    reply_sbuf(c, R_SF_STATE, 200, "application/json", &b);
}

/* ---- pages ---- */

static void
cache_tag(const struct segment_tag_info *in, void *arg)
{
    struct sbuf *b = arg;

    sbuf_puts(b, b->p[b->len - 1] == '[' ? "{\"key\":" : ",{\"key\":");
    sbuf_json_str(b, in->name);
    sbuf_printf(b, ",\"init_ok\":%s,\"gone\":%s,\"pos\":%d,\"next_ready\":%s,"
                   "\"loading\":%s,\"step\":%lld,\"min_step\":%lld,\"loads\":%lld,"
                   "\"issued\":%lld,\"available\":%lld,\"segments\":[",
                in->init_ok ? "true" : "false", in->gone ? "true" : "false",
                in->cur, in->next_ready ? "true" : "false",
                in->loading ? "true" : "false", (long long)in->step,
                (long long)in->min_step, (long long)in->loads,
                (long long)in->issued, (long long)in->available);
    for (int i = 0; i < 2; i++)
        sbuf_printf(b, "%s{\"value\":\"%lld\",\"max\":\"%lld\",\"step\":%lld,"
                       "\"idle\":%lld}",
                    i ? "," : "", (long long)in->slot[i].value,
                    (long long)in->slot[i].max, (long long)in->slot[i].step,
                    (long long)(in->slot[i].max - in->slot[i].value));
    sbuf_puts(b, "]}");
}

static void
handle_cache(struct api *a, struct http_conn *c)
{
    struct sbuf b = { 0 };

    if (a->segs == NULL) {
        reply_error(c, R_CACHE, 404, "mode_disabled", NULL, "segment mode is off on this node");
        return;
    }
    sbuf_puts(&b, "{\"tags\":[");
    segments_foreach(a->segs, cache_tag, &b);
    sbuf_puts(&b, "]}\n");
    reply_sbuf(c, R_CACHE, 200, "application/json", &b);
}

static void
handle_db(struct api *a, struct http_conn *c, struct http_request *req)
{
    struct api_state *st = (struct api_state *)req->scratch;
    struct loader_status ls;
    struct sbuf b = { 0 };

    if (a->segs == NULL) {
        reply_error(c, R_DB, 404, "mode_disabled", NULL, "segment mode is off on this node");
        return;
    }
    /* Read the table afresh on the loader's thread, then answer. */
    if (!req->retry && !req->timed_out) {
        st->refresh_gen = loader_refresh_now(a->loader, 1);
        http_park(c, (int)a->cfg->wait_ms, API_DB_KEY);
        return;
    }
    loader_status(a->loader, &ls);
    if (ls.refresh_gen < st->refresh_gen && !req->timed_out) {
        http_park(c, (int)((req->start_us + a->cfg->wait_ms * 1000 - util_mono_us()) / 1000 + 1),
                  API_DB_KEY);
        return;
    }
    sbuf_printf(&b, "{\"store\":\"%s\",\"fresh\":%s,\"read_at_ms\":%lld,\"rows\":",
                ls.store, ls.refresh_gen >= st->refresh_gen ? "true" : "false",
                (long long)ls.refreshed_ms);
    loader_rows_json(a->loader, &b);
    sbuf_puts(&b, "}\n");
    reply_sbuf(c, R_DB, 200, "application/json", &b);
}

struct health_scan {
    int64_t dry;        /* tags in use with no ID left */
    char    first[TAG_MAX + 1];
};

static void
health_tag(const struct segment_tag_info *in, void *arg)
{
    struct health_scan *h = arg;

    if (in->init_ok && !in->gone && in->available == 0) {
        if (h->dry++ == 0)
            snprintf(h->first, sizeof h->first, "%s", in->name);
    }
}

int
api_health(struct api *a, struct sbuf *b)
{
    int ok = 1, degraded = 0;
    struct sbuf reasons = { 0 };

    sbuf_puts(b, "{");
    if (a->segs != NULL) {
        struct loader_status ls;
        struct health_scan h = { 0 };

        loader_status(a->loader, &ls);
        segments_foreach(a->segs, health_tag, &h);
        sbuf_printf(b, "\"segment\":{\"enabled\":true,\"store\":\"%s\",\"db\":\"%s\","
                       "\"tags\":%zu,\"tags_without_ids\":%lld",
                    ls.store, ls.db_up ? "up" : "down", segments_count(a->segs),
                    (long long)h.dry);
        if (!ls.db_up) {
            sbuf_printf(b, ",\"db_down_for_ms\":%lld,\"db_error\":",
                        (long long)(util_wall_ms() - ls.down_since_ms));
            sbuf_json_str(b, ls.last_error);
            if (h.dry > 0) {
                ok = 0;
                sbuf_printf(&reasons, "segment: database unreachable and %lld tag(s) "
                                      "(e.g. %s) have no buffered IDs; ",
                            (long long)h.dry, h.first);
            } else {
                degraded = 1;
                sbuf_printf(&reasons, "segment: database unreachable, serving from "
                                      "buffers; ");
            }
        }
        sbuf_puts(b, "},");
    } else {
        sbuf_puts(b, "\"segment\":{\"enabled\":false},");
    }
    if (a->sf != NULL) {
        char *why = NULL;
        if (snowflake_health(a->sf, &why) == 0) {
            sbuf_puts(b, "\"snowflake\":{\"enabled\":true,\"status\":\"ok\"},");
        } else {
            ok = 0;
            sbuf_puts(b, "\"snowflake\":{\"enabled\":true,\"status\":\"unavailable\",\"reason\":");
            sbuf_json_str(b, why ? why : "?");
            sbuf_puts(b, "},");
            sbuf_printf(&reasons, "snowflake: %s; ", why ? why : "?");
            free(why);
        }
    } else {
        sbuf_puts(b, "\"snowflake\":{\"enabled\":false},");
    }
    sbuf_printf(b, "\"uptime_ms\":%lld,\"status\":\"%s\"",
                (long long)(util_wall_ms() - a->started_ms),
                !ok ? "unavailable" : degraded ? "degraded" : "ok");
    if (reasons.len > 0) {
        reasons.len -= 2;          /* drop the last "; " */
        reasons.p[reasons.len] = '\0';
        sbuf_puts(b, ",\"reason\":");
        sbuf_json_str(b, reasons.p);
    }
    sbuf_puts(b, "}\n");
    sbuf_free(&reasons);
    return ok ? 200 : 503;
}

static void
metrics_tag(const struct segment_tag_info *in, void *arg)
{
    struct sbuf *b = arg;

    sbuf_printf(b, "leafd_segment_ids_issued_total{biz_tag=\"%s\"} %lld\n"
                   "leafd_segment_step{biz_tag=\"%s\"} %lld\n"
                   "leafd_segment_ids_available{biz_tag=\"%s\"} %lld\n"
                   "leafd_segment_next_ready{biz_tag=\"%s\"} %d\n"
                   "leafd_segment_loading{biz_tag=\"%s\"} %d\n",
                in->name, (long long)in->issued, in->name, (long long)in->step,
                in->name, (long long)in->available, in->name, in->next_ready,
                in->name, in->loading);
}

/* Sum the per-thread key tables by name (first seen first). */
static void
leaf_keys_metrics(struct api *a, struct sbuf *b)
{
    uint64_t other = 0;

    for (int t = 0; t <= a->nthreads; t++) {
        const struct api_thread *at = &a->threads[t];
        uint32_t nk = atomic_load_explicit(&at->nkeys, memory_order_acquire);

        other += atomic_load_explicit(&at->other_keys, memory_order_relaxed);
        for (uint32_t i = 0; i < nk; i++) {
            const struct leaf_key *k = &at->leaf_keys[i];
            uint64_t sum = 0;
            int seen = 0;

            /* Printed already under an earlier thread? */
            for (int u = 0; u < t && !seen; u++) {
                uint32_t un = atomic_load_explicit(&a->threads[u].nkeys,
                                                   memory_order_acquire);
                for (uint32_t j = 0; j < un && !seen; j++)
                    seen = a->threads[u].leaf_keys[j].hash == k->hash &&
                           strcmp(a->threads[u].leaf_keys[j].name, k->name) == 0;
            }
            if (seen)
                continue;
            for (int u = t; u <= a->nthreads; u++) {
                uint32_t un = atomic_load_explicit(&a->threads[u].nkeys,
                                                   memory_order_acquire);
                for (uint32_t j = 0; j < un; j++)
                    if (a->threads[u].leaf_keys[j].hash == k->hash &&
                        strcmp(a->threads[u].leaf_keys[j].name, k->name) == 0)
                        sum += atomic_load_explicit(&a->threads[u].leaf_keys[j].count,
                                                    memory_order_relaxed);
            }
            sbuf_printf(b, "leafd_leaf_snowflake_requests_total{key=\"%s\"} %llu\n",
                        k->name, (unsigned long long)sum);
        }
    }
    if (other > 0)
        sbuf_printf(b, "leafd_leaf_snowflake_requests_total{key=\"other\"} %llu\n",
                    (unsigned long long)other);
}

static void
handle_metrics(struct api *a, struct http_conn *c)
{
    struct sbuf b = { 0 };
    struct http_stats hs;

    sbuf_puts(&b, "# HELP leafd_http_requests_total Requests by route and status.\n"
                  "# TYPE leafd_http_requests_total counter\n");
    for (int r = 0; r < R_COUNT; r++) {
        for (size_t s = 0; s <= NSTATUS; s++) {
            uint64_t sum = 0;
            for (int t = 0; t <= a->nthreads; t++)
                sum += atomic_load_explicit(&a->threads[t].requests[r][s],
                                            memory_order_relaxed);
            if (sum == 0)
                continue;
            if (s < NSTATUS)
                sbuf_printf(&b, "leafd_http_requests_total{route=\"%s\",status=\"%d\"} %llu\n",
                            route_names[r], status_codes[s], (unsigned long long)sum);
            else
                sbuf_printf(&b, "leafd_http_requests_total{route=\"%s\",status=\"other\"} %llu\n",
                            route_names[r], (unsigned long long)sum);
        }
    }
    if (a->server != NULL) {
        http_server_stats(a->server, &hs);
        sbuf_printf(&b, "# TYPE leafd_http_connections gauge\n"
                        "leafd_http_connections %llu\n"
                        "# TYPE leafd_http_connections_total counter\n"
                        "leafd_http_connections_total %llu\n"
                        "# TYPE leafd_http_connections_rejected_total counter\n"
                        "leafd_http_connections_rejected_total %llu\n"
                        "# TYPE leafd_http_requests_waiting gauge\n"
                        "leafd_http_requests_waiting %llu\n",
                    (unsigned long long)hs.connections_open,
                    (unsigned long long)hs.connections_total,
                    (unsigned long long)hs.connections_rejected,
                    (unsigned long long)hs.requests_parked);
    }
    if (a->segs != NULL) {
        sbuf_printf(&b, "# TYPE leafd_segment_tags gauge\nleafd_segment_tags %zu\n"
                        "# TYPE leafd_segment_unknown_tags_cached gauge\n"
                        "leafd_segment_unknown_tags_cached %zu\n",
                    segments_count(a->segs), segments_negative_count(a->segs));
        sbuf_puts(&b, "# HELP leafd_segment_ids_issued_total IDs handed out by tag.\n"
                      "# TYPE leafd_segment_ids_issued_total counter\n"
                      "# TYPE leafd_segment_step gauge\n"
                      "# TYPE leafd_segment_ids_available gauge\n"
                      "# TYPE leafd_segment_next_ready gauge\n"
                      "# TYPE leafd_segment_loading gauge\n");
        segments_foreach(a->segs, metrics_tag, &b);
        loader_metrics(a->loader, &b);
    }
    if (a->sf != NULL) {
        snowflake_metrics(a->sf, &b);
        sbuf_puts(&b, "# HELP leafd_leaf_snowflake_requests_total Requests on Leaf's "
                      "/api/snowflake/get/<key>, by key.\n"
                      "# TYPE leafd_leaf_snowflake_requests_total counter\n");
        leaf_keys_metrics(a, &b);
    }
    reply_sbuf(c, R_METRICS, 200, "text/plain; version=0.0.4", &b);
}

/* ---- dispatch ---- */

/* Admin pages need the admin token when one is set. Returns 1 if answered. */
static int
admin_denied(struct api *a, struct http_conn *c, const struct http_msg *m, enum route r)
{
    const char *tok;
    size_t len;

    if (a->cfg->admin_token[0] == '\0')
        return 0;
    tok = (m->authorization != NULL && m->authorization_len > 7 &&
           strncasecmp(m->authorization, "Bearer ", 7) == 0)
              ? m->authorization + 7 : NULL;
    len = tok ? m->authorization_len - 7 : 0;
    if (tok == NULL) {
        reply_error(c, r, 401, "unauthorized", "WWW-Authenticate: Bearer\r\n",
                    "this page needs Authorization: Bearer <admin.token>");
        return 1;
    }
    if (!auth_equal(tok, len, a->cfg->admin_token, strlen(a->cfg->admin_token))) {
        reply_error(c, r, 403, "forbidden", NULL, "wrong admin token");
        return 1;
    }
    return 0;
}

/* ID endpoints need a token for scope when a tokens file is set. Returns 1
 * if answered. */
static int
id_denied(struct api *a, struct http_conn *c, const struct http_msg *m,
          enum route r, const char *scope)
{
    char buf[AUTH_TOKEN_MAX];
    const char *tok;
    size_t len = 0;
    int rc;

    if (a->auth == NULL)
        return 0;
    if (auth_request_token(m, buf, sizeof buf, &tok, &len) == -1) {
        reply_error(c, r, 400, "repeated_parameter", NULL,
                    "token is given more than once");
        return 1;
    }
    rc = auth_check(a->auth, scope, tok, len);
    if (rc == 401)
        reply_error(c, r, 401, "token_required", "WWW-Authenticate: Bearer\r\n",
                    "this endpoint needs a token: Authorization: Bearer <token> or ?token=");
    else if (rc == 403)
        reply_error(c, r, 403, "token_forbidden", NULL,
                    "the token is not valid for %s", scope);
    return rc != 0;
}

/* The biz_tag of a segment path, for the token check (raw; the handler
 * validates it). */
static int
segment_scope(const char *raw, size_t rawlen, char *out)
{
    long n = util_pct_decode(raw, rawlen, out, TAG_MAX);

    if (n < 0 || !util_tag_valid(out, (size_t)n))
        return -1;
    out[n] = '\0';
    return 0;
}

static void
dispatch(struct api *a, struct http_conn *c, struct http_request *req, int admin)
{
    const struct http_msg *m = &req->msg;
    const char *rest;
    size_t rlen;
    enum route admin_route = R_COUNT;
    char scope[TAG_MAX + 1];

    if (m->method != HTTP_GET && m->method != HTTP_HEAD) {
        reply_error(c, R_OTHER, 405, "method_not_allowed", "Allow: GET, HEAD\r\n",
                    "only GET and HEAD are served");
        return;
    }
    if (m->query != NULL && !util_query_valid(m->query, m->query_len)) {
        reply_error(c, R_OTHER, 400, "bad_query", NULL,
                    "the query string has a malformed %%-escape or a %%00");
        return;
    }
    if (path_is(m, "/metrics"))
        admin_route = R_METRICS;
    else if (path_is(m, "/cache"))
        admin_route = R_CACHE;
    else if (path_is(m, "/db"))
        admin_route = R_DB;
    else if (path_is(m, "/snowflake/state"))
        admin_route = R_SF_STATE;

    if (admin_route != R_COUNT) {
        if (a->admin_apart && !admin) {
            reply_error(c, admin_route, 404, "not_found",
                        NULL, "admin pages are served on the admin listener");
            return;
        }
        if (!req->retry && !req->timed_out && admin_denied(a, c, m, admin_route))
            return;
        switch (admin_route) {
        case R_METRICS: handle_metrics(a, c); return;
        case R_CACHE: handle_cache(a, c); return;
        case R_DB: handle_db(a, c, req); return;
        default: handle_sf_state(a, c); return;
        }
    }
    if (path_is(m, "/health")) {
        struct sbuf b = { 0 };
        int status = api_health(a, &b);
        reply_sbuf(c, R_HEALTH, status, "application/json", &b);
        return;
    }
    if (admin) {
        reply_error(c, R_OTHER, 404, "not_found", NULL,
                    "the admin listener serves /health /metrics /cache /db /snowflake/state");
        return;
    }
    if (path_prefix(m, "/segment/", &rest, &rlen) ||
        path_prefix(m, "/api/segment/get/", &rest, &rlen)) {
        enum route r = m->path[1] == 'a' ? R_SEGMENT_LEAF : R_SEGMENT;
        if (!req->retry && !req->timed_out && a->auth != NULL &&
            segment_scope(rest, rlen, scope) == 0 && id_denied(a, c, m, r, scope))
            return;
        handle_segment(a, c, req, r, rest, rlen);
    } else if (path_is(m, "/segment")) {
        handle_segment(a, c, req, R_SEGMENT, "", 0);
    } else if (path_is(m, "/snowflake") ||
               path_prefix(m, "/api/snowflake/get/", &rest, &rlen)) {
        enum route r = path_is(m, "/snowflake") ? R_SNOWFLAKE : R_SNOWFLAKE_LEAF;
        if (!req->retry && !req->timed_out && id_denied(a, c, m, r, "@snowflake"))
            return;
        if (r == R_SNOWFLAKE_LEAF && !req->retry && !req->timed_out)
            count_leaf_key(rest, rlen);
        handle_snowflake(a, c, req, r);
    } else if (path_prefix(m, "/snowflake/decode/", &rest, &rlen)) {
        char id[32];

        handle_decode(a, c, R_DECODE, id,
                      util_pct_decode(rest, rlen, id, sizeof id - 1));
    } else if (path_is(m, "/decodeSnowflakeId")) {
        char v[32];
        size_t vlen = 0;
        enum util_query_result qr = UTIL_QUERY_ABSENT;

        if (m->query != NULL)
            qr = util_query_param(m->query, m->query_len, "snowflakeId", v,
                                  sizeof v - 1, &vlen);
        if (qr == UTIL_QUERY_REPEATED) {
            reply_error(c, R_DECODE_LEAF, 400, "repeated_parameter", NULL,
                        "snowflakeId is given more than once");
            return;
        }
        handle_decode(a, c, R_DECODE_LEAF, v,
                      qr == UTIL_QUERY_BAD ? -1 : (long)vlen);
    } else {
        reply_error(c, R_OTHER, 404, "not_found", NULL,
                    "no such path; try /segment/<biz_tag>, /snowflake, /health or /metrics");
    }
}

void
api_handle(struct http_conn *c, struct http_request *req, void *arg)
{
    dispatch(arg, c, req, 0);
}

void
api_handle_admin(struct http_conn *c, struct http_request *req, void *arg)
{
    dispatch(arg, c, req, 1);
}
