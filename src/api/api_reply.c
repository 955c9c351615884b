/* api_reply.c: what the handlers share to read a request and refuse it:
 * its ?count=, ?format= (the format chooses the HTTP writer) and ?enc=
 * (numbers or strings: idstr.h), its biz_tag,
 * its deadline, and the refusal (api_reply_error), which the request's
 * writer writes (see api_reply.h).
 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api_reply.h"
#include "config.h"
#include "http.h"
#include "util.h"

void
api_reply_error(struct http_conn *c, enum route r, int status, const char *code,
                const char *extra, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (status == 503 && api_self != NULL) {
        size_t i = 0;

        while (i < NCODES_503 - 1 && strcmp(codes_503[i], code) != 0)
            i++;
        api_stat_inc(&api_self->unavailable[r][i]);
    }
    /* dispatch chose the writer of the request's protocol. */
    assert(api_self != NULL && api_self->writer != NULL);
    api_self->writer->error(c, r, status, code, extra, msg);
}

/* ---- request helpers ---- */

/* The query parameter name of m into v (cap bytes), its length in *vlen.
 * Returns 1 found, 0 absent (no query, or not in it), 2 present but
 * malformed or too long, or -1 after answering 400 repeated_parameter. */
static int
query_one(struct http_conn *c, enum route r, const struct http_msg *m,
          const char *name, char *v, size_t cap, size_t *vlen)
{
    *vlen = 0;
    if (m->query == NULL)
        return 0;
    switch (util_query_param(m->query, m->query_len, name, v, cap, vlen)) {
    case UTIL_QUERY_ABSENT:
        return 0;
    case UTIL_QUERY_REPEATED:
        api_reply_error(c, r, 400, "repeated_parameter", NULL,
                        "%s is given more than once", name);
        return -1;
    case UTIL_QUERY_FOUND:
        return 1;
    case UTIL_QUERY_BAD:
        break;
    }
    return 2;
}

/* ?count=N in [1, max] (1 if absent). Returns N, or -1 after answering 400
 * (malformed, out of range, or given twice). */
static int64_t
query_count(struct http_conn *c, enum route r, const struct http_msg *m,
            int64_t max)
{
    char v[24];
    size_t vlen;
    int64_t n;
    int q = query_one(c, r, m, "count", v, sizeof v, &vlen);

    if (q <= 0)
        return q == 0 ? 1 : -1;
    if (q == 1 && util_parse_i64(v, vlen, 0, &n) == 0 && n >= 1 && n <= max)
        return n;
    api_reply_error(c, r, 400, "invalid_count", NULL,
                    "count must be an integer from 1 to %lld", (long long)max);
    return -1;
}

/* The biz_tag of a request (see api_reply.h). */
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
                        "[A-Za-z0-9._:-]), @snowflake, @uuid or @ulid; a "
                        "biz_tag or @snowflake may end in /dec, /base62 or "
                        "/base32", TAG_MAX);
        break;
    }
    return -1;
}

/* JSON if Accept asks for it or ?format=json; ?format=text wins over Accept.
 * Returns 1 json, 0 text, or -1 after answering 400. */
static int
want_json(struct http_conn *c, enum route r, const struct http_msg *m)
{
    char v[8];
    size_t vlen;
    int q = query_one(c, r, m, "format", v, sizeof v, &vlen);

    if (q <= 0)
        return q == 0 ? m->accept_json : -1;
    if (q == 1 && vlen == 4 && memcmp(v, "json", 4) == 0)
        return 1;
    if (q == 1 && ((vlen == 4 && memcmp(v, "text", 4) == 0) ||
                   (vlen == 5 && memcmp(v, "plain", 5) == 0)))
        return 0;
    api_reply_error(c, r, 400, "invalid_format", NULL, "format must be json or text");
    return -1;
}

int
api_enc_param(struct http_conn *c, enum route r, const struct http_msg *m,
              enum idstr_enc *enc)
{
    char v[8];
    size_t vlen;
    int q = query_one(c, r, m, "enc", v, sizeof v, &vlen);

    *enc = IDSTR_DEC;
    if (q <= 0)
        return q;
    if (q == 1 && idstr_enc_parse(v, vlen, enc) == 0)
        return 0;
    api_reply_error(c, r, 400, "invalid_encoding", NULL,
                    "enc must be dec, base62 or base32");
    return -1;
}

const struct api_writer *
api_http_writer(struct http_conn *c, enum route r, const struct http_msg *m)
{
    int json = want_json(c, r, m);

    if (json < 0)
        return NULL;
    if (json)
        return &api_writer_json;
    return api_routes[r].flags & RT_LEAF ? &api_writer_leaf : &api_writer_text;
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

/* The ?count= and format of an ID request. Returns its writer, or NULL
 * after answering 4xx. */
const struct api_writer *
api_id_request_start(struct http_conn *c, struct http_request *req, enum route r,
                     int64_t max, int64_t *n)
{
    if (req->msg.method == HTTP_HEAD) {
        api_reply_error(c, r, 405, "method_not_allowed", "Allow: GET\r\n",
                        "HEAD would take IDs and drop them: use GET (probe with "
                        "GET /health)");
        return NULL;
    }
    *n = query_count(c, r, &req->msg, max);
    if (*n < 0)
        return NULL;
    return api_http_writer(c, r, &req->msg);
}
