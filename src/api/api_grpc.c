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
 * _lease) with the gRPC writer (api_writer_grpc.c), so the IDs, the
 * waits, the parking and the counters are theirs; a parked call is handed
 * back unchanged and is unpacked again (a few dozen bytes, no allocation).
 * The writer packs their answers into reply messages, and writes a refusal
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
#include "api_handlers.h"
#include "config.h"
#include "decode.h"
#include "http.h"
#include "serial.h"
#include "sfcodec.h"
#include "snowflake.h"
#include "util.h"


static const enum route method_route[AGM_UNKNOWN] = {
    [AGM_SEGMENT] = R_SEGMENT, [AGM_SNOWFLAKE] = R_SNOWFLAKE, [AGM_UUID] = R_UUID,
    [AGM_ULID] = R_ULID, [AGM_SERIAL] = R_SERIAL, [AGM_LEASE] = R_LEASE,
    [AGM_DECODE] = R_DECODE, [AGM_DECODE_SEGMENT] = R_SEGMENT_DECODE,
    [AGM_HEALTH_CHECK] = R_HEALTH,
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
    api_serve_serial(a, c, req, (size_t)i, g->n, &api_writer_grpc);
}

static void
serve_decode(struct api *a, struct http_conn *c, const struct api_grpc_args *g)
{
    struct sfcodec_decoded d;
    uint8_t out[API_GRPC_DECODE_MAX];
    uint64_t id = (uint64_t)g->id;

    if (api_sf_disabled(a, c, R_DECODE))
        return;
    if (g->text_len > 0) {
        struct decode_idstr s;
        const char *code;
        char why[256];

        if (decode_id_string(a->cfg, DECODE_SNOWFLAKE, g->text, g->text_len,
                             IDSTR_DEC, &s, &code, why, sizeof why) != 0) {
            api_reply_error(c, R_DECODE, 400, code, NULL, "%s", why);
            return;
        }
        id = s.p.id;
    }
    if (sfcodec_decode_id(snowflake_layout(a->sf), id, &d) == -1) {
        api_reply_error(c, R_DECODE, 400, "invalid_id", NULL,
                        "not a snowflake ID of this layout (bit 63 set, or over "
                        "its bits)");
        return;
    }
    api_grpc_reply_msg(c, R_DECODE, out, api_grpc_pack_decode(&d, out, sizeof out));
}

/* DecodeSegment: a segment ID string's number, and the biz_tag its prefix
 * names. */
static void
serve_decode_segment(struct api *a, struct http_conn *c,
                     const struct api_grpc_args *g)
{
    struct decode_idstr s;
    const char *code;
    char why[256];
    uint8_t out[API_GRPC_SEGMENT_ID_MAX];

    if (decode_id_string(a->cfg, DECODE_SEGMENT, g->text, g->text_len,
                         IDSTR_DEC, &s, &code, why, sizeof why) != 0) {
        api_reply_error(c, R_SEGMENT_DECODE, 400, code, NULL, "%s", why);
        return;
    }
    api_grpc_reply_msg(c, R_SEGMENT_DECODE, out,
                       api_grpc_pack_segment_id(s.p.id, s.tag, s.p.enc, out,
                                                sizeof out));
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
    api_grpc_reply_msg(c, R_HEALTH, out, api_grpc_pack_health(serving, out, sizeof out));
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
        api_serve_segment(a, c, req, r, g->name, g->name_len, g->n, g->enc,
                          &api_writer_grpc);
        return;
    case AGM_SNOWFLAKE:
        if (api_sf_disabled(a, c, r) || api_id_denied(a, c, req, r, "@snowflake"))
            return;
        api_serve_snowflake(a, c, req, r, g->n, g->enc, &api_writer_grpc);
        return;
    case AGM_UUID:
    case AGM_ULID:
        api_serve_id128(a, c, r, g->n, &api_writer_grpc);
        return;
    case AGM_SERIAL:
        serve_serial(a, c, req, g);
        return;
    case AGM_LEASE:
        if (api_segment_disabled(a, c, r) || api_id_denied(a, c, req, r, g->name))
            return;
        api_serve_lease(a, c, req, g->name, g->n, &api_writer_grpc);
        return;
    case AGM_DECODE:
        serve_decode(a, c, g);
        return;
    case AGM_DECODE_SEGMENT:
        serve_decode_segment(a, c, g);
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
