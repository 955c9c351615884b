/* api.c: the API's state (see api.h), its I/O threads' buffers and
 * counters (api_self), and the ID handlers: segment, snowflake,
 * UUIDv7/ULID and their decoders (the table that reaches them is
 * api_route.c's). The api_serve_* handlers serve every protocol: they hand
 * the IDs to the writer their caller chose (api_writer.h).
 *
 * The hot paths are GET /segment/<tag> and GET /snowflake: the IDs go to a
 * per-thread array, the writer formats them into a per-thread buffer and
 * hands it to http_reply; no allocation, lock or syscall of their own.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_handlers.h"
#include "auth.h"
#include "conceal.h"
#include "config.h"
#include "decode.h"
#include "idstr.h"
#include "loader.h"
#include "log.h"
#include "segment.h"
#include "serial.h"
#include "snowflake.h"
#include "ulid.h"
#include "uuid7.h"
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

uint64_t
api_segment_key(const char *tag, size_t len)
{
    uint64_t h = UINT64_C(14695981039346656037);    /* FNV-1a */

    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)tag[i]) * UINT64_C(1099511628211);
    return h;
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
    /* An ID is at most 19 digits; JSON adds 3 bytes and the tag, RESP 7
     * ("$19\r\n" and "\r\n"). A UUID is 36 characters, 39 in JSON with its
     * quotes and comma, 43 in RESP; a serial at most SERIAL_TEXT_MAX, and
     * as many more. */
    size_t out = maxn * 28;

    if (max128 * 44 > out)
        out = max128 * 44;
    if ((size_t)cfg->serial_count_max * (SERIAL_TEXT_MAX + 8) > out)
        out = (size_t)cfg->serial_count_max * (SERIAL_TEXT_MAX + 8);
    for (int i = 0; i <= nthreads; i++) {
        a->threads[i].out_cap = out + TAG_MAX * 2 + 256;
        a->threads[i].out = xmalloc(a->threads[i].out_cap);
        a->threads[i].ids = xcalloc(maxn, sizeof(uint64_t));
        a->threads[i].id128 = xcalloc(max128, 16);
        a->threads[i].text = xmalloc(max128 * (UUID7_TEXT_LEN + 1));
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
        free(a->threads[i].text);
        free(a->threads[i].idtext);
        api_grpc_thread_free(a->threads[i].grpc);
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
api_set_conceal(struct api *a, struct conceal *c)
{
    a->conceal = c;
}

void
api_set_serial_zgate(struct api *a, struct serial_zgate *g)
{
    a->serial_zgate = g;
}

void
api_set_auth(struct api *a, struct auth *auth, int admin_apart)
{
    a->auth = auth;
    a->admin_apart = admin_apart;
}

/* ---- IDs as numbers or strings ---- */

/* n IDs of a segment request (tag) or a snowflake one (tag NULL) as enc
 * asks: numbers through w->ids, or strings (idstr.h), each after the
 * kind's prefix, through w->id_strings (or texts). The strings go to this
 * thread's idtext, grown to the largest such answer it has given, and
 * out grows to hold them quoted (JSON) or framed (RESP). */
static void
reply_ids(struct api *a, struct http_conn *c, enum route r, const char *tag,
          const uint64_t *ids, size_t n, enum idstr_enc enc,
          const struct api_writer *w)
{
    const char *prefix;
    size_t plen, each, need;
    char *p;

    if (enc == IDSTR_DEC) {
        w->ids(c, r, tag, ids, n);
        return;
    }
    prefix = decode_prefix_of(a->cfg, tag);
    plen = strlen(prefix);
    each = (plen > 0 ? plen + 1 : 0) +
           (enc == IDSTR_BASE62 ? IDSTR_B62_LEN : IDSTR_B32_LEN) + 1;
    if (n * each > api_self->idtext_cap) {
        api_self->idtext_cap = n * each;
        api_self->idtext = xrealloc(api_self->idtext, api_self->idtext_cap);
    }
    /* JSON adds 3 bytes a string and the tag; RESP "$NN\r\n" and "\r\n" */
    need = n * (each + 8) + TAG_MAX * 2 + 256;
    if (need > api_self->out_cap) {
        api_self->out = xrealloc(api_self->out, need);
        api_self->out_cap = need;
    }
    p = api_self->idtext;
    for (size_t i = 0; i < n; i++) {
        p += idstr_encode(enc, prefix, plen, ids[i], p);
        *p++ = '\n';
    }
    assert((size_t)(p - api_self->idtext) == n * each);
    if (w->id_strings != NULL)
        w->id_strings(c, r, tag, api_self->idtext, n * each, n, ids[0]);
    else
        w->texts(c, r, api_self->idtext, n * each, n, ids[0]);
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
    if (ls->refusal[0] != '\0')
        api_reply_error(c, r, 503, ls->refusal, "Retry-After: 5\r\n",
                        "no ID for biz_tag '%s': %sloads from the database are "
                        "refused: %s", tag, st->take.tag == NULL ? "" :
                        "both buffers are empty and ", ls->last_error);
    else if (st->take.tag == NULL)
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
api_admin_unset(struct api *a, struct http_conn *c, enum route r, const char *what)
{
    /* Never on the public port alone: with no admin listener, the admin
     * token must be set (and was checked by the dispatch). */
    if (a->admin_apart || a->cfg->admin_token[0] != '\0')
        return 0;
    api_reply_error(c, r, 403, "admin_required", NULL,
                    "%s needs admin.token or an admin listener (admin.listen); "
                    "neither is set", what);
    return 1;
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

/* GET /segment/<tag> and Leaf's /api/segment/get/<tag>; raw is the tag,
 * undecoded. */
void
route_segment(struct api *a, struct http_conn *c, struct http_request *req,
              enum route r, const char *raw, size_t rawlen)
{
    char tag[TAG_MAX + 1];
    long len;
    int64_t n;
    const struct api_writer *w;
    enum idstr_enc enc;

    if (api_segment_disabled(a, c, r))
        return;
    len = api_tag_arg(c, r, raw, rawlen, API_TAG_PATH, tag);
    if (len < 0)
        return;
    w = api_id_request_start(c, req, r, a->cfg->count_max, &n);
    if (w != NULL && api_enc_param(c, r, &req->msg, &enc) == 0)
        api_serve_segment(a, c, req, r, tag, (size_t)len, n, enc, w);
}

/* n IDs of tag (valid, NUL-terminated) for a request of any protocol, in
 * enc: answer, or park until the loader has a segment or the wait runs
 * out. */
void
api_serve_segment(struct api *a, struct http_conn *c, struct http_request *req,
                  enum route r, const char *tag, size_t len, int64_t n,
                  enum idstr_enc enc, const struct api_writer *w)
{
    struct api_state *st = (struct api_state *)req->scratch;
    struct conceal_tag *ct;
    enum segment_result res;
    char why[768];

    assert(a->segs != NULL && util_tag_valid(tag, len) && n >= 1);
    if (!req->retry && !req->timed_out)
        st->wait.deadline_us = api_wait_deadline(a, req);
    if (req->timed_out) {
        reply_no_ids(a, c, r, st, tag, NULL);
        return;
    }

    res = segment_take(a->segs, tag, len, n, &st->take);
    switch (res) {
    case SEGMENT_OK: {
        size_t k = 0;

        for (int i = 0; i < st->take.nranges; i++)
            for (int64_t j = 0; j < st->take.ranges[i].count; j++)
                api_self->ids[k++] = (uint64_t)(st->take.ranges[i].start + j);
        assert(k == (size_t)n);
        ct = conceal_find(a->conceal, tag, len);
        if (ct != NULL)         /* counters to concealed IDs, in place */
            conceal_ids(a->conceal, ct, api_self->ids, k);
        reply_ids(a, c, r, tag, api_self->ids, k, enc, w);
        return;
    }
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
        ct = conceal_find(a->conceal, tag, len);
        if (ct != NULL && conceal_refused(ct, why, sizeof why)) {
            api_reply_error(c, r, 503, "conceal_key_changed", "Retry-After: 60\r\n",
                            "%s", why);
            return;
        }
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
        int64_t left = (st->wait.deadline_us - util_mono_us() + 999) / 1000;

        /* Nothing to wait for while the database is known to be down (the
         * loader is backing off): say so now rather than after wait_ms. One
         * atomic load: a parked request checks this on every retry. */
        if (!loader_db_up(a->loader) || loader_refused(a->loader)) {
            reply_no_ids(a, c, r, st, tag, NULL);
            return;
        }
        if (left <= 0)
            left = 1;
        st->wait.to_deadline = 1;
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

/* Count one request on /api/snowflake/get/<key> in this thread's table: no
 * lock, no locked instruction (the owner is the only writer). */
static void
count_leaf_key(const char *raw, size_t rawlen)
{
    char key[TAG_MAX + 1];
    long n;
    uint64_t h;
    uint32_t i, nk;

    if (api_self == NULL)
        return;
    n = api_tag_arg(NULL, R_SNOWFLAKE_LEAF, raw, rawlen, API_TAG_PATH, key);
    if (n < 0) {
        api_stat_inc(&api_self->other_keys);
        return;
    }
    h = api_segment_key(key, (size_t)n);
    nk = atomic_load_explicit(&api_self->nkeys, memory_order_relaxed);
    for (i = 0; i < nk; i++) {
        struct leaf_key *k = &api_self->leaf_keys[i];
        if (k->hash == h && strncmp(k->name, key, (size_t)n) == 0 &&
            k->name[n] == '\0') {
            api_stat_inc(&k->count);
            return;
        }
    }
    if (nk == LEAF_KEYS_MAX) {
        api_stat_inc(&api_self->other_keys);
        return;
    }
    api_self->leaf_keys[nk].hash = h;
    memcpy(api_self->leaf_keys[nk].name, key, (size_t)n);
    api_self->leaf_keys[nk].name[n] = '\0';
    atomic_store_explicit(&api_self->leaf_keys[nk].count, 1, memory_order_relaxed);
    atomic_store_explicit(&api_self->nkeys, nk + 1, memory_order_release);
}

/* GET /snowflake and Leaf's /api/snowflake/get/<key> (the key only labels
 * a metric). */
void
route_snowflake(struct api *a, struct http_conn *c, struct http_request *req,
                enum route r, const char *key, size_t keylen)
{
    int64_t n;
    const struct api_writer *w;
    enum idstr_enc enc;

    if (r == R_SNOWFLAKE_LEAF && !req->retry && !req->timed_out)
        count_leaf_key(key, keylen);
    if (api_sf_disabled(a, c, r))
        return;
    w = api_id_request_start(c, req, r, a->cfg->sf_count_max, &n);
    if (w != NULL && api_enc_param(c, r, &req->msg, &enc) == 0)
        api_serve_snowflake(a, c, req, r, n, enc, w);
}

/* n snowflake IDs for a request of any protocol, in enc: answer, or park
 * while the generator waits out a millisecond. */
void
api_serve_snowflake(struct api *a, struct http_conn *c, struct http_request *req,
                    enum route r, int64_t n, enum idstr_enc enc,
                    const struct api_writer *w)
{
    struct api_state *st = (struct api_state *)req->scratch;
    struct snowflake_refusal why;
    int64_t now;
    int rc;

    assert(a->sf != NULL && n >= 1);
    if (!req->retry && !req->timed_out)
        st->wait.deadline_us = api_wait_deadline(a, req);
    rc = snowflake_next(a->sf, (uint32_t)n, api_self->ids, &why);
    if (rc == SNOWFLAKE_OK) {
        reply_ids(a, c, r, NULL, api_self->ids, (size_t)n, enc, w);
        return;
    }
    now = util_mono_us();
    if (rc == SNOWFLAKE_WAIT && now + why.wait_ms * 1000 <= st->wait.deadline_us) {
        st->wait.to_deadline = 0;
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

/* Decode id (NUL-terminated, len bytes; -1: too long or badly escaped): a
 * decimal ID, or an ID string (decode.h). */
static void
handle_decode(struct api *a, struct http_conn *c, enum route r, char *id,
              long len, enum idstr_enc enc)
{
    struct sbuf b = { 0 };
    char *cause = NULL;

    if (api_sf_disabled(a, c, r))
        return;
    if (len < 0) {
        api_reply_error(c, r, 400, "invalid_id", NULL,
                        "not a snowflake ID: expected a decimal number of at "
                        "most 19 digits, or an ID string of at most %d "
                        "characters", IDSTR_TEXT_MAX);
        return;
    }
    /* An ID string: enc says so, or (on /snowflake/decode/) it has a
     * prefix or a width of its own and is not all digits; anything else
     * is read as a decimal ID. */
    if (enc != IDSTR_DEC || (r == R_DECODE && decode_looks_idstr(id, (size_t)len))) {
        struct decode_idstr s;
        const char *code;
        char why[256];

        if (decode_id_string(a->cfg, DECODE_SNOWFLAKE, id, (size_t)len, enc, &s,
                             &code, why, sizeof why) != 0) {
            api_reply_error(c, r, 400, code, NULL, "%s", why);
            return;
        }
        /* the number, as a decimal ID (IDSTR_TEXT_MAX > 19 digits) */
        len = (long)(util_u64_dec(id, s.p.id) - id);
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

/* GET /snowflake/decode/<id>[?enc=...]: a decimal ID or an ID string. */
void
route_decode(struct api *a, struct http_conn *c, struct http_request *req,
             enum route r, const char *raw, size_t rawlen)
{
    char id[IDSTR_TEXT_MAX + 1];
    long len = util_pct_decode(raw, rawlen, id, sizeof id - 1);
    enum idstr_enc enc;

    if (api_enc_param(c, r, &req->msg, &enc) < 0)
        return;
    if (len >= 0)
        id[len] = '\0';
    handle_decode(a, c, r, id, len, enc);
}

/* GET /segment/decode/<string>[?enc=...]: a segment ID string's number,
 * and the biz_tag its prefix names. */
void
route_segment_decode(struct api *a, struct http_conn *c, struct http_request *req,
                     enum route r, const char *raw, size_t rawlen)
{
    char text[IDSTR_TEXT_MAX + 1];
    long len = util_pct_decode(raw, rawlen, text, sizeof text - 1);
    struct decode_idstr s;
    struct sbuf b = { 0 };
    const char *code;
    char why[256];
    enum idstr_enc enc;

    if (api_enc_param(c, r, &req->msg, &enc) < 0)
        return;
    if (len < 0) {
        api_reply_error(c, r, 400, "invalid_id", NULL,
                        "not an ID string: at most %d characters ([<prefix>_] "
                        "then 11 of base62 or 13 of base32)", IDSTR_TEXT_MAX);
        return;
    }
    if (decode_id_string(a->cfg, DECODE_SEGMENT, text, (size_t)len, enc, &s,
                         &code, why, sizeof why) != 0) {
        api_reply_error(c, r, 400, code, NULL, "%s", why);
        return;
    }
    decode_segment_json(&s, &b);
    sbuf_puts(&b, "\n");
    api_reply_sbuf(c, r, 200, "application/json", &b);
}

/* Leaf's GET /decodeSnowflakeId?snowflakeId=<id>. */
void
route_decode_leaf(struct api *a, struct http_conn *c, struct http_request *req,
                  enum route r, const char *rest, size_t rlen)
{
    const struct http_msg *m = &req->msg;
    char v[32];
    size_t vlen = 0;
    enum util_query_result qr = UTIL_QUERY_ABSENT;

    if (m->query != NULL)
        qr = util_query_param(m->query, m->query_len, "snowflakeId", v,
                              sizeof v - 1, &vlen);
    if (qr == UTIL_QUERY_REPEATED) {
        api_reply_error(c, r, 400, "repeated_parameter", NULL,
                        "snowflakeId is given more than once");
        return;
    }
    if (qr != UTIL_QUERY_BAD)
        v[vlen] = '\0';
    handle_decode(a, c, r, v, qr == UTIL_QUERY_BAD ? -1 : (long)vlen, IDSTR_DEC);
}

/* ---- UUIDv7 and ULID ---- */

/* GET /uuid and /ulid: n of them from the node's one generator of each kind
 * (uuid7.c, ulid.c: monotonic on this node; unique across nodes by their
 * random bits). */
void
route_id128(struct api *a, struct http_conn *c, struct http_request *req,
            enum route r, const char *rest, size_t rlen)
{
    int64_t n;
    const struct api_writer *w;

    w = api_id_request_start(c, req, r, r == R_UUID ? a->cfg->uuid_count_max :
                             a->cfg->ulid_count_max, &n);
    if (w != NULL)
        api_serve_id128(a, c, r, n, w);
}

/* n UUIDs or ULIDs, one per line, handed to the writer; memcached's cas is
 * the first one's time and first random bits (its first 8 bytes). */
void
api_serve_id128(struct api *a, struct http_conn *c, enum route r, int64_t n,
                const struct api_writer *w)
{
    int uuid = r == R_UUID, rc;
    size_t tl = uuid ? UUID7_TEXT_LEN : ULID_TEXT_LEN;
    char *p = api_self->text, *start = api_self->text;
    const uint8_t *b;
    uint64_t cas = 0;

    assert(n >= 1 && w->texts != NULL);
    rc = uuid ? uuid7_next(a->uuid, (size_t)n, api_self->id128)
              : ulid_next(a->ulid, (size_t)n, api_self->id128);
    if (rc < 0) {
        api_reply_error(c, r, 503, "random_unavailable", "Retry-After: 1\r\n",
                        "the kernel gave no random bytes (getrandom failed)");
        return;
    }
    {
        _Atomic uint64_t *k = uuid ? &api_self->uuids : &api_self->ulids;

        atomic_store_explicit(k, atomic_load_explicit(k, memory_order_relaxed) +
                              (uint64_t)n, memory_order_relaxed);
    }
    for (int64_t i = 0; i < n; i++) {
        if (uuid)
            uuid7_format((const struct uuid7 *)api_self->id128 + i, p);
        else
            ulid_format((const struct ulid *)api_self->id128 + i, p);
        p += tl;
        *p++ = '\n';
    }
    b = uuid ? ((const struct uuid7 *)api_self->id128)->b
             : ((const struct ulid *)api_self->id128)->b;
    for (int i = 0; i < 8; i++)
        cas = cas << 8 | b[i];
    w->texts(c, r, start, (size_t)(p - start), (size_t)n, cas);
}

/* GET /uuid/decode/<uuid> and /ulid/decode/<ulid>. */
void
route_id128_decode(struct api *a, struct http_conn *c, struct http_request *req,
                   enum route r, const char *raw, size_t rawlen)
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