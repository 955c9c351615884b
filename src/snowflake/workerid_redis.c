/* workerid_redis.c: the Redis store of worker IDs (see workerid_redis.h):
 * three Lua scripts over hiredis' blocking client, reconnecting after any
 * I/O error. */
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "log.h"
#include "util.h"
#include "workerid_redis.h"

struct wredis {
    struct workerid_redis_url u;
    char          *prefix;
    int64_t        timeout_ms;  /* a fence write in service, a release */
    int64_t        op_ms;       /* each command of a claim (connect, AUTH,
                                   SELECT, INFO, EVAL) and of the start's
                                   clock-check write: starting */
    int64_t        want_ms;     /* the call's timeout: one of the two */
    int64_t        cur_ms;      /* the connection's timeout now */
    redisContext  *c;
    struct wlease_note note;    /* the last claim's epoch gate: why */
    int64_t        held;        /* the worker ID last claimed, -1 none */
    int64_t        held_hb;     /* the hb last written for it (the store's
                                   clock), 0 none */
    struct wlease_rec rec;      /* the hash's "zones": claimed, to write */
};

/* ARGV: prefix, identity, nonce, prev_nonce, taker_now_ms, lease_ms,
 * max_worker, want (-1: any), unknown_gate_ms, server (wr_server's
 * marker), uptime_ms, alias (the identity's former name, whose wanted ID
 * is its own; "" none), min_worker (IDs are claimed in min..max only: the
 * identity's own, the lowest free; "in use" counts that range). Returns {worker, fence, epoch, hb} (epoch -1
 * unless the ID had no hash; hb the store's clock written as its
 * heartbeat) or {-2, hb} (a live twin) or {-1, in use} or {-5, 0} (the
 * epoch key is not a number) or {-6, until} (nothing free before the
 * store's clock `until`: a hash older than the store's restart); for a
 * wanted ID also {-3, hb, identity} (held live by that identity) or {-4,
 * fence} (its fence not below the taker's clock).
 * Free: no hash, released, or lease expired on the store's clock; and in
 * every case the fence below the taker's clock. A wanted ID that this
 * identity holds is taken back whatever its lease; the identity's other ID,
 * if any, is released (its fence kept), as is its ID outside minw..maxw
 * (worker_bits lowered, the range moved) when it takes one within.
 * P epoch is the store's clock when a claim first found it missing: every
 * hash a node held before that was written before it, so an ID with no
 * hash (never used, or lost with the data) gates on epoch +
 * unknown_gate_ms, past any fence such a node held.
 * P server's since (WR_SINCE_LUA) is when the store last went back in time:
 * a hash whose hb is older may be a copy from the past (a snapshot, a
 * lagging replica) of one a live node has rewritten since; such a hash is
 * free only a lease after since, released or not (a live holder writes
 * within it, or has stopped), and is taken gated on since +
 * unknown_gate_ms, as an ID with no hash is (its holder confirmed every
 * fence it issued under before since). TIME before writes is fine under
 * effects replication (the only kind since Redis 7). */
/* Sets `since` from P server (ARGV[10], [11] in the claim; [3], [4] in
 * the fence script via the S and U names): a different server marker means
 * the store restarted or failed over since the last write, so its data may
 * be older than what nodes wrote: since = now. No marker (a store from
 * before it, or wiped): since = when the server started, or 0 when P epoch
 * is 0 (the operator's word that nothing was issued from this store). */
#define WR_SINCE_LUA(S, U) \
"local srv = redis.call('HMGET', p .. 'server', 'id', 'since')\n" \
"local since = tonumber(srv[2])\n" \
"if srv[1] ~= " S " or not since then\n" \
"  if srv[1] then since = snow\n" \
"  elseif redis.call('GET', p .. 'epoch') == '0' then since = 0\n" \
"  else since = snow - tonumber(" U ") end\n" \
"  redis.call('HSET', p .. 'server', 'id', " S ", 'since', " \
"string.format('%.0f', since))\n" \
"end\n"

