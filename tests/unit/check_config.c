/* check_config.c: the key table, file / environment / flag parsing, and
 * cross-key validation (config.c). */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"

static char *
load(struct config *c, const char *text)
{
    char *cause = NULL;

    config_defaults(c);
    if (config_load_string(c, "test.conf", text, &cause) == -1)
        return cause;
    c->from_file = 1;
    if (config_validate(c, &cause) == -1)
        return cause;
    return NULL;
}

START_TEST(defaults)
{
    struct config c;
    char *cause = NULL;

    ck_assert_int_eq(config_load(&c, NULL, NULL, 0, &cause), 0);
    ck_assert_str_eq(c.listen_address, "127.0.0.1");
    ck_assert_int_eq(c.listen_port, 8080);
    ck_assert_int_eq(c.wait_ms, 500);
    ck_assert_int_eq(c.count_max, 1000);
    ck_assert_int_eq(c.prefetch_percent, 10);
    ck_assert_int_eq(c.refresh_ms, 60000);
    ck_assert_int_eq(c.epoch_ms, 1288834974657LL);
    /* No config file: the embedded default serves both modes. */
    ck_assert_int_eq(c.segment_enable, 1);
    ck_assert_int_eq(c.snowflake_enable, 1);
    ck_assert_int_eq(c.store, STORE_SQLITE);
    ck_assert_int_eq(c.worker_source, WORKER_STATIC);
    config_free(&c);
}
END_TEST

START_TEST(leaf_properties_load)
{
    struct config c;
    char *cause = load(&c,
        "# Leaf's leaf.properties\n"
        "leaf.name=com.sankuai.leaf.opensource.test\n"
        "leaf.segment.enable=true\n"
        "leaf.jdbc.url=jdbc:mysql://127.0.0.1:3306/leaf?useUnicode=true&characterEncoding=utf8\n"
        "leaf.jdbc.username=root\n"
        "leaf.jdbc.password=secret\n"
        "\n"
        "leaf.snowflake.enable=false\n"
        "#leaf.snowflake.zk.address=\n"
        "#leaf.snowflake.port=\n");

    ck_assert_msg(cause == NULL, "%s", cause);
    ck_assert_str_eq(c.leaf_name, "com.sankuai.leaf.opensource.test");
    ck_assert_int_eq(c.segment_enable, 1);
    ck_assert_int_eq(c.snowflake_enable, 0);
    ck_assert_int_eq(c.store, STORE_MYSQL);
    ck_assert_str_eq(c.jdbc_password, "secret");
    config_free(&c);
}
END_TEST

START_TEST(missing_enable_key_is_off_with_a_file)
{
    struct config c;
    char *cause = load(&c, "leaf.snowflake.enable = true\n");

    ck_assert_msg(cause == NULL, "%s", cause);
    ck_assert_int_eq(c.segment_enable, 0);
    ck_assert_int_eq(c.snowflake_enable, 1);
    config_free(&c);
}
END_TEST

START_TEST(separators_comments_spaces)
{
    struct config c;
    char *cause = load(&c,
        "  ! a Java-style comment\n"
        "listen.port : 9000\r\n"
        "\tthreads=3  \n"
        "leaf.segment.enable = yes\n"
        "log.level = WARN\n");

    ck_assert_msg(cause == NULL, "%s", cause);
    ck_assert_int_eq(c.listen_port, 9000);
    ck_assert_int_eq(c.threads, 3);
    ck_assert_int_eq(c.log_level, 2);
    config_free(&c);
}
END_TEST

static void
expect_error(const char *text, const char *needle)
{
    struct config c;
    char *cause = load(&c, text);

    ck_assert_msg(cause != NULL, "accepted: %s", text);
    ck_assert_msg(strstr(cause, needle) != NULL, "cause \"%s\" lacks \"%s\"", cause, needle);
    free(cause);
    config_free(&c);
}

