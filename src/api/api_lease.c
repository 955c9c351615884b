/* api_lease.c: leases, whole ranges of a biz_tag's IDs handed to a client
 * that gives them out itself: GET /segment/<biz_tag>/lease?size=N.
 *
 * api_lease_take is shared with the Tinyid routes (api_tinyid.c). A lease
 * comes from the buffers when they hold enough (segment_lease), else from
 * the table in a transaction of its own on a loader thread (loader_lease);
 * meanwhile the request is parked under its tag's wake key, so the I/O
 * thread never blocks. A lease whose request gives up (timeout) is dropped:
 * a gap, never a repeat.
 */
#include <assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "api_handlers.h"
#include "conceal.h"
#include "config.h"
#include "loader.h"
#include "segment.h"
#include "util.h"

/* Ranges in increasing order (a handful: insertion sort). */
static void
sort_ranges(struct segment_range *r, int n)
{
    for (int i = 1; i < n; i++) {
        struct segment_range x = r[i];
        int j = i;

        for (; j > 0 && r[j - 1].start > x.start; j--)
            r[j] = r[j - 1];
        r[j] = x;
    }
}

static enum api_lease_result
lease_park(struct api *a, struct http_conn *c, struct api_lease_state *st,
           const char *tag)
{
    int64_t left = (st->wait.deadline_us - util_mono_us() + 999) / 1000;

    (void)a;
    if (left <= 0)
        left = 1;
    st->wait.to_deadline = 1;
    http_park(c, (int)left, api_segment_key(tag, strlen(tag)));
    return API_LEASE_PARKED;
}

/* The ranges taken so far plus the table's, into out. */
static enum api_lease_result
lease_done(struct api_lease_state *st, struct segment_range *out, int *nout)
{
    int n = st->take.nranges;

    memcpy(out, st->take.ranges, sizeof *out * (size_t)n);
    if (st->job != NULL) {
        out[n].start = st->job->start;
        out[n].count = st->job->n;
        n++;
    }
    sort_ranges(out, n);
    *nout = n;
    return API_LEASE_DONE;
}

/* The request went away while its job was out (http.h: on_drop): drop our
 * reference, so the loader frees the job, and skips the database if it
 * has not started it (loader.h). */
static void
lease_dropped(struct http_request *req)
{
    struct api_lease_state *st = (struct api_lease_state *)req->scratch;

    if (st->job != NULL) {
        loader_lease_put(st->job);
        st->job = NULL;
    }
}

enum api_lease_result
api_lease_take(struct api *a, struct http_conn *c, struct http_request *req,
               const char *tag, int64_t n, int contiguous,
               struct segment_range *out, int *nout, char *why, size_t whylen)
{
    struct api_lease_state *st = (struct api_lease_state *)req->scratch;
    struct loader_lease *j = st->job;
    enum segment_result res;
    int from_db = 0;

