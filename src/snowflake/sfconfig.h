/* sfconfig.h: snowflake mode from the config: the layout from the
 * snowflake.* keys, `leafd decode`, and the start that ties the generator
 * (snowflake.h) to its worker ID source (workerid.h). The one place that
 * knows both, so neither knows the other.
 *
 * Ownership: sfconfig_start returns a struct snowflake the caller ends with
 * snowflake_stop; sfconfig_workerid_open a struct workerid (workerid_close).
 * *cause strings are malloc'd.
 * Failure values: constructors NULL with *cause; actions 0 / -1 with *cause.
 * Thread-safety: called from the main thread (start) or anywhere (decode,
 * layout: no shared state).
 */
#ifndef LEAFD_SFCONFIG_H
#define LEAFD_SFCONFIG_H

#include <stdint.h>

#include "sfcodec.h"
#include "snowflake.h"
#include "util.h"

struct config;
struct workerid;
struct wlease;

/* The layout from cfg's snowflake.* keys (sfcodec_layout_init's checks;
 * now_ms < 0 skips the time checks). */
int  sfconfig_layout(struct sfcodec_layout *l, const struct config *cfg,
                           int64_t now_ms, char **cause);

/* For `leafd decode <id>`: the layout from cfg, no time checks; appends the
 * same JSON as GET /snowflake/decode/<id> (leaf_format: Leaf's) to out.
 * Returns 0 or -1 with *cause. */
int  sfconfig_decode_cli(const struct config *cfg, const char *id,
                          int leaf_format, struct sbuf *out, char **cause);

/* Start snowflake mode from cfg: check the layout (refused if it ran out or
 * runs out within snowflake.expiry_margin_days), get the worker ID (static,
 * or ZooKeeper with the cache file; may block up to about
 * snowflake.zk_session_timeout_ms when ZooKeeper is slow or down, and two
 * heartbeats more when this ip:port's node was last written by another leafd
 * instance, to tell a live twin from a dead one), persist a
 * first fence, start the keeper thread, and log the layout. http_port is the
 * bound HTTP port (the ZooKeeper registration uses leaf.snowflake.port, or
 * this when that is 0). wake (may be NULL) is called from the keeper thread
 * when requests that got SNOWFLAKE_WAIT (or worker_id_unknown) may succeed now.
 * Returns NULL with *cause on a configuration error, an exhausted worker ID
 * space, a corrupt or unwritable cache file. */
struct snowflake *sfconfig_start(const struct config *cfg, int http_port,
                                  snowflake_wake_fn wake, void *wake_arg,
                                  char **cause);
/* The same, with the hook of the record a worker-ID store keeps with the
 * worker ID (workerid_lease.h; NULL: none; unused by a static worker ID). */
struct wlease_hook;
struct snowflake *sfconfig_start_with(const struct config *cfg,
                                      int http_port, snowflake_wake_fn wake,
                                      void *wake_arg,
                                      const struct wlease_hook *hook,
                                      char **cause);

/* worker_source = static or k8s (without snowflake.k8s.fence_store), from
 * the config: ip (snowflake.ip or the
 * first non-loopback IPv4), port (leaf.snowflake.port or http_port), cache
 * file path. */
struct workerid *sfconfig_workerid_open(const struct config *cfg,
                               const struct sfcodec_layout *l, int http_port,
                               char **cause);

/* worker_source = zookeeper (or auto with leaf.snowflake.zk.address), redis
 * or mysql: the lease on a worker ID in ZooKeeper (Leaf's nodes),
 * snowflake.redis.url, snowflake.mysql.url or snowflake.postgresql.url
 * (default: the segment database), identity "<ip>:<port>", the lease snowflake.takeover_age_ms
 * (ZooKeeper: only with snowflake.takeover, else no lease). Also k8s with
 * snowflake.k8s.fence_store: the pod's worker ID (ordinal + offset), fixed,
 * identity the pod name, in redis, mysql or postgresql under the same
 * lease. NULL with
 * *cause on a bad URL or address, a refused claim. */
/* What config_validate cannot check from below: snowflake.redis.sentinels
 * and snowflake.redis.master_name, when set. 0, or -1 with *cause. */
int sfconfig_check(const struct config *cfg, char **cause);
/* --check-config: the worker ID store's connection string as the start
 * checks it (postgresql: db_pg_conninfo_check), nothing connected. 0, or
 * -1 with *cause. */
int sfconfig_check_store(const struct config *cfg, char **cause);

struct wlease *sfconfig_lease_open(const struct config *cfg,
                                   const struct sfcodec_layout *l,
                                   int http_port, char **cause);

#endif
