/* api_resp.c: leafd's commands over the Redis protocol (RESP2, and RESP3
 * after HELLO 3), so that any Redis client is a leafd client.
 *
 * DESIGN
 *
 * The RESP listener is part of the HTTP front end (http.h: same I/O threads,
 * buffers, limits, parking, stop); this file only turns a parsed command
 * (req->cmd) into an answer. The ID commands call the same handlers as the
 * HTTP routes (api_serve_*), with a RESP format, so the IDs, the waiting
 * (a command parks exactly as an HTTP request does, and the commands
 * pipelined behind it wait in order) and the refusals are the same; a
 * refusal is a RESP error whose first word is leafd's error code in
 * capitals (-IDS_EXHAUSTED ...), so a client can tell retryable from wrong.
 *
 *   INCR <biz_tag>                 one segment ID, as an integer
 *   LEAF.SEGMENT <biz_tag> [n [enc]] arrays of bulk strings (enc: dec,
 *                                  base62, base32: IDs as strings)
 *   LEAF.SNOWFLAKE [n [enc]], LEAF.UUID [n], LEAF.ULID [n], LEAF.SERIAL <code> [n]
 *   LEAF.DECODE <id>               JSON, as the HTTP decode routes
 *   PING ECHO QUIT HELLO AUTH SELECT CLIENT INFO COMMAND DBSIZE CONFIG
 *   MULTI EXEC DISCARD WATCH UNWATCH (api_resp_multi.c; INFO: api_resp_info.c)
 *
 * Tokens. AUTH <token> (or AUTH <user> <token>) stores the token in the
 * connection's session; the ID commands check it against the tokens file as
 * the HTTP routes check theirs (scope: the biz_tag, or @snowflake), and the
 * admin token opens INFO's operator sections as it opens the admin pages.
 * AUTH answers -WRONGPASS for a token neither knows. With no tokens file and
 * no admin token, everything is open and AUTH is an error, as in Redis
 * without a password.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api_resp_internal.h"
#include "auth.h"
#include "config.h"
#include "decode.h"
#include "loader.h"
#include "resp_parse.h"
#include "segment.h"
#include "serial.h"
#include "snowflake.h"
#include "util.h"
#include "version.h"

/* ---- answers ---- */

void
api_resp_reply_raw(struct api_resp_ctx *x, const char *s, size_t len)
{
    api_reply_resp(x->c, R_RESP, s, len, 0);
}

void
api_resp_reply_str(struct api_resp_ctx *x, const char *s)
{
    api_resp_reply_raw(x, s, strlen(s));
}

/* code NULL: a Redis-style error whose message starts with its own word. */
void
api_resp_reply_error(struct api_resp_ctx *x, enum route r, int status, const char *code,
                 const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (code == NULL) {
        /* "ERR ...", "WRONGPASS ...": the word is in the message. */
        char *sp = strchr(msg, ' ');

        if (sp == NULL) {
            api_reply_resp_error(x->c, r, status, msg, "");
            return;
        }
        *sp = '\0';
        api_reply_resp_error(x->c, r, status, msg, sp + 1);
        return;
    }
    api_reply_resp_error(x->c, r, status, code, msg);
}

void
api_resp_put_bulk(struct sbuf *b, const char *s, size_t len)
{
    sbuf_printf(b, "$%zu\r\n", len);
    sbuf_append(b, s, len);
    sbuf_append(b, "\r\n", 2);
}

void
api_resp_put_str(struct sbuf *b, const char *s)
{
    api_resp_put_bulk(b, s, strlen(s));
}

/* A map of n pairs: RESP3's '%', or a flat array of 2n in RESP2. */
void
api_resp_put_map(struct api_resp_ctx *x, struct sbuf *b, size_t n)
{
    if (x->sess->proto == 3)
        sbuf_printf(b, "%%%zu\r\n", n);
    else
        sbuf_printf(b, "*%zu\r\n", 2 * n);
}

/* Text for humans: RESP3's verbatim string, or a bulk string. */
void
api_resp_put_text(struct api_resp_ctx *x, struct sbuf *b, const char *s, size_t len)
{
    if (x->sess->proto == 3) {
        sbuf_printf(b, "=%zu\r\ntxt:", len + 4);
        sbuf_append(b, s, len);
        sbuf_append(b, "\r\n", 2);
    } else {
        api_resp_put_bulk(b, s, len);
    }
}

