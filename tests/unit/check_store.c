/* check_store.c: unit tests for the segment stores (store.c, store_sqlite.c,
 * store_mysql.c): URL parsing, the SQLite store in a temp file, and the same
 * behaviour against MySQL/MariaDB when LEAFD_TEST_MYSQL_URL is set (with
 * LEAFD_TEST_MYSQL_DIR also set, a restart and a hung server too; see
 * tests/lib/mariadb.sh), and against PostgreSQL (store_pg.c): the cluster
 * of LEAFD_TEST_PG_URL, else one of its own (tests/lib/postgresql.sh,
 * started once for the case). Run from the top of the tree (or set
 * LEAFD_ROOT). */
#include <check.h>
#include <errno.h>
#include <libpq-fe.h>
#include <mysql.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "procstop.h"
#include "db_mysql_url.h"
#include "store.h"
#include "store_impl.h"
#include "store_marks.h"
#include "util.h"

/* ---- URL parsing ---- */

/* Under CI=1 (or true) a missing MariaDB is a failure, not a skip. */
static int ci_missing;

static int
in_ci(void)
{
    const char *ci = getenv("CI");

    return ci != NULL && (strcmp(ci, "1") == 0 || strcmp(ci, "true") == 0);
}

START_TEST(test_url_jdbc)
{
    struct db_mysql_target t;
    char *cause = NULL;

    ck_assert_int_eq(db_mysql_url_parse("jdbc:mysql://localhost:3306/leaf"
                     "?useUnicode=true&characterEncoding=utf8", &t, &cause), 0);
    ck_assert_str_eq(t.host, "localhost");
    ck_assert_int_eq(t.port, 3306);
    ck_assert_str_eq(t.database, "leaf");
    ck_assert_ptr_null(t.user);
    ck_assert_ptr_null(t.password);
    ck_assert_ptr_null(t.socket);
    db_mysql_target_free(&t);

    ck_assert_int_eq(db_mysql_url_parse("jdbc:mysql://db-1.example.com/"
                     "leaf_db", &t, &cause), 0);
    ck_assert_str_eq(t.host, "db-1.example.com");
    ck_assert_int_eq(t.port, 3306);
    ck_assert_str_eq(t.database, "leaf_db");
    db_mysql_target_free(&t);

    ck_assert_int_eq(db_mysql_url_parse("jdbc:mysql://10.1.2.3:3307/leaf?"
                     "user=app&password=s%26cret&serverTimezone=UTC", &t,
                     &cause), 0);
    ck_assert_str_eq(t.host, "10.1.2.3");
    ck_assert_int_eq(t.port, 3307);
    ck_assert_str_eq(t.user, "app");
    ck_assert_str_eq(t.password, "s&cret");
    db_mysql_target_free(&t);

    ck_assert_int_eq(db_mysql_url_parse("jdbc:mariadb://[::1]:3308/leaf",
                     &t, &cause), 0);
    ck_assert_str_eq(t.host, "::1");
    ck_assert_int_eq(t.port, 3308);
    db_mysql_target_free(&t);
    ck_assert_ptr_null(cause);
}
END_TEST

START_TEST(test_url_mysql)
{
    struct db_mysql_target t;
    char *cause = NULL;

    ck_assert_int_eq(db_mysql_url_parse("mysql://root@127.0.0.1:20001/leaf",
                     &t, &cause), 0);
    ck_assert_str_eq(t.host, "127.0.0.1");
    ck_assert_int_eq(t.port, 20001);
    ck_assert_str_eq(t.user, "root");
    ck_assert_ptr_null(t.password);
    ck_assert_str_eq(t.database, "leaf");
    db_mysql_target_free(&t);

    ck_assert_int_eq(db_mysql_url_parse("mysql://u%40x:p%3Aa%2Fs%40s@"
                     "db.local:1/my%2Ddb", &t, &cause), 0);
    ck_assert_str_eq(t.user, "u@x");
    ck_assert_str_eq(t.password, "p:a/s@s");
    ck_assert_str_eq(t.host, "db.local");
    ck_assert_int_eq(t.port, 1);
    ck_assert_str_eq(t.database, "my-db");
    db_mysql_target_free(&t);

    ck_assert_int_eq(db_mysql_url_parse("mysql://u:@h:65535/d", &t, &cause),
                     0);
    ck_assert_str_eq(t.password, "");
    ck_assert_int_eq(t.port, 65535);
    db_mysql_target_free(&t);

    ck_assert_int_eq(db_mysql_url_parse("mysql://root@localhost/leaf?"
                     "socket=/tmp/my%20sock", &t, &cause), 0);
    ck_assert_str_eq(t.host, "localhost");
    ck_assert_str_eq(t.socket, "/tmp/my sock");
    db_mysql_target_free(&t);

    ck_assert_int_eq(db_mysql_url_parse("mysql://root@/leaf?socket=/run/"
                     "mysqld/mysqld.sock", &t, &cause), 0);
    ck_assert_str_eq(t.host, "localhost");
    ck_assert_str_eq(t.socket, "/run/mysqld/mysqld.sock");
    db_mysql_target_free(&t);

    ck_assert_int_eq(db_mysql_url_parse("mysql://h/d?", &t, &cause), 0);
    db_mysql_target_free(&t);
    db_mysql_target_free(NULL);
    ck_assert_ptr_null(cause);
}
END_TEST

static const char *bad_urls[] = {
    "",
    "postgres://h/db",
    "jdbc:postgresql://h/db",
    "mysql:/h/db",
    "mysql://",
    "mysql://host",
    "mysql://host/",
    "mysql://host:0/db",
    "mysql://host:65536/db",
    "mysql://host:12a/db",
    "mysql://host:/db",
    "mysql://host:-1/db",
    "mysql://ho st/db",
    "mysql://h\tst/db",
    "mysql://h!st/db",
    "mysql://h1,h2/db",
    "jdbc:mysql://h1:3306,h2:3306/db",
    "mysql://@h/db",
    "mysql://:pw@h/db",
    "mysql://u:p@h/db?foo=1",
    "mysql://h/db?socket=relative",
    "mysql://h/db?socket=",
    "mysql://h/db/extra",
    "mysql://u%zz@h/db",
    "mysql://u%00@h/db",
    "mysql://u%4@h/db",
    "mysql://h/db#frag",
    "mysql:///db",
    "jdbc:mysql://h:3306",
    "jdbc:mysql://h:3306?x=1",
    "jdbc:mysql://[::1/db",
    "jdbc:mysql://[::1]x/db",
    "jdbc:mysql://[]/db",
    "mysql://h/db%zz",
    "mysql://h:3306:3307/db",
};

START_TEST(test_url_bad)
{
    struct db_mysql_target t;
    char *cause = NULL;
    char big[2048];

    for (size_t i = 0; i < sizeof bad_urls / sizeof bad_urls[0]; i++) {
        ck_assert_msg(db_mysql_url_parse(bad_urls[i], &t, &cause) == -1,
                      "accepted bad URL \"%s\"", bad_urls[i]);
        ck_assert_msg(cause != NULL && *cause != '\0', "no cause for %s",
                      bad_urls[i]);
        ck_assert_ptr_null(t.host);
        ck_assert_ptr_null(t.user);
        ck_assert_ptr_null(t.database);
        free(cause);
        cause = NULL;
    }
    ck_assert_int_eq(db_mysql_url_parse(NULL, &t, &cause), -1);
    free(cause);
    cause = NULL;

    /* Length limits: URL, host, user, database. */
    memset(big, 'a', sizeof big);
    memcpy(big, "mysql://h/", 10);
    big[1100] = '\0';
    ck_assert_int_eq(db_mysql_url_parse(big, &t, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "longer"));
    free(cause);
    cause = NULL;

    memset(big, 'a', sizeof big);
    memcpy(big, "mysql://", 8);
    strcpy(big + 8 + 256, "/db");
    ck_assert_int_eq(db_mysql_url_parse(big, &t, &cause), -1);
    free(cause);
    cause = NULL;

    memset(big, 'a', sizeof big);
    memcpy(big, "mysql://", 8);
    strcpy(big + 8 + 129, "@h/db");
    ck_assert_int_eq(db_mysql_url_parse(big, &t, &cause), -1);
    free(cause);
    cause = NULL;

    memset(big, 'a', sizeof big);
    memcpy(big, "mysql://h/", 10);
    big[10 + 65] = '\0';
    ck_assert_int_eq(db_mysql_url_parse(big, &t, &cause), -1);
    free(cause);
    cause = NULL;
    big[10 + 64] = '\0';
    ck_assert_int_eq(db_mysql_url_parse(big, &t, &cause), 0);
    db_mysql_target_free(&t);
}
END_TEST

START_TEST(test_open_config_errors)
{
    struct config cfg;
    struct store *s;
    char *cause = NULL;

    memset(&cfg, 0, sizeof cfg);
    cfg.store = STORE_MYSQL;
    ck_assert_ptr_null(store_open(&cfg, &cause));
    ck_assert_ptr_nonnull(cause);
    free(cause);
    cause = NULL;

    cfg.store = STORE_AUTO;
    cfg.jdbc_url = "jdbc:mysql://bad host/leaf";
    ck_assert_ptr_null(store_open(&cfg, &cause));
    ck_assert_ptr_nonnull(strstr(cause, "leaf.jdbc.url"));
    free(cause);
    cause = NULL;

    /* A good URL opens without a server: the connection is lazy. */
    cfg.jdbc_url = "jdbc:mysql://127.0.0.1:1/leaf";
    cfg.jdbc_username = "root";
    s = store_open(&cfg, &cause);
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(store_kind_name(s), "mysql");
    store_close(s);
    store_close(NULL);

    memset(&cfg, 0, sizeof cfg);
    cfg.store = STORE_AUTO;
    cfg.sqlite_path = "";
    ck_assert_ptr_null(store_open(&cfg, &cause));
    ck_assert_ptr_nonnull(cause);
    free(cause);
    cause = NULL;

    cfg.sqlite_path = "/nonexistent-dir-leafd/x/leaf.db";
    ck_assert_ptr_null(store_open(&cfg, &cause));
    ck_assert_ptr_nonnull(strstr(cause, "/nonexistent-dir-leafd/x/leaf.db"));
    free(cause);
}
END_TEST

/* A MySQL store whose server is not there: calls fail fast (a refused
 * connection, not a timeout: 60 s, far from the bound), no crash. */
