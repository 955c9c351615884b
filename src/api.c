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
#include "api_internal.h"
#include "auth.h"
#include "config.h"
#include "console.h"
#include "loader.h"
#include "log.h"
#include "segment.h"
#include "snowflake.h"
#include "ulid.h"
#include "uuid7.h"
#include "util.h"

static _Thread_local struct api_thread *self;   /* set by api_thread */

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
           r == R_SNOWFLAKE_LEAF || r == R_UUID || r == R_ULID || r == R_SERIAL ||
           r == R_LEASE || r == R_TINYID;
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
    size_t max128 = (size_t)(cfg->uuid_count_max > cfg->ulid_count_max ?
                             cfg->uuid_count_max : cfg->ulid_count_max);

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
        /* An ID is at most 19 digits; JSON adds 3 bytes and the tag, RESP
         * 7 ("$19\r\n" and "\r\n"). A UUID is 36 characters, 39 in JSON
         * with its quotes and comma, 43 in RESP. */
        a->threads[i].out_cap = (maxn * 28 > max128 * 44 ? maxn * 28 : max128 * 44) +
                                TAG_MAX * 2 + 256;
        a->threads[i].out = xmalloc(a->threads[i].out_cap);
        a->threads[i].ids = xcalloc((size_t)cfg->sf_count_max, sizeof(uint64_t));
        a->threads[i].id128 = xcalloc(max128, 16);
    }
    a->uuid = uuid7_gen_new(NULL, NULL);
    a->ulid = ulid_gen_new(NULL, NULL);
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
        free(a->threads[i].id128);
    }
    free(a->threads);
    uuid7_gen_free(a->uuid);
    ulid_gen_free(a->ulid);
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
api_set_serials(struct api *a, struct serials *s, struct serial_loader *l)
{
    a->serials = s;
    a->serial_loader = l;
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

void
api_reply(struct http_conn *c, enum route r, int status, const char *ctype,
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

void
api_reply_error(struct http_conn *c, enum route r, int status, const char *code,
                const char *extra, const char *fmt, ...)
{
    char msg[512], body[1024];
    char *q;
    va_list ap;
    int n;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (status == 503 && self != NULL) {
        size_t i = 0;

        while (i < NCODES_503 - 1 && strcmp(codes_503[i], code) != 0)
            i++;
        stat_inc(&self->unavailable[r][i]);
    }
    if (http_conn_session(c) != NULL) {
        api_reply_resp_error(c, r, status, code, msg);
        return;
    }
    q = util_json_str(msg);
    n = snprintf(body, sizeof body, "{\"error\":\"%s\",\"message\":%s}\n", code, q);
    free(q);
    if (n < 0 || (size_t)n >= sizeof body)
        n = snprintf(body, sizeof body, "{\"error\":\"%s\"}\n", code);
    api_reply(c, r, status, "application/json", extra, body, (size_t)n);
}

/* RESP: "-<CODE> <message>", the code in capitals so that a client can tell
 * a retryable error (IDS_EXHAUSTED) from a bad request by the first word;
 * CR and LF in the message become spaces. */
void
api_reply_resp_error(struct http_conn *c, enum route r, int status,
                     const char *code, const char *msg)
{
    char out[640];
    size_t n = 0;

    out[n++] = '-';
    for (const char *p = code; *p != '\0' && n < 64; p++)
        out[n++] = (char)(*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p);
    out[n++] = ' ';
    for (const char *p = msg; *p != '\0' && n < sizeof out - 2; p++)
        out[n++] = *p == '\r' || *p == '\n' ? ' ' : *p;
    out[n++] = '\r';
    out[n++] = '\n';
    count(r, status);
    http_reply_resp(c, out, n, 0);
}

void
api_reply_resp(struct http_conn *c, enum route r, const char *data, size_t len,
               int close_after)
{
    count(r, 200);
    http_reply_resp(c, data, len, close_after);
}

/* "$<len>\r\n" at p; returns the end. */
static char *
resp_bulk_head(char *p, size_t len)
{
    *p++ = '$';
    p = util_u64_dec(p, len);
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

static char *
resp_array_head(char *p, size_t n)
{
    *p++ = '*';
    p = util_u64_dec(p, n);
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

/* One ID as a RESP bulk string (or an integer for INCR). */
static char *
resp_id(char *p, uint64_t id, enum api_fmt fmt)
{
    char d[24], *e = util_u64_dec(d, id);

    if (fmt == FMT_RESP_INT) {
        *p++ = ':';
    } else {
        p = resp_bulk_head(p, (size_t)(e - d));
    }
    memcpy(p, d, (size_t)(e - d));
    p += e - d;
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

void
api_reply_sbuf(struct http_conn *c, enum route r, int status, const char *ctype,
               struct sbuf *b)
{
    api_reply(c, r, status, ctype, NULL, b->p ? b->p : "", b->len);
    sbuf_free(b);
}

/* Write the IDs of ranges as text (one per line) or JSON into the thread's
 * buffer and reply. */
static void
reply_ids(struct http_conn *c, enum route r, enum api_fmt fmt, const char *tag,
          const struct segment_range *ranges, int nranges)
{
    char *p = self->out, *start = self->out;
    int json = fmt == FMT_JSON;

    if (fmt == FMT_RESP || fmt == FMT_RESP_INT) {
        int64_t total = 0;

        for (int i = 0; i < nranges; i++)
            total += ranges[i].count;
        assert(fmt == FMT_RESP || total == 1);
        if (fmt == FMT_RESP)
            p = resp_array_head(p, (size_t)total);
        for (int i = 0; i < nranges; i++)
            for (int64_t k = 0; k < ranges[i].count; k++)
                p = resp_id(p, (uint64_t)(ranges[i].start + k), fmt);
        assert((size_t)(p - start) <= self->out_cap);
        api_reply_resp(c, r, start, (size_t)(p - start), 0);
        return;
    }

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
    api_reply(c, r, 200, json ? "application/json" : "text/plain", NULL, start,
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
        api_reply_error(c, r, 400, "repeated_parameter", NULL,
                        "count is given more than once");
        return -1;
    case UTIL_QUERY_FOUND:
        if (util_parse_i64(v, vlen, 0, &n) == 0 && n >= 1 && n <= max)
            return n;
        break;
    case UTIL_QUERY_BAD:
        break;
    }
    api_reply_error(c, r, 400, "invalid_count", NULL,
                    "count must be an integer from 1 to %lld", (long long)max);
    return -1;
}

/* JSON if Accept asks for it or ?format=json; ?format=text wins over Accept.
 * Returns 1 json, 0 text, or -1 after answering 400. */
int
api_want_json(struct http_conn *c, enum route r, const struct http_msg *m)
{
    char v[8];
    size_t vlen = 0;

    if (m->query == NULL)
        return m->accept_json;
    switch (util_query_param(m->query, m->query_len, "format", v, sizeof v, &vlen)) {
    case UTIL_QUERY_ABSENT:
        return m->accept_json;
    case UTIL_QUERY_REPEATED:
        api_reply_error(c, r, 400, "repeated_parameter", NULL,
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
    api_reply_error(c, r, 400, "invalid_format", NULL, "format must be json or text");
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
    (void)a;
    if (req->msg.method == HTTP_HEAD) {
        api_reply_error(c, r, 405, "method_not_allowed", "Allow: GET\r\n",
                        "HEAD would take IDs and drop them: use GET (probe with "
                        "GET /health)");
        return -1;
    }
    *n = query_count(c, r, &req->msg, max);
    if (*n < 0)
        return -1;
    *json = api_want_json(c, r, &req->msg);
    if (*json < 0)
        return -1;
    return 0;
}

int
api_id_request_start(struct api *a, struct http_conn *c, struct http_request *req,
                     enum route r, int64_t max, int64_t *n, int *json)
{
    return id_request_start(a, c, req, r, max, n, json);
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
        api_reply_error(c, r, 503, "tag_lookup_unavailable", "Retry-After: 1\r\n",
                        "cannot tell whether biz_tag '%s' exists: %s%s%s; retry later",
                        tag, ls->db_up ? "the database did not answer in time"
                                   : "the database is unreachable (",
                        ls->db_up ? "" : ls->last_error, ls->db_up ? "" : ")");
    else
        api_reply_error(c, r, 503, "ids_exhausted", "Retry-After: 1\r\n",
                        "no ID for biz_tag '%s': both buffers are empty and %s%s%s; "
                        "retry later", tag,
                        ls->db_up ? "the next segment did not arrive in time"
                              : "the database is unreachable (",
                        ls->db_up ? "" : ls->last_error, ls->db_up ? "" : ")");
}

int
api_segment_disabled(struct api *a, struct http_conn *c, enum route r)
{
    if (a->segs != NULL)
        return 0;
    api_reply_error(c, r, 404, "mode_disabled", NULL,
                    "segment mode is off on this node (leaf.segment.enable = false)");
    return 1;
}

static void
handle_segment(struct api *a, struct http_conn *c, struct http_request *req,
               enum route r, const char *raw, size_t rawlen)
{
    char tag[TAG_MAX + 1];
    long len;
    int64_t n;
    int json;

    if (api_segment_disabled(a, c, r))
        return;
    len = util_pct_decode(raw, rawlen, tag, TAG_MAX);
    if (len < 0 || !util_tag_valid(tag, (size_t)len)) {
        api_reply_error(c, r, 400, "invalid_biz_tag", NULL,
                        "biz_tag must be 1 to %d characters of [A-Za-z0-9._:-] after "
                        "percent-decoding", TAG_MAX);
        return;
    }
    tag[len] = '\0';
    if (id_request_start(a, c, req, r, a->cfg->count_max, &n, &json) == -1)
        return;
    api_serve_segment(a, c, req, r, tag, (size_t)len, n,
                      json ? FMT_JSON : FMT_TEXT);
}

/* n IDs of tag (valid, NUL-terminated) for a request of either protocol:
 * answer, or park until the loader has a segment or the wait runs out. */
void
api_serve_segment(struct api *a, struct http_conn *c, struct http_request *req,
                  enum route r, const char *tag, size_t len, int64_t n,
                  enum api_fmt fmt)
{
    struct api_state *st = (struct api_state *)req->scratch;
    enum segment_result res;

    assert(a->segs != NULL && util_tag_valid(tag, len) && n >= 1);
    if (!req->retry && !req->timed_out)
        st->deadline_us = req->start_us + a->cfg->wait_ms * 1000;
    if (req->timed_out) {
        reply_no_ids(a, c, r, st, tag, NULL);
        return;
    }

    res = segment_take(a->segs, tag, len, n, &st->take);
    switch (res) {
    case SEGMENT_OK:
        if (r == R_SEGMENT_LEAF && fmt == FMT_TEXT && n == 1) {
            /* Leaf's path answers the bare number, as Leaf does. */
            char buf[24], *e = util_u64_dec(buf, (uint64_t)st->take.ranges[0].start);
            api_reply(c, r, 200, "text/plain", NULL, buf, (size_t)(e - buf));
            return;
        }
        reply_ids(c, r, fmt, tag, st->take.ranges, st->take.nranges);
        return;
    case SEGMENT_UNKNOWN:
        api_reply_error(c, r, 404, "unknown_biz_tag", NULL,
                        "biz_tag '%s' is not in leaf_alloc; insert a row for it first",
                        tag);
        return;
    case SEGMENT_BUSY:
        api_reply_error(c, r, 503, "tag_lookup_unavailable", "Retry-After: 1\r\n",
                        "too many unknown biz_tags are being looked up right now; "
                        "biz_tag '%s' was not looked up; retry later", tag);
        return;
    case SEGMENT_BROKEN:
        api_reply_error(c, r, 503, "bad_leaf_alloc_row", "Retry-After: 60\r\n",
                        "the leaf_alloc row of biz_tag '%s' cannot give IDs (step "
                        "outside [1, 2147483647], or max_id at its limit); a DBA "
                        "must fix the row (the log says what is wrong)", tag);
        return;
    case SEGMENT_TOO_LARGE:
        if (st->take.nranges == 0) {
            api_reply_error(c, r, 400, "batch_too_large", NULL,
                            "count %lld may need more than %d segments of biz_tag "
                            "'%s'; with its step, at most %lld IDs per request",
                            (long long)n, SEGMENT_MAX_RANGES, tag,
                            (long long)st->take.limit);
            return;
        }
        api_reply_error(c, r, 503, "batch_fragmented", "Retry-After: 1\r\n",
                        "other requests split biz_tag '%s''s segments so finely "
                        "that %lld IDs would need more than %d ranges; retry, or "
                        "ask for fewer", tag, (long long)n, SEGMENT_MAX_RANGES);
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
        http_park(c, (int)left, api_segment_key(tag, len));
        return;
    }
    }
}

/* ---- snowflake mode ---- */

int
api_sf_disabled(struct api *a, struct http_conn *c, enum route r)
{
    if (a->sf != NULL)
        return 0;
    api_reply_error(c, r, 404, "mode_disabled", NULL,
                    "snowflake mode is off on this node (leaf.snowflake.enable = false)");
    return 1;
}

static void
reply_u64s(struct http_conn *c, enum route r, enum api_fmt fmt,
           const uint64_t *ids, size_t n)
{
    char *p = self->out, *start = self->out;
    int json = fmt == FMT_JSON;

    if (fmt == FMT_RESP || fmt == FMT_RESP_INT) {
        assert(fmt == FMT_RESP || n == 1);
        if (fmt == FMT_RESP)
            p = resp_array_head(p, n);
        for (size_t i = 0; i < n; i++)
            p = resp_id(p, ids[i], fmt);
        api_reply_resp(c, r, start, (size_t)(p - start), 0);
        return;
    }

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
    api_reply(c, r, 200, json ? "application/json" : "text/plain", NULL, start,
              (size_t)(p - start));
}

static void
handle_snowflake(struct api *a, struct http_conn *c, struct http_request *req,
                 enum route r)
{
    int64_t n;
    int json;

    if (api_sf_disabled(a, c, r))
        return;
    if (id_request_start(a, c, req, r, a->cfg->sf_count_max, &n, &json) == -1)
        return;
    api_serve_snowflake(a, c, req, r, n, json ? FMT_JSON : FMT_TEXT);
}

/* n snowflake IDs for a request of either protocol: answer, or park while
 * the generator waits out a millisecond. */
void
api_serve_snowflake(struct api *a, struct http_conn *c, struct http_request *req,
                    enum route r, int64_t n, enum api_fmt fmt)
{
    struct api_state *st = (struct api_state *)req->scratch;
    struct snowflake_refusal why;
    int64_t now;
    int rc;

    assert(a->sf != NULL && n >= 1);
    if (!req->retry && !req->timed_out)
        st->deadline_us = req->start_us + a->cfg->wait_ms * 1000;
    rc = snowflake_next(a->sf, (uint32_t)n, self->ids, &why);
    if (rc == SNOWFLAKE_OK) {
        if (r == R_SNOWFLAKE_LEAF && fmt == FMT_TEXT && n == 1) {
            char buf[24], *e = util_u64_dec(buf, self->ids[0]);
            api_reply(c, r, 200, "text/plain", NULL, buf, (size_t)(e - buf));
            return;
        }
        reply_u64s(c, r, fmt, self->ids, (size_t)n);
        return;
    }
    now = util_mono_us();
    if (rc == SNOWFLAKE_WAIT && now + why.wait_ms * 1000 <= st->deadline_us) {
        http_park(c, (int)why.wait_ms, API_SNOWFLAKE_KEY);
        return;
    }
    {
        char extra[64];
        snprintf(extra, sizeof extra, "Retry-After: %d\r\n",
                 why.retry_after_s > 0 ? why.retry_after_s : 1);
        api_reply_error(c, r, 503, why.code, extra, "%s", why.message);
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

    if (api_sf_disabled(a, c, r))
        return;
    if (len < 0) {
        api_reply_error(c, r, 400, "invalid_id", NULL,
                        "not a snowflake ID: expected a decimal number of at most 19 digits");
        return;
    }
    if (snowflake_decode_json(a->sf, id, (size_t)len, r == R_DECODE_LEAF, &b, &cause) == -1) {
        api_reply_error(c, r, 400, "invalid_id", NULL, "%s", cause ? cause : "not an ID");
        free(cause);
        sbuf_free(&b);
        return;
    }
    sbuf_puts(&b, "\n");
    api_reply_sbuf(c, r, 200, "application/json", &b);
}

/* ---- UUIDv7 and ULID ---- */

/* GET /uuid and /ulid: n of them from the node's one generator of each kind
 * (uuid7.c, ulid.c: monotonic on this node; unique across nodes by their
 * random bits). */
static void
handle_id128(struct api *a, struct http_conn *c, struct http_request *req,
             enum route r)
{
    int64_t n;
    int json;

    if (id_request_start(a, c, req, r, r == R_UUID ? a->cfg->uuid_count_max :
                         a->cfg->ulid_count_max, &n, &json) == -1)
        return;
    api_serve_id128(a, c, r, n, json ? FMT_JSON : FMT_TEXT);
}

void
api_serve_id128(struct api *a, struct http_conn *c, enum route r, int64_t n,
                enum api_fmt fmt)
{
    int uuid = r == R_UUID, rc;
    int json = fmt == FMT_JSON, resp = fmt == FMT_RESP;
    char *p = self->out, *start = self->out;

    assert(n >= 1 && fmt != FMT_RESP_INT);
    rc = uuid ? uuid7_next(a->uuid, (size_t)n, self->id128)
              : ulid_next(a->ulid, (size_t)n, self->id128);
    if (rc < 0) {
        api_reply_error(c, r, 503, "random_unavailable", "Retry-After: 1\r\n",
                        "the kernel gave no random bytes (getrandom failed)");
        return;
    }
    {
        _Atomic uint64_t *k = uuid ? &self->uuids : &self->ulids;

        atomic_store_explicit(k, atomic_load_explicit(k, memory_order_relaxed) +
                              (uint64_t)n, memory_order_relaxed);
    }
    if (json) {
        memcpy(p, "{\"ids\":[", 8);
        p += 8;
    } else if (resp) {
        p = resp_array_head(p, (size_t)n);
    }
    for (int64_t i = 0; i < n; i++) {
        if (json)
            *p++ = '"';
        else if (resp)
            p = resp_bulk_head(p, uuid ? UUID7_TEXT_LEN : ULID_TEXT_LEN);
        if (uuid) {
            uuid7_format((const struct uuid7 *)self->id128 + i, p);
            p += UUID7_TEXT_LEN;
        } else {
            ulid_format((const struct ulid *)self->id128 + i, p);
            p += ULID_TEXT_LEN;
        }
        if (json) {
            *p++ = '"';
            *p++ = ',';
        } else if (resp) {
            *p++ = '\r';
            *p++ = '\n';
        } else {
            *p++ = '\n';
        }
    }
    if (json) {
        p--;                            /* the last comma */
        memcpy(p, "]}\n", 3);
        p += 3;
    }
    assert((size_t)(p - start) <= self->out_cap);
    if (resp) {
        api_reply_resp(c, r, start, (size_t)(p - start), 0);
        return;
    }
    api_reply(c, r, 200, json ? "application/json" : "text/plain", NULL, start,
              (size_t)(p - start));
}

/* GET /uuid/decode/<uuid> and /ulid/decode/<ulid>. */
static void
handle_id128_decode(struct http_conn *c, enum route r, const char *raw,
                    size_t rawlen)
{
    struct sbuf b = { 0 };
    char text[64], *cause = NULL;
    long len = util_pct_decode(raw, rawlen, text, sizeof text - 1);

    if (len < 0) {
        api_reply_error(c, r, 400, "invalid_id", NULL, "%s",
                        r == R_UUID_DECODE ? "not a UUID: expected 36 characters "
                        "(8-4-4-4-12 hex digits)" : "not a ULID: expected 26 "
                        "characters of Crockford base32");
        return;
    }
    if (r == R_UUID_DECODE) {
        struct uuid7 u;
        struct uuid7_decoded d;

        if (uuid7_parse(text, (size_t)len, &u, &cause) == 0) {
            uuid7_decode(&u, &d);
            uuid7_decoded_json(&u, &d, &b);
        }
    } else {
        struct ulid u;

        if (ulid_parse(text, (size_t)len, &u, &cause) == 0)
            ulid_decoded_json(&u, &b);
    }
    if (cause != NULL) {
        api_reply_error(c, r, 400, "invalid_id", NULL, "%s", cause);
        free(cause);
        sbuf_free(&b);
        return;
    }
    sbuf_puts(&b, "\n");
    api_reply_sbuf(c, r, 200, "application/json", &b);
}

static void
handle_sf_state(struct api *a, struct http_conn *c)
{
    struct sbuf b = { 0 };

    if (api_sf_disabled(a, c, R_SF_STATE))
        return;
    snowflake_state_json(a->sf, &b);
    sbuf_puts(&b, "\n");
    api_reply_sbuf(c, R_SF_STATE, 200, "application/json", &b);
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
        api_reply_error(c, r, 401, "unauthorized", "WWW-Authenticate: Bearer\r\n",
                        "this page needs Authorization: Bearer <admin.token>");
        return 1;
    }
    if (!auth_equal(tok, len, a->cfg->admin_token, strlen(a->cfg->admin_token))) {
        api_reply_error(c, r, 403, "forbidden", NULL, "wrong admin token");
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
        api_reply_error(c, r, 400, "repeated_parameter", NULL,
                        "token is given more than once");
        return 1;
    }
    rc = auth_check(a->auth, scope, tok, len);
    if (rc == 401)
        api_reply_error(c, r, 401, "token_required", "WWW-Authenticate: Bearer\r\n",
                        "this endpoint needs a token: Authorization: Bearer <token> or ?token=");
    else if (rc == 403)
        api_reply_error(c, r, 403, "token_forbidden", NULL,
                        "the token is not valid for %s", scope);
    return rc != 0;
}

int
api_id_denied(struct api *a, struct http_conn *c, const struct http_request *req,
              enum route r, const char *scope)
{
    if (req->retry || req->timed_out)
        return 0;
    return id_denied(a, c, &req->msg, r, scope);
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

    if (req->cmd != NULL) {
        assert(!admin);
        api_resp_command(a, c, req);
        return;
    }
    /* Tinyid's client POSTs (its parameters are in the query). */
    if (!admin && path_prefix(m, "/tinyid/id/", &rest, &rlen)) {
        api_tinyid_handle(a, c, req, rest, rlen);
        return;
    }
    if (m->method != HTTP_GET && m->method != HTTP_HEAD) {
        api_reply_error(c, R_OTHER, 405, "method_not_allowed", "Allow: GET, HEAD\r\n",
                        "only GET and HEAD are served");
        return;
    }
    if (m->query != NULL && !util_query_valid(m->query, m->query_len)) {
        api_reply_error(c, R_OTHER, 400, "bad_query", NULL,
                        "the query string has a malformed %%-escape or a %%00");
        return;
    }
    if ((admin || !a->admin_apart) && console_handle(c, m, a->cfg))
        return;
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
            api_reply_error(c, admin_route, 404, "not_found",
                            NULL, "admin pages are served on the admin listener");
            return;
        }
        if (!req->retry && !req->timed_out && admin_denied(a, c, m, admin_route))
            return;
        switch (admin_route) {
        case R_METRICS: api_page_metrics(a, c); return;
        case R_CACHE: api_page_cache(a, c); return;
        case R_DB: api_page_db(a, c, req); return;
        default: handle_sf_state(a, c); return;
        }
    }
    if (path_is(m, "/health")) {
        struct sbuf b = { 0 };
        int status = api_health(a, &b);
        api_reply_sbuf(c, R_HEALTH, status, "application/json", &b);
        return;
    }
    if (admin) {
        api_reply_error(c, R_OTHER, 404, "not_found", NULL,
                        "the admin listener serves /health /metrics /cache /db /snowflake/state");
        return;
    }
    if (path_prefix(m, "/segment/", &rest, &rlen) && rlen > 6 &&
        memcmp(rest + rlen - 6, "/lease", 6) == 0) {
        if (!req->retry && !req->timed_out && a->auth != NULL &&
            segment_scope(rest, rlen - 6, scope) == 0 &&
            id_denied(a, c, m, R_LEASE, scope))
            return;
        api_lease_handle(a, c, req, rest, rlen - 6);
    } else if (path_prefix(m, "/segment/", &rest, &rlen) ||
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
    } else if (path_is(m, "/uuid") || path_is(m, "/ulid")) {
        handle_id128(a, c, req, m->path[2] == 'u' ? R_UUID : R_ULID);
    } else if (path_prefix(m, "/serial/", &rest, &rlen)) {
        api_serial(a, c, req, rest, rlen);
    } else if (path_prefix(m, "/uuid/decode/", &rest, &rlen)) {
        handle_id128_decode(c, R_UUID_DECODE, rest, rlen);
    } else if (path_prefix(m, "/ulid/decode/", &rest, &rlen)) {
        handle_id128_decode(c, R_ULID_DECODE, rest, rlen);
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
            api_reply_error(c, R_DECODE_LEAF, 400, "repeated_parameter", NULL,
                            "snowflakeId is given more than once");
            return;
        }
        handle_decode(a, c, R_DECODE_LEAF, v,
                      qr == UTIL_QUERY_BAD ? -1 : (long)vlen);
    } else {
        api_reply_error(c, R_OTHER, 404, "not_found", NULL,
                        "no such path; try /segment/<biz_tag>, /snowflake, /uuid, /ulid, "
                        "/serial/<code>, /health "
                        "or /metrics");
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
