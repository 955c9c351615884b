/* dbclient.c: the database-per-ID baselines of make bench: every ID is a
 * round trip to MariaDB, from several connections at once.
 *
 *   build/dbclient -m alloc|seq -P PORT [-h HOST] [-u USER] [-D DB]
 *                  [-c CONNS] [-d SECONDS] [-t TAG] [-s SEQUENCE]
 *
 *   alloc  one transaction per ID, Leaf's own with step 1:
 *            UPDATE leaf_alloc SET max_id = max_id + 1 WHERE biz_tag = ?;
 *            SELECT max_id FROM leaf_alloc WHERE biz_tag = ?; COMMIT
 *          (the row must exist)
 *   seq    SELECT NEXTVAL(SEQUENCE), autocommit (the sequence must exist)
 *
 * Prepared statements, one connection per thread. Prints one line:
 *   RESULT <mode> conns=<n> ids=<n> seconds=<s> ids_per_sec=<x>
 *          p50_ms=<x> p99_ms=<x> errors=<n>
 * (latency is per ID, i.e. per transaction or per NEXTVAL).
 */
#include <inttypes.h>
#include <mysql.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *host = "127.0.0.1", *user = "root", *db = "leaf";
static const char *tag = "bench-perid", *seqname = "bench_seq";
static const char *mode = "alloc";
static unsigned port = 3306;
static int conns = 16;
static double seconds = 5;
static _Atomic int go, stop, ready;

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct worker {
    pthread_t th;
    uint64_t  ids, errors;
    float    *lat;                 /* ms per ID */
    size_t    nlat, cap;
    int       failed;
};

static void
add_lat(struct worker *w, double ms)
{
    if (w->nlat == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 65536;
        w->lat = realloc(w->lat, w->cap * sizeof *w->lat);
        if (w->lat == NULL)
            abort();
    }
    w->lat[w->nlat++] = (float)ms;
}

static MYSQL_STMT *
prepare(MYSQL *m, const char *sql)
{
    MYSQL_STMT *st = mysql_stmt_init(m);

    if (st == NULL || mysql_stmt_prepare(st, sql, strlen(sql)) != 0) {
        fprintf(stderr, "dbclient: prepare %s: %s\n", sql, mysql_error(m));
        return NULL;
    }
    return st;
}

/* Execute st; with out != NULL fetch one BIGINT into *out. */
static int
run(MYSQL_STMT *st, int64_t *out)
{
    MYSQL_BIND rb;
    int rc;

    if (mysql_stmt_execute(st) != 0)
        return -1;
    if (out == NULL)
        return 0;
    memset(&rb, 0, sizeof rb);
    rb.buffer_type = MYSQL_TYPE_LONGLONG;
    rb.buffer = out;
    if (mysql_stmt_bind_result(st, &rb) != 0)
        return -1;
    rc = mysql_stmt_fetch(st);
    while (mysql_stmt_fetch(st) == 0)
        ;
    mysql_stmt_free_result(st);
    return rc == 0 ? 0 : -1;
}

