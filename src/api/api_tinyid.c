/* api_tinyid.c: Didi Tinyid's HTTP API, so that Tinyid's clients work with
 * leafd unchanged: /tinyid/id/nextId, nextIdSimple, nextSegmentId and
 * nextSegmentIdSimple, GET or POST, with bizType, token and batchSize in
 * the query (Tinyid's client sends them there; a form body is not read).
 *
 * The bodies are Tinyid's, byte for byte:
 *   nextId              {"data":[1,2],"code":200,"message":""}
 *   nextIdSimple        1,2
 *   nextSegmentId       {"data":{"maxId":..,"loadingId":..,"currentId":..,
 *                        "delta":1,"remainder":0},"code":200,"message":""}
 *   nextSegmentIdSimple currentId,loadingId,maxId,delta,remainder
 * A Tinyid segment is (currentId, maxId]: its client's first ID is
 * currentId + delta, it preloads the next segment once an ID reaches
 * loadingId (currentId + 20% of the segment) and stops past maxId. leafd's
 * lease [start, end) is currentId = start - 1, maxId = end - 1. One table,
 * so delta is 1 and remainder 0. A segment is the row's step, leased from
 * the table in one transaction (one contiguous range).
 *
 * Errors are Tinyid's too, HTTP 200 always: a wrong or missing token is
 * code 5 "token is error" (the Simple forms: an empty body), anything else
 * code 6 with a message (Simple: empty). batchSize over 100000 is cut to
 * 100000 and below 1 gives no ID, as Tinyid does. leafd's own 400 answers
 * a malformed query (not an integer, a parameter twice) and a batchSize
 * (after that cut) over segment.lease_max, the bound of every lease.
 *
 * leafd's addition: &enc=base62|base32 on nextId and nextIdSimple gives the
 * IDs as strings after the tag's prefix (docs/id-kinds.md, "IDs as
 * strings"), quoted in nextId's data; Tinyid's client never sends it. On
 * the segment routes it is a 400 invalid_encoding: a range is numbers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_handlers.h"
#include "auth.h"
#include "api_reply.h"
#include "conceal.h"
#include "config.h"
#include "decode.h"
#include "idstr.h"
#include "util.h"

#define TINYID_BATCH_MAX 100000
#define TINYID_CHUNK 256          /* IDs enciphered together (conceal_ids) */
#define TINYID_LOADING_PERCENT 20

enum tinyid_op { T_NEXT_ID, T_NEXT_ID_SIMPLE, T_NEXT_SEGMENT, T_NEXT_SEGMENT_SIMPLE };

static const char JSON_TYPE[] = "application/json;charset=UTF-8";
static const char TEXT_TYPE[] = "text/plain;charset=UTF-8";

static int
op_simple(enum tinyid_op op)
{
    return op == T_NEXT_ID_SIMPLE || op == T_NEXT_SEGMENT_SIMPLE;
}

/* Tinyid's failure answer: code 5 or 6 in JSON, or the Simple forms' empty
 * body. */
static void
tinyid_fail(struct http_conn *c, enum tinyid_op op, int code, const char *msg)
{
    struct sbuf b = { 0 };

    if (op_simple(op)) {
        api_reply(c, R_TINYID, 200, TEXT_TYPE, NULL, "", 0);
        return;
    }
    sbuf_printf(&b, "{\"data\":null,\"code\":%d,\"message\":", code);
    sbuf_json_str(&b, msg);
    sbuf_puts(&b, "}");
    api_reply_sbuf(c, R_TINYID, 200, JSON_TYPE, &b);
}

/* One query parameter into out (cap bytes, NUL-terminated). Returns 1
 * found, 0 absent, -1 after answering 400. An over-long value reads as
 * found but cut (*toolong set). */
static int
param(struct http_conn *c, const struct http_msg *m, const char *key, char *out,
      size_t cap, int *toolong)
{
    size_t len = 0;

    *toolong = 0;
    out[0] = '\0';
    if (m->query == NULL)
        return 0;
    switch (util_query_param(m->query, m->query_len, key, out, cap - 1, &len)) {
    case UTIL_QUERY_ABSENT:
        return 0;
    case UTIL_QUERY_FOUND:
        out[len] = '\0';
        return 1;
    case UTIL_QUERY_REPEATED:
        api_reply_error(c, R_TINYID, 400, "repeated_parameter", NULL,
                        "%s is given more than once", key);
        return -1;
    case UTIL_QUERY_BAD:
        break;
    }
    *toolong = 1;
    return 1;
}

/* The IDs, as numbers (Tinyid's), or with enc as strings after the tag's
 * prefix (quoted in nextId's data array: a new caller asks for them; Tinyid's
 * own client, which parses a Long, never sends enc). */
