/* main.c: leafd's entry point: command line, start-up order, signals.
 *
 * Start: config -> log -> segment mode (store, tag list, loader threads) ->
 * snowflake mode -> HTTP threads. SIGTERM/SIGINT: stop accepting, finish the
 * requests in flight (bounded by shutdown_timeout_ms), stop the loaders and
 * exit 0. SIGHUP: reopen the log file, reread the config file for what can
 * change safely (log.level), reload the TLS certificate and key (new
 * handshakes only), and refresh the tag list.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <event2/event.h>

#include "api.h"
#include "auth.h"
#include "conceal.h"
#include "config.h"
#include "decode.h"
#include "http.h"
#include "http_tls.h"
#include "loader.h"
#include "log.h"
#include "segment.h"
#include "serial.h"
#include "serial_loader.h"
#include "serial_zones.h"
#include "sfconfig.h"
#include "snowflake.h"
#include "store.h"
#include "store_marks.h"
#include "workerid_lease.h"

#include "version.h"

struct leafd {
    struct config      cfg;
    struct segments   *segs;
    struct loader     *loader;
    struct conceal    *conceal;     /* segment.conceal, or NULL */
    struct api        *api;
    struct http_server *server;
    struct http_server *admin;      /* admin.listen.port, or NULL */
    struct http_tls   *tls;         /* tls.*, or NULL: no TLS listener */
    struct snowflake  *sf;
    struct serials    *serials;
    struct serial_zgate *zgate;     /* the worker ID's serial zones record */
    struct serial_loader *serial_loader;
    struct event_base *base;        /* main thread: signals only */
};

static void
usage(FILE *out)
{
    fprintf(out,
        "usage: leafd [-c FILE] [--check-config] [--KEY=VALUE ...]\n"
        "       leafd decode ID [-c FILE] [--KEY=VALUE ...]   (snowflake, UUID or ULID)\n"
        "       leafd multi-db init URL1 URL2 [URL3 ...] [--block-size=N] [--floor=ID]\n"
        "                 [--accept-serial-restart]\n"
        "                 prepare (or extend) databases for segment.mysql.urls\n"
        "                 (mysql:// URLs) or segment.postgresql.urls (postgresql://)\n"
        "       leafd db-fence --floor=ID [--serial-floor=N] [-c FILE] [--KEY=VALUE ...]\n"
        "                 after a failover or a restore: raise every leaf_alloc row\n"
        "                 of the configured database to ID and let refused nodes\n"
        "                 resume (docs/operations.md, \"Replicated databases\")\n"
        "       leafd --help | --version\n"
        "\n"
        "leafd serves unique IDs over HTTP, Leaf-style:\n"
        "  GET /segment/<biz_tag>[?count=N]   64-bit IDs from the leaf_alloc table\n"
        "  GET /snowflake[?count=N]           time-ordered 64-bit snowflake IDs\n"
        "  GET /uuid[?count=N]                UUIDv7 (RFC 9562), monotonic per node\n"
        "  GET /ulid[?count=N]                ULIDs, monotonic per node\n"
        "  GET /serial/<code>[?count=N]       business serial numbers (serial.<code>.*)\n"
        "  GET /{snowflake,uuid,ulid}/decode/<id>   the parts of an ID\n"
        "  GET /console                       the web console\n"
        "  GET /health /metrics /cache /db    operations pages\n"
        "\n"
        "Without -c, leafd runs its embedded default: segment mode on an SQLite\n"
        "file (leafd.db, with a 'demo' tag) and snowflake mode with a static\n"
        "worker ID, on 127.0.0.1:8080. With -c FILE (Leaf's leaf.properties\n"
        "works), a mode is on only if the file turns it on.\n"
        "\n"
        "  -c, --config FILE   key = value file (also LEAFD_CONFIG)\n"
        "  --check-config      validate the configuration and exit\n"
        "  --KEY=VALUE         override one key (also LEAFD_KEY_NAME=VALUE)\n"
        "\n"
        "Keys:\n");
    config_print_help(out);
}

