/* check_workerid_store.c: worker IDs held in a shared store under the
 * lease rule (workerid_lease.c), the same tests for each store: Redis
 * (workerid_redis.c) against a real redis-server that the suite starts on a
 * free loopback port (`redis-server --port P --save ''`) and stops by PID,
 * and MySQL (workerid_mysql.c) against the MariaDB that LEAFD_TEST_MYSQL_URL
 * names (tests/lib/mariadb.sh start DIR), and PostgreSQL (workerid_pg.c)
 * against LEAFD_TEST_PG_URL's cluster, else one of its own
 * (tests/lib/postgresql.sh start DIR, stopped at the end). A TCP proxy between a holder and
 * the store is cut to partition it; clocks are injected. The k8s tcases
 * ask for a fixed worker ID (snowflake.k8s.fence_store). A missing server
 * skips its store's tests, and under CI=1 (or true) fails the run. */
#include <check.h>
#include <hiredis/hiredis.h>
#include <mysql.h>
#include <libpq-fe.h>
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sfcodec.h"
#include "snowflake.h"
#include "util.h"
#include "db_mysql_url.h"
#include "store.h"
#include "idset.h"
#include "procstop.h"
#include "tcpproxy.h"
#include "workerid_lease.h"
#include "workerid_mysql.h"
#include "workerid_pg.h"
#include "workerid_redis.h"

static char tmpdir[64];
static int redis_port;
static pid_t redis_pid;
static int prefix_seq;
/* the store under test (set by the tcase's fixture, in the forked test) */
enum { ST_REDIS, ST_MYSQL, ST_PG };
static int store_kind;
static int64_t lease_ms = 1500;
/* k8s tcases: params() asks for the fixed worker ID K8S_WORKER */
static int k8s_mode;
#define K8S_WORKER 5
static struct db_mysql_target mysql_t;     /* from LEAFD_TEST_MYSQL_URL */
/* PostgreSQL: LEAFD_TEST_PG_URL's parts, or the suite's own cluster's */
static char pg_user[64], pg_pw[64], pg_db[64], pg_dir[64];
static int pg_port;

static void
setup_tmp(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/leafd-wrd-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void
teardown_tmp(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", tmpdir);
}

static char *
tmp_path(const char *name)
{
    return xasprintf("%s/%s", tmpdir, name);
}

/* A free loopback TCP port (bound and released). */
static int
free_port(void)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;

    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        close(fd);
        return -1;
    }
    port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

static int
port_open(int port)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0), ok;

    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

/* Start redis-server on a free port: 0, or -1 when it cannot run. */
static int
redis_start(void)
{
    char port[16], rdb[64];

    if (system("command -v redis-server >/dev/null 2>&1") != 0)
        return -1;
    redis_port = free_port();
    if (redis_port < 0)
        return -1;
    snprintf(port, sizeof port, "%d", redis_port);
    /* A file name no one has: a dump.rdb left in the working directory
     * would be loaded at start (--save '': none is written). */
    snprintf(rdb, sizeof rdb, "check-workerid-store-%d.rdb", (int)getpid());
    redis_pid = fork();
    if (redis_pid == 0) {
        execlp("redis-server", "redis-server", "--port", port, "--bind",
               "127.0.0.1", "--save", "", "--appendonly", "no",
               "--dir", "/tmp", "--dbfilename", rdb,
               "--loglevel", "warning", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 600; i++) {
        if (port_open(redis_port))
            return 0;
        usleep(50000);
    }
    kill(redis_pid, SIGTERM);
    waitpid(redis_pid, NULL, 0);
    redis_pid = 0;
    return -1;
}

static void
redis_stop(void)
{
    if (redis_pid > 0) {
        kill(redis_pid, SIGTERM);
        waitpid(redis_pid, NULL, 0);
        redis_pid = 0;
    }
}

static int64_t
test_clock(void *arg)
{
    return atomic_load((_Atomic int64_t *)arg);
}

/* The wall clock moved *arg ms ahead: a measurement against the store's
 * clock is then off by at most half its round trip, however long the write
 * (and, at a start, the connection and claim before it) took. */
static int64_t
ahead_clock(void *arg)
{
    return util_wall_ms() + atomic_load((_Atomic int64_t *)arg);
}

/* Parameters for identity id with cache file name; the store's prefix is
 * the test's own (prefix). */
static struct wlease_params
params(const char *identity, const char *cache)
{
    struct wlease_params p;

    memset(&p, 0, sizeof p);
    p.identity = identity;
    p.cache_path = cache;
    p.leaf_name = "t";
    p.ip = "10.0.0.1";
    p.port = 7000;
    p.max_worker = 1023;
    p.heartbeat_ms = 100;
    p.lease_ms = lease_ms;
    if (k8s_mode) {
        p.fixed_worker = 1;
        p.worker_id = K8S_WORKER;
        p.source = "k8s";
    }
    return p;
}

static struct wlease *
open_at(const struct wlease_params *p, int port, const char *prefix,
        char **cause)
{
    struct wlease_store st;
    char url[300];

    if (store_kind == ST_PG) {
        snprintf(url, sizeof url, "host=127.0.0.1 port=%d user='%s' "
                 "password='%s' dbname='%s'", port, pg_user, pg_pw, pg_db);
        ck_assert_int_eq(workerid_pg_store(url, "snowflake.postgresql.url",
                                           1000, 1000, &st, cause), 0);
        return wlease_open(p, &st, cause);
    }
    if (store_kind == ST_MYSQL) {
        snprintf(url, sizeof url, "mysql://%s%s%s@127.0.0.1:%d/%s",
                 mysql_t.user, mysql_t.password ? ":" : "",
                 mysql_t.password ? mysql_t.password : "", port,
                 mysql_t.database);
        ck_assert_int_eq(workerid_mysql_store(url, NULL, NULL, 1000, 1000,
                                              &st, cause), 0);
        return wlease_open(p, &st, cause);
    }
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/3", port);
    ck_assert_int_eq(workerid_redis_store(url, prefix, 500, 500, &st, cause),
                     0);
    return wlease_open(p, &st, cause);
}

/* One command on the test's Redis (db 3, as open_at's URL); the reply,
 * never an error (freeReplyObject). */
static redisReply *
redis_cmd(const char *fmt, ...)
{
    redisContext *c = redisConnect("127.0.0.1", redis_port);
    redisReply *r;
    va_list ap;

    ck_assert_msg(c != NULL && !c->err, "redis connect: %s",
                  c != NULL ? c->errstr : "out of memory");
    r = redisCommand(c, "SELECT 3");
    ck_assert_ptr_nonnull(r);
    freeReplyObject(r);
    va_start(ap, fmt);
    r = redisvCommand(c, fmt, ap);
    va_end(ap);
    ck_assert_msg(r != NULL && r->type != REDIS_REPLY_ERROR, "redis %s: %s",
                  fmt, r != NULL ? r->str : c->errstr);
    redisFree(c);
    return r;
}

/* Redis's clock (TIME), ms. */
static int64_t
redis_ms(void)
{
    redisReply *r = redis_cmd("TIME");
    int64_t ms;

    ck_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ms = strtoll(r->element[0]->str, NULL, 10) * 1000 +
         strtoll(r->element[1]->str, NULL, 10) / 1000;
    freeReplyObject(r);
    return ms;
}

/* <prefix>epoch as a number, -1 when missing. */
static int64_t
redis_epoch(const char *prefix)
{
    redisReply *r = redis_cmd("GET %sepoch", prefix);
    int64_t v = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10)
                                              : -1;

    freeReplyObject(r);
    return v;
}

static MYSQL *
mysql_open(void)
{
    MYSQL *db = mysql_init(NULL);

    ck_assert_ptr_nonnull(db);
    ck_assert_msg(mysql_real_connect(db, "127.0.0.1", mysql_t.user,
                                     mysql_t.password, mysql_t.database,
                                     (unsigned)mysql_t.port, NULL, 0) != NULL,
                  "mysql connect: %s", mysql_error(db));
    return db;
}

/* One statement on the test's database (autocommit); mysql_errno. */
static unsigned int
mysql_exec(const char *sql)
{
    MYSQL *db = mysql_open();
    unsigned int err = mysql_query(db, sql) != 0 ? mysql_errno(db) : 0;

    mysql_close(db);
    return err;
}

/* The first column of sql's first row as a number, -1 when no row. */
static int64_t
mysql_i64(const char *sql)
{
    MYSQL *db = mysql_open();
    MYSQL_RES *res;
    MYSQL_ROW row;
    int64_t v = -1;

    ck_assert_msg(mysql_query(db, sql) == 0, "%s: %s", sql, mysql_error(db));
    res = mysql_store_result(db);
    ck_assert_ptr_nonnull(res);
    if ((row = mysql_fetch_row(res)) != NULL && row[0] != NULL)
        v = strtoll(row[0], NULL, 10);
    mysql_free_result(res);
    mysql_close(db);
    return v;
}

static PGconn *
pg_open(void)
{
    char ci[300];
    PGconn *db;

    snprintf(ci, sizeof ci, "host=127.0.0.1 port=%d user='%s' password='%s' "
             "dbname='%s' options='-c client_min_messages=warning'", pg_port,
             pg_user, pg_pw, pg_db);
    db = PQconnectdb(ci);
    ck_assert_msg(PQstatus(db) == CONNECTION_OK, "postgresql connect: %s",
                  PQerrorMessage(db));
    return db;
}

/* One statement (or several, no parameters) on the test's database; 0 or
 * -1 (printed). */