void
api_resp_reply_sbuf(struct api_resp_ctx *x, struct sbuf *b)
{
    api_resp_reply_raw(x, b->p != NULL ? b->p : "", b->len);
    sbuf_free(b);
}

/* ---- arguments ---- */

int
api_resp_arg_is(const struct resp_cmd *cmd, size_t i, const char *s)
{
    size_t n = strlen(s);

    return i < cmd->argc && cmd->argl[i] == n &&
           strncasecmp(cmd->argv[i], s, n) == 0;
}

/* An argument for an error message: printable ASCII, at most 64 bytes. */
void
api_resp_arg_show(const struct resp_cmd *cmd, size_t i, char *out, size_t cap)
{
    size_t n = 0;

    for (size_t k = 0; k < cmd->argl[i] && n + 1 < cap && k < 64; k++) {
        char ch = cmd->argv[i][k];
        out[n++] = ch >= 0x20 && ch < 0x7f && ch != '\'' ? ch : '?';
    }
    out[n] = '\0';
}

static void
reply_arity(struct api_resp_ctx *x)
{
    char name[72];

    api_resp_arg_show(x->cmd, 0, name, sizeof name);
    for (char *p = name; *p != '\0'; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    api_resp_reply_error(x, R_RESP, 400, NULL,
                     "ERR wrong number of arguments for '%s' command", name);
}

/* The count argument i (default 1 when absent) in [1, max]; -1 after
 * answering. */
static int64_t
arg_count(struct api_resp_ctx *x, enum route r, size_t i, int64_t max)
{
    int64_t n;

    if (i >= x->cmd->argc)
        return 1;
    if (util_parse_i64(x->cmd->argv[i], x->cmd->argl[i], 0, &n) == 0 &&
        n >= 1 && n <= max)
        return n;
    api_resp_reply_error(x, r, 400, "invalid_count",
                     "count must be an integer from 1 to %lld", (long long)max);
    return -1;
}

/* The encoding argument i (dec when absent: any case) into *enc; -1 after
 * answering. */
static int
arg_enc(struct api_resp_ctx *x, enum route r, size_t i, enum idstr_enc *enc)
{
    char low[8];
    size_t len;

    *enc = IDSTR_DEC;
    if (i >= x->cmd->argc)
        return 0;
    len = x->cmd->argl[i];
    if (len < sizeof low) {
        for (size_t k = 0; k < len; k++) {
            char ch = x->cmd->argv[i][k];
            low[k] = (char)(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
        }
        if (idstr_enc_parse(low, len, enc) == 0)
            return 0;
    }
    api_resp_reply_error(x, r, 400, "invalid_encoding",
                         "encoding must be dec, base62 or base32");
    return -1;
}

/* The token check of the ID commands (auth.h); 1 if answered. */
static int
id_denied(struct api_resp_ctx *x, enum route r, const char *scope)
{
    int rc;

    if (x->a->auth == NULL)
        return 0;
    if (x->sess->token_len == 0 && http_conn_peer_name(x->c) != NULL)
        rc = auth_check_cert(x->a->auth, scope, http_conn_peer_name(x->c));
    else
        rc = auth_check(x->a->auth, scope,
                        x->sess->token_len ? x->sess->token : NULL,
                        x->sess->token_len);
    if (rc == 401)
        api_resp_reply_error(x, r, 401, "noauth",
                         "this command needs a token: AUTH <token>");
    else if (rc == 403)
        api_resp_reply_error(x, r, 403, "noperm", "the token is not valid for %s",
                         scope);
    return rc != 0;
}

/* After MULTI the arguments are only checked (api_resp_internal.h): 1 then,
 * with the IDs the command would take. */
static int
checked_only(struct api_resp_ctx *x, int64_t n)
{
    if (!x->check)
        return 0;
    x->ids = n;
    return 1;
}

/* ---- ID commands ---- */

/* INCR <biz_tag>, INCRBY <biz_tag> 1 (what client libraries send for
 * incr()) and LEAF.SEGMENT <biz_tag> [count [encoding]]. */
static void
cmd_segment(struct api_resp_ctx *x, int incr)
{
    const struct resp_cmd *cmd = x->cmd;
    char tag[TAG_MAX + 1];
    size_t len = cmd->argl[1];
    int64_t n = 1;
    enum idstr_enc enc = IDSTR_DEC;

    if (incr && cmd->argc == 3 && !api_resp_arg_is(cmd, 2, "1")) {
        /* Redis's INCRBY k n promises the n values below its answer; a
         * segment's IDs need not be contiguous, so say what to use. */
        api_resp_reply_error(x, R_SEGMENT, 400, "invalid_increment",
                         "INCRBY takes only 1 here: leafd's IDs are unique and "
                         "increasing but not contiguous; for n IDs use LEAF.SEGMENT "
                         "<biz_tag> <n>");
        return;
    }
    if (api_segment_disabled(x->a, x->c, R_SEGMENT))
        return;
    if (api_tag_arg(x->c, R_SEGMENT, cmd->argv[1], len, API_TAG_ARG, tag) < 0)
        return;
    if (!incr && ((n = arg_count(x, R_SEGMENT, 2, x->a->cfg->count_max)) < 0 ||
                  arg_enc(x, R_SEGMENT, 3, &enc) < 0))
        return;
    if (!x->req->retry && !x->req->timed_out && id_denied(x, R_SEGMENT, tag))
        return;
    if (checked_only(x, n))
        return;
    api_serve_segment(x->a, x->c, x->req, R_SEGMENT, tag, len, n, enc,
                      incr ? &api_writer_resp_int : &api_writer_resp);
}

/* LEAF.SNOWFLAKE [count [encoding]] */
static void
cmd_snowflake(struct api_resp_ctx *x)
{
    int64_t n;
    enum idstr_enc enc;

    if (api_sf_disabled(x->a, x->c, R_SNOWFLAKE))
        return;
    if ((n = arg_count(x, R_SNOWFLAKE, 1, x->a->cfg->sf_count_max)) < 0 ||
        arg_enc(x, R_SNOWFLAKE, 2, &enc) < 0)
        return;
    if (!x->req->retry && !x->req->timed_out &&
        id_denied(x, R_SNOWFLAKE, "@snowflake"))
        return;
    if (checked_only(x, n))
        return;
    api_serve_snowflake(x->a, x->c, x->req, R_SNOWFLAKE, n, enc, &api_writer_resp);
}

static void
cmd_id128(struct api_resp_ctx *x, enum route r)
{
    int64_t n = arg_count(x, r, 1, r == R_UUID ? x->a->cfg->uuid_count_max
                                                : x->a->cfg->ulid_count_max);

    if (n < 0 || checked_only(x, n))
        return;
    api_serve_id128(x->a, x->c, r, n, &api_writer_resp);
}

/* LEAF.SERIAL <code> [count] (api_serial.c: the same serials, waits and
 * refusals as GET /serial/<code>; token scope @serial:<code>). */
static void
cmd_serial(struct api_resp_ctx *x)
{
    const struct resp_cmd *cmd = x->cmd;
    char code[SERIAL_CODE_MAX + 1];
    size_t len = cmd->argl[1];
    long i;
    int64_t n;

    if (len == 0 || len > SERIAL_CODE_MAX ||
        strspn(cmd->argv[1], "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
               "0123456789_-") < len) {
        api_resp_reply_error(x, R_SERIAL, 400, "invalid_serial_code",
                         "a serial code is 1 to %d characters of [A-Za-z0-9_-]",
                         SERIAL_CODE_MAX);
        return;
    }
    memcpy(code, cmd->argv[1], len);
    code[len] = '\0';
    i = x->a->serials != NULL ? serials_find(x->a->serials, code, len) : -1;
    if (i < 0) {
        api_resp_reply_error(x, R_SERIAL, 404, "unknown_serial_code",
                         "no serial definition for code '%s' (serial.%s.* in the "
                         "config file)", code, code);
        return;
    }
    if ((n = arg_count(x, R_SERIAL, 2, x->a->cfg->serial_count_max)) < 0)
        return;
    if (!x->req->retry && !x->req->timed_out) {
        char scope[8 + SERIAL_CODE_MAX + 1];

        snprintf(scope, sizeof scope, "@serial:%s", code);
        if (id_denied(x, R_SERIAL, scope))
            return;
    }
    if (checked_only(x, n))
        return;
    api_serve_serial(x->a, x->c, x->req, (size_t)i, n, &api_writer_resp);
}

static void
cmd_decode(struct api_resp_ctx *x)
{
    struct sbuf b = { 0 }, out = { 0 };
    char *cause = NULL;

    if (decode_any(x->a->cfg, x->a->sf, x->cmd->argv[1], x->cmd->argl[1], &b,
                   &cause) == -1) {
        api_resp_reply_error(x, R_DECODE, 400, "invalid_id", "%s",
                         cause != NULL ? cause : "not an ID");
        free(cause);
        sbuf_free(&b);
        return;
    }
    api_resp_put_bulk(&out, b.p, b.len);
    sbuf_free(&b);
    api_reply_resp(x->c, R_DECODE, out.p, out.len, 0);
    sbuf_free(&out);
}

/* ---- connection commands ---- */

static void
cmd_ping(struct api_resp_ctx *x)
{
    struct sbuf b = { 0 };

    if (x->cmd->argc == 1) {
        api_resp_reply_str(x, "+PONG\r\n");
        return;
    }
    api_resp_put_bulk(&b, x->cmd->argv[1], x->cmd->argl[1]);
    api_resp_reply_sbuf(x, &b);
}

static void
cmd_echo(struct api_resp_ctx *x)
{
    struct sbuf b = { 0 };

    api_resp_put_bulk(&b, x->cmd->argv[1], x->cmd->argl[1]);
    api_resp_reply_sbuf(x, &b);
}

static void
cmd_quit(struct api_resp_ctx *x)
{
    api_reply_resp(x->c, R_RESP, "+OK\r\n", 5, 1);
}

/* Check token and remember it; returns 0, or -1 after answering. */
static int
auth_set(struct api_resp_ctx *x, const char *tok, size_t len)
{
    const struct config *cfg = x->a->cfg;
    int admin = cfg->admin_token[0] != '\0' &&
                auth_equal(tok, len, cfg->admin_token, strlen(cfg->admin_token));
    int known = admin;

    if (x->a->auth == NULL && cfg->admin_token[0] == '\0') {
        api_resp_reply_error(x, R_RESP, 400, NULL, "ERR AUTH <token> called, but this "
                         "leafd has no tokens (auth.tokens_file and admin.token are "
                         "unset): every command is open");
        return -1;
    }
    /* A token the tokens file lists, with any scope. */
    if (!known && x->a->auth != NULL && len <= AUTH_TOKEN_MAX)
        known = auth_known(x->a->auth, tok, len);
    if (!known) {
        api_resp_reply_error(x, R_RESP, 403, NULL,
                         "WRONGPASS invalid token: neither in auth.tokens_file nor "
                         "the admin token");
        return -1;
    }
    memcpy(x->sess->token, tok, len);
    x->sess->token_len = (unsigned short)len;
    x->sess->admin = (unsigned char)admin;
    return 0;
}

static void
cmd_auth(struct api_resp_ctx *x)
{
    size_t i = x->cmd->argc == 3 ? 2 : 1;     /* AUTH [user] token */

    if (auth_set(x, x->cmd->argv[i], x->cmd->argl[i]) == 0)
        api_resp_reply_str(x, "+OK\r\n");
}

static int
set_name(struct api_resp_ctx *x, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] <= ' ' || s[i] > '~') {
            api_resp_reply_error(x, R_RESP, 400, NULL, "ERR Client names cannot contain "
                             "spaces, newlines or special characters.");
            return -1;
        }
    if (len > API_RESP_NAME_MAX) {
        api_resp_reply_error(x, R_RESP, 400, NULL, "ERR client name longer than %d bytes",
                         API_RESP_NAME_MAX);
        return -1;
    }
    memcpy(x->sess->name, s, len);
    x->sess->name_len = (unsigned short)len;
    return 0;
}

