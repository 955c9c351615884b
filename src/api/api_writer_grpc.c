/* api_writer_grpc.c: the gRPC writer: IDs, texts and leases packed into
 * their reply messages (api_grpc_msg.c) from the I/O thread's reply
 * buffers, and a refusal as a gRPC status whose message starts with
 * leafd's error code ("ids_exhausted: ..."); a 503 once the call's
 * grpc-timeout has run out is DEADLINE_EXCEEDED. See api_writer.h.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_grpc_msg.h"
#include "api_writer.h"
#include "http.h"
#include "segment.h"
#include "util.h"

/* An I/O thread's reply buffers (api_self->grpc), grown to the largest
 * answer it has given and kept until api_free. */
struct grpc_bufs {
    uint8_t  *out;
    size_t    out_cap;
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
    free(b->strs);
    free(b);
}

/* The calling thread's buffers, each at least the size asked (0: as is). */
static struct grpc_bufs *
bufs(size_t out, size_t strs)
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
    if (strs > b->strs_cap) {
        b->strs = xrealloc(b->strs, strs * sizeof *b->strs);
        b->strs_cap = strs;
    }
    return b;
}

/* ---- answers ---- */

void
api_grpc_reply_msg(struct http_conn *c, enum route r, const uint8_t *msg, size_t len)
{
    api_count(r, 200);
    http_reply_grpc(c, GRPC_OK, NULL, msg, len);
}

static void
error_grpc(struct http_conn *c, enum route r, int status, const char *code,
           const char *extra, const char *msg)
{
    const struct http_request *req = http_conn_request(c);
    const struct api_wait *w = (const struct api_wait *)req->scratch;
    int64_t end_us = req->start_us + req->grpc_timeout_us;
    char text[640];
    int passed;

    assert(req->proto == HTTP_REQ_GRPC);
    /* DEADLINE_EXCEEDED when the call's own deadline ended it. A park
     * armed to the wait's end (to_deadline) that ran out (timed_out), where
     * that end was the call's grpc-timeout (api_wait_deadline chose it over
     * segment.wait_ms), ended it, whatever the clock says now: libevent's
     * timers run on the coarse monotonic clock, which can lag the precise
     * one by a tick or more on a busy machine, so the park may fire a
     * little before the deadline by util_mono_us. Any other refusal past
     * the deadline is its end too. The scratch of every request that parks
     * starts with struct api_wait; one that never parked has it zeroed. */
    passed = req->grpc_timeout_us > 0 &&
             ((req->timed_out && w->to_deadline && w->deadline_us == end_us) ||
              util_mono_us() + 5000 >= end_us);
    snprintf(text, sizeof text, "%s: %s", code, msg);
    api_count(r, status);
    http_reply_grpc(c, api_grpc_status_of(status, code, passed), text, NULL, 0);
}

static void
ids_grpc(struct http_conn *c, enum route r, const char *tag, const uint64_t *ids,
         size_t n)
{
    struct grpc_bufs *b = bufs(api_grpc_ids_bound(n), 0);

    /* Bit 63 is never set (the writer's contract), so the IDs read as
     * int64_t are the same numbers: packed from where they are. */
    assert(ids[n - 1] <= (uint64_t)INT64_MAX && ids[0] <= (uint64_t)INT64_MAX);
    api_grpc_reply_msg(c, r, b->out,
                       api_grpc_pack_ids((const int64_t *)ids, n, b->out, b->out_cap));
}

/* The texts into b->strs: each '\n' becomes the NUL of its text. Returns
 * how many. */
static size_t
split_texts(struct grpc_bufs *b, char *text, size_t len, size_t n)
{
    size_t k = 0;

    for (size_t i = 0; i < len; i++) {
        char *start = text + i;
        char *nl = memchr(start, '\n', len - i);

        assert(nl != NULL && k < n);        /* every text ends in '\n' */
        *nl = '\0';
        b->strs[k++] = start;
        i = (size_t)(nl - text);
    }
    return k;
}

/* The texts as a StringsReply. */
static void
texts_grpc(struct http_conn *c, enum route r, char *text, size_t len, size_t n,
           uint64_t cas)
{
    struct grpc_bufs *b = bufs(api_grpc_strings_bound(n, len), n);
    size_t k = split_texts(b, text, len, n);

    api_grpc_reply_msg(c, r, b->out,
                       api_grpc_pack_strings(b->strs, k, b->out, b->out_cap));
}

/* IDs as strings: an IdsReply's strings (field 2), so a stub that reads
 * NextSegment's and NextSnowflake's IdsReply reads them. */
static void
id_strings_grpc(struct http_conn *c, enum route r, const char *tag, char *text,
                size_t len, size_t n, uint64_t cas)
{
    struct grpc_bufs *b = bufs(api_grpc_strings_bound(n, len), n);
    size_t k = split_texts(b, text, len, n);

    api_grpc_reply_msg(c, r, b->out,
                       api_grpc_pack_id_strings(b->strs, k, b->out, b->out_cap));
}

static void
lease_grpc(struct http_conn *c, const char *tag, const struct segment_range *ranges,
           int nranges)
{
    int64_t starts[API_GRPC_LEASE_MAX], ends[API_GRPC_LEASE_MAX];
    size_t n = (size_t)nranges;
    struct grpc_bufs *b = bufs(api_grpc_lease_bound(n), 0);

    assert(n <= API_GRPC_LEASE_MAX);
    for (size_t i = 0; i < n; i++) {
        starts[i] = ranges[i].start;
        ends[i] = ranges[i].start + ranges[i].count;
    }
    api_grpc_reply_msg(c, R_LEASE, b->out,
                       api_grpc_pack_lease(tag, starts, ends, n, b->out, b->out_cap));
}

const struct api_writer api_writer_grpc = {
    ids_grpc, texts_grpc, lease_grpc, error_grpc, id_strings_grpc
};
