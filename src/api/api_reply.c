/* api_reply.c: how the API answers and counts: JSON errors (RESP errors
 * on a RESP connection), IDs as text, JSON or RESP from the I/O thread's
 * own buffer, the ?count= and ?format= of an ID request, and the per-thread
 * counters /metrics reads (see api_internal.h). No allocation, lock or
 * syscall on the ID paths.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"
#include "config.h"
#include "http.h"
#include "util.h"

_Thread_local struct api_thread *api_self;      /* set by api_thread */

void
api_thread(int index, int starting, void *arg)
{
    struct api *a = arg;

    api_self = starting ? &a->threads[index] : NULL;
}

void
api_thread_admin(int index, int starting, void *arg)
{
    struct api *a = arg;

    (void)index;
    api_self = starting ? &a->threads[a->nthreads] : NULL;
}


void
api_count(enum route r, int status)
{
    size_t i = 0;

    if (api_self == NULL)
        return;
    while (i < NSTATUS && status_codes[i] != status)
        i++;
    api_stat_inc(&api_self->requests[r][i]);
}

/* ---- replies ---- */

#define NO_STORE "Cache-Control: no-store\r\n"

void
api_reply(struct http_conn *c, enum route r, int status, const char *ctype,
          const char *extra, const char *body, size_t len)
{
    char both[256];

    api_count(r, status);
    /* A cache in front of an ID route would hand one ID out twice. */
    if (api_routes[r].flags & RT_IDS) {
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
    const struct http_request *req = http_conn_request(c);
    char msg[512], body[1024];
    char *q;
    va_list ap;
    int n;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (status == 503 && api_self != NULL) {
        size_t i = 0;

        while (i < NCODES_503 - 1 && strcmp(codes_503[i], code) != 0)
            i++;
        api_stat_inc(&api_self->unavailable[r][i]);
    }
    /* The request's protocol, as its front end set it, picks the writer. */
    if (req->mc != NULL) {
        api_mc_reply_error(c, req, r, status, code, msg);
        return;
    }
    if (req->proto == HTTP_REQ_GRPC) {
        api_grpc_reply_error(c, req, r, status, code, msg);
        return;
    }
    if (req->proto == HTTP_REQ_RESP) {
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
    api_count(r, status);
    if (!api_resp_capture(c, out, n))
        http_reply_resp(c, out, n, 0);
}

void
api_reply_resp(struct http_conn *c, enum route r, const char *data, size_t len,
               int close_after)
{
    api_count(r, 200);
    if (!api_resp_capture(c, data, len))
        http_reply_resp(c, data, len, close_after);
}

/* "$<len>\r\n" at p; returns the end. */
char *
api_resp_bulk_head(char *p, size_t len)
{
    *p++ = '$';
    p = util_u64_dec(p, len);
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

char *
api_resp_array_head(char *p, size_t n)
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
        p = api_resp_bulk_head(p, (size_t)(e - d));
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
void
api_reply_ranges(struct http_conn *c, enum route r, enum api_fmt fmt, const char *tag,
          const struct segment_range *ranges, int nranges)
{
    char *p = api_self->out, *start = api_self->out;
    int json = fmt == FMT_JSON;

    if (fmt == FMT_MC) {
        assert(nranges == 1 && ranges[0].count == 1);
        p = util_u64_dec(p, (uint64_t)ranges[0].start);
        api_mc_reply_value(c, r, start, (size_t)(p - start),
                           (uint64_t)ranges[0].start);
        return;
    }
    if (fmt == FMT_GRPC) {
        api_grpc_reply_ranges(c, r, ranges, nranges);
        return;
    }
    if (fmt == FMT_RESP || fmt == FMT_RESP_INT) {
        int64_t total = 0;

        for (int i = 0; i < nranges; i++)
            total += ranges[i].count;
        assert(fmt == FMT_RESP || total == 1);
        if (fmt == FMT_RESP)
            p = api_resp_array_head(p, (size_t)total);
        for (int i = 0; i < nranges; i++)
            for (int64_t k = 0; k < ranges[i].count; k++)
                p = resp_id(p, (uint64_t)(ranges[i].start + k), fmt);
        assert((size_t)(p - start) <= api_self->out_cap);
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

/* The biz_tag of a request (see api_internal.h). */
long
api_tag_arg(struct http_conn *c, enum route r, const char *s, size_t len,
            enum api_tag_form form, char out[TAG_MAX + 1])
{
    long n = -1;

    if (form == API_TAG_PATH) {
        n = util_pct_decode(s, len, out, TAG_MAX);
    } else if (len <= TAG_MAX) {
        memcpy(out, s, len);
        n = (long)len;
    }
    if (n >= 0 && util_tag_valid(out, (size_t)n)) {
        out[n] = '\0';
        return n;
    }
    if (c == NULL)
        return -1;
    switch (form) {
    case API_TAG_PATH:
        api_reply_error(c, r, 400, "invalid_biz_tag", NULL,
                        "biz_tag must be 1 to %d characters of [A-Za-z0-9._:-] after "
                        "percent-decoding", TAG_MAX);
        break;
    case API_TAG_ARG:
        api_reply_error(c, r, 400, "invalid_biz_tag", NULL,
                        "biz_tag must be 1 to %d characters of [A-Za-z0-9._:-]",
                        TAG_MAX);
        break;
    case API_TAG_KEY:
        api_reply_error(c, r, 400, "invalid_biz_tag", NULL,
                        "a key is a biz_tag (1 to %d characters of "
                        "[A-Za-z0-9._:-]), @snowflake, @uuid or @ulid", TAG_MAX);
        break;
    }
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


int64_t
api_wait_deadline(const struct api *a, const struct http_request *req)
{
    int64_t d = req->start_us + a->cfg->wait_ms * 1000;

    if (req->proto == HTTP_REQ_GRPC && req->grpc_timeout_us > 0 &&
        req->start_us + req->grpc_timeout_us < d)
        d = req->start_us + req->grpc_timeout_us;
    return d;
}

/* The ?count= and format of an ID request, and its deadline on the first
 * call. Returns 0, or -1 after answering 400. */
int
api_id_request_start(struct api *a, struct http_conn *c, struct http_request *req,
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



void
api_reply_u64s(struct http_conn *c, enum route r, enum api_fmt fmt,
           const uint64_t *ids, size_t n)
{
    char *p = api_self->out, *start = api_self->out;
    int json = fmt == FMT_JSON;

    if (fmt == FMT_MC) {
        assert(n == 1);
        p = util_u64_dec(p, ids[0]);
        api_mc_reply_value(c, r, start, (size_t)(p - start), ids[0]);
        return;
    }
    if (fmt == FMT_GRPC) {
        api_grpc_reply_u64s(c, r, ids, n);
        return;
    }
    if (fmt == FMT_RESP || fmt == FMT_RESP_INT) {
        assert(fmt == FMT_RESP || n == 1);
        if (fmt == FMT_RESP)
            p = api_resp_array_head(p, n);
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