static int
pg_exec(const char *sql)
{
    PGconn *db = pg_open();
    PGresult *r = PQexec(db, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK ||
             PQresultStatus(r) == PGRES_TUPLES_OK;

    if (!ok)
        fprintf(stderr, "%s: %s", sql, PQerrorMessage(db));
    PQclear(r);
    PQfinish(db);
    return ok ? 0 : -1;
}

/* The first column of sql's first row as a number, -1 when no row. */
static int64_t
pg_i64(const char *sql)
{
    PGconn *db = pg_open();
    PGresult *r = PQexec(db, sql);
    int64_t v = -1;

    ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql,
                  PQerrorMessage(db));
    if (PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
        v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    PQfinish(db);
    return v;
}

/* SQL on the store under test (MySQL or PostgreSQL): 0, else an error. */
static int
store_exec(const char *sql)
{
    return store_kind == ST_PG ? pg_exec(sql) : (int)mysql_exec(sql);
}

static int64_t
store_i64(const char *sql)
{
    return store_kind == ST_PG ? pg_i64(sql) : mysql_i64(sql);
}

/* The store's clock, ms: Redis's TIME, or MySQL's NOW(3) as
 * workerid_mysql.c reads it, or PostgreSQL's clock_timestamp(). */
static int64_t
store_ms(void)
{
    if (store_kind == ST_PG)
        return pg_i64("SELECT floor(extract(epoch FROM clock_timestamp()) * "
                      "1000)::bigint");
    if (store_kind == ST_MYSQL)
        return mysql_i64("SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS "
                         "SIGNED)");
    return redis_ms();
}

/* The store's epoch, -1 when missing: <prefix>epoch, or leaf_worker's
 * sentinel row (worker_id -1, identity '~epoch') as fence_ms. */
static int64_t
store_epoch(const char *prefix)
{
    if (store_kind != ST_REDIS)
        return store_i64("SELECT fence_ms FROM leaf_worker WHERE "
                         "worker_id = -1 AND identity = '~epoch'");
    return redis_epoch(prefix);
}

/* The store loses its data: FLUSHALL, or TRUNCATE TABLE leaf_worker. */
static void
store_wipe(void)
{
    if (store_kind != ST_REDIS)
        ck_assert_int_eq(store_exec("TRUNCATE TABLE leaf_worker"), 0);
    else
        freeReplyObject(redis_cmd("FLUSHALL"));
}

/* A fresh key space: a new Redis prefix, or an empty leaf_worker (created
 * by the shipped sql/leaf_worker.sql when missing). Neither has an epoch,
 * so its first claims would gate on the store's clock + unknown_gate_ms
 * (workerid_redis.c, workerid_mysql.c); only the epoch tests want that. */
static char *
fresh_prefix_raw(void)
{
    if (store_kind != ST_REDIS) {
        const char *file = store_kind == ST_PG ?
            "sql/leaf_worker_postgresql.sql" : "sql/leaf_worker.sql";
        FILE *f = fopen(file, "r");
        char sql[4096];
        size_t n;

        ck_assert_msg(f != NULL, "%s (run from the source tree's top)", file);
        n = fread(sql, 1, sizeof sql - 1, f);
        fclose(f);
        sql[n] = '\0';
        ck_assert_int_eq(store_exec(sql), 0);
        ck_assert_int_eq(store_exec("DELETE FROM leaf_worker"), 0);
    }
    return xasprintf("t%d-%d:", (int)getpid(), ++prefix_seq);
}

/* The rest start as on a store whose epoch the operator set to 0 (new,
 * nothing ever issued from it: docs/operations.md), so that they do not
 * wait for it and keep to what they test. */
static char *
fresh_prefix(void)
{
    char *p = fresh_prefix_raw();

    if (store_kind != ST_REDIS)
        ck_assert_int_eq(store_exec("INSERT INTO leaf_worker (worker_id, "
                                    "identity, instance, fence_ms, "
                                    "heartbeat_ms, released) VALUES (-1, "
                                    "'~epoch', '~epoch', 0, 0, 1)"), 0);
    else
        freeReplyObject(redis_cmd("SET %sepoch 0", p));
    return p;
}

static int
store_port(void)
{
    return store_kind == ST_PG ? pg_port :
           store_kind == ST_MYSQL ? mysql_t.port : redis_port;
}

static void
setup_redis(void)
{
    store_kind = ST_REDIS;
    lease_ms = 1500;
    setup_tmp();
}

static void
setup_redis_k8s(void)
{
    setup_redis();
    k8s_mode = 1;
}

static void
setup_mysql_k8s(void)
{
    store_kind = ST_MYSQL;
    lease_ms = 6000;
    k8s_mode = 1;
    setup_tmp();
}

static void
setup_pg(void)
{
    store_kind = ST_PG;
    lease_ms = 6000;
    setup_tmp();
    ck_assert_msg(pg_port > 0, "no PostgreSQL: see %s/start.log (CI=1: a "
                  "failure, not a skip)", pg_dir);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
static void
setup_pg_k8s(void)
{
    setup_pg();
    k8s_mode = 1;
}
#endif

static void
setup_mysql(void)
{
    store_kind = ST_MYSQL;
    lease_ms = 6000;
    setup_tmp();
}

static struct wlease *
open_ok(const struct wlease_params *p, const char *prefix)
{
    char *cause = NULL;
    struct wlease *l = open_at(p, store_port(), prefix, &cause);

    ck_assert_msg(l != NULL, "%s", cause);
    return l;
}

static int64_t
worker_of(struct wlease *l)
{
    int64_t w, f;
    wlease_get(l, &w, &f);
    return w;
}

/* A generator on l's worker ID, no keeper thread, its clock *clk; it owns
 * l from here on. */
static struct snowflake *
sf_on(struct wlease *l, _Atomic int64_t *clk, int64_t fence_step_ms)
{
    struct snowflake_options o;
    char *cause = NULL;
    int64_t worker = -1, fence = 0;
    struct snowflake *sf;

    memset(&o, 0, sizeof o);
    ck_assert_int_eq(sfcodec_layout_init(&o.layout, SFCODEC_LEAF_EPOCH_MS, 41,
                                         0, 10, 12, -1, 0, &cause), 0);
    wlease_get(l, &worker, &fence);
    o.worker_id = worker;
    o.start_fence_ms = fence;
    o.max_backward_ms = 1000;
    o.max_borrow_ms = 10;
    o.fence_step_ms = fence_step_ms;
    o.start_wait_ms = 600000;
    o.count_max = 4096;
    o.clock = test_clock;
    o.clock_arg = clk;
    o.no_thread = 1;
    wlease_backend(l, &o.backend);
    sf = snowflake_create(&o, &cause);
    ck_assert_msg(sf != NULL, "%s", cause);
    return sf;
}

/* --- the URL -------------------------------------------------------------- */

START_TEST(url_forms)
{
    struct workerid_redis_url u;
    char *cause = NULL;

    ck_assert_int_eq(workerid_redis_parse_url("redis://h:7000/2", &u, &cause),
                     0);
    ck_assert_str_eq(u.host, "h");
    ck_assert_int_eq(u.port, 7000);
    ck_assert_int_eq(u.db, 2);
    ck_assert_ptr_null(u.password);
    workerid_redis_url_free(&u);
    ck_assert_int_eq(workerid_redis_parse_url("redis://:s3cr:t@10.0.0.5",
                                              &u, &cause), 0);
    ck_assert_str_eq(u.password, "s3cr:t");
    ck_assert_str_eq(u.host, "10.0.0.5");
    ck_assert_int_eq(u.port, 6379);
    ck_assert_int_eq(u.db, 0);
    workerid_redis_url_free(&u);
    ck_assert_int_eq(workerid_redis_parse_url("unix:///run/r.sock?db=4", &u,
                                              &cause), 0);
    ck_assert_str_eq(u.path, "/run/r.sock");
    ck_assert_int_eq(u.db, 4);
    workerid_redis_url_free(&u);
    {
        const char *bad[] = { "http://h", "redis://", "redis://h:0",
                              "redis://h:99999", "redis://h/x",
                              "redis://pw@h", "unix://", "unix://rel",
                              "unix:///p?db=x", "redis://h:12ab" };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            ck_assert_msg(workerid_redis_parse_url(bad[i], &u, &cause) == -1,
                          "%s accepted", bad[i]);
            ck_assert_ptr_nonnull(strstr(cause, "snowflake.redis.url"));
            free(cause);
            cause = NULL;
        }
    }
}
END_TEST

/* --- the Sentinel text ------------------------------------------------------ */

START_TEST(sentinel_text)
{
    struct workerid_redis_sentinels sv;
    char *cause = NULL, host[16];
    int port = 0;

    ck_assert_int_eq(workerid_redis_parse_sentinels(
                         "10.0.0.1:26379, [::1]:26380 ,s3.example:1", &sv,
                         &cause), 0);
    ck_assert_int_eq(sv.n, 3);
    ck_assert_str_eq(sv.host[0], "10.0.0.1");
    ck_assert_int_eq(sv.port[0], 26379);
    ck_assert_str_eq(sv.host[1], "::1");
    ck_assert_int_eq(sv.port[1], 26380);
    ck_assert_str_eq(sv.host[2], "s3.example");
    ck_assert_int_eq(sv.port[2], 1);
    workerid_redis_sentinels_free(&sv);
    {
        const char *bad[] = { "", "h", "h:", ":1", "h:0", "h:65536",
                              "h:1,", ",h:1", "h:1,,h:2", "::1:26379",
                              "[::1]26379", "[::1:1", "h x:1", "h:1x",
                              "h:-1", "[]:1", "a:1,b:1,a:1" };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            ck_assert_msg(workerid_redis_parse_sentinels(bad[i], &sv,
                                                         &cause) == -1,
                          "%s accepted", bad[i]);
            ck_assert_ptr_nonnull(strstr(cause,
                                         "snowflake.redis.sentinels"));
            ck_assert_int_eq(sv.n, 0);
            free(cause);
            cause = NULL;
        }
    }
    ck_assert_int_eq(workerid_redis_check_master_name("my-master.1", &cause),
                     0);
    ck_assert_int_eq(workerid_redis_check_master_name("", &cause), -1);
    free(cause);
    ck_assert_int_eq(workerid_redis_check_master_name("a b", &cause), -1);
    free(cause);
    /* a Sentinel's answer: an address that fits, or a reason */
    ck_assert_int_eq(workerid_redis_master_addr("10.0.0.5", 8, "6380", 4,
                                                host, sizeof host, &port,
                                                &cause), 0);
    ck_assert_str_eq(host, "10.0.0.5");
    ck_assert_int_eq(port, 6380);
    ck_assert_int_eq(workerid_redis_master_addr("10.0.0.5", 8, "0", 1, host,
                                                sizeof host, &port, &cause),
                     -1);
    free(cause);
    ck_assert_int_eq(workerid_redis_master_addr("a-very-long-host-name", 21,
                                                "1", 1, host, sizeof host,
                                                &port, &cause), -1);
    free(cause);
    ck_assert_int_eq(workerid_redis_master_addr("h\r\n", 3, "1", 1, host,
                                                sizeof host, &port, &cause),
                     -1);
    free(cause);
}
END_TEST

/* --- against redis-server ------------------------------------------------- */

START_TEST(three_nodes_three_ids)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1"), *c2 = tmp_path("2"),
         *c3 = tmp_path("3");
    struct wlease_params p1 = params("10.0.0.1:1", c1),
                         p2 = params("10.0.0.2:1", c2),
                         p3 = params("10.0.0.3:1", c3);
    struct wlease *a = open_ok(&p1, pfx), *b = open_ok(&p2, pfx),
                  *c = open_ok(&p3, pfx);

    ck_assert_int_eq(worker_of(a), 0);
    ck_assert_int_eq(worker_of(b), 1);
    ck_assert_int_eq(worker_of(c), 2);
    wlease_close(a);
    wlease_close(b);
    wlease_close(c);
    free(pfx);
    free(c1);
    free(c2);
    free(c3);
}
END_TEST

/* A restart (its cache file names its last instance) keeps its worker ID at
 * once and gates on the fence the store holds. */
START_TEST(restart_keeps_id)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1"), *c2 = tmp_path("2");
    struct wlease_params p1 = params("10.0.0.1:1", c1),
                         p2 = params("10.0.0.2:1", c2);
    struct wlease *a = open_ok(&p1, pfx), *b = open_ok(&p2, pfx);
    _Atomic int64_t clk;
    struct snowflake *sf;
    struct idset s = {0};
    int64_t w, f;

    ck_assert_int_eq(worker_of(b), 1);
    atomic_store(&clk, util_wall_ms());
    sf = sf_on(b, &clk, 200);       /* fences go to Redis */
    issue_range(sf, &clk, atomic_load(&clk) + 5, 10, &s);
    ck_assert_int_gt(s.n, 0);
    snowflake_stop(sf);
    b = open_ok(&p2, pfx);
    wlease_get(b, &w, &f);
    ck_assert_int_eq(w, 1);
    /* the stored fence gates: at or past the last ID issued */
    ck_assert_int_ge(f, (int64_t)(s.v[s.n - 1] >> 22) +
                        SFCODEC_LEAF_EPOCH_MS);
    free(s.v);
    wlease_close(a);
    wlease_close(b);
    free(pfx);
    free(c1);
    free(c2);
}
END_TEST

/* The same identity from a process that is not its last run, while the
 * first one's lease is live: refused, saying why. */
START_TEST(twin_identity_refused)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1"), *c2 = tmp_path("2");
    struct wlease_params p1 = params("10.0.0.1:1", c1),
                         p2 = params("10.0.0.1:1", c2);
    struct wlease *a = open_ok(&p1, pfx), *b;
    char *cause = NULL;

    b = open_at(&p2, store_port(), pfx, &cause);
    ck_assert_ptr_null(b);
    ck_assert_msg(strstr(cause, "is in use") != NULL, "%s", cause);
    free(cause);
    wlease_close(a);
    free(pfx);
    free(c1);
    free(c2);
}
END_TEST

/* One past the layout's maximum: a clear error with the count in use. */
START_TEST(one_past_max)
{
    char *pfx = fresh_prefix(), *c[4];
    char ident[32];
    struct wlease *l[3], *x;
    char *cause = NULL;
    struct wlease_params p;

    for (int i = 0; i < 4; i++) {
        char n[16];
        snprintf(n, sizeof n, "%d", i);
        c[i] = tmp_path(n);
    }
    for (int i = 0; i < 3; i++) {
        snprintf(ident, sizeof ident, "10.0.0.%d:1", i + 1);
        p = params(ident, c[i]);
        p.max_worker = 2;
        l[i] = open_ok(&p, pfx);
        ck_assert_int_eq(worker_of(l[i]), i);
    }
    p = params("10.0.0.9:1", c[3]);
    p.max_worker = 2;
    x = open_at(&p, store_port(), pfx, &cause);
    ck_assert_ptr_null(x);
    ck_assert_msg(strstr(cause, "all 3 (0..2) are in use") != NULL, "%s",
                  cause);
    free(cause);
    for (int i = 0; i < 3; i++)
        wlease_close(l[i]);
    for (int i = 0; i < 4; i++)
        free(c[i]);
    free(pfx);
}
END_TEST

/* Redis down at start: no worker ID (worker_id_unknown, a 503), not the
 * cache file's. */
START_TEST(store_down_at_start)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1");
    struct wlease_params p1 = params("10.0.0.1:1", c1);
    char *cause = NULL;
    struct wlease *l = open_at(&p1, free_port(), pfx, &cause);
    _Atomic int64_t clk;
    struct snowflake *sf;
    struct snowflake_refusal why;
    uint64_t id;

    ck_assert_msg(l != NULL, "%s", cause);
    ck_assert_int_eq(worker_of(l), -1);
    atomic_store(&clk, util_wall_ms());
    sf = sf_on(l, &clk, 200);
    snowflake_keeper_step(sf);
    ck_assert_int_eq(snowflake_next(sf, 1, &id, &why), SNOWFLAKE_REFUSE);
    ck_assert_str_eq(why.code, "worker_id_unknown");
    snowflake_stop(sf);
    free(pfx);
    free(c1);
}
END_TEST

/* The store unreachable at start, then back: the claim is retried in the
 * background and IDs follow. */
START_TEST(store_back_after_start)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1");
    struct tcpproxy *px = tcpproxy_start(store_port(), 1);
    struct wlease_params p1 = params("10.0.0.1:1", c1);
    char *cause = NULL;
    struct wlease *l;
    _Atomic int64_t clk;
    struct snowflake *sf;
    struct snowflake_refusal why;
    uint64_t id;
    int ok = 0;

    atomic_store(&px->cut, 1);
    l = open_at(&p1, px->port, pfx, &cause);
    ck_assert_msg(l != NULL, "%s", cause);
    ck_assert_int_eq(worker_of(l), -1);
    atomic_store(&clk, util_wall_ms());
    sf = sf_on(l, &clk, 200);
    ck_assert_int_eq(snowflake_next(sf, 1, &id, &why), SNOWFLAKE_REFUSE);
    ck_assert_str_eq(why.code, "worker_id_unknown");
    atomic_store(&px->cut, 0);
    for (int i = 0; i < 600 && !ok; i++) {
        usleep(50000);
        atomic_store(&clk, util_wall_ms());
        snowflake_keeper_step(sf);
        ok = snowflake_next(sf, 1, &id, &why) == SNOWFLAKE_OK;
    }
    ck_assert_msg(ok, "still refused: %s", why.code);
    snowflake_stop(sf);
    tcpproxy_stop(px);
    free(pfx);
    free(c1);
}
END_TEST

