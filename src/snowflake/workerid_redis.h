/* workerid_redis.h: snowflake worker IDs held in Redis, behind the lease
 * rule of workerid_lease.h.
 *
 * Keys under a prefix P (snowflake.redis.prefix):
 *   P w:<id>         hash: identity, instance (nonce), fence (ms), hb (the
 *                    store's clock at the last fence write, ms), released
 *   P id:<identity>  the identity's worker ID
 *   P epoch          the store's clock (ms) when a claim first found no
 *                    epoch: a new or wiped store. An ID with no hash gates
 *                    on it + the claim's unknown_gate_ms (an operator may
 *                    SET it to 0 on a new store nothing was issued from)
 *   P server         hash: id (the server's INFO run_id:master_replid at
 *                    the last claim or fence write), since (the store's
 *                    clock, ms, when it last went back in time: another
 *                    server seen, or a holder's record found older than
 *                    its last write); a hash whose hb is older is free
 *                    only a lease after since and gates on since +
 *                    unknown_gate_ms
 * Claim, fence write and release are each one Lua script (EVAL), so they
 * are atomic; the claim reuses the identity's ID or takes the lowest free
 * one and never wraps, or takes exactly a wanted one (k8s) or refuses.
 *
 * With Sentinel (snowflake.redis.sentinels and .master_name), each
 * connection is made to the master that a Sentinel names (asked in turn,
 * from the last one that answered); snowflake.redis.url then gives only the
 * password and the database. Every claim and fence write first reads INFO:
 * a server whose role is not master is taken as down (no claim; a fence
 * write on it does not count), and so, with Sentinel, is a master that a
 * majority of the sentinels do not name (asked before every claim and
 * fence write; one naming another master is a failover): a master cut off
 * with this node from most sentinels, while they promote a replica, takes
 * no write that counts (docs/operations.md). Any error drops the
 * connection; the next command asks Sentinel again.
 *
 * Ownership: workerid_redis_store fills a struct wlease_store whose arg the
 * store's close frees.
 * Failure values: workerid_redis_store / workerid_redis_parse_url -1 with
 * *cause (malloc'd).
 * Thread-safety: the store's operations run on one thread at a time (the
 * lease's keeper).
 */
#ifndef LEAFD_WORKERID_REDIS_H
#define LEAFD_WORKERID_REDIS_H

#include <stdint.h>

#include "workerid_lease.h"

struct workerid_redis_url {
    char *host;         /* NULL for a unix socket */
    int   port;
    char *path;         /* unix socket path, or NULL */
    char *password;     /* NULL: no AUTH */
    int   db;
};

/* redis://[:password@]host[:port][/db] or unix:///path[?db=N]. 0, or -1
 * with *cause. Strings malloc'd; workerid_redis_url_free. */
int  workerid_redis_parse_url(const char *url, struct workerid_redis_url *u,
                              char **cause);
void workerid_redis_url_free(struct workerid_redis_url *u);

#define WORKERID_REDIS_SENTINELS_MAX   16
#define WORKERID_REDIS_MASTER_NAME_MAX 128

struct workerid_redis_sentinels {
    int   n;
    char *host[WORKERID_REDIS_SENTINELS_MAX];
    int   port[WORKERID_REDIS_SENTINELS_MAX];
};

/* "host:port[,host:port...]" (an IPv6 address in brackets; at most 16, at
 * most 1024 bytes; spaces around an entry ignored; none twice, as leafd
 * counts a majority of them). 0, or -1 with *cause naming the entry. Hosts malloc'd; workerid_redis_sentinels_free. */
int  workerid_redis_parse_sentinels(const char *list,
                                    struct workerid_redis_sentinels *s,
                                    char **cause);
void workerid_redis_sentinels_free(struct workerid_redis_sentinels *s);
/* 1..128 bytes of letters, digits, '.', '-', '_': 0, or -1 with *cause. */
int  workerid_redis_check_master_name(const char *name, char **cause);
/* A Sentinel's answer to get-master-addr-by-name (two strings, not
 * NUL-terminated): the host copied into hbuf (size hsize) and the port, 0;
 * or -1 with *cause. */
int  workerid_redis_master_addr(const char *host, size_t hlen,
                                const char *port, size_t plen, char *hbuf,
                                size_t hsize, int *portp, char **cause);

/* A store on url with key prefix. timeout_ms bounds each command (and a
 * connect) of a fence write in service and of a release; op_timeout_ms
 * (at least timeout_ms) each one of a claim and of the start's clock-check
 * write (wlease_store.fence's starting), which are part of starting (a
 * claim is up to five: connect, AUTH, SELECT, INFO, EVAL). Does not
 * connect yet (the first claim does). */
int  workerid_redis_store(const char *url, const char *prefix,
                          int64_t timeout_ms, int64_t op_timeout_ms,
                          struct wlease_store *out, char **cause);
/* With Sentinel: the store asks sentinels (parse_sentinels' list) for
 * master_name's master. Before the first claim. 0, or -1 with *cause. */
int  workerid_redis_use_sentinels(struct wlease_store *st,
                                  const char *sentinels,
                                  const char *master_name, char **cause);

#endif
