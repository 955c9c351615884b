/* check_client.c: libleafd-client (clients/c/) against real leafd servers
 * (./leafd, or $LEAFD_BIN) on the embedded SQLite store, in a scratch
 * directory, on free loopback ports.
 *
 * - 8 threads x 10M IDs (1M under a sanitizer), leafd_next and
 *   leafd_next_n mixed: every ID marked in a shared bitmap, none twice.
 * - Two servers on one table; under load one is killed, restarted, the
 *   other killed: the client fails over and no ID repeats.
 * - Every server down: the client hands out exactly what its range holds,
 *   then fails with LEAFD_EUNAVAILABLE and a reason, without blocking.
 * - A process that holds ranges forks while its threads take IDs: the child
 *   leases fresh ranges, the parent keeps its own, no ID is in both.
 * - Out of memory (fault injection, below): every allocation, thread,
 *   libcurl handle and fork-handler registration of the library fails in
 *   turn; the caller gets NULL or LEAFD_ENOMEM, never an abort, and the
 *   client works again once memory is back.
 *
 * It links build/libleafd-client.a, the archive users get.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "leafd_client.h"

extern char **environ;

/* ---- fault injection ----
 * The Makefile links this test with -Wl,--wrap=malloc,--wrap=calloc,... so
 * every such call of the library (and of this file and libcheck, linked
 * statically as well) goes through the wrappers below. alloc_budget >= 0:
 * that many more allocations succeed, then each one fails until it is set
 * back to -1. Nothing here allocates while a failure is armed except the
 * library: the tests disarm before they assert. */
static _Atomic long alloc_budget = -1;
static _Atomic int fail_thread, fail_curl, fail_atfork;

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
int __real_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *),
                          void *arg);
int __real_pthread_atfork(void (*prepare)(void), void (*parent)(void),
                          void (*child)(void));
CURL *__real_curl_easy_init(void);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *),
                          void *arg);
int __wrap_pthread_atfork(void (*prepare)(void), void (*parent)(void),
                          void (*child)(void));
CURL *__wrap_curl_easy_init(void);

/* A program's own functions with the names of the library's internals
 * (util.c's allocator, the lease parser): linked beside the archive, they
 * must not clash with it (it exports only leafd_ symbols). */
void *xmalloc(size_t size);
int lease_parse(void);

void *
xmalloc(size_t size)
{
    return __real_malloc(size);
}

int
lease_parse(void)
{
    return 0;
}

static int
alloc_fails(void)
{
    long b = atomic_load(&alloc_budget);

    while (b > 0 && !atomic_compare_exchange_weak(&alloc_budget, &b, b - 1))
        ;
    return b == 0;
}

void *
__wrap_malloc(size_t size)
{
    return alloc_fails() ? NULL : __real_malloc(size);
}

void *
__wrap_calloc(size_t n, size_t size)
{
    return alloc_fails() ? NULL : __real_calloc(n, size);
}

void *
__wrap_realloc(void *p, size_t size)
{
    return alloc_fails() ? NULL : __real_realloc(p, size);
}

int
__wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *),
                      void *arg)
{
    return fail_thread ? EAGAIN : __real_pthread_create(t, a, fn, arg);
}

int
__wrap_pthread_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
    return fail_atfork ? ENOMEM : __real_pthread_atfork(prepare, parent, child);
}

CURL *
__wrap_curl_easy_init(void)
{
    return fail_curl ? NULL : __real_curl_easy_init();
}

#ifdef __SANITIZE_THREAD__
/* The fork test's child starts the client's thread again after a fork of a
 * threaded process, which TSan refuses by default. */
const char *__tsan_default_options(void);
const char *
__tsan_default_options(void)
{
    return "die_after_fork=0";
}
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define IDS_PER_THREAD 1000000
#else
#define IDS_PER_THREAD 10000000
#endif
#define NTHREADS 8

static char workdir[256];