START_TEST(bad_values)
{
    expect_error("leaf.segment.enable = true\nlisten.prot = 80\n", "test.conf:2: unknown key \"listen.prot\"");
    expect_error("leaf.segment.enable = maybe\n", "test.conf:1: leaf.segment.enable: expected true or false");
    expect_error("leaf.segment.enable=true\nlisten.port = 70000\n", "test.conf:2: listen.port: 70000 is out of range");
    expect_error("leaf.segment.enable=true\nlisten.port = 80x\n", "expected an integer");
    expect_error("leaf.segment.enable=true\nlisten.port = \n", "expected an integer");
    expect_error("leaf.segment.enable=true\nsegment.store = oracle\n", "not one of the allowed values");
    expect_error("just some words\n", "test.conf:1: expected \"key = value\"");
    expect_error("leaf.snowflake.enable=true\nsnowflake.worker_bits = 11\n", "must be 63");
    expect_error("leaf.snowflake.enable=true\nsnowflake.worker_id = 1024\n", "does not fit in 10 worker bits");
    expect_error("leaf.segment.enable=true\nsegment.store = mysql\n", "neither leaf.jdbc.url nor segment.mysql.url");
    expect_error("leaf.snowflake.enable=true\nsnowflake.worker_source = zookeeper\n", "zk.address is not set");
    expect_error("leaf.snowflake.enable=true\nsnowflake.k8s.fence_store = redis\n", "fence_store is set but snowflake.worker_source is not k8s");
    expect_error("leaf.snowflake.enable=true\nsnowflake.worker_source = k8s\nsnowflake.k8s.fence_store = zookeeper\n", "not one of the allowed values");
    expect_error("leaf.segment.enable=false\nleaf.snowflake.enable=false\n", "nothing to serve");
    expect_error("", "nothing to serve");
    /* Several PostgreSQL databases: segment.postgresql.urls; a set mixing
     * kinds is refused (docs/multi-db.md, "PostgreSQL"). */
    expect_error("leaf.segment.enable=true\nsegment.store = postgresql\n"
                 "segment.postgresql.url = postgresql://l@h/leaf\n"
                 "segment.mysql.urls = mysql://l@a:1/leaf,mysql://l@b:1/leaf\n",
                 "segment.store is postgresql but segment.mysql.urls is set "
                 "(several PostgreSQL databases go in segment.postgresql.urls)");
    expect_error("leaf.segment.enable=true\nsegment.store = postgresql\n"
                 "segment.postgresql.url = postgresql://l@a/leaf, POSTGRES://l@b/leaf\n",
                 "segment.postgresql.url holds 2 connection URIs: several databases "
                 "go in segment.postgresql.urls");
    expect_error("leaf.segment.enable=true\n"
                 "segment.mysql.urls = mysql://l@a:1/leaf,postgresql://l@b/leaf\n",
                 "segment.mysql.urls holds a PostgreSQL URI: a set's databases are "
                 "all MySQL/MariaDB");
    expect_error("leaf.segment.enable=true\nsegment.mysql.url = mysql://l@a:1/leaf\n"
                 "segment.postgresql.urls = postgresql://l@a/leaf,postgresql://l@b/leaf\n",
                 "segment.postgresql.urls is set with a MySQL store");
    expect_error("leaf.segment.enable=true\nsegment.postgresql.url = postgresql://l@a/leaf\n"
                 "segment.postgresql.urls = postgresql://l@a/leaf,postgresql://l@b/leaf\n",
                 "segment.postgresql.urls and segment.postgresql.url are both set");
    expect_error("leaf.segment.enable=true\nsegment.postgresql.replication = sync\n"
                 "segment.postgresql.urls = postgresql://l@a/leaf,postgresql://l@b/leaf\n",
                 "segment.postgresql.replication = sync is for one cluster");
}
END_TEST