START_TEST(test_mysql_down)
{
    struct config cfg;
    struct store *s;
    char *cause = NULL;
    int64_t max_id, step, t0;

    memset(&cfg, 0, sizeof cfg);
    cfg.mysql_url = "mysql://root@127.0.0.1:1/leaf";
    cfg.db_timeout_ms = 60000;
    s = store_open(&cfg, &cause);
    ck_assert_ptr_nonnull(s);
    t0 = util_mono_ms();
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(store_alloc(s, "demo", 10, &max_id, &step, &cause),
                         -1);
        ck_assert_ptr_nonnull(strstr(cause, "127.0.0.1:1/leaf"));
        free(cause);
        cause = NULL;
    }
    ck_assert_int_lt(util_mono_ms() - t0, 20000);  /* tcase timeout 30 s */
    store_close(s);
}
END_TEST

/* ---- backends under test ---- */

/* The backend of the running test (set by a fixture, per forked test). */
static struct {
    int  mysql, pg;
    char dir[64];
    char path[128];
    char prefix[48];        /* tag prefix, unique per test run */
    struct config cfg;
} be;

static void
be_common(void)
{
    strcpy(be.dir, "/tmp/check_store.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(be.dir));
    snprintf(be.prefix, sizeof be.prefix, "ck%d-%lld-", (int)getpid(),
             (long long)(util_wall_ms() % 1000000000));
    store_thread_init();
}

static void
be_sqlite_setup(void)
{
    memset(&be, 0, sizeof be);
    be_common();
    snprintf(be.path, sizeof be.path, "%s/leaf.db", be.dir);
    be.cfg.store = STORE_SQLITE;
    be.cfg.sqlite_path = be.path;
    be.cfg.db_timeout_ms = 20000;
}

static void
be_mysql_setup(void)
{
    memset(&be, 0, sizeof be);
    be_common();
    be.mysql = 1;
    be.cfg.store = STORE_MYSQL;
    be.cfg.mysql_url = getenv("LEAFD_TEST_MYSQL_URL");
    be.cfg.db_timeout_ms = 5000;
}

static const char *root_path(const char *rel, char *buf, size_t cap);

/* The PostgreSQL case's cluster: LEAFD_TEST_PG_URL, else one started for
 * the case (an unchecked fixture: once, in the runner) and stopped after. */
static char pg_url[256], pg_dir[64];

static void
pg_case_start(void)
{
    char cmd[512], buf[256];
    const char *env = getenv("LEAFD_TEST_PG_URL");
    FILE *f;

    if (env != NULL && *env != '\0') {
        snprintf(pg_url, sizeof pg_url, "%s", env);
        return;
    }
    strcpy(pg_dir, "/tmp/check_store_pg.XXXXXX");
    if (mkdtemp(pg_dir) == NULL)
        return;
    snprintf(cmd, sizeof cmd, "sh %s start %s/pg >%s/start.log 2>&1",
             root_path("tests/lib/postgresql.sh", buf, sizeof buf), pg_dir,
             pg_dir);
    if (system(cmd) != 0)
        return;
    snprintf(cmd, sizeof cmd, "%s/pg/env", pg_dir);
    if ((f = fopen(cmd, "r")) == NULL)
        return;
    while (fgets(buf, sizeof buf, f) != NULL)
        if (strncmp(buf, "PG_URL=", 7) == 0) {
            buf[strcspn(buf, "\n")] = '\0';
            snprintf(pg_url, sizeof pg_url, "%s", buf + 7);
        }
    fclose(f);
}

static void
pg_case_stop(void)
{
    char cmd[512], buf[256];

    if (pg_dir[0] == '\0')
        return;
    snprintf(cmd, sizeof cmd, "sh %s stop %s/pg >/dev/null 2>&1; rm -rf %s",
             root_path("tests/lib/postgresql.sh", buf, sizeof buf), pg_dir,
             pg_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "check_store: %s failed\n", cmd);
}

static void
be_pg_setup(void)
{
    memset(&be, 0, sizeof be);
    be_common();
    ck_assert_msg(pg_url[0] != '\0', "no PostgreSQL: see %s/start.log (CI=1: "
                  "a failure, not a skip)", pg_dir);
    be.pg = 1;
    be.cfg.store = STORE_POSTGRESQL;
    be.cfg.pg_url = pg_url;
    be.cfg.db_timeout_ms = 5000;
}

static void
be_teardown_files(void)
{
    char p[256];
    const char *sfx[] = { "/leaf.db", "/leaf.db-wal", "/leaf.db-shm",
                          "/ref.db", "/ref.db-wal", "/ref.db-shm" };

    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
        snprintf(p, sizeof p, "%s%s", be.dir, sfx[i]);
        unlink(p);
    }
}

static void
be_teardown(void)
{
    be_teardown_files();
    rmdir(be.dir);
    store_thread_end();
}

static struct store *
be_open(void)
{
    char *cause = NULL;
    struct store *s = store_open(&be.cfg, &cause);

    ck_assert_msg(s != NULL, "store_open: %s", cause);
    return s;
}

static const char *
tag(const char *name)
{
    static __thread char buf[TAG_MAX + 1];

    snprintf(buf, sizeof buf, "%s%s", be.prefix, name);
    return buf;
}

/* Run sql on the MySQL database of url, as an operator would. */
static void
url_exec(const char *url, const char *sql)
{
    struct db_mysql_target t;
    char *cause = NULL;
    MYSQL *db = mysql_init(NULL);

    ck_assert_int_eq(db_mysql_url_parse(url, &t, &cause), 0);
    ck_assert_msg(mysql_real_connect(db, t.host, t.user, t.password,
                  t.database, (unsigned)t.port, t.socket, 0) != NULL,
                  "connect: %s", mysql_error(db));
    ck_assert_msg(mysql_query(db, sql) == 0, "%s: %s", sql, mysql_error(db));
    mysql_close(db);
    db_mysql_target_free(&t);
}

/* Change a row behind the store's back, as an operator would. */
static void
be_exec(const char *sql)
{
    if (be.mysql) {
        url_exec(be.cfg.mysql_url, sql);
    } else if (be.pg) {
        PGconn *db = PQconnectdb(be.cfg.pg_url);
        PGresult *r;

        ck_assert_msg(PQstatus(db) == CONNECTION_OK, "connect: %s",
                      PQerrorMessage(db));
        r = PQexec(db, sql);
        ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s", sql,
                      PQerrorMessage(db));
        PQclear(r);
        PQfinish(db);
    } else {
        sqlite3 *db;
        char *err = NULL;

        ck_assert_int_eq(sqlite3_open(be.path, &db), SQLITE_OK);
        sqlite3_busy_timeout(db, 10000);
        ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, &err) == SQLITE_OK,
                      "%s: %s", sql, err);
        sqlite3_close(db);
    }
}

static void
be_set_step(const char *t, int64_t step)
{
    char sql[512];

    snprintf(sql, sizeof sql, "UPDATE leaf_alloc SET step = %lld WHERE "
             "biz_tag = '%s'", (long long)step, t);
    be_exec(sql);
}

/* ---- behaviour, run against each backend ---- */

START_TEST(test_alloc_basic)
{
    struct store *s = be_open();
    struct store_row row;
    char *cause = NULL;
    int64_t max_id = 0, step = 0;
    char t1[TAG_MAX + 1];

    snprintf(t1, sizeof t1, "%s", tag("basic"));
    ck_assert_int_eq(store_insert(s, t1, 1, 100, "basic tag", &cause), 0);
    ck_assert_int_eq(store_insert(s, t1, 5, 100, NULL, &cause), STORE_EXISTS);

    /* Ranges [1,101), [101,201), then a custom step [201,251). */
    ck_assert_int_eq(store_alloc(s, t1, 100, &max_id, &step, &cause), 0);
    ck_assert_int_eq(max_id, 101);
    ck_assert_int_eq(step, 100);
    ck_assert_int_eq(store_alloc(s, t1, 100, &max_id, &step, &cause), 0);
    ck_assert_int_eq(max_id, 201);
    ck_assert_int_eq(store_alloc(s, t1, 50, &max_id, &step, &cause), 0);
    ck_assert_int_eq(max_id, 251);
    ck_assert_int_eq(step, 100);

    /* Not found: 1, and nothing created. */
    ck_assert_int_eq(store_alloc(s, tag("nope"), 10, &max_id, &step, &cause),
                     1);
    ck_assert_int_eq(store_get(s, tag("nope"), &row, &cause), STORE_NOT_FOUND);
    ck_assert_ptr_null(cause);

    ck_assert_int_eq(store_get(s, t1, &row, &cause), 0);
    ck_assert_str_eq(row.biz_tag, t1);
    ck_assert_int_eq(row.max_id, 251);
    ck_assert_int_eq(row.step, 100);
    ck_assert_str_eq(row.description, "basic tag");
    ck_assert_int_eq(strlen(row.update_time), 19);
    ck_assert_int_eq(row.update_time[4], '-');

    /* An operator changes step: the next alloc reports it. */
    be_set_step(t1, 700);
    ck_assert_int_eq(store_alloc(s, t1, 700, &max_id, &step, &cause), 0);
    ck_assert_int_eq(max_id, 951);
    ck_assert_int_eq(step, 700);
    ck_assert_ptr_null(cause);
    store_close(s);
}
END_TEST

