/* api_grpc.c: leafd's gRPC service, leafd.v1.IdService and
 * grpc.health.v1.Health (proto/; docs/grpc.md).
 *
 * DESIGN
 *
 * The transport (src/http/, nghttp2) hands every stream of the gRPC
 * listener to the api's handler as one request: req->proto HTTP_REQ_GRPC,
 * the method in req->msg.path, the message unframed in req->body, the
 * grpc-timeout in req->grpc_timeout_us. This file unpacks the message and
 * checks it (api_grpc_msg.c), then calls the same code the HTTP routes and
 * the Redis commands call (api_serve_segment, _snowflake, _id128, _serial,
 * _lease) with the FMT_GRPC format, so the IDs, the waits, the parking and
 * the counters are theirs; a parked call is handed back unchanged and is
 * unpacked again (a few dozen bytes, no allocation). Their answers come
 * back here: IDs packed into a reply message, or a refusal, which
 * api_reply_error routes here for a request of this listener (req->proto),
 * as a gRPC status whose message starts with leafd's error code
 * ("ids_exhausted: ...").
 *
 * Tokens: the authorization metadata is the Authorization header, checked
 * with the HTTP routes' scopes (the biz_tag, @snowflake, @serial:<code>).
 * grpc-timeout shortens a call's wait (api_wait_deadline), never lengthens
 * it; a 503 once it has run out is DEADLINE_EXCEEDED.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_grpc_msg.h"
#include "api_internal.h"
#include "config.h"
#include "http.h"
#include "serial.h"
#include "sfcodec.h"
#include "snowflake.h"
#include "util.h"

/* An I/O thread's reply buffers (api_self->grpc), grown to the largest
 * answer it has given and kept until api_free. */
struct grpc_bufs {
    uint8_t  *out;
    size_t    out_cap;
    int64_t  *ids;
    size_t    ids_cap;
    char    **strs;
    size_t    strs_cap;
};

void
api_grpc_thread_free(void *p)
{
    struct grpc_bufs *b = p;

    if (b == NULL)
        return;
    free(b->out);
    free(b->ids);
    free(b->strs);
    free(b);
}

/* The calling thread's buffers, each at least the size asked (0: as is). */
static struct grpc_bufs *
bufs(size_t out, size_t ids, size_t strs)
{
    struct grpc_bufs *b;

    assert(api_self != NULL);
    if (api_self->grpc == NULL)
        api_self->grpc = xcalloc(1, sizeof *b);
    b = api_self->grpc;
    if (out > b->out_cap) {
        b->out = xrealloc(b->out, out);
        b->out_cap = out;
    }
    if (ids > b->ids_cap) {
        b->ids = xrealloc(b->ids, ids * sizeof *b->ids);
        b->ids_cap = ids;
    }
    if (strs > b->strs_cap) {
        b->strs = xrealloc(b->strs, strs * sizeof *b->strs);
        b->strs_cap = strs;
    }
    return b;
}

/* ---- answers ---- */

static void
reply_msg(struct http_conn *c, enum route r, const uint8_t *msg, size_t len)
{
    api_count(r, 200);
    http_reply_grpc(c, GRPC_OK, NULL, msg, len);
}

void
api_grpc_reply_error(struct http_conn *c, const struct http_request *req,
                     enum route r, int status, const char *code, const char *msg)
{
    char text[640];
    int passed;

    assert(req->proto == HTTP_REQ_GRPC);
    /* The park that ended the wait fires at the deadline, or up to one
     * tick of the coarse monotonic clock libevent's timers run on (4 ms)
     * before it: a 503 within that of the call's deadline is its end. */
    passed = req->grpc_timeout_us > 0 &&
             util_mono_us() + 5000 >= req->start_us + req->grpc_timeout_us;
    snprintf(text, sizeof text, "%s: %s", code, msg);
    api_count(r, status);
    http_reply_grpc(c, api_grpc_status_of(status, code, passed), text, NULL, 0);
}

