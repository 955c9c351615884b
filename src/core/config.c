/* config.c: the key table, and the file / environment / flag parsers that all
 * go through it.
 *
 * Each key has a name, a type, a range, a default and a help line. The same
 * table fills defaults, parses `key = value` files (Java .properties style, so
 * Leaf's leaf.properties loads), LEAFD_* environment variables and --key=value
 * flags, validates every value, and prints --help.
 */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "idstr.h"
#include "log.h"
#include "util.h"

enum key_type { K_BOOL, K_INT, K_STR, K_ENUM };

struct key {
    const char   *name;
    enum key_type type;
    size_t        off;
    int64_t       min, max;     /* K_INT range; K_STR max length */
    const char   *def;
    const char   *const *names; /* K_ENUM value names, NULL-terminated */
    const char   *help;
};

static const char *const store_names[] = { "auto", "sqlite", "mysql", "postgresql", NULL };
static const char *const worker_names[] = { "auto", "static", "zookeeper", "redis", "mysql", "k8s", "postgresql", NULL };
static const char *const k8s_fence_names[] = { "none", "redis", "mysql", "postgresql", NULL };
static const char *const replication_names[] = { "async", "semi-sync", "galera", NULL };
static const char *const pg_replication_names[] = { "async", "sync", NULL };
static const char *const level_names[] = { "debug", "info", "warn", "error", NULL };
static const char *const client_auth_names[] = { "off", "optional", "required", NULL };
static const char *const tls_version_names[] = { "1.2", "1.3", NULL };
static const char *const sf_layout_names[] = { "bits", "js53", NULL };

#define OFF(f) offsetof(struct config, f)
#define DAY_MS (86400LL * 1000)