    if (!st->started) {
        st->started = 1;
        st->wait.deadline_us = api_wait_deadline(a, req);
    }
    if (j != NULL) {
        enum api_lease_result r;

        if (!atomic_load_explicit(&j->done, memory_order_acquire)) {
            if (!req->timed_out && util_mono_us() < st->wait.deadline_us)
                return lease_park(a, c, st, tag);
            loader_lease_put(j);
            st->job = NULL;
            req->on_drop = NULL;
            snprintf(why, whylen, "the database did not give a range of %lld "
                     "IDs in time (%lld ms)", (long long)st->take.want,
                     (long long)a->cfg->wait_ms);
            return API_LEASE_UNAVAILABLE;
        }
        switch (j->rc) {
        case STORE_OK:
            segment_lease_db_done(a->segs, st->take.tag, j->n);
            r = lease_done(st, out, nout);
            break;
        case STORE_NOT_FOUND:
            snprintf(why, whylen, "biz_tag '%s' is not in leaf_alloc", tag);
            r = API_LEASE_UNKNOWN;
            break;
        case STORE_DB_ERROR:
            snprintf(why, whylen, "the database failed: %s", j->error);
            r = API_LEASE_UNAVAILABLE;
            break;
        case STORE_REFUSED:
        case STORE_DEGRADED:
            snprintf(why, whylen, "loads from the database are refused: %s",
                     j->error);
            r = API_LEASE_UNAVAILABLE;
            break;
        default:
            snprintf(why, whylen, "the leaf_alloc row cannot give %lld IDs: %s",
                     (long long)j->n, j->error);
            r = API_LEASE_BROKEN;
            break;
        }
        loader_lease_put(j);
        st->job = NULL;
        req->on_drop = NULL;
        return r;
    }
    if (req->timed_out) {
        snprintf(why, whylen, "cannot tell whether biz_tag '%s' exists: the "
                 "database did not answer in time", tag);
        return API_LEASE_UNAVAILABLE;
    }
    res = segment_lease(a->segs, tag, strlen(tag), n, contiguous, &st->take,
                        &from_db);
    switch (res) {
    case SEGMENT_OK:
        break;
    case SEGMENT_UNKNOWN:
        snprintf(why, whylen, "biz_tag '%s' is not in leaf_alloc", tag);
        return API_LEASE_UNKNOWN;
    case SEGMENT_BROKEN:
        snprintf(why, whylen, "the leaf_alloc row of biz_tag '%s' cannot give "
                 "IDs (the log says what is wrong)", tag);
        return API_LEASE_BROKEN;
    case SEGMENT_WAIT:                  /* the tag is being looked up */
        if (loader_db_up(a->loader))
            return lease_park(a, c, st, tag);
        /* fall through */
    case SEGMENT_BUSY:
    case SEGMENT_TOO_LARGE:
        snprintf(why, whylen, "cannot tell whether biz_tag '%s' exists right "
                 "now (database down or too many lookups)", tag);
        return API_LEASE_UNAVAILABLE;
    }
    if (!from_db)
        return lease_done(st, out, nout);
    st->job = loader_lease_new(tag, st->take.want);
    loader_lease_submit(a->loader, st->job);
    req->on_drop = lease_dropped;
    return lease_park(a, c, st, tag);
}

enum api_lease_result
api_conceal_take(struct api *a, struct http_conn *c, struct http_request *req,
                 struct conceal_tag *ct, int64_t n, struct segment_range *out,
                 int *nout, char *why, size_t whylen)
{
    struct api_lease_state *st = (struct api_lease_state *)req->scratch;
    const char *tag = conceal_tag_name(ct);

    assert(n >= 1);
    if (!st->started) {
        st->started = 1;
        st->wait.deadline_us = api_wait_deadline(a, req);
    }
    if (req->timed_out) {
        snprintf(why, whylen, "no ID for biz_tag '%s': the next block did not "
                 "arrive in time", tag);
        return API_LEASE_UNAVAILABLE;
    }
    switch (segment_take(a->segs, tag, strlen(tag), n, &st->take)) {
    case SEGMENT_OK:
        memcpy(out, st->take.ranges, sizeof *out * (size_t)st->take.nranges);
        *nout = st->take.nranges;
        return API_LEASE_DONE;
    case SEGMENT_UNKNOWN:
        snprintf(why, whylen, "biz_tag '%s' is not in leaf_alloc", tag);
        return API_LEASE_UNKNOWN;
    case SEGMENT_BROKEN:
        if (!conceal_refused(ct, why, whylen))
            snprintf(why, whylen, "the leaf_alloc row of biz_tag '%s' cannot "
                     "give IDs (the log says what is wrong)", tag);
        return API_LEASE_BROKEN;
    case SEGMENT_WAIT:
        if (loader_db_up(a->loader) && !loader_refused(a->loader))
            return lease_park(a, c, st, tag);
        /* fall through */
    case SEGMENT_BUSY:
    case SEGMENT_TOO_LARGE:
        break;
    }
    snprintf(why, whylen, "no ID for biz_tag '%s' right now (database down, "
             "too many lookups, or a batch its blocks cannot give)", tag);
    return API_LEASE_UNAVAILABLE;
}

