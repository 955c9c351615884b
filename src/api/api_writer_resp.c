/* api_writer_resp.c: the RESP writers: IDs and texts as an array of bulk
 * strings (api_writer_resp), one ID as an integer (api_writer_resp_int, for
 * INCR), and refusals as "-<CODE> <message>". An answer given while a
 * transaction holds the request goes to the transaction's buffer
 * (api_resp_capture), not to the connection. See api_writer.h.
 */
#include <assert.h>
#include <string.h>

#include "api_writer.h"
#include "http.h"
#include "util.h"

void
api_reply_resp(struct http_conn *c, enum route r, const char *data, size_t len,
               int close_after)
{
    api_count(r, 200);
    if (!api_resp_capture(c, data, len))
        http_reply_resp(c, data, len, close_after);
}

/* The code in capitals, so that a client can tell a retryable error
 * (IDS_EXHAUSTED) from a bad request by the first word; CR and LF in the
 * message become spaces. */
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

/* s (len bytes) as a bulk string at p; returns the end. */
static char *
bulk(char *p, const char *s, size_t len)
{
    p = api_resp_bulk_head(p, len);
    memcpy(p, s, len);
    p += len;
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

static void
error_resp(struct http_conn *c, enum route r, int status, const char *code,
           const char *extra, const char *msg)
{
    api_reply_resp_error(c, r, status, code, msg);
}

static void
ids_resp(struct http_conn *c, enum route r, const char *tag, const uint64_t *ids,
         size_t n)
{
    char *p = api_self->out, *start = api_self->out;

    p = api_resp_array_head(p, n);
    for (size_t i = 0; i < n; i++) {
        char d[24], *e = util_u64_dec(d, ids[i]);

        p = bulk(p, d, (size_t)(e - d));
    }
    assert((size_t)(p - start) <= api_self->out_cap);
    api_reply_resp(c, r, start, (size_t)(p - start), 0);
}

static void
texts_resp(struct http_conn *c, enum route r, char *text, size_t len, size_t n,
           uint64_t cas)
{
    char *p = api_self->out, *start = api_self->out, *end = text + len;

    p = api_resp_array_head(p, n);
    for (char *t = text; t < end; ) {
        char *nl = memchr(t, '\n', (size_t)(end - t));

        assert(nl != NULL);                 /* every text ends in '\n' */
        p = bulk(p, t, (size_t)(nl - t));
        t = nl + 1;
    }
    assert((size_t)(p - start) <= api_self->out_cap);
    api_reply_resp(c, r, start, (size_t)(p - start), 0);
}

const struct api_writer api_writer_resp = {
    ids_resp, texts_resp, NULL, error_resp, NULL
};

/* INCR: ":<id>\r\n". */
static void
ids_resp_int(struct http_conn *c, enum route r, const char *tag,
             const uint64_t *ids, size_t n)
{
    char out[32], *p = out;

    assert(n == 1);
    *p++ = ':';
    p = util_u64_dec(p, ids[0]);
    *p++ = '\r';
    *p++ = '\n';
    api_reply_resp(c, r, out, (size_t)(p - out), 0);
}

const struct api_writer api_writer_resp_int = {
    ids_resp_int, NULL, NULL, error_resp, NULL
};