START_TEST(long_line_and_long_value)
{
    char *big = malloc(10000);
    memset(big, 'a', 9999);
    big[9999] = '\0';
    expect_error(big, "longer than");
    memcpy(big, "leaf.name=", 10);
    big[200] = '\0';
    expect_error(big, "leaf.name: length must be 1 to 64 bytes");
    free(big);
}
END_TEST

START_TEST(env_and_flags_override_file)
{
    struct config c;
    char *cause = NULL;
    char path[] = "/tmp/leafd-check-config-XXXXXX";
    int fd = mkstemp(path);
    char *ov[] = { "--listen.port=9100", "--segment.wait_ms=250" };
    FILE *f = fdopen(fd, "w");

    fputs("leaf.segment.enable = true\nlisten.port = 9000\nthreads = 2\n"
          "segment.count_max = 50\n", f);
    fclose(f);
    setenv("LEAFD_THREADS", "4", 1);
    setenv("LEAFD_SEGMENT_COUNT_MAX", "70", 1);
    ck_assert_int_eq(config_load(&c, path, ov, 2, &cause), 0);
    ck_assert_int_eq(c.listen_port, 9100);     /* flag beats file */
    ck_assert_int_eq(c.threads, 4);            /* env beats file */
    ck_assert_int_eq(c.count_max, 70);
    ck_assert_int_eq(c.wait_ms, 250);
    config_free(&c);

    setenv("LEAFD_NO_SUCH_KEY", "1", 1);
    ck_assert_int_eq(config_load(&c, path, NULL, 0, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "unknown variable LEAFD_NO_SUCH_KEY"));
    free(cause);
    config_free(&c);
    unsetenv("LEAFD_NO_SUCH_KEY");

    {
        char *bad[] = { "--no.such=1" };
        ck_assert_int_eq(config_load(&c, path, bad, 1, &cause), -1);
        ck_assert_ptr_nonnull(strstr(cause, "unknown key \"no.such\""));
        free(cause);
        config_free(&c);
    }
    unlink(path);
    ck_assert_int_eq(config_load(&c, "/nonexistent/leafd.conf", NULL, 0, &cause), -1);
    ck_assert_ptr_nonnull(strstr(cause, "/nonexistent/leafd.conf: cannot open"));
    free(cause);
    config_free(&c);
}
END_TEST

START_TEST(shipped_conf_file_is_valid)
{
    struct config c;
    char *cause = NULL;
    int rc = config_load(&c, "conf/leafd.conf", NULL, 0, &cause);

    ck_assert_msg(rc == 0, "conf/leafd.conf: %s", cause);
    config_free(&c);
}
END_TEST

/* SIGHUP's reload sets log.level while every thread asks log_enabled: the
 * level is an atomic, so ThreadSanitizer (the TSan build of this suite) sees
 * no race here. (It was a plain enum.) */
static atomic_int level_stop;

static void *
level_reader(void *arg)
{
    long n = 0;

    (void)arg;
    while (!atomic_load(&level_stop))
        n += log_enabled(LOGL_DEBUG);
    return (void *)n;
}

START_TEST(log_level_set_while_read)
{
    pthread_t t[2];

    atomic_store(&level_stop, 0);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, level_reader, NULL), 0);
    for (int i = 0; i < 20000; i++)
        log_set_level(i % 2 ? LOGL_DEBUG : LOGL_WARN);
    atomic_store(&level_stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    log_set_level(LOGL_INFO);
    ck_assert(!log_enabled(LOGL_DEBUG) && log_enabled(LOGL_INFO));
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, defaults);
    tcase_add_test(tc, leaf_properties_load);
    tcase_add_test(tc, missing_enable_key_is_off_with_a_file);
    tcase_add_test(tc, separators_comments_spaces);
    tcase_add_test(tc, bad_values);
    tcase_add_test(tc, long_line_and_long_value);
    tcase_add_test(tc, env_and_flags_override_file);
    tcase_add_test(tc, shipped_conf_file_is_valid);
    tcase_add_test(tc, log_level_set_while_read);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