static const struct key keys[] = {
    /* Leaf's own property names. */
    { "leaf.name", K_STR, OFF(leaf_name), 1, 64, "leafd", NULL,
      "cluster name; ZooKeeper path /snowflake/<leaf.name>/forever" },
    { "leaf.segment.enable", K_BOOL, OFF(segment_enable), 0, 1, NULL, NULL,
      "serve segment mode (default: on without a config file, off with one)" },
    { "leaf.jdbc.url", K_STR, OFF(jdbc_url), 0, 1024, "", NULL,
      "Leaf's jdbc:mysql://host:port/db?... URL (selects the mysql store)" },
    { "leaf.jdbc.username", K_STR, OFF(jdbc_username), 0, 128, "", NULL,
      "MySQL user for leaf.jdbc.url" },
    { "leaf.jdbc.password", K_STR, OFF(jdbc_password), 0, 256, "", NULL,
      "MySQL password for leaf.jdbc.url (never logged)" },
    { "leaf.snowflake.enable", K_BOOL, OFF(snowflake_enable), 0, 1, NULL, NULL,
      "serve snowflake mode (default: on without a config file, off with one)" },
    { "leaf.snowflake.zk.address", K_STR, OFF(zk_address), 0, 1024, "", NULL,
      "ZooKeeper host:port[,host:port] (selects zookeeper worker IDs)" },
    { "leaf.snowflake.port", K_INT, OFF(snowflake_port), 0, 65535, "0", NULL,
      "port in this node's ZooKeeper identity ip:port (0: listen.port)" },

    /* Server. */
    { "listen.address", K_STR, OFF(listen_address), 1, 255, "127.0.0.1", NULL,
      "address to listen on" },
    { "listen.port", K_INT, OFF(listen_port), 0, 65535, "8080", NULL,
      "HTTP port (0: any free port, logged at start; with listen.tls_port set: no plain HTTP)" },
    { "listen.tls_port", K_INT, OFF(listen_tls_port), 0, 65535, "0", NULL,
      "HTTPS port beside the HTTP one, same address and threads (0: off; see tls.*)" },
    { "threads", K_INT, OFF(threads), 0, 256, "0", NULL,
      "I/O threads, each with its own event loop (0: one per core)" },
    { "http.max_connections", K_INT, OFF(max_connections), 1, 1000000, "10000", NULL,
      "open connections at most (lowered at start to fit the open-files limit, logged); more get 503 and are closed at once" },
    { "http.idle_timeout_ms", K_INT, OFF(idle_timeout_ms), 100, 3600000, "60000", NULL,
      "close a keep-alive connection idle this long, or a request head this slow" },
    { "http.max_header_bytes", K_INT, OFF(max_header_bytes), 1024, 1048576, "8192", NULL,
      "request line plus headers at most (over: 431)" },
    { "http.max_url_bytes", K_INT, OFF(max_url_bytes), 64, 1048576, "2048", NULL,
      "request target at most (over: 414)" },
    { "http.busy_poll_us", K_INT, OFF(busy_poll_us), 0, 10000, "0", NULL,
      "after serving, an I/O thread polls this long before it sleeps, so a "
      "client's next request finds it awake (more CPU, more req/s under "
      "load; 0: sleep at once)" },
    { "shutdown_timeout_ms", K_INT, OFF(shutdown_timeout_ms), 0, 600000, "5000", NULL,
      "on SIGTERM, wait this long at most for requests in flight" },
    { "log.level", K_ENUM, OFF(log_level), 0, 0, "info", level_names,
      "debug, info, warn or error" },
    { "log.file", K_STR, OFF(log_file), 0, 1024, "", NULL,
      "log file, reopened on SIGHUP (empty: stderr)" },

    /* Access. */
    { "admin.listen.address", K_STR, OFF(admin_address), 1, 255, "127.0.0.1", NULL,
      "address of the admin listener (with admin.listen.port)" },
    { "admin.listen.port", K_INT, OFF(admin_port), 0, 65535, "0", NULL,
      "serve /db /cache /metrics /snowflake/state only on this port (0: on listen.port)" },
    { "resp.listen.address", K_STR, OFF(resp_address), 1, 255, "127.0.0.1", NULL,
      "address of the Redis-protocol listener (with resp.listen.port)" },
    { "resp.listen.port", K_INT, OFF(resp_port), 0, 65535, "0", NULL,
      "also speak the Redis protocol (RESP) on this port, on the same I/O "
      "threads (0: off)" },
    { "memcache.listen.address", K_STR, OFF(mc_address), 1, 255, "127.0.0.1", NULL,
      "address of the memcached-protocol listener (with memcache.listen.port)" },
    { "memcache.listen.port", K_INT, OFF(mc_port), 0, 65535, "0", NULL,
      "also speak memcached's text protocol on this port, on the same I/O "
      "threads (0: off)" },
    { "memcache.token", K_STR, OFF(mc_token), 0, 256, "", NULL,
      "with auth.tokens_file: the memcached listener serves this token's "
      "scopes (it has no auth of its own; never logged)" },
    { "grpc.listen.address", K_STR, OFF(grpc_address), 1, 255, "127.0.0.1", NULL,
      "address of the gRPC listener (with grpc.listen.port)" },
    { "grpc.listen.port", K_INT, OFF(grpc_port), 0, 65535, "0", NULL,
      "also serve gRPC (HTTP/2, cleartext) on this port, on the same I/O "
      "threads (0: off)" },
    { "grpc.max_message_bytes", K_INT, OFF(grpc_max_message_bytes), 64, 16777216,
      "65536", NULL, "a gRPC request message over this gets RESOURCE_EXHAUSTED" },
    { "http.h2", K_BOOL, OFF(h2), 0, 1, "true", NULL,
      "listen.port also takes cleartext HTTP/2 with prior knowledge (h2c)" },
    { "http.h2_max_concurrent_streams", K_INT, OFF(h2_max_streams), 1, 10000, "100", NULL,
      "streams open at once on one HTTP/2 connection (h2c and gRPC)" },
    { "grpc.listen.tls_port", K_INT, OFF(grpc_tls_port), 0, 65535, "0", NULL,
      "gRPC over TLS (ALPN h2) on this port, grpc.listen.address (0: off)" },
    { "resp.listen.tls_port", K_INT, OFF(resp_tls_port), 0, 65535, "0", NULL,
      "the Redis protocol over TLS (redis-cli --tls) on this port (0: off)" },
    { "memcache.listen.tls_port", K_INT, OFF(mc_tls_port), 0, 65535, "0", NULL,
      "memcached's text protocol over TLS on this port, "
      "memcache.listen.address (0: off)" },
    { "tls.cert_file", K_STR, OFF(tls_cert_file), 0, 1024, "", NULL,
      "PEM certificate, then its intermediates (the chain sent); reread on SIGHUP" },
    { "tls.key_file", K_STR, OFF(tls_key_file), 0, 1024, "", NULL,
      "PEM private key of tls.cert_file; reread on SIGHUP" },
    { "tls.ca_file", K_STR, OFF(tls_ca_file), 0, 1024, "", NULL,
      "PEM CA certificates that client certificates must chain to (mutual TLS)" },
    { "tls.client_auth", K_ENUM, OFF(tls_client_auth), 0, 0, "off", client_auth_names,
      "client certificates: off, optional (verified when sent) or required" },
    { "tls.min_version", K_ENUM, OFF(tls_min_version), 0, 0, "1.2", tls_version_names,
      "oldest TLS version accepted: 1.2 or 1.3" },
    { "tls.ciphers", K_STR, OFF(tls_ciphers), 0, 1024, "", NULL,
      "TLS 1.2 cipher list, OpenSSL syntax (empty: OpenSSL's default)" },
    { "tls.ciphersuites", K_STR, OFF(tls_ciphersuites), 0, 1024, "", NULL,
      "TLS 1.3 cipher suites, OpenSSL syntax (empty: OpenSSL's default)" },
    { "tls.handshake_timeout_ms", K_INT, OFF(tls_handshake_timeout_ms), 100, 600000, "10000", NULL,
      "close a connection whose TLS handshake is not done this long after accept" },
    { "admin.token", K_STR, OFF(admin_token), 0, 256, "", NULL,
      "require Authorization: Bearer <token> on the admin pages (never logged)" },
    { "auth.tokens_file", K_STR, OFF(tokens_file), 0, 1024, "", NULL,
      "per-biz_tag tokens for the ID endpoints, lines '<token> <tag>[,<tag>]' (empty: open)" },

    /* Segment mode. */
    { "segment.store", K_ENUM, OFF(store), 0, 0, "auto", store_names,
      "auto (mysql when a MySQL URL is set, postgresql when "
      "segment.postgresql.url is, else sqlite), sqlite, mysql or postgresql" },
    { "segment.sqlite.path", K_STR, OFF(sqlite_path), 1, 1024, "leafd.db", NULL,
      "SQLite file holding leaf_alloc (created if missing)" },
    { "segment.mysql.url", K_STR, OFF(mysql_url), 0, 1024, "", NULL,
      "mysql://user:pass@host:port/db[?ssl_mode=verify_identity&ssl_ca=/ca.pem] "
      "(alternative to leaf.jdbc.url; TLS: docs/operations.md)" },
    { "segment.mysql.urls", K_STR, OFF(mysql_urls), 0, 4000, "", NULL,
      "several databases, comma-separated mysql:// URLs (prepared by leafd "
      "multi-db init): any one down is invisible to clients" },
    { "segment.postgresql.url", K_STR, OFF(pg_url), 0, 1024, "", NULL,
      "libpq connection string for segment.store = postgresql, a URI "
      "(postgresql://user@host1,host2/db?sslmode=verify-full&"
      "target_session_attrs=read-write) or keywords (host=h dbname=leaf ...)" },
    { "segment.postgresql.urls", K_STR, OFF(pg_urls), 0, 4000, "", NULL,
      "several PostgreSQL databases, comma-separated postgresql:// URIs "
      "(prepared by leafd multi-db init): any one down is invisible to "
      "clients" },
    { "segment.postgresql.replication", K_ENUM, OFF(pg_replication), 0, 0, "async",
      pg_replication_names,
      "how segment.postgresql.url's cluster is replicated: async (a new "
      "timeline is refused until leafd db-fence) or sync (synchronous_commit "
      "on and synchronous_standby_names set: only ranges a standby flushed "
      "are used, and a promoted standby of the same cluster is followed)" },
    { "segment.mysql.replication", K_ENUM, OFF(mysql_replication), 0, 0, "async",
      replication_names,
      "how segment.mysql.url's database is replicated: async (a change of "
      "server is refused until leafd db-fence), semi-sync (AFTER_SYNC; only "
      "ranges a replica acknowledged are used) or galera (MariaDB only)" },
    { "segment.marks_file", K_STR, OFF(marks_file), 0, 1024, "", NULL,
      "keep the highest max_id received per tag, and any refusal, in this "
      "file across restarts (empty: in memory only)" },
    { "segment.db_threads", K_INT, OFF(db_threads), 1, 64, "2", NULL,
      "database threads (one connection each) loading segments" },
    { "segment.db_timeout_ms", K_INT, OFF(db_timeout_ms), 100, 600000, "3000", NULL,
      "connect/read/write timeout of one database call" },
    { "segment.db_backoff_max_ms", K_INT, OFF(db_backoff_max_ms), 10, 600000, "5000", NULL,
      "longest pause between reconnect attempts while the database is down" },
    { "segment.prefetch_percent", K_INT, OFF(prefetch_percent), 1, 99, "10", NULL,
      "load the next segment once this share of the current one is used" },
    { "segment.wait_ms", K_INT, OFF(wait_ms), 0, 60000, "500", NULL,
      "how long a request waits for a segment before 503 ids_exhausted" },
    { "segment.count_max", K_INT, OFF(count_max), 1, 100000, "1000", NULL,
      "largest ?count= for /segment" },
    { "segment.conceal", K_STR, OFF(conceal_tags), 0, 4000, "", NULL,
      "biz_tags whose IDs hide how many were issued, comma-separated "
      "(FF1 within blocks; no leases for them; docs/id-kinds.md)" },
    { "segment.conceal_key_file", K_STR, OFF(conceal_key_file), 0, 1024, "", NULL,
      "with segment.conceal: the AES key file, mode 600 (first line the key, "
      "later lines retired keys)" },
    { "segment.conceal_bits", K_INT, OFF(conceal_bits), 20, 30, "20", NULL,
      "with segment.conceal: a block is 2^N IDs, each load takes one" },
    { "segment.lease_max", K_INT, OFF(lease_max), 1, 1000000000, "1000000", NULL,
      "largest ?size= for /segment/<biz_tag>/lease (and Tinyid batchSize)" },
    { "segment.refresh_ms", K_INT, OFF(refresh_ms), 100, DAY_MS, "60000", NULL,
      "reload the tag list (and DBA step changes) this often" },
    { "segment.negative_ttl_ms", K_INT, OFF(negative_ttl_ms), 100, DAY_MS, "10000", NULL,
      "remember an unknown biz_tag this long before asking the database again" },
    { "segment.max_step", K_INT, OFF(max_step), 1, 100000000, "1000000", NULL,
      "adaptive step never grows past this" },
    { "segment.duration_ms", K_INT, OFF(segment_duration_ms), 1000, DAY_MS, "900000", NULL,
      "adaptive step aims for a segment to last this long (Leaf: 15 min)" },
    { "segment.create_demo", K_BOOL, OFF(create_demo), 0, 1, "true", NULL,
      "sqlite store: create the table and a 'demo' tag if missing" },

    /* UUIDv7 and ULID (no database, no worker ID: always on). */
    { "uuid.count_max", K_INT, OFF(uuid_count_max), 1, 100000, "1000", NULL,
      "largest ?count= for /uuid" },
    { "ulid.count_max", K_INT, OFF(ulid_count_max), 1, 100000, "1000", NULL,
      "largest ?count= for /ulid" },

    /* Serial numbers: definitions are serial.<code>.<field> lines (serial.c). */
    { "serial.count_max", K_INT, OFF(serial_count_max), 1, 1000, "100", NULL,
      "largest ?count= for /serial/<code>" },

    /* Snowflake mode. */
    { "snowflake.worker_source", K_ENUM, OFF(worker_source), 0, 0, "auto", worker_names,
      "auto (zookeeper when leaf.snowflake.zk.address is set, else static), static, zookeeper, redis, mysql, k8s" },
    { "snowflake.worker_id", K_INT, OFF(worker_id), 0, (1LL << 22) - 1, "0", NULL,
      "worker ID for the static source" },
    { "snowflake.epoch_ms", K_INT, OFF(epoch_ms), 0, 4102444800000LL, "1288834974657", NULL,
      "epoch of the timestamp field (Leaf/Twitter: 1288834974657)" },
    { "snowflake.timestamp_bits", K_INT, OFF(timestamp_bits), 30, 61, "41", NULL,
      "timestamp bits (timestamp + datacenter + worker + sequence = 63, or 53)" },
    { "snowflake.datacenter_bits", K_INT, OFF(datacenter_bits), 0, 16, "0", NULL,
      "datacenter bits split off the worker field (0: no split; Twitter: 5)" },
    { "snowflake.worker_bits", K_INT, OFF(worker_bits), 1, 22, "10", NULL,
      "worker ID bits" },
    { "snowflake.sequence_bits", K_INT, OFF(sequence_bits), 1, 22, "12", NULL,
      "sequence bits (IDs per ms per worker = 2^bits)" },
    { "snowflake.datacenter_id", K_INT, OFF(datacenter_id), 0, 65535, "0", NULL,
      "datacenter ID when datacenter_bits > 0" },
    { "snowflake.worker_id_min", K_INT, OFF(worker_id_min), 0, (1LL << 22) - 1, "0", NULL,
      "lowest worker ID this node may hold (every source claims only inside min..max)" },
    { "snowflake.worker_id_max", K_INT, OFF(worker_id_max), -1, (1LL << 22) - 1, "-1", NULL,
      "highest worker ID this node may hold (-1: 2^worker_bits - 1, the whole field)" },
    { "snowflake.sequence_random", K_BOOL, OFF(sequence_random), 0, 1, "false", NULL,
      "start each ms's sequence at a random offset in [0, sequence_random_bound) "
      "and wrap, so every value is still used (docs/id-kinds.md)" },
    { "snowflake.sequence_random_bound", K_INT, OFF(sequence_random_bound), 1, 1000000, "100", NULL,
      "upper bound of the random sequence offset" },
    { "snowflake.max_backward_ms", K_INT, OFF(max_backward_ms), 0, 3600000, "1000", NULL,
      "a clock step back up to this is served on the logical clock; beyond: 503" },
    { "snowflake.max_borrow_ms", K_INT, OFF(max_borrow_ms), 0, 60000, "1000", NULL,
      "issue at most this far ahead of the wall clock when a ms is used up" },
    { "snowflake.fence_step_ms", K_INT, OFF(fence_step_ms), 100, 3600000, "3000", NULL,
      "persisted fence runs this far ahead of the clock" },
    { "snowflake.start_wait_ms", K_INT, OFF(start_wait_ms), 0, 3600000, "5000", NULL,
      "at start, wait this long at most for the clock to pass the fence" },
    { "snowflake.expiry_margin_days", K_INT, OFF(expiry_margin_days), 0, 365000, "365", NULL,
      "refuse a layout whose timestamp runs out within this many days" },
    { "snowflake.count_max", K_INT, OFF(sf_count_max), 1, 1000000, "4096", NULL,
      "largest ?count= for /snowflake" },
    { "snowflake.cache_file", K_STR, OFF(cache_file), 0, 1024, "", NULL,
      "worker ID and fence cache (empty: ./leafd-snowflake-<leaf.name>-<port>.json, static: -worker-<dc>-<id>.json)" },
    { "snowflake.ip", K_STR, OFF(sf_ip), 0, 64, "", NULL,
      "ip in this node's ZooKeeper identity (empty: first non-loopback IPv4)" },
    { "snowflake.heartbeat_ms", K_INT, OFF(heartbeat_ms), 100, 600000, "3000", NULL,
      "write the ZooKeeper node's timestamp this often" },
    { "snowflake.zk_session_timeout_ms", K_INT, OFF(zk_timeout_ms), 1000, 600000, "10000", NULL,
      "ZooKeeper session timeout" },
    { "snowflake.takeover", K_BOOL, OFF(takeover), 0, 1, "false", NULL,
      "without a registration of its own, take over a stale one" },
    { "snowflake.takeover_age_ms", K_INT, OFF(takeover_age_ms), 1000, 365 * DAY_MS, "600000", NULL,
      "a registration is stale when its heartbeat is older than this (redis: the lease)" },
    { "snowflake.redis.url", K_STR, OFF(sf_redis_url), 0, 1024, "redis://127.0.0.1:6379", NULL,
      "worker ID store for worker_source = redis (and k8s.fence_store = redis): redis://[:password@]host[:port][/db] or unix:///path[?db=N]" },
    { "snowflake.redis.prefix", K_STR, OFF(sf_redis_prefix), 1, 256, "leafd:snowflake:", NULL,
      "prefix of the worker ID keys in Redis" },
    { "snowflake.redis.sentinels", K_STR, OFF(sf_redis_sentinels), 0, 1024, "", NULL,
      "Redis Sentinel host:port[,host:port...] (at most 16): the worker ID store is the master they name for snowflake.redis.master_name; snowflake.redis.url then gives only the password and db (empty: no Sentinel)" },
    { "snowflake.redis.master_name", K_STR, OFF(sf_redis_master_name), 0, 128, "", NULL,
      "with snowflake.redis.sentinels: the master's name in sentinel.conf (sentinel monitor NAME ...)" },
    { "snowflake.mysql.url", K_STR, OFF(sf_mysql_url), 0, 1024, "", NULL,
      "worker ID store for worker_source = mysql (and k8s.fence_store = mysql), as segment.mysql.url (empty: segment.mysql.url, else leaf.jdbc.url)" },
    { "snowflake.postgresql.url", K_STR, OFF(sf_pg_url), 0, 1024, "", NULL,
      "worker ID store for worker_source = postgresql (and k8s.fence_store = postgresql), a libpq connection string as segment.postgresql.url (empty: segment.postgresql.url)" },
    { "snowflake.k8s.ordinal_env", K_STR, OFF(k8s_ordinal_env), 0, 128, "", NULL,
      "k8s: the variable holding the pod name (empty: the hostname); its trailing -<n> is the ordinal" },
    { "snowflake.k8s.namespace_env", K_STR, OFF(k8s_namespace_env), 0, 128, "", NULL,
      "k8s with a fence_store: the variable holding the pod's namespace (downward API metadata.namespace; empty: the service account's namespace file); the identity is <namespace>/<pod>" },
    { "snowflake.k8s.ordinal_offset", K_INT, OFF(k8s_ordinal_offset), 0, (1LL << 22) - 1, "0", NULL,
      "k8s: worker ID = ordinal + this (several StatefulSets in one layout)" },
    { "snowflake.k8s.fence_store", K_ENUM, OFF(k8s_fence_store), 0, 0, "none", k8s_fence_names,
      "k8s: also hold the worker ID and its fence in redis (snowflake.redis.*), mysql (snowflake.mysql.url) or postgresql (snowflake.postgresql.url) under the lease, identity the pod name; none: the cache file only" },
    { "snowflake.max_clock_offset_ms", K_INT, OFF(max_clock_offset_ms), 0, 3600000, "5000", NULL,
      "zookeeper, redis, mysql, postgresql: refuse to start, and 503 clock_offset, when the clock is this far from the store's (0: no check)" },
    { "snowflake.release_on_stop", K_BOOL, OFF(release_on_stop), 0, 1, "false", NULL,
      "zookeeper, redis, mysql, postgresql: on a clean stop, free the worker ID for anyone past its fence" },
    { "snowflake.layout", K_ENUM, OFF(sf_layout), 0, 0, "bits", sf_layout_names,
      "bits: the snowflake.*_bits keys; js53: 41 timestamp + 5 worker + 7 sequence bits, every ID below 2^53 (JavaScript's Number)" },
    { "snowflake.prefix", K_STR, OFF(sf_prefix), 0, 63, "", NULL,
      "prefix of snowflake IDs as strings (?enc=base62|base32): [a-z_], a letter first and last; empty: none" },
};