START_TEST(test_alloc_invalid)
{
    struct store *s = be_open();
    struct store_row row;
    char *cause = NULL;
    int64_t max_id = 0, step = 0;
    char long_tag[TAG_MAX + 2], max_tag[TAG_MAX + 1], desc[300];

    memset(long_tag, 'x', sizeof long_tag);
    long_tag[TAG_MAX + 1] = '\0';
    memset(max_tag, 'y', sizeof max_tag);
    memcpy(max_tag, be.prefix, strlen(be.prefix));
    max_tag[TAG_MAX] = '\0';

    ck_assert_int_eq(store_alloc(s, long_tag, 10, &max_id, &step, &cause), STORE_BAD_ARG);
    ck_assert_ptr_nonnull(strstr(cause, "longer"));
    free(cause);
    cause = NULL;
    ck_assert_int_eq(store_get(s, long_tag, &row, &cause), STORE_BAD_ARG);
    free(cause);
    cause = NULL;
    ck_assert_int_eq(store_insert(s, long_tag, 1, 10, NULL, &cause), STORE_BAD_ARG);
    free(cause);
    cause = NULL;
    ck_assert_int_eq(store_alloc(s, "", 10, &max_id, &step, &cause), STORE_BAD_ARG);
    free(cause);
    cause = NULL;

    /* Exactly TAG_MAX bytes is fine. */
    ck_assert_int_eq(store_insert(s, max_tag, 1, 10, NULL, &cause), 0);
    ck_assert_int_eq(store_alloc(s, max_tag, 10, &max_id, &step, &cause), 0);
    ck_assert_int_eq(max_id, 11);
    ck_assert_int_eq(store_get(s, max_tag, &row, &cause), 0);
    ck_assert_str_eq(row.biz_tag, max_tag);
    ck_assert_str_eq(row.description, "");

    ck_assert_int_eq(store_alloc(s, max_tag, 0, &max_id, &step, &cause), STORE_BAD_ROW);
    free(cause);
    cause = NULL;
    ck_assert_int_eq(store_alloc(s, max_tag, -5, &max_id, &step, &cause), STORE_BAD_ROW);
    free(cause);
    cause = NULL;
    ck_assert_int_eq(store_insert(s, tag("z"), 1, 0, NULL, &cause), STORE_BAD_ARG);
    free(cause);
    cause = NULL;
    ck_assert_int_eq(store_insert(s, tag("z"), -1, 10, NULL, &cause), STORE_BAD_ARG);
    free(cause);
    cause = NULL;
    memset(desc, 'd', sizeof desc);
    desc[257] = '\0';
    ck_assert_int_eq(store_insert(s, tag("z"), 1, 10, desc, &cause), STORE_BAD_ARG);
    free(cause);
    cause = NULL;
    /* The serial rows' mark is not for other rows. */
    ck_assert_int_eq(store_insert(s, tag("z"), 1, 10, STORE_SERIAL_DESCRIPTION,
                                  &cause), STORE_BAD_ARG);
    ck_assert_ptr_nonnull(strstr(cause, "reserved"));
    free(cause);
    cause = NULL;
    desc[256] = '\0';
    ck_assert_int_eq(store_insert(s, tag("z"), 1, 10, desc, &cause), 0);
    ck_assert_int_eq(store_get(s, tag("z"), &row, &cause), 0);
    ck_assert_str_eq(row.description, desc);

    /* UTF-8 text comes back as it went in. */
    ck_assert_int_eq(store_insert(s, tag("u"), 1, 10, "h\xc3\xa9llo \xe2\x9c\x93",
                                  &cause), 0);
    ck_assert_int_eq(store_get(s, tag("u"), &row, &cause), 0);
    ck_assert_str_eq(row.description, "h\xc3\xa9llo \xe2\x9c\x93");

    /* The store still works after refusals. */
    ck_assert_int_eq(store_alloc(s, max_tag, 10, &max_id, &step, &cause), 0);
    ck_assert_int_eq(max_id, 21);
    store_close(s);
}
END_TEST

START_TEST(test_alloc_overflow)
{
    struct store *s = be_open();
    struct store_row row;
    char *cause = NULL;
    int64_t max_id = 0, step = 0;
    char t1[TAG_MAX + 1];

    snprintf(t1, sizeof t1, "%s", tag("big"));
    ck_assert_int_eq(store_insert(s, t1, INT64_MAX - 10, 100, NULL, &cause), 0);
    ck_assert_int_eq(store_alloc(s, t1, 100, &max_id, &step, &cause), STORE_BAD_ROW);
    ck_assert_ptr_nonnull(strstr(cause, "overflow"));
    free(cause);
    cause = NULL;
    ck_assert_int_eq(store_get(s, t1, &row, &cause), 0);
    ck_assert_int_eq(row.max_id, INT64_MAX - 10);

    ck_assert_int_eq(store_alloc(s, t1, 10, &max_id, &step, &cause), 0);
    ck_assert_int_eq(max_id, INT64_MAX);
    ck_assert_int_eq(store_alloc(s, t1, 1, &max_id, &step, &cause), STORE_BAD_ROW);
    free(cause);
    cause = NULL;
    ck_assert_int_eq(store_alloc(s, t1, INT64_MAX, &max_id, &step, &cause), STORE_BAD_ROW);
    free(cause);
    cause = NULL;
    ck_assert_int_eq(store_get(s, t1, &row, &cause), 0);
    ck_assert_int_eq(row.max_id, INT64_MAX);
    store_close(s);
}
END_TEST

START_TEST(test_list)
{
    struct store *s = be_open();
    struct store_row *rows = NULL;
    char *cause = NULL;
    size_t n = 0, mine = 0;
    const char *names[] = { "b", "a", "C", "a-2", "a_1" };
    char prev[TAG_MAX + 1] = "";

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ck_assert_int_eq(store_insert(s, tag(names[i]), (int64_t)i + 1, 10,
                                      NULL, &cause), 0);
    ck_assert_int_eq(store_list(s, &rows, &n, &cause), 0);
    ck_assert_uint_ge(n, 5);
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(strcmp(prev, rows[i].biz_tag) < 0, "not sorted: %s, %s",
                      prev, rows[i].biz_tag);
        strcpy(prev, rows[i].biz_tag);
        if (strncmp(rows[i].biz_tag, be.prefix, strlen(be.prefix)) == 0) {
            static const char *order[] = { "C", "a", "a-2", "a_1", "b" };
            ck_assert_str_eq(rows[i].biz_tag + strlen(be.prefix),
                             order[mine]);
            mine++;
        }
    }
    ck_assert_uint_eq(mine, 5);
    free(rows);
    store_close(s);
}
END_TEST

/* Tags are exact: MySQL's collation must not map "Case" to "case". */
START_TEST(test_tag_case)
{
    struct store *s = be_open();
    struct store_row row;
    char *cause = NULL;
    int64_t max_id = 0, step = 0;
    char t1[TAG_MAX + 1], t2[TAG_MAX + 1];

    snprintf(t1, sizeof t1, "%s", tag("Case"));
    snprintf(t2, sizeof t2, "%s", tag("case"));
    ck_assert_int_eq(store_insert(s, t1, 1, 10, NULL, &cause), 0);
    ck_assert_int_eq(store_alloc(s, t2, 10, &max_id, &step, &cause), STORE_NOT_FOUND);
    ck_assert_int_eq(store_get(s, t2, &row, &cause), STORE_NOT_FOUND);
    ck_assert_int_eq(store_get(s, t1, &row, &cause), 0);
    ck_assert_int_eq(row.max_id, 1);
    ck_assert_int_eq(store_alloc(s, t1, 10, &max_id, &step, &cause), 0);
    ck_assert_int_eq(max_id, 11);
    ck_assert_ptr_null(cause);
    store_close(s);
}
END_TEST

/* Two handles (two connections) in one thread, interleaved. */
START_TEST(test_two_handles)
{
    struct store *a = be_open(), *b = be_open();
    char *cause = NULL;
    int64_t max_id, step, expect = 1;
    char t1[TAG_MAX + 1];

    snprintf(t1, sizeof t1, "%s", tag("two"));
    ck_assert_int_eq(store_insert(a, t1, 1, 10, NULL, &cause), 0);
    for (int i = 0; i < 50; i++) {
        int64_t want = 1 + i % 9;
        ck_assert_int_eq(store_alloc(i % 2 ? a : b, t1, want, &max_id, &step,
                                     &cause), 0);
        ck_assert_int_eq(max_id - want, expect);
        expect = max_id;
    }
    store_close(a);
    store_close(b);
}
END_TEST

/* Processes x threads, each with its own store, on one tag: the ranges must
 * tile [1, final max_id) exactly, with no overlap and no gap. */
#define CC_PROCS   3
#define CC_THREADS 3
#define CC_ALLOCS  60

struct cc_range {
    int64_t lo, hi;
};

struct cc_shared {
    struct cc_range r[CC_PROCS][CC_THREADS][CC_ALLOCS];
    int             failed;
    char            why[256];
};

struct cc_arg {
    struct cc_shared *sh;
    int               proc, thread;
    char              tag[TAG_MAX + 1];
};

static void *
cc_thread(void *p)
{
    struct cc_arg *a = p;
    char *cause = NULL;
    struct store *s;

    store_thread_init();
    s = store_open(&be.cfg, &cause);
    if (s == NULL)
        goto fail;
    for (int i = 0; i < CC_ALLOCS; i++) {
        int64_t want = 1 + (i * 7 + a->thread * 3 + a->proc) % 13;
        int64_t max_id, step;
        if (store_alloc(s, a->tag, want, &max_id, &step, &cause) != 0)
            goto fail;
        a->sh->r[a->proc][a->thread][i].lo = max_id - want;
        a->sh->r[a->proc][a->thread][i].hi = max_id;
    }
    store_close(s);
    store_thread_end();
    return NULL;

fail:
    a->sh->failed = 1;
    snprintf(a->sh->why, sizeof a->sh->why, "%s",
             cause != NULL ? cause : "store_alloc returned 1");
    free(cause);
    store_close(s);
    store_thread_end();
    return NULL;
}

static int
cc_cmp(const void *x, const void *y)
{
    const struct cc_range *a = x, *b = y;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

START_TEST(test_concurrent)
{
    struct store *s = be_open();
    struct store_row row;
    struct cc_shared *sh;
    struct cc_range *all;
    char *cause = NULL;
    char t1[TAG_MAX + 1];
    size_t n = (size_t)CC_PROCS * CC_THREADS * CC_ALLOCS;
    pid_t pids[CC_PROCS];

    snprintf(t1, sizeof t1, "%s", tag("cc"));
    ck_assert_int_eq(store_insert(s, t1, 1, 10, NULL, &cause), 0);
    store_close(s);

    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(sh, MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    for (int p = 0; p < CC_PROCS; p++) {
        pids[p] = fork();
        ck_assert_int_ne(pids[p], -1);
        if (pids[p] == 0) {
            pthread_t th[CC_THREADS];
            struct cc_arg args[CC_THREADS];
            for (int t = 0; t < CC_THREADS; t++) {
                args[t].sh = sh;
                args[t].proc = p;
                args[t].thread = t;
                snprintf(args[t].tag, sizeof args[t].tag, "%s", t1);
                pthread_create(&th[t], NULL, cc_thread, &args[t]);
            }
            for (int t = 0; t < CC_THREADS; t++)
                pthread_join(th[t], NULL);
            _exit(0);
        }
    }
    for (int p = 0; p < CC_PROCS; p++) {
        int st;
        ck_assert_int_eq(waitpid(pids[p], &st, 0), pids[p]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "worker %d died (status %d)", p, st);
    }
    ck_assert_msg(!sh->failed, "a worker failed: %s", sh->why);

    all = xmalloc(n * sizeof *all);
    memcpy(all, sh->r, n * sizeof *all);
    qsort(all, n, sizeof *all, cc_cmp);
    ck_assert_int_eq(all[0].lo, 1);
    for (size_t i = 1; i < n; i++)
        ck_assert_msg(all[i].lo == all[i - 1].hi, "ranges [%lld,%lld) and "
                      "[%lld,%lld) overlap or leave a gap",
                      (long long)all[i - 1].lo, (long long)all[i - 1].hi,
                      (long long)all[i].lo, (long long)all[i].hi);
    s = be_open();
    ck_assert_int_eq(store_get(s, t1, &row, &cause), 0);
    ck_assert_int_eq(row.max_id, all[n - 1].hi);
    store_close(s);
    free(all);
    munmap(sh, sizeof *sh);
}
END_TEST

/* ---- SQLite only ---- */

static const char *
root_path(const char *rel, char *buf, size_t cap)
{
    const char *root = getenv("LEAFD_ROOT");

    snprintf(buf, cap, "%s/%s", root != NULL ? root : ".", rel);
    return buf;
}

static char *
read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf;
    size_t n;

    ck_assert_msg(f != NULL, "%s: %s (run from the top of the tree or set "
                  "LEAFD_ROOT)", path, strerror(errno));
    buf = xmalloc(65536);
    n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static char *
schema_of(const char *path)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    char *sql;

    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT sql FROM sqlite_master "
                     "WHERE name = 'leaf_alloc'", -1, &st, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    sql = xstrdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return sql;
}

/* sql/sqlite.sql and the store's built-in schema make the same table, and
 * sql/sample.sql loads into it. */
START_TEST(test_sqlite_schema_files)
{
    char path[256], ref[256], *text, *err = NULL, *a, *b;
    sqlite3 *db;
    struct store *s;
    struct store_row row;
    char *cause = NULL;
    int64_t max_id, step;

    snprintf(ref, sizeof ref, "%s/ref.db", be.dir);
    ck_assert_int_eq(sqlite3_open(ref, &db), SQLITE_OK);
    text = read_file(root_path("sql/sqlite.sql", path, sizeof path));
    ck_assert_msg(sqlite3_exec(db, text, NULL, NULL, &err) == SQLITE_OK,
                  "sqlite.sql: %s", err);
    free(text);
    text = read_file(root_path("sql/sample.sql", path, sizeof path));
    ck_assert_msg(sqlite3_exec(db, text, NULL, NULL, &err) == SQLITE_OK,
                  "sample.sql: %s", err);
    free(text);
    sqlite3_close(db);

    s = be_open();
    store_close(s);
    a = schema_of(ref);
    b = schema_of(be.path);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);

    /* The store works on the file made from the .sql files. */
    be.cfg.sqlite_path = ref;
    s = be_open();
    ck_assert_int_eq(store_get(s, "leaf-segment-test", &row, &cause), 0);
    ck_assert_int_eq(row.max_id, 1);
    ck_assert_int_eq(row.step, 2000);
    ck_assert_int_eq(store_alloc(s, "demo", 1000, &max_id, &step, &cause), 0);
    ck_assert_int_eq(max_id, 1001);
    ck_assert_int_eq(step, 1000);
    store_close(s);
}
END_TEST