void
api_grpc_reply_ranges(struct http_conn *c, enum route r,
                      const struct segment_range *ranges, int nranges)
{
    size_t total = 0, k = 0;
    struct grpc_bufs *b;

    for (int i = 0; i < nranges; i++)
        total += (size_t)ranges[i].count;
    b = bufs(api_grpc_ids_bound(total), total, 0);
    for (int i = 0; i < nranges; i++)
        for (int64_t j = 0; j < ranges[i].count; j++)
            b->ids[k++] = ranges[i].start + j;
    reply_msg(c, r, b->out, api_grpc_pack_ids(b->ids, total, b->out, b->out_cap));
}

void
api_grpc_reply_u64s(struct http_conn *c, enum route r, const uint64_t *ids, size_t n)
{
    struct grpc_bufs *b = bufs(api_grpc_ids_bound(n), n, 0);

    for (size_t i = 0; i < n; i++) {
        assert(ids[i] <= (uint64_t)INT64_MAX);      /* bit 63 is never set */
        b->ids[i] = (int64_t)ids[i];
    }
    reply_msg(c, r, b->out, api_grpc_pack_ids(b->ids, n, b->out, b->out_cap));
}

void
api_grpc_reply_lines(struct http_conn *c, enum route r, char *text, size_t len)
{
    size_t n = 0, i;
    struct grpc_bufs *b;

    for (i = 0; i < len; i++)
        n += text[i] == '\n';
    b = bufs(api_grpc_strings_bound(n, len), 0, n);
    n = 0;
    for (i = 0; i < len; i++) {
        char *start = text + i;
        char *nl = memchr(start, '\n', len - i);

        assert(nl != NULL);                 /* every line ends in '\n' */
        *nl = '\0';
        b->strs[n++] = start;
        i = (size_t)(nl - text);
    }
    reply_msg(c, r, b->out, api_grpc_pack_strings(b->strs, n, b->out, b->out_cap));
}

void
api_grpc_reply_lease(struct http_conn *c, const char *tag,
                     const struct segment_range *ranges, int nranges)
{
    int64_t starts[API_GRPC_LEASE_MAX], ends[API_GRPC_LEASE_MAX];
    size_t n = (size_t)nranges;
    struct grpc_bufs *b = bufs(api_grpc_lease_bound(n), 0, 0);

    assert(n <= API_GRPC_LEASE_MAX);
    for (size_t i = 0; i < n; i++) {
        starts[i] = ranges[i].start;
        ends[i] = ranges[i].start + ranges[i].count;
    }
    reply_msg(c, R_LEASE, b->out,
              api_grpc_pack_lease(tag, starts, ends, n, b->out, b->out_cap));
}

/* ---- methods ---- */

static const enum route method_route[AGM_UNKNOWN] = {
    [AGM_SEGMENT] = R_SEGMENT, [AGM_SNOWFLAKE] = R_SNOWFLAKE, [AGM_UUID] = R_UUID,
    [AGM_ULID] = R_ULID, [AGM_SERIAL] = R_SERIAL, [AGM_LEASE] = R_LEASE,
    [AGM_DECODE] = R_DECODE, [AGM_HEALTH_CHECK] = R_HEALTH,
    [AGM_HEALTH_WATCH] = R_HEALTH,
};

static void
serve_serial(struct api *a, struct http_conn *c, struct http_request *req,
             const struct api_grpc_args *g)
{
    char scope[8 + sizeof g->name];      /* the code is checked: <= 32 */
    long i = a->serials != NULL ? serials_find(a->serials, g->name, g->name_len) : -1;

    if (i < 0) {
        api_reply_error(c, R_SERIAL, 404, "unknown_serial_code", NULL,
                        "no serial definition for code '%s' (serial.%s.* in the "
                        "config file)", g->name, g->name);
        return;
    }
    snprintf(scope, sizeof scope, "@serial:%s", g->name);
    if (api_id_denied(a, c, req, R_SERIAL, scope))
        return;
    api_serve_serial(a, c, req, (size_t)i, g->n, FMT_GRPC);
}