static int64_t
mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int
free_port(void)
{
    struct sockaddr_in a = { .sin_family = AF_INET };
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    ck_assert(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static int
port_open(int port)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    int fd = socket(AF_INET, SOCK_STREAM, 0), ok;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* Start leafd on port with the scratch directory's SQLite file, and up
 * to two more flags (NULL: none). */
static pid_t
leafd_start_with(int port, const char *more1, const char *more2)
{
    const char *bin = getenv("LEAFD_BIN") ? getenv("LEAFD_BIN") : "./leafd";
    char p[64], db[320], logf[320];
    /* segment.wait_ms: a lease waits up to 5 s for its range, not 500 ms
     * (on a busy machine, its threads competing with the test's takers,
     * leafd answered 503 "did not give a range ... in time (500 ms)") */
    char *argv[] = { (char *)bin, p, db, "--leaf.snowflake.enable=false",
                     "--segment.wait_ms=5000", (char *)more1, (char *)more2, NULL };
    posix_spawn_file_actions_t fa;
    pid_t pid;
    int64_t end = mono_ms() + 15000;

    snprintf(p, sizeof p, "--listen.port=%d", port);
    snprintf(db, sizeof db, "--segment.sqlite.path=%s/leafd.db", workdir);
    snprintf(logf, sizeof logf, "%s/leafd-%d.log", workdir, port);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, logf, 01 | 0100 | 02000, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    ck_assert_int_eq(posix_spawn(&pid, bin, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    while (!port_open(port)) {
        ck_assert_msg(mono_ms() < end, "leafd did not listen on %d (see %s)", port, logf);
        ck_assert_msg(waitpid(pid, NULL, WNOHANG) == 0, "leafd exited (see %s)", logf);
        usleep(20000);
    }
    return pid;
}

static pid_t
leafd_start(int port)
{
    return leafd_start_with(port, NULL, NULL);
}

static void
leafd_kill(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static void
setup(void)
{
    snprintf(workdir, sizeof workdir, "/tmp/leafd-client-XXXXXX");
    ck_assert(mkdtemp(workdir) != NULL);
}

static void
teardown(void)
{
    char cmd[300];

    snprintf(cmd, sizeof cmd, "rm -rf %s", workdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", workdir);
}

/* ---- a bitmap of IDs seen: a set bit seen again is a duplicate ---- */

static _Atomic uint64_t *seen;
static int64_t seen_bits;
static _Atomic int64_t dups, outside;

static void
seen_new(int64_t bits)
{
    seen_bits = bits;
    seen = calloc((size_t)(bits / 64 + 1), sizeof *seen);
    ck_assert(seen != NULL);
    dups = outside = 0;
}

static void
mark(int64_t id)
{
    uint64_t bit;

    if (id < 0 || id >= seen_bits) {
        outside++;
        return;
    }
    bit = UINT64_C(1) << (id & 63);
    if (atomic_fetch_or_explicit(&seen[id / 64], bit, memory_order_relaxed) & bit)
        dups++;
}

/* ---- 8 threads x 10M ---- */

static struct leafd_client *cl;

static void *
taker(void *arg)
{
    int64_t left = IDS_PER_THREAD, buf[64];

    (void)arg;
    while (left > 0) {
        int64_t id, got = 0;

        /* check writes to its pipe at every assertion that holds (one or
         * two per ID here): they are asserted only where they do not */
        if (left % 7 == 0 && left >= 64) {
            int rc = leafd_next_n(cl, "demo", 64, buf, &got);
            if (rc != LEAFD_OK || got != 64) {
                ck_assert_int_eq(rc, LEAFD_OK);
                ck_assert_int_eq(got, 64);
            }
            for (int i = 0; i < 64; i++)
                mark(buf[i]);
            left -= 64;
        } else {
            int rc = leafd_next(cl, "demo", &id);
            if (rc != LEAFD_OK)
                ck_assert_msg(rc == LEAFD_OK, "%s", leafd_last_error());
            mark(id);
            left--;
        }
    }
    return NULL;
}

START_TEST(eight_threads_no_duplicate)
{
    char url[64];
    int port = free_port();
    pid_t pid = leafd_start(port);
    pthread_t th[NTHREADS];
    struct leafd_client_stats st;
    int64_t t0;

    /* timeout_ms: the lease requests compete with the 8 takers for the
     * cores (the 2 s default ran out under ASan on a busy machine) */
    struct leafd_client_options o = { .timeout_ms = 10000 };

    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    cl = leafd_client_new(url, &o, NULL);
    ck_assert(cl != NULL);
    /* IDs start near 1 on a fresh table; leases waste at most what the
     * client holds at the end (a few lease_max). */
    seen_new((int64_t)NTHREADS * IDS_PER_THREAD + 64000000);
    t0 = mono_ms();
    for (int i = 0; i < NTHREADS; i++)
        pthread_create(&th[i], NULL, taker, NULL);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    leafd_client_stats(cl, &st);
    fprintf(stderr, "check_client: %d threads x %d IDs in %lld ms, %llu leases, "
            "%llu HTTP requests, last lease size %lld\n", NTHREADS, IDS_PER_THREAD,
            (long long)(mono_ms() - t0), (unsigned long long)st.leases,
            (unsigned long long)st.http_requests, (long long)st.lease_size);
    ck_assert_int_eq(dups, 0);
    ck_assert_int_eq(outside, 0);
    ck_assert(st.leases >= 2);
    ck_assert(st.lease_size > 1000);          /* grew with the rate */
    leafd_client_free(cl);
    leafd_kill(pid);
    free(seen);
}
END_TEST

/* ---- failover under load ---- */

static _Atomic int load_stop;
static _Atomic int64_t load_ids, load_errors;

static void *
loader(void *arg)
{
    int64_t buf[100];

    (void)arg;
    while (!load_stop) {
        int64_t got = 0;
        int rc = leafd_next_n(cl, "demo", 100, buf, &got);

        for (int64_t i = 0; i < got; i++)
            mark(buf[i]);
        load_ids += got;
        if (rc != LEAFD_OK) {
            ck_assert_msg(rc == LEAFD_EUNAVAILABLE, "%d: %s", rc, leafd_last_error());
            load_errors++;
            usleep(5000);
        }
    }
    return NULL;
}

START_TEST(failover_kill_and_restart)
{
    int pa = free_port(), pb = free_port();
    pid_t a = leafd_start(pa), b = leafd_start(pb);
    struct leafd_client_options o = { .lease_min = 500, .lease_max = 5000,
                                      .timeout_ms = 500, .dead_ms = 300 };
    struct leafd_client_stats st;
    pthread_t th[4];
    char urls[128];
    int64_t before;

    snprintf(urls, sizeof urls, "http://127.0.0.1:%d,http://127.0.0.1:%d", pa, pb);
    cl = leafd_client_new(urls, &o, NULL);
    ck_assert(cl != NULL);
    seen_new(400000000);
    load_stop = 0;
    load_ids = load_errors = 0;
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, loader, NULL);
    usleep(700000);
    leafd_kill(a);                          /* the preferred server dies */
    before = load_ids;
    usleep(700000);
    ck_assert_msg(load_ids > before, "no ID after the first server died");
    a = leafd_start(pa);                    /* back */
    usleep(300000);
    leafd_kill(b);                          /* and the other dies */
    before = load_ids;
    usleep(1000000);
    ck_assert_msg(load_ids > before, "no ID after the second server died");
    load_stop = 1;
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    leafd_client_stats(cl, &st);
    fprintf(stderr, "check_client: failover: %lld IDs, %llu leases, %llu failovers, "
            "%lld errors\n", (long long)load_ids, (unsigned long long)st.leases,
            (unsigned long long)st.failovers, (long long)load_errors);
    ck_assert(st.failovers >= 1);
    ck_assert_int_eq(dups, 0);
    ck_assert_int_eq(outside, 0);
    leafd_client_free(cl);
    leafd_kill(a);
    free(seen);
}
END_TEST

/* ---- every server down ---- */

START_TEST(all_down_serves_the_rest_then_fails)
{
    int port = free_port();
    pid_t pid = leafd_start(port);
    struct leafd_client_options o = { .lease_min = 10000, .lease_max = 10000,
                                      .prefetch_percent = 99, .timeout_ms = 500,
                                      .dead_ms = 60000 };
    char url[64];
    int64_t id, first, n = 0, t0;
    int rc;

    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    cl = leafd_client_new(url, &o, NULL);
    ck_assert_int_eq(leafd_next(cl, "demo", &first), LEAFD_OK);
    leafd_kill(pid);
    t0 = mono_ms();
    while ((rc = leafd_next(cl, "demo", &id)) == LEAFD_OK) {
        ck_assert_int_eq(id, first + 1 + n);
        n++;
    }
    /* Exactly the rest of the one range (no prefetch before 99%; the
     * prefetch at 99% fails: nothing more). */
    ck_assert_int_eq(n, 10000 - 1);
    ck_assert_int_eq(rc, LEAFD_EUNAVAILABLE);
    ck_assert_msg(strstr(leafd_last_error(), "no lease for demo") != NULL, "%s",
                  leafd_last_error());
    ck_assert(mono_ms() - t0 < 5000);
    /* Again: the dead server is skipped, the answer is at once. */
    t0 = mono_ms();
    ck_assert_int_eq(leafd_next(cl, "demo", &id), LEAFD_EUNAVAILABLE);
    ck_assert(mono_ms() - t0 < 1000);
    leafd_client_free(cl);
}
END_TEST

/* ---- a concealed tag: no leases ---- */

START_TEST(concealed_tag_refused)
{
    int port = free_port();
    char key[300], f1[340], url[64];
    pid_t pid;
    FILE *f;
    int64_t id;

    snprintf(key, sizeof key, "%s/conceal.key", workdir);
    f = fopen(key, "w");
    ck_assert(f != NULL);
    fputs("2b7e151628aed2a6abf7158809cf4f3c\n", f);
    fclose(f);
    ck_assert_int_eq(chmod(key, 0600), 0);
    snprintf(f1, sizeof f1, "--segment.conceal_key_file=%s", key);
    pid = leafd_start_with(port, "--segment.conceal=demo", f1);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    cl = leafd_client_new(url, NULL, NULL);
    ck_assert(cl != NULL);
    /* A lease of a concealed tag would show its counters: the server
     * refuses it (409 lease_concealed), and the client says so. */
    ck_assert_int_eq(leafd_next(cl, "demo", &id), LEAFD_EREFUSED);
    ck_assert_msg(strstr(leafd_last_error(), "lease_concealed") != NULL, "%s",
                  leafd_last_error());
    leafd_client_free(cl);
    leafd_kill(pid);
}
END_TEST

/* ---- fork ---- */

#define FORK_IDS 5000

/* The child's part: FORK_IDS IDs (leafd_next and leafd_next_n mixed) into
 * path, one int64 each. Exits 0 when it got them all. No check calls here. */
static void
fork_child(const char *path)
{
    FILE *f = fopen(path, "w");
    int64_t id, buf[10], n = 0;
    int rc = LEAFD_OK;

    if (f == NULL)
        _exit(3);
    while (n < FORK_IDS && rc == LEAFD_OK) {
        int64_t got = 0;

        if (n % 100 == 50) {
            rc = leafd_next_n(cl, "demo", 10, buf, &got);
        } else {
            rc = leafd_next(cl, "demo", &id);
            buf[0] = id;
            got = rc == LEAFD_OK;
        }
        fwrite(buf, sizeof *buf, (size_t)got, f);
        n += got;
    }
    if (rc != LEAFD_OK)
        fprintf(stderr, "check_client: fork child: %s after %lld IDs\n",
                leafd_last_error(), (long long)n);
    fclose(f);
    _exit(n == FORK_IDS ? 0 : 2);
}

START_TEST(fork_child_gets_fresh_ranges)
{
    int port = free_port();
    pid_t pid = leafd_start(port), child;
    /* timeout_ms: the child's lease request competes with the parent's
     * loaders for the cores (and with other tests on a busy machine). */
    struct leafd_client_options o = { .lease_min = 1000, .lease_max = 1000,
                                      .timeout_ms = 10000 };
    char url[64], path[320];
    int64_t id, buf[10], got, child_ids = 0, end = mono_ms() + 120000;
    pthread_t th[2];
    FILE *f;
    int status = 0;

    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    snprintf(path, sizeof path, "%s/child.ids", workdir);
    cl = leafd_client_new(url, &o, NULL);
    ck_assert(cl != NULL);
    seen_new(400000000);
    /* The forking thread holds a block, its tag a range (and maybe a
     * pending one), other threads take IDs all the while. */
    ck_assert_int_eq(leafd_next(cl, "demo", &id), LEAFD_OK);
    mark(id);
    ck_assert_int_eq(leafd_next_n(cl, "demo", 10, buf, &got), LEAFD_OK);
    for (int i = 0; i < 10; i++)
        mark(buf[i]);
    load_stop = 0;
    load_ids = load_errors = 0;
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, loader, NULL);
    usleep(100000);
    child = fork();
    ck_assert(child >= 0);
    if (child == 0)
        fork_child(path);
    for (int i = 0; i < FORK_IDS; i++) {
        ck_assert_msg(leafd_next(cl, "demo", &id) == LEAFD_OK, "%s", leafd_last_error());
        mark(id);
    }
    while (waitpid(child, &status, WNOHANG) == 0) {
        ck_assert_msg(mono_ms() < end, "the child did not finish");
        usleep(20000);
    }
    load_stop = 1;
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    f = fopen(path, "r");
    ck_assert(f != NULL);
    while (fread(&id, sizeof id, 1, f) == 1) {
        mark(id);
        child_ids++;
    }
    fclose(f);
    fprintf(stderr, "check_client: fork: the child took %lld IDs, the parent's "
            "threads %lld; %lld in both\n", (long long)child_ids,
            (long long)load_ids + FORK_IDS + 11, (long long)dups);
    ck_assert_int_eq(dups, 0);
    ck_assert_int_eq(outside, 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the child got %lld of %d IDs (status %d)", (long long)child_ids,
                  FORK_IDS, status);
    ck_assert_int_eq(child_ids, FORK_IDS);
    /* The parent goes on after the child is gone. */
    ck_assert_int_eq(leafd_next(cl, "demo", &id), LEAFD_OK);
    leafd_client_free(cl);
    leafd_kill(pid);
    free(seen);
}
END_TEST

START_TEST(bad_arguments_and_decode)
{
    struct leafd_snowflake sf;
    int64_t id;

    ck_assert(leafd_client_new("", NULL, NULL) == NULL);
    ck_assert(leafd_client_new("ftp://x", NULL, NULL) == NULL);
    cl = leafd_client_new("http://127.0.0.1:1", NULL, NULL);
    ck_assert(cl != NULL);
    ck_assert_int_eq(leafd_next(cl, "bad tag", &id), LEAFD_EINVAL);
    ck_assert_int_eq(leafd_next_n(cl, "demo", 0, &id, NULL), LEAFD_EINVAL);
    ck_assert_int_eq(leafd_next(cl, "demo", &id), LEAFD_EUNAVAILABLE);
    leafd_client_free(cl);
    /* Leaf's layout: (ms since 2010-11-04T01:42:54.657Z) << 22 | worker << 12 | seq */
    ck_assert_int_eq(leafd_snowflake_decode((UINT64_C(1000) << 22) | (5 << 12) | 7, &sf), 0);
    ck_assert_int_eq(sf.timestamp_ms, 1288834974657LL + 1000);
    ck_assert_int_eq(sf.worker_id, 5);
    ck_assert_int_eq(sf.sequence, 7);
    ck_assert_str_eq(sf.time, "2010-11-04T01:42:55.657Z");
}
END_TEST

/* ---- out of memory ---- */

START_TEST(out_of_memory_in_client_new)
{
    struct leafd_client *c = NULL;
    const char *err;
    long k;

    /* The fork handlers cannot be registered: this client fails, the next
     * call tries again (check runs each test in a process of its own, so
     * the library is not set up yet here). */
    err = NULL;
    fail_atfork = 1;
    c = leafd_client_new("http://127.0.0.1:1", NULL, &err);
    fail_atfork = 0;
    ck_assert(c == NULL);
    ck_assert_msg(err != NULL && strstr(err, "out of memory") != NULL, "%s", err);
    /* Each allocation of leafd_client_new fails in turn. */
    for (k = 0; c == NULL; k++) {
        ck_assert_msg(k < 100, "leafd_client_new never succeeded");
        err = NULL;
        alloc_budget = k;
        c = leafd_client_new("http://127.0.0.1:1,http://127.0.0.1:2/", NULL, &err);
        alloc_budget = -1;
        ck_assert_msg(c != NULL || (err != NULL && strstr(err, "out of memory") != NULL),
                      "allocation %ld failed: %s", k, err);
    }
    ck_assert_msg(k >= 4, "only %ld allocations failed in turn", k - 1);   /* c, 2 URLs */
    leafd_client_free(c);
    /* No thread, no libcurl handle. */
    err = NULL;
    fail_thread = 1;
    c = leafd_client_new("http://127.0.0.1:1", NULL, &err);
    fail_thread = 0;
    ck_assert(c == NULL);
    ck_assert_msg(err != NULL && strstr(err, "thread") != NULL, "%s", err);
    err = NULL;
    fail_curl = 1;
    c = leafd_client_new("http://127.0.0.1:1", NULL, &err);
    fail_curl = 0;
    ck_assert(c == NULL);
    ck_assert_msg(err != NULL && strstr(err, "libcurl") != NULL, "%s", err);
    c = leafd_client_new("http://127.0.0.1:1", NULL, &err);
    ck_assert(c != NULL);
    leafd_client_free(c);
}
END_TEST

START_TEST(out_of_memory_in_next)
{
    int port = free_port();
    pid_t pid = leafd_start(port);
    struct leafd_client_options o = { .lease_min = 1000, .lease_max = 1000 };
    struct leafd_client_stats st;
    static int64_t ids[4000];
    char url[64];
    int64_t got = 0, n;
    int rc;

    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    cl = leafd_client_new(url, &o, NULL);
    ck_assert(cl != NULL);
    /* A new tag cannot be made. */
    alloc_budget = 0;
    rc = leafd_next(cl, "demo", &ids[0]);
    alloc_budget = -1;
    ck_assert_int_eq(rc, LEAFD_ENOMEM);
    ck_assert_msg(strstr(leafd_last_error(), "out of memory") != NULL, "%s",
                  leafd_last_error());
    ck_assert_str_eq(leafd_strerror(LEAFD_ENOMEM), "out of memory");
    ck_assert_int_eq(leafd_next(cl, "demo", &ids[0]), LEAFD_OK);
    /* The background thread cannot hold the next lease: the caller gets
     * what the range held, then LEAFD_ENOMEM. */
    alloc_budget = 0;
    rc = leafd_next_n(cl, "demo", 2000, ids + 1, &got);
    alloc_budget = -1;
    ck_assert_msg(rc == LEAFD_ENOMEM, "%d: %s", rc, leafd_last_error());
    ck_assert_msg(strstr(leafd_last_error(), "out of memory") != NULL, "%s",
                  leafd_last_error());
    ck_assert_msg(got > 0 && got < 1000, "%lld IDs before the failure", (long long)got);
    /* Memory is back: the next call leases again (the server was not taken
     * for dead), and no ID came twice. */
    n = 1 + got;
    ck_assert_msg(leafd_next_n(cl, "demo", 2000, ids + n, NULL) == LEAFD_OK, "%s",
                  leafd_last_error());
    n += 2000;
    seen_new(100000000);
    for (int64_t i = 0; i < n; i++)
        mark(ids[i]);
    ck_assert_int_eq(dups, 0);
    ck_assert_int_eq(outside, 0);
    leafd_client_stats(cl, &st);
    ck_assert_int_eq(st.failovers, 0);
    leafd_client_free(cl);
    leafd_kill(pid);
    free(seen);
}
END_TEST

START_TEST(decode_allocates_nothing)
{
    struct leafd_snowflake sf;
    int bad_id, bad_layout, good;

    alloc_budget = 0;
    bad_id = leafd_snowflake_decode(UINT64_C(1) << 63, &sf);
    bad_layout = leafd_snowflake_decode_layout(1, 1288834974657LL, 41, 10, 11, &sf);
    good = leafd_snowflake_decode((UINT64_C(1000) << 22) | (5 << 12) | 7, &sf);
    alloc_budget = -1;
    ck_assert_int_eq(bad_id, -1);
    ck_assert_int_eq(bad_layout, -1);
    ck_assert_msg(strstr(leafd_last_error(), "63") != NULL, "%s", leafd_last_error());
    ck_assert_int_eq(good, 0);
    ck_assert_int_eq(sf.worker_id, 5);
    ck_assert_int_eq(sf.sequence, 7);
}
END_TEST

int
main(void)
{
    Suite *su = suite_create("client");
    TCase *tc = tcase_create("client");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, bad_arguments_and_decode);
    tcase_add_test(tc, out_of_memory_in_client_new);
    tcase_add_test(tc, decode_allocates_nothing);
    tcase_add_test(tc, out_of_memory_in_next);
    tcase_add_test(tc, all_down_serves_the_rest_then_fails);
    tcase_add_test(tc, fork_child_gets_fresh_ranges);
    tcase_add_test(tc, concealed_tag_refused);
    tcase_add_test(tc, failover_kill_and_restart);
    tcase_add_test(tc, eight_threads_no_duplicate);
    suite_add_tcase(su, tc);
    sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