START_TEST(test_sqlite_demo_and_pragmas)
{
    struct store *s;
    struct store_row row;
    char *cause = NULL;
    int64_t max_id, step;
    sqlite3 *db;
    sqlite3_stmt *st;

    s = be_open();
    ck_assert_str_eq(store_kind_name(s), "sqlite");
    ck_assert_int_eq(store_get(s, "demo", &row, &cause), STORE_NOT_FOUND);
    store_close(s);

    be.cfg.create_demo = 1;
    s = be_open();
    ck_assert_int_eq(store_get(s, "demo", &row, &cause), 0);
    ck_assert_int_eq(row.max_id, 1);
    ck_assert_int_eq(row.step, 1000);
    ck_assert_int_eq(store_alloc(s, "demo", 1000, &max_id, &step, &cause), 0);
    store_close(s);
    s = be_open();      /* demo exists: left alone */
    ck_assert_int_eq(store_get(s, "demo", &row, &cause), 0);
    ck_assert_int_eq(row.max_id, 1001);
    store_close(s);

    ck_assert_int_eq(sqlite3_open(be.path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st,
                                        NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_str_eq((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    sqlite3_close(db);
}
END_TEST

/* Several processes open one new file at once (two leafd starting): all
 * succeed, the table and demo are made once. */
START_TEST(test_sqlite_fresh_race)
{
    pid_t pids[6];
    struct store *s;
    struct store_row row;
    char *cause = NULL;

    be.cfg.create_demo = 1;
    for (int round = 0; round < 5; round++) {
        be_teardown_files();
        for (int i = 0; i < 6; i++) {
            pids[i] = fork();
            ck_assert_int_ne(pids[i], -1);
            if (pids[i] == 0) {
                int64_t max_id, step;
                s = store_open(&be.cfg, &cause);
                if (s == NULL) {
                    fprintf(stderr, "store_open: %s\n", cause);
                    _exit(1);
                }
                if (store_alloc(s, "demo", 1000, &max_id, &step, &cause) != 0)
                    _exit(2);
                store_close(s);
                _exit(0);
            }
        }
        for (int i = 0; i < 6; i++) {
            int st;
            ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
            ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                          "round %d: worker %d failed (status %d)", round, i,
                          st);
        }
        s = be_open();
        ck_assert_int_eq(store_get(s, "demo", &row, &cause), 0);
        ck_assert_int_eq(row.max_id, 6001);
        store_close(s);
    }
}
END_TEST

/* Another writer holds the lock past db_timeout_ms: alloc fails, and the
 * same handle works once the lock is gone. */
START_TEST(test_sqlite_busy)
{
    struct store *s;
    char *cause = NULL;
    int64_t max_id, step, t0;
    sqlite3 *db;

    be.cfg.db_timeout_ms = 300;
    s = be_open();
    ck_assert_int_eq(store_insert(s, "t", 1, 10, NULL, &cause), 0);
    ck_assert_int_eq(sqlite3_open(be.path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL),
                     SQLITE_OK);
    t0 = util_mono_ms();
    ck_assert_int_eq(store_alloc(s, "t", 10, &max_id, &step, &cause), STORE_DB_ERROR);
    ck_assert_int_ge(util_mono_ms() - t0, 250);
    ck_assert_ptr_nonnull(strstr(cause, "locked"));
    free(cause);
    cause = NULL;
    ck_assert_int_eq(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    ck_assert_int_eq(store_alloc(s, "t", 10, &max_id, &step, &cause), 0);
    ck_assert_int_eq(max_id, 11);
    store_close(s);
}
END_TEST

/* ---- MySQL only ---- */

/* Leaf's JDBC URL with leaf.jdbc.username/password. */
START_TEST(test_mysql_jdbc_url)
{
    struct db_mysql_target t;
    char *cause = NULL, url[512];
    struct store *s;
    int64_t max_id, step;

    ck_assert_int_eq(db_mysql_url_parse(be.cfg.mysql_url, &t, &cause), 0);
    if (t.socket != NULL || t.user == NULL) {
        db_mysql_target_free(&t);
        return;
    }
    snprintf(url, sizeof url, "jdbc:mysql://%s:%d/%s?useUnicode=true&"
             "characterEncoding=utf8", t.host, t.port, t.database);
    be.cfg.mysql_url = NULL;
    be.cfg.jdbc_url = url;
    be.cfg.jdbc_username = t.user;
    be.cfg.jdbc_password = t.password;
    be.cfg.store = STORE_AUTO;
    s = be_open();
    ck_assert_str_eq(store_kind_name(s), "mysql");
    ck_assert_int_eq(store_insert(s, tag("jdbc"), 1, 10, NULL, &cause), 0);
    ck_assert_int_eq(store_alloc(s, tag("jdbc"), 10, &max_id, &step, &cause),
                     0);
    ck_assert_int_eq(max_id, 11);
    store_close(s);

    be.cfg.jdbc_username = "leafd_no_such_user";
    s = be_open();
    ck_assert_int_eq(store_alloc(s, tag("jdbc"), 10, &max_id, &step, &cause),
                     -1);
    ck_assert_ptr_nonnull(strstr(cause, "denied"));
    free(cause);
    store_close(s);
    db_mysql_target_free(&t);
}
END_TEST

static const char *
mysql_dir(void)
{
    return getenv("LEAFD_TEST_MYSQL_DIR");
}

static int
mariadb_sh(const char *cmd)
{
    char path[256], line[768];

    snprintf(line, sizeof line, "sh %s %s %s >/dev/null",
             root_path("tests/lib/mariadb.sh", path, sizeof path), cmd,
             mysql_dir());
    return system(line);
}

/* MariaDB restarts under an open store: a later call succeeds on the same
 * handle (it reconnects), and the new range follows the old one. */
START_TEST(test_mysql_restart)
{
    struct store *s;
    char *cause = NULL;
    int64_t max_id, step, before;
    int rc = -1, first = -2, tries;

    if (mysql_dir() == NULL) {
        printf("check_store: LEAFD_TEST_MYSQL_DIR not set; skipping the "
               "restart test\n");
        ck_assert_msg(!in_ci(), "CI=1: the restart test cannot run without "
                      "LEAFD_TEST_MYSQL_DIR");
        return;
    }
    s = be_open();
    ck_assert_int_eq(store_insert(s, tag("rs"), 1, 10, NULL, &cause), 0);
    ck_assert_int_eq(store_alloc(s, tag("rs"), 10, &before, &step, &cause), 0);
    ck_assert_int_eq(mariadb_sh("restart"), 0);
    for (tries = 0; tries < 30; tries++) {
        rc = store_alloc(s, tag("rs"), 10, &max_id, &step, &cause);
        if (first == -2)
            first = rc;
        if (rc == 0)
            break;
        free(cause);
        cause = NULL;
        sleep(1);
    }
    printf("check_store: after a restart the first alloc returned %d, "
           "success after %d tries\n", first, tries + 1);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(max_id - 10, before);
    store_close(s);
}
END_TEST

/* The rows left in the deadlock test's counter (leafd_test_deadlock). */
static long long
deadlocks_left(void)
{
    struct db_mysql_target t;
    char *cause = NULL;
    MYSQL *db = mysql_init(NULL);
    MYSQL_RES *res;
    MYSQL_ROW r;
    long long n;

    ck_assert_int_eq(db_mysql_url_parse(be.cfg.mysql_url, &t, &cause), 0);
    ck_assert_msg(mysql_real_connect(db, t.host, t.user, t.password,
                  t.database, (unsigned)t.port, t.socket, 0) != NULL,
                  "connect: %s", mysql_error(db));
    ck_assert_int_eq(mysql_query(db, "SELECT n FROM leafd_test_deadlock"), 0);
    ck_assert_ptr_nonnull(res = mysql_store_result(db));
    ck_assert_ptr_nonnull(r = mysql_fetch_row(res));
    n = atoll(r[0]);
    mysql_free_result(res);
    mysql_close(db);
    db_mysql_target_free(&t);
    return n;
}

/* A load that fails with ER_LOCK_DEADLOCK (an InnoDB deadlock victim, or a
 * Galera certification conflict) runs again: a trigger makes the UPDATE of
 * one tag fail with 1213 while a counter in a MyISAM table (not rolled
 * back) is above 0. Three failures: the load still succeeds, with one
 * range. Endless failures: it fails after a bounded number of reruns,
 * having taken nothing. */
START_TEST(test_mysql_deadlock_retry)
{
    struct store *s;
    struct store_row row;
    char *cause = NULL;
    char sql[1024];
    int64_t max_id = 0, step = 0;
    long long used;

    s = be_open();
    ck_assert_int_eq(store_insert(s, tag("dl"), 1, 10, NULL, &cause), 0);
    be_exec("DROP TABLE IF EXISTS leafd_test_deadlock");
    be_exec("CREATE TABLE leafd_test_deadlock (n INT NOT NULL) ENGINE=MyISAM");
    be_exec("INSERT INTO leafd_test_deadlock VALUES (3)");
    be_exec("DROP TRIGGER IF EXISTS leafd_test_deadlock_trg");
    snprintf(sql, sizeof sql,
             "CREATE TRIGGER leafd_test_deadlock_trg BEFORE UPDATE ON "
             "leaf_alloc FOR EACH ROW BEGIN IF NEW.biz_tag = '%s' AND "
             "(SELECT n FROM leafd_test_deadlock) > 0 THEN "
             "UPDATE leafd_test_deadlock SET n = n - 1; "
             "SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, "
             "MESSAGE_TEXT = 'test: deadlock'; END IF; END", tag("dl"));
    be_exec(sql);

    ck_assert_msg(store_alloc(s, tag("dl"), 10, &max_id, &step, &cause) == 0,
                  "alloc after 3 deadlocks: %s", cause);
    ck_assert_int_eq(max_id, 11);
    ck_assert_int_eq(deadlocks_left(), 0);
    ck_assert_ptr_null(cause);

    be_exec("UPDATE leafd_test_deadlock SET n = 1000");
    ck_assert_int_eq(store_alloc(s, tag("dl"), 10, &max_id, &step, &cause),
                     STORE_DB_ERROR);
    ck_assert_ptr_nonnull(cause);
    ck_assert_msg(strstr(cause, "deadlock") != NULL, "cause: %s", cause);
    free(cause);
    cause = NULL;
    used = 1000 - deadlocks_left();
    printf("check_store: endless deadlocks: %lld attempts\n", used);
    ck_assert_int_ge(used, 1);
    ck_assert_int_le(used, 33);     /* 1 + DB_MYSQL_DEADLOCK_RETRIES */

    be_exec("DROP TRIGGER leafd_test_deadlock_trg");
    be_exec("DROP TABLE leafd_test_deadlock");
    ck_assert_int_eq(store_get(s, tag("dl"), &row, &cause), 0);
    ck_assert_int_eq(row.max_id, 11);
    ck_assert_int_eq(store_alloc(s, tag("dl"), 10, &max_id, &step, &cause), 0);
    ck_assert_int_eq(max_id, 21);
    store_close(s);
}
END_TEST

/* A hung server (SIGSTOP): calls fail within about db_timeout_ms instead of
 * hanging, and the store works again once it runs. */
START_TEST(test_mysql_hung)
{
    struct store *s, *fresh;
    char *cause = NULL, *cause2 = NULL, path[256], *pidtext;
    int64_t max_id, step, t0, took, took2;
    int rc, rc2;
    pid_t pid;

    if (mysql_dir() == NULL) {
        printf("check_store: LEAFD_TEST_MYSQL_DIR not set; skipping the "
               "hung-server test\n");
        ck_assert_msg(!in_ci(), "CI=1: the hung-server test cannot run "
                      "without LEAFD_TEST_MYSQL_DIR");
        return;
    }
    snprintf(path, sizeof path, "%s/pid", mysql_dir());
    pidtext = read_file(path);
    pid = (pid_t)atoi(pidtext);
    free(pidtext);
    ck_assert_int_gt(pid, 1);

    be.cfg.db_timeout_ms = 1000;
    s = be_open();
    fresh = be_open();
    ck_assert_msg(store_insert(s, tag("hung"), 1, 10, NULL, &cause) == 0,
                  "insert: %s", cause);
    ck_assert_int_eq(store_alloc(s, tag("hung"), 10, &max_id, &step, &cause),
                     0);

    /* Nothing may assert while the server is stopped. */
    proc_stop(pid);
    t0 = util_mono_ms();
    rc = store_alloc(s, tag("hung"), 10, &max_id, &step, &cause);
    took = util_mono_ms() - t0;
    t0 = util_mono_ms();
    rc2 = store_alloc(fresh, tag("hung"), 10, &max_id, &step, &cause2);
    took2 = util_mono_ms() - t0;
    kill(pid, SIGCONT);

    printf("check_store: hung server: alloc failed after %lld ms (%s), "
           "connect after %lld ms (%s)\n", (long long)took, cause,
           (long long)took2, cause2);
    ck_assert_int_eq(rc, -1);
    ck_assert_int_eq(rc2, -1);
    ck_assert_int_lt(took, 8000);
    ck_assert_int_lt(took2, 8000);
    free(cause);
    free(cause2);
    cause = NULL;
    for (int i = 0; i < 30; i++) {
        if ((rc = store_alloc(s, tag("hung"), 10, &max_id, &step, &cause)) ==
            0)
            break;
        free(cause);
        cause = NULL;
        sleep(1);
    }
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(store_alloc(fresh, tag("hung"), 10, &max_id, &step,
                                 &cause), 0);
    store_close(s);
    store_close(fresh);
}
END_TEST

/* ---- several databases (store_multi.c) ---- */

/* url with its database replaced by name (malloc'd). */
static char *
url_with_db(const char *url, const char *name)
{
    const char *host = strstr(url, "://"), *db, *end;

    ck_assert_ptr_nonnull(host);
    db = strchr(host + 3, '/');
    ck_assert_ptr_nonnull(db);
    end = db + 1 + strcspn(db + 1, "?");
    return xasprintf("%.*s/%s%s", (int)(db - url), url, name, end);
}

/* A new empty schema leafd_ck_<what><i>_<pid> on base's server (its name
 * in name); its URL (malloc'd). */
static char *
fresh_schema(const char *base, const char *what, int i, char *name, size_t cap)
{
    char sql[256];

    snprintf(name, cap, "leafd_ck_%s%d_%d", what, i, (int)getpid());
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", name);
    url_exec(base, sql);
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
    url_exec(base, sql);
    return url_with_db(base, name);
}

static int
fixed_row_name(void *arg, int64_t db_ms, char *tag, size_t cap,
               struct store_serial_floor *floor)
{
    snprintf(tag, cap, "%s", (const char *)arg);
    return 0;
}

/* A serial period's row made as serial numbers make it. */
static void
serial_row(struct store *s, const char *name)
{
    char got[TAG_MAX + 1], *cause = NULL;
    int64_t db_ms, max_id;

    ck_assert_msg(store_serial_alloc(s, 0, fixed_row_name, (void *)name, 10,
                                     &db_ms, got, sizeof got, &max_id,
                                     &cause) == STORE_OK, "serial row %s: %s",
                  name, cause);
    ck_assert_str_eq(got, name);
}

static void
expect_row(struct store *s, const char *name, enum store_result want)
{
    struct store_row row;
    char *cause = NULL;

    ck_assert_msg(store_get(s, name, &row, &cause) == want, "%s: %s", name,
                  cause ? cause : "not what was expected");
    free(cause);
}

/* name in first, and its copy in other: a serial row at the same max_id. */
static void
expect_serial_copy(struct store *first, struct store *other, const char *name)
{
    struct store_row a, b;
    char *cause = NULL;

    ck_assert_msg(store_get(first, name, &a, &cause) == STORE_OK &&
                  store_get(other, name, &b, &cause) == STORE_OK, "%s: %s",
                  name, cause ? cause : "missing");
    ck_assert(store_row_is_serial(&a) && store_row_is_serial(&b));
    ck_assert_int_eq(a.max_id, b.max_id);
}

/* Serial rows are told by their description, never their name: a segment
 * tag named like a serial period's row ("order:2024") is copied to every
 * database by multi-db init, checked at start and fails over; serial rows
 * ("PAY:20261123", "PAY:all") are loaded from the first database alone,
 * the others hold copies (init's, and one after every serial load). */
START_TEST(test_multi_serial_rows)
{
    const char *base = be.cfg.mysql_url;
    const int64_t block = 1000;
    char *urls[2], *cause = NULL, list[1100], sql[256], name[2][64];
    struct store *one[2], *m;
    FILE *out = tmpfile();
    int64_t max_id, step;

    ck_assert_ptr_nonnull(out);
    for (int i = 0; i < 2; i++)
        urls[i] = fresh_schema(base, "multi", i, name[i], sizeof name[i]);
    /* A Leaf database with a segment tag and two serial rows; the second
     * database is an empty schema (init makes its tables). */
    be.cfg.mysql_url = urls[0];
    one[0] = be_open();
    ck_assert_msg(store_mysql_member_ops.prepare_tables(one[0], &cause) == STORE_OK,
                  "tables: %s", cause);
    ck_assert_int_eq(store_insert(one[0], "order:2024", 1, 10, "orders", &cause),
                     STORE_OK);
    serial_row(one[0], "PAY:20261123");
    serial_row(one[0], "PAY:all");
    ck_assert_msg(store_multi_init(&be.cfg, urls, 2, block, 0, 0, out, &cause) == 0,
                  "init: %s", cause);
    store_thread_init();                /* init ended this thread's */
    be.cfg.mysql_url = urls[1];
    one[1] = be_open();
    expect_row(one[1], "order:2024", STORE_OK);
    expect_serial_copy(one[0], one[1], "PAY:20261123");
    expect_serial_copy(one[0], one[1], "PAY:all");

    /* Start-up checks it as any tag: missing in one database, refused. */
    url_exec(urls[1], "DELETE FROM leaf_alloc WHERE biz_tag = 'order:2024'");
    snprintf(list, sizeof list, "%s,%s", urls[0], urls[1]);
    be.cfg.mysql_url = NULL;
    be.cfg.mysql_urls = list;
    ck_assert_ptr_null(store_open(&be.cfg, &cause));
    ck_assert_msg(strstr(cause, "'order:2024' is in database 0") != NULL, "%s",
                  cause);
    free(cause);
    cause = NULL;
    /* init puts it back; the serial rows, in one database, are no reason
     * to refuse the start. */
    ck_assert_msg(store_multi_init(&be.cfg, urls, 2, block, 0, 0, out, &cause) == 0,
                  "init again: %s", cause);
    store_thread_init();
    expect_row(one[1], "order:2024", STORE_OK);
    m = be_open();
    ck_assert_int_eq(store_multi_count(), 2);

    /* Loads: database 0's block first; with it refusing (frozen), database
     * 1's. */
    ck_assert_int_eq(store_alloc(m, "order:2024", 10, &max_id, &step, &cause),
                     STORE_OK);
    ck_assert_int_eq((max_id - 10) / block % 2, 0);
    ck_assert_int_eq(store_mysql_member_ops.freeze(one[0], 1, &cause), STORE_OK);
    ck_assert_msg(store_alloc(m, "order:2024", 10, &max_id, &step, &cause) ==
                  STORE_OK, "failover: %s", cause);
    ck_assert_int_eq((max_id - 10) / block % 2, 1);
    /* Reads go to the database that answered last, now database 1. */
    expect_row(m, "order:2024", STORE_OK);
    {
        struct store_row *rows;
        size_t n, tags = 0;

        ck_assert_int_eq(store_list(m, &rows, &n, &cause), STORE_OK);
        for (size_t k = 0; k < n; k++)
            if (!store_row_is_serial(&rows[k])) {
                ck_assert_str_eq(rows[k].biz_tag, "order:2024");
                tags++;
            }
        ck_assert_int_eq(tags, 1);
        free(rows);
    }
    /* A serial's new period: the first database's alone, and only while
     * its leafd_multi_db row is what this node expects (frozen: refused,
     * as init freezes it to merge the serial rows). */
    {
        char got[TAG_MAX + 1];
        int64_t db_ms;

        ck_assert_int_eq(store_serial_alloc(m, 0, fixed_row_name,
                                            (void *)"PAY:20261124", 10, &db_ms,
                                            got, sizeof got, &max_id, &cause),
                         STORE_DB_ERROR);
        ck_assert_msg(strstr(cause, "frozen") != NULL, "%s", cause);
        free(cause);
        cause = NULL;
    }
    ck_assert_int_eq(store_mysql_member_ops.freeze(one[0], 0, &cause), STORE_OK);
    serial_row(m, "PAY:20261124");
    expect_serial_copy(one[0], one[1], "PAY:20261124");

    store_close(m);
    for (int i = 0; i < 2; i++) {
        store_close(one[i]);
        snprintf(sql, sizeof sql, "DROP DATABASE %s", name[i]);
        url_exec(base, sql);
        free(urls[i]);
    }
    fclose(out);
}
END_TEST

/* Issue 28, 3.4: a node on one URL (segment.mysql.url) still running
 * while `leafd multi-db init` makes its database a member of a set loaded
 * plain ranges inside blocks another database owns. Its loads (segment
 * and serial) read the database's leafd_multi_db row in their transaction
 * and refuse, naming the set, once the database is frozen by init or is
 * a member; a database with no such table or row loads as before. */
START_TEST(test_single_node_during_init)
{
    const char *base = be.cfg.mysql_url;
    char *urls[2], *cause = NULL, sql[256], name[2][64], got[TAG_MAX + 1];
    struct store *one[2], *single;
    FILE *out = tmpfile();
    int64_t max_id, step, db_ms;

    ck_assert_ptr_nonnull(out);
    for (int i = 0; i < 2; i++)
        urls[i] = fresh_schema(base, "single", i, name[i], sizeof name[i]);
    for (int i = 0; i < 2; i++) {
        be.cfg.mysql_url = urls[i];
        one[i] = be_open();
        ck_assert_msg(store_mysql_member_ops.prepare_tables(one[i], &cause) == STORE_OK,
                      "tables: %s", cause);
        ck_assert_int_eq(store_insert(one[i], "order", 1, 10, "", &cause),
                         STORE_OK);
    }
    /* The running single-URL node, on the second database. */
    be.cfg.mysql_url = urls[1];
    single = be_open();
    ck_assert_int_eq(store_alloc(single, "order", 10, &max_id, &step, &cause),
                     STORE_OK);
    ck_assert_int_eq(store_serial_alloc(single, 0, fixed_row_name,
                                        (void *)"PAY:20261123", 10, &db_ms, got,
                                        sizeof got, &max_id, &cause), STORE_OK);
    /* init freezes it first: refused from then on. */
    ck_assert_int_eq(store_mysql_member_ops.freeze(one[1], 1, &cause), STORE_OK);
    ck_assert_int_ne(store_alloc(single, "order", 10, &max_id, &step, &cause),
                     STORE_OK);
    ck_assert_msg(strstr(cause, "leafd multi-db init") != NULL &&
                  strstr(cause, "segment.mysql.urls") != NULL, "%s", cause);
    free(cause);
    cause = NULL;
    /* (A freeze of its own is no set: init would refuse the row.) */
    url_exec(urls[1], "DROP TABLE leafd_multi_db");
    ck_assert_msg(store_multi_init(&be.cfg, urls, 2, 1000, 0, 0, out, &cause) == 0,
                  "init: %s", cause);
    store_thread_init();                /* init ended this thread's */
    /* A member of a set of 2: every load refused, nothing taken. */
    ck_assert_int_ne(store_alloc(single, "order", 10, &max_id, &step, &cause),
                     STORE_OK);
    ck_assert_msg(strstr(cause, "database 1 of a set of 2") != NULL, "%s", cause);
    free(cause);
    cause = NULL;
    ck_assert_int_ne(store_serial_alloc(single, 0, fixed_row_name,
                                        (void *)"PAY:20261123", 10, &db_ms, got,
                                        sizeof got, &max_id, &cause), STORE_OK);
    ck_assert_msg(strstr(cause, "database 1 of a set of 2") != NULL, "%s", cause);
    free(cause);
    cause = NULL;
    {
        struct store_row row;

        ck_assert_int_eq(store_get(one[1], "order", &row, &cause), STORE_OK);
        ck_assert_int_eq(row.max_id, 1000);     /* init's: block 1 */
    }
    store_close(single);
    for (int i = 0; i < 2; i++) {
        store_close(one[i]);
        snprintf(sql, sizeof sql, "DROP DATABASE %s", name[i]);
        url_exec(base, sql);
        free(urls[i]);
    }
    fclose(out);
}
END_TEST

/* Issue 28, 3.2: the first database of a set (its serial rows) restored
 * from an older dump while the nodes run. Its row is below what the set
 * handed out; the copies in the other databases (pushed after every
 * serial load) show it: the load is refused in its transaction, naming
 * the copy, instead of handing the serials out again. */
START_TEST(test_multi_serial_first_restored)
{
    const char *base = be.cfg.mysql_url;
    char *urls[2], *cause = NULL, list[1100], sql[256], name[2][64];
    char got[TAG_MAX + 1];
    struct store *m;
    FILE *out = tmpfile();
    int64_t max_id, db_ms;

    ck_assert_ptr_nonnull(out);
    for (int i = 0; i < 2; i++)
        urls[i] = fresh_schema(base, "restore", i, name[i], sizeof name[i]);
    ck_assert_msg(store_multi_init(&be.cfg, urls, 2, 1000, 0, 0, out, &cause) == 0,
                  "init: %s", cause);
    store_thread_init();
    snprintf(list, sizeof list, "%s,%s", urls[0], urls[1]);
    be.cfg.mysql_url = NULL;
    be.cfg.mysql_urls = list;
    m = be_open();
    serial_row(m, "PAY:20261128");
    serial_row(m, "PAY:20261128");                  /* [11, 21) */
    url_exec(urls[0], "UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = "
             "'PAY:20261128'");
    ck_assert_int_ne(store_serial_alloc(m, 0, fixed_row_name,
                                        (void *)"PAY:20261128", 10, &db_ms, got,
                                        sizeof got, &max_id, &cause), STORE_OK);
    ck_assert_msg(strstr(cause, "copy in database 1") != NULL &&
                  strstr(cause, "went back in time") != NULL, "%s", cause);
    free(cause);
    cause = NULL;
    /* Nothing changed: the row is where the restore left it. */
    url_exec(urls[0], "UPDATE leaf_alloc SET max_id = 21 WHERE biz_tag = "
             "'PAY:20261128'");
    serial_row(m, "PAY:20261128");
    store_close(m);
    be.cfg.mysql_urls = NULL;
    for (int i = 0; i < 2; i++) {
        snprintf(sql, sizeof sql, "DROP DATABASE %s", name[i]);
        url_exec(base, sql);
        free(urls[i]);
    }
    fclose(out);
}
END_TEST

/* multi-db init against real databases: a list that lacks a member of
 * the set is refused, naming the floor flag; with --floor no ID below it
 * is handed out; a reordered list keeps the serial rows (merged into the
 * new first database at their greatest value). */
START_TEST(test_multi_init_members)
{
    const char *base = be.cfg.mysql_url;
    const int64_t block = 1000;
    char *urls[3], *list[2], *cause = NULL, sql[256], name[3][64];
    struct store *a, *c;
    struct store_row row;
    FILE *out = tmpfile();

    ck_assert_ptr_nonnull(out);
    for (int i = 0; i < 3; i++)
        urls[i] = fresh_schema(base, "mm", i, name[i], sizeof name[i]);
    be.cfg.mysql_url = urls[0];
    a = be_open();
    ck_assert_int_eq(store_mysql_member_ops.prepare_tables(a, &cause), STORE_OK);
    ck_assert_int_eq(store_insert(a, "mm", 1, 10, NULL, &cause), STORE_OK);
    serial_row(a, "PAY:all");
    serial_row(a, "PAY:all");               /* max_id 21 */
    ck_assert_msg(store_multi_init(&be.cfg, urls, 2, block, 0, 0, out, &cause) == 0,
                  "init A B: %s", cause);
    store_thread_init();
    /* B lost, C in its place: refused, the message says how. */
    list[0] = urls[0];
    list[1] = urls[2];
    ck_assert_int_eq(store_multi_init(&be.cfg, list, 2, block, 0, 0, out, &cause), -1);
    store_thread_init();
    ck_assert_msg(strstr(cause, "database 1 of the set") != NULL &&
                  strstr(cause, "--floor=N") != NULL, "%s", cause);
    free(cause);
    cause = NULL;
    ck_assert_msg(store_multi_init(&be.cfg, list, 2, block, 123456, 0, out,
                                   &cause) == 0, "init A C --floor: %s", cause);
    store_thread_init();
    be.cfg.mysql_url = urls[2];
    c = be_open();
    ck_assert_int_eq(store_get(c, "mm", &row, &cause), STORE_OK);
    ck_assert_int_ge(row.max_id, 123456);
    /* Reordered (C first): C gets the serial row at its value. */
    list[0] = urls[2];
    list[1] = urls[0];
    ck_assert_msg(store_multi_init(&be.cfg, list, 2, block, 0, 0, out, &cause) == 0,
                  "init C A: %s", cause);
    store_thread_init();
    ck_assert_int_eq(store_get(c, "PAY:all", &row, &cause), STORE_OK);
    ck_assert_int_eq(row.max_id, 21);
    ck_assert(store_row_is_serial(&row));

    store_close(a);
    store_close(c);
    for (int i = 0; i < 3; i++) {
        snprintf(sql, sizeof sql, "DROP DATABASE %s", name[i]);
        url_exec(base, sql);
        free(urls[i]);
    }
    fclose(out);
}
END_TEST

/* Rows init reads are database content: a leafd_multi_db row with a set
 * size out of range and a self row with db_id 0 are refused with a cause,
 * never an assert or a loop bound; a top pushed for a member a database
 * has no row for is recorded all the same. */
START_TEST(test_multi_init_hostile_rows)
{
    const char *base = be.cfg.mysql_url;
    char *urls[2], *cause = NULL, sql[256], name[2][64];
    struct multi_member *mem = NULL;
    size_t nmem = 0;
    struct store *b;
    FILE *out = tmpfile();
    int found = 0;

    ck_assert_ptr_nonnull(out);
    for (int i = 0; i < 2; i++)
        urls[i] = fresh_schema(base, "mh", i, name[i], sizeof name[i]);
    ck_assert_msg(store_multi_init(&be.cfg, urls, 2, 1000, 0, 0, out, &cause) == 0,
                  "init A B: %s", cause);
    store_thread_init();
    url_exec(urls[0], "UPDATE leafd_multi_db SET db_count = 1000000");
    ck_assert_int_eq(store_multi_init(&be.cfg, urls, 2, 1000, 0, 0, out, &cause), -1);
    store_thread_init();
    ck_assert_msg(strstr(cause, "a set has 2 to") != NULL, "%s", cause);
    free(cause);
    cause = NULL;
    url_exec(urls[0], "UPDATE leafd_multi_db SET db_count = 2");

    be.cfg.mysql_url = urls[1];
    b = be_open();
    ck_assert_int_eq(store_mysql_member_ops.top_push(b, 4242, 99, &cause), STORE_OK);
    ck_assert_int_eq(store_mysql_member_ops.members(b, 0, &mem, &nmem, &cause), STORE_OK);
    for (size_t k = 0; k < nmem; k++)
        found |= mem[k].db_id == 4242 && mem[k].top == 99 && mem[k].pos == -1;
    ck_assert_msg(found, "the pushed top is recorded");
    free(mem);
    store_close(b);

    url_exec(urls[0], "UPDATE leafd_multi_member SET db_id = 0 WHERE self = 1");
    ck_assert_int_eq(store_multi_init(&be.cfg, urls, 2, 1000, 0, 0, out, &cause), -1);
    store_thread_init();
    ck_assert_msg(strstr(cause, "db_id 0") != NULL, "%s", cause);
    free(cause);
    for (int i = 0; i < 2; i++) {
        snprintf(sql, sizeof sql, "DROP DATABASE %s", name[i]);
        url_exec(base, sql);
        free(urls[i]);
    }
    fclose(out);
}
END_TEST

/* ---- the failover rule: marks, refusals, fences (store_marks.h) ---- */

/* The database goes back in time under a running process (a restored
 * dump): the next range below what the process had is refused, the whole
 * process with it, until a fence at or above its marks. */
START_TEST(test_marks_behind_then_fence)
{
    struct store *s = be_open();
    char *cause = NULL, sql[512], t1[TAG_MAX + 1], t2[TAG_MAX + 1];
    int64_t max_id = 0, step = 0, top;
    FILE *out = tmpfile();

    store_marks_reset();
    snprintf(t1, sizeof t1, "%s", tag("mk1"));
    snprintf(t2, sizeof t2, "%s", tag("mk2"));
    ck_assert_int_eq(store_insert(s, t1, 1, 100, NULL, &cause), STORE_OK);
    ck_assert_int_eq(store_insert(s, t2, 1, 100, NULL, &cause), STORE_OK);
    ck_assert_int_eq(store_alloc(s, t1, 100, &max_id, &step, &cause), STORE_OK);
    ck_assert_int_eq(store_alloc(s, t1, 100, &max_id, &step, &cause), STORE_OK);
    ck_assert_int_eq(max_id, 201);
    ck_assert_int_eq(store_marks_get(t1), 201);

    /* Restored: max_id back to 101. [101, 201) was handed out already. */
    snprintf(sql, sizeof sql, "UPDATE leaf_alloc SET max_id = 101 WHERE "
             "biz_tag = '%s'", t1);
    be_exec(sql);
    ck_assert_int_eq(store_alloc(s, t1, 100, &max_id, &step, &cause),
                     STORE_REFUSED);
    ck_assert_ptr_nonnull(strstr(cause, "went back in time"));
    free(cause);
    cause = NULL;
    /* Every tag stops: the database forgot, this node cannot tell what. */
    ck_assert_int_eq(store_alloc(s, t2, 100, &max_id, &step, &cause),
                     STORE_REFUSED);
    free(cause);
    cause = NULL;
    ck_assert_int_eq(store_marks_refused(NULL, 0, NULL, 0), 1);

    /* A fence below the marks does not lift it; one at or above does. */
    top = store_marks_max();
    ck_assert_int_eq(store_fence(&be.cfg, top - 1, 0, out, &cause), 0);
    ck_assert_int_eq(store_alloc(s, t2, 100, &max_id, &step, &cause),
                     STORE_REFUSED);
    free(cause);
    cause = NULL;
    ck_assert_int_eq(store_fence(&be.cfg, top + 1000, 0, out, &cause), 0);
    ck_assert_int_eq(store_alloc(s, t1, 100, &max_id, &step, &cause), STORE_OK);
    ck_assert_int_ge(max_id - 100, top + 1000);
    ck_assert_int_eq(store_alloc(s, t2, 100, &max_id, &step, &cause), STORE_OK);
    ck_assert_int_ge(max_id - 100, top + 1000);
    ck_assert_int_eq(store_marks_refused(NULL, 0, NULL, 0), 0);
    fclose(out);
    store_close(s);
}
END_TEST

/* The marks, the server and a refusal survive a restart in the file; a
 * file that is not a marks file stops the start; a last line cut by a
 * crash is dropped. */
START_TEST(test_marks_file)
{
    char path[256], code[32], srv[MARKS_SERVER_MAX];
    char *cause = NULL;
    struct marks_fence fence;
    FILE *f;

    snprintf(path, sizeof path, "%s/marks", be.dir);
    store_marks_reset();
    ck_assert_int_eq(store_marks_open(path, &cause), 0);
    ck_assert_int_eq(store_marks_take("a", 0, 100, 10, "db", NULL), 0);
    ck_assert_int_eq(store_marks_take("b", 0, 5000, 10, "db", NULL), 0);
    ck_assert_int_eq(store_marks_take("PAY:1", 1, 70, 10, "db", NULL), 0);
    store_marks_set_server("server_id=7");
    ck_assert_int_eq(store_marks_take("a", 0, 50, 10, "db", &cause), -1);
    free(cause);
    cause = NULL;
    store_marks_close();
    store_marks_reset();
    ck_assert_int_eq(store_marks_get("a"), 0);

    ck_assert_int_eq(store_marks_open(path, &cause), 0);
    ck_assert_int_eq(store_marks_get("a"), 100);
    ck_assert_int_eq(store_marks_get("b"), 5000);
    ck_assert_int_eq(store_marks_max(), 5000);
    store_marks_server(srv, sizeof srv);
    ck_assert_str_eq(srv, "server_id=7");
    ck_assert_int_eq(store_marks_serial_max(), 70);
    ck_assert_int_eq(store_marks_refused(code, sizeof code, NULL, 0), 1);
    ck_assert_str_eq(code, "store_behind");
    /* The fences there at the refusal never lift it; a later one of the
     * server that answers, at or above both marks, does. */
    fence = (struct marks_fence){ .id = 3, .floor = 9000, .serial_floor = 900 };
    snprintf(fence.server, sizeof fence.server, "server_id=8");
    ck_assert_int_eq(store_marks_fenced(&fence, "server_id=8"), 0);
    ck_assert_int_eq(store_marks_refused_fence(), 3);
    ck_assert_int_eq(store_marks_fenced(&fence, "server_id=8"), 0);
    fence.id = 4;
    fence.floor = 4999;
    ck_assert_int_eq(store_marks_fenced(&fence, "server_id=8"), 0);
    fence.floor = 5000;
    fence.serial_floor = 69;
    ck_assert_int_eq(store_marks_fenced(&fence, "server_id=8"), 0);
    fence.serial_floor = 70;
    ck_assert_int_eq(store_marks_fenced(&fence, "server_id=9"), 0);
    ck_assert_int_eq(store_marks_fenced(&fence, "server_id=8;semi"), 1);
    store_marks_close();
    store_marks_reset();

    /* A line cut by a crash: the whole lines before it hold. */
    f = fopen(path, "a");
    fputs("m a 90000", f);
    fclose(f);
    ck_assert_int_eq(store_marks_open(path, &cause), 0);
    ck_assert_int_eq(store_marks_refused(NULL, 0, NULL, 0), 0);
    ck_assert_int_eq(store_marks_get("a"), 100);
    store_marks_server(srv, sizeof srv);
    ck_assert_str_eq(srv, "server_id=8;semi");
    store_marks_close();
    store_marks_reset();

    /* Many loads, few tags: the file stays in proportion to the tags. */
    ck_assert_int_eq(store_marks_open(path, &cause), 0);
    for (int64_t v = 200; v < 300000; v++)
        ck_assert_int_eq(store_marks_take("a", 0, v, 1, "db", NULL), 0);
    {
        struct stat sb;

        ck_assert_int_eq(stat(path, &sb), 0);
        ck_assert_msg(sb.st_size < (2 << 20), "marks file of %lld bytes "
                      "after 299,800 loads of one tag (3.2 MB of appends)", (long long)sb.st_size);
    }
    store_marks_close();
    store_marks_reset();
    ck_assert_int_eq(store_marks_open(path, &cause), 0);
    ck_assert_int_eq(store_marks_get("a"), 299999);
    store_marks_close();
    store_marks_reset();

    f = fopen(path, "w");
    fputs("not a marks file\n", f);
    fclose(f);
    ck_assert_int_eq(store_marks_open(path, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "not a leafd marks line"));
    free(cause);
    unlink(path);
}
END_TEST

static char private_dir[256];

static void
private_mariadb_stop(void)
{
    char path[512], line[1600];

    if (private_dir[0] == '\0')
        return;
    snprintf(line, sizeof line, "sh %s stop %s >/dev/null 2>&1; rm -rf %s",
             root_path("tests/lib/mariadb.sh", path, sizeof path),
             private_dir, private_dir);
    private_dir[0] = '\0';
    if (system(line) != 0)
        fprintf(stderr, "check_store: stopping %s failed\n", line);
}

/* A throwaway MariaDB in dir (tests/lib/mariadb.sh): its URL into url. */
static char *
private_mariadb(char *dir, size_t dcap, char *url, size_t ucap)
{
    char path[512], line[1600];
    FILE *f;

    snprintf(dir, dcap, "%s/db", be.dir);
    /* Stopped when the test's process ends, also after a failed assert. */
    snprintf(private_dir, sizeof private_dir, "%s", dir);
    atexit(private_mariadb_stop);
    snprintf(line, sizeof line, "sh %s start %s >/dev/null 2>&1",
             root_path("tests/lib/mariadb.sh", path, sizeof path), dir);
    ck_assert_int_eq(system(line), 0);
    snprintf(path, sizeof path, "%s/env", dir);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    url[0] = '\0';
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "MYSQL_URL=", 10) == 0)
            snprintf(url, ucap, "%.*s", (int)strcspn(line + 10, "\n"),
                     line + 10);
    fclose(f);
    ck_assert_int_ne(url[0], '\0');
    return url;
}

/* Run sql, then return the first column of the first row as a number. */
static long long
url_query_i64(const char *url, const char *sql)
{
    struct db_mysql_target t;
    char *cause = NULL;
    MYSQL *db = mysql_init(NULL);
    MYSQL_RES *res;
    MYSQL_ROW row;
    long long v;

    ck_assert_int_eq(db_mysql_url_parse(url, &t, &cause), 0);
    ck_assert_msg(mysql_real_connect(db, t.host, t.user, t.password,
                  t.database, (unsigned)t.port, t.socket, 0) != NULL,
                  "connect: %s", mysql_error(db));
    ck_assert_msg(mysql_query(db, sql) == 0, "%s: %s", sql, mysql_error(db));
    res = mysql_store_result(db);
    row = mysql_fetch_row(res);
    v = row != NULL && row[0] != NULL ? atoll(row[0]) : -1;
    mysql_free_result(res);
    mysql_close(db);
    db_mysql_target_free(&t);
    return v;
}

/* A failover as the store sees it: the server behind the URL has another
 * @@server_id. Under async, every load is refused (db_failover) until a
 * fence; a read-only server is down; semi-sync off and a Galera node that
 * is not one are refused too. The server's settings are put back before
 * anything is asserted. */
START_TEST(test_mysql_server_change)
{
    struct store *s, *semi, *galera;
    char *cause = NULL, *c_change = NULL, *c_ro = NULL, *c_semi = NULL;
    char *c_galera = NULL, sql[256], code[32], dbdir[256], url[256];
    char why[1024];
    int64_t max_id = 0, step = 0, max_ro = 0, top;
    long long sid;
    enum store_result r_change, r_ro, r_semi, r_galera, r_again;
    FILE *out = tmpfile();

    store_marks_reset();
    /* A server of its own: other suites share LEAFD_TEST_MYSQL_URL's, and
     * server_id and read_only are global. */
    be.cfg.mysql_url = private_mariadb(dbdir, sizeof dbdir, url, sizeof url);
    be.cfg.mysql_replication = REPL_ASYNC;
    s = be_open();
    ck_assert_int_eq(store_insert(s, tag("fo"), 1, 10, NULL, &cause), STORE_OK);
    ck_assert_int_eq(store_alloc(s, tag("fo"), 10, &max_id, &step, &cause),
                     STORE_OK);

    /* A fence from an earlier incident, above every mark: it must not
     * lift the refusal of a failover that comes after it. */
    ck_assert_int_eq(store_fence(&be.cfg, store_marks_max() + 1000000, 0, out,
                                 &cause), 0);
    sid = url_query_i64(be.cfg.mysql_url, "SELECT @@GLOBAL.server_id");
    snprintf(sql, sizeof sql, "SET GLOBAL server_id = %lld", sid + 1000);
    url_exec(be.cfg.mysql_url, sql);
    r_change = store_alloc(s, tag("fo"), 10, &max_id, &step, &c_change);
    snprintf(sql, sizeof sql, "SET GLOBAL server_id = %lld", sid);
    url_exec(be.cfg.mysql_url, sql);
    /* Sticky: the old server back is no proof that nothing was lost. */
    r_again = store_alloc(s, tag("fo"), 10, &max_id, &step, &cause);

    url_exec(be.cfg.mysql_url, "SET GLOBAL read_only = 1");
    r_ro = store_alloc(s, tag("fo"), 10, &max_ro, &step, &c_ro);
    url_exec(be.cfg.mysql_url, "SET GLOBAL read_only = 0");

    ck_assert_int_eq(r_change, STORE_REFUSED);
    ck_assert_ptr_nonnull(strstr(c_change, "changed from"));
    ck_assert_int_eq(store_marks_refused(code, sizeof code, NULL, 0), 1);
    ck_assert_str_eq(code, "db_failover");
    ck_assert_int_eq(r_again, STORE_REFUSED);
    ck_assert_int_eq(r_ro, STORE_REFUSED);  /* refused first, read-only next */
    free(cause);
    cause = NULL;
    free(c_ro);
    c_ro = NULL;

    top = store_marks_max();
    ck_assert_int_eq(store_fence(&be.cfg, top + 2000000, 0, out, &cause), 0);
    ck_assert_int_eq(store_alloc(s, tag("fo"), 10, &max_id, &step, &cause),
                     STORE_OK);
    ck_assert_int_ge(max_id - 10, top + 2000000);

    url_exec(be.cfg.mysql_url, "SET GLOBAL read_only = 1");
    r_ro = store_alloc(s, tag("fo"), 10, &max_ro, &step, &c_ro);
    url_exec(be.cfg.mysql_url, "SET GLOBAL read_only = 0");
    ck_assert_int_eq(r_ro, STORE_DB_ERROR);
    ck_assert_ptr_nonnull(strstr(c_ro, "read-only"));

    /* Semi-sync is off on a lone server: no range may be used. */
    be.cfg.mysql_replication = REPL_SEMI_SYNC;
    semi = be_open();
    /* Shown without a load (the loader probes at each refresh). */
    ck_assert_int_eq(store_repl_health(why, sizeof why), 0);
    store_probe(semi);
    ck_assert_int_eq(store_repl_health(why, sizeof why), 1);
    ck_assert_ptr_nonnull(strstr(why, "semi-sync"));
    r_semi = store_alloc(semi, tag("fo"), 10, &max_id, &step, &c_semi);
    ck_assert_int_eq(r_semi, STORE_DEGRADED);
    ck_assert_ptr_nonnull(strstr(c_semi, "semi-sync"));
    /* Nor is a lone server a Galera node. */
    be.cfg.mysql_replication = REPL_GALERA;
    galera = be_open();
    r_galera = store_alloc(galera, tag("fo"), 10, &max_id, &step, &c_galera);
    ck_assert_int_eq(r_galera, STORE_DB_ERROR);
    ck_assert_ptr_nonnull(strstr(c_galera, "not ready"));

    free(cause);
    free(c_change);
    free(c_ro);
    free(c_semi);
    free(c_galera);
    fclose(out);
    store_close(galera);
    store_close(semi);
    store_close(s);
    private_mariadb_stop();
}
END_TEST

static void
add_behaviour(TCase *tc)
{
    tcase_add_test(tc, test_alloc_basic);
    tcase_add_test(tc, test_alloc_invalid);
    tcase_add_test(tc, test_alloc_overflow);
    tcase_add_test(tc, test_list);
    tcase_add_test(tc, test_tag_case);
    tcase_add_test(tc, test_two_handles);
    tcase_add_test(tc, test_concurrent);
}

static Suite *
store_suite(void)
{
    Suite *su = suite_create("store");
    TCase *tc;

    tc = tcase_create("url");
    tcase_add_test(tc, test_url_jdbc);
    tcase_add_test(tc, test_url_mysql);
    tcase_add_test(tc, test_url_bad);
    tcase_add_test(tc, test_open_config_errors);
    tcase_add_test(tc, test_mysql_down);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(su, tc);

    tc = tcase_create("sqlite");
    tcase_add_checked_fixture(tc, be_sqlite_setup, be_teardown);
    add_behaviour(tc);
    tcase_add_test(tc, test_sqlite_schema_files);
    tcase_add_test(tc, test_sqlite_demo_and_pragmas);
    tcase_add_test(tc, test_sqlite_fresh_race);
    tcase_add_test(tc, test_sqlite_busy);
    tcase_add_test(tc, test_marks_file);
    /* SQLite only: a fence raises every row of the database, and the MySQL
     * one is shared (test_mysql_server_change fences its own server). */
    tcase_add_test(tc, test_marks_behind_then_fence);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(su, tc);

    if (getenv("LEAFD_TEST_MYSQL_URL") != NULL &&
        *getenv("LEAFD_TEST_MYSQL_URL") != '\0') {
        tc = tcase_create("mysql");
        tcase_add_checked_fixture(tc, be_mysql_setup, be_teardown);
        add_behaviour(tc);
        tcase_add_test(tc, test_mysql_jdbc_url);
        tcase_add_test(tc, test_mysql_restart);
        tcase_add_test(tc, test_mysql_hung);
        tcase_add_test(tc, test_mysql_deadlock_retry);
        tcase_add_test(tc, test_multi_serial_rows);
        tcase_add_test(tc, test_multi_init_members);
        tcase_add_test(tc, test_multi_init_hostile_rows);
        tcase_add_test(tc, test_mysql_server_change);
        tcase_add_test(tc, test_single_node_during_init);
        tcase_add_test(tc, test_multi_serial_first_restored);
        tcase_set_timeout(tc, 180);
        suite_add_tcase(su, tc);
    } else {
        printf("check_store: LEAFD_TEST_MYSQL_URL not set: %s the MySQL tests "
               "(see tests/lib/mariadb.sh)\n",
               in_ci() ? "CI=1, so FAILING: cannot run" : "skipping");
        ci_missing |= in_ci();
    }
    /* PostgreSQL: the behaviour above, on its own cluster unless given. */
    if (access("/usr/lib/postgresql/15/bin/postgres", X_OK) == 0 ||
        getenv("LEAFD_TEST_PG_URL") != NULL) {
        tc = tcase_create("postgresql");
        tcase_add_unchecked_fixture(tc, pg_case_start, pg_case_stop);
        tcase_add_checked_fixture(tc, be_pg_setup, be_teardown);
        add_behaviour(tc);
        tcase_set_timeout(tc, 180);
        suite_add_tcase(su, tc);
    } else {
        printf("check_store: no postgresql-15: %s the PostgreSQL tests\n",
               in_ci() ? "CI=1, so FAILING: cannot run" : "skipping");
        ci_missing |= in_ci();
    }
    return su;
}

int
main(void)
{
    SRunner *sr = srunner_create(store_suite());
    int failed;

    setvbuf(stdout, NULL, _IOLBF, 0);   /* nothing buffered across fork */
    log_init(LOGL_WARN, NULL);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    store_library_end();
    if (ci_missing)
        printf("check_store: FAILED: CI=1 and no MariaDB to test against\n");
    return failed == 0 && !ci_missing ? 0 : 1;
}
