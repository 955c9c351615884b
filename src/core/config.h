/* config.h: leafd's configuration.
 *
 * One table of keys (config.c) drives the config file, the environment
 * (LEAFD_<KEY> with '.' as '_', upper case) and command-line overrides
 * (--<key>=<value>). Later sources win: defaults < file < environment < flags.
 * Where Meituan Leaf has a property name (leaf.*), leafd uses it, so an
 * existing leaf.properties loads unchanged.
 *
 * A struct config is filled once at start (and on SIGHUP into a fresh copy);
 * after that it is read-only and may be read from any thread.
 */
#ifndef LEAFD_CONFIG_H
#define LEAFD_CONFIG_H

#include <stdint.h>
#include <stdio.h>

enum store_kind { STORE_AUTO, STORE_SQLITE, STORE_MYSQL, STORE_POSTGRESQL };
enum worker_source { WORKER_AUTO, WORKER_STATIC, WORKER_ZOOKEEPER, WORKER_REDIS,
                     WORKER_MYSQL, WORKER_K8S, WORKER_POSTGRESQL };
/* snowflake.k8s.fence_store: where a k8s pod's fence is kept besides its
 * cache file */
enum k8s_fence_store { K8S_FENCE_NONE, K8S_FENCE_REDIS, K8S_FENCE_MYSQL,
                       K8S_FENCE_POSTGRESQL };
enum db_replication { REPL_ASYNC, REPL_SEMI_SYNC, REPL_GALERA };
/* tls.client_auth and tls.min_version */
enum tls_client_auth { TLS_AUTH_OFF, TLS_AUTH_OPTIONAL, TLS_AUTH_REQUIRED };
enum tls_min_version { TLS_MIN_12, TLS_MIN_13 };

/* A serial.<code>.<field> line of the config file, kept as text: serial.c
 * validates the definitions and names file:line in its errors. */
struct config_serial_line {
    char *file;
    int   line;
    char *key;                     /* "serial.pay.prefix" */
    char *value;
};
#define CONFIG_SERIAL_LINES_MAX 1024

/* Why a set mixing MySQL and PostgreSQL databases is refused (a
 * PostgreSQL URL in segment.mysql.urls, a MySQL one in
 * segment.postgresql.urls, both lists, segment.store = postgresql with
 * segment.mysql.urls, multi-db init given both kinds): the scheme would
 * carry over, but each kind's member calls are tested in sets of their
 * own only (docs/multi-db.md, "PostgreSQL"). */
#define CONFIG_MULTI_MIXED_REFUSAL \
    "a set's databases are all MySQL/MariaDB (segment.mysql.urls) or all " \
    "PostgreSQL (segment.postgresql.urls): sets mixing the two are not " \
    "supported (docs/multi-db.md, \"PostgreSQL\")"

/* A segment.prefix.<prefix> = <biz_tag> line of the config file: the
 * prefix of that tag's IDs as strings (idstr.h). Checked as it is read:
 * a valid prefix, a valid tag, each tag at most once. */
struct config_prefix {
    char *prefix;
    char *tag;
};
#define CONFIG_PREFIXES_MAX 1024

/* snowflake.layout */
enum sf_layout_preset { SF_LAYOUT_BITS, SF_LAYOUT_JS53 };

struct config {
    /* Leaf's keys */
    char    *leaf_name;            /* leaf.name */
    int      segment_enable;       /* leaf.segment.enable */
    char    *jdbc_url;             /* leaf.jdbc.url */
    char    *jdbc_username;        /* leaf.jdbc.username */
    char    *jdbc_password;        /* leaf.jdbc.password */
    int      snowflake_enable;     /* leaf.snowflake.enable */
    char    *zk_address;           /* leaf.snowflake.zk.address */
    int64_t  snowflake_port;       /* leaf.snowflake.port (0: the HTTP port) */