/* Redis cut off while running: IDs up to the fence Redis holds, then
 * fence_unconfirmed; after half the lease, worker_lease_expired. */
START_TEST(store_down_while_running)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1");
    struct tcpproxy *px = tcpproxy_start(store_port(), 1);
    struct wlease_params p1 = params("10.0.0.1:1", c1);
    char *cause = NULL;
    struct wlease *l = open_at(&p1, px->port, pfx, &cause);
    _Atomic int64_t clk;
    struct snowflake *sf;
    struct idset s = {0};
    int64_t fence;
    size_t before;

    ck_assert_msg(l != NULL, "%s", cause);
    atomic_store(&clk, util_wall_ms());
    sf = sf_on(l, &clk, 200);
    issue_range(sf, &clk, atomic_load(&clk) + 20, 5, &s);
    ck_assert_int_gt(s.n, 0);

    atomic_store(&px->cut, 1);
    fence = snowflake_fence(sf);
    before = s.n;
    /* within the fence Redis holds: still served */
    issue_range(sf, &clk, atomic_load(&clk) + 20, 5, &s);
    ck_assert_int_gt(s.n, before);
    /* past it: refused (fence_unconfirmed, or the lease rule first when
     * the blocked writes took half the lease), never issued */
    issue_range(sf, &clk, fence + 400, 5, &s);
    ck_assert_msg(strcmp(s.last_code, "fence_unconfirmed") == 0 ||
                  strcmp(s.last_code, "worker_lease_expired") == 0, "%s",
                  s.last_code);
    ck_assert_int_eq(snowflake_fence(sf), fence);
    for (size_t i = 0; i < s.n; i++)
        ck_assert_int_le((int64_t)(s.v[i] >> 22) + SFCODEC_LEAF_EPOCH_MS,
                         snowflake_fence(sf));
    /* half the lease with no write landing: the lease rule stops it (polled
     * for, refused all along, up to a lease and 10 s: the half lease runs
     * from the last write that landed, maybe long before) */
    {
        struct snowflake_refusal why;
        uint64_t id;
        int64_t until = util_mono_ms() + lease_ms + 10000;
        for (;;) {
            snowflake_keeper_step(sf);
            ck_assert_int_eq(snowflake_next(sf, 1, &id, &why),
                             SNOWFLAKE_REFUSE);
            if (strcmp(why.code, "worker_lease_expired") == 0 ||
                util_mono_ms() > until)
                break;
            usleep(20 * 1000);
        }
        ck_assert_str_eq(why.code, "worker_lease_expired");
    }
    snowflake_stop(sf);
    tcpproxy_stop(px);
    free(s.v);
    free(pfx);
    free(c1);
}
END_TEST

/* A holder partitioned from Redis, its clock stepped 5 s ahead, and a
 * taker once the lease expired (one worker ID only, so it must be the
 * same): no ID from both. */
START_TEST(partition_no_duplicates)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1"), *c2 = tmp_path("2");
    struct tcpproxy *px = tcpproxy_start(store_port(), 1);
    struct wlease_params pa = params("10.0.0.1:1", c1),
                         pb = params("10.0.0.2:1", c2);
    char *cause = NULL;
    struct wlease *la, *lb;
    struct snowflake *sa, *sb;
    _Atomic int64_t clka, clkb;
    struct idset ia = {0}, ib = {0};
    int64_t jump, wb, fb, cut_ms;

    pa.max_worker = pb.max_worker = 0;
    /* a lease long enough that B's claim below normally comes while it is
     * live, even on a busy machine */
    pa.lease_ms = pb.lease_ms = 4000;
    la = open_at(&pa, px->port, pfx, &cause);
    ck_assert_msg(la != NULL, "%s", cause);
    atomic_store(&clka, util_wall_ms());
    sa = sf_on(la, &clka, 200);
    issue_first(sa, &clka, 10, &ia);

    cut_ms = util_wall_ms();
    atomic_store(&px->cut, 1);
    jump = util_wall_ms() + 5000;
    atomic_store(&clka, jump);
    issue_range(sa, &clka, jump + 50, 100, &ia);

    /* the lease live: B is refused. (A machine slow enough that the lease
     * ran out since A's last write lets B have it: then only the checks
     * below apply. A holder confirms a write at least every half lease or
     * stops, so its last write is at most half a lease before the cut.) */
    pb.clock = test_clock;
    pb.clock_arg = &clkb;
    atomic_store(&clkb, jump);
    lb = open_at(&pb, store_port(), pfx, &cause);
    if (lb == NULL) {
        /* B tries again until past the lease (polled for, up to a lease
         * and 10 s), refused as in use until then */
        int64_t until = util_mono_ms() + pb.lease_ms + 10000;
        while (lb == NULL) {
            ck_assert_msg(strstr(cause, "in use") != NULL, "%s", cause);
            ck_assert_msg(util_mono_ms() < until, "B still refused: %s",
                          cause);
            free(cause);
            cause = NULL;
            usleep(100 * 1000);
            lb = open_at(&pb, store_port(), pfx, &cause);
        }
        ck_assert_msg(util_wall_ms() - cut_ms >= pb.lease_ms / 2,
                      "B took A's worker ID %lld ms after the cut, its lease "
                      "live", (long long)(util_wall_ms() - cut_ms));
    } else {
        ck_assert_msg(util_wall_ms() - cut_ms >= pb.lease_ms / 2,
                      "B took A's worker ID %lld ms after the cut, its lease "
                      "live", (long long)(util_wall_ms() - cut_ms));
    }
    wlease_get(lb, &wb, &fb);
    ck_assert_int_eq(wb, 0);
    sb = sf_on(lb, &clkb, 200);
    issue_range(sb, &clkb, jump + 50, 100, &ib);
    ck_assert_int_gt(ib.n, 0);
    issue_range(sa, &clka, jump + 100, 100, &ia);

    ck_assert_msg(idset_common(&ia, &ib) == 0, "%zu IDs issued by both",
                  idset_common(&ia, &ib));
    ck_assert(strcmp(ia.last_code, "fence_unconfirmed") == 0 ||
              strcmp(ia.last_code, "worker_lease_expired") == 0);

    /* A reconnects: its next write finds B's nonce, and it is lost */
    atomic_store(&px->cut, 0);
    for (int i = 0; i < 300 && strcmp(ia.last_code, "worker_id_lost") != 0;
         i++) {
        usleep(100 * 1000);
        issue_range(sa, &clka, atomic_load(&clka), 1, &ia);
    }
    ck_assert_str_eq(ia.last_code, "worker_id_lost");
    snowflake_stop(sa);
    snowflake_stop(sb);
    tcpproxy_stop(px);
    free(ia.v);
    free(ib.v);
    free(pfx);
    free(c1);
    free(c2);
}
END_TEST

/* A clean stop with release_on_stop frees the ID for a taker whose clock
 * is past its fence, at once; one whose clock is not is refused. */
START_TEST(release_on_stop)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1"), *c2 = tmp_path("2");
    struct wlease_params pa = params("10.0.0.1:1", c1),
                         pb = params("10.0.0.2:1", c2);
    struct wlease *la, *lb;
    struct snowflake *sa;
    _Atomic int64_t clka, clkb;
    struct idset ia = {0};
    char *cause = NULL;
    int64_t w, f;

    pa.max_worker = pb.max_worker = 0;
    pa.release_on_stop = 1;
    la = open_ok(&pa, pfx);
    atomic_store(&clka, util_wall_ms() + 3000);     /* A runs ahead */
    sa = sf_on(la, &clka, 200);
    issue_first(sa, &clka, 10, &ia);
    snowflake_stop(sa);

    pb.clock = test_clock;
    pb.clock_arg = &clkb;
    atomic_store(&clkb, util_wall_ms());            /* behind A's fence */
    ck_assert_ptr_null(open_at(&pb, store_port(), pfx, &cause));
    free(cause);
    cause = NULL;
    atomic_store(&clkb, atomic_load(&clka) + 10);
    lb = open_ok(&pb, pfx);
    wlease_get(lb, &w, &f);
    ck_assert_int_eq(w, 0);
    ck_assert_int_ge(f, (int64_t)(ia.v[ia.n - 1] >> 22) +
                        SFCODEC_LEAF_EPOCH_MS);
    wlease_close(lb);
    free(ia.v);
    free(pfx);
    free(c1);
    free(c2);
}
END_TEST

/* Issue 28, 3.5: the record kept with the worker ID (workerid_lease.h's
 * hook; the serial zones record) goes from holder to holder. Each write
 * carries the record of its own fence, the release too, so the next
 * holder finds the record of the fence it gates on; a hook that keeps
 * the record (NULL) leaves it as it is; a record longer than the limit
 * arrives too long (the hook refuses it), never cut to a valid one. */
struct rec_hook {
    char    got[WLEASE_REC_MAX + 8];
    size_t  len;
    int64_t fence;
    int     calls;
    int     keep;           /* record: NULL */
};

static void
rec_claimed(void *arg, const char *rec, size_t len, int64_t fence_ms)
{
    struct rec_hook *h = arg;

    ck_assert_uint_le(len, WLEASE_REC_MAX + 1);
    memcpy(h->got, rec, len);
    h->got[len] = '\0';
    h->len = len;
    h->fence = fence_ms;
    h->calls++;
}

static char *
rec_record(void *arg, int64_t fence_ms)
{
    struct rec_hook *h = arg;

    return h->keep ? NULL : xasprintf("r:%" PRId64, fence_ms);
}

START_TEST(record_carried)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1"), *c2 = tmp_path("2"),
         *c3 = tmp_path("3"), want[64], *big;
    struct wlease_params pa = params("10.0.0.1:1", c1),
                         pb = params("10.0.0.2:1", c2),
                         pc = params("10.0.0.3:1", c3);
    struct rec_hook ha = {0}, hb = {0}, hc = {0};
    struct wlease *la, *lb, *lc;
    struct snowflake *sa;
    _Atomic int64_t clka, clkb;
    struct idset ia = {0};

    pa.max_worker = pb.max_worker = pc.max_worker = 0;
    pa.release_on_stop = pb.release_on_stop = pc.release_on_stop = 1;
    pa.hook = (struct wlease_hook){ rec_claimed, rec_record, &ha };
    pb.hook = (struct wlease_hook){ rec_claimed, rec_record, &hb };
    pc.hook = (struct wlease_hook){ rec_claimed, rec_record, &hc };
    la = open_ok(&pa, pfx);
    ck_assert_int_eq(ha.calls, 1);
    ck_assert_str_eq(ha.got, "");           /* a new worker ID: none */
    atomic_store(&clka, util_wall_ms());
    sa = sf_on(la, &clka, 200);
    issue_first(sa, &clka, 10, &ia);
    snowflake_stop(sa);                     /* released, with its record */

    hb.keep = 1;
    pb.clock = test_clock;
    pb.clock_arg = &clkb;
    atomic_store(&clkb, atomic_load(&clka) + 1000);
    lb = open_ok(&pb, pfx);
    ck_assert_int_eq(worker_of(lb), 0);
    snprintf(want, sizeof want, "r:%" PRId64, hb.fence);
    ck_assert_str_eq(hb.got, want);         /* the record of that fence */
    wlease_close(lb);                       /* kept: A's record stays */

    pc.clock = test_clock;
    pc.clock_arg = &clkb;
    atomic_store(&clkb, atomic_load(&clkb) + 1000);
    lc = open_ok(&pc, pfx);
    ck_assert_int_eq(worker_of(lc), 0);
    ck_assert_str_eq(hc.got, want);
    wlease_close(lc);

    /* over the limit in the store: handed over too long */
    big = xcalloc(WLEASE_REC_MAX + 101, 1);
    memset(big, 'x', WLEASE_REC_MAX + 100);
    if (store_kind != ST_REDIS) {
        char *q = xasprintf("UPDATE leaf_worker SET serial_zones = '%s' "
                            "WHERE worker_id = 0", big);
        ck_assert_int_eq(store_exec(q), 0);
        free(q);
    } else {
        freeReplyObject(redis_cmd("HSET %sw:0 zones %s", pfx, big));
    }
    hc.calls = 0;
    atomic_store(&clkb, atomic_load(&clkb) + 1000);
    lc = open_ok(&pc, pfx);
    ck_assert_int_eq(hc.calls, 1);
    ck_assert_uint_eq(hc.len, WLEASE_REC_MAX + 1);
    wlease_close(lc);
    free(big);
    free(ia.v);
    free(pfx);
    free(c1);
    free(c2);
    free(c3);
}
END_TEST

/* A node whose clock is 10 s ahead of the store's refuses to start, and
 * says by how much. */
START_TEST(clock_off_at_start)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1");
    struct wlease_params p = params("10.0.0.1:1", c1);
    _Atomic int64_t ahead;
    char *cause = NULL, *at;
    long long off = 0, rtt = 0;

    /* a clock that moves on: 10 s off within half the round trip + 1 s */
    atomic_store(&ahead, 10000);
    p.clock = ahead_clock;
    p.clock_arg = &ahead;
    p.max_clock_offset_ms = 2000;
    ck_assert_ptr_null(open_at(&p, store_port(), pfx, &cause));
    at = strstr(cause, "clock is ");
    ck_assert_msg(at != NULL, "%s", cause);
    ck_assert_int_eq(sscanf(at, "clock is %lld ms off %*s (round trip %lld ms",
                            &off, &rtt), 2);
    ck_assert_msg(llabs(off - 10000) <= rtt / 2 + 1000, "%s", cause);
    free(cause);
    /* within the limit it starts and reports the offset */
    atomic_store(&ahead, 500);
    {
        struct wlease *l = open_at(&p, store_port(), pfx, &cause);
        struct snowflake_backend b;
        int64_t o = 0;
        ck_assert_msg(l != NULL, "%s", cause);
        wlease_backend(l, &b);
        ck_assert_int_eq(b.clock_offset(b.arg, &o), 0);
        ck_assert_msg(o > -1500 && o < 2500, "offset %lld", (long long)o);
        wlease_close(l);
    }
    free(pfx);
    free(c1);
}
END_TEST