/* HELLO [protover [AUTH user token] [SETNAME name]] */
static void
cmd_hello(struct api_resp_ctx *x)
{
    const struct resp_cmd *cmd = x->cmd;
    struct http_conn_info ci;
    struct sbuf b = { 0 };
    int64_t ver = 0;
    size_t i;

    if (cmd->argc >= 2) {
        if (util_parse_i64(cmd->argv[1], cmd->argl[1], 0, &ver) == -1) {
            api_resp_reply_error(x, R_RESP, 400, NULL,
                             "ERR Protocol version is not an integer or out "
                             "of range");
            return;
        }
        if (ver != 2 && ver != 3) {
            api_resp_reply_error(x, R_RESP, 400, NULL,
                             "NOPROTO unsupported protocol version");
            return;
        }
    }
    for (i = 2; i < cmd->argc; i++) {
        if (api_resp_arg_is(cmd, i, "AUTH") && i + 2 < cmd->argc) {
            if (auth_set(x, cmd->argv[i + 2], cmd->argl[i + 2]) == -1)
                return;
            i += 2;
        } else if (api_resp_arg_is(cmd, i, "SETNAME") && i + 1 < cmd->argc) {
            if (set_name(x, cmd->argv[i + 1], cmd->argl[i + 1]) == -1)
                return;
            i++;
        } else {
            char a[72];

            api_resp_arg_show(cmd, i, a, sizeof a);
            api_resp_reply_error(x, R_RESP, 400, NULL,
                             "ERR Syntax error in HELLO option '%s'", a);
            return;
        }
    }
    if (ver != 0)
        x->sess->proto = (unsigned char)ver;
    http_conn_info(x->c, &ci);
    api_resp_put_map(x, &b, 7);
    api_resp_put_str(&b, "server");
    api_resp_put_str(&b, "leafd");
    api_resp_put_str(&b, "version");
    api_resp_put_str(&b, API_RESP_REDIS_VERSION);
    api_resp_put_str(&b, "proto");
    sbuf_printf(&b, ":%d\r\n", x->sess->proto == 3 ? 3 : 2);
    api_resp_put_str(&b, "id");
    sbuf_printf(&b, ":%llu\r\n", (unsigned long long)ci.id);
    api_resp_put_str(&b, "mode");
    api_resp_put_str(&b, "standalone");
    api_resp_put_str(&b, "role");
    api_resp_put_str(&b, "master");
    api_resp_put_str(&b, "modules");
    sbuf_puts(&b, "*0\r\n");
    api_resp_reply_sbuf(x, &b);
}

