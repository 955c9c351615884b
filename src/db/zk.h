/* zk.h: a small ZooKeeper client for snowflake mode, on libzookeeper_mt.
 *
 * A struct zk owns one session handle and makes a new one when the session
 * expires (zk_maintain); the library's own threads reconnect after a mere
 * disconnection. Every call is asynchronous underneath with a bounded wait,
 * so a caller never blocks longer than the timeout it passes, whatever the
 * network does; a reply that arrives after the timeout is dropped.
 *
 * Ownership: zk_open returns a struct zk the caller frees with zk_close
 * (NULL is a no-op). Strings and arrays handed out are malloc'd; the caller
 * frees them (zk_strings_free for zk_children's array).
 *
 * Failure values: zk_open returns NULL with *cause. The calls return ZOK (0)
 * or a negative ZooKeeper error code (ZNONODE, ZNODEEXISTS, ZBADVERSION,
 * ZCONNECTIONLOSS, ZOPERATIONTIMEOUT also for our own timeout, ...) and then
 * set *cause, when cause is not NULL, to a malloc'd text naming the path and
 * zerror's text.
 *
 * Thread-safety: calls on one struct zk come from one thread at a time (in
 * leafd the snowflake keeper thread, or the starting thread before it runs).
 * zk_connected, zk_state_name, zk_connects and zk_expirations may be called
 * from any thread.
 */
#ifndef LEAFD_ZK_H
#define LEAFD_ZK_H

#include <stdint.h>

#include <zookeeper/zookeeper.h>

struct zk;

/* Start a session to hosts ("h1:p1,h2:p2"). Does not wait for it. */
struct zk  *zk_open(const char *hosts, int session_timeout_ms, char **cause);
void        zk_close(struct zk *z);

/* Wait up to timeout_ms for the session to be connected. 1 yes, 0 no. */
int         zk_wait_connected(struct zk *z, int timeout_ms);
int         zk_connected(struct zk *z);
/* "connected", "connecting", "expired" */
const char *zk_state_name(struct zk *z);
uint64_t    zk_connects(struct zk *z);      /* times a session got connected */
uint64_t    zk_expirations(struct zk *z);   /* sessions that expired */
/* The ensemble member the session last connected to ("host:port" as the
 * library names it; "" before the first connection), into buf; and how
 * many times a connection went to another member than the one before
 * (the failovers the client saw: a member lost, a partition, a restart). */
#define ZK_SERVER_MAX 136
void        zk_current_server(struct zk *z, char *buf, size_t cap);
uint64_t    zk_server_changes(struct zk *z);

/* If the session expired, close it and open a new one. Returns 1 when a new
 * session was started, 0 when nothing was needed, -1 when it could not be
 * (logged; tried again next time). */
int         zk_maintain(struct zk *z);

int zk_get(struct zk *z, const char *path, char **data, int *len,
           struct Stat *st, int timeout_ms, char **cause);
int zk_set(struct zk *z, const char *path, const char *data, int len,
           int version, struct Stat *st, int timeout_ms, char **cause);
/* mode: 0 or ZOO_PERSISTENT_SEQUENTIAL etc. *created (may be NULL) gets the
 * path the server created. */
int zk_create(struct zk *z, const char *path, const char *data, int len,
              int mode, char **created, int timeout_ms, char **cause);
int zk_children(struct zk *z, const char *path, char ***names, int *n,
                int timeout_ms, char **cause);
int zk_delete(struct zk *z, const char *path, int version, int timeout_ms,
              char **cause);
void zk_strings_free(char **names, int n);

/* --- for tests only: nothing in src/ calls these --------------------- */

/* The current session's id and password (to expire it). 0, or -1 when
 * there is no session. Same thread rule as the calls. */
int zk_client_id(struct zk *z, clientid_t *out);

#endif