static const char wr_claim_lua[] =
"local p, ident, nonce, prev = ARGV[1], ARGV[2], ARGV[3], ARGV[4]\n"
"local now, lease, maxw = tonumber(ARGV[5]), tonumber(ARGV[6]), "
"tonumber(ARGV[7])\n"
"local minw = tonumber(ARGV[13])\n"
"local t = redis.call('TIME')\n"
"local snow = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
"local function fmt(x) return string.format('%.0f', x) end\n"
"redis.call('SET', p .. 'epoch', fmt(snow), 'NX')\n"
"local epoch = tonumber(redis.call('GET', p .. 'epoch'))\n"
"if not epoch then return {-5, 0} end\n"
"local mine = tonumber(redis.call('GET', p .. 'id:' .. ident))\n"
WR_SINCE_LUA("ARGV[10]", "ARGV[11]")
"local unknown = math.max(epoch, since) + tonumber(ARGV[9])\n"
"local function take(id, fence, hashless, old)\n"
"  if (hashless or old) and unknown > fence then fence = unknown end\n"
"  if mine and (mine < minw or mine > maxw) and "
"redis.call('HGET', p .. 'w:' .. mine,"
" 'identity') == ident then\n"
"    local mf = tonumber(redis.call('HGET', p .. 'w:' .. mine, 'fence')) or 0\n"
"    if mf > fence then fence = mf end\n"
"    redis.call('HSET', p .. 'w:' .. mine, 'released', '1')\n"
"  end\n"
"  redis.call('HSET', p .. 'w:' .. id, 'identity', ident, 'instance', nonce,"
" 'fence', fmt(fence), 'hb', fmt(snow), 'released', '0')\n"
"  redis.call('SET', p .. 'id:' .. ident, id)\n"
"  return {id, fence, hashless and epoch or -1, snow,"
" redis.call('HGET', p .. 'w:' .. id, 'zones') or ''}\n"
"end\n"
"local want = tonumber(ARGV[8])\n"
"if want >= 0 then\n"
"  local h = redis.call('HMGET', p .. 'w:' .. want, 'identity', 'instance',"
" 'fence', 'hb', 'released')\n"
"  local fence, hb = tonumber(h[3]) or 0, tonumber(h[4]) or 0\n"
"  if h[1] and h[1] ~= ident then\n"
"    if h[1] ~= ARGV[12] then\n"
"      if hb < since then\n"
"        if snow - since < lease then return {-6, since + lease} end\n"
"      elseif h[5] ~= '1' and snow - hb < lease then return {-3, hb, h[1]} end\n"
"      if fence >= now then return {-4, fence} end\n"
"    end\n"
"    if redis.call('GET', p .. 'id:' .. h[1]) == tostring(want) then\n"
"      redis.call('DEL', p .. 'id:' .. h[1])\n"
"    end\n"
"  end\n"
"  if mine and mine ~= want and redis.call('HGET', p .. 'w:' .. mine,"
" 'identity') == ident then\n"
"    redis.call('HSET', p .. 'w:' .. mine, 'released', '1')\n"
"  end\n"
"  return take(want, fence, not h[1], hb < since)\n"
"end\n"
"if mine and mine >= minw and mine <= maxw then\n"
"  local h = redis.call('HMGET', p .. 'w:' .. mine, 'identity', 'instance',"
" 'fence', 'hb', 'released')\n"
"  if h[1] == ident then\n"
"    local hb = tonumber(h[4]) or 0\n"
"    if h[2] and h[2] ~= nonce and h[2] ~= prev and h[5] ~= '1' and "
"snow - hb < lease then return {-2, hb} end\n"
"    return take(mine, tonumber(h[3]) or 0, false, hb < since)\n"
"  end\n"
"end\n"
"local waiting\n"
"for id = minw, maxw do\n"
"  local k = p .. 'w:' .. id\n"
"  local h = redis.call('HMGET', k, 'identity', 'fence', 'hb', 'released')\n"
"  if not h[1] then return take(id, 0, true) end\n"
"  local fence, hb = tonumber(h[2]) or 0, tonumber(h[3]) or 0\n"
"  local free = h[4] == '1' or snow - hb >= lease\n"
"  if hb < since then\n"
"    free = snow - since >= lease\n"
"    if not free then waiting = since + lease end\n"
"  end\n"
"  if free and fence < now then\n"
"    if redis.call('GET', p .. 'id:' .. h[1]) == tostring(id) then\n"
"      redis.call('DEL', p .. 'id:' .. h[1])\n"
"    end\n"
"    return take(id, fence, false, hb < since)\n"
"  end\n"
"end\n"
"if waiting then return {-6, waiting} end\n"
"return {-1, maxw - minw + 1}\n";