static void
cmd_select(struct api_resp_ctx *x)
{
    if (api_resp_arg_is(x->cmd, 1, "0"))
        api_resp_reply_str(x, "+OK\r\n");
    else
        api_resp_reply_error(x, R_RESP, 400, NULL, "ERR DB index is out of range (leafd "
                         "has only database 0; biz_tags are its keys)");
}

static void
client_info_line(struct api_resp_ctx *x, struct sbuf *b)
{
    struct http_conn_info ci;

    http_conn_info(x->c, &ci);
    sbuf_printf(b, "id=%llu addr=%s laddr=%s fd=%d name=%.*s age=%lld db=0 "
                "resp=%d lib=leafd\n", (unsigned long long)ci.id, ci.addr,
                ci.laddr, ci.fd, (int)x->sess->name_len, x->sess->name,
                (long long)ci.age_s, x->sess->proto == 3 ? 3 : 2);
}

static void
cmd_client(struct api_resp_ctx *x)
{
    const struct resp_cmd *cmd = x->cmd;
    struct sbuf b = { 0 }, line = { 0 };

    if (api_resp_arg_is(cmd, 1, "SETNAME") && cmd->argc == 3) {
        if (set_name(x, cmd->argv[2], cmd->argl[2]) == 0)
            api_resp_reply_str(x, "+OK\r\n");
    } else if (api_resp_arg_is(cmd, 1, "GETNAME") && cmd->argc == 2) {
        if (x->sess->name_len == 0) {
            api_resp_reply_str(x, x->sess->proto == 3 ? "_\r\n" : "$-1\r\n");
            return;
        }
        api_resp_put_bulk(&b, x->sess->name, x->sess->name_len);
        api_resp_reply_sbuf(x, &b);
    } else if (api_resp_arg_is(cmd, 1, "ID") && cmd->argc == 2) {
        struct http_conn_info ci;

        http_conn_info(x->c, &ci);
        sbuf_printf(&b, ":%llu\r\n", (unsigned long long)ci.id);
        api_resp_reply_sbuf(x, &b);
    } else if (api_resp_arg_is(cmd, 1, "INFO") && cmd->argc == 2) {
        client_info_line(x, &line);
        api_resp_put_text(x, &b, line.p, line.len);
        sbuf_free(&line);
        api_resp_reply_sbuf(x, &b);
    } else if (api_resp_arg_is(cmd, 1, "SETINFO") && cmd->argc == 4) {
        api_resp_reply_str(x, "+OK\r\n");          /* lib-name/lib-ver: accepted */
    } else {
        char a[72] = "";

        if (cmd->argc >= 2)
            api_resp_arg_show(cmd, 1, a, sizeof a);
        api_resp_reply_error(x, R_RESP, 400, NULL, "ERR unknown subcommand or wrong "
                         "number of arguments for 'CLIENT|%s': leafd knows SETNAME, "
                         "GETNAME, ID, INFO and SETINFO", a);
    }
}