static void *
worker_main(void *arg)
{
    struct worker *w = arg;
    MYSQL *m = mysql_init(NULL);
    MYSQL_STMT *upd = NULL, *sel = NULL;
    MYSQL_BIND pb;
    unsigned long taglen = strlen(tag);
    char sql[256];
    int64_t id, prev = 0;
    int is_alloc = strcmp(mode, "alloc") == 0;

    if (mysql_real_connect(m, host, user, NULL, db, port, NULL, 0) == NULL) {
        fprintf(stderr, "dbclient: connect: %s\n", mysql_error(m));
        w->failed = 1;
        atomic_fetch_add(&ready, 1);
        return NULL;
    }
    memset(&pb, 0, sizeof pb);
    pb.buffer_type = MYSQL_TYPE_STRING;
    pb.buffer = (void *)tag;
    pb.buffer_length = taglen;
    pb.length = &taglen;
    if (is_alloc) {
        mysql_autocommit(m, 0);
        upd = prepare(m, "UPDATE leaf_alloc SET max_id = max_id + 1 WHERE biz_tag = ?");
        sel = prepare(m, "SELECT max_id FROM leaf_alloc WHERE biz_tag = ?");
        if (upd == NULL || sel == NULL || mysql_stmt_bind_param(upd, &pb) ||
            mysql_stmt_bind_param(sel, &pb))
            w->failed = 1;
    } else {
        snprintf(sql, sizeof sql, "SELECT NEXTVAL(%s)", seqname);
        sel = prepare(m, sql);
        if (sel == NULL)
            w->failed = 1;
    }
    atomic_fetch_add(&ready, 1);
    while (!atomic_load(&go))
        usleep(100);
    while (!w->failed && !atomic_load_explicit(&stop, memory_order_relaxed)) {
        double t0 = now_s();
        int rc;
        if (is_alloc) {
            rc = run(upd, NULL) || run(sel, &id) || mysql_commit(m);
            if (rc)
                mysql_rollback(m);
        } else {
            rc = run(sel, &id);
        }
        if (rc) {
            if (w->errors++ == 0)
                fprintf(stderr, "dbclient: %s\n", mysql_error(m));
            continue;
        }
        if (id <= prev)
            w->errors++;           /* a connection's IDs must increase */
        prev = id;
        w->ids++;
        add_lat(w, (now_s() - t0) * 1000);
    }
    if (upd)
        mysql_stmt_close(upd);
    if (sel)
        mysql_stmt_close(sel);
    mysql_close(m);
    return NULL;
}

static int
cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
    struct worker *ws;
    uint64_t ids = 0, errors = 0;
    size_t nlat = 0, k = 0;
    float *all;
    double t0, dt;
    int c, failed = 0;

    while ((c = getopt(argc, argv, "m:h:P:u:D:c:d:t:s:")) != -1) {
        switch (c) {
        case 'm': mode = optarg; break;
        case 'h': host = optarg; break;
        case 'P': port = (unsigned)atoi(optarg); break;
        case 'u': user = optarg; break;
        case 'D': db = optarg; break;
        case 'c': conns = atoi(optarg); break;
        case 'd': seconds = atof(optarg); break;
        case 't': tag = optarg; break;
        case 's': seqname = optarg; break;
        default:
            fprintf(stderr, "usage: %s -m alloc|seq -P PORT [-h HOST] [-u USER] "
                    "[-D DB] [-c CONNS] [-d SECONDS] [-t TAG] [-s SEQUENCE]\n", argv[0]);
            return 2;
        }
    }
    if ((strcmp(mode, "alloc") && strcmp(mode, "seq")) || conns < 1 || seconds <= 0) {
        fprintf(stderr, "dbclient: bad -m, -c or -d\n");
        return 2;
    }
    mysql_library_init(0, NULL, NULL);
    ws = calloc((size_t)conns, sizeof *ws);
    for (int i = 0; i < conns; i++)
        pthread_create(&ws[i].th, NULL, worker_main, &ws[i]);
    while (atomic_load(&ready) < conns)
        usleep(1000);
    t0 = now_s();
    atomic_store(&go, 1);
    usleep((useconds_t)(seconds * 1e6));
    atomic_store(&stop, 1);
    for (int i = 0; i < conns; i++) {
        pthread_join(ws[i].th, NULL);
        ids += ws[i].ids;
        errors += ws[i].errors;
        nlat += ws[i].nlat;
        failed |= ws[i].failed;
    }
    dt = now_s() - t0;
    all = malloc((nlat ? nlat : 1) * sizeof *all);
    for (int i = 0; i < conns; i++) {
        memcpy(all + k, ws[i].lat, ws[i].nlat * sizeof *all);
        k += ws[i].nlat;
        free(ws[i].lat);
    }
    qsort(all, nlat, sizeof *all, cmp_float);
    printf("RESULT %s conns=%d ids=%" PRIu64 " seconds=%.3f ids_per_sec=%.0f "
           "p50_ms=%.3f p99_ms=%.3f errors=%" PRIu64 "\n", mode, conns, ids, dt,
           ids / dt, nlat ? all[nlat / 2] : 0.0, nlat ? all[nlat * 99 / 100] : 0.0,
           errors);
    free(all);
    free(ws);
    mysql_library_end();
    return failed || ids == 0 ? 1 : 0;
}