/* KEYS[1] the hash; ARGV: nonce, fence, server, uptime_ms, the hb this
 * holder last wrote (0: none yet), prefix, "1" to write zones (the serial
 * zones record, workerid_lease.h's record) as ARGV[8] ("0": keep the
 * hash's). {store's clock, back} (back 1:
 * the hash's hb is older than what this holder wrote, so the store went
 * back in time: since is set to now, and this write puts the record back);
 * {-1} when the nonce does not hold it, {-2} when the hash is gone (Redis
 * lost its data: nobody claimed it since, or the hash would be there). */
static const char wr_fence_lua[] =
"local p = ARGV[6]\n"
"local t = redis.call('TIME')\n"
"local snow = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
WR_SINCE_LUA("ARGV[3]", "ARGV[4]")
"local h = redis.call('HMGET', KEYS[1], 'instance', 'released', 'hb')\n"
"if not h[1] then return {-2} end\n"
"if h[1] ~= ARGV[1] or h[2] == '1' then return {-1} end\n"
"local back = 0\n"
"if (tonumber(h[3]) or 0) < tonumber(ARGV[5]) then\n"
"  back = 1\n"
"  redis.call('HSET', p .. 'server', 'since', string.format('%.0f', snow))\n"
"end\n"
"redis.call('HSET', KEYS[1], 'fence', ARGV[2], 'hb', "
"string.format('%.0f', snow))\n"
"if ARGV[7] == '1' then redis.call('HSET', KEYS[1], 'zones', ARGV[8]) end\n"
"return {snow, back}\n";

/* ARGV: nonce, fence, "1" to write zones as ARGV[4] (as the fence's). */
static const char wr_release_lua[] =
"if redis.call('HGET', KEYS[1], 'instance') ~= ARGV[1] then return -1 end\n"
"redis.call('HSET', KEYS[1], 'fence', ARGV[2], 'released', '1')\n"
"if ARGV[3] == '1' then redis.call('HSET', KEYS[1], 'zones', ARGV[4]) end\n"
"return 0\n";

static void
wr_drop(struct wredis *r)
{
    if (r->c != NULL)
        redisFree(r->c);
    r->c = NULL;
}

/* A command's reply, or NULL with *cause (the connection is dropped). */
static redisReply *
wr_command(struct wredis *r, char **cause, int argc, const char **argv)
{
    redisReply *rep;

    if (r->cur_ms != r->want_ms) {
        struct timeval tv = { r->want_ms / 1000, (r->want_ms % 1000) * 1000 };

        if (redisSetTimeout(r->c, tv) != REDIS_OK) {
            *cause = xstrdup("redis: cannot set the timeout");
            wr_drop(r);
            return NULL;
        }
        r->cur_ms = r->want_ms;
    }
    rep = redisCommandArgv(r->c, argc, argv, NULL);
    if (rep == NULL) {
        *cause = xasprintf("redis %s: %s", argv[0],
                           r->c->errstr[0] ? r->c->errstr : "no reply");
        wr_drop(r);
        return NULL;
    }
    if (rep->type == REDIS_REPLY_ERROR) {
        *cause = xasprintf("redis %s: %s", argv[0], rep->str);
        freeReplyObject(rep);
        return NULL;
    }
    return rep;
}