    /* server */
    char    *listen_address;       /* listen.address */
    int64_t  listen_port;          /* listen.port */
    int64_t  threads;              /* threads (0: number of cores) */
    int64_t  max_connections;      /* http.max_connections */
    int64_t  idle_timeout_ms;      /* http.idle_timeout_ms */
    int64_t  max_header_bytes;     /* http.max_header_bytes */
    int64_t  max_url_bytes;        /* http.max_url_bytes */
    int64_t  busy_poll_us;         /* http.busy_poll_us */
    int64_t  shutdown_timeout_ms;  /* shutdown_timeout_ms */
    int      log_level;            /* log.level */
    char    *log_file;             /* log.file ("" = stderr) */
    char    *admin_address;        /* admin.listen.address */
    int64_t  admin_port;           /* admin.listen.port (0: admin pages on listen.port) */
    char    *admin_token;          /* admin.token ("" = none) */
    char    *resp_address;         /* resp.listen.address */
    int64_t  resp_port;            /* resp.listen.port (0: no RESP listener) */
    char    *mc_address;           /* memcache.listen.address */
    int64_t  mc_port;              /* memcache.listen.port (0: no listener) */
    char    *mc_token;             /* memcache.token ("" = none) */
    char    *grpc_address;         /* grpc.listen.address */
    int64_t  grpc_port;            /* grpc.listen.port (0: no gRPC listener) */
    int64_t  grpc_max_message_bytes; /* grpc.max_message_bytes */
    int      h2;                   /* http.h2: h2c on listen.port */
    int64_t  h2_max_streams;       /* http.h2_max_concurrent_streams */
    char    *tokens_file;          /* auth.tokens_file ("" = ID endpoints open) */

    /* TLS (http_tls.h) */
    int64_t  listen_tls_port;      /* listen.tls_port (0: no HTTPS) */
    int64_t  resp_tls_port;        /* resp.listen.tls_port (0: no RESP over TLS) */
    int64_t  mc_tls_port;          /* memcache.listen.tls_port (0: none) */
    int64_t  grpc_tls_port;        /* grpc.listen.tls_port (0: no gRPC over TLS) */
    char    *tls_cert_file;        /* tls.cert_file */
    char    *tls_key_file;         /* tls.key_file */
    char    *tls_ca_file;          /* tls.ca_file */
    int      tls_client_auth;      /* tls.client_auth: enum tls_client_auth */
    int      tls_min_version;      /* tls.min_version: enum tls_min_version */
    char    *tls_ciphers;          /* tls.ciphers */
    char    *tls_ciphersuites;     /* tls.ciphersuites */
    int64_t  tls_handshake_timeout_ms; /* tls.handshake_timeout_ms */

    /* segment mode */
    int      store;                /* segment.store: auto|sqlite|mysql|postgresql */
    char    *pg_url;               /* segment.postgresql.url (libpq's) */
    char    *pg_urls;              /* segment.postgresql.urls: several
                                      postgresql:// URIs, comma-separated */
    int      pg_replication;       /* segment.postgresql.replication: 0 async, 1 sync */
    char    *sqlite_path;          /* segment.sqlite.path */
    char    *mysql_url;            /* segment.mysql.url (mysql://u:p@h:port/db) */
    char    *mysql_urls;           /* segment.mysql.urls: several, comma-separated */
    int      mysql_replication;    /* segment.mysql.replication: enum db_replication */
    char    *marks_file;           /* segment.marks_file ("" = marks in memory only) */
    int64_t  db_threads;           /* segment.db_threads */
    int64_t  db_timeout_ms;        /* segment.db_timeout_ms */
    int64_t  db_backoff_max_ms;    /* segment.db_backoff_max_ms */
    int64_t  prefetch_percent;     /* segment.prefetch_percent */
    int64_t  wait_ms;              /* segment.wait_ms */
    int64_t  count_max;            /* segment.count_max */
    int64_t  lease_max;            /* segment.lease_max */
    char    *conceal_tags;         /* segment.conceal: comma-separated tags */
    char    *conceal_key_file;     /* segment.conceal_key_file */
    int64_t  conceal_bits;         /* segment.conceal_bits */
    int64_t  uuid_count_max;       /* uuid.count_max */
    int64_t  ulid_count_max;       /* ulid.count_max */
    int64_t  refresh_ms;           /* segment.refresh_ms */
    int64_t  negative_ttl_ms;      /* segment.negative_ttl_ms */
    int64_t  max_step;             /* segment.max_step */
    int64_t  segment_duration_ms;  /* segment.duration_ms */
    int      create_demo;          /* segment.create_demo */