static void
reply_ids(struct api *a, struct conceal_tag *ct, struct http_conn *c,
          enum tinyid_op op, const struct segment_range *r, int nr,
          enum idstr_enc enc, const char *prefix)
{
    struct sbuf b = { 0 };
    char num[IDSTR_TEXT_MAX + 2];
    size_t plen = strlen(prefix);

    if (op == T_NEXT_ID)
        sbuf_puts(&b, "{\"data\":[");
    for (int i = 0; i < nr; i++)
        for (int64_t k = 0; k < r[i].count; k += TINYID_CHUNK) {
            uint64_t ids[TINYID_CHUNK];
            size_t m = (size_t)(r[i].count - k < TINYID_CHUNK ?
                                r[i].count - k : TINYID_CHUNK);

            for (size_t j = 0; j < m; j++)
                ids[j] = (uint64_t)(r[i].start + k) + j;
            if (ct != NULL)     /* a concealed tag's counters: its IDs */
                conceal_ids(a->conceal, ct, ids, m);
            for (size_t j = 0; j < m; j++) {
                size_t len;

                if (enc == IDSTR_DEC) {
                    len = (size_t)(util_u64_dec(num, ids[j]) - num);
                } else {
                    int q = op == T_NEXT_ID;

                    if (q)
                        num[0] = '"';
                    len = (size_t)q + idstr_encode(enc, prefix, plen, ids[j], num + q);
                    if (q)
                        num[len++] = '"';
                }
                if (b.len > 0 && b.p[b.len - 1] != '[')
                    sbuf_append(&b, ",", 1);
                sbuf_append(&b, num, len);
            }
        }
    if (op == T_NEXT_ID)
        sbuf_puts(&b, "],\"code\":200,\"message\":\"\"}");
    api_reply_sbuf(c, R_TINYID, 200, op == T_NEXT_ID ? JSON_TYPE : TEXT_TYPE, &b);
}

static void
reply_segment(struct http_conn *c, enum tinyid_op op, const struct segment_range *r)
{
    struct sbuf b = { 0 };
    long long cur = (long long)r->start - 1, max = cur + (long long)r->count;
    long long loading = cur + (long long)r->count * TINYID_LOADING_PERCENT / 100;

    if (op == T_NEXT_SEGMENT)
        sbuf_printf(&b, "{\"data\":{\"maxId\":%lld,\"loadingId\":%lld,\"currentId\":%lld,"
                        "\"delta\":1,\"remainder\":0},\"code\":200,\"message\":\"\"}",
                    max, loading, cur);
    else
        sbuf_printf(&b, "%lld,%lld,%lld,1,0", cur, loading, max);
    api_reply_sbuf(c, R_TINYID, 200, op == T_NEXT_SEGMENT ? JSON_TYPE : TEXT_TYPE, &b);
}