#define NKEYS (sizeof keys / sizeof keys[0])

/* How many PostgreSQL URIs s holds (postgresql:// or postgres://). */
static int
pg_uri_count(const char *s)
{
    int n = 0;

    for (; s != NULL && *s != '\0'; s++)
        n += strncasecmp(s, "postgresql://", 13) == 0 ||
             strncasecmp(s, "postgres://", 11) == 0;
    return n;
}

static const struct key *
key_find(const char *name, size_t len)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (strlen(keys[i].name) == len && memcmp(keys[i].name, name, len) == 0)
            return &keys[i];
    return NULL;
}

static int
parse_bool(const char *v, int *out)
{
    if (strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 ||
        strcasecmp(v, "on") == 0 || strcmp(v, "1") == 0)
        *out = 1;
    else if (strcasecmp(v, "false") == 0 || strcasecmp(v, "no") == 0 ||
             strcasecmp(v, "off") == 0 || strcmp(v, "0") == 0)
        *out = 0;
    else
        return -1;
    return 0;
}

/* Set one key from text. Returns 0, or -1 with *why (static text or
 * malloc'd in *why_alloc). */
static int
key_set(struct config *cfg, const struct key *k, const char *v, char **why)
{
    char *base = (char *)cfg + k->off;
    int64_t n;
    int b;

    switch (k->type) {
    case K_BOOL:
        if (parse_bool(v, &b) == -1) {
            *why = xasprintf("%s: expected true or false, got \"%s\"", k->name, v);
            return -1;
        }
        *(int *)base = b;
        if (k->off == OFF(segment_enable))
            cfg->segment_enable_set = 1;
        if (k->off == OFF(snowflake_enable))
            cfg->snowflake_enable_set = 1;
        return 0;
    case K_INT:
        if (util_parse_i64(v, strlen(v), 1, &n) == -1) {
            *why = xasprintf("%s: expected an integer, got \"%s\"", k->name, v);
            return -1;
        }
        if (n < k->min || n > k->max) {
            *why = xasprintf("%s: %lld is out of range [%lld, %lld]", k->name,
                             (long long)n, (long long)k->min, (long long)k->max);
            return -1;
        }
        *(int64_t *)base = n;
        if (k->off == OFF(timestamp_bits) || k->off == OFF(datacenter_bits) ||
            k->off == OFF(worker_bits) || k->off == OFF(sequence_bits))
            cfg->sf_bits_set = 1;
        return 0;
    case K_STR:
        if ((int64_t)strlen(v) < k->min || (int64_t)strlen(v) > k->max) {
            *why = xasprintf("%s: length must be %lld to %lld bytes", k->name,
                             (long long)k->min, (long long)k->max);
            return -1;
        }
        free(*(char **)base);
        *(char **)base = xstrdup(v);
        return 0;
    case K_ENUM:
        for (int i = 0; k->names[i] != NULL; i++) {
            if (strcasecmp(v, k->names[i]) == 0) {
                *(int *)base = i;
                return 0;
            }
        }
        *why = xasprintf("%s: \"%s\" is not one of the allowed values", k->name, v);
        return -1;
    }
    return -1;
}