/* The loader's wake: a load of one tag wakes the requests parked on that
 * tag; tag NULL (a refresh, lookups) wakes everything on both listeners. */
static void
wake_loader(void *arg, const char *tag, size_t len)
{
    struct leafd *d = arg;
    /* Loader threads call this before the servers exist, too. */
    struct http_server *s = __atomic_load_n(&d->server, __ATOMIC_ACQUIRE);
    struct http_server *a = __atomic_load_n(&d->admin, __ATOMIC_ACQUIRE);

    if (tag != NULL) {
        if (s != NULL)
            http_wake(s, api_segment_key(tag, len));
        return;
    }
    if (s != NULL)
        http_wake_all(s);
    if (a != NULL)
        http_wake_all(a);
}

/* The snowflake keeper's wake: only snowflake requests wait on it. */
static void
wake_snowflake(void *arg)
{
    struct leafd *d = arg;
    struct http_server *s = __atomic_load_n(&d->server, __ATOMIC_ACQUIRE);

    if (s != NULL)
        http_wake(s, API_SNOWFLAKE_KEY);
}

/* A serial range arrived (or failed): retry the requests waiting on it. */
static void
wake_serial(void *arg, const char *code)
{
    struct leafd *d = arg;
    struct http_server *s = __atomic_load_n(&d->server, __ATOMIC_ACQUIRE);

    if (s != NULL)
        http_wake(s, api_serial_key(code, strlen(code)));
}

/* Descriptors leafd keeps for itself, whatever the clients do: per I/O
 * thread its epoll fd, eventfd, listener and the one socket it may accept
 * past the cap (answered 503 and closed at once); per database thread a
 * connection or an SQLite file with its journal; and a fixed part for stdio,
 * the log, the signal loop, ZooKeeper's socket and pipe, the fence file and
 * its directory, and resolver files. */
#define FD_RESERVE_BASE 64

static int
fd_reserve(const struct config *cfg, int threads)
{
    int io = threads + (cfg->admin_port != 0 ? 1 : 0);
    int tls = (cfg->listen_tls_port != 0) + (cfg->resp_tls_port != 0) +
              (cfg->grpc_tls_port != 0) +
              (cfg->mc_tls_port != 0);          /* a listener per thread each */

    return FD_RESERVE_BASE + 4 * io + tls * threads +
           (cfg->segment_enable ? 4 * (int)cfg->db_threads : 0);
}

/* Raise the soft RLIMIT_NOFILE toward what the connection caps need (as far
 * as the hard limit allows), then clamp the caps so that clients can never
 * take the reserve. Returns 0, or -1 if not even one connection fits. */
static int
fd_budget(const struct config *cfg, int threads, int *pub_cap, int *admin_cap,
          char **cause)
{
    struct rlimit rl;
    int reserve = fd_reserve(cfg, threads);
    int64_t want, have, budget;

    *pub_cap = (int)cfg->max_connections;
    *admin_cap = cfg->admin_port != 0 ? 256 : 0;
    if (getrlimit(RLIMIT_NOFILE, &rl) == -1) {
        log_warn("getrlimit(RLIMIT_NOFILE): %s; keeping the caps as set",
                 strerror(errno));
        return 0;
    }
    want = (int64_t)*pub_cap + *admin_cap + reserve;
    if (rl.rlim_cur != RLIM_INFINITY && (int64_t)rl.rlim_cur < want) {
        rlim_t old = rl.rlim_cur;

        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || (int64_t)rl.rlim_max > want
                          ? (rlim_t)want : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) == -1) {
            log_warn("setrlimit(RLIMIT_NOFILE, %llu): %s",
                     (unsigned long long)rl.rlim_cur, strerror(errno));
            rl.rlim_cur = old;
        } else {
            log_info("open files limit raised from %llu to %llu (hard limit "
                     "%llu)", (unsigned long long)old,
                     (unsigned long long)rl.rlim_cur,
                     (unsigned long long)rl.rlim_max);
        }
    }
    if (rl.rlim_cur == RLIM_INFINITY || (int64_t)rl.rlim_cur >= want)
        return 0;
    have = (int64_t)rl.rlim_cur;
    budget = have - reserve;
    if (*admin_cap > 0) {
        int64_t ac = budget / 8 > 8 ? budget / 8 : 8;
        *admin_cap = ac < *admin_cap ? (int)ac : *admin_cap;
        budget -= *admin_cap;
    }
    if (budget < 1) {
        *cause = xasprintf("the open files limit (%lld) leaves no descriptor "
                           "for clients after the %d leafd keeps for itself; "
                           "raise it (ulimit -n, LimitNOFILE=)", (long long)have,
                           reserve);
        return -1;
    }
    *pub_cap = (int)budget;
    log_warn("open files limit %lld (hard %llu): http.max_connections %lld "
             "clamped to %d, keeping %d descriptors for leafd's own files, "
             "database and ZooKeeper%s", (long long)have,
             (unsigned long long)rl.rlim_max, (long long)cfg->max_connections,
             *pub_cap, reserve, *admin_cap > 0 ? " and the admin listener" : "");
    return 0;
}

