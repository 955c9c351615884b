/* check_workerid_k8s.c: worker IDs from StatefulSet ordinals
 * (workerid_k8s.c, sfconfig.c's k8s source) and conf/k8s/statefulset.yaml:
 * valid YAML (python3-yaml), a StatefulSet with a volumeClaimTemplate
 * mounted where the cache file is, and LEAFD_* variables that leafd
 * accepts and that select the k8s source; snowflake.k8s.fence_store wired
 * to a lease on the pod's worker ID (the stores themselves:
 * check_workerid_store). Under CI=1 (or true) a missing
 * python3-yaml fails the run. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "sfcodec.h"
#include "sfconfig.h"
#include "snowflake.h"
#include "util.h"
#include "workerid.h"
#include "workerid_lease.h"

static void
rm_tree(const char *dir)
{
    char cmd[128];

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(ordinals)
{
    int64_t w = -1;
    char *cause = NULL;

    ck_assert_int_eq(workerid_k8s_ordinal("leafd-0", 0, 1023, &w, &cause), 0);
    ck_assert_int_eq(w, 0);
    ck_assert_int_eq(workerid_k8s_ordinal("my-leafd-12", 100, 1023, &w,
                                          &cause), 0);
    ck_assert_int_eq(w, 112);
    ck_assert_int_eq(workerid_k8s_ordinal("7", 0, 1023, &w, &cause), 0);
    ck_assert_int_eq(w, 7);
    ck_assert_int_eq(workerid_k8s_ordinal("leafd-1023", 0, 1023, &w, &cause),
                     0);
    {
        const char *bad[] = { "", "leafd", "leafd-", "leafd-x1", "leafd-+1",
                              "leafd-1 ", "leafd-99999999999999999999" };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            ck_assert_msg(workerid_k8s_ordinal(bad[i], 0, 1023, &w,
                                               &cause) == -1, "%s", bad[i]);
            ck_assert_ptr_nonnull(strstr(cause, "k8s"));
            free(cause);
            cause = NULL;
        }
    }
    /* one past the layout */
    ck_assert_int_eq(workerid_k8s_ordinal("leafd-1024", 0, 1023, &w, &cause),
                     -1);
    ck_assert_ptr_nonnull(strstr(cause, "past the highest worker ID 1023"));
    free(cause);
    cause = NULL;
    ck_assert_int_eq(workerid_k8s_ordinal("leafd-24", 1000, 1023, &w,
                                          &cause), -1);
    free(cause);
}
END_TEST

/* The k8s source from the config: the variable's ordinal plus the offset,
 * source "k8s", the fence in the cache file. */