/* The clock steps 10 s ahead while running: the next heartbeat measures
 * it and IDs are refused with clock_offset and the offset. */
START_TEST(clock_off_while_running)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1");
    struct wlease_params p = params("10.0.0.1:1", c1);
    _Atomic int64_t clk;
    struct snowflake *sf;
    struct snowflake_refusal why;
    uint64_t id;
    struct wlease *l;
    struct idset s = {0};
    char *cause = NULL, *at;
    long long off = 0, rtt = 0;
    _Atomic int64_t ahead;
    struct sbuf b = {0};

    /* the lease's clock moves on (see ahead_clock); the generator's is clk */
    atomic_store(&ahead, 0);
    atomic_store(&clk, util_wall_ms());
    p.clock = ahead_clock;
    p.clock_arg = &ahead;
    p.max_clock_offset_ms = 2000;
    l = open_at(&p, store_port(), pfx, &cause);
    ck_assert_msg(l != NULL, "%s", cause);
    sf = sf_on(l, &clk, 200);
    issue_range(sf, &clk, atomic_load(&clk) + 5, 1, &s);
    ck_assert_int_gt(s.n, 0);
    atomic_store(&ahead, 10000);
    for (int i = 0; i < 20; i++) {
        atomic_store(&clk, util_wall_ms() + 10000);
        snowflake_keeper_step(sf);
        usleep(20000);
    }
    ck_assert_int_eq(snowflake_next(sf, 1, &id, &why), SNOWFLAKE_REFUSE);
    ck_assert_str_eq(why.code, "clock_offset");
    ck_assert_int_eq(sscanf(why.message, "this node's clock is %lld", &off),
                     1);
    snowflake_state_json(sf, &b);
    at = strstr(b.p, "\"clock_rtt_ms\":");
    ck_assert_msg(at != NULL && sscanf(at, "\"clock_rtt_ms\":%lld", &rtt) == 1,
                  "%s", b.p);
    ck_assert_msg(llabs(off - 10000) <= rtt / 2 + 1000, "%s (round trip "
                  "%lld ms)", why.message, rtt);
    sbuf_free(&b);
    snowflake_stop(sf);
    free(s.v);
    free(pfx);
    free(c1);
}
END_TEST

/* The keeper thread writes fences and heartbeats while other threads read
 * /snowflake/state and /metrics and take IDs (for the TSan run). */
struct reader {
    pthread_t          th;
    struct snowflake  *sf;
    _Atomic int       *stop;
    size_t             ids;
};

static void *
reader_main(void *arg)
{
    struct reader *r = arg;
    uint64_t ids[16];
    struct snowflake_refusal why;

    while (!atomic_load(r->stop)) {
        struct sbuf b = {0};
        snowflake_state_json(r->sf, &b);
        ck_assert_ptr_nonnull(strstr(b.p, "\"store_fence_ms\""));
        free(b.p);
        memset(&b, 0, sizeof b);
        snowflake_metrics(r->sf, &b);
        ck_assert_ptr_nonnull(strstr(b.p, "heartbeat_age_seconds"));
        free(b.p);
        if (snowflake_next(r->sf, 16, ids, &why) == SNOWFLAKE_OK)
            r->ids += 16;
    }
    return NULL;
}

START_TEST(readers_while_keeping)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1");
    struct wlease_params p = params("10.0.0.1:1", c1);
    struct snowflake_options o;
    struct wlease *l = open_ok(&p, pfx);
    struct reader r[2];
    _Atomic int stop = 0;
    struct snowflake *sf;
    char *cause = NULL;
    int64_t worker, fence;

    memset(&o, 0, sizeof o);
    ck_assert_int_eq(sfcodec_layout_init(&o.layout, SFCODEC_LEAF_EPOCH_MS, 41,
                                         0, 10, 12, -1, 0, &cause), 0);
    wlease_get(l, &worker, &fence);
    o.worker_id = worker;
    o.start_fence_ms = fence;
    o.max_backward_ms = 1000;
    o.max_borrow_ms = 10;
    o.fence_step_ms = 200;
    o.start_wait_ms = 5000;
    o.count_max = 4096;
    wlease_backend(l, &o.backend);
    sf = snowflake_create(&o, &cause);
    ck_assert_msg(sf != NULL, "%s", cause);
    for (int i = 0; i < 2; i++) {
        r[i].sf = sf;
        r[i].stop = &stop;
        r[i].ids = 0;
        ck_assert_int_eq(pthread_create(&r[i].th, NULL, reader_main, &r[i]),
                         0);
    }
    usleep(800 * 1000);         /* several fence steps and heartbeats */
    atomic_store(&stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(r[i].th, NULL);
    ck_assert_int_gt(r[0].ids + r[1].ids, 0);
    snowflake_stop(sf);
    free(pfx);
    free(c1);
}
END_TEST

/* Eight nodes starting at the same moment: eight different IDs. */
struct racer {
    pthread_t       th;
    char            ident[32], *cache, *prefix;
    _Atomic int    *go;
    struct wlease  *l;
    char           *cause;
};

static void *
racer_main(void *arg)
{
    struct racer *r = arg;
    struct wlease_params p = params(r->ident, r->cache);

    while (!atomic_load(r->go))
        ;
    r->l = open_at(&p, store_port(), r->prefix, &r->cause);
    return NULL;
}

START_TEST(simultaneous_starts)
{
    char *pfx = fresh_prefix();
    struct racer r[8];
    _Atomic int go = 0;
    int seen[8] = {0};

    memset(r, 0, sizeof r);
    for (int i = 0; i < 8; i++) {
        char n[16];
        snprintf(n, sizeof n, "r%d", i);
        snprintf(r[i].ident, sizeof r[i].ident, "10.0.1.%d:1", i);
        r[i].cache = tmp_path(n);
        r[i].prefix = pfx;
        r[i].go = &go;
        ck_assert_int_eq(pthread_create(&r[i].th, NULL, racer_main, &r[i]),
                         0);
    }
    atomic_store(&go, 1);
    for (int i = 0; i < 8; i++) {
        int64_t w;
        pthread_join(r[i].th, NULL);
        ck_assert_msg(r[i].l != NULL, "%s", r[i].cause);
        w = worker_of(r[i].l);
        ck_assert_int_ge(w, 0);
        ck_assert_int_lt(w, 8);
        ck_assert_msg(!seen[w], "worker ID %d given twice", (int)w);
        seen[w] = 1;
    }
    for (int i = 0; i < 8; i++) {
        wlease_close(r[i].l);
        free(r[i].cache);
    }
    free(pfx);
}
END_TEST

static int
in_ci(void)
{
    const char *ci = getenv("CI");
    return ci != NULL && (strcmp(ci, "1") == 0 || strcmp(ci, "true") == 0);
}

/* --- k8s: a fixed worker ID (the pod's ordinal + offset) ------------------ */

/* The identity the store shows for worker (malloc'd; "" when none). */
static char *
store_holder(const char *prefix, int64_t worker)
{
    char buf[256] = "";

    if (store_kind == ST_PG) {
        PGconn *db = pg_open();
        PGresult *r;
        char q[128];

        snprintf(q, sizeof q, "SELECT identity, released FROM leaf_worker "
                 "WHERE worker_id = %" PRId64, worker);
        r = PQexec(db, q);
        ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
        if (PQntuples(r) > 0)
            snprintf(buf, sizeof buf, "%s%s", PQgetvalue(r, 0, 0),
                     strcmp(PQgetvalue(r, 0, 1), "0") != 0 ? " (released)" :
                     "");
        PQclear(r);
        PQfinish(db);
    } else if (store_kind == ST_MYSQL) {
        MYSQL *db = mysql_init(NULL);
        MYSQL_RES *res;
        MYSQL_ROW row;
        char q[128];

        ck_assert_ptr_nonnull(mysql_real_connect(db, "127.0.0.1",
                              mysql_t.user, mysql_t.password,
                              mysql_t.database, (unsigned)mysql_t.port, NULL,
                              0));
        snprintf(q, sizeof q, "SELECT identity, released FROM leaf_worker "
                 "WHERE worker_id = %" PRId64, worker);
        ck_assert_int_eq(mysql_query(db, q), 0);
        res = mysql_store_result(db);
        ck_assert_ptr_nonnull(res);
        if ((row = mysql_fetch_row(res)) != NULL)
            snprintf(buf, sizeof buf, "%s%s", row[0],
                     strcmp(row[1], "0") != 0 ? " (released)" : "");
        mysql_free_result(res);
        mysql_close(db);
    } else {
        char cmd[600];
        FILE *f;
        size_t n;

        snprintf(cmd, sizeof cmd, "redis-cli -p %d -n 3 --raw HMGET "
                 "'%sw:%" PRId64 "' identity released", redis_port, prefix,
                 worker);
        f = popen(cmd, "r");
        ck_assert_ptr_nonnull(f);
        n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        pclose(f);
        /* "identity\nreleased\n" */
        if (strstr(buf, "\n1\n") != NULL)
            strcpy(strstr(buf, "\n1\n"), " (released)");
        else if (strchr(buf, '\n') != NULL)
            *strchr(buf, '\n') = '\0';
    }
    return xstrdup(buf);
}

/* The worker ID is the one asked for (not the lowest free, 0), and the
 * store shows it held by the pod name; /snowflake/state's source is k8s. */
START_TEST(k8s_fixed_id_held_by_pod)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1"), *who;
    struct wlease_params p = params("web-2", c1);
    struct wlease *l = open_ok(&p, pfx);
    struct snowflake_backend b;

    ck_assert_int_eq(worker_of(l), K8S_WORKER);
    who = store_holder(pfx, K8S_WORKER);
    ck_assert_str_eq(who, "web-2");
    free(who);
    wlease_backend(l, &b);
    ck_assert_str_eq(b.source(b.arg), "k8s");
    /* nobody holds 0: the claim did not take the lowest free one */
    who = store_holder(pfx, 0);
    ck_assert_str_eq(who, "");
    free(who);
    wlease_close(l);
    free(pfx);
    free(c1);
}
END_TEST

/* A pod restarted with its cache file gone (a lost or replaced volume)
 * still gates on the fence its last run confirmed in the store: nothing at
 * or below it, so no ID of the last run again. */
START_TEST(k8s_restart_without_cache)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1");
    struct wlease_params p = params("web-2", c1);
    struct wlease *l = open_ok(&p, pfx);
    _Atomic int64_t clk;
    struct snowflake *sf;
    struct idset s1 = {0}, s2 = {0};
    int64_t w, f, last;

    atomic_store(&clk, util_wall_ms());
    sf = sf_on(l, &clk, 1000);      /* fences up to 1 s ahead */
    issue_range(sf, &clk, atomic_load(&clk) + 20, 5, &s1);
    ck_assert_int_gt(s1.n, 0);
    snowflake_stop(sf);
    last = (int64_t)(s1.v[s1.n - 1] >> 22) + SFCODEC_LEAF_EPOCH_MS;
    ck_assert_int_eq(unlink(c1), 0);

    l = open_ok(&p, pfx);           /* the same pod name, a new process */
    wlease_get(l, &w, &f);
    ck_assert_int_eq(w, K8S_WORKER);
    /* the store's fence, at or past what was issued, is the gate */
    ck_assert_int_ge(f, last);
    /* the new process's clock where the last run's was (however long the
     * restart took): nothing until it passes the gate */
    atomic_store(&clk, last - 20);
    sf = sf_on(l, &clk, 1000);
    issue_range(sf, &clk, last, 5, &s2);
    ck_assert_uint_eq(s2.n, 0);
    ck_assert_str_eq(s2.last_code, "fence_not_passed");
    atomic_store(&clk, f - 20);
    issue_range(sf, &clk, f + 20, 5, &s2);
    ck_assert_int_gt(s2.n, 0);
    for (size_t i = 0; i < s2.n; i++)
        ck_assert_int_gt((int64_t)(s2.v[i] >> 22) + SFCODEC_LEAF_EPOCH_MS,
                         f);
    ck_assert_int_eq(idset_common(&s1, &s2), 0);
    snowflake_stop(sf);
    free(s1.v);
    free(s2.v);
    free(pfx);
    free(c1);
}
END_TEST

/* Another identity with a live lease on the worker ID: another pod (two
 * StatefulSets with overlapping offsets) or a node that got it as the
 * lowest free one. Refused, naming the holder. */