void
config_defaults(struct config *cfg)
{
    char *why = NULL;

    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < NKEYS; i++) {
        if (keys[i].def == NULL)
            continue;
        if (key_set(cfg, &keys[i], keys[i].def, &why) == -1)
            abort();        /* a bad default is a bug in the table */
    }
    cfg->segment_enable_set = cfg->snowflake_enable_set = cfg->sf_bits_set = 0;
}

void
config_free(struct config *cfg)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (keys[i].type == K_STR) {
            char **p = (char **)((char *)cfg + keys[i].off);
            free(*p);
            *p = NULL;
        }
    free(cfg->path);
    cfg->path = NULL;
    for (size_t i = 0; i < cfg->nserial_lines; i++) {
        free(cfg->serial_lines[i].file);
        free(cfg->serial_lines[i].key);
        free(cfg->serial_lines[i].value);
    }
    free(cfg->serial_lines);
    cfg->serial_lines = NULL;
    cfg->nserial_lines = 0;
    for (size_t i = 0; i < cfg->nprefixes; i++) {
        free(cfg->prefixes[i].prefix);
        free(cfg->prefixes[i].tag);
    }
    free(cfg->prefixes);
    cfg->prefixes = NULL;
    cfg->nprefixes = 0;
}

/* Keep a segment.prefix.<prefix> = <biz_tag> line (p: the key's prefix). */
static int
prefix_line_add(struct config *cfg, const char *name, int lineno,
                const char *p, const char *tag, char **cause)
{
    struct config_prefix *e;

    if (!idstr_prefix_valid(p, strlen(p))) {
        *cause = xasprintf("%s:%d: segment.prefix.%.80s: a prefix is 1 to %d of "
                           "[a-z_], starting and ending with a letter", name,
                           lineno, p, IDSTR_PREFIX_MAX);
        return -1;
    }
    if (!util_tag_valid(tag, strlen(tag))) {
        *cause = xasprintf("%s:%d: segment.prefix.%s: \"%.80s\" is not a biz_tag "
                           "(1 to %d of [A-Za-z0-9._:-])", name, lineno, p, tag,
                           TAG_MAX);
        return -1;
    }
    for (size_t i = 0; i < cfg->nprefixes; i++) {
        if (strcmp(cfg->prefixes[i].prefix, p) == 0 ||
            strcmp(cfg->prefixes[i].tag, tag) == 0) {
            *cause = xasprintf("%s:%d: segment.prefix.%s = %s: the %s already "
                               "has a line (segment.prefix.%s = %s); one prefix "
                               "per tag, one tag per prefix", name, lineno, p,
                               tag, strcmp(cfg->prefixes[i].tag, tag) == 0 ?
                               "tag" : "prefix", cfg->prefixes[i].prefix,
                               cfg->prefixes[i].tag);
            return -1;
        }
    }
    if (cfg->nprefixes == CONFIG_PREFIXES_MAX) {
        *cause = xasprintf("%s:%d: more than %d segment.prefix.* lines", name,
                           lineno, CONFIG_PREFIXES_MAX);
        return -1;
    }
    cfg->prefixes = xrealloc(cfg->prefixes, (cfg->nprefixes + 1) *
                             sizeof *cfg->prefixes);
    e = &cfg->prefixes[cfg->nprefixes++];
    e->prefix = xstrdup(p);
    e->tag = xstrdup(tag);
    return 0;
}