START_TEST(source_from_config)
{
    struct config c;
    struct sfcodec_layout l;
    struct workerid *w;
    char *cause = NULL, dir[] = "/tmp/leafd-k8s-XXXXXX", *cache, *ov[4];
    int64_t worker, fence;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    cache = xasprintf("cache_file=%s/sf.json", dir);
    ov[0] = "--snowflake.worker_source=k8s";
    ov[1] = "--snowflake.k8s.ordinal_env=LEAFD_TEST_POD";
    ov[2] = "--snowflake.k8s.ordinal_offset=5";
    ov[3] = xasprintf("--snowflake.%s", cache);
    ck_assert_int_eq(config_load(&c, NULL, ov, 4, &cause), 0);
    ck_assert_int_eq(sfconfig_layout(&l, &c, -1, &cause), 0);
    unsetenv("LEAFD_TEST_POD");
    ck_assert_ptr_null(sfconfig_workerid_open(&c, &l, 8080, &cause));
    ck_assert_ptr_nonnull(strstr(cause, "LEAFD_TEST_POD is not set"));
    free(cause);
    cause = NULL;
    setenv("LEAFD_TEST_POD", "leafd-3", 1);
    w = sfconfig_workerid_open(&c, &l, 8080, &cause);
    ck_assert_msg(w != NULL, "%s", cause);
    workerid_get(w, &worker, &fence);
    ck_assert_int_eq(worker, 8);
    ck_assert_str_eq(workerid_source(w), "k8s");
    ck_assert_int_eq(workerid_persist(w, 12345, &cause), SNOWFLAKE_PERSIST_OK);
    workerid_close(w);
    /* the fence comes back from the volume */
    w = sfconfig_workerid_open(&c, &l, 8080, &cause);
    ck_assert_msg(w != NULL, "%s", cause);
    workerid_get(w, &worker, &fence);
    ck_assert_int_eq(fence, 12345);
    workerid_close(w);
    setenv("LEAFD_TEST_POD", "leafd-1019", 1);
    ck_assert_ptr_null(sfconfig_workerid_open(&c, &l, 8080, &cause));
    free(cause);
    cause = NULL;
    /* a range (snowflake.worker_id_min/_max): ordinal + offset inside it */
    c.worker_id_min = 5;
    c.worker_id_max = 8;
    setenv("LEAFD_TEST_POD", "leafd-4", 1);
    ck_assert_ptr_null(sfconfig_workerid_open(&c, &l, 8080, &cause));
    ck_assert_msg(strstr(cause, "worker ID 9 is outside snowflake.worker_id_min"
                         "..worker_id_max (5..8)") != NULL, "%s", cause);
    free(cause);
    cause = NULL;
    setenv("LEAFD_TEST_POD", "leafd-3", 1);
    w = sfconfig_workerid_open(&c, &l, 8080, &cause);
    ck_assert_msg(w != NULL, "%s", cause);
    workerid_get(w, &worker, &fence);
    ck_assert_int_eq(worker, 8);
    workerid_close(w);
    config_free(&c);
    free(ov[3]);
    free(cache);
    rm_tree(dir);
}
END_TEST

/* k8s with its fence in a store: a lease asked for exactly the pod's
 * worker ID under the pod name; the store down: no worker ID yet. */
START_TEST(fence_store_from_config)
{
    struct config c;
    struct sfcodec_layout l;
    struct wlease *w;
    struct snowflake_backend b;
    struct sbuf out;
    char *cause = NULL, dir[] = "/tmp/leafd-k8s-XXXXXX", *ov[6];
    int64_t worker, fence;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    ov[0] = "--snowflake.worker_source=k8s";
    ov[1] = "--snowflake.k8s.ordinal_env=LEAFD_TEST_POD";
    ov[2] = "--snowflake.k8s.ordinal_offset=5";
    ov[3] = "--snowflake.k8s.fence_store=redis";
    ov[4] = "--snowflake.redis.url=redis://127.0.0.1:1";  /* nobody there */
    ov[5] = xasprintf("--snowflake.cache_file=%s/sf.json", dir);
    ck_assert_int_eq(config_load(&c, NULL, ov, 6, &cause), 0);
    ck_assert_int_eq(sfconfig_layout(&l, &c, -1, &cause), 0);
    setenv("LEAFD_TEST_POD", "leafd-3", 1);
    w = sfconfig_lease_open(&c, &l, 8080, &cause);
    ck_assert_msg(w != NULL, "%s", cause);
    ck_assert_int_eq(wlease_get(w, &worker, &fence), -1);
    wlease_backend(w, &b);
    memset(&out, 0, sizeof out);
    b.state_json(b.arg, &out);
    sbuf_append(&out, "", 1);
    ck_assert_msg(strstr(out.p, "\"identity\":\"leafd-3\"") != NULL &&
                  strstr(out.p, "\"store\":\"redis\"") != NULL, "%s",
                  out.p);
    sbuf_free(&out);
    wlease_close(w);
    /* past the layout: refused before any store is asked */
    setenv("LEAFD_TEST_POD", "leafd-1019", 1);
    ck_assert_ptr_null(sfconfig_lease_open(&c, &l, 8080, &cause));
    ck_assert_msg(strstr(cause, "past the highest worker ID") != NULL, "%s",
                  cause);
    free(cause);
    cause = NULL;
    config_free(&c);
    /* mysql with no URL anywhere: said so */
    ov[3] = "--snowflake.k8s.fence_store=mysql";
    ck_assert_int_eq(config_load(&c, NULL, ov, 6, &cause), 0);
    setenv("LEAFD_TEST_POD", "leafd-3", 1);
    ck_assert_ptr_null(sfconfig_lease_open(&c, &l, 8080, &cause));
    ck_assert_msg(strstr(cause, "snowflake.mysql.url") != NULL, "%s", cause);
    free(cause);
    config_free(&c);
    free(ov[5]);
    rm_tree(dir);
}
END_TEST

