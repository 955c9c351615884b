/* api_memcache.c: leafd's commands over memcached's text and binary
 * protocols, so that any memcached client (and katsubushi's users) can take
 * IDs with `get`.
 *
 * DESIGN
 *
 * The memcached listener is part of the HTTP front end (http.h: same I/O
 * threads, buffers, limits, parking, stop); this file only answers a parsed
 * call (req->mc). The layer calls it once per key of a get, in order, so a
 * key is one ID request: it calls the same handlers as the HTTP routes
 * (api_serve_*) with the memcached writer (api_writer_mc.c, which writes a
 * binary request's answers with api_writer_mcbin.c), with the same
 * IDs, waits (a key that waits for a segment parks, and the keys and
 * commands behind it wait in order) and refusals. The writer writes the
 * answers and errors for the key the request names (req->mc_key).
 *
 *   get|gets <key>+   one "VALUE <key> 0 <bytes>[ <cas>]" per key, then END:
 *                     <biz_tag> a segment ID, @snowflake a snowflake ID,
 *                     @uuid a UUIDv7, @ulid a ULID; gets' cas is the ID
 *                     (the first 64 bits of a UUID or ULID); <biz_tag>/base62
 *                     or @snowflake/base32 the ID as a string (idstr.h)
 *   version (MC_PROTOCOL_VERSION), stats [settings|items|slabs|sizes|conns],
 *   quit
 *   set add replace append prepend cas ms incr decr touch delete gat gats
 *   mg md ma mn me verbosity flush_all: refused (SERVER_ERROR not_supported)
 *
 * A key that gets no ID ends the get with "CLIENT_ERROR <code> <message>"
 * (the client's mistake: an unknown or invalid tag, a mode that is off, a
 * key the tokens protect) or "SERVER_ERROR <code> <message>" (retry later:
 * ids_exhausted and the other 503s), in place of its VALUE and the END: a
 * memcached client reads an error line as the end of a get's answer. The
 * keys answered before it have had their IDs. A refused command with
 * noreply is answered all the same and the connection closed: the client
 * reads no answer, so it would take this one for its next command's.
 *
 * Binary frames (req->mc->binary) are the same commands, one key per get:
 * GET GETQ GETK GETKQ as get, STAT as stats (its key the group), VERSION,
 * NOOP, QUIT and QUITQ; every storage opcode and its quiet form is refused
 * (not supported, 0x0083) and the connection kept. The writers turn each
 * answer and refusal into the protocol's form (api_writer.h,
 * api_mcbin_status: the status of each refusal).
 *
 * Tokens. memcached's protocols carry none (SASL is not served). With
 * auth.tokens_file, the listener acts with memcache.token (a token of that
 * file) when it is set, and so serves that token's scopes; without it,
 * every key a token protects is refused (CLIENT_ERROR noauth, binary
 * 0x0008), and never given an ID.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_handlers.h"
#include "auth.h"
#include "config.h"
#include "decode.h"
#include "mc_parse.h"
#include "util.h"
#include "version.h"

/* The memcached version a "version" answers: clients parse it as
 * <major>.<minor>.<micro> (libmemcached refuses a major of 0) to tell which
 * commands a server has; leafd has those of memcached 1.4's text protocol
 * that read (get, gets), so it says 1.4.0, then its own version. */
#define MC_PROTOCOL_VERSION "1.4.0"

struct mc_ctx {
    struct api           *a;
    struct http_conn     *c;
    struct http_request  *req;
    const struct mc_cmd  *cmd;
    const char           *key;          /* MC_GET: the key answered */
    size_t                klen;
};

static int
key_is(const struct mc_ctx *x, const char *s)
{
    return x->klen == strlen(s) && memcmp(x->key, s, x->klen) == 0;
}

/* The token check of a key's scope; 1 if answered. */
static int
key_denied(struct mc_ctx *x, enum route r, const char *scope)
{
    const char *tok = x->a->cfg->mc_token;
    char msg[400];

    if (x->a->auth == NULL)
        return 0;
    if (auth_check(x->a->auth, scope, tok[0] ? tok : NULL, strlen(tok)) == 0)
        return 0;
    /* over TLS, a verified client certificate's cert:CN= line (docs/tls.md) */
    if (http_conn_peer_name(x->c) != NULL &&
        auth_check_cert(x->a->auth, scope, http_conn_peer_name(x->c)) == 0)
        return 0;
    snprintf(msg, sizeof msg, "%s needs a token and memcached's protocol "
             "carries none; %s", scope, tok[0] ?
             "memcache.token does not give it" :
             "take it over HTTP, RESP (AUTH) or gRPC with a token, set "
             "memcache.token, or connect over TLS with a client certificate "
             "a cert:CN= line gives it");
    api_mc_reply_error(x->c, r, 401, "noauth", msg);
    return 1;
}