START_TEST(k8s_other_holder_refused)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1"), *c2 = tmp_path("2"),
         *c3 = tmp_path("3"), *c4 = tmp_path("4"), *cause = NULL;
    struct wlease_params pa = params("web-2", c1), pb = params("api-5", c2),
                         pn = params("10.0.0.9:7000", c3),
                         pc = params("web-0", c4);
    struct wlease *a = open_ok(&pa, pfx), *x, *n;

    x = open_at(&pb, store_port(), pfx, &cause);
    ck_assert_ptr_null(x);
    ck_assert_msg(strstr(cause, "worker ID 5 is held by web-2") != NULL,
                  "%s", cause);
    ck_assert_msg(strstr(cause, "api-5 cannot have it") != NULL, "%s",
                  cause);
    free(cause);
    cause = NULL;
    /* a node of the same store without k8s gets the lowest free ID, 0 */
    pn.fixed_worker = 0;
    n = open_ok(&pn, pfx);
    ck_assert_int_eq(worker_of(n), 0);
    pc.worker_id = 0;
    x = open_at(&pc, store_port(), pfx, &cause);
    ck_assert_ptr_null(x);
    ck_assert_msg(strstr(cause, "worker ID 0 is held by 10.0.0.9:7000") !=
                  NULL, "%s", cause);
    free(cause);
    wlease_close(a);
    wlease_close(n);
    free(pfx);
    free(c1);
    free(c2);
    free(c3);
    free(c4);
}
END_TEST

/* The pod's worker ID changed (snowflake.k8s.ordinal_offset): it holds
 * the new one, and its old one is freed, fence kept, for another to take. */
START_TEST(k8s_offset_changed)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1"), *c2 = tmp_path("2"),
         *who;
    struct wlease_params p = params("web-2", c1), q = params("api-0", c2);
    struct wlease *l = open_ok(&p, pfx), *o;

    wlease_close(l);
    p.worker_id = K8S_WORKER + 1;
    l = open_ok(&p, pfx);
    ck_assert_int_eq(worker_of(l), K8S_WORKER + 1);
    who = store_holder(pfx, K8S_WORKER + 1);
    ck_assert_str_eq(who, "web-2");
    free(who);
    who = store_holder(pfx, K8S_WORKER);
    ck_assert_msg(strstr(who, "(released)") != NULL, "%s", who);
    free(who);
    o = open_ok(&q, pfx);
    ck_assert_int_eq(worker_of(o), K8S_WORKER);
    wlease_close(o);
    wlease_close(l);
    free(pfx);
    free(c1);
    free(c2);
}
END_TEST

/* The fence a persist confirmed (SNOWFLAKE_PERSIST_*) for l, fence_ms. */
static int
persist_at(struct wlease *l, int64_t fence_ms)
{
    struct snowflake_backend b;
    char *cause = NULL;
    int rc;

    wlease_backend(l, &b);
    rc = b.persist(b.arg, fence_ms, &cause);
    free(cause);
    return rc;
}

/* Pods of one name in two namespaces on one store are two identities
 * ("<namespace>/<pod>", as sfconfig.c builds them): the second is refused,
 * naming the first, which keeps its worker ID; the bare pod name made them
 * one identity, each taking the ID from the other at its start, for ever
 * (worker_id_lost). */
START_TEST(k8s_namespaces_apart)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1"), *c2 = tmp_path("2"),
         *cause = NULL;
    struct wlease_params pa = params("prod/web-2", c1),
                         pb = params("stage/web-2", c2);
    struct wlease *a = open_ok(&pa, pfx), *b;

    ck_assert_int_eq(worker_of(a), K8S_WORKER);
    b = open_at(&pb, store_port(), pfx, &cause);
    ck_assert_ptr_null(b);
    ck_assert_msg(strstr(cause, "is held by prod/web-2") != NULL &&
                  strstr(cause, "stage/web-2 cannot have it") != NULL, "%s",
                  cause);
    free(cause);
    ck_assert_int_eq(persist_at(a, util_wall_ms() + 1000),
                     SNOWFLAKE_PERSIST_OK);
    wlease_close(a);
    free(pfx);
    free(c1);
    free(c2);
}
END_TEST

/* A pod upgraded from the bare-name identity ("web-2") to
 * "<namespace>/<pod>" takes its own row back at once, even from the old
 * run's live lease, and gates on its fence; the old run confirms nothing
 * more. Without the alias it would be refused until the lease ran out. A
 * pod of that name in another namespace is refused once the row is
 * "prod/web-2"'s. */
START_TEST(k8s_upgrade_from_bare_name)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1"), *c2 = tmp_path("2"),
         *c3 = tmp_path("3"), *cause = NULL, *who;
    struct wlease_params po = params("web-2", c1),
                         pn = params("prod/web-2", c2),
                         ps = params("stage/web-2", c3);
    struct wlease *o = open_ok(&po, pfx), *n;
    int64_t fence = util_wall_ms() + 2000, w, f;

    ck_assert_int_eq(persist_at(o, fence), SNOWFLAKE_PERSIST_OK);
    ck_assert_ptr_null(open_at(&pn, store_port(), pfx, &cause));
    ck_assert_msg(strstr(cause, "is held by web-2") != NULL, "%s", cause);
    free(cause);
    cause = NULL;
    pn.alias = "web-2";
    n = open_ok(&pn, pfx);
    wlease_get(n, &w, &f);
    ck_assert_int_eq(w, K8S_WORKER);
    ck_assert_int_ge(f, fence);
    who = store_holder(pfx, K8S_WORKER);
    ck_assert_str_eq(who, "prod/web-2");
    free(who);
    ck_assert_int_eq(persist_at(o, fence + 1000), SNOWFLAKE_PERSIST_FAILED);
    ps.alias = "web-2";
    ck_assert_ptr_null(open_at(&ps, store_port(), pfx, &cause));
    ck_assert_msg(strstr(cause, "is held by prod/web-2") != NULL, "%s",
                  cause);
    free(cause);
    wlease_close(o);
    wlease_close(n);
    free(pfx);
    free(c1);
    free(c2);
    free(c3);
}
END_TEST

/* The k8s tcases: these, and the store down at start / while running as
 * for any store. */
static void
k8s_tests(TCase *tc)
{
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, k8s_fixed_id_held_by_pod);
    tcase_add_test(tc, k8s_restart_without_cache);
    tcase_add_test(tc, k8s_other_holder_refused);
    tcase_add_test(tc, k8s_offset_changed);
    tcase_add_test(tc, k8s_namespaces_apart);
    tcase_add_test(tc, k8s_upgrade_from_bare_name);
    tcase_add_test(tc, store_down_at_start);
    tcase_add_test(tc, store_back_after_start);
    tcase_add_test(tc, store_down_while_running);
}

/* A row for identity at worker, its lease long expired, as a run under a
 * wider layout left it: leaf_worker's row, or Redis's hash and id: key. */
static void
plant_stale(const char *prefix, int64_t worker, const char *identity)
{
    int64_t now = store_ms(), fence = now - 1000, hb = now - 3 * lease_ms;

    if (store_kind != ST_REDIS) {
        char q[300];
        snprintf(q, sizeof q, "INSERT INTO leaf_worker VALUES (%" PRId64
                 ", '%s', 'oldrun', %" PRId64 ", %" PRId64 ", 0, NULL)", worker,
                 identity, fence, hb);
        ck_assert_int_eq(store_exec(q), 0);
        return;
    }
    freeReplyObject(redis_cmd("HSET %sw:%" PRId64 " identity %s instance "
                              "oldrun fence %" PRId64 " hb %" PRId64
                              " released 0", prefix, worker, identity, fence,
                              hb));
    freeReplyObject(redis_cmd("SET %sid:%s %" PRId64, prefix, identity,
                              worker));
}

/* worker_bits lowered: the identity's row (worker ID 700) is past the new
 * highest (255). The claim ends at once with an ID within (the lowest
 * free, 0), and frees the old row (its fence kept), rather than retrying
 * for ever on leaf_worker's UNIQUE identity. */
START_TEST(bits_lowered_row_past_max)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1"), *who;
    struct wlease_params p = params("10.0.0.1:1", c1);
    struct wlease *l;

    plant_stale(pfx, 700, "10.0.0.1:1");
    p.max_worker = 255;
    p.release_on_stop = 1;          /* a clean stop before the raise */
    l = open_ok(&p, pfx);
    ck_assert_int_eq(worker_of(l), 0);
    who = store_holder(pfx, 0);
    ck_assert_str_eq(who, "10.0.0.1:1");
    free(who);
    who = store_holder(pfx, 700);
    ck_assert_msg(strstr(who, "(released)") != NULL, "%s", who);
    free(who);
    wlease_close(l);
    /* raised again: the same identity keeps the ID it holds now */
    p.max_worker = 1023;
    l = open_ok(&p, pfx);
    ck_assert_int_eq(worker_of(l), 0);
    wlease_close(l);
    free(pfx);
    free(c1);
}
END_TEST


/* Two datacenters' ranges in one store (snowflake.worker_id_min/_max):
 * each node claims the lowest free ID of its own range, a full range is
 * refused naming the range and what to do, and never spills into the
 * other, not even into an ID the other range released. */
START_TEST(ranges_apart)
{
    char *pfx = fresh_prefix(), *c[8], *cause = NULL;
    struct wlease *a[3], *b[3], *x;
    struct wlease_params p;
    char ident[32];

    for (int i = 0; i < 8; i++) {
        char n[16];
        snprintf(n, sizeof n, "%d", i);
        c[i] = tmp_path(n);
    }
    for (int i = 0; i < 3; i++) {
        /* B first: its lowest free is its range's first, not 0 */
        snprintf(ident, sizeof ident, "10.0.1.%d:1", i + 1);
        p = params(ident, c[i]);
        p.min_worker = 512;
        p.max_worker = 514;
        b[i] = open_ok(&p, pfx);
        ck_assert_int_eq(worker_of(b[i]), 512 + i);
        snprintf(ident, sizeof ident, "10.0.0.%d:1", i + 1);
        p = params(ident, c[3 + i]);
        p.max_worker = 2;
        p.release_on_stop = 1;
        a[i] = open_ok(&p, pfx);
        ck_assert_int_eq(worker_of(a[i]), i);
    }
    /* a freed ID of range A (released, fence passed) is no use to B */
    wlease_close(a[1]);
    usleep(20000);
    p = params("10.0.1.9:1", c[6]);
    p.min_worker = 512;
    p.max_worker = 514;
    x = open_at(&p, store_port(), pfx, &cause);
    ck_assert_ptr_null(x);
    ck_assert_msg(strstr(cause, "all 3 (512..514) are in use") != NULL &&
                  strstr(cause, "snowflake.worker_id_min..worker_id_max") !=
                  NULL, "%s", cause);
    free(cause);
    cause = NULL;
    /* ... while A takes it back (a claim that timed out on a busy machine,
     * DOWN: no worker ID yet, is made again, up to 30 s; a CI run under
     * ASan at load 10 had one) */
    p = params("10.0.0.9:1", c[7]);
    p.max_worker = 2;
    for (int tries = 0;; tries++) {
        x = open_ok(&p, pfx);
        if (worker_of(x) >= 0 || tries == 300)
            break;
        wlease_close(x);
        usleep(100000);
    }
    ck_assert_int_eq(worker_of(x), 1);
    wlease_close(x);
    wlease_close(a[0]);
    wlease_close(a[2]);
    for (int i = 0; i < 3; i++)
        wlease_close(b[i]);
    for (int i = 0; i < 8; i++)
        free(c[i]);
    free(pfx);
}
END_TEST

/* The range moved (a node moved to the other datacenter's range, or
 * hand-offset IDs replaced by a range): the identity's row outside it is
 * freed (its fence kept) and it takes one inside; an empty range and a
 * fixed worker ID outside it are refused at open. */
START_TEST(range_moved_row_outside)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1"), *who, *cause = NULL;
    struct wlease_params p = params("10.0.0.1:1", c1);
    struct wlease *l;

    plant_stale(pfx, 3, "10.0.0.1:1");
    p.min_worker = 512;
    p.max_worker = 1023;
    l = open_ok(&p, pfx);
    ck_assert_int_eq(worker_of(l), 512);
    who = store_holder(pfx, 3);
    ck_assert_msg(strstr(who, "(released)") != NULL, "%s", who);
    free(who);
    wlease_close(l);
    p.min_worker = 600;
    p.max_worker = 599;
    ck_assert_ptr_null(open_at(&p, store_port(), pfx, &cause));
    ck_assert_msg(strstr(cause, "snowflake.worker_id_min 600 is above") !=
                  NULL, "%s", cause);
    free(cause);
    cause = NULL;
    p.min_worker = 512;
    p.max_worker = 1023;
    p.fixed_worker = 1;
    p.worker_id = 5;
    ck_assert_ptr_null(open_at(&p, store_port(), pfx, &cause));
    ck_assert_msg(strstr(cause, "outside 512..1023") != NULL, "%s", cause);
    free(cause);
    free(pfx);
    free(c1);
}
END_TEST

static void
store_tests(TCase *tc)
{
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, three_nodes_three_ids);
    tcase_add_test(tc, restart_keeps_id);
    tcase_add_test(tc, twin_identity_refused);
    tcase_add_test(tc, one_past_max);
    tcase_add_test(tc, store_down_at_start);
    tcase_add_test(tc, store_back_after_start);
    tcase_add_test(tc, store_down_while_running);
    tcase_add_test(tc, partition_no_duplicates);
    tcase_add_test(tc, release_on_stop);
    tcase_add_test(tc, record_carried);
    tcase_add_test(tc, simultaneous_starts);
    tcase_add_test(tc, clock_off_at_start);
    tcase_add_test(tc, clock_off_while_running);
    tcase_add_test(tc, readers_while_keeping);
    tcase_add_test(tc, bits_lowered_row_past_max);
    tcase_add_test(tc, ranges_apart);
    tcase_add_test(tc, range_moved_row_outside);
}

/* Redis lost its data (the keys gone): the holder's next fence write finds
 * no hash and the ID is lost for good, with a cause that says so rather
 * than naming another holder. */