void
api_tinyid_handle(struct api *a, struct http_conn *c, struct http_request *req,
                  const char *opname, size_t oplen)
{
    const struct http_msg *m = &req->msg;
    struct segment_range r[API_LEASE_MAX_RANGES];
    char biz[TAG_MAX + 2], batch[24], tokbuf[AUTH_TOKEN_MAX], why[1024], msg[1200];
    int nr = 0, biz_long, batch_bad, rc;
    struct conceal_tag *ct;
    int64_t n = 1;
    enum tinyid_op op;
    enum idstr_enc enc = IDSTR_DEC;

#define OP_IS(s) (oplen == sizeof s - 1 && memcmp(opname, s, oplen) == 0)
    if (OP_IS("nextId"))
        op = T_NEXT_ID;
    else if (OP_IS("nextIdSimple"))
        op = T_NEXT_ID_SIMPLE;
    else if (OP_IS("nextSegmentId"))
        op = T_NEXT_SEGMENT;
    else if (OP_IS("nextSegmentIdSimple"))
        op = T_NEXT_SEGMENT_SIMPLE;
    else {
        api_reply_error(c, R_TINYID, 404, "not_found", NULL, "Tinyid's paths are "
                        "/tinyid/id/nextId, nextIdSimple, nextSegmentId and "
                        "nextSegmentIdSimple");
        return;
    }
#undef OP_IS
    if (m->method != HTTP_GET && m->method != HTTP_POST) {
        api_reply_error(c, R_TINYID, 405, "method_not_allowed", "Allow: GET, POST\r\n",
                        "Tinyid's routes take GET or POST");
        return;
    }
    if (m->query != NULL && !util_query_valid(m->query, m->query_len)) {
        api_reply_error(c, R_TINYID, 400, "bad_query", NULL,
                        "the query string has a malformed %%-escape or a %%00");
        return;
    }
    if (a->segs == NULL) {
        api_reply_error(c, R_TINYID, 404, "mode_disabled", NULL,
                        "segment mode is off on this node (leaf.segment.enable = false)");
        return;
    }
    if ((rc = param(c, m, "bizType", biz, sizeof biz, &biz_long)) < 0)
        return;
    if (rc == 1 && strlen(biz) > TAG_MAX)
        biz_long = 1;
    if (api_enc_param(c, R_TINYID, m, &enc) < 0)
        return;
    if (enc != IDSTR_DEC && op != T_NEXT_ID && op != T_NEXT_ID_SIMPLE) {
        api_reply_error(c, R_TINYID, 400, "invalid_encoding", NULL,
                        "a segment (nextSegmentId) is a range of numbers: "
                        "enc= is for nextId and nextIdSimple");
        return;
    }
    if (op == T_NEXT_ID || op == T_NEXT_ID_SIMPLE) {
        if ((rc = param(c, m, "batchSize", batch, sizeof batch, &batch_bad)) < 0)
            return;
        if (rc == 1 && (batch_bad || util_parse_i64(batch, strlen(batch), 1, &n) != 0)) {
            api_reply_error(c, R_TINYID, 400, "invalid_batch_size", NULL,
                            "batchSize must be an integer");
            return;
        }
        if (n > TINYID_BATCH_MAX)
            n = TINYID_BATCH_MAX;
    }
    if (!req->retry && !req->timed_out) {
        /* Tinyid's canVisit: a bizType, and a token that may use it. */
        const char *tok = NULL;
        size_t toklen = 0;

        if (auth_request_token(m, tokbuf, sizeof tokbuf, &tok, &toklen) == -1) {
            api_reply_error(c, R_TINYID, 400, "repeated_parameter", NULL,
                            "token is given more than once");
            return;
        }
        if (biz[0] == '\0' ||
            (a->auth != NULL && (biz_long || auth_check(a->auth, biz, tok, toklen) != 0))) {
            tinyid_fail(c, op, 5, "token is error");
            return;
        }
    }
    /* after the token: the limit is this node's configuration, not for
     * callers without one */
    if ((op == T_NEXT_ID || op == T_NEXT_ID_SIMPLE) && n > a->cfg->lease_max) {
        api_reply_error(c, R_TINYID, 400, "invalid_batch_size", NULL,
                        "batchSize must be an integer of at most %lld "
                        "(segment.lease_max)", (long long)a->cfg->lease_max);
        return;
    }
    if (biz_long || !util_tag_valid(biz, strlen(biz))) {
        snprintf(msg, sizeof msg, "%scan not find biztype:%s",
                 op == T_NEXT_ID ? "error query segmentId: " : "", biz);
        tinyid_fail(c, op, 6, msg);
        return;
    }
    if (n < 1) {                  /* Tinyid: no ID (Simple: its exception) */
        if (op == T_NEXT_ID)
        {
            static const char none[] = "{\"data\":[],\"code\":200,\"message\":\"\"}";

            api_reply(c, R_TINYID, 200, JSON_TYPE, NULL, none, sizeof none - 1);
        }
        else
            tinyid_fail(c, op, 6, "");
        return;
    }
    ct = conceal_find(a->conceal, biz, strlen(biz));
    if (ct != NULL && (op == T_NEXT_SEGMENT || op == T_NEXT_SEGMENT_SIMPLE)) {
        snprintf(msg, sizeof msg, API_LEASE_CONCEALED_MSG, biz);
        api_reply_error(c, R_TINYID, 409, "lease_concealed", NULL, "%s", msg);
        return;
    }
    switch (ct != NULL ? api_conceal_take(a, c, req, ct, n, r, &nr, why, sizeof why) :
            api_lease_take(a, c, req, biz,
                           op == T_NEXT_ID || op == T_NEXT_ID_SIMPLE ? n : 0,
                           op == T_NEXT_SEGMENT || op == T_NEXT_SEGMENT_SIMPLE,
                           r, &nr, why, sizeof why)) {
    case API_LEASE_PARKED:
        return;
    case API_LEASE_UNKNOWN:
        snprintf(msg, sizeof msg, "%scan not find biztype:%s",
                 op == T_NEXT_ID ? "error query segmentId: " : "", biz);
        tinyid_fail(c, op, 6, msg);
        return;
    case API_LEASE_BROKEN:
    case API_LEASE_UNAVAILABLE:
        tinyid_fail(c, op, 6, why);
        return;
    case API_LEASE_DONE:
        break;
    }
    if (op == T_NEXT_SEGMENT || op == T_NEXT_SEGMENT_SIMPLE)
        reply_segment(c, op, &r[0]);
    else
        reply_ids(a, ct, c, op, r, nr, enc, decode_prefix_of(a->cfg, biz));
}