/* get @decode/<id>: the JSON the HTTP decode routes give for a decimal
 * snowflake ID or an ID string (a segment string's number and tag, a
 * snowflake's fields), as the key's VALUE; not an ID: CLIENT_ERROR
 * invalid_id. No scope, as over HTTP. */
static void
cmd_decode(struct mc_ctx *x)
{
    struct sbuf b = { 0 };
    char *cause = NULL;

    if (decode_any(x->a->cfg, x->a->sf, x->key + 8, x->klen - 8, &b,
                   &cause) == -1) {
        api_mc_reply_error(x->c, R_DECODE, 400, "invalid_id",
                           cause != NULL ? cause : "not an ID");
        free(cause);
    } else if (b.len > MC_VALUE_MAX) {
        api_mc_reply_error(x->c, R_DECODE, 500, "internal",
                           "the decoded ID's JSON is over the value limit");
    } else {
        api_mc_reply_text(x->c, R_DECODE, b.p, b.len);
    }
    sbuf_free(&b);
}

/* get/gets: one key, one ID. "<key>/<encoding>" (dec, base62, base32: '/'
 * is never in a biz_tag) asks for a segment or snowflake ID as a string. */
static void
cmd_get(struct mc_ctx *x)
{
    struct api *a = x->a;
    int first = !x->req->retry && !x->req->timed_out;
    char tag[TAG_MAX + 1];
    enum idstr_enc enc = IDSTR_DEC;
    const char *slash;

    x->key = x->req->mc_line + x->cmd->off[x->req->mc_key];
    x->klen = x->cmd->len[x->req->mc_key];
    /* After the last '/', an encoding; any other suffix leaves the key
     * whole, which is no biz_tag (invalid_biz_tag names the forms). */
    slash = memrchr(x->key, '/', x->klen);
    if (slash != NULL &&
        idstr_enc_parse(slash + 1, x->klen - (size_t)(slash + 1 - x->key), &enc) == 0)
        x->klen = (size_t)(slash - x->key);
    else
        slash = NULL;
    if (slash == NULL && x->klen > 8 && memcmp(x->key, "@decode/", 8) == 0) {
        cmd_decode(x);
        return;
    }
    if (key_is(x, "@snowflake")) {
        if (api_sf_disabled(a, x->c, R_SNOWFLAKE) ||
            (first && key_denied(x, R_SNOWFLAKE, "@snowflake")))
            return;
        api_serve_snowflake(a, x->c, x->req, R_SNOWFLAKE, 1, enc, &api_writer_mc);
        return;
    }
    if (slash != NULL && (key_is(x, "@uuid") || key_is(x, "@ulid"))) {
        api_mc_reply_error(x->c, R_MEMCACHE, 400, "invalid_encoding",
                           "UUIDs and ULIDs are strings already: no encoding");
        return;
    }
    if (key_is(x, "@uuid") || key_is(x, "@ulid")) {
        api_serve_id128(a, x->c, key_is(x, "@uuid") ? R_UUID : R_ULID, 1,
                        &api_writer_mc);
        return;
    }
    if (api_tag_arg(x->c, R_SEGMENT, x->key, x->klen, API_TAG_KEY, tag) < 0 ||
        api_segment_disabled(a, x->c, R_SEGMENT))
        return;
    if (first && key_denied(x, R_SEGMENT, tag))
        return;
    api_serve_segment(a, x->c, x->req, R_SEGMENT, tag, x->klen, 1, enc,
                      &api_writer_mc);
}

static int
arg_is(const struct mc_ctx *x, size_t i, const char *s)
{
    return i < x->cmd->ntok && x->cmd->len[i] == strlen(s) &&
           memcmp(x->req->mc_line + x->cmd->off[i], s, x->cmd->len[i]) == 0;
}