/* A fence store's pod identity is "<namespace>/<pod>"; no namespace: the
 * bare pod name; a namespace that is not a DNS label is refused. */
START_TEST(identity_with_namespace)
{
    char buf[64], *cause = NULL;
    const char *bad[] = { "Prod", "-prod", "prod-", "pr/od", "pr od",
        "a234567890123456789012345678901234567890123456789012345678901234" };

    ck_assert_int_eq(workerid_k8s_identity("web-2", "prod", buf, sizeof buf,
                                           &cause), 0);
    ck_assert_str_eq(buf, "prod/web-2");
    ck_assert_int_eq(workerid_k8s_identity("web-2", "", buf, sizeof buf,
                                           &cause), 0);
    ck_assert_str_eq(buf, "web-2");
    ck_assert_int_eq(workerid_k8s_identity("web-2", NULL, buf, sizeof buf,
                                           &cause), 0);
    ck_assert_str_eq(buf, "web-2");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(workerid_k8s_identity("web-2", bad[i], buf, sizeof buf,
                                            &cause) == -1, "%s", bad[i]);
        ck_assert_ptr_nonnull(strstr(cause, "not a DNS label"));
        free(cause);
        cause = NULL;
    }
    ck_assert_int_eq(workerid_k8s_identity("web-2", "prod", buf, 10, &cause),
                     -1);
    ck_assert_ptr_nonnull(strstr(cause, "over 9 bytes"));
    free(cause);
}
END_TEST

/* snowflake.k8s.namespace_env (the downward API's metadata.namespace):
 * the fence store's identity is "<namespace>/<pod>"; the variable named
 * but not set refuses the start. */
START_TEST(fence_store_namespace_from_config)
{
    struct config c;
    struct sfcodec_layout l;
    struct wlease *w;
    struct snowflake_backend b;
    struct sbuf out;
    char *cause = NULL, dir[] = "/tmp/leafd-k8s-XXXXXX", *ov[7];

    ck_assert_ptr_nonnull(mkdtemp(dir));
    ov[0] = "--snowflake.worker_source=k8s";
    ov[1] = "--snowflake.k8s.ordinal_env=LEAFD_TEST_POD";
    ov[2] = "--snowflake.k8s.namespace_env=LEAFD_TEST_NS";
    ov[3] = "--snowflake.k8s.fence_store=redis";
    ov[4] = "--snowflake.redis.url=redis://127.0.0.1:1";  /* nobody there */
    ov[5] = xasprintf("--snowflake.cache_file=%s/sf.json", dir);
    ck_assert_msg(config_load(&c, NULL, ov, 6, &cause) == 0, "%s", cause);
    ck_assert_int_eq(sfconfig_layout(&l, &c, -1, &cause), 0);
    setenv("LEAFD_TEST_POD", "leafd-3", 1);
    unsetenv("LEAFD_TEST_NS");
    ck_assert_ptr_null(sfconfig_lease_open(&c, &l, 8080, &cause));
    ck_assert_msg(strstr(cause, "LEAFD_TEST_NS is not set") != NULL, "%s",
                  cause);
    free(cause);
    cause = NULL;
    setenv("LEAFD_TEST_NS", "prod", 1);
    w = sfconfig_lease_open(&c, &l, 8080, &cause);
    ck_assert_msg(w != NULL, "%s", cause);
    wlease_backend(w, &b);
    memset(&out, 0, sizeof out);
    b.state_json(b.arg, &out);
    sbuf_append(&out, "", 1);
    ck_assert_msg(strstr(out.p, "\"identity\":\"prod/leafd-3\"") != NULL,
                  "%s", out.p);
    sbuf_free(&out);
    wlease_close(w);
    setenv("LEAFD_TEST_NS", "Prod", 1);
    ck_assert_ptr_null(sfconfig_lease_open(&c, &l, 8080, &cause));
    ck_assert_msg(strstr(cause, "not a DNS label") != NULL, "%s", cause);
    free(cause);
    unsetenv("LEAFD_TEST_NS");
    config_free(&c);
    free(ov[5]);
    rm_tree(dir);
}
END_TEST

