/* api_writer_http.c: the HTTP writers (HTTP/1.1 and HTTP/2 alike): IDs and
 * texts one per line (text/plain) or as {"ids":[...]} (JSON), leases as
 * "<start> <end>" lines or {"biz_tag":...,"ranges":[...]}, and every
 * refusal as JSON {"error":"<code>","message":...}. See api_writer.h.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_writer.h"
#include "http.h"
#include "segment.h"
#include "util.h"

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
api_reply_sbuf(struct http_conn *c, enum route r, int status, const char *ctype,
               struct sbuf *b)
{
    api_reply(c, r, status, ctype, NULL, b->p ? b->p : "", b->len);
    sbuf_free(b);
}

static void
error_json(struct http_conn *c, enum route r, int status, const char *code,
           const char *extra, const char *msg)
{
    char body[1024];
    char *q = util_json_str(msg);
    int n = snprintf(body, sizeof body, "{\"error\":\"%s\",\"message\":%s}\n", code, q);

    free(q);
    if (n < 0 || (size_t)n >= sizeof body)
        n = snprintf(body, sizeof body, "{\"error\":\"%s\"}\n", code);
    api_reply(c, r, status, "application/json", extra, body, (size_t)n);
}

/* ---- text ---- */

static void
ids_text(struct http_conn *c, enum route r, const char *tag, const uint64_t *ids,
         size_t n)
{
    char *p = api_self->out, *start = api_self->out;

    for (size_t i = 0; i < n; i++) {
        p = util_u64_dec(p, ids[i]);
        *p++ = '\n';
    }
    assert((size_t)(p - start) <= api_self->out_cap);
    api_reply(c, r, 200, "text/plain", NULL, start, (size_t)(p - start));
}

static void
texts_text(struct http_conn *c, enum route r, char *text, size_t len, size_t n,
           uint64_t cas)
{
    api_reply(c, r, 200, "text/plain", NULL, text, len);
}

static void
lease_text(struct http_conn *c, const char *tag, const struct segment_range *rg,
           int nr)
{
    struct sbuf b = { 0 };

    for (int i = 0; i < nr; i++)
        sbuf_printf(&b, "%lld %lld\n", (long long)rg[i].start,
                    (long long)(rg[i].start + rg[i].count));
    api_reply_sbuf(c, R_LEASE, 200, "text/plain", &b);
}

const struct api_writer api_writer_text = {
    ids_text, texts_text, lease_text, error_json, NULL
};

/* Leaf's paths (RT_LEAF) answer one ID as the bare number, as Leaf does. */
static void
ids_leaf(struct http_conn *c, enum route r, const char *tag, const uint64_t *ids,
         size_t n)
{
    char buf[24], *e;

    if (n != 1) {
        ids_text(c, r, tag, ids, n);
        return;
    }
    e = util_u64_dec(buf, ids[0]);
    api_reply(c, r, 200, "text/plain", NULL, buf, (size_t)(e - buf));
}

const struct api_writer api_writer_leaf = {
    ids_leaf, texts_text, lease_text, error_json, NULL
};

/* ---- JSON ---- */

/* End the list of items at start..p (each followed by a comma) and answer. */
static void
json_list_end(struct http_conn *c, enum route r, char *start, char *p)
{
    if (p[-1] == ',')
        p--;
    memcpy(p, "]}\n", 3);
    p += 3;
    assert((size_t)(p - start) <= api_self->out_cap);
    api_reply(c, r, 200, "application/json", NULL, start, (size_t)(p - start));
}

/* {"biz_tag":"<tag>","ids":[ or {"ids":[ at p; returns the end. */
static char *
json_ids_head(char *p, const char *tag)
{
    if (tag != NULL) {
        size_t tl = strlen(tag);

        memcpy(p, "{\"biz_tag\":\"", 12);
        p += 12;
        memcpy(p, tag, tl);                 /* tags are [A-Za-z0-9._:-] */
        p += tl;
        memcpy(p, "\",\"ids\":[", 9);
        return p + 9;
    }
    memcpy(p, "{\"ids\":[", 8);
    return p + 8;
}

/* The texts at text..end (each ended by '\n'), quoted, each with a comma,
 * at p; returns the end. The texts are [0-9A-Za-z_-] and the like: quoted
 * as they are. */
static char *
json_quote_texts(char *p, char *text, char *end)
{
    for (char *t = text; t < end; ) {
        char *nl = memchr(t, '\n', (size_t)(end - t));

        assert(nl != NULL);                 /* every text ends in '\n' */
        *p++ = '"';
        memcpy(p, t, (size_t)(nl - t));
        p += nl - t;
        *p++ = '"';
        *p++ = ',';
        t = nl + 1;
    }
    return p;
}

static void
ids_json(struct http_conn *c, enum route r, const char *tag, const uint64_t *ids,
         size_t n)
{
    char *start = api_self->out, *p = json_ids_head(start, tag);

    for (size_t i = 0; i < n; i++) {
        *p++ = '"';
        p = util_u64_dec(p, ids[i]);
        *p++ = '"';
        *p++ = ',';
    }
    json_list_end(c, r, start, p);
}

static void
texts_json(struct http_conn *c, enum route r, char *text, size_t len, size_t n,
           uint64_t cas)
{
    char *start = api_self->out;

    json_list_end(c, r, start, json_quote_texts(json_ids_head(start, NULL), text,
                                                text + len));
}

/* IDs as strings: as the numbers are, {"biz_tag":...,"ids":["..."]}. */
static void
id_strings_json(struct http_conn *c, enum route r, const char *tag, char *text,
                size_t len, size_t n, uint64_t cas)
{
    char *start = api_self->out;

    json_list_end(c, r, start, json_quote_texts(json_ids_head(start, tag), text,
                                                text + len));
}

static void
lease_json(struct http_conn *c, const char *tag, const struct segment_range *rg,
           int nr)
{
    struct sbuf b = { 0 };

    sbuf_printf(&b, "{\"biz_tag\":\"%s\",\"ranges\":[", tag);
    for (int i = 0; i < nr; i++)
        sbuf_printf(&b, "%s{\"start\":\"%lld\",\"end\":\"%lld\"}", i ? "," : "",
                    (long long)rg[i].start, (long long)(rg[i].start + rg[i].count));
    sbuf_puts(&b, "]}\n");
    api_reply_sbuf(c, R_LEASE, 200, "application/json", &b);
}

const struct api_writer api_writer_json = {
    ids_json, texts_json, lease_json, error_json, id_strings_json
};