/* Keep a serial.<code>.<field> line for serial.c. */
static int
serial_line_add(struct config *cfg, const char *name, int lineno,
                const char *k, const char *v, char **cause)
{
    struct config_serial_line *l;

    if (cfg->nserial_lines == CONFIG_SERIAL_LINES_MAX) {
        *cause = xasprintf("%s:%d: more than %d serial.* lines", name, lineno,
                           CONFIG_SERIAL_LINES_MAX);
        return -1;
    }
    cfg->serial_lines = xrealloc(cfg->serial_lines, (cfg->nserial_lines + 1) *
                                 sizeof *cfg->serial_lines);
    l = &cfg->serial_lines[cfg->nserial_lines++];
    l->file = xstrdup(name);
    l->line = lineno;
    l->key = xstrdup(k);
    l->value = xstrdup(v);
    return 0;
}

static char *
trim(char *s)
{
    char *e;

    while (*s == ' ' || *s == '\t')
        s++;
    e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        *--e = '\0';
    return s;
}

#define LINE_MAX_BYTES 4096

int
config_load_string(struct config *cfg, const char *name, const char *text,
                   char **cause)
{
    const char *p = text;
    int lineno = 0;

    while (*p != '\0') {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[LINE_MAX_BYTES + 1], *s, *sep, *k, *v, *why = NULL;
        const struct key *key;

        lineno++;
        if (len > LINE_MAX_BYTES) {
            *cause = xasprintf("%s:%d: line longer than %d bytes", name, lineno,
                               LINE_MAX_BYTES);
            return -1;
        }
        memcpy(line, p, len);
        line[len] = '\0';
        p = nl ? nl + 1 : p + len;
        if (memchr(line, '\0', len) != NULL && strlen(line) != len) {
            *cause = xasprintf("%s:%d: NUL byte in line", name, lineno);
            return -1;
        }
        s = trim(line);
        if (*s == '\0' || *s == '#' || *s == '!')
            continue;
        sep = s + strcspn(s, "=:");
        if (*sep == '\0') {
            *cause = xasprintf("%s:%d: expected \"key = value\", got \"%.80s\"",
                               name, lineno, s);
            return -1;
        }
        *sep = '\0';
        k = trim(s);
        v = trim(sep + 1);
        key = key_find(k, strlen(k));
        if (key == NULL && strncmp(k, "segment.prefix.", 15) == 0) {
            if (prefix_line_add(cfg, name, lineno, k + 15, v, cause) == -1)
                return -1;
            continue;
        }
        if (key == NULL && strncmp(k, "serial.", 7) == 0) {
            if (serial_line_add(cfg, name, lineno, k, v, cause) == -1)
                return -1;
            continue;
        }
        if (key == NULL) {
            *cause = xasprintf("%s:%d: unknown key \"%.128s\" (leafd --help lists the keys)",
                               name, lineno, k);
            return -1;
        }
        if (key_set(cfg, key, v, &why) == -1) {
            *cause = xasprintf("%s:%d: %s", name, lineno, why);
            free(why);
            return -1;
        }
    }
    return 0;
}

