/* api_writer_mcbin.c: the memcached writer's binary frames (api_writer_mc.c
 * calls them for a binary request): a get's one ID or text as a response
 * frame (status 0, 4 bytes of flags 0, the key for
 * GETK and GETKQ, the ID in decimal as the value, the ID as the CAS), a
 * refusal as an error frame whose value is "<code>: <message>" (the status
 * by api_mcbin_status), and the other commands' answers (api_memcache.c
 * calls them through api_mc_reply_*). Every frame echoes the request's
 * opcode and opaque. A quiet get's "key not found" is not answered (the
 * protocol's quiet get: only a NOOP or a later answer tells the client it
 * missed).
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "api_writer.h"
#include "http.h"
#include "idstr.h"
#include "mc_bin_parse.h"
#include "util.h"

uint16_t
api_mcbin_status(int status, const char *code)
{
    if (strcmp(code, "not_supported") == 0 || strcmp(code, "mode_disabled") == 0)
        return MC_BIN_NOT_SUPPORTED;
    if (status == 404 || strcmp(code, "unknown_stats_group") == 0)
        return MC_BIN_KEY_ENOENT;
    if (status == 401 || status == 403)
        return MC_BIN_AUTH_ERROR;
    if (status == 413)
        return MC_BIN_E2BIG;
    if (status < 500)
        return MC_BIN_EINVAL;
    if (status == 503)
        return MC_BIN_ETMPFAIL;
    return MC_BIN_EINTERNAL;
}

/* One frame for c's request into out (room: MC_BIN_HEADER + 4 + MC_KEY_MAX
 * + vlen): extras (0 or 4 bytes of zero flags), the key when the opcode
 * answers with it, the value. Returns its length. */
static size_t
frame(char *out, const struct http_request *req, uint16_t status, int extras,
      const char *val, size_t vlen, uint64_t cas)
{
    const struct mc_cmd *cmd = req->mc;
    size_t klen = cmd->with_key && cmd->ntok > 1 ? cmd->len[1] : 0;
    size_t ext = extras ? 4 : 0;
    char *p = out + MC_BIN_HEADER;

    assert(cmd->binary && klen <= MC_KEY_MAX);
    mc_bin_header((unsigned char *)out, cmd->opcode, cmd->opaque, status,
                  (uint8_t)ext, (uint16_t)klen, (uint32_t)(ext + klen + vlen), cas);
    memset(p, 0, ext);
    p += ext;
    memcpy(p, req->mc_line + cmd->off[1], klen);
    p += klen;
    memcpy(p, val, vlen);
    return (size_t)(p + vlen - out);
}

void
api_mcbin_reply_error(struct http_conn *c, enum route r, int status,
                      const char *code, const char *msg)
{
    const struct http_request *req = http_conn_request(c);
    uint16_t st = api_mcbin_status(status, code);
    char val[600], out[MC_BIN_HEADER + MC_KEY_MAX + sizeof val];
    int n;

    assert(req->mc != NULL && req->mc->binary);
    if (req->mc->kind == MC_GET && api_self != NULL)
        api_stat_inc(&api_self->mc_misses);
    api_count(r, status);
    if (req->mc->kind == MC_GET && req->mc->quiet && st == MC_BIN_KEY_ENOENT) {
        http_reply_mc(c, "", 0, HTTP_MC_END);      /* a quiet miss */
        return;
    }
    n = snprintf(val, sizeof val, "%s: %s", code, msg);
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof val)
        n = (int)sizeof val - 1;
    http_reply_mc(c, out, frame(out, req, st, 0, val, (size_t)n, 0), HTTP_MC_END);
}

void
api_mcbin_reply_value(struct http_conn *c, enum route r, const char *val,
                      size_t len, uint64_t cas)
{
    const struct http_request *req = http_conn_request(c);
    char out[MC_BIN_HEADER + 4 + MC_KEY_MAX + MC_VALUE_MAX];

    /* the longest value: @decode/<id>'s JSON (an ID string is at most
     * IDSTR_TEXT_MAX, a UUID 36) */
    assert(req->mc->kind == MC_GET && len <= MC_VALUE_MAX);
    if (api_self != NULL)
        api_stat_inc(&api_self->mc_hits);
    api_count(r, 200);
    http_reply_mc(c, out, frame(out, req, MC_BIN_OK, 1, val, len, cas), 0);
}

void
api_mcbin_reply(struct http_conn *c, const char *val, size_t len, int flags)
{
    const struct http_request *req = http_conn_request(c);
    char out[MC_BIN_HEADER + 256];

    assert(len <= 256);
    http_reply_mc(c, out, frame(out, req, MC_BIN_OK, 0, val, len, 0), flags);
}

/* Each "STAT <name> <value>\r\n" line a frame (key: the name, value: the
 * value), then the empty frame that ends the list. */
void
api_mcbin_reply_stats(struct http_conn *c, const char *text, size_t len)
{
    const struct http_request *req = http_conn_request(c);
    const struct mc_cmd *cmd = req->mc;
    const char *p = text, *end = text + len;
    struct sbuf b = { 0 };
    unsigned char h[MC_BIN_HEADER];

    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *name, *sp;
        size_t linelen;

        if (eol == NULL)
            eol = end;
        linelen = (size_t)(eol - p);
        if (linelen > 0 && p[linelen - 1] == '\r')
            linelen--;
        if (linelen > 5 && memcmp(p, "STAT ", 5) == 0) {
            name = p + 5;
            sp = memchr(name, ' ', (size_t)(p + linelen - name));
            if (sp != NULL) {
                size_t nlen = (size_t)(sp - name), vlen = (size_t)(p + linelen - sp - 1);

                mc_bin_header(h, cmd->opcode, cmd->opaque, MC_BIN_OK, 0,
                              (uint16_t)nlen, (uint32_t)(nlen + vlen), 0);
                sbuf_append(&b, (const char *)h, sizeof h);
                sbuf_append(&b, name, nlen);
                sbuf_append(&b, sp + 1, vlen);
            }
        }
        p = eol + 1;
    }
    mc_bin_header(h, cmd->opcode, cmd->opaque, MC_BIN_OK, 0, 0, 0, 0);
    sbuf_append(&b, (const char *)h, sizeof h);
    http_reply_mc(c, b.p, b.len, 0);
    sbuf_free(&b);
}

void
api_mcbin_reply_unknown(struct http_conn *c)
{
    const struct http_request *req = http_conn_request(c);
    char val[120], out[MC_BIN_HEADER + sizeof val];
    int n;

    n = snprintf(val, sizeof val, "unknown_command: opcode 0x%02x is not a "
                 "memcached command leafd knows", req->mc->opcode);
    if (n < 0 || (size_t)n >= sizeof val)
        n = 0;
    http_reply_mc(c, out, frame(out, req, MC_BIN_UNKNOWN_COMMAND, 0, val,
                                (size_t)n, 0), 0);
}