START_TEST(redis_keys_gone)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1"), *cause = NULL;
    struct wlease_params p = params("10.0.0.1:1", c1);
    struct wlease *l = open_ok(&p, pfx);
    struct snowflake_backend b;
    char cmd[512];

    ck_assert_int_eq(worker_of(l), 0);
    wlease_backend(l, &b);
    ck_assert_int_eq(b.persist(b.arg, util_wall_ms() + 1000, &cause),
                     SNOWFLAKE_PERSIST_OK);
    snprintf(cmd, sizeof cmd, "redis-cli -p %d -n 3 DEL '%sw:0' "
             "'%sid:10.0.0.1:1' >/dev/null", redis_port, pfx, pfx);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(b.persist(b.arg, util_wall_ms() + 2000, &cause),
                     SNOWFLAKE_PERSIST_FAILED);
    ck_assert_msg(cause != NULL && strstr(cause, "Redis lost its data"),
                  "%s", cause ? cause : "(no cause)");
    ck_assert_int_eq(b.tick(b.arg, util_wall_ms()), SNOWFLAKE_TICK_LOST);
    free(cause);
    b.close(b.arg);
    free(pfx);
    free(c1);
}
END_TEST

/* A store's server stopped for ms (SIGSTOP): pause_for stops pid and
 * starts the thread that sends SIGCONT at a->at (mono; the caller may
 * bring it forward), to join after the call. */
struct pause {
    pid_t            pid;
    _Atomic int64_t  at;
};

static void *
resume_later(void *arg)
{
    struct pause *a = arg;

    while (util_mono_ms() < atomic_load(&a->at))
        usleep(10000);
    kill(a->pid, SIGCONT);
    return NULL;
}

static pthread_t
pause_for(pid_t pid, int64_t ms, struct pause *a)
{
    pthread_t th;

    proc_stop(pid);
    a->pid = pid;
    atomic_store(&a->at, util_mono_ms() + ms);
    ck_assert_int_eq(pthread_create(&th, NULL, resume_later, a), 0);
    return th;
}

static struct wlease_store slow_inner;  /* the store slow_fence wraps */
static int slow_fences;                 /* fence writes so far */
static pid_t slow_pid;                  /* its server */

/* The store's fence write, with its server paused over the first one. */
static int
slow_fence(void *arg, int64_t worker, const char *nonce, int64_t fence_ms,
           int starting, int64_t *store_ms, char **cause)
{
    struct pause pa;
    pthread_t th;
    int rc;

    if (slow_fences++ > 0)
        return slow_inner.fence(arg, worker, nonce, fence_ms, starting,
                                store_ms, cause);
    ck_assert(starting);                        /* the start's clock check */
    th = pause_for(slow_pid, 1500, &pa);
    rc = slow_inner.fence(arg, worker, nonce, fence_ms, starting, store_ms,
                          cause);
    pthread_join(th, NULL);
    return rc;
}

/* A slow store at start (a busy store or machine; here its server, pid,
 * stopped for 1.5 s over the claim, then again over its first fence write,
 * the clock check): the start waits with the store's starting timeout, not
 * a fence write's in service, and gets worker ID 0. slow_inner is the
 * store; the lease, to close. */
static struct wlease *
slow_start(const struct wlease_params *p, pid_t pid)
{
    struct wlease_store st = slow_inner;
    struct wlease *l;
    struct pause pa;
    pthread_t th;
    char *cause = NULL;

    st.fence = slow_fence;
    slow_fences = 0;
    slow_pid = pid;
    th = pause_for(pid, 1500, &pa);
    l = wlease_open(p, &st, &cause);
    pthread_join(th, NULL);
    ck_assert_msg(l != NULL, "%s", cause);
    ck_assert_int_eq(worker_of(l), 0);
    ck_assert_int_ge(slow_fences, 1);           /* the clock check ran */
    return l;
}

/* Redis: 500 ms in service (the heartbeat's in leafd). Before, a start on
 * a busy machine failed ("redis EVAL: Resource temporarily unavailable");
 * with one timeout for both, this fails. */
START_TEST(slow_store_at_start)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1"), *cause = NULL;
    struct wlease_params p;
    char url[300];

    snprintf(url, sizeof url, "redis://127.0.0.1:%d/3", redis_port);
    ck_assert_int_eq(workerid_redis_store(url, pfx, 500, 60000, &slow_inner,
                                          &cause), 0);
    p = params("10.0.0.1:1", c1);
    wlease_close(slow_start(&p, redis_pid));
    free(pfx);
    free(c1);
}
END_TEST

/* MySQL: the client fixes its timeouts when it connects, so the start has
 * a connection of its own (20 s here; 1 s in service). With one timeout of
 * 1 s for both, as before, the start had no worker ID. Then a fence write
 * in service, with MariaDB stopped for 10 s: DOWN after its 1 s, not an
 * answer after the start connection's wait. */
START_TEST(slow_mysql_at_start)
{
    char *pfx = fresh_prefix();     /* for MySQL: the table, with epoch 0 */
    char *c1 = tmp_path("1"), *cause = NULL, path[300], url[300];
    const char *dir = getenv("LEAFD_TEST_MYSQL_DIR");
    struct wlease_params p = params("10.0.0.1:1", c1);
    struct wlease *l;
    struct pause pa;
    pthread_t th;
    int64_t store_ms;
    FILE *f;
    int pid = 0, rc;

    ck_assert_msg(dir != NULL && *dir != '\0', "LEAFD_TEST_MYSQL_DIR (the "
                  "test MariaDB's directory, its pid file) is not set");
    snprintf(path, sizeof path, "%s/pid", dir);
    f = fopen(path, "r");
    ck_assert_msg(f != NULL && fscanf(f, "%d", &pid) == 1, "%s: no pid", path);
    fclose(f);
    snprintf(url, sizeof url, "mysql://%s%s%s@127.0.0.1:%d/%s", mysql_t.user,
             mysql_t.password ? ":" : "",
             mysql_t.password ? mysql_t.password : "", store_port(),
             mysql_t.database);
    ck_assert_int_eq(workerid_mysql_store(url, NULL, NULL, 1000, 20000,
                                          &slow_inner, &cause), 0);
    l = slow_start(&p, (pid_t)pid);
    th = pause_for((pid_t)pid, 10000, &pa);
    rc = slow_inner.fence(wlease_store_arg(l), 0, "not-the-holder", 1, 0,
                          &store_ms, &cause);
    atomic_store(&pa.at, 0);                    /* resume now */
    pthread_join(th, NULL);
    ck_assert_msg(rc == WLEASE_DOWN, "a fence write in service with MariaDB "
                  "stopped: %d (%s), not DOWN", rc, cause ? cause : "");
    free(cause);
    wlease_close(l);
    free(pfx);
    free(c1);
}
END_TEST

/* --- the epoch: IDs the store has no record of ---------------------------- */

/* The generators here: fence step EP_STEP, max_borrow_ms 10 (sf_on), and
 * a 250 ms clock limit; an ID with no hash gates on epoch + EP_GATE. */
#define EP_STEP     300
#define EP_OFFSET   250
#define EP_GATE     (EP_STEP + 10 + EP_OFFSET)

static struct wlease_params
ep_params(const char *identity, const char *cache)
{
    struct wlease_params p = params(identity, cache);

    p.max_clock_offset_ms = EP_OFFSET;
    p.unknown_gate_ms = EP_GATE;
    return p;
}

/* An ID's timestamp (Leaf's layout, unix ms). */
static int64_t
id_ms(uint64_t id)
{
    return (int64_t)(id >> 22) + SFCODEC_LEAF_EPOCH_MS;
}

/* A store without an epoch (a new Redis prefix, an empty leaf_worker): the
 * first claim sets it to the store's clock, later ones keep it, and an ID
 * with no record (hash, row) gates on epoch + EP_GATE, so nothing is
 * issued before (fence_not_passed, in /snowflake/state too). */
START_TEST(epoch_set_on_new_store)
{
    char *pfx = fresh_prefix_raw(), *c1 = tmp_path("1"), *c2 = tmp_path("2");
    struct wlease_params p1 = ep_params("10.0.0.1:1", c1),
                         p2 = ep_params("10.0.0.2:1", c2);
    struct wlease *a, *b;
    _Atomic int64_t clk;
    struct snowflake *sf;
    struct idset s = {0};
    struct sbuf st = {0};
    int64_t t0, t1, epoch, w, f;

    ck_assert_int_eq(store_epoch(pfx), -1);
    t0 = store_ms();
    a = open_ok(&p1, pfx);
    t1 = store_ms();
    epoch = store_epoch(pfx);
    ck_assert_int_ge(epoch, t0);
    ck_assert_int_le(epoch, t1);
    wlease_get(a, &w, &f);
    ck_assert_int_eq(w, 0);
    ck_assert_int_eq(f, epoch + EP_GATE);

    b = open_ok(&p2, pfx);
    ck_assert_int_eq(store_epoch(pfx), epoch);
    wlease_get(b, &w, &f);
    ck_assert_int_eq(w, 1);
    ck_assert_int_eq(f, epoch + EP_GATE);
    wlease_close(b);

    wlease_get(a, &w, &f);
    /* the clock at the claim (injected: B's claim may take any time) */
    atomic_store(&clk, epoch);
    sf = sf_on(a, &clk, EP_STEP);
    snowflake_state_json(sf, &st);
    ck_assert_msg(strstr(st.p, "\"status\":\"fence_not_passed\"") != NULL,
                  "%s", st.p);
    issue_range(sf, &clk, atomic_load(&clk), 1, &s);
    ck_assert_uint_eq(s.n, 0);
    ck_assert_str_eq(s.last_code, "fence_not_passed");
    issue_range(sf, &clk, f + 20, 1, &s);
    ck_assert_uint_gt(s.n, 0);
    ck_assert_int_gt(id_ms(s.v[0]), f);
    snowflake_stop(sf);
    sbuf_free(&st);
    free(s.v);
    free(pfx);
    free(c1);
    free(c2);
}
END_TEST

/* The store loses its data under a live holder: A holds ID 0 and issues
 * ahead of the clock; FLUSHALL (TRUNCATE TABLE leaf_worker); B (another
 * identity) claims ID 0 before A's next write. B issues nothing at or below
 * what A issued, and A is lost at its next write. */
START_TEST(epoch_after_wipe)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1"), *c2 = tmp_path("2");
    struct wlease_params pa = ep_params("10.0.0.1:1", c1),
                         pb = ep_params("10.0.0.2:1", c2);
    struct wlease *la, *lb;
    struct snowflake *sa, *sb;
    _Atomic int64_t clka, clkb;
    struct idset ia = {0}, ib = {0};
    int64_t wb, fb, epoch, a_max = 0;

    pa.max_worker = pb.max_worker = 0;
    la = open_ok(&pa, pfx);
    atomic_store(&clka, util_wall_ms());
    sa = sf_on(la, &clka, EP_STEP);
    /* A's clock runs up to 150 ms ahead (within EP_OFFSET) */
    issue_range(sa, &clka, atomic_load(&clka) + 150, 10, &ia);
    ck_assert_uint_gt(ia.n, 0);
    for (size_t i = 0; i < ia.n; i++)
        if (id_ms(ia.v[i]) > a_max)
            a_max = id_ms(ia.v[i]);

    store_wipe();
    /* B's clock behind what A issued (injected: the wipe and B's start
     * may take any time) */
    atomic_store(&clkb, a_max - 100);
    lb = open_ok(&pb, pfx);
    epoch = store_epoch(pfx);
    wlease_get(lb, &wb, &fb);
    ck_assert_int_eq(wb, 0);
    ck_assert_int_eq(fb, epoch + EP_GATE);
    ck_assert_int_gt(fb, a_max);
    sb = sf_on(lb, &clkb, EP_STEP);
    issue_range(sb, &clkb, atomic_load(&clkb), 10, &ib);
    ck_assert_uint_eq(ib.n, 0);
    ck_assert_str_eq(ib.last_code, "fence_not_passed");
    atomic_store(&clkb, fb - 20);
    issue_range(sb, &clkb, fb + 50, 10, &ib);
    ck_assert_uint_gt(ib.n, 0);
    for (size_t i = 0; i < ib.n; i++)
        ck_assert_int_gt(id_ms(ib.v[i]), a_max);
    ck_assert_uint_eq(idset_common(&ia, &ib), 0);

    /* A's next write (the heartbeat) finds B's nonce; a bound on tries,
     * not on time */
    for (int i = 0; i < 400 && strcmp(ia.last_code, "worker_id_lost") != 0;
         i++) {
        usleep(50 * 1000);
        atomic_store(&clka, util_wall_ms() + 150);
        issue_range(sa, &clka, atomic_load(&clka), 1, &ia);
    }
    ck_assert_str_eq(ia.last_code, "worker_id_lost");
    ck_assert_uint_eq(idset_common(&ia, &ib), 0);
    snowflake_stop(sa);
    snowflake_stop(sb);
    free(ia.v);
    free(ib.v);
    free(pfx);
    free(c1);
    free(c2);
}
END_TEST

/* The refusal before a new store's epoch gate names that gate (no ID was
 * issued up to it), when it ends and how to skip it safely; a gate that
 * is a persisted fence keeps its own text. */