static int
load_file(struct config *cfg, const char *path, char **cause)
{
    FILE *f = fopen(path, "r");
    char *text;
    long size;
    int rc;

    if (f == NULL) {
        *cause = xasprintf("%s: cannot open config file: %s", path, strerror(errno));
        return -1;
    }
    if (fseek(f, 0, SEEK_END) == -1 || (size = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) == -1) {
        *cause = xasprintf("%s: cannot read config file: %s", path, strerror(errno));
        fclose(f);
        return -1;
    }
    if (size > 1024 * 1024) {
        *cause = xasprintf("%s: config file over 1 MiB", path);
        fclose(f);
        return -1;
    }
    text = xmalloc((size_t)size + 1);
    if (fread(text, 1, (size_t)size, f) != (size_t)size) {
        *cause = xasprintf("%s: cannot read config file", path);
        free(text);
        fclose(f);
        return -1;
    }
    text[size] = '\0';
    fclose(f);
    if (strlen(text) != (size_t)size) {
        *cause = xasprintf("%s: config file contains a NUL byte", path);
        free(text);
        return -1;
    }
    rc = config_load_string(cfg, path, text, cause);
    free(text);
    return rc;
}

/* LEAFD_LISTEN_PORT -> listen.port and so on: compare ignoring case, with
 * '_' in the variable matching '.' or '_' in the key. */
static const struct key *
key_find_env(const char *var, size_t len)
{
    for (size_t i = 0; i < NKEYS; i++) {
        const char *n = keys[i].name;
        size_t j;

        if (strlen(n) != len)
            continue;
        for (j = 0; j < len; j++) {
            char a = (char)toupper((unsigned char)n[j]);
            if (a == '.')
                a = '_';
            if (a != var[j])
                break;
        }
        if (j == len)
            return &keys[i];
    }
    return NULL;
}

extern char **environ;

static int
load_env(struct config *cfg, char **cause)
{
    for (char **e = environ; *e != NULL; e++) {
        const char *eq, *name;
        const struct key *key;
        char *why = NULL, *val;

        if (strncmp(*e, "LEAFD_", 6) != 0)
            continue;
        name = *e + 6;
        eq = strchr(name, '=');
        if (eq == NULL)
            continue;
        if ((eq - name == 6 && strncmp(name, "CONFIG", 6) == 0) ||
            strncmp(name, "TEST_", 5) == 0)
            continue;
        key = key_find_env(name, (size_t)(eq - name));
        if (key == NULL) {
            *cause = xasprintf("environment: unknown variable LEAFD_%.*s",
                               (int)(eq - name > 128 ? 128 : eq - name), name);
            return -1;
        }
        val = xstrdup(eq + 1);
        if (key_set(cfg, key, trim(val), &why) == -1) {
            *cause = xasprintf("environment LEAFD_%.*s: %s", (int)(eq - name), name, why);
            free(why);
            free(val);
            return -1;
        }
        free(val);
    }
    return 0;
}

static int
load_overrides(struct config *cfg, char **ov, int n, char **cause)
{
    for (int i = 0; i < n; i++) {
        const char *a = ov[i], *eq;
        const struct key *key;
        char *why = NULL;

        if (strncmp(a, "--", 2) == 0)
            a += 2;
        eq = strchr(a, '=');
        if (eq == NULL) {
            *cause = xasprintf("command line: expected --key=value, got \"%.128s\"", ov[i]);
            return -1;
        }
        key = key_find(a, (size_t)(eq - a));
        if (key == NULL) {
            *cause = xasprintf("command line: unknown key \"%.*s\" (leafd --help lists the keys)",
                               (int)(eq - a > 128 ? 128 : eq - a), a);
            return -1;
        }
        if (key_set(cfg, key, eq + 1, &why) == -1) {
            *cause = xasprintf("command line: %s", why);
            free(why);
            return -1;
        }
    }
    return 0;
}

int
config_worker_range(const struct config *cfg, int64_t *min, int64_t *max,
                    char **cause)
{
    int64_t top = (1LL << cfg->worker_bits) - 1;

    *min = cfg->worker_id_min;
    *max = cfg->worker_id_max < 0 ? top : cfg->worker_id_max;
    if (*max > top) {
        *cause = xasprintf("snowflake.worker_id_max %lld does not fit in %lld worker bits "
                           "(snowflake.worker_bits; max %lld)", (long long)*max,
                           (long long)cfg->worker_bits, (long long)top);
        return -1;
    }
    if (*min > *max) {
        *cause = xasprintf("snowflake.worker_id_min %lld is above snowflake.worker_id_max "
                           "%lld%s", (long long)*min, (long long)*max,
                           cfg->worker_id_max < 0 ? " (2^snowflake.worker_bits - 1)" : "");
        return -1;
    }
    return 0;
}