    /* snowflake mode */
    int      worker_source;        /* snowflake.worker_source: auto|static|zookeeper|redis|mysql|k8s */
    int64_t  worker_id;            /* snowflake.worker_id */
    int64_t  epoch_ms;             /* snowflake.epoch_ms */
    int64_t  timestamp_bits;       /* snowflake.timestamp_bits */
    int64_t  datacenter_bits;      /* snowflake.datacenter_bits */
    int64_t  worker_bits;          /* snowflake.worker_bits */
    int64_t  sequence_bits;        /* snowflake.sequence_bits */
    int64_t  datacenter_id;        /* snowflake.datacenter_id */
    int64_t  worker_id_min;        /* snowflake.worker_id_min */
    int64_t  worker_id_max;        /* snowflake.worker_id_max (-1: the field's top) */
    int      sequence_random;      /* snowflake.sequence_random */
    int64_t  sequence_random_bound;/* snowflake.sequence_random_bound */
    int64_t  max_backward_ms;      /* snowflake.max_backward_ms */
    int64_t  max_borrow_ms;        /* snowflake.max_borrow_ms */
    int64_t  fence_step_ms;        /* snowflake.fence_step_ms */
    int64_t  start_wait_ms;        /* snowflake.start_wait_ms */
    int64_t  expiry_margin_days;   /* snowflake.expiry_margin_days */
    int64_t  sf_count_max;         /* snowflake.count_max */
    char    *cache_file;           /* snowflake.cache_file */
    char    *sf_ip;                /* snowflake.ip ("" = first non-loopback IPv4) */
    int64_t  heartbeat_ms;         /* snowflake.heartbeat_ms */
    int64_t  zk_timeout_ms;        /* snowflake.zk_session_timeout_ms */
    int      takeover;             /* snowflake.takeover */
    int64_t  takeover_age_ms;      /* snowflake.takeover_age_ms */
    char    *sf_redis_url;         /* snowflake.redis.url */
    char    *sf_redis_prefix;      /* snowflake.redis.prefix */
    char    *sf_redis_sentinels;   /* snowflake.redis.sentinels */
    char    *sf_redis_master_name; /* snowflake.redis.master_name */
    char    *sf_mysql_url;         /* snowflake.mysql.url */
    char    *sf_pg_url;            /* snowflake.postgresql.url */
    char    *k8s_ordinal_env;      /* snowflake.k8s.ordinal_env */
    char    *k8s_namespace_env;    /* snowflake.k8s.namespace_env */
    int64_t  k8s_ordinal_offset;   /* snowflake.k8s.ordinal_offset */
    int      k8s_fence_store;      /* snowflake.k8s.fence_store: enum k8s_fence_store */
    int      release_on_stop;      /* snowflake.release_on_stop */
    int64_t  max_clock_offset_ms;  /* snowflake.max_clock_offset_ms */
    int      sf_layout;            /* snowflake.layout: enum sf_layout_preset */
    char    *sf_prefix;            /* snowflake.prefix ("" = none) */

    /* segment.prefix.<prefix> = <biz_tag> lines (from the file only) */
    struct config_prefix *prefixes;
    size_t   nprefixes;

    /* serial numbers (serial.c) */
    int64_t  serial_count_max;     /* serial.count_max */
    struct config_serial_line *serial_lines;   /* from the file only */
    size_t   nserial_lines;

    /* bookkeeping */
    char    *path;                 /* the file loaded, or NULL */
    int      from_file;            /* a config file (or LEAFD_CONFIG) was given */
    int      segment_enable_set;   /* the key appeared somewhere */
    int      snowflake_enable_set;
    int      sf_bits_set;          /* a snowflake.*_bits key was given */
};

/* Fill cfg with defaults, then the file (path may be NULL), the environment
 * and argv overrides ("--key=value" strings, n of them). Returns 0, or -1 with
 * *cause set to a malloc'd "file:line: reason" message. */
int  config_load(struct config *cfg, const char *path, char **overrides,
                 int noverrides, char **cause);

/* Parse a whole config text (for tests and fuzzing). name labels errors. */
int  config_load_string(struct config *cfg, const char *name, const char *text,
                        char **cause);

void config_defaults(struct config *cfg);
void config_free(struct config *cfg);

/* Checks across keys (bit sums, modes); run by config_load. */
int  config_validate(struct config *cfg, char **cause);

/* The worker IDs this node may hold: snowflake.worker_id_min ..
 * snowflake.worker_id_max (-1: 2^worker_bits - 1). 0, or -1 with *cause
 * (malloc'd, naming the keys) when it does not fit the layout. */
int  config_worker_range(const struct config *cfg, int64_t *min, int64_t *max,
                         char **cause);

/* Print the key table (name, type, range, default, help) for --help. */
void config_print_help(FILE *out);

/* Log the effective configuration at start (passwords masked). */
void config_log(const struct config *cfg);

#endif