static int
in_ci(void)
{
    const char *ci = getenv("CI");
    return ci != NULL && (strcmp(ci, "1") == 0 || strcmp(ci, "true") == 0);
}

static int yaml_missing;

/* conf/k8s/statefulset.yaml: the structure, then every LEAFD_* variable it
 * sets, loaded as leafd would (config_load from the environment). */
START_TEST(manifest)
{
    static const char script[] =
        "import sys, yaml\n"
        "docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]\n"
        "ss = [d for d in docs if d['kind'] == 'StatefulSet']\n"
        "assert len(ss) == 1, 'one StatefulSet'\n"
        "s = ss[0]['spec']\n"
        "vct = s['volumeClaimTemplates']\n"
        "assert vct and vct[0]['spec']['accessModes'] == ['ReadWriteOnce']\n"
        "c = s['template']['spec']['containers'][0]\n"
        "env = {e['name']: e.get('value') for e in c['env']}\n"
        "mounts = {m['name']: m['mountPath'] for m in c['volumeMounts']}\n"
        "cache = env['LEAFD_SNOWFLAKE_CACHE_FILE']\n"
        "assert cache.startswith(mounts[vct[0]['metadata']['name']] + '/')\n"
        "assert env['LEAFD_SNOWFLAKE_WORKER_SOURCE'] == 'k8s'\n"
        "assert env['LEAFD_SNOWFLAKE_K8S_ORDINAL_ENV'] in env\n"
        "assert s['serviceName'] and s['replicas'] >= 1\n"
        "for k, v in env.items():\n"
        "    if k.startswith('LEAFD_'): print('%s=%s' % (k, v))\n";
    const char *root = getenv("LEAFD_ROOT");
    char *cmd, line[512];
    FILE *f, *sf;
    struct config c;
    char *cause = NULL, spath[] = "/tmp/leafd-k8s-yaml-XXXXXX";
    int n = 0, fd;

    fd = mkstemp(spath);
    ck_assert_int_ge(fd, 0);
    sf = fdopen(fd, "w");
    fputs(script, sf);
    fclose(sf);
    cmd = xasprintf("python3 %s %s/conf/k8s/statefulset.yaml", spath,
                    root != NULL ? root : ".");
    f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f) != NULL) {
        char *eq = strchr(line, '=');
        line[strcspn(line, "\n")] = '\0';
        ck_assert_ptr_nonnull(eq);
        *eq = '\0';
        setenv(line, eq + 1, 1);
        n++;
    }
    ck_assert_int_eq(pclose(f), 0);
    unlink(spath);
    free(cmd);
    ck_assert_int_ge(n, 4);
    ck_assert_msg(config_load(&c, NULL, NULL, 0, &cause) == 0, "%s", cause);
    ck_assert_int_eq(c.worker_source, WORKER_K8S);
    ck_assert_str_eq(c.cache_file, "/var/lib/leafd/snowflake.json");
    config_free(&c);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("workerid_k8s");
    TCase *tc = tcase_create("k8s");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, ordinals);
    tcase_add_test(tc, source_from_config);
    tcase_add_test(tc, fence_store_from_config);
    tcase_add_test(tc, identity_with_namespace);
    tcase_add_test(tc, fence_store_namespace_from_config);
    if (system("python3 -c 'import yaml' >/dev/null 2>&1") == 0) {
        tcase_add_test(tc, manifest);
    } else {
        printf("check_workerid_k8s: no python3-yaml: %s the manifest test\n",
               in_ci() ? "CI=1, so FAILING: cannot run" : "skipping");
        yaml_missing = in_ci();
    }
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 && !yaml_missing ? 0 : 1;
}