int
config_validate(struct config *cfg, char **cause)
{
    int64_t bits = cfg->timestamp_bits + cfg->datacenter_bits + cfg->worker_bits +
                   cfg->sequence_bits;
    int64_t wmin, wmax;

    /* A missing enable key never turns a mode on when a config file was
     * given: only the embedded default (no file at all) serves both. */
    if (!cfg->segment_enable_set)
        cfg->segment_enable = !cfg->from_file;
    if (!cfg->snowflake_enable_set)
        cfg->snowflake_enable = !cfg->from_file;

    if (cfg->sf_layout == SF_LAYOUT_JS53) {
        if (cfg->sf_bits_set) {
            *cause = xasprintf("snowflake.layout = js53 sets the bits itself (41 "
                               "timestamp, 5 worker, 7 sequence): remove the "
                               "snowflake.*_bits keys, or use snowflake.layout = bits");
            return -1;
        }
        cfg->timestamp_bits = 41;
        cfg->datacenter_bits = 0;
        cfg->worker_bits = 5;
        cfg->sequence_bits = 7;
        bits = 53;
    }
    if (bits != 63 && bits != 53) {
        *cause = xasprintf("snowflake layout: timestamp_bits + datacenter_bits + "
                           "worker_bits + sequence_bits must be 63 (or 53: IDs "
                           "below 2^53), got %lld", (long long)bits);
        return -1;
    }
    if (cfg->sf_prefix[0] != '\0') {
        if (!idstr_prefix_valid(cfg->sf_prefix, strlen(cfg->sf_prefix))) {
            *cause = xasprintf("snowflake.prefix: a prefix is 1 to %d of [a-z_], "
                               "starting and ending with a letter",
                               IDSTR_PREFIX_MAX);
            return -1;
        }
        for (size_t i = 0; i < cfg->nprefixes; i++) {
            if (strcmp(cfg->prefixes[i].prefix, cfg->sf_prefix) == 0) {
                *cause = xasprintf("snowflake.prefix %s is also segment.prefix.%s "
                                   "(biz_tag %s): a prefix names one kind of ID",
                                   cfg->sf_prefix, cfg->sf_prefix,
                                   cfg->prefixes[i].tag);
                return -1;
            }
        }
    }
    if (cfg->worker_id >= (1LL << cfg->worker_bits)) {
        *cause = xasprintf("snowflake.worker_id %lld does not fit in %lld worker bits (max %lld)",
                           (long long)cfg->worker_id, (long long)cfg->worker_bits,
                           (long long)((1LL << cfg->worker_bits) - 1));
        return -1;
    }
    if (cfg->datacenter_id >= (1LL << cfg->datacenter_bits)) {
        *cause = xasprintf("snowflake.datacenter_id %lld does not fit in %lld datacenter bits",
                           (long long)cfg->datacenter_id, (long long)cfg->datacenter_bits);
        return -1;
    }
    if (config_worker_range(cfg, &wmin, &wmax, cause) == -1)
        return -1;
    if (cfg->store == STORE_AUTO)
        cfg->store = (cfg->jdbc_url[0] || cfg->mysql_url[0] || cfg->mysql_urls[0]) ?
            STORE_MYSQL : cfg->pg_url[0] || cfg->pg_urls[0] ? STORE_POSTGRESQL :
            STORE_SQLITE;
    if (cfg->store == STORE_POSTGRESQL && cfg->mysql_urls[0]) {
        *cause = xasprintf("segment.store is postgresql but segment.mysql.urls "
                           "is set (several PostgreSQL databases go in "
                           "segment.postgresql.urls): %s",
                           CONFIG_MULTI_MIXED_REFUSAL);
        return -1;
    }
    if (cfg->pg_urls[0] && (cfg->store != STORE_POSTGRESQL ||
                            cfg->mysql_url[0] || cfg->jdbc_url[0])) {
        *cause = xasprintf("segment.postgresql.urls is set with a MySQL store "
                           "(segment.store, segment.mysql.url or "
                           "leaf.jdbc.url): %s", CONFIG_MULTI_MIXED_REFUSAL);
        return -1;
    }
    if (cfg->pg_urls[0] && cfg->pg_url[0]) {
        *cause = xasprintf("segment.postgresql.urls and segment.postgresql.url "
                           "are both set: use one");
        return -1;
    }
    if (cfg->segment_enable && cfg->store == STORE_POSTGRESQL &&
        !cfg->pg_url[0] && !cfg->pg_urls[0]) {
        *cause = xasprintf("segment.store is postgresql but "
                           "segment.postgresql.url is not set");
        return -1;
    }
    if (pg_uri_count(cfg->mysql_urls) > 0) {
        *cause = xasprintf("segment.mysql.urls holds a PostgreSQL URI: %s",
                           CONFIG_MULTI_MIXED_REFUSAL);
        return -1;
    }
    if (pg_uri_count(cfg->pg_url) > 1) {
        *cause = xasprintf("segment.postgresql.url holds %d connection URIs: "
                           "several databases go in segment.postgresql.urls "
                           "(after leafd multi-db init); the hosts of one "
                           "cluster go in one URI, postgresql://h1,h2/db?"
                           "target_session_attrs=read-write",
                           pg_uri_count(cfg->pg_url));
        return -1;
    }
    if (pg_uri_count(cfg->pg_urls) > 1 && cfg->pg_replication == 1) {
        *cause = xasprintf("segment.postgresql.replication = sync is for one "
                           "cluster (segment.postgresql.url): in a set of "
                           "several databases, a member whose server changes "
                           "(a new timeline) stays out of loads until leafd "
                           "multi-db init, so remove the setting");
        return -1;
    }
    if (cfg->mysql_urls[0] && (cfg->mysql_url[0] || cfg->jdbc_url[0])) {
        *cause = xasprintf("segment.mysql.urls and segment.mysql.url (or "
                           "leaf.jdbc.url) are both set: use one");
        return -1;
    }
    if (cfg->segment_enable && cfg->store == STORE_MYSQL && !cfg->jdbc_url[0] &&
        !cfg->mysql_url[0] && !cfg->mysql_urls[0]) {
        *cause = xasprintf("segment.store is mysql but neither leaf.jdbc.url nor "
                           "segment.mysql.url is set");
        return -1;
    }
    if (cfg->worker_source == WORKER_AUTO)
        cfg->worker_source = cfg->zk_address[0] ? WORKER_ZOOKEEPER : WORKER_STATIC;
    if (cfg->snowflake_enable && cfg->worker_source == WORKER_ZOOKEEPER &&
        !cfg->zk_address[0]) {
        *cause = xasprintf("snowflake.worker_source is zookeeper but "
                           "leaf.snowflake.zk.address is not set");
        return -1;
    }
    if (cfg->snowflake_enable && cfg->worker_source == WORKER_STATIC &&
        (cfg->worker_id < wmin || cfg->worker_id > wmax)) {
        *cause = xasprintf("snowflake.worker_id %lld is outside snowflake.worker_id_min.."
                           "snowflake.worker_id_max (%lld..%lld): set a worker ID inside "
                           "this node's range", (long long)cfg->worker_id,
                           (long long)wmin, (long long)wmax);
        return -1;
    }
    if (cfg->snowflake_enable &&
        (cfg->worker_source == WORKER_POSTGRESQL ||
         (cfg->worker_source == WORKER_K8S &&
          cfg->k8s_fence_store == K8S_FENCE_POSTGRESQL)) &&
        !cfg->sf_pg_url[0] && !cfg->pg_url[0]) {
        *cause = xasprintf("the snowflake worker ID store is postgresql but "
                           "neither snowflake.postgresql.url nor "
                           "segment.postgresql.url is set");
        return -1;
    }
    if (cfg->k8s_fence_store != K8S_FENCE_NONE &&
        cfg->worker_source != WORKER_K8S) {
        *cause = xasprintf("snowflake.k8s.fence_store is set but "
                           "snowflake.worker_source is not k8s");
        return -1;
    }
    if ((cfg->sf_redis_sentinels[0] != '\0') !=
        (cfg->sf_redis_master_name[0] != '\0')) {
        *cause = xasprintf("snowflake.redis.sentinels and "
                           "snowflake.redis.master_name go together: set both "
                           "(Redis Sentinel) or neither");
        return -1;
    }
    if (cfg->snowflake_port == 0)
        cfg->snowflake_port = cfg->listen_port;
    if (cfg->sf_count_max > (cfg->max_borrow_ms + 1) << cfg->sequence_bits) {
        *cause = xasprintf("snowflake.count_max %lld is more than a batch can ever get "
                           "((snowflake.max_borrow_ms + 1) * 2^sequence_bits = %lld)",
                           (long long)cfg->sf_count_max,
                           (long long)((cfg->max_borrow_ms + 1) << cfg->sequence_bits));
        return -1;
    }
    if (cfg->admin_token[0] != '\0' && strlen(cfg->admin_token) < 8) {
        *cause = xasprintf("admin.token must be at least 8 characters");
        return -1;
    }
    if (cfg->mc_token[0] != '\0' && cfg->tokens_file[0] == '\0') {
        *cause = xasprintf("memcache.token names a token of auth.tokens_file, "
                           "which is not set");
        return -1;
    }
    if ((cfg->listen_tls_port != 0 || cfg->resp_tls_port != 0 ||
         cfg->grpc_tls_port != 0 || cfg->mc_tls_port != 0) &&
        (cfg->tls_cert_file[0] == '\0' || cfg->tls_key_file[0] == '\0')) {
        *cause = xasprintf("a TLS port (listen.tls_port, resp.listen.tls_port, "
                           "grpc.listen.tls_port, memcache.listen.tls_port) is "
                           "set but tls.cert_file or tls.key_file is not");
        return -1;
    }
    if (cfg->tls_client_auth != TLS_AUTH_OFF && cfg->tls_ca_file[0] == '\0') {
        *cause = xasprintf("tls.client_auth is %s but tls.ca_file is not set",
                           client_auth_names[cfg->tls_client_auth]);
        return -1;
    }
    if (!cfg->segment_enable && !cfg->snowflake_enable) {
        *cause = xasprintf("both leaf.segment.enable and leaf.snowflake.enable are "
                           "false: nothing to serve");
        return -1;
    }
    return 0;
}