START_TEST(epoch_gate_message)
{
    char *pfx = fresh_prefix_raw(), *c1 = tmp_path("1"), *skip;
    struct wlease_params p = ep_params("10.0.0.1:1", c1);
    struct wlease *l;
    _Atomic int64_t clk;
    struct snowflake *sf;
    struct snowflake_refusal why;
    struct idset s = {0};
    uint64_t id;
    int64_t epoch, w, f;
    char gate[64];

    l = open_ok(&p, pfx);
    epoch = store_epoch(pfx);
    wlease_get(l, &w, &f);
    ck_assert_int_eq(f, epoch + EP_GATE);
    atomic_store(&clk, epoch);
    sf = sf_on(l, &clk, EP_STEP);
    ck_assert_int_ne(snowflake_next(sf, 1, &id, &why), SNOWFLAKE_OK);
    ck_assert_str_eq(why.code, "fence_not_passed");
    snprintf(gate, sizeof gate, "new/wiped-store epoch gate %" PRId64
             ", when IDs start", f);
    ck_assert_msg(strstr(why.message, gate) != NULL, "%s", why.message);
    skip = store_kind != ST_REDIS ?
        xstrdup("`UPDATE leaf_worker SET fence_ms = 0 WHERE worker_id = -1`") :
        xasprintf("`SET %sepoch 0`", pfx);
    ck_assert_msg(strstr(why.message, skip) != NULL &&
                  strstr(why.message, "nothing was ever issued from") !=
                  NULL && strstr(why.message, "may have been issued") ==
                  NULL, "%s", why.message);
    free(skip);
    atomic_store(&clk, f + 1);
    issue_range(sf, &clk, f + 20, 1, &s);
    ck_assert_uint_gt(s.n, 0);
    snowflake_stop(sf);

    /* the same node again: its gate is the fence its run confirmed */
    l = open_ok(&p, pfx);
    wlease_get(l, &w, &f);
    ck_assert_int_gt(f, epoch + EP_GATE);
    atomic_store(&clk, epoch);
    sf = sf_on(l, &clk, EP_STEP);
    ck_assert_int_ne(snowflake_next(sf, 1, &id, &why), SNOWFLAKE_OK);
    ck_assert_msg(strstr(why.message, "epoch gate") == NULL &&
                  strstr(why.message, "persisted fence") != NULL, "%s",
                  why.message);
    snowflake_stop(sf);
    free(s.v);
    free(pfx);
    free(c1);
}
END_TEST

/* An epoch the operator set to 0 (a new store nothing was ever issued
 * from): the gate of an ID with no record is 0 + EP_GATE, long past, so
 * IDs at once. */
START_TEST(epoch_zero_no_wait)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1");
    struct wlease_params p = ep_params("10.0.0.1:1", c1);
    struct wlease *l = open_ok(&p, pfx);
    _Atomic int64_t clk;
    struct snowflake *sf;
    struct idset s = {0};
    int64_t w, f;

    ck_assert_int_eq(store_epoch(pfx), 0);
    wlease_get(l, &w, &f);
    ck_assert_int_eq(w, 0);
    ck_assert_int_eq(f, EP_GATE);
    atomic_store(&clk, util_wall_ms());
    sf = sf_on(l, &clk, EP_STEP);
    issue_range(sf, &clk, atomic_load(&clk), 1, &s);
    ck_assert_uint_eq(s.n, 1);
    snowflake_stop(sf);
    free(s.v);
    free(pfx);
    free(c1);
}
END_TEST

/* k8s: the pod's fixed worker ID with no record (a new store, or wiped)
 * gates on epoch + EP_GATE like any ID; the same pod's restart gates on
 * the fence its run confirmed, as before. */
START_TEST(k8s_epoch_gate)
{
    char *pfx = fresh_prefix_raw(), *c1 = tmp_path("1");
    struct wlease_params p = ep_params("web-2", c1);
    struct wlease *l;
    int64_t t0, epoch, w, f;

    t0 = store_ms();
    l = open_ok(&p, pfx);
    epoch = store_epoch(pfx);
    ck_assert_int_ge(epoch, t0);
    wlease_get(l, &w, &f);
    ck_assert_int_eq(w, K8S_WORKER);
    ck_assert_int_eq(f, epoch + EP_GATE);
    wlease_close(l);

    /* wiped under it: the gate moves with the new epoch */
    store_wipe();
    usleep(20 * 1000);
    l = open_ok(&p, pfx);
    ck_assert_int_gt(store_epoch(pfx), epoch);
    epoch = store_epoch(pfx);
    wlease_get(l, &w, &f);
    ck_assert_int_eq(w, K8S_WORKER);
    ck_assert_int_ge(f, epoch + EP_GATE);
    wlease_close(l);
    free(pfx);
    free(c1);
}
END_TEST

/* leaf_worker's epoch row broken by hand (a negative fence_ms, another
 * identity): the claim is refused, saying so, rather than gating on it. */
START_TEST(mysql_epoch_bad)
{
    char *pfx = fresh_prefix_raw(), *c1 = tmp_path("1"), *cause = NULL;
    struct wlease_params p = ep_params("10.0.0.1:1", c1);
    const char *bad[] = {
        "INSERT INTO leaf_worker VALUES (-1, '~epoch', '~epoch', -5, 0, 1, NULL)",
        "INSERT INTO leaf_worker VALUES (-1, 'x:1', '~epoch', 0, 0, 1, NULL)",
    };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(store_exec("DELETE FROM leaf_worker"), 0);
        ck_assert_int_eq(store_exec(bad[i]), 0);
        ck_assert_ptr_null(open_at(&p, store_port(), pfx, &cause));
        ck_assert_msg(strstr(cause, "leaf_worker's epoch row") != NULL,
                      "%s", cause);
        free(cause);
        cause = NULL;
        ck_assert_int_eq(store_i64("SELECT COUNT(*) FROM leaf_worker"), 1);
    }
    free(pfx);
    free(c1);
}
END_TEST

/* --- the store goes back in time (a snapshot or a dump restored) --------- */

static pid_t rdb_pid;       /* the rollback tests' own redis-server */
/* MySQL: the rows alone dumped and put back into the same table (a
 * data-only restore: its CREATE_TIME and the epoch row's marker unchanged),
 * not DROP, CREATE, INSERT */
static int rows_only;

/* A redis-server of the test's own on redis_port, its RDB file
 * tmpdir/snap.rdb (read at start, written only by SAVE). */