static int
wr_connect(struct wredis *r, char **cause)
{
    struct timeval tv;
    redisReply *rep;
    char db[16];

    if (r->c != NULL)
        return 0;
    tv.tv_sec = r->want_ms / 1000;
    tv.tv_usec = (r->want_ms % 1000) * 1000;
    if (r->u.path != NULL)
        r->c = redisConnectUnixWithTimeout(r->u.path, tv);
    else
        r->c = redisConnectWithTimeout(r->u.host, r->u.port, tv);
    if (r->c == NULL || r->c->err) {
        *cause = xasprintf("redis connect to %s:%d: %s",
                           r->u.path != NULL ? r->u.path : r->u.host,
                           r->u.path != NULL ? 0 : r->u.port,
                           r->c != NULL ? r->c->errstr : "out of memory");
        wr_drop(r);
        return -1;
    }
    if (redisSetTimeout(r->c, tv) != REDIS_OK) {
        *cause = xstrdup("redis: cannot set the timeout");
        wr_drop(r);
        return -1;
    }
    r->cur_ms = r->want_ms;
    if (r->u.password != NULL) {
        const char *a[] = { "AUTH", r->u.password };
        if ((rep = wr_command(r, cause, 2, a)) == NULL) {
            wr_drop(r);
            return -1;
        }
        freeReplyObject(rep);
    }
    if (r->u.db != 0) {
        const char *a[] = { "SELECT", db };
        snprintf(db, sizeof db, "%d", r->u.db);
        if ((rep = wr_command(r, cause, 2, a)) == NULL) {
            wr_drop(r);
            return -1;
        }
        freeReplyObject(rep);
    }
    return 0;
}

/* EVAL script with keys and args; the reply or NULL with *cause. */
static redisReply *
wr_eval(struct wredis *r, const char *script, int nkeys, int argc,
        const char **argv, char **cause)
{
    const char *a[16];
    char nk[8];

    if (wr_connect(r, cause) == -1)
        return NULL;
    snprintf(nk, sizeof nk, "%d", nkeys);
    a[0] = "EVAL";
    a[1] = script;
    a[2] = nk;
    for (int i = 0; i < argc && i < 13; i++)
        a[3 + i] = argv[i];
    return wr_command(r, cause, 3 + argc, a);
}

/* The server behind the connection: *marker its run_id and master_replid
 * ("<run_id>:<replid>", which a restart, a failover or a REPLICAOF
 * changes) and its uptime (ms, rounded down to the second): 0, or -1 with
 * *cause. The script that follows runs on the same connection, so on the
 * same server. */
static int
wr_server(struct wredis *r, char *marker, size_t size, char *uptime_ms,
          size_t usize, char **cause)
{
    const char *a[] = { "INFO" };
    const char *run, *repl, *up;
    redisReply *rep;
    int rc = -1;

    if (wr_connect(r, cause) == -1)
        return -1;
    if ((rep = wr_command(r, cause, 1, a)) == NULL)
        return -1;
    if (rep->type != REDIS_REPLY_STRING)
        goto done;
    run = strstr(rep->str, "\nrun_id:");
    repl = strstr(rep->str, "\nmaster_replid:");
    up = strstr(rep->str, "\nuptime_in_seconds:");
    if (run == NULL || repl == NULL || up == NULL)
        goto done;
    snprintf(marker, size, "%.40s:%.40s", run + 8, repl + 15);
    marker[strcspn(marker, "\r\n")] = '\0';
    if (strchr(marker, ':') == NULL)
        goto done;
    snprintf(uptime_ms, usize, "%lld", strtoll(up + 19, NULL, 10) * 1000);
    rc = 0;
done:
    if (rc == -1)
        *cause = xstrdup("redis INFO: no run_id, master_replid or "
                         "uptime_in_seconds (the worker ID store needs INFO "
                         "to tell a restarted or failed-over Redis)");
    freeReplyObject(rep);
    return rc;
}