/* The TLS context of listen.tls_port and resp.listen.tls_port, from tls.*;
 * NULL with *cause when a file is missing or bad, or when neither port is
 * set (then *cause stays NULL). */
static struct http_tls *
tls_open(const struct config *cfg, char **cause)
{
    struct http_tls_config tc = {
        .cert_file = cfg->tls_cert_file,
        .key_file = cfg->tls_key_file,
        .ca_file = cfg->tls_ca_file,
        .client_auth = cfg->tls_client_auth == TLS_AUTH_REQUIRED ? HTTP_TLS_AUTH_REQUIRED
                       : cfg->tls_client_auth == TLS_AUTH_OPTIONAL ? HTTP_TLS_AUTH_OPTIONAL
                       : HTTP_TLS_AUTH_OFF,
        .min_tls13 = cfg->tls_min_version == TLS_MIN_13,
        .ciphers = cfg->tls_ciphers,
        .ciphersuites = cfg->tls_ciphersuites,
    };

    if (cfg->listen_tls_port == 0 && cfg->resp_tls_port == 0 &&
        cfg->grpc_tls_port == 0 && cfg->mc_tls_port == 0)
        return NULL;
    return http_tls_new(&tc, cause);
}

static void
on_stop(evutil_socket_t sig, short what, void *arg)
{
    struct leafd *d = arg;

    (void)what;
    log_info("%s: stopping: no new connections, finishing requests in flight",
             sig == SIGINT ? "SIGINT" : "SIGTERM");
    event_base_loopbreak(d->base);
}

static void
on_hup(evutil_socket_t sig, short what, void *arg)
{
    struct leafd *d = arg;
    struct config fresh;
    char *cause = NULL;

    (void)sig;
    (void)what;
    log_reopen();
    if (d->cfg.path != NULL) {
        if (config_load(&fresh, d->cfg.path, NULL, 0, &cause) == -1) {
            log_error("SIGHUP: keeping the running configuration: %s", cause);
            free(cause);
        } else {
            log_set_level((enum log_level)fresh.log_level);
            log_info("SIGHUP: log reopened, log.level %s",
                     log_level_name((enum log_level)fresh.log_level));
        }
        config_free(&fresh);
    } else {
        log_info("SIGHUP: log reopened");
    }
    if (d->tls != NULL) {
        if (http_tls_reload(d->tls, &cause) == -1) {
            log_error("SIGHUP: keeping the running TLS certificate: %s", cause);
            free(cause);
        } else {
            log_info("SIGHUP: TLS certificate and key reloaded from %s and %s "
                     "(new handshakes use them)", d->cfg.tls_cert_file,
                     d->cfg.tls_key_file);
        }
    }
    if (d->loader != NULL)
        loader_refresh_now(d->loader, 0);
}