int
config_load(struct config *cfg, const char *path, char **overrides,
            int noverrides, char **cause)
{
    config_defaults(cfg);
    if (path != NULL) {
        cfg->path = xstrdup(path);
        cfg->from_file = 1;
        if (load_file(cfg, path, cause) == -1)
            return -1;
    }
    if (load_env(cfg, cause) == -1)
        return -1;
    if (load_overrides(cfg, overrides, noverrides, cause) == -1)
        return -1;
    return config_validate(cfg, cause);
}

static const char *
type_name(const struct key *k)
{
    switch (k->type) {
    case K_BOOL: return "bool";
    case K_INT: return "int";
    case K_STR: return "string";
    case K_ENUM: return "enum";
    }
    return "?";
}

void
config_print_help(FILE *out)
{
    fprintf(out, "%-34s %-7s %-26s %s\n", "KEY", "TYPE", "RANGE", "DEFAULT / HELP");
    for (size_t i = 0; i < NKEYS; i++) {
        const struct key *k = &keys[i];
        char range[64] = "";

        if (k->type == K_INT)
            snprintf(range, sizeof range, "%lld..%lld", (long long)k->min,
                     (long long)k->max);
        else if (k->type == K_STR)
            snprintf(range, sizeof range, "%lld..%lld bytes", (long long)k->min,
                     (long long)k->max);
        else if (k->type == K_BOOL)
            snprintf(range, sizeof range, "true|false");
        else {
            size_t n = 0;
            for (int j = 0; k->names[j] && n < sizeof range - 1; j++)
                n += (size_t)snprintf(range + n, sizeof range - n, "%s%s",
                                      j ? "|" : "", k->names[j]);
        }
        fprintf(out, "%-34s %-7s %-26s %s\n%-34s %-7s %-26s   %s\n", k->name,
                type_name(k), range,
                k->def ? (k->def[0] ? k->def : "\"\"") : "(see help)", "", "", "",
                k->help);
    }
}

void
config_log(const struct config *cfg)
{
    log_info("config: %s; segment mode %s (store %s), snowflake mode %s (worker IDs %s)",
             cfg->path ? cfg->path : "built-in defaults",
             cfg->segment_enable ? "on" : "off",
             store_names[cfg->store],
             cfg->snowflake_enable ? "on" : "off",
             worker_names[cfg->worker_source]);
}