static void
rdb_redis_start(void)
{
    char port[16];

    snprintf(port, sizeof port, "%d", redis_port);
    rdb_pid = fork();
    if (rdb_pid == 0) {
        execlp("redis-server", "redis-server", "--port", port, "--bind",
               "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
               tmpdir, "--dbfilename", "snap.rdb", "--loglevel", "warning",
               (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 600 && !port_open(redis_port); i++)
        usleep(50000);
    ck_assert_msg(port_open(redis_port), "redis-server --dir %s", tmpdir);
}

static void
rdb_redis_stop(void)
{
    if (rdb_pid > 0) {
        kill(rdb_pid, SIGTERM);     /* --save '': no save at shutdown */
        waitpid(rdb_pid, NULL, 0);
        rdb_pid = 0;
    }
}

/* The mariadb client tools' options for the test's database. */
static char *
mysql_cli_args(void)
{
    /* --no-defaults first: no option file of this machine's (a ~/.my.cnf
     * with a password) changes what the tools do. */
    return xasprintf("--no-defaults -h127.0.0.1 -P%d -u'%s' %s%s%s '%s'", mysql_t.port,
                     mysql_t.user, mysql_t.password ? "-p'" : "",
                     mysql_t.password ? mysql_t.password : "",
                     mysql_t.password ? "'" : "", mysql_t.database);
}

/* The store's state now, to go back to: SAVE (an RDB), or mariadb-dump of
 * leaf_worker. */
static void
store_snapshot(void)
{
    char *args, *cmd;

    if (store_kind == ST_REDIS) {
        freeReplyObject(redis_cmd("SAVE"));
        return;
    }
    if (store_kind == ST_PG) {
        /* the table (DROP, CREATE, COPY: a new OID), or its rows alone */
        cmd = xasprintf("PGPASSWORD='%s' /usr/lib/postgresql/15/bin/pg_dump "
                        "-h 127.0.0.1 -p %d -U '%s' -t leaf_worker %s '%s' "
                        "> %s/dump.sql", pg_pw, pg_port, pg_user, rows_only ?
                        "--data-only" : "--clean --if-exists", pg_db, tmpdir);
        ck_assert_msg(system(cmd) == 0, "%s", cmd);
        free(cmd);
        return;
    }
    args = mysql_cli_args();
    cmd = xasprintf("mariadb-dump %s %sleaf_worker > %s/dump.sql", args,
                    rows_only ? "--no-create-info --skip-add-locks " : "",
                    tmpdir);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
    free(cmd);
    free(args);
}

/* Back to the snapshot: redis-server restarted from the RDB, or the dump
 * restored (DROP TABLE, CREATE TABLE, INSERT: the server keeps running). */
static void
store_restore(void)
{
    char *args, *cmd;

    if (store_kind == ST_REDIS) {
        rdb_redis_stop();
        rdb_redis_start();
        return;
    }
    if (store_kind == ST_PG) {
        if (rows_only)
            ck_assert_int_eq(pg_exec("DELETE FROM leaf_worker"), 0);
        cmd = xasprintf("PGPASSWORD='%s' /usr/lib/postgresql/15/bin/psql -X "
                        "-q -1 -v ON_ERROR_STOP=1 -h 127.0.0.1 -p %d -U '%s' "
                        "-d '%s' -f %s/dump.sql >/dev/null", pg_pw, pg_port,
                        pg_user, pg_db, tmpdir);
        ck_assert_msg(system(cmd) == 0, "%s", cmd);
        free(cmd);
        return;
    }
    args = mysql_cli_args();
    if (rows_only)
        ck_assert_int_eq(mysql_exec("DELETE FROM leaf_worker"), 0);
    cmd = xasprintf("mariadb %s < %s/dump.sql", args, tmpdir);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
    free(cmd);
    free(args);
}

/* The store that goes back: the test's own redis-server for Redis; a
 * fresh prefix (or leaf_worker) on it. */
static char *
back_store_start(void)
{
    if (store_kind == ST_REDIS) {
        redis_port = free_port();
        rdb_redis_start();
    }
    return fresh_prefix();
}

/* A issues at its clock, which follows the wall clock, every 50 ms for ms
 * (so its keeper heartbeats). */
static void
keep_issuing(struct snowflake *sa, _Atomic int64_t *clka, struct idset *ia,
             int64_t ms)
{
    int64_t until = util_mono_ms() + ms;

    while (util_mono_ms() < until) {
        usleep(50 * 1000);
        atomic_store(clka, util_wall_ms());
        issue_range(sa, clka, atomic_load(clka), 1, ia);
    }
}

/* A (pa) claims worker ID 0 and issues; the store is saved; A keeps its
 * lease (heartbeats every 100 ms) for more than a lease after. A's
 * generator, on its clock *clka, what it issued in *ia. */
static struct snowflake *
hold_past_snapshot(const struct wlease_params *pa, const char *pfx,
                   _Atomic int64_t *clka, struct idset *ia)
{
    struct wlease *la = open_ok(pa, pfx);
    struct snowflake *sa;

    ck_assert_int_eq(worker_of(la), 0);
    atomic_store(clka, util_wall_ms());
    sa = sf_on(la, clka, EP_STEP);
    issue_range(sa, clka, atomic_load(clka) + 5, 10, ia);
    ck_assert_uint_gt(ia->n, 0);
    store_snapshot();
    keep_issuing(sa, clka, ia, pa->lease_ms + 500);
    return sa;
}

/* A holds ID 0 and heartbeats; the store is saved, A keeps writing for
 * more than a lease, then the store goes back to the save: A's record is
 * there, its heartbeat stale. A issued at T.. T+100 just before; B (another
 * identity, its clock at T: clocks differ by some ms) starts before A's
 * next write. B must not get ID 0 before a lease has passed since the store
 * went back (A writes within it), nor issue under it what A did; A's next
 * write notices its record went back and writes it again. */
static void back_in_time_two(void);

START_TEST(store_back_in_time)
{
    rows_only = 0;
    back_in_time_two();
}
END_TEST

/* The same with leaf_worker's rows put back into the same table (DELETE,
 * then a dump's INSERTs): nothing in the table says it went back; A's
 * connection's lock on worker ID 0 does (workerid_mysql.c). */
START_TEST(mysql_rows_restored)
{
    rows_only = 1;
    back_in_time_two();
}
END_TEST

static void
back_in_time_two(void)
{
    char *pfx, *c1 = tmp_path("1"), *c2 = tmp_path("2");
    struct wlease_params pa = ep_params("10.0.0.1:1", c1),
                         pb = ep_params("10.0.0.2:1", c2);
    struct wlease *lb;
    struct snowflake *sa, *sb;
    _Atomic int64_t clka, clkb;
    struct idset ia = {0}, ib = {0};
    int64_t wb, fb, t;
    size_t n0;

    pa.lease_ms = pb.lease_ms = 1500;
    pfx = back_store_start();
    sa = hold_past_snapshot(&pa, pfx, &clka, &ia);
    t = util_wall_ms();
    atomic_store(&clka, t);
    n0 = ia.n;
    issue_range(sa, &clka, t + 100, 10, &ia);
    ck_assert_uint_gt(ia.n, n0);
    store_restore();

    lb = open_ok(&pb, pfx);
    wlease_get(lb, &wb, &fb);
    atomic_store(&clkb, fb >= t ? fb + 1 : t);
    /* B's clock at t stands for clocks apart by some ms, which the rule
     * must survive while A is a holder that writes: its connection ran a
     * command within half the lease. When the restore and B's claim took
     * longer than that after A's last write (before t; a busy machine: two
     * CI runs saw it), A counts as stopped, as the rule says (a holder with
     * no landed write for half a lease stops itself), and B's clock can be
     * no earlier than half a lease past A's last write: B's IDs start
     * there. */
    if (wb == 0 && util_wall_ms() - t > pa.lease_ms / 2 - 200) {
        int64_t late = t + pa.lease_ms / 2 + 1;

        printf("back_in_time_two: the restore and B's claim took %" PRId64
               " ms after A's last write, past half the lease: B takes ID 0 "
               "as from a stopped holder, its clock from %" PRId64 "\n",
               util_wall_ms() - t, late);
        if (atomic_load(&clkb) < late)
            atomic_store(&clkb, late);
    }
    sb = sf_on(lb, &clkb, EP_STEP);
    issue_range(sb, &clkb, atomic_load(&clkb) + 100, 10, &ib);
    ck_assert_uint_gt(ib.n, 0);
    ck_assert_msg(idset_common(&ia, &ib) == 0, "%zu IDs issued by both A and "
                  "B (B got worker ID %" PRId64 ", fence %" PRId64 ")",
                  idset_common(&ia, &ib), wb, fb);

    /* A's next write finds its own record older than what it wrote: written
     * again, A keeps ID 0 */
    keep_issuing(sa, &clka, &ia, 500);
    ck_assert_str_ne(ia.last_code, "worker_id_lost");
    ck_assert_int_ne(wb, 0);
    ck_assert_uint_eq(idset_common(&ia, &ib), 0);
    snowflake_stop(sa);
    snowflake_stop(sb);
    rdb_redis_stop();
    free(ia.v);
    free(ib.v);
    free(pfx);
    free(c1);
    free(c2);
}

/* PostgreSQL: leaf_worker's epoch row names another server than the one
 * that answers (as after a standby's promotion or a cluster's restore: a
 * new timeline), and the one worker ID's row has a heartbeat older than a
 * lease (the last heartbeats lost with the old primary; its holder may be
 * live). B's claim takes it only a lease after it saw the change; the
 * marker names the server now. (Without the rule, B took it at once.) */
START_TEST(pg_server_changed)
{
    char *pfx = fresh_prefix(), *c1 = tmp_path("1"), *cause = NULL;
    struct wlease_params p = ep_params("10.0.0.2:1", c1);
    struct snowflake_backend b;
    struct wlease *l;
    int64_t w, f, seen, until;

    p.max_worker = 0;
    p.lease_ms = 1500;
    ck_assert_int_eq(pg_exec("UPDATE leaf_worker SET instance = '@o' || "
                             "'leaf_worker'::regclass::oid || ':s1/1' WHERE "
                             "worker_id = -1"), 0);
    plant_stale(pfx, 0, "10.0.0.9:1");
    seen = store_ms();
    l = open_at(&p, store_port(), pfx, &cause);
    ck_assert_msg(l != NULL, "%s", cause);
    wlease_get(l, &w, &f);
    ck_assert_msg(w == -1, "B took worker ID %" PRId64 " at once", w);
    ck_assert_int_eq(pg_i64("SELECT count(*) FROM leaf_worker WHERE "
                            "worker_id = -1 AND instance LIKE '@o%:s1/1'"), 0);
    ck_assert_int_ge(store_epoch(pfx), 0);
    wlease_backend(l, &b);
    until = util_mono_ms() + 10000;
    while (w == -1 && util_mono_ms() < until) {
        usleep(100 * 1000);
        b.tick(b.arg, util_wall_ms());
        wlease_get(l, &w, &f);
    }
    ck_assert_int_eq(w, 0);
    ck_assert_int_ge(store_ms() - seen, p.lease_ms);
    ck_assert_int_ge(f, seen + EP_GATE);
    wlease_close(l);
    free(pfx);
    free(c1);
}
END_TEST

/* Only one worker ID, so B's only choice is A's, whose record the store
 * lost by going back: B gets none while A heartbeats (its claim waits a
 * lease after the store went back, then finds A's lease renewed). */
START_TEST(store_back_in_time_one_id)
{
    char *pfx, *c1 = tmp_path("1"), *c2 = tmp_path("2"), *cause = NULL;
    struct wlease_params pa = ep_params("10.0.0.1:1", c1),
                         pb = ep_params("10.0.0.2:1", c2);
    struct wlease *lb;
    struct snowflake *sa;
    _Atomic int64_t clka;
    struct idset ia = {0};
    struct snowflake_backend b;
    int64_t wb, fb, until;

    pa.max_worker = pb.max_worker = 0;
    /* A must keep its lease through the test's own pauses */
    pa.lease_ms = pb.lease_ms = 3000;
    pfx = back_store_start();
    sa = hold_past_snapshot(&pa, pfx, &clka, &ia);
    store_restore();

    /* B starts without a worker ID (the claim is put off, not refused) */
    lb = open_at(&pb, store_port(), pfx, &cause);
    ck_assert_msg(lb != NULL, "%s", cause);
    wlease_get(lb, &wb, &fb);
    ck_assert_int_eq(wb, -1);
    /* A's heartbeats go on: B keeps trying, and never gets ID 0 */
    wlease_backend(lb, &b);
    until = util_mono_ms() + pa.lease_ms + 1000;
    while (util_mono_ms() < until) {
        usleep(50 * 1000);
        atomic_store(&clka, util_wall_ms());
        issue_range(sa, &clka, atomic_load(&clka), 1, &ia);
        b.tick(b.arg, util_wall_ms());
        wlease_get(lb, &wb, &fb);
        ck_assert_int_eq(wb, -1);
    }
    ck_assert_str_ne(ia.last_code, "worker_id_lost");
    wlease_close(lb);
    snowflake_stop(sa);
    rdb_redis_stop();
    free(ia.v);
    free(pfx);
    free(c1);
    free(c2);
}
END_TEST

/* The PostgreSQL cases' cluster: LEAFD_TEST_PG_URL, else one of the
 * suite's own (tests/lib/postgresql.sh, stopped by pg_cluster_stop). Its
 * parts into pg_user, pg_pw, pg_db, pg_port; pg_port 0 when none. */
static void
pg_cluster_start(void)
{
    const char *env = getenv("LEAFD_TEST_PG_URL");
    char url[256] = "", cmd[512], buf[256], *err = NULL;
    PQconninfoOption *o;
    FILE *f;

    if (env != NULL && *env != '\0') {
        snprintf(url, sizeof url, "%s", env);
    } else {
        strcpy(pg_dir, "/tmp/check_wid_pg.XXXXXX");
        if (mkdtemp(pg_dir) == NULL)
            return;
        snprintf(cmd, sizeof cmd, "sh tests/lib/postgresql.sh start %s/pg "
                 ">%s/start.log 2>&1", pg_dir, pg_dir);
        if (system(cmd) != 0)
            return;
        snprintf(cmd, sizeof cmd, "%s/pg/env", pg_dir);
        if ((f = fopen(cmd, "r")) == NULL)
            return;
        while (fgets(buf, sizeof buf, f) != NULL)
            if (strncmp(buf, "PG_URL=", 7) == 0) {
                buf[strcspn(buf, "\n")] = '\0';
                snprintf(url, sizeof url, "%s", buf + 7);
            }
        fclose(f);
    }
    o = PQconninfoParse(url, &err);
    if (o == NULL) {
        fprintf(stderr, "check_workerid_store: %s: %s\n", url,
                err ? err : "?");
        PQfreemem(err);
        return;
    }
    for (PQconninfoOption *i = o; i->keyword != NULL; i++) {
        if (i->val == NULL)
            continue;
        if (strcmp(i->keyword, "user") == 0)
            snprintf(pg_user, sizeof pg_user, "%s", i->val);
        else if (strcmp(i->keyword, "password") == 0)
            snprintf(pg_pw, sizeof pg_pw, "%s", i->val);
        else if (strcmp(i->keyword, "dbname") == 0)
            snprintf(pg_db, sizeof pg_db, "%s", i->val);
        else if (strcmp(i->keyword, "port") == 0)
            pg_port = atoi(i->val);
    }
    PQconninfoFree(o);
    if (pg_port == 0)
        pg_port = 5432;
}

static void
pg_cluster_stop(void)
{
    char cmd[512];

    if (pg_dir[0] == '\0')
        return;
    snprintf(cmd, sizeof cmd, "sh tests/lib/postgresql.sh stop %s/pg "
             ">/dev/null 2>&1; rm -rf %s", pg_dir, pg_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "check_workerid_store: %s failed\n", cmd);
}

int
main(void)
{
    Suite *s = suite_create("workerid_store");
    TCase *tc = tcase_create("url");
    SRunner *sr;
    const char *murl;
    char *cause = NULL;
    int failed, missing = 0;

    tcase_add_test(tc, url_forms);
    tcase_add_test(tc, sentinel_text);
    suite_add_tcase(s, tc);
    if (redis_start() == 0) {
        tc = tcase_create("redis");
        tcase_add_checked_fixture(tc, setup_redis, teardown_tmp);
        store_tests(tc);
        tcase_add_test(tc, redis_keys_gone);
        tcase_add_test(tc, slow_store_at_start);
        tcase_add_test(tc, epoch_set_on_new_store);
        tcase_add_test(tc, epoch_after_wipe);
        tcase_add_test(tc, epoch_zero_no_wait);
        tcase_add_test(tc, epoch_gate_message);
        tcase_add_test(tc, store_back_in_time);
        tcase_add_test(tc, store_back_in_time_one_id);
        suite_add_tcase(s, tc);
        tc = tcase_create("redis-k8s");
        tcase_add_checked_fixture(tc, setup_redis_k8s, teardown_tmp);
        k8s_tests(tc);
        tcase_add_test(tc, k8s_epoch_gate);
        suite_add_tcase(s, tc);
    } else {
        printf("check_workerid_store: no redis-server: %s the Redis tests\n",
               in_ci() ? "CI=1, so FAILING: cannot run" : "skipping");
        missing = in_ci();
    }
    murl = getenv("LEAFD_TEST_MYSQL_URL");
    if (murl != NULL && *murl != '\0' &&
        db_mysql_url_parse(murl, &mysql_t, &cause) == 0 &&
        mysql_t.host != NULL) {
        tc = tcase_create("mysql");
        tcase_add_checked_fixture(tc, setup_mysql, teardown_tmp);
        store_tests(tc);
        tcase_add_test(tc, epoch_set_on_new_store);
        tcase_add_test(tc, epoch_after_wipe);
        tcase_add_test(tc, epoch_zero_no_wait);
        tcase_add_test(tc, epoch_gate_message);
        tcase_add_test(tc, mysql_epoch_bad);
        tcase_add_test(tc, slow_mysql_at_start);
        tcase_add_test(tc, store_back_in_time);
        tcase_add_test(tc, store_back_in_time_one_id);
        tcase_add_test(tc, mysql_rows_restored);
        suite_add_tcase(s, tc);
        tc = tcase_create("mysql-k8s");
        tcase_add_checked_fixture(tc, setup_mysql_k8s, teardown_tmp);
        k8s_tests(tc);
        tcase_add_test(tc, k8s_epoch_gate);
        suite_add_tcase(s, tc);
    } else {
        printf("check_workerid_store: LEAFD_TEST_MYSQL_URL (TCP) not set: "
               "%s the MySQL tests (tests/lib/mariadb.sh start DIR)\n",
               in_ci() ? "CI=1, so FAILING: cannot run" : "skipping");
        free(cause);
        missing |= in_ci();
    }
    /* PostgreSQL: the same, on its own cluster unless given */
    if (access("/usr/lib/postgresql/15/bin/postgres", X_OK) == 0 ||
        getenv("LEAFD_TEST_PG_URL") != NULL) {
        pg_cluster_start();
        tc = tcase_create("postgresql");
        tcase_add_checked_fixture(tc, setup_pg, teardown_tmp);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
        /* under the sanitizers (their lanes' time): the store's own code
         * through its claims, fences, records and back-in-time rules; the
         * plain unit lane runs them all */
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, three_nodes_three_ids);
        tcase_add_test(tc, partition_no_duplicates);
        tcase_add_test(tc, record_carried);
        tcase_add_test(tc, simultaneous_starts);
#else
        store_tests(tc);
        tcase_add_test(tc, epoch_set_on_new_store);
        tcase_add_test(tc, epoch_after_wipe);
        tcase_add_test(tc, epoch_zero_no_wait);
        tcase_add_test(tc, epoch_gate_message);
        tcase_add_test(tc, mysql_epoch_bad);
        tcase_add_test(tc, store_back_in_time_one_id);
#endif
        tcase_add_test(tc, store_back_in_time);
        tcase_add_test(tc, mysql_rows_restored);
        tcase_add_test(tc, pg_server_changed);
        suite_add_tcase(s, tc);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
        tc = tcase_create("postgresql-k8s");
        tcase_add_checked_fixture(tc, setup_pg_k8s, teardown_tmp);
        k8s_tests(tc);
        tcase_add_test(tc, k8s_epoch_gate);
        suite_add_tcase(s, tc);
#endif
    } else {
        printf("check_workerid_store: no postgresql-15: %s the PostgreSQL "
               "tests\n", in_ci() ? "CI=1, so FAILING: cannot run" :
               "skipping");
        missing |= in_ci();
    }
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    pg_cluster_stop();
    redis_stop();
    db_mysql_target_free(&mysql_t);
    return failed == 0 && !missing ? 0 : 1;
}