/* stats [group]: leafd's own numbers under memcached's names. */
static void
cmd_stats(struct mc_ctx *x)
{
    struct api *a = x->a;
    struct sbuf b = { 0 };
    struct http_stats hs = { 0 };
    uint64_t hits = 0, misses = 0;
    int64_t now = util_wall_ms();

    if (arg_is(x, 1, "settings")) {
        sbuf_printf(&b, "STAT maxconns %lld\r\nSTAT tcpport %lld\r\n"
                    "STAT num_threads %d\r\nSTAT item_size_max 0\r\n"
                    "STAT binding_protocol auto-negotiate\r\n"
                    "STAT cas_enabled yes\r\n",
                    (long long)a->cfg->max_connections, (long long)a->cfg->mc_port,
                    a->nthreads);
    } else if (arg_is(x, 1, "items") || arg_is(x, 1, "slabs") ||
               arg_is(x, 1, "sizes") || arg_is(x, 1, "conns")) {
        /* leafd stores no item: these groups are empty. */
    } else if (x->cmd->ntok > 1) {
        api_mc_reply_error(x->c, R_MEMCACHE, 400, "unknown_stats_group",
                           "leafd answers stats, stats settings, items, "
                           "slabs, sizes and conns");
        return;
    } else {
        if (a->server != NULL)
            http_server_stats(a->server, &hs);
        for (int i = 0; i < a->nthreads; i++) {
            hits += atomic_load_explicit(&a->threads[i].mc_hits,
                                         memory_order_relaxed);
            misses += atomic_load_explicit(&a->threads[i].mc_misses,
                                           memory_order_relaxed);
        }
        sbuf_printf(&b, "STAT pid %ld\r\nSTAT uptime %lld\r\nSTAT time %lld\r\n"
                    "STAT version " MC_PROTOCOL_VERSION "\r\nSTAT leafd_version %s\r\n"
                    "STAT pointer_size %d\r\n"
                    "STAT threads %d\r\nSTAT curr_connections %llu\r\n"
                    "STAT total_connections %llu\r\n"
                    "STAT rejected_connections %llu\r\n"
                    "STAT cmd_get %llu\r\nSTAT get_hits %llu\r\n"
                    "STAT get_misses %llu\r\nSTAT curr_items 0\r\n"
                    "STAT leafd_commands %llu\r\nSTAT leafd_parked %llu\r\n"
                    "STAT leafd_connections_all_protocols %llu\r\n",
                    (long)getpid(), (long long)((now - a->started_ms) / 1000),
                    (long long)(now / 1000), LEAFD_VERSION,
                    (int)(8 * sizeof(void *)), a->nthreads,
                    (unsigned long long)hs.mc_open,
                    (unsigned long long)hs.mc_total,
                    (unsigned long long)hs.connections_rejected,
                    (unsigned long long)(hits + misses),
                    (unsigned long long)hits, (unsigned long long)misses,
                    (unsigned long long)hs.mc_commands,
                    (unsigned long long)hs.requests_parked,
                    (unsigned long long)hs.connections_open);
    }
    api_mc_reply_stats(x->c, b.p, b.len);
    sbuf_free(&b);
}

static void
cmd_refused(struct mc_ctx *x)
{
    char msg[200];

    snprintf(msg, sizeof msg, "leafd hands out IDs and stores nothing: %s is "
             "not served; take an ID with get <biz_tag> or get @snowflake",
             x->cmd->name);
    api_mc_reply_error(x->c, R_MEMCACHE, 503, "not_supported", msg);
}

void
api_mc_command(struct api *a, struct http_conn *c, struct http_request *req)
{
    struct mc_ctx x = { a, c, req, req->mc, NULL, 0 };

    switch (x.cmd->kind) {
    case MC_GET:
        cmd_get(&x);
        break;
    case MC_VERSION:
        api_mc_reply_version(c, MC_PROTOCOL_VERSION " leafd-" LEAFD_VERSION);
        break;
    case MC_STATS:
        cmd_stats(&x);
        break;
    case MC_QUIT:
        api_mc_reply_quit(c);
        break;
    case MC_NOOP:
        api_mc_reply_noop(c);
        break;
    case MC_STORE:
    case MC_REFUSED:
    case MC_VERBOSITY:
    case MC_FLUSH_ALL:
        cmd_refused(&x);
        break;
    case MC_BAD:
        api_mc_reply_error(c, R_MEMCACHE, 400, "bad_command", x.cmd->err);
        break;
    case MC_UNKNOWN:
        api_mc_reply_unknown(c);
        break;
    }
}
