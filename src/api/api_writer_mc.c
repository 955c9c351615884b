/* api_writer_mc.c: the memcached writer: a get's one ID or text as the
 * VALUE of the key the request names (req->mc_key; gets adds the cas), with
 * END after the last key, and a refusal as "CLIENT_ERROR <code> <message>"
 * (4xx: the client's mistake) or "SERVER_ERROR <code> <message>" (retry
 * later), which also ends a get's answer (see api_memcache.c); and the
 * other commands' answers. A binary request's (req->mc->binary) are frames,
 * which api_writer_mcbin.c writes: this file picks the form, here only.
 * See api_writer.h.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "api_writer.h"
#include "idstr.h"
#include "http.h"
#include "mc_parse.h"
#include "util.h"

/* "<CLIENT|SERVER>_ERROR <code> <message>", CR and LF made spaces; with
 * noreply the connection closes after it (see api_memcache.c). */
void
api_mc_reply_error(struct http_conn *c, enum route r, int status, const char *code,
                   const char *msg)
{
    const struct http_request *req = http_conn_request(c);
    char out[640];
    int n;

    assert(req->mc != NULL);
    if (req->mc->binary) {
        api_mcbin_reply_error(c, r, status, code, msg);
        return;
    }
    n = snprintf(out, sizeof out, "%s %s %s", status < 500 ? "CLIENT_ERROR" :
                 "SERVER_ERROR", code, msg);
    if (n < 0)
        n = 0;
    if ((size_t)n > sizeof out - 3)
        n = (int)sizeof out - 3;
    for (int i = 0; i < n; i++)
        if (out[i] == '\r' || out[i] == '\n')
            out[i] = ' ';
    memcpy(out + n, "\r\n", 2);
    if (req->mc->kind == MC_GET && api_self != NULL)
        api_stat_inc(&api_self->mc_misses);
    api_count(r, status);
    http_reply_mc(c, out, (size_t)n + 2,
                  HTTP_MC_END | (req->mc->noreply ? HTTP_MC_CLOSE : 0));
}

/* One key's VALUE (and END after the last key). */
static void
reply_value(struct http_conn *c, enum route r, const char *val, size_t len,
            uint64_t cas)
{
    const struct http_request *req = http_conn_request(c);
    const struct mc_cmd *cmd = req->mc;
    size_t klen = cmd->len[req->mc_key];
    /* "VALUE ", " 0 ", the length, the cas, three CRLFs and END: 41 */
    char out[MC_KEY_MAX + 64 + MC_VALUE_MAX], *p = out;

    if (cmd->binary) {
        api_mcbin_reply_value(c, r, val, len, cas);
        return;
    }
    assert(cmd->kind == MC_GET);
    assert(len <= MC_VALUE_MAX && klen <= MC_KEY_MAX);
    memcpy(p, "VALUE ", 6);
    p += 6;
    memcpy(p, req->mc_line + cmd->off[req->mc_key], klen);
    p += klen;
    memcpy(p, " 0 ", 3);
    p += 3;
    p = util_u64_dec(p, len);
    if (cmd->cas) {
        *p++ = ' ';
        p = util_u64_dec(p, cas);
    }
    *p++ = '\r';
    *p++ = '\n';
    memcpy(p, val, len);
    p += len;
    *p++ = '\r';
    *p++ = '\n';
    if (req->mc_key == cmd->nkeys) {
        memcpy(p, "END\r\n", 5);
        p += 5;
    }
    if (api_self != NULL)
        api_stat_inc(&api_self->mc_hits);
    api_count(r, 200);
    http_reply_mc(c, out, (size_t)(p - out), 0);
}

void
api_mc_reply_text(struct http_conn *c, enum route r, const char *val, size_t len)
{
    reply_value(c, r, val, len, 0);
}

static void
error_mc(struct http_conn *c, enum route r, int status, const char *code,
         const char *extra, const char *msg)
{
    api_mc_reply_error(c, r, status, code, msg);
}

/* One ID: its cas is the ID. */
static void
ids_mc(struct http_conn *c, enum route r, const char *tag, const uint64_t *ids,
       size_t n)
{
    char d[24], *e = util_u64_dec(d, ids[0]);

    assert(n == 1);
    reply_value(c, r, d, (size_t)(e - d), ids[0]);
}

static void
texts_mc(struct http_conn *c, enum route r, char *text, size_t len, size_t n,
         uint64_t cas)
{
    assert(n == 1 && len >= 1 && text[len - 1] == '\n');
    reply_value(c, r, text, len - 1, cas);
}

const struct api_writer api_writer_mc = {
    ids_mc, texts_mc, NULL, error_mc, NULL
};

/* ---- the other commands' answers, text or binary (api_writer.h) ---- */

static int
binary(struct http_conn *c)
{
    api_count(R_MEMCACHE, 200);
    return http_conn_request(c)->mc->binary;
}

void
api_mc_reply_version(struct http_conn *c, const char *version)
{
    char line[128];
    int n;

    if (binary(c)) {
        api_mcbin_reply(c, version, strlen(version), 0);
        return;
    }
    n = snprintf(line, sizeof line, "VERSION %s\r\n", version);
    if (n < 0 || (size_t)n >= sizeof line)
        n = 0;
    http_reply_mc(c, line, (size_t)n, 0);
}

void
api_mc_reply_stats(struct http_conn *c, const char *text, size_t len)
{
    struct sbuf b = { 0 };

    if (len == 0)
        text = "";                  /* an empty group: its sbuf is NULL */
    if (binary(c)) {
        api_mcbin_reply_stats(c, text, len);
        return;
    }
    sbuf_append(&b, text, len);
    sbuf_puts(&b, "END\r\n");
    http_reply_mc(c, b.p, b.len, 0);
    sbuf_free(&b);
}

void
api_mc_reply_quit(struct http_conn *c)
{
    const struct mc_cmd *cmd = http_conn_request(c)->mc;

    if (binary(c) && !cmd->quiet)
        api_mcbin_reply(c, "", 0, HTTP_MC_END | HTTP_MC_CLOSE);
    else
        http_reply_mc(c, "", 0, HTTP_MC_END | HTTP_MC_CLOSE);
}

void
api_mc_reply_noop(struct http_conn *c)
{
    int bin = binary(c);

    assert(bin);                    /* the text parser makes no MC_NOOP */
    (void)bin;
    api_mcbin_reply(c, "", 0, 0);
}

void
api_mc_reply_unknown(struct http_conn *c)
{
    const struct mc_cmd *cmd = http_conn_request(c)->mc;

    api_count(R_MEMCACHE, 400);
    if (cmd->binary)
        api_mcbin_reply_unknown(c);
    else
        http_reply_mc(c, "ERROR\r\n", 7, cmd->noreply ? HTTP_MC_CLOSE : 0);
}