static int
wr_claim(void *arg, const struct wlease_claim *c, int64_t *worker,
         int64_t *fence_ms, char **cause)
{
    struct wredis *r = arg;
    char now[24], lease[24], maxw[24], want[24], unknown[24], srv[96],
         up[24], minw[24];
    const char *a[] = { r->prefix, c->identity, c->nonce, c->prev_nonce,
                        now, lease, maxw, want, unknown, srv, up,
                        c->alias != NULL ? c->alias : "", minw };
    redisReply *rep;
    int64_t x, y, epoch = -1, hb = 0;

    snprintf(now, sizeof now, "%" PRId64, c->now_ms);
    snprintf(lease, sizeof lease, "%" PRId64, c->lease_ms);
    snprintf(maxw, sizeof maxw, "%" PRIu64, c->max_worker);
    snprintf(minw, sizeof minw, "%" PRIu64, c->min_worker);
    snprintf(want, sizeof want, "%" PRId64, c->want_worker);
    snprintf(unknown, sizeof unknown, "%" PRId64, c->unknown_gate_ms);
    r->want_ms = r->op_ms;
    if (wr_server(r, srv, sizeof srv, up, sizeof up, cause) == -1)
        return WLEASE_DOWN;
    rep = wr_eval(r, wr_claim_lua, 0, 13, a, cause);
    if (rep == NULL)
        return WLEASE_DOWN;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 2 ||
        rep->element[0]->type != REDIS_REPLY_INTEGER ||
        rep->element[1]->type != REDIS_REPLY_INTEGER) {
        freeReplyObject(rep);
        *cause = xstrdup("redis: unexpected reply to the claim script");
        return WLEASE_DOWN;
    }
    x = rep->element[0]->integer;
    y = rep->element[1]->integer;
    if (x == -3) {
        const redisReply *who = rep->elements == 3 ? rep->element[2] : NULL;
        *cause = xasprintf("snowflake worker ID %" PRId64 " is held by %.*s "
                           "in redis (prefix \"%s\"), its lease live (last "
                           "heartbeat at store time %" PRId64 "); %s cannot "
                           "have it: check snowflake.k8s.ordinal_offset",
                           c->want_worker,
                           who != NULL && who->type == REDIS_REPLY_STRING ?
                           (int)(who->len < 200 ? who->len : 200) : 1,
                           who != NULL && who->type == REDIS_REPLY_STRING ?
                           who->str : "?", r->prefix, y, c->identity);
        freeReplyObject(rep);
        return WLEASE_REFUSED;
    }
    if (x >= 0 && rep->elements == 5 &&
        rep->element[2]->type == REDIS_REPLY_INTEGER &&
        rep->element[3]->type == REDIS_REPLY_INTEGER) {
        epoch = rep->element[2]->integer;
        hb = rep->element[3]->integer;
    }
    if (x >= 0) {
        int got = rep->elements == 5 &&
                  rep->element[4]->type == REDIS_REPLY_STRING;

        wlease_rec_claim(&r->rec, got ? rep->element[4]->str : NULL,
                         got ? rep->element[4]->len : 0);
    }
    freeReplyObject(rep);
    if (x == -6) {
        *cause = xasprintf("redis restarted or failed over (or went back in "
                           "time): a worker ID whose record is older may "
                           "still be held by a live node; not taking one "
                           "before store time %" PRId64 " (a lease after; "
                           "docs/operations.md)", y);
        return WLEASE_DOWN;     /* a lease later it is free, or renewed */
    }
    if (x == -5) {
        *cause = xasprintf("redis %sepoch is not a number of milliseconds: "
                           "not claiming (docs/operations.md)", r->prefix);
        return WLEASE_REFUSED;
    }
    if (x == -4) {
        *cause = xasprintf("snowflake worker ID %" PRId64 " was released in "
                           "redis with fence %" PRId64 ", not below this "
                           "node's clock %" PRId64 ": not taking it yet",
                           c->want_worker, y, c->now_ms);
        return WLEASE_DOWN;     /* the clock passes it soon: try again */
    }
    if (x == -2) {
        *cause = xasprintf("snowflake identity %s is in use: another live "
                           "leafd instance holds its lease in redis (last "
                           "heartbeat at store time %" PRId64 "); give each "
                           "process its own snowflake.ip / port",
                           c->identity, y);
        return WLEASE_REFUSED;
    }
    if (x == -1) {
        *cause = xasprintf("no free snowflake worker ID in redis (prefix "
                           "\"%s\"): all %" PRId64 " (%" PRIu64 "..%" PRIu64
                           ") are in use (leases live, or fences not yet "
                           "passed)%s", r->prefix, y, c->min_worker,
                           c->max_worker, WLEASE_FULL_HINT);
        return WLEASE_REFUSED;
    }
    if (epoch >= 0 && y >= c->now_ms)
        log_warn("snowflake: redis has no record of worker ID %" PRId64
                 " since %" PRId64 " (%sepoch: a new or wiped store): "
                 "waiting until %" PRId64 " (%" PRId64 " ms) before issuing, "
                 "past anything a node could have issued before", x, epoch,
                 r->prefix, y, y - c->now_ms + 1);
    r->held = x;
    r->held_hb = hb;
    free(r->note.text);
    r->note.text = NULL;
    if (epoch >= 0 && y >= epoch + c->unknown_gate_ms) {
        r->note.text = xasprintf("redis has no record of this worker ID since "
                            "its epoch %" PRId64 " (set by the first claim "
                            "on a new or wiped store) or since it last "
                            "restarted, and a node may have issued up to "
                            "that + fence_step + max_borrow + "
                            "max_clock_offset under a lost record; it ends "
                            "by itself. Only on a store nothing was ever "
                            "issued from, `SET %sepoch 0` skips it "
                            "(docs/operations.md)", epoch, r->prefix);
        r->note.gate = y;
    }
    *worker = x;
    *fence_ms = y;
    return WLEASE_OK;
}