/* ?size=N in [1, max]. Returns N, or -1 after answering 400. */
static int64_t
query_size(struct http_conn *c, const struct http_msg *m, int64_t max)
{
    char v[24];
    size_t vlen = 0;
    int64_t n;
    enum util_query_result q = m->query == NULL ? UTIL_QUERY_ABSENT :
        util_query_param(m->query, m->query_len, "size", v, sizeof v, &vlen);

    if (q == UTIL_QUERY_REPEATED) {
        api_reply_error(c, R_LEASE, 400, "repeated_parameter", NULL,
                        "size is given more than once");
        return -1;
    }
    if (q == UTIL_QUERY_FOUND && util_parse_i64(v, vlen, 0, &n) == 0 &&
        n >= 1 && n <= max)
        return n;
    api_reply_error(c, R_LEASE, 400, "invalid_size", NULL,
                    "size must be an integer from 1 to %lld (segment.lease_max)",
                    (long long)max);
    return -1;
}

void
api_lease_handle(struct api *a, struct http_conn *c, struct http_request *req,
                 const char *raw, size_t rawlen)
{
    char tag[TAG_MAX + 1];
    const struct api_writer *w;
    int64_t n;
    long len;

    if (api_segment_disabled(a, c, R_LEASE))
        return;
    if (req->msg.method == HTTP_HEAD) {
        api_reply_error(c, R_LEASE, 405, "method_not_allowed", "Allow: GET\r\n",
                        "HEAD would take a lease and drop it: use GET");
        return;
    }
    len = api_tag_arg(c, R_LEASE, raw, rawlen, API_TAG_PATH, tag);
    if (len < 0)
        return;
    n = query_size(c, &req->msg, a->cfg->lease_max);
    if (n < 0)
        return;
    w = api_http_writer(c, R_LEASE, &req->msg);
    if (w != NULL)
        api_serve_lease(a, c, req, tag, n, w);
}

void
api_serve_lease(struct api *a, struct http_conn *c, struct http_request *req,
                const char *tag, int64_t n, const struct api_writer *w)
{
    struct segment_range r[API_LEASE_MAX_RANGES];
    char why[1024];
    int nr = 0;

    assert(w->lease != NULL);
    if (conceal_find(a->conceal, tag, strlen(tag)) != NULL) {
        api_reply_error(c, R_LEASE, 409, "lease_concealed", NULL,
                        API_LEASE_CONCEALED_MSG, tag);
        return;
    }

    switch (api_lease_take(a, c, req, tag, n, 0, r, &nr, why, sizeof why)) {
    case API_LEASE_PARKED:
        return;
    case API_LEASE_UNKNOWN:
        api_reply_error(c, R_LEASE, 404, "unknown_biz_tag", NULL,
                        "%s; insert a row for it first", why);
        return;
    case API_LEASE_BROKEN:
        api_reply_error(c, R_LEASE, 503, "bad_leaf_alloc_row", "Retry-After: 60\r\n",
                        "%s", why);
        return;
    case API_LEASE_UNAVAILABLE: {
        struct loader_status ls;

        ls.refusal[0] = '\0';
        if (loader_refused(a->loader))
            loader_status(a->loader, &ls);
        api_reply_error(c, R_LEASE, 503, ls.refusal[0] ? ls.refusal :
                        "ids_exhausted", ls.refusal[0] ? "Retry-After: 5\r\n" :
                        "Retry-After: 1\r\n",
                        "no lease for biz_tag '%s': %s; retry later", tag, why);
        return;
    }
    case API_LEASE_DONE:
        break;
    }
    w->lease(c, tag, r, nr);
}