static void
serve_decode(struct api *a, struct http_conn *c, const struct api_grpc_args *g)
{
    struct sfcodec_decoded d;
    uint8_t out[API_GRPC_DECODE_MAX];

    if (api_sf_disabled(a, c, R_DECODE))
        return;
    if (sfcodec_decode_id(snowflake_layout(a->sf), (uint64_t)g->id, &d) == -1) {
        api_reply_error(c, R_DECODE, 400, "invalid_id", NULL,
                        "not a snowflake ID: bit 63 is set");
        return;
    }
    reply_msg(c, R_DECODE, out, api_grpc_pack_decode(&d, out, sizeof out));
}

/* Check: SERVING while /health answers 200 (ok, or degraded but serving). */
static void
serve_health(struct api *a, struct http_conn *c, const struct api_grpc_args *g)
{
    struct sbuf b = { 0 };
    uint8_t out[API_GRPC_HEALTH_MAX];
    int serving;

    if (!g->known_service) {
        api_reply_error(c, R_HEALTH, 404, "unknown_service", NULL,
                        "leafd serves the health of \"\" and leafd.v1.IdService only");
        return;
    }
    serving = api_health(a, &b) == 200;
    sbuf_free(&b);
    reply_msg(c, R_HEALTH, out, api_grpc_pack_health(serving, out, sizeof out));
}

static void
serve(struct api *a, struct http_conn *c, struct http_request *req,
      const struct api_grpc_args *g)
{
    enum route r = method_route[g->method];

    switch (g->method) {
    case AGM_SEGMENT:
        if (api_segment_disabled(a, c, r) || api_id_denied(a, c, req, r, g->name))
            return;
        api_serve_segment(a, c, req, r, g->name, g->name_len, g->n, FMT_GRPC);
        return;
    case AGM_SNOWFLAKE:
        if (api_sf_disabled(a, c, r) || api_id_denied(a, c, req, r, "@snowflake"))
            return;
        api_serve_snowflake(a, c, req, r, g->n, FMT_GRPC);
        return;
    case AGM_UUID:
    case AGM_ULID:
        api_serve_id128(a, c, r, g->n, FMT_GRPC);
        return;
    case AGM_SERIAL:
        serve_serial(a, c, req, g);
        return;
    case AGM_LEASE:
        if (api_segment_disabled(a, c, r) || api_id_denied(a, c, req, r, g->name))
            return;
        api_serve_lease(a, c, req, g->name, g->n, FMT_GRPC);
        return;
    case AGM_DECODE:
        serve_decode(a, c, g);
        return;
    case AGM_HEALTH_CHECK:
        serve_health(a, c, g);
        return;
    case AGM_HEALTH_WATCH:
        /* A stream of answers: the transport sends one message per call. */
        api_reply_error(c, r, 405, "unimplemented", NULL,
                        "Health/Watch is not served; poll Health/Check");
        return;
    case AGM_UNKNOWN:
        break;
    }
    assert(0 && "no such method");
}

void
api_grpc_request(struct api *a, struct http_conn *c, struct http_request *req)
{
    const struct http_msg *m = &req->msg;
    const struct config *cfg = a->cfg;
    const struct api_grpc_limits lim = {
        cfg->count_max, cfg->sf_count_max, cfg->uuid_count_max,
        cfg->ulid_count_max, cfg->serial_count_max, cfg->lease_max
    };
    enum api_grpc_method meth = api_grpc_method_find(m->path, m->path_len);
    struct api_grpc_args g;
    const char *code = NULL;
    char why[256];

    assert(req->proto == HTTP_REQ_GRPC);
    if (meth == AGM_UNKNOWN) {
        api_reply_error(c, R_OTHER, 405, "unknown_method", NULL,
                        "no method %.*s; leafd serves leafd.v1.IdService and "
                        "grpc.health.v1.Health", (int)(m->path_len > 200 ? 200 :
                                                        m->path_len), m->path);
    } else if (api_grpc_args_parse(meth, req->body, req->body_len, &lim, &g, &code,
                                   why, sizeof why) != 0) {
        api_reply_error(c, method_route[meth], 400, code, NULL, "%s", why);
    } else {
        serve(a, c, req, &g);
    }
}