static int
start(struct leafd *d, char **cause)
{
    const struct config *cfg = &d->cfg;
    struct http_config hc;
    int threads = (int)cfg->threads, pub_cap, admin_cap;

    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)n : 1;
    }
    /* Before anything opens a descriptor of its own. */
    if (fd_budget(cfg, threads, &pub_cap, &admin_cap, cause) == -1)
        return -1;
    /* The marks before any load: a refusal kept from a run before holds. */
    if (store_marks_open(cfg->marks_file, cause) == -1)
        return -1;
    if (cfg->segment_enable && cfg->marks_file[0] == '\0' &&
        cfg->store != STORE_SQLITE && (cfg->mysql_url[0] != '\0' ||
                                       cfg->jdbc_url[0] != '\0' ||
                                       cfg->mysql_urls[0] != '\0'))
        log_warn("segment.marks_file is not set: a restart forgets the server "
                 "this node loaded from and the IDs it received, so a node "
                 "restarted after a failover or a restore trusts the database "
                 "it finds (docs/operations.md, \"Replicated databases\")");
    if (cfg->segment_enable) {
        struct segment_options so = {
            .prefetch_percent = (int)cfg->prefetch_percent,
            .max_step = cfg->max_step,
            .duration_ms = cfg->segment_duration_ms,
            .negative_ttl_ms = cfg->negative_ttl_ms,
        };
        struct segment_hooks hooks = { 0 };

        d->loader = loader_new(cfg, cause);
        if (d->loader == NULL)
            return -1;
        d->conceal = conceal_new(cfg, cause);
        if (d->conceal == NULL && *cause != NULL)
            return -1;
        if (d->conceal != NULL)
            log_info("segment: %zu concealed biz_tag(s), blocks of 2^%u IDs, "
                     "key %s", conceal_count(d->conceal),
                     conceal_bits(d->conceal), conceal_key_name(d->conceal));
        loader_set_conceal(d->loader, d->conceal);
        hooks.load = loader_hook_load;
        hooks.lookup = loader_hook_lookup;
        hooks.arg = d->loader;
        d->segs = segments_new(&so, &hooks);
        loader_attach(d->loader, d->segs, wake_loader, d);
        if (loader_start(d->loader, cause) == -1)
            return -1;
    }
    d->serials = serials_new(cfg, NULL, cause);
    if (d->serials == NULL)
        return -1;
    {
        char *zones = serial_zones_path(cfg);
        int rc = serial_zones_check(d->serials, zones, util_wall_ms(), cause);

        free(zones);
        if (rc == -1)
            return -1;
    }
    d->zgate = serial_zgate_new(d->serials);
    if (serials_need_store(d->serials)) {
        struct serial_hooks sh = { .load = serial_loader_want };

        d->serial_loader = serial_loader_new(cfg, cause);
        if (d->serial_loader == NULL)
            return -1;
        sh.arg = d->serial_loader;
        serials_set_hooks(d->serials, &sh);
        serial_loader_attach(d->serial_loader, d->serials, wake_serial, d);
        if (serial_loader_check(d->serial_loader, cause) == -1 ||
            serial_loader_start(d->serial_loader, cause) == -1)
            return -1;
    }
    d->api = api_new(cfg, d->segs, d->loader, NULL, threads);
    api_set_serials(d->api, d->serials, d->serial_loader);
    api_set_conceal(d->api, d->conceal);
    api_set_serial_zgate(d->api, d->zgate);
    if (cfg->tokens_file[0] != '\0') {
        struct auth *au = auth_load(cfg->tokens_file, cause);
        if (au == NULL)
            return -1;
        if (cfg->mc_token[0] != '\0' &&
            !auth_known(au, cfg->mc_token, strlen(cfg->mc_token))) {
            *cause = xasprintf("memcache.token is not a token of %s", cfg->tokens_file);
            auth_free(au);
            return -1;
        }
        log_info("ID endpoints need a token: %zu token(s) from %s", auth_count(au),
                 cfg->tokens_file);
        api_set_auth(d->api, au, cfg->admin_port != 0);
    } else {
        api_set_auth(d->api, NULL, cfg->admin_port != 0);
    }

    d->tls = tls_open(cfg, cause);
    if (d->tls == NULL && *cause != NULL)
        return -1;

    memset(&hc, 0, sizeof hc);
    hc.address = cfg->listen_address;
    /* listen.port 0 means "any free port", unless HTTPS replaces it. */
    hc.port = cfg->listen_port == 0 && cfg->listen_tls_port != 0
                  ? -1 : (int)cfg->listen_port;
    hc.tls = d->tls;
    hc.tls_enable = cfg->listen_tls_port != 0;
    hc.tls_port = (int)cfg->listen_tls_port;
    hc.resp_tls_enable = cfg->resp_tls_port != 0;
    hc.resp_tls_port = (int)cfg->resp_tls_port;
    hc.grpc_tls_enable = cfg->grpc_tls_port != 0;
    hc.grpc_tls_port = (int)cfg->grpc_tls_port;
    hc.mc_tls_enable = cfg->mc_tls_port != 0;
    hc.mc_tls_port = (int)cfg->mc_tls_port;
    hc.tls_handshake_timeout_ms = (int)cfg->tls_handshake_timeout_ms;
    hc.threads = threads;
    hc.max_connections = pub_cap;
    hc.idle_timeout_ms = (int)cfg->idle_timeout_ms;
    hc.max_header_bytes = (int)cfg->max_header_bytes;
    hc.max_url_bytes = (int)cfg->max_url_bytes;
    hc.max_body_bytes = 65536;
    hc.busy_poll_us = (int)cfg->busy_poll_us;
    hc.resp_enable = cfg->resp_port != 0;
    hc.resp_address = cfg->resp_address;
    hc.resp_port = (int)cfg->resp_port;
    hc.resp_session_free = api_resp_session_free;
    hc.mc_enable = cfg->mc_port != 0;
    hc.mc_address = cfg->mc_address;
    hc.mc_port = (int)cfg->mc_port;
    hc.grpc_enable = cfg->grpc_port != 0;
    hc.grpc_address = cfg->grpc_address;
    hc.grpc_port = (int)cfg->grpc_port;
    hc.grpc_max_message_bytes = (int)cfg->grpc_max_message_bytes;
    hc.h2_max_concurrent_streams = (int)cfg->h2_max_streams;
    hc.h2_disable = !cfg->h2;
    __atomic_store_n(&d->server, http_server_new(&hc, api_handle, api_thread, d->api,
                                                 cause), __ATOMIC_RELEASE);
    if (d->server == NULL)
        return -1;
    api_set_server(d->api, d->server);
    if (cfg->admin_port != 0) {
        hc.address = cfg->admin_address;
        hc.port = (int)cfg->admin_port;
        hc.threads = 1;
        hc.max_connections = admin_cap;
        hc.resp_enable = 0;
        hc.mc_enable = 0;
        hc.tls_enable = hc.resp_tls_enable = hc.grpc_tls_enable = 0;
        hc.mc_tls_enable = 0;
        hc.grpc_enable = 0;
        __atomic_store_n(&d->admin, http_server_new(&hc, api_handle_admin,
                                                    api_thread_admin, d->api, cause),
                         __ATOMIC_RELEASE);
        if (d->admin == NULL)
            return -1;
    }
    /* Snowflake mode needs the bound port for its ZooKeeper identity. */
    if (cfg->snowflake_enable) {
        int port = http_server_port(d->server);

        if (port < 0)
            port = http_server_tls_port(d->server, HTTP_TLS_HTTP);
        /* the worker-ID store keeps the serial zones record with the ID */
        struct wlease_hook hook = { .claimed = serial_zgate_claimed,
                                    .record = serial_zgate_record,
                                    .arg = d->zgate };

        d->sf = sfconfig_start_with(cfg, port, wake_snowflake, d, &hook,
                                    cause);
        if (d->sf == NULL)
            return -1;
        api_set_snowflake(d->api, d->sf);
    }
    if (http_server_start(d->server, cause) == -1)
        return -1;
    if (d->admin != NULL && http_server_start(d->admin, cause) == -1)
        return -1;
    if (http_server_port(d->server) >= 0)
        log_info("leafd %s listening on http://%s:%d with %d I/O thread(s)%s",
                 LEAFD_VERSION, cfg->listen_address, http_server_port(d->server),
                 threads, cfg->admin_token[0] ? "; admin pages need the admin token" : "");
    if (http_server_tls_port(d->server, HTTP_TLS_HTTP) >= 0)
        log_info("leafd %s listening on https://%s:%d with %d I/O thread(s) "
                 "(client certificates %s)", LEAFD_VERSION, cfg->listen_address,
                 http_server_tls_port(d->server, HTTP_TLS_HTTP), threads,
                 cfg->tls_client_auth == TLS_AUTH_REQUIRED ? "required"
                 : cfg->tls_client_auth == TLS_AUTH_OPTIONAL ? "optional" : "off");
    if (d->admin != NULL)
        log_info("admin pages on http://%s:%d", cfg->admin_address,
                 http_server_port(d->admin));
    if (http_server_resp_port(d->server) >= 0)
        log_info("Redis protocol (RESP) on %s:%d", cfg->resp_address,
                 http_server_resp_port(d->server));
    if (http_server_mc_port(d->server) >= 0)
        log_info("memcached protocol on %s:%d", cfg->mc_address,
                 http_server_mc_port(d->server));
    if (http_server_tls_port(d->server, HTTP_TLS_RESP) >= 0)
        log_info("Redis protocol (RESP) over TLS on %s:%d", cfg->resp_address,
                 http_server_tls_port(d->server, HTTP_TLS_RESP));
    if (http_server_tls_port(d->server, HTTP_TLS_MC) >= 0)
        log_info("memcached protocol over TLS on %s:%d", cfg->mc_address,
                 http_server_tls_port(d->server, HTTP_TLS_MC));
    if (http_server_grpc_port(d->server) >= 0)
        log_info("gRPC on %s:%d", cfg->grpc_address,
                 http_server_grpc_port(d->server));
    if (http_server_tls_port(d->server, HTTP_TLS_GRPC) >= 0)
        log_info("gRPC over TLS (ALPN h2) on %s:%d", cfg->grpc_address,
                 http_server_tls_port(d->server, HTTP_TLS_GRPC));
    return 0;
}