static char *
wr_epoch_note(void *arg, int64_t *gate)
{
    return wlease_note_take(&((struct wredis *)arg)->note, gate);
}

static int
wr_fence(void *arg, int64_t worker, const char *nonce, int64_t fence_ms,
         int starting, int64_t *store_ms, char **cause)
{
    struct wredis *r = arg;
    char key[600], f[24], srv[96], up[24], last[24];
    const char *a[] = { key, nonce, f, srv, up, last, r->prefix,
                        r->rec.next != NULL ? "1" : "0",
                        r->rec.next != NULL ? r->rec.next : "" };
    redisReply *rep;
    int64_t x;

    snprintf(key, sizeof key, "%sw:%" PRId64, r->prefix, worker);
    snprintf(f, sizeof f, "%" PRId64, fence_ms);
    snprintf(last, sizeof last, "%" PRId64,
             r->held == worker ? r->held_hb : 0);
    /* A fence write in service must be quick (an answer later than a
     * heartbeat is as good as none); the start's clock check is part of
     * starting, where a busy Redis or machine may take longer. */
    r->want_ms = starting ? r->op_ms : r->timeout_ms;
    if (wr_server(r, srv, sizeof srv, up, sizeof up, cause) == -1)
        return WLEASE_DOWN;
    rep = wr_eval(r, wr_fence_lua, 1, 9, a, cause);
    if (rep == NULL)
        return WLEASE_DOWN;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
        rep->element[0]->type != REDIS_REPLY_INTEGER ||
        (rep->element[0]->integer >= 0 && (rep->elements != 2 ||
         rep->element[1]->type != REDIS_REPLY_INTEGER))) {
        freeReplyObject(rep);
        *cause = xstrdup("redis: unexpected reply to the fence script");
        return WLEASE_DOWN;
    }
    x = rep->element[0]->integer;
    if (x == -2) {
        freeReplyObject(rep);
        *cause = xasprintf("redis %s is gone: Redis lost its data (restarted "
                           "without persistence, flushed, or failed over to a "
                           "replica that missed writes); restart this node "
                           "(docs/operations.md)", key);
        return WLEASE_LOST;
    }
    if (x < 0) {
        freeReplyObject(rep);
        *cause = xasprintf("redis %s is held by another instance now", key);
        return WLEASE_LOST;
    }
    if (rep->element[1]->integer == 1)
        log_warn("snowflake: redis %s went back in time (its heartbeat is "
                 "older than the %" PRId64 " this node wrote: restored from "
                 "a snapshot, or a lagging replica promoted); written again "
                 "with fence %" PRId64 ", and other nodes take no worker ID "
                 "whose record is older for a lease", key, r->held_hb,
                 fence_ms);
    freeReplyObject(rep);
    r->held = worker;
    r->held_hb = x;
    *store_ms = x;
    return WLEASE_OK;
}