static void
cmd_dbsize(struct api_resp_ctx *x)
{
    char out[32];
    int n = snprintf(out, sizeof out, ":%zu\r\n",
                     x->a->segs != NULL ? segments_count(x->a->segs) : (size_t)0);

    api_resp_reply_raw(x, out, (size_t)n);
}

/* CONFIG GET: leafd's configuration is not Redis's. It answers the two
 * keys redis-benchmark reads at start, truthfully for leafd (it keeps no
 * Redis snapshot or log: save "", appendonly "no"), and nothing else. */
static void
cmd_config(struct api_resp_ctx *x)
{
    struct sbuf b = { 0 };
    int save, aof;

    if (!api_resp_arg_is(x->cmd, 1, "GET") || x->cmd->argc != 3) {
        api_resp_reply_error(x, R_RESP, 400, NULL, "ERR leafd is configured by its file "
                         "(leafd --help); only CONFIG GET <parameter> is answered");
        return;
    }
    save = api_resp_arg_is(x->cmd, 2, "save");
    aof = api_resp_arg_is(x->cmd, 2, "appendonly");
    api_resp_put_map(x, &b, save || aof);
    if (save) {
        api_resp_put_str(&b, "save");
        api_resp_put_str(&b, "");
    } else if (aof) {
        api_resp_put_str(&b, "appendonly");
        api_resp_put_str(&b, "no");
    }
    api_resp_reply_sbuf(x, &b);
}