static void
stop(struct leafd *d)
{
    if (d->server != NULL)
        http_server_stop(d->server, (int)d->cfg.shutdown_timeout_ms);
    if (d->admin != NULL)
        http_server_stop(d->admin, 1000);
    loader_stop(d->loader);
    serial_loader_stop(d->serial_loader);
    snowflake_stop(d->sf);
    d->sf = NULL;
    http_server_free(d->server);
    http_server_free(d->admin);
    __atomic_store_n(&d->server, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&d->admin, NULL, __ATOMIC_RELEASE);
    api_free(d->api);
    segments_free(d->segs);
    loader_free(d->loader);
    conceal_free(d->conceal);       /* after the loader and every I/O thread */
    serial_loader_free(d->serial_loader);
    serials_free(d->serials);
    serial_zgate_free(d->zgate);
    store_marks_close();            /* after every loader thread */
    http_tls_free(d->tls);          /* after the servers: their SSLs are gone */
}

int
main(int argc, char **argv)
{
    struct leafd d;
    const char *path = getenv("LEAFD_CONFIG");
    char **ov = xcalloc((size_t)argc + 1, sizeof *ov);
    int nov = 0, check = 0, rc = 0;
    char *cause = NULL;
    const char *decode_arg = NULL;
    char *multi_urls[STORE_MULTI_MAX + 1];
    int nmulti = -1, serial_restart_ok = 0, fence = 0;
    int64_t block_size = 10000000, multi_floor = 0, fence_floor = 0,
            fence_serial = 0;
    struct event *ev_term, *ev_int, *ev_hup;

    memset(&d, 0, sizeof d);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            printf("leafd %s\n", LEAFD_VERSION);
            return 0;
        } else if (strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0) {
            if (++i == argc) {
                fprintf(stderr, "leafd: %s needs a file name\n", a);
                return 2;
            }
            path = argv[i];
        } else if (strncmp(a, "--config=", 9) == 0) {
            path = a + 9;
        } else if (strcmp(a, "--check-config") == 0) {
            check = 1;
        } else if (strcmp(a, "decode") == 0 && i == 1) {
            if (++i == argc) {
                fprintf(stderr, "leafd: decode needs an ID\n");
                return 2;
            }
            decode_arg = argv[i];
        } else if (strcmp(a, "multi-db") == 0 && i == 1) {
            if (++i == argc || strcmp(argv[i], "init") != 0) {
                fprintf(stderr, "leafd: usage: leafd multi-db init URL1 URL2 "
                        "[URL3 ...] [--block-size=N] [--floor=ID] "
                        "[--accept-serial-restart] [-c FILE]\n");
                return 2;
            }
            nmulti = 0;
        } else if (strcmp(a, "db-fence") == 0 && i == 1) {
            fence = 1;
        } else if (fence && strncmp(a, "--floor=", 8) == 0) {
            if (util_parse_i64(a + 8, strlen(a + 8), 0, &fence_floor) == -1 ||
                fence_floor < 1) {
                fprintf(stderr, "leafd: db-fence: --floor must be an ID of 1 "
                        "or more\n");
                return 2;
            }
        } else if (fence && strncmp(a, "--serial-floor=", 15) == 0) {
            if (util_parse_i64(a + 15, strlen(a + 15), 0, &fence_serial) == -1 ||
                fence_serial < 1) {
                fprintf(stderr, "leafd: db-fence: --serial-floor must be 1 or "
                        "more\n");
                return 2;
            }
        } else if (nmulti >= 0 && strncmp(a, "--block-size=", 13) == 0) {
            if (util_parse_i64(a + 13, strlen(a + 13), 0, &block_size) == -1 ||
                block_size < 1000 || block_size > ((int64_t)1 << 50)) {
                fprintf(stderr, "leafd: --block-size must be 1000 to 2^50\n");
                return 2;
            }
        } else if (nmulti >= 0 && strncmp(a, "--floor=", 8) == 0) {
            if (util_parse_i64(a + 8, strlen(a + 8), 0, &multi_floor) == -1 ||
                multi_floor < 1) {
                fprintf(stderr, "leafd: --floor must be an ID of 1 or more\n");
                return 2;
            }
        } else if (nmulti >= 0 && strcmp(a, "--accept-serial-restart") == 0) {
            serial_restart_ok = 1;
        } else if (nmulti >= 0 && a[0] != '-') {
            if (nmulti == STORE_MULTI_MAX) {
                fprintf(stderr, "leafd: multi-db init takes at most %d URLs\n",
                        STORE_MULTI_MAX);
                return 2;
            }
            multi_urls[nmulti++] = argv[i];
        } else if (strncmp(a, "--", 2) == 0 && strchr(a, '=') != NULL) {
            ov[nov++] = argv[i];
        } else {
            fprintf(stderr, "leafd: unknown argument \"%s\" (see leafd --help)\n", a);
            return 2;
        }
    }
    if (path != NULL && *path == '\0')
        path = NULL;
    if (config_load(&d.cfg, path, ov, nov, &cause) == -1) {
        fprintf(stderr, "leafd: %s\n", cause);
        free(cause);
        free(ov);
        config_free(&d.cfg);
        return 2;
    }
    free(ov);
    if (sfconfig_check(&d.cfg, &cause) == -1) {
        fprintf(stderr, "leafd: %s\n", cause);
        free(cause);
        config_free(&d.cfg);
        return 2;
    }
    if (decode_arg != NULL) {
        struct sbuf out = { 0 };

        if (decode_any(&d.cfg, NULL, decode_arg, strlen(decode_arg), &out, &cause) == -1) {
            fprintf(stderr, "leafd: decode: %s\n", cause);
            free(cause);
            sbuf_free(&out);
            config_free(&d.cfg);
            return 1;
        }
        printf("%s\n", out.p);
        sbuf_free(&out);
        config_free(&d.cfg);
        return 0;
    }
    if (fence) {
        if (fence_floor < 1) {
            fprintf(stderr, "leafd: db-fence needs --floor=ID: an ID above "
                    "every ID any node issued (the largest marks_max of the "
                    "nodes' /health)\n");
            config_free(&d.cfg);
            return 2;
        }
        log_init(LOGL_WARN, "");
        store_thread_init();
        rc = store_fence(&d.cfg, fence_floor, fence_serial, stdout, &cause);
        store_thread_end();
        if (rc == -1) {
            fprintf(stderr, "leafd: db-fence: %s\n", cause);
            free(cause);
        }
        config_free(&d.cfg);
        store_library_end();
        return rc == -1 ? 1 : 0;
    }
    if (nmulti >= 0) {
        log_init(LOGL_WARN, "");
        if (store_multi_init(&d.cfg, multi_urls, nmulti, block_size,
                             multi_floor, serial_restart_ok, stdout,
                             &cause) == -1) {
            fprintf(stderr, "leafd: multi-db init: %s\n", cause);
            free(cause);
            config_free(&d.cfg);
            return 1;
        }
        config_free(&d.cfg);
        return 0;
    }
    if (check) {
        struct serials *sv = serials_new(&d.cfg, NULL, &cause);

        if (sv == NULL) {
            fprintf(stderr, "leafd: %s\n", cause);
            free(cause);
            config_free(&d.cfg);
            return 2;
        }
        serials_free(sv);
        {
            struct conceal *cv = conceal_new(&d.cfg, &cause);

            if (cv == NULL && cause != NULL) {
                fprintf(stderr, "leafd: %s\n", cause);
                free(cause);
                config_free(&d.cfg);
                return 2;
            }
            conceal_free(cv);
        }
        if (d.cfg.segment_enable && d.cfg.store == STORE_POSTGRESQL) {
            /* The connection strings, as at start (no connection made). */
            if (store_check_urls(&d.cfg, &cause) == -1) {
                fprintf(stderr, "leafd: %s\n", cause);
                free(cause);
                config_free(&d.cfg);
                return 2;
            }
        }
        if (sfconfig_check_store(&d.cfg, &cause) == -1) {
            fprintf(stderr, "leafd: %s\n", cause);
            free(cause);
            config_free(&d.cfg);
            return 2;
        }
        d.tls = tls_open(&d.cfg, &cause);
        if (d.tls == NULL && cause != NULL) {
            fprintf(stderr, "leafd: %s\n", cause);
            free(cause);
            config_free(&d.cfg);
            return 2;
        }
        http_tls_free(d.tls);
        printf("%s: configuration OK\n", d.cfg.path ? d.cfg.path : "defaults");
        config_free(&d.cfg);
        return 0;
    }
    log_init((enum log_level)d.cfg.log_level, d.cfg.log_file);
    config_log(&d.cfg);
    signal(SIGPIPE, SIG_IGN);

    d.base = event_base_new();
    if (d.base == NULL) {
        log_error("event_base_new failed");
        return 1;
    }
    ev_term = evsignal_new(d.base, SIGTERM, on_stop, &d);
    ev_int = evsignal_new(d.base, SIGINT, on_stop, &d);
    ev_hup = evsignal_new(d.base, SIGHUP, on_hup, &d);
    event_add(ev_term, NULL);
    event_add(ev_int, NULL);
    event_add(ev_hup, NULL);

    if (start(&d, &cause) == -1) {
        log_error("cannot start: %s", cause);
        free(cause);
        rc = 1;
    } else {
        event_base_dispatch(d.base);
    }
    stop(&d);
    if (rc == 0)
        log_info("stopped");
    event_free(ev_term);
    event_free(ev_int);
    event_free(ev_hup);
    event_base_free(d.base);
    config_free(&d.cfg);
    store_library_end();
    return rc;
}