static char *
wr_claimed_record(void *arg)
{
    return wlease_rec_claimed(&((struct wredis *)arg)->rec);
}

static void
wr_set_record(void *arg, const char *rec)
{
    wlease_rec_set(&((struct wredis *)arg)->rec, rec);
}

static int
wr_release(void *arg, int64_t worker, const char *nonce, int64_t fence_ms,
           char **cause)
{
    struct wredis *r = arg;
    char key[600], f[24];
    const char *a[] = { key, nonce, f, r->rec.next != NULL ? "1" : "0",
                        r->rec.next != NULL ? r->rec.next : "" };
    redisReply *rep;
    int rc;

    snprintf(key, sizeof key, "%sw:%" PRId64, r->prefix, worker);
    snprintf(f, sizeof f, "%" PRId64, fence_ms);
    /* at stop: quick; a release that fails leaves the ID to its lease */
    r->want_ms = r->timeout_ms;
    rep = wr_eval(r, wr_release_lua, 1, 5, a, cause);
    if (rep == NULL)
        return WLEASE_DOWN;
    rc = rep->type == REDIS_REPLY_INTEGER && rep->integer == 0 ? WLEASE_OK
                                                               : WLEASE_LOST;
    if (rc != WLEASE_OK)
        *cause = xasprintf("redis %s is not ours any more", key);
    freeReplyObject(rep);
    return rc;
}

static void
wr_close(void *arg)
{
    struct wredis *r = arg;

    if (r == NULL)
        return;
    wr_drop(r);
    workerid_redis_url_free(&r->u);
    free(r->note.text);
    wlease_rec_free(&r->rec);
    free(r->prefix);
    free(r);
}

int
workerid_redis_store(const char *url, const char *prefix, int64_t timeout_ms,
                     int64_t op_timeout_ms, struct wlease_store *out,
                     char **cause)
{
    struct wredis *r = xcalloc(1, sizeof *r);

    if (workerid_redis_parse_url(url, &r->u, cause) == -1) {
        free(r);
        return -1;
    }
    if (prefix == NULL || strlen(prefix) > 256) {
        wr_close(r);
        *cause = xstrdup("snowflake.redis.prefix: missing or over 256 bytes");
        return -1;
    }
    r->prefix = xstrdup(prefix);
    r->timeout_ms = timeout_ms > 0 ? timeout_ms : 1000;
    r->op_ms = op_timeout_ms > r->timeout_ms ? op_timeout_ms : r->timeout_ms;
    r->want_ms = r->op_ms;
    r->held = -1;
    memset(out, 0, sizeof *out);
    out->name = "redis";
    out->claim = wr_claim;
    out->fence = wr_fence;
    out->release = wr_release;
    out->close = wr_close;
    out->epoch_note = wr_epoch_note;
    out->claimed_record = wr_claimed_record;
    out->set_record = wr_set_record;
    out->arg = r;
    return 0;
}