/* ---- the command table ---- */

static void cmd_incr(struct api_resp_ctx *x) { cmd_segment(x, 1); }
static void cmd_leaf_segment(struct api_resp_ctx *x) { cmd_segment(x, 0); }
static void cmd_uuid(struct api_resp_ctx *x) { cmd_id128(x, R_UUID); }
static void cmd_ulid(struct api_resp_ctx *x) { cmd_id128(x, R_ULID); }
static void cmd_command(struct api_resp_ctx *x);

static const struct api_resp_row commands[] = {
    { "incr", 2, 2, "write fast", 1, "leafd",
      "One segment ID of biz_tag, as an integer", "biz_tag", API_RESP_MCHECK, 0,
      cmd_incr },
    { "incrby", 3, 3, "write fast", 1, "leafd",
      "INCR, for clients whose incr() sends INCRBY <biz_tag> 1",
      "biz_tag increment", API_RESP_MCHECK, 0, cmd_incr },
    { "leaf.segment", -2, 4, "write fast", 1, "leafd",
      "count segment IDs of biz_tag (default 1), as numbers or strings "
      "(encoding dec, base62, base32)", "biz_tag [count [encoding]]",
      API_RESP_MCHECK, 0, cmd_leaf_segment },
    { "leaf.snowflake", -1, 3, "write fast", 0, "leafd",
      "count snowflake IDs (default 1), as numbers or strings (encoding dec, "
      "base62, base32)", "[count [encoding]]", API_RESP_MCHECK, 0,
      cmd_snowflake },
    { "leaf.uuid", -1, 2, "write fast", 0, "leafd",
      "count UUIDv7s (default 1)", "[count]", API_RESP_MCHECK, 0, cmd_uuid },
    { "leaf.ulid", -1, 2, "write fast", 0, "leafd",
      "count ULIDs (default 1)", "[count]", API_RESP_MCHECK, 0, cmd_ulid },
    { "leaf.serial", -2, 3, "write fast", 0, "leafd",
      "count business serial numbers of code (default 1)", "code [count]",
      API_RESP_MCHECK, 0, cmd_serial },
    { "leaf.decode", 2, 2, "readonly fast", 0, "leafd",
      "The parts of a snowflake ID, UUID, ULID or ID string, as JSON", "id",
      API_RESP_MQUEUE,
      2048, cmd_decode },
    { "ping", -1, 2, "fast", 0, "connection", "Returns PONG or the message",
      "[message]", API_RESP_MQUEUE, 0, cmd_ping },
    { "echo", 2, 2, "fast", 0, "connection", "Returns the message", "message",
      API_RESP_MQUEUE, 0, cmd_echo },
    { "quit", 1, 1, "fast", 0, "connection", "Closes the connection", "",
      API_RESP_MNOW, 0, cmd_quit },
    { "hello", -1, 0, "fast", 0, "connection",
      "Handshake: protocol 2 or 3, AUTH, SETNAME",
      "[protover [AUTH username token] [SETNAME name]]", API_RESP_MREFUSE, 0,
      cmd_hello },
    { "auth", -2, 3, "fast", 0, "connection",
      "A token of auth.tokens_file, or the admin token", "[username] token",
      API_RESP_MQUEUE, 0, cmd_auth },
    { "select", 2, 2, "fast", 0, "connection", "Only database 0 exists", "index",
      API_RESP_MQUEUE, 0, cmd_select },
    { "client", -2, 4, "fast", 0, "connection",
      "CLIENT SETNAME|GETNAME|ID|INFO|SETINFO", "subcommand [arg ...]",
      API_RESP_MQUEUE, 1024, cmd_client },
    { "info", -1, 0, "fast", 0, "server",
      "Sections: server clients memory persistence stats replication cpu "
      "segment snowflake keyspace (api_resp_info.c)", "[section ...]",
      API_RESP_MQUEUE, 8192, api_resp_cmd_info },
    { "command", -1, 0, "fast", 0, "server",
      "COMMAND, COMMAND COUNT|DOCS|INFO|LIST", "[subcommand [name ...]]",
      API_RESP_MQUEUE, 16384, cmd_command },
    { "dbsize", 1, 1, "readonly fast", 0, "server",
      "The number of biz_tags this node knows", "", API_RESP_MQUEUE, 0,
      cmd_dbsize },
    { "config", -2, 3, "fast", 0, "server",
      "CONFIG GET save|appendonly (leafd keeps no Redis data)",
      "subcommand parameter", API_RESP_MQUEUE, 0, cmd_config },
    { "multi", 1, 1, "fast", 0, "transactions",
      "Starts a transaction: commands are queued until EXEC", "",
      API_RESP_MNOW, 0, api_resp_cmd_multi },
    { "exec", 1, 1, "fast", 0, "transactions",
      "Runs the queued commands; their answers as an array", "",
      API_RESP_MNOW, 0, api_resp_cmd_exec },
    { "discard", 1, 1, "fast", 0, "transactions",
      "Drops the queued commands", "", API_RESP_MNOW, 0, api_resp_cmd_discard },
    { "watch", -2, 0, "fast", 0, "transactions",
      "OK: nothing a transaction can read of a biz_tag can change (docs/resp.md)",
      "key [key ...]", API_RESP_MNOW, 0, api_resp_cmd_watch },
    { "unwatch", 1, 1, "fast", 0, "transactions", "OK (see WATCH)", "",
      API_RESP_MQUEUE, 0, api_resp_cmd_unwatch },
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static const struct api_resp_row *
command_find(const char *name, size_t len)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strlen(commands[i].name) == len &&
            strncasecmp(commands[i].name, name, len) == 0)
            return &commands[i];
    return NULL;
}

/* One entry of COMMAND / COMMAND INFO (Redis 7's ten fields). */
static void
put_command_info(struct sbuf *b, const struct api_resp_row *rc)
{
    const char *f = rc->flags;
    size_t nflags = 1;

    for (const char *p = f; *p != '\0'; p++)
        nflags += *p == ' ';
    sbuf_puts(b, "*10\r\n");
    api_resp_put_str(b, rc->name);
    sbuf_printf(b, ":%d\r\n*%zu\r\n", rc->arity, nflags);
    while (*f != '\0') {
        size_t n = strcspn(f, " ");

        sbuf_printf(b, "+%.*s\r\n", (int)n, f);
        f += n + (f[n] == ' ');
    }
    sbuf_printf(b, ":%d\r\n:%d\r\n:%d\r\n", rc->first_key, rc->first_key,
                rc->first_key != 0);
    sbuf_puts(b, "*0\r\n*0\r\n*0\r\n*0\r\n");    /* acl, tips, keys, subs */
}

/* One entry of COMMAND DOCS: summary, since, group, arguments. */
static void
put_command_docs(struct api_resp_ctx *x, struct sbuf *b, const struct api_resp_row *rc)
{
    const char *a = rc->args;
    size_t nargs = 0;

    for (const char *p = a; *p != '\0'; p++)
        if ((p == a || p[-1] == ' ') && *p != ' ')
            nargs++;
    api_resp_put_str(b, rc->name);
    api_resp_put_map(x, b, 4);
    api_resp_put_str(b, "summary");
    api_resp_put_str(b, rc->summary);
    api_resp_put_str(b, "since");
    api_resp_put_str(b, "1.0.0");
    api_resp_put_str(b, "group");
    api_resp_put_str(b, rc->group);
    api_resp_put_str(b, "arguments");
    sbuf_printf(b, "*%zu\r\n", nargs);
    while (*a != '\0') {
        size_t n = strcspn(a, " ");
        int opt = a[0] == '[';

        api_resp_put_map(x, b, opt ? 3 : 2);
        api_resp_put_str(b, "name");
        api_resp_put_bulk(b, a + opt, n - (size_t)opt - (size_t)(opt && a[n - 1] == ']'));
        api_resp_put_str(b, "type");
        api_resp_put_str(b, "string");
        if (opt) {
            api_resp_put_str(b, "flags");
            sbuf_puts(b, "*1\r\n+optional\r\n");
        }
        a += n;
        while (*a == ' ')
            a++;
    }
}

static void
cmd_command(struct api_resp_ctx *x)
{
    const struct resp_cmd *cmd = x->cmd;
    struct sbuf b = { 0 };

    if (cmd->argc == 1) {
        sbuf_printf(&b, "*%zu\r\n", NCOMMANDS);
        for (size_t i = 0; i < NCOMMANDS; i++)
            put_command_info(&b, &commands[i]);
    } else if (api_resp_arg_is(cmd, 1, "COUNT") && cmd->argc == 2) {
        sbuf_printf(&b, ":%zu\r\n", NCOMMANDS);
    } else if (api_resp_arg_is(cmd, 1, "LIST") && cmd->argc == 2) {
        sbuf_printf(&b, "*%zu\r\n", NCOMMANDS);
        for (size_t i = 0; i < NCOMMANDS; i++)
            api_resp_put_str(&b, commands[i].name);
    } else if (api_resp_arg_is(cmd, 1, "INFO")) {
        sbuf_printf(&b, "*%zu\r\n", cmd->argc == 2 ? NCOMMANDS : cmd->argc - 2);
        for (size_t i = 2; i < cmd->argc || (cmd->argc == 2 && i - 2 < NCOMMANDS); i++) {
            const struct api_resp_row *rc = cmd->argc == 2 ? &commands[i - 2]
                : command_find(cmd->argv[i], cmd->argl[i]);

            if (rc != NULL)
                put_command_info(&b, rc);
            else
                sbuf_puts(&b, x->sess->proto == 3 ? "_\r\n" : "*-1\r\n");
        }
    } else if (api_resp_arg_is(cmd, 1, "DOCS")) {
        const struct api_resp_row *found[NCOMMANDS];
        size_t n = 0;

        for (size_t i = 0; i < NCOMMANDS; i++) {
            int want = cmd->argc == 2;

            for (size_t k = 2; k < cmd->argc && !want; k++)
                want = command_find(cmd->argv[k], cmd->argl[k]) == &commands[i];
            if (want)
                found[n++] = &commands[i];
        }
        api_resp_put_map(x, &b, n);
        for (size_t i = 0; i < n; i++)
            put_command_docs(x, &b, found[i]);
    } else {
        char a[72];

        api_resp_arg_show(cmd, 1, a, sizeof a);
        api_resp_reply_error(x, R_RESP, 400, NULL, "ERR unknown subcommand '%s'. Try "
                         "COMMAND, COMMAND COUNT, DOCS, INFO or LIST.", a);
        return;
    }
    api_resp_reply_sbuf(x, &b);
}

void
api_resp_command(struct api *a, struct http_conn *c, struct http_request *req)
{
    const struct resp_cmd *cmd = req->cmd;
    struct api_resp_ctx x = { a, c, req, cmd, http_conn_session(c), 0, 0 };
    const struct api_resp_row *rc;

    assert(cmd->argc >= 1 && x.sess != NULL);
    rc = command_find(cmd->argv[0], cmd->argl[0]);
    if (rc == NULL) {
        char name[72], args[160] = "";
        size_t n = 0;

        api_resp_arg_show(cmd, 0, name, sizeof name);
        for (size_t i = 1; i < cmd->argc && n + 24 < sizeof args; i++) {
            char one[20];

            api_resp_arg_show(cmd, i, one, sizeof one);
            n += (size_t)snprintf(args + n, sizeof args - n, "'%s' ", one);
        }
        api_resp_reply_error(&x, R_RESP, 400, NULL,
                         "ERR unknown command '%s', with args beginning with: %s",
                         name, args);
        api_resp_multi_refuse(&x);
        return;
    }
    if ((rc->arity > 0 && cmd->argc != (size_t)rc->arity) ||
        (rc->arity < 0 && cmd->argc < (size_t)-rc->arity) ||
        (rc->max_args > 0 && cmd->argc > (size_t)rc->max_args)) {
        reply_arity(&x);
        api_resp_multi_refuse(&x);
        return;
    }
    if (x.sess->multi != NULL && rc->multi != API_RESP_MNOW) {
        api_resp_multi_queue(&x, rc);
        return;
    }
    rc->fn(&x);
}
